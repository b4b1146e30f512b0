"""The sentences that answer a question, picked within the best passages (the offline assistant's answer).

Every prose sentence of the passages (:func:`knowledge.text.sentences.sentences`), as a reader
reads it (its Markdown marks dropped, :func:`knowledge.text.render.plain_text`), is scored by
:func:`score_sentences`: ``SEMANTIC_WEIGHT`` x the cosine of the question and the sentence with the
store's own embedding model, plus ``(1 - SEMANTIC_WEIGHT)`` x the share of the question's terms
(the BM25 analyzer's, :mod:`knowledge.text.analysis`) the sentence holds, each term weighted by its
BM25 IDF over the candidate sentences. Not the position in the passage; a sentence that, as read,
has fewer than ``MIN_WORDS`` words or is itself a question is no candidate. A table's body row is
a candidate too, read with its header (:func:`knowledge.text.sentences.table_rows`: "Loan type
1-4 family residential mortgage; 6/30/2011 $000's: 3,925,000") and quoted so (:attr:`Picked.quote`). Sentences are ordered by
that score plus :data:`PASSAGE_WEIGHT` x their passage's vector score, so of two sentences saying as
much the one of the better passage comes first. :func:`pick` keeps the first, and up to
:data:`MAX_SENTENCES` in all that order within :data:`NEAR` of it; when no sentence scores
:data:`MIN_SCORE`, nothing answers. The constants and how they were calibrated:
docs/chat.md ("How the offline assistant picks sentences").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from knowledge.text.analysis import analyzer
from knowledge.text.render import plain_text
from knowledge.text.sentences import MIN_WORDS, clean, sentences, table_rows

_READ_WORDS = re.compile(r"[^\W_]+")

#: Weight of the embedding cosine in a sentence's score; the rest is the lexical share.
SEMANTIC_WEIGHT = 0.6
#: Under this combined score no sentence answers (calibrated on tests/data/answer_questions.tsv).
MIN_SCORE = 0.42
#: Weight of the passage's vector score (cosine) in a sentence's order, :attr:`Picked.rank_score`
#: (calibrated on the project's 119 Rust-book questions: docs/chat.md).
PASSAGE_WEIGHT = 0.4
#: A second or third sentence is kept when it scores at least the best less this.
NEAR = 0.05
MAX_SENTENCES = 3
#: At most this many sentences per passage are scored (the first ones of a long joined passage).
PER_PASSAGE = 40

#: ``embed(texts) -> (n, d) float32`` L2-normalised rows; the first text is the question.
Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True, slots=True)
class Picked:
    """A sentence of passage ``ref`` (the hit's number in the turn): ``start``/``end`` are ``str``
    offsets into the passage's ``text``; ``score`` the combined score in [-0.6, 1], higher is
    better; ``cosine`` and ``lexical`` its parts; ``rank_score`` what sentences are ordered by,
    ``score + PASSAGE_WEIGHT x`` the passage's vector score (``score`` when the passage has no
    similarity: a distance store, or none given); ``quote``: how an answer quotes it when not as
    ``text`` reads (a table row: its cells under their headers), else ``None``."""

    ref: int
    start: int
    end: int
    text: str
    score: float
    cosine: float
    lexical: float
    rank_score: float = 0.0
    quote: str | None = None


def _idf(n_docs: int, df: int) -> float:
    """BM25's IDF, ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (Robertson & Zaragoza 2009, as Lucene)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def score_sentences(question: str, hits: Sequence[dict[str, Any]], embed: Embed) -> list[Picked]:
    """Every candidate sentence of ``hits`` (dicts with ``text`` and ``ref``, and ``score``: the
    passage's vector score, with ``higher_is_better`` false for a distance), scored, in the order of
    :attr:`Picked.rank_score`, best first.

    Raises:
        whatever ``embed`` raises (``EmbeddingUnavailable``).
    """
    cands: list[tuple[int, Any, str, bool]] = []  # (ref, sentence, the sentence as read, a table row)
    prior: dict[int, float] = {}  # ref -> PASSAGE_WEIGHT x the passage's similarity
    for i, h in enumerate(hits, 1):
        ref = int(h.get("ref") or i)
        if h.get("score") is not None and h.get("higher_is_better", True):
            prior[ref] = PASSAGE_WEIGHT * float(h["score"])
        text = str(h.get("text") or "")
        for s in sentences(text)[:PER_PASSAGE]:
            read = clean(plain_text(s.text, file_name=h.get("file_name")))
            # as read: enough words (a link's address counts none) and not itself a question
            if len(_READ_WORDS.findall(read)) >= MIN_WORDS and not read.rstrip(" \"'”’)*_").endswith("?"):
                cands.append((ref, s, read, False))
        for row, read in table_rows(text)[:PER_PASSAGE]:  # a table row, read under its header
            if len(_READ_WORDS.findall(read)) >= MIN_WORDS:
                cands.append((ref, row, clean(read), True))
    if not cands or not question.strip():
        return []
    an = analyzer()
    q_terms = set(an.terms(question))
    s_terms = [set(an.terms(read)) for _, _, read, _ in cands]
    idf = {t: _idf(len(cands), sum(t in st for st in s_terms)) for t in q_terms}
    total = sum(idf.values())
    vectors = embed([question] + [read for _, _, read, _ in cands])
    cos = vectors[1:] @ vectors[0]
    out = []
    for (ref, s, read, tabular), terms, c in zip(cands, s_terms, cos, strict=True):
        lex = sum(idf[t] for t in q_terms & terms) / total if total else 0.0
        score = SEMANTIC_WEIGHT * float(c) + (1 - SEMANTIC_WEIGHT) * lex
        out.append(
            Picked(
                ref,
                s.start,
                s.end,
                s.text,
                round(score, 6),
                round(float(c), 6),
                round(lex, 6),
                round(score + prior.get(ref, 0.0), 6),
                read if tabular else None,
            )
        )
    out.sort(key=lambda p: -p.rank_score)
    return out


def pick(scored: Sequence[Picked], min_score: float = MIN_SCORE) -> list[Picked]:
    """The sentences that answer, of ``scored`` (:func:`score_sentences`' order): those scoring at
    least ``min_score``, the first of them, and the next ones (at most :data:`MAX_SENTENCES` in all)
    whose ``rank_score`` is within :data:`NEAR` of its; ``[]``: nothing answers."""
    able = [p for p in scored if p.score >= min_score]
    if not able:
        return []
    best = able[0].rank_score
    return [p for p in able[:MAX_SENTENCES] if p.rank_score >= best - NEAR]


__all__ = [
    "MAX_SENTENCES",
    "MIN_SCORE",
    "NEAR",
    "PASSAGE_WEIGHT",
    "SEMANTIC_WEIGHT",
    "Embed",
    "Picked",
    "pick",
    "score_sentences",
]
