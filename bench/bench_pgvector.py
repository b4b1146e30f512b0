"""pgvector backend benchmark: 100,000 x 384 clustered vectors on the embedded PostgreSQL server.

Measures, in one run:

* upsert rate (points/s, batches of 1,000, HNSW index maintained while inserting) and the HNSW build
  time of the same table from scratch (``CREATE INDEX`` on the loaded table);
* search latency p50/p95 for k=10 and recall@10 against exact numpy search, for several
  ``ef_search`` values (the default is marked), plus the exact path (index scans off) as a baseline;
* filtered search: for filters matching 1,000 / 10,000 / 50,000 rows, latency and recall@10 of the
  exact path and of the HNSW path (``iterative_scan = strict_order``) -- the data behind
  ``exact_max_rows``;
* a connection pool vs one short-lived connection per operation, on the same searches and on a
  cheap operation (``count``), and the ratio.

Usage: ``python bench/bench_pgvector.py [--n 100000] [--dim 384] [--queries 200] [--url URL]``.
Without ``--url`` the embedded server runs in a temporary folder. Prints figures; never fails on a miss.

Scale mode, ``python bench/bench_pgvector.py --chunks 1000000 [--queries 100] [--json]``: a store of
N chunks with real-looking text (the Rust book cut into ~120-word pieces, repeated) and clustered
384-d unit vectors, loaded with ``COPY`` in batches of 50,000 rows (one transaction each) into the
store's table (the lexical columns computed with the backend's own analysis), then the indexes
built as a bulk load does it: HNSW, the payload GIN, and the lexical index (``lex`` GIN + the term
statistics, through ``ensure_lexical_index``). Printed as each phase ends: load time and rate,
each index's build time and size, vector search p50/p95 with recall@10 against exact numpy, BM25
and hybrid p50/p95 (hybrid = what ``Workbench.rank`` asks the backend: a vector search and a BM25
search of 50 candidates each, reciprocal rank fusion, the vector scores of the BM25-only hits), and
one 50-chunk file written through the backend (vectors + lexical index, one transaction).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def clustered(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """``(n, dim)`` float32 unit vectors around ``clusters`` random centres (like real embeddings:
    topical clumps rather than uniform noise)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    labels = rng.integers(0, clusters, n)
    x = centres[labels] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, p))


def exact_top(matrix: np.ndarray, q: np.ndarray, k: int, rows: np.ndarray | None = None) -> set[int]:
    m = matrix if rows is None else matrix[rows]
    s = m @ q
    top = np.argpartition(-s, min(k, len(s) - 1))[:k]
    ids = top if rows is None else rows[top]
    return {int(i) for i in ids}


def run_searches(coll, queries, k, where=None) -> tuple[list[float], list[list[int]]]:
    times, results = [], []
    for q in queries:
        t = time.perf_counter()
        hits = coll.search(q, limit=k, where=where, with_payload=False)
        times.append(time.perf_counter() - t)
        results.append([h.id for h in hits])
    return times, results


def recall(results: list[list[int]], truth: list[set[int]], k: int) -> float:
    return float(np.mean([len(set(r) & t) / k for r, t in zip(results, truth)]))


BOOK = ROOT.parent / "shared" / "corpus" / "md" / "rust-book"
QUERIES = [
    "What is shadowing a variable with let?",
    "How do I read a line of user input in the guessing game?",
    "What does the borrow checker prevent with dangling references?",
    "What is Deref coercion?",
    "How do I iterate over the elements of a vector and change them?",
    "panic",
    "lifetimes",
    "cargo install",
    "What is the difference between panic! and Result?",
    "trait objects",
    "closures capture",
    "HashMap",
]


