"""``search``: a store's hits for a query, as text or JSON."""

from __future__ import annotations

import argparse
import json

from knowledge.cli.common import Commands, command, resolve_file
from knowledge.service.search import SEARCH_MODES
from knowledge.tools.knowledge import format_hit, hit_data
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "search", help="search a store (meaning and exact words)")
    s.add_argument("store")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5, help="number of results (default 5)")
    s.add_argument("--file", help="only this file (id or name)")
    s.add_argument("--per-file", type=int, metavar="N", help="at most N chunks per file (1: the best files)")
    s.add_argument("--mode", choices=list(SEARCH_MODES),
                   help="ranking: vector + BM25 fused (hybrid), vector only, BM25 only (default: search.mode)")
    s.add_argument("--json", action="store_true", help="print the hits as JSON")
    s.set_defaults(func=cmd_search)


def cmd_search(wb: Workbench, args: argparse.Namespace) -> int:
    where = {"file_id": resolve_file(wb, args.store, args.file)} if args.file else None
    hits = wb.search(args.store, args.query, k=args.k, where=where, max_per_file=args.per_file, mode=args.mode)
    if args.json:
        print(json.dumps([hit_data(h) for h in hits], ensure_ascii=False, indent=2))
    else:
        print("\n\n".join(format_hit(i + 1, h) for i, h in enumerate(hits)) or "No results.")
    return 0
