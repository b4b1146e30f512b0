"""The sources engine: a named, scheduled sync of a store with a source, run by the workers.

A *source* (:class:`SourceRecord`, table ``sources``, migration 19) names a kind (a plugin,
:mod:`knowledge.sources.registry`), its settings (the secret ones sealed by
:class:`~knowledge.sources.secrets.Vault`), the store it fills, include and exclude globs, a size
limit, a schedule (every N minutes, or by hand), a pause, and default readers.

A *run* lists the source (:meth:`Source.entries <knowledge.sources.base.Source.entries>`, no bytes
read) and compares it with what earlier runs put in the store, path by path, into a
:class:`SourcePlan` -- the plan of folder sync (:mod:`knowledge.sync`) with the source's versions in
place of size and mtime:

- ``unchanged``: same version as last read (not read again);
- ``changed``: another version (read; bytes equal to the stored ones are not indexed again);
- ``renamed``: a new path whose content key equals that of a path gone (nothing read, nothing
  embedded: the name moves); a new path whose bytes, once read, equal a path gone is a rename too;
- ``added``, ``deleted``; and ``readers``: a file whose readers at the source changed.

Every name a source gives carries the origin ``source:<id>`` (:class:`~knowledge.catalog.FileName`),
so a run deletes only what the same source added. Per path the last read ``version``, content key
and SHA-256 are kept (``source_entries``), written after each file, so a run killed mid-way loses
nothing and the next converges. Each run and each change it made or tried are kept with their
outcome in words (``source_runs``, ``source_run_items``).

Runs are job rows of the ingestion queue (``source_kind = "source"``), so any worker on any machine
runs them, heartbeating; a worker killed mid-run has its job taken over and the run starts again
from the plan. :meth:`Sources.enqueue_due` (the scheduler, :meth:`Sources.start_scheduler`) queues
the runs that are due. The behaviour in full: ``docs/sources.md``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import unicodedata
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from knowledge.catalog import Catalog
from knowledge.catalog import jobs as queue
from knowledge.config import Settings
from knowledge.errors import FileTooLarge, InvalidArgument, KnowledgeError, unexpected_problem
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.indexing import Indexer, normalize_name
from knowledge.service.stores import Stores
from knowledge.service.worker import host_name, new_worker_id, pid_alive
from knowledge.sources.base import Entry, EntryGone, Field, Source, SourceContext, SourceError, field_value
from knowledge.sources.registry import source_class, source_kinds
from knowledge.sources.secrets import MASK, Vault, redact
from knowledge.sources.sids import sid_mapper

log = logging.getLogger(__name__)

#: The plan's kinds of item, in the order a plan lists and applies them.
ACTIONS = ("added", "changed", "renamed", "deleted", "readers", "unchanged")
#: The job rows' ``source_kind`` of a run.
JOB_KIND = "source"
#: Runs kept per source (older ones and their items are dropped).
RUNS_KEPT = 50
#: A run's states.
RUN_STATES = ("queued", "running", "done", "failed", "cancelled")
_UNFINISHED = ("queued", "running")
_COPY_BLOCK = 1 << 20
#: ``scheme://user:password@`` in a setting: a credential that would be kept in clear.
_URL_CREDENTIALS = re.compile(r"[a-z][a-z0-9+.-]*://[^/@\s:]*:[^/@\s]*@", re.IGNORECASE)


def origin_of(source_id: str) -> str:
    """The origin (``FileName.folder``) of the names source ``source_id`` gives: ``source:<id>``."""
    return f"source:{source_id}"


def _now() -> datetime:
    from datetime import UTC  # noqa: PLC0415 - small

    return datetime.now(UTC)


def _loads(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    return json.loads(value)


@dataclass(frozen=True)
class SourceRecord:
    """A source as the catalog keeps it. ``config`` holds the settings that are not secret;
    ``secrets_set`` the names of the secret fields that have a value (the values are never here).
    ``every_minutes`` ``None``: runs by hand only. ``readers``: the default readers of its files
    (``None``: the store's sharing) where the source says nothing of its own. ``next_run``: when the
    scheduler queues it next (``None``: by hand or paused)."""

    id: str
    name: str
    kind: str
    store: str
    config: dict[str, Any]
    secrets_set: tuple[str, ...]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int | None = None
    every_minutes: int | None = None
    paused: bool = False
    readers: tuple[str, ...] | None = None
    next_run: datetime | None = None
    marker: str | None = None
    created_by: str | None = None
    created: datetime | None = None
    updated: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        """The source as the REST API and ``--json`` show it: no secret, only which are set."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "store": self.store,
            "config": dict(self.config),
            "secrets_set": list(self.secrets_set),
            "include": list(self.include),
            "exclude": list(self.exclude),
            "max_bytes": self.max_bytes,
            "every_minutes": self.every_minutes,
            "paused": self.paused,
            "readers": list(self.readers) if self.readers is not None else None,
            "next_run": self.next_run.isoformat() if self.next_run else None,
            "created_by": self.created_by,
            "created": self.created.isoformat() if self.created else None,
        }


@dataclass(frozen=True)
class RunRecord:
    """One run of a source: ``cause`` ``"hand"`` or ``"schedule"``; ``status`` one of
    :data:`RUN_STATES`; ``counts`` by action (and ``failed``); ``reason`` why it failed, in words."""

    id: str
    source_id: str
    batch_id: str | None
    cause: str
    status: str
    counts: dict[str, int]
    reason: str | None
    worker: str | None
    queued: datetime
    started: datetime | None
    finished: datetime | None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "cause": self.cause,
            "status": self.status,
            "counts": dict(self.counts),
            "reason": self.reason,
            "queued": self.queued.isoformat() if self.queued else None,
            "started": self.started.isoformat() if self.started else None,
            "finished": self.finished.isoformat() if self.finished else None,
        }


@dataclass(frozen=True)
class RunItem:
    """One change a run made or tried: ``action`` (see :data:`ACTIONS`), the path (and the path it
    had, for ``renamed``), ``ok``, the outcome in words, the chunks written."""

    seq: int
    action: str
    path: str
    old_path: str | None
    ok: bool
    message: str
    chunks: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "path": self.path,
            "old_path": self.old_path,
            "ok": self.ok,
            "message": self.message,
            "chunks": self.chunks,
        }


