"""``eval``: a store's retrieval measured on a question set (recall@n, MRR, nDCG), one run per
mode, kept in the catalog unless ``--no-save``; exit 1 below ``--min-mrr``. With ``--answers``, the
answer check too (:mod:`knowledge.chat.answer_check`), kept with the run that searched as the chat
does; exit 1 below ``--min-answers``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from knowledge import evaluation as ev
from knowledge.chat import ChatService
from knowledge.chat.answer_check import check_answers, run_as_the_chat_searches
from knowledge.cli.common import Commands, command, table
from knowledge.cli.search import ranking
from knowledge.vocabulary import ranking_label
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "eval", help="measure a store's retrieval on a question set (recall@n, MRR, nDCG; the run is kept)")
    s.add_argument("store")
    s.add_argument(
        "questions",
        metavar="SET_FILE_OR_NAME",
        help="a question file (TSV/CSV: question<TAB>relevant, ';' between alternatives; JSONL)"
        " or the name of a set stored in the app",
    )
    s.add_argument(
        "--mode",
        action="append",
        type=lambda v: "all" if v.strip().lower() == "all" else ranking(v),
        metavar="{hybrid,semantic,keyword,all}",
        help="ranking to evaluate (repeatable; all = the three; default: search.mode)",
    )
    s.add_argument("--k", type=int, default=10, help="depth of each ranking (default 10)")
    s.add_argument(
        "--fusion-weight",
        type=float,
        metavar="W",
        help="hybrid: weight of the semantic ranking, 0-1 (default: search.fusion_weight)",
    )
    s.add_argument(
        "--rank-constant",
        type=int,
        metavar="K",
        help="hybrid: the fusion's rank constant, each ranking giving w / (K + rank) (default: search.rank_constant)",
    )
    s.add_argument(
        "--rerank",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="rerank the best passages (default: the store's template, else setting search.rerank)",
    )
    s.add_argument(
        "--answers",
        action="store_true",
        help="also check the answers: ask each question with an expected answer (the set's 'expected'"
        " column) in a chat over the store, and check that the answer holds it and cites a relevant"
        " passage; kept with the run that searched as the chat does",
    )
    s.add_argument(
        "--llm",
        metavar="CONFIG",
        help="the chat model config that answers (implies --answers; default: offline, the offline assistant)",
    )
    s.add_argument(
        "--min-answers",
        type=float,
        metavar="X",
        help="exit 1 when the share of answers holding the expected answer is below X (implies --answers)",
    )
    s.add_argument(
        "--min-mrr",
        type=float,
        metavar="X",
        help="exit 1 when the MRR@k of any mode evaluated is below X (for CI pipelines)",
    )
    s.add_argument(
        "--questions",
        dest="show_questions",
        action="store_true",
        help="also print each question's first relevant rank and its top files",
    )
    s.add_argument("--no-save", action="store_true", help="do not keep the run in the catalog")
    s.add_argument("--json", action="store_true", help="print the runs as JSON")
    s.set_defaults(func=cmd_eval, chats=True)


def cmd_eval(wb: Workbench, args: argparse.Namespace, chat: ChatService) -> int:
    qset = wb.evaluations.load_question_set(args.questions)
    modes = list(
        dict.fromkeys(m for m in (args.mode or [wb.settings.search.mode]) for m in (ev.MODES if m == "all" else [m]))
    )
    answers = args.answers or args.llm is not None or args.min_answers is not None
    runs = [
        wb.evaluations.evaluate(
            args.store,
            qset,
            mode,
            args.k,
            fusion_weight=args.fusion_weight,
            rerank=args.rerank,
            rank_constant=args.rank_constant,
        )
        for mode in modes
    ]
    check: ev.AnswerCheck | None = None
    kept: ev.EvalRun | None = None
    try:
        if answers:
            check = check_answers(chat, args.store, qset, args.llm)
            target = run_as_the_chat_searches(wb, runs)
            if target is not None:
                kept = ev.with_answers(target, check)
                runs = [kept if r is target else r for r in runs]
    finally:  # the retrieval runs are kept even when the answer check fails
        if not args.no_save:
            for r in runs:
                wb.evaluations.save_run(r)
    if args.json:
        data: object = [_run_data(r, ev.metric_names(args.k)) for r in runs]
        if check is not None:  # with --answers: an object of the runs and the answer check
            data = {"runs": data, "answers": _answers_data(check, kept)}
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        _print_runs(args, qset, runs)
        if check is not None:
            _print_answers(wb, check, kept, saved=not args.no_save)
    failed = 0
    if check is not None and args.min_answers is not None and check.answer_holding < args.min_answers:
        print(
            f"{check.answer_holding:.3f} of the answers hold the expected answer, below --min-answers {args.min_answers}",
            file=sys.stderr,
        )
        failed = 1
    if args.min_mrr is not None:
        low = [r for r in runs if r.mrr < args.min_mrr]
        for r in low:
            print(f"MRR@{r.k} of {ranking_label(r.mode)} is {r.mrr:.3f}, below --min-mrr {args.min_mrr}", file=sys.stderr)
        if low:
            return 1
    return failed


def _answers_data(check: ev.AnswerCheck, kept: ev.EvalRun | None) -> dict:
    return {
        "store": check.store,
        "config": check.config,
        "run": kept.id if kept is not None else None,
        "questions_checked": len(check.results),
        "metrics": check.metrics(),
        "seconds": round(check.seconds, 3),
        "questions": [r.data() for r in check.results],
    }


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _print_answers(wb: Workbench, check: ev.AnswerCheck, kept: ev.EvalRun | None, saved: bool) -> None:
    """The answer check's shares and a row per question checked."""
    n = len(check.results)
    print(
        f"\nanswers ({check.config}, {n} question{'' if n == 1 else 's'} with an expected answer,"
        f" {check.seconds:.1f} s): " + " · ".join(f"{k} {v:.3f}" for k, v in check.metrics().items())
    )
    print(
        table(
            [
                [
                    _yes(r.answer_holds),
                    _yes(r.sentence_holds),
                    _yes(r.cited_relevant),
                    r.question[:50],
                    r.sentence[:70],
                    r.cited or "-",
                    f"{r.seconds:.1f}",
                ]
                for r in check.results
            ],
            ["holds", "sentence holds", "cites relevant", "question", "first sentence", "cited", "s"],
        )
    )
    if kept is not None:
        if saved:
            print(f"kept with the {ranking_label(kept.mode)} run {kept.id}")
    else:
        print(
            f"not kept with a run: none searched as the chat does ({ranking_label(wb.settings.search.mode)},"
            " the settings' fusion weight, rank constant and candidates, the store's reranking)",
            file=sys.stderr,
        )


