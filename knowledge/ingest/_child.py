"""A reading child (``python -m knowledge.ingest._child``): the other end of :mod:`knowledge.ingest.isolated`.

Reads tasks (length-prefixed pickles from its parent) on standard input, answers in length-prefixed
JSON on the original standard output; whatever a library prints goes to standard error. Exits when
its input closes (the parent is gone), after :data:`~knowledge.ingest.isolated.IDLE_SECONDS`
without a task, after a ``MemoryError`` (its heap is in doubt), and :data:`GRACE_SECONDS` past a
file's deadline (SIGALRM: the parent kills it at the deadline, unless the parent is gone).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import resource
import select
import signal
import sys
import time
from typing import Any, BinaryIO

import orjson

from knowledge.errors import KnowledgeError, set_log_place, unexpected_problem
from knowledge.ingest._cost import listen, set_deadline
from knowledge.ingest.chunker import chunk_document
from knowledge.ingest.isolated import FRAME_HEADER, IDLE_SECONDS, chunks_message, document_message, read_exactly
from knowledge.ingest.readers import read_document


class _Out:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def send(self, message: dict[str, Any]) -> None:
        body = orjson.dumps(message)
        self.stream.write(FRAME_HEADER.pack(len(body)) + body)
        self.stream.flush()


def _receive(stream: Any) -> dict[str, Any] | None:
    head = read_exactly(stream, FRAME_HEADER.size)
    if head is None:
        return None
    body = read_exactly(stream, FRAME_HEADER.unpack(head)[0])
    if body is None:
        return None
    return pickle.loads(body)  # from the parent, which started this process: trusted


#: Seconds past its file's deadline after which a child ends itself (SIGALRM), should its parent
#: be gone and unable to kill it.
GRACE_SECONDS = 30.0


def _alarm(seconds: float) -> None:
    """End this process (SIGALRM's default action) ``seconds`` from now; ``0`` disarms it."""
    with contextlib.suppress(ValueError, OSError):
        signal.setitimer(signal.ITIMER_REAL, max(0.0, seconds))


def _statm(field: int) -> int:
    """Field ``field`` of /proc/self/statm (0: the address space, 1: resident) in bytes; 0 where
    there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _vm_bytes() -> int:
    return _statm(0)


def _rss_bytes() -> int:
    return _statm(1) or _peak_bytes()


def _peak_bytes() -> int:
    """This process's peak resident memory, in bytes: Linux's ``VmHWM`` (the high-water mark of
    this program's own memory, proc(5)), else ``ru_maxrss``. Not ``ru_maxrss`` on Linux: it is kept
    across ``exec``, so a child forked from a parent of 1.8 GB reports the parent's 1.8 GB."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak * (1 if sys.platform == "darwin" else 1024)


def _release_free_memory() -> None:
    """Hand memory the C allocator holds free back to the system (glibc's ``malloc_trim``), so a
    child kept between files is measured by what it still uses: after an OCR page its resident size
    fell from 688 to 219 MB. A no-op where the C library has no ``malloc_trim``."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes  # noqa: PLC0415 - only for glibc's malloc_trim
            import ctypes.util  # noqa: PLC0415

            _TRIM = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        with contextlib.suppress(Exception):
            _TRIM(0)


_TRIM: Any = None


def _limit_address_space(task: dict[str, Any]) -> None:
    """Limit this process's address space for one file: what it has mapped now (its readers,
    and what earlier files loaded, such as the OCR models) + twice the memory limit + slack."""
    base = _vm_bytes()
    if not base:
        return
    with contextlib.suppress(ValueError, OSError):
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = base + 2 * int(task["memory_bytes"]) + int(task.get("address_slack_bytes") or 0)
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def main() -> int:
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the terminal is the parent's to handle
    out = _Out(os.fdopen(os.dup(1), "wb"))
    os.dup2(2, 1)  # print() of a library lands in the log, never in the protocol
    stdin = os.fdopen(0, "rb", buffering=0)  # unbuffered: select() sees every byte
    twins: dict[int, Any] = {}
    address_limit = resource.getrlimit(resource.RLIMIT_AS)
    listen(lambda text: out.send({"t": "note", "text": text}))
    out.send({"t": "ready"})  # the readers are imported: each file from now on is read as it comes
    while True:
        ready, _, _ = select.select([stdin], [], [], IDLE_SECONDS)
        if not ready:
            return 0  # idle: the pool starts another child when it needs one
        task = _receive(stdin)
        if task is None:
            return 0  # the parent closed the pipe
        _limit_address_space(task)
        set_log_place(task.get("log_place"))  # the parent logs a reader's bug (the trace it is sent)
        deadline_seconds = float(task.get("deadline_seconds") or 0)
        _alarm(deadline_seconds + GRACE_SECONDS)
        set_deadline(time.monotonic() + deadline_seconds if deadline_seconds else None)
        try:
            chunk = task.get("chunk")
            if chunk is not None and "twin" in task:
                twins[chunk["twin_id"]] = task["twin"]
            source = task["path"] if "path" in task else task["data"]

            page_seconds = float(task.get("page_seconds") or 0)

            def on_page(done: int, total: int, page_seconds: float = page_seconds) -> None:
                out.send({"t": "page", "done": done, "total": total})
                left = signal.getitimer(signal.ITIMER_REAL)[0]  # each OCR page gets the timeout again
                _alarm(max(left, page_seconds + GRACE_SECONDS))
                set_deadline(time.monotonic() + max(left - GRACE_SECONDS, page_seconds))

            doc = read_document(
                source,
                task.get("name"),
                password=task.get("password"),
                max_bytes=task.get("max_bytes"),
                ocr=task.get("ocr", "auto"),
                on_page=on_page,
                tables=task.get("tables", "auto"),
            )
            del source
            task.pop("data", None)
            chunks = None
            chunk_started = time.perf_counter()
            if chunk is not None:
                chunks = chunks_message(
                    chunk_document(doc, twins[chunk["twin_id"]], chunk["max_tokens"], chunk["overlap_tokens"]), doc.text
                )
            chunk_seconds = time.perf_counter() - chunk_started if chunk is not None else 0.0
            message = {"t": "ok", "doc": document_message(doc), "chunks": chunks, "chunk_seconds": chunk_seconds}
            del doc, chunks
            _release_free_memory()  # what the file left behind is measured, not the allocator's free lists
            out.send({**message, "rss": _rss_bytes(), "peak": _peak_bytes()})
        except MemoryError:
            out.send({"t": "error", "class": "ReaderLimitExceeded", "memory": True, "message": "out of memory"})
            return 3
        except KnowledgeError as exc:
            out.send({"t": "error", "class": type(exc).__name__, "message": str(exc)})
        except RecursionError:
            out.send(
                {
                    "t": "error",
                    "class": "UnsupportedFile",
                    "message": "unreadable: its structure is nested too deeply to read",
                }
            )
        except Exception as exc:  # a reader's bug: the file fails with words, the child lives on
            import traceback  # noqa: PLC0415 - only on a reader's bug

            out.send(
                {
                    "t": "error",
                    "class": "UnsupportedFile",
                    "message": unexpected_problem(exc),
                    "trace": traceback.format_exc()[-8000:],
                }
            )
        finally:
            _alarm(0)
            set_deadline(None)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(resource.RLIMIT_AS, address_limit)


if __name__ == "__main__":
    sys.exit(main())
