"""Builders of hostile and broken archive, mail and e-book inputs (issue 38), for the tests and the
benchmark. Each is a plain function returning the file's bytes; nothing is read from disk.

- :func:`overlapping_zip`: the overlapping zip bomb (many directory entries over one member's data).
- :func:`quoted_overlap_zip`: Fifield's overlap without shared offsets (each entry's data holds the
  next entry's local header and data).
- :func:`legacy_name_zip`: member names in a legacy code page without the UTF-8 flag.
- :func:`tnef_file`: a TNEF ``winmail.dat`` ([MS-OXTNEF]) with a body and attachments.
- :func:`tnef_eml`: a mail carrying a ``winmail.dat`` as ``application/ms-tnef``.
- :func:`base64_rfc822_eml`: a mail whose forwarded ``message/rfc822`` part is base64-encoded.
- :func:`epub_missing_chapter`: an EPUB whose spine names a missing file and an unknown item.
"""

from __future__ import annotations

import base64
import io
import random
import struct
import zipfile
import zlib

# -- ZIP ------------------------------------------------------------------------------------------


def _local_header(
    name: bytes, *, crc: int, csize: int, usize: int, method: int, flags: int = 0, extra: bytes = b""
) -> bytes:
    """APPNOTE 6.3.10 §4.3.7: a local file header (version 20, no time)."""
    return (
        struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, flags, method, 0, 0x21, crc, csize, usize, len(name), len(extra))
        + name
        + extra
    )


def _central_entry(
    name: bytes, *, crc: int, csize: int, usize: int, method: int, offset: int, flags: int = 0, extra: bytes = b""
) -> bytes:
    """APPNOTE §4.3.12: a central directory header pointing at the local header at ``offset``."""
    return (
        struct.pack(
            "<4sHHHHHHIIIHHHHHII",
            b"PK\x01\x02",
            20,
            20,
            flags,
            method,
            0,
            0x21,
            crc,
            csize,
            usize,
            len(name),
            len(extra),
            0,
            0,
            0,
            0,
            offset,
        )
        + name
        + extra
    )


def _end_of_directory(entries: int, size: int, offset: int) -> bytes:
    """APPNOTE §4.3.16."""
    return struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, entries, entries, size, offset, 0)


def overlapping_zip(entries: int = 400, member_bytes: int = 10_000_000, *, seed: int = 38) -> bytes:
    """A ZIP of about 3 MB whose central directory points ``entries`` entries (all named
    ``report.txt``) at one deflated member of ``member_bytes`` bytes of text (random words, which
    deflate about 3:1, under every per-member ratio limit): unpacked one entry after another it
    inflates ``entries`` x ``member_bytes`` bytes (4 GB with the defaults). Python 3.11.7's zipfile
    opens every entry; 3.11.8/3.12.2 and later refuse it ("Overlapped entries")."""
    rng = random.Random(seed)
    words = [
        "pump",
        "valve",
        "flow",
        "pressure",
        "report",
        "north",
        "station",
        "reading",
        "litres",
        "level",
        "WOMBAT",
        "gauge",
        "inlet",
        "outlet",
        "shift",
        "check",
        "normal",
        "alarm",
        "daily",
        "sensor",
    ]
    line_words = [f"{w}{rng.randrange(10_000)}" for w in words for _ in range(60)]
    text = bytearray()
    while len(text) < member_bytes:
        text += (" ".join(rng.choices(line_words, k=12)) + "\n").encode()
    body = bytes(text[:member_bytes])
    packer = zlib.compressobj(6, zlib.DEFLATED, -15)
    packed = packer.compress(body) + packer.flush()
    name = b"report.txt"
    crc = zlib.crc32(body)
    local = _local_header(name, crc=crc, csize=len(packed), usize=len(body), method=8) + packed
    central = b"".join(
        _central_entry(name, crc=crc, csize=len(packed), usize=len(body), method=8, offset=0) for _ in range(entries)
    )
    return local + central + _end_of_directory(entries, len(central), len(local))


def quoted_overlap_zip(
    entries: int = 50, kernel: bytes = b"The kernel KINGFISHER-3 is read again and again.\n" * 2000
) -> bytes:
    """Fifield's overlap without shared offsets (stored, not deflated): entry ``i``'s data is entry
    ``i + 1``'s local header and data, the last one's the ``kernel``; every entry has its own offset
    and name, yet each one unpacks the whole tail. ``entries`` x about ``len(kernel)`` bytes out of a
    file barely larger than the kernel."""
    names = [f"part{i:03d}.txt".encode() for i in range(entries)]
    tail = kernel
    headers: list[tuple[bytes, int, int]] = []  # (name, crc, size) from the last entry to the first
    for name in reversed(names):
        crc = zlib.crc32(tail)
        header = _local_header(name, crc=crc, csize=len(tail), usize=len(tail), method=0)
        headers.append((name, crc, len(tail)))
        tail = header + tail
    headers.reverse()
    offsets, at = [], 0
    for name, _crc, _size in headers:
        offsets.append(at)
        at += 30 + len(name)
    central = b"".join(
        _central_entry(name, crc=crc, csize=size, usize=size, method=0, offset=offset)
        for (name, crc, size), offset in zip(headers, offsets, strict=True)
    )
    return tail + central + _end_of_directory(entries, len(central), len(tail))


