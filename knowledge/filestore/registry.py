"""File-store backends, discovered through the entry-point group ``knowledge.file_store_backends``.

The built-in ``filesystem`` backend is declared in that same group (``pyproject.toml``), so a plugin
(an s3-style store, say) is a package that declares
``[project.entry-points."knowledge.file_store_backends"] s3 = "pkg.mod:S3FileStore"`` and nothing
else. Loading is lazy and a broken plugin is reported, not fatal (see :mod:`knowledge.plugins`).
"""

from __future__ import annotations

from knowledge.config import Settings
from knowledge.filestore.base import FileStore
from knowledge.plugins import PluginRegistry

GROUP = "knowledge.file_store_backends"
_registry: PluginRegistry[FileStore] = PluginRegistry(GROUP, FileStore, "file-store backend")

backend_names = _registry.names
backend_errors = _registry.errors
load_backend_class = _registry.load
_reset_for_tests = _registry.reset


def open_file_store(settings: Settings, name: str | None = None) -> FileStore:
    """Construct the file store ``name`` (default: ``settings.file_store.backend``) for ``settings``.

    Raises:
        BackendUnavailable: unknown, failing to load, or failing to start (a folder that cannot be
            created, or a server that cannot be reached).
    """
    backend = name or settings.file_store.backend
    return _registry.construct(load_backend_class(backend), backend, settings)
