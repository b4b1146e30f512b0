"""Files embedded in Office Open XML packages (``word/embeddings/``, ``ppt/embeddings/``,
``xl/embeddings/``), unwrapped to the file a person dropped into the document.

An embedded Office file is stored as is (``Microsoft_Word_Document.docx``); anything else is an OLE
object, a Compound File (olefile) holding it: the Packager's ``\\x01Ole10Native`` stream (original
file name + bytes, [MS-OLEDS] 2.3.6), a ``Package`` stream (an OOXML file), Acrobat's ``CONTENTS``
stream (a PDF), OpenOffice's ``EmbeddedOdf``, or a legacy Word/Excel/PowerPoint file that is the
Compound File itself. Equations and objects of other kinds are named in the warnings. Workbooks
that only hold a chart's data (referenced from ``charts/_rels``) are not files of their own and are
left out. The caller reads each ``(display name, bytes)`` with ``read_part``.
"""

from __future__ import annotations

import io
import posixpath
import re
import struct
import zipfile

import olefile

from knowledge.errors import KnowledgeError, in_words
from knowledge.ingest._detect import detect_format
from knowledge.ingest._text import clean_line

_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_TARGET = re.compile(rb'Target="([^"]+)"')

#: Streams of a Compound File that make it a legacy Office file of its own, with the extension.
LEGACY_STREAMS = (("WordDocument", ".doc"), ("Workbook", ".xls"), ("Book", ".xls"), ("PowerPoint Document", ".ppt"))


def ooxml_embeddings(zf: zipfile.ZipFile, part_prefix: str, warnings: list[str] | None = None) -> list[tuple[str, bytes]]:
    """The files embedded under ``{part_prefix}embeddings/`` (``part_prefix`` is ``"word/"``,
    ``"ppt/"`` or ``"xl/"``) as ``(display name, bytes)``, in part-name order, OLE objects unwrapped
    (:func:`unwrap_ole`). Chart data workbooks are left out. What cannot be unwrapped is named in
    ``warnings`` (when given); nothing is raised for a damaged object."""
    prefix = part_prefix.rstrip("/") + "/embeddings/"
    chart_data = chart_data_parts(zf, part_prefix)
    out: list[tuple[str, bytes]] = []
    for info in sorted(zf.infolist(), key=lambda i: i.filename):
        if info.is_dir() or not info.filename.startswith(prefix) or info.filename in chart_data:
            continue
        try:
            blob = zf.read(info)
        except Exception as exc:  # zlib.error, BadZipFile (CRC), NotImplementedError
            if warnings is not None:
                warnings.append(f"embedded {posixpath.basename(info.filename)}: not read: damaged ({exc})")
            continue
        found = unwrap_ole(blob, posixpath.basename(info.filename), warnings)
        if found is not None:
            out.append(found)
    return out


def chart_data_parts(zf: zipfile.ZipFile, part_prefix: str) -> set[str]:
    """Part names (``word/embeddings/Microsoft_Excel_Worksheet.xlsx``) that the relationships of the
    charts under ``part_prefix`` point at: their data workbooks, not files of their own."""
    found: set[str] = set()
    charts_rels = part_prefix.rstrip("/") + "/charts/_rels/"
    for name in zf.namelist():
        if name.startswith(charts_rels) and name.endswith(".rels"):
            try:
                rels = zf.read(name)
            except Exception:
                continue
            base = posixpath.dirname(posixpath.dirname(name))  # word/charts
            for target in _TARGET.findall(rels):
                found.add(posixpath.normpath(posixpath.join(base, target.decode("utf-8", "replace"))))
    return found


