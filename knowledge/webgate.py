"""The Streamlit server's gate: nothing before sign-in, and a Content-Security-Policy on the app's HTML.

Streamlit (1.67, served by uvicorn + Starlette; Tornado is gone) accepts an upload from any websocket
session, signed in or not, and answers ``/_stcore/metrics`` to anyone. ``streamlit run app.py`` offers
no hook at process start (only a script defining an ``st.App`` gets middleware), so :func:`install`,
called by ``app.py`` on each run (idempotent), puts three narrow hooks into the running server:

* an ASGI wrapper around the Starlette app's middleware stack: ``/_stcore/upload_file/<session>/...``
  only for a session in :data:`SESSIONS`; every other ``/_stcore`` endpoint but ``health``,
  ``host-config`` and ``stream`` (what the sign-in page loads) refused while a password is set or the
  app is shared; and the CSP header on every ``text/html`` response;
* ``AppSession._handle_file_urls_request``: upload URLs only for a session in :data:`SESSIONS`,
  otherwise a refusal the uploader shows;
* ``AppSession.shutdown``: the session leaves :data:`SESSIONS`.

``app.py`` lets a session in (:func:`let_in`) once it has passed the gate (signed in, or no password
needed) and shuts it out on **Log out**. Until the first run of ``app.py`` in a process the hooks are
not there, so the project's ``.streamlit/config.toml`` sets ``server.maxUploadSize = 0`` (every upload
refused); :func:`install` raises it to :func:`upload_limit_mb` only with the hooks in place.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import logging
import math
import re
import secrets
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from knowledge.access import is_shared
from knowledge.config import Settings
from knowledge.errors import KnowledgeError

log = logging.getLogger(__name__)

#: Streamlit versions (major, minor) whose internals the hooks were written against and tested on.
SUPPORTED_STREAMLIT = {(1, 67)}
#: The ``/_stcore`` endpoints anyone may reach: what the sign-in page itself loads.
OPEN_ENDPOINTS = frozenset({"health", "host-config", "stream"})
UPLOAD_ENDPOINT = "upload_file"

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class GateUnavailable(KnowledgeError):
    """The hooks cannot be put into this Streamlit (an unknown version, or its server not found)."""


def upload_limit_mb(settings: Settings) -> int:
    """Streamlit's ceiling for one upload (``server.maxUploadSize``, MiB): the larger of
    ``ingest.max_file_mb`` (a file to ingest) and ``app.max_bundle_mb`` (a ``.kb`` bundle to import),
    rounded up; a MiB is larger than the settings' 10^6-byte MB, so nothing they allow is cut."""
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


@dataclass
class _State:
    """One per process, kept on Streamlit's ``AppSession`` class so that a re-import of this module
    (Streamlit unloads changed local modules) finds the hooks and sessions already there."""

    sessions: Sessions = field(default_factory=Sessions)
    password_set: bool = True  # until install() says otherwise: refuse
    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions_hooked: bool = False
    http_hooked: bool = False


def _state() -> _State:
    from streamlit.runtime.app_session import AppSession  # noqa: PLC0415 - Streamlit internals: after the version check

    state = AppSession.__dict__.get("_knowledge_gate")
    if state is None:
        state = _State()
        AppSession._knowledge_gate = state  # type: ignore[attr-defined]
    return state


#: The process's sessions let in (the same object after a re-import of this module).
SESSIONS = _state().sessions


def let_in(session_id: str) -> None:
    """The session may upload (it passed app.py's gate)."""
    SESSIONS.add(session_id)


def shut_out(session_id: str) -> None:
    """The session may no longer upload (it logged out)."""
    SESSIONS.discard(session_id)


# -- installing ------------------------------------------------------------------------------------
def install(*, password_set: bool, upload_mb: int) -> bool:
    """Put the hooks into this process's Streamlit (once; later calls only refresh the settings), then
    raise ``server.maxUploadSize`` to ``upload_mb``. Under ``AppTest`` (no server) only the session
    hooks go in. Returns ``True`` when this call put the HTTP hook in: the calling session's page was
    served before it, without the CSP (app.py has the browser load it again).

    Raises:
        GateUnavailable: a Streamlit version these hooks do not know, or its running server not found;
            nothing is changed then (uploads stay at the config file's ceiling, 0: refused).
    """
    import streamlit  # noqa: PLC0415 - Streamlit internals: after the version check
    from streamlit import config  # noqa: PLC0415 - Streamlit internals: after the version check

    version = tuple(int(p) for p in re.findall(r"\d+", streamlit.__version__)[:2])
    if version not in SUPPORTED_STREAMLIT:
        raise GateUnavailable(
            f"Streamlit {streamlit.__version__} is not a version the sign-in gate (knowledge/webgate.py)"
            f" was made for ({', '.join(f'{a}.{b}' for a, b in sorted(SUPPORTED_STREAMLIT))}): uploads could"
            " get past the password. Install the version of requirements.txt.")
    state = _state()
    with state.lock:
        state.password_set = password_set
        if not state.sessions_hooked:
            _hook_sessions(state)
            state.sessions_hooked = True
        if config.get_option("global.appTest"):
            return False
        first = not state.http_hooked
        if first:
            _hook_http(_starlette_app())
            state.http_hooked = True
        set_upload_limit(upload_mb)
        return first


