"""Which reader a file needs, decided from its bytes (magic numbers), not from its name.

The name only chooses between the text-like formats (Markdown, HTML, CSV, plain text) and breaks
ties a ZIP's first bytes cannot. Signatures come from the formats' specifications and the
``file(1)`` magic database: PDF ISO 32000-1 §7.5.2 (``%PDF-`` within the first 1024 bytes, as readers
accept), ZIP APPNOTE §4.3.7, OLE2 [MS-CFB] §2.2, TNEF [MS-OXTNEF] §2.1.3.1 (``0x223E9F78``), PNG, JPEG, GIF,
TIFF, WebP/RIFF, ISO-BMFF ``ftyp``.
"""

from __future__ import annotations

import csv
import io
import re
import struct
import zipfile
from pathlib import PurePath

from knowledge.errors import UnsupportedFile
from knowledge.ingest._text import looks_binary, sniff_encoding

#: The first bytes of a TNEF stream (``winmail.dat``): 0x223E9F78 little-endian ([MS-OXTNEF] §2.1.3.1).
TNEF_SIGNATURE = b"\x78\x9f\x3e\x22"

#: How many leading bytes :func:`detect_format` needs to decide, except for a ZIP (see there).
HEAD_BYTES = 8192

LEGACY_WORD = "unsupported: legacy Word format (.doc) — save it as .docx"
LEGACY_EXCEL = "unsupported: legacy Excel format (.xls) — save it as .xlsx"
LEGACY_POWERPOINT = "unsupported: legacy PowerPoint format (.ppt) — save it as .pptx"

_MARKDOWN_EXT = {".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdwn", ".mdx", ".rmd"}
_HTML_EXT = {".html", ".htm", ".xhtml", ".shtml"}
_CSV_EXT = {".csv", ".tsv", ".tab"}
_MAIL_EXT = {".eml": "eml", ".mht": "eml", ".mhtml": "eml", ".mbox": "mbox", ".mbx": "mbox"}
_TEXT_EXT = {
    ".txt",
    ".text",
    ".log",
    ".rst",
    ".adoc",
    ".asciidoc",
    ".org",
    ".tex",
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".conf",
    ".py",
    ".js",
    ".ts",
    ".java",
    ".c",
    ".h",
    ".cpp",
    ".rs",
    ".go",
    ".rb",
    ".sh",
    ".sql",
    ".srt",
    ".vtt",
}

#: Extensions of binary formats we read -> what the bytes should have been (for a clearer refusal
#: of binary data of no known format under such a name).
_NAMED_BY_EXTENSION = {
    ".pdf": "a PDF",
    ".docx": "a Word document",
    ".docm": "a Word document",
    ".pptx": "a PowerPoint deck",
    ".xlsx": "an Excel workbook",
    ".xlsm": "an Excel workbook",
    ".xls": "an Excel 97-2003 workbook",
    ".odt": "an OpenDocument text",
    ".ods": "an OpenDocument spreadsheet",
    ".odp": "an OpenDocument presentation",
    ".epub": "an EPUB e-book",
    ".msg": "an Outlook message",
    ".zip": "a ZIP archive",
    ".png": "a PNG image",
    ".jpg": "a JPEG image",
    ".jpeg": "a JPEG image",
    ".tif": "a TIFF image",
    ".tiff": "a TIFF image",
}

#: Binary signatures at offset 0 -> what to call the file in the error message.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\x00\x00\x01\x00", "an icon image"),
    (b"8BPS", "a Photoshop image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"BZh", "a bzip2 archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"\x7fELF", "a program (ELF executable)"),
    (b"\xca\xfe\xba\xbe", "a program (Java class or Mach-O)"),
    (b"\xcf\xfa\xed\xfe", "a program (Mach-O executable)"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"OggS", "an Ogg audio/video file"),
    (b"fLaC", "a FLAC audio file"),
    (b"ID3", "an MP3 audio file"),
    (b"\x1aE\xdf\xa3", "a Matroska/WebM video"),
    (b"wOFF", "a web font"),
    (b"wOF2", "a web font"),
    (b"%!PS", "a PostScript file — save it as PDF"),
    (b"AT&TFORM", "a DjVu document"),
)

#: ZIP members whose presence tells what an OOXML container is: a format name, or (with a space)
#: the refusal's wording.
_ZIP_KINDS: tuple[tuple[str, str], ...] = (
    ("word/document.xml", "docx"),
    ("xl/workbook.xml", "xlsx"),
    ("ppt/presentation.xml", "pptx"),
    ("visio/document.xml", "a Visio drawing (.vsdx)"),
)
_ODF = re.compile(rb"mimetypeapplication/vnd\.oasis\.opendocument\.([a-z-]+)")
#: OpenDocument kinds (the ``mimetype`` member, ODF 1.2 part 3 §3.3) -> format; the ``-template``
#: variants read as their documents.
_ODF_FORMATS = {"text": "odt", "spreadsheet": "ods", "presentation": "odp"}
_EPUB_MIME = b"application/epub+zip"


