"""The bundle format (``.kb``, ``knowledge-bundle``; docs/bundle-format.md): its constants, the
checked writer of an archive (written to ``.part``, fsynced, renamed) and its members (SHA-256 and
size counted), and the checked reader (:func:`open_bundle`, :func:`read_member`, :class:`CheckedReader`,
:func:`check_chunks`): what a bundle or backup holds is untrusted, every figure is checked while the
bytes are read, never taken from the zip's directory alone.

Errors: ``BundleCorrupt`` (truncated, tampered, a member missing or over its bound, a chunk of no
file, not a bundle), ``BundleTooNew`` (a newer format). Checksums detect damage, not malice: the
manifest itself is not signed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import stat
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from knowledge._names import bad_character
from knowledge.catalog import DONE
from knowledge.errors import (
    BundleCorrupt,
    BundleTooNew,
    InvalidArgument,
    StorageError,
    in_words,
)

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
PIECE = 1 << 20
#: The most chunks a block of a bundle may hold when read (the format's bound; :data:`BLOCK` is
#: what this program writes).
MAX_BLOCK = 2048
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


class HashingWriter(io.RawIOBase):
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


@contextlib.contextmanager
def archive(out: Path, what: str) -> Iterator[zipfile.ZipFile]:
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


def copy_from(src: IO[bytes]) -> Callable[[Any], None]:
    """A ``fill`` for :func:`write_member` copying ``src`` in pieces of :data:`PIECE` bytes."""
    return lambda w: shutil.copyfileobj(src, w, PIECE)


def write_member(zf: zipfile.ZipFile, name: str, fill: Callable[[Any], Any], deflate: bool = False) -> dict[str, Any]:
    info = zipfile.ZipInfo(name, date_time=time.gmtime()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zf.open(info, "w", force_zip64=True) as raw:
        w = HashingWriter(raw)
        fill(w)
    return {"sha256": w.sha.hexdigest(), "bytes": w.size}


def report(progress: Progress | None, stage: str, fraction: float) -> None:
    if progress is not None:
        progress(stage, max(0.0, min(1.0, fraction)))


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
        manifest = read_manifest(zf, path.name, "knowledge bundle")
        check_manifest(manifest, FORMAT, path.name)
        _check_store_manifest(manifest, path.name)
        check_inventory(zf, manifest, path.name)
    except BaseException:
        zf.close()
        raise
    return zf, manifest


def read_manifest(zf: zipfile.ZipFile, where: str, what: str) -> Any:
    """The parsed ``manifest.json`` of ``zf``, read in pieces and never past
    :data:`MAX_MANIFEST_BYTES` (a zip's directory may understate a member's size)."""
    try:
        info = zf.getinfo(MANIFEST)
    except KeyError:
        raise BundleCorrupt(f"{where} has no {MANIFEST}: it is not a {what}.") from None
    if info.file_size > MAX_MANIFEST_BYTES:
        raise BundleCorrupt(
            f"{where}: its {MANIFEST} is {info.file_size:,} bytes, more than the {MAX_MANIFEST_BYTES:,} a manifest may have."
        )
    try:
        with zf.open(info) as raw:
            data = CheckedReader(raw, MANIFEST, {"bytes": info.file_size}, MAX_MANIFEST_BYTES).read_all()
        return json.loads(data)
    except BundleCorrupt:
        raise
    except (zipfile.BadZipFile, ValueError, RecursionError, OSError, EOFError) as exc:
        raise BundleCorrupt(f"{where}: its {MANIFEST} is unreadable ({in_words(exc)})"[:500] + ".") from exc


def check_inventory(zf: zipfile.ZipFile, manifest: dict[str, Any], where: str) -> None:
    """The zip holds exactly the manifest and the members it lists, each once, none a link, each of
    the size the manifest says (checked again while it is read)."""
    infos = zf.infolist()
    members = manifest["members"]
    if len(infos) > len(members) + 1:
        raise BundleCorrupt(f"{where} holds {len(infos):,} members; its manifest accounts for {len(members) + 1:,}.")
    seen: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        if info.filename in seen:
            raise BundleCorrupt(f"{where} holds the member {info.filename!r} twice.")
        if _is_link(info):
            raise BundleCorrupt(f"{where}: member {info.filename!r} is a symbolic link; archives of this program hold none.")
        if info.filename != MANIFEST and info.filename not in members:
            raise BundleCorrupt(f"{where}: member {info.filename!r} is not listed in its manifest.")
        seen[info.filename] = info
    for name, meta in members.items():
        if (
            not isinstance(meta, dict)
            or not isinstance(meta.get("sha256"), str)
            or not isinstance(meta.get("bytes"), int)
            or isinstance(meta.get("bytes"), bool)
            or meta["bytes"] < 0
        ):
            raise BundleCorrupt(f"{where}: the manifest's entry for member {name!r} has no SHA-256 or size.")
        if name not in seen:
            raise BundleCorrupt(f"{where} misses its member {name} (listed in the manifest).")
        if seen[name].file_size != meta["bytes"]:
            raise BundleCorrupt(
                f"{where}: member {name} has {seen[name].file_size} bytes, the manifest says"
                f" {meta['bytes']} (truncated or tampered with)."
            )


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
        raise BundleTooNew(
            f"{where} was written in {fmt} format version {version}; this program reads"
            f" versions up to {FORMAT_VERSION}. Upgrade knowledge to import it."
        )
    if not isinstance(manifest.get("members"), dict):
        raise BundleCorrupt(f"{where}: the manifest lists no members.")


def _check_store_manifest(m: dict[str, Any], where: str) -> None:
    """The shape of a bundle manifest's store, files and blocks (the checksums cover the members,
    not the manifest: a hand-edited one must still fail with a reason, not a traceback): every
    figure of the right type and range, every file id and member once, every block at most
    :data:`MAX_BLOCK` chunks adding up to ``chunks``, names without control characters."""
    store, files, blocks = m.get("store"), m.get("files"), m.get("blocks")
    ok = (
        isinstance(store, dict)
        and isinstance(store.get("name"), str)
        and isinstance(store.get("embedding_model"), str)
        and _is_int(store.get("dimension"), 1, MAX_DIMENSION, none=True)
        and isinstance(store.get("template", {}), dict)
        and isinstance(files, list)
        and all(isinstance(f, dict) and isinstance(f.get("file_id"), str) and isinstance(f.get("name"), str) for f in files)
        and isinstance(blocks, list)
        and all(
            isinstance(b, dict) and isinstance(b.get("payloads"), str) and isinstance(b.get("vectors"), str) for b in blocks
        )
        and _is_int(m.get("chunks"), 0)
    )
    if not ok:
        raise BundleCorrupt(f"{where}: its manifest lacks the store, its files or its chunk blocks.")
    assert isinstance(store, dict) and isinstance(files, list) and isinstance(blocks, list)  # checked above
    ids: set[str] = set()
    used: set[str | None] = set()
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
            raise BundleCorrupt(
                f"{where}: file {fname!r} names the member {member!r}, which is not a file member or is named twice."
            )
        used.add(member)
        if not (
            _is_int(f.get("chunks"), 0, none=True)
            and _is_int(f.get("size"), 0, none=True)
            and _is_int(f.get("pages"), 0, none=True)
            and isinstance(f.get("aliases") or [], list)
            and isinstance(f.get("warnings") or [], list)
            and all(isinstance(w, str) for w in f.get("warnings") or [])
            and all(isinstance(f.get(k), (str, type(None))) for k in ("reason", "error", "content_type", "sha256", "status"))
        ):
            raise BundleCorrupt(f"{where}: the entry of file {fname!r} has a figure of the wrong type.")
    total = 0
    for b in blocks:
        if not _is_int(b.get("count"), 1, MAX_BLOCK):
            raise BundleCorrupt(
                f"{where}: block {b['payloads']!r} gives {b.get('count')!r} chunks; a block holds 1-{MAX_BLOCK}."
            )
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
            raise BundleCorrupt(
                f"Member {self.name} holds more than the {self.limit:,} bytes it may have"
                f" (its manifest says {self.expected:,}): the archive is damaged or crafted."
            )
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
            raise BundleCorrupt(f"Member {self.name} does not match its checksum: the archive is damaged or was altered.")


def npy_matrix(data: bytes, name: str, rows: int, dimension: int) -> np.ndarray:
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
        raise BundleCorrupt(
            f"Member {name} holds a {dtype} matrix of shape {tuple(shape)}; its block needs"
            f" ({rows}, {dimension}) little-endian float32."
        )
    offset = fp.tell()
    if len(data) != offset + rows * dimension * 4:
        raise BundleCorrupt(f"Member {name} has {len(data) - offset:,} bytes of vectors for a ({rows}, {dimension}) matrix.")
    return np.frombuffer(data, _VECTOR_DTYPE, rows * dimension, offset).reshape(rows, dimension)


def vectors_limit(rows: int, dimension: int) -> int:
    return _NPY_HEADER_MAX + rows * dimension * 4


def parse_chunk(line: bytes, member: str, row: int) -> tuple[Any, dict[str, Any]]:
    try:
        item = orjson.loads(line)
        payload, pid = item["payload"], item["id"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise BundleCorrupt(f"Member {member}: line {row + 1} is not a chunk ({exc}).") from exc
    if (
        not isinstance(payload, dict)
        or not isinstance(pid, (str, int))
        or isinstance(pid, bool)
        or not isinstance(payload.get("file_id"), str)
        or not isinstance(payload.get("text"), str)
    ):
        raise BundleCorrupt(f"Member {member}: line {row + 1} is not a chunk (an id, a payload with its text and file id).")
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
            pid, payload = parse_chunk(line, block["payloads"], row)
            fid = payload["file_id"]
            if fid not in files:
                raise BundleCorrupt(
                    f"{where}: a chunk of {block['payloads']} (line {row + 1}) cites the file id"
                    f" {fid!r}, which the bundle does not carry."
                )
            if pid in ids:
                raise BundleCorrupt(f"{where}: the chunk id {pid!r} is given twice.")
            ids.add(pid)
            counts[fid] = counts.get(fid, 0) + 1
        del lines
        npy_matrix(
            read_member(zf, manifest, block["vectors"], vectors_limit(rows, dimension)), block["vectors"], rows, dimension
        )
    for fid, f in files.items():
        want = int(f.get("chunks") or 0) if f.get("status") == DONE else 0
        if counts.get(fid, 0) != want:
            raise BundleCorrupt(
                f"{where}: file {f['name']!r} has {counts.get(fid, 0)} chunks in the bundle, its"
                f" entry says {want} ({f.get('status')})."
            )


def bundle_info(path: str | os.PathLike) -> dict[str, Any]:
    """The store part of a bundle's manifest plus ``files`` and ``chunks`` counts (for a preview).
    Raises as :func:`open_bundle`."""
    zf, manifest = open_bundle(path)
    with zf:
        return {
            **manifest["store"],
            "files": len(manifest.get("files", [])),
            "chunks": manifest.get("chunks", 0),
            "format_version": manifest["format_version"],
            "created": manifest.get("created"),
        }