@dataclass(frozen=True)
class PlanItem:
    """One step of a source's plan: ``entry`` as listed (``None`` for ``deleted``), ``file_id`` the
    store's content concerned (``None`` for ``added``), ``old_path`` for ``renamed``,
    ``readers`` the readers the file is to have (``readers``, ``added``, ``changed``)."""

    action: str
    path: str
    entry: Entry | None = None
    file_id: str | None = None
    old_path: str | None = None
    readers: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SourcePlan:
    """What a run of ``source`` would do. ``listed``: the entries the source listed;
    ``skipped``: the entries left out, by reason; ``unchanged_marker``: the source's change token was
    the last complete run's, so nothing was listed."""

    source: str
    store: str
    items: tuple[PlanItem, ...]
    listed: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    unchanged_marker: bool = False
    marker: str | None = None

    def counts(self) -> dict[str, int]:
        """``{"added": 2, "changed": 0, ..., "unchanged": 40}``."""
        return {a: sum(1 for i in self.items if i.action == a) for a in ACTIONS}

    @property
    def changes(self) -> int:
        return sum(1 for i in self.items if i.action != "unchanged")

    def summary(self) -> str:
        """``"2 added, 1 renamed, 40 unchanged"`` (the non-zero counts), or ``"nothing changed"``."""
        words = [f"{n} {a}" for a, n in self.counts().items() if n]
        return ", ".join(words) or "nothing listed"

    def lines(self) -> list[str]:
        """One line per change (``+ added   a.md``), then the summary and the skipped entries."""
        mark = {"added": "+", "changed": "~", "renamed": ">", "deleted": "-", "readers": "@"}
        out = [
            f"{mark[i.action]} {i.action:<8} {i.old_path + ' -> ' if i.old_path else ''}{i.path}"
            for i in self.items
            if i.action != "unchanged"
        ]
        out.append(f"{self.source} -> {self.store}: {self.summary()}")
        out += [f"  skipped {n}: {why}" for why, n in sorted(self.skipped.items())]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "store": self.store,
            "counts": self.counts(),
            "listed": self.listed,
            "skipped": dict(self.skipped),
            "unchanged_marker": self.unchanged_marker,
            "items": [
                {"action": i.action, "path": i.path, "old_path": i.old_path} for i in self.items if i.action != "unchanged"
            ],
        }


@dataclass
class RunReport:
    """A run carried out: the run's record (its final state), the plan, each change's
    :class:`RunItem`."""

    run: RunRecord
    plan: SourcePlan | None
    items: list[RunItem]

    @property
    def ok(self) -> bool:
        return self.run.status == "done"

    @property
    def counts(self) -> dict[str, int]:
        return dict(self.run.counts)

    @property
    def reason(self) -> str | None:
        return self.run.reason

    @property
    def failed(self) -> list[RunItem]:
        return [i for i in self.items if not i.ok]

    def summary(self) -> str:
        """The run in words: ``"done: 2 added, 1 deleted, 40 unchanged"`` or ``"failed: <reason>"``."""
        words = ", ".join(f"{n} {a}" for a, n in self.run.counts.items() if n) or "nothing changed"
        if self.run.status == "failed":
            return f"failed: {self.run.reason}" + (f" ({words})" if self.run.counts else "")
        return f"{self.run.status}: {words}"


class _Bounded:
    """A binary file that refuses more than ``limit`` bytes and hashes what it takes (SHA-256)."""

    def __init__(self, fh: BinaryIO, limit: int | None) -> None:
        self.fh, self.limit, self.size = fh, limit, 0
        self.sha = hashlib.sha256()

    def write(self, data: bytes, /) -> int:
        n = len(data)
        self.size += n
        if self.limit is not None and self.size > self.limit:
            raise FileTooLarge(f"it is larger than the source's size limit ({_mb(self.limit)})")
        self.sha.update(data)
        self.fh.write(data)
        return n

    def flush(self) -> None:
        self.fh.flush()

    def writable(self) -> bool:
        return True


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.3g} MB" if n >= 1_000_000 else f"{n:,} bytes"


def _about(path: str, text: str) -> str:
    """``text`` said of ``path``: ``"a.md: <text>"``, unless it names the path first already."""
    return text if text.startswith(path) else f"{path}: {text}"


def clean_path(path: str) -> str:
    """A listed path as a store name: ``/``-separated, no leading or trailing ``/``, NFC."""
    return normalize_name(unicodedata.normalize("NFC", path.replace("\\", "/")).strip("/"))


