"""An OpenAI-compatible REST API over the workbench: Files, Vector Stores, search, and chat.

``python -m knowledge serve`` runs :func:`create_app` with uvicorn. Code written for OpenAI's
``file_search`` works against local, offline knowledge by changing ``base_url``::

    client = openai.OpenAI(base_url="http://127.0.0.1:8900/v1", api_key="local")
    vs = client.vector_stores.create(name="docs")
    client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=open("a.pdf", "rb"))
    client.vector_stores.search(vs.id, query="...", filters={"type": "eq", "key": "team", "value": "ops"})

How OpenAI's objects map onto the workbench (everything goes through the service layer; there is
no second copy of ingestion or search here):

* a **file** is a file of the file store (``file-<32 hex>``); ``purpose`` is kept in its metadata.
  Files uploaded here are kept when they leave a store (OpenAI's semantics); files of the app are
  listed when a user's store holds them (chat attachments are not).
* a **vector store** is a store; its id is ``vs_`` + 24 hex digits of the SHA-256 of its name, so
  the app's stores have ids too. Names are unique here: creating a name that exists returns that
  store. ``metadata`` and ``expires_after`` are kept in ``<data>/api/vector_stores.json``
  (``expires_after`` is reported, never enforced).
* a **vector store file** is the file's record in the store (the catalog): ``pending`` /
  ``processing`` -> ``in_progress``, ``done`` -> ``completed``, ``failed`` -> ``failed`` with
  ``last_error``. Adding one starts an :class:`~knowledge.jobs.IngestJob` (the app's background
  jobs) and returns at once; the workbench's rules hold (the same bytes twice are not indexed
  twice, a changed file under the same name replaces the old one). ``attributes`` are stored with
  every chunk (:mod:`knowledge.attributes`).
* ``chunking_strategy`` ``static`` maps to a template ``<store template>-static-<size>-<overlap>``
  (same backend and model), and the chunk size is fitted to the model's window as the app does;
  the response says so in ``chunking_notes``. ``auto`` is the store's template.
* **search** is the workbench's hybrid search; ``filters`` are OpenAI's comparison and compound
  filters (:mod:`knowledge.server.filters`); ``score`` is the vector score (cosine similarity,
  higher is better); each result's ``attributes`` hold the file's attributes plus, beyond OpenAI,
  ``page``, ``heading``, ``char_start``, ``char_end`` and ``chunk_index``.
* **chat**: ``POST /v1/chat/completions`` and ``GET /v1/models`` over :class:`~knowledge.chat.ChatService`.

Security: :func:`check_bind` refuses any host but loopback without ``KNOWLEDGE_API_KEY``; every
request passes :class:`~knowledge.server.http_guard.Guard` (Host, Origin, the key, JSON only,
uploads, body size; nosniff and a CSP on every response); file contents are downloads
(``application/octet-stream``, ``attachment``); unknown request fields are refused; ids are looked
up, never used as paths; chats' own stores and attachments are not the API's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from knowledge.access import is_loopback
from knowledge.attributes import check_attributes, from_payload
from knowledge.catalog import DONE, FAILED, FileRecord
from knowledge.errors import (
    ConfigError,
    FileTooLarge,
    InvalidArgument,
    KnowledgeError,
)
from knowledge.jobs import IngestJob
from knowledge.server.filters import HIT_FIELDS, compile_filter, filtered_search
from knowledge.server.http_guard import Guard, control_char, parse_json
from knowledge.vectorstore.store import Hit
from knowledge.workbench import CANCELLED, DUPLICATE, UNCHANGED, Workbench

log = logging.getLogger(__name__)

DEFAULT_PORT = 8900
#: The purpose reported for files that did not come through the Files API (the app's uploads).
DEFAULT_PURPOSE = "assistants"
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
#: OpenAI's bounds of a static chunking strategy.
MIN_CHUNK, MAX_CHUNK = 100, 4096
POLL_AFTER_MS = "200"
_VS_ID = re.compile(r"vs_[0-9a-f]{24}")
_BATCH_ID = re.compile(r"vsfb_[0-9a-f]{32}")


# -- errors ------------------------------------------------------------------------------------------
class ApiError(Exception):
    """An error answered with OpenAI's body: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"message": self.message, "type": self.type, "param": self.param,
                                       "code": self.code}}, status_code=self.status)


def _not_found(what: str, ident: str) -> ApiError:
    return ApiError(404, f"No {what} found with id {ident!r}.", code="not_found")


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, param=param)


