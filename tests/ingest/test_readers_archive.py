"""ZIP archives (members read by their own format, bombs and traversal refused) and files embedded
in Word documents (OLE packages)."""

from __future__ import annotations

import io
import struct
import zipfile

import docx
import olefile
import pytest

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest import read_document
from knowledge.ingest._archive import MAX_RATIO
from knowledge.ingest._embedded import parse_ole10native, unwrap_ole
from tests.helpers.chat import pdf_bytes


def make_zip(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def word(heading: str, text: str) -> bytes:
    d = docx.Document()
    d.add_heading(heading, 1)
    d.add_paragraph(text)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def section_of(doc, needle: str):
    at = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= at < s.char_end)


def test_members_of_several_formats_are_read_with_their_path_as_provenance():
    data = make_zip(
        {
            "docs/": b"",
            "docs/a.pdf": pdf_bytes(["first", "page two OSPREY-12"]),
            "docs/b.docx": word("Scope", "PLOVER-9 in scope"),
            "notes.md": b"# Notes\n\nWREN-4 remembered\n",
            "__MACOSX/docs/._a.pdf": b"junk",
            ".DS_Store": b"\x00\x00\x00\x01Bud1",
        }
    )
    doc = read_document(data, "bundle.zip")
    assert doc.format == "zip"
    pdf = section_of(doc, "OSPREY-12")
    assert pdf.heading == "docs/a.pdf" and pdf.page == 2
    assert section_of(doc, "PLOVER-9").heading == "docs/b.docx > Scope"
    assert section_of(doc, "WREN-4").heading == "notes.md > Notes"
    assert "File: docs/a.pdf" in doc.text and "Bud1" not in doc.text and "junk" not in doc.text
    assert any("2 system files skipped" in w for w in doc.warnings), doc.warnings


@pytest.mark.slow
def test_zip_bomb_traversal_and_encrypted_members_are_refused_while_the_rest_goes_on():
    data = make_zip(
        {
            "zeros.txt": b"\x00" * (50 * 1024 * 1024),  # ~50 kB compressed: over 100:1 past 1 MB
            "../evil.txt": b"outside the folder",
            "/etc/passwd.txt": b"absolute",
            "secret.txt": b"locked text",
            "ok.txt": b"FINCH-8 is fine",
        }
    )
    # mark secret.txt as encrypted by hand (zipfile cannot write encrypted members): bit 0 of the
    # general purpose flags, in its local header and its central directory entry
    raw = bytearray(data)
    name = b"secret.txt"
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        pos = 0
        while (pos := raw.find(sig, pos)) != -1:
            name_at = 30 if sig == b"PK\x03\x04" else 46
            n = struct.unpack_from("<H", raw, pos + (26 if sig == b"PK\x03\x04" else 28))[0]
            if raw[pos + name_at : pos + name_at + n] == name:
                raw[pos + flag_at] |= 0x01
            pos += 4
    doc = read_document(bytes(raw), "mixed.zip")
    assert "FINCH-8 is fine" in doc.text
    joined = "\n".join(doc.warnings)
    assert "zeros.txt: not read: compressed" in joined and f"{MAX_RATIO}:1" in joined
    assert "../evil.txt: not read: a path leaving the archive's folder" in joined
    assert "/etc/passwd.txt: not read: an absolute path" in joined
    assert "secret.txt: not read: encrypted" in joined
    assert "outside the folder" not in doc.text and "locked text" not in doc.text


def test_nested_zip_is_read_with_both_paths():
    inner = make_zip({"deep/c.txt": b"HERON-21 deep inside"})
    doc = read_document(make_zip({"inner.zip": inner, "top.txt": b"top level"}), "outer.zip")
    assert section_of(doc, "HERON-21").heading == "inner.zip > deep/c.txt"


def test_archive_where_nothing_reads_is_empty_with_the_reasons():
    with pytest.raises(EmptyDocument, match=r"nothing in the archive could be read \(\.\./x\.txt: not read"):
        read_document(make_zip({"../x.txt": b"text"}), "a.zip")


def test_office_package_without_its_main_part_is_damaged_not_an_archive():
    with pytest.raises(UnsupportedFile, match="damaged: an Office document package"):
        read_document(make_zip({"[Content_Types].xml": b"<Types/>", "_rels/.rels": b"<Relationships/>"}), "a.docx")


