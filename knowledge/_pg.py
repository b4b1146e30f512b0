"""PostgreSQL helpers shared by the parts that talk to a server (the catalog, the file store, the
pgvector backend): how to name a server in a message without its password."""

from __future__ import annotations

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
