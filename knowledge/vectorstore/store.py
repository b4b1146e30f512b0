"""``VectorStore``: the spec's store -- one named corpus of files' chunks, over any backend.

A thin facade over a :class:`~knowledge.vectorstore.base.Collection`: a chunk becomes one point whose
id is the readable key ``"<file_id>:<chunk_index>"`` and whose payload carries the text and its
provenance. Re-ingesting a file is one atomic ``replace`` of that file's points, so a search never
sees stale chunks, a mix of two versions, or the file missing in between.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knowledge.errors import InvalidArgument
from knowledge.vectorstore.base import Collection, CollectionInfo, Point, PointId, Where, as_vector, check_where
from knowledge.vectorstore.scoring import Distance, check_distance

#: Payload fields the facade owns; a chunk's ``metadata`` may not use them.
RESERVED_FIELDS = (
    "file_id",
    "file_name",
    "chunk_index",
    "text",
    "page",
    "char_start",
    "char_end",
    "heading",
    "readers",
)

#: The ``readers`` payload of a chunk that every reader of its store may read (see
#: :meth:`VectorStore.replace_file`; :class:`~knowledge.vectorstore.base.AnyOf` filters match it).
EVERYONE = "*"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One embedded chunk of a file, ready to store.

    ``vector`` is ``(d,)`` float32 (any L2 norm; cosine stores normalise). ``index`` is the chunk's
    position in its file (default: its position in the list given to :meth:`VectorStore.replace_file`).
    Provenance: ``page`` (1-based, PDFs), ``char_start``/``char_end`` (a ``[start, end)`` span of
    ``str`` indices into the file's extracted text), ``heading`` (the heading path, e.g.
    ``"Guide > Install"``). ``metadata`` holds extra JSON-serialisable payload fields.
    """

    text: str
    vector: Any
    index: int | None = None
    page: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    heading: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the chunk's text, score (direction per the store's distance; cosine
    similarity, higher is better, by default) and provenance.

    A hybrid search (:meth:`knowledge.workbench.Workbench.search`) also fills ``lexical_score``
    (BM25, >= 0, higher is better; ``None``: the chunk shares no term with the query) and
    ``fused_score`` (reciprocal rank fusion, higher is better, the order of the results); ``score``
    stays the vector score so that thresholds keep their meaning. A reranked search
    (:mod:`knowledge.service.rerank`) fills ``rerank_score`` (higher is better, the order then).

    ``chunks``: the chunk indexes a merged passage joins (sorted; see
    :func:`knowledge.service.passages.merge_passages`); ``()`` for a hit that is its own chunk only.
    """

    id: PointId
    score: float
    file_id: str
    file_name: str | None
    chunk_index: int
    text: str
    page: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    heading: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    lexical_score: float | None = None
    fused_score: float | None = None
    chunks: tuple[int, ...] = ()
    rerank_score: float | None = None

    @property
    def chunk_count(self) -> int:
        """How many chunks this passage joins (1 unless merged)."""
        return max(1, len(self.chunks))


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file held by a store: its id, name and number of chunks."""

    file_id: str
    file_name: str | None
    chunks: int


def chunk_point_id(file_id: str, index: int) -> str:
    """The readable point key of a chunk: ``"<file_id>:<index>"``."""
    return f"{file_id}:{index}"


