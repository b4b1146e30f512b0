"""Access per document (issue 41) on the surfaces that keep what was done: the audit trail and saved
evaluation runs. A member who may not read a file of a store they use sees no audit event about it
(its id, its name, its name in a batch's list) and no saved run that ranked or cited it; the store's
owner and the file's readers see them all. Bundles keep readers as written, "everyone" included."""

from __future__ import annotations

import json
import zipfile

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import PermissionDenied
from knowledge.evaluation.questions import Criterion, Question
from knowledge.evaluation.runs import RunNotFound
from knowledge.system import System
from knowledge.workbench import Workbench

PW = "correct horse battery"


@pytest.fixture
def team(settings):
    system = System(settings, lambda m: HashEmbedder(dimension=32, max_tokens=64))
    people = system.people
    people.set_up_admin("root", PW)
    for name in ("ana", "bob"):
        people.accounts.create(name, PW)
    people.accounts.create_group("hr")
    people.accounts.add_to_group("hr", "ana")
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store("handbook")
    root.share_store("handbook", "everyone", "", "read")
    yield system, root
    system.close()


def _as(system: System, username: str) -> Workbench:
    return Workbench(system).as_user(system.people.accounts.actor(username))


def test_a_member_reads_no_audit_event_about_a_file_they_may_not_read(team):
    system, root = team
    job = root.submit_batch("handbook", [("salaries.txt", b"salaries of the staff"), ("holidays.txt", b"holiday rules")])
    job.wait(timeout=60)
    salaries = next(f for f in root.store_files("handbook") if f.file_name == "salaries.txt")
    root.set_file_readers("handbook", salaries.file_id, "group:hr")
    root.set_file_attributes("handbook", salaries.file_id, {"owner": "hr"})

    def seen(username: str) -> list[tuple]:
        return [(e.action, e.target, e.detail.get("files")) for e in _as(system, username).audit_events(store="handbook")]

    bob = seen("bob")
    assert ("file.readers", salaries.file_id, None) not in bob
    assert ("file.attributes", salaries.file_id, None) not in bob
    assert ("file.ingest", None, ["holidays.txt"]) in bob  # the batch's event, without the hidden name
    assert not any("salaries.txt" in json.dumps(e.detail) for e in _as(system, "bob").audit_events())
    for username in ("ana", "root"):
        mine = seen(username)
        assert ("file.readers", salaries.file_id, None) in mine
        assert ("file.ingest", None, ["salaries.txt", "holidays.txt"]) in mine
    readers_event = next(e for e in root.audit_events(action="file.readers"))
    assert readers_event.detail["before"] is None and readers_event.detail["after"] == ["group:hr"]


def test_a_saved_run_that_ranked_a_hidden_file_is_not_shown_to_a_member_who_may_not_read_it(team):
    system, root = team
    root.ingest_file("handbook", b"salaries salaries: the pay of every person", "salaries.txt")
    for i in range(3):
        root.ingest_file("handbook", f"holiday rule {i}: days off in summer".encode(), f"rule{i}.txt")
    salaries = next(f for f in root.store_files("handbook") if f.file_name == "salaries.txt")
    root.set_file_readers("handbook", salaries.file_id, ["group:hr"])
    qset = root.evaluations.save_set("pay", [Question("salaries pay", (Criterion("salaries.txt"),))])

    ana, bob = _as(system, "ana"), _as(system, "bob")
    by_ana = ana.evaluations.save_run(ana.evaluations.evaluate("handbook", qset, "lexical", k=3))
    assert by_ana.questions[0].first_rank == 1  # she reads it: ranked first
    by_bob = bob.evaluations.save_run(bob.evaluations.evaluate("handbook", qset, "lexical", k=3))
    assert by_bob.questions[0].first_rank is None
    assert all(h.file_name != "salaries.txt" for h in by_bob.questions[0].hits)

    assert {r.id for r in bob.evaluations.runs("pay")} == {by_bob.id}
    with pytest.raises(RunNotFound) as hidden:
        bob.evaluations.get_run(by_ana.id)
    with pytest.raises(RunNotFound) as missing:
        bob.evaluations.get_run("0123456789ab")
    assert str(hidden.value).replace(by_ana.id, "?") == str(missing.value).replace("0123456789ab", "?")
    assert {r.id for r in ana.evaluations.runs("pay")} == {by_ana.id, by_bob.id}
    assert root.evaluations.get_run(by_ana.id).id == by_ana.id


