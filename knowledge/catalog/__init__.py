"""The catalog: what the workbench knows about its templates, stores, files and their names, synced
folders, and (in tables of their own) LLM configs, chats, traces and evaluation runs.

A part, like ``vectorstore/`` and ``filestore/``: it may import the ground (``knowledge.errors``,
``knowledge._names``) and nothing else of the project. The face is re-exported here:

* :class:`Catalog` (``db.py``) -- the DuckDB file, its lock and idle close;
* the records (``records.py``) -- :class:`StoreRecord`, :class:`FileRecord`, :class:`FileName`,
  :class:`SyncedFolder`, :class:`FileCounts`, :class:`FileStatus`;
* the schema (``schema.py`` over ``migrations/NNNN_<owner>.sql``) -- :data:`MIGRATIONS`.
"""

from knowledge.catalog.db import IDLE_CLOSE_SECONDS, Catalog, CatalogLocked
from knowledge.catalog.records import (
    DONE,
    FAILED,
    PENDING,
    PROCESSING,
    STATUSES,
    FileCounts,
    FileName,
    FileRecord,
    FileStatus,
    StoreRecord,
    SyncedFolder,
)
from knowledge.catalog.schema import MIGRATIONS, migrate, one_row

__all__ = [
    "DONE",
    "FAILED",
    "IDLE_CLOSE_SECONDS",
    "MIGRATIONS",
    "PENDING",
    "PROCESSING",
    "STATUSES",
    "Catalog",
    "CatalogLocked",
    "FileCounts",
    "FileName",
    "FileRecord",
    "FileStatus",
    "StoreRecord",
    "SyncedFolder",
    "migrate",
    "one_row",
]
