"""Who may use the app, and which local files a caller may read.

Three pieces, none of them tied to Streamlit (the app's gate in ``app.py`` only renders them):

* :class:`LocalFolders` -- a caller's view of this machine's disk. A path is readable only when,
  with every symlink resolved, it lies under one of the allowed folders, has no hidden component
  (``.ssh``, ``.aws``, ``.gnupg``, ``.env`` ...) and is not inside the data folder (catalog, file
  store, vectors). The app's folder form uses :func:`app_folders`; the chat's ``vector_ingest_file``
  tool uses ``chat.allowed_dirs``; the CLI, run by the user on their own files, uses none of this.
* :func:`is_shared` -- whether the server is reachable from other hosts (bound to anything but a
  loopback address, or a visitor that is not on loopback).
* :class:`Password` and :class:`LoginThrottle` -- the app's password: a salted scrypt hash
  (RFC 7914, parameters N=2**14, r=8, p=1 as recommended for interactive logins by the Python
  documentation of :func:`hashlib.scrypt` and OWASP's password storage cheat sheet) or a plain password
  from the environment, always compared in constant time (:func:`hmac.compare_digest`), with a growing
  delay after failed attempts.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from knowledge.config import Settings
from knowledge.errors import ConfigError, PathNotAllowed

#: Addresses that mean "this machine only".
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "ip6-localhost"})


# -- local folders ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LocalFolders:
    """The folders a caller may read, and the data folder no caller may read.

    ``roots`` are resolved (symlinks followed) at construction; an empty ``roots`` allows nothing.
    ``reason`` says why nothing is allowed when that is so (shown to the user).
    """

    roots: tuple[Path, ...]
    data_dir: Path
    reason: str = ""

    @classmethod
    def of(cls, roots: Iterable[os.PathLike | str], data_dir: os.PathLike | str, reason: str = "") -> LocalFolders:
        return cls(tuple(_resolve(Path(r)) for r in roots), _resolve(Path(data_dir)), reason)

    def describe(self) -> str:
        """The allowed folders as a person reads them (``"/home/ana"``, or why there are none)."""
        if not self.roots:
            return self.reason or "no folder (reading this machine's files is turned off)"
        return ", ".join(str(r) for r in self.roots)

    def check(self, path: os.PathLike | str) -> Path:
        """``path`` resolved (``~`` expanded, symlinks followed), if this caller may read it.

        Raises:
            PathNotAllowed: outside every allowed folder, a hidden component (``.ssh``), or inside
                the data folder; the message names the allowed folders.
        """
        raw = str(path).strip()
        p = _resolve(Path(raw).expanduser())
        if not self.roots:
            raise PathNotAllowed(
                f"{raw}: reading files of this machine is not allowed here ({self.reason or 'no folder is allowed'})."
            )
        if _inside(p, self.data_dir):
            raise PathNotAllowed(f"{raw}: the data folder ({self.data_dir}) is never ingested.")
        root = next((r for r in self.roots if _inside(p, r)), None)
        if root is None:
            target = f" (it leads to {p})" if str(p) != str(Path(raw).expanduser()) else ""
            raise PathNotAllowed(
                f"{raw}{target} is outside the folders allowed here: {self.describe()}."
                " Set ingest.allowed_dirs to allow another folder."
            )
        hidden = [part for part in p.parts if part.startswith(".") and part not in (".", "..")]
        if hidden:
            raise PathNotAllowed(
                f"{raw}: hidden folders and files such as {hidden[0]!r} are never read (they hold keys and credentials)."
            )
        return p

    def allows(self, path: os.PathLike | str) -> bool:
        """``True`` when :meth:`check` would pass."""
        try:
            self.check(path)
        except PathNotAllowed:
            return False
        return True


def _resolve(p: Path) -> Path:
    return Path(os.path.realpath(p.expanduser()))


def _inside(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def app_folders(settings: Settings, shared: bool) -> LocalFolders:
    """The folders the app's folder form may read: ``ingest.allowed_dirs`` when set, else the home
    folder while the app serves loopback only, and nothing once it is shared."""
    configured = settings.ingest.allowed_dirs
    if configured is not None:
        return LocalFolders.of(
            [settings.resolve(d) if not Path(d).expanduser().is_absolute() else d for d in configured],
            settings.data_root,
            reason="ingest.allowed_dirs is empty",
        )
    if shared:
        return LocalFolders.of(
            [],
            settings.data_root,
            reason="the app is shared with other computers; set ingest.allowed_dirs to allow a folder",
        )
    return LocalFolders.of([Path.home()], settings.data_root)


def chat_folders(settings: Settings) -> LocalFolders:
    """The folders a chat model's ``vector_ingest_file`` may read: ``chat.allowed_dirs`` (default none)."""
    return LocalFolders.of(
        [settings.resolve(d) for d in settings.chat.allowed_dirs], settings.data_root, reason="chat.allowed_dirs is empty"
    )


