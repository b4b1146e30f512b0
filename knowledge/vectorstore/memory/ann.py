"""The approximate-search graph of one loaded store of the memory backend: an HNSW graph (usearch)
keyed by stable *slots*, its persisted copy in the store's ``ann/`` folder, and the background
indexer thread that keeps it up with the rows. Results are always rescored exactly in float32 by
the caller; see ``docs/local-backend.md`` (Approximate search).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from knowledge._fs import fsync_dir

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.vectorstore.memory.state import LoadedPoints

log = logging.getLogger(__name__)

#: The store's persisted graph: a sub-folder of the store's folder.
ANN_DIR = "ann"
ANN_STATE = "state.json"
#: Version of the persisted graph's format (``"format"`` in ``ann/state.json``).
ANN_FORMAT = 1
#: Graph metric and vector type per store distance. Cosine stores hold unit vectors, which int8
#: codes (usearch scales [-1, 1] to [-127, 127]) keep well: a quarter of float32's memory and the
#: fastest distance; dot and euclid vectors have any norm, so float16. Every candidate is rescored
#: exactly from the store's float32 matrix, so the codes change which candidates are found, never
#: a score. Manhattan has no usearch metric: those stores always search exactly.
METRICS = {"cosine": ("cos", "i8"), "dot": ("ip", "f16"), "euclid": ("l2sq", "f16")}
#: HNSW parameters: M (usearch "connectivity") and efConstruction ("expansion_add"), the defaults of
#: hnswlib/usearch; chosen on figures in docs/benchmarks.md (Approximate search).
CONNECTIVITY = 16
EXPANSION_ADD = 128
#: Rows added to the graph per step of the indexer. usearch 2.19's ``add`` holds the GIL, so every
#: other thread of the process (searches, writes) waits for one step: keep it small.
ADD_CHUNK = 64
#: Seconds a store's writes must have paused before the indexer adds rows to its graph: a bulk
#: ingestion keeps today's write rate (an ``add`` step holding the GIL would take turns with every
#: batch) and the rows it writes meanwhile are searched exactly, as the graph's tail.
WRITE_QUIET_SECONDS = 1.0
#: Threads of one ``add`` step (bounded: the machine also serves searches and ingestion).
ADD_THREADS = max(1, min(2, os.cpu_count() or 1))
#: The indexer saves the graph when it has added this many rows since the last save (and the
#: graph has caught up), besides saving when the store is unloaded or the backend closes.
SAVE_AFTER_ROWS = 20_000
#: Files in ``ann/`` that are not the current graph are deleted by a save once this old (another
#: process may be writing its own graph right now).
STALE_FILE_SECONDS = 30.0


@functools.cache
def available() -> bool:
    """Whether usearch imports (once per process; a broken install searches exactly, logged)."""
    try:
        import usearch.index  # noqa: F401, PLC0415 - only when a store is large enough for a graph
    except ImportError as exc:
        log.warning("memory backend: approximate search off, usearch cannot be imported (%s)", exc)
        return False
    return True


def candidates(k: int) -> int:
    """Graph candidates fetched for a top-``k`` search before exact rescoring (recall@10 >= 0.99
    on the clustered 100,000 x 384 set at this count; docs/benchmarks.md)."""
    return max(4 * k, 40)


class GraphIndex:
    """An HNSW graph over some of a store's rows, keyed by slot (``uint64`` keys in usearch).

    ``upto``: every slot below it was added (or was dead when reached); the rows of slots at or above
    it are the *tail*, searched exactly. ``lock`` guards the usearch index (it is not safe for
    concurrent add/search from several Python threads).
    """

    def __init__(self, size: int, distance: str, index: Any = None) -> None:
        from usearch.index import Index  # noqa: PLC0415 - loaded only for stores that get a graph

        self.size = size
        self.distance = distance
        metric, dtype = METRICS[distance]
        self.index = (
            index
            if index is not None
            else Index(ndim=size, metric=metric, dtype=dtype, connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD)
        )
        self.lock = threading.Lock()
        self.upto = 0
        self.added_since_save = 0
        self.saved = False  # in step with a persisted copy (loaded from one, or saved since)

    def __len__(self) -> int:
        return len(self.index)

    def add(self, slots: np.ndarray, vectors: np.ndarray) -> None:
        """Add ``(m,)`` int64 slots with their ``(m, size)`` float32 vectors."""
        if len(slots):
            with self.lock:
                self.index.add(slots.astype(np.uint64), vectors, threads=ADD_THREADS)
            self.added_since_save += len(slots)
            self.saved = False

    def remove(self, slots: list[int]) -> None:
        if slots:
            with self.lock:
                self.index.remove(np.asarray(slots, dtype=np.uint64))
            self.saved = False

    def search(self, q: np.ndarray, count: int) -> np.ndarray:
        """Slots of about ``count`` approximate nearest neighbours of ``q`` (``(size,)`` float32),
        ``int64``; the caller maps them to rows and rescores them exactly."""
        with self.lock:
            self.index.expansion_search = max(count, 64)  # type: ignore[misc]  # a setter mypy misses
            found = self.index.search(q, count, threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    def to_bytes(self) -> bytes:
        with self.lock:
            data = self.index.save()
        if data is None:  # pragma: no cover - save() without a path returns the bytes
            raise OSError("usearch returned no serialised graph")
        return bytes(data)


# ---------------------------------------------------------------------------------------------
# The persisted graph: ann/state.json (the stamp, the slot map, the graph file's name and crc32)
# and ann/graph-<nonce>.usearch. state.json is replaced atomically (tmp + fsync + rename), so a
# killed save leaves the previous state, whose graph file it still names.
# ---------------------------------------------------------------------------------------------


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def save(folder: Path, graph: GraphIndex, stamp: dict[str, Any], slots: np.ndarray, ids: list[Any]) -> None:
    """Persist ``graph`` (which covers exactly the live rows ``ids`` with ``slots``, ascending) as
    the state ``stamp`` (``incarnation``, ``generation``). Raises ``OSError``."""
    folder.mkdir(exist_ok=True)
    data = graph.to_bytes()
    nonce = uuid.uuid4().hex[:12]
    graph_name = f"graph-{nonce}.usearch"
    _write_file(folder / graph_name, data)
    state = {
        "format": ANN_FORMAT,
        **stamp,
        "size": graph.size,
        "distance": graph.distance,
        "dtype": METRICS[graph.distance][1],
        "graph": graph_name,
        "graph_bytes": len(data),
        "graph_crc32": zlib.crc32(data),
        "upto": graph.upto,
        "slots": slots.tolist(),
        "ids": ids,
    }
    tmp = folder / f"{ANN_STATE}.tmp-{nonce}"
    _write_file(tmp, orjson.dumps(state))
    previous = _graph_name(folder)
    os.replace(tmp, folder / ANN_STATE)
    fsync_dir(folder)
    graph.added_since_save = 0
    graph.saved = True
    if previous and previous != graph_name:
        with contextlib.suppress(OSError):
            os.unlink(folder / previous)
    _remove_stale(folder, keep={ANN_STATE, graph_name})


def _graph_name(folder: Path) -> str | None:
    with contextlib.suppress(OSError, orjson.JSONDecodeError, AttributeError):
        name = orjson.loads((folder / ANN_STATE).read_bytes()).get("graph")
        if isinstance(name, str) and name.startswith("graph-") and "/" not in name:
            return name
    return None


def _remove_stale(folder: Path, keep: set[str]) -> None:
    """Delete files of killed saves (and graphs no state names), once old enough that no other
    process can still be writing them."""
    current = _graph_name(folder)
    if current:
        keep = keep | {current}
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.name in keep:
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime > STALE_FILE_SECONDS:
                    os.unlink(entry.path)


class Unusable(Exception):
    """The persisted graph is missing, unreadable or of another state: rebuild it."""


def read(folder: Path, stamp: dict[str, Any], size: int, distance: str) -> tuple[GraphIndex, np.ndarray, list[Any]]:
    """The persisted graph if it is of state ``stamp``: the graph, its slots and ids (rows in
    order). Raises :class:`Unusable` saying why not (never anything else for a bad file)."""
    try:
        state = orjson.loads((folder / ANN_STATE).read_bytes())
    except FileNotFoundError:
        raise Unusable("missing") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise Unusable(f"unreadable {ANN_STATE} ({exc})") from None
    if not isinstance(state, dict) or state.get("format") != ANN_FORMAT:
        raise Unusable(f"{ANN_STATE} of another format")
    if (state.get("incarnation"), state.get("generation")) != (stamp["incarnation"], stamp["generation"]):
        raise Unusable(f"stale (saved at generation {state.get('generation')}, the store is at {stamp['generation']})")
    if (state.get("size"), state.get("distance"), state.get("dtype")) != (size, distance, METRICS[distance][1]):
        raise Unusable("of another size, distance or dtype")
    name = state.get("graph")
    if not isinstance(name, str) or "/" in name or not name.startswith("graph-"):
        raise Unusable(f"{ANN_STATE} names no graph file")
    try:
        data = (folder / name).read_bytes()
    except OSError as exc:
        raise Unusable(f"graph file unreadable ({exc})") from None
    if len(data) != state.get("graph_bytes") or zlib.crc32(data) != state.get("graph_crc32"):
        raise Unusable("graph file damaged (size or checksum differs)")
    slots, ids, upto = state.get("slots"), state.get("ids"), state.get("upto")
    if not isinstance(slots, list) or not isinstance(ids, list) or len(slots) != len(ids) or not isinstance(upto, int):
        raise Unusable(f"{ANN_STATE} has no valid slot map")
    try:
        from usearch.index import Index  # noqa: PLC0415 - loaded only for stores that get a graph

        index = Index.restore(data)
        slot_arr = np.asarray(slots, dtype=np.int64)
    except Exception as exc:
        raise Unusable(f"graph file unreadable ({exc})") from None
    if index is None or index.ndim != size:
        raise Unusable("graph file of another shape")
    if len(slot_arr) > 1 and not bool(np.all(np.diff(slot_arr) > 0)):
        raise Unusable(f"{ANN_STATE} has slots out of order")
    if len(slot_arr) and (slot_arr[0] < 0 or slot_arr[-1] >= upto):
        raise Unusable(f"{ANN_STATE} has slots beyond the graph")
    graph = GraphIndex(size, distance, index)
    graph.upto = upto
    graph.saved = True
    return graph, slot_arr, ids


# ---------------------------------------------------------------------------------------------
# The background indexer: one low-priority thread per backend
# ---------------------------------------------------------------------------------------------


class Indexer:
    """One daemon thread that runs ``step()`` of scheduled stores until each says it is done.

    ``schedule(key, step)``: ``step() -> bool`` does one bounded piece of work and returns whether
    more is left. The thread lowers its own priority (``nice`` + 10 where the OS allows) so that
    searches and writes of the same process go first.
    """

    def __init__(self) -> None:
        self._work: dict[int, Callable[[], bool]] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def schedule(self, key: int, step: Callable[[], bool]) -> None:
        with self._cond:
            if self._closed:
                return
            self._work[key] = step
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="knowledge-memory-indexer", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        with contextlib.suppress(Exception):  # Linux: per-thread nice; elsewhere best effort
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            with self._cond:
                while not self._work and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                key, step = next(iter(self._work.items()))
                del self._work[key]
            try:
                more = step()
            except Exception:  # never let the indexer die; the store searches exactly meanwhile
                log.exception("memory backend: background indexing step failed")
                more = False
            if more:
                with self._cond:
                    self._work.setdefault(key, step)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._work.clear()
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)


def tail_rows(loaded: LoadedPoints, upto: int) -> np.ndarray:
    """Live rows whose slot is ``>= upto`` (not yet in the graph), ascending ``int64``."""
    n = loaded.n
    start = int(np.searchsorted(loaded.slot_of_row[:n], upto))
    rows = np.arange(start, n, dtype=np.int64)
    return rows[loaded.alive[start:n]]