def _from_knowledge(exc: KnowledgeError) -> ApiError:
    from knowledge.chat.service import AttachFailed
    from knowledge.llm.config import LlmUnavailable

    if isinstance(exc, FileTooLarge):
        return ApiError(413, str(exc), code="file_too_large")
    if isinstance(exc, LookupError):  # a store, file, session or config that does not exist
        return ApiError(404, str(exc), code="not_found")
    if isinstance(exc, (InvalidArgument, ConfigError, AttachFailed)):
        return ApiError(400, str(exc))
    if isinstance(exc, LlmUnavailable):  # the model behind a CHAT config cannot be reached or used
        return ApiError(503, str(exc), type="server_error", code="model_unavailable")
    return ApiError(500, str(exc), type="server_error")


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to serve anything but loopback without an API key.

    Raises:
        ConfigError: ``host`` is not a loopback address and ``api_key`` is empty.
    """
    if not is_loopback(host) and not api_key:
        raise ConfigError(f"Serving on {host or 'every interface'} makes the stores reachable from other"
                          " computers: set KNOWLEDGE_API_KEY (clients send it as the bearer token), or"
                          " keep the default --host 127.0.0.1.")


def vector_store_id(name: str) -> str:
    """The API id of the store ``name``: ``vs_`` + 24 hex digits of the SHA-256 of the name."""
    return "vs_" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]


def _ts(dt: Any) -> int:
    return int(dt.timestamp()) if dt is not None else int(time.time())


# -- state the workbench does not keep -----------------------------------------------------------------
@dataclass
class _Batch:
    id: str
    store: str
    file_ids: list[str]
    jobs: list[IngestJob]
    created_at: int
    cancelled: bool = False


@dataclass
class _Pending:
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


class _Meta:
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


def _check_metadata(metadata: Any) -> dict[str, str]:
    """OpenAI's ``metadata``: at most 16 pairs, keys up to 64 and values up to 512 characters, strings."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or len(metadata) > 16 or not all(
            isinstance(k, str) and 0 < len(k) <= 64 and isinstance(v, str) and len(v) <= 512
            for k, v in metadata.items()):
        raise _bad("metadata must be an object of at most 16 string pairs (keys up to 64 characters, values"
                   " up to 512).", "metadata")
    return dict(metadata)


def _page(items: list[dict[str, Any]], limit: Any, after: str | None, before: str | None,
          order: str | None) -> dict[str, Any]:
    """OpenAI's cursor page: ``{"object": "list", "data", "first_id", "last_id", "has_more"}``,
    ordered by ``created_at`` (``desc`` by default) then id; ``after``/``before`` are item ids."""
    if order not in (None, "asc", "desc"):
        raise _bad(f"order must be 'asc' or 'desc', got {order!r}.", "order")
    try:
        n = 20 if limit is None else int(limit)
    except (TypeError, ValueError):
        raise _bad(f"limit must be an integer between 1 and 100, got {limit!r}.", "limit") from None
    if not 1 <= n <= 100:
        raise _bad(f"limit must be between 1 and 100, got {n}.", "limit")
    desc = order != "asc"
    items = sorted(items, key=lambda o: (o.get("created_at", 0), o["id"]), reverse=desc)
    ids = [o["id"] for o in items]
    if after is not None:
        if after not in ids:
            raise _bad(f"after: no object with id {after!r} in this list.", "after")
        items = items[ids.index(after) + 1:]
    if before is not None:
        ids = [o["id"] for o in items]
        if before not in ids:
            raise _bad(f"before: no object with id {before!r} in this list.", "before")
        items = items[:ids.index(before)][-n:]
    data = items[:n]
    return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None, "has_more": len(items) > n}


