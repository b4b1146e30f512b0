"""The portable feature's face: :class:`Portable`, built by the workbench (``wb.portable``) with the
parts it holds; each method runs one operation of the package's modules."""

from __future__ import annotations

import os
from collections.abc import Collection

from knowledge.catalog import Catalog, StoreRecord
from knowledge.config import Settings
from knowledge.filestore.base import FileStore
from knowledge.portable.backup import BackupResult, RestoreResult, backup, import_restored
from knowledge.portable.bundle import (
    Progress,
)
from knowledge.portable.exporting import ExportResult, export_store
from knowledge.portable.importing import ImportResult, import_bundle, move_store, sweep_leftovers
from knowledge.portable.parts import Parts
from knowledge.service.indexing import Indexer
from knowledge.service.stores import Stores
from knowledge.service.templates import TemplateRegistry


class Portable:
    """Export, import and move stores; back up the data folder and import what a restore unpacked.
    The workbench builds one (``wb.portable``) with the parts it holds. Thread-safe as its parts."""

    def __init__(
        self,
        settings: Settings,
        stores: Stores,
        templates: TemplateRegistry,
        indexer: Indexer,
        catalog: Catalog,
        files: FileStore,
    ) -> None:
        self.parts = Parts(settings, stores, templates, indexer, catalog, files)

    def export_store(
        self, store: str, out: str | os.PathLike, *, progress: Progress | None = None, hidden: Collection[str] = ()
    ) -> ExportResult:
        """See :func:`export_store`."""
        return export_store(self.parts, store, out, progress=progress, hidden=hidden)

    def import_bundle(
        self,
        bundle: str | os.PathLike,
        *,
        as_name: str | None = None,
        template: str | None = None,
        progress: Progress | None = None,
    ) -> ImportResult:
        """See :func:`import_bundle`."""
        return import_bundle(self.parts, bundle, as_name=as_name, template=template, progress=progress)

    def move_store(self, store: str, template: str, progress: Progress | None = None) -> StoreRecord:
        """See :func:`move_store`."""
        return move_store(self.parts, store, template, progress)

    def backup(self, out: str | os.PathLike, *, progress: Progress | None = None) -> BackupResult:
        """See :func:`backup`."""
        return backup(self.parts, out, progress=progress)

    def import_restored(self, result: RestoreResult, *, progress: Progress | None = None) -> RestoreResult:
        """See :func:`import_restored`."""
        return import_restored(self.parts, result, progress=progress)

    def sweep_leftovers(self, backends: list[str] | None = None) -> tuple[int, int]:
        """See :func:`sweep_leftovers`."""
        return sweep_leftovers(self.parts, backends)
