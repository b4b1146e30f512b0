"""The plumbing every route module shares: OpenAI's error body, reading and checking a request,
cursor pages, and the answers a client polls.

* :class:`ApiError` is answered as ``{"error": {"message", "type", "param", "code"}}``;
  :func:`bad` (400), :func:`not_found` (404), :func:`unavailable` (503 with ``Retry-After``: the
  catalog, the file store or the vector backend cannot be reached now) and :func:`from_knowledge` (a
  service error mapped by its class) make one.
* :class:`JsonRoute` checks a JSON body's depth (:func:`parse_json`) before FastAPI parses it into
  the route's model (:mod:`knowledge.server.bodies`: unknown fields refused, as OpenAI does);
  :func:`validation_error` words a refused body as OpenAI does; :func:`check_name` checks a store
  name; each raises :class:`ApiError`.
* :func:`page` is OpenAI's cursor page; :func:`polled` tells the ``openai`` package's
  ``*_and_poll`` helpers to poll again; :func:`in_thread` runs blocking service calls off the loop.
* :func:`check_bind` refuses a non-loopback bind without an API key or accounts (the REST API and MCP
  over HTTP).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from knowledge.access import is_loopback
from knowledge.chat.service import AttachFailed
from knowledge.errors import (
    AuthenticationFailed,
    BackendUnavailable,
    ConfigError,
    FileTooLarge,
    InvalidArgument,
    KnowledgeError,
    PermissionDenied,
    QuotaExceeded,
    RateLimited,
)
from knowledge.llm.config import LlmUnavailable

T = TypeVar("T")
POLL_AFTER_MS = "200"
#: Seconds a client is told to wait (``Retry-After``) while a backend cannot be reached: about one
#: ``catalog.connect_timeout`` (5 s by default), the time the pools take to try the server again.
RETRY_AFTER_SECONDS = 5


# -- errors ------------------------------------------------------------------------------------------
class ApiError(Exception):
    """An error answered with OpenAI's body: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}},
            status_code=self.status,
            headers=self.headers,
        )


def not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, f"No {what} found with id {ident!r}.", code="not_found")


def bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def unavailable_message(reason: str) -> str:
    """What a client reads while a backend cannot be reached: ``reason`` (what is unreachable, in
    words) and when to try again."""
    return f"{reason.rstrip()} Unavailable until it is back: try again in {RETRY_AFTER_SECONDS} seconds."


