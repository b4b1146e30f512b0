"""The ``qdrant`` backend: the backend contract on `qdrant-client <https://github.com/qdrant/qdrant-client>`_.

Location (``vector_store.qdrant_location``, else ``vector_store.url``, else the folder ``qdrant`` under
``data_dir``): a Qdrant server (1.10 or newer; ``qdrant_api_key`` for Qdrant Cloud), ``:memory:``
(local mode in this process; the tests), or a folder (local mode, one process at a time).

Our collections are *logical*: all of size ``d`` and distance ``dist`` live in one physical collection
``<qdrant_collection>-<dist>-<d>``, told apart by :data:`COLLECTION_FIELD` (a tenant index), and a
registry collection ``<qdrant_collection>-registry`` records each one's size and distance. Point ids
are ``uuid5`` of the logical collection and our readable id (kept as :data:`ID_FIELD`), so every
write is idempotent. ``where`` becomes a Qdrant ``Filter`` ANDed with the logical collection (a list
payload value matches when any element does); ``raw_filter`` is a native ``Filter`` and wins over
``where``. ``replace`` upserts the new points, then deletes the old ones not among them (no
transaction). BM25 is a sparse vector ``bm25`` beside the dense one. Remote calls time out
(``qdrant_timeout``) and are retried with backoff (``qdrant_retries``; tenacity).

The design, with Qdrant's multitenancy advice and the limits of local mode: ``docs/backends.md``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
import orjson
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from qdrant_client.local.qdrant_local import QdrantLocal
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from knowledge.errors import (
    BackendUnavailable,
    DimensionMismatch,
    InvalidArgument,
    StorageError,
    StoreNotFound,
)
from knowledge.vectorstore.base import (
    AnyOf,
    Collection,
    CollectionInfo,
    Point,
    PointId,
    ScoredPoint,
    VectorBackend,
    check_name,
    check_prepared,
    check_vector_size,
    stack_points,
)
from knowledge.vectorstore.lexical import indexed_text, sparse_document, sparse_query
from knowledge.vectorstore.scoring import Distance

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.config import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Payload field naming a point's logical collection (tenant-indexed).
COLLECTION_FIELD = "_kn_collection"
#: Payload field keeping a point's readable id (str or int).
ID_FIELD = "_kn_id"
RESERVED_PAYLOAD_FIELDS = (COLLECTION_FIELD, ID_FIELD)
#: The named sparse vector holding a point's BM25 term weights (:func:`knowledge.vectorstore.lexical.sparse_document`),
#: with Qdrant's IDF modifier: the lexical index of :meth:`QdrantCollection.lexical_search`.
SPARSE_VECTOR = "bm25"
#: Payload fields indexed in every physical collection (the VectorStore facade's and memory's).
DEFAULT_INDEXED_FIELDS = ("file_id", "dataset")
#: Oldest Qdrant server with the query endpoint (``/points/query``) this backend searches with.
MIN_SERVER_VERSION = (1, 10)
#: First Qdrant server whose keyword index takes ``is_tenant`` (as the spec states).
TENANT_INDEX_VERSION = (1, 12)
#: Namespace of the point UUIDs (uuid5 of the logical collection and the readable id).
POINT_NAMESPACE = uuid.UUID("6f1c1f4e-3b7a-5d2e-9a61-0c4b8e2d7f35")
_DISTANCES = {
    "cosine": models.Distance.COSINE,
    "dot": models.Distance.DOT,
    "euclid": models.Distance.EUCLID,
    "manhattan": models.Distance.MANHATTAN,
}
_RETRY_STATUS = {429, 502, 503, 504}
_MAX_RETRY_AFTER = 30.0
_PAGE = 256
_SIMPLE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_INT64 = 2**63


def point_uuid(collection: str, point_id: PointId) -> str:
    """The Qdrant point id of our point ``point_id`` in logical collection ``collection``: a uuid5
    of ``json.dumps([collection, point_id])`` (so ``1`` and ``"1"`` differ)."""
    return str(uuid.uuid5(POINT_NAMESPACE, json.dumps([collection, point_id], ensure_ascii=False)))


def _version(text: str | None) -> tuple[int, ...]:
    nums = re.findall(r"\d+", text or "")[:3]
    return tuple(int(n) for n in nums) if nums else (0,)


def _key(field: str) -> str:
    """A payload key as a Qdrant JSON path: quoted unless it is plain (a dot would mean nesting)."""
    if _SIMPLE_KEY.match(field):
        return field
    if '"' in field:
        raise InvalidArgument(f"The qdrant backend cannot filter on a payload field with a double quote: {field!r}.")
    return f'"{field}"'


def _condition(field: str, value: Any) -> models.Condition:
    key = _key(field)
    if isinstance(value, AnyOf):  # a keyword field or an array of them holding any of the values
        return models.FieldCondition(key=key, match=models.MatchAny(any=list(value.values)))
    if value is None:
        return models.IsNullCondition(is_null=models.PayloadField(key=key))
    if isinstance(value, (bool, str)):
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))
    if isinstance(value, int) and abs(value) > 2**53:  # beyond exact float range
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))
    return models.FieldCondition(key=key, range=models.Range(gte=float(value), lte=float(value)))


def where_filter(where: dict[str, Any] | None) -> list[models.Condition]:
    """The conditions (to AND) of a validated ``where`` dict."""
    return [_condition(k, v) for k, v in (where or {}).items()]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (ResourceExhaustedResponse, ResponseHandlingException)):
        return True
    return isinstance(exc, UnexpectedResponse) and exc.status_code in _RETRY_STATUS


def _retry_after(exc: BaseException | None) -> float | None:
    if isinstance(exc, ResourceExhaustedResponse):
        return float(exc.retry_after_s)
    if isinstance(exc, UnexpectedResponse) and exc.headers is not None:
        value = exc.headers.get("Retry-After")
        try:
            return float(value) if value is not None else None
        except ValueError:
            return None
    return None


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


class _Wait:
    """tenacity wait: the server's ``Retry-After`` (capped at 30 s) when given, else exponential
    backoff with jitter (0.1 s doubling, at most 2 s)."""

    def __init__(self) -> None:
        self._backoff = wait_exponential_jitter(multiplier=0.1, max=2.0, jitter=0.1)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        after = _retry_after(exc)
        if after is not None:
            return min(max(after, 0.0), _MAX_RETRY_AFTER)
        return self._backoff(state)


class QdrantBackend(VectorBackend):
    """Logical collections in physical Qdrant collections, one per (distance, dimension).

    Args:
        settings: reads ``vector_store.qdrant_location`` (or ``url``), ``qdrant_api_key``,
            ``qdrant_collection`` (prefix of the physical collections, default ``knowledge``),
            ``qdrant_timeout`` (seconds) and ``qdrant_retries`` (attempts).
        client: an existing ``QdrantClient`` to use instead (not closed by :meth:`close`); tests
            share one ``:memory:`` client between backend instances this way.

    Raises:
        BackendUnavailable: the server cannot be reached, is older than Qdrant 1.10, or the local
            folder is open in another process.
    """

    name: ClassVar[str] = "qdrant"

    def __init__(self, settings: Settings, *, client: QdrantClient | None = None) -> None:
        vs = settings.vector_store
        self.prefix: str = vs.qdrant_collection
        self.timeout = float(vs.qdrant_timeout)
        self.attempts = int(vs.qdrant_retries)
        self._owns_client = client is None
        self._closed = False
        self._local_lock = threading.RLock()
        self._known: set[str] = set()  # physical collections known to exist (indexes made)
        self._sparse: dict[str, bool] = {}  # physical collection -> has the SPARSE_VECTOR (see has_sparse)
        self._entries: dict[str, dict[str, Any]] = {}  # registry entries last read (see cached_entry)
        self._index_fields: set[str] = set(DEFAULT_INDEXED_FIELDS)
        if client is None:
            self.location = self._location(settings)
            client = self._connect(settings)
        else:
            self.location = "(client)"
        self.client = client
        self.is_local = isinstance(getattr(client, "_client", None), QdrantLocal)
        self._retrying = Retrying(
            stop=stop_after_attempt(max(1, self.attempts)),
            wait=_Wait(),
            retry=retry_if_exception(_retryable),
            reraise=True,
        )
        self.server_version: tuple[int, ...] = self._check_version()
        #: Whether the logical-collection index is a tenant index (Qdrant 1.12+, as the spec says).
        self.tenant_index = self.is_local or self.server_version >= TENANT_INDEX_VERSION

    @classmethod
    def machine_local(cls, settings: Settings) -> str | None:
        """A reason for local mode (a folder, or ``:memory:``); ``None`` for a server URL."""
        loc = cls._location(settings)
        if loc == ":memory:":
            return "Qdrant's in-memory mode (':memory:') keeps its vectors in this process only"
        if re.match(r"^https?://", loc):
            return None
        return f"Qdrant's local mode keeps its vectors in this machine's folder {loc}"

    # -- connection -------------------------------------------------------------------------------
    @staticmethod
    def _location(settings: Settings) -> str:
        vs = settings.vector_store
        loc = vs.qdrant_location
        if not loc and vs.url and re.match(r"^https?://", vs.url):
            loc = vs.url
        if not loc:
            loc = "qdrant"
        if loc == ":memory:" or re.match(r"^https?://", loc):
            return loc
        return str(settings.resolve(loc))

    def _connect(self, settings: Settings) -> QdrantClient:
        loc = self.location
        try:
            if loc == ":memory:":
                return QdrantClient(location=":memory:", force_disable_check_same_thread=True)
            if re.match(r"^https?://", loc):
                key = settings.vector_store.qdrant_api_key
                return QdrantClient(
                    url=loc,
                    api_key=key.get_secret_value() if key is not None else None,
                    timeout=max(1, math.ceil(self.timeout)),
                    check_compatibility=False,  # we check the version ourselves (see _check_version)
                )
            Path(loc).mkdir(parents=True, exist_ok=True)
            return QdrantClient(path=loc, force_disable_check_same_thread=True)
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise BackendUnavailable(
                    f"The local Qdrant folder {loc!r} is open in another process (the app or another"
                    " command). Close that one, or run a Qdrant server and set"
                    " vector_store.qdrant_location to its URL for concurrent access."
                ) from None
            raise BackendUnavailable(f"The qdrant backend could not open {loc!r}: {exc}") from exc

    def _check_version(self) -> tuple[int, ...]:
        if self.is_local:
            return _version(self.client.info().version)
        try:
            version = _version(self.call(self.client.info).version)
        except BackendUnavailable:
            raise
        except Exception as exc:
            raise BackendUnavailable(
                f"The Qdrant server at {self.location} cannot be reached: {exc}. Check"
                " vector_store.qdrant_location (and qdrant_api_key for Qdrant Cloud)."
            ) from None
        if version < MIN_SERVER_VERSION:
            raise BackendUnavailable(
                f"The Qdrant server at {self.location} is version {'.'.join(map(str, version))}; the"
                " qdrant backend needs Qdrant 1.10 or newer (its query endpoint appeared in 1.10)."
                " Upgrade the server."
            )
        return version

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call the client: serialised in local mode (it is not thread-safe), retried on a server.

        Raises:
            BackendUnavailable: the server kept failing (transport errors, 429, 502-504) after
                ``qdrant_retries`` attempts, or refused the API key (401/403).
        """
        if self.is_local:
            with self._local_lock:
                return fn(*args, **kwargs)
        try:
            return self._retrying(fn, *args, **kwargs)
        except UnexpectedResponse as exc:
            if exc.status_code in (401, 403):
                raise BackendUnavailable(
                    f"The Qdrant server at {self.location} refused the request ({exc.status_code}):"
                    " check vector_store.qdrant_api_key."
                ) from None
            if exc.status_code not in _RETRY_STATUS:
                raise
            raise BackendUnavailable(
                f"The Qdrant server at {self.location} kept answering {exc.status_code} after"
                f" {_attempts(self.attempts)}; try again later."
            ) from exc
        except (ResponseHandlingException, ResourceExhaustedResponse) as exc:
            raise BackendUnavailable(
                f"The Qdrant server at {self.location} did not answer after {_attempts(self.attempts)}"
                f" ({getattr(exc, 'source', exc)!s}). Is it running? Check vector_store.qdrant_location."
            ) from exc

    @property
    def registry_name(self) -> str:
        return f"{self.prefix}-registry"

    def physical_name(self, size: int, distance: str) -> str:
        """The physical collection of ``size``-d vectors compared by ``distance``."""
        return f"{self.prefix}-{distance}-{size}"

    def _ensure_registry(self) -> None:
        if self.registry_name in self._known:
            return
        if not self.call(self.client.collection_exists, self.registry_name):
            self._create(self.registry_name, models.VectorParams(size=1, distance=models.Distance.DOT))
        self._known.add(self.registry_name)

    def _create(self, name: str, params: models.VectorParams, *, sparse: bool = False) -> None:
        extra = (
            {"sparse_vectors_config": {SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)}}
            if sparse
            else {}
        )
        try:
            self.call(self.client.create_collection, name, vectors_config=params, **extra)
        except UnexpectedResponse as exc:
            if exc.status_code != 409:  # 409: another process created it first
                raise
        except ValueError as exc:  # local mode: "Collection ... already exists"
            if "already exists" not in str(exc):
                raise

    def ensure_physical(self, size: int, distance: str) -> str:
        """The physical collection of ``size``-d vectors compared by ``distance``, created (with its
        payload indexes) when missing; known ones are not asked about again."""
        name = self.physical_name(size, distance)
        if name in self._known:
            return name
        if not self.call(self.client.collection_exists, name):
            self._create(name, models.VectorParams(size=size, distance=_DISTANCES[distance]), sparse=True)
        if not self.is_local:  # local mode has no payload indexes (qdrant-client warns and ignores them)
            self._indexes(name)
        self._known.add(name)
        return name

    def _indexes(self, name: str) -> None:
        tenant = models.KeywordIndexParams(
            type=models.KeywordIndexType.KEYWORD, is_tenant=True if self.tenant_index else None
        )
        self.call(self.client.create_payload_index, name, COLLECTION_FIELD, field_schema=tenant)
        for field in sorted(self._index_fields):
            self._index(name, field)

    def _index(self, physical: str, field: str) -> None:
        if self.is_local:
            return
        self.call(self.client.create_payload_index, physical, _key(field), field_schema=models.PayloadSchemaType.KEYWORD)

    def index(self, field: str, physical: str | None = None) -> None:
        """Keep a keyword index on payload ``field`` in every physical collection made from now on,
        and make it now in ``physical`` when given. Idempotent; local mode has no payload indexes."""
        self._index_fields.add(field)
        if physical is not None:
            self._index(physical, field)

    def forget_physical(self, physical: str) -> None:
        """Stop assuming that ``physical`` exists (it was deleted behind our back)."""
        self._known.discard(physical)
        self._sparse.pop(physical, None)

    def has_sparse(self, physical: str) -> bool:
        """Whether physical collection ``physical`` carries the BM25 sparse vector
        (:data:`SPARSE_VECTOR`): every one made by this version does; one made before has none
        (Qdrant cannot add a vector to an existing collection), and its stores' hybrid search uses
        the in-process index instead. Asked once per backend and collection."""
        known = self._sparse.get(physical)
        if known is None:
            info = self.call(self.client.get_collection, physical)
            known = SPARSE_VECTOR in (info.config.params.sparse_vectors or {})
            if not known:
                log.warning(
                    "qdrant: collection %r was made before BM25 sparse vectors; hybrid search of its"
                    " stores builds an in-process lexical index (move a store to a new template,"
                    " or re-create it, to get the persisted one)",
                    physical,
                )
            self._sparse[physical] = known
        return known

    def exclusive(self) -> contextlib.AbstractContextManager[Any]:
        """A context in which no other call of this backend runs, in local mode (whose client is
        serialised by one re-entrant lock). On a server: a null context (no exclusion)."""
        return self._local_lock if self.is_local else contextlib.nullcontext()

    def registry_entry(self, name: str) -> dict[str, Any] | None:
        """``{"name", "size", "distance"}`` of logical collection ``name``, or ``None``."""
        self._ensure_registry()
        got = self.call(self.client.retrieve, self.registry_name, [point_uuid("", name)], with_payload=True)
        entry = dict(got[0].payload) if got and got[0].payload is not None else None
        if entry is None:
            self._entries.pop(name, None)
        else:
            self._entries[name] = entry
        return entry

    def cached_entry(self, name: str) -> dict[str, Any] | None:
        """The registry entry of ``name`` as last read by this backend (no call), or ``None``: for
        reads that check it themselves (:meth:`QdrantCollection._read`)."""
        return self._entries.get(name)

    def forget_entry(self, name: str) -> None:
        """Drop the entry of ``name`` read before (the collection was dropped)."""
        self._entries.pop(name, None)

    # -- VectorBackend ------------------------------------------------------------------------------
    def collection(self, name: str) -> QdrantCollection:
        """A handle on logical collection ``name`` (cheap; it may not exist yet).

        Raises:
            InvalidArgument: ``name`` is not a non-empty string.
        """
        return QdrantCollection(self, check_name(name))

    def list_collections(self) -> list[str]:
        """Names of the logical collections in the registry, sorted."""
        self._ensure_registry()
        names: list[str] = []
        offset = None
        while True:
            records, offset = self.call(
                self.client.scroll, self.registry_name, limit=_PAGE, offset=offset, with_payload=True
            )
            names.extend(r.payload["name"] for r in records if r.payload and "name" in r.payload)
            if offset is None:
                return sorted(names)

    def close(self) -> None:
        """Close the client (unless it was given to the constructor). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            try:
                self.client.close()
            except Exception:  # pragma: no cover - closing must not raise
                log.debug("closing the qdrant client failed", exc_info=True)

    def __repr__(self) -> str:
        return f"QdrantBackend(location={self.location!r}, prefix={self.prefix!r})"


class QdrantCollection(Collection):
    """One logical collection: the points of one physical collection whose :data:`COLLECTION_FIELD`
    is this name. Thread-safe (the client is; local mode is serialised by the backend)."""

    def __init__(self, backend: QdrantBackend, name: str) -> None:
        self.backend = backend
        self.name = name

    # -- helpers ----------------------------------------------------------------------------------
    def _entry(self) -> dict[str, Any]:
        entry = self.backend.registry_entry(self.name)
        if entry is None:
            raise StoreNotFound(self.name)
        return entry

    def _read(self, fn: Callable[[dict[str, Any]], T]) -> T:
        """``fn(entry)`` for a read (search, retrieve) with the registry entry read earlier, saving
        a registry look-up per read. When that entry may be stale -- the read finds nothing, the
        physical collection is gone, or the sizes disagree (another process dropped or re-created
        the collection) -- the registry is read again and, if the entry changed, ``fn`` runs again."""
        cached = self.backend.cached_entry(self.name)
        if cached is None:
            return fn(self._entry())
        try:
            out = fn(cached)
        except (StoreNotFound, DimensionMismatch):
            out = None
        if out:
            return out
        fresh = self._entry()
        return fn(fresh) if out is None or fresh != cached else out

    def _physical(self, entry: dict[str, Any]) -> str:
        return self.backend.physical_name(int(entry["size"]), entry["distance"])

    def _scope(self, *conditions: models.Condition, must_not: list[models.Condition] | None = None) -> models.Filter:
        own = models.FieldCondition(key=COLLECTION_FIELD, match=models.MatchValue(value=self.name))
        return models.Filter(must=[own, *conditions], must_not=must_not)

    def _uuid(self, point_id: PointId) -> str:
        if isinstance(point_id, int) and not -_INT64 <= point_id < _INT64:
            raise InvalidArgument(f"The qdrant backend keeps int ids within 64 bits, got {point_id}.")
        return point_uuid(self.name, point_id)

    def _out_payload(self, payload: dict[str, Any] | None) -> dict[str, Any]:
        return {k: v for k, v in (payload or {}).items() if k not in RESERVED_PAYLOAD_FIELDS}

    def _points(self, points: Sequence[Point], size: int, sparse: bool = False) -> list[models.PointStruct]:
        """The Qdrant points of ``points``; with ``sparse``, each also carries its BM25 term weights
        (:data:`SPARSE_VECTOR`, from the payload's ``heading`` + ``text``) in the same point, so the
        lexical index is written in the same write as the vectors."""
        matrix = stack_points(points, size)
        out = []
        for p, vec in zip(points, matrix):
            self._uuid(p.id)
            for key in RESERVED_PAYLOAD_FIELDS:
                if key in p.payload:
                    raise InvalidArgument(f"Point {p.id!r}: payload field {key!r} is reserved by the qdrant backend.")
            try:
                payload = orjson.loads(orjson.dumps(p.payload))  # the JSON round trip, as on every backend
            except (TypeError, orjson.JSONEncodeError) as exc:
                raise InvalidArgument(f"Point {p.id!r}: payload is not JSON-serialisable ({exc}).") from None
            payload[COLLECTION_FIELD] = self.name
            payload[ID_FIELD] = p.id
            vector: Any = vec.tolist()
            if sparse:
                indices, values = sparse_document(indexed_text(p.payload))
                vector = {"": vector}
                if indices:
                    vector[SPARSE_VECTOR] = models.SparseVector(indices=indices, values=values)
            out.append(models.PointStruct(id=self._uuid(p.id), vector=vector, payload=payload))
        return out

    def _write(self, physical: str, structs: list[models.PointStruct]) -> None:
        for start in range(0, len(structs), _PAGE * 4):
            try:
                self.backend.call(self.backend.client.upsert, physical, structs[start : start + _PAGE * 4], wait=True)
            except UnexpectedResponse as exc:
                raise StorageError(f"Qdrant refused the write to {self.name!r}: {exc}") from None

    def _filter(self, where: dict[str, Any] | None) -> models.Filter:
        return self._scope(*where_filter(where))

    def _ids_matching(self, physical: str, flt: models.Filter) -> list[str]:
        ids: list[str] = []
        offset = None
        while True:
            records, offset = self.backend.call(
                self.backend.client.scroll,
                physical,
                scroll_filter=flt,
                limit=_PAGE * 4,
                offset=offset,
                with_payload=False,
                with_vectors=False,
            )
            ids.extend(str(r.id) for r in records)
            if offset is None:
                return ids

    @contextlib.contextmanager
    def _physical_gone(self, physical: str) -> Iterator[None]:
        """A registered collection whose physical Qdrant collection was deleted behind our back
        (by hand, say) is reported as missing rather than as a raw client error."""
        try:
            yield
        except UnexpectedResponse as exc:
            self.backend.forget_physical(physical)
            if exc.status_code == 404:
                raise StoreNotFound(self.name, f"its Qdrant collection {physical!r} is gone") from None
            raise
        except ValueError as exc:  # local mode: "Collection ... not found"
            self.backend.forget_physical(physical)
            if "not found" in str(exc):
                raise StoreNotFound(self.name, f"its Qdrant collection {physical!r} is gone") from None
            raise

    # -- Collection ---------------------------------------------------------------------------------
    def _ensure_collection(self, size: int, distance: Distance) -> None:
        """Register this logical collection for ``size``-d vectors and ``distance`` (idempotent),
        creating its physical collection and payload indexes when needed."""
        entry = self.backend.registry_entry(self.name)
        if entry is not None:
            check_prepared(self.name, int(entry["size"]), entry["distance"], size, distance)
            self.backend.ensure_physical(size, distance)
            return
        self.backend.ensure_physical(size, distance)
        payload = {"name": self.name, "size": size, "distance": distance}
        self.backend.call(
            self.backend.client.upsert,
            self.backend.registry_name,
            [models.PointStruct(id=point_uuid("", self.name), vector=[1.0], payload=payload)],
            wait=True,
        )

    def collection_exists(self) -> bool:
        return self.backend.registry_entry(self.name) is not None

    def drop_collection(self) -> None:
        """Delete this logical collection's points and its registry entry (the physical collection
        stays for the others). A missing collection is not an error."""
        entry = self.backend.registry_entry(self.name)
        if entry is None:
            return
        physical = self._physical(entry)
        if self.backend.call(self.backend.client.collection_exists, physical):
            self.backend.call(
                self.backend.client.delete, physical, points_selector=models.FilterSelector(filter=self._scope()), wait=True
            )
        self.backend.call(
            self.backend.client.delete,
            self.backend.registry_name,
            points_selector=models.PointIdsList(points=[point_uuid("", self.name)]),
            wait=True,
        )
        self.backend.forget_entry(self.name)

    def _index_field(self, key: str) -> None:
        """A keyword index on payload field ``key`` in this collection's physical collection (and in
        every one the backend makes from now on)."""
        entry = self.backend.registry_entry(self.name)
        self.backend.index(key, self._physical(entry) if entry is not None else None)

    def info(self) -> CollectionInfo:
        entry = self._entry()
        return CollectionInfo(
            name=self.name,
            size=int(entry["size"]),
            distance=entry["distance"],
            count=self._count_in(entry, None),
            backend="qdrant",
        )

    def _upsert(self, points: list[Point]) -> None:
        """Same id, same Qdrant point. ``InvalidArgument`` also for a reserved payload field."""
        entry = self._entry()
        physical = self._physical(entry)
        with self._physical_gone(physical):
            structs = self._points(points, int(entry["size"]), self.backend.has_sparse(physical))
        if structs:
            self._write(physical, structs)

    def _search(
        self,
        vector: np.ndarray,
        k: int,
        where: dict[str, Any] | None,
        raw_filter: Any,
        score_threshold: float | None,
        with_payload: bool,
    ) -> list[ScoredPoint]:
        """Through Qdrant's query endpoint; a ``raw_filter`` is still confined to this logical
        collection. Qdrant's ``score_threshold`` has the contract's direction."""
        flt = self._scope(raw_filter) if raw_filter is not None else self._filter(where)

        def go(entry: dict[str, Any]) -> list[ScoredPoint]:
            q = check_vector_size(vector, int(entry["size"]))
            physical = self._physical(entry)
            with self._physical_gone(physical):
                res = self.backend.call(
                    self.backend.client.query_points,
                    physical,
                    query=q.tolist(),
                    query_filter=flt,
                    limit=k,
                    score_threshold=score_threshold,
                    with_payload=True if with_payload else [ID_FIELD],
                    with_vectors=False,
                )
            out = []
            for sp in res.points:
                payload = sp.payload or {}
                out.append(
                    ScoredPoint(
                        id=payload.get(ID_FIELD, str(sp.id)),
                        score=float(sp.score),
                        payload=self._out_payload(payload) if with_payload else None,
                    )
                )
            return out

        return self._read(go)

    def _lexical_search(self, query: str, k: int, w: dict[str, Any] | None) -> list[ScoredPoint] | None:
        """BM25 through Qdrant: a sparse-vector query on :data:`SPARSE_VECTOR` (weight 1 per query
        term, Qdrant's IDF modifier), confined to this logical collection and ``w``; ``score`` is
        BM25 (>= 0, higher is better). The IDF counts the points of the whole physical collection
        (every store of this dimension and distance), and the length normalisation uses a fixed
        average (:data:`knowledge.vectorstore.lexical.SPARSE_AVG_TERMS`): ranks can differ slightly from the
        memory backend's exact BM25. ``None`` for a collection made before sparse vectors."""
        entry = self.backend.cached_entry(self.name) or self._entry()
        physical = self._physical(entry)
        with self._physical_gone(physical):
            if not self.backend.has_sparse(physical):
                return None
        indices, values = sparse_query(query) if isinstance(query, str) else ([], [])
        flt = self._filter(w)

        def go(entry: dict[str, Any]) -> list[ScoredPoint]:
            physical = self._physical(entry)
            if not indices:
                return []
            with self._physical_gone(physical):
                res = self.backend.call(
                    self.backend.client.query_points,
                    physical,
                    query=models.SparseVector(indices=indices, values=values),
                    using=SPARSE_VECTOR,
                    query_filter=flt,
                    limit=k,
                    with_payload=True,
                    with_vectors=False,
                )
            return [
                ScoredPoint(
                    id=(sp.payload or {}).get(ID_FIELD, str(sp.id)),
                    score=float(sp.score),
                    payload=self._out_payload(sp.payload),
                )
                for sp in res.points
            ]

        return self._read(go)

    @staticmethod
    def _native_filter(raw_filter: Any) -> models.Filter:
        """A ``qdrant_client.models.Filter`` or its dict form."""
        if isinstance(raw_filter, models.Filter):
            return raw_filter
        if isinstance(raw_filter, dict):
            try:
                return models.Filter.model_validate(raw_filter)
            except Exception as exc:
                raise InvalidArgument(f"raw_filter is not a valid Qdrant filter: {exc}") from None
        raise InvalidArgument(
            "raw_filter for the qdrant backend is a qdrant_client.models.Filter (or its dict form),"
            f" got {type(raw_filter).__name__}."
        )

    def _remove(self, ids: list[PointId], w: dict[str, Any] | None) -> int:
        wanted = [self._uuid(i) for i in ids]
        entry = self._entry()
        if not wanted and not w:
            return 0
        physical = self._physical(entry)
        targets: dict[str, None] = {}
        if wanted:
            got = self.backend.call(
                self.backend.client.retrieve, physical, wanted, with_payload=[COLLECTION_FIELD], with_vectors=False
            )
            targets.update((str(r.id), None) for r in got if (r.payload or {}).get(COLLECTION_FIELD) == self.name)
        if w:
            targets.update((i, None) for i in self._ids_matching(physical, self._filter(w)))
        if targets:
            self.backend.call(
                self.backend.client.delete, physical, points_selector=models.PointIdsList(points=list(targets)), wait=True
            )
        return len(targets)

    def _count_in(self, entry: dict[str, Any], where: dict[str, Any] | None) -> int:
        physical = self._physical(entry)
        with self._physical_gone(physical):
            return int(
                self.backend.call(self.backend.client.count, physical, count_filter=self._filter(where), exact=True).count
            )

    def _count(self, where: dict[str, Any] | None) -> int:
        return self._count_in(self._entry(), where)

    def _replace(self, w: dict[str, Any], points: list[Point]) -> None:
        """Upsert ``points``, then delete the points matching ``w`` that are not among them: a
        reader never sees the matching set missing. Validated before anything is written."""
        entry = self._entry()
        physical = self._physical(entry)
        with self._physical_gone(physical):
            structs = self._points(points, int(entry["size"]), self.backend.has_sparse(physical))
        with self.backend.exclusive():
            if structs:
                self._write(physical, structs)
            keep = [s.id for s in structs]
            must_not: list[models.Condition] | None = [models.HasIdCondition(has_id=keep)] if keep else None
            self.backend.call(
                self.backend.client.delete,
                physical,
                points_selector=models.FilterSelector(filter=self._scope(*where_filter(w), must_not=must_not)),
                wait=True,
            )

    def _scroll(self, where: dict[str, Any] | None, limit: int | None, with_vectors: bool) -> Iterator[Point]:
        """Points in Qdrant's point-id order (stable)."""
        flt = self._filter(where)
        entry = self._entry()
        physical = self._physical(entry)
        out: list[Point] = []
        if limit == 0:
            return iter(out)
        offset = None
        while True:
            page = _PAGE if limit is None else min(_PAGE, limit - len(out))
            with self._physical_gone(physical):
                records, offset = self.backend.call(
                    self.backend.client.scroll,
                    physical,
                    scroll_filter=flt,
                    limit=page,
                    offset=offset,
                    with_payload=True,
                    with_vectors=with_vectors,
                )
            out.extend(self._record(r, with_vectors) for r in records)
            if offset is None or (limit is not None and len(out) >= limit):
                return iter(out)

    def _record(self, r: Any, with_vectors: bool) -> Point:
        payload = r.payload or {}
        raw = r.vector.get("") if isinstance(r.vector, dict) else r.vector  # {"": dense, "bm25": sparse}
        vec = np.asarray(raw, dtype=np.float32) if with_vectors and raw is not None else np.zeros(0, dtype=np.float32)
        return Point(id=payload.get(ID_FIELD, str(r.id)), vector=vec, payload=self._out_payload(payload))

    def _retrieve(self, wanted: list[PointId], with_vectors: bool) -> list[Point]:
        if not wanted:
            self._entry()
            return []
        uuids = [self._uuid(i) for i in wanted]

        def go(entry: dict[str, Any]) -> list[Point]:
            physical = self._physical(entry)
            with self._physical_gone(physical):
                got = self.backend.call(
                    self.backend.client.retrieve, physical, uuids, with_payload=True, with_vectors=with_vectors
                )
            by_id = {str(r.id): r for r in got if (r.payload or {}).get(COLLECTION_FIELD) == self.name}
            return [self._record(by_id[u], with_vectors) for u in uuids if u in by_id]

        return self._read(go)

    def __repr__(self) -> str:
        return f"QdrantCollection({self.name!r}, backend={self.backend!r})"
