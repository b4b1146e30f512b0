"""The serving layer: the workbench for other programs, as an OpenAI-compatible REST API (Files,
Vector Stores, search, chat completions) and as an MCP server. Thin over the service layer: no
second copy of ingestion or search lives here.

* :mod:`.app`: ``create_app(system)`` (the FastAPI app: middleware, error handlers, the routers) and ``serve``.
* :mod:`.http`: the shared plumbing (``ApiError``, request checks, cursor pages, ``check_bind``).
* :mod:`.guard`: the ASGI front door both HTTP servers sit behind (Host, Origin, key, body).
* :mod:`.objects`: ``KnowledgeApi``, the state behind the routes and OpenAI's object shapes.
* :mod:`.routes`: one ``APIRouter`` per resource (files, vector stores, store files, search, chat).
* :mod:`.filters`: OpenAI's attribute filters, as the predicate ``Searcher.search`` keeps hits by.
* :mod:`.mcp`: the MCP server (stdio or streamable HTTP).

May import: the workbench (:mod:`knowledge.workbench`) and everything below it (the service
layer, ``knowledge.chat``, ``knowledge.agent_memory``, the backends, the ground modules); never
``pages/`` or ``knowledge.cli``/``knowledge.__main__``. Inside: ``http`` and ``guard`` import no
other server module; ``filters`` none; ``objects`` those three; routes ``http``, ``filters`` and
``objects``; ``app`` and ``mcp`` sit on top. The API and MCP server are described in ``docs/api.md``.
"""
