"""The app's HTTP gate: nothing before sign-in, a Content-Security-Policy on the app's HTML, and the
two session-cookie endpoints -- Starlette middleware and routes handed to ``st.App`` in ``app.py``.

``streamlit run app.py`` finds ``app = st.App(...)`` in ``app.py`` and serves it (Streamlit's public
``st.App``: ``routes=`` are mounted beside Streamlit's own, ``middleware=`` wraps every request the
server gets, its websocket ``/_stcore/stream``, static files and ``/_stcore/upload_file`` included).
So the gate is in front of the very first request of a fresh server: no hook put in later, no page
served without its policy. :class:`HttpGate` answers, before Streamlit sees a request:

* ``/_stcore/upload_file/<session>/...`` (PUT, DELETE) only for a session in :data:`SESSIONS` -- one
  ``app.py`` has let in (signed in, or no password needed) -- otherwise 403 before the body is read;
  and never more than :func:`upload_limit_mb` of the settings (413). Streamlit still hands a session
  its upload URLs (that message has no public hook): the upload itself is what is refused, and the
  uploader shows the refusal.
* every other ``/_stcore`` endpoint but ``health``, ``host-config`` and ``stream`` (what the sign-in
  page loads) refused while a password or accounts are on (``app.py`` says so on each run,
  :func:`set_guarded`; refused until the first run says otherwise) or the visitor is not local;
* a ``Content-Security-Policy`` (and ``X-Content-Type-Options``, ``Referrer-Policy``) on every HTML
  response, and the base-URL script put first into the page's ``<head>``.

Who the visitor is comes from :mod:`knowledge.forwarded` with the settings' ``server.trusted_proxies``:
a request that came through a proxy is never local; ``https`` at a trusted proxy makes the session
cookie ``Secure``. Only public Streamlit API is used here (``st.get_option``, ``st.App``'s arguments).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import math
import re
import secrets
import sys
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import streamlit as st
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from knowledge.access import is_shared
from knowledge.config import Settings, load_settings
from knowledge.errors import ConfigError
from knowledge.forwarded import Network, Peer, scope_peer, trusted_networks

log = logging.getLogger("knowledge.gate")

#: The ``/_stcore`` endpoints anyone may reach: what the sign-in page itself loads.
OPEN_ENDPOINTS = frozenset({"health", "host-config", "stream"})
UPLOAD_ENDPOINT = "upload_file"
#: What a refused upload is told.
SIGN_IN_FIRST = "Sign in first: this session may not upload until it has signed in."
#: Bytes a multipart upload may carry beyond the file itself (Streamlit allows the same).
MULTIPART_OVERHEAD = 1024 * 1024

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def upload_limit_mb(settings: Settings) -> int:
    """The ceiling for one upload, MiB: the larger of ``ingest.max_file_mb`` (a file to ingest) and
    ``app.max_bundle_mb`` (a ``.kb`` bundle to import), rounded up; a MiB is larger than the
    settings' 10^6-byte MB, so nothing they allow is cut."""
    return max(1, math.ceil(max(settings.ingest.max_file_mb, settings.app.max_bundle_mb)))


