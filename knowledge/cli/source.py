"""``source``: the places a team's files live (shares, repositories, mailboxes, drives, buckets) kept
in sync with a store (:mod:`knowledge.sources`), through :attr:`Workbench.sources
<knowledge.workbench.Workbench.sources>` (every check and audit is there).

``source kinds`` lists the kinds and their settings; ``add`` keeps a new source (``--set KEY=VALUE``
for a setting; a secret one -- a password, a token, a key -- only with ``--secret KEY``, typed at a
hidden prompt, or ``--secret-env KEY=VARIABLE``, read from the environment: a secret given to
``--set`` is refused, as it would stay in the shell's history); ``list``, ``show`` (a secret setting
shows as "set", never its value), ``edit``, ``pause``, ``resume``, ``remove`` (``--keep-files``: its
files stay in the store as if added by hand); ``plan`` (a dry run), ``check`` (connect and look);
``run`` queues a run for the workers (``--wait``: and waits for it, printing each file's outcome;
``--here``: runs it in this command); ``runs`` is the history, with the files of the newest run.

Exit codes: 0; 1 a run failed or one of its files did, or ``check`` could not reach the source;
2 bad usage or a refusal (no such source, no access, a bad setting) as every command, and a
``plan`` the source's server failed (its reason printed, without a credential).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
from typing import Any

from knowledge.cli.common import Commands, command, progress_lines, table
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.people.policy import describe_readers
from knowledge.sources.base import Source, SourceError
from knowledge.sources.engine import RUNS_KEPT, RunItem, RunRecord, SourceRecord
from knowledge.sources.shown import (
    counts_text,
    kind_object,
    location,
    run_text,
    schedule,
    secret_names,
    settings_shown,
    when,
)
from knowledge.workbench import Workbench

#: Seconds between two looks at a queued run (``run --wait``).
WAIT_POLL_SECONDS = 0.5


def add_parser(sub: Commands) -> None:
    p = command(
        sub,
        "source",
        help="sources: shares, repositories, mailboxes, drives and buckets a store is kept in sync with"
        " (kinds, add, list, show, edit, run, plan, check, pause, resume, runs, remove)",
    )
    ssub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = command(ssub, "kinds", help="the kinds of source and their settings (which are secret)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_kinds)

    s = command(ssub, "add", help="keep a new source: where its files are, which store they go to, when it runs")
    s.add_argument("name")
    s.add_argument("--kind", required=True, help="smb, webdav, git, imap, s3, ... (`source kinds` lists them)")
    s.add_argument("--store", required=True, help="the store its files go to (a new one is made, yours)")
    s.add_argument("--template", help="the template of a new store (default: default)")
    _setting_options(s)
    _option_flags(s)
    s.add_argument("--paused", action="store_true", help="add it paused: its schedule does not run until resumed")
    s.set_defaults(func=cmd_add)

    s = command(ssub, "edit", help="change a source's settings (a secret left out is kept)")
    s.add_argument("name")
    _setting_options(s)
    _option_flags(s)
    s.add_argument("--everyone", action="store_true", help="no default readers: the store's sharing decides")
    s.set_defaults(func=cmd_edit)

    s = command(ssub, "list", help="the sources of the stores you may read")
    s.add_argument("--store", help="only the sources of this store")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_list)

    s = command(ssub, "show", help="one source: where, its settings (a secret as 'set', never its value), its last run")
    s.add_argument("name")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_show)

    s = command(ssub, "run", help="queue a run for the workers (--wait: and wait for it; --here: run it in this command)")
    s.add_argument("name")
    how = s.add_mutually_exclusive_group()
    how.add_argument("--wait", action="store_true", help="wait for the run and print each file's outcome")
    how.add_argument("--here", action="store_true", help="run it now in this command, printing each file's outcome")
    s.add_argument("--json", action="store_true", help="with --wait or --here: the run and its files as JSON")
    s.set_defaults(func=cmd_run)

    s = command(ssub, "plan", help="a dry run: what the next run would change (the source is listed; nothing is read)")
    s.add_argument("name")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_plan)

    s = command(ssub, "check", help="connect to the source and look, reading no file")
    s.add_argument("name")
    s.set_defaults(func=cmd_check)

    for verb, words in (("pause", "stop a source's schedule (a run by hand still may)"), ("resume", "start it again")):
        s = command(ssub, verb, help=words)
        s.add_argument("name")
        s.set_defaults(func=cmd_pause, paused=verb == "pause")

    s = command(ssub, "runs", help="a source's runs, newest first, and the files of the newest (failed ones first)")
    s.add_argument("name")
    s.add_argument("--limit", type=int, default=10, help="at most this many runs (default 10)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_runs)

    s = command(ssub, "remove", help="forget a source and its runs, and take its files out of the store")
    s.add_argument("name")
    s.add_argument("--keep-files", action="store_true", help="its files stay in the store, as if added by hand")
    s.set_defaults(func=cmd_remove)


def _setting_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the kind (repeat it); never a secret one: see --secret",
    )
    s.add_argument(
        "--secret",
        dest="secrets",
        action="append",
        default=[],
        metavar="KEY",
        help="a secret setting (password, token, key), typed at a hidden prompt (repeat it)",
    )
    s.add_argument(
        "--secret-env",
        dest="secret_env",
        action="append",
        default=[],
        metavar="KEY=VARIABLE",
        help="a secret setting read from the environment variable VARIABLE (repeat it)",
    )


def _option_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--include", action="append", metavar="GLOB", help="take only files matching it (repeat it; '' clears them)"
    )
    s.add_argument(
        "--exclude", action="append", metavar="GLOB", help="leave out files matching it (repeat it; '' clears them)"
    )
    s.add_argument(
        "--max-bytes",
        type=int,
        metavar="N",
        help="leave out files larger than N bytes (0: the setting sources.max_file_bytes)",
    )
    s.add_argument("--every", type=int, metavar="MINUTES", help="run every MINUTES minutes (0: by hand only, the default)")
    s.add_argument(
        "--readers",
        metavar="READERS",
        help="who may read its files when the source says nothing itself, e.g. 'group:hr, user:ana'"
        " (default: everyone who may read the store)",
    )


# -- settings, secrets ---------------------------------------------------------------------------------
def _kind(wb: Workbench, kind: str) -> type[Source]:
    kinds = wb.sources.kinds()
    if kind not in kinds:
        raise InvalidArgument(
            f"There is no source kind {kind!r} here; the kinds are {', '.join(sorted(kinds)) or 'none'}"
            " (`source kinds` lists them with their settings).",
            param="kind",
        )
    return kinds[kind]


def _prompt(name: str, key: str, label: str) -> str:
    """A secret typed at a hidden prompt. Raises InvalidArgument: no terminal, or nothing typed."""
    if not sys.stdin.isatty():
        raise InvalidArgument(
            f"--secret {key}: there is no terminal to type it at; use --secret-env {key}=VARIABLE to read it"
            " from the environment."
        )
    value = getpass.getpass(f"{label} of source {name} (not shown): ")
    if not value:
        raise InvalidArgument(f"--secret {key}: nothing was typed.")
    return value


def settings_from(args: argparse.Namespace, cls: type[Source], name: str) -> dict[str, Any]:
    """The settings ``--set``, ``--secret`` and ``--secret-env`` give, by key (secrets included).

    Raises:
        InvalidArgument: a ``--set`` without ``=`` or for a secret setting (the value is never
            repeated in the message), a ``--secret`` holding ``=``, a ``--secret-env`` without ``=``
            or naming an unset variable, nothing typed at a prompt or no terminal to type it at."""
    secret = secret_names(cls)
    labels = {f.name: f.label for f in cls.fields}
    config: dict[str, Any] = {}
    for pair in args.settings:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgument("--set takes KEY=VALUE, e.g. --set host=files.example (there was no '=').", param="set")
        if key in secret:
            raise InvalidArgument(
                f"{key} is a secret setting: give it with --secret {key} (typed at a hidden prompt) or"
                f" --secret-env {key}=VARIABLE (read from the environment), never with --set: a value on"
                " the command line stays in your shell's history and shows in the list of processes.",
                param=key,
            )
        config[key] = value
    for key in args.secrets:
        if "=" in key:
            raise InvalidArgument(
                "--secret takes a setting's name only (its value is asked for at a hidden prompt, never"
                " written on the command line); --secret-env NAME=VARIABLE reads it from the environment.",
                param="secret",
            )
        config[key.strip()] = _prompt(name, key.strip(), labels.get(key.strip(), key))
    for pair in args.secret_env:
        key, sep, variable = pair.partition("=")
        key, variable = key.strip(), variable.strip()
        if not sep or not key or not variable:
            raise InvalidArgument(
                "--secret-env takes KEY=VARIABLE, e.g. --secret-env password=SMB_PASSWORD.", param="secret-env"
            )
        value = os.environ.get(variable)
        if not value:
            raise InvalidArgument(
                f"--secret-env {key}={variable}: the environment variable {variable} is not set (or empty).",
                param="secret-env",
            )
        config[key] = value
    return config


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """The include/exclude globs, size limit, schedule and readers given (only those given)."""
    out: dict[str, Any] = {}
    if args.include is not None:
        out["include"] = [g for g in args.include if g.strip()]
    if args.exclude is not None:
        out["exclude"] = [g for g in args.exclude if g.strip()]
    if args.max_bytes is not None:
        out["max_bytes"] = args.max_bytes or None
    if args.every is not None:
        out["every_minutes"] = args.every or None
    if args.readers is not None:
        if not args.readers.strip():
            raise InvalidArgument("--readers needs readers, e.g. 'group:hr, user:ana'.", param="readers")
        out["readers"] = args.readers
    return out


# -- commands ------------------------------------------------------------------------------------------
def cmd_kinds(wb: Workbench, args: argparse.Namespace) -> int:
    kinds = wb.sources.kinds()
    if args.json:
        print(json.dumps([kind_object(n, c) for n, c in sorted(kinds.items())], ensure_ascii=False, indent=2))
        return 0
    if not kinds:
        print("No source kind loads here (see the log for why).")
        return 0
    for n, cls in sorted(kinds.items()):
        print(f"{n}: {cls.title or n}" + (f" -- {cls.description}" if cls.description else ""))
        if cls.carries_permissions:
            print("  readers: from the source's own permissions")
        for f in cls.fields:
            marks = [w for w, on in (("required", f.required), ("secret: --secret", f.secret)) if on]
            if f.default is not None and f.default != "":
                marks.append(f"default {f.default}")
            extra = f" ({', '.join(marks)})" if marks else ""
            print(f"  {f.name}: {f.label}{extra}" + (f" -- {f.help}" if f.help else ""))
    return 0


def cmd_add(wb: Workbench, args: argparse.Namespace) -> int:
    cls = _kind(wb, args.kind)
    config = settings_from(args, cls, args.name)
    options = _options(args)
    rec = wb.sources.add(
        args.name,
        args.kind,
        args.store,
        config,
        include=options.get("include", ()),
        exclude=options.get("exclude", ()),
        max_bytes=options.get("max_bytes"),
        every_minutes=options.get("every_minutes"),
        readers=options.get("readers"),
        paused=args.paused,
        **({"template": args.template} if args.template else {}),
    )
    print(
        f"Added source {rec.name!r} ({rec.kind}) into store {rec.store!r}, {schedule(rec)}."
        f" `source check {rec.name}` tries the connection; `source run {rec.name} --wait` runs it now."
    )
    return 0


def cmd_edit(wb: Workbench, args: argparse.Namespace) -> int:
    rec = wb.sources.get(args.name)
    cls = wb.sources.kinds().get(rec.kind)
    changes = _options(args)
    if args.everyone:
        if "readers" in changes:
            raise InvalidArgument("Give --readers or --everyone, not both.", param="readers")
        changes["readers"] = None
    if args.settings or args.secrets or args.secret_env:
        if cls is None:
            raise InvalidArgument(f"The kind {rec.kind!r} does not load here, so its settings cannot be changed.")
        changes["config"] = settings_from(args, cls, rec.name)
    if not changes:
        raise InvalidArgument("Nothing to change: give --set, --secret, --include, --every, ... (`source edit --help`).")
    new = wb.sources.update(rec.name, **changes)
    changed = ", ".join(sorted(changes.get("config", {}))) or ""
    print(f"Changed source {new.name!r}" + (f" (settings {changed})" if changed else "") + f"; {schedule(new)}.")
    return 0


def _last_run(wb: Workbench, rec: SourceRecord) -> RunRecord | None:
    runs = wb.sources.runs(rec.name, 1)
    return runs[0] if runs else None


def _source_json(wb: Workbench, rec: SourceRecord, last: RunRecord | None) -> dict[str, Any]:
    cls = wb.sources.kinds().get(rec.kind)
    return {
        **rec.to_json(),
        "location": location(cls, rec, wb.settings),
        "last_run": last.to_json() if last is not None else None,
    }


def cmd_list(wb: Workbench, args: argparse.Namespace) -> int:
    recs = wb.sources.records(args.store)
    lasts = {r.name: _last_run(wb, r) for r in recs}
    if args.json:
        print(json.dumps([_source_json(wb, r, lasts[r.name]) for r in recs], ensure_ascii=False, indent=2))
        return 0
    if not recs:
        print("No source yet: `source add NAME --kind KIND --store STORE --set KEY=VALUE ...` adds one.")
        return 0
    kinds = wb.sources.kinds()
    print(
        table(
            [
                (r.name, r.kind, r.store, location(kinds.get(r.kind), r, wb.settings), schedule(r), run_text(lasts[r.name]))
                for r in recs
            ],
            ["source", "kind", "store", "location", "schedule", "last run"],
        )
    )
    return 0


def cmd_show(wb: Workbench, args: argparse.Namespace) -> int:
    rec = wb.sources.get(args.name)
    last = _last_run(wb, rec)
    if args.json:
        print(json.dumps(_source_json(wb, rec, last), ensure_ascii=False, indent=2))
        return 0
    cls = wb.sources.kinds().get(rec.kind)
    title = cls.title if cls is not None and cls.title else rec.kind
    by = rec.created_by if rec.created_by not in (None, "local") else "the local admin"
    limit = f"{rec.max_bytes:,} bytes" if rec.max_bytes else f"{wb.settings.sources.max_file_bytes:,} bytes (the default)"
    lines = [
        f"{rec.name} ({title})",
        f"  store:      {rec.store}",
        f"  location:   {location(cls, rec, wb.settings)}",
        f"  schedule:   {schedule(rec)}" + (f"; next run {when(rec.next_run)}" if rec.next_run else ""),
        "  settings:",
        *[f"    {f.name}: {value}" for f, value in settings_shown(cls, rec)],
        f"  include:    {', '.join(rec.include) or 'every file'}",
        f"  exclude:    {', '.join(rec.exclude) or 'nothing'}",
        f"  size limit: {limit}",
        f"  readers:    {describe_readers(rec.readers)} (where the source says nothing itself)",
        f"  added by:   {by}, {when(rec.created)}",
        f"  last run:   {run_text(last)}",
    ]
    print("\n".join(lines))
    return 0


def _item_line(i: RunItem) -> str:
    return ("  ok      " if i.ok else "  FAILED  ") + i.message


def _outcome(name: str, run: RunRecord, items: list[RunItem], as_json: bool) -> int:
    """Print a finished run (each file, then the run in words; JSON with ``as_json``); its exit code."""
    if as_json:
        print(json.dumps({**run.to_json(), "items": [i.to_json() for i in items]}, ensure_ascii=False, indent=2))
    else:
        print(f"{name}: {run_text(run)}")
    failed = run.status != "done" or any(not i.ok for i in items)
    return 1 if failed else 0


def cmd_run(wb: Workbench, args: argparse.Namespace) -> int:
    if args.here:
        progress = progress_lines() if not args.json else None

        def on_progress(stage: str, fraction: float) -> None:
            if progress is not None:
                progress(stage, fraction)

        report = wb.sources.run_here(args.name, progress=on_progress)
        if not args.json:
            for item in report.items:
                print(_item_line(item), flush=True)
        return _outcome(args.name, report.run, report.items, args.json)
    run = wb.sources.run(args.name, kick=args.wait)
    if not args.wait:
        print(
            f"Queued run {run.id} of {args.name!r}: a worker runs it (the app's, `serve`'s or a"
            f" `worker` process). `source runs {args.name}` shows how it went; `source run {args.name}"
            " --wait` waits for it here."
        )
        return 0
    finished = _wait(wb, args.name, run)
    items = wb.sources.run_items(finished.id)
    if not args.json:
        for item in sorted(items, key=lambda i: (i.ok, i.seq)):
            print(_item_line(item))
    return _outcome(args.name, finished, items, args.json)


def _wait(wb: Workbench, name: str, run: RunRecord) -> RunRecord:
    """Run ``run`` of source ``name`` once it is finished (``done``, ``failed`` or ``cancelled``),
    saying on stderr while it waits for a worker. Raises KnowledgeError: the run is gone."""
    said = None
    if not wb.runs_workers():
        print("queued: waiting for a worker (`knowledge worker`, the app's or `serve`'s)", file=sys.stderr, flush=True)
        said = "queued"
    while True:
        current = next((r for r in wb.sources.runs(name, RUNS_KEPT) if r.id == run.id), None)
        if current is None:
            raise KnowledgeError(f"The run {run.id} of {name!r} is gone (was the source removed?).")
        if current.status not in ("queued", "running"):
            return current
        if current.status == "running" and said != "running":
            print(f"running ({current.worker or 'a worker'})", file=sys.stderr, flush=True)
            said = "running"
        time.sleep(WAIT_POLL_SECONDS)


def cmd_plan(wb: Workbench, args: argparse.Namespace) -> int:
    plan = wb.sources.plan(args.name)
    if args.json:
        print(json.dumps(plan.to_json(), ensure_ascii=False, indent=2))
    else:
        print("\n".join(plan.lines()))
    return 0


def cmd_check(wb: Workbench, args: argparse.Namespace) -> int:
    try:
        said = wb.sources.check(args.name)
    except SourceError as exc:
        print(f"{args.name}: not reached: {exc}", file=sys.stderr)
        return 1
    print(f"{args.name}: {said}")
    return 0


def cmd_pause(wb: Workbench, args: argparse.Namespace) -> int:
    rec = wb.sources.pause(args.name, args.paused)
    print(f"Source {rec.name!r} is {'paused' if rec.paused else 'resumed'}: {schedule(rec)}.")
    return 0


def cmd_runs(wb: Workbench, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= RUNS_KEPT:
        raise InvalidArgument(f"--limit must be between 1 and {RUNS_KEPT}, got {args.limit}.", param="limit")
    runs = wb.sources.runs(args.name, args.limit)
    items = wb.sources.run_items(runs[0].id) if runs else []
    items = sorted(items, key=lambda i: (i.ok, i.seq))  # failed first
    if args.json:
        out = [r.to_json() for r in runs]
        if out:
            out[0]["items"] = [i.to_json() for i in items]
        print(json.dumps(out, ensure_ascii=False, indent=2))
        return 0
    if not runs:
        print(f"{args.name} has not run yet: `source run {args.name} --wait` runs it.")
        return 0
    print(
        table(
            [
                (r.id[:12], r.cause, r.status, when(r.queued), when(r.finished), counts_text(r.counts), r.reason)
                for r in runs
            ],
            ["run", "cause", "status", "queued", "finished", "counts", "reason"],
        )
    )
    print(
        f"\nThe files of the newest run ({runs[0].status}), failed ones first:"
        if items
        else "\nThe newest run changed no file."
    )
    for item in items:
        print(_item_line(item))
    return 0


def cmd_remove(wb: Workbench, args: argparse.Namespace) -> int:
    rec = wb.sources.get(args.name)
    n = wb.sources.remove(rec.name, delete_files=not args.keep_files)
    if args.keep_files:
        print(f"Removed source {rec.name!r}; its files stay in {rec.store!r}, as if added by hand.")
    else:
        print(f"Removed source {rec.name!r} and its {n} file{'' if n == 1 else 's'} from {rec.store!r}.")
    return 0


__all__ = ["add_parser", "settings_from"]
