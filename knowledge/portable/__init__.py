"""Portable knowledge (a feature): a store as one bundle file (export / import), a move to another
backend, and a backup / restore of the whole data folder. The bundle format is user-facing:
docs/bundle-format.md.

Modules: :mod:`~knowledge.portable.bundle` (the format, the checked reader and writer),
:mod:`~knowledge.portable.exporting`, :mod:`~knowledge.portable.importing` (import, move, the sweep
of leftovers), :mod:`~knowledge.portable.backup` (backup, restore), :mod:`~knowledge.portable.parts`
and :mod:`~knowledge.portable.face` (:class:`Portable`, which the workbench builds as ``wb.portable``).

May import: the service layer (stores, indexing, search, templates, jobs), the parts (catalog,
vectorstore, filestore, embeddings, ingest, text) and the ground (errors, config, outcomes,
attributes, access, plugins, _names, _fs). Never the workbench, chat, tools, server, cli or pages.
This file only re-exports the package's public face.
"""

from knowledge.portable.backup import (
    BACKUP_FORMAT,
    BackupResult,
    RestoredBundle,
    RestoreResult,
    data_folder_empty,
    restore,
)
from knowledge.portable.bundle import (
    BLOCK,
    FORMAT,
    FORMAT_VERSION,
    IMPORT_MARK,
    MAX_BLOCK,
    MAX_DIMENSION,
    MAX_MANIFEST_BYTES,
    MAX_PAYLOADS_BYTES,
    bundle_info,
    check_chunks,
    open_bundle,
    read_member,
)
from knowledge.portable.exporting import ExportResult
from knowledge.portable.face import Portable
from knowledge.portable.importing import ImportResult

__all__ = [
    "BACKUP_FORMAT",
    "BLOCK",
    "FORMAT",
    "FORMAT_VERSION",
    "IMPORT_MARK",
    "MAX_BLOCK",
    "MAX_DIMENSION",
    "MAX_MANIFEST_BYTES",
    "MAX_PAYLOADS_BYTES",
    "BackupResult",
    "ExportResult",
    "ImportResult",
    "Portable",
    "RestoreResult",
    "RestoredBundle",
    "bundle_info",
    "check_chunks",
    "data_folder_empty",
    "open_bundle",
    "read_member",
    "restore",
]
