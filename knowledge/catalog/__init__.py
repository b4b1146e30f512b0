"""The catalog: what the workbench knows about its templates, stores, files and their names, synced
folders, and (in tables of their own) LLM configs, chats, traces and evaluation runs.

A part, like ``vectorstore/`` and ``filestore/``: it may import the ground (``knowledge.errors``,
``knowledge._names``, ``knowledge.telemetry``) and nothing else of the project. The face is re-exported here:

* :class:`Catalog` (``db.py``) -- over the DuckDB file (``duck.py``: turns, idle close) or PostgreSQL
  (``postgres.py``, ``catalog.url``), one SQL for both (``dialect.py``);
* the records (``records.py``) -- :class:`StoreRecord`, :class:`StoreSettings`, :class:`FileRecord`,
  :class:`FileName`, :class:`SyncedFolder`, :class:`FileCounts`, :class:`FileStatus`,
  :class:`FileQuery`, :class:`FilePage`;
* the schema (``schema.py`` over ``migrations/NNNN_<owner>.sql``) -- :data:`MIGRATIONS`.
"""

from knowledge.catalog.db import Catalog
from knowledge.catalog.dialect import DIALECTS, Dialect
from knowledge.catalog.duck import IDLE_CLOSE_SECONDS, CatalogLocked
from knowledge.catalog.records import (
    DONE,
    FAILED,
    PENDING,
    PROCESSING,
    STATUSES,
    FileCounts,
    FileName,
    FilePage,
    FileQuery,
    FileRecord,
    FileStatus,
    StoreRecord,
    StoreSettings,
    SyncedFolder,
)
from knowledge.catalog.schema import MIGRATIONS, CatalogCursor, migrate, one_row

__all__ = [
    "DIALECTS",
    "DONE",
    "FAILED",
    "IDLE_CLOSE_SECONDS",
    "MIGRATIONS",
    "PENDING",
    "PROCESSING",
    "STATUSES",
    "Catalog",
    "CatalogCursor",
    "CatalogLocked",
    "Dialect",
    "FileCounts",
    "FileName",
    "FilePage",
    "FileQuery",
    "FileRecord",
    "FileStatus",
    "StoreRecord",
    "StoreSettings",
    "SyncedFolder",
    "migrate",
    "one_row",
]
