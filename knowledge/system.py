"""The composition root: every part of one data folder, built once, with no access checks.

:class:`System` builds the parts -- settings, the catalog, the file store, the templates,
:class:`~knowledge.service.stores.Stores` (records, backends, embedders, locks),
:class:`~knowledge.service.indexing.Indexer` (the only writer of chunks),
:class:`~knowledge.service.search.Searcher`, the job registry, accounts and sharing
(:class:`~knowledge.people.People`), who may do what (:class:`~knowledge.people.policy.Policy`) --
and hands the features the parts they use (``portable``, ``syncs``, ``evaluations``).

It acts for nobody and checks nothing. Only the entry points hold one (the app's cached resource,
``knowledge serve``, the MCP server, the worker, the CLI's ``main``, tests); everything above them --
pages, routes, commands, tools, the chat -- holds a per-person :class:`knowledge.workbench.Workbench`
made over it. Thread-safe: Streamlit sessions and API requests share one instance.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from knowledge.catalog import Catalog
from knowledge.config import Settings, load_settings
from knowledge.embeddings import create_embedder
from knowledge.embeddings.base import Embedder
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.evaluation import Evaluations
from knowledge.filestore import open_file_store
from knowledge.people import LOCAL_ADMIN, Actor, People
from knowledge.people.policy import Policy
from knowledge.portable import Portable
from knowledge.service.filehome import HomedFileStore
from knowledge.service.indexing import Indexer
from knowledge.service.jobs import JobRegistry
from knowledge.service.search import Searcher
from knowledge.service.stores import Stores, check_store_name
from knowledge.service.templates import TemplateRegistry, VectorStoreTemplate
from knowledge.sources import Sources
from knowledge.sources.engine import JOB_KIND as SOURCE_JOB
from knowledge.sync import FolderSyncs
from knowledge.vectorstore.base import VectorBackend

log = logging.getLogger(__name__)

T = TypeVar("T")


class Latest(Generic[T]):
    """The newest item per key, thread-safe: a registry the system keeps for the whole process
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


