"""The workbench: stores, templates, files and ingestion, as one service for the app, the CLI and tools.

``Workbench`` ties the parts together -- settings, the catalog, the file store, the templates, one
vector-store backend per backend name and one embedder per model -- and owns the rules users expect:

* A store is template + name, created on the fly, recording its backend, model and dimension. A
  template whose model differs from the store's is refused *before* anything is embedded.
* Ingesting a file: the bytes go to the file store, the reader extracts text with structure, the
  chunker cuts it within the model's window, the embedder embeds, and the store's chunks of that file
  are replaced in one atomic step. Every outcome is recorded in the catalog (status, reason, chunks,
  pages, warnings, timings).
* The same file again into the same store is a no-op with a notice; a changed file under the same
  name replaces the old chunks (new chunks written first, then the old removed, so the file is never
  missing); identical bytes under another name are stored once and reported as a duplicate, not
  indexed twice; deleting a file removes every chunk; search never returns two hits with identical
  text.
* A bad file is reported with its reason and the batch goes on; nothing is half-written.
* A store keeps one failed record per file name: a new failure replaces the earlier one, and
  :meth:`Workbench.retry_file` ingests a failed file again from its stored bytes (with a password, say).
"""

from __future__ import annotations

import contextlib
import io
import logging
import mimetypes
import os
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Literal, get_args

import numpy as np

from knowledge.catalog import DONE, FAILED, PROCESSING, Catalog, FileRecord, StoreRecord
from knowledge.config import Settings, load_settings
from knowledge.embeddings.base import Embedder
from knowledge.errors import (
    EmbeddingUnavailable,
    InvalidArgument,
    KnowledgeError,
    StoreNotFound,
)
from knowledge.ingest.chunker import chunk_document, embedding_text
from knowledge.lexical import LexicalHit, LexicalIndex, reciprocal_rank_fusion
from knowledge.templates import DEFAULT_TEMPLATE, TemplateRegistry, VectorStoreTemplate
from knowledge.vectorstore.base import VectorBackend, higher_is_better, passes_threshold, vector_scores
from knowledge.vectorstore.registry import open_backend
from knowledge.vectorstore.store import RESERVED_FIELDS, Chunk, Hit, VectorStore, hit_from_payload

log = logging.getLogger(__name__)

#: Ingestion outcomes reported per file.
INDEXED, UNCHANGED, DUPLICATE, FAILED_OUTCOME, CANCELLED = "indexed", "unchanged", "duplicate", "failed", "cancelled"

SearchMode = Literal["hybrid", "vector", "lexical"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)

Progress = Callable[[str, float], None]
"""``progress(stage, fraction)``: stage is "reading", "OCR, page 3 of 10" (the page being read, for
scans and images), "chunking", "embedding" or "writing"; fraction in [0, 1] of the current file (OCR,
when a file needs it, takes its first 85 %)."""

#: The share of a file's progress that OCR takes when a file needs it (it dominates the time).
OCR_SHARE = 0.85


class ModelMismatch(KnowledgeError):
    """A store filled by one embedding model was asked to take vectors of another."""


class Cancelled(KnowledgeError):
    """The caller cancelled an ingestion; the store is as it was before."""


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What happened to one file: ``outcome`` is indexed, unchanged, duplicate, failed or cancelled.

    ``chunks`` and ``pages`` count what was indexed; ``seconds`` is the wall time for this file;
    ``message`` says in words what happened (the reason when it failed).
    """

    name: str
    outcome: str
    message: str
    file_id: str | None = None
    chunks: int = 0
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    replaced_file_id: str | None = None
    error: str | None = None  # the error class name when it failed

    @property
    def ok(self) -> bool:
        return self.outcome in (INDEXED, UNCHANGED, DUPLICATE)


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """A store for listing: its record plus live counts from the backend."""

    record: StoreRecord
    files: int
    chunks: int
    disk_bytes: int | None


@dataclass(frozen=True, slots=True)
class StoredFileUsage:
    """A file of the file store, the names of the stores that hold it, and its status in each
    (``"done"``: searchable there; ``"failed"``: kept for a retry; ``"processing"``, ``"pending"``)."""

    file: Any  # knowledge.filestore.base.StoredFile
    stores: list[str]
    statuses: dict[str, str] = field(default_factory=dict)

    def labels(self) -> list[str]:
        """``["notes", "papers (failed)"]``: each store, with the status unless it is done."""
        return [s if self.statuses.get(s, DONE) == DONE else f"{s} ({self.statuses[s]})" for s in self.stores]


@dataclass(frozen=True, slots=True)
class StoreHit:
    """A hit of a search over several stores: the ``store`` it came from, the ``hit`` as that store's
    own search returned it (scores unchanged), and ``fused``, the reciprocal-rank-fusion score of its
    rank in its store's list (higher is better; the order of the merged list)."""

    store: str
    hit: Hit
    fused: float


@dataclass(frozen=True, slots=True)
class MultiSearch:
    """The merged hits of :meth:`Workbench.search_stores`, best first, and ``failed``: the stores that
    could not be searched, each with the reason (a backend down, a store deleted meanwhile)."""

    hits: list[StoreHit]
    failed: dict[str, str]


