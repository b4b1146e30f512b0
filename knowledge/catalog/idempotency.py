"""The REST API's idempotency keys (migration 13, ``api_idempotency``): one row per caller and key,
shared by every API process on the catalog.

:func:`claim` is the only way in: it takes the key for one request atomically on either engine (an
``INSERT ... ON CONFLICT DO NOTHING`` on the primary key ``(owner, idem_key)``, then the row read
back: the request whose random ``token`` is in the row runs, every other one is told what the row
holds), so two processes given the same key at once never both run the request. The runner then
:func:`finish` es the row with its response, or :func:`release` s it (the request did not run to an
answer worth keeping: the next retry runs it again). A row older than its time to live is gone for
every purpose (the key may be used again), as is an unfinished claim older than its lease (the
process running it died).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from knowledge.catalog.schema import CatalogCursor

State = Literal["run", "replay", "mismatch", "in_flight"]


class _Catalog(Protocol):
    def cursor(self) -> Any: ...


@dataclass(frozen=True)
class Claim:
    """What :func:`claim` found for a request: ``state`` is ``run`` (this request holds the key:
    run it, then :func:`finish` or :func:`release` with ``token``), ``replay`` (the key's first
    request ended: ``status``, ``body``, ``headers`` are its response), ``mismatch`` (the key was
    used for a different request) or ``in_flight`` (the key's first request is still running)."""

    state: State
    token: str = ""
    status: int | None = None
    body: str | None = None
    headers: dict[str, str] | None = None
    created: datetime | None = None


def claim(
    catalog: _Catalog,
    owner: str,
    key: str,
    fingerprint: str,
    *,
    ttl: timedelta,
    lease: timedelta,
    now: datetime | None = None,
) -> Claim:
    """Take ``key`` of ``owner`` for a request whose parameters hash to ``fingerprint``, or say why
    not. ``ttl``: how long a key is kept; ``lease``: how long an unfinished claim is trusted (after
    that its process is taken as dead and the key is taken over). Atomic across processes."""
    now = now or datetime.now(UTC)
    token = secrets.token_hex(16)
    with catalog.cursor() as cur:
        cur.execute("DELETE FROM api_idempotency WHERE created < ?", [now - ttl])  # expired keys, anyone's
        # an unfinished claim past its lease: its process died; the first to update it takes it over
        cur.execute(
            "UPDATE api_idempotency SET token = ?, fingerprint = ?, created = ?, status = NULL, body = NULL,"
            " headers = NULL WHERE owner = ? AND idem_key = ? AND status IS NULL AND created < ?",
            [token, fingerprint, now, owner, key, now - lease],
        )
        cur.execute(
            "INSERT INTO api_idempotency (owner, idem_key, fingerprint, token, created)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [owner, key, fingerprint, token, now],
        )
        row = _row(cur, owner, key)
    if row is None:  # deleted between the statements (expired meanwhile): cannot happen within a ttl
        return Claim("in_flight")
    fp, held, status, body, headers, created = row
    if held == token:
        return Claim("run", token=token, created=created)
    if fp != fingerprint:
        return Claim("mismatch", created=created)
    if status is None:
        return Claim("in_flight", created=created)
    return Claim(
        "replay",
        status=int(status),
        body=body,
        created=created,
        headers=dict(json.loads(headers) if isinstance(headers, str) else headers or {}),
    )


def _row(cur: CatalogCursor, owner: str, key: str) -> tuple | None:
    return cur.execute(
        "SELECT fingerprint, token, status, body, headers, created FROM api_idempotency WHERE owner = ? AND idem_key = ?",
        [owner, key],
    ).fetchone()


def finish(catalog: _Catalog, owner: str, key: str, token: str, status: int, body: str, headers: dict[str, str]) -> None:
    """Keep the response of the request holding ``key`` (by its ``token``): later requests with the
    key replay it."""
    with catalog.cursor() as cur:
        cur.execute(
            "UPDATE api_idempotency SET status = ?, body = ?, headers = ? WHERE owner = ? AND idem_key = ? AND token = ?",
            [status, body, json.dumps(headers), owner, key, token],
        )


def release(catalog: _Catalog, owner: str, key: str, token: str) -> None:
    """Let go of ``key`` without a response (the request failed before an answer worth keeping): the
    next request with it runs."""
    with catalog.cursor() as cur:
        cur.execute("DELETE FROM api_idempotency WHERE owner = ? AND idem_key = ? AND token = ?", [owner, key, token])


__all__ = ["Claim", "State", "claim", "finish", "release"]
