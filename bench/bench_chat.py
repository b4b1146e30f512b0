"""What a reranked search costs, and how long a chat answer takes, on a store of the Rust book.

``python bench/bench_chat.py --data-dir DIR --store NAME [--questions FILE] [--n 20] [--detect]``

* **Reranking** (:mod:`knowledge.service.rerank`): the store searched with each question, ``k = 10``,
  without and with the reranker (``--candidates`` passages, default the setting), alternating
  which goes first; prints p50 / p95 of each (ms), the cost per query (p50 of the differences) and
  MRR@10 / recall@1 / recall@5 of both on the question file (its ``relevant`` column: file names,
  ``;`` between alternatives).
* **Chat latency**: ``ChatService.send`` with each question in a fresh session over the store --
  the offline assistant (search, then the sentences that answer), and with ``--detect`` a local
  model server found on its default port (Ollama, LM Studio, llama.cpp's server; search-first,
  streamed) -- printing the time to the first token (the first piece handed to ``on_token``; the
  offline assistant hands none, so its first token is its whole answer) and the total, p50 / max.

Figures only; nothing is asserted. Build a store first, e.g. ``python bench/bench_ingest.py
--configs 192/48 --no-office --keep DIR`` (then ``--data-dir DIR/c192-48 --store book``).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))] if values else float("nan")


def rank_of(files: list[str | None], relevant: set[str]) -> int | None:
    return next((i for i, f in enumerate(files, 1) if f in relevant), None)


def quality(ranks: list[int | None]) -> str:
    n = max(1, len(ranks))
    mrr = sum(1 / r for r in ranks if r and r <= 10) / n
    r1 = sum(1 for r in ranks if r == 1) / n
    r5 = sum(1 for r in ranks if r and r <= 5) / n
    return f"MRR@10 {mrr:.3f} recall@1 {r1:.3f} recall@5 {r5:.3f}"


def bench_rerank(wb, store: str, rows: list[dict[str, str]], candidates: int | None) -> None:
    from knowledge.service.search import Searcher

    searcher: Searcher = wb.searcher
    if candidates:
        searcher.settings = searcher.settings.model_copy(
            update={"search": searcher.settings.search.model_copy(update={"rerank_candidates": candidates})}
        )
    n = searcher.rerank_of(wb.stores.get(store), True)[1]
    wb.search(store, "warm up", k=10, rerank=True)
    plain_ms, rerank_ms, plain_ranks, rerank_ranks = [], [], [], []
    for i, row in enumerate(rows):
        relevant = {x.strip() for x in row["relevant"].split(";")}
        order = (False, True) if i % 2 == 0 else (True, False)
        for on in order:
            t = time.perf_counter()
            hits = wb.search(store, row["question"], k=10, rerank=on)
            ms = (time.perf_counter() - t) * 1000
            (rerank_ms if on else plain_ms).append(ms)
            (rerank_ranks if on else plain_ranks).append(rank_of([h.file_name for h in hits], relevant))
    cost = [r - p for r, p in zip(rerank_ms, plain_ms)]
    print(f"reranking the best {n} passages, {len(rows)} questions, k = 10 ({load()}):")
    for label, ms, ranks in (("without", plain_ms, plain_ranks), ("with   ", rerank_ms, rerank_ranks)):
        print(f"  {label}: p50 {statistics.median(ms):7.1f} ms  p95 {pct(ms, 0.95):7.1f} ms  {quality(ranks)}")
    print(f"  reranker cost per query: p50 {statistics.median(cost):.1f} ms, p95 {pct(cost, 0.95):.1f} ms")


def bench_chat(chat, store: str, rows: list[dict[str, str]], config: str | None, label: str) -> None:
    firsts, totals = [], []
    for row in rows:
        sid = chat.create_session(config=config, stores=[store]).id
        first: list[float] = []
        t = time.perf_counter()

        def on_token(piece: str, t: float = t, first: list[float] = first) -> None:
            if not first and piece:
                first.append(time.perf_counter() - t)

        chat.send(sid, row["question"], on_token=on_token)
        total = time.perf_counter() - t
        totals.append(total)
        firsts.append(first[0] if first else total)
    print(
        f"chat, {label}, {len(rows)} questions ({load()}): first token p50 {statistics.median(firsts):.2f} s"
        f" max {max(firsts):.2f} s; total p50 {statistics.median(totals):.2f} s max {max(totals):.2f} s"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--questions", default=str(ROOT / "tests" / "data" / "rust_book_questions.tsv"))
    ap.add_argument("--n", type=int, default=20, help="questions used for the chat latency (default 20)")
    ap.add_argument("--candidates", type=int, default=0, help="passages reranked (default: the setting)")
    ap.add_argument("--detect", action="store_true", help="also a local model server on its default port")
    ap.add_argument("--no-rerank", action="store_true", help="skip the reranking figures")
    args = ap.parse_args()
    from knowledge.chat import Chats
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    with open(args.questions, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    system = System(load_settings(data_dir=args.data_dir))
    wb = Workbench(system)
    chat = Chats(system).service(wb)
    try:
        if not args.no_rerank:
            bench_rerank(wb, args.store, rows, args.candidates or None)
        bench_chat(chat, args.store, rows[: args.n], None, "offline assistant")
        if args.detect:
            from knowledge.llm import local

            servers = local.detect()
            if not servers:
                print("no local model server answers on " + ", ".join(f"{n} {p}" for n, p in local.DEFAULT_PORTS.items()))
            for server in servers:
                try:
                    cfg = server.config()
                except ValueError as exc:
                    print(exc)
                    continue
                wb.llm_configs().save(cfg)
                bench_chat(chat, args.store, rows[: args.n], cfg.name, f"{server.name} {cfg.model}")
    finally:
        system.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