# -- who is asking ---------------------------------------------------------------------------------
def is_loopback(host: str | None) -> bool:
    """``True`` for ``localhost``, ``127.0.0.0/8``, ``::1`` (and IPv4-mapped forms); ``False`` for
    an empty host, which means every interface."""
    if not host or not isinstance(host, str):
        return False
    host = host.strip().strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))


def is_shared(bind_address: str | None, client_ip: str | None = None) -> bool:
    """Whether other hosts can reach the app: the server listens on a non-loopback address (an
    empty address is every interface, Streamlit's own default), or the visitor is not on loopback."""
    if not is_loopback(bind_address):
        return True
    return isinstance(client_ip, str) and bool(client_ip) and not is_loopback(client_ip)


# -- the password ----------------------------------------------------------------------------------
_SCHEME = "scrypt"
#: scrypt's work factor for new hashes (OWASP's password storage cheat sheet: N=2**14 with r=8, p=1
#: is its minimum for scrypt; verification reads N from the stored hash, so raising it later is safe).
SCRYPT_N = 2**14
_R, _P, _SALT, _KEY = 8, 1, 16, 32


def hash_password(password: str) -> str:
    """A salted scrypt hash of ``password``: ``scrypt$N$r$p$<salt b64>$<key b64>`` (N=16384, r=8, p=1,
    16-byte salt, 32-byte key; ~16 MB of memory and ~50 ms per check).

    Raises:
        ConfigError: an empty password.
    """
    if not password:
        raise ConfigError("The password is empty.")
    salt = secrets.token_bytes(_SALT)
    key = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=_R, p=_P, dklen=_KEY)
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"{_SCHEME}${SCRYPT_N}${_R}${_P}${b64(salt)}${b64(key)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a hash made by :func:`hash_password` (constant-time compare).

    Raises:
        ConfigError: ``stored`` is not such a hash.
    """
    try:
        scheme, n, r, p, salt, key = stored.strip().split("$")
        if scheme != _SCHEME:
            raise ValueError(scheme)
        salt_b, key_b = base64.b64decode(salt, validate=True), base64.b64decode(key, validate=True)
        n_i, r_i, p_i = int(n), int(r), int(p)
    except ValueError:
        raise ConfigError(
            "app.password_hash is not a hash made by `python -m knowledge password` (expected scrypt$N$r$p$salt$key)."
        ) from None
    got = hashlib.scrypt(password.encode(), salt=salt_b, n=n_i, r=r_i, p=p_i, dklen=len(key_b), maxmem=256 * 1024 * 1024)
    return hmac.compare_digest(got, key_b)


@dataclass(frozen=True, slots=True)
class Password:
    """The app's password, from ``KNOWLEDGE_APP_PASSWORD`` (plain) or ``app.password_hash``; the
    environment wins when both are set."""

    plain: str | None = None
    hashed: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> Password:
        plain = settings.app_password.get_secret_value() if settings.app_password else None
        hashed = settings.app.password_hash.get_secret_value() if settings.app.password_hash else None
        return cls(plain or None, hashed or None)

    @property
    def is_set(self) -> bool:
        return bool(self.plain or self.hashed)

    def matches(self, attempt: str) -> bool:
        """Constant-time comparison: the plain password through SHA-256 digests (equal length
        whatever was typed), the hash through scrypt."""
        if self.plain:
            return hmac.compare_digest(
                hashlib.sha256(attempt.encode()).digest(), hashlib.sha256(self.plain.encode()).digest()
            )
        if self.hashed:
            return verify_password(attempt, self.hashed)
        return False


class LoginThrottle:
    """A growing delay after failed sign-ins, per client (its IP address, else its session): none
    before the first failure, then 1, 2, 4, 8 s, capped at :attr:`MAX_DELAY`; a success clears it.
    The delay is served before the next attempt is checked, in the caller's thread. Thread-safe.
    """

    FIRST_DELAY = 1.0
    MAX_DELAY = 8.0

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()
        self._sleep = sleep

    def delay(self, client: str) -> float:
        """Seconds the next attempt of ``client`` waits."""
        with self._lock:
            n = self._failures.get(client, 0)
        return 0.0 if n == 0 else min(self.MAX_DELAY, self.FIRST_DELAY * 2 ** (n - 1))

    def attempt(self, client: str, password: Password, typed: str) -> bool:
        """Wait the client's delay, then check ``typed``; records a failure or clears them."""
        wait = self.delay(client)
        if wait:
            self._sleep(wait)
        ok = password.matches(typed)
        with self._lock:
            if ok:
                self._failures.pop(client, None)
            else:
                self._failures[client] = self._failures.get(client, 0) + 1
        return ok


#: One throttle per server process, shared by every browser session.
THROTTLE = LoginThrottle()


__all__ = [
    "LOOPBACK_NAMES",
    "THROTTLE",
    "LocalFolders",
    "LoginThrottle",
    "Password",
    "app_folders",
    "chat_folders",
    "hash_password",
    "is_loopback",
    "is_shared",
    "verify_password",
]
