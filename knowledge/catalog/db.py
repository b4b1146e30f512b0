"""The catalog: templates, stores, and the files in each store with their ingestion status, chunk
counts and timings -- in the DuckDB file ``<data_dir>/catalog.duckdb`` (the default, no set-up;
:mod:`knowledge.catalog.duck`: processes take turns with the file) or in a PostgreSQL database
(``catalog.url``; :mod:`knowledge.catalog.postgres`: shared by every process and host).

Both engines run the same SQL (DuckDB's, :mod:`knowledge.catalog.dialect`) and the same numbered
migrations (:mod:`knowledge.catalog.schema`); :attr:`Catalog.dialect` says which one is in use and
:meth:`Catalog.change_token` lets a process notice another's writes cheaply. The records are
:mod:`knowledge.catalog.records`.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import shutil
import time
import unicodedata
import weakref
from collections.abc import Collection, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from knowledge._names import check_name
from knowledge.catalog.dialect import NFC_FUNCTION, Dialect
from knowledge.catalog.duck import DuckEngine
from knowledge.catalog.records import (
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
from knowledge.catalog.schema import CatalogCursor, one_row
from knowledge.errors import KnowledgeError, StoreExists

if TYPE_CHECKING:
    from knowledge.config import Settings

#: Seconds :meth:`Catalog.checkpoint_copy` waits for a write still open ("Cannot CHECKPOINT: there
#: are other write transactions active") before it gives up.
CHECKPOINT_WAIT = 10.0
#: Every engine still referenced -- a DuckDB engine by its idle closer thread too, after its catalog
#: is gone -- shut down at exit (see :meth:`DuckEngine.shutdown <knowledge.catalog.duck.DuckEngine.shutdown>`).
_open_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


@atexit.register
def _close_engines() -> None:
    for engine in list(_open_engines):
        engine.shutdown()


class Engine(Protocol):
    """What a catalog engine offers (:class:`~knowledge.catalog.duck.DuckEngine`,
    :class:`~knowledge.catalog.postgres.PgEngine`)."""

    dialect: str

    def cursor(self) -> AbstractContextManager[CatalogCursor]: ...

    def hold(self) -> AbstractContextManager[None]: ...

    def change_token(self) -> tuple: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...

    def shutdown(self) -> None: ...


#: The columns of the ``stores`` and ``store_files`` tables, named in every query (a new column
#: never shifts a field), in the order of the records' fields.
_STORE_COLUMNS = tuple(f.name for f in fields(StoreRecord))
_FILE_COLUMNS = tuple(f.name for f in fields(FileRecord) if f.name != "aliases")
#: The columns :meth:`Catalog.put_file` writes (``readers`` only :meth:`Catalog.set_readers` does).
_FILE_WRITTEN = tuple(c for c in _FILE_COLUMNS if c != "readers")
#: The columns :meth:`Catalog.put_file` changes on a record that exists (all but the key and ``created``).
_FILE_UPDATED = tuple(c for c in _FILE_WRITTEN if c not in ("store", "file_id", "created"))
_FILE_UPDATES = ", ".join(f"{c} = excluded.{c}" for c in _FILE_UPDATED)
_NAME_COLUMNS = tuple(f.name for f in fields(FileName))
_STORE_SELECT = "SELECT " + ", ".join(_STORE_COLUMNS) + " FROM stores"
_FILE_SELECT = "SELECT " + ", ".join(_FILE_COLUMNS) + " FROM store_files"
_NAME_SELECT = "SELECT " + ", ".join(_NAME_COLUMNS) + " FROM store_file_names"


def _now() -> datetime:
    return datetime.now(UTC)


class Catalog:
    """The catalog in the DuckDB file ``path`` (created with the current schema on first use), or,
    with ``engine``, wherever that engine keeps it (:meth:`from_settings`, :meth:`from_url`).

    Args:
        path: the DuckDB file (ignored with ``engine``).
        lock_timeout: DuckDB: seconds to wait for another process's turn with the file.
        engine: the engine to use instead of the DuckDB file.

    Thread-safe. Every method may raise :class:`~knowledge.catalog.duck.CatalogLocked` (DuckDB: the
    file stayed held) or :class:`~knowledge.errors.BackendUnavailable` (PostgreSQL unreachable).
    """

    def __init__(self, path: Path | None = None, lock_timeout: float = 10.0, *, engine: Engine | None = None) -> None:
        if engine is None:
            if path is None:
                raise TypeError("Catalog needs a path or an engine")
            engine = DuckEngine(Path(path), lock_timeout)
        self._engine = engine
        #: The DuckDB file, or ``None`` for a catalog in PostgreSQL.
        self.path: Path | None = engine.path if isinstance(engine, DuckEngine) else None
        self.lock_timeout = lock_timeout
        _open_engines.add(engine)

    @classmethod
    def from_url(cls, url: str, *, connect_timeout: float = 5.0, pool_max_size: int = 8) -> Catalog:
        """The catalog in the PostgreSQL database at ``url`` (``postgresql://user:pw@host:port/db``);
        nothing is connected until first use."""
        from knowledge.catalog.postgres import PgEngine  # noqa: PLC0415 - psycopg only for a PostgreSQL catalog

        return cls(engine=PgEngine(url, connect_timeout=connect_timeout, pool_max_size=pool_max_size))

    @classmethod
    def from_settings(cls, settings: Settings) -> Catalog:
        """The catalog ``settings`` name: ``catalog.url`` (PostgreSQL) if set, else the DuckDB file
        :attr:`Settings.catalog_path <knowledge.config.Settings.catalog_path>`."""
        cs = settings.catalog
        if cs.url:
            return cls.from_url(cs.url, connect_timeout=cs.connect_timeout, pool_max_size=cs.pool_max_size)
        return cls(settings.catalog_path, lock_timeout=cs.lock_timeout)

    @property
    def dialect(self) -> Dialect:
        """``"duckdb"`` or ``"postgresql"``: the engine's SQL, for the few statements that differ
        (``FOR UPDATE SKIP LOCKED`` exists on PostgreSQL only)."""
        return "postgresql" if self._engine.dialect == "postgresql" else "duckdb"

    def describe(self) -> str:
        """Where the catalog is, for messages: the file's path or ``postgresql://host:port/db``."""
        return self._engine.describe()

    def change_token(self) -> tuple:
        """A cheap value that changes after another process (or this one) wrote to the catalog:
        DuckDB, the file's and its log's ``(inode, size, mtime_ns)``; PostgreSQL, the version of
        the ``catalog_changes`` row (migration 7), bumped by every committed write."""
        return self._engine.change_token()

    # -- connection ---------------------------------------------------------------------------
    @contextmanager
    def _cursor(self) -> Iterator[CatalogCursor]:
        with self._engine.cursor() as cur:
            yield cur

    def hold(self) -> AbstractContextManager[None]:
        """Keep the catalog to this process until the block ends (DuckDB: no turn given to another
        process; PostgreSQL: nothing to do). Keep it short."""
        return self._engine.hold()

    def close(self) -> None:
        """Close the connection now (it reopens on the next use)."""
        self._engine.close()

    def shutdown(self) -> None:
        """At exit: close everything, including background threads."""
        self._engine.shutdown()

    # -- schema ---------------------------------------------------------------------------------
    @contextmanager
    def cursor(self) -> Iterator[CatalogCursor]:
        """A cursor for the modules that keep their own tables here (LLM configs, chats, traces):
        the catalog's SQL (DuckDB's, ``?`` placeholders; :mod:`knowledge.catalog.dialect`) on either
        engine. DuckDB: under the process's lock -- keep the work short, other threads wait."""
        with self._cursor() as cur:
            yield cur

    def schema_version(self) -> int:
        with self._cursor() as cur:
            return one_row(cur.execute("SELECT max(version) FROM schema_version"))[0]

    # -- templates ------------------------------------------------------------------------------
    def put_template(self, name: str, spec: dict[str, Any]) -> None:
        """Insert or update a template's spec (a JSON-serialisable dict)."""
        check_name(name, "template name")
        now = _now()
        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO templates VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec,"
                " updated = excluded.updated",
                [name, json.dumps(spec), now, now],
            )

    def get_template(self, name: str) -> dict[str, Any] | None:
        with self._cursor() as cur:
            row = cur.execute("SELECT spec FROM templates WHERE name = ?", [name]).fetchone()
        return json.loads(row[0]) if row else None

    def list_templates(self) -> dict[str, dict[str, Any]]:
        with self._cursor() as cur:
            rows = cur.execute("SELECT name, spec FROM templates ORDER BY name").fetchall()
        return {name: json.loads(spec) for name, spec in rows}

    def delete_template(self, name: str) -> bool:
        with self._cursor() as cur:
            return bool(cur.execute("DELETE FROM templates WHERE name = ? RETURNING name", [name]).fetchall())

    # -- stores ---------------------------------------------------------------------------------
    def put_store(
        self,
        name: str,
        template: str,
        backend: str,
        embedding_model: str,
        dimension: int | None,
        distance: str,
        collection: str | None = None,
    ) -> StoreRecord:
        """Insert or update a store record; returns it. ``collection`` defaults to ``name``.
        Raises ``InvalidArgument`` for a name with a control character (:mod:`knowledge._names`)."""
        check_name(name, "store name")
        now = _now()
        with self._cursor() as cur:
            cur.execute(
                f"INSERT INTO stores ({', '.join(_STORE_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (name) DO UPDATE SET"
                " template = excluded.template, backend = excluded.backend,"
                " collection = excluded.collection,"
                " embedding_model = excluded.embedding_model, dimension = excluded.dimension,"
                " distance = excluded.distance, updated = excluded.updated",
                [name, template, backend, collection or name, embedding_model, dimension, distance, now, now],
            )
        record = self.get_store(name)
        assert record is not None
        return record

    def get_store(self, name: str) -> StoreRecord | None:
        with self._cursor() as cur:
            row = cur.execute(_STORE_SELECT + " WHERE name = ?", [name]).fetchone()
        return _store(row) if row else None

    def list_stores(self) -> list[StoreRecord]:
        with self._cursor() as cur:
            rows = cur.execute(_STORE_SELECT + " ORDER BY lower(name), name").fetchall()
        return [_store(r) for r in rows]

    def internal_stores(self) -> set[str]:
        """The stores the product keeps for itself (each chat session's attachment store), which are
        not listed among the user's stores."""
        with self._cursor() as cur:
            return {r[0] for r in cur.execute("SELECT store FROM chat_sessions").fetchall()}

    def delete_store(self, name: str) -> None:
        """Forget a store and its file records."""
        with self._cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            cur.execute("DELETE FROM store_files WHERE store = ?", [name])
            cur.execute("DELETE FROM store_file_names WHERE store = ?", [name])
            cur.execute("DELETE FROM synced_folders WHERE store = ?", [name])
            cur.execute("DELETE FROM store_settings WHERE store = ?", [name])
            cur.execute("DELETE FROM store_access WHERE store = ?", [name])
            cur.execute("DELETE FROM stores WHERE name = ?", [name])
            cur.execute("COMMIT")

    def adopt_store(
        self,
        name: str,
        template: str,
        backend: str,
        embedding_model: str,
        dimension: int | None,
        distance: str,
        collection: str,
        files: Iterable[FileRecord],
    ) -> StoreRecord:
        """Create store ``name`` over an already filled ``collection`` with its file records, in one
        transaction (an import: :mod:`knowledge.portable`): the store appears whole or not at all.

        Raises:
            StoreExists: a store called ``name`` exists (nothing is written). InvalidArgument: a
                store or file name with a control character (:mod:`knowledge._names`).
        """
        check_name(name, "store name")
        files = list(files)
        for r in files:
            for n in (r.file_name, *r.names):
                check_name(n, "file name")
        now = _now()
        with self._cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                if cur.execute("SELECT 1 FROM stores WHERE name = ?", [name]).fetchone():
                    raise StoreExists(f"A store called {name!r} exists already; import it under another name.")
                cur.execute(
                    f"INSERT INTO stores ({', '.join(_STORE_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [name, template, backend, collection, embedding_model, dimension, distance, now, now],
                )
                cur.execute("DELETE FROM store_files WHERE store = ?", [name])  # records of no store
                cur.execute("DELETE FROM store_file_names WHERE store = ?", [name])
                for r in files:
                    cur.execute(
                        f"INSERT INTO store_files ({', '.join(_FILE_COLUMNS)})"
                        f" VALUES ({', '.join('?' * len(_FILE_COLUMNS))})",
                        [
                            name,
                            r.file_id,
                            unicodedata.normalize("NFC", r.file_name),
                            r.sha256,
                            r.size,
                            str(r.status),
                            r.reason,
                            r.chunks,
                            r.pages,
                            json.dumps(r.warnings),
                            r.read_seconds,
                            r.embed_seconds,
                            r.total_seconds,
                            r.created or now,
                            now,
                            r.error,
                            json.dumps(list(r.readers)) if r.readers is not None else None,
                        ],
                    )
                    for n in r.names:  # the content's names (migration 6), the chunks' one first
                        cur.execute(
                            "INSERT INTO store_file_names (store, file_id, name, folder, created)"
                            " VALUES (?, ?, ?, '', ?) ON CONFLICT DO NOTHING",
                            [name, r.file_id, unicodedata.normalize("NFC", n), r.created or now],
                        )
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        record = self.get_store(name)
        assert record is not None
        return record

    def checkpoint_copy(self, target: Path) -> None:
        """Copy the catalog's database file to ``target`` consistently while it is in use: under the
        catalog's lock (no write of this process in between; DuckDB lets no other process write while
        this one holds the file), after a ``CHECKPOINT`` has moved the write-ahead log into it.

        Raises:
            KnowledgeError: a catalog in PostgreSQL (copy it with ``pg_dump``)."""
        if self.path is None:
            raise KnowledgeError(f"The catalog is in PostgreSQL ({self.describe()}): back it up with pg_dump.")
        deadline = time.monotonic() + CHECKPOINT_WAIT
        while True:
            with self._cursor() as cur:
                try:
                    cur.execute("CHECKPOINT")
                except duckdb.TransactionException as exc:  # another write is still open: let it finish
                    if "CHECKPOINT" not in str(exc) or time.monotonic() > deadline:
                        raise
                else:
                    shutil.copyfile(self.path, target)
                    return
            time.sleep(0.05)  # outside the lock, so the open write can commit

    @contextmanager
    def content_lock(self, store: str, sha256: str) -> Iterator[None]:
        """Hold, across every process on this catalog, the lock of the content ``sha256`` (hex) in
        ``store`` until the block ends: the decision whether to index a file's bytes or join the
        same bytes already there is taken by one process at a time (issue 39). PostgreSQL: a
        transaction-level advisory lock on a connection of its own (signed 64 bits of the SHA-256 of
        store and content); DuckDB: :meth:`hold` (one process has the file at a time). Keep it short."""
        if self.dialect != "postgresql":
            with self.hold():
                yield
            return
        key = int.from_bytes(hashlib.sha256(f"{store}\0{sha256}".encode()).digest()[:8], "big", signed=True)
        with self._cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT pg_advisory_xact_lock(?)", [key])
            yield  # an error: the connection goes back to the pool rolled back, which frees the lock too
            cur.execute("COMMIT")

    # -- files in stores ------------------------------------------------------------------------
    def put_file(self, record: FileRecord, folder: str = "", readers: Iterable[str] | None = None) -> None:
        """Insert or update the record of ``record.file_id`` in ``record.store``. A new content gets
        ``record.file_name`` as its first name (:class:`FileName`, origin ``folder``); a changed
        ``file_name`` renames the name it had (the chunks' name follows the record). ``record.readers``
        is not written (:meth:`set_readers`), but ``readers``, when given, are, in the same transaction
        (a record never shows without the readers it is made with).

        On DuckDB, where this process is the only writer while it holds the file, the rows read at
        the start decide between a plain ``INSERT`` and an ``UPDATE`` (an ``ON CONFLICT`` upsert costs
        DuckDB ~5 ms of CPU against ~1); on PostgreSQL, where another process may insert the same row
        meanwhile, the writes are upserts."""
        check_name(record.file_name, "file name")
        now = _now()
        name = unicodedata.normalize("NFC", record.file_name)
        upsert = self.dialect == "postgresql"
        values = [
            record.store,
            record.file_id,
            name,
            record.sha256,
            record.size,
            str(record.status),
            record.reason,
            record.chunks,
            record.pages,
            json.dumps(record.warnings),
            record.read_seconds,
            record.embed_seconds,
            record.total_seconds,
            record.created or now,
            now,
            record.error,
        ]
        with self._cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                old = cur.execute(
                    "SELECT file_name FROM store_files WHERE store = ? AND file_id = ?", [record.store, record.file_id]
                ).fetchone()
                old_name = old[0] if old is not None else None
                has_names = one_row(
                    cur.execute(
                        "SELECT count(*) FROM store_file_names WHERE store = ? AND file_id = ?",
                        [record.store, record.file_id],
                    )
                )[0]
                if not has_names:
                    cur.execute(
                        "INSERT INTO store_file_names (store, file_id, name, folder, created) VALUES (?, ?, ?, ?, ?)"
                        + (" ON CONFLICT DO NOTHING" if upsert else ""),
                        [record.store, record.file_id, name, folder, record.created or now],
                    )
                elif old_name is not None and old_name != name:
                    cur.execute(
                        "UPDATE store_file_names SET name = ? WHERE store = ? AND file_id = ? AND name = ?"
                        " AND NOT EXISTS (SELECT 1 FROM store_file_names n WHERE n.store = ? AND n.file_id = ?"
                        " AND n.name = ?)",
                        [name, record.store, record.file_id, old_name, record.store, record.file_id, name],
                    )
                if old_name is None or upsert:
                    cur.execute(
                        f"INSERT INTO store_files ({', '.join(_FILE_WRITTEN)})"
                        f" VALUES ({', '.join('?' * len(_FILE_WRITTEN))})"
                        + (f" ON CONFLICT (store, file_id) DO UPDATE SET {_FILE_UPDATES}" if upsert else ""),
                        values,
                    )
                else:
                    cur.execute(
                        f"UPDATE store_files SET {', '.join(f'{c} = ?' for c in _FILE_UPDATED)}"
                        " WHERE store = ? AND file_id = ?",
                        [v for c, v in zip(_FILE_WRITTEN, values, strict=True) if c in _FILE_UPDATED]
                        + [record.store, record.file_id],
                    )
                if readers is not None:
                    cur.execute(
                        "UPDATE store_files SET readers = ? WHERE store = ? AND file_id = ?",
                        [json.dumps(list(readers)), record.store, record.file_id],
                    )
                cur.execute("COMMIT")
            except Exception:
                cur.execute("ROLLBACK")
                raise

    def add_files(self, records: Iterable[FileRecord], *, rows_per_statement: int = 500) -> int:
        """Insert the records of new contents -- none of them in the catalog yet -- each with its
        ``file_name`` as its first name (given by hand), in one transaction, many rows a statement:
        what :meth:`put_file` does for one new record, for thousands at once (a store of 10,000
        files is written in seconds, not minutes). ``readers`` are written as given. Returns how
        many were added; a record that exists fails the whole call (nothing is written)."""
        now = _now()
        rows, names = [], []
        for r in records:
            check_name(r.file_name, "file name")
            name = unicodedata.normalize("NFC", r.file_name)
            values = dict(zip(_FILE_COLUMNS, (getattr(r, c) for c in _FILE_COLUMNS), strict=True))
            values.update(
                file_name=name,
                status=str(r.status),
                warnings=json.dumps(r.warnings),
                readers=json.dumps(list(r.readers)) if r.readers is not None else None,
                created=r.created or now,
                updated=r.updated or now,
            )
            rows.append([values[c] for c in _FILE_COLUMNS])
            names.append([r.store, r.file_id, name, "", r.created or now])
        with self._cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                for table, columns, batch in (
                    ("store_files", _FILE_COLUMNS, rows),
                    ("store_file_names", ("store", "file_id", "name", "folder", "created"), names),
                ):
                    one = "(" + ", ".join("?" * len(columns)) + ")"
                    for start in range(0, len(batch), rows_per_statement):
                        part = batch[start : start + rows_per_statement]
                        cur.execute(
                            f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([one] * len(part))}",
                            [v for row in part for v in row],
                        )
                cur.execute("COMMIT")
            except Exception:
                cur.execute("ROLLBACK")
                raise
        return len(rows)

    def get_file(self, store: str, file_id: str) -> FileRecord | None:
        with self._cursor() as cur:
            row = cur.execute(_FILE_SELECT + " WHERE store = ? AND file_id = ?", [store, file_id]).fetchone()
        return _file(row) if row else None

    def files(self, store: str, file_name: str | None = None, sha256: str | None = None) -> list[FileRecord]:
        """The store's file records, optionally only those with a name or content hash; by name.
        Names compare in Unicode NFC (a decomposed name as macOS writes it equals the typed one)."""
        sql, args = _FILE_SELECT + " WHERE store = ?", [store]
        if file_name is not None:
            sql, args = (
                sql + f" AND {NFC_FUNCTION[self.dialect].format('file_name')} = ?",
                [*args, unicodedata.normalize("NFC", file_name)],
            )
        if sha256 is not None:
            sql, args = sql + " AND sha256 = ?", [*args, sha256]
        with self._cursor() as cur:
            rows = cur.execute(sql + " ORDER BY lower(file_name), file_name, created", args).fetchall()
            names = cur.execute(
                "SELECT file_id, name FROM store_file_names WHERE store = ? ORDER BY created, name", [store]
            ).fetchall()
        return _named([_file(r) for r in rows], names)

    def _file_where(self, store: str, query: FileQuery, exclude: Collection[str]) -> tuple[str, list[Any]]:
        """The ``WHERE`` clause (and its arguments) of ``query`` over ``store_files`` of ``store``,
        leaving out the ids ``exclude``. A name matches when any name of the content holds
        ``query.name`` (``LIKE`` with its ``%``, ``_`` and ``\\`` escaped, in lower case)."""
        sql = " WHERE store = ?"
        args: list[Any] = [store]
        if query.name.strip():
            needle = unicodedata.normalize("NFC", query.name.strip()).lower()
            pattern = "%" + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            sql += (
                " AND (lower(file_name) LIKE ? ESCAPE '\\' OR file_id IN (SELECT n.file_id FROM store_file_names n"
                " WHERE n.store = ? AND lower(n.name) LIKE ? ESCAPE '\\'))"
            )
            args += [pattern, store, pattern]
        if query.statuses:
            sql += f" AND status IN ({', '.join('?' * len(query.statuses))})"
            args += [str(s) for s in query.statuses]
        if query.types:
            sql += " AND (" + " OR ".join("lower(file_name) LIKE ?" for _ in query.types) + ")"
            args += ["%." + t.lower().lstrip(".") for t in query.types]
        if query.since is not None:
            sql, args = sql + " AND updated >= ?", [*args, query.since]
        if query.until is not None:
            sql, args = sql + " AND updated < ?", [*args, query.until]
        if exclude:
            sql += f" AND file_id NOT IN ({', '.join('?' * len(exclude))})"
            args += sorted(exclude)
        return sql, args

    def file_page(
        self, store: str, query: FileQuery | None = None, *, limit: int = 50, offset: int = 0, exclude: Collection[str] = ()
    ) -> FilePage:
        """One page of the file records of ``store`` that ``query`` matches, by name (as
        :meth:`files`, the file id breaking ties), with the aliases of the page's records, and how
        many match in all: two queries (``count(*)``; ``LIMIT``/``OFFSET``) and one for the names of
        the page's contents, whatever the store's size. ``exclude``: ids left out (files the person
        may not read)."""
        where, args = self._file_where(store, query or FileQuery(), exclude)
        limit, offset = max(1, int(limit)), max(0, int(offset))
        with self._cursor() as cur:
            total = int(one_row(cur.execute("SELECT count(*) FROM store_files" + where, args))[0])
            rows = cur.execute(
                _FILE_SELECT + where + " ORDER BY lower(file_name), file_name, file_id LIMIT ? OFFSET ?",
                [*args, limit, offset],
            ).fetchall()
            records = [_file(r) for r in rows]
            names: list[tuple] = []
            if records:
                ids = [r.file_id for r in records]
                names = cur.execute(
                    "SELECT file_id, name FROM store_file_names WHERE store = ? AND file_id IN"
                    f" ({', '.join('?' * len(ids))}) ORDER BY created, name",
                    [store, *ids],
                ).fetchall()
        return FilePage(_named(records, names), total, offset)

    def file_ids(self, store: str, query: FileQuery | None = None, *, exclude: Collection[str] = ()) -> list[str]:
        """The ids of every file record of ``store`` that ``query`` matches, by name (one column,
        for an action on all that match: no record is built)."""
        where, args = self._file_where(store, query or FileQuery(), exclude)
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT file_id FROM store_files" + where + " ORDER BY lower(file_name), file_name, file_id", args
            ).fetchall()
        return [r[0] for r in rows]

    def failure_kinds(
        self, store: str, query: FileQuery | None = None, *, exclude: Collection[str] = ()
    ) -> list[tuple[str | None, str | None, int]]:
        """The failed file records of ``store`` that ``query`` matches, grouped by their failure:
        ``[(error class name, reason, count)]`` (one query; a few rows however many files failed
        the same way), most first."""
        where, args = self._file_where(store, replace(query or FileQuery(), statuses=("failed",)), exclude)
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT error, reason, count(*) FROM store_files" + where + " GROUP BY error, reason ORDER BY 3 DESC", args
            ).fetchall()
        return [(r[0], r[1], int(r[2])) for r in rows]

    def file_counts(self, store: str, *, exclude: Collection[str] = ()) -> FileCounts:
        """:class:`FileCounts` of ``store``'s file records (those not in ``exclude``), counted by the
        database in one query."""
        where, args = self._file_where(store, FileQuery(), exclude)
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT status, count(*), sum(chunks) FROM store_files" + where + " GROUP BY status", args
            ).fetchall()
        by = {str(r[0]): (int(r[1]), int(r[2] or 0)) for r in rows}
        return FileCounts(
            indexed=by.get("done", (0, 0))[0],
            failed=by.get("failed", (0, 0))[0],
            busy=by.get("pending", (0, 0))[0] + by.get("processing", (0, 0))[0],
            chunks=by.get("done", (0, 0))[1],
        )

    def files_named(self, store: str, name: str) -> list[FileRecord]:
        """The records of the contents carrying ``name`` in ``store`` (as their chunks' name or as
        an alias; any origin), compared in Unicode NFC."""
        name = unicodedata.normalize("NFC", name)
        with self._cursor() as cur:
            ids = {
                r[0]
                for r in cur.execute(
                    "SELECT file_id FROM store_file_names WHERE store = ? AND name = ?", [store, name]
                ).fetchall()
            }
        return [f for f in self.files(store) if f.file_id in ids or f.file_name == name]

    # -- names of the files in stores ------------------------------------------------------------
    def names(
        self, store: str, *, file_id: str | None = None, name: str | None = None, folder: str | None = None
    ) -> list[FileName]:
        """The names in ``store`` (optionally of one content, one name, one origin: ``folder`` ``""``
        for the names given by hand), oldest first."""
        sql, args = _NAME_SELECT + " WHERE store = ?", [store]
        for column, value in (("file_id", file_id), ("folder", folder)):
            if value is not None:
                sql, args = sql + f" AND {column} = ?", [*args, value]
        if name is not None:
            sql, args = sql + " AND name = ?", [*args, unicodedata.normalize("NFC", name)]
        with self._cursor() as cur:
            rows = cur.execute(sql + " ORDER BY created, name", args).fetchall()
        return [FileName(**dict(zip(_NAME_COLUMNS, r))) for r in rows]

    def add_name(
        self, store: str, file_id: str, name: str, folder: str = "", size: int | None = None, mtime_ns: int | None = None
    ) -> None:
        """Give content ``file_id`` of ``store`` the name ``name`` (origin ``folder``), or update that
        name's recorded ``size``/``mtime_ns``."""
        check_name(name, "file name")
        with self._cursor() as cur:
            cur.execute(
                f"INSERT INTO store_file_names ({', '.join(_NAME_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (store, file_id, name, folder) DO UPDATE SET size = excluded.size,"
                " mtime_ns = excluded.mtime_ns",
                [store, file_id, unicodedata.normalize("NFC", name), folder, size, mtime_ns, _now()],
            )

    def remove_name(self, store: str, file_id: str, name: str, folder: str | None = None) -> list[FileName]:
        """Take ``name`` (of origin ``folder``; any origin when ``None``) off content ``file_id``;
        returns the content's remaining names (the caller removes a content left with none)."""
        sql = "DELETE FROM store_file_names WHERE store = ? AND file_id = ? AND name = ?"
        args: list[Any] = [store, file_id, unicodedata.normalize("NFC", name)]
        if folder is not None:
            sql, args = sql + " AND folder = ?", [*args, folder]
        with self._cursor() as cur:
            cur.execute(sql, args)
        return self.names(store, file_id=file_id)

    # -- a store's own settings (migration 12) -------------------------------------------------------
    def store_settings(self, store: str) -> StoreSettings:
        """The settings of ``store``; the defaults (no description, no threshold) when none were set."""
        with self._cursor() as cur:
            row = cur.execute(
                "SELECT store, description, score_threshold, updated FROM store_settings WHERE store = ?", [store]
            ).fetchone()
        return StoreSettings(*row) if row else StoreSettings(store)

    def put_store_settings(self, store: str, description: str, score_threshold: float | None) -> StoreSettings:
        """Insert or replace the settings of ``store`` (one statement: all or nothing); returns them.
        The caller checks the values (:meth:`knowledge.service.stores.Stores.set_settings`)."""
        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO store_settings (store, description, score_threshold, updated) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (store) DO UPDATE SET description = excluded.description,"
                " score_threshold = excluded.score_threshold, updated = excluded.updated",
                [store, description, score_threshold, _now()],
            )
        return self.store_settings(store)

    # -- synced folders ---------------------------------------------------------------------------
    def put_synced_folder(self, store: str, folder: str, glob: str) -> None:
        """Remember that ``store`` is kept in sync with ``folder`` (files matching ``glob``)."""
        with self._cursor() as cur:
            cur.execute(
                "INSERT INTO synced_folders (store, folder, pattern, created) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (store, folder) DO UPDATE SET pattern = excluded.pattern",
                [store, folder, glob, _now()],
            )

    def record_sync(self, store: str, folder: str, counts: dict[str, int]) -> None:
        """Note a finished sync of ``folder`` into ``store`` now, with its plan's ``counts``."""
        with self._cursor() as cur:
            cur.execute(
                "UPDATE synced_folders SET last_sync = ?, last_plan = ? WHERE store = ? AND folder = ?",
                [_now(), json.dumps(counts), store, folder],
            )

    def synced_folders(self, store: str) -> list[SyncedFolder]:
        """The folders ``store`` is kept in sync with, by path."""
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT store, folder, pattern, last_sync, last_plan, created FROM synced_folders"
                " WHERE store = ? ORDER BY folder",
                [store],
            ).fetchall()
        return [SyncedFolder(r[0], r[1], r[2], r[3], json.loads(r[4]) if r[4] else {}, r[5]) for r in rows]

    def delete_synced_folder(self, store: str, folder: str) -> bool:
        """Forget a synced folder (its files stay in the store, as names given by hand would)."""
        with self._cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            gone = bool(
                cur.execute(
                    "DELETE FROM synced_folders WHERE store = ? AND folder = ? RETURNING folder", [store, folder]
                ).fetchall()
            )
            cur.execute(
                "UPDATE store_file_names SET folder = '', size = NULL, mtime_ns = NULL WHERE store = ? AND folder = ?",
                [store, folder],
            )
            cur.execute("COMMIT")
        return gone

    def files_signature(self, store: str) -> tuple:
        """``(records, newest update, total chunks)`` of the store's file records: changes whenever
        a record is added, removed or updated (one aggregate query, for cheap change checks)."""
        with self._cursor() as cur:
            row = one_row(
                cur.execute("SELECT count(*), max(updated), sum(chunks) FROM store_files WHERE store = ?", [store])
            )
        return (int(row[0]), str(row[1]), int(row[2] or 0))

    # -- who may read a file (migration 18; knowledge.people.policy) -----------------------------
    def set_readers(self, store: str, file_id: str, readers: Iterable[str] | None) -> bool:
        """Set who may read content ``file_id`` of ``store`` (``None``: whoever may read the store;
        else the principals, stored as given) and mark the record updated (an in-process BM25 index
        re-reads its chunks' payloads). Returns whether the store holds such a record."""
        value = json.dumps(list(readers)) if readers is not None else None
        with self._cursor() as cur:
            return bool(
                cur.execute(
                    "UPDATE store_files SET readers = ?, updated = ? WHERE store = ? AND file_id = ? RETURNING file_id",
                    [value, _now(), store, file_id],
                ).fetchall()
            )

    def restricted_files(self, store: str) -> dict[str, tuple[str, ...]]:
        """``{file_id: readers}`` of the files of ``store`` that do not inherit the store's sharing."""
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT file_id, readers FROM store_files WHERE store = ? AND readers IS NOT NULL", [store]
            ).fetchall()
        return {r[0]: tuple(json.loads(r[1])) for r in rows}

    def file_readers(self, file_id: str) -> dict[str, tuple[str, ...] | None]:
        """``{store: readers}`` for every store holding a record of ``file_id`` (``None``: inherits)."""
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT store, readers FROM store_files WHERE file_id = ? ORDER BY store", [file_id]
            ).fetchall()
        return {r[0]: (tuple(json.loads(r[1])) if r[1] is not None else None) for r in rows}

    def files_naming(self, principal: str) -> list[tuple[str, str, tuple[str, ...]]]:
        """``(store, file_id, readers)`` of every file whose readers name ``principal`` (``"group:hr"``)."""
        needle = json.dumps(principal)
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT store, file_id, readers FROM store_files WHERE readers IS NOT NULL AND strpos(readers, ?) > 0"
                " ORDER BY store, file_id",
                [needle],
            ).fetchall()
        out = [(r[0], r[1], tuple(json.loads(r[2]))) for r in rows]
        return [o for o in out if principal in o[2]]

    def filters_readers(self, store: str) -> bool:
        """Whether searches of ``store`` filter chunks by their ``readers`` payload field (every
        chunk carries it since :meth:`mark_filters_readers`)."""
        with self._cursor() as cur:
            return cur.execute("SELECT 1 FROM store_access WHERE store = ?", [store]).fetchone() is not None

    def mark_filters_readers(self, store: str) -> None:
        """Record that every chunk of ``store`` carries its ``readers`` (see :meth:`filters_readers`),
        and mark every file record updated (in-process BM25 indexes re-read the payloads)."""
        now = _now()
        with self._cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                cur.execute("UPDATE store_files SET updated = ? WHERE store = ?", [now, store])
                if cur.execute("SELECT 1 FROM store_access WHERE store = ?", [store]).fetchone() is None:
                    cur.execute("INSERT INTO store_access (store, since) VALUES (?, ?)", [store, now])
                cur.execute("COMMIT")
            except Exception:
                cur.execute("ROLLBACK")
                raise

    def file_statuses(self, file_id: str) -> dict[str, str]:
        """``{store: status}`` for every store holding a record of ``file_id`` (done, failed, ...)."""
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT store, status FROM store_files WHERE file_id = ? ORDER BY store", [file_id]
            ).fetchall()
        return {r[0]: r[1] for r in rows}

    def file_uses(self) -> dict[str, dict[str, tuple[str, tuple[str, ...] | None]]]:
        """``{file_id: {store: (status, readers)}}`` of every file record of every store, in one
        query (the Files page judges a page of stored files with it; ``readers`` ``None``: inherits)."""
        with self._cursor() as cur:
            rows = cur.execute("SELECT file_id, store, status, readers FROM store_files ORDER BY store").fetchall()
        out: dict[str, dict[str, tuple[str, tuple[str, ...] | None]]] = {}
        for fid, store, status, readers in rows:
            out.setdefault(fid, {})[store] = (str(status), tuple(json.loads(readers)) if readers is not None else None)
        return out

    def names_of_file(self, file_id: str) -> list[str]:
        """Every name content ``file_id`` carries in any store (distinct, oldest first)."""
        with self._cursor() as cur:
            rows = cur.execute(
                "SELECT name, min(created) AS c FROM store_file_names WHERE file_id = ? GROUP BY name ORDER BY c, name",
                [file_id],
            ).fetchall()
        return [r[0] for r in rows]

    def stores_using_file(self, file_id: str) -> list[str]:
        with self._cursor() as cur:
            rows = cur.execute("SELECT store FROM store_files WHERE file_id = ? ORDER BY store", [file_id]).fetchall()
        return [r[0] for r in rows]

    def delete_file(self, store: str, file_id: str) -> bool:
        """Forget content ``file_id`` of ``store``: its record and every name of it."""
        with self._cursor() as cur:
            cur.execute("DELETE FROM store_file_names WHERE store = ? AND file_id = ?", [store, file_id])
            return bool(
                cur.execute(
                    "DELETE FROM store_files WHERE store = ? AND file_id = ? RETURNING file_id", [store, file_id]
                ).fetchall()
            )


