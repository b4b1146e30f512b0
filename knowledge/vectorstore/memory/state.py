"""The loaded points of one store of the memory backend: a float32 matrix, an alive mask, ids,
payloads, lazily built payload indexes, and exact top-k over them (after qdrant-client's
``local/local_collection.py``: a float32 matrix, an id -> row map and a deleted mask). Knows
nothing of files. See ``docs/local-backend.md``."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import orjson

from knowledge.vectorstore.base import AnyOf, PointId
from knowledge.vectorstore.scoring import DISTANCE_ORDER, euclid_exact, manhattan, top_k

_EUCLID_SLACK = 8  # extra candidates re-ranked with exact distances (euclid)


def index_key(value: Any) -> tuple[int, Any] | None:
    """Hashable key with the equality of :func:`~knowledge.vectorstore.base.matches`.

    ``True`` and ``1`` differ (JSON), ``1`` and ``1.0`` are equal; lists and dicts never match a
    scalar, so they are not indexed.
    """
    if value is None:
        return (0, None)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, (int, float)):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    return None


def index_keys(value: Any) -> list[tuple[int, Any]]:
    """The index keys of a payload value: its :func:`index_key`, or for a list ``(4, s)`` for each
    string ``s`` in it (what an :class:`~knowledge.vectorstore.base.AnyOf` filter looks up; no
    scalar's key equals one)."""
    if isinstance(value, list):
        return [(4, e) for e in dict.fromkeys(e for e in value if isinstance(e, str))]
    key = index_key(value)
    return [] if key is None else [key]


class Payloads:
    """The payloads of the rows, each kept as its stored JSONL line (``bytes``,
    ``{"id":...,"payload":{...}}``) until first read, then as the parsed ``dict``.

    Loading a store parses no payload: at 100,000 chunks parsing them all was ~0.8 s of a ~1.1 s
    cold start, and a search reads only the payloads of its hits (a filter or a payload index reads
    those of the rows it looks at, once). A line that does not parse raises what ``corrupt(reason)``
    returns (the store's ``StoreCorrupt``) when it is read.
    """

    __slots__ = ("_corrupt", "_items")

    def __init__(self, items: list[Any] | None = None, corrupt: Callable[[str], Exception] | None = None) -> None:
        self._items: list[Any] = items if items is not None else []
        self._corrupt = corrupt

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, row: int) -> dict[str, Any]:
        item = self._items[row]
        if type(item) is bytes:
            item = self._parse(item)
            self._items[row] = item  # a race parses twice, harmlessly: the same dict
        return item

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in range(len(self._items)):
            yield self[row]

    def _parse(self, line: bytes) -> dict[str, Any]:
        try:
            payload = orjson.loads(line)["payload"]
            if type(payload) is not dict:
                raise TypeError("payload is not an object")
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            what = f"a point line does not parse ({exc})"
            raise (self._corrupt(what) if self._corrupt else ValueError(what)) from None
        return payload

    def extend(self, items: Sequence[Any]) -> None:
        """Append payloads (``dict``) or stored lines (``bytes``)."""
        self._items.extend(items)

    def take(self, rows: Sequence[int]) -> Payloads:
        """The payloads of ``rows``, in that order, unparsed ones left unparsed."""
        items = self._items
        return Payloads([items[r] for r in rows], self._corrupt)


# ---------------------------------------------------------------------------------------------
# In-memory state of one loaded store
# ---------------------------------------------------------------------------------------------


