"""The built-in ``memory`` backend: exact numpy search over stores kept as files on disk.

Chunks live on disk, vectors are loaded into memory lazily and unloaded again when a store has been
idle for ``vector_store.idle_seconds``; a store holds at most ``vector_store.max_chunks_per_store``
points (larger corpora belong on pgvector). No server, no extra dependency beyond numpy, orjson and
filelock.

On-disk layout (under ``settings.vector_store_dir``)::

    vector-stores/
      .locks/<folder>.lock            inter-process write lock of one store (never deleted)
      team-notes-3f9a1c0b2d4e/        one folder per store: readable slug + 12 hex of sha256(name)
        manifest.json                 the commit point: name, size, distance, generation, segments
        seg-000001.jsonl              a header line, then one {"id": .., "payload": ..} line per point
        seg-000001.npy                the same points' vectors, (rows, size) float32, row for row
        seg-000002.jsonl              ...
        lexical/                      the store's BM25 index (tantivy), kept by every write once a
                                      lexical search or a chunk store created it (see lexical_search)

The folder name is a readable slug of the store's name plus a hash of the *exact* name, so any
Unicode name works, ``"Team Notes"`` and ``"team notes"`` get different folders (even on a
case-insensitive file system: the hash is lower-case hex) and ``"../x"`` never leaves the root. The
exact name is kept in the manifest, which is what :meth:`MemoryBackend.list_collections` reads. Lock
files live in ``.locks/`` rather than in the store folder so that dropping a store (deleting its
folder) never deletes a lock file another process may be waiting on.

Log-structured segments
-----------------------
Every write (upsert, remove, replace) is one *segment*: a JSONL file and, when it adds points, an
``.npy`` of their vectors. The JSONL is the source of truth for ids and payloads and stays readable
with ``head``/``jq``; the vectors are binary float32 so a cold load never parses floats from text
(``np.load`` of 100k x 384 takes tens of ms, parsing the same numbers from JSON ~9 s). The first
line of every JSONL is a header ``{"segment", "incarnation", "first_gen", "last_gen", "deleted"}``;
it is always written (not only when something is deleted) so that a segment names itself and a
reader can tell a stale file from the one the manifest means. Embeddings are computed once: nothing
here ever recomputes or drops a vector except by the user's own remove/replace. For ``cosine`` the
stored vectors are L2-normalised (so :meth:`Collection.retrieve` returns unit vectors, as qdrant does).

Commit protocol (crash safety). A write, holding the store's lock: (1) deletes orphan files left by
an earlier crash, (2) writes the new segment files and fsyncs them, (3) writes ``manifest.json.tmp``
(old segment list + the new one, generation + 1) and fsyncs it, (4) ``os.replace``\\ s it over
``manifest.json`` -- *the commit point* -- and (5) fsyncs the folder. A process killed anywhere
before (4) leaves the old manifest, which lists only complete files; killed after (4), the new one.
Readers read only what the manifest lists, so a store is always readable and holds the old or the new
version of a batch, never part of one.

Why segments rather than one file per store: appending to a single JSONL (and a single vector file)
cannot make a replace -- deletes plus inserts across two files -- atomic without a commit record,
and rewriting the whole store per write costs O(n) per ingested file. Immutable segments plus one
manifest swap give an atomic, O(batch) write of any shape, and an easy answer to "what did another
process change": the segments after my generation.

Loading replays the manifest's segments in order: a segment's deleted ids first, then its points;
the last write of an id wins. Row order in memory is therefore "order of last write", which is also
the tie-break order of search and the order of :meth:`~MemoryCollection.scroll`. A load parses the
JSONL with orjson with the cyclic GC paused, while a thread reads the ``.npy`` files straight into
one preallocated matrix. Payloads are kept as their JSON round trip, i.e. what a reload will see
(tuples come back as lists; orjson writes NaN/inf as ``null``), which also makes them private copies.

Compaction keeps the segment count and the dead rows bounded: after a write, when the newest
segment and the run of segments before it that are no bigger (in size tiers of powers of 16 rows)
number at least :data:`MERGE_FACTOR`, that run is merged into one (size-tiered merging as in LSM
trees, e.g. Cassandra's SizeTieredCompactionStrategy), so each point is rewritten about
log_16(n / batch) times; and when the dead rows on disk exceed the live ones (or there are more than
:data:`MAX_SEGMENTS` segments) every segment is rewritten as one. A merge reads the segment files
(not memory), writes the merged one and commits it with the same manifest swap; it changes no
point, so readers keep their loaded state.

Concurrency
-----------
* Threads: each store has one re-entrant lock guarding its in-memory state. Searches, counts and
  scrolls run under it; a write does its disk work *outside* it (so readers are not blocked by
  fsync) and then swaps the manifest and applies the batch to memory under it in one step. A reader
  therefore sees the old or the new full set, never a mix and never nothing in between.
* Processes: writes hold an inter-process lock (``filelock``) with a timeout, raising
  :class:`~knowledge.errors.StoreLocked` naming the store. Before every operation a process checks
  whether another one has committed: it ``stat``\\ s the manifest and, when the stat changed or the
  manifest was written less than 3 s ago (the "racy git" rule: within the file system's timestamp
  granularity a stat cannot prove that nothing changed), re-reads its bytes. A new manifest with a
  higher generation is applied incrementally by reading just the new segments; a dropped and
  recreated store (new incarnation) or a merge straddling the loaded generation causes a reload.

Search
------
Exact search in numpy over the ``(n, d)`` float32 matrix, after qdrant-client's local mode
(``qdrant_client/local/local_collection.py``: a float32 matrix, an id -> row map and a deleted
mask). Scores follow :data:`~knowledge.vectorstore.base.DISTANCE_ORDER`: cosine similarity and dot
product (higher is better), Euclidean L2 and Manhattan L1 distance (lower is better). Filters are
applied *before* ranking, so a filtered search returns ``limit`` hits whenever ``limit`` points
match; ``where`` uses a per-field value -> rows index built lazily on first use, ``raw_filter`` is a
predicate called on each live payload. Ties are broken by row (insertion) order, so results are
deterministic.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import orjson
from filelock import FileLock, Timeout

from knowledge._fs import fsync_dir
from knowledge.lexical import LEXICAL_FORMAT, Batch, DiskLexicon, LexiconUnreadable, analyzer
from knowledge.errors import (
    DimensionMismatch,
    InvalidArgument,
    StorageError,
    StoreCorrupt,
    StoreFull,
    StoreLocked,
    StoreNotFound,
)
from knowledge.vectorstore.base import (
    Collection,
    CollectionInfo,
    Distance,
    Point,
    PointId,
    ScoredPoint,
    VectorBackend,
    check_name,
    check_prepared,
    check_vector_size,
    matches,
    name_slug,
    stack_points,
)
from knowledge.vectorstore.scoring import (
    DISTANCE_ORDER,
    clamp_cosine,
    euclid_exact,
    manhattan,
    normalise_rows,
    passes_threshold,
    prepare_query,
    top_k,
)

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.config import Settings

log = logging.getLogger(__name__)

#: Version of the on-disk format written by this module (``"format"`` in ``manifest.json``).
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MANIFEST_TMP = "manifest.json.tmp"
#: The store's persisted BM25 index (tantivy), a sub-folder of the store's folder.
LEXICAL_DIR = "lexical"
LOCKS_DIR = ".locks"
#: A run of this many newest segments of one size tier (powers of 16 rows) is merged into one.
MERGE_FACTOR = 16
#: More segments than this and the whole store is rewritten as one segment.
MAX_SEGMENTS = 96
#: Dead rows on disk tolerated before a full rewrite, at least (and at least the live rows).
MIN_GARBAGE_ROWS = 1024

_SEGMENT_FILE = re.compile(r"^seg-(\d+)\.(jsonl|npy)$")
_RACY_NS = 3_000_000_000  # a manifest written more recently than this is re-read on every check
_LOAD_ATTEMPTS = 6
_EUCLID_SLACK = 8  # extra candidates re-ranked with exact distances (euclid)


def folder_name(name: str) -> str:
    """The folder of the store called ``name``: a readable ASCII slug + 12 hex digits of its sha256.

    >>> folder_name("Team Notes")[:11]
    'team-notes-'
    """
    return name_slug(name, "-")


def _index_key(value: Any) -> tuple[int, Any] | None:
    """Hashable key with the equality of :func:`~knowledge.vectorstore.base.matches`.

    ``True`` and ``1`` differ (JSON), ``1`` and ``1.0`` are equal; lists and dicts never match a
    scalar, so they are not indexed.
    """
    if value is None:
        return (0, None)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, (int, float)):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    return None


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while building many objects (it would traverse them again and again)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _seg_paths(folder: Path, seg: int) -> tuple[Path, Path]:
    return folder / f"seg-{seg:06d}.jsonl", folder / f"seg-{seg:06d}.npy"


_ID_PREFIX = b'{"id":'
_PAYLOAD_KEY = b',"payload":'


def _line_id(line: bytes) -> PointId:
    """The id of a JSONL point line without parsing its payload.

    Lines are written as ``{"id":<id>,"payload":...}``; ``,"payload":`` cannot occur inside the JSON
    token of a string id (its quote would be escaped), so the id is what lies between the two.
    Anything else is parsed in full.
    """
    if line.startswith(_ID_PREFIX):
        end = line.find(_PAYLOAD_KEY, 6)
        if end > 6:
            return orjson.loads(line[6:end])
    return orjson.loads(line)["id"]


class _Stale(Exception):
    """A file the manifest lists is gone or belongs to another version: re-read the manifest."""


# ---------------------------------------------------------------------------------------------
# In-memory state of one loaded store
# ---------------------------------------------------------------------------------------------


class _State:
    """The loaded points of one store: rows ``[0, n)`` of a growable float32 matrix.

    ``vectors`` is ``(capacity, size)`` float32 (L2-normalised for cosine); ``alive[r]`` says
    whether row ``r`` is live; ``ids``/``payloads`` are per row; ``row_of`` maps each live id to
    its row. Dead rows stay until :meth:`compact`. Guarded by the collection's lock.
    """

    def __init__(self, size: int, distance: str, capacity: int) -> None:
        capacity = max(int(capacity), 16)
        self.size = size
        self.distance = distance
        self.vectors = np.empty((capacity, size), dtype=np.float32)
        self.alive = np.zeros(capacity, dtype=bool)
        self.n = 0
        self.ids: list[PointId] = []
        self.payloads: list[dict[str, Any]] = []
        self.row_of: dict[PointId, int] = {}
        self.dead = 0
        self.sqnorms: np.ndarray | None = None  # (n,) float32 squared norms, euclid only, lazily
        self.indexes: dict[str, dict[tuple[int, Any], list[int]]] = {}
        self.generation = 0
        self.incarnation = ""

    @property
    def live(self) -> int:
        return len(self.row_of)

    def reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = self.vectors.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        vectors = np.empty((new_cap, self.size), dtype=np.float32)
        vectors[: self.n] = self.vectors[: self.n]
        alive = np.zeros(new_cap, dtype=bool)
        alive[: self.n] = self.alive[: self.n]
        self.vectors, self.alive = vectors, alive

    def place(self, deleted: Sequence[PointId], ids: list[PointId], payloads: list[dict]) -> None:
        """Replay one batch whose vectors are already in rows ``[n, n + len(ids))``."""
        row_of, alive = self.row_of, self.alive
        for pid in deleted:
            row = row_of.pop(pid, None)
            if row is not None:
                alive[row] = False
                self.dead += 1
        base = self.n
        m = len(ids)
        if not m:
            return
        alive[base : base + m] = True
        dead = 0
        for j, pid in enumerate(ids, base):
            old = row_of.get(pid)
            if old is not None:
                alive[old] = False
                dead += 1
            row_of[pid] = j
        self.dead += dead
        self.ids.extend(ids)
        self.payloads.extend(payloads)
        self.n = base + m
        if self.sqnorms is not None:
            new = self.vectors[base : self.n]
            self.sqnorms = np.concatenate([self.sqnorms, np.einsum("ij,ij->i", new, new)])
        for field, index in self.indexes.items():
            for j, payload in enumerate(payloads, base):
                if field in payload:
                    key = _index_key(payload[field])
                    if key is not None:
                        index.setdefault(key, []).append(j)

    def append(self, deleted: Sequence[PointId], ids: list[PointId], payloads: list[dict],
               vectors: np.ndarray) -> None:
        """Apply one batch: delete ``deleted``, then insert the rows (last write of an id wins)."""
        self.reserve(len(ids))
        if len(ids):
            self.vectors[self.n : self.n + len(ids)] = vectors
        self.place(deleted, ids, payloads)

    def compact(self) -> None:
        """Drop dead rows, keeping the live ones in order (so tie order does not change)."""
        keep = np.flatnonzero(self.alive[: self.n])
        live = len(keep)
        vectors = np.empty((max(16, live + max(64, live // 8)), self.size), dtype=np.float32)
        np.take(self.vectors, keep, axis=0, out=vectors[:live])
        self.vectors = vectors
        self.alive = np.zeros(vectors.shape[0], dtype=bool)
        self.alive[:live] = True
        rows = keep.tolist()
        self.ids = [self.ids[r] for r in rows]
        self.payloads = [self.payloads[r] for r in rows]
        self.row_of = {pid: r for r, pid in enumerate(self.ids)}
        if self.sqnorms is not None:
            self.sqnorms = self.sqnorms[keep]
        self.indexes.clear()
        self.n = live
        self.dead = 0

    def index(self, field: str) -> dict[tuple[int, Any], list[int]]:
        """The value -> rows index of payload ``field`` (rows ascending, dead ones included)."""
        index = self.indexes.get(field)
        if index is None:
            index = {}
            for row, payload in enumerate(self.payloads):
                if field in payload:
                    key = _index_key(payload[field])
                    if key is not None:
                        bucket = index.get(key)
                        if bucket is None:
                            index[key] = [row]
                        else:
                            bucket.append(row)
            self.indexes[field] = index
        return index

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.alive[: self.n])

    def where_rows(self, where: dict[str, Any]) -> np.ndarray:
        """Live rows matching every ``field == value`` of ``where``, ascending ``int64``."""
        buckets = []
        for field, value in where.items():
            key = _index_key(value)
            bucket = self.index(field).get(key) if key is not None else None
            if not bucket:
                return np.zeros(0, dtype=np.int64)
            buckets.append(bucket)
        buckets.sort(key=len)
        rows = np.asarray(buckets[0], dtype=np.int64)
        for other in buckets[1:]:
            rows = np.intersect1d(rows, np.asarray(other, dtype=np.int64), assume_unique=True)
        return rows[self.alive[rows]]

    def predicate_rows(self, predicate: Any) -> np.ndarray:
        payloads = self.payloads
        rows = [r for r in self.live_rows().tolist() if predicate(payloads[r])]
        return np.asarray(rows, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------------------------


def _scores(st: _State, q: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """Scores of rows ``rows`` (``None``: all rows ``[0, n)``) for the prepared query ``q``.

    Euclid over many rows uses ``|x|^2 - 2 q.x + |q|^2`` (approximate in float32; the caller
    re-ranks the best candidates with :func:`~knowledge.vectorstore.scoring.euclid_exact`).
    """
    many = rows is None or len(rows) > st.n // 4
    if st.distance in ("cosine", "dot"):
        if many:
            out = st.vectors[: st.n] @ q
            return out if rows is None else out[rows]
        return st.vectors[rows] @ q
    if st.distance == "euclid":
        if not many:
            return euclid_exact(st.vectors[rows], q).astype(np.float32)
        if st.sqnorms is None:
            v = st.vectors[: st.n]
            st.sqnorms = np.einsum("ij,ij->i", v, v)
        sq = st.sqnorms - 2.0 * (st.vectors[: st.n] @ q) + float(q @ q)
        np.maximum(sq, 0.0, out=sq)
        out = np.sqrt(sq)
        return out if rows is None else out[rows]
    return manhattan(st.vectors, q, rows, st.n)


# ---------------------------------------------------------------------------------------------
# Segment files
# ---------------------------------------------------------------------------------------------


def _read_npy_into(path: Path, out: np.ndarray) -> None:
    """Read the ``.npy`` at ``path`` into ``out`` (``(rows, size)`` float32) without a copy."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise _Stale(f"{path.name} is missing") from None
    with fh:
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        except ValueError as exc:
            raise StoreCorrupt(f"{path} is not a readable .npy file ({exc}).") from None
        if tuple(shape) != out.shape:
            raise _Stale(f"{path.name} holds shape {tuple(shape)}, expected {out.shape}")
        if dtype == np.dtype("<f4") and not fortran and np.little_endian:
            got = fh.readinto(memoryview(out).cast("B"))
            if got != out.nbytes:
                raise StoreCorrupt(f"{path} is truncated ({got} of {out.nbytes} vector bytes).")
            return
        fh.seek(0)
        out[...] = np.load(fh, allow_pickle=False).astype(np.float32)


