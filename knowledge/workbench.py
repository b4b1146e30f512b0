"""The workbench: the composition root, and the one object the app, the CLI, the servers and tools hold.

``Workbench`` builds the parts -- settings, the catalog, the file store, the templates,
:class:`~knowledge.service.stores.Stores` (records, backends, embedders, locks),
:class:`~knowledge.service.indexing.Indexer` (the only writer of chunks),
:class:`~knowledge.service.search.Searcher`, the job registry -- and hands the features the parts they
use (``portable``, ``syncs``, ``evaluations``). It keeps the service methods under the names callers
know (``ingest_file``, ``search``, ``store_files``, ``retry_file``, ...), and answers named questions
(``store_exists``, ``file_record``, ``read_file``, ...) so that no caller reaches into its parts.

The rules users expect of stores and ingestion are the Indexer's (:mod:`knowledge.service.indexing`).
Who calls whom and where state lives: ``docs/architecture.md``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Generic, TypeVar

from knowledge.catalog import DONE, Catalog, FileRecord, StoreRecord
from knowledge.config import Settings, load_settings
from knowledge.embeddings import create_embedder
from knowledge.embeddings.base import Embedder
from knowledge.errors import InvalidArgument
from knowledge.evaluation import Evaluations
from knowledge.filestore import open_file_store
from knowledge.filestore.base import StoredFile
from knowledge.llm.config import LlmConfigs
from knowledge.outcomes import IngestResult
from knowledge.portable import Portable
from knowledge.service.indexing import (
    Indexer,
    Progress,
)
from knowledge.service.jobs import JobRegistry
from knowledge.service.search import (
    MultiSearch,
    Searcher,
    SearchResult,
)
from knowledge.service.stores import Stores, StoreSummary
from knowledge.service.templates import DEFAULT_TEMPLATE, TemplateRegistry, VectorStoreTemplate
from knowledge.service.web import ingest_web
from knowledge.sync import FolderSyncs
from knowledge.vectorstore.store import Hit

T = TypeVar("T")


class Latest(Generic[T]):
    """The newest item per key, thread-safe: a registry the workbench keeps for the whole process
    (shared by every browser session), such as the running chat turn of each session."""

    def __init__(self) -> None:
        self._items: dict[Any, T] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> T | None:
        with self._lock:
            return self._items.get(key)

    def swap(self, key: Any, item: T) -> T | None:
        """Make ``item`` the newest for ``key``; returns the one it replaces (or ``None``)."""
        with self._lock:
            previous = self._items.get(key)
            self._items[key] = item
            return previous


@dataclass(frozen=True, slots=True)
class StoredFileUsage:
    """A file of the file store, the names of the stores that hold it, and its status in each
    (``"done"``: searchable there; ``"failed"``: kept for a retry; ``"processing"``, ``"pending"``)."""

    file: Any  # knowledge.filestore.base.StoredFile
    stores: list[str]
    statuses: dict[str, str] = field(default_factory=dict)
    #: The other names the stores give these bytes (the same content uploaded or synced under
    #: another name or path; see knowledge.service.indexing), oldest first.
    aliases: list[str] = field(default_factory=list)

    def labels(self) -> list[str]:
        """``["notes", "papers (failed)"]``: each store, with the status unless it is done."""
        return [s if self.statuses.get(s, DONE) == DONE else f"{s} ({self.statuses[s]})" for s in self.stores]


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
        self.settings = settings or load_settings()
        self.catalog = Catalog.from_settings(self.settings)
        self.files = open_file_store(self.settings)
        self.templates = TemplateRegistry(self.settings, self.catalog)
        self.stores = Stores(self.settings, self.catalog, self.files, self.templates,
                             embedder_factory or self._default_embedder)
        self.indexer = Indexer(self.stores, lambda model: self.embedder(model))
        self.searcher = Searcher(self.stores, lambda model: self.embedder(model))
        #: The newest ingest job per store and the running ones (:mod:`knowledge.service.jobs`).
        self.jobs = JobRegistry(self.catalog)
        self.jobs.attach(self)
        #: The features, handed the parts they use.
        self.portable = Portable(self.settings, self.stores, self.templates, self.indexer, self.catalog, self.files)
        self.syncs = FolderSyncs(self.stores, self.catalog, self.indexer, self.jobs)
        self.evaluations = Evaluations(self.catalog, self.stores, self.searcher, self.indexer, self.save_template)
        #: The newest chat turn per session (:mod:`knowledge.chat.service`), from any browser tab.
        self.chat_turns: Latest[Any] = Latest()

    # -- parts ----------------------------------------------------------------------------------
    def _default_embedder(self, model: str) -> Embedder:
        emb = self.settings.embeddings.model_copy(update={"model": model})
        return create_embedder(self.settings.model_copy(update={"embeddings": emb}))

    def embedder(self, model: str | None = None) -> Embedder:
        """The embedder for ``model`` (default: the default template's), created once."""
        return self.stores.embedder(model)

    def loaded_models(self) -> list[str]:
        return self.stores.loaded_models()

    def backend(self, name: str | None = None):
        """The backend ``name`` (default: the settings'), opened once. Raises ``BackendUnavailable``."""
        return self.stores.backend(name)

    def close(self) -> None:
        self.stores.close()

    # -- stores ---------------------------------------------------------------------------------
    def create_store(self, name: str, template: str = DEFAULT_TEMPLATE) -> StoreRecord:
        """See :meth:`Stores.create`."""
        return self.stores.create(name, template)

    def get_store(self, name: str) -> StoreRecord:
        return self.stores.get(name)

    def store_template(self, record: StoreRecord) -> VectorStoreTemplate:
        return self.stores.template_of(record)

    def vector_store(self, name: str):
        """The ``VectorStore`` facade of an existing store."""
        return self.stores.vector_store(name)

    def store_names(self, *, internal: bool = False) -> list[str]:
        return self.stores.names(internal=internal)

    def list_stores(self, *, internal: bool = False) -> list[StoreSummary]:
        return self.stores.summaries(internal=internal)

    def delete_store(self, name: str) -> None:
        """Delete a store: its chunks, its catalog records, and files no other store uses."""
        self.stores.drop(name)

    def stores_using_template(self, name: str, *, internal: bool = True) -> list[str]:
        return self.stores.stores_using_template(name, internal=internal)

    # -- ingestion (see knowledge.service.indexing) -----------------------------------------------------
    def ingest_file(self, store, source, name=None, **kwargs) -> IngestResult:
        """See :meth:`Indexer.ingest_file`."""
        return self.indexer.ingest_file(store, source, name, **kwargs)

    def ingest_paths(self, store, paths, **kwargs) -> list[IngestResult]:
        """See :meth:`Indexer.ingest_paths`."""
        return self.indexer.ingest_paths(store, paths, **kwargs)

    def ingest_web(self, store: str, url: str, **kwargs: Any) -> list[IngestResult]:
        """See :func:`knowledge.service.web.ingest_web`: the page at ``url`` (``depth``, ``max_pages``:
        its same-site links) into ``store``, each page named by its URL."""
        return ingest_web(self.indexer, store, url, **kwargs)

    def index_text(self, store: str, file_id: str, text: str, file_name: str | None = None) -> IngestResult:
        """See :meth:`Indexer.index_text`: ``text`` as the whole content of file ``file_id`` of ``store``
        (created from the default template when missing), replacing the file's earlier chunks."""
        return self.indexer.index_text(store, file_id, text, file_name)

    def store_files(self, store: str):
        return self.indexer.store_files(store)

    def delete_file(self, store: str, file_id: str, *, keep_file: bool = False) -> int:
        return self.indexer.delete_file(store, file_id, keep_file=keep_file)

    def delete_name(self, store: str, file_id: str, name: str, *, folder: str | None = None) -> int:
        """See :meth:`Indexer.delete_name`: one name off a content; the content with its last name."""
        return self.indexer.delete_name(store, file_id, name, folder=folder)

    def file_names_of(self, store: str, file_id: str | None = None):
        """The names (:class:`~knowledge.catalog.FileName`) in ``store``, of one content or all."""
        return self.catalog.names(store, file_id=file_id)

    def file_attributes(self, store: str, file_id: str) -> dict[str, Any]:
        return self.indexer.file_attributes(store, file_id)

    def set_file_attributes(self, store: str, file_id: str, attributes: dict[str, Any]) -> int:
        return self.indexer.set_file_attributes(store, file_id, attributes)

    def retry_file(self, store: str, file_id: str, **kwargs) -> IngestResult:
        return self.indexer.retry_file(store, file_id, **kwargs)

    def reembed(self, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
        return self.indexer.reembed(store, template, progress)

    # -- search (see knowledge.service.search) ----------------------------------------------------------
    def search(self, store: str, query: str, k: int = 5, **kwargs) -> list[Hit]:
        """The hits of :meth:`Searcher.search` (same arguments)."""
        return self.searcher.search(store, query, k, **kwargs).hits

    def search_result(self, store: str, query: str, k: int = 5, **kwargs: Any) -> SearchResult:
        """The whole :class:`SearchResult` of :meth:`Searcher.search` (same arguments): the hits, and
        the query's vector, the store's distance, with ``top=n`` the best ``n`` without the threshold,
        with ``timings=True`` the embedding and search times (the search playground's view)."""
        return self.searcher.search(store, query, k, **kwargs)

    def search_stores(self, stores, query: str, k: int = 5, **kwargs) -> MultiSearch:
        return self.searcher.search_stores(stores, query, k, **kwargs)

    def rank(self, store: str, query: str, vector: Any, fetch: int, **kwargs):
        return self.searcher.rank(store, query, vector, fetch, **kwargs)

    def lexical_index(self, store: str):
        return self.searcher.lexical_index(store)

    # -- records and files, by name (instead of reaching into the catalog and the file store) -------
    def store_exists(self, name: str) -> bool:
        """Whether store ``name`` exists."""
        return self.stores.exists(name)

    def store_record(self, name: str) -> StoreRecord | None:
        """The record of store ``name``, or ``None`` when there is none."""
        return self.stores.find(name)

    def file_record(self, store: str, file_id: str) -> FileRecord | None:
        """The record of file ``file_id`` in ``store`` (any status), or ``None``."""
        return self.catalog.get_file(store, file_id)

    def file_records(self, store: str) -> list[FileRecord]:
        """The records of ``store``'s files (any status), by name; ``[]`` for an unknown store."""
        return self.catalog.files(store)

    def stores_using_file(self, file_id: str) -> list[str]:
        """The stores holding a record of file ``file_id``, sorted."""
        return self.catalog.stores_using_file(file_id)

    def stored_files(self) -> list[StoredFile]:
        """Every file of the file store (unsorted)."""
        return self.files.list()

    def stored_file(self, file_id: str) -> StoredFile:
        """The file store's record of ``file_id``. Raises ``FileNotFoundInStore``."""
        return self.files.get(file_id)

    def find_stored_file(self, file_id: str) -> StoredFile | None:
        """The file store's record of ``file_id``, or ``None``."""
        return self.files.find(file_id)

    def read_file(self, file_id: str) -> BinaryIO:
        """The bytes of stored file ``file_id`` as a binary stream (use it in a ``with`` block).
        Raises ``FileNotFoundInStore``."""
        return self.files.content(file_id)

    def save_attachment(self, name: str, media_type: str | None, data: bytes | BinaryIO, *,
                        max_bytes: int | None = None, metadata: dict[str, Any] | None = None) -> StoredFile:
        """Keep a file's bytes in the file store without indexing them (a chat's picture, an API
        upload); ``media_type`` ``None`` is guessed from ``name``; ``max_bytes`` defaults to setting
        ``ingest.max_file_bytes``.

        Raises:
            FileTooLarge: over the limit, nothing kept. InvalidArgument: a bad name or media type.
        """
        limit = self.settings.ingest.max_file_bytes if max_bytes is None else max_bytes
        return self.files.save(name, media_type, data, max_bytes=limit, metadata=metadata)

    def forget_file_if_unused(self, file_id: str) -> None:
        """Delete the bytes of ``file_id`` from the file store when no store holds it any more."""
        self.stores.forget_file_if_unused(file_id)

    def llm_configs(self):
        """The LLM and embedding configurations (:class:`knowledge.llm.config.LlmConfigs`)."""
        return LlmConfigs(self.catalog, self.settings)

    # -- the file store ---------------------------------------------------------------------------
    def list_files(self) -> list[StoredFileUsage]:
        """Every file in the file store, newest first, with the stores that use it."""
        files = sorted(self.files.list(), key=lambda f: (f.created, f.id), reverse=True)
        out = []
        for f in files:
            statuses = self.catalog.file_statuses(f.id)
            aliases = [n for n in self.catalog.names_of_file(f.id) if n != f.name] if statuses else []
            out.append(StoredFileUsage(f, list(statuses), statuses, aliases))
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
    def template(self, name: str) -> VectorStoreTemplate:
        """The template ``name``. Raises ``TemplateNotFound``."""
        return self.templates.get(name)

    def template_names(self) -> list[str]:
        return self.templates.names()

    def list_templates(self) -> list[VectorStoreTemplate]:
        return self.templates.list()

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

    def shared_catalog_problem(self) -> str | None:
        """What to set when the default template cannot make stores here -- the catalog is shared
        (``catalog.url``) and ``vector_store.backend`` is per machine (memory, Qdrant's local mode,
        the embedded PostgreSQL) -- or ``None``. The app shows it before anyone uploads."""
        return self.templates.problem(self.templates.get(DEFAULT_TEMPLATE))

    def delete_template(self, name: str) -> None:
        """Delete a template that no store uses (raises ``InvalidArgument`` otherwise)."""
        self.templates.delete(name, in_use_by=self.stores_using_template(name))


__all__ = ["StoredFileUsage", "Workbench"]
