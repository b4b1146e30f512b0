"""Benchmark of agent memory (``knowledge.agent_memory.VectorMemory``) on each backend.

For every backend -- ``memory``, ``qdrant`` in local mode (``:memory:`` and a local folder), and
``pgvector`` when that backend is installed (its embedded PostgreSQL server; skipped with a message
otherwise) -- in a fresh temporary data folder:

* ``remember_many`` throughput: ``--n`` memories (default 10,000) of ~200-character texts in batches
  of ``--batch`` (500), spread over 10 datasets with a small payload, embedding included;
* ``recall`` p50 / p95 over ``--queries`` (200) queries, ``limit=5``: within one dataset (the
  default use) and across all datasets (``dataset=None``), query embedding included. qdrant's local
  mode gets ``--local-queries`` (20) of them: it evaluates filters in pure Python, point by point,
  so one recall at 10,000 memories takes about a second.

The embedder is the deterministic ``HashEmbedder`` (``--dim`` 384, the bundled model's size) so the
figures are about the memory layer and the store, not the model; the embedding time alone is
measured in the same run and printed as the floor. Ratios are against the ``memory`` backend
measured in the same run.

Usage: ``python bench/bench_memory_api.py [--n 10000] [--dim 384] [--batch 500] [--queries 200]
[--local-queries 20]``.
Prints figures; never fails on a miss.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from knowledge.agent_memory import Memory, VectorMemory
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import KnowledgeError
from knowledge.vectorstore.registry import open_backend

WORDS = [
    "customer",
    "invoice",
    "refund",
    "email",
    "phone",
    "address",
    "order",
    "delivery",
    "late",
    "paid",
    "account",
    "password",
    "reset",
    "meeting",
    "monday",
    "friday",
    "report",
    "budget",
    "plan",
    "team",
    "project",
    "deadline",
    "review",
    "bug",
    "fix",
    "release",
    "deploy",
    "server",
    "database",
    "memory",
    "agent",
    "recall",
    "remember",
    "note",
    "task",
    "reminder",
    "lisbon",
    "berlin",
    "paris",
    "weather",
]
DATASETS = [f"ds{i}" for i in range(10)]


def make_items(n: int, seed: int) -> list[Memory]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS, size=30))[:200]
        items.append(Memory(f"{i} {text}", DATASETS[i % len(DATASETS)], {"n": i, "topic": WORDS[i % 7]}, id=f"m{i}"))
    return items


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def run_backend(label: str, backend_name: str, overrides: dict, args, items, queries) -> dict | None:
    with tempfile.TemporaryDirectory(prefix="bench-memory-api-") as tmp:
        settings = load_settings(data_dir=Path(tmp) / "data", vector_store=overrides)
        try:
            backend = open_backend(settings, backend_name)
        except KnowledgeError as exc:
            print(f"{label:<18} skipped: {exc}")
            return None
        with backend:
            memory = VectorMemory(backend, HashEmbedder(dimension=args.dim, max_tokens=256))
            t0 = time.perf_counter()
            for start in range(0, len(items), args.batch):
                memory.remember_many(items[start : start + args.batch])
            write_s = time.perf_counter() - t0
            assert memory.count() == len(items), memory.count()
            timings = {"one": [], "all": []}
            n_queries = args.local_queries if overrides.get("qdrant_location") else len(queries)
            for i, q in enumerate(queries[:n_queries]):
                for key, ds in (("one", DATASETS[i % len(DATASETS)]), ("all", None)):
                    t = time.perf_counter()
                    hits = memory.recall(q, limit=5, dataset=ds)
                    timings[key].append((time.perf_counter() - t) * 1000)
                    assert hits and (ds is None or all(h.dataset == ds for h in hits))
    return {
        "label": label,
        "rate": len(items) / write_s,
        "p50_one": statistics.median(timings["one"]),
        "p95_one": percentile(timings["one"], 95),
        "p50_all": statistics.median(timings["all"]),
        "p95_all": percentile(timings["all"], 95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--local-queries",
        type=int,
        default=20,
        help="queries for qdrant's local mode (pure Python: ~1 s per recall at 10,000)",
    )
    args = parser.parse_args()

    items = make_items(args.n, seed=1)
    rng = np.random.default_rng(2)
    queries = [" ".join(rng.choice(WORDS, size=6)) for _ in range(args.queries)]

    embedder = HashEmbedder(dimension=args.dim, max_tokens=256)
    t0 = time.perf_counter()
    for start in range(0, len(items), args.batch):
        embedder.embed_documents([m.text for m in items[start : start + args.batch]])
    embed_rate = len(items) / (time.perf_counter() - t0)
    q_ms = []
    for q in queries:
        t = time.perf_counter()
        embedder.embed_query(q)
        q_ms.append((time.perf_counter() - t) * 1000)

    print(
        f"agent memory: {args.n:,} memories x {args.dim} dims, batches of {args.batch}, "
        f"{args.queries} queries, limit 5, 10 datasets"
    )
    print(f"floor (HashEmbedder alone): embed {embed_rate:,.0f} texts/s, query embed p50 {statistics.median(q_ms):.3f} ms\n")
    runs = [
        ("memory", "memory", {}),
        ("qdrant :memory:", "qdrant", {"qdrant_location": ":memory:"}),
        ("qdrant local dir", "qdrant", {"qdrant_location": "qdrant"}),
        ("pgvector", "pgvector", {}),
    ]
    results = [r for r in (run_backend(label, name, ov, args, items, queries) for label, name, ov in runs) if r]
    base = next((r for r in results if r["label"] == "memory"), None)
    print(
        f"\n{'backend':<18} {'remember_many/s':>15} {'vs memory':>9}   {'recall p50 (1 ds)':>17} {'p95':>7} "
        f"{'vs memory':>9}   {'recall p50 (all)':>16} {'p95':>7} {'vs memory':>9}"
    )
    for r in results:
        rw = r["rate"] / base["rate"] if base else float("nan")
        r1 = r["p50_one"] / base["p50_one"] if base else float("nan")
        ra = r["p50_all"] / base["p50_all"] if base else float("nan")
        print(
            f"{r['label']:<18} {r['rate']:>15,.0f} {rw:>8.2f}x   {r['p50_one']:>14.2f} ms {r['p95_one']:>7.2f} "
            f"{r1:>8.2f}x   {r['p50_all']:>13.2f} ms {r['p95_all']:>7.2f} {ra:>8.2f}x"
        )
    print(
        "\nremember_many/s includes embedding; recall times include embedding the query. "
        "'vs memory': throughput ratio (higher is better) and latency ratio (lower is better)."
    )


if __name__ == "__main__":
    main()
