"""``ingest STORE PATH...``: files, folders and web pages (``https://...``, with ``--depth`` its same-site
links) into a store (created on the fly), one line per file
as it finishes (a progress bar on a terminal), then the counts; exit 1 when a file failed (the
others went on) or no file matched. ``--readers`` restricts who may read the new files (besides
the store's owners) before their first chunk is written. The files are one batch of ingestion jobs
(:class:`~knowledge.service.jobs.IngestJob`): this process's worker, or dedicated ``worker``
processes (``ingest.worker_threads = 0``), ingest them; a second ``ingest`` into the same data
folder queues behind the first and waits its turn; Ctrl-C cancels the batch. Web pages are fetched
and ingested by this process itself (:mod:`knowledge.service.web`), after the files.

While the catalog (or another backend) cannot be reached the command says "waiting for the database
(...)" on stderr and tries again with back-off (:class:`~knowledge.service.outage.OutageWait`) for
up to ``catalog.outage_wait_seconds``; then it goes on (the batch is submitted once, no file lost),
or ends with exit 2 and a message naming the files submitted and those not."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from knowledge._names import shown
from knowledge.cli.common import Commands, command
from knowledge.errors import InvalidArgument
from knowledge.ingest.chunker import plan_chunking
from knowledge.outcomes import IngestResult, Outcome, needs_password
from knowledge.service.indexing import expand_paths, file_names, skipped_text
from knowledge.service.jobs import FileProgress, IngestJob, new_batch_id
from knowledge.service.outage import OutageTooLong, OutageWait
from knowledge.service.web import MAX_DEPTH
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "ingest", help="ingest files and folders into a store (created on the fly)")
    s.add_argument("store")
    s.add_argument("paths", nargs="+", metavar="PATH", help="a file, a folder, or the http(s):// URL of a web page")
    s.add_argument("--template", help="template for a new store (default: default)")
    s.add_argument("--glob", help="files to take from folders (default: **/*)")
    s.add_argument(
        "--depth",
        type=int,
        default=0,
        help=f"web pages: also the pages they link to on the same site, this many links away"
        f" (0-{MAX_DEPTH}; default 0: the page only)",
    )
    s.add_argument(
        "--max-pages",
        type=int,
        default=None,
        help="web pages: at most this many pages per URL (default: 1, or ingest.web_max_pages with --depth)",
    )
    s.add_argument("--password", help="password for encrypted PDFs and Office files")
    s.add_argument(
        "--readers",
        metavar="READERS",
        help="who may read the new files (besides the store's owners), e.g. 'group:hr, user:ana';"
        " set before their first chunk is written (default: whoever may read the store; a new version"
        " of a file keeps the readers of the one it replaces); `files readers` changes them later",
    )
    s.add_argument("--json", action="store_true", help="print the results as JSON")
    s.set_defaults(func=cmd_ingest)


def is_url(arg: str) -> bool:
    """Whether a PATH argument is a URL (``scheme://...``), not a file: ``https://x.org/`` (and
    ``ftp://...``, refused with a reason by the web ingestion)."""
    scheme, sep, _ = arg.partition("://")
    return bool(sep) and len(scheme) > 1 and scheme.isascii() and scheme.replace("+", "").isalpha()


def cmd_ingest(wb: Workbench, args: argparse.Namespace) -> int:
    skipped: dict[str, int] = {}
    urls = [p for p in args.paths if is_url(p)]
    files = expand_paths([p for p in args.paths if not is_url(p)], args.glob, skipped)
    note = skipped_text(skipped)
    if note:
        print(note, file=sys.stderr)
    if not files and not urls:
        print("No files matched.", file=sys.stderr)
        return 1
    outage = OutageWait(wb.settings.catalog.outage_wait_seconds, say)
    # the pools' own line per failed reconnection would bury it: "waiting for the database" says it once
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

    def prepare() -> Any:
        wb.authorize(args.store, "write", create=True)  # refused before any line is printed (a view: --user)
        wb.check_readers(args.readers)  # a bad reader, an unknown user or group: before anything is queued
        record = wb.store_record(args.store)
        return wb.template(args.template or (record.template if record else "default"))

    try:
        tpl = outage.call(prepare)
    except OutageTooLong as exc:
        return _gave_up(exc, submitted=[], finished=[], left=[_label({}, p) for p in files] + urls)
    for note in plan_chunking(wb.embedder(tpl.embedding_model), tpl.max_chunk_size_tokens, tpl.chunk_overlap_tokens).notes:
        print(f"note: {note}", file=sys.stderr)
    names = file_names(files)
    results = _ingest(wb, args, files, names, outage) if files else []
    if results is None:  # the database stayed away: said, with which files were submitted
        return 2
    if urls:
        results += _ingest_urls(wb, args, urls, header=not files)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "outcome": r.outcome,
                        "message": r.message,
                        "error": r.error,
                        "file_id": r.file_id,
                        "chunks": r.chunks,
                        "pages": r.pages,
                        "warnings": r.warnings,
                        "seconds": round(r.seconds, 3),
                    }
                    for r in results
                ],
                ensure_ascii=False,
                indent=2,
            )
        )
    else:
        counts = ", ".join(f"{n} {o}" for o in Outcome if (n := sum(r.outcome == o for r in results)))
        chunks = sum(r.chunks for r in results)
        print(
            f"\n{len(results)} file{'' if len(results) == 1 else 's'}: {counts or 'none'};"
            f" {chunks} chunk{'' if chunks == 1 else 's'} in the store from them."
        )
    return 1 if any(not r.ok for r in results) else 0


