"""Reading files in bounded, killable child processes: no file can take ingestion down.

The idea is Apache Tika's ``ForkParser`` and ``tika-server -spawnChild``: the parse runs in a child
process with a watchdog, and a child that passes its memory or time limit is killed while the
caller carries on. Here a :class:`ReaderPool` keeps a few children (``python -m
knowledge.ingest._child``) alive between files, so a batch of small files pays no process start per
file. Each file is read (:func:`~knowledge.ingest.readers.read_document`) and, when the embedder's
tokenizer can travel (:meth:`Embedder.tokenizer_twin`), chunked
(:func:`~knowledge.ingest.chunker.chunk_document`) in one child.

The watchdog, in the calling thread, polls the child every :data:`POLL_SECONDS`:

* **memory**: the child's resident set size (``psutil``) past ``memory_mb`` MB (2^20 bytes) kills
  it; the child also sets its own address-space limit (``RLIMIT_AS``, a backstop for allocations
  faster than the poll: its size at start + twice the limit + :data:`ADDRESS_SLACK_MB`), past
  which an allocation fails with ``MemoryError`` and is reported the same way;
* **time**: ``timeout_seconds + seconds_per_mb × size in MB`` (10^6 bytes) from the moment the
  child takes the file; each page read by OCR gives ``timeout_seconds`` more from that page;
* **cancel**: the caller's ``check()`` raising (a cancelled batch) kills the child at once.

A killed or crashed child is replaced; the file fails with
:class:`~knowledge.errors.ReaderLimitExceeded` or :class:`~knowledge.errors.ReaderCrashed` and a
reason in words, ending with what the reader had said it was about to do
(:func:`knowledge.ingest._cost.expect`): "needed more than 3,072 MB of memory to read: the
workbook's used range is 1,048,576 × 16,384 cells". Nothing is written by a child: the caller
writes chunks only after a whole answer.

What crosses the pipes: the parent sends the child a pickle (the file's path or bytes, its name,
the password, the limits, the tokenizer twin — once per child); the child answers in JSON only
(orjson), so a child subverted by a hostile file cannot run code in the parent by its answer.
A child's standard output is the protocol; whatever a library prints goes to its standard error, a
temporary file whose tail is logged when a child dies.

POSIX only (``select`` on pipes, ``resource``); elsewhere, and with ``reader_processes = 0``,
files are read in the calling process (:func:`read_in_process`).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from knowledge.embeddings.base import Embedder
from knowledge.errors import (
    EmptyDocument,
    FileTooLarge,
    InvalidArgument,
    KnowledgeError,
    OcrUnavailable,
    PasswordRequired,
    ReaderCrashed,
    ReaderLimitExceeded,
    UnsupportedFile,
    log_place,
)
from knowledge.ingest.chunker import ChunkPlan, ChunkResult, TextChunk, chunk_document
from knowledge.ingest.document import Document, Section, Table
from knowledge.ingest.readers import load_source, read_document

log = logging.getLogger(__name__)

#: Seconds between two looks of the watchdog at a working child.
POLL_SECONDS = 0.02
#: MB of address space a child may reserve beyond twice its memory limit before allocations fail
#: (thread stacks, allocator arenas and libraries mapped later reserve more than they use).
ADDRESS_SLACK_MB = 1024
#: Files a child reads before it is replaced (returns memory a long batch fragmented).
MAX_TASKS_PER_CHILD = 500
#: Seconds a child waits for its next file before it exits (the pool starts another when needed).
IDLE_SECONDS = 300.0
#: Seconds a child may take to start and take its first file.
START_SECONDS = 60.0

#: Every message on a child's pipes is this 8-byte big-endian length, then that many bytes.
FRAME_HEADER = struct.Struct(">Q")
#: The errors a child may name, re-raised here as the same class (anything else: UnsupportedFile).
_ERRORS: dict[str, type[KnowledgeError]] = {
    c.__name__: c
    for c in (
        UnsupportedFile,
        OcrUnavailable,
        PasswordRequired,
        EmptyDocument,
        FileTooLarge,
        InvalidArgument,
        ReaderLimitExceeded,
    )
}
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the knowledge package


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """What one file's reading may cost: ``memory_mb`` MB (2^20 bytes) resident in its child, and
    ``timeout_seconds + seconds_per_mb × MB`` (10^6 bytes of the file) of wall-clock time."""

    memory_mb: int = 3072
    timeout_seconds: float = 120.0
    seconds_per_mb: float = 5.0

    def deadline_seconds(self, size: int) -> float:
        """Seconds allowed for a file of ``size`` bytes."""
        return self.timeout_seconds + self.seconds_per_mb * max(0, size) / 1_000_000

    @classmethod
    def from_settings(cls, ingest: Any) -> ReadLimits:
        """The limits of :class:`~knowledge.config.IngestSettings` ``ingest.reader_*``."""
        return cls(ingest.reader_memory_mb, ingest.reader_timeout_seconds, ingest.reader_seconds_per_mb)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """A file read (and chunked, when ``chunks`` is not ``None``), with the child's peak resident
    memory in bytes (``0`` when read in-process) and the seconds the chunking took (part of the read's)."""

    document: Document
    chunks: ChunkResult | None
    peak_rss: int = 0
    chunk_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Chunking:
    """Chunk in the child with ``embedder``'s tokenizer: ``max_tokens``/``overlap_tokens`` as
    :func:`~knowledge.ingest.chunker.chunk_document` takes them."""

    embedder: Embedder
    max_tokens: int
    overlap_tokens: int


def read_in_process(
    source: bytes | str | os.PathLike | BinaryIO,
    name: str | None,
    *,
    password: str | None = None,
    max_bytes: int | None = None,
    ocr: str = "auto",
    chunking: Chunking | None = None,
    on_page: Callable[[int, int], None] | None = None,
    tables: str = "auto",
) -> ReadResult:
    """Read (and chunk) in the calling process, unbounded: what a child does, without the child."""
    doc = read_document(
        source,
        name,
        password=password,
        max_bytes=max_bytes,
        ocr=ocr,  # type: ignore[arg-type]
        on_page=on_page,
        tables=tables,  # type: ignore[arg-type]
    )
    chunks = None
    started = time.perf_counter()
    if chunking is not None:
        chunks = chunk_document(doc, chunking.embedder, chunking.max_tokens, chunking.overlap_tokens)
    return ReadResult(doc, chunks, chunk_seconds=time.perf_counter() - started if chunking is not None else 0.0)


class _Child:
    """One child process and its pipes."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTHONUNBUFFERED"] = "1"
        self.stderr = tempfile.TemporaryFile(prefix="knowledge-reader-")  # noqa: SIM115 - lives as long as the child
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "knowledge.ingest._child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            close_fds=True,
            bufsize=0,
        )  # unbuffered: select() sees every byte
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.tasks = 0
        self.twins: set[str] = set()  # keys of the tokenizer twins this child has been sent
        self.last_rss = 0
        self.keep = False  # whether the pool keeps it after the current file
        self.ready = False  # it has said it started (then it takes each file as it comes)
        self.idle_since = time.monotonic()
        self._ps: Any = None  # its psutil.Process, made on the first look

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, message: dict[str, Any]) -> None:
        body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(self.stdin, FRAME_HEADER.pack(len(body)) + body if len(body) < 1 << 20 else FRAME_HEADER.pack(len(body)))
        if len(body) >= 1 << 20:  # a large file's bytes: not copied once more to join them
            _write_all(self.stdin, body)

    def receive(self) -> dict[str, Any] | None:
        """The child's next message; ``None`` when its pipe closed (it died or exited)."""
        head = read_exactly(self.stdout, FRAME_HEADER.size)
        if head is None:
            return None
        body = read_exactly(self.stdout, FRAME_HEADER.unpack(head)[0])
        if body is None:
            return None
        message = orjson.loads(body)
        return message if isinstance(message, dict) else None

    def readable(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.stdout], [], [], timeout)
        return bool(ready)

    def rss(self) -> int:
        try:
            if self._ps is None:
                import psutil  # noqa: PLC0415 - psutil's C module, loaded with the first child

                self._ps = psutil.Process(self.proc.pid)
            return int(self._ps.memory_info().rss)
        except Exception:  # gone between two looks
            return 0

    def stop(self, *, kill: bool) -> None:
        """End the child: at once (``kill``) or by closing its input (it exits when it reads EOF)."""
        with contextlib.suppress(Exception):
            if kill:
                self.proc.kill()
            self.stdin.close()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5 if not kill else 10)
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                self.proc.kill()
                self.proc.wait(timeout=10)
        with contextlib.suppress(Exception):
            self.stdout.close()

    def stderr_tail(self, limit: int = 2000) -> str:
        with contextlib.suppress(Exception):
            self.stderr.seek(0, io.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - limit))
            return self.stderr.read().decode("utf-8", "replace").strip()
        return ""

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stderr.close()