class Workbench:
    """Stores, templates, files and ingestion over one data folder.

    Args:
        settings: defaults to :func:`knowledge.config.load_settings`.
        embedder_factory: ``factory(model_name) -> Embedder``; tests pass a fake. Defaults to the
            bundled / fastembed models of :mod:`knowledge.embeddings`.

    Thread-safe: Streamlit sessions share one instance.
    """

    def __init__(self, settings: Settings | None = None,
                 embedder_factory: Callable[[str], Embedder] | None = None) -> None:
        from knowledge.filestore import open_file_store

        self.settings = settings or load_settings()
        self.catalog = Catalog(self.settings.catalog_path)
        self.files = open_file_store(self.settings)
        self.templates = TemplateRegistry(self.settings, self.catalog)
        self._embedder_factory = embedder_factory or self._default_embedder
        self._lock = threading.RLock()
        self._backends: dict[str, VectorBackend] = {}
        self._embedders: dict[str, Embedder] = {}
        self._store_locks: dict[str, threading.Lock] = {}
        self._lexical: dict[str, tuple[str, LexicalIndex, threading.Lock]] = {}

    # -- parts ----------------------------------------------------------------------------------
    def _default_embedder(self, model: str) -> Embedder:
        from knowledge.embeddings import create_embedder

        emb = self.settings.embeddings.model_copy(update={"model": model})
        return create_embedder(self.settings.model_copy(update={"embeddings": emb}))

    def embedder(self, model: str | None = None) -> Embedder:
        """The embedder for ``model`` (default: the default template's), created once."""
        name = model or self.settings.embeddings.model
        with self._lock:
            if name not in self._embedders:
                self._embedders[name] = self._embedder_factory(name)
            return self._embedders[name]

    def loaded_models(self) -> list[str]:
        with self._lock:
            return [n for n, e in self._embedders.items() if getattr(e, "loaded", True)]

    def backend(self, name: str | None = None) -> VectorBackend:
        """The backend ``name`` (default: the settings'), opened once. Raises ``BackendUnavailable``."""
        name = name or self.settings.vector_store.backend
        with self._lock:
            if name not in self._backends:
                self._backends[name] = open_backend(self.settings, name)
            return self._backends[name]

    def close(self) -> None:
        with self._lock:
            for b in self._backends.values():
                b.close()
            self._backends.clear()
        self.catalog.close()

    def _store_lock(self, store: str) -> threading.Lock:
        with self._lock:
            return self._store_locks.setdefault(store, threading.Lock())

    # -- stores ---------------------------------------------------------------------------------
    def create_store(self, name: str, template: str = DEFAULT_TEMPLATE) -> StoreRecord:
        """Create the store ``name`` from ``template`` (or return it if it exists with that model).

        Raises:
            InvalidArgument: a blank name. TemplateNotFound. ModelMismatch: the store exists with
            another embedding model. EmbeddingUnavailable: the model cannot load (its dimension is
            recorded now).
        """
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidArgument("A store name must be 1-200 characters and not blank.")
        tpl = self.templates.get(template)
        existing = self.catalog.get_store(name)
        if existing is not None:
            self._check_model(existing, tpl)
            return existing
        dimension = self.embedder(tpl.embedding_model).dimension
        return self.catalog.put_store(name, tpl.name, tpl.backend, tpl.embedding_model, dimension, tpl.distance)

    def get_store(self, name: str) -> StoreRecord:
        record = self.catalog.get_store(name)
        if record is None:
            raise StoreNotFound(name, "create it first, or ingest a file into it")
        return record

    def store_template(self, record: StoreRecord) -> VectorStoreTemplate:
        return self.templates.get(record.template)

    def vector_store(self, name: str) -> VectorStore:
        """The ``VectorStore`` facade of an existing store."""
        return self._vs(self.get_store(name))

    def _vs(self, record: StoreRecord) -> VectorStore:
        coll = self.backend(record.backend).collection(record.collection)
        return VectorStore(coll, distance=record.distance)  # type: ignore[arg-type]

    def store_names(self, *, internal: bool = False) -> list[str]:
        """The stores' names, sorted case-insensitively; the product's own stores (each chat's
        attachment store) only with ``internal``."""
        hidden = set() if internal else self.catalog.internal_stores()
        return [r.name for r in self.catalog.list_stores() if r.name not in hidden]

    def list_stores(self, *, internal: bool = False) -> list[StoreSummary]:
        """The user's stores with their live counts (with ``internal``, the chats' attachment stores too)."""
        out = []
        hidden = set() if internal else self.catalog.internal_stores()
        for record in self.catalog.list_stores():
            if record.name in hidden:
                continue
            chunks, disk = 0, None
            try:
                coll = self.backend(record.backend).collection(record.collection)
                if coll.collection_exists():
                    info = coll.info()
                    chunks, disk = info.count, info.disk_bytes
            except KnowledgeError as exc:
                log.warning("store %s: %s", record.name, exc)
            files = sum(1 for f in self.catalog.files(record.name) if f.status == DONE)
            out.append(StoreSummary(record, files, chunks, disk))
        return out

    def delete_store(self, name: str) -> None:
        """Delete a store: its chunks, its catalog records, and files no other store uses."""
        record = self.get_store(name)
        file_ids = [f.file_id for f in self.catalog.files(name)]
        self.backend(record.backend).collection(record.collection).drop_collection()
        self.catalog.delete_store(name)
        for fid in file_ids:
            self._forget_file_if_unused(fid)

    @staticmethod
    def _check_model(record: StoreRecord, tpl: VectorStoreTemplate) -> None:
        if record.embedding_model != tpl.embedding_model:
            raise ModelMismatch(
                f"Store {record.name!r} holds embeddings of {record.embedding_model}"
                f" ({record.dimension} dimensions); template {tpl.name!r} uses {tpl.embedding_model}."
                " Re-embed the store to move it to that template."
            )

    def _open_for_ingest(self, store: str, template: str | None) -> tuple[StoreRecord, VectorStoreTemplate]:
        record = self.catalog.get_store(store)
        if record is None:
            record = self.create_store(store, template or DEFAULT_TEMPLATE)
            return record, self.templates.get(record.template)
        tpl = self.templates.get(template) if template else self.store_template(record)
        self._check_model(record, tpl)
        return record, tpl

    # -- ingestion ------------------------------------------------------------------------------
    def ingest_file(
        self,
        store: str,
        source: str | os.PathLike | bytes | BinaryIO,
        name: str | None = None,
        *,
        template: str | None = None,
        password: str | None = None,
        content_type: str | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> IngestResult:
        """Ingest one file into ``store`` (created on the fly from ``template``). Never raises for a
        bad file: the result says what happened. Raises only for a bad store or template
        (``InvalidArgument``, ``TemplateNotFound``, ``ModelMismatch``, ``EmbeddingUnavailable``,
        ``BackendUnavailable``).

        ``source`` may also be a :class:`~knowledge.filestore.base.StoredFile` already in the file
        store (the OpenAI-compatible API's uploads): its bytes are used as they are, under its id,
        and never deleted here. ``attributes`` (see :mod:`knowledge.attributes`) are stored with
        every chunk as ``attr_<key>`` payload fields; they win over a document's own (front matter)."""
        from knowledge.attributes import check_attributes
        from knowledge.filestore.base import StoredFile

        started = time.perf_counter()
        attributes = check_attributes(attributes)
        kept = source if isinstance(source, StoredFile) else None
        if kept is not None:
            name = name or kept.name
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            name = name or path.name
        else:
            path = None
        if not name:
            raise InvalidArgument("A file needs a name when it is given as bytes or a stream.")
        name = normalize_name(name)
        record, tpl = self._open_for_ingest(store, template)
        embedder = self.embedder(tpl.embedding_model)
        lock = self._store_lock(store)
        with lock:  # held for the quick decisions and the final write, never while embedding
            try:
                stored = kept or self._save(source, path, name, content_type)
            except KnowledgeError as exc:
                return IngestResult(name, FAILED_OUTCOME, str(exc), error=type(exc).__name__,
                                    seconds=time.perf_counter() - started)
            same_name = [f for f in self.catalog.files(store, file_name=name) if f.file_id != stored.id]
            same_bytes = [f for f in self.catalog.files(store, sha256=stored.sha256) if f.file_id != stored.id]
            unchanged = [f for f in same_name if f.sha256 == stored.sha256 and f.status == DONE]
            if unchanged:
                if kept is None:
                    self._discard(stored.id)
                old = unchanged[0]
                return IngestResult(name, UNCHANGED, f"{name} is already in {store!r}, unchanged"
                                    f" ({_n(old.chunks, 'chunk')}); nothing to do.", file_id=old.file_id,
                                    chunks=old.chunks, pages=old.pages, seconds=time.perf_counter() - started)
            dup = [f for f in same_bytes if f.status == DONE and f.file_name != name]
            if dup:
                if kept is None:
                    self._discard(stored.id)
                return IngestResult(name, DUPLICATE, f"{name} has the same bytes as {dup[0].file_name!r},"
                                    f" already in {store!r}; not indexed twice.", file_id=dup[0].file_id,
                                    seconds=time.perf_counter() - started)
            rec = FileRecord(store, stored.id, stored.name, stored.sha256, stored.size, PROCESSING, None, 0, None)
            self.catalog.put_file(rec)
        result = self._index(store, record, tpl, embedder, stored, rec, password, progress, cancel, started, lock,
                             attributes)
        with lock:
            if result.outcome == INDEXED:
                for old in same_name:  # a changed file under the same name: the new version replaces it
                    self._remove_from_store(store, record, old.file_id)
                replaced = [f for f in same_name if f.status == DONE]  # not an earlier failed attempt
                if replaced:
                    result = _replace(result, replaced_file_id=replaced[0].file_id,
                                      message=result.message + f" Replaced the previous version of {name}.")
            elif result.outcome == FAILED_OUTCOME:  # the new failure supersedes earlier ones of that name
                for old in same_name:
                    if old.status == FAILED:
                        self._remove_from_store(store, record, old.file_id)
        return result

    def _save(self, source: Any, path: Path | None, name: str, content_type: str | None):
        ctype = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        limit = self.settings.ingest.max_file_bytes
        if path is not None:
            try:
                with path.open("rb") as fh:
                    return self.files.save(name, ctype, fh, max_bytes=limit)
            except OSError as exc:
                raise InvalidArgument(f"{path} cannot be read: {exc.strerror or exc}") from exc
        stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
        return self.files.save(name, ctype, stream, max_bytes=limit)

    def _index(self, store: str, record: StoreRecord, tpl: VectorStoreTemplate, embedder: Embedder,
               stored: Any, rec: FileRecord, password: str | None, progress: Progress | None,
               cancel: threading.Event | None, started: float, lock: threading.Lock,
               attributes: dict[str, Any] | None = None) -> IngestResult:
        """Read, chunk and embed without the store's lock; take it only to write."""
        from knowledge.ingest.readers import read_document

        t_read = t_embed = 0.0
        ocr_pages = [0]  # pages read by OCR (issue 16): OCR then takes most of the progress bar

        def on_page(done: int, total: int) -> None:
            ocr_pages[0] = total
            _step(progress, f"OCR, page {min(done + 1, total)} of {total}", OCR_SHARE * done / max(1, total),
                  cancel)

        try:
            _step(progress, "reading", 0.0, cancel)
            t0 = time.perf_counter()
            with self.files.content(stored.id) as fh:
                doc = read_document(fh, stored.name, password=password,
                                    max_bytes=self.settings.ingest.max_file_bytes,
                                    ocr=tpl.ocr or self.settings.ingest.ocr, on_page=on_page)
            base = OCR_SHARE if ocr_pages[0] else 0.1
            _step(progress, "chunking", base, cancel)
            result = chunk_document(doc, embedder, tpl.max_chunk_size_tokens, tpl.chunk_overlap_tokens,
                                    on_progress=lambda f: _step(progress, "chunking", base, cancel))
            t_read = time.perf_counter() - t0
            texts = [embedding_text(c.text, c.heading) for c in result.chunks]
            t0 = time.perf_counter()
            vectors = _embed(embedder, texts, progress, cancel, start=base)
            t_embed = time.perf_counter() - t0
            _step(progress, "writing", 0.95, cancel)
            front = {f"attr_{k}": v for k, v in doc.attributes.items()}  # front matter: filterable
            chunks = [Chunk(c.text, vectors[i], c.index, c.page, c.char_start, c.char_end, c.heading,
                            metadata={**front, **({"table_header": c.table_header} if c.table_header else {})})
                      for i, c in enumerate(result.chunks)]
            warnings = list(doc.warnings)  # the chunk plan's notes are the template's, not the file's
            if attributes:  # the caller's file attributes (knowledge.attributes), over the document's own
                from knowledge.attributes import to_payload

                chunks = [replace(c, metadata={**c.metadata, **to_payload(attributes)}) for c in chunks]
            with lock:
                self._vs(record).upsert(stored.id, chunks, file_name=stored.name)
                if record.dimension != embedder.dimension:
                    self.catalog.put_store(store, record.template, record.backend, record.embedding_model,
                                           embedder.dimension, record.distance)
                total = time.perf_counter() - started
                self.catalog.put_file(_record(rec, status=DONE, chunks=len(chunks), pages=doc.pages,
                                              warnings=warnings, read_seconds=t_read, embed_seconds=t_embed,
                                              total_seconds=total))
        except KnowledgeError as exc:
            cancelled = isinstance(exc, Cancelled)
            reason = "cancelled" if cancelled else str(exc)
            with lock:
                self.catalog.put_file(_record(rec, status=FAILED, reason=reason, read_seconds=t_read,
                                              total_seconds=time.perf_counter() - started,
                                              error=type(exc).__name__))
                if cancelled:
                    self._remove_from_store(store, record, stored.id)
            return IngestResult(stored.name, CANCELLED if cancelled else FAILED_OUTCOME, reason,
                                file_id=stored.id, error=type(exc).__name__,
                                seconds=time.perf_counter() - started)
        except BaseException:  # Ctrl-C, a crash: never leave the record "processing"
            with contextlib.suppress(Exception):
                self.catalog.put_file(_record(rec, status=FAILED, reason="interrupted: the program was stopped"
                                              " while ingesting it; ingest it again",
                                              total_seconds=time.perf_counter() - started))
            raise
        _step(progress, "done", 1.0, None)
        pages = f", {_n(doc.pages, 'page')}" if doc.pages else ""
        return IngestResult(stored.name, INDEXED, f"{stored.name}: {_n(len(chunks), 'chunk')}{pages}.",
                            file_id=stored.id, chunks=len(chunks), pages=doc.pages, warnings=warnings,
                            seconds=total)

    def ingest_paths(
        self,
        store: str,
        paths: Iterable[str | os.PathLike],
        *,
        glob: str | None = None,
        template: str | None = None,
        password: str | None = None,
        on_result: Callable[[IngestResult], None] | None = None,
        cancel: threading.Event | None = None,
        names: dict[Path, str] | None = None,
        progress: Callable[[str, str, float], None] | None = None,
    ) -> list[IngestResult]:
        """Ingest files and folders (a folder: the files matching ``glob``, default ``**/*``, sorted).
        Each file is reported; the batch never aborts for a bad file. Files are named by
        :func:`file_names` (or ``names``), so two files of the batch never share a name.
        ``progress(file name, stage, fraction)`` follows each file (see :data:`Progress`)."""
        results = []
        found = expand_paths(paths, glob)
        names = names if names is not None else file_names(found)
        for path in found:
            if cancel is not None and cancel.is_set():
                break
            if isinstance(path, str):  # a path that does not exist
                r = IngestResult(Path(path).name or path, FAILED_OUTCOME, f"{path}: no such file or folder.",
                                 error="FileNotFoundError")
            else:
                name = names.get(path) or path.name
                r = self.ingest_file(store, path, name, template=template, password=password, cancel=cancel,
                                     progress=(lambda stage, f, n=name: progress(n, stage, f)) if progress else None)
            results.append(r)
            if on_result:
                on_result(r)
        return results

    # -- files in a store -----------------------------------------------------------------------
    def store_files(self, store: str) -> list[FileRecord]:
        self.get_store(store)
        return self.catalog.files(store)

    def delete_file(self, store: str, file_id: str, *, keep_file: bool = False) -> int:
        """Remove a file from a store: every chunk and its record. The stored bytes go too unless
        another store uses them or ``keep_file``. Returns the number of chunks removed."""
        record = self.get_store(store)
        with self._store_lock(store):
            removed = self._remove_from_store(store, record, file_id, keep_file=keep_file)
        return removed

    def file_attributes(self, store: str, file_id: str) -> dict[str, Any]:
        """The attributes of a file in ``store`` (:mod:`knowledge.attributes`), read from its first
        chunk; ``{}`` for a file without chunks. Raises ``StoreNotFound``."""
        from knowledge.attributes import from_payload

        vs = self.vector_store(store)
        if not vs.exists():
            return {}
        first = next(iter(vs.collection.scroll(where={"file_id": file_id}, limit=1)), None)
        return from_payload(first.payload) if first is not None else {}

    def set_file_attributes(self, store: str, file_id: str, attributes: dict[str, Any]) -> int:
        """Replace the attributes of every chunk of ``file_id`` in ``store`` (its ``attr_*`` payload
        fields) in one atomic ``replace``; nothing is re-embedded. Returns the number of chunks.

        Raises:
            StoreNotFound. InvalidArgument: bad attributes (:func:`knowledge.attributes.check_attributes`).
            FileNotFoundInStore: the store has no indexed file ``file_id``.
        """
        from knowledge.attributes import PREFIX, check_attributes, to_payload
        from knowledge.errors import FileNotFoundInStore

        attrs = to_payload(check_attributes(attributes))
        record = self.get_store(store)
        rec = self.catalog.get_file(store, file_id)
        if rec is None or rec.status != DONE:
            raise FileNotFoundInStore(f"Store {store!r} has no indexed file with the id {file_id!r}.")
        coll = self.backend(record.backend).collection(record.collection)
        with self._store_lock(store):
            points = list(coll.scroll(where={"file_id": file_id}, with_vectors=True)) if coll.collection_exists() else []
            for p in points:
                p.payload = {**{k: v for k, v in p.payload.items() if not k.startswith(PREFIX)}, **attrs}
            if points:
                coll.replace({"file_id": file_id}, points)
            self.catalog.put_file(rec)  # a newer record: the BM25 index takes the new payloads
        return len(points)

    def _remove_from_store(self, store: str, record: StoreRecord, file_id: str, keep_file: bool = False) -> int:
        coll = self.backend(record.backend).collection(record.collection)
        removed = coll.remove(where={"file_id": file_id}) if coll.collection_exists() else 0
        self.catalog.delete_file(store, file_id)
        if not keep_file:
            self._forget_file_if_unused(file_id)
        return removed

    def _forget_file_if_unused(self, file_id: str) -> None:
        if not self.catalog.stores_using_file(file_id):
            self.files.delete(file_id)

    def _discard(self, file_id: str) -> None:
        if not self.catalog.stores_using_file(file_id):
            self.files.delete(file_id)

    def retry_file(self, store: str, file_id: str, *, password: str | None = None,
                   progress: Progress | None = None, cancel: threading.Event | None = None) -> IngestResult:
        """Ingest a file of ``store`` again from its stored bytes -- typically one that failed, with the
        ``password`` it asked for. The old record is replaced by the new outcome (never both kept).

        Raises:
            StoreNotFound. FileNotFoundInStore: the store has no such file, or its bytes are gone.
        """
        from knowledge.errors import FileNotFoundInStore

        self.get_store(store)
        old = self.catalog.get_file(store, file_id)
        if old is None:
            raise FileNotFoundInStore(f"Store {store!r} has no file with the id {file_id!r}.")
        stored = self.files.get(file_id)
        with self.files.content(file_id) as fh:
            result = self.ingest_file(store, fh, old.file_name, content_type=stored.content_type,
                                      password=password, progress=progress, cancel=cancel)
        if result.file_id != file_id and self.catalog.get_file(store, file_id) is not None:
            self.delete_file(store, file_id)  # failed again, or unchanged elsewhere: one record, not two
        return result

    # -- the file store ---------------------------------------------------------------------------
    def list_files(self) -> list[StoredFileUsage]:
        """Every file in the file store, newest first, with the stores that use it."""
        files = sorted(self.files.list(), key=lambda f: (f.created, f.id), reverse=True)
        out = []
        for f in files:
            statuses = self.catalog.file_statuses(f.id)
            out.append(StoredFileUsage(f, list(statuses), statuses))
        return out

    def delete_stored_file(self, file_id: str, *, from_stores: bool = False) -> list[str]:
        """Delete a file from the file store. Returns the stores it was removed from.

        With ``from_stores`` the file's chunks and records go from every store that uses it first,
        then its bytes. Without it a file that stores still use is refused (their chunks cite it), so
        nothing changes.

        Raises:
            FileNotFoundInStore: no stored file has that id.
            InvalidArgument: stores use the file and ``from_stores`` is false.
        """
        stored = self.files.get(file_id)
        stores = self.catalog.stores_using_file(file_id)
        if stores and not from_stores:
            raise InvalidArgument(
                f"{stored.name} is used by the store(s) {', '.join(stores)}; it was kept. Remove it from"
                " those stores too, or delete it from each store first."
            )
        for store in stores:
            self.delete_file(store, file_id, keep_file=True)
        self.files.delete(file_id)
        return stores

    # -- templates --------------------------------------------------------------------------------
    def stores_using_template(self, name: str, *, internal: bool = True) -> list[str]:
        """The stores made from template ``name``; without ``internal``, the user's stores only (not
        the chats' attachment stores)."""
        hidden = set() if internal else self.catalog.internal_stores()
        return [r.name for r in self.catalog.list_stores() if r.template == name and r.name not in hidden]

    def save_template(self, template: VectorStoreTemplate) -> VectorStoreTemplate:
        """Create or update a template. A template that stores use keeps its backend, embedding model
        and distance (their vectors depend on them): re-embed the stores to a new template instead.

        Raises:
            InvalidArgument: the built-in name, or such a change to a template in use.
        """
        users = self.stores_using_template(template.name)
        if users and template.name in self.catalog.list_templates():
            old = self.templates.get(template.name)
            changed = [f for f in ("backend", "embedding_model", "distance")
                       if getattr(old, f) != getattr(template, f)]
            if changed:
                raise InvalidArgument(
                    f"Template {template.name!r} is used by {', '.join(users)}; its {', '.join(changed)}"
                    " cannot change. Save a new template and re-embed those stores to it."
                )
        return self.templates.save(template)

    def delete_template(self, name: str) -> None:
        """Delete a template that no store uses (raises ``InvalidArgument`` otherwise)."""
        self.templates.delete(name, in_use_by=self.stores_using_template(name))

    # -- search ---------------------------------------------------------------------------------
    def search(self, store: str, query: str, k: int = 5, *, where: dict | None = None,
               score_threshold: float | None = None, max_per_file: int | None = None,
               mode: SearchMode | None = None) -> list[Hit]:
        """The ``k`` best chunks for ``query`` (text), best first, never two with identical text.

        ``mode`` (default: setting ``search.mode``, ``"hybrid"``): ``"vector"`` ranks by the
        embedding's score alone; ``"lexical"`` by BM25; ``"hybrid"`` merges the best
        ``max(search.candidates, k)`` of both rankings by reciprocal rank fusion (see
        :mod:`knowledge.lexical`), so exact words (``panic!``, a name, an error code) count as much as
        meaning. In every mode ``Hit.score`` is the vector score -- cosine similarity in [-1, 1],
        higher is better, for the default distance -- and ``score_threshold`` applies to it;
        hybrid hits also carry ``lexical_score`` and ``fused_score`` (the order).

        ``where`` filters on payload fields by equality before ranking. ``max_per_file`` keeps at
        most that many chunks of any one file (``1``: the ``k`` best files, each by its best chunk).

        Raises:
            StoreNotFound; InvalidArgument (blank query, ``k`` or ``max_per_file`` below 1, unknown
            mode); EmbeddingUnavailable; DimensionMismatch.
        """
        record = self.get_store(store)
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("Type a query to search for.")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
        if max_per_file is not None and max_per_file < 1:
            raise InvalidArgument(f"max_per_file must be at least 1, got {max_per_file}.")
        vector = self.embedder(record.embedding_model).embed_query(query)
        vs = self._vs(record)
        distance = vs.info().distance if vs.exists() else record.distance
        fetch = k if max_per_file is None else k * 4
        while True:
            found, exhausted = self.rank(store, query, vector, fetch, where=where, mode=mode, _record=record)
            found = [h for h in found if passes_threshold(h.score, score_threshold, distance)]
            hits = distinct_hits(found, k, max_per_file)
            if len(hits) >= k or exhausted:
                return hits
            fetch *= 2

    def search_stores(self, stores: Sequence[str], query: str, k: int = 5, *, where: dict | None = None,
                      mode: SearchMode | None = None) -> MultiSearch:
        """Search several stores as one: each store's own :meth:`search` (``k`` hits, the hybrid
        ranking by default), merged by reciprocal rank fusion of the ranks (k = 60, as in
        :mod:`knowledge.lexical`; Cormack, Clarke & Buettcher, SIGIR 2009), so scores of stores with
        other models or distances never need to be compared. Ties keep the order of ``stores``. A
        store that cannot be searched (deleted, its backend down) is reported in ``failed`` and the
        others are used. ``k`` best merged hits, never two with identical text.

        ``where`` filters every store's search by payload equality (e.g. ``{"file_id": ...}``).

        Raises:
            InvalidArgument: a blank query or ``k`` below 1 (before any store is searched).
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("Type a query to search for.")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
        rankings: list[list[StoreHit]] = []
        failed: dict[str, str] = {}
        for store in dict.fromkeys(stores):
            try:
                found = self.search(store, query, k=k, where=where, mode=mode)
            except KnowledgeError as exc:
                log.warning("search of store %s failed: %s", store, exc)
                failed[store] = str(exc)
                continue
            rankings.append([StoreHit(store, h, 0.0) for h in found])
        fused = reciprocal_rank_fusion(*[[(sh.store, sh.hit.id) for sh in r] for r in rankings])
        merged = [replace(sh, fused=fused[(sh.store, sh.hit.id)]) for r in rankings for sh in r]
        order = {id(sh): i for i, sh in enumerate(merged)}
        merged.sort(key=lambda sh: (-sh.fused, order[id(sh)]))
        out, seen = [], set()
        for sh in merged:
            if sh.hit.text in seen:
                continue
            seen.add(sh.hit.text)
            out.append(sh)
        return MultiSearch(out[:k], failed)

    def rank(self, store: str, query: str, vector: Any, fetch: int, *, where: dict | None = None,
             mode: SearchMode | None = None, _record: StoreRecord | None = None) -> tuple[list[Hit], bool]:
        """The ranking behind :meth:`search` before duplicates, thresholds and per-file limits:
        ``(hits best first, exhausted)``; ``exhausted`` is true when asking for more than ``fetch``
        cannot bring more hits. ``vector`` is the query's embedding, ``(d,)`` float32."""
        mode = mode or self.settings.search.mode
        if mode not in SEARCH_MODES:
            raise InvalidArgument(f"Unknown search mode {mode!r}; use one of {', '.join(SEARCH_MODES)}.")
        record = _record or self.get_store(store)
        vs = self._vs(record)
        if not vs.exists():
            return [], True
        distance = vs.info().distance
        if mode == "vector":
            found = vs.search(vector, k=fetch, where=where)
            return found, len(found) < fetch
        pool = max(fetch, self.settings.search.candidates)
        lexical = self._lexical_search(store, record, vs, query, pool, where)
        if mode == "lexical":
            hits = self._with_vector_scores(vs, distance, vector, {}, lexical)
            by_id = {h.id: h for h in hits}
            ranked = [replace(by_id[h.id], lexical_score=h.score) for h in lexical[:fetch] if h.id in by_id]
            return ranked, len(lexical) < fetch
        dense = vs.search(vector, k=pool, where=where)
        w = self.settings.search.fusion_weight  # 0.5: both rankings weigh 1, plain RRF
        fused = reciprocal_rank_fusion([h.id for h in dense], [h.id for h in lexical], weights=(2 * w, 2 * (1 - w)))
        hits = self._with_vector_scores(vs, distance, vector, {h.id: h for h in dense}, lexical)
        lex_scores = {h.id: h.score for h in lexical}
        sign = -1.0 if higher_is_better(distance) else 1.0
        order = sorted(hits, key=lambda h: (-fused[h.id], sign * h.score))
        ranked = [replace(h, lexical_score=lex_scores.get(h.id), fused_score=fused[h.id]) for h in order[:fetch]]
        return ranked, len(dense) < pool and len(lexical) < pool and len(hits) <= fetch

    def _with_vector_scores(self, vs: VectorStore, distance: str, vector: Any, dense: dict[Any, Hit],
                            lexical: Sequence[LexicalHit]) -> list[Hit]:
        """``dense`` hits plus the lexical ones missing from them, each with its vector score."""
        missing = [h.id for h in lexical if h.id not in dense]
        out = dict(dense)
        if missing:
            points = vs.collection.retrieve(missing, with_vectors=True)
            if points:
                scores = vector_scores(distance, vector, np.stack([p.vector for p in points]))
                for p, sc in zip(points, scores):
                    out[p.id] = hit_from_payload(p.id, float(sc), p.payload or {})
        return list(out.values())

    def _lexical_search(self, store: str, record: StoreRecord, vs: VectorStore, query: str, limit: int,
                        where: dict | None) -> list[LexicalHit]:
        """BM25 hits from the backend's own index (kept in the same write as the vectors: memory,
        pgvector), else from the in-process :meth:`lexical_index` (other backends)."""
        native = vs.collection.lexical_search(query, limit, where=where)
        if native is not None:
            return [LexicalHit(p.id, p.score, p.payload or {}) for p in native]
        return self.lexical_index(store, _record=record).search(query, limit, where=where)

    def lexical_index(self, store: str, *, _record: StoreRecord | None = None) -> LexicalIndex:
        """The in-process BM25 index of ``store``'s chunks, for backends that keep no lexical index
        of their own (:meth:`~knowledge.vectorstore.base.Collection.lexical_search` returns ``None``:
        qdrant, plugins), brought up to date first: a file added, changed or removed since the
        last call has its segment built or dropped (the others are reused). It lives in this
        process only and is built from the store's chunks on first use."""
        record = _record or self.get_store(store)
        vs = self._vs(record)
        with self._lock:
            held = self._lexical.get(store)
            if held is None or held[0] != record.collection:
                held = (record.collection, LexicalIndex(), threading.Lock())
                self._lexical[store] = held
        _, index, lock = held
        with lock:
            if not vs.exists():
                index.refresh({}, lambda f: ())
                index.signature = None
                return index
            signature = (self.catalog.files_signature(store), vs.count())
            if index.signature == signature:
                return index
            updated = {f.file_id: str(f.updated) for f in self.catalog.files(store)}
            versions = {str(fid): (n, updated.get(str(fid))) for fid, n in vs.collection.facet("file_id").items()}
            index.refresh(versions, lambda fid: vs.collection.scroll(where={"file_id": fid}))
            index.signature = signature
        return index

    # -- re-embedding ---------------------------------------------------------------------------
    def reembed(self, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
        """Move ``store`` to ``template`` (another model, backend or distance) from its stored text.

        The chunks are re-embedded from the text kept in their payloads -- no file is read again --
        into a new collection; the catalog switches the store to it in one step once it is
        complete, and only then is the old collection dropped. A failure leaves the store as it was.
        """
        record = self.get_store(store)
        tpl = self.templates.get(template)
        embedder = self.embedder(tpl.embedding_model)
        old = self.backend(record.backend).collection(record.collection)
        new_name = _next_collection_name(store, record.collection)
        target = self.backend(tpl.backend).collection(new_name)
        target.drop_collection()
        with self._store_lock(store):
            by_file: dict[str, list[Any]] = {}
            if old.collection_exists():
                for p in old.scroll():
                    by_file.setdefault(p.payload["file_id"], []).append(p)
            vs = VectorStore(target, distance=tpl.distance)
            try:
                target.ensure_collection(embedder.dimension, tpl.distance)
                for i, (file_id, points) in enumerate(sorted(by_file.items())):
                    points.sort(key=lambda p: p.payload.get("chunk_index", 0))
                    vectors = embedder.embed_documents(
                        [embedding_text(p.payload["text"], p.payload.get("heading")) for p in points])
                    chunks = [Chunk(p.payload["text"], vectors[j], p.payload.get("chunk_index"),
                                    p.payload.get("page"), p.payload.get("char_start"),
                                    p.payload.get("char_end"), p.payload.get("heading"),
                                    metadata={k: v for k, v in p.payload.items() if k not in RESERVED_FIELDS})
                              for j, p in enumerate(points)]
                    vs.upsert(file_id, chunks, file_name=points[0].payload.get("file_name"))
                    if progress:
                        progress("embedding", (i + 1) / max(1, len(by_file)))
            except BaseException:
                target.drop_collection()
                raise
            updated = self.catalog.put_store(store, tpl.name, tpl.backend, tpl.embedding_model,
                                             embedder.dimension, tpl.distance, collection=new_name)
            old.drop_collection()
            return updated


def _next_collection_name(store: str, current: str) -> str:
    """``store``, ``store~2``, ``store~3``, ...: the collection a re-embedded store moves to."""
    base, _, n = current.rpartition("~")
    version = int(n) + 1 if base == store and n.isdigit() else 2
    return f"{store}~{version}"


def glob_pattern(glob: str) -> re.Pattern[str]:
    """``glob`` (as :meth:`pathlib.Path.glob` reads it: ``*`` and ``?`` within a name, ``[...]``,
    ``**`` for any number of folders) as a regular expression for a ``/``-separated relative path,
    matching names case-insensitively: ``**/*.pdf`` takes ``REPORT.PDF`` too. A pattern without a
    ``/`` matches names at the top of the folder only, as ``Path.glob`` does."""
    out, i, n = [], 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
            continue
        if glob.startswith("**", i) and i + 2 == n:
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = glob.find("]", i + 2 if glob.startswith("[!", i) or glob.startswith("[]", i) else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = glob[i + 1:j]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.IGNORECASE)


def expand_paths(paths: Iterable[str | os.PathLike], glob: str | None = None,
                 skipped: dict[str, int] | None = None) -> list[Path | str]:
    """Files to ingest: each file as given, each folder's files matching ``glob`` (default ``**/*``;
    extensions and names match case-insensitively, see :func:`glob_pattern`), sorted, hidden files
    skipped; a path that does not exist is returned as a ``str``. ``skipped``, when given, counts
    the files of the folders that were left out, by reason (``"hidden"``, ``"not matching
    '<glob>'"``, ``"not a regular file"``): see :func:`skipped_text`."""
    out: list[Path | str] = []
    seen: set[Path] = set()
    pattern = glob_pattern(glob or "**/*")
    counts: dict[str, int] = skipped if skipped is not None else {}
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                rel = f.relative_to(p)
                if f.is_dir():
                    continue
                if any(part.startswith(".") for part in rel.parts):
                    reason = "hidden"
                elif not pattern.fullmatch(rel.as_posix()):
                    reason = f"not matching {glob or '**/*'!r}"
                elif not f.is_file():
                    reason = "not a regular file"
                else:
                    if f not in seen:
                        seen.add(f)
                        out.append(f)
                    continue
                counts[reason] = counts.get(reason, 0) + 1
        elif p.is_file():
            if p not in seen:
                seen.add(p)
                out.append(p)
        else:
            out.append(str(raw))
    return out


def skipped_text(skipped: dict[str, int]) -> str | None:
    """``"Skipped 14 files in the folders: 12 not matching '**/*.pdf', 2 hidden."`` or ``None``."""
    total = sum(skipped.values())
    if not total:
        return None
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1]))
    return f"Skipped {_n(total, 'file')} in the folders: {parts}."