def legacy_name_zip(
    files: dict[str, bytes] | None = None, encoding: str = "cp866", *, unicode_path: dict[str, str] | None = None
) -> bytes:
    """A ZIP whose member names are written in ``encoding`` without the UTF-8 flag (bit 11), as
    Windows' own zip tool writes them in its OEM code page, so that Python's zipfile shows them as
    cp437 mojibake. Default: two Russian file names in cp866.

    Args:
        files: member name -> bytes (deflated).
        encoding: the code page the names are written in (``cp866``, ``cp1251``, ``shift_jis``,
            ``gbk``, ``cp1252``, ...).
        unicode_path: member name -> a name to put in an Info-ZIP Unicode Path extra field (0x7075,
            with the CRC-32 of the written name), which then wins over the written one.
    """
    if files is None:
        files = {
            "Отчёт за май.txt": "Насос работает. Уровень воды WOMBAT-7 в норме.".encode(),
            "Протоколы/Совещание.txt": "Решение: заменить клапан GANNET-12.".encode(),
        }
    local_part = bytearray()
    central = bytearray()
    for name, data in files.items():
        raw = name.encode(encoding)
        extra = b""
        if unicode_path and name in unicode_path:
            field = b"\x01" + struct.pack("<I", zlib.crc32(raw)) + unicode_path[name].encode("utf-8")
            extra = struct.pack("<HH", 0x7075, len(field)) + field
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        packed = packer.compress(data) + packer.flush()
        crc = zlib.crc32(data)
        offset = len(local_part)
        local_part += _local_header(raw, crc=crc, csize=len(packed), usize=len(data), method=8, extra=extra) + packed
        central += _central_entry(raw, crc=crc, csize=len(packed), usize=len(data), method=8, offset=offset, extra=extra)
    return bytes(local_part) + bytes(central) + _end_of_directory(len(files), len(central), len(local_part))


# -- TNEF -----------------------------------------------------------------------------------------

# [MS-OXTNEF] §2.1.3.3: attribute ids, with the attribute's type in the high word (§2.1.3.3.1).
ATT_TNEF_VERSION = 0x00089006
ATT_OEM_CODEPAGE = 0x00069007
ATT_MESSAGE_CLASS = 0x00078008
ATT_SUBJECT = 0x00018004
ATT_BODY = 0x0002800C
ATT_MSG_PROPS = 0x00069003
ATT_RECIP_TABLE = 0x00069004
ATT_ATTACH_REND_DATA = 0x00069002
ATT_ATTACH_TITLE = 0x00018010
ATT_ATTACH_DATA = 0x0006800F
ATT_ATTACHMENT = 0x00069005
LEVEL_MESSAGE, LEVEL_ATTACHMENT = 0x01, 0x02

# MAPI property types and tags ([MS-OXCDATA] §2.11.1, [MS-OXPROPS]).
PT_STRING8, PT_UNICODE, PT_BINARY, PT_OBJECT = 0x001E, 0x001F, 0x0102, 0x000D
PR_BODY, PR_RTF_COMPRESSED, PR_BODY_HTML = 0x1000, 0x1009, 0x1013
PR_ATTACH_DATA_OBJ, PR_ATTACH_LONG_FILENAME = 0x3701, 0x3707
IID_IMESSAGE = b"\x07\x03\x02\x00\x00\x00\x00\x00\xc0\x00\x00\x00\x00\x00\x00\x46"


def tnef_attribute(level: int, attr_id: int, data: bytes) -> bytes:
    """[MS-OXTNEF] §2.1.3.1: level, id, length, data and the checksum (the data's bytes summed
    modulo 65536)."""
    return struct.pack("<BII", level, attr_id, len(data)) + data + struct.pack("<H", sum(data) & 0xFFFF)


def mapi_props(props: list[tuple[int, int, bytes]]) -> bytes:
    """A MAPI property list ([MS-OXTNEF] §2.1.3.4) of variable-length values: the count, then each
    property's type and id, one value (its length, the bytes padded to 4)."""
    out = struct.pack("<I", len(props))
    for ptype, pid, value in props:
        out += struct.pack("<HHII", ptype, pid, 1, len(value)) + value + b"\x00" * (-len(value) % 4)
    return out


