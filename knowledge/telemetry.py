"""What the people who run it see: Prometheus metrics, OpenTelemetry spans, the request id and
JSON log lines (``ops.*`` settings; docs/team.md, "Operating it").

* **Metrics** (``prometheus-client``, its default registry, one per process): the counters and
  histograms below, recorded where the work is done (:data:`JOB_SECONDS`, :data:`STAGE_SECONDS`,
  :data:`SEARCH_SECONDS`, :data:`REQUESTS`, ...), plus the process's own (``process_resident_memory_bytes``:
  the RSS) and, read at each scrape, the connections in use of this process's PostgreSQL pools
  (:func:`watch_pool`). What many processes share -- the queue -- is read from the catalog at each
  scrape by a collector the server adds (:mod:`knowledge.service.health`), never from one
  process's memory. :func:`metrics_text` is the exposition.
* **Spans** (``opentelemetry-api``): :func:`span` opens one under the current one. Nothing is kept
  or sent unless a tracer provider is set: :func:`configure_tracing` sets the SDK's with an OTLP
  exporter when ``ops.otlp_endpoint`` is set (off by default: no byte leaves the process); a test
  sets its own with an in-memory exporter.
* **The request id** (:func:`request_id`, a context variable): set by the servers for each request
  (from ``X-Request-ID`` when the client sent a sane one), carried into an ingestion job with the
  trace context (:func:`job_context` written with the batch, :func:`resumed` in the worker), and on
  every log line (:class:`RequestIdFilter`).
* **JSON logs** (``ops.log_format = "json"``): :func:`configure_logging` puts :class:`JsonFormatter`
  on the root logger's handlers; a line's ``extra=`` fields (``route``, ``status``, ``file``, ...)
  become keys of its object.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from knowledge.errors import ConfigError

log = logging.getLogger(__name__)

# -- metrics -----------------------------------------------------------------------------------------
#: Seconds buckets from a millisecond search to a long OCR job.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0, 600.0)

JOBS_FINISHED = Counter(
    "knowledge_ingest_jobs_finished",
    "Ingestion jobs this process's workers finished, by status (done, failed, cancelled) and reason class"
    " (the error's class name, empty when done)",
    ["status", "reason"],
)
JOB_SECONDS = Histogram(
    "knowledge_ingest_job_seconds",
    "Seconds one ingestion job took in this process's worker, by status",
    ["status"],
    buckets=_BUCKETS,
)
STAGE_SECONDS = Histogram(
    "knowledge_ingest_stage_seconds",
    "Seconds of one file's ingestion stage: read, chunk, embed, write",
    ["stage"],
    buckets=_BUCKETS,
)
EMBEDDED_TEXTS = Counter("knowledge_embedding_texts", "Texts embedded (document chunks, queries), by kind", ["kind"])
EMBEDDING_SECONDS = Counter(
    "knowledge_embedding_seconds",
    "Seconds spent embedding, by kind; rate(knowledge_embedding_texts_total) / rate(this) is the throughput",
    ["kind"],
)
SEARCH_SECONDS = Histogram(
    "knowledge_search_seconds",
    "Seconds of one store's search (embedding, ranking, backend calls), by ranking (vector, lexical, hybrid) and backend",
    ["ranking", "backend"],
    buckets=_BUCKETS,
)
REQUESTS = Counter(
    "knowledge_http_requests",
    "HTTP requests answered, by server (api, mcp, worker), route template, method and status",
    ["server", "route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "knowledge_http_request_seconds",
    "Seconds to answer an HTTP request, by server and route",
    ["server", "route"],
    buckets=_BUCKETS,
)

_pools: weakref.WeakSet[Any] = weakref.WeakSet()
_pools_lock = threading.Lock()


def watch_pool(pool: Any) -> None:
    """Count ``pool`` (a ``psycopg_pool.ConnectionPool``, by its ``name``) in the metric
    ``knowledge_pool_connections`` while it lives."""
    with _pools_lock:
        _pools.add(pool)


class PoolCollector(Collector):
    """``knowledge_pool_connections{pool, state}``: each watched pool's connections ``in_use``,
    ``idle`` and its ``max``, and ``knowledge_pool_waiting{pool}``: requests waiting for one
    (``ConnectionPool.get_stats()``, read at each scrape)."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        conns = GaugeMetricFamily(
            "knowledge_pool_connections", "Connections of this process's PostgreSQL pools", labels=["pool", "state"]
        )
        waiting = GaugeMetricFamily("knowledge_pool_waiting", "Requests waiting for a connection of a pool", labels=["pool"])
        with _pools_lock:
            pools = list(_pools)
        for pool in pools:
            try:
                stats = pool.get_stats()
            except Exception:  # a pool closed meanwhile
                continue
            name = str(getattr(pool, "name", "") or "pool")
            size, idle = int(stats.get("pool_size", 0)), int(stats.get("pool_available", 0))
            conns.add_metric([name, "in_use"], max(0, size - idle))
            conns.add_metric([name, "idle"], idle)
            conns.add_metric([name, "max"], int(getattr(pool, "max_size", 0) or 0))
            waiting.add_metric([name], int(stats.get("requests_waiting", 0)))
        yield conns
        yield waiting


