"""Portable knowledge: a store as one bundle file (export / import), a move to another backend, and
a backup / restore of the whole data folder.

The bundle (``.kb``) is a zip archive, format ``knowledge-bundle`` version :data:`FORMAT_VERSION`:

``manifest.json``
    ``format``, ``format_version``, ``created``; ``store``: the store's name, its template spec
    without the backend (backend-independent: model, distance, chunking, ...), the embedding model,
    ``dimension``, ``distance`` and the backend it came from; ``files``: one entry per file (its
    member, the file store's id, name, media type, size, SHA-256, status, reason, error, chunks,
    pages, warnings, attributes, ``aliases``: its other names in the store -- the same bytes under
    another name, issue 18); ``blocks``: the chunk blocks; ``chunks``: their total; ``members``:
    the SHA-256 and size of every other member. Written last (a zip's directory is at its end).
``files/NNNNNN.bin``
    a file's bytes, as stored (zip "stored", no compression).
``chunks/NNNNNN.jsonl`` + ``chunks/NNNNNN.npy``
    a block of at most :data:`BLOCK` chunks: one ``{"id", "payload"}`` JSON line per chunk (text,
    provenance -- page, character span, heading -- and every other payload field), and their vectors
    as one ``(n, d)`` little-endian float32 ``.npy`` matrix (numpy's format; the rows in the order of
    the lines).

The lexical (BM25) index is not exported: rebuilding it from the chunks' text on the target is
cheaper than carrying it (the memory backend's tantivy index is built by the first words search,
about a second per 10,000 chunks; pgvector writes its ``tsvector`` with the rows; Qdrant stores use
the in-process index), and it would tie the bundle to one backend.

Streaming: an export holds one file's chunks (a file's chunks are scrolled together) plus one block;
an import holds one block; file bytes are copied in 1 MiB pieces. Memory stays bounded for a store of
100,000 chunks (``bench/bench_portable.py`` measures it).

An import never leaves half a store: the checksums and sizes are checked as each member is read;
the chunks go into a new collection no store uses (``<name>~import-<pid>-<hex>``) and the files into
the file store marked with the import's token; only when everything is in does one catalog
transaction create the store with its file records (:meth:`Indexer.adopt_store`). A failure drops
the collection and the files; a process killed midway leaves an orphan collection and files that no
store references, which the next import, move or backup removes (:func:`sweep_leftovers`).

A bundle or backup is untrusted input: every member is read in pieces and counted, never past the
manifest's size for it nor its bound (``ingest.max_file_mb`` for a file, :data:`MAX_PAYLOADS_BYTES`
for a block's lines, the block's exact matrix for its ``.npy``, whose header is parsed and checked
first), whatever the zip's directory says; the zip holds exactly the listed members, no link; every
chunk cites a file of the bundle (:func:`check_chunks`, before anything is written).

Errors: :class:`~knowledge.errors.BundleCorrupt` (truncated, tampered, a member missing or over
its bound, a chunk of no file, not a bundle), :class:`~knowledge.errors.BundleTooNew` (a newer format), :class:`~knowledge.errors.
StoreExists` (the name is taken: import ``as_name=...``). Checksums detect damage, not malice: the
manifest itself is not signed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from knowledge._names import bad_character, check_name
from knowledge.catalog import DONE, FAILED, Catalog, FileRecord, StoreRecord
from knowledge.config import Settings
from knowledge.errors import (
    BundleCorrupt,
    BundleTooNew,
    InvalidArgument,
    KnowledgeError,
    StorageError,
    StoreExists,
    TargetNotEmpty,
)
from knowledge.filestore.base import FileStore
from knowledge.filestore.filesystem import RECORD_FORMAT
from knowledge.indexing import Indexer
from knowledge.stores import Stores
from knowledge.templates import TemplateRegistry, VectorStoreTemplate, make_template
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory.storage import LEXICAL_DIR, MANIFEST_TMP

FORMAT = "knowledge-bundle"
#: Version of the bundle format this module writes; it reads this version and older.
FORMAT_VERSION = 1
#: Chunks per block (``chunks/NNNNNN.*``): 2,048 x 384 float32 is 3 MiB of vectors.
BLOCK = 2048
MANIFEST = "manifest.json"
#: The prefix of the hidden folder where :func:`restore` leaves the bundles it unpacked.
RESTORE_BUNDLES = ".restore-bundles-"
#: The metadata key marking a file-store record written by an import (its token).
IMPORT_MARK = "knowledge_import"
_TEMP = re.compile(r"~import-(\d+)-[0-9a-f]{8}$")
PIECE = 1 << 20

#: The most chunks a block of a bundle may hold when read (the format's bound; :data:`BLOCK` is
#: what this program writes).
MAX_BLOCK = 2048

# What an import or a restore reads is untrusted (anyone can hand over a .kb file): every figure
# below is checked while the bytes are read, never taken from the zip's directory alone.
#: The largest ``manifest.json`` read (about 100,000 file entries).
MAX_MANIFEST_BYTES = 64 << 20
#: The largest chunk block's JSON lines (``chunks/NNNNNN.jsonl``): 2,048 chunks of 64 KiB.
MAX_PAYLOADS_BYTES = MAX_BLOCK * (64 << 10)
#: The largest embedding dimension a bundle may carry.
MAX_DIMENSION = 16384
#: The largest ``.npy`` header (numpy writes 128 bytes for a 2-d float32 matrix).
_NPY_HEADER_MAX = 1024
_VECTOR_DTYPE = np.dtype("<f4")

Progress = Callable[[str, float], None]
"""``progress(stage, fraction)``: the stage in words ("files", "chunks", "embedding, about 2 min
left", ...) and the fraction of the whole job done, in [0, 1]."""

_live_tokens: set[str] = set()  # imports running in this process
_live_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What :func:`export_store` wrote: the bundle's path, its size in bytes, files and chunks
    exported, files left out (being ingested: ``skipped``), and the seconds it took."""

    store: str
    path: Path
    files: int
    chunks: int
    bytes: int
    seconds: float
    skipped: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What :func:`import_bundle` made: the store's name, template and backend, its files and
    chunks, whether the bundle's vectors were reused (``reembedded_from`` names the bundle's model
    when they were not), the seconds it took, and a sentence for a person (``message``)."""

    store: str
    template: str
    backend: str
    files: int
    chunks: int
    reused_vectors: bool
    reembedded_from: str | None
    seconds: float
    message: str


# -- export -------------------------------------------------------------------------------------

class _HashingWriter(io.RawIOBase):
    """Pass writes on to ``out`` (a zip member) and keep their SHA-256 and length."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.sha, self.size = out, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.out.write(view)
        self.sha.update(view)
        self.size += view.nbytes
        return view.nbytes


def export_store(parts: Parts, store: str, out: str | os.PathLike, *, progress: Progress | None = None) -> ExportResult:
    """Write store ``store`` to the bundle ``out`` (see the module docstring).

    The bundle is written to ``out + ".part"`` and renamed when complete, so ``out`` is a whole
    bundle or absent (a killed export leaves a ``.part`` that import rejects as truncated). The
    store's lock is held while it is read (ingestion into it waits), so files and chunks agree.
    Files being ingested (pending, processing) are left out and named in ``skipped``.

    Raises:
        StoreNotFound; StorageError (the output cannot be written); the backend's errors.
    """
    started = time.perf_counter()
    record = parts.stores.get(store)
    tpl = parts.stores.template_of(record)
    out = Path(out)
    members: dict[str, dict[str, Any]] = {}
    coll = parts.stores.collection_of(record)
    with _archive(out, "bundle") as zf, parts.stores.store_lock(store):
        records = parts.catalog.files(store)
        skipped = [r.file_name for r in records if r.status not in (DONE, FAILED)]
        records = [r for r in records if r.status in (DONE, FAILED)]
        counts = coll.facet("file_id") if coll.collection_exists() else {}
        total = sum(counts.values())
        entries = []
        for i, r in enumerate(records):
            stored = parts.files.find(r.file_id)
            member = f"files/{i:06d}.bin" if stored is not None else None
            if member is not None:
                with parts.files.content(r.file_id) as src:
                    members[member] = _write_member(zf, member, lambda w, s=src: shutil.copyfileobj(s, w, PIECE))
            entries.append({
                "member": member, "file_id": r.file_id, "name": r.file_name,
                "content_type": stored.content_type if stored else None, "size": r.size, "sha256": r.sha256,
                "status": str(r.status), "reason": r.reason, "error": r.error, "chunks": r.chunks,
                "pages": r.pages, "warnings": r.warnings, "aliases": list(getattr(r, "aliases", ())),
                "attributes": parts.indexer.file_attributes(store, r.file_id) if r.status == DONE else {},
            })
            _report(progress, "files", 0.2 * (i + 1) / max(1, len(records)))
        blocks: list[dict[str, Any]] = []
        pending: list[Point] = []
        written = 0

        def flush() -> None:
            nonlocal pending, written
            n = len(blocks)
            lines, vec = f"chunks/{n:06d}.jsonl", f"chunks/{n:06d}.npy"
            body = b"".join(orjson.dumps({"id": p.id, "payload": _fresh(p.payload)}) + b"\n" for p in pending)
            members[lines] = _write_member(zf, lines, lambda w: w.write(body), deflate=True)
            matrix = np.ascontiguousarray(np.vstack([p.vector for p in pending]), dtype="<f4")
            members[vec] = _write_member(zf, vec, lambda w: np.save(w, matrix, allow_pickle=False))
            blocks.append({"payloads": lines, "vectors": vec, "count": len(pending)})
            written += len(pending)
            pending = []
            _report(progress, "chunks", 0.2 + 0.8 * written / max(1, total))

        for file_id in sorted(counts, key=str):
            for p in coll.scroll(where={"file_id": file_id}, with_vectors=True):
                pending.append(p)
                if len(pending) >= BLOCK:
                    flush()
        if pending:
            flush()
        spec = tpl.model_dump()
        spec.pop("backend", None)
        manifest = {
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "created": datetime.now(UTC).isoformat(),
            "store": {"name": record.name, "template": spec, "embedding_model": record.embedding_model,
                      "dimension": record.dimension, "distance": record.distance,
                      "source_backend": record.backend},
            "files": entries, "blocks": blocks, "chunks": written, "members": members,
        }
        zf.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1), zipfile.ZIP_DEFLATED)
    _report(progress, "done", 1.0)
    return ExportResult(store, out, len(entries), written, out.stat().st_size, time.perf_counter() - started,
                        skipped)


def _fresh(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with its non-ASCII strings copied. orjson (like any C code asking CPython for a
    string's UTF-8) makes CPython keep a UTF-8 copy *on the string object*: on the backend's own
    strings (the memory backend's payloads are shared, not copied) that copy would stay for as long
    as the store is loaded -- about the size of its text, 70 MB at 100,000 chunks. On a copy it goes
    with the block."""
    return {k: v.encode().decode() if isinstance(v, str) and not v.isascii() else v for k, v in payload.items()}


@contextlib.contextmanager
def _archive(out: Path, what: str) -> Iterator[zipfile.ZipFile]:
    """A zip written to ``out + ".part"``, fsynced and renamed to ``out`` when the block ends (so
    ``out`` is whole or absent), removed when it raises. ``StorageError`` if it cannot be created."""
    part = out.with_name(out.name + ".part")
    try:
        zf = zipfile.ZipFile(part, "w", zipfile.ZIP_STORED, allowZip64=True)
    except OSError as exc:
        raise StorageError(f"The {what} {str(out)!r} cannot be written: {exc.strerror or exc}") from exc
    try:
        with zf:
            yield zf
        with open(part, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(part, out)
    except BaseException:
        with contextlib.suppress(OSError):
            part.unlink()
        raise


def _write_member(zf: zipfile.ZipFile, name: str, fill: Callable[[Any], Any], deflate: bool = False) -> dict[str, Any]:
    info = zipfile.ZipInfo(name, date_time=time.gmtime()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zf.open(info, "w", force_zip64=True) as raw:
        w = _HashingWriter(raw)
        fill(w)
    return {"sha256": w.sha.hexdigest(), "bytes": w.size}


def _report(progress: Progress | None, stage: str, fraction: float) -> None:
    if progress is not None:
        progress(stage, max(0.0, min(1.0, fraction)))


# -- reading a bundle ----------------------------------------------------------------------------

def open_bundle(path: str | os.PathLike) -> tuple[zipfile.ZipFile, dict[str, Any]]:
    """Open the bundle ``path``; returns the zip and its manifest, checked for form and version
    and against the zip's directory (every member listed is present with the listed size). The
    members' checksums are checked as they are read (:func:`read_member`).

    Raises:
        BundleCorrupt: not a zip (truncated: a zip's directory is at its end), no or bad manifest,
            a member missing or of another size. BundleTooNew: a newer format version.
        InvalidArgument: ``path`` is not a readable file.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidArgument(f"{str(path)!r} is not a file.")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleCorrupt(f"{path.name} is not a complete bundle (truncated, or not a .kb file): {exc}") from exc
    try:
        manifest = _read_manifest(zf, path.name, "knowledge bundle")
        check_manifest(manifest, FORMAT, path.name)
        _check_store_manifest(manifest, path.name)
        _check_inventory(zf, manifest, path.name)
    except BaseException:
        zf.close()
        raise
    return zf, manifest


def _read_manifest(zf: zipfile.ZipFile, where: str, what: str) -> Any:
    """The parsed ``manifest.json`` of ``zf``, read in pieces and never past
    :data:`MAX_MANIFEST_BYTES` (a zip's directory may understate a member's size)."""
    try:
        info = zf.getinfo(MANIFEST)
    except KeyError:
        raise BundleCorrupt(f"{where} has no {MANIFEST}: it is not a {what}.") from None
    if info.file_size > MAX_MANIFEST_BYTES:
        raise BundleCorrupt(f"{where}: its {MANIFEST} is {info.file_size:,} bytes, more than the"
                            f" {MAX_MANIFEST_BYTES:,} a manifest may have.")
    try:
        with zf.open(info) as raw:
            data = CheckedReader(raw, MANIFEST, {"bytes": info.file_size}, MAX_MANIFEST_BYTES).read_all()
        return json.loads(data)
    except BundleCorrupt:
        raise
    except (zipfile.BadZipFile, ValueError, RecursionError, OSError, EOFError) as exc:
        raise BundleCorrupt(f"{where}: its {MANIFEST} is unreadable ({type(exc).__name__}: {exc})"[:500]
                            + ".") from exc


def _check_inventory(zf: zipfile.ZipFile, manifest: dict[str, Any], where: str) -> None:
    """The zip holds exactly the manifest and the members it lists, each once, none a link, each of
    the size the manifest says (checked again while it is read)."""
    infos = zf.infolist()
    members = manifest["members"]
    if len(infos) > len(members) + 1:
        raise BundleCorrupt(f"{where} holds {len(infos):,} members; its manifest accounts for"
                            f" {len(members) + 1:,}.")
    seen: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        if info.filename in seen:
            raise BundleCorrupt(f"{where} holds the member {info.filename!r} twice.")
        if _is_link(info):
            raise BundleCorrupt(f"{where}: member {info.filename!r} is a symbolic link; archives of this program"
                                " hold none.")
        if info.filename != MANIFEST and info.filename not in members:
            raise BundleCorrupt(f"{where}: member {info.filename!r} is not listed in its manifest.")
        seen[info.filename] = info
    for name, meta in members.items():
        if not isinstance(meta, dict) or not isinstance(meta.get("sha256"), str) \
                or not isinstance(meta.get("bytes"), int) or isinstance(meta.get("bytes"), bool) or meta["bytes"] < 0:
            raise BundleCorrupt(f"{where}: the manifest's entry for member {name!r} has no SHA-256 or size.")
        if name not in seen:
            raise BundleCorrupt(f"{where} misses its member {name} (listed in the manifest).")
        if seen[name].file_size != meta["bytes"]:
            raise BundleCorrupt(f"{where}: member {name} has {seen[name].file_size} bytes, the manifest says"
                                f" {meta['bytes']} (truncated or tampered with).")


def _is_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def check_manifest(manifest: Any, fmt: str, where: str) -> None:
    """Check a manifest's ``format`` and ``format_version`` (see :func:`open_bundle`)."""
    if not isinstance(manifest, dict) or manifest.get("format") != fmt:
        said = manifest.get("format") if isinstance(manifest, dict) else manifest
        raise BundleCorrupt(f"{where} is not a {fmt} (its manifest says {said!r}).")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise BundleCorrupt(f"{where}: bad format version {version!r}.")
    if version > FORMAT_VERSION:
        raise BundleTooNew(f"{where} was written in {fmt} format version {version}; this program reads"
                           f" versions up to {FORMAT_VERSION}. Upgrade knowledge to import it.")
    if not isinstance(manifest.get("members"), dict):
        raise BundleCorrupt(f"{where}: the manifest lists no members.")


def _check_store_manifest(m: dict[str, Any], where: str) -> None:
    """The shape of a bundle manifest's store, files and blocks (the checksums cover the members,
    not the manifest: a hand-edited one must still fail with a reason, not a traceback): every
    figure of the right type and range, every file id and member once, every block at most
    :data:`MAX_BLOCK` chunks adding up to ``chunks``, names without control characters."""
    store, files, blocks = m.get("store"), m.get("files"), m.get("blocks")
    ok = (isinstance(store, dict) and isinstance(store.get("name"), str) and isinstance(store.get("embedding_model"), str)
          and _is_int(store.get("dimension"), 1, MAX_DIMENSION, none=True)
          and isinstance(store.get("template", {}), dict)
          and isinstance(files, list) and all(isinstance(f, dict) and isinstance(f.get("file_id"), str)
                                              and isinstance(f.get("name"), str) for f in files)
          and isinstance(blocks, list) and all(isinstance(b, dict) and isinstance(b.get("payloads"), str)
                                               and isinstance(b.get("vectors"), str) for b in blocks)
          and _is_int(m.get("chunks"), 0))
    if not ok:
        raise BundleCorrupt(f"{where}: its manifest lacks the store, its files or its chunk blocks.")
    ids: set[str] = set()
    used: set[str] = set()
    for f in files:
        fid, fname = f["file_id"], f["name"]
        if not fid or fid in ids:
            raise BundleCorrupt(f"{where}: the file id {fid!r} is empty or given to two files.")
        ids.add(fid)
        for n in (fname, *(f.get("aliases") or ())):
            if not isinstance(n, str):
                raise BundleCorrupt(f"{where}: file {fid!r} has a name that is not text ({n!r}).")
            bad = bad_character(n)
            if bad:
                raise BundleCorrupt(f"{where}: the file name {n!r} contains {bad}; names may hold none.")
        member = f.get("member")
        if member is not None and (not isinstance(member, str) or not member.startswith("files/") or member in used):
            raise BundleCorrupt(f"{where}: file {fname!r} names the member {member!r}, which is not a file member"
                                " or is named twice.")
        used.add(member)
        if not (_is_int(f.get("chunks"), 0, none=True) and _is_int(f.get("size"), 0, none=True)
                and _is_int(f.get("pages"), 0, none=True)
                and isinstance(f.get("aliases") or [], list) and isinstance(f.get("warnings") or [], list)
                and all(isinstance(w, str) for w in f.get("warnings") or [])
                and all(isinstance(f.get(k), (str, type(None))) for k in ("reason", "error", "content_type", "sha256",
                                                                        "status"))):
            raise BundleCorrupt(f"{where}: the entry of file {fname!r} has a figure of the wrong type.")
    total = 0
    for b in blocks:
        if not _is_int(b.get("count"), 1, MAX_BLOCK):
            raise BundleCorrupt(f"{where}: block {b['payloads']!r} gives {b.get('count')!r} chunks; a block holds"
                                f" 1-{MAX_BLOCK}.")
        for member in (b["payloads"], b["vectors"]):
            if not member.startswith("chunks/") or member in used:
                raise BundleCorrupt(f"{where}: the member {member!r} is not a chunk member or is named twice.")
            used.add(member)
        total += b["count"]
    if total != m["chunks"]:
        raise BundleCorrupt(f"{where}: its blocks hold {total} chunks, its manifest says {m['chunks']}.")
    if blocks and store.get("dimension") is None:
        raise BundleCorrupt(f"{where}: its chunks have vectors but the manifest gives no dimension.")
    unused = set(m["members"]) - used
    if unused:
        raise BundleCorrupt(f"{where}: the manifest lists members no file or block uses ({sorted(unused)[0]!r}).")


def _is_int(value: Any, low: int, high: int | None = None, *, none: bool = False) -> bool:
    if value is None:
        return none
    return isinstance(value, int) and not isinstance(value, bool) and value >= low and (high is None or value <= high)


def read_member(zf: zipfile.ZipFile, manifest: dict[str, Any], name: str, limit: int) -> bytes:
    """The bytes of member ``name``, read in pieces -- never more than the manifest's size for it nor
    ``limit`` -- and checked against the manifest's SHA-256. Raises BundleCorrupt."""
    meta = manifest["members"].get(name)
    if meta is None:
        raise BundleCorrupt(f"The manifest does not list the member {name}.")
    if meta["bytes"] > limit:
        raise BundleCorrupt(f"Member {name} is {meta['bytes']:,} bytes; such a member has at most {limit:,}.")
    try:
        raw = zf.open(name)
    except (KeyError, zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise BundleCorrupt(f"Member {name} is unreadable ({exc}): the bundle is damaged.") from exc
    with raw:
        reader = CheckedReader(raw, name, meta, limit)
        data = reader.read_all()
        reader.verify()
    return data


class CheckedReader(io.RawIOBase):
    """Read a zip member in pieces, counting and hashing: past the manifest's size for it (or
    ``limit``) it raises ``BundleCorrupt`` at once -- a zip's directory can understate what a member
    inflates to -- and :meth:`verify` compares size and SHA-256 with the manifest at the end."""

    def __init__(self, raw: IO[bytes], name: str, meta: dict[str, Any], limit: int | None = None) -> None:
        self.raw, self.name, self.meta, self.sha = raw, name, meta, hashlib.sha256()
        self.size = 0
        self.expected = int(meta.get("bytes", 0))
        self.limit = self.expected if limit is None else min(self.expected, limit)

    def readable(self) -> bool:
        return True

    def read(self, n: int | None = -1) -> bytes:
        room = self.limit - self.size + 1  # one byte past the limit tells a longer member
        n = room if n is None or n < 0 else min(n, room)
        try:
            data = self.raw.read(min(n, PIECE))
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as exc:
            raise BundleCorrupt(f"Member {self.name} is unreadable ({exc}): the archive is damaged.") from exc
        self.size += len(data)
        if self.size > self.limit:
            raise BundleCorrupt(f"Member {self.name} holds more than the {self.limit:,} bytes it may have"
                                f" (its manifest says {self.expected:,}): the archive is damaged or crafted.")
        self.sha.update(data)
        return data

    def read_all(self) -> bytes:
        parts = []
        while piece := self.read(PIECE):
            parts.append(piece)
        return b"".join(parts)

    def verify(self) -> None:
        while self.read(PIECE):
            pass
        if self.size != self.expected:
            raise BundleCorrupt(f"Member {self.name} holds {self.size:,} bytes, its manifest says {self.expected:,}.")
        if self.meta.get("sha256") is not None and self.sha.hexdigest() != self.meta.get("sha256"):
            raise BundleCorrupt(f"Member {self.name} does not match its checksum: the archive is damaged or"
                                " was altered.")


def _npy_matrix(data: bytes, name: str, rows: int, dimension: int) -> np.ndarray:
    """The ``(rows, dimension)`` little-endian float32 matrix of the ``.npy`` bytes ``data``, its
    header checked before a byte of the matrix is used (no ``np.load``: a header may claim any
    shape). Raises BundleCorrupt."""
    fp = io.BytesIO(data[:_NPY_HEADER_MAX])
    try:
        version = np.lib.format.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fp, max_header_size=_NPY_HEADER_MAX)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fp, max_header_size=_NPY_HEADER_MAX)
        else:
            raise ValueError(f"npy format version {version}")
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
        raise BundleCorrupt(f"Member {name} is not a vector matrix: {exc}"[:400]) from exc
    if tuple(shape) != (rows, dimension) or dtype != _VECTOR_DTYPE or fortran:
        raise BundleCorrupt(f"Member {name} holds a {dtype} matrix of shape {tuple(shape)}; its block needs"
                            f" ({rows}, {dimension}) little-endian float32.")
    offset = fp.tell()
    if len(data) != offset + rows * dimension * 4:
        raise BundleCorrupt(f"Member {name} has {len(data) - offset:,} bytes of vectors for a ({rows}, {dimension})"
                            " matrix.")
    return np.frombuffer(data, _VECTOR_DTYPE, rows * dimension, offset).reshape(rows, dimension)


def _vectors_limit(rows: int, dimension: int) -> int:
    return _NPY_HEADER_MAX + rows * dimension * 4


def _parse_chunk(line: bytes, member: str, row: int) -> tuple[Any, dict[str, Any]]:
    try:
        item = orjson.loads(line)
        payload, pid = item["payload"], item["id"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise BundleCorrupt(f"Member {member}: line {row + 1} is not a chunk ({exc}).") from exc
    if not isinstance(payload, dict) or not isinstance(pid, (str, int)) or isinstance(pid, bool) \
            or not isinstance(payload.get("file_id"), str) or not isinstance(payload.get("text"), str):
        raise BundleCorrupt(f"Member {member}: line {row + 1} is not a chunk (an id, a payload with its text and"
                            " file id).")
    return pid, payload


def check_chunks(zf: zipfile.ZipFile, manifest: dict[str, Any], where: str) -> None:
    """Read every chunk block once before anything is written: each member within its bound and
    checksum, each vectors header of the block's shape, each chunk citing a file the bundle carries,
    no chunk id twice, and each file's chunk count as its entry says (a failed file has none).
    Memory: one block. Raises BundleCorrupt."""
    dimension = manifest["store"].get("dimension")
    files = {f["file_id"]: f for f in manifest["files"]}
    counts: dict[str, int] = {}
    ids: set[Any] = set()
    for block in manifest["blocks"]:
        rows = block["count"]
        lines = read_member(zf, manifest, block["payloads"], MAX_PAYLOADS_BYTES).splitlines()
        if len(lines) != rows:
            raise BundleCorrupt(f"{where}: member {block['payloads']} holds {len(lines)} chunks, its block says {rows}.")
        for row, line in enumerate(lines):
            pid, payload = _parse_chunk(line, block["payloads"], row)
            fid = payload["file_id"]
            if fid not in files:
                raise BundleCorrupt(f"{where}: a chunk of {block['payloads']} (line {row + 1}) cites the file id"
                                    f" {fid!r}, which the bundle does not carry.")
            if pid in ids:
                raise BundleCorrupt(f"{where}: the chunk id {pid!r} is given twice.")
            ids.add(pid)
            counts[fid] = counts.get(fid, 0) + 1
        del lines
        _npy_matrix(read_member(zf, manifest, block["vectors"], _vectors_limit(rows, dimension)), block["vectors"],
                    rows, dimension)
    for fid, f in files.items():
        want = int(f.get("chunks") or 0) if f.get("status") == DONE else 0
        if counts.get(fid, 0) != want:
            raise BundleCorrupt(f"{where}: file {f['name']!r} has {counts.get(fid, 0)} chunks in the bundle, its"
                                f" entry says {want} ({f.get('status')}).")


def bundle_info(path: str | os.PathLike) -> dict[str, Any]:
    """The store part of a bundle's manifest plus ``files`` and ``chunks`` counts (for a preview).
    Raises as :func:`open_bundle`."""
    zf, manifest = open_bundle(path)
    with zf:
        return {**manifest["store"], "files": len(manifest.get("files", [])), "chunks": manifest.get("chunks", 0),
                "format_version": manifest["format_version"], "created": manifest.get("created")}


# -- import --------------------------------------------------------------------------------------

def import_bundle(parts: Parts, bundle: str | os.PathLike, *, as_name: str | None = None, template: str | None = None,
                  progress: Progress | None = None) -> ImportResult:
    """Recreate the store of ``bundle`` (see the module docstring).

    Args:
        as_name: the new store's name (default: the bundle's).
        template: the template to create it from (any backend). Default: the template of the
            bundle's name when there is one with the same embedding model, else a template made
            from the bundle's spec on the default backend (saved under the bundle's template name,
            or ``<name>-imported`` when that name is taken).

    The vectors are reused when the template's model is the bundle's (same dimension); otherwise
    every chunk is embedded again from its text with the template's model (``progress`` then says
    ``"embedding, about N s left"``), and the result says so.

    Raises:
        StoreExists: a store with the name exists (pass ``as_name``). BundleCorrupt, BundleTooNew,
        InvalidArgument (see :func:`open_bundle`); TemplateNotFound; EmbeddingUnavailable;
        BackendUnavailable; the backend's write errors. Nothing is left behind on any of them.
    """
    started = time.perf_counter()
    zf, manifest = open_bundle(bundle)
    with zf:
        meta = manifest["store"]
        name = as_name or meta.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidArgument("A store name must be 1-200 characters and not blank.")
        if as_name is None and bad_character(name):
            raise BundleCorrupt(f"The bundle's store name {name!r} contains {bad_character(name)}; import it"
                                " under another name (--as NAME).")
        check_name(name, "store name")
        if parts.stores.find(name) is not None:
            raise StoreExists(f"A store called {name!r} exists already. Import the bundle under another name"
                              " (--as NAME), or delete that store first.")
        _check_files(parts, manifest, Path(bundle).name)
        check_chunks(zf, manifest, Path(bundle).name)  # before anything is written
        tpl, new_template = _target_template(parts, meta, template)
        embedder = parts.stores.embedder(tpl.embedding_model)
        reuse = tpl.embedding_model == meta.get("embedding_model") and embedder.dimension == meta.get("dimension")
        backend = parts.stores.backend(tpl.backend)
        sweep_leftovers(parts, backends=[tpl.backend])
        token = f"{os.getpid()}-{secrets.token_hex(4)}"
        collection = f"{name}~import-{token}"
        target = backend.collection(collection)
        with _live_lock:
            _live_tokens.add(token)
        saved: list[str] = []
        try:
            ids, files = _import_files(parts, zf, manifest, name, token, saved, progress)
            total = int(manifest.get("chunks") or 0)
            blocks = _blocks(zf, manifest, ids)
            written = parts.indexer.write_points(
                target, embedder.dimension, tpl.distance, blocks, None if reuse else embedder,
                (lambda stage, f: _report(progress, stage, 0.2 + 0.75 * f)) if progress else None, total)
            if written != total or target.count() != total:
                raise BundleCorrupt(f"The bundle lists {total} chunks but holds {written}: it is damaged.")
            _report(progress, "finishing", 0.97)
            if new_template:  # saved only now: a failed import leaves no template behind either
                tpl = parts.templates.save(tpl)
            parts.indexer.adopt_store(name, tpl, embedder.dimension, collection, files)
        except BaseException:
            with contextlib.suppress(Exception):
                target.drop_collection()
            for fid in saved:
                with contextlib.suppress(Exception):
                    parts.stores.forget_file_if_unused(fid)
            raise
        finally:
            with _live_lock:
                _live_tokens.discard(token)
    _report(progress, "done", 1.0)
    seconds = time.perf_counter() - started
    how = ("vectors reused" if reuse else
           f"re-embedded with {tpl.embedding_model} (the bundle's model is {meta.get('embedding_model')})")
    message = (f"Imported {name!r}: {len(files)} files, {written} chunks on {tpl.backend} (template"
               f" {tpl.name!r}; {how}) in {seconds:.1f} s.")
    return ImportResult(name, tpl.name, tpl.backend, len(files), written, reuse,
                        None if reuse else meta.get("embedding_model"), seconds, message)


def _target_template(parts: Parts, meta: dict[str, Any], template: str | None) -> tuple[VectorStoreTemplate, bool]:
    """The template to import with, and whether it is new (to be saved when the import commits)."""
    if template:
        return parts.templates.get(template), False
    spec = dict(meta.get("template") or {})
    tname = spec.get("name") or "imported"
    if tname in parts.templates.names():
        existing = parts.templates.get(tname)
        if existing.embedding_model == spec.get("embedding_model", meta.get("embedding_model")):
            return existing, False
        tname = f"{tname}-imported"
        if tname in parts.templates.names():
            return parts.templates.get(tname), False
    spec.update(name=tname, backend=parts.settings.vector_store.backend)
    spec.setdefault("embedding_model", meta.get("embedding_model"))
    try:
        return make_template(**spec), True
    except KnowledgeError as exc:
        raise BundleCorrupt(f"The bundle's template cannot be used: {exc}") from exc


def _import_files(parts: Parts, zf: zipfile.ZipFile, manifest: dict[str, Any], store: str, token: str,
                  saved: list[str], progress: Progress | None) -> tuple[dict[str, str], list[FileRecord]]:
    """Save each file's bytes to the file store (checked against the manifest); ``saved`` collects
    the new ids as they are made. Returns old id -> new id and the new file records."""
    ids: dict[str, str] = {}
    records = []
    entries = manifest.get("files") or []
    for i, e in enumerate(entries):
        old_id = e.get("file_id")
        if not isinstance(old_id, str) or not isinstance(e.get("name"), str):
            raise BundleCorrupt("A file entry of the manifest has no id or name.")
        new_id = old_id
        member = e.get("member")
        if member is not None:
            mmeta = manifest["members"].get(member)
            if mmeta is None:
                raise BundleCorrupt(f"The manifest does not list the member {member}.")
            try:
                raw = zf.open(member)
            except KeyError:
                raise BundleCorrupt(f"The bundle misses its member {member}.") from None
            with raw:
                limit = parts.settings.ingest.max_file_bytes
                reader = CheckedReader(raw, member, mmeta, limit)
                stored = parts.files.save(e["name"], e.get("content_type"), reader, max_bytes=limit,
                                       metadata={IMPORT_MARK: token})
                saved.append(stored.id)
                reader.verify()
            if e.get("sha256") and stored.sha256 != e["sha256"]:
                raise BundleCorrupt(f"The bytes of {e['name']} differ from the SHA-256 the bundle records.")
            new_id = stored.id
        ids[old_id] = new_id
        status = DONE if e.get("status") == DONE else FAILED
        aliases = tuple(a for a in e.get("aliases") or () if isinstance(a, str) and a != e["name"])
        records.append(FileRecord(store, new_id, e["name"], e.get("sha256"), e.get("size"), status, e.get("reason"),
                                  int(e.get("chunks") or 0), e.get("pages"), list(e.get("warnings") or []),
                                  error=e.get("error"), aliases=aliases))
        _report(progress, "files", 0.2 * (i + 1) / max(1, len(entries)))
    return ids, records


def _check_files(parts: Parts, manifest: dict[str, Any], where: str) -> None:
    """Each file member within ``ingest.max_file_mb`` and of its entry's size, all of them within the
    free disk space, and a file entry without bytes naming no file this data folder holds (it would
    give the new store another store's file). Raises BundleCorrupt."""
    limit = parts.settings.ingest.max_file_bytes
    members = manifest["members"]
    total = 0
    for e in manifest["files"]:
        member = e.get("member")
        if member is None:
            if parts.files.find(e["file_id"]) is not None:
                raise BundleCorrupt(f"{where}: file {e['name']!r} carries no bytes but names the file id"
                                    f" {e['file_id']!r} of a file this data folder holds.")
            continue
        size = members[member]["bytes"]
        if size > limit:
            raise BundleCorrupt(f"{where}: file {e['name']!r} is {size / 1e6:,.1f} MB, over ingest.max_file_mb"
                                f" ({parts.settings.ingest.max_file_mb:g} MB); raise that setting to import it.")
        if e.get("size") is not None and e["size"] != size:
            raise BundleCorrupt(f"{where}: file {e['name']!r} is {e['size']:,} bytes by its entry, its member"
                                f" {member} {size:,}.")
        total += size
    root = Path(parts.settings.data_root)
    free = shutil.disk_usage(root if root.exists() else root.parent).free
    if total > free:
        raise BundleCorrupt(f"{where}: its files need {total / 1e6:,.0f} MB; the data folder's disk has"
                            f" {free / 1e6:,.0f} MB free.")


def _blocks(zf: zipfile.ZipFile, manifest: dict[str, Any], ids: dict[str, str]) -> Iterator[list[Point]]:
    """The bundle's chunks as points, one block at a time, with the file ids of this file store
    (each member read within its bound and checked again: :func:`check_chunks` read them first)."""
    dimension = manifest["store"]["dimension"]
    for block in manifest["blocks"]:
        rows = block["count"]
        lines = read_member(zf, manifest, block["payloads"], MAX_PAYLOADS_BYTES).splitlines()
        data = read_member(zf, manifest, block["vectors"], _vectors_limit(rows, dimension))
        matrix = _npy_matrix(data, block["vectors"], rows, dimension).copy()
        del data
        if len(lines) != rows:
            raise BundleCorrupt(f"Member {block['payloads']} holds {len(lines)} chunks, its block says {rows}.")
        points = []
        for row, line in enumerate(lines):
            pid, payload = _parse_chunk(line, block["payloads"], row)
            old = payload["file_id"]
            new = ids.get(old)
            if new is None:
                raise BundleCorrupt(f"A chunk of {block['payloads']} cites the file id {old!r}, which the bundle"
                                    " does not carry.")
            if new != old:
                payload["file_id"] = new
                if isinstance(pid, str) and pid.startswith(f"{old}:"):
                    pid = new + pid[len(old):]
            points.append(Point(pid, matrix[row], payload))
        yield points


# -- leftovers of killed imports -----------------------------------------------------------------

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _dead_token(token: str) -> bool:
    with _live_lock:
        if token in _live_tokens:
            return False
    head = token.split("-", 1)[0]
    if not head.isdigit() or int(head) == os.getpid():
        return True  # this process's import, no longer running
    return not _alive(int(head))


def sweep_leftovers(parts: Parts, backends: list[str] | None = None) -> tuple[int, int]:
    """Remove what killed imports left: collections named ``*~import-<pid>-<hex>`` that no store
    uses, of processes no longer running, on ``backends`` (default: those the stores and the
    default template use), and file-store files such an import saved that no store holds.
    Returns ``(collections, files)`` removed."""
    used = {(r.backend, r.collection) for r in parts.catalog.list_stores()}
    names = backends or sorted({b for b, _ in used} | {parts.settings.vector_store.backend})
    dropped = 0
    for bname in names:
        try:
            backend = parts.stores.backend(bname)
            colls = backend.list_collections()
        except KnowledgeError:
            continue
        for c in colls:
            m = _TEMP.search(c)
            if m and (bname, c) not in used and _dead_token(c[m.start() + len("~import-"):]):
                backend.collection(c).drop_collection()
                dropped += 1
    removed = 0
    for f in parts.files.list():
        token = f.metadata.get(IMPORT_MARK)
        if isinstance(token, str) and _dead_token(token) and not parts.catalog.stores_using_file(f.id):
            parts.files.delete(f.id)
            removed += 1
    return dropped, removed


# -- move ------------------------------------------------------------------------------------------

def move_store(parts: Parts, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
    """Move ``store`` to ``template`` in place -- same name, files and chunks -- copying its vectors
    when the template's model is the store's (a move to another backend), re-embedding them from
    the chunks' text otherwise (see :meth:`Indexer.reembed`). The store switches in one catalog
    step once the copy is complete; a failure leaves it as it was.

    Raises:
        StoreNotFound, TemplateNotFound, BackendUnavailable, the backends' errors.
    """
    parts.stores.get(store)
    sweep_leftovers(parts, backends=[parts.templates.get(template).backend])
    return parts.indexer.reembed(store, template, progress)


# -- backup and restore of the whole data folder -----------------------------------------------------

BACKUP_FORMAT = "knowledge-backup"


@dataclass(frozen=True, slots=True)
class BackupResult:
    """What :func:`backup` wrote: the archive, its size in bytes, the stores copied as files (memory
    backend, by name), the stores exported as bundles (other backends), the stored files, seconds."""

    path: Path
    bytes: int
    copied: list[str]
    bundled: list[str]
    files: int
    seconds: float


@dataclass(frozen=True, slots=True)
class RestoredBundle:
    """A store of another backend (pgvector, Qdrant) that :func:`restore` unpacked as a bundle, to be
    imported onto its template's backend (:meth:`Portable.import_restored`): the store's name, the
    bundle's path (in a hidden folder of the data folder, removed by the import), its template."""

    store: str
    path: Path
    template: str | None


@dataclass(frozen=True, slots=True)
class RestoreResult:
    """What :func:`restore` did: the stores restored from copies and from bundles, the stores it could
    not restore (name -> reason; their bundles stay in the backup), the stored files, seconds.
    ``bundles``: the stores still to import (:meth:`Portable.import_restored` imports them and
    returns the result with ``imported`` and ``failed`` filled in)."""

    copied: list[str]
    imported: list[str]
    failed: dict[str, str]
    files: int
    seconds: float
    bundles: tuple[RestoredBundle, ...] = ()


def backup(parts: Parts, out: str | os.PathLike, *, progress: Progress | None = None) -> BackupResult:
    """Back up the data folder to the archive ``out`` (a zip, format ``knowledge-backup``):

    * ``catalog.duckdb``: the catalog, copied after a ``CHECKPOINT`` under the catalog's lock
      (:meth:`Catalog.checkpoint_copy`), so never a torn copy while the app runs;
    * ``files/meta/<id>.json`` + ``files/blobs/<sha256[:2]>/<sha256>``: every stored file (each record with its
      whole content; blobs are immutable);
    * ``vector-stores/<folder>/...``: every collection of the memory backend (stores, chats'
      attachment stores, agent memory), its files copied under the collection's write lock (a
      writer waits; readers go on); its lexical index is left out (rebuilt on the first words search);
    * ``stores/NNNN.kb``: every store on another backend (pgvector, Qdrant) as a bundle
      (:func:`export_store`).

    ``manifest.json`` lists every member with its SHA-256. Written to ``out + ".part"`` and renamed
    when complete. Each part is consistent in itself; a file ingested while the backup runs may be
    in one part and not another (ingest it again after a restore). Agent memory kept on pgvector
    or Qdrant is not in the backup (their collections are not stores).

    Raises:
        StorageError (the archive cannot be written); the backends' errors.
    """
    started = time.perf_counter()
    out = Path(out)
    members: dict[str, dict[str, Any]] = {}
    sweep_leftovers(parts)
    copied: list[str] = []
    bundled: list[dict[str, Any]] = []
    with _archive(out, "backup") as zf, tempfile.TemporaryDirectory(prefix="knowledge-backup-") as tmp:
        snapshot = Path(tmp) / "catalog.duckdb"
        parts.catalog.checkpoint_copy(snapshot)
        with open(snapshot, "rb") as src:
            members["catalog.duckdb"] = _write_member(zf, "catalog.duckdb", lambda w: shutil.copyfileobj(src, w, PIECE),
                                                      deflate=True)
        _report(progress, "catalog", 0.05)
        records = parts.files.list()
        blobs: set[str] = set()
        for i, f in enumerate(records):
            try:
                src = parts.files.content(f.id)
            except KnowledgeError:
                continue  # deleted meanwhile
            with src:
                if f.sha256 not in blobs:  # the file store's layout: blobs/<2 hex>/<sha256>
                    blob = f"files/blobs/{f.sha256[:2]}/{f.sha256}"
                    members[blob] = _write_member(zf, blob, lambda w, s=src: shutil.copyfileobj(s, w, PIECE))
                    blobs.add(f.sha256)
            meta = json.dumps({"format": RECORD_FORMAT, **f.to_dict()}, ensure_ascii=False, indent=2).encode()
            members[f"files/meta/{f.id}.json"] = _write_member(zf, f"files/meta/{f.id}.json",
                                                              lambda w, m=meta: w.write(m), deflate=True)
            _report(progress, "files", 0.05 + 0.25 * (i + 1) / max(1, len(records)))
        memory = parts.stores.backend("memory") if _memory_in_use(parts) else None
        names = memory.list_collections() if memory is not None else []
        for i, name in enumerate(names):
            coll = memory.collection(name)
            log_ = coll.files
            with log_.writing(memory.lock_timeout):
                base = log_.path
                for path in sorted(base.rglob("*")):
                    rel = path.relative_to(base)
                    if path.is_dir() or rel.parts[0] == LEXICAL_DIR or path.name == MANIFEST_TMP:
                        continue
                    member = f"vector-stores/{base.name}/{rel.as_posix()}"
                    with open(path, "rb") as src:
                        members[member] = _write_member(zf, member, lambda w, s=src: shutil.copyfileobj(s, w, PIECE))
            copied.append(name)
            _report(progress, "memory stores", 0.3 + 0.3 * (i + 1) / max(1, len(names)))
        others = [r for r in parts.catalog.list_stores() if r.backend != "memory"]
        for i, r in enumerate(others):
            tmp_kb = Path(tmp) / f"{i:04d}.kb"
            export_store(parts, r.name, tmp_kb)
            member = f"stores/{i:04d}.kb"
            with open(tmp_kb, "rb") as src:
                members[member] = _write_member(zf, member, lambda w: shutil.copyfileobj(src, w, PIECE))
            tmp_kb.unlink()
            bundled.append({"store": r.name, "member": member, "template": r.template, "backend": r.backend})
            _report(progress, "other stores", 0.6 + 0.4 * (i + 1) / max(1, len(others)))
        manifest = {"format": BACKUP_FORMAT, "format_version": FORMAT_VERSION,
                    "created": datetime.now(UTC).isoformat(), "memory_stores": copied, "bundles": bundled,
                    "files": len(records), "members": members}
        zf.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1), zipfile.ZIP_DEFLATED)
    _report(progress, "done", 1.0)
    return BackupResult(out, out.stat().st_size, copied, [b["store"] for b in bundled], len(records),
                        time.perf_counter() - started)


def _memory_in_use(parts: Parts) -> bool:
    """Whether the memory backend's folder exists (opening the backend would create nothing else)."""
    return Path(parts.settings.vector_store_dir).is_dir()


def data_folder_empty(settings: Settings) -> bool:
    """Whether the data folder of ``settings`` holds no catalog, no stored file and no memory store."""
    if Path(settings.catalog_path).exists():
        return False
    meta = Path(settings.file_store_dir) / "meta"
    if meta.is_dir() and any(meta.iterdir()):
        return False
    vs = Path(settings.vector_store_dir)
    return not (vs.is_dir() and any(p for p in vs.iterdir() if not p.name.startswith(".")))


def restore(settings: Settings, archive: str | os.PathLike, *, force: bool = False,
            progress: Progress | None = None) -> RestoreResult:
    """Restore the backup ``archive`` (see :func:`backup`) into the data folder of ``settings``.

    Every member's checksum is verified before anything is written. The file store and the memory
    stores are put in place first, the catalog last (without it the app sees no store). Stores
    bundled from other backends are left as bundles in ``RestoreResult.bundles``: open a workbench
    on ``settings`` and call :meth:`Portable.import_restored` to import them onto the backend their
    template names (a store that cannot be -- a server out of reach -- is named in ``failed``).

    Args:
        force: replace a data folder that holds data (its catalog, stored files and memory stores
            are deleted first). Without it such a folder is refused.

    Raises:
        TargetNotEmpty: the data folder holds data and ``force`` is false. BundleCorrupt,
        BundleTooNew: the archive is damaged or newer; nothing was written then.
    """
    started = time.perf_counter()
    path = Path(archive)
    if not path.is_file():
        raise InvalidArgument(f"{str(path)!r} is not a file.")
    if not force and not data_folder_empty(settings):
        raise TargetNotEmpty(f"The data folder {str(settings.data_root)!r} already holds data; restore into an"
                             " empty folder (--data-dir), or pass --force to replace its catalog, files and"
                             " memory stores.")
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleCorrupt(f"{path.name} is not a complete backup (truncated, or not a backup): {exc}") from exc
    with zf:
        manifest = _read_manifest(zf, path.name, "backup")
        check_manifest(manifest, BACKUP_FORMAT, path.name)
        members = manifest["members"]
        for name in members:
            if not _safe_member(name):
                raise BundleCorrupt(f"{path.name}: member {name!r} is not a path this program writes.")
        _check_inventory(zf, manifest, path.name)
        if "catalog.duckdb" not in members:
            raise BundleCorrupt(f"{path.name} holds no catalog.duckdb: it is not a whole backup.")
        bundles_meta = manifest.get("bundles") or []
        if not isinstance(bundles_meta, list) or not all(
                isinstance(b, dict) and isinstance(b.get("store"), str) and not bad_character(b["store"])
                and b.get("member") in members and str(b.get("member")).startswith("stores/")
                and isinstance(b.get("template"), (str, type(None))) for b in bundles_meta):
            raise BundleCorrupt(f"{path.name}: its manifest's bundles are not stores with a bundle member each.")
        need = sum(m["bytes"] for m in members.values())
        data_root = Path(settings.data_root)
        made_root = not data_root.exists()
        data_root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(data_root).free
        if need > free:
            raise BundleCorrupt(f"{path.name} holds {need / 1e6:,.0f} MB; the data folder's disk has"
                                f" {free / 1e6:,.0f} MB free.")
        stage = Path(tempfile.mkdtemp(prefix=".restore-", dir=data_root))
        try:
            try:  # every member checked (within its size, checksum) into the stage before anything is replaced
                for i, (name, meta) in enumerate(members.items()):
                    target = stage / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(name) as raw, open(target, "wb") as dst:
                        reader = CheckedReader(raw, name, meta)
                        while piece := reader.read(PIECE):
                            dst.write(piece)
                        reader.verify()
                    _report(progress, "checking", 0.3 * (i + 1) / max(1, len(members)))
            except BaseException:
                shutil.rmtree(stage, ignore_errors=True)
                if made_root:
                    with contextlib.suppress(OSError):
                        data_root.rmdir()
                raise
            if force:
                for p in (Path(settings.file_store_dir), Path(settings.vector_store_dir)):
                    shutil.rmtree(p, ignore_errors=True)
                for p in (Path(settings.catalog_path), Path(str(settings.catalog_path) + ".wal")):
                    with contextlib.suppress(FileNotFoundError):
                        p.unlink()
            _merge_into(stage / "files", Path(settings.file_store_dir))
            _merge_into(stage / "vector-stores", Path(settings.vector_store_dir))
            catalog = Path(settings.catalog_path)
            catalog.parent.mkdir(parents=True, exist_ok=True)
            os.replace(stage / "catalog.duckdb", catalog)
            bundles = _keep_bundles(stage, data_root, bundles_meta)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    _report(progress, "done", 1.0)
    return RestoreResult(list(manifest.get("memory_stores") or []), [], {}, int(manifest.get("files") or 0),
                         time.perf_counter() - started, bundles)


def _keep_bundles(stage: Path, data_root: Path, bundles_meta: list[dict[str, Any]]) -> tuple[RestoredBundle, ...]:
    """Move the checked bundles out of the stage into ``<data>/.restore-bundles-<hex>/`` (the import
    that follows removes the folder)."""
    if not bundles_meta:
        return ()
    keep = data_root / f"{RESTORE_BUNDLES}{secrets.token_hex(4)}"
    keep.mkdir()
    out = []
    for i, b in enumerate(bundles_meta):
        target = keep / f"{i:04d}.kb"
        os.replace(stage / b["member"], target)
        out.append(RestoredBundle(b["store"], target, b.get("template")))
    return tuple(out)


def _safe_member(name: str) -> bool:
    """A backup member's name is a relative path under one of the parts a backup has: no ``..``,
    no absolute path, no empty or ``.`` part, no backslash or drive, no control character."""
    parts = name.split("/")
    return (name == "catalog.duckdb" or (len(parts) > 1 and parts[0] in ("files", "vector-stores", "stores"))) and \
        all(p not in ("", ".", "..") for p in parts) and "\\" not in name and ":" not in name \
        and bad_character(name) is None


def _merge_into(src: Path, dst: Path) -> None:
    if not src.is_dir():
        return
    dst.mkdir(parents=True, exist_ok=True)
    for p in sorted(src.iterdir()):
        target = dst / p.name
        if p.is_dir() and target.is_dir():
            _merge_into(p, target)
        else:
            os.replace(p, target)


def import_restored(parts: Parts, result: RestoreResult, *, progress: Progress | None = None) -> RestoreResult:
    """Import the bundles :func:`restore` left (``result.bundles``), each under its store's name and
    template, replacing the restored catalog's record of it (which names a collection of the old
    server); a store that cannot be imported is named in ``failed`` and the rest goes on. The
    bundles' folder is removed. Returns ``result`` with ``imported`` and ``failed`` filled in."""
    started = time.perf_counter()
    imported, failed = list(result.imported), dict(result.failed)
    try:
        for i, b in enumerate(result.bundles):
            old_files = [f.file_id for f in parts.catalog.files(b.store)]
            parts.catalog.delete_store(b.store)  # the record names a collection of the old server
            parts.stores.changed(b.store)
            try:
                import_bundle(parts, b.path, as_name=b.store, template=b.template)
                imported.append(b.store)
            except KnowledgeError as exc:
                failed[b.store] = str(exc)
            for fid in old_files:
                parts.stores.forget_file_if_unused(fid)
            _report(progress, "stores", (i + 1) / len(result.bundles))
    finally:
        for folder in {b.path.parent for b in result.bundles}:
            shutil.rmtree(folder, ignore_errors=True)
    return replace(result, imported=imported, failed=failed, bundles=(),
                   seconds=result.seconds + time.perf_counter() - started)


@dataclass(frozen=True, slots=True)
class Parts:
    """What the portable operations use, handed in by the composition root (``Workbench``)."""

    settings: Settings
    stores: Stores
    templates: TemplateRegistry
    indexer: Indexer
    catalog: Catalog
    files: FileStore


class Portable:
    """Export, import and move stores; back up the data folder and import what a restore unpacked.
    The workbench builds one (``wb.portable``) with the parts it holds. Thread-safe as its parts."""

    def __init__(self, settings: Settings, stores: Stores, templates: TemplateRegistry, indexer: Indexer,
                 catalog: Catalog, files: FileStore) -> None:
        self.parts = Parts(settings, stores, templates, indexer, catalog, files)

    def export_store(self, store: str, out: str | os.PathLike, *, progress: Progress | None = None) -> ExportResult:
        """See :func:`export_store`."""
        return export_store(self.parts, store, out, progress=progress)

    def import_bundle(self, bundle: str | os.PathLike, *, as_name: str | None = None, template: str | None = None,
                      progress: Progress | None = None) -> ImportResult:
        """See :func:`import_bundle`."""
        return import_bundle(self.parts, bundle, as_name=as_name, template=template, progress=progress)

    def move_store(self, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
        """See :func:`move_store`."""
        return move_store(self.parts, store, template, progress)

    def backup(self, out: str | os.PathLike, *, progress: Progress | None = None) -> BackupResult:
        """See :func:`backup`."""
        return backup(self.parts, out, progress=progress)

    def import_restored(self, result: RestoreResult, *, progress: Progress | None = None) -> RestoreResult:
        """See :func:`import_restored`."""
        return import_restored(self.parts, result, progress=progress)

    def sweep_leftovers(self, backends: list[str] | None = None) -> tuple[int, int]:
        """See :func:`sweep_leftovers`."""
        return sweep_leftovers(self.parts, backends)


__all__ = ["BLOCK", "FORMAT_VERSION", "BackupResult", "ExportResult", "ImportResult", "Portable", "RestoreResult",
           "RestoredBundle", "backup", "bundle_info", "export_store", "import_bundle", "import_restored", "move_store",
           "open_bundle", "restore", "sweep_leftovers"]
