"""``/healthz``, ``/readyz`` and ``/metrics`` on the REST API, the MCP server over HTTP and a worker's
health listener, and what every request leaves behind: its id, its span, its metrics, its log line.

* :class:`Observed` (outermost ASGI middleware): each request gets a request id (the client's
  ``X-Request-ID`` when sane, else a new one; sent back in ``X-Request-ID``), a span
  ``HTTP <method> <route>`` (its route template, never its ids), is counted in
  ``knowledge_http_requests_total{server, route, method, status}`` and timed, and logged in one
  line (``knowledge.requests``: method, route, path, status, ms, request_id).
* :class:`OpsEndpoints` (inside the :class:`~knowledge.server.guard.Guard`): ``/healthz`` answers
  200 while the process runs; ``/readyz`` 200 or 503 (with ``Retry-After``) with each part's
  check and the reason in words (:class:`~knowledge.service.health.Readiness`); ``/metrics``
  Prometheus's text. The Guard lets the two probes through without a key (:data:`PROBE_PATHS`:
  a load balancer or an orchestrator sends none) and asks ``/metrics`` for the API's key like any
  route (a user's key once accounts exist), or ``ops.metrics_token``, the scraper's token that
  opens ``/metrics`` and nothing else; ``ops.metrics = false`` makes it a 404.
* :class:`HealthListener`: the same three on a small HTTP server of a worker process
  (``ingest.worker_health_port``), its readiness also the worker's own state (sick, stopped,
  waiting for the database), ``/metrics`` asking for the same keys as the API's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from anyio.to_thread import run_sync
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from knowledge.access import is_loopback
from knowledge.config import Settings
from knowledge.errors import KnowledgeError
from knowledge.server.http import RETRY_AFTER_SECONDS
from knowledge.service.health import Readiness, Ready
from knowledge.telemetry import (
    REQUEST_ID_HEADER,
    REQUEST_SECONDS,
    REQUESTS,
    add_collector,
    incoming,
    metrics_text,
    new_request_id,
    request_scope,
    span,
)
from knowledge.workbench import Workbench

log = logging.getLogger("knowledge.requests")

#: The probes, answered without a key (the Guard's ``probe_paths``).
PROBE_PATHS = ("/healthz", "/readyz")
METRICS_PATH = "/metrics"


def ready_body(ready: Ready, extra: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    """``/readyz``'s status and body: 200 ready, 503 not (the body says why)."""
    body = {**ready.as_dict(), **(extra or {})}
    return (200 if ready.ready and body["status"] == "ready" else 503), body


def metrics_token(settings: Settings) -> str | None:
    """``ops.metrics_token`` in plain text (``None``: unset)."""
    token = settings.ops.metrics_token
    return token.get_secret_value() if token is not None else None


class OpsEndpoints:
    """Answers ``/healthz``, ``/readyz`` and ``/metrics`` (GET) before ``app`` (see the module
    docstring); ``readiness`` checks the parts, ``metrics`` serves them or not (``ops.metrics``)."""

    def __init__(self, app: ASGIApp, *, readiness: Readiness, metrics: bool = True) -> None:
        self.app, self.readiness, self.metrics = app, readiness, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path not in (*PROBE_PATHS, METRICS_PATH) or (path == METRICS_PATH and not self.metrics):
            return await self.app(scope, receive, send)
        if scope.get("method") not in ("GET", "HEAD"):
            return await JSONResponse({"error": "GET only"}, status_code=405, headers={"Allow": "GET"})(scope, receive, send)
        response: Response
        if path == "/healthz":
            response = JSONResponse({"status": "alive"})
        elif path == "/readyz":
            status, body = ready_body(await run_sync(self.readiness.check))
            headers = {} if status == 200 else {"Retry-After": str(RETRY_AFTER_SECONDS)}
            response = JSONResponse(body, status_code=status, headers=headers)
        else:
            data, ctype = await run_sync(metrics_text)
            response = Response(data, media_type=ctype)
        await response(scope, receive, send)


