"""Agent memory: ``remember`` / ``recall`` / ``forget`` over any vector-store backend.

:class:`VectorMemory` is what an agent is given (the spec's ``VectorMemory``, in Python). It embeds
text with an :class:`~knowledge.embeddings.base.Embedder` and keeps one point per memory in one
collection (``collection``, default :data:`DEFAULT_COLLECTION`) of a backend (memory, pgvector,
qdrant, a plugin), the text in the payload beside its dataset and the caller's payload;
:meth:`VectorMemory.recall` returns all three in a :class:`RecallHit`, best first.

* Datasets are a payload field (``dataset_field``), never one collection per dataset; ``dataset``
  defaults to ``"default"`` on both sides, ``recall(dataset=None)`` searches all.
* ``id=`` makes a write idempotent; without one a random UUID (hex) is used.
* The dimension is discovered on the first write; another size raises
  :class:`~knowledge.errors.DimensionMismatch`, another model of the same size
  :class:`~knowledge.errors.InvalidArgument`. Scores follow the collection's distance.

Whose memories: a collection is one person's. Signed in by account (issue 28), the app keeps a
person's memories in :func:`user_collection` -- the collection name with ``~<username>`` after it
(a username never holds ``~``) -- so one member never recalls, counts or forgets another's; the
local admin (the CLI, Python, the app before accounts) uses the name as given.

Usage and the app's page: ``docs/app.md``.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from knowledge._names import check_name
from knowledge.config import Settings
from knowledge.embeddings import create_embedder
from knowledge.embeddings.base import Embedder
from knowledge.errors import DimensionMismatch, InvalidArgument, StoreNotFound
from knowledge.service.stores import RESERVED_MARK
from knowledge.vectorstore.base import Point, PointId, VectorBackend, check_id, check_ids, check_limit, check_where, matches
from knowledge.vectorstore.registry import open_backend
from knowledge.vectorstore.scoring import Distance, check_distance

#: Payload field holding a memory's text.
TEXT_FIELD = "text"
#: Payload field holding the name of the embedding model that embedded it.
MODEL_FIELD = "embedding_model"
#: Payload field holding when a memory was written (ISO 8601, UTC, seconds), unless the caller's
#: payload has its own value for it.
WHEN_FIELD = "remembered_at"
DEFAULT_DATASET = "default"
DEFAULT_COLLECTION = "agent-memory"


#: Between a memory collection's name and its owner's username in :func:`user_collection` (a new
#: vector store's name may not hold it, so no store sits on someone's memories).
OWNER_MARK = RESERVED_MARK


def user_collection(collection: str, username: str | None) -> str:
    """The backend collection holding ``username``'s memories of ``collection``:
    ``"agent-memory~ana"``; ``collection`` itself for ``None`` (the local admin). Distinct users get
    distinct collections whatever name they type (the part after the last ``~`` is the username).

    Raises:
        InvalidArgument: a blank collection name.
    """
    if not isinstance(collection, str) or not collection.strip():
        raise InvalidArgument(f"A memory store name must be a non-blank string, got {collection!r}.")
    collection = check_name(collection.strip(), "memory store name")
    return collection if username is None else f"{collection}{OWNER_MARK}{username}"


class _Default:
    """``recall``'s dataset when not given (``"default"``), told apart from an explicit value."""

    def __repr__(self) -> str:
        return repr(DEFAULT_DATASET)


_DEFAULT = _Default()


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled memory: its ``text``, ``score`` (direction per the collection's distance; cosine
    similarity by default, higher is better), ``dataset``, ``id`` and the caller's ``payload``
    (without the text, dataset and model fields, nor ``remembered_at``, which is its own field:
    ISO 8601 UTC, ``None`` for a memory written before it was recorded)."""

    text: str
    score: float
    dataset: str
    id: PointId
    payload: dict[str, Any] = field(default_factory=dict)
    remembered_at: str | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory to write with :meth:`VectorMemory.remember_many` (a dict with these keys works too)."""

    text: str
    dataset: str | None = None
    payload: Mapping[str, Any] | None = None
    id: PointId | None = None


