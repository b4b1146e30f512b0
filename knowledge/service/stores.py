"""Stores: catalog records, backends, embedders and per-store locks, behind one object.

``Stores`` answers "which store is this, where are its vectors, which model embeds for it, and which
lock guards its writes": a store is a catalog :class:`~knowledge.catalog.StoreRecord` (template,
backend, collection, embedding model, dimension, distance) whose points live in one collection of
its backend. :class:`~knowledge.service.indexing.Indexer` writes through it, :class:`~knowledge.service.search.Searcher`
reads through it, and :class:`~knowledge.workbench.Workbench` builds all three.

Store records are read from the catalog once and kept: a search resolves its store without a
catalog query. The kept records are dropped whenever the catalog may have changed -- a store
written through this object, or the catalog's files changed on disk (DuckDB appends every commit
to its write-ahead log, so another process's write changes the log's size; a checkpoint rewrites
the database file) -- which costs two ``os.stat`` calls (~4 us) instead of a query (~0.4 ms).

A shared catalog (PostgreSQL) makes no store on a per-machine backend (memory, Qdrant's local mode,
the embedded PostgreSQL; see :mod:`knowledge.service.templates`). One it already holds (imported
before, say) is listed with a note and refused on use (search, writes), except to move it to a
shared template or to delete it (:meth:`Stores.local_collection_of`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from knowledge._names import check_name
from knowledge.catalog import Catalog, StoreRecord, StoreSettings
from knowledge.config import Settings
from knowledge.embeddings.base import Embedder
from knowledge.errors import InvalidArgument, KnowledgeError, MachineLocalBackend, StoreNotFound
from knowledge.filestore.base import FileStore
from knowledge.service.templates import (
    DEFAULT_TEMPLATE,
    SHARED_BACKENDS,
    TemplateRegistry,
    VectorStoreTemplate,
    machine_local_reason,
)
from knowledge.vectorstore.base import Collection, VectorBackend
from knowledge.vectorstore.registry import open_backend
from knowledge.vectorstore.store import VectorStore

log = logging.getLogger(__name__)

#: The longest store description (characters): it goes into every chat's system prompt.
MAX_DESCRIPTION_CHARS = 1000


class ModelMismatch(KnowledgeError):
    """A store filled by one embedding model was asked to take vectors of another."""


#: The character a new store name may not hold: agent memory's per-person collections are
#: ``<name>~<username>`` (:func:`knowledge.agent_memory.user_collection`).
RESERVED_MARK = "~"


def check_store_name(name: object, *, new: bool = False) -> str:
    """``name`` if it may name a store (``new``: a store to be made, which may not hold ``~`` either).

    Raises:
        InvalidArgument: blank, over 200 characters, a refused character (:mod:`knowledge._names`),
            or, new, :data:`RESERVED_MARK`.
    """
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise InvalidArgument("A store name must be 1-200 characters and not blank.")
    check_name(name, "store name")
    if new and RESERVED_MARK in name:
        raise InvalidArgument(
            f"A store name may not hold {RESERVED_MARK!r}: agent memory keeps each person's"
            f" memories in a collection named <name>{RESERVED_MARK}<username>, and a store"
            " of that name would sit on them."
        )
    return name


@dataclass(frozen=True, slots=True)
class StoreSummary:
    """A store for listing: its record plus live counts from the backend."""

    record: StoreRecord
    files: int
    chunks: int
    disk_bytes: int | None
    #: Why the store cannot be used here (a per-machine backend in a shared catalog), else ``None``.
    note: str | None = None


def checked_settings(description: str | None, score_threshold: float | None) -> tuple[str, float | None]:
    """A store's own settings as stored: ``(description stripped, threshold as float or None)``.

    Raises:
        InvalidArgument: a description over :data:`MAX_DESCRIPTION_CHARS` characters or with control
        characters; a threshold that is not a finite number.
    """
    text = (description or "").strip()
    if len(text) > MAX_DESCRIPTION_CHARS:
        raise InvalidArgument(f"A store description may have at most {MAX_DESCRIPTION_CHARS} characters, got {len(text)}.")
    if text:
        check_name(text.replace("\n", " ").replace("\t", " "), "store description")
    if score_threshold is not None:
        if (
            isinstance(score_threshold, bool)
            or not isinstance(score_threshold, (int, float))
            or not math.isfinite(score_threshold)
        ):
            raise InvalidArgument(f"A score threshold must be a finite number, got {score_threshold!r}.")
        score_threshold = float(score_threshold)
    return text, score_threshold


class Stores:
    """Catalog records <-> backends <-> embedders <-> per-store locks over one data folder.

    Args:
        settings: the settings (backend defaults, search and ingest limits).
        catalog: the catalog holding the store records.
        files: the file store (bytes of the files the stores hold).
        templates: the template registry.
        embedder_factory: ``factory(model_name) -> Embedder``, called once per model.

    Thread-safe.
    """

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        files: FileStore,
        templates: TemplateRegistry,
        embedder_factory: Callable[[str], Embedder],
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.files = files
        self.templates = templates
        self._embedder_factory = embedder_factory
        self._lock = threading.RLock()
        self._backends: dict[str, VectorBackend] = {}
        self._embedders: dict[str, Embedder] = {}
        self._store_locks: dict[str, threading.Lock] = {}
        self._records: dict[str, StoreRecord | None] = {}
        self._records_token: tuple | None = None
        self._generation = 0  # bumped by every write through this object (stores, files, chunks)
        self._store_generations: dict[str, int] = {}

    # -- change tracking ------------------------------------------------------------------------
    def changed(self, store: str | None = None) -> None:
        """Note a write: the store's record or chunks (``store``), or the catalog at large. Drops the
        kept records; :meth:`token` changes. The :class:`~knowledge.service.indexing.Indexer` calls it
        around every write of chunks."""
        with self._lock:
            self._generation += 1
            if store is not None:
                self._store_generations[store] = self._store_generations.get(store, 0) + 1
            self._records.clear()
            self._records_token = None

    def token(self, store: str | None = None) -> tuple:
        """A cheap value that changes whenever the catalog may have changed (a write through this
        object, or :meth:`Catalog.change_token <knowledge.catalog.Catalog.change_token>`: another
        process's write), and, with ``store``, whenever that store's chunks were written through
        this object."""
        stat = self.catalog.change_token()
        with self._lock:
            local = (self._generation, self._store_generations.get(store, 0) if store is not None else 0)
        return (local, *stat)

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

    def store_lock(self, store: str) -> threading.Lock:
        with self._lock:
            return self._store_locks.setdefault(store, threading.Lock())

    # -- stores ---------------------------------------------------------------------------------
    def create(self, name: str, template: str = DEFAULT_TEMPLATE) -> StoreRecord:
        """Create the store ``name`` from ``template`` (or return it if it exists with that model).

        Raises:
            InvalidArgument: a blank name, one with a control character (:mod:`knowledge._names`), or
                a new one holding ``~`` (:data:`RESERVED_MARK`).
            TemplateNotFound. ModelMismatch: the store exists with another embedding model.
            EmbeddingUnavailable: the model cannot load (its dimension is recorded now).
            BackendUnavailable: the template's backend is unknown or cannot be reached (no store is recorded).
            MachineLocalBackend: the catalog is shared and the template's backend is per machine
                (the message names the settings to use instead; no store is recorded).
        """
        check_store_name(name)
        tpl = self.templates.get(template)
        existing = self.find(name)
        if existing is not None:
            self._check_model(existing, tpl)
            return existing
        check_store_name(name, new=True)
        self.templates.check(tpl)
        dimension = self.embedder(tpl.embedding_model).dimension
        self.backend(tpl.backend)  # an unknown or unreachable backend is refused before the store exists
        return self.put(name, tpl.name, tpl.backend, tpl.embedding_model, dimension, tpl.distance)

    def put(
        self,
        name: str,
        template: str,
        backend: str,
        embedding_model: str,
        dimension: int | None,
        distance: str,
        collection: str | None = None,
    ) -> StoreRecord:
        """Insert or update the catalog record of store ``name`` (see :meth:`Catalog.put_store`)."""
        try:
            return self.catalog.put_store(
                name, template, backend, embedding_model, dimension, distance, collection=collection
            )
        finally:
            self.changed(name)

    def find(self, name: str) -> StoreRecord | None:
        """The record of store ``name``, or ``None``; kept between calls while the catalog is
        unchanged (see the module docstring), so a warm call costs no catalog query."""
        token = self.token()
        with self._lock:
            if self._records_token == token and name in self._records:
                return self._records[name]
        if isinstance(name, str) and not _encodable(name):
            return None  # an unpaired surrogate: no such name can be stored (the catalog's UTF-8 refuses it)
        record = self.catalog.get_store(name)
        with self._lock:
            if self._records_token != token:
                self._records.clear()
                self._records_token = token
            self._records[name] = record
        return record

    def get(self, name: str) -> StoreRecord:
        """The record of store ``name``. Raises ``StoreNotFound``."""
        record = self.find(name)
        if record is None:
            raise StoreNotFound(name, "create it first, or ingest a file into it")
        return record

    def exists(self, name: str) -> bool:
        """Whether store ``name`` exists (has a catalog record)."""
        return self.find(name) is not None

    def settings_of(self, name: str) -> StoreSettings:
        """The own settings of store ``name`` (:class:`~knowledge.catalog.StoreSettings`). Raises ``StoreNotFound``."""
        self.get(name)
        return self.catalog.store_settings(name)

    def set_settings(
        self, name: str, *, description: str | None = None, score_threshold: float | None = None
    ) -> StoreSettings:
        """Replace the own settings of store ``name``: ``description`` (stripped; at most
        :data:`MAX_DESCRIPTION_CHARS` characters; ``None`` or blank: none) and ``score_threshold``
        (a finite number, on the scale of the store's scores; ``None``: the setting
        ``search.score_threshold``). Both are written at once. Returns the new settings.

        Raises:
            StoreNotFound. InvalidArgument: a description too long or with control characters, a
            threshold that is not a finite number.
        """
        self.get(name)
        text, score_threshold = checked_settings(description, score_threshold)
        try:
            return self.catalog.put_store_settings(name, text, score_threshold)
        finally:
            self.changed(name)

    def template_of(self, record: StoreRecord) -> VectorStoreTemplate:
        return self.templates.get(record.template)

    def vector_store(self, name: str) -> VectorStore:
        """The ``VectorStore`` facade of an existing store."""
        return self.vs_of(self.get(name))

    def unshared(self, record: StoreRecord) -> str | None:
        """Why ``record``'s store cannot be used through this catalog -- its backend is per machine
        and the catalog is shared -- with what to do, or ``None`` (always on the embedded default)."""
        reason = machine_local_reason(self.settings, self.catalog, record.backend)
        if reason is None:
            return None
        return (
            f"Store {record.name!r} is on the {record.backend} backend, but the catalog is shared"
            f" (catalog.url): {reason}, which the other processes and hosts of the catalog cannot reach,"
            " so it is not searched or written through the shared catalog. On the machine that holds"
            f" its folder, re-embed (move) it to a template on {SHARED_BACKENDS}; or delete it."
        )

    def collection_of(self, record: StoreRecord) -> Collection:
        """The backend collection holding the store's points (it may not exist yet).

        Raises:
            MachineLocalBackend: see :meth:`unshared`.
        """
        problem = self.unshared(record)
        if problem is not None:
            raise MachineLocalBackend(problem)
        return self.backend(record.backend).collection(record.collection)

    def local_collection_of(self, record: StoreRecord) -> Collection:
        """:meth:`collection_of` without :meth:`unshared`'s refusal, for the ways out of it: moving
        the store to another template, exporting it, deleting it. A per-machine store of a shared
        catalog whose folder is not on this machine is refused here too (nothing of it to read).

        Raises:
            MachineLocalBackend: a per-machine store whose collection this machine does not have.
        """
        coll = self.backend(record.backend).collection(record.collection)
        problem = self.unshared(record)
        if problem is not None and not coll.collection_exists():
            raise MachineLocalBackend(
                problem.replace(
                    "On the machine that holds its folder", "This machine does not hold its folder; on the one that does"
                )
            )
        return coll

    def vs_of(self, record: StoreRecord) -> VectorStore:
        """The ``VectorStore`` facade over the store's collection."""
        return VectorStore(self.collection_of(record), distance=record.distance)  # type: ignore[arg-type]

    def names(self, *, internal: bool = False) -> list[str]:
        """The stores' names, sorted case-insensitively; the product's own stores (each chat's
        attachment store) only with ``internal``."""
        hidden = set() if internal else self.catalog.internal_stores()
        return [r.name for r in self.catalog.list_stores() if r.name not in hidden]

    def summaries(self, *, internal: bool = False) -> list[StoreSummary]:
        """The user's stores with their live counts (with ``internal``, the chats' attachment stores too)."""
        out = []
        hidden = set() if internal else self.catalog.internal_stores()
        for record in self.catalog.list_stores():
            if record.name in hidden:
                continue
            chunks, disk = 0, None
            note = self.unshared(record)
            try:
                if note is None:
                    coll = self.backend(record.backend).collection(record.collection)
                    if coll.collection_exists():
                        info = coll.info()
                        chunks, disk = info.count, info.disk_bytes
            except KnowledgeError as exc:
                log.warning("store %s: %s", record.name, exc)
            files = self.catalog.file_counts(record.name).indexed
            out.append(StoreSummary(record, files, chunks, disk, note))
        return out

    def drop(self, name: str) -> None:
        """Delete a store: its chunks, its catalog records, and files no other store uses."""
        record = self.get(name)
        file_ids = [f.file_id for f in self.catalog.files(name)]
        try:
            coll = self.backend(record.backend).collection(record.collection)
            coll.drop_collection()  # a per-machine store of a shared catalog: its folder here, if any
            self.catalog.delete_store(name)
        finally:
            self.changed(name)
        for fid in file_ids:
            self.forget_file_if_unused(fid)

    @staticmethod
    def _check_model(record: StoreRecord, tpl: VectorStoreTemplate) -> None:
        if record.embedding_model != tpl.embedding_model:
            raise ModelMismatch(
                f"Store {record.name!r} holds embeddings of {record.embedding_model}"
                f" ({record.dimension} dimensions); template {tpl.name!r} uses {tpl.embedding_model}."
                " Re-embed the store to move it to that template."
            )

    def open_for_write(self, store: str, template: str | None) -> tuple[StoreRecord, VectorStoreTemplate]:
        """The record and template to write into ``store`` with: the store is created from
        ``template`` (default: the default template) when it does not exist; an existing store is
        written with ``template`` (default: its own) when the embedding models agree.

        Raises:
            InvalidArgument, TemplateNotFound, EmbeddingUnavailable (creating); ModelMismatch;
            MachineLocalBackend: a per-machine store or template while the catalog is shared.
        """
        record = self.find(store)
        if record is None:
            record = self.create(store, template or DEFAULT_TEMPLATE)
            return record, self.templates.get(record.template)
        if (problem := self.unshared(record)) is not None:
            raise MachineLocalBackend(problem)
        tpl = self.templates.get(template) if template else self.template_of(record)
        self._check_model(record, tpl)
        return record, tpl

    def forget_file_if_unused(self, file_id: str) -> None:
        """Delete the stored bytes of ``file_id`` when no store holds a record of it any more."""
        if not self.catalog.stores_using_file(file_id):
            self.files.delete(file_id)

    def stores_using_template(self, name: str, *, internal: bool = True) -> list[str]:
        """The stores made from template ``name``; without ``internal``, the user's stores only (not
        the chats' attachment stores)."""
        hidden = set() if internal else self.catalog.internal_stores()
        return [r.name for r in self.catalog.list_stores() if r.template == name and r.name not in hidden]


def _encodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
