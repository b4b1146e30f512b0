"""The ingestion queue's SQL (tables ``ingest_batches`` and ``ingest_jobs``, migration 8).

A batch is the files one upload, folder or CLI command asked for, into one store; each file is a job
row that a worker claims, heartbeats while it works, and finishes. The functions take a catalog
(anything with ``cursor()`` and ``dialect``) and run short statements with ``?`` placeholders, the
same SQL on DuckDB and PostgreSQL except the claim: ``FOR UPDATE SKIP LOCKED`` on PostgreSQL (many
workers on many machines), the catalog's lock on DuckDB (one process opens the file). Times are the
database's own clock (``now()``), so the heartbeat lease means the same to every machine.

States: ``queued`` -> ``running`` (claim) -> ``done`` / ``failed`` / ``cancelled`` (finish);
``queued`` -> ``cancelled`` (cancel); ``running`` whose heartbeat lapsed -> ``queued`` again (take
over, while attempts remain) or ``interrupted``; ``running`` -> ``queued`` not before a back-off
(:func:`defer`: the infrastructure failed, not the file; migration 15) or ``failed`` once its
transient attempts are spent; ``failed`` / ``interrupted`` / ``cancelled`` -> ``queued`` (retry).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

QUEUED, RUNNING, DONE, FAILED, CANCELLED, INTERRUPTED = ("queued", "running", "done", "failed", "cancelled", "interrupted")
#: The states a job ends in (a retry queues it again).
FINAL = (DONE, FAILED, CANCELLED, INTERRUPTED)
#: Seconds a worker's heartbeat stays good by default: a job whose worker was silent longer is taken over.
LEASE_SECONDS = 30.0
MAX_ATTEMPTS = 3
#: Transient attempts (:func:`defer`) after which a job fails with its last reason by default
#: (``ingest.retry_max_attempts``): with the default back-off, hours of waiting.
MAX_TRANSIENT_ATTEMPTS = 50


class QueueCatalog(Protocol):
    """What the queue needs of a catalog (:class:`knowledge.catalog.Catalog`)."""

    @property
    def dialect(self) -> str: ...

    def cursor(self) -> Any: ...


@dataclass(frozen=True)
class JobSource:
    """One file to enqueue: ``kind`` ``"file"`` (``source`` a file-store id: any worker reads it) or
    ``"path"`` (a path on machine ``host``: only workers there claim it). ``pinned`` reserves the job
    for one process (its in-process worker holds a secret, such as a PDF password, that is never
    written to the catalog). ``own_file``: the batch saved the bytes itself (they may be dropped
    when no store keeps them). ``size`` in bytes (0: unknown)."""

    name: str
    kind: str
    source: str
    size: int = 0
    host: str | None = None
    pinned: str | None = None
    own_file: bool = False


_JOB_COLUMNS = (
    "id",
    "batch_id",
    "seq",
    "store",
    "name",
    "source_kind",
    "source",
    "host",
    "pinned",
    "own_file",
    "size",
    "status",
    "attempts",
    "max_attempts",
    "worker",
    "lease_seconds",
    "heartbeat",
    "stage",
    "fraction",
    "stage_since",
    "stage_start_fraction",
    "queued",
    "started",
    "finished",
    "reason",
    "error",
    "result",
    "transient_attempts",
    "not_before",
)
_JOB_SELECT = "SELECT " + ", ".join(_JOB_COLUMNS) + " FROM ingest_jobs"
_BATCH_COLUMNS = ("id", "store", "template", "options", "notes", "cancel_requested", "created_by", "created")
_BATCH_SELECT = "SELECT " + ", ".join(_BATCH_COLUMNS) + " FROM ingest_batches"


@dataclass(frozen=True)
class JobRow:
    """A row of ``ingest_jobs`` (times are the database's, timezone-aware; ``result`` the file's
    :class:`~knowledge.outcomes.IngestResult` as a dict once finished)."""

    id: str
    batch_id: str
    seq: int
    store: str
    name: str
    source_kind: str
    source: str
    host: str | None
    pinned: str | None
    own_file: bool
    size: int | None
    status: str
    attempts: int
    max_attempts: int
    worker: str | None
    lease_seconds: float | None
    heartbeat: datetime | None
    stage: str
    fraction: float
    stage_since: datetime | None
    stage_start_fraction: float
    queued: datetime
    started: datetime | None
    finished: datetime | None
    reason: str | None
    error: str | None
    result: dict[str, Any] | None
    transient_attempts: int = 0  # returns to the queue for the infrastructure's errors (migration 15)
    not_before: datetime | None = None  # not claimed before this time (a back-off)

    @property
    def final(self) -> bool:
        return self.status in FINAL


@dataclass(frozen=True)
class BatchRow:
    """A row of ``ingest_batches``: ``options`` (attributes, ...) and ``notes`` (sentences about
    the batch, the skipped files) as stored."""

    id: str
    store: str
    template: str | None
    options: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    cancel_requested: bool = False
    created_by: str | None = None
    created: datetime | None = None


@dataclass(frozen=True)
class Control:
    """What a heartbeat learns: ``owned`` (the job is still this worker's; ``False`` once it was
    taken over or finished elsewhere) and ``cancel`` (its batch was cancelled, from any process)."""

    owned: bool
    cancel: bool


def _loads(value: Any) -> Any:
    """A JSON column's value: DuckDB returns the text, psycopg the decoded value."""
    if value is None or not isinstance(value, str):
        return value
    return json.loads(value)


