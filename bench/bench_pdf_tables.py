"""PDF reading with table detection against without (issue 43): pages/s and peak RSS per mode.

Every PDF of ``../shared/corpus/pdf`` and ``../shared/corpus/pdf-tables`` (its subfolders included;
``--dir`` adds a folder of one's own) is read with
``knowledge.ingest._pdf.read_pdf(data, ocr="off", tables="off")`` and with ``tables="auto"``. Each
(folder, mode, repetition) runs in a fresh child process, so its peak RSS (``ru_maxrss``: the
process's resident set at its highest, imports included) is that mode's alone; the order of the two
modes alternates from one repetition to the next (off first, then auto first, ...) and the figures
are the medians of ``--repeat`` repetitions.

In the child the readers are imported before the clock starts (with ``tables="auto"`` camelot, too,
whose import is timed apart: a long-lived process pays it once); each file's bytes are read before
its clock starts. Per folder it prints a Markdown table row: files, pages, pages/s without and with
tables (wall), the ratio of the two times (with ÷ without; issue 43's target is at most 2), CPU
seconds per page of each mode (the steadier figure on a shared machine), peak RSS of each mode in
MB; then the files that failed to read (named with the reason, never fatal; the same in both modes
or said otherwise), the tables found, and the files whose detection took longest. A folder that is
absent is skipped and said so.

Usage: ``python bench/bench_pdf_tables.py [--repeat 3] [--dir DIR] [--no-corpus]``. Prints figures;
asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CORPUS = ROOT.parent / "shared" / "corpus"
FOLDERS = [CORPUS / "pdf", CORPUS / "pdf-tables"]
MODES = ("off", "auto")
LOADS: list[float] = []  # the 1-minute load average after each child


def pdfs(folder: Path) -> list[Path]:
    """The PDFs under ``folder`` (subfolders included), sorted by path."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")


