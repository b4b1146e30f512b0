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

from knowledge.ingest._text import clean_line

_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_TARGET = re.compile(rb'Target="([^"]+)"')

#: Streams of a Compound File that make it a legacy Office file of its own, with the extension.
LEGACY_STREAMS = (("WordDocument", ".doc"), ("Workbook", ".xls"), ("Book", ".xls"),
                  ("PowerPoint Document", ".ppt"))


def ooxml_embeddings(zf: zipfile.ZipFile, part_prefix: str,
                     warnings: list[str] | None = None) -> list[tuple[str, bytes]]:
    """The files embedded under ``{part_prefix}embeddings/`` (``part_prefix`` is ``"word/"``,
    ``"ppt/"`` or ``"xl/"``) as ``(display name, bytes)``, in part-name order, OLE objects unwrapped
    (:func:`unwrap_ole`). Chart data workbooks are left out. What cannot be unwrapped is named in
    ``warnings`` (when given); nothing is raised for a damaged object."""
    prefix = part_prefix.rstrip("/") + "/embeddings/"
    chart_data = _chart_data(zf, part_prefix)
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


def _chart_data(zf: zipfile.ZipFile, part_prefix: str) -> set[str]:
    """Part names that charts' relationships point at (their data workbooks)."""
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


def unwrap_ole(blob: bytes, name: str, warnings: list[str] | None = None) -> tuple[str, bytes] | None:
    """``(display name, bytes)`` of the file inside an embedded part called ``name``: the part itself
    when it is not a Compound File; else the file the OLE object holds (see the module's text).
    ``None`` (the reason appended to ``warnings``) for an object that holds no file: an equation,
    a picture only, or a damaged Compound File."""
    if not blob.startswith(_CFB):
        return name, blob
    stem = posixpath.splitext(name)[0]
    try:
        import olefile  # noqa: PLC0415 - OLE objects only

        with olefile.OleFileIO(io.BytesIO(blob)) as ole:
            streams = {"/".join(entry): entry for entry in ole.listdir(streams=True, storages=False)}
            if "\x01Ole10Native" in streams:
                return parse_ole10native(ole.openstream("\x01Ole10Native").read(), stem)
            for stream, ext in (("Package", ".zip"), ("CONTENTS", ".pdf"), ("EmbeddedOdf", ".odt")):
                if stream in streams:
                    data = ole.openstream(stream).read()
                    if stream != "CONTENTS" or data.startswith(b"%PDF"):
                        return stem + ext, data
            for stream, ext in LEGACY_STREAMS:
                if stream in streams:
                    return stem + ext, blob
            kind = _user_type(ole) or "unknown kind"
    except Exception as exc:  # olefile raises OSError, struct.error, IndexError on damaged files
        if warnings is not None:
            warnings.append(f"embedded {name}: not read: damaged OLE object ({type(exc).__name__}: {exc})")
        return None
    if warnings is not None:
        warnings.append(f"embedded {name}: not read: an OLE object of a kind without text ({kind})")
    return None


def _user_type(ole) -> str | None:
    """The object's user type from its ``\\x01CompObj`` stream ("Microsoft Equation 3.0")."""
    if not ole.exists("\x01CompObj"):
        return None
    data = ole.openstream("\x01CompObj").read()
    if len(data) < 32:
        return None
    (size,) = struct.unpack_from("<I", data, 28)
    if not 0 < size < 256 or 32 + size > len(data):
        return None
    return clean_line(data[32:32 + size].rstrip(b"\x00").decode("cp1252", "replace")) or None


def parse_ole10native(data: bytes, stem: str) -> tuple[str, bytes]:
    """The Packager's ``\\x01Ole10Native`` stream as ``(file name, bytes)`` ([MS-OLEDS] 2.3.6 and
    the Packager's layout: size, flags, label, source path, reserved, temp path, data size, data).
    A stream of another layout (only the size and the data) is returned whole, named ``stem``."""
    try:
        (total,) = struct.unpack_from("<I", data, 0)
        pos = 6
        label, pos = _cstring(data, pos)
        _source, pos = _cstring(data, pos)
        pos += 4  # reserved: 0x00030000 (embedded) or 0x00010000 (linked)
        (temp_len,) = struct.unpack_from("<I", data, pos)
        pos += 4
        temp = data[pos:pos + temp_len].rstrip(b"\x00")
        pos += temp_len
        (size,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if pos + size > len(data) or not label:
            raise ValueError("not the Packager's layout")
        file_name = label.decode("cp1252", "replace") or posixpath.basename(temp.decode("cp1252", "replace"))
        return clean_line(file_name.replace("\\", "/").rsplit("/", 1)[-1]) or stem, data[pos:pos + size]
    except (struct.error, ValueError):
        (total,) = struct.unpack_from("<I", data, 0) if len(data) >= 4 else (0,)
        return stem, data[4:4 + total] if 0 < total <= len(data) - 4 else data[4:]


def _cstring(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.index(b"\x00", pos)
    return data[pos:end], end + 1
