"""Team mode on one machine: ingestion workers, the catalog's engines, API processes -- in one run.

One embedded PostgreSQL 18 + pgvector (``knowledge.vectorstore.pg_embedded``, a Unix socket in a temp
folder, as the tests' ``pg_server``) holds the catalog and the vectors; each part gets a fresh database.

1. Ingestion throughput with 1 and 2 ``python -m knowledge worker --once`` processes: the same slice
   of the Rust book (``../shared/corpus/md/rust-book``, the first ``--files`` chapters by name) saved
   to the file store and enqueued as one batch of job rows (``knowledge.catalog.jobs.enqueue``, what
   the app and the API write) into a new pgvector store, bundled model. ``embeddings.threads`` per
   worker = cores / workers, so two workers do not oversubscribe the cores; printed with the figures.
2. Catalog operation p50, DuckDB file vs PostgreSQL, same process: ``put_file``, ``files(store)`` (a
   store of ``--catalog-files`` files), ``get_store``, ``list_stores``, ``change_token``.
3. Search p50 through 1 vs 2 ``python -m knowledge serve`` processes on one PostgreSQL catalog (the
   store of part 1): ``--clients`` client threads (the ``openai`` client, hybrid k=10, loopback),
   each sending ``--queries`` / ``--clients`` queries, thread i to server i mod n.

    python bench/bench_team.py [--files 16] [--queries 160] [--clients 4] [--catalog-ops 300]

Prints figures and the load average; asserts nothing about time. Every loop is bounded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_api import QUERIES, free_port, pct

CORES = os.cpu_count() or 1


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def database(base_url: str, name: str) -> str:
    """A fresh database ``name`` on the server of ``base_url``; its URL."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path="/" + name))


def team_env(data: Path, url: str, threads: int) -> dict[str, str]:
    """The environment of a team-mode process: catalog and vectors on ``url``, files in ``data``."""
    return {**os.environ, "PYTHONPATH": str(REPO), "KNOWLEDGE_DATA_DIR": str(data),
            "KNOWLEDGE_CATALOG__URL": url, "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
            "KNOWLEDGE_VECTOR_STORE__URL": url, "KNOWLEDGE_EMBEDDINGS__THREADS": str(threads)}


def team_settings(data: Path, url: str, threads: int):
    from knowledge.config import load_settings

    return load_settings(data_dir=data, catalog={"url": url},
                         vector_store={"backend": "pgvector", "url": url}, embeddings={"threads": threads})


# -- 1. ingestion with 1 and 2 workers ----------------------------------------------------------------
def ingest_run(base_url: str, tmp: Path, files: list[Path], workers: int) -> dict:
    from knowledge.catalog import jobs as q
    from knowledge.workbench import Workbench

    url = database(base_url, f"ingest{workers}")
    data = tmp / f"ingest{workers}"
    threads = max(1, CORES // workers)
    wb = Workbench(team_settings(data, url, threads))
    try:
        wb.create_store("book")
        stored = [wb.files.save(p.name, "text/markdown", p.read_bytes()) for p in files]
        batch_id = q.enqueue(wb.catalog, "book", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])
    finally:
        wb.close()
    env = team_env(data, url, threads)
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp) for _ in range(workers)]
    errors = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=3600)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        if p.returncode != 0:
            errors.append(err.decode(errors="replace")[-2000:])
    wall = time.perf_counter() - t0
    wb = Workbench(team_settings(data, url, threads))
    try:
        _, rows, _ = q.batch(wb.catalog, batch_id)
        records = wb.store_files("book")
    finally:
        wb.close()
    started = [r.started for r in rows if r.started]
    finished = [r.finished for r in rows if r.finished]
    span = (max(finished) - min(started)).total_seconds() if started and finished else float("nan")
    return {"workers": workers, "threads": threads, "wall": wall, "span": span, "url": url, "data": data,
            "done": sum(r.status == "done" for r in rows), "jobs": len(rows),
            "chunks": sum(f.chunks for f in records), "per_worker": sorted(
                sum(1 for r in rows if r.worker == w) for w in {r.worker for r in rows}), "errors": errors}


# -- 2. catalog operations: DuckDB vs PostgreSQL --------------------------------------------------------
def catalog_ops(catalog, n: int, files: int) -> dict[str, float]:
    """p50 in ms of each operation, ``n`` calls each, on a store of ``files`` file records."""
    from knowledge.catalog import DONE, FileRecord

    catalog.put_store("bench", "default", "pgvector", "m", 384, "cosine")
    for i in range(files):
        catalog.put_file(FileRecord("bench", f"f{i:05d}", f"file-{i:05d}.md", f"{i:064x}", 1000, DONE, None, 10, None))
    for i in range(20):
        catalog.put_store(f"other-{i:02d}", "default", "pgvector", "m", 384, "cosine")
    ops = {
        "put_file": lambda i: catalog.put_file(FileRecord("bench", f"new{i % 50:03d}", f"new-{i % 50:03d}.md",
                                                          None, 10, DONE, None, i % 7, None)),
        "files(store)": lambda i: catalog.files("bench"),
        "get_store": lambda i: catalog.get_store("bench"),
        "list_stores": lambda i: catalog.list_stores(),
        "change_token": lambda i: catalog.change_token(),
    }
    out = {}
    for name, op in ops.items():
        for i in range(5):
            op(i)  # warm
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            op(i)
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(times)
    return out