REGISTRY.register(PoolCollector())

_extra: dict[str, Collector] = {}
_extra_lock = threading.Lock()


def add_collector(key: str, collector: Collector) -> None:
    """Register ``collector`` in the process's registry under ``key``, replacing the one of that key
    (a server built again over another catalog, as tests do)."""
    with _extra_lock:
        old = _extra.pop(key, None)
        if old is not None:
            with contextlib.suppress(KeyError):
                REGISTRY.unregister(old)
        REGISTRY.register(collector)
        _extra[key] = collector


def metrics_text() -> tuple[bytes, str]:
    """This process's metrics in Prometheus's text format, and its content type."""
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


# -- spans -------------------------------------------------------------------------------------------
tracer = trace.get_tracer("knowledge")


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span ``name`` under the current one, with ``attributes`` (``None`` values left out) and the
    request id; an exception is recorded on it and raised. A no-op without a tracer provider."""
    attrs = {k: v for k, v in attributes.items() if v is not None}
    rid = _request_id.get()
    if rid:
        attrs["request_id"] = rid
    with tracer.start_as_current_span(name, attributes=attrs) as current:
        yield current


_configured: dict[str, Any] = {}


def configure_tracing(settings: Any, role: str) -> bool:
    """Export spans by OTLP over HTTP when ``settings.ops.otlp_endpoint`` is set (the SDK's tracer
    provider with a batch processor, service ``<ops.service_name>-<role>``), once per process and
    only if no provider is set yet; returns whether it did. Unset: nothing is set up and nothing sent.

    Raises:
        ConfigError: an endpoint is set but the OTLP exporter package is not installed.
    """
    endpoint = settings.ops.otlp_endpoint
    if not endpoint or "provider" in _configured:
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415 - optional, only when set
            OTLPSpanExporter,
        )
    except ImportError:
        raise ConfigError(
            "ops.otlp_endpoint is set, but the OTLP exporter is not installed: pip install"
            " opentelemetry-exporter-otlp-proto-http (or unset ops.otlp_endpoint)."
        ) from None
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415 - the SDK, only when exporting
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415 - the SDK, only when exporting
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415 - the SDK, only when exporting

    provider = TracerProvider(resource=Resource.create({"service.name": f"{settings.ops.service_name}-{role}"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)
    _configured["provider"] = provider
    log.info("traces are exported to %s", endpoint)
    return True


# -- the request id ----------------------------------------------------------------------------------
REQUEST_ID_HEADER = "X-Request-ID"
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("knowledge_request_id", default=None)
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def request_id() -> str | None:
    """The id of the request this code runs for (a server's request, a job it queued), or ``None``."""
    return _request_id.get()


def new_request_id(given: str | None = None) -> str:
    """``given`` when it is a sane id (1-128 of letters, digits, ``._:-``), else a new random one."""
    if given and _SANE_ID.fullmatch(given.strip()):
        return given.strip()
    return uuid.uuid4().hex


@contextlib.contextmanager
def request_scope(rid: str | None) -> Iterator[str | None]:
    """Run the block with ``rid`` as :func:`request_id` (restored after)."""
    token = _request_id.set(rid)
    try:
        yield rid
    finally:
        _request_id.reset(token)


@contextlib.contextmanager
def incoming(headers: Mapping[str, str]) -> Iterator[None]:
    """Run the block in the trace a request's ``headers`` (lower-case names) carry (W3C
    ``traceparent``: a client's or a proxy's span then holds the server's); none: a new trace."""
    token = otel_context.attach(propagate.extract(dict(headers)))
    try:
        yield
    finally:
        otel_context.detach(token)


def job_context() -> dict[str, str]:
    """What a queued job carries of the request that queued it: ``request_id`` and the W3C trace
    context (``traceparent``, when a span is recording), for :func:`resumed` in the worker."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    rid = _request_id.get()
    if rid:
        carrier["request_id"] = rid
    return carrier


@contextlib.contextmanager
def resumed(carrier: Mapping[str, Any] | None) -> Iterator[str | None]:
    """Run the block in the request's context a job carried (:func:`job_context`): its request id,
    and its trace as the parent of the spans opened here."""
    carrier = {k: str(v) for k, v in (carrier or {}).items() if isinstance(v, str)}
    token = otel_context.attach(propagate.extract(carrier))
    try:
        with request_scope(carrier.get("request_id")) as rid:
            yield rid
    finally:
        otel_context.detach(token)


# -- logs --------------------------------------------------------------------------------------------
class RequestIdFilter(logging.Filter):
    """Puts the current :func:`request_id` on every record (``record.request_id``, ``None`` outside a request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = _request_id.get()
        return True


#: A record's own attributes; anything else on it came as ``extra=`` and goes into the JSON object.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (ISO 8601 UTC), ``level``, ``logger``, ``message``,
    ``request_id``, the record's ``extra=`` fields, and ``exception`` (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or _request_id.get(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value if isinstance(value, (str, int, float, bool, type(None))) else str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def configure_logging(settings: Any, level: int = logging.INFO) -> None:
    """Logging for a server or worker process: with ``ops.log_format = "json"``, JSON lines
    (:class:`JsonFormatter`) on stderr instead of the root logger's handlers, at ``level``; the
    request id is put on every record either way (:class:`RequestIdFilter`)."""
    root = logging.getLogger()
    if settings.ops.log_format == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        handler.addFilter(RequestIdFilter())
        for old in list(root.handlers):
            root.removeHandler(old)
        root.addHandler(handler)
        root.setLevel(level)
        for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
            lg = logging.getLogger(name)
            lg.handlers.clear()
            lg.propagate = name != "uvicorn.access"  # our own request line replaces uvicorn's
    else:
        for existing in root.handlers:
            if not any(isinstance(f, RequestIdFilter) for f in existing.filters):
                existing.addFilter(RequestIdFilter())


def uvicorn_logging(settings: Any) -> dict[str, Any]:
    """The arguments ``uvicorn.run`` takes for its logging: with JSON logs, none of its own (its
    lines go to the root logger's JSON handler) and no access log (:class:`~knowledge.server.ops.Observed`
    writes one line a request); else its defaults."""
    return {"log_config": None, "access_log": False} if settings.ops.log_format == "json" else {}


__all__ = [
    "EMBEDDED_TEXTS",
    "EMBEDDING_SECONDS",
    "JOBS_FINISHED",
    "JOB_SECONDS",
    "REQUESTS",
    "REQUEST_ID_HEADER",
    "REQUEST_SECONDS",
    "SEARCH_SECONDS",
    "STAGE_SECONDS",
    "JsonFormatter",
    "PoolCollector",
    "RequestIdFilter",
    "add_collector",
    "configure_logging",
    "configure_tracing",
    "incoming",
    "job_context",
    "metrics_text",
    "new_request_id",
    "request_id",
    "request_scope",
    "resumed",
    "span",
    "tracer",
    "uvicorn_logging",
    "watch_pool",
]
