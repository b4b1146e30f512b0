"""Tests specific to the built-in ``memory`` backend (the generic contract is in test_contract.py).

Persistence, lazy load, idle unload, the chunk cap, crash safety with killed writer processes,
thread safety, the inter-process lock and cross-process visibility, orphan cleanup, corrupt files,
store names, compaction and search details. Every test gets its own data folder.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from knowledge.config import load_settings
from knowledge.errors import (
    DimensionMismatch,
    DistanceMismatch,
    InvalidArgument,
    StoreCorrupt,
    StoreFull,
    StoreLocked,
    StoreNotFound,
)
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory import (
    LEXICAL_DIR,
    MANIFEST,
    MAX_SEGMENTS,
    MemoryBackend,
    folder_name,
)

DIM = 16


def make_settings(tmp_path: Path, **vector_store):
    return load_settings(data_dir=tmp_path, vector_store=vector_store) if vector_store else load_settings(data_dir=tmp_path)


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path)


@pytest.fixture
def backend(settings):
    b = MemoryBackend(settings)
    yield b
    b.close()


def vec(seed, dim=DIM):
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def chunk_points(file_id, n, version=0, dim=DIM, id_prefix=None):
    prefix = id_prefix or file_id
    return [
        Point(
            f"{prefix}:{i}",
            vec(hash((file_id, version, i)) % 2**32, dim),
            {"file_id": file_id, "chunk_index": i, "version": version, "n": n, "text": f"{file_id} v{version} #{i}"},
        )
        for i in range(n)
    ]


def reference_search(ids, matrix, q, distance, k):
    """Brute-force numpy reference: (ids, scores) best first."""
    m = matrix.astype(np.float64)
    q = q.astype(np.float64)
    if distance == "cosine":
        m = m / np.linalg.norm(m, axis=1, keepdims=True)
        s = m @ (q / np.linalg.norm(q))
    elif distance == "dot":
        s = m @ q
    elif distance == "euclid":
        s = np.sqrt(((m - q) ** 2).sum(1))
    else:
        s = np.abs(m - q).sum(1)
    order = np.argsort(-s if distance in ("cosine", "dot") else s, kind="stable")[:k]
    return [ids[i] for i in order], s[order]


# ---------------------------------------------------------------------------------------------
# persistence, lazy load, idle unload
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclid", "manhattan"])
def test_search_matches_numpy_reference_and_survives_a_new_instance(settings, distance):
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((500, DIM)).astype(np.float32)
    ids = [f"p{i}" if i % 2 else i for i in range(500)]
    with MemoryBackend(settings) as b:
        c = b.collection("ref")
        c.ensure_collection(DIM, distance)
        for start in range(0, 500, 100):  # several segments
            c.upsert([Point(ids[i], matrix[i], {"i": i}) for i in range(start, start + 100)])
        queries = rng.standard_normal((5, DIM)).astype(np.float32)
        first = [c.search(q, limit=10) for q in queries]
    for q, hits in zip(queries, first):
        want_ids, want_scores = reference_search(ids, matrix, q, distance, 10)
        assert [h.id for h in hits] == want_ids
        np.testing.assert_allclose([h.score for h in hits], want_scores, rtol=1e-4, atol=1e-4)
    with MemoryBackend(settings) as b2:
        c2 = b2.collection("ref")
        assert c2.info().distance == distance and c2.count() == 500
        again = [c2.search(q, limit=10) for q in queries]

    def pairs(results):
        return [[(h.id, h.payload) for h in hits] for hits in results]

    assert pairs(again) == pairs(first)


def test_ids_and_payloads_round_trip_exactly(backend, settings):
    c = backend.collection("rt")
    c.ensure_collection(DIM)
    payload = {"s": "é ✓ \u00e9\u0301", "i": 3, "f": 1.5, "b": True, "n": None, "l": [1, "a"], "d": {"x": [1]}}
    c.upsert([Point(1, vec(1), payload), Point("1", vec(2), {"tuple": (1, 2)})])
    payload["i"] = 99  # the store keeps its own copy
    with MemoryBackend(settings) as b2:
        got = {p.id: p.payload for p in b2.collection("rt").retrieve([1, "1"])}
    assert got[1]["i"] == 3 and got[1]["s"] == "é ✓ \u00e9\u0301" and got[1]["d"] == {"x": [1]}
    assert got["1"] == {"tuple": [1, 2]}  # stored as JSON: the same value before and after a reload
    assert {p.id: p.payload for p in c.retrieve([1, "1"])} == got


def test_segments_are_readable_jsonl_beside_float32_npy(backend):
    c = backend.collection("files")
    c.ensure_collection(DIM)
    c.upsert(chunk_points("a", 3))
    c.replace({"file_id": "a"}, chunk_points("a", 2, version=1))
    manifest = json.loads((c.path / MANIFEST).read_text())
    assert manifest["name"] == "files" and manifest["count"] == 2 and len(manifest["segments"]) == 2
    lines = (c.path / "seg-000002.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["deleted"] == ["a:0", "a:1", "a:2"]
    assert [json.loads(line)["id"] for line in lines[1:]] == ["a:0", "a:1"]
    vectors = np.load(c.path / "seg-000002.npy")
    assert vectors.dtype == np.float32 and vectors.shape == (2, DIM)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-6)  # cosine: unit


def test_lazy_load_info_and_count_need_no_load(settings):
    with MemoryBackend(settings) as b:
        c = b.collection("lazy")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 5))
    with MemoryBackend(settings) as b2:
        c2 = b2.collection("lazy")
        assert c2.collection_exists() and c2.count() == 5 and c2.info().count == 5
        assert c2.info().disk_bytes > 5 * DIM * 4
        assert not c2.is_loaded and b2.loaded_collections() == []
        assert len(c2.search(vec(0), limit=3)) == 3
        assert c2.is_loaded and b2.loaded_collections() == ["lazy"]


def test_idle_stores_are_unloaded_and_reloaded_on_next_access(tmp_path):
    settings = make_settings(tmp_path, idle_seconds=60)
    with MemoryBackend(settings) as b:
        c = b.collection("idle")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 20))
        before = c.search(vec(1), limit=5)
        assert c.is_loaded
        assert b.unload_idle() == []  # just used
        assert b.unload_idle(now=time.monotonic() + 61) == ["idle"]
        assert not c.is_loaded and c.count() == 20 and not c.is_loaded
        assert c.search(vec(1), limit=5) == before
        assert c.is_loaded


def test_sweeper_thread_unloads_and_close_stops_it(tmp_path):
    b = MemoryBackend(make_settings(tmp_path, idle_seconds=0.2))
    c = b.collection("sweep")
    c.ensure_collection(DIM)
    c.upsert(chunk_points("a", 3))
    assert c.search(vec(1), limit=1)
    deadline = time.monotonic() + 10
    while c.is_loaded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not c.is_loaded
    sweeper = b._sweeper
    assert sweeper is not None and sweeper.is_alive()
    b.close()
    assert not sweeper.is_alive()
    b.close()  # idempotent
    assert len(c.search(vec(1), limit=3)) == 3  # still usable, loads again


# ---------------------------------------------------------------------------------------------
# the cap
# ---------------------------------------------------------------------------------------------


def test_cap_rejects_oversized_writes_before_writing_anything(tmp_path):
    settings = make_settings(tmp_path, max_chunks_per_store=10)
    with MemoryBackend(settings) as b:
        c = b.collection("capped")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 8))
        files_before = sorted(os.listdir(c.path))
        with pytest.raises(StoreFull) as err:
            c.upsert(chunk_points("b", 3))
        msg = str(err.value)
        assert "10" in msg and "vector_store.max_chunks_per_store" in msg and "pgvector" in msg
        assert "capped" in msg
        assert sorted(os.listdir(c.path)) == files_before and c.count() == 8
        c.upsert(chunk_points("a", 8, version=1) + chunk_points("b", 2))  # overwrites 8, adds 2: 10
        assert c.count() == 10
        with pytest.raises(StoreFull):
            c.replace({"file_id": "a"}, chunk_points("a", 9, version=2))  # 10 - 8 + 9 = 11
        assert c.count({"file_id": "a"}) == 8
        c.replace({"file_id": "a"}, chunk_points("a", 3, version=2))
        assert c.count() == 5
    with MemoryBackend(settings) as b2:
        assert b2.collection("capped").count() == 5


# ---------------------------------------------------------------------------------------------
# crash safety: a writer process killed (SIGKILL) at random moments
# ---------------------------------------------------------------------------------------------

_CRASH_CHILD = r"""
import sys
import numpy as np
from knowledge.config import load_settings
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory import MemoryBackend

