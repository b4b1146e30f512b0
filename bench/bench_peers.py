"""Side-by-side benchmark: the built-in ``memory`` backend vs Chroma vs LanceDB vs the numpy floor.

Every engine gets the same ``--n`` x ``--dim`` float32 vectors (unit length, cosine), the same chunk
payloads (file_id, chunk_index, group_id, ~400-character text; 50 chunks per file, 100 groups of whole
files, so one group is 1% of the points) and the same ``--queries`` queries (k=10, each near an
existing point), in one process run. Data sets: ``random`` (gaussian, normalised) and ``clustered``
(1,000 centres + noise, normalised; see docs/benchmarks.md "Peers" for the noise level and why).

Per engine: inserts/s in batches of 1,000; index build (an engine's explicit index step, if any);
disk bytes / raw bytes (float32 vectors + UTF-8 text); reopen + first query (a new process opens the
folder and answers one query: nothing cached in memory, the OS page cache warm); query p50/p95 and
recall@10 against the exact numpy answer; filtered query (``group_id`` equal: 1% of the points, each
engine's native filter) p50 and recall@10. The query phase interleaves the engines query by query, so
all see the same machine load. Peers come from ``requirements-peers.txt``; a missing one is skipped.

Usage: ``python bench/bench_peers.py [--n 100000] [--dim 384] [--queries 200]
[--engines memory,numpy,chroma,lancedb,lancedb-ivfpq] [--sets random,clustered] [--quick] [--json F]``.
Prints a Markdown table per data set and ratios against the memory backend; never fails on a miss.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# LanceDB logs a deprecation warning on every query that selects columns without "_distance".
os.environ.setdefault("LANCEDB_LOG", "error")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CHUNKS_PER_FILE = 50
GROUPS = 100  # group_id = file number % 100: one group holds 1% of the points
CLUSTERS = 1000
# Clustered set: point = centre + gaussian noise of per-dimension sigma CLUSTER_NOISE / sqrt(dim), so
# the noise vector is about as long as the (unit) centre: two points of one cluster have cosine ~0.5,
# of two clusters ~0 -- roughly MiniLM's same-topic vs unrelated sentences.
CLUSTER_NOISE = 1.0
# Queries: an existing point + noise of length ~QUERY_NOISE (relative), normalised.
QUERY_NOISE = 0.5
BATCH = 1000
WARMUP = 5
ENGINES = ("memory", "numpy", "chroma", "lancedb", "lancedb-ivfpq")
PEERS_HINT = "skipped: pip install -r requirements-peers.txt"
WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an which not have has but"
    " were they their one all been more when there can if will would about into than other vector store"
    " chunk embedding search query model index payload backend segment manifest file page section heading"
    " memory disk load cosine distance score filter batch commit crash lock"
).split()


# -- data ----------------------------------------------------------------------------------------------


@dataclass
class DataSet:
    """One data set: ``vectors`` ``(n, d)`` float32 unit rows; ids, payload columns, queries."""

    name: str
    vectors: np.ndarray
    ids: list[str]
    file_ids: list[str]
    chunk_index: np.ndarray
    group_id: np.ndarray
    texts: list[str]
    queries: np.ndarray  # (q, d) float32 unit rows
    query_groups: np.ndarray  # (q,) the group each filtered query asks for
    truth: np.ndarray = field(init=False)  # (q, k) exact top-k rows
    truth_kth: np.ndarray = field(init=False)  # (q,) k-th best exact score (ties count as hits)
    ftruth_kth: np.ndarray = field(init=False)
    group_rows: list[np.ndarray] = field(init=False)

    @property
    def raw_bytes(self) -> int:
        return int(self.vectors.nbytes) + sum(len(t.encode("utf-8")) for t in self.texts)

    def payload(self, row: int) -> dict[str, Any]:
        return {
            "file_id": self.file_ids[row],
            "chunk_index": int(self.chunk_index[row]),
            "group_id": int(self.group_id[row]),
            "text": self.texts[row],
        }

    def ground_truth(self, k: int) -> None:
        """Exact cosine top-k for every query, unfiltered and within its query's group."""
        self.group_rows = [np.flatnonzero(self.group_id == g) for g in range(GROUPS)]
        scores = self.queries @ self.vectors.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        self.truth = top
        self.truth_kth = np.take_along_axis(scores, top, axis=1).min(axis=1)
        kth = []
        for qi, g in enumerate(self.query_groups):
            s = scores[qi, self.group_rows[g]]
            kk = min(k, len(s))
            kth.append(np.partition(-s, kk - 1)[kk - 1] * -1 if kk else np.inf)
        self.ftruth_kth = np.asarray(kth, dtype=np.float32)


