"""The workbench: the per-person face of a :class:`~knowledge.system.System`, and the one object the
app, the CLI, the servers, the tools and the chat hold.

``Workbench(system, actor=)`` acts for :attr:`Workbench.actor` -- the local admin (everything, as before
accounts) unless made for someone else (:meth:`Workbench.as_user` builds one over the same system).
It keeps the service methods under the names callers know (``ingest_file``, ``search``,
``store_files``, ``retry_file``, ...) and answers named questions (``store_exists``, ``file_record``,
``read_file``, ...) so that no caller reaches into the parts. Each public method is "check -> call ->
audit": the check is :meth:`Policy.check <knowledge.people.policy.Policy.check>` of the action the
method is marked with (:func:`~knowledge.people.policy.checks`), the change is recorded in the audit
trail in the actor's name. The features are typed desks behind the same checks: :class:`PortableDesk`
(``portable``), :class:`SyncDesk` (``syncs``), :class:`EvaluationDesk` (``evaluations``) and
:class:`LlmConfigDesk` (``llm_configs()``).

``Workbench()`` and ``Workbench(settings, embedder_factory)`` build a system of their own and close it
with :meth:`Workbench.close`. The rules users expect of stores and ingestion are the Indexer's
(:mod:`knowledge.service.indexing`). Who calls whom and where state lives: ``docs/architecture.md``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from knowledge.attributes import check_attributes
from knowledge.catalog import (
    DONE,
    FAILED,
    FileCounts,
    FilePage,
    FileQuery,
    FileRecord,
    StoreRecord,
    StoreSettings,
    SyncedFolder,
)
from knowledge.config import Settings
from knowledge.embeddings.base import Embedder
from knowledge.errors import FileNotFoundInStore, InvalidArgument, PermissionDenied, QuotaExceeded, StoreNotFound
from knowledge.evaluation import Evaluations
from knowledge.evaluation.questions import Question, QuestionSet
from knowledge.evaluation.runs import EvalRun, RunNotFound
from knowledge.evaluation.trials import ChunkTrial
from knowledge.filestore.base import StoredFile
from knowledge.llm.config import LlmConfig, LlmConfigs
from knowledge.outcomes import IngestResult, Outcome, can_retry, needs_password
from knowledge.people import LOCAL_ADMIN, Actor, AuditEvent, Level, User
from knowledge.people.desk import AccountDesk
from knowledge.people.policy import checks, describe_readers, parse_readers
from knowledge.people.quotas import Limit, RateDecision, Usage, UsageReport, amount
from knowledge.people.sso import SingleSignOn
from knowledge.portable import Portable
from knowledge.portable.backup import BackupResult, RestoreResult
from knowledge.portable.bundle import Progress as BundleProgress
from knowledge.portable.bundle import open_bundle
from knowledge.portable.exporting import ExportResult
from knowledge.portable.importing import ImportResult
from knowledge.service.filehome import Home, MoveReport, cleanup_old, move_files
from knowledge.service.health import QueueCollector, Readiness
from knowledge.service.indexing import Progress
from knowledge.service.jobs import IngestJob, Item, source_size
from knowledge.service.search import MultiSearch, Searcher, SearchMode, SearchRequest, SearchResult, search_request
from knowledge.service.stores import StoreSummary
from knowledge.service.templates import DEFAULT_TEMPLATE, VectorStoreTemplate
from knowledge.service.web import WebJob, ingest_web
from knowledge.sources import RunItem, RunRecord, RunReport, Source, SourcePlan, SourceRecord, Sources
from knowledge.sync import FolderSync, FolderSyncs
from knowledge.system import System
from knowledge.vectorstore.base import AnyOf, VectorBackend
from knowledge.vectorstore.readable import ReadableCollection
from knowledge.vectorstore.scoring import DISTANCE_ORDER
from knowledge.vectorstore.store import Hit, VectorStore

if TYPE_CHECKING:
    from knowledge.access import LocalFolders

#: The policy action of each sharing level (:meth:`Workbench.authorize`).
_STORE_ACTION: dict[str, str] = {"read": "store.read", "write": "store.write", "owner": "store.own"}
#: The most audit events a member's read looks through to find their own (:meth:`Workbench.audit_events`).
AUDIT_SCAN = 20_000


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


@dataclass(frozen=True, slots=True)
class StoredFilePage:
    """One page of the file store as :meth:`Workbench.stored_file_page` reads it: ``usages`` (newest
    first), ``total`` files matching, their ``total_bytes`` and how many of them no store
    :attr:`actor` may read uses (``unused``): the page's figures are the search's."""

    usages: list[StoredFileUsage]
    total: int
    total_bytes: int
    unused: int
    offset: int = 0


#: The actions :meth:`Workbench.bulk_files` takes on many files of a store at once.
BULK_ACTIONS = ("retry", "delete", "move", "readers")


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What :meth:`Workbench.bulk_files` did: the ``action``, the names of the files it ``acted`` on
    (a retry or a move: queued), those it ``skipped`` with why, in words (``(name, reason)``), the
    batches it queued (a retry's in the store, a move's in the other store), and ``warnings`` in
    words (an admin's move that took someone past a quota)."""

    action: str
    acted: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    jobs: list[IngestJob] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FailureKind:
    """A failure as :func:`~knowledge.outcomes.can_retry` judges it: its error class name and reason."""

    error: str | None
    reason: str | None


