"""Approximate search in the memory backend: the HNSW graph (usearch) over large stores, rescored
exactly; slots across deletes, upserts and compaction; the unindexed tail; filters on both paths;
the persisted graph (reused, or rebuilt when missing, corrupt, stale, or killed mid-save).

The size threshold is set low (``ann_min_points`` 500) so the stores stay small.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from knowledge.config import load_settings
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory import MemoryBackend
from knowledge.vectorstore.memory import ann as ann_mod

DIM = 32
N = 1500


def clustered(n: int, dim: int = DIM, clusters: int = 30, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    x = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def settings_for(tmp_path: Path, **extra):
    return load_settings(data_dir=tmp_path, vector_store={"ann_min_points": 500, **extra})


def fill(coll, x: np.ndarray, start: int = 0) -> None:
    coll.ensure_collection(x.shape[1])
    points = [Point(start + i, x[i], {"group": (start + i) % 20, "half": (start + i) % 2}) for i in range(len(x))]
    for s in range(0, len(points), 500):
        coll.upsert(points[s : s + 500])


def exact_ids(matrix: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    scores = matrix @ (q / np.linalg.norm(q))
    order = np.lexsort((np.arange(len(ids)), -scores))[:k]
    return ids[order].tolist()


class CountingSearch:
    """Counts the graph searches (wrapping the real GraphIndex.search)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = ann_mod.GraphIndex.search

        def search(graph, q, count):
            self.calls += 1
            return real(graph, q, count)

        monkeypatch.setattr(ann_mod.GraphIndex, "search", search)


@pytest.fixture
def data():
    x = clustered(N + 40)
    return x[:N], x[N:]


@pytest.mark.slow
def test_graph_search_recalls_the_exact_top_10_with_exact_scores(tmp_path, data, monkeypatch):
    x, queries = data
    counting = CountingSearch(monkeypatch)
    with MemoryBackend(settings_for(tmp_path)) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
        assert c.ann_status() == {"active": True, "ready": True, "indexed": N, "live": N}
        found = 0
        for q in queries:
            hits = c.search(q, limit=10)
            truth = exact_ids(x, np.arange(N), q, 10)
            found += len(set(truth) & {h.id for h in hits})
            for h in hits:  # exact float32 cosine, best first
                assert h.score == pytest.approx(float(x[h.id] @ (q / np.linalg.norm(q))), abs=1e-5)
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert counting.calls == len(queries)
        assert found / (10 * len(queries)) >= 0.98


def test_below_the_threshold_or_off_searches_exactly(tmp_path, data, monkeypatch):
    x, queries = data
    counting = CountingSearch(monkeypatch)
    with MemoryBackend(settings_for(tmp_path / "off", ann="off")) as b:
        c = b.collection("s")
        fill(c, x[:600])
        assert c.ensure_ann_index(timeout=5) is False
        assert [h.id for h in c.search(queries[0], limit=5)] == exact_ids(x[:600], np.arange(600), queries[0], 5)
    with MemoryBackend(settings_for(tmp_path / "small")) as b:
        c = b.collection("s")
        fill(c, x[:400])  # below ann_min_points (500)
        assert c.ensure_ann_index(timeout=5) is False
        assert c.ann_status()["active"] is False
        c.search(queries[0], limit=5)
    assert counting.calls == 0
    assert not list(tmp_path.rglob("state.json"))  # no graph was made, so none saved


def _stop_indexer(b: MemoryBackend) -> None:
    """Stop the backend's background indexer so the graph stays where it is (the test's point)."""
    assert b._indexer is not None
    b._indexer.close()


@pytest.mark.slow
def test_deleted_and_overwritten_points_are_never_returned(tmp_path, data):
    x, _ = data
    with MemoryBackend(settings_for(tmp_path)) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
        _stop_indexer(b)  # the graph keeps the killed slots until the indexer removes them
        gone = list(range(0, N, 3))
        c.remove(gone)
        moved = list(range(1, 300, 3))
        far = -x[moved]  # overwrite with the opposite vectors
        c.upsert([Point(pid, far[j], {"group": -1, "half": -1}) for j, pid in enumerate(moved)])
        assert not c.ann_status()["ready"]
        for pid in gone[:60]:
            hits = c.search(x[pid], limit=10)
            assert pid not in {h.id for h in hits}
        for j, pid in enumerate(moved[:40]):
            hits = c.search(x[pid], limit=10)
            assert all(h.id != pid for h in hits), "an overwritten point matched its old vector"
            top = c.search(far[j], limit=1)[0]
            assert top.id == pid and top.score == pytest.approx(1.0, abs=1e-5)
            assert top.payload["group"] == -1
        # the indexer's work, done by hand: killed slots leave the graph, the new rows enter it
        assert c.ensure_ann_index(timeout=120)
        assert c._points is not None and len(c._points.ann) == c.count() == N - len(gone)
        for pid in gone[:20]:
            assert pid not in {h.id for h in c.search(x[pid], limit=10)}


