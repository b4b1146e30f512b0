"""IMAP mailboxes: the messages of a mailbox's folders, each one an ``.eml`` file (RFC 5322 as the
server keeps it, attachments and all), read with imapclient (IMAP4rev1, RFC 3501; IMAP4rev2, RFC 9051).

A message in IMAP never changes once stored (RFC 3501 §2.3.1.1: a UID names one message for as long as
the folder's UIDVALIDITY stays), so a message is listed once and read once:

- ``path``: ``<folder>/<YYYY-MM-DD> <subject> (<uid>).eml`` -- the folder with ``/`` between its
  levels whatever the server's hierarchy delimiter, the day of the ``Date:`` header in the sender's own
  time zone (the arrival time, INTERNALDATE, when there is none), the subject cleaned (RFC 2047 words
  decoded, no control, bidirectional or invisible character, no ``/``) and cut to
  :data:`SUBJECT_CHARS` characters, and the UID, which makes it unique in its folder.
- ``version``: ``<UIDVALIDITY>:<UID>``.
- ``content_key``: a SHA-256 of the ``Message-ID`` and the size (RFC822.SIZE), or of the ``Date``,
  ``From`` and ``Subject`` headers and the size when there is no ``Message-ID``: a message moved to
  another folder, or renumbered when the folder's UIDVALIDITY was reset, is found as a rename without
  being read again. The size is in the key because two different messages can carry one
  ``Message-ID`` (the copy in Sent and the one a list sent back with its footer).
- ``size``: RFC822.SIZE; ``readers``: the ``owner`` setting (``user:<username>`` when blank), or
  ``None`` for ``everyone`` (the store's own readers); ``url``: the message's IMAP URL (RFC 5092 §3,
  ``imap://ana@mail.example.org/INBOX;UIDVALIDITY=385759045/;UID=20``), no password in it;
  ``attributes``: ``from``, ``subject``, ``date`` (ISO 8601).

Listing reads headers only (``BODY.PEEK[HEADER.FIELDS ...]``), :data:`SEARCH_WINDOW` UIDs per
``UID SEARCH`` and :data:`FETCH_CHUNK` messages per ``UID FETCH``: a folder of 100,000 messages is
listed with memory for one window. Folders are opened read-only (EXAMINE, RFC 3501 §6.3.2) and a
message is read with ``BODY.PEEK[]`` in pieces of :data:`READ_CHUNK` bytes (RFC 3501 §6.4.5), so
nothing sets ``\\Seen``.

The marker is each folder's UIDVALIDITY, UIDNEXT and message count (STATUS, RFC 3501 §6.3.10): any
message added (UIDNEXT grows), removed (the count drops) or renumbered (UIDVALIDITY) changes it, and an
untouched mailbox lists nothing. HIGHESTMODSEQ (CONDSTORE, RFC 7162) is left out on purpose: it
moves with every flag change, so each mail read, flagged or answered would list the mailbox again for
nothing (flags are not part of a message's bytes).
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import ipaddress
import json
import re
import socket
import ssl
import unicodedata
from collections.abc import Iterator, Mapping
from datetime import datetime
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from typing import Any
from urllib.parse import quote, unquote

from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError, IMAPClientError, LoginError

from knowledge._names import BIDI_CONTROLS, INVISIBLE
from knowledge.errors import InvalidArgument
from knowledge.people.policy import parse_readers
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
    field_value,
)

#: The TLS modes: TLS from the first byte (port 993, RFC 8314 §3.2), plain text upgraded by
#: STARTTLS (port 143, RFC 3501 §6.2.1), or none.
TLS_MODES = ("implicit", "starttls", "none")
#: UIDs one ``UID SEARCH`` covers: its answer (one line, at most ~8 bytes a UID) stays well under
#: imaplib's limit of 1,000,000 bytes a line.
SEARCH_WINDOW = 50_000
#: Messages one listing ``UID FETCH`` asks for (a command line of ~14 KB; Dovecot takes 64 KB).
FETCH_CHUNK = 2_000
#: Bytes of a message one ``UID FETCH BODY.PEEK[]<offset.length>`` reads.
READ_CHUNK = 4 * 1024 * 1024
#: The longest subject kept in a path, in characters.
SUBJECT_CHARS = 80
#: The headers listing reads.
_HEADER_ITEM = b"BODY.PEEK[HEADER.FIELDS (MESSAGE-ID DATE FROM SUBJECT)]"
#: A folded header line's break (RFC 5322 §2.2.3).
_FOLD = re.compile(r"\r?\n(?=[ \t])")
#: Characters that cannot stand in one level of a path.
_NOT_IN_NAME = re.compile(r"[/\\]")
#: What a server answers for a message expunged by another session (RFC 5530 §3 EXPUNGEISSUED; Dovecot's
#: words without it).
_EXPUNGED = ("EXPUNGEISSUED", "NO LONGER EXIST")


class ImapSource(Source):
    """The messages of an IMAP mailbox's folders, as ``.eml`` files.

    Config: ``host``, ``port`` (blank: 993 with ``tls = implicit``, 143 otherwise), ``tls``
    (:data:`TLS_MODES`; ``none`` only to this machine unless ``allow_plaintext``), ``verify_tls``,
    ``username``, ``password``, ``folders`` (IMAP names; ``*`` and ``%`` match as in LIST, RFC 3501
    §6.3.8; default ``INBOX``), ``owner`` (the readers of every message: ``user:<name>``,
    ``group:<name>``, several with commas, or ``everyone``; blank: ``user:<username>``).

    Raises:
        InvalidArgument: (constructor) an unknown TLS mode, plain text to another machine without
            ``allow_plaintext``, a port out of range, an owner that is not a reader.
    """

    kind = "imap"
    title = "IMAP mailbox"
    description = "The messages of an IMAP mailbox's folders, each one an .eml file with its attachments."
    carries_permissions = True
    fields = (
        Field("host", "Host", "The IMAP server's name or address (mail.example.org).", required=True),
        Field("port", "Port", "Blank: 993 with implicit TLS, 143 with STARTTLS or none.", kind="int"),
        Field(
            "tls",
            "TLS",
            "implicit: TLS from the first byte (port 993); starttls: plain text upgraded to TLS (port 143);"
            " none: no encryption, only to this machine unless plain text is allowed.",
            default="implicit",
        ),
        Field(
            "verify_tls",
            "Verify the certificate",
            "Refuse a server whose certificate this machine does not trust.",
            default=True,
            kind="bool",
        ),
        Field(
            "allow_plaintext",
            "Allow plain text",
            "Allow TLS 'none' to another machine: the password and every message then cross the network readable.",
            default=False,
            kind="bool",
        ),
        Field("username", "User name", "The mailbox's account on the server.", required=True),
        Field("password", "Password", "The account's password.", secret=True, required=True),
        Field(
            "folders",
            "Folders",
            "The folders to read, as the server names them (INBOX, Archive.2023 or Archive/2023); * and % match"
            " as in IMAP LIST.",
            default=["INBOX"],
            kind="list",
        ),
        Field(
            "owner",
            "Readers",
            "Who may read the messages: user:<name> or group:<name> (a shared mailbox: group:support), several"
            " with commas, or everyone (whoever may read the store). Blank: user:<user name>.",
        ),
    )

    def __init__(self, config: Mapping[str, Any], context: SourceContext) -> None:
        super().__init__(config, context)
        self.host = str(self.required("host")).strip()
        self.username = str(self.required("username"))
        self._password = str(self.required("password"))
        self.tls = str(self.setting("tls", "implicit")).strip().lower()
        if self.tls not in TLS_MODES:
            raise InvalidArgument(f"The TLS mode is one of {', '.join(TLS_MODES)}, not {self.tls!r}.", param="tls")
        port = self.setting("port")
        self.port = int(port) if port is not None else (993 if self.tls == "implicit" else 143)
        if not 0 < self.port < 65536:
            raise InvalidArgument(f"A port is a number from 1 to 65535, not {self.port}.", param="port")
        self.verify_tls = _flag(self.setting("verify_tls", True))
        if self.tls == "none" and not _loopback(self.host) and not _flag(self.setting("allow_plaintext", False)):
            raise InvalidArgument(
                f"TLS 'none' sends the password and the mail to {self.host} readable by anyone on the way: choose"
                " 'implicit' or 'starttls', or allow plain text explicitly (allow_plaintext).",
                param="tls",
            )
        folders_field = next(f for f in self.fields if f.name == "folders")
        self.folders: list[str] = field_value(folders_field, self.config.get("folders")) or ["INBOX"]
        owner = self.setting("owner")
        self.readers = parse_readers(owner if owner is not None else f"user:{self.username}")
        self._client: IMAPClient | None = None
        self._selected: tuple[str, int] | None = None  # (folder, UIDVALIDITY) open read-only
        self._select_info: Mapping[bytes, Any] = {}  # what its EXAMINE said

    # -- the Source interface ----------------------------------------------------------------------
    def location(self) -> str:
        """``imap://<user>@<host>:<port> (<folders>)``: no password."""
        return f"{self._base_url()} ({', '.join(self.folders)})"

    def entries(self) -> Iterator[Entry]:
        """Every message of the folders, one :class:`Entry` each, in folder order then UID order.

        Raises:
            SourceUnavailable: the server did not answer, refused the connection or closed it.
            SourceAuthFailed: the server refused the user name or password.
            SourceNotFound: a folder named without wildcards does not exist.
            SourceError: TLS failed (a certificate not trusted), or the server refused a command.
        """
        client = self._connect()
        for folder, delimiter in self._resolve_folders(client):
            yield from self._folder_entries(folder, delimiter)

    def fetch(self, entry: Entry, out: Sink) -> None:
        """Write the message ``entry`` names to ``out``, exactly as the server keeps it (``BODY.PEEK[]``:
        ``\\Seen`` is not set).

        Raises:
            EntryGone: the message was expunged, or its folder deleted or renumbered (UIDVALIDITY),
                since it was listed.
            SourceUnavailable, SourceAuthFailed, SourceError: as :meth:`entries`.
        """
        folder, uidvalidity, uid = _locate(entry)
        try:
            with self._talking("opening the folder " + repr(folder)):
                current = self._select(folder, noop=True)
        except SourceNotFound:
            raise EntryGone(f"The folder {folder!r} is gone since {entry.path!r} was listed.") from None
        if current != uidvalidity:
            raise EntryGone(
                f"The folder {folder!r} was renumbered (its UIDVALIDITY changed) since {entry.path!r} was listed;"
                " the next run lists it again."
            )
        client = self._connect()
        offset = 0
        while entry.size is None or offset < entry.size:
            item = f"BODY.PEEK[]<{offset}.{READ_CHUNK}>".encode()
            try:
                with self._talking(f"reading {entry.path!r}"):
                    answer = client.fetch([uid], [item]).get(uid, {})
            except _Expunged:
                answer = {}
            piece = next((v for k, v in answer.items() if k.startswith(b"BODY[]")), None)
            if piece is None:
                if offset:  # expunged while it was read: what was written is not the message
                    raise EntryGone(f"The message {entry.path!r} was expunged while it was read.")
                raise EntryGone(f"The message {entry.path!r} was expunged since it was listed.")
            out.write(piece)
            offset += len(piece)
            if len(piece) < READ_CHUNK:
                return

    def marker(self) -> str:
        """Each folder's UIDVALIDITY, UIDNEXT and message count (STATUS), with the folders and the
        readers asked for: JSON, or its SHA-256 when long. Raises like :meth:`entries`."""
        client = self._connect()
        self._unselect()
        state: list[Any] = [self.folders, self.readers]
        for folder, _ in self._resolve_folders(client):
            with self._talking(f"asking for the state of the folder {folder!r}"):
                status = client.folder_status(folder, [b"UIDVALIDITY", b"UIDNEXT", b"MESSAGES"])
            state.append([folder, status.get(b"UIDVALIDITY"), status.get(b"UIDNEXT"), status.get(b"MESSAGES")])
        text = json.dumps(state, ensure_ascii=False, separators=(",", ":"))
        return text if len(text) <= 2000 else "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    def check(self) -> str:
        """Sign in and count the folders' messages (STATUS): ``"reached; INBOX: 12 messages, ..."``.
        Raises like :meth:`entries`."""
        client = self._connect()
        self._unselect()
        counts = []
        for folder, _ in self._resolve_folders(client):
            with self._talking(f"asking for the state of the folder {folder!r}"):
                status = client.folder_status(folder, [b"MESSAGES"])
            n = int(status.get(b"MESSAGES", 0))
            counts.append(f"{folder}: {n} message{'' if n == 1 else 's'}")
        return "reached; " + (", ".join(counts) if counts else "no folder matches")

    def close(self) -> None:
        """Sign out (LOGOUT) and close the connection; errors are ignored."""
        client, self._client, self._selected = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.logout()
            with contextlib.suppress(Exception):
                client.shutdown()

    def __repr__(self) -> str:
        return f"ImapSource({self._base_url()!r}, folders={self.folders!r})"

    # -- listing -----------------------------------------------------------------------------------
    def _folder_entries(self, folder: str, delimiter: str | None) -> Iterator[Entry]:
        client = self._connect()
        with self._talking(f"opening the folder {folder!r}"):
            uidvalidity = self._select(folder, fresh=True)
            uidnext = self._uidnext(client)
        prefix = "/".join(_name_part(level) for level in (folder.split(delimiter) if delimiter else [folder]))
        low = 1
        while low < uidnext:
            high = min(low + SEARCH_WINDOW - 1, uidnext - 1)
            with self._talking(f"listing the folder {folder!r}"):
                self._reselect(folder, uidvalidity)
                uids = sorted(client.search(["UID", f"{low}:{high}"]))
            low = high + 1
            for start in range(0, len(uids), FETCH_CHUNK):
                chunk = uids[start : start + FETCH_CHUNK]
                with self._talking(f"listing the folder {folder!r}"):
                    self._reselect(folder, uidvalidity)
                    try:
                        answers = client.fetch(chunk, [b"RFC822.SIZE", b"INTERNALDATE", _HEADER_ITEM])
                    except IMAPClientError as exc:
                        if isinstance(exc, IMAPClientAbortError) or not self._expunged(exc):
                            raise
                        client.noop()  # one was expunged by another session: learn which, ask again
                        answers = client.fetch(chunk, [b"RFC822.SIZE", b"INTERNALDATE", _HEADER_ITEM])
                for uid in chunk:
                    answer = answers.get(uid)
                    if answer is not None and b"RFC822.SIZE" in answer:
                        yield self._entry(folder, prefix, uidvalidity, uid, answer)
                del answers

    def _entry(self, folder: str, prefix: str, uidvalidity: int, uid: int, answer: Mapping[bytes, Any]) -> Entry:
        size = int(answer[b"RFC822.SIZE"])
        raw = next((v for k, v in answer.items() if k.startswith(b"BODY[HEADER")), b"") or b""
        headers = _headers(raw)
        message_id, date_text = headers.get("message-id", ""), headers.get("date", "")
        raw_subject, raw_sender = headers.get("subject", ""), headers.get("from", "")
        subject, sender = _decoded(raw_subject), _decoded(raw_sender)
        sent = _parse_date(date_text)
        arrived = answer.get(b"INTERNALDATE")
        when = sent or (arrived if isinstance(arrived, datetime) else None)
        day = when.strftime("%Y-%m-%d") if when else "undated"
        if message_id:
            key_text = f"message-id\0{message_id}\0{size}"
        else:
            key_text = f"headers\0{date_text}\0{raw_sender}\0{raw_subject}\0{size}"
        attributes = {"from": _one_line(sender), "subject": _one_line(subject)}
        if when is not None:
            attributes["date"] = when.isoformat()
        return Entry(
            path=f"{prefix}/{day} {_subject_part(subject)} ({uid}).eml",
            version=f"{uidvalidity}:{uid}",
            size=size,
            content_key=hashlib.sha256(key_text.encode("utf-8", "surrogatepass")).hexdigest(),
            readers=self.readers,
            url=f"{self._base_url()}/{quote(folder, safe='/')};UIDVALIDITY={uidvalidity}/;UID={uid}",
            attributes={k: v for k, v in attributes.items() if v},
        )

    def _resolve_folders(self, client: IMAPClient) -> list[tuple[str, str | None]]:
        """The folders asked for, as (name, hierarchy delimiter), wildcards expanded, each once."""
        found: dict[str, str | None] = {}
        for pattern in self.folders:
            with self._talking(f"looking for the folder {pattern!r}"):
                listed = client.list_folders("", pattern)
            names = [
                (str(name), _text(delim) or None)
                for flags, delim, name in listed
                if not {b"\\NOSELECT", b"\\NONEXISTENT"} & {f.upper() for f in flags}
            ]
            if not names and not any(c in pattern for c in "*%"):
                with self._talking("listing the folders"):
                    there = sorted(str(name) for _, _, name in client.list_folders("", "*"))
                shown = ", ".join(there[:20]) + (", ..." if len(there) > 20 else "")
                raise SourceNotFound(
                    f"The mailbox of {self.username} at {self.host} has no folder {pattern!r}"
                    f" (it has: {shown or 'none'}). Correct the folders setting."
                )
            for name, delim in names:
                found.setdefault(name, delim)
        return list(found.items())

    def _uidnext(self, client: IMAPClient) -> int:
        """The folder's UIDNEXT as SELECT said it, else from STATUS (an RFC 3501 server may leave it out)."""
        info = self._select_info
        if b"UIDNEXT" in info:
            return int(info[b"UIDNEXT"])
        uids = client.search(["UID", "*"])  # the highest UID (RFC 3501 §6.4.8, "*" is the last)
        return max(uids, default=0) + 1

    # -- the connection ----------------------------------------------------------------------------
    def _connect(self) -> IMAPClient:
        if self._client is not None:
            return self._client
        with self._talking("connecting"):
            context = ssl.create_default_context()
            if not self.verify_tls:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            client = IMAPClient(
                self.host, self.port, ssl=self.tls == "implicit", ssl_context=context, timeout=self.context.timeout
            )
            # imaplib's protocol trace (imapclient turns it on, to its logger) would carry the LOGIN
            # line: imapclient redacts it, but nothing of a sign-in should reach a log at all.
            client._imap.debug = 0
            client.normalise_times = False  # INTERNALDATE with its time zone
            try:
                if self.tls == "starttls":
                    if not client.has_capability("STARTTLS"):
                        raise SourceError(
                            f"The IMAP server at {self.host}:{self.port} does not offer STARTTLS: choose TLS"
                            " 'implicit' (port 993), or 'none' where the network is trusted."
                        )
                    client.starttls(context)
                self._login(client)
            except BaseException:
                with contextlib.suppress(Exception):
                    client.shutdown()
                raise
        self._client = client
        return client

    def _login(self, client: IMAPClient) -> None:
        try:
            if self._password.isascii() or not client.has_capability("AUTH=PLAIN"):
                client.login(self.username, self._password)
            else:  # LOGIN is ASCII only; SASL PLAIN (RFC 4616) carries UTF-8
                client.plain_login(self.username, self._password)
        except LoginError as exc:
            words = self._words(exc)
            if "PRIVACYREQUIRED" in words.upper() or client.has_capability("LOGINDISABLED"):
                raise SourceAuthFailed(
                    f"The IMAP server at {self.host} takes a password only over TLS: choose TLS 'starttls' or 'implicit'."
                ) from None
            raise SourceAuthFailed(
                f"The IMAP server at {self.host} refused the sign-in of {self.username!r} ({words}): check the user"
                " name and password."
            ) from None
        except UnicodeEncodeError:
            raise SourceAuthFailed(
                f"The IMAP server at {self.host} takes only ASCII user names and passwords (no AUTH=PLAIN):"
                " the password or user name has other characters."
            ) from None

    def _select(self, folder: str, *, noop: bool = False, fresh: bool = False) -> int:
        """Open ``folder`` read-only (EXAMINE) unless it is open; return its UIDVALIDITY. ``noop``: when
        open already, ask for the news (expunges by other sessions) first; ``fresh``: open it again
        (its UIDNEXT as it is now)."""
        client = self._connect()
        if not fresh and self._selected is not None and self._selected[0] == folder:
            if noop:
                client.noop()
            return self._selected[1]
        self._selected = None
        try:
            info = client.select_folder(folder, readonly=True)
        except IMAPClientError as exc:
            if isinstance(exc, IMAPClientAbortError):
                raise
            raise SourceNotFound(
                f"The folder {folder!r} of {self.username} at {self.host} cannot be opened ({self._words(exc)})."
            ) from None
        self._select_info = info
        self._selected = (folder, int(info[b"UIDVALIDITY"]))
        return self._selected[1]

    def _reselect(self, folder: str, uidvalidity: int) -> None:
        """Open ``folder`` again when a fetch opened another one meanwhile; it must not have been renumbered."""
        if self._selected is not None and self._selected[0] == folder:
            return
        if self._select(folder) != uidvalidity:
            raise SourceUnavailable(
                f"The folder {folder!r} was renumbered (its UIDVALIDITY changed) while it was listed; the next run"
                " lists it again."
            )

    def _unselect(self) -> None:
        """Close the open folder (STATUS is not for the selected one, RFC 3501 §6.3.10); it was opened
        read-only, so nothing is expunged (RFC 3501 §6.4.2)."""
        if self._selected is not None and self._client is not None:
            with self._talking("closing a folder"):
                self._client.close_folder()
            self._selected = None

    @contextlib.contextmanager
    def _talking(self, doing: str) -> Iterator[None]:
        """Library and network errors while ``doing`` as this package's errors, in words, without the password."""
        try:
            yield
        except (SourceError, InvalidArgument):
            raise
        except IMAPClientAbortError as exc:
            self._drop()
            raise SourceUnavailable(
                f"The IMAP server at {self.host}:{self.port} closed the connection while {doing}"
                f" ({self._words(exc)}); the next run tries again."
            ) from None
        except IMAPClientError as exc:
            words = self._words(exc)
            if self._expunged(exc):
                raise _Expunged(words) from None
            if "UNAVAILABLE" in words.upper() or "SERVERBUG" in words.upper():
                raise SourceUnavailable(
                    f"The IMAP server at {self.host} could not answer while {doing} ({words}); the next run tries again."
                ) from None
            raise SourceError(f"The IMAP server at {self.host} refused a command while {doing}: {words}.") from None
        except ssl.SSLCertVerificationError as exc:
            self._drop()
            raise SourceError(
                f"The IMAP server at {self.host}:{self.port} showed a certificate this machine does not trust"
                f" ({exc.verify_message}): install its CA, or turn off 'verify the certificate' if you trust"
                " the network."
            ) from None
        except ssl.SSLError as exc:
            self._drop()
            raise SourceError(
                f"TLS with the IMAP server at {self.host}:{self.port} failed while {doing} ({exc.reason or exc}):"
                " check the TLS mode (implicit on port 993, starttls on port 143)."
            ) from None
        except TimeoutError:
            self._drop()
            raise SourceUnavailable(
                f"The IMAP server at {self.host}:{self.port} did not answer within {self.context.timeout:g} s while"
                f" {doing}; the next run tries again."
            ) from None
        except ConnectionRefusedError:
            self._drop()
            raise SourceUnavailable(
                f"The IMAP server at {self.host}:{self.port} refused the connection: it is down, or the host or"
                " port is wrong."
            ) from None
        except socket.gaierror as exc:
            self._drop()
            raise SourceUnavailable(f"The host {self.host!r} could not be found ({exc.strerror}).") from None
        except OSError as exc:  # reset, unreachable, broken pipe
            self._drop()
            raise SourceUnavailable(
                f"The connection to the IMAP server at {self.host}:{self.port} failed while {doing}"
                f" ({self._hide(exc.strerror or type(exc).__name__)}); the next run tries again."
            ) from None

    def _drop(self) -> None:
        """Forget a broken connection (the next call connects again)."""
        client, self._client, self._selected = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.shutdown()

    def _expunged(self, exc: BaseException) -> bool:
        """The server's answer says a message asked for was expunged by another session."""
        words = self._words(exc).upper()
        return any(code in words for code in _EXPUNGED)

    def _words(self, exc: BaseException) -> str:
        """The server's own words of ``exc`` (imapclient gives ``b'...'`` reprs), the password hidden."""
        text = str(exc)
        for _ in range(2):
            match = re.fullmatch(r"""(?:\w+ command error: BAD |)\[?b(['"])(.*)\1\]?""", text.strip(), re.S)
            if match is None:
                break
            text = match.group(2)
        return self._hide(text.strip() or type(exc).__name__)

    def _hide(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == 143 else f":{self.port}"
        return f"imap://{quote(self.username, safe='')}@{host}{port}"


class _Expunged(SourceError):
    """The server said a message asked for was expunged by another session (internal)."""


# -- helpers ---------------------------------------------------------------------------------------


def _locate(entry: Entry) -> tuple[str, int, int]:
    """(folder, UIDVALIDITY, UID) from an entry's IMAP URL (RFC 5092 §3)."""
    match = re.search(r"^imap://[^/]*/(.*);UIDVALIDITY=(\d+)/;UID=(\d+)$", entry.url or "")
    if match is None:
        raise EntryGone(f"{entry.path!r} has no IMAP URL to find it by; the next run lists it again.")
    return unquote(match.group(1)), int(match.group(2)), int(match.group(3))


def _headers(raw: bytes) -> dict[str, str]:
    """The fields of a header block, unfolded (RFC 5322 §2.2.3), by lower-case name, the first of each;
    8-bit bytes read as UTF-8 (RFC 6532). The email package's header objects (``policy.default``) took
    ~0.4 ms a field: minutes for a mailbox of 100,000 messages."""
    fields: dict[str, str] = {}
    for line in _FOLD.sub("", raw.decode("utf-8", "replace")).splitlines():
        name, colon, value = line.partition(":")
        name = name.strip().lower()
        if colon and name and name not in fields:
            fields[name] = value.strip()
    return fields


def _decoded(value: str) -> str:
    """``value`` with its RFC 2047 encoded words decoded (as written when one does not decode)."""
    if "=?" not in value:
        return value
    try:
        return str(make_header(decode_header(value)))
    except (HeaderParseError, LookupError, UnicodeError, ValueError, AssertionError):
        return value


def _parse_date(text: str) -> datetime | None:
    if not text.strip():
        return None
    try:
        return email.utils.parsedate_to_datetime(text)  # naive when the zone is -0000 or missing
    except (TypeError, ValueError, IndexError):
        return None


def _one_line(text: str) -> str:
    return " ".join(_clean(text).split())


def _clean(text: str) -> str:
    """``text`` without control, bidirectional, invisible, unpaired-surrogate or separator characters."""
    if text.isprintable():  # none of those (all are Cc, Cf, Cs, Zl or Zp): the common case, fast
        return text
    return "".join(
        " " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else "\ufffd" if unicodedata.category(c) == "Cs" else c
        for c in text
        if c not in BIDI_CONTROLS and c not in INVISIBLE
    )


def _subject_part(subject: str) -> str:
    """The subject as a path keeps it: one line, no slash, at most :data:`SUBJECT_CHARS` characters."""
    text = _one_line(_NOT_IN_NAME.sub("-", subject))
    if len(text) > SUBJECT_CHARS:
        text = text[: SUBJECT_CHARS - 1].rstrip() + "…"
    return text or "no subject"


def _name_part(level: str) -> str:
    """One level of a folder's name as a path keeps it."""
    text = _one_line(_NOT_IN_NAME.sub("-", level))
    return text if text not in ("", ".", "..") else "_"


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else "" if value is None else str(value)


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in ("1", "true", "yes", "on")


def _loopback(host: str) -> bool:
    """``host`` is this machine: ``localhost`` or a loopback address (no name is looked up)."""
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["FETCH_CHUNK", "READ_CHUNK", "SEARCH_WINDOW", "SUBJECT_CHARS", "TLS_MODES", "ImapSource"]