def tnef_file(
    subject: str = "Pump report",
    body: str | None = "The pump PELICAN-9 runs hot.",
    attachments: dict[str, bytes] | None = None,
    *,
    rtf_body: bytes | None = None,
    html_body: str | None = None,
    embedded: bytes | None = None,
    recipients: bytes | None = None,
) -> bytes:
    """A TNEF stream (``winmail.dat``) as Outlook writes it: version, OEM code page (1252), message
    class, subject, the body (``attBody``), the message's MAPI properties (an HTML body, a compressed
    RTF body: ``rtf_body`` is compressed here with compressed-rtf) and one attachment per
    ``attachments`` item (rendering data, title, data, and the long file name as a MAPI property).

    Args:
        embedded: another TNEF stream to attach as an embedded message (``PR_ATTACH_DATA_OBJ``).
        recipients: a raw recipient table (``attRecipTable``) to put in, for hostile counts.
    """
    out = bytearray(struct.pack("<IH", 0x223E9F78, 0x0001))
    out += tnef_attribute(LEVEL_MESSAGE, ATT_TNEF_VERSION, struct.pack("<I", 0x00010000))
    out += tnef_attribute(LEVEL_MESSAGE, ATT_OEM_CODEPAGE, struct.pack("<II", 1252, 0))
    out += tnef_attribute(LEVEL_MESSAGE, ATT_MESSAGE_CLASS, b"IPM.Microsoft Mail.Note\x00")
    if subject:
        out += tnef_attribute(LEVEL_MESSAGE, ATT_SUBJECT, subject.encode("cp1252") + b"\x00")
    if body is not None:
        out += tnef_attribute(LEVEL_MESSAGE, ATT_BODY, body.encode("cp1252"))
    if recipients is not None:
        out += tnef_attribute(LEVEL_MESSAGE, ATT_RECIP_TABLE, recipients)
    props: list[tuple[int, int, bytes]] = []
    if html_body is not None:
        props.append((PT_BINARY, PR_BODY_HTML, html_body.encode("utf-8")))
    if rtf_body is not None:
        from compressed_rtf import compress

        props.append((PT_BINARY, PR_RTF_COMPRESSED, compress(rtf_body, compressed=True)))
    if props:
        out += tnef_attribute(LEVEL_MESSAGE, ATT_MSG_PROPS, mapi_props(props))
    rend = struct.pack("<HIHHI", 1, 0xFFFFFFFF, 0, 0, 0)  # §2.1.3.3.14: a file attachment
    for name, data in (attachments or {}).items():
        out += tnef_attribute(LEVEL_ATTACHMENT, ATT_ATTACH_REND_DATA, rend)
        short = name.encode("cp1252", "replace")[:12]
        out += tnef_attribute(LEVEL_ATTACHMENT, ATT_ATTACH_TITLE, short + b"\x00")
        out += tnef_attribute(LEVEL_ATTACHMENT, ATT_ATTACH_DATA, data)
        out += tnef_attribute(
            LEVEL_ATTACHMENT,
            ATT_ATTACHMENT,
            mapi_props([(PT_UNICODE, PR_ATTACH_LONG_FILENAME, (name + "\x00").encode("utf-16-le"))]),
        )
    if embedded is not None:
        out += tnef_attribute(LEVEL_ATTACHMENT, ATT_ATTACH_REND_DATA, rend)
        out += tnef_attribute(
            LEVEL_ATTACHMENT, ATT_ATTACHMENT, mapi_props([(PT_OBJECT, PR_ATTACH_DATA_OBJ, IID_IMESSAGE + embedded)])
        )
    return bytes(out)


def _mail_head(subject: str, boundary: str) -> str:
    return (
        "From: Ada Lovelace <ada@example.org>\r\nTo: Alan Turing <alan@example.org>\r\n"
        f"Subject: {subject}\r\nDate: Tue, 06 Jun 2017 14:48:27 -0700\r\nMIME-Version: 1.0\r\n"
        f'Content-Type: multipart/mixed; boundary="{boundary}"\r\n\r\n'
    )


def tnef_eml(tnef: bytes | None = None) -> bytes:
    """A mail whose second part is a ``winmail.dat`` (``application/ms-tnef``, base64) -- by default
    :func:`tnef_file` with a text attachment ``notes.txt``."""
    tnef = tnef if tnef is not None else tnef_file(attachments={"notes.txt": b"Replace the seal OSPREY-4.\n"})
    encoded = base64.encodebytes(tnef).decode("ascii")
    return (
        _mail_head("Pump report", "TT") + "--TT\r\nContent-Type: text/plain\r\n\r\nSee the attachment.\r\n"
        '--TT\r\nContent-Type: application/ms-tnef; name="winmail.dat"\r\nContent-Transfer-Encoding: base64\r\n'
        'Content-Disposition: attachment; filename="winmail.dat"\r\n\r\n'
        f"{encoded}\r\n--TT--\r\n"
    ).encode("ascii")


