"""E-mail: ``.eml`` (RFC 5322 / MIME), ``.mbox`` and Outlook ``.msg``.

The standard library parses MIME (``email`` with ``policy.default``: RFC 2047 encoded words and
RFC 2231 file names decoded; ``mailbox`` splits an mbox); extract-msg reads Outlook's CFB messages.
Each mail is one part of the text: its subject is the heading, a short header block (Subject,
From, To, Cc, Date) opens it, then the body. ``multipart/alternative`` keeps the HTML alternative
(read by the HTML reader) and drops the plain one, as Tika does; a ``multipart/related`` body keeps
its root and skips the inline resources (pictures the HTML shows). Every attachment is read by its
own format through ``read_part`` under ``subject > file name`` (a PDF in a mail is searchable with
its pages); a nested ``message/rfc822`` is read as a mail of its own under the outer subject,
also when it was sent base64 or quoted-printable encoded (RFC 2046 §5.2.1 forbids it; clients decode
it all the same). A ``Content-Transfer-Encoding`` is read as the clients read it: case and
surrounding spaces do not matter (``"Base64  "``). A TNEF ``winmail.dat`` attachment is unpacked
by its own reader (:mod:`knowledge.ingest._tnef`).
Declared charsets are honoured (with the common supersets: Big5 as cp950, GB2312 as GB18030, ...);
a wrong or unknown charset falls back to :func:`~knowledge.ingest._text.decode`'s sniffing. An
attachment that cannot be read is named in the warnings with its reason; the mail still indexes.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import email
import email.utils
import os
import quopri
import re
import tempfile
from email import policy
from email.message import EmailMessage, Message

from knowledge.errors import EmptyDocument, KnowledgeError, UnsupportedFile, in_words
from knowledge.ingest._compose import MAX_DEPTH, ReadPart, add_document, add_part, join_path
from knowledge.ingest._detect import TNEF_SIGNATURE
from knowledge.ingest._html import read_html
from knowledge.ingest._text import Builder, clean_line, decode, one_line
from knowledge.ingest.document import Document

#: Declared charsets read with the superset mail clients actually write (a "GB2312" mail often has
#: GBK characters, "Big5" ones Windows cp950 extensions, "us-ascii"/"iso-8859-1" Windows-1252 ones).
CHARSET_SUPERSETS = {
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "euc-cn": "gb18030",
    "big5": "cp950",
    "x-big5": "cp950",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "x-sjis": "cp932",
    "iso-2022-jp": "iso2022_jp_ext",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "ks_c_5601": "cp949",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "latin-1": "cp1252",
}

_HEADERS = ("From", "To", "Cc", "Date")
_EMPTY = "no text: the mail has no subject, body or readable attachment"


# -- entry points ---------------------------------------------------------------------------------


def read_eml(data: bytes, read_part: ReadPart) -> Document:
    """Read one RFC 5322 mail (a leading mbox ``From `` envelope line is tolerated).

    The document's ``attributes`` are ``from``, ``to``, ``cc``, ``date`` (ISO 8601 where it parses)
    and ``subject``, those the mail has; ``title`` is the subject.

    Raises:
        EmptyDocument: no subject, header, body or attachment with text.
    """
    if data.startswith(b"From "):
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    message = _parse(data)
    builder = Builder()
    _Mail(builder, read_part).message(message, None, depth=0)
    return builder.build("eml", empty=_EMPTY, title=_header(message, "Subject") or None, attributes=_attributes(message))


def read_mbox(data: bytes, read_part: ReadPart) -> Document:
    """Read an mbox (mboxo/mboxrd): each message its own part, headed by its subject.

    A mailbox of one message gets that message's ``attributes`` as :func:`read_eml` does.

    Raises:
        EmptyDocument: no message with text.
    """
    import mailbox  # noqa: PLC0415 - mbox files only

    fd, path = tempfile.mkstemp(suffix=".mbox")  # mailbox reads files only
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        box = mailbox.mbox(path, factory=None, create=False)
        try:
            messages = [_parse(box.get_bytes(key)) for key in box.iterkeys()]
        finally:
            box.close()
    except (OSError, mailbox.Error) as exc:
        raise UnsupportedFile(f"unreadable mbox: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    builder = Builder()
    mail = _Mail(builder, read_part)
    for number, message in enumerate(messages, start=1):
        mail.message(message, None, depth=0, untitled=f"message {number}")
    single = messages[0] if len(messages) == 1 else None
    return builder.build(
        "mbox",
        empty="no text: the mailbox has no message with text",
        title=_header(single, "Subject") or None if single else None,
        attributes=_attributes(single) if single else None,
    )


def read_msg(data: bytes, read_part: ReadPart) -> Document:
    """Read an Outlook ``.msg`` (extract-msg): subject, sender, recipients, date, the body (HTML,
    else plain text, else the RTF body through ``read_part``) and every attachment (embedded
    ``.msg`` ones as mails of their own).

    Raises:
        UnsupportedFile: not an Outlook message, or damaged, with the reason.
        EmptyDocument: no subject, body or attachment with text.
    """
    try:
        import extract_msg  # noqa: PLC0415 - heavy, .msg files only

        msg = extract_msg.openMsg(data, delayAttachments=False)
    except KnowledgeError:
        raise
    except Exception as exc:  # extract_msg raises InvalidFileFormatError, OSError, KeyError, ...
        raise UnsupportedFile(f"unreadable Outlook message: {in_words(exc)}") from exc
    builder = Builder()
    try:
        _Outlook(builder, read_part).message(msg, None, depth=0)
        attributes = {k: v for k, v in _msg_headers(msg).items() if v}
        subject = _safe(lambda: getattr(msg, "subject", None)) or None
    finally:
        _safe(msg.close)
    return builder.build("msg", empty=_EMPTY, title=subject, attributes=attributes)


# -- RFC 5322 / MIME ------------------------------------------------------------------------------


def _parse(data: bytes) -> EmailMessage:
    message = email.message_from_bytes(data, policy=policy.default)
    assert isinstance(message, EmailMessage)  # policy.default's message factory
    _normalise_transfer_encodings(message)
    return message


def _transfer_encoding(part: Message) -> str:
    """The part's ``Content-Transfer-Encoding`` as mail clients read it: lower case, without spaces
    or quotes around it; ``""`` when missing."""
    try:
        value = part.get("Content-Transfer-Encoding")
    except Exception:  # a header policy.default cannot parse
        value = None
    return str(value or "").strip().strip('"').strip().lower()


def _normalise_transfer_encodings(message: Message) -> None:
    """Rewrite every ``Content-Transfer-Encoding`` of ``message`` in the form the email package
    decodes (it takes ``"base64  "`` or ``"base64;"`` for an unknown encoding and leaves the body
    encoded)."""
    for part in message.walk():
        if "Content-Transfer-Encoding" not in part:
            continue
        value = _transfer_encoding(part).rstrip(";").strip()
        with contextlib.suppress(Exception):
            if str(part.get("Content-Transfer-Encoding")) != value:
                part.replace_header("Content-Transfer-Encoding", value)


_REPARSE = policy.default.clone(refold_source="none", max_line_length=None)


def _inner_messages(part: Message) -> list[Message]:
    """The mails in a ``message/rfc822`` part. The email package parses the part's body as a mail
    without decoding it first; one sent base64 or quoted-printable encoded is decoded and parsed
    again here."""
    payload = part.get_payload()
    children = [c for c in payload if isinstance(c, Message)] if isinstance(payload, list) else []
    cte = _transfer_encoding(part)
    if cte not in ("base64", "quoted-printable"):
        return children
    try:
        if children:
            raw = b"".join(c.as_bytes(policy=_REPARSE) for c in children)
        else:
            raw = payload.encode("ascii", "replace") if isinstance(payload, str) else b""
        if cte == "base64":
            decoded = base64.b64decode(re.sub(rb"[^A-Za-z0-9+/]", b"", raw) + b"==", validate=False)
        else:
            decoded = quopri.decodestring(raw)
    except (binascii.Error, ValueError, TypeError, LookupError, UnicodeError):
        return children
    if not decoded.strip():
        return children
    return [_parse(decoded)]


def _header(message: Message | None, name: str) -> str:
    """The header's decoded value on one line; ``""`` when missing; never raises."""
    if message is None:
        return ""
    try:
        value = message.get(name)
    except Exception:  # a malformed header policy.default cannot parse
        value = None
    if value is None:
        try:
            raw = message.get_all(name) if hasattr(message, "get_all") else None
        except Exception:
            raw = None
        value = raw[0] if raw else ""
    return clean_line(str(value))


