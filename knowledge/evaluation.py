"""Retrieval evaluation: question sets with what counts as relevant, runs of a store on a set, and
the metrics that say whether a change (chunking, model, hybrid or vector, fusion weight) made
search better.

**A question set** is a named list of questions, each with the places that answer it -- any one of
them is enough ("any of" relevance):

* a file: any chunk of ``ch09-01-unrecoverable-errors-with-panic.md``;
* a file and page: ``report.pdf#page=3`` (a chunk of that file on page 3);
* a text snippet: ``text:cannot borrow`` (a chunk whose text contains it; case and runs of
  whitespace ignored).

Files come in as TSV or CSV (``question<TAB>relevant``, alternatives separated by ``;``, an optional
``question / relevant`` header row) or JSONL (``{"question": ..., "relevant": [...]}``, each
alternative a string as above or ``{"file": ..., "page": ...}`` / ``{"text": ...}``), are kept in the
catalog (table ``eval_sets``) and exported in the format they came in.

**A run** searches a store once per question (``Workbench.search(store, question, k, mode=...)``,
the same call as ``python -m knowledge search``) and scores the ranked chunks. Per question:

* ``first_rank``: the rank (1-based) of the first relevant hit in the top ``k``, ``None`` when none;
* ``recall@n`` (n = 1, 3, 5, 10): 1 when a relevant hit is in the top n, else 0 -- with "any of"
  relevance a question has one answer, so recall@n is the share of questions answered in the top n
  (also called success@n or hit rate);
* ``MRR@k``: 1 / first_rank, 0 when no relevant hit is in the top k (Voorhees, TREC-8 QA track, 1999);
* ``nDCG@k``: binary gains, the first relevant hit per question counting (one answer needed), so
  the ideal DCG is 1 and nDCG@k = 1 / log2(1 + first_rank) (Järvelin & Kekäläinen, 2002).

Ties: hits with equal ranking scores have no order of their own. The metric functions take the
scores and average over every order of a tied group, as McSherry & Najork, "Computing Information
Retrieval Performance Measures Efficiently in the Presence of Tied Scores" (ECIR 2008) propose; a
run passes the key the mode sorts by (hybrid: fused score, then vector score; vector: the score;
words only: BM25), so ties almost never occur in practice and ``first_rank`` is the rank shown.

Runs are kept in the catalog (``eval_runs``) with the store's template, model, chunking, the mode,
the search settings and the time, so runs can be compared over time (:func:`worse_questions`).
"""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any

from knowledge.catalog import Catalog
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.ingest.chunker import plan_chunking
from knowledge.ingest.document import Document, Section
from knowledge.service.indexing import Indexer
from knowledge.service.search import Searcher
from knowledge.service.stores import Stores
from knowledge.service.templates import VectorStoreTemplate, make_template
from knowledge.vectorstore.store import Hit

#: The cut-offs of recall@n that a run reports (those <= k).
RECALL_AT: tuple[int, ...] = (1, 3, 5, 10)
FORMATS: tuple[str, ...] = ("tsv", "csv", "jsonl")
MODES: tuple[str, ...] = ("hybrid", "vector", "lexical")
MAX_QUESTIONS = 5000
_PAGE = re.compile(r"^(?P<file>.+?)#(?:page=|p)(?P<page>\d+)$", re.IGNORECASE)


class QuestionSetNotFound(KnowledgeError, LookupError):
    """No question set has the given name."""


class RunNotFound(KnowledgeError, LookupError):
    """No evaluation run has the given id."""


