"""Editable file details and a store's own settings (issue 29, item 3) on both catalog engines:
the details editor's attributes reach the chunks a filter sees, the store settings (migration 12)
persist, are checked in words, are removed with the store, give the playground and chat their
default threshold and the chat model its description; read-only sharers may not change either."""

from __future__ import annotations

import pytest

from knowledge.attributes import from_payload
from knowledge.catalog import Catalog
from knowledge.chat import ChatService
from knowledge.chat.mapper import MapperContext, system_prompt
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, PermissionDenied, StoreNotFound
from knowledge.pagemodels.details import attributes_of, rows_of
from knowledge.system import System
from knowledge.workbench import Workbench

PW = "correct horse battery"
GUIDE = b"The deployment guide explains how the service is rolled out to production on Fridays."
NOTES = b"Meeting notes: the deployment moved to Monday after the production incident review."


def _wb(settings) -> Workbench:
    return Workbench(settings, embedder_factory=lambda m: HashEmbedder(dimension=32, max_tokens=64))


@pytest.fixture
def system(catalog_settings):
    s = System(catalog_settings, embedder_factory=lambda m: HashEmbedder(dimension=32, max_tokens=64))
    yield s
    s.close()


def _files(wb: Workbench) -> dict[str, str]:
    wb.ingest_file("docs", GUIDE, "guide.txt")
    wb.ingest_file("docs", NOTES, "notes.txt")
    return {f.file_name: f.file_id for f in wb.file_records("docs")}


def _names(wb: Workbench, where: dict) -> set[str]:
    return {h.file_name for h in wb.search("docs", "deployment production", k=10, where=where)}


@pytest.mark.slow
def test_saved_details_reach_every_chunk_and_the_filter(wb):
    ids = _files(wb)
    assert _names(wb, {"attr_team": "ops"}) == set()
    attributes = attributes_of(
        "Deploy guide",
        [
            {"key": "team", "type": "text", "value": "ops"},
            {"key": "year", "type": "number", "value": "2024"},
            {"key": "draft", "type": "true/false", "value": "no"},
        ],
    )
    assert attributes == {"title": "Deploy guide", "team": "ops", "year": 2024, "draft": False}
    assert wb.set_file_attributes("docs", ids["guide.txt"], attributes) >= 1
    assert _names(wb, {"attr_team": "ops"}) == {"guide.txt"}
    assert _names(wb, {"attr_year": 2024, "attr_draft": False}) == {"guide.txt"}
    chunks = list(wb.vector_store("docs").collection.scroll(where={"file_id": ids["guide.txt"]}))
    assert chunks and all(from_payload(c.payload) == attributes for c in chunks)
    # edited again: the old values are gone (replaced, not merged), the editor reads back what was saved
    wb.set_file_attributes("docs", ids["guide.txt"], attributes_of("", [{"key": "team", "value": "docs"}]))
    assert _names(wb, {"attr_team": "ops"}) == set() and _names(wb, {"attr_team": "docs"}) == {"guide.txt"}
    assert rows_of(wb.file_attributes("docs", ids["guide.txt"])) == ("", [{"key": "team", "type": "text", "value": "docs"}])
    assert wb.file_attributes("docs", ids["notes.txt"]) == {}


def test_store_settings_persist_are_checked_and_leave_with_the_store(wb, catalog_settings):
    wb.create_store("docs")
    assert wb.store_settings("docs").description == "" and wb.store_settings("docs").score_threshold is None
    assert wb.default_threshold("docs") == wb.settings.search.score_threshold  # cosine: the setting
    saved = wb.set_store_settings("docs", description="  The team's deployment guides.  ", score_threshold=0.42)
    assert (saved.description, saved.score_threshold) == ("The team's deployment guides.", 0.42)
    other = _wb(catalog_settings)  # another process's workbench reads them from the catalog
    try:
        assert other.store_settings("docs").score_threshold == 0.42
        assert other.default_threshold("docs") == 0.42
    finally:
        other.close()
    for bad, words in [
        ({"description": "x" * 1001}, "at most 1000"),
        ({"description": "a\x00b"}, "control character"),
        ({"score_threshold": float("nan")}, "finite number"),
        ({"score_threshold": "high"}, "finite number"),
    ]:
        with pytest.raises(InvalidArgument, match=words):
            wb.set_store_settings("docs", **bad)
    assert wb.store_settings("docs").score_threshold == 0.42  # a refused change changed nothing
    wb.set_store_settings("docs", description="", score_threshold=None)
    assert wb.default_threshold("docs") == wb.settings.search.score_threshold
    wb.set_store_settings("docs", description="kept?", score_threshold=0.1)
    wb.delete_store("docs")
    with pytest.raises(StoreNotFound):
        wb.store_settings("docs")
    wb.create_store("docs")  # a new store of the old name starts without the old settings
    assert wb.store_settings("docs").description == ""
    with pytest.raises(StoreNotFound):
        wb.set_store_settings("nowhere", description="x")
    fresh = Catalog.from_settings(catalog_settings)
    try:
        assert fresh.store_settings("nowhere").description == ""  # no row: the defaults
    finally:
        fresh.close()


