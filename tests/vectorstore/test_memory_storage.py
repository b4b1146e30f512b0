"""The memory backend's parts on their own: the segment log (files, commit protocol) without any
loaded points, and the loaded points (exact top-k) without any files."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from knowledge.errors import StoreCorrupt
from knowledge.vectorstore.memory.state import LoadedPoints
from knowledge.vectorstore.memory.storage import MANIFEST, MANIFEST_TMP, SegmentLog
from knowledge.vectorstore.scoring import DISTANCE_ORDER, vector_scores

D = 4


def lines(ids):
    return [orjson.dumps({"id": i, "payload": {"n": i}}) for i in ids]


def committed(log: SegmentLog):
    """A publish callback that swaps the manifest in and records what was published."""
    seen = []

    def publish(man, data):
        log.swap_manifest()
        seen.append(man)

    return publish, seen


def test_append_commits_a_segment_the_manifest_lists_and_reads_back(tmp_path):
    log = SegmentLog(tmp_path, "notes")
    man = log.create(D, "dot")
    publish, seen = committed(log)
    with log.writing(5.0):
        first = log.append(man, [], lines([1, 2]), np.ones((2, D), np.float32), 2, publish)
        second = log.append(first, [1], lines([3]), np.full((1, D), 2, np.float32), 2, publish)
    on_disk = log.parse_manifest(log.manifest_path.read_bytes())
    assert on_disk == second == seen[-1]
    assert [s["seg"] for s in on_disk["segments"]] == [1, 2] and on_disk["generation"] == 2
    deleted, ids, payloads, _ = log.read_jsonl(on_disk, on_disk["segments"][1])
    assert (deleted, ids, payloads) == ([1], [3], [{"n": 3}])
    out = np.empty((1, D), np.float32)
    log.read_vectors(on_disk["segments"][1], out)
    assert out.tolist() == [[2.0] * D]


def test_a_failed_publish_leaves_the_old_manifest_and_the_next_write_clears_the_orphans(tmp_path):
    log = SegmentLog(tmp_path, "notes")
    man = log.create(D, "cosine")
    log.write_manifest_tmp(man)
    log.swap_manifest()

    def crash(new, data):
        raise KeyboardInterrupt  # the process dies before the commit point

    with pytest.raises(KeyboardInterrupt):
        log.append(man, [], lines([1]), np.ones((1, D), np.float32), 1, crash)
    assert log.parse_manifest(log.manifest_path.read_bytes())["generation"] == 0
    assert {p.name for p in log.path.iterdir()} == {MANIFEST, MANIFEST_TMP, "seg-000001.jsonl", "seg-000001.npy"}
    publish, _ = committed(log)
    log.append(man, [], lines([7]), np.ones((1, D), np.float32), 1, publish)
    assert {p.name for p in log.path.iterdir()} == {MANIFEST, "seg-000001.jsonl", "seg-000001.npy"}
    only = log.parse_manifest(log.manifest_path.read_bytes())["segments"][0]
    assert log.read_jsonl(log.parse_manifest(log.manifest_path.read_bytes()), only)[1] == [7]


def test_a_merge_keeps_the_points_and_the_order_of_last_write(tmp_path):
    log = SegmentLog(tmp_path, "notes")
    man = log.create(D, "dot")
    publish, _ = committed(log)
    live: set[int] = set()
    for i in range(5):  # segment i writes point i + 1 and rewrites point 0; segment 3 also deletes 0 first
        live |= {i + 1, 0}
        man = log.append(man, [0] if i == 3 else [], lines([i + 1, 0]), np.full((2, D), i, np.float32), len(live), publish)
    merged = log.merge(man, 0, publish)
    assert len(merged["segments"]) == 1 and merged["count"] == 6
    _, ids, payloads, _ = log.read_jsonl(merged, merged["segments"][0])
    assert ids == [1, 2, 3, 4, 5, 0] and payloads[-1] == {"n": 0}
    vectors = np.empty((6, D), np.float32)
    log.read_vectors(merged["segments"][0], vectors)
    assert vectors[:, 0].tolist() == [0, 1, 2, 3, 4, 4]  # each point keeps the vector of its last write
    assert sorted(p.name for p in log.path.glob("seg-*")) == ["seg-000006.jsonl", "seg-000006.npy"]


def test_a_manifest_of_another_store_is_corrupt_for_this_one(tmp_path):
    log = SegmentLog(tmp_path, "notes")
    other = SegmentLog(tmp_path, "other").create(D, "dot")
    with pytest.raises(StoreCorrupt, match="belongs to a store named 'other'"):
        log.parse_manifest(orjson.dumps(other))


@pytest.mark.parametrize("distance", sorted(DISTANCE_ORDER))
def test_loaded_points_rank_exactly_and_skip_dead_rows(distance):
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40, D)).astype(np.float32)
    points = LoadedPoints(D, distance, 8)
    points.append([], list(range(40)), [{} for _ in range(40)], vectors)
    points.append([5], [], [], np.zeros((0, D), np.float32))  # a dead row is never returned
    q = rng.standard_normal(D).astype(np.float32)
    rows, scores = points.rank(q, None, 10)
    want = vector_scores(distance if distance != "cosine" else "dot", q, vectors).astype(np.float64)
    want[5] = -np.inf if DISTANCE_ORDER[distance] else np.inf
    ranked = np.lexsort((np.arange(40), -want if DISTANCE_ORDER[distance] else want))
    assert rows.tolist() == ranked[:10].tolist()
    np.testing.assert_allclose(scores, want[ranked[:10]], rtol=1e-4, atol=1e-5)
    rows, _ = points.rank(q, np.arange(0, 40, 2), 3)  # a filter: only these rows compete
    assert rows.tolist() == [r for r in ranked.tolist() if r % 2 == 0][:3]
