"""The state behind the REST routes and the OpenAI objects they answer with.

:class:`KnowledgeApi` holds the workbench and the chat service (made on first use), and shapes
OpenAI's objects from the catalog's rows: ``file``, ``vector_store``, ``vector_store.file``,
``vector_store.files_batch`` and a search result. It is ``app.state.api``; a route gets it as a
parameter typed :data:`Api`. Ids: a file is ``file-<32 hex>`` (the file store's id); a vector
store is ``vs_`` + 24 hex digits of the SHA-256 of its name (:func:`vector_store_id`); a batch
``vsfb_<32 hex>``. The stores' API fields (:class:`StoreMeta`), the files added through the API
and the file batches are rows of the catalog (:mod:`knowledge.catalog.rest`, over the ingest job
rows), so every API process on one catalog answers the same, and a restart loses nothing. How the
objects map onto the workbench: ``docs/api.md``. Once user accounts exist, a request's
:class:`KnowledgeApi` is :meth:`KnowledgeApi.for_actor` of the key's user: its ``wb`` is the
workbench's view for them (:meth:`~knowledge.workbench.Workbench.as_user`), which checks every
store method and writes the audit trail.

Errors: :class:`~knowledge.server.http.ApiError` (404 for an unknown id, 400 for a bad field).
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
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import Annotated, Any

from fastapi import Depends, Request
from pydantic import ValidationError

from knowledge.attributes import check_attributes, from_payload
from knowledge.catalog import DONE, FAILED, FileRecord, rest
from knowledge.catalog import jobs as queue
from knowledge.catalog.rest import AddedFile
from knowledge.chat import Chats, ChatService
from knowledge.errors import InvalidArgument
from knowledge.filestore.base import is_file_id
from knowledge.ingest.chunker import plan_chunking
from knowledge.outcomes import IngestResult, Outcome
from knowledge.people import Actor
from knowledge.server.bodies import MAX_CHUNK, MIN_CHUNK, ChunkingStrategy
from knowledge.server.filters import HIT_FIELDS
from knowledge.server.http import ApiError, bad, not_found, validation_error
from knowledge.service.jobs import IngestJob, row_result
from knowledge.service.templates import DEFAULT_TEMPLATE
from knowledge.service.web import Crawl, WebFailure, page_attributes
from knowledge.system import System
from knowledge.vectorstore.store import Hit
from knowledge.workbench import Workbench

log = logging.getLogger(__name__)

#: The purpose reported for files that did not come through the Files API (the app's uploads).
DEFAULT_PURPOSE = "assistants"
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
#: How many users' chat services an API process keeps (the least recently used go first).
USER_CHATS = 256
VS_ID = re.compile(r"vs_[0-9a-f]{24}")
BATCH_ID = re.compile(r"vsfb_[0-9a-f]{32}")
#: The attribute key (beyond OpenAI) that holds who may read a file: taken out of the ordinary
#: attributes and applied as the file's readers (:meth:`KnowledgeApi.readers_in`).
READERS = "readers"


def chunking_strategy(value: Any, param: str = "chunking_strategy") -> ChunkingStrategy | None:
    """``value`` (a request's or a store's kept ``chunking_strategy``: a JSON object, a
    :class:`~knowledge.server.bodies.ChunkingStrategy` or ``None``) as the model.

    Raises:
        ApiError: 400 naming the field (``param`` and its path) when the object is not one.
    """
    if value is None or isinstance(value, ChunkingStrategy):
        return value
    try:
        return ChunkingStrategy.model_validate(value)
    except ValidationError as exc:
        raise validation_error([{**e, "loc": (param, *e["loc"])} for e in exc.errors()], skip=0) from None


def vector_store_id(name: str) -> str:
    """The API id of the store ``name``: ``vs_`` + 24 hex digits of the SHA-256 of the name."""
    return "vs_" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:24]


def ts(dt: Any) -> int:
    """A datetime as OpenAI's ``created_at`` (Unix seconds); ``None`` is now."""
    return int(dt.timestamp()) if dt is not None else int(time.time())


@dataclass
class Batch:
    """A file batch (``vsfb_...``): its store, its distinct files in order, the ingest batches it
    was split into (one per distinct attributes + chunking), and whether a cancel was asked."""

    id: str
    store: str
    file_ids: list[str]
    batch_ids: list[str]
    created_at: int
    cancelled: bool = False