def set_upload_limit(upload_mb: int) -> None:
    """``server.maxUploadSize`` = ``upload_mb`` (MiB), at run time: Streamlit reads it on each upload
    and for each uploader it draws. (``st.set_option`` takes ``client.*`` options only.)"""
    from streamlit import config  # noqa: PLC0415 - Streamlit internals: after the version check

    if config.get_option("server.maxUploadSize") != upload_mb:
        config.set_option("server.maxUploadSize", upload_mb, "knowledge.webgate (upload_limit_mb)")


def _hook_sessions(state: _State) -> None:
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg  # noqa: PLC0415 - Streamlit internals: after the version check
    from streamlit.runtime.app_session import AppSession  # noqa: PLC0415 - Streamlit internals: after the version check

    handle = getattr(AppSession, "_handle_file_urls_request", None)
    shutdown = getattr(AppSession, "shutdown", None)
    if not callable(handle) or not callable(shutdown) or not hasattr(AppSession, "_enqueue_forward_msg"):
        raise GateUnavailable("Streamlit's AppSession has no _handle_file_urls_request/shutdown to guard.")

    def _handle_file_urls_request(self: Any, request: Any) -> None:
        if self.id in state.sessions:
            return handle(self, request)
        log.warning("Refused upload URLs to session %s: it has not signed in.", self.id)
        msg = ForwardMsg()
        msg.file_urls_response.response_id = request.request_id
        msg.file_urls_response.error_msg = "Sign in first: uploads are refused until this session has signed in."
        self._enqueue_forward_msg(msg)

    def _shutdown(self: Any) -> None:
        state.sessions.discard(self.id)
        return shutdown(self)

    AppSession._handle_file_urls_request = _handle_file_urls_request  # type: ignore[method-assign, assignment]
    AppSession.shutdown = _shutdown  # type: ignore[method-assign]


def _starlette_app() -> Any:
    """The Starlette app of the running ``streamlit run`` server: ``UvicornServer._server.config.app``
    of the server that holds this process's Runtime."""
    from streamlit.runtime import Runtime  # noqa: PLC0415 - Streamlit internals: after the version check
    from streamlit.web.server.starlette.starlette_server import UvicornServer  # noqa: PLC0415 - Streamlit internals: after the version check

    if not Runtime.exists():
        raise GateUnavailable("No Streamlit runtime runs in this process.")
    for ref in gc.get_referrers(Runtime.instance()):
        if isinstance(ref, dict):  # an instance's __dict__ holding the runtime
            owners = [o for o in gc.get_referrers(ref) if isinstance(o, UvicornServer)]
        else:
            owners = [ref] if isinstance(ref, UvicornServer) else []
        for owner in owners:
            server = getattr(owner, "_server", None)
            app = getattr(getattr(server, "config", None), "app", None)
            if app is not None and hasattr(app, "middleware_stack"):
                return app
    raise GateUnavailable("Streamlit's web server (UvicornServer) was not found in this process.")


def _hook_http(app: Any) -> None:
    """Wrap the built middleware stack (Starlette builds it on the first request; ours came later)."""
    inner = app.middleware_stack or app.build_middleware_stack()
    if not isinstance(inner, HttpGate):
        app.middleware_stack = HttpGate(inner)


# -- the HTTP side ---------------------------------------------------------------------------------
def _inline_script_hashes() -> list[str]:
    """CSP hashes of the inline scripts of Streamlit's index.html (one line, ``window.prerenderReady``)."""
    import streamlit  # noqa: PLC0415 - Streamlit internals: after the version check

    index = Path(streamlit.__file__).parent / "static" / "index.html"
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
    return ("window.__streamlit=Object.assign({},window.__streamlit,"
            f"{{BACKEND_BASE_URL:location.origin+{root!r}}});").replace("'", '"')


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
    return "; ".join([
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
    ])


_SCRIPT_HASHES = _inline_script_hashes()


#: The cookie that keeps an account's app session across reloads and tabs: the session's token,
#: ``HttpOnly`` (no script reads it), ``SameSite=Strict``, ``Secure`` over HTTPS, for the session's
#: lifetime. ``app.py`` reads it from the websocket's request (``st.context.cookies``).
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


def cookie_url(code: str | None, next_path: str = "/") -> str:
    """Where the browser goes to get (``code``) or clear (``None``) the session cookie, coming back
    to ``next_path`` (an app path with its URL-encoded query, ``/view?store=a+b&file=f``; anything
    else is ``/``)."""
    from streamlit import config  # noqa: PLC0415 - Streamlit internals: after the version check

    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    prefix = f"/{base}/" if base else "/"
    nxt = next_path if _NEXT.fullmatch(next_path or "") and not next_path.startswith("//") else "/"
    query = urllib.parse.urlencode({"code": code, "next": nxt} if code else {"next": nxt})
    return f"{prefix}{COOKIE_ENDPOINTS[0] if code else COOKIE_ENDPOINTS[1]}?{query}"


