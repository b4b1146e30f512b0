"""A failure is told by the identity of its error (``FileRecord.error``, ``IngestResult.error``),
not by its wording; the text is searched only for records kept before the catalog recorded the class."""

from __future__ import annotations

import pytest

from knowledge.catalog import DONE, FAILED, FileRecord
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.outcomes import IngestResult, can_retry, needs_password
from knowledge.workbench import Workbench
from tests.helpers.documents import encrypted_pdf


def record(reason: str | None, error: str | None = None, status: str = FAILED) -> FileRecord:
    return FileRecord("s", "f1", "a.pdf", "aa", 10, status, reason, 0, None, error=error)


def test_the_error_class_decides_and_the_wording_does_not():
    # the message could say anything: the class says a password is asked for
    assert needs_password(record("this PDF is locked", error="PasswordRequired"))
    # a message that mentions a password, from another failure, asks for none
    assert not needs_password(record("unsupported: a password manager's export", error="UnsupportedFile"))
    assert not can_retry(record("no text; try again with another file", error="EmptyDocument"))
    assert can_retry(record("the store is in use", error="StoreLocked"))
    assert can_retry(record("this PDF is locked", error="PasswordRequired"))


def test_an_ingest_result_is_asked_the_same_way():
    failed = IngestResult("a.pdf", "failed", "a.pdf: locked", error="PasswordRequired")
    assert needs_password(failed) and can_retry(failed)
    other = IngestResult("a.pdf", "failed", "a.pdf: password-looking words", error="EmptyDocument")
    assert not needs_password(other) and not can_retry(other)


@pytest.mark.parametrize(
    "reason, password, retry",
    [
        ("password required: this PDF is encrypted; give its password to read it", True, True),
        ("interrupted: the program was stopped while ingesting it; ingest it again", False, True),
        ("no text: the file is empty", False, False),
    ],
)
def test_a_record_without_an_error_class_falls_back_to_its_text(reason, password, retry):
    """Rows failed before migration 5 (and interruptions, which raise no error) have no class."""
    assert needs_password(record(reason)) is password and needs_password(reason) is password
    assert can_retry(record(reason)) is retry and can_retry(reason) is retry


def test_an_unknown_error_class_is_judged_by_its_words():
    assert can_retry(record("the server is unreachable", error="SomeBackendError"))
    assert not can_retry(record("the server said no", error="SomeBackendError"))
    assert not needs_password(record(None, error="SomeBackendError")) and not can_retry(record(None))


def _encrypted_pdf(password: str) -> bytes:
    return encrypted_pdf(password, repeat=5)


def test_an_encrypted_pdf_fails_as_password_required_and_a_wrong_password_too(tmp_path):
    wb = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=8))
    try:
        data = _encrypted_pdf("secret")
        r = wb.ingest_file("s", data, "locked.pdf")
        assert (r.outcome, r.error) == ("failed", "PasswordRequired") and needs_password(r) and can_retry(r)
        wrong = wb.retry_file("s", r.file_id, password="nope")
        assert wrong.error == "PasswordRequired" and needs_password(wrong)
        right = wb.retry_file("s", wrong.file_id, password="secret")
        assert right.ok and right.error is None and not needs_password(right)
        assert [f.status for f in wb.store_files("s")] == [DONE]
    finally:
        wb.close()