def _store(row: tuple) -> StoreRecord:
    return StoreRecord(**dict(zip(_STORE_COLUMNS, row)))


def _named(records: list[FileRecord], names: Iterable[tuple]) -> list[FileRecord]:
    """``records`` each with its other names (``aliases``) from ``names``: ``(file_id, name)`` rows of
    ``store_file_names`` in the order they were given, each name once, the record's own left out."""
    by_id: dict[str, list[str]] = {}
    for fid, name in names:
        if name not in by_id.setdefault(fid, []):
            by_id[fid].append(name)
    out = []
    for rec in records:
        aliases = tuple(n for n in by_id.get(rec.file_id, ()) if n != rec.file_name)
        out.append(rec if not aliases else _with_aliases(rec, aliases))
    return out


def _with_aliases(record: FileRecord, aliases: tuple[str, ...]) -> FileRecord:
    return replace(record, aliases=aliases)


def _file(row: tuple) -> FileRecord:
    """A ``store_files`` row selected by :data:`_FILE_SELECT` as a record: the status as a
    :class:`FileStatus` (an unknown one kept as its text), the warnings decoded from JSON."""
    values = dict(zip(_FILE_COLUMNS, row))
    values["warnings"] = json.loads(values["warnings"]) if values["warnings"] else []
    values["readers"] = tuple(json.loads(values["readers"])) if values["readers"] is not None else None
    if values["status"] in FileStatus._value2member_map_:
        values["status"] = FileStatus(values["status"])
    return FileRecord(**values)
