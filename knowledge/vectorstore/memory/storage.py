"""Files of the memory backend: constants of the on-disk layout and the low-level readers and writers
(segment paths, fsynced writes, ``.npy`` reads, JSONL point ids). See ``docs/local-backend.md``."""

from __future__ import annotations

import contextlib
import gc
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson

from knowledge.errors import StoreCorrupt
from knowledge.vectorstore.base import PointId, name_slug

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
