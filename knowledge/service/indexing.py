"""Indexing: the only code that writes chunks into stores.

``Indexer`` reads a file, cuts it into chunks within the model's window, embeds them and replaces the
file's chunks in its store in one atomic step, recording every outcome in the catalog (status, reason,
chunks, pages, warnings, timings). The rules it owns:

* the same file again is a no-op with a notice; a changed file under the same name replaces its
  chunks (the new ones written first, so the file is never missing);
* a store records each distinct content once, with any number of names
  (:class:`~knowledge.catalog.FileName`, per origin: by hand or a synced folder); identical bytes
  under a second name are ``Outcome.DUPLICATE``, and the content leaves with its last name
  (:meth:`Indexer.delete_name`);
* a bad file is reported with its reason and the batch goes on; nothing is half-written; one failed
  record per name, retried from its stored bytes by :meth:`Indexer.retry_file`.

The rules in full: ``docs/ingestion.md``.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import io
import logging
import mimetypes
import os
import re
import threading
import time
import unicodedata
import urllib.parse
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from knowledge._names import check_name
from knowledge.attributes import PREFIX, check_attributes, from_payload, to_payload
from knowledge.catalog import DONE, FAILED, PENDING, PROCESSING, FileRecord, StoreRecord
from knowledge.config import Settings
from knowledge.embeddings.base import Embedder
from knowledge.errors import (
    FileNotFoundInStore,
    InvalidArgument,
    KnowledgeError,
    StorageError,
    StoreExists,
    unexpected_problem,
)
from knowledge.filestore.base import StoredFile, clean_name
from knowledge.ingest.chunker import TextChunk, chunk_document, embedding_text
from knowledge.ingest.document import Document, Section
from knowledge.ingest.isolated import Chunking, ReadLimits, read_bounded
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.stores import Stores
from knowledge.service.templates import VectorStoreTemplate
from knowledge.service.transient import classify
from knowledge.telemetry import EMBEDDED_TEXTS, EMBEDDING_SECONDS, STAGE_SECONDS, span
from knowledge.vectorstore.store import EVERYONE, Chunk

log = logging.getLogger(__name__)

Progress = Callable[[str, float], None]
"""``progress(stage, fraction)``: stage is "reading", "OCR, page 3 of 10" (the page being read, for
scans and images), "chunking", "embedding" or "writing"; fraction in [0, 1] of the current file (OCR,
when a file needs it, takes its first 85 %)."""

#: The share of a file's progress that OCR takes when a file needs it (it dominates the time).
OCR_SHARE = 0.85
#: Seconds a file waits for the same bytes being added to its store as another file (by another job,
#: maybe in another process) before it is indexed anyway: that record's process may have died.
SAME_BYTES_WAIT = 600.0
#: Seconds between two looks at that other file while waiting.
SAME_BYTES_POLL = 0.25


class Cancelled(KnowledgeError):
    """The caller cancelled an ingestion; the store is as it was before."""


class Indexer:
    """Writes chunks: ingestion, retries, attribute edits, removal and re-embedding.

    Args:
        stores: the stores (records, backends, locks).
        embedder: ``embedder(model_name) -> Embedder`` (the workbench's, so a replaced one is used).

    Thread-safe: writes to one store are serialised by its lock; reading, chunking and embedding
    run outside it.
    """

    def __init__(self, stores: Stores, embedder: Callable[[str], Embedder]) -> None:
        self.stores = stores
        self.settings: Settings = stores.settings
        self.catalog = stores.catalog
        self.files = stores.files
        self._embedder = embedder

    # -- ingestion ------------------------------------------------------------------------------
    def ingest_file(
        self,
        store: str,
        source: str | os.PathLike | bytes | BinaryIO | StoredFile,
        name: str | None = None,
        *,
        template: str | None = None,
        password: str | None = None,
        content_type: str | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        attributes: dict[str, Any] | None = None,
        folder: str = "",
        stat: tuple[int, int] | None = None,
        raise_transient: bool = False,
        wait_out: Callable[[BaseException], bool] | None = None,
        readers: Sequence[str] | None = None,
        protected: Collection[str] = (),
    ) -> IngestResult:
        """Ingest one file into ``store`` (created on the fly from ``template``). Never raises for a
        bad file: the result says what happened. Raises only for a bad store or template
        (``InvalidArgument``, ``TemplateNotFound``, ``ModelMismatch``, ``EmbeddingUnavailable``,
        ``BackendUnavailable``).

        ``source`` may also be a :class:`~knowledge.filestore.base.StoredFile` already in the file
        store (the OpenAI-compatible API's uploads): its bytes are used as they are, under its id,
        and never deleted here. ``attributes`` (see :mod:`knowledge.attributes`) are stored with
        every chunk as ``attr_<key>`` payload fields; they win over a document's own (front matter).

        ``folder`` is the name's origin (``""``: by hand; a synced folder's path for
        :mod:`knowledge.sync`): a changed file replaces only the content that carries ``name`` from
        the same origin. ``stat`` ``(size in bytes, mtime in ns)`` is recorded on the name (sync's
        quick change check). Identical bytes already in the store under another name get ``name``
        as one more name (``Outcome.DUPLICATE``, nothing embedded; see the module docstring).

        ``raise_transient`` (an ingestion worker, issue 39): an error of the infrastructure
        (:func:`knowledge.service.transient.classify`: the catalog, file store or vector backend
        unreachable, a full disk, no memory, no model) is raised instead of failing the file, and
        the file's record, when one was made, stays ``pending`` with "waiting: <why>" as its reason;
        the worker queues the job again. Without it such an error fails the file as before.
        ``wait_out(exc)``: called when the final write of a file read and embedded fails because a
        shared service (the catalog, the vector backend) cannot be reached; it waits (the worker:
        until the database answers and the job is still its own) and returns whether to try the
        write again (``False``: the error is raised as above).

        ``readers`` (principals, checked by the caller: :func:`knowledge.people.policy.check_readers`)
        restricts who may read the new content before any chunk of it is written; without it a new
        version of a name (same name, other bytes) keeps the readers of the version it replaces, and
        a new name inherits the store's sharing. Bytes the store holds already keep their readers.
        ``protected``: ids of contents this ingestion may not replace by name (the files the person
        ingesting may not read): a file of the same name is added beside such a content, which keeps
        its name, chunks and readers."""
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

        try:
            name = normalize_name(clean_name(name))  # the name as the file store keeps it (no control characters)
            check_name(name, "file name")  # and no bidirectional control or line separator (knowledge._names)
        except KnowledgeError as exc:
            return IngestResult(
                name, Outcome.FAILED, str(exc), error=type(exc).__name__, seconds=time.perf_counter() - started
            )
        record, tpl = self.stores.open_for_write(store, template)
        if readers is not None:  # every chunk of the store carries its readers before this file's first
            self.filter_readers(store)
        embedder = self._embedder(tpl.embedding_model)
        lock = self.stores.store_lock(store)
        stored: Any = kept
        waited: float | None = None  # since when this waits for the same bytes being added as another file
        while True:
            holder: FileRecord | None = None
            with lock:  # held for the quick decisions and the final write, never while embedding
                if stored is None:
                    try:
                        stored = self._save(source, path, name, content_type)
                    except KnowledgeError as exc:
                        if raise_transient and classify(exc) is not None:
                            raise
                        return IngestResult(
                            name, Outcome.FAILED, str(exc), error=type(exc).__name__, seconds=time.perf_counter() - started
                        )
                # one process decides at a time whether these bytes are new to the store (issue 39)
                with self.catalog.content_lock(store, stored.sha256):
                    same_bytes = [f for f in self.catalog.files(store, sha256=stored.sha256) if f.file_id != stored.id]
                    busy = [f for f in same_bytes if f.status == PROCESSING]
                    if busy and (waited is None or time.monotonic() - waited < SAME_BYTES_WAIT):
                        holder = busy[0]  # being added now (by another job, maybe another process): wait for it
                    else:
                        decided = self._decide(
                            store, record, stored, kept, name, folder, stat, started, same_bytes, protected, readers
                        )
                        if isinstance(decided, IngestResult):
                            if readers is not None:  # said, not applied: the content has its own
                                decided = replace(
                                    decided,
                                    message=decided.message + " The readers given were not applied: these bytes"
                                    " are in the store already, with the readers of the file they are (set those on it).",
                                )
                            return decided
                        rec, same_name = decided
            if holder is None:
                break
            if waited is None:
                waited = time.monotonic()
                log.info("%s: the same bytes are being added to %s as %s; waiting for it", name, store, holder.file_name)
            try:
                _step(progress, f"waiting: the same bytes are being added as {holder.file_name}", 0.0, cancel)
            except Cancelled:
                if kept is None:
                    self.stores.forget_file_if_unused(stored.id)
                return IngestResult(
                    name,
                    Outcome.CANCELLED,
                    "cancelled",
                    file_id=stored.id,
                    error="Cancelled",
                    seconds=time.perf_counter() - started,
                )
            time.sleep(SAME_BYTES_POLL)
        result = self._index(
            store,
            record,
            tpl,
            embedder,
            stored,
            rec,
            password,
            progress,
            cancel,
            started,
            lock,
            attributes,
            raise_transient=raise_transient,
            wait_out=wait_out,
            keep_file=kept is not None,
        )
        with lock:
            if result.outcome == Outcome.INDEXED:
                for old in same_name:  # a changed file under the same name: the new version replaces it
                    self._drop_name(store, record, old.file_id, name, folder)
                replaced = [f for f in same_name if f.status == DONE]  # not an earlier failed attempt
                if replaced:
                    result = replace(
                        result,
                        replaced_file_id=replaced[0].file_id,
                        message=result.message + f" Replaced the previous version of {name}.",
                    )
            elif result.outcome == Outcome.FAILED:  # the new failure supersedes earlier ones of that name
                for old in same_name:
                    if old.status == FAILED:
                        self._drop_name(store, record, old.file_id, name, folder)
        return result

    def _decide(
        self,
        store: str,
        record: StoreRecord,
        stored: Any,
        kept: StoredFile | None,
        name: str,
        folder: str,
        stat: tuple[int, int] | None,
        started: float,
        same_bytes: list[FileRecord],
        protected: Collection[str] = (),
        readers: Sequence[str] | None = None,
    ) -> IngestResult | tuple[FileRecord, list]:
        """Under the store's lock and the content's lock (:meth:`Catalog.content_lock`): the result of
        ``stored`` when its bytes are in the store already (under this name: ``UNCHANGED``, another:
        ``DUPLICATE``), else its new ``processing`` record and the records of its name's earlier contents.
        ``same_bytes``: the store's other records of ``stored``'s SHA-256, read under the content's lock."""
        named = {n.file_id for n in self.catalog.names(store, name=name, folder=folder)} - {stored.id} - set(protected)
        same_name = [f for f in (self.catalog.get_file(store, i) for i in sorted(named)) if f is not None]
        unchanged = [f for f in same_name if f.sha256 == stored.sha256 and f.status == DONE]
        own = self.catalog.get_file(store, stored.id)
        if (
            (unchanged or any(f.status == DONE for f in same_bytes))
            and own is not None
            and own.status in (PROCESSING, PENDING)
        ):
            self.catalog.delete_file(store, stored.id)  # an attempt of this file that was killed: it joins the content
        if unchanged:
            if kept is None:
                self.stores.forget_file_if_unused(stored.id)
            old = unchanged[0]
            if stat is not None:
                self.catalog.add_name(store, old.file_id, name, folder, *stat)
            return IngestResult(
                name,
                Outcome.UNCHANGED,
                f"{name} is already in {store!r}, unchanged ({_n(old.chunks, 'chunk')}); nothing to do.",
                file_id=old.file_id,
                chunks=old.chunks,
                pages=old.pages,
                seconds=time.perf_counter() - started,
            )
        dup = [f for f in same_bytes if f.status == DONE]
        if dup:
            if kept is None:
                self.stores.forget_file_if_unused(stored.id)
                content = dup[0]
                self.catalog.add_name(store, content.file_id, name, folder, *(stat or (None, None)))
                for old in same_name:  # the name now means these bytes: off its earlier content
                    self._drop_name(store, record, old.file_id, name, folder)
                self.stores.changed(store)
                return IngestResult(
                    name,
                    Outcome.DUPLICATE,
                    f"{name} has the same bytes as"
                    f" {_called(content)}, already in {store!r}: recorded as one more name"
                    f" of it, not indexed twice ({_n(content.chunks, 'chunk')}).",
                    file_id=content.file_id,
                    chunks=content.chunks,
                    pages=content.pages,
                    seconds=time.perf_counter() - started,
                )
            return IngestResult(
                name,
                Outcome.DUPLICATE,
                f"{name} has the same bytes as {_called(dup[0])}, already in {store!r}; not indexed twice.",
                file_id=dup[0].file_id,
                chunks=dup[0].chunks,
                pages=dup[0].pages,
                seconds=time.perf_counter() - started,
            )
        # its readers: those given, else those of the version of its name it replaces (a restricted
        # one: the store filters already); written with the record, before anyone can list it
        chosen = tuple(readers) if readers is not None else next((f.readers for f in same_name if f.readers), None)
        rec = FileRecord(store, stored.id, name, stored.sha256, stored.size, PROCESSING, None, 0, None, readers=chosen)
        self.catalog.put_file(rec, folder=folder, readers=chosen)
        if stat is not None:
            self.catalog.add_name(store, stored.id, name, folder, *stat)
        return rec, same_name

    def _save(self, source: Any, path: Path | None, name: str, content_type: str | None):
        ctype = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        limit = self.settings.ingest.max_file_bytes
        if path is not None:
            try:
                fh = path.open("rb")
            except OSError as exc:
                raise InvalidArgument(f"{path} cannot be read: {exc.strerror or exc}") from exc
            with fh:
                return self._save_stream(name, ctype, _ReadErrors(fh, path), limit)
        stream = io.BytesIO(source) if isinstance(source, (bytes, bytearray, memoryview)) else source
        return self._save_stream(name, ctype, stream, limit)

    def _save_stream(self, name: str, ctype: str, stream: Any, limit: int | None):
        """Save to the file store; a write the disk refuses says why (a full disk: "No space left on
        device"), never that the file cannot be read (issue 26)."""
        try:
            return self.files.save(name, ctype, stream, max_bytes=limit)
        except _Unreadable as exc:
            raise InvalidArgument(str(exc)) from exc.__cause__
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise StorageError(
                    f"{name}: No space left on device: the disk holding the file store is full;"
                    " free some space and ingest the file again."
                ) from exc
            raise StorageError(f"{name}: the file store could not write it ({exc.strerror or exc}).") from exc

    def _index(
        self,
        store: str,
        record: StoreRecord,
        tpl: VectorStoreTemplate,
        embedder: Embedder,
        stored: Any,
        rec: FileRecord,
        password: str | None,
        progress: Progress | None,
        cancel: threading.Event | None,
        started: float,
        lock: threading.Lock,
        attributes: dict[str, Any] | None = None,
        *,
        raise_transient: bool = False,
        wait_out: Callable[[BaseException], bool] | None = None,
        keep_file: bool = False,
    ) -> IngestResult:
        """Read, chunk and embed without the store's lock; take it only to write. With
        ``raise_transient``, an infrastructure error leaves the record pending ("waiting: ...")
        and is raised (see :meth:`ingest_file`). Cancelled, the file leaves the store; its stored
        bytes are deleted only when this call saved them (not ``keep_file``: a file given as already
        stored -- a queued upload, which a worker that stops gives back to the queue -- is the caller's)."""

        def waiting(exc: BaseException) -> bool:
            """Whether ``exc`` is the infrastructure's to raise; its record then says why it waits."""
            verdict = classify(exc) if raise_transient else None
            if verdict is None:
                return False
            with contextlib.suppress(Exception), lock:  # the catalog may be what is down: the worker tries again
                now = self.catalog.get_file(rec.store, rec.file_id)
                # a worker that took the job over while this one was cut off may have finished it: its
                # record is not made to wait again (a lease that lapsed in a long outage)
                if now is None or now.status in (PROCESSING, PENDING):
                    self.catalog.put_file(
                        replace(
                            rec,
                            status=PENDING,
                            reason=verdict.waiting,
                            error=None,
                            total_seconds=time.perf_counter() - started,
                        )
                    )
            return True

        t_read = t_embed = 0.0
        ocr_pages = [0]  # pages read by OCR (issue 16): OCR then takes most of the progress bar

        def on_page(done: int, total: int) -> None:
            ocr_pages[0] = total
            _step(progress, f"OCR, page {min(done + 1, total)} of {total}", OCR_SHARE * done / max(1, total), cancel)

        try:
            _step(progress, "reading", 0.0, cancel)
            t0 = time.perf_counter()
            ingest = self.settings.ingest
            with (
                span("ingest read", file=stored.name, store=store, size=stored.size),
                self.files.content(stored.id) as fh,
            ):  # read and chunked in a bounded child (issue 38)
                try:
                    read = read_bounded(
                        fh,
                        reading_name(stored.name, stored.content_type),
                        password=password,
                        max_bytes=ingest.max_file_bytes,
                        ocr=tpl.ocr or ingest.ocr,
                        tables=ingest.pdf_tables,
                        on_page=on_page,
                        processes=ingest.reader_processes,
                        limits=ReadLimits.from_settings(ingest),
                        chunking=Chunking(embedder, tpl.max_chunk_size_tokens, tpl.chunk_overlap_tokens),
                        check=lambda: _step(None, "reading", 0.0, cancel),
                    )
                except KnowledgeError:
                    raise
                except Exception as exc:  # a library's exception a reader let through, or its bug: in words
                    if waiting(exc):
                        raise
                    log.exception("reading %s for store %s", stored.name, store)
                    reason = f"{unexpected_problem(exc)}."
                    with lock:
                        self.catalog.put_file(
                            replace(
                                rec,
                                status=FAILED,
                                reason=reason,
                                total_seconds=time.perf_counter() - started,
                                error=type(exc).__name__,
                            )
                        )
                    return IngestResult(
                        stored.name,
                        Outcome.FAILED,
                        f"{stored.name}: {reason}",
                        file_id=stored.id,
                        error=type(exc).__name__,
                        seconds=time.perf_counter() - started,
                    )
            doc, result = read.document, read.chunks
            assert result is not None
            base = OCR_SHARE if ocr_pages[0] else 0.1
            _step(progress, "chunking", base, cancel)
            t_read = time.perf_counter() - t0
            STAGE_SECONDS.labels("read").observe(max(0.0, t_read - read.chunk_seconds))
            STAGE_SECONDS.labels("chunk").observe(read.chunk_seconds)
            texts = [embedding_text(c.text, c.heading) for c in result.chunks]
            t0 = time.perf_counter()
            with span("ingest embed", file=stored.name, chunks=len(texts), model=record.embedding_model):
                vectors = _embed(embedder, texts, progress, cancel, start=base)
            t_embed = time.perf_counter() - t0
            STAGE_SECONDS.labels("embed").observe(t_embed)
            EMBEDDED_TEXTS.labels("document").inc(len(texts))
            EMBEDDING_SECONDS.labels("document").inc(t_embed)
            _step(progress, "writing", 0.95, cancel)
            front = {f"attr_{k}": v for k, v in doc.attributes.items()}  # front matter: filterable
            chunks = [_stored_chunk(c, vectors[i], front) for i, c in enumerate(result.chunks)]
            warnings = list(doc.warnings)  # the chunk plan's notes are the template's, not the file's
            if attributes:  # the caller's file attributes (knowledge.attributes), over the document's own
                chunks = [replace(c, metadata={**c.metadata, **to_payload(attributes)}) for c in chunks]
            done_rec = replace(
                rec,
                status=DONE,
                chunks=len(chunks),
                pages=doc.pages,
                warnings=warnings,
                read_seconds=t_read,
                embed_seconds=t_embed,
            )
            t0 = time.perf_counter()
            with span("ingest write", file=stored.name, chunks=len(chunks), backend=record.backend):
                while True:  # the file's work is done: a database away for a while is waited out, not the work redone
                    try:
                        total = self._write(record, done_rec, chunks, embedder.dimension, started)
                        break
                    except Exception as exc:
                        verdict = classify(exc) if wait_out is not None else None
                        if verdict is None or verdict.own or wait_out is None or not wait_out(exc):
                            raise
            STAGE_SECONDS.labels("write").observe(time.perf_counter() - t0)
        except KnowledgeError as exc:
            if waiting(exc):
                raise
            cancelled = isinstance(exc, Cancelled)
            reason = "cancelled" if cancelled else str(exc)
            with lock:
                self.catalog.put_file(
                    replace(
                        rec,
                        status=FAILED,
                        reason=reason,
                        read_seconds=t_read,
                        total_seconds=time.perf_counter() - started,
                        error=type(exc).__name__,
                    )
                )
                if cancelled:
                    self._remove_from_store(store, record, stored.id, keep_file=keep_file)
            return IngestResult(
                stored.name,
                Outcome.CANCELLED if cancelled else Outcome.FAILED,
                reason,
                file_id=stored.id,
                error=type(exc).__name__,
                seconds=time.perf_counter() - started,
            )
        except BaseException as exc:  # Ctrl-C, a crash: never leave the record "processing"
            if isinstance(exc, Exception) and waiting(exc):
                raise
            with contextlib.suppress(Exception):
                self.catalog.put_file(
                    replace(
                        rec,
                        status=FAILED,
                        reason="interrupted: the program was stopped while ingesting it; ingest it again",
                        total_seconds=time.perf_counter() - started,
                    )
                )
            raise
        _step(progress, "done", 1.0, None)
        pages = f", {_n(doc.pages, 'page')}" if doc.pages else ""
        return IngestResult(
            stored.name,
            Outcome.INDEXED,
            f"{stored.name}: {_n(len(chunks), 'chunk')}{pages}.",
            file_id=stored.id,
            chunks=len(chunks),
            pages=doc.pages,
            warnings=warnings,
            seconds=total,
        )

    def _write(self, record: StoreRecord, rec: FileRecord, chunks: Sequence[Chunk], dimension: int, started: float) -> float:
        """The one write of chunks: under the store's lock, replace the file's chunks, record the
        store's dimension when it is new, then the file's record (``rec``, with ``total_seconds``
        since ``started``). Returns those seconds."""
        with self.stores.store_lock(record.name):
            try:
                current = self.catalog.get_file(record.name, rec.file_id)  # who may read it is kept apart
                self.stores.vs_of(record).replace_file(
                    rec.file_id, chunks, file_name=rec.file_name, readers=current.readers if current else None
                )
                if record.dimension != dimension:
                    self.stores.put(
                        record.name,
                        record.template,
                        record.backend,
                        record.embedding_model,
                        dimension,
                        record.distance,
                        collection=record.collection,
                    )
                total = time.perf_counter() - started
                self.catalog.put_file(replace(rec, total_seconds=total))
            finally:
                self.stores.changed(record.name)
        return total

    def index_text(self, store: str, file_id: str, text: str, file_name: str | None = None) -> IngestResult:
        """Index ``text`` as the whole content of file ``file_id`` of ``store`` (created on the fly
        from the default template), replacing the file's earlier chunks in one atomic step: the
        chunks, the store's dimension and the file's record (status done, content hash and size of
        the UTF-8 text) are written as :meth:`ingest_file` writes them. No bytes go to the file store.

        Returns:
            ``Outcome.INDEXED`` with the number of chunks, or ``Outcome.FAILED`` for a text with
            nothing to index (blank).

        Raises:
            InvalidArgument: an empty ``file_id``, a file name with a control character; the errors of
            :meth:`Stores.open_for_write`.
        """
        data = text.encode("utf-8", "replace")
        doc = Document(text=text, sections=[Section(0, len(text))], format="text")
        return self.index_document(store, file_id, doc, file_name, sha256=hashlib.sha256(data).hexdigest(), size=len(data))

    def index_document(
        self,
        store: str,
        file_id: str,
        doc: Any,
        file_name: str | None = None,
        *,
        chunk_tokens: int | None = None,
        overlap_tokens: int | None = None,
        sha256: str | None = None,
        size: int | None = None,
    ) -> IngestResult:
        """Index an extracted :class:`~knowledge.ingest.document.Document` as the content of file
        ``file_id`` of ``store`` (created on the fly from the default template): chunked with the
        store's template (or ``chunk_tokens``/``overlap_tokens``, tokens of the store's model),
        embedded, and written by the one write sequence of :meth:`ingest_file` (lock, chunks,
        dimension, the file's record with ``sha256``/``size`` when known).

        Returns:
            ``Outcome.INDEXED`` with the number of chunks; ``Outcome.FAILED`` when the document has
            nothing to index (nothing is written then).

        Raises:
            InvalidArgument: an empty ``file_id``, a file name with a control character or a bad
            chunking; the errors of
            :meth:`Stores.open_for_write`.
        """
        started = time.perf_counter()
        if not isinstance(file_id, str) or not file_id:
            raise InvalidArgument(f"file_id must be a non-empty string, got {file_id!r}.")
        name = check_name(normalize_name(file_name or file_id), "file name")
        record, tpl = self.stores.open_for_write(store, None)
        embedder = self._embedder(tpl.embedding_model)
        planned = chunk_document(
            doc,
            embedder,
            chunk_tokens or tpl.max_chunk_size_tokens,
            tpl.chunk_overlap_tokens if overlap_tokens is None else overlap_tokens,
        ).chunks
        if not planned:
            return IngestResult(
                name,
                Outcome.FAILED,
                "Nothing to store: the text is empty.",
                file_id=file_id,
                error="InvalidArgument",
                seconds=time.perf_counter() - started,
            )
        t0 = time.perf_counter()
        vectors = _embed(embedder, [embedding_text(c.text, c.heading) for c in planned], None, None)
        t_embed = time.perf_counter() - t0
        chunks = [_stored_chunk(c, vectors[i]) for i, c in enumerate(planned)]
        old = self.catalog.get_file(store, file_id)
        rec = FileRecord(
            store,
            file_id,
            name,
            sha256,
            size,
            DONE,
            None,
            len(chunks),
            doc.pages,
            list(doc.warnings),
            embed_seconds=t_embed,
            created=old.created if old is not None else None,
        )
        total = self._write(record, rec, chunks, embedder.dimension, started)
        return IngestResult(
            name,
            Outcome.INDEXED,
            f"{name}: {_n(len(chunks), 'chunk')}.",
            file_id=file_id,
            chunks=len(chunks),
            pages=doc.pages,
            seconds=total,
        )

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
        protected: Collection[str] = (),
    ) -> list[IngestResult]:
        """Ingest files and folders (a folder: the files matching ``glob``, default ``**/*``, sorted).
        Each file is reported; the batch never aborts for a bad file. Files are named by
        :func:`file_names` (or ``names``), so two files of the batch never share a name.
        ``progress(file name, stage, fraction)`` follows each file (see :data:`Progress`);
        ``protected`` as :meth:`ingest_file` takes it."""
        results = []
        found = expand_paths(paths, glob)
        names = names if names is not None else file_names(found)
        for path in found:
            if cancel is not None and cancel.is_set():
                break
            if isinstance(path, str):  # a path that does not exist
                r = IngestResult(
                    Path(path).name or path, Outcome.FAILED, f"{path}: no such file or folder.", error="FileNotFoundError"
                )
            else:
                name = names.get(path) or path.name
                r = self.ingest_file(
                    store,
                    path,
                    name,
                    template=template,
                    password=password,
                    cancel=cancel,
                    progress=functools.partial(progress, name) if progress else None,
                    protected=protected,
                )
            results.append(r)
            if on_result:
                on_result(r)
        return results

    # -- files in a store -----------------------------------------------------------------------
    def store_files(self, store: str) -> list[FileRecord]:
        self.stores.get(store)
        return self.catalog.files(store)

    def delete_file(self, store: str, file_id: str, *, keep_file: bool = False) -> int:
        """Remove a file from a store: every chunk and its record. The stored bytes go too unless
        another store uses them or ``keep_file``. Returns the number of chunks removed."""
        record = self.stores.get(store)
        with self.stores.store_lock(store):
            removed = self._remove_from_store(store, record, file_id, keep_file=keep_file)
        return removed

    def delete_name(self, store: str, file_id: str, name: str, *, folder: str | None = None) -> int:
        """Take ``name`` off content ``file_id`` of ``store`` (of origin ``folder``; any origin when
        ``None``). The content -- its chunks, record and bytes (unless another store uses them) --
        goes only when that was its last name; otherwise it stays searchable, relabelled with its
        next name if its chunks carried this one. Returns the number of chunks removed (0 when the
        content stays).

        Raises:
            StoreNotFound. FileNotFoundInStore: the content has no such name.
        """
        record = self.stores.get(store)
        with self.stores.store_lock(store):
            names = self.catalog.names(store, file_id=file_id, name=name, folder=folder)
            if not names:
                raise FileNotFoundInStore(f"Store {store!r} has no file named {name!r} with the id {file_id!r}.")
            removed = 0
            for n in names:
                removed += self._drop_name(store, record, file_id, n.name, n.folder)
        return removed

    def rename(
        self,
        store: str,
        file_id: str,
        old: str,
        new: str,
        *,
        folder: str = "",
        stat: tuple[int | None, int | None] | None = None,
    ) -> None:
        """Move content ``file_id``'s name ``old`` (of origin ``folder``) to ``new``, recording
        ``stat`` ``(size, mtime_ns)`` on it; the chunks are relabelled when they carried ``old``.
        Nothing is read or embedded again.

        Raises:
            StoreNotFound. FileNotFoundInStore: the content has no name ``old`` of that origin.
        """
        record = self.stores.get(store)
        with self.stores.store_lock(store):
            if not self.catalog.names(store, file_id=file_id, name=old, folder=folder):
                raise FileNotFoundInStore(f"Store {store!r} has no file named {old!r} with the id {file_id!r}.")
            self.catalog.add_name(
                store, file_id, check_name(normalize_name(new), "file name"), folder, *(stat or (None, None))
            )
            self._drop_name(store, record, file_id, old, folder)

    def _drop_name(self, store: str, record: StoreRecord, file_id: str, name: str, folder: str) -> int:
        """Under the store's lock: remove one name of a content; the content with its last name,
        else relabel its chunks when they carried this name. Returns the chunks removed."""
        left = self.catalog.remove_name(store, file_id, name, folder)
        if not left:
            return self._remove_from_store(store, record, file_id)
        rec = self.catalog.get_file(store, file_id)
        if rec is not None and rec.file_name not in {n.name for n in left}:
            self._relabel(record, rec, left[0].name)
        self.stores.changed(store)
        return 0

    def _relabel(self, record: StoreRecord, rec: FileRecord, new_name: str) -> None:
        """Give every chunk of ``rec``'s content the file name ``new_name`` in one atomic ``replace``
        (vectors and text kept: nothing re-embedded), then the record."""
        coll = self.stores.collection_of(record)
        try:
            _rewrite_payloads(coll, rec.file_id, lambda payload: {**payload, "file_name": new_name})
            self.catalog.put_file(replace(rec, file_name=new_name))
        finally:
            self.stores.changed(record.name)

    def file_attributes(self, store: str, file_id: str) -> dict[str, Any]:
        """The attributes of a file in ``store`` (:mod:`knowledge.attributes`), read from its first
        chunk; ``{}`` for a file without chunks. Raises ``StoreNotFound``."""
        vs = self.stores.vector_store(store)
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
        attrs = to_payload(check_attributes(attributes))
        record = self.stores.get(store)
        rec = self.catalog.get_file(store, file_id)
        if rec is None or rec.status != DONE:
            raise FileNotFoundInStore(f"Store {store!r} has no indexed file with the id {file_id!r}.")
        coll = self.stores.collection_of(record)
        with self.stores.store_lock(store):
            try:
                n = _rewrite_payloads(
                    coll,
                    file_id,
                    lambda payload: {**{k: v for k, v in payload.items() if not k.startswith(PREFIX)}, **attrs},
                )
                self.catalog.put_file(rec)  # a newer record: the BM25 index takes the new payloads
            finally:
                self.stores.changed(store)
        return n

    def set_file_readers(self, store: str, file_id: str, readers: Sequence[str] | None) -> int:
        """Set who may read file ``file_id`` of ``store``: ``readers`` principals (checked by the
        caller, :func:`knowledge.people.policy.check_readers`), or ``None`` for whoever may read the
        store. The file's chunks get the new ``readers`` payload in one atomic ``replace`` (nothing is
        re-embedded), then the catalog record; the store is made to filter first
        (:meth:`filter_readers`). Returns the number of chunks.

        Raises:
            StoreNotFound. FileNotFoundInStore: the store has no file ``file_id``.
        """
        record = self.stores.get(store)
        rec = self.catalog.get_file(store, file_id)
        if rec is None:
            raise FileNotFoundInStore(f"Store {store!r} has no file with the id {file_id!r}.")
        who = tuple(readers) if readers is not None else None
        if who is not None:
            self.filter_readers(store)
        coll = self.stores.collection_of(record)
        with self.stores.store_lock(store):
            try:
                n = _rewrite_payloads(coll, file_id, functools.partial(_with_readers, readers=_readers_payload(who)))
                self.catalog.set_readers(store, file_id, who)
            finally:
                self.stores.changed(store)
        return n

    def filter_readers(self, store: str) -> bool:
        """Make searches of ``store`` filter chunks by their ``readers`` payload field: every chunk
        written before access per document existed gets its file's readers (``["*"]`` when it
        inherits the store's sharing), file by file (one atomic ``replace`` each, nothing
        re-embedded), then the store is marked (:meth:`Catalog.mark_filters_readers`). Once only:
        returns ``False`` when the store filtered already. Resumable: a file whose chunks all carry
        the field is not rewritten again.

        Raises:
            StoreNotFound.
        """
        if self.catalog.filters_readers(store):
            return False
        record = self.stores.get(store)
        coll = self.stores.collection_of(record)
        with self.stores.store_lock(store):
            try:
                if coll.collection_exists():
                    restricted = self.catalog.restricted_files(store)
                    for file_id in sorted(coll.facet("file_id"), key=str):
                        _rewrite_payloads(
                            coll,
                            file_id,
                            functools.partial(_with_readers, readers=_readers_payload(restricted.get(str(file_id)))),
                            unless=lambda payload: "readers" in payload,
                        )
                self.catalog.mark_filters_readers(store)
            finally:
                self.stores.changed(store)
        return True

    def _remove_from_store(self, store: str, record: StoreRecord, file_id: str, keep_file: bool = False) -> int:
        try:
            removed = self.stores.vs_of(record).delete_file(file_id)
            self.catalog.delete_file(store, file_id)
        finally:
            self.stores.changed(store)
        if not keep_file:
            self.stores.forget_file_if_unused(file_id)
        return removed

    def retry_file(
        self,
        store: str,
        file_id: str,
        *,
        password: str | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> IngestResult:
        """Ingest a file of ``store`` again from its stored bytes -- typically one that failed, with the
        ``password`` it asked for. The old record is replaced by the new outcome (never both kept).

        Raises:
            StoreNotFound. FileNotFoundInStore: the store has no such file, or its bytes are gone.
        """
        self.stores.get(store)
        old = self.catalog.get_file(store, file_id)
        if old is None:
            raise FileNotFoundInStore(f"Store {store!r} has no file with the id {file_id!r}.")
        stored = self.files.get(file_id)
        origin = next(iter(self.catalog.names(store, file_id=file_id, name=old.file_name)), None)
        with self.files.content(file_id) as fh:
            result = self.ingest_file(
                store,
                fh,
                old.file_name,
                content_type=stored.content_type,
                password=password,
                progress=progress,
                cancel=cancel,
                folder=origin.folder if origin is not None else "",
            )
        if result.file_id != file_id and self.catalog.get_file(store, file_id) is not None:
            self.delete_file(store, file_id)  # failed again, or unchanged elsewhere: one record, not two
        return result

    # -- re-embedding, moving and importing -----------------------------------------------------
    def reembed(self, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
        """Move ``store`` to ``template`` (another model, backend or distance) from its stored points.

        When the template's embedding model is the store's (same model, same dimension) the vectors
        are copied as they are -- a move to another backend, no embedding; otherwise the chunks are
        re-embedded from the text kept in their payloads -- no file is read again. Either way the
        points go, one file at a time (memory stays bounded by the largest file), into a new
        collection; the catalog switches the store to it in one step once it is complete, and only
        then is the old collection dropped. A failure leaves the store as it was. ``progress``
        receives ``("copying", f)`` or ``("embedding, about 2 min left", f)``.
        """
        record = self.stores.get(store)
        tpl = self.stores.templates.get(template)
        self.stores.templates.check(tpl)  # MachineLocalBackend: a per-machine target in a shared catalog
        embedder = self._embedder(tpl.embedding_model)
        reuse = tpl.embedding_model == record.embedding_model and record.dimension in (None, embedder.dimension)
        old = self.stores.local_collection_of(record)  # moving a per-machine store out is a way out
        new_name = _next_collection_name(store, record.collection)
        target = self.stores.backend(tpl.backend).collection(new_name)
        target.drop_collection()
        with self.stores.store_lock(store):
            counts = old.facet("file_id") if old.collection_exists() else {}
            total = sum(counts.values())

            def batches() -> Iterable[list[Any]]:
                for file_id in sorted(counts, key=str):
                    yield list(old.scroll(where={"file_id": file_id}, with_vectors=reuse))

            try:
                self.write_points(
                    target, embedder.dimension, tpl.distance, batches(), None if reuse else embedder, progress, total
                )
            except BaseException:
                target.drop_collection()
                raise
            updated = self.stores.put(
                store, tpl.name, tpl.backend, tpl.embedding_model, embedder.dimension, tpl.distance, collection=new_name
            )
            old.drop_collection()
            return updated

    def write_points(
        self,
        target: Any,
        dimension: int,
        distance: str,
        batches: Iterable[Sequence[Any]],
        embedder: Embedder | None = None,
        progress: Progress | None = None,
        total: int | None = None,
    ) -> int:
        """Write ready points (chunks with their payloads: ``text``, ``heading``, provenance) into
        the collection ``target`` -- a new collection no store uses yet (an import, a move): it is
        prepared for ``dimension`` and ``distance`` first. With ``embedder`` each batch's vectors are
        computed again from ``embedding_text(text, heading)`` (another model); without, the points'
        own ``(d,)`` float32 vectors are kept. Returns the number of points written.

        ``progress(stage, fraction)`` after each batch: ``"copying"``, or, when embedding,
        ``"embedding, about N s left"`` (the time left from the pace so far; ``total`` points
        expected).

        Raises:
            The errors of :meth:`Collection.upsert` (``DimensionMismatch``, ``StorageError``, ...)
            and of the embedder; the caller drops ``target`` on failure.
        """
        target.ensure_collection(dimension, distance)
        target.ensure_lexical_index()  # chunks are searched by words too: kept from the start, as ingestion does
        done, started = 0, time.perf_counter()
        with target.bulk_load():  # pgvector: the HNSW index built once at the end
            for batch in batches:
                points = list(batch)
                if not points:
                    continue
                if embedder is not None:
                    vectors = embedder.embed_documents(
                        [embedding_text(p.payload["text"], p.payload.get("heading")) for p in points]
                    )
                    for p, v in zip(points, vectors):
                        p.vector = v
                target.upsert(points)
                done += len(points)
                if progress is not None:
                    fraction = done / total if total else 1.0
                    stage = "copying"
                    if embedder is not None:
                        stage = "embedding"
                        if total and done < total:
                            left = (time.perf_counter() - started) / done * (total - done)
                            stage = f"embedding, about {_duration(left)} left"
                    progress(stage, min(1.0, fraction))
        return done

    def adopt_store(
        self, store: str, tpl: VectorStoreTemplate, dimension: int, collection: str, files: Sequence[FileRecord]
    ) -> StoreRecord:
        """Make the filled ``collection`` (on ``tpl``'s backend) the new store ``store`` with the
        file records ``files``, in one catalog transaction (see :meth:`Catalog.adopt_store`).

        Raises:
            StoreExists: a store called ``store`` exists (nothing is written).
        """
        try:
            with self.stores.store_lock(store):
                if self.stores.find(store) is not None:
                    raise StoreExists(f"A store called {store!r} exists already; import it under another name.")
                return self.catalog.adopt_store(
                    store, tpl.name, tpl.backend, tpl.embedding_model, dimension, tpl.distance, collection, files
                )
        finally:
            self.stores.changed(store)


def _duration(seconds: float) -> str:
    """``"40 s"``, ``"3 min"``, ``"2 h"``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


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
                body = glob[i + 1 : j]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.IGNORECASE)


def expand_paths(
    paths: Iterable[str | os.PathLike], glob: str | None = None, skipped: dict[str, int] | None = None
) -> list[Path | str]:
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


#: The extension a web page's Content-Type implies, for the readers of the text-like formats.
_WEB_EXTENSIONS = {
    "text/html": ".html",
    "application/xhtml+xml": ".xhtml",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
    "text/plain": ".txt",
    "text/csv": ".csv",
}


def reading_name(name: str, content_type: str | None) -> str:
    """The name the reader sees for a file called ``name``: the name itself, except for a web page
    (a name that is an ``http(s)://`` URL, :mod:`knowledge.service.web`), where it is the last
    segment of the URL's path (``guide.html`` of ``https://x.org/docs/guide.html?v=2``), with the
    extension its ``content_type`` implies when that segment has none of the text-like formats'
    (``https://x.org/docs/`` served as ``text/html`` reads as ``index.html``). The bytes still decide
    the binary formats (a linked PDF reads as a PDF)."""
    if not name.lower().startswith(("http://", "https://")):
        return name
    path = urllib.parse.urlsplit(name).path
    last = urllib.parse.unquote(path.rsplit("/", 1)[-1]) or "index"
    media = (content_type or "").split(";", 1)[0].strip().lower()
    wanted = _WEB_EXTENSIONS.get(media)
    if wanted is not None and mimetypes.guess_type("x" + Path(last).suffix.lower())[0] != media:
        last += wanted
    return last


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


class _Unreadable(OSError):
    """A read of the source file failed (not a write of the file store)."""


class _ReadErrors:
    """A file being read, whose read errors say that the file cannot be read (``_Unreadable``), so
    they are told apart from the file store's write errors."""

    def __init__(self, fh: BinaryIO, path: Path) -> None:
        self.fh, self.path = fh, path

    def read(self, n: int = -1) -> bytes:
        try:
            return self.fh.read(n)
        except OSError as exc:
            raise _Unreadable(f"{self.path} cannot be read: {exc.strerror or exc}") from exc


def _step(progress: Progress | None, stage: str, fraction: float, cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("Ingestion cancelled.")
    if progress is not None:
        progress(stage, fraction)


def _readers_payload(readers: Sequence[str] | None) -> list[str]:
    """A chunk's ``readers`` payload field: ``readers``, or ``[EVERYONE]`` for a file that inherits."""
    return [EVERYONE] if readers is None else list(readers)


def _with_readers(payload: dict[str, Any], readers: list[str]) -> dict[str, Any]:
    """``payload`` with its ``readers`` field set to ``readers``."""
    return {**payload, "readers": readers}


def _rewrite_payloads(
    coll: Any,
    file_id: Any,
    change: Callable[[dict[str, Any]], dict[str, Any]],
    unless: Callable[[dict[str, Any]], bool] | None = None,
) -> int:
    """Give every chunk of ``file_id`` in ``coll`` the payload ``change(payload)`` in one atomic
    ``replace`` (vectors and text kept: nothing re-embedded); nothing is written when ``unless`` holds
    for every chunk's payload. Returns the number of chunks (0 before the collection exists)."""
    if not coll.collection_exists():
        return 0
    points = list(coll.scroll(where={"file_id": file_id}, with_vectors=True))
    if not points or (unless is not None and all(unless(p.payload) for p in points)):
        return len(points)
    for p in points:
        p.payload = change(p.payload)
    coll.replace({"file_id": file_id}, points)
    return len(points)


def _called(rec: FileRecord) -> str:
    """How a message names file ``rec`` of a store: its name, quoted, unless it has readers of its own
    (access per document: whoever ingests the same bytes may not be one of them)."""
    return repr(rec.file_name) if rec.readers is None else "a file whose readers are restricted"


def _stored_chunk(c: TextChunk, vector: Any, payload: dict[str, Any] | None = None) -> Chunk:
    """The chunk as a backend stores it: ``c``'s text and place, its ``vector`` (``(d,)`` float32, d the model
    dimension), ``payload`` (filterable fields) and ``c``'s table header and table box, if any
    (``table_header``: text; ``table_bbox``: ``[x0, top, x1, bottom]`` PDF points from the page's top-left)."""
    extra: dict[str, Any] = {"table_header": c.table_header} if c.table_header else {}
    if c.table_bbox is not None:
        extra["table_bbox"] = list(c.table_bbox)
    return Chunk(c.text, vector, c.index, c.page, c.char_start, c.char_end, c.heading, metadata={**(payload or {}), **extra})


def _embed(
    embedder: Embedder, texts: Sequence[str], progress: Progress | None, cancel: threading.Event | None, start: float = 0.1
) -> Any:
    if not texts:
        return np.zeros((0, embedder.dimension), np.float32)
    batch = 64
    parts = []
    for i in range(0, len(texts), batch):
        _step(progress, "embedding", start + (0.95 - start) * i / len(texts), cancel)
        parts.append(embedder.embed_documents(texts[i : i + batch]))
    return np.vstack(parts)


def _n(count: int, noun: str) -> str:
    """``"1 chunk"``, ``"3 chunks"``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
