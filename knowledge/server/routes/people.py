"""``/v1/knowledge/...``: this server's own endpoints about people (OpenAI has none of these).

``GET /v1/knowledge/me`` says whom the request's key acts as (``username``, ``role``, ``groups``;
without accounts the local admin, ``accounts: false``). ``GET /v1/knowledge/audit`` is the audit
trail, newest first, for an admin only (403 ``permission_denied`` otherwise), filtered by ``actor``,
``action`` (or a prefix ending in ``.``: ``file.``), ``store`` (a name), ``since`` (Unix seconds)
and ``limit`` (1 to 1000, default 100).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter

from knowledge.server.http import bad
from knowledge.server.objects import Api, ts

router = APIRouter(prefix="/v1/knowledge", tags=["people"])


@router.get("/me", summary="Whom the API key acts as")
def me(api: Api) -> dict:
    actor = api.actor
    return {"object": "knowledge.user", "username": actor.username, "display_name": actor.label,
            "role": actor.role, "groups": sorted(actor.groups), "accounts": not actor.local}


@router.get("/audit", summary="The audit trail: an admin's every event; a member's, the events of the stores"
            " they may use and of their own account")
def audit(api: Api, actor: str | None = None, action: str | None = None, store: str | None = None,
          since: int | None = None, limit: int = 100) -> dict:
    if not 1 <= limit <= 1000:
        raise bad(f"limit must be between 1 and 1000, got {limit}.", "limit")
    if since is not None and not 0 <= since < 1 << 40:
        raise bad(f"since must be a Unix time in seconds, got {since}.", "since")
    when = datetime.fromtimestamp(since, UTC) if since is not None else None
    events = api.wb.audit_events(actor=actor or None, action=action or None, store=store or None,
                                 since=when, limit=limit)
    return {"object": "list", "data": [
        {"id": e.id, "object": "knowledge.audit_event", "created_at": ts(e.at), "actor": e.actor, "action": e.action,
         "store": e.store, "target": e.target, "detail": e.detail} for e in events]}


__all__ = ["audit", "me", "router"]
