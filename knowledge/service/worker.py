"""Ingestion workers: claim a job row (:mod:`knowledge.catalog.jobs`), ingest its file with the
:class:`~knowledge.service.indexing.Indexer` (as the system: the batch's person was checked and
recorded when it was submitted, :meth:`knowledge.workbench.Workbench.submit_batch`), heartbeat
while working, record progress in the row, and finish it.

One code path for every worker: ``python -m knowledge worker`` (any number, on any machine that
reaches the catalog and the file store), the app's own worker process (:class:`WorkerProcess`, that
command as a child of the app) and the in-process worker thread the CLI and the API start on the
embedded default (:meth:`knowledge.service.jobs.JobRegistry.ensure_worker`). The ingestion has
replace-file semantics, so a job taken over after its worker died (``kill -9``) is simply run
again: no duplicate, no stale chunk. A cancel from any process reaches the worker at its next
heartbeat or progress write (the batch's ``cancel_requested``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowledge.catalog import jobs as queue
from knowledge.config import Settings
from knowledge.errors import KnowledgeError, unexpected_problem
from knowledge.filestore.base import StoredFile
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.indexing import Indexer
from knowledge.service.transient import TRANSIENT_ERROR_NAMES, Transient, backoff_seconds, classify, transient_reason
from knowledge.telemetry import JOB_SECONDS, JOBS_FINISHED, resumed, span

#: A handler of jobs of one kind that is not a file: ``handler(job, progress(stage, fraction),
#: cancel) -> IngestResult`` (raises only the infrastructure's errors).
JobHandler = Callable[[queue.JobRow, Callable[[str, float], None], threading.Event], IngestResult]

log = logging.getLogger(__name__)

#: Seconds at least between two progress writes of one file (stage changes are written at once).
PROGRESS_EVERY = 0.25
#: A worker that lost the catalog looks for it again after a back-off of at most this many seconds
#: (full jitter from 0.5 s up; :func:`knowledge.service.transient.backoff_seconds`), so it resumes
#: within seconds of the database's return.
RECONNECT_MAX_SECONDS = 10.0
#: Seconds between two "waiting for the database" log lines of one outage.
WAITING_LOG_EVERY = 30.0

#: The exit statuses of ``python -m knowledge worker`` (docs/ingestion.md, "Running workers under
#: a supervisor"): a supervisor restarts the process on any status but 0 (systemd ``Restart=on-failure``).
EXIT_DONE = 0  # --once and the queue is empty, or asked to stop (Ctrl-C, SIGTERM, the parent gone)
EXIT_CRASHED = 1  # an unexpected error (a bug): its traceback is in the log
EXIT_USAGE = 2  # bad arguments
EXIT_SICK = 3  # stood down: this worker's own disk, memory or model failed ingest.worker_sick_after jobs in a row
EXIT_NO_DATABASE = 4  # the catalog stayed unreachable longer than ingest.worker_database_wait_seconds


def host_name(settings: Settings | None = None) -> str:
    """This machine's name, as path jobs and worker ids record it: ``ingest.worker_host`` of
    ``settings`` when set, else the host name."""
    return (settings.ingest.worker_host if settings is not None else None) or socket.gethostname()


def new_worker_id(kind: str = "worker", host: str | None = None) -> str:
    """``host:pid:kind:xxxxxx``: unique, and says where the worker runs (``host``: default
    :func:`host_name`)."""
    return f"{host or host_name()}:{os.getpid()}:{kind}:{uuid.uuid4().hex[:6]}"


def reason_of(exc: BaseException) -> str:
    """The words for an error that ended a file: a full disk says so (``No space left on device``)
    whichever layer raised it, never that the file "cannot be read"."""
    cur: BaseException | None = exc
    while cur is not None:
        if isinstance(cur, OSError) and cur.errno == errno.ENOSPC:
            return "No space left on device: the disk holding the data folder is full; free some space and retry the file."
        cur = cur.__cause__ or cur.__context__
    return str(exc)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this machine runs (or is not ours to signal); this process counts."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True


class HealthFile:
    """A worker process's health as a JSON file (``ingest.worker_status_file``), rewritten whole
    (a temporary file renamed over it) at each change: ``{"state": "running" | "waiting" | "sick" |
    "stopped", "reason": words or null, "pid", "workers": [ids], "last_job": {"id", "name",
    "store", "status"} or null, "processed": jobs, "updated": ISO 8601 UTC}``. ``"waiting"``: the
    catalog cannot be reached (the worker retries); ``"sick"``: it stood down (exit status 3).
    ``path`` ``None``: nothing is written. Thread-safe; a write that fails is logged, never raised."""

    def __init__(self, path: Path | None, workers: tuple[str, ...] = ()) -> None:
        self.path = Path(path) if path is not None else None
        self.workers = list(workers)
        self.state: dict[str, Any] = {"state": "running", "reason": None, "last_job": None, "processed": 0}
        self._written = False  # the first update always writes: a new process replaces the last one's file
        self._lock = threading.Lock()

    def update(self, **changes: Any) -> None:
        with self._lock:
            if changes.pop("count", False):
                self.state["processed"] += 1
            if self._written and all(self.state.get(k) == v for k, v in changes.items()) and "last_job" not in changes:
                return
            self.state.update(changes)
            if self.path is None:
                return
            self._written = True
            data = {
                **self.state,
                "pid": os.getpid(),
                "workers": self.workers,
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
                tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
                os.replace(tmp, self.path)
            except OSError:
                log.warning("could not write the worker status file %s", self.path, exc_info=True)


def result_dict(r: IngestResult) -> dict[str, Any]:
    d = asdict(r)
    d["outcome"] = str(r.outcome)
    return d


def result_of(d: dict[str, Any], name: str) -> IngestResult:
    """An :class:`IngestResult` from a job row's ``result`` (unknown keys ignored)."""
    known = {
        k: d[k]
        for k in ("file_id", "chunks", "pages", "warnings", "seconds", "replaced_file_id", "error")
        if d.get(k) is not None
    }
    outcome = d.get("outcome") or Outcome.FAILED
    outcome = Outcome(outcome) if outcome in Outcome._value2member_map_ else Outcome.FAILED
    return IngestResult(d.get("name") or name, outcome, d.get("message") or "", **known)