@dataclass
class Pending:
    """A file added to a store through the API (:class:`~knowledge.catalog.rest.AddedFile`, its
    ingest job's row): while it is being added, and after, for what its record does not hold (a
    duplicate's result, the chunking asked for and its notes)."""

    added: AddedFile

    @property
    def running(self) -> bool:
        """The file has no result yet (waiting or being ingested)."""
        return self.added.running

    @property
    def result(self) -> IngestResult | None:
        """The file's result once its job ended (an interrupted job: a failure that says so)."""
        a = self.added
        return row_result(a.name, a.status, a.result, a.reason)

    @property
    def attributes(self) -> dict[str, Any]:
        return dict(self.added.options.get("attributes") or {})

    @property
    def readers(self) -> tuple[str, ...] | None:
        """The readers the file was queued with (``submit_batch(readers=)``), ``None``: not restricted."""
        who = self.added.options.get("readers")
        return tuple(who) if who is not None else None

    @property
    def chunking(self) -> dict[str, Any] | None:
        return self.added.options.get("chunking_strategy")

    @property
    def notes(self) -> list[str]:
        return list(self.added.options.get("chunking_notes") or [])

    @property
    def created_at(self) -> int:
        return ts(self.added.created)


class StoreMeta:
    """Each store's API ``metadata``, ``expires_after``, ``chunking_strategy`` and ``description``,
    in the catalog (``api_vector_stores``: every process on the catalog reads the same). A
    ``<data>/api/vector_stores.json`` of an earlier version is imported once (:meth:`import_file`)."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog

    def get(self, store: str) -> dict[str, Any]:
        return rest.store_meta(self.catalog, store)

    def put(self, store: str, value: dict[str, Any] | None) -> None:
        rest.put_store_meta(self.catalog, store, value)

    def import_file(self, path: Path) -> int:
        """Bring the stores' fields of ``path`` (the JSON file earlier versions kept) into the
        catalog, for the stores the catalog has none for, then rename the file
        ``vector_stores.json.imported`` (kept, not read again). Returns how many stores were
        imported; an unreadable file is left as it is (logged)."""
        if not path.is_file():
            return 0
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("%s could not be read (%s); its stores' API metadata is not imported", path, exc)
            return 0
        entries = (
            {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, Mapping)}
            if isinstance(data, Mapping)
            else {}
        )
        added = rest.import_store_meta(self.catalog, entries)
        try:
            os.replace(path, path.with_name(path.name + ".imported"))
        except OSError as exc:  # imported: a second import changes nothing (the catalog's values win)
            log.warning("%s was imported but could not be renamed (%s)", path, exc)
        return added


class ApiState:
    """What every request of one API shares, built once by :func:`~knowledge.server.app.create_app`:
    the system (its catalog keeps the REST bookkeeping -- idempotency keys, the files being added,
    the file batches; its job registry), the stores' API fields (:class:`StoreMeta`), the chat state
    (:class:`~knowledge.chat.Chats`) and each person's chat service, kept for their next requests
    (at most :data:`USER_CHATS`, the least recently used dropped first). Thread-safe.

    Args:
        system: the :class:`~knowledge.system.System` the API is served over.
        chats: the shared chat state (default: one built here over ``system``).
    """

    def __init__(self, system: System, chats: Chats | None = None) -> None:
        self.system = system
        self.chats = chats if chats is not None else Chats(system)
        self.meta = StoreMeta(system.catalog)
        self.meta.import_file(system.settings.data_root / "api" / "vector_stores.json")
        self._user_chats: OrderedDict[Actor, ChatService] = OrderedDict()  # the most recently used last
        self._lock = threading.Lock()
        #: Held while a request submits its batches and records them (one request's at a time).
        self.lock = threading.RLock()

    def chat_for(self, wb: Workbench) -> ChatService:
        """The chat service of ``wb``'s actor (as read now: a changed role is another actor): made
        on their first request, kept for the next ones."""
        with self._lock:
            chat = self._user_chats.pop(wb.actor, None)
            if chat is None:
                chat = self.chats.service(wb)
            self._user_chats[wb.actor] = chat
            while len(self._user_chats) > USER_CHATS:
                self._user_chats.popitem(last=False)
            return chat


class KnowledgeApi:
    """The state behind the routes for one person: the shared :class:`ApiState` and their
    workbench. Everything else -- the stores' API fields, the files being added, the file batches --
    is rows of the catalog (:mod:`knowledge.catalog.rest` over the ingest job rows), so every
    process on one catalog answers the same, and a restart loses nothing.

    Args:
        state: what every request shares (:class:`ApiState`).
        wb: the workbench the requests act through (the local admin's, or a user's:
            :meth:`for_actor`), over ``state``'s system.
    """

    def __init__(self, state: ApiState, wb: Workbench) -> None:
        self.state = state
        #: The system (its catalog and job registry: the REST bookkeeping only).
        self.system = state.system
        self.meta = state.meta
        #: The workbench the requests act through: every store method checked for its actor.
        self.wb = wb
        self._chat: ChatService | None = None

    @classmethod
    def serving(cls, system: System, chats: Chats | None = None) -> KnowledgeApi:
        """The API over ``system`` (new shared state: :class:`ApiState`), acting as the local admin."""
        return cls(ApiState(system, chats), Workbench(system))

    def for_actor(self, actor: Actor) -> KnowledgeApi:
        """The API acting for ``actor``: built over the same shared state, with the workbench for
        them (every store method checked, writes audited in their name) and their chat service
        (one per actor as read now, kept for the next requests, so a session's turns still run one
        at a time). Cheap: one per request."""
        return KnowledgeApi(self.state, self.wb.as_user(actor))

    @property
    def actor(self) -> Actor:
        """Who this API acts for (:attr:`Workbench.actor`; ``LOCAL_ADMIN`` without accounts)."""
        return self.wb.actor

    @property
    def chat(self) -> ChatService:
        """This actor's chat service (:meth:`ApiState.chat_for`)."""
        if self._chat is None:
            self._chat = self.state.chat_for(self.wb)
        return self._chat

    # -- files -------------------------------------------------------------------------------------
    def file_object(self, f: Any) -> dict[str, Any]:
        return {
            "id": f.id,
            "object": "file",
            "bytes": f.size,
            "created_at": ts(f.created),
            "filename": f.name,
            "purpose": f.metadata.get("purpose", DEFAULT_PURPOSE),
            "status": "processed",
            "status_details": None,
            "expires_at": None,
        }

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
        pending = self.pending(name)
        counts = {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0}
        for fid, r in records.items():
            running = fid in pending and pending[fid].running
            status = (
                "in_progress"
                if running or r.status not in (DONE, FAILED)
                else "completed"
                if r.status == DONE
                else "cancelled"
                if r.reason == "cancelled"
                else "failed"
            )
            counts[status] += 1
        counts["in_progress"] += sum(1 for fid, p in pending.items() if fid not in records and p.running)
        counts["total"] = sum(counts.values())
        meta = self.meta.get(name)
        used = sum(r.size or 0 for r in records.values() if r.status == DONE)
        return {
            "id": vector_store_id(name),
            "object": "vector_store",
            "name": name,
            "created_at": ts(rec.created),
            "last_active_at": ts(rec.updated),
            "usage_bytes": used,
            "file_counts": counts,
            "status": "in_progress" if counts["in_progress"] else "completed",
            "expires_after": meta.get("expires_after"),
            "expires_at": None,
            "metadata": meta.get("metadata", {}),
            "template": rec.template,
            "embedding_model": rec.embedding_model,
        }

    def template_for(
        self,
        name: str,
        strategy: ChunkingStrategy | Mapping[str, Any] | None,
        *,
        template: str | None = None,
        save: bool = True,
    ) -> tuple[str | None, dict[str, Any], list[str]]:
        """``(template name or None for the store's own, chunking_strategy as reported, notes)`` for
        OpenAI's ``chunking_strategy`` (``auto`` / ``static``; a JSON object is checked as a
        :class:`~knowledge.server.bodies.ChunkingStrategy`). ``template``: the template of a store
        not created yet; without ``save`` a static strategy's template is only checked, not saved.

        Raises:
            ApiError: 400 a bad ``chunking_strategy`` (the field named in ``param``).
        """
        rec = self.wb.store_record(name)
        base = self.wb.template(rec.template if rec else template or DEFAULT_TEMPLATE)
        chosen = chunking_strategy(strategy)
        if chosen is None or chosen.static is None or chosen.type == "auto":
            size, overlap, tpl = base.max_chunk_size_tokens, base.chunk_overlap_tokens, None
        else:
            size, overlap = chosen.static.max_chunk_size_tokens, chosen.static.chunk_overlap_tokens
            tpl = f"{base.name}-static-{size}-{overlap}"
            if save and tpl not in self.wb.template_names():  # derived from a template: not an admin's act
                self.wb.derive_template(
                    base.model_copy(update={"name": tpl, "max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap})
                )
        plan = plan_chunking(self.wb.embedder(base.embedding_model), size, overlap)
        reported = {
            "type": "static",
            "static": {"max_chunk_size_tokens": plan.max_tokens, "chunk_overlap_tokens": plan.overlap_tokens},
        }
        return tpl, reported, list(plan.notes)

    # -- vector store files ---------------------------------------------------------------------------
    def pending(self, store: str, file_ids: list[str] | None = None) -> dict[str, Pending]:
        """``{file_id: Pending}`` of the files added to ``store`` through the API (of ``file_ids``
        only, when given), from any process: one read of the catalog. Only those the caller may
        read: not a file of the store they may not read (:meth:`Workbench.unreadable_files
        <knowledge.workbench.Workbench.unreadable_files>`), nor one queued with readers that leave
        them out (:meth:`Workbench.reads <knowledge.workbench.Workbench.reads>`; a file whose
        record they may read is then answered from its record alone)."""
        added = rest.added_files(self.system.catalog, store, file_ids)
        if not added:
            return {}
        unreadable = self.wb.unreadable_files(store)
        reads: dict[tuple[str, ...], bool] = {}
        out = {}
        for fid, a in added.items():
            p = Pending(a)
            who = p.readers
            if fid in unreadable or (who is not None and not reads.setdefault(who, self.wb.reads(store, who))):
                continue
            out[fid] = p
        return out

    def hidden(self, store: str, file_ids: list[str]) -> set[str]:
        """The ``file_ids`` of ``store`` the caller may not read: the store's files
        (:meth:`Workbench.unreadable_files <knowledge.workbench.Workbench.unreadable_files>`) and
        files being added with readers that leave them out. A file batch's files and counts leave
        them out, as if the batch never had them."""
        unreadable = self.wb.unreadable_files(store)
        out = {fid for fid in file_ids if fid in unreadable}
        shown = self.pending(store, file_ids)
        for fid in rest.added_files(self.system.catalog, store, file_ids):
            if fid not in shown and fid not in out and self.wb.file_record(store, fid) is None:
                out.add(fid)
        return out

    def readers_in(self, attributes: Any, param: str = "attributes") -> tuple[Any, tuple[str, ...] | EllipsisType | None]:
        """``(attributes without READERS, readers)`` of a request's ``attributes``: the reserved key
        :data:`READERS` (``"group:hr, user:ana"``, or ``"everyone"``) checked by
        :meth:`Workbench.check_readers <knowledge.workbench.Workbench.check_readers>` -- ``None``
        for everyone who may read the store, else the principals, each user's name as its account
        spells it -- or ``...`` when the key is not given. ``attributes`` that are no object are
        returned as they are (:func:`~knowledge.attributes.check_attributes` words them).

        Raises:
            ApiError: 400 naming ``<param>.readers``: not a string, a reader badly written, an
                unknown user or group.
        """
        if not isinstance(attributes, Mapping) or READERS not in attributes:
            return attributes, ...
        value = attributes[READERS]
        field = f"{param}.{READERS}"
        if not isinstance(value, str):
            raise bad(
                f"{field} must be a string such as 'group:hr, user:ana' or 'everyone', got {json.dumps(value)}.", field
            )
        try:
            readers = self.wb.check_readers(value)
        except InvalidArgument as exc:
            raise bad(f"{field}: {exc}", field) from None
        return {k: v for k, v in attributes.items() if k != READERS}, readers

    def file_status(
        self, store: str, rec: FileRecord | None, file_id: str | None = None, p: Pending | EllipsisType | None = ...
    ) -> dict[str, Any]:
        """The ``vector_store.file`` object of ``file_id`` (or ``rec``'s file) in ``store``; ``p``:
        its :class:`Pending` when the caller read it already (``None``: not added through the API).

        Raises:
            ApiError: 404, neither a record nor a file being added.
        """
        fid = rec.file_id if rec is not None else str(file_id)
        if p is ...:
            p = self.pending(store, [fid]).get(fid)
        status, last_error = self.status_of(rec, p, fid)
        attributes = self.wb.file_attributes(store, fid) if status == "completed" else {} if p is None else p.attributes
        attributes.pop(READERS, None)  # reserved: the file's readers, from its record (or its job while queued)
        readers = rec.readers if rec is not None else None
        if readers is None and p is not None and p.running:
            readers = p.readers
        if readers is not None:
            attributes[READERS] = ", ".join(readers)
        if rec is not None:
            size = rec.size
        else:
            found = self.wb.find_stored_file(fid)
            size = found.size if found is not None else 0
        chunking = (p.chunking if p is not None else None) or self.template_for(store, None)[1]
        out: dict[str, Any] = {
            "id": fid,
            "object": "vector_store.file",
            "usage_bytes": size or 0,
            "created_at": ts(rec.created) if rec is not None and rec.created else (p.created_at if p else 0),
            "vector_store_id": vector_store_id(store),
            "status": status,
            "last_error": last_error,
            "attributes": attributes,
            "chunking_strategy": chunking,
        }
        if p is not None and p.notes:
            out["chunking_notes"] = p.notes
        if rec is not None and rec.status == DONE:
            out["chunks"], out["pages"], out["warnings"] = rec.chunks, rec.pages, rec.warnings
        elif rec is None and status == "completed" and p is not None and (joined := p.result) is not None:
            # the same bytes were in the store already (or being added) as another file: that one
            # holds them (never named, nor its chunks, when the caller may not read it)
            joined = self.wb.readable_result(store, joined)
            out["message"] = joined.message
            if joined.file_id is not None:
                out["duplicate_of"] = joined.file_id
                out["chunks"], out["pages"], out["warnings"] = joined.chunks, joined.pages, []
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
        if result is not None and result.outcome in (Outcome.DUPLICATE, Outcome.UNCHANGED):
            return "completed", None  # its bytes are in the store as another file (duplicate_of): not indexed twice
        if result is not None and result.outcome == Outcome.INDEXED:  # its record went since: never its success text
            return "failed", {
                "code": "invalid_file",
                "message": f"{result.name} was indexed, then replaced in the store by a later file under the same name.",
            }
        message = result.message if result is not None else "not ingested"
        return "failed", {"code": error_code(message), "message": message}

    def add_files(
        self, store: str, entries: list[tuple[str, Any, Any]], default_attrs: Any = None, default_strategy: Any = None
    ) -> list[IngestJob]:
        """Start jobs for ``(file_id, attributes, chunking_strategy)`` entries (``None`` takes the
        defaults); one ingest batch per distinct attributes + readers + strategy, files in the given
        order, each recorded in the catalog (``api_store_files``) with its batch's attributes,
        chunking and notes. The attribute :data:`READERS` (:meth:`readers_in`) is the file's readers:
        a file's own, else the batch's (``default_attrs``'), applied before its first chunk is
        written (``submit_batch(readers=)``); without it a file inherits the store's sharing (a new
        version of a name keeps the readers of the one it replaces).

        Raises:
            StoreNotFound, PermissionDenied: the caller may not add files to ``store`` (before anything starts).
            ApiError: 400 bad attributes or readers, 404 an unknown file (before anything starts).
        """
        self.wb.authorize(store, "write")
        default_attrs, default_readers = self.readers_in(default_attrs)
        groups: dict[str, tuple[str | None, dict, tuple[str, ...] | None, dict, list[str], list[Any]]] = {}
        chosen: dict[str, Any] = {}
        for fid, given, strategy in entries:  # everything is checked before anything starts
            f = self.stored(fid)
            attrs, own_readers = self.readers_in(given)
            readers = default_readers if own_readers is ... else own_readers
            try:
                attributes = check_attributes(default_attrs if attrs is None else attrs)
            except InvalidArgument as exc:
                raise bad(str(exc), "attributes") from None
            clash = sorted(set(attributes) & set(HIT_FIELDS))
            if clash:
                raise bad(
                    f"Attribute names {', '.join(clash)} are reserved (each search result reports them).", "attributes"
                )
            picked = default_strategy if strategy is None else strategy
            tpl, reported, notes = self.template_for(store, picked, save=False)
            chosen[json.dumps(picked, sort_keys=True)] = picked
            who = None if readers is ... else readers
            key = json.dumps([tpl, attributes, who], sort_keys=True)
            groups.setdefault(key, (tpl, attributes, who, reported, notes, []))[5].append(f)
        for picked in chosen.values():
            self.template_for(store, picked)  # a static strategy's template, saved now
        jobs = []
        with self.state.lock:
            for tpl, attributes, who, reported, notes, files in groups.values():
                job = self.wb.submit_batch(
                    store,
                    [(f.name, f) for f in files],
                    template=tpl,
                    attributes=attributes,
                    options={"api": True, "chunking_strategy": reported, "chunking_notes": notes},
                    readers=who,
                )
                rest.add_files(self.system.catalog, store, [(f.id, str(job.batch_id), i) for i, f in enumerate(files)])
                jobs.append(job)
        return jobs

    def get_file(self, store: str, file_id: str) -> dict[str, Any]:
        rec = self.wb.file_record(store, file_id)
        p = self.pending(store, [file_id]).get(file_id)
        if rec is None and p is None:
            raise not_found("vector store file", file_id)
        return self.file_status(store, rec, file_id, p)

    def added_object(self, store: str, file_id: str) -> dict[str, Any]:
        """The ``vector_store.file`` object of ``file_id`` just added to ``store`` (:meth:`get_file`),
        or, when its readers leave the caller out (they may not read it from now on), the object as
        it was queued: ``in_progress``, with the attributes and readers they sent.

        Raises:
            ApiError: 404, the store has no such file being added (nor one the caller may read).
        """
        try:
            return self.get_file(store, file_id)
        except ApiError as exc:
            if exc.status != 404:
                raise
            added = rest.added_files(self.system.catalog, store, [file_id]).get(file_id)
            if added is None:
                raise
        p = Pending(added)  # the caller's own add: what they sent, nothing of the store
        attributes = {k: v for k, v in p.attributes.items() if k != READERS}
        if p.readers is not None:
            attributes[READERS] = ", ".join(p.readers)
        return {
            "id": file_id,
            "object": "vector_store.file",
            "usage_bytes": 0,
            "created_at": p.created_at,
            "vector_store_id": vector_store_id(store),
            "status": "in_progress",
            "last_error": None,
            "attributes": attributes,
            "chunking_strategy": p.chunking or self.template_for(store, None)[1],
        }

    def update_file(self, store: str, file_id: str, attributes: Any) -> dict[str, Any]:
        """Replace the attributes of ``file_id`` in ``store`` and, when :data:`READERS` is among
        them (:meth:`readers_in`), its readers (``Workbench.set_file_readers``); without it the
        readers stay as they are. Returns the file's object, or, when its new readers leave the
        caller out, the object as it was with the new attributes and readers.

        Raises:
            ApiError: 404 no such file (or one the caller may not read), or one not indexed yet;
                400 bad attributes or readers (nothing changed). PermissionDenied: read-only.
        """
        before = self.get_file(store, file_id)
        attrs, readers = self.readers_in(attributes)
        try:
            checked = check_attributes(attrs)
        except InvalidArgument as exc:
            raise bad(str(exc), "attributes") from None
        self.wb.set_file_attributes(store, file_id, checked)
        if readers is not ...:
            self.wb.set_file_readers(store, file_id, readers)
        try:
            return self.get_file(store, file_id)
        except ApiError as exc:
            if exc.status != 404 or not isinstance(readers, tuple):
                raise
            return {**before, "attributes": {**checked, READERS: ", ".join(readers)}}

    def store_files(self, store: str) -> list[dict[str, Any]]:
        recs = {r.file_id: r for r in self.wb.file_records(store)}
        pending = self.pending(store)
        out = [self.file_status(store, r, None, pending.get(fid)) for fid, r in recs.items()]
        out += [self.file_status(store, None, fid, p) for fid, p in pending.items() if fid not in recs]
        return out

    def remove_file(self, store: str, file_id: str) -> None:
        """Remove ``file_id`` from ``store`` (the file itself stays). One being added in a job of its
        own is stopped first (the store stays as it was); one in a batch's job is removed once the
        job reached it (up to 600 s), the other files go on.

        Raises:
            ApiError: 404, the store has no such file. PermissionDenied: the caller may not change ``store``.
        """
        wb = self.wb
        wb.authorize(store, "write")
        p = self.pending(store, [file_id]).get(file_id)
        if wb.file_record(store, file_id) is None and p is None:
            raise not_found("vector store file", file_id)
        if p is not None and p.running:
            if p.added.jobs == 1:  # its own job: stop it
                self._ingest_job(p.added.batch_id).cancel()
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                now = self.pending(store, [file_id]).get(file_id)
                if now is None or not now.running:
                    break
                time.sleep(0.05)
        rest.forget_file(self.system.catalog, store, file_id)
        if wb.file_record(store, file_id) is not None:
            wb.delete_file(store, file_id, keep_file=True)

    def _ingest_job(self, batch_id: str) -> IngestJob:
        """The view of the ingest batch ``batch_id`` (started by any process)."""
        row, _, _ = queue.batch(self.system.catalog, batch_id)
        if row is None:
            raise not_found("file batch", batch_id)
        return IngestJob.attach(self.system.jobs, row)

    # -- file batches ------------------------------------------------------------------------------------
    def create_batch(
        self, store: str, entries: list[tuple[str, Any, Any]], default_attrs: Any = None, default_strategy: Any = None
    ) -> Batch:
        """A file batch of ``entries`` (as :meth:`add_files` takes them), recorded in the catalog."""
        jobs = self.add_files(store, entries, default_attrs, default_strategy)
        batch_id = "vsfb_" + secrets.token_hex(16)
        file_ids = list(dict.fromkeys(e[0] for e in entries))
        rest.add_file_batch(self.system.catalog, batch_id, store, file_ids, [str(j.batch_id) for j in jobs])
        return self.batch(store, batch_id)

    def add_web_pages(
        self,
        store: str,
        url: str,
        depth: int | None = 0,
        max_pages: int | None = None,
        attributes: Any = None,
        strategy: Any = None,
    ) -> tuple[Batch, list[dict[str, Any]]]:
        """Fetch the web page ``url`` (and its same-site links ``depth`` links away, at most
        ``max_pages``: :class:`~knowledge.service.web.Crawl`) now, and add each page to ``store`` as
        a file batch does: a file named by its URL with ``source_url`` among its ``attributes``
        (uploaded with purpose ``assistants``), ingested in the background. A page whose bytes the
        store holds already under its URL is not added again: the batch lists that file
        (``completed``). Returns the batch and one ``{"url", "status": "added"|"unchanged"|"failed",
        "file_id", "last_error"}`` per page tried.

        Raises:
            ApiError: 400 for a bad url, depth, max_pages or attributes, or when no page could be
                had (the reason of the first). PermissionDenied: the caller may not add files to ``store``.
        """
        self.wb.authorize(store, "write")  # before anything is fetched (the body's types: bodies.WebPages)
        attributes, readers = self.readers_in(attributes)
        try:
            attrs = check_attributes(attributes)
            crawl = Crawl(self.wb.settings, url, depth or 0, max_pages)
        except InvalidArgument as exc:
            raise bad(
                str(exc),
                "attributes"
                if "attribute" in str(exc)
                else "depth"
                if "depth" in str(exc)
                else "max_pages"
                if "max_pages" in str(exc)
                else "url",
            ) from None
        self.template_for(store, strategy, save=False)  # a bad chunking_strategy: before anything is fetched
        held = {(r.file_name, r.sha256): r.file_id for r in self.wb.file_records(store) if r.status == DONE}
        pages: list[dict[str, Any]] = []
        entries: list[tuple[str, Any, Any]] = []
        file_ids: list[str] = []
        for item in crawl:
            if isinstance(item, WebFailure):
                pages.append(
                    {
                        "url": item.url,
                        "status": "failed",
                        "file_id": None,
                        "last_error": {"code": "web_page_unavailable", "message": item.reason},
                    }
                )
                continue
            old = held.get((item.url, hashlib.sha256(item.data).hexdigest()))
            if old is not None:
                pages.append({"url": item.url, "status": "unchanged", "file_id": old, "last_error": None})
                file_ids.append(old)
                continue
            f = self.wb.save_attachment(
                item.url, item.content_type, item.data, metadata={"purpose": DEFAULT_PURPOSE, "source_url": item.url}
            )
            entries.append((f.id, page_attributes(item, attrs), None))
            pages.append({"url": item.url, "status": "added", "file_id": f.id, "last_error": None})
            file_ids.append(f.id)
        if not file_ids:
            first = pages[0] if pages else None
            raise ApiError(
                400,
                f"{url}: " + (first["last_error"]["message"] if first else "no page could be fetched."),
                param="url",
                code="web_page_unavailable",
            )
        batch_wide = None if readers is ... else {READERS: ", ".join(readers) if readers is not None else "everyone"}
        jobs = self.add_files(store, entries, batch_wide, strategy) if entries else []
        batch_id = "vsfb_" + secrets.token_hex(16)
        rest.add_file_batch(
            self.system.catalog, batch_id, store, list(dict.fromkeys(file_ids)), [str(j.batch_id) for j in jobs]
        )
        return self.batch(store, batch_id), pages

    def batch_object(self, b: Batch) -> dict[str, Any]:
        """The ``vector_store.files_batch`` object of ``b``: its status and counts, of the files the
        caller may read (:meth:`hidden`: the others are left out, as if the batch never had them)."""
        hidden = self.hidden(b.store, b.file_ids)
        counts = {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0}
        for f in self.batch_files(b, hidden):
            counts[f["status"]] += 1
        shown = sum(1 for fid in b.file_ids if fid not in hidden)
        counts["failed"] += shown - sum(counts.values())  # a file no longer in the store
        counts["total"] = shown
        status = (
            "in_progress"
            if counts["in_progress"]
            else "cancelled"
            if b.cancelled
            else "failed"
            if counts["failed"] and not counts["completed"]
            else "completed"
        )
        return {
            "id": b.id,
            "object": "vector_store.files_batch",
            "created_at": b.created_at,
            "vector_store_id": vector_store_id(b.store),
            "status": status,
            "file_counts": counts,
        }

    def batch_files(self, b: Batch, hidden: set[str] | None = None) -> list[dict[str, Any]]:
        """The ``vector_store.file`` objects of the batch's files still in its store, in order, but
        those the caller may not read (``hidden``, default :meth:`hidden`)."""
        hidden = self.hidden(b.store, b.file_ids) if hidden is None else hidden
        pending = self.pending(b.store, b.file_ids)
        out = []
        for fid in b.file_ids:
            if fid in hidden:
                continue
            rec = self.wb.file_record(b.store, fid)
            if rec is None and fid not in pending:
                continue
            out.append(self.file_status(b.store, rec, fid, pending.get(fid)))
        return out

    def batch(self, store: str, batch_id: str) -> Batch:
        """The file batch ``batch_id`` of ``store``, made by any process.

        Raises:
            ApiError: 404, no such batch in this store.
        """
        row = rest.file_batch(self.system.catalog, batch_id) if BATCH_ID.fullmatch(batch_id or "") else None
        if row is None or row.store != store:
            raise not_found("file batch", batch_id)
        return Batch(row.id, row.store, row.file_ids, row.batch_ids, ts(row.created), row.cancelled)

    def cancel_batch(self, b: Batch, timeout: float = 60.0) -> Batch:
        """Cancel the batch (from any process: the worker ingesting one of its files, in any process,
        stops at its next progress write or heartbeat) and wait up to ``timeout`` seconds for its jobs
        to end. Returns the batch as it is then.

        Raises:
            PermissionDenied: the caller may not change the batch's store.
        """
        self.wb.authorize(b.store, "write")
        self.wb.record("batch.cancel", store=b.store, target=b.id)
        views = [self._ingest_job(i) for i in b.batch_ids]
        for job in views:
            job.cancel()
        deadline = time.monotonic() + timeout
        for job in views:
            job.wait(max(0.0, deadline - time.monotonic()))
        return self.batch(b.store, b.id)

    # -- search ------------------------------------------------------------------------------------------
    @staticmethod
    def result(hit: Hit) -> dict[str, Any]:
        attrs: dict[str, Any] = from_payload(hit.metadata)
        attrs.update(
            page=hit.page,
            heading=hit.heading,
            char_start=hit.char_start,
            char_end=hit.char_end,
            chunk_index=hit.chunk_index,
            chunks=list(hit.chunks or (hit.chunk_index,)),
        )
        return {
            "file_id": hit.file_id,
            "filename": hit.file_name,
            "score": round(float(hit.score), 6),
            "attributes": attrs,
            "content": [{"type": "text", "text": hit.text}],
        }


def error_code(message: str) -> str:
    """The ``last_error.code`` of a failed file from its reason."""
    low = message.lower()
    if "not a supported" in low or "unsupported" in low or "legacy" in low or "save it as" in low:
        return "unsupported_file"
    if "unexpected error" in low or "interrupted" in low:
        return "server_error"
    return "invalid_file"


async def knowledge_api(request: Request) -> KnowledgeApi:
    """The :class:`KnowledgeApi` serving ``request``: the app's (``app.state.api``), or, when the
    request came with a user's key (``request.state.actor``, set by
    :class:`~knowledge.server.guard.Guard`), the app's acting for that user. Set per request here,
    explicitly (never a context variable: a sync endpoint runs in another thread)."""
    api: KnowledgeApi = request.app.state.api
    actor = getattr(request.state, "actor", None)
    return api if actor is None else api.for_actor(actor)


#: A route's parameter ``api: Api`` is the request's :class:`KnowledgeApi` (a FastAPI dependency).
Api = Annotated[KnowledgeApi, Depends(knowledge_api)]

__all__ = [
    "BATCH_ID",
    "DEFAULT_PURPOSE",
    "MAX_CHUNK",
    "MIN_CHUNK",
    "PURPOSES",
    "READERS",
    "USER_CHATS",
    "VS_ID",
    "Api",
    "ApiState",
    "Batch",
    "KnowledgeApi",
    "Pending",
    "StoreMeta",
    "error_code",
    "knowledge_api",
    "ts",
    "vector_store_id",
]
