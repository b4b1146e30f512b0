"""Access per document, the acceptance matrix (issue 41): every surface on every backend.

A store ``hb`` shared read with everyone holds 12 ordinary files and one file readable by group
``hr`` only, ``a-salaries.md``, which is the best match for :data:`QUERY` in every search mode (so a
filter applied after ranking would return fewer than ``k`` hits). Admin ``root`` owns it; ``ana`` is in
``hr``, ``bob`` is not, and ``wendy`` (not in ``hr``) may write to it. On the memory backend, pgvector
(the session's embedded PostgreSQL) and Qdrant's local mode, for bob: searches in every mode return
``k`` readable hits; the chat's search tool, a chat answer (the offline assistant and a scripted model
over the OpenAI protocol), the viewer link, the file and store lists and counts, an export, an
evaluation run, a chunk trial and the answer check never show the file; its id gives the words of an
id nobody has. Ana sees it everywhere, until she leaves the group: her next request hides it. Then
what must survive: a new version of the file keeps its readers, a store written before access per
document is back-filled by its first restriction (nothing becomes invisible), and an owner's export
imported elsewhere keeps the readers.
"""

from __future__ import annotations

import json
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from knowledge import evaluation as ev
from knowledge.chat import Chats
from knowledge.chat.answer_check import check_answers
from knowledge.config import Settings, load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import FileNotFoundInStore, KnowledgeError
from knowledge.pagemodels import viewer as vm
from knowledge.system import System
from knowledge.tools.knowledge import KnowledgeTools
from knowledge.vectorstore.store import EVERYONE
from knowledge.workbench import Workbench
from tests.helpers import pg
from tests.helpers.chat import ChatCompletionsServer, tool_call

PW = "correct horse battery"
STORE = "hb"
QUERY = "salary bands payroll review"
K = 5
HR_NAME = "a-salaries.md"  # first by name: the chat's store brief (5 names) would show it
SECRET = "quokkasecret"  # a word only the HR file holds
HR_TEXT = (
    "# Salary bands\n\nSalary bands payroll review: the payroll review sets the salary bands."
    f" Salary bands payroll review {SECRET}.\n"
)
ORDINARY = {
    f"page-{i:02d}.md": f"# Handbook page {i}\n\nThe salary is paid monthly; holidays are {20 + i} days;"
    f" the topic of page {i} is {word}.\n"
    for i, word in enumerate(
        ["lamps", "bread", "ships", "tides", "maps", "owls", "bees", "kites", "clocks", "ferns", "rivers", "stones"]
    )
}
MODES = ("vector", "lexical", "hybrid")
BACKENDS = ["memory", "pgvector", "qdrant"]


def _embedder(model: str) -> HashEmbedder:
    return HashEmbedder(dimension=64, max_tokens=256)


