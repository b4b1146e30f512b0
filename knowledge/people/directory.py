"""Sign-in with a directory password: LDAP v3 (RFC 4511) and Active Directory, through ``ldap3``.

:meth:`Directory.authenticate` finds the person's DN (``accounts.ldap.user_dn`` with the username put
in, escaped as an RDN value per RFC 4514 section 2.4; or a search under ``search_base`` with
``search_filter``, the username escaped per RFC 4515 section 3, as ``bind_dn`` or anonymously), asks
the server to bind as that DN with the typed password (a simple bind, RFC 4513 section 5.1.3; an empty
password is refused before, since RFC 4513 5.1.2 makes it an unauthenticated bind that "succeeds"),
then reads the person's entry (``cn``/``displayName``, ``mail``) and groups (``group_base`` +
``group_filter``, the DN escaped per RFC 4515; their ``group_attribute``) over the same bound
connection. TLS: ``ldaps://`` or StartTLS (RFC 4511 section 4.14), the server's certificate verified
against ``ca_file`` (or the system's CAs) and its name checked (RFC 6125).

A part of :mod:`knowledge.people`: imports ``ldap3``, the ground and nothing else of the project.
"""

from __future__ import annotations

import contextlib
import math
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ldap3 import BASE, NONE, SIMPLE, SUBTREE, Connection, Server, Tls
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn

from knowledge.config import LdapSettings
from knowledge.errors import AuthenticationFailed

#: LDAP result code 49 (RFC 4511 appendix A): the DN or the password is wrong.
INVALID_CREDENTIALS = 49


class DirectoryUnavailable(AuthenticationFailed):
    """The directory could not be reached or refused to answer (not a wrong password): words say which."""


@dataclass(frozen=True, slots=True)
class DirectoryPerson:
    """Who the directory signed in: their ``dn``, ``display_name`` and ``email`` (``""`` when the entry
    has none) and the names of their ``groups`` (sorted)."""

    dn: str
    display_name: str
    email: str
    groups: tuple[str, ...]


def filter_value(value: str) -> str:
    """``value`` escaped for an LDAP search filter (RFC 4515 section 3: ``* ( ) \\ NUL`` as ``\\XX``)."""
    return escape_filter_chars(value)


def _first(entry: object, *names: str) -> str:
    attributes = getattr(entry, "entry_attributes_as_dict", {}) or {}
    lowered = {k.lower(): v for k, v in attributes.items()}
    for name in names:
        values = lowered.get(name.lower()) or []
        for value in values:
            text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
            if text.strip():
                return text.strip()
    return ""


