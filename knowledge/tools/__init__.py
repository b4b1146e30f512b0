"""The knowledge tool group: ``vector_upsert``, ``vector_search``, ``vector_delete_file``,
``vector_ingest_file`` -- store name in, text only, each with a JSON-schema description ready for LLM
function calling (OpenAI's ``tools=[{"type": "function", "function": ...}]`` shape).

Sits just above the workbench it is handed: may import ``knowledge.workbench``, the service layer,
the parts and the ground; never ``chat`` or the surfaces.
"""

from knowledge.tools.knowledge import ANYWHERE, KnowledgeTools, Tool, ToolResult

__all__ = ["ANYWHERE", "KnowledgeTools", "Tool", "ToolResult"]