@pytest.mark.slow
def test_chat_tells_the_model_each_stores_description_and_filters_by_attributes(wb, chats):
    ids = _files(wb)
    wb.set_store_settings("docs", description="Deployment guides\nof the ops team.")
    wb.set_file_attributes("docs", ids["notes.txt"], {"kind": "minutes"})
    chat = chats.service(wb)
    s = chat.create_session(stores=["docs"])
    briefs = chat.briefs(chat.knowledge(s.id))
    assert briefs[0].description == "Deployment guides\nof the ops team."
    prompt = system_prompt(MapperContext([], frozenset(), knowledge=briefs))
    assert "- docs (2 files: guide.txt, notes.txt): Deployment guides of the ops team." in prompt
    assert chat.set_filter(s.id, {"attr_kind": "minutes"}) == {"attr_kind": "minutes"}
    assert _searched(chat, s.id) == {"notes.txt"}  # the offline assistant searches the question
    chat.set_filter(s.id, None)
    assert chat.filter_of(s.id) == {}
    assert _searched(chat, s.id) == {"guide.txt", "notes.txt"}
    wb.set_store_settings("docs", score_threshold=1.01)  # above any cosine: the store's own threshold applies
    assert _searched(chat, s.id) == set()
    with pytest.raises(InvalidArgument):
        chat.set_filter(s.id, {"attr_kind": ["a", "b"]})


def _searched(chat: ChatService, sid: str) -> set[str]:
    """The files the turn's vector_search found (from its tool runs' text)."""
    reply = chat.send(sid, "deployment production")
    text = "\n".join(r.text for r in reply.tool_runs if r.name == "vector_search")
    assert reply.tool_runs, reply.text
    return {n for n in ("guide.txt", "notes.txt") if n in text}


@pytest.mark.slow
def test_a_read_only_sharer_sees_details_and_settings_but_may_not_change_them(system, wb):
    system.people.set_up_admin("Root", PW, "The Admin")
    system.people.accounts.create("ana", PW, display_name="Ana")
    system.people.accounts.create("bo", PW, display_name="Bo")
    system.people.accounts.create("cy", PW, display_name="Cy")
    ana, bo, cy = (wb.as_user(system.people.accounts.actor(n)) for n in ("ana", "bo", "cy"))
    ana.ingest_file("docs", GUIDE, "guide.txt")
    fid = ana.file_records("docs")[0].file_id
    ana.set_file_attributes("docs", fid, {"team": "ops"})
    ana.set_store_settings("docs", description="Ana's guides")
    ana.share_store("docs", "user", "bo", "read")
    ana.share_store("docs", "user", "cy", "write")
    assert bo.file_attributes("docs", fid) == {"team": "ops"}
    assert bo.store_settings("docs").description == "Ana's guides"
    with pytest.raises(PermissionDenied, match="read-only"):
        bo.set_file_attributes("docs", fid, {"team": "hr"})
    with pytest.raises(PermissionDenied, match="read-only"):
        bo.set_store_settings("docs", description="Bo's now")
    cy.set_file_attributes("docs", fid, {"team": "hr"})  # a writer may
    cy.set_store_settings("docs", description="Cy's words", score_threshold=0.3)
    assert ana.file_attributes("docs", fid) == {"team": "hr"}
    assert ana.store_settings("docs").description == "Cy's words"
    actions = [e.action for e in wb.audit_events(store="docs")]
    assert actions.count("store.update") == 2 and actions.count("file.attributes") == 2
