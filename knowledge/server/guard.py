"""The HTTP front door of the REST API and the MCP server over HTTP: what a browser page of another
site could send is refused before any route runs (docs/security.md).

:class:`Guard` is pure ASGI middleware. In order, each request needs: a ``Host`` this server answers
(421), an ``Origin`` that is its own or configured and no cross-site fetch from an unconfigured one
(403), the bearer token when a key is set (401) -- once user accounts exist (``people``), a
per-user key (``kn-...``) read anew on every request, the request then acting as its user
(``scope["state"]["actor"]``, Starlette's ``request.state.actor``), and the shared key refused --
a body sent as ``application/json`` (415) -- ``multipart/form-data`` only on the upload paths, and
there only with a key, from a configured origin, or from a client that is not a browser page (403)
-- and a body within the limit (413). Without a key and without accounts (a loopback server: the
visitor is the local admin), a request must be local: one that came through a proxy (forwarding
headers, :mod:`knowledge.forwarded`, trusted or not) or from another host is refused (401), so a
reverse proxy on the same host does not make every visitor the local admin.
Every response carries ``X-Content-Type-Options: nosniff`` and a Content-Security-Policy that lets
nothing load or frame it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
from collections.abc import Iterable
from typing import Any

from anyio.to_thread import run_sync
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from knowledge.access import is_loopback
from knowledge.errors import AuthenticationFailed, KnowledgeError
from knowledge.forwarded import scope_peer, trusted_networks
from knowledge.people.quotas import rate_refusal
from knowledge.server.http import unavailable

log = logging.getLogger(__name__)

#: The names a loopback server answers besides its own address (each with the server's port).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
CSP = "default-src 'none'; frame-ancestors 'none'"
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"content-security-policy", CSP.encode()),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
#: ``Sec-Fetch-Site`` values a page of another origin never sends.
_SAFE_SITES = (None, "none", "same-origin")
_PORT = re.compile(r":\d{1,5}$")


def host_port(host: str, port: int | None) -> str:
    """``host:port`` as a ``Host`` header writes it (an IPv6 address in brackets; no port when ``None``)."""
    host = host.lower()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return host if port is None else f"{host}:{port}"


def has_port(host: str) -> bool:
    """Whether a ``Host`` value names a port (``name:8900``, ``[::1]:8900``; not ``[::1]``)."""
    return bool(_PORT.search(host)) and not host.endswith("]")


def server_hosts(bind: str, port: int, configured: Iterable[str] = ()) -> list[str]:
    """The ``Host`` values a server bound to ``bind``:``port`` answers, written for the MCP SDK's
    ``TransportSecuritySettings`` (``name:*`` = any port): the loopback names on loopback or every
    interface, the bound address otherwise, and the ``configured`` names."""
    wildcard = bind in ("", "0.0.0.0", "::")
    names = [host_port(n, port) for n in LOOPBACK_NAMES] if wildcard or is_loopback(bind) else []
    if not wildcard and host_port(bind, port) not in names:
        names.append(host_port(bind, port))
    for h in configured:
        names += [h] if has_port(h) else [h, h + ":*"]
    return names


def refusal(status: int, message: str, code: str, param: str | None = None) -> JSONResponse:
    """An error response with OpenAI's body ``{"error": {"message", "type", "param", "code"}}``."""
    return JSONResponse(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}, status_code=status
    )


class _BodyTooLarge(Exception):
    pass