class Sessions:
    """The ids of the browser sessions ``app.py`` has let in. Thread-safe (script threads add and
    remove, the server's event loop reads)."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def add(self, session_id: str) -> None:
        with self._lock:
            self._ids.add(session_id)

    def discard(self, session_id: str) -> None:
        with self._lock:
            self._ids.discard(session_id)

    def __contains__(self, session_id: object) -> bool:
        with self._lock:
            return session_id in self._ids

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)


class GateState:
    """What the script runs tell the gate of this process: whether a visitor must sign in
    (``guarded``: a password or accounts; ``True`` until the first run says otherwise)."""

    def __init__(self) -> None:
        self.guarded = True


#: The process's sessions let in, and the gate's state (one server per process).
SESSIONS = Sessions()
STATE = GateState()
_THIS = sys.modules[__name__]


def _live() -> Any:
    """This module as the script runs of ``app.py`` see it now. When a file of the app changes,
    Streamlit unloads every local module and the next run imports them again, with fresh
    :data:`SESSIONS`, :data:`STATE` and :data:`HANDOFFS`; the server's middleware and routes were
    built from the first import. So they read these three through the latest import (a session let
    in before the change is let in again by its next run)."""
    return sys.modules.get(__name__, _THIS)


def let_in(session_id: str) -> None:
    """The session may upload (it passed app.py's gate)."""
    SESSIONS.add(session_id)


def shut_out(session_id: str) -> None:
    """The session may no longer upload (it logged out, or is not signed in)."""
    SESSIONS.discard(session_id)


def set_guarded(guarded: bool) -> None:
    """Whether a visitor signs in before anything is served (a password or accounts): the gate then
    refuses every ``/_stcore`` endpoint the sign-in page does not need."""
    STATE.guarded = guarded


def base_path() -> str:
    """``server.baseUrlPath`` without its slashes (``""``: the server's root)."""
    return str(st.get_option("server.baseUrlPath") or "").strip("/")


class _Settings:
    """The settings the gate reads in the server's event loop, loaded once on first use: the trusted
    proxies and the upload ceiling. Settings that cannot be read trust no proxy and refuse every
    upload (``app.py`` says why on every page)."""

    def __init__(self) -> None:
        self._loaded: tuple[tuple[Network, ...], int] | None = None
        self._lock = threading.Lock()

    def get(self) -> tuple[tuple[Network, ...], int]:
        with self._lock:
            if self._loaded is None:
                try:
                    settings = load_settings()
                    self._loaded = trusted_networks(settings.server.trusted_proxies), upload_limit_mb(settings)
                    ceiling = int(st.get_option("server.maxUploadSize") or 0)
                    if ceiling < self._loaded[1]:
                        log.warning(
                            "server.maxUploadSize (%s MiB, .streamlit/config.toml) is below the settings'"
                            " upload limit (%s MiB): Streamlit refuses uploads above it.",
                            ceiling,
                            self._loaded[1],
                        )
                except (ConfigError, ValueError) as exc:
                    log.warning("The gate cannot read the settings (%s): no proxy trusted, no upload.", exc)
                    self._loaded = (), 0
            return self._loaded


SETTINGS = _Settings()


def visitor(scope: Scope, trusted: tuple[Network, ...] | None = None) -> Peer:
    """Who sent this request (:func:`knowledge.forwarded.scope_peer` with ``server.trusted_proxies``)."""
    return scope_peer(scope, SETTINGS.get()[0] if trusted is None else trusted)


def shared_for(peer: Peer) -> bool:
    """Whether the app is shared for this visitor: it listens beyond loopback, the visitor is on
    another host, or the visitor came through a proxy (never the local admin)."""
    return peer.proxied or is_shared(st.get_option("server.address"), peer.address)


# -- the Content-Security-Policy -------------------------------------------------------------------
def _inline_script_hashes() -> list[str]:
    """CSP hashes of the inline scripts of Streamlit's index.html (one line, ``window.prerenderReady``)."""
    index = Path(st.__file__).parent / "static" / "index.html"
    try:
        html = index.read_text(encoding="utf-8")
    except OSError:
        return []
    found = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", html, flags=re.DOTALL)
    return [_script_hash(s) for s in found]


_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$")


def base_url_script(base: str) -> str:
    """The inline script put first into the app's HTML: ``window.__streamlit.BACKEND_BASE_URL`` names
    the server's root (``/`` or ``/<server.baseUrlPath>``). Without it, Streamlit's page guesses its
    server from the address, so a deep link such as ``/stores`` first asks ``/stores/_stcore/health``
    and ``/stores/_stcore/host-config`` (two 404s) before ``/_stcore/...``; with it, only the root."""
    root = f"/{base}/" if base else "/"
    return (
        f"window.__streamlit=Object.assign({{}},window.__streamlit,{{BACKEND_BASE_URL:location.origin+{root!r}}});"
    ).replace("'", '"')


def _script_hash(script: str) -> str:
    return f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"


def content_security_policy(host: str | None = None, base: str = "") -> str:
    """The app's CSP: scripts, styles and fonts from the app only (Streamlit's CSS-in-JS needs inline
    styles), images from the app, ``data:`` and ``blob:``, connections to the app's own origin only
    (its websocket on ``host`` named explicitly for browsers before CSP 3), no plugins, no framing by
    other sites."""
    connect = "'self'"
    if host and _HOST.match(host):
        connect += f" ws://{host} wss://{host}"
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self' " + " ".join([*_SCRIPT_HASHES, _script_hash(base_url_script(base))]),
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "media-src 'self' data: blob:",
            "worker-src 'self' blob:",
            f"connect-src {connect}",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'self'",
        ]
    )


