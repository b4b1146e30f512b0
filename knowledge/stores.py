"""Stores: catalog records, backends, embedders and per-store locks, behind one object.

``Stores`` answers "which store is this, where are its vectors, which model embeds for it, and which
lock guards its writes": a store is a catalog :class:`~knowledge.catalog.StoreRecord` (template,
backend, collection, embedding model, dimension, distance) whose points live in one collection of
its backend. :class:`~knowledge.indexing.Indexer` writes through it, :class:`~knowledge.search.Searcher`
reads through it, and :class:`~knowledge.workbench.Workbench` builds all three.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from knowledge.catalog import DONE, Catalog, StoreRecord
from knowledge.config import Settings
from knowledge.embeddings.base import Embedder
from knowledge.errors import InvalidArgument, KnowledgeError, StoreNotFound
from knowledge.templates import DEFAULT_TEMPLATE, TemplateRegistry, VectorStoreTemplate
from knowledge.vectorstore.base import VectorBackend
from knowledge.vectorstore.registry import open_backend
from knowledge.vectorstore.store import VectorStore

log = logging.getLogger(__name__)


class ModelMismatch(KnowledgeError):
    """A store filled by one embedding model was asked to take vectors of another."""



@dataclass(frozen=True, slots=True)
class StoreSummary:
    """A store for listing: its record plus live counts from the backend."""

    record: StoreRecord
    files: int
    chunks: int
    disk_bytes: int | None



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

    def __init__(self, settings: Settings, catalog: Catalog, files, templates: TemplateRegistry,
                 embedder_factory: Callable[[str], Embedder]) -> None:
        self.settings = settings
        self.catalog = catalog
        self.files = files
        self.templates = templates
        self._embedder_factory = embedder_factory
        self._lock = threading.RLock()
        self._backends: dict[str, VectorBackend] = {}
        self._embedders: dict[str, Embedder] = {}
        self._store_locks: dict[str, threading.Lock] = {}

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

    def get(self, name: str) -> StoreRecord:
        record = self.catalog.get_store(name)
        if record is None:
            raise StoreNotFound(name, "create it first, or ingest a file into it")
        return record

    def template_of(self, record: StoreRecord) -> VectorStoreTemplate:
        return self.templates.get(record.template)

    def vector_store(self, name: str) -> VectorStore:
        """The ``VectorStore`` facade of an existing store."""
        return self.vs_of(self.get(name))

    def vs_of(self, record: StoreRecord) -> VectorStore:
        coll = self.backend(record.backend).collection(record.collection)
        return VectorStore(coll, distance=record.distance)  # type: ignore[arg-type]

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

    def drop(self, name: str) -> None:
        """Delete a store: its chunks, its catalog records, and files no other store uses."""
        record = self.get(name)
        file_ids = [f.file_id for f in self.catalog.files(name)]
        self.backend(record.backend).collection(record.collection).drop_collection()
        self.catalog.delete_store(name)
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
        record = self.catalog.get_store(store)
        if record is None:
            record = self.create(store, template or DEFAULT_TEMPLATE)
            return record, self.templates.get(record.template)
        tpl = self.templates.get(template) if template else self.template_of(record)
        self._check_model(record, tpl)
        return record, tpl


    def forget_file_if_unused(self, file_id: str) -> None:
        if not self.catalog.stores_using_file(file_id):
            self.files.delete(file_id)

    def _discard(self, file_id: str) -> None:
        if not self.catalog.stores_using_file(file_id):
            self.files.delete(file_id)


    def stores_using_template(self, name: str, *, internal: bool = True) -> list[str]:
        """The stores made from template ``name``; without ``internal``, the user's stores only (not
        the chats' attachment stores)."""
        hidden = set() if internal else self.catalog.internal_stores()
        return [r.name for r in self.catalog.list_stores() if r.template == name and r.name not in hidden]

