"""The vector backends every contract test runs against.

``CONTRACT_BACKENDS``: name -> (factory(settings) -> backend, raw_filter(field, value) -> native filter).
``BACKEND_FIXTURES``: the backends whose factory needs a fixture first (pgvector: the test's database).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from knowledge.config import Settings
from knowledge.vectorstore.base import VectorBackend
from tests.helpers.pg import pgvector_backend, pgvector_raw_filter


def memory_backend(settings: Settings) -> VectorBackend:
    from knowledge.vectorstore.memory import MemoryBackend

    return MemoryBackend(settings)


def memory_raw_filter(field: str, value: Any) -> Callable[[dict], bool]:
    return lambda payload: payload.get(field) == value


_qdrant_clients: dict[str, Any] = {}


def qdrant_backend(settings: Settings) -> VectorBackend:
    """qdrant-client local mode (``:memory:``), fresh per test: one in-memory client per data folder,
    shared by the backend instances a test opens (so "data survives a new backend instance" holds)."""
    from qdrant_client import QdrantClient

    from knowledge.vectorstore.qdrant import QdrantBackend

    key = str(settings.data_root)
    if key not in _qdrant_clients:
        for old in _qdrant_clients.values():  # the previous test's client
            old.close()
        _qdrant_clients.clear()
        _qdrant_clients[key] = QdrantClient(location=":memory:", force_disable_check_same_thread=True)
    return QdrantBackend(settings, client=_qdrant_clients[key])


def qdrant_raw_filter(field: str, value: Any) -> Any:
    from qdrant_client import models

    return models.Filter(must=[models.FieldCondition(key=field, match=models.MatchValue(value=value))])


CONTRACT_BACKENDS: dict[str, tuple[Callable[[Settings], VectorBackend], Callable[[str, Any], Any]]] = {
    "memory": (memory_backend, memory_raw_filter),
    "qdrant": (qdrant_backend, qdrant_raw_filter),
    "pgvector": (pgvector_backend, pgvector_raw_filter),
}
#: Backends whose factory needs a fixture (requested by the ``backend_name`` fixture).
BACKEND_FIXTURES = {"pgvector": "pg_database"}

__all__ = [
    "BACKEND_FIXTURES",
    "CONTRACT_BACKENDS",
    "memory_backend",
    "memory_raw_filter",
    "qdrant_backend",
    "qdrant_raw_filter",
]
