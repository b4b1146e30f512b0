"""Is this process ready, and what does the queue look like: the answers behind ``/readyz`` and the
queue's metrics, for the REST API, the MCP server over HTTP and a worker's health listener.

* :class:`Readiness` checks the parts a request needs, each with the reason in words when it fails:
  the catalog (one statement), the file store (a look-up of an id no file has), the vector backend
  of the default template (its collections listed) and the embedding model (loaded). ``/healthz``
  needs none of them: a process that answers is alive.
* :class:`QueueCollector` reads the job table of the catalog at each scrape -- what every process
  of a team shares, never this process's memory: ``knowledge_ingest_jobs{status}`` (queued,
  waiting: queued again after an infrastructure error, not before its back-off; running) and
  ``knowledge_ingest_jobs_failed{reason}`` (failed jobs by the error's class name).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from knowledge.catalog import Catalog
from knowledge.catalog import jobs as queue
from knowledge.errors import KnowledgeError
from knowledge.service.stores import Stores

log = logging.getLogger(__name__)

#: The parts :class:`Readiness` checks, in order.
PARTS = ("catalog", "file_store", "vector_backend", "embedding_model")


@dataclass(frozen=True)
class Check:
    """One part's answer: ``ok``, and ``reason`` (words) when not."""

    ok: bool
    reason: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class Ready:
    """Whether every part answered (``ready``), each part's :class:`Check`, and ``reason``: the
    failing parts' reasons joined, ``None`` when ready."""

    ready: bool
    checks: dict[str, Check] = field(default_factory=dict)

    @property
    def reason(self) -> str | None:
        bad = [f"{name.replace('_', ' ')}: {c.reason}" for name, c in self.checks.items() if not c.ok]
        return "; ".join(bad) or None

    def as_dict(self) -> dict[str, Any]:
        """``{"status": "ready" | "not ready", "reason", "checks": {part: {"ok", "reason", "seconds"}}}``."""
        return {
            "status": "ready" if self.ready else "not ready",
            "reason": self.reason,
            "checks": {n: {"ok": c.ok, "reason": c.reason, "seconds": round(c.seconds, 4)} for n, c in self.checks.items()},
        }


def _words(exc: BaseException) -> str:
    """An error in words: a service error's own sentence, else the class and the first line."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, KnowledgeError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Readiness:
    """The checks of ``/readyz`` over ``stores`` (its catalog, file store, backends and embedders).

    The parts are checked at once, each in a thread of its own, and the answer is given within
    ``timeout`` seconds (``ops.ready_timeout_seconds``): a part that has not answered by then is
    not ready ("did not answer within 5 s"; a backend's client may retry for half a minute). A
    check still running when the next probe comes is waited for again rather than started twice,
    so probes during an outage never pile up threads. Thread-safe.
    """

    #: A file id no file has (the file store's look-up answers ``None`` when it is reachable).
    PROBE_ID = "file-readiness-probe"

    def __init__(self, stores: Stores, timeout: float = 5.0) -> None:
        self.stores = stores
        self.catalog: Catalog = stores.catalog
        self.timeout = float(timeout)
        self._lock = threading.Lock()
        self._running: dict[str, Future[Check]] = {}

    def check(self) -> Ready:
        calls: dict[str, Callable[[], None]] = {
            "catalog": self._catalog,
            "file_store": self._file_store,
            "vector_backend": self._backend,
            "embedding_model": self._model,
        }
        with self._lock:
            for name, fn in calls.items():
                running = self._running.get(name)
                if running is None or running.done():
                    self._running[name] = self._start(name, fn)
            futures = dict(self._running)
        wait(futures.values(), timeout=self.timeout)
        checks = {
            name: f.result()
            if f.done()
            else Check(False, f"did not answer within {self.timeout:g} s (ops.ready_timeout_seconds)", self.timeout)
            for name, f in futures.items()
        }
        ready = all(c.ok for c in checks.values())
        if not ready:
            log.warning("not ready: %s", Ready(False, checks).reason)
        return Ready(ready, checks)

    def _start(self, name: str, fn: Callable[[], None]) -> Future[Check]:
        """``fn``'s :class:`Check` to come, from a daemon thread (a part that hangs never holds up
        the process's exit)."""
        future: Future[Check] = Future()
        threading.Thread(target=lambda: future.set_result(self._timed(fn)), name=f"readyz-{name}", daemon=True).start()
        return future

    @staticmethod
    def _timed(fn: Callable[[], None]) -> Check:
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as exc:
            return Check(False, _words(exc), time.perf_counter() - t0)
        return Check(True, None, time.perf_counter() - t0)

    def _catalog(self) -> None:
        with self.catalog.cursor() as cur:
            cur.execute("SELECT 1").fetchone()

    def _file_store(self) -> None:
        self.stores.files.find(self.PROBE_ID)

    def _backend(self) -> None:
        self.stores.backend().list_collections()

    def _model(self) -> None:
        self.stores.embedder().dimension  # noqa: B018 - loads the model (once per process)


class QueueCollector(Collector):
    """The queue's gauges, read from the catalog's job table at each scrape (see the module
    docstring). A catalog that cannot be read yields ``knowledge_ingest_queue_up 0`` and no counts."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("knowledge_ingest_queue_up", "1 when the job table could be read for this scrape")
        jobs = GaugeMetricFamily(
            "knowledge_ingest_jobs",
            "Ingestion jobs in the shared catalog by status: queued, waiting (queued again after an"
            " infrastructure error, its back-off not over), running",
            labels=["status"],
        )
        failed = GaugeMetricFamily(
            "knowledge_ingest_jobs_failed",
            "Failed ingestion jobs in the shared catalog by reason class (the error's class name)",
            labels=["reason"],
        )
        try:
            rows = queue.status_counts(self.catalog)
        except Exception as exc:
            log.warning("metrics: the job table cannot be read: %s", _words(exc))
            up.add_metric([], 0)
            yield up
            return
        counts = {"queued": 0, "waiting": 0, "running": 0}
        reasons: dict[str, int] = {}
        for status, reason, n in rows:
            if status == "failed":
                reasons[reason or "unknown"] = reasons.get(reason or "unknown", 0) + n
            else:
                counts[status] = counts.get(status, 0) + n
        for status, n in counts.items():
            jobs.add_metric([status], n)
        for reason, n in sorted(reasons.items()):
            failed.add_metric([reason], n)
        up.add_metric([], 1)
        yield up
        yield jobs
        yield failed


__all__ = ["PARTS", "Check", "QueueCollector", "Readiness", "Ready"]
