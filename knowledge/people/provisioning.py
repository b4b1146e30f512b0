"""SCIM 2.0 provisioning's side of the accounts (RFC 7643 resources, RFC 7644 protocol; the HTTP side
is :mod:`knowledge.server.scim`): the provisioning tokens, and the accounts and groups as a directory
provisions them -- a stable SCIM ``id`` and the provider's ``externalId`` kept for each, an account's
``active`` flag (deactivation: :meth:`~knowledge.people.accounts.Accounts.set_active`).

Every change is recorded in the audit trail with the actor ``scim`` (:data:`ACTOR`): ``user.create``,
``user.update``, ``user.deactivate``, ``user.activate``, ``user.delete`` (``{"stores_to", "stores"}``:
a deleted account's stores pass to an admin, :meth:`knowledge.people.People.delete_user`),
``group.create``, ``group.update``, ``group.delete``, ``group.member`` (target the user, ``{"group",
"added"}``), and the tokens' ``scim.token`` / ``scim.revoke`` in the admin's name.

A part of :mod:`knowledge.people`: imports its own modules and the ground only.
"""

from __future__ import annotations

import hmac
import json
import secrets
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from knowledge.errors import InvalidArgument
from knowledge.people.accounts import Accounts, Cursors, digest, normal_username, now
from knowledge.people.audit import Audit

#: The audit trail's actor of every change made over SCIM.
ACTOR = "scim"
#: Every provisioning token starts with this (``kscim-`` then 43 URL-safe characters: 256 random bits).
TOKEN_PREFIX = "kscim-"


@dataclass(frozen=True, slots=True)
class ProvisionedUser:
    """An account as SCIM sees it (RFC 7643 §4.1). ``groups`` are ``(scim_id, name)`` pairs;
    ``display_name`` and ``active`` are ``None`` when the provider left them out (the account then
    shows its username, and is active)."""

    username: str
    scim_id: str
    user_name: str
    display_name: str | None
    email: str | None
    active: bool | None
    external_id: str | None
    created: datetime
    modified: datetime
    groups: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ProvisionedGroup:
    """A group as SCIM sees it (RFC 7643 §4.2). ``members`` are ``(scim_id, username)`` pairs."""

    name: str
    scim_id: str
    external_id: str | None
    created: datetime
    modified: datetime
    members: tuple[tuple[str, str], ...] = field(default=())


def _unset(display_name: str | None, active: bool | None) -> str | None:
    """``users.scim_unset``: the optional attributes left out, as a JSON list (``None``: none)."""
    names = [n for n, v in (("displayName", display_name), ("active", active)) if v is None]
    return json.dumps(names) if names else None


