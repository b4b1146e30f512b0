"""Windows security identifiers (SIDs, [MS-DTYP] 2.4.2) as readers: the ``principal_for_sid`` of a
:class:`~knowledge.sources.base.SourceContext`, which the SMB source asks about every SID of a file's
ACL (:mod:`knowledge.sources.smb`).

:func:`sid_mapper` answers from ``sources.sid_map`` first, then (when ``accounts.ldap.url`` is set)
from the LDAP directory: the entry whose ``sources.sid_attribute`` holds the SID -- ``objectSid``
(Active Directory and Samba AD hold the binary SID, [MS-DTYP] 2.4.2.2, searched with each byte
escaped as RFC 4515 section 3 allows) or a text attribute such as ``sambaSID`` (Samba's LDAP schema,
``S-1-5-21-...``). A group entry (its object classes: ``group``, ``groupOfNames``,
``groupOfUniqueNames``, ``posixGroup``, ``sambaGroupMapping``) becomes ``group:<accounts.ldap.group_attribute>``,
the name a directory sign-in gives the group here; any other entry a person, ``user:<name>``, its
name read from the attribute the sign-in matches the username against (``uid`` in
``(uid={username})`` or ``uid={username},ou=people,...``; ``uid`` when neither says), made the
account's key as the sign-in makes it (:func:`~knowledge.people.accounts.normal_username`).
"""

from __future__ import annotations

import logging
import re
import struct
import threading
from collections.abc import Callable

from knowledge.config import LdapSettings, Settings
from knowledge.errors import InvalidArgument
from knowledge.people.accounts import normal_username
from knowledge.people.directory import Directory, DirectoryUnavailable, filter_value
from knowledge.sources.base import SourceUnavailable

log = logging.getLogger(__name__)

#: Object classes of a group entry (lower case): AD's, RFC 4519's, RFC 2307's, Samba's.
GROUP_CLASSES = frozenset({"group", "groupofnames", "groupofuniquenames", "posixgroup", "sambagroupmapping"})
#: The attribute holding the binary SID ([MS-DTYP] 2.4.2.2); any other is compared as text.
BINARY_SID_ATTRIBUTE = "objectsid"

_NAME_IN_FILTER = re.compile(r"\(\s*([A-Za-z][\w-]*)\s*=\s*\{username\}\s*\)")
_NAME_IN_DN = re.compile(r"^\s*([A-Za-z][\w-]*)\s*=\s*\{username\}\s*,")


def sid_text(data: bytes, offset: int = 0) -> tuple[str, int]:
    """The SID at ``data[offset:]`` in its string form (``S-1-5-21-...``, [MS-DTYP] 2.4.2.1, the
    authority in hex when it needs more than 32 bits) and its length in bytes ([MS-DTYP] 2.4.2.2:
    revision, sub-authority count, 6-byte big-endian authority, little-endian 32-bit sub-authorities).

    Raises:
        ValueError: ``data`` is too short for the SID it starts."""
    if len(data) < offset + 8:
        raise ValueError("a SID is cut short")
    revision, count = data[offset], data[offset + 1]
    authority = int.from_bytes(data[offset + 2 : offset + 8], "big")
    end = offset + 8 + 4 * count
    if len(data) < end:
        raise ValueError("a SID is cut short")
    subs = struct.unpack_from(f"<{count}I", data, offset + 8)
    auth = str(authority) if authority < 2**32 else f"0x{authority:012X}"
    return "-".join(["S", str(revision), auth, *map(str, subs)]), end - offset


def sid_bytes(sid: str) -> bytes:
    """The binary form ([MS-DTYP] 2.4.2.2) of the string SID ``sid`` (``S-1-5-21-1-2-3-1001``).

    Raises:
        ValueError: ``sid`` is not ``S-<revision>-<authority>[-<sub-authority>]...``."""
    parts = sid.strip().upper().split("-")
    if len(parts) < 3 or parts[0] != "S" or len(parts) > 3 + 15:
        raise ValueError(f"{sid!r} is not a SID (S-1-5-21-...)")
    try:
        revision = int(parts[1])
        authority = int(parts[2], 16) if parts[2].startswith("0X") else int(parts[2])
        subs = [int(p) for p in parts[3:]]
        return bytes([revision, len(subs)]) + authority.to_bytes(6, "big") + b"".join(s.to_bytes(4, "little") for s in subs)
    except (ValueError, OverflowError):
        raise ValueError(f"{sid!r} is not a SID (S-1-5-21-...)") from None


def binary_filter_value(data: bytes) -> str:
    """``data`` for an LDAP filter, every byte escaped as ``\\XX`` (RFC 4515 section 3)."""
    return "".join(f"\\{b:02x}" for b in data)


