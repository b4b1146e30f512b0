"""A 2-D map of a store: a PCA projection (numpy SVD) of a deterministic sample of its vectors, with
a query placed by the same components (the Search playground's map).

* :func:`pca_2d` -- the two principal components of ``(n, d)`` vectors, signs fixed so the same
  data always gives the same picture (:class:`Projection`).
* :func:`sample_points` -- at most ``max_points`` points of a store, chosen by a hash of their ids
  (the same sample on every run, whatever the scroll order), plus the points asked for (the hits).
* :func:`store_map` -- the sampled chunks as chart rows (the playground's ``map_rows`` adds the
  hits, with their rank, and the query); each row's ``label`` is its file's name shortened for a
  legend (:func:`short_names`), the full name stays in ``file`` for the tooltip.

Near on the map is a rough hint of near in meaning: two components keep only part of the variance
(:attr:`Projection.explained`).
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from knowledge.errors import InvalidArgument
from knowledge.text.render import plain_text
from knowledge.vectorstore.store import VectorStore

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.workbench import Workbench


@dataclass(frozen=True, slots=True)
class Projection:
    """A 2-D PCA basis: ``mean`` ``(d,)`` and ``components`` ``(2, d)`` float64 (unit rows, or zero
    rows when the data has fewer dimensions of variance), ``explained`` the variance ratio of each."""

    mean: np.ndarray
    components: np.ndarray
    explained: tuple[float, float]

    def project(self, vectors: Any) -> np.ndarray:
        """``(n, d)`` or ``(d,)`` vectors -> ``(n, 2)`` or ``(2,)`` coordinates."""
        v = np.asarray(vectors, dtype=np.float64)
        return (v - self.mean) @ self.components.T


def pca_2d(vectors: Any) -> Projection:
    """The two principal components of ``(n, d)`` vectors by SVD, signs fixed (the largest loading of
    each component is positive) so the same data always gives the same picture.

    Raises:
        InvalidArgument: not a non-empty 2-D array.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise InvalidArgument(f"PCA needs an (n, d) array with n, d >= 1, got shape {x.shape}.")
    mean = x.mean(axis=0)
    centred = x - mean
    components = np.zeros((2, x.shape[1]))
    explained = [0.0, 0.0]
    if x.shape[0] > 1:
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        total = float((s**2).sum())
        for i in range(min(2, vt.shape[0])):
            if s[i] <= 1e-12 * max(1.0, s[0]):
                continue
            row = vt[i]
            if row[np.argmax(np.abs(row))] < 0:
                row = -row
            components[i] = row
            explained[i] = float(s[i] ** 2 / total) if total else 0.0
    return Projection(mean, components, (explained[0], explained[1]))


