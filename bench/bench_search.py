"""Search benchmark: vector vs hybrid (vector + BM25, reciprocal rank fusion) vs words-only, at scale,
with the persisted lexical index, a restart, and queries while a file is ingested.

A store of N chunks (default 100,000 -- the memory backend's cap) is filled with real text: the
chunks of ../shared/corpus/md/rust-book cut into ~120-word pieces and repeated across files of 50
chunks, each with a random unit vector (384-d; the queries of the latency phases are embedded by the
deterministic hash embedder, so the embedding model is not what those phases measure). Measured, on
the memory backend:

* ``lexical_build_s``: building the store's persisted BM25 index from all its chunks (happens once
  per store: with its first file, or when the index is missing or damaged) and, in the same run,
  ``inprocess_bm25_build_s``: what every process did before on its first hybrid search (the
  in-process index of :class:`knowledge.service.fusion.LexicalIndex`, built from every chunk);
* ``first_hybrid_after_restart_ms``: a new process opening the store and answering its first
  hybrid query (median of 3 processes; Python's imports excluded);
* ``add_file_ms``: writing one more 50-chunk file, vectors and lexical index committed (median of
  5), and ``add_file_vectors_only_ms`` the same write into a store without a lexical index;
* ``vector_p50_ms`` / ``hybrid_p50_ms`` / ``lexical_p50_ms`` (and p95): ``Workbench.search``, k=10,
  over the corpus README's questions and single words; ``backend_vector_p50_ms``: the backend's
  own ``Collection.search`` of the same vectors, k=10, in the same run; ``facade_over_backend`` and
  ``hybrid_over_vector`` the ratios of the p50s;
* ``query_p95_during_ingest_over_idle``: with the bundled model (real query embeddings), hybrid
  ``Workbench.search`` p95 while another thread ingests a ~500-chunk Markdown file into the same
  store, over the idle p95 measured just before, one query every 50 ms after the previous one
  (skipped with ``--no-model``).

* per backend (``--backends memory,pgvector,qdrant``; pgvector on the embedded server, qdrant in
  local mode on disk), on a store of ``--chunks`` chunks (qdrant: ``--qdrant-chunks``, its local
  mode is a pure-Python engine): ``<backend>_calls_vector`` / ``_calls_hybrid``, the backend calls
  of one warm ``Workbench.search`` (memory: collection methods; pgvector: transactions,
  ``PgvectorBackend.run``; qdrant: client calls, ``QdrantBackend.call``), and
  ``<backend>_facade_p50_ms`` (``Workbench.search``, vector, k=10, the hash embedder's query
  embedding included) next to ``<backend>_backend_p50_ms`` (``Collection.search`` of the same
  vectors, k=10) measured alternately in the same run, their ratio ``<backend>_facade_over_backend``,
  and ``<backend>_hybrid_p50_ms``.

Usage: ``python bench/bench_search.py [--chunks 100000] [--queries 200] [--json] [--no-model]
[--backends memory,pgvector,qdrant] [--qdrant-chunks 5000] [--facade-only]``.
Prints figures (``--json``: one JSON object); never fails.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT.parent / "shared" / "corpus" / "md" / "rust-book"
DIM = 384
PER_FILE = 50

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

_RESTART = r"""
import sys, time
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.workbench import Workbench
t0 = time.perf_counter()
wb = Workbench(load_settings(data_dir=sys.argv[1], vector_store={"max_chunks_per_store": int(sys.argv[2])}),
               embedder_factory=lambda model: HashEmbedder(dimension=384))
