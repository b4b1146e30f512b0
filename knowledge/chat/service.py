"""The chat engine: sessions, attachments, and one turn = the user's message plus the tool loop.

``Chats(system).service(workbench).send(session_id, text)`` stores the user's message (with the images and
PDFs attached since the last message as parts, and the attachment events in its metadata), then
asks the session's CHAT config: each round the :mod:`~knowledge.chat.mapper` renders the whole
history into a request, the provider answers, every call is recorded in the trace, and tool calls
(``vector_search`` and the other knowledge tools, ``view_attachment``) are run and their results
stored, until the model answers in text (at most :attr:`ChatService.MAX_ROUNDS` rounds; the last
round offers no tools).

Attaching (``attach``): an image is saved in the file store and, where OCR reads text in it, ingested
too (so ``vector_search`` finds its words); any other file is ingested into
the session's own vector store (``chat-<session id>``, created on the fly from the default
template), which activates ``vector_search`` for the session; an image or PDF also activates
``view_attachment`` and becomes a part of the next user message. Removing (``remove``) takes the
file's chunks out of the session's store (its bytes stay: earlier messages refer to them).
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from knowledge._names import without_refused
from knowledge.access import LocalFolders, chat_folders
from knowledge.catalog import DONE
from knowledge.chat.mapper import VIEW_ATTACHMENT_SCHEMA, MappedRequest, MapperContext, StoreBrief, build_request
from knowledge.chat.model import (
    ASSISTANT,
    ATTACHMENT,
    FILE,
    IMAGE,
    KIND_DOCUMENT,
    KIND_IMAGE,
    KIND_PDF,
    TEXT,
    TOOL,
    USER,
    Attachment,
    Message,
    Part,
    Session,
    sniff_kind,
)
from knowledge.chat.sources import cite, drop_unknown_markers, where_text
from knowledge.chat.store import ChatStore, SessionNotFound
from knowledge.errors import (
    FileNotFoundInStore,
    InvalidArgument,
    KnowledgeError,
    PathNotAllowed,
    QuotaExceeded,
    StoreNotFound,
    unexpected_problem,
)
from knowledge.ingest.isolated import ReadLimits, read_bounded
from knowledge.llm.config import LlmConfig, LlmUnavailable
from knowledge.llm.providers import ChatProvider, Completion, ToolCall, TurnContext, open_provider
from knowledge.outcomes import Outcome
from knowledge.system import System
from knowledge.text.answers import Embed, Picked
from knowledge.text.render import plain_text
from knowledge.tools.knowledge import READ_TOOLS, WRITE_TOOLS, KnowledgeTools, ToolResult, passage_key
from knowledge.vectorstore.base import check_where
from knowledge.workbench import Workbench

VECTOR_SEARCH, VIEW_ATTACHMENT = "vector_search", "view_attachment"
MAX_CITATIONS = 8
#: How many passages a search-first turn gives the model (``LlmConfig.search_first``).
SEARCH_FIRST_K = 5
#: What a search-first model is told, before the numbered passages.
SEARCH_FIRST_PROMPT = (
    "Answer the question below from the numbered passages only. Cite every passage you use"
    " with its number in square brackets, like [1]. If the passages do not answer the"
    " question, say so plainly. Do not cite a number that is not given."
)


class AttachFailed(KnowledgeError):
    """A file could not be attached to a chat (unreadable, too large, tools unavailable)."""


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool call of a turn and its result (``text`` as the model read it)."""

    name: str
    arguments: dict[str, Any]
    text: str
    ok: bool


@dataclass(frozen=True, slots=True)
class ChatReply:
    """The answer to one message: ``text`` (its ``[n]`` markers numbered as the citations), the
    ``citations`` -- the passages the answer cites or quotes (:func:`knowledge.chat.sources.cite`),
    in order of first use, each with ``n`` (its number in the text), file_id, file_name, page,
    chunk_index, chunks, heading, char span, text, score, store and source -- ``also_searched``
    (the turn's other passages, in the order found, at most :data:`MAX_CITATIONS`), the
    ``tool_runs`` in order, the config used, whether it is ``retrieval_only`` (the offline
    assistant), and the ``unknown_markers`` a search-first model wrote (dropped from ``text``)."""

    session_id: str
    text: str
    citations: list[dict[str, Any]]
    tool_runs: list[ToolRun]
    config: str
    retrieval_only: bool
    dropped_turns: int = 0
    also_searched: list[dict[str, Any]] = field(default_factory=list)
    #: Marker numbers the model wrote that point to no passage it was given (removed from ``text``).
    unknown_markers: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Turn:
    question: str
    hits: list[dict[str, Any]] = field(default_factory=list)
    runs: list[ToolRun] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # store label -> why it could not be searched


log = logging.getLogger(__name__)

#: How many attached files' extracted texts a chat service keeps (the mapper re-reads them each round).
TEXT_CACHE = 32

#: How the model and the user name a session's own attachment store (never ``chat-<id>``).
ATTACHMENTS = "attachments"


@dataclass(frozen=True, slots=True)
class Knowledge:
    """What a session searches: ``stores`` (the user's stores it chose, all existing), whether its
    own attachment store holds indexed files (``attachments``), and ``dropped``: chosen stores that
    no longer exist (removed from the session when this was computed)."""

    stores: list[str]
    attachments: bool
    attachment_store: str
    dropped: list[str] = field(default_factory=list)

    @property
    def searchable(self) -> list[str]:
        """The store names to search, the chosen ones first, then the attachment store."""
        return self.stores + ([self.attachment_store] if self.attachments else [])

    def label(self, store: str) -> str:
        """How a store is named to the model and in citations."""
        return ATTACHMENTS if store == self.attachment_store else store


