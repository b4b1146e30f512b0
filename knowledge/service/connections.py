"""PostgreSQL connections: how many this process may open, against what the server allows (issue 39).

Every process of a team (each app, API, MCP server and worker, and a CLI command while it runs)
keeps its own connection pools on the catalog's PostgreSQL: the catalog's (``catalog.pool_max_size``),
the pgvector backend's (``vector_store.options.pgvector.pool_max_size``, when pooled) and the
postgresql file store's (:attr:`~knowledge.filestore.postgresql.PostgresFileStore.pool_max_size`),
each on the server its URL names. N processes may take N times that; PostgreSQL refuses a connection
past ``max_connections`` (less the slots reserved for superusers), and the refused process fails
the request that needed it.

:func:`name_this_process` names the process's connections (libpq's ``PGAPPNAME``:
``knowledge <role> <host>:<pid>``), so the server can count the product's processes
(``pg_stat_activity.application_name``); :func:`check_connections`, at a long-running process's
start, counts them, compares what they may open with what the server allows, and logs a warning in
words when it does not fit.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

from knowledge._pg import describe_target
from knowledge.catalog import Catalog
from knowledge.config import Settings
from knowledge.errors import ConfigError, KnowledgeError
from knowledge.filestore.postgresql import PostgresFileStore, configured_url
from knowledge.vectorstore.pgvector import PgvectorOptions

log = logging.getLogger(__name__)

#: The ``application_name`` prefix of the product's connections.
APP_NAME_PREFIX = "knowledge "
#: PostgreSQL keeps identifiers, ``application_name`` included, to NAMEDATALEN - 1 = 63 bytes.
_NAME_BYTES = 63


@dataclass(frozen=True)
class Pool:
    """One connection pool of this process on the catalog's server: what it is, the setting that
    sizes it (``""``: none, a fixed size), and its largest size (connections)."""

    name: str
    setting: str
    size: int


@dataclass(frozen=True)
class ConnectionBudget:
    """What the catalog's server allows and what the product's processes may take of it.

    Attributes:
        max_connections: the server's ``max_connections``.
        reserved: slots kept for superusers (``superuser_reserved_connections`` plus, on
            PostgreSQL 16 and newer, ``reserved_connections``).
        processes: the product's processes connected now, this one included (counted by
            ``application_name``; processes of a version before this count start are not seen).
        pools: this process's pools on that server.
    """

    max_connections: int
    reserved: int
    processes: int
    pools: tuple[Pool, ...]

    @property
    def per_process(self) -> int:
        """Connections one process like this may hold at once (the sum of its pools' sizes)."""
        return sum(p.size for p in self.pools)

    @property
    def available(self) -> int:
        """Connections the server gives to non-superusers."""
        return max(0, self.max_connections - self.reserved)

    @property
    def needed(self) -> int:
        """What the processes counted may take when each fills its pools."""
        return self.per_process * self.processes

    @property
    def fits(self) -> bool:
        return self.needed <= self.available

    def message(self) -> str:
        """The arithmetic in words (the warning logged when it does not fit)."""
        parts = ", ".join(f"{p.name} {p.size}" + (f" ({p.setting})" if p.setting else "") for p in self.pools)
        room = self.available // self.per_process if self.per_process else 0
        text = (
            f"PostgreSQL allows {self.available} connections to this product (max_connections"
            f" {self.max_connections}, less {self.reserved} reserved for superusers); each process may open"
            f" {self.per_process} ({parts}), and {self.processes} process(es) are connected now, so together"
            f" they may ask for {self.needed}: room for {room} process(es) like this one."
        )
        if self.fits:
            return text
        return (
            text + " A process that finds no free connection fails the request that needed it. Raise"
            " max_connections in postgresql.conf (and restart PostgreSQL), or lower the pools' sizes, or run"
            " fewer processes (docs/team.md, 'Connections')."
        )


def name_this_process(role: str) -> str:
    """Name every later PostgreSQL connection of this process ``knowledge <role> <host>:<pid>``
    (libpq's ``PGAPPNAME``; 63 bytes at most). A name the operator set that is not the product's is
    kept. Returns the name in use."""
    current = os.environ.get("PGAPPNAME")
    if current and not current.startswith(APP_NAME_PREFIX):
        return current
    name = f"{APP_NAME_PREFIX}{role} {socket.gethostname()}:{os.getpid()}"
    name = name.encode()[:_NAME_BYTES].decode(errors="ignore")
    os.environ["PGAPPNAME"] = name  # read by libpq at each connect; a child process renames itself
    return name


def process_pools(settings: Settings) -> tuple[Pool, ...]:
    """This process's connection pools on the catalog's server (none without ``catalog.url``).

    Raises:
        ConfigError: invalid ``vector_store.options.pgvector``.
    """
    url = settings.catalog.url
    if url is None:
        return ()
    server = describe_target(url)
    pools = [Pool("the catalog", "catalog.pool_max_size", settings.catalog.pool_max_size)]
    vs = settings.vector_store
    if vs.backend == "pgvector" and describe_target(vs.url or url) == server:
        try:
            options = PgvectorOptions.model_validate((vs.options or {}).get("pgvector") or {})
        except ValueError as exc:
            raise ConfigError(f"Invalid vector_store.options.pgvector: {exc}") from None
        if options.pool:
            pools.append(Pool("the pgvector store", "vector_store.options.pgvector.pool_max_size", options.pool_max_size))
    if settings.file_store.backend == "postgresql" and describe_target(configured_url(settings) or url) == server:
        pools.append(Pool("the postgresql file store", "", PostgresFileStore.pool_max_size))
    return tuple(pools)


def connection_budget(catalog: Catalog, settings: Settings) -> ConnectionBudget | None:
    """What the catalog's server allows against what the product's processes may take, asked of the
    server now; ``None`` on the embedded catalog.

    Raises:
        BackendUnavailable: the server cannot be reached.
        ConfigError: invalid ``vector_store.options.pgvector``.
    """
    pools = process_pools(settings)
    if not pools or catalog.dialect != "postgresql":
        return None
    with catalog.cursor() as cur:
        row = cur.execute(
            "SELECT current_setting('max_connections')::int,"
            " current_setting('superuser_reserved_connections')::int"
            " + coalesce(current_setting('reserved_connections', true), '0')::int,"
            " (SELECT count(DISTINCT application_name) FROM pg_stat_activity"
            f"  WHERE application_name LIKE '{APP_NAME_PREFIX}%'"
            "   AND application_name <> current_setting('application_name'))"
        ).fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    return ConnectionBudget(max_connections=row[0], reserved=row[1], processes=row[2] + 1, pools=pools)


def check_connections(catalog: Catalog, settings: Settings) -> ConnectionBudget | None:
    """At a long-running process's start: log the budget (INFO), or a warning in words when the
    processes connected may take more connections than the server allows. Never raises: a catalog
    that cannot be read now is logged and skipped (``None``)."""
    try:
        budget = connection_budget(catalog, settings)
    except KnowledgeError as exc:
        log.warning("could not compare PostgreSQL's max_connections with this process's pools: %s", exc)
        return None
    if budget is not None:
        log.log(logging.INFO if budget.fits else logging.WARNING, "%s", budget.message())
    return budget


__all__ = [
    "APP_NAME_PREFIX",
    "ConnectionBudget",
    "Pool",
    "check_connections",
    "connection_budget",
    "name_this_process",
    "process_pools",
]