class LoadedPoints:
    """The loaded points of one store: rows ``[0, n)`` of a growable float32 matrix.

    ``vectors`` is ``(capacity, size)`` float32 (L2-normalised for cosine); ``alive[r]`` says
    whether row ``r`` is live; ``ids``/``payloads`` are per row (``payloads`` a :class:`Payloads`,
    parsed on first read); ``row_of`` maps each live id to its row. Dead rows stay until
    :meth:`compact`. Guarded by the collection's lock.
    """

    def __init__(self, size: int, distance: str, capacity: int, corrupt: Callable[[str], Exception] | None = None) -> None:
        capacity = max(int(capacity), 16)
        self.size = size
        self.distance = distance
        self.vectors = np.empty((capacity, size), dtype=np.float32)
        self.alive = np.zeros(capacity, dtype=bool)
        self.n = 0
        self.ids: list[PointId] = []
        self.payloads = Payloads(corrupt=corrupt)
        self.row_of: dict[PointId, int] = {}
        self.dead = 0
        self.sqnorms: np.ndarray | None = None  # (n,) float32 squared norms, euclid only, lazily
        self.indexes: dict[str, dict[tuple[int, Any], list[int]]] = {}
        #: The rows (dead ones included, ascending) of each AnyOf filter asked since the last write.
        self.any_rows: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self.generation = 0
        self.incarnation = ""
        # Stable slots (the approximate-search graph's keys; rows renumber on compact()): slots
        # are handed out in row order and never reused, so ``slot_of_row[:n]`` is ascending.
        self.slot_of_row = np.empty(capacity, dtype=np.int64)
        self.row_of_slot = np.full(capacity, -1, dtype=np.int64)  # -1: dead or never used
        self.next_slot = 0
        self.removed_slots: list[int] | None = None  # slots killed since the graph took them; None: no graph
        self.ann: Any = None  # the GraphIndex over these rows, if any (see ann.py)

    @property
    def live(self) -> int:
        return len(self.row_of)

    def reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = self.vectors.shape[0]
        if need <= cap:
            return
        new_cap = max(need, cap * 2)
        vectors = np.empty((new_cap, self.size), dtype=np.float32)
        vectors[: self.n] = self.vectors[: self.n]
        alive = np.zeros(new_cap, dtype=bool)
        alive[: self.n] = self.alive[: self.n]
        slot_of_row = np.empty(new_cap, dtype=np.int64)
        slot_of_row[: self.n] = self.slot_of_row[: self.n]
        self.vectors, self.alive, self.slot_of_row = vectors, alive, slot_of_row

    def _kill(self, row: int) -> None:
        self.alive[row] = False
        slot = int(self.slot_of_row[row])
        self.row_of_slot[slot] = -1
        if self.removed_slots is not None:
            self.removed_slots.append(slot)

    def place(self, deleted: Sequence[PointId], ids: list[PointId], payloads: Sequence[dict | bytes]) -> None:
        """Replay one batch whose vectors are already in rows ``[n, n + len(ids))``; ``payloads``
        are dicts or their stored JSONL lines (parsed when first read)."""
        row_of, alive = self.row_of, self.alive
        for pid in deleted:
            row = row_of.pop(pid, None)
            if row is not None:
                self._kill(row)
                self.dead += 1
        base = self.n
        m = len(ids)
        if not m:
            return
        alive[base : base + m] = True
        slots = np.arange(self.next_slot, self.next_slot + m, dtype=np.int64)
        self.slot_of_row[base : base + m] = slots
        if self.next_slot + m > len(self.row_of_slot):
            grown = np.full(max(self.next_slot + m, 2 * len(self.row_of_slot)), -1, dtype=np.int64)
            grown[: self.next_slot] = self.row_of_slot[: self.next_slot]
            self.row_of_slot = grown
        self.row_of_slot[self.next_slot : self.next_slot + m] = np.arange(base, base + m, dtype=np.int64)
        self.next_slot += m
        dead = 0
        for j, pid in enumerate(ids, base):
            old = row_of.get(pid)
            if old is not None:
                self._kill(old)
                dead += 1
            row_of[pid] = j
        self.dead += dead
        self.ids.extend(ids)
        self.payloads.extend(payloads)
        self.n = base + m
        if self.sqnorms is not None:
            new = self.vectors[base : self.n]
            self.sqnorms = np.concatenate([self.sqnorms, np.einsum("ij,ij->i", new, new)])
        self.any_rows.clear()
        for field, index in self.indexes.items():
            for j in range(base, self.n):
                payload = self.payloads[j]
                if field in payload:
                    for key in index_keys(payload[field]):
                        index.setdefault(key, []).append(j)

    def append(
        self, deleted: Sequence[PointId], ids: list[PointId], payloads: Sequence[dict | bytes], vectors: np.ndarray
    ) -> None:
        """Apply one batch: delete ``deleted``, then insert the rows (last write of an id wins)."""
        self.reserve(len(ids))
        if len(ids):
            self.vectors[self.n : self.n + len(ids)] = vectors
        self.place(deleted, ids, payloads)

    def compact(self) -> None:
        """Drop dead rows, keeping the live ones in order (so tie order does not change)."""
        keep = np.flatnonzero(self.alive[: self.n])
        live = len(keep)
        vectors = np.empty((max(16, live + max(64, live // 8)), self.size), dtype=np.float32)
        np.take(self.vectors, keep, axis=0, out=vectors[:live])
        self.vectors = vectors
        self.alive = np.zeros(vectors.shape[0], dtype=bool)
        self.alive[:live] = True
        slot_of_row = np.empty(vectors.shape[0], dtype=np.int64)
        slot_of_row[:live] = self.slot_of_row[keep]
        self.slot_of_row = slot_of_row
        self.row_of_slot.fill(-1)
        self.row_of_slot[slot_of_row[:live]] = np.arange(live, dtype=np.int64)
        rows = keep.tolist()
        self.ids = [self.ids[r] for r in rows]
        self.payloads = self.payloads.take(rows)
        self.row_of = {pid: r for r, pid in enumerate(self.ids)}
        if self.sqnorms is not None:
            self.sqnorms = self.sqnorms[keep]
        self.indexes.clear()
        self.any_rows.clear()
        self.n = live
        self.dead = 0

    def index(self, field: str) -> dict[tuple[int, Any], list[int]]:
        """The value -> rows index of payload ``field`` (rows ascending, dead ones included)."""
        index = self.indexes.get(field)
        if index is None:
            index = {}
            for row, payload in enumerate(self.payloads):
                if field in payload:
                    for key in index_keys(payload[field]):
                        bucket = index.get(key)
                        if bucket is None:
                            index[key] = [row]
                        else:
                            bucket.append(row)
            self.indexes[field] = index
        return index

    def set_slots(self, slots: np.ndarray, next_slot: int) -> None:
        """Give the live rows (all of ``[0, n)``, compacted) the slots ``slots`` (ascending int64,
        below ``next_slot``): a persisted graph's keys for these very rows."""
        n = self.n
        self.slot_of_row[:n] = slots
        self.next_slot = next_slot
        self.row_of_slot = np.full(max(next_slot, len(self.vectors)), -1, dtype=np.int64)
        self.row_of_slot[slots] = np.arange(n, dtype=np.int64)

    def live_rows(self) -> np.ndarray:
        return np.flatnonzero(self.alive[: self.n])

    def where_rows(self, where: dict[str, Any]) -> np.ndarray:
        """Live rows matching every ``field == value`` (or :class:`~knowledge.vectorstore.base.AnyOf`)
        of ``where``, ascending ``int64``."""
        buckets: list[list[int] | np.ndarray] = []
        for field, value in where.items():
            bucket: list[int] | np.ndarray | None
            if isinstance(value, AnyOf):
                bucket = self._any_rows(field, value.values)
            else:
                key = index_key(value)
                bucket = self.index(field).get(key) if key is not None else None
            if bucket is None or len(bucket) == 0:
                return np.zeros(0, dtype=np.int64)
            buckets.append(bucket)
        buckets.sort(key=len)
        rows = np.asarray(buckets[0], dtype=np.int64)
        for other in buckets[1:]:
            rows = np.intersect1d(rows, np.asarray(other, dtype=np.int64), assume_unique=True)
        return rows[self.alive[rows]]

    def _any_rows(self, field: str, values: tuple[str, ...]) -> np.ndarray:
        """The rows whose ``field`` is one of ``values`` or lists one (ascending ``int64``), kept until
        the next write: a person's filter is asked again and again, and its union over a broad
        filter's buckets is the cost (a mask, not a sorted set)."""
        key = (field, values)
        rows = self.any_rows.get(key)
        if rows is None:
            index = self.index(field)
            found = [b for v in values for k in ((3, v), (4, v)) if (b := index.get(k))]
            if len(found) == 1:
                rows = np.asarray(found[0], dtype=np.int64)
            else:
                mask = np.zeros(self.n, dtype=bool)
                for b in found:
                    mask[np.asarray(b, dtype=np.int64)] = True
                rows = np.flatnonzero(mask)
            self.any_rows[key] = rows
        return rows

    def predicate_rows(self, predicate: Any) -> np.ndarray:
        payloads = self.payloads
        rows = [r for r in self.live_rows().tolist() if predicate(payloads[r])]
        return np.asarray(rows, dtype=np.int64)

    # -- exact scores ----------------------------------------------------------------------------
    def scores(self, q: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
        """Scores of rows ``rows`` (``None``: all rows ``[0, n)``) for the prepared query ``q``.

        Euclid over many rows uses ``|x|^2 - 2 q.x + |q|^2`` (approximate in float32; the caller
        re-ranks the best candidates with :func:`~knowledge.vectorstore.scoring.euclid_exact`).
        """
        many = rows is None or len(rows) > self.n // 4
        if self.distance in ("cosine", "dot"):
            if many:
                out = self.vectors[: self.n] @ q
                return out if rows is None else out[rows]
            return self.vectors[rows] @ q
        if self.distance == "euclid":
            if not many:
                return euclid_exact(self.vectors[rows], q).astype(np.float32)
            if self.sqnorms is None:
                v = self.vectors[: self.n]
                self.sqnorms = np.einsum("ij,ij->i", v, v)
            sq = self.sqnorms - 2.0 * (self.vectors[: self.n] @ q) + float(q @ q)
            np.maximum(sq, 0.0, out=sq)
            out = np.sqrt(sq)
            return out if rows is None else out[rows]
        return manhattan(self.vectors, q, rows, self.n)

    def rank(self, q: np.ndarray, rows: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and scores of the ``k`` best among ``rows`` (``None``: all live rows), best first."""
        higher = DISTANCE_ORDER[self.distance]
        euclid = self.distance == "euclid"
        if rows is not None:
            if len(rows) == 0:
                return rows, np.zeros(0)
            scores = self.scores(q, rows)
            pos = top_k(scores, min(len(rows), k + _EUCLID_SLACK if euclid else k), higher)
            cand = rows[pos]
        else:
            scores = self.scores(q, None)
            if self.dead:
                scores[~self.alive[: self.n]] = -np.inf if higher else np.inf
            cand = top_k(scores, min(self.live, k + _EUCLID_SLACK if euclid else k), higher)
            pos = cand
        if euclid:  # exact distances for the few candidates, then the final order
            exact = euclid_exact(self.vectors[cand], q)
            order = np.lexsort((cand, exact))[:k]
            return cand[order], exact[order]
        return cand, scores[pos].astype(np.float64)
