"""Ingestion benchmark on ../shared/corpus/md/rust-book with the bundled model, and an office-documents
row (../shared/corpus/office: PowerPoint, Excel, Word, OpenDocument, EPUB, RTF, mail, HTML) beside it.

For each chunking configuration (the spec's 800/400, fitted to the model's window, and smaller ones):

* end-to-end ingest: files/s and chunks/s through ``Workbench.ingest_paths`` (file store, reader,
  chunker, embedder, memory backend, catalog);
* the raw fastembed throughput on the very same chunk texts, measured in the same run (the floor
  that ingestion can at best reach) and the ratio end-to-end / raw (target >= 0.9);
* retrieval quality on the corpus README's example questions: recall@1, recall@5 and MRR@10, where a
  question is answered when a hit comes from its chapter -- for hybrid search (the default) and for
  the vector ranking alone.

The office row ingests the office corpus with the first configuration: files/s and chunks/s through
the same path (its three password-protected files fail as "needs a password" and are counted).

Usage: ``python bench/bench_ingest.py [--configs 800/400,256/64,128/32] [--limit N] [--no-office]``.
Prints figures; never fails on a miss.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT.parent / "shared" / "corpus" / "md" / "rust-book"
OFFICE = ROOT.parent / "shared" / "corpus" / "office"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from knowledge.evaluation import parse_questions

#: The example questions of ../shared/corpus/README.md and the first chapter that answers each
#: (tests/data/corpus_readme_questions.tsv, read by the product's parser).
QUESTIONS = [(q.text, q.relevant[0].file)
             for q in parse_questions((ROOT / "tests" / "data" / "corpus_readme_questions.tsv").read_bytes(),
                                      "corpus_readme_questions.tsv")[1]]


def quality(wb, store: str, mode: str = "hybrid") -> tuple[float, float, float, list[int | None]]:
    """recall@1, recall@5, MRR@10 over :data:`QUESTIONS`, and each question's rank (None = not in 10)."""
    ranks: list[int | None] = []
    for question, chapter in QUESTIONS:
        hits = wb.search(store, question, k=10, mode=mode)
        rank = next((i + 1 for i, h in enumerate(hits) if h.file_name == chapter), None)
        ranks.append(rank)
    n = len(QUESTIONS)
    r1 = sum(1 for r in ranks if r == 1) / n
    r5 = sum(1 for r in ranks if r is not None and r <= 5) / n
    mrr = sum(1 / r for r in ranks if r is not None) / n
    return r1, r5, mrr, ranks


def office_files() -> list[Path]:
    """The office corpus's documents (its ``<format>/`` folders; not the TSVs, README or scorer)."""
    return sorted(p for p in OFFICE.glob("*/*") if p.is_file())


