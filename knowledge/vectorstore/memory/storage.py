"""Files of one store of the memory backend: layout, segments, the manifest and the commit protocol.

A store is a folder holding ``manifest.json`` -- the commit point -- and the immutable segments it
lists (``seg-NNNNNN.jsonl``: a header line, then one ``{"id", "payload"}`` line per point;
``seg-NNNNNN.npy``: their vectors, float32). :class:`SegmentLog` reads and writes them and knows
nothing of the loaded points: a write (:meth:`SegmentLog.append`) removes orphans, writes and fsyncs
the segment, writes and fsyncs ``manifest.json.tmp``, hands it to the caller's ``publish`` (which
``os.replace``\\ s it over ``manifest.json`` with :meth:`SegmentLog.swap_manifest` and updates
memory), then fsyncs the folder. Merges commit the same way. See ``docs/local-backend.md``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from filelock import FileLock, Timeout

from knowledge._fs import fsync_dir
from knowledge.errors import StorageError, StoreCorrupt, StoreLocked
from knowledge.vectorstore.base import PointId, name_slug
from knowledge.vectorstore.scoring import DISTANCE_ORDER

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
RACY_NS = 3_000_000_000  # a manifest written more recently than this is re-read on every check
LOAD_ATTEMPTS = 6


def folder_name(name: str) -> str:
    """The folder of the store called ``name``: a readable ASCII slug + 12 hex digits of its sha256.

    >>> folder_name("Team Notes")[:11]
    'team-notes-'
    """
    return name_slug(name, "-")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
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


class Stale(Exception):
    """A file the manifest lists is gone or belongs to another version: re-read the manifest."""


def _read_npy_into(path: Path, out: np.ndarray) -> None:
    """Read the ``.npy`` at ``path`` into ``out`` (``(rows, size)`` float32) without a copy."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - a missing file is told apart from a bad one; closed by `with fh` below
    except FileNotFoundError:
        raise Stale(f"{path.name} is missing") from None
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
            raise Stale(f"{path.name} holds shape {tuple(shape)}, expected {out.shape}")
        if dtype == np.dtype("<f4") and not fortran and np.little_endian:
            got = fh.readinto(out.data.cast("B"))
            if got != out.nbytes:
                raise StoreCorrupt(f"{path} is truncated ({got} of {out.nbytes} vector bytes).")
            return
        fh.seek(0)
        out[...] = np.load(fh, allow_pickle=False).astype(np.float32)


#: ``publish(manifest, data)``: the caller's commit point -- swap the manifest in
#: (:meth:`SegmentLog.swap_manifest`) and bring its memory to ``manifest``, under its own lock.
Publish = Callable[[dict[str, Any], bytes], None]


