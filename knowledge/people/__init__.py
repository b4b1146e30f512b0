"""People: accounts and groups (``accounts.py``), who may use which store (``sharing.py``), per-user
API keys (``keys.py``), the audit trail (``audit.py``) and quotas (``quotas.py``), all in the catalog; :class:`People` is the
face the workbench holds. Accounts are off until the first one exists: until then everyone is the
local admin (:data:`LOCAL_ADMIN`), as before.

A part beside ``ingest`` and ``llm``: may import the ground (``access`` for the password hash,
``config``, ``errors``, ``_names``) and nothing else of the project (it reaches the catalog through
its ``cursor()`` only).
"""

from __future__ import annotations

from typing import Any

from knowledge.config import Settings
from knowledge.errors import AuthenticationFailed, InvalidArgument
from knowledge.people.accounts import Accounts, Cursors, invite_link, normal_username
from knowledge.people.audit import ACTION_WORDS, ACTIONS, Audit
from knowledge.people.directory import DirectoryUnavailable
from knowledge.people.keys import PREFIX, ApiKeys
from knowledge.people.provisioning import Provisioning
from knowledge.people.quotas import Quotas, RateCounter
from knowledge.people.records import (
    GRANT_KINDS,
    LEVELS,
    LOCAL_ADMIN,
    ROLES,
    Actor,
    ApiKey,
    AuditEvent,
    Grant,
    Invite,
    Level,
    Role,
    User,
    at_least,
)
from knowledge.people.sharing import Sharing
from knowledge.people.sso import SingleSignOn, SsoClaims


