"""``Idempotency-Key`` on the REST API's POSTs that create records: ``POST /v1/files``,
``POST /v1/vector_stores/{id}/files``, ``POST /v1/vector_stores/{id}/file_batches`` and (ours)
``POST /v1/vector_stores/{id}/web_pages``.

As Stripe's API does (https://docs.stripe.com/idempotency) and the IETF draft
*The Idempotency-Key HTTP Header Field* (draft-ietf-httpapi-idempotency-key-header) describes:

* the key is the client's (a UUID v4 is the usual choice), 1 to 255 printable ASCII characters
  (:data:`MAX_KEY`, Stripe's limit), scoped to the caller: the account of the request's key once
  accounts exist, else the one tenant; kept :data:`TTL` (24 hours, Stripe's) in the catalog
  (:mod:`knowledge.catalog.idempotency`), so every API process on one catalog knows it;
* the first request with a key runs; a later one with the same key and the same request (method,
  path and parameters: for an upload the file's name, size, SHA-256 and purpose, for JSON the
  parsed body) answers the first one's status and body again, with ``Idempotent-Replayed: true``
  (Stripe's header) -- nothing is created twice;
* the same key with a different request: 422 ``idempotency_key_reused`` (the draft's status; a
  client bug, never retried);
* a request with a key whose first request is still running (a client that timed out and retried
  at once, or two processes given it at once): 409 ``idempotency_key_in_use`` with ``Retry-After``
  (the draft's answer, which the ``openai`` package retries by itself);
* a first request that failed with a 5xx (an outage, a bug) keeps nothing: a retry runs again. Its
  4xx (a bad request) is kept and replayed, as Stripe does;
* an unfinished first request older than :data:`LEASE` (its process died) no longer holds the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from knowledge.catalog import idempotency as keys
from knowledge.errors import KnowledgeError
from knowledge.server.http import ApiError, bad, from_knowledge, in_thread

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
#: How long a key is kept (Stripe: "at least 24 hours old" keys may be removed).
TTL = timedelta(hours=24)
#: How long an unfinished request holds its key: past that its process is taken as dead.
LEASE = timedelta(minutes=10)
#: The longest key, in characters (Stripe's limit).
MAX_KEY = 255
#: Seconds a client is asked to wait before retrying a request whose key is in use.
RETRY_AFTER = "1"
#: The response headers kept and replayed (besides the body and status).
KEPT_HEADERS = ("content-type", "openai-poll-after-ms")


def fingerprint(method: str, path: str, params: Any) -> str:
    """The SHA-256 of a request's method, path and parameters (JSON, keys sorted): two requests
    with the same fingerprint are the same request."""
    text = json.dumps([method.upper(), path, params], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def key_of(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` (``None`` without one).

    Raises:
        ApiError: 400, an empty key, one longer than :data:`MAX_KEY` or with characters outside printable ASCII.
    """
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not key or len(key) > MAX_KEY or not all(0x20 < ord(c) < 0x7F for c in key):
        raise bad(
            f"The {HEADER} header must be 1 to {MAX_KEY} printable ASCII characters without spaces"
            " (a UUID is the usual choice).",
            HEADER,
        )
    return key


def owner_of(request: Request) -> str:
    """Whose keys these are: the account of the request's key, else ``""`` (one tenant)."""
    actor = getattr(request.state, "actor", None)
    return "" if actor is None else f"user:{actor.username}"


async def once(request: Request, catalog: Any, params: Any, run: Callable[[], Awaitable[Response]]) -> Response:
    """``await run()`` -- the route's work -- once per ``Idempotency-Key`` (see the module
    docstring); without the header, simply ``await run()``. ``params``: the request's parameters
    as JSON values (what makes two requests the same one).

    Raises:
        ApiError: 400 for a bad key; 422 for a key used with another request. (A key in use is
            answered 409 with ``Retry-After``.)
    """
    key = key_of(request)
    if key is None:
        return await run()
    owner = owner_of(request)
    claim = await in_thread(
        lambda: keys.claim(catalog, owner, key, fingerprint(request.method, request.url.path, params), ttl=TTL, lease=LEASE)
    )
    if claim.state == "mismatch":
        raise ApiError(
            422,
            f"This {HEADER} was used for a different request (another method, path, file or"
            " body) in the last 24 hours; use a new key for a new request.",
            param=HEADER,
            code="idempotency_key_reused",
        )
    if claim.state == "in_flight":
        busy = ApiError(
            409,
            f"A request with this {HEADER} is still being processed; retry it in a moment to get its result.",
            param=HEADER,
            code="idempotency_key_in_use",
        ).response()
        busy.headers["Retry-After"] = RETRY_AFTER
        return busy
    if claim.state == "replay":
        headers = {**(claim.headers or {}), REPLAYED: "true"}
        return Response((claim.body or "").encode("utf-8"), status_code=claim.status or 200, headers=headers)
    try:
        try:
            response = await run()
        except ApiError as exc:
            response = exc.response()
        except KnowledgeError as exc:
            response = from_knowledge(exc).response()
    except BaseException:  # a bug or a stop: nothing kept, the retry runs again
        await in_thread(keys.release, catalog, owner, key, claim.token)
        raise
    body = getattr(response, "body", None)
    if response.status_code >= 500 or not isinstance(body, bytes):  # an outage: the retry runs again
        await in_thread(keys.release, catalog, owner, key, claim.token)
        return response
    kept = {k: v for k, v in response.headers.items() if k.lower() in KEPT_HEADERS}
    try:
        await in_thread(
            keys.finish, catalog, owner, key, claim.token, response.status_code, body.decode("utf-8", "replace"), kept
        )
    except KnowledgeError:  # the work is done: answer it; a retry meanwhile hears 409 until the lease ends
        log.warning(
            "the response to %s %s could not be kept for its %s", request.method, request.url.path, HEADER, exc_info=True
        )
    return response


__all__ = [
    "HEADER",
    "KEPT_HEADERS",
    "LEASE",
    "MAX_KEY",
    "REPLAYED",
    "RETRY_AFTER",
    "TTL",
    "fingerprint",
    "key_of",
    "once",
    "owner_of",
]