def normalize_name(name: str) -> str:
    """A file name in Unicode NFC, as names are stored and compared: a name macOS wrote decomposed
    (NFD: "e" + combining acute) and the same name typed (NFC: "é") are one name."""
    return unicodedata.normalize("NFC", name)


def file_names(paths: Iterable[Path | str]) -> dict[Path, str]:
    """The name each file of a batch is stored under: its own name, or -- when several files of the
    batch share it (``README.md`` in every folder) -- its path from the nearest folder they share
    (``docx/LICENSE-MIT``, ``md/rust-book/LICENSE-MIT``), so no file of a batch replaces another."""
    files = [p for p in paths if isinstance(p, Path)]
    by_name: dict[str, list[Path]] = {}
    for p in files:
        by_name.setdefault(p.name, []).append(p)
    names = {p: p.name for p in files}
    for same in by_name.values():
        if len(same) > 1:
            root = Path(os.path.commonpath([str(p.resolve().parent) for p in same]))
            for p in same:
                names[p] = p.resolve().relative_to(root).as_posix()
    return names


def _step(progress: Progress | None, stage: str, fraction: float, cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("Ingestion cancelled.")
    if progress is not None:
        progress(stage, fraction)


def _embed(embedder: Embedder, texts: Sequence[str], progress: Progress | None,
           cancel: threading.Event | None, start: float = 0.1) -> Any:
    import numpy as np

    if not texts:
        return np.zeros((0, embedder.dimension), np.float32)
    batch = 64
    parts = []
    for i in range(0, len(texts), batch):
        _step(progress, "embedding", start + (0.95 - start) * i / len(texts), cancel)
        parts.append(embedder.embed_documents(texts[i:i + batch]))
    return np.vstack(parts)


def distinct_hits(found: Iterable[Hit], k: int, max_per_file: int | None = None) -> list[Hit]:
    """The first ``k`` of ``found`` (best first) skipping a hit whose text (whitespace and case
    aside) came earlier, and, with ``max_per_file``, a file's hits beyond that many."""
    hits: list[Hit] = []
    seen: set[str] = set()
    per_file: dict[str, int] = {}
    for h in found:
        key = " ".join(h.text.split()).lower()
        if key in seen or (max_per_file is not None and per_file.get(h.file_id, 0) >= max_per_file):
            continue
        seen.add(key)
        per_file[h.file_id] = per_file.get(h.file_id, 0) + 1
        hits.append(h)
        if len(hits) == k:
            break
    return hits


def _n(count: int, noun: str) -> str:
    """``"1 chunk"``, ``"3 chunks"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _record(rec: FileRecord, **changes: Any) -> FileRecord:
    from dataclasses import replace

    return replace(rec, **changes)


def _replace(result: IngestResult, **changes: Any) -> IngestResult:
    from dataclasses import replace

    return replace(result, **changes)


__all__ = ["Cancelled", "EmbeddingUnavailable", "IngestResult", "ModelMismatch", "StoreSummary", "StoredFileUsage",
           "Workbench", "expand_paths", "file_names"]
