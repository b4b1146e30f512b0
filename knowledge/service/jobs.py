"""Ingestion batches: the files of one upload, folder or command, ingested into one store by workers.

:meth:`IngestJob.start` writes the batch as job rows in the catalog (:mod:`knowledge.catalog.jobs`;
an upload's bytes go to the file store first, so any worker can read them) and makes sure this
process's worker thread runs (:mod:`knowledge.service.worker`; ``python -m knowledge worker``
processes claim the same rows). It checks no one's access: :meth:`knowledge.workbench.Workbench.submit_batch`
checks that the person may write to the store, records the batch in the audit trail, then starts it.
The registry and the jobs hold parts (the settings, the catalog, the file store, the indexer),
never a workbench: the worker ingests as the system. The job object is then a view over the rows: each file's stage,
fraction and outcome, the counts and the ETA, read fresh (at most every 0.1 s) by every rerun of
every app process, so a browser reload or a second replica loses nothing and queries never wait
for a worker. :meth:`IngestJob.cancel` (from any process) stops the batch: the file being ingested
is cancelled (its store stays as it was) and the files not started are reported as cancelled.
A subclass with ``durable = False`` (a folder sync) runs its own ``_run`` in a thread of this process.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from knowledge.catalog import jobs as queue
from knowledge.config import Settings
from knowledge.errors import BackendUnavailable, InvalidArgument, KnowledgeError
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.indexing import OCR_SHARE, Indexer, expand_paths, file_names, skipped_text
from knowledge.service.worker import (
    JobHandler,
    Worker,
    WorkerProcess,
    host_name,
    new_worker_id,
    reason_of,
    result_dict,
    result_of,
)
from knowledge.telemetry import job_context

if TYPE_CHECKING:
    from knowledge.access import LocalFolders
    from knowledge.filestore.base import StoredFile

log = logging.getLogger(__name__)

#: A file for a job: ``(name, bytes)`` for an upload, ``(name, path)`` for a file on disk.
Item = tuple[str, "bytes | Path | StoredFile"]


def _stop_all_at_exit(ref: weakref.ref[JobRegistry]) -> None:
    registry = ref()  # the registry is not kept alive by atexit
    if registry is not None:
        registry.stop_all()


class JobRegistry:
    """The ingest jobs of one data folder (one per server process, shared by every browser session):
    the newest job per store -- so a second tab sees a running upload and can stop it -- and the
    running ones, which are cancelled and awaited when the process exits (a daemon thread still
    inside ONNX Runtime when the interpreter shuts down aborts the whole process, "terminate
    called ..."); and this process's worker threads. Thread-safe.

    Args:
        indexer: what the workers ingest with; its parts are the registry's: :attr:`settings`
            (``ingest.*``), :attr:`catalog` (the job rows) and :attr:`files` (an upload's bytes).
    """

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.settings = indexer.settings
        self.catalog = indexer.catalog
        self.files = indexer.files
        #: Handlers of jobs that are not one file, by ``source_kind`` (a source's run: the system
        #: registers :meth:`knowledge.sources.engine.Sources.run_job`); every worker made here gets them.
        self.kinds: dict[str, JobHandler] = {}
        self._latest: dict[str, IngestJob] = {}
        self._running: weakref.WeakSet[IngestJob] = weakref.WeakSet()
        self._views: dict[str, IngestJob] = {}  # batch id -> the view of a batch started elsewhere
        self._lock = threading.Lock()
        #: This process's pin: jobs holding a secret (a PDF password) only its worker may claim.
        self.pin = new_worker_id("pin")
        self._secrets: dict[str, str] = {}  # batch id -> password (never written to the catalog)
        self._cancelled: set[str] = set()  # batch ids cancelled in this process (seen at once)
        self._workers: list[Worker] = []
        self._threads: list[threading.Thread] = []
        self._kick = False
        #: Wakes the waiting worker threads: a batch was queued here (:meth:`ensure_worker`), or they stop.
        self._wake = threading.Condition(self._lock)
        #: The app's worker process (:meth:`use_worker_process`), ``None``: worker threads here.
        self.process: WorkerProcess | None = None
        self._process_failures = 0  # starts in a row that ended with an error within START_GRACE_SECONDS
        self._next_start = 0.0  # time.monotonic() before which a failed process is not started again
        self._judged = 0  # the worker process start whose end was looked at last
        atexit.register(_stop_all_at_exit, weakref.ref(self))

    def started(self, job: IngestJob) -> None:
        with self._lock:
            self._running.add(job)
            self._latest[job.store] = job

    def latest(self, store: str) -> IngestJob | None:
        """The newest job started for ``store``, running or finished, or ``None``: this process's,
        or a batch in the catalog that another process (or an earlier run of this one) started."""
        with self._lock:
            mine = self._latest.get(store)
        try:
            newest = queue.batches(self.catalog, store, limit=1)
        except Exception:  # the catalog is busy or gone: show what this process knows
            log.warning("reading the batches of %s failed", store, exc_info=True)
            return mine
        if not newest or (mine is not None and mine.batch_id == newest[0].id):
            return mine
        b = newest[0]
        if (
            mine is not None
            and mine.created_wall is not None
            and b.created is not None
            and mine.created_wall >= b.created.timestamp()
        ):
            return mine
        with self._lock:
            view = self._views.get(b.id)
            if view is None:
                view = self._views[b.id] = IngestJob.attach(self, b)
        return view

    # -- the in-process worker --------------------------------------------------------------------
    def secret(self, batch_id: str) -> str | None:
        return self._secrets.get(batch_id)

    def remember(self, batch_id: str, password: str | None) -> None:
        if password:
            self._secrets[batch_id] = password

    def cancelled_here(self, batch_id: str) -> bool:
        return batch_id in self._cancelled

    def note_cancel(self, batch_id: str) -> None:
        self._cancelled.add(batch_id)

    def use_worker_process(self) -> bool:
        """Ingest in a child process from now on (the app, ``ingest.worker_process``; see
        :class:`~knowledge.service.worker.WorkerProcess`): this process keeps one thread, which
        ingests only the jobs pinned to it (a PDF password) and starts the child while jobs are
        queued or running -- again after it died (its job is taken over at once). ``False`` (nothing
        changes) when the settings say no, or ``ingest.worker_threads = 0`` (no worker here at all)."""
        threads = worker_threads(self.settings)
        if not self.settings.ingest.worker_process or threads < 1:
            return False
        with self._lock:
            if self.process is None:
                self.process = WorkerProcess(self.settings.data_dir, concurrency=threads, lease=lease_seconds(self.settings))
        return True

    def ensure_worker(self, *, idle_exit: float = 2.0) -> None:
        """Make sure this process's worker threads run (``ingest.worker_threads``, default 1: they
        claim jobs of any process, and the jobs pinned to this one; 0: one thread for the pinned
        jobs only, dedicated ``knowledge worker`` processes do the rest; with a worker process,
        :meth:`use_worker_process`, one thread for the pinned jobs that also keeps the process
        running), and let them know new jobs are queued. A thread ends after ``idle_exit`` seconds
        without a claimable job once no job is queued or running anywhere (while one is, it looks
        every :data:`IDLE_POLL_SECONDS`, so a job whose worker died is resumed); the next batch
        starts it again. The threads ingest for everyone (:class:`~knowledge.service.worker.Worker`
        over the registry's indexer), never as a person."""
        threads = worker_threads(self.settings)
        child = self.process is not None
        with self._lock:
            self._kick = True
            self._wake.notify_all()
            self._threads = [t for t in self._threads if t.is_alive()]
            for n in range(len(self._threads), 1 if child else max(1, threads)):
                worker = Worker(
                    self.indexer,
                    worker_id=new_worker_id("app", host_name(self.settings)),
                    lease=lease_seconds(self.settings),
                    pins=(self.pin,),
                    secret=self.secret,
                    local_cancel=self.cancelled_here,
                    pinned_only=threads == 0 or child,
                    stand_down=bool(self.settings.catalog.url),
                    kinds=self.kinds,
                )
                thread = threading.Thread(
                    target=self._work, args=(worker, idle_exit), name=f"ingest-worker-{n}", daemon=True
                )
                self._workers.append(worker)
                self._threads.append(thread)
                thread.start()

    def resume(self) -> int:
        """At a process's start (the app's workbench, ``serve``): when jobs are queued or running
        (a running one's worker may have been killed), start this process's worker threads, which
        resume them: at once for a worker of this machine whose process is gone, otherwise once its
        lease lapsed (the job ends ``interrupted``, with Retry, when its attempts are used up).
        With ``ingest.worker_threads = 0`` only the jobs pinned to this process are ever taken
        (none, at a start): dedicated workers resume the rest. Returns how many were unfinished.

        Raises:
            KnowledgeError: the catalog cannot be read (``BackendUnavailable`` and the like); the
                caller logs it, the next batch starts the worker."""
        n = queue.unfinished(self.catalog)
        if n and worker_threads(self.settings) > 0:
            self.ensure_worker()
        return n

    def runs_workers(self) -> bool:
        """Whether this process's workers take any job (``ingest.worker_threads`` above 0)."""
        return worker_threads(self.settings) > 0

    def _supervise(self) -> bool:
        """With a worker process: start it when it is not running and jobs are queued or running
        (after an error at its start, again after 2, 4, 8 s; after :data:`MAX_PROCESS_FAILURES`
        such starts in a row, ingest in threads of this process instead). ``True`` while it runs."""
        proc = self.process
        if proc is None:
            return False
        if proc.alive():
            return True
        now = time.monotonic()
        if proc.started != self._judged:  # a process ended: did it fail at its start?
            self._judged = proc.started
            code = proc.returncode()
            if code is not None and code > 0 and now - proc.started_at < START_GRACE_SECONDS:
                self._process_failures += 1
                self._next_start = now + 2.0**self._process_failures
                log.warning(
                    "the ingestion worker process ended with status %s at its start (%d in a row)",
                    code,
                    self._process_failures,
                )
                if self._process_failures >= MAX_PROCESS_FAILURES:
                    log.error("the ingestion worker process cannot start; ingesting in this process's threads")
                    with self._lock:
                        self.process = None
                        for w in self._workers:
                            w.pinned_only = worker_threads(self.settings) == 0
                    return False
            else:  # it finished, or was killed (a signal): start the next one at once
                self._process_failures = 0
        if now < self._next_start:
            return True
        try:
            pending = queue.unfinished(self.catalog)
        except Exception:  # the catalog is busy: look again at the next round
            return True
        if pending:
            proc.start()
            return True
        return False

    def _work(self, worker: Worker, idle_exit: float) -> None:
        idle = time.monotonic()
        unreachable = False  # the catalog could not be reached at the last claim (said once per outage)
        while not worker.stopping.is_set():
            child = self.process is not None
            row = None
            if not child or self._secrets:  # with a worker process, this thread claims only pinned jobs
                try:
                    row = worker.run_one()
                except BackendUnavailable as exc:  # an outage: one line (no traceback), then tried again
                    if not unreachable:
                        log.warning("the ingest worker cannot reach the catalog; it tries again: %s", exc)
                    unreachable = True
                except Exception:  # the catalog is busy (another process holds the DuckDB file): later
                    log.warning("the ingest worker could not claim a job", exc_info=True)
                else:
                    unreachable = False
            if row is not None:
                idle = time.monotonic()
                continue
            if child and self._supervise():
                idle = time.monotonic()
            wait, check = (SUPERVISE_SECONDS if child else BUSY_POLL_SECONDS), False
            with self._lock:
                if self._kick:  # a batch queued here since the claim above: claim again at once
                    self._kick = False
                    idle = time.monotonic()
                    continue
                if time.monotonic() - idle >= idle_exit:
                    check = True
            if check:
                try:  # outside the lock: the catalog may make us wait for another process's turn
                    pending = 0 if worker.pinned_only and self.process is None else queue.unfinished(worker.catalog)
                except Exception:
                    pending = 1
                wait = IDLE_POLL_SECONDS  # work elsewhere: look now and then (a dead worker's job)
                with self._lock:
                    if not pending and not self._kick:  # a batch queued meanwhile keeps the thread
                        if worker in self._workers:
                            self._workers.remove(worker)
                        if threading.current_thread() in self._threads:
                            self._threads.remove(threading.current_thread())
                        return
            with self._lock:  # until the next look, a batch queued here, or stop_all
                if not self._kick and not worker.stopping.is_set():
                    self._wake.wait(wait)

    def running(self) -> list[IngestJob]:
        with self._lock:
            return [j for j in self._running if not j.done]

    def stop_all(self, timeout: float = 30.0) -> None:
        """Stop this process's work: the worker thread gives its current file back to the queue
        (another worker resumes it) and the thread-run jobs (syncs) are cancelled; waits up to
        ``timeout`` seconds for each."""
        with self._lock:
            jobs = [j for j in self._running if not j.durable]
            workers, threads = list(self._workers), list(self._threads)
        for worker in workers:
            worker.stop()
        with self._lock:
            self._wake.notify_all()
        for job in jobs:
            job.cancel()
        for thread in threads:
            thread.join(timeout)
        if self.process is not None:  # after the threads: nothing starts it again
            self.process.stop(timeout)
        for job in jobs:
            job.wait(timeout)


#: Seconds between a worker thread's looks at the queue in the ``idle_exit`` window after its last job
#: (a job whose retry time came, a job another process queued); a batch queued in this process wakes
#: it at once.
BUSY_POLL_SECONDS = 0.5
#: Seconds between an idle worker thread's looks at the queue while another process's jobs run.
IDLE_POLL_SECONDS = 2.0
#: Seconds between the supervising thread's looks at the app's worker process.
SUPERVISE_SECONDS = 0.5
#: Seconds after its start within which a worker process's error exit counts as a failed start.
START_GRACE_SECONDS = 20.0
#: Failed starts in a row after which the app ingests in its own threads again.
MAX_PROCESS_FAILURES = 3


def worker_threads(settings: Settings) -> int:
    """``ingest.worker_threads`` of ``settings``."""
    return int(settings.ingest.worker_threads)


def lease_seconds(settings: Settings | None = None) -> float:
    """The heartbeat lease of this process's workers, seconds: ``ingest.job_lease_seconds`` of
    ``settings``, else :data:`knowledge.catalog.jobs.LEASE_SECONDS` (30 s)."""
    return float(settings.ingest.job_lease_seconds) if settings is not None else queue.LEASE_SECONDS


@dataclass
class FileProgress:
    """One file of a job: ``stage`` is waiting, reading, chunking, embedding, writing or done;
    ``fraction`` in [0, 1] of this file; ``result`` once the file is finished; ``stage_since``
    (``time.monotonic()`` seconds) when the current stage began."""

    name: str
    stage: str = "waiting"
    fraction: float = 0.0
    result: IngestResult | None = None
    stage_since: float = 0.0
    stage_start_fraction: float = 0.0
    job_id: str | None = None  # the file's job row (a durable batch's)
    ended: float | None = None  # time.monotonic() when the result came (None: unknown or not yet)
    #: Why a queued file waits to be tried again ("waiting: the file store cannot be reached (...)"),
    #: after an error of the infrastructure (:func:`knowledge.catalog.jobs.defer`); ``None`` otherwise.
    waiting_reason: str | None = None

    def update(self, stage: str, fraction: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        fraction = max(0.0, min(1.0, fraction))
        if _kind(stage) != _kind(self.stage):  # "OCR, page 2 of 9" -> "OCR, page 3 of 9": one stage
            self.stage_since, self.stage_start_fraction = now, fraction
        self.stage = stage
        self.fraction = fraction

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left for this file, extrapolated from the pace so far of the stage that takes the
        time: OCR (per page; the time left is the OCR's, the rest of the file is quick) or embedding;
        ``None`` before there is enough to go on (5 % of the stage or 2 s)."""
        kind = _kind(self.stage)
        if self.result is not None or kind not in ("embedding", "OCR"):
            return None
        end = OCR_SHARE if kind == "OCR" else 1.0
        now = time.monotonic() if now is None else now
        done = self.fraction - self.stage_start_fraction
        spent = now - self.stage_since
        if (done < 0.05 * (end - self.stage_start_fraction) and spent < 2.0) or done <= 0:
            return None
        return spent / done * max(0.0, end - self.fraction)


#: Seconds of the time constant with which a batch's shown estimate follows a new one.
ETA_SMOOTHING_SECONDS = 15.0


def batch_eta(files: Sequence[tuple[int, float, str, float | None]], started: float, now: float) -> float | None:
    """Seconds left for a batch, from ``(bytes, fraction, state, finished at)`` per file: ``state``
    is ``"waiting"``, ``"running"`` or ``"done"``; times are ``time.monotonic()`` seconds, like
    ``started`` (the batch's start) and ``now``.

    The pace is bytes per second of the finished files, from the start to the last result: a
    file's own progress does not enter it (its stages are not even: reading, OCR and embedding
    take different shares of its time by format), and neither does a first small file's fixed
    cost (nothing is said before 5 % of the bytes are in finished files). The time left is the
    bytes not finished at that pace, less the time the files in progress have had since the last
    result (at least a tenth of their share is still to come). ``None`` when the sizes are unknown,
    before 5 s, or before 5 % of the bytes are in finished files (a running file's own line has
    :meth:`FileProgress.eta_seconds`).
    """
    total = sum(size for size, _, _, _ in files)
    if total <= 0 or now - started < 5.0:
        return None
    done_bytes = sum(size for size, _, state, _ in files if state == "done")
    last = max((at for _, _, state, at in files if state == "done" and at is not None), default=None)
    if done_bytes < 0.05 * total or done_bytes <= 0 or last is None or last <= started:
        return None
    pace = done_bytes / (last - started)  # bytes per second
    running = sum(size for size, _, state, _ in files if state == "running")
    waiting = total - done_bytes - running
    current_left = max(running / pace - max(0.0, now - last), 0.1 * running / pace)
    return waiting / pace + current_left


def round_eta(seconds: float) -> float:
    """An estimate rounded as it deserves: whole minutes up to 10 min, 5 min up to an hour, 10 min
    above (seconds under 90 s are left to the caller's words)."""
    if seconds < 90:
        return seconds
    step = 60 if seconds < 600 else 300 if seconds < 3600 else 600
    return max(step, round(seconds / step) * step)


def _kind(stage: str) -> str:
    """The stage without its detail: ``"OCR, page 3 of 9"`` -> ``"OCR"``."""
    return stage.split(",", 1)[0]


class IngestJob:
    """Ingest ``items`` into ``store`` (call :meth:`start`): job rows in the catalog, ingested by
    this process's worker thread or by any ``knowledge worker`` process. A person's batch is made and
    started by :meth:`knowledge.workbench.Workbench.submit_batch` (which checks and records it
    first); :meth:`start` itself checks no one's access.

    Args:
        jobs: the registry of this process (its catalog, file store and workers); ``None`` for a
            job only read, never started (a test of its figures).
        store: the store's name (created on the fly from ``template``, as ``ingest_file`` does).
        items: ``(name, bytes)`` or ``(name, path)`` pairs, ingested in order.
        template, password, attributes: passed to ``ingest_file`` for every file (the password
            stays in this process: only its worker ingests those files).
        options: more of the batch's options, recorded with it for any process to read (the REST
            API's chunking strategy and notes); ``attributes`` wins over a key of the same name.
        batch_id: the batch's id (default: a new one): a caller that tries again after an outage
            (the CLI) gives the id of its first attempt, and a batch already written under it is
            not written again (:func:`new_batch_id`).

    An item's source may also be a ``StoredFile`` already in the file store (the API's uploads).
    """

    #: Whether the batch is job rows (``False``: a subclass runs ``_run`` in a thread of this process).
    durable = True

    def __init__(
        self,
        jobs: JobRegistry | None,
        store: str,
        items: Sequence[Item],
        *,
        template: str | None = None,
        password: str | None = None,
        attributes: dict | None = None,
        options: dict[str, Any] | None = None,
        batch_id: str | None = None,
    ) -> None:
        self.jobs, self.store, self.template, self.password = jobs, store, template, password
        self.attributes = attributes
        self.options: dict[str, Any] = dict(options or {})
        self._items = list(items)
        self._files = [FileProgress(name) for name, _ in self._items]
        self._sizes = [source_size(source) for _, source in self._items]  # bytes per file (0: unknown)
        self.started_at: float | None = None  # time.monotonic() when the batch started
        self._cancel = threading.Event()
        self.finished_at: float | None = None  # time.monotonic() when the last file got its result
        #: Sentences about the batch as a whole (a folder walk's skipped files), for the page to show.
        self.notes: list[str] = []
        self.skipped: list[str] = []  # files of a folder left out by the allowed folders (from_folder)
        self.batch_id: str | None = None  # the catalog's batch, once started
        self._planned_id = batch_id or queue.new_id()  # the batch's id for every attempt of start (see there)
        self._enqueue_tried = batch_id is not None  # an id given: perhaps written by an earlier attempt
        self.created_wall: float | None = None  # time.time() at the start
        self._read_at = -1.0
        self._statuses: list[str] = []  # each file's job row status (a durable batch's)
        self._row_lock = threading.Lock()
        self._eta_seen: tuple[float, float] | None = None  # (when, seconds) last given by eta_seconds
        self._thread = threading.Thread(target=self._run, name=f"ingest:{store}", daemon=True)

    @classmethod
    def attach(cls, jobs: JobRegistry, batch: queue.BatchRow) -> IngestJob:
        """The view of a batch already in the catalog (started by another process, or before a restart)."""
        job = cls(
            jobs,
            batch.store,
            [],
            template=batch.template,
            attributes=batch.options.get("attributes"),
            options={k: v for k, v in batch.options.items() if k != "attributes"},
        )
        job.batch_id = batch.id
        job.notes = list(batch.notes.get("notes") or [])
        job.skipped = list(batch.notes.get("skipped") or [])
        job.created_wall = batch.created.timestamp() if batch.created is not None else None
        job._refresh(force=True)
        return job

    @classmethod
    def from_folder(
        cls,
        jobs: JobRegistry | None,
        store: str,
        folder: str | os.PathLike,
        glob: str | None = None,
        *,
        folders: LocalFolders | None = None,
        **kwargs,
    ) -> IngestJob:
        """A job for the files of ``folder`` matching ``glob`` (default ``**/*``; hidden files skipped).

        ``folders`` confines the walk (the app passes its :func:`~knowledge.access.app_folders`): the
        folder itself, with symlinks resolved, must be allowed, and a file inside it that is a symlink
        leading out of the allowed folders (or into a hidden folder, or into the data folder) is left
        out and counted in :attr:`skipped`. ``None`` reads any path (the CLI's own use).

        Raises:
            PathNotAllowed: ``folders`` does not allow the folder.
            InvalidArgument: the folder does not exist, is not a folder, or no file matches.
        """
        raw = str(folder).strip()
        path = Path(raw).expanduser()
        if raw and folders is not None:
            path = folders.check(path)
        if not raw:
            raise InvalidArgument("Type the path of a folder on this machine.")
        if not path.is_dir():
            raise InvalidArgument(f"{raw} is not a folder on this machine (give the path of a folder the app can read).")
        walk: dict[str, int] = {}  # files the walk left out, by reason (glob, hidden)
        found = [p for p in expand_paths([path], glob or None, walk) if isinstance(p, Path)]
        skipped = [p for p in found if folders is not None and not folders.allows(p)]
        found = [p for p in found if p not in skipped]
        note = skipped_text(walk)
        if not found:
            extra = f" ({len(skipped)} left out: outside the allowed folders)" if skipped else ""
            raise InvalidArgument(f"No file in {path} matches {glob or '**/*'!r}{extra}." + (f" {note}" if note else ""))
        names = file_names(found)
        job = cls(jobs, store, [(names[p], p) for p in found], **kwargs)
        job.skipped = [str(p) for p in skipped]
        job.notes = [note] if note else []
        return job

    # -- control ----------------------------------------------------------------------------------
    @property
    def registry(self) -> JobRegistry:
        """The registry the job was made with. Raises ``RuntimeError`` for a job made without one."""
        if self.jobs is None:
            raise RuntimeError("this ingest job was made without a job registry: it can be read, not run")
        return self.jobs

    @property
    def item_names(self) -> list[str]:
        """The names of the files still to be queued (all of them before :meth:`start`; none after)."""
        return [name for name, _ in self._items]

    def start(self) -> Self:
        """Write the batch to the catalog and wake this process's worker; returns ``self``. No access
        is checked here: a person's batch goes through :meth:`knowledge.workbench.Workbench.submit_batch`.

        An upload's bytes are saved to the file store now (a file over the size limit, or a full
        disk, is that file's failure, the rest go on).

        Raises:
            BackendUnavailable: the catalog cannot be reached. A job of paths (the CLI's) may be started
                again then: every attempt writes the same batch id, and one whose commit went through
                (its answer lost with the connection) is not written twice."""
        self.started_at = time.monotonic()
        self.created_wall = time.time()
        registry = self.registry
        if not self.durable:
            registry.started(self)
            self._thread.start()
            return self
        pin = registry.pin if self.password else None
        sources, failures = [], {}
        for n, (name, source) in enumerate(self._items):
            try:
                sources.append(self._source(name, source, pin))
            except (KnowledgeError, OSError) as exc:
                failures[n] = IngestResult(name, Outcome.FAILED, f"{name}: {reason_of(exc)}", error=type(exc).__name__)
                sources.append(queue.JobSource(name, "failed", "", 0, pinned=registry.pin))
        batch_id = self._planned_id
        registry.remember(batch_id, self.password)
        if self._enqueue_tried and queue.batch(registry.catalog, batch_id)[0] is not None:
            self.batch_id = batch_id  # the last attempt's commit went through; its answer was lost
        else:
            self._enqueue_tried = True
            self.batch_id = queue.enqueue(
                registry.catalog,
                self.store,
                sources,
                template=self.template,
                batch_id=batch_id,
                options={**self.options, **({"attributes": self.attributes} if self.attributes else {})},
                # the request that queued it (its id, its trace) goes with it to the worker
                notes={"notes": self.notes, "skipped": self.skipped, "request": job_context()},
                created_by=registry.pin,
                failed={n: result_dict(r) for n, r in failures.items()},
            )
        self._items = []  # the bytes are in the file store now
        if self._cancel.is_set():  # stopped before it started: every file "not started"
            self.cancel()
        registry.started(self)
        registry.ensure_worker()  # the worker ingests for everyone (the indexer): never as a person
        return self

    def _source(self, name: str, source: Any, pin: str | None) -> queue.JobSource:
        if isinstance(source, (bytes, bytearray, memoryview)):
            registry = self.registry
            stored = registry.files.save(name, None, bytes(source), max_bytes=registry.settings.ingest.max_file_bytes)
            return queue.JobSource(name, "file", stored.id, stored.size, pinned=pin, own_file=True)
        if isinstance(source, (str, os.PathLike)):
            path = Path(source).absolute()
            host = host_name(self.registry.settings)
            return queue.JobSource(name, "path", str(path), source_size(path), host=host, pinned=pin)
        return queue.JobSource(name, "file", source.id, int(getattr(source, "size", 0) or 0), pinned=pin)

    # -- the rows ---------------------------------------------------------------------------------
    @property
    def files(self) -> list[FileProgress]:
        """Each file's progress and result, in order (read from the job rows at most every 0.1 s)."""
        self._refresh()
        return self._files

    @property
    def waiting_for_worker(self) -> bool:
        """Whether no worker has claimed any file of the batch yet (every job row still ``queued``):
        the page says "queued — waiting for a worker" instead of a bar that does not move."""
        self._refresh()
        return self.durable and bool(self._statuses) and all(s == queue.QUEUED for s in self._statuses)

    @property
    def sizes(self) -> list[int]:
        self._refresh()
        return self._sizes

    def _refresh(self, *, force: bool = False) -> None:
        if not self.durable or self.batch_id is None:
            return
        with self._row_lock:
            now = time.monotonic()
            if not force and now - self._read_at < 0.1:
                return
            batch, rows, db_now = queue.batch(self.registry.catalog, self.batch_id)
            self._read_at = now
            if batch is None:
                return
            if batch.cancel_requested:
                self._cancel.set()
            if len(self._files) != len(rows):
                self._files = [FileProgress(r.name) for r in rows]
            self._sizes = [int(r.size or 0) for r in rows]
            self._statuses = [r.status for r in rows]

            def mono(t: Any) -> float | None:
                return None if t is None or db_now is None else now - (db_now - t).total_seconds()

            for fp, r in zip(self._files, rows):
                fp.stage, fp.fraction = r.stage, float(r.fraction)
                fp.stage_since = mono(r.stage_since) or now
                fp.stage_start_fraction = float(r.stage_start_fraction)
                fp.result = row_result(
                    r.name, r.status, r.result, r.reason, file_id=r.source if r.source_kind == "file" else None
                )
                fp.job_id = r.id
                fp.ended = mono(r.finished) if fp.result is not None else None
                fp.waiting_reason = (
                    r.reason
                    if r.status == queue.QUEUED and r.transient_attempts and (r.reason or "").startswith("waiting")
                    else None
                )
            starts = [t for r in rows if (t := mono(r.started)) is not None]
            created = mono(batch.created)
            self.started_at = min(starts) if starts else created
            if rows and all(r.final for r in rows):
                ends = [t for r in rows if (t := mono(r.finished)) is not None]
                self.finished_at = max(ends) if ends else now

    @staticmethod
    def latest(jobs: JobRegistry, store: str) -> IngestJob | None:
        """The newest job started for ``store`` (:meth:`JobRegistry.latest`), from any browser tab
        or session (so a second tab sees a running upload and can stop it)."""
        return jobs.latest(store)

    @classmethod
    def visible_for(
        cls, jobs: JobRegistry, store: str, mine: IngestJob | None = None, *, recent_seconds: float = 60.0
    ) -> IngestJob | None:
        """The batch a page shows for ``store``: the newest job of this process when another tab or
        session started it and it runs, or ended ``recent_seconds`` ago at most (so a Stop clicked
        there, or here, shows what it stopped); otherwise ``mine``, the page's own job (``None``:
        none)."""
        latest = cls.latest(jobs, store)
        if (
            latest is not None
            and latest is not mine
            and (not latest.done or (latest.finished_at or 0) > time.monotonic() - recent_seconds)
        ):
            return latest
        return mine

    @classmethod
    def running_for(cls, jobs: JobRegistry, store: str) -> bool:
        """Whether a job of ``jobs`` is ingesting into ``store`` now."""
        latest = cls.latest(jobs, store)
        return latest is not None and not latest.done

    def replace_result(self, file_id: str, result: IngestResult) -> int:
        """After the file ``file_id`` of this batch was ingested again (a retry, with a password say),
        its line shows ``result`` instead of the first outcome. Returns how many files were updated
        (0: the file is not in this batch)."""
        n = 0
        for fp in self.files:
            if fp.result is not None and fp.result.file_id == file_id:
                fp.result = result
                if self.durable and fp.job_id is not None:
                    queue.set_result(self.registry.catalog, fp.job_id, result_dict(result))
                n += 1
        self._read_at = time.monotonic()
        return n

    def cancel(self) -> None:
        """Stop after the current step: the current file is cancelled, the rest are not started
        (from any process: the batch's row says so)."""
        self._cancel.set()
        if self.durable and self.batch_id is not None:
            self.registry.note_cancel(self.batch_id)
            queue.cancel(self.registry.catalog, self.batch_id)
            self._read_at = -1.0

    @property
    def cancelled(self) -> bool:
        self._refresh()
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        """True once every file has a result (also after a cancel)."""
        return all(f.result is not None for f in self.files)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the job to finish (polling its rows); returns :attr:`done`."""
        if not self.durable:
            if self._thread.is_alive():
                self._thread.join(timeout)
            return self.done
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.02
        while not self.done:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
        return True

    @property
    def results(self) -> list[IngestResult]:
        return [f.result for f in self.files if f.result is not None]

    @property
    def fraction(self) -> float:
        """How far the whole job is, in [0, 1] (each file counts the same)."""
        if not self.files:
            return 1.0
        return sum(1.0 if f.result else f.fraction for f in self.files) / len(self.files)

    @property
    def finished(self) -> int:
        """How many files have their result."""
        return sum(1 for f in self.files if f.result is not None)

    @property
    def chunks(self) -> int:
        """Chunks indexed so far by the finished files of the batch."""
        return sum(f.result.chunks for f in self.files if f.result is not None and f.result.outcome == "indexed")

    def counts(self) -> dict[str, int]:
        """Finished files by outcome: ``{"indexed": 3, "failed": 1, ...}``."""
        out: dict[str, int] = {}
        for f in self.files:
            if f.result is not None:
                out[f.result.outcome] = out.get(f.result.outcome, 0) + 1
        return out

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left for the whole batch (:func:`batch_eta`, smoothed over this view's calls:
        the estimate counts down with the clock and moves towards a new one with a 15 s time
        constant, so one slow file does not make it jump). ``None`` before there is enough to go
        on, once the batch is done, or when the sizes are unknown."""
        if self.done or self.started_at is None:
            self._eta_seen = None
            return None
        now = time.monotonic() if now is None else now
        files = self.files
        raw = batch_eta(
            [
                (
                    size,
                    f.fraction,
                    "done" if f.result is not None else "waiting" if f.stage == "waiting" else "running",
                    f.ended,
                )
                for f, size in zip(files, self.sizes)
            ],
            self.started_at,
            now,
        )
        seen = self._eta_seen
        if raw is None:
            return None
        if seen is None or now <= seen[0]:
            value = raw
        else:
            at, before = seen
            weight = 1.0 - math.exp(-(now - at) / ETA_SMOOTHING_SECONDS)
            value = weight * raw + (1.0 - weight) * max(0.0, before - (now - at))
        self._eta_seen = (now, value)
        return value

    # -- work -------------------------------------------------------------------------------------
    def _run(self) -> None:
        """A batch that is not job rows (``durable = False``: a folder sync, a web crawl) runs here, in
        a thread of this process; each such subclass says how."""
        raise NotImplementedError(f"{type(self).__name__} is durable: its files are job rows, ingested by workers")


def new_batch_id() -> str:
    """A new id for a batch of job rows (``IngestJob(batch_id=)``), made before its first attempt."""
    return queue.new_id()


def row_result(
    name: str, status: str, result: dict[str, Any] | None, reason: str | None, *, file_id: str | None = None
) -> IngestResult | None:
    """The file result of an ingest job row -- its file's ``name``, its ``status`` (queued, running,
    done, failed, cancelled, interrupted), its recorded ``result`` (a dict, once final) and
    ``reason`` -- as a page, a command and the REST API report it: ``None`` while queued or running;
    the recorded result once final (a cancelled job's without a name of its own: ``CANCELLED``);
    without one, a failure that says why (an interrupted job: ``error="Interrupted"``, to retry),
    with ``file_id`` (the stored file the job ingests, when known)."""
    if status not in queue.FINAL:
        return None
    if result:
        res = result_of(result, name)
        if status == queue.CANCELLED and "name" not in result:
            res = IngestResult(name, Outcome.CANCELLED, f"{name}: {res.message}")
        return res
    return IngestResult(
        name,
        Outcome.FAILED,
        f"{name}: {reason or status}",
        file_id=file_id,
        error="Interrupted" if status == queue.INTERRUPTED else None,
    )


def source_size(source: Any) -> int:
    """Bytes of an item's source: its length, a path's size on disk, a seekable stream's size from
    where it stands, or a stored file's ``size`` (0 when unknown)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return len(source)
    if isinstance(source, (str, os.PathLike)):
        try:
            return Path(source).stat().st_size
        except OSError:
            return 0
    if hasattr(source, "seek") and hasattr(source, "tell"):
        try:
            at = source.tell()
            end = source.seek(0, os.SEEK_END)
            source.seek(at)
            return max(0, int(end) - int(at))
        except (OSError, ValueError):
            return 0
    return int(getattr(source, "size", 0) or 0)


__all__ = ["FileProgress", "IngestJob", "Item", "new_batch_id", "row_result", "source_size"]
