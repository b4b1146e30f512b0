"""Folder sync: keep a store in step with a folder on this machine.

:class:`FolderSync` compares a folder's files (matching a glob; hidden files skipped) with what
earlier syncs of that folder put into the store, by relative path and SHA-256, and makes a
:class:`SyncPlan` of :class:`PlanItem` s: ``added``, ``changed``, ``renamed`` (the name moves, nothing
embedded again), ``deleted``, ``unchanged``. A file whose size and mtime (ns) match the last sync is
not read. :meth:`FolderSync.apply` carries a plan out one item at a time (:class:`ItemResult` each; a
file that fails is reported and the rest goes on); :meth:`FolderSync.watch` re-plans as files change
(watchdog), debounced and waiting for files still being written.

Two rules: a sync deletes only what a sync of the same folder added (every name carries its origin,
:class:`~knowledge.catalog.FileName`), and the same content at two paths is stored once.
:class:`FolderSyncs` is the feature the workbench builds (``wb.syncs``). The behaviour in full:
``docs/cli.md``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from knowledge.access import LocalFolders
from knowledge.catalog import DONE, Catalog, SyncedFolder
from knowledge.errors import InvalidArgument, KnowledgeError, unexpected_problem
from knowledge.filestore.base import clean_name
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.indexing import Indexer, expand_paths, normalize_name
from knowledge.service.jobs import IngestJob, JobRegistry
from knowledge.service.stores import Stores

log = logging.getLogger(__name__)

#: The plan's kinds of item, in the order a plan lists and applies them.
ACTIONS = ("added", "changed", "renamed", "deleted", "unchanged")
#: Default seconds of quiet after the last file event before ``watch`` plans a round.
DEBOUNCE_SECONDS = 1.0
#: Default seconds a planned file's size and mtime must stay the same before ``watch`` applies it.
SETTLE_SECONDS = 1.0
_HASH_BLOCK = 1 << 20


def folder_key(folder: str | os.PathLike) -> str:
    """The folder as a store remembers it: absolute, ``~`` expanded, symlinks resolved."""
    return str(Path(os.path.realpath(Path(folder).expanduser())))


def sha256_of(path: Path) -> str:
    """Lowercase hex SHA-256 of a file's bytes, read in 1 MiB blocks (bounded memory)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class PlanItem:
    """One step of a plan. ``path`` is the file's path relative to the folder (``/``-separated, NFC)
    and its name in the store; ``old_path`` the path it had (``renamed``); ``file_id`` the store's
    content it concerns (``None`` for ``added``); ``size`` (bytes), ``mtime_ns`` and ``sha256`` are
    the file's on disk when planned (``None`` for ``deleted``, and ``sha256`` for a file taken as
    unchanged by its size and mtime)."""

    action: str
    path: str
    old_path: str | None = None
    file_id: str | None = None
    size: int | None = None
    mtime_ns: int | None = None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """What a sync of ``folder`` (absolute path) into ``store`` would do: :attr:`items` by action
    then path; ``skipped`` counts the folder's files left out, by reason (hidden, not matching the
    glob, outside the allowed folders); ``hashed`` how many files were read to compare them."""

    store: str
    folder: str
    glob: str
    items: tuple[PlanItem, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    hashed: int = 0

    def of(self, action: str) -> list[PlanItem]:
        return [i for i in self.items if i.action == action]

    def counts(self) -> dict[str, int]:
        """``{"added": 2, "changed": 0, "renamed": 1, "deleted": 0, "unchanged": 40}``."""
        return {a: sum(1 for i in self.items if i.action == a) for a in ACTIONS}

    @property
    def changes(self) -> int:
        """The number of items that change the store (all but ``unchanged``)."""
        return sum(1 for i in self.items if i.action != "unchanged")

    def summary(self) -> str:
        """``"2 added, 0 changed, 1 renamed, 0 deleted, 40 unchanged"``."""
        return ", ".join(f"{n} {a}" for a, n in self.counts().items())

    def lines(self) -> list[str]:
        """The plan as a person reads it: one line per change (``+ a.md``, ``~ b.md``,
        ``> old.md -> new.md``, ``- gone.md``), then the summary."""
        mark = {"added": "+", "changed": "~", "renamed": ">", "deleted": "-"}
        out = [
            f"{mark[i.action]} {i.action:<8} {i.old_path + ' -> ' if i.old_path else ''}{i.path}"
            for i in self.items
            if i.action != "unchanged"
        ]
        return [*out, f"{self.folder} -> {self.store}: {self.summary()}"]

    def to_json(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "folder": self.folder,
            "glob": self.glob,
            "counts": self.counts(),
            "skipped": dict(self.skipped),
            "hashed": self.hashed,
            "items": [asdict(i) for i in self.items if i.action != "unchanged"],
        }

    def only(self, items: list[PlanItem]) -> SyncPlan:
        """This plan with only ``items`` (kept in plan order)."""
        keep = set(items)
        return SyncPlan(
            self.store, self.folder, self.glob, tuple(i for i in self.items if i in keep), dict(self.skipped), self.hashed
        )


@dataclass(frozen=True, slots=True)
class ItemResult:
    """How one plan item went: ``ok``, and ``message`` in words (the reason when it failed);
    ``ingest`` the ingestion's result for ``added``/``changed``."""

    item: PlanItem
    ok: bool
    message: str
    ingest: IngestResult | None = None


@dataclass(frozen=True, slots=True)
class SyncReport:
    """A plan carried out: each change's :class:`ItemResult`, in plan order."""

    plan: SyncPlan
    results: tuple[ItemResult, ...]

    @property
    def failed(self) -> list[ItemResult]:
        return [r for r in self.results if not r.ok]

    def counts(self) -> dict[str, int]:
        """The plan's counts with the items that failed taken out and counted as ``failed``."""
        counts = self.plan.counts()
        for r in self.failed:
            counts[r.item.action] -= 1
        return {**counts, "failed": len(self.failed)}


class FolderSyncs:
    """Folder syncs over the parts (``wb.syncs``): makes a :class:`FolderSync`, lists and forgets a
    store's synced folders; a :class:`SyncJob` is shown through ``jobs`` (this process's
    :class:`~knowledge.service.jobs.JobRegistry`) and ingests with ``indexer``."""

    def __init__(self, stores: Stores, catalog: Catalog, indexer: Indexer, jobs: JobRegistry) -> None:
        self.stores, self.catalog, self.indexer, self.jobs = stores, catalog, indexer, jobs

    def folder(
        self,
        store: str,
        folder: str | os.PathLike,
        glob: str | None = None,
        *,
        template: str | None = None,
        folders: LocalFolders | None = None,
    ) -> FolderSync:
        """A sync of ``folder`` into ``store`` (see :class:`FolderSync`)."""
        return FolderSync(self, store, folder, glob, template=template, folders=folders)

    def synced_folders(self, store: str) -> list[SyncedFolder]:
        """The folders ``store`` is kept in sync with (:class:`~knowledge.catalog.SyncedFolder`)."""
        return self.catalog.synced_folders(store) if self.stores.exists(store) else []

    def forget(self, store: str, folder: str) -> bool:
        """Stop syncing ``folder`` into ``store``: the folder is forgotten and its files stay in the
        store as files added by hand (no later sync deletes them). Returns whether it was synced."""
        return self.catalog.delete_synced_folder(store, folder_key(folder))

    def ingest_file(self, store: str, source: Any, name: str | None = None, **kwargs: Any) -> IngestResult:
        """See :meth:`Indexer.ingest_file` (what a :class:`SyncJob` runs)."""
        return self.indexer.ingest_file(store, source, name, **kwargs)


class FolderSync:
    """Sync ``folder`` into ``store``.

    Args:
        syncs: the parts (:class:`FolderSyncs`; ``wb.syncs.folder(...)`` makes one).
        store: the store (created from ``template`` by the first file added, as ``ingest`` does).
        folder: the folder on this machine.
        glob: the files taken (default ``**/*``: every file, recursively; see
            :func:`knowledge.service.indexing.glob_pattern`).
        template: the template of a store created by the sync.
        folders: the app's :class:`~knowledge.access.LocalFolders`: the folder must be allowed and
            a file leading out of the allowed folders (a symlink) is left out. ``None`` (the CLI)
            reads any folder the user names.

    Raises:
        PathNotAllowed: ``folders`` does not allow the folder.
        InvalidArgument: the folder does not exist or is not a folder.
    """

    def __init__(
        self,
        syncs: FolderSyncs,
        store: str,
        folder: str | os.PathLike,
        glob: str | None = None,
        *,
        template: str | None = None,
        folders: LocalFolders | None = None,
    ) -> None:
        raw = str(folder).strip()
        if not raw:
            raise InvalidArgument("Type the path of a folder on this machine.")
        path = Path(raw).expanduser()
        if folders is not None:
            path = folders.check(path)
        if not path.is_dir():
            raise InvalidArgument(f"{raw} is not a folder on this machine.")
        self.syncs, self.store, self.template, self.folders = syncs, store, template, folders
        self.stores, self.catalog, self.indexer = syncs.stores, syncs.catalog, syncs.indexer
        self.path = Path(folder_key(path))
        self.folder = str(self.path)
        self.glob = (glob or "").strip() or "**/*"
        #: Asked before a file is added or changed: ``quota(store, bytes, files)`` raises a
        #: ``KnowledgeError`` (``QuotaExceeded``) that fails that file in words; the workbench's sync
        #: desk sets it to its quota check (:meth:`knowledge.workbench.SyncDesk.folder`).
        self.quota: Callable[[str, int, int], object] | None = None
        #: the path on disk of each name the last scan found (a name the store keeps lost the
        #: control and invisible characters of the file's own name: the file is still read by its own)
        self._on_disk: dict[str, Path] = {}

    # -- planning ---------------------------------------------------------------------------------
    def _scan(self, skipped: dict[str, int]) -> dict[str, tuple[Path, os.stat_result]]:
        out: dict[str, tuple[Path, os.stat_result]] = {}
        for p in expand_paths([self.path], self.glob, skipped):
            if not isinstance(p, Path):
                continue
            if self.folders is not None and not self.folders.allows(p):
                skipped["outside the allowed folders"] = skipped.get("outside the allowed folders", 0) + 1
                continue
            try:
                st = p.stat()
            except OSError:  # gone since the walk
                continue
            try:  # the name the store keeps (knowledge.filestore.base.clean_name: no control characters)
                rel = normalize_name(clean_name(p.relative_to(self.path).as_posix()))
            except KnowledgeError:  # a path too long to be a name: ingesting it says so
                rel = normalize_name(p.relative_to(self.path).as_posix())
            out[rel] = (p, st)
            self._on_disk[rel] = p
        return out

    def source(self, rel: str) -> Path:
        """The file on disk a planned name stands for."""
        return self._on_disk.get(rel) or self.path / rel

    def plan(self) -> SyncPlan:
        """Compare the folder with the store (nothing changes). Files whose size and mtime match
        the last sync's are not read; the others are hashed (SHA-256).

        Raises:
            InvalidArgument: the folder is gone.
        """
        if not self.path.is_dir():
            raise InvalidArgument(f"{self.folder} is not a folder on this machine (any more).")
        skipped: dict[str, int] = {}
        disk = self._scan(skipped)
        catalog = self.catalog
        exists = self.stores.exists(self.store)
        known = {n.name: n for n in catalog.names(self.store, folder=self.folder)} if exists else {}
        contents = {f.file_id: f for f in catalog.files(self.store)} if exists else {}
        items: list[PlanItem] = []
        fresh: list[PlanItem] = []  # paths the store has no name for yet
        hashed = 0
        for rel, (p, st) in sorted(disk.items()):
            name = known.get(rel)
            content = contents.get(name.file_id) if name is not None else None
            if name is not None and content is not None and name.size == st.st_size and name.mtime_ns == st.st_mtime_ns:
                items.append(PlanItem("unchanged", rel, file_id=name.file_id, size=st.st_size, mtime_ns=st.st_mtime_ns))
                continue
            try:
                digest = sha256_of(p)
            except OSError as exc:  # unreadable now: the apply step reports it for this file
                log.info("sync: %s cannot be read: %s", p, exc)
                digest = None
            hashed += 1
            if name is None:
                fresh.append(PlanItem("added", rel, size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=digest))
            elif content is not None and digest is not None and content.sha256 == digest:
                items.append(
                    PlanItem("unchanged", rel, file_id=name.file_id, size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=digest)
                )
            else:
                items.append(
                    PlanItem("changed", rel, file_id=name.file_id, size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=digest)
                )
        gone = {rel: n for rel, n in known.items() if rel not in disk}
        by_sha: dict[str, list[str]] = {}
        for rel, n in sorted(gone.items()):
            content = contents.get(n.file_id)
            if content is not None and content.status == DONE and content.sha256:
                by_sha.setdefault(content.sha256, []).append(rel)
        for item in fresh:
            olds = by_sha.get(item.sha256 or "")
            if olds:  # the same bytes left another path of this folder: a rename
                old = olds.pop(0)
                n = gone.pop(old)
                items.append(
                    PlanItem(
                        "renamed",
                        item.path,
                        old_path=old,
                        file_id=n.file_id,
                        size=item.size,
                        mtime_ns=item.mtime_ns,
                        sha256=item.sha256,
                    )
                )
            else:
                items.append(item)
        items += [PlanItem("deleted", rel, file_id=n.file_id) for rel, n in sorted(gone.items())]
        items.sort(key=lambda i: (ACTIONS.index(i.action), i.path.lower(), i.path))
        return SyncPlan(self.store, self.folder, self.glob, tuple(items), skipped, hashed)

    # -- applying ---------------------------------------------------------------------------------
    def apply(
        self,
        plan: SyncPlan,
        *,
        on_result: Callable[[ItemResult], None] | None = None,
        progress: Callable[[PlanItem, str, float], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> SyncReport:
        """Carry ``plan`` out (made by :meth:`plan` of this sync) and remember the folder with the
        counts. Each change is reported (``on_result``); a file that fails is reported and the rest
        goes on; ``cancel`` stops before the next item (and cancels the file being ingested).
        ``progress(item, stage, fraction)`` follows each file being ingested."""
        if (plan.store, plan.folder) != (self.store, self.folder):
            raise InvalidArgument("This plan is of another store or folder.")
        results: list[ItemResult] = []
        for item in plan.items:
            if item.action == "unchanged":
                # read to compare: next time its size and mtime suffice
                if item.sha256 is not None and item.file_id is not None:
                    self.catalog.add_name(self.store, item.file_id, item.path, self.folder, item.size, item.mtime_ns)
                continue
            if cancel is not None and cancel.is_set():
                r = ItemResult(item, False, f"{item.path}: not done, the sync was stopped.")
            else:
                r = self._apply_one(item, progress, cancel)
            results.append(r)
            if on_result is not None:
                on_result(r)
        report = SyncReport(plan, tuple(results))
        if self.stores.exists(self.store):
            self.catalog.put_synced_folder(self.store, self.folder, self.glob)
            self.catalog.record_sync(self.store, self.folder, report.counts())
        return report

    def _apply_one(
        self, item: PlanItem, progress: Callable[[PlanItem, str, float], None] | None, cancel: threading.Event | None
    ) -> ItemResult:
        try:
            if item.action in ("added", "changed"):
                if self.quota is not None:
                    self.quota(self.store, item.size or 0, 1 if item.action == "added" else 0)
                stat = (item.size, item.mtime_ns) if item.size is not None and item.mtime_ns is not None else None
                r = self.indexer.ingest_file(
                    self.store,
                    self.source(item.path),
                    item.path,
                    template=self.template,
                    folder=self.folder,
                    stat=stat,
                    cancel=cancel,
                    progress=(lambda s, f: progress(item, s, f)) if progress else None,
                )
                said = r.message if r.message.startswith(item.path) else f"{item.path}: {r.message}"
                return ItemResult(item, r.ok, said, r)
            if item.action == "renamed":
                assert item.file_id is not None and item.old_path is not None
                self.indexer.rename(
                    self.store, item.file_id, item.old_path, item.path, folder=self.folder, stat=(item.size, item.mtime_ns)
                )
                return ItemResult(item, True, f"{item.path}: renamed from {item.old_path}; nothing re-embedded.")
            if item.action == "deleted":
                # every content carrying the path from this folder (a changed file that failed to read
                # leaves its earlier version beside it): the path is gone
                ids = {x.file_id for x in self.catalog.names(self.store, name=item.path, folder=self.folder)}
                n = sum(self.indexer.delete_name(self.store, fid, item.path, folder=self.folder) for fid in sorted(ids))
                return ItemResult(
                    item,
                    True,
                    f"{item.path}: removed from the store ({n} chunks)."
                    if n
                    else f"{item.path}: removed; its content stays under its other name(s).",
                )
        except KnowledgeError as exc:
            return ItemResult(item, False, f"{item.path}: {exc}")
        except Exception as exc:  # a reader's bug: this file fails in words, the sync goes on
            log.exception("sync of %s into %s: %s", self.folder, self.store, item.path)
            said = f"{item.path}: {unexpected_problem(exc)}."
            return ItemResult(item, False, said, IngestResult(item.path, Outcome.FAILED, said, error=type(exc).__name__))
        raise AssertionError(item.action)

    def run(self, **kwargs: Any) -> SyncReport:
        """Plan and apply in one go."""
        return self.apply(self.plan(), **kwargs)

    # -- watching ---------------------------------------------------------------------------------
    def settled(self, plan: SyncPlan, settle: float, stop: threading.Event | None = None) -> tuple[SyncPlan, list[PlanItem]]:
        """``(the plan's items that are safe to apply, the files still being written)``: each added,
        changed or renamed file is stat-ed again after ``settle`` seconds, and one whose size or
        mtime moved (or that vanished) is left out -- it is still being written."""
        moving = [i for i in plan.items if i.action in ("added", "changed", "renamed")]
        if moving and settle > 0:
            (stop or threading.Event()).wait(settle)
        unsettled = []
        for i in moving:
            try:
                st = self.source(i.path).stat()
            except OSError:
                unsettled.append(i)
                continue
            if (st.st_size, st.st_mtime_ns) != (i.size, i.mtime_ns):
                unsettled.append(i)
        return plan.only([i for i in plan.items if i not in unsettled]), unsettled

    def watch(
        self,
        stop: threading.Event,
        *,
        debounce: float = DEBOUNCE_SECONDS,
        settle: float = SETTLE_SECONDS,
        on_report: Callable[[SyncReport], None] | None = None,
        on_waiting: Callable[[list[PlanItem]], None] | None = None,
        on_error: Callable[[Exception], None] | None = None,
        poll: float | None = None,
    ) -> None:
        """Sync now, then again whenever files change, until ``stop`` is set.

        A round starts ``debounce`` seconds after the last file event (a burst of saves is one
        round); files still being written (see :meth:`settled`) wait for a later round
        (``on_waiting``); each applied round is reported (``on_report``); an error of a round (the
        folder gone, the catalog busy) is reported (``on_error``) and watching goes on. ``poll``
        seconds, when given, also starts a round that often without an event (folders on network
        file systems send none).
        """
        from watchdog.events import FileSystemEventHandler  # noqa: PLC0415 - watchdog (native observers) only for --watch
        from watchdog.observers import Observer  # noqa: PLC0415 - as above

        dirty = threading.Event()
        last = [time.monotonic()]

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                last[0] = time.monotonic()
                dirty.set()

        observer = Observer()
        observer.schedule(Handler(), self.folder, recursive=True)
        observer.start()
        dirty.set()  # the first round: sync what changed while nobody watched
        last[0] = 0.0
        next_poll = time.monotonic() + poll if poll else None
        try:
            while not stop.is_set():
                if next_poll is not None and time.monotonic() >= next_poll:
                    dirty.set()
                    next_poll = time.monotonic() + (poll or 0)
                if not dirty.is_set() or time.monotonic() - last[0] < debounce:
                    stop.wait(min(0.05, debounce or 0.05))
                    continue
                dirty.clear()
                try:
                    plan = self.plan()
                    if not plan.changes:
                        continue
                    ready, waiting = self.settled(plan, settle, stop)
                    if stop.is_set():
                        break
                    if waiting:
                        last[0] = time.monotonic()
                        dirty.set()  # look again once they are quiet
                        if on_waiting is not None:
                            on_waiting(waiting)
                    if ready.changes:
                        report = self.apply(ready)
                        if on_report is not None:
                            on_report(report)
                except KnowledgeError as exc:
                    if on_error is not None:
                        on_error(exc)
                    else:
                        log.warning("sync of %s: %s", self.folder, exc)
        finally:
            observer.stop()
            observer.join(5.0)


def counts_text(counts: dict[str, int]) -> str:
    """A sync's counts in words, the non-zero ones: ``"3 added, 1 deleted, 40 unchanged"``;
    ``"nothing yet"`` for none."""
    words = [f"{n} {k}" for k, n in counts.items() if n]
    return ", ".join(words) or "nothing yet"


class SyncJob(IngestJob):
    """A sync plan applied in a background thread, shown like an ingest batch: one line per change
    (the added and changed files with their ingestion progress), each with its outcome;
    :meth:`summary_parts` says the result in the plan's words (added, changed, renamed, deleted, failed).
    Not durable: the plan runs in a thread of this process (a sync is planned again after a restart)."""

    durable = False

    def __init__(self, sync: FolderSync, plan: SyncPlan) -> None:
        changes = [i for i in plan.items if i.action != "unchanged"]
        super().__init__(sync.syncs.jobs, sync.store, [(i.path, sync.source(i.path)) for i in changes])
        self.sync, self.plan = sync, plan
        self.report: SyncReport | None = None
        self.notes = [f"Sync of {sync.folder}: {plan.summary()}."]

    def summary_parts(self) -> list[str]:
        """The finished sync in the plan's words for the batch header: ``["2 added", "1 renamed"]``."""
        if self.report is None:
            return []
        return [f"{n} {k}" for k, n in self.report.counts().items() if n and k != "unchanged"]

    def _run(self) -> None:
        changes = [i for i in self.plan.items if i.action != "unchanged"]
        index = {i: n for n, i in enumerate(changes)}

        def progress(item: PlanItem, stage: str, fraction: float) -> None:
            self.files[index[item]].update(stage, fraction)

        def on_result(r: ItemResult) -> None:
            fp = self.files[index[r.item]]
            outcome = r.ingest.outcome if r.ingest is not None else Outcome.INDEXED if r.ok else Outcome.FAILED
            if r.item.action in ("renamed", "deleted") and r.ok:
                outcome = Outcome.UNCHANGED
            fp.result = r.ingest or IngestResult(r.item.path, outcome, r.message, file_id=r.item.file_id)
            fp.stage = "done"

        try:
            self.report = self.sync.apply(self.plan, on_result=on_result, progress=progress, cancel=self._cancel)
        except Exception as exc:  # the store itself is the problem: every change not done says so
            log.exception("sync of %s into %s", self.sync.folder, self.store)
            for fp in self.files:
                if fp.result is None:
                    said = unexpected_problem(exc, "during the sync", "the program")
                    fp.result = IngestResult(fp.name, Outcome.FAILED, f"{fp.name}: {said}.", error=type(exc).__name__)
        for fp in self.files:
            if fp.result is None:
                fp.result = IngestResult(fp.name, Outcome.CANCELLED, f"{fp.name}: not done, the sync was stopped.")
        self._items = []
        self.finished_at = time.monotonic()


__all__ = [
    "ACTIONS",
    "FolderSync",
    "FolderSyncs",
    "ItemResult",
    "PlanItem",
    "SyncJob",
    "SyncPlan",
    "SyncReport",
    "counts_text",
    "folder_key",
    "sha256_of",
]
