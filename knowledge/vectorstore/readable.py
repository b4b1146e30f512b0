"""``ReadableCollection``: a collection as one reader sees it -- only the points a filter keeps.

Access per document (:mod:`knowledge.people.policy`): a store that restricts some of its files has
every chunk carry a ``readers`` payload field, and a person sees the chunks whose ``readers`` hold one
of their principals. The workbench hands such a person this view of the store's collection
(:meth:`knowledge.workbench.Workbench.vector_store`), so that every read -- a search, a scroll for the
store map, a count, a facet, the chunks of a file -- has the filter pushed into the backend's own
query (``k`` results are ``k`` readable results), and a count or a point fetched by id never tells of
a chunk the person may not read. Writes are refused: they go through the workbench's checked methods.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from knowledge.errors import InvalidArgument, PermissionDenied
from knowledge.vectorstore.base import Collection, CollectionInfo, Point, PointId, ScoredPoint, matches
from knowledge.vectorstore.scoring import Distance


class ReadableCollection(Collection):
    """``inner`` with ``where`` (typically ``{"readers": AnyOf(principals)}``) added to every read.

    Args:
        inner: the store's collection.
        where: the filter every read keeps to (checked, non-empty); it wins over a caller's filter on
            the same field.

    Raises (its reads): those of ``inner``; ``InvalidArgument`` for a native ``raw_filter`` (it cannot
    be combined with the view's filter). Its writes raise ``PermissionDenied``.
    """

    def __init__(self, inner: Collection, where: Mapping[str, Any]) -> None:
        if not where:
            raise InvalidArgument("A readable view needs a filter.")
        self.inner, self.where = inner, dict(where)
        self.name = inner.name

    def _with(self, where: dict[str, Any] | None) -> dict[str, Any]:
        return {**(where or {}), **self.where}

    # -- as the store is --------------------------------------------------------------------------
    def collection_exists(self) -> bool:
        return self.inner.collection_exists()

    def info(self) -> CollectionInfo:
        """The store's size and distance, ``count`` the points this reader sees, no disk size."""
        info = self.inner.info()
        return CollectionInfo(info.name, info.size, info.distance, self.inner.count(self.where), info.backend, None)

    def bulk_load(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    # -- reads, filtered ----------------------------------------------------------------------------
    def _search(
        self,
        vector: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        raw_filter: Any,
        threshold: float | None,
        with_payload: bool,
    ) -> list[ScoredPoint]:
        if raw_filter is not None:
            raise InvalidArgument("A native filter cannot be used on a store with access per document; use where.")
        return self.inner.search(vector, k, where=self._with(where), score_threshold=threshold, with_payload=with_payload)

    def _count(self, where: dict[str, Any] | None) -> int:
        return self.inner.count(self._with(where))

    def _scroll(self, where: dict[str, Any] | None, limit: int | None, with_vectors: bool) -> Iterator[Point]:
        return self.inner.scroll(self._with(where), limit, with_vectors)

    def _retrieve(self, ids: list[PointId], with_vectors: bool) -> list[Point]:
        return [p for p in self.inner.retrieve(ids, with_vectors) if matches(p.payload, self.where)]

    def _facet(self, key: str, where: dict[str, Any] | None) -> dict[Any, int]:
        return self.inner.facet(key, self._with(where))

    def _lexical_search(self, query: str, k: int, where: dict[str, Any] | None) -> list[ScoredPoint] | None:
        return self.inner.lexical_search(query, k, self._with(where))

    # -- writes: not through a reader's view ----------------------------------------------------------
    def _refuse(self) -> PermissionDenied:
        return PermissionDenied("This view of the store is read-only; change its files through the workbench.")

    def drop_collection(self) -> None:
        raise self._refuse()

    def _ensure_collection(self, size: int, distance: Distance) -> None:
        raise self._refuse()

    def _upsert(self, points: list[Point]) -> None:
        raise self._refuse()

    def _replace(self, where: dict[str, Any], points: list[Point]) -> None:
        raise self._refuse()

    def _remove(self, ids: list[PointId], where: dict[str, Any] | None) -> int:
        raise self._refuse()


__all__ = ["ReadableCollection"]