def _run_data(r: ev.EvalRun, names: Sequence[str]) -> dict:
    return {
        "id": r.id,
        "set": r.set_name,
        "store": r.store,
        "mode": r.mode,
        "k": r.k,
        "template": r.template,
        "model": r.embedding_model,
        "chunking": r.chunking,
        "search": r.search,
        "metrics": {m: round(r.metrics[m], 6) for m in (*names, *ev.ANSWER_METRICS) if m in r.metrics},
        "latency_ms": {a: round(b, 2) for a, b in r.latency_ms.items()},
        "started": r.started.isoformat(timespec="seconds"),
        "questions": [
            {
                "question": q.question,
                "relevant": q.relevant,
                "first_rank": q.first_rank,
                "latency_ms": round(q.latency_ms, 2),
                "files": [h.file_name for h in q.hits],
            }
            for q in r.questions
        ],
    }


def _print_runs(args: argparse.Namespace, qset: ev.QuestionSet, runs: Sequence[ev.EvalRun]) -> None:
    """The runs as a table of metrics, one row per mode; with --questions, each question's rank."""
    names = ev.metric_names(args.k)
    first = runs[0]
    chunk = f", chunks {first.chunking['size']}/{first.chunking['overlap']}" if first.chunking else ""
    print(
        f"{args.store}: {len(qset.questions)} questions of {qset.name!r}, template {first.template}"
        f" ({first.embedding_model}{chunk})\n"
    )
    print(
        table(
            [
                [ranking_label(r.mode)]
                + [f"{r.metrics[m]:.3f}" for m in names]
                + [f"{r.latency_ms['mean']:.0f}", f"{r.latency_ms['p95']:.0f}"]
                for r in runs
            ],
            ["ranking", *names, "ms/question", "p95 ms"],
        )
    )
    if args.show_questions:
        for r in runs:
            print(f"\n{ranking_label(r.mode)}:")
            print(
                table(
                    [
                        [
                            q.first_rank or "-",
                            q.question[:70],
                            ", ".join(dict.fromkeys(str(h.file_name) for h in q.hits[:3]))[:80],
                        ]
                        for q in r.questions
                    ],
                    ["rank", "question", "top files"],
                )
            )
