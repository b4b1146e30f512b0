"""The state behind the REST routes and the OpenAI objects they answer with.

:class:`KnowledgeApi` holds the workbench, the chat service (made on first use), the files being
added through the API (their jobs, attributes and chunking) and the file batches, and shapes
OpenAI's objects from the workbench's records: ``file``, ``vector_store``, ``vector_store.file``,
``vector_store.files_batch`` and a search result. It is ``app.state.api``; a route gets it as a
parameter typed :data:`Api`. Ids: a file is ``file-<32 hex>`` (the file store's id); a vector
store is ``vs_`` + 24 hex digits of the SHA-256 of its name (:func:`vector_store_id`); a batch
``vsfb_<32 hex>``. ``metadata``/``expires_after`` of stores are kept in
``<data>/api/vector_stores.json`` (:class:`StoreMeta`). How the objects map onto the workbench:
``docs/api.md``.

Errors: :class:`~knowledge.server.http.ApiError` (404 for an unknown id, 400 for a bad field).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request

from knowledge.attributes import check_attributes, from_payload
from knowledge.catalog import DONE, FAILED, FileRecord
from knowledge.chat import ChatService
from knowledge.errors import InvalidArgument
from knowledge.filestore.base import is_file_id
from knowledge.ingest.chunker import plan_chunking
from knowledge.outcomes import Outcome
from knowledge.server.filters import HIT_FIELDS
from knowledge.server.http import ApiError, bad, known, not_found
from knowledge.service.jobs import IngestJob
from knowledge.service.templates import DEFAULT_TEMPLATE
from knowledge.vectorstore.store import Hit
from knowledge.workbench import Workbench

#: The purpose reported for files that did not come through the Files API (the app's uploads).
DEFAULT_PURPOSE = "assistants"
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
#: OpenAI's bounds of a static chunking strategy.
MIN_CHUNK, MAX_CHUNK = 100, 4096
VS_ID = re.compile(r"vs_[0-9a-f]{24}")
BATCH_ID = re.compile(r"vsfb_[0-9a-f]{32}")


def vector_store_id(name: str) -> str:
    """The API id of the store ``name``: ``vs_`` + 24 hex digits of the SHA-256 of the name."""
    return "vs_" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]


def ts(dt: Any) -> int:
    """A datetime as OpenAI's ``created_at`` (Unix seconds); ``None`` is now."""
    return int(dt.timestamp()) if dt is not None else int(time.time())


@dataclass
class Batch:
    id: str
    store: str
    file_ids: list[str]
    jobs: list[IngestJob]
    created_at: int
    cancelled: bool = False


@dataclass
class Pending:
    """A file added to a store through the API and not finished yet, or finished without a record
    of its own (a duplicate): its job, attributes and chunking."""

    job: IngestJob
    index: int  # the file's place in the job
    attributes: dict[str, Any]
    chunking: dict[str, Any]
    notes: list[str]
    created_at: int = field(default_factory=lambda: int(time.time()))

    @property
    def running(self) -> bool:
        """The file has no result yet (waiting or being ingested)."""
        return self.job.files[self.index].result is None

    @property
    def result(self) -> Any:
        return self.job.files[self.index].result


