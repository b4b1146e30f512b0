"""The MCP server: the stores and agent memory as tools for any MCP client (official ``mcp`` SDK).

:func:`run` speaks MCP over stdio (``python -m knowledge mcp``) or streamable HTTP at ``/mcp``
(``--http``: :func:`http_app`, behind :class:`~knowledge.server.guard.Guard` and the SDK's
DNS-rebinding protection; any host but loopback needs ``KNOWLEDGE_API_KEY``). :func:`build_server`
registers the tools (:data:`TOOLS`: ``search``, ``list_stores``, ``list_files``, ``ingest_file``,
``delete_file``, ``remember``, ``recall``, ``forget``, and of the sources ``list_sources``, ``run_source``
and ``source_runs``: read and run only -- adding or changing a source, which holds credentials, is
no tool) and resources (:data:`RESOURCES`:
``knowledge://stores``, ``knowledge://stores/{store}/files/{file_id}``), each a method of
:class:`KnowledgeTools` whose docstring is what a client reads. ``ingest_file`` reads only under
``mcp.allowed_dirs``; chats' own stores are not reachable; a service error or a control character
in an argument is the tool's error (``ToolError``), with the reason. Every tool acts through a
workbench view: stdio as the local admin or ``user``; over HTTP, once accounts exist, as the user of
each request's key (:meth:`KnowledgeTools.for_request`), memories kept per user
(:func:`memory_collection`). A file whose readers leave the user out is, to every tool and
resource, one the store does not hold (the workbench's filtered methods: searches, file lists,
counts, a file's chunks), and ``ingest_file`` never names one (:meth:`Workbench.readable_result
<knowledge.workbench.Workbench.readable_result>`). Details: ``docs/api.md``.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.transport_security import TransportSecuritySettings

from knowledge.access import LocalFolders
from knowledge.agent_memory import DEFAULT_COLLECTION, VectorMemory, user_collection
from knowledge.attributes import from_payload
from knowledge.catalog import DONE
from knowledge.config import Settings
from knowledge.errors import BackendUnavailable, KnowledgeError
from knowledge.people import Actor
from knowledge.server.filters import SearchFilter
from knowledge.server.guard import Guard, server_hosts
from knowledge.server.http import check_bind, control_char, unavailable_message
from knowledge.server.ops import PROBE_PATHS, Observed, OpsEndpoints, metrics_token, watch_queue
from knowledge.service.fusion import reciprocal_rank_fusion
from knowledge.service.search import SearchRequest
from knowledge.sources.engine import RUNS_KEPT, RunRecord
from knowledge.sources.shown import counts_text, location, schedule
from knowledge.telemetry import configure_logging, configure_tracing, uvicorn_logging
from knowledge.vectorstore.store import Hit
from knowledge.workbench import Workbench

DEFAULT_HTTP_PORT = 8901
INSTRUCTIONS = (
    "Search the team's document stores (search, list_stores, list_files), add local files"
    " (ingest_file, only under the allowed folders), keep agent memories (remember, recall, forget) and"
    " run the sources that keep stores in sync with shares, repositories and mailboxes (list_sources,"
    " run_source, source_runs)."
    " Every search hit names its file, page and character span: cite them."
)


def mcp_folders(settings: Settings) -> LocalFolders:
    """The folders ``ingest_file`` may read: ``mcp.allowed_dirs`` (default none)."""
    return LocalFolders.of(
        [settings.resolve(d) for d in settings.mcp.allowed_dirs], settings.data_root, reason="mcp.allowed_dirs is empty"
    )


def hit_object(store: str, h: Hit) -> dict[str, Any]:
    """A search hit as the ``search`` tool answers it."""
    return {
        "store": store,
        "file": h.file_name,
        "file_id": h.file_id,
        "page": h.page,
        "heading": h.heading,
        "char_start": h.char_start,
        "char_end": h.char_end,
        "chunk_index": h.chunk_index,
        "chunks": list(h.chunks or (h.chunk_index,)),
        "score": round(float(h.score), 6),
        "attributes": from_payload(h.metadata),
        "text": h.text,
    }


def clean(value: str, what: str) -> str:
    """``value`` when it holds no control character (a NUL in a path would fail deep in the OS calls).

    Raises:
        ToolError: the reason, naming the argument and the character.
    """
    bad = control_char(value) if isinstance(value, str) else None
    if bad:
        raise ToolError(f"{what} must not contain control characters ({bad}).")
    return value


def guarded(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, a service error answered as the tool's error (its message)."""
    try:
        return fn(*args, **kwargs)
    except BackendUnavailable as exc:
        raise ToolError(unavailable_message(str(exc))) from None
    except KnowledgeError as exc:
        raise ToolError(str(exc)) from None


