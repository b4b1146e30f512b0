"""``VectorStoreTemplate``: the policy for a family of stores, and the registry of templates.

A template names the backend its stores live on, the embedding model that fills them (fixed per
template, so every store stays dimension-consistent), the distance, the chunking, and optionally a
folder and glob to ingest. A store is template + name, created on the fly.

The settings form the built-in template :data:`DEFAULT_TEMPLATE` (``default``), so everything works
before anyone defines a template; it is read-only here (change the settings to change it). Other
templates live in the catalog.

While the catalog is shared (PostgreSQL, ``catalog.url``) a backend whose points only this machine
reaches (:meth:`VectorBackend.machine_local <knowledge.vectorstore.base.VectorBackend.machine_local>`:
memory, Qdrant's local mode, the embedded PostgreSQL) is refused for new templates and stores
(:func:`machine_local_reason`, :class:`~knowledge.errors.MachineLocalBackend`).
"""

from __future__ import annotations

import builtins  # `list` is a TemplateRegistry method below; annotations after it say builtins.list
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from knowledge._names import check_name
from knowledge.catalog import Catalog
from knowledge.config import Distance, Settings
from knowledge.errors import InvalidArgument, KnowledgeError, MachineLocalBackend
from knowledge.vectorstore.registry import load_backend_class

DEFAULT_TEMPLATE = "default"

#: What a shared catalog's stores live on instead, named in every refusal.
SHARED_BACKENDS = (
    'pgvector on a PostgreSQL server (vector_store.backend = "pgvector" and vector_store.url ='
    ' "postgresql://...", often the catalog.url) or a Qdrant server (vector_store.backend = "qdrant" and'
    ' vector_store.url = "http://host:6333")'
)
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
    #: Rerank searches (:mod:`knowledge.service.rerank`); ``None`` follows the setting ``search.rerank``.
    rerank: bool | None = None
    #: Passages reranked; ``None`` follows the setting ``search.rerank_candidates``.
    rerank_candidates: int | None = Field(None, ge=2, le=200)

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
        name=DEFAULT_TEMPLATE,
        backend=vs.backend,
        embedding_model=settings.embeddings.model,
        distance=vs.distance,
        max_chunk_size_tokens=vs.max_chunk_size_tokens,
        chunk_overlap_tokens=vs.chunk_overlap_tokens,
        description="Built in: formed by the settings (vector_store.*, embeddings.model).",
    )


def machine_local_reason(settings: Settings, catalog: Catalog, backend: str) -> str | None:
    """Why stores of ``catalog`` cannot live on ``backend``: the backend's own clause
    (:meth:`~knowledge.vectorstore.base.VectorBackend.machine_local`, e.g. "the memory backend keeps
    its vectors in this machine's folder ...") when the catalog is shared (PostgreSQL), else
    ``None``. ``None`` too for a backend that cannot be loaded: opening it says why."""
    if catalog.dialect != "postgresql":
        return None
    try:
        cls = load_backend_class(backend)
    except KnowledgeError:
        return None
    return cls.machine_local(settings)


def shared_catalog_problem(settings: Settings, catalog: Catalog, template: VectorStoreTemplate) -> str | None:
    """What to set when ``template`` cannot make stores because the catalog is shared, or ``None``.
    The message names the settings (``vector_store.backend``, ``vector_store.url``)."""
    reason = machine_local_reason(settings, catalog, template.backend)
    if reason is None:
        return None
    if template.builtin:
        return (
            f"The catalog is shared (catalog.url), but the {DEFAULT_TEMPLATE!r} template uses"
            f" vector_store.backend = {template.backend!r}: {reason}, which the other processes and hosts"
            f" of the catalog cannot reach. Set {SHARED_BACKENDS}; or make stores from a template on such a"
            " backend."
        )
    return (
        f"Template {template.name!r} uses the {template.backend} backend, but the catalog is shared"
        f" (catalog.url): {reason}, which the other processes and hosts of the catalog cannot reach. Use"
        f" {SHARED_BACKENDS}."
    )


def check_shareable(settings: Settings, catalog: Catalog, template: VectorStoreTemplate) -> None:
    """Raise ``MachineLocalBackend`` (:func:`shared_catalog_problem`'s message) when ``template``'s
    backend is per machine and the catalog is shared; nothing on the embedded default."""
    problem = shared_catalog_problem(settings, catalog, template)
    if problem is not None:
        raise MachineLocalBackend(problem)


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
            VectorStoreTemplate(**spec) for name, spec in self.catalog.list_templates().items() if name != DEFAULT_TEMPLATE
        ]

    def problem(self, template: VectorStoreTemplate) -> str | None:
        """See :func:`shared_catalog_problem`: why ``template`` cannot make stores here, or ``None``."""
        return shared_catalog_problem(self.settings, self.catalog, template)

    def check(self, template: VectorStoreTemplate) -> None:
        """See :func:`check_shareable`. Raises ``MachineLocalBackend``."""
        check_shareable(self.settings, self.catalog, template)

    def save(self, template: VectorStoreTemplate) -> VectorStoreTemplate:
        """Create or update a template. The built-in default cannot be saved over.

        Raises:
            InvalidArgument: the name is the built-in one.
            MachineLocalBackend: the catalog is shared and the template's backend is per machine
                (memory, Qdrant's local mode, the embedded PostgreSQL).
        """
        if template.builtin:
            raise InvalidArgument(
                f"The {DEFAULT_TEMPLATE!r} template is formed by the settings; change the settings,"
                " or save this template under another name."
            )
        self.check(template)
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