class VectorMemory:
    """remember / recall / forget on one collection of a backend.

    Args:
        backend: a :class:`~knowledge.vectorstore.base.VectorBackend`, or
            :class:`~knowledge.config.Settings` (then ``open_backend(settings)`` is used and closed
            by :meth:`close`).
        embedder: the embedding model; with ``Settings`` it defaults to ``create_embedder(settings)``.
        collection: the collection (store) holding the memories.
        dataset_field: payload field of the dataset.
        distance: used when the first write creates the collection.

    Thread-safe as far as the backend and embedder are (the built-in ones are).

    Raises:
        InvalidArgument: no embedder for a backend, a blank collection name or field.
    """

    def __init__(
        self,
        backend: VectorBackend | Settings,
        embedder: Embedder | None = None,
        *,
        collection: str = DEFAULT_COLLECTION,
        dataset_field: str = "dataset",
        distance: Distance = "cosine",
    ) -> None:

        if not isinstance(backend, (VectorBackend, Settings)):
            raise InvalidArgument(f"VectorMemory takes a VectorBackend or Settings, got {type(backend).__name__}.")
        for what, value in (("collection", collection), ("dataset_field", dataset_field)):
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgument(f"VectorMemory {what} must be a non-blank string, got {value!r}.")
        if dataset_field in (TEXT_FIELD, MODEL_FIELD):
            raise InvalidArgument(
                f"dataset_field cannot be {dataset_field!r}: that payload field holds the memory's {dataset_field}."
            )
        check_distance(distance)
        if embedder is None and not isinstance(backend, Settings):
            raise InvalidArgument("VectorMemory needs an embedder (knowledge.embeddings.create_embedder(settings)).")
        self._owns_backend = isinstance(backend, Settings)
        if isinstance(backend, Settings):
            embedder = create_embedder(backend) if embedder is None else embedder
            backend = open_backend(backend)
        if embedder is None:  # checked above; says so to the type checker
            raise InvalidArgument("VectorMemory needs an embedder (knowledge.embeddings.create_embedder(settings)).")
        self.backend: VectorBackend = backend
        self.embedder: Embedder = embedder
        self.dataset_field = dataset_field
        self.distance: Distance = check_distance(distance)
        self.collection = self.backend.collection(collection)
        self._checked_model = False
        self._size: int | None = None  # the collection's dimension once a write has checked it
        self._lock = threading.Lock()

    # -- writes -------------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        dataset: str | None = None,
        payload: Mapping[str, Any] | None = None,
        id: PointId | None = None,
    ) -> PointId:
        """Embed and store one memory; returns its id (``id`` if given, else a new UUID hex).

        ``dataset=None`` means ``"default"``. The same ``id`` again overwrites that memory.

        Raises:
            InvalidArgument: blank text, a bad id, dataset or payload (``payload`` may not use the
                text, dataset or model fields).
            DimensionMismatch: the collection was prepared for another embedding size (the spec's
                message); nothing is written.
        """
        return self.remember_many([Memory(text, dataset, payload, id)])[0]

    def remember_many(self, items: Iterable[Memory | Mapping[str, Any] | str]) -> list[PointId]:
        """Embed and store many memories in one batch (all validated before anything is written).

        Args:
            items: :class:`Memory` objects, dicts with ``text`` and optionally ``dataset``,
                ``payload``, ``id``, or plain strings (text only).

        Returns:
            The ids, in the order of ``items``.

        Raises:
            As :meth:`remember`; also ``InvalidArgument`` for an empty batch or an id twice in it.
        """
        memories = [self._memory(item) for item in items]
        if not memories:
            raise InvalidArgument("remember_many needs at least one memory.")
        ids: list[PointId] = []
        payloads = []
        for m in memories:
            ids.append(uuid.uuid4().hex if m.id is None else check_id(m.id))
            payloads.append(self._payload(m))
        if len(set(ids)) != len(ids):
            raise InvalidArgument("remember_many got the same id twice in one batch.")
        vectors = self.embedder.embed_documents([m.text for m in memories])
        points = [Point(pid, vectors[i], payloads[i]) for i, pid in enumerate(ids)]
        self._prepare(int(vectors.shape[1]))
        try:
            self.collection.upsert(points)
        except StoreNotFound:  # dropped meanwhile (clear() elsewhere): discover the dimension again
            self._size = None
            self._prepare(int(vectors.shape[1]))
            self.collection.upsert(points)
        return ids

    def _memory(self, item: Any) -> Memory:
        if isinstance(item, str):
            item = Memory(item)
        elif isinstance(item, Mapping):
            unknown = set(item) - {"text", "dataset", "payload", "id"}
            if unknown:
                raise InvalidArgument(f"A memory has text, dataset, payload and id; unknown: {', '.join(sorted(unknown))}.")
            if "text" not in item:
                raise InvalidArgument("A memory needs a text.")
            item = Memory(**item)
        elif not isinstance(item, Memory):
            raise InvalidArgument(f"A memory is a Memory, a dict or a str, got {type(item).__name__}.")
        if not isinstance(item.text, str) or not item.text.strip():
            raise InvalidArgument("A memory's text must be a non-blank string.")
        return item

    def _payload(self, m: Memory) -> dict[str, Any]:
        dataset = DEFAULT_DATASET if m.dataset is None else _check_dataset(m.dataset)
        if not isinstance(m.payload, (Mapping, type(None))):
            raise InvalidArgument(f"A memory's payload must be a dict, got {type(m.payload).__name__}.")
        extra = dict(m.payload or {})
        for key in (TEXT_FIELD, self.dataset_field, MODEL_FIELD):
            if key in extra:
                raise InvalidArgument(
                    f"payload field {key!r} is reserved (the memory's text, dataset and model); use another name."
                )
        when = extra.pop(WHEN_FIELD, None) or datetime.now(UTC).isoformat(timespec="seconds")
        return {**extra, TEXT_FIELD: m.text, self.dataset_field: dataset, MODEL_FIELD: self.embedder.name, WHEN_FIELD: when}

    def _prepare(self, size: int) -> None:
        """Create the collection on the first write (dimension of the first vector) and check that
        the existing one was filled by this embedding model."""
        with self._lock:
            if self._size is not None:
                if self._size != size:
                    raise DimensionMismatch(self._size, size)
                return
            if not self.collection.collection_exists():
                self.collection.ensure_collection(size, self.distance)
                self.collection.index_field(self.dataset_field)
            else:
                expected = self.collection.info().size
                if expected != size:
                    raise DimensionMismatch(expected, size)
            self._check_model()
            self._size = size

    def _check_model(self) -> None:
        if self._checked_model:
            return
        for p in self.collection.scroll(limit=1):
            other = p.payload.get(MODEL_FIELD)
            if other is not None and other != self.embedder.name:
                raise InvalidArgument(
                    f"This store holds embeddings of {other!r}, but this memory embeds with"
                    f" {self.embedder.name!r}. Two embedding models need two stores."
                )
        self._checked_model = True

    # -- reads ---------------------------------------------------------------------------------------
    def recall(
        self,
        query: str,
        limit: int = 5,
        dataset: str | _Default | None = _DEFAULT,
        score_threshold: float | None = None,
        where: Mapping[str, Any] | None = None,
        raw_filter: Any = None,
    ) -> list[RecallHit]:
        """The ``limit`` memories closest to ``query``, best first.

        Args:
            query: the text to recall by (embedded as a query).
            limit: how many at most (>= 1).
            dataset: omitted = ``"default"``; ``None`` searches every dataset.
            score_threshold: keep hits at least this good (``>=`` for cosine/dot, ``<=`` for
                euclid/manhattan).
            where: payload equality filter (``{"topic": "billing"}``), ANDed with the dataset.
            raw_filter: the backend's native filter (a predicate on the payload for ``memory``, a
                ``qdrant_client.models.Filter`` for ``qdrant``); when given it is the whole filter
                and wins over ``where`` and the default dataset (pass ``dataset=None`` or no
                dataset; an explicit dataset with a raw filter is refused rather than ignored).

        Returns:
            :class:`RecallHit` list; ``[]`` before the first memory is written.

        Raises:
            InvalidArgument: a blank query, a bad limit, filter or dataset, a dataset given with a
                raw filter. DimensionMismatch: the embedder's size differs from the store's.
        """
        explicit = not isinstance(dataset, _Default)
        if raw_filter is not None and explicit and dataset is not None:
            raise InvalidArgument(
                "raw_filter is the whole filter and wins over where and dataset: put the dataset"
                f" condition ({self.dataset_field!r}) in it, or pass dataset=None."
            )
        w = dict(check_where(where) or {})
        if raw_filter is None:
            ds = DEFAULT_DATASET if not explicit else dataset
            if ds is not None:
                w[self.dataset_field] = _check_dataset(ds)
        limit = check_limit(limit)  # before the embedding work
        vector = self.embedder.embed_query(query)
        try:
            found = self.collection.search(
                vector, limit=limit, where=w or None, raw_filter=raw_filter, score_threshold=score_threshold
            )  # DimensionMismatch first
            if not self._checked_model:
                with self._lock:
                    self._check_model()
        except StoreNotFound:
            return []
        return [self._hit(h.id, h.score, h.payload or {}) for h in found]

    def _hit(self, pid: PointId, score: float, payload: Mapping[str, Any]) -> RecallHit:
        rest = {k: v for k, v in payload.items() if k not in (TEXT_FIELD, self.dataset_field, MODEL_FIELD, WHEN_FIELD)}
        when = payload.get(WHEN_FIELD)
        return RecallHit(
            text=str(payload.get(TEXT_FIELD, "")),
            score=float(score),
            dataset=str(payload.get(self.dataset_field, "")),
            id=pid,
            payload=rest,
            remembered_at=str(when) if when is not None else None,
        )

    def get(self, ids: Sequence[PointId]) -> list[RecallHit]:
        """The memories with these ids (score ``nan``), in the given order; unknown ids skipped."""
        if not self.collection.collection_exists():
            return []
        return [self._hit(p.id, float("nan"), p.payload) for p in self.collection.retrieve(ids)]

    def browse(self, dataset: str | None = None, offset: int = 0, limit: int = 50) -> list[RecallHit]:
        """One page of the memories (of ``dataset``; ``None``: every dataset), in the backend's
        stable order: those after the first ``offset``, ``limit`` at most, score ``nan``. ``[]``
        before the first write or past the end.

        Raises:
            InvalidArgument: a negative offset, a bad limit or dataset name.
        """
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgument(f"offset must be a whole number, 0 or more, got {offset!r}.")
        limit = check_limit(limit)
        where = {self.dataset_field: _check_dataset(dataset)} if dataset is not None else None
        if not self.collection.collection_exists():
            return []
        try:
            points = list(itertools.islice(self.collection.scroll(where), offset, offset + limit))
        except StoreNotFound:
            return []
        return [self._hit(p.id, float("nan"), p.payload) for p in points]

    def datasets(self) -> dict[str, int]:
        """Number of memories per dataset, sorted by name (``{}`` before the first write)."""
        if not self.collection.collection_exists():
            return {}
        counts = self.collection.facet(self.dataset_field)
        return {str(k): counts[k] for k in sorted(counts, key=str)}

    def count(self, dataset: str | None = None) -> int:
        """Number of memories (in ``dataset`` when given)."""
        if not self.collection.collection_exists():
            return 0
        return self.collection.count({self.dataset_field: _check_dataset(dataset)} if dataset is not None else None)

    # -- forgetting ----------------------------------------------------------------------------------
    def forget(
        self,
        ids: Sequence[PointId] | None = None,
        dataset: str | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> int:
        """Delete memories; every selector given must match (ids AND dataset AND where).

        ``forget(ids=[...])`` deletes those ids, ``forget(dataset="x")`` the whole dataset,
        ``forget(where={...})`` what matches in every dataset, ``forget(dataset="x", where={...})``
        what matches in ``x``. Returns how many were deleted.

        Raises:
            InvalidArgument: no selector (use :meth:`clear` to delete everything), a bad id or filter.
        """
        w = dict(check_where(where) or {})
        if dataset is not None:
            w[self.dataset_field] = _check_dataset(dataset)
        if ids is None and not w:
            raise InvalidArgument("forget needs ids, dataset or where; clear() deletes every memory.")
        wanted = check_ids(ids) if ids is not None else None
        if not self.collection.collection_exists():
            return 0
        if wanted is None:
            return self.collection.remove(where=w)
        if w:
            wanted = [p.id for p in self.collection.retrieve(wanted) if matches(p.payload, w)]
        return self.collection.remove(ids=wanted) if wanted else 0

    def clear(self) -> None:
        """Delete every memory and the collection (the next write discovers the dimension again)."""
        self.collection.drop_collection()
        with self._lock:
            self._checked_model = False
            self._size = None

    def close(self) -> None:
        """Close the backend if this memory opened it (from settings)."""
        if self._owns_backend:
            self.backend.close()

    def __enter__(self) -> VectorMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_dataset(dataset: Any) -> str:
    if not isinstance(dataset, str) or not dataset.strip():
        raise InvalidArgument(f"A dataset name must be a non-blank string, got {dataset!r}.")
    return check_name(dataset, "dataset name")
