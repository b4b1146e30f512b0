"""The catalog's PostgreSQL engine (``catalog.url``): one database shared by processes and hosts.

A ``psycopg_pool`` pool of autocommit connections. Each is checked before use, so a connection lost
with a server restart is replaced. The pool's own reconnection gives up after ``connect_timeout``,
so that the next request tries at once instead of waiting out psycopg_pool's back-off, which
doubles without limit (a pool 35 s into an outage would next try some 30 s after the server is
back); and a request the pool has no connection for within ``connect_timeout`` tries one of its
own (:func:`knowledge._pg.pooled_connection`): the first request after a restart succeeds. Each
``cursor()`` block has a connection of its own, so threads work in parallel and ``BEGIN
TRANSACTION``/``COMMIT`` run as statements on it. The SQL is DuckDB's, translated by
:mod:`knowledge.catalog.dialect`; JSON columns are read as text, timestamps in UTC. The schema is
migrated under an advisory lock (two processes starting at once migrate once). A server that cannot
be reached: :class:`~knowledge.errors.BackendUnavailable` naming host, port and database -- never
the password.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from psycopg.types.string import TextLoader

from knowledge._pg import describe_target, pooled_connection
from knowledge.catalog.dialect import statement_for
from knowledge.catalog.schema import CatalogCursor, migrate, one_row
from knowledge.errors import BackendUnavailable, KnowledgeError
from knowledge.telemetry import watch_pool

#: The advisory lock key (``pg_advisory_lock``) held while the catalog's schema is migrated.
MIGRATION_LOCK = 0x6B6E6F77  # "know"


class PgCursor:
    """A psycopg cursor speaking the catalog's SQL (``?`` placeholders); see :class:`CatalogCursor`."""

    def __init__(self, cursor: psycopg.Cursor) -> None:
        self._cur = cursor

    def execute(self, query: str, parameters: Sequence[Any] | None = None, /) -> PgCursor:
        if parameters is None:
            self._cur.execute(query)
        else:
            self._cur.execute(statement_for(query, "postgresql"), list(parameters))
        return self

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._cur.fetchone()

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall()


def _configure(conn: psycopg.Connection) -> None:
    for json_type in ("json", "jsonb"):
        conn.adapters.register_loader(json_type, TextLoader)  # as DuckDB gives JSON: text
    conn.execute("SET TIME ZONE 'UTC'")


class PgEngine:
    """The catalog in the PostgreSQL database at ``url`` (see the module docstring).

    Raises:
        BackendUnavailable: on first use, when the server cannot be reached or refuses the login.
    """

    dialect = "postgresql"

    def __init__(self, url: str, connect_timeout: float = 5.0, pool_max_size: int = 8) -> None:
        self.conninfo = url
        self.target = describe_target(url)
        self.connect_timeout = connect_timeout
        self.pool_max_size = pool_max_size
        self._pool: Any = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"postgresql://{self.target}"

    def _unreachable(self, exc: BaseException) -> BackendUnavailable:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        return BackendUnavailable(
            f"Cannot reach the PostgreSQL catalog at {self.target}: {reason}. Check that the server is"
            " running and that catalog.url (user, password, database) is right -- or leave catalog.url"
            " unset for the catalog file in the data folder."
        )

    def _start(self) -> Any:
        with self._lock:
            if self._pool is not None:
                return self._pool
            try:
                with psycopg.connect(
                    self.conninfo, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
                ) as conn:
                    _configure(conn)
                    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
                    try:
                        migrate(PgCursor(conn.cursor()), "postgresql")
                    finally:
                        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
            except KnowledgeError:
                raise
            except psycopg.OperationalError as exc:
                raise self._unreachable(exc) from None
            from psycopg_pool import ConnectionPool  # noqa: PLC0415 - only for a PostgreSQL catalog

            self._pool = ConnectionPool(
                self.conninfo,
                min_size=1,
                max_size=self.pool_max_size,
                open=True,
                name="knowledge-catalog",
                kwargs={"autocommit": True, "connect_timeout": max(1, round(self.connect_timeout))},
                configure=_configure,
                check=ConnectionPool.check_connection,
                timeout=self.connect_timeout,
                reconnect_timeout=self.connect_timeout,
            )  # see the module docstring
            watch_pool(self._pool)  # its connections in use, in the metrics
            return self._pool

    def _connect_now(self) -> psycopg.Connection:
        """A connection of its own (not the pool's), configured as the pool's are."""
        conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=max(1, round(self.connect_timeout)))
        try:
            _configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def cursor(self) -> Iterator[CatalogCursor]:
        from psycopg_pool import PoolTimeout  # noqa: PLC0415 - only for a PostgreSQL catalog

        pool = self._start()
        with ExitStack() as stack:  # the connection goes back to the pool (rolled back if left in a transaction)
            try:  # the pool's, or one made now when the pool is still in its back-off (the server is back)
                conn = stack.enter_context(pooled_connection(pool, self._connect_now))
            except (PoolTimeout, psycopg.OperationalError) as exc:
                raise self._unreachable(exc) from None
            try:
                with conn.cursor() as cur:
                    yield PgCursor(cur)
            except psycopg.OperationalError as exc:
                if conn.closed or conn.broken:
                    raise self._unreachable(exc) from None
                raise

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Nothing to hold: the server serves every process at once."""
        yield

    def change_token(self) -> tuple:
        """``(version,)`` of the ``catalog_changes`` row, bumped by every committed write (0007)."""
        with self.cursor() as cur:
            return (one_row(cur.execute("SELECT version FROM catalog_changes WHERE id = 1"))[0],)

    def close(self) -> None:
        """Close the pool's connections (a later use opens a new pool)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def shutdown(self) -> None:
        self.close()