def _attributes(message: Message) -> dict:
    out = {}
    for name in ("Subject", *_HEADERS):
        value = _header(message, name)
        if value:
            out[name.lower()] = _iso_date(value) if name == "Date" else value
    return out


def _iso_date(value: str) -> str:
    try:
        return email.utils.parsedate_to_datetime(value).isoformat()
    except (TypeError, ValueError, IndexError):
        return value


def _header_block(subject: str, headers: list[tuple[str, str]]) -> str:
    lines = [f"Subject: {subject}"] if subject else []
    lines += [f"{name}: {value}" for name, value in headers if value]
    return "\n".join(lines)


def decode_payload(data: bytes, charset: str | None) -> str:
    """Text of a MIME part's bytes in its declared ``charset`` (or its superset, see
    :data:`CHARSET_SUPERSETS`); bytes that are not valid in it, or an unknown charset, are decoded
    by sniffing (:func:`~knowledge.ingest._text.decode`). Never raises."""
    declared = (charset or "").strip().strip('"').lower()
    if declared:
        wanted = CHARSET_SUPERSETS.get(declared, declared)
        if wanted == "cp1252" and _utf8_not_ascii(data):  # a "Latin-1" mail written in UTF-8
            return data.decode("utf-8")
        try:
            codecs.lookup(wanted)
            return data.decode(wanted)
        except (LookupError, UnicodeDecodeError):
            pass
    return decode(data)


