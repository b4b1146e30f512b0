"""The audit trail: who created, ingested, deleted, exported, imported, shared -- and when -- kept in
the catalog (``audit_events``), read by the admins' audit page and ``knowledge audit``."""

from __future__ import annotations

import json
import secrets
import time
from datetime import datetime
from typing import Any

from knowledge.people.accounts import Cursors, now
from knowledge.people.records import AuditEvent

#: The actions the product records (``<object>.<verb>``).
ACTIONS = (
    "store.create",
    "store.update",
    "store.delete",
    "store.share",
    "store.unshare",
    "store.export",
    "store.import",
    "store.reembed",
    "store.owner",
    "file.ingest",
    "file.delete",
    "file.attributes",
    "batch.cancel",
    "user.create",
    "user.update",
    "user.delete",
    "user.password",
    "user.sign_in",
    "user.sign_in_failed",
    "user.sign_out",
    "user.invite",
    "user.deactivate",
    "user.activate",
    "key.create",
    "key.revoke",
    "group.create",
    "group.delete",
    "group.member",
    "group.update",
    "scim.token",
    "scim.revoke",
    "settings.change",
    "files.move",
    "files.cleanup",
    "quota.set",
)
#: What each of :data:`ACTIONS` is, in words (the Audit page's "what" column and its filter).
ACTION_WORDS = {
    "store.create": "created the store",
    "store.update": "changed the store",
    "store.delete": "deleted the store",
    "store.share": "shared the store",
    "store.unshare": "stopped sharing the store",
    "store.export": "exported the store",
    "store.import": "imported the store",
    "store.reembed": "re-embedded the store",
    "store.owner": "gave the store to someone",
    "file.ingest": "added a file",
    "file.delete": "deleted a file",
    "file.attributes": "changed a file's attributes",
    "batch.cancel": "cancelled a batch",
    "user.create": "created an account",
    "user.update": "changed an account",
    "user.delete": "deleted an account",
    "user.password": "changed a password",
    "user.sign_in": "signed in",
    "user.sign_in_failed": "failed to sign in",
    "user.sign_out": "signed out",
    "user.invite": "made an invitation link",
    "user.deactivate": "deactivated an account",
    "user.activate": "activated an account",
    "key.create": "created an API key",
    "key.revoke": "revoked an API key",
    "group.create": "created a group",
    "group.delete": "deleted a group",
    "group.member": "changed a group",
    "group.update": "changed a group's settings",
    "scim.token": "made a provisioning (SCIM) token",
    "scim.revoke": "revoked the provisioning (SCIM) token",
    "settings.change": "changed the settings",
    "files.move": "moved the files to another file store",
    "files.cleanup": "deleted the old copies of the files",
    "quota.set": "set a quota",
}


class Audit:
    """The audit trail of one catalog. Thread-safe. Events are never edited."""

    def __init__(self, catalog: Cursors) -> None:
        self.catalog = catalog

    def record(
        self,
        actor: str,
        action: str,
        *,
        store: str | None = None,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> AuditEvent:
        """Add one event (now, UTC); its id sorts by time (nanoseconds, then 4 random bytes)."""
        event = AuditEvent(
            f"{time.time_ns():020d}{secrets.token_hex(4)}", now(), actor, action, store, target, dict(detail or {})
        )
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO audit_events (id, happened, actor, action, store, target, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    event.id,
                    event.at,
                    actor,
                    action,
                    store,
                    target,
                    json.dumps(event.detail, ensure_ascii=False, default=str),
                ],
            )
        return event

    def events(
        self,
        *,
        actor: str | None = None,
        action: str | None = None,
        store: str | None = None,
        since: datetime | None = None,
        limit: int = 500,
        before: str | None = None,
    ) -> list[AuditEvent]:
        """The newest events first (at most ``limit``), filtered by actor, action (or a prefix
        ending in ``.``: ``"file."``), store, and time; with ``before`` (an event's id) only the
        events older than that one (a keyset: the next page starts after the last id of this one)."""
        where: list[str] = []
        args: list[Any] = []
        if actor:
            where.append("actor = ?")
            args.append(actor)
        if action:
            where.append("action LIKE ?" if action.endswith(".") else "action = ?")
            args.append(action + "%" if action.endswith(".") else action)
        if store:
            where.append("store = ?")
            args.append(store)
        if since is not None:
            where.append("happened >= ?")
            args.append(since)
        if before:
            where.append("id < ?")
            args.append(before)
        sql = (
            "SELECT id, happened, actor, action, store, target, detail FROM audit_events"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY id DESC LIMIT ?"
        )
        with self.catalog.cursor() as cur:
            rows = cur.execute(sql, [*args, max(1, int(limit))]).fetchall()
        return [
            AuditEvent(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]) if isinstance(r[6], str) else dict(r[6] or {}))
            for r in rows
        ]