class StoreMeta:
    """``<data>/api/vector_stores.json``: each store's API ``metadata`` and ``expires_after``,
    written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}

    def get(self, store: str) -> dict[str, Any]:
        with self._lock:
            return self._read().get(store, {})

    def put(self, store: str, value: dict[str, Any] | None) -> None:
        with self._lock:
            data = self._read()
            if value is None:
                data.pop(store, None)
            else:
                data[store] = value
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), "utf-8")
            os.replace(tmp, self.path)


class KnowledgeApi:
    """The state behind the routes: the workbench, the chat service, running jobs and batches."""

    def __init__(self, wb: Workbench, chat: Any = None) -> None:
        self.wb = wb
        self._chat = chat
        self.meta = StoreMeta(wb.settings.data_root / "api" / "vector_stores.json")
        self.pending: dict[tuple[str, str], Pending] = {}
        self.batches: dict[str, Batch] = {}
        self._lock = threading.RLock()

    @property
    def chat(self) -> Any:
        with self._lock:
            if self._chat is None:
                self._chat = ChatService(self.wb)
            return self._chat

    # -- files -------------------------------------------------------------------------------------
    def file_object(self, f: Any) -> dict[str, Any]:
        return {"id": f.id, "object": "file", "bytes": f.size, "created_at": ts(f.created), "filename": f.name,
                "purpose": f.metadata.get("purpose", DEFAULT_PURPOSE), "status": "processed",
                "status_details": None, "expires_at": None}

    def stored(self, file_id: str) -> Any:
        """The stored file ``file_id`` as the API serves it.

        Raises:
            ApiError: 404, no such file, or one the API does not serve (a chat's attachment).
        """
        f = self.wb.find_stored_file(file_id) if is_file_id(file_id) else None
        if f is None or not self.visible(f):  # a chat's own attachment is not the API's to give
            raise not_found("file", file_id)
        return f

    def visible(self, f: Any, user: set[str] | None = None) -> bool:
        """Whether the API serves stored file ``f``: uploaded here, or held by a user's store (not
        only by chats' attachment stores). ``user``: the user's store names, when known."""
        if "purpose" in f.metadata:
            return True
        user = set(self.wb.store_names()) if user is None else user
        return any(s in user for s in self.wb.stores_using_file(f.id))

    def visible_files(self) -> list[Any]:
        """Files uploaded here, and files a user's store holds (not the chats' attachments)."""
        user = set(self.wb.store_names())
        return [f for f in self.wb.stored_files() if self.visible(f, user)]

    def internal_store(self, name: str) -> bool:
        """Whether ``name`` is a store the product keeps for itself (a chat session's attachments)."""
        return name not in self.wb.store_names() and name in self.wb.store_names(internal=True)

    # -- stores ------------------------------------------------------------------------------------
    def store_name(self, vs_id: str) -> str:
        if VS_ID.fullmatch(vs_id or ""):
            for name in self.wb.store_names():
                if vector_store_id(name) == vs_id:
                    return name
        raise not_found("vector store", vs_id)

    def store_object(self, name: str) -> dict[str, Any]:
        rec = self.wb.get_store(name)
        records = {r.file_id: r for r in self.wb.file_records(name)}
        counts = {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0}
        for fid, r in records.items():
            status = ("in_progress" if self._running(name, fid) or r.status not in (DONE, FAILED) else
                      "completed" if r.status == DONE else "cancelled" if r.reason == "cancelled" else "failed")
            counts[status] += 1
        counts["in_progress"] += sum(1 for (s, fid) in list(self.pending)
                                     if s == name and fid not in records and self._running(s, fid))
        counts["total"] = sum(counts.values())
        meta = self.meta.get(name)
        used = sum(r.size or 0 for r in records.values() if r.status == DONE)
        return {"id": vector_store_id(name), "object": "vector_store", "name": name,
                "created_at": ts(rec.created), "last_active_at": ts(rec.updated), "usage_bytes": used,
                "file_counts": counts, "status": "in_progress" if counts["in_progress"] else "completed",
                "expires_after": meta.get("expires_after"), "expires_at": None,
                "metadata": meta.get("metadata", {}),
                "template": rec.template, "embedding_model": rec.embedding_model}

    def template_for(self, name: str, strategy: Any, *, template: str | None = None,
                     save: bool = True) -> tuple[str | None, dict[str, Any], list[str]]:
        """``(template name or None for the store's own, chunking_strategy as reported, notes)`` for
        OpenAI's ``chunking_strategy`` (``auto`` / ``static``). ``template``: the template of a store
        not created yet; without ``save`` a static strategy's template is only checked, not saved."""
        rec = self.wb.store_record(name)
        base = self.wb.template(rec.template if rec else template or DEFAULT_TEMPLATE)
        if isinstance(strategy, Mapping):
            known(strategy, ("type", "static"), "chunking_strategy")
        kind = (strategy or {}).get("type", "auto") if isinstance(strategy, Mapping) or strategy is None else None
        if kind == "auto":
            size, overlap, tpl = base.max_chunk_size_tokens, base.chunk_overlap_tokens, None
        elif kind == "static":
            static = strategy.get("static")
            if not isinstance(static, Mapping):
                raise bad("A static chunking_strategy needs 'static': {max_chunk_size_tokens, chunk_overlap_tokens}.",
                          "chunking_strategy")
            known(static, ("max_chunk_size_tokens", "chunk_overlap_tokens"), "chunking_strategy.static")
            asked, over = static.get("max_chunk_size_tokens"), static.get("chunk_overlap_tokens")
            if not (isinstance(asked, int) and MIN_CHUNK <= asked <= MAX_CHUNK):
                raise bad(f"max_chunk_size_tokens must be an integer from {MIN_CHUNK} to {MAX_CHUNK}, got {asked!r}.",
                          "chunking_strategy")
            if not (isinstance(over, int) and 0 <= over <= asked // 2):
                raise bad(f"chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens"
                          f" ({asked // 2}), got {over!r}.", "chunking_strategy")
            size, overlap = asked, over
            tpl = f"{base.name}-static-{size}-{overlap}"
            if save and tpl not in self.wb.template_names():
                self.wb.save_template(base.model_copy(update={"name": tpl, "max_chunk_size_tokens": size,
                                                             "chunk_overlap_tokens": overlap}))
        else:
            raise bad("chunking_strategy.type must be 'auto' or 'static'.", "chunking_strategy")
        plan = plan_chunking(self.wb.embedder(base.embedding_model), size, overlap)
        reported = {"type": "static", "static": {"max_chunk_size_tokens": plan.max_tokens,
                                                 "chunk_overlap_tokens": plan.overlap_tokens}}
        return tpl, reported, list(plan.notes)

    # -- vector store files ---------------------------------------------------------------------------
    def _running(self, store: str, file_id: str) -> bool:
        p = self.pending.get((store, file_id))
        return p is not None and p.running

    def file_status(self, store: str, rec: FileRecord | None, file_id: str | None = None) -> dict[str, Any]:
        """The ``vector_store.file`` object of ``file_id`` (or ``rec``'s file) in ``store``.

        Raises:
            ApiError: 404, neither a record nor a file being added.
        """
        fid = rec.file_id if rec is not None else str(file_id)
        p = self.pending.get((store, fid))
        status, last_error = self.status_of(rec, p, fid)
        if status == "completed":
            attributes = self.wb.file_attributes(store, fid)
        else:
            attributes = dict(p.attributes) if p is not None else {}
        if rec is not None:
            size = rec.size
        else:
            found = self.wb.find_stored_file(fid)
            size = found.size if found is not None else 0
        chunking = p.chunking if p is not None else self.template_for(store, None)[1]
        out: dict[str, Any] = {
            "id": fid, "object": "vector_store.file", "usage_bytes": size or 0,
            "created_at": ts(rec.created) if rec is not None and rec.created else (p.created_at if p else 0),
            "vector_store_id": vector_store_id(store), "status": status, "last_error": last_error,
            "attributes": attributes, "chunking_strategy": chunking}
        if p is not None and p.notes:
            out["chunking_notes"] = p.notes
        if rec is not None and rec.status == DONE:
            out["chunks"], out["pages"], out["warnings"] = rec.chunks, rec.pages, rec.warnings
        return out

    @staticmethod
    def status_of(rec: FileRecord | None, p: Pending | None, fid: str) -> tuple[str, dict[str, Any] | None]:
        """``(status, last_error)`` of a store's file from its record and its job while being added."""
        if p is not None and p.running:
            return "in_progress", None
        if rec is not None and rec.status == DONE:
            return "completed", None
        if rec is not None and rec.status == FAILED:
            if rec.reason == "cancelled":
                return "cancelled", None
            return "failed", {"code": error_code(rec.reason or ""), "message": rec.reason}
        if rec is not None:
            return "in_progress", None
        if p is None:
            raise not_found("vector store file", fid)
        result = p.result  # finished without a record of its own
        if result is not None and result.outcome == Outcome.CANCELLED:
            return "cancelled", None
        message = result.message if result is not None else "not ingested"
        code = "invalid_file" if result and result.outcome in (Outcome.DUPLICATE, Outcome.UNCHANGED) else error_code(message)
        return "failed", {"code": code, "message": message}

    def add_files(self, store: str, entries: list[tuple[str, Any, Any]], default_attrs: Any = None,
                  default_strategy: Any = None) -> list[IngestJob]:
        """Start jobs for ``(file_id, attributes, chunking_strategy)`` entries (``None`` takes the
        defaults); one job per distinct attributes + strategy, files in the given order."""
        groups: dict[str, tuple[str | None, dict, dict, list[str], list[Any]]] = {}
        chosen: dict[str, Any] = {}
        for fid, attrs, strategy in entries:  # everything is checked before anything starts
            f = self.stored(fid)
            try:
                attributes = check_attributes(default_attrs if attrs is None else attrs)
            except InvalidArgument as exc:
                raise bad(str(exc), "attributes") from None
            clash = sorted(set(attributes) & set(HIT_FIELDS))
            if clash:
                raise bad(f"Attribute names {', '.join(clash)} are reserved (each search result reports them).",
                          "attributes")
            picked = default_strategy if strategy is None else strategy
            tpl, reported, notes = self.template_for(store, picked, save=False)
            chosen[json.dumps(picked, sort_keys=True)] = picked
            key = json.dumps([tpl, attributes], sort_keys=True)
            groups.setdefault(key, (tpl, attributes, reported, notes, []))[4].append(f)
        for picked in chosen.values():
            self.template_for(store, picked)  # a static strategy's template, saved now
        jobs = []
        with self._lock:
            for tpl, attributes, reported, notes, files in groups.values():
                job = IngestJob(self.wb, store, [(f.name, f) for f in files], template=tpl, attributes=attributes)
                for i, f in enumerate(files):
                    self.pending[(store, f.id)] = Pending(job, i, attributes, reported, notes)
                jobs.append(job.start())
        return jobs

    def get_file(self, store: str, file_id: str) -> dict[str, Any]:
        rec = self.wb.file_record(store, file_id)
        if rec is None and (store, file_id) not in self.pending:
            raise not_found("vector store file", file_id)
        return self.file_status(store, rec, file_id)

    def store_files(self, store: str) -> list[dict[str, Any]]:
        recs = {r.file_id: r for r in self.wb.file_records(store)}
        out = [self.file_status(store, r) for r in recs.values()]
        out += [self.file_status(store, None, fid) for (s, fid) in list(self.pending)
                if s == store and fid not in recs]
        return out

    def batch_object(self, b: Batch) -> dict[str, Any]:
        counts = {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0}
        for fid in b.file_ids:
            try:
                counts[self.get_file(b.store, fid)["status"]] += 1
            except ApiError:
                counts["failed"] += 1
        counts["total"] = len(b.file_ids)
        status = ("in_progress" if counts["in_progress"] else "cancelled" if b.cancelled
                  else "failed" if counts["failed"] and not counts["completed"] else "completed")
        return {"id": b.id, "object": "vector_store.files_batch", "created_at": b.created_at,
                "vector_store_id": vector_store_id(b.store), "status": status, "file_counts": counts}

    def batch(self, store: str, batch_id: str) -> Batch:
        b = self.batches.get(batch_id) if BATCH_ID.fullmatch(batch_id or "") else None
        if b is None or b.store != store:
            raise not_found("file batch", batch_id)
        return b

    # -- search ------------------------------------------------------------------------------------------
    @staticmethod
    def result(hit: Hit) -> dict[str, Any]:
        attrs: dict[str, Any] = from_payload(hit.metadata)
        attrs.update(page=hit.page, heading=hit.heading, char_start=hit.char_start, char_end=hit.char_end,
                     chunk_index=hit.chunk_index)
        return {"file_id": hit.file_id, "filename": hit.file_name, "score": round(float(hit.score), 6),
                "attributes": attrs, "content": [{"type": "text", "text": hit.text}]}


def error_code(message: str) -> str:
    """The ``last_error.code`` of a failed file from its reason."""
    low = message.lower()
    if "not a supported" in low or "unsupported" in low or "legacy" in low or "save it as" in low:
        return "unsupported_file"
    if "unexpected error" in low or "interrupted" in low:
        return "server_error"
    return "invalid_file"


async def knowledge_api(request: Request) -> KnowledgeApi:
    """The :class:`KnowledgeApi` of the app serving ``request`` (``app.state.api``)."""
    return request.app.state.api


#: A route's parameter ``api: Api`` is the app's :class:`KnowledgeApi` (a FastAPI dependency).
Api = Annotated[KnowledgeApi, Depends(knowledge_api)]

__all__ = ["BATCH_ID", "DEFAULT_PURPOSE", "MAX_CHUNK", "MIN_CHUNK", "PURPOSES", "VS_ID", "Api", "Batch",
           "KnowledgeApi", "Pending", "StoreMeta", "error_code", "knowledge_api", "ts", "vector_store_id"]
