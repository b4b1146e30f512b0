"""TNEF: the ``winmail.dat`` (``application/ms-tnef``) Outlook sends in place of a mail's body and
attachments, unpacked as Apache Tika's TNEFParser does.

The stream ([MS-OXTNEF] §2.1.3: signature ``0x223E9F78``, then attributes each with a level, an id,
a length, its data and a checksum) is decoded by tnefparse. Read: the subject (the heading, and the
document's title), the body -- the HTML body, else the plain one, else the compressed RTF body
([MS-OXRTFCP], decompressed by compressed-rtf) read by the RTF reader -- and every attachment
through ``read_part`` under ``subject > file name`` (an embedded message as a message of its own).
Not read: the recipient table (the mail around a ``winmail.dat`` carries its recipients), rendering
data and attachment icons (metafiles). Before tnefparse sees it the stream's framing is checked, and
property lists that declare more properties than their bytes can hold are refused: tnefparse would
loop over every declared property.
"""

from __future__ import annotations

import contextlib
import logging
import struct

from knowledge.errors import EmptyDocument, KnowledgeError, UnsupportedFile
from knowledge.ingest._compose import MAX_DEPTH, ReadPart, add_document, add_part, join_path
from knowledge.ingest._detect import TNEF_SIGNATURE
from knowledge.ingest._html import read_html
from knowledge.ingest._text import Builder, clean_line, decode, one_line
from knowledge.ingest.document import Document

SIGNATURE = TNEF_SIGNATURE

_ATT_MSG_PROPS = 0x9003  # attMsgProps: the message's MAPI properties
_ATT_RECIP_TABLE = 0x9004  # attRecipTable
_ATT_ATTACHMENT = 0x9005  # attAttachment: an attachment's MAPI properties
_MIN_PROPERTY = 8  # bytes: a property tag (4) and the shortest value, padded (4)
#: Embedded messages checked in one stream at most; a stream with more is refused.
MAX_EMBEDDED = 1000
_IMESSAGE = b"\x07\x03\x02\x00\x00\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\x46"  # IID_IMessage

# tnefparse logs a warning per bad checksum or property; a hostile file would flood the log.
logging.getLogger("tnefparse").setLevel(logging.CRITICAL)


def read_tnef(data: bytes, read_part: ReadPart) -> Document:
    """Read a TNEF stream (``winmail.dat``): subject, body and attachments (see the module).

    Raises:
        UnsupportedFile: damaged (``"damaged: ..."``, with the reason).
        EmptyDocument: no subject, body or attachment with text.
    """
    stream = _sanitised(data)
    try:
        from tnefparse.tnef import TNEF  # noqa: PLC0415 - TNEF files only

        tnef = TNEF(stream, do_checksum=False)
    except KnowledgeError:
        raise
    except Exception as exc:  # struct.error, IndexError, UnicodeDecodeError, ... from a damaged stream
        raise UnsupportedFile(
            f"damaged: this TNEF attachment (winmail.dat) cannot be read ({one_line(str(exc))[:200]})"
        ) from exc
    builder = Builder()
    subject = _subject(tnef)
    _Message(builder, read_part).read(tnef, None, depth=0)
    return builder.build(
        "tnef", empty="no text: the TNEF attachment (winmail.dat) has no body or readable attachment", title=subject or None
    )


def _sanitised(data: bytes) -> bytes:
    """``data`` without its recipient tables, once its framing and property counts are checked.

    Raises:
        UnsupportedFile: not a TNEF stream, or a property list that declares more properties than
            its bytes hold.
    """
    if len(data) < 6 or not data.startswith(SIGNATURE):
        raise UnsupportedFile("damaged: not a TNEF stream (no TNEF signature)")
    out = bytearray(data[:6])
    offset = 6
    while offset + 12 < len(data):  # tnefparse's own loop: an attribute is 12 bytes at least
        (attr_id,) = struct.unpack_from("<H", data, offset + 1)
        (length,) = struct.unpack_from("<I", data, offset + 5)
        size = min(len(data) - offset, length + 11)  # level 1, id 4, length 4, data, checksum 2
        body = data[offset + 9 : offset + size - 2]
        if attr_id in (_ATT_MSG_PROPS, _ATT_ATTACHMENT):
            _check_counts(body)
        if attr_id != _ATT_RECIP_TABLE:
            out += data[offset : offset + size]
        offset += size
    out += data[offset:]
    return bytes(out)


