"""Failure reasons in words (knowledge.outcomes) and a batch's overall progress (knowledge.service.jobs)."""

from __future__ import annotations

import re

import pytest

from knowledge.outcomes import can_retry, needs_password, plain_reason
from knowledge.service.jobs import IngestJob

NO_EXCEPTION_NAME = re.compile(r"\b\w*(Error|Exception)\b|BadZipFile")


@pytest.mark.parametrize(
    "reason, retry",
    [
        ("unreadable PDF (damaged or truncated?): PdfStreamError: Stream has ended unexpectedly", False),
        ('unreadable DOCX: KeyError: "no relationship of type officeDocument"', False),
        ("unreadable DOCX: the file is damaged (BadZipFile: File is not a zip file)", False),
        ("unreadable Excel workbook: the file is damaged (BadZipFile: File is not a zip file)", False),
        ("damaged: this OpenDocument text cannot be read (XMLSyntaxError: Premature end of data)", False),
        ("unsupported PDF encryption: NotImplementedError: algorithm 5", False),
        ("unreadable CSV: Error: field larger than field limit", False),
        ("a.pdf: unexpected error (KeyError: 3); see the server log.", False),
        (
            "a.pdf: an unexpected problem while reading this file (a bug in the reader); it was recorded in the"
            " ingest worker's log.",
            False,
        ),
        ("damaged: this EPUB cannot be read (the ZIP structure is damaged)", False),
        ("unreadable DOCX: its XML is malformed (line 3)", False),
        ("no text: the file is empty", False),
        ("unsupported: legacy Word format (.doc) — save it as .docx", False),
        ("password required: this PDF is encrypted; give its password to read it", True),
        ("wrong password: the password given does not open this PDF", True),
        ("interrupted: the program was stopped while ingesting it; ingest it again", True),
        ("the embedding model is unavailable (OSError: no space left)", True),
    ],
)
def test_reasons_in_words_and_retry_only_where_it_can_help(reason, retry):
    words = plain_reason(reason)
    assert words and not NO_EXCEPTION_NAME.search(words), words
    assert words[0].isupper() and words.endswith(".")
    assert can_retry(reason) is retry
    assert needs_password(reason) is ("password" in reason)


def test_a_legacy_unexpected_error_points_at_no_log():
    words = plain_reason("a.pdf: unexpected error (KeyError: 3); see the server log.")
    assert "log" not in words and "bug in the reader" in words


def test_no_reason_is_no_words():
    assert plain_reason(None) == "" and plain_reason("  ") == "" and not can_retry(None)


def test_a_batch_knows_its_files_chunks_and_time_left(tmp_path):
    from knowledge.outcomes import IngestResult

    a = tmp_path / "a.txt"
    a.write_bytes(b"x" * 3000)
    job = IngestJob(None, "s", [("a.txt", a), ("b.txt", b"y" * 1000)])  # not started: no workbench needed
    assert job.sizes == [3000, 1000] and job.eta_seconds() is None
    job.started_at = 100.0
    job.files[0].update("embedding", 0.5, now=101.0)
    assert job.eta_seconds(now=101.5) is None  # under 5 s: too early to say
    assert job.eta_seconds(now=110.0) is None  # no file finished: a file's own progress is no pace
    job.files[0].result = IngestResult("a.txt", "indexed", "a.txt: 7 chunks.", chunks=7)
    job.files[0].ended = 112.0
    job.files[1].update("embedding", 0.2, now=112.5)
    # 3,000 bytes in 12 s: the 1,000 bytes of b.txt (1 s in) take about 3 s more at that pace
    assert job.eta_seconds(now=113.0) == pytest.approx(1000 / 250 - 1.0)
    assert (job.finished, job.chunks, job.counts()) == (1, 7, {"indexed": 1})


def test_outcomes_are_an_enum_equal_to_their_words():
    from knowledge.outcomes import IngestResult, Outcome

    assert list(Outcome) == ["indexed", "unchanged", "duplicate", "failed", "cancelled"]
    assert Outcome.FAILED == "failed" and f"{Outcome.INDEXED}" == "indexed"
    assert IngestResult("a.txt", Outcome.DUPLICATE, "").ok and not IngestResult("a.txt", "failed", "").ok