#: ``%PDF-x.y`` at the start, or at the start of a line within the first 1024 bytes (readers accept
#: leading junk there, such as mail headers; mid-line it is text that talks about PDF).
_PDF_HEADER = re.compile(rb"(?:\A|[\r\n])%PDF-\d\.\d")


def _has_stream(data: bytes, name: str) -> bool:
    """True when ``data`` holds an OLE2 directory entry for ``name`` ([MS-CFB] §2.6.1: the name in
    UTF-16LE, NUL-padded to 64 bytes, then its length in bytes with the terminator, uint16 LE)."""
    raw = name.encode("utf-16-le")
    entry = raw + b"\x00" * (64 - len(raw)) + struct.pack("<H", len(raw) + 2)
    return entry in data


def detect_format(head: bytes, name: str | None = None) -> str:
    """The reader ``head`` needs: one of :data:`~knowledge.ingest.document.FORMATS` (``"pdf"``,
    ``"docx"``, ``"pptx"``, ``"xlsx"``, ``"odt"``, ``"ods"``, ``"odp"``, ``"epub"``, ``"rtf"``, ``"eml"``,
    ``"mbox"``, ``"msg"``, ``"tnef"`` (``winmail.dat``), ``"zip"``, ``"markdown"``, ``"html"``, ``"csv"``,
    ``"text"``, ``"image"``: PNG,
    JPEG, TIFF, WebP, BMP read by OCR), or ``"encrypted-ooxml"`` (an encrypted .docx/.xlsx/.pptx: to
    be decrypted, then detected again).

    Args:
        head: the file's first bytes (at least :data:`HEAD_BYTES` of them when the file is longer), or
            the whole file. For a ZIP or an OLE2 file, the whole file lets the directory decide; with
            only a head the local file headers in it are read, and the name's extension breaks a tie.
        name: the file's name, used only to choose between the text-like formats (by extension, else
            by content: HTML, an e-mail's header block, an mbox ``From`` line, Markdown, CSV) and for
            a container the head cannot decide.

    Raises:
        UnsupportedFile: the bytes are a format no reader handles, named in the message: legacy Word,
            Excel and PowerPoint (``"... — save it as .docx"``, ``.xlsx``, ``.pptx``), other ZIP
            containers (Visio, OpenDocument drawings), images OCR does not read (GIF, HEIF/AVIF,
            icons, Photoshop, SVG), audio, video, other archives (gzip, 7-Zip, RAR, ...), programs,
            and binary data that is not text in any encoding.
    """
    ext = PurePath(name).suffix.lower() if name else ""
    if _PDF_HEADER.search(head[:1024]):
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_kind(head, ext)
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        return _ole2_kind(head, ext)
    if head.startswith(TNEF_SIGNATURE):
        return "tnef"
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:5] == b"{\\rtf":
        return "rtf"
    if is_ocr_image(head):  # OCR hook (issue 16): PNG, JPEG, TIFF, WebP, BMP go to knowledge.ingest._ocr
        return "image"
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise UnsupportedFile(f"unsupported: {what}")
    riff = _riff_or_bmff(head)
    if riff:
        raise UnsupportedFile(f"unsupported: {riff}")
    if head.startswith(b"BM") and len(head) >= 14 and head[6:10] == b"\x00\x00\x00\x00":
        raise UnsupportedFile("unsupported: a BMP image")
    if head.startswith(b"MZ") and b"\x00" in head[:512]:
        raise UnsupportedFile("unsupported: a program (Windows executable)")
    if looks_binary(head):
        if ext in _NAMED_BY_EXTENSION:
            raise UnsupportedFile(
                f"damaged: named {ext} but its bytes are not {_NAMED_BY_EXTENSION[ext]}"
                " (binary data of no known format; damaged, or not that kind of file)"
            )
        raise UnsupportedFile("unsupported: binary data, not text in any known encoding")
    return _text_kind(head, ext)


def misnamed_text(name: str | None) -> str | None:
    """The warning for a file whose bytes are text but whose name says a binary format (a text file
    renamed ``.docx``): ``"named .docx but it is text, not a Word document: read as text"``; ``None``
    when the name says no such format."""
    ext = PurePath(name).suffix.lower() if name else ""
    if ext not in _NAMED_BY_EXTENSION:
        return None
    return f"named {ext} but it is text, not {_NAMED_BY_EXTENSION[ext]}: read as text"