def _sample_key(point_id: Any) -> int:
    return int.from_bytes(hashlib.blake2b(repr(point_id).encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class StoreMap:
    """A store's chunks in 2-D: ``rows`` (one dict per chunk: ``x``, ``y``, ``file``, ``label``
    (the file's short name), ``page``, ``chunk``, ``text``, ``id``), the ``projection``, ``total``
    chunks in the store and whether the rows are a ``sampled`` subset."""

    rows: list[dict[str, Any]]
    projection: Projection | None
    total: int
    sampled: bool

    def place(self, vector: Any) -> tuple[float, float] | None:
        """Where a ``(d,)`` vector (the query) falls on the map; ``None`` for an empty map."""
        if self.projection is None:
            return None
        xy = self.projection.project(vector)
        return float(xy[0]), float(xy[1])


def sample_points(vs: VectorStore, max_points: int = 3000, include: Iterable[Any] = ()) -> tuple[list[Any], int]:
    """A deterministic sample of at most ``max_points`` points (with vectors) of a store, plus the
    points with ids in ``include`` (the hits), and the store's total count.

    The sample is the points with the smallest hashes of their ids, so it is the same on every
    run, whatever the scroll order, and memory stays bounded by ``max_points``.
    """
    if max_points < 1:
        raise InvalidArgument(f"max_points must be at least 1, got {max_points}.")
    if not vs.exists():
        return [], 0
    include = {str(i) for i in include}
    heap: list[tuple[int, int, Any]] = []  # (-key, tiebreak, point): a max-heap of the smallest keys
    extra: dict[Any, Any] = {}
    total = 0
    for n, p in enumerate(vs.collection.scroll(with_vectors=True)):
        total += 1
        if str(p.id) in include:
            extra[str(p.id)] = p
            continue
        item = (-_sample_key(p.id), n, p)
        if len(heap) < max_points:
            heapq.heappush(heap, item)
        elif item[0] > heap[0][0]:
            heapq.heapreplace(heap, item)
    chosen = sorted((item for item in heap), key=lambda it: (-it[0], it[1]))
    points = [it[2] for it in chosen] + list(extra.values())
    return points, total


def _rows(points: list[Any], xy: np.ndarray) -> list[dict[str, Any]]:
    rows = []
    for p, (x, y) in zip(points, xy):
        payload = p.payload or {}
        rows.append(
            {
                "x": float(x),
                "y": float(y),
                "id": str(p.id),
                "file": payload.get("file_name") or str(payload.get("file_id")),
                "page": payload.get("page"),
                "chunk": payload.get("chunk_index"),
                "text": " ".join(plain_text(str(payload.get("text", "")), file_name=payload.get("file_name")).split())[:160],
            }
        )
    return rows


def _labelled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    labels = short_names(str(r["file"]) for r in rows)
    return [{**r, "label": labels[str(r["file"])]} for r in rows]


def store_map(vs: VectorStore, *, max_points: int = 3000, include: Iterable[Any] = ()) -> StoreMap:
    """The 2-D map of a store: PCA of a deterministic sample (:func:`sample_points`) of its vectors."""
    points, total = sample_points(vs, max_points, include)
    if not points:
        return StoreMap([], None, total, False)
    matrix = np.vstack([np.asarray(p.vector, dtype=np.float64) for p in points])
    projection = pca_2d(matrix)
    return StoreMap(_labelled(_rows(points, projection.project(matrix))), projection, total, len(points) < total)


def with_points(smap: StoreMap, vs: VectorStore, ids: Iterable[Any]) -> StoreMap:
    """``smap`` plus the points ``ids`` (the hits of a search) it does not show yet, placed by its
    own projection (not computed again): a cached map of the store (:func:`store_map`) serves every
    search, and only the hits outside its sample are read (``retrieve``, with vectors)."""
    shown = {r["id"] for r in smap.rows}
    missing = [i for i in dict.fromkeys(ids) if str(i) not in shown]
    if not missing or smap.projection is None:
        return smap
    points = [p for p in vs.collection.retrieve(missing, with_vectors=True) if p.vector is not None]
    if not points:
        return smap
    matrix = np.vstack([np.asarray(p.vector, dtype=np.float64) for p in points])
    rows = _labelled([*smap.rows, *_rows(points, smap.projection.project(matrix))])
    return StoreMap(rows, smap.projection, smap.total, smap.sampled)


#: Characters at most of a file's name in the map's legend (one column of them fits the map's
#: column at 1280 px and a 390 px phone).
LABEL_CHARS = 30


def short_name(name: str, limit: int = LABEL_CHARS) -> str:
    """``name`` in at most ``limit`` characters (``limit`` >= 5): kept whole when it fits, else its
    start, an ellipsis and its end with the extension (``"ch02-00-guess…orial.md"``)."""
    if len(name) <= limit:
        return name
    tail = max(2, (limit - 1) // 3)
    return name[: limit - 1 - tail] + "…" + name[-tail:]


def short_names(names: Iterable[str], limit: int = LABEL_CHARS) -> dict[str, str]:
    """``{name: short label}`` for distinct ``names``: :func:`short_name`, and two names that
    shorten alike are told apart by a number (``"…orial.md (2)"``, still within ``limit`` + 4)."""
    out: dict[str, str] = {}
    taken: dict[str, int] = {}
    for name in sorted(set(names)):
        label = short_name(name, limit)
        n = taken.get(label, 0) + 1
        taken[label] = n
        out[name] = label if n == 1 else f"{label} ({n})"
    return out


def store_version(wb: Workbench, store: str) -> tuple:
    """What the map of ``store`` depends on, as a cache key: the data folder, the store's backend
    and collection, and each file's id and chunk count (a file added, removed or re-indexed changes
    it). Raises ``StoreNotFound``."""
    record = wb.get_store(store)
    files = wb.vector_store(store).list_files()
    return (str(wb.settings.data_root), record.backend, record.collection, tuple((f.file_id, f.chunks) for f in files))


__all__ = [
    "LABEL_CHARS",
    "Projection",
    "StoreMap",
    "pca_2d",
    "sample_points",
    "short_name",
    "short_names",
    "store_map",
    "store_version",
    "with_points",
]
