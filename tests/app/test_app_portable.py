"""The Vector stores page's "Export, import or move" section (pages/_portable.py), headless."""

from __future__ import annotations

import pytest

from knowledge import portable
from knowledge.config import load_settings
from knowledge.service.templates import make_template
from knowledge.workbench import Workbench
from tests.helpers.app import button, fresh_caches, open_app, shown, use_fake_model

CATS = b"# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n"
BREAD = b"# Bread\n\nKnead the dough for ten minutes, then let it rise.\n"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


def _store(name: str = "Notes") -> None:
    wb = Workbench(load_settings())
    try:
        for fname, data in (("cats.md", CATS), ("bread.md", BREAD)):
            assert wb.ingest_file(name, data, fname).ok
        wb.save_template(make_template(name="q", backend="qdrant", embedding_model="fake/hash-8"))
    finally:
        wb.close()


def _bundle(tmp_path, name: str = "Notes"):
    wb = Workbench(load_settings())
    try:
        return wb.portable.export_store(name, tmp_path / "notes.kb").path
    finally:
        wb.close()


def _texts(at) -> str:
    return "\n".join([s.value for s in at.success] + [e.value for e in at.error] + [c.value for c in at.caption])


def test_export_prepares_a_bundle_to_download():
    _store()
    at = open_app("pages/stores.py")
    button(at, "export-go:Notes").click().run()
    assert not at.exception
    assert "2 files, " in _texts(at)
    [download] = [d for d in at.get("download_button") if "Notes.kb" in shown(str(d.proto.label))]
    path = load_settings().data_root / "exports" / "Notes.kb"
    info = portable.bundle_info(path)
    assert info["name"] == "Notes" and info["files"] == 2 and info["chunks"] >= 2
    assert shown(download.proto.label) == "⬇️ Download Notes.kb"


def test_import_a_dropped_bundle_under_a_new_name(tmp_path):
    _store()
    data = _bundle(tmp_path).read_bytes()
    at = open_app("pages/stores.py")
    at.file_uploader(key="import-file:Notes").set_value([("notes.kb", data, "application/zip")]).run()
    assert "notes.kb: store **Notes** · 2 files" in "\n".join(c.value for c in at.caption)  # a preview first
    at.text_input(key="import-as:Notes").input("Copy").run()
    button(at, "import-go:Notes").click().run()
    assert not at.exception
    assert any("Imported 'Copy': 2 files" in s.value and "vectors reused" in s.value for s in at.success)
    assert at.selectbox(key="store_selected").value == "Copy"
    wb = Workbench(load_settings())
    try:
        assert wb.search("Copy", "cats eat fish", k=1)[0].file_name == "cats.md"
    finally:
        wb.close()


def test_a_name_clash_or_a_damaged_bundle_is_a_message_and_the_page_goes_on(tmp_path):
    _store()
    data = _bundle(tmp_path).read_bytes()
    at = open_app("pages/stores.py")
    at.file_uploader(key="import-file:Notes").set_value([("notes.kb", data, "application/zip")]).run()
    button(at, "import-go:Notes").click().run()
    assert not at.exception
    assert any("notes.kb was not imported" in e.value and "already" in e.value for e in at.error)
    at.file_uploader(key="import-file:Notes").set_value([("half.kb", data[: len(data) // 2], "application/zip")]).run()
    at.text_input(key="import-as:Notes").input("Other").run()
    assert not at.exception
    # the preview says why, naming the dropped file (not a temporary copy), and Import stays off
    damaged = [e.value for e in at.error if "half.kb cannot be imported" in e.value]
    assert damaged and "truncated" in damaged[0] and "bundle.kb" not in damaged[0]
    assert button(at, "import-go:Notes").disabled
    assert at.selectbox(key="store_selected").options == ["Notes"]


@pytest.fixture
def _close_qdrant():
    """Close the Qdrant local clients the page's workbench opened (else they close at interpreter exit,
    after the modules they need are gone)."""
    yield
    import gc

    from knowledge.vectorstore.qdrant import QdrantBackend

    # type(), not isinstance(): the heap holds weak proxies, and isinstance() on one whose object is
    # gone raises ReferenceError (it asks the proxy for __class__)
    for obj in gc.get_objects():
        if issubclass(type(obj), QdrantBackend):
            obj.close()


def test_move_a_store_to_another_backend(_close_qdrant):
    _store()
    at = open_app("pages/stores.py")
    at.selectbox(key="move-to:Notes").select("q · qdrant · fake/hash-8").run()
    button(at, "move-go:Notes").click().run()
    assert not at.exception
    assert any("Moved Notes from memory to qdrant (template q; vectors copied)" in s.value for s in at.success)
    stores = next(d.value for d in at.dataframe if list(d.value.columns)[:1] == ["store"])
    assert list(stores["backend"]) == ["qdrant"] and list(stores["files"]) == [2]


def test_import_into_an_empty_data_folder(tmp_path):
    _store()
    data = _bundle(tmp_path).read_bytes()
    wb = Workbench(load_settings())
    wb.delete_store("Notes")
    wb.close()
    at = open_app("pages/stores.py")
    at.file_uploader(key="import-file:").set_value([("notes.kb", data, "application/zip")]).run()
    button(at, "import-go:").click().run()
    assert not at.exception
    assert at.selectbox(key="store_selected").value == "Notes"
