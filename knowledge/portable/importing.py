"""Import: a bundle recreated as a store on any backend, and a store moved to another template in
place; the sweep of what killed imports left.

An import never leaves half a store: the bundle is checked (form, sizes, every chunk citing a file)
before anything is written; the chunks go into a new collection no store uses
(``<name>~import-<pid>-<hex>``) and the files into the file store marked with the import's token;
only when everything is in does one catalog transaction create the store with its file records
(:meth:`Indexer.adopt_store`). A failure drops the collection and the files; a process killed midway
leaves leftovers that the next import, move or backup removes (:func:`sweep_leftovers`).

Errors: ``StoreExists`` (the name is taken: import ``as_name=...``), those of
:mod:`knowledge.portable.bundle`, the backends'.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from knowledge._names import bad_character, check_name
from knowledge.catalog import DONE, FAILED, FileRecord, StoreRecord
from knowledge.errors import (
    BundleCorrupt,
    InvalidArgument,
    KnowledgeError,
    StoreExists,
)
from knowledge.people.policy import parse_readers
from knowledge.portable.bundle import (
    IMPORT_MARK,
    MAX_PAYLOADS_BYTES,
    CheckedReader,
    Progress,
    check_chunks,
    npy_matrix,
    open_bundle,
    parse_chunk,
    read_member,
    report,
    vectors_limit,
)
from knowledge.portable.parts import Parts
from knowledge.service.stores import checked_settings
from knowledge.service.templates import VectorStoreTemplate, make_template
from knowledge.service.worker import pid_alive
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.store import EVERYONE
from knowledge.vocabulary import backend_label

_TEMP = re.compile(r"~import-(\d+)-[0-9a-f]{8}$")
_live_tokens: set[str] = set()  # imports running in this process
_live_lock = threading.Lock()


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


def import_bundle(
    parts: Parts,
    bundle: str | os.PathLike,
    *,
    as_name: str | None = None,
    template: str | None = None,
    progress: Progress | None = None,
) -> ImportResult:
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
            raise BundleCorrupt(
                f"The bundle's store name {name!r} contains {bad_character(name)}; import it under another name (--as NAME)."
            )
        check_name(name, "store name")
        if parts.stores.find(name) is not None:
            raise StoreExists(
                f"A store called {name!r} exists already. Import the bundle under another name"
                " (--as NAME), or delete that store first."
            )
        _check_files(parts, manifest, Path(bundle).name)
        check_chunks(zf, manifest, Path(bundle).name)  # before anything is written
        tpl, new_template = _target_template(parts, meta, template)
        own = _own_settings(meta, tpl.distance, Path(bundle).name)
        parts.templates.check(tpl)  # MachineLocalBackend: a per-machine backend in a shared catalog
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
            blocks = _blocks(zf, manifest, ids, files)
            written = parts.indexer.write_points(
                target,
                embedder.dimension,
                tpl.distance,
                blocks,
                None if reuse else embedder,
                (lambda stage, f: report(progress, stage, 0.2 + 0.75 * f)) if progress else None,
                total,
            )
            if written != total or target.count() != total:
                raise BundleCorrupt(f"The bundle lists {total} chunks but holds {written}: it is damaged.")
            report(progress, "finishing", 0.97)
            if new_template:  # saved only now: a failed import leaves no template behind either
                tpl = parts.templates.save(tpl)
            parts.indexer.adopt_store(name, tpl, embedder.dimension, collection, files)
            if any(f.readers is not None for f in files):  # every chunk carries its readers (above)
                parts.catalog.mark_filters_readers(name)
            if own != ("", None):
                parts.stores.set_settings(name, description=own[0], score_threshold=own[1])
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
    report(progress, "done", 1.0)
    seconds = time.perf_counter() - started
    how = (
        "vectors reused"
        if reuse
        else f"re-embedded with {tpl.embedding_model} (the bundle's model is {meta.get('embedding_model')})"
    )
    message = (
        f"Imported {name!r}: {len(files)} files, {written} chunks · {backend_label(tpl.backend)} (template"
        f" {tpl.name!r}; {how}) in {seconds:.1f} s."
    )
    return ImportResult(
        name,
        tpl.name,
        tpl.backend,
        len(files),
        written,
        reuse,
        None if reuse else meta.get("embedding_model"),
        seconds,
        message,
    )


def _own_settings(meta: dict[str, Any], distance: str, where: str) -> tuple[str, float | None]:
    """The store's own settings the bundle carries (``settings``: description and score threshold;
    none in bundles made before them), checked before anything is written. The threshold is kept
    only when the store is scored as in the bundle (same distance): on another scale it would mean
    something else, so the setting ``search.score_threshold`` applies instead.

    Raises:
        BundleCorrupt: settings that are not an object, or values a store cannot have.
    """
    own = meta.get("settings") or {}
    if not isinstance(own, dict):
        raise BundleCorrupt(f"{where}: the store's settings in its manifest are not an object.")
    try:
        description, threshold = checked_settings(own.get("description"), own.get("score_threshold"))
    except InvalidArgument as exc:
        raise BundleCorrupt(f"{where}: the store's settings cannot be used: {exc}") from None
    if distance != meta.get("distance"):
        threshold = None
    return description, threshold


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


def _import_files(
    parts: Parts,
    zf: zipfile.ZipFile,
    manifest: dict[str, Any],
    store: str,
    token: str,
    saved: list[str],
    progress: Progress | None,
) -> tuple[dict[str, str], list[FileRecord]]:
    """Save each file's bytes to the file store (checked against the manifest); ``saved`` collects
    the new ids as they are made. Returns old id -> new id and the new file records."""
    ids: dict[str, str] = {}
    records = []
    entries = manifest.get("files") or []
    for e in entries:  # before any byte is saved
        _entry_readers(e)
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
                stored = parts.files.save(
                    e["name"], e.get("content_type"), cast(BinaryIO, reader), max_bytes=limit, metadata={IMPORT_MARK: token}
                )
                saved.append(stored.id)
                reader.verify()
            if e.get("sha256") and stored.sha256 != e["sha256"]:
                raise BundleCorrupt(f"The bytes of {e['name']} differ from the SHA-256 the bundle records.")
            new_id = stored.id
        ids[old_id] = new_id
        status = DONE if e.get("status") == DONE else FAILED
        aliases = tuple(a for a in e.get("aliases") or () if isinstance(a, str) and a != e["name"])
        records.append(
            FileRecord(
                store,
                new_id,
                e["name"],
                e.get("sha256"),
                e.get("size"),
                status,
                e.get("reason"),
                int(e.get("chunks") or 0),
                e.get("pages"),
                list(e.get("warnings") or []),
                error=e.get("error"),
                aliases=aliases,
                readers=_entry_readers(e),
            )
        )
        report(progress, "files", 0.2 * (i + 1) / max(1, len(entries)))
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
                raise BundleCorrupt(
                    f"{where}: file {e['name']!r} carries no bytes but names the file id"
                    f" {e['file_id']!r} of a file this data folder holds."
                )
            continue
        size = members[member]["bytes"]
        if size > limit:
            raise BundleCorrupt(
                f"{where}: file {e['name']!r} is {size / 1e6:,.1f} MB, over ingest.max_file_mb"
                f" ({parts.settings.ingest.max_file_mb:g} MB); raise that setting to import it."
            )
        if e.get("size") is not None and e["size"] != size:
            raise BundleCorrupt(
                f"{where}: file {e['name']!r} is {e['size']:,} bytes by its entry, its member {member} {size:,}."
            )
        total += size
    root = Path(parts.settings.data_root)
    free = shutil.disk_usage(root if root.exists() else root.parent).free
    if total > free:
        raise BundleCorrupt(
            f"{where}: its files need {total / 1e6:,.0f} MB; the data folder's disk has {free / 1e6:,.0f} MB free."
        )


def _entry_readers(entry: dict[str, Any]) -> tuple[str, ...] | None:
    """The ``readers`` of a manifest's file entry (``None``: it inherits the store's sharing; a
    bundle made before access per document has none). Kept as written: a user or group this system
    does not have matches nobody, so the file stays restricted to the store's owners.

    Raises:
        BundleCorrupt: readers that are not a list of ``user:<name>`` / ``group:<name>``.
    """
    raw = entry.get("readers")
    if raw is None:
        return None
    try:
        if not isinstance(raw, list):
            raise InvalidArgument(f"readers is {type(raw).__name__}")
        return parse_readers(raw)
    except InvalidArgument as exc:
        raise BundleCorrupt(f"The readers of {entry.get('name')!r} in the manifest are not readers: {exc}") from None


def _blocks(
    zf: zipfile.ZipFile, manifest: dict[str, Any], ids: dict[str, str], files: Sequence[FileRecord] = ()
) -> Iterator[list[Point]]:
    """The bundle's chunks as points, one block at a time, with the file ids of this file store
    (each member read within its bound and checked again: :func:`check_chunks` read them first),
    each chunk's ``readers`` those of its file record in ``files`` (``["*"]``: it inherits)."""
    readers = {f.file_id: list(f.readers) for f in files if f.readers is not None}
    dimension = manifest["store"]["dimension"]
    for block in manifest["blocks"]:
        rows = block["count"]
        lines = read_member(zf, manifest, block["payloads"], MAX_PAYLOADS_BYTES).splitlines()
        data = read_member(zf, manifest, block["vectors"], vectors_limit(rows, dimension))
        matrix = npy_matrix(data, block["vectors"], rows, dimension).copy()
        del data
        if len(lines) != rows:
            raise BundleCorrupt(f"Member {block['payloads']} holds {len(lines)} chunks, its block says {rows}.")
        points = []
        for row, line in enumerate(lines):
            pid, payload = parse_chunk(line, block["payloads"], row)
            old = payload["file_id"]
            new = ids.get(old)
            if new is None:
                raise BundleCorrupt(
                    f"A chunk of {block['payloads']} cites the file id {old!r}, which the bundle does not carry."
                )
            if new != old:
                payload["file_id"] = new
                if isinstance(pid, str) and pid.startswith(f"{old}:"):
                    pid = new + pid[len(old) :]
            payload["readers"] = readers.get(payload["file_id"], [EVERYONE])
            points.append(Point(pid, matrix[row], payload))
        yield points


def _dead_token(token: str) -> bool:
    with _live_lock:
        if token in _live_tokens:
            return False
    head = token.split("-", 1)[0]
    if not head.isdigit() or int(head) == os.getpid():
        return True  # this process's import, no longer running
    return not pid_alive(int(head))


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
            if m and (bname, c) not in used and _dead_token(c[m.start() + len("~import-") :]):
                backend.collection(c).drop_collection()
                dropped += 1
    removed = 0
    for f in parts.files.list():
        token = f.metadata.get(IMPORT_MARK)
        if isinstance(token, str) and _dead_token(token) and not parts.catalog.stores_using_file(f.id):
            parts.files.delete(f.id)
            removed += 1
    return dropped, removed


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
