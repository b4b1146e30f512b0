"""Moved to :mod:`knowledge.agent_memory` ("memory" alone now names only the on-disk vector backend,
:mod:`knowledge.vectorstore.memory`). This alias keeps ``from knowledge.memory import VectorMemory``
working for one release."""

from knowledge.agent_memory import (  # noqa: F401
    DEFAULT_COLLECTION,
    DEFAULT_DATASET,
    MODEL_FIELD,
    TEXT_FIELD,
    Memory,
    RecallHit,
    VectorMemory,
)
