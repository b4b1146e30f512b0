"""One store of the memory backend: catch-up with other processes, load/unload, the commit of a
write, compaction, the lexical index and the ``Collection`` hooks. See ``docs/local-backend.md``."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    check_prepared,
    check_vector_size,
    matches,
    stack_points,
)
from knowledge.vectorstore.memory.state import _index_key, _scores, _State
from knowledge.vectorstore.memory.storage import (
    _EUCLID_SLACK,
    _LOAD_ATTEMPTS,
    _RACY_NS,
    _SEGMENT_FILE,
    FORMAT_VERSION,
    LEXICAL_DIR,
    LOCKS_DIR,
    MANIFEST,
    MANIFEST_TMP,
    MAX_SEGMENTS,
    MERGE_FACTOR,
    MIN_GARBAGE_ROWS,
    _gc_paused,
    _line_id,
    _read_npy_into,
    _seg_paths,
    _Stale,
    _write_file,
    folder_name,
)
from knowledge.vectorstore.scoring import (
    DISTANCE_ORDER,
    clamp_cosine,
    euclid_exact,
    normalise_rows,
    passes_threshold,
    prepare_query,
    top_k,
)

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.vectorstore.memory.backend import MemoryBackend

log = logging.getLogger(__name__)


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
                                  count=man["count"], backend=self._backend.name, disk_bytes=disk)

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
