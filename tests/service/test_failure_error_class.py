"""Ingestion records the error class of a failed file in the catalog (FileRecord.error), so the
pages, the CLI and scripts ask its identity; a file indexed after a retry has none."""

from __future__ import annotations

import json

from knowledge.catalog import DONE, FAILED
from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.outcomes import can_retry, needs_password
from knowledge.workbench import Workbench
from tests.helpers.documents import encrypted_pdf


def _encrypted_pdf(password: str) -> bytes:
    return encrypted_pdf(password, repeat=5)


def test_a_failed_file_is_recorded_with_its_error_class_and_a_retry_clears_it(tmp_path, capsys):
    data = tmp_path / "data"
    wb = Workbench(load_settings(data_dir=data), embedder_factory=lambda model: HashEmbedder(dimension=8))
    try:
        locked = wb.ingest_file("s", _encrypted_pdf("secret"), "locked.pdf")
        empty = wb.ingest_file("s", b"", "empty.txt")
        records = {f.file_name: f for f in wb.store_files("s")}
        assert (records["locked.pdf"].status, records["locked.pdf"].error) == (FAILED, "PasswordRequired")
        assert (records["empty.txt"].status, records["empty.txt"].error) == (FAILED, "EmptyDocument")
        assert needs_password(records["locked.pdf"]) and can_retry(records["locked.pdf"])
        assert not needs_password(records["empty.txt"]) and not can_retry(records["empty.txt"])
        assert empty.error == "EmptyDocument"
        right = wb.retry_file("s", locked.file_id, password="secret")
        assert right.ok
        again = {f.file_name: f for f in wb.store_files("s")}["locked.pdf"]
        assert (again.status, again.error) == (DONE, None)
    finally:
        wb.close()

    assert main(["--data-dir", str(data), "files", "s", "--json"]) == 0
    listed = {f["name"]: f for f in json.loads(capsys.readouterr().out)}
    assert listed["empty.txt"]["error"] == "EmptyDocument" and listed["locked.pdf"]["error"] is None