def _job(row: Sequence[Any]) -> JobRow:
    values = dict(zip(_JOB_COLUMNS, row))
    values["result"] = _loads(values["result"])
    values["own_file"] = bool(values["own_file"])
    values["transient_attempts"] = int(values["transient_attempts"] or 0)
    return JobRow(**values)


def _batch(row: Sequence[Any]) -> BatchRow:
    values = dict(zip(_BATCH_COLUMNS, row))
    values["options"] = _loads(values["options"]) or {}
    values["notes"] = _loads(values["notes"]) or {}
    values["cancel_requested"] = bool(values["cancel_requested"])
    return BatchRow(**values)


def new_id() -> str:
    return uuid.uuid4().hex


# -- writing ------------------------------------------------------------------------------------


def enqueue(
    catalog: QueueCatalog,
    store: str,
    items: Iterable[JobSource],
    *,
    template: str | None = None,
    options: dict[str, Any] | None = None,
    notes: dict[str, Any] | None = None,
    created_by: str | None = None,
    max_attempts: int = MAX_ATTEMPTS,
    batch_id: str | None = None,
    failed: dict[int, dict[str, Any]] | None = None,
) -> str:
    """Add a batch of ``items`` for ``store`` (in this order), all ``queued``, in one transaction.
    ``options`` are what every file is ingested with (``{"attributes": {...}}``); ``notes`` what the
    page shows about the batch; ``failed`` ``{index: result}`` the items that failed before they
    could be queued (their upload could not be saved): recorded ``failed`` with that result.
    Returns the batch's id (``batch_id`` when given)."""
    batch_id = batch_id or new_id()
    failed = failed or {}
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        try:
            cur.execute(
                "INSERT INTO ingest_batches (id, store, template, options, notes, cancel_requested,"
                " created_by, created) VALUES (?, ?, ?, ?, ?, FALSE, ?, now())",
                [batch_id, store, template, json.dumps(options or {}), json.dumps(notes or {}), created_by],
            )
            for seq, item in enumerate(items):
                cur.execute(
                    "INSERT INTO ingest_jobs (id, batch_id, seq, store, name, source_kind, source, host,"
                    " pinned, own_file, size, status, max_attempts, queued, result, reason, stage,"
                    " fraction, finished)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?, ?, ?, ?, "
                    + ("now())" if seq in failed else "NULL)"),
                    [
                        new_id(),
                        batch_id,
                        seq,
                        store,
                        item.name,
                        item.kind,
                        item.source,
                        item.host,
                        item.pinned,
                        item.own_file,
                        item.size,
                        FAILED if seq in failed else QUEUED,
                        max_attempts,
                        json.dumps(failed[seq]) if seq in failed else None,
                        failed[seq].get("message") if seq in failed else None,
                        "done" if seq in failed else "waiting",
                        1.0 if seq in failed else 0.0,
                    ],
                )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
    return batch_id


