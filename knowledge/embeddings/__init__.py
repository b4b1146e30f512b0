"""Embedding models: the :class:`Embedder` interface, the bundled default, fastembed's catalog and a fake.

:func:`create_embedder` builds the model the settings name. Nothing is loaded until first use (or
``load()``); fastembed is imported when a real model is constructed, not with this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from knowledge.embeddings.base import Embedder, Token
from knowledge.embeddings.bundled import BUNDLED_MODEL_NAME, BundledEmbedder
from knowledge.embeddings.fake import HashEmbedder
from knowledge.embeddings.fastembed import FastEmbedEmbedder, supported_models

if TYPE_CHECKING:
    from knowledge.config import Settings

__all__ = [
    "BUNDLED_MODEL_NAME",
    "BundledEmbedder",
    "Embedder",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "Token",
    "create_embedder",
    "supported_models",
]


def create_embedder(settings: Settings) -> Embedder:
    """The embedding model of ``settings.embeddings``, not loaded yet.

    The default name, :data:`BUNDLED_MODEL_NAME`, gives the bundled int8 model (offline everywhere);
    any other name gives that fastembed catalog model, cached in ``settings.models_dir``.

    Raises:
        ConfigError: ``settings.embeddings.model`` is not in fastembed's catalog (the message says
            how to list the supported names).
    """
    cfg = settings.embeddings
    if cfg.model.lower() == BUNDLED_MODEL_NAME.lower():
        return BundledEmbedder(settings.models_dir, batch_size=cfg.batch_size, threads=cfg.threads)
    return FastEmbedEmbedder(
        cfg.model,
        settings.models_dir,
        batch_size=cfg.batch_size,
        threads=cfg.threads,
        allow_download=cfg.allow_download,
    )
