"""Per-document access filter benchmark: what a readers filter costs a search, per backend.

A store of ``--n`` (default 100,000) clustered 384-d unit vectors, each point with three readers
lists as per-document access writes them: ``r0``, ``r50`` and ``r99`` hide 0%, 50% and 99% of the
points from the searching person (those points list only ``group:hr``; the others list ``*``, or the
person, or a group of theirs). The person's filter is
``where={"r50": AnyOf(("*", "user:ana", "group:staff"))}`` (:class:`knowledge.vectorstore.base.AnyOf`),
pushed into the backend's search. Printed per backend (memory, pgvector on the embedded server,
qdrant-client's local mode in memory):

* load time of the store (and, on the memory backend, the time its approximate-search graph takes:
  the searches are timed once it covers the store);
* search p50/p95 (ms, k=10, ``--queries`` queries) unfiltered and with each filter, the ratio of each
  filtered p50 to the unfiltered one of the same run;
* recall@10 of each against exact numpy search over the points the person may read (the filter
  must not lose recall: 1.00 is every readable top-10 found, and the hits are always ``k`` = 10 when
  at least 10 points are readable).

Usage: ``python bench/bench_access_filter.py [--n 100000] [--dim 384] [--queries 100]
[--backends memory,pgvector,qdrant]``. Prints figures; never fails on a miss.
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

#: Who searches: the principals a person's filter lists (everyone, the person, a group of theirs).
PRINCIPALS = ("*", "user:ana", "group:staff")
#: The readers of a readable point, in turn.
READABLE = (["*"], ["user:ana", "group:it"], ["group:staff"])
#: What the hidden points list.
HIDDEN = ["group:hr"]
HIDE = {"r0": 0.0, "r50": 0.5, "r99": 0.99}


def clustered(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """``(n, dim)`` float32 unit vectors around ``clusters`` random centres (topical clumps, as real
    embeddings are)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def hidden_masks(n: int, seed: int) -> dict[str, np.ndarray]:
    """Per field, ``(n,)`` bool: which points it hides (a random ``HIDE[field]`` share)."""
    rng = np.random.default_rng(seed)
    return {f: rng.random(n) < share for f, share in HIDE.items()}


def backend_of(name: str, data: Path):
    from knowledge.config import load_settings

    if name == "memory":
        from knowledge.vectorstore.memory import MemoryBackend

        return MemoryBackend(load_settings(data_dir=data))
    if name == "pgvector":
        from knowledge.vectorstore.pgvector import PgvectorBackend

        return PgvectorBackend(load_settings(data_dir=data, vector_store={"backend": "pgvector"}))
    if name == "qdrant":
        from knowledge.vectorstore.qdrant import QdrantBackend

        return QdrantBackend(load_settings(data_dir=data, vector_store={"backend": "qdrant", "qdrant_location": ":memory:"}))
    raise SystemExit(f"unknown backend {name!r}")


def p(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def run(name: str, x: np.ndarray, masks: dict[str, np.ndarray], queries: np.ndarray, k: int) -> None:
    from knowledge.vectorstore.base import AnyOf, Point

    n, dim = x.shape
    with tempfile.TemporaryDirectory() as tmp:
        b = backend_of(name, Path(tmp) / "data")
        try:
            coll = b.collection("access-bench")
            coll.ensure_collection(dim, "cosine")
            for f in HIDE:
                coll.index_field(f)
            t = time.perf_counter()
            for start in range(0, n, 2_000):
                batch = []
                for i in range(start, min(n, start + 2_000)):
                    payload = {f: (HIDDEN if masks[f][i] else READABLE[i % 3]) for f in HIDE}
                    batch.append(Point(i, x[i], payload))
                coll.upsert(batch)
            load = time.perf_counter() - t
            print(f"\n{name}: {n:,} points loaded in {load:.1f} s ({n / load:,.0f} points/s)", flush=True)
            ensure = getattr(coll, "ensure_ann_index", None)
            if ensure is not None:  # the memory backend: searched exactly until its graph covers the store
                t = time.perf_counter()
                built = ensure()
                print(f"  approximate-search graph {'built' if built else 'not used'} in {time.perf_counter() - t:.1f} s")
            truth_scores = x @ queries.T  # (n, queries): the exact scores, for recall
            coll.search(queries[0], limit=k)  # warm: loads, opens, builds what a first search builds
            rows: list[tuple[str, float, float, float, int]] = []
            base_p50 = None
            for label, field in [("unfiltered", None), *[(f"hides {int(s * 100)}%", f) for f, s in HIDE.items()]]:
                where = None if field is None else {field: AnyOf(PRINCIPALS)}
                readable = np.arange(n) if field is None else np.flatnonzero(~masks[field])
                if where is not None:
                    coll.search(queries[0], limit=k, where=where)  # warm the filter's index
                times, found, short = [], 0.0, 0
                for j, q in enumerate(queries):
                    t = time.perf_counter()
                    hits = coll.search(q, limit=k, where=where, with_payload=False)
                    times.append(time.perf_counter() - t)
                    scores = truth_scores[readable, j]
                    truth = {int(i) for i in readable[np.argpartition(-scores, k)[:k]]}
                    found += len({int(h.id) for h in hits} & truth) / k
                    short += len(hits) < k
                p50 = p(times, 50)
                base_p50 = base_p50 or p50
                rows.append((label, p50, p(times, 95), found / len(queries), short))
            print(f"{'filter':<12} {'p50 ms':>8} {'p95 ms':>8} {'p50 / unfiltered':>17} {'recall@10':>10} {'< k hits':>9}")
            for label, p50, p95, rec, short in rows:
                print(f"{label:<12} {p50:8.2f} {p95:8.2f} {p50 / base_p50:17.2f} {rec:10.3f} {short:9d}")
        finally:
            b.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--backends", default="memory,pgvector,qdrant")
    args = ap.parse_args()
    k = 10
    print(f"load average {os.getloadavg()} on {os.cpu_count()} cores; n={args.n:,} dim={args.dim} k={k}")
    x = clustered(args.n, args.dim, clusters=200, seed=1)
    queries = clustered(args.queries, args.dim, clusters=200, seed=1)[: args.queries]
    queries = queries + 0.05 * np.random.default_rng(2).standard_normal(queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    masks = hidden_masks(args.n, seed=3)
    for name in args.backends.split(","):
        run(name.strip(), x, masks, queries, k)


if __name__ == "__main__":
    main()