class Worker:
    """Claims and ingests jobs of the catalog of ``indexer``.

    Args:
        indexer: ingests each file (:meth:`Indexer.ingest_file`, with ``raise_transient=True``), as
            the system: no person's access is checked here (it was when the batch was submitted).
            Its parts are the worker's: the settings (``ingest.*``), the catalog (the job rows),
            the file store (an upload's bytes) and the stores (an upload not kept is forgotten,
            :meth:`~knowledge.service.stores.Stores.forget_file_if_unused`).
        worker_id: how the rows name this worker (default :func:`new_worker_id`).
        lease: seconds a heartbeat stays good; the worker heartbeats every ``lease / 3`` s.
        pins: the process pins whose jobs this worker may claim (the in-process worker's own).
        secret: ``secret(batch_id) -> password or None`` for pinned jobs (never in the catalog).
        local_cancel: ``local_cancel(batch_id)``: a cancel made in this process (seen at once; the
            catalog's flag is seen at the next write).
        pinned_only: claim only the jobs pinned to ``pins`` (a process set to run no worker,
            ``ingest.worker_threads = 0``, still ingests the files whose password only it holds).
        health: where this worker reports its state (:class:`HealthFile`; default: nowhere).
        stand_down: a worker sick for its own reasons stops (``True``: a dedicated worker, or any
            worker on a shared catalog, where others take its jobs); ``False`` (the in-process
            worker of the embedded default, the only worker there is): it fails the file with the
            reason instead, as a person at the machine needs to hear it, rather than leave the
            batch waiting for a worker that will never come.

    Before each claim, the jobs of workers of this machine whose process is gone (a ``kill -9``)
    are taken over at once rather than after their lease (:func:`knowledge.catalog.jobs.expire_dead`).

    Infrastructure errors (issue 39, :mod:`knowledge.service.transient`) never fail a file: the job
    is queued again after a back-off (``ingest.retry_base_seconds``, ``retry_max_seconds``) until
    ``ingest.retry_max_attempts``. A worker whose *own* disk, memory or model failed
    ``ingest.worker_sick_after`` jobs in a row gives its job back and stops (:attr:`sick` says
    why). A worker that loses the catalog waits for it, retrying with back-off and logging
    "waiting for the database", and goes on where it was; past ``ingest.worker_database_wait_seconds``
    (unless 0) it stops with :attr:`gave_up` set.
    """

    def __init__(
        self,
        indexer: Indexer,
        *,
        worker_id: str | None = None,
        lease: float = queue.LEASE_SECONDS,
        pins: tuple[str, ...] = (),
        secret: Callable[[str], str | None] | None = None,
        local_cancel: Callable[[str], bool] | None = None,
        pinned_only: bool = False,
        health: HealthFile | None = None,
        stand_down: bool = True,
        kinds: Mapping[str, JobHandler] | None = None,
    ) -> None:
        self.kinds: Mapping[str, JobHandler] = kinds if kinds is not None else {}
        self.indexer, self.lease, self.pins, self.pinned_only = indexer, float(lease), pins, pinned_only
        self.settings, self.catalog = indexer.settings, indexer.catalog
        self.local_cancel = local_cancel or (lambda _batch: False)
        self.host = host_name(self.settings)
        self.id = worker_id or new_worker_id(host=self.host)
        self.secret = secret or (lambda _batch: None)
        self.stopping = threading.Event()  # set by stop(): the current file is cancelled and released
        self.processed = 0
        ingest = self.settings.ingest
        self.retry_base = float(ingest.retry_base_seconds)
        self.retry_max = float(ingest.retry_max_seconds)
        self.max_transient = int(ingest.retry_max_attempts)
        self.sick_after = int(ingest.worker_sick_after)
        self.database_wait = float(ingest.worker_database_wait_seconds)
        self.health = health or HealthFile(None, (self.id,))
        self.stand_down = stand_down
        self.own_failures = 0  # this worker's own infrastructure errors in a row (disk, memory, model)
        self.sick: str | None = None  # why it stood down (then it claims no more)
        self.gave_up: str | None = None  # why it stopped waiting for the catalog
        self._lost_since: float | None = None  # time.monotonic() when the catalog was lost
        self._lost_tries = 0
        self._lost_logged = 0.0

    def stop(self) -> None:
        self.stopping.set()

    # -- the loop -----------------------------------------------------------------------------
    def run(self, *, once: bool = False, idle_exit: float | None = None, poll: float = 0.5) -> int:
        """Work until :meth:`stop`; with ``once``, until no job is queued or running anywhere (a
        running one may still be taken over); with ``idle_exit``, after that many seconds without
        a claimable job; until it stands down (:attr:`sick`) or gives up on the catalog
        (:attr:`gave_up`). A catalog that cannot be reached is waited for (:meth:`wait_for_catalog`).
        Returns how many jobs this worker processed. Raises what is not the infrastructure's (a bug)."""
        idle_since = time.monotonic()
        while not self.stopping.is_set() and self.sick is None:
            try:
                row = self.run_one()
                if row is None and once and queue.unfinished(self.catalog) == 0:
                    break
            except Exception as exc:
                verdict = classify(exc)
                if verdict is None:
                    raise
                if not self.wait_for_catalog(verdict):
                    break
                continue
            self._catalog_back()
            if row is not None:
                idle_since = time.monotonic()
                continue
            if idle_exit is not None and time.monotonic() - idle_since >= idle_exit:
                break
            self.stopping.wait(poll)
        if self.sick is None and self.gave_up is None:
            self.health.update(state="stopped", reason=None)
        return self.processed

    # -- the catalog lost and found -------------------------------------------------------------------
    def wait_for_catalog(self, verdict: Transient) -> bool:
        """The catalog (or what the loop needs) failed with ``verdict``: log "waiting for the
        database" (at the first failure, then every :data:`WAITING_LOG_EVERY` s), report
        ``waiting``, and sleep a back-off (full jitter, 0.5 s doubling up to
        :data:`RECONNECT_MAX_SECONDS`). Returns ``False`` when the worker is to stop instead: asked
        to, or the catalog was gone longer than ``ingest.worker_database_wait_seconds`` (then
        :attr:`gave_up` says why)."""
        now = time.monotonic()
        if self._lost_since is None:
            self._lost_since, self._lost_tries, self._lost_logged = now, 0, 0.0
        self._lost_tries += 1
        gone = now - self._lost_since
        if self.database_wait > 0 and gone > self.database_wait:
            self.gave_up = (
                f"the catalog could not be reached for {gone:.0f} s (ingest.worker_database_wait_seconds"
                f" is {self.database_wait:g}): {verdict.reason}"
            )
            log.error("%s stops: %s", self.id, self.gave_up)
            self.health.update(state="stopped", reason=self.gave_up)
            return False
        delay = backoff_seconds(self._lost_tries, 0.5, min(RECONNECT_MAX_SECONDS, self.retry_max))
        if self._lost_tries == 1 or now - self._lost_logged >= WAITING_LOG_EVERY:
            self._lost_logged = now
            log.warning("%s: waiting for the database (%s); trying again, for %.0f s so far", self.id, verdict.reason, gone)
        self.health.update(state="waiting", reason=f"waiting for the database: {verdict.reason}")
        self.stopping.wait(max(0.05, delay))
        return not self.stopping.is_set()

    def _catalog_back(self) -> None:
        if self._lost_since is not None:
            log.warning("%s: the database is back after %.1f s; going on", self.id, time.monotonic() - self._lost_since)
            self._lost_since = None
            self.health.update(state="running", reason=None)

    def _with_catalog(self, what: str, call: Callable[[], Any]) -> tuple[bool, Any]:
        """``(True, call())``, waiting for the catalog while ``call`` fails for the infrastructure;
        ``(False, None)`` when the worker stops first (its job's lease then lapses and another
        worker takes the job over). Raises what is not the infrastructure's."""
        while True:
            try:
                value = call()
            except Exception as exc:
                verdict = classify(exc)
                if verdict is None:
                    raise
                log.debug("%s: %s failed: %s", self.id, what, verdict.reason)
                if not self.wait_for_catalog(verdict):
                    return False, None
                continue
            self._catalog_back()
            return True, value

    def run_one(self) -> queue.JobRow | None:
        """Claim one job and ingest it; ``None`` when nothing was claimable."""
        queue.expire_dead(self.catalog, self.host, pid_alive)
        job = queue.claim(
            self.catalog, self.id, host=self.host, pins=self.pins, lease=self.lease, pinned_only=self.pinned_only
        )
        if job is None:
            return None
        self.process(job)
        self.processed += 1
        return job

    # -- one job ------------------------------------------------------------------------------
    def process(self, job: queue.JobRow) -> None:
        """Ingest the claimed ``job``'s file, heartbeating, and finish its row: in the context of the
        request that queued it (its request id on the log lines, its trace the parent of the span
        ``ingest job``; :func:`knowledge.telemetry.resumed`), counted in the metrics."""
        carrier = None
        try:
            b = queue.batch_row(self.catalog, job.batch_id)
            carrier = b.notes.get("request") if b is not None else None
        except Exception as exc:  # the catalog is down: the job goes on without its request's context
            log.debug("%s: the batch of job %s could not be read: %s", self.id, job.id, exc)
        with (
            resumed(carrier if isinstance(carrier, dict) else None),
            span("ingest job", job=job.id, file=job.name, store=job.store, attempt=job.attempts, worker=self.id),
        ):
            self._process(job)

    def _process(self, job: queue.JobRow) -> None:
        catalog = self.catalog
        started = time.perf_counter()
        cancel = threading.Event()
        lost = threading.Event()  # the job was taken over (this worker was too slow to heartbeat)
        done = threading.Event()

        def beat() -> None:
            failing = False
            while not done.wait(self.lease / 3):
                try:
                    control = queue.heartbeat(catalog, job.id, self.id)
                except Exception as exc:  # the catalog is down or busy: try again at the next beat
                    if not failing:
                        log.warning(
                            "%s: the heartbeat of job %s failed (%s); trying again at the next beat",
                            self.id,
                            job.id,
                            transient_reason(exc) or exc,
                        )
                    failing = True
                    continue
                failing = False
                if not control.owned:
                    lost.set()
                if control.cancel or not control.owned:
                    cancel.set()
                if self.stopping.is_set():
                    cancel.set()

        last: list[Any] = [0.0, ""]  # when the last progress write was, of which stage

        def progress(stage: str, fraction: float) -> None:
            if self.stopping.is_set() or self.local_cancel(job.batch_id):
                cancel.set()
            kind = stage.split(",", 1)[0]
            now = time.monotonic()
            if kind == last[1] and now - last[0] < PROGRESS_EVERY:
                return
            new_stage = kind != last[1]
            last[0], last[1] = now, kind
            try:
                control = queue.heartbeat(catalog, job.id, self.id, stage, fraction, new_stage=new_stage)
            except Exception as exc:  # the catalog is down: the file goes on; its heartbeat thread retries
                if classify(exc) is None:
                    raise
                return
            if not control.owned:
                lost.set()
            if control.cancel or not control.owned:
                cancel.set()

        def wait_out(exc: BaseException) -> bool:
            """The file is read and embedded, its write failed for the catalog: wait until the
            database answers, then write again if the job is still this worker's (its lease renewed)."""
            verdict = classify(exc)
            while verdict is not None and self.wait_for_catalog(verdict):
                try:
                    control = queue.heartbeat(catalog, job.id, self.id)
                except Exception as again:
                    verdict = classify(again)
                    continue
                self._catalog_back()
                if not control.owned:
                    lost.set()
                return control.owned and not control.cancel
            return False

        beater = threading.Thread(target=beat, name=f"heartbeat:{job.id[:8]}", daemon=True)
        beater.start()
        try:
            result = self._ingest(job, progress, cancel, wait_out)
        finally:
            done.set()
            beater.join(5.0)
        self.health.update(
            last_job={
                "id": job.id,
                "name": job.name,
                "store": job.store,
                "status": "waiting" if isinstance(result, Transient) else str(result.outcome),
            },
            count=True,
        )
        if lost.is_set():
            log.warning("job %s (%s) was taken over by another worker; its result is dropped", job.id, job.name)
            return
        if isinstance(result, Transient):
            self._transient(job, result)
            return
        if result.outcome == Outcome.CANCELLED and self.stopping.is_set() and not self._batch_cancelled(job):
            self._with_catalog("giving the job back", lambda: queue.release(catalog, job.id, self.id))
            return
        self.own_failures = 0  # the worker could do its work (the file may still have failed for itself)
        not_kept = result.file_id != job.source or result.outcome == Outcome.CANCELLED  # cancelled by its batch
        if job.own_file and job.source_kind == "file" and not_kept:
            try:
                self.indexer.stores.forget_file_if_unused(job.source)  # an upload not kept (unchanged, duplicate, cancelled)
            except Exception:
                log.warning("could not drop the unused upload %s", job.source, exc_info=True)
        status = (
            queue.CANCELLED
            if result.outcome == Outcome.CANCELLED
            else queue.FAILED
            if result.outcome == Outcome.FAILED
            else queue.DONE
        )
        written, mine = self._with_catalog(
            "finishing the job",
            lambda: queue.finish(
                catalog,
                job.id,
                self.id,
                status,
                result_dict(result),
                reason=None if status == queue.DONE else result.message,
                error=result.error,
            ),
        )
        if not written:  # the worker stops while the catalog is away: the job's lease lapses, another resumes it
            return
        if not mine:
            log.warning("job %s (%s) was taken over while the database was away; its result is dropped", job.id, job.name)
            return
        seconds = time.perf_counter() - started
        reason = "" if status == queue.DONE else (result.error or "unknown")
        JOBS_FINISHED.labels(status, reason).inc()
        JOB_SECONDS.labels(status).observe(seconds)
        log.info(  # one line a file
            "%s %s into %s: %s%s (attempt %d)",
            self.id,
            job.name,
            job.store,
            status,
            f" ({result.chunks} chunks)" if status == queue.DONE else f": {result.message}",
            job.attempts,
            extra={
                "worker": self.id,
                "job": job.id,
                "batch": job.batch_id,
                "file": job.name,
                "store": job.store,
                "status": status,
                "reason": reason or None,
                "chunks": result.chunks if status == queue.DONE else None,
                "seconds": round(seconds, 3),
                "attempt": job.attempts,
            },
        )

    def _transient(self, job: queue.JobRow, verdict: Transient) -> None:
        """``job`` met an infrastructure error: queued again after a back-off (or failed once its
        transient attempts are spent), or -- the worker's own trouble, ``ingest.worker_sick_after``
        times in a row -- given back as it is while this worker stands down."""
        catalog = self.catalog
        if verdict.own:
            self.own_failures += 1
        if verdict.own and self.own_failures >= self.sick_after and not self.stand_down:
            # the only worker there is: the file fails with the reason (its record too), with Retry
            self._with_catalog(
                "finishing the job",
                lambda: queue.defer(
                    catalog, job.id, self.id, verdict.waiting, 0, max_transient=job.transient_attempts + 1, error="Transient"
                ),
            )
            log.error(
                "%s %s into %s: failed: %s (no other worker to hand it to)", self.id, job.name, job.store, verdict.reason
            )
            return
        if verdict.own and self.own_failures >= self.sick_after:
            self.sick = (
                f"{verdict.reason} ({self.own_failures} jobs in a row failed for this worker's own reasons;"
                " it stands down and gives its job back to the queue)"
            )
            self.stopping.set()
            log.error("%s stands down: %s", self.id, self.sick)
            self.health.update(state="sick", reason=self.sick)
            self._with_catalog(
                "giving the job back",
                lambda: queue.release(catalog, job.id, self.id, reason=f"{verdict.waiting} (its worker stood down)"),
            )
            return
        n = job.transient_attempts + 1
        delay = backoff_seconds(n, self.retry_base, self.retry_max)
        written, status = self._with_catalog(
            "queueing the job again",
            lambda: queue.defer(
                catalog, job.id, self.id, verdict.waiting, delay, max_transient=self.max_transient, error="Transient"
            ),
        )
        if not written or status is None:
            return
        if status == queue.FAILED:
            log.error(
                "%s %s into %s: failed after %d attempts waiting for the infrastructure: %s",
                self.id,
                job.name,
                job.store,
                n,
                verdict.reason,
            )
        else:
            log.warning(
                "%s %s into %s: %s; queued again, not before %.1f s (infrastructure attempt %d of %d)",
                self.id,
                job.name,
                job.store,
                verdict.waiting,
                delay,
                n,
                self.max_transient,
            )

    def _batch_cancelled(self, job: queue.JobRow) -> bool:
        b, _, _ = queue.batch(self.catalog, job.batch_id)
        return b is not None and b.cancel_requested

    def _ingest(
        self,
        job: queue.JobRow,
        progress: Callable[[str, float], None],
        cancel: threading.Event,
        wait_out: Callable[[BaseException], bool] | None = None,
    ) -> IngestResult | Transient:
        """The file's result, or the :class:`~knowledge.service.transient.Transient` error of the
        infrastructure that stopped it (the job is queued again); never raises for the file (a bad
        store or template, a bug: the result says so)."""
        name = job.name
        try:
            if job.source_kind not in ("file", "path"):
                handler = self.kinds.get(job.source_kind)
                if handler is None:
                    return IngestResult(
                        name,
                        Outcome.FAILED,
                        f"{name}: this worker cannot run a job of kind {job.source_kind!r}.",
                        error="JobKind",
                    )
                return handler(job, progress, cancel)
            b, _, _ = queue.batch(self.catalog, job.batch_id)
            options = b.options if b is not None else {}
            template = b.template if b is not None else None
            if job.source_kind == "file":
                source: StoredFile | Path = self.indexer.files.get(job.source)
            else:
                source = Path(job.source)
            password = self.secret(job.batch_id) if job.pinned else None
            result = self.indexer.ingest_file(
                job.store,
                source,
                name,
                template=template,
                password=password,
                progress=progress,
                cancel=cancel,
                attributes=options.get("attributes"),
                readers=options.get("readers"),
                protected=options.get("protected") or (),
                raise_transient=True,
                wait_out=wait_out,
            )
        except Exception as exc:
            verdict = classify(exc)
            if verdict is not None:  # the infrastructure, not the file
                log.warning(
                    "%s %s into %s: %s", self.id, name, job.store, verdict.waiting, exc_info=log.isEnabledFor(logging.DEBUG)
                )
                return verdict
            if isinstance(exc, KnowledgeError):  # the store, template or stored file is the problem
                return IngestResult(name, Outcome.FAILED, reason_of(exc), error=type(exc).__name__)
            if isinstance(exc, OSError):
                return IngestResult(name, Outcome.FAILED, f"{name}: {reason_of(exc)}", error=type(exc).__name__)
            # a bug: say so for this file, keep the batch going
            log.exception("ingesting %s into %s", name, job.store)
            return IngestResult(name, Outcome.FAILED, f"{name}: {unexpected_problem(exc)}.", error=type(exc).__name__)
        if result.outcome == Outcome.FAILED and result.error in TRANSIENT_ERROR_NAMES:  # made a result, not raised
            return Transient(f"{result.message}".rstrip("."), own=result.error == "EmbeddingUnavailable")
        return result