class KnowledgeApi:
    """The state behind the routes: the workbench, the chat service, running jobs and batches."""

    def __init__(self, wb: Workbench, chat: Any = None) -> None:
        self.wb = wb
        self._chat = chat
        self.meta = _Meta(wb.settings.data_root / "api" / "vector_stores.json")
        self.pending: dict[tuple[str, str], _Pending] = {}
        self.batches: dict[str, _Batch] = {}
        self._lock = threading.RLock()

    @property
    def chat(self) -> Any:
        with self._lock:
            if self._chat is None:
                from knowledge.chat import ChatService

                self._chat = ChatService(self.wb)
            return self._chat

    # -- files -------------------------------------------------------------------------------------
    def file_object(self, f: Any) -> dict[str, Any]:
        return {"id": f.id, "object": "file", "bytes": f.size, "created_at": _ts(f.created), "filename": f.name,
                "purpose": f.metadata.get("purpose", DEFAULT_PURPOSE), "status": "processed",
                "status_details": None, "expires_at": None}

    def stored(self, file_id: str) -> Any:
        from knowledge.filestore.base import is_file_id

        f = self.wb.find_stored_file(file_id) if is_file_id(file_id) else None
        if f is None or not self.visible(f):  # a chat's own attachment is not the API's to give
            raise _not_found("file", file_id)
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
        if _VS_ID.fullmatch(vs_id or ""):
            for name in self.wb.store_names():
                if vector_store_id(name) == vs_id:
                    return name
        raise _not_found("vector store", vs_id)

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
                "created_at": _ts(rec.created), "last_active_at": _ts(rec.updated), "usage_bytes": used,
                "file_counts": counts, "status": "in_progress" if counts["in_progress"] else "completed",
                "expires_after": meta.get("expires_after"), "expires_at": None,
                "metadata": meta.get("metadata", {}),
                "template": rec.template, "embedding_model": rec.embedding_model}

    def template_for(self, name: str, strategy: Any, *, template: str | None = None,
                     save: bool = True) -> tuple[str | None, dict[str, Any], list[str]]:
        """``(template name or None for the store's own, chunking_strategy as reported, notes)`` for
        OpenAI's ``chunking_strategy`` (``auto`` / ``static``). ``template``: the template of a store
        not created yet; without ``save`` a static strategy's template is only checked, not saved."""
        from knowledge.ingest.chunker import plan_chunking
        from knowledge.templates import DEFAULT_TEMPLATE

        rec = self.wb.store_record(name)
        base = self.wb.template(rec.template if rec else template or DEFAULT_TEMPLATE)
        if isinstance(strategy, Mapping):
            _known(strategy, ("type", "static"), "chunking_strategy")
        kind = (strategy or {}).get("type", "auto") if isinstance(strategy, Mapping) or strategy is None else None
        if kind == "auto":
            size, overlap, tpl = base.max_chunk_size_tokens, base.chunk_overlap_tokens, None
        elif kind == "static":
            static = strategy.get("static")
            if not isinstance(static, Mapping):
                raise _bad("A static chunking_strategy needs 'static': {max_chunk_size_tokens, chunk_overlap_tokens}.",
                           "chunking_strategy")
            _known(static, ("max_chunk_size_tokens", "chunk_overlap_tokens"), "chunking_strategy.static")
            size, overlap = static.get("max_chunk_size_tokens"), static.get("chunk_overlap_tokens")
            if not (isinstance(size, int) and MIN_CHUNK <= size <= MAX_CHUNK):
                raise _bad(f"max_chunk_size_tokens must be an integer from {MIN_CHUNK} to {MAX_CHUNK}, got {size!r}.",
                           "chunking_strategy")
            if not (isinstance(overlap, int) and 0 <= overlap <= size // 2):
                raise _bad(f"chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens"
                           f" ({size // 2}), got {overlap!r}.", "chunking_strategy")
            tpl = f"{base.name}-static-{size}-{overlap}"
            if save and tpl not in self.wb.template_names():
                self.wb.save_template(base.model_copy(update={"name": tpl, "max_chunk_size_tokens": size,
                                                             "chunk_overlap_tokens": overlap}))
        else:
            raise _bad("chunking_strategy.type must be 'auto' or 'static'.", "chunking_strategy")
        plan = plan_chunking(self.wb.embedder(base.embedding_model), size, overlap)
        reported = {"type": "static", "static": {"max_chunk_size_tokens": plan.max_tokens,
                                                 "chunk_overlap_tokens": plan.overlap_tokens}}
        return tpl, reported, list(plan.notes)

    # -- vector store files ---------------------------------------------------------------------------
    def _running(self, store: str, file_id: str) -> bool:
        p = self.pending.get((store, file_id))
        return p is not None and p.running

    def file_status(self, store: str, rec: FileRecord | None, file_id: str | None = None) -> dict[str, Any]:
        """The ``vector_store.file`` object of ``file_id`` in ``store``."""
        fid = rec.file_id if rec is not None else file_id
        p = self.pending.get((store, fid))
        last_error = None
        if p is not None and p.running:
            status = "in_progress"
        elif rec is not None and rec.status == DONE:
            status = "completed"
        elif rec is not None and rec.status == FAILED:
            cancelled = rec.reason == "cancelled"
            status = "cancelled" if cancelled else "failed"
            last_error = None if cancelled else {"code": _error_code(rec.reason or ""), "message": rec.reason}
        elif rec is not None:
            status = "in_progress"
        elif p is not None:  # finished without a record of its own
            result = p.result
            if result is not None and result.outcome == CANCELLED:
                status = "cancelled"
            else:
                status = "failed"
                message = result.message if result is not None else "not ingested"
                last_error = {"code": "invalid_file" if result and result.outcome in (DUPLICATE, UNCHANGED)
                              else _error_code(message), "message": message}
        else:
            raise _not_found("vector store file", str(fid))
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
        out = {"id": fid, "object": "vector_store.file", "usage_bytes": size or 0,
               "created_at": _ts(rec.created) if rec is not None and rec.created else (p.created_at if p else 0),
               "vector_store_id": vector_store_id(store), "status": status, "last_error": last_error,
               "attributes": attributes, "chunking_strategy": chunking}
        if p is not None and p.notes:
            out["chunking_notes"] = p.notes
        if rec is not None and rec.status == DONE:
            out["chunks"], out["pages"], out["warnings"] = rec.chunks, rec.pages, rec.warnings
        return out

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
                raise _bad(str(exc), "attributes") from None
            clash = sorted(set(attributes) & set(HIT_FIELDS))
            if clash:
                raise _bad(f"Attribute names {', '.join(clash)} are reserved (each search result reports them).",
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
                    self.pending[(store, f.id)] = _Pending(job, i, attributes, reported, notes)
                jobs.append(job.start())
        return jobs

    def get_file(self, store: str, file_id: str) -> dict[str, Any]:
        rec = self.wb.file_record(store, file_id)
        if rec is None and (store, file_id) not in self.pending:
            raise _not_found("vector store file", file_id)
        return self.file_status(store, rec, file_id)

    def store_files(self, store: str) -> list[dict[str, Any]]:
        recs = {r.file_id: r for r in self.wb.file_records(store)}
        out = [self.file_status(store, r) for r in recs.values()]
        out += [self.file_status(store, None, fid) for (s, fid) in list(self.pending)
                if s == store and fid not in recs]
        return out

    def batch_object(self, b: _Batch) -> dict[str, Any]:
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

    def batch(self, store: str, batch_id: str) -> _Batch:
        b = self.batches.get(batch_id) if _BATCH_ID.fullmatch(batch_id or "") else None
        if b is None or b.store != store:
            raise _not_found("file batch", batch_id)
        return b

    # -- search ------------------------------------------------------------------------------------------
    @staticmethod
    def result(hit: Hit) -> dict[str, Any]:
        attrs: dict[str, Any] = from_payload(hit.metadata)
        attrs.update(page=hit.page, heading=hit.heading, char_start=hit.char_start, char_end=hit.char_end,
                     chunk_index=hit.chunk_index)
        return {"file_id": hit.file_id, "filename": hit.file_name, "score": round(float(hit.score), 6),
                "attributes": attrs, "content": [{"type": "text", "text": hit.text}]}


def _error_code(message: str) -> str:
    low = message.lower()
    if "not a supported" in low or "unsupported" in low or "legacy" in low or "save it as" in low:
        return "unsupported_file"
    if "unexpected error" in low or "interrupted" in low:
        return "server_error"
    return "invalid_file"


def _body(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        raise _bad("The request body must be a JSON object.")
    return payload


def _known(obj: Mapping[str, Any], allowed: Iterable[str], where: str | None = None) -> None:
    """Refuse a field not in ``allowed`` (as OpenAI does: a misspelt ``filter`` is not ignored)."""
    allowed = set(allowed)
    for key in obj:
        if key not in allowed:
            name = f"{where}.{key}" if where else str(key)
            raise _bad(f"Unrecognized request argument supplied: {name}. Known here: {', '.join(sorted(allowed))}.",
                       name)


def _object(value: Any, param: str, allowed: Iterable[str] | None = None) -> Mapping[str, Any] | None:
    """``value`` when it is an object or ``None`` (its fields checked against ``allowed``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _bad(f"{param} must be an object, got {type(value).__name__}.", param)
    if allowed is not None:
        _known(value, allowed, param)
    return value


def _strings(value: Any, param: str) -> list[str]:
    """``value`` as a list of strings (``None`` is empty)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f"{param} must be a list of strings.", param)
    return value


def _optional_str(value: Any, param: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise _bad(f"{param} must be a string, got {type(value).__name__}.", param)
    return value


def _check_name(name: Any, param: str = "name") -> str:
    """A store name as the API takes it: a non-blank string without control characters."""
    if not isinstance(name, str) or not name.strip():
        raise _bad(f"{param} must be a non-blank string.", param)
    bad = control_char(name)
    if bad:
        raise _bad(f"{param} must not contain control characters ({bad}).", param)
    return name


def _check_expires(value: Any) -> dict[str, Any] | None:
    """OpenAI's ``expires_after``: ``{"anchor": "last_active_at", "days": 1..365}`` or ``None``."""
    v = _object(value, "expires_after", ("anchor", "days"))
    if v is None:
        return None
    days = v.get("days")
    if v.get("anchor") != "last_active_at" or isinstance(days, bool) or not isinstance(days, int) \
            or not 1 <= days <= 365:
        raise _bad("expires_after must be {\"anchor\": \"last_active_at\", \"days\": 1 to 365}.", "expires_after")
    return dict(v)


def attachment_header(name: str) -> str:
    """``Content-Disposition: attachment`` for a file called ``name`` (RFC 6266): an ASCII
    ``filename`` (other characters as ``_``) and, when that differs, ``filename*`` in UTF-8 (RFC 5987)."""
    plain = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "_" for c in name) or "file"
    value = f'attachment; filename="{plain}"'
    if plain != name:
        value += "; filename*=UTF-8''" + quote(name.encode("utf-8", "replace"), safe="")
    return value


async def _json(request: Request, allowed: Iterable[str] | None = None) -> dict[str, Any]:
    """The request's JSON object (``{}`` for no body), its fields checked against ``allowed``."""
    raw = await request.body()
    if not raw:
        return {}
    try:
        body = _body(parse_json(raw))
    except ValueError as exc:
        raise _bad(str(exc)) from None
    if allowed is not None:
        _known(body, allowed)
    return body


def create_app(wb: Workbench, *, api_key: str | None = None, chat: Any = None) -> FastAPI:
    """The FastAPI application over ``wb`` (``/openapi.json``; the page ``/docs`` with ``api.docs``).

    Args:
        wb: the workbench (thread-safe; requests run in worker threads).
        api_key: when set, every request needs ``Authorization: Bearer <api_key>``.
        chat: a :class:`~knowledge.chat.ChatService` (default: one over ``wb``, made on first use).
    """
    from knowledge.server.chat_api import SESSION_HEADER

    api = KnowledgeApi(wb, chat)
    settings = wb.settings.api
    app = FastAPI(title="knowledge: OpenAI-compatible Files, Vector Stores and Chat",
                  description="A local drop-in for OpenAI's Files + Vector Stores API and chat completions,"
                              " over the knowledge workbench's stores.", version="1",
                  docs_url="/docs" if settings.docs else None, redoc_url=None)
    app.state.api = api
    limit = wb.settings.ingest.max_file_bytes
    app.add_middleware(Guard, api_key=api_key, max_body=int(limit * 4 / 3) + 1_000_000,
                       allowed_hosts=settings.allowed_hosts, cors_origins=settings.cors_origins,
                       upload_paths=("/v1/files",), open_paths=("/docs", "/docs/oauth2-redirect") if settings.docs else (),
                       allow_headers=("Authorization", "Content-Type", SESSION_HEADER),
                       expose_headers=(SESSION_HEADER, "openai-poll-after-ms"))

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(KnowledgeError)
    async def _knowledge_error(request: Request, exc: KnowledgeError) -> JSONResponse:
        return _from_knowledge(exc).response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        param = ".".join(str(p) for p in first.get("loc", ())[1:]) or None
        return ApiError(400, f"{param or 'request'}: {first.get('msg', 'invalid request')}", param=param).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else None
        return ApiError(exc.status_code, str(exc.detail), code=code).response()

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:  # a bug: logged, not shown
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return ApiError(500, "The server failed on this request (an unexpected error; the server's log has the"
                             " details).", type="server_error", code="server_error").response()

    # -- files ----------------------------------------------------------------------------------------
    @app.post("/v1/files", tags=["files"], summary="Upload a file")
    def upload_file(file: UploadFile = File(...), purpose: str = Form(DEFAULT_PURPOSE)) -> dict:
        if purpose not in PURPOSES:
            raise _bad(f"purpose must be one of {', '.join(PURPOSES)}, got {purpose!r}.", "purpose")
        stored = wb.save_attachment(file.filename or "unnamed", file.content_type, file.file, max_bytes=limit,
                                     metadata={"purpose": purpose})
        return api.file_object(stored)

    @app.get("/v1/files", tags=["files"], summary="List files")
    def list_files(purpose: str | None = None, limit: int | None = None, after: str | None = None,
                   order: str | None = None) -> dict:
        files = [api.file_object(f) for f in api.visible_files()]
        if purpose:
            files = [f for f in files if f["purpose"] == purpose]
        return _page(files, limit if limit is not None else 100, after, None, order)

    @app.get("/v1/files/{file_id}", tags=["files"], summary="Retrieve a file")
    def get_file(file_id: str) -> dict:
        return api.file_object(api.stored(file_id))

    @app.get("/v1/files/{file_id}/content", tags=["files"], summary="The file's bytes")
    def file_content(file_id: str) -> StreamingResponse:
        f = api.stored(file_id)

        def chunks() -> Iterator[bytes]:
            with wb.read_file(f.id) as fh:
                while block := fh.read(1 << 20):
                    yield block

        # the bytes as a download, never as a page of this origin (an uploaded HTML file runs nothing)
        return StreamingResponse(chunks(), media_type="application/octet-stream",
                                 headers={"Content-Length": str(f.size), "Content-Disposition": attachment_header(f.name),
                                          "X-Content-Type-Options": "nosniff"})

    @app.delete("/v1/files/{file_id}", tags=["files"], summary="Delete a file (and its chunks in every store)")
    def delete_file(file_id: str) -> dict:
        f = api.stored(file_id)
        wb.delete_stored_file(f.id, from_stores=True)
        return {"id": f.id, "object": "file", "deleted": True}

    # -- vector stores ----------------------------------------------------------------------------------
    @app.post("/v1/vector_stores", tags=["vector stores"], summary="Create a vector store")
    async def create_store(request: Request) -> dict:
        body = await _json(request, ("name", "file_ids", "metadata", "expires_after", "chunking_strategy",
                                     "description", "template"))
        return await _in_thread(_create_store, body)

    def _create_store(body: dict) -> dict:
        # every check runs before the store is recorded: a refused create leaves nothing behind
        name = _check_name(body.get("name") or f"vs-{secrets.token_hex(6)}")
        if api.internal_store(name):
            raise _bad(f"The name {name!r} is taken by a chat session's own store; choose another.", "name")
        metadata = _check_metadata(body.get("metadata"))
        expires = _check_expires(body.get("expires_after"))
        description = _optional_str(body.get("description"), "description")
        template = _optional_str(body.get("template"), "template") or "default"  # beyond OpenAI
        strategy = _object(body.get("chunking_strategy"), "chunking_strategy")
        file_ids = _strings(body.get("file_ids"), "file_ids")
        api.template_for(name, strategy, template=template, save=False)
        for fid in file_ids:
            api.stored(fid)
        wb.create_store(name, template)
        meta = api.meta.get(name)
        api.meta.put(name, {**meta, "metadata": metadata or meta.get("metadata", {}), "expires_after": expires,
                            "chunking_strategy": strategy,
                            "description": description if description is not None else meta.get("description")})
        if file_ids:
            api.add_files(name, [(fid, None, None) for fid in file_ids], default_strategy=strategy)
        return api.store_object(name)

    @app.get("/v1/vector_stores", tags=["vector stores"], summary="List vector stores")
    def list_stores(limit: int | None = None, after: str | None = None, before: str | None = None,
                    order: str | None = None) -> dict:
        return _page([api.store_object(n) for n in wb.store_names()], limit, after, before, order)

    @app.get("/v1/vector_stores/{vs_id}", tags=["vector stores"], summary="Retrieve a vector store")
    def get_store(vs_id: str) -> dict:
        return api.store_object(api.store_name(vs_id))

    @app.post("/v1/vector_stores/{vs_id}", tags=["vector stores"], summary="Modify a vector store (metadata)")
    async def modify_store(vs_id: str, request: Request) -> dict:
        body = await _json(request, ("name", "metadata", "expires_after"))
        name = api.store_name(vs_id)
        if body.get("name") not in (None, name):
            raise _bad("Renaming a vector store is not supported here (its name is its identity).", "name")
        meta = api.meta.get(name)
        if "metadata" in body:
            meta["metadata"] = _check_metadata(body["metadata"])
        if "expires_after" in body:
            meta["expires_after"] = _check_expires(body["expires_after"])
        api.meta.put(name, meta)
        return await _in_thread(api.store_object, name)

    @app.delete("/v1/vector_stores/{vs_id}", tags=["vector stores"], summary="Delete a vector store")
    def delete_store(vs_id: str) -> dict:
        name = api.store_name(vs_id)
        for rec in wb.file_records(name):  # files uploaded through the Files API outlive the store
            f = wb.find_stored_file(rec.file_id)
            if f is not None and "purpose" in f.metadata:
                wb.delete_file(name, rec.file_id, keep_file=True)
        wb.delete_store(name)
        api.meta.put(name, None)
        return {"id": vs_id, "object": "vector_store.deleted", "deleted": True}

    # -- vector store files --------------------------------------------------------------------------------
    @app.post("/v1/vector_stores/{vs_id}/files", tags=["vector store files"], summary="Add a file (ingested in the background)")
    async def add_file(vs_id: str, request: Request) -> JSONResponse:
        body = await _json(request, ("file_id", "attributes", "chunking_strategy"))
        name = api.store_name(vs_id)
        fid = body.get("file_id")
        if not isinstance(fid, str):
            raise _bad("file_id is required.", "file_id")
        strategy = _object(body.get("chunking_strategy"), "chunking_strategy") or api.meta.get(name).get("chunking_strategy")
        await _in_thread(api.add_files, name, [(fid, body.get("attributes"), strategy)])
        return _polled(await _in_thread(api.get_file, name, fid))

    @app.get("/v1/vector_stores/{vs_id}/files", tags=["vector store files"], summary="List a store's files")
    def list_store_files(vs_id: str, limit: int | None = None, after: str | None = None, before: str | None = None,
                         order: str | None = None, filter: str | None = None) -> dict:
        name = api.store_name(vs_id)
        files = api.store_files(name)
        if filter is not None:
            if filter not in ("in_progress", "completed", "failed", "cancelled"):
                raise _bad("filter must be in_progress, completed, failed or cancelled.", "filter")
            files = [f for f in files if f["status"] == filter]
        return _page(files, limit, after, before, order)

    @app.get("/v1/vector_stores/{vs_id}/files/{file_id}", tags=["vector store files"], summary="A store's file")
    def get_store_file(vs_id: str, file_id: str) -> JSONResponse:
        return _polled(api.get_file(api.store_name(vs_id), file_id))

    @app.post("/v1/vector_stores/{vs_id}/files/{file_id}", tags=["vector store files"], summary="Update attributes")
    async def update_store_file(vs_id: str, file_id: str, request: Request) -> dict:
        body = await _json(request, ("attributes",))
        name = api.store_name(vs_id)
        attrs = body.get("attributes")
        try:
            checked = check_attributes(attrs)
        except InvalidArgument as exc:
            raise _bad(str(exc), "attributes") from None
        await _in_thread(wb.set_file_attributes, name, file_id, checked)
        return await _in_thread(api.get_file, name, file_id)

    @app.get("/v1/vector_stores/{vs_id}/files/{file_id}/content", tags=["vector store files"],
             summary="The file's parsed chunks")
    def store_file_content(vs_id: str, file_id: str) -> dict:
        name = api.store_name(vs_id)
        api.get_file(name, file_id)
        chunks = wb.vector_store(name).chunks(file_id)
        return {"object": "vector_store.file_content.page", "has_more": False, "next_page": None,
                "data": [{"type": "text", "text": h.text} for h in chunks]}

    @app.delete("/v1/vector_stores/{vs_id}/files/{file_id}", tags=["vector store files"],
                summary="Remove a file from the store (the file itself stays)")
    def remove_store_file(vs_id: str, file_id: str) -> dict:
        name = api.store_name(vs_id)
        p = api.pending.get((name, file_id))
        if wb.file_record(name, file_id) is None and p is None:
            raise _not_found("vector store file", file_id)
        if p is not None and p.running:
            if len(p.job.files) == 1:  # its own job: stop it (the store stays as it was)
                p.job.cancel()
            p.job.wait(600)  # a batch's job goes on for the other files; this one is removed after
        api.pending.pop((name, file_id), None)
        if wb.file_record(name, file_id) is not None:
            wb.delete_file(name, file_id, keep_file=True)
        return {"id": file_id, "object": "vector_store.file.deleted", "deleted": True}

    # -- file batches ------------------------------------------------------------------------------------
    @app.post("/v1/vector_stores/{vs_id}/file_batches", tags=["vector store files"], summary="Add many files")
    async def create_batch(vs_id: str, request: Request) -> JSONResponse:
        body = await _json(request, ("file_ids", "files", "attributes", "chunking_strategy"))
        name = api.store_name(vs_id)
        entries: list[tuple[str, Any, Any]] = [(fid, None, None) for fid in _strings(body.get("file_ids"), "file_ids")]
        files = body.get("files") or []
        if not isinstance(files, list):
            raise _bad("files must be a list of {file_id, attributes, chunking_strategy} objects.", "files")
        for f in files:
            if not isinstance(f, Mapping) or not isinstance(f.get("file_id"), str):
                raise _bad("Each of files needs a file_id.", "files")
            _known(f, ("file_id", "attributes", "chunking_strategy"), "files[]")
            entries.append((f["file_id"], f.get("attributes"), f.get("chunking_strategy")))
        if not entries:
            raise _bad("Give file_ids (or files) to add.", "file_ids")
        strategy = _object(body.get("chunking_strategy"), "chunking_strategy") or api.meta.get(name).get("chunking_strategy")
        jobs = await _in_thread(api.add_files, name, entries, body.get("attributes"), strategy)
        b = _Batch("vsfb_" + secrets.token_hex(16), name, list(dict.fromkeys(e[0] for e in entries)), jobs,
                   int(time.time()))
        api.batches[b.id] = b
        return _polled(await _in_thread(api.batch_object, b))

    @app.get("/v1/vector_stores/{vs_id}/file_batches/{batch_id}", tags=["vector store files"], summary="A batch")
    def get_batch(vs_id: str, batch_id: str) -> JSONResponse:
        return _polled(api.batch_object(api.batch(api.store_name(vs_id), batch_id)))

    @app.post("/v1/vector_stores/{vs_id}/file_batches/{batch_id}/cancel", tags=["vector store files"],
              summary="Cancel a batch")
    def cancel_batch(vs_id: str, batch_id: str) -> dict:
        b = api.batch(api.store_name(vs_id), batch_id)
        b.cancelled = True
        for job in b.jobs:
            job.cancel()
        for job in b.jobs:
            job.wait(60)
        return api.batch_object(b)

    @app.get("/v1/vector_stores/{vs_id}/file_batches/{batch_id}/files", tags=["vector store files"],
             summary="The batch's files")
    def batch_files(vs_id: str, batch_id: str, limit: int | None = None, after: str | None = None,
                    before: str | None = None, order: str | None = None, filter: str | None = None) -> dict:
        b = api.batch(api.store_name(vs_id), batch_id)
        files = []
        for fid in b.file_ids:
            try:
                files.append(api.get_file(b.store, fid))
            except ApiError:
                continue
        if filter is not None:
            files = [f for f in files if f["status"] == filter]
        return _page(files, limit, after, before, order)

    # -- search -----------------------------------------------------------------------------------------
    @app.post("/v1/vector_stores/{vs_id}/search", tags=["search"], summary="Search a vector store")
    async def search(vs_id: str, request: Request) -> dict:
        body = await _json(request, ("query", "max_num_results", "filters", "ranking_options", "rewrite_query",
                                     "mode"))
        return await _in_thread(_search, vs_id, body)

    def _search(vs_id: str, body: dict) -> dict:
        name = api.store_name(vs_id)
        query = body.get("query")
        if isinstance(query, list) and all(isinstance(q, str) for q in query):
            query = " ".join(query)
        if not isinstance(query, str) or not query.strip():
            raise _bad("query must be a non-blank string (or a list of strings).", "query")
        k = body.get("max_num_results", 10)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
            raise _bad(f"max_num_results must be an integer from 1 to 50, got {k!r}.", "max_num_results")
        try:
            predicate = compile_filter(body["filters"]) if body.get("filters") is not None else None
        except InvalidArgument as exc:
            raise _bad(str(exc), "filters") from None
        ranking = _object(body.get("ranking_options"), "ranking_options", ("ranker", "score_threshold")) or {}
        threshold = ranking.get("score_threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
            raise _bad("ranking_options.score_threshold must be a number.", "ranking_options")
        _optional_str(ranking.get("ranker"), "ranking_options.ranker")
        if not isinstance(body.get("rewrite_query", False), bool):
            raise _bad("rewrite_query must be true or false.", "rewrite_query")
        mode = _optional_str(body.get("mode"), "mode")  # beyond OpenAI: hybrid (default), vector, lexical
        hits = filtered_search(wb, name, query, k, predicate, score_threshold=threshold, mode=mode)
        out = {"object": "vector_store.search_results.page", "search_query": query,
               "data": [api.result(h) for h in hits], "has_more": False, "next_page": None}
        if body.get("rewrite_query"):
            out["notes"] = ["rewrite_query is accepted and ignored here: the query was searched as given."]
        return out

    # -- chat -----------------------------------------------------------------------------------------------
    from knowledge.server.chat_api import add_chat_routes

    add_chat_routes(app, api)
    return app


def _polled(obj: dict[str, Any]) -> JSONResponse:
    """A JSON response telling the ``openai`` package's ``*_and_poll`` helpers to poll again soon."""
    return JSONResponse(obj, headers={"openai-poll-after-ms": POLL_AFTER_MS})


async def _in_thread(fn: Any, *args: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(fn, *args)


def serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, wb: Workbench | None = None,
          log_level: str = "info") -> None:
    """Run the API with uvicorn until interrupted (``python -m knowledge serve``).

    Raises:
        ConfigError: a non-loopback ``host`` without ``KNOWLEDGE_API_KEY``.
    """
    import uvicorn

    wb = wb or Workbench()
    key = wb.settings.api_key.get_secret_value() if wb.settings.api_key else None
    check_bind(host, key)
    try:
        uvicorn.run(create_app(wb, api_key=key), host=host, port=port, log_level=log_level)
    finally:
        wb.close()


__all__ = ["ApiError", "DEFAULT_PORT", "attachment_header", "check_bind", "create_app", "serve", "vector_store_id"]