class People:
    """Accounts, sharing, API keys and the audit trail of one catalog.

    Args:
        catalog: the catalog (``cursor()``).
        settings: ``accounts.*``.
        sleep: how a sign-in delay is served (tests record it instead).
    """

    def __init__(self, catalog: Cursors, settings: Settings, sleep: Any = None) -> None:
        self.settings = settings
        self.audit = Audit(catalog)
        self.accounts = Accounts(catalog, settings, audit=self.audit, **({"sleep": sleep} if sleep else {}))
        self.sharing = Sharing(catalog, admins_see_all=settings.accounts.admins_see_all)
        self.keys = ApiKeys(catalog)
        #: SCIM provisioning: its tokens, the accounts and groups a directory provisions.
        self.provisioning = Provisioning(catalog, self.accounts, self.audit)
        #: Quotas of stored bytes, files and chunks, and each key's requests a minute (migration 20).
        self.quotas = Quotas(catalog, settings, self.accounts.groups_of)
        self.rates = RateCounter(catalog, shared=getattr(catalog, "dialect", "duckdb") == "postgresql")
        # a deleted account's or group's own limits go with it (a later one of the name starts from the settings)
        self.accounts.reader_gone.append(lambda principal: self.quotas.forget(*principal.split(":", 1)))

    def enabled(self) -> bool:
        """Whether accounts are on (at least one exists)."""
        return self.accounts.exist()

    def set_up_admin(self, username: str, password: str, display_name: str | None = None) -> User:
        """The first account, an admin (first-run set-up). Stores made before it are the admins'.

        Raises:
            InvalidArgument: an account exists already, or a bad name or password.
        """
        if self.enabled():
            raise InvalidArgument("Accounts are set up already; an admin adds the next ones.")
        user = self.accounts.create(username, password, display_name=display_name, role="admin")
        self.audit.record(user.username, "user.create", target=user.username, detail={"role": "admin", "first": True})
        return user

    def sign_in(self, username: str, password: str) -> tuple[Actor, str]:
        """Check the password (throttled per account) and start an app session: ``(actor, token)``.

        With ``accounts.ldap.url`` set, an account without a password of its own signs in with its
        directory password, and its directory groups are read (:meth:`Accounts.authenticate`).

        Raises:
            AuthenticationFailed: wrong username or password (recorded as ``user.sign_in_failed``).
            DirectoryUnavailable: the directory cannot be reached (recorded as ``user.sign_in_failed``
                ``{"reason": "directory unavailable"}``); its words say so.
        """
        try:
            user = self.accounts.authenticate(username, password)
        except DirectoryUnavailable:
            self.audit.record(str(username)[:64], "user.sign_in_failed", detail={"reason": "directory unavailable"})
            raise
        except AuthenticationFailed:
            self.audit.record(str(username)[:64], "user.sign_in_failed")
            raise
        self.audit.record(user.username, "user.sign_in")
        return self.accounts.actor(user.username), self.accounts.start_session(user.username)

    def sign_out(self, token: str | None, actor: Actor | None = None) -> None:
        self.accounts.end_session(token)
        if actor is not None and not actor.local:
            self.audit.record(actor.username, "user.sign_out")

    def session_actor(self, token: str | None) -> Actor:
        """Who the app session ``token`` is signed in as (their role and groups now).

        Raises:
            AuthenticationFailed: no such session, expired or ended, or its account is gone.
        """
        return self.accounts.session_actor(token)

    def single_sign_on(self) -> SingleSignOn:
        """The mapping of a provider's identities to these accounts (:mod:`knowledge.people.sso`),
        with the ``accounts.sso_create_members``, ``accounts.session_hours`` and the groups' and
        roles' claims (``accounts.sso_groups_claim``, ``sso_group_map``, ``sso_groups_removed``,
        ``sso_roles_claim``, ``sso_role_map``) settings."""
        a = self.settings.accounts
        return SingleSignOn(
            self.accounts,
            self.audit,
            create_members=a.sso_create_members,
            session_hours=a.session_hours,
            claims=SsoClaims(a.sso_groups_claim, a.sso_group_map, a.sso_groups_removed, a.sso_roles_claim, a.sso_role_map),
        )

    def key_actor(self, secret: str | None) -> Actor:
        """Who a request with API key ``secret`` acts as (their role and groups now).

        Raises:
            AuthenticationFailed: no key, unknown, revoked, or its account is gone.
        """
        return self.accounts.actor(self.keys.username_of(secret))

    def delete_user(self, username: str, by: Actor | str, heir: str | None = None) -> list[str]:
        """Delete an account; its stores pass to ``heir`` (an admin; default ``by`` when an admin,
        else the first admin), never to nobody. Returns the stores handed over. ``by`` is who acts
        (an :class:`Actor`, or a name such as ``"scim"`` for a provisioning client).

        Raises:
            InvalidArgument: no such account, the last admin, or ``heir`` is no admin.
        """
        user = self.accounts.require(username)
        admins = [a for a in self.accounts.admins() if a != user.username]
        active = [a for a in admins if (u := self.accounts.get(a)) is not None and u.active]
        admins = active + [a for a in admins if a not in active]  # a deactivated admin inherits last
        by_name = by if isinstance(by, str) else by.username
        default = by_name if by_name in admins else (admins[0] if admins else None)
        heir = default if heir is None else normal_username(heir)
        if heir is None or heir not in admins:
            raise InvalidArgument(
                f"The stores of {user.username} pass to an admin; {heir!r} is none"
                if heir
                else f"{user.username} is the last admin and cannot be deleted.",
                param="heir" if heir else None,
            )
        self.accounts.remove(user.username)
        stores = self.sharing.hand_over(user.username, heir)
        self.audit.record(by_name, "user.delete", target=user.username, detail={"stores_to": heir, "stores": stores})
        return stores


__all__ = [
    "ACTIONS",
    "ACTION_WORDS",
    "GRANT_KINDS",
    "LEVELS",
    "LOCAL_ADMIN",
    "PREFIX",
    "ROLES",
    "Accounts",
    "Actor",
    "ApiKey",
    "ApiKeys",
    "Audit",
    "AuditEvent",
    "Grant",
    "Invite",
    "Level",
    "People",
    "Provisioning",
    "Role",
    "Sharing",
    "User",
    "at_least",
    "invite_link",
    "normal_username",
]