class Workbench:
    """Stores, templates, files and ingestion over one data folder, as one person may use them.

    Args:
        system: the :class:`~knowledge.system.System` to act over; or, for a workbench with a system
            of its own (closed by :meth:`close`), its settings (default
            :func:`knowledge.config.load_settings`).
        embedder_factory: with a system of its own: ``factory(model_name) -> Embedder``; tests pass a
            fake. Defaults to the bundled / fastembed models of :mod:`knowledge.embeddings`.
        actor: who it acts for (default: the local admin).
        check_file_store: with a system of its own: refuse settings that name another file store than the one the catalog
            records while files are stored (:func:`knowledge.service.filehome.check_home`: a
            ``ConfigError`` with the command to run); ``False`` only for ``knowledge files move``.

    Thread-safe; cheap to make (one per request or page run).
    """

    def __init__(
        self,
        system: System | Settings | None = None,
        embedder_factory: Callable[[str], Embedder] | None = None,
        *,
        actor: Actor = LOCAL_ADMIN,
        check_file_store: bool = True,
    ) -> None:
        if isinstance(system, System):
            self._system, self._owns_system = system, False
        else:  # Workbench() / Workbench(settings, embedder_factory): a system of its own, closed with it
            self._system = System(system, embedder_factory, check_file_store=check_file_store)
            self._owns_system = True
        #: The settings of the data folder (read them; changing them changes nothing).
        self.settings: Settings = self._system.settings
        #: Who this workbench acts for (:meth:`as_user` makes one for someone else).
        self.actor: Actor = actor
        #: The features, behind this actor's checks (typed desks).
        self.portable = PortableDesk(self, self._system.portable)
        self.syncs = SyncDesk(self, self._system.syncs)
        self.sources = SourceDesk(self, self._system.sources)
        self.evaluations = EvaluationDesk(self, self._system.evaluations)

    # -- who is asking --------------------------------------------------------------------------
    @checks("actor.switch")
    def as_user(self, actor: Actor) -> Workbench:
        """The workbench of ``actor`` over the same system (nothing is reopened): every store method
        checks ``actor``'s access (:meth:`authorize`), the store lists hold only what ``actor`` may
        see, and the features (``portable``, ``syncs``, ``evaluations``) are behind the same checks.
        Cheap; make one per request or page run."""
        return Workbench(self._system, actor=actor)

    @property
    def accounts(self) -> AccountDesk:
        """Account management as :attr:`actor` may do it, checked and audited once
        (:class:`~knowledge.people.desk.AccountDesk`)."""
        return AccountDesk(self._system.people, self._system.policy, self.actor)

    @checks("store.list")
    def level(self, store: str) -> Level | None:
        """What :attr:`actor` may do to ``store``: ``"owner"``, ``"write"``, ``"read"`` or ``None``."""
        return self._system.policy.level(self.actor, store)

    @checks("store.read")
    def authorize(self, store: str, level: Level = "read", *, create: bool = False) -> None:
        """Check that :attr:`actor` may do ``level`` to ``store`` (:meth:`Policy.check
        <knowledge.people.policy.Policy.check>` with ``store.read`` / ``store.write`` / ``store.own``);
        with ``create``, a store that does not exist yet passes (``store.create``: the caller makes
        it, and :meth:`claim` gives it its owner).

        Raises:
            StoreNotFound: the actor may not see the store (the same words as a store that does not
                exist: its name is not confirmed). PermissionDenied: they see it but may not do this.
            InvalidArgument: with ``create``, a name that is taken or not allowed.
        """
        if create and (not self._system.stores.exists(store) or self.level(store) is None):
            self._check("store.create", store)
            return
        self._check(_STORE_ACTION[level], store)

    def _check(self, action: str, resource: str | None = None) -> None:
        """:meth:`Policy.check <knowledge.people.policy.Policy.check>` of :attr:`actor` (raises its errors)."""
        self._system.policy.check(self.actor, action, resource)

    def _allowed(self, action: str, resource: str | None = None) -> bool:
        """:meth:`Policy.allowed <knowledge.people.policy.Policy.allowed>` of :attr:`actor`."""
        return self._system.policy.allowed(self.actor, action, resource)

    @checks("account.manage")
    def require_admin(self, what: str = "do this") -> None:
        """Raises ``PermissionDenied`` unless :attr:`actor` is an admin (or the local admin)."""
        if not self._allowed("account.manage"):  # the words are the caller's
            raise PermissionDenied(f"Only an admin may {what}.")

    # -- where the files live (knowledge.service.filehome) ----------------------------------------
    @checks("system.read")
    def file_store_home(self) -> Home:
        """The catalog's record of where the files are, a move's target, phase and progress."""
        return self._system.files.home(fresh=True)

    @checks("files.move")
    def move_files(
        self, to: str, *, delete_old: bool = False, progress: Callable[[MoveReport, int], None] | None = None
    ) -> MoveReport:
        """Move every stored file to the file store ``to`` as the settings name it, then switch over
        (:func:`knowledge.service.filehome.move_files`: by id, streamed, SHA-256 verified, resumable);
        admins only; recorded in the audit trail.

        Raises:
            PermissionDenied: not an admin. InvalidArgument, KnowledgeError, BackendUnavailable,
                ConfigError: see :func:`knowledge.service.filehome.move_files`.
        """
        self._check("files.move")
        report = move_files(self.settings, self._system.catalog, to, delete_old=delete_old, progress=progress)
        self.record(
            "files.move",
            detail={"to": report.target, "copied": report.copied, "switched": report.switched, "deleted": report.deleted},
        )
        return report

    @checks("files.move")
    def start_file_move(self, to: str, *, delete_old: bool = False) -> None:
        """:meth:`move_files` in a background thread of this process (the Settings page's button):
        its progress is in :meth:`file_store_home` (any process), its end in :meth:`file_move_state`.

        Raises:
            PermissionDenied: not an admin. InvalidArgument: a move started here is still running.
        """
        self._check("files.move")
        system = self._system
        with system.file_move_lock:
            running = system.file_move.get("thread")
            if running is not None and running.is_alive():
                raise InvalidArgument("A move of the files is running already; wait for it to end.")

            def run() -> None:
                try:
                    system.file_move["report"] = self.move_files(to, delete_old=delete_old)
                except Exception as exc:  # shown on the page; a re-run resumes
                    system.file_move["error"] = str(exc)

            thread = threading.Thread(target=run, name="knowledge-file-move", daemon=True)
            system.file_move.clear()
            system.file_move.update(thread=thread, to=to)
            thread.start()

    @checks("system.read")
    def file_move_state(self) -> dict[str, Any]:
        """The move started by :meth:`start_file_move` in this process: ``{"running": bool, "to": str,
        "report": MoveReport | None, "error": str | None}`` (``{}`` when none was started)."""
        state = dict(self._system.file_move)
        if not state:
            return {}
        thread = state.pop("thread", None)
        return {
            "running": thread is not None and thread.is_alive(),
            "to": state.get("to"),
            "report": state.get("report"),
            "error": state.get("error"),
        }

    @checks("files.cleanup")
    def delete_old_file_copies(self) -> int:
        """Delete the old copies a finished move left (:func:`knowledge.service.filehome.cleanup_old`);
        admins only. Returns how many were deleted. Raises PermissionDenied, InvalidArgument."""
        self._check("files.cleanup")
        deleted = cleanup_old(self.settings, self._system.catalog)
        self.record("files.cleanup", detail={"deleted": deleted})
        return deleted

    @checks("store.create")
    def claim(self, store: str) -> None:
        """Make :attr:`actor` the owner of ``store``, a store they just made (an owner row left by a
        batch that never made the store is replaced)."""
        if not self.actor.local:
            self._system.people.sharing.set_owner(store, self.actor.username)

    @checks("audit.record")
    def record(
        self, action: str, *, store: str | None = None, target: str | None = None, detail: dict[str, Any] | None = None
    ) -> None:
        """Add an event to the audit trail in :attr:`actor`'s name (:mod:`knowledge.people.audit`)."""
        self._system.people.audit.record(self.actor.audit_name, action, store=store, target=target, detail=detail)

    @checks("audit.read")
    def audit_events(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        store: str | None = None,
        since: Any = None,
        limit: int = 500,
        before: str | None = None,
    ) -> list[AuditEvent]:
        """The audit trail as :attr:`actor` may read it, newest first (at most ``limit``), filtered as
        :meth:`knowledge.people.audit.Audit.events`: an admin (or the local admin) reads every event;
        a member the events of the stores they may use now and those about their own account (its
        actor or target is them), but for those about a file they may not read (access per document).
        ``before`` (an event's id): only older events, the next page of a keyset (the Audit page's).
        One rule for the app's Audit page, the CLI and the REST API."""
        if self._allowed("audit.read_all"):
            return self._system.people.audit.events(
                actor=actor, action=action, store=store, since=since, limit=limit, before=before
            )
        if store is not None and not self._allowed("store.read", store):
            return []
        scan = self._system.people.audit.events(
            actor=actor,
            action=action,
            store=store,
            since=since,
            limit=min(AUDIT_SCAN, max(limit, 1) * 20),
            before=before,
        )
        seen = set(self.visible({e.store for e in scan if e.store is not None}))
        mine = [e for e in scan if (e.store in seen if e.store is not None else self.actor.username in (e.actor, e.target))]
        withheld: dict[str, tuple[set[str], set[str]]] = {}  # per store, read once for the whole scan
        return [e for e in (self._readable_event(e, withheld) for e in mine) if e is not None][:limit]

    def _readable_event(self, event: AuditEvent, withheld: dict[str, tuple[set[str], set[str]]]) -> AuditEvent | None:
        """``event`` as :attr:`actor` may read it: ``None`` for one about a file of its store they may
        not read (its id as target, or its name), the names of such files taken out of a batch's list.
        ``withheld`` caches each store's hidden ids and names."""
        if event.store is None:
            return event
        after = event.detail.get("after")
        if (
            event.action == "file.readers"
            and after is not None
            and not self._system.policy.reads(self.actor, event.store, after)
        ):
            return None  # readers that leave them out (also of a file deleted since)
        if event.store not in withheld:
            hidden = self._hidden_files(event.store)
            withheld[event.store] = (hidden, self._hidden_names(event.store) if hidden else set())
        hidden, names = withheld[event.store]
        if not hidden:
            return event
        if event.target in hidden or event.target in names or event.detail.get("name") in names:
            return None
        files = event.detail.get("files")
        if isinstance(files, list) and any(f in names for f in files):
            kept = [f for f in files if f not in names]
            if not kept:
                return None
            return replace(event, detail={**event.detail, "files": kept, "count": len(kept)})
        return event

    @checks("store.list")
    def visible(self, names: Iterable[str]) -> list[str]:
        """The ``names`` :attr:`actor` may see, in their order."""
        return self._system.policy.visible(self.actor, names)

    def _readable_file(self, file_id: str) -> bool:
        """Whether :attr:`actor` may read stored file ``file_id`` (``file.read``): a store they see
        holds it and lets them read it (its readers, :meth:`Policy.reads
        <knowledge.people.policy.Policy.reads>`), or it is an attachment they saved."""
        return self._system.policy.allowed(self.actor, "file.read", file_id)

    # -- access per document (knowledge.people.policy.Policy.reads) ---------------------------------
    def _reader_where(self, store: str) -> dict[str, AnyOf] | None:
        """The filter that keeps :attr:`actor`'s searches and reads of ``store`` to the chunks they
        may read (``{"readers": AnyOf(principals)}``), or ``None`` when they read every chunk: the
        store has never restricted a file, or they are among its owners."""
        who = self._system.policy.reader_filter(self.actor, store)
        if who is None or not self._system.catalog.filters_readers(store):
            return None
        return {"readers": AnyOf(who)}

    def _with_readers(self, store: str, where: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """``where`` and :meth:`_reader_where` of ``store`` together (the reader filter wins)."""
        own = self._reader_where(store)
        if own is None:
            return dict(where) if where is not None else None
        return {**(where or {}), **own}

    def _hidden_files(self, store: str) -> set[str]:
        """The ids of the files of ``store`` that :attr:`actor` may not read (``set()`` for its owners)."""
        if self._system.policy.reader_filter(self.actor, store) is None:
            return set()
        restricted = self._system.catalog.restricted_files(store)
        return {fid for fid, who in restricted.items() if not self._system.policy.reads(self.actor, store, who)}

    def _hidden_names(self, store: str) -> set[str]:
        """Every name (aliases too) of the files of ``store`` :attr:`actor` may not read."""
        hidden = self._hidden_files(store)
        if not hidden:
            return set()
        return {n for f in self._system.catalog.files(store) if f.file_id in hidden for n in f.names}

    def _require_readable(self, store: str, file_id: str, words: str | None = None) -> None:
        """Raise ``FileNotFoundInStore`` when :attr:`actor` may not read file ``file_id`` of ``store``,
        in ``words``: those the call says of an id the store does not hold (default: "Store ... has
        no file with the id ...")."""
        if file_id in self._hidden_files(store):
            raise FileNotFoundInStore(words or f"Store {store!r} has no file with the id {file_id!r}.")

    @checks("store.read")
    def unreadable_files(self, store: str) -> set[str]:
        """The ids of the files of ``store`` that :attr:`actor` may not read (``set()`` for its
        owners): what a surface keeping rows of its own about a store's files (the REST API's files
        being added) leaves out. Needs read access (``StoreNotFound`` otherwise)."""
        self.authorize(store)
        return self._hidden_files(store)

    @checks("store.read")
    def reads(self, store: str, readers: Iterable[str] | None) -> bool:
        """Whether :attr:`actor` may read a file of ``store`` whose readers are ``readers`` (``None``:
        it inherits the store's sharing; :meth:`Policy.reads <knowledge.people.policy.Policy.reads>`):
        e.g. a file queued with ``submit_batch(readers=)`` before its record exists. Needs read
        access (``StoreNotFound`` otherwise)."""
        self.authorize(store)
        return self._system.policy.reads(self.actor, store, None if readers is None else tuple(readers))

    @checks("store.read")
    def readable_result(self, store: str, result: IngestResult) -> IngestResult:
        """``result`` (of ingesting a file into ``store``) as :attr:`actor` may read it: a file of the
        store they may not read is never named -- a duplicate (or unchanged copy) of one is told
        without that file's id, name and counts, the earlier version a new one replaced without its
        id. Other results are returned as they are."""
        other = result.outcome in (Outcome.DUPLICATE, Outcome.UNCHANGED) and result.file_id is not None
        if not other and result.replaced_file_id is None:
            return result
        hidden = self.unreadable_files(store)
        if other and result.file_id in hidden:
            result = replace(
                result,
                message=f"{result.name} has the same bytes as a file already in {store!r}; not indexed twice.",
                file_id=None,
                chunks=0,
                pages=None,
            )
        if result.replaced_file_id in hidden:
            result = replace(result, replaced_file_id=None)
        return result

    @checks("store.read")
    def file_readers(self, store: str, file_id: str) -> tuple[str, ...] | None:
        """Who may read file ``file_id`` of ``store``: ``None`` when it inherits the store's sharing,
        else its principals (``"user:<username>"``, ``"group:<name>"``). Needs read access to the store
        and to the file.

        Raises:
            StoreNotFound. FileNotFoundInStore: no such file, or one :attr:`actor` may not read.
        """
        self.authorize(store)
        self._require_readable(store, file_id)
        rec = self._system.catalog.get_file(store, file_id)
        if rec is None:
            raise FileNotFoundInStore(f"Store {store!r} has no file with the id {file_id!r}.")
        return rec.readers

    @checks("store.write")
    def set_file_readers(self, store: str, file_id: str, readers: str | Iterable[str] | None) -> tuple[str, ...] | None:
        """Set who may read file ``file_id`` of ``store`` (needs write access to the store and read
        access to the file): ``readers`` as :func:`~knowledge.people.policy.parse_readers` reads them
        (``"group:hr, user:ana"``, a list, ``"everyone"``/``None`` for whoever may read the store);
        each user and group must exist (a username in any case is matched to its account). The
        store's owners (its owner, the admins with ``accounts.admins_see_all``) always read every
        file. Searches, file lists, counts, the viewer, exports and evaluations keep to it from the
        next request on. Recorded in the audit trail as ``file.readers`` with the old and new readers.
        Returns the readers as stored.

        Raises:
            StoreNotFound, PermissionDenied (read-only). FileNotFoundInStore: no such file, or one
            :attr:`actor` may not read. InvalidArgument: a reader badly written, an unknown user or group.
        """
        self.authorize(store, "write")
        self._require_readable(store, file_id)
        wanted = self._checked_readers(readers)
        rec = self._system.catalog.get_file(store, file_id)
        if rec is None:
            raise FileNotFoundInStore(f"Store {store!r} has no file with the id {file_id!r}.")
        if wanted == rec.readers:
            return wanted
        chunks = self._system.indexer.set_file_readers(store, file_id, wanted)
        self.record(
            "file.readers",
            store=store,
            target=file_id,
            detail={
                "name": rec.file_name,
                "before": list(rec.readers) if rec.readers is not None else None,
                "after": list(wanted) if wanted is not None else None,
                "readers": describe_readers(wanted),
                "chunks": chunks,
            },
        )
        return wanted

    @checks("account.list")
    def check_readers(self, readers: str | Iterable[str] | None) -> tuple[str, ...] | None:
        """``readers`` as :meth:`set_file_readers` would store them, checked without setting anything
        (a surface checks every file of a request before it starts one): ``None`` for everyone who
        may read the store, else the principals, each user resolved to its account.

        Raises:
            InvalidArgument: a reader badly written, an unknown user or group (in words).
        """
        return self._checked_readers(readers)

    def _checked_readers(self, readers: str | Iterable[str] | None) -> tuple[str, ...] | None:
        """:func:`parse_readers` with each user resolved to its account and each group checked."""
        parsed = parse_readers(readers)
        if parsed is None:
            return None
        accounts = self._system.people.accounts
        groups = accounts.groups()
        out: list[str] = []
        for principal in parsed:
            kind, _, name = principal.partition(":")
            if kind == "user":
                user = accounts.get(name)
                if user is None:
                    raise InvalidArgument(f"There is no account {name!r} to let read this file.")
                principal = f"user:{user.username}"
            elif name not in groups:
                raise InvalidArgument(f"There is no group {name!r} to let read this file.")
            if principal not in out:
                out.append(principal)
        return tuple(out)

    # -- parts ----------------------------------------------------------------------------------
    @checks("system.read")
    def readiness(self) -> Readiness:
        """The checks of ``/readyz`` over this system's parts (catalog, file store, default backend,
        embedding model); they read no store, so a probe needs no one's access."""
        return Readiness(self._system.stores, timeout=self.settings.ops.ready_timeout_seconds)

    @checks("system.read")
    def queue_collector(self) -> QueueCollector:
        """The queue's gauges for ``/metrics``, read from this system's catalog at each scrape."""
        return QueueCollector(self._system.catalog)

    @checks("system.read")
    def embedder(self, model: str | None = None) -> Embedder:
        """The embedder for ``model`` (default: the default template's), created once."""
        return self._system.embedder(model)

    @checks("system.read")
    def loaded_models(self) -> list[str]:
        return self._system.loaded_models()

    @checks("system.read")
    def backend(self, name: str | None = None) -> VectorBackend:
        """The backend ``name`` (default: the settings'), opened once. Raises ``BackendUnavailable``."""
        return self._system.backend(name)

    @checks("system.read")
    def close(self) -> None:
        """Close the system this workbench made for itself (``Workbench()``, ``Workbench(settings)``);
        a workbench over an entry point's system leaves it open (the entry point closes it)."""
        if self._owns_system:
            self._system.close()

    @checks("system.read")
    def system_id(self) -> int:
        """Which system this workbench is over (equal for two workbenches over the same one while it
        lives): the key of a process-wide cache, such as the app's chat service."""
        return id(self._system)

    @checks("system.read")
    def same_system(self, other: Workbench) -> bool:
        """Whether ``other`` is over the same system as this workbench."""
        return other._system is self._system

    # -- who is who: sign-in and the account directory (knowledge.people) ------------------------
    @checks("actor.switch")
    def actor_of(self, username: str) -> Actor:
        """The :class:`~knowledge.people.Actor` of account ``username`` (its role and groups, read
        now), for :meth:`as_user` at an entry point (``--user``, the MCP server's ``user``).

        Raises:
            AuthenticationFailed: there is no such account.
        """
        return self._system.people.accounts.actor(username)

    @checks("account.join")
    def sign_in(self, username: str, password: str) -> tuple[Actor, str]:
        """See :meth:`People.sign_in <knowledge.people.People.sign_in>`: ``(actor, session token)``;
        recorded in the audit trail. Raises ``AuthenticationFailed``."""
        return self._system.people.sign_in(username, password)

    @checks("account.join")
    def sign_out(self, token: str | None, actor: Actor | None = None) -> None:
        """End the app session ``token`` (recorded as ``actor``'s ``user.sign_out``)."""
        self._system.people.sign_out(token, actor)

    @checks("account.join")
    def session_actor(self, token: str | None) -> Actor:
        """Who the app session ``token`` is signed in as. Raises ``AuthenticationFailed``."""
        return self._system.people.session_actor(token)

    @checks("account.join")
    def key_actor(self, secret: str | None) -> Actor:
        """Who a request with API key ``secret`` acts as. Raises ``AuthenticationFailed``."""
        return self._system.people.key_actor(secret)

    @checks("account.join")
    def single_sign_on(self) -> SingleSignOn:
        """The mapping of a provider's identities to the accounts (:mod:`knowledge.people.sso`)."""
        return self._system.people.single_sign_on()

    @checks("account.list")
    def directory(self) -> list[User]:
        """Every account, by username: whom one may share a store with or give it to, and the
        display names the pages show."""
        return self._system.people.accounts.users()

    @checks("account.list")
    def find_user(self, username: str) -> User | None:
        """The account ``username`` (any case), or ``None``."""
        return self._system.people.accounts.get(username)

    @checks("account.list")
    def group_names(self) -> list[str]:
        """The names of the groups, sorted (whom one may share a store with)."""
        return sorted(self._system.people.accounts.groups())

    @checks("store.list")
    def levels(self, names: Iterable[str]) -> dict[str, Level]:
        """``{store: level}`` for the ``names`` :attr:`actor` may see (``"owner"``, ``"write"``, ``"read"``)."""
        return self._system.people.sharing.levels(self.actor, list(names))

    # -- jobs (knowledge.service.jobs) ----------------------------------------------------------------
    @checks("system.read")
    def runs_workers(self) -> bool:
        """Whether this process's workers take any job (``ingest.worker_threads`` above 0)."""
        return self._system.jobs.runs_workers()

    @checks("system.read")
    def ensure_worker(self) -> None:
        """Make sure this process's worker threads run (:meth:`JobRegistry.ensure_worker
        <knowledge.service.jobs.JobRegistry.ensure_worker>`)."""
        self._system.jobs.ensure_worker()

    @checks("store.list")
    def shown_job(self, store: str, mine: IngestJob | None = None) -> IngestJob | None:
        """The batch a page shows for ``store`` (:meth:`IngestJob.visible_for
        <knowledge.service.jobs.IngestJob.visible_for>`): the newest of this process, else ``mine``."""
        shown = IngestJob.visible_for(self._system.jobs, store, mine)
        if shown is not None and shown is not mine and not self._may_see_batch(store, shown):
            return mine
        return shown

    def _may_see_batch(self, store: str, job: IngestJob) -> bool:
        """Whether :attr:`actor` may see the progress of ``job`` (its file names): a batch restricted
        to readers (``submit_batch(readers=)``) only by them and the store's owners; nor a batch
        with a file they may not read (a new version of a restricted name keeps its readers), by
        its name or by the result's id."""
        readers = job.options.get("readers")
        if readers is not None and not self._system.policy.reads(self.actor, store, readers):
            return False
        hidden = self._hidden_files(store)
        if not hidden:
            return True
        names = {n.name for n in self._system.catalog.names(store) if n.file_id in hidden}
        return not any(f.name in names or (f.result is not None and f.result.file_id in hidden) for f in job.files)

    @checks("store.list")
    def ingesting(self, store: str) -> bool:
        """Whether a job of this process is ingesting into ``store`` now."""
        return IngestJob.running_for(self._system.jobs, store)

    # -- stores ---------------------------------------------------------------------------------
    @checks("store.create")
    def create_store(self, name: str, template: str = DEFAULT_TEMPLATE) -> StoreRecord:
        """See :meth:`Stores.create`; the new store is :attr:`actor`'s, private."""
        existed = self._system.stores.exists(name)
        self.authorize(name, "read", create=True)
        record = self._system.stores.create(name, template)
        if not existed:
            self.claim(name)
            self.record("store.create", store=name, detail={"template": template})
        return record

    @checks("store.read")
    def get_store(self, name: str) -> StoreRecord:
        self.authorize(name)
        return self._system.stores.get(name)

    @checks("template.read")
    def store_template(self, record: StoreRecord) -> VectorStoreTemplate:
        return self._system.stores.template_of(record)

    @checks("store.read")
    def vector_store(self, name: str):
        """The ``VectorStore`` facade of an existing store (read access; writes through it are the
        caller's to authorize)."""
        self.authorize(name)
        vs = self._system.stores.vector_store(name)
        own = self._reader_where(name)
        if own is None:
            return vs
        return VectorStore(ReadableCollection(vs.collection, own), distance=vs.distance)

    @checks("store.list")
    def store_names(self, *, internal: bool = False) -> list[str]:
        """The stores :attr:`actor` may see, sorted."""
        return self.visible(self._system.stores.names(internal=internal))

    @checks("store.list")
    def list_stores(self, *, internal: bool = False) -> list[StoreSummary]:
        """The stores :attr:`actor` may see, with their counts."""
        summaries = self._system.stores.summaries(internal=internal)
        seen = set(self.visible(s.record.name for s in summaries))
        return [self._readable_summary(s) for s in summaries if s.record.name in seen]

    def _readable_summary(self, summary: StoreSummary) -> StoreSummary:
        """``summary`` with the files and chunks :attr:`actor` may not read left out of its counts
        (and its size on disk, which would tell of them)."""
        hidden = self._hidden_files(summary.record.name)
        if not hidden:
            return summary
        gone = [f for f in self._system.catalog.files(summary.record.name) if f.file_id in hidden and f.status == DONE]
        return replace(
            summary,
            files=max(0, summary.files - len(gone)),
            chunks=max(0, summary.chunks - sum(f.chunks for f in gone)),
            disk_bytes=None,
        )

    @checks("store.own")
    def delete_store(self, name: str) -> None:
        """Delete a store: its chunks, its catalog records, and files no other store uses (its owner,
        or an admin); the sources that filled it are removed with it (a later store of the same name
        is not filled by them). Raises ``StoreNotFound``, ``PermissionDenied``."""
        self.authorize(name, "owner")
        sources = [s.name for s in self._system.sources.records(name)]
        for source in sources:  # first: no run of them refills the store while it goes
            self._system.sources.remove(source, delete_files=False)
        self._system.stores.drop(name)
        self._system.people.sharing.forget(name)
        self._system.people.quotas.forget("store", name)  # a later store of the name starts from the settings
        self.record("store.delete", store=name, detail={"sources_removed": sources} if sources else None)

    @checks("store.list")
    def stores_using_template(self, name: str, *, internal: bool = True) -> list[str]:
        return self.visible(self._system.stores.stores_using_template(name, internal=internal))

    # -- sharing ----------------------------------------------------------------------------------
    @checks("store.read")
    def store_owner(self, name: str) -> str | None:
        """The username owning store ``name`` (``None``: the admins'). Needs read access."""
        self.authorize(name)
        return self._system.people.sharing.owner(name)

    @checks("store.read")
    def store_grants(self, name: str):
        """Whom store ``name`` is shared with (:class:`~knowledge.people.Grant`). Needs read access."""
        self.authorize(name)
        return self._system.people.sharing.grants(name)

    @checks("store.own")
    def share_store(self, name: str, kind: str, principal: str, level: str):
        """Share store ``name`` with a user, a group, or everyone (``kind``), to ``read`` or ``write``
        (its owner, or an admin).

        Raises:
            StoreNotFound, PermissionDenied; InvalidArgument: a bad kind or level, an unknown user or group.
        """
        self.authorize(name, "owner")
        if kind == "user":
            principal = self._system.people.accounts.require(principal).username
        elif kind == "group" and principal not in self._system.people.accounts.groups():
            raise InvalidArgument(f"There is no group {principal!r}.")
        grant = self._system.people.sharing.share(name, kind, principal, level)
        self.record("store.share", store=name, target=grant.principal or "everyone", detail={"kind": kind, "level": level})
        return grant

    @checks("store.own")
    def unshare_store(self, name: str, kind: str, principal: str) -> bool:
        """Take back a grant of store ``name`` (its owner, or an admin)."""
        self.authorize(name, "owner")
        if kind == "user":
            accounts = self._system.people.accounts
            principal = (accounts.get(principal) or accounts.require(principal)).username
        gone = self._system.people.sharing.unshare(name, kind, principal)
        if gone:
            self.record("store.unshare", store=name, target=principal or "everyone", detail={"kind": kind})
        return gone

    @checks("store.own")
    def give_store(self, name: str, username: str) -> None:
        """Make ``username`` the owner of store ``name`` (its owner, or an admin)."""
        self.authorize(name, "owner")
        user = self._system.people.accounts.require(username)
        self._system.people.sharing.set_owner(name, user.username)
        self.record("store.owner", store=name, target=user.username)

    # -- quotas and rates (knowledge.people.quotas) ----------------------------------------------
    @checks("usage.read", "quota.manage")
    def usage(self, scope: str = "user", name: str | None = None) -> UsageReport:
        """The use and quotas of ``scope`` ``name``: ``"user"`` (default: :attr:`actor`'s own),
        ``"group"`` or ``"store"``. One's own needs nothing; anyone else's an admin (``quota.manage``).

        Raises:
            PermissionDenied: a member asking about someone or something else. InvalidArgument: a bad scope.
        """
        if scope not in ("user", "group", "store"):
            raise InvalidArgument(f"Usage is of a user, a group or a store, not {scope!r}.", param="scope")
        own = scope == "user" and name in (None, self.actor.username)
        if not own:
            self._check("quota.manage")
        return self._system.people.quotas.report(scope, self.actor.username if name is None else name)

    @checks("usage.read")
    def usage_exempt(self) -> bool:
        """Whether :attr:`actor` is never refused by a quota or a rate (an admin, with
        ``quotas.admins_exempt``)."""
        return self._system.people.quotas.exempt(self.actor)

    @checks("quota.manage")
    def usage_by_store(self) -> list[tuple[str, str | None, Usage, dict[str, Limit]]]:
        """Every store's use, owner and quotas: ``[(store, owner, usage, {measure: limit})]``, by name
        (an admin's: People → Usage, ``GET /v1/usage?by=store``)."""
        self._check("quota.manage")
        q = self._system.people.quotas
        used, owners = q.by_store(), q.owners()
        names = sorted(set(used) | set(self._system.stores.names()))
        return [(n, owners.get(n), used.get(n, Usage()), q.limits("store", n)) for n in names]

    @checks("quota.manage")
    def usage_by_user(self) -> list[UsageReport]:
        """Every account's use and quotas, by username (an admin's)."""
        self._check("quota.manage")
        q = self._system.people.quotas
        used = q.by_user()
        return [
            UsageReport("user", u.username, used.get(u.username, Usage()), q.limits("user", u.username))
            for u in sorted(self._system.people.accounts.users(), key=lambda u: u.username)
        ]

    @checks("quota.manage")
    def quota_overrides(self) -> list[Limit]:
        """The quotas an admin set for one person, group or store."""
        self._check("quota.manage")
        return self._system.people.quotas.overrides()

    @checks("quota.manage")
    def set_quota(self, scope: str, name: str, measure: str, limit: int | None) -> Limit:
        """Set ``scope`` ``name``'s own quota on ``measure`` (``0``: unlimited; ``None``: back to the
        setting), recorded in the audit trail as ``quota.set``. The person, group or store must exist.

        Raises:
            PermissionDenied: not an admin. InvalidArgument: a bad scope, measure or limit; no such
                person, group or store.
        """
        self._check("quota.manage")
        exists = {
            "user": lambda n: self._system.people.accounts.get(n) is not None,
            "group": lambda n: n in self._system.people.accounts.groups(),
            "store": self._system.stores.exists,
        }.get(scope)
        if exists is not None and not exists(name):
            raise InvalidArgument(f"There is no {scope} {name!r} to set a quota for.", param="name")
        got = self._system.people.quotas.set_limit(scope, name, measure, limit)
        self.record(
            "quota.set",
            store=name if scope == "store" else None,
            target=None if scope == "store" else f"{scope}:{name}",
            detail={"measure": measure, "limit": limit},
        )
        return got

    @checks("usage.read")
    def count_request(self, token: str) -> RateDecision:
        """Count one REST request of the key ``token`` (:attr:`actor`'s) against its limit a minute:
        the person's own ``requests_per_minute``, else ``quotas.api_requests_per_minute``; admins
        are not limited while ``quotas.admins_exempt`` is on. Counted in the shared catalog in team
        mode, in this process otherwise. The caller answers a refused one (429 with ``Retry-After``:
        :func:`~knowledge.people.quotas.rate_refusal`)."""
        q = self._system.people.quotas
        limit = None
        if not q.exempt(self.actor):
            limit = (
                q.limit("user", self.actor.username, "requests_per_minute")
                if not self.actor.local
                else q.limit("user", "", "requests_per_minute")
            ).amount
        bucket = hashlib.sha256(token.encode()).hexdigest()[:32]
        return self._system.people.rates.hit(bucket, limit)

    # -- ingestion (see knowledge.service.indexing) -----------------------------------------------------
    def _writing(self, store: str) -> bool:
        """Authorize a write to ``store`` (made on the fly when missing); ``True`` when it is new (its
        ``store.create`` is then recorded, whoever made it: the local admin of a laptop too)."""
        self.authorize(store, "write", create=True)
        return not self._system.stores.exists(store)

    def _check_quota(self, store: str, add_bytes: int, add_files: int, *, moved_from: str | None = None) -> list[str]:
        """Refuse a write of ``add_files`` files of ``add_bytes`` bytes into ``store`` that would take
        the store, its owner (the actor for a new store) or the owner's groups past a quota
        (:meth:`Quotas.check_add <knowledge.people.quotas.Quotas.check_add>`): the one place every
        ingestion path asks, before anything is kept. ``moved_from``: the store the files leave (a
        move: its owner's use does not grow). An exempt actor (an admin) is not refused; a move of
        theirs that takes someone past a quota returns that in words (else ``[]``).
        Raises ``QuotaExceeded``."""
        quotas = self._system.people.quotas
        exempt = quotas.exempt(self.actor)
        if exempt and (moved_from is None or not self._system.people.enabled()):  # the laptop: not one query more
            return []
        sharing = self._system.people.sharing
        owner = sharing.owner(store) if self._system.stores.exists(store) else None
        leaving = sharing.owner(moved_from) if moved_from is not None else None
        try:
            quotas.check_add(
                self.actor,
                store,
                owner,
                add_bytes=add_bytes,
                add_files=add_files,
                moved_from=leaving,
                even_exempt=exempt,
            )
        except QuotaExceeded as exc:
            if not exempt:
                raise
            whose = {"store": f"the store {exc.name!r}", "group": f"the stores of the group {exc.name}"}.get(
                exc.scope, f"the stores of {exc.name}"
            )
            now = exc.used + {"bytes": add_bytes, "files": add_files}.get(exc.measure, 0)
            return [
                f"Done all the same, as admins are exempt from quotas: {whose} now hold {amount(exc.measure, now)},"
                f" past the quota of {amount(exc.measure, exc.limit)}."
            ]
        return []

    def _ingested(self, store: str, new: bool, names: list[str], **detail: Any) -> None:
        if new and self._system.stores.exists(store):  # made by this ingest (not refused before it was)
            self.claim(store)
            self.record("store.create", store=store)
        self.record(
            "file.ingest",
            store=store,
            target=names[0] if len(names) == 1 else None,
            detail={"files": names[:50], "count": len(names), **detail},
        )

    @checks("store.write")
    def ingest_file(self, store, source, name=None, **kwargs) -> IngestResult:
        """See :meth:`Indexer.ingest_file` (needs write access; a new store is the actor's);
        ``readers=`` as :meth:`set_file_readers` takes them (checked here)."""
        new = self._writing(store)
        if kwargs.get("readers") is not None:
            kwargs["readers"] = self._checked_readers(kwargs["readers"])
        self._check_quota(store, source_size(source), 1)
        result = self._system.indexer.ingest_file(store, source, name, protected=self._hidden_files(store), **kwargs)
        self._ingested(store, new, [result.name])
        return self.readable_result(store, result)

    @checks("store.write")
    def submit_batch(
        self,
        store: str,
        items: Sequence[Item],
        *,
        template: str | None = None,
        password: str | None = None,
        attributes: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        batch_id: str | None = None,
        readers: str | Iterable[str] | None = None,
    ) -> IngestJob:
        """Queue ``items`` (``(name, bytes)``, ``(name, path)`` or ``(name, StoredFile)``) for
        ``store`` as one batch of job rows, ingested by any worker
        (:class:`~knowledge.service.jobs.IngestJob`, whose arguments these are): check that
        :attr:`actor` may write to ``store`` (a new store becomes theirs: the worker makes it with the
        batch's first file), record ``store.create`` (``queued``) and ``file.ingest`` in the audit
        trail, then start it. ``batch_id`` (:func:`~knowledge.service.jobs.new_batch_id`): the id of
        an earlier attempt that an outage interrupted (the CLI's): a batch written then is not
        written again. ``readers`` (as :meth:`set_file_readers` takes them) restricts every file of
        the batch before its first chunk is written; the batch's progress is then shown only to
        those readers and the store's owners. Returns the started job.

        Raises:
            StoreNotFound, PermissionDenied: :attr:`actor` may not write to ``store`` (nothing queued).
            BackendUnavailable: the catalog cannot be reached.
        """
        return self._submit_batch(
            store,
            items,
            template=template,
            password=password,
            attributes=attributes,
            options=options,
            batch_id=batch_id,
            readers=readers,
        )

    def _submit_batch(
        self,
        store: str,
        items: Sequence[Item],
        *,
        template: str | None = None,
        password: str | None = None,
        attributes: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
        batch_id: str | None = None,
        readers: str | Iterable[str] | None = None,
        quota_checked: bool = False,
    ) -> IngestJob:
        """:meth:`submit_batch`; ``quota_checked``: the caller asked the quotas for the batch already
        (a bulk move, net of what leaves; a bulk retry of files whose bytes are counted)."""
        new = self._writing(store)
        who = self._checked_readers(readers)
        if who is not None:
            options = {**(options or {}), "readers": list(who)}
        hidden = self._hidden_files(store)
        if hidden:  # a file of the batch may not replace one of these by name (Indexer.ingest_file's protected)
            options = {**(options or {}), "protected": sorted(hidden)}
        if not quota_checked:
            self._check_quota(store, sum(source_size(src) for _, src in items), len(items))
        job = IngestJob(
            self._system.jobs,
            store,
            items,
            template=template,
            password=password,
            attributes=attributes,
            options=options,
            batch_id=batch_id,
        )
        return self._queued(job, new)

    @checks("store.write")
    def submit_folder(
        self, store: str, folder: str | os.PathLike, glob: str | None = None, *, folders: LocalFolders | None = None
    ) -> IngestJob:
        """Queue the files of ``folder`` matching ``glob`` (default ``**/*``) for ``store`` as one
        batch, as :meth:`submit_batch` does (checked first, then the folder walked:
        :meth:`IngestJob.from_folder <knowledge.service.jobs.IngestJob.from_folder>`, whose
        ``folders`` are the ones that may be read). Returns the started job (its ``notes`` and
        ``skipped`` say what the walk left out).

        Raises:
            StoreNotFound, PermissionDenied: :attr:`actor` may not write to ``store`` (nothing read).
            PathNotAllowed, InvalidArgument, KnowledgeError: see ``IngestJob.from_folder`` (nothing queued).
            BackendUnavailable: the catalog cannot be reached.
        """
        new = self._writing(store)
        job = IngestJob.from_folder(self._system.jobs, store, folder, glob, folders=folders)
        self._check_quota(store, sum(job.sizes), len(job.item_names))
        hidden = self._hidden_files(store)
        if hidden:  # as submit_batch
            job.options["protected"] = sorted(hidden)
        return self._queued(job, new)

    def _queued(self, job: IngestJob, new: bool) -> IngestJob:
        """Claim ``job``'s store when ``new`` (the worker makes it), record the batch, start it."""
        if new:  # the worker makes the store with the batch's first file (its name was checked): the actor's
            self.claim(job.store)  # nobody's for the local admin: the admins' (a store before accounts)
            self.record("store.create", store=job.store, detail={"queued": True})
        self._ingested(job.store, False, job.item_names, queued=True)
        return job.start()

    @checks("store.write")
    def submit_web(
        self, store: str, url: str, *, depth: int = 0, max_pages: int | None = None, template: str | None = None
    ) -> WebJob:
        """Fetch and ingest the page at ``url`` (``depth``, ``max_pages``: its same-site links) into
        ``store`` in a thread of this process (:class:`~knowledge.service.web.WebJob`), each page
        with :meth:`ingest_file` (checked and recorded as :attr:`actor`'s, page by page).

        Raises:
            InvalidArgument: a bad URL, depth or max_pages (nothing fetched).
        """
        return WebJob(
            self._system.jobs, self.ingest_file, store, url, depth=depth, max_pages=max_pages, template=template
        ).start()

    @checks("store.write")
    def ingest_paths(self, store, paths, **kwargs) -> list[IngestResult]:
        """See :meth:`Indexer.ingest_paths` (needs write access)."""
        new = self._writing(store)
        paths = list(paths)
        self._check_quota(store, sum(source_size(p) for p in paths), len(paths))
        results = self._system.indexer.ingest_paths(store, paths, protected=self._hidden_files(store), **kwargs)
        self._ingested(store, new, [r.name for r in results])
        return results

    @checks("store.write")
    def ingest_web(
        self, store: str, url: str, *, readers: str | Iterable[str] | None = None, **kwargs: Any
    ) -> list[IngestResult]:
        """See :func:`knowledge.service.web.ingest_web`: the page at ``url`` (``depth``, ``max_pages``:
        its same-site links) into ``store``, each page named by its URL (needs write access);
        ``readers`` (as :meth:`set_file_readers` takes them, checked before anything is fetched)
        restricts each page before its first chunk is written."""
        new = self._writing(store)
        who = self._checked_readers(readers)
        self._check_quota(store, 0, 1)  # pages are sized once fetched: refused here once a quota is reached
        ingest = functools.partial(self._system.indexer.ingest_file, protected=self._hidden_files(store))
        if who is not None:
            ingest = functools.partial(ingest, readers=who)
        results = ingest_web(ingest, self.settings, store, url, **kwargs)
        self._ingested(store, new, [r.name for r in results], url=url)
        return results

    @checks("store.write")
    def index_text(self, store: str, file_id: str, text: str, file_name: str | None = None) -> IngestResult:
        """See :meth:`Indexer.index_text`: ``text`` as the whole content of file ``file_id`` of ``store``
        (created from the default template when missing), replacing the file's earlier chunks.

        Raises:
            PermissionDenied: ``file_id`` is a file of the store :attr:`actor` may not read (its id is
                "taken"; nothing is written). The errors of :meth:`Indexer.index_text`.
        """
        new = self._writing(store)
        if file_id in self._hidden_files(store):
            raise PermissionDenied(f"The file id {file_id!r} is taken in store {store!r}; choose another.")
        self._check_quota(store, len(text.encode("utf-8")), 0 if self._system.catalog.get_file(store, file_id) else 1)
        result = self._system.indexer.index_text(store, file_id, text, file_name)
        self._ingested(store, new, [file_name or file_id])
        return result

    @checks("store.read")
    def store_files(self, store: str):
        """The records of ``store``'s files (any status) :attr:`actor` may read, by name."""
        self.authorize(store)
        hidden = self._hidden_files(store)
        return [f for f in self._system.indexer.store_files(store) if f.file_id not in hidden]

    @checks("store.read")
    def file_page(self, store: str, query: FileQuery | None = None, *, limit: int = 50, offset: int = 0) -> FilePage:
        """One page of the records of ``store``'s files that :attr:`actor` may read and ``query``
        matches (:meth:`Catalog.file_page <knowledge.catalog.Catalog.file_page>`: by name, ``limit``
        records from ``offset``, with the number that match in all), read by the database: a page of
        a store of 10,000 files reads ``limit`` records, not 10,000."""
        self.authorize(store)
        return self._system.catalog.file_page(store, query, limit=limit, offset=offset, exclude=self._hidden_files(store))

    @checks("store.read")
    def retriable_count(self, store: str, query: FileQuery | None = None) -> tuple[int, int]:
        """``(retriable, failed)``: of the failed files of ``store`` that ``query`` matches (those
        :attr:`actor` may read), how many a bulk retry (:meth:`bulk_files` ``"retry"``) would queue
        -- :func:`~knowledge.outcomes.can_retry` and not asking for a password -- judged from their
        failures grouped by the database (:meth:`Catalog.failure_kinds
        <knowledge.catalog.Catalog.failure_kinds>`), and how many failed in all."""
        self.authorize(store)
        kinds = self._system.catalog.failure_kinds(store, query, exclude=self._hidden_files(store))
        retriable = sum(
            n
            for error, reason, n in kinds
            if can_retry(FailureKind(error, reason)) and not needs_password(FailureKind(error, reason))
        )
        return retriable, sum(n for _, _, n in kinds)

    @checks("store.read")
    def file_counts(self, store: str) -> FileCounts:
        """The counts of ``store``'s files that :attr:`actor` may read (indexed, failed, busy, chunks),
        counted by the database."""
        self.authorize(store)
        return self._system.catalog.file_counts(store, exclude=self._hidden_files(store))

    @checks("store.write")
    def bulk_files(
        self,
        store: str,
        action: str,
        *,
        file_ids: Iterable[str] | None = None,
        query: FileQuery | None = None,
        to: str | None = None,
        readers: str | Iterable[str] | None = None,
    ) -> BulkResult:
        """Act on many files of ``store`` at once: those of ``file_ids``, or every file ``query``
        matches (:meth:`file_page`'s files, all pages) when no ids are given. Needs write access (to
        ``to`` as well for a move); files :attr:`actor` may not read are skipped as unknown ids.

        * ``"retry"``: the failed files a retry can help (:func:`~knowledge.outcomes.can_retry`; not
          one asking for a password, which is tried one at a time with it; no quota asked: their
          failed records count already) are queued as one batch
          (:meth:`submit_batch` of their stored bytes, the same as :meth:`retry_file` ingests: its
          outcome replaces the failed record); the others are skipped, saying why.
        * ``"delete"``: each file as :meth:`delete_file` deletes it (audited per file).
        * ``"move"``: to store ``to``: the indexed files' stored bytes are queued there as a batch
          per set of readers (:meth:`submit_batch`, the readers kept), then each leaves ``store``
          (:meth:`delete_file`, its bytes kept for the batch).
        * ``"readers"``: each file's readers set to ``readers`` (:meth:`set_file_readers`, checked
          once first).

        Raises:
            StoreNotFound, PermissionDenied: no write access to ``store`` (or ``to``).
            InvalidArgument: an unknown action, a move without ``to`` or to ``store`` itself, readers
                badly written (nothing done).
            QuotaExceeded: a move that would take ``to``, its owner or their groups past a quota,
                net of what leaves ``store`` (nothing moved; an admin's is done, with a warning).
        """
        if action not in BULK_ACTIONS:
            raise InvalidArgument(f"Unknown action {action!r}: expected one of {', '.join(BULK_ACTIONS)}.")
        self.authorize(store, "write")
        hidden = self._hidden_files(store)
        catalog = self._system.catalog
        if file_ids is None:
            wanted = query or FileQuery()
            if action == "retry":
                wanted = replace(wanted, statuses=(FAILED,))
            ids = catalog.file_ids(store, wanted, exclude=hidden)
        else:
            ids = list(dict.fromkeys(file_ids))
        out = BulkResult(action)
        records: list[FileRecord] = []
        for fid in ids:
            rec = None if fid in hidden else catalog.get_file(store, fid)
            if rec is None:
                out.skipped.append((fid, "not in the store"))
            else:
                records.append(rec)
        if action == "retry":
            items = []
            for rec in records:
                if rec.status != FAILED:
                    out.skipped.append((rec.file_name, "did not fail"))
                elif needs_password(rec):
                    out.skipped.append((rec.file_name, "asks for a password: retry it on its own"))
                elif not can_retry(rec):
                    out.skipped.append((rec.file_name, "would fail the same way"))
                elif (stored := self._system.files.find(rec.file_id)) is None:
                    out.skipped.append((rec.file_name, "its bytes are no longer stored"))
                else:
                    items.append((rec.file_name, stored))
            if items:  # their failed records count already: the retry replaces them, adding nothing
                out.jobs.append(self._submit_batch(store, items, quota_checked=True))
                out.acted.extend(name for name, _ in items)
        elif action == "delete":
            for rec in records:
                self.delete_file(store, rec.file_id)
                out.acted.append(rec.file_name)
        elif action == "readers":
            wanted_readers = self._checked_readers(readers)
            for rec in records:
                self.set_file_readers(store, rec.file_id, wanted_readers)
                out.acted.append(rec.file_name)
        else:  # move
            if not to or to == store:
                raise InvalidArgument("Say which other store to move the files to.")
            self.authorize(to, "write")
            groups: dict[tuple[str, ...] | None, list[tuple[FileRecord, StoredFile]]] = {}
            for rec in records:
                if rec.status != DONE:
                    out.skipped.append((rec.file_name, "is not indexed: retry or remove it first"))
                elif (stored := self._system.files.find(rec.file_id)) is None:
                    out.skipped.append((rec.file_name, "its bytes are no longer stored"))
                else:
                    groups.setdefault(rec.readers, []).append((rec, stored))
            moving = [f for pairs in groups.values() for _, f in pairs]
            # asked once, net of what leaves (a move between one person's stores adds nothing to
            # their use); a refusal moves nothing
            out.warnings.extend(self._check_quota(to, sum(f.size for f in moving), len(moving), moved_from=store))
            for who, pairs in groups.items():
                out.jobs.append(
                    self._submit_batch(to, [(r.file_name, f) for r, f in pairs], readers=who, quota_checked=True)
                )
                for rec, _ in pairs:
                    self.delete_file(store, rec.file_id, keep_file=True)
                    out.acted.append(rec.file_name)
        return out

    @checks("store.write")
    def delete_file(self, store: str, file_id: str, *, keep_file: bool = False) -> int:
        """See :meth:`Indexer.delete_file` (needs write access)."""
        self.authorize(store, "write")
        hidden = file_id in self._hidden_files(store)  # as an id the store does not hold: nothing removed
        removed = 0 if hidden else self._system.indexer.delete_file(store, file_id, keep_file=keep_file)
        self.record("file.delete", store=store, target=file_id, detail={"chunks": removed})
        return removed

    @checks("store.write")
    def delete_name(self, store: str, file_id: str, name: str, *, folder: str | None = None) -> int:
        """See :meth:`Indexer.delete_name`: one name off a content; the content with its last name
        (needs write access)."""
        self.authorize(store, "write")
        self._require_readable(store, file_id, f"Store {store!r} has no file named {name!r} with the id {file_id!r}.")
        removed = self._system.indexer.delete_name(store, file_id, name, folder=folder)
        self.record("file.delete", store=store, target=file_id, detail={"name": name, "chunks": removed})
        return removed

    @checks("store.read")
    def file_names_of(self, store: str, file_id: str | None = None):
        """The names (:class:`~knowledge.catalog.FileName`) in ``store``, of one content or all."""
        self.authorize(store)
        hidden = self._hidden_files(store)  # a hidden content has no names, as an unknown id
        return [n for n in self._system.catalog.names(store, file_id=file_id) if n.file_id not in hidden]

    @checks("store.read")
    def file_attributes(self, store: str, file_id: str) -> dict[str, Any]:
        """See :meth:`Indexer.file_attributes`: ``{}`` for a file :attr:`actor` may not read, as for
        an id the store does not hold."""
        self.authorize(store)
        if file_id in self._hidden_files(store):
            return {}
        return self._system.indexer.file_attributes(store, file_id)

    @checks("store.write")
    def set_file_attributes(self, store: str, file_id: str, attributes: dict[str, Any]) -> int:
        """See :meth:`Indexer.set_file_attributes` (needs write access): the app's Details editor and
        the REST API's ``POST /v1/vector_stores/{id}/files/{file_id}`` both save through here."""
        self.authorize(store, "write")
        check_attributes(attributes)  # bad ones are refused first, for a hidden file as for any id
        self._require_readable(store, file_id, f"Store {store!r} has no indexed file with the id {file_id!r}.")
        changed = self._system.indexer.set_file_attributes(store, file_id, attributes)
        self.record("file.attributes", store=store, target=file_id)
        return changed

    @checks("store.read")
    def store_settings(self, store: str) -> StoreSettings:
        """The own settings of ``store`` (description, default score threshold); needs read access.
        Raises ``StoreNotFound``."""
        self.authorize(store)
        return self._system.stores.settings_of(store)

    @checks("store.write")
    def set_store_settings(
        self, store: str, *, description: str | None = None, score_threshold: float | None = None
    ) -> StoreSettings:
        """Replace the own settings of ``store`` (see :meth:`Stores.set_settings`); needs write access.

        Raises:
            StoreNotFound. PermissionDenied: read-only. InvalidArgument: a bad value, in words.
        """
        self.authorize(store, "write")
        done = self._system.stores.set_settings(store, description=description, score_threshold=score_threshold)
        self.record(
            "store.update", store=store, detail={"description": done.description, "score_threshold": done.score_threshold}
        )
        return done

    @checks("store.read")
    def default_threshold(self, store: str, distance: str | None = None) -> float | None:
        """The score threshold a search of ``store`` uses when the person sets none: the store's own
        (:meth:`store_settings`), else the setting ``search.score_threshold`` for a store scored by
        similarity (cosine, dot) and none for one scored by a distance (its scale depends on the
        vectors). Needs read access; raises ``StoreNotFound``."""
        own = self.store_settings(store).score_threshold
        if own is not None:
            return own
        distance = distance or self._system.stores.get(store).distance
        return self.settings.search.score_threshold if DISTANCE_ORDER.get(distance, False) else None

    @checks("store.write")
    def retry_file(self, store: str, file_id: str, **kwargs) -> IngestResult:
        self.authorize(store, "write")
        self._require_readable(store, file_id)
        result = self._system.indexer.retry_file(store, file_id, **kwargs)
        self.record("file.ingest", store=store, target=file_id, detail={"retry": True})
        return result

    @checks("store.own")
    def reembed(self, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
        self.authorize(store, "owner")
        record = self._system.indexer.reembed(store, template, progress)
        self.record("store.reembed", store=store, detail={"template": template})
        return record

    # -- search (see knowledge.service.search) ----------------------------------------------------------
    @checks("store.read")
    def search(
        self,
        store: str,
        query: str | SearchRequest,
        k: int = 5,
        *,
        where: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
        max_per_file: int | None = None,
        mode: str | None = None,
        rerank: bool | None = None,
        merge: bool | None = None,
    ) -> list[Hit]:
        """The hits of :meth:`Searcher.search`: ``query`` a :class:`SearchRequest`, or its text with
        the common options as keywords (:func:`~knowledge.service.search.search_request`)."""
        self.authorize(store)
        request = search_request(
            query,
            k,
            where=where,
            score_threshold=score_threshold,
            max_per_file=max_per_file,
            mode=mode,
            rerank=rerank,
            merge=merge,
        )
        return self._system.searcher.search(store, self._readable_request(store, request)).hits

    def _readable_request(self, store: str, request: SearchRequest) -> SearchRequest:
        """``request`` kept to the chunks of ``store`` :attr:`actor` may read (:meth:`_reader_where`
        joins its ``where``: the backend filters before ranking, so ``k`` hits are ``k`` readable ones)."""
        own = self._reader_where(store)
        if own is None:
            return request
        return replace(request, where={**(request.where or {}), **own})

    @checks("store.read")
    def search_result(self, store: str, request: SearchRequest) -> SearchResult:
        """The whole :class:`SearchResult` of :meth:`Searcher.search`: the hits, and the query's
        vector, the store's distance, with ``request.playground`` the best ``top`` without the
        threshold and the embedding and search times (the search playground's view)."""
        self.authorize(store)
        return self._system.searcher.search(store, self._readable_request(store, request))

    @checks("store.read")
    def reranks(self, store: str) -> tuple[bool, int]:
        """Whether searches of ``store`` rerank by default, and how many passages (its template's
        ``rerank``/``rerank_candidates``, else the settings ``search.rerank*``)."""
        self.authorize(store)
        return self._system.searcher.rerank_of(self._system.stores.get(store))

    @checks("store.read")
    def search_stores(
        self,
        stores: Iterable[str],
        query: str | SearchRequest,
        k: int = 5,
        *,
        where: Mapping[str, Any] | None = None,
        mode: str | None = None,
        thresholds: Mapping[str, float | None] | None = None,
    ) -> MultiSearch:
        """See :meth:`Searcher.search_stores` (``query`` as in :meth:`search`); each store needs read
        access (``StoreNotFound`` otherwise)."""
        stores = list(stores)
        for name in stores:
            self.authorize(name)
        request = search_request(query, k, where=where, mode=mode)
        return self._system.searcher.search_stores(
            stores, request, thresholds=thresholds, request_of=lambda store, r: self._readable_request(store, r)
        )

    @checks("store.read")
    def rank(
        self, store: str, query: str, vector: Any, fetch: int, *, where: dict | None = None, mode: SearchMode | None = None
    ) -> tuple[list[Hit], bool]:
        """The ranking behind :meth:`search` of ``store`` (:meth:`Searcher.rank
        <knowledge.service.search.Searcher.rank>`: ``(hits best first, exhausted)``; ``vector`` the
        query's embedding, ``(d,)`` float32; ``where`` a payload filter; ``mode`` vector, lexical
        or hybrid, default the settings').

        Raises:
            StoreNotFound: :attr:`actor` may not read ``store`` (or it does not exist).
        """
        self.authorize(store)
        return self._system.searcher.rank(store, query, vector, fetch, where=self._with_readers(store, where), mode=mode)

    # -- records and files, by name (instead of reaching into the catalog and the file store) -------
    @checks("store.list")
    def store_exists(self, name: str) -> bool:
        """Whether store ``name`` exists (and :attr:`actor` may see it)."""
        return self._system.stores.exists(name) and self._allowed("store.read", name)

    @checks("store.read")
    def store_record(self, name: str) -> StoreRecord | None:
        """The record of store ``name``, or ``None`` when there is none (or :attr:`actor` may not see it)."""
        return self._system.stores.find(name) if self.store_exists(name) else None

    @checks("store.read")
    def file_record(self, store: str, file_id: str) -> FileRecord | None:
        """The record of file ``file_id`` in ``store`` (any status), or ``None``."""
        if not self._allowed("store.read", store) or file_id in self._hidden_files(store):
            return None
        return self._system.catalog.get_file(store, file_id)

    @checks("store.read")
    def file_records(self, store: str) -> list[FileRecord]:
        """The records of ``store``'s files (any status), by name; ``[]`` for an unknown store."""
        if not self._allowed("store.read", store):
            return []
        hidden = self._hidden_files(store)
        return [f for f in self._system.catalog.files(store) if f.file_id not in hidden]

    @checks("store.list")
    def collection_in_use(self, collection: str) -> bool:
        """Whether any store (also one :attr:`actor` may not see, also an internal one) keeps its
        vectors in the backend collection ``collection`` (the agent memory refuses such a name)."""
        return collection in {s.record.collection for s in self._system.stores.summaries(internal=True)}

    @checks("store.create")
    def name_taken(self, name: str) -> bool:
        """Whether a store called ``name`` exists, also one :attr:`actor` may not see: a new store may
        not take the name (what ``store.create`` refuses as "not available")."""
        return self._system.stores.exists(name)

    @checks("store.list")
    def stores_using_file(self, file_id: str) -> list[str]:
        """The stores holding a record of file ``file_id`` that :attr:`actor` may see, sorted."""
        readers = self._system.catalog.file_readers(file_id)
        return [s for s in self.visible(sorted(readers)) if self._system.policy.reads(self.actor, s, readers[s])]

    @checks("file.read")
    def stored_files(self) -> list[StoredFile]:
        """Every file of the file store :attr:`actor` may read (unsorted)."""
        return [f for f in self._system.files.list() if self._readable_file(f.id)]

    @checks("file.read")
    def stored_file(self, file_id: str) -> StoredFile:
        """The file store's record of ``file_id``. Raises ``FileNotFoundInStore`` (also for a file
        :attr:`actor` may not read)."""
        if not self._readable_file(file_id):
            raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.")
        return self._system.files.get(file_id)

    @checks("file.read")
    def find_stored_file(self, file_id: str) -> StoredFile | None:
        """The file store's record of ``file_id``, or ``None``."""
        return self._system.files.find(file_id) if self._readable_file(file_id) else None

    @checks("file.read")
    def read_file(self, file_id: str) -> BinaryIO:
        """The bytes of stored file ``file_id`` as a binary stream (use it in a ``with`` block).
        Raises ``FileNotFoundInStore`` (also for a file :attr:`actor` may not read)."""
        if not self._readable_file(file_id):
            raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.")
        return self._system.files.content(file_id)

    @checks("file.save")
    def save_attachment(
        self,
        name: str,
        media_type: str | None,
        data: bytes | BinaryIO,
        *,
        max_bytes: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> StoredFile:
        """Keep a file's bytes in the file store without indexing them (a chat's picture, an API
        upload); ``media_type`` ``None`` is guessed from ``name``; ``max_bytes`` defaults to setting
        ``ingest.max_file_bytes``.

        Raises:
            FileTooLarge: over the limit, nothing kept. InvalidArgument: a bad name or media type.
        """
        limit = self.settings.ingest.max_file_bytes if max_bytes is None else max_bytes
        self._system.people.quotas.check_add(self.actor, None, None, add_bytes=source_size(data), add_files=1)
        if not self.actor.local:  # an attachment is its uploader's
            metadata = {**(metadata or {}), "owner": self.actor.username}
        return self._system.files.save(name, media_type, data, max_bytes=limit, metadata=metadata)

    @checks("file.save")
    def forget_file_if_unused(self, file_id: str) -> None:
        """Delete the bytes of ``file_id`` from the file store when no store holds it any more."""
        self._system.stores.forget_file_if_unused(file_id)

    @checks("system.read")
    def llm_configs(self) -> LlmConfigDesk:
        """The LLM and embedding configurations (:class:`knowledge.llm.config.LlmConfigs`): anyone
        reads them; saving and deleting need an admin (``settings.manage``)."""
        return LlmConfigDesk(self, LlmConfigs(self._system.catalog, self.settings))

    # -- the file store ---------------------------------------------------------------------------
    @checks("file.read")
    def list_files(self) -> list[StoredFileUsage]:
        """Every file in the file store :attr:`actor` may read, newest first, with the stores that
        use it (those :attr:`actor` sees)."""
        files = sorted(self._system.files.list(), key=lambda f: (f.created, f.id), reverse=True)
        out = []
        for f in files:
            statuses = self._system.catalog.file_statuses(f.id)
            if not self._readable_file(f.id):
                continue
            seen = set(self.stores_using_file(f.id))
            statuses = {k: v for k, v in statuses.items() if k in seen}
            aliases = [n for n in self._system.catalog.names_of_file(f.id) if n != f.name] if statuses else []
            out.append(StoredFileUsage(f, list(statuses), statuses, aliases))
        return out

    @checks("file.read")
    def stored_file_page(
        self,
        *,
        name: str = "",
        types: Sequence[str] = (),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> StoredFilePage:
        """A page of :meth:`list_files`: the stored files :attr:`actor` may read whose name holds
        ``name`` (any case) and ends in one of ``types`` (``"pdf"``; empty: any), saved at or after
        ``since`` and before ``until``, newest first, ``limit`` from ``offset``. Who may read which
        file is judged from one read of every store's file records (:meth:`Catalog.file_uses`) and
        the policy's rule (:meth:`Policy.reads_stored_file`); the stores, statuses and other names
        are read for the page's files only. The file store's listing itself is read whole (its
        backends have no paged listing)."""
        uses = self._system.catalog.file_uses()
        seen = set(self.visible(sorted({s for u in uses.values() for s in u})))
        policy, files = self._system.policy, self._system.files
        readable = [
            f
            for f in files.list()
            if policy.reads_stored_file(
                self.actor,
                {s: r for s, (_, r) in uses.get(f.id, {}).items()},
                functools.partial(f.metadata.get, "owner"),
                seen,
            )
        ]
        needle, ends = name.strip().lower(), tuple("." + t.lower().lstrip(".") for t in types)
        matching = [
            f
            for f in readable
            if needle in f.name.lower()
            and (not ends or f.name.lower().endswith(ends))
            and (since is None or f.created >= since)
            and (until is None or f.created < until)
        ]
        matching.sort(key=lambda f: (f.created, f.id), reverse=True)
        limit, offset = max(1, int(limit)), max(0, int(offset))
        if offset >= len(matching) > 0:  # past the end (files went meanwhile): the last page
            offset = (len(matching) - 1) // limit * limit
        out = []
        for f in matching[offset : offset + limit]:
            stores = [s for s, (_, r) in uses.get(f.id, {}).items() if s in seen and policy.reads(self.actor, s, r)]
            statuses = {s: uses[f.id][s][0] for s in stores}
            aliases = [n for n in self._system.catalog.names_of_file(f.id) if n != f.name] if stores else []
            out.append(StoredFileUsage(f, stores, statuses, aliases))
        unused = sum(
            1
            for f in matching
            if not any(s in seen and policy.reads(self.actor, s, r) for s, (_, r) in uses.get(f.id, {}).items())
        )
        return StoredFilePage(out, len(matching), sum(f.size for f in matching), unused, offset)

    @checks("store.write")
    def delete_stored_file(self, file_id: str, *, from_stores: bool = False) -> list[str]:
        """Delete a file from the file store. Returns the stores it was removed from.

        With ``from_stores`` the file's chunks and records go from every store that uses it first,
        then its bytes. Without it a file that stores still use is refused (their chunks cite it), so
        nothing changes.

        Raises:
            FileNotFoundInStore: no stored file has that id.
            InvalidArgument: stores use the file and ``from_stores`` is false.
        """
        stored = self.stored_file(file_id)
        stores = self._system.catalog.stores_using_file(file_id)
        hidden = len(stores) - len(self.visible(stores))
        if hidden:  # said without naming a store the actor may not see
            raise PermissionDenied(f"{stored.name} is also used by {hidden} store(s) you cannot see; it was kept.")
        for store in stores:
            self.authorize(store, "write")
        if not stores and not self._allowed("file.manage") and stored.metadata.get("owner") != self.actor.username:
            raise PermissionDenied(f"{stored.name} is not yours to delete.")
        if stores and not from_stores:
            raise InvalidArgument(
                f"{stored.name} is used by the store(s) {', '.join(stores)}; it was kept. Remove it from"
                " those stores too, or delete it from each store first."
            )
        for store in stores:
            self.delete_file(store, file_id, keep_file=True)
        self._system.files.delete(file_id)
        self.record("file.delete", target=file_id, detail={"name": stored.name, "stores": stores})
        return stores

    # -- templates --------------------------------------------------------------------------------
    @checks("template.read")
    def template(self, name: str) -> VectorStoreTemplate:
        """The template ``name``. Raises ``TemplateNotFound``."""
        return self._system.templates.get(name)

    @checks("template.read")
    def template_names(self) -> list[str]:
        return self._system.templates.names()

    @checks("template.read")
    def list_templates(self) -> list[VectorStoreTemplate]:
        return self._system.templates.list()

    @checks("template.save")
    def save_template(self, template: VectorStoreTemplate) -> VectorStoreTemplate:
        """Create or update a template. A template that stores use keeps its backend, embedding model
        and distance (their vectors depend on them): re-embed the stores to a new template instead.

        Raises:
            InvalidArgument: the built-in name, or such a change to a template in use.
            PermissionDenied: :attr:`actor` is no admin.
        """
        self._check("template.save")
        return self._system.save_template(template)

    @checks("template.derive")
    def derive_template(self, template: VectorStoreTemplate) -> VectorStoreTemplate:
        """Save ``template``, a copy of an existing template with another chunking made for a
        request's own ``chunking_strategy`` (the REST API): anyone may (``template.derive``); it is
        not an admin's act, so not audited. Raises ``InvalidArgument`` (see :meth:`System.save_template
        <knowledge.system.System.save_template>`)."""
        self._check("template.derive")
        return self._system.save_template(template)

    @checks("template.read")
    def shared_catalog_problem(self) -> str | None:
        """What to set when the default template cannot make stores here -- the catalog is shared
        (``catalog.url``) and ``vector_store.backend`` is per machine (memory, Qdrant's local mode,
        the embedded PostgreSQL) -- or ``None``. The app shows it before anyone uploads."""
        return self._system.templates.problem(self._system.templates.get(DEFAULT_TEMPLATE))

    @checks("template.delete")
    def delete_template(self, name: str) -> None:
        """Delete a template that no store uses (raises ``InvalidArgument`` otherwise; an admin only)."""
        self._check("template.delete")
        self._system.templates.delete(name, in_use_by=self._system.stores.stores_using_template(name, internal=True))


class PortableDesk:
    """Export, import and move stores, back up and restore (:class:`~knowledge.portable.Portable`) as
    :attr:`Workbench.actor` may: an export needs read access, an import makes a store of the actor's
    own, a move needs the store's owner, a backup and a restore (every store) need an admin."""

    def __init__(self, wb: Workbench, portable: Portable) -> None:
        self._wb, self._portable = wb, portable

    @checks("store.read")
    def export_store(self, store: str, out: str | os.PathLike, *, progress: BundleProgress | None = None) -> ExportResult:
        """See :meth:`Portable.export_store`. Raises ``StoreNotFound`` (also for a store the actor may
        not see)."""
        self._wb._check("store.read", store)
        result = self._portable.export_store(store, out, progress=progress, hidden=self._wb._hidden_files(store))
        if not self._wb.actor.local:
            self._wb.record("store.export", store=store)
        return result

    @checks("store.create")
    def import_bundle(
        self,
        bundle: str | os.PathLike,
        *,
        as_name: str | None = None,
        template: str | None = None,
        progress: BundleProgress | None = None,
    ) -> ImportResult:
        """See :meth:`Portable.import_bundle`; the store made is the actor's, and the bundle's files,
        bytes and chunks (its manifest's) are checked against the quotas first (``QuotaExceeded``:
        nothing imported)."""
        if as_name and self._wb._system.stores.exists(as_name):
            self._wb._check("store.read", as_name)  # the import refuses an existing name; this hides whose it is
        if not self._wb._system.people.quotas.exempt(self._wb.actor):
            zf, manifest = open_bundle(bundle)
            with zf:
                entries = [e for e in manifest.get("files") or [] if isinstance(e, dict)]
                name = as_name or str(manifest.get("store", {}).get("name") or "")
            self._wb._system.people.quotas.check_add(
                self._wb.actor,
                name,
                None,  # a new store (an import refuses an existing name): the actor's
                add_bytes=sum(int(e.get("size") or 0) for e in entries),
                add_files=len(entries),
                add_chunks=int(manifest.get("chunks") or 0),
            )
        result = self._portable.import_bundle(bundle, as_name=as_name, template=template, progress=progress)
        if not self._wb.actor.local:
            self._wb.claim(result.store)
            self._wb.record("store.import", store=result.store)
        return result

    @checks("store.own")
    def move_store(self, store: str, template: str, progress: BundleProgress | None = None) -> StoreRecord:
        """See :meth:`Portable.move_store` (the store's owner, or an admin)."""
        self._wb._check("store.own", store)
        return self._portable.move_store(store, template, progress)

    @checks("backup")
    def backup(self, out: str | os.PathLike, *, progress: BundleProgress | None = None) -> BackupResult:
        """See :meth:`Portable.backup` (an admin). Raises ``PermissionDenied``."""
        self._wb._check("backup")
        return self._portable.backup(out, progress=progress)

    @checks("backup")
    def import_restored(self, result: RestoreResult, *, progress: BundleProgress | None = None) -> RestoreResult:
        """See :meth:`Portable.import_restored` (an admin). Raises ``PermissionDenied``."""
        self._wb._check("backup")
        return self._portable.import_restored(result, progress=progress)

    @checks("backup")
    def sweep_leftovers(self, backends: list[str] | None = None) -> tuple[int, int]:
        """See :meth:`Portable.sweep_leftovers` (an admin). Raises ``PermissionDenied``."""
        self._wb._check("backup")
        return self._portable.sweep_leftovers(backends)


class SyncDesk:
    """Folder syncs (:class:`~knowledge.sync.FolderSyncs`) as :attr:`Workbench.actor` may: syncing a
    folder into a store, or forgetting one, needs write access; listing them, read access."""

    def __init__(self, wb: Workbench, syncs: FolderSyncs) -> None:
        self._wb, self._syncs = wb, syncs

    @checks("store.write")
    def folder(
        self,
        store: str,
        folder: str | os.PathLike,
        glob: str | None = None,
        *,
        template: str | None = None,
        folders: LocalFolders | None = None,
    ) -> FolderSync:
        """See :meth:`FolderSyncs.folder`; each file the sync adds or changes is checked against the
        quotas first (:meth:`Workbench._check_quota`: a file past one fails in words, the rest goes on).
        Raises ``StoreNotFound``, ``PermissionDenied``."""
        self._wb._check("store.write", store)
        sync = self._syncs.folder(store, folder, glob, template=template, folders=folders)
        sync.quota = self._wb._check_quota
        return sync

    @checks("store.read")
    def synced_folders(self, store: str) -> list[SyncedFolder]:
        """See :meth:`FolderSyncs.synced_folders`. Raises ``StoreNotFound``."""
        self._wb._check("store.read", store)
        return self._syncs.synced_folders(store)

    @checks("store.write")
    def forget(self, store: str, folder: str) -> bool:
        """See :meth:`FolderSyncs.forget`. Raises ``StoreNotFound``, ``PermissionDenied``."""
        self._wb._check("store.write", store)
        return self._syncs.forget(store, folder)


class EvaluationDesk:
    """Evaluations (:class:`~knowledge.evaluation.Evaluations`) as :attr:`Workbench.actor` may:
    evaluating a store needs read access; question sets are shared (``evaluation.sets``); runs are
    listed for the stores the actor sees; keeping a chunking as a template needs an admin."""

    def __init__(self, wb: Workbench, evaluations: Evaluations) -> None:
        self._wb, self._evaluations = wb, evaluations

    @checks("store.read")
    def evaluate(
        self,
        store: str,
        qset: QuestionSet,
        mode: str | None = None,
        k: int = 10,
        *,
        fusion_weight: float | None = None,
        candidates: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        rerank: bool | None = None,
        rank_constant: int | None = None,
    ) -> EvalRun:
        """See :meth:`Evaluations.evaluate`. Raises ``StoreNotFound``."""
        self._wb._check("store.read", store)
        return self._evaluations.evaluate(
            store,
            qset,
            mode,
            k,
            fusion_weight=fusion_weight,
            candidates=candidates,
            progress=progress,
            rerank=rerank,
            rank_constant=rank_constant,
            where=self._wb._reader_where(store),
        )

    @checks("evaluation.sets")
    def tuned(
        self, *, fusion_weight: float | None = None, candidates: int | None = None, rank_constant: int | None = None
    ) -> Searcher:
        """See :meth:`Evaluations.tuned`."""
        return self._evaluations.tuned(fusion_weight=fusion_weight, candidates=candidates, rank_constant=rank_constant)

    @checks("store.read")
    def sweep_fusion_weight(
        self,
        store: str,
        qset: QuestionSet,
        weights: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
        k: int = 10,
        candidates: int | None = None,
    ) -> list[EvalRun]:
        """See :meth:`Evaluations.sweep_fusion_weight`. Raises ``StoreNotFound``."""
        self._wb._check("store.read", store)
        return self._evaluations.sweep_fusion_weight(store, qset, weights, k, candidates, self._wb._reader_where(store))

    @checks("store.read")
    def try_chunkings(
        self,
        store: str,
        qset: QuestionSet,
        chunkings: Sequence[tuple[int, int]],
        modes: Sequence[str] = ("hybrid",),
        k: int = 10,
        progress: Callable[[str, float], None] | None = None,
    ) -> list[ChunkTrial]:
        """See :meth:`Evaluations.try_chunkings`. Raises ``StoreNotFound``."""
        self._wb._check("store.read", store)
        return self._evaluations.try_chunkings(store, qset, chunkings, modes, k, progress, self._wb._reader_where(store))

    @checks("template.save")
    def keep_as_template(self, store: str, size: int, overlap: int, name: str | None = None) -> VectorStoreTemplate:
        """See :meth:`Evaluations.keep_as_template` (an admin). Raises ``PermissionDenied``."""
        self._wb._check("template.save")
        return self._evaluations.keep_as_template(store, size, overlap, name)

    @checks("evaluation.sets")
    def load_question_set(self, ref: str) -> QuestionSet:
        """See :meth:`Evaluations.load_question_set`."""
        return self._evaluations.load_question_set(ref)

    @checks("evaluation.sets")
    def save_set(self, name: str, questions: Sequence[Question], fmt: str = "tsv") -> QuestionSet:
        """See :meth:`Evaluations.save_set`."""
        return self._evaluations.save_set(name, questions, fmt)

    @checks("evaluation.sets")
    def get_set(self, name: str) -> QuestionSet:
        """See :meth:`Evaluations.get_set`."""
        return self._evaluations.get_set(name)

    @checks("evaluation.sets")
    def set_names(self) -> list[str]:
        """See :meth:`Evaluations.set_names`."""
        return self._evaluations.set_names()

    @checks("evaluation.sets")
    def delete_set(self, name: str) -> bool:
        """See :meth:`Evaluations.delete_set`."""
        return self._evaluations.delete_set(name)

    @checks("store.read")
    def save_run(self, run: EvalRun) -> EvalRun:
        """See :meth:`Evaluations.save_run`; needs read access to the run's store."""
        self._wb._check("store.read", run.store)
        return self._evaluations.save_run(run)

    @checks("evaluation.sets")
    def runs(self, set_name: str | None = None, store: str | None = None, limit: int = 200) -> list[EvalRun]:
        """See :meth:`Evaluations.runs`: those of the stores the actor sees, but for a run that ranked
        or cited a file the actor may not read (access per document)."""
        found = self._evaluations.runs(set_name, store, limit)
        seen = set(self._wb.visible({r.store for r in found}))
        hidden = {s: self._wb._hidden_names(s) for s in seen}
        return [r for r in found if r.store in seen and not _cites(r, hidden[r.store])]

    @checks("evaluation.sets")
    def get_run(self, run_id: str) -> EvalRun:
        """See :meth:`Evaluations.get_run`. Raises ``RunNotFound`` (also for a run that ranked or
        cited a file :attr:`actor` may not read); ``StoreNotFound`` for a run of a
        store the actor may not see."""
        run = self._evaluations.get_run(run_id)
        if not self._wb.visible([run.store]):
            raise StoreNotFound(run.store, "create it first, or ingest a file into it")
        if _cites(run, self._wb._hidden_names(run.store)):  # made by a reader of a file this actor may not read
            raise RunNotFound(f"No evaluation run {run_id!r}.")
        return run

    @checks("evaluation.sets")
    def delete_runs(self, set_name: str) -> int:
        """See :meth:`Evaluations.delete_runs`."""
        return self._evaluations.delete_runs(set_name)


def _cites(run: EvalRun, names: set[str]) -> bool:
    """Whether ``run`` ranked or cited a file called one of ``names`` (a run made by someone who may
    read a file shows its name, its scores and maybe its words in the answers: not for others)."""
    if not names:
        return False
    for q in run.questions:
        if any(h.file_name in names for h in q.hits) or (q.answer is not None and q.answer.cited in names):
            return True
    return False


class LlmConfigDesk:
    """The LLM and embedding configurations (:class:`~knowledge.llm.config.LlmConfigs`) as
    :attr:`Workbench.actor` may use them: read by anyone, changed by an admin."""

    def __init__(self, wb: Workbench, configs: LlmConfigs) -> None:
        self._wb, self._configs = wb, configs

    @checks("system.read")
    def list(self, type: str | None = None) -> list[LlmConfig]:
        """See :meth:`LlmConfigs.list`."""
        return self._configs.list(type)

    @checks("system.read")
    def find(self, name: str) -> LlmConfig | None:
        """See :meth:`LlmConfigs.find`."""
        return self._configs.find(name)

    @checks("system.read")
    def get(self, name: str) -> LlmConfig:
        """See :meth:`LlmConfigs.get`. Raises ``LlmConfigNotFound``, ``InvalidArgument``."""
        return self._configs.get(name)

    @checks("system.read")
    def default_chat(self) -> LlmConfig:
        """See :meth:`LlmConfigs.default_chat`."""
        return self._configs.default_chat()

    @checks("system.read")
    def chat(self, name: str | None) -> LlmConfig:
        """See :meth:`LlmConfigs.chat`. Raises ``LlmConfigNotFound``, ``InvalidArgument``."""
        return self._configs.chat(name)

    @checks("system.read")
    def embedding_model(self) -> tuple[str | None, str]:
        """See :meth:`LlmConfigs.embedding_model`."""
        return self._configs.embedding_model()

    @checks("settings.manage")
    def save(self, config: LlmConfig | dict) -> LlmConfig:
        """See :meth:`LlmConfigs.save` (an admin). Raises ``PermissionDenied``, ``InvalidArgument``."""
        self._wb._check("settings.manage")
        return self._configs.save(config)

    @checks("settings.manage")
    def delete(self, name: str) -> bool:
        """See :meth:`LlmConfigs.delete` (an admin). Raises ``PermissionDenied``."""
        self._wb._check("settings.manage")
        return self._configs.delete(name)


class SourceDesk:
    """Sources (:class:`~knowledge.sources.engine.Sources`) as :attr:`Workbench.actor` may: seeing a
    source and its runs needs read access to its store (a run's files the actor may not read are
    left out of it, and its counts are those of the files they may read); running, pausing,
    planning or checking one, write access; adding, changing or removing one (it holds credentials
    and deletes what it added), the store's ownership -- or ``store.create`` for a new store. Each
    change is audited without a secret (the names of the secret settings only). A source of a store
    the actor may not see is worded as one that does not exist."""

    def __init__(self, wb: Workbench, sources: Sources) -> None:
        self._wb, self._sources = wb, sources

    @checks("store.list")
    def kinds(self) -> dict[str, type[Source]]:
        """The source kinds this installation has, by name."""
        return self._sources.kinds()

    def _get(self, name: str, level: Level = "read") -> SourceRecord:
        rec = self._sources.find(name)
        if rec is None or (self._wb.level(rec.store) is None and self._sources.stores.exists(rec.store)):
            raise InvalidArgument(f"There is no source {name!r}.", param="source")
        if self._sources.stores.exists(rec.store):
            self._wb.authorize(rec.store, level)
        else:
            self._wb._check("store.create", rec.store)
        return rec

    @checks("store.read")
    def get(self, name: str) -> SourceRecord:
        """The source ``name`` (or its id). Raises ``InvalidArgument`` ("There is no source")."""
        return self._get(name)

    @checks("store.read")
    def records(self, store: str | None = None) -> list[SourceRecord]:
        """The sources of the stores the actor may read (of ``store``), by name."""
        out = []
        for rec in self._sources.records(store):
            exists = self._sources.stores.exists(rec.store)
            if (exists and self._wb.level(rec.store) is not None) or (not exists and self._wb._allowed("store.create")):
                out.append(rec)
        return out

    @checks("store.own", "store.create")
    def add(
        self,
        name: str,
        kind: str,
        store: str,
        config: Mapping[str, Any],
        *,
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        max_bytes: int | None = None,
        every_minutes: int | None = None,
        readers: str | Iterable[str] | None = None,
        paused: bool = False,
        template: str = DEFAULT_TEMPLATE,
    ) -> SourceRecord:
        """See :meth:`Sources.add <knowledge.sources.engine.Sources.add>`; the store is made (the
        actor's, private, from ``template``) when it does not exist. ``readers``: the default
        readers of its files (``None``: the store's sharing; see :meth:`Workbench.check_readers`).

        Raises:
            StoreNotFound, PermissionDenied: the actor does not own the store. InvalidArgument,
            BackendUnavailable, ConfigError: see ``Sources.add``."""
        if self._sources.stores.exists(store):
            self._wb.authorize(store, "owner")
        else:
            self._wb.authorize(store, "read", create=True)
        who = self._wb._checked_readers(readers) if readers is not None else None
        rec = self._sources.add(
            name,
            kind,
            store,
            config,
            include=include,
            exclude=exclude,
            max_bytes=max_bytes,
            every_minutes=every_minutes,
            readers=who,
            paused=paused,
            created_by=self._wb.actor.username,
        )
        if not self._sources.stores.exists(store):
            self._wb.create_store(store, template)
        self._wb.record("source.add", store=store, target=rec.name, detail=self._said(rec))
        return rec

    @staticmethod
    def _said(rec: SourceRecord) -> dict[str, Any]:
        """What the audit trail keeps of a source: its settings without a secret (their names only)."""
        return {
            "kind": rec.kind,
            "config": dict(rec.config),
            "secrets_set": list(rec.secrets_set),
            "include": list(rec.include),
            "exclude": list(rec.exclude),
            "max_bytes": rec.max_bytes,
            "every_minutes": rec.every_minutes,
            "readers": list(rec.readers) if rec.readers is not None else None,
        }

    @checks("store.own")
    def update(self, name: str, **changes: Any) -> SourceRecord:
        """See :meth:`Sources.update <knowledge.sources.engine.Sources.update>` (``config``,
        ``include``, ``exclude``, ``max_bytes``, ``every_minutes``, ``readers``). Raises like :meth:`add`."""
        rec = self._get(name, "owner")
        if changes.get("readers") is not None:
            changes["readers"] = self._wb._checked_readers(changes["readers"])
        before = self._said(rec)
        new = self._sources.update(rec.id, **changes)
        after = self._said(new)
        self._wb.record(
            "source.update",
            store=new.store,
            target=new.name,
            detail={
                "before": before,
                "after": after,
                "secrets_changed": sorted(
                    set(changes.get("config") or {})
                    & {f.name for f in self._sources.kinds().get(new.kind, Source).fields if f.secret}
                ),
            },
        )
        return new

    @checks("store.write")
    def pause(self, name: str, paused: bool = True) -> SourceRecord:
        """Pause (``paused``) or resume a source's schedule. Raises ``InvalidArgument``, ``PermissionDenied``."""
        rec = self._get(name, "write")
        new = self._sources.pause(rec.id, paused)
        self._wb.record("source.pause" if paused else "source.resume", store=rec.store, target=rec.name)
        return new

    @checks("store.own")
    def remove(self, name: str, *, delete_files: bool = True) -> int:
        """See :meth:`Sources.remove <knowledge.sources.engine.Sources.remove>`; returns the files taken out."""
        rec = self._get(name, "owner")
        n = self._sources.remove(rec.id, delete_files=delete_files)
        self._wb.record("source.remove", store=rec.store, target=rec.name, detail={"files_removed": n})
        return n

    @checks("store.write")
    def run(self, name: str, *, kick: bool = True) -> RunRecord:
        """Queue a run for the workers (this process's worker is woken, unless ``kick`` is false: a
        process about to end, ``knowledge source run`` without ``--wait``, leaves the run to the
        long-lived workers); the run queued or running already when there is one. Raises
        ``InvalidArgument``, ``PermissionDenied``."""
        rec = self._get(name, "write")
        run = self._sources.enqueue_run(rec.id, created_by=self._wb.actor.username)
        self._wb.record("source.run", store=rec.store, target=rec.name, detail={"run": run.id})
        if kick and self._sources_runs_here():
            self._wb._system.jobs.ensure_worker()
        return run

    def _sources_runs_here(self) -> bool:
        return self._wb._system.jobs.runs_workers()

    @checks("store.write")
    def run_here(self, name: str, *, progress: Callable[[str, float], None] | None = None) -> RunReport:
        """Run the source now in this thread (``knowledge source run --here``): recorded like a
        worker's run. Raises ``InvalidArgument``, ``PermissionDenied``; never for the source."""
        rec = self._get(name, "write")
        self._wb.record("source.run", store=rec.store, target=rec.name, detail={"here": True})
        return self._sources.run(rec.id, progress=progress)

    @checks("store.write")
    def plan(self, name: str) -> SourcePlan:
        """A dry run: what the next run would do (the source is listed; nothing read or changed).
        Raises ``SourceError`` and its kinds, in words without secrets."""
        return self._sources.plan(self._get(name, "write").id)

    @checks("store.write")
    def check(self, name: str) -> str:
        """Connect to the source and look (reading no file). Raises ``SourceError`` in words."""
        return self._sources.check(self._get(name, "write").id)

    @checks("store.read")
    def runs(self, name: str, limit: int = 20) -> list[RunRecord]:
        """The source's runs, newest first: for an actor who may not read every file of the store,
        each run's counts are those of its changes they may read (``unchanged`` left out)."""
        rec = self._get(name)
        runs = self._sources.runs(rec.id, limit)
        if not self._wb._hidden_files(rec.store):
            return runs
        return [replace(r, counts=self._counts(self.run_items(r.id, _rec=rec))) for r in runs]

    @staticmethod
    def _counts(items: list[RunItem]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for i in items:
            key = i.action if i.ok else "failed"
            counts[key] = counts.get(key, 0) + 1
        return counts

    @checks("store.read")
    def run_items(self, run_id: str, *, _rec: SourceRecord | None = None) -> list[RunItem]:
        """The changes of run ``run_id`` the actor may read (a file they may not read is left out).
        Raises ``InvalidArgument`` ("There is no run") for a run of a source they may not see."""
        run = self._sources.get_run(run_id)
        rec = _rec or (self._sources.find(run.source_id) if run is not None else None)
        if run is None or rec is None:
            raise InvalidArgument(f"There is no run {run_id!r}.", param="run")
        if _rec is None:
            try:
                self._get(rec.id)
            except (InvalidArgument, StoreNotFound):
                raise InvalidArgument(f"There is no run {run_id!r}.", param="run") from None
        hidden = self._wb._hidden_names(rec.store)
        return [i for i in self._sources.run_items(run_id) if i.path not in hidden and (i.old_path or "") not in hidden]


__all__ = ["EvaluationDesk", "LlmConfigDesk", "PortableDesk", "SourceDesk", "StoredFileUsage", "SyncDesk", "Workbench"]
