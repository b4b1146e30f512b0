"""Embedding models: the :class:`Embedder` interface, the bundled default, fastembed's catalog and a fake.

:func:`create_embedder` builds the model the settings name. Nothing is loaded until first use (or
``load()``); fastembed is imported when a real model is constructed, not with this package.

A part: may import only the ground (``knowledge.errors``, ``knowledge.config``, ``knowledge._onnx``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from knowledge.embeddings._pooled import set_between_batches
from knowledge.embeddings.base import Embedder, Token
from knowledge.embeddings.bundled import BUNDLED_MODEL_NAME, BundledEmbedder
from knowledge.embeddings.fake import HashEmbedder
from knowledge.embeddings.fastembed import FastEmbedEmbedder, supported_models
from knowledge.errors import ConfigError

if TYPE_CHECKING:
    from knowledge.config import Settings

__all__ = [
    "BUNDLED_MODEL_NAME",
    "FAKE_MODEL_PREFIX",
    "BundledEmbedder",
    "Embedder",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "Token",
    "create_embedder",
    "set_between_batches",
    "supported_models",
]

#: Model names ``fake/hash-<d>`` give :class:`HashEmbedder` with dimension ``d``: no model files, no
#: meaning (texts that share words score higher), for tests and demos only.
FAKE_MODEL_PREFIX = "fake/hash-"
_FAKE_MODEL = re.compile(re.escape(FAKE_MODEL_PREFIX) + r"([0-9]+)", re.IGNORECASE)


def create_embedder(settings: Settings) -> Embedder:
    """The embedding model of ``settings.embeddings``, not loaded yet.

    The default name, :data:`BUNDLED_MODEL_NAME`, gives the bundled int8 model (offline everywhere);
    ``fake/hash-<d>`` (e.g. ``fake/hash-8``) gives the deterministic :class:`HashEmbedder` of
    dimension ``d`` (feature hashing of words, no model files: for tests and demos, not for
    retrieval by meaning); any other name gives that fastembed catalog model, cached in
    ``settings.models_dir``.

    Raises:
        ConfigError: ``settings.embeddings.model`` is not in fastembed's catalog (the message says
            how to list the supported names), or is ``fake/hash-<d>`` with ``d`` below 1.
    """
    cfg = settings.embeddings
    fake = _FAKE_MODEL.fullmatch(cfg.model.strip())
    if fake:
        dimension = int(fake.group(1))
        if dimension < 1:
            raise ConfigError(f"The fake embedding model {cfg.model!r} needs a dimension of at least 1.")
        return HashEmbedder(dimension=dimension)
    if cfg.model.lower() == BUNDLED_MODEL_NAME.lower():
        return BundledEmbedder(settings.models_dir, batch_size=cfg.batch_size, threads=cfg.threads)
    return FastEmbedEmbedder(
        cfg.model,
        settings.models_dir,
        batch_size=cfg.batch_size,
        threads=cfg.threads,
        allow_download=cfg.allow_download,
    )