class System:
    """Every part of one data folder, unguarded.

    Args:
        settings: defaults to :func:`knowledge.config.load_settings`.
        embedder_factory: ``factory(model_name) -> Embedder``; tests pass a fake. Defaults to the
            bundled / fastembed models of :mod:`knowledge.embeddings`.
        check_file_store: refuse settings that name another file store than the one the catalog
            records while files are stored (:func:`knowledge.service.filehome.check_home`: a
            ``ConfigError`` with the command to run); ``False`` only for ``knowledge files move``.

    Raises:
        ConfigError: the file store named by the settings is not the catalog's (``check_file_store``).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        embedder_factory: Callable[[str], Embedder] | None = None,
        *,
        check_file_store: bool = True,
    ) -> None:
        self.settings = settings or load_settings()
        self.catalog = Catalog.from_settings(self.settings)
        #: The file store the catalog records (:mod:`knowledge.service.filehome`): followed across a
        #: move; ``check_file_store`` refuses settings naming another while files are stored.
        try:
            self.files = HomedFileStore(self.settings, self.catalog, opener=open_file_store, check=check_file_store)
        except BaseException:
            self.catalog.close()
            raise
        self.templates = TemplateRegistry(self.settings, self.catalog)
        self.stores = Stores(
            self.settings, self.catalog, self.files, self.templates, embedder_factory or self._default_embedder
        )
        self.indexer = Indexer(self.stores, lambda model: self.embedder(model))
        self.searcher = Searcher(self.stores, lambda model: self.embedder(model))
        #: The newest ingest job per store and the running ones (:mod:`knowledge.service.jobs`).
        self.jobs = JobRegistry(self.indexer)
        #: The features, handed the parts they use.
        self.portable = Portable(self.settings, self.stores, self.templates, self.indexer, self.catalog, self.files)
        self.syncs = FolderSyncs(self.stores, self.catalog, self.indexer, self.jobs)
        #: Shares, repositories, mailboxes, drives and buckets kept in sync (:mod:`knowledge.sources`):
        #: their runs are jobs any worker takes.
        self.sources = Sources(self.settings, self.catalog, self.stores, self.indexer, quota=self._source_quota)
        self.jobs.kinds[SOURCE_JOB] = self.sources.run_job
        self.evaluations = Evaluations(self.catalog, self.stores, self.searcher, self.indexer, self.save_template)
        #: The newest chat turn per session (:mod:`knowledge.chat.service`), from any browser tab.
        self.chat_turns: Latest[Any] = Latest()
        #: Accounts, sharing, API keys, the audit trail (:mod:`knowledge.people`).
        self.people = People(self.catalog, self.settings)
        #: Who may do what (:mod:`knowledge.people.policy`).
        self.policy = Policy(
            self.people.sharing,
            store_exists=self.stores.exists,
            check_new_name=lambda name: check_store_name(name, new=True),
            file_stores=self.catalog.stores_using_file,
            file_owner=self._file_owner,
            file_readers=self.catalog.file_readers,
        )
        self.people.accounts.reader_gone.append(self._forget_reader)
        #: The name this process's own actions are audited in (no person asked for them): ``system``,
        #: or a worker process's ``worker:<its id>`` (``python -m knowledge worker`` sets it).
        self.actor_name = "system"
        self.sources.on_scheduled = self._audit_scheduled
        #: A move of the files started from this process (``Workbench.start_file_move``): its thread,
        #: target, report or error, under :attr:`file_move_lock`.
        self.file_move: dict[str, Any] = {}
        self.file_move_lock = threading.Lock()

    def _source_quota(self, store: str, add_bytes: int, add_files: int) -> None:
        """A source's file about to be written into ``store``: checked against the quotas of the store
        and of its owner, as the owner's own write (an admin owner is exempt by the same setting).
        Raises ``QuotaExceeded``."""
        owner = self.people.sharing.owner(store) if self.stores.exists(store) else None
        actor = LOCAL_ADMIN
        if owner is not None:
            try:
                actor = self.people.accounts.actor(owner)
            except KnowledgeError:  # the account is gone or deactivated: held to the quotas as a member
                actor = Actor(owner, "member")
        self.people.quotas.check_add(actor, store, owner, add_bytes=add_bytes, add_files=add_files)

    def _forget_reader(self, principal: str) -> None:
        """Take ``principal`` (an account or group just deleted) off the readers of every file naming
        it -- the catalog and the chunks' payloads -- so that a later account or group of the same
        name reads none of them; a file it was the only reader of stays with its store's owners.
        Each change is audited as ``file.readers`` (actor ``system``, ``why``)."""
        for store, file_id, readers in self.catalog.files_naming(principal):
            kept = tuple(r for r in readers if r != principal)
            try:
                chunks = self.indexer.set_file_readers(store, file_id, kept)
            except KnowledgeError as exc:  # the store or file went meanwhile
                log.warning("taking %s off the readers of %s in %s: %s", principal, file_id, store, exc)
                continue
            self.people.audit.record(
                self.actor_name,
                "file.readers",
                store=store,
                target=file_id,
                detail={
                    "before": list(readers),
                    "after": list(kept),
                    "chunks": chunks,
                    "why": f"{principal.replace(':', ' ', 1)} was deleted",
                },
            )

    def _audit_scheduled(self, run: Any) -> None:
        """A source's run its schedule queued from this process, audited as ``source.run`` in
        :attr:`actor_name`'s name."""
        rec = self.sources.get(run.source_id)
        self.people.audit.record(
            self.actor_name, "source.run", store=rec.store, target=rec.name, detail={"run": run.id, "cause": "schedule"}
        )

    def _default_embedder(self, model: str) -> Embedder:
        emb = self.settings.embeddings.model_copy(update={"model": model})
        return create_embedder(self.settings.model_copy(update={"embeddings": emb}))

    def _file_owner(self, file_id: str) -> str | None:
        found = self.files.find(file_id)
        return found.metadata.get("owner") if found is not None else None

    def embedder(self, model: str | None = None) -> Embedder:
        """The embedder for ``model`` (default: the default template's), created once."""
        return self.stores.embedder(model)

    def loaded_models(self) -> list[str]:
        """The embedding models loaded in this process."""
        return self.stores.loaded_models()

    def backend(self, name: str | None = None) -> VectorBackend:
        """The backend ``name`` (default: the settings'), opened once. Raises ``BackendUnavailable``."""
        return self.stores.backend(name)

    def save_template(self, template: VectorStoreTemplate) -> VectorStoreTemplate:
        """Create or update a template, unchecked (who may is the Workbench's question). A template
        that stores use keeps its backend, embedding model and distance (their vectors depend on them).

        Raises:
            InvalidArgument: the built-in name, or such a change to a template in use.
        """
        users = self.stores.stores_using_template(template.name, internal=True)
        if users and template.name in self.catalog.list_templates():
            old = self.templates.get(template.name)
            changed = [f for f in ("backend", "embedding_model", "distance") if getattr(old, f) != getattr(template, f)]
            if changed:
                raise InvalidArgument(
                    f"Template {template.name!r} is used by {', '.join(users)}; its {', '.join(changed)}"
                    " cannot change. Save a new template and re-embed those stores to it."
                )
        return self.templates.save(template)

    def start_scheduler(self) -> None:
        """Queue the sources' runs as they fall due, from this process (the app, ``serve``, a
        worker): :meth:`Sources.start_scheduler <knowledge.sources.engine.Sources.start_scheduler>`,
        waking this process's worker when it queued one."""
        self.sources.start_scheduler(kick=self.jobs.ensure_worker if self.jobs.runs_workers() else None)

    def close(self) -> None:
        """Close the backends and the catalog's connections (a later use reopens them)."""
        self.sources.stop_scheduler()
        self.stores.close()
        self.catalog.close()


__all__ = ["Latest", "System"]