data_dir, files = sys.argv[1], int(sys.argv[2])

def n_chunks(f, v):
    return 300 if f == 0 else 1 + (f + v) % 6

def points(f, v):
    n = n_chunks(f, v)
    rng = np.random.default_rng(f * 1_000_003 + v)
    vecs = rng.standard_normal((n, 8)).astype(np.float32)
    return [Point(f"f{f}:{i}", vecs[i], {"file_id": f"f{f}", "version": v, "chunk_index": i, "n": n,
                                         "text": "x" * (i % 50)}) for i in range(n)]

backend = MemoryBackend(load_settings(data_dir=data_dir), lock_timeout=60)
c = backend.collection("crash")
print("ready", flush=True)
version = int(sys.stdin.readline())  # the parent says go (children start while another writes)
while True:
    for f in range(files):
        c.replace({"file_id": f"f{f}"}, points(f, version))
    version += 1
"""


def _check_crash_store(settings, files):
    """Every file holds exactly one complete version; counts agree; search finds each file."""
    with MemoryBackend(settings) as b:
        c = b.collection("crash")
        points = list(c.scroll(with_vectors=True))
        by_file = defaultdict(list)
        for p in points:
            by_file[p.payload["file_id"]].append(p)
        assert sorted(by_file) == sorted(f"f{f}" for f in range(files))
        versions = {}
        for file_id, pts in by_file.items():
            got_versions = {p.payload["version"] for p in pts}
            assert len(got_versions) == 1, f"{file_id} mixes versions {got_versions}"
            n = pts[0].payload["n"]
            assert sorted(p.payload["chunk_index"] for p in pts) == list(range(n)), file_id
            assert sorted(p.id for p in pts) == sorted(f"{file_id}:{i}" for i in range(n))
            versions[file_id] = got_versions.pop()
            assert c.count({"file_id": file_id}) == n
            probe = pts[len(pts) // 2]
            hit = c.search(probe.vector, limit=1, where={"file_id": file_id})[0]
            assert hit.id == probe.id and hit.score == pytest.approx(1.0, abs=1e-5)
        assert c.count() == len(points) == c.info().count
        return versions, len(json.loads((c.path / MANIFEST).read_text())["segments"])


#: The most writers :func:`test_killed_writer_never_leaves_a_partial_batch` kills.
MAX_KILLS = 100


@pytest.mark.processes
@pytest.mark.slow
def test_killed_writer_never_leaves_a_partial_batch(tmp_path):
    settings = make_settings(tmp_path)
    files = 12
    with MemoryBackend(settings) as b:
        c = b.collection("crash")
        c.ensure_collection(8)
        for f in range(files):  # version 0, written by the parent
            n = 300 if f == 0 else 1 + f % 6
            c.replace(
                {"file_id": f"f{f}"},
                [
                    Point(f"f{f}:{i}", vec(f * 1000 + i, 8), {"file_id": f"f{f}", "version": 0, "chunk_index": i, "n": n})
                    for i in range(n)
                ],
            )
    rnd = random.Random(1234)
    version = 1
    first_versions, _ = _check_crash_store(settings, files)
    changed = 0
    max_segments = 0
    kills = 25  # at least; more (up to MAX_KILLS) until 3 of them landed in the middle of a write
    mid_write = 0  # kills that left files of an uncommitted write behind
    rounds = 0

    def spawn():
        return subprocess.Popen(
            [sys.executable, "-c", _CRASH_CHILD, str(tmp_path), str(files)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    children = [spawn()]
    try:
        # An idle machine writes fast, so fewer random kills land mid-write: go on until 3 have.
        while rounds < kills or (mid_write < 3 and rounds < MAX_KILLS):
            rounds += 1
            child = children[-1]
            line = child.stdout.readline()
            assert line.strip() == "ready", child.stderr.read()
            child.stdin.write(f"{version}\n")
            child.stdin.flush()
            children.append(spawn())  # starts up while this one writes (the last one is killed unused)
            time.sleep(rnd.uniform(0.02, 0.35))
            child.send_signal(signal.SIGKILL)
            child.wait()
            assert child.returncode == -signal.SIGKILL, child.stderr.read()
            manifest = json.loads((tmp_path / "vector-stores" / folder_name("crash") / MANIFEST).read_text())
            listed = {f"seg-{s['seg']:06d}.{e}" for s in manifest["segments"] for e in ("jsonl", "npy")}
            on_disk = set(os.listdir(tmp_path / "vector-stores" / folder_name("crash")))
            mid_write += bool(on_disk - listed - {MANIFEST})
            versions, segments = _check_crash_store(settings, files)
            max_segments = max(max_segments, segments)
            changed += versions != first_versions
            first_versions = versions
            version = max(versions.values()) + 1
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
            for stream in (child.stdin, child.stdout, child.stderr):
                stream.close()
    # Progress, not timing: a busy machine may kill a child before its first commit now and then.
    assert changed >= rounds // 3, f"the writers committed something in only {changed} of {rounds} rounds"
    assert mid_write >= 3, f"only {mid_write} of {rounds} kills landed in the middle of a write"
    print(f"{mid_write} of {rounds} kills interrupted a write")
    assert max_segments <= MAX_SEGMENTS + 1
    # a crash leaves orphans at most; the next write removes them
    with MemoryBackend(settings) as b:
        c = b.collection("crash")
        last = {"file_id": "f1", "version": version, "chunk_index": 0, "n": 1}
        c.replace({"file_id": "f1"}, [Point("f1:0", vec(1, 8), last)])
        manifest = json.loads((c.path / MANIFEST).read_text())
        listed = {f"seg-{s['seg']:06d}.{ext}" for s in manifest["segments"] for ext in ("jsonl", "npy")}
        assert set(os.listdir(c.path)) - listed - {LEXICAL_DIR} == {MANIFEST}
    _check_crash_store(settings, files)


# ---------------------------------------------------------------------------------------------
# threads
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_threads_see_the_old_or_the_new_set_never_a_mix(backend):
    c = backend.collection("threads")
    c.ensure_collection(DIM)
    files = [f"f{i}" for i in range(6)]

    def n_for(file_index, version):
        return 2 + (file_index + version) % 5

    for i, f in enumerate(files):
        c.replace({"file_id": f}, chunk_points(f, n_for(i, 0), 0))
    stop = threading.Event()  # set when the writers are done; each reader then finishes its rounds
    errors: list[str] = []
    reads = [0]
    writes = [0]
    versions = 3  # per writer: each version replaces its three files
    rounds = 20  # at least, per reader: a filtered search, a scroll, an unfiltered search, a count

    def check_group(file_id, hits, where):
        versions = {h.payload["version"] for h in hits}
        if len(versions) != 1:
            errors.append(f"{where}: {file_id} mixes versions {versions}")
            return
        n = hits[0].payload["n"]
        if sorted(h.payload["chunk_index"] for h in hits) != list(range(n)):
            errors.append(f"{where}: {file_id} incomplete: {len(hits)} of {n}")

    def writer(indices):
        for version in range(1, versions + 1):
            for i in indices:
                c.replace({"file_id": files[i]}, chunk_points(files[i], n_for(i, version), version))
                writes[0] += 1

    def reader(seed):
        rng = np.random.default_rng(seed)
        done = 0
        while done < rounds or not stop.is_set():
            done += 1
            try:
                f = files[int(rng.integers(len(files)))]
                query = vec(int(rng.integers(1000)))
                check_group(f, c.search(query, limit=50, where={"file_id": f}), "search")
                check_group(f, list(c.scroll(where={"file_id": f})), "scroll")
                hits = c.search(vec(1), limit=1000)
                groups = defaultdict(list)
                for h in hits:
                    groups[h.payload["file_id"]].append(h)
                if sorted(groups) != files:
                    errors.append(f"unfiltered search misses files: {sorted(groups)}")
                for file_id, group in groups.items():
                    check_group(file_id, group, "unfiltered")
                if c.count({"file_id": f}) not in range(2, 7):
                    errors.append("count out of range")
                reads[0] += 1
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(repr(exc))

    writers = [threading.Thread(target=writer, args=(part,)) for part in ([0, 1, 2], [3, 4, 5])]
    readers = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    stop.set()
    for t in readers:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in writers + readers)
    assert not errors, errors[:5]
    assert writes[0] == len(files) * versions  # every replacement happened while the readers read
    assert reads[0] >= 4 * rounds  # and every reader's round passed its checks


# ---------------------------------------------------------------------------------------------
# a second process
# ---------------------------------------------------------------------------------------------

_HOLD_LOCK = r"""
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1])
lock.acquire()
print("locked", flush=True)
sys.stdin.read()
"""

_CHILD_OPS = r"""
import json, sys
import numpy as np
from knowledge.config import load_settings
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.memory import MemoryBackend

