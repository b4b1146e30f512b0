"""Hostile files against bounded reading (issue 38): what each costs, what children cost.

``python bench/bench_hostile.py [--files 1000] [--model bundled|fake] [--json]`` prints three figures:

1. **The formatted-to-the-edge workbook** (a ~5 KB .xlsx whose only oddity is a styled empty cell
   at the sheet's last row and column, ``tests/helpers/hostile_sheets.py``): the time and peak
   resident memory (RSS) of reading it, in a fresh process reading in-process (``read_document``)
   and through a reader child (``ReaderPool.read``: the child's peak). Target: under 5 s and 300 MB.
2. **A batch of ``--files`` small files** (Markdown notes of ~60 words) ingested into a new store by
   :meth:`Workbench.ingest_paths`, once with reader children (``ingest.reader_processes = 2``, the
   default) and once reading in-process (``0``, what ingestion did before), in the same run,
   alternating, the faster of two runs each: files/s and their ratio (target ≥ 0.9). Also the
   read-and-chunk step alone (no catalog, no embedding), children against in-process.
3. **A worker's peak memory during a hostile batch**: ``python -m knowledge worker --once`` over a
   queued batch of every hostile input of issue 38 (the workbooks formatted, commented and merged to
   the edge, in .xlsx and .xls, a sheet repeated over every column
   of 2,000 rows, a 400-entry overlapping zip bomb, a 60 MB CSV, a CSV with a 1 MB field, a TNEF
   attachment, a base64-encoded ``message/rfc822`` part, an EPUB with a missing chapter, legacy zip
   names) between ordinary notes. The worker's RSS and its children's are sampled every 50 ms
   (psutil); printed: each peak, each file's outcome and reason, the wall time.
4. **Hostile web pages**, each through ``knowledge ingest <url>`` (private hosts allowed): one served
   ``Content-Encoding: gzip, gzip`` (3 GB of spaces, a few KB on the wire) and one whose headers
   arrive a byte every 0.5 s: the wall time, the peak RSS of the CLI with its children, the outcome.

Figures only: nothing is asserted. Run it niced, with few other jobs (``nice -n 5``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import psutil

_READ_IN_FRESH_PROCESS = """
import resource, sys, time
sys.path[:0] = {paths!r}
from knowledge.ingest.readers import read_document
data = open({path!r}, "rb").read()
t = time.perf_counter()
try:
    doc = read_document(data, {name!r})
    outcome = f"{{len(doc.text):,}} characters, {{len(doc.warnings)}} warnings"
