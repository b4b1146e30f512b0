"""The retrieval metrics of a run, pure functions of one ranking: where the first relevant item lands
(:func:`first_rank_distribution`), and from it reciprocal rank, recall@n and nDCG@k, each in
[0, 1], higher is better. "Any of" relevance: one relevant item answers the question.

A ranking is one relevance flag per ranked item, best first, and optionally the ranking key per
item: items with equal keys are tied, and a metric is averaged over every order of a tied group
(McSherry & Najork, ECIR 2008). What the metrics mean: docs/evaluation.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: The cut-offs of recall@n that a run reports (those <= k).
RECALL_AT: tuple[int, ...] = (1, 3, 5, 10)


def first_rank_distribution(relevant: Sequence[bool], scores: Sequence[Any] | None = None) -> list[tuple[int, float]]:
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


__all__ = ["RECALL_AT", "first_rank_distribution", "metric_names", "ndcg_at", "recall_at", "reciprocal_rank"]