def test_a_bundle_keeps_readers_as_written_and_everyone_means_the_stores_sharing(team, tmp_path):
    system, root = team
    root.ingest_file("handbook", b"salaries of the staff", "salaries.txt")
    root.ingest_file("handbook", b"holiday rules for all", "holidays.txt")
    files = {f.file_name: f.file_id for f in root.store_files("handbook")}
    root.set_file_readers("handbook", files["salaries.txt"], "group:hr, user:bob")
    bundle = tmp_path / "handbook.zip"
    root.portable.export_store("handbook", bundle)
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        entries = {e["name"]: e["readers"] for e in manifest["files"]}
    assert entries == {"salaries.txt": ["group:hr", "user:bob"], "holidays.txt": None}

    # an owner's import keeps them (a bundle written by hand may say "everyone")
    manifest["files"] = [
        {**e, "readers": ["everyone"] if e["name"] == "holidays.txt" else e["readers"]} for e in manifest["files"]
    ]
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(bundle) as src, zipfile.ZipFile(edited, "w") as dst:
        for item in src.infolist():
            data = json.dumps(manifest).encode() if item.filename == "manifest.json" else src.read(item.filename)
            dst.writestr(item, data)
    result = root.portable.import_bundle(edited, as_name="copy")
    readers = {f.file_name: f.readers for f in root.store_files(result.store)}
    assert readers == {"salaries.txt": ("group:hr", "user:bob"), "holidays.txt": None}
    root.share_store("copy", "everyone", "", "read")
    bob = _as(system, "bob")
    assert {h.file_name for h in bob.search("copy", "salaries holiday", k=5)} == {"salaries.txt", "holidays.txt"}
    system.people.accounts.remove_from_group("hr", "ana")
    ana = _as(system, "ana")  # her next request, out of hr
    assert {h.file_name for h in ana.search("copy", "salaries holiday", k=5)} == {"holidays.txt"}


def test_a_writer_neither_learns_a_restricted_files_name_nor_replaces_it(team):
    system, root = team
    root.share_store("handbook", "user", "bob", "write")
    salaries = root.ingest_file("handbook", b"salaries of the staff", "salaries.txt")
    root.set_file_readers("handbook", salaries.file_id, "group:hr")
    bob = _as(system, "bob")
    again = bob.ingest_file("handbook", b"salaries of the staff", "copy.txt")  # the same bytes
    assert again.outcome == "duplicate" and "salaries.txt" not in again.message and again.file_id is None
    assert "the same bytes as a file already in 'handbook'" in again.message
    queued = bob.submit_batch("handbook", [("copy2.txt", b"salaries of the staff")])  # through a worker
    assert queued.wait(timeout=60)
    assert "salaries.txt" not in queued.results[0].message
    assert "a file whose readers are restricted" in queued.results[0].message
    plain = root.ingest_file("handbook", b"holiday rules", "holidays.txt")
    assert "'holidays.txt'" in bob.ingest_file("handbook", b"holiday rules", "h2.txt").message  # others are named
    with pytest.raises(PermissionDenied, match="is taken"):
        bob.index_text("handbook", salaries.file_id, "overwritten")
    assert root.vector_store("handbook").chunks(salaries.file_id)[0].text == "salaries of the staff"
    assert bob.index_text("handbook", plain.file_id, "holiday rules, new").chunks == 1