# -- relevance -------------------------------------------------------------------------------------
def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True, slots=True)
class Criterion:
    """One place that answers a question: a ``file`` (by name), optionally on a ``page`` (1-based),
    or a ``text`` snippet a relevant chunk contains (case and whitespace runs ignored)."""

    file: str | None = None
    page: int | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if (self.file is None) == (self.text is None):
            raise InvalidArgument("A relevance criterion is a file (optionally with a page) or a text snippet.")
        if self.page is not None and (isinstance(self.page, bool) or not isinstance(self.page, int) or self.page < 1):
            raise InvalidArgument(f"A page is a number from 1, got {self.page!r}.")
        if self.file is not None and not self.file.strip():
            raise InvalidArgument("A file name is empty.")
        if self.text is not None and not self.text.strip():
            raise InvalidArgument("A text snippet is empty.")

    def matches(self, hit: Hit) -> bool:
        """Whether ``hit`` (a chunk) satisfies this criterion."""
        if self.text is not None:
            return _fold(self.text) in _fold(hit.text)
        if hit.file_name != self.file and PurePath(hit.file_name or "").name != self.file:
            return False
        return self.page is None or hit.page == self.page

    def label(self) -> str:
        """The criterion as written in a TSV cell: ``a.md``, ``a.pdf#page=3``, ``text:...``."""
        if self.text is not None:
            return f"text:{self.text}"
        file = self.file or ""
        return file if self.page is None else f"{file}#page={self.page}"

    def data(self) -> dict[str, Any]:
        return {k: v for k, v in (("file", self.file), ("page", self.page), ("text", self.text)) if v is not None}


def parse_criterion(item: str | dict) -> Criterion:
    """A criterion from its cell form (``a.md``, ``a.pdf#page=3``, ``text:snippet``) or its JSON form
    (``{"file": "a.pdf", "page": 3}``, ``{"text": "..."}``). Raises ``InvalidArgument``."""
    if isinstance(item, dict):
        unknown = set(item) - {"file", "page", "text"}
        if unknown:
            raise InvalidArgument(f"Unknown relevance field(s) {', '.join(sorted(unknown))}; use file, page, text.")
        page = item.get("page")
        if isinstance(page, str) and page.strip().isdigit():
            page = int(page)
        return Criterion(item.get("file"), page, item.get("text"))
    if not isinstance(item, str):
        raise InvalidArgument(f"A relevance entry is text or an object, got {item!r}.")
    item = item.strip()
    if item.lower().startswith("text:"):
        return Criterion(text=item[5:].strip())
    m = _PAGE.match(item)
    if m:
        return Criterion(m["file"].strip(), int(m["page"]))
    return Criterion(item)


def parse_relevant(cell: str | Sequence[Any]) -> list[Criterion]:
    """The alternatives of one question: a ``;``-separated cell, or a JSON list. Raises
    ``InvalidArgument`` when there are none."""
    items = [p for p in cell.split(";") if p.strip()] if isinstance(cell, str) else list(cell)
    crits = [parse_criterion(i) for i in items]
    if not crits:
        raise InvalidArgument("no relevant file, page or text given")
    return list(dict.fromkeys(crits))


@dataclass(frozen=True, slots=True)
class Question:
    """A question and the places that answer it (any one is enough)."""

    text: str
    relevant: tuple[Criterion, ...]

    def relevant_label(self) -> str:
        return "; ".join(c.label() for c in self.relevant)

    def is_relevant(self, hit: Hit) -> bool:
        return any(c.matches(hit) for c in self.relevant)


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """A named question set and the file format it came in (``tsv``, ``csv`` or ``jsonl``)."""

    name: str
    questions: tuple[Question, ...]
    format: str = "tsv"
    created: datetime | None = None
    updated: datetime | None = None

    @property
    def sha256(self) -> str:
        """A hash of the questions and their relevance: runs on the same content share it."""
        data = [[q.text, [c.data() for c in q.relevant]] for q in self.questions]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _question(text: Any, relevant: Any, where: str) -> Question:
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"{where}: the question is empty")
    try:
        return Question(" ".join(text.split()), tuple(parse_relevant(relevant if relevant is not None else "")))
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None


def _is_header(row: Sequence[str]) -> bool:
    return len(row) >= 2 and row[0].strip().lower() in ("question", "query") and \
        row[1].strip().lower() in ("relevant", "answer", "answers", "files", "file")


