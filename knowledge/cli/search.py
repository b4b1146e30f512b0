"""``search``: a store's hits for a query, as text or JSON."""

from __future__ import annotations

import argparse
import json

from knowledge.cli.common import Commands, command, resolve_file
from knowledge.errors import InvalidArgument
from knowledge.tools.knowledge import format_hit, hit_data
from knowledge.vocabulary import search_mode
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "search", help="search a store (hybrid: semantic and keyword rankings merged)")
    s.add_argument("store")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5, help="number of results (default 5)")
    s.add_argument("--file", help="only this file (id or name)")
    s.add_argument("--per-file", type=int, metavar="N", help="at most N chunks per file (1: the best files)")
    s.add_argument(
        "--mode",
        type=ranking,
        metavar="{hybrid,semantic,keyword}",
        help="ranking: hybrid (semantic and keyword merged), semantic (by meaning) or keyword (BM25; default: search.mode)",
    )
    s.add_argument("--json", action="store_true", help="print the hits as JSON")
    s.set_defaults(func=cmd_search)


def ranking(value: str) -> str:
    """``--mode``'s value: the ranking of :func:`knowledge.vocabulary.search_mode` (``semantic`` is
    ``vector``, ``keyword`` is ``lexical``); argparse's usage error otherwise."""
    try:
        return search_mode(value)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_search(wb: Workbench, args: argparse.Namespace) -> int:
    where = {"file_id": resolve_file(wb, args.store, args.file)} if args.file else None
    hits = wb.search(args.store, args.query, k=args.k, where=where, max_per_file=args.per_file, mode=args.mode)
    if args.json:
        print(json.dumps([hit_data(h) for h in hits], ensure_ascii=False, indent=2))
    else:
        print("\n\n".join(format_hit(i + 1, h) for i, h in enumerate(hits)) or "No results.")
    return 0
