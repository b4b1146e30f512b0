"""SMB / Windows shares (SMB 2 and 3, [MS-SMB2]) as a source, through ``smbprotocol``'s message
layer: one connection, one signed (or, with ``encrypt``, encrypted) session and one tree connect per
:class:`SmbSource`, made on first use and closed by :meth:`SmbSource.close`.

Listing: each folder under ``path`` is opened once and read with SMB2 QUERY_DIRECTORY in the
``FileIdFullDirectoryInformation`` class ([MS-FSCC] 2.4.18), which gives every child's size, times,
attributes and file id in the same answer (one round trip per 64 KiB of names). Then each file's
security descriptor is read with one compounded CREATE + QUERY_INFO(SECURITY, DACL) + CLOSE
([MS-SMB2] 3.2.4.1.4), up to :data:`SD_PIPELINE` of them in flight at once.

Permissions (the NTFS ACL of each file, [MS-DTYP] 2.4.6 SECURITY_DESCRIPTOR) become the file's
readers; see :func:`readers_from_security_descriptor` for the rules.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn
from urllib.parse import quote

from smbprotocol.connection import Connection
from smbprotocol.exceptions import (
    AccessDenied,
    BadNetworkName,
    DeletePending,
    EndOfFile,
    FileIsADirectory,
    LogonFailure,
    NoMoreFiles,
    ObjectNameNotFound,
    ObjectPathNotFound,
    PasswordExpired,
    SharingViolation,
    SMBAuthenticationError,
    SMBConnectionClosed,
    SMBException,
    SMBResponseException,
    WrongPassword,
)
from smbprotocol.open import (
    ImpersonationLevel,
    ShareAccess,
    SMB2CloseRequest,
    SMB2CreateRequest,
    SMB2CreateResponse,
    SMB2QueryDirectoryRequest,
    SMB2QueryDirectoryResponse,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
    SMB2ReadRequest,
    SMB2ReadResponse,
)
from smbprotocol.session import Session
from smbprotocol.tree import TreeConnect

from knowledge.errors import InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    Field,
    Sink,
    Source,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.sids import sid_bytes, sid_text

log = logging.getLogger(__name__)

#: How many per-file security-descriptor reads (3 credits each) are in flight at once, at most (fewer
#: when the server granted fewer credits).
SD_PIPELINE = 32
#: Largest single READ asked for, in bytes (also bounded by the server's MaxReadSize and the credits).
READ_CHUNK = 1024 * 1024
#: QUERY_DIRECTORY output buffer, in bytes (one credit).
LIST_CHUNK = 65536

# [MS-DTYP] 2.4.3 ACCESS_MASK / [MS-SMB2] 2.2.13.1.1: the bits that let a principal read a file's bytes.
FILE_READ_DATA = 0x00000001
GENERIC_ALL = 0x10000000
GENERIC_READ = 0x80000000
READ_BITS = FILE_READ_DATA | GENERIC_READ | GENERIC_ALL
READ_CONTROL = 0x00020000
FILE_READ_ATTRIBUTES = 0x00000080
SYNCHRONIZE = 0x00100000
FILE_LIST_DIRECTORY = 0x00000001
# [MS-DTYP] 2.4.4.1 ACE_HEADER: AceType and AceFlags.
ACCESS_ALLOWED_ACE_TYPE = 0x00
ACCESS_DENIED_ACE_TYPE = 0x01
ACCESS_ALLOWED_OBJECT_ACE_TYPE = 0x05
ACCESS_DENIED_OBJECT_ACE_TYPE = 0x06
ACCESS_ALLOWED_CALLBACK_ACE_TYPE = 0x09
ACCESS_DENIED_CALLBACK_ACE_TYPE = 0x0A
ACCESS_ALLOWED_CALLBACK_OBJECT_ACE_TYPE = 0x0B
ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE = 0x0C
INHERIT_ONLY_ACE = 0x08
# [MS-DTYP] 2.4.6 SECURITY_DESCRIPTOR Control: SE_DACL_PRESENT.
SE_DACL_PRESENT = 0x0004
# [MS-DTYP] 2.4.7 SECURITY_INFORMATION: DACL_SECURITY_INFORMATION.
DACL_SECURITY_INFORMATION = 0x00000004
# [MS-FSCC] 2.6 File Attributes.
FILE_ATTRIBUTE_HIDDEN = 0x02
FILE_ATTRIBUTE_SYSTEM = 0x04
FILE_ATTRIBUTE_DIRECTORY = 0x10
FILE_ATTRIBUTE_REPARSE_POINT = 0x400

#: Well-known SIDs ([MS-DTYP] 2.4.2.4) whose grant means "everyone who may use the share".
EVERYONE_SIDS = frozenset({"S-1-1-0", "S-1-5-11"})  # Everyone, Authenticated Users
#: Well-known SIDs no person signs in as here: a deny of them takes nothing from a reader.
GUEST_SIDS = frozenset({"S-1-5-7", "S-1-5-32-546"})  # Anonymous Logon, BUILTIN\Guests
#: Relative ids of a domain's Guest account and Domain Guests group ([MS-DTYP] 2.4.2.4).
GUEST_RIDS = frozenset({501, 514})

_FILETIME_EPOCH = datetime(1601, 1, 1, tzinfo=UTC)


# -- security descriptors ([MS-DTYP] 2.4) -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ace:
    """One ACE of a DACL: its ``type`` and ``flags`` ([MS-DTYP] 2.4.4.1), access ``mask`` (2.4.3), ``sid``."""

    type: int
    flags: int
    mask: int
    sid: str


def parse_dacl(descriptor: bytes) -> list[Ace] | None:
    """The ACEs of the DACL of a self-relative security descriptor ([MS-DTYP] 2.4.6), in order;
    ``None`` for a NULL DACL (none present: full access for everyone). ACE types other than the
    (callback, object) allowed and denied ones are left out.

    Raises:
        ValueError: the descriptor is malformed."""
    if len(descriptor) < 20:
        raise ValueError("a security descriptor is cut short")
    control, offset_dacl = struct.unpack_from("<H", descriptor, 2)[0], struct.unpack_from("<I", descriptor, 16)[0]
    if not control & SE_DACL_PRESENT or offset_dacl == 0:
        return None
    if len(descriptor) < offset_dacl + 8:
        raise ValueError("a DACL is cut short")
    acl_size, ace_count = struct.unpack_from("<HH", descriptor, offset_dacl + 2)
    pos, end = offset_dacl + 8, offset_dacl + acl_size
    aces = []
    for _ in range(ace_count):
        if pos + 4 > end:
            raise ValueError("an ACE is cut short")
        ace_type, ace_flags, ace_size = struct.unpack_from("<BBH", descriptor, pos)
        if ace_size < 4 or pos + ace_size > end:
            raise ValueError("an ACE has a wrong size")
        if ace_type in (
            ACCESS_ALLOWED_ACE_TYPE,
            ACCESS_DENIED_ACE_TYPE,
            ACCESS_ALLOWED_CALLBACK_ACE_TYPE,
            ACCESS_DENIED_CALLBACK_ACE_TYPE,
        ):
            mask = struct.unpack_from("<I", descriptor, pos + 4)[0]
            sid, _ = sid_text(descriptor[: pos + ace_size], pos + 8)
            aces.append(Ace(ace_type, ace_flags, mask, sid))
        elif ace_type in (
            ACCESS_ALLOWED_OBJECT_ACE_TYPE,
            ACCESS_DENIED_OBJECT_ACE_TYPE,
            ACCESS_ALLOWED_CALLBACK_OBJECT_ACE_TYPE,
            ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE,
        ):  # [MS-DTYP] 2.4.4.3/2.4.4.5: mask, flags, optional ObjectType and InheritedObjectType GUIDs, SID
            mask, object_flags = struct.unpack_from("<II", descriptor, pos + 4)
            sid_at = pos + 12 + 16 * bool(object_flags & 1) + 16 * bool(object_flags & 2)
            sid, _ = sid_text(descriptor[: pos + ace_size], sid_at)
            aces.append(Ace(ace_type, ace_flags, mask, sid))
        pos += ace_size
    return aces


def _is_guest(sid: str) -> bool:
    if sid in GUEST_SIDS:
        return True
    parts = sid.split("-")
    return sid.startswith("S-1-5-21-") and len(parts) == 8 and int(parts[-1]) in GUEST_RIDS


def readers_from_aces(
    aces: list[Ace] | None,
    principal_for_sid: Callable[[str], str | None],
    *,
    where: str = "",
    logged: set[str] | None = None,
) -> tuple[str, ...] | None:
    """Who may read a file with the DACL ``aces`` (from :func:`parse_dacl`), as readers.

    The rules, in order:

    1. No DACL (a NULL DACL): everyone may read: ``None`` (the store's sharing applies).
    2. ACEs marked INHERIT_ONLY apply to a folder's children, not to the file: skipped.
    3. An ACE is about reading when its mask holds FILE_READ_DATA, GENERIC_READ or GENERIC_ALL.
       Allowed ACEs (plain ones; callback and object ACEs are conditional, so they grant nobody)
       grant their SID; denied ACEs of every kind deny theirs.
    4. Without a read-deny, a grant to Everyone (``S-1-1-0``) or Authenticated Users (``S-1-5-11``)
       makes the readers ``None``: whoever the store is shared with.
    5. A read-deny of Everyone or Authenticated Users: nobody reads (``()``). A deny of a guest
       (Anonymous Logon, BUILTIN\\Guests, a domain's Guest or Domain Guests) takes nothing from anyone
       who signs in here and is ignored. Any other read-deny: readers cannot say "everyone but X" and
       do not know who is in which Windows group, so only the users granted by name and not denied
       keep reading; the broad grants (Everyone, Authenticated Users, every group) are dropped.
       Under-granting is the safe error: an admin can always share the document by hand.
    6. Each remaining SID is mapped with ``principal_for_sid`` to ``"user:..."`` or ``"group:..."``;
       a SID it does not know grants nobody (said in a debug log line). An empty tuple: nobody but the
       admins reads the file.

    ``where`` (the file's path) is only named in the log; ``logged``: the unknown SIDs already said
    (each is logged once per set, not once per file).
    """
    if aces is None:
        return None
    allowed: list[str] = []
    denied: set[str] = set()
    for ace in aces:
        if ace.flags & INHERIT_ONLY_ACE or not ace.mask & READ_BITS:
            continue
        if ace.type in (ACCESS_ALLOWED_ACE_TYPE,):
            allowed.append(ace.sid)
        elif ace.type in (
            ACCESS_DENIED_ACE_TYPE,
            ACCESS_DENIED_OBJECT_ACE_TYPE,
            ACCESS_DENIED_CALLBACK_ACE_TYPE,
            ACCESS_DENIED_CALLBACK_OBJECT_ACE_TYPE,
        ):
            denied.add(ace.sid)
    if denied & EVERYONE_SIDS:
        return ()
    denied = {sid for sid in denied if not _is_guest(sid)}
    if not denied and EVERYONE_SIDS.intersection(allowed):
        return None
    readers: set[str] = set()
    for sid in dict.fromkeys(allowed):
        if sid in denied or sid in EVERYONE_SIDS:
            continue
        principal = principal_for_sid(sid)
        if principal is None:
            if logged is None or sid not in logged:
                log.debug("SMB ACL of %s: the SID %s is not known (sources.sid_map, LDAP): it grants nobody", where, sid)
                if logged is not None:
                    logged.add(sid)
            continue
        if denied and not principal.startswith("user:"):
            log.debug("SMB ACL of %s: a read-deny is present, so the grant to %s (%s) is dropped", where, sid, principal)
            continue
        readers.add(principal)
    return tuple(sorted(readers))


def readers_from_security_descriptor(
    descriptor: bytes,
    principal_for_sid: Callable[[str], str | None],
    *,
    where: str = "",
    logged: set[str] | None = None,
) -> tuple[str, ...] | None:
    """:func:`readers_from_aces` of the DACL of ``descriptor`` (self-relative, [MS-DTYP] 2.4.6).

    Raises:
        ValueError: the descriptor is malformed."""
    return readers_from_aces(parse_dacl(descriptor), principal_for_sid, where=where, logged=logged)


# -- the source ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Item:
    """One child of a folder, from FileIdFullDirectoryInformation ([MS-FSCC] 2.4.18); times are FILETIMEs."""

    name: str
    creation: int
    last_write: int
    change: int
    size: int
    attributes: int
    file_id: int


def _filetime(value: int) -> datetime:
    return _FILETIME_EPOCH + timedelta(microseconds=value // 10)


def _parse_directory(data: bytes) -> Iterator[_Item]:
    """The entries of a QUERY_DIRECTORY answer in the FileIdFullDirectoryInformation class ([MS-FSCC]
    2.4.18: NextEntryOffset, FileIndex, four FILETIMEs, EndOfFile, AllocationSize, FileAttributes,
    FileNameLength, EaSize, Reserved, FileId, FileName in UTF-16LE)."""
    pos = 0
    while pos + 80 <= len(data):
        (next_offset, _index, creation, _access, write, change, size, _alloc, attrs, name_len, _ea, _res, file_id) = (
            struct.unpack_from("<IIqqqqqqIIIIQ", data, pos)
        )
        name = data[pos + 80 : pos + 80 + name_len].decode("utf-16-le", errors="surrogatepass")
        if name not in (".", ".."):
            yield _Item(name, creation, write, change, size, attrs, file_id)
        if not next_offset:
            return
        pos += next_offset


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] if text else type(exc).__name__


class SmbSource(Source):
    """The files of a folder of an SMB share (Windows, Samba, a NAS), with their NTFS permissions.

    Config (see :attr:`fields`): ``host``, ``port`` (445), ``share``, ``path`` (a folder inside the
    share, ``/``- or ``\\``-separated; blank: the share's root), ``username``, ``password`` (secret),
    ``domain`` (the account's Windows domain, optional), ``encrypt`` (require SMB 3 encryption),
    ``recursive`` (list sub-folders, default yes), ``include_hidden`` (also list files and folders
    marked hidden or system: ``Thumbs.db``, ``desktop.ini``, Office's ``~$`` lock files, Samba's
    dot-files; default no).

    Each :class:`Entry`:

    - ``path``: the file's path under ``path``, ``/``-separated.
    - ``version``: ``"<size>-<last write>-<change>"`` (bytes, FILETIMEs in 100 ns). On Windows the
      change time moves with any write, even one whose writer put the last-write time back (and with
      a rename or a changed ACL: such files are read again, their bytes found equal, not embedded
      again). Samba reports the last-write time as the change time, so there a writer that keeps the
      size and sets the last-write time back is not seen (as rsync's quick check would not).
    - ``content_key``: ``"smb-file:<file id>-<size>-<last write>"``. The file id (the server's:
      an NTFS file reference, whose sequence number changes when the record is reused; a Samba
      inode number) names the same file under any name, and a rename (of the file, or of a folder
      above it) keeps it, with the size and the last-write time: so a renamed file is found without
      reading it. Two equal keys are one file that moved without being written (a write moves the
      last-write time), or -- on Samba, whose ids are inode numbers the file system hands out again --
      a new file given a deleted one's inode with its size and last-write time to the 100 ns: only a
      writer that sets the time (a restore, an unzip) does that, and the version of a file trusts
      size and time alike. The creation time is left out: Samba computes it when the file system
      keeps none, and a rename can change it.
    - ``readers``: from the file's DACL, see :func:`readers_from_aces`; SIDs are mapped by
      ``context.principal_for_sid`` (``sources.sid_map``, the LDAP directory:
      :func:`knowledge.sources.sids.sid_mapper`). A descriptor that cannot be read: nobody (``()``).
    - ``url``: ``smb://host[:port]/share/path/to/file`` (percent-encoded, never with credentials).
    - ``attributes``: ``{"modified": ISO 8601 UTC of the last write}``.

    Raises :class:`SourceUnavailable` (refused, reset, timed out), :class:`SourceAuthFailed` (wrong
    user name or password; the account may not use the share or list a folder),
    :class:`SourceNotFound` (no such share or folder), :class:`EntryGone` (``fetch``: the file
    vanished, is locked, or may not be read by the account), :class:`SourceError`.
    """

    kind = "smb"
    title = "SMB / Windows share"
    description = "Files of a Windows or Samba share (SMB 2/3), with their NTFS permissions as readers."
    carries_permissions = True
    fields = (
        Field("host", "Server", "Host name or address of the file server (files.example.org).", required=True),
        Field("port", "Port", "The SMB port.", default=445, kind="int"),
        Field("share", "Share", "The share's name (team, not \\\\server\\team).", required=True),
        Field("path", "Folder", "A folder inside the share (projects/2024); blank for the whole share.", default=""),
        Field("username", "User name", "The account that reads the files (its domain goes below).", required=True),
        Field("password", "Password", "The account's password.", secret=True, required=True),
        Field("domain", "Domain", "The account's Windows domain (EXAMPLE); blank for a local account.", default=""),
        Field("encrypt", "Encrypt", "Require SMB 3 encryption of everything sent.", default=False, kind="bool"),
        Field("recursive", "Sub-folders", "Also read the files of sub-folders.", default=True, kind="bool"),
        Field(
            "include_hidden",
            "Hidden files",
            "Also read files and folders marked hidden or system (Thumbs.db, ~$ lock files).",
            default=False,
            kind="bool",
        ),
    )

    def __init__(self, config: Mapping[str, Any], context: SourceContext) -> None:
        super().__init__(config, context)
        self.host = str(self.required("host")).strip()
        if any(c in self.host for c in "/\\@ ") or not self.host:
            raise InvalidArgument(f"The server must be a host name or address, not {self.host!r}.", param="host")
        try:
            self.port = int(self.setting("port", 445))
        except (TypeError, ValueError):
            raise InvalidArgument("The port must be a whole number.", param="port") from None
        if not 0 < self.port < 65536:
            raise InvalidArgument(f"The port must be between 1 and 65535, not {self.port}.", param="port")
        self.share = str(self.required("share")).strip().strip("\\/")
        if not self.share or any(c in self.share for c in "/\\"):
            raise InvalidArgument("The share is one name (team), not a path.", param="share")
        parts = [p for p in str(self.setting("path", "")).replace("\\", "/").split("/") if p not in ("", ".")]
        if ".." in parts:
            raise InvalidArgument("The folder may not contain '..'.", param="path")
        self.folder = "/".join(parts)
        self.username = str(self.required("username")).strip()
        self._password = str(self.required("password"))
        self.domain = str(self.setting("domain", "")).strip()
        self.encrypt = bool(self.setting("encrypt", False))
        self.recursive = bool(self.setting("recursive", True))
        self.include_hidden = bool(self.setting("include_hidden", False))
        self.timeout = float(context.timeout)
        self._conn: Any = None
        self._session: Any = None
        self._tree: Any = None
        self._unknown_sids: set[str] = set()

    def __repr__(self) -> str:
        return f"SmbSource({self.location()!r}, user={self.username!r})"

    # -- words ---------------------------------------------------------------------------------------
    def location(self) -> str:
        port = "" if self.port == 445 else f":{self.port}"
        tail = "/" + quote(self.folder) if self.folder else ""
        return f"smb://{self.host}{port}/{quote(self.share)}{tail}"

    def _url(self, path: str) -> str:
        return f"{self.location()}/{quote(path)}"

    def _account(self) -> str:
        return f"{self.domain}\\{self.username}" if self.domain else self.username

    # -- connection ----------------------------------------------------------------------------------
    def _connect(self) -> None:
        if self._tree is not None:
            return
        where = f"the SMB server {self.host}:{self.port}"
        conn = Connection(uuid.uuid4(), self.host, self.port, require_signing=True)
        try:
            conn.connect(timeout=self.timeout)
        except (ValueError, OSError, SMBException) as exc:
            _disconnect(conn)
            raise SourceUnavailable(
                f"{where} did not answer ({_reason(exc)}); check the server and port, or try again later."
            ) from None
        self._conn = conn
        try:
            session = Session(conn, self._account(), self._password, require_encryption=self.encrypt)
            session.connect()
            self._session = session
        except (LogonFailure, WrongPassword, SMBAuthenticationError) as exc:
            self.close()
            detail = "" if isinstance(exc, LogonFailure | WrongPassword) else f" ({_scrub(_reason(exc), self._password)})"
            raise SourceAuthFailed(
                f"{where} refused the user name or password of {self._account()}{detail}; check them."
            ) from None
        except PasswordExpired:
            self.close()
            raise SourceAuthFailed(f"The password of {self._account()} on {where} has expired; set a new one.") from None
        except (SMBException, OSError, ValueError) as exc:
            self.close()
            self._raise_connection(exc, f"signing in to {where}")
        try:
            tree = TreeConnect(self._session, rf"\\{self.host}\{self.share}")
            tree.connect()
            self._tree = tree
        except BadNetworkName:
            self.close()
            raise SourceNotFound(f"{where} has no share named {self.share!r}; check the share's name.") from None
        except AccessDenied:
            self.close()
            raise SourceAuthFailed(
                f"The account {self._account()} may not use the share {self.share!r} on {where}."
            ) from None
        except (SMBException, OSError, ValueError) as exc:
            self.close()
            self._raise_connection(exc, f"opening the share {self.share!r} on {where}")

    def _raise_connection(self, exc: BaseException, doing: str) -> NoReturn:
        raise SourceUnavailable(
            f"The SMB server {self.host}:{self.port} stopped answering while {doing}"
            f" ({_scrub(_reason(exc), self._password)}); try again later."
        ) from None

    def close(self) -> None:
        conn, self._conn, self._session, self._tree = self._conn, None, None, None
        if conn is not None:
            _disconnect(conn)

    # -- requests ------------------------------------------------------------------------------------
    def _send(self, messages: list[Any]) -> list[Any]:
        try:
            return list(
                self._conn.send_compound(
                    messages, self._session.session_id, self._tree.tree_connect_id, related=len(messages) > 1
                )
            )
        except (SMBException, OSError, ValueError) as exc:
            self._drop()
            self._raise_connection(exc, "sending a request")

    def _receive(self, request: Any) -> Any:
        """The answer's header, or the :class:`SMBResponseException` of a failed status; raises
        :class:`SourceUnavailable` when the connection broke or the answer took over the timeout."""
        try:
            return self._conn.receive(request, timeout=self.timeout)
        except SMBResponseException as exc:
            return exc
        except (SMBConnectionClosed, SMBException, OSError, ValueError) as exc:
            self._drop()
            if "timeout" in str(exc).lower():
                raise SourceUnavailable(
                    f"The SMB server {self.host}:{self.port} did not answer within {self.timeout:g} s; try again later."
                ) from None
            self._raise_connection(exc, "reading")

    def _credits(self) -> int:
        """Credits the server granted that no request in flight holds ([MS-SMB2] 3.2.4.1.5)."""
        with self._conn.sequence_lock:
            return int(self._conn.sequence_window["high"] - self._conn.sequence_window["low"])

    def _drop(self) -> None:
        """Forget a broken connection (the next use connects again)."""
        self.close()

    def _create(self, path: str, access: int, options: int) -> Any:
        create = SMB2CreateRequest()
        create["impersonation_level"] = ImpersonationLevel.Impersonation
        create["desired_access"] = access
        create["file_attributes"] = 0
        create["share_access"] = ShareAccess.FILE_SHARE_READ | ShareAccess.FILE_SHARE_WRITE | ShareAccess.FILE_SHARE_DELETE
        create["create_disposition"] = 1  # FILE_OPEN
        create["create_options"] = options
        create["buffer_path"] = path.replace("/", "\\").encode("utf-16-le") if path else b"\x00\x00"
        return create

    @staticmethod
    def _close_request(file_id: bytes = b"\xff" * 16) -> Any:
        close = SMB2CloseRequest()
        close["file_id"] = file_id
        return close

    def _open(self, path: str, access: int, options: int) -> bytes:
        """Open ``path``; its 16-byte file id. Raises the SMBResponseException of a failed status."""
        (answer,) = [self._receive(r) for r in self._send([self._create(path, access, options)])]
        if isinstance(answer, Exception):
            raise answer
        response = SMB2CreateResponse()
        response.unpack(answer["data"].get_value())
        return bytes(response["file_id"].get_value())

    def _close_file(self, file_id: bytes) -> None:
        for request in self._send([self._close_request(file_id)]):
            self._receive(request)

    def _list(self, folder: str) -> list[_Item]:
        """The children of ``folder`` (share-relative, ``/``-separated). Raises the
        SMBResponseException of the open (no such folder, access denied)."""
        file_id = self._open(folder, FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE, 0x1)  # DIRECTORY_FILE
        items: list[_Item] = []
        try:
            while True:
                query = SMB2QueryDirectoryRequest()
                query["file_information_class"] = 38  # FileIdFullDirectoryInformation
                query["flags"] = 0
                query["file_index"] = 0
                query["file_id"] = file_id
                query["output_buffer_length"] = LIST_CHUNK
                query["buffer"] = "*".encode("utf-16-le")
                (answer,) = [self._receive(r) for r in self._send([query])]
                if isinstance(answer, NoMoreFiles):
                    break
                if isinstance(answer, Exception):
                    raise answer
                response = SMB2QueryDirectoryResponse()
                response.unpack(answer["data"].get_value())
                items.extend(_parse_directory(response["buffer"].get_value()))
        finally:
            if self._conn is not None:
                self._close_file(file_id)
        return items

    def _security_requests(self, path: str) -> list[Any]:
        query = SMB2QueryInfoRequest()
        query["info_type"] = 3  # SMB2_0_INFO_SECURITY
        query["file_info_class"] = 0
        query["output_buffer_length"] = 65536
        query["additional_information"] = DACL_SECURITY_INFORMATION
        query["file_id"] = b"\xff" * 16  # the compound's CREATE ([MS-SMB2] 3.2.4.1.4)
        return [self._create(path, READ_CONTROL, 0x40), query, self._close_request()]  # NON_DIRECTORY_FILE

    def _security_descriptors(self, paths: list[str]) -> Iterator[tuple[str, bytes | Exception]]:
        """Each of ``paths`` with its security descriptor (DACL only), or the exception of its read;
        :data:`SD_PIPELINE` compounds in flight at once."""
        pending: deque[tuple[str, list[Any]]] = deque()
        todo = iter(paths)
        waiting: str | None = None
        while True:
            while len(pending) < SD_PIPELINE and (waiting is not None or (waiting := next(todo, None)) is not None):
                if pending and self._credits() < 3 + 2:  # 3 for the compound, 2 kept for a close
                    break
                pending.append((waiting, self._send(self._security_requests(waiting))))
                waiting = None
            if not pending:
                return
            path, requests = pending.popleft()
            create, query, _close = (self._receive(r) for r in requests)
            failed = create if isinstance(create, Exception) else query if isinstance(query, Exception) else None
            if failed is not None:
                yield path, failed
                continue
            response = SMB2QueryInfoResponse()
            response.unpack(query["data"].get_value())
            yield path, bytes(response["buffer"].get_value())

    # -- the interface -------------------------------------------------------------------------------
    def entries(self) -> Iterator[Entry]:
        self._connect()
        folders = [""]
        root = True
        while folders:
            rel = folders.pop()
            full = "/".join(p for p in (self.folder, rel) if p)
            try:
                items = self._list(full)
            except (ObjectNameNotFound, ObjectPathNotFound):
                if root:
                    raise SourceNotFound(
                        f"The share {self.share!r} on {self.host} has no folder {self.folder!r}; check the folder."
                    ) from None
                log.info("SMB folder %s vanished while listing; its files are gone", full)
                continue
            except AccessDenied:
                raise SourceAuthFailed(
                    f"The account {self._account()} may not list the folder {full or '(root)'!r} of the share"
                    f" {self.share!r}; give it read access or choose another folder."
                ) from None
            except SMBResponseException as exc:
                raise SourceError(
                    f"The SMB server could not list the folder {full or '(root)'!r} ({_reason(exc)})."
                ) from None
            root = False
            files: dict[str, _Item] = {}
            for item in sorted(items, key=lambda i: i.name):
                if item.attributes & FILE_ATTRIBUTE_REPARSE_POINT:
                    continue  # a link or junction: its target is listed where it lives (no loops)
                if not self.include_hidden and item.attributes & (FILE_ATTRIBUTE_HIDDEN | FILE_ATTRIBUTE_SYSTEM):
                    continue
                path = f"{rel}/{item.name}" if rel else item.name
                if item.attributes & FILE_ATTRIBUTE_DIRECTORY:
                    if self.recursive:
                        folders.append(path)
                else:
                    files[path] = item
            prefix = f"{self.folder}/" if self.folder else ""
            for path, found in self._security_descriptors([f"{prefix}{p}" for p in files]):
                rel_path = path[len(prefix) :]
                item = files[rel_path]
                if isinstance(found, ObjectNameNotFound | ObjectPathNotFound):
                    continue  # deleted since the folder was listed
                readers: tuple[str, ...] | None
                if isinstance(found, Exception):
                    log.warning(
                        "The security descriptor of %s could not be read (%s): nobody but the admins reads it",
                        rel_path,
                        _reason(found),
                    )
                    readers = ()
                else:
                    try:
                        readers = readers_from_security_descriptor(
                            found, self.context.principal_for_sid, where=rel_path, logged=self._unknown_sids
                        )
                    except ValueError as exc:
                        log.warning(
                            "The security descriptor of %s is malformed (%s): nobody but the admins reads it", rel_path, exc
                        )
                        readers = ()
                yield Entry(
                    path=rel_path,
                    version=f"{item.size}-{item.last_write}-{item.change}",
                    size=item.size,
                    content_key=f"smb-file:{item.file_id:x}-{item.size}-{item.last_write}",
                    readers=readers,
                    url=self._url(rel_path),
                    attributes={"modified": _filetime(item.last_write).isoformat()},
                )

    def fetch(self, entry: Entry, out: Sink) -> None:
        """Write ``entry``'s bytes to ``out``: a file up to 64 KiB in one round trip (a compounded
        CREATE + READ + CLOSE), a bigger one read on in chunks of up to 1 MiB."""
        self._connect()
        path = "/".join(p for p in (self.folder, entry.path) if p)
        access, options = FILE_READ_DATA | FILE_READ_ATTRIBUTES | SYNCHRONIZE, 0x40  # NON_DIRECTORY_FILE
        answers = self._send([self._create(path, access, options), self._read_request(0, LIST_CHUNK), self._close_request()])
        created, first, _closed = (self._receive(r) for r in answers)
        if isinstance(created, Exception):
            self._gone(entry, created)
        data = self._read_data(entry, first)
        if data is None:
            return
        out.write(data)
        if len(data) < LIST_CHUNK:  # a short read of a file is its end ([MS-SMB2] 3.3.5.12)
            return
        try:
            file_id = self._open(path, access, options)
        except SMBResponseException as exc:
            self._gone(entry, exc)
        try:
            offset = len(data)
            while True:
                length = min(READ_CHUNK, self._conn.max_read_size, LIST_CHUNK * max(1, min(16, self._credits() - 2)))
                (answer,) = [self._receive(r) for r in self._send([self._read_request(offset, length, file_id)])]
                data = self._read_data(entry, answer)
                if not data:
                    break
                out.write(data)
                offset += len(data)
        finally:
            if self._conn is not None:
                self._close_file(file_id)

    @staticmethod
    def _read_request(offset: int, length: int, file_id: bytes = b"\xff" * 16) -> Any:
        read = SMB2ReadRequest()
        read["length"] = length
        read["offset"] = offset
        read["file_id"] = file_id
        read["padding"] = b"\x50"
        return read

    def _read_data(self, entry: Entry, answer: Any) -> bytes | None:
        """The bytes of a READ's answer; ``None`` at the end of the file. Raises :class:`EntryGone`
        (locked) or :class:`SourceError`."""
        if isinstance(answer, EndOfFile):
            return None
        if isinstance(answer, SharingViolation) or type(answer).__name__ == "FileLockConflict":
            raise EntryGone(f"{entry.path} is locked by someone who has it open; it is read on the next run.")
        if isinstance(answer, Exception):
            raise SourceError(f"{entry.path} could not be read ({_reason(answer)}).")
        response = SMB2ReadResponse()
        response.unpack(answer["data"].get_value())
        return bytes(response["buffer"].get_value())

    def _gone(self, entry: Entry, exc: Exception) -> NoReturn:
        """Raise :class:`EntryGone` in words for a failed open of ``entry``."""
        if isinstance(exc, ObjectNameNotFound | ObjectPathNotFound | DeletePending | FileIsADirectory):
            raise EntryGone(f"{entry.path} is no longer on the share {self.share!r}.") from None
        if isinstance(exc, SharingViolation):
            raise EntryGone(f"{entry.path} is locked by someone who has it open; it is read on the next run.") from None
        if isinstance(exc, AccessDenied):
            raise EntryGone(f"The account {self._account()} may not read {entry.path}; give it read access.") from None
        raise EntryGone(f"{entry.path} could not be opened ({_reason(exc)}).") from None

    def check(self) -> str:
        self._connect()
        try:
            items = self._list(self.folder)
        except (ObjectNameNotFound, ObjectPathNotFound):
            raise SourceNotFound(
                f"The share {self.share!r} on {self.host} has no folder {self.folder!r}; check the folder."
            ) from None
        except AccessDenied:
            raise SourceAuthFailed(f"The account {self._account()} may not list {self.location()}.") from None
        except SMBResponseException as exc:
            raise SourceError(f"The SMB server could not list {self.location()} ({_reason(exc)}).") from None
        folders = sum(1 for i in items if i.attributes & FILE_ATTRIBUTE_DIRECTORY)
        files = len(items) - folders
        return (
            f"reached; {files} file{'' if files == 1 else 's'} and {folders} folder{'' if folders == 1 else 's'}"
            " at the first level"
        )


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "***") if secret else text


def _disconnect(conn: Any) -> None:
    try:
        conn.disconnect(close=True)
    except Exception:
        log.debug("SMB connection closed with an error", exc_info=True)


__all__ = [
    "Ace",
    "SmbSource",
    "parse_dacl",
    "readers_from_aces",
    "readers_from_security_descriptor",
    "sid_bytes",
    "sid_text",
]