def _write_all(stream: Any, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = stream.write(view)
        view = view[written or 0 :]


def read_exactly(stream: Any, n: int) -> bytes | None:
    """``n`` bytes from ``stream`` (a pipe), or ``None`` when it ends first."""
    parts, got = [], 0
    while got < n:
        part = stream.read(n - got)
        if not part:
            return None
        parts.append(part)
        got += len(part)
    return b"".join(parts)


class _Retry(Exception):
    """A child that was idle-exiting took no file: try a fresh one."""


class ReaderPool:
    """Up to ``size`` child processes that read files, started when needed and kept between files.

    Thread-safe: each :meth:`read` takes a free child (or starts one, or waits for one) for the
    whole file. Use :func:`shared_pool` for the process's pool.
    """

    def __init__(self, size: int = 2) -> None:
        if size < 1:
            raise InvalidArgument(f"A reader pool needs at least one child, got {size}.")
        self.size = size
        self._free: list[_Child] = []
        self._busy = 0
        self._cond = threading.Condition()
        self._closed = False
        self.started = 0  # children started so far (a figure for tests and benchmarks)

    def resize(self, size: int) -> None:
        """Allow up to ``size`` children (never fewer than now allowed: a pool only grows)."""
        with self._cond:
            self.size = max(self.size, size)
            self._cond.notify_all()

    def read(
        self,
        source: bytes | str | os.PathLike | BinaryIO,
        name: str | None,
        *,
        limits: ReadLimits,
        password: str | None = None,
        max_bytes: int | None = None,
        ocr: str = "auto",
        chunking: Chunking | None = None,
        on_page: Callable[[int, int], None] | None = None,
        check: Callable[[], None] | None = None,
        tables: str = "auto",
    ) -> ReadResult:
        """Read ``source`` (and chunk it with ``chunking``) in a child, within ``limits``.

        Args:
            source: the file's bytes, its path, or a binary stream (read here, up to ``max_bytes`` + 1
                bytes, unless it is a file on disk, whose path the child opens itself).
            name, password, max_bytes, ocr, tables: as :func:`~knowledge.ingest.readers.read_document`.
            chunking: chunk in the child too; ``None`` reads only.
            on_page: ``on_page(done, total)`` while OCR reads pages.
            check: called while the child works; whatever it raises (a cancel) stops the child and
                is raised here.

        Returns:
            The :class:`ReadResult`: what ``read_document`` (and ``chunk_document``) return.

        Raises:
            ReaderLimitExceeded: the child passed ``limits`` and was stopped (the reason says which
                limit, and what the reader was doing).
            ReaderCrashed: the child died without answering (the reason gives its exit).
            The errors of :func:`~knowledge.ingest.readers.read_document` and of chunking, as the
            child raised them (``UnsupportedFile``, ``PasswordRequired``, ``EmptyDocument``, ...).
        """
        task: dict[str, Any] = {
            "op": "read",
            "name": name,
            "password": password,
            "max_bytes": max_bytes,
            "ocr": ocr,
            "tables": tables,
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "address_slack_bytes": ADDRESS_SLACK_MB * 1024 * 1024,
            "log_place": log_place(),
        }
        path = _disk_path(source)
        if path is not None:
            task["path"] = path
            size = _size_of(path)
        else:
            data = load_source(source, max_bytes)[0]  # the size refused here, before a child is asked
            task["data"] = data
            size = len(data)
        if chunking is not None:
            task["chunk"] = {
                "max_tokens": chunking.max_tokens,
                "overlap_tokens": chunking.overlap_tokens,
                "twin_id": _twin_key(chunking.embedder),
            }
        for attempt in range(3):
            child = self._take()
            child.keep = False
            try:
                return self._run(child, task, chunking, limits, size, on_page, check)
            except _Retry:
                if attempt == 2:
                    raise ReaderCrashed(
                        "unreadable: the reader could not be started (three children in a row ended before taking the file)"
                    ) from None
            finally:
                self._give_back(child, healthy=child.keep)
        raise AssertionError("unreachable")

    def _run(
        self,
        child: _Child,
        task: dict[str, Any],
        chunking: Chunking | None,
        limits: ReadLimits,
        size: int,
        on_page: Callable[[int, int], None] | None,
        check: Callable[[], None] | None,
    ) -> ReadResult:
        budget = limits.deadline_seconds(size)
        task = {**task, "deadline_seconds": budget, "page_seconds": limits.timeout_seconds}
        key = _twin_key(chunking.embedder) if chunking is not None else None
        if chunking is not None and key not in child.twins:
            task = {**task, "twin": chunking.embedder}
        try:
            child.send(task)
        except (BrokenPipeError, OSError):
            raise _Retry() from None
        if key is not None:
            child.twins.add(key)
        memory = limits.memory_mb * 1024 * 1024
        began = child.ready  # a child that has started takes the file at once
        start_by = time.monotonic() + START_SECONDS
        deadline = time.monotonic() + budget if began else float("inf")
        note: str | None = None
        peak = 0
        while True:
            if check is not None:
                check()  # raises to cancel: the caller's except kills the child
            now = time.monotonic()
            if not began and now > start_by:
                raise ReaderCrashed(f"unreadable: the reader did not start within {START_SECONDS:.0f} s")
            if began and now > deadline:
                self._kill(child)
                raise ReaderLimitExceeded(
                    _limit_reason(
                        f"took longer than {_seconds(budget)} to read (the limit for a file of {_size(size)};"
                        " the settings ingest.reader_timeout_seconds and reader_seconds_per_mb)",
                        note,
                    )
                )
            rss = child.rss()
            peak = max(peak, rss)
            if rss > memory:
                self._kill(child)
                raise ReaderLimitExceeded(
                    _limit_reason(
                        f"needed more than {limits.memory_mb:,} MB of memory to read (the setting ingest.reader_memory_mb)",
                        note,
                    )
                )
            if not child.readable(POLL_SECONDS):
                if not child.alive() and not child.readable(0):
                    return self._died(child, began, note)
                continue
            message = child.receive()
            if message is None:
                return self._died(child, began, note)
            kind = message.get("t")
            if kind == "ready":  # a new child has imported the readers and takes the file now
                child.ready = began = True
                deadline = time.monotonic() + budget
            elif kind == "note":
                note = str(message.get("text") or "")[:300] or note
            elif kind == "page":
                deadline = max(deadline, time.monotonic() + limits.timeout_seconds)
                if on_page is not None:
                    on_page(int(message.get("done", 0)), int(message.get("total", 0)))
            elif kind == "ok":
                child.last_rss = int(message.get("rss") or 0)
                peak = max(peak, int(message.get("peak") or 0), child.last_rss)
                result = ReadResult(
                    _document(message["doc"]),
                    None if message.get("chunks") is None else _chunks(message["chunks"], message["doc"]["text"]),
                    peak,
                    float(message.get("chunk_seconds") or 0.0),
                )
                child.keep = child.last_rss <= memory // 2
                return result
            elif kind == "error":
                cls = _ERRORS.get(str(message.get("class")), UnsupportedFile)
                text = str(message.get("message") or "unreadable")
                if message.get("trace"):  # a reader's bug: its traceback goes to this process's log
                    log.error("reading %s in a reader child: %s\n%s", name_of(task), text, message["trace"])
                if message.get("memory"):  # a MemoryError leaves a child in doubt: not kept
                    raise ReaderLimitExceeded(
                        _limit_reason(
                            f"needed more than {limits.memory_mb:,} MB of memory to read (the setting"
                            " ingest.reader_memory_mb)",
                            note,
                        )
                    )
                child.keep = child.alive()
                raise cls(text)

    def _died(self, child: _Child, began: bool, note: str | None) -> ReadResult:
        with contextlib.suppress(Exception):
            child.proc.wait(timeout=5)
        code = child.proc.poll()
        if code == 0 and (not began or (child.tasks > 0 and time.monotonic() - child.idle_since > IDLE_SECONDS - 5)):
            raise _Retry()  # it was leaving (idle) as the file came
        tail = child.stderr_tail()
        log.warning("a reader child (pid %s) ended with %s%s", child.pid, code, f":\n{tail}" if tail else "")
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
        raise ReaderCrashed(
            _limit_reason(f"unreadable: the reader stopped unexpectedly (its process {how}) while reading this file", note)
        )

    def _kill(self, child: _Child) -> None:
        child.stop(kill=True)

    def _take(self) -> _Child:
        with self._cond:
            while True:
                if self._closed:
                    raise ReaderCrashed("unreadable: the reader pool is closed (the program is stopping)")
                while self._free:
                    child = self._free.pop()
                    if child.alive():
                        self._busy += 1
                        return child
                    child.stop(kill=True)
                    child.close()
                if self._busy < self.size:
                    self._busy += 1
                    break
                self._cond.wait()
        try:
            child = _Child()
        except BaseException:
            with self._cond:
                self._busy -= 1
                self._cond.notify()
            raise
        self.started += 1
        return child

    def _give_back(self, child: _Child, *, healthy: bool) -> None:
        child.tasks += 1
        keep = healthy and child.alive() and child.tasks < MAX_TASKS_PER_CHILD and not self._closed
        if not keep:
            child.stop(kill=not child.alive() or not healthy)
            child.close()
        child.idle_since = time.monotonic()
        with self._cond:
            self._busy -= 1
            if keep:
                self._free.append(child)
            self._cond.notify()

    def children(self) -> list[int]:
        """The process ids of the idle children (for tests)."""
        with self._cond:
            return [c.pid for c in self._free if c.alive()]

    def close(self) -> None:
        """Stop every idle child; busy ones stop when their file ends."""
        with self._cond:
            self._closed = True
            free, self._free = self._free, []
            self._cond.notify_all()
        for child in free:
            child.stop(kill=False)
            child.close()


_shared: ReaderPool | None = None
_shared_lock = threading.Lock()


def shared_pool(size: int) -> ReaderPool:
    """This process's pool, allowing at least ``size`` children (made on first use; its idle
    children are stopped when the process exits)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared._closed:
            _shared = ReaderPool(size)
            atexit.register(_shared.close)
        else:
            _shared.resize(size)
        return _shared


def read_bounded(
    source: bytes | str | os.PathLike | BinaryIO,
    name: str | None,
    *,
    processes: int,
    limits: ReadLimits,
    password: str | None = None,
    max_bytes: int | None = None,
    ocr: str = "auto",
    chunking: Chunking | None = None,
    on_page: Callable[[int, int], None] | None = None,
    check: Callable[[], None] | None = None,
    tables: str = "auto",
) -> ReadResult:
    """Read (and chunk) a file the way the settings say: in this process's :class:`ReaderPool` of
    up to ``processes`` children within ``limits``, or in-process when ``processes`` is 0 or the
    platform has no POSIX pipes. A ``chunking`` whose embedder has no tokenizer twin is chunked here,
    after the child read the file. Raises what :meth:`ReaderPool.read` raises."""
    if processes < 1 or os.name != "posix":
        return read_in_process(
            source,
            name,
            password=password,
            max_bytes=max_bytes,
            ocr=ocr,
            chunking=chunking,
            on_page=on_page,
            tables=tables,
        )
    twin = _twin_of(chunking.embedder) if chunking is not None else None
    child_chunking = (
        Chunking(twin, chunking.max_tokens, chunking.overlap_tokens) if chunking is not None and twin is not None else None
    )
    result = shared_pool(processes).read(
        source,
        name,
        limits=limits,
        password=password,
        max_bytes=max_bytes,
        ocr=ocr,
        chunking=child_chunking,
        on_page=on_page,
        check=check,
        tables=tables,
    )
    if chunking is not None and result.chunks is None:
        started = time.perf_counter()
        chunks = chunk_document(result.document, chunking.embedder, chunking.max_tokens, chunking.overlap_tokens)
        result = ReadResult(result.document, chunks, result.peak_rss, time.perf_counter() - started)
    return result


_twins: weakref.WeakKeyDictionary[Embedder, Embedder | None] = weakref.WeakKeyDictionary()
_twin_keys: weakref.WeakKeyDictionary[Embedder, str] = weakref.WeakKeyDictionary()
_twins_lock = threading.Lock()


def _twin_of(embedder: Embedder) -> Embedder | None:
    """``embedder``'s tokenizer twin, made once per embedder."""
    with _twins_lock:
        try:
            return _twins[embedder]
        except (KeyError, TypeError):
            pass
    twin = embedder.tokenizer_twin()
    with _twins_lock, contextlib.suppress(TypeError):
        _twins[embedder] = twin
    return twin


def _twin_key(twin: Embedder) -> str:
    """A key naming ``twin`` in a child for as long as the twin lives (never an id a later object reuses)."""
    with _twins_lock:
        key = _twin_keys.get(twin)
        if key is None:
            key = _twin_keys[twin] = uuid.uuid4().hex
        return key


# -- what crosses the pipe (the child's side is knowledge.ingest._child) ---------------------------
def document_message(doc: Document) -> dict[str, Any]:
    """``doc`` as JSON-able lists and strings."""
    return {
        "text": doc.text,
        "format": doc.format,
        "pages": doc.pages,
        "warnings": list(doc.warnings),
        "title": doc.title,
        "attributes": dict(doc.attributes),
        "sections": [[s.char_start, s.char_end, s.page, s.heading] for s in doc.sections],
        "tables": [
            [
                t.char_start,
                t.header_end,
                t.char_end,
                t.page,
                None if t.bbox is None else list(t.bbox),
                [[page, list(box)] for page, box in t.overleaf],
            ]
            for t in doc.tables
        ],
    }


def chunks_message(result: ChunkResult, text: str) -> dict[str, Any]:
    """``result`` as JSON-able lists; a chunk's text is left out where it is the document's span
    (with the table header before it), and rebuilt from ``text`` by :func:`_chunks`."""
    rows = []
    for c in result.chunks:
        span = text[c.char_start : c.char_end]
        same = c.text == (f"{c.table_header}\n{span}" if c.table_header else span)
        rows.append(
            [
                c.index,
                None if same else c.text,
                c.char_start,
                c.char_end,
                c.tokens,
                c.page,
                c.heading,
                c.table_header,
                None if c.table_bbox is None else list(c.table_bbox),
            ]
        )
    return {
        "chunks": rows,
        "plan": [result.plan.max_tokens, result.plan.overlap_tokens, list(result.plan.notes)],
        "warnings": list(result.warnings),
    }


def _document(m: dict[str, Any]) -> Document:
    return Document(
        text=m["text"],
        sections=[Section(*s) for s in m["sections"]],
        format=m["format"],
        pages=m["pages"],
        warnings=list(m["warnings"]),
        title=m["title"],
        tables=[
            Table(s, h, e, page, None if box is None else _box(box), tuple((int(p), _box(b)) for p, b in overleaf))
            for s, h, e, page, box, overleaf in m["tables"]
        ],
        attributes=dict(m["attributes"]),
    )


def _box(values: list[float]) -> tuple[float, float, float, float]:
    x0, top, x1, bottom = (float(v) for v in values)
    return (x0, top, x1, bottom)


def _chunks(m: dict[str, Any], text: str) -> ChunkResult:
    chunks = []
    for index, own, start, end, tokens, page, heading, header, box in m["chunks"]:
        if own is None:
            span = text[start:end]
            own = f"{header}\n{span}" if header else span
        chunks.append(TextChunk(index, own, start, end, tokens, page, heading, header, None if box is None else _box(box)))
    max_tokens, overlap, notes = m["plan"]
    return ChunkResult(chunks, ChunkPlan(max_tokens, overlap, tuple(notes)), list(m["warnings"]))


def _disk_path(source: Any) -> str | None:
    """The path of a source that is a file on disk (a path, or a file object opened from one)."""
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    name = getattr(source, "name", None)
    if isinstance(source, io.BufferedReader) and isinstance(name, str) and os.path.isfile(name):
        with contextlib.suppress(OSError, ValueError):
            if source.tell() == 0:
                return name
    return None


def _size_of(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def name_of(task: dict[str, Any]) -> str:
    """The file a task reads, for the log."""
    return str(task.get("name") or task.get("path") or "a file")


def _limit_reason(what: str, note: str | None) -> str:
    return f"{what}: {note}" if note else what


def _seconds(s: float) -> str:
    return f"{s:,.0f} s" if s >= 10 else f"{s:.1f} s"


def _size(n: int) -> str:
    return f"{n / 1_000_000:,.1f} MB" if n >= 100_000 else f"{n / 1000:.1f} kB"
