"""A chat session's knowledge: the user's stores it chooses, searched together with its attachments.

On the fast fake embedder; the tool loop runs through the real ``openai`` client against the local
chat-completions test server where a model's scripted call matters.
"""

from __future__ import annotations

import json

import pytest

from knowledge.chat import Chats
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import StoreNotFound
from knowledge.system import System
from knowledge.vectorstore.memory import folder_name
from knowledge.workbench import Workbench
from tests.helpers.chat import ChatCompletionsServer, tool_call

LIGHTHOUSE = "# Lighthouse\n\nThe keeper lit the lamp at dusk and trimmed the wick at midnight."
BAKERY = "# Bakery\n\nBread needs flour, water, salt and yeast; the dough rests overnight."
HARBOUR = "# Harbour\n\nThe harbour master records every ship and the lamp oil it carries."


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    yield s
    s.close()


@pytest.fixture
def wb(system):
    w = Workbench(system)
    assert w.ingest_file("Lights", LIGHTHOUSE.encode(), "lighthouse.md").ok
    assert w.ingest_file("Bread", BAKERY.encode(), "bakery.md").ok
    return w


def test_vector_search_without_a_store_merges_the_chosen_stores_and_the_attachments(wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["Lights", "Bread"])
    chat.attach(s.id, HARBOUR.encode(), "harbour.md")
    kn = chat.knowledge(s.id)
    assert kn.stores == ["Lights", "Bread"] and kn.attachments and kn.searchable[-1] == s.store
    reply = chat.send(s.id, "lamp keeper harbour bread")  # the offline assistant searches with k=4
    searched = reply.citations + reply.also_searched  # the Sources are the passages quoted, the rest also searched
    assert {c["source"] for c in searched} == {"Lights", "Bread", "attachments"}
    assert {c["file_name"] for c in searched} == {"lighthouse.md", "bakery.md", "harbour.md"}
    assert not any(str(c.get("source")).startswith("chat-") for c in searched)


def test_the_chat_searches_through_the_tool_and_asks_no_store_record_per_hit(wb, monkeypatch, chats):
    """The chat's vector_search is the tool's (``KnowledgeTools.search_stores``): each hit carries its
    store's distance, so no ``store_record`` is asked per hit (at most one per turn, for the offline
    assistant's sentence embedder)."""
    chat = chats.service(wb)
    s = chat.create_session(stores=["Lights", "Bread"])
    asked: list[str] = []
    record = wb.store_record
    monkeypatch.setattr(wb, "store_record", lambda name: asked.append(name) or record(name))
    calls: list[list[str]] = []
    search_stores = chat.tools.search_stores
    monkeypatch.setattr(
        chat.tools, "search_stores", lambda stores, *a, **kw: calls.append(list(stores)) or search_stores(stores, *a, **kw)
    )
    reply = chat.send(s.id, "lamp keeper bread dough")
    searched = reply.citations + reply.also_searched
    assert calls == [["Lights", "Bread"]] and len(searched) >= 2
    assert all(c["higher_is_better"] is True and c["distance"] == "cosine" for c in searched)
    assert len(asked) <= 1


@pytest.mark.slow
def test_the_system_prompt_names_the_chosen_stores_and_the_tool_lists_them(wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["Lights"])
    req = chat.request(s.id)
    system = req.messages[0]["content"]
    assert "## Knowledge stores" in system and "- Lights (1 file: lighthouse.md)" in system
    [search] = [t for t in req.tools if t["function"]["name"] == "vector_search"]
    assert search["function"]["parameters"]["properties"]["store"]["enum"] == ["Lights"]
    assert "store" not in search["function"]["parameters"]["required"]
    empty = chat.create_session(stores=[])
    assert chat.request(empty.id).tools == []  # nothing to search: no tool on offer