def make_texts(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` texts of about 400 characters: each its own salad of 120 words drawn from ``WORDS``."""
    words = np.asarray(WORDS)[rng.integers(0, len(WORDS), size=(n, 120))]
    return [f"{i:07d} {' '.join(row)[:390]}" for i, row in enumerate(words)]


def normalise(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_set(name: str, n: int, dim: int, queries: int, k: int, seed: int) -> DataSet:
    rng = np.random.default_rng(seed)
    if name == "random":
        vectors = normalise(rng.standard_normal((n, dim), dtype=np.float32))
    elif name == "clustered":
        centres = normalise(rng.standard_normal((CLUSTERS, dim), dtype=np.float32))
        labels = rng.integers(0, CLUSTERS, size=n)
        noise = rng.standard_normal((n, dim), dtype=np.float32) * np.float32(CLUSTER_NOISE / math.sqrt(dim))
        vectors = normalise(centres[labels] + noise)
    else:
        raise SystemExit(f"unknown data set {name!r}: expected random or clustered")
    rows = np.arange(n)
    files = rows // CHUNKS_PER_FILE
    file_ids = [f"file-{f:05d}" for f in files]
    near = rng.integers(0, n, size=queries)
    qnoise = rng.standard_normal((queries, dim), dtype=np.float32) * np.float32(QUERY_NOISE / math.sqrt(dim))
    data = DataSet(
        name=name,
        vectors=vectors,
        ids=[f"{file_ids[i]}:{i % CHUNKS_PER_FILE}" for i in range(n)],
        file_ids=file_ids,
        chunk_index=rows % CHUNKS_PER_FILE,
        group_id=files % GROUPS,
        texts=make_texts(n, rng),
        queries=normalise(vectors[near] + qnoise),
        query_groups=np.arange(queries) % min(GROUPS, max(1, int(files.max()) + 1)),
    )
    data.ground_truth(k)
    return data


# -- engines -------------------------------------------------------------------------------------------


class Skipped(Exception):
    """The engine's package is not installed."""


class Engine:
    """One engine on one data set. ``search`` returns the hits' row numbers, best first."""

    name = ""
    label = ""
    inserts = True

    def __init__(self, data: DataSet, folder: Path) -> None:
        self.data = data
        self.folder = folder
        self.row_of = {pid: i for i, pid in enumerate(data.ids)} if self.inserts else {}

    def create(self, dim: int) -> None: ...
    def insert(self, start: int, stop: int) -> None: ...
    def build_index(self) -> float | None:
        """Seconds spent in the engine's explicit index step after the inserts, ``None`` if it has none."""
        return None

    def close(self) -> None: ...
    def open(self) -> None: ...
    def search(self, q: np.ndarray, k: int) -> list[int]:
        raise NotImplementedError

    def search_group(self, q: np.ndarray, k: int, group: int) -> list[int]:
        raise NotImplementedError


class NumpyFloor(Engine):
    """Exact scan in this process: ``matrix @ q`` + ``argpartition`` top-k (the filtered scan uses the
    group's row numbers, known in advance)."""

    name, label, inserts = "numpy", "numpy exact floor, same process", False

    def open(self) -> None:
        self.matrix = self.data.vectors
        self.sub = [(rows, self.matrix[rows]) for rows in self.data.group_rows]

    def search(self, q: np.ndarray, k: int) -> list[int]:
        return top_k(self.matrix @ q, k).tolist()

    def search_group(self, q: np.ndarray, k: int, group: int) -> list[int]:
        rows, sub = self.sub[group]
        return rows[top_k(sub @ q, k)].tolist()


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top])]


class Memory(Engine):
    """The product's ``memory`` backend through its public API (``MemoryBackend.collection``)."""

    name, label = "memory", "knowledge memory backend"

    def _settings(self) -> Any:
        if getattr(self, "settings", None) is None:
            self.settings = self._load_settings()
        return self.settings

    def _load_settings(self) -> Any:
        from knowledge.config import load_settings

        return load_settings(data_dir=str(self.folder), vector_store={"max_chunks_per_store": max(len(self.data.ids), 1)})

    def create(self, dim: int) -> None:
        from knowledge.vectorstore.memory import MemoryBackend

        self.backend = MemoryBackend(self._settings())
        self.coll = self.backend.collection("bench")
        self.coll.ensure_collection(dim)
        if hasattr(self.coll, "ensure_ann_index"):
            self.label = "knowledge memory backend (ANN index + exact rescoring)"
        else:
            self.label = "knowledge memory backend (exact scan)"

    def insert(self, start: int, stop: int) -> None:
        from knowledge.vectorstore.base import Point

        d = self.data
        self.coll.upsert([Point(id=d.ids[i], vector=d.vectors[i], payload=d.payload(i)) for i in range(start, stop)])

    def build_index(self) -> float | None:
        hook = getattr(self.coll, "ensure_ann_index", None)
        if hook is None:
            return None
        t = time.perf_counter()
        hook(timeout=None)
        return time.perf_counter() - t

    def close(self) -> None:
        self.backend.close()

    def open(self) -> None:
        from knowledge.vectorstore.memory import MemoryBackend

        self.backend = MemoryBackend(self._settings())
        self.coll = self.backend.collection("bench")

    def search(self, q: np.ndarray, k: int) -> list[int]:
        return [self.row_of[h.id] for h in self.coll.search(q, limit=k)]

    def search_group(self, q: np.ndarray, k: int, group: int) -> list[int]:
        return [self.row_of[h.id] for h in self.coll.search(q, limit=k, where={"group_id": group})]


class Chroma(Engine):
    """Chroma's ``PersistentClient`` (HNSW, cosine space), telemetry off, no embedding function: the
    bench passes its own vectors."""

    name = "chroma"

    def __init__(self, data: DataSet, folder: Path) -> None:
        try:
            import chromadb
        except ImportError as exc:
            raise Skipped(PEERS_HINT) from exc
        self.label = f"Chroma {chromadb.__version__} (HNSW)"
        super().__init__(data, folder)

    def _client(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        return chromadb.PersistentClient(path=str(self.folder), settings=Settings(anonymized_telemetry=False))

    def create(self, dim: int) -> None:
        self.client = self._client()
        self.coll = self.client.create_collection(
            "bench", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )

    def insert(self, start: int, stop: int) -> None:
        d = self.data
        self.coll.add(
            ids=d.ids[start:stop],
            embeddings=d.vectors[start:stop],
            metadatas=[{k: v for k, v in d.payload(i).items() if k != "text"} for i in range(start, stop)],
            documents=d.texts[start:stop],
        )

    def close(self) -> None:
        from chromadb.api.client import SharedSystemClient

        del self.coll, self.client
        SharedSystemClient.clear_system_cache()  # a new client must really reopen the folder
        gc.collect()

    def open(self) -> None:
        self.client = self._client()
        self.coll = self.client.get_collection("bench", embedding_function=None)

    def search(self, q: np.ndarray, k: int) -> list[int]:
        res = self.coll.query(query_embeddings=q[None, :], n_results=k)
        return [self.row_of[i] for i in res["ids"][0]]

    def search_group(self, q: np.ndarray, k: int, group: int) -> list[int]:
        res = self.coll.query(query_embeddings=q[None, :], n_results=k, where={"group_id": group})
        return [self.row_of[i] for i in res["ids"][0]]


class Lance(Engine):
    """LanceDB (local folder): by default a flat scan of the table; filters are SQL, applied first."""

    name = "lancedb"
    COLUMNS = ("id", "file_id", "chunk_index", "group_id", "text")

    def __init__(self, data: DataSet, folder: Path) -> None:
        try:
            import lancedb  # noqa: F401 - only: is it installed?
        except ImportError as exc:
            raise Skipped(PEERS_HINT) from exc
        from importlib.metadata import version

        self.label = f"LanceDB {version('lancedb')} (flat scan)"
        self.table: Any = None
        super().__init__(data, folder)

    def create(self, dim: int) -> None:
        import lancedb

        self.dim = dim
        self.db = lancedb.connect(str(self.folder))

    def insert(self, start: int, stop: int) -> None:
        import pyarrow as pa

        d = self.data
        vec = pa.FixedSizeListArray.from_arrays(pa.array(d.vectors[start:stop].reshape(-1)), self.dim)
        batch = pa.table(
            {
                "id": d.ids[start:stop],
                "vector": vec,
                "file_id": d.file_ids[start:stop],
                "chunk_index": pa.array(d.chunk_index[start:stop], pa.int32()),
                "group_id": pa.array(d.group_id[start:stop], pa.int32()),
                "text": d.texts[start:stop],
            }
        )
        if self.table is None:
            self.table = self.db.create_table("bench", data=batch)
        else:
            self.table.add(batch)

    def close(self) -> None:
        del self.table, self.db
        self.table = None
        gc.collect()

    def open(self) -> None:
        import lancedb

        self.db = lancedb.connect(str(self.folder))
        self.table = self.db.open_table("bench")

    def _query(self, q: np.ndarray, k: int) -> Any:
        return self.table.search(q, vector_column_name="vector").distance_type("cosine").limit(k).select(list(self.COLUMNS))

    def _rows(self, query: Any) -> list[int]:
        return [self.row_of[i] for i in query.to_arrow().column("id").to_pylist()]

    def search(self, q: np.ndarray, k: int) -> list[int]:
        return self._rows(self._query(q, k))

    def search_group(self, q: np.ndarray, k: int, group: int) -> list[int]:
        return self._rows(self._query(q, k).where(f"group_id = {group}", prefilter=True))


class LanceIvfPq(Lance):
    """LanceDB with its default ANN index, IVF_PQ (``create_index``): sqrt(n) partitions, d/8 sub-vectors,
    queries probe 20 partitions and rescore 10 x k candidates exactly (``refine_factor``)."""

    name = "lancedb-ivfpq"
    NPROBES, REFINE = 20, 10

    def __init__(self, data: DataSet, folder: Path) -> None:
        super().__init__(data, folder)
        self.label = self.label.replace("flat scan", f"IVF_PQ, nprobes {self.NPROBES}, refine x{self.REFINE}")

    def build_index(self) -> float | None:
        n = len(self.data.ids)
        sub = next(s for s in (self.dim // 8, self.dim // 4, self.dim // 2, 1) if s >= 1 and self.dim % s == 0)
        from lancedb.index import IvfPq

        t = time.perf_counter()
        self.table.create_index(
            "vector", config=IvfPq(distance_type="cosine", num_partitions=max(1, int(math.sqrt(n))), num_sub_vectors=sub)
        )
        return time.perf_counter() - t

    def _query(self, q: np.ndarray, k: int) -> Any:
        return super()._query(q, k).nprobes(self.NPROBES).refine_factor(self.REFINE)


ENGINE_CLASSES: dict[str, type[Engine]] = {
    "memory": Memory,
    "numpy": NumpyFloor,
    "chroma": Chroma,
    "lancedb": Lance,
    "lancedb-ivfpq": LanceIvfPq,
}


# -- measuring -----------------------------------------------------------------------------------------


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def recall(data: DataSet, qi: int, rows: Sequence[int], k: int, group: int | None = None) -> float:
    """Share of the true top-k found: a hit counts when its exact score is at least the k-th best exact
    score (minus 1e-5, so an engine's equally good tie is not a miss). Filtered: within the group."""
    if group is None:
        kth, wanted = data.truth_kth[qi], k
    else:
        kth, wanted = data.ftruth_kth[qi], min(k, len(data.group_rows[group]))
        if any(data.group_id[r] != group for r in rows):
            return 0.0
    if not wanted:
        return 1.0
    scores = data.vectors[list(rows)] @ data.queries[qi] if rows else np.zeros(0)
    return min(1.0, float(np.sum(scores >= kth - 1e-5)) / wanted)


def reopen_in_child(engine: str, folder: Path, data: DataSet, qfile: Path) -> float | None:
    """Seconds for a new process to open ``folder`` and answer one query (imports not counted)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--reopen-child",
        engine,
        "--folder",
        str(folder),
        "--query-file",
        str(qfile),
        "--n",
        str(len(data.ids)),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    for line in out.stdout.splitlines():
        if line.startswith("REOPEN "):
            return float(line.split()[1])
    print(f"    reopen of {engine} failed: {out.stderr.strip()[-500:]}", flush=True)
    return None


def reopen_child(engine: str, folder: Path, qfile: Path, n: int) -> None:
    """The child's side: import the engine, then time open + one query."""
    q = np.load(qfile)
    dim = q.shape[0]
    data = DataSet(
        name="reopen",
        vectors=np.zeros((0, dim), np.float32),
        ids=[],
        file_ids=[],
        chunk_index=np.zeros(0),
        group_id=np.zeros(0),
        texts=[],
        queries=q[None, :],
        query_groups=np.zeros(1, int),
    )
    eng = ENGINE_CLASSES[engine](data, folder)
    if isinstance(eng, Memory):  # imports and settings before the clock starts
        import knowledge.vectorstore.base
        import knowledge.vectorstore.memory  # noqa: F401

        eng._settings()
    elif engine == "chroma":
        import chromadb  # noqa: F401
    else:
        import lancedb  # noqa: F401
        import pyarrow  # noqa: F401
    eng.row_of = _AnyRow()
    t = time.perf_counter()
    eng.open()
    hits = eng.search(q, 10)
    took = time.perf_counter() - t
    assert len(hits) == min(10, n), hits
    print(f"REOPEN {took:.6f}", flush=True)


class _AnyRow(dict):  # the child has no id -> row map; any id maps to 0
    def __missing__(self, key: Any) -> int:
        return 0


@dataclass
class Result:
    label: str
    insert_rate: float | None = None
    index_build: float | None = None
    disk_ratio: float | None = None
    reopen: float | None = None
    latencies: list[float] = field(default_factory=list)
    flatencies: list[float] = field(default_factory=list)
    recalls: list[float] = field(default_factory=list)
    frecalls: list[float] = field(default_factory=list)
    skipped: str | None = None

    def summary(self) -> dict[str, Any]:
        def p(v: list[float], q: float) -> float | None:
            return float(np.percentile(v, q)) if v else None

        return {
            "label": self.label,
            "skipped": self.skipped,
            "insert_per_s": self.insert_rate,
            "index_build_s": self.index_build,
            "disk_ratio": self.disk_ratio,
            "reopen_s": self.reopen,
            "p50_ms": _ms(p(self.latencies, 50)),
            "p95_ms": _ms(p(self.latencies, 95)),
            "recall": float(np.mean(self.recalls)) if self.recalls else None,
            "filtered_p50_ms": _ms(p(self.flatencies, 50)),
            "filtered_recall": float(np.mean(self.frecalls)) if self.frecalls else None,
        }


def _ms(s: float | None) -> float | None:
    return None if s is None else s * 1000.0


def run_set(data: DataSet, engines: list[str], k: int, work: Path, log: Callable[[str], None]) -> dict[str, Result]:
    n, dim = data.vectors.shape
    results: dict[str, Result] = {}
    live: dict[str, Engine] = {}
    qfile = work / f"{data.name}-query.npy"
    np.save(qfile, data.queries[0])
    for name in engines:
        folder = work / f"{data.name}-{name}"
        folder.mkdir()
        try:
            eng = ENGINE_CLASSES[name](data, folder)
        except Skipped as exc:
            results[name] = Result(label=name, skipped=str(exc))
            log(f"  {name}: {exc}")
            continue
        res = results[name] = Result(label=eng.label)
        if eng.inserts:
            log(f"  {name}: inserting {n:,} points in batches of {BATCH:,} ...")
            eng.create(dim)
            t = time.perf_counter()
            for start in range(0, n, BATCH):
                eng.insert(start, min(n, start + BATCH))
            res.insert_rate = n / (time.perf_counter() - t)
            res.index_build = eng.build_index()
            res.label = eng.label
            eng.close()
            res.disk_ratio = folder_bytes(folder) / data.raw_bytes
            res.reopen = reopen_in_child(name, folder, data, qfile)
            log(
                f"    {res.insert_rate:,.0f} inserts/s"
                + (f", index build {res.index_build:.1f} s" if res.index_build is not None else "")
                + f", disk/raw {res.disk_ratio:.2f}, reopen + 1st query "
                + (f"{res.reopen:.2f} s" if res.reopen is not None else "failed")
            )
        eng.open()
        live[name] = eng
    # The query phase: engine after engine for each query, so all see the same load.
    log(f"  querying: {len(data.queries)} queries x {len(live)} engines, unfiltered and filtered ...")
    for eng in live.values():
        for qi in range(min(WARMUP, len(data.queries))):
            eng.search(data.queries[qi], k)
            eng.search_group(data.queries[qi], k, int(data.query_groups[qi]))
    for qi, q in enumerate(data.queries):
        g = int(data.query_groups[qi])
        for name, eng in live.items():
            res = results[name]
            t = time.perf_counter()
            rows = eng.search(q, k)
            res.latencies.append(time.perf_counter() - t)
            t = time.perf_counter()
            frows = eng.search_group(q, k, g)
            res.flatencies.append(time.perf_counter() - t)
            res.recalls.append(recall(data, qi, rows, k))
            res.frecalls.append(recall(data, qi, frows, k, g))
    for eng in live.values():
        eng.close()
    return results


# -- report --------------------------------------------------------------------------------------------


def fmt(v: float | None, spec: str, unit: str = "") -> str:
    return "—" if v is None else f"{v:{spec}}{unit}"


def table(results: dict[str, Result]) -> list[str]:
    lines = [
        "| engine | insert/s | index build | disk / raw | reopen + 1st query | p50 | p95 | recall@10 |"
        " filtered p50 (1%) | filtered recall@10 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results.values():
        if res.skipped:
            lines.append(f"| {res.label} | {res.skipped} |" + " |" * 8)
            continue
        s = res.summary()
        lines.append(
            f"| {s['label']} | {fmt(s['insert_per_s'], ',.0f')} | {fmt(s['index_build_s'], '.1f', ' s')}"
            f" | {fmt(s['disk_ratio'], '.2f')} | {fmt(s['reopen_s'], '.2f', ' s')} | {fmt(s['p50_ms'], '.2f', ' ms')}"
            f" | {fmt(s['p95_ms'], '.2f', ' ms')} | {fmt(s['recall'], '.3f')} | {fmt(s['filtered_p50_ms'], '.2f', ' ms')}"
            f" | {fmt(s['filtered_recall'], '.3f')} |"
        )
    return lines


def ratios(results: dict[str, Result]) -> list[str]:
    ours = results.get("memory")
    if ours is None or ours.skipped or not ours.latencies:
        return []
    o = ours.summary()
    lines = [
        "| engine ÷ memory backend | insert/s | disk / raw | reopen + 1st query | p50 | filtered p50 |",
        "|---|---|---|---|---|---|",
    ]
    for name, res in results.items():
        if name == "memory" or res.skipped:
            continue
        s = res.summary()

        def r(key: str, s: dict[str, Any] = s) -> str:
            return "—" if s[key] is None or not o[key] else f"{s[key] / o[key]:.2f}x"

        lines.append(
            f"| {s['label']} | {r('insert_per_s')} | {r('disk_ratio')} | {r('reopen_s')} | {r('p50_ms')}"
            f" | {r('filtered_p50_ms')} |"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--n", type=int, default=None, help="points per data set (default 100000; 20000 with --quick)")
    parser.add_argument("--dim", type=int, default=384, help="vector size (default 384)")
    parser.add_argument("--queries", type=int, default=200, help="queries per data set (default 200)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated subset of {','.join(ENGINES)}")
    parser.add_argument("--sets", default="random,clustered", help="comma-separated subset of random,clustered")
    parser.add_argument("--quick", action="store_true", help="a smoke run: n=20000 unless --n is given")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument("--reopen-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--query-file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (20_000 if args.quick else 100_000)
    if args.reopen_child:
        reopen_child(args.reopen_child, args.folder, args.query_file, n)
        return
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    bad = [e for e in engines if e not in ENGINE_CLASSES]
    if bad:
        raise SystemExit(f"unknown engine(s) {', '.join(bad)}: expected a subset of {','.join(ENGINES)}")
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]

    def log(msg: str) -> None:
        print(msg, flush=True)

    load = os.getloadavg()
    log(
        f"peers benchmark: {n:,} points x {args.dim} dims, k={args.k}, {args.queries} queries, engines {','.join(engines)},"
        f" {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, numpy {np.__version__}"
    )
    report: dict[str, Any] = {"n": n, "dim": args.dim, "queries": args.queries, "k": args.k, "sets": {}}
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        for set_name in sets:
            t = time.perf_counter()
            data = make_set(set_name, n, args.dim, args.queries, args.k, args.seed)
            log(
                f"\n## {set_name}: {n:,} x {args.dim}"
                f" (generated with ground truth in {time.perf_counter() - t:.1f} s, not measured)"
            )
            results = run_set(data, engines, args.k, work, log)
            load = os.getloadavg()
            log(
                f"\n### {set_name} ({n:,} x {args.dim}, {args.queries} queries, k={args.k};"
                f" load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n"
            )
            for line in table(results):
                log(line)
            rlines = ratios(results)
            if rlines:
                log("")
                for line in rlines:
                    log(line)
            report["sets"][set_name] = {"load": list(load), "engines": {k: r.summary() for k, r in results.items()}}
            del data
            gc.collect()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