def _utf8_not_ascii(data: bytes) -> bool:
    if data.isascii():
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_CID = re.compile(r"""(?:src|background)\s*=\s*["']?(?:cid:)?([^"'\s>]+)""", re.I)


class _Mail:
    """Walks one MIME message into the builder."""

    def __init__(self, builder: Builder, read_part: ReadPart) -> None:
        self.builder = builder
        self.read_part = read_part
        self.unnamed = 0

    def message(self, message: Message, outer: str | None, *, depth: int, untitled: str | None = None) -> None:
        """Append ``message`` under ``outer > subject``; ``untitled`` is the heading of a message
        without a subject (an mbox's ``message 2``)."""
        subject = _header(message, "Subject")
        heading = join_path(outer, subject or untitled or ("(no subject)" if outer or _header(message, "From") else None))
        block = _header_block(subject, [(h, _header(message, h)) for h in _HEADERS])
        self.builder.add(block, heading=heading)
        self.part(message, heading, depth=depth, related=False)

    def part(self, part: Message, heading: str | None, *, depth: int, related: bool) -> None:
        ctype = part.get_content_type()
        if part.is_multipart():
            payload = list(part.iter_parts()) if isinstance(part, EmailMessage) else part.get_payload()
            if not isinstance(payload, list):
                return
            children = [c for c in payload if isinstance(c, Message)]
            if ctype == "message/rfc822":
                self._nested(_inner_messages(part), heading, depth=depth)
            elif ctype == "multipart/alternative":
                self._alternative(children, heading, depth=depth)
            elif ctype == "multipart/related":
                self._related(part, children, heading, depth=depth)
            else:  # mixed, digest, parallel, signed, report, and unknown multiparts (RFC 2046 §5.1.3)
                for child in children:
                    self.part(child, heading, depth=depth, related=False)
            return
        if related and ctype.startswith("image/") and part.get_content_disposition() != "attachment":
            return  # a picture the HTML shows inline
        if part.get_content_disposition() == "attachment" or _filename(part):
            self.attachment(part, heading, depth=depth)
        elif ctype == "text/html":
            self._html(self._text(part), heading)
        elif ctype.startswith("text/") and ctype not in ("text/calendar", "text/vcard", "text/x-vcard"):
            self.builder.add(self._text(part), heading=heading)
        else:
            self.attachment(part, heading, depth=depth)

    def _nested(self, children: list, heading: str | None, *, depth: int) -> None:
        for child in children:
            if depth + 1 > MAX_DEPTH:
                self.builder.warnings.append(f"{heading or 'mail'}: a mail nested more than {MAX_DEPTH} deep; not read")
                return
            self.message(child, heading, depth=depth + 1)

    def _alternative(self, children: list, heading: str | None, *, depth: int) -> None:
        """RFC 2046 §5.1.4: the alternatives are in increasing faithfulness; the HTML one is kept
        (directly or as the root of a ``multipart/related``), else the last one."""

        def has_html(p: Message) -> bool:
            return any(q.get_content_type() == "text/html" for q in p.walk())

        chosen = next((c for c in reversed(children) if has_html(c)), None)
        if chosen is None:
            plain = [c for c in children if c.get_content_type() == "text/plain"]
            chosen = plain[-1] if plain else (children[-1] if children else None)
        if chosen is not None:
            self.part(chosen, heading, depth=depth, related=False)

    def _related(self, part: Message, children: list, heading: str | None, *, depth: int) -> None:
        """RFC 2387: the root (``start``, else the first part) is the body; the rest are resources it
        shows, skipped unless they are marked as attachments."""
        if not children:
            return
        start = part.get_param("start")
        root = children[0]
        if isinstance(start, str):
            for child in children:
                if child.get("Content-ID", "").strip() == start.strip():
                    root = child
        self.part(root, heading, depth=depth, related=False)
        for child in children:
            if child is not root and child.get_content_disposition() == "attachment":
                self.attachment(child, heading, depth=depth)

    def _text(self, part: Message) -> str:
        try:
            payload = part.get_payload(decode=True)
        except Exception:  # a damaged base64/quoted-printable body
            payload = None
        if not isinstance(payload, bytes):
            raw = part.get_payload()
            payload = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else b""
        return decode_payload(payload, part.get_content_charset())

    def _html(self, text: str, heading: str | None) -> None:
        try:
            doc = read_html(text)
        except EmptyDocument:
            return
        add_document(self.builder, doc, heading)

    def attachment(self, part: Message, heading: str | None, *, depth: int) -> None:
        if part.get_content_type() == "message/rfc822":
            self._nested(_inner_messages(part), heading, depth=depth)
            return
        name = _filename(part)
        if not name:
            self.unnamed += 1
            name = f"attachment {self.unnamed}"
        try:
            data = part.get_payload(decode=True)
        except Exception as exc:
            self.builder.warnings.append(f"{join_path(heading, name)}: not read: damaged encoding ({exc})")
            return
        if not isinstance(data, bytes) or not data.strip():
            self.builder.warnings.append(f"{join_path(heading, name)}: not read: the attachment is empty")
            return
        _add_attachment(self.builder, self.read_part, data, name, heading)


