"""Folder sync (knowledge/sync.py) on the Rust book's Markdown (``../shared/corpus/md/rust-book``, or
``--book``), copied to a temporary folder, with the bundled model (``--fake`` for the 64-d fake
embedder, to time the sync's own work).

1. First sync: plan (every file hashed) + apply (every file ingested) -- against the baseline, the
   same files ingested by ``Workbench.ingest_paths`` into another store in the same run.
2. A sync with nothing changed: the plan alone (size + mtime match: no file read), and the same
   plan when every file must be hashed (mtimes touched, bytes the same).
3. A sync after renaming a tenth of the files (moved into another folder): plan + apply, and how
   many texts were embedded (0 expected: renames re-embed nothing).

    python bench/bench_sync.py [--book DIR] [--fake] [--files N]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--book", default=str(REPO.parent / "shared" / "corpus" / "md" / "rust-book"))
    ap.add_argument("--fake", action="store_true", help="the 64-d fake embedder instead of the bundled model")
    ap.add_argument("--files", type=int, default=0, help="only the first N Markdown files (by path; 0: all)")
    args = ap.parse_args()
    book = Path(args.book)
    if not book.is_dir():
        sys.exit(f"No folder {book} (give --book).")

    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    embedded = [0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "book"
        shutil.copytree(book, folder)
        if args.files:
            for p in sorted(folder.rglob("*.md"))[args.files :]:
                p.unlink()
        settings = load_settings(data_dir=Path(tmp) / "data")
        if args.fake:
            from knowledge.embeddings.fake import HashEmbedder

            def factory(model):
                class Counting(HashEmbedder):
                    def embed_documents(self, texts):
                        embedded[0] += len(texts)
                        return super().embed_documents(texts)

                return Counting(dimension=64, max_tokens=256)

            wb = Workbench(settings, embedder_factory=factory)
        else:
            wb = Workbench(settings)
            inner = wb.embedder()
            original = inner.embed_documents

            def counting(texts):
                embedded[0] += len(texts)
                return original(texts)

            inner.embed_documents = counting  # type: ignore[method-assign]
        try:
            files = list(folder.rglob("*.md"))
            size = sum(p.stat().st_size for p in files)
            print(f"{len(files)} Markdown files, {size / 1e6:.2f} MB, model {wb.embedder().name}")

            t0 = time.perf_counter()
            wb.ingest_paths("baseline", [folder], glob="**/*.md")
            t_base = time.perf_counter() - t0

            sync = wb.syncs.folder("synced", folder, "**/*.md")
            t0 = time.perf_counter()
            plan = sync.plan()
            t_plan = time.perf_counter() - t0
            report = sync.apply(plan)
            t_first = time.perf_counter() - t0
            print(
                f"first sync: plan {t_plan * 1000:.0f} ms ({plan.hashed} files hashed), plan + apply "
                f"{t_first:.1f} s ({report.counts()['added']} added); ingest_paths baseline {t_base:.1f} s "
                f"(ratio {t_first / t_base:.2f})"
            )

            t0 = time.perf_counter()
            plan = sync.plan()
            t_quiet = time.perf_counter() - t0
            for p in files:
                st = p.stat()
                os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
            t0 = time.perf_counter()
            plan2 = sync.plan()
            t_hash = time.perf_counter() - t0
            sync.apply(plan2)  # records the new times
            print(
                f"nothing changed: plan {t_quiet * 1000:.1f} ms ({plan.hashed} hashed, {plan.changes} changes);"
                f" every file hashed {t_hash * 1000:.1f} ms ({plan2.hashed} hashed, {plan2.changes} changes);"
                f" ratio {t_hash / max(t_quiet, 1e-9):.1f}x"
            )

            moved = sorted(files)[::10]
            (folder / "moved").mkdir()
            for p in moved:
                p.rename(folder / "moved" / p.name)
            embedded[0] = 0
            t0 = time.perf_counter()
            plan = sync.plan()
            report = sync.apply(plan)
            t_move = time.perf_counter() - t0
            print(
                f"{len(moved)} files moved: plan + apply {t_move * 1000:.0f} ms, {report.counts()['renamed']} renamed,"
                f" {report.counts()['added']} added, {report.counts()['deleted']} deleted;"
                f" texts embedded: {embedded[0]}"
            )
        finally:
            wb.close()


if __name__ == "__main__":
    main()
