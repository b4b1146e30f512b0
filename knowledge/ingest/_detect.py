"""Which reader a file needs, decided from its bytes (magic numbers), not from its name.

The name only chooses between the text-like formats (Markdown, HTML, CSV, plain text) and breaks
ties a ZIP's first bytes cannot. Signatures come from the formats' specifications and the
``file(1)`` magic database: PDF ISO 32000-1 §7.5.2 (``%PDF-`` within the first 1024 bytes, as readers
accept), ZIP APPNOTE §4.3.7, OLE2 [MS-CFB] §2.2, PNG, JPEG, GIF, TIFF, WebP/RIFF, ISO-BMFF ``ftyp``.
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

#: How many leading bytes :func:`detect_format` needs to decide, except for a ZIP (see there).
HEAD_BYTES = 8192

LEGACY_WORD = "unsupported: legacy Word format (.doc) — save it as .docx"

_MARKDOWN_EXT = {".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdwn", ".mdx", ".rmd"}
_HTML_EXT = {".html", ".htm", ".xhtml", ".shtml"}
_CSV_EXT = {".csv", ".tsv", ".tab"}
_TEXT_EXT = {".txt", ".text", ".log", ".rst", ".adoc", ".asciidoc", ".org", ".tex", ".json", ".jsonl",
             ".yaml", ".yml", ".toml", ".ini", ".cfg", ".conf", ".py", ".js", ".ts", ".java", ".c",
             ".h", ".cpp", ".rs", ".go", ".rb", ".sh", ".sql", ".srt", ".vtt"}

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
    (b"{\\rtf", "an RTF document — save it as .docx"),
    (b"%!PS", "a PostScript file — save it as PDF"),
    (b"AT&TFORM", "a DjVu document"),
)

#: ZIP members whose presence tells what an OOXML / ODF / other ZIP container is.
_ZIP_KINDS: tuple[tuple[str, str], ...] = (
    ("word/document.xml", "docx"),
    ("xl/workbook.xml", "an Excel workbook (.xlsx)"),
    ("ppt/presentation.xml", "a PowerPoint presentation (.pptx)"),
    ("visio/document.xml", "a Visio drawing (.vsdx)"),
)
_ODF = re.compile(rb"mimetypeapplication/vnd\.oasis\.opendocument\.([a-z-]+)")
_ODF_NAMES = {"text": "an OpenDocument text (.odt) — save it as .docx",
              "spreadsheet": "an OpenDocument spreadsheet (.ods)",
              "presentation": "an OpenDocument presentation (.odp)"}


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
    """The reader ``head`` needs: ``"pdf"``, ``"docx"``, ``"markdown"``, ``"html"``, ``"csv"``, ``"text"``
    or ``"image"`` (PNG, JPEG, TIFF, WebP, BMP: read by OCR).

    Args:
        head: the file's first bytes (at least :data:`HEAD_BYTES` of them when the file is longer), or
            the whole file. For a ZIP, the whole file lets the central directory decide; with only a
            head the local file headers in it are read, and a ``.docx`` name breaks a tie.
        name: the file's name, used only to choose between the text-like formats (by extension, else
            by content) and for a ZIP the head cannot decide.

    Raises:
        UnsupportedFile: the bytes are a format no reader handles, named in the message: legacy Word
            (``"unsupported: legacy Word format (.doc) — save it as .docx"``) and other OLE2 files,
            other ZIP containers (xlsx, pptx, odt, epub, plain ZIP archives), images OCR does not read
            (GIF, HEIF/AVIF, icons, Photoshop), audio, video,
            archives, programs, and binary data that is not text in any encoding.
    """
    ext = PurePath(name).suffix.lower() if name else ""
    if _PDF_HEADER.search(head[:1024]):
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_kind(head, ext)
    if head.startswith(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"):
        raise UnsupportedFile(_ole2_kind(head, ext))
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
        raise UnsupportedFile("unsupported: binary data, not text in any known encoding")
    return _text_kind(head, ext)


def is_ocr_image(head: bytes) -> bool:
    """True for the image formats OCR reads (:mod:`knowledge.ingest._ocr`): PNG, JPEG, TIFF (both
    byte orders), WebP (RIFF ``WEBP``) and BMP (``BM`` with zero reserved fields)."""
    return (head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*"))
            or (head.startswith(b"RIFF") and head[8:12] == b"WEBP")
            or (head.startswith(b"BM") and len(head) >= 14 and head[6:10] == b"\x00\x00\x00\x00"))


def _riff_or_bmff(head: bytes) -> str | None:
    if head.startswith(b"RIFF") and len(head) >= 12:
        return {b"WEBP": "a WebP image", b"WAVE": "a WAV audio file",
                b"AVI ": "an AVI video"}.get(head[8:12], "a RIFF media file")
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"heic", b"heix", b"mif1", b"msf1", b"avif"):
            return "a HEIF/AVIF image"
        return "an MP4/QuickTime audio or video file"
    return None


def _zip_kind(data: bytes, ext: str) -> str:
    """``"docx"`` or UnsupportedFile naming the container."""
    names: list[str] | None = None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError):
        names = None  # only a head, or a damaged archive: look at the local headers we have
    odf = _ODF.search(data[:200])
    if odf:
        kind = odf.group(1).decode("ascii")
        raise UnsupportedFile(f"unsupported: {_ODF_NAMES.get(kind, 'an OpenDocument file (.od*)')}")
    if data[30:58] == b"mimetypeapplication/epub+zip":
        raise UnsupportedFile("unsupported: an EPUB e-book")
    if names is not None:
        found = set(names)
        for member, kind in _ZIP_KINDS:
            if member in found:
                return _zip_result(kind)
        if any(n.startswith("word/") for n in names) and "[Content_Types].xml" in found:
            return "docx"  # an OOXML word package whose main part has another name
        raise UnsupportedFile("unsupported: a ZIP archive (not a Word document); unpack it and add its files")
    for member, kind in _ZIP_KINDS:  # local file headers: signature, 26 bytes of fields, the name
        prefix = member.split("/")[0].encode() + b"/"
        if re.search(rb"PK\x03\x04.{26}" + re.escape(prefix), data, re.S):
            return _zip_result(kind)
    if ext in (".docx", ".docm", ".dotx", ".dotm"):
        return "docx"  # the reader opens the whole file and says what it really is
    raise UnsupportedFile("unsupported: a ZIP archive (not a Word document); unpack it and add its files")


def _zip_result(kind: str) -> str:
    if kind == "docx":
        return "docx"
    raise UnsupportedFile(f"unsupported: {kind}")


def _ole2_kind(data: bytes, ext: str) -> str:
    """The message for an OLE2 compound file: legacy Word unless its streams say otherwise."""
    if _has_stream(data, "EncryptedPackage"):
        return ("unsupported: a password-protected Office document (encrypted .docx/.xlsx/.pptx) —"
                " remove the password in Office and save it again")
    if _has_stream(data, "WordDocument"):
        return LEGACY_WORD
    if _has_stream(data, "Workbook") or _has_stream(data, "Book") or ext in (".xls", ".xlt"):
        return "unsupported: legacy Excel format (.xls)"
    if _has_stream(data, "PowerPoint Document") or ext in (".ppt", ".pps", ".pot"):
        return "unsupported: legacy PowerPoint format (.ppt)"
    if ext == ".msg":
        return "unsupported: an Outlook message (.msg)"
    return LEGACY_WORD


# -- text-like ------------------------------------------------------------------------------------

_HTML_START = re.compile(r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b",
                         re.I | re.S)
_SVG_START = re.compile(r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*(?:<!doctype\s+svg[^>]*>\s*)?<svg\b",
                        re.I | re.S)
_MD_HINTS = re.compile(r"^(?:#{1,6}[ \t]+\S|```|~~~|\[[^\]]+\]:\s|(?:\*|-|\+)[ \t]+\S.*\n(?:\*|-|\+)[ \t]+\S)", re.M)
_SETEXT = re.compile(r"^\S[^\n]*\n(?:=+|-{2,})[ \t]*$", re.M)


def _text_kind(head: bytes, ext: str) -> str:
    if ext in _MARKDOWN_EXT:
        return "markdown"
    if ext in _HTML_EXT:
        return "html"
    if ext in _CSV_EXT:
        return "csv"
    if ext in _TEXT_EXT:
        return "text"
    text = _sniff_text(head[:HEAD_BYTES])
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
