"""Retrieval evaluation (a feature): question sets with what counts as relevant, runs of a store on
a set, the metrics that say whether a change (chunking, model, hybrid or vector, fusion weight) made
search better, and trials of other settings. What the metrics mean, the question-set formats and how
trials work: docs/evaluation.md.

Modules: :mod:`~knowledge.evaluation.questions` (question sets, their files),
:mod:`~knowledge.evaluation.metrics` (pure: recall@n, MRR, nDCG), :mod:`~knowledge.evaluation.answers`
(pure: the answer check's scoring of a chat answer), :mod:`~knowledge.evaluation.runs`
(evaluate a store, compare runs), :mod:`~knowledge.evaluation.trials` (fusion sweeps, chunk trials,
keep a chunking as a template) and :mod:`~knowledge.evaluation.face` (:class:`Evaluations`, the
catalog's sets and runs, which the workbench builds as ``wb.evaluations``).

May import: the service layer (stores, indexing, search, templates), the parts (catalog,
vectorstore, ingest, ...), text and the ground (errors, config, ...). Never the workbench, chat,
tools, server, cli or pages. This file only re-exports the package's public face.
"""

from knowledge.evaluation.answers import (
    ANSWER_METRICS,
    AnswerCheck,
    AnswerResult,
    answer_sentence,
    check_one,
    holds,
    normalise,
)
from knowledge.evaluation.face import Evaluations
from knowledge.evaluation.metrics import (
    RECALL_AT,
    first_rank_distribution,
    metric_names,
    ndcg_at,
    recall_at,
    reciprocal_rank,
)
from knowledge.evaluation.questions import (
    EXPECTED_SEPARATOR,
    FORMATS,
    MAX_QUESTIONS,
    Criterion,
    Question,
    QuestionSet,
    QuestionSetNotFound,
    export_questions,
    parse_criterion,
    parse_expected,
    parse_questions,
    parse_relevant,
    parse_typed_questions,
    questions_from_rows,
)
from knowledge.evaluation.runs import (
    ANSWER_LLM,
    MODES,
    EvalRun,
    QuestionResult,
    RankedHit,
    RunNotFound,
    best_by_mrr,
    evaluate,
    metric_changes,
    tuned,
    with_answers,
    worse_questions,
)
from knowledge.evaluation.trials import (
    ChunkTrial,
    documents_from_chunks,
    keep_as_template,
    parse_weights,
    sweep_fusion_weight,
    try_chunkings,
)

__all__ = [
    "ANSWER_LLM",
    "ANSWER_METRICS",
    "EXPECTED_SEPARATOR",
    "FORMATS",
    "MAX_QUESTIONS",
    "MODES",
    "RECALL_AT",
    "AnswerCheck",
    "AnswerResult",
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
    "answer_sentence",
    "best_by_mrr",
    "check_one",
    "documents_from_chunks",
    "evaluate",
    "export_questions",
    "first_rank_distribution",
    "holds",
    "keep_as_template",
    "metric_changes",
    "metric_names",
    "ndcg_at",
    "normalise",
    "parse_criterion",
    "parse_expected",
    "parse_questions",
    "parse_relevant",
    "parse_typed_questions",
    "parse_weights",
    "questions_from_rows",
    "recall_at",
    "reciprocal_rank",
    "sweep_fusion_weight",
    "try_chunkings",
    "tuned",
    "with_answers",
    "worse_questions",
]
