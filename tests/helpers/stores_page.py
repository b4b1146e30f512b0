"""The Vector stores page's steps in AppTest (tests/app/test_app_stores.py and the folder-ingest test of
tests/ingest/test_ingest_fidelity.py): open it, make a store, ingest a folder, read its tables."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.workbench import Workbench
from tests.helpers.app import button, open_app


def service() -> Workbench:
    """A workbench on the test's settings: with ``fake_model``, on the fake model as the app is."""
    return Workbench(load_settings())


def open_page(tab: str = "Stores") -> AppTest:
    """The Vector stores page, with ``tab`` open (only the open tab runs)."""
    at = open_app("pages/stores.py")
    return open_tab(at, tab) if tab != "Stores" else at


def open_tab(at: AppTest, tab: str) -> AppTest:
    """Open the page's ``tab`` ("Stores" or "Templates"), as a click on it does, and rerun."""
    at.session_state["stores-tab"] = tab
    at.run()
    assert not at.exception
    return at


def finish_job(at: AppTest, store: str) -> AppTest:
    """Wait for the store's background batch, then rerun so the page shows its outcome."""
    job = at.session_state[f"job:{store}"]
    assert job.wait(60)
    at.run()
    assert not at.exception
    return at


def ingest_folder(at: AppTest, store: str, folder, glob: str) -> AppTest:
    """Fill the store's "Ingest a folder" form with ``folder`` and ``glob``, submit it and wait."""
    [path] = [t for t in at.text_input if t.label == "Folder"]
    [pattern] = [t for t in at.text_input if t.label == "Glob" and t.value == "**/*" and t.form_id == f"folder:{store}"]
    path.input(str(folder))
    pattern.input(glob)
    button(at, f"FormSubmitter:folder:{store}-Ingest folder").click().run()
    return finish_job(at, store)


def table(at: AppTest, first_column: str):
    """The dataframe whose first column is ``first_column`` (store, file or template)."""
    return next(d.value for d in at.dataframe if list(d.value.columns)[:1] == [first_column])


def files_table(at: AppTest, store: str):
    assert at.selectbox(key="store_selected").value == store
    return table(at, "file")


def pick_file(at: AppTest, store: str):
    return next(s for s in at.selectbox if s.key and s.key.startswith(f"del-pick:{store}:"))


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def make_store(name="Notes", files=()) -> None:
    wb = service()
    wb.create_store(name)
    for fname, data in files:
        wb.ingest_file(name, data, fname)
    wb.close()


# -- rendering -------------------------------------------------------------------------------------


def allow(monkeypatch, *folders) -> None:
    """ingest.allowed_dirs for the app (the tests' folders are not under the home folder)."""
    monkeypatch.setenv("KNOWLEDGE_INGEST__ALLOWED_DIRS", json.dumps([str(f) for f in folders]))


__all__ = [
    "allow",
    "files_table",
    "finish_job",
    "ingest_folder",
    "make_store",
    "markdown",
    "open_page",
    "open_tab",
    "pick_file",
    "service",
    "table",
]