hits = wb.search("bench", "What is the difference between panic! and Result?", k=10, mode="hybrid")
print((time.perf_counter() - t0) * 1000, len(hits))
"""


def pieces(words_per_piece: int = 120) -> list[str]:
    texts = []
    for path in sorted(BOOK.glob("*.md")):
        words = path.read_text(encoding="utf-8").split()
        texts.extend(" ".join(words[i : i + words_per_piece]) for i in range(0, len(words), words_per_piece))
    return texts


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def timed(fn, *args, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - t0) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    ap.add_argument("--no-model", action="store_true", help="skip the phase that needs the bundled model")
    ap.add_argument(
        "--ingest-words", type=int, default=48_000, help="words of the file ingested while searching (48,000: ~500 chunks)"
    )
    ap.add_argument(
        "--backends",
        default="memory,pgvector,qdrant",
        help="backends of the facade-versus-backend phase (comma-separated; empty: skip it)",
    )
    ap.add_argument(
        "--qdrant-chunks",
        type=int,
        default=5_000,
        help="chunks of the qdrant store (local mode scores in Python: ~0.4 s a query at 10,000)",
    )
    ap.add_argument("--facade-only", action="store_true", help="run only the facade-versus-backend phase")
    args = ap.parse_args()
    if not BOOK.is_dir():
        print(f"corpus not found at {BOOK}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.service.fusion import LexicalIndex
    from knowledge.vectorstore.store import Chunk
    from knowledge.workbench import Workbench

    out: dict[str, object] = {"chunks": args.chunks, "backend": "memory"}

    def say(text: str) -> None:
        if not args.json:
            print(text, flush=True)

    texts = pieces()
    rng = np.random.default_rng(7)
    random.seed(7)
    cap = args.chunks + 2000
    for name in [b for b in args.backends.split(",") if b]:
        n = args.qdrant_chunks if name == "qdrant" else args.chunks
        queries = args.queries if name != "qdrant" else max(10, min(args.queries, 30))
        out.update(facade_vs_backend(name, n, queries, texts, say))
    if args.facade_only:
        if args.json:
            print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=tmp, vector_store={"max_chunks_per_store": cap})
        wb = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=DIM))
        wb.create_store("bench")
        vs = wb.vector_store("bench")
        coll = vs.collection
        files = args.chunks // PER_FILE
        # Fill through the backend in batches of 100 files (as the facade would write them, but
        # without a lexical index yet): the fill is not what is measured.
        t0 = time.perf_counter()
        coll.ensure_collection(DIM)
        batch = []
        for f in range(files):
            vectors = unit(rng, PER_FILE)
            fid = f"file{f:06d}"
            batch.extend(
                vs._point(fid, f"{fid}.md", i, Chunk(texts[(f * PER_FILE + i) % len(texts)], vectors[i], i))
                for i in range(PER_FILE)
            )
            if len(batch) >= 100 * PER_FILE or f == files - 1:
                coll.upsert(batch)
                batch = []
        say(
            f"store: {files * PER_FILE:,} chunks in {files:,} files of {PER_FILE} ({len(texts):,} distinct"
            f" texts from the Rust book), filled in {time.perf_counter() - t0:.1f} s"
        )

        def add_file(name: str) -> float:
            vectors = unit(rng, PER_FILE)
            chunks = [Chunk(texts[i], vectors[i], i) for i in range(PER_FILE)]
            return timed(vs.replace_file, name, chunks, file_name=f"{name}.md")

        add_file("warm-0")
        out["add_file_vectors_only_ms"] = statistics.median(add_file(f"plain-{i}") for i in range(5))

        # the in-process BM25 of before: built from every chunk by each process's first hybrid search
        t0 = time.perf_counter()
        old = LexicalIndex.from_points(coll.scroll())
        old.search("warm", 1)
        out["inprocess_bm25_build_s"] = time.perf_counter() - t0
        del old
        t0 = time.perf_counter()
        coll.ensure_lexical_index()
        out["lexical_build_s"] = time.perf_counter() - t0
        lex_dir = coll.path / "lexical"
        out["lexical_index_mb"] = sum(p.stat().st_size for p in lex_dir.rglob("*") if p.is_file()) / 1e6
        say(
            f"BM25: persisted index built in {out['lexical_build_s']:.1f} s ({out['lexical_index_mb']:.0f} MB);"
            f" the in-process index of before, built by every process's first hybrid search:"
            f" {out['inprocess_bm25_build_s']:.1f} s"
        )
        add_file("warm-1")
        out["add_file_ms"] = statistics.median(add_file(f"extra-{i}") for i in range(5))
        say(
            f"add one 50-chunk file: {out['add_file_ms']:.0f} ms with the lexical index,"
            f" {out['add_file_vectors_only_ms']:.0f} ms vectors only"
        )

        # a new process: open the store, answer the first hybrid query
        restarts = []
        for _ in range(3):
            run = subprocess.run(
                [sys.executable, "-c", _RESTART, tmp, str(cap)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
            )
            if run.returncode != 0:
                print(run.stderr, file=sys.stderr)
                break
            restarts.append(float(run.stdout.split()[0]))
        if restarts:
            out["first_hybrid_after_restart_ms"] = statistics.median(restarts)
            say(
                f"first hybrid search in a new process: {out['first_hybrid_after_restart_ms']:.0f} ms"
                f" (runs: {', '.join(f'{r:.0f}' for r in restarts)})"
            )

        queries = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        embedder = wb.embedder()
        qvecs = [embedder.embed_query(q) for q in queries]
        times: dict[str, list[float]] = {}
        coll.search(qvecs[0], limit=10)
        backend_ts = [timed(coll.search, v, limit=10) for v in qvecs]
        for mode in ("vector", "hybrid", "lexical"):
            wb.search("bench", queries[0], 10, mode=mode)  # warm
            times[mode] = [timed(wb.search, "bench", q, 10, mode=mode) for q in queries]
            out[f"{mode}_p50_ms"] = pct(times[mode], 50)
            out[f"{mode}_p95_ms"] = pct(times[mode], 95)
            say(
                f"{mode:>7}: Workbench.search k=10 p50 {pct(times[mode], 50):.1f} ms,"
                f" p95 {pct(times[mode], 95):.1f} ms over {len(queries)} queries"
            )
        out["backend_vector_p50_ms"] = pct(backend_ts, 50)
        out["facade_over_backend"] = out["vector_p50_ms"] / out["backend_vector_p50_ms"]
        out["hybrid_over_vector"] = out["hybrid_p50_ms"] / out["vector_p50_ms"]
        say(
            f"backend's own search p50 {out['backend_vector_p50_ms']:.1f} ms; facade / backend"
            f" {out['facade_over_backend']:.2f}x; hybrid / vector {out['hybrid_over_vector']:.2f}x"
        )
        where = {"file_id": "file000123"}
        for mode in ("vector", "hybrid", "lexical"):
            t0 = time.perf_counter()
            hits = wb.search("bench", "borrow checker", 10, where=where, mode=mode)
            ms = (time.perf_counter() - t0) * 1000
            assert all(h.file_id == "file000123" for h in hits)
            out[f"{mode}_filtered_ms"] = ms
            say(f"{mode:>7} filtered to one file: {ms:.1f} ms, {len(hits)} hits")
        wb.close()

        if not args.no_model:
            out.update(during_ingest(tmp, cap, queries, texts, say, args.ingest_words))
    if args.json:
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}))
    return 0


@contextmanager
def counting(backend: str):
    """Record each backend call made inside the block in the yielded list: memory's collection
    methods, pgvector's transactions (``PgvectorBackend.run``), qdrant's client calls."""
    calls: list[str] = []
    patched: list[tuple[type, str, object]] = []

    def wrap(cls: type, name: str) -> None:
        fn = getattr(cls, name)

        def counted(self, *a, **kw):
            calls.append(name if name not in ("call", "run") else getattr(a[0], "__name__", str(a[0])))
            return fn(self, *a, **kw)

        patched.append((cls, name, fn))
        setattr(cls, name, counted)

    if backend == "memory":
        from knowledge.vectorstore.memory import MemoryCollection

        for name in ("collection_exists", "info", "count", "search", "lexical_search", "retrieve", "scroll", "facet"):
            wrap(MemoryCollection, name)
    elif backend == "pgvector":
        from knowledge.vectorstore.pgvector import PgvectorBackend

        wrap(PgvectorBackend, "run")
    else:
        from knowledge.vectorstore.qdrant import QdrantBackend

        wrap(QdrantBackend, "call")
    try:
        yield calls
    finally:
        for cls, name, fn in patched:
            setattr(cls, name, fn)


def facade_vs_backend(backend: str, n: int, n_queries: int, texts: list[str], say) -> dict[str, object]:
    """Backend calls per warm search, and ``Workbench.search`` p50 next to ``Collection.search`` p50,
    on one backend with a store of ``n`` chunks (see the module docstring)."""
    import shutil

    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.vectorstore.store import Chunk
    from knowledge.workbench import Workbench

    rng = np.random.default_rng(11)
    tmp = Path(tempfile.mkdtemp(prefix="knowledge-bench-"))  # outside pytest's root: the pg server's user
    out: dict[str, object] = {}
    try:
        settings = load_settings(data_dir=tmp / "data", vector_store={"backend": backend, "max_chunks_per_store": n + 2000})
        wb = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=DIM))
        try:
            wb.create_store("bench")
            vs = wb.vector_store("bench")
            coll = vs.collection
            t0 = time.perf_counter()
            coll.ensure_collection(DIM)
            files = max(1, n // PER_FILE)
            batch = []
            for f in range(files):
                vectors = unit(rng, PER_FILE)
                fid = f"file{f:06d}"
                # each chunk's text made unique (as in a real store): no search fetches again because
                # its top k held the same text twice
                batch.extend(
                    vs._point(
                        fid,
                        f"{fid}.md",
                        i,
                        Chunk(f"{texts[(f * PER_FILE + i) % len(texts)]} ({fid} part {i})", vectors[i], i),
                    )
                    for i in range(PER_FILE)
                )
                if len(batch) >= 100 * PER_FILE or f == files - 1:
                    coll.upsert(batch)
                    batch = []
            coll.ensure_lexical_index()
            # one file through the facade, as ingestion writes it: the catalog knows the store's files
            wb.ingest_file("bench", texts[0].encode(), "through-the-facade.txt")
            say(f"{backend}: {files * PER_FILE:,} chunks filled in {time.perf_counter() - t0:.1f} s")
            queries = [QUERIES[i % len(QUERIES)] for i in range(n_queries)]
            embedder = wb.embedder()
            qvecs = [embedder.embed_query(q) for q in queries]
            for mode in ("vector", "hybrid"):
                for q in queries[:2]:  # warm (twice: the catalog's idle close may checkpoint after a write)
                    wb.search("bench", q, 10, mode=mode)
                with counting(backend) as calls:
                    wb.search("bench", queries[1], 10, mode=mode)
                out[f"{backend}_calls_{mode}"] = len(calls)
                out[f"{backend}_calls_{mode}_names"] = ",".join(calls)
            coll.search(qvecs[0], limit=10)
            facade, own, hybrid = [], [], []
            for i, (q, v) in enumerate(zip(queries, qvecs)):
                # alternately, so both see the same machine load, and each first every other time (the
                # second search of a vector finds the pages the first read in the cache)
                if i % 2:
                    facade.append(timed(wb.search, "bench", q, 10, mode="vector"))
                    own.append(timed(coll.search, v, limit=10))
                else:
                    own.append(timed(coll.search, v, limit=10))
                    facade.append(timed(wb.search, "bench", q, 10, mode="vector"))
            hybrid.extend(timed(wb.search, "bench", q, 10, mode="hybrid") for q in queries)
            out[f"{backend}_chunks"] = files * PER_FILE
            out[f"{backend}_backend_p50_ms"] = pct(own, 50)
            out[f"{backend}_facade_p50_ms"] = pct(facade, 50)
            out[f"{backend}_facade_over_backend"] = pct(facade, 50) / pct(own, 50)
            out[f"{backend}_hybrid_p50_ms"] = pct(hybrid, 50)
            say(
                f"{backend}: backend calls per warm search: vector {out[f'{backend}_calls_vector']}"
                f" ({out[f'{backend}_calls_vector_names']}), hybrid {out[f'{backend}_calls_hybrid']}"
                f" ({out[f'{backend}_calls_hybrid_names']})"
            )
            say(
                f"{backend}: vector k=10 over {len(queries)} queries: Workbench.search p50"
                f" {pct(facade, 50):.2f} ms, Collection.search p50 {pct(own, 50):.2f} ms ="
                f" {out[f'{backend}_facade_over_backend']:.2f}x; hybrid p50 {pct(hybrid, 50):.2f} ms"
            )
        finally:
            wb.close()
            if backend == "pgvector":
                from knowledge.vectorstore.pg_embedded import stop_embedded

                stop_embedded(settings.data_root / "postgres")
    except Exception as exc:  # a backend that cannot run here is reported, the others go on
        say(f"{backend}: not measured ({type(exc).__name__}: {exc})")
        out[f"{backend}_error"] = str(exc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def during_ingest(tmp: str, cap: int, queries: list[str], texts: list[str], say, n_words: int) -> dict[str, float]:
    """Hybrid search p95 with the bundled model, idle and while a ~500-chunk file is ingested."""
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    wb = Workbench(load_settings(data_dir=tmp, vector_store={"max_chunks_per_store": cap}))
    wb.embedder().load()
    wb.search("bench", "warm up", 10)
    idle = []
    for q in queries[:60]:
        idle.append(timed(wb.search, "bench", q, 10))
        time.sleep(0.05)
    # ~500 chunks of 254 tokens with 127 of overlap: ~64,000 tokens of the book's text
    words = " ".join(texts).split()[:n_words]
    doc = "\n\n".join(" ".join(words[i : i + 120]) for i in range(0, len(words), 120)).encode()
    result: list = []
    ingest = threading.Thread(target=lambda: result.append(wb.ingest_file("bench", doc, "big.md")))
    t0 = time.perf_counter()
    ingest.start()
    busy = []
    i = 0
    time.sleep(0.5)  # reading and chunking; then the embedding runs
    while ingest.is_alive():  # a person searching: a query, a glance at the results (50 ms), the next
        busy.append(timed(wb.search, "bench", queries[i % len(queries)], 10))
        i += 1
        time.sleep(0.05)
    ingest.join()
    seconds = time.perf_counter() - t0
    wb.close()
    chunks = result[0].chunks if result else 0
    out = {
        "idle_hybrid_p95_ms": pct(idle, 95),
        "during_ingest_hybrid_p95_ms": pct(busy, 95),
        "query_p95_during_ingest_over_idle": pct(busy, 95) / pct(idle, 95),
        "ingest_chunks": chunks,
        "ingest_s": seconds,
        "queries_during_ingest": len(busy),
    }
    say(
        f"bundled model, hybrid search: idle p95 {out['idle_hybrid_p95_ms']:.0f} ms; while a {chunks}-chunk"
        f" file is ingested ({seconds:.0f} s, {len(busy)} queries) p95 {out['during_ingest_hybrid_p95_ms']:.0f} ms"
        f" = {out['query_p95_during_ingest_over_idle']:.2f}x idle"
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