def say(line: str) -> None:
    """A line about the command's own progress ("waiting for the database (...)") on stderr."""
    print(line, file=sys.stderr, flush=True)


def _gave_up(exc: OutageTooLong, *, submitted: list[str], finished: list[str], left: list[str]) -> int:
    """Say that the database stayed away (``exc``) and what became of the files: ``finished`` (their
    lines were shown), ``submitted`` (queued, not finished: a worker ingests them once the database
    is back) and ``left`` (not submitted: run the command again for them). Returns the exit code, 2."""

    def listed(names: list[str]) -> str:
        shown_names = ", ".join(shown(n) for n in names[:20])
        return shown_names + (f" and {len(names) - 20} more" if len(names) > 20 else "")

    parts = [f"error: {exc}."]
    if finished:
        parts.append(f"Finished before: {len(finished)} file{'' if len(finished) == 1 else 's'} (listed above).")
    if submitted:
        parts.append(
            f"Submitted, not finished yet: {listed(submitted)} -- queued in the catalog, a worker"
            " ingests them once the database is back (do not submit them again)."
        )
    if left:
        parts.append(f"Not submitted: {listed(left)} -- run the same command again once the database is back.")
    say(" ".join(parts))
    return 2


def _ingest(
    wb: Workbench, args: argparse.Namespace, files: list[Path | str], names: dict[Path, str], outage: OutageWait
) -> list[IngestResult] | None:
    """Queue ``files`` as one batch of job rows and wait for it, printing each result's line
    (unless --json) in order as it finishes. This process's worker ingests it (and any other
    batch queued meanwhile), unless ``ingest.worker_threads = 0``: then dedicated ``worker``
    processes do, and the command only waits. Ctrl-C cancels the batch (the file being ingested
    and the ones not started; the store keeps what was finished), then exits 130.

    While the catalog cannot be reached, ``outage`` waits (saying so on stderr) and tries again: the
    batch is written once (:meth:`IngestJob.start` may be called again), its rows read again. Past
    ``catalog.outage_wait_seconds``: ``None``, after saying which files were submitted and which not."""
    bar = tqdm(total=len(files), unit="file", disable=args.json or not sys.stderr.isatty(), file=sys.stderr)
    lines = _Lines(min(60, max([len("file")] + [len(_label(names, p)) for p in files])))
    if not args.json:  # one line per file as it finishes, not a table at the end
        print(lines.header(), flush=True)
    progress = _OcrProgress(bar, quiet=args.json)
    paths = [p for p in files if isinstance(p, Path)]
    items = [(_label(names, p), p) for p in paths]
    batch_id = new_batch_id()  # every attempt writes this batch: once
    results: list[IngestResult] = []
    job: IngestJob | None = None

    def file_at(n: int) -> FileProgress:
        assert job is not None  # submitted before its files are read
        return job.files[n]  # the batch's rows, read from the catalog

    def show(r: IngestResult) -> None:
        results.append(r)
        bar.update(1)
        if args.json:
            return
        text = lines.result(r, args.password).rstrip()
        if bar.disable:
            print(text, flush=True)
        else:
            bar.write(text, file=sys.stdout)

    try:
        try:
            job = outage.call(  # checked and recorded at each attempt; the batch written once
                wb.submit_batch,
                args.store,
                items,
                template=args.template,
                password=args.password,
                batch_id=batch_id,
                readers=args.readers,
            )
        except OutageTooLong as exc:
            _gave_up(exc, submitted=[], finished=[], left=[_label(names, p) for p in files])
            return None
        if not wb.runs_workers() and not args.json:
            print(
                "queued: waiting for a worker (ingest.worker_threads = 0: `python -m knowledge worker` processes ingest it)",
                file=sys.stderr,
                flush=True,
            )
        done = 0  # files of the job shown so far
        waited = 0.05
        for path in files:
            if isinstance(path, str):  # a path that does not exist: said in its place
                show(
                    IngestResult(
                        Path(path).name or path,
                        Outcome.FAILED,
                        f"{path}: no such file or folder.",
                        error="FileNotFoundError",
                    )
                )
                continue
            while True:
                try:
                    fp = outage.call(file_at, done)
                except OutageTooLong as exc:
                    shown_so_far = len(results)
                    _gave_up(
                        exc,
                        submitted=[_label(names, p) for p in files[shown_so_far:] if isinstance(p, Path)],
                        finished=[r.name for r in results],
                        left=[],
                    )
                    return None
                if fp.result is not None:
                    break
                bar.set_postfix_str(fp.name[:40])
                progress(fp.name, fp.stage, fp.fraction)
                time.sleep(waited)
                waited = min(waited * 1.5, WAIT_SECONDS)
                wb.ensure_worker()  # one gone idle while another process had the file; it ingests for everyone
            show(wb.readable_result(args.store, fp.result))
            done += 1
    except KeyboardInterrupt:
        if job is not None and job.batch_id is not None:
            print("stopping: the batch is cancelled (the store keeps the files finished)", file=sys.stderr, flush=True)
            job.cancel()
            job.wait(30)
        raise
    finally:
        bar.close()
    return results


