"""Id-addressed file storage (OpenAI-Files-API style): save bytes once, read them back by id.

``open_file_store(settings)`` gives the configured backend (``file_store.backend``, default the
built-in ``filesystem`` one under ``data/files``). See :mod:`knowledge.filestore.base` for the
contract and :mod:`knowledge.filestore.filesystem` for the on-disk layout and dedupe policy.

A part: may import only the ground (``knowledge.errors``, ``knowledge.config``, ``knowledge.plugins``,
``knowledge.telemetry``).
"""

from knowledge.filestore.base import FileStore, StoredFile
from knowledge.filestore.filesystem import FilesystemFileStore
from knowledge.filestore.registry import backend_errors, backend_names, open_file_store

__all__ = [
    "FileStore",
    "FilesystemFileStore",
    "StoredFile",
    "backend_errors",
    "backend_names",
    "open_file_store",
]
