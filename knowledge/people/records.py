"""The records of :mod:`knowledge.people`: accounts, the acting person, grants, keys, audit events."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

Role = Literal["admin", "member"]
ROLES: tuple[Role, ...] = ("admin", "member")

#: What a person may do to a store, weakest first: ``read`` (list, search, chat over, export),
#: ``write`` (also ingest, delete files, set attributes), ``owner`` (also delete, share, re-embed).
Level = Literal["read", "write", "owner"]
LEVELS: tuple[Level, ...] = ("read", "write", "owner")

#: Who a grant names: one ``user``, a ``group`` of users, or ``everyone`` with an account.
GrantKind = Literal["user", "group", "everyone"]
GRANT_KINDS: tuple[GrantKind, ...] = ("user", "group", "everyone")


def at_least(level: str | None, wanted: str) -> bool:
    """Whether ``level`` (``None``: no access) allows what ``wanted`` needs (:data:`LEVELS` order)."""
    return level is not None and LEVELS.index(level) >= LEVELS.index(wanted)


@dataclass(frozen=True, slots=True)
class User:
    """An account. ``username`` is the key (NFC, case-folded); ``password_hash`` is ``None`` for an
    account that signs in through single sign-on only."""

    username: str
    display_name: str
    role: Role
    created: datetime
    email: str | None = None
    has_password: bool = True
    #: ``False``: deactivated (SCIM ``active: false``): no sign-in, no API key, no app session.
    active: bool = True

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is asking: an account with its role and groups, or :data:`LOCAL_ADMIN`.

    ``local`` marks the person at this machine when no account exists (the app on loopback or behind
    the one shared password, the CLI without ``--user``): everything is allowed, as before accounts.
    """

    username: str
    role: Role
    groups: frozenset[str] = frozenset()
    display_name: str = ""
    local: bool = False
    #: Where a local admin's request came from, named in the audit trail instead of ``local``: the
    #: person at the command line, ``cli:<OS user>@<host>`` (``""``: nowhere said).
    via: str = ""

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def audit_name(self) -> str:
        """The name the audit trail records: the username, or for the local admin where the request
        came from when known (``cli:alice@laptop``)."""
        return self.via if self.local and self.via else self.username

    @property
    def label(self) -> str:
        """How a page names this person (display name, else username)."""
        return self.display_name or self.username


#: The person at this machine, before any account exists (and the CLI's default).
LOCAL_ADMIN = Actor("local", "admin", frozenset(), "Local admin", local=True)


@dataclass(frozen=True, slots=True)
class Grant:
    """``store`` shared with ``principal`` (a username, a group name, ``""`` for everyone) at ``level``
    (``read`` or ``write``)."""

    store: str
    kind: GrantKind
    principal: str
    level: Level

    def describe(self) -> str:
        who = "everyone" if self.kind == "everyone" else f"{self.kind} {self.principal}"
        return f"{who}: {'read and write' if self.level == 'write' else 'read'}"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A per-user API key, without its secret (shown once, at creation). ``hint`` is the secret's
    last four characters; ``revoked`` is set once it stops working."""

    id: str
    username: str
    name: str
    hint: str
    created: datetime
    last_used: datetime | None = None
    revoked: datetime | None = None

    @property
    def active(self) -> bool:
        return self.revoked is None


@dataclass(frozen=True, slots=True)
class Invite:
    """An invitation link's record (the link's token is shown once, when it is made)."""

    role: Role
    created_by: str
    created: datetime
    expires: datetime
    used_by: str | None = None


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One line of the audit trail: ``actor`` did ``action`` (``store.create``, ``file.ingest``,
    ``file.delete``, ``store.export``, ``store.share`` ...) at ``at`` (UTC), on ``store`` and
    ``target`` (a file id, a username) where they apply, with ``detail``."""

    id: str
    at: datetime
    actor: str
    action: str
    store: str | None = None
    target: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