def _cpu() -> float:
    """CPU seconds of this process (all threads) and of its children, user + system."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def one(folder: Path, mode: str) -> dict:
    """Run in a fresh child: read every PDF under ``folder`` with ``tables=mode``.

    Returns ``{"mode", "files": {relative path: {"pages", "seconds", "tables"} | {"error"}},
    "seconds", "cpu_s", "pages", "import_s", "rss_after_import_mb", "peak_mb"}`` (seconds wall,
    summed over the files read; RSS in MB).
    """
    import pypdf  # noqa: F401 - imported before the clock, like the product's long-lived process
    import pypdfium2  # noqa: F401

    from knowledge.ingest._pdf import read_pdf

    t0 = time.perf_counter()
    if mode == "auto":
        import camelot  # noqa: F401 - heavy (pandas, OpenCV); timed apart
    import_s = time.perf_counter() - t0
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    files: dict[str, dict] = {}
    total = cpu = 0.0
    pages = 0
    for path in pdfs(folder):
        data = path.read_bytes()
        c0, t0 = _cpu(), time.perf_counter()
        try:
            doc = read_pdf(data, name=path.name, ocr="off", tables=mode)
        except Exception as exc:  # counted and named, never fatal
            files[str(path.relative_to(folder))] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            continue
        finally:
            seconds = time.perf_counter() - t0
            cpu += _cpu() - c0
            total += seconds
        n = doc.pages or 0
        pages += n
        files[str(path.relative_to(folder))] = {"pages": n, "seconds": seconds, "tables": len(doc.tables)}
    return {
        "mode": mode,
        "files": files,
        "seconds": total,
        "cpu_s": cpu,
        "pages": pages,
        "import_s": import_s,
        "rss_after_import_mb": rss0,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def child(folder: Path, mode: str) -> dict:
    """:func:`one` in a fresh Python process; its result (the last line of its stdout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, __file__, "--one", str(folder), mode],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the child reading {folder} with tables={mode} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(folder: Path, repeat: int) -> dict[str, list[dict]]:
    """``{mode: [one run per repetition]}``; repetition ``i`` runs the modes in turn, ``off`` first
    when ``i`` is even, ``auto`` first when odd."""
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for i in range(repeat):
        for mode in MODES if i % 2 == 0 else MODES[::-1]:
            runs[mode].append(child(folder, mode))
            LOADS.append(os.getloadavg()[0])
            print(
                f"  {folder.name} repetition {i + 1}: tables={mode:<4} {runs[mode][-1]['seconds']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    return runs


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(label: str, runs: dict[str, list[dict]]) -> tuple[str, list[str]]:
    """A Markdown row of the figures and the lines that follow the table (failures, tables, slowest)."""
    off, auto = runs["off"], runs["auto"]
    pages = {m: {r["pages"] for r in rs} for m, rs in runs.items()}
    n_pages = off[0]["pages"]
    files = len(off[0]["files"])
    s_off, s_auto = median(off, "seconds"), median(auto, "seconds")
    cpu_off, cpu_auto = median(off, "cpu_s"), median(auto, "cpu_s")
    per_page = max(n_pages, 1)
    row = (
        f"| {label} | {files} | {n_pages} | {n_pages / s_off:.1f} | {n_pages / s_auto:.1f} | {s_auto / s_off:.2f} |"
        f" {cpu_off / per_page * 1000:.0f} | {cpu_auto / per_page * 1000:.0f} |"
        f" {median(off, 'peak_mb'):.0f} | {median(auto, 'peak_mb'):.0f} |"
    )
    notes = [f"{label}: pages read: tables=off {sorted(pages['off'])}, tables=auto {sorted(pages['auto'])}"]
    failed = {m: {f: v["error"] for f, v in rs[0]["files"].items() if "error" in v} for m, rs in runs.items()}
    for mode in MODES:
        names = "; ".join(f"{f} ({why})" for f, why in sorted(failed[mode].items())) or "none"
        notes.append(f"{label}: failed to read with tables={mode}: {len(failed[mode])}: {names}")
    counts = {f: v["tables"] for f, v in auto[0]["files"].items() if v.get("tables")}
    listed = ", ".join(f"{f} {n}" for f, n in sorted(counts.items())[:8]) + (", ..." if len(counts) > 8 else "")
    notes.append(
        f"{label}: tables found with tables=auto: {sum(counts.values())} in {len(counts)} files"
        + (f" ({listed})" if counts else "")
    )
    notes.append(f"{label}: CPU time with ÷ without: {cpu_auto / cpu_off:.2f}")
    notes.append(
        f"{label}: camelot import {median(auto, 'import_s'):.2f} s (once per process, not in the pages/s);"
        f" RSS after the imports {median(off, 'rss_after_import_mb'):.0f} MB without camelot,"
        f" {median(auto, 'rss_after_import_mb'):.0f} MB with"
    )
    extra = {}
    for name, v in auto[0]["files"].items():
        if "seconds" in v and "seconds" in off[0]["files"].get(name, {}):
            s_a = statistics.median(r["files"][name]["seconds"] for r in auto)
            s_o = statistics.median(r["files"][name]["seconds"] for r in off)
            extra[name] = (s_a - s_o, s_o, s_a, v["pages"])
    slow = sorted(extra.items(), key=lambda kv: -kv[1][0])[:3]
    if slow:
        notes.append(
            f"{label}: most time added by detection: "
            + "; ".join(f"{n} ({p} pages) {o:.2f} s -> {a:.2f} s" for n, (_, o, a, p) in slow)
        )
    return row, notes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per mode (the median is shown); default 3")
    ap.add_argument("--dir", type=Path, action="append", default=[], help="another folder of PDFs (repeatable)")
    ap.add_argument("--no-corpus", action="store_true", help="only the --dir folders")
    ap.add_argument("--one", nargs=2, metavar=("FOLDER", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        folder, mode = args.one
        print(json.dumps(one(Path(folder), mode)))
        return 0
    folders = ([] if args.no_corpus else FOLDERS) + args.dir
    print(
        f"PDF reading with table detection (tables=auto) against without (tables=off), ocr=off; each mode in a"
        f" fresh process, modes alternating, median of {args.repeat}"
    )
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    rows, notes = [], []
    for folder in folders:
        if not folder.is_dir():
            print(f"{folder}: absent, skipped")
            continue
        if not pdfs(folder):
            print(f"{folder}: no PDFs, skipped")
            continue
        runs = measure(folder, args.repeat)
        row, more = report(folder.name, runs)
        rows.append(row)
        notes += more
    if LOADS:
        print(f"load average after each child: {min(LOADS):.2f} to {max(LOADS):.2f}; at the end {os.getloadavg()[0]:.2f}")
    if not rows:
        print("nothing measured")
        return 0
    print()
    print(
        "| folder | files | pages | pages/s without | pages/s with | with ÷ without (time) |"
        " CPU ms/page without | CPU ms/page with | peak RSS MB without | peak RSS MB with |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
