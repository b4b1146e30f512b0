"""Every failure reads as words (issue 38): knowledge.errors.in_words / unexpected_problem turn a
Python or library exception -- raised for real here, by the library itself -- into a sentence
without its class name, and the places that show a failure use them."""

from __future__ import annotations

import io
import re
import struct
import xml.etree.ElementTree as ET
import zipfile
import zlib
from pathlib import Path

import pytest
from lxml import etree

from knowledge import errors
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, in_words, known_problem, set_log_place, unexpected_problem
from knowledge.outcomes import Outcome
from knowledge.workbench import Workbench

CLASS_NAME = re.compile(r"\b\w*(Error|Exception)\b|BadZipFile|KeyError")


def _raised(fn):
    try:
        fn()
    except BaseException as exc:  # the exception itself is the input
        return exc
    raise AssertionError("did not raise")


def _deep(n):
    return _deep(n + 1)


CASES = [
    (lambda: zipfile.ZipFile(io.BytesIO(b"PK\x03\x04 not a zip")), "the ZIP structure is damaged"),
    (lambda: struct.unpack("<I", b"ab"), "the file ends early or its structure is damaged"),
    (lambda: zlib.decompress(b"\x78\x9c garbage"), "its compressed data is damaged"),
    (lambda: etree.fromstring(b"<a>\n<b>\n</a>"), "its XML is malformed (line 3)"),
    (lambda: ET.fromstring("<a>\n\n<b>"), "its XML is malformed (line 3)"),
    (lambda: b"ok \xff".decode("utf-8"), "its text is not valid UTF-8 (byte 0xFF at position 3)"),
    (lambda: {}["word/document.xml"], "a part it refers to is missing (word/document.xml)"),
    (lambda: _deep(0), "it is nested too deeply to read"),
    (lambda: (_ for _ in ()).throw(MemoryError()), "it needed more memory than the reader may use"),
    (lambda: Path("/nonexistent/x.txt").read_bytes(), "it could not be read (No such file or directory)"),
    (lambda: (_ for _ in ()).throw(EOFError()), "the file ends early or its structure is damaged"),
]


@pytest.mark.parametrize("raise_it, words", CASES)
def test_library_exceptions_become_sentences(raise_it, words):
    exc = _raised(raise_it)
    assert in_words(exc) == words == unexpected_problem(exc)
    assert not CLASS_NAME.search(words)


def test_an_unknown_exception_keeps_its_message_without_its_class_and_a_bug_says_where_it_was_logged(monkeypatch):
    exc = _raised(lambda: int("x"))
    assert known_problem(exc) is None
    assert in_words(exc) == "its content is not what the format allows (invalid literal for int() with base 10: 'x')"
    assert in_words(AttributeError()) == "its structure is not what the reader expects"
    monkeypatch.setattr(errors, "_LOG_PLACE", None)
    assert unexpected_problem(exc) == "an unexpected problem while reading this file (a bug in the reader)"
    set_log_place("the ingest worker's log")
    assert unexpected_problem(exc).endswith("; it was recorded in the ingest worker's log")
    assert in_words(InvalidArgument("The file name contains U+202E.")) == "The file name contains U+202E."


def test_a_reader_bug_fails_its_file_in_words_and_the_batch_goes_on(tmp_path, monkeypatch, caplog):
    """A reader that raises what no one expected: the app's batch says so in words, says where it
    was logged, logs the traceback, keeps the class as the machine field, and reads the next file."""
    from knowledge.ingest import readers

    real = readers.read_document

    def flaky(source, name=None, *args, **kwargs):
        if str(name).endswith("bad.txt"):
            raise ValueError("internal state 7")
        return real(source, name, *args, **kwargs)

    monkeypatch.setattr(errors, "_LOG_PLACE", "the app's log")
    monkeypatch.setattr(readers, "read_document", flaky)
    from knowledge.ingest import isolated

    monkeypatch.setattr(isolated, "read_document", flaky)
    # in-process reading (the monkeypatch reaches this process only; the child's case is below)
    wb = Workbench(
        load_settings(data_dir=tmp_path / "data", ingest={"reader_processes": 0}),
        embedder_factory=lambda m: HashEmbedder(64, 64),
    )
    try:
        job = wb.submit_batch("kb", [("bad.txt", b"some words"), ("good.txt", b"other words")])
        assert job.wait(60)
        bad, good = (fp.result for fp in job.files)
        assert good.outcome == Outcome.INDEXED
        assert bad.outcome == Outcome.FAILED and bad.error == "ValueError"
        assert bad.message == (
            "bad.txt: an unexpected problem while reading this file (a bug in the reader); it was recorded in the app's log."
        ), bad.message
        assert "server log" not in bad.message and not CLASS_NAME.search(bad.message)
        assert "internal state 7" in caplog.text  # the traceback is in the log
        [rec] = [f for f in wb.store_files("kb") if f.file_name == "bad.txt"]
        assert rec.reason == bad.message.removeprefix("bad.txt: ") and rec.error == "ValueError"
    finally:
        wb.close()


_BUGGY_READER = """
from knowledge.ingest import readers
real = readers.read_document
def flaky(source, name=None, *args, **kwargs):
    if str(name).endswith("bad.txt"):
        raise ValueError("internal state 7")
    return real(source, name, *args, **kwargs)
readers.read_document = flaky  # before knowledge.ingest._child imports it
"""


def test_a_reader_bug_in_a_child_fails_its_file_in_words_and_its_trace_reaches_this_log(tmp_path, monkeypatch, caplog):
    """The same bug inside a reader child (planted by a sitecustomize module the child imports at
    start): the file fails in words naming this process's log, the traceback is logged here, the
    child lives on to read the next file."""
    from knowledge.ingest import isolated

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_BUGGY_READER)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setattr(errors, "_LOG_PLACE", "the app's log")
    isolated.shared_pool(1).close()  # children started from here on import the planted bug
    wb = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 64))
    try:
        job = wb.submit_batch("kb", [("bad.txt", b"some words"), ("good.txt", b"other words")])
        assert job.wait(60)
        bad, good = (fp.result for fp in job.files)
        assert good.outcome == Outcome.INDEXED
        assert bad.outcome == Outcome.FAILED
        assert bad.message.endswith(
            "an unexpected problem while reading this file (a bug in the reader); it was recorded in the app's log"
        ), bad.message
        assert not CLASS_NAME.search(bad.message)
        assert "internal state 7" in caplog.text and "Traceback" in caplog.text
    finally:
        wb.close()
        isolated.shared_pool(1).close()
