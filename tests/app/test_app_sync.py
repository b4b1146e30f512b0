"""The Stores page's folder sync (pages/_sync.py), headless: add a folder (plan first, applied on
confirm as a batch), the synced folders with the last sync's counts, Sync now after changes, and
the allowed folders."""

from __future__ import annotations

import json

import pytest

from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import button, fresh_caches, open_app, use_fake_model

CATS = "# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n"
BREAD = "# Bread\n\nKnead the dough for ten minutes, then let it rise.\n"
OWLS = "# Owls\n\nOwls hunt mice at night with silent flight.\n"


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


@pytest.fixture
def docs(tmp_path, monkeypatch):
    use_fake_model(monkeypatch, 8)
    monkeypatch.setenv("KNOWLEDGE_INGEST__ALLOWED_DIRS", json.dumps([str(tmp_path / "docs")]))
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "cats.md").write_text(CATS)
    (folder / "sub" / "owls.md").write_text(OWLS)
    wb = Workbench(load_settings())
    wb.create_store("Notes")
    wb.close()
    return folder


def add_folder(at, folder, glob="**/*"):
    [path] = [t for t in at.text_input if t.label == "Folder to keep in sync"]
    [pattern] = [t for t in at.text_input if t.label == "Glob" and t.form_id == "sync-add:Notes"]
    path.input(str(folder))
    pattern.input(glob)
    button(at, "FormSubmitter:sync-add:Notes-Add folder").click().run()
    assert not at.exception, at.exception
    return at


def finish(at):
    job = at.session_state["job:Notes"]
    assert job.wait(60)
    at.run()
    assert not at.exception, at.exception
    return at


def frame(at, first_column):
    return next(d.value for d in at.dataframe if list(d.value.columns)[:1] == [first_column])


def test_add_a_folder_shows_the_plan_then_applies_it_and_sync_now_follows_changes(docs):
    at = add_folder(open_app("pages/stores.py"), docs)
    assert any("Plan for" in m.value and "2 added" in m.value for m in at.markdown)
    plan = frame(at, "change")
    assert list(plan["file"]) == ["cats.md", "sub/owls.md"]
    wb = Workbench(load_settings())
    try:
        assert wb.file_records("Notes") == []  # the preview changes nothing
    finally:
        wb.close()
    button(at, "sync-apply:Notes").click().run()
    finish(at)
    assert sorted(frame(at, "file")["file"]) == ["cats.md", "sub/owls.md"]
    assert any(f"**{docs}**" in m.value and ": 2 added" in m.value for m in at.markdown)
    (docs / "cats.md").unlink()
    (docs / "bread.md").write_text(BREAD)
    button(at, "sync-now:Notes").click().run()
    assert not at.exception
    assert any("1 added, 0 changed, 0 renamed, 1 deleted, 1 unchanged" in m.value for m in at.markdown)
    button(at, "sync-apply:Notes").click().run()
    finish(at)
    assert sorted(frame(at, "file")["file"]) == ["bread.md", "sub/owls.md"]
    assert any(f"**{docs}**" in m.value and ": 1 added, 1 deleted, 1 unchanged" in m.value for m in at.markdown)


def test_a_folder_outside_the_allowed_folders_is_refused(docs, tmp_path):
    at = add_folder(open_app("pages/stores.py"), tmp_path)
    assert any("outside the folders allowed here" in e.value for e in at.error)
    assert "sync-preview:Notes" not in at.session_state


def test_cancel_drops_the_plan(docs):
    at = add_folder(open_app("pages/stores.py"), docs)
    button(at, "sync-cancel:Notes").click().run()
    assert not at.exception and not any("Plan for" in m.value for m in at.markdown)
    system = System(load_settings())
    try:
        assert system.catalog.synced_folders("Notes") == [] and Workbench(system).file_records("Notes") == []
    finally:
        system.close()


def test_add_folder_outside_the_allowed_ones_keeps_the_expander_open_with_the_error(docs, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    at = add_folder(open_app("pages/stores.py"), outside)
    [sync] = [e for e in at.expander if "Keep a folder in sync" in e.label]
    assert sync.proto.expanded  # not folded away on the rerun
    errors = [e.value for e in sync.error]
    assert errors and str(outside) in errors[0] and "allowed" in errors[0].lower(), errors
    assert "sync-preview:Notes" not in at.session_state  # no plan for a refused folder
