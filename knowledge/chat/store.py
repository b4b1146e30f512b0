"""Persistence of chats and the LLM call trace in the catalog (tables of migration 2)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from types import EllipsisType
from typing import Any

from knowledge._names import check_name
from knowledge.catalog import Catalog, one_row
from knowledge.chat.model import Attachment, Message, Part, Session
from knowledge.errors import InvalidArgument, KnowledgeError

_DATA_URL = re.compile(r"^data:([\w.+\-]+/[\w.+\-]+);base64,(.*)$", re.S)
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")


class SessionNotFound(KnowledgeError, LookupError):
    """No chat session has the given id."""


def _now() -> datetime:
    return datetime.now(UTC)


def redact(value: Any) -> Any:
    """``value`` (a JSON-like structure) with every base64 data URL replaced by a note, e.g.
    ``"[base64 image/png, 48,212 characters omitted]"``, so the trace does not grow by the size of
    every attachment. Also catches bare base64 in ``file_data`` / ``data`` fields (OpenAI's file and
    audio blocks) when longer than 256 characters."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("file_data", "data") and isinstance(v, str) and len(v) > 256 and _BASE64.match(v):
                out[k] = f"[base64, {len(v):,} characters omitted]"
            else:
                out[k] = redact(v)
        return out
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str) and value.startswith("data:"):
        m = _DATA_URL.match(value)
        if m:
            return f"[base64 {m.group(1)}, {len(m.group(2)):,} characters omitted]"
    return value


@dataclass(frozen=True, slots=True)
class Trace:
    """One LLM call: the request and response as recorded (base64 redacted), or the error."""

    id: int
    session_id: str | None
    config: str
    provider: str
    model: str | None
    request: Any
    response: Any
    error: str | None
    started: datetime
    seconds: float | None


