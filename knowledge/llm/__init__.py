"""LLM configs (CHAT / EMBEDDING, stored in the catalog) and chat providers (OpenAI-compatible via
the ``openai`` package; the built-in offline retrieval-only assistant).

A part: may import the ``catalog`` (where LLM configs are kept), ``text`` and the ground; never the
service layer or anything above it.
"""

from knowledge.llm.config import (
    CHAT,
    DOCUMENTS,
    EMBEDDING,
    VISION,
    LlmConfig,
    LlmConfigNotFound,
    LlmConfigs,
    LlmUnavailable,
    parse_config,
)
from knowledge.llm.providers import ChatProvider, Completion, OfflineAssistant, OpenAICompatible, ToolCall, open_provider

__all__ = [
    "CHAT",
    "DOCUMENTS",
    "EMBEDDING",
    "VISION",
    "ChatProvider",
    "Completion",
    "LlmConfig",
    "LlmConfigNotFound",
    "LlmConfigs",
    "LlmUnavailable",
    "OfflineAssistant",
    "OpenAICompatible",
    "ToolCall",
    "open_provider",
    "parse_config",
]
