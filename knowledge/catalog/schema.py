"""The catalog's schema: numbered migrations, one SQL file each in ``migrations/``, applied in order.

``migrations/NNNN_<owner>.sql`` holds version NNNN (as chroma keeps ``chromadb/migrations/``): the
file name's number is the version, its rest names what the migration adds. :func:`migrate` applies
the versions a database has not reached, each in one transaction, and records them in
``schema_version``. A migration is never edited once released; a change is a new file. The same
files serve DuckDB and PostgreSQL (:func:`knowledge.catalog.dialect.script_for`: blocks marked for
one engine, ``DOUBLE``); on PostgreSQL the caller holds an advisory lock around :func:`migrate`.
"""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Any, Protocol

from knowledge.catalog.dialect import Dialect, script_for
from knowledge.errors import KnowledgeError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def _load() -> list[str]:
    found = sorted(
        (int(m.group(1)), f.read_text(encoding="utf-8"))
        for f in files("knowledge.catalog").joinpath("migrations").iterdir()
        if (m := _NAME.match(f.name))
    )
    if [v for v, _ in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"catalog migrations are not numbered 1..n: {[v for v, _ in found]}")
    return [sql for _, sql in found]


class CatalogCursor(Protocol):
    """What ``catalog.cursor()`` yields on either engine: DuckDB's SQL with ``?`` placeholders
    (:mod:`knowledge.catalog.dialect`); ``execute`` returns the cursor, rows are tuples, JSON
    columns come back as text, timestamps as aware datetimes."""

    def execute(self, query: str, parameters: Any = None, /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


def one_row(cursor: CatalogCursor) -> tuple[Any, ...]:
    """The row of a query that always returns one (an aggregate such as ``count(*)`` or ``max``).

    The result is read to its end: a DuckDB result left open keeps its transaction open, and an
    open transaction on the connection refuses every ``CHECKPOINT`` after another cursor's write
    (backups then failed in a process that had opened an existing catalog).

    Raises:
        KnowledgeError: the query returned no row.
    """
    rows = cursor.fetchall()
    if not rows:
        raise KnowledgeError("The catalog returned no row for a query that always returns one.")
    return tuple(rows[0])


#: The SQL script of each schema version (index 0 is version 1).
MIGRATIONS: list[str] = _load()


def migrate(conn: CatalogCursor, dialect: Dialect = "duckdb") -> None:
    """Bring ``conn``'s database to the newest version, one transaction per version.

    Raises:
        KnowledgeError: the database has a version newer than this program knows.
        duckdb.Error, psycopg.Error: a migration failed (that version is rolled back; earlier ones stay).
    """
    conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    current = one_row(conn.execute("SELECT max(version) FROM schema_version"))[0] or 0
    if current > len(MIGRATIONS):
        raise KnowledgeError(
            f"The catalog has schema version {current}, newer than this program knows"
            f" ({len(MIGRATIONS)}). Upgrade knowledge."
        )
    for version in range(current + 1, len(MIGRATIONS) + 1):
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute(script_for(MIGRATIONS[version - 1], dialect))
            conn.execute("INSERT INTO schema_version VALUES (?)", [version])
            conn.execute("COMMIT")
        except Exception:
            conn.execute("ROLLBACK")
            raise


__all__ = ["MIGRATIONS", "CatalogCursor", "migrate", "one_row"]
