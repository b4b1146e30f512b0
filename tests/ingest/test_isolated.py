"""Reading in bounded, killable children (issue 38, item 1): ``knowledge.ingest.isolated``.

Real child processes, real kills: a reader past its memory limit and one past its deadline each end
as a failed file with its reason in words, the pool replaces the child, and the next file reads.
"""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import EmptyDocument, PasswordRequired, ReaderCrashed, ReaderLimitExceeded, UnsupportedFile
from knowledge.ingest.chunker import chunk_document
from knowledge.ingest.isolated import Chunking, ReaderPool, ReadLimits, read_bounded, read_in_process
from knowledge.ingest.readers import read_document
from tests.helpers.documents import encrypted_pdf

SMALL = b"# Owls\n\nOwls hunt mice at night.\n\n## Flight\n\nTheir flight is silent.\n"


def big_text(mb: int) -> bytes:
    """``mb`` MB of plain prose (lines of words), a text a reader must hold whole to read."""
    line = b"the quick brown fox jumps over the lazy dog while the owls hunt mice at night\n"
    return line * (mb * 1_000_000 // len(line))


@pytest.fixture
def pool():
    p = ReaderPool(1)
    yield p
    p.close()


def test_a_child_reads_and_chunks_as_the_calling_process_does(pool):
    emb = HashEmbedder(16, 32)
    r = pool.read(SMALL, "owls.md", limits=ReadLimits(), chunking=Chunking(emb, 24, 4))
    here = read_document(SMALL, "owls.md")
    assert r.document == here
    assert r.chunks is not None and r.chunks.chunks == chunk_document(here, emb, 24, 4).chunks
    assert r.peak_rss > 10 * 2**20  # a real process's memory was measured


def test_errors_of_the_reader_come_back_as_their_own_class_with_their_words(pool):
    with pytest.raises(EmptyDocument, match="empty"):
        pool.read(b"   \n", "blank.txt", limits=ReadLimits())
    with pytest.raises(UnsupportedFile, match="ZIP"):
        pool.read(b"PK\x03\x04 not really a zip", "x.zip", limits=ReadLimits())
    with pytest.raises(PasswordRequired):
        pool.read(encrypted_pdf("secret"), "locked.pdf", limits=ReadLimits())
    # the same child answered all three: a bad file does not cost a process
    assert pool.started == 1
    assert pool.read(encrypted_pdf("secret"), "locked.pdf", password="secret", limits=ReadLimits()).document.pages


def test_one_child_reads_many_files_without_a_process_start_each(pool):
    for i in range(20):
        assert f"file {i}" in pool.read(f"file {i}: words".encode(), f"f{i}.txt", limits=ReadLimits()).document.text
    assert pool.started == 1 and len(pool.children()) == 1


def test_past_its_memory_limit_the_child_is_killed_and_the_file_fails_with_the_reason(pool):
    pool.read(SMALL, "warm.md", limits=ReadLimits())
    first = pool.children()[0]
    with pytest.raises(ReaderLimitExceeded) as caught:
        pool.read(big_text(60), "huge.txt", limits=ReadLimits(memory_mb=64))
    message = str(caught.value)
    assert message.startswith("needed more than 64 MB of memory to read")
    assert "ingest.reader_memory_mb" in message and "Error" not in message
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE
    # the pool goes on with a new child
    assert pool.read(SMALL, "next.md", limits=ReadLimits()).document.title == "Owls"
    assert pool.started == 2


def test_past_its_deadline_the_child_is_killed_and_the_reason_says_how_long(pool):
    started = time.monotonic()
    with pytest.raises(ReaderLimitExceeded) as caught:
        pool.read(
            big_text(8),
            "slow.txt",
            limits=ReadLimits(timeout_seconds=0.3, seconds_per_mb=0),
            chunking=Chunking(HashEmbedder(16, 32), 24, 4),
        )
    assert time.monotonic() - started < 60  # stopped, not left to finish
    message = str(caught.value)
    assert message.startswith("took longer than 0.3 s to read (the limit for a file of 8.0 MB")
    assert pool.read(SMALL, "next.md", limits=ReadLimits()).document.title == "Owls"


def test_the_deadline_grows_with_the_files_size():
    limits = ReadLimits(timeout_seconds=10, seconds_per_mb=2)
    assert limits.deadline_seconds(0) == 10
    assert limits.deadline_seconds(50_000_000) == pytest.approx(110)


def test_the_reason_ends_with_what_the_reader_said_it_was_about_to_do(pool, monkeypatch):
    # A text reader announces nothing; a sentence from knowledge.ingest._cost.expect is what a killed
    # child's reason ends with. The readers call it before work whose size the file declares.
    from knowledge.ingest import _cost

    seen: list[str] = []
    _cost.listen(seen.append)
    try:
        _cost.expect("the workbook's used range is 1,048,576 × 16,384 cells")
    finally:
        _cost.listen(None)
    assert seen == ["the workbook's used range is 1,048,576 × 16,384 cells"]
    from knowledge.ingest.isolated import _limit_reason

    assert _limit_reason("needed more than 64 MB", seen[0]).endswith(
        ": the workbook's used range is 1,048,576 × 16,384 cells"
    )


def test_a_child_that_dies_is_a_failed_file_and_the_pool_replaces_it(pool):
    pool.read(SMALL, "warm.md", limits=ReadLimits())
    pid = pool.children()[0]
    victim = big_text(30)
    killed: list[int] = []

    def kill_once_it_works() -> None:  # called by the watchdog after the file was sent to the child
        if not killed:
            killed.append(pid)
            os.kill(pid, 9)

    with pytest.raises(ReaderCrashed) as caught:
        pool.read(
            victim,
            "victim.txt",
            limits=ReadLimits(),
            check=kill_once_it_works,
            chunking=Chunking(HashEmbedder(16, 32), 24, 4),
        )
    assert str(caught.value).startswith(
        "unreadable: the reader stopped unexpectedly (its process was killed by signal 9) while reading this file"
    )
    assert pool.read(SMALL, "next.md", limits=ReadLimits()).document.title == "Owls"
    assert pool.started == 2


def test_a_cancel_stops_the_child_at_once(pool):
    stop = threading.Event()
    long = big_text(30)
    threading.Timer(0.3, stop.set).start()

    class Cancelled(Exception):
        pass

    def check() -> None:
        if stop.is_set():
            raise Cancelled

    started = time.monotonic()
    with pytest.raises(Cancelled):
        pool.read(long, "long.txt", limits=ReadLimits(), check=check, chunking=Chunking(HashEmbedder(16, 32), 24, 4))
    assert time.monotonic() - started < 30
    assert pool.read(SMALL, "next.md", limits=ReadLimits()).document.title == "Owls"


def test_nothing_a_library_prints_reaches_the_protocol(pool, tmp_path):
    # The child's standard output is the protocol; a reader's print() must not corrupt it.
    for _ in range(3):
        assert pool.read(SMALL, "owls.md", limits=ReadLimits()).document.title == "Owls"


def test_read_bounded_with_no_processes_reads_here_and_an_embedder_without_twin_chunks_here(tmp_path):
    class Own(HashEmbedder):  # a subclass may tokenize differently: it has no twin
        pass

    emb = Own(16, 32)
    assert emb.tokenizer_twin() is None and HashEmbedder(16, 32).tokenizer_twin() is not None
    here = read_bounded(SMALL, "owls.md", processes=0, limits=ReadLimits(), chunking=Chunking(emb, 24, 4))
    there = read_bounded(SMALL, "owls.md", processes=1, limits=ReadLimits(), chunking=Chunking(emb, 24, 4))
    assert here.peak_rss == 0 and there.peak_rss > 0
    assert here.chunks is not None and there.chunks is not None
    assert [c.text for c in here.chunks.chunks] == [c.text for c in there.chunks.chunks]
    assert read_in_process(SMALL, "owls.md").document == there.document


def test_a_path_is_read_by_the_child_itself(pool, tmp_path):
    f = tmp_path / "owls.md"
    f.write_bytes(SMALL)
    with f.open("rb") as fh:
        assert pool.read(fh, "owls.md", limits=ReadLimits()).document.title == "Owls"
    assert pool.read(f, None, limits=ReadLimits()).document.title == "Owls"


@pytest.mark.model
def test_the_bundled_models_tokenizer_twin_chunks_exactly_as_the_model(tmp_path, pool):
    from knowledge.embeddings import BundledEmbedder

    bundled_embedder = BundledEmbedder(tmp_path / "models")
    text = ("Ownership is Rust's most unique feature. " * 40 + "\n\n" + "借用チェッカー。" * 50).encode()
    r = pool.read(text, "own.txt", limits=ReadLimits(), chunking=Chunking(bundled_embedder.tokenizer_twin(), 64, 16))
    here = chunk_document(read_document(text, "own.txt"), bundled_embedder, 64, 16)
    assert r.chunks is not None and r.chunks.chunks == here.chunks and len(here.chunks) > 5


def test_a_childs_peak_memory_is_its_own_not_the_parents_it_was_forked_from():
    """``ru_maxrss`` survives ``exec``: a child forked from a parent of 600 MB reported 600 MB for a
    small file (the CI's reader test once read 1.8 GB for a 400 MB read). The peak is ``VmHWM``."""
    ballast = bytearray(600 * 2**20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    pool = ReaderPool(1)
    try:
        r = pool.read(b"a small text file", "small.txt", limits=ReadLimits())
    finally:
        pool.close()
    del ballast
    assert r.document.text == "a small text file"
    assert 0 < r.peak_rss < 400 * 2**20