class MemoryCollection(Collection):
    """One store of the memory backend. Get it from :meth:`MemoryBackend.collection`.

    Attributes:
        name: the store's exact name.
        path: its folder (see the module docstring for the layout).
        lock_path: the inter-process lock file held during every write.
    """

    def __init__(self, backend: "MemoryBackend", name: str) -> None:
        self.name = name
        self._backend = backend
        folder = folder_name(name)
        self.path: Path = backend.root / folder
        self.lock_path: Path = backend.root / LOCKS_DIR / f"{folder}.lock"
        self._manifest_path = self.path / MANIFEST
        self._lock = threading.RLock()
        self._write_mutex = threading.Lock()
        self._file_lock = FileLock(str(self.lock_path))
        self._manifest: dict[str, Any] | None = None
        self._manifest_bytes: bytes | None = None
        self._sig: tuple[int, ...] | None = None
        self._sig_settled = False
        self._state: _State | None = None
        self._last_access = time.monotonic()
        self.lexical_path: Path = self.path / LEXICAL_DIR
        self._lex: DiskLexicon | None = None
        self._lex_state: str | None = None  # the lexicon's committed state, as last read
        self._lex_problem = ""

    # -- public state --------------------------------------------------------------------------
    @property
    def is_loaded(self) -> bool:
        """Whether the store's points are in memory right now."""
        return self._state is not None

    def unload(self) -> bool:
        """Drop the in-memory points (they are reloaded on the next access). ``True`` if loaded."""
        with self._lock:
            was = self._state is not None
            self._state = None
            return was

    def _unload_if_idle(self, now: float, idle_seconds: float) -> bool:
        if self._state is None or now - self._last_access < idle_seconds:
            return False
        if not self._lock.acquire(blocking=False):
            return False  # busy right now, so not idle
        try:
            if self._state is None or now - self._last_access < idle_seconds:
                return False
            if self._write_mutex.locked():
                return False
            self._state = None
            log.debug("unloaded idle vector store %r", self.name)
            return True
        finally:
            self._lock.release()

    # -- manifest and synchronisation ----------------------------------------------------------
    def _corrupt(self, what: str) -> StoreCorrupt:
        return StoreCorrupt(
            f"Vector store {self.name!r} ({self.path}) cannot be read: {what}. Restore the folder"
            " from a backup, or drop the store and ingest its files again."
        )

    def _parse_manifest(self, data: bytes) -> dict[str, Any]:
        try:
            man = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise self._corrupt(f"{MANIFEST} is not valid JSON ({exc})") from None
        if not isinstance(man, dict):
            raise self._corrupt(f"{MANIFEST} is not a JSON object")
        fmt = man.get("format")
        if not isinstance(fmt, int) or fmt < 1:
            raise self._corrupt(f"{MANIFEST} has no valid 'format' field")
        if fmt > FORMAT_VERSION:
            raise self._corrupt(
                f"{MANIFEST} has format {fmt}, written by a newer version of knowledge (this one"
                f" reads format {FORMAT_VERSION})"
            )
        if man.get("name") != self.name:
            raise self._corrupt(f"{MANIFEST} belongs to a store named {man.get('name')!r}")
        for key in ("size", "generation", "count", "next_segment"):
            if not isinstance(man.get(key), int) or isinstance(man.get(key), bool) or man[key] < 0:
                raise self._corrupt(f"{MANIFEST} has no valid {key!r} field")
        if man["size"] < 1 or man.get("distance") not in DISTANCE_ORDER:
            raise self._corrupt(f"{MANIFEST} has an invalid size or distance")
        if not isinstance(man.get("incarnation"), str) or not isinstance(man.get("segments"), list):
            raise self._corrupt(f"{MANIFEST} has no valid 'incarnation' or 'segments' field")
        for seg in man["segments"]:
            if not isinstance(seg, dict) or not all(
                isinstance(seg.get(k), int) and seg[k] >= 0
                for k in ("seg", "first_gen", "last_gen", "rows", "deleted", "jsonl_bytes", "npy_bytes")
            ):
                raise self._corrupt(f"{MANIFEST} lists a malformed segment {seg!r}")
        return man

    def _forget(self) -> None:
        self._manifest = self._manifest_bytes = self._sig = None
        self._sig_settled = False
        self._state = None
        self._lex = self._lex_state = None

    def _sync(self) -> dict[str, Any] | None:
        """The current manifest (``None``: no such store), catching up with other writers.

        Called under ``self._lock``. Cheap when nothing changed: one ``stat``.
        """
        try:
            st = os.stat(self._manifest_path)
        except (FileNotFoundError, NotADirectoryError):
            self._forget()
            return None
        sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        if sig == self._sig and self._sig_settled:
            return self._manifest
        try:
            data = self._manifest_path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            self._forget()
            return None
        if data != self._manifest_bytes:
            man = self._parse_manifest(data)
            self._catch_up(man)
            self._manifest, self._manifest_bytes = man, data
        self._sig = sig
        self._sig_settled = time.time_ns() - st.st_mtime_ns > _RACY_NS
        return self._manifest

    def _catch_up(self, man: dict[str, Any]) -> None:
        """Bring the loaded state (if any) to ``man``: apply new segments, or drop it to reload."""
        st = self._state
        if st is None:
            return
        gen = st.generation
        if man["incarnation"] != st.incarnation or man["size"] != st.size or man["generation"] < gen:
            self._state = None
            return
        if man["generation"] == gen:
            return  # a merge rewrote segments; the points are the same
        todo = [s for s in man["segments"] if s["last_gen"] > gen]
        if any(s["first_gen"] <= gen for s in todo):
            self._state = None  # a merge straddles what we have: reload
            return
        try:
            with _gc_paused():
                for seg in todo:
                    deleted, ids, payloads, _ = self._read_jsonl(man, seg)
                    vectors = np.empty((seg["rows"], st.size), dtype=np.float32)
                    if seg["rows"]:
                        _read_npy_into(_seg_paths(self.path, seg["seg"])[1], vectors)
                    st.append(deleted, ids, payloads, vectors)
        except _Stale:
            self._state = None
            return
        except BaseException:
            self._state = None
            raise
        st.generation = man["generation"]
        if st.live != man["count"]:
            self._state = None  # should not happen; a reload will tell whether the files are bad
        elif st.dead > max(MIN_GARBAGE_ROWS, st.live):
            st.compact()

    def _require(self) -> dict[str, Any]:
        self._last_access = time.monotonic()
        man = self._sync()
        if man is None:
            raise StoreNotFound(self.name, "call ensure_collection() first.")
        return man

    def _loaded(self) -> _State:
        """The loaded state, loading it now if needed. Called under ``self._lock`` after _require."""
        if self._state is None:
            self._state = self._load()
            self._backend._start_sweeper()
        return self._state

    def _load(self) -> _State:
        man = self._manifest
        problem = ""
        for _ in range(_LOAD_ATTEMPTS):
            assert man is not None
            try:
                return self._read_store(man)
            except _Stale as exc:
                problem = str(exc)
            # Files changed under us (another process merged or dropped): read the manifest again.
            before = self._manifest_bytes
            self._sig = None
            man = self._sync()
            if man is None:
                raise StoreNotFound(self.name, "it was dropped while being loaded.")
            if self._manifest_bytes == before:
                raise self._corrupt(problem)
        raise self._corrupt(f"its files kept changing while being read ({problem})")

    def _read_jsonl(self, man: dict[str, Any], seg: dict[str, Any], raw: bool = False
                    ) -> tuple[list[PointId], list[PointId], list[dict], list[bytes]]:
        """Deleted ids, ids, payloads of one segment; with ``raw``: deleted ids, ids, [], lines."""
        path = _seg_paths(self.path, seg["seg"])[0]
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise _Stale(f"{path.name}, listed in {MANIFEST}, is missing") from None
        lines = data.split(b"\n")
        try:
            header = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or (
            header.get("segment"), header.get("incarnation"), header.get("first_gen"),
            header.get("last_gen"),
        ) != (seg["seg"], man["incarnation"], seg["first_gen"], seg["last_gen"]):
            raise _Stale(f"{path.name} does not hold the segment {MANIFEST} lists")
        if len(data) != seg["jsonl_bytes"] or lines[-1] != b"" or len(lines) - 2 != seg["rows"]:
            raise _Stale(
                f"{path.name} has {len(data)} bytes and {len(lines) - 2} points, {MANIFEST} lists"
                f" {seg['jsonl_bytes']} bytes and {seg['rows']} points"
            )
        deleted = header.get("deleted")
        if not isinstance(deleted, list):
            raise self._corrupt(f"{path.name} has no list of deleted ids")
        ids: list[PointId] = []
        payloads: list[dict] = []
        loads = orjson.loads
        if raw:
            try:
                body = lines[1:-1]
                return deleted, [_line_id(line) for line in body], [], body
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                raise self._corrupt(f"{path.name}: {exc}") from None
        try:
            for line in lines[1:-1]:
                obj = loads(line)
                payload = obj["payload"]
                if type(payload) is not dict:
                    raise TypeError("payload is not an object")
                ids.append(obj["id"])
                payloads.append(payload)
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise self._corrupt(f"{path.name}, line {len(ids) + 2}: {exc}") from None
        return deleted, ids, payloads, []

    def _read_store(self, man: dict[str, Any]) -> _State:
        segs = man["segments"]
        total = sum(s["rows"] for s in segs)
        st = _State(man["size"], man["distance"], total + max(64, total // 8))
        errors: list[BaseException] = []

        def read_vectors() -> None:
            base = 0
            try:
                for seg in segs:
                    rows = seg["rows"]
                    if rows:
                        _read_npy_into(_seg_paths(self.path, seg["seg"])[1], st.vectors[base : base + rows])
                    base += rows
            except BaseException as exc:  # handed to the loading thread
                errors.append(exc)

        reader = threading.Thread(target=read_vectors, name="knowledge-memory-load", daemon=True)
        reader.start()
        try:
            with _gc_paused():
                for seg in segs:
                    deleted, ids, payloads, _ = self._read_jsonl(man, seg)
                    st.place(deleted, ids, payloads)
        finally:
            reader.join()
        if errors:
            raise errors[0]
        st.generation = man["generation"]
        st.incarnation = man["incarnation"]
        if st.live != man["count"]:
            raise self._corrupt(f"the segments hold {st.live} points, {MANIFEST} says {man['count']}")
        if st.dead:
            st.compact()
        return st

    # -- writing ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold this store's write lock: one writer thread here, one writer process anywhere."""
        timeout = self._backend.lock_timeout
        start = time.monotonic()
        if not self._write_mutex.acquire(timeout=timeout):
            raise StoreLocked(
                f"Vector store {self.name!r} is busy: another thread of this process has been"
                f" writing to it for over {timeout:g} s."
            )
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._file_lock.acquire(timeout=max(0.0, timeout - (time.monotonic() - start)))
            except Timeout:
                raise StoreLocked(
                    f"Vector store {self.name!r} is locked by another writer (another process, or"
                    f" another backend on the same folder); gave up after {timeout:g} s waiting for"
                    f" {self.lock_path}. Try again when it has finished."
                ) from None
            try:
                yield
            except OSError as exc:
                raise StorageError(
                    f"Vector store {self.name!r} could not be written: {exc.strerror or exc}"
                    f"{f' ({exc.filename})' if exc.filename else ''}. It keeps its last complete version."
                ) from exc
            finally:
                self._file_lock.release()
        finally:
            self._write_mutex.release()

    def _remove_orphans(self, man: dict[str, Any] | None) -> None:
        """Delete segment and temporary files the manifest does not list (left by a crash)."""
        listed = {s["seg"] for s in man["segments"]} if man else set()
        try:
            entries = os.listdir(self.path)
        except FileNotFoundError:
            return
        for entry in entries:
            match = _SEGMENT_FILE.match(entry)
            if (match and int(match.group(1)) not in listed) or entry.startswith(MANIFEST_TMP):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path / entry)
                    log.info("vector store %r: removed orphan file %s", self.name, entry)

    def _write_segment(self, man: dict[str, Any], seg_no: int, first_gen: int, last_gen: int,
                       deleted: list[PointId], lines: list[bytes], vectors: np.ndarray) -> dict[str, Any]:
        """Write (and fsync) one segment's files; returns its manifest entry."""
        jsonl, npy = _seg_paths(self.path, seg_no)
        header = orjson.dumps({"segment": seg_no, "incarnation": man["incarnation"],
                               "first_gen": first_gen, "last_gen": last_gen, "deleted": deleted})
        body = b"\n".join([header, *lines]) + b"\n"
        _write_file(jsonl, body)
        npy_bytes = 0
        if lines:
            with open(npy, "wb") as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(vectors, dtype=np.float32),
                                          version=(1, 0), allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
                npy_bytes = fh.tell()
        return {"seg": seg_no, "first_gen": first_gen, "last_gen": last_gen, "rows": len(lines),
                "deleted": len(deleted), "jsonl_bytes": len(body), "npy_bytes": npy_bytes}

    def _write_manifest_tmp(self, man: dict[str, Any]) -> bytes:
        data = orjson.dumps(man, option=orjson.OPT_INDENT_2) + b"\n"
        _write_file(self.path / MANIFEST_TMP, data)
        return data

    def _publish(self, man: dict[str, Any], data: bytes) -> None:
        """The commit point: swap the manifest in. Called under ``self._lock``."""
        os.replace(self.path / MANIFEST_TMP, self._manifest_path)
        self._manifest, self._manifest_bytes = man, data
        self._sig = None  # the next check re-reads the (equal) bytes and records the new stat

    def _commit(self, man: dict[str, Any], st: _State, deleted: list[PointId], ids: list[PointId],
                lines: list[bytes], payloads: list[dict], vectors: np.ndarray, count: int) -> None:
        """Write one batch as a new segment and apply it to memory. Called holding the write lock."""
        self._remove_orphans(man)
        gen = man["generation"] + 1
        seg_no = man["next_segment"]
        batch = self._lexical_batch(man, gen, deleted, ids, payloads)
        published = False
        try:
            entry = self._write_segment(man, seg_no, gen, gen, deleted, lines, vectors)
            new = {**man, "generation": gen, "count": count, "next_segment": seg_no + 1,
                   "segments": [*man["segments"], entry]}
            data = self._write_manifest_tmp(new)
            with self._lock:
                self._publish(new, data)
                published = True
                if self._state is st and st.generation == man["generation"]:
                    try:
                        st.append(deleted, ids, payloads, vectors)
                        st.generation = gen
                        if st.dead > max(MIN_GARBAGE_ROWS, st.live):
                            st.compact()
                    except BaseException:
                        self._state = None
                        raise
                else:
                    self._state = None  # unloaded meanwhile; the next access reads the new files
        finally:
            if batch is not None:
                if published:
                    self._commit_lexical(batch, self._lex_marker(new))
                else:
                    batch.close()
        fsync_dir(self.path)
        try:
            self._maybe_merge(new)
        except (OSError, StoreCorrupt, _Stale) as exc:  # the write itself is committed
            log.warning("vector store %r: compaction skipped (%s); it is retried on the next write",
                        self.name, exc)

    # -- the lexical index ------------------------------------------------------------------
    # The store's BM25 index (knowledge.lexical.DiskLexicon, tantivy) lives in ``lexical/``. It is
    # built by the first lexical search of the store (stores only ever searched by vector, such
    # as agent memory, never pay for it) and from then on kept by every write: the write stages
    # its deletes and inserts in a tantivy batch before the manifest swap and commits it right
    # after, still holding the store's write lock; the batch also records the manifest's
    # incarnation and generation (its *state*). A crash between the two commits leaves the index
    # one generation behind; a missing, corrupt or older index has no matching state either. The
    # next lexical search sees that and rebuilds the index from the loaded points (under the write
    # lock, with a log line); nothing else ever rebuilds it.
    @staticmethod
    def _lex_marker(man: dict[str, Any]) -> str:
        return f"{LEXICAL_FORMAT}:{man['incarnation']}:{man['generation']}"

    def _lexicon_agrees(self, marker: str) -> bool:
        """Whether the lexicon's committed state is ``marker`` (opening or reloading it as needed).
        Called under ``self._lock``."""
        if self._lex is not None and self._lex_state == marker:
            return True
        try:
            if self._lex is None:
                lex = DiskLexicon(self.lexical_path)
                lex.open()
                self._lex = lex
            else:
                self._lex.reload()
            self._lex_state = self._lex.state()
        except LexiconUnreadable as exc:
            self._lex, self._lex_state, self._lex_problem = None, None, str(exc)
            return False
        except Exception as exc:  # a segment went bad under an open index
            self._lex, self._lex_state, self._lex_problem = None, None, f"unreadable ({exc})"
            return False
        if self._lex_state != marker:
            self._lex_problem = (f"at state {self._lex_state!r}, the store at {marker!r}"
                                 if self._lex_state else "without a state (another version)")
            return False
        return True

    def _lexical_batch(self, man: dict[str, Any], gen: int, deleted: Sequence[PointId],
                       ids: Sequence[PointId], payloads: Sequence[dict]) -> Batch | None:
        """This write's changes staged in the lexicon (not committed), or ``None`` when the lexicon
        is not in step with ``man`` (the next lexical search rebuilds it). Under the write lock."""
        with self._lock:
            agrees = self._lexicon_agrees(self._lex_marker(man))
            lex = self._lex
        if not agrees or lex is None:
            return None
        try:
            batch = lex.batch()
            batch.delete(deleted)
            batch.add(ids, payloads)
            batch.set_state(self._lex_marker({**man, "generation": gen}))
            return batch
        except Exception as exc:
            log.warning("vector store %r: lexical index not updated (%s); it is rebuilt on the next"
                        " lexical search", self.name, exc)
            return None

    def _commit_lexical(self, batch: Batch, marker: str) -> None:
        try:
            batch.commit()
        except Exception as exc:  # the vectors are committed: never fail the write for the index
            batch.close()
            with self._lock:
                self._lex_state = None
            log.warning("vector store %r: lexical index commit failed (%s); it is rebuilt on the next"
                        " lexical search", self.name, exc)
            return
        with self._lock:
            self._lex_state = marker

    def _rebuild_lexicon(self) -> None:
        """Rebuild the lexicon from the store's points unless it agrees with the manifest by the
        time the write lock is ours (another writer may just have been committing it)."""
        with self._writing():
            with self._lock:
                man = self._require()
                marker = self._lex_marker(man)
                if self._lexicon_agrees(marker):
                    return
                problem = self._lex_problem
                st = self._loaded()
                rows = st.live_rows().tolist()
                ids = [st.ids[r] for r in rows]
                payloads = [st.payloads[r] for r in rows]
            started = time.perf_counter()
            lex = DiskLexicon(self.lexical_path)
            lex.create()
            batch = lex.batch()
            batch.add(ids, payloads)
            batch.set_state(marker)
            batch.commit()
            with self._lock:
                self._lex, self._lex_state = lex, marker
            log.log(logging.WARNING if ids else logging.INFO,
                    "vector store %r: lexical index %s; rebuilt from %d points in %.1f s",
                    self.name, problem or "missing", len(ids), time.perf_counter() - started)

    def _lexicon(self) -> DiskLexicon | None:
        """The lexicon, in step with the manifest (rebuilt first when it is not)."""
        for attempt in range(3):
            with self._lock:
                man = self._require()
                agrees = self._lexicon_agrees(self._lex_marker(man))
                lex = self._lex
            if agrees or attempt == 2:
                return lex
            self._rebuild_lexicon()
        return None  # pragma: no cover

    def ensure_lexical_index(self) -> None:
        """Build the store's lexical index now if it has none in step (see :meth:`lexical_search`);
        from then on every write keeps it. Raises ``StoreNotFound``, ``StoreLocked``."""
        self._lexicon()

    def _lexical_search(self, query: str, k: int, w: dict[str, Any] | None) -> list[ScoredPoint]:
        """BM25 over the points' ``heading`` + ``text`` (see :class:`~knowledge.lexical.DiskLexicon`),
        payloads copied.

        The persisted index is opened on first use (memory-mapped, no rebuild); one that is
        missing, corrupt, of another version or behind the store is rebuilt first (logged).
        Raises (besides the contract's): StoreLocked (a rebuild waiting for another writer).
        """
        terms = analyzer().terms(query) if isinstance(query, str) else []
        with self._lock:
            self._require()
            if not self._loaded().live or not terms:
                return []
        lex = self._lexicon()
        if lex is None:
            return []
        fetch = k
        while True:
            found = lex.search(terms, fetch, w)
            out: list[ScoredPoint] = []
            with self._lock:
                st = self._loaded()
                for pid, score in found:
                    row = st.row_of.get(pid)
                    if row is None:
                        continue  # removed by a write whose index commit is a moment away
                    payload = st.payloads[row]
                    if w and not matches(payload, w):
                        continue  # a filter item the index does not hold (text, long strings)
                    out.append(ScoredPoint(id=pid, score=score, payload=dict(payload)))
                    if len(out) == k:
                        return out
            if len(found) < fetch:
                return out
            fetch *= 4

    # -- compaction ----------------------------------------------------------------------------
    @staticmethod
    def _merge_start(man: dict[str, Any]) -> int | None:
        """Index of the first segment to merge into one with all after it, or ``None``."""
        segs = man["segments"]
        if len(segs) < 2:
            return None
        dead = sum(s["rows"] for s in segs) - man["count"]
        if dead > max(MIN_GARBAGE_ROWS, man["count"]) or len(segs) > MAX_SEGMENTS:
            return 0
        tiers = [max(1, s["rows"] + s["deleted"]).bit_length() // 4 for s in segs]  # log_16 tiers
        i = len(segs) - 1
        while i > 0 and tiers[i - 1] <= tiers[-1]:
            i -= 1
        return i if len(segs) - i >= MERGE_FACTOR else None

    def _maybe_merge(self, man: dict[str, Any]) -> None:
        while (start := self._merge_start(man)) is not None:
            man = self._merge(man, start)

    def _merge(self, man: dict[str, Any], start: int) -> dict[str, Any]:
        """Rewrite segments ``start:`` as one (replaying them); the store's points do not change."""
        run = man["segments"][start:]
        total = sum(s["rows"] for s in run)
        vectors = np.empty((total, man["size"]), dtype=np.float32)
        seg_ids: list[list[PointId]] = []
        seg_lines: list[list[bytes]] = []
        seg_dels: list[list[PointId]] = []
        base = 0
        with _gc_paused():
            for seg in run:
                dels, ids, _, raw = self._read_jsonl(man, seg, raw=True)
                if seg["rows"]:
                    _read_npy_into(_seg_paths(self.path, seg["seg"])[1], vectors[base : base + seg["rows"]])
                base += seg["rows"]
                seg_ids.append(ids)
                seg_lines.append(raw)
                seg_dels.append(dels)
            all_ids = [pid for ids in seg_ids for pid in ids]
            if not any(seg_dels) and len(set(all_ids)) == len(all_ids):
                # the common case (plain upserts): nothing to replay, just concatenate
                lines = [line for raw in seg_lines for line in raw]
                merged = vectors
                deleted: dict[PointId, None] = {}
            else:
                latest: dict[PointId, int] = {}
                deleted = {}
                row = 0
                for dels, ids in zip(seg_dels, seg_ids):
                    for pid in dels:
                        latest.pop(pid, None)
                        if start:
                            deleted[pid] = None
                    for pid in ids:
                        latest.pop(pid, None)  # re-insert: order of last write
                        latest[pid] = row
                        row += 1
                for pid in latest:
                    deleted.pop(pid, None)
                all_lines = [line for raw in seg_lines for line in raw]
                rows = list(latest.values())
                lines = [all_lines[r] for r in rows]
                merged = vectors[np.asarray(rows, dtype=np.int64)] if rows else vectors[:0]
        seg_no = man["next_segment"]
        entry = self._write_segment(man, seg_no, run[0]["first_gen"], run[-1]["last_gen"],
                                    list(deleted), lines, merged)
        del vectors, merged
        new = {**man, "next_segment": seg_no + 1, "segments": [*man["segments"][:start], entry]}
        data = self._write_manifest_tmp(new)
        with self._lock:
            self._publish(new, data)
        fsync_dir(self.path)
        for seg in run:
            for path in _seg_paths(self.path, seg["seg"]):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        log.debug("vector store %r: merged %d segments into seg-%06d (%d points)",
                  self.name, len(run), seg_no, len(lines))
        return new

    # -- Collection API --------------------------------------------------------------------------
    def _ensure_collection(self, size: int, distance: Distance) -> None:
        """Create the store's folder and manifest for ``size``-dim vectors compared by ``distance``.

        Raises (besides the contract's): StoreLocked (another process holds the store's lock for
        longer than the timeout), StoreCorrupt (the existing manifest is unreadable).
        """
        with self._lock:
            man = self._sync()
        if man is not None:
            self._check_same(man, size, distance)
            return
        with self._writing():
            with self._lock:
                man = self._sync()
            if man is not None:
                self._check_same(man, size, distance)
                return
            self._backend.root.mkdir(parents=True, exist_ok=True)
            self.path.mkdir(exist_ok=True)
            fsync_dir(self._backend.root)
            self._remove_orphans(None)
            man = {"format": FORMAT_VERSION, "name": self.name, "size": size, "distance": distance,
                   "incarnation": uuid.uuid4().hex, "generation": 0, "count": 0, "next_segment": 1,
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "segments": []}
            shutil.rmtree(self.lexical_path, ignore_errors=True)  # a crash in the middle of a drop
            data = self._write_manifest_tmp(man)
            with self._lock:
                self._publish(man, data)
                self._state = None
                self._lex = self._lex_state = None
            fsync_dir(self.path)

    def _check_same(self, man: dict[str, Any], size: int, distance: str) -> None:
        check_prepared(self.name, man["size"], man["distance"], size, distance)

    def collection_exists(self) -> bool:
        with self._lock:
            return self._sync() is not None

    def drop_collection(self) -> None:
        """Delete the store's folder. The manifest goes first, so a crash leaves no half store."""
        with self._writing():
            with self._lock:
                existed = self._manifest_path.exists()
                if existed:
                    os.unlink(self._manifest_path)
                    fsync_dir(self.path)
                self._forget()
            if self.path.exists():
                shutil.rmtree(self.path, ignore_errors=True)
                fsync_dir(self._backend.root)

    def info(self) -> CollectionInfo:
        """Size, distance, point count and bytes on disk, from the manifest (no load needed)."""
        with self._lock:
            man = self._require()
            disk = len(self._manifest_bytes or b"") + sum(
                s["jsonl_bytes"] + s["npy_bytes"] for s in man["segments"])
            return CollectionInfo(name=self.name, size=man["size"], distance=man["distance"],
                                  count=man["count"], backend=MemoryBackend.name, disk_bytes=disk)

    def _prepare(self, points: Sequence[Point], size: int, distance: str
                 ) -> tuple[list[PointId], list[bytes], list[dict], np.ndarray]:
        """Validate and encode a batch: ids, JSONL lines, the payloads as stored, vectors."""
        with _gc_paused():  # many small objects: the cyclic GC would walk the caller's heap repeatedly
            vectors = stack_points(points, size)
            ids: list[PointId] = []
            lines: list[bytes] = []
            payloads: list[dict] = []
            dumps, loads = orjson.dumps, orjson.loads
            for p in points:
                try:
                    line = dumps({"id": p.id, "payload": p.payload})
                except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
                    raise InvalidArgument(
                        f"Point {p.id!r} cannot be stored: its id or payload is not JSON-serialisable"
                        f" ({exc})."
                    ) from None
                ids.append(p.id)
                lines.append(line)
                payloads.append(loads(line)["payload"])  # what a reload will see; a private copy
        if distance == "cosine":
            normalise_rows(vectors)  # stack_points returned a fresh matrix: ours to modify
        return ids, lines, payloads, vectors

    def _check_cap(self, live: int, new_count: int) -> None:
        cap = self._backend.max_points
        if new_count > cap and new_count > live:
            raise StoreFull(
                f"Vector store {self.name!r} would hold {new_count:,} chunks, over the memory"
                f" backend's limit of {cap:,} per store (setting vector_store.max_chunks_per_store);"
                f" nothing was written. Raise the limit if this machine has the memory, or use the"
                f" pgvector backend for larger corpora."
            )

    def _upsert(self, points: list[Point]) -> None:
        """Validated before anything is written, committed by one manifest swap.

        Raises (besides the contract's): StoreFull (over ``vector_store.max_chunks_per_store``;
        nothing written), StoreLocked.
        """
        self._write_points(None, points)

    def _replace(self, where: dict[str, Any], points: list[Point]) -> None:
        """One segment (its header lists the deleted ids) and one manifest swap: readers here or in
        another process see the old set or the new one."""
        self._write_points(where, points)

    def _write_points(self, where: dict[str, Any] | None, points: list[Point]) -> None:
        with self._lock:
            man = self._require()
        ids, lines, payloads, vectors = self._prepare(points, man["size"], man["distance"])
        if where is None and not ids:
            return
        with self._writing():
            with self._lock:
                man = self._require()
                if ids and man["size"] != vectors.shape[1]:  # recreated meanwhile with another size
                    raise DimensionMismatch(man["size"], int(vectors.shape[1]))
                st = self._loaded()
                deleted = [st.ids[r] for r in st.where_rows(where).tolist()] if where else []
                gone = set(deleted)
                kept = sum(1 for pid in ids if pid in st.row_of and pid not in gone)
                count = st.live - len(deleted) + len(ids) - kept
                self._check_cap(st.live, count)
            if not deleted and not ids:
                return
            self._commit(man, st, deleted, ids, lines, payloads, vectors, count)

    def _remove(self, wanted: list[PointId], w: dict[str, Any] | None) -> int:
        """One segment listing the deleted ids. Raises (besides the contract's): StoreLocked."""
        if not wanted and not w:
            with self._lock:
                self._require()
            return 0
        with self._writing():
            with self._lock:
                man = self._require()
                st = self._loaded()
                targets: dict[PointId, None] = {pid: None for pid in wanted if pid in st.row_of}
                if w:
                    targets.update((st.ids[r], None) for r in st.where_rows(w).tolist())
                count = st.live - len(targets)
            if not targets:
                return 0
            empty = np.zeros((0, man["size"]), dtype=np.float32)
            self._commit(man, st, list(targets), [], [], [], empty, count)
            return len(targets)

    def _count(self, w: dict[str, Any] | None) -> int:
        """Number of live points (matching ``w``); without a filter it needs no load."""
        with self._lock:
            man = self._require()
            if not w:
                return self._state.live if self._state is not None else man["count"]
            return int(len(self._loaded().where_rows(w)))

    def _native_filter(self, raw_filter: Any) -> Any:
        """A callable ``payload -> bool`` (:data:`~knowledge.vectorstore.base.PayloadPredicate`),
        called on every live point's payload (which it must not modify)."""
        if not callable(raw_filter):
            raise InvalidArgument(
                "raw_filter for the memory backend is a callable taking a payload dict and"
                f" returning a bool, got {type(raw_filter).__name__}."
            )
        return raw_filter

    def _search(self, vector: np.ndarray, k: int, w: dict[str, Any] | None, predicate: Any,
                score_threshold: float | None, with_payload: bool) -> list[ScoredPoint]:
        """Exact search: ``where`` is answered from a lazily built per-field index, a ``raw_filter``
        predicate is called on every live payload. Scores are Python floats; equal scores keep
        insertion order; payloads are shallow copies."""
        with self._lock:
            man = self._require()
            q = check_vector_size(vector, man["size"])
            st = self._loaded()
            if st.live == 0:
                return []
            distance = st.distance
            q = prepare_query(q, distance)
            rows: np.ndarray | None = None
            if predicate is not None:
                rows = st.predicate_rows(predicate)
            elif w:
                rows = st.where_rows(w)
            elif st.dead > st.n // 4:
                rows = st.live_rows()
            hits_rows, hits_scores = self._rank(st, q, rows, k)
            out = []
            for row, score in zip(hits_rows.tolist(), hits_scores.tolist()):
                if distance == "cosine":
                    score = clamp_cosine(score)
                if not passes_threshold(score, score_threshold, distance):
                    break  # sorted best first: the rest are worse
                payload = dict(st.payloads[row]) if with_payload else None
                out.append(ScoredPoint(id=st.ids[row], score=score, payload=payload))
            return out

    @staticmethod
    def _rank(st: _State, q: np.ndarray, rows: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and scores of the ``k`` best among ``rows`` (``None``: all live rows), best first."""
        higher = DISTANCE_ORDER[st.distance]
        euclid = st.distance == "euclid"
        if rows is not None:
            if len(rows) == 0:
                return rows, np.zeros(0)
            scores = _scores(st, q, rows)
            pos = top_k(scores, min(len(rows), k + _EUCLID_SLACK if euclid else k), higher)
            cand = rows[pos]
        else:
            scores = _scores(st, q, None)
            if st.dead:
                scores[~st.alive[: st.n]] = -np.inf if higher else np.inf
            cand = top_k(scores, min(st.live, k + _EUCLID_SLACK if euclid else k), higher)
            pos = cand
        if euclid:  # exact distances for the few candidates, then the final order
            exact = euclid_exact(st.vectors[cand], q)
            order = np.lexsort((cand, exact))[:k]
            return cand[order], exact[order]
        return cand, scores[pos].astype(np.float64)

    def _scroll(self, w: dict[str, Any] | None, limit: int | None, with_vectors: bool) -> Iterator[Point]:
        """Points in insertion order (order of last write). Vectors are ``(d,)`` float32 copies
        (unit length for cosine). Collected when called, so the iterator is a snapshot."""
        with self._lock:
            self._require()
            st = self._loaded()
            rows = st.where_rows(w) if w else st.live_rows()
            if limit is not None:
                rows = rows[:limit]
            points = [
                Point(id=st.ids[r],
                      vector=st.vectors[r].copy() if with_vectors else np.zeros(0, dtype=np.float32),
                      payload=dict(st.payloads[r]))
                for r in rows.tolist()
            ]
        return iter(points)

    def _retrieve(self, wanted: list[PointId], with_vectors: bool) -> list[Point]:
        with self._lock:
            self._require()
            st = self._loaded()
            out = []
            for pid in wanted:
                row = st.row_of.get(pid)
                if row is not None:
                    vec = st.vectors[row].copy() if with_vectors else np.zeros(0, dtype=np.float32)
                    out.append(Point(id=pid, vector=vec, payload=dict(st.payloads[row])))
            return out

    def _facet(self, key: str, w: dict[str, Any] | None) -> dict[Any, int]:
        """Count live points per value of payload field ``key`` (from the per-field index)."""
        with self._lock:
            self._require()
            st = self._loaded()
            counts: dict[Any, int] = {}
            if w:
                for r in st.where_rows(w).tolist():
                    payload = st.payloads[r]
                    if key in payload and _index_key(payload[key]) is not None:
                        value = payload[key]
                        counts[value] = counts.get(value, 0) + 1
                return counts
            alive = st.alive
            for ikey, rows in st.index(key).items():
                c = int(np.count_nonzero(alive[np.asarray(rows, dtype=np.int64)]))
                if c:
                    counts[ikey[1]] = counts.get(ikey[1], 0) + c
            return counts

    def __repr__(self) -> str:
        return f"MemoryCollection({self.name!r}, path={str(self.path)!r}, loaded={self.is_loaded})"


class MemoryBackend(VectorBackend):
    """The built-in backend: one folder per store under ``settings.vector_store_dir``.

    Args:
        settings: uses ``vector_store_dir``, ``vector_store.idle_seconds`` (unload a store idle this
            long) and ``vector_store.max_chunks_per_store`` (the per-store cap).
        lock_timeout: seconds a write waits for another writer of the same store before raising
            :class:`~knowledge.errors.StoreLocked`.

    Thread-safe; hand one instance to every thread. A daemon thread (started on the first load,
    stopped by :meth:`close`) unloads idle stores; :meth:`unload_idle` does one sweep by hand.
    """

    name: ClassVar[str] = "memory"

    def __init__(self, settings: "Settings", *, lock_timeout: float = 10.0) -> None:
        self.root: Path = Path(settings.vector_store_dir)
        self.idle_seconds = float(settings.vector_store.idle_seconds)
        self.max_points = int(settings.vector_store.max_chunks_per_store)
        self.lock_timeout = float(lock_timeout)
        self._collections: dict[str, MemoryCollection] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._closed = False

    def collection(self, name: str) -> MemoryCollection:
        """The handle on store ``name`` (one shared handle per name and backend instance).

        Raises:
            InvalidArgument: ``name`` is not a non-empty string.
        """
        name = check_name(name)
        with self._lock:
            coll = self._collections.get(name)
            if coll is None:
                coll = self._collections[name] = MemoryCollection(self, name)
            return coll

    def list_collections(self) -> list[str]:
        """Exact names of the stores under the root, read from their manifests, sorted.

        A folder whose manifest is unreadable is skipped with a warning in the log (opening that
        store raises :class:`~knowledge.errors.StoreCorrupt`).
        """
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = []
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            try:
                man = orjson.loads((Path(entry.path) / MANIFEST).read_bytes())
            except (FileNotFoundError, NotADirectoryError):
                continue  # not a store, or being created or dropped
            except (OSError, orjson.JSONDecodeError) as exc:
                log.warning("vector store folder %s: unreadable %s (%s)", entry.path, MANIFEST, exc)
                continue
            name = man.get("name") if isinstance(man, dict) else None
            if not isinstance(name, str) or not name or folder_name(name) != entry.name:
                log.warning("vector store folder %s: %s names %r, which does not belong to this"
                            " folder", entry.path, MANIFEST, name)
                continue
            names.append(name)
        return sorted(names)

    def loaded_collections(self) -> list[str]:
        """Names of the stores whose points are in memory now, sorted."""
        with self._lock:
            handles = list(self._collections.values())
        return sorted(c.name for c in handles if c.is_loaded)

    def unload_idle(self, now: float | None = None) -> list[str]:
        """Unload every store not accessed for ``idle_seconds``; returns their names, sorted.

        Args:
            now: a ``time.monotonic()`` reading (default: now); tests pass a later one.
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            handles = list(self._collections.values())
        return sorted(c.name for c in handles if c._unload_if_idle(now, self.idle_seconds))

    def _start_sweeper(self) -> None:
        with self._lock:
            if self._closed or (self._sweeper is not None and self._sweeper.is_alive()):
                return
            self._stop.clear()
            self._sweeper = threading.Thread(target=self._sweep, name="knowledge-memory-sweeper",
                                             daemon=True)
            self._sweeper.start()

    def _sweep(self) -> None:
        interval = min(max(self.idle_seconds / 4, 0.05), 30.0)
        while not self._stop.wait(interval):
            try:
                self.unload_idle()
            except Exception:  # pragma: no cover - never let the sweeper die
                log.exception("idle sweep of the memory vector-store backend failed")

    def close(self) -> None:
        """Stop the sweeper thread and unload every store. Idempotent.

        The instance stays usable (stores load again on access) but no longer unloads idle stores.
        """
        with self._lock:
            self._closed = True
            sweeper, self._sweeper = self._sweeper, None
            handles = list(self._collections.values())
        self._stop.set()
        if sweeper is not None and sweeper is not threading.current_thread():
            sweeper.join(timeout=5)
        for coll in handles:
            coll.unload()

    def __repr__(self) -> str:
        return f"MemoryBackend(root={str(self.root)!r})"
