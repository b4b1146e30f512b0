"""The uploaders say the limit that applies to them (issue 40's trial: they showed Streamlit's ceiling,
``server.maxUploadSize`` 1000 MB, while the ingestion refuses a file over ``ingest.max_file_mb``): a
store's drop zone and the chat's box ``ingest.max_file_mb``, the bundle import ``app.max_bundle_mb``."""

from __future__ import annotations

import pytest

from tests.helpers.app import fresh_caches, open_app, use_fake_model


@pytest.fixture(autouse=True)
def _app(monkeypatch):
    use_fake_model(monkeypatch)
    monkeypatch.setenv("KNOWLEDGE_INGEST__MAX_FILE_MB", "25")
    monkeypatch.setenv("KNOWLEDGE_APP__MAX_BUNDLE_MB", "300")
    with fresh_caches():
        yield


def test_the_bundle_import_shows_the_bundle_limit_and_a_store_the_file_limit():
    at = open_app("pages/stores.py")
    (up,) = at.get("file_uploader")  # no store yet: the import only
    assert up.proto.max_upload_size_mb == 300
    assert "Up to 300 MB per bundle (setting app.max_bundle_mb)" in up.proto.help and "25 MB" in up.proto.help
    at.session_state["workbench"].create_store("notes")
    at.run()
    limits = sorted((u.proto.max_upload_size_mb, u.proto.label) for u in at.get("file_uploader"))
    assert limits[0][0] == 25 and limits[0][1].startswith("Drop files here"), limits


def test_the_chat_box_shows_the_file_limit():
    at = open_app("pages/chat.py")
    assert not at.exception, at.exception
    (box,) = at.chat_input
    assert box.proto.max_upload_size_mb == 25
    assert any("up to 25 MB each, setting ingest.max_file_mb" in c.value for c in at.caption)