def unwrap_ole(
    blob: bytes, name: str, warnings: list[str] | None = None, *, label: str | None = None
) -> tuple[str, bytes] | None:
    """``(display name, bytes)`` of the file inside an embedded part called ``name``: the part itself
    when it is not a Compound File; else the file the OLE object holds (see the module's text).
    Stream names are matched case-insensitively ([MS-CFB] §2.6.4). A file taken from a stream is
    named after ``label`` (the object's own name, PowerPoint's ``p:oleObj/@name``) when given, else
    after the part (``oleObject1.bin`` -> ``oleObject1.pdf``); a Packager object by the file name it
    carries. A Compound File olefile cannot open is returned as it is when its bytes name a legacy
    workbook or an Outlook message (xlrd and extract-msg read it with parsers of their own).
    ``None`` (the reason appended to ``warnings``) for an object that holds no file: an equation,
    a picture only, or a damaged Compound File."""
    if not blob.startswith(_CFB):
        return name, blob
    stem = posixpath.splitext(label or name)[0] or posixpath.splitext(name)[0]
    try:
        with olefile.OleFileIO(io.BytesIO(blob)) as ole:
            found = _inside(ole, blob, stem)
            kind = None if found is not None else _user_type(ole) or "unknown kind"
    except Exception as exc:  # olefile raises OSError, struct.error, IndexError on damaged files
        if _readable_as_is(blob):
            return name, blob
        if warnings is not None:
            warnings.append(f"embedded {name}: not read: damaged OLE object ({in_words(exc)})")
        return None
    if found is None and warnings is not None:
        warnings.append(f"embedded {name}: not read: an OLE object of a kind without text ({kind})")
    return found


def _inside(ole: olefile.OleFileIO, blob: bytes, stem: str) -> tuple[str, bytes] | None:
    """The file an open Compound File holds (see :func:`unwrap_ole`), ``None`` for none."""
    streams = {"/".join(entry).lower(): entry for entry in ole.listdir(streams=True, storages=False)}
    if "\x01ole10native" in streams:
        return parse_ole10native(ole.openstream(streams["\x01ole10native"]).read(), stem)
    for stream, ext in (("package", ".zip"), ("contents", ".pdf"), ("embeddedodf", ".odt")):
        if stream in streams:
            data = ole.openstream(streams[stream]).read()
            if stream != "contents" or _is_pdf(data):
                return (stem if stem.lower().endswith(ext) else stem + ext), data
    for stream, ext in LEGACY_STREAMS:
        if stream.lower() in streams:
            return stem + ext, blob
    return None


def _is_pdf(data: bytes) -> bool:
    try:
        return detect_format(data[:4096]) == "pdf"
    except KnowledgeError:
        return False


def _readable_as_is(blob: bytes) -> bool:
    """True when a Compound File olefile refused is a format whose reader parses it by itself."""
    try:
        return detect_format(blob) in ("xls", "msg", "encrypted-ooxml")
    except KnowledgeError:
        return False


def _user_type(ole: olefile.OleFileIO) -> str | None:
    """The object's user type from its ``\\x01CompObj`` stream ("Microsoft Equation 3.0")."""
    if not ole.exists("\x01CompObj"):
        return None
    data = ole.openstream("\x01CompObj").read()
    if len(data) < 32:
        return None
    (size,) = struct.unpack_from("<I", data, 28)
    if not 0 < size < 256 or 32 + size > len(data):
        return None
    return clean_line(data[32 : 32 + size].rstrip(b"\x00").decode("cp1252", "replace")) or None


def parse_ole10native(data: bytes, stem: str) -> tuple[str, bytes]:
    """The Packager's ``\\x01Ole10Native`` stream as ``(file name, bytes)`` ([MS-OLEDS] 2.3.6 and
    the Packager's layout: size, flags, label, source path, reserved, temp path, data size, data).
    A stream of another layout (only the size and the data) is returned whole, named ``stem``."""
    try:
        pos = 6  # the stream's size, then two bytes of flags
        label, pos = _cstring(data, pos)
        source, pos = _cstring(data, pos)
        pos += 4  # reserved: 0x00030000 (embedded) or 0x00010000 (linked)
        (temp_len,) = struct.unpack_from("<I", data, pos)
        pos += 4
        temp = data[pos : pos + temp_len].rstrip(b"\x00")
        pos += temp_len
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + size > len(data):
            raise ValueError("not the Packager's layout")
        for raw in (label, temp, source):
            file_name = clean_line(raw.decode("cp1252", "replace").replace("\\", "/").rsplit("/", 1)[-1])
            if file_name:
                return file_name, data[pos : pos + size]
        return stem, data[pos : pos + size]
    except (struct.error, ValueError):
        (total,) = struct.unpack_from("<I", data, 0) if len(data) >= 4 else (0,)
        return stem, data[4 : 4 + total] if 0 < total <= len(data) - 4 else data[4:]


def _cstring(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.index(b"\x00", pos)
    return data[pos:end], end + 1
