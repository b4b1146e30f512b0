"""Runs: a store searched once per question of a set (:func:`evaluate`, the same search as the CLI's
``search``), each ranking scored with :mod:`~knowledge.evaluation.metrics`, and runs compared
(:func:`worse_questions`, :func:`metric_changes`, :func:`best_by_mrr`). A run records the store's
template, model and chunking, the mode and the search settings, so runs compare over time, and may
include an answer check (:func:`with_answers`); it is not saved here
(:meth:`Evaluations.save_run <knowledge.evaluation.face.Evaluations.save_run>`).
"""

from __future__ import annotations

import copy
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.evaluation.answers import ANSWER_METRICS, AnswerCheck, AnswerResult
from knowledge.evaluation.metrics import RECALL_AT, metric_names, ndcg_at, recall_at, reciprocal_rank
from knowledge.evaluation.questions import QuestionSet
from knowledge.service.search import Searcher, SearchRequest
from knowledge.service.stores import Stores
from knowledge.vectorstore.store import Hit
from knowledge.vocabulary import ranking_label, search_mode

MODES: tuple[str, ...] = ("hybrid", "vector", "lexical")
#: The key of a run's ``search`` naming the chat model config of its answer check (:func:`with_answers`).
ANSWER_LLM = "answer_llm"


class RunNotFound(KnowledgeError, LookupError):
    """No evaluation run has the given id."""


@dataclass(frozen=True, slots=True)
class RankedHit:
    """One hit of a question's ranking: file, page, whether it is relevant, and its score."""

    file_name: str | None
    page: int | None
    relevant: bool
    score: float
    heading: str | None = None


@dataclass(frozen=True, slots=True)
class QuestionResult:
    """A question's outcome in a run: the first relevant rank (``None``: not in the top k), its
    metrics, the search latency in ms, the ranked hits, and -- in a run that includes the answer
    check (:func:`with_answers`) -- its ``answer``'s check (``None``: not checked)."""

    question: str
    relevant: str
    first_rank: int | None
    metrics: dict[str, float]
    latency_ms: float
    hits: tuple[RankedHit, ...] = ()
    answer: AnswerResult | None = None


@dataclass(frozen=True, slots=True)
class EvalRun:
    """One store and mode evaluated on a question set: ``metrics`` are means over the questions
    (names from :func:`metric_names`), ``latency_ms`` the mean and p95 per question."""

    id: str
    set_name: str
    set_sha256: str
    store: str
    mode: str
    k: int
    template: str | None
    embedding_model: str | None
    chunking: dict[str, Any] | None
    search: dict[str, Any]
    metrics: dict[str, float]
    questions: tuple[QuestionResult, ...]
    started: datetime
    seconds: float

    @property
    def mrr(self) -> float:
        return self.metrics[f"MRR@{self.k}"]

    @property
    def answer_check(self) -> AnswerCheck | None:
        """The answer check this run includes (:func:`with_answers`), or ``None``."""
        if ANSWER_LLM not in self.search:
            return None
        return AnswerCheck(
            self.store, str(self.search[ANSWER_LLM]), tuple(q.answer for q in self.questions if q.answer is not None)
        )

    @property
    def latency_ms(self) -> dict[str, float]:
        lat = sorted(q.latency_ms for q in self.questions)
        if not lat:
            return {"mean": 0.0, "p95": 0.0}
        return {"mean": sum(lat) / len(lat), "p95": lat[min(len(lat) - 1, math.ceil(0.95 * len(lat)) - 1)]}

    def label(self) -> str:
        chunk = f" {self.chunking['size']}/{self.chunking['overlap']}" if self.chunking else ""
        w = f" w={self.search.get('fusion_weight')}" if self.mode == "hybrid" else ""
        return f"{self.store} · {ranking_label(self.mode)}{w}{chunk} · {self.started:%Y-%m-%d %H:%M}"


def _order_key(hit: Hit, mode: str) -> tuple:
    if mode == "hybrid":
        return (hit.fused_score, hit.score)
    if mode == "lexical":
        return (hit.lexical_score,)
    return (hit.score,)