def parse_questions(data: bytes | str, file_name: str = "questions.tsv") -> tuple[str, list[Question]]:
    """Parse a question file: ``(format, questions)``. The format comes from the name's extension
    (``.tsv``/``.txt`` tab-separated, ``.csv``, ``.jsonl``/``.json``), else from the content.

    Raises:
        InvalidArgument: not UTF-8, no questions, or bad lines -- the message names each bad line
            (the first 10) and nothing is kept.
    """
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidArgument(f"{file_name} is not UTF-8 text.") from None
    else:
        text = data.removeprefix("\ufeff")
    ext = PurePath(file_name).suffix.lower()
    fmt = {".tsv": "tsv", ".txt": "tsv", ".tab": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl",
           ".ndjson": "jsonl"}.get(ext)
    if fmt is None:
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        fmt = "jsonl" if first.lstrip().startswith("{") else "tsv" if "\t" in first else "csv"
    questions: list[Question] = []
    errors: list[str] = []
    if fmt == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise InvalidArgument(f"line {n}: expected an object {{\"question\": ..., \"relevant\": ...}}")
                questions.append(_question(obj.get("question"), obj.get("relevant"), f"line {n}"))
            except json.JSONDecodeError as exc:
                errors.append(f"line {n}: not JSON ({exc.msg})")
            except InvalidArgument as exc:
                errors.append(str(exc))
    else:
        reader = csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ",")
        for i, row in enumerate(reader):
            n = reader.line_num
            if not any(c.strip() for c in row) or (i == 0 and _is_header(row)):
                continue
            if len(row) < 2:
                sep = "a tab" if fmt == "tsv" else "a comma"
                errors.append(f"line {n}: expected question{' <TAB> ' if fmt == 'tsv' else ', '}relevant"
                              f" ({sep} between them)")
                continue
            try:
                questions.append(_question(row[0], ";".join(c for c in row[1:] if c.strip()), f"line {n}"))
            except InvalidArgument as exc:
                errors.append(str(exc))
    if errors:
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise InvalidArgument(f"{file_name}: " + "; ".join(errors[:10]) + more + ". Nothing was kept.")
    if not questions:
        raise InvalidArgument(f"{file_name} has no questions: one per line, question<TAB>relevant.")
    if len(questions) > MAX_QUESTIONS:
        raise InvalidArgument(f"{file_name} has {len(questions)} questions; at most {MAX_QUESTIONS}.")
    return fmt, questions


def export_questions(qset: QuestionSet, fmt: str | None = None) -> tuple[bytes, str, str]:
    """The set as a file in its format (or ``fmt``): ``(bytes, file name, media type)``. Parsing the
    bytes with :func:`parse_questions` gives the same questions back."""
    fmt = fmt or qset.format
    if fmt == "jsonl":
        lines = [json.dumps({"question": q.text, "relevant": [c.label() if c.text is None else c.data()
                                                             for c in q.relevant]}, ensure_ascii=False)
                 for q in qset.questions]
        return ("\n".join(lines) + "\n").encode(), f"{qset.name}.jsonl", "application/jsonl"
    if fmt not in ("tsv", "csv"):
        raise InvalidArgument(f"Unknown format {fmt!r}; use tsv, csv or jsonl.")
    if any(c.text is not None and ";" in c.text for q in qset.questions for c in q.relevant):
        raise InvalidArgument("A text snippet holds ';', which separates alternatives in TSV and CSV: export as JSONL.")
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    writer.writerow(["question", "relevant"])
    for q in qset.questions:
        writer.writerow([q.text, q.relevant_label()])
    return out.getvalue().encode(), f"{qset.name}.{fmt}", "text/tab-separated-values" if fmt == "tsv" else "text/csv"


def questions_from_rows(rows: Iterable[dict[str, Any]]) -> list[Question]:
    """Questions from table rows ``{"question": ..., "relevant": "a.md; b.md"}`` (the app's editor);
    blank rows are skipped. Raises ``InvalidArgument`` naming each bad row (1-based)."""
    out, errors = [], []
    for n, row in enumerate(rows, 1):
        text, rel = row.get("question"), row.get("relevant")
        if not (isinstance(text, str) and text.strip()) and not (isinstance(rel, str) and rel.strip()):
            continue
        try:
            out.append(_question(text, rel if isinstance(rel, str) else "", f"row {n}"))
        except InvalidArgument as exc:
            errors.append(str(exc))
    if errors:
        raise InvalidArgument("; ".join(errors[:10]) + ". Nothing was saved.")
    if not out:
        raise InvalidArgument("The set has no questions.")
    return out


