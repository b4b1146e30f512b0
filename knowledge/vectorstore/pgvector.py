"""The ``pgvector`` backend: each store is one PostgreSQL table with an HNSW index (psycopg 3 + pgvector).

A store is the table ``vs_<slug>_<hash>`` (a readable ASCII slug of the name + 12 hex digits of the
SHA-256 of the exact name, always quoted with :class:`psycopg.sql.Identifier`), registered in
``knowledge_vector_stores``; payloads are ``jsonb`` (``where`` is containment on a GIN index), the
BM25 terms a ``tsvector`` column with term statistics in ``<table>_terms``. Scores follow
:data:`~knowledge.vectorstore.base.DISTANCE_ORDER` (pgvector's ``<=>``, ``<#>``, ``<->``, ``<+>``).

A search counts its candidate rows first: up to ``exact_max_rows`` it searches exactly (what numpy
would return, ties broken by ``seq``), above it uses the HNSW index with ``iterative_scan =
strict_order``. Connections: a ``psycopg_pool`` pool (default) or one per operation; no URL, or
``"embedded"``: :mod:`knowledge.vectorstore.pg_embedded`. Every operation is one transaction and
idempotent in its end state, so one whose connection breaks is retried on a fresh connection
(``retries``); when every attempt fails, :class:`~knowledge.errors.BackendUnavailable`.

The layout in the database, the operator table and the measured choices: ``docs/backends.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import orjson
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.types import TypeInfo
from psycopg.types.json import set_json_loads
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from knowledge._pg import describe_target, pooled_connection
from knowledge.errors import (
    BackendUnavailable,
    ConfigError,
    InvalidArgument,
    KnowledgeError,
    StorageError,
    StoreNotFound,
)
from knowledge.telemetry import watch_pool
from knowledge.text.analysis import analyzer
from knowledge.vectorstore.base import (
    AnyOf,
    Collection,
    CollectionInfo,
    Point,
    PointId,
    ScoredPoint,
    VectorBackend,
    check_name,
    check_prepared,
    check_vector_size,
    name_slug,
    stack_points,
)
from knowledge.vectorstore.lexical import LEXICAL_FORMAT, indexed_text
from knowledge.vectorstore.pg_embedded import EMBEDDED, EMBEDDED_DIR, embedded_url
from knowledge.vectorstore.scoring import Distance, clamp_cosine, normalise_rows, passes_threshold, prepare_query

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.config import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

REGISTRY = "knowledge_vector_stores"
#: pgvector's HNSW index holds vectors of at most this many dimensions; larger stores search exactly.
HNSW_MAX_DIM = 2000

_OPS: dict[str, tuple[str, str]] = {  # distance -> (operator, HNSW operator class)
    "cosine": ("<=>", "vector_cosine_ops"),
    "dot": ("<#>", "vector_ip_ops"),
    "euclid": ("<->", "vector_l2_ops"),
    "manhattan": ("<+>", "vector_l1_ops"),
}
_CONNECTION_LOST_STATES = ("57P01", "57P02", "57P03")  # admin/crash shutdown, cannot connect now
_RETRY_DELAYS = (0.2, 1.0, 2.0, 4.0)


def _one_row(cursor: psycopg.Cursor) -> tuple[Any, ...]:
    """The row of a query that always returns one (an aggregate, ``to_regclass``, ``EXPLAIN``).

    Raises:
        StorageError: the server returned no row (``fetchone`` is typed ``Optional``; this says so).
    """
    row = cursor.fetchone()
    if row is None:
        raise StorageError("PostgreSQL returned no row for a query that always returns one.")
    return row


class PgvectorOptions(BaseModel):
    """``vector_store.options.pgvector``: tuning of the pgvector backend (all optional).

    In TOML ``[vector_store.options.pgvector]``; in the environment
    ``KNOWLEDGE_VECTOR_STORE__OPTIONS__PGVECTOR__POOL=false``. Unknown keys are a ``ConfigError``.
    """

    model_config = ConfigDict(extra="forbid")

    pool: bool = Field(True, description="a psycopg_pool connection pool (True) or one connection per operation")
    pool_min_size: int = Field(1, ge=0, description="connections the pool keeps open")
    pool_max_size: int = Field(8, ge=1, description="connections the pool opens at most")
    connect_timeout: float = Field(10.0, gt=0, description="seconds to wait for a connection")
    retries: int = Field(2, ge=0, le=4, description="retries of an operation whose connection broke")
    hnsw_m: int = Field(16, ge=2, le=100, description="HNSW m (links per node) of new stores")
    hnsw_ef_construction: int = Field(64, ge=4, le=1000, description="HNSW ef_construction of new stores")
    ef_search: int = Field(100, ge=1, le=1000, description="hnsw.ef_search of an index search (at least k)")
    exact_max_rows: int = Field(
        3_000, ge=0, description="search exactly when at most this many rows match (the filter, or the store)"
    )
    lexical_candidates: int = Field(
        20_000,
        ge=0,
        description="BM25: rows scored per query at most, taken from the rarest query terms"
        " first (the rarest term's rows always); 0 = every row sharing a term with the query",
    )


# -- names ---------------------------------------------------------------------------------------


def table_name(name: str) -> str:
    """The table of the store called ``name``: ``vs_`` + ASCII slug (<= 40) + ``_`` + 12 hex of sha256.

    At most 56 bytes, so ``<table>_hnsw`` stays within PostgreSQL's 63-byte identifiers.

    >>> table_name("Team Notes")[:14]
    'vs_team_notes_'
    """
    return "vs_" + name_slug(name, "_")


def _lock_key(name: str) -> int:
    """A signed 64-bit advisory-lock key for a store name."""
    return int.from_bytes(hashlib.sha256(b"knowledge-store:" + name.encode("utf-8")).digest()[:8], "big", signed=True)


def _check_name(name: Any) -> str:
    name = check_name(name)
    if "\x00" in name:
        raise InvalidArgument("A store name cannot contain the NUL character (PostgreSQL text cannot hold it).")
    return name


#: pgvector's ``vector`` type holds at most this many dimensions.
MAX_DIM = 16000


# -- JSON: ids as JSON tokens, payloads without NUL ----------------------------------------------


def _pid(point_id: PointId) -> str:
    """The ``pid`` column of an id: its JSON token (``7`` and ``"7"`` differ; NUL escaped as text)."""
    return orjson.dumps(point_id).decode("utf-8")


def _unpid(pid: str) -> PointId:
    return orjson.loads(pid)


def _strip_nul(value: Any) -> Any:
    """``value`` with NUL characters removed from every string (keys too): PostgreSQL cannot store them."""
    if isinstance(value, str):
        return value.replace("\x00", "")
    if isinstance(value, dict):
        return {(k.replace("\x00", "") if isinstance(k, str) else k): _strip_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strip_nul(v) for v in value]
    return value


def _payload_json(point_id: PointId, payload: dict[str, Any]) -> str:
    """The payload as JSON text for a ``jsonb`` column: orjson (NaN/inf become ``null``), no NUL.

    Raises:
        InvalidArgument: the payload is not JSON-serialisable.
    """
    try:
        data = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)
        if b"\\u0000" in data:
            data = orjson.dumps(_strip_nul(payload), option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise InvalidArgument(
            f"Point {point_id!r} cannot be stored: its payload is not JSON-serialisable ({exc})."
        ) from None
    return data.decode("utf-8")


def _where_json(where: dict[str, Any]) -> str:
    """An equality filter as the jsonb document ``payload @> ...`` looks for (NUL removed alike)."""
    return orjson.dumps(_strip_nul(where)).decode("utf-8")


# -- the backend -----------------------------------------------------------------------------------


def _is_connection_loss(exc: BaseException, conn: psycopg.Connection | None) -> bool:
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if conn is not None and conn.closed:
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in _CONNECTION_LOST_STATES


class PgvectorBackend(VectorBackend):
    """Stores as PostgreSQL tables with pgvector HNSW indexes.

    Args:
        settings: ``vector_store.url`` (``None`` or ``"embedded"``: the embedded server in
            ``<data_dir>/postgres``), ``vector_store.user``, ``vector_store.password`` and
            ``vector_store.options["pgvector"]`` (:class:`PgvectorOptions`).

    The constructor connects, creates the ``vector`` extension if missing (``CREATE EXTENSION IF
    NOT EXISTS vector``) and the registry table. Thread-safe; share one instance.

    Raises:
        BackendUnavailable: the server cannot be reached, or has no pgvector (the message names
            the fix).
        ConfigError: unknown or invalid ``vector_store.options.pgvector`` keys.
    """

    name: ClassVar[str] = "pgvector"

    @classmethod
    def machine_local(cls, settings: Settings) -> str | None:
        """A reason for the embedded server (no ``vector_store.url``, or ``"embedded"``: a Unix
        socket in this machine's data folder); ``None`` for a server URL."""
        if (settings.vector_store.url or "").strip() in ("", EMBEDDED):
            return (
                f"pgvector without vector_store.url is the embedded PostgreSQL in this machine's folder"
                f" {settings.resolve(EMBEDDED_DIR)}"
            )
        return None

    def __init__(self, settings: Settings) -> None:
        vs = settings.vector_store
        raw = (vs.options or {}).get("pgvector") or {}
        try:
            self.options = PgvectorOptions.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"Invalid vector_store.options.pgvector: {problems}") from None
        url = (vs.url or "").strip()
        self.embedded = url in ("", EMBEDDED)
        if self.embedded:
            url = embedded_url(settings.resolve(EMBEDDED_DIR))
        extra: dict[str, Any] = {"connect_timeout": max(1, math.ceil(self.options.connect_timeout))}
        if vs.user:
            extra["user"] = vs.user
        if vs.password is not None:
            extra["password"] = vs.password.get_secret_value()
        try:
            self.conninfo = make_conninfo(url, **extra)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"vector_store.url is not a valid PostgreSQL connection string: {exc}") from None
        self.target = describe_target(self.conninfo)
        self._vector_info: TypeInfo | None = None
        self._pool: Any = None
        self._closed = False
        self._lock = threading.Lock()
        self._bootstrap()
        if self.options.pool:
            from psycopg_pool import ConnectionPool  # noqa: PLC0415 - only when pooling

            self._pool = ConnectionPool(
                self.conninfo,
                min_size=self.options.pool_min_size,
                max_size=self.options.pool_max_size,
                configure=self._configure,
                timeout=self.options.connect_timeout,
                open=True,
                name=f"knowledge-pgvector-{self.target}",
                check=ConnectionPool.check_connection,  # a connection a server restart broke is replaced
                reconnect_timeout=self.options.connect_timeout,  # then the next call tries at once (catalog.postgres)
            )
            watch_pool(self._pool)  # its connections in use, in the metrics

    # -- connections ------------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo)
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _configure(self, conn: psycopg.Connection) -> None:
        """Adapt ``vector`` <-> numpy (pgvector's dumpers/loaders, from the cached type info) and
        load jsonb with orjson. No round trip: the type's oid was read once by :meth:`_bootstrap`."""
        from pgvector.psycopg.vector import register_vector_info  # noqa: PLC0415 - with the first connection

        register_vector_info(conn, self._vector_info)
        set_json_loads(orjson.loads, conn)
        if conn.autocommit:
            conn.autocommit = False
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:  # pragma: no cover
                conn.rollback()

    def _bootstrap(self) -> None:
        """Create the extension (if missing) and the registry; read the ``vector`` type's oid."""
        try:
            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                have = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
                if not have:
                    try:
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                    except psycopg.errors.UniqueViolation:  # created by a concurrent process
                        pass
                    except psycopg.Error as exc:
                        raise BackendUnavailable(
                            f"The PostgreSQL server at {self.target} has no pgvector extension, or this"
                            f" user may not create it ({exc.__class__.__name__}: {str(exc).strip()}). Fix:"
                            " install pgvector on the server (https://github.com/pgvector/pgvector#installation)"
                            " and run `CREATE EXTENSION vector;` in this database as a superuser -- or leave"
                            " vector_store.url empty to use the embedded PostgreSQL server, which ships pgvector."
                        ) from exc
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("\x00registry"),))
                    conn.execute(
                        sql.SQL(
                            "CREATE TABLE IF NOT EXISTS {} ("
                            " name text PRIMARY KEY,"
                            " table_name text NOT NULL UNIQUE,"
                            " size integer NOT NULL CHECK (size > 0),"
                            " distance text NOT NULL,"
                            " created_at timestamptz NOT NULL DEFAULT now())"
                        ).format(sql.Identifier(REGISTRY))
                    )
                    # the format of the store's lexical columns (knowledge.vectorstore.lexical.LEXICAL_FORMAT);
                    # NULL: not built yet (a store of an older version), built by its first lexical search
                    conn.execute(
                        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS lexical integer").format(sql.Identifier(REGISTRY))
                    )
                self._vector_info = TypeInfo.fetch(conn, "vector")
        except KnowledgeError:
            raise
        except psycopg.Error as exc:
            raise BackendUnavailable(
                f"Cannot connect to PostgreSQL at {self.target}: {str(exc).strip()}. Check that the server"
                " is running and that vector_store.url, vector_store.user and vector_store.password are"
                " right (or leave vector_store.url empty for the embedded server)."
            ) from exc
        if self._vector_info is None:  # pragma: no cover - the extension was just checked
            raise BackendUnavailable(f"The pgvector type 'vector' is missing at {self.target}.")

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection]:
        """One transaction: committed when the block ends, rolled back on an exception."""
        if self._closed:
            raise BackendUnavailable("This pgvector backend was closed.")
        if self._pool is not None:  # or one made now, when the pool is still in its reconnection back-off
            with pooled_connection(self._pool, self._connect) as conn:
                yield conn
        else:
            with self._connect() as conn:  # commits or rolls back, then closes
                yield conn

    def run(self, what: str, fn: Callable[[psycopg.Connection], T], *, retry: bool = True) -> T:
        """``fn(conn)`` in one transaction, retried on a fresh connection when the connection breaks.

        Errors become :class:`KnowledgeError`\\ s: a lost connection (after the retries)
        ``BackendUnavailable``; any other database error ``StorageError``.
        """
        attempts = 1 + (self.options.retries if retry else 0)
        for attempt in range(attempts):
            conn_box: list[psycopg.Connection] = []
            try:
                with self._connection() as conn:
                    conn_box.append(conn)
                    return fn(conn)
            except KnowledgeError:
                raise
            except psycopg.Error as exc:
                lost = conn_box[0] if conn_box else None
                if _is_connection_loss(exc, lost) or (lost is None and isinstance(exc, psycopg.OperationalError)):
                    if attempt + 1 < attempts:
                        log.warning(
                            "pgvector: lost the connection to %s during %s (%s); retrying",
                            self.target,
                            what,
                            str(exc).strip(),
                        )
                        if self._pool is not None:
                            self._pool.check()  # drop the other broken connections of the pool
                        time.sleep(_RETRY_DELAYS[min(attempt, len(_RETRY_DELAYS) - 1)])
                        continue
                    if lost is None:
                        raise BackendUnavailable(
                            f"Cannot connect to PostgreSQL at {self.target} for {what}"
                            f" ({attempts} attempt{'s' if attempts > 1 else ''}): {str(exc).strip()}."
                            " Nothing was read or written. Check that the server is running and that"
                            " vector_store.url, user and password are right."
                        ) from exc
                    raise BackendUnavailable(
                        f"Lost the connection to PostgreSQL at {self.target} during {what}"
                        f" ({attempts} attempt{'s' if attempts > 1 else ''}): {str(exc).strip()}."
                        " PostgreSQL rolled the unfinished transaction back, so the store keeps its previous"
                        " state. Check that the server is running, then try again."
                    ) from exc
                raise StorageError(f"PostgreSQL refused {what}: {str(exc).strip()}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the registry -----------------------------------------------------------------------------
    def collection(self, name: str) -> PgvectorCollection:
        """A handle on the store ``name`` (cheap; the table may not exist yet).

        Raises:
            InvalidArgument: an empty name, or one containing NUL.
        """
        return PgvectorCollection(self, _check_name(name))

    def list_collections(self) -> list[str]:
        """Exact names of the stores in the registry, sorted (by Python's string order)."""
        rows = self.run(
            "listing the stores",
            lambda c: c.execute(sql.SQL("SELECT name FROM {}").format(sql.Identifier(REGISTRY))).fetchall(),
        )
        return sorted(r[0] for r in rows)

    def close(self) -> None:
        """Close the pool (if any). Idempotent; the instance is unusable afterwards."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        mode = "pool" if self.options.pool else "connection per operation"
        return f"PgvectorBackend({self.target!r}, {mode}{', embedded' if self.embedded else ''})"


class _Meta:
    __slots__ = ("distance", "lexical", "size", "table")

    def __init__(self, table: str, size: int, distance: str, lexical: int | None = None) -> None:
        self.table, self.size, self.distance, self.lexical = table, size, distance, lexical

    @property
    def has_lexicon(self) -> bool:
        return self.lexical == LEXICAL_FORMAT


_MAX_LEXEME_BYTES = 2046  # PostgreSQL refuses longer lexemes
_DOCS, _LENGTH = " docs", " length"  # the statistics rows of <table>_terms (no term has a space)
K1, B = 1.2, 0.75


def _quote_lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def lexical_row(payload: dict[str, Any]) -> tuple[str, int, dict[str, int]]:
    """``(tsvector text, number of terms, {term: 1})`` of a payload's ``heading`` + ``text``,
    analysed by :class:`knowledge.text.analysis.Analyzer`; positions (1-based, capped at 16,383 as
    PostgreSQL does) keep each term's frequency."""
    terms = analyzer().terms(indexed_text(payload))
    positions: dict[str, list[int]] = {}
    for i, t in enumerate(terms, start=1):
        if len(t.encode("utf-8")) <= _MAX_LEXEME_BYTES:
            positions.setdefault(t, []).append(min(i, 16383))
    text = " ".join(f"{_quote_lexeme(t)}:{','.join(map(str, ps[:256]))}" for t, ps in positions.items())
    return text, len(terms), dict.fromkeys(positions, 1)


class PgvectorCollection(Collection):
    """One store: a table ``vs_<slug>_<hash>`` registered under its exact name. See the module doc."""

    def __init__(self, backend: PgvectorBackend, name: str) -> None:
        self._b = backend
        self.name = name
        self.table = table_name(name)
        self._bulk = 0  # inside bulk_load(): no HNSW upkeep per write

    # -- helpers ----------------------------------------------------------------------------------
    def _t(self, suffix: str = "") -> sql.Identifier:
        return sql.Identifier(self.table + suffix)

    def _meta(self, conn: psycopg.Connection, *, lock: bool = False) -> _Meta | None:
        q = sql.SQL("SELECT table_name, size, distance, lexical FROM {} WHERE name = %s{}").format(
            sql.Identifier(REGISTRY), sql.SQL(" FOR SHARE") if lock else sql.SQL("")
        )
        row = conn.execute(q, (self.name,)).fetchone()
        return _Meta(*row) if row else None

    def _require(self, conn: psycopg.Connection, *, lock: bool = False) -> _Meta:
        meta = self._meta(conn, lock=lock)
        if meta is None:
            raise StoreNotFound(self.name)
        return meta

    def _rows(self, points: Sequence[Point], size: int, distance: str) -> list[tuple[str, np.ndarray, str]]:
        """Validate and encode a batch before anything is written: (pid, vector, payload json) rows."""
        vectors = stack_points(points, size)
        if distance == "cosine":
            normalise_rows(vectors)  # stack_points returned a fresh matrix: ours to modify
        return [(_pid(p.id), vectors[i], _payload_json(p.id, p.payload)) for i, p in enumerate(points)]

    def _write_rows(
        self,
        conn: psycopg.Connection,
        rows: list[tuple[str, np.ndarray, str]],
        meta: _Meta,
        payloads: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Insert (or overwrite) ``rows``; with the store's lexicon, their ``lex`` columns and the
        term statistics too, in the caller's transaction (the overwritten rows are taken out of the
        statistics first)."""
        if not rows:
            return
        if not meta.has_lexicon:
            q = sql.SQL(
                "INSERT INTO {} (pid, embedding, payload) VALUES (%s, %s, %s::jsonb)"
                " ON CONFLICT (pid) DO UPDATE SET embedding = EXCLUDED.embedding,"
                " payload = EXCLUDED.payload, seq = DEFAULT"
            ).format(self._t())
            with conn.cursor() as cur:
                cur.executemany(q, rows)
            return
        self._delete(conn, meta, sql.SQL("pid = ANY(%s::text[])"), [[r[0] for r in rows]])
        df: dict[str, int] = {}
        total = 0
        full = []
        for row, payload in zip(rows, payloads):
            lex, n, terms = lexical_row(payload)
            total += n
            for t in terms:
                df[t] = df.get(t, 0) + 1
            full.append((*row, lex, n))
        q = sql.SQL(
            "INSERT INTO {} (pid, embedding, payload, lex, lex_len) VALUES (%s, %s, %s::jsonb, %s::tsvector, %s)"
        ).format(self._t())
        with conn.cursor() as cur:
            cur.executemany(q, full)
        self._add_stats(conn, {**df, _DOCS: len(full), _LENGTH: total})

    def _add_stats(self, conn: psycopg.Connection, counts: dict[str, int]) -> None:
        terms = sorted(counts)  # one order for every writer: no deadlock between two
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (term, df) SELECT * FROM unnest(%s::text[], %s::bigint[])"
                " ON CONFLICT (term) DO UPDATE SET df = {}.df + EXCLUDED.df"
            ).format(self._t("_terms"), self._t("_terms")),
            (terms, [counts[t] for t in terms]),
        )

    def _delete(self, conn: psycopg.Connection, meta: _Meta, cond: sql.Composable, params: list[Any]) -> int:
        """``DELETE ... WHERE cond``, taking the rows out of the term statistics when the store has
        its lexicon (same transaction). Returns the number of rows deleted."""
        if not meta.has_lexicon:
            return conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(self._t(), cond), params).rowcount
        terms = self._t("_terms")
        row = _one_row(
            conn.execute(
                sql.SQL(
                    "WITH gone AS (DELETE FROM {t} WHERE {cond} RETURNING lex, lex_len),"
                    " agg AS (SELECT u.lexeme AS term, count(*) AS n FROM gone, unnest(gone.lex) u GROUP BY u.lexeme"
                    "  UNION ALL SELECT %s, count(*) FROM gone"
                    "  UNION ALL SELECT %s, coalesce(sum(lex_len), 0) FROM gone),"
                    " upd AS (UPDATE {terms} s SET df = s.df - agg.n FROM agg WHERE s.term = agg.term AND agg.n <> 0)"
                    " SELECT count(*) FROM gone"
                ).format(t=self._t(), cond=cond, terms=terms),
                [*params, _DOCS, _LENGTH],
            )
        )
        return int(row[0])

    @contextlib.contextmanager
    def bulk_load(self) -> Iterator[None]:
        """Writes inside do not build or maintain the HNSW index; it is built once at the end when
        the store is past ``exact_max_rows`` (one transaction under the store's lock). Searches in
        between are exact (or use an index that existed before). See :meth:`_build_index_if_due`."""
        self._bulk += 1
        try:
            yield
        finally:
            self._bulk -= 1
        if self._bulk == 0:

            def go(conn: psycopg.Connection) -> None:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))
                meta = self._meta(conn, lock=True)
                if meta is not None:
                    self._build_index_if_due(conn, meta)

            self._b.run(f"building the HNSW index of store {self.name!r}", go)

    def _build_index_if_due(self, conn: psycopg.Connection, meta: _Meta) -> None:
        """Build the HNSW index once the store holds more than ``exact_max_rows`` points.

        Below that every search is exact (see the module docstring), so an index would only slow the
        writes down: at 384 dimensions on this project's 2-core machine, upserts ran at ~5,900 points/s
        without the index and ~170/s while maintaining it, and building it over loaded rows (~1,200
        points/s) is ~7x faster than inserting into it (``bench/bench_pgvector.py``). Runs inside the
        writer's transaction (which holds the store's advisory lock), so the rows and their index commit
        together; readers are not blocked (``CREATE INDEX`` takes a SHARE lock: it blocks writes only).
        Stores of more than 2,000 dimensions get no index (pgvector's HNSW limit) and always search
        exactly.
        """
        opts = self._b.options
        if meta.size > HNSW_MAX_DIM or self._bulk:
            return
        index = self.table + "_hnsw"
        if _one_row(conn.execute("SELECT to_regclass(%s)", (sql.Identifier(index).as_string(conn),)))[0]:
            return
        q = sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} LIMIT %s) s").format(self._t())
        if int(_one_row(conn.execute(q, (opts.exact_max_rows + 1,)))[0]) <= opts.exact_max_rows:
            return
        t = time.perf_counter()
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw (embedding {}) WITH (m = {}, ef_construction = {})"
            ).format(
                sql.Identifier(index),
                self._t(),
                sql.SQL(_OPS[meta.distance][1]),
                sql.Literal(opts.hnsw_m),
                sql.Literal(opts.hnsw_ef_construction),
            )
        )
        log.info("pgvector: built the HNSW index of store %r in %.1f s", self.name, time.perf_counter() - t)

    @staticmethod
    def _filter(where: dict[str, Any] | None) -> tuple[sql.Composable, list[Any]]:
        """``where`` as a SQL condition on ``payload`` and its parameters: the equality items one
        ``jsonb`` containment, each :class:`AnyOf` one SQL/JSON path predicate
        (``payload @@ '$."readers" == "a" || $."readers" == "b"'``: in the default lax mode a
        comparison unwraps an array, so it holds for the string or an array holding it), both
        answered from the GIN index (``jsonb_path_ops`` indexes ``@>`` and ``@@``; PostgreSQL
        documentation, "jsonb Indexing")."""
        if not where:
            return sql.SQL("TRUE"), []
        equal = {k: v for k, v in where.items() if not isinstance(v, AnyOf)}
        parts: list[sql.Composable] = []
        params: list[Any] = []
        if equal:
            parts.append(sql.SQL("payload @> %s::jsonb"))
            params.append(_where_json(equal))
        for key, value in where.items():
            if isinstance(value, AnyOf):
                path = orjson.dumps(_strip_nul(key)).decode("utf-8")
                alternatives = (f"$.{path} == {orjson.dumps(_strip_nul(v)).decode('utf-8')}" for v in value.values)
                parts.append(sql.SQL("payload @@ %s::jsonpath"))
                params.append(" || ".join(alternatives))
        return sql.SQL(" AND ").join(parts), params

    # -- lifecycle --------------------------------------------------------------------------------
    def _ensure_collection(self, size: int, distance: Distance) -> None:
        """Create the table and its indexes, or check an existing one's size and distance.

        One transaction under an advisory lock on the name, so concurrent callers create it once.
        The HNSW index is built later, by the write that takes the store past ``exact_max_rows``
        (see :meth:`_build_index_if_due`). ``InvalidArgument`` above :data:`MAX_DIM` dimensions.
        """
        if size > MAX_DIM:
            raise InvalidArgument(f"pgvector stores vectors of at most 16,000 dimensions, got {size}.")

        def go(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))
            meta = self._meta(conn)
            if meta is not None:
                check_prepared(self.name, meta.size, meta.distance, size, distance)
                return
            t = self._t()
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} ("
                    " pid text PRIMARY KEY,"
                    " seq bigint GENERATED BY DEFAULT AS IDENTITY,"
                    " embedding vector({}) NOT NULL,"
                    " payload jsonb NOT NULL DEFAULT '{{}}'::jsonb)"
                ).format(t, sql.Literal(size))
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (payload jsonb_path_ops)").format(self._t("_gin"), t)
            )
            self._create_lexical(conn)
            conn.execute(
                sql.SQL("INSERT INTO {} (name, table_name, size, distance, lexical) VALUES (%s, %s, %s, %s, %s)").format(
                    sql.Identifier(REGISTRY)
                ),
                (self.name, self.table, size, distance, LEXICAL_FORMAT),
            )

        self._b.run(f"creating store {self.name!r}", go)

    def collection_exists(self) -> bool:
        """Whether the store is in the registry."""
        return self._b.run(f"reading store {self.name!r}", lambda c: self._meta(c) is not None)

    def drop_collection(self) -> None:
        """Drop the table and its registry row in one transaction. A missing store is not an error."""

        def go(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(self._t(), self._t("_terms")))
            conn.execute(sql.SQL("DELETE FROM {} WHERE name = %s").format(sql.Identifier(REGISTRY)), (self.name,))

        self._b.run(f"dropping store {self.name!r}", go)

    def info(self) -> CollectionInfo:
        """Size, distance, point count and the table's size on disk (with indexes and TOAST), bytes."""

        def go(conn: psycopg.Connection) -> CollectionInfo:
            meta = self._require(conn)
            count, disk = _one_row(
                conn.execute(
                    sql.SQL("SELECT count(*), pg_total_relation_size(%s::regclass) FROM {}").format(self._t()),
                    (sql.Identifier(self.table).as_string(conn),),
                )
            )
            return CollectionInfo(
                name=self.name,
                size=meta.size,
                distance=meta.distance,  # type: ignore[arg-type]
                count=int(count),
                backend=PgvectorBackend.name,
                disk_bytes=int(disk),
            )

        return self._b.run(f"reading store {self.name!r}", go)

    # -- writes -----------------------------------------------------------------------------------
    def _upsert(self, points: list[Point]) -> None:
        """One transaction (all or nothing). Vectors are L2-normalised for cosine; payloads are
        stored as jsonb with NUL characters removed from their strings.

        Raises (besides the contract's): BackendUnavailable (connection lost after the retries;
        nothing is written).
        """
        if not points:
            return

        def go(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))  # writers of a store in turn
            meta = self._require(conn, lock=True)
            rows = self._rows(points, meta.size, meta.distance)
            self._write_rows(conn, rows, meta, [p.payload for p in points])
            self._build_index_if_due(conn, meta)

        self._b.run(f"writing to store {self.name!r}", go)

    def _replace(self, w: dict[str, Any], points: list[Point]) -> None:
        """Delete the points matching ``w`` and insert ``points`` in one transaction.

        Readers see the old set until the commit and the new set after it (PostgreSQL's READ
        COMMITTED snapshots); a failure or a lost connection leaves the old set.
        """

        def go(conn: psycopg.Connection) -> None:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))  # writers of a store in turn
            meta = self._require(conn, lock=True)
            rows = self._rows(points, meta.size, meta.distance)
            cond, params = self._filter(w)
            self._delete(conn, meta, cond, params)
            self._write_rows(conn, rows, meta, [p.payload for p in points])
            self._build_index_if_due(conn, meta)

        self._b.run(f"replacing points in store {self.name!r}", go)

    def _remove(self, wanted: list[PointId], w: dict[str, Any] | None) -> int:
        """One transaction under the store's advisory lock."""

        def go(conn: psycopg.Connection) -> int:
            if wanted or w:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))  # writers of a store in turn
            meta = self._require(conn, lock=True)
            if not wanted and not w:
                return 0
            parts: list[sql.Composable] = []
            params: list[Any] = []
            if wanted:
                parts.append(sql.SQL("pid = ANY(%s::text[])"))
                params.append([_pid(i) for i in wanted])
            if w:
                cond, p = self._filter(w)
                parts.append(cond)
                params.extend(p)
            return self._delete(conn, meta, sql.SQL("({})").format(sql.SQL(" OR ").join(parts)), params)

        return self._b.run(f"deleting from store {self.name!r}", go)

    # -- the lexical index -------------------------------------------------------------------------
    def _create_lexical(self, conn: psycopg.Connection) -> None:
        """The lexical columns, their GIN index and the term statistics table (idempotent)."""
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS lex tsvector, ADD COLUMN IF NOT EXISTS lex_len integer").format(
                self._t()
            )
        )
        conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING gin (lex)").format(self._t("_lex"), self._t()))
        conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (term text PRIMARY KEY, df bigint NOT NULL)").format(self._t("_terms"))
        )

    def _build_lexical(self, conn: psycopg.Connection, meta: _Meta) -> None:
        """Bring a store without a current lexicon up to date in one transaction: rows of an older
        format (or none) are analysed again from their payloads, rows without ``lex`` are analysed,
        and the term statistics are recounted from the rows."""
        started = time.perf_counter()
        before = meta.lexical
        self._create_lexical(conn)
        t = self._t()
        todo = sql.SQL("TRUE") if meta.lexical is not None else sql.SQL("lex IS NULL")
        rows = conn.execute(
            sql.SQL("SELECT pid, payload->>'heading', payload->>'text' FROM {} WHERE {}").format(t, todo)
        ).fetchall()
        if rows:
            conn.execute("CREATE TEMP TABLE knowledge_lex_fill (pid text, lex tsvector, lex_len integer) ON COMMIT DROP")
            with conn.cursor().copy("COPY knowledge_lex_fill (pid, lex, lex_len) FROM STDIN") as copy:
                for pid, heading, text in rows:
                    lex, n, _ = lexical_row({"heading": heading, "text": text})
                    copy.write_row((pid, lex, n))
            conn.execute(
                sql.SQL(
                    "UPDATE {} t SET lex = f.lex, lex_len = f.lex_len FROM knowledge_lex_fill f WHERE t.pid = f.pid"
                ).format(t)
            )
        terms = self._t("_terms")
        conn.execute(sql.SQL("TRUNCATE {}").format(terms))
        conn.execute(
            sql.SQL(
                "INSERT INTO {terms} (term, df)"
                " SELECT u.lexeme, count(*) FROM {t}, unnest({t}.lex) u GROUP BY u.lexeme"
                " UNION ALL SELECT %s, count(*) FROM {t}"
                " UNION ALL SELECT %s, coalesce(sum(lex_len), 0) FROM {t}"
            ).format(terms=terms, t=t),
            (_DOCS, _LENGTH),
        )
        conn.execute(
            sql.SQL("UPDATE {} SET lexical = %s WHERE name = %s").format(sql.Identifier(REGISTRY)),
            (LEXICAL_FORMAT, self.name),
        )
        meta.lexical = LEXICAL_FORMAT
        log.warning(
            "pgvector: store %r had no current lexical index (format %s); built it (%d rows analysed) in %.1f s",
            self.name,
            before if before is not None else "none",
            len(rows),
            time.perf_counter() - started,
        )

    def ensure_lexical_index(self) -> None:
        """Build the store's lexical columns now if they are missing or of another format (one
        transaction, under the store's write lock). Raises ``StoreNotFound``."""

        def go(conn: psycopg.Connection) -> None:
            meta = self._require(conn)
            if meta.has_lexicon:
                return
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self.name),))
            meta = self._require(conn, lock=True)
            if not meta.has_lexicon:
                self._build_lexical(conn, meta)

        self._b.run(f"building the lexical index of store {self.name!r}", go)

    def _lexical_search(self, query: str, k: int, w: dict[str, Any] | None) -> list[ScoredPoint]:
        """BM25 in PostgreSQL: the ``limit`` best points for ``query``, best first, ``score`` BM25
        (>= 0, higher is better; Lucene's formula and defaults as :class:`knowledge.service.fusion.LexicalIndex`).

        Each row keeps its analysed terms as a ``tsvector`` (``lex``, GIN-indexed; positions keep
        the term frequencies) and its length (``lex_len``); ``<table>_terms`` keeps each term's
        document frequency and the store's document count and total length -- all written in the
        same transaction as the vectors. A query ORs its terms (``lex @@ tsquery``) through the GIN
        index, taking the rarest terms first up to ``options.pgvector.lexical_candidates`` rows
        (rows having only the commonest terms of a long query can be missed: they score least),
        and ranks the candidates in SQL.

        Raises:
            StoreNotFound, InvalidArgument (``limit < 1``, a bad filter).
        """
        terms = list(dict.fromkeys(analyzer().terms(query))) if isinstance(query, str) else []
        terms = [t for t in terms if len(t.encode("utf-8")) <= _MAX_LEXEME_BYTES]
        cap = self._b.options.lexical_candidates

        def go(conn: psycopg.Connection) -> list[ScoredPoint] | None:
            if not self._require(conn).has_lexicon:
                return None  # built below, then searched: one transaction when the index exists
            if not terms:
                return []
            stats: dict[str, int] = dict(
                conn.execute(
                    sql.SQL("SELECT term, df FROM {} WHERE term = ANY(%s::text[])").format(self._t("_terms")),
                    ([*terms, _DOCS, _LENGTH],),
                ).fetchall()
            )
            docs, length = int(stats.pop(_DOCS, 0)), int(stats.pop(_LENGTH, 0))
            present = sorted(((int(df), t) for t, df in stats.items() if df > 0))
            if not docs or not present:
                return []
            chosen: list[str] = []
            rows = 0
            for df, t in present:
                if chosen and cap and rows + df > cap:
                    break
                chosen.append(t)
                rows += df
            idf = [math.log1p((docs - df + 0.5) / (df + 0.5)) for df, _ in present]
            avg = length / docs if length else 1.0
            cond, params = self._filter(w)
            tsq = " | ".join(_quote_lexeme(t) for t in chosen)
            q = sql.SQL(
                "WITH q(term, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),"
                " cand AS (SELECT pid, lex, lex_len FROM {t} WHERE lex @@ %s::tsquery AND {cond}),"
                " scored AS (SELECT c.pid, sum(q.idf * cardinality(u.positions) * %s"
                "   / (cardinality(u.positions) + %s * (%s + %s * c.lex_len / %s))) AS score"
                # only the query's lexemes of each row: weight them A, keep the A ones, unnest those
                "   FROM cand c CROSS JOIN LATERAL unnest(ts_filter(setweight(c.lex, 'A', %s::text[]), '{{a}}')) u"
                "   JOIN q ON q.term = u.lexeme"
                "   GROUP BY c.pid ORDER BY score DESC, c.pid LIMIT %s)"
                " SELECT s.pid, s.score, t.payload FROM scored s JOIN {t} t ON t.pid = s.pid"
                " ORDER BY s.score DESC, s.pid"
            ).format(t=self._t(), cond=cond)
            names = [t for _, t in present]
            found = conn.execute(q, [names, idf, tsq, *params, K1 + 1, K1, 1 - B, B, avg, names, k]).fetchall()
            return [ScoredPoint(id=_unpid(pid), score=float(score), payload=payload) for pid, score, payload in found]

        found = self._b.run(f"searching store {self.name!r} by words", go)
        if found is None:
            self.ensure_lexical_index()
            found = self._b.run(f"searching store {self.name!r} by words", go) or []
        return found

    # -- reads ------------------------------------------------------------------------------------
    def _count(self, w: dict[str, Any] | None) -> int:

        def go(conn: psycopg.Connection) -> int:
            self._require(conn)
            cond, params = self._filter(w)
            return int(
                _one_row(conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(self._t(), cond), params))[0]
            )

        return self._b.run(f"counting store {self.name!r}", go)

    def _native_filter(self, raw_filter: Any) -> sql.Composable:
        """A SQL boolean expression over ``payload`` (jsonb) and ``embedding``, as a
        ``psycopg.sql.Composable`` (values as ``sql.Literal`` or ``.format`` arguments) or a ``str``.
        It is trusted SQL: never build it from user text without ``sql.Literal``."""
        if isinstance(raw_filter, sql.Composable):
            return raw_filter
        if isinstance(raw_filter, str) and raw_filter.strip():
            return sql.SQL(raw_filter)  # trusted SQL by contract (see search)
        raise InvalidArgument(
            "raw_filter for the pgvector backend is a SQL boolean expression over the columns payload"
            " (jsonb) and embedding: a psycopg.sql.Composable such as"
            ' sql.SQL("payload->>\'lang\' = {}").format("en"), or a str of trusted SQL;'
            f" got {type(raw_filter).__name__}."
        )

    def _candidates(self, conn: psycopg.Connection, cond: sql.Composable, params: list[Any], filtered: bool) -> int:
        """How many rows the search ranks -- exactly up to ``exact_max_rows + 1``, or an estimate
        when that is clearly more.

        The table's statistics decide first, when ANALYZE (autovacuum) has run: without a filter,
        ``pg_class.reltuples`` scaled to the current number of pages (as the planner does); with
        one, the planner's row estimate (``EXPLAIN``; for jsonb containment PostgreSQL evaluates the
        filter on its sample of the table, which is close: 998 / 10,981 / 49,503 estimated for
        1,000 / 10,000 / 50,000 rows in a 100,000-row test). An estimate above
        ``4 * exact_max_rows`` is taken as is (the HNSW path). Otherwise a bounded ``count(*)``
        (through the GIN index for ``where``) decides: cheap for a narrow filter, while for a broad
        one it would read thousands of rows (~30 ms for 3,000 rows of a 50% filter here), which is
        what the estimate spares.
        """
        cap = self._b.options.exact_max_rows
        row = conn.execute(
            "SELECT c.reltuples, c.relpages, pg_relation_size(c.oid) / current_setting('block_size')::int"
            " FROM pg_class c WHERE c.oid = %s::regclass",
            (sql.Identifier(self.table).as_string(conn),),
        ).fetchone()
        if row is not None and float(row[0]) >= 0 and int(row[1]) > 0:
            reltuples, relpages, pages = float(row[0]), int(row[1]), int(row[2])
            total = int(reltuples / relpages * pages)
            if not filtered:
                return total
            if total > 4 * cap:
                with psycopg.ClientCursor(conn) as cur:  # EXPLAIN takes no server-side parameters
                    cur.execute(sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM {} WHERE {}").format(self._t(), cond), params)
                    plan = _one_row(cur)[0]
                if isinstance(plan, str):
                    plan = orjson.loads(plan)
                estimate = int(plan[0]["Plan"]["Plan Rows"])
                if estimate > 4 * cap:
                    return estimate
        q = sql.SQL("SELECT count(*) FROM (SELECT 1 FROM {} WHERE {} LIMIT %s) s").format(self._t(), cond)
        return int(_one_row(conn.execute(q, [*params, cap + 1]))[0])

    def _search(
        self,
        vector: np.ndarray,
        k: int,
        w: dict[str, Any] | None,
        raw_filter: Any,
        score_threshold: float | None,
        with_payload: bool,
    ) -> list[ScoredPoint]:
        """Exact (index scans off) when at most ``options.pgvector.exact_max_rows`` rows match the
        filter (or are in the store); otherwise the HNSW index with ``hnsw.ef_search = max(ef_search,
        k)`` and ``hnsw.iterative_scan = strict_order`` (see the module docstring). ``where`` is
        jsonb containment ``payload @> where`` (GIN-indexed).

        Raises (besides the contract's): StorageError (a raw_filter PostgreSQL rejects),
        BackendUnavailable.
        """
        params: list[Any]
        if raw_filter is not None:
            cond, params, filtered = raw_filter, [], True
        else:
            (cond, params), filtered = self._filter(w), bool(w)
        opts = self._b.options

        def go(conn: psycopg.Connection) -> list[ScoredPoint]:
            meta = self._require(conn)
            distance = meta.distance
            q = prepare_query(check_vector_size(vector, meta.size), distance)
            op = sql.SQL(_OPS[distance][0])
            exact = meta.size > HNSW_MAX_DIM or self._candidates(conn, cond, params, filtered) <= opts.exact_max_rows
            cols = sql.SQL("pid, payload") if with_payload else sql.SQL("pid, NULL")
            order: sql.Composable
            if exact:
                conn.execute("SELECT set_config('enable_indexscan', 'off', true)")
                order = sql.SQL("d, seq")
            else:
                conn.execute(
                    "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'strict_order', true)",
                    (str(min(1000, max(opts.ef_search, k))),),
                )
                order = sql.SQL("embedding {} %s").format(op)
            query = sql.SQL("SELECT {}, embedding {} %s AS d FROM {} WHERE {} ORDER BY {} LIMIT %s").format(
                cols, op, self._t(), cond, order
            )
            qparams = [q, *params] + ([] if exact else [q]) + [k]
            try:
                rows = conn.execute(query, qparams).fetchall()
            except psycopg.errors.UndefinedTable:
                raise StoreNotFound(self.name) from None
            except (
                psycopg.errors.SyntaxError,
                psycopg.errors.UndefinedColumn,
                psycopg.errors.UndefinedFunction,
                psycopg.errors.DatatypeMismatch,
            ) as exc:
                if raw_filter is None:
                    raise
                raise InvalidArgument(f"PostgreSQL rejected the raw_filter: {str(exc).strip()}") from None
            out = []
            for pid, payload, d in rows:
                d = float(d)
                if distance == "cosine":
                    score = clamp_cosine(1.0 - d)
                elif distance == "dot":
                    score = -d
                else:
                    score = d
                if not passes_threshold(score, score_threshold, distance):
                    break  # best first (strict_order for the index too): the rest are worse
                out.append(ScoredPoint(id=_unpid(pid), score=score, payload=payload if with_payload else None))
            return out

        return self._b.run(f"searching store {self.name!r}", go)

    def _scroll(self, w: dict[str, Any] | None, limit: int | None, with_vectors: bool) -> Iterator[Point]:
        """Points in order of last write; a snapshot. Vectors are unit length for cosine."""

        def go(conn: psycopg.Connection) -> list[Point]:
            self._require(conn)
            cond, params = self._filter(w)
            cols = sql.SQL("pid, payload, embedding" if with_vectors else "pid, payload")
            q = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY seq{}").format(
                cols, self._t(), cond, sql.SQL(" LIMIT %s") if limit is not None else sql.SQL("")
            )
            rows = conn.execute(q, params + ([limit] if limit is not None else [])).fetchall()
            return [self._point(r, with_vectors) for r in rows]

        return iter(self._b.run(f"reading store {self.name!r}", go))

    @staticmethod
    def _point(row: tuple, with_vectors: bool) -> Point:
        if with_vectors:
            v = row[2]
            vec = np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)
        else:
            vec = np.zeros(0, dtype=np.float32)
        return Point(id=_unpid(row[0]), vector=vec, payload=row[1])

    def _retrieve(self, wanted: list[PointId], with_vectors: bool) -> list[Point]:

        def go(conn: psycopg.Connection) -> list[Point]:
            self._require(conn)
            if not wanted:
                return []
            cols = sql.SQL("pid, payload, embedding" if with_vectors else "pid, payload")
            rows = conn.execute(
                sql.SQL("SELECT {} FROM {} WHERE pid = ANY(%s::text[])").format(cols, self._t()),
                ([_pid(i) for i in wanted],),
            ).fetchall()
            by_pid = {r[0]: r for r in rows}
            return [self._point(by_pid[p], with_vectors) for p in map(_pid, wanted) if p in by_pid]

        return self._b.run(f"reading store {self.name!r}", go)

    def _facet(self, key: str, w: dict[str, Any] | None) -> dict[Any, int]:
        """Count points per scalar value of payload field ``key`` (one ``GROUP BY`` in PostgreSQL)."""
        key = key.replace("\x00", "")

        def go(conn: psycopg.Connection) -> dict[Any, int]:
            self._require(conn)
            cond, params = self._filter(w)
            q = sql.SQL(
                "SELECT payload -> %s, count(*) FROM {} WHERE {} AND payload ? %s"
                " AND jsonb_typeof(payload -> %s) IN ('string', 'number', 'boolean', 'null') GROUP BY 1"
            ).format(self._t(), cond)
            rows = conn.execute(q, [key, *params, key, key]).fetchall()
            counts: dict[Any, int] = {}
            for value, n in rows:
                counts[value] = counts.get(value, 0) + int(n)
            return counts

        return self._b.run(f"reading store {self.name!r}", go)

    def __repr__(self) -> str:
        return f"PgvectorCollection({self.name!r}, table={self.table!r})"
