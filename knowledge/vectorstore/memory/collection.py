"""One store of the memory backend: catch-up with other processes, load/unload, the commit of a
write, compaction, the lexical index and the ``Collection`` hooks. See ``docs/local-backend.md``."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

import knowledge.vectorstore.memory.ann as ann
from knowledge._fs import fsync_dir
from knowledge.errors import (
    DimensionMismatch,
    InvalidArgument,
    StoreCorrupt,
    StoreFull,
    StoreNotFound,
)
from knowledge.text.analysis import analyzer
from knowledge.vectorstore.base import (
    Collection,
    CollectionInfo,
    Point,
    PointId,
    ScoredPoint,
    check_prepared,
    check_vector_size,
    matches,
    stack_points,
)
from knowledge.vectorstore.lexical import LEXICAL_FORMAT, Batch, DiskLexicon, LexiconUnreadable
from knowledge.vectorstore.memory.state import LoadedPoints, index_key
from knowledge.vectorstore.memory.storage import (
    LEXICAL_DIR,
    LOAD_ATTEMPTS,
    MANIFEST,
    MIN_GARBAGE_ROWS,
    RACY_NS,
    SegmentLog,
    Stale,
    gc_paused,
)
from knowledge.vectorstore.scoring import (
    Distance,
    clamp_cosine,
    normalise_rows,
    passes_threshold,
    prepare_query,
)

log = logging.getLogger(__name__)

#: A ``where`` filter matching fewer than this share of the live points is searched exactly over
#: its rows (cheap, and exact); a broader one takes graph candidates and post-filters them.
ANN_FILTER_SHARE = 0.1


@dataclass(frozen=True)
class CollectionOptions:
    """What a memory-backend store needs of its backend: the backend's folder, its name (for
    :class:`CollectionInfo`), the write-lock timeout in seconds, the point cap per store, and
    ``on_loaded`` -- called each time a store loads its points (the backend starts its idle sweeper),
    and the approximate search: ``ann_min_points`` (stores with fewer live points, or 0: always
    exact), ``indexer`` (the backend's background :class:`~.ann.Indexer`, ``None``: exact only)."""

    root: Path
    backend_name: str
    lock_timeout: float
    max_points: int
    on_loaded: Callable[[], None]
    ann_min_points: int = 0
    indexer: ann.Indexer | None = None


class MemoryCollection(Collection):
    """One store of the memory backend. Get it from :meth:`MemoryBackend.collection`.

    Attributes:
        name: the store's exact name.
        path: its folder (the layout: ``docs/local-backend.md``).
        lock_path: the inter-process lock file held during every write.
        files: the :class:`~knowledge.vectorstore.memory.storage.SegmentLog` of its folder.
    """

    def __init__(self, options: CollectionOptions, name: str) -> None:
        self.name = name
        self._options = options
        self.files = SegmentLog(options.root, name)
        self.path: Path = self.files.path
        self.lock_path: Path = self.files.lock_path
        self._manifest_path = self.files.manifest_path
        self._lock = threading.RLock()
        self._manifest: dict[str, Any] | None = None
        self._manifest_bytes: bytes | None = None
        self._sig: tuple[int, ...] | None = None
        self._sig_settled = False
        self._points: LoadedPoints | None = None
        self._last_access = time.monotonic()
        self.lexical_path: Path = self.path / LEXICAL_DIR
        self._lex: DiskLexicon | None = None
        self._lex_state: str | None = None  # the lexicon's committed state, as last read
        self._lex_problem = ""
        self.ann_path: Path = self.path / ann.ANN_DIR
        self._ann_mutex = threading.Lock()  # one indexing step of this store at a time
        self._last_write = 0.0  # time.monotonic() of this process's last commit to the store
        #: Counters, for tests and benchmarks: graphs loaded from ``ann/``, built from scratch, saved.
        self.ann_counts = {"loaded": 0, "built": 0, "saved": 0}

    # -- public state --------------------------------------------------------------------------
    @property
    def is_loaded(self) -> bool:
        """Whether the store's points are in memory right now."""
        return self._points is not None

    def unload(self) -> bool:
        """Drop the in-memory points (they are reloaded on the next access). ``True`` if loaded."""
        with self._lock:
            loaded, self._points = self._points, None
        if loaded is not None:
            self._save_ann(loaded)
        return loaded is not None

    def _unload_if_idle(self, now: float, idle_seconds: float) -> bool:
        if self._points is None or now - self._last_access < idle_seconds:
            return False
        if not self._lock.acquire(blocking=False):
            return False  # busy right now, so not idle
        try:
            if self._points is None or now - self._last_access < idle_seconds:
                return False
            if self.files.is_writing():
                return False
            loaded, self._points = self._points, None
            log.debug("unloaded idle vector store %r", self.name)
        finally:
            self._lock.release()
        self._save_ann(loaded)
        return True

    # -- manifest and synchronisation ----------------------------------------------------------
    def _forget(self) -> None:
        self._manifest = self._manifest_bytes = self._sig = None
        self._sig_settled = False
        self._points = None
        self._lex = self._lex_state = None

    def _sync(self) -> dict[str, Any] | None:
        """The current manifest (``None``: no such store), catching up with other writers.

        Called under ``self._lock``. Cheap when nothing changed: one ``stat``.
        """
        try:
            stat = os.stat(self._manifest_path)
        except (FileNotFoundError, NotADirectoryError):
            self._forget()
            return None
        sig = (stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
        if sig == self._sig and self._sig_settled:
            return self._manifest
        try:
            data = self._manifest_path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            self._forget()
            return None
        if data != self._manifest_bytes:
            man = self.files.parse_manifest(data)
            self._catch_up(man)
            self._manifest, self._manifest_bytes = man, data
        self._sig = sig
        self._sig_settled = time.time_ns() - stat.st_mtime_ns > RACY_NS
        return self._manifest

    def _catch_up(self, man: dict[str, Any]) -> None:
        """Bring the loaded state (if any) to ``man``: apply new segments, or drop it to reload."""
        loaded = self._points
        if loaded is None:
            return
        gen = loaded.generation
        if man["incarnation"] != loaded.incarnation or man["size"] != loaded.size or man["generation"] < gen:
            self._points = None
            return
        if man["generation"] == gen:
            return  # a merge rewrote segments; the points are the same
        todo = [s for s in man["segments"] if s["last_gen"] > gen]
        if any(s["first_gen"] <= gen for s in todo):
            self._points = None  # a merge straddles what we have: reload
            return
        try:
            with gc_paused():
                for seg in todo:
                    deleted, ids, _, payloads = self.files.read_jsonl(man, seg, raw=True)
                    vectors = np.empty((seg["rows"], loaded.size), dtype=np.float32)
                    if seg["rows"]:
                        self.files.read_vectors(seg, vectors)
                    loaded.append(deleted, ids, payloads, vectors)
        except Stale:
            self._points = None
            return
        except BaseException:
            self._points = None
            raise
        loaded.generation = man["generation"]
        if loaded.live != man["count"]:
            self._points = None  # should not happen; a reload will tell whether the files are bad
        elif loaded.dead > max(MIN_GARBAGE_ROWS, loaded.live):
            loaded.compact()

    def _require(self) -> dict[str, Any]:
        self._last_access = time.monotonic()
        man = self._sync()
        if man is None:
            raise StoreNotFound(self.name, "call ensure_collection() first.")
        return man

    def _loaded(self) -> LoadedPoints:
        """The loaded points, loading them now if needed. Called under ``self._lock`` after _require."""
        if self._points is None:
            self._points = self._load()
            self._options.on_loaded()
            if self._ann_wanted(self._points):
                self._schedule_ann()
        return self._points

    def _load(self) -> LoadedPoints:
        man = self._manifest
        problem = ""
        for _ in range(LOAD_ATTEMPTS):
            assert man is not None
            try:
                return self._read_store(man)
            except Stale as exc:
                problem = str(exc)
            # Files changed under us (another process merged or dropped): read the manifest again.
            before = self._manifest_bytes
            self._sig = None
            man = self._sync()
            if man is None:
                raise StoreNotFound(self.name, "it was dropped while being loaded.")
            if self._manifest_bytes == before:
                raise self.files.corrupt(problem)
        raise self.files.corrupt(f"its files kept changing while being read ({problem})")

    def _read_store(self, man: dict[str, Any]) -> LoadedPoints:
        segs = man["segments"]
        total = sum(s["rows"] for s in segs)
        loaded = LoadedPoints(man["size"], man["distance"], total + max(64, total // 8), corrupt=self.files.corrupt)
        errors: list[BaseException] = []

        def read_vectors() -> None:
            base = 0
            try:
                for seg in segs:
                    rows = seg["rows"]
                    if rows:
                        self.files.read_vectors(seg, loaded.vectors[base : base + rows])
                    base += rows
            except BaseException as exc:  # handed to the loading thread
                errors.append(exc)

        reader = threading.Thread(target=read_vectors, name="knowledge-memory-load", daemon=True)
        reader.start()
        try:
            with gc_paused():
                for seg in segs:  # payloads stay stored lines until read (Payloads)
                    deleted, ids, _, lines = self.files.read_jsonl(man, seg, raw=True)
                    loaded.place(deleted, ids, lines)
        finally:
            reader.join()
        if errors:
            raise errors[0]
        loaded.generation = man["generation"]
        loaded.incarnation = man["incarnation"]
        if loaded.live != man["count"]:
            raise self.files.corrupt(f"the segments hold {loaded.live} points, {MANIFEST} says {man['count']}")
        if loaded.dead:
            loaded.compact()
        return loaded

    # -- writing ---------------------------------------------------------------------------------
    def _writing(self) -> contextlib.AbstractContextManager[None]:
        """Hold this store's write lock (:meth:`SegmentLog.writing`) for the backend's timeout."""
        return self.files.writing(self._options.lock_timeout)

    def _publish(self, man: dict[str, Any], data: bytes) -> None:
        """The commit point: swap the manifest in. Called under ``self._lock``."""
        self.files.swap_manifest()
        self._manifest, self._manifest_bytes = man, data
        self._sig = None  # the next check re-reads the (equal) bytes and records the new stat

    def _commit(
        self,
        man: dict[str, Any],
        loaded: LoadedPoints,
        deleted: list[PointId],
        ids: list[PointId],
        lines: list[bytes],
        payloads: list[dict],
        vectors: np.ndarray,
        count: int,
    ) -> None:
        """Write one batch as a new segment (:meth:`SegmentLog.append`) and apply it to memory at
        the commit point, then merge segments when due. Called holding the write lock."""
        self._last_write = time.monotonic()
        batch = self._lexical_batch(man, man["generation"] + 1, deleted, ids, payloads)
        published = False

        def publish(new: dict[str, Any], data: bytes) -> None:
            nonlocal published
            try:
                with self._lock:
                    self._publish(new, data)
                    published = True
                    if self._points is loaded and loaded.generation == man["generation"]:
                        try:
                            loaded.append(deleted, ids, payloads, vectors)
                            loaded.generation = new["generation"]
                            if loaded.dead > max(MIN_GARBAGE_ROWS, loaded.live):
                                loaded.compact()
                            if self._ann_wanted(loaded):
                                self._schedule_ann()
                        except BaseException:
                            self._points = None
                            raise
                    else:
                        self._points = None  # unloaded meanwhile; the next access reads the new files
            finally:
                if batch is not None and published:
                    self._commit_lexical(batch, self._lex_marker(new))

        try:
            new = self.files.append(man, deleted, lines, vectors, count, publish)
        finally:
            if batch is not None and not published:
                batch.close()
        try:
            self.files.maybe_merge(new, self._publish_locked)
        except (OSError, StoreCorrupt, Stale) as exc:  # the write itself is committed
            log.warning("vector store %r: compaction skipped (%s); it is retried on the next write", self.name, exc)

    def _publish_locked(self, man: dict[str, Any], data: bytes) -> None:
        with self._lock:
            self._publish(man, data)

    # -- the lexical index ------------------------------------------------------------------
    # The store's BM25 index (knowledge.vectorstore.lexical.DiskLexicon, tantivy) lives in ``lexical/``. It is
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
            self._lex_problem = (
                f"at state {self._lex_state!r}, the store at {marker!r}"
                if self._lex_state
                else "without a state (another version)"
            )
            return False
        return True

    def _lexical_batch(
        self, man: dict[str, Any], gen: int, deleted: Sequence[PointId], ids: Sequence[PointId], payloads: Sequence[dict]
    ) -> Batch | None:
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
            log.warning(
                "vector store %r: lexical index not updated (%s); it is rebuilt on the next lexical search", self.name, exc
            )
            return None

    def _commit_lexical(self, batch: Batch, marker: str) -> None:
        try:
            batch.commit()
        except Exception as exc:  # the vectors are committed: never fail the write for the index
            batch.close()
            with self._lock:
                self._lex_state = None
            log.warning(
                "vector store %r: lexical index commit failed (%s); it is rebuilt on the next lexical search", self.name, exc
            )
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
                loaded = self._loaded()
                rows = loaded.live_rows().tolist()
                ids = [loaded.ids[r] for r in rows]
                payloads = [loaded.payloads[r] for r in rows]
            started = time.perf_counter()
            lex = DiskLexicon(self.lexical_path)
            lex.create()
            batch = lex.batch()
            batch.add(ids, payloads)
            batch.set_state(marker)
            batch.commit()
            with self._lock:
                self._lex, self._lex_state = lex, marker
            log.log(
                logging.WARNING if ids else logging.INFO,
                "vector store %r: lexical index %s; rebuilt from %d points in %.1f s",
                self.name,
                problem or "missing",
                len(ids),
                time.perf_counter() - started,
            )

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
        """BM25 over the points' ``heading`` + ``text`` (see :class:`~knowledge.vectorstore.lexical.DiskLexicon`),
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
                loaded = self._loaded()
                for pid, score in found:
                    row = loaded.row_of.get(pid)
                    if row is None:
                        continue  # removed by a write whose index commit is a moment away
                    payload = loaded.payloads[row]
                    if w and not matches(payload, w):
                        continue  # a filter item the index does not hold (text, long strings)
                    out.append(ScoredPoint(id=pid, score=score, payload=dict(payload)))
                    if len(out) == k:
                        return out
            if len(found) < fetch:
                return out
            fetch *= 4

    # -- approximate search ------------------------------------------------------------------
    # An HNSW graph (ann.GraphIndex) over the loaded rows of a store with at least
    # ``ann_min_points`` live points, keyed by slot. Writes never wait for it: a commit appends rows
    # as before and schedules the backend's indexer, which adds the rows beyond ``graph.upto`` and
    # removes killed slots in small steps. A search takes graph candidates plus the exact tail and
    # rescores their union exactly (see docs/local-backend.md, Approximate search).
    def _ann_wanted(self, loaded: LoadedPoints) -> bool:
        opts = self._options
        return (
            opts.indexer is not None
            and opts.ann_min_points > 0
            and loaded.live >= opts.ann_min_points
            and loaded.distance in ann.METRICS
            and ann.available()
        )

    def _schedule_ann(self) -> None:
        if self._options.indexer is not None:
            self._options.indexer.schedule(id(self), self._ann_step)

    @staticmethod
    def _ann_complete(loaded: LoadedPoints) -> bool:
        graph = loaded.ann
        return graph is not None and not loaded.removed_slots and len(ann.tail_rows(loaded, graph.upto)) == 0

    def _ann_step(self) -> bool:
        """One bounded piece of indexing work on this store; returns whether more is left. Waits
        (sleeping, so the GIL is free) until this process has not written the store for
        :data:`~.ann.WRITE_QUIET_SECONDS`."""
        quiet = self._last_write + ann.WRITE_QUIET_SECONDS - time.monotonic()
        if quiet > 0:
            time.sleep(min(quiet, ann.WRITE_QUIET_SECONDS))
            return True
        with self._ann_mutex:
            with self._lock:
                loaded = self._points
                if loaded is None or not self._ann_wanted(loaded):
                    return False
                graph = loaded.ann
                stamp = {"incarnation": loaded.incarnation, "generation": loaded.generation}
            if graph is None:
                self._ann_attach(loaded, stamp)
                return True
            with self._lock:
                if loaded is not self._points:
                    return False
                removed, loaded.removed_slots = loaded.removed_slots or [], []
                tail = ann.tail_rows(loaded, graph.upto)[: ann.ADD_CHUNK]
                slots = loaded.slot_of_row[tail]
                vectors = loaded.vectors[tail]  # fancy indexing: a copy
                upto = int(slots[-1]) + 1 if len(tail) else loaded.next_slot
            graph.remove(removed)
            graph.add(slots, vectors)
            graph.upto = max(graph.upto, upto)
            with self._lock:
                if loaded is not self._points:
                    return False
                more = not self._ann_complete(loaded)
            if not more and graph.added_since_save >= ann.SAVE_AFTER_ROWS:
                self._save_ann_locked(loaded)
            return more

    def _ann_attach(self, loaded: LoadedPoints, stamp: dict[str, Any]) -> None:
        """Give ``loaded`` its graph: the persisted one when it is of this very state, else an
        empty one that the next steps fill (logged). Called holding ``self._ann_mutex``."""
        try:
            graph, slots, ids = ann.read(self.ann_path, stamp, loaded.size, loaded.distance)
        except ann.Unusable as exc:
            reason = str(exc)
        else:
            with self._lock:
                if (
                    loaded is self._points
                    and loaded.ann is None
                    and loaded.generation == stamp["generation"]
                    and loaded.n == loaded.live
                    and ids == loaded.ids
                ):
                    loaded.set_slots(slots, graph.upto)
                    loaded.removed_slots = []
                    loaded.ann = graph
                    self.ann_counts["loaded"] += 1
                    log.debug("vector store %r: approximate-search graph loaded (%d rows)", self.name, len(ids))
                    return
            reason = "of other points than the loaded ones"
        with self._lock:
            if loaded is not self._points or loaded.ann is not None:
                return
            loaded.removed_slots = []
            loaded.ann = ann.GraphIndex(loaded.size, loaded.distance)
            self.ann_counts["built"] += 1
            live = loaded.live
        log.log(
            logging.INFO if reason == "missing" else logging.WARNING,
            "vector store %r: approximate-search graph %s; rebuilding it from %d points in the"
            " background (searches are exact meanwhile)",
            self.name,
            reason,
            live,
        )

    def _save_ann(self, loaded: LoadedPoints | None) -> None:
        if loaded is None or loaded.ann is None or loaded.ann.saved:
            return
        with self._ann_mutex:
            self._save_ann_locked(loaded)

    def _save_ann_locked(self, loaded: LoadedPoints) -> None:
        """Persist ``loaded``'s graph if it covers every live row. Holding ``self._ann_mutex``."""
        graph = loaded.ann
        if graph is None or graph.saved:
            return
        with self._lock:
            if not self._ann_complete(loaded):
                return
            live = loaded.live_rows()
            slots = loaded.slot_of_row[live]
            ids = [loaded.ids[r] for r in live.tolist()]
            stamp = {"incarnation": loaded.incarnation, "generation": loaded.generation}
        started = time.perf_counter()
        try:
            ann.save(self.ann_path, graph, stamp, slots, ids)
        except OSError as exc:
            log.warning(
                "vector store %r: approximate-search graph not saved (%s); it is rebuilt when the store is next loaded",
                self.name,
                exc,
            )
            return
        self.ann_counts["saved"] += 1
        log.debug(
            "vector store %r: approximate-search graph saved (%d rows, %.2f s)",
            self.name,
            len(ids),
            time.perf_counter() - started,
        )

    def ensure_ann_index(self, timeout: float | None = None) -> bool:
        """Block until the approximate-search graph covers every live point (loading the store and
        doing the indexing work in this thread, beside the backend's indexer).

        Returns ``False`` when the store has fewer than ``vector_store.ann_min_points`` live
        points, approximate search is off (``vector_store.ann = "off"``), the distance has no
        graph (manhattan), or ``timeout`` seconds passed; ``True`` when the graph is complete.
        Raises ``StoreNotFound``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                self._require()
                loaded = self._loaded()
                if not self._ann_wanted(loaded):
                    return False
                if self._ann_complete(loaded):
                    return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._ann_step()

    def ann_status(self) -> dict[str, Any]:
        """The approximate-search state: ``{"active": bool, "ready": bool, "indexed": int,
        "live": int}`` (``active``: the store is loaded and large enough to use a graph;
        ``indexed``: live rows the graph covers; ``ready``: it covers all). No load is done."""
        with self._lock:
            loaded = self._points
            if loaded is None:
                return {"active": False, "ready": False, "indexed": 0, "live": 0}
            graph = loaded.ann
            tail = len(ann.tail_rows(loaded, graph.upto)) if graph is not None else loaded.live
            return {
                "active": self._ann_wanted(loaded),
                "ready": self._ann_complete(loaded),
                "indexed": loaded.live - tail,
                "live": loaded.live,
            }

    def _ann_rows(self, loaded: LoadedPoints, q: np.ndarray, k: int, w: dict[str, Any] | None) -> np.ndarray | None:
        """Rows to rescore exactly for a top-``k`` search: graph candidates (post-filtered by
        ``w``, oversampled by the filter's share of the points) and the live tail. ``None``: search
        exactly (no usable graph, a selective filter, or too few candidates passed)."""
        graph = loaded.ann
        if graph is None or loaded.removed_slots is None:
            return None
        if graph.upto < loaded.next_slot or loaded.removed_slots:
            self._schedule_ann()
        if graph.upto == 0:
            return None
        live = loaded.live
        count = ann.candidates(k)
        mask = None
        if w:
            frows = loaded.where_rows(w)
            if len(frows) < ANN_FILTER_SHARE * live:
                return None  # selective: the exact scan of those rows is cheap and exact
            mask = np.zeros(loaded.n, dtype=bool)
            mask[frows] = True
            count = int(np.ceil(count * live / max(1, len(frows))))
        slots = graph.search(q, min(count, len(graph)))
        slots = slots[(slots >= 0) & (slots < len(loaded.row_of_slot))]
        rows = loaded.row_of_slot[slots]
        rows = rows[rows >= 0]
        rows = rows[loaded.alive[rows]]
        tail = ann.tail_rows(loaded, graph.upto)
        if mask is not None:
            rows = rows[mask[rows]]
            tail = tail[mask[tail]]
        if len(rows) < min(k, live - len(tail)):
            return None  # too few candidates passed: exact
        return np.union1d(rows, tail)

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
            man = self.files.create(size, distance)
            shutil.rmtree(self.lexical_path, ignore_errors=True)  # a crash in the middle of a drop
            shutil.rmtree(self.ann_path, ignore_errors=True)
            data = self.files.write_manifest_tmp(man)
            with self._lock:
                self._publish(man, data)
                self._points = None
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
                fsync_dir(self._options.root)

    def info(self) -> CollectionInfo:
        """Size, distance, point count and bytes on disk, from the manifest (no load needed)."""
        with self._lock:
            man = self._require()
            disk = len(self._manifest_bytes or b"") + sum(s["jsonl_bytes"] + s["npy_bytes"] for s in man["segments"])
            return CollectionInfo(
                name=self.name,
                size=man["size"],
                distance=man["distance"],
                count=man["count"],
                backend=self._options.backend_name,
                disk_bytes=disk,
            )

    def _prepare(
        self, points: Sequence[Point], size: int, distance: str
    ) -> tuple[list[PointId], list[bytes], list[dict], np.ndarray]:
        """Validate and encode a batch: ids, JSONL lines, the payloads as stored, vectors."""
        with gc_paused():  # many small objects: the cyclic GC would walk the caller's heap repeatedly
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
                        f"Point {p.id!r} cannot be stored: its id or payload is not JSON-serialisable ({exc})."
                    ) from None
                ids.append(p.id)
                lines.append(line)
                payloads.append(loads(line)["payload"])  # what a reload will see; a private copy
        if distance == "cosine":
            normalise_rows(vectors)  # stack_points returned a fresh matrix: ours to modify
        return ids, lines, payloads, vectors

    def _check_cap(self, live: int, new_count: int) -> None:
        cap = self._options.max_points
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
                loaded = self._loaded()
                deleted = [loaded.ids[r] for r in loaded.where_rows(where).tolist()] if where else []
                gone = set(deleted)
                kept = sum(1 for pid in ids if pid in loaded.row_of and pid not in gone)
                count = loaded.live - len(deleted) + len(ids) - kept
                self._check_cap(loaded.live, count)
            if not deleted and not ids:
                return
            self._commit(man, loaded, deleted, ids, lines, payloads, vectors, count)

    def _remove(self, wanted: list[PointId], w: dict[str, Any] | None) -> int:
        """One segment listing the deleted ids. Raises (besides the contract's): StoreLocked."""
        if not wanted and not w:
            with self._lock:
                self._require()
            return 0
        with self._writing():
            with self._lock:
                man = self._require()
                loaded = self._loaded()
                targets: dict[PointId, None] = {pid: None for pid in wanted if pid in loaded.row_of}
                if w:
                    targets.update((loaded.ids[r], None) for r in loaded.where_rows(w).tolist())
                count = loaded.live - len(targets)
            if not targets:
                return 0
            empty = np.zeros((0, man["size"]), dtype=np.float32)
            self._commit(man, loaded, list(targets), [], [], [], empty, count)
            return len(targets)

    def _count(self, w: dict[str, Any] | None) -> int:
        """Number of live points (matching ``w``); without a filter it needs no load."""
        with self._lock:
            man = self._require()
            if not w:
                return self._points.live if self._points is not None else man["count"]
            return len(self._loaded().where_rows(w))

    def _native_filter(self, raw_filter: Any) -> Any:
        """A callable ``payload -> bool`` (:data:`~knowledge.vectorstore.base.PayloadPredicate`),
        called on every live point's payload (which it must not modify)."""
        if not callable(raw_filter):
            raise InvalidArgument(
                "raw_filter for the memory backend is a callable taking a payload dict and"
                f" returning a bool, got {type(raw_filter).__name__}."
            )
        return raw_filter

    def _search(
        self,
        vector: np.ndarray,
        k: int,
        w: dict[str, Any] | None,
        predicate: Any,
        score_threshold: float | None,
        with_payload: bool,
    ) -> list[ScoredPoint]:
        """Exact search, or for stores of at least ``vector_store.ann_min_points`` points an
        approximate candidate set (the graph's, plus the rows not yet in it) rescored exactly:
        scores are always the exact float32 ones. ``where`` is answered from a lazily built
        per-field index (a selective one exactly over its rows), a ``raw_filter`` predicate is
        called on every live payload (always exact). Scores are Python floats; equal scores keep
        insertion order; payloads are shallow copies."""
        with self._lock:
            man = self._require()
            q = check_vector_size(vector, man["size"])
            loaded = self._loaded()
            if loaded.live == 0:
                return []
            distance = loaded.distance
            q = prepare_query(q, distance)
            rows: np.ndarray | None = None
            if predicate is None and self._ann_wanted(loaded):
                if loaded.ann is None:
                    self._schedule_ann()
                else:
                    rows = self._ann_rows(loaded, q, k, w)
            if rows is not None:
                pass  # graph candidates + tail, rescored exactly below
            elif predicate is not None:
                rows = loaded.predicate_rows(predicate)
            elif w:
                rows = loaded.where_rows(w)
            elif loaded.dead > loaded.n // 4:
                rows = loaded.live_rows()
            hits_rows, hits_scores = loaded.rank(q, rows, k)
            out = []
            for row, score in zip(hits_rows.tolist(), hits_scores.tolist()):
                if distance == "cosine":
                    score = clamp_cosine(score)
                if not passes_threshold(score, score_threshold, distance):
                    break  # sorted best first: the rest are worse
                payload = dict(loaded.payloads[row]) if with_payload else None
                out.append(ScoredPoint(id=loaded.ids[row], score=score, payload=payload))
            return out

    def _scroll(self, w: dict[str, Any] | None, limit: int | None, with_vectors: bool) -> Iterator[Point]:
        """Points in insertion order (order of last write). Vectors are ``(d,)`` float32 copies
        (unit length for cosine). Collected when called, so the iterator is a snapshot."""
        with self._lock:
            self._require()
            loaded = self._loaded()
            rows = loaded.where_rows(w) if w else loaded.live_rows()
            if limit is not None:
                rows = rows[:limit]
            points = [
                Point(
                    id=loaded.ids[r],
                    vector=loaded.vectors[r].copy() if with_vectors else np.zeros(0, dtype=np.float32),
                    payload=dict(loaded.payloads[r]),
                )
                for r in rows.tolist()
            ]
        return iter(points)

    def _retrieve(self, wanted: list[PointId], with_vectors: bool) -> list[Point]:
        with self._lock:
            self._require()
            loaded = self._loaded()
            out = []
            for pid in wanted:
                row = loaded.row_of.get(pid)
                if row is not None:
                    vec = loaded.vectors[row].copy() if with_vectors else np.zeros(0, dtype=np.float32)
                    out.append(Point(id=pid, vector=vec, payload=dict(loaded.payloads[row])))
            return out

    def _facet(self, key: str, w: dict[str, Any] | None) -> dict[Any, int]:
        """Count live points per value of payload field ``key`` (from the per-field index)."""
        with self._lock:
            self._require()
            loaded = self._loaded()
            counts: dict[Any, int] = {}
            if w:
                for r in loaded.where_rows(w).tolist():
                    payload = loaded.payloads[r]
                    if key in payload and index_key(payload[key]) is not None:
                        value = payload[key]
                        counts[value] = counts.get(value, 0) + 1
                return counts
            alive = loaded.alive
            for ikey, rows in loaded.index(key).items():
                c = int(np.count_nonzero(alive[np.asarray(rows, dtype=np.int64)]))
                if c:
                    counts[ikey[1]] = counts.get(ikey[1], 0) + c
            return counts

    def __repr__(self) -> str:
        return f"MemoryCollection({self.name!r}, path={str(self.path)!r}, loaded={self.is_loaded})"
