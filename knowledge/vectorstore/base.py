"""The backend contract: points in, scored points out.

Every vector-store backend (built-in ``memory``, ``pgvector``, ``qdrant``, or a plugin) implements
:class:`VectorBackend` (one per configured backend: hands out :class:`Collection` objects by name) and
:class:`Collection` (one named set of points of one size and distance), whose public methods check
every argument once and call the backend's hooks. The store facade and agent memory sit on it.

* A point is ``Point(id, vector, payload)``: ``id`` a ``str`` or ``int``, ``vector`` ``(d,)`` float32,
  ``payload`` a JSON-serialisable ``dict`` (what comes back is its JSON round trip).
* ``where`` matches when *every* field is present and equal (``==`` on JSON scalars); ``raw_filter``
  is the backend's own filter form and wins over ``where``.
* Scores follow :data:`DISTANCE_ORDER` (higher is better for cosine and dot, lower for euclid and
  manhattan); ``score_threshold`` keeps hits at least that good; results come best first.
* A vector of another size raises :class:`~knowledge.errors.DimensionMismatch` before anything is
  written. The backends and their hooks: ``docs/backends.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import operator
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from knowledge.errors import DimensionMismatch, DistanceMismatch, InvalidArgument
from knowledge.vectorstore.scoring import (
    Distance,
    check_distance,
)

PointId = str | int

Where = Mapping[str, Any]
_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True, slots=True)
class AnyOf:
    """A ``where`` value matching a payload field that is one of ``values`` (a string) or lists one of
    them (a JSON array of strings): ``{"readers": AnyOf(("*", "group:hr"))}`` keeps the points whose
    ``readers`` share any element with the tuple. Like qdrant-client's ``MatchAny``; pgvector answers it
    with ``jsonb`` containment on the GIN index, the memory backend from its payload index, so a filtered
    search still returns ``k`` hits whenever ``k`` points match.

    Attributes:
        values: the strings, at least one (:func:`check_where` says so otherwise).
    """

    values: tuple[str, ...]


@dataclass(slots=True)
class Point:
    """One point: ``id`` (str or int), ``vector`` ``(d,)`` float32, ``payload`` JSON-serialisable dict."""

    id: PointId
    vector: np.ndarray
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ScoredPoint:
    """A search hit: the point's id, its score (direction per :data:`DISTANCE_ORDER`) and payload.

    ``payload`` is ``None`` when the search was made with ``with_payload=False``.
    """

    id: PointId
    score: float
    payload: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """What a collection was prepared with and how many points it holds."""

    name: str
    size: int
    distance: Distance
    count: int
    backend: str
    disk_bytes: int | None = None


def check_name(name: Any) -> str:
    """``name`` if it is a non-empty string of valid Unicode text, else ``InvalidArgument``."""
    if not isinstance(name, str) or not name:
        raise InvalidArgument(f"A store name must be a non-empty string, got {name!r}.")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"A store name must be valid Unicode text, got {name!r}.") from None
    return name


def check_size(size: Any) -> int:
    """A vector size: an integer >= 1 (not a bool), else ``InvalidArgument``."""
    try:
        if isinstance(size, bool):
            raise TypeError
        value = operator.index(size)
    except TypeError:
        raise InvalidArgument(f"A vector size must be an integer >= 1, got {size!r}.") from None
    if value < 1:
        raise InvalidArgument(f"A vector size must be an integer >= 1, got {value}.")
    return value


def check_limit(limit: Any, what: str = "limit", allow_zero: bool = False) -> int:
    """A result limit: an integer >= 1 (>= 0 with ``allow_zero``), else ``InvalidArgument``."""
    low = 0 if allow_zero else 1
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < low:
        raise InvalidArgument(f"{what} must be an integer >= {low}, got {limit!r}.")
    return int(limit)


def check_ids(ids: Any) -> list[PointId]:
    """A list of valid point ids; a bare id (which would be iterated) is refused."""
    if isinstance(ids, (str, bytes, int)) or not hasattr(ids, "__iter__"):
        raise InvalidArgument(f"ids must be a list of point ids, got {ids!r}.")
    return [check_id(i) for i in ids]


def unique_ids(ids: Any) -> list[PointId]:
    """:func:`check_ids`, each id once, in first-seen order."""
    return list(dict.fromkeys(check_ids(ids)))


def check_threshold(score_threshold: Any) -> float | None:
    """A score threshold: ``None`` or a number (not a bool, not NaN), as a ``float``."""
    if score_threshold is None:
        return None
    if (
        isinstance(score_threshold, bool)
        or not isinstance(score_threshold, (int, float, np.integer, np.floating))
        or math.isnan(score_threshold)
    ):
        raise InvalidArgument(f"score_threshold must be a number, got {score_threshold!r}.")
    return float(score_threshold)


def check_key(key: Any, what: str = "A payload field") -> str:
    """A payload field name: a ``str``, else ``InvalidArgument``."""
    if not isinstance(key, str):
        raise InvalidArgument(f"{what} must be a string, got {key!r}.")
    return key


def check_vector_size(vector: np.ndarray, size: int) -> np.ndarray:
    """``vector`` (``(d,)``, from :func:`as_vector`) if ``d == size``, else ``DimensionMismatch``."""
    if vector.shape[0] != size:
        raise DimensionMismatch(size, int(vector.shape[0]))
    return vector


def distance_mismatch(name: str, prepared: str, wanted: str) -> DistanceMismatch:
    """The error for asking store ``name``, prepared with distance ``prepared``, for ``wanted``."""
    return DistanceMismatch(
        f"Vector store {name!r} was prepared with distance {prepared!r}, not {wanted!r}. A store keeps"
        " the distance it was created with."
    )


def check_prepared(name: str, prepared_size: int, prepared_distance: str, size: int, distance: str) -> None:
    """Raise ``DimensionMismatch`` / ``DistanceMismatch`` when an existing store ``name`` was prepared
    with another size / distance than ``ensure_collection(size, distance)`` asks for."""
    if prepared_size != size:
        raise DimensionMismatch(prepared_size, size)
    if prepared_distance != distance:
        raise distance_mismatch(name, prepared_distance, distance)


def name_slug(name: str, sep: str = "-") -> str:
    """A safe, unique, readable key for a store name: an ASCII slug of at most 40 characters, ``sep``,
    and 12 hex digits of the name's sha256 (``name_slug("Team Notes") == "team-notes-" + 12 hex``).
    Names differing only in case or punctuation get different keys through the digest."""
    slug = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    slug = re.sub(r"[^a-z0-9]+", sep, slug).strip(sep)[:40].strip(sep) or "store"
    return f"{slug}{sep}{hashlib.sha256(name.encode('utf-8')).hexdigest()[:12]}"


def check_where(where: Where | None) -> dict[str, Any] | None:
    """Validate a filter: ``str`` keys, JSON scalar values (equality) or :class:`AnyOf` values.
    ``{}`` is the same as ``None``.

    Raises:
        InvalidArgument: a non-string key, a value neither scalar nor AnyOf, an empty AnyOf or one
            holding a non-string.
    """
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise InvalidArgument(f"where must be a dict of payload field -> value, got {type(where).__name__}.")
    for key, value in where.items():
        if not isinstance(key, str):
            raise InvalidArgument(f"where keys must be strings, got {key!r}.")
        if isinstance(value, AnyOf):
            if not value.values or not all(isinstance(v, str) for v in value.values):
                raise InvalidArgument(f"where[{key!r}]: AnyOf takes one or more strings, got {value.values!r}.")
            continue
        if not isinstance(value, _SCALARS) or (isinstance(value, float) and not math.isfinite(value)):
            raise InvalidArgument(
                f"where[{key!r}] must be a JSON scalar (str, int, float, bool or None) for an equality"
                f" match, or an AnyOf of strings, got {type(value).__name__}. Use raw_filter for anything else."
            )
    return dict(where) or None


def matches(payload: Mapping[str, Any] | None, where: Mapping[str, Any] | None) -> bool:
    """Reference semantics of ``where``: every field present in ``payload`` and equal (for an
    :class:`AnyOf`, a string among its values or a list holding one).

    ``True`` and ``1`` are different values here (as in JSON), unlike Python's ``==``.
    """
    if not where:
        return True
    if payload is None:
        return False
    for key, value in where.items():
        if key not in payload:
            return False
        got = payload[key]
        if isinstance(value, AnyOf):
            if not any_of(got, value.values):
                return False
            continue
        if got != value or isinstance(got, bool) != isinstance(value, bool):
            return False
    return True


def any_of(got: Any, values: Sequence[str]) -> bool:
    """Whether payload value ``got`` is one of ``values`` (a string) or a list holding one of them."""
    if isinstance(got, str):
        return got in values
    return isinstance(got, list) and any(isinstance(e, str) and e in values for e in got)


def check_id(point_id: Any) -> PointId:
    """Validate a point id: a ``str`` or an ``int`` (not ``bool``)."""
    if isinstance(point_id, bool) or not isinstance(point_id, (str, int)):
        raise InvalidArgument(f"A point id must be a str or an int, got {point_id!r}.")
    return point_id


def as_vector(vector: Any, size: int | None = None) -> np.ndarray:
    """``vector`` as a C-contiguous ``(d,)`` float32 array with finite values.

    Raises:
        InvalidArgument: not one-dimensional, empty, or containing NaN/inf.
        DimensionMismatch: ``size`` given and ``d != size``.
    """
    arr = np.ascontiguousarray(vector, dtype=np.float32)
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise InvalidArgument(f"A vector must be one-dimensional and non-empty, got shape {arr.shape}.")
    if size is not None and arr.shape[0] != size:
        raise DimensionMismatch(size, int(arr.shape[0]))
    if not np.isfinite(arr).all():
        raise InvalidArgument("A vector contains NaN or infinite values.")
    return arr


def stack_points(points: Sequence[Point], size: int | None) -> np.ndarray:
    """The points' vectors as one ``(n, d)`` float32 matrix, validated before anything is written.

    Raises:
        InvalidArgument: a bad id, vector or payload, or duplicate ids within ``points``.
        DimensionMismatch: a vector's size differs from ``size`` (or from the first vector's).
    """
    if not points:
        return np.zeros((0, size or 0), dtype=np.float32)
    fast = _stack_regular(points, size)
    if fast is not None:
        return fast
    expected = size
    rows = []
    seen: set[PointId] = set()
    for p in points:
        if not isinstance(p, Point):
            raise InvalidArgument(f"Expected Point objects, got {type(p).__name__}.")
        check_id(p.id)
        if p.id in seen:
            raise InvalidArgument(f"Point id {p.id!r} appears twice in one write.")
        seen.add(p.id)
        if not isinstance(p.payload, dict):
            raise InvalidArgument(f"Point {p.id!r}: payload must be a dict, got {type(p.payload).__name__}.")
        v = as_vector(p.vector, expected)
        expected = v.shape[0]
        rows.append(v)
    return np.vstack(rows)


def _stack_regular(points: Sequence[Point], size: int | None) -> np.ndarray | None:
    """The common case checked for the whole batch at once (one ``np.asarray``, one ``isfinite``;
    ~5x faster than a check per vector): plain ``Point`` objects, str/int ids without repeats, dict
    payloads, equal-length finite vectors of ``size``. ``None`` when anything is unusual, so the
    per-point checks produce the error."""
    try:
        if not all(type(p) is Point and type(p.payload) is dict and type(p.id) in (str, int) for p in points):
            return None
        if len({p.id for p in points}) != len(points):
            return None
        matrix = np.asarray([p.vector for p in points], dtype=np.float32)
    except (ValueError, TypeError):
        return None
    if matrix.ndim != 2 or matrix.shape[1] == 0 or (size is not None and matrix.shape[1] != size):
        return None
    if not np.isfinite(matrix).all():
        return None
    return np.ascontiguousarray(matrix)


class Collection(ABC):
    """One named set of points of one vector size and one distance, on one backend.

    A handle is cheap; it may exist before the collection does (:meth:`collection_exists`).
    Implementations are safe to use from several threads at once.

    The public methods are the front door (after chroma's ``Collection.query`` -> ``_query`` and
    llm's ``EmbeddingModel.embed`` -> ``embed_batch``): each checks and normalises its arguments
    once, then calls one backend hook (``_search``, ``_upsert``, ``_replace``, ``_remove``,
    ``_count``, ``_scroll``, ``_retrieve``, ``_ensure_collection``, and optionally ``_facet``,
    ``_lexical_search``, ``_index_field``, ``_native_filter``). A backend implements the hooks plus
    :meth:`collection_exists`, :meth:`drop_collection` and :meth:`info`; the hooks receive checked,
    normalised arguments (``k: int >= 1``, ``where: dict | None`` with ``{}`` turned into ``None``,
    ids as a list without repeats, a finite ``(d,)`` float32 query) and validate nothing of that
    again. What only the backend can check (a vector's size against the collection's, the form of
    its native ``raw_filter``) stays in the hooks, through the shared helpers of this module.
    """

    #: The collection's name, exactly as given (any Unicode string; backends map it to safe names).
    name: str

    # -- the front door --------------------------------------------------------------------------
    def ensure_collection(self, size: int, distance: Distance = "cosine") -> None:
        """Prepare the collection for ``size``-dimensional vectors compared by ``distance``.

        Idempotent when called again with the same arguments.

        Raises:
            DimensionMismatch: the collection exists with another size.
            DistanceMismatch: the collection exists with another distance.
            InvalidArgument: ``size < 1`` or an unknown distance.
        """
        self._ensure_collection(check_size(size), check_distance(distance))

    @abstractmethod
    def collection_exists(self) -> bool:
        """Whether :meth:`ensure_collection` has prepared this collection."""

    @abstractmethod
    def drop_collection(self) -> None:
        """Delete the collection and all its points. A missing collection is not an error."""

    @abstractmethod
    def info(self) -> CollectionInfo:
        """Size, distance and point count.

        Raises:
            StoreNotFound: the collection does not exist.
        """

    def upsert(self, points: Sequence[Point]) -> None:
        """Insert the points, overwriting any with the same id. All-or-nothing.

        Raises:
            StorageError: the disk or server refused the write (the old state stays).
            StoreNotFound: the collection does not exist.
            DimensionMismatch: a vector of another size (nothing is written).
            InvalidArgument: a bad id, vector or payload, or an id twice in ``points``.
            StoreFull: the backend's limit would be exceeded (nothing is written).
        """
        self._upsert(list(points))

    def search(
        self,
        vector: Any,
        limit: int = 10,
        where: Where | None = None,
        raw_filter: Any = None,
        score_threshold: float | None = None,
        with_payload: bool = True,
    ) -> list[ScoredPoint]:
        """The ``limit`` best points for the ``(d,)`` query ``vector``, best first.

        The filter (``raw_filter`` if given, else ``where``) is applied *before* ranking, so a
        filtered search returns ``limit`` hits whenever ``limit`` points match. Scores follow
        :data:`DISTANCE_ORDER`; ``score_threshold`` drops hits worse than it. An empty or missing
        collection returns ``[]`` only if it exists; a missing one raises ``StoreNotFound``.

        Raises:
            StoreNotFound, DimensionMismatch, InvalidArgument (``limit < 1``, bad filter or
            threshold, a vector that is not one-dimensional or holds NaN/inf).
        """
        k = check_limit(limit)
        if raw_filter is not None:
            native, w = self._native_filter(raw_filter), None
        else:
            native, w = None, check_where(where)
        threshold = check_threshold(score_threshold)
        return self._search(as_vector(vector), k, w, native, threshold, bool(with_payload))

    def remove(self, ids: Sequence[PointId] | None = None, where: Where | None = None) -> int:
        """Delete points by id and/or ``where`` (both given: points matching either). Returns how many.

        ``remove()`` with neither removes nothing (use :meth:`drop_collection` to empty a store).

        Raises:
            StoreNotFound: the collection does not exist.
            InvalidArgument: a bad id or filter.
        """
        wanted = unique_ids(ids) if ids is not None else []
        return self._remove(wanted, check_where(where))

    def count(self, where: Where | None = None) -> int:
        """Number of points (matching ``where`` when given).

        Raises:
            StoreNotFound, InvalidArgument (a bad filter).
        """
        return self._count(check_where(where))

    def replace(self, where: Where, points: Sequence[Point]) -> None:
        """Atomically delete every point matching ``where`` and insert ``points``.

        Readers -- in this process or another -- see the old set or the new set, never a mix, never
        nothing in between. A failure leaves the old set in place. ``where`` must be non-empty.

        Raises:
            The same as :meth:`upsert`; ``InvalidArgument`` for an empty ``where``.
        """
        w = check_where(where)
        if not w:
            raise InvalidArgument("replace() needs a non-empty where, e.g. {'file_id': ...}.")
        self._replace(w, list(points))

    def scroll(
        self,
        where: Where | None = None,
        limit: int | None = None,
        with_vectors: bool = False,
    ) -> Iterator[Point]:
        """Iterate over points (matching ``where``) in a stable order; vectors are empty ``(0,)``
        float32 arrays unless ``with_vectors``. At most ``limit`` points (``None``: all).

        Raises:
            StoreNotFound, InvalidArgument (a bad filter, ``limit < 0``).
        """
        w = check_where(where)
        if limit is not None:
            limit = check_limit(limit, "scroll limit", allow_zero=True)
        return self._scroll(w, limit, bool(with_vectors))

    def retrieve(self, ids: Sequence[PointId], with_vectors: bool = False) -> list[Point]:
        """The points with these ids, in the given order; unknown ids are skipped and a repeated id
        is returned once.

        Raises:
            StoreNotFound, InvalidArgument (a bad id, or a bare id instead of a list).
        """
        return self._retrieve(unique_ids(ids), bool(with_vectors))

    def facet(self, key: str, where: Where | None = None) -> dict[Any, int]:
        """Count points per value of payload field ``key`` (points without it are not counted).

        Raises:
            StoreNotFound, InvalidArgument (a non-string key, a bad filter).
        """
        return self._facet(check_key(key, "A facet key"), check_where(where))

    def bulk_load(self) -> contextlib.AbstractContextManager[None]:
        """A context for filling a collection with many writes (an import, a move): a backend may
        defer index upkeep to its end -- pgvector builds its HNSW index once after the rows are in,
        instead of maintaining it in every write (about 7x faster to build over loaded rows). The
        writes inside are as durable and visible as outside; only the index may lag until the
        context ends. Default: no change."""
        return contextlib.nullcontext()

    def ensure_lexical_index(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Build the backend's lexical index of this collection now when the backend keeps one and
        it is missing (so later writes keep it and no search waits for a build). Default: nothing.

        Raises:
            StoreNotFound.
        """

    def lexical_search(self, query: str, limit: int, where: Where | None = None) -> list[ScoredPoint] | None:
        """The ``limit`` best BM25 matches of ``query`` over the points' ``heading`` + ``text``
        payload fields, from an index the backend keeps in step with its points (updated in the
        same write), best first; ``score`` is BM25 (>= 0, higher is better). Points sharing no
        term with the query are not returned; ``where`` filters by equality as in :meth:`search`.

        Returns ``None`` when the backend keeps no lexical index: callers then build one in
        process (:class:`knowledge.service.fusion.LexicalIndex`).

        Raises:
            StoreNotFound; InvalidArgument (``limit < 1``, a bad filter).
        """
        return self._lexical_search(query, check_limit(limit), check_where(where))

    def index_field(self, key: str) -> None:
        """Ask the backend to index payload field ``key`` for equality filters (a field filtered on
        often, such as a memory's dataset field). Idempotent; a backend that needs no such index
        does nothing (the default).

        Raises:
            InvalidArgument: ``key`` is not a string.
        """
        self._index_field(check_key(key))

    # -- the hooks a backend implements (arguments already checked and normalised) ---------------
    @abstractmethod
    def _ensure_collection(self, size: int, distance: Distance) -> None:
        """[Internal] :meth:`ensure_collection` with ``size >= 1`` and a known ``distance``. An
        existing collection is checked with :func:`check_prepared`."""

    @abstractmethod
    def _upsert(self, points: list[Point]) -> None:
        """[Internal] :meth:`upsert` of the list ``points``, not yet validated against the
        collection's size: use :func:`stack_points` (and :func:`~knowledge.vectorstore.scoring.
        normalise_rows` for cosine) before writing anything."""

    @abstractmethod
    def _replace(self, where: dict[str, Any], points: list[Point]) -> None:
        """[Internal] :meth:`replace` with a checked, non-empty ``where``; ``points`` as for
        :meth:`_upsert`."""

    @abstractmethod
    def _search(
        self,
        vector: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        raw_filter: Any,
        threshold: float | None,
        with_payload: bool,
    ) -> list[ScoredPoint]:
        """[Internal] :meth:`search` with a finite ``(d,)`` float32 ``vector`` (size not yet checked:
        :func:`check_vector_size`; not normalised: :func:`~knowledge.vectorstore.scoring.prepare_query`),
        ``k >= 1``, ``where`` checked (``None`` when empty or when ``raw_filter`` is given),
        ``raw_filter`` as :meth:`_native_filter` returned it (or ``None``), ``threshold`` a float
        or ``None`` (:func:`~knowledge.vectorstore.scoring.passes_threshold`)."""

    def _native_filter(self, raw_filter: Any) -> Any:
        """[Internal] Check a (non-``None``) ``raw_filter`` and return the backend's native form;
        ``InvalidArgument`` when it has the wrong form. Default: passed on as given."""
        return raw_filter

    @abstractmethod
    def _remove(self, ids: list[PointId], where: dict[str, Any] | None) -> int:
        """[Internal] :meth:`remove` with checked ids (no repeats; ``[]``: none given) and ``where``.
        Both empty: remove nothing, return 0 (``StoreNotFound`` still applies)."""

    @abstractmethod
    def _count(self, where: dict[str, Any] | None) -> int:
        """[Internal] :meth:`count` with a checked ``where``."""

    @abstractmethod
    def _scroll(self, where: dict[str, Any] | None, limit: int | None, with_vectors: bool) -> Iterator[Point]:
        """[Internal] :meth:`scroll` with a checked ``where`` and ``limit`` (``None`` or ``>= 0``)."""

    @abstractmethod
    def _retrieve(self, ids: list[PointId], with_vectors: bool) -> list[Point]:
        """[Internal] :meth:`retrieve` with checked ids, each once."""

    def _facet(self, key: str, where: dict[str, Any] | None) -> dict[Any, int]:
        """[Internal] :meth:`facet` with a ``str`` key and a checked ``where``. The default scrolls;
        backends override it with something faster."""
        counts: dict[Any, int] = {}
        for p in self._scroll(where, None, False):
            if key in p.payload:
                value = p.payload[key]
                if isinstance(value, _SCALARS):
                    counts[value] = counts.get(value, 0) + 1
        return counts

    def _lexical_search(self, query: str, k: int, where: dict[str, Any] | None) -> list[ScoredPoint] | None:
        """[Internal] :meth:`lexical_search` with ``k >= 1`` and a checked ``where``. Default:
        ``None`` (no lexical index kept)."""
        return None

    def _index_field(self, key: str) -> None:  # noqa: B027 - optional hook, a no-op by default
        """[Internal] :meth:`index_field` with a ``str`` key. Default: nothing."""


class VectorBackend(ABC):
    """A configured backend: hands out collections by name. One instance per backend configuration.

    Constructed as ``Backend(settings)`` with :class:`knowledge.config.Settings`; backends take what
    they need from it (``settings.vector_store``, resolved paths such as
    ``settings.vector_store_dir``).
    """

    #: The backend's registry name (the entry-point name in ``knowledge.vector_store_backends``).
    name: ClassVar[str]

    @abstractmethod
    def collection(self, name: str) -> Collection:
        """A handle on the collection called ``name`` (which may not exist yet)."""

    @abstractmethod
    def list_collections(self) -> list[str]:
        """Names of the existing collections, sorted."""

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections, threads and locks. Idempotent."""

    @classmethod
    def machine_local(cls, settings: Any) -> str | None:
        """Why this backend, configured by ``settings`` (:class:`knowledge.config.Settings`), keeps
        its points where only this machine (or process) reaches them -- a clause such as ``"the
        memory backend keeps its vectors in this machine's folder /data/vector-stores"`` -- or
        ``None`` when every host with the same settings reaches the same points (a server by URL).
        The service refuses such a backend while the catalog is shared (``catalog.url``). The
        default, for a plugin that says nothing, is ``None``."""
        return None

    def __enter__(self) -> VectorBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: ``raw_filter`` for the memory backend: a predicate on the payload.
PayloadPredicate = Callable[[Mapping[str, Any]], bool]