def take_over(catalog: QueueCatalog) -> int:
    """Jobs ``running`` whose worker's heartbeat is older than its lease: queued again while
    attempts remain (a worker resumes them; the ingestion replaces what the lost attempt wrote),
    otherwise ``interrupted``. Returns how many jobs changed. Each statement tests the attempts
    itself: a lease that lapses between the two must not skip the first and end in the second."""
    lapsed = "status = 'running' AND (heartbeat IS NULL OR heartbeat < now() - lease_seconds * INTERVAL '1 second')"
    with catalog.cursor() as cur:
        requeued = cur.execute(
            "UPDATE ingest_jobs SET status = 'queued', stage = 'waiting', fraction = 0,"
            " reason = 'taken over: worker ' || coalesce(worker, '?') || ' stopped while ingesting it'"
            f" WHERE {lapsed} AND attempts < max_attempts RETURNING id"
        ).fetchall()
        stopped = cur.execute(
            "UPDATE ingest_jobs SET status = 'interrupted', finished = now(),"
            " reason = 'interrupted: the worker stopped while ingesting it (' || CAST(attempts AS TEXT) || ' attempts);"
            " retry it'"
            f" WHERE {lapsed} AND attempts >= max_attempts RETURNING id, store, name, source, reason"
        ).fetchall()
        for _id, store, name, source, reason in stopped:  # the file's record follows: failed, with Retry
            cur.execute(
                "UPDATE store_files SET status = 'failed', reason = ?, error = 'Interrupted', updated = now()"
                " WHERE store = ? AND status IN ('processing', 'pending') AND (file_id = ? OR file_name = ?)",
                [reason, store, source, name],
            )
    return len(requeued) + len(stopped)


def expire_dead(catalog: QueueCatalog, host: str, alive: Callable[[int], bool]) -> int:
    """Running jobs of workers on ``host`` whose process is gone (``alive(pid)`` false; worker ids
    are ``host:pid:...``, :func:`knowledge.service.worker.new_worker_id`) lose their lease now, so
    the next :func:`take_over` resumes them at once instead of after the lease (a restart after a
    ``kill -9``). Returns how many workers were found dead."""
    with catalog.cursor() as cur:
        rows = cur.execute(
            "SELECT DISTINCT worker FROM ingest_jobs WHERE status = 'running' AND worker IS NOT NULL"
        ).fetchall()
        dead = []
        for (worker,) in rows:
            parts = str(worker).split(":")
            if len(parts) >= 3 and parts[0] == host and parts[1].isdigit() and not alive(int(parts[1])):
                dead.append(worker)
        for worker in dead:
            cur.execute("UPDATE ingest_jobs SET heartbeat = NULL WHERE worker = ? AND status = 'running'", [worker])
    return len(dead)


def claim(
    catalog: QueueCatalog,
    worker: str,
    *,
    host: str | None = None,
    pins: Sequence[str] = (),
    lease: float = LEASE_SECONDS,
    pinned_only: bool = False,
) -> JobRow | None:
    """Take the oldest claimable queued job for ``worker`` (after :func:`take_over`): status
    ``running``, one more attempt, heartbeat now, good for ``lease`` seconds. A job waiting out a
    back-off (``not_before`` in the future, :func:`defer`) is not claimable yet. A job reserved for a
    host or a process is claimable only by a worker on that host or with that pin. On PostgreSQL
    concurrent claims skip each other's rows (``FOR UPDATE SKIP LOCKED``); on DuckDB the catalog's
    lock serialises them. ``pinned_only``: only jobs pinned to one of ``pins`` (a process that runs
    no worker still ingests the jobs only it can). Returns the claimed row, ``None`` when nothing
    is claimable."""
    take_over(catalog)
    pin_list = list(pins) or [""]
    skip = " FOR UPDATE SKIP LOCKED" if catalog.dialect == "postgresql" else ""
    sql = (
        "UPDATE ingest_jobs SET status = 'running', worker = ?, attempts = attempts + 1, lease_seconds = ?,"
        " heartbeat = now(), started = now(), stage = 'waiting', fraction = 0, stage_since = now(),"
        " stage_start_fraction = 0"
        " WHERE id = (SELECT j.id FROM ingest_jobs j JOIN ingest_batches b ON b.id = j.batch_id"
        " WHERE j.status = 'queued' AND NOT b.cancel_requested AND (j.host IS NULL OR j.host = ?)"
        " AND (j.not_before IS NULL OR j.not_before <= now())"
        f" AND ({'FALSE' if pinned_only else 'j.pinned IS NULL'} OR j.pinned IN ({', '.join('?' * len(pin_list))}))"
        f" ORDER BY j.queued, j.seq LIMIT 1{' FOR UPDATE OF j SKIP LOCKED' if skip else ''})"
        " AND status = 'queued' RETURNING " + ", ".join(_JOB_COLUMNS)
    )
    with catalog.cursor() as cur:
        row = cur.execute(sql, [worker, float(lease), host or "", *pin_list]).fetchone()
    return _job(row) if row else None


