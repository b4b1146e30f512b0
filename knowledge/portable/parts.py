"""What the portable operations use, handed in by the composition root (``Workbench``)."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.catalog import Catalog
from knowledge.config import Settings
from knowledge.filestore.base import FileStore
from knowledge.service.indexing import Indexer
from knowledge.service.stores import Stores
from knowledge.service.templates import TemplateRegistry


@dataclass(frozen=True, slots=True)
class Parts:
    """What the portable operations use, handed in by the composition root (``Workbench``)."""

    settings: Settings
    stores: Stores
    templates: TemplateRegistry
    indexer: Indexer
    catalog: Catalog
    files: FileStore