def _add_attachment(builder: Builder, read_part: ReadPart, data: bytes, name: str, heading: str | None) -> None:
    """Append the attachment ``data`` under ``heading > name``; a TNEF ``winmail.dat`` is unpacked in
    place instead, its body and attachments under the mail's own heading (as Tika does)."""
    label = join_path(heading, name)
    if data.startswith(TNEF_SIGNATURE):
        try:
            doc = read_part(data, name)
        except KnowledgeError as exc:
            builder.warnings.append(f"{label}: not read: {exc}")
            return
        add_document(builder, doc, heading, merge=True)
        return
    builder.add(f"Attachment: {name}", heading=label)
    add_part(builder, read_part, data, name, label)


def _filename(part: Message) -> str:
    try:
        name = part.get_filename()
    except Exception:
        name = None
    if not name:
        param = part.get_param("name")
        name = param if isinstance(param, str) else None
    return clean_line(name) if name else ""


# -- Outlook .msg ---------------------------------------------------------------------------------


def _safe(call):
    try:
        return call()
    except Exception:  # extract-msg raises many kinds on odd properties
        return None


def _msg_headers(msg) -> dict[str, str]:
    date = _safe(lambda: msg.date)
    return {
        "subject": clean_line(str(_safe(lambda: msg.subject) or "")),
        "from": clean_line(str(_safe(lambda: msg.sender) or "")),
        "to": clean_line(str(_safe(lambda: msg.to) or "")),
        "cc": clean_line(str(_safe(lambda: msg.cc) or "")),
        "date": date.isoformat() if hasattr(date, "isoformat") else clean_line(str(date or "")),
    }