_SCRIPT_HASHES = _inline_script_hashes()


def with_base_url_script(html: bytes, base: str) -> bytes:
    """``html`` with :func:`base_url_script` as the first element of its ``<head>`` (unchanged when it
    has none, e.g. an empty 304 body)."""
    head = re.search(rb"<head[^>]*>", html)
    if head is None:
        return html
    script = f"<script>{base_url_script(base)}</script>".encode()
    return html[: head.end()] + script + html[head.end() :]


# -- the session cookie ----------------------------------------------------------------------------
#: The cookie that keeps an account's app session across reloads and tabs: the session's token,
#: ``HttpOnly`` (no script reads it), ``SameSite=Strict``, ``Secure`` over HTTPS (directly, or at a
#: trusted proxy), for the session's lifetime. ``app.py`` reads it from the websocket's request
#: (``st.context.cookies``).
SESSION_COOKIE = "knowledge_session"
#: Our two HTTP endpoints beside Streamlit's (under ``server.baseUrlPath``): ``session?code=`` turns a
#: one-time code into the cookie, ``sign-out`` clears it; both answer with a redirect into the app.
COOKIE_ENDPOINTS = ("_knowledge/session", "_knowledge/sign-out")
#: Where a cookie endpoint may send the browser back to: an app path, and its query (a deep link's
#: parameters, the viewer's ``?store=…&file=…``) of URL-safe characters only (no CR, LF, quote, ``#``).
_NEXT = re.compile(r"/[A-Za-z0-9_\-/]*(\?[A-Za-z0-9_\-.~%+=&]*)?")


class Handoffs:
    """One-time codes a signed-in script run hands the browser to fetch its cookie with (a script run
    speaks over the websocket and cannot set a cookie itself). A code works once, within
    :attr:`TTL` seconds, in this process. Thread-safe."""

    TTL = 60.0

    def __init__(self) -> None:
        self._codes: dict[str, tuple[str, int, float]] = {}
        self._lock = threading.Lock()

    def issue(self, token: str, max_age: int) -> str:
        """A code for the cookie holding ``token`` for ``max_age`` seconds."""
        code = secrets.token_urlsafe(24)
        now = time.monotonic()
        with self._lock:
            self._codes = {c: v for c, v in self._codes.items() if v[2] > now}
            self._codes[code] = (token, max_age, now + self.TTL)
        return code

    def redeem(self, code: str) -> tuple[str, int] | None:
        """``(token, max_age)`` of an unused, unexpired ``code``; the code is gone either way."""
        with self._lock:
            found = self._codes.pop(code, None)
        if found is None or found[2] <= time.monotonic():
            return None
        return found[0], found[1]


HANDOFFS = Handoffs()


def safe_next(next_path: str | None) -> str:
    """``next_path`` when it is an app path with a URL-safe query (not ``//host``), else ``/``."""
    return next_path if next_path and _NEXT.fullmatch(next_path) and not next_path.startswith("//") else "/"


