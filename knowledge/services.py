"""The services one running app (or script) shares: settings, the vector-store backend, the embedder.

Everything is created lazily and once, under a lock, so Streamlit can keep one ``Services`` in
``st.cache_resource`` and use it from every session's thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from knowledge.config import Settings, load_settings
from knowledge.vectorstore.base import CollectionInfo, VectorBackend
from knowledge.vectorstore.registry import open_backend
from knowledge.vectorstore.store import VectorStore

if TYPE_CHECKING:
    from knowledge.embeddings.base import Embedder


class Services:
    """Lazily created, shared services for one settings object."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_settings()
        self._lock = threading.Lock()
        self._backend: VectorBackend | None = None
        self._embedder: Embedder | None = None

    @property
    def backend(self) -> VectorBackend:
        """The default template's backend (``vector_store.backend``). Raises ``BackendUnavailable``."""
        with self._lock:
            if self._backend is None:
                self._backend = open_backend(self.settings)
            return self._backend

    @property
    def embedder(self) -> "Embedder":
        """The default embedding model. Raises ``EmbeddingUnavailable``."""
        with self._lock:
            if self._embedder is None:
                from knowledge.embeddings import create_embedder

                self._embedder = create_embedder(self.settings)
            return self._embedder

    @property
    def embedder_loaded(self) -> bool:
        return self._embedder is not None and self._embedder.loaded

    def store(self, name: str) -> VectorStore:
        """The store ``name`` on the default backend (created on its first upsert)."""
        return VectorStore(self.backend.collection(name), distance=self.settings.vector_store.distance)

    def store_infos(self) -> list[CollectionInfo]:
        """Size, distance and chunk count of every store on the default backend, by name."""
        return [self.backend.collection(n).info() for n in self.backend.list_collections()]

    def close(self) -> None:
        with self._lock:
            if self._backend is not None:
                self._backend.close()
                self._backend = None