def _check_counts(body: bytes, *, embedded: bool = True) -> None:
    """Refuse a MAPI property list whose declared count is more than its bytes can hold; with
    ``embedded``, the lists of the messages embedded in it too (found by their IID_IMessage prefix;
    the value's length stands just before it, [MS-OXTNEF] §2.1.3.4)."""
    if len(body) >= 4:
        (count,) = struct.unpack_from("<I", body)
        if count > len(body) // _MIN_PROPERTY:
            raise UnsupportedFile(f"damaged: a TNEF property list declares {count:,} properties in {len(body):,} bytes")
    if not embedded:
        return
    at = body.find(_IMESSAGE)
    seen = 0
    while at >= 0:  # every embedded message, however deep (tnefparse reads them all at once)
        seen += 1
        if seen > MAX_EMBEDDED:
            raise UnsupportedFile(f"damaged: a TNEF stream with more than {MAX_EMBEDDED:,} embedded messages")
        end = len(body)
        if at >= 4:
            (value_len,) = struct.unpack_from("<I", body, at - 4)
            end = min(end, at + value_len) if value_len >= len(_IMESSAGE) else end
        inner = body[at + len(_IMESSAGE) : end]
        if inner.startswith(SIGNATURE):
            _check_embedded(inner)
        at = body.find(_IMESSAGE, at + 1)


def _check_embedded(data: bytes) -> None:
    """:func:`_sanitised`'s checks on an embedded message, one level (it is read in place, so
    nothing is removed: a recipient table there must declare no more rows than its bytes hold)."""
    offset = 6
    while offset + 12 < len(data):
        (attr_id,) = struct.unpack_from("<H", data, offset + 1)
        (length,) = struct.unpack_from("<I", data, offset + 5)
        size = min(len(data) - offset, length + 11)
        if attr_id in (_ATT_MSG_PROPS, _ATT_ATTACHMENT, _ATT_RECIP_TABLE):
            _check_counts(data[offset + 9 : offset + size - 2], embedded=False)
        offset += size


def _subject(tnef) -> str:
    from tnefparse.tnef import TNEF  # noqa: PLC0415 - TNEF files only

    for obj in tnef.msgprops:
        if obj.name == TNEF.ATTSUBJECT and isinstance(obj.data, str):
            return clean_line(obj.data)
    return ""


def _text(value, codepage: str | None) -> str:
    """A body property as text: ``str`` as it is, bytes in the stream's code page (else sniffed)."""
    if isinstance(value, str):
        return value.rstrip("\x00")
    if isinstance(value, (list, tuple)):
        return "".join(_text(v, codepage) for v in value)
    if not isinstance(value, (bytes, bytearray)):
        return ""
    raw = bytes(value).rstrip(b"\x00")
    if codepage:
        try:
            return raw.decode(codepage)
        except (LookupError, UnicodeDecodeError):
            pass
    return decode(raw)


class _Message:
    def __init__(self, builder: Builder, read_part: ReadPart) -> None:
        self.builder = builder
        self.read_part = read_part

    def read(self, tnef, outer: str | None, *, depth: int) -> None:
        subject = _subject(tnef)
        heading = join_path(outer, subject or None)
        if subject:
            self.builder.add(f"Subject: {subject}", heading=heading)
        self._body(tnef, heading)
        for number, att in enumerate(tnef.attachments, start=1):
            self._attachment(att, number, heading, depth=depth)

    def _body(self, tnef, heading: str | None) -> None:
        codepage = getattr(tnef, "codepage", None)
        html = _text(tnef.htmlbody, codepage) if tnef.htmlbody else ""
        if html.strip():
            with contextlib.suppress(EmptyDocument):
                add_document(self.builder, read_html(html), heading)
            return
        body = _text(tnef.body, codepage) if tnef.body else ""
        if body.strip():
            self.builder.add(body, heading=heading)
            return
        try:
            rtf = tnef.rtfbody
        except Exception as exc:  # compressed-rtf refuses a damaged stream
            self.builder.warnings.append(
                f"{heading or 'the message'}: the RTF body is damaged and was not read ({one_line(str(exc))[:120]})"
            )
            return
        if isinstance(rtf, (bytes, bytearray)) and rtf.strip(b"\x00 \r\n"):
            add_part(self.builder, self.read_part, bytes(rtf), "body.rtf", heading)

    def _attachment(self, att, number: int, heading: str | None, *, depth: int) -> None:
        name = ""
        for get in (att.long_filename, lambda: att.name):
            try:
                name = one_line(str(get() or ""))
            except Exception:  # a name in bytes that are not UTF-8
                name = ""
            if name:
                break
        name = name or f"attachment {number}"
        label = join_path(heading, name)
        embedded = getattr(att, "embed", None)
        if embedded is not None:
            if depth + 1 > MAX_DEPTH:
                self.builder.warnings.append(f"{label}: not read: messages nested more than {MAX_DEPTH} deep")
                return
            self.read(embedded, heading, depth=depth + 1)
            return
        data = att.data
        if not isinstance(data, (bytes, bytearray)) or not bytes(data).strip():
            self.builder.warnings.append(f"{label}: not read: the attachment has no data")
            return
        self.builder.add(f"Attachment: {name}", heading=label)
        add_part(self.builder, self.read_part, bytes(data), name, label)
