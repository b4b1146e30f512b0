"""PostgreSQL helpers shared by the parts that talk to a server (the catalog, the file store, the
pgvector backend): how to name a server in a message without its password, and a pooled connection
that does not wait out the pool's reconnection back-off once the server is back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict


def describe_target(conninfo: str) -> str:
    """``host:port/database`` of the connection string or URL ``conninfo``, without user or
    password (``"the configured server"`` when it cannot be parsed)."""
    try:
        parts = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "the configured server"
    host = parts.get("host") or "localhost"
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"{host}{port}/{parts.get('dbname') or parts.get('user') or ''}"


@contextmanager
def pooled_connection(pool: Any, connect: Callable[[], psycopg.Connection]) -> Iterator[psycopg.Connection]:
    """A connection of the ``psycopg_pool`` ``pool`` for the block -- or, when the pool has none
    within its timeout (``PoolTimeout``: it is still in its reconnection back-off after an outage, or
    full), one of ``connect()`` made now, used for this block only and closed after. Either way the
    block's transaction is committed when it ends, rolled back on an exception.

    So the first call after a server came back succeeds although the pool has not reconnected yet;
    while the server is still away, ``connect()``'s error (``psycopg.OperationalError``: "Connection
    refused", a timeout) says why, better than the pool's "couldn't get a connection".
    """
    from psycopg_pool import PoolTimeout  # noqa: PLC0415 - only with a pool

    with ExitStack() as stack:
        try:
            conn = stack.enter_context(pool.connection())
        except PoolTimeout:
            conn = stack.enter_context(connect())
        yield conn