def cookie_url(code: str | None, next_path: str = "/") -> str:
    """Where the browser goes to get (``code``) or clear (``None``) the session cookie, coming back
    to ``next_path`` (an app path with its URL-encoded query, ``/view?store=a+b&file=f``; anything
    else is ``/``)."""
    base = base_path()
    prefix = f"/{base}/" if base else "/"
    query = urllib.parse.urlencode({"code": code, "next": safe_next(next_path)} if code else {"next": safe_next(next_path)})
    return f"{prefix}{COOKIE_ENDPOINTS[0] if code else COOKIE_ENDPOINTS[1]}?{query}"


def cookie_answer(query: str, secure: bool, set_cookie: bool, base: str = "") -> Response:
    """The redirect of a cookie endpoint: back into the app (the ``next`` of ``query``), setting the
    cookie of the ``code`` in ``query`` (``set_cookie``, a valid unused code) or clearing it."""
    params = urllib.parse.parse_qs(query)
    nxt = safe_next((params.get("next") or ["/"])[0])
    path = f"/{base}" if base else "/"
    flags = f"; Path={path}; HttpOnly; SameSite=Strict{'; Secure' if secure else ''}"
    cookie = f"{SESSION_COOKIE}=; Max-Age=0{flags}"
    if set_cookie:
        found = _live().HANDOFFS.redeem((params.get("code") or [""])[0])
        if found is not None:
            cookie = f"{SESSION_COOKIE}={found[0]}; Max-Age={found[1]}{flags}"
    location = (f"/{base}" if base else "") + nxt
    return Response(status_code=303, headers={"location": location, "set-cookie": cookie, "cache-control": "no-store"})


async def _session_endpoint(request: Request) -> Response:
    return cookie_answer(request.url.query, visitor(request.scope).secure, True, base_path())


async def _sign_out_endpoint(request: Request) -> Response:
    return cookie_answer(request.url.query, visitor(request.scope).secure, False, base_path())


def routes() -> list[BaseRoute]:
    """The cookie endpoints (:data:`COOKIE_ENDPOINTS`) as routes for ``st.App(routes=...)``, under
    ``server.baseUrlPath``."""
    base = base_path()
    prefix = f"/{base}/" if base else "/"
    return [
        Route(prefix + COOKIE_ENDPOINTS[0], _session_endpoint, methods=["GET"]),
        Route(prefix + COOKIE_ENDPOINTS[1], _sign_out_endpoint, methods=["GET"]),
    ]


def middleware() -> list[Middleware]:
    """The gate as middleware for ``st.App(middleware=...)``: in front of every request."""
    return [Middleware(HttpGate)]


# -- the middleware --------------------------------------------------------------------------------
class _TooLarge(Exception):
    pass


