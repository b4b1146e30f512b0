"""Retrieval quality of a store on a question set, through the product's evaluation
(knowledge/evaluation/): the three rankings at the store's chunking, a sweep of the hybrid fusion
weight, and chunk settings tried on temporary re-embedded copies (from the stored text).

Usage::

    python bench/bench_evaluate.py --data-dir DIR --store rust \\
        --questions tests/data/rust_book_questions.tsv [--only-files 'ch0[3-9]-*'] \\
        [--weights 0,0.25,0.5,0.75,1] [--chunkings 128/32,192/48,254/64] [--modes hybrid,vector,lexical]

``--only-files GLOB`` first removes the store's other files (use it on a copy of a data folder)
and keeps the questions whose relevant files all match. Prints figures; never fails on a miss.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def line(run) -> str:
    m = run.metrics
    return (
        f"{run.mode:>7}  MRR@10 {m['MRR@10']:.3f}  recall@1 {m['recall@1']:.3f}  recall@3 {m['recall@3']:.3f}"
        f"  recall@5 {m['recall@5']:.3f}  recall@10 {m['recall@10']:.3f}  nDCG@10 {m['nDCG@10']:.3f}"
        f"  {run.latency_ms['mean']:.0f} ms/question"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--only-files", help="keep only the store's files matching this glob (destructive)")
    ap.add_argument("--modes", default="hybrid,vector,lexical")
    ap.add_argument("--weights", default="0,0.25,0.5,0.75,1")
    ap.add_argument("--chunkings", default="", help="size/overlap pairs to try, comma-separated (at most 4)")
    ap.add_argument("--save", action="store_true", help="keep the runs in the data folder's catalog")
    args = ap.parse_args()

    from knowledge import evaluation as ev
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    wb = Workbench(load_settings(data_dir=args.data_dir))
    store = wb.evaluations
    qset = wb.evaluations.load_question_set(args.questions)
    if args.only_files:
        for f in wb.store_files(args.store):
            if not fnmatch.fnmatch(f.file_name, args.only_files):
                wb.delete_file(args.store, f.file_id)
        kept = tuple(
            q for q in qset.questions if all(c.file and fnmatch.fnmatch(c.file, args.only_files) for c in q.relevant)
        )
        qset = ev.QuestionSet(qset.name, kept, qset.format)
    files = [f for f in wb.store_files(args.store) if f.status == "done"]
    print(
        f"store {args.store}: {len(files)} files, {sum(f.chunks for f in files)} chunks;"
        f" {len(qset.questions)} questions of {qset.name}"
    )
    modes = [m for m in args.modes.split(",") if m]
    print("\nat the store's own chunking:")
    for mode in modes:
        run = wb.evaluations.evaluate(args.store, qset, mode)
        if args.save:
            store.save_run(run)
        print(f"  {run.chunking['size']}/{run.chunking['overlap']} {line(run)}", flush=True)
    if args.weights:
        print("\nhybrid, fusion weight (1 = vector order, 0 = words order):")
        for run in wb.evaluations.sweep_fusion_weight(args.store, qset, [float(w) for w in args.weights.split(",")]):
            print(f"  w={run.search['fusion_weight']:<4} {line(run)}", flush=True)
    if args.chunkings:
        pairs = [tuple(int(x) for x in p.split("/")) for p in args.chunkings.split(",")]
        for pair in pairs:  # one at a time, so each prints as soon as it is done
            t0 = time.perf_counter()
            (trial,) = wb.evaluations.try_chunkings(args.store, qset, [pair], modes)
            print(
                f"\nchunks {trial.size}/{trial.overlap}: {trial.chunks} chunks, re-cut and embedded in"
                f" {trial.build_seconds:.0f} s (total {time.perf_counter() - t0:.0f} s)"
            )
            for run in trial.runs:
                if args.save:
                    store.save_run(run)
                print(f"  {line(run)}", flush=True)
    wb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
