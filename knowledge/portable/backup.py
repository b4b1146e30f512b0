"""Backup and restore of the whole data folder (format ``knowledge-backup``): the catalog, the
stored files, the memory backend's collections as files and the stores of other backends as
bundles. :func:`restore` runs before any workbench exists (into an empty folder) and returns the
bundles it unpacked; :func:`import_restored` imports them through a workbench's parts."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowledge._names import bad_character
from knowledge.config import Settings
from knowledge.errors import (
    BundleCorrupt,
    InvalidArgument,
    KnowledgeError,
    TargetNotEmpty,
)
from knowledge.filestore.filesystem import RECORD_FORMAT
from knowledge.portable.bundle import (
    FORMAT_VERSION,
    MANIFEST,
    PIECE,
    RESTORE_BUNDLES,
    CheckedReader,
    Progress,
    archive,
    check_inventory,
    check_manifest,
    copy_from,
    read_manifest,
    report,
    write_member,
)
from knowledge.portable.exporting import export_store
from knowledge.portable.importing import import_bundle, sweep_leftovers
from knowledge.portable.parts import Parts
from knowledge.vectorstore.memory.storage import LEXICAL_DIR, MANIFEST_TMP

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


_PG_CATALOG = (
    "The catalog is in {where}, so it is not {what} with the data folder: back it up with pg_dump"
    " (and restore it with pg_restore or psql), and the files with the file store's own tools. To"
    " move stores, export and import them as bundles (`knowledge export` / `knowledge import`)."
)


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
        StorageError (the archive cannot be written); the backends' errors. InvalidArgument: the
        catalog is in PostgreSQL (``catalog.url``): back it up with ``pg_dump``, nothing is written.
    """
    if parts.catalog.dialect != "duckdb":
        raise InvalidArgument(_PG_CATALOG.format(what="backed up", where=parts.catalog.describe()))
    started = time.perf_counter()
    out = Path(out)
    members: dict[str, dict[str, Any]] = {}
    sweep_leftovers(parts)
    copied: list[str] = []
    bundled: list[dict[str, Any]] = []
    with archive(out, "backup") as zf, tempfile.TemporaryDirectory(prefix="knowledge-backup-") as tmp:
        snapshot = Path(tmp) / "catalog.duckdb"
        parts.catalog.checkpoint_copy(snapshot)
        with open(snapshot, "rb") as fh:
            members["catalog.duckdb"] = write_member(zf, "catalog.duckdb", copy_from(fh), deflate=True)
        report(progress, "catalog", 0.05)
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
                    members[blob] = write_member(zf, blob, copy_from(src))
                    blobs.add(f.sha256)
            meta = json.dumps({"format": RECORD_FORMAT, **f.to_dict()}, ensure_ascii=False, indent=2).encode()
            members[f"files/meta/{f.id}.json"] = write_member(zf, f"files/meta/{f.id}.json", _writer(meta), deflate=True)
            report(progress, "files", 0.05 + 0.25 * (i + 1) / max(1, len(records)))
        # the memory backend's own API (collection files, lock_timeout), beyond VectorBackend's
        memory: Any = parts.stores.backend("memory") if _memory_in_use(parts) else None
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
                    with open(path, "rb") as fh:
                        members[member] = write_member(zf, member, copy_from(fh))
            copied.append(name)
            report(progress, "memory stores", 0.3 + 0.3 * (i + 1) / max(1, len(names)))
        others = [r for r in parts.catalog.list_stores() if r.backend != "memory"]
        for i, r in enumerate(others):
            tmp_kb = Path(tmp) / f"{i:04d}.kb"
            export_store(parts, r.name, tmp_kb)
            member = f"stores/{i:04d}.kb"
            with open(tmp_kb, "rb") as src:
                members[member] = write_member(zf, member, copy_from(src))
            tmp_kb.unlink()
            bundled.append({"store": r.name, "member": member, "template": r.template, "backend": r.backend})
            report(progress, "other stores", 0.6 + 0.4 * (i + 1) / max(1, len(others)))
        manifest = {
            "format": BACKUP_FORMAT,
            "format_version": FORMAT_VERSION,
            "created": datetime.now(UTC).isoformat(),
            "memory_stores": copied,
            "bundles": bundled,
            "files": len(records),
            "members": members,
        }
        zf.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1), zipfile.ZIP_DEFLATED)
    report(progress, "done", 1.0)
    return BackupResult(
        out, out.stat().st_size, copied, [b["store"] for b in bundled], len(records), time.perf_counter() - started
    )