def is_ocr_image(head: bytes) -> bool:
    """True for the image formats OCR reads (:mod:`knowledge.ingest._ocr`): PNG, JPEG, TIFF (both
    byte orders), WebP (RIFF ``WEBP``) and BMP (``BM`` with zero reserved fields)."""
    return (
        head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*"))
        or (head.startswith(b"RIFF") and head[8:12] == b"WEBP")
        or (head.startswith(b"BM") and len(head) >= 14 and head[6:10] == b"\x00\x00\x00\x00")
    )


def _riff_or_bmff(head: bytes) -> str | None:
    if head.startswith(b"RIFF") and len(head) >= 12:
        return {b"WEBP": "a WebP image", b"WAVE": "a WAV audio file", b"AVI ": "an AVI video"}.get(
            head[8:12], "a RIFF media file"
        )
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"heic", b"heix", b"mif1", b"msf1", b"avif"):
            return "a HEIF/AVIF image"
        return "an MP4/QuickTime audio or video file"
    return None


def _zip_kind(data: bytes, ext: str) -> str:
    """The format of a ZIP container: an OOXML document (``docx``, ``pptx``, ``xlsx``), an
    OpenDocument (``odt``, ``ods``, ``odp``), an ``epub``, or any other archive (``zip``: its members
    are read one by one). UnsupportedFile for the containers no reader handles (Visio)."""
    names: list[str] | None = None
    mimetype: bytes | None = None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
            if "mimetype" in names and zf.getinfo("mimetype").file_size < 200:
                mimetype = zf.read("mimetype").strip()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, RuntimeError, NotImplementedError):
        names = None  # only a head, or a damaged archive: look at the local headers we have
    odf = _ODF.search(data[:200])
    if mimetype is None and odf:
        mimetype = b"application/vnd.oasis.opendocument." + odf.group(1)
    if mimetype is None and data[30:58] == b"mimetype" + _EPUB_MIME:
        mimetype = _EPUB_MIME
    if mimetype is not None:
        if mimetype == _EPUB_MIME:
            return "epub"
        if mimetype.startswith(b"application/vnd.oasis.opendocument."):
            kind = mimetype.rsplit(b".", 1)[-1].decode("ascii", "replace").removesuffix("-template")
            if kind in _ODF_FORMATS:
                return _ODF_FORMATS[kind]
            raise UnsupportedFile(
                f"unsupported: an OpenDocument {kind} file (only text, spreadsheet and presentation documents are read)"
            )
    if names is not None:
        found = set(names)
        for member, kind in _ZIP_KINDS:
            if member in found:
                return _zip_result(kind)
        if "[Content_Types].xml" in found:
            for top, kind in (("word/", "docx"), ("ppt/", "pptx"), ("xl/", "xlsx")):
                if any(n.startswith(top) for n in names):
                    return kind  # an OOXML package whose main part has another name
        if "META-INF/container.xml" in found and any(n.endswith(".opf") for n in names):
            return "epub"  # an EPUB without its mimetype member
        return "zip"
    for member, kind in _ZIP_KINDS:  # local file headers: signature, 26 bytes of fields, the name
        prefix = member.split("/")[0].encode() + b"/"
        if re.search(rb"PK\x03\x04.{26}" + re.escape(prefix), data, re.S):
            return _zip_result(kind)
    by_ext = {
        ".docx": "docx",
        ".docm": "docx",
        ".dotx": "docx",
        ".dotm": "docx",
        ".pptx": "pptx",
        ".pptm": "pptx",
        ".ppsx": "pptx",
        ".potx": "pptx",
        ".xlsx": "xlsx",
        ".xlsm": "xlsx",
        ".xltx": "xlsx",
        ".xltm": "xlsx",
        ".odt": "odt",
        ".ods": "ods",
        ".odp": "odp",
        ".epub": "epub",
    }
    return by_ext.get(ext, "zip")  # the reader opens the whole file and says what it really is


def _zip_result(kind: str) -> str:
    if " " not in kind:
        return kind
    raise UnsupportedFile(f"unsupported: {kind}")


#: Streams every Outlook message has ([MS-OXMSG] §2.4: the property stream and the
#: ``__substg1.0_`` property streams).
_MSG_STREAMS = ("__properties_version1.0",)


def _ole2_kind(data: bytes, ext: str) -> str:
    """The format of an OLE2 compound file: ``encrypted-ooxml`` (an encrypted .docx/.xlsx/.pptx,
    [MS-OFFCRYPTO] §2.3.4: an ``EncryptedPackage`` stream), ``msg`` (Outlook), ``xls`` (a legacy Excel
    workbook: a ``Workbook``/``Book`` stream), else UnsupportedFile naming the legacy Office format."""
    if _has_stream(data, "EncryptedPackage"):
        return "encrypted-ooxml"
    if any(_has_stream(data, s) for s in _MSG_STREAMS) or ext == ".msg":
        return "msg"
    if _has_stream(data, "WordDocument"):
        raise UnsupportedFile(LEGACY_WORD)
    if _has_stream(data, "Workbook") or _has_stream(data, "Book") or ext in (".xls", ".xlt"):
        return "xls"
    if _has_stream(data, "PowerPoint Document") or ext in (".ppt", ".pps", ".pot"):
        raise UnsupportedFile(LEGACY_POWERPOINT)
    raise UnsupportedFile(LEGACY_WORD)


