"""The MCP server: the stores and agent memory as tools for any MCP client (official ``mcp`` SDK).

``python -m knowledge mcp`` speaks MCP over stdio (what desktop clients launch);
``python -m knowledge mcp --http`` serves streamable HTTP at ``http://127.0.0.1:8901/mcp``
(any other host needs ``KNOWLEDGE_API_KEY``, sent as a bearer token; :func:`http_app`: the REST
API's Host/Origin rules, and the SDK's DNS-rebinding protection with this server's host and port).

Tools (thin over the workbench, :class:`~knowledge.jobs.IngestJob` and
:class:`~knowledge.agent_memory.VectorMemory`):

* ``search(query, store=None, k=5, filters=None, mode=None)`` -- one store, or every store merged
  by reciprocal rank fusion; ``filters`` are OpenAI's comparison/compound filters over file
  attributes and the chunk's fields (:mod:`knowledge.server.filters`); each hit with store, file,
  file id, page, heading, character span, score and text.
* ``list_stores()``, ``list_files(store)``, ``delete_file(store, file)`` (an id or a name).
* ``ingest_file(store, path, glob=None)`` -- a file or folder of this machine, only under the
  folders of the setting ``mcp.allowed_dirs`` (default: none; symlinks resolved, hidden folders and
  the data folder never), through the app's ingestion jobs.
* ``remember(text, dataset, id, payload)``, ``recall(query, dataset, k, where, score_threshold)``,
  ``forget(ids, dataset, where)`` -- agent memory with datasets.

Resources: ``knowledge://stores`` (the stores) and ``knowledge://stores/{store}/files/{file_id}``
(a file's chunks in order, with provenance; ``store`` percent-encoded).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from knowledge.access import LocalFolders
from knowledge.catalog import DONE
from knowledge.errors import KnowledgeError
from knowledge.jobs import IngestJob
from knowledge.service.fusion import reciprocal_rank_fusion
from knowledge.server.filters import compile_filter, filtered_search
from knowledge.server.http_guard import Guard, control_char, server_hosts
from knowledge.vectorstore.store import Hit
from knowledge.workbench import Workbench

DEFAULT_HTTP_PORT = 8901


def mcp_folders(settings: Any) -> LocalFolders:
    """The folders ``ingest_file`` may read: ``mcp.allowed_dirs`` (default none)."""
    return LocalFolders.of([settings.resolve(d) for d in settings.mcp.allowed_dirs], settings.data_root,
                           reason="mcp.allowed_dirs is empty")


def _hit(store: str, h: Hit) -> dict[str, Any]:
    from knowledge.attributes import from_payload

    return {"store": store, "file": h.file_name, "file_id": h.file_id, "page": h.page, "heading": h.heading,
            "char_start": h.char_start, "char_end": h.char_end, "chunk_index": h.chunk_index,
            "score": round(float(h.score), 6), "attributes": from_payload(h.metadata), "text": h.text}


def clean(value: str, what: str) -> str:
    """``value`` when it holds no control character (a NUL in a path would fail deep in the OS calls).

    Raises:
        ToolError: the reason, naming the argument and the character.
    """
    bad = control_char(value) if isinstance(value, str) else None
    if bad:
        raise ToolError(f"{what} must not contain control characters ({bad}).")
    return value


def build_server(wb: Workbench) -> MCPServer:
    """The MCP server over ``wb`` (tools and resources as the module docstring lists)."""
    server = MCPServer("knowledge", instructions=(
        "Search the team's document stores (search, list_stores, list_files), add local files"
        " (ingest_file, only under the allowed folders) and keep agent memories (remember, recall, forget)."
        " Every search hit names its file, page and character span: cite them."))
    memory_lock = threading.Lock()
    held: dict[str, Any] = {}

    def memory() -> Any:
        from knowledge.agent_memory import VectorMemory

        with memory_lock:
            if "m" not in held:
                held["m"] = VectorMemory(wb.backend(), wb.embedder())
            return held["m"]

    def guard(fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KnowledgeError as exc:
            raise ToolError(str(exc)) from None

    def user_store(name: str) -> str:
        """``name`` when it may be a user's store: text without control characters, not a chat's own."""
        clean(name, "store")
        if name not in wb.store_names() and name in wb.store_names(internal=True):
            raise ToolError(f"No store named {name!r} (a chat session's own store is not reachable here;"
                            " see list_stores).")
        return name

    @server.tool()
    def search(query: str, store: str | None = None, k: int = 5, filters: dict[str, Any] | None = None,
               mode: str | None = None) -> dict[str, Any]:
        """Search a store (or every store when `store` is omitted) for passages matching `query`.

        k: number of hits (1-50). mode: "hybrid" (default: meaning + exact words), "vector" or
        "lexical". filters: OpenAI-style, e.g. {"type": "eq", "key": "author", "value": "Ana"} or
        {"type": "and", "filters": [...]}; keys are file attributes or file_id, filename, page, heading.
        Each hit: store, file, file_id, page, heading, char_start/char_end (span in the file's text),
        score (cosine similarity, higher is better) and text.
        """
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
            raise ToolError(f"k must be an integer from 1 to 50, got {k!r}.")
        predicate = guard(compile_filter, filters) if filters else None
        if store is not None:
            hits = guard(filtered_search, wb, user_store(store), query, k, predicate, mode=mode)
            return {"hits": [_hit(store, h) for h in hits]}
        stores = wb.store_names()
        rankings, failed = [], {}
        for name in stores:
            try:
                rankings.append([(name, h) for h in filtered_search(wb, name, query, k, predicate, mode=mode)])
            except KnowledgeError as exc:
                failed[name] = str(exc)
        fused = reciprocal_rank_fusion(*[[(s, h.id) for s, h in r] for r in rankings])
        merged = sorted((sh for r in rankings for sh in r), key=lambda sh: -fused[(sh[0], sh[1].id)])
        out = {"hits": [_hit(s, h) for s, h in merged[:k]]}
        if failed:
            out["failed"] = failed
        return out

    @server.tool()
    def list_stores() -> dict[str, Any]:
        """The stores: name, template, embedding model, files and chunks."""
        return {"stores": [{"name": s.record.name, "template": s.record.template, "model": s.record.embedding_model,
                            "files": s.files, "chunks": s.chunks} for s in wb.list_stores()]}

    @server.tool()
    def list_files(store: str) -> dict[str, Any]:
        """The files of a store: file_id, name, aliases (the same bytes under other names, indexed once),
        status (done/failed/processing), reason, chunks, pages."""
        files = guard(wb.store_files, user_store(store))
        return {"files": [{"file_id": f.file_id, "name": f.file_name, "aliases": list(f.aliases),
                           "status": f.status, "reason": f.reason,
                           "chunks": f.chunks, "pages": f.pages,
                           "resource": f"knowledge://stores/{quote(store, safe='')}/files/{f.file_id}"}
                          for f in files]}

    @server.tool()
    def ingest_file(store: str, path: str, glob: str | None = None) -> dict[str, Any]:
        """Ingest a file or a folder of this machine into `store` (created on the fly). Only paths under
        the folders of the setting mcp.allowed_dirs are read; others are refused. glob picks a folder's
        files (default **/*). Returns each file's outcome (indexed, unchanged, duplicate, failed)."""
        user_store(store)
        clean(path, "path")
        if glob is not None:
            clean(glob, "glob")
        folders = mcp_folders(wb.settings)
        p = Path(path).expanduser()
        if p.is_dir():
            job = guard(IngestJob.from_folder, wb, store, p, glob, folders=folders)
        else:
            resolved = guard(folders.check, p)
            if not resolved.is_file():
                raise ToolError(f"{path} is not a file or folder on this machine.")
            job = IngestJob(wb, store, [(resolved.name, resolved)])
        job.start().wait()
        return {"store": store, "skipped": job.skipped,
                "results": [{"name": r.name, "outcome": r.outcome, "message": r.message, "file_id": r.file_id,
                             "chunks": r.chunks, "pages": r.pages} for r in job.results]}

    @server.tool()
    def delete_file(store: str, file: str) -> dict[str, Any]:
        """Remove a file from `store`: by its id, the content with all its chunks and names; by its name,
        that name (the content and its chunks go with its last name)."""
        files = guard(wb.store_files, user_store(store))
        by_id = [f for f in files if f.file_id == file]
        match = by_id or [f for f in files if file in f.names]
        if not match:
            raise ToolError(f"No file {file!r} in store {store!r}.")
        if len(match) > 1:
            raise ToolError(f"{len(match)} files are named {file!r} in {store!r}; give the file id.")
        if by_id:
            removed = guard(wb.delete_file, store, match[0].file_id)
            return {"removed": match[0].file_id, "name": match[0].file_name, "chunks": removed}
        removed = guard(wb.delete_name, store, match[0].file_id, file)
        return {"removed": match[0].file_id, "name": file, "chunks": removed,
                "still_named": [n for n in match[0].names if n != file]}

    @server.tool()
    def remember(text: str, dataset: str = "default", id: str | None = None,
                 payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """Keep a short text in agent memory, in `dataset`; the same `id` again overwrites it. `payload`:
        extra JSON fields to filter on later."""
        kwargs: dict[str, Any] = {"dataset": dataset, "payload": payload}
        if id is not None:
            kwargs["id"] = id
        mid = guard(memory().remember, text, **kwargs)
        return {"id": mid, "dataset": dataset}

    @server.tool()
    def recall(query: str, dataset: str | None = "default", k: int = 5, where: dict[str, Any] | None = None,
               score_threshold: float | None = None) -> dict[str, Any]:
        """The memories closest to `query`, best first (cosine similarity, higher is better). dataset:
        null searches every dataset. where: payload equality filter."""
        hits = guard(memory().recall, query, limit=k, dataset=dataset, where=where, score_threshold=score_threshold)
        return {"memories": [{"id": h.id, "text": h.text, "score": round(float(h.score), 6), "dataset": h.dataset,
                              "payload": h.payload} for h in hits]}

    @server.tool()
    def forget(ids: list[str] | None = None, dataset: str | None = None,
               where: dict[str, Any] | None = None) -> dict[str, Any]:
        """Delete the memories matching every selector given: ids, dataset, where (at least one)."""
        if not ids and dataset is None and not where:
            raise ToolError("Give ids, a dataset or a where filter: forget never deletes everything at once.")
        n = guard(memory().forget, ids=ids, dataset=dataset, where=where)
        return {"forgotten": n}

    @server.resource("knowledge://stores", mime_type="application/json", description="The stores")
    def stores_resource() -> str:
        return json.dumps(list_stores(), ensure_ascii=False)

    @server.resource("knowledge://stores/{store}/files/{file_id}", mime_type="application/json",
                     description="A file's chunks in order with page, heading and character span")
    def file_chunks(store: str, file_id: str) -> str:
        name = unquote(store)
        bad = control_char(name)
        if bad or (name not in wb.store_names() and name in wb.store_names(internal=True)):
            raise ResourceError(f"No store named {name!r}" + (f" (control character {bad})." if bad else "."))
        try:
            rec = wb.file_record(name, file_id)
            if rec is None or rec.status != DONE:
                raise ResourceError(f"No indexed file {file_id!r} in store {name!r}.")
            chunks = wb.vector_store(name).chunks(file_id)
        except KnowledgeError as exc:
            raise ResourceError(str(exc)) from None
        return json.dumps({"store": name, "file_id": file_id, "file": rec.file_name, "chunks": [
            {"chunk_index": h.chunk_index, "page": h.page, "heading": h.heading, "char_start": h.char_start,
             "char_end": h.char_end, "text": h.text} for h in chunks]}, ensure_ascii=False)

    return server


def run(*, http: bool = False, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT,
        wb: Workbench | None = None) -> None:
    """Serve MCP over stdio, or streamable HTTP with ``http`` (``/mcp``) until interrupted.

    Raises:
        ConfigError: HTTP on a non-loopback ``host`` without ``KNOWLEDGE_API_KEY``.
    """
    import logging

    wb = wb or Workbench()
    try:
        server = build_server(wb)
        if not http:
            logging.basicConfig(level=logging.WARNING)  # stderr; stdout is the protocol's
            server.run("stdio")
            return
        import uvicorn

        uvicorn.run(http_app(wb, host, port, server=server), host=host, port=port, log_level="info")
    finally:
        wb.close()


def http_app(wb: Workbench, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT, *,
             server: MCPServer | None = None) -> Any:
    """The streamable HTTP app (``/mcp``) for a server bound to ``host``:``port``: behind
    :class:`~knowledge.server.http_guard.Guard` (the REST API's rules: Host, Origin, the key, JSON
    only, body size) and with the SDK's DNS-rebinding protection naming this host and port only.

    Raises:
        ConfigError: a non-loopback ``host`` without ``KNOWLEDGE_API_KEY``.
    """
    from mcp.server.transport_security import TransportSecuritySettings

    from knowledge.server.openai_api import check_bind

    key = wb.settings.api_key.get_secret_value() if wb.settings.api_key else None
    check_bind(host, key)
    api = wb.settings.api
    hosts = server_hosts(host, port, api.allowed_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")] + list(api.cors_origins))
    inner = (server or build_server(wb)).streamable_http_app(host=host, transport_security=security)
    return Guard(inner, api_key=key, max_body=4_000_000, allowed_hosts=api.allowed_hosts,
                 cors_origins=api.cors_origins,
                 allow_headers=("Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version",
                                "Last-Event-ID"),
                 expose_headers=("Mcp-Session-Id",))


__all__ = ["DEFAULT_HTTP_PORT", "build_server", "clean", "http_app", "mcp_folders", "run"]
