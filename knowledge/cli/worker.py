"""``worker``: claim ingestion jobs from the catalog and ingest them (any number of workers, on any
machine that reaches the catalog and the file store; see docs/ingestion.md). ``--once`` exits when
no job is queued or running; otherwise the worker polls until Ctrl-C, which gives its current file
back to the queue for another worker. It ingests every account's jobs: as the local admin, or
``--user`` an admin. ``--parent PID`` (the app's own worker process,
:class:`knowledge.service.worker.WorkerProcess`) stops the worker the same way once that process is
gone; ``--nice N`` lowers its priority.

Its exit status tells a supervisor what happened (docs/ingestion.md, "Workers under a supervisor"):
0 the queue is done (``--once``) or it was asked to stop (SIGTERM; Ctrl-C exits 130 as every
command); 1 an unexpected error (a bug); 2 bad arguments or settings (or the catalog unreachable at
the very start); 3 it stood down because its own disk, memory or model kept failing (``ingest.worker_sick_after``),
its job given back to the queue; 4 the catalog stayed unreachable longer than
``ingest.worker_database_wait_seconds``. Its health is written to ``ingest.worker_status_file`` when set."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading

from knowledge.catalog import jobs as queue
from knowledge.cli.common import Commands, command
from knowledge.errors import set_log_place
from knowledge.server.ops import HealthListener, watch_queue
from knowledge.service.worker import EXIT_CRASHED, EXIT_DONE, EXIT_NO_DATABASE, EXIT_SICK, HealthFile, Worker
from knowledge.system import System
from knowledge.telemetry import configure_logging, configure_tracing
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "worker", help="ingest the queued ingestion jobs of the catalog (any number of workers)")
    s.add_argument("--concurrency", type=int, default=1, help="jobs ingested at once by this process (default 1)")
    s.add_argument("--once", action="store_true", help="exit when no job is queued or running")
    s.add_argument(
        "--lease",
        type=float,
        default=queue.LEASE_SECONDS,
        help=f"seconds a heartbeat stays good; a silent worker's job is taken over after it"
        f" (default {queue.LEASE_SECONDS:g})",
    )
    s.add_argument("--poll", type=float, default=1.0, help="seconds between looks at an empty queue (default 1)")
    s.add_argument(
        "--parent",
        type=int,
        default=None,
        metavar="PID",
        help="stop (giving the current file back) when process PID, this one's parent, is gone",
    )
    s.add_argument("--nice", type=int, default=0, help="lower this process's priority by N (Linux nice; default 0)")
    s.set_defaults(func=cmd_worker, system=True)


def start_listener(wb: Workbench, health: HealthFile) -> HealthListener | None:
    """The worker's ``/healthz``, ``/readyz`` and ``/metrics`` on ``ingest.worker_health_port`` (its
    readiness: the parts' and ``health``'s state), or ``None`` when the port is not set or cannot be
    bound (taken by another worker of this machine: logged, and the worker ingests all the same)."""
    ingest = wb.settings.ingest
    if ingest.worker_health_port is None:
        return None
    watch_queue(wb)
    key = wb.settings.api_key.get_secret_value() if wb.settings.api_key else None
    try:
        listener = HealthListener(
            ingest.worker_health_host,
            ingest.worker_health_port,
            readiness=wb.readiness(),
            state=lambda: (str(health.state.get("state")), health.state.get("reason")),
            wb=wb,
            api_key=key,
            metrics=wb.settings.ops.metrics,
        ).start()
    except OSError as exc:  # the port is taken (another worker of this machine): ingest all the same
        logging.getLogger("knowledge.service.worker").warning(
            "worker: no health listener on %s:%s (%s); ingesting all the same",
            ingest.worker_health_host,
            ingest.worker_health_port,
            exc,
        )
        return None
    print(
        f"worker: health on http://{ingest.worker_health_host}:{listener.port} (/healthz, /readyz, /metrics)",
        file=sys.stderr,
        flush=True,
    )
    return listener


def cmd_worker(system: System, wb: Workbench, args: argparse.Namespace) -> int:
    """Run the workers over ``system``'s indexer (they ingest for everyone, never as a person) once
    ``wb`` (the command's actor) is found to be an admin."""
    if args.concurrency < 1 or args.lease <= 0 or args.poll <= 0 or args.nice < 0:
        print("error: --concurrency, --lease and --poll must be positive, --nice not negative", file=sys.stderr)
        return 2
    if args.nice:
        with contextlib.suppress(AttributeError, OSError):
            os.nice(args.nice)
    wb.require_admin("run a worker (it ingests every account's queued files)")
    if args.parent is not None:  # the app's own worker: its embedding batches wait while the app searches
        from knowledge.embeddings import set_between_batches  # noqa: PLC0415
        from knowledge.service.yielding import SearchMark  # noqa: PLC0415

        set_between_batches(SearchMark(wb.settings.data_root).wait)
    # an operator sees the worker start, each file's outcome, a take-over and a failed heartbeat
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("knowledge.service.worker").setLevel(logging.INFO)
    configure_logging(wb.settings)  # JSON lines with ops.log_format = "json"
    configure_tracing(wb.settings, "worker")
    set_log_place("the ingest worker's log" if args.parent is not None else "the worker's log (its standard error)")
    health = HealthFile(wb.settings.ingest.worker_status_file)
    # the workers ingest for everyone with the indexer (the system), never as a person
    workers = [
        Worker(system.indexer, lease=args.lease, health=health, kinds=system.jobs.kinds) for _ in range(args.concurrency)
    ]
    health.workers = [w.id for w in workers]
    system.actor_name = f"worker:{workers[0].id}"  # what this process does for no one is audited in its name
    if not args.once:  # a dedicated worker queues the sources' runs as they fall due (the app does for its own)
        system.sources.start_scheduler()
    health.update(state="running")
    listener = start_listener(wb, health)
    try:
        print(
            f"worker: {len(workers)} thread{'' if len(workers) == 1 else 's'} on the catalog at"
            f" {system.catalog.describe()} ({', '.join(w.id for w in workers)}); Ctrl-C stops",
            file=sys.stderr,
            flush=True,
        )
        counts = [0] * len(workers)
        crashed: list[BaseException] = []

        def run(n: int) -> None:
            try:
                counts[n] = workers[n].run(once=args.once, poll=args.poll)
            except Exception as exc:  # a bug: the others give their jobs back, the process exits 1
                logging.getLogger("knowledge.service.worker").exception(
                    "worker %s stopped on an unexpected error", workers[n].id
                )
                crashed.append(exc)
            if crashed or workers[n].sick or workers[n].gave_up:
                for w in workers:  # one sick thread means a sick machine: every thread stands down
                    w.stop()

        def terminate(_signum: int, _frame: object) -> None:  # a supervisor's stop: give the jobs back, exit 0
            print("worker: asked to stop (SIGTERM); giving the current files back to the queue", file=sys.stderr, flush=True)
            for w in workers:
                w.stop()

        with contextlib.suppress(ValueError):  # only the main thread may set a handler
            signal.signal(signal.SIGTERM, terminate)
        threads = [threading.Thread(target=run, args=(n,), name=f"worker-{n}", daemon=True) for n in range(len(workers))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(0.5)
                    if args.parent is not None and os.getppid() != args.parent:  # the app is gone
                        print("worker: the parent process is gone; stopping", file=sys.stderr, flush=True)
                        raise KeyboardInterrupt
        except KeyboardInterrupt:
            for w in workers:
                w.stop()
            for t in threads:
                t.join(60)
            health.update(state="stopped", reason="asked to stop")
            raise
        print(f"{sum(counts)} job{'' if sum(counts) == 1 else 's'} processed.", file=sys.stderr)
        sick = next((w.sick for w in workers if w.sick), None)
        gave_up = next((w.gave_up for w in workers if w.gave_up), None)
        if crashed:
            health.update(state="stopped", reason=f"an unexpected error: {crashed[0]}")
            print(
                "worker: stopped on an unexpected error (its traceback is above); exit status 1", file=sys.stderr, flush=True
            )
            return EXIT_CRASHED
        if sick:
            health.update(state="sick", reason=sick)
            print(f"worker: stood down: {sick}; exit status {EXIT_SICK}", file=sys.stderr, flush=True)
            return EXIT_SICK
        if gave_up:
            print(f"worker: stopped: {gave_up}; exit status {EXIT_NO_DATABASE}", file=sys.stderr, flush=True)
            return EXIT_NO_DATABASE
        return EXIT_DONE
    finally:
        if listener is not None:
            listener.close()