class Directory:
    """One directory (``accounts.ldap.*``). Thread-safe: each sign-in opens its own connection.

    Args:
        settings: ``accounts.ldap`` with ``url`` set.
        environ: where ``bind_password_env`` is read (default ``os.environ``).
    """

    def __init__(self, settings: LdapSettings, environ: dict[str, str] | None = None) -> None:
        if not settings.url:
            raise ValueError("accounts.ldap.url is not set")
        self.settings = settings
        self._environ = os.environ if environ is None else environ

    def _server(self) -> Server:
        s = self.settings
        url = (s.url or "").strip()
        tls = None
        if url.startswith("ldaps://") or s.start_tls:
            tls = Tls(
                validate=ssl.CERT_REQUIRED,
                version=ssl.PROTOCOL_TLS_CLIENT,
                ca_certs_file=str(s.ca_file) if s.ca_file else None,
            )
        return Server(url, tls=tls, get_info=NONE, connect_timeout=s.timeout)

    def _connection(self, dn: str | None, password: str | None) -> Connection:
        """An open (StartTLS'd when set) connection, not yet bound.

        Raises:
            DirectoryUnavailable: the server cannot be reached, or TLS fails (certificate not trusted).
        """
        s = self.settings
        conn = Connection(
            self._server(),
            user=dn,
            password=password,
            authentication=SIMPLE if dn else None,
            receive_timeout=max(1, math.ceil(s.timeout)),  # ldap3 packs it as whole seconds
            raise_exceptions=False,
            read_only=True,
        )
        try:
            conn.open()
            if s.start_tls and not conn.start_tls():
                raise DirectoryUnavailable(f"The directory {s.url} refused StartTLS; sign-in by directory is not possible.")
        except (LDAPException, OSError) as exc:
            _close(conn)
            if "doesn't match any name" in str(exc):  # ldap3's check of the name (RFC 6125)
                raise DirectoryUnavailable(
                    f"The directory {s.url} shows a certificate for another name than its address;"
                    " use the name its certificate gives in accounts.ldap.url, or ask an admin."
                ) from None
            if "CERTIFICATE" in str(exc).upper():
                raise DirectoryUnavailable(
                    f"The directory {s.url} shows a certificate that is not trusted ({_reason(exc)});"
                    " check accounts.ldap.ca_file, or ask an admin."
                ) from None
            raise DirectoryUnavailable(
                f"The directory {s.url} cannot be reached ({_reason(exc)}); try again later or ask an admin."
            ) from None
        return conn

    def _service_connection(self) -> Connection:
        """A connection bound as ``bind_dn`` (anonymous when unset).

        Raises:
            DirectoryUnavailable: no password in ``bind_password_env``, the server cannot be reached,
                or it refuses the service account."""
        s = self.settings
        password = None
        if s.bind_dn is not None:
            password = self._environ.get(s.bind_password_env or "")
            if not password:
                raise DirectoryUnavailable(
                    f"The directory's service account has no password: set the environment variable {s.bind_password_env}."
                )
        conn = self._connection(s.bind_dn, password)
        try:
            if s.bind_dn is not None and not conn.bind():
                raise DirectoryUnavailable(
                    f"The directory {s.url} refused the service account {s.bind_dn}"
                    f" ({conn.result.get('description')}); ask an admin."
                )
        except (LDAPException, OSError) as exc:
            _close(conn)
            raise DirectoryUnavailable(f"The directory {s.url} stopped answering ({_reason(exc)}).") from None
        except DirectoryUnavailable:
            _close(conn)
            raise
        return conn

    def search(self, bases: Sequence[str], flt: str, attributes: Sequence[str]) -> list[tuple[str, dict[str, list[Any]]]]:
        """The entries matching ``flt`` (an RFC 4515 filter whose values the caller escaped, e.g. with
        :func:`filter_value`) in the subtree of each of ``bases``, as ``(dn, {attribute: values})``
        with ``attributes`` only, read as ``bind_dn`` (or anonymously). A base that does not exist
        holds nothing.

        Raises:
            DirectoryUnavailable: the directory cannot be reached, refuses the service account, or
                answers the search with an error."""
        s = self.settings
        conn = self._service_connection()
        found: list[tuple[str, dict[str, list[Any]]]] = []
        try:
            for base in bases:
                if not conn.search(base, flt, search_scope=SUBTREE, attributes=list(attributes)):
                    if conn.result.get("result") not in (0, 32):  # 32: noSuchObject
                        raise DirectoryUnavailable(
                            f"The directory {s.url} could not search ({conn.result.get('description')})."
                        )
                    continue
                found.extend((e.entry_dn, dict(e.entry_attributes_as_dict)) for e in conn.entries)
        except (LDAPException, OSError) as exc:
            raise DirectoryUnavailable(f"The directory {s.url} stopped answering ({_reason(exc)}).") from None
        finally:
            _close(conn)
        return found

    def _find_dn(self, username: str) -> str | None:
        """The DN of ``username``: from ``user_dn`` (RFC 4514 escaped), or the one entry the search finds."""
        s = self.settings
        if s.user_dn is not None:
            return s.user_dn.replace("{username}", escape_rdn(username))
        conn = self._service_connection()
        try:
            flt = s.search_filter.replace("{username}", filter_value(username))
            if not conn.search(s.search_base, flt, search_scope=SUBTREE, attributes=[], size_limit=2):
                if conn.result.get("result") not in (0, 32):  # 32: noSuchObject
                    raise DirectoryUnavailable(f"The directory {s.url} could not search ({conn.result.get('description')}).")
                return None
            return conn.entries[0].entry_dn if len(conn.entries) == 1 else None
        except (LDAPException, OSError) as exc:
            raise DirectoryUnavailable(f"The directory {s.url} stopped answering ({_reason(exc)}).") from None
        finally:
            _close(conn)

    def authenticate(self, username: str, password: str) -> DirectoryPerson:
        """Bind as ``username`` with ``password`` and read their entry and groups.

        Raises:
            AuthenticationFailed: an empty password (refused before any bind), no such person, or the
                directory says the password is wrong (result 49): "Wrong username or password.".
            DirectoryUnavailable: the directory cannot be reached, TLS fails, or it answers with an error.
        """
        if not password or not username:
            raise AuthenticationFailed("Wrong username or password.")
        dn = self._find_dn(username)
        if not dn:
            raise AuthenticationFailed("Wrong username or password.")
        s = self.settings
        conn = self._connection(dn, password)
        try:
            if not conn.bind():
                if conn.result.get("result") == INVALID_CREDENTIALS:
                    raise AuthenticationFailed("Wrong username or password.")
                raise DirectoryUnavailable(
                    f"The directory {s.url} did not sign you in ({conn.result.get('description')}); ask an admin."
                )
            display, email = "", ""
            if conn.search(dn, "(objectClass=*)", search_scope=BASE, attributes=["displayName", "cn", "mail"]):
                display = _first(conn.entries[0], "displayName", "cn")
                email = _first(conn.entries[0], "mail")
            groups: set[str] = set()
            if s.group_base:
                flt = s.group_filter.replace("{dn}", filter_value(dn)).replace("{username}", filter_value(username))
                conn.search(s.group_base, flt, search_scope=SUBTREE, attributes=[s.group_attribute])
                if conn.result.get("result") not in (0, 32):
                    raise DirectoryUnavailable(
                        f"The directory {s.url} could not list your groups ({conn.result.get('description')})."
                    )
                groups = {name for name in (_first(e, s.group_attribute) for e in conn.entries) if name}
            return DirectoryPerson(dn, display, email, tuple(sorted(groups)))
        except (LDAPException, OSError) as exc:
            raise DirectoryUnavailable(f"The directory {s.url} stopped answering ({_reason(exc)}).") from None
        finally:
            _close(conn)


def _close(conn: Connection) -> None:
    """Unbind and close ``conn``; a connection that broke (TLS refused, server gone) closes quietly."""
    with contextlib.suppress(LDAPException, OSError):
        conn.unbind()


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:200] if text else type(exc).__name__


__all__ = ["Directory", "DirectoryPerson", "DirectoryUnavailable", "filter_value"]