class VectorStore:
    """One named corpus: files' chunks in, top-k chunks with score and provenance out.

    Args:
        collection: the backend collection holding the points (``backend.collection(name)``).
        distance: used when the first write creates the collection; an existing collection keeps
            its own (see :meth:`info`).
    """

    def __init__(self, collection: Collection, distance: Distance = "cosine") -> None:
        self.collection = collection
        self.distance: Distance = check_distance(distance)

    @property
    def name(self) -> str:
        return self.collection.name

    def exists(self) -> bool:
        """Whether the store has been created (by its first write)."""
        return self.collection.collection_exists()

    def info(self) -> CollectionInfo:
        """Dimension, distance and chunk count. Raises ``StoreNotFound`` before the first write."""
        return self.collection.info()

    def drop(self) -> None:
        """Delete the store and all its chunks."""
        self.collection.drop_collection()

    # -- writes ---------------------------------------------------------------------------------
    def replace_file(
        self,
        file_id: str,
        chunks: Sequence[Chunk],
        file_name: str | None = None,
        readers: Sequence[str] | None = None,
    ) -> int:
        """Replace every chunk of ``file_id`` with ``chunks`` in one atomic step. Returns ``len(chunks)``.

        Each chunk's payload field ``readers`` lists who may read it: ``readers`` as given, or
        ``[EVERYONE]`` (``"*"``) when ``None``; a search filters on it with ``AnyOf`` (access per
        document, :mod:`knowledge.people.policy`).

        The store is created on the first write with the vectors' dimension. An empty ``chunks``
        removes the file.

        Raises:
            InvalidArgument: empty ``file_id``, a chunk without text, duplicate chunk indexes, or
                metadata using a reserved field (:data:`RESERVED_FIELDS`).
            DimensionMismatch: the vectors' size differs from the store's (nothing is written).
            StoreFull: the backend's cap would be exceeded (nothing is written).
        """
        _check_file_id(file_id)
        who = [EVERYONE] if readers is None else [str(r) for r in readers]
        points = [self._point(file_id, file_name, i, c, who) for i, c in enumerate(chunks)]
        if not points:
            if self.collection.collection_exists():
                self.collection.remove(where={"file_id": file_id})
            return 0
        if not self.collection.collection_exists():
            self.collection.ensure_collection(int(points[0].vector.shape[0]), self.distance)
            self.collection.ensure_lexical_index()  # chunks are searched by words too: keep it from the start
        self.collection.replace({"file_id": file_id}, points)
        return len(points)

    def delete_file(self, file_id: str) -> int:
        """Remove one file's chunks; returns how many were removed (0 if the store does not exist)."""
        _check_file_id(file_id)
        if not self.collection.collection_exists():
            return 0
        return self.collection.remove(where={"file_id": file_id})

    # -- reads ----------------------------------------------------------------------------------
    def search(
        self,
        query_vector: Any,
        k: int = 10,
        where: Where | None = None,
        score_threshold: float | None = None,
    ) -> list[Hit]:
        """The ``k`` chunks nearest to ``query_vector`` (``(d,)`` float32), best first.

        ``where`` filters on payload fields by equality before ranking (``{"file_id": ...}``, a
        metadata field, ``{"page": 3}``), so ``k`` hits come back whenever ``k`` chunks match.
        ``score_threshold`` drops worse hits (cosine: similarity ``>=`` threshold). A store that
        has not been created yet returns ``[]``.

        Raises:
            DimensionMismatch: the query's size differs from the store's.
            InvalidArgument: ``k < 1`` or a bad filter.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
        vector = as_vector(query_vector)
        where = check_where(where)
        if not self.collection.collection_exists():
            return []
        found = self.collection.search(vector, limit=k, where=where, score_threshold=score_threshold)
        return [hit_from_payload(p.id, p.score, p.payload or {}) for p in found]

    def list_files(self) -> list[FileEntry]:
        """Every file in the store with its chunk count, sorted by name then id."""
        if not self.collection.collection_exists():
            return []
        entries = []
        for file_id, n in self.collection.facet("file_id").items():
            first = next(iter(self.collection.scroll(where={"file_id": file_id}, limit=1)), None)
            name = first.payload.get("file_name") if first is not None else None
            entries.append(FileEntry(str(file_id), name, n))
        return sorted(entries, key=lambda e: ((e.file_name or "").lower(), e.file_id))

    def count(self, file_id: str | None = None) -> int:
        """Number of chunks (of one file when ``file_id`` is given); 0 before the first write."""
        if not self.collection.collection_exists():
            return 0
        return self.collection.count({"file_id": file_id} if file_id is not None else None)

    def chunks(self, file_id: str) -> list[Hit]:
        """One file's chunks in chunk order (score 0.0), e.g. for a preview."""
        if not self.collection.collection_exists():
            return []
        hits = [hit_from_payload(p.id, 0.0, p.payload) for p in self.collection.scroll(where={"file_id": file_id})]
        return sorted(hits, key=lambda h: h.chunk_index)

    # -- helpers --------------------------------------------------------------------------------
    def _point(self, file_id: str, file_name: str | None, position: int, chunk: Chunk, readers: list[str]) -> Point:
        if not isinstance(chunk, Chunk):
            raise InvalidArgument(f"Expected Chunk objects, got {type(chunk).__name__}.")
        if not isinstance(chunk.text, str) or not chunk.text.strip():
            raise InvalidArgument(f"Chunk {position} of file {file_id!r} has no text.")
        index = position if chunk.index is None else chunk.index
        clash = sorted(set(chunk.metadata) & set(RESERVED_FIELDS))
        if clash:
            raise InvalidArgument(f"Chunk metadata may not use the reserved field(s) {', '.join(clash)}.")
        payload: dict[str, Any] = dict(chunk.metadata)
        payload.update(
            file_id=file_id,
            file_name=file_name,
            chunk_index=int(index),
            text=chunk.text,
            page=chunk.page,
            char_start=chunk.char_start,
            char_end=chunk.char_end,
            heading=chunk.heading,
            readers=readers,
        )
        return Point(chunk_point_id(file_id, int(index)), np.asarray(chunk.vector, np.float32), payload)


def _check_file_id(file_id: Any) -> None:
    if not isinstance(file_id, str) or not file_id:
        raise InvalidArgument(f"file_id must be a non-empty string, got {file_id!r}.")


def hit_from_payload(point_id: PointId, score: float, payload: Mapping[str, Any]) -> Hit:
    """The :class:`Hit` of a stored chunk point from its id, score and payload."""
    metadata = {k: v for k, v in payload.items() if k not in RESERVED_FIELDS}
    return Hit(
        id=point_id,
        score=float(score),
        file_id=str(payload.get("file_id")),
        file_name=payload.get("file_name"),
        chunk_index=int(payload.get("chunk_index", -1)),
        text=str(payload.get("text", "")),
        page=payload.get("page"),
        char_start=payload.get("char_start"),
        char_end=payload.get("char_end"),
        heading=payload.get("heading"),
        metadata=metadata,
    )


__all__ = ["EVERYONE", "RESERVED_FIELDS", "Chunk", "FileEntry", "Hit", "VectorStore", "chunk_point_id", "hit_from_payload"]