def _ingest_urls(wb: Workbench, args: argparse.Namespace, urls: list[str], *, header: bool) -> list[IngestResult]:
    """Fetch and ingest each web page of ``urls`` (with ``--depth``, ``--max-pages``) in this process
    (:func:`knowledge.service.web.ingest_web`), one line per page as it finishes; a URL that cannot
    be had is a failed line with the reason, the others go on."""
    lines = _Lines(min(60, max(len("file"), *(len(u) for u in urls))))
    if header and not args.json:
        print(lines.header(), flush=True)
    results: list[IngestResult] = []

    def show(r: IngestResult) -> None:
        r = wb.readable_result(args.store, r)
        results.append(r)
        if not args.json:
            print(lines.result(r, args.password).rstrip(), flush=True)

    for url in urls:
        notes: list[str] = []
        try:
            wb.ingest_web(
                args.store,
                url,
                depth=args.depth,
                max_pages=args.max_pages,
                template=args.template,
                on_result=show,
                notes=notes,
                readers=args.readers,
            )
        except InvalidArgument as exc:  # a bad URL, depth or max_pages: this URL's line says why
            show(IngestResult(url, Outcome.FAILED, f"{url}: {exc}", error=type(exc).__name__))
        for note in notes:
            print(note, file=sys.stderr)
    return results


#: Seconds at most between two looks at the batch's rows while waiting for it.
WAIT_SECONDS = 0.25


def _label(names: dict[Path, str], path: Path | str) -> str:
    """The name ``path`` is shown (and stored) under; a path that does not exist as it was given."""
    return names.get(path, path.name) if isinstance(path, Path) else path


class _Lines:
    """The columns of the per-file lines: file (``width`` characters), outcome, chunks, pages, time,
    then the reason or the warnings."""

    def __init__(self, width: int) -> None:
        self.columns = (("file", width), ("outcome", 9), ("chunks", 6), ("pages", 5), ("time", 8))

    def line(self, cells: Sequence[object], last: str) -> str:
        """One line; a bidirectional control in a name or reason shown as ``[U+202E]`` (a terminal
        would obey it and reorder the line)."""
        return "  ".join(shown(str(c))[:w].ljust(w) for c, (_, w) in zip(cells, self.columns)) + "  " + shown(last)

    def header(self) -> str:
        """The headers and the rule of dashes under them."""
        return (
            self.line([h for h, _ in self.columns], "reason / warnings")
            + "\n"
            + self.line(["-" * w for _, w in self.columns], "-" * 17)
        )

    def result(self, r: IngestResult, password: str | None) -> str:
        last = (
            (r.message + (" (use --password)" if needs_password(r) and not password else ""))
            if not r.ok
            else "; ".join(r.warnings)
        )
        return self.line([r.name, r.outcome, r.chunks or "", r.pages or "", f"{r.seconds:.2f}s"], last)


class _OcrProgress:
    """The ingest progress callback ``(name, stage, fraction)``. OCR is slow: one line (or the bar's
    note) per page read, with the time left; nothing with ``quiet``."""

    def __init__(self, bar: tqdm, *, quiet: bool) -> None:
        self.bar, self.quiet = bar, quiet
        self.states: dict[str, FileProgress] = {}
        self.printed: dict[str, str] = {}  # name -> the stage last printed for it

    def __call__(self, name: str, stage: str, fraction: float) -> None:
        fp = self.states.setdefault(name, FileProgress(name))
        fp.update(stage, fraction)
        if not stage.startswith("OCR") or self.quiet:
            return
        eta = fp.eta_seconds()
        note = f"{name[:40]}: {stage}" + (f", about {max(1, round(eta))} s left" if eta is not None else "")
        if self.bar.disable:
            if self.printed.get(name) != stage:  # one line a page, not one a step of it
                self.printed[name] = stage
                print(note, file=sys.stderr, flush=True)
        else:
            self.bar.set_postfix_str(note)