def unavailable(reason: str) -> ApiError:
    """503 ``backend_unavailable`` with ``Retry-After:`` :data:`RETRY_AFTER_SECONDS`: the catalog, the
    file store or the vector backend cannot be reached now (``reason`` says which, in words)."""
    return ApiError(
        503,
        unavailable_message(reason),
        type="server_error",
        code="backend_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def from_knowledge(exc: KnowledgeError) -> ApiError:
    """The answer to a service error, by its class: 413, 404 (also a store the caller may not see),
    403 ``permission_denied`` (a store they see but may not change), 401 ``invalid_api_key``, 400,
    503 (a model; a backend that cannot be reached now, with ``Retry-After``), else 500."""
    if isinstance(exc, QuotaExceeded):  # a storage quota: the limit and the use in the words
        return ApiError(403, str(exc), code="quota_exceeded")
    if isinstance(exc, RateLimited):
        return ApiError(429, str(exc), code="rate_limit_exceeded", headers={"Retry-After": str(max(1, exc.retry_after))})
    if isinstance(exc, PermissionDenied):
        return ApiError(403, str(exc), code="permission_denied")
    if isinstance(exc, AuthenticationFailed):
        return ApiError(401, str(exc), code="invalid_api_key")
    if isinstance(exc, FileTooLarge):
        return ApiError(413, str(exc), code="file_too_large")
    param = getattr(exc, "param", None)  # the argument it is about (InvalidArgument's), when named
    if isinstance(exc, LookupError):  # a store, file, session, config, account, group or key that does not exist
        return ApiError(404, str(exc), param=param, code="not_found")
    if isinstance(exc, (InvalidArgument, ConfigError, AttachFailed)):
        return ApiError(400, str(exc), param=param)
    if isinstance(exc, LlmUnavailable):  # the model behind a CHAT config cannot be reached or used
        return ApiError(503, str(exc), type="server_error", code="model_unavailable")
    if isinstance(exc, BackendUnavailable):  # the catalog, file store or vector backend is down or restarting
        return unavailable(str(exc))
    return ApiError(500, str(exc), type="server_error")


def check_bind(host: str, api_key: str | None, accounts: bool = False) -> None:
    """Refuse to serve anything but loopback without an API key. With ``accounts`` (user accounts
    exist) every request needs a per-user key anyway, so no shared key is needed.

    Raises:
        ConfigError: ``host`` is not a loopback address, ``api_key`` is empty and there are no accounts.
    """
    if not is_loopback(host) and not api_key and not accounts:
        raise ConfigError(
            f"Serving on {host or 'every interface'} makes the stores reachable from other"
            " computers: set KNOWLEDGE_API_KEY (clients send it as the bearer token), create user"
            " accounts (each client then sends its user's key), or keep the default --host"
            " 127.0.0.1."
        )


# -- reading a request -----------------------------------------------------------------------------------
def json_depth_ok(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests at most ``limit`` levels of lists and objects (iterative)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth > limit:
                return False
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


def parse_json(raw: bytes, limit: int = 64) -> Any:
    """``raw`` parsed as JSON.

    Raises:
        ValueError: not JSON, or nested deeper than ``limit`` levels (with the reason).
    """
    try:
        value = json.loads(raw)
    except RecursionError:
        raise ValueError(f"The request body nests deeper than {limit} levels.") from None
    except ValueError:
        raise ValueError("The request body is not valid JSON.") from None
    if not json_depth_ok(value, limit):
        raise ValueError(f"The request body nests deeper than {limit} levels.")
    return value


class JsonRoute(APIRoute):
    """A route whose JSON body is checked for depth (:func:`parse_json`: at most 64 levels) before
    FastAPI parses it into the route's pydantic model: too deep a body is a 400 saying so, never a
    parser's recursion error. The body read here is the one FastAPI reads next (Starlette keeps it)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            raw = await request.body()
            if raw:
                try:
                    parse_json(raw)
                except ValueError as exc:
                    raise bad(str(exc)) from None
            return await handler(request)

        return checked


def validation_error(errors: Sequence[Mapping[str, Any]], skip: int = 1) -> ApiError:
    """The 400 for a body a pydantic model refused (:mod:`knowledge.server.bodies`), in OpenAI's
    shape, from one of ``errors`` (pydantic's, each ``{"type", "loc", "msg"}``: an unknown field's,
    else the first; the first ``skip`` parts of ``loc`` name the request part, ``body``): ``param``
    the field's dotted path and
    a message naming it -- ``Unrecognized request argument supplied: filter.`` for an unknown field
    (OpenAI's words), ``X must be an object.`` for a field that must be one, a check's own sentence,
    else ``X: <pydantic's message>``."""
    # an unknown field first: a misspelt name explains the "missing" error of the right one
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0] if errors else {})
    param = ".".join(str(p) for p in tuple(first.get("loc", ()))[skip:]) or None
    kind, msg = first.get("type"), str(first.get("msg", "invalid request"))
    if kind == "extra_forbidden":
        return bad(f"Unrecognized request argument supplied: {param}.", param)
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return bad(f"{param} must be an object." if param else "The request body must be a JSON object.", param)
    if kind == "value_error":  # a check's own sentence, which names the field
        return bad(msg.removeprefix("Value error, "), param)
    if kind == "missing" and param is None:
        return bad("The request needs a JSON body.")
    return bad(f"{param or 'request'}: {msg}", param)


def control_char(text: str) -> str | None:
    """A description of the first control character in ``text`` (``"U+0000 at position 3"``), or
    ``None``: C0/C1 controls, line and paragraph separators, and unpaired surrogates."""
    for i, ch in enumerate(text):
        if unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp"):
            return f"U+{ord(ch):04X} at position {i + 1}"
    return None


def check_name(name: Any, param: str = "name") -> str:
    """A store name as the API takes it: a non-blank string without control characters."""
    if not isinstance(name, str) or not name.strip():
        raise bad(f"{param} must be a non-blank string.", param)
    found = control_char(name)
    if found:
        raise bad(f"{param} must not contain control characters ({found}).", param)
    return name


# -- answering -----------------------------------------------------------------------------------------
async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a worker thread (the service layer blocks; the event loop must not)."""
    return await run_in_threadpool(fn, *args)


def page(
    items: list[dict[str, Any]], limit: Any, after: str | None, before: str | None, order: str | None
) -> dict[str, Any]:
    """OpenAI's cursor page: ``{"object": "list", "data", "first_id", "last_id", "has_more"}``,
    ordered by ``created_at`` (``desc`` by default) then id; ``after``/``before`` are item ids."""
    if order not in (None, "asc", "desc"):
        raise bad(f"order must be 'asc' or 'desc', got {order!r}.", "order")
    try:
        n = 20 if limit is None else int(limit)
    except (TypeError, ValueError):
        raise bad(f"limit must be an integer between 1 and 100, got {limit!r}.", "limit") from None
    if not 1 <= n <= 100:
        raise bad(f"limit must be between 1 and 100, got {n}.", "limit")
    desc = order != "asc"
    items = sorted(items, key=lambda o: (o.get("created_at", 0), o["id"]), reverse=desc)
    ids = [o["id"] for o in items]
    if after is not None:
        if after not in ids:
            raise bad(f"after: no object with id {after!r} in this list.", "after")
        items = items[ids.index(after) + 1 :]
    if before is not None:
        ids = [o["id"] for o in items]
        if before not in ids:
            raise bad(f"before: no object with id {before!r} in this list.", "before")
        items = items[: ids.index(before)][-n:]
    data = items[:n]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(items) > n,
    }


def polled(obj: dict[str, Any]) -> JSONResponse:
    """A JSON response telling the ``openai`` package's ``*_and_poll`` helpers to poll again soon."""
    return JSONResponse(obj, headers={"openai-poll-after-ms": POLL_AFTER_MS})


def attachment_header(name: str) -> str:
    """``Content-Disposition: attachment`` for a file called ``name`` (RFC 6266): an ASCII
    ``filename`` (other characters as ``_``) and, when that differs, ``filename*`` in UTF-8 (RFC 5987)."""
    plain = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "_" for c in name) or "file"
    value = f'attachment; filename="{plain}"'
    if plain != name:
        value += "; filename*=UTF-8''" + quote(name.encode("utf-8", "replace"), safe="")
    return value


__all__ = [
    "POLL_AFTER_MS",
    "RETRY_AFTER_SECONDS",
    "ApiError",
    "JsonRoute",
    "attachment_header",
    "bad",
    "check_bind",
    "check_name",
    "control_char",
    "from_knowledge",
    "in_thread",
    "json_depth_ok",
    "not_found",
    "page",
    "parse_json",
    "polled",
    "unavailable",
    "unavailable_message",
    "validation_error",
]