def heartbeat(
    catalog: QueueCatalog,
    job_id: str,
    worker: str,
    stage: str | None = None,
    fraction: float | None = None,
    *,
    new_stage: bool = False,
) -> Control:
    """Renew ``worker``'s lease on ``job_id`` (and record its ``stage`` and ``fraction`` of the file,
    ``new_stage`` when the stage's pace starts over). Returns whether the job is still the worker's
    and whether its batch was cancelled."""
    sets, args = ["heartbeat = now()"], []
    if stage is not None:
        sets += ["stage = ?", "fraction = ?"]
        args += [stage, max(0.0, min(1.0, float(fraction or 0.0)))]
        if new_stage:
            sets += ["stage_since = now()", "stage_start_fraction = ?"]
            args += [max(0.0, min(1.0, float(fraction or 0.0)))]
    with catalog.cursor() as cur:
        row = cur.execute(
            f"UPDATE ingest_jobs SET {', '.join(sets)} WHERE id = ? AND worker = ?"
            " AND status = 'running' RETURNING batch_id",
            [*args, job_id, worker],
        ).fetchone()
        if row is None:
            return Control(owned=False, cancel=True)
        cancel = cur.execute("SELECT cancel_requested FROM ingest_batches WHERE id = ?", [row[0]]).fetchone()
    return Control(owned=True, cancel=bool(cancel and cancel[0]))


def finish(
    catalog: QueueCatalog,
    job_id: str,
    worker: str,
    status: str,
    result: dict[str, Any] | None,
    reason: str | None = None,
    error: str | None = None,
) -> bool:
    """End ``worker``'s job with ``status`` (done, failed, cancelled) and the file's ``result``.
    Returns ``False`` (nothing written) when the job is no longer the worker's (taken over)."""
    if status not in (DONE, FAILED, CANCELLED):
        raise ValueError(f"a job finishes done, failed or cancelled, not {status!r}")
    with catalog.cursor() as cur:
        row = cur.execute(
            "UPDATE ingest_jobs SET status = ?, result = ?, reason = ?, error = ?, finished = now(),"
            " stage = 'done', fraction = 1 WHERE id = ? AND worker = ? AND status = 'running'"
            " RETURNING id",
            [status, json.dumps(result) if result is not None else None, reason, error, job_id, worker],
        ).fetchone()
    return row is not None


def release(catalog: QueueCatalog, job_id: str, worker: str, reason: str | None = None) -> bool:
    """Give back ``worker``'s job unfinished (its process is stopping, or stands down sick):
    queued again, the attempt not counted, for another worker to resume; a job pinned to the
    process (its secret dies with it) ends ``interrupted`` instead. ``reason``: what the row says
    (default "interrupted: the program was stopped while ingesting it"). Returns whether the job
    was still the worker's."""
    with catalog.cursor() as cur:
        row = cur.execute(
            "UPDATE ingest_jobs SET status = CASE WHEN pinned IS NULL THEN 'queued' ELSE 'interrupted' END,"
            " attempts = attempts - 1, worker = NULL, stage = 'waiting', fraction = 0, reason = ?,"
            " finished = CASE WHEN pinned IS NULL THEN NULL ELSE now() END"
            " WHERE id = ? AND worker = ? AND status = 'running' RETURNING id",
            [reason or "interrupted: the program was stopped while ingesting it", job_id, worker],
        ).fetchone()
    return row is not None