def _copy_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def scale(args) -> None:
    """The ``--chunks`` mode (see the module docstring)."""
    import json

    import orjson
    import psycopg

    from knowledge.config import load_settings
    from knowledge.service.fusion import reciprocal_rank_fusion
    from knowledge.vectorstore.base import Point
    from knowledge.vectorstore.pgvector import REGISTRY, PgvectorBackend, lexical_row

    n, dim, k, pool = args.chunks, args.dim, 10, 50
    out: dict[str, object] = {"chunks": n, "dim": dim}

    def say(key: str | None, value: object, text: str) -> None:
        if key:
            out[key] = value
        if not args.json:
            print(text, flush=True)

    tmp = tempfile.TemporaryDirectory()
    root = Path(args.keep) if args.keep else Path(tmp.name)
    settings = load_settings(data_dir=root / "data", vector_store={"backend": "pgvector", "url": args.url})
    b = PgvectorBackend(settings)
    say(None, None, f"server: {b!r}; load average {os.getloadavg()} on {os.cpu_count()} cores")
    words = [w for p in sorted(BOOK.glob("*.md")) for w in p.read_text(encoding="utf-8").split()]
    texts = [" ".join(words[i : i + 120]) for i in range(0, len(words), 120)]
    lex = [lexical_row({"text": t})[:2] for t in texts]
    coll = b.collection("bench")
    coll.drop_collection()
    coll.ensure_collection(dim, "cosine")
    t = coll.table
    clusters = max(10, n // 500)
    with psycopg.connect(b.conninfo, autocommit=True) as c:
        # a bulk load: the indexes are built after the rows are in
        c.execute(f'DROP INDEX "{t}_gin"; DROP INDEX "{t}_lex"')
        c.execute(f"UPDATE {REGISTRY} SET lexical = NULL WHERE name = 'bench'")
    t0 = time.perf_counter()
    batch = 50_000
    all_vecs = np.empty((n, dim), dtype=np.float32)
    prep = 0.0
    spelled = [f"{v / 10_000:.4f}".rstrip("0").rstrip(".") or "0" for v in range(-10_000, 10_001)]
    for start in range(0, n, batch):
        tp = time.perf_counter()
        stop = min(n, start + batch)
        x = clustered(stop - start, dim, clusters, seed=1000 + start // batch)
        # four decimals, spelled from a table (formatting 384 floats per row is the load's cost)
        ints = np.rint(x * 10_000).astype(np.int64)
        q4 = (ints + 10_000).tolist()
        x = ints.astype(np.float32) / 10_000
        all_vecs[start:stop] = x / np.linalg.norm(x, axis=1, keepdims=True)
        lines = []
        for j, i in enumerate(range(start, stop)):
            ti = i % len(texts)
            fid = f"file{i // 50:06d}"
            payload = orjson.dumps(
                {
                    "file_id": fid,
                    "file_name": f"{fid}.md",
                    "chunk_index": i % 50,
                    "text": texts[ti],
                    "page": None,
                    "char_start": None,
                    "char_end": None,
                    "heading": None,
                }
            ).decode()
            vec = "[" + ",".join(map(spelled.__getitem__, q4[j])) + "]"
            lines.append(
                f"{_copy_escape(json.dumps(f'{fid}:{i % 50}'))}\t{vec}\t{_copy_escape(payload)}"
                f"\t{_copy_escape(lex[ti][0])}\t{lex[ti][1]}\n"
            )
        block = "".join(lines)
        prep += time.perf_counter() - tp
        with (
            psycopg.connect(b.conninfo) as c,
            c.cursor().copy(f'COPY "{t}" (pid, embedding, payload, lex, lex_len) FROM STDIN') as cp,
        ):
            cp.write(block)
        if start // batch % 4 == 0 and not args.json:
            print(f"  loaded {stop:,} rows in {time.perf_counter() - t0:.0f} s", flush=True)
    load = time.perf_counter() - t0
    say(
        "load_s",
        load,
        f"COPY of {n:,} rows in batches of {batch:,}: {load:.1f} s = {n / load:,.0f} rows/s"
        f" ({prep:.1f} s of it making the rows in Python)",
    )
    out["load_prepare_s"] = prep
    with psycopg.connect(b.conninfo, autocommit=True) as c:
        c.execute("SET maintenance_work_mem = '2GB'")
        t0 = time.perf_counter()
        c.execute(
            f'CREATE INDEX "{t}_hnsw" ON "{t}" USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)'
        )
        hnsw = time.perf_counter() - t0
        size = c.execute(f"SELECT pg_relation_size('\"{t}_hnsw\"')").fetchone()[0] / 1e6
        say("hnsw_build_s", hnsw, f"HNSW build (m=16, ef_construction=64): {hnsw:.1f} s, {size:.0f} MB")
        t0 = time.perf_counter()
        c.execute(f'CREATE INDEX "{t}_gin" ON "{t}" USING gin (payload jsonb_path_ops)')
        say("payload_gin_build_s", time.perf_counter() - t0, f"payload GIN build: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    coll.ensure_lexical_index()  # the lex GIN index and the term statistics
    lexb = time.perf_counter() - t0
    with psycopg.connect(b.conninfo, autocommit=True) as c:
        c.execute(f'VACUUM ANALYZE "{t}"')
        size = c.execute(f"SELECT pg_relation_size('\"{t}_lex\"'), pg_total_relation_size('\"{t}\"')").fetchone()
    say(
        "lexical_build_s",
        lexb,
        f"lexical index (lex GIN + term statistics): {lexb:.1f} s, GIN {size[0] / 1e6:.0f} MB;"
        f" table with all indexes {size[1] / 1e9:.2f} GB",
    )
    out["total_gb"] = size[1] / 1e9

    rng = np.random.default_rng(7)
    qn = args.queries
    qvecs = clustered(qn, dim, clusters, seed=1000) + 0.01 * rng.standard_normal((qn, dim)).astype(np.float32)
    qtexts = [QUERIES[i % len(QUERIES)] for i in range(qn)]
    truth = []
    for q in qvecs:
        s = all_vecs @ q
        truth.append({f"file{i // 50:06d}:{i % 50}" for i in np.argpartition(-s, k)[:k]})
    del all_vecs
    b2 = PgvectorBackend(settings)
    c2 = b2.collection("bench")
    for q in qvecs[:5]:
        c2.search(q, limit=k)
    vt, rec = [], []
    for q, tr in zip(qvecs, truth):
        t0 = time.perf_counter()
        hits = c2.search(q, limit=k)
        vt.append(time.perf_counter() - t0)
        rec.append(len({h.id for h in hits} & tr) / k)
    say(
        "vector_p50_ms",
        pct(vt, 50),
        f"vector k=10: p50 {pct(vt, 50):.1f} ms, p95 {pct(vt, 95):.1f} ms, recall@10 {np.mean(rec):.3f}",
    )
    out["vector_p95_ms"], out["recall_at_10"] = pct(vt, 95), float(np.mean(rec))
    lt, ht = [], []
    for q, text in zip(qvecs, qtexts):
        t0 = time.perf_counter()
        c2.lexical_search(text, k)
        lt.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        dense = c2.search(q, limit=pool)
        lexical = c2.lexical_search(text, pool)
        fused = reciprocal_rank_fusion([h.id for h in dense], [h.id for h in lexical])
        have = {h.id for h in dense}
        missing = [h.id for h in lexical if h.id not in have]
        if missing:
            c2.retrieve(missing, with_vectors=True)
        sorted(fused, key=lambda i: -fused[i])[:k]
        ht.append(time.perf_counter() - t0)
    say("lexical_p50_ms", pct(lt, 50), f"BM25 k=10: p50 {pct(lt, 50):.1f} ms, p95 {pct(lt, 95):.1f} ms")
    say(
        "hybrid_p50_ms",
        pct(ht, 50),
        f"hybrid k=10 (50 + 50 candidates, RRF): p50 {pct(ht, 50):.1f} ms, p95 {pct(ht, 95):.1f} ms",
    )
    out["lexical_p95_ms"], out["hybrid_p95_ms"] = pct(lt, 95), pct(ht, 95)
    pts = [Point(f"extra:{i}", qvecs[i % qn], {"file_id": "extra", "text": texts[i]}) for i in range(50)]
    t0 = time.perf_counter()
    c2.replace({"file_id": "extra"}, pts)
    say(
        "add_file_ms",
        (time.perf_counter() - t0) * 1000,
        f"one 50-chunk file written (vectors + lexical index, one transaction): {(time.perf_counter() - t0) * 1000:.0f} ms",
    )
    say(None, None, f"load average at the end: {os.getloadavg()}")
    if args.json:
        print(json.dumps({k2: (round(v, 3) if isinstance(v, float) else v) for k2, v in out.items()}))
    if not args.keep:
        c2.drop_collection()
    b2.close()
    b.close()
    if args.url is None:
        from knowledge.vectorstore.pg_embedded import stop_embedded

        stop_embedded(root / "data" / "postgres")
    tmp.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=0, help="scale mode: a store of this many chunks, COPY-loaded")
    ap.add_argument("--json", action="store_true", help="scale mode: one JSON object at the end")
    ap.add_argument("--keep", metavar="DIR", help="scale mode: keep the store in DIR/data (to look at it after)")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--url", default=None)
    args = ap.parse_args()
    if args.chunks:
        scale(args)
        return

    from knowledge.config import load_settings
    from knowledge.vectorstore.base import Point
    from knowledge.vectorstore.pgvector import PgvectorBackend, PgvectorOptions

    n, dim, k = args.n, args.dim, 10
    tmp = tempfile.TemporaryDirectory()
    defaults = PgvectorOptions()

    def backend(**opts):
        s = load_settings(
            data_dir=Path(tmp.name) / "data",
            vector_store={"backend": "pgvector", "url": args.url, "options": {"pgvector": opts}},
        )
        return PgvectorBackend(s)

    t0 = time.perf_counter()
    b = backend()
    print(
        f"server ready in {time.perf_counter() - t0:.2f} s ({b!r}); load average {os.getloadavg()} on {os.cpu_count()} cores"
    )
    import psycopg

    with psycopg.connect(b.conninfo) as c:
        print(
            "PostgreSQL",
            c.execute("SHOW server_version").fetchone()[0],
            "| pgvector",
            c.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()[0],
        )
    data = clustered(n, dim, clusters=max(10, n // 500), seed=1)
    queries = clustered(args.queries, dim, clusters=max(10, n // 500), seed=1)  # same centres
    queries = queries + 0.01 * np.random.default_rng(7).standard_normal(queries.shape).astype(np.float32)
    payloads = [{"file_id": f"f{i // 1000}", "part": f"p{i // 10_000}", "half": int(i % 2)} for i in range(n)]

    coll = b.collection("bench")
    coll.drop_collection()
    coll.ensure_collection(dim, "cosine")
    print(
        f"\n== upsert {n:,} x {dim} in batches of 1,000 (HNSW m={defaults.hnsw_m}, ef_construction="
        f"{defaults.hnsw_ef_construction}, built by the batch that passes exact_max_rows="
        f"{defaults.exact_max_rows:,}, then maintained while inserting)"
    )
    batch_times = []
    t = time.perf_counter()
    for start in range(0, n, 1000):
        tb = time.perf_counter()
        coll.upsert([Point(int(i), data[i], payloads[i]) for i in range(start, min(n, start + 1000))])
        batch_times.append((start, time.perf_counter() - tb))
    up = time.perf_counter() - t
    cross = defaults.exact_max_rows
    before = sum(d for s0, d in batch_times if s0 + 1000 <= cross)
    at = sum(d for s0, d in batch_times if s0 < cross + 1 <= s0 + 1000)
    after = sum(d for s0, d in batch_times if s0 > cross)
    n_after = max(1, n - (cross // 1000 + 1) * 1000)
    print(
        f"upsert total: {up:.1f} s = {n / up:,.0f} points/s | without index (first {cross:,}):"
        f" {cross / max(before, 1e-9):,.0f} points/s | the batch that built the index: {at:.1f} s |"
        f" with the index maintained: {n_after / max(after, 1e-9):,.0f} points/s"
    )

    with psycopg.connect(b.conninfo, autocommit=True) as c:
        c.execute(f"VACUUM ANALYZE {coll.table}")
        c.execute("SET maintenance_work_mem = '1GB'")
        c.execute(f"DROP INDEX {coll.table}_hnsw")
        t = time.perf_counter()
        c.execute(
            f"CREATE INDEX {coll.table}_hnsw ON {coll.table} USING hnsw (embedding vector_cosine_ops)"
            f" WITH (m = {defaults.hnsw_m}, ef_construction = {defaults.hnsw_ef_construction})"
        )
        build = time.perf_counter() - t
        size = c.execute(f"SELECT pg_size_pretty(pg_relation_size('{coll.table}_hnsw'))").fetchone()[0]
    print(f"HNSW build from scratch on the loaded table: {build:.1f} s ({n / build:,.0f} points/s), index {size}")
    b.close()

    truth = [exact_top(data, q, k) for q in queries]
    print(f"\n== search k={k}, {len(queries)} queries (recall@10 vs exact numpy)")
    print(f"{'path':34s} {'p50 ms':>8s} {'p95 ms':>8s} {'recall@10':>10s}")
    rows = {}
    for ef in (40, 64, 100, 200):
        bb = backend(ef_search=ef)
        coll = bb.collection("bench")
        run_searches(coll, queries[:10], k)  # warm
        times, res = run_searches(coll, queries, k)
        mark = " (default)" if ef == defaults.ef_search else ""
        rows[ef] = (pct(times, 50), pct(times, 95), recall(res, truth, k))
        print(f"{'hnsw ef_search=' + str(ef) + mark:34s} {rows[ef][0]:8.2f} {rows[ef][1]:8.2f} {rows[ef][2]:10.3f}")
        bb.close()
    bb = backend(exact_max_rows=10 * n)
    coll = bb.collection("bench")
    times, res = run_searches(coll, queries[:40], k)
    truth40 = truth[:40]
    print(
        f"{'exact (index scans off), 40 q':34s} {pct(times, 50):8.2f} {pct(times, 95):8.2f} {recall(res, truth40, k):10.3f}"
    )
    bb.close()

    print("\n== filtered search k=10: exact path vs HNSW + iterative_scan=strict_order")
    print(f"{'filter (rows)':22s} {'path':8s} {'p50 ms':>8s} {'p95 ms':>8s} {'recall@10':>10s} {'hits<k':>7s}")
    filters = [("file_id", f"f{n // 2000}", 1000), ("part", f"p{n // 20_000}", 10_000), ("half", 1, n // 2)]
    exact_b, index_b = backend(exact_max_rows=10 * n), backend(exact_max_rows=0)
    default_b = backend()
    for field, value, count in filters:
        rows_sel = np.asarray([i for i in range(n) if payloads[i][field] == value], dtype=np.int64)
        count = len(rows_sel)
        ftruth = [exact_top(data, q, k, rows_sel) for q in queries[:50]]
        for label, bx in (("exact", exact_b), ("hnsw", index_b), ("default", default_b)):
            coll = bx.collection("bench")
            run_searches(coll, queries[:5], k, {field: value})
            times, res = run_searches(coll, queries[:50], k, {field: value})
            short = sum(1 for r in res if len(r) < k)
            print(
                f"{field}={value!s:8s} ({count:>6,}) {label:8s} {pct(times, 50):8.2f} {pct(times, 95):8.2f}"
                f" {recall(res, ftruth, k):10.3f} {short:7d}"
            )
    for bx in (exact_b, index_b, default_b):
        bx.close()

    print("\n== pool vs one short-lived connection per operation (same 200 searches, then 200 counts)")
    res = {}
    for label, pool in (("pool", True), ("per-operation", False)):
        bx = backend(pool=pool)
        coll = bx.collection("bench")
        run_searches(coll, queries[:10], k)
        times, _ = run_searches(coll, queries, k)
        ctimes = []
        for _ in range(200):
            t = time.perf_counter()
            coll.retrieve([1, 2, 3])
            ctimes.append(time.perf_counter() - t)
        res[label] = (pct(times, 50), pct(times, 95), pct(ctimes, 50), pct(ctimes, 95))
        print(
            f"{label:14s} search p50 {res[label][0]:6.2f} ms p95 {res[label][1]:6.2f} ms | retrieve(3 ids)"
            f" p50 {res[label][2]:6.2f} ms p95 {res[label][3]:6.2f} ms"
        )
        bx.close()
    print(f"load average at the end: {os.getloadavg()}")
    print(
        f"per-operation / pool: search p50 x{res['per-operation'][0] / res['pool'][0]:.2f},"
        f" retrieve p50 x{res['per-operation'][2] / res['pool'][2]:.2f}"
    )
    bx = backend()
    bx.collection("bench").drop_collection()
    bx.close()
    if args.url is None:
        from knowledge.vectorstore.pg_embedded import stop_embedded

        stop_embedded(Path(tmp.name) / "data" / "postgres")
    tmp.cleanup()


if __name__ == "__main__":
    main()