# -- mail -----------------------------------------------------------------------------------------


def base64_rfc822_eml(transfer_encoding: str = "base64") -> bytes:
    """A mail forwarding another as a ``message/rfc822`` part sent with ``Content-Transfer-Encoding:
    transfer_encoding`` (``"base64"``, ``"quoted-printable"``, or an odd spelling such as
    ``"Base64  "`` with trailing spaces), and a ``text/plain`` attachment whose encoding header is
    ``"base64  "`` too. The inner mail's subject is "Inner KESTREL", its body says "HERON-12"; the
    attachment says "PLOVER-5"."""
    inner = (
        "From: Grace Hopper <grace@example.org>\r\nTo: Ada Lovelace <ada@example.org>\r\n"
        "Subject: Inner KESTREL\r\nDate: Mon, 05 Jun 2017 09:00:00 -0700\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n\r\nThe inner body HERON-12 says the café is closed.\r\n"
    ).encode()
    kind = transfer_encoding.strip().lower()
    if kind == "base64":
        encoded = base64.encodebytes(inner).decode("ascii")
    elif kind == "quoted-printable":
        import quopri

        encoded = quopri.encodestring(inner).decode("ascii")
    else:
        raise ValueError(f"transfer_encoding must be base64 or quoted-printable, got {transfer_encoding!r}")
    note = base64.encodebytes(b"The attached note says PLOVER-5.\n").decode("ascii")
    return (
        _mail_head("Fwd: Inner KESTREL", "FW") + "--FW\r\nContent-Type: text/plain\r\n\r\nForwarded below.\r\n"
        "--FW\r\nContent-Type: message/rfc822\r\n"
        f"Content-Transfer-Encoding: {transfer_encoding}\r\n\r\n{encoded}\r\n"
        '--FW\r\nContent-Type: text/plain; name="note.txt"\r\nContent-Transfer-Encoding: base64  \r\n'
        'Content-Disposition: attachment; filename="note.txt"\r\n\r\n'
        f"{note}\r\n--FW--\r\n"
    ).encode("ascii")


# -- EPUB -----------------------------------------------------------------------------------------


def epub_missing_chapter() -> bytes:
    """An EPUB 3 whose spine lists three chapters: ``one.xhtml`` (present, "GROUSE-1"), ``two.xhtml``
    (in the manifest, but its file is missing) and an idref ``ghost`` no manifest item has, then
    ``three.xhtml`` (present, "PTARMIGAN-3")."""

    def page(title: str, text: str) -> str:
        return (
            f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head>'
            f"<title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
        )

    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Moorland Birds</dc:title></metadata>'
        '<manifest><item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="two" href="two.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="three" href="three.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="one"/><itemref idref="two"/><itemref idref="ghost"/><itemref idref="three"/>'
        "</spine></package>"
    )
    container = (
        '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        zf.writestr("META-INF/container.xml", container)
        zf.writestr("OEBPS/book.opf", opf)
        zf.writestr("OEBPS/one.xhtml", page("Grouse", "The grouse GROUSE-1 calls at dawn."))
        zf.writestr("OEBPS/three.xhtml", page("Ptarmigan", "The ptarmigan PTARMIGAN-3 turns white."))
    return buf.getvalue()


def overlapping_package(package: bytes, member: str, copies: int = 40) -> bytes:
    """``package`` (a .docx, .xlsx, .epub, ... built by any means) with ``copies`` more central
    directory entries pointing at ``member``'s local header, as :func:`overlapping_zip` does to a
    plain archive."""
    zf = zipfile.ZipFile(io.BytesIO(package))
    infos = zf.infolist()
    eocd = package.rindex(b"PK\x05\x06")
    (start,) = struct.unpack("<I", package[eocd + 16 : eocd + 20])  # APPNOTE §4.3.16: the directory's offset
    target = zf.getinfo(member)
    raw = target.orig_filename.encode("utf-8")
    flags = target.flag_bits & ~0x8  # sizes are in the directory entry
    central = package[start:eocd]
    central += b"".join(
        _central_entry(
            raw,
            crc=target.CRC,
            csize=target.compress_size,
            usize=target.file_size,
            method=target.compress_type,
            offset=target.header_offset,
            flags=flags,
        )
        for _ in range(copies)
    )
    count = len(infos) + copies
    return package[:start] + central + _end_of_directory(count, len(central), start)