# -- metrics ---------------------------------------------------------------------------------------
def first_rank_distribution(relevant: Sequence[bool], scores: Sequence[Any] | None = None
                            ) -> list[tuple[int, float]]:
    """Where the first relevant item lands: ``[(rank, probability)]`` (ranks 1-based).

    ``relevant``: one flag per ranked item, best first. ``scores``: the ranking key per item (equal
    keys are tied); without it the order is taken as given. Tied items are taken in every order with
    equal probability (McSherry & Najork, ECIR 2008): in a tied group of ``n`` items starting at rank
    ``s`` holding ``r`` relevant ones, the first relevant one is at ``s + j`` with probability
    ``C(n - 1 - j, r - 1) / C(n, r)``. ``[]`` when no item is relevant.
    """
    if scores is not None and len(scores) != len(relevant):
        raise ValueError(f"{len(relevant)} relevance flags but {len(scores)} scores")
    n_items = len(relevant)
    start = 0
    while start < n_items:
        end = start + 1
        while scores is not None and end < n_items and scores[end] == scores[start]:
            end += 1
        r = sum(1 for x in relevant[start:end] if x)
        if r:
            n = end - start
            if scores is None:
                return [(start + 1, 1.0)]
            total = math.comb(n, r)
            return [(start + 1 + j, math.comb(n - 1 - j, r - 1) / total) for j in range(n - r + 1)]
        start = end
    return []


def reciprocal_rank(relevant: Sequence[bool], k: int = 10, scores: Sequence[Any] | None = None) -> float:
    """RR@k: 1 / the rank of the first relevant item in the top ``k``, 0 when none (expected value
    over the orders of tied items). In [0, 1], higher is better."""
    return sum(p / rank for rank, p in first_rank_distribution(relevant, scores) if rank <= k)


def recall_at(relevant: Sequence[bool], n: int, scores: Sequence[Any] | None = None) -> float:
    """recall@n with "any of" relevance: the probability that a relevant item is in the top ``n``
    (1 or 0 without ties). In [0, 1], higher is better."""
    return sum(p for rank, p in first_rank_distribution(relevant, scores) if rank <= n)


def ndcg_at(relevant: Sequence[bool], k: int = 10, scores: Sequence[Any] | None = None) -> float:
    """nDCG@k with binary gains where the first relevant item answers the question (ideal DCG = 1):
    ``1 / log2(1 + first rank)`` when it is in the top ``k``, else 0. In [0, 1], higher is better."""
    return sum(p / math.log2(1 + rank) for rank, p in first_rank_distribution(relevant, scores) if rank <= k)


def metric_names(k: int) -> list[str]:
    """The metric columns of a run at depth ``k``: ``recall@1 ... recall@k, MRR@k, nDCG@k``."""
    return [f"recall@{n}" for n in RECALL_AT if n <= k] + [f"MRR@{k}", f"nDCG@{k}"]


