"""Local accounts: users and groups, passwords (scrypt), sign-in throttled per account, app sessions
that expire, and invitation links. Everything lives in the catalog (migration 10), so every app
process on one shared catalog knows the same people."""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from urllib.parse import urlparse

from knowledge._names import check_name
from knowledge.access import hash_password, verify_password
from knowledge.config import Settings
from knowledge.errors import AccountNotFound, AuthenticationFailed, InvalidArgument
from knowledge.people.directory import Directory, DirectoryPerson, DirectoryUnavailable
from knowledge.people.records import ROLES, Actor, Invite, Role, User

#: A username: letters (any script), digits and ``. _ - @ +``, 1 to 64 characters, after NFC and
#: case folding (``Ana`` and ``ana`` are one account; an e-mail address is a fine username).
_USERNAME = re.compile(r"[\w.@+-]{1,64}")
MAX_PASSWORD = 1024
#: Names no account may take: ``local`` is the local admin's (:data:`knowledge.people.LOCAL_ADMIN`).
RESERVED_USERNAMES = frozenset({"local"})
#: The sign-in delay after failures (seconds): 1, 2, 4, 8, capped, as :class:`knowledge.access.LoginThrottle`.
FIRST_DELAY, MAX_DELAY = 1.0, 8.0
#: A failure older than this no longer slows the account's next sign-in.
FAILURE_MEMORY = timedelta(minutes=15)
#: The refusal of a deactivated account (:meth:`Accounts.set_active`), at sign-in and on every request.
DEACTIVATED = "This account is deactivated; ask an admin."
_SENTINEL_HASH = hash_password("not a password of anyone")  # verified against for an unknown name


def invite_link(token: str, public_url: str | None, seen: str | None = None) -> str:
    """The invitation link of ``token``, the same on every surface (People page, REST, CLI): on
    ``app.public_url`` when it is set (``https://kb.example.org/?invite=TOKEN``); else on ``seen``,
    the app's address as the caller saw it (the People page: the address its browser opened); else
    the link's own part, ``?invite=TOKEN``, to put after the app's address."""
    base = (public_url or seen or "").strip().rstrip("/")
    return f"{base}/?invite={token}" if base else f"?invite={token}"


class Cursors(Protocol):
    """What the people's tables need of the catalog: ``cursor()`` (the catalog's SQL)."""

    def cursor(self) -> Any: ...


class Recorder(Protocol):
    """Where account changes are recorded (:class:`knowledge.people.audit.Audit`)."""

    def record(
        self,
        actor: str,
        action: str,
        *,
        store: str | None = None,
        target: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> Any: ...


def now() -> datetime:
    return datetime.now(UTC)


def digest(token: str) -> str:
    """The SHA-256 hex digest a secret (session token, API key, invitation) is kept as."""
    return hashlib.sha256(token.encode()).hexdigest()


def normal_username(raw: str) -> str:
    """``raw`` as the account key: stripped, NFC, case-folded.

    Raises:
        InvalidArgument: empty, over 64 characters, or a character other than letters, digits, ``._-@+``.
    """
    name = unicodedata.normalize("NFC", str(raw or "").strip()).casefold()
    if not _USERNAME.fullmatch(name):
        raise InvalidArgument(f"{raw!r} is not a username: use 1 to 64 letters, digits or . _ - @ + (no spaces).")
    return name


def normal_password(password: str, min_length: int) -> str:
    """``password`` in NFC (the same password typed on two keyboards gives the same hash).

    Raises:
        InvalidArgument: shorter than ``min_length`` or longer than 1024 characters, or only spaces.
    """
    pw = unicodedata.normalize("NFC", password or "")
    if len(pw) < min_length or not pw.strip():
        raise InvalidArgument(f"A password needs at least {min_length} characters.")
    if len(pw) > MAX_PASSWORD:
        raise InvalidArgument(f"A password may have at most {MAX_PASSWORD} characters.")
    return pw


def _display(raw: str | None, username: str) -> str:
    name = " ".join((raw or "").split()) or username
    check_name(name, "display name")
    if len(name) > 100:
        raise InvalidArgument("A display name may have at most 100 characters.")
    return name


def _role(role: str) -> Role:
    if role not in ROLES:
        raise InvalidArgument(f"{role!r} is not a role: admin or member.", param="role")
    return role


_USER_COLUMNS = "username, display_name, role, created, email, password_hash IS NOT NULL, active"


def _user(row: Any) -> User:
    return User(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6] is not False)


