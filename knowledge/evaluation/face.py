"""The evaluation feature's face: :class:`Evaluations`, built by the workbench (``wb.evaluations``)
with the parts it uses. It keeps question sets and runs in the catalog (tables ``eval_sets`` and
``eval_runs``, migration 4) and runs evaluations and trials with its parts. A run's answer check
(:func:`~knowledge.evaluation.runs.with_answers`) rides in the run's JSON columns -- its shares in
``metrics``, each question's result in ``questions`` (key ``answer``), the chat model config in
``search`` -- so no migration was needed and older runs read as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from knowledge.catalog import Catalog
from knowledge.errors import InvalidArgument
from knowledge.evaluation.answers import AnswerResult
from knowledge.evaluation.questions import (
    FORMATS,
    Question,
    QuestionSet,
    QuestionSetNotFound,
    parse_criterion,
    parse_questions,
)
from knowledge.evaluation.runs import EvalRun, QuestionResult, RankedHit, RunNotFound, evaluate, tuned
from knowledge.evaluation.trials import ChunkTrial, keep_as_template, sweep_fusion_weight, try_chunkings
from knowledge.service.indexing import Indexer
from knowledge.service.search import Searcher
from knowledge.service.stores import Stores
from knowledge.service.templates import VectorStoreTemplate


class Evaluations:
    """Question sets and runs in the catalog (tables ``eval_sets`` and ``eval_runs``)."""

    def __init__(
        self,
        catalog: Catalog,
        stores: Stores,
        searcher: Searcher,
        indexer: Indexer,
        save_template: Callable[[VectorStoreTemplate], VectorStoreTemplate],
    ) -> None:
        self.catalog, self.stores, self.searcher, self.indexer = catalog, stores, searcher, indexer
        self.save_template = save_template

    # evaluating
    def evaluate(
        self,
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
        """See :func:`knowledge.evaluation.runs.evaluate`."""
        return evaluate(
            self.stores,
            self.searcher,
            store,
            qset,
            mode,
            k,
            fusion_weight=fusion_weight,
            candidates=candidates,
            progress=progress,
            rerank=rerank,
            rank_constant=rank_constant,
            where=where,
        )

    def tuned(
        self, *, fusion_weight: float | None = None, candidates: int | None = None, rank_constant: int | None = None
    ) -> Searcher:
        """See :func:`knowledge.evaluation.runs.tuned`."""
        return tuned(self.searcher, fusion_weight=fusion_weight, candidates=candidates, rank_constant=rank_constant)

    def sweep_fusion_weight(
        self,
        store: str,
        qset: QuestionSet,
        weights: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
        k: int = 10,
        candidates: int | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[EvalRun]:
        """See :func:`knowledge.evaluation.trials.sweep_fusion_weight`."""
        return sweep_fusion_weight(self.stores, self.searcher, store, qset, weights, k, candidates, where)

    def try_chunkings(
        self,
        store: str,
        qset: QuestionSet,
        chunkings: Sequence[tuple[int, int]],
        modes: Sequence[str] = ("hybrid",),
        k: int = 10,
        progress: Callable[[str, float], None] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[ChunkTrial]:
        """See :func:`knowledge.evaluation.trials.try_chunkings`."""
        return try_chunkings(self.stores, self.indexer, self.searcher, store, qset, chunkings, modes, k, progress, where)

    def keep_as_template(self, store: str, size: int, overlap: int, name: str | None = None) -> VectorStoreTemplate:
        """See :func:`knowledge.evaluation.trials.keep_as_template`."""
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
                raise QuestionSetNotFound(f"No such file: {ref} (and no stored question set has that name).") from None
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
        data = json.dumps(
            [
                {
                    "question": q.text,
                    "relevant": [c.data() for c in q.relevant],
                    **({"expected": list(q.expected)} if q.expected else {}),
                }
                for q in questions
            ],
            ensure_ascii=False,
        )
        now = datetime.now(UTC)
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO eval_sets VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                " format = excluded.format, questions = excluded.questions, updated = excluded.updated",
                [name, fmt, data, now, now],
            )
        return self.get_set(name)

    def get_set(self, name: str) -> QuestionSet:
        with self.catalog.cursor() as cur:
            row = cur.execute(
                "SELECT name, format, questions, created, updated FROM eval_sets WHERE name = ?", [name]
            ).fetchone()
        if row is None:
            raise QuestionSetNotFound(f"No question set named {name!r}. Sets: {', '.join(self.set_names()) or 'none'}.")
        qs = tuple(
            Question(q["question"], tuple(parse_criterion(c) for c in q["relevant"]), tuple(q.get("expected") or ()))
            for q in json.loads(row[2])
        )
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
        qs = [
            {
                **{k: v for k, v in asdict(q).items() if k != "answer"},
                "hits": [asdict(h) for h in q.hits],
                **({"answer": q.answer.data()} if q.answer is not None else {}),
            }
            for q in run.questions
        ]
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO eval_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run.id,
                    run.set_name,
                    run.set_sha256,
                    run.store,
                    run.mode,
                    run.k,
                    run.template,
                    run.embedding_model,
                    json.dumps(run.chunking),
                    json.dumps(run.search),
                    json.dumps(run.metrics),
                    json.dumps(qs, ensure_ascii=False),
                    run.started,
                    run.seconds,
                ],
            )
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
    (rid, set_name, sha, store, mode, k, template, model, chunking, search, metrics, questions, started, seconds) = row
    qs = tuple(
        QuestionResult(
            q["question"],
            q["relevant"],
            q["first_rank"],
            q["metrics"],
            q["latency_ms"],
            tuple(RankedHit(**h) for h in q["hits"]),
            AnswerResult.from_data(q["answer"]) if q.get("answer") else None,
        )
        for q in json.loads(questions)
    )
    return EvalRun(
        rid,
        set_name,
        sha,
        store,
        mode,
        k,
        template,
        model,
        json.loads(chunking) if chunking else None,
        json.loads(search) if search else {},
        json.loads(metrics),
        qs,
        started,
        seconds or 0.0,
    )


__all__ = ["Evaluations"]