# -- 3. search through 1 or 2 API processes -------------------------------------------------------------
def start_server(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen, int]:
    import openai

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "knowledge", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local", max_retries=0, timeout=600)
    deadline = time.monotonic() + 120
    while True:
        try:
            client.models.list()
            return server, port
        except openai.APIConnectionError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.terminate()
                raise
            time.sleep(0.2)


def search_run(run: dict, tmp: Path, servers: int, clients: int, queries: int) -> dict:
    import openai

    from knowledge.server.objects import vector_store_id

    threads = max(1, CORES // servers)
    env = team_env(run["data"], run["url"], threads)
    procs = [start_server(env, tmp) for _ in range(servers)]
    vs_id = vector_store_id("book")
    try:
        per = [openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local", max_retries=0, timeout=600)
               for _, port in procs]
        for c in per:  # warm: the model, the pool, the store's record
            for q in QUERIES[:4]:
                c.vector_stores.search(vs_id, query=q, max_num_results=10)
        times: list[float] = []
        lock = threading.Lock()
        each = max(1, queries // clients)

        def client_thread(i: int) -> None:
            c = per[i % servers]
            mine = []
            for j in range(each):
                q = QUERIES[(i * each + j) % len(QUERIES)]
                t0 = time.perf_counter()
                c.vector_stores.search(vs_id, query=q, max_num_results=10)
                mine.append((time.perf_counter() - t0) * 1000)
            with lock:
                times.extend(mine)

        t0 = time.perf_counter()
        ts = [threading.Thread(target=client_thread, args=(i,)) for i in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(1800)
        wall = time.perf_counter() - t0
    finally:
        for p, _ in procs:
            p.terminate()
        for p, _ in procs:
            p.wait(30)
    return {"servers": servers, "threads": threads, "n": len(times), "p50": statistics.median(times),
            "p95": pct(times, 0.95), "qps": len(times) / wall}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--book", default=str(REPO.parent / "shared" / "corpus" / "md" / "rust-book"))
    ap.add_argument("--files", type=int, default=16, help="chapters of the book ingested (default 16)")
    ap.add_argument("--queries", type=int, default=160, help="searches per configuration, all clients (default 160)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent client threads (default 4)")
    ap.add_argument("--catalog-ops", type=int, default=300, help="calls per catalog operation (default 300)")
    ap.add_argument("--catalog-files", type=int, default=200, help="file records of the catalog's store (default 200)")
    args = ap.parse_args()

    from knowledge.catalog import Catalog
    from knowledge.vectorstore.pg_embedded import embedded_url, stop_embedded

    files = sorted(Path(args.book).glob("*.md"))[:args.files]
    tmp = Path(tempfile.mkdtemp(prefix="bench-team-"))
    pg = Path(tempfile.mkdtemp(prefix="bench-team-pg-")) / "postgres"
    print(f"{CORES} cores; start: {load()}")
    base = embedded_url(pg)
    try:
        print(f"corpus: {len(files)} chapters of the Rust book, {sum(p.stat().st_size for p in files) / 1e3:.0f} kB;"
              " PostgreSQL 18 + pgvector, embedded, Unix socket, default durability")
        runs = []
        for workers in (1, 2):
            r = ingest_run(base, tmp, files, workers)
            runs.append(r)
            print(f"ingest, {workers} worker(s) x embeddings.threads={r['threads']}: {r['done']}/{r['jobs']} jobs done,"
                  f" {r['chunks']} chunks, jobs per worker {r['per_worker']}; first claim to last finish"
                  f" {r['span']:.1f} s ({r['chunks'] / r['span']:.1f} chunks/s), processes start to exit"
                  f" {r['wall']:.1f} s; {load()}")
            for e in r["errors"]:
                print("  worker error:", e)
        print(f"ingest speed-up, 2 workers / 1 (first claim to last finish): {runs[0]['span'] / runs[1]['span']:.2f}")

        duck = Catalog(tmp / "ops" / "catalog.duckdb")
        pgc = Catalog.from_url(database(base, "ops"))
        try:
            d = catalog_ops(duck, args.catalog_ops, args.catalog_files)
            p = catalog_ops(pgc, args.catalog_ops, args.catalog_files)
        finally:
            duck.close()
            pgc.close()
        print(f"catalog p50 (ms), {args.catalog_ops} calls each, a store of {args.catalog_files} files; {load()}")
        print(f"  {'operation':<14} {'DuckDB':>8} {'PostgreSQL':>11} {'PG/Duck':>8}")
        for op in d:
            print(f"  {op:<14} {d[op]:>8.3f} {p[op]:>11.3f} {p[op] / d[op]:>8.1f}")

        results = [search_run(runs[1], tmp, n, args.clients, args.queries) for n in (1, 2)]
        for s in results:
            print(f"search hybrid k=10 via {s['servers']} serve process(es) x embeddings.threads={s['threads']},"
                  f" {args.clients} clients, {s['n']} queries, {runs[1]['chunks']} chunks: p50 {s['p50']:.1f} ms"
                  f" (p95 {s['p95']:.1f}), {s['qps']:.1f} queries/s; {load()}")
    finally:
        stop_embedded(pg)
        shutil.rmtree(pg.parent, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
