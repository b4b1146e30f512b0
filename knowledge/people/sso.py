"""Single sign-on through OpenID Connect: which account a provider's identity is, without Streamlit.

The app's page (``pages/_sso.py``) hands the ID token's claims that ``st.login`` put in ``st.user``
(``iss``, ``sub``, ``email``, ``email_verified``, ``name``, ``preferred_username``, ``iat``) to
:meth:`SingleSignOn.sign_in`. The identity is the account already linked to it (``users.sso_issuer``
and ``sso_subject``, migration 10); else the one account whose e-mail address the provider says is
verified (then linked); else, with ``accounts.sso_create_members``, a new member account; else it is
refused with a sentence saying what to ask an admin. The role is always the one the admin set: the
provider's claims never change it, unless ``accounts.sso_role_map`` says how (:class:`SsoClaims`);
the groups a claim lists (``accounts.sso_groups_claim``) are the person's memberships from that
provider (source ``oidc:<issuer>``), set at every sign-in. :func:`provider_problems` checks the ``[auth]`` section of
Streamlit's ``secrets.toml`` (OpenID Connect Core 1.0, section 2 for the claims; Streamlit's
``st.login`` documentation for the section).
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from urllib.parse import urlparse

from knowledge.errors import AuthenticationFailed, InvalidArgument
from knowledge.people.accounts import DEACTIVATED, Accounts, normal_username, now
from knowledge.people.audit import Audit
from knowledge.people.records import Actor, User

#: The keys ``st.login`` needs: two shared ones, three per provider (``[auth]`` or ``[auth.<name>]``).
SHARED_KEYS = ("redirect_uri", "cookie_secret")
PROVIDER_KEYS = ("client_id", "client_secret", "server_metadata_url")
#: How an identity found its account.
How = Literal["linked", "email", "created"]


class SsoExpired(AuthenticationFailed):
    """The provider signed the person in longer ago than ``accounts.session_hours``: sign in there again."""


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider of ``[auth]``: ``key`` for ``st.login(key)`` (``None``: the ``[auth]`` section
    itself) and ``label``, the words of its button ("Sign in with <label>")."""

    key: str | None
    label: str


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the provider says signed in: ``issuer`` + ``subject`` name them for good; ``email`` counts
    for matching only when ``email_verified``; ``issued_at`` is when the provider signed them in."""

    issuer: str
    subject: str
    email: str | None = None
    email_verified: bool = False
    name: str = ""
    preferred_username: str = ""
    issued_at: datetime | None = None

    @classmethod
    def from_claims(cls, claims: Mapping[str, Any]) -> Identity:
        """The identity in an ID token's ``claims`` (a mapping such as ``st.user.to_dict()``).

        Raises:
            AuthenticationFailed: no ``iss`` or ``sub`` (not an OpenID Connect ID token).
        """
        issuer, subject = _text(claims.get("iss")), _text(claims.get("sub"))
        if not issuer or not subject:
            raise AuthenticationFailed(
                "The sign-on provider did not say who you are (no issuer or subject);"
                " check that it is an OpenID Connect provider."
            )
        verified = claims.get("email_verified")
        iat = claims.get("iat")
        issued = None
        if isinstance(iat, int | float) and not isinstance(iat, bool):
            try:
                issued = datetime.fromtimestamp(float(iat), UTC)
            except (OverflowError, OSError, ValueError):
                issued = None
        email = unicodedata.normalize("NFC", _text(claims.get("email")))
        return cls(
            issuer,
            subject,
            email or None,
            verified is True or (isinstance(verified, str) and verified.strip().lower() == "true"),
            _clean_name(claims.get("name")),
            _text(claims.get("preferred_username")),
            issued,
        )

    @property
    def label(self) -> str:
        """How a message names this person: e-mail address, name, else the subject."""
        return self.email or self.name or self.subject


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _clean_name(value: Any) -> str:
    """A display name from a claim: control and format characters dropped, spaces collapsed, 100 at most."""
    text = "".join(
        c for c in unicodedata.normalize("NFC", _text(value)) if unicodedata.category(c)[0] != "C" or c in " \t\n"
    )
    return " ".join(text.split())[:100].strip()


def provider_problems(auth: Mapping[str, Any] | None) -> list[str]:
    """What is missing or wrong in Streamlit's ``[auth]`` secrets section for ``st.login``
    (``[]``: ready). ``redirect_uri`` must be an absolute ``http(s)`` URL ending in ``/oauth2callback``;
    each provider (the section itself or ``[auth.<name>]`` sub-sections) needs ``client_id``,
    ``client_secret`` and an absolute ``server_metadata_url``."""
    if not auth:
        return ["There is no [auth] section in .streamlit/secrets.toml."]
    problems = [f"[auth] has no {key}." for key in SHARED_KEYS if not _text(auth.get(key))]
    redirect = _text(auth.get("redirect_uri"))
    if redirect and not (
        _absolute(redirect.replace("{port}", "8501")) and urlparse(redirect).path.rstrip("/").endswith("/oauth2callback")
    ):
        problems.append(f"[auth] redirect_uri {redirect!r} is not an absolute http(s) URL ending in /oauth2callback.")
    sections = _sections(auth)
    if not sections:
        problems.append(
            "[auth] names no provider: give it client_id, client_secret and server_metadata_url"
            " (or an [auth.<name>] section with them)."
        )
    for where, section in sections:
        problems += [f"{where} has no {key}." for key in PROVIDER_KEYS if not _text(section.get(key))]
        url = _text(section.get("server_metadata_url"))
        if url and not _absolute(url):
            problems.append(f"{where} server_metadata_url {url!r} is not an absolute http(s) URL.")
        if where != "[auth]" and "_" in where:
            problems.append(f"{where}: a provider's name may not contain an underscore (st.login refuses it).")
    return problems


def providers(auth: Mapping[str, Any] | None) -> list[Provider]:
    """The providers of a ready ``[auth]`` section (:func:`provider_problems` is empty), in file order;
    ``[]`` otherwise. A provider's label is its ``provider_name`` key (knowledge's own; Streamlit
    ignores it), else its section's name, else the host of its ``server_metadata_url``."""
    if provider_problems(auth):
        return []
    out = []
    for where, section in _sections(auth or {}):
        key = None if where == "[auth]" else where[len("[auth.") : -1]
        label = (
            _clean_name(section.get("provider_name"))
            or (key or "").capitalize()
            or (urlparse(_text(section.get("server_metadata_url"))).hostname or "the sign-on provider")
        )
        out.append(Provider(key, label))
    return out