data_dir, name, op = sys.argv[1], sys.argv[2], sys.argv[3]
arg = json.loads(sys.argv[4])
with MemoryBackend(load_settings(data_dir=data_dir), lock_timeout=60) as b:
    c = b.collection(name)
    if op == "upsert":  # arg: [prefix, n, batch]
        prefix, n, batch = arg
        for start in range(0, n, batch):
            c.upsert([Point(f"{prefix}{i}", np.random.default_rng(i).standard_normal(16).astype(np.float32),
                            {"file_id": prefix, "i": i}) for i in range(start, min(n, start + batch))])
    elif op == "replace":  # arg: [file_id, n]
        file_id, n = arg
        c.replace({"file_id": file_id}, [Point(f"{file_id}:{i}", np.ones(16, np.float32) * (i + 1),
                                               {"file_id": file_id, "i": i}) for i in range(n)])
    elif op == "drop":
        c.drop_collection()
    elif op == "recreate":
        c.drop_collection()
        c.ensure_collection(arg)
    print(json.dumps({"count": c.count() if c.collection_exists() else None,
                      "ids": sorted(str(p.id) for p in c.scroll()) if c.collection_exists() else []}))
"""


def run_child(tmp_path, name, op, arg):
    out = subprocess.run(
        [sys.executable, "-c", _CHILD_OPS, str(tmp_path), name, op, json.dumps(arg)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.processes
@pytest.mark.slow
def test_second_process_holding_the_lock_gives_store_locked(tmp_path):
    settings = make_settings(tmp_path)
    with MemoryBackend(settings, lock_timeout=0.3) as b:
        c = b.collection("Shared Notes")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 3))
        holder = subprocess.Popen(
            [sys.executable, "-c", _HOLD_LOCK, str(c.lock_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            start = time.monotonic()
            with pytest.raises(StoreLocked) as err:
                c.upsert(chunk_points("b", 2))
            assert time.monotonic() - start < 5
            assert "'Shared Notes'" in str(err.value) and "another" in str(err.value)
            with pytest.raises(StoreLocked):
                c.remove(ids=["a:0"])
            # readers never take the lock
            assert c.count() == 3 and len(c.search(vec(0), limit=10)) == 3
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
            holder.stdout.close()
        c.upsert(chunk_points("b", 2))
        assert c.count() == 5


@pytest.mark.processes
@pytest.mark.slow
def test_another_process_writes_are_seen_without_reopening(tmp_path):
    settings = make_settings(tmp_path)
    with MemoryBackend(settings) as b:
        c = b.collection("shared")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("mine", 4))
        assert len(c.search(vec(0), limit=10)) == 4 and c.is_loaded
        child = run_child(tmp_path, "shared", "upsert", ["theirs", 30, 7])
        assert child["count"] == 34
        assert c.count() == 34 and c.count({"file_id": "theirs"}) == 30
        assert {h.id for h in c.search(vec(0), limit=100)} == {p.id for p in chunk_points("mine", 4)} | {
            f"theirs{i}" for i in range(30)
        }
        run_child(tmp_path, "shared", "replace", ["theirs", 2])
        assert c.count({"file_id": "theirs"}) == 2 and c.count() == 6
        hit = c.search(np.ones(DIM), limit=1, where={"file_id": "theirs"})[0]
        assert hit.payload["i"] in (0, 1)
        c.replace({"file_id": "mine"}, chunk_points("mine", 1, version=3))  # ours seen by a child
        assert run_child(tmp_path, "shared", "upsert", ["x", 0, 1])["count"] == 3
        # dropped and recreated elsewhere with another size: we notice
        run_child(tmp_path, "shared", "recreate", 8)
        assert c.count() == 0 and c.info().size == 8
        with pytest.raises(DimensionMismatch):
            c.search(vec(0), limit=1)
        run_child(tmp_path, "shared", "drop", None)
        assert not c.collection_exists()
        with pytest.raises(StoreNotFound):
            c.search(vec(0, 8), limit=1)


@pytest.mark.processes
@pytest.mark.slow
def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    settings = make_settings(tmp_path)
    with MemoryBackend(settings) as b:
        c = b.collection("busy")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("seed", 1))
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD_OPS, str(tmp_path), "busy", "upsert", json.dumps([prefix, 150, 5])],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for prefix in ("a", "b")
        ]
        for i in range(0, 60, 3):  # and this process writes too
            c.upsert([Point(f"p{j}", vec(j), {"file_id": "p"}) for j in range(i, i + 3)])
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        assert c.count() == 1 + 150 + 150 + 60
        assert {p.id for p in c.scroll(where={"file_id": "a"})} == {f"a{i}" for i in range(150)}
    with MemoryBackend(settings) as b2:
        assert b2.collection("busy").count() == 361


# ---------------------------------------------------------------------------------------------
# files on disk: orphans, corruption, names
# ---------------------------------------------------------------------------------------------


def test_orphan_files_are_removed_on_the_next_write(backend):
    c = backend.collection("orphans")
    c.ensure_collection(DIM)
    c.upsert(chunk_points("a", 3))
    junk = ["seg-000099.jsonl", "seg-000099.npy", "seg-000002.jsonl", "manifest.json.tmp"]
    for name in junk:
        (c.path / name).write_bytes(b"half written")
    (c.path / "README.txt").write_text("kept: not ours")
    assert c.count() == 3 and len(c.search(vec(1), limit=5)) == 3  # readers ignore them
    c.upsert(chunk_points("b", 1))
    left = set(os.listdir(c.path))
    assert not left & {"seg-000099.jsonl", "seg-000099.npy", "manifest.json.tmp"}
    assert "README.txt" in left
    assert json.loads((c.path / "seg-000002.jsonl").read_text().splitlines()[1])["id"] == "b:0"
    assert c.count() == 4


def test_corrupt_manifest_raises_store_corrupt_with_a_clear_message(settings):
    with MemoryBackend(settings) as b:
        c = b.collection("broken")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 3))
        (c.path / MANIFEST).write_bytes(b'{"format": 1, "name": "broken", "size": 16,')
    with MemoryBackend(settings) as b2:
        c2 = b2.collection("broken")
        for call in (c2.info, c2.count, lambda: c2.search(vec(0)), lambda: c2.upsert(chunk_points("x", 1))):
            with pytest.raises(StoreCorrupt) as err:
                call()
            msg = str(err.value)
            assert "'broken'" in msg and MANIFEST in msg and "not valid JSON" in msg
        assert b2.list_collections() == []  # skipped (with a warning), not fatal for the others


def test_missing_or_truncated_segment_raises_store_corrupt(settings):
    with MemoryBackend(settings) as b:
        c = b.collection("damaged")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 3))
        c.upsert(chunk_points("b", 3))
        path = c.path
    (path / "seg-000002.npy").unlink()
    with MemoryBackend(settings) as b2:
        c2 = b2.collection("damaged")
        assert c2.count() == 6  # from the manifest
        with pytest.raises(StoreCorrupt, match=r"seg-000002\.npy"):
            c2.search(vec(0))
    data = (path / "seg-000001.jsonl").read_bytes()
    (path / "seg-000001.jsonl").write_bytes(data[:-10])
    with MemoryBackend(settings) as b3, pytest.raises(StoreCorrupt, match=r"seg-000001\.jsonl"):
        b3.collection("damaged").search(vec(0))


def test_payloads_are_parsed_when_read_and_a_damaged_line_is_reported_then(settings):
    """A cold load parses no payload (the start-up cost at 100,000 chunks); a payload line damaged
    in place (same length, so the segment's size checks pass) fails with StoreCorrupt when it is
    read, and the other points stay searchable."""
    with MemoryBackend(settings) as b:
        c = b.collection("lazy")
        c.ensure_collection(DIM)
        c.upsert(chunk_points("a", 4))
        path = c.path
    with MemoryBackend(settings) as b2:
        c2 = b2.collection("lazy")
        assert [h.id for h in c2.search(vec(0), limit=4, with_payload=False)]
        loaded = c2._points
        assert loaded is not None and all(type(item) is bytes for item in loaded.payloads._items)
        got = c2.retrieve(["a:1"])[0].payload
        assert got["file_id"] == "a" and type(loaded.payloads._items[loaded.row_of["a:1"]]) is dict
    seg = path / "seg-000001.jsonl"
    lines = seg.read_bytes().split(b"\n")
    at = lines[3].index(b'"payload":') + len(b'"payload":')
    lines[3] = lines[3][:at] + b"X" + lines[3][at + 1 :]  # the point a:2's payload no longer parses
    seg.write_bytes(b"\n".join(lines))
    with MemoryBackend(settings) as b3:
        c3 = b3.collection("lazy")
        assert {p.id for p in c3.retrieve(["a:0", "a:3"])} == {"a:0", "a:3"}
        with pytest.raises(StoreCorrupt, match=r"'lazy'.*does not parse"):
            c3.retrieve(["a:2"])


def test_newer_format_is_refused(settings):
    with MemoryBackend(settings) as b:
        c = b.collection("future")
        c.ensure_collection(DIM)
        manifest = json.loads((c.path / MANIFEST).read_text())
    manifest["format"] = 99
    (c.path / MANIFEST).write_text(json.dumps(manifest))
    with MemoryBackend(settings) as b2, pytest.raises(StoreCorrupt, match="newer version"):
        b2.collection("future").info()


NAMES = [
    "Team Notes",
    "team notes",
    "TEAM NOTES",
    "a/b",
    "a\\b",
    "../x",
    "..",
    ".",
    "日本語のメモ",
    "emoji 🧠 store",
    "x" * 500,
    " padded ",
    "CON",
    "with\nnewline",
    "ﬂour",
]


def test_any_name_gets_its_own_folder_inside_the_root(backend, settings):
    for i, name in enumerate(NAMES):
        c = backend.collection(name)
        c.ensure_collection(DIM)
        c.upsert([Point(i, vec(i), {"name": name})])
    root = settings.vector_store_dir
    folders = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert len(folders) == len(NAMES) and all(p.parent == root for p in folders)
    assert all(len(p.name) <= 60 and p.name.isascii() for p in folders)
    assert folder_name("Team Notes").startswith("team-notes-")
    assert folder_name("team notes") != folder_name("Team Notes")
    assert backend.list_collections() == sorted(NAMES)
    with MemoryBackend(settings) as b2:
        assert b2.list_collections() == sorted(NAMES)
        for name in NAMES:
            assert [p.payload["name"] for p in b2.collection(name).scroll()] == [name]
    assert not (root.parent / "x").exists()
    for bad in ("", None, 3, "\ud800"):
        with pytest.raises(InvalidArgument):
            backend.collection(bad)


def test_drop_removes_the_folder_and_recreate_starts_empty(backend, settings):
    c = backend.collection("gone")
    c.ensure_collection(DIM)
    c.upsert(chunk_points("a", 3))
    c.drop_collection()
    c.drop_collection()  # missing: not an error
    assert not c.path.exists() and backend.list_collections() == []
    with pytest.raises(StoreNotFound, match="'gone'"):
        c.count()
    c.ensure_collection(8, "euclid")
    assert c.count() == 0 and c.info().size == 8 and c.search(vec(0, 8)) == []


def test_ensure_collection_checks_size_and_distance(backend):
    c = backend.collection("prep")
    c.ensure_collection(DIM, "dot")
    c.ensure_collection(DIM, "dot")
    with pytest.raises(DimensionMismatch, match="16 dimensions"):
        c.ensure_collection(8, "dot")
    with pytest.raises(DistanceMismatch, match="'dot'"):
        c.ensure_collection(DIM, "cosine")
    for size, distance in ((0, "dot"), (True, "dot"), ("16", "dot"), (16, "hamming")):
        with pytest.raises(InvalidArgument):
            backend.collection("other").ensure_collection(size, distance)
    assert not backend.collection("other").collection_exists()


# ---------------------------------------------------------------------------------------------
# writes, compaction
# ---------------------------------------------------------------------------------------------


def test_bad_batches_write_nothing(backend):
    c = backend.collection("strict")
    c.ensure_collection(DIM)
    c.upsert(chunk_points("a", 2))
    before = sorted(os.listdir(c.path))
    bad_batches = [
        [*chunk_points("b", 2), Point("b:x", np.ones(8), {})],  # wrong size
        [Point("dup", vec(1), {}), Point("dup", vec(2), {})],
        [Point("n", np.full(DIM, np.nan), {})],
        [Point("o", vec(1), {"when": object()})],
        [Point(2**70, vec(1), {})],
        [Point(1.5, vec(1), {})],
    ]
    for batch in bad_batches:
        with pytest.raises((InvalidArgument, DimensionMismatch)):
            c.upsert(batch)
        with pytest.raises((InvalidArgument, DimensionMismatch)):
            c.replace({"file_id": "a"}, batch)
    with pytest.raises(InvalidArgument):
        c.replace({}, chunk_points("a", 1))
    assert sorted(os.listdir(c.path)) == before and c.count() == 2 and c.count({"file_id": "a"}) == 2
    with pytest.raises(StoreNotFound):
        backend.collection("nope").upsert(chunk_points("a", 1))


def test_remove_by_ids_and_where(backend, settings):
    c = backend.collection("rm")
    c.ensure_collection(DIM)
    c.upsert(chunk_points("a", 4) + chunk_points("b", 3) + [Point(7, vec(7), {"file_id": "c"})])
    assert c.remove() == 0 and c.remove(ids=["zzz"]) == 0
    for bare in ("a:0", 7):
        with pytest.raises(InvalidArgument):
            c.remove(ids=bare)
    assert c.remove(ids=["a:0", 7, "a:0"], where={"file_id": "b"}) == 5
    assert c.count() == 3 and {p.id for p in c.scroll()} == {"a:1", "a:2", "a:3"}
    with MemoryBackend(settings) as b2:
        assert {p.id for p in b2.collection("rm").scroll()} == {"a:1", "a:2", "a:3"}


@pytest.mark.slow
def test_many_small_writes_are_merged_and_garbage_is_compacted(tmp_path):
    settings = make_settings(tmp_path)
    with MemoryBackend(settings) as b:
        c = b.collection("lsm")
        c.ensure_collection(DIM)
        for v in range(100):
            for f in range(4):
                c.replace({"file_id": f"f{f}"}, chunk_points(f"f{f}", 5 + (v + f) % 3, version=v))
            segments = json.loads((c.path / MANIFEST).read_text())["segments"]
            assert len(segments) <= MAX_SEGMENTS
        dead = sum(s["rows"] for s in segments) - c.count()
        assert dead <= max(1024, c.count())
        expected = {p.id: p.payload for f in range(4) for p in chunk_points(f"f{f}", 5 + (99 + f) % 3, 99)}
        assert {p.id: p.payload for p in c.scroll()} == expected
        listed = {f"seg-{s['seg']:06d}.{e}" for s in segments for e in ("jsonl", "npy")}
        assert set(os.listdir(c.path)) - listed - {LEXICAL_DIR} == {MANIFEST}  # merged-away files deleted
        hits = c.search(vec(0), limit=5)
    with MemoryBackend(settings) as b2:
        c2 = b2.collection("lsm")
        assert {p.id: p.payload for p in c2.scroll()} == expected
        assert c2.search(vec(0), limit=5) == hits


@pytest.mark.slow
def test_upserts_in_batches_keep_few_segments(backend):
    c = backend.collection("batches")
    c.ensure_collection(DIM)
    for start in range(0, 1500, 20):  # 75 writes
        c.upsert([Point(i, vec(i), {"i": i}) for i in range(start, start + 20)])
    segments = json.loads((c.path / MANIFEST).read_text())["segments"]
    assert len(segments) < 25
    assert sum(s["rows"] for s in segments) == 1500 == c.count()
    assert [p.id for p in c.scroll(limit=5)] == [0, 1, 2, 3, 4]


# ---------------------------------------------------------------------------------------------
# search details
# ---------------------------------------------------------------------------------------------


def test_filtered_search_returns_k_whenever_k_match(backend):
    c = backend.collection("filtered")
    c.ensure_collection(DIM)
    pts = [Point(i, vec(i), {"file_id": f"f{i % 50}", "page": i % 3, "flag": i % 2 == 0}) for i in range(2000)]
    c.upsert(pts)
    q = vec(99999)
    hits = c.search(q, limit=10, where={"file_id": "f7"})
    assert len(hits) == 10 and all(h.payload["file_id"] == "f7" for h in hits)
    assert len(c.search(q, limit=100, where={"file_id": "f7"})) == 40
    both = c.search(q, limit=100, where={"file_id": "f7", "page": 1})
    assert both and all(h.payload["page"] == 1 and h.payload["file_id"] == "f7" for h in both)
    assert len(both) == sum(1 for i in range(2000) if i % 50 == 7 and i % 3 == 1)
    assert c.search(q, where={"flag": 1}) == []  # True is not 1
    assert len(c.search(q, limit=3, where={"flag": True})) == 3
    assert c.search(q, where={"file_id": "missing"}) == []
    assert c.count({"page": 1.0}) == c.count({"page": 1}) == sum(1 for i in range(2000) if i % 3 == 1)
    # raw_filter: a predicate on the payload, which wins over where
    odd = c.search(q, limit=5, where={"file_id": "f7"}, raw_filter=lambda p: p["file_id"] == "f8")
    assert len(odd) == 5 and all(h.payload["file_id"] == "f8" for h in odd)
    with pytest.raises(InvalidArgument):
        c.search(q, raw_filter={"file_id": "f8"})
    with pytest.raises(InvalidArgument):
        c.search(q, where={"file_id": ["f7"]})
    with pytest.raises(InvalidArgument):
        c.search(q, limit=0)
    # the index follows writes
    c.replace({"file_id": "f7"}, [Point("new", vec(1), {"file_id": "f7", "page": 1})])
    assert [h.id for h in c.search(q, limit=10, where={"file_id": "f7"})] == ["new"]
    assert c.facet("file_id")["f7"] == 1 and c.facet("file_id")["f8"] == 40
    assert c.facet("page", where={"file_id": "f7"}) == {1: 1}


def test_ties_are_broken_by_insertion_order(backend):
    c = backend.collection("ties")
    c.ensure_collection(4, "dot")
    same = np.array([1, 0, 0, 0], np.float32)
    c.upsert([Point(f"t{i}", same, {}) for i in range(30)])
    c.upsert([Point("better", same * 2, {})])
    assert [h.id for h in c.search(same, limit=5)] == ["better", "t0", "t1", "t2", "t3"]
    c.upsert([Point("t1", same, {"again": True})])  # overwritten: now last
    assert [h.id for h in c.search(same, limit=31)][-1] == "t1"
    assert [h.id for h in c.search(same, limit=4, where={})] == ["better", "t0", "t2", "t3"]


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclid", "manhattan"])
def test_score_threshold_follows_the_distance(backend, distance):
    c = backend.collection(f"thr-{distance}")
    c.ensure_collection(4, distance)
    rng = np.random.default_rng(3)
    c.upsert([Point(i, rng.standard_normal(4) * 0.7, {}) for i in range(200)])
    q = np.array([0.5, 0.1, 0, 0], np.float32)
    everything = c.search(q, limit=200)
    higher = distance in ("cosine", "dot")
    threshold = everything[60].score
    kept = c.search(q, limit=200, score_threshold=threshold)
    good = [h.id for h in everything if (h.score >= threshold if higher else h.score <= threshold)]
    assert [h.id for h in kept] == good
    assert 60 < len(kept) < 200
    scores = [h.score for h in everything]
    assert scores == sorted(scores, reverse=higher)


def test_search_skips_deleted_rows_and_cosine_scores_are_bounded(backend):
    c = backend.collection("dead")
    c.ensure_collection(DIM)
    c.upsert([Point(i, vec(i), {"file_id": "a" if i < 180 else "b"}) for i in range(200)])
    c.remove(where={"file_id": "a"})
    hits = c.search(vec(5), limit=50)
    assert len(hits) == 20 and {h.payload["file_id"] for h in hits} == {"b"}
    assert all(-1.0 <= h.score <= 1.0 for h in hits)
    assert c.search(vec(190), limit=1)[0].score == 1.0
    assert c.search(vec(5), with_payload=False, limit=1)[0].payload is None
    with pytest.raises(DimensionMismatch):
        c.search(np.ones(3))
    assert [p.id for p in c.retrieve([199, 5, 190, 199])] == [199, 190]
    got = c.retrieve([190], with_vectors=True)[0].vector
    assert got.dtype == np.float32 and np.allclose(got, vec(190) / np.linalg.norm(vec(190)), atol=1e-6)
    assert list(c.scroll(limit=0)) == [] and len(list(c.scroll(limit=3))) == 3
    assert next(iter(c.scroll(limit=1))).vector.shape == (0,)


def test_backend_is_registered_under_its_entry_point():
    from importlib.metadata import entry_points

    eps = {ep.name: ep for ep in entry_points(group="knowledge.vector_store_backends")}
    assert eps["memory"].load() is MemoryBackend and MemoryBackend.name == "memory"


def test_two_backend_instances_in_one_process_serialise_their_writes(settings):
    b1, b2 = MemoryBackend(settings), MemoryBackend(settings)
    try:
        b1.collection("two").ensure_collection(4)

        def write(backend, prefix):
            c = backend.collection("two")
            for i in range(25):
                c.upsert([Point(f"{prefix}{i}", np.ones(4), {"file_id": prefix})])

        pairs = ((b1, "a"), (b2, "b"), (b1, "c"), (b2, "d"))
        threads = [threading.Thread(target=write, args=pair) for pair in pairs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert b1.collection("two").count() == b2.collection("two").count() == 100
        assert b2.collection("two").facet("file_id") == {"a": 25, "b": 25, "c": 25, "d": 25}
    finally:
        b1.close()
        b2.close()


def test_vectors_of_any_numeric_form_are_stored_as_float32(backend):
    c = backend.collection("forms")
    c.ensure_collection(3, "dot")
    c.upsert([Point("list", [1, 2, 3], {}), Point("f64", np.array([0.5, 0.25, 1e-3]), {}), Point("int", np.arange(3), {})])
    got = {p.id: p.vector for p in c.retrieve(["list", "f64", "int"], with_vectors=True)}
    assert all(v.dtype == np.float32 and v.shape == (3,) for v in got.values())
    np.testing.assert_array_equal(got["list"], [1, 2, 3])
    np.testing.assert_allclose(got["f64"], [0.5, 0.25, 1e-3])
    with pytest.raises(DimensionMismatch):
        c.upsert([Point("ragged", [1, 2, 3], {}), Point("short", [1, 2], {})])
    with pytest.raises(InvalidArgument):
        c.upsert([Point("inf", [1, np.inf, 3], {})])
    assert c.count() == 3


def test_a_disk_error_is_a_storage_error_and_the_store_keeps_its_last_version(backend, monkeypatch):
    import errno

    import knowledge.vectorstore.memory.storage as memory
    from knowledge.errors import StorageError

    c = backend.collection("disk")
    c.ensure_collection(4)
    c.upsert([Point("a", np.ones(4, np.float32), {"v": 1})])

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(memory, "_write_file", full)
    with pytest.raises(StorageError, match="No space left on device"):
        c.upsert([Point("b", np.ones(4, np.float32), {"v": 2})])
    monkeypatch.undo()
    assert c.count() == 1 and c.retrieve(["a"])[0].payload == {"v": 1}
    c.upsert([Point("b", np.ones(4, np.float32), {"v": 2})])  # and it works again
    assert c.count() == 2
