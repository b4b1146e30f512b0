"""``/v1/knowledge/...``: this server's own endpoints about people (OpenAI has none of these).

``GET /v1/knowledge/me`` says whom the request's key acts as (``username``, ``role``, ``groups``;
without accounts the local admin, ``accounts: false``). ``GET /v1/knowledge/audit`` is the audit
trail, newest first, for an admin only (403 ``permission_denied`` otherwise), filtered by ``actor``,
``action`` (or a prefix ending in ``.``: ``file.``), ``store`` (a name), ``since`` (Unix seconds)
and ``limit`` (1 to 1000, default 100).

Account management, an admin's (a member may list, make and revoke their own keys), each call one
:class:`~knowledge.people.desk.AccountDesk` method, so a change made here is checked and audited
exactly as from the CLI or the People page: ``GET/POST /v1/knowledge/users``, ``POST/DELETE
/v1/knowledge/users/{username}`` (role, display name, password; ``heir``), ``POST
/v1/knowledge/invites``, ``GET/POST /v1/knowledge/groups``, ``DELETE /v1/knowledge/groups/{group}``,
``POST /v1/knowledge/groups/{group}/members`` and ``DELETE .../members/{username}``, ``GET/POST
/v1/knowledge/keys`` and ``DELETE /v1/knowledge/keys/{key_id}``. Refusals are 403
``permission_denied``; a missing account, group or key 404 ``not_found`` naming the parameter
(``username``, ``group``, ``key_id``); a bad value 400, naming the field where it is one (``role``,
``heir``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from knowledge.people import ApiKey, User, invite_link
from knowledge.server.http import bad
from knowledge.server.objects import Api, ts

router = APIRouter(prefix="/v1/knowledge", tags=["people"])


@router.get("/me", summary="Whom the API key acts as")
def me(api: Api) -> dict:
    actor = api.actor
    return {
        "object": "knowledge.user",
        "username": actor.username,
        "display_name": actor.label,
        "role": actor.role,
        "groups": sorted(actor.groups),
        "accounts": not actor.local,
    }


@router.get(
    "/audit",
    summary="The audit trail: an admin's every event; a member's, the events of the stores"
    " they may use and of their own account",
)
def audit(
    api: Api,
    actor: str | None = None,
    action: str | None = None,
    store: str | None = None,
    since: int | None = None,
    limit: int = 100,
) -> dict:
    if not 1 <= limit <= 1000:
        raise bad(f"limit must be between 1 and 1000, got {limit}.", "limit")
    if since is not None and not 0 <= since < 1 << 40:
        raise bad(f"since must be a Unix time in seconds, got {since}.", "since")
    when = datetime.fromtimestamp(since, UTC) if since is not None else None
    events = api.wb.audit_events(actor=actor or None, action=action or None, store=store or None, since=when, limit=limit)
    return {
        "object": "list",
        "data": [
            {
                "id": e.id,
                "object": "knowledge.audit_event",
                "created_at": ts(e.at),
                "actor": e.actor,
                "action": e.action,
                "store": e.store,
                "target": e.target,
                "detail": e.detail,
            }
            for e in events
        ],
    }


# -- account management (AccountDesk) ------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NewUser(_Body):
    username: str
    password: str | None = None
    display_name: str | None = None
    role: str = "member"
    email: str | None = None


class UserChange(_Body):
    role: str | None = None
    display_name: str | None = None
    password: str | None = None


class NewInvite(_Body):
    role: str = "member"


class NewGroup(_Body):
    name: str


class Member(_Body):
    username: str


class NewKey(_Body):
    name: str
    username: str | None = None


def user_object(u: User) -> dict:
    return {
        "object": "knowledge.user",
        "username": u.username,
        "display_name": u.display_name,
        "role": u.role,
        "email": u.email,
        "password": u.has_password,
        "created_at": ts(u.created),
    }


def key_object(k: ApiKey) -> dict:
    return {
        "object": "knowledge.api_key",
        "id": k.id,
        "username": k.username,
        "name": k.name,
        "hint": k.hint,
        "created_at": ts(k.created),
        "last_used_at": ts(k.last_used) if k.last_used else None,
        "revoked_at": ts(k.revoked) if k.revoked else None,
        "active": k.active,
    }


@router.get("/users", summary="Every account (an admin's)")
def list_users(api: Api) -> dict:
    return {"object": "list", "data": [user_object(u) for u in api.wb.accounts.users()]}


@router.post("/users", summary="Add an account (an admin's)")
def create_user(body: NewUser, api: Api) -> dict:
    return user_object(
        api.wb.accounts.create_user(
            body.username, body.password, display_name=body.display_name, role=body.role, email=body.email
        )
    )


@router.get("/users/{username}", summary="One account (one's own, or an admin's)")
def get_user(username: str, api: Api) -> dict:
    return user_object(api.wb.accounts.user(username))


@router.post(
    "/users/{username}", summary="Change an account: role (an admin's), display name or password (one's own, or an admin's)"
)
def modify_user(username: str, body: UserChange, api: Api) -> dict:
    desk = api.wb.accounts
    user = desk.user(username, "change another account")
    if body.role is not None:
        user = desk.set_role(user.username, body.role)
    if body.display_name is not None:
        user = desk.set_display_name(user.username, body.display_name)
    if body.password is not None:
        user = desk.set_password(user.username, body.password)
    return user_object(user)


@router.delete("/users/{username}", summary="Delete an account; its stores pass to an admin (an admin's)")
def delete_user(username: str, api: Api, heir: str | None = None) -> dict:
    stores = api.wb.accounts.delete_user(username, heir=heir or None)
    return {"object": "knowledge.user.deleted", "username": username, "deleted": True, "stores": stores}


@router.post("/invites", summary="An invitation token for one new account (an admin's; shown once)")
def create_invite(api: Api, body: NewInvite | None = None) -> dict:
    token, invite = api.wb.accounts.invite((body or NewInvite()).role)
    return {
        "object": "knowledge.invite",
        "token": token,
        "role": invite.role,
        "expires_at": ts(invite.expires),
        "link": invite_link(token, api.wb.settings.app.public_url),
    }


@router.get("/groups", summary="Every group and its members (an admin's)")
def list_groups(api: Api) -> dict:
    sources = api.wb.accounts.group_sources()
    return {
        "object": "list",
        "data": [
            {
                "object": "knowledge.group",
                "name": g,
                "members": m,
                # the members a provider keeps (LDAP, the sign-on provider, SCIM): not editable by hand
                "sources": {u: sources[(g, u)] for u in m if (g, u) in sources},
            }
            for g, m in api.wb.accounts.groups().items()
        ],
    }


@router.post("/groups", summary="Add a group (an admin's)")
def create_group(body: NewGroup, api: Api) -> dict:
    return {"object": "knowledge.group", "name": api.wb.accounts.create_group(body.name), "members": []}


@router.delete("/groups/{group}", summary="Delete a group and its store grants (an admin's)")
def delete_group(group: str, api: Api) -> dict:
    return {"object": "knowledge.group.deleted", "name": api.wb.accounts.delete_group(group), "deleted": True}


@router.post("/groups/{group}/members", summary="Put an account in a group (an admin's)")
def add_member(group: str, body: Member, api: Api) -> dict:
    user = api.wb.accounts.add_member(group, body.username)
    return {"object": "knowledge.group.member", "group": " ".join(group.split()), "username": user.username}


@router.delete("/groups/{group}/members/{username}", summary="Take an account out of a group (an admin's)")
def remove_member(group: str, username: str, api: Api) -> dict:
    user = api.wb.accounts.remove_member(group, username)
    return {
        "object": "knowledge.group.member.deleted",
        "group": " ".join(group.split()),
        "username": user.username,
        "deleted": True,
    }


@router.get("/keys", summary="API keys: one's own; an admin, everyone's or ``username``'s")
def list_keys(api: Api, username: str | None = None) -> dict:
    return {"object": "list", "data": [key_object(k) for k in api.wb.accounts.api_keys(username or None)]}


@router.post("/keys", summary="A new API key (one's own; an admin, anyone's); the secret is shown once")
def create_key(body: NewKey, api: Api) -> dict:
    key, secret = api.wb.accounts.create_key(body.username or api.actor.username, body.name)
    return {**key_object(key), "secret": secret}


@router.delete("/keys/{key_id}", summary="Revoke an API key now (one's own; an admin, anyone's)")
def revoke_key(key_id: str, api: Api) -> dict:
    key = api.wb.accounts.revoke_key(key_id)
    return {"object": "knowledge.api_key.deleted", "id": key.id, "deleted": True}


__all__ = ["audit", "me", "router"]