@pytest.fixture(params=BACKENDS)
def backend_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Settings whose default template is on the backend under test (pgvector: this test's database)."""
    if request.param == "pgvector":
        s = request.getfixturevalue("pgvector_settings")()
        return s.model_copy(update={"vector_store": s.vector_store.model_copy(update={"backend": "pgvector"})})
    return load_settings(data_dir=tmp_path / "data", vector_store={"backend": request.param})


@dataclass
class World:
    system: System
    hr_id: str

    def wb(self, who: str) -> Workbench:
        """A new workbench of ``who`` (a new request: the actor's groups read now)."""
        return Workbench(self.system).as_user(self.system.people.accounts.actor(who))

    @property
    def root(self) -> Workbench:
        return self.wb("root")


def _build(settings: Settings, hr_text: bytes = HR_TEXT.encode()) -> World:
    system = System(settings, _embedder)
    people = system.people
    people.set_up_admin("root", PW)
    for name in ("ana", "bob", "wendy"):
        people.accounts.create(name, PW)
    people.accounts.create_group("hr")
    people.accounts.add_to_group("hr", "ana")
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store(STORE)
    root.share_store(STORE, "everyone", "", "read")
    root.share_store(STORE, "user", "wendy", "write")
    for name, text in ORDINARY.items():
        assert root.ingest_file(STORE, text.encode(), name).ok
    hr = root.ingest_file(STORE, hr_text, HR_NAME)
    assert hr.ok and hr.file_id
    assert root.set_file_readers(STORE, hr.file_id, "group:hr") == ("group:hr",)
    return World(system, hr.file_id)


@pytest.fixture
def world(backend_settings: Settings) -> World:
    w = _build(backend_settings)
    assert w.system.stores.get(STORE).backend == backend_settings.vector_store.backend
    yield w
    w.system.close()


def _random_id() -> str:
    return "file-" + uuid.uuid4().hex


def _words(call: Callable[[], object]) -> str:
    """What ``call`` says when it fails (``KnowledgeError``), else ``"ok: <its result>"``."""
    try:
        return f"ok: {call()!r}"
    except KnowledgeError as exc:
        return f"{type(exc).__name__}: {exc}"


def _same_words(world: World, wb: Workbench, call: Callable[[str], object]) -> None:
    """``call(hidden id)`` answers as ``call(an id nobody has)`` does, with the id swapped."""
    other = _random_id()
    assert _words(lambda: call(world.hr_id)).replace(world.hr_id, "<id>") == _words(lambda: call(other)).replace(
        other, "<id>"
    )


def _names(hits) -> list[str | None]:
    return [h.file_name for h in hits]


# -- search ----------------------------------------------------------------------------------------
def test_searches_return_k_readable_hits_to_bob_and_the_file_first_to_ana_and_the_owner(world):
    bob, ana, root = world.wb("bob"), world.wb("ana"), world.root
    for mode in MODES:
        for who in (ana, root):
            assert _names(who.search(STORE, QUERY, K, mode=mode))[0] == HR_NAME, (mode, who.actor.username)
        hits = bob.search(STORE, QUERY, K, mode=mode)
        assert len(hits) == K and HR_NAME not in _names(hits) and world.hr_id not in {h.file_id for h in hits}, mode
        # a filter of the caller's own is kept, and cannot widen what bob reads
        assert bob.search(STORE, QUERY, K, mode=mode, where={"file_id": world.hr_id}) == []
        assert HR_NAME not in _names(bob.search(STORE, QUERY, K, mode=mode, where={"readers": "group:hr"}))
        # the ranking behind the search, and the search playground's whole result
        vector = bob.embedder(bob.store_record(STORE).embedding_model).embed_query(QUERY)
        ranked, _ = bob.rank(STORE, QUERY, vector, 20, mode=mode)
        assert len(ranked) == len(ORDINARY) and HR_NAME not in _names(ranked)
    from knowledge.service.search import SearchRequest

    result = bob.search_result(STORE, SearchRequest(QUERY, K, mode="hybrid"))
    assert len(result.hits) == K and HR_NAME not in _names(result.hits)


def test_the_store_map_of_bob_is_a_filtered_read_only_view(world):
    bob, ana = world.wb("bob"), world.wb("ana")
    vs = bob.vector_store(STORE)
    assert world.hr_id not in {f.file_id for f in vs.list_files()} and len(vs.list_files()) == len(ORDINARY)
    assert vs.count() == len(ORDINARY) and vs.collection.info().count == len(ORDINARY)
    assert world.hr_id not in {str(k) for k in vs.collection.facet("file_id")}
    assert all(p.payload["file_id"] != world.hr_id for p in vs.collection.scroll())
    ids = [p.id for p in ana.vector_store(STORE).collection.scroll(where={"file_id": world.hr_id})]
    assert ids and vs.collection.retrieve(ids) == []
    assert len(ana.vector_store(STORE).collection.retrieve(ids)) == len(ids)


# -- the chat -----------------------------------------------------------------------------------------
def test_the_chat_tool_and_a_chat_answer_never_cite_the_file_for_bob(world):
    bob = world.wb("bob")
    tools = KnowledgeTools(bob)
    found = tools.search_stores([STORE], QUERY, K)
    assert len(found.data["hits"]) == K and world.hr_id not in {h["file_id"] for h in found.data["hits"]}
    assert SECRET not in found.text and HR_NAME not in found.text
    assert not tools.vector_search(STORE, QUERY, K, file_id=world.hr_id).data.get("hits")
    # the tool's answer for the hidden id is the one for an id nobody has
    hidden = tools.call("vector_search", {"store": STORE, "query": QUERY, "file_id": world.hr_id}).text
    other = _random_id()
    assert hidden == tools.call("vector_search", {"store": STORE, "query": QUERY, "file_id": other}).text

    chats = Chats(world.system)
    chat = chats.service(bob)
    s = chat.create_session(stores=[STORE])
    system_prompt = chat.request(s.id).messages[0]["content"]
    assert HR_NAME not in system_prompt and f"{STORE} ({len(ORDINARY)} files" in system_prompt
    reply = chat.send(s.id, QUERY)  # the offline assistant
    seen = reply.citations + reply.also_searched
    assert seen and all(c["file_id"] != world.hr_id for c in seen)
    assert SECRET not in reply.text and HR_NAME not in reply.text

    # a configured model, searching first and then through its tool: nothing of the file reaches it
    script = [
        lambda req: tool_call("vector_search", {"query": QUERY, "k": K}),
        lambda req: {"content": "The bands are set by the review [1]."},
    ]
    with ChatCompletionsServer(script) as server:
        chats.service(world.root).configs.save(
            {"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": server.base_url}
        )
        s2 = chat.create_session(config="local", stores=[STORE])
        reply = chat.send(s2.id, QUERY)
    sent = json.dumps(server.requests)
    assert len(server.requests) == 2 and f"[{K}]" in server.requests[1]["messages"][-1]["content"]
    assert SECRET not in sent and HR_NAME not in sent and world.hr_id not in sent
    assert reply.citations and all(c["file_id"] != world.hr_id for c in reply.citations + reply.also_searched)


def test_ana_is_cited_the_file_by_the_chat(world):
    chat = Chats(world.system).service(world.wb("ana"))
    s = chat.create_session(stores=[STORE])
    assert HR_NAME in chat.request(s.id).messages[0]["content"]
    reply = chat.send(s.id, QUERY)
    assert world.hr_id in {c["file_id"] for c in reply.citations + reply.also_searched}


def test_the_answer_check_gets_no_passage_of_the_file_for_bob(world):
    qset = ev.QuestionSet("hr", (ev.Question(QUERY + "?", (ev.Criterion(HR_NAME),), (SECRET,)),))
    chats = Chats(world.system)
    bob_check = check_answers(chats.service(world.wb("bob")), STORE, qset)
    [result] = bob_check.results
    assert result.cited != HR_NAME and not result.answer_holds
    ana_check = check_answers(chats.service(world.wb("ana")), STORE, qset)
    assert ana_check.results[0].cited == HR_NAME and ana_check.results[0].answer_holds

    def passages(req: dict) -> dict:
        return {"content": "I read them [1]."}

    with ChatCompletionsServer([passages]) as server:
        chats.service(world.root).configs.save(
            {
                "name": "local",
                "type": "CHAT",
                "provider": "openai",
                "model": "m",
                "base_url": server.base_url,
                "search_first": True,
            }
        )
        check = check_answers(chats.service(world.wb("bob")), STORE, qset, "local")
    sent = json.dumps(server.requests)
    assert len(server.requests) == 1 and "[1]" in sent
    assert SECRET not in sent and HR_NAME not in sent and not check.results[0].answer_holds


# -- the viewer, files, counts ------------------------------------------------------------------------
def test_the_viewer_link_and_the_file_store_say_not_found_as_for_a_missing_id(world):
    bob, ana = world.wb("bob"), world.wb("ana")

    def viewer(file_id: str) -> object:
        target = vm.parse_viewer_query({"store": STORE, "file": file_id})
        stored = vm.find_file(bob, target)
        return vm.file_bytes(bob, stored.id)

    assert "not in the store 'hb'" in _words(lambda: viewer(world.hr_id))
    _same_words(world, bob, viewer)
    for call in (
        bob.read_file,
        bob.stored_file,
        bob.find_stored_file,
        bob.stores_using_file,
        lambda fid: bob.file_record(STORE, fid),
        lambda fid: bob.file_readers(STORE, fid),
        lambda fid: bob.file_attributes(STORE, fid),
        lambda fid: bob.file_names_of(STORE, fid),
    ):
        _same_words(world, bob, call)
    with pytest.raises(FileNotFoundInStore):
        bob.read_file(world.hr_id)
    # ana opens it
    target = vm.parse_viewer_query({"store": STORE, "file": world.hr_id})
    assert vm.file_bytes(ana, vm.find_file(ana, target).id) == HR_TEXT.encode()
    assert ana.stores_using_file(world.hr_id) == [STORE] and ana.file_readers(STORE, world.hr_id) == ("group:hr",)


def test_a_writer_who_may_not_read_the_file_gets_the_words_of_a_missing_id(world):
    wendy = world.wb("wendy")
    for call in (
        lambda fid: wendy.delete_file(STORE, fid),
        lambda fid: wendy.delete_name(STORE, fid, HR_NAME),
        lambda fid: wendy.set_file_attributes(STORE, fid, {"team": "hr"}),
        lambda fid: wendy.set_file_readers(STORE, fid, "everyone"),
        lambda fid: wendy.retry_file(STORE, fid),
        lambda fid: wendy.file_attributes(STORE, fid),
        lambda fid: wendy.file_names_of(STORE, fid),
    ):
        _same_words(world, wendy, call)
    tools = KnowledgeTools(wendy)
    other = _random_id()
    hidden = tools.call("vector_delete_file", {"store": STORE, "file_id": world.hr_id}).text
    assert hidden.replace(world.hr_id, "<id>") == tools.call(
        "vector_delete_file", {"store": STORE, "file_id": other}
    ).text.replace(other, "<id>")
    # the knowledge tools' vector_upsert (Workbench.index_text) may not write over it either
    refused = tools.call("vector_upsert", {"store": STORE, "file_id": world.hr_id, "text": "wendy was here"})
    assert not refused.ok and "is taken in store 'hb'" in refused.text
    ana = world.wb("ana")
    assert ana.file_record(STORE, world.hr_id) is not None  # nothing of it was changed
    assert ana.file_readers(STORE, world.hr_id) == ("group:hr",) and ana.file_attributes(STORE, world.hr_id) == {}
    assert _names(ana.search(STORE, QUERY, 1)) == [HR_NAME] and SECRET in ana.search(STORE, QUERY, 1)[0].text


def test_file_lists_and_counts_leave_the_file_out_for_bob(world):
    bob, ana, root = world.wb("bob"), world.wb("ana"), world.root
    chunks = {f.file_id: f.chunks for f in root.store_files(STORE)}
    everything = sum(chunks.values())
    for who, files in ((bob, len(ORDINARY)), (ana, len(ORDINARY) + 1), (root, len(ORDINARY) + 1)):
        sees = (world.hr_id in {f.file_id for f in who.store_files(STORE)}, len(who.store_files(STORE)))
        assert sees == (files > len(ORDINARY), files), who.actor.username
        assert len(who.file_records(STORE)) == files
        assert (world.hr_id in {n.file_id for n in who.file_names_of(STORE)}) == (files > len(ORDINARY))
        [summary] = [s for s in who.list_stores() if s.record.name == STORE]
        hidden_chunks = 0 if files > len(ORDINARY) else chunks[world.hr_id]
        assert (summary.files, summary.chunks) == (files, everything - hidden_chunks), who.actor.username
        listed = {u.file.id for u in who.list_files()}
        assert (world.hr_id in listed) == (files > len(ORDINARY)) and len(listed & set(chunks)) == files
    [summary] = [s for s in bob.list_stores() if s.record.name == STORE]
    assert summary.disk_bytes is None  # the size on disk would tell of the hidden file


# -- export, evaluation ------------------------------------------------------------------------------
def _bundle_bytes(path: Path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        return b"".join(zf.read(n) for n in zf.namelist())


def test_bobs_export_lacks_the_file_and_anas_has_it(world, tmp_path):
    bob, ana = world.wb("bob"), world.wb("ana")
    out = tmp_path / "bob.zip"
    result = bob.portable.export_store(STORE, out)
    data = _bundle_bytes(out)
    assert SECRET.encode() not in data and HR_NAME.encode() not in data and world.hr_id.encode() not in data
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert len(manifest["files"]) == len(ORDINARY) and result.skipped == []
    assert manifest["chunks"] == sum(f.chunks for f in bob.store_files(STORE))
    ana.portable.export_store(STORE, tmp_path / "ana.zip")
    assert SECRET.encode() in _bundle_bytes(tmp_path / "ana.zip")


def test_an_evaluation_never_ranks_the_file_for_bob(world):
    bob, ana = world.wb("bob"), world.wb("ana")
    qset = ev.QuestionSet("hr", (ev.Question(QUERY, (ev.Criterion(HR_NAME),)),))
    for mode in MODES:
        run = bob.evaluations.evaluate(STORE, qset, mode, K)
        [q] = run.questions
        assert q.first_rank is None and len(q.hits) == K and HR_NAME not in {h.file_name for h in q.hits}, mode
        assert ana.evaluations.evaluate(STORE, qset, mode, K).questions[0].first_rank == 1, mode
    for run in bob.evaluations.sweep_fusion_weight(STORE, qset, (0.0, 1.0), K):
        assert run.questions[0].first_rank is None and HR_NAME not in {h.file_name for h in run.questions[0].hits}
    [trial] = bob.evaluations.try_chunkings(STORE, qset, [(64, 8)], ("vector",), K)
    assert trial.runs[0].questions[0].first_rank is None
    assert HR_NAME not in {h.file_name for h in trial.runs[0].questions[0].hits}
    assert trial.chunks == sum(f.chunks for f in bob.store_files(STORE))


# -- leaving the group, a new version ---------------------------------------------------------------
def test_ana_leaving_hr_loses_the_file_at_her_next_request(world):
    accounts = world.system.people.accounts
    token = accounts.start_session("ana")
    before = Workbench(world.system).as_user(accounts.session_actor(token))
    assert _names(before.search(STORE, QUERY, K))[0] == HR_NAME
    accounts.remove_from_group("hr", "ana")
    after = Workbench(world.system).as_user(accounts.session_actor(token))  # the app's and the API's next request
    for mode in MODES:
        hits = after.search(STORE, QUERY, K, mode=mode)
        assert len(hits) == K and HR_NAME not in _names(hits)
    assert after.file_record(STORE, world.hr_id) is None and len(after.store_files(STORE)) == len(ORDINARY)
    with pytest.raises(FileNotFoundInStore):
        after.read_file(world.hr_id)
    accounts.add_to_group("hr", "ana")
    assert _names(world.wb("ana").search(STORE, QUERY, K))[0] == HR_NAME


def test_a_new_version_under_the_same_name_keeps_its_readers(world):
    root = world.root
    new = root.ingest_file(STORE, (HR_TEXT + "\nThe review is yearly.\n").encode(), HR_NAME)
    assert new.ok and new.file_id != world.hr_id
    assert root.file_readers(STORE, new.file_id) == ("group:hr",)
    assert world.hr_id not in {f.file_id for f in root.store_files(STORE)}  # the old version went
    coll = world.system.stores.collection_of(world.system.stores.get(STORE))
    payloads = [p.payload for p in coll.scroll(where={"file_id": new.file_id})]
    assert payloads and all(p["readers"] == ["group:hr"] for p in payloads)
    bob, ana = world.wb("bob"), world.wb("ana")
    for mode in MODES:
        hits = bob.search(STORE, QUERY, K, mode=mode)
        assert len(hits) == K and HR_NAME not in _names(hits), mode
        assert _names(ana.search(STORE, QUERY, K, mode=mode))[0] == HR_NAME, mode
    assert bob.file_record(STORE, new.file_id) is None and len(bob.store_files(STORE)) == len(ORDINARY)


# -- the audit trail ----------------------------------------------------------------------------------
def test_bobs_audit_trail_of_the_store_does_not_name_the_file(world):
    def tells(events) -> bool:
        return any(HR_NAME in repr(e) or world.hr_id in repr(e) for e in events)

    bob, ana, root = world.wb("bob"), world.wb("ana"), world.root
    assert not tells(bob.audit_events()) and not tells(bob.audit_events(store=STORE))
    assert bob.audit_events(store=STORE)  # the store's other events are there
    assert {e.action for e in bob.audit_events(store=STORE)} >= {"store.create", "file.ingest"}
    assert tells(ana.audit_events(store=STORE)) and tells(root.audit_events(action="file.readers"))
    # deleted, the file's restriction is still not bob's to read
    root.delete_file(STORE, world.hr_id)
    assert not tells(bob.audit_events(action="file.readers")) and tells(ana.audit_events(action="file.readers"))


# -- batches ----------------------------------------------------------------------------------------
def test_a_batch_with_a_file_bob_may_not_read_is_not_shown_to_him(world):
    root = world.root
    public = root.submit_batch(STORE, [("page-98.md", b"# Extra\n\nThe salary review is in May.\n")])
    assert public.wait(60) and [r.ok for r in public.results] == [True]
    assert world.wb("bob").shown_job(STORE) is public  # another person's batch of readable files
    # a new version of the HR file in a batch: it keeps its readers, so its name and id are not bob's to see
    job = root.submit_batch(STORE, [(HR_NAME, (HR_TEXT + "\nv2\n").encode()), ("page-99.md", b"# More\n\nMore.\n")])
    assert job.wait(60) and [r.ok for r in job.results] == [True, True]
    [new] = [r.file_id for r in job.results if r.name == HR_NAME]
    assert root.file_readers(STORE, new) == ("group:hr",)
    for who in ("bob", "wendy"):
        assert world.wb(who).shown_job(STORE) is None, who
    assert world.wb("ana").shown_job(STORE) is job and root.shown_job(STORE) is job


# -- a store from before access per document ------------------------------------------------------
def test_a_legacy_store_is_back_filled_by_its_first_restriction_and_hides_nothing_else(backend_settings):
    system = System(backend_settings, _embedder)
    try:
        people = system.people
        people.set_up_admin("root", PW)
        for name in ("ana", "bob"):
            people.accounts.create(name, PW)
        people.accounts.create_group("hr")
        people.accounts.add_to_group("hr", "ana")
        root = Workbench(system).as_user(people.accounts.actor("root"))
        root.create_store("old")
        root.share_store("old", "everyone", "", "read")
        for name, text in ORDINARY.items():
            assert root.ingest_file("old", text.encode(), name).ok
        hr = root.ingest_file("old", HR_TEXT.encode(), HR_NAME)
        coll = system.stores.collection_of(system.stores.get("old"))
        for fid in {str(f) for f in coll.facet("file_id")}:  # the chunks as an older version wrote them
            points = list(coll.scroll(where={"file_id": fid}, with_vectors=True))
            for p in points:
                p.payload = {k: v for k, v in p.payload.items() if k != "readers"}
            coll.replace({"file_id": fid}, points)
        system.stores.changed("old")
        assert not any("readers" in p.payload for p in coll.scroll())
        assert not system.catalog.filters_readers("old")
        bob = Workbench(system).as_user(people.accounts.actor("bob"))
        assert len(bob.search("old", QUERY, K)) == K  # no filter yet: everything is the store's

        root.set_file_readers("old", hr.file_id, ["group:hr"])
        assert system.catalog.filters_readers("old")
        payloads = [p.payload for p in coll.scroll()]
        assert len({p["file_id"] for p in payloads}) == len(ORDINARY) + 1
        assert all(p.get("readers") == (["group:hr"] if p["file_id"] == hr.file_id else [EVERYONE]) for p in payloads)
        ana = Workbench(system).as_user(people.accounts.actor("ana"))
        bob = Workbench(system).as_user(people.accounts.actor("bob"))
        for mode in MODES:
            hits = bob.search("old", QUERY, K, mode=mode)
            assert len(hits) == K and HR_NAME not in _names(hits), mode
            assert _names(ana.search("old", QUERY, K, mode=mode))[0] == HR_NAME, mode
            assert _names(root.search("old", QUERY, K, mode=mode))[0] == HR_NAME, mode
        assert len(bob.store_files("old")) == len(ORDINARY) and bob.vector_store("old").count() == len(ORDINARY)
        assert len(ana.store_files("old")) == len(ORDINARY) + 1
        assert root.vector_store("old").count() == len(ORDINARY) + 1
        # restricting it back to everyone: bob reads it again
        root.set_file_readers("old", hr.file_id, "everyone")
        assert _names(bob.search("old", QUERY, K))[0] == HR_NAME
    finally:
        system.close()


# -- export by an owner, import ------------------------------------------------------------------------
def test_an_owners_export_imported_keeps_the_readers(world, tmp_path):
    root = world.root
    out = tmp_path / "hb.zip"
    root.portable.export_store(STORE, out)
    with zipfile.ZipFile(out) as zf:
        manifest = json.loads(zf.read("manifest.json"))
    [entry] = [e for e in manifest["files"] if e["name"] == HR_NAME]
    assert entry["readers"] == ["group:hr"]
    assert {e["readers"] for e in manifest["files"] if e["name"] != HR_NAME} == {None}
    root.portable.import_bundle(out, as_name="hb2")
    root.share_store("hb2", "everyone", "", "read")
    [imported] = [f.file_id for f in root.store_files("hb2") if f.file_name == HR_NAME]
    assert root.file_readers("hb2", imported) == ("group:hr",) and world.system.catalog.filters_readers("hb2")
    bob, ana = world.wb("bob"), world.wb("ana")
    for mode in MODES:
        hits = bob.search("hb2", QUERY, K, mode=mode)
        assert len(hits) == K and HR_NAME not in _names(hits), mode
        assert _names(ana.search("hb2", QUERY, K, mode=mode))[0] == HR_NAME, mode
    assert len(bob.store_files("hb2")) == len(ORDINARY) and bob.file_record("hb2", imported) is None
    assert ana.file_record("hb2", imported) is not None


def test_a_backup_restored_keeps_the_readers(world, backend_settings, tmp_path):
    from knowledge.portable.backup import restore

    out = tmp_path / "backup.zip"
    world.root.portable.backup(out)
    world.system.close()
    here = backend_settings.model_copy(update={"data_dir": tmp_path / "restored"})
    result = restore(here, out)
    system = System(here, _embedder)
    try:
        again = World(system, world.hr_id)
        assert again.root.portable.import_restored(result).failed == {}
        [hr] = [f.file_id for f in again.root.store_files(STORE) if f.file_name == HR_NAME]  # bundled: a new id
        assert again.root.file_readers(STORE, hr) == ("group:hr",) and system.catalog.filters_readers(STORE)
        for mode in MODES:
            hits = again.wb("bob").search(STORE, QUERY, K, mode=mode)
            assert len(hits) == K and HR_NAME not in _names(hits), mode
            assert _names(again.wb("ana").search(STORE, QUERY, K, mode=mode))[0] == HR_NAME, mode
    finally:
        system.close()


# -- left to decide (issue 41): what a writer who may not read a file may do with its name or bytes ------
@pytest.fixture
def memory_world(settings: Settings) -> World:
    w = _build(settings)
    yield w
    w.system.close()


def test_a_writers_upload_of_the_same_bytes_tells_nothing_of_the_file(memory_world):
    r = memory_world.wb("wendy").ingest_file(STORE, HR_TEXT.encode(), "copy.md")
    assert HR_NAME not in r.message and r.file_id != memory_world.hr_id


def test_a_writers_upload_under_the_name_of_the_file_leaves_it_alone(memory_world):
    r = memory_world.wb("wendy").ingest_file(STORE, b"# Salary bands\n\nNothing to see.\n", HR_NAME)
    assert "Replaced" not in r.message
    assert SECRET in memory_world.wb("ana").search(STORE, QUERY, 1)[0].text


@pytest.mark.xfail(
    strict=True,
    reason="issue 41, open: BM25's document count and frequencies are the whole store's (hidden chunks"
    " included; on Qdrant the whole physical collection's), so a reader's keyword scores depend on what the"
    " files they may not read say",
)
def test_bobs_keyword_scores_do_not_depend_on_what_the_hidden_file_says(world, backend_settings, tmp_path):
    """A second system made as the first, its HR-only file saying none of the query's words: bob's
    keyword scores of the same readable files must be the same in both."""
    if backend_settings.vector_store.backend == "memory":
        pytest.skip(
            "the memory backend's BM25 (tantivy) gave two stores written alike different keyword scores"
            " here, so the comparison says nothing on it"
        )
    other = load_settings(data_dir=tmp_path / "other", vector_store={"backend": backend_settings.vector_store.backend})
    if other.vector_store.backend == "pgvector":  # a database of its own (dropped with this test's)
        other = pg.pgvector_settings(other)
    twin = _build(other, b"# Owls\n\nOwls hunt mice at night in the old barn near the river bank and sleep.\n")
    try:

        def scores(w: World) -> dict[str | None, float | None]:
            hits = w.wb("bob").search(STORE, QUERY, len(ORDINARY), mode="lexical")
            assert len(hits) == len(ORDINARY)
            return {h.file_name: None if h.lexical_score is None else round(h.lexical_score, 6) for h in hits}

        assert scores(world) == scores(twin)
    finally:
        twin.system.close()