class Accounts:
    """The accounts of one catalog. Thread-safe; every method may raise the catalog's errors.

    Args:
        catalog: the catalog (its ``cursor()``).
        settings: ``accounts.*`` (session and invitation lifetimes, the shortest password).
        sleep: how the sign-in delay is served (tests pass a recorder).
        audit: where :meth:`set_groups_from` records its changes (``None``: nowhere).
    """

    def __init__(
        self,
        catalog: Cursors,
        settings: Settings,
        sleep: Callable[[float], None] = time.sleep,
        audit: Recorder | None = None,
    ) -> None:
        self.catalog, self.settings, self._sleep, self.audit = catalog, settings.accounts, sleep, audit
        #: The directory passwords are checked against (``accounts.ldap.url``), or ``None``.
        self.directory = Directory(settings.accounts.ldap) if settings.accounts.ldap.url else None
        self._unknown: dict[str, tuple[int, float]] = {}  # failures of names that are no account
        self._lock = threading.Lock()
        #: Called with ``"user:<username>"`` / ``"group:<name>"`` once that account or group is deleted
        #: (the system takes it off every file's readers: a later account or group of the same name
        #: must not read what the old one could).
        self.reader_gone: list[Callable[[str], None]] = []

    def _gone(self, principal: str) -> None:
        for hook in self.reader_gone:
            hook(principal)

    # -- accounts -------------------------------------------------------------------------------
    def exist(self) -> bool:
        """Whether any account exists (then the app signs people in by account, not by the one password)."""
        with self.catalog.cursor() as cur:
            return cur.execute("SELECT 1 FROM users LIMIT 1").fetchone() is not None

    def create(
        self,
        username: str,
        password: str | None,
        *,
        display_name: str | None = None,
        role: str = "member",
        email: str | None = None,
    ) -> User:
        """A new account. ``password`` ``None`` makes an account that signs in by single sign-on only.

        Raises:
            InvalidArgument: a bad username, display name, password or role; the username is taken or
                reserved (``local``).
        """
        name = normal_username(username)
        if name in RESERVED_USERNAMES:
            raise InvalidArgument(f"The username {name!r} is reserved (the audit trail's name for the local admin).")
        hashed = (
            hash_password(normal_password(password, self.settings.min_password_length)) if password is not None else None
        )
        user = User(
            name,
            _display(display_name, username.strip()),
            _role(role),
            now(),
            (email or "").strip() or None,
            hashed is not None,
        )
        with self.catalog.cursor() as cur:
            if cur.execute("SELECT 1 FROM users WHERE username = ?", [name]).fetchone():
                raise InvalidArgument(f"The username {name!r} is taken.")
            cur.execute(
                "INSERT INTO users (username, display_name, role, password_hash, email, created, failures)"
                " VALUES (?, ?, ?, ?, ?, ?, 0)",
                [name, user.display_name, user.role, hashed, user.email, user.created],
            )
        return user

    def get(self, username: str) -> User | None:
        """The account ``username`` (any case), or ``None``."""
        try:
            name = normal_username(username)
        except InvalidArgument:
            return None
        with self.catalog.cursor() as cur:
            row = cur.execute(f"SELECT {_USER_COLUMNS} FROM users WHERE username = ?", [name]).fetchone()
        return _user(row) if row else None

    def require(self, username: str) -> User:
        """The account ``username``. Raises ``InvalidArgument`` when there is none."""
        user = self.get(username)
        if user is None:
            raise AccountNotFound(f"There is no account {username!r}.", param="username")
        return user

    def by_email(self, email: str) -> User | None:
        """The account with this e-mail address (case-insensitive), or ``None``."""
        with self.catalog.cursor() as cur:
            row = cur.execute(
                f"SELECT {_USER_COLUMNS} FROM users WHERE lower(email) = ? LIMIT 1", [email.strip().lower()]
            ).fetchone()
        return _user(row) if row else None

    def users(self) -> list[User]:
        """Every account, by username."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(f"SELECT {_USER_COLUMNS} FROM users ORDER BY username").fetchall()
        return [_user(r) for r in rows]

    def admins(self) -> list[str]:
        """The usernames of the admins, sorted."""
        with self.catalog.cursor() as cur:
            return [
                r[0] for r in cur.execute("SELECT username FROM users WHERE role = 'admin' ORDER BY username").fetchall()
            ]

    def sso_linked(self) -> set[str]:
        """The usernames linked to a single sign-on identity (``users.sso_subject``)."""
        with self.catalog.cursor() as cur:
            return {r[0] for r in cur.execute("SELECT username FROM users WHERE sso_subject IS NOT NULL").fetchall()}

    def set_password(self, username: str, password: str) -> None:
        """Give ``username`` a new password; every app session of theirs ends.

        Raises:
            InvalidArgument: no such account, or a bad password.
        """
        user = self.require(username)
        hashed = hash_password(normal_password(password, self.settings.min_password_length))
        with self.catalog.cursor() as cur:
            cur.execute("UPDATE users SET password_hash = ?, failures = 0 WHERE username = ?", [hashed, user.username])
            cur.execute("DELETE FROM app_sessions WHERE username = ?", [user.username])

    def update(
        self, username: str, *, display_name: str | None = None, role: str | None = None, email: str | None = None
    ) -> User:
        """Change an account's display name, role or e-mail address.

        Raises:
            InvalidArgument: no such account, a bad value, or the last admin made a member.
        """
        user = self.require(username)
        new_role = _role(role) if role is not None else user.role
        if user.role == "admin" and new_role != "admin" and self.admins() == [user.username]:
            raise InvalidArgument(f"{user.username} is the last admin; make another admin first.")
        display = _display(display_name, user.username) if display_name is not None else user.display_name
        mail = ((email or "").strip() or None) if email is not None else user.email
        with self.catalog.cursor() as cur:
            cur.execute(
                "UPDATE users SET display_name = ?, role = ?, email = ? WHERE username = ?",
                [display, new_role, mail, user.username],
            )
        return self.require(user.username)

    def set_active(self, username: str, active: bool) -> User:
        """Deactivate (``active`` false) or reactivate an account. Deactivating ends every app session
        of theirs and revokes every API key of theirs at once, and :meth:`actor` and
        :meth:`authenticate` refuse them from then on; reactivating lets them sign in again (their
        keys stay revoked).

        Raises:
            InvalidArgument: no such account, or the last active admin deactivated.
        """
        user = self.require(username)
        if not active and user.is_admin and user.active:
            with self.catalog.cursor() as cur:
                others = cur.execute(
                    "SELECT 1 FROM users WHERE role = 'admin' AND active AND username <> ? LIMIT 1", [user.username]
                ).fetchone()
            if others is None:
                raise InvalidArgument(f"{user.username} is the last active admin and cannot be deactivated.")
        with self.catalog.cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                cur.execute("UPDATE users SET active = ? WHERE username = ?", [bool(active), user.username])
                if not active:
                    cur.execute("DELETE FROM app_sessions WHERE username = ?", [user.username])
                    cur.execute(
                        "UPDATE api_keys SET revoked = ? WHERE username = ? AND revoked IS NULL", [now(), user.username]
                    )
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        return self.require(user.username)

    def remove(self, username: str) -> User:
        """Delete the account, its group memberships, sessions and API keys (its stores are the
        caller's: :meth:`knowledge.people.People.delete_user` hands them to an admin first); then
        :attr:`reader_gone` of ``user:<username>``.

        Raises:
            InvalidArgument: no such account, or the last admin.
        """
        user = self.require(username)
        if user.is_admin and self.admins() == [user.username]:
            raise InvalidArgument(f"{user.username} is the last admin and cannot be deleted.")
        with self.catalog.cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                for table in ("group_members", "app_sessions"):
                    cur.execute(f"DELETE FROM {table} WHERE username = ?", [user.username])
                cur.execute("UPDATE api_keys SET revoked = ? WHERE username = ? AND revoked IS NULL", [now(), user.username])
                cur.execute("DELETE FROM users WHERE username = ?", [user.username])
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        self._gone(f"user:{user.username}")
        return user

    # -- signing in -----------------------------------------------------------------------------
    def delay(self, username: str) -> float:
        """Seconds the next sign-in of ``username`` waits: 0 before a failure, then 1, 2, 4, 8 s
        (capped), per account, in the catalog (every app process counts the same failures)."""
        try:
            name = normal_username(username)
        except InvalidArgument:
            name = str(username)
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT failures, last_failure FROM users WHERE username = ?", [name]).fetchone()
        if row is None:
            with self._lock:
                n, at = self._unknown.get(name, (0, 0.0))
            recent = time.time() - at < FAILURE_MEMORY.total_seconds()
        else:
            n, last = row[0] or 0, row[1]
            recent = last is not None and now() - last < FAILURE_MEMORY
        return 0.0 if n == 0 or not recent else min(MAX_DELAY, FIRST_DELAY * 2 ** (n - 1))

    def authenticate(self, username: str, password: str) -> User:
        """The account, when ``password`` is its password: waits the account's :meth:`delay` first,
        then checks in constant time; a failure is counted against the account, a success clears them.

        An account with a password of its own signs in with it. Otherwise, with ``accounts.ldap.url``
        set, the directory checks the password (:meth:`knowledge.people.directory.Directory.authenticate`:
        a bind as the person, never an anonymous one); a wrong one is counted exactly as a local one.
        On success the person's directory groups become their ``ldap`` memberships
        (:meth:`set_groups_from`, when ``accounts.ldap.group_base`` is set), and a person without an
        account gets a member one when ``accounts.ldap.create_members`` is on. The role stays the admin's.

        Raises:
            AuthenticationFailed: "Wrong username or password." (the same words whichever was wrong);
                a directory person with no account here (create_members off), in words saying so.
            DirectoryUnavailable: the directory cannot be reached or answers with an error (not
                counted as a failure); a subclass of ``AuthenticationFailed``.
        """
        wait = self.delay(username)
        if wait:
            self._sleep(wait)
        try:
            name = normal_username(username)
        except InvalidArgument:
            name = None
        row = None
        if name is not None:
            with self.catalog.cursor() as cur:
                row = cur.execute("SELECT password_hash FROM users WHERE username = ?", [name]).fetchone()
        if self.directory is not None and name is not None and not (row and row[0]):
            try:
                person = self.directory.authenticate(name, password or "")
            except DirectoryUnavailable:
                raise
            except AuthenticationFailed:
                self._failed(name, row is not None)
                raise
            return self._directory_account(name, row is not None, person)
        stored = row[0] if row and row[0] else _SENTINEL_HASH
        ok = verify_password(unicodedata.normalize("NFC", password or ""), stored) and bool(row and row[0])
        if ok:
            with self.catalog.cursor() as cur:
                cur.execute("UPDATE users SET failures = 0, last_failure = NULL WHERE username = ?", [name])
            user = self.require(name)  # type: ignore[arg-type]
            if not user.active:
                raise AuthenticationFailed(DEACTIVATED)
            return user
        self._failed(name or str(username), row is not None)
        raise AuthenticationFailed("Wrong username or password.")

    def _failed(self, name: str, known: bool) -> None:
        """Count a failed sign-in of ``name``: in its account's row, or (no account) in memory."""
        if not known:
            with self._lock:
                n, _ = self._unknown.get(name, (0, 0.0))
                self._unknown[name] = (n + 1, time.time())
        else:
            with self.catalog.cursor() as cur:
                cur.execute("UPDATE users SET failures = failures + 1, last_failure = ? WHERE username = ?", [now(), name])

    def _directory_account(self, name: str, known: bool, person: DirectoryPerson) -> User:
        """The account of a person the directory signed in (made when ``create_members``), failures
        cleared, ``ldap`` groups set. A deactivated account (SCIM) is refused, its groups untouched."""
        ldap = self.settings.ldap
        if known:
            existing = self.get(name)
            if existing is not None and not existing.active:
                raise AuthenticationFailed(DEACTIVATED)
        else:
            if not ldap.create_members:
                raise AuthenticationFailed(
                    f"The directory knows {name}, but there is no account here for them;"
                    " ask an admin to create one (without a password), then sign in again."
                )
            made_meanwhile = None
            try:
                user = self.create(name, None, display_name=person.display_name or None, email=person.email or None)
            except InvalidArgument:  # a display name the accounts refuse (the username stands for it),
                made_meanwhile = self.get(name)  # or another sign-in of theirs made the account just now
                user = made_meanwhile or self.create(name, None, email=person.email or None)
            if made_meanwhile is None and self.audit is not None:
                self.audit.record(name, "user.create", target=name, detail={"role": user.role, "via": "ldap"})
        with self.catalog.cursor() as cur:
            cur.execute("UPDATE users SET failures = 0, last_failure = NULL WHERE username = ?", [name])
        if ldap.group_base:
            self.set_groups_from(name, "ldap", person.groups)
        return self.require(name)

    def actor(self, username: str) -> Actor:
        """The :class:`Actor` of an account: its role and groups, read now.

        Raises:
            AuthenticationFailed: the account does not exist (any more), or it is deactivated.
        """
        user = self.get(username)
        if user is None:
            raise AuthenticationFailed("This account no longer exists.")
        if not user.active:
            raise AuthenticationFailed(DEACTIVATED)
        return Actor(user.username, user.role, frozenset(self.groups_of(user.username)), user.display_name)

    # -- app sessions ---------------------------------------------------------------------------
    def start_session(self, username: str) -> str:
        """A new app session for ``username``, valid ``accounts.session_hours``; returns its token
        (kept by the browser session; the catalog keeps only its digest)."""
        token = secrets.token_urlsafe(32)
        start = now()
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM app_sessions WHERE expires < ?", [start])
            cur.execute(
                "INSERT INTO app_sessions (digest, username, created, expires) VALUES (?, ?, ?, ?)",
                [digest(token), normal_username(username), start, start + timedelta(hours=self.settings.session_hours)],
            )
        return token

    def session_actor(self, token: str | None) -> Actor:
        """Who holds the app session ``token``.

        Raises:
            AuthenticationFailed: no such session, it expired ("Your session expired; sign in again."),
                or its account was deleted.
        """
        if not token:
            raise AuthenticationFailed("Sign in first.")
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT username, expires FROM app_sessions WHERE digest = ?", [digest(token)]).fetchone()
        if row is None:
            raise AuthenticationFailed("You were signed out; sign in again.")
        if row[1] <= now():
            self.end_session(token)
            raise AuthenticationFailed("Your session expired; sign in again.")
        return self.actor(row[0])

    def end_session(self, token: str | None) -> None:
        """Sign the session out (nothing when there is none)."""
        if token:
            with self.catalog.cursor() as cur:
                cur.execute("DELETE FROM app_sessions WHERE digest = ?", [digest(token)])

    # -- invitations ----------------------------------------------------------------------------
    def invite(self, role: str, created_by: str) -> str:
        """A new invitation for one account of ``role``; returns its token (the link's ``invite=``),
        valid once, for ``accounts.invite_hours``."""
        token = secrets.token_urlsafe(24)
        start = now()
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO invites (digest, role, created_by, created, expires) VALUES (?, ?, ?, ?, ?)",
                [digest(token), _role(role), created_by, start, start + timedelta(hours=self.settings.invite_hours)],
            )
        return token

    def invitation(self, token: str | None) -> Invite:
        """The open invitation ``token``.

        Raises:
            AuthenticationFailed: unknown, used or expired.
        """
        with self.catalog.cursor() as cur:
            row = cur.execute(
                "SELECT role, created_by, created, expires, used_by FROM invites WHERE digest = ?", [digest(token or "")]
            ).fetchone()
        if row is None or row[4] is not None or row[3] <= now():
            raise AuthenticationFailed(
                "This invitation link is not valid (used, expired, or mistyped); ask an admin for a new one."
            )
        return Invite(*row)

    def accept(self, token: str, username: str, password: str, display_name: str | None = None) -> User:
        """Create the account an invitation offers, and use the invitation up.

        Raises:
            AuthenticationFailed: the invitation is not valid. InvalidArgument: as :meth:`create`.
        """
        invite = self.invitation(token)
        user = self.create(username, password, display_name=display_name, role=invite.role)
        with self.catalog.cursor() as cur:
            cur.execute("UPDATE invites SET used_by = ? WHERE digest = ?", [user.username, digest(token)])
        return user

    # -- groups ---------------------------------------------------------------------------------
    def create_group(self, name: str) -> str:
        """A new, empty group. Raises ``InvalidArgument``: a bad or taken name."""
        group = " ".join(unicodedata.normalize("NFC", name or "").split())
        if not group or len(group) > 64:
            raise InvalidArgument("A group name needs 1 to 64 characters.")
        check_name(group, "group name")
        with self.catalog.cursor() as cur:
            if cur.execute("SELECT 1 FROM user_groups WHERE name = ?", [group]).fetchone():
                raise InvalidArgument(f"The group {group!r} exists.")
            cur.execute("INSERT INTO user_groups (name, created) VALUES (?, ?)", [group, now()])
        return group

    def delete_group(self, name: str) -> None:
        """Delete group ``name`` and its memberships; then :attr:`reader_gone` of ``group:<name>``."""
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM group_members WHERE group_name = ?", [name])
            cur.execute("DELETE FROM user_groups WHERE name = ?", [name])
        self._gone(f"group:{name}")

    def groups(self) -> dict[str, list[str]]:
        """Every group and its members' usernames."""
        with self.catalog.cursor() as cur:
            names = [r[0] for r in cur.execute("SELECT name FROM user_groups ORDER BY name").fetchall()]
            members = cur.execute("SELECT group_name, username FROM group_members ORDER BY username").fetchall()
        out: dict[str, list[str]] = {n: [] for n in names}
        for g, u in members:
            out.setdefault(g, []).append(u)
        return out

    def groups_of(self, username: str) -> list[str]:
        with self.catalog.cursor() as cur:
            return [
                r[0]
                for r in cur.execute(
                    "SELECT group_name FROM group_members WHERE username = ? ORDER BY group_name", [username]
                ).fetchall()
            ]

    def sources(self) -> dict[tuple[str, str], str]:
        """The memberships a provider keeps: ``{(group, username): source}`` (``ldap``,
        ``oidc:<issuer>``, ``scim``); a membership made by hand is not in it."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT group_name, username, source FROM group_members WHERE source IS NOT NULL AND source <> ''"
            ).fetchall()
        return {(r[0], r[1]): r[2] for r in rows}

    def source_of(self, group: str, username: str) -> str | None:
        """Who keeps ``username``'s membership of ``group``: a provider label, or ``None`` (by hand, or none)."""
        with self.catalog.cursor() as cur:
            row = cur.execute(
                "SELECT source FROM group_members WHERE group_name = ? AND username = ?", [group, username]
            ).fetchone()
        return (row[0] or None) if row else None

    def refuse_provider_edit(self, group: str, username: str) -> None:
        """The one check of every hand edit of a membership (People page, CLI, REST: all through
        :meth:`add_to_group` and :meth:`remove_from_group`).

        Raises:
            InvalidArgument: a provider keeps it, in words naming it ("... is from LDAP: change it in
                the directory.").
        """
        source = self.source_of(group, username)
        if source:
            raise InvalidArgument(f"{username}'s membership of {group!r} is {source_words(source)}.", param="group")

    def add_to_group(self, group: str, username: str) -> None:
        """Raises ``InvalidArgument``: no such group or account; the membership is a provider's."""
        user = self.require(username)
        if group not in self.groups():
            raise AccountNotFound(f"There is no group {group!r}.", param="group")
        self.refuse_provider_edit(group, user.username)
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO group_members (group_name, username) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [group, user.username],
            )

    def remove_from_group(self, group: str, username: str) -> None:
        """Raises ``InvalidArgument``: the membership is a provider's (:meth:`refuse_provider_edit`)."""
        name = normal_username(username)
        self.refuse_provider_edit(group, name)
        with self.catalog.cursor() as cur:
            cur.execute("DELETE FROM group_members WHERE group_name = ? AND username = ?", [group, name])

    def groups_from(self, username: str, source: str) -> set[str]:
        """The groups ``source`` keeps ``username`` in (not those made by hand or by another source)."""
        with self.catalog.cursor() as cur:
            rows = cur.execute(
                "SELECT group_name FROM group_members WHERE username = ? AND source = ?", [username, source]
            ).fetchall()
        return {r[0] for r in rows}

    def set_groups_from(
        self, username: str, source: str, groups: Iterable[str], *, remove: bool = True, actor: str | None = None
    ) -> tuple[list[str], list[str]]:
        """Make ``username``'s memberships kept by ``source`` exactly ``groups``: missing groups are
        created, memberships ``source`` no longer lists are removed (``remove=False``: kept, so the
        source only ever adds); memberships made by hand and
        those of other sources are never touched (a group already joined by hand stays hand-made).
        Each change is audited as ``group.member`` target=the user ``{"group", "added", "source"}``
        in the user's name (they signed in), or in ``actor``'s (SCIM provisioning: ``"scim"``).
        A name that is no valid group name (1 to 64 characters,
        no control characters) is skipped. Returns ``(added, removed)``, sorted.

        Raises:
            InvalidArgument: no such account, or an empty ``source``.
        """
        user = self.require(username)
        source = (source or "").strip()
        if not source:
            raise InvalidArgument("A provider's memberships need a source (ldap, oidc:<issuer>, scim).")
        wanted: set[str] = set()
        for raw in groups:
            name = " ".join(unicodedata.normalize("NFC", str(raw or "")).split())
            try:
                if not name or len(name) > 64:
                    raise InvalidArgument(name)
                check_name(name, "group name")
            except InvalidArgument:
                continue
            wanted.add(name)
        added: list[str] = []
        removed: list[str] = []
        with self.catalog.cursor() as cur:
            cur.execute("BEGIN TRANSACTION")
            try:
                rows = cur.execute(
                    "SELECT group_name, source FROM group_members WHERE username = ?", [user.username]
                ).fetchall()
                have = {r[0]: (r[1] or None) for r in rows}
                for name in sorted(wanted - set(have)):
                    cur.execute(
                        "INSERT INTO user_groups (name, created) VALUES (?, ?) ON CONFLICT DO NOTHING", [name, now()]
                    )
                    cur.execute(
                        "INSERT INTO group_members (group_name, username, source) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        [name, user.username, source],
                    )
                    added.append(name)
                for name in sorted(g for g, s in have.items() if remove and s == source and g not in wanted):
                    cur.execute(
                        "DELETE FROM group_members WHERE group_name = ? AND username = ? AND source = ?",
                        [name, user.username, source],
                    )
                    removed.append(name)
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        if self.audit is not None:
            for name in added:
                self.audit.record(
                    actor or user.username,
                    "group.member",
                    target=user.username,
                    detail={"group": name, "added": True, "source": source},
                )
            for name in removed:
                self.audit.record(
                    actor or user.username,
                    "group.member",
                    target=user.username,
                    detail={"group": name, "added": False, "source": source},
                )
        return added, removed


def source_words(source: str) -> str:
    """How a refusal names a membership's provider: ``ldap`` "from LDAP: change it in the directory";
    ``oidc:<issuer>`` "from the sign-on provider <issuer>: change it there"; ``scim`` "from SCIM
    provisioning: change it in the identity provider"; another label "from <label>: change it there"."""
    if source == "ldap":
        return "from LDAP: change it in the directory"
    if source.startswith("oidc:"):
        return f"from the sign-on provider {source[5:]}: change it there"
    if source == "scim":
        return "from SCIM provisioning: change it in the identity provider"
    return f"from {source}: change it there"


def source_label(source: str) -> str:
    """A provider's short name for pages ("from <label>"): ``LDAP``, the issuer's host, ``SCIM``."""
    if source == "ldap":
        return "LDAP"
    if source.startswith("oidc:"):
        return urlparse(source[5:]).hostname or source[5:]
    return "SCIM" if source == "scim" else source