def test_a_scripted_call_without_store_reaches_a_chosen_store_and_an_attachment(wb, chats):
    chat = chats.service(wb)
    script = [
        lambda req: tool_call("vector_search", {"query": "lamp keeper harbour ship", "k": 5}),
        lambda req: {"content": "From both."},
    ]
    with ChatCompletionsServer(script) as server:
        chat.configs.save({"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": server.base_url})
        s = chat.create_session(config="local", stores=["Lights"])
        chat.attach(s.id, HARBOUR.encode(), "harbour.md")
        reply = chat.send(s.id, "Who handles lamps?")
    result = server.requests[1]["messages"][-1]["content"]
    assert "lighthouse.md" in result and "harbour.md" in result
    assert "(store: Lights)" in result and "(store: attachments)" in result and "chat-" not in result
    assert reply.citations == []  # the answer cites nothing: everything found is "also searched"
    assert {c["source"] for c in reply.also_searched} == {"Lights", "attachments"}


def test_a_store_outside_the_session_is_refused_with_the_stores_it_can_search(wb, chats):
    chat = chats.service(wb)
    script = [
        lambda req: tool_call("vector_search", {"query": "bread", "store": "Bread"}),
        lambda req: tool_call("vector_search", {"query": "lamp", "store": "Lights"}, "c2"),
        lambda req: {"content": "ok"},
    ]
    with ChatCompletionsServer(script) as server:
        chat.configs.save({"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": server.base_url})
        s = chat.create_session(config="local", stores=["Lights"])
        reply = chat.send(s.id, "bread?")
    assert [r.ok for r in reply.tool_runs] == [False, True]
    assert "not part of this chat; it can search: Lights" in reply.tool_runs[0].text
    assert [c["file_name"] for c in reply.citations + reply.also_searched] == ["lighthouse.md"]


def test_a_deleted_store_is_dropped_from_the_session_and_named_once(wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["Lights", "Bread"])
    wb.delete_store("Bread")
    assert chat.knowledge(s.id).dropped == ["Bread"]
    assert chat.knowledge(s.id).dropped == [] and chat.session(s.id).stores == ["Lights"]
    with pytest.raises(StoreNotFound, match="choose one of Lights"):
        chat.set_stores(s.id, ["Bread"])


def test_a_store_that_cannot_be_searched_is_named_and_the_others_answer(system, wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["Bread", "Lights"])
    system.close()  # corrupt the Bread store's files on disk, as a failed disk would
    manifest = wb.settings.vector_store_dir / folder_name(wb.get_store("Bread").collection) / "manifest.json"
    assert manifest.is_file()
    manifest.write_text("{ not json")
    wb2_system = System(wb.settings, embedder_factory=lambda m: HashEmbedder(64, 256))
    wb2 = Workbench(wb2_system)
    try:
        chat = Chats(wb2_system).service(wb2)
        reply = chat.send(s.id, "Who lit the lamp?")
        [run] = reply.tool_runs
        assert run.ok and "Store 'Bread' could not be searched" in run.text
        assert [c["file_name"] for c in reply.citations + reply.also_searched] == ["lighthouse.md"]
        assert "⚠️ Bread could not be searched" in reply.text and "keeper lit the lamp" in reply.text
    finally:
        wb2_system.close()


def test_a_new_chat_starts_with_the_last_chats_stores_else_the_setting_else_the_only_store(tmp_path, monkeypatch):
    settings = load_settings(data_dir=tmp_path / "data")
    w_system = System(settings, embedder_factory=lambda m: HashEmbedder(64, 256))
    w = Workbench(w_system)
    try:
        chat = Chats(w_system).service(w)
        assert chat.default_stores() == []  # no store at all
        w.ingest_file("Lights", LIGHTHOUSE.encode(), "lighthouse.md")
        assert chat.default_stores() == ["Lights"]  # exactly one
        w.ingest_file("Bread", BAKERY.encode(), "bakery.md")
        assert chat.default_stores() == []  # two, none chosen anywhere
        monkeypatch.setenv("KNOWLEDGE_CHAT__DEFAULT_STORES", json.dumps(["Bread", "Gone"]))
        w.settings = load_settings(data_dir=tmp_path / "data")
        assert chat.default_stores() == ["Bread"]  # the setting, existing stores only
        chat.create_session(stores=["Lights"])
        assert chat.default_stores() == ["Lights"]  # the last chat's stores win
        assert chat.create_session().stores == ["Lights"]
    finally:
        w_system.close()