def memory_collection(actor: Actor) -> str:
    """The collection of ``actor``'s agent memories: :data:`~knowledge.agent_memory.DEFAULT_COLLECTION`
    for the local admin, ``agent-memory~<username>`` for an account (their own: nobody else recalls,
    counts or forgets them)."""
    return user_collection(DEFAULT_COLLECTION, None if actor.local else actor.username)


class AgentMemories:
    """The agent memories of one MCP server, shared by every request and person: one
    :class:`~knowledge.agent_memory.VectorMemory` per collection (:func:`memory_collection`), made on
    first use. Thread-safe."""

    def __init__(self) -> None:
        self._memories: dict[str, VectorMemory] = {}
        self._lock = threading.Lock()

    def of(self, wb: Workbench) -> VectorMemory:
        """The memory of ``wb``'s actor (their own collection), over ``wb``'s backend and embedder."""
        name = memory_collection(wb.actor)
        with self._lock:
            if name not in self._memories:
                self._memories[name] = VectorMemory(wb.backend(), wb.embedder(), collection=name)
            return self._memories[name]


class KnowledgeTools:
    """The MCP tools and resources over ``wb`` (the workbench of the person they act for): each
    public method is one, its docstring the description a client sees (registered by
    :func:`build_server` from :data:`TOOLS` and :data:`RESOURCES`). Agent memory is the shared
    :class:`AgentMemories`' (one per user, shared by every request).

    Args:
        wb: the workbench of whom the tools act for.
        http: served over HTTP (once accounts exist each request is its key's user's).
        memories: the agent memories shared by every person (default: new ones).
    """

    def __init__(self, wb: Workbench, *, http: bool = False, memories: AgentMemories | None = None) -> None:
        self.wb = wb
        #: Served over HTTP: once accounts exist each request is its key's user's.
        self.http = http
        self.memories = memories if memories is not None else AgentMemories()

    def for_request(self, ctx: Context | None) -> KnowledgeTools:
        """The tools for the request of ``ctx``: acting as the user of its API key when it came over
        HTTP with one (``request.state.actor``, set by :class:`~knowledge.server.guard.Guard` on every
        request), else these (stdio, in-process, or no accounts)."""
        try:
            request = ctx.request_context.request if ctx is not None else None
        except ValueError:  # no request (a call from inside this process)
            request = None
        actor = getattr(getattr(request, "state", None), "actor", None)
        return self if not isinstance(actor, Actor) else self.acting_for(actor)

    def acting_for(self, actor: Actor) -> KnowledgeTools:
        """The tools of ``actor``, built over the same shared memories with the workbench for them."""
        return KnowledgeTools(self.wb.as_user(actor), http=self.http, memories=self.memories)

    def memory(self) -> VectorMemory:
        """The agent memory of the caller (:func:`memory_collection`), made once per collection."""
        return self.memories.of(self.wb)

    def user_store(self, name: str) -> str:
        """``name`` when it may be a user's store: text without control characters, not a chat's own."""
        clean(name, "store")
        if name not in self.wb.store_names() and name in self.wb.store_names(internal=True):
            raise ToolError(f"No store named {name!r} (a chat session's own store is not reachable here; see list_stores).")
        return name

    # -- tools ---------------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        store: str | None = None,
        k: int = 5,
        filters: dict[str, Any] | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """Search a store (or every store when `store` is omitted) for passages matching `query`.

        k: number of hits (1-50). mode: "hybrid" (default: the semantic and keyword rankings merged),
        "vector" (semantic, by meaning) or "lexical" (keyword, BM25); "semantic" and "keyword" work too.
        filters: OpenAI-style, e.g. {"type": "eq", "key": "author", "value": "Ana"} or
        {"type": "and", "filters": [...]}; keys are file attributes or file_id, filename, page, heading.
        Each hit is a passage (overlapping or touching chunks of a file merged into one): store, file,
        file_id, page, heading, char_start/char_end (span in the file's text), chunks (the chunk
        indexes it joins), score (cosine similarity, higher is better) and text.
        """
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
            raise ToolError(f"k must be an integer from 1 to 50, got {k!r}.")
        found = guarded(SearchFilter.parse, filters or None)
        if store is not None:
            hits = guarded(
                self.wb.search,
                self.user_store(store),
                SearchRequest(query, k, where=found.where, mode=mode, keep=found.keep),
            )
            return {"hits": [hit_object(store, h) for h in hits]}
        rankings, failed = [], {}
        for name in self.wb.store_names():
            try:
                hits = self.wb.search(name, SearchRequest(query, k, where=found.where, mode=mode, keep=found.keep))
            except KnowledgeError as exc:
                failed[name] = str(exc)
                continue
            rankings.append([(name, h) for h in hits])
        fused = reciprocal_rank_fusion(*[[(s, h.id) for s, h in r] for r in rankings])
        merged = sorted((sh for r in rankings for sh in r), key=lambda sh: -fused[(sh[0], sh[1].id)])
        out: dict[str, Any] = {"hits": [hit_object(s, h) for s, h in merged[:k]]}
        if failed:
            out["failed"] = failed
        return out

    def list_stores(self) -> dict[str, Any]:
        """The stores: name, template, embedding model, files and chunks."""
        return {
            "stores": [
                {
                    "name": s.record.name,
                    "template": s.record.template,
                    "model": s.record.embedding_model,
                    "files": s.files,
                    "chunks": s.chunks,
                }
                for s in self.wb.list_stores()
            ]
        }

    def list_files(self, store: str) -> dict[str, Any]:
        """The files of a store: file_id, name, aliases (the same bytes under other names, indexed once),
        status (done/failed/processing), reason, chunks, pages."""
        files = guarded(self.wb.store_files, self.user_store(store))
        return {
            "files": [
                {
                    "file_id": f.file_id,
                    "name": f.file_name,
                    "aliases": list(f.aliases),
                    "status": f.status,
                    "reason": f.reason,
                    "chunks": f.chunks,
                    "pages": f.pages,
                    "resource": f"knowledge://stores/{quote(store, safe='')}/files/{f.file_id}",
                }
                for f in files
            ]
        }

    def ingest_file(self, store: str, path: str, glob: str | None = None) -> dict[str, Any]:
        """Ingest a file or a folder of this machine into `store` (created on the fly). Only paths under
        the folders of the setting mcp.allowed_dirs are read; others are refused. glob picks a folder's
        files (default **/*). Returns each file's outcome (indexed, unchanged, duplicate, failed)."""
        self.user_store(store)
        clean(path, "path")
        if glob is not None:
            clean(glob, "glob")
        folders = mcp_folders(self.wb.settings)
        p = Path(path).expanduser()
        if p.is_dir():
            job = guarded(self.wb.submit_folder, store, p, glob, folders=folders)
        else:
            resolved = guarded(folders.check, p)
            if not resolved.is_file():
                raise ToolError(f"{path} is not a file or folder on this machine.")
            job = guarded(self.wb.submit_batch, store, [(resolved.name, resolved)])
        job.wait()  # refused before anything is queued: a store the caller may not write
        return {
            "store": store,
            "skipped": job.skipped,
            "results": [
                {
                    "name": r.name,
                    "outcome": r.outcome,
                    "message": r.message,
                    "file_id": r.file_id,
                    "chunks": r.chunks,
                    "pages": r.pages,
                }
                for r in (self.wb.readable_result(store, r) for r in job.results)
            ],
        }

    def delete_file(self, store: str, file: str) -> dict[str, Any]:
        """Remove a file from `store`: by its id, the content with all its chunks and names; by its name,
        that name (the content and its chunks go with its last name)."""
        files = guarded(self.wb.store_files, self.user_store(store))
        by_id = [f for f in files if f.file_id == file]
        match = by_id or [f for f in files if file in f.names]
        if not match:
            raise ToolError(f"No file {file!r} in store {store!r}.")
        if len(match) > 1:
            raise ToolError(f"{len(match)} files are named {file!r} in {store!r}; give the file id.")
        if by_id:
            removed = guarded(self.wb.delete_file, store, match[0].file_id)
            return {"removed": match[0].file_id, "name": match[0].file_name, "chunks": removed}
        removed = guarded(self.wb.delete_name, store, match[0].file_id, file)
        return {
            "removed": match[0].file_id,
            "name": file,
            "chunks": removed,
            "still_named": [n for n in match[0].names if n != file],
        }

    def remember(
        self, text: str, dataset: str = "default", id: str | None = None, payload: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Keep a short text in agent memory, in `dataset`; the same `id` again overwrites it. `payload`:
        extra JSON fields to filter on later."""
        kwargs: dict[str, Any] = {"dataset": dataset, "payload": payload}
        if id is not None:
            kwargs["id"] = id
        mid = guarded(self.memory().remember, text, **kwargs)
        return {"id": mid, "dataset": dataset}

    def recall(
        self,
        query: str,
        dataset: str | None = "default",
        k: int = 5,
        where: dict[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> dict[str, Any]:
        """The memories closest to `query`, best first (cosine similarity, higher is better). dataset:
        null searches every dataset. where: payload equality filter."""
        hits = guarded(self.memory().recall, query, limit=k, dataset=dataset, where=where, score_threshold=score_threshold)
        return {
            "memories": [
                {"id": h.id, "text": h.text, "score": round(float(h.score), 6), "dataset": h.dataset, "payload": h.payload}
                for h in hits
            ]
        }

    def forget(
        self, ids: list[str] | None = None, dataset: str | None = None, where: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Delete the memories matching every selector given: ids, dataset, where (at least one)."""
        if not ids and dataset is None and not where:
            raise ToolError("Give ids, a dataset or a where filter: forget never deletes everything at once.")
        n = guarded(self.memory().forget, ids=ids, dataset=dataset, where=where)
        return {"forgotten": n}

    # -- sources: read and run only (adding one, with its credentials, is the app's, the CLI's, REST's) ----
    @staticmethod
    def _run_object(run: RunRecord) -> dict[str, Any]:
        return {**run.to_json(), "summary": counts_text(run.counts)}

    def list_sources(self, store: str | None = None) -> dict[str, Any]:
        """The sources -- shares, repositories, mailboxes, drives and buckets a store is kept in sync
        with -- of the stores you may read (of `store` when given): name, kind, store, location,
        schedule, paused, and the last run (status, counts, reason). Adding or changing a source (it
        holds credentials) is not a tool here: use the app's Sources page, the CLI or the REST API."""
        if store is not None:
            clean(store, "store")
        kinds = self.wb.sources.kinds()
        out = []
        for rec in guarded(self.wb.sources.records, store):
            runs = guarded(self.wb.sources.runs, rec.name, 1)
            out.append(
                {
                    "name": rec.name,
                    "kind": rec.kind,
                    "store": rec.store,
                    "location": location(kinds.get(rec.kind), rec, self.wb.settings),
                    "schedule": schedule(rec),
                    "paused": rec.paused,
                    "last_run": self._run_object(runs[0]) if runs else None,
                }
            )
        return {"sources": out}

    def run_source(self, name: str) -> dict[str, Any]:
        """Queue a run of the source `name` for the workers (needs write access to its store): it
        lists the source and brings the store up to date (added, changed, renamed, deleted files).
        Returns the run (the one already queued or running, if any); source_runs shows how it went."""
        run = guarded(self.wb.sources.run, clean(name, "name"))
        return {"source": name, "run": self._run_object(run)}

    def source_runs(self, name: str, limit: int = 5) -> dict[str, Any]:
        """The runs of the source `name`, newest first (1-50): status (queued, running, done, failed,
        cancelled), counts, reason; and each file's outcome in the newest run, failed ones first, with
        the reason in words."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RUNS_KEPT:
            raise ToolError(f"limit must be an integer from 1 to {RUNS_KEPT}, got {limit!r}.")
        runs = guarded(self.wb.sources.runs, clean(name, "name"), limit)
        items = guarded(self.wb.sources.run_items, runs[0].id) if runs else []
        return {
            "source": name,
            "runs": [self._run_object(r) for r in runs],
            "newest_items": [i.to_json() for i in sorted(items, key=lambda i: (i.ok, i.seq))],
        }

    # -- resources -----------------------------------------------------------------------------------------
    def stores_resource(self) -> str:
        # a static resource gets no request (the SDK passes no context to one): over HTTP with
        # accounts it cannot tell whose stores to list
        if self.http and self.wb.actor.local and self.wb.accounts.enabled():
            raise ResourceError(
                "This server has user accounts: list the stores with the list_stores tool (it answers for your key's user)."
            )
        return json.dumps(self.list_stores(), ensure_ascii=False)

    def file_chunks(self, store: str, file_id: str) -> str:
        name = unquote(store)
        bad = control_char(name)
        if bad or (name not in self.wb.store_names() and name in self.wb.store_names(internal=True)):
            raise ResourceError(f"No store named {name!r}" + (f" (control character {bad})." if bad else "."))
        try:
            rec = self.wb.file_record(name, file_id)
            if rec is None or rec.status != DONE:
                raise ResourceError(f"No indexed file {file_id!r} in store {name!r}.")
            chunks = self.wb.vector_store(name).chunks(file_id)
        except KnowledgeError as exc:
            raise ResourceError(str(exc)) from None
        return json.dumps(
            {
                "store": name,
                "file_id": file_id,
                "file": rec.file_name,
                "chunks": [
                    {
                        "chunk_index": h.chunk_index,
                        "page": h.page,
                        "heading": h.heading,
                        "char_start": h.char_start,
                        "char_end": h.char_end,
                        "text": h.text,
                    }
                    for h in chunks
                ],
            },
            ensure_ascii=False,
        )


#: The tools :func:`build_server` registers: methods of :class:`KnowledgeTools`.
TOOLS = (
    "search",
    "list_stores",
    "list_files",
    "ingest_file",
    "delete_file",
    "remember",
    "recall",
    "forget",
    "list_sources",
    "run_source",
    "source_runs",
)
#: The resources: ``(URI template, method of KnowledgeTools, description)``, all JSON.
RESOURCES = (
    ("knowledge://stores", "stores_resource", "The stores"),
    (
        "knowledge://stores/{store}/files/{file_id}",
        "file_chunks",
        "A file's chunks in order with page, heading and character span",
    ),
)


def per_request(tools: KnowledgeTools, name: str) -> Any:
    """The function registered for the tool or resource ``name``: the method's parameters and
    docstring, plus a :class:`~mcp.server.mcpserver.Context` parameter the SDK fills in, through
    which each call runs on :meth:`KnowledgeTools.for_request` (the request's user). A backend that
    cannot be reached is the tool's (or resource's) error, worded as the REST API's 503."""
    method = getattr(tools, name)

    @functools.wraps(method)
    def call(*args: Any, mcp_context: Context, **kwargs: Any) -> Any:
        try:
            return getattr(tools.for_request(mcp_context), name)(*args, **kwargs)
        except BackendUnavailable as exc:  # the catalog or a backend is down: the REST API's 503 message
            raise (ToolError if name in TOOLS else ResourceError)(unavailable_message(str(exc))) from None

    sig = inspect.signature(method, eval_str=True)
    extra = inspect.Parameter("mcp_context", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    call.__signature__ = sig.replace(parameters=[*sig.parameters.values(), extra])  # type: ignore[attr-defined]
    call.__annotations__ = {
        **{k: p.annotation for k, p in sig.parameters.items()},
        "mcp_context": Context,
        "return": sig.return_annotation,
    }
    del call.__wrapped__  # the SDK reads this signature, not the method's
    return call


def build_server(wb: Workbench, user: str | None = None, *, http: bool = False) -> MCPServer:
    """The MCP server over ``wb`` (tools and resources as the module docstring lists), acting as
    ``wb``'s actor, as the account ``user`` when given, or, with ``http`` once accounts exist, as
    each request's key's user.

    Raises:
        AuthenticationFailed: ``user`` is no account.
    """
    server = MCPServer("knowledge", instructions=INSTRUCTIONS)
    tools = KnowledgeTools(wb, http=http)
    if user is not None:
        tools = tools.acting_for(wb.actor_of(user))
    for name in TOOLS:
        server.tool(name=name)(per_request(tools, name))
    for uri, name, description in RESOURCES:
        fn = per_request(tools, name) if "{" in uri else getattr(tools, name)  # a static one gets no context
        server.resource(uri, name=name, mime_type="application/json", description=description)(fn)
    return server


def run(
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = DEFAULT_HTTP_PORT,
    wb: Workbench | None = None,
    user: str | None = None,
) -> None:
    """Serve MCP over stdio, or streamable HTTP with ``http`` (``/mcp``) until interrupted. Over
    stdio the tools act as the local admin, or as the account ``user``; over HTTP, once accounts
    exist, as the user of each request's key.

    Raises:
        ConfigError: HTTP on a non-loopback ``host`` without ``KNOWLEDGE_API_KEY`` or accounts.
        AuthenticationFailed: ``user`` is no account.
    """
    wb = wb or Workbench()
    try:
        server = build_server(wb, user, http=http)
        if not http:
            logging.basicConfig(level=logging.WARNING)  # stderr; stdout is the protocol's
            server.run("stdio")
            return
        configure_logging(wb.settings)
        configure_tracing(wb.settings, "mcp")
        uvicorn.run(
            http_app(wb, host, port, server=server), host=host, port=port, log_level="info", **uvicorn_logging(wb.settings)
        )
    finally:
        wb.close()


def http_app(
    wb: Workbench, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT, *, server: MCPServer | None = None
) -> Any:
    """The streamable HTTP app (``/mcp``) for a server bound to ``host``:``port``: behind
    :class:`~knowledge.server.guard.Guard` (the REST API's rules: Host, Origin, the key, JSON
    only, body size) and with the SDK's DNS-rebinding protection naming this host and port only.
    With ``catalog.url`` set (team mode) the server is stateless (no ``Mcp-Session-Id`` kept in this
    process), so a client's requests may reach any of several MCP processes behind one address.

    Once user accounts exist every request needs its user's key (``kn-...``; the shared key is
    refused) and each tool call acts as that user.

    Raises:
        ConfigError: a non-loopback ``host`` without ``KNOWLEDGE_API_KEY`` or accounts.
    """
    key = wb.settings.api_key.get_secret_value() if wb.settings.api_key else None
    check_bind(host, key, accounts=wb.accounts.enabled())
    api = wb.settings.api
    hosts = server_hosts(host, port, api.allowed_hosts)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")] + list(api.cors_origins),
    )
    # on a shared catalog (catalog.url) any replica answers any request: no session kept in this process
    inner = (server or build_server(wb, http=True)).streamable_http_app(
        host=host, transport_security=security, stateless_http=wb.settings.catalog.url is not None
    )
    watch_queue(wb)
    return Observed(
        Guard(
            OpsEndpoints(inner, readiness=wb.readiness(), metrics=wb.settings.ops.metrics),
            api_key=key,
            max_body=4_000_000,
            allowed_hosts=api.allowed_hosts,
            cors_origins=api.cors_origins,
            allow_headers=("Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID"),
            expose_headers=("Mcp-Session-Id",),
            people=wb,
            trusted_proxies=wb.settings.server.trusted_proxies,
            probe_paths=PROBE_PATHS,
            metrics_token=metrics_token(wb.settings),
        ),
        server="mcp",
    )


__all__ = [
    "DEFAULT_HTTP_PORT",
    "AgentMemories",
    "KnowledgeTools",
    "build_server",
    "clean",
    "http_app",
    "mcp_folders",
    "memory_collection",
    "per_request",
    "run",
]