# -- runs ------------------------------------------------------------------------------------------
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
    metrics, the search latency in ms, and the ranked hits."""

    question: str
    relevant: str
    first_rank: int | None
    metrics: dict[str, float]
    latency_ms: float
    hits: tuple[RankedHit, ...] = ()


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
    def latency_ms(self) -> dict[str, float]:
        lat = sorted(q.latency_ms for q in self.questions)
        if not lat:
            return {"mean": 0.0, "p95": 0.0}
        return {"mean": sum(lat) / len(lat), "p95": lat[min(len(lat) - 1, math.ceil(0.95 * len(lat)) - 1)]}

    def label(self) -> str:
        chunk = f" {self.chunking['size']}/{self.chunking['overlap']}" if self.chunking else ""
        w = f" w={self.search.get('fusion_weight')}" if self.mode == "hybrid" else ""
        return f"{self.store} · {self.mode}{w}{chunk} · {self.started:%Y-%m-%d %H:%M}"


def _order_key(hit: Hit, mode: str) -> tuple:
    if mode == "hybrid":
        return (hit.fused_score, hit.score)
    if mode == "lexical":
        return (hit.lexical_score,)
    return (hit.score,)


def tuned(searcher: Searcher, *, fusion_weight: float | None = None, candidates: int | None = None) -> Searcher:
    """``searcher`` with another fusion weight or candidates count, without changing its settings
    (which other sessions share): a shallow copy that shares the stores, embedders and BM25
    indexes. Raises ``InvalidArgument`` for a weight outside [0, 1] or a count below 1."""
    if fusion_weight is None and candidates is None:
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
    view = copy.copy(searcher)
    view.settings = searcher.settings.model_copy(
        update={"search": searcher.settings.search.model_copy(update=updates)})
    return view


def evaluate(stores: Stores, searcher: Searcher, store: str, qset: QuestionSet, mode: str | None = None, k: int = 10, *,
             fusion_weight: float | None = None, candidates: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> EvalRun:
    """Search ``store`` with every question of ``qset`` (``k`` hits, ``mode`` default
    ``search.mode``) and score the rankings. Not saved: see :func:`save_run`.

    Raises:
        StoreNotFound; InvalidArgument (``k`` below 1, an unknown mode, a weight outside [0, 1]);
        EmbeddingUnavailable.
    """
    mode = mode or searcher.settings.search.mode
    if mode not in MODES:
        raise InvalidArgument(f"Unknown search mode {mode!r}; use one of {', '.join(MODES)}.")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
    record = stores.get(store)
    view = tuned(searcher, fusion_weight=fusion_weight, candidates=candidates)
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
        hits = view.search(store, q.text, k=k, mode=mode).hits  # type: ignore[arg-type]
        latency = (time.perf_counter() - t) * 1000
        flags = [q.is_relevant(h) for h in hits]
        keys = [_order_key(h, mode) for h in hits]
        metrics = {f"recall@{n}": recall_at(flags, n, keys) for n in RECALL_AT if n <= k}
        metrics[f"MRR@{k}"] = reciprocal_rank(flags, k, keys)
        metrics[f"nDCG@{k}"] = ndcg_at(flags, k, keys)
        first = next((r for r, f in enumerate(flags, 1) if f), None)
        results.append(QuestionResult(
            q.text, q.relevant_label(), first, metrics, latency,
            tuple(RankedHit(h.file_name, h.page, f, float(h.score), h.heading) for h, f in zip(hits, flags))))
        if progress:
            progress(i + 1, len(qset.questions))
    names = metric_names(k)
    means = {m: sum(r.metrics[m] for r in results) / max(1, len(results)) for m in names}
    search = {"fusion_weight": view.settings.search.fusion_weight, "candidates": view.settings.search.candidates}
    return EvalRun(uuid.uuid4().hex[:12], qset.name, qset.sha256, store, mode, k, record.template,
                   record.embedding_model, chunking, search, means, tuple(results), started,
                   time.perf_counter() - t0)


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


# -- the catalog -----------------------------------------------------------------------------------
class Evaluations:
    """Question sets and runs in the catalog (tables ``eval_sets`` and ``eval_runs``)."""

    def __init__(self, catalog: Catalog, stores: Stores, searcher: Searcher, indexer: Indexer,
                 save_template: Callable[[VectorStoreTemplate], VectorStoreTemplate]) -> None:
        self.catalog, self.stores, self.searcher, self.indexer = catalog, stores, searcher, indexer
        self.save_template = save_template

    # evaluating
    def evaluate(self, store: str, qset: QuestionSet, mode: str | None = None, k: int = 10, *,
                 fusion_weight: float | None = None, candidates: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> EvalRun:
        """See :func:`evaluate`."""
        return evaluate(self.stores, self.searcher, store, qset, mode, k, fusion_weight=fusion_weight,
                        candidates=candidates, progress=progress)

    def tuned(self, *, fusion_weight: float | None = None, candidates: int | None = None) -> Searcher:
        """See :func:`tuned`."""
        return tuned(self.searcher, fusion_weight=fusion_weight, candidates=candidates)

    def sweep_fusion_weight(self, store: str, qset: QuestionSet,
                            weights: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0), k: int = 10,
                            candidates: int | None = None) -> list[EvalRun]:
        """See :func:`sweep_fusion_weight`."""
        return sweep_fusion_weight(self.stores, self.searcher, store, qset, weights, k, candidates)

    def try_chunkings(self, store: str, qset: QuestionSet, chunkings: Sequence[tuple[int, int]],
                      modes: Sequence[str] = ("hybrid",), k: int = 10,
                      progress: Callable[[str, float], None] | None = None) -> list[ChunkTrial]:
        """See :func:`try_chunkings`."""
        return try_chunkings(self.stores, self.indexer, self.searcher, store, qset, chunkings, modes, k, progress)

    def keep_as_template(self, store: str, size: int, overlap: int, name: str | None = None) -> VectorStoreTemplate:
        """See :func:`keep_as_template`."""
        return keep_as_template(self.stores, self.save_template, store, size, overlap, name)

    def load_question_set(self, ref: str) -> QuestionSet:
        """A set by file path (TSV/CSV/JSONL; named after the file) or by its name in the catalog.

        Raises:
            QuestionSetNotFound: neither a file nor a stored set. InvalidArgument: a bad file.
        """
        path = Path(ref).expanduser()
        if path.is_file():
            fmt, questions = parse_questions(path.read_bytes(), path.name)
            return QuestionSet(path.stem, tuple(questions), fmt)
        try:
            return self.get_set(ref)
        except QuestionSetNotFound:
            if os.sep in ref or path.suffix.lower() in (".tsv", ".csv", ".jsonl", ".json", ".txt"):
                raise QuestionSetNotFound(f"No such file: {ref} (and no stored question set has that name)."
                                          ) from None
            raise

    # sets
    def save_set(self, name: str, questions: Sequence[Question], fmt: str = "tsv") -> QuestionSet:
        """Create or replace the set ``name``. Raises ``InvalidArgument`` (blank or long name, no
        questions, unknown format)."""
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidArgument("A question set's name must be 1-200 characters and not blank.")
        if fmt not in FORMATS:
            raise InvalidArgument(f"Unknown format {fmt!r}; use tsv, csv or jsonl.")
        if not questions:
            raise InvalidArgument("A question set needs at least one question.")
        name = name.strip()
        data = json.dumps([{"question": q.text, "relevant": [c.data() for c in q.relevant]} for q in questions],
                          ensure_ascii=False)
        now = datetime.now(UTC)
        with self.catalog.cursor() as cur:
            cur.execute("INSERT INTO eval_sets VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                        " format = excluded.format, questions = excluded.questions, updated = excluded.updated",
                        [name, fmt, data, now, now])
        return self.get_set(name)

    def get_set(self, name: str) -> QuestionSet:
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT name, format, questions, created, updated FROM eval_sets WHERE name = ?",
                              [name]).fetchone()
        if row is None:
            raise QuestionSetNotFound(f"No question set named {name!r}. Sets: {', '.join(self.set_names()) or 'none'}.")
        qs = tuple(Question(q["question"], tuple(parse_criterion(c) for c in q["relevant"]))
                   for q in json.loads(row[2]))
        return QuestionSet(row[0], qs, row[1], row[3], row[4])

    def set_names(self) -> list[str]:
        with self.catalog.cursor() as cur:
            return [r[0] for r in cur.execute("SELECT name FROM eval_sets ORDER BY lower(name), name").fetchall()]

    def delete_set(self, name: str) -> bool:
        """Delete a set (its runs stay, as history)."""
        with self.catalog.cursor() as cur:
            return bool(cur.execute("DELETE FROM eval_sets WHERE name = ? RETURNING name", [name]).fetchall())

    # runs
    def save_run(self, run: EvalRun) -> EvalRun:
        qs = [{**asdict(q), "hits": [asdict(h) for h in q.hits]} for q in run.questions]
        with self.catalog.cursor() as cur:
            cur.execute("INSERT INTO eval_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        [run.id, run.set_name, run.set_sha256, run.store, run.mode, run.k, run.template,
                         run.embedding_model, json.dumps(run.chunking), json.dumps(run.search),
                         json.dumps(run.metrics), json.dumps(qs, ensure_ascii=False), run.started, run.seconds])
        return run

    def runs(self, set_name: str | None = None, store: str | None = None, limit: int = 200) -> list[EvalRun]:
        """Stored runs, newest first, optionally of one set and/or store."""
        sql, args = "SELECT * FROM eval_runs WHERE true", list[Any]()
        if set_name is not None:
            sql, args = sql + " AND set_name = ?", [*args, set_name]
        if store is not None:
            sql, args = sql + " AND store = ?", [*args, store]
        with self.catalog.cursor() as cur:
            rows = cur.execute(sql + " ORDER BY started DESC LIMIT ?", [*args, limit]).fetchall()
        return [_run(r) for r in rows]

    def get_run(self, run_id: str) -> EvalRun:
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT * FROM eval_runs WHERE id = ?", [run_id]).fetchone()
        if row is None:
            raise RunNotFound(f"No evaluation run {run_id!r}.")
        return _run(row)

    def delete_runs(self, set_name: str) -> int:
        with self.catalog.cursor() as cur:
            return len(cur.execute("DELETE FROM eval_runs WHERE set_name = ? RETURNING id", [set_name]).fetchall())


def _run(row: tuple) -> EvalRun:
    (rid, set_name, sha, store, mode, k, template, model, chunking, search, metrics, questions, started,
     seconds) = row
    qs = tuple(QuestionResult(q["question"], q["relevant"], q["first_rank"], q["metrics"], q["latency_ms"],
                              tuple(RankedHit(**h) for h in q["hits"])) for q in json.loads(questions))
    return EvalRun(rid, set_name, sha, store, mode, k, template, model, json.loads(chunking) if chunking else None,
                   json.loads(search) if search else {}, json.loads(metrics), qs, started, seconds or 0.0)


# -- tuning ----------------------------------------------------------------------------------------
def parse_weights(text: str) -> list[float]:
    """Fusion weights typed by a person (``"0, 0.25, 0.5"``; ``;`` also separates), each once,
    ascending.

    Raises:
        InvalidArgument: a part is not a number, or not between 0 and 1, or there is none.
    """
    try:
        weights = sorted({float(x) for x in (text or "").replace(";", ",").split(",") if x.strip()})
    except ValueError:
        weights = []
    if not weights or not all(0.0 <= w <= 1.0 for w in weights):
        raise InvalidArgument("Weights are numbers between 0 and 1, separated by commas.")
    return weights


def best_by_mrr(runs: Sequence[EvalRun]) -> EvalRun:
    """The run with the highest MRR, ties broken by recall@5 (the first run of a tie wins).
    Raises ``InvalidArgument`` for no runs."""
    if not runs:
        raise InvalidArgument("No runs to choose from.")
    return max(runs, key=lambda r: (r.mrr, r.metrics.get("recall@5", 0)))


def sweep_fusion_weight(stores: Stores, searcher: Searcher, store: str, qset: QuestionSet,
                        weights: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0), k: int = 10,
                        candidates: int | None = None) -> list[EvalRun]:
    """Hybrid runs of ``store`` on ``qset``, one per fusion weight (not saved)."""
    return [evaluate(stores, searcher, store, qset, "hybrid", k, fusion_weight=w, candidates=candidates)
            for w in weights]


@dataclass(frozen=True, slots=True)
class ChunkTrial:
    """A chunk setting tried on a temporary copy of a store: its chunk count, the seconds taken to
    re-chunk and embed, and a run per mode."""

    size: int
    overlap: int
    chunks: int
    build_seconds: float
    runs: tuple[EvalRun, ...] = field(default_factory=tuple)


def _documents_from_chunks(points: list[Any]) -> Any:
    """A file's text rebuilt from its stored chunks (their spans in the extracted text), with one
    section per run of chunks of the same page and heading -- what the chunker needs, without
    reading the file again. Gaps between chunks (whitespace the chunker skipped) become newlines."""
    points = sorted(points, key=lambda p: (p.payload.get("char_start") or 0, p.payload.get("chunk_index", 0)))
    buf: list[str] = []
    length = 0
    sections: list[Section] = []
    for p in points:
        text = p.payload["text"]
        start = p.payload.get("char_start")
        start = length if start is None else int(start)
        if start > length:
            buf.append("\n" * (start - length))
            length = start
        overlap = length - start
        if overlap < len(text):
            buf.append(text[overlap:])
            length = start + len(text)
        key = (p.payload.get("page"), p.payload.get("heading"))
        if sections and (sections[-1].page, sections[-1].heading) == key:
            sections[-1] = replace(sections[-1], char_end=max(sections[-1].char_end, start + len(text)))
        else:
            begin = max(start, sections[-1].char_end if sections else 0)
            sections.append(Section(begin, start + len(text), key[0], key[1]))
    return Document("".join(buf), sections, "text")


def try_chunkings(stores: Stores, indexer: Indexer, searcher: Searcher, store: str, qset: QuestionSet, chunkings: Sequence[tuple[int, int]],
                  modes: Sequence[str] = ("hybrid",), k: int = 10,
                  progress: Callable[[str, float], None] | None = None) -> list[ChunkTrial]:
    """Try chunk settings ``[(size, overlap), ...]`` (tokens; 1 to 4 of them) on temporary copies of
    ``store``: each file's text is rebuilt from the chunks stored in ``store`` (no file is read
    again), cut again with the store's model, embedded into a temporary store ``<store>~try-<size>-<overlap>``,
    evaluated on ``qset`` in each of ``modes``, and deleted. ``progress(message, fraction)``.

    Raises:
        InvalidArgument: no setting or more than 4, a bad size/overlap. StoreNotFound.
    """
    if not 1 <= len(chunkings) <= 4:
        raise InvalidArgument("Try 1 to 4 chunk settings at a time.")
    record = stores.get(store)
    embedder = stores.embedder(record.embedding_model)
    for size, overlap in chunkings:
        plan_chunking(embedder, size, overlap)  # InvalidArgument before any work
    source = stores.backend(record.backend).collection(record.collection)
    by_file: dict[str, list[Any]] = {}
    if source.collection_exists():
        for p in source.scroll():
            by_file.setdefault(p.payload["file_id"], []).append(p)
    docs = {fid: (pts[0].payload.get("file_name"), _documents_from_chunks(pts)) for fid, pts in by_file.items()}
    trials = []
    for t, (size, overlap) in enumerate(chunkings):
        name = f"{store}~try-{size}-{overlap}"
        if stores.exists(name):
            stores.drop(name)
        stores.backend(record.backend).collection(name).drop_collection()  # left by a trial that crashed
        stores.put(name, record.template, record.backend, record.embedding_model, record.dimension,
                      record.distance, collection=name)
        try:
            t0 = time.perf_counter()
            total = 0
            for i, (fid, (file_name, doc)) in enumerate(sorted(docs.items())):
                total += indexer.index_document(name, fid, doc, file_name, chunk_tokens=size,
                                                   overlap_tokens=overlap).chunks
                if progress:
                    progress(f"{size}/{overlap}: embedding {i + 1} of {len(docs)} files",
                             (t + (i + 1) / max(1, len(docs)) * 0.8) / len(chunkings))
            built = time.perf_counter() - t0
            runs = []
            for mode in modes:
                run = evaluate(stores, searcher, name, qset, mode, k)
                runs.append(replace(run, store=store, template=None,
                                    chunking={"size": size, "overlap": overlap, "trial": True}))
            trials.append(ChunkTrial(size, overlap, total, built, tuple(runs)))
        finally:
            stores.drop(name)
        if progress:
            progress(f"{size}/{overlap}: done", (t + 1) / len(chunkings))
    return trials


def keep_as_template(stores: Stores, save_template: Callable[[VectorStoreTemplate], VectorStoreTemplate], store: str,
                     size: int, overlap: int, name: str | None = None) -> VectorStoreTemplate:
    """Save a template like ``store``'s (backend, model, distance) with the chunking ``size/overlap``
    (default name ``<template>-<size>-<overlap>``); returns it. New stores made from it, or files
    ingested again with it, are cut that way (``save_template``: the workbench's, which keeps a
    template in use from changing its model). Raises ``InvalidArgument``."""
    record = stores.get(store)
    base = stores.template_of(record)
    tpl = make_template(name=name or f"{base.name}-{size}-{overlap}", backend=base.backend,
                        embedding_model=base.embedding_model, distance=base.distance,
                        max_chunk_size_tokens=size, chunk_overlap_tokens=overlap,
                        description=f"Chunking {size}/{overlap} chosen on the Evaluate page for {store!r}.")
    return save_template(tpl)


__all__ = [
    "ChunkTrial",
    "Criterion",
    "EvalRun",
    "Evaluations",
    "Question",
    "QuestionResult",
    "QuestionSet",
    "QuestionSetNotFound",
    "RankedHit",
    "RunNotFound",
    "best_by_mrr",
    "evaluate",
    "export_questions",
    "first_rank_distribution",
    "keep_as_template",
    "metric_changes",
    "metric_names",
    "ndcg_at",
    "parse_questions",
    "parse_relevant",
    "parse_weights",
    "recall_at",
    "reciprocal_rank",
    "sweep_fusion_weight",
    "try_chunkings",
    "tuned",
    "worse_questions",
]