async def _cookie_answer(scope: Scope, send: Send, endpoint: str, base: str) -> None:
    """The redirect of a :data:`COOKIE_ENDPOINTS` request, setting or clearing the cookie."""
    query = urllib.parse.parse_qs((scope.get("query_string") or b"").decode("latin-1"))
    nxt = (query.get("next") or ["/"])[0]
    if not _NEXT.fullmatch(nxt) or nxt.startswith("//"):
        nxt = "/"
    path = f"/{base}" if base else "/"
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    cookie = f"{SESSION_COOKIE}=; Max-Age=0; Path={path}; HttpOnly; SameSite=Strict{secure}"
    if endpoint == COOKIE_ENDPOINTS[0]:
        found = HANDOFFS.redeem((query.get("code") or [""])[0])
        if found is not None:
            cookie = f"{SESSION_COOKIE}={found[0]}; Max-Age={found[1]}; Path={path}; HttpOnly; SameSite=Strict{secure}"
    location = (f"/{base}" if base else "") + nxt
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode()),
                            (b"cache-control", b"no-store"), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


class HttpGate:
    """ASGI middleware around Streamlit's own stack: see the module docstring."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is not None:
            return await _refuse(scope, send, refusal)
        if scope["type"] == "websocket":
            return await self.app(scope, receive, send)
        from streamlit import config  # noqa: PLC0415 - Streamlit internals: after the version check

        base = (config.get_option("server.baseUrlPath") or "").strip("/")
        endpoint = (scope.get("path") or "").removeprefix(f"/{base}" if base else "").lstrip("/")
        if endpoint in COOKIE_ENDPOINTS:
            return await _cookie_answer(scope, send, endpoint, base)
        request_headers = dict(scope.get("headers") or [])
        host = request_headers.get(b"host", b"").decode("latin-1")
        page_load = scope.get("method") == "GET" and b"text/html" in request_headers.get(b"accept", b"")
        if page_load:
            # a page load: its HTML uncompressed (it is small), so the base-URL script can go in
            scope = dict(scope, headers=[(k, v) for k, v in scope.get("headers") or []
                                         if k.lower() != b"accept-encoding"])
        html: dict[str, Any] = {}

        async def send_with_csp(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                ctype = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if ctype.lower().startswith(b"text/html"):
                    headers.append((b"content-security-policy", content_security_policy(host, base).encode()))
                    message["headers"] = headers
                    if page_load and not any(k.lower() == b"content-encoding" for k, _ in headers):
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

    def refusal(self, scope: Scope) -> str | None:
        """Why this request is refused, or ``None``; the body is never read before this answer."""
        from streamlit import config  # noqa: PLC0415 - Streamlit internals: after the version check

        base = (config.get_option("server.baseUrlPath") or "").strip("/")
        core = f"/{base}/_stcore/" if base else "/_stcore/"
        path: str = scope.get("path") or ""
        if not path.startswith(core):
            return None
        endpoint, _, rest = path[len(core):].partition("/")
        if endpoint in OPEN_ENDPOINTS:
            return None
        if endpoint == UPLOAD_ENDPOINT:
            session_id = rest.partition("/")[0]
            if session_id in SESSIONS:
                return None
            return "Sign in first: this session may not upload until it has signed in."
        client = (scope.get("client") or (None, None))[0]
        if _state().password_set or is_shared(config.get_option("server.address"), client):
            return f"/_stcore/{endpoint} is not served while the app has a password or is shared."
        return None


def with_base_url_script(html: bytes, base: str) -> bytes:
    """``html`` with :func:`base_url_script` as the first element of its ``<head>`` (unchanged when it
    has none, e.g. an empty 304 body)."""
    head = re.search(rb"<head[^>]*>", html)
    if head is None:
        return html
    script = f"<script>{base_url_script(base)}</script>".encode()
    return html[:head.end()] + script + html[head.end():]


async def _refuse(scope: Scope, send: Send, reason: str) -> None:
    log.warning("Refused %s %s: %s", scope.get("method", "WEBSOCKET"), scope.get("path"), reason)
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    body = reason.encode()
    await send({"type": "http.response.start", "status": 403,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


__all__ = [
    "COOKIE_ENDPOINTS",
    "HANDOFFS",
    "OPEN_ENDPOINTS",
    "SESSIONS",
    "SESSION_COOKIE",
    "SUPPORTED_STREAMLIT",
    "GateUnavailable",
    "Handoffs",
    "HttpGate",
    "Sessions",
    "content_security_policy",
    "cookie_url",
    "install",
    "let_in",
    "set_upload_limit",
    "shut_out",
    "upload_limit_mb",
]
