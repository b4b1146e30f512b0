"""The OpenAI-compatible API against the service layer it wraps, in one run, with the bundled model.

1. Upload the Rust book (``../shared/corpus/md/rust-book``, or ``--book``) through the API: ``python -m
   knowledge serve`` in a subprocess on a free loopback port, the official ``openai`` client's
   ``file_batches.upload_and_poll`` (uploads, then background ingestion jobs, polled) -- against the
   baseline, the same files ingested in this process by ``Workbench.ingest_paths``.
2. Search latency: the same queries through ``POST /v1/vector_stores/{id}/search`` (HTTP + JSON on
   loopback) and in-process ``Workbench.search`` (hybrid, k=10), on stores of the same content;
   p50 and p95 of each, and the ratio.

    python bench/bench_api.py [--files N] [--queries 60]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

QUERIES = [
    "How do I propagate an error to the caller?",
    "What does the ? operator do?",
    "panic! macro",
    "ownership and borrowing rules",
    "dangling references",
    "What is a trait object?",
    "lifetimes in structs",
    "iterator adaptors map and filter",
    "Rc<T> reference counting",
    "RefCell interior mutability",
    "threads and message passing with channels",
    "Mutex and Arc",
    "pattern matching with match",
    "if let syntax",
    "cargo new project",
    "unit tests with #[test]",
    "generic type parameters",
    "closures capturing the environment",
    "Box<T> for recursive types",
    "unsafe Rust raw pointers",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def upload(client, name: str, files: list[Path]) -> tuple[float, int, int]:
    """Upload ``files`` into a new store through the API and wait: ``(seconds, completed, chunks)``."""
    vs = client.vector_stores.create(name=name)
    t0 = time.perf_counter()
    handles = [open(p, "rb") for p in files]  # noqa: SIM115 - closed in the finally below (one list of many)
    try:
        batch = client.vector_stores.file_batches.upload_and_poll(vector_store_id=vs.id, files=handles, poll_interval_ms=500)
    finally:
        for h in handles:
            h.close()
    seconds = time.perf_counter() - t0
    listed = list(client.vector_stores.files.list(vector_store_id=vs.id, limit=100))
    return seconds, batch.file_counts.completed, sum(f.model_extra.get("chunks") or 0 for f in listed)


def start_server(data: Path, port: int) -> subprocess.Popen:
    import openai

    env = {**os.environ, "KNOWLEDGE_DATA_DIR": str(data), "PYTHONPATH": str(REPO)}
    server = subprocess.Popen(
        [sys.executable, "-m", "knowledge", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=data.parent,
    )
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local", max_retries=0, timeout=3600)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.models.list()
            return server
        except openai.APIConnectionError:
            if time.monotonic() > deadline:
                server.terminate()
                raise
            time.sleep(0.2)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--book", default=str(REPO.parent / "shared" / "corpus" / "md" / "rust-book"))
    ap.add_argument("--files", type=int, default=0, help="only the first N files of the book (default: all)")
    ap.add_argument(
        "--sample",
        type=int,
        default=10,
        help="files uploaded through the API and ingested in-process, for the ratio (default 10)",
    )
    ap.add_argument("--queries", type=int, default=60, help="searches per side (default 60)")
    args = ap.parse_args()
    import openai

    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    files = sorted(p for p in Path(args.book).glob("*.md"))
    if args.files:
        files = files[: args.files]
    sample = files[: args.sample]
    tmp = Path(tempfile.mkdtemp(prefix="bench-api-"))
    data = tmp / "data"
    data.mkdir()
    port = free_port()
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local", max_retries=0, timeout=3600)
    server = start_server(data, port)
    try:
        s_api, done, s_chunks = upload(client, "sample-api", sample)
        print(
            f"sample: {len(sample)} files, {sum(p.stat().st_size for p in sample) / 1e3:.0f} kB -- API upload +"
            f" ingestion {s_api:.1f} s ({done} completed, {s_chunks} chunks)"
        )
        b_api, done, b_chunks = upload(client, "rust-book", files)
        print(
            f"Rust book through the API: {len(files)} files, {sum(p.stat().st_size for p in files) / 1e6:.2f} MB,"
            f" {b_api:.1f} s, {done} completed, {b_chunks} chunks ({b_chunks / b_api:.1f} chunks/s)"
        )
        vs_id = next(s.id for s in client.vector_stores.list() if s.name == "rust-book")
        queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        for q in QUERIES[:3]:  # warm up (BM25 index build)
            client.vector_stores.search(vs_id, query=q, max_num_results=10)
        api_t = []
        for q in queries:
            t0 = time.perf_counter()
            client.vector_stores.search(vs_id, query=q, max_num_results=10)
            api_t.append((time.perf_counter() - t0) * 1000)
    finally:
        server.terminate()
        server.wait(30)

    wb = Workbench(load_settings(data_dir=data))  # the same data folder, the same store
    try:
        for q in QUERIES[:3]:
            wb.search("rust-book", q, k=10)
        local_t = []
        for q in queries:
            t0 = time.perf_counter()
            wb.search("rust-book", q, k=10)
            local_t.append((time.perf_counter() - t0) * 1000)
        print(
            f"search k=10 hybrid, {len(queries)} queries, the same store: API p50 {statistics.median(api_t):.1f} ms"
            f" (p95 {pct(api_t, 0.95):.1f}) vs in-process p50 {statistics.median(local_t):.1f} ms"
            f" (p95 {pct(local_t, 0.95):.1f}); ratio p50 {statistics.median(api_t) / statistics.median(local_t):.2f}"
        )
        t0 = time.perf_counter()
        results = wb.ingest_paths("sample-local", sample)
        s_local = time.perf_counter() - t0
        print(
            f"sample in-process (Workbench.ingest_paths): {s_local:.1f} s, {sum(r.chunks for r in results)} chunks;"
            f" API / in-process time {s_api / s_local:.2f}"
        )
    finally:
        wb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