#: How much nicer (Linux ``nice``) the app's worker process runs than the app: the app's searches
#: (its query embedding, the page's Python) get the CPU first, the worker what they leave.
WORKER_NICE = 5


def worker_onnx_threads(cores: int | None = None) -> int:
    """ONNX Runtime threads for the app's worker process when ``embeddings.threads`` is unset: one
    core fewer than the machine has (at least 1), so a search always finds a core free."""
    cores = cores or os.cpu_count() or 1
    return max(1, cores - 1)


class WorkerProcess:
    """The app's ingestion worker as a child process: ``python -m knowledge worker --once`` on the
    same data folder and settings (the environment is inherited), at nice +:data:`WORKER_NICE`, with
    ``embeddings.threads`` bounded by :func:`worker_onnx_threads` unless set. It exits by itself
    once no job is queued or running, or when this process is gone (``--parent``), giving its
    current file back to the queue; :meth:`stop` asks it to (SIGINT), then kills it.

    Args:
        data_dir: the data folder (``--data-dir``).
        concurrency: jobs at once (``--concurrency``: ``ingest.worker_threads``).
        lease: ``--lease`` seconds.
        threads: ONNX threads to set when the settings set none (``None``: :func:`worker_onnx_threads`).
    """

    def __init__(
        self, data_dir: Path, *, concurrency: int = 1, lease: float = queue.LEASE_SECONDS, threads: int | None = None
    ) -> None:
        self.data_dir, self.concurrency, self.lease = Path(data_dir), int(concurrency), float(lease)
        self.threads = threads
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.started = 0  # how many processes were started
        self.started_at = 0.0  # time.monotonic() of the last start

    @property
    def pid(self) -> int | None:
        """The running process's id, ``None`` when none runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def alive(self) -> bool:
        return self.pid is not None

    def returncode(self) -> int | None:
        """The exit status of the last process once it ended (``None``: none, or still running)."""
        proc = self._proc
        return None if proc is None else proc.poll()

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "knowledge",
            "--data-dir",
            str(self.data_dir),
            "worker",
            "--once",
            "--parent",
            str(os.getpid()),
            "--nice",
            str(WORKER_NICE),
            "--lease",
            f"{self.lease:g}",
            "--concurrency",
            str(self.concurrency),
        ]

    def environment(self) -> dict[str, str]:
        """This process's environment for the child: the same settings; the local admin (it ingests
        for everyone); the project importable; ONNX threads bounded unless set."""
        env = {k: v for k, v in os.environ.items() if k != "KNOWLEDGE_USER"}
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        env.setdefault("KNOWLEDGE_EMBEDDINGS__THREADS", str(self.threads or worker_onnx_threads()))
        return env

    def start(self) -> bool:
        """Start the process unless one runs; ``True`` when this call started one."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return False
            self._proc = subprocess.Popen(self.command(), env=self.environment(), stdin=subprocess.DEVNULL)
            self.started += 1
            self.started_at = time.monotonic()
            log.info("started the ingestion worker process %d", self._proc.pid)
            return True

    def stop(self, timeout: float = 20.0) -> None:
        """Ask the process to stop (it gives its file back to the queue), kill it after ``timeout`` s."""
        with self._lock:
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)


__all__ = [
    "EXIT_CRASHED",
    "EXIT_DONE",
    "EXIT_NO_DATABASE",
    "EXIT_SICK",
    "EXIT_USAGE",
    "PROGRESS_EVERY",
    "RECONNECT_MAX_SECONDS",
    "WAITING_LOG_EVERY",
    "WORKER_NICE",
    "HealthFile",
    "Transient",
    "Worker",
    "WorkerProcess",
    "backoff_seconds",
    "classify",
    "host_name",
    "new_worker_id",
    "pid_alive",
    "reason_of",
    "result_dict",
    "result_of",
    "transient_reason",
    "worker_onnx_threads",
]