class _Outlook:
    def __init__(self, builder: Builder, read_part: ReadPart) -> None:
        self.builder = builder
        self.read_part = read_part

    def message(self, msg, outer: str | None, *, depth: int) -> None:
        headers = _msg_headers(msg)
        subject = headers["subject"]
        heading = join_path(outer, subject or "(no subject)")
        block = _header_block(subject, [(h, headers[h.lower()]) for h in _HEADERS])
        self.builder.add(block, heading=heading)
        html = self._html_body(msg)
        if html is not None:
            with contextlib.suppress(EmptyDocument):
                add_document(self.builder, read_html(html), heading)
        else:
            body = _safe(lambda: msg.body)
            if isinstance(body, str) and body.strip():
                self.builder.add(body, heading=heading)
            else:
                rtf = _safe(lambda: msg.rtfBody)
                if isinstance(rtf, bytes) and rtf.strip():
                    add_part(self.builder, self.read_part, rtf, "body.rtf", heading)
        inline = set(_CID.findall(html or ""))
        for att in _safe(lambda: msg.attachments) or []:
            self.attachment(att, heading, inline, depth=depth)

    @staticmethod
    def _html_body(msg) -> str | None:
        html = _safe(lambda: msg.htmlBody)  # extract-msg de-encapsulates HTML from an RTF body too
        if isinstance(html, bytes) and html.strip():
            m = re.search(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", html[:4096], re.I)
            return decode_payload(html, m.group(1).decode("ascii") if m else None)
        if isinstance(html, str) and html.strip():
            return html
        return None

    def attachment(self, att, heading: str | None, inline: set[str], *, depth: int) -> None:
        name = one_line(
            str(
                _safe(lambda: att.longFilename)
                or _safe(lambda: att.shortFilename)
                or _safe(lambda: att.displayName)
                or "attachment"
            )
        )
        if _safe(lambda: att.hidden):
            return
        cid = _safe(lambda: att.contentId)
        mimetype = str(_safe(lambda: att.mimetype) or "")
        if (cid and cid in inline) or (name in inline and (mimetype.startswith("image/") or not mimetype)):
            return  # a picture the HTML body shows
        data = _safe(lambda: att.data)
        label = join_path(heading, name)
        if data is not None and not isinstance(data, (bytes, bytearray)) and hasattr(data, "attachments"):
            if depth + 1 > MAX_DEPTH:
                self.builder.warnings.append(f"{label}: not read: mails nested more than {MAX_DEPTH} deep")
                return
            self.message(data, heading, depth=depth + 1)  # an embedded Outlook message
            return
        if not isinstance(data, (bytes, bytearray)) or not data:
            self.builder.warnings.append(f"{label}: not read: the attachment has no data")
            return
        _add_attachment(self.builder, self.read_part, bytes(data), name, heading)
