"""Vector-store backends, discovered through the entry-point group ``knowledge.vector_store_backends``
(see :mod:`knowledge.plugins`)."""

from __future__ import annotations

from knowledge.config import Settings
from knowledge.plugins import PluginRegistry
from knowledge.vectorstore.base import VectorBackend

GROUP = "knowledge.vector_store_backends"
_registry: PluginRegistry[VectorBackend] = PluginRegistry(GROUP, VectorBackend, "vector-store backend")

backend_names = _registry.names
backend_errors = _registry.errors
load_backend_class = _registry.load
_reset_for_tests = _registry.reset


def open_backend(settings: Settings, name: str | None = None) -> VectorBackend:
    """Construct the backend ``name`` (default: ``settings.vector_store.backend``) for ``settings``.

    Raises:
        BackendUnavailable: unknown, failing to load, or failing to start (a server that cannot be
            reached, say).
    """
    backend = name or settings.vector_store.backend
    return _registry.construct(load_backend_class(backend), backend, settings)
