"""Serving the knowledge to other programs: an OpenAI-compatible REST API
(:mod:`knowledge.server.openai_api`) and an MCP server (:mod:`knowledge.server.mcp_server`), both
thin over the service layer (``Workbench``, ``IngestJob``, ``ChatService``, ``VectorMemory``)."""