class Turn:
    """One user turn run by :meth:`ChatService.start_turn`: attach, then send, in a daemon thread."""

    def __init__(
        self, chat: ChatService, sid: str, files: list[tuple[bytes, str, str | None]], text: str, retry: bool = False
    ) -> None:
        self.chat, self.sid, self.files, self.text, self.retry = chat, sid, list(files), text, retry
        self.problems: list[str] = []
        self.reply: ChatReply | None = None
        #: The answer's text as the model streams it (pieces); ``None`` ends it.
        self.tokens: queue.Queue[str | None] = queue.Queue()
        self.previous: Turn | None = None
        self.thread = threading.Thread(target=self._run, name=f"chat-turn:{sid}", daemon=True)

    @property
    def done(self) -> bool:
        return not self.thread.is_alive() and self.thread.ident is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the turn; returns :attr:`done`."""
        self.thread.join(timeout)
        return self.done

    def stream(self) -> Iterator[str]:
        """The answer's text as it streams (nothing for a model that does not stream), until the
        turn ends: for ``st.write_stream``."""
        while True:
            piece = self.tokens.get()
            if piece is None:
                return
            yield piece

    def _run(self) -> None:
        if self.previous is not None:
            self.previous.thread.join()  # one turn of a session at a time, in order
        for data, name, media_type in self.files:
            try:
                self.chat.attach(self.sid, data, name, media_type)
            except KnowledgeError as exc:
                self.problems.append(str(exc))
        self.files = [(b"", name, media_type) for _, name, media_type in self.files]  # free the bytes
        if self.text.strip() or self.retry:
            try:
                self.reply = (
                    self.chat.retry(self.sid, on_token=self.tokens.put)
                    if self.retry
                    else self.chat.send(self.sid, self.text, on_token=self.tokens.put)
                )
            except KnowledgeError as exc:
                self.problems.append(str(exc))
            except Exception as exc:  # a bug: say so, keep the app running
                log.exception("chat turn in session %s", self.sid)
                said = unexpected_problem(exc, "while answering", "the app")
                self.problems.append(said[0].upper() + said[1:] + ".")
        self.tokens.put(None)


class Chats:
    """The chat state every person shares, built once per :class:`~knowledge.system.System` by an
    entry point (the app's cached resource, ``create_app``, the CLI's ``main``, a test): the session
    store over the system's catalog, the registry of running turns (``system.chat_turns``), one lock
    per session, the cache of attached files' texts, the sessions' filters and the provider factory.
    It acts for nobody: :meth:`service` builds the :class:`ChatService` of one person over it.
    Thread-safe.

    Args:
        system: the system whose catalog keeps the sessions.
        provider_factory: ``factory(config) -> ChatProvider`` (default :func:`open_provider`).
    """

    def __init__(self, system: System, provider_factory: Callable[[LlmConfig], ChatProvider] = open_provider) -> None:
        self._system = system  # held: its id stays its own while this state lives (see over)
        self.store = ChatStore(system.catalog)
        self.turns = system.chat_turns
        self.provider_factory = provider_factory
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._texts: OrderedDict[str, str] = OrderedDict()  # file id -> extracted text, newest last
        #: Session id -> the attribute filter its searches use (:meth:`ChatService.set_filter`); kept while the app runs.
        self._filters: dict[str, dict[str, Any]] = {}

    def service(self, workbench: Workbench) -> ChatService:
        """The chat service acting for ``workbench``'s actor over this shared state. Cheap; make one
        per page run or request.

        Raises:
            InvalidArgument: ``workbench`` is over another system than this state's.
        """
        return ChatService(self, workbench)

    def over(self, workbench: Workbench) -> bool:
        """Whether ``workbench`` is over the system this state was built over."""
        return workbench.system_id() == id(self._system)

    def lock(self, sid: str) -> threading.Lock:
        """The lock of session ``sid`` (one turn of a session at a time, for every person)."""
        with self._guard:
            return self._locks.setdefault(sid, threading.Lock())

    def set_filter(self, sid: str, where: dict[str, Any] | None) -> None:
        """Keep ``where`` (checked) as session ``sid``'s filter; ``None`` or ``{}`` drops it."""
        with self._guard:
            if where:
                self._filters[sid] = where
            else:
                self._filters.pop(sid, None)

    def filter_of(self, sid: str) -> dict[str, Any]:
        """Session ``sid``'s filter (a copy); ``{}`` when none."""
        with self._guard:
            return dict(self._filters.get(sid) or {})

    def cached_text(self, file_id: str) -> str | None:
        """The extracted text of attached file ``file_id`` when cached (made the newest)."""
        with self._guard:
            if file_id in self._texts:
                self._texts.move_to_end(file_id)
                return self._texts[file_id]
            return None

    def cache_text(self, file_id: str, text: str) -> None:
        """Keep ``text`` as file ``file_id``'s, the oldest going past :data:`TEXT_CACHE`."""
        with self._guard:
            self._texts[file_id] = text
            while len(self._texts) > TEXT_CACHE:
                self._texts.popitem(last=False)


