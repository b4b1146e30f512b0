"""Bytes in, clean text with structure out: :func:`read_document` and :func:`detect_format`.

The real format is decided from the bytes (:func:`detect_format`), never from the extension alone: a
PDF renamed ``.txt`` is read as a PDF, a legacy ``.doc`` renamed ``.docx`` is refused as what it is.
Each reader (pdf, docx, pptx, xlsx, odt/ods/odp, epub, rtf, eml/mbox/msg, zip, markdown, html, csv,
TNEF winmail.dat, text, image by OCR) returns a
:class:`~knowledge.ingest.document.Document`: sections with pages and heading paths, tables with a
header row in ``Document.tables``, and what it skipped named in ``warnings``.

Everywhere: ``\n`` line ends, no NUL characters or lone surrogates, no invisible format characters
(zero-width space, soft hyphen, ...), no trailing whitespace, blocks separated by one blank line.
Error messages do not name the file (the caller knows it and prefixes it where it shows the
message). What each reader keeps and leaves out: ``docs/ingestion.md``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import PurePath
from typing import BinaryIO, Literal, Union

from knowledge.errors import EmptyDocument, FileTooLarge, InvalidArgument, UnsupportedFile
from knowledge.ingest._archive import read_zip
from knowledge.ingest._compose import MAX_DEPTH
from knowledge.ingest._crypto import decrypt_odf, decrypt_ooxml, odf_encrypted
from knowledge.ingest._csv import read_csv
from knowledge.ingest._detect import HEAD_BYTES, LEGACY_WORD, detect_format, misnamed_text
from knowledge.ingest._docx import read_docx
from knowledge.ingest._epub import read_epub
from knowledge.ingest._html import read_html
from knowledge.ingest._mail import read_eml, read_mbox, read_msg
from knowledge.ingest._markdown import read_markdown
from knowledge.ingest._ocr import read_image
from knowledge.ingest._odf import read_odf
from knowledge.ingest._pdf import read_pdf
from knowledge.ingest._pptx import read_pptx
from knowledge.ingest._rtf import read_rtf
from knowledge.ingest._text import Builder, decode
from knowledge.ingest._tnef import read_tnef
from knowledge.ingest._xlsx import read_xls, read_xlsx
from knowledge.ingest._zipsafe import Budget
from knowledge.ingest.document import FORMATS, Document, Section

__all__ = ["FORMATS", "HEAD_BYTES", "LEGACY_WORD", "Document", "Section", "detect_format", "read_document"]

#: Extensions of ZIP-based document formats -> what a plain ZIP under that name is not.
_PACKAGE_EXTENSIONS = {
    ".docx": "a Word document",
    ".pptx": "a PowerPoint deck",
    ".xlsx": "an Excel workbook",
    ".odt": "an OpenDocument text",
    ".ods": "an OpenDocument spreadsheet",
    ".odp": "an OpenDocument presentation",
    ".epub": "an EPUB e-book",
}

Source = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", BinaryIO]


def read_document(
    source: Source,
    name: str | None = None,
    *,
    password: str | None = None,
    max_bytes: int | None = None,
    ocr: Literal["auto", "off"] = "auto",
    on_page: Callable[[int, int], None] | None = None,
    tables: Literal["auto", "off"] = "auto",
) -> Document:
    """Read a document of any supported format into clean text with provenance.

    Args:
        source: the file's bytes; a path (``str`` or ``os.PathLike`` — a ``str`` is always a path,
            never the text itself); or a binary file object, read from its current position.
        name: the file's name (only its extension is used, to choose between the text-like formats);
            defaults to the path's name when ``source`` is a path.
        password: for an encrypted PDF whose empty password does not open it, or an encrypted Office
            file (.docx/.xlsx/.pptx; Excel's default password is tried first). Not passed to parts.
        max_bytes: refuse files larger than this many bytes (``None``: no limit). Checked before
            reading where the size is known (paths, seekable streams). Also the most the ZIP archives
            in the file (nested ones included) may inflate to together (``None``:
            :data:`~knowledge.ingest._zipsafe.DEFAULT_MAX_BYTES`, 100 MB).
        ocr: ``"auto"`` reads PDF pages without a text layer and image files by OCR; ``"off"``
            reports those pages and refuses images.
        on_page: ``on_page(done, total)`` while OCR reads pages (``done = 0`` before the first);
            not called for files that need no OCR.
        tables: ``"auto"`` finds the tables of PDFs and writes them as Markdown rows
            (:mod:`knowledge.ingest._pdftables`); ``"off"`` reads PDF pages as text only.

    Returns:
        A :class:`Document` whose sections cover its text (see there for the offsets).

    Raises:
        FileTooLarge: the file is over ``max_bytes`` (the message gives both sizes).
        UnsupportedFile: a format no reader handles (legacy .doc/.xls/.ppt, GIF, tar, ...), an
            image while ``ocr="off"``, or a damaged file, with the reason.
        OcrUnavailable: (an ``UnsupportedFile``) the file needs OCR and rapidocr-onnxruntime (or
            pypdfium2) cannot be loaded; the message names the package.
        PasswordRequired: an encrypted PDF, Office or OpenDocument file and no password, or a wrong
            one (the message says which).
        EmptyDocument: the file has no text: empty, whitespace only, a PDF without a text layer
            (``"no text layer (scanned? OCR needed)"`` with ``ocr="off"``), or a scan or image where
            OCR finds nothing (``"no text found, even by OCR"``).
        InvalidArgument: ``source`` is not bytes, a path or a binary stream; the path cannot be
            read; ``max_bytes`` is negative.
    """
    if ocr not in ("auto", "off"):
        raise InvalidArgument(f"ocr must be 'auto' or 'off', got {ocr!r}.")
    if tables not in ("auto", "off"):
        raise InvalidArgument(f"tables must be 'auto' or 'off', got {tables!r}.")
    if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 0):
        raise InvalidArgument(f"max_bytes must be a whole number of bytes >= 0 or None, got {max_bytes!r}.")
    data, path_name = load_source(source, max_bytes)
    name = name if name is not None else path_name
    return _read(data, name, password=password, ocr=ocr, on_page=on_page, depth=0, budget=Budget(max_bytes), tables=tables)


def _read(
    data: bytes,
    name: str | None,
    *,
    password: str | None,
    ocr: Literal["auto", "off"],
    on_page: Callable[[int, int], None] | None,
    depth: int,
    budget: Budget,
    tables: Literal["auto", "off"] = "auto",
) -> Document:
    """One file or embedded part; ``budget``: what the document's ZIP archives may still inflate."""
    if not data.strip(b" \t\r\n\x00\x0b\x0c"):
        raise EmptyDocument("no text: the file is empty")
    fmt = detect_format(data, name)
    if fmt == "encrypted-ooxml":
        data = decrypt_ooxml(data, password)
        fmt = detect_format(data, name)
        if fmt not in ("docx", "pptx", "xlsx"):
            raise UnsupportedFile("unsupported: the decrypted file is not a Word, Excel or PowerPoint document")

    def read_part(part: bytes, part_name: str) -> Document:
        if depth + 1 > MAX_DEPTH:
            raise UnsupportedFile(f"not read: parts nested more than {MAX_DEPTH} deep")
        return _read(part, part_name, password=None, ocr=ocr, on_page=None, depth=depth + 1, budget=budget, tables=tables)

    if fmt == "pdf":
        return read_pdf(data, name=name, password=password, ocr=ocr, on_page=on_page, tables=tables)
    if fmt == "image":  # issue 16: images are read by OCR
        if ocr == "off":
            raise UnsupportedFile(
                "unsupported: an image (OCR is off: the setting ingest.ocr or the template's ocr is 'off')"
            )

        return read_image(data, on_page=on_page)
    if fmt == "docx":
        return read_docx(data, read_part)
    if fmt == "pptx":
        return read_pptx(data, read_part)
    if fmt == "xlsx":
        return read_xlsx(data, read_part)
    if fmt == "xls":
        return read_xls(data)
    if fmt in ("odt", "ods", "odp"):
        if odf_encrypted(data):
            data = decrypt_odf(data, password)
        return read_odf(data, fmt, read_part)
    if fmt == "epub":
        return read_epub(data)
    if fmt == "rtf":
        return read_rtf(data)
    if fmt == "eml":
        return read_eml(data, read_part)
    if fmt == "mbox":
        return read_mbox(data, read_part)
    if fmt == "msg":
        return read_msg(data, read_part)
    if fmt == "tnef":
        return read_tnef(data, read_part)
    if fmt == "zip":
        doc = read_zip(data, read_part, budget)
        ext = PurePath(name).suffix.lower() if name else ""
        if ext in _PACKAGE_EXTENSIONS:
            doc.warnings.insert(
                0,
                f"named {ext} but it is a plain ZIP archive, not {_PACKAGE_EXTENSIONS[ext]}: its files were read one by one",
            )
        return doc
    if fmt == "csv":
        doc = read_csv(data)  # decoded block by block: a large file is never held as text twice
    elif fmt == "markdown":
        doc = read_markdown(decode(data))
    elif fmt == "html":
        doc = read_html(decode(data))
    else:
        doc = read_text(decode(data))
    note = misnamed_text(name)
    if note:
        doc.warnings.insert(0, note)
    return doc


def read_text(text: str) -> Document:
    """Plain text as one section (line ends normalised, blank-line runs reduced to one).

    Raises:
        EmptyDocument: whitespace only.
    """
    builder = Builder()
    builder.add(text)
    return builder.build("text", empty="no text: the file has only whitespace")


def load_source(source: Source, max_bytes: int | None) -> tuple[bytes, str | None]:
    """``(the bytes of source, the name of its path or stream or None)``, refusing more than
    ``max_bytes``. Raises ``FileTooLarge`` and ``InvalidArgument`` as :func:`read_document` does."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        _check_size(len(data), max_bytes)
        return data, None
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            _check_size(os.stat(path).st_size, max_bytes)
            with open(path, "rb") as fh:
                data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
        except OSError as exc:
            raise InvalidArgument(f"{path} cannot be read: {exc.strerror or exc}") from exc
        _check_size(len(data), max_bytes, exact=False)  # it grew since stat(): we read max + 1
        return data, PurePath(path).name
    if hasattr(source, "read"):
        _check_size(_remaining(source), max_bytes)
        data = source.read() if max_bytes is None else source.read(max_bytes + 1)
        if isinstance(data, str):
            raise InvalidArgument("read_document needs a binary stream (open the file with 'rb'), got text.")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidArgument(f"The stream's read() returned {type(data).__name__}, not bytes.")
        data = bytes(data)
        _check_size(len(data), max_bytes, exact=False)  # unknown size: we read max + 1
        stream_name = getattr(source, "name", None)
        return data, PurePath(stream_name).name if isinstance(stream_name, str) else None
    raise InvalidArgument(f"read_document reads bytes, a path or a binary stream; got {type(source).__name__}.")


def _remaining(stream) -> int | None:
    """Bytes left in a seekable stream, without moving it; ``None`` when it cannot tell."""
    try:
        if not stream.seekable():
            return None
        here = stream.tell()
        end = stream.seek(0, io.SEEK_END)
        stream.seek(here)
        return max(end - here, 0)
    except (AttributeError, OSError, ValueError):
        return None


def _check_size(size: int | None, max_bytes: int | None, *, exact: bool = True) -> None:
    if size is None or max_bytes is None or size <= max_bytes:
        return
    got = f"{_mb(size)} ({size:,} bytes)" if exact else f"more than {_mb(max_bytes)} ({max_bytes:,} bytes)"
    raise FileTooLarge(f"The file is {got}, over the limit of {_mb(max_bytes)} ({max_bytes:,} bytes).")


def _mb(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.1f} kB"
