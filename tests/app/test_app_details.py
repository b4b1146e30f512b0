"""Issue 29, item 3 on the pages, headless (AppTest): editing a file's attribute in the Stores page's
File details editor changes what the playground's attribute filter returns; the Store settings
section saves a description and a default threshold the playground starts with; a read-only
sharer sees the details and settings without Save."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import APP, button, fresh_caches, open_app, page_text, use_fake_model
from tests.helpers.app_system import preparing
from tests.helpers.env import prepared_data, use_prepared_data

PW = "correct horse battery"
GUIDE = b"# Deploy\n\nThe deployment guide: roll the service out to production on Fridays.\n"
NOTES = b"# Notes\n\nMeeting notes: the deployment moved to Monday after the incident.\n"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


def _build_docs(work: Path) -> None:
    with preparing() as system:
        wb = Workbench(system)
        for name, data in (("guide.md", GUIDE), ("notes.md", NOTES)):
            assert wb.ingest_file("docs", data, name).ok


@pytest.fixture(scope="module")
def docs_data(tmp_path_factory) -> Path:
    """A data folder with store ``docs`` (guide.md, notes.md; fake model), made once for the module."""
    return prepared_data(tmp_path_factory, "details-docs", _build_docs)


@pytest.fixture
def docs(docs_data) -> dict[str, str]:
    """Store ``docs`` with guide.md and notes.md (fake model), in this test's copy of the prepared
    data folder; ``{file name: file id}``."""
    use_prepared_data(docs_data)
    system = System(load_settings())
    try:
        return {f.file_name: f.file_id for f in Workbench(system).file_records("docs")}
    finally:
        system.close()


def playground_hits(fields: str) -> tuple[int, str]:
    """``(hits, page text)`` of the playground for a query over both files with ``fields`` as its filter."""
    at = open_app("pages/search.py")
    at.number_input(key="pg_threshold").set_value(-1.0).run()
    at.text_area(key="pg_fields").input(fields).run()
    at.text_input(key="pg_query").input("deployment production").run()
    assert not at.exception, at.exception
    return len(at.get("progress")), page_text(at)


def edit_details(at: AppTest, fid: str, title: str, key: str, value: str, kind: str = "text") -> None:
    """Add one attribute row to file ``fid`` of store docs in the editor, fill it, Save."""
    at.selectbox(key="details-pick:docs").select(fid).run()
    base = f"details:docs:{fid}"
    at.text_input(key=f"{base}:title").input(title).run()
    button(at, f"{base}:add").click().run()
    row = max(int(t.key.rsplit(":", 1)[1]) for t in at.text_input if (t.key or "").startswith(f"{base}:k:"))
    at.text_input(key=f"{base}:k:{row}").input(key)
    at.selectbox(key=f"{base}:t:{row}").select(kind)
    at.text_input(key=f"{base}:v:{row}").input(value).run()
    button(at, f"{base}:save").click().run()
    assert not at.exception, at.exception


def test_editing_an_attribute_in_the_app_changes_what_the_filter_returns(docs):
    hits, text = playground_hits("attr_team = ops")
    assert hits == 0 and "guide.md" not in text  # nothing has the attribute yet
    at = open_app("pages/stores.py")
    edit_details(at, docs["guide.md"], "Deployment guide", "team", "ops")
    assert any("Saved the details of guide.md" in s.value for s in at.success)
    base = f"details:docs:{docs['guide.md']}"
    assert at.text_input(key=f"{base}:title").value == "Deployment guide"  # read back from the chunks
    hits, text = playground_hits("attr_team = ops")
    assert hits >= 1 and "guide.md" in text and "notes.md" not in text
    # a number typed as one is filtered as a number; a bad one is refused in words, nothing saved
    edit_details(at, docs["notes.md"], "", "year", "twenty", kind="number")
    assert any("'year' should be a number" in e.value for e in at.error)
    next(t for t in at.text_input if (t.key or "").startswith(f"details:docs:{docs['notes.md']}:v:")).input("2024").run()
    button(at, f"details:docs:{docs['notes.md']}:save").click().run()
    assert any("Saved the details of notes.md" in s.value for s in at.success)
    hits, text = playground_hits("attr_year = 2024")
    assert hits >= 1 and "notes.md" in text and "guide.md" not in text
    # deleting the row and saving removes the attribute from what the filter sees
    at.selectbox(key="details-pick:docs").select(docs["guide.md"]).run()
    row = next(b.key for b in at.button if b.key and b.key.startswith(f"{base}:del:"))
    button(at, row).click().run()
    button(at, f"{base}:save").click().run()
    assert playground_hits("attr_team = ops")[0] == 0


def test_store_settings_save_a_description_and_the_playgrounds_default_threshold(docs):
    at = open_app("pages/stores.py")
    form_area = next(t for t in at.text_area if t.label == "Description")
    form_area.input("Deployment guides of the ops team.")
    next(n for n in at.number_input if n.label == "Default score threshold").set_value(0.15)
    next(b for b in at.form_submit_button if b.label == "💾 Save settings").click().run()
    assert not at.exception, at.exception
    assert any("Saved the settings of docs" in s.value for s in at.success)
    assert "Made from template **default** (model fake/hash-8, cosine distance)." in page_text(at)
    wb = Workbench(load_settings())
    try:
        own = wb.store_settings("docs")
        assert (own.description, own.score_threshold) == ("Deployment guides of the ops team.", 0.15)
    finally:
        wb.close()
    search = open_app("pages/search.py")
    assert search.number_input(key="pg_threshold").value == 0.15  # the store's own default


def test_a_read_only_sharer_sees_details_and_settings_without_save(docs):
    system = System(load_settings())
    try:
        wb = Workbench(system)
        system.people.set_up_admin("root", PW, "The Admin")
        system.people.accounts.create("bo", PW, display_name="Bo")
        wb.set_file_attributes("docs", docs["guide.md"], {"title": "Deployment guide", "team": "ops"})
        wb.share_store("docs", "user", "bo", "read")
        token = system.people.accounts.start_session("bo")
    finally:
        system.close()
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["session_token"] = token
    at.run()
    at.switch_page("pages/stores.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="details-pick:docs").select(docs["guide.md"]).run()
    base = f"details:docs:{docs['guide.md']}"
    assert at.text_input(key=f"{base}:title").value == "Deployment guide" and at.text_input(key=f"{base}:title").disabled
    assert [t.value for t in at.text_input if t.key and t.key.startswith(f"{base}:v:")] == ["ops"]
    keys = {b.key for b in at.button if b.key}
    assert f"{base}:save" not in keys and f"{base}:add" not in keys
    assert "Shared with you read-only: the details cannot be changed here." in page_text(at)
    assert next(b for b in at.form_submit_button if b.label == "💾 Save settings").disabled
