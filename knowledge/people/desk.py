"""Account management, checked and audited once: :class:`AccountDesk`, what the CLI (``users``,
``groups``, ``keys``), the People and My account pages, the app's set-up and invitation forms and the
REST API call to add, change and delete accounts, groups, invitations and API keys.

Every method checks the acting person with :meth:`knowledge.people.policy.Policy.check`
(``account.manage``: an admin's; ``account.self``: one's own password, display name, keys and
session; ``account.join``: creating one's own account with an invitation or the first-run set-up
token, before anyone is signed in), then calls :class:`~knowledge.people.People`, then writes ONE
audit event with ONE shape, whatever surface asked (docs/security.md, *The audit trail*):

==================  ==========  ============================================================
action              target      detail
==================  ==========  ============================================================
``user.create``     the user    ``{"role"}``; the first admin ``{"role", "first": true}`` (its
                                actor is the new admin); by invitation ``{"role", "invited_by"}``
                                (its actor is the new user)
``user.update``     the user    ``{"role"}`` or ``{"display_name"}``
``user.password``   the user    ``{}`` for one's own; ``{"reset": true}`` for another's
``user.delete``     the user    ``{"stores_to", "stores"}``
``user.invite``     --          ``{"role", "expires"}`` (ISO 8601, UTC)
``group.create``    the group   ``{}``
``group.delete``    the group   ``{}`` (the group's store grants go with it)
``group.member``    the user    ``{"group", "added": true|false}``; set by a provider at sign-in
                                (:meth:`~knowledge.people.accounts.Accounts.set_groups_from`) also
                                ``{"source"}`` (``ldap``, ``oidc:<issuer>``, ``scim``), in the user's name
``key.create``      the user    ``{"key", "name"}`` (whose key it is)
``key.revoke``      the user    ``{"key", "name"}``
``scim.token``      --          ``{"ends"}`` (the new SCIM token's last four characters)
``scim.revoke``     --          ``{"tokens"}`` (how many were revoked)
==================  ==========  ============================================================

``group.member`` names the *user* as its target: being put in or taken out of a group changes what
that person may use, so the event is theirs to read on the Audit page (a member reads the events
whose actor or target is them). Sign-in itself (password, single sign-on, API key) stays on
:class:`~knowledge.people.People` (nobody acts yet), audited as before.

A part of :mod:`knowledge.people`: imports its own modules and the ground only.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from knowledge.errors import AccountNotFound, AuthenticationFailed, InvalidArgument, PermissionDenied
from knowledge.people import People
from knowledge.people.accounts import source_label
from knowledge.people.policy import Policy, checks
from knowledge.people.records import Actor, ApiKey, Invite, User


class AccountDesk:
    """The accounts, as ``actor`` may manage them.

    Args:
        people: the catalog's :class:`~knowledge.people.People` (unguarded).
        policy: who may do what (:class:`~knowledge.people.policy.Policy`).
        actor: who is asking (:data:`~knowledge.people.LOCAL_ADMIN` may do everything).

    Refusals are ``PermissionDenied`` with the words "Only an admin may <what>." (the method's own
    words, e.g. "add an account"); a missing account, group or key is ``InvalidArgument``.
    """

    def __init__(self, people: People, policy: Policy, actor: Actor) -> None:
        self._people, self._policy, self.actor = people, policy, actor

    # -- the checks -------------------------------------------------------------------------------
    def _check(self, action: str, what: str) -> None:
        """``policy.check(actor, action)``, refused in the words "Only an admin may ``what``."."""
        try:
            self._policy.check(self.actor, action)
        except PermissionDenied:
            raise PermissionDenied(f"Only an admin may {what}.") from None

    def _own(self, username: str) -> bool:
        """Whether ``username`` is the acting person's own account (never for the local admin)."""
        return not self.actor.local and self.actor.username == username

    def _check_own_or_manage(self, username: str, what: str) -> None:
        """``account.self`` for one's own account, else ``account.manage``."""
        self._check("account.self" if self._own(username) else "account.manage", what)

    def _record(
        self, action: str, *, target: str | None = None, detail: dict[str, Any] | None = None, actor: str | None = None
    ) -> None:
        self._people.audit.record(actor or self.actor.audit_name, action, target=target, detail=detail)

    @checks("account.manage")
    def may_manage(self) -> bool:
        """Whether the acting person may manage accounts (``account.manage``): the People page's gate."""
        return self._policy.allowed(self.actor, "account.manage")

    @checks("account.manage")
    def require_manage(self, what: str = "manage accounts") -> None:
        """Action ``account.manage``. Raises ``PermissionDenied`` ("Only an admin may ``what``.")."""
        self._check("account.manage", what)

    # -- reading ----------------------------------------------------------------------------------
    @checks("account.join")
    def enabled(self) -> bool:
        """Whether accounts are on (at least one exists). Anyone may ask (``account.join``): the app's
        gate asks it before anyone is signed in."""
        self._check("account.join", "ask")
        return self._people.enabled()

    @checks("account.self")
    def me(self) -> User:
        """The acting person's own account (``account.self``).

        Raises:
            InvalidArgument: the local admin (no account), or the account is gone.
        """
        self._check("account.self", "read an account")
        if self.actor.local:
            raise InvalidArgument("The local admin has no account.")
        return self._people.accounts.require(self.actor.username)

    @checks("account.manage")
    def users(self) -> list[User]:
        """Every account, by username (``account.manage``)."""
        self._check("account.manage", "list the accounts")
        return self._people.accounts.users()

    @checks("account.self", "account.manage")
    def user(self, username: str, what: str = "read another account") -> User:
        """The account ``username`` (one's own: ``account.self``; another's: ``account.manage``,
        refused as "Only an admin may ``what``.").

        Raises:
            InvalidArgument: there is no such account.
        """
        user = self._people.accounts.get(username)
        self._check_own_or_manage(user.username if user else username, what)
        if user is None:
            raise AccountNotFound(f"There is no account {username!r}.", param="username")
        return user

    @checks("account.manage")
    def admins(self) -> list[str]:
        """The admins' usernames, sorted (``account.manage``)."""
        self._check("account.manage", "list the accounts")
        return self._people.accounts.admins()

    @checks("account.manage")
    def groups(self) -> dict[str, list[str]]:
        """Every group and its members' usernames (``account.manage``)."""
        self._check("account.manage", "list the groups")
        return self._people.accounts.groups()

    @checks("account.manage")
    def group_sources(self) -> dict[tuple[str, str], str]:
        """The memberships a provider keeps, ``{(group, username): label}`` (``LDAP``, the sign-on
        provider's host, ``SCIM``), for "from <label>" (``account.manage``); hand-made ones are not in it."""
        self._check("account.manage", "list the groups")
        return {key: source_label(source) for key, source in self._people.accounts.sources().items()}

    @checks("account.self", "account.manage")
    def groups_of(self, username: str) -> list[str]:
        """The groups ``username`` is in (one's own: ``account.self``; another's: ``account.manage``)."""
        self._check_own_or_manage(username, "list the groups")
        return self._people.accounts.groups_of(username)

    @checks("account.manage")
    def sso_linked(self) -> set[str]:
        """The usernames linked to a single sign-on identity (``account.manage``)."""
        self._check("account.manage", "list the accounts")
        return self._people.accounts.sso_linked()

    # -- accounts ---------------------------------------------------------------------------------
    @checks("account.manage")
    def create_user(
        self,
        username: str,
        password: str | None,
        *,
        display_name: str | None = None,
        role: str = "member",
        email: str | None = None,
    ) -> User:
        """A new account (``account.manage``), recorded as ``user.create``. On a catalog without
        accounts it is the first admin (:meth:`set_up_admin`'s event, ``first: true``), so ``role``
        must be ``"admin"`` then.

        Raises:
            PermissionDenied: a member. InvalidArgument: a bad or taken name, a bad password or role;
                a first account that is no admin.
        """
        self._check("account.manage", "add an account")
        if not self._people.enabled():
            if role != "admin":
                raise InvalidArgument("The first account must be an admin.")
            if password is None:
                raise InvalidArgument("The first admin needs a password.")
            user = self._people.set_up_admin(username, password, display_name)
            return self._people.accounts.update(user.username, email=email) if email else user
        user = self._people.accounts.create(username, password, display_name=display_name, role=role, email=email)
        self._record("user.create", target=user.username, detail={"role": user.role})
        return user

    @checks("account.manage")
    def set_active(self, username: str, active: bool) -> User:
        """Deactivate (``active`` false) or reactivate ``username`` (``account.manage``), as SCIM's
        ``active`` does (:meth:`Accounts.set_active`: deactivating ends their app sessions and revokes
        their API keys at once); recorded as ``user.deactivate`` / ``user.activate``.

        Raises:
            PermissionDenied: a member. InvalidArgument: no such account, the last active admin.
        """
        self._check("account.manage", "deactivate or reactivate an account")
        user = self._people.accounts.set_active(username, active)
        self._record("user.activate" if active else "user.deactivate", target=user.username)
        return user

    @checks("account.manage")
    def set_role(self, username: str, role: str) -> User:
        """Make ``username`` an admin or a member (``account.manage``), recorded as ``user.update``
        ``{"role"}``.

        Raises:
            PermissionDenied: a member. InvalidArgument: no such account, a bad role, the last admin.
        """
        self._check("account.manage", "change a role")
        user = self._people.accounts.update(username, role=role)
        self._record("user.update", target=user.username, detail={"role": user.role})
        return user

    @checks("account.self", "account.manage")
    def set_display_name(self, username: str, display_name: str) -> User:
        """Change the name pages show for ``username`` (one's own: ``account.self``; another's:
        ``account.manage``), recorded as ``user.update`` ``{"display_name"}``.

        Raises:
            PermissionDenied: another's, by a member. InvalidArgument: no such account, a bad name.
        """
        self._check_own_or_manage(username, "change another account's name")
        user = self._people.accounts.update(username, display_name=display_name)
        self._record("user.update", target=user.username, detail={"display_name": user.display_name})
        return user

    @checks("account.self", "account.manage")
    def set_password(self, username: str, password: str, *, current: str | None = None) -> User:
        """Give ``username`` a new password; their app sessions end. One's own (``account.self``;
        with ``current``, that is checked first, throttled as a sign-in) is recorded as
        ``user.password`` ``{}``; another's (``account.manage``) as ``{"reset": true}``.

        Raises:
            PermissionDenied: another's, by a member. AuthenticationFailed: ``current`` is wrong.
            InvalidArgument: no such account, a bad password; one's own account signs in with its
                directory password (``accounts.ldap``: a local one would outlive the directory's; an
                admin may still set one).
        """
        user = self._people.accounts.get(username)
        self._check_own_or_manage(user.username if user else username, "set another account's password")
        if user is None:
            raise AccountNotFound(f"There is no account {username!r}.", param="username")
        if self._own(user.username) and not user.has_password and self._people.accounts.directory is not None:
            # a local password would outlive the directory's: disabled there, one would still sign in here
            raise InvalidArgument("Your password is the directory's (LDAP): change it there.", param="password")
        if current is not None:
            self._people.accounts.authenticate(user.username, current)
        self._people.accounts.set_password(user.username, password)
        self._record("user.password", target=user.username, detail={} if self._own(user.username) else {"reset": True})
        return user

    @checks("account.self")
    def start_session(self) -> str:
        """A new app session for the acting person (``account.self``): after changing one's own
        password (which ends every session) the browser that changed it stays signed in. Returns
        its token.

        Raises:
            AuthenticationFailed: the local admin (no account).
        """
        self._check("account.self", "start a session")
        if self.actor.local:
            raise AuthenticationFailed("The local admin has no account to sign in to.")
        return self._people.accounts.start_session(self.actor.username)

    @checks("account.manage")
    def delete_user(self, username: str, heir: str | None = None) -> list[str]:
        """Delete an account (``account.manage``); its stores pass to ``heir`` (an admin; default the
        acting admin, else the first admin). Recorded as ``user.delete`` ``{"stores_to", "stores"}``.
        Returns the stores handed over.

        Raises:
            PermissionDenied: a member. InvalidArgument: no such account, the last admin, ``heir`` no admin.
        """
        self._check("account.manage", "delete an account")
        return self._people.delete_user(username, by=self.actor, heir=heir)

    # -- SCIM provisioning ------------------------------------------------------------------------
    @checks("account.manage")
    def scim_token(self) -> str:
        """A new SCIM provisioning token (``account.manage``): the bearer token of the directory's
        SCIM client (``/scim/v2``, :mod:`knowledge.server.scim`), shown once (the catalog keeps its
        SHA-256 digest). Recorded as ``scim.token`` ``{"ends"}``.

        Raises:
            PermissionDenied: a member. InvalidArgument: no admin account exists yet.
        """
        self._check("account.manage", "make a SCIM provisioning token")
        if not self._people.accounts.admins():
            raise InvalidArgument(
                "Make the first admin first (python -m knowledge users add NAME --role admin): accounts a"
                " directory provisions are members, and nobody could manage them."
            )
        token = self._people.provisioning.create_token(self.actor.username)
        self._record("scim.token", detail={"ends": token[-4:]})
        return token

    @checks("account.manage")
    def revoke_scim_tokens(self) -> int:
        """Revoke every SCIM provisioning token (``account.manage``): the SCIM endpoints answer 404
        again. Recorded as ``scim.revoke`` ``{"tokens"}``. Returns how many were revoked.

        Raises:
            PermissionDenied: a member.
        """
        self._check("account.manage", "revoke the SCIM provisioning tokens")
        n = self._people.provisioning.revoke_tokens()
        self._record("scim.revoke", detail={"tokens": n})
        return n

    # -- invitations ------------------------------------------------------------------------------
    @checks("account.manage")
    def invite(self, role: str = "member") -> tuple[str, Invite]:
        """An invitation link's token for one account of ``role`` (``account.manage``), valid once
        for ``accounts.invite_hours``; recorded as ``user.invite`` ``{"role", "expires"}``. Returns
        ``(token, invitation)``; the token is shown once.

        Raises:
            PermissionDenied: a member. InvalidArgument: a bad role.
        """
        self._check("account.manage", "invite someone")
        token = self._people.accounts.invite(role, self.actor.username)
        invite = self._people.accounts.invitation(token)
        self._record("user.invite", detail={"role": invite.role, "expires": invite.expires.isoformat()})
        return token, invite

    @checks("account.join")
    def invitation(self, token: str | None) -> Invite:
        """The open invitation ``token`` (``account.join``: the token is the credential).

        Raises:
            AuthenticationFailed: unknown, used or expired.
        """
        self._check("account.join", "read an invitation")
        return self._people.accounts.invitation(token)

    @checks("account.join")
    def accept_invitation(self, token: str, username: str, password: str, display_name: str | None = None) -> User:
        """Create the account an invitation offers and use the invitation up (``account.join``),
        recorded as ``user.create`` ``{"role", "invited_by"}`` in the new user's name.

        Raises:
            AuthenticationFailed: the invitation is not valid. InvalidArgument: a bad or taken name,
                a bad password.
        """
        self._check("account.join", "accept an invitation")
        invite = self._people.accounts.invitation(token)
        user = self._people.accounts.accept(token, username, password, display_name=display_name)
        self._record(
            "user.create",
            target=user.username,
            detail={"role": user.role, "invited_by": invite.created_by},
            actor=user.username,
        )
        return user

    @checks("account.join")
    def set_up_admin(self, username: str, password: str, display_name: str | None = None) -> User:
        """The first account, an admin (``account.join``: the caller has checked the set-up token,
        or is the person at this machine), recorded as ``user.create`` ``{"role", "first": true}``
        in the new admin's name. One function for the app's set-up page and the People page.

        Raises:
            InvalidArgument: an account exists already, or a bad name or password.
        """
        self._check("account.join", "set up accounts")
        return self._people.set_up_admin(username, password, display_name)

    # -- groups -----------------------------------------------------------------------------------
    def _group(self, name: str) -> str:
        """The existing group ``name`` (spaces around it ignored). Raises InvalidArgument when there is none."""
        group = " ".join((name or "").split())
        if group not in self._people.accounts.groups():
            raise AccountNotFound(f"There is no group {name!r}.", param="group")
        return group

    @checks("account.manage")
    def create_group(self, name: str) -> str:
        """A new, empty group (``account.manage``), recorded as ``group.create``. Returns its name.

        Raises:
            PermissionDenied: a member. InvalidArgument: a bad or taken name.
        """
        self._check("account.manage", "add a group")
        group = self._people.accounts.create_group(name)
        self._record("group.create", target=group)
        return group

    @checks("account.manage")
    def delete_group(self, name: str) -> str:
        """Delete a group and the store grants made to it (``account.manage``), recorded as
        ``group.delete``. Returns its name.

        Raises:
            PermissionDenied: a member. InvalidArgument: no such group.
        """
        self._check("account.manage", "delete a group")
        group = self._group(name)
        self._people.accounts.delete_group(group)
        self._people.sharing.forget_group(group)
        self._record("group.delete", target=group)
        return group

    @checks("account.manage")
    def add_member(self, group: str, username: str) -> User:
        """Put ``username`` in ``group`` (``account.manage``), recorded as ``group.member``
        target=user ``{"group", "added": true}``. Returns the account.

        Raises:
            PermissionDenied: a member. InvalidArgument: no such group or account; the membership is
                kept by a provider ("... is from LDAP: change it in the directory.").
        """
        self._check("account.manage", "change a group")
        name, user = self._group(group), self._people.accounts.require(username)
        self._people.accounts.add_to_group(name, user.username)
        self._record("group.member", target=user.username, detail={"group": name, "added": True})
        return user

    @checks("account.manage")
    def remove_member(self, group: str, username: str) -> User:
        """Take ``username`` out of ``group`` (``account.manage``), recorded as ``group.member``
        target=user ``{"group", "added": false}``. Returns the account.

        Raises:
            PermissionDenied: a member. InvalidArgument: no such group or account, or not in it; the
                membership is kept by a provider ("... is from LDAP: change it in the directory.").
        """
        self._check("account.manage", "change a group")
        name, user = self._group(group), self._people.accounts.require(username)
        if name not in self._people.accounts.groups_of(user.username):
            raise InvalidArgument(f"{user.username} is not in the group {name!r}.")
        self._people.accounts.remove_from_group(name, user.username)
        self._record("group.member", target=user.username, detail={"group": name, "added": False})
        return user

    # -- API keys ---------------------------------------------------------------------------------
    @checks("account.self", "account.manage")
    def api_keys(self, username: str | None = None) -> list[ApiKey]:
        """API keys, newest first, revoked ones too: ``username``'s (one's own: ``account.self``;
        another's: ``account.manage``), or with ``None`` everyone's for an admin and one's own for a
        member.

        Raises:
            PermissionDenied: another's, by a member. InvalidArgument: no such account.
        """
        if username is None:
            if self._policy.allowed(self.actor, "account.manage"):
                return self._people.keys.list()
            self._check("account.self", "list the keys")
            return self._people.keys.list(self.actor.username)
        user = self._people.accounts.get(username)
        self._check_own_or_manage(user.username if user else username, "list another account's keys")
        if user is None:
            raise AccountNotFound(f"There is no account {username!r}.", param="username")
        return self._people.keys.list(user.username)

    @checks("account.self", "account.manage")
    def create_key(self, username: str, name: str) -> tuple[ApiKey, str]:
        """A new API key for ``username`` (one's own: ``account.self``; another's:
        ``account.manage``), recorded as ``key.create`` ``{"key", "name"}``. Returns ``(key, secret)``;
        the secret is shown once.

        Raises:
            PermissionDenied: another's, by a member. InvalidArgument: no such account, a bad name.
        """
        user = self._people.accounts.get(username)
        self._check_own_or_manage(user.username if user else username, "make a key for another account")
        if user is None:
            raise AccountNotFound(f"There is no account {username!r}.", param="username")
        key, secret = self._people.keys.create(user.username, name)
        self._record("key.create", target=user.username, detail={"key": key.id, "name": key.name})
        return key, secret

    @checks("account.self", "account.manage")
    def revoke_key(self, key_id: str) -> ApiKey:
        """Stop API key ``key_id`` now (one's own: ``account.self``; another's: ``account.manage``),
        recorded as ``key.revoke`` target=its user ``{"key", "name"}``. Returns the key as it was.

        Raises:
            InvalidArgument: no such key, or another's asked by a member (the same words: a key that
                is not one's own is not confirmed); revoked already.
        """
        key = self._people.keys.get((key_id or "").strip())
        if key is None or not self._policy.allowed(
            self.actor, "account.self" if self._own(key.username) else "account.manage"
        ):
            raise AccountNotFound(f"There is no API key {key_id!r}.", param="key_id")
        if not self._people.keys.revoke(key.id):
            revoked = key.revoked.astimezone(UTC).isoformat(timespec="seconds") if key.revoked else "before"
            raise InvalidArgument(f"The key {key.id} was revoked already ({revoked}).")
        self._record("key.revoke", target=key.username, detail={"key": key.id, "name": key.name})
        return key


__all__ = ["AccountDesk"]