@pytest.mark.slow
def test_rows_not_yet_in_the_graph_are_found(tmp_path, data):
    x, _ = data
    extra = clustered(200, seed=7)
    with MemoryBackend(settings_for(tmp_path)) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
        _stop_indexer(b)
        fill(c, extra, start=10_000)
        status = c.ann_status()
        assert status["indexed"] == N and status["live"] == N + 200 and not status["ready"]
        for i in range(0, 200, 10):
            top = c.search(extra[i], limit=3)
            assert top[0].id == 10_000 + i and top[0].score == pytest.approx(1.0, abs=1e-5)
        allx = np.vstack([x, extra])
        ids = np.concatenate([np.arange(N), 10_000 + np.arange(200)])
        q = extra[5] + x[5]
        assert [h.id for h in c.search(q, limit=10)] == exact_ids(allx, ids, q, 10)


@pytest.mark.slow
def test_filters_use_the_graph_only_when_broad_and_are_always_right(tmp_path, data, monkeypatch):
    x, queries = data
    counting = CountingSearch(monkeypatch)
    ids = np.arange(N)
    with MemoryBackend(settings_for(tmp_path)) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
        half = ids % 2 == 0  # 50 % of the points: graph with oversampling, post-filtered
        found = 0
        for q in queries:
            hits = c.search(q, limit=10, where={"half": 0})
            assert len(hits) == 10 and all(h.payload["half"] == 0 for h in hits)
            found += len(set(exact_ids(x[half], ids[half], q, 10)) & {h.id for h in hits})
        assert counting.calls == len(queries)
        assert found / (10 * len(queries)) >= 0.98
        counting.calls = 0
        sel = ids % 20 == 3  # 5 %: exact over the matching rows
        for q in queries[:10]:
            hits = c.search(q, limit=10, where={"group": 3})
            assert [h.id for h in hits] == exact_ids(x[sel], ids[sel], q, 10)
            raw = c.search(q, limit=10, raw_filter=lambda p: p["half"] == 1)  # predicate: always exact
            odd = ids % 2 == 1
            assert [h.id for h in raw] == exact_ids(x[odd], ids[odd], q, 10)
        assert counting.calls == 0


@pytest.mark.slow
def test_compaction_keeps_the_slot_map_right(tmp_path):
    x = clustered(600, seed=3)
    with MemoryBackend(settings_for(tmp_path)) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
        rng = np.random.default_rng(1)
        current = x.copy()
        for _ in range(3):  # 1,800 overwrites: more dead rows than MIN_GARBAGE_ROWS and live ones
            current = clustered(600, seed=int(rng.integers(1 << 30)))
            fill(c, current)
        state = c._points
        assert state is not None and state.n < 2400  # compacted on the way (rows renumbered)
        assert c.ensure_ann_index(timeout=120)
        for pid in range(0, 600, 7):
            top = c.search(current[pid], limit=1)[0]
            assert top.id == pid and top.score == pytest.approx(1.0, abs=1e-5)
        for pid in range(0, 600, 37):  # the old vectors are gone
            top = c.search(x[pid], limit=1)[0]
            assert not (top.id == pid and top.score > 0.999)


@pytest.mark.slow
def test_persisted_graph_is_reused_when_in_step(tmp_path, data):
    x, queries = data
    settings = settings_for(tmp_path)
    with MemoryBackend(settings) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
        before = [[h.id for h in c.search(q, limit=10)] for q in queries[:10]]
    assert c.ann_counts["saved"] == 1
    state = json.loads((c.ann_path / "state.json").read_text())
    assert (c.ann_path / state["graph"]).is_file() and len(state["ids"]) == N
    with MemoryBackend(settings) as b:
        c = b.collection("s")
        assert c.ensure_ann_index(timeout=120)
        assert c.ann_counts == {"loaded": 1, "built": 0, "saved": 0}
        assert [[h.id for h in c.search(q, limit=10)] for q in queries[:10]] == before
    assert c.ann_counts["saved"] == 0  # nothing changed: not saved again


def _damage(path: Path, how: str, settings) -> None:
    folder = path / "ann"
    state = folder / "state.json"
    if how == "missing":
        for f in folder.iterdir():
            f.unlink()
    elif how == "garbage graph":
        graph = folder / json.loads(state.read_text())["graph"]
        graph.write_bytes(np.random.default_rng(0).bytes(graph.stat().st_size))
    elif how == "truncated graph":
        graph = folder / json.loads(state.read_text())["graph"]
        graph.write_bytes(graph.read_bytes()[:1000])
    elif how == "garbage state":
        state.write_bytes(b"\x00\xffnot json" * 10)
    elif how == "stale":  # another process wrote after the graph was saved
        other = subprocess.run(
            [sys.executable, "-c", _WRITE_ONE, str(settings.data_dir)], capture_output=True, text=True, timeout=120
        )
        assert other.returncode == 0, other.stderr


