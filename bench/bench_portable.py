"""Portable knowledge benchmark (knowledge/portable/): export and import time, bundle size and peak
memory, for the Rust book embedded with the bundled model and for a store of 100,000 chunks.

* **Rust book**: ``../shared/corpus/md/rust-book`` (112 chapters) ingested with the bundled model
  (the ingest is timed too, as the baseline an import that reuses vectors saves); then exported,
  imported under another name on the memory backend (vectors reused), and, with ``--pgvector``,
  onto pgvector on the embedded server. The top 5 of the corpus README's questions are compared.
* **100,000 chunks** (``--chunks``): real-looking text (the Rust book cut into ~120-word pieces,
  repeated) with random 384-d unit vectors, in files of 100 chunks, written straight into the
  store's collection through ``Indexer.write_points`` (not embedded), each file with its bytes in
  the file store and its catalog record; then exported and imported (memory; ``--pgvector``: also
  pgvector).

Memory: ``tracemalloc`` peak of the Python heap (numpy's arrays included) during each export and
import, over the heap before it, next to the store's own size (its vectors: n x 384 x 4 bytes);
the memory backend keeps a store's points in memory, so an import onto it grows by the new store
itself; pgvector shows the import's own bound (a block of 2,048 chunks). ``ru_maxrss`` of the process
at the end is printed too. Baseline in the same run: the time to write the same chunks through the
collection (the fill), and for the Rust book the ingest with the model.

Usage: ``python bench/bench_portable.py [--chunks 100000] [--no-book] [--pgvector] [--json]``.
With ``--pgvector`` the 100,000-chunk import onto pgvector takes over 10 minutes on a loaded 2-core
machine (the HNSW index is maintained by every upsert); ``--chunks 20000`` keeps it short.
Prints figures; never fails on a figure.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BOOK = ROOT.parent / "shared" / "corpus" / "md" / "rust-book"
sys.path.insert(0, str(ROOT / "bench"))
from bench_search import pieces

DIM = 384
PER_FILE = 100


def questions() -> list[str]:
    """The corpus README's questions (tests/data/corpus_readme_questions.tsv, the product's parser)."""
    from knowledge.evaluation import parse_questions

    path = ROOT / "tests" / "data" / "corpus_readme_questions.tsv"
    return [q.text for q in parse_questions(path.read_bytes(), path.name)[1]]


def measured(fn, *args, **kwargs):
    """``(result, seconds, peak heap bytes over the heap before)``."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    result = fn(*args, **kwargs)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return result, seconds, peak


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--no-book", action="store_true", help="skip the Rust book (it embeds with the model)")
    ap.add_argument("--pgvector", action="store_true", help="also import onto pgvector (embedded server)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = ap.parse_args()
    if not BOOK.is_dir():
        print(f"corpus not found at {BOOK}", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from knowledge.catalog import DONE, FileRecord
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.service.templates import make_template
    from knowledge.vectorstore.base import Point
    from knowledge.workbench import Workbench

    out: dict[str, object] = {}

    def say(text: str) -> None:
        if not args.json:
            print(text, flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-portable-") as tmp:
        tmp_path = Path(tmp)
        pg_url = None
        if args.pgvector:
            from knowledge.vectorstore.pg_embedded import embedded_url

            pg_url = embedded_url(tmp_path / "postgres")

        def settings(name: str, **vs):
            vector_store = {"max_chunks_per_store": args.chunks + 10_000, **vs}
            if pg_url:
                vector_store["url"] = pg_url
            return load_settings(data_dir=tmp_path / name, vector_store=vector_store)

        def with_pg(wb, model: str) -> None:
            if pg_url:
                wb.save_template(make_template(name="pg", backend="pgvector", embedding_model=model))

        try:
            # -- the Rust book with the bundled model --------------------------------------------
            if not args.no_book:
                wb = Workbench(settings("book"))
                model = wb.template("default").embedding_model
                with_pg(wb, model)
                t0 = time.perf_counter()
                results = wb.ingest_paths("book", [BOOK], glob="*.md")
                ingest_s = time.perf_counter() - t0
                chunks = sum(r.chunks for r in results)
                say(
                    f"Rust book: {len(results)} files, {chunks:,} chunks ingested with {model} in {ingest_s:.1f} s"
                    " (the baseline: what an import with the same model does not redo)"
                )
                book = wb.stores.collection_of(wb.get_store("book"))
                book.count()  # loaded (and its file index built) before measuring
                book.facet("file_id")
                r, sec, peak = measured(wb.portable.export_store, "book", tmp_path / "book.kb")
                say(f"  export: {sec:.2f} s, bundle {mb(r.bytes)}, heap peak +{mb(peak)}")
                _, isec, ipeak = measured(wb.portable.import_bundle, r.path, as_name="book-copy")
                say(
                    f"  import (memory, vectors reused): {isec:.2f} s, heap peak +{mb(ipeak)};"
                    f" ingest / import = {ingest_s / isec:.0f}x"
                )
                same = all(
                    [h.text for h in wb.search("book", q, k=5)] == [h.text for h in wb.search("book-copy", q, k=5)]
                    for q in questions()
                )
                say(f"  same top 5 (hybrid) for the corpus README's {len(questions())} questions: {same}")
                out.update(
                    book_files=len(results),
                    book_chunks=chunks,
                    book_ingest_s=ingest_s,
                    book_export_s=sec,
                    book_bundle_bytes=r.bytes,
                    book_export_peak_bytes=peak,
                    book_import_s=isec,
                    book_import_peak_bytes=ipeak,
                    book_same_top5=same,
                )
                if pg_url:
                    _, psec, ppeak = measured(wb.portable.import_bundle, r.path, as_name="book-pg", template="pg")
                    say(f"  import (pgvector, vectors reused): {psec:.2f} s, heap peak +{mb(ppeak)}")
                    out.update(book_import_pgvector_s=psec, book_import_pgvector_peak_bytes=ppeak)
                wb.close()

            # -- 100,000 synthetic chunks --------------------------------------------------------
            n = args.chunks
            texts = pieces()
            rng = np.random.default_rng(7)
            wb = Workbench(settings("big"), embedder_factory=lambda model: HashEmbedder(dimension=DIM))
            with_pg(wb, "fake")
            wb.save_template(make_template(name="big", backend="memory", embedding_model="fake"))
            record = wb.create_store("big", "big")
            coll = wb.stores.collection_of(record)
            files = n // PER_FILE

            def batches():  # 20 files (2,000 chunks) a write, as an import writes blocks
                out = []
                for f in range(files):
                    body = f"file {f}\n".encode() + texts[f % len(texts)].encode()
                    stored = wb.files.save(f"doc{f:05d}.md", "text/markdown", body)
                    wb.catalog.put_file(
                        FileRecord("big", stored.id, stored.name, stored.sha256, stored.size, DONE, None, PER_FILE, None)
                    )
                    v = rng.normal(size=(PER_FILE, DIM)).astype(np.float32)
                    v /= np.linalg.norm(v, axis=1, keepdims=True)
                    out += [
                        Point(
                            f"{stored.id}:{i}",
                            v[i],
                            {
                                "file_id": stored.id,
                                "file_name": stored.name,
                                "chunk_index": i,
                                "text": texts[(f * PER_FILE + i) % len(texts)],
                                "page": None,
                                "char_start": i * 800,
                                "char_end": i * 800 + 790,
                                "heading": f"Chapter {f} > Part {i}",
                            },
                        )
                        for i in range(PER_FILE)
                    ]
                    if len(out) >= 20 * PER_FILE or f == files - 1:
                        yield out
                        out = []

            t0 = time.perf_counter()
            wb.indexer.write_points(coll, DIM, "cosine", batches(), total=n)
            fill_s = time.perf_counter() - t0
            vectors_bytes = n * DIM * 4
            say(
                f"{n:,} chunks in {files:,} files written through Indexer.write_points in {fill_s:.1f} s"
                f" (vectors alone: {mb(vectors_bytes)})"
            )
            coll.count()  # the store loaded (and its file index built) before measuring, as for an app in use
            coll.facet("file_id")
            r, sec, peak = measured(wb.portable.export_store, "big", tmp_path / "big.kb")
            say(
                f"  export: {sec:.1f} s ({n / sec:,.0f} chunks/s), bundle {mb(r.bytes)}, heap peak +{mb(peak)}"
                f" ({peak / vectors_bytes:.2f}x the store's vectors)"
            )
            _, isec, ipeak = measured(wb.portable.import_bundle, r.path, as_name="big-copy")
            say(
                f"  import (memory): {isec:.1f} s ({n / isec:,.0f} chunks/s), heap peak +{mb(ipeak)}"
                f" (the new store is kept in memory by this backend); fill / import = {fill_s / isec:.2f}"
            )
            out.update(
                chunks=n,
                fill_s=fill_s,
                export_s=sec,
                bundle_bytes=r.bytes,
                export_peak_bytes=peak,
                import_s=isec,
                import_peak_bytes=ipeak,
                vectors_bytes=vectors_bytes,
            )
            if pg_url:
                wb.stores.backend("memory").collection(wb.get_store("big-copy").collection).drop_collection()
                _, psec, ppeak = measured(wb.portable.import_bundle, r.path, as_name="big-pg", template="pg")
                say(f"  import (pgvector): {psec:.1f} s ({n / psec:,.0f} chunks/s), heap peak +{mb(ppeak)}")
                out.update(import_pgvector_s=psec, import_pgvector_peak_bytes=ppeak)
            wb.close()
        finally:
            if pg_url:
                from knowledge.vectorstore.pg_embedded import stop_embedded

                stop_embedded(tmp_path / "postgres")
    out["ru_maxrss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    say(f"process peak RSS: {mb(out['ru_maxrss_bytes'])}")
    if args.json:
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