except Exception as exc:
    outcome = f"{{type(exc).__name__}}: {{exc}}"
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, outcome, sep="\\t")
"""


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MB"


def edge_workbook(out: dict) -> None:
    from knowledge.ingest.isolated import ReaderPool, ReadLimits
    from tests.helpers.hostile_sheets import edge_formatted_xlsx

    data = edge_formatted_xlsx()
    with tempfile.NamedTemporaryFile(suffix=".xlsx", delete=False) as fh:
        fh.write(data)
    try:
        code = _READ_IN_FRESH_PROCESS.format(paths=[str(REPO)], path=fh.name, name="edge.xlsx")
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
        seconds, peak, outcome = run.stdout.strip().split("\t", 2) if run.stdout.strip() else ("nan", "0", run.stderr[-300:])
        pool = ReaderPool(1)
        try:
            pool.read(b"warm", "warm.txt", limits=ReadLimits())
            t = time.perf_counter()
            try:
                r = pool.read(data, "edge.xlsx", limits=ReadLimits())
                child = f"{len(r.document.text):,} characters, child peak {_mb(r.peak_rss)}"
                child_peak = r.peak_rss
            except Exception as exc:
                child, child_peak = f"{type(exc).__name__}: {exc}", 0
            child_seconds = time.perf_counter() - t
        finally:
            pool.close()
    finally:
        os.unlink(fh.name)
    out["edge_workbook"] = {
        "bytes": len(data),
        "in_process_seconds": float(seconds),
        "in_process_peak_rss": int(peak),
        "in_process": outcome,
        "child_seconds": child_seconds,
        "child_peak_rss": child_peak,
        "child": child,
    }
    print(f"1. formatted-to-the-edge workbook ({len(data):,} bytes):")
    print(f"   fresh process, in-process read: {float(seconds):.2f} s, peak RSS {_mb(int(peak))} ({outcome})")
    print(f"   reader child:                   {child_seconds:.2f} s, {child}")


def _notes(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note-{i:04d}.md").write_text(
            f"# Note {i}\n\nThe owl numbered {i} hunts mice at night; its flight is silent and its hearing"
            f" sharp. Field notes from survey {i % 17}, plot {i % 5}, written after dusk.\n",
            encoding="utf-8",
        )


def small_batch(out: dict, files: int, model: str) -> None:
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.ingest.isolated import Chunking, ReaderPool, ReadLimits, read_in_process
    from knowledge.workbench import Workbench

    work = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    _notes(work / "notes", files)
    rates: dict[str, list[float]] = {"children": [], "in-process": []}
    for round_ in range(2):
        for label, processes in (("children", 2), ("in-process", 0)):
            data = work / f"data-{label}-{round_}"
            settings = load_settings(
                data_dir=data,
                ingest={"reader_processes": processes, "worker_threads": 0},
                embeddings={"model": "fake/hash-64" if model == "fake" else "sentence-transformers/all-MiniLM-L6-v2"},
            )
            wb = Workbench(settings)
            try:
                wb.ingest_file("warm", b"# Warm\n\nwarm up the model and a child", "warm.md")
                t = time.perf_counter()
                results = wb.ingest_paths("notes", [work / "notes"])
                seconds = time.perf_counter() - t
            finally:
                wb.close()
            assert sum(r.outcome.value == "indexed" for r in results) == files, [r.message for r in results[:3]]
            rates[label].append(files / seconds)
            print(f"   round {round_ + 1}, {label}: {files / seconds:,.1f} files/s ({seconds:.1f} s)", flush=True)
    best = {k: max(v) for k, v in rates.items()}
    ratio = best["children"] / best["in-process"]
    # the read-and-chunk step alone
    emb = HashEmbedder(64, 256)
    texts = [p.read_bytes() for p in sorted((work / "notes").iterdir())]
    pool = ReaderPool(1)
    try:
        pool.read(texts[0], "warm.md", limits=ReadLimits(), chunking=Chunking(emb, 192, 48))
        t = time.perf_counter()
        for i, body in enumerate(texts):
            pool.read(body, f"n{i}.md", limits=ReadLimits(), chunking=Chunking(emb, 192, 48))
        child_rate = len(texts) / (time.perf_counter() - t)
    finally:
        pool.close()
    t = time.perf_counter()
    for i, body in enumerate(texts):
        read_in_process(body, f"n{i}.md", chunking=Chunking(emb, 192, 48))
    here_rate = len(texts) / (time.perf_counter() - t)
    out["small_batch"] = {
        "files": files,
        "model": model,
        "children_files_per_s": best["children"],
        "in_process_files_per_s": best["in-process"],
        "ratio": ratio,
        "read_only_children_files_per_s": child_rate,
        "read_only_in_process_files_per_s": here_rate,
        "read_only_ratio": child_rate / here_rate,
    }
    print(
        f"2. {files} small files, ingested ({model} model): children {best['children']:,.1f} files/s,"
        f" in-process {best['in-process']:,.1f} files/s: ratio {ratio:.2f}"
    )
    print(
        f"   read and chunk only: children {child_rate:,.0f} files/s, in-process {here_rate:,.0f} files/s:"
        f" ratio {child_rate / here_rate:.2f} (a message each way per file)"
    )


class _Server:
    """A raw HTTP server on loopback: ``/gzip2`` a page served ``Content-Encoding: gzip, gzip``
    (3 GB of spaces twice compressed, a few KB on the wire, past the 100 MB limit), ``/trickle`` a
    page whose headers arrive one byte every 0.5 s."""

    def __init__(self) -> None:
        inner = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing, fed 1 MB at a time
        spaces = b" " * 1_000_000
        layer = inner.compress(b"<html><body><p>") + b"".join(inner.compress(spaces) for _ in range(3000))
        layer += inner.compress(b"</p></body></html>") + inner.flush()
        self.bomb = gzip.compress(layer, 9)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            request = conn.recv(65536).decode("latin-1")
            path = request.split(" ", 2)[1] if " " in request else "/"
            if path.startswith("/robots.txt"):
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            elif path.startswith("/gzip2"):
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip, gzip\r\n"
                    + f"Content-Length: {len(self.bomb)}\r\nConnection: close\r\n\r\n".encode()
                    + self.bomb
                )
            else:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: " + b"x" * 10_000
                for byte in head:
                    if self.stop.is_set():
                        return
                    conn.sendall(bytes([byte]))
                    time.sleep(0.5)

    def close(self) -> None:
        self.stop.set()
        self.sock.close()


def hostile_batch(out: dict) -> None:
    from knowledge.catalog import jobs as q
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench
    from tests.helpers import hostile_archives as ha
    from tests.helpers import hostile_sheets as hs

    inputs = {
        "edge.xlsx": hs.edge_formatted_xlsx(),
        "edge-comment.xlsx": hs.edge_comment_xlsx(),
        "merged-edge.xlsx": hs.merged_edge_xlsx(),
        "edge.xls": hs.edge_formatted_xls(),
        "repeated.ods": hs.repeated_ods(),
        "bomb.zip": ha.overlapping_zip(),
        "big.csv": hs.big_csv(60),
        "long-field.csv": hs.long_field_csv(),
        "winmail.dat": ha.tnef_file(),
        "forwarded.eml": ha.base64_rfc822_eml(),
        "missing-chapter.epub": ha.epub_missing_chapter(),
        "legacy-names.zip": ha.legacy_name_zip(),
        "note-a.md": b"# A\n\nAn ordinary note about owls.\n",
        "note-b.md": b"# B\n\nAn ordinary note about tea.\n",
    }
    work = Path(tempfile.mkdtemp(prefix="bench-hostile-batch-"))
    data = work / "data"
    env = {
        **os.environ,
        "KNOWLEDGE_DATA_DIR": str(data),
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64",
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_INGEST__WEB_ALLOW_PRIVATE": "true",
    }
    wb = Workbench(load_settings(data_dir=data, embeddings={"model": "fake/hash-64"}))
    stored = [wb.files.save(name, "application/octet-stream", body) for name, body in inputs.items()]
    wb.base.stores.open_for_write("hostile", None)
    batch_id = q.enqueue(wb.catalog, "hostile", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])
    wb.close()
    t = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker_peak = children_peak = 0
    me = psutil.Process(proc.pid)
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            worker_peak = max(worker_peak, me.memory_info().rss)
            children_peak = max(children_peak, sum(c.memory_info().rss for c in me.children(recursive=True)))
        time.sleep(0.05)
    seconds = time.perf_counter() - t
    _, err = proc.communicate()
    wb = Workbench(load_settings(data_dir=data, embeddings={"model": "fake/hash-64"}))
    try:
        _, rows, _ = q.batch(wb.catalog, batch_id)
        outcomes = {r.name: (r.status, (r.reason or "")[:160]) for r in rows}
    finally:
        wb.close()
    out["hostile_batch"] = {
        "seconds": seconds,
        "worker_peak_rss": worker_peak,
        "children_peak_rss": children_peak,
        "worker_exit": proc.returncode,
        "outcomes": outcomes,
    }
    print(
        f"3. hostile batch ({len(inputs)} files) through one `knowledge worker --once`: {seconds:.1f} s,"
        f" exit {proc.returncode}; worker peak RSS {_mb(worker_peak)}, its reader children at most"
        f" {_mb(children_peak)} together"
    )
    for name, (status, reason) in outcomes.items():
        print(f"   {name:22s} {status:7s} {reason}")
    if proc.returncode:
        print(err[-2000:])


def hostile_web(out: dict) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-hostile-web-"))
    env = {
        **os.environ,
        "KNOWLEDGE_DATA_DIR": str(work / "data"),
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64",
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_INGEST__WEB_ALLOW_PRIVATE": "true",
    }
    server = _Server()
    web: dict[str, tuple[int, str, float]] = {}
    try:
        for path in ("gzip2", "trickle"):
            url = f"http://127.0.0.1:{server.port}/{path}.html"
            t0 = time.perf_counter()
            run = subprocess.Popen(
                [sys.executable, "-m", "knowledge", "ingest", "hostile-web", url],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            peak = 0
            while run.poll() is None:
                with contextlib.suppress(psutil.Error):
                    p = psutil.Process(run.pid)
                    peak = max(peak, p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True)))
                time.sleep(0.05)
            stdout, _ = run.communicate()
            lines = [ln for ln in stdout.strip().splitlines() if "127.0.0.1" in ln]  # the file's row, not the header
            web[path] = (
                peak,
                " ".join(lines[0].split())[:220] if lines else stdout.strip()[-220:],
                time.perf_counter() - t0,
            )
    finally:
        server.close()
    out["hostile_web"] = {k: {"peak_rss": v[0], "outcome": v[1], "seconds": v[2]} for k, v in web.items()}
    for path, (peak, line, secs) in web.items():
        print(f"4. web /{path}: {secs:.1f} s, peak RSS {_mb(peak)} (CLI and children): {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--model", choices=["bundled", "fake"], default="bundled")
    ap.add_argument("--only", choices=["edge", "batch", "hostile", "web"], default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # a child's death
    out: dict = {}
    if args.only in (None, "edge"):
        edge_workbook(out)
    if args.only in (None, "batch"):
        small_batch(out, args.files, args.model)
    if args.only in (None, "hostile"):
        hostile_batch(out)
    if args.only in (None, "web"):
        hostile_web(out)
    if args.json:
        print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
