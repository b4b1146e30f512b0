"""The ``postgresql`` file store: records and content in PostgreSQL tables (``file_store.url``).

Tables (created on first use, under an advisory lock, so two processes may start at once):
``knowledge_files`` (one row per stored file), ``knowledge_file_blobs`` (one row per distinct
SHA-256) and ``knowledge_file_chunks`` (the content as ~1 MiB ``bytea`` rows, ``(blob, seq)``).

* Why a chunk table, not large objects: plain rows are dumped, replicated, permissioned and
  vacuumed like any other, deleting a blob cascades to its chunks (a large object is never freed
  without an explicit ``lo_unlink``), and one ``bytea`` row per MiB bounds memory both ways.
* A save is one transaction: chunks are inserted as they are read, under a placeholder blob; at the
  end the blob takes its digest -- or, when that digest is stored already, the chunks are rolled
  back to a savepoint. A failure, a too-large upload or a killed process leaves nothing.
* Saves and deletes of one digest serialise on an advisory lock, so the last record's delete frees
  the blob and never one a concurrent save is about to reference.
* Reading streams chunk by chunk inside a read-only REPEATABLE READ transaction of its own: a
  stream opened before a delete keeps reading the content it opened.
"""

from __future__ import annotations

import builtins  # the name `list` is a FileStore method below; annotations after it say builtins.list
import hashlib
import io
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, BinaryIO, TypeVar

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool

from knowledge._pg import describe_target, pooled_connection
from knowledge.config import Settings
from knowledge.errors import BackendUnavailable, ConfigError, FileNotFoundInStore, KnowledgeError, StoreCorrupt
from knowledge.filestore.base import (
    CHUNK_SIZE,
    FileStore,
    Source,
    StoredFile,
    check_file_id_type,
    check_max_bytes,
    clean_content_type,
    clean_metadata,
    clean_name,
    given_identity,
    id_taken,
    is_file_id,
    normalize_sha256,
    read_chunks,
)
from knowledge.telemetry import watch_pool

T = TypeVar("T")

FILES = "knowledge_files"
BLOBS = "knowledge_file_blobs"
CHUNKS = "knowledge_file_chunks"
#: Advisory-lock key of the table creation (a constant; "knowledge file store" in a signed int64).
_SCHEMA_LOCK = int.from_bytes(hashlib.sha256(b"knowledge.filestore.schema").digest()[:8], "big", signed=True)

_SCHEMA = [
    f"""CREATE TABLE IF NOT EXISTS {BLOBS} (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        sha256 text UNIQUE CHECK (sha256 ~ '^[0-9a-f]{{64}}$'),
        size bigint NOT NULL DEFAULT 0 CHECK (size >= 0))""",
    f"""CREATE TABLE IF NOT EXISTS {CHUNKS} (
        blob_id bigint NOT NULL REFERENCES {BLOBS} (id) ON DELETE CASCADE,
        seq integer NOT NULL CHECK (seq >= 0),
        data bytea NOT NULL,
        PRIMARY KEY (blob_id, seq))""",
    f"""CREATE TABLE IF NOT EXISTS {FILES} (
        id text PRIMARY KEY CHECK (id ~ '^file-[0-9a-f]{{32}}$'),
        name text NOT NULL,
        content_type text NOT NULL,
        size bigint NOT NULL CHECK (size >= 0),
        sha256 text NOT NULL REFERENCES {BLOBS} (sha256),
        created timestamptz NOT NULL,
        metadata json NOT NULL)""",
    f"CREATE INDEX IF NOT EXISTS {FILES}_sha256 ON {FILES} (sha256)",
    f"CREATE INDEX IF NOT EXISTS {FILES}_created ON {FILES} (created DESC, id DESC)",
]


def _digest_lock(sha256: str) -> int:
    """The advisory-lock key of one digest (signed 64 bits of it)."""
    return int.from_bytes(bytes.fromhex(sha256[:16]), "big", signed=True)