class ChatService:
    """The chats of one person: a face over the shared :class:`Chats`, built per page run or request.
    Thread-safe: one turn per session at a time (the lock is the shared state's).

    Who is asking: the service acts for ``workbench.actor``: its sessions are that person's own --
    listed, opened, renamed and deleted only by them (a session started before accounts existed,
    with no owner, belongs to the admins) -- its stores and its knowledge tools reach only the
    stores the person may read (writing tools: write), and a session of someone else raises
    ``SessionNotFound`` as a missing one does.

    Args:
        chats: the shared state (:class:`Chats`), built once over the system.
        workbench: the person's workbench, over the same system.

    Raises:
        InvalidArgument: ``workbench`` is over another system than ``chats``.
    """

    MAX_ROUNDS = 8

    def __init__(self, chats: Chats, workbench: Workbench) -> None:
        if not chats.over(workbench):
            raise InvalidArgument("This workbench is over another system than the chats' shared state.")
        self.chats = chats
        self.wb = workbench
        self.store = chats.store
        self.configs = workbench.llm_configs()
        self.tools = KnowledgeTools(workbench, folders=chat_folders(workbench.settings))
        self.provider_factory = chats.provider_factory

    def set_filter(self, sid: str, where: dict[str, Any] | None) -> dict[str, Any]:
        """Filter every search of session ``sid`` by payload equality (``{"attr_team": "docs"}``:
        the file attributes of :mod:`knowledge.attributes`); ``None`` or ``{}``: no filter. Kept in
        this process while it runs (not in the catalog). Returns the filter.

        Raises:
            SessionNotFound. InvalidArgument: a filter the backends cannot apply.
        """
        self.session(sid)
        checked = check_where(dict(where)) if where else None
        self.chats.set_filter(sid, checked)
        return dict(checked or {})

    def filter_of(self, sid: str) -> dict[str, Any]:
        """The attribute filter of session ``sid`` (:meth:`set_filter`); ``{}`` when none."""
        return self.chats.filter_of(sid)

    def as_user(self, workbench: Workbench) -> ChatService:
        """The chat service of ``workbench``'s actor over the same shared state (built, not copied):
        :meth:`Chats.service`."""
        return self if workbench is self.wb else ChatService(self.chats, workbench)

    def _owners(self) -> list[str | None] | None:
        """Whose sessions :attr:`wb`'s actor sees: ``None`` (everyone's: the local admin), or their
        own (and, for an admin, those without an owner)."""
        actor = self.wb.actor
        if actor.local:
            return None
        return [actor.username, None] if actor.is_admin else [actor.username]

    def _sees(self, s: Session) -> bool:
        owners = self._owners()
        return owners is None or s.owner in owners

    def _lock(self, sid: str) -> threading.Lock:
        return self.chats.lock(sid)

    # -- a whole turn in the background ---------------------------------------------------------
    def start_turn(self, sid: str, files: list[tuple[bytes, str, str | None]], text: str, retry: bool = False) -> Turn:
        """Attach ``files`` (``(bytes, name, media type)``) and send ``text`` (with ``retry``:
        :meth:`retry` the last question instead) in a thread of its own,
        after any turn of the session still running (turns of one session run one at a time, in
        the order they were started). A page that is rerun or closed meanwhile loses nothing: the
        turn completes and is stored. Problems (a file that cannot be attached, a model that cannot
        be reached) are collected in :attr:`Turn.problems`, never raised."""
        self.session(sid)
        turn = Turn(self, sid, files, text, retry)
        turn.previous = self.chats.turns.swap(sid, turn)  # the system's registry: every tab sees it
        turn.thread.start()
        return turn

    def running_turn(self, sid: str) -> Turn | None:
        """The session's newest turn if it is still running (started from any tab), else ``None``."""
        turn = self.chats.turns.get(sid)
        found = self.store.find_session(sid) if turn is not None else None
        if found is None or not self._sees(found):
            return None
        return turn if turn is not None and not turn.done else None

    # -- sessions -------------------------------------------------------------------------------
    def create_session(self, title: str = "New chat", config: str | None = None, stores: list[str] | None = None) -> Session:
        """A new session searching ``stores`` (``None``: :meth:`default_stores`).

        Raises:
            StoreNotFound: a named store does not exist. LlmConfigNotFound, InvalidArgument (config).
        """
        if config is not None:
            self.configs.chat(config)  # exists and is CHAT
        chosen = self.default_stores() if stores is None else self._check_stores(stores)
        owner = None if self.wb.actor.local else self.wb.actor.username
        return self.store.create_session(title, config, chosen, owner=owner)

    def default_stores(self) -> list[str]:
        """The stores a new chat starts with: those of the last chat that chose any (still existing),
        else the setting ``chat.default_stores`` (those that exist), else the only store when there is
        exactly one."""
        names = self.wb.store_names()
        for s in self.sessions():
            kept = [n for n in s.stores if n in names]
            if kept:
                return kept
        configured = [n for n in self.wb.settings.chat.default_stores if n in names]
        if configured:
            return configured
        return names if len(names) == 1 else []

    def _check_stores(self, stores: list[str]) -> list[str]:
        names = set(self.wb.store_names())
        for n in stores:
            if n not in names:
                raise StoreNotFound(n, "choose one of " + (", ".join(sorted(names)) or "none (create one first)"))
        return list(dict.fromkeys(stores))

    def set_stores(self, sid: str, stores: list[str]) -> Session:
        """Choose the user's stores the session searches (besides its attachments).

        Raises:
            StoreNotFound: a store does not exist (or is another chat's). SessionNotFound.
        """
        self.session(sid)
        return self.store.update_session(sid, stores=self._check_stores(stores))

    def knowledge(self, sid: str) -> Knowledge:
        """What the session searches now (see :class:`Knowledge`); chosen stores deleted since are
        dropped from the session here, and named once in ``dropped``."""
        s = self.session(sid)
        names = set(self.wb.store_names())
        kept = [n for n in s.stores if n in names]
        dropped = [n for n in s.stores if n not in names]
        if dropped:
            self.store.update_session(sid, stores=kept)
        attached = (
            VECTOR_SEARCH in s.tools
            and self.wb.store_exists(s.store)
            and any(
                a.kind != KIND_IMAGE or self.wb.file_record(s.store, a.file_id) is not None for a in self.attachments(sid)
            )
        )  # an image counts once OCR indexed it
        return Knowledge(kept, attached, s.store, dropped)

    def briefs(self, knowledge: Knowledge) -> list[StoreBrief]:
        """The chosen stores as the system prompt names them: file count, up to 5 file names and the
        store's description."""
        out = []
        for name in knowledge.stores:
            files = [f.file_name for f in self.wb.file_records(name) if f.status == DONE]
            out.append(StoreBrief(name, len(files), tuple(files[:5]), self.wb.store_settings(name).description))
        return out

    def prune_empty(self, keep: str | None = None, older_than_s: float = 600.0) -> int:
        """Delete sessions that never got a message or an attachment (a "New chat" left alone for
        ``older_than_s`` seconds), except ``keep``; returns how many went. One catalog query when
        there is nothing to delete."""
        before = datetime.now(UTC) - timedelta(seconds=older_than_s)
        mine = None if self._owners() is None else {s.id for s in self.sessions()}
        gone = [sid for sid in self.store.empty_sessions(before) if sid != keep and (mine is None or sid in mine)]
        for sid in gone:
            self.delete_session(sid)
        return len(gone)

    def sessions(self) -> list[Session]:
        """The sessions of :attr:`wb`'s actor (see the class docstring), newest activity first."""
        return self.store.list_sessions(self._owners())

    def session(self, sid: str) -> Session:
        """The session ``sid``. Raises ``SessionNotFound`` (also for another person's session)."""
        s = self.store.get_session(sid)
        if not self._sees(s):
            raise SessionNotFound(f"No chat session {sid!r}.")
        return s

    def set_config(self, sid: str, config: str | None) -> Session:
        self.session(sid)
        if config is not None:
            self.configs.chat(config)
        return self.store.update_session(sid, config=config)

    def rename(self, sid: str, title: str) -> Session:
        self.session(sid)
        return self.store.update_session(sid, title=title)

    def messages(self, sid: str) -> list[Message]:
        self.session(sid)
        return self.store.messages(sid)

    def attachments(self, sid: str) -> list[Attachment]:
        self.session(sid)
        return self.store.attachments(sid)

    def delete_session(self, sid: str) -> None:
        """Delete a session, its messages, its vector store, and files nothing else uses."""
        s = self.session(sid)
        file_ids = {p.file_id for m in self.messages(sid) for p in m.media()}
        file_ids |= {
            e["file_id"] for m in self.messages(sid) for key in ("attached", "removed") for e in m.meta.get(key) or []
        }
        file_ids |= {e["file_id"] for e in s.pending}
        file_ids |= {a.file_id for a in self.attachments(sid)}
        if self.wb.store_exists(s.store):
            self.wb.delete_store(s.store)
        self.store.delete_session(sid)
        for fid in file_ids:
            if fid and not self.store.file_in_use(fid):
                self.wb.forget_file_if_unused(fid)

    # -- attachments ----------------------------------------------------------------------------
    def attach(
        self, sid: str, source: bytes | str | Path | BinaryIO, name: str | None = None, media_type: str | None = None
    ) -> Attachment:
        """Attach a file to the session (see the module docstring).

        Raises:
            AttachFailed: the file cannot be read or indexed (the message says why), or the knowledge
            tools are unavailable for a file that needs indexing; a quota it would pass (nothing
            kept). SessionNotFound.
        """
        try:
            return self._attach(sid, source, name, media_type)
        except QuotaExceeded as exc:
            raise AttachFailed(f"Cannot attach {name or 'the file'}: {exc}") from exc

    def _attach(
        self, sid: str, source: bytes | str | Path | BinaryIO, name: str | None, media_type: str | None
    ) -> Attachment:
        s = self.session(sid)
        data, name = _read_source(source, name)
        kind, mt = sniff_kind(name, media_type, data[:16])
        limit = self.wb.settings.ingest.max_file_bytes
        indexed = kind != KIND_IMAGE
        if kind == KIND_IMAGE:
            r = self._index_image(s.store, data, name, mt)  # OCR for retrieval (issue 16)
            indexed = r is not None
            if r is not None and r.file_id:
                stored = self.wb.stored_file(r.file_id)
            else:
                try:
                    stored = self.wb.save_attachment(name, mt, data, max_bytes=limit)
                except KnowledgeError as exc:
                    raise AttachFailed(f"Cannot attach {name}: {exc}") from exc
            a = Attachment(stored.id, stored.name, mt, kind, stored.size, None, datetime.now(UTC))
        else:
            ok, reason = self.tools.availability()
            if not ok:
                raise AttachFailed(f"Cannot attach {name}: it must be indexed, and the knowledge tools are {reason}.")
            r = self.wb.ingest_file(s.store, data, name, content_type=mt)
            if not r.ok:
                raise AttachFailed(f"Cannot attach {name}: {r.message}")
            same = [a for a in self.attachments(sid) if a.file_id == r.file_id]
            if same:
                if r.outcome == Outcome.DUPLICATE:
                    raise AttachFailed(f"{name} has the same content as {same[0].name}, which is already attached.")
                return same[0]
            a = Attachment(r.file_id or "", name, mt, kind, len(data), r.pages, datetime.now(UTC))
        self.store.put_attachment(sid, a)
        tools = list(s.tools)
        if indexed and VECTOR_SEARCH not in tools:
            tools.append(VECTOR_SEARCH)
        if kind in (KIND_IMAGE, KIND_PDF) and VIEW_ATTACHMENT not in tools:
            tools.append(VIEW_ATTACHMENT)
        pending = [e for e in s.pending if e["file_id"] != a.file_id or e["event"] != "attached"]
        pending.append({"event": "attached", **a.event()})
        self.store.update_session(sid, tools=tools, pending=pending)
        return a

    def _index_image(self, store: str, data: bytes, name: str, mt: str):
        """OCR an attached image into the session's store so ``vector_search`` finds its text (the
        image itself still goes to the model as a part). ``None`` when the knowledge tools are
        unavailable or OCR read nothing (or cannot run): the image is attached all the same."""
        ok, _ = self.tools.availability()
        if not ok:
            return None
        r = self.wb.ingest_file(store, data, name, content_type=mt)
        if r.ok:
            return r
        if r.file_id and self.wb.file_record(store, r.file_id) is not None:
            self.wb.delete_file(store, r.file_id, keep_file=True)  # no failed record for a picture
        log.info("attached image %s not indexed: %s", name, r.message)
        return None

    def remove(self, sid: str, file_id: str) -> Attachment:
        """Remove an attachment: its chunks leave the session's store and the next message announces
        it -- unless it was attached after the last message, in which case it is simply forgotten
        (a notice names only files still attached).

        Raises:
            InvalidArgument: no such attachment. SessionNotFound.
        """
        s = self.session(sid)
        found = [a for a in self.attachments(sid) if a.file_id == file_id]
        if not found:
            raise InvalidArgument(f"No file {file_id!r} is attached to this chat.")
        a = found[0]
        if self.wb.file_record(s.store, file_id) is not None:  # images too, when OCR indexed them
            self.wb.delete_file(s.store, file_id, keep_file=True)
        self.store.delete_attachment(sid, file_id)
        unannounced = any(e["event"] == "attached" and e["file_id"] == file_id for e in s.pending)
        pending = [e for e in s.pending if e["file_id"] != file_id]
        if not unannounced:
            pending.append({"event": "removed", **a.event()})
        self.store.update_session(sid, pending=pending)
        return a

    # -- a turn ---------------------------------------------------------------------------------
    def send(
        self, sid: str, text: str, config: str | None = None, on_token: Callable[[str], None] | None = None
    ) -> ChatReply:
        """Send the user's ``text`` (with the pending attachments) and run the turn; a streamed
        answer's pieces go to ``on_token`` as they come.

        Raises:
            InvalidArgument: blank text with nothing attached. LlmUnavailable: the model cannot be
            used (no key in the named variable, ...) or failed mid-turn; either way the user's
            message stays, and the trace has the error. LlmConfigNotFound. SessionNotFound.
        """
        with self._lock(sid):
            s = self.session(sid)
            attached = [e for e in s.pending if e["event"] == "attached"]
            if not text.strip() and not attached:
                raise InvalidArgument("Type a message (or attach a file).")
            cfg = self.configs.chat(config or s.config)
            provider: ChatProvider | None = None
            problem: LlmUnavailable | None = None
            try:
                provider = self.provider_factory(cfg)
            except LlmUnavailable as exc:  # no key in the variable, ...: keep the message, say why
                problem = exc
            current = {a.file_id for a in self.attachments(sid)}
            attached = [e for e in attached if e["file_id"] in current]
            removed = [e for e in s.pending if e["event"] == "removed"]
            parts = [Part(TEXT, text=text)] if text.strip() else []
            parts.extend(
                Part(
                    IMAGE if e["kind"] == KIND_IMAGE else FILE,
                    file_id=e["file_id"],
                    name=e["name"],
                    media_type=e["media_type"],
                    size=e.get("size"),
                )
                for e in attached
                if e["kind"] in (KIND_IMAGE, KIND_PDF)
            )
            meta: dict[str, Any] = {}
            if attached:
                meta["attached"] = [{k: v for k, v in e.items() if k != "event"} for e in attached]
            if removed:
                meta["removed"] = [{k: v for k, v in e.items() if k != "event"} for e in removed]
            self.store.add_message(sid, USER, parts, meta)
            title = (
                s.title
                if s.title != "New chat" or not text.strip()
                else " ".join(without_refused(text).split())[:60] or s.title
            )
            self.store.update_session(sid, pending=[], title=title)
            if provider is None:
                problem = problem or LlmUnavailable(f"The chat config {cfg.name!r} gave no provider.")
                self.store.add_trace(
                    sid, cfg.name, cfg.provider, cfg.model, {"model": cfg.model}, None, str(problem), datetime.now(UTC), 0.0
                )
                raise problem
            return self._run_turn(self.session(sid), cfg, provider, _Turn(text), on_token)

    def retry(self, sid: str, config: str | None = None, on_token: Callable[[str], None] | None = None) -> ChatReply:
        """Ask the session's last question again: when the last message is the user's (its turn
        failed -- the model unreachable, no key), run the turn once more on the stored history, with
        no second copy of the question.

        Raises:
            InvalidArgument: the last message already has an answer (or there is none).
            LlmUnavailable, LlmConfigNotFound, SessionNotFound: as :meth:`send`.
        """
        with self._lock(sid):
            s = self.session(sid)
            messages = self.messages(sid)
            if not messages or messages[-1].role != USER:
                raise InvalidArgument("There is no unanswered question to ask again in this chat.")
            cfg = self.configs.chat(config or s.config)
            provider = self.provider_factory(cfg)
            if provider is None:
                raise LlmUnavailable(f"The chat config {cfg.name!r} gave no provider.")
            return self._run_turn(s, cfg, provider, _Turn(messages[-1].text), on_token)

    def _run_turn(
        self, s: Session, cfg: LlmConfig, provider: ChatProvider, turn: _Turn, on_token: Callable[[str], None] | None = None
    ) -> ChatReply:
        if cfg.search_first and cfg.provider == "openai":
            return self._search_first(s, cfg, provider, turn, on_token)
        dropped = 0
        for round_no in range(self.MAX_ROUNDS):
            last = round_no == self.MAX_ROUNDS - 1
            req = self.request(s.id, cfg, offer_tools=not last)
            dropped = req.dropped_turns
            kn = self.knowledge(s.id)
            ok, reason = self.tools.availability() if kn.searchable else (True, "")
            attachments = self.attachments(s.id)
            ctx = TurnContext(
                turn.question,
                list(turn.hits),
                [a.name for a in attachments],
                "" if ok else reason,
                list(kn.stores),
                kn.attachments,
                [a.name for a in attachments if a.kind == KIND_IMAGE],
                self.wb.settings.chat.min_score,
                dict(turn.failed),
                self._image_texts(kn, attachments) if not turn.question.strip() else {},
                self._embed(turn),
            )
            completion = self._call(s.id, cfg, provider, req, ctx)
            if completion.tool_calls and not last:
                self.store.add_message(
                    s.id,
                    ASSISTANT,
                    [Part(TEXT, text=completion.text)] if completion.text else [],
                    {
                        "tool_calls": [
                            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in completion.tool_calls
                        ],
                        "config": cfg.name,
                    },
                )
                for call in completion.tool_calls:
                    self._run_tool(self.session(s.id), cfg, call, turn)
                continue
            cited = cite(completion.text or "", _citations(turn.hits))
            text, citations, also = cited.text, cited.sources, cited.also_searched[:MAX_CITATIONS]
            if completion.sentences:
                citations = _with_sentences(citations, completion.sentences)
            self.store.add_message(
                s.id,
                ASSISTANT,
                [Part(TEXT, text=text)],
                {
                    "citations": citations,
                    "also_searched": also,
                    "config": cfg.name,
                    "retrieval_only": completion.retrieval_only,
                    "tool_runs": [{"name": r.name, "arguments": r.arguments, "ok": r.ok} for r in turn.runs],
                },
            )
            return ChatReply(s.id, text, citations, turn.runs, cfg.name, completion.retrieval_only, dropped, also)
        raise AssertionError("unreachable")  # the last round offers no tools

    def _search_first(
        self, s: Session, cfg: LlmConfig, provider: ChatProvider, turn: _Turn, on_token: Callable[[str], None] | None
    ) -> ChatReply:
        """A turn of a search-first config: search the session's knowledge with the question, hand
        the model the top :data:`SEARCH_FIRST_K` passages numbered ``[n]`` with the question (no
        tools), stream its answer to ``on_token``, then drop the markers that point to no passage
        given and cite the rest (:func:`knowledge.chat.sources.cite`)."""
        kn = self.knowledge(s.id)
        if kn.searchable and turn.question.strip():
            args = {"query": turn.question, "k": SEARCH_FIRST_K}
            result = self._search(s, cfg, VECTOR_SEARCH, args, turn)
            turn.runs.append(ToolRun(VECTOR_SEARCH, args, result.text, result.ok))
        req = self.request(s.id, cfg, offer_tools=False)
        passages = _citations(turn.hits)
        blocks = [
            f"[{h['ref']}] {where_text(h)}\n{plain_text(str(h.get('text') or ''), file_name=h.get('file_name'))}"
            for h in passages
        ]
        brief = (
            SEARCH_FIRST_PROMPT + "\n\nPassages:\n\n" + "\n\n".join(blocks)
            if blocks
            else "No passage of this chat's knowledge matches the question: say so, and answer only if you can"
            " without them, saying that no passage supports it."
        )
        messages = [*req.messages, {"role": "user", "content": f"{brief}\n\nQuestion: {turn.question}"}]
        if req.messages and req.messages[-1].get("role") == "user" and isinstance(req.messages[-1].get("content"), str):
            messages = [*req.messages[:-1], messages[-1]]  # the question once, after its passages
        attachments = self.attachments(s.id)
        ctx = TurnContext(
            turn.question,
            list(turn.hits),
            [a.name for a in attachments],
            "",
            list(kn.stores),
            kn.attachments,
            min_score=self.wb.settings.chat.min_score,
            failed=dict(turn.failed),
            on_token=on_token,
        )
        completion = self._call(s.id, cfg, provider, MappedRequest(messages, [], req.tokens, req.dropped_turns), ctx)
        raw, unknown = drop_unknown_markers(completion.text or "", [int(h["ref"]) for h in passages])
        cited = cite(raw, passages)
        also = cited.also_searched[:MAX_CITATIONS]
        self.store.add_message(
            s.id,
            ASSISTANT,
            [Part(TEXT, text=cited.text)],
            {
                "citations": cited.sources,
                "also_searched": also,
                "config": cfg.name,
                "retrieval_only": False,
                "search_first": True,
                "unknown_markers": unknown,
                "tool_runs": [{"name": r.name, "arguments": r.arguments, "ok": r.ok} for r in turn.runs],
            },
        )
        return ChatReply(s.id, cited.text, cited.sources, turn.runs, cfg.name, False, req.dropped_turns, also, unknown)

    def _embed(self, turn: _Turn) -> Embed | None:
        """The embedding model of the store of the turn's best passage, as ``texts -> (n, d)``
        rows (for the offline assistant's sentences); ``None`` before any passage is found."""
        if not turn.hits:
            return None
        record = self.wb.store_record(str(turn.hits[0].get("store")))
        if record is None:
            return None
        embedder = self.wb.embedder(record.embedding_model)
        return lambda texts: embedder.embed_documents(texts)

    def request(self, sid: str, cfg: LlmConfig | None = None, offer_tools: bool = True) -> MappedRequest:
        """The request the session's next round sends (what the mapper renders from the history)."""
        s = self.session(sid)
        cfg = cfg or self.configs.chat(s.config)
        kn = self.knowledge(sid)
        ok, reason = self.tools.availability() if kn.searchable else (True, "")
        ctx = MapperContext(
            attachments=self.attachments(sid),
            capabilities=cfg.effective_capabilities(),
            document_mode=cfg.document_mode(),
            tools=self._schemas(s, cfg, kn, ok) if offer_tools else [],
            store=s.store,
            budget_tokens=cfg.context_tokens,
            read_bytes=self._bytes,
            read_text=self._text,
            tools_unavailable="" if ok else reason,
            knowledge=self.briefs(kn),
        )
        return build_request(self.messages(sid), ctx)

    @staticmethod
    def offered_tools(cfg: LlmConfig) -> frozenset[str]:
        """The knowledge tools a model of ``cfg`` is offered: ``vector_search`` only, unless the
        config's ``write_tools`` also offers the writing ones (least privilege: documents in the
        chat can carry instructions)."""
        return READ_TOOLS | (WRITE_TOOLS if cfg.write_tools else frozenset())

    def _schemas(self, s: Session, cfg: LlmConfig, kn: Knowledge, knowledge_ok: bool) -> list[dict[str, Any]]:
        out = []
        if kn.searchable and knowledge_ok:
            offered = self.offered_tools(cfg)
            for t in self.tools.tools():
                if t.name not in offered:
                    continue
                schema = copy.deepcopy(t.schema())
                params = schema["function"]["parameters"]
                params["required"] = [r for r in params["required"] if r != "store"]
                if t.name in WRITE_TOOLS:  # the chat's own attachments, nothing else
                    params["properties"].pop("store", None)
                    schema["function"]["description"] += " Acts on this chat's attached files only."
                else:
                    names = [kn.label(n) for n in kn.searchable]
                    params["properties"]["store"] = {
                        "type": "string",
                        "enum": names,
                        "description": "Search only this store; leave it out to search all of this chat's"
                        f" knowledge at once ({', '.join(names)}).",
                    }
                out.append(schema)
        if VIEW_ATTACHMENT in s.tools:
            out.append(VIEW_ATTACHMENT_SCHEMA)
        return out

    def _call(self, sid: str, cfg: LlmConfig, provider: ChatProvider, req: MappedRequest, ctx: TurnContext) -> Completion:
        started = datetime.now(UTC)
        t0 = time.perf_counter()
        request = {"model": cfg.model or cfg.provider, "messages": req.messages, "tools": req.tools}
        try:
            completion = provider.complete(req.messages, req.tools, ctx)
        except LlmUnavailable as exc:
            self.store.add_trace(
                sid, cfg.name, cfg.provider, cfg.model, request, None, str(exc), started, time.perf_counter() - t0
            )
            raise
        self.store.add_trace(
            sid,
            cfg.name,
            cfg.provider,
            cfg.model,
            completion.request,
            completion.response,
            None,
            started,
            time.perf_counter() - t0,
        )
        return completion

    def _run_tool(self, s: Session, cfg: LlmConfig, call: ToolCall, turn: _Turn) -> None:
        try:
            args = call.parsed_arguments()
        except ValueError as exc:
            args, result = {}, ToolResult(f"Bad arguments for {call.name}: {exc}. Send a JSON object.", ok=False)
        else:
            result = self._tool(s, cfg, call.name, args, turn)
        self.store.add_message(
            s.id,
            TOOL,
            [Part(TEXT, text=result.text)],
            {"tool_call_id": call.id, "name": call.name, "arguments": args, "ok": result.ok},
        )
        turn.runs.append(ToolRun(call.name, args, result.text, result.ok))
        if call.name == VIEW_ATTACHMENT and result.ok:
            d = result.data
            self.store.add_message(
                s.id,
                ATTACHMENT,
                [
                    Part(
                        IMAGE if d["kind"] == KIND_IMAGE else FILE,
                        file_id=d["file_id"],
                        name=d["name"],
                        media_type=d["media_type"],
                        size=d.get("size"),
                    )
                ],
                {"tool_call_id": call.id},
            )

    def _refuse(self, s: Session, cfg: LlmConfig, name: str, args: dict[str, Any], reason: str) -> ToolResult:
        """Answer a tool call the chat does not allow: the reason goes to the model, and a row of
        the trace (provider ``policy``) records the refused call."""
        self.store.add_trace(
            s.id,
            cfg.name,
            "policy",
            None,
            {"tool": name, "arguments": args},
            None,
            f"refused {name}: {reason}",
            datetime.now(UTC),
            0.0,
        )
        return ToolResult(f"Refused: {reason}", {"refused": True}, ok=False)

    def _tool(self, s: Session, cfg: LlmConfig, name: str, args: dict[str, Any], turn: _Turn) -> ToolResult:
        """Run the tool call ``name(args)`` under the chat's policy: the handler of ``name`` in the
        table below; a tool the table does not name is unknown."""
        handlers: dict[str, Callable[[Session, LlmConfig, str, dict[str, Any], _Turn], ToolResult]] = {
            VIEW_ATTACHMENT: self._view_attachment,
            VECTOR_SEARCH: self._search,
            **dict.fromkeys(WRITE_TOOLS, self._write_tool),
        }
        handler = handlers.get(name)
        if handler is None:
            return ToolResult(f"Unknown tool {name!r}.", ok=False)
        return handler(s, cfg, name, args, turn)

    def _view_attachment(self, s: Session, cfg: LlmConfig, name: str, args: dict[str, Any], turn: _Turn) -> ToolResult:
        """``view_attachment``: an attached image or PDF, shown to the model in the next message."""
        if VIEW_ATTACHMENT not in s.tools:
            return ToolResult("view_attachment is not active in this chat (no image or PDF attached).", ok=False)
        ref = str(args.get("file_id", ""))
        found = [a for a in self.attachments(s.id) if a.file_id == ref or a.name == ref]
        if not found or found[0].kind == KIND_DOCUMENT:
            media = [a.name for a in self.attachments(s.id) if a.kind != KIND_DOCUMENT]
            return ToolResult(f"No image or PDF {ref!r} is attached. Attached: {', '.join(media) or 'none'}.", ok=False)
        a = found[0]
        return ToolResult(f"{a.name} is shown in the next message.", a.event())

    def _write_tool(self, s: Session, cfg: LlmConfig, name: str, args: dict[str, Any], turn: _Turn) -> ToolResult:
        """A writing tool, when the config offers it, on this chat's attached files only (and, for
        ``vector_ingest_file``, a path in ``chat.allowed_dirs``); refused with the reason otherwise."""
        if name not in self.offered_tools(cfg):
            return self._refuse(
                s,
                cfg,
                name,
                args,
                f"{name} is not offered in this chat: the model may only"
                " search (a CHAT config with write_tools enabled offers the writing tools).",
            )
        args = dict(args)
        store = args.setdefault("store", s.store)
        if store not in (s.store, ATTACHMENTS):
            return self._refuse(
                s, cfg, name, args, f"{name} acts only on this chat's attached files, not on store {store!r}."
            )
        args["store"] = s.store
        folders = self.tools.folders  # the chat's: LocalFolders of chat.allowed_dirs (see __init__)
        if name == "vector_ingest_file" and isinstance(folders, LocalFolders):
            try:
                folders.check(str(args.get("path", "")))
            except PathNotAllowed as exc:
                return self._refuse(s, cfg, name, args, str(exc))
        return self.tools.call(name, args)

    def _search(self, s: Session, cfg: LlmConfig, name: str, args: dict[str, Any], turn: _Turn) -> ToolResult:
        """``vector_search`` over the session's knowledge: one store when ``store`` names one of it,
        else all of it merged -- the tool's own implementation (:meth:`KnowledgeTools.search_stores`)
        with the chat's policy (only this chat's stores and attachments, the session's filter, each
        store's own score threshold) and the turn's passage numbers."""
        kn = self.knowledge(s.id)
        if not kn.searchable:
            return ToolResult("This chat has no knowledge to search: no store is chosen and no file is attached.", ok=False)
        ok, reason = self.tools.availability()
        if not ok:
            return ToolResult(f"vector_search is {reason}", ok=False)
        args = dict(args)
        wanted = args.pop("store", None)
        if wanted:
            target = kn.attachment_store if wanted in (ATTACHMENTS, s.store) else wanted
            if target not in kn.searchable:
                names = ", ".join(kn.label(n) for n in kn.searchable)
                return self._refuse(
                    s,
                    cfg,
                    VECTOR_SEARCH,
                    {**args, "store": wanted},
                    f"store {wanted!r} is not part of this chat; it can search: {names}.",
                )
            stores = [target]
        else:
            stores = kn.searchable
        query, k, file_id = args.get("query"), args.get("k", 5), args.get("file_id")
        try:
            k = int(k)
            if not isinstance(query, str):
                raise InvalidArgument("query must be a string.")
            where = {**self.filter_of(s.id), **({"file_id": file_id} if file_id else {})}
            thresholds = {
                n: self.wb.store_settings(n).score_threshold  # each chosen store's own
                for n in stores
                if n != kn.attachment_store
            }
            result = self.tools.search_stores(
                stores, query, k, where=where or None, thresholds=thresholds, label=kn.label, numbered=turn.hits
            )
        except (KnowledgeError, TypeError, ValueError) as exc:
            return ToolResult(f"vector_search failed: {exc}", ok=False)
        turn.hits.extend(result.data["hits"])
        turn.failed.update({kn.label(store): why for store, why in result.data["failed"].items()})
        return result

    def _image_texts(self, kn: Knowledge, attachments: list[Attachment]) -> dict[str, str]:
        """What text recognition read in the attached images (name -> text, in reading order), from
        their chunks in the session's store; an image OCR read nothing in is left out."""
        if not kn.attachments:
            return {}
        out: dict[str, str] = {}
        try:
            coll = self.wb.vector_store(kn.attachment_store).collection
            for a in attachments:
                if a.kind != KIND_IMAGE:
                    continue
                points = sorted(
                    (p.payload or {} for p in coll.scroll(where={"file_id": a.file_id})),
                    key=lambda p: (p.get("char_start") or 0, p.get("chunk_index") or 0),
                )
                text, end = "", 0
                for p in points:  # chunks overlap: each character once
                    start, piece = int(p.get("char_start") or 0), str(p.get("text") or "")
                    text += piece[max(0, end - start) :] if text else piece
                    end = max(end, start + len(piece))
                if text.strip():
                    out[a.name] = text
        except KnowledgeError as exc:
            log.warning("could not read the attached images' text: %s", exc)
        return out

    # -- file access for the mapper ---------------------------------------------------------------
    def _bytes(self, file_id: str) -> bytes:
        with self.wb.read_file(file_id) as fh:
            return fh.read()

    def _text(self, file_id: str) -> str:
        """The extracted text of an attached file, kept for the :data:`TEXT_CACHE` most recently
        read files (a file's text never changes: its id is its content's)."""
        if not self.wb.actor.local and self.wb.find_stored_file(file_id) is None:  # the cache is shared
            raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.")
        cached = self.chats.cached_text(file_id)
        if cached is not None:
            return cached
        stored = self.wb.stored_file(file_id)
        with self.wb.read_file(file_id) as fh:
            ingest = self.wb.settings.ingest  # read in a bounded child, as ingestion reads (issue 38)
            text = read_bounded(
                fh,
                stored.name,
                processes=ingest.reader_processes,
                limits=ReadLimits.from_settings(ingest),
                tables=ingest.pdf_tables,
            ).document.text
        self.chats.cache_text(file_id, text)
        return text

    # -- traces ---------------------------------------------------------------------------------
    def traces(self, sid: str | None = None, limit: int = 200):
        """The LLM call trace, newest first: of session ``sid``, or of every session :attr:`wb`'s
        actor sees (an admin: also the calls of no session; the local admin: all)."""
        if sid is not None:
            self.session(sid)
            return self.store.traces(sid, limit)
        owners = self._owners()
        if owners is None:
            return self.store.traces(None, limit)
        mine = {s.id for s in self.sessions()}
        admin = self.wb.actor.is_admin
        return [t for t in self.store.traces(None, limit * 4) if (t.session_id in mine) or (admin and t.session_id is None)][
            :limit
        ]