def _absolute(url: str) -> bool:
    try:
        parts = urlparse(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def _sections(auth: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    named = [(f"[auth.{k}]", v) for k, v in auth.items() if isinstance(v, Mapping) and k != "client_kwargs"]
    own = [("[auth]", auth)] if any(key in auth for key in PROVIDER_KEYS) else []
    return own + named


@dataclass(frozen=True, slots=True)
class SsoClaims:
    """Which claims give a person's groups and role (``accounts.sso_*``), read at every sign-in.

    ``groups_claim``: the claim listing the groups (a list of strings, or one string); unset = groups
    are not read. ``group_map``: provider group -> group here; when not empty, also the list (other
    provider groups are ignored). ``groups_removed``: ``remove`` (a group the provider no longer
    lists goes) or ``keep``. ``roles_claim`` + ``role_map``: provider value -> ``admin``/``member``;
    any value mapped to admin makes an admin, else a member; an empty map leaves the admin's role.
    """

    groups_claim: str | None = None
    group_map: Mapping[str, str] = field(default_factory=dict)
    groups_removed: Literal["remove", "keep"] = "remove"
    roles_claim: str | None = None
    role_map: Mapping[str, str] = field(default_factory=dict)


def claim_values(claims: Mapping[str, Any], name: str) -> list[str]:
    """The strings a claim lists: a JSON array's strings, or one string as a one-item list; a claim
    that is absent (or of another type) lists nothing (OpenID Connect Core 1.0, section 5.1: a
    claim's value is any JSON value)."""
    value = claims.get(name)
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list | tuple):
        return [v.strip() for v in value if isinstance(v, str) and v.strip()]
    return []


class SingleSignOn:
    """Accounts for identities of an OpenID Connect provider. Thread-safe as :class:`Accounts`.

    Args:
        accounts: the accounts (their catalog holds the links).
        audit: where sign-ins, links and refusals are recorded.
        create_members: ``accounts.sso_create_members``: an identity without an account gets a member one.
        session_hours: ``accounts.session_hours``: an identity the provider signed in longer ago than
            this (its ``iat``) is sent back to the provider.
        claims: which claims give groups and roles (:class:`SsoClaims`; default: neither is read).
    """

    def __init__(
        self,
        accounts: Accounts,
        audit: Audit,
        *,
        create_members: bool = False,
        session_hours: float = 12.0,
        claims: SsoClaims | None = None,
    ) -> None:
        self.accounts, self.audit = accounts, audit
        self.create_members, self.session_hours = create_members, session_hours
        self.claims = claims or SsoClaims()

    def linked(self, issuer: str, subject: str) -> User | None:
        """The account linked to ``issuer`` + ``subject``, or ``None``."""
        with self.accounts.catalog.cursor() as cur:
            row = cur.execute(
                "SELECT username FROM users WHERE sso_issuer = ? AND sso_subject = ? LIMIT 1", [issuer, subject]
            ).fetchone()
        return self.accounts.get(row[0]) if row else None

    def link_of(self, username: str) -> tuple[str, str] | None:
        """``(issuer, subject)`` the account ``username`` is linked to, or ``None``."""
        user = self.accounts.require(username)
        with self.accounts.catalog.cursor() as cur:
            row = cur.execute("SELECT sso_issuer, sso_subject FROM users WHERE username = ?", [user.username]).fetchone()
        return (row[0], row[1]) if row and row[0] and row[1] else None

    def link(self, username: str, issuer: str, subject: str) -> None:
        """Link ``username`` to an identity (an admin's choice, or the first verified e-mail match).

        Raises:
            InvalidArgument: no such account, or the identity is linked to another account.
        """
        user = self.accounts.require(username)
        other = self.linked(issuer, subject)
        if other is not None and other.username != user.username:
            raise InvalidArgument(f"This sign-on identity is linked to the account {other.username} already.")
        with self.accounts.catalog.cursor() as cur:
            cur.execute(
                "UPDATE users SET sso_issuer = ?, sso_subject = ? WHERE username = ?", [issuer, subject, user.username]
            )

    def unlink(self, username: str) -> None:
        """Forget the identity ``username`` is linked to (the next sign-on matches by e-mail again)."""
        user = self.accounts.require(username)
        with self.accounts.catalog.cursor() as cur:
            cur.execute("UPDATE users SET sso_issuer = NULL, sso_subject = NULL WHERE username = ?", [user.username])

    def account(self, identity: Identity) -> tuple[User, How]:
        """The account of ``identity`` and how it was found (see the module docstring); links it
        when found by e-mail, creates it when allowed. The account's role is never changed.

        Raises:
            AuthenticationFailed: no account, and ``create_members`` is off; or the e-mail address
                names several accounts, or an account linked to another identity.
        """
        user = self.linked(identity.issuer, identity.subject)
        if user is not None:
            return user, "linked"
        if identity.email and identity.email_verified:
            matches = self._by_email(identity.email)
            if len(matches) > 1:
                raise AuthenticationFailed(
                    f"Several accounts here have the e-mail address {identity.email};"
                    " ask an admin to link your sign-on to one of them."
                )
            if matches:
                username, linked_to = matches[0]
                if linked_to is not None:
                    raise AuthenticationFailed(
                        f"The account with the e-mail address {identity.email} is linked"
                        " to another sign-on identity; ask an admin."
                    )
                self.link(username, identity.issuer, identity.subject)
                self.audit.record(
                    username,
                    "user.update",
                    target=username,
                    detail={"sso": "linked by verified e-mail", "issuer": identity.issuer},
                )
                return self.accounts.require(username), "email"
        if not self.create_members:
            raise AuthenticationFailed(
                f"There is no account here for {identity.label}. Ask an admin to create"
                " one (with this e-mail address), then sign in again."
            )
        user = self._create(identity)
        self.link(user.username, identity.issuer, identity.subject)
        self.audit.record(
            user.username, "user.create", target=user.username, detail={"role": user.role, "sso": identity.issuer}
        )
        return user, "created"

    def sign_in(self, claims: Mapping[str, Any]) -> tuple[Actor, str]:
        """Sign in the person of an ID token's ``claims``: ``(actor, app session token)`` (as
        :meth:`knowledge.people.People.sign_in`), recorded as ``user.sign_in`` with ``via: sso``.

        Raises:
            SsoExpired: the provider signed them in more than ``session_hours`` ago.
            AuthenticationFailed: as :meth:`Identity.from_claims` and :meth:`account`, or the account
                is deactivated (recorded as ``user.sign_in_failed``).
        """
        identity = Identity.from_claims(claims)
        if identity.issued_at is not None and now() - identity.issued_at > timedelta(hours=self.session_hours):
            raise SsoExpired("Your sign-on has expired; sign in with the provider again.")
        try:
            user, how = self.account(identity)
            if not user.active:  # deactivated (SCIM active: false): refused, before any session
                raise AuthenticationFailed(DEACTIVATED)
        except AuthenticationFailed as exc:
            self.audit.record(
                identity.label[:64],
                "user.sign_in_failed",
                detail={"via": "sso", "issuer": identity.issuer, "reason": str(exc)},
            )
            raise
        self.apply_claims(user.username, identity.issuer, claims)
        self.audit.record(user.username, "user.sign_in", detail={"via": "sso", "issuer": identity.issuer, "matched": how})
        return self.accounts.actor(user.username), self.accounts.start_session(user.username)

    def apply_claims(self, username: str, issuer: str, claims: Mapping[str, Any]) -> None:
        """Set ``username``'s groups and role from ``claims`` as :attr:`claims` says: the groups as
        their memberships from source ``oidc:<issuer>`` (:meth:`Accounts.set_groups_from`, each change
        recorded as ``group.member``), the role (recorded as ``user.update`` ``{"role", "via": "sso"}``;
        the last admin stays one). Nothing is read of a claim the settings do not name."""
        c = self.claims
        if c.groups_claim:
            values = claim_values(claims, c.groups_claim)
            names = [c.group_map[v] for v in values if v in c.group_map] if c.group_map else values
            self.accounts.set_groups_from(username, f"oidc:{issuer}", names, remove=c.groups_removed == "remove")
        if c.roles_claim and c.role_map:
            values = claim_values(claims, c.roles_claim)
            role = "admin" if any(c.role_map.get(v) == "admin" for v in values) else "member"
            user = self.accounts.require(username)
            if user.role != role:
                try:
                    self.accounts.update(username, role=role)
                except InvalidArgument:  # the last admin: an admin stays, until another is made
                    return
                self.audit.record(username, "user.update", target=username, detail={"role": role, "via": "sso"})

    def _by_email(self, email: str) -> list[tuple[str, tuple[str, str] | None]]:
        """Accounts whose e-mail address is ``email`` (NFC, case-folded, compared here: PostgreSQL's
        ``lower`` depends on the database's locale), each with the identity it is linked to."""
        want = unicodedata.normalize("NFC", email).casefold()
        with self.accounts.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT username, email, sso_issuer, sso_subject FROM users WHERE email IS NOT NULL ORDER BY username"
            ).fetchall()
        return [
            (r[0], (r[2], r[3]) if r[2] and r[3] else None)
            for r in rows
            if unicodedata.normalize("NFC", r[1].strip()).casefold() == want
        ]

    def _create(self, identity: Identity) -> User:
        """A member account without a password: the username is the verified e-mail address, else
        the preferred username, else the name, else ``sso-<digest of the identity>``, made unique."""
        base = next(
            (
                n
                for n in (
                    identity.email if identity.email_verified else None,
                    identity.preferred_username,
                    identity.name.replace(" ", "."),
                )
                if n and _username_or_none(n)
            ),
            None,
        )
        name = _username_or_none(base) if base else None
        if name is None:
            name = "sso-" + hashlib.sha256(f"{identity.issuer}\n{identity.subject}".encode()).hexdigest()[:12]
        candidate, n = name, 1
        while self.accounts.get(candidate) is not None:
            n += 1
            candidate = f"{name[:60]}-{n}"
        email = identity.email if identity.email_verified else None
        try:
            return self.accounts.create(candidate, None, display_name=identity.name or None, role="member", email=email)
        except InvalidArgument:  # a display name the accounts refuse: the username stands for it
            return self.accounts.create(candidate, None, role="member", email=email)


def _username_or_none(raw: str) -> str | None:
    try:
        return normal_username(raw)
    except InvalidArgument:
        return None
