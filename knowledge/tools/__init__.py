"""The knowledge tool group: ``vector_upsert``, ``vector_search``, ``vector_delete_file``,
``vector_ingest_file`` -- store name in, text only, each with a JSON-schema description ready for LLM
function calling (OpenAI's ``tools=[{"type": "function", "function": ...}]`` shape)."""

from knowledge.tools.knowledge import ANYWHERE, KnowledgeTools, Tool, ToolResult

__all__ = ["ANYWHERE", "KnowledgeTools", "Tool", "ToolResult"]