def defer(
    catalog: QueueCatalog,
    job_id: str,
    worker: str,
    reason: str,
    delay: float,
    *,
    max_transient: int = MAX_TRANSIENT_ATTEMPTS,
    error: str | None = None,
    file_id: str | None = None,
) -> str | None:
    """Give back ``worker``'s job because the infrastructure failed, not the file (issue 39):
    ``queued`` again, not claimable for ``delay`` seconds (``not_before``, the database's clock),
    the attempt moved from ``attempts`` (the file's own) to ``transient_attempts``, ``reason``
    ("waiting: the file store cannot be reached (...)") on the row and on the file's record in
    ``store_files`` (which stays pending: a page says why it waits). The ``max_transient``-th
    transient attempt ends the job ``failed`` with the last reason instead ("gave up after N
    attempts"), its file's record too: nothing waits forever. ``file_id``: the file's id in the
    store when the ingestion had recorded it (else the record is found by the job's source or name).

    Returns the job's new status (``"queued"`` or ``"failed"``), or ``None`` when the job was no
    longer the worker's (taken over meanwhile: nothing written)."""
    with catalog.cursor() as cur:
        row = cur.execute(
            "UPDATE ingest_jobs SET transient_attempts = transient_attempts + 1, attempts = attempts - 1,"
            " status = CASE WHEN transient_attempts + 1 >= ? THEN 'failed' ELSE 'queued' END,"
            " not_before = CASE WHEN transient_attempts + 1 >= ? THEN NULL"
            " ELSE now() + ? * INTERVAL '1 second' END,"
            " worker = CASE WHEN transient_attempts + 1 >= ? THEN worker ELSE NULL END,"
            " finished = CASE WHEN transient_attempts + 1 >= ? THEN now() ELSE NULL END,"
            " stage = CASE WHEN transient_attempts + 1 >= ? THEN 'done' ELSE 'waiting' END,"
            " fraction = CASE WHEN transient_attempts + 1 >= ? THEN 1 ELSE 0 END,"
            " reason = CASE WHEN transient_attempts + 1 >= ?"
            " THEN 'failed after ' || CAST(transient_attempts + 1 AS TEXT) || ' attempts: ' || ? ELSE ? END,"
            " error = ? WHERE id = ? AND worker = ? AND status = 'running'"
            " RETURNING status, store, name, source, reason",
            [
                *[int(max_transient)] * 2,
                max(0.0, float(delay)),
                *[int(max_transient)] * 5,
                reason.removeprefix("waiting: "),
                reason,
                error,
                job_id,
                worker,
            ],
        ).fetchone()
        if row is None:
            return None
        status, store, name, source, said = row
        if status == FAILED:
            cur.execute(
                "UPDATE ingest_jobs SET result = ? WHERE id = ?",
                [json.dumps({"name": name, "outcome": "failed", "message": said, "error": error}), job_id],
            )
        cur.execute(
            "UPDATE store_files SET status = ?, reason = ?, error = ?, updated = now()"
            " WHERE store = ? AND status IN ('processing', 'pending')"
            " AND (file_id = ? OR file_id = ? OR file_name = ?)",
            [
                "failed" if status == FAILED else "pending",
                said,
                error if status == FAILED else None,
                store,
                file_id or source,
                source,
                name,
            ],
        )
    return str(status)


def cancel(catalog: QueueCatalog, batch_id: str) -> int:
    """Cancel a batch from any process: its queued jobs end ``cancelled`` now, the running ones when
    their worker's next heartbeat sees the flag. Returns how many queued jobs were cancelled."""
    with catalog.cursor() as cur:
        cur.execute("UPDATE ingest_batches SET cancel_requested = TRUE WHERE id = ?", [batch_id])
        rows = cur.execute(
            "UPDATE ingest_jobs SET status = 'cancelled', finished = now(), stage = 'done',"
            " reason = 'not started, the batch was stopped', result = ?"
            " WHERE batch_id = ? AND status = 'queued' RETURNING id",
            [json.dumps({"outcome": "cancelled", "message": "not started, the batch was stopped."}), batch_id],
        ).fetchall()
    return len(rows)


def retry(catalog: QueueCatalog, job_id: str) -> bool:
    """Queue a failed, interrupted or cancelled job again (its attempts start over; its batch is
    no longer cancelled). Returns whether the job was queued."""
    with catalog.cursor() as cur:
        row = cur.execute(
            "UPDATE ingest_jobs SET status = 'queued', attempts = 0, worker = NULL, result = NULL,"
            " reason = NULL, error = NULL, finished = NULL, stage = 'waiting', fraction = 0,"
            " queued = now() WHERE id = ? AND status IN ('failed', 'interrupted', 'cancelled')"
            " RETURNING batch_id",
            [job_id],
        ).fetchone()
        if row is not None:
            cur.execute("UPDATE ingest_batches SET cancel_requested = FALSE WHERE id = ?", [row[0]])
    return row is not None


def set_result(catalog: QueueCatalog, job_id: str, result: dict[str, Any]) -> None:
    """Replace a finished job's ``result`` (the file was ingested again by hand, a retry with a password)."""
    with catalog.cursor() as cur:
        cur.execute("UPDATE ingest_jobs SET result = ? WHERE id = ?", [json.dumps(result), job_id])