class SegmentLog:
    """The files of one store: ``manifest.json`` and its segments under ``root/<folder_name(name)>``,
    and the inter-process lock ``root/.locks/<folder>.lock`` held by every write.

    Attributes:
        path: the store's folder. lock_path: its lock file. manifest_path: its manifest.
    """

    def __init__(self, root: Path, name: str) -> None:
        self.name = name
        self.root = root
        folder = folder_name(name)
        self.path: Path = root / folder
        self.lock_path: Path = root / LOCKS_DIR / f"{folder}.lock"
        self.manifest_path: Path = self.path / MANIFEST
        self._write_mutex = threading.Lock()
        self._file_lock = FileLock(str(self.lock_path))

    # -- reading ---------------------------------------------------------------------------------
    def corrupt(self, what: str) -> StoreCorrupt:
        """The error for an unreadable store, naming its folder and what is wrong."""
        return StoreCorrupt(
            f"Vector store {self.name!r} ({self.path}) cannot be read: {what}. Restore the folder"
            " from a backup, or drop the store and ingest its files again."
        )

    def parse_manifest(self, data: bytes) -> dict[str, Any]:
        """The manifest in ``data``, validated (``StoreCorrupt`` naming what is wrong)."""
        try:
            man = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise self.corrupt(f"{MANIFEST} is not valid JSON ({exc})") from None
        if not isinstance(man, dict):
            raise self.corrupt(f"{MANIFEST} is not a JSON object")
        fmt = man.get("format")
        if not isinstance(fmt, int) or fmt < 1:
            raise self.corrupt(f"{MANIFEST} has no valid 'format' field")
        if fmt > FORMAT_VERSION:
            raise self.corrupt(
                f"{MANIFEST} has format {fmt}, written by a newer version of knowledge (this one"
                f" reads format {FORMAT_VERSION})"
            )
        if man.get("name") != self.name:
            raise self.corrupt(f"{MANIFEST} belongs to a store named {man.get('name')!r}")
        for key in ("size", "generation", "count", "next_segment"):
            if not isinstance(man.get(key), int) or isinstance(man.get(key), bool) or man[key] < 0:
                raise self.corrupt(f"{MANIFEST} has no valid {key!r} field")
        if man["size"] < 1 or man.get("distance") not in DISTANCE_ORDER:
            raise self.corrupt(f"{MANIFEST} has an invalid size or distance")
        if not isinstance(man.get("incarnation"), str) or not isinstance(man.get("segments"), list):
            raise self.corrupt(f"{MANIFEST} has no valid 'incarnation' or 'segments' field")
        for seg in man["segments"]:
            if not isinstance(seg, dict) or not all(
                isinstance(seg.get(k), int) and seg[k] >= 0
                for k in ("seg", "first_gen", "last_gen", "rows", "deleted", "jsonl_bytes", "npy_bytes")
            ):
                raise self.corrupt(f"{MANIFEST} lists a malformed segment {seg!r}")
        return man

    def read_jsonl(
        self, man: dict[str, Any], seg: dict[str, Any], raw: bool = False
    ) -> tuple[list[PointId], list[PointId], list[dict], list[bytes]]:
        """Deleted ids, ids, payloads of one segment; with ``raw``: deleted ids, ids, [], lines."""
        path = _seg_paths(self.path, seg["seg"])[0]
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise Stale(f"{path.name}, listed in {MANIFEST}, is missing") from None
        lines = data.split(b"\n")
        try:
            header = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or (
            header.get("segment"),
            header.get("incarnation"),
            header.get("first_gen"),
            header.get("last_gen"),
        ) != (seg["seg"], man["incarnation"], seg["first_gen"], seg["last_gen"]):
            raise Stale(f"{path.name} does not hold the segment {MANIFEST} lists")
        if len(data) != seg["jsonl_bytes"] or lines[-1] != b"" or len(lines) - 2 != seg["rows"]:
            raise Stale(
                f"{path.name} has {len(data)} bytes and {len(lines) - 2} points, {MANIFEST} lists"
                f" {seg['jsonl_bytes']} bytes and {seg['rows']} points"
            )
        deleted = header.get("deleted")
        if not isinstance(deleted, list):
            raise self.corrupt(f"{path.name} has no list of deleted ids")
        ids: list[PointId] = []
        payloads: list[dict] = []
        loads = orjson.loads
        if raw:
            try:
                body = lines[1:-1]
                return deleted, [_line_id(line) for line in body], [], body
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                raise self.corrupt(f"{path.name}: {exc}") from None
        try:
            for line in lines[1:-1]:
                obj = loads(line)
                payload = obj["payload"]
                if type(payload) is not dict:
                    raise TypeError("payload is not an object")
                ids.append(obj["id"])
                payloads.append(payload)
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise self.corrupt(f"{path.name}, line {len(ids) + 2}: {exc}") from None
        return deleted, ids, payloads, []

    def read_vectors(self, seg: dict[str, Any], out: np.ndarray) -> None:
        """Read segment ``seg``'s vectors into ``out`` (``(rows, size)`` float32)."""
        _read_npy_into(_seg_paths(self.path, seg["seg"])[1], out)

    # -- the write lock --------------------------------------------------------------------------
    @contextlib.contextmanager
    def writing(self, timeout: float) -> Iterator[None]:
        """Hold this store's write lock: one writer thread here, one writer process anywhere, waiting
        at most ``timeout`` seconds (``StoreLocked``); an ``OSError`` inside becomes ``StorageError``."""
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

    def is_writing(self) -> bool:
        """Whether a thread of this process holds the write lock right now."""
        return self._write_mutex.locked()

    # -- writing (called holding the write lock) -------------------------------------------------
    def remove_orphans(self, man: dict[str, Any] | None) -> None:
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

    def write_segment(
        self,
        man: dict[str, Any],
        seg_no: int,
        first_gen: int,
        last_gen: int,
        deleted: list[PointId],
        lines: list[bytes],
        vectors: np.ndarray,
    ) -> dict[str, Any]:
        """Write (and fsync) one segment's files; returns its manifest entry."""
        jsonl, npy = _seg_paths(self.path, seg_no)
        header = orjson.dumps(
            {
                "segment": seg_no,
                "incarnation": man["incarnation"],
                "first_gen": first_gen,
                "last_gen": last_gen,
                "deleted": deleted,
            }
        )
        body = b"\n".join([header, *lines]) + b"\n"
        _write_file(jsonl, body)
        npy_bytes = 0
        if lines:
            with open(npy, "wb") as fh:
                np.lib.format.write_array(
                    fh, np.ascontiguousarray(vectors, dtype=np.float32), version=(1, 0), allow_pickle=False
                )
                fh.flush()
                os.fsync(fh.fileno())
                npy_bytes = fh.tell()
        return {
            "seg": seg_no,
            "first_gen": first_gen,
            "last_gen": last_gen,
            "rows": len(lines),
            "deleted": len(deleted),
            "jsonl_bytes": len(body),
            "npy_bytes": npy_bytes,
        }

    def write_manifest_tmp(self, man: dict[str, Any]) -> bytes:
        """Write (and fsync) ``manifest.json.tmp``; returns its bytes. Not yet committed."""
        data = orjson.dumps(man, option=orjson.OPT_INDENT_2) + b"\n"
        _write_file(self.path / MANIFEST_TMP, data)
        return data

    def swap_manifest(self) -> None:
        """The commit point: ``os.replace`` ``manifest.json.tmp`` over ``manifest.json``."""
        os.replace(self.path / MANIFEST_TMP, self.manifest_path)

    def create(self, size: int, distance: str) -> dict[str, Any]:
        """Make the store's folder (removing orphans of a crashed create or drop) and return the
        manifest of an empty store of a new incarnation, to write and publish."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.path.mkdir(exist_ok=True)
        fsync_dir(self.root)
        self.remove_orphans(None)
        return {
            "format": FORMAT_VERSION,
            "name": self.name,
            "size": size,
            "distance": distance,
            "incarnation": uuid.uuid4().hex,
            "generation": 0,
            "count": 0,
            "next_segment": 1,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "segments": [],
        }

    def append(
        self,
        man: dict[str, Any],
        deleted: list[PointId],
        lines: list[bytes],
        vectors: np.ndarray,
        count: int,
        publish: Publish,
    ) -> dict[str, Any]:
        """Commit one write as a new segment after ``man``: remove orphans, write and fsync the
        segment, write and fsync the new manifest (generation + 1, ``count`` points), ``publish``
        it (the commit point), fsync the folder. Returns the new manifest. A crash before the swap
        leaves ``man``; after it, the new manifest, which lists only complete files."""
        self.remove_orphans(man)
        gen = man["generation"] + 1
        seg_no = man["next_segment"]
        entry = self.write_segment(man, seg_no, gen, gen, deleted, lines, vectors)
        new = {**man, "generation": gen, "count": count, "next_segment": seg_no + 1, "segments": [*man["segments"], entry]}
        data = self.write_manifest_tmp(new)
        publish(new, data)
        fsync_dir(self.path)
        return new

    # -- compaction ----------------------------------------------------------------------------
    @staticmethod
    def merge_start(man: dict[str, Any]) -> int | None:
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

    def maybe_merge(self, man: dict[str, Any], publish: Publish) -> None:
        """Merge segments while :meth:`merge_start` finds a run to merge."""
        while (start := self.merge_start(man)) is not None:
            man = self.merge(man, start, publish)

    def merge(self, man: dict[str, Any], start: int, publish: Publish) -> dict[str, Any]:
        """Rewrite segments ``start:`` as one (replaying them) and commit it through ``publish``; the
        store's points do not change."""
        run = man["segments"][start:]
        total = sum(s["rows"] for s in run)
        vectors = np.empty((total, man["size"]), dtype=np.float32)
        seg_ids: list[list[PointId]] = []
        seg_lines: list[list[bytes]] = []
        seg_dels: list[list[PointId]] = []
        base = 0
        with gc_paused():
            for seg in run:
                dels, ids, _, raw = self.read_jsonl(man, seg, raw=True)
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
        entry = self.write_segment(man, seg_no, run[0]["first_gen"], run[-1]["last_gen"], list(deleted), lines, merged)
        del vectors, merged
        new = {**man, "next_segment": seg_no + 1, "segments": [*man["segments"][:start], entry]}
        data = self.write_manifest_tmp(new)
        publish(new, data)
        fsync_dir(self.path)
        for seg in run:
            for path in _seg_paths(self.path, seg["seg"]):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
        log.debug("vector store %r: merged %d segments into seg-%06d (%d points)", self.name, len(run), seg_no, len(lines))
        return new