class Provisioning:
    """The provisioning tokens, accounts and groups of one catalog, for SCIM. Thread-safe.

    Args:
        catalog: the catalog (``cursor()``).
        accounts: its :class:`~knowledge.people.accounts.Accounts`.
        audit: its audit trail.
    """

    def __init__(self, catalog: Cursors, accounts: Accounts, audit: Audit) -> None:
        self.catalog, self.accounts, self.audit = catalog, accounts, audit

    # -- tokens -----------------------------------------------------------------------------------
    def create_token(self, by: str) -> str:
        """A new provisioning token (the SCIM client's bearer token); returns it (shown once: the
        catalog keeps its SHA-256 digest and last four characters). Earlier tokens stay valid
        until :meth:`revoke_tokens`."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO scim_tokens (digest, hint, created_by, created) VALUES (?, ?, ?, ?)",
                [digest(secret), secret[-4:], by, now()],
            )
        return secret

    def revoke_tokens(self) -> int:
        """Revoke every provisioning token (SCIM is off again). Returns how many there were."""
        with self.catalog.cursor() as cur:
            return len(cur.execute("DELETE FROM scim_tokens RETURNING digest").fetchall())

    def enabled(self) -> bool:
        """Whether any provisioning token exists (without one the SCIM endpoints answer 404)."""
        with self.catalog.cursor() as cur:
            return cur.execute("SELECT 1 FROM scim_tokens LIMIT 1").fetchone() is not None

    def token_valid(self, secret: str | None) -> bool:
        """Whether ``secret`` is a provisioning token (compared by digest, in constant time)."""
        if not secret or not secret.startswith(TOKEN_PREFIX):
            return False
        d = digest(secret)
        with self.catalog.cursor() as cur:
            rows = cur.execute("SELECT digest FROM scim_tokens").fetchall()
        return any(hmac.compare_digest(d, r[0]) for r in rows)

    # -- reading ----------------------------------------------------------------------------------
    def _ids(self, table: str, key: str) -> None:
        """Give every row of ``table`` without a SCIM id one (accounts made before SCIM, by hand, by SSO)."""
        with self.catalog.cursor() as cur:
            missing = [r[0] for r in cur.execute(f"SELECT {key} FROM {table} WHERE scim_id IS NULL").fetchall()]
            for k in missing:
                cur.execute(f"UPDATE {table} SET scim_id = ? WHERE {key} = ? AND scim_id IS NULL", [uuid.uuid4().hex, k])

    def users(self) -> list[ProvisionedUser]:
        """Every account, by username."""
        self._ids("users", "username")
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT username, scim_id, coalesce(scim_user_name, username), display_name, email, active,"
                " external_id, created, coalesce(scim_modified, created), scim_unset FROM users ORDER BY username"
            ).fetchall()
            memberships = cur.execute(
                "SELECT m.username, g.scim_id, g.name FROM group_members m JOIN user_groups g ON g.name = m.group_name"
                " ORDER BY g.name"
            ).fetchall()
        groups: dict[str, list[tuple[str, str]]] = {}
        for username, gid, name in memberships:
            groups.setdefault(username, []).append((gid or "", name))
        out = []
        for r in rows:
            unset = set(json.loads(r[9])) if r[9] else set()
            out.append(
                ProvisionedUser(
                    r[0],
                    r[1],
                    r[2],
                    None if "displayName" in unset else r[3],
                    r[4],
                    None if "active" in unset else r[5] is not False,
                    r[6],
                    r[7],
                    r[8],
                    tuple(groups.get(r[0], ())),
                )
            )
        return out

    def user(self, scim_id: str) -> ProvisionedUser | None:
        return next((u for u in self.users() if u.scim_id == scim_id), None)

    def groups(self) -> list[ProvisionedGroup]:
        """Every group, by name."""
        self._ids("user_groups", "name")
        self._ids("users", "username")
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT name, scim_id, external_id, created, coalesce(scim_modified, created) FROM user_groups ORDER BY name"
            ).fetchall()
            members = cur.execute(
                "SELECT m.group_name, u.scim_id, u.username FROM group_members m JOIN users u ON u.username = m.username"
                " ORDER BY u.username"
            ).fetchall()
        by_group: dict[str, list[tuple[str, str]]] = {}
        for g, uid, username in members:
            by_group.setdefault(g, []).append((uid, username))
        return [ProvisionedGroup(r[0], r[1], r[2], r[3], r[4], tuple(by_group.get(r[0], ()))) for r in rows]

    def group(self, scim_id: str) -> ProvisionedGroup | None:
        return next((g for g in self.groups() if g.scim_id == scim_id), None)

    # -- users ------------------------------------------------------------------------------------
    def create_user(
        self,
        user_name: str,
        *,
        display_name: str | None = None,
        email: str | None = None,
        external_id: str | None = None,
        active: bool | None = True,
    ) -> ProvisionedUser:
        """A new member account without a password (it signs in by single sign-on or LDAP), its
        username ``normal_username(user_name)``. ``display_name`` or ``active`` ``None``: left out
        (the account shows its username; it is active). Recorded as ``user.create`` ``{"role", "scim_id"}``.

        Raises:
            InvalidArgument: a bad userName (:func:`~knowledge.people.accounts.normal_username`), or taken.
        """
        user = self.accounts.create(user_name, None, display_name=display_name, email=email)
        scim_id = uuid.uuid4().hex
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE users SET scim_id = ?, external_id = ?, scim_user_name = ?, scim_modified = ?, active = ?,"
                " scim_unset = ? WHERE username = ?",
                [
                    scim_id,
                    external_id,
                    user_name.strip(),
                    now(),
                    active is not False,
                    _unset(display_name, active),
                    user.username,
                ],
            )
        self.audit.record(ACTOR, "user.create", target=user.username, detail={"role": user.role, "scim_id": scim_id})
        if active is False:
            self.audit.record(ACTOR, "user.deactivate", target=user.username)
        return self._user_of(user.username)

    def _user_of(self, username: str) -> ProvisionedUser:
        found = next((u for u in self.users() if u.username == username), None)
        if found is None:
            raise InvalidArgument(f"There is no account {username!r}.")
        return found

    def update_user(
        self,
        before: ProvisionedUser,
        *,
        user_name: str,
        display_name: str | None,
        email: str | None,
        external_id: str | None,
        active: bool | None,
    ) -> ProvisionedUser:
        """Write a provisioned account's new values (a PUT or a PATCH applied): its SCIM userName
        (the account's username stays: it is the account's key; a new userName may not be another
        account's), display name, e-mail address, externalId, and ``active`` (deactivation ends
        their sessions and revokes their keys at once: :meth:`Accounts.set_active`). Recorded as
        ``user.update`` ``{"changed": [...]}`` and ``user.deactivate`` / ``user.activate``.

        Raises:
            InvalidArgument: a bad value, a userName another account has, the last active admin deactivated.
        """
        name = normal_username(user_name)
        if name != before.username and self.accounts.get(name) is not None:
            raise InvalidArgument(f"The userName {user_name!r} is another account's.", param="userName")
        taken = [u for u in self.users() if u.username != before.username and normal_username(u.user_name) == name]
        if taken:
            raise InvalidArgument(f"The userName {user_name!r} is another account's.", param="userName")
        changed = [
            label
            for label, old, new in (
                ("userName", before.user_name, user_name.strip()),
                ("displayName", before.display_name, display_name),
                ("emails", before.email, email),
                ("externalId", before.external_id, external_id),
            )
            if old != new
        ]
        if active is None and before.active is not None:  # removed (the account stays as it is)
            changed.append("active")
        if changed or (before.active is None) != (active is None):
            self.accounts.update(before.username, display_name=display_name or before.username, email=email or "")
            with self.catalog.cursor() as cur:
                cur.execute(
                    "UPDATE users SET scim_user_name = ?, external_id = ?, scim_modified = ?, scim_unset = ?"
                    " WHERE username = ?",
                    [user_name.strip(), external_id, now(), _unset(display_name, active), before.username],
                )
        if changed:
            self.audit.record(ACTOR, "user.update", target=before.username, detail={"changed": changed})
        if (active is not False) != (before.active is not False):
            active = active is not False
            self.accounts.set_active(before.username, active)
            with self.catalog.cursor() as cur:
                cur.execute("UPDATE users SET scim_modified = ? WHERE username = ?", [now(), before.username])
            self.audit.record(ACTOR, "user.activate" if active else "user.deactivate", target=before.username)
        return self._user_of(before.username)

    # -- groups -----------------------------------------------------------------------------------
    def create_group(self, name: str, *, external_id: str | None = None, members: list[str] = ()) -> ProvisionedGroup:  # type: ignore[assignment]
        """A new group named ``name`` with the accounts of SCIM ids ``members``. Recorded as
        ``group.create`` and one ``group.member`` per member.

        Raises:
            InvalidArgument: a bad or taken name, a member no account has.
        """
        usernames = self._usernames(members)
        group = self.accounts.create_group(name)
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE user_groups SET scim_id = ?, external_id = ?, scim_modified = ? WHERE name = ?",
                [uuid.uuid4().hex, external_id, now(), group],
            )
        self.audit.record(ACTOR, "group.create", target=group)
        for u in usernames:
            self._member(group, u, True)
        return self._group_of(group)

    def _group_of(self, name: str) -> ProvisionedGroup:
        found = next((g for g in self.groups() if g.name == name), None)
        if found is None:
            raise InvalidArgument(f"There is no group {name!r}.")
        return found

    def _usernames(self, scim_ids: Any) -> list[str]:
        by_id = {u.scim_id: u.username for u in self.users()}
        missing = [i for i in scim_ids if i not in by_id]
        if missing:
            raise InvalidArgument(f"No account has the SCIM id {missing[0]!r}.", param="members")
        return [by_id[i] for i in dict.fromkeys(scim_ids)]

    def _member(self, group: str, username: str, added: bool) -> None:
        """Add ``username`` to ``group`` or take them out, as a membership SCIM keeps (source ``scim``,
        :meth:`Accounts.set_groups_from`): one made by hand is neither marked SCIM's nor removed, and
        hand edits of SCIM's are refused. Audited as ``group.member`` by ``scim`` with the source."""
        kept = self.accounts.groups_from(username, "scim")
        kept = kept | {group} if added else kept - {group}
        self.accounts.set_groups_from(username, "scim", kept, actor=ACTOR)

    def update_group(
        self, before: ProvisionedGroup, *, name: str, external_id: str | None, members: list[str]
    ) -> ProvisionedGroup:
        """Write a group's new values (a PUT or a PATCH applied): its name (a rename keeps its
        members; its store grants follow the new name), externalId and members (SCIM ids). Recorded
        as ``group.update`` ``{"changed"}`` and one ``group.member`` per member added or removed.

        Raises:
            InvalidArgument: a bad or taken name, a member no account has.
        """
        usernames = self._usernames(members)
        group = before.name
        changed = []
        if " ".join((name or "").split()) != before.name:
            group = self._rename(before.name, name)
            changed.append("displayName")
        if external_id != before.external_id:
            changed.append("externalId")
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE user_groups SET external_id = ?, scim_modified = ? WHERE name = ?", [external_id, now(), group]
            )
        if changed:
            self.audit.record(ACTOR, "group.update", target=group, detail={"changed": changed, "was": before.name})
        old = {u for _, u in before.members}
        for u in usernames:
            if u not in old:
                self._member(group, u, True)
        for u in sorted(old - set(usernames)):
            self._member(group, u, False)
        return self._group_of(group)

    def _rename(self, old: str, new: str) -> str:
        group = " ".join((new or "").split())
        if not group or len(group) > 64:
            raise InvalidArgument("A group name needs 1 to 64 characters.", param="displayName")
        with self.catalog.cursor() as cur:
            if cur.execute("SELECT 1 FROM user_groups WHERE name = ?", [group]).fetchone():
                raise InvalidArgument(f"The group {group!r} exists.", param="displayName")
            cur.execute("BEGIN TRANSACTION")
            try:
                cur.execute("UPDATE user_groups SET name = ? WHERE name = ?", [group, old])
                cur.execute("UPDATE group_members SET group_name = ? WHERE group_name = ?", [group, old])
                cur.execute("UPDATE store_grants SET principal = ? WHERE kind = 'group' AND principal = ?", [group, old])
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        return group

    def delete_group(self, group: ProvisionedGroup) -> None:
        """Delete a group (its members stay; its store grants go with it). Recorded as ``group.delete``."""
        self.accounts.delete_group(group.name)
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM store_grants WHERE kind = 'group' AND principal = ?", [group.name])
        self.audit.record(ACTOR, "group.delete", target=group.name, detail={"scim_id": group.scim_id})


__all__ = ["ACTOR", "TOKEN_PREFIX", "ProvisionedGroup", "ProvisionedUser", "Provisioning"]
