"""The catalog's records: a store, a file in a store and how its ingestion went, a file's names,
a synced folder, and the counts a page shows. Plain frozen dataclasses; no database here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class FileStatus(StrEnum):
    """Ingestion status of a file in a store (a ``str``: ``FileStatus.DONE == "done"``)."""

    PENDING = "pending"  # recorded, not started
    PROCESSING = "processing"  # being read, chunked and embedded
    DONE = "done"  # indexed: searchable
    FAILED = "failed"  # not indexed; ``reason`` says why, ``error`` names the error class


#: The statuses under their earlier names (equal to the plain strings, which older callers compare with).
PENDING, PROCESSING, DONE, FAILED = FileStatus.PENDING, FileStatus.PROCESSING, FileStatus.DONE, FileStatus.FAILED
STATUSES = tuple(FileStatus)


@dataclass(frozen=True, slots=True)
class StoreRecord:
    """A store: its template, and the backend, collection, model, dimension and distance it uses."""

    name: str
    template: str
    backend: str
    collection: str
    embedding_model: str
    dimension: int | None
    distance: str
    created: datetime
    updated: datetime


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """A store's own settings (migration 12): ``description`` in words (``""``: none), shown to the
    chat model beside the store's name; ``score_threshold`` the default score threshold of its
    searches in the playground and chat (``None``: the setting ``search.score_threshold``)."""

    store: str
    description: str = ""
    score_threshold: float | None = None
    updated: datetime | None = None


@dataclass(frozen=True, slots=True)
class FileRecord:
    """A file in a store and how its ingestion went: ``status`` a :class:`FileStatus`; ``reason`` in
    words and ``error`` the name of the error class (:mod:`knowledge.errors`, e.g. ``"PasswordRequired"``)
    when it failed -- ``error`` is ``None`` for a failure recorded before the catalog kept it; times in s."""

    store: str
    file_id: str
    file_name: str
    sha256: str | None
    size: int | None
    status: str
    reason: str | None
    chunks: int
    pages: int | None
    warnings: list[str] = field(default_factory=list)
    read_seconds: float | None = None
    embed_seconds: float | None = None
    total_seconds: float | None = None
    created: datetime | None = None
    updated: datetime | None = None
    error: str | None = None
    #: Who may read the file (migration 18): ``None`` = whoever may read the store; otherwise the
    #: principals (``"user:<username>"``, ``"group:<name>"``) besides the store's owners
    #: (:meth:`knowledge.people.policy.Policy.reads`). Set by :meth:`Catalog.set_readers` only:
    #: :meth:`Catalog.put_file` leaves it as it is.
    readers: tuple[str, ...] | None = None
    #: The content's other names in the store (same bytes given under another name or path; see
    #: :class:`FileName`), oldest first; ``file_name`` is the one its chunks carry. Filled by
    #: :meth:`Catalog.files`; not a column.
    aliases: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every name of the content: ``file_name`` first, then the aliases."""
        return (self.file_name, *[a for a in self.aliases if a != self.file_name])


@dataclass(frozen=True, slots=True)
class FileName:
    """One name of a stored content (a file record) in a store.

    A store's content is recorded once per distinct bytes (``store_files``, its chunks indexed once)
    and may carry several names: the same bytes uploaded as ``a.pdf`` and ``b.pdf``, or found at two
    paths of a synced folder. ``folder`` is ``""`` for a name given by hand (upload, ``ingest``, the
    API), else the synced folder (absolute path) the name is a relative path of; ``size`` (bytes) and
    ``mtime_ns`` (ns since the epoch) are the file's at the last sync, ``None`` for names by hand.
    """

    store: str
    file_id: str
    name: str
    folder: str = ""
    size: int | None = None
    mtime_ns: int | None = None
    created: datetime | None = None


@dataclass(frozen=True, slots=True)
class SyncedFolder:
    """A folder ``store`` is kept in sync with (:mod:`knowledge.sync`): its absolute path, the glob of
    the files taken, when it was last synced (UTC) and that sync's plan counts (``{"added": 3,
    "changed": 0, "renamed": 1, "deleted": 0, "unchanged": 40, "failed": 0}``; ``{}`` before the first)."""

    store: str
    folder: str
    glob: str
    last_sync: datetime | None
    last_plan: dict[str, Any]
    created: datetime


@dataclass(frozen=True, slots=True)
class FileQuery:
    """Which of a store's file records a page lists (:meth:`Catalog.file_page`): every condition
    given must hold. ``name``: a part of any of the file's names, in any case (``""``: any name);
    ``statuses``: any of these :class:`FileStatus` values (empty: any); ``types``: any of these name
    endings without the dot, in any case (``("pdf", "md")``; empty: any); ``since`` / ``until``:
    last updated at or after / before these times (UTC; ``None``: open)."""

    name: str = ""
    statuses: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, slots=True)
class FilePage:
    """One page of a store's file records (:meth:`Catalog.file_page`): ``records`` in name order,
    ``total`` the number of records the query matches on every page, ``offset`` where this page starts."""

    records: list[FileRecord]
    total: int
    offset: int = 0


@dataclass(frozen=True, slots=True)
class FileCounts:
    """A store's files by what they mean to a person: ``indexed`` (searchable), ``failed`` (kept for a
    retry), ``busy`` (pending or processing) and the ``chunks`` of the indexed files."""

    indexed: int = 0
    failed: int = 0
    busy: int = 0
    chunks: int = 0

    @classmethod
    def of(cls, records: Iterable[FileRecord]) -> FileCounts:
        """The counts of ``records`` (the file records of one store)."""
        indexed = failed = busy = chunks = 0
        for f in records:
            if f.status == DONE:
                indexed += 1
                chunks += f.chunks or 0
            elif f.status == FAILED:
                failed += 1
            elif f.status in (PENDING, PROCESSING):
                busy += 1
        return cls(indexed, failed, busy, chunks)


__all__ = [
    "DONE",
    "FAILED",
    "PENDING",
    "PROCESSING",
    "STATUSES",
    "FileCounts",
    "FileName",
    "FilePage",
    "FileQuery",
    "FileRecord",
    "FileStatus",
    "StoreRecord",
    "SyncedFolder",
]