def run_config(size: int, overlap: int, files: list[Path], *, measure_quality: bool = True) -> dict:
    from knowledge.config import load_settings
    from knowledge.ingest.chunker import embedding_text
    from knowledge.service.templates import make_template
    from knowledge.workbench import Workbench

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=tmp, embeddings={"models_dir": str(ROOT / "data" / "models")})
        wb = Workbench(settings)
        name = f"c{size}-{overlap}"
        wb.templates.save(make_template(name=name, embedding_model=settings.embeddings.model,
                                        max_chunk_size_tokens=size, chunk_overlap_tokens=overlap))
        embedder = wb.embedder()
        embedder.embed_documents(["warm up the model"])
        t0 = time.perf_counter()
        results = wb.ingest_paths("book", files, template=name)
        ingest_s = time.perf_counter() - t0
        chunks = sum(r.chunks for r in results)
        failed = [r for r in results if not r.ok]
        texts = [embedding_text(p.payload["text"], p.payload.get("heading"))
                 for p in wb.vector_store("book").collection.scroll()]
        t0 = time.perf_counter()
        for i in range(0, len(texts), 64):
            embedder.embed_documents(texts[i:i + 64])
        raw_s = time.perf_counter() - t0
        tokens = sum(embedder.count_tokens(t) for t in texts) / max(1, len(texts))
        r1, r5, mrr, ranks = quality(wb, "book") if measure_quality else (0.0, 0.0, 0.0, [])
        v1, v5, vmrr, vranks = quality(wb, "book", mode="vector") if measure_quality else (0.0, 0.0, 0.0, [])
        plan_notes = []
        from knowledge.ingest.chunker import plan_chunking

        plan = plan_chunking(embedder, size, overlap)
        plan_notes = list(plan.notes)
        wb.close()
    return {"config": f"{size}/{overlap}", "used": f"{plan.max_tokens}/{plan.overlap_tokens}",
            "files": len(results), "failed": len(failed), "chunks": chunks, "avg_tokens": tokens,
            "ingest_s": ingest_s, "raw_s": raw_s, "r1": r1, "r5": r5, "mrr": mrr, "ranks": ranks,
            "vector": (v1, v5, vmrr, vranks),
            "notes": plan_notes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="800/400,256/64,192/48,128/32",
                    help="comma-separated size/overlap pairs in tokens")
    ap.add_argument("--limit", type=int, default=0, help="only the first N chapters (0 = all)")
    ap.add_argument("--no-office", action="store_true", help="skip the office-documents row")
    args = ap.parse_args()
    if not BOOK.is_dir():
        print(f"corpus not found at {BOOK}", file=sys.stderr)
        return 1
    files = sorted(p for p in BOOK.glob("*.md"))
    if args.limit:
        wanted = {c for _, c in QUESTIONS}
        files = sorted(set(files[: args.limit]) | {p for p in files if p.name in wanted})
    print(f"rust-book: {len(files)} Markdown files, {sum(p.stat().st_size for p in files) / 1e6:.2f} MB")
    rows = []
    for pair in args.configs.split(","):
        size, overlap = (int(x) for x in pair.split("/"))
        r = run_config(size, overlap, files)
        rows.append(r)
        for note in r["notes"]:
            print(f"  note: {note}")
        print(f"{r['config']:>8} (used {r['used']}): {r['chunks']} chunks of {r['avg_tokens']:.0f} tokens,"
              f" ingest {r['ingest_s']:.1f} s = {r['files'] / r['ingest_s']:.2f} files/s,"
              f" {r['chunks'] / r['ingest_s']:.1f} chunks/s; raw fastembed {r['chunks'] / r['raw_s']:.1f} chunks/s;"
              f" ratio {r['raw_s'] / r['ingest_s']:.2f} {'PASS' if r['raw_s'] / r['ingest_s'] >= 0.9 else 'MISS'}"
              f" (target >= 0.9); hybrid search: recall@1 {r['r1']:.2f}, recall@5 {r['r5']:.2f}, MRR@10"
              f" {r['mrr']:.3f}, ranks {r['ranks']}; vector only: recall@1 {r['vector'][0]:.2f}, recall@5"
              f" {r['vector'][1]:.2f}, MRR@10 {r['vector'][2]:.3f}, ranks {r['vector'][3]};"
              f" failed files {r['failed']}", flush=True)
    if not args.no_office and OFFICE.is_dir():
        size, overlap = (int(x) for x in args.configs.split(",")[0].split("/"))
        docs = office_files()
        o = run_config(size, overlap, docs, measure_quality=False)
        formats = len({p.parent.name for p in docs})
        mb = sum(p.stat().st_size for p in docs) / 1e6
        print(f"\noffice documents ({len(docs)} files in {formats} formats, {mb:.2f} MB,"
              f" {o['config']}): {o['chunks']} chunks, ingest {o['ingest_s']:.1f} s ="
              f" {o['files'] / o['ingest_s']:.2f} files/s, {o['chunks'] / o['ingest_s']:.1f} chunks/s; raw fastembed"
              f" {o['chunks'] / o['raw_s']:.1f} chunks/s; ratio {o['raw_s'] / o['ingest_s']:.2f}; not indexed"
              f" {o['failed']} (password-protected files among them)", flush=True)
        md = rows[0]
        print(f"  beside the Markdown row ({md['config']}): {md['files'] / md['ingest_s']:.2f} files/s,"
              f" {md['chunks'] / md['ingest_s']:.1f} chunks/s")
    base = rows[0]
    print("\nrelative to the first configuration:")
    for r in rows:
        print(f"  {r['config']:>8}: ingest {base['ingest_s'] / r['ingest_s']:.2f}x faster, MRR@10"
              f" {r['mrr']:.3f} vs {base['mrr']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
