"""``VectorStoreTemplate``: the policy for a family of stores, and the registry of templates.

A template names the backend its stores live on, the embedding model that fills them (fixed per
template, so every store stays dimension-consistent), the distance, the chunking, and optionally a
folder and glob to ingest. A store is template + name, created on the fly.

The settings form the built-in template :data:`DEFAULT_TEMPLATE` (``default``), so everything works
before anyone defines a template; it is read-only here (change the settings to change it). Other
templates live in the catalog.
"""

from __future__ import annotations

import builtins  # `list` is a TemplateRegistry method below; annotations after it say builtins.list
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from knowledge._names import check_name
from knowledge.catalog import Catalog
from knowledge.config import Distance, Settings
from knowledge.errors import InvalidArgument, KnowledgeError

DEFAULT_TEMPLATE = "default"
_NAME = re.compile(r"^[\w][\w .\-()]{0,63}$")


class TemplateNotFound(KnowledgeError, LookupError):
    """No template has the given name."""


class VectorStoreTemplate(BaseModel):
    """A template. Sizes are in model tokens; ``ingest_glob`` is a ``pathlib`` glob under
    ``ingest_folder`` (``**/*`` = every file, recursively)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    backend: str = Field("memory", min_length=1)
    embedding_model: str = Field(min_length=1)
    distance: Distance = "cosine"
    max_chunk_size_tokens: int = Field(192, gt=0, le=8192)
    chunk_overlap_tokens: int = Field(48, ge=0)
    ingest_folder: str | None = None
    ingest_glob: str = "**/*"
    description: str = ""
    #: OCR for scans and images: ``"auto"`` or ``"off"``; ``None`` follows the setting ``ingest.ocr``.
    ocr: Literal["auto", "off"] | None = None

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        check_name(v, "template name")
        if not _NAME.fullmatch(v):
            raise ValueError("use letters, digits, spaces and . - _ ( ); at most 64 characters")
        return v

    @model_validator(mode="after")
    def _overlap_ok(self) -> VectorStoreTemplate:
        if self.chunk_overlap_tokens >= self.max_chunk_size_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than max_chunk_size_tokens")
        return self

    @property
    def builtin(self) -> bool:
        return self.name == DEFAULT_TEMPLATE


def default_template(settings: Settings) -> VectorStoreTemplate:
    """The built-in template formed by the settings."""
    vs = settings.vector_store
    return VectorStoreTemplate(
        name=DEFAULT_TEMPLATE, backend=vs.backend, embedding_model=settings.embeddings.model,
        distance=vs.distance, max_chunk_size_tokens=vs.max_chunk_size_tokens,
        chunk_overlap_tokens=vs.chunk_overlap_tokens,
        description="Built in: formed by the settings (vector_store.*, embeddings.model).",
    )


def make_template(**fields: Any) -> VectorStoreTemplate:
    """Build a template, turning validation errors into ``InvalidArgument`` a person can read."""
    try:
        return VectorStoreTemplate(**fields)
    except ValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in e['loc']) or 'template'}: {e['msg']}" for e in exc.errors()]
        raise InvalidArgument("Invalid template: " + "; ".join(parts)) from None


class TemplateRegistry:
    """Templates: the built-in default from the settings, the others from the catalog."""

    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.settings = settings
        self.catalog = catalog

    def get(self, name: str) -> VectorStoreTemplate:
        """The template ``name``. Raises ``TemplateNotFound``."""
        if name == DEFAULT_TEMPLATE:
            return default_template(self.settings)
        spec = self.catalog.get_template(name)
        if spec is None:
            raise TemplateNotFound(f"No template named {name!r}. Templates: {', '.join(self.names())}.")
        return VectorStoreTemplate(**spec)

    def names(self) -> list[str]:
        return [DEFAULT_TEMPLATE, *(n for n in self.catalog.list_templates() if n != DEFAULT_TEMPLATE)]

    def list(self) -> list[VectorStoreTemplate]:
        """Every template, the built-in default first."""
        return [default_template(self.settings)] + [
            VectorStoreTemplate(**spec) for name, spec in self.catalog.list_templates().items()
            if name != DEFAULT_TEMPLATE
        ]

    def save(self, template: VectorStoreTemplate) -> VectorStoreTemplate:
        """Create or update a template. The built-in default cannot be saved over.

        Raises:
            InvalidArgument: the name is the built-in one.
        """
        if template.builtin:
            raise InvalidArgument(
                f"The {DEFAULT_TEMPLATE!r} template is formed by the settings; change the settings,"
                " or save this template under another name."
            )
        self.catalog.put_template(template.name, template.model_dump())
        return template

    def delete(self, name: str, in_use_by: builtins.list[str] | None = None) -> None:
        """Delete a template.

        Raises:
            InvalidArgument: the built-in default, or a template that stores still use.
            TemplateNotFound: no such template.
        """
        if name == DEFAULT_TEMPLATE:
            raise InvalidArgument(f"The {DEFAULT_TEMPLATE!r} template is built in and cannot be deleted.")
        if in_use_by:
            raise InvalidArgument(
                f"Template {name!r} is used by the store(s) {', '.join(in_use_by)}; delete or re-embed them first."
            )
        if not self.catalog.delete_template(name):
            raise TemplateNotFound(f"No template named {name!r}.")