def tuned(
    searcher: Searcher,
    *,
    fusion_weight: float | None = None,
    candidates: int | None = None,
    rank_constant: int | None = None,
) -> Searcher:
    """``searcher`` with another fusion weight, candidates count or rank constant, without changing
    its settings (which other sessions share): a shallow copy that shares the stores, embedders and
    BM25 indexes. Raises ``InvalidArgument`` for a weight outside [0, 1] or a count or constant below 1."""
    if fusion_weight is None and candidates is None and rank_constant is None:
        return searcher
    updates: dict[str, Any] = {}
    if fusion_weight is not None:
        if not 0.0 <= float(fusion_weight) <= 1.0:
            raise InvalidArgument(f"The fusion weight is between 0 and 1, got {fusion_weight}.")
        updates["fusion_weight"] = float(fusion_weight)
    if candidates is not None:
        if isinstance(candidates, bool) or int(candidates) < 1:
            raise InvalidArgument(f"The candidates count is at least 1, got {candidates}.")
        updates["candidates"] = int(candidates)
    if rank_constant is not None:
        if isinstance(rank_constant, bool) or int(rank_constant) < 1:
            raise InvalidArgument(f"The rank constant is at least 1, got {rank_constant}.")
        updates["rank_constant"] = int(rank_constant)
    view = copy.copy(searcher)
    view.settings = searcher.settings.model_copy(update={"search": searcher.settings.search.model_copy(update=updates)})
    return view


def evaluate(
    stores: Stores,
    searcher: Searcher,
    store: str,
    qset: QuestionSet,
    mode: str | None = None,
    k: int = 10,
    *,
    fusion_weight: float | None = None,
    candidates: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    rerank: bool | None = None,
    rank_constant: int | None = None,
    where: Mapping[str, Any] | None = None,
) -> EvalRun:
    """Search ``store`` with every question of ``qset`` (``k`` hits, ``mode`` default
    ``search.mode``; ``rerank`` default the store's, see :meth:`Searcher.search`; ``where`` a payload
    filter every search keeps to -- the workbench's filter of what the evaluating person may read)
    and score the rankings. Not saved: see
    :meth:`Evaluations.save_run <knowledge.evaluation.face.Evaluations.save_run>`.

    Raises:
        StoreNotFound; InvalidArgument (``k`` below 1, an unknown mode, a weight outside [0, 1], a rank
        constant below 1);
        EmbeddingUnavailable.
    """
    mode = search_mode(mode or searcher.settings.search.mode)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
    record = stores.get(store)
    view = tuned(searcher, fusion_weight=fusion_weight, candidates=candidates, rank_constant=rank_constant)
    chunking = None
    try:
        tpl = stores.template_of(record)
        chunking = {"size": tpl.max_chunk_size_tokens, "overlap": tpl.chunk_overlap_tokens}
    except KnowledgeError:  # the template was deleted since; the run still counts
        pass
    stores.embedder(record.embedding_model)  # load the model before the clock starts
    started, t0 = datetime.now(UTC), time.perf_counter()
    results = []
    for i, q in enumerate(qset.questions):
        t = time.perf_counter()
        hits = view.search(store, SearchRequest(q.text, k, where=where, mode=mode, rerank=rerank)).hits
        latency = (time.perf_counter() - t) * 1000
        flags = [q.is_relevant(h) for h in hits]
        keys = [_order_key(h, mode) for h in hits]
        metrics = {f"recall@{n}": recall_at(flags, n, keys) for n in RECALL_AT if n <= k}
        metrics[f"MRR@{k}"] = reciprocal_rank(flags, k, keys)
        metrics[f"nDCG@{k}"] = ndcg_at(flags, k, keys)
        first = next((r for r, f in enumerate(flags, 1) if f), None)
        results.append(
            QuestionResult(
                q.text,
                q.relevant_label(),
                first,
                metrics,
                latency,
                tuple(RankedHit(h.file_name, h.page, f, float(h.score), h.heading) for h, f in zip(hits, flags)),
            )
        )
        if progress:
            progress(i + 1, len(qset.questions))
    names = metric_names(k)
    means = {m: sum(r.metrics[m] for r in results) / max(1, len(results)) for m in names}
    reranked, n_rerank = view.rerank_of(record, rerank)
    search = {
        "fusion_weight": view.settings.search.fusion_weight,
        "candidates": view.settings.search.candidates,
        "rank_constant": view.settings.search.rank_constant,
        "rerank": n_rerank if reranked else 0,
    }
    return EvalRun(
        uuid.uuid4().hex[:12],
        qset.name,
        qset.sha256,
        store,
        mode,
        k,
        record.template,
        record.embedding_model,
        chunking,
        search,
        means,
        tuple(results),
        started,
        time.perf_counter() - t0,
    )


