"""Same data, same ranking on every backend and in numpy, for all four distances (after qdrant-client's
``tests/congruence_tests``): every backend of ``CONTRACT_BACKENDS`` is filled with the same points
and asked the same queries, plain and filtered, with and without a score threshold."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.vectorstore.base import Point
from knowledge.vectorstore.scoring import DISTANCES, higher_is_better
from tests.helpers.backends import BACKEND_FIXTURES, CONTRACT_BACKENDS

D = 24
N = 500


def reference(matrix: np.ndarray, q: np.ndarray, distance: str) -> np.ndarray:
    m, q = matrix.astype(np.float64), q.astype(np.float64)
    if distance == "cosine":
        return (m / np.linalg.norm(m, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    if distance == "dot":
        return m @ q
    if distance == "euclid":
        return np.sqrt(((m - q) ** 2).sum(axis=1))
    return np.abs(m - q).sum(axis=1)


def best(scores: np.ndarray, distance: str, rows: np.ndarray, k: int) -> list[int]:
    s = scores[rows]
    order = np.argsort(-s if higher_is_better(distance) else s, kind="stable")[:k]
    return [int(r) for r in rows[order]]


@pytest.mark.postgres
@pytest.mark.parametrize("distance", DISTANCES)
def test_every_backend_ranks_like_numpy(distance, tmp_path, request):
    from knowledge.config import load_settings

    for name, fixture in BACKEND_FIXTURES.items():  # a server some need
        if name in CONTRACT_BACKENDS:
            request.getfixturevalue(fixture)

    rng = np.random.default_rng(42)
    matrix = rng.standard_normal((N, D)).astype(np.float32)
    points = [Point(i, matrix[i], {"i": i, "part": "a" if i % 3 else "b"}) for i in range(N)]
    queries = rng.standard_normal((6, D)).astype(np.float32)
    part_b = np.array([i for i in range(N) if i % 3 == 0])
    rankings: dict[str, list[list[int]]] = {}
    for name, (factory, _) in sorted(CONTRACT_BACKENDS.items()):
        settings = load_settings(data_dir=tmp_path / name)
        with factory(settings) as backend:
            coll = backend.collection(f"congruence-{distance}")
            coll.ensure_collection(D, distance)
            for start in range(0, N, 128):
                coll.upsert(points[start : start + 128])
            got = []
            for q in queries:
                ref = reference(matrix, q, distance)
                plain = coll.search(q, limit=10)
                assert [h.id for h in plain] == best(ref, distance, np.arange(N), 10), name
                np.testing.assert_allclose([h.score for h in plain], ref[[h.id for h in plain]], rtol=1e-4, atol=1e-4)
                filtered = coll.search(q, limit=10, where={"part": "b"})
                assert [h.id for h in filtered] == best(ref, distance, part_b, 10), name
                threshold = float(np.quantile(ref, 0.9 if higher_is_better(distance) else 0.1))
                kept = coll.search(q, limit=N, score_threshold=threshold)
                better = ref >= threshold if higher_is_better(distance) else ref <= threshold
                assert abs(len(kept) - int(better.sum())) <= 1, name  # float32 vs float64 at the edge
                got.append([h.id for h in plain] + [h.id for h in filtered])
            rankings[name] = got
    first = next(iter(rankings.values()))
    assert all(r == first for r in rankings.values()), {k: v[0][:5] for k, v in rankings.items()}