@pytest.mark.parametrize("question", ["x" * 20_000, "?!…;:", "lamp " * 3000])
def test_odd_questions_get_an_answer_not_a_crash(wb, question, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["Lights"])
    reply = chat.send(s.id, question)
    assert reply.text.startswith("*Retrieval only")


def test_the_offline_assistant_says_when_nothing_matches_well(wb, monkeypatch, chats):
    monkeypatch.setenv("KNOWLEDGE_CHAT__MIN_SCORE", "0.99")
    wb.settings = load_settings(data_dir=wb.settings.data_dir)
    chat = chats.service(wb)
    s = chat.create_session(stores=["Lights"])
    reply = chat.send(s.id, "Who lit the lamp?")
    assert "Nothing in Lights matches “Who lit the lamp?” well" in reply.text
    assert "The closest passage is [1] **lighthouse.md, “Lighthouse” — Lights**" in reply.text


def test_after_the_last_attachment_is_removed_the_assistant_says_what_is_true(wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=[])
    a = chat.attach(s.id, HARBOUR.encode(), "harbour.md")
    chat.remove(s.id, a.file_id)
    reply = chat.send(s.id, "Who records ships?")
    assert "no documents to search yet" in reply.text and "No passage of the attached" not in reply.text
    from tests.helpers.chat import png_bytes

    chat.attach(s.id, png_bytes(), "photo.png")
    reply = chat.send(s.id, "What is in the photo?")
    assert "I cannot read images (photo.png)" in reply.text


def test_empty_sessions_are_pruned_after_a_while_but_not_the_current_one(wb, chats):
    chat = chats.service(wb)
    empty, current = chat.create_session(stores=[]), chat.create_session(stores=[])
    used = chat.create_session(stores=["Lights"])
    chat.send(used.id, "lamp")
    assert chat.prune_empty(keep=current.id) == 0  # too recent
    assert chat.prune_empty(keep=current.id, older_than_s=-1) == 1
    assert {s.id for s in chat.sessions()} == {current.id, used.id} and empty.id not in {s.id for s in chat.sessions()}


def test_quotes_and_citations_show_no_source_markup(wb, chats):
    chapter = (
        '# Shadowing\n\nYou can <span class="filename">shadow</span> a variable with `let`.\n\n'
        "```rust\n{{#include ../listings/ch03/src/main.rs}}\n```\n\n<!-- ignore -->\n"
        "The shadowing ends with the scope.\n"
    )
    assert wb.ingest_file("Book", chapter.encode(), "ch03.md").ok
    chat = chats.service(wb)
    s = chat.create_session(stores=["Book"])
    reply = chat.send(s.id, "shadow a variable with let")
    assert "shadow" in reply.text and "let" in reply.text
    for mark in ("<span", "{{#", "<!--"):
        assert mark not in reply.text, reply.text
    assert "<span" in reply.citations[0]["text"]  # the stored text (and its span) stay exact


def test_the_attachment_text_cache_keeps_the_newest_files_only(wb, monkeypatch, chats):
    """The chat state every person shares (Chats) keeps the attached files' text, so its cache is
    bounded (the most recently read files) and shared safely."""
    import knowledge.chat.service as svc

    monkeypatch.setattr(svc, "TEXT_CACHE", 2)
    chat = chats.service(wb)
    ids = [wb.save_attachment(f"n{i}.txt", "text/plain", f"note {i}".encode()).id for i in range(3)]
    assert [chat._text(i).strip() for i in ids] == ["note 0", "note 1", "note 2"]
    assert list(chats._texts) == ids[1:]
    assert chat._text(ids[1]).strip() == "note 1" and list(chats._texts) == [ids[2], ids[1]]