def with_answers(run: EvalRun, check: AnswerCheck) -> EvalRun:
    """``run`` including the answer ``check`` (of the same store, on the same set): its shares join
    the run's metrics (:data:`~knowledge.evaluation.answers.ANSWER_METRICS`), each checked
    question's result joins that question's, and the chat model config is recorded in ``search``
    (``answer_llm``). Pure; the run is saved as any other.

    Raises:
        InvalidArgument: the check is of another store, or checked a question the run does not have.
    """
    if check.store != run.store:
        raise InvalidArgument(f"The answer check is of store {check.store!r}, the run of {run.store!r}.")
    by_question = {r.question: r for r in check.results}
    missing = set(by_question) - {q.question for q in run.questions}
    if missing:
        raise InvalidArgument(f"The answer check has questions the run does not: {', '.join(sorted(missing))}.")
    metrics = {m: v for m, v in run.metrics.items() if m not in ANSWER_METRICS}
    return replace(
        run,
        metrics={**metrics, **check.metrics()},
        questions=tuple(replace(q, answer=by_question.get(q.question)) for q in run.questions),
        search={**run.search, ANSWER_LLM: check.config},
    )


def worse_questions(before: EvalRun, after: EvalRun) -> list[dict[str, Any]]:
    """The questions of both runs, those that got worse from ``before`` to ``after`` first (most
    reciprocal rank lost first), then unchanged, then better: ``{question, before, after, change}``
    with the first relevant ranks (``None``: not in the top k) and the change of RR@k."""
    old = {q.question: q for q in before.questions}
    rows: list[dict[str, Any]] = []
    changes: dict[int, float] = {}  # id(row) -> its change of RR@k
    for q in after.questions:
        if q.question not in old:
            continue
        b, a = old[q.question], q
        rr_b, rr_a = b.metrics[f"MRR@{before.k}"], a.metrics[f"MRR@{after.k}"]
        row = {"question": q.question, "before": b.first_rank, "after": a.first_rank, "change": rr_a - rr_b}
        rows.append(row)
        changes[id(row)] = rr_a - rr_b
    order = {id(r): i for i, r in enumerate(rows)}

    def key(r: dict[str, Any]) -> tuple[int, float, int]:
        c = changes[id(r)]
        return (0 if c < 0 else 1 if c == 0 else 2, c if c < 0 else -c, order[id(r)])

    rows.sort(key=key)
    return rows


def metric_changes(before: EvalRun, after: EvalRun) -> dict[str, float]:
    """``after``'s metrics minus ``before``'s, for the metrics both runs have (``after``'s order);
    positive is better (every metric here is higher-is-better)."""
    return {m: v - before.metrics[m] for m, v in after.metrics.items() if m in before.metrics}


def best_by_mrr(runs: Sequence[EvalRun]) -> EvalRun:
    """The run with the highest MRR, ties broken by recall@5 (the first run of a tie wins).
    Raises ``InvalidArgument`` for no runs."""
    if not runs:
        raise InvalidArgument("No runs to choose from.")
    return max(runs, key=lambda r: (r.mrr, r.metrics.get("recall@5", 0)))


__all__ = [
    "ANSWER_LLM",
    "MODES",
    "EvalRun",
    "QuestionResult",
    "RankedHit",
    "RunNotFound",
    "best_by_mrr",
    "evaluate",
    "metric_changes",
    "tuned",
    "with_answers",
    "worse_questions",
]