def configured_url(settings: Settings) -> str | None:
    """``file_store.url``, else ``catalog.url`` (when the settings have that section), else ``None``."""
    url = (settings.file_store.url or "").strip()
    if url:
        return url
    catalog_url = getattr(getattr(settings, "catalog", None), "url", None)
    return str(catalog_url).strip() or None if catalog_url else None


def _record(row: tuple[Any, ...]) -> StoredFile:
    file_id, name, content_type, size, sha256, created, metadata = row
    return StoredFile(
        id=file_id, name=name, content_type=content_type, size=size, sha256=sha256, created=created, metadata=metadata or {}
    )


_COLUMNS = "id, name, content_type, size, sha256, created, metadata"


class PostgresFileStore(FileStore):
    """Files in PostgreSQL: ``file_store.url`` (default ``catalog.url``). Thread-safe; many processes.

    See the module docstring for the tables and why writes are atomic. Connections come from a small
    pool (``psycopg_pool``), each checked before use, so a connection a server restart broke is
    replaced instead of failing the next call (and one made at once when the pool is still in its
    reconnection back-off: :func:`knowledge._pg.pooled_connection`); a content stream holds one connection of its own
    until it is closed.

    Raises (constructor):
        ConfigError: no URL is configured, or it is not a PostgreSQL connection string.
        BackendUnavailable: the server cannot be reached or refuses the login (the message names the
            server and database, never the password), or the tables cannot be created.
    """

    name = "postgresql"

    #: Seconds to wait for a connection (server or pool) before :class:`BackendUnavailable`.
    connect_timeout: float = 10.0
    #: Bytes per chunk row.
    chunk_size: int = CHUNK_SIZE
    #: Connections the pool opens at most (and one more per file being read: :meth:`open`).
    pool_max_size: int = 8

    def __init__(self, settings: Settings) -> None:
        url = configured_url(settings)
        if url is None:
            raise ConfigError(
                "The postgresql file store needs a database: set file_store.url (for example"
                " postgresql://user@host/db) or catalog.url."
            )
        try:
            self.conninfo = make_conninfo(url, connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"file_store.url is not a valid PostgreSQL connection string: {exc}") from None
        self.target = describe_target(self.conninfo)
        self._bootstrap()
        self._pool = ConnectionPool(  # each connection checked before use: one a restart broke is replaced
            self.conninfo,
            min_size=1,
            max_size=self.pool_max_size,
            timeout=self.connect_timeout,
            open=False,
            name=f"knowledge-files-{self.target}",
            check=ConnectionPool.check_connection,
            reconnect_timeout=self.connect_timeout,  # then the next call tries at once (see catalog.postgres)
        )
        watch_pool(self._pool)  # its connections in use, in the metrics
        try:
            self._pool.open(wait=True, timeout=self.connect_timeout)
        except Exception as exc:
            self._pool.close()
            raise self.unavailable(exc) from exc

    def __repr__(self) -> str:
        return f"PostgresFileStore({self.target!r})"

    # -- connections ------------------------------------------------------------------------------
    def unavailable(self, exc: BaseException) -> BackendUnavailable:
        """The error for a server that cannot be reached (names the server, never the password)."""
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        return BackendUnavailable(
            f"The postgresql file store cannot reach PostgreSQL at {self.target}: {reason}. Check that the"
            " server is running and that file_store.url (or catalog.url) names it, with a user and"
            " password it accepts."
        )

    def _bootstrap(self) -> None:
        """Create the tables if missing, one process at a time (advisory lock)."""
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn, conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _SCHEMA:
                    conn.execute(statement.encode())
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from exc
        except psycopg.Error as exc:
            raise BackendUnavailable(
                f"The postgresql file store cannot create its tables in {self.target}:"
                f" {exc.__class__.__name__}: {str(exc).strip()}"
            ) from exc

    def _run(self, fn: Callable[[psycopg.Connection], T]) -> T:
        """``fn(conn)`` in one transaction (committed on return, rolled back on an exception)."""
        try:
            with pooled_connection(self._pool, lambda: psycopg.connect(self.conninfo)) as conn:
                return fn(conn)
        except KnowledgeError:
            raise
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from exc
        except Exception as exc:
            if exc.__class__.__module__.startswith("psycopg_pool"):  # PoolTimeout, PoolClosed
                raise self.unavailable(exc) from exc
            raise

    # -- the contract -----------------------------------------------------------------------------
    def save(
        self,
        name: str,
        content_type: str | None,
        stream: Source,
        *,
        max_bytes: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        file_id: str | None = None,
        created: datetime | None = None,
    ) -> StoredFile:
        """Store ``stream`` in one transaction (under a new id, or ``file_id``); see :meth:`FileStore.save`
        for arguments and errors.

        Chunks of :attr:`chunk_size` bytes are inserted as they are read and hashed (memory does not
        grow with the file); identical content already stored is kept once (the new chunks are rolled
        back). On any error -- ``FileTooLarge``, the stream's own, a lost connection -- the
        transaction rolls back and nothing is stored.

        Raises:
            BackendUnavailable: the server cannot be reached (nothing stored).
        """
        clean = clean_name(name)
        ctype = clean_content_type(content_type, clean)
        meta = clean_metadata(metadata)
        limit = check_max_bytes(max_bytes)
        new_id, when = given_identity(file_id, created)

        def go(conn: psycopg.Connection) -> StoredFile:
            hasher, size = hashlib.sha256(), 0
            with conn.cursor() as cur:
                cur.execute("SAVEPOINT content")
                blob_id = cur.execute(f"INSERT INTO {BLOBS} DEFAULT VALUES RETURNING id").fetchone()[0]  # type: ignore[index]
                for seq, chunk in enumerate(read_chunks(stream, name=clean, max_bytes=limit, chunk_size=self.chunk_size)):
                    hasher.update(chunk)
                    size += len(chunk)
                    cur.execute(f"INSERT INTO {CHUNKS} (blob_id, seq, data) VALUES (%s, %s, %b)", (blob_id, seq, chunk))
                    del chunk
                sha = hasher.hexdigest()
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_digest_lock(sha),))
                if cur.execute(f"SELECT 1 FROM {BLOBS} WHERE sha256 = %s", (sha,)).fetchone():
                    cur.execute("ROLLBACK TO SAVEPOINT content")  # stored already: drop the new chunks
                else:
                    cur.execute(f"UPDATE {BLOBS} SET sha256 = %s, size = %s WHERE id = %s", (sha, size, blob_id))
                record = StoredFile(
                    id=new_id, name=clean, content_type=ctype, size=size, sha256=sha, created=when, metadata=meta
                )
                cur.execute(
                    f"INSERT INTO {FILES} ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                    (
                        record.id,
                        record.name,
                        record.content_type,
                        record.size,
                        record.sha256,
                        record.created,
                        json.dumps(meta, ensure_ascii=False),
                    ),
                )
                if cur.rowcount != 1:  # a given id stored already (a new one never is): nothing is kept
                    raise id_taken(new_id)
            return record

        return self._run(go)

    def find(self, file_id: str) -> StoredFile | None:
        """The record of ``file_id`` or ``None`` (a malformed id is ``None`` without a query).

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
            BackendUnavailable: the server cannot be reached.
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            return None
        row = self._run(lambda c: c.execute(f"SELECT {_COLUMNS} FROM {FILES} WHERE id = %s", (file_id,)).fetchone())
        return _record(row) if row else None

    def content(self, file_id: str) -> BinaryIO:
        """A buffered binary stream reading the content one chunk row at a time.

        The stream holds a connection (outside the pool) in a read-only REPEATABLE READ transaction
        until it is closed, so it reads the content it opened even if the file is deleted meanwhile.

        Raises:
            FileNotFoundInStore: no such file (or a malformed id).
            InvalidArgument: ``file_id`` is not a ``str``.
            StoreCorrupt: the record's content is missing.
            BackendUnavailable: the server cannot be reached.
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.")
        try:
            conn = psycopg.connect(self.conninfo)
        except psycopg.OperationalError as exc:
            raise self.unavailable(exc) from exc
        try:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            row = conn.execute(
                f"SELECT f.size, b.id, b.size FROM {FILES} f LEFT JOIN {BLOBS} b ON b.sha256 = f.sha256 WHERE f.id = %s",
                (file_id,),
            ).fetchone()
            if row is None:
                raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.")
            size, blob_id, blob_size = row
            if blob_id is None or blob_size != size:
                raise StoreCorrupt(f"The stored file {file_id!r} has a record but its content is missing.")
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.OperationalError):
                raise self.unavailable(exc) from exc
            raise
        return io.BufferedReader(_ChunkReader(self, conn, blob_id, size), buffer_size=64 * 1024)

    def list(self) -> builtins.list[StoredFile]:
        """Every stored file, newest first (by ``created``, then id)."""
        rows = self._run(lambda c: c.execute(f"SELECT {_COLUMNS} FROM {FILES} ORDER BY created DESC, id DESC").fetchall())
        return [_record(r) for r in rows]

    def find_by_sha256(self, sha256: str) -> builtins.list[StoredFile]:
        """Every stored file with this digest (64 hex, any case), newest first (an index lookup).

        Raises:
            InvalidArgument: ``sha256`` is not 64 hex digits.
        """
        digest = normalize_sha256(sha256)
        rows = self._run(
            lambda c: c.execute(
                f"SELECT {_COLUMNS} FROM {FILES} WHERE sha256 = %s ORDER BY created DESC, id DESC", (digest,)
            ).fetchall()
        )
        return [_record(r) for r in rows]

    def delete(self, file_id: str) -> bool:
        """Remove ``file_id``'s record, and its blob (with its chunks) when no other record has the digest.

        Returns ``True`` when a file was removed, ``False`` when none had that id (or it is malformed).

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
            BackendUnavailable: the server cannot be reached (nothing changed).
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            return False

        def go(conn: psycopg.Connection) -> bool:
            row = conn.execute(f"SELECT sha256 FROM {FILES} WHERE id = %s", (file_id,)).fetchone()
            if row is None:
                return False
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_digest_lock(row[0]),))
            gone = conn.execute(f"DELETE FROM {FILES} WHERE id = %s RETURNING sha256", (file_id,)).fetchone()
            if gone is None:  # deleted by someone else meanwhile
                return False
            if not conn.execute(f"SELECT 1 FROM {FILES} WHERE sha256 = %s LIMIT 1", gone).fetchone():
                conn.execute(f"DELETE FROM {BLOBS} WHERE sha256 = %s", gone)  # its chunks cascade
            return True

        return self._run(go)

    def close(self) -> None:
        """Close the connection pool (open content streams keep their own connection)."""
        self._pool.close()


class _ChunkReader(io.RawIOBase):
    """The raw stream behind :meth:`PostgresFileStore.content`: one chunk row per database read."""

    def __init__(self, store: PostgresFileStore, conn: psycopg.Connection, blob_id: int, size: int) -> None:
        self._store, self._conn, self._blob_id, self._size = store, conn, blob_id, size
        self._seq, self._buf, self._pos, self._served = 0, b"", 0, 0

    def readable(self) -> bool:
        return True

    def _next_chunk(self) -> bytes:
        try:
            row = self._conn.execute(
                f"SELECT data FROM {CHUNKS} WHERE blob_id = %s AND seq = %s", (self._blob_id, self._seq), binary=True
            ).fetchone()
        except psycopg.OperationalError as exc:
            raise self._store.unavailable(exc) from exc
        if row is None:
            raise StoreCorrupt(f"A stored file's content ends at chunk {self._seq}, before its size.")
        self._seq += 1
        data = row[0]
        return data if isinstance(data, bytes) else bytes(data)

    def readinto(self, b: Any) -> int:
        if self._served >= self._size:
            return 0
        if self._pos >= len(self._buf):
            self._buf, self._pos = self._next_chunk(), 0
        n = min(len(b), len(self._buf) - self._pos)
        b[:n] = self._buf[self._pos : self._pos + n]
        self._pos += n
        self._served += n
        if self._pos >= len(self._buf):
            self._buf, self._pos = b"", 0
        return n

    def close(self) -> None:
        if not self.closed:
            self._conn.close()
        super().close()