def test_a_writer_who_may_not_read_a_file_adds_beside_it_instead_of_replacing_it_by_name(team):
    """A new version of a name replaces the old one -- unless the person adding it may not read the
    old one: theirs is added beside it, and the restricted file keeps its name, chunks and readers
    (by a single ingest and by a batch a worker runs)."""
    system, root = team
    root.share_store("handbook", "user", "bob", "write")
    old = root.ingest_file("handbook", b"salaries: the real figures", "salaries.txt")
    root.set_file_readers("handbook", old.file_id, "group:hr")
    bob = _as(system, "bob")
    mine = bob.ingest_file("handbook", b"salaries: a draft by bob", "salaries.txt")
    assert mine.outcome == "indexed" and mine.replaced_file_id is None
    job = bob.submit_batch("handbook", [("salaries.txt", b"salaries: bob's second draft")])
    job.wait(timeout=60)
    ana = _as(system, "ana")
    by_ana = {f.file_id: f.readers for f in ana.store_files("handbook") if f.file_name == "salaries.txt"}
    assert by_ana[old.file_id] == ("group:hr",) and len(by_ana) == 2  # the batch's draft replaced bob's first
    assert mine.file_id not in by_ana
    assert [f.file_name for f in bob.store_files("handbook")] == ["salaries.txt"]  # his own, the second draft
    assert ana.vector_store("handbook").chunks(old.file_id)[0].text == "salaries: the real figures"
    # the owner's new version does replace it, and keeps its readers
    new = root.ingest_file("handbook", b"salaries: next year's figures", "salaries.txt")
    assert new.replaced_file_id in {old.file_id, *by_ana}
    assert root.file_readers("handbook", new.file_id) == ("group:hr",)


def test_a_deleted_group_or_account_is_taken_off_the_readers_so_a_new_one_of_its_name_reads_nothing(team):
    """The new-user trial: a file for group finance, the group deleted and made again with hana in
    it -- hana read the file. Deleting a group or an account now takes it off every file's readers
    (the catalog and the chunks), audited; a file left with no reader stays with the store's owners."""
    system, root = team
    accounts = system.people.accounts
    accounts.create("carol", PW)
    accounts.create("hana", PW)
    root.accounts.create_group("finance")
    budget = root.ingest_file("handbook", b"the budget of the finance team", "budget.txt")
    root.set_file_readers("handbook", budget.file_id, "group:finance, user:carol")
    root.accounts.delete_group("finance")
    assert root.file_readers("handbook", budget.file_id) == ("user:carol",)
    root.accounts.create_group("finance")
    root.accounts.add_member("finance", "hana")
    hana = _as(system, "hana")
    assert hana.store_files("handbook") == [] and hana.search("handbook", "budget finance", k=3) == []
    assert _as(system, "carol").search("handbook", "budget finance", k=3)[0].file_id == budget.file_id
    root.accounts.delete_user("carol")
    assert root.file_readers("handbook", budget.file_id) == ()  # nobody but the store's owners
    accounts.create("carol", PW)
    carol = _as(system, "carol")
    assert carol.store_files("handbook") == [] and carol.search("handbook", "budget finance", k=3) == []
    assert root.search("handbook", "budget finance", k=1)[0].file_id == budget.file_id  # the owner still reads it
    payloads = [p.payload["readers"] for p in system.stores.vector_store("handbook").collection.scroll()]
    assert payloads == [[]]
    why = [e.detail["why"] for e in root.audit_events(action="file.readers") if e.actor == "system"]
    assert why == ["user carol was deleted", "group finance was deleted"]


def test_a_members_bundle_carries_no_readers_field_and_readers_on_a_duplicate_are_said_unapplied(team, tmp_path):
    system, root = team
    salaries = root.ingest_file("handbook", b"salaries of the staff", "salaries.txt")
    root.ingest_file("handbook", b"holiday rules", "holidays.txt")
    root.set_file_readers("handbook", salaries.file_id, "group:hr")
    bundle = tmp_path / "bob.zip"
    _as(system, "bob").portable.export_store("handbook", bundle)
    with zipfile.ZipFile(bundle) as zf:
        lines = [json.loads(x) for n in zf.namelist() if n.endswith(".jsonl") for x in zf.read(n).splitlines()]
    assert [p["payload"]["file_name"] for p in lines] == ["holidays.txt"]
    assert all("readers" not in p["payload"] for p in lines)  # ["*"] told him the store restricts files
    again = root.ingest_file("handbook", b"holiday rules", "holidays-copy.txt", readers="group:hr")
    assert again.outcome == "duplicate" and "The readers given were not applied" in again.message
    assert root.file_readers("handbook", again.file_id) is None