_WRITE_ONE = r"""
import sys
import numpy as np
from knowledge.config import load_settings
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory import MemoryBackend
with MemoryBackend(load_settings(data_dir=sys.argv[1], vector_store={"ann": "off"})) as b:
    v = np.zeros(32, dtype=np.float32); v[0] = 1.0
    b.collection("s").upsert([Point(99_999, v, {"group": 0, "half": 0})])
"""


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.parametrize("how", ["missing", "garbage graph", "truncated graph", "garbage state", "stale"])
def test_unusable_persisted_graph_is_rebuilt(tmp_path, data, how, caplog):
    x, queries = data
    settings = settings_for(tmp_path)
    with MemoryBackend(settings) as b:
        c = b.collection("s")
        fill(c, x)
        assert c.ensure_ann_index(timeout=120)
    _damage(c.path, how, settings)
    with MemoryBackend(settings) as b:
        c = b.collection("s")
        ids = np.arange(N)
        matrix = x
        if how == "stale":
            v = np.zeros(DIM, dtype=np.float32)
            v[0] = 1.0
            matrix, ids = np.vstack([x, v]), np.append(ids, 99_999)
            assert c.search(v, limit=1)[0].id == 99_999
        assert [h.id for h in c.search(queries[0], limit=10)] == exact_ids(matrix, ids, queries[0], 10)
        assert c.ensure_ann_index(timeout=120)
        assert c.ann_counts["loaded"] == 0 and c.ann_counts["built"] == 1
        found = sum(len(set(exact_ids(matrix, ids, q, 10)) & {h.id for h in c.search(q, limit=10)}) for q in queries)
        assert found / (10 * len(queries)) >= 0.98
    assert c.ann_counts["saved"] == 1
    with MemoryBackend(settings) as b:  # the rebuilt graph is the one reused next time
        c = b.collection("s")
        assert c.ensure_ann_index(timeout=120) and c.ann_counts["loaded"] == 1


_SAVER_CHILD = r"""
import sys
import numpy as np
from knowledge.config import load_settings
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory import MemoryBackend

data_dir = sys.argv[1]
rng = np.random.default_rng(int(sys.argv[2]))
b = MemoryBackend(load_settings(data_dir=data_dir, vector_store={"ann_min_points": 500}))
c = b.collection("k")
print("ready", flush=True)
while True:  # write, index, save (unload), over and over
    ids = rng.choice(3000, size=50, replace=False).tolist()
    vecs = rng.standard_normal((50, 32)).astype(np.float32)
    c.upsert([Point(int(i), vecs[j], {"group": int(i) % 20}) for j, i in enumerate(ids)])
    c.ensure_ann_index()
    c.unload()
"""


@pytest.mark.processes
@pytest.mark.slow
def test_a_process_killed_while_saving_the_graph_leaves_a_good_store(tmp_path):
    settings = settings_for(tmp_path)
    x = clustered(800, seed=5)
    with MemoryBackend(settings) as b:
        c = b.collection("k")
        fill(c, x)
    rng = np.random.default_rng(0)
    mid_save = 0
    for round_ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", _SAVER_CHILD, str(tmp_path), str(round_)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "ready", child.stderr.read() if child.stderr else ""
            time.sleep(float(rng.uniform(0.3, 2.5)))
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
        ann_dir = tmp_path / "vector-stores" / c.path.name / "ann"
        if ann_dir.exists() and any(".tmp-" in f.name for f in ann_dir.iterdir()):
            mid_save += 1
        if ann_dir.exists() and len(list(ann_dir.glob("graph-*"))) > 1:
            mid_save += 1
        with MemoryBackend(settings) as b:
            c = b.collection("k")
            points = list(c.scroll(with_vectors=True))
            matrix = np.stack([p.vector for p in points])
            ids = np.array([p.id for p in points])
            c.ensure_ann_index(timeout=120)
            sample = points[:: max(1, len(points) // 25)]
            found = 0
            for p in sample:
                top = c.search(p.vector, limit=1)[0]
                # every score is the exact one of the point returned (rescored from the stored vector)
                assert top.score == pytest.approx(float(matrix[ids == top.id][0] @ p.vector), abs=1e-5)
                found += top.id == p.id and top.score == pytest.approx(1.0, abs=1e-5)
            # the graph is approximate: after thousands of removals a point can be missed by a
            # self-query (seen twice in runs at load ~20: one of 25); a stale slot map would miss many
            assert found >= len(sample) - 2, (found, len(sample))
            q = matrix[0] + matrix[1]
            got = [h.id for h in c.search(q, limit=10)]
            assert len(set(got) & set(exact_ids(matrix, ids, q, 10))) >= 9
    print(f"{mid_save} of 8 kills left files of an unfinished save")