class Guard:
    """Pure ASGI middleware in front of ``app`` (see the module docstring).

    Args:
        app: the ASGI application guarded.
        api_key: when set, every request needs ``Authorization: Bearer <api_key>`` (compared in
            constant time; a CORS preflight from a configured origin is answered without it).
        max_body: the largest request body in bytes (streamed, so a chunked upload is stopped as
            soon as it passes the limit).
        allowed_hosts: ``Host`` values answered besides the connection's local address (and the
            loopback names, with the server's port, on a loopback connection); without a port, any port.
        cors_origins: origins (``scheme://host[:port]``) allowed besides the server's own; CORS is
            answered for them (Starlette's ``CORSMiddleware``, preflight included).
        upload_paths: paths that take ``multipart/form-data``.
        open_paths: paths whose responses keep their own Content-Security-Policy (an HTML page).
        allow_headers, expose_headers: the request and response headers CORS lets a page use.
        people: the local admin's :class:`~knowledge.workbench.Workbench`: once accounts exist
            (``people.accounts.enabled()``), every request needs a per-user key (``people.key_actor``, read
            on each request: a revoked key is refused at once) and ``api_key`` is refused; the
            request's actor is put in ``scope["state"]["actor"]``. Without accounts, as before.
        trusted_proxies: addresses or networks (``server.trusted_proxies``) whose forwarding headers
            name the visitor; from any other peer they only mark the request as proxied.
        probe_paths: paths answered to a ``GET`` without any key (``/healthz``, ``/readyz``: a load
            balancer's or an orchestrator's probe sends none); the Host and Origin checks still hold.
        metrics_token: a bearer token that opens ``metrics_path`` (a ``GET``) and nothing else,
            with or without accounts (``ops.metrics_token``: a Prometheus scraper's); ``None``: that
            path is guarded like every other.
        metrics_path: the path ``metrics_token`` opens.
        token_paths: path prefixes whose routes check their own bearer token (SCIM's provisioning
            token, :mod:`knowledge.server.scim`): neither the API key nor a user's key is asked
            for there, and a body may also be ``application/scim+json`` (RFC 7644 §3.1).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str | None = None,
        max_body: int,
        allowed_hosts: Iterable[str] = (),
        cors_origins: Iterable[str] = (),
        upload_paths: Iterable[str] = (),
        open_paths: Iterable[str] = (),
        allow_headers: Iterable[str] = ("Authorization", "Content-Type"),
        expose_headers: Iterable[str] = (),
        people: Any = None,
        trusted_proxies: Iterable[str] = (),
        token_paths: Iterable[str] = (),
        probe_paths: Iterable[str] = (),
        metrics_token: str | None = None,
        metrics_path: str = "/metrics",
    ) -> None:
        self.app = app
        self.probe_paths = frozenset(probe_paths)
        self.metrics_digest = hashlib.sha256(metrics_token.encode()).digest() if metrics_token else None
        self.metrics_path = metrics_path
        self.trusted = trusted_networks(trusted_proxies)
        self.people = people
        self._accounts = False  # once accounts exist they stay (the last admin cannot be deleted)
        self.digest = hashlib.sha256(api_key.encode()).digest() if api_key else None
        self.max_body = max_body
        hosts = [h.lower() for h in allowed_hosts]
        self.exact_hosts = {h for h in hosts if has_port(h)}
        self.any_port_hosts = {h for h in hosts if not has_port(h)}
        self.origins = {o.lower().rstrip("/") for o in cors_origins}
        self.upload_paths = set(upload_paths)
        self.open_paths = set(open_paths)
        self.token_paths = tuple(token_paths)
        self.inner: Any = self._gate
        if self.origins:
            self.inner = CORSMiddleware(
                self._gate,
                allow_origins=sorted(self.origins),
                allow_methods=["*"],
                allow_headers=list(allow_headers),
                expose_headers=list(expose_headers),
                max_age=600,
            )

    # -- the checks ---------------------------------------------------------------------------------
    def host_allowed(self, host: str, server: tuple[str, int] | None) -> bool:
        """Whether ``host`` (the ``Host`` header) is one this server answers on a connection whose
        local address is ``server``."""
        host = host.strip().lower()
        if host in self.exact_hosts:
            return True
        bare = host.rsplit(":", 1)[0] if has_port(host) else host
        if bare in self.any_port_hosts:
            return True
        if not server:
            return False
        address, port = server[0], server[1]
        names = {host_port(address, port)}
        if is_loopback(address):
            names |= {host_port(n, port) for n in LOOPBACK_NAMES}
        if port == 80:  # a browser leaves the default port out
            names |= {n.rsplit(":", 1)[0] for n in names}
        return host in names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        own_csp = path in self.open_paths

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                for k, v in SECURITY_HEADERS:
                    if k not in present and not (own_csp and k == b"content-security-policy"):
                        headers.append((k, v))
                message = {**message, "headers": headers}
            await send(message)

        headers = _headers(scope)
        host = headers.get("host", "")
        if not self.host_allowed(host, scope.get("server")):
            return await refusal(
                421,
                f"This server does not answer for the host {host!r} (a DNS name pointed at"
                " this computer by another site is refused). Use the address it listens on,"
                " or list the name in api.allowed_hosts (behind a reverse proxy: every"
                " name and IP address people use to reach the proxy).",
                "invalid_host",
            )(scope, receive, send_secured)
        origin = headers.get("origin")
        if origin is not None:
            o = origin.strip().lower().rstrip("/")
            if o not in self.origins and o not in (f"http://{host.lower()}", f"https://{host.lower()}"):
                return await refusal(
                    403,
                    f"Requests from the web page origin {origin!r} are refused: a page of"
                    " another site may not drive this server. List the origin in"
                    " api.cors_origins to allow it.",
                    "origin_not_allowed",
                )(scope, receive, send_secured)
        site = headers.get("sec-fetch-site")
        if site == "cross-site" and (origin or "").strip().lower().rstrip("/") not in self.origins:
            return await refusal(
                403,
                "A cross-site request (Sec-Fetch-Site: cross-site) is refused: a page of"
                " another site may not drive this server. List the page's origin in"
                " api.cors_origins to allow it.",
                "origin_not_allowed",
            )(scope, receive, send_secured)
        await self.inner(scope, receive, send_secured)

    async def accounts_on(self) -> bool:
        """Whether user accounts exist (asked of the catalog until they do)."""
        if not self._accounts and self.people is not None:
            self._accounts = bool(await run_sync(self.people.accounts.enabled))
        return self._accounts

    async def _user(self, token: str, scope: Scope, receive: Receive, send: Send) -> bool:
        """Check ``token`` as a per-user key and put its actor in the scope's state; ``False`` when
        the request was refused (answered here)."""
        refused: JSONResponse
        if self.digest is not None and hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.digest):
            refused = refusal(
                401,
                "This server has user accounts: the shared KNOWLEDGE_API_KEY is refused. Send"
                " your own key (Authorization: Bearer kn-...), made in the app under your"
                " account's API keys.",
                "invalid_api_key",
            )
        else:
            try:
                actor = await run_sync(self.people.key_actor, token or None)
            except AuthenticationFailed as exc:
                refused = refusal(
                    401, f"{exc} This server has user accounts: every request needs its user's own key.", "invalid_api_key"
                )
            except KnowledgeError as exc:  # the catalog cannot be read now
                log.warning("could not check an API key: %s", exc)
                refused = unavailable(f"The API key could not be checked now: {exc}").response()
            else:
                scope.setdefault("state", {})["actor"] = actor
                return True
        if refused.status_code == 401:
            refused.headers["WWW-Authenticate"] = "Bearer"
        await refused(scope, receive, send)
        return False

    async def _within_rate(self, token: str, scope: Scope, receive: Receive, send: Send) -> bool:
        """Count the request against its key's rate (:meth:`Workbench.count_request
        <knowledge.workbench.Workbench.count_request>`); ``False`` when it is over and was answered
        429 with ``Retry-After`` here."""
        actor = scope.get("state", {}).get("actor")
        wb = self.people if actor is None else self.people.as_user(actor)
        try:
            decision = await run_sync(wb.count_request, token)
        except KnowledgeError as exc:  # the catalog cannot be written now
            log.warning("could not count a request: %s", exc)
            await unavailable(f"The request could not be counted now: {exc}").response()(scope, receive, send)
            return False
        if decision.allowed:
            return True
        error = rate_refusal(decision)
        resp = refusal(429, str(error), "rate_limit_exceeded")
        resp.headers["Retry-After"] = str(error.retry_after)
        resp.headers["X-RateLimit-Limit"] = str(error.limit)
        resp.headers["X-RateLimit-Remaining"] = "0"
        await resp(scope, receive, send)
        return False

    async def _gate(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("path") in self.probe_paths and scope.get("method") in ("GET", "HEAD"):
            return await self.app(scope, receive, send)  # a probe: no key, no body
        headers = _headers(scope)
        auth = headers.get("authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        if (
            self.metrics_digest is not None
            and token
            and scope.get("path") == self.metrics_path
            and scope.get("method") in ("GET", "HEAD")
            and hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.metrics_digest)
        ):
            return await self.app(scope, receive, send)  # the scraper's own token: /metrics only
        keyed = self.digest is not None
        own_token = bool(self.token_paths) and str(scope.get("path", "")).startswith(self.token_paths)
        try:
            accounts = False if own_token else await self.accounts_on()
        except KnowledgeError as exc:  # the catalog cannot be read now
            log.warning("could not tell whether accounts exist: %s", exc)
            return await unavailable(f"The catalog cannot be read now: {exc}").response()(scope, receive, send)
        if own_token:
            keyed = True  # the route checks its own token
        elif accounts:
            if not await self._user(token, scope, receive, send):
                return
            keyed = True
        elif self.digest is not None and not hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.digest):
            resp = refusal(
                401, "Incorrect or missing API key: send Authorization: Bearer <KNOWLEDGE_API_KEY>.", "invalid_api_key"
            )
            resp.headers["WWW-Authenticate"] = "Bearer"
            return await resp(scope, receive, send)
        elif self.digest is None and self.remote(scope):
            # no key, no accounts: every request is the local admin, so only a local one is answered
            resp = refusal(
                401,
                "This server has no API key, so it answers only requests from this computer, not"
                " through a proxy or from another host: set KNOWLEDGE_API_KEY (clients send it as"
                " the bearer token) or create user accounts.",
                "invalid_api_key",
            )
            resp.headers["WWW-Authenticate"] = "Bearer"
            return await resp(scope, receive, send)
        if token and not own_token and self.people is not None and not await self._within_rate(token, scope, receive, send):
            return
        ctype = headers.get("content-type")
        length = headers.get("content-length")
        has_body = (length is not None and length.strip() != "0") or "transfer-encoding" in headers
        if has_body or (ctype is not None and scope.get("method") in ("POST", "PUT", "PATCH")):
            media = (ctype or "").split(";")[0].strip().lower()
            upload = scope.get("path") in self.upload_paths
            if media == "multipart/form-data" and upload:
                if not keyed and not self._may_upload(headers):
                    return await refusal(
                        403,
                        "A file upload from a web page needs the API key (send Authorization:"
                        " Bearer <KNOWLEDGE_API_KEY>) or the page's origin in"
                        " api.cors_origins; a form of another site may not upload here.",
                        "upload_not_allowed",
                    )(scope, receive, send)
            elif media != "application/json" and not (own_token and media == "application/scim+json"):
                hint = " (file uploads: POST /v1/files as multipart/form-data)" if self.upload_paths else ""
                return await refusal(
                    415,
                    f"Request bodies are read as JSON only, sent with Content-Type:"
                    f" application/json; got {ctype or 'no Content-Type'}{hint}.",
                    "unsupported_media_type",
                )(scope, receive, send)
        if length is not None and length.strip().isdigit() and int(length) > self.max_body:
            return await self._too_large(scope, receive, send)
        seen = 0
        limit = self.max_body

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _BodyTooLarge:
            await self._too_large(scope, receive, send)

    def remote(self, scope: Scope) -> bool:
        """Whether the request came through a proxy (forwarding headers) or from another host's IP
        address (a client named otherwise, such as a test's in-process ``testclient``, is no host)."""
        visitor = scope_peer(scope, self.trusted)
        if visitor.proxied:
            return True
        try:
            ipaddress.ip_address((visitor.address or "").strip("[]"))
        except ValueError:
            return False
        return not is_loopback(visitor.address)

    def _may_upload(self, headers: dict[str, str]) -> bool:
        """A multipart upload without a key: from a configured origin, or from a client that is no
        browser page (no ``Origin``, no cross-origin ``Sec-Fetch-Site``: ``curl -F``)."""
        origin = headers.get("origin")
        if origin is not None:
            return origin.strip().lower().rstrip("/") in self.origins
        return headers.get("sec-fetch-site") in _SAFE_SITES

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        mb = self.max_body / 1e6
        await refusal(
            413,
            f"The request is larger than this server accepts ({mb:.1f} MB; the setting ingest.max_file_mb limits files).",
            "request_too_large",
        )(scope, receive, send)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}


__all__ = ["CSP", "LOOPBACK_NAMES", "Guard", "has_port", "host_port", "refusal", "server_hosts"]
