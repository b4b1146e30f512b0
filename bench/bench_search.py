"""Search benchmark: vector vs hybrid (vector + BM25, reciprocal rank fusion) vs words-only, at scale.

A store of N chunks (default 100,000 -- the memory backend's cap) is filled with real text: the
chunks of ../shared/corpus/md/rust-book cut into ~120-word pieces and repeated across files, each with
a random unit vector (384-d; the embedding model is not what is measured here, so the queries are
random unit vectors too). Printed:

* the BM25 index: a cold build over every file, and the refresh after one more file is ingested
  (only that file is analysed; the posting list is re-sorted);
* query latency p50/p95 per mode for k=10 over 200 queries (the corpus README's questions and
  single words), and the ratio hybrid / vector (hybrid costs one BM25 search, one vector search
  of ``search.candidates`` and the fusion);
* a filtered search (one file) per mode.

Usage: ``python bench/bench_search.py [--chunks 100000] [--queries 200]``. Prints figures; never fails.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT.parent / "shared" / "corpus" / "md" / "rust-book"
DIM = 384
PER_FILE = 50

QUERIES = [
    "What is shadowing a variable with let?", "How do I read a line of user input in the guessing game?",
    "What does the borrow checker prevent with dangling references?", "What is Deref coercion?",
    "How do I iterate over the elements of a vector and change them?", "panic", "lifetimes", "cargo install",
    "What is the difference between panic! and Result?", "trait objects", "closures capture", "HashMap",
]


def pieces(words_per_piece: int = 120) -> list[str]:
    texts = []
    for path in sorted(BOOK.glob("*.md")):
        words = path.read_text(encoding="utf-8").split()
        texts.extend(" ".join(words[i:i + words_per_piece]) for i in range(0, len(words), words_per_piece))
    return texts


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    if not BOOK.is_dir():
        print(f"corpus not found at {BOOK}", file=sys.stderr)
        return 1
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.vectorstore.store import Chunk
    from knowledge.workbench import Workbench

    texts = pieces()
    rng = np.random.default_rng(7)
    random.seed(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=tmp, vector_store={"max_chunks_per_store": args.chunks + 1000})
        wb = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=DIM))
        wb.create_store("bench")
        vs = wb.vector_store("bench")
        files = args.chunks // PER_FILE
        t0 = time.perf_counter()
        for f in range(files):
            vectors = unit(rng, PER_FILE)
            chunks = [Chunk(texts[(f * PER_FILE + i) % len(texts)], vectors[i], i) for i in range(PER_FILE)]
            vs.upsert(f"file{f:06d}", chunks, file_name=f"file{f:06d}.md")
        print(f"store: {files * PER_FILE:,} chunks in {files:,} files of {PER_FILE} ({len(texts):,} distinct"
              f" texts from the Rust book), filled in {time.perf_counter() - t0:.1f} s")

        t0 = time.perf_counter()
        index = wb.lexical_index("bench")
        index.search("warm", 1)  # the merged posting list is built on the first search
        cold = time.perf_counter() - t0
        vectors = unit(rng, PER_FILE)
        vs.upsert("file-extra", [Chunk(texts[i], vectors[i], i) for i in range(PER_FILE)], file_name="extra.md")
        t0 = time.perf_counter()
        wb.lexical_index("bench").search("warm", 1)
        warm = time.perf_counter() - t0
        print(f"BM25 index: cold build {cold:.2f} s ({len(index):,} chunks, {cold / len(index) * 1e6:.0f} µs/chunk);"
              f" refresh + re-merge after one more file {warm * 1000:.0f} ms ({cold / warm:.0f}x faster than a rebuild)")

        queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        qvecs = unit(rng, len(queries))
        times: dict[str, list[float]] = {}
        for mode in ("vector", "hybrid", "lexical"):
            wb.rank("bench", queries[0], qvecs[0], 10, mode=mode)  # warm
            ts = []
            for q, v in zip(queries, qvecs):
                t0 = time.perf_counter()
                wb.rank("bench", q, v, 10, mode=mode)
                ts.append((time.perf_counter() - t0) * 1000)
            times[mode] = ts
            print(f"{mode:>7}: k=10 p50 {pct(ts, 50):.1f} ms, p95 {pct(ts, 95):.1f} ms over {len(ts)} queries")
        ratio = statistics.median(times["hybrid"]) / statistics.median(times["vector"])
        print(f"hybrid / vector p50: {ratio:.2f}x")
        where = {"file_id": "file000123"}
        for mode in ("vector", "hybrid", "lexical"):
            t0 = time.perf_counter()
            hits, _ = wb.rank("bench", "borrow checker", qvecs[0], 10, where=where, mode=mode)
            ms = (time.perf_counter() - t0) * 1000
            assert all(h.file_id == "file000123" for h in hits)
            print(f"{mode:>7} filtered to one file: {ms:.1f} ms, {len(hits)} hits")
        wb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