def username_attribute(ldap: LdapSettings) -> str:
    """The attribute a directory sign-in matches the username against: from ``user_dn``
    (``uid={username},...``) or ``search_filter`` (``(sAMAccountName={username})``); ``uid`` otherwise."""
    if ldap.user_dn:
        found = _NAME_IN_DN.match(ldap.user_dn)
        if found:
            return found.group(1)
    found = _NAME_IN_FILTER.search(ldap.search_filter or "")
    return found.group(1) if found else "uid"


def _bases(ldap: LdapSettings) -> list[str]:
    """Where people and groups live: ``search_base``, ``group_base`` and the parent of ``user_dn``."""
    bases = [ldap.search_base, ldap.group_base]
    if ldap.user_dn and _NAME_IN_DN.match(ldap.user_dn):
        bases.append(ldap.user_dn.split(",", 1)[1].strip())
    return list(dict.fromkeys(b.strip() for b in bases if b and b.strip()))


def _first_text(values: object) -> str:
    for value in values if isinstance(values, list | tuple) else [values]:
        text = value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")
        if text.strip():
            return text.strip()
    return ""


class LdapSidLookup:
    """``lookup(sid) -> "user:..." | "group:..." | None`` by one LDAP search (see the module's words).

    Args:
        ldap: ``accounts.ldap`` with ``url`` set.
        attribute: the SID's attribute (``sources.sid_attribute``).
        directory: the :class:`Directory` to search (default: one made of ``ldap``).

    Raises (from a lookup): :class:`SourceUnavailable` when the directory cannot be asked -- not
    ``None``, which would take the readers of every file the SID grants away until the next run.
    """

    def __init__(self, ldap: LdapSettings, attribute: str = "objectSid", directory: Directory | None = None) -> None:
        self.ldap = ldap
        self.attribute = attribute
        self.directory = directory or Directory(ldap)
        self.name_attribute = username_attribute(ldap)
        self.bases = _bases(ldap)

    def __call__(self, sid: str) -> str | None:
        if not self.bases:
            log.debug("No accounts.ldap search_base, group_base or user_dn: the SID %s is not looked up", sid)
            return None
        try:
            value = (
                binary_filter_value(sid_bytes(sid)) if self.attribute.lower() == BINARY_SID_ATTRIBUTE else filter_value(sid)
            )
        except ValueError:
            return None
        flt = f"({self.attribute}={value})"
        try:
            found = self.directory.search(self.bases, flt, ["objectClass", self.name_attribute, self.ldap.group_attribute])
        except DirectoryUnavailable as exc:
            raise SourceUnavailable(
                f"The directory could not be asked who the Windows SID {sid} is ({exc}); the run stops so"
                " that no file loses its readers. Try again later, or map the SID in sources.sid_map."
            ) from None
        entries = {dn.lower(): attrs for dn, attrs in found}
        if len(entries) != 1:
            if entries:
                log.warning("The directory holds %d entries with the SID %s: it grants nobody", len(entries), sid)
            return None
        attrs = {k.lower(): v for k, v in next(iter(entries.values())).items()}
        classes = {str(c).lower() for c in attrs.get("objectclass", [])}
        if classes & GROUP_CLASSES:
            name = _first_text(attrs.get(self.ldap.group_attribute.lower(), []))
            return f"group:{name}" if name else None
        name = _first_text(attrs.get(self.name_attribute.lower(), []))
        if not name:
            return None
        try:
            return f"user:{normal_username(name)}"
        except InvalidArgument:
            log.debug("The directory's name %r of the SID %s is not a username here: it grants nobody", name, sid)
            return None


def sid_mapper(
    settings: Settings, directory_lookup: Callable[[str], str | None] | None = None
) -> Callable[[str], str | None]:
    """``principal_for_sid(sid) -> "user:<name>" | "group:<name>" | None`` for one run.

    ``sources.sid_map`` answers first (SIDs compared in upper case); then ``directory_lookup`` when
    given, else an :class:`LdapSidLookup` when ``accounts.ldap.url`` is set; else ``None`` (the SID
    grants nobody). Directory answers, ``None`` too, are kept for the mapper's life (thread-safe).

    Raises (from the mapper): :class:`SourceUnavailable` when the directory cannot be asked."""
    table = dict(settings.sources.sid_map)
    lookup = directory_lookup
    if lookup is None and settings.accounts.ldap.url:
        lookup = LdapSidLookup(settings.accounts.ldap, settings.sources.sid_attribute)
    known: dict[str, str | None] = {}
    lock = threading.Lock()

    def principal_for_sid(sid: str) -> str | None:
        key = sid.strip().upper()
        if key in table:
            return table[key]
        if lookup is None:
            return None
        with lock:
            if key in known:
                return known[key]
        principal = lookup(key)
        with lock:
            known[key] = principal
        return principal

    return principal_for_sid


__all__ = [
    "GROUP_CLASSES",
    "LdapSidLookup",
    "binary_filter_value",
    "sid_bytes",
    "sid_mapper",
    "sid_text",
    "username_attribute",
]
