"""Per-user API keys for the REST API and the MCP server: made, named, listed with when each was
last used, revoked. A request with a key acts as its user. The catalog keeps each key's SHA-256
digest and last four characters, never the key (it is shown once, when made)."""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from knowledge._names import check_name
from knowledge.errors import AuthenticationFailed, InvalidArgument
from knowledge.people.accounts import Cursors, digest, now
from knowledge.people.records import ApiKey

#: Every key starts with this (``kn-`` then 43 URL-safe characters: 256 random bits), so a leaked
#: key is recognisable by secret scanners.
PREFIX = "kn-"
#: ``last_used`` is written at most this often per key (a busy client does not write on every call).
LAST_USED_EVERY = timedelta(seconds=60)

_COLUMNS = "id, username, name, hint, created, last_used, revoked"


class ApiKeys:
    """The API keys of one catalog. Thread-safe."""

    def __init__(self, catalog: Cursors) -> None:
        self.catalog = catalog

    def create(self, username: str, name: str) -> tuple[ApiKey, str]:
        """A new key for ``username`` named ``name``; returns its record and the key itself.

        Raises:
            InvalidArgument: an empty or bad name.
        """
        label = " ".join((name or "").split())
        if not label or len(label) > 100:
            raise InvalidArgument("Give the key a name of 1 to 100 characters (what uses it).")
        check_name(label, "key name")
        secret = PREFIX + secrets.token_urlsafe(32)
        key = ApiKey("key_" + secrets.token_hex(8), username, label, secret[-4:], now())
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO api_keys (id, username, name, digest, hint, created) VALUES (?, ?, ?, ?, ?, ?)",
                [key.id, key.username, key.name, digest(secret), key.hint, key.created],
            )
        return key, secret

    def list(self, username: str | None = None) -> list[ApiKey]:
        """The keys of ``username`` (``None``: everyone's), newest first, revoked ones too."""
        where, args = ("WHERE username = ?", [username]) if username is not None else ("", [])
        with self.catalog.cursor() as cur:
            rows = cur.execute(f"SELECT {_COLUMNS} FROM api_keys {where} ORDER BY created DESC", args).fetchall()
        return [ApiKey(*r) for r in rows]

    def get(self, key_id: str) -> ApiKey | None:
        with self.catalog.cursor() as cur:
            row = cur.execute(f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", [key_id]).fetchone()
        return ApiKey(*row) if row else None

    def revoke(self, key_id: str) -> bool:
        """Stop key ``key_id`` now (the next request with it is refused). ``False``: no such active key."""
        with self.catalog.cursor() as cur:
            return bool(
                cur.execute(
                    "UPDATE api_keys SET revoked = ? WHERE id = ? AND revoked IS NULL RETURNING id", [now(), key_id]
                ).fetchall()
            )

    def username_of(self, secret: str | None) -> str:
        """The user a request with key ``secret`` acts as; notes the use.

        Raises:
            AuthenticationFailed: no key, an unknown key, or a revoked one.
        """
        if not secret or not secret.startswith(PREFIX):
            raise AuthenticationFailed("A valid API key is required (Authorization: Bearer kn-...).")
        d = digest(secret)
        with self.catalog.cursor() as cur:
            row: Any = cur.execute(
                "SELECT id, username, last_used FROM api_keys WHERE digest = ? AND revoked IS NULL", [d]
            ).fetchone()
            if row is None:
                raise AuthenticationFailed("This API key is not valid (revoked, or mistyped).")
            t = now()
            if row[2] is None or t - row[2] >= LAST_USED_EVERY:
                cur.execute("UPDATE api_keys SET last_used = ? WHERE id = ?", [t, row[0]])
        return row[1]