def _read_source(source: Any, name: str | None) -> tuple[bytes, str]:
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        try:
            return path.read_bytes(), name or path.name
        except OSError as exc:
            raise AttachFailed(f"Cannot attach {path}: {exc.strerror or exc}") from exc
    if not name:
        raise InvalidArgument("A file given as bytes or a stream needs a name.")
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), name
    data = source.read()
    return (data if isinstance(data, bytes) else bytes(data)), name


def _with_sentences(citations: list[dict[str, Any]], picked: list[Picked]) -> list[dict[str, Any]]:
    """Each citation with ``sentences``: the answering sentences picked in its passage, best
    first, as ``{"start", "end", "score"}`` (``str`` offsets into the citation's ``text``) and, when
    the passage is its document's ``text[char_start:char_end]``, ``char_start``/``char_end`` in the
    document (for the viewer)."""
    out = []
    for c in citations:
        mine = [p for p in picked if p.ref == c.get("ref")]
        if not mine:
            out.append(c)
            continue
        start, end, text = c.get("char_start"), c.get("char_end"), str(c.get("text") or "")
        base = start if isinstance(start, int) and isinstance(end, int) and end - start == len(text) else None
        out.append(
            {
                **c,
                "sentences": [
                    {
                        "start": p.start,
                        "end": p.end,
                        "score": p.score,
                        **({"char_start": base + p.start, "char_end": base + p.end} if base is not None else {}),
                    }
                    for p in mine
                ],
            }
        )
    return out


def _citations(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turn's passages in the order the searches returned them (each best first, in the store's
    score direction), each once (a passage found again keeps its number, ``ref``)."""
    seen, out = set(), []
    for h in hits:
        key = passage_key(h)
        if key in seen:
            continue
        seen.add(key)
        out.append(h)
    return out


__all__ = ["AttachFailed", "ChatReply", "ChatService", "Chats", "ToolRun"]
