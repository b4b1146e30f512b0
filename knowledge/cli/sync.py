"""``sync STORE FOLDER``: keep a store in step with a folder (:mod:`knowledge.sync`). The plan,
then (unless --dry-run) each change as it is applied; with --watch, every later round until
Ctrl-C. Exit 1 when a file failed, as ``ingest``."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from knowledge import sync as fs
from knowledge.cli.common import Commands, command
from knowledge.service.indexing import skipped_text
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(
        sub,
        "sync",
        help="keep a store in step with a folder: show the plan (added, changed, renamed,"
        " deleted, unchanged), then apply it",
    )
    s.add_argument("store")
    s.add_argument("folder")
    s.add_argument("--glob", help="files to take (default: the folder's last glob, else **/*)")
    s.add_argument("--template", help="template for a new store (default: default)")
    s.add_argument("--dry-run", action="store_true", help="print the plan only; change nothing")
    s.add_argument("--watch", action="store_true", help="keep running: apply changes as files change (Ctrl-C ends)")
    s.add_argument(
        "--debounce",
        type=float,
        default=None,
        metavar="S",
        help="--watch: seconds of quiet after a change before syncing (default 1)",
    )
    s.add_argument(
        "--settle",
        type=float,
        default=None,
        metavar="S",
        help="--watch: seconds a file's size and time must hold still before it is read (default 1)",
    )
    s.add_argument(
        "--json", action="store_true", help="print the plan and results as JSON (one object per line with --watch)"
    )
    s.set_defaults(func=cmd_sync)


def cmd_sync(wb: Workbench, args: argparse.Namespace) -> int:
    glob = args.glob
    if glob is None and wb.store_exists(args.store):  # the folder's last glob, so a plain re-run keeps it
        known = {f.folder: f.glob for f in wb.syncs.synced_folders(args.store)}
        glob = known.get(fs.folder_key(args.folder))
    syncer = wb.syncs.folder(args.store, args.folder, glob, template=args.template)
    out = _Printer(args.json)
    plan = syncer.plan()
    if args.json:
        if args.dry_run:
            out.emit({"event": "plan", **plan.to_json()})
    else:
        note = skipped_text(plan.skipped)
        if note:
            print(note, file=sys.stderr)
        print("\n".join(plan.lines()), flush=True)
    if args.dry_run:
        return 0
    if not args.watch:
        report = syncer.apply(plan, on_result=out.result)
        out.report(report)
        return 1 if report.failed else 0
    return _watch(syncer, args, out)


def _watch(syncer: fs.FolderSync, args: argparse.Namespace, out: _Printer) -> int:
    """Every later round until Ctrl-C; exit 0."""
    stop = threading.Event()
    if not args.json:
        print(f"Watching {syncer.folder} (Ctrl-C to stop).", file=sys.stderr, flush=True)
    kwargs = {k: v for k, v in (("debounce", args.debounce), ("settle", args.settle)) if v is not None}

    def first_ctrl_c(_signum: int, _frame: object) -> None:
        # Ctrl-C sets the event rather than raising: raised inside a catalog query, DuckDB turns it
        # into an error of the round, which the watch reports and goes on (the watch never ended).
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C stops at once
        print("Stopping after this round (Ctrl-C again to stop now).", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, first_ctrl_c)
    try:
        syncer.watch(stop, on_report=out.round, on_waiting=out.waiting, on_error=out.error, **kwargs)
    except KeyboardInterrupt:
        stop.set()
    finally:
        signal.signal(signal.SIGINT, previous)
    print("Stopped watching.", file=sys.stderr)
    return 0


class _Printer:
    """How a sync's events are shown: a line of words each, or (``as_json``) one JSON object each."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json

    def emit(self, obj: dict[str, Any]) -> None:
        print(json.dumps(obj, ensure_ascii=False), flush=True)

    def result(self, r: fs.ItemResult) -> None:
        if not self.as_json:
            print(("  ok      " if r.ok else "  FAILED  ") + r.message, flush=True)

    def report(self, report: fs.SyncReport) -> None:
        if self.as_json:
            self.emit(
                {
                    "event": "applied",
                    **report.plan.to_json(),
                    "applied": report.counts(),
                    "results": [
                        {
                            "action": r.item.action,
                            "path": r.item.path,
                            "old_path": r.item.old_path,
                            "ok": r.ok,
                            "message": r.message,
                            "file_id": (r.ingest.file_id if r.ingest else r.item.file_id),
                            "chunks": r.ingest.chunks if r.ingest else 0,
                        }
                        for r in report.results
                    ],
                }
            )
        else:
            c = report.counts()
            print(f"Applied: {', '.join(f'{n} {k}' for k, n in c.items())}.", flush=True)

    def round(self, report: fs.SyncReport) -> None:
        """A --watch round: each change, then the counts."""
        for r in report.results:
            self.result(r)
        self.report(report)

    def waiting(self, items: list[fs.PlanItem]) -> None:
        if self.as_json:
            self.emit({"event": "waiting", "paths": [i.path for i in items]})
        else:
            print(f"  waiting for {', '.join(i.path for i in items)} (still being written)", file=sys.stderr, flush=True)

    def error(self, exc: Exception) -> None:
        print(f"error: {exc}", file=sys.stderr, flush=True)