def _writer(data: bytes) -> Callable[[Any], Any]:
    return lambda w: w.write(data)


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


def restore(
    settings: Settings, archive: str | os.PathLike, *, force: bool = False, progress: Progress | None = None
) -> RestoreResult:
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
        BundleTooNew: the archive is damaged or newer; nothing was written then. InvalidArgument:
        ``settings`` put the catalog in PostgreSQL (``catalog.url``): restore it with ``pg_restore``.
    """
    if settings.catalog.url:
        raise InvalidArgument(_PG_CATALOG.format(what="restored", where="PostgreSQL (catalog.url)"))
    started = time.perf_counter()
    path = Path(archive)
    if not path.is_file():
        raise InvalidArgument(f"{str(path)!r} is not a file.")
    if not force and not data_folder_empty(settings):
        raise TargetNotEmpty(
            f"The data folder {str(settings.data_root)!r} already holds data; restore into an"
            " empty folder (--data-dir), or pass --force to replace its catalog, files and"
            " memory stores."
        )
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleCorrupt(f"{path.name} is not a complete backup (truncated, or not a backup): {exc}") from exc
    with zf:
        manifest = read_manifest(zf, path.name, "backup")
        check_manifest(manifest, BACKUP_FORMAT, path.name)
        members = manifest["members"]
        for name in members:
            if not _safe_member(name):
                raise BundleCorrupt(f"{path.name}: member {name!r} is not a path this program writes.")
        check_inventory(zf, manifest, path.name)
        if "catalog.duckdb" not in members:
            raise BundleCorrupt(f"{path.name} holds no catalog.duckdb: it is not a whole backup.")
        bundles_meta = manifest.get("bundles") or []
        if not isinstance(bundles_meta, list) or not all(
            isinstance(b, dict)
            and isinstance(b.get("store"), str)
            and not bad_character(b["store"])
            and b.get("member") in members
            and str(b.get("member")).startswith("stores/")
            and isinstance(b.get("template"), (str, type(None)))
            for b in bundles_meta
        ):
            raise BundleCorrupt(f"{path.name}: its manifest's bundles are not stores with a bundle member each.")
        need = sum(m["bytes"] for m in members.values())
        data_root = Path(settings.data_root)
        made_root = not data_root.exists()
        data_root.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(data_root).free
        if need > free:
            raise BundleCorrupt(
                f"{path.name} holds {need / 1e6:,.0f} MB; the data folder's disk has {free / 1e6:,.0f} MB free."
            )
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
                    report(progress, "checking", 0.3 * (i + 1) / max(1, len(members)))
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
    report(progress, "done", 1.0)
    return RestoreResult(
        list(manifest.get("memory_stores") or []),
        [],
        {},
        int(manifest.get("files") or 0),
        time.perf_counter() - started,
        bundles,
    )


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
    return (
        (name == "catalog.duckdb" or (len(parts) > 1 and parts[0] in ("files", "vector-stores", "stores")))
        and all(p not in ("", ".", "..") for p in parts)
        and "\\" not in name
        and ":" not in name
        and bad_character(name) is None
    )


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
            report(progress, "stores", (i + 1) / len(result.bundles))
    finally:
        for folder in {b.path.parent for b in result.bundles}:
            shutil.rmtree(folder, ignore_errors=True)
    return replace(
        result, imported=imported, failed=failed, bundles=(), seconds=result.seconds + time.perf_counter() - started
    )