def _matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` matches one of the glob ``patterns`` (``*`` within a folder, ``**`` across
    folders, a pattern without ``/`` matched against the file name too)."""
    name = path.rsplit("/", 1)[-1]
    for p in patterns:
        if fnmatch.fnmatchcase(path, p) or ("/" not in p and fnmatch.fnmatchcase(name, p)):
            return True
        if p.startswith("**/") and fnmatch.fnmatchcase(path, p[3:]):
            return True
    return False


class Sources:
    """The sources of one catalog (``system.sources``): kept, checked, planned, run.

    Args:
        settings: ``sources.*``, the secret key, the data folder.
        catalog: where sources, runs and the job rows live.
        stores: the stores (a source's store is made on its first run when missing).
        indexer: ingests, renames and deletes the files, and sets their readers.
        principal_for_sid: maps a Windows SID to a reader; default: a new
            :func:`knowledge.sources.sids.sid_mapper` for each run (``sources.sid_map``, then the LDAP directory).
    """

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        stores: Stores,
        indexer: Indexer,
        principal_for_sid: Callable[[str], str | None] | None = None,
        quota: Callable[[str, int, int], None] | None = None,
    ) -> None:
        self.settings, self.catalog, self.stores, self.indexer = settings, catalog, stores, indexer
        #: ``quota(store, bytes, files)``, asked before a fetched file is written: raises a
        #: ``KnowledgeError`` (``QuotaExceeded``) that fails that file in words (read again next run)
        self.quota = quota
        self.vault = Vault(settings)
        self.principal_for_sid = principal_for_sid
        self._scheduler: threading.Thread | None = None
        self._stop = threading.Event()
        #: Called with each run the schedule queued (:meth:`enqueue_due`): the system audits it in
        #: the name of the process that queued it.
        self.on_scheduled: Callable[[RunRecord], None] | None = None

    # -- kinds -------------------------------------------------------------------------------------
    @staticmethod
    def kinds() -> dict[str, type[Source]]:
        """The source kinds that load, by name (:func:`knowledge.sources.registry.source_kinds`)."""
        return source_kinds()

    # -- records -----------------------------------------------------------------------------------
    _COLUMNS = (
        "id, name, kind, store, config, secret, include_globs, exclude_globs, max_bytes, every_minutes,"
        " paused, readers, next_run, marker, created_by, created, updated"
    )

    def _record(self, row: Any) -> SourceRecord:
        (sid, name, kind, store, config, secret, inc, exc, max_bytes, every, paused, readers, nxt, marker, by, c, u) = row
        cls_fields = self._fields(kind)
        secret_names = tuple(f.name for f in cls_fields if f.secret)
        sealed = self._sealed_names(secret)
        return SourceRecord(
            id=sid,
            name=name,
            kind=kind,
            store=store,
            config=dict(_loads(config) or {}),
            secrets_set=tuple(n for n in secret_names if n in sealed) or tuple(sorted(sealed)),
            include=tuple(_loads(inc) or ()),
            exclude=tuple(_loads(exc) or ()),
            max_bytes=max_bytes,
            every_minutes=every,
            paused=bool(paused),
            readers=tuple(_loads(readers)) if readers is not None else None,
            next_run=nxt,
            marker=marker,
            created_by=by,
            created=c,
            updated=u,
        )

    def _sealed_names(self, token: str | None) -> set[str]:
        if not token:
            return set()
        try:
            return set(self.vault.open(token))
        except KnowledgeError:  # the key changed: the names are not known either
            return {"(sealed with another key)"}

    @staticmethod
    def _fields(kind: str) -> tuple[Field, ...]:
        try:
            return source_class(kind).fields
        except KnowledgeError:
            return ()

    def get(self, name: str) -> SourceRecord:
        """The source ``name`` (or id). Raises ``InvalidArgument`` (in words) when there is none."""
        with self.catalog.cursor() as cur:
            row = cur.execute(f"SELECT {self._COLUMNS} FROM sources WHERE name = ? OR id = ?", [name, name]).fetchone()
        if row is None:
            raise InvalidArgument(f"There is no source {name!r}.", param="source")
        return self._record(row)

    def find(self, name: str) -> SourceRecord | None:
        """The source ``name`` (or id), or ``None``."""
        try:
            return self.get(name)
        except InvalidArgument:
            return None

    def records(self, store: str | None = None) -> list[SourceRecord]:
        """Every source (of ``store``), by name."""
        sql, args = f"SELECT {self._COLUMNS} FROM sources", []
        if store is not None:
            sql, args = sql + " WHERE store = ?", [store]
        with self.catalog.cursor() as cur:
            rows = cur.execute(sql + " ORDER BY name", args).fetchall()
        return [self._record(r) for r in rows]

    def _split(self, kind: str, config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """``config`` checked against kind's fields: ``(plain settings, secrets)``.

        Raises:
            InvalidArgument: an unknown setting, a bad value, a required one missing."""
        fields = {f.name: f for f in source_class(kind).fields}
        unknown = sorted(set(config) - set(fields))
        if unknown:
            raise InvalidArgument(
                f"A {kind} source has no setting {', '.join(map(repr, unknown))}; its settings are"
                f" {', '.join(fields) or 'none'}.",
                param="config",
            )
        plain: dict[str, Any] = {}
        secret: dict[str, str] = {}
        for name, f in fields.items():
            value = field_value(f, config.get(name))
            if value is None:
                continue
            if f.secret:
                secret[name] = str(value)
            else:
                plain[name] = value
        return plain, secret

    def _try_settings(self, kind: str, plain: Mapping[str, Any], secret: Mapping[str, str]) -> None:
        """Make the plugin over these settings, reaching nothing: it refuses what cannot work (a user
        name and password inside a URL, a bad port) before anything is kept or audited. Its words have
        the secrets taken out.

        Raises:
            InvalidArgument: the plugin refused the settings."""
        cls = source_class(kind)
        config = {f.name: f.default for f in cls.fields if f.default is not None}
        config.update(plain)
        config.update(secret)
        try:
            src = cls(config, SourceContext(settings=self.settings, timeout=float(self.settings.sources.timeout_seconds)))
        except KnowledgeError as exc:
            raise InvalidArgument(redact(str(exc), secret.values()), param="config") from None
        except Exception as exc:  # a plugin's own check that is not ours: its words, without secrets
            raise InvalidArgument(redact(f"These settings cannot work: {exc}", secret.values()), param="config") from None
        src.close()
        for f in cls.fields:  # a credential written into a plain setting (a URL's user:password@)
            value = plain.get(f.name)
            if isinstance(value, str) and _URL_CREDENTIALS.search(value):
                raise InvalidArgument(
                    f"{f.label} must not hold a user name and password (user:password@): give them in the"
                    " source's user name and password settings, which are kept encrypted.",
                    param=f.name,
                )

    def _check_required(self, kind: str, plain: Mapping[str, Any], secret: Mapping[str, str]) -> None:
        missing = [f.label for f in source_class(kind).fields if f.required and f.name not in plain and f.name not in secret]
        if missing:
            raise InvalidArgument(f"A {kind} source needs: {', '.join(missing)}.", param="config")

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
        readers: Iterable[str] | None = None,
        paused: bool = False,
        created_by: str | None = None,
    ) -> SourceRecord:
        """Keep a new source. ``config`` holds every setting by field name, secrets included (they are
        sealed; :class:`~knowledge.sources.secrets.Vault`). ``readers`` are principals, already
        checked by the caller. With ``every_minutes`` the first run is due now.

        Raises:
            InvalidArgument: a name taken or blank, an unknown kind (``BackendUnavailable``: one that
                fails to load), a bad setting or schedule. ConfigError: no key for the secrets.
        """
        name = (name or "").strip()
        if not name or len(name) > 100 or any(ord(c) < 32 for c in name):
            raise InvalidArgument("A source needs a name of 1-100 characters.", param="name")
        if self.find(name) is not None:
            raise InvalidArgument(f"There is a source named {name!r} already.", param="name")
        if "/" in name:
            raise InvalidArgument("A source's name cannot hold a '/' (it is part of the API's addresses).", param="name")
        source_class(kind)  # an unknown kind says so
        plain, secret = self._split(kind, config)
        self._check_required(kind, plain, secret)
        self._try_settings(kind, plain, secret)
        inc, exc, limit, every = self._options(include, exclude, max_bytes, every_minutes)
        sealed = self.vault.seal(secret)
        sid = uuid.uuid4().hex
        with self.catalog.cursor() as cur:
            cur.execute(
                f"INSERT INTO sources ({self._COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
                + (" now()" if every and not paused else " NULL")
                + ", NULL, ?, now(), now())",
                [
                    sid,
                    name,
                    kind,
                    store,
                    json.dumps(plain),
                    sealed,
                    json.dumps(list(inc)),
                    json.dumps(list(exc)),
                    limit,
                    every,
                    bool(paused),
                    json.dumps(list(readers)) if readers is not None else None,
                    created_by,
                ],
            )
        return self.get(sid)

    @staticmethod
    def _options(
        include: Iterable[str], exclude: Iterable[str], max_bytes: int | None, every_minutes: int | None
    ) -> tuple[tuple[str, ...], tuple[str, ...], int | None, int | None]:
        inc = tuple(p.strip() for p in include if p and p.strip())
        exc = tuple(p.strip() for p in exclude if p and p.strip())
        if max_bytes is not None and int(max_bytes) < 1:
            raise InvalidArgument("The size limit must be at least 1 byte.", param="max_bytes")
        if every_minutes is not None and not 1 <= int(every_minutes) <= 525_600:
            raise InvalidArgument("A schedule runs every 1 to 525,600 minutes (a year).", param="every_minutes")
        return inc, exc, int(max_bytes) if max_bytes else None, int(every_minutes) if every_minutes else None

    _UNSET: Any = object()

    def update(
        self,
        name: str,
        *,
        config: Mapping[str, Any] | None = None,
        include: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        max_bytes: Any = _UNSET,
        every_minutes: Any = _UNSET,
        readers: Any = _UNSET,
    ) -> SourceRecord:
        """Change a source's settings: ``config`` merges (a secret left out or blank is kept: the
        page never shows it to be typed again); the others replace. Raises like :meth:`add`."""
        rec = self.get(name)
        plain, secret = dict(rec.config), self.vault.open(self._secret_token(rec.id))
        if config is not None:
            new_plain, new_secret = self._split(rec.kind, {**plain, **dict(config)})
            plain = new_plain
            secret = {**secret, **new_secret}
        self._check_required(rec.kind, plain, secret)
        self._try_settings(rec.kind, plain, secret)
        inc, exc, limit, every = self._options(
            rec.include if include is None else include,
            rec.exclude if exclude is None else exclude,
            rec.max_bytes if max_bytes is self._UNSET else max_bytes,
            rec.every_minutes if every_minutes is self._UNSET else every_minutes,
        )
        new_readers = rec.readers if readers is self._UNSET else readers
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE sources SET config = ?, secret = ?, include_globs = ?, exclude_globs = ?, max_bytes = ?,"
                " every_minutes = ?, readers = ?, marker = NULL, updated = now(),"
                " next_run = CASE WHEN ? IS NULL OR paused THEN NULL WHEN next_run IS NULL THEN now() ELSE next_run END"
                " WHERE id = ?",
                [
                    json.dumps(plain),
                    self.vault.seal(secret),
                    json.dumps(list(inc)),
                    json.dumps(list(exc)),
                    limit,
                    every,
                    json.dumps(list(new_readers)) if new_readers is not None else None,
                    every,
                    rec.id,
                ],
            )
        return self.get(rec.id)

    def _secret_token(self, source_id: str) -> str | None:
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT secret FROM sources WHERE id = ?", [source_id]).fetchone()
        return row[0] if row else None

    def pause(self, name: str, paused: bool = True) -> SourceRecord:
        """Pause (no scheduled run is queued; a run by hand still may be) or resume (a scheduled
        source is due at once)."""
        rec = self.get(name)
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE sources SET paused = ?, updated = now(),"
                " next_run = CASE WHEN ? OR every_minutes IS NULL THEN NULL ELSE now() END WHERE id = ?",
                [bool(paused), bool(paused), rec.id],
            )
        return self.get(rec.id)

    def remove(self, name: str, *, delete_files: bool = True) -> int:
        """Forget a source and its runs. With ``delete_files`` the files it put in the store go too
        (each name of its origin; a content another name keeps stays); without, they stay as files
        added by hand. Returns how many files were taken out. Raises ``InvalidArgument``."""
        rec = self.get(name)
        origin = origin_of(rec.id)
        removed = 0
        if self.stores.exists(rec.store):
            for n in self.catalog.names(rec.store, folder=origin):
                if delete_files:
                    try:
                        self.indexer.delete_name(rec.store, n.file_id, n.name, folder=origin)
                        removed += 1
                    except KnowledgeError as exc:
                        log.warning("removing %s of source %s: %s", n.name, rec.name, exc)
                else:
                    self.catalog.add_name(rec.store, n.file_id, n.name, "", n.size, n.mtime_ns)
                    self.catalog.remove_name(rec.store, n.file_id, n.name, origin)
        with self.catalog.cursor() as cur:
            for _run_id, batch_id in cur.execute(
                "SELECT id, batch_id FROM source_runs WHERE source_id = ? AND status IN ('queued', 'running')", [rec.id]
            ).fetchall():
                if batch_id:
                    queue.cancel(self.catalog, batch_id)
            cur.execute(
                "DELETE FROM source_run_items WHERE run_id IN (SELECT id FROM source_runs WHERE source_id = ?)", [rec.id]
            )
            cur.execute("DELETE FROM source_runs WHERE source_id = ?", [rec.id])
            cur.execute("DELETE FROM source_entries WHERE source_id = ?", [rec.id])
            cur.execute("DELETE FROM sources WHERE id = ?", [rec.id])
        cache = self.settings.data_root / "sources" / rec.id
        shutil.rmtree(cache, ignore_errors=True)  # a Git mirror, ...
        return removed

    # -- a connection --------------------------------------------------------------------------------
    def secrets_of(self, rec: SourceRecord) -> dict[str, str]:
        """The secret values of ``rec`` (to redact them; never to show). Raises ``ConfigError``."""
        return self.vault.open(self._secret_token(rec.id))

    def context(self, rec: SourceRecord) -> SourceContext:
        """What the source's plugin is handed besides its config."""
        return SourceContext(
            settings=self.settings,
            principal_for_sid=self.principal_for_sid or sid_mapper(self.settings),  # a run's own answers
            cache_dir=self.settings.data_root / "sources" / rec.id,
            timeout=float(self.settings.sources.timeout_seconds),
        )

    def open(self, rec: SourceRecord) -> Source:
        """The plugin of ``rec``, made with its settings, defaults and secrets.

        Raises:
            BackendUnavailable: the kind does not load. ConfigError: the secrets cannot be opened.
            InvalidArgument: settings the plugin refuses."""
        cls = source_class(rec.kind)
        secret = self.secrets_of(rec)
        config = {f.name: f.default for f in cls.fields if f.default is not None}
        config.update(rec.config)
        config.update(secret)
        return cls(config, self.context(rec))

    def check(self, name: str) -> str:
        """Connect to the source and look (reading no file): its words, e.g. ``"reached; ..."``.

        Raises:
            SourceError (and its kinds), in words with no secret in them."""
        rec = self.get(name)
        secrets = self.secrets_of(rec).values()
        try:
            with self.open(rec) as src:
                return redact(src.check(), secrets)
        except KnowledgeError as exc:
            raise type(exc)(redact(str(exc), secrets)) from None
        except Exception as exc:
            raise SourceError(redact(unexpected_problem(exc, "reaching the source", "the program"), secrets)) from None

    # -- planning ------------------------------------------------------------------------------------
    def _entries_state(self, source_id: str) -> dict[str, tuple[str, str | None, str | None]]:
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT path, version, content_key, sha256 FROM source_entries WHERE source_id = ?", [source_id]
            ).fetchall()
        return {p: (v, k, s) for p, v, k, s in rows}

    def _names(self, rec: SourceRecord) -> dict[str, str]:
        """path -> file id, of the names this source gave (one content per path)."""
        if not self.stores.exists(rec.store):
            return {}
        return {n.name: n.file_id for n in self.catalog.names(rec.store, folder=origin_of(rec.id))}

    def _readers_of(self, rec: SourceRecord, entry: Entry) -> tuple[str, ...] | None:
        return entry.readers if entry.readers is not None else rec.readers

    def plan(self, name: str) -> SourcePlan:
        """List the source and compare it with the store (nothing changes; no file is read).

        Raises:
            SourceError (and its kinds), in words without secrets."""
        rec = self.get(name)
        secrets = self.secrets_of(rec).values()
        try:
            with self.open(rec) as src:
                return self._plan(rec, src, use_marker=False)
        except KnowledgeError as exc:
            raise type(exc)(redact(str(exc), secrets)) from None

    def _plan(self, rec: SourceRecord, src: Source, *, use_marker: bool = True) -> SourcePlan:
        marker = src.marker()
        names = self._names(rec)
        state = self._entries_state(rec.id)
        if use_marker and marker is not None and marker == rec.marker and set(names) == set(state):
            same = tuple(PlanItem("unchanged", p, file_id=f) for p, f in sorted(names.items()))
            return SourcePlan(rec.name, rec.store, same, 0, {}, True, marker)
        limit = rec.max_bytes or int(self.settings.sources.max_file_bytes)
        listing: dict[str, Entry] = {}
        skipped: dict[str, int] = {}
        listed = 0

        def skip(why: str) -> None:
            skipped[why] = skipped.get(why, 0) + 1

        for entry in src.entries():
            listed += 1
            try:
                path = clean_path(entry.path)
            except KnowledgeError:
                skip("a path that cannot be a file name")
                continue
            if not path:
                continue
            if rec.include and not _matches(path, rec.include):
                skip("not matching the include globs")
                continue
            if rec.exclude and _matches(path, rec.exclude):
                skip("matching an exclude glob")
                continue
            if entry.size is not None and entry.size > limit:
                skip(f"larger than the size limit ({_mb(limit)})")
                continue
            if path in listing:
                skip("listed twice")
                continue
            listing[path] = entry
        items: list[PlanItem] = []
        fresh: list[tuple[str, Entry]] = []
        for path, entry in sorted(listing.items()):
            readers = self._readers_of(rec, entry)
            file_id = names.get(path)
            known = state.get(path)
            if file_id is not None and known is not None and known[0] == entry.version:
                items.append(PlanItem("unchanged", path, entry, file_id, readers=readers))
            elif file_id is not None:
                items.append(PlanItem("changed", path, entry, file_id, readers=readers))
            else:
                fresh.append((path, entry))
        if not listing and names and not skipped:
            raise SourceError(
                f"The source listed no file at all, while {len(names):,} file{'' if len(names) == 1 else 's'} in the"
                " store came from it: nothing was deleted. A wrong folder, prefix or branch, or an account that"
                " may not see the files? Check its settings; to empty the store, remove the source (its files go"
                " with it)."
            )
        gone = {p: f for p, f in names.items() if p not in listing}
        by_key: dict[str, list[str]] = {}
        for p in sorted(gone):
            key = state.get(p, (None, None, None))[1]
            if key:
                by_key.setdefault(key, []).append(p)
        for path, entry in fresh:
            olds = by_key.get(entry.content_key or "")
            readers = self._readers_of(rec, entry)
            if olds:
                old = olds.pop(0)
                items.append(PlanItem("renamed", path, entry, gone.pop(old), old_path=old, readers=readers))
            else:
                items.append(PlanItem("added", path, entry, readers=readers))
        items += [PlanItem("deleted", p, None, f) for p, f in sorted(gone.items())]
        items.sort(key=lambda i: (ACTIONS.index(i.action), i.path))
        return SourcePlan(rec.name, rec.store, tuple(items), listed, skipped, False, marker)

    # -- runs ----------------------------------------------------------------------------------------
    _RUN_COLUMNS = "id, source_id, batch_id, cause, status, counts, reason, worker, queued, started, finished"

    @staticmethod
    def _run(row: Any) -> RunRecord:
        rid, sid, batch, cause, status, counts, reason, worker, queued_at, started, finished = row
        return RunRecord(
            rid, sid, batch, cause, status, dict(_loads(counts) or {}), reason, worker, queued_at, started, finished
        )

    def runs(self, name: str, limit: int = 20) -> list[RunRecord]:
        """The runs of source ``name``, newest first (a run whose job ended without it, a worker
        killed on its last attempt, says so)."""
        rec = self.get(name)
        self._reconcile(rec.id)
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                f"SELECT {self._RUN_COLUMNS} FROM source_runs WHERE source_id = ? ORDER BY queued DESC LIMIT ?",
                [rec.id, int(limit)],
            ).fetchall()
        return [self._run(r) for r in rows]

    def get_run(self, run_id: str) -> RunRecord | None:
        with self.catalog.cursor() as cur:
            row = cur.execute(f"SELECT {self._RUN_COLUMNS} FROM source_runs WHERE id = ?", [run_id]).fetchone()
        return self._run(row) if row else None

    def run_items(self, run_id: str) -> list[RunItem]:
        """The changes run ``run_id`` made or tried, in order."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT seq, action, path, old_path, ok, message, chunks FROM source_run_items"
                " WHERE run_id = ? ORDER BY seq",
                [run_id],
            ).fetchall()
        return [RunItem(s, a, p, o, bool(ok), m, c) for s, a, p, o, ok, m, c in rows]

    def _reconcile(self, source_id: str) -> None:
        """Runs left ``queued``/``running`` whose job is over (its worker killed on the last attempt,
        its batch cancelled) end with the job's words."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT r.id, j.status, j.reason FROM source_runs r JOIN ingest_jobs j ON j.batch_id = r.batch_id"
                " WHERE r.source_id = ? AND r.status IN ('queued', 'running') AND j.status IN (?, ?, ?)",
                [source_id, queue.FAILED, queue.CANCELLED, queue.INTERRUPTED],
            ).fetchall()
            for run_id, status, reason in rows:
                cur.execute(
                    "UPDATE source_runs SET status = ?, reason = ?, finished = now()"
                    " WHERE id = ? AND status IN ('queued', 'running')",
                    ["cancelled" if status == queue.CANCELLED else "failed", reason or status, run_id],
                )
            # a run by hand (no job) whose process on this machine is gone
            here = host_name(self.settings)
            for run_id, worker in cur.execute(
                "SELECT id, worker FROM source_runs WHERE source_id = ? AND batch_id IS NULL"
                " AND status IN ('queued', 'running') AND worker IS NOT NULL",
                [source_id],
            ).fetchall():
                parts = str(worker).split(":")
                if len(parts) >= 3 and parts[0] == here and parts[1].isdigit() and not pid_alive(int(parts[1])):
                    cur.execute(
                        "UPDATE source_runs SET status = 'failed', finished = now(),"
                        " reason = 'interrupted: the process running it stopped' WHERE id = ?",
                        [run_id],
                    )

    def unfinished_run(self, name: str) -> RunRecord | None:
        """The run of ``name`` queued or running, if any."""
        rec = self.get(name)
        self._reconcile(rec.id)
        with self.catalog.cursor() as cur:
            row = cur.execute(
                f"SELECT {self._RUN_COLUMNS} FROM source_runs WHERE source_id = ? AND status IN ('queued', 'running')"
                " ORDER BY queued DESC LIMIT 1",
                [rec.id],
            ).fetchone()
        return self._run(row) if row else None

    def enqueue_run(self, name: str, *, cause: str = "hand", created_by: str | None = None) -> RunRecord:
        """Queue a run of ``name`` for the workers (a job row any worker claims); the run queued or
        running already when there is one. Returns the run."""
        rec = self.get(name)
        running = self.unfinished_run(rec.id)
        if running is not None:
            return running
        run_id = uuid.uuid4().hex
        with self.catalog.cursor() as cur:
            cur.execute(
                f"INSERT INTO source_runs ({self._RUN_COLUMNS})"
                " VALUES (?, ?, NULL, ?, 'queued', NULL, NULL, NULL, now(), NULL, NULL)",
                [run_id, rec.id, cause],
            )
        batch = queue.enqueue(
            self.catalog,
            rec.store,
            [queue.JobSource(name=f"source {rec.name}", kind=JOB_KIND, source=run_id)],
            notes={"source": rec.name, "sentences": [f"A run of the source {rec.name} ({rec.kind})."]},
            created_by=created_by,
        )
        with self.catalog.cursor() as cur:
            cur.execute("UPDATE source_runs SET batch_id = ? WHERE id = ?", [batch, run_id])
        run = self.get_run(run_id)
        assert run is not None
        return run

    def enqueue_due(self) -> list[RunRecord]:
        """Queue a run of each source whose schedule is due (not paused), moving its next run on by
        its interval first -- one statement per source, so of many processes looking at once only
        one queues it. Returns the runs queued."""
        with self.catalog.cursor() as cur:
            due = cur.execute(
                "SELECT id FROM sources WHERE NOT paused AND every_minutes IS NOT NULL AND next_run IS NOT NULL"
                " AND next_run <= now() ORDER BY next_run"
            ).fetchall()
        out = []
        for (sid,) in due:
            with self.catalog.cursor() as cur:
                won = cur.execute(
                    "UPDATE sources SET next_run = now() + every_minutes * INTERVAL '1 minute'"
                    " WHERE id = ? AND NOT paused AND next_run <= now() RETURNING id",
                    [sid],
                ).fetchone()
            if won:
                try:
                    run = self.enqueue_run(sid, cause="schedule")
                except KnowledgeError as exc:  # removed meanwhile
                    log.info("scheduled run of source %s: %s", sid, exc)
                    continue
                out.append(run)
                if self.on_scheduled is not None:
                    try:
                        self.on_scheduled(run)
                    except Exception:  # the run is queued all the same
                        log.warning("could not audit the scheduled run %s", run.id, exc_info=True)
        return out

    def start_scheduler(self, kick: Callable[[], None] | None = None) -> None:
        """Look for due sources every ``sources.check_seconds`` in a daemon thread of this process
        (the app, ``serve``, ``worker``), calling ``kick()`` (this process's worker) after queueing
        any, and while any job is queued or running (one queued by another process, e.g. the CLI's
        ``source run``, while this process's worker idled). Once per :class:`Sources`; :meth:`stop_scheduler` ends it."""
        if self._scheduler is not None and self._scheduler.is_alive():
            return
        every = float(self.settings.sources.check_seconds)

        def loop() -> None:
            while not self._stop.wait(0 if loop.first else every):  # type: ignore[attr-defined]
                loop.first = False  # type: ignore[attr-defined]
                try:
                    due = self.enqueue_due()
                    # and any job queued elsewhere (a CLI's `source run`) while this process's worker idles
                    if kick is not None and (due or queue.unfinished(self.catalog)):
                        kick()
                except Exception as exc:  # the catalog is away: look again next time
                    log.debug("the source scheduler could not look: %s", exc)

        loop.first = True  # type: ignore[attr-defined]
        self._stop.clear()
        self._scheduler = threading.Thread(target=loop, name="source-scheduler", daemon=True)
        self._scheduler.start()

    def stop_scheduler(self) -> None:
        self._stop.set()

    # -- a run ---------------------------------------------------------------------------------------
    def run(
        self,
        name: str,
        *,
        cancel: threading.Event | None = None,
        progress: Callable[[str, float], None] | None = None,
    ) -> RunReport:
        """Run source ``name`` now, in this thread (a run by hand from the CLI with ``--here``, the
        tests): recorded like a worker's run. Never raises for the source: the report says.

        Raises:
            InvalidArgument: no such source, or a run of it is queued or running (one at a time)."""
        rec = self.get(name)
        if self.unfinished_run(rec.id) is not None:
            raise InvalidArgument(f"A run of {rec.name} is queued or running already; wait for it to end.")
        run_id = uuid.uuid4().hex
        me = new_worker_id("run", host_name(self.settings))  # host:pid: a later look knows when this process is gone
        with self.catalog.cursor() as cur:
            cur.execute(
                f"INSERT INTO source_runs ({self._RUN_COLUMNS})"
                " VALUES (?, ?, NULL, 'hand', 'queued', NULL, NULL, ?, now(), NULL, NULL)",
                [run_id, rec.id, me],
            )
        return self.execute(run_id, cancel=cancel, progress=progress, worker=me)

    def run_job(self, job: queue.JobRow, progress: Callable[[str, float], None], cancel: threading.Event) -> IngestResult:
        """A worker's handler of a job of kind :data:`JOB_KIND` (``job.source``: the run's id): the
        run carried out, its outcome as the job's result. Raises only what the infrastructure
        raises (the catalog away: the worker queues the job again)."""
        run = self.get_run(job.source)
        if run is None:
            return IngestResult(job.name, Outcome.FAILED, f"{job.name}: the source was removed.", error="SourceRemoved")
        report = self.execute(run.id, cancel=cancel, progress=progress, worker=job.worker)
        outcome = {"done": Outcome.INDEXED, "cancelled": Outcome.CANCELLED}.get(report.run.status, Outcome.FAILED)
        return IngestResult(
            job.name, outcome, f"{job.name}: {report.summary()}", chunks=sum(i.chunks or 0 for i in report.items)
        )

    def execute(
        self,
        run_id: str,
        *,
        cancel: threading.Event | None = None,
        progress: Callable[[str, float], None] | None = None,
        worker: str | None = None,
    ) -> RunReport:
        """Carry out run ``run_id`` (queued by :meth:`enqueue_run` or :meth:`run`): list, plan,
        apply, record. A failure of the source (down, refused, gone) ends the run ``failed`` with its
        reason in words; a file that fails is recorded and the rest goes on. Raises only errors of
        the catalog (the infrastructure)."""
        run = self.get_run(run_id)
        if run is None:
            raise InvalidArgument(f"There is no run {run_id!r}.")
        rec = self.get(run.source_id)
        cancel = cancel or threading.Event()
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE source_runs SET status = 'running', started = now(), worker = ?, reason = NULL WHERE id = ?",
                [worker, run_id],
            )
            seq0 = cur.execute(
                "SELECT coalesce(max(seq), -1) + 1 FROM source_run_items WHERE run_id = ?", [run_id]
            ).fetchone()[0]
        self._release_interrupted(rec)
        items: list[RunItem] = []
        plan: SourcePlan | None = None
        reason: str | None = None
        secrets: list[str] = []
        status = "done"
        try:
            secrets = list(self.secrets_of(rec).values())
            if progress:
                progress("listing the source", 0.0)
            with self.open(rec) as src:
                plan = self._plan(rec, src)
                self._apply(rec, src, plan, run_id, int(seq0), items, secrets, cancel, progress)
            if cancel.is_set():
                status, reason = "cancelled", "the run was stopped before it finished"
        except KnowledgeError as exc:
            status, reason = "failed", redact(str(exc), secrets) or type(exc).__name__
            log.warning("source %s: %s", rec.name, reason)
        except Exception as exc:
            from knowledge.service.transient import classify  # noqa: PLC0415 - only here

            if classify(exc) is not None:  # the catalog or a store's backend: the worker waits it out
                raise
            status, reason = "failed", redact(unexpected_problem(exc, "during the run", "the program"), secrets)
            # the traceback only at debug: a library's exception may quote what it was given
            log.error(
                "source %s: %s: %s", rec.name, reason, redact(repr(exc), secrets), exc_info=log.isEnabledFor(logging.DEBUG)
            )
        counts = self._counts(plan, items)
        if status == "done" and counts.get("failed"):
            reason = f"{counts['failed']} file{'' if counts['failed'] == 1 else 's'} failed (each says why)"
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE source_runs SET status = ?, counts = ?, reason = ?, finished = now() WHERE id = ?",
                [status, json.dumps(counts), reason, run_id],
            )
            if status == "done" and not counts.get("failed") and plan is not None:
                cur.execute("UPDATE sources SET marker = ? WHERE id = ?", [plan.marker, rec.id])
        self._prune(rec.id)
        final = self.get_run(run_id)
        assert final is not None
        return RunReport(final, plan, items)

    def _release_interrupted(self, rec: SourceRecord) -> None:
        """Files of this source's names left being added (``processing``/``pending``) by an earlier
        attempt whose worker died: failed, so that this attempt adds them again instead of waiting for
        them. Only one run of a source is under way at a time (its job's lease; :meth:`run` refuses
        while one is queued or running), so none of them is still being added."""
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE store_files SET status = 'failed', error = 'Interrupted', updated = now(),"
                " reason = 'interrupted: the run adding it stopped; the next run adds it again'"
                " WHERE store = ? AND status IN ('processing', 'pending') AND file_id IN"
                " (SELECT file_id FROM store_file_names WHERE store = ? AND folder = ?)",
                [rec.store, rec.store, origin_of(rec.id)],
            )

    @staticmethod
    def _counts(plan: SourcePlan | None, items: list[RunItem]) -> dict[str, int]:
        counts = dict.fromkeys(ACTIONS, 0)
        if plan is not None:
            counts["unchanged"] = plan.counts()["unchanged"]
        for i in items:
            if i.ok:
                counts[i.action] = counts.get(i.action, 0) + 1
        counts["failed"] = sum(1 for i in items if not i.ok)
        if plan is not None:
            counts["skipped"] = sum(plan.skipped.values())
        return counts

    def _prune(self, source_id: str) -> None:
        with self.catalog.cursor() as cur:
            old = cur.execute(
                "SELECT id FROM source_runs WHERE source_id = ? AND status NOT IN ('queued', 'running')"
                " ORDER BY queued DESC LIMIT 1000000 OFFSET ?",
                [source_id, RUNS_KEPT],
            ).fetchall()
            for (rid,) in old:
                cur.execute("DELETE FROM source_run_items WHERE run_id = ?", [rid])
                cur.execute("DELETE FROM source_runs WHERE id = ?", [rid])

    def _record_item(self, run_id: str, item: RunItem) -> None:
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO source_run_items (run_id, seq, action, path, old_path, ok, message, chunks)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, item.seq, item.action, item.path, item.old_path, item.ok, item.message, item.chunks],
            )

    def _remember(self, source_id: str, path: str, entry: Entry, sha256: str | None) -> None:
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO source_entries (source_id, path, version, content_key, sha256) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (source_id, path) DO UPDATE SET version = excluded.version,"
                " content_key = excluded.content_key, sha256 = excluded.sha256",
                [source_id, path, entry.version, entry.content_key, sha256],
            )

    def _forget_entry(self, source_id: str, path: str) -> None:
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM source_entries WHERE source_id = ? AND path = ?", [source_id, path])

    def _attributes(self, rec: SourceRecord, entry: Entry) -> dict[str, Any]:
        attrs: dict[str, Any] = {"source": rec.name}
        if entry.url:
            attrs["source_url"] = entry.url[:512]
        for k, v in list(entry.attributes.items())[:12]:
            if isinstance(v, str | int | float | bool):
                attrs[str(k)[:64]] = v[:512] if isinstance(v, str) else v
        return attrs

    def _cite(self, rec: SourceRecord, file_id: str, entry: Entry) -> None:
        """Give a renamed content the attributes of its new path (``source_url``, the kind's own, such
        as a Git commit), keeping the others: a payload rewrite, nothing embedded."""
        try:
            have = self.indexer.file_attributes(rec.store, file_id)
            new = {**have, **self._attributes(rec, entry)}
            if new != have:
                self.indexer.set_file_attributes(rec.store, file_id, new)
        except KnowledgeError as exc:  # a content that failed (no chunks): nothing to cite
            log.debug("source %s: the attributes of %s stay: %s", rec.name, entry.path, exc)

    def _apply(
        self,
        rec: SourceRecord,
        src: Source,
        plan: SourcePlan,
        run_id: str,
        seq0: int,
        items: list[RunItem],
        secrets: list[str],
        cancel: threading.Event,
        progress: Callable[[str, float], None] | None,
    ) -> None:
        origin = origin_of(rec.id)
        state = self._entries_state(rec.id)
        changes = [i for i in plan.items if i.action != "unchanged"]
        total = max(1, len(changes))
        deleted_ids = {i.file_id: i.path for i in plan.items if i.action == "deleted" and i.file_id}
        moved: set[str] = set()  # deleted paths whose content a new path took (a rename found by reading)
        tmp_dir = self.settings.data_root / "tmp"
        tmp_dir.mkdir(parents=True, exist_ok=True)

        def said(
            item: PlanItem,
            ok: bool,
            message: str,
            chunks: int | None = None,
            action: str | None = None,
            old: str | None = None,
        ) -> None:
            r = RunItem(
                seq0 + len(items),
                action or item.action,
                item.path,
                old or item.old_path,
                ok,
                redact(message, secrets),
                chunks,
            )
            items.append(r)
            self._record_item(run_id, r)

        for n, item in enumerate(changes):
            if cancel.is_set():
                break
            if progress:
                progress(f"syncing, {n} of {len(changes)} changes", n / total)
            if item.action == "deleted" and item.path in moved:
                continue
            try:
                if item.action in ("added", "changed"):
                    self._fetch_and_ingest(rec, src, item, origin, state, deleted_ids, moved, tmp_dir, cancel, said)
                elif item.action == "renamed":
                    assert item.file_id is not None and item.old_path is not None and item.entry is not None
                    self.indexer.rename(rec.store, item.file_id, item.old_path, item.path, folder=origin)
                    old = state.get(item.old_path)
                    self._forget_entry(rec.id, item.old_path)
                    self._remember(rec.id, item.path, item.entry, old[2] if old else None)
                    self._cite(rec, item.file_id, item.entry)
                    said(item, True, f"{item.path}: renamed from {item.old_path}; nothing read or embedded again.")
                elif item.action == "deleted":
                    ids = {x.file_id for x in self.catalog.names(rec.store, name=item.path, folder=origin)}
                    chunks = sum(self.indexer.delete_name(rec.store, fid, item.path, folder=origin) for fid in sorted(ids))
                    self._forget_entry(rec.id, item.path)
                    kept = [fid for fid in ids if self.catalog.names(rec.store, file_id=fid)]
                    said(
                        item,
                        True,
                        f"{item.path}: no longer listed by the source (gone, or left out by its settings);"
                        + (
                            " its name removed (its content stays under another name)."
                            if kept
                            else f" removed from the store ({chunks} chunk{'' if chunks == 1 else 's'})."
                        ),
                    )
            except EntryGone as exc:
                said(item, False, _about(item.path, str(exc)))
            except SourceError:
                raise  # the source itself failed: the run ends with its reason
            except KnowledgeError as exc:
                said(item, False, _about(item.path, str(exc)))
            except Exception as exc:
                from knowledge.service.transient import classify  # noqa: PLC0415

                if classify(exc) is not None:
                    raise
                log.error(
                    "source %s: %s: %s",
                    rec.name,
                    item.path,
                    redact(repr(exc), secrets),
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
                said(item, False, f"{item.path}: {unexpected_problem(exc)}.")
        if not cancel.is_set():
            self._apply_readers(rec, plan, said)

    def _fetch_and_ingest(
        self,
        rec: SourceRecord,
        src: Source,
        item: PlanItem,
        origin: str,
        state: dict[str, tuple[str, str | None, str | None]],
        deleted_ids: dict[str, str],
        moved: set[str],
        tmp_dir: Path,
        cancel: threading.Event,
        said: Callable[..., None],
    ) -> None:
        entry = item.entry
        assert entry is not None
        limit = rec.max_bytes or int(self.settings.sources.max_file_bytes)
        fd, tmp_name = tempfile.mkstemp(prefix="source-", dir=tmp_dir)
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as fh:
                sink = _Bounded(fh, limit)
                src.fetch(entry, sink)
            sha = sink.sha.hexdigest()
            known = state.get(item.path)
            if item.action == "changed" and known is not None and known[2] == sha and item.file_id is not None:
                rec_file = self.catalog.get_file(rec.store, item.file_id)
                if rec_file is not None and rec_file.sha256 == sha:
                    self._remember(rec.id, item.path, entry, sha)
                    said(
                        item,
                        True,
                        f"{item.path}: a new version at the source with the same bytes; nothing read again.",
                        action="unchanged",
                    )
                    return
            if self.quota is not None:
                self.quota(rec.store, tmp.stat().st_size, 1 if item.action == "added" else 0)
            result = self.indexer.ingest_file(
                rec.store,
                tmp,
                item.path,
                folder=origin,
                attributes=self._attributes(rec, entry),
                readers=item.readers,
                cancel=cancel,
                raise_transient=True,
            )
            if result.ok or result.outcome == Outcome.FAILED:
                # a file that failed for itself (unreadable, empty) is not read again until it changes;
                # the store keeps its record with the reason (Retry on the Files page reads it again)
                self._remember(rec.id, item.path, entry, sha)
            old = deleted_ids.get(result.file_id or "") if result.outcome == Outcome.DUPLICATE else None
            if old is not None and item.action == "added":  # the bytes of a path gone: a rename
                ids = {x.file_id for x in self.catalog.names(rec.store, name=old, folder=origin)}
                for fid in sorted(ids):
                    self.indexer.delete_name(rec.store, fid, old, folder=origin)
                self._forget_entry(rec.id, old)
                moved.add(old)
                if result.file_id:
                    self._cite(rec, result.file_id, entry)
                said(
                    item,
                    True,
                    f"{item.path}: renamed from {old} (the same bytes); nothing embedded again.",
                    0,
                    action="renamed",
                    old=old,
                )
                return
            message = result.message if result.message.startswith(item.path) else f"{item.path}: {result.message}"
            said(item, result.ok, message, result.chunks if result.outcome == Outcome.INDEXED else 0)
        except FileTooLarge as exc:
            said(item, False, f"{item.path}: not read: {exc}.")
        finally:
            tmp.unlink(missing_ok=True)

    def _apply_readers(self, rec: SourceRecord, plan: SourcePlan, said: Callable[..., None]) -> None:
        """Give each content of the source the readers its paths have at the source: the union of
        its paths' readers, or the store's sharing when one path has no readers of its own."""
        if plan.unchanged_marker or not self.stores.exists(rec.store):
            return
        names = self._names(rec)
        wanted: dict[str, set[str] | None] = {}
        where: dict[str, str] = {}
        for item in plan.items:
            if item.action == "deleted" or item.entry is None:
                continue
            file_id = names.get(item.path)
            if file_id is None:
                continue
            where.setdefault(file_id, item.path)
            if item.readers is None or wanted.get(file_id, set()) is None:
                wanted[file_id] = None
            else:
                cur = wanted.setdefault(file_id, set())
                assert cur is not None
                cur.update(item.readers)
        if not wanted:
            return
        have = {f.file_id: f.readers for f in self.catalog.files(rec.store) if f.file_id in wanted}
        for file_id, readers in wanted.items():
            new = tuple(sorted(readers)) if readers is not None else None
            old = have.get(file_id)
            if (tuple(sorted(old)) if old is not None else None) == new or file_id not in have:
                continue
            path = where[file_id]
            try:
                self.indexer.set_file_readers(rec.store, file_id, new)
            except KnowledgeError as exc:
                said(PlanItem("readers", path), False, f"{path}: its readers could not be set: {exc}")
                continue
            words = ", ".join(new) if new is not None else "everyone who may read the store"
            said(PlanItem("readers", path), True, f"{path}: readers now {words} (as at the source).")


def redacted(text: str, secrets: Iterable[str]) -> str:
    """:func:`knowledge.sources.secrets.redact` (re-exported for the surfaces)."""
    return redact(text, secrets)


__all__ = [
    "ACTIONS",
    "JOB_KIND",
    "MASK",
    "PlanItem",
    "RunItem",
    "RunRecord",
    "RunReport",
    "SourcePlan",
    "SourceRecord",
    "Sources",
    "clean_path",
    "origin_of",
]
