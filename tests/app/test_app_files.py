"""The Files page, headless (streamlit.testing.v1.AppTest), with the fake embedder."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import button, fresh_caches, open_app, use_fake_model
from tests.helpers.app_system import preparing
from tests.helpers.env import prepared_data, use_prepared_data

CATS = b"# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n"
BREAD = b"# Bread\n\nKnead the dough for ten minutes, then let it rise.\n"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)  # the app and every Workbench(load_settings()) here
    with fresh_caches():
        yield


def _populate(work: Path) -> None:
    with preparing() as system:
        wb = Workbench(system)
        wb.ingest_file("Notes", CATS, "cats.md")
        wb.ingest_file("Notes", BREAD, "bread.md")
        wb.ingest_file("Kitchen", BREAD, "bread.md")
        system.files.save("loose.txt", "text/plain", b"hello")


@pytest.fixture(scope="module")
def populated(tmp_path_factory) -> Path:
    """cats.md in Notes, bread.md in Notes and Kitchen, loose.txt in no store: a data folder made once."""
    return prepared_data(tmp_path_factory, "files-populated", _populate)


@pytest.fixture
def ids(populated) -> dict[str, str]:
    """This test's copy of the populated data folder; returns file name -> id."""
    use_prepared_data(populated)
    system = System(load_settings())
    try:
        return {f.name: f.id for f in system.files.list()}
    finally:
        system.close()


def open_page() -> AppTest:
    return open_app("pages/files.py")


def pick(at: AppTest, file_id: str) -> AppTest:
    """The page showing ``file_id``'s details (``?file=``, as a click on its row does)."""
    at.query_params["file"] = file_id
    return at.run()


def test_renders_on_an_empty_data_dir():
    at = open_page()
    assert at.title[0].value == "📄 Files"
    assert {m.label: m.value for m in at.metric}["Stored files"] == "0"
    assert "No files yet" in at.info[0].value


def test_lists_files_with_the_stores_using_them(ids):
    at = open_page()
    table = at.dataframe[0].value
    assert sorted(table["name"]) == ["bread.md", "bread.md", "cats.md", "loose.txt"]
    used = {i: list(s) for i, s in zip(table["id"], table["stores"])}
    assert used[ids["cats.md"]] == ["Notes"] and used[ids["loose.txt"]] == []
    assert {m.label: m.value for m in at.metric}["Not used by any store"] == "1"
    assert set(table["sha256"].str.len()) == {64}


def test_download_button_offers_the_content(ids):
    at = pick(open_page(), ids["cats.md"])
    [dl] = list(at.get("download_button"))
    assert dl.proto.label == "⬇️ Download"
    assert "cats.md" in "\n".join(m.value for m in at.subheader)


def test_deleting_a_file_stores_use_is_refused_unless_asked(ids):
    at = pick(open_page(), ids["cats.md"])
    button(at, f"delete:{ids['cats.md']}").click().run()
    button(at, f"yes:delete:{ids['cats.md']}").click().run()
    assert not at.exception
    assert "used by the store(s) Notes" in at.error[0].value and "kept" in at.error[0].value
    at.checkbox(key=f"from-stores:{ids['cats.md']}").check().run()
    button(at, f"delete:{ids['cats.md']}").click().run()
    assert any("Delete **cats.md** from the file store and from Notes?" in w.value for w in at.warning)
    button(at, f"yes:delete:{ids['cats.md']}").click().run()
    assert not at.exception
    assert "Deleted cats.md and removed it from Notes" in at.success[0].value
    assert "cats.md" not in list(at.dataframe[0].value["name"])
    wb = Workbench(load_settings())
    try:
        assert [f.file_name for f in wb.store_files("Notes")] == ["bread.md"]
        assert all(h.file_name == "bread.md" for h in wb.search("Notes", "cats fish mat", k=10))
    finally:
        wb.close()


def test_delete_an_unused_file(ids):
    at = pick(open_page(), ids["loose.txt"])
    assert not [c for c in at.checkbox if c.key == f"from-stores:{ids['loose.txt']}"]
    button(at, f"delete:{ids['loose.txt']}").click().run()
    assert not at.exception and {m.label: m.value for m in at.metric}["Stored files"] == "4"  # asked first
    button(at, f"no:delete:{ids['loose.txt']}").click().run()
    assert not at.warning and {m.label: m.value for m in at.metric}["Stored files"] == "4"  # cancelled
    button(at, f"delete:{ids['loose.txt']}").click().run()
    button(at, f"yes:delete:{ids['loose.txt']}").click().run()
    assert not at.exception
    assert at.success[0].value == "Deleted loose.txt."
    assert {m.label: m.value for m in at.metric}["Stored files"] == "3"


def test_a_file_with_two_names_lists_its_other_name():
    wb = Workbench(load_settings())
    cats = wb.ingest_file("Notes", CATS, "cats.md").file_id
    wb.ingest_file("Notes", CATS, "copy of cats.md")  # the same bytes: one more name, kept once
    wb.close()
    at = open_page()
    table = at.dataframe[0].value
    assert list(table["name"]) == ["cats.md"] and [list(a) for a in table["also named"]] == [["copy of cats.md"]]
    pick(at, cats)
    assert any("Also named: **copy of cats.md**" in m.value for m in at.markdown)
