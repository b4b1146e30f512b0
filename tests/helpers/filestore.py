"""What a file store holds, read from its storage directly (files, rows, objects), backend-neutral.

``inventory(store)`` is a set of ``"record:<file id>"`` and ``"blob:<sha256>"`` entries, plus one raw
entry for anything else that is stored (a temp file, a pending blob row, a temp object, an unfinished
multipart upload, a marker without its record): a test compares it with what it expects to be there.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path

from knowledge.filestore import FileStore, FilesystemFileStore

MiB = 1024 * 1024

_ID = r"(file-[0-9a-f]{32})"
_SHA = r"([0-9a-f]{64})"


def files_under(root: Path) -> set[str]:
    """Every regular file below ``root``, as POSIX paths relative to it."""
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def inventory(store: FileStore) -> set[str]:
    if isinstance(store, FilesystemFileStore):
        return _filesystem(store)
    if store.name == "postgresql":
        return _postgresql(store)
    if store.name == "s3":
        return _s3(store)
    raise AssertionError(f"no inventory for {store!r}")


def blobs(store: FileStore) -> set[str]:
    """The digests of the blobs stored."""
    return {e.split(":", 1)[1] for e in inventory(store) if e.startswith("blob:")}


def _filesystem(store: FilesystemFileStore) -> set[str]:
    out = set()
    for p in files_under(store.root) - {".lock"}:
        if m := re.fullmatch(rf"meta/{_ID}\.json", p):
            out.add(f"record:{m[1]}")
        elif (m := re.fullmatch(rf"blobs/[0-9a-f]{{2}}/{_SHA}", p)) and p.split("/")[1] == m[1][:2]:
            out.add(f"blob:{m[1]}")
        else:
            out.add(p)
    return out


def _postgresql(store: FileStore) -> set[str]:
    import psycopg

    from knowledge.filestore.postgresql import BLOBS, CHUNKS, FILES

    out = set()
    with psycopg.connect(store.conninfo) as conn:  # type: ignore[attr-defined]
        out |= {f"record:{i}" for (i,) in conn.execute(f"SELECT id FROM {FILES}")}
        for blob_id, sha, size, stored in conn.execute(
            f"SELECT b.id, b.sha256, b.size, coalesce(sum(length(c.data)), 0) FROM {BLOBS} b"
            f" LEFT JOIN {CHUNKS} c ON c.blob_id = b.id GROUP BY b.id"
        ):
            out.add(f"blob:{sha}" if sha and size == stored else f"pending-blob:{blob_id}:{sha}:{stored}")
        for (blob_id,) in conn.execute(
            f"SELECT DISTINCT blob_id FROM {CHUNKS} WHERE blob_id NOT IN (SELECT id FROM {BLOBS})"
        ):
            out.add(f"orphan-chunks:{blob_id}")
    return out


def _s3(store: FileStore) -> set[str]:
    client, bucket, prefix = store.client, store.bucket, store.prefix  # type: ignore[attr-defined]
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", ())
    ]
    out, markers = set(), set()
    for key in keys:
        rel = key[len(prefix) :] if key.startswith(prefix) else "outside-prefix:" + key
        if m := re.fullmatch(rf"files/{_ID}\.json", rel):
            out.add(f"record:{m[1]}")
        elif m := re.fullmatch(rf"blobs/{_SHA}", rel):
            out.add(f"blob:{m[1]}")
        elif m := re.fullmatch(rf"by-sha256/{_SHA}/{_ID}", rel):
            markers.add((m[1], m[2]))
        else:
            out.add(rel)
    records = {e[7:] for e in out if e.startswith("record:")}
    out |= {f"orphan-marker:{sha}/{fid}" for sha, fid in markers if fid not in records}
    uploads = client.list_multipart_uploads(Bucket=bucket).get("Uploads", ())
    out |= {f"upload:{u['Key']}" for u in uploads}
    return out


class PatternStream:
    """A read-only binary stream of ``size`` deterministic bytes, generated on the fly (never whole).

    ``fail_after``: raise ``RuntimeError`` once that many bytes were handed out.
    ``pause_at``/``resume``: block in ``read`` once that many bytes were handed out until ``resume`` is set.
    """

    def __init__(self, size: int, *, seed: int = 0, fail_after: int | None = None, pause_at: int | None = None) -> None:
        self.size, self.pos = size, 0
        self.fail_after, self.pause_at = fail_after, pause_at
        self.paused, self.resume = threading.Event(), threading.Event()
        self.closed = False
        period = bytes((i + seed) % 251 for i in range(251))
        self._pattern = period * (MiB // 251 + 2)  # byte i of the stream is _pattern[i % 251]

    def read(self, n: int = -1) -> bytes:
        if self.fail_after is not None and self.pos >= self.fail_after:
            raise RuntimeError("the upload connection dropped")
        if self.pause_at is not None and self.pos >= self.pause_at and not self.resume.is_set():
            self.paused.set()
            assert self.resume.wait(30)
        n = self.size - self.pos if n < 0 else min(n, self.size - self.pos)
        start = self.pos % 251
        if start + n <= len(self._pattern):
            out = self._pattern[start : start + n]  # one copy of n bytes, nothing else
        else:
            out = (self._pattern[start:] + self._pattern * (n // len(self._pattern) + 1))[:n]
        self.pos += n
        return out

    def close(self) -> None:
        self.closed = True


def pattern_sha256(size: int, seed: int = 0) -> str:
    h, s = hashlib.sha256(), PatternStream(size, seed=seed)
    while chunk := s.read(MiB):
        h.update(chunk)
    return h.hexdigest()