class HttpGate:
    """Pure ASGI middleware in front of Streamlit's server (see the module docstring).

    Args:
        app: the ASGI app guarded (Streamlit's middleware stack and routes, under ``st.App``).
        trusted: the trusted proxies' networks; ``None``: the settings' ``server.trusted_proxies``.
        upload_mb: the ceiling of one upload in MiB; ``None``: :func:`upload_limit_mb` of the settings.
    """

    def __init__(self, app: ASGIApp, trusted: tuple[Network, ...] | None = None, upload_mb: int | None = None) -> None:
        self.app = app
        self._trusted = trusted
        self._upload_mb = upload_mb

    @property
    def trusted(self) -> tuple[Network, ...]:
        return SETTINGS.get()[0] if self._trusted is None else self._trusted

    @property
    def upload_bytes(self) -> int:
        mb = SETTINGS.get()[1] if self._upload_mb is None else self._upload_mb
        return mb * 1024 * 1024

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is not None:
            return await _refuse(scope, send, 403, refusal)
        if scope["type"] == "websocket":
            return await self.app(scope, receive, send)
        if self._is_upload(scope):
            return await self._upload(scope, receive, send)
        base = base_path()
        request_headers = dict(scope.get("headers") or [])
        host = request_headers.get(b"host", b"").decode("latin-1")
        page_load = scope.get("method") == "GET" and b"text/html" in request_headers.get(b"accept", b"")
        if page_load:
            # a page load: its HTML uncompressed (it is small), so the base-URL script can go in
            scope = dict(scope, headers=[(k, v) for k, v in scope.get("headers") or [] if k.lower() != b"accept-encoding"])
        html: dict[str, Any] = {}

        async def send_with_csp(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                if b"x-content-type-options" not in present:
                    headers.append((b"x-content-type-options", b"nosniff"))
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if ctype.lower().startswith(b"text/html"):
                    headers.append((b"content-security-policy", content_security_policy(host, base).encode()))
                    headers.append((b"referrer-policy", b"same-origin"))
                message["headers"] = headers
                if (
                    ctype.lower().startswith(b"text/html")
                    and page_load
                    and not any(k.lower() == b"content-encoding" for k, _ in headers)
                ):
                    html["start"], html["body"] = message, b""
                    return
            elif message["type"] == "http.response.body" and "start" in html:
                html["body"] += message.get("body", b"")
                if message.get("more_body"):
                    return
                body = with_base_url_script(html["body"], base)
                start = html.pop("start")
                start["headers"] = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                start["headers"].append((b"content-length", str(len(body)).encode()))
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, send_with_csp)

    def _core(self, scope: Scope) -> tuple[str, str] | None:
        """``(endpoint, rest)`` of a ``/_stcore/<endpoint>/<rest>`` path, else ``None``."""
        base = base_path()
        core = f"/{base}/_stcore/" if base else "/_stcore/"
        path: str = scope.get("path") or ""
        if not path.startswith(core):
            return None
        endpoint, _, rest = path[len(core) :].partition("/")
        return endpoint, rest

    def _is_upload(self, scope: Scope) -> bool:
        core = self._core(scope)
        return core is not None and core[0] == UPLOAD_ENDPOINT

    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused, or ``None``; the body is never read before this answer."""
        core = self._core(scope)
        if core is None:
            return None
        endpoint, rest = core
        if endpoint in OPEN_ENDPOINTS:
            return None
        if endpoint == UPLOAD_ENDPOINT:
            return None if rest.partition("/")[0] in _live().SESSIONS else SIGN_IN_FIRST
        if _live().STATE.guarded or shared_for(visitor(scope, self.trusted)):
            return f"/_stcore/{endpoint} is not served while the app has a password or is shared."
        return None

    async def _upload(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An upload of a session let in, within the ceiling: refused (413) on its announced length,
        or as soon as more than the ceiling (plus the multipart framing) has arrived."""
        limit = self.upload_bytes
        length = dict(scope.get("headers") or []).get(b"content-length", b"").strip()
        if length.isdigit() and int(length) > limit:
            return await _refuse(scope, send, 413, f"File too large: uploads are limited to {limit // 2**20} MB.")
        seen = 0
        started = False

        async def counted() -> MutableMapping[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit + MULTIPART_OVERHEAD:
                    raise _TooLarge
            return message

        async def watched(message: MutableMapping[str, Any]) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await _refuse(scope, send, 413, f"File too large: uploads are limited to {limit // 2**20} MB.")


async def _refuse(scope: Scope, send: Send, status: int, reason: str) -> None:
    log.warning("Refused %s %s: %s", scope.get("method", "WEBSOCKET"), scope.get("path"), reason)
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = reason.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"x-content-type-options", b"nosniff"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = [
    "COOKIE_ENDPOINTS",
    "HANDOFFS",
    "OPEN_ENDPOINTS",
    "SESSIONS",
    "SESSION_COOKIE",
    "STATE",
    "Handoffs",
    "HttpGate",
    "Sessions",
    "content_security_policy",
    "cookie_answer",
    "cookie_url",
    "let_in",
    "middleware",
    "routes",
    "set_guarded",
    "shared_for",
    "shut_out",
    "upload_limit_mb",
    "visitor",
]