class ChatStore:
    """Sessions, messages, attachments and traces. Thread-safe through the catalog's lock."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    # -- sessions -------------------------------------------------------------------------------
    def create_session(
        self,
        title: str = "New chat",
        config: str | None = None,
        stores: list[str] | tuple[str, ...] = (),
        owner: str | None = None,
    ) -> Session:
        """A new session; ``owner`` is the username it belongs to (``None``: the admins')."""
        check_name(title, "chat title")
        sid = uuid.uuid4().hex[:12]
        now = _now()
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO chat_sessions (id, title, config, store, tools, pending, created, updated,"
                " stores, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sid, title, config, f"chat-{sid}", "[]", "[]", now, now, json.dumps(list(stores)), owner],
            )
        return self.get_session(sid)

    def find_session(self, sid: str) -> Session | None:
        with self.catalog.cursor() as cur:
            row = cur.execute(f"SELECT {_COLUMNS} FROM chat_sessions WHERE id = ?", [sid]).fetchone()
        return _session(row) if row else None

    def get_session(self, sid: str) -> Session:
        s = self.find_session(sid)
        if s is None:
            raise SessionNotFound(f"No chat session {sid!r}.")
        return s

    def list_sessions(self, owners: list[str | None] | None = None) -> list[Session]:
        """Newest activity first; with ``owners`` only the sessions of those usernames (``None`` in
        it: the sessions without an owner)."""
        sql, args = f"SELECT {_COLUMNS} FROM chat_sessions", []
        if owners is not None:
            named = [o for o in owners if o is not None]
            conditions = (["owner IN (" + ", ".join("?" * len(named)) + ")"] if named else []) + (
                ["owner IS NULL"] if None in owners else []
            )
            if not conditions:
                return []
            sql, args = sql + " WHERE " + " OR ".join(conditions), named
        with self.catalog.cursor() as cur:
            rows = cur.execute(sql + " ORDER BY updated DESC, id", args).fetchall()
        return [_session(r) for r in rows]

    def update_session(
        self,
        sid: str,
        *,
        title: str | None = None,
        config: str | EllipsisType | None = ...,
        tools: list[str] | None = None,
        pending: list[dict] | None = None,
        stores: list[str] | None = None,
    ) -> Session:
        """Change what is given (``config=None`` clears the config; ``...``, the default, keeps it)."""
        changes: dict[str, Any] = {"updated": _now()}
        if title is not None:
            if not title.strip():
                raise InvalidArgument("A chat title cannot be blank.")
            check_name(title, "chat title")
            changes["title"] = title.strip()[:200]
        if not isinstance(config, EllipsisType):
            changes["config"] = config
        if tools is not None:
            changes["tools"] = json.dumps(tools)
        if pending is not None:
            changes["pending"] = json.dumps(pending)
        if stores is not None:
            changes["stores"] = json.dumps(list(stores))
        sets, args = [f"{column} = ?" for column in changes], list(changes.values())
        with self.catalog.cursor() as cur:
            cur.execute(f"UPDATE chat_sessions SET {', '.join(sets)} WHERE id = ?", [*args, sid])
        return self.get_session(sid)

    def empty_sessions(self, before: datetime) -> list[str]:
        """Ids of sessions without a message, an attachment or a pending event, last changed before
        ``before``."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT id FROM chat_sessions s WHERE updated < ? AND CAST(pending AS VARCHAR) = '[]'"
                " AND NOT EXISTS (SELECT 1 FROM chat_messages m WHERE m.session_id = s.id)"
                " AND NOT EXISTS (SELECT 1 FROM chat_attachments a WHERE a.session_id = s.id)",
                [before],
            ).fetchall()
        return [r[0] for r in rows]

    def delete_session(self, sid: str) -> None:
        with self.catalog.cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            cur.execute("DELETE FROM chat_messages WHERE session_id = ?", [sid])
            cur.execute("DELETE FROM chat_attachments WHERE session_id = ?", [sid])
            cur.execute("DELETE FROM chat_sessions WHERE id = ?", [sid])
            cur.execute("COMMIT")

    # -- messages -------------------------------------------------------------------------------
    def add_message(self, sid: str, role: str, parts: list[Part], meta: dict[str, Any] | None = None) -> Message:
        now = _now()
        with self.catalog.cursor() as cur:
            seq = one_row(cur.execute("SELECT coalesce(max(seq), 0) + 1 FROM chat_messages WHERE session_id = ?", [sid]))[0]
            cur.execute(
                "INSERT INTO chat_messages VALUES (?, ?, ?, ?, ?, ?)",
                [sid, seq, role, json.dumps([p.to_dict() for p in parts]), json.dumps(meta or {}), now],
            )
            cur.execute("UPDATE chat_sessions SET updated = ? WHERE id = ?", [now, sid])
        return Message(seq, role, parts, meta or {}, now)

    def messages(self, sid: str) -> list[Message]:
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT seq, role, parts, meta, created FROM chat_messages WHERE session_id = ? ORDER BY seq", [sid]
            ).fetchall()
        return [
            Message(seq, role, [Part.from_dict(p) for p in json.loads(parts)], json.loads(meta), created)
            for seq, role, parts, meta, created in rows
        ]

    # -- attachments ----------------------------------------------------------------------------
    def put_attachment(self, sid: str, a: Attachment) -> None:
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO chat_attachments VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, file_id)"
                " DO UPDATE SET name = excluded.name, media_type = excluded.media_type, kind = excluded.kind,"
                " size = excluded.size, pages = excluded.pages, attached = excluded.attached",
                [sid, a.file_id, a.name, a.media_type, a.kind, a.size, a.pages, a.attached or _now()],
            )

    def delete_attachment(self, sid: str, file_id: str) -> bool:
        with self.catalog.cursor() as cur:
            return bool(
                cur.execute(
                    "DELETE FROM chat_attachments WHERE session_id = ? AND file_id = ? RETURNING file_id", [sid, file_id]
                ).fetchall()
            )

    def attachments(self, sid: str) -> list[Attachment]:
        """The files attached now, in the order they were attached."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT file_id, name, media_type, kind, size, pages, attached FROM chat_attachments"
                " WHERE session_id = ? ORDER BY attached, name",
                [sid],
            ).fetchall()
        return [Attachment(*r) for r in rows]

    def file_in_use(self, file_id: str) -> bool:
        """Whether any session has ``file_id`` attached, in a message part or in a message's
        attachment events."""
        with self.catalog.cursor() as cur:
            if cur.execute("SELECT 1 FROM chat_attachments WHERE file_id = ? LIMIT 1", [file_id]).fetchone():
                return True
            return bool(
                cur.execute(
                    "SELECT 1 FROM chat_messages WHERE strpos(CAST(parts AS VARCHAR), ?) > 0"
                    " OR strpos(CAST(meta AS VARCHAR), ?) > 0 LIMIT 1",
                    [file_id, file_id],
                ).fetchone()
            )

    # -- traces ---------------------------------------------------------------------------------
    def add_trace(
        self,
        session_id: str | None,
        config: str,
        provider: str,
        model: str | None,
        request: Any,
        response: Any,
        error: str | None,
        started: datetime,
        seconds: float,
    ) -> int:
        """Record one LLM call; ``request`` and ``response`` are redacted with :func:`redact`."""
        with self.catalog.cursor() as cur:
            return one_row(
                cur.execute(
                    "INSERT INTO llm_traces (session_id, config, provider, model, request, response, error, started,"
                    " seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    [
                        session_id,
                        config,
                        provider,
                        model,
                        json.dumps(redact(request), default=str),
                        json.dumps(redact(response), default=str) if response is not None else None,
                        error,
                        started,
                        seconds,
                    ],
                )
            )[0]

    def traces(self, session_id: str | None = None, limit: int = 200) -> list[Trace]:
        """Newest first; only ``session_id``'s when given."""
        sql = "SELECT * FROM llm_traces"
        args: list[Any] = []
        if session_id is not None:
            sql, args = sql + " WHERE session_id = ?", [session_id]
        with self.catalog.cursor() as cur:
            rows = cur.execute(sql + " ORDER BY id DESC LIMIT ?", [*args, limit]).fetchall()
        return [
            Trace(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]) if r[6] else None, r[7], r[8], r[9])
            for r in rows
        ]


_COLUMNS = "id, title, config, store, tools, pending, created, updated, stores, owner"


def _session(row: tuple) -> Session:
    sid, title, config, store, tools, pending, created, updated, stores, owner = row
    return Session(
        sid,
        title,
        config,
        store,
        json.loads(tools),
        json.loads(pending),
        created,
        updated,
        json.loads(stores) if stores else [],
        owner,
    )
