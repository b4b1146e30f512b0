"""Reranking: the fused ranking's best ``N`` passages scored again by the sentence of each that best
answers the query, with the store's own embedding model (late interaction at sentence level: the
query against every sentence, not against the passage's one averaged vector). Offline: no model but
the store's. Why this one and the figures: docs/search.md ("Reranking").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from knowledge.service.fusion import RRF_K
from knowledge.text.answers import PASSAGE_WEIGHT, score_sentences
from knowledge.vectorstore.store import Hit

#: Default number of the fused ranking's best passages that are reranked.
DEFAULT_CANDIDATES = 30
#: Weight of the sentence order in the reranked order; the rest is the ranking's own order (chosen on
#: tests/data/rust_book_questions.tsv among 0 to 1: docs/search.md, "Reranking").
SENTENCE_WEIGHT = 0.2

#: ``embed(texts) -> (n, d) float32`` L2-normalised rows (the store's model, documents' side).
Embed = Callable[[list[str]], np.ndarray]


def rerank(
    query: str,
    hits: Sequence[Hit],
    embed: Embed,
    candidates: int = DEFAULT_CANDIDATES,
    weight: float = SENTENCE_WEIGHT,
    higher_is_better: bool = True,
    rank_constant: int = RRF_K,
) -> list[Hit]:
    """``hits`` (a ranking, best first) with its first ``candidates`` reordered, the rest after them.

    Each candidate is scored by its best sentence in the order the offline assistant quotes them
    (:attr:`knowledge.text.answers.Picked.rank_score`: the embedding cosine of query and sentence,
    the share of the query's BM25-weighted terms it holds, plus ``PASSAGE_WEIGHT`` x the passage's
    vector score ``Hit.score``). A passage with no prose sentence (code, a table) counts its vector
    score as its sentence's. ``higher_is_better`` false (a distance store): the vector score adds
    nothing, and a passage without a sentence comes after those with one. The candidates' order by
    that score and their order in ``hits`` are merged by weighted reciprocal rank fusion:
    ``rerank_score = weight / (k + sentence rank) + (1 - weight) / (k + rank)`` with k =
    ``rank_constant`` (the search passes its fusion's, ``search.rank_constant``), higher is better,
    the new order (ties keep the old one).

    Raises:
        whatever ``embed`` raises (``EmbeddingUnavailable``).
    """
    head, tail = list(hits[:candidates]), list(hits[candidates:])
    if not head or not query.strip():
        return list(hits)
    scored = score_sentences(
        query,
        [
            {"text": h.text, "ref": i, "file_name": h.file_name, "score": h.score, "higher_is_better": higher_is_better}
            for i, h in enumerate(head, 1)
        ],
        embed,
    )
    best: dict[int, float] = {}
    for p in scored:  # in rank_score order: the first seen per passage is its best
        best.setdefault(p.ref, p.rank_score)

    def without_sentence(h: Hit) -> float:
        return (1.0 + PASSAGE_WEIGHT) * float(h.score) if higher_is_better else float("-inf")

    by_sentence = sorted(range(1, len(head) + 1), key=lambda i: (-best.get(i, without_sentence(head[i - 1])), i))
    sentence_rank = {i: r for r, i in enumerate(by_sentence, 1)}
    keyed = []
    for i, h in enumerate(head, 1):
        score = weight / (rank_constant + sentence_rank[i]) + (1.0 - weight) / (rank_constant + i)
        keyed.append((-score, i, replace(h, rerank_score=round(score, 6))))
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [h for _, _, h in keyed] + tail


__all__ = ["DEFAULT_CANDIDATES", "SENTENCE_WEIGHT", "Embed", "rerank"]