class Observed:
    """The request id, span, metrics and log line of every HTTP request to ``app`` (see the module
    docstring); ``server`` names the server in the metrics (``api``, ``mcp``)."""

    def __init__(self, app: ASGIApp, *, server: str) -> None:
        self.app, self.server = app, server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        rid = new_request_id(headers.get("x-request-id"))
        method = str(scope.get("method", "GET"))
        status = [500]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message.get("status", 500))
                headers = [(k, v) for k, v in message.get("headers") or [] if k.lower() != b"x-request-id"]
                headers.append((REQUEST_ID_HEADER.lower().encode(), rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        t0 = time.perf_counter()
        with incoming(headers), request_scope(rid), span(f"HTTP {method}", **{"http.request.method": method}) as current:
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                route = route_of(scope)
                seconds = time.perf_counter() - t0
                current.update_name(f"HTTP {method} {route}")
                current.set_attribute("http.route", route)
                current.set_attribute("http.response.status_code", status[0])
                REQUESTS.labels(self.server, route, method, str(status[0])).inc()
                REQUEST_SECONDS.labels(self.server, route).observe(seconds)
                log.info(
                    "%s %s %s %d %.1f ms",
                    method,
                    route,
                    scope.get("path", ""),
                    status[0],
                    seconds * 1000,
                    extra={
                        "server": self.server,
                        "method": method,
                        "route": route,
                        "path": scope.get("path", ""),
                        "status": status[0],
                        "ms": round(seconds * 1000, 1),
                    },
                )


def route_of(scope: Scope) -> str:
    """The request's route template (``/v1/vector_stores/{vs_id}``), the probe's path, or
    ``unmatched`` (an unknown path is never a label of its own). A request refused before routing
    (401, 429, 413 by the Guard) is matched against the paths of the application's OpenAPI schema
    (FastAPI's public ``app.openapi()``), so that its refusal is counted under the route it asked for."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str) and path:
        return path
    own = str(scope.get("path", ""))
    if own in (*PROBE_PATHS, METRICS_PATH, "/mcp"):
        return own
    for pattern, template in _templates(scope.get("app")):
        if pattern.fullmatch(own):
            return template
    return "unmatched"


_TEMPLATES: dict[int, list[tuple[re.Pattern[str], str]]] = {}


def _templates(app: Any) -> list[tuple[re.Pattern[str], str]]:
    """``app``'s OpenAPI paths as ``(regex, template)``, the ones with fewer parameters first (a
    literal ``/v1/vector_stores/search`` before ``/v1/vector_stores/{vector_store_id}``); ``[]``
    for an application without a schema."""
    key = id(app)
    if key not in _TEMPLATES:
        openapi = getattr(app, "openapi", None)
        try:
            paths = list(openapi().get("paths", {})) if callable(openapi) else []
        except Exception:  # a schema that cannot be built: the refusals stay unmatched
            log.warning("the OpenAPI schema could not be built for the request metrics", exc_info=True)
            paths = []
        paths.sort(key=lambda t: (t.count("{"), -len(t)))
        _TEMPLATES[key] = [(re.compile(re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(t))), t) for t in paths]
    return _TEMPLATES[key]


def watch_queue(wb: Workbench) -> None:
    """The queue's gauges of ``wb``'s catalog in this process's metrics (read at each scrape)."""
    add_collector("queue", wb.queue_collector())


# -- a worker's listener --------------------------------------------------------------------------------
class HealthListener:
    """``/healthz``, ``/readyz`` and ``/metrics`` of a worker process on ``host``:``port`` (a thread
    of its own, :class:`http.server.ThreadingHTTPServer`).

    Args:
        readiness: the parts' checks.
        state: ``state() -> (state, reason)`` of the worker (its :class:`~knowledge.service.worker.HealthFile`'s):
            ready only while ``running``.
        wb: the local admin's workbench, for the key of ``/metrics``: ``ops.metrics_token``, or once
            accounts exist a user's key (``kn-...``), else ``api_key`` when set, else a request from
            this computer only.
        api_key: the API's shared key (``KNOWLEDGE_API_KEY``).
        metrics: serve ``/metrics`` (``ops.metrics``).
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        readiness: Readiness,
        state: Callable[[], tuple[str, str | None]],
        wb: Workbench,
        api_key: str | None = None,
        metrics: bool = True,
    ) -> None:
        self.readiness, self.state, self.wb, self.metrics = readiness, state, wb, metrics
        self.digest = hashlib.sha256(api_key.encode()).digest() if api_key else None
        scraper = metrics_token(wb.settings)
        self.metrics_digest = hashlib.sha256(scraper.encode()).digest() if scraper else None
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.answer(self)

            def log_message(self, format: str, *args: Any) -> None:  # our own line, not stderr's
                return

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, name="health-listener", daemon=True)

    def start(self) -> HealthListener:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def allowed(self, authorization: str, peer: str) -> bool:
        """Whether a ``/metrics`` request with header ``authorization`` from ``peer`` is answered."""
        token = authorization[7:].strip() if authorization[:7].lower() == "bearer " else ""
        if (
            self.metrics_digest is not None
            and token
            and hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.metrics_digest)
        ):
            return True  # the scraper's own token (ops.metrics_token)
        try:
            if self.wb.accounts.enabled():
                self.wb.key_actor(token or None)
                return True
        except KnowledgeError:
            return False
        if self.digest is not None:
            return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.digest)
        return is_loopback(peer)

    def _accounts_on(self) -> bool:
        try:
            return bool(self.wb.accounts.enabled())
        except KnowledgeError:  # the catalog cannot be read now: say both
            return False

    def answer(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path.split("?", 1)[0]
        rid = new_request_id(req.headers.get(REQUEST_ID_HEADER))
        t0 = time.perf_counter()
        with request_scope(rid):
            if path == "/healthz":
                status, body, ctype = 200, json.dumps({"status": "alive"}).encode(), "application/json"
            elif path == "/readyz":
                state, reason = self.state()
                extra: dict[str, Any] = {"worker": {"state": state, "reason": reason}}
                ready = self.readiness.check()
                status, payload = ready_body(ready, extra)
                if state != "running":
                    status = 503
                    payload["status"] = "not ready"
                    payload["reason"] = "; ".join(filter(None, [f"the worker is {state}: {reason or state}", ready.reason]))
                body, ctype = json.dumps(payload).encode(), "application/json"
            elif path == METRICS_PATH and self.metrics:
                if self.allowed(req.headers.get("Authorization", ""), req.client_address[0]):
                    status, (body, ctype) = 200, metrics_text()
                else:
                    status, ctype = 401, "application/json"
                    words = (
                        "send a user's own key (Authorization: Bearer kn-...): once accounts exist the shared"
                        " KNOWLEDGE_API_KEY is refused"
                        if self._accounts_on()
                        else "send the API's key (Authorization: Bearer <KNOWLEDGE_API_KEY>)"
                    )
                    body = json.dumps({"error": f"{words}, or the scraper's token ops.metrics_token"}).encode()
            else:
                status, body, ctype = 404, json.dumps({"error": "not found"}).encode(), "application/json"
            req.send_response(status)
            req.send_header("Content-Type", ctype)
            req.send_header("Content-Length", str(len(body)))
            req.send_header(REQUEST_ID_HEADER, rid)
            if status == 503:
                req.send_header("Retry-After", str(RETRY_AFTER_SECONDS))
            if status == 401:
                req.send_header("WWW-Authenticate", "Bearer")
            req.end_headers()
            req.wfile.write(body)
            route = path if path in (*PROBE_PATHS, METRICS_PATH) else "unmatched"
            REQUESTS.labels("worker", route, "GET", str(status)).inc()
            REQUEST_SECONDS.labels("worker", route).observe(time.perf_counter() - t0)


__all__ = [
    "METRICS_PATH",
    "PROBE_PATHS",
    "HealthListener",
    "Observed",
    "OpsEndpoints",
    "metrics_token",
    "ready_body",
    "route_of",
    "watch_queue",
]