# -- reading ------------------------------------------------------------------------------------


def batch(catalog: QueueCatalog, batch_id: str) -> tuple[BatchRow | None, list[JobRow], datetime | None]:
    """``(batch, its jobs in order, the database's now)``; ``(None, [], now)`` for an unknown id."""
    with catalog.cursor() as cur:
        b = cur.execute(_BATCH_SELECT + " WHERE id = ?", [batch_id]).fetchone()
        rows = cur.execute(_JOB_SELECT + " WHERE batch_id = ? ORDER BY seq", [batch_id]).fetchall()
        now = cur.execute("SELECT now()").fetchone()
    return (_batch(b) if b else None), [_job(r) for r in rows], (now[0] if now else None)


def batch_row(catalog: QueueCatalog, batch_id: str) -> BatchRow | None:
    """The batch's own row (not its jobs), or ``None`` for an unknown id."""
    with catalog.cursor() as cur:
        b = cur.execute(_BATCH_SELECT + " WHERE id = ?", [batch_id]).fetchone()
    return _batch(b) if b else None


def batches(catalog: QueueCatalog, store: str | None = None, limit: int = 20) -> list[BatchRow]:
    """The newest batches (of ``store``, or of every store), newest first."""
    sql, args = _BATCH_SELECT, []
    if store is not None:
        sql, args = sql + " WHERE store = ?", [store]
    with catalog.cursor() as cur:
        rows = cur.execute(sql + " ORDER BY created DESC, id LIMIT ?", [*args, int(limit)]).fetchall()
    return [_batch(r) for r in rows]


def jobs(
    catalog: QueueCatalog, *, store: str | None = None, status: str | Sequence[str] | None = None, limit: int = 1000
) -> list[JobRow]:
    """Job rows (of ``store``, in ``status``), oldest first."""
    where: list[str] = []
    args: list[Any] = []
    if store is not None:
        where, args = [*where, "store = ?"], [*args, store]
    if status is not None:
        states = [status] if isinstance(status, str) else list(status)
        where, args = [*where, f"status IN ({', '.join('?' * len(states))})"], [*args, *states]
    sql = _JOB_SELECT + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY queued, seq LIMIT ?"
    with catalog.cursor() as cur:
        rows = cur.execute(sql, [*args, int(limit)]).fetchall()
    return [_job(r) for r in rows]


def unfinished(catalog: QueueCatalog) -> int:
    """How many jobs are queued or running (a worker with ``--once`` exits at 0)."""
    with catalog.cursor() as cur:
        row = cur.execute("SELECT count(*) FROM ingest_jobs WHERE status IN ('queued', 'running')").fetchone()
    return int(row[0]) if row else 0


def status_counts(catalog: QueueCatalog) -> list[tuple[str, str, int]]:
    """``(status, reason, count)`` of the unfinished and failed jobs: ``status`` ``queued``,
    ``waiting`` (queued again after an infrastructure error, its back-off not over: ``not_before``
    later than the database's clock), ``running`` or ``failed``; ``reason`` a failed job's error
    class (``error``; ``""`` for the others). One statement, for the metrics of any process."""
    with catalog.cursor() as cur:
        rows = cur.execute(
            "SELECT CASE WHEN status = 'queued' AND not_before IS NOT NULL AND not_before > now() THEN 'waiting'"
            " ELSE status END AS shown, CASE WHEN status = 'failed' THEN coalesce(error, '') ELSE '' END AS why,"
            " count(*) FROM ingest_jobs WHERE status IN ('queued', 'running', 'failed') GROUP BY shown, why"
        ).fetchall()
    return [(str(s), str(r), int(n)) for s, r, n in rows]


__all__ = [
    "CANCELLED",
    "DONE",
    "FAILED",
    "FINAL",
    "INTERRUPTED",
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "MAX_TRANSIENT_ATTEMPTS",
    "QUEUED",
    "RUNNING",
    "BatchRow",
    "Control",
    "JobRow",
    "JobSource",
    "QueueCatalog",
    "batch",
    "batch_row",
    "batches",
    "cancel",
    "claim",
    "defer",
    "enqueue",
    "expire_dead",
    "finish",
    "heartbeat",
    "jobs",
    "new_id",
    "release",
    "retry",
    "set_result",
    "status_counts",
    "take_over",
    "unfinished",
]