# -- text-like ------------------------------------------------------------------------------------

_HTML_START = re.compile(r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b", re.I | re.S)
_SVG_START = re.compile(r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*(?:<!doctype\s+svg[^>]*>\s*)?<svg\b", re.I | re.S)
_MD_HINTS = re.compile(r"^(?:#{1,6}[ \t]+\S|```|~~~|\[[^\]]+\]:\s|(?:\*|-|\+)[ \t]+\S.*\n(?:\*|-|\+)[ \t]+\S)", re.M)
_SETEXT = re.compile(r"^\S[^\n]*\n(?:=+|-{2,})[ \t]*$", re.M)


#: Header fields that open a message (RFC 5322 §3.6, RFC 2045 MIME-Version, RFC 5321 trace fields).
_MAIL_FIELDS = {
    "from",
    "to",
    "cc",
    "bcc",
    "subject",
    "date",
    "message-id",
    "mime-version",
    "received",
    "return-path",
    "delivered-to",
    "reply-to",
    "sender",
    "in-reply-to",
    "references",
    "content-type",
    "x-mailer",
    "user-agent",
}
_FIELD = re.compile(r"([A-Za-z][A-Za-z0-9-]*):")
#: The separator line of an mbox (RFC 4155): ``From `` then the envelope sender and a date.
_MBOX_FROM = re.compile(r"From \S+ .*\d\d:\d\d")


def _mail_kind(text: str) -> str | None:
    """``"mbox"`` when ``text`` opens with an mbox ``From `` line and a header, ``"eml"`` when it opens
    with a block of header fields of which at least three are the usual mail fields; else ``None``."""
    lines = text.split("\n", 40)[:40]
    mbox = bool(lines) and _MBOX_FROM.match(lines[0]) is not None
    names = []
    for line in lines[1:] if mbox else lines:
        line = line.rstrip("\r")
        if not line:
            break
        if line[0] in " \t":
            continue  # a folded header line
        m = _FIELD.match(line)
        if not m:
            return None
        names.append(m.group(1).lower())
    known = sum(n in _MAIL_FIELDS for n in names)
    if mbox:
        return "mbox" if known >= 1 or not names else None
    return "eml" if known >= 3 and {"from", "date", "subject", "message-id", "received"} & set(names) else None


def _text_kind(head: bytes, ext: str) -> str:
    if ext in _MAIL_EXT:
        return _MAIL_EXT[ext]
    if ext in _MARKDOWN_EXT:
        return "markdown"
    if ext in _HTML_EXT:
        return "html"
    if ext in _CSV_EXT:
        return "csv"
    if ext in _TEXT_EXT:
        return "text"
    text = _sniff_text(head[:HEAD_BYTES])
    mail = _mail_kind(text)
    if mail:
        return mail
    if ext == ".svg" or _SVG_START.match(text):
        raise UnsupportedFile("unsupported: an SVG image")
    if _HTML_START.match(text):
        return "html"
    if _MD_HINTS.search(text) or _SETEXT.search(text):
        return "markdown"
    if _looks_like_csv(text):
        return "csv"
    return "text"


def _sniff_text(sample: bytes) -> str:
    """Enough of a decoding to see markup and delimiters (all ASCII): the BOM's or UTF-16's encoding,
    else UTF-8 with replacement characters (a head may end inside a character)."""
    encoding, skip = sniff_encoding(sample)
    if encoding:
        return sample[skip:].decode(encoding, errors="replace")
    return sample.decode("utf-8", errors="replace")


def _looks_like_csv(text: str) -> bool:
    """At least two rows and every row (of the first 20 whole lines) with the same number (>= 2) of
    cells for one of the usual delimiters, read with the csv module so quoted delimiters count once."""
    lines = [ln for ln in text.splitlines()[:21] if ln.strip()]
    if len(lines) > 20:
        lines = lines[:20]
    elif len(lines) > 2 and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # the last line of a head may be cut
    if len(lines) < 2:
        return False
    for delimiter in (",", "\t", ";", "|"):
        try:
            widths = {len(row) for row in csv.reader(lines, delimiter=delimiter)}
        except csv.Error:
            continue
        if len(widths) == 1 and widths.pop() >= 2:
            return True
    return False