def test_damaged_zip_is_refused_with_a_reason():
    data = make_zip({"a.txt": b"hello there " * 100})
    with pytest.raises((UnsupportedFile, EmptyDocument)):
        read_document(data[: len(data) // 2], "a.zip")


# -- files embedded in Word documents ----------------------------------------------------------


def ole10native(file_name: str, payload: bytes) -> bytes:
    """The Packager's Ole10Native stream for ``file_name``."""
    label = file_name.encode() + b"\x00"
    path = f"C:\\tmp\\{file_name}".encode() + b"\x00"
    body = (
        b"\x02\x00"
        + label
        + path
        + b"\x00\x00\x03\x00"
        + struct.pack("<I", len(path))
        + path
        + struct.pack("<I", len(payload))
        + payload
    )
    return struct.pack("<I", len(body)) + body


def test_ole10native_stream_gives_the_file_name_and_bytes():
    assert parse_ole10native(ole10native("notes.txt", b"KITE-3 text"), "oleObject1") == ("notes.txt", b"KITE-3 text")
    assert unwrap_ole(b"%PDF-1.4 not ole", "a.pdf") == ("a.pdf", b"%PDF-1.4 not ole")


def test_docx_with_an_embedded_file_reads_it_under_its_name(tmp_path):
    """A Word document with a packaged text file (OLE object) and an embedded PDF part."""
    d = docx.Document()
    d.add_paragraph("Body before the objects")
    buf = io.BytesIO()
    d.save(buf)
    # an OLE compound file holding the packaged file: olefile writes only into an existing file's
    # streams, so start from a CFB that has an Ole10Native stream of the right size
    stream = ole10native("embedded notes.txt", b"KITE-3 lives in the package")
    cfb = _cfb_with_stream("\x01Ole10Native", stream)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("word/embeddings/oleObject1.bin", cfb)
        dst.writestr("word/embeddings/Report.pdf", pdf_bytes(["PETREL-6 in the pdf"]))
    doc = read_document(out.getvalue(), "with-objects.docx")
    assert "Body before the objects" in doc.text
    assert section_of(doc, "KITE-3").heading == "embedded notes.txt"
    assert "Embedded file: embedded notes.txt" in doc.text
    pdf = section_of(doc, "PETREL-6")
    assert pdf.heading == "Report.pdf" and pdf.page == 1


def _cfb_with_stream(name: str, data: bytes) -> bytes:
    """A minimal Compound File (version 3, 512-byte sectors) with one stream ``name`` stored in
    regular sectors (the stream is padded to at least 4096 bytes so no mini stream is needed)."""
    data = data + b"\x00" * max(0, 4096 - len(data))
    sectors = (len(data) + 511) // 512
    # sector 0: FAT, sector 1: directory, sectors 2..: stream
    fat = [0xFFFFFFFD, 0xFFFFFFFE] + [i + 1 for i in range(2, 2 + sectors - 1)] + [0xFFFFFFFE]
    fat += [0xFFFFFFFF] * (128 - len(fat))
    header = bytearray(512)
    header[0:8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    struct.pack_into("<HHHHH", header, 24, 0x3E, 3, 0xFFFE, 9, 6)
    struct.pack_into("<III", header, 44, 1, 1, 0)  # FAT sectors, first directory sector, transactions
    struct.pack_into("<IIIII", header, 56, 4096, 0xFFFFFFFE, 0, 0xFFFFFFFE, 0)
    struct.pack_into("<I", header, 76, 0)
    for i in range(1, 109):
        struct.pack_into("<I", header, 76 + 4 * i, 0xFFFFFFFF)

    def entry(entry_name: str, kind: int, start: int, size: int, child: int) -> bytes:
        raw = entry_name.encode("utf-16-le") + b"\x00\x00"
        e = bytearray(128)
        e[0 : len(raw)] = raw
        struct.pack_into("<HBB", e, 64, len(raw), kind, 1)
        struct.pack_into("<III", e, 68, 0xFFFFFFFF, 0xFFFFFFFF, child)
        struct.pack_into("<II", e, 116, start, size)
        return bytes(e)

    directory = entry("Root Entry", 5, 0xFFFFFFFE, 0, 1) + entry(name, 2, 2, len(data), 0xFFFFFFFF) + b"\x00" * 256
    body = bytes(header) + struct.pack("<128I", *fat) + directory + data
    body += b"\x00" * (-len(body) % 512)
    assert olefile.isOleFile(io.BytesIO(body))
    return body


def test_ole_streams_are_matched_whatever_their_case_and_named_after_the_object():
    pdf = pdf_bytes(["LARK-7 in the PDF"])
    name, data = unwrap_ole(_cfb_with_stream("Contents", pdf), "oleObject1.bin")
    assert name == "oleObject1.pdf" and data.startswith(pdf)
    name, _ = unwrap_ole(_cfb_with_stream("CONTENTS", pdf), "oleObject1.bin", label="Acrobat Document")
    assert name == "Acrobat Document.pdf"
    odf = b"PK\x03\x04 an OpenDocument text"
    assert unwrap_ole(_cfb_with_stream("EmbeddedOdf", odf), "oleObject2.bin")[0] == "oleObject2.odt"
    legacy = _cfb_with_stream("Workbook", b"\x09\x08" * 64)
    assert unwrap_ole(legacy, "oleObject3.bin") == ("oleObject3.xls", legacy)


def test_ole_objects_without_a_file_are_named_in_the_warnings():
    warnings: list[str] = []
    assert unwrap_ole(_cfb_with_stream("Equation Native", b"\x1c\x00" * 8), "oleObject4.bin", warnings) is None
    assert unwrap_ole(_cfb_with_stream("CONTENTS", b"not a PDF"), "oleObject5.bin", warnings) is None
    assert unwrap_ole(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x07" * 600, "oleObject6.bin", warnings) is None
    assert [w.split(":")[0] for w in warnings] == [
        "embedded oleObject4.bin",
        "embedded oleObject5.bin",
        "embedded oleObject6.bin",
    ]
    assert "kind without text" in warnings[0] and "kind without text" in warnings[1]
    assert "damaged OLE object" in warnings[2]


def test_ole10native_without_a_label_takes_the_file_name_from_its_paths():
    stream = ole10native("x", b"HERON-2")
    unlabelled = stream[:6] + stream[7:]  # the label "x" removed: an empty label, then the paths
    unlabelled = struct.pack("<I", len(unlabelled) - 4) + unlabelled[4:]
    assert parse_ole10native(unlabelled, "oleObject1") == ("x", b"HERON-2")
    assert parse_ole10native(struct.pack("<I", 7) + b"HERON-2", "oleObject1") == ("oleObject1", b"HERON-2")
