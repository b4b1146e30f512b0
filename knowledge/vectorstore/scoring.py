"""Distance math, in one place: score direction, thresholds, normalisation and exact top-k.

Every backend and the hybrid search score with these definitions (after qdrant-client's
``qdrant_client/local/distances.py``, one module holding all distance math and a ``DistanceOrder``
per metric):

============  =========================================================  =========
distance      score                                                      better
============  =========================================================  =========
``cosine``    cosine similarity of the two vectors, in [-1, 1]           higher
``dot``       inner product ``q . x`` (unbounded)                         higher
``euclid``    Euclidean (L2) distance ``||q - x||_2`` >= 0                lower
``manhattan`` Manhattan (L1) distance ``sum |q - x|`` >= 0                lower
============  =========================================================  =========

Vectors are float32; a cosine store keeps its rows L2-normalised (:func:`normalise_rows`) and
normalises the query (:func:`normalise_query`), so cosine similarity is a dot product.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from knowledge.errors import InvalidArgument

Distance = Literal["cosine", "euclid", "dot", "manhattan"]
DISTANCES: tuple[Distance, ...] = ("cosine", "euclid", "dot", "manhattan")

#: For each distance: ``True`` when a higher score is better (similarities), ``False`` when a lower
#: one is (distances). Source: qdrant-client ``qdrant_client/local/distances.py`` (``DistanceOrder``).
DISTANCE_ORDER: dict[str, bool] = {"cosine": True, "dot": True, "euclid": False, "manhattan": False}

#: Rows of a block when computing L1 distances (bounds the ``(block, d)`` temporary).
MANHATTAN_BLOCK = 4096


def check_distance(distance: str) -> Distance:
    """Return ``distance`` if it is one of :data:`DISTANCES`, else raise ``InvalidArgument``."""
    if distance not in DISTANCE_ORDER:
        raise InvalidArgument(f"Unknown distance {distance!r}; expected one of {', '.join(DISTANCES)}.")
    return distance  # type: ignore[return-value]


def higher_is_better(distance: str) -> bool:
    """``True`` for similarities (cosine, dot), ``False`` for distances (euclid, manhattan)."""
    check_distance(distance)
    return DISTANCE_ORDER[distance]


def passes_threshold(score: float, threshold: float | None, distance: str) -> bool:
    """Whether ``score`` is at least as good as ``threshold`` for ``distance``."""
    if threshold is None:
        return True
    return score >= threshold if DISTANCE_ORDER[distance] else score <= threshold


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise the rows of the ``(n, d)`` float32 matrix ``vectors`` *in place* (zero rows stay
    zero) and return it. Callers pass a matrix they own (``stack_points`` returns a fresh one)."""
    if len(vectors):
        norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
        norms[norms == 0] = 1.0
        vectors /= norms[:, None]
    return vectors


def normalise_query(q: np.ndarray) -> np.ndarray:
    """``q`` (``(d,)`` float32) scaled to unit L2 norm, as a new array; a zero vector is returned as is."""
    norm = float(np.linalg.norm(q))
    return q / norm if norm > 0 else q


def prepare_query(q: np.ndarray, distance: str) -> np.ndarray:
    """The query as a backend storing normalised cosine rows compares it: unit norm for cosine,
    unchanged otherwise."""
    return normalise_query(q) if distance == "cosine" else q


def clamp_cosine(score: float) -> float:
    """A cosine similarity clipped to [-1, 1] (float32 round-off can step just outside)."""
    return min(1.0, max(-1.0, score))


def vector_scores(distance: str, query: Any, vectors: Any) -> np.ndarray:
    """The score of each row of ``vectors`` (``(n, d)``) for ``query`` (``(d,)``), as a backend
    reports it: cosine similarity and dot product (higher is better), L2 and L1 distance (lower is
    better). ``(n,)`` float32. Used to score points a backend did not rank itself (hybrid search)."""
    check_distance(distance)
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    m = np.asarray(vectors, dtype=np.float64).reshape(-1, q.shape[0])
    if distance == "cosine":
        norms = np.linalg.norm(m, axis=1) * (np.linalg.norm(q) or 1.0)
        out = (m @ q) / np.where(norms == 0, 1.0, norms)
    elif distance == "dot":
        out = m @ q
    elif distance == "euclid":
        out = np.linalg.norm(m - q, axis=1)
    else:
        out = np.abs(m - q).sum(axis=1)
    return out.astype(np.float32)


# -- exact top-k ---------------------------------------------------------------------------------


def top_k(scores: np.ndarray, k: int, higher: bool) -> np.ndarray:
    """Positions of the ``k`` best ``scores``, best first; equal scores in ascending position."""
    n = scores.shape[0]
    if k < n:
        if higher:
            cand = np.argpartition(scores, n - k)[n - k :]
            bound = scores[cand].min()
            if np.count_nonzero(scores >= bound) > k:  # ties across the boundary: lowest positions
                better = np.flatnonzero(scores > bound)
                cand = np.concatenate([better, np.flatnonzero(scores == bound)[: k - len(better)]])
        else:
            cand = np.argpartition(scores, k - 1)[:k]
            bound = scores[cand].max()
            if np.count_nonzero(scores <= bound) > k:
                better = np.flatnonzero(scores < bound)
                cand = np.concatenate([better, np.flatnonzero(scores == bound)[: k - len(better)]])
    else:
        cand = np.arange(n)
    key = scores[cand]
    order = np.lexsort((cand, -key if higher else key))
    return cand[order]


def manhattan(vectors: np.ndarray, q: np.ndarray, rows: np.ndarray | None, n: int) -> np.ndarray:
    """L1 distances of rows ``rows`` (``None``: ``[0, n)``), block by block to bound temporaries."""
    total = n if rows is None else len(rows)
    out = np.empty(total, dtype=np.float32)
    for a in range(0, total, MANHATTAN_BLOCK):
        b = min(total, a + MANHATTAN_BLOCK)
        block = vectors[a:b] if rows is None else vectors[rows[a:b]]
        np.sum(np.abs(block - q), axis=1, out=out[a:b])
    return out


def euclid_exact(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """L2 distances of the rows of ``matrix`` to ``q``, computed in float64 (``(n,)`` float64)."""
    diff = (matrix - q).astype(np.float64)
    return np.sqrt(np.einsum("ij,ij->i", diff, diff))


__all__ = [
    "DISTANCES",
    "DISTANCE_ORDER",
    "Distance",
    "check_distance",
    "clamp_cosine",
    "euclid_exact",
    "higher_is_better",
    "manhattan",
    "normalise_query",
    "normalise_rows",
    "passes_threshold",
    "prepare_query",
    "top_k",
    "vector_scores",
]
