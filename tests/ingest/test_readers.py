"""Readers: every file here is built by the test itself (fpdf2 / a raw PDF writer, python-docx)."""

from __future__ import annotations

import codecs
import csv
import io
import logging
import struct
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docx
import pytest
from docx.oxml import parse_xml
from docx.oxml.ns import nsdecls
from fpdf import FPDF
from fpdf.enums import EncryptionMethod
from PIL import Image

from knowledge.errors import (
    EmptyDocument,
    FileTooLarge,
    InvalidArgument,
    PasswordRequired,
    UnsupportedFile,
)
from knowledge.ingest import Document, Section, detect_format, read_document
from knowledge.ingest._pdf import join_hyphenated
from knowledge.ingest._text import clean, decode

LEGACY_WORD = "unsupported: legacy Word format (.doc) — save it as .docx"


def check_shape(doc: Document) -> Document:
    """The invariants the chunker relies on, for every document a test reads."""
    assert doc.text and doc.text == doc.text.strip()
    assert "\x00" not in doc.text and "\r" not in doc.text
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in doc.text)
    assert all(line == line.rstrip() for line in doc.text.split("\n"))
    assert "\n\n\n" not in doc.text or doc.format == "markdown"
    assert doc.sections[0].char_start == 0 and doc.sections[-1].char_end == len(doc.text)
    for a, b in zip(doc.sections, doc.sections[1:]):
        assert a.char_end == b.char_start
        assert (a.page, a.heading) != (b.page, b.heading)
    for s in doc.sections:
        assert doc.text[s.char_start : s.char_end].strip()
    return doc


def section_of(doc: Document, needle: str) -> Section:
    at = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= at < s.char_end)


# -- PDF builders --------------------------------------------------------------------------------


def fpdf_bytes(pages: list[str | None], *, title: str | None = None, encrypt: dict | None = None) -> bytes:
    """A PDF with one page per entry: text (lines split on "\\n"), "IMAGE" for an image-only page
    (a small page, 100 x 70 mm: OCR renders the whole page, and an A4 one takes seconds), None for
    a blank page."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    if title:
        pdf.set_title(title)
    for content in pages:
        if content == "IMAGE":
            pdf.add_page(format=(100, 70))
            pdf.image(Image.new("RGB", (60, 40), (200, 30, 30)), x=10, y=10, w=80)
            continue
        pdf.add_page(format="A4")
        if content:
            pdf.multi_cell(w=0, text=content)
    if encrypt:
        pdf.set_encryption(encryption_method=EncryptionMethod.AES_128, **encrypt)
    return bytes(pdf.output())


def raw_pdf(
    content: bytes,
    *,
    font: bytes = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    mediabox: bytes = b"[0 0 300 200]",
    xobject: bool = False,
) -> bytes:
    """A one-page PDF written by hand (for what fpdf2 cannot write: a ligature glyph, text outside
    the page). ``xobject`` adds a 1x1 image /Im1."""
    resources = b"/Font << /F1 5 0 R >>" + (b" /XObject << /Im1 6 0 R >>" if xobject else b"")
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox " + mediabox + b" /Resources << " + resources + b" >> /Contents 4 0 R >>",
        b"<< /Length " + str(len(content)).encode() + b" >>\nstream\n" + content + b"\nendstream",
        font,
        b"<< /Type /XObject /Subtype /Image /Width 1 /Height 1 /ColorSpace /DeviceGray"
        b" /BitsPerComponent 8 /Length 1 >>\nstream\n\x80\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


LIGATURE_FONT = (
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding << /Type /Encoding"
    b" /BaseEncoding /WinAnsiEncoding /Differences [1 /fi 2 /fl] >> >>"
)


# -- PDF -----------------------------------------------------------------------------------------


def test_pdf_pages_become_sections_with_page_numbers():
    data = fpdf_bytes(["Alpha page one.", "Bravo page two.", "Charlie page three."], title="Three Pages")
    doc = check_shape(read_document(data, "report.pdf"))
    assert doc.format == "pdf" and doc.pages == 3
    assert [s.page for s in doc.sections] == [1, 2, 3]
    assert section_of(doc, "Bravo").page == 2
    assert doc.text.split("\n\n") == ["Alpha page one.", "Bravo page two.", "Charlie page three."]
    assert doc.title == "Three Pages"
    assert doc.warnings == []


def test_pdf_image_only_and_blank_pages_are_reported():
    data = fpdf_bytes(["Text on one.", "IMAGE", None, "Text on four."])
    doc = check_shape(read_document(data, ocr="off"))
    assert doc.pages == 4
    assert [s.page for s in doc.sections] == [1, 4]
    assert doc.warnings == ["page 2 has no text layer (scanned? OCR needed)", "page 3 is blank"]
    # with OCR (the default) the image page is read, and a picture without words says so
    doc = check_shape(read_document(data))
    assert [s.page for s in doc.sections] == [1, 4]
    assert doc.warnings == ["page 2 without a text layer: no text found, even by OCR", "page 3 is blank"]


def test_pdf_runs_of_pages_without_text_are_one_warning():
    doc = read_document(fpdf_bytes(["IMAGE", "IMAGE", "IMAGE", "Text.", None, None, "IMAGE"]), ocr="off")
    assert doc.warnings == [
        "pages 1-3 have no text layer (scanned? OCR needed)",
        "pages 5-6 are blank",
        "page 7 has no text layer (scanned? OCR needed)",
    ]


def test_pdf_without_any_text_is_an_empty_document_not_a_silent_success():
    with pytest.raises(EmptyDocument, match=r"no text layer \(scanned\? OCR needed\)"):
        read_document(fpdf_bytes(["IMAGE", "IMAGE"]), ocr="off")
    with pytest.raises(EmptyDocument, match=r"^no text found, even by OCR: none of its 2 pages has text"):
        read_document(fpdf_bytes(["IMAGE", "IMAGE"]))


def test_pdf_text_outside_the_page_box_is_not_a_text_layer():
    # ImageMagick writes a label above the visible page of each image; it is not page text
    content = b"q BT /F1 12 Tf 0 16 Td (Background) Tj ET 3.84 0 0 3.84 0 0 cm /Im1 Do Q"
    with pytest.raises(EmptyDocument, match="text layer"):
        read_document(raw_pdf(content, mediabox=b"[0 0 3.84 3.84]", xobject=True))
    inside = raw_pdf(b"BT /F1 12 Tf 20 100 Td (Visible words) Tj ET")
    assert read_document(inside).text == "Visible words"


def test_pdf_ligatures_are_normalised_nfkc():
    data = raw_pdf(b"BT /F1 12 Tf 20 100 Td (The mis\\001ts and the \\002ower) Tj ET", font=LIGATURE_FONT)
    doc = check_shape(read_document(data))
    assert "misfits" in doc.text and "flower" in doc.text
    assert "\ufb01" not in doc.text


def test_pdf_hyphenated_line_breaks_are_joined():
    doc = read_document(fpdf_bytes(["no sea taki-\nmata sanctus est\nthe state-of-the-\nart design"]))
    assert "takimata" in doc.text
    assert "state-of-the-art" in doc.text


@pytest.mark.parametrize(
    ("pages", "expected"),
    [
        ({1: "infor-\nmation here"}, "information here"),
        ({1: "a well-\nknown fact; a well-known fact"}, "a well-known fact; a well-known fact"),
        ({1: "see New-\nYork"}, "see New-York"),
        ({1: "x86-\n64 builds"}, "x86-\n64 builds"),
        ({1: "end of list -\nnext item"}, "end of list -\nnext item"),
    ],
)
def test_join_hyphenated_rules(pages, expected):
    assert join_hyphenated(pages)[1] == expected


def test_pdf_encrypted_needs_its_password():
    data = fpdf_bytes(["Secret minutes of the meeting."], encrypt={"owner_password": "owner", "user_password": "s3cret"})
    with pytest.raises(PasswordRequired, match="password required"):
        read_document(data)
    with pytest.raises(PasswordRequired, match="wrong password"):
        read_document(data, password="guess")
    doc = read_document(data, password="s3cret")
    assert "Secret minutes" in doc.text


def test_pdf_encrypted_with_owner_password_only_opens_without_asking():
    data = fpdf_bytes(["Anyone may read this."], encrypt={"owner_password": "owner"})
    assert read_document(data).text == "Anyone may read this."


def test_pdf_damaged_files_give_a_clear_knowledge_error():
    with pytest.raises(UnsupportedFile, match="unreadable PDF"):
        read_document(b"%PDF-1.7\n" + b"this is not a PDF body at all\n" * 20)
    whole = fpdf_bytes(["Alpha page one.", "Bravo page two.", "Charlie page three."])
    for cut in (len(whole) // 4, len(whole) // 2, len(whole) - 40):
        try:
            doc = read_document(whole[:cut])
        except (UnsupportedFile, EmptyDocument) as exc:  # never a raw pypdf exception
            assert "unreadable PDF (damaged or truncated?): " in str(exc) or "text layer" in str(exc)
        else:
            check_shape(doc)


def test_pdf_slightly_broken_file_reads_and_pypdf_warnings_go_to_logging(capfd, caplog):
    data = raw_pdf(b"BT /F1 12 Tf 20 100 Td (Repaired text) Tj ET")
    broken = data.replace(b"startxref\n", b"startxref\n9")  # a wrong xref offset: pypdf repairs it
    with caplog.at_level(logging.INFO, logger="knowledge.ingest"):
        doc = read_document(broken, "broken.pdf")
    assert doc.text == "Repaired text"
    assert capfd.readouterr().err == ""
    msgs = [r.getMessage() for r in caplog.records if r.name == "knowledge.ingest.pdf"]
    assert any("broken.pdf" in m and "startxref" in m for m in msgs)
    assert not logging.getLogger("pypdf").handlers  # our capture handler is gone again
    assert logging.getLogger("pypdf").propagate


def test_pdf_reads_from_many_threads_at_once():
    broken = raw_pdf(b"BT /F1 12 Tf 20 100 Td (Threaded text) Tj ET").replace(b"startxref\n", b"startxref\n9")
    with ThreadPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(lambda _: read_document(broken).text, range(16)))
    assert texts == ["Threaded text"] * 16
    assert not logging.getLogger("pypdf").handlers and logging.getLogger("pypdf").propagate


def test_pdf_renamed_txt_is_read_as_pdf():
    doc = read_document(fpdf_bytes(["Hidden behind a wrong extension."]), "notes.txt")
    assert doc.format == "pdf" and doc.pages == 1


# -- DOCX builders ------------------------------------------------------------------------------


def docx_bytes(document) -> bytes:
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def add_hyperlink(paragraph, text: str, url: str) -> None:
    rid = paragraph.part.relate_to(url, docx.opc.constants.RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    paragraph._p.append(
        parse_xml(f'<w:hyperlink {nsdecls("w", "r")} r:id="{rid}"><w:r><w:t>{text}</w:t></w:r></w:hyperlink>')
    )


def add_text_box(paragraph, text: str) -> None:
    """A DrawingML text box with its VML fallback (as Word writes it): the same text twice."""
    wps = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
    mc = "http://schemas.openxmlformats.org/markup-compatibility/2006"
    vml = "urn:schemas-microsoft-com:vml"
    box = f"<w:txbxContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:txbxContent>"
    paragraph._p.append(
        parse_xml(
            f'<w:r {nsdecls("w", "wp", "a")} xmlns:v="{vml}" xmlns:wps="{wps}" xmlns:mc="{mc}"><mc:AlternateContent>'
            f'<mc:Choice Requires="wps"><w:drawing><wp:anchor><a:graphic><a:graphicData>'
            f"<wps:wsp><wps:txbx>{box}</wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>"
            f"</mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>{box}</v:textbox></v:shape></w:pict>"
            f"</mc:Fallback></mc:AlternateContent></w:r>"
        )
    )


def rich_docx() -> bytes:
    d = docx.Document()
    d.core_properties.title = "Handbook"
    d.sections[0].header.paragraphs[0].text = "ACME Confidential"
    d.sections[0].footer.paragraphs[0].text = "Printed copies are uncontrolled"
    d.add_heading("Guide", 1)
    p = d.add_paragraph("Read the ")
    add_hyperlink(p, "installation notes", "https://example.org/notes")
    p.add_run(" first.")
    d.add_heading("Install", 2)
    for text in ("Download the package", "Run the installer", "Restart"):
        d.add_paragraph(text, style="List Number")
    for text in ("apples", "pears"):
        d.add_paragraph(text, style="List Bullet")
    table = d.add_table(rows=3, cols=3)
    for i, row in enumerate([["Name", "Qty", "Price"], ["Tea", "2", "3.50"], ["", "", ""]]):
        for j, value in enumerate(row):
            table.cell(i, j).text = value
    inner = table.cell(1, 2).add_table(rows=2, cols=2)
    for i, row in enumerate([["in-a", "in-b"], ["in-c", "in-d"]]):
        for j, value in enumerate(row):
            inner.cell(i, j).text = value
    p = d.add_paragraph("Anchor paragraph.")
    add_text_box(p, "Boxed remark")
    hidden = d.add_paragraph("Shown ").add_run("HIDDEN-RUN")
    hidden.font.hidden = True
    body = d.element.body
    body.insert(
        len(body) - 1,
        parse_xml(
            f'<w:sdt {nsdecls("w")}><w:sdtPr><w:alias w:val="Client"/></w:sdtPr><w:sdtContent>'
            f"<w:p><w:r><w:t>Client: Contoso Ltd</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        ),
    )
    d.add_section()  # the new section's header is linked to the previous one: same header again
    d.add_heading("Linux", 3)
    d.add_paragraph("Use the package manager.")
    d.add_heading("Usage", 2)
    d.add_paragraph("Start it.")
    return docx_bytes(d)


@pytest.fixture(scope="module")
def rich() -> Document:
    return check_shape(read_document(rich_docx(), "handbook.docx"))


# -- DOCX ----------------------------------------------------------------------------------------


def test_docx_paragraphs_and_tables_in_document_order(rich):
    order = [
        "ACME Confidential",
        "Guide",
        "installation notes",
        "1. Download the package",
        "Name | Qty",
        "Anchor paragraph.",
        "Boxed remark",
        "Client: Contoso Ltd",
        "Linux",
        "Usage",
        "Start it.",
        "Printed copies are uncontrolled",
    ]
    positions = [rich.text.index(s) for s in order]
    assert positions == sorted(positions)
    assert rich.format == "docx" and rich.title == "Handbook" and rich.pages is None


def test_docx_tables_keep_row_and_cell_boundaries(rich):
    lines = rich.text.split("\n")
    assert "Name | Qty | Price" in lines
    assert "Tea | 2 | 3.50 [in-a | in-b; in-c | in-d]" in lines  # nested table inside its cell
    assert " |  | " not in rich.text  # the empty row is left out


def test_docx_lists_get_their_numbers_and_bullets(rich):
    lines = rich.text.split("\n")
    assert "1. Download the package" in lines and "2. Run the installer" in lines and "3. Restart" in lines
    assert "• apples" in lines and "• pears" in lines


def test_docx_header_and_footer_once_hyperlinks_and_text_boxes(rich):
    assert rich.text.count("ACME Confidential") == 1
    assert rich.text.count("Printed copies are uncontrolled") == 1
    assert "Read the installation notes first." in rich.text
    assert rich.text.count("Boxed remark") == 1  # not again through the VML fallback
    assert "HIDDEN-RUN" not in rich.text and "Shown" in rich.text


def test_docx_headings_build_the_heading_path(rich):
    assert section_of(rich, "installation notes").heading == "Guide"
    assert section_of(rich, "Run the installer").heading == "Guide > Install"
    assert section_of(rich, "Name | Qty").heading == "Guide > Install"
    assert section_of(rich, "package manager").heading == "Guide > Install > Linux"
    assert section_of(rich, "Start it.").heading == "Guide > Usage"
    assert section_of(rich, "ACME Confidential").heading is None


def test_docx_distinct_headers_of_sections_with_equal_text_appear_once():
    d = docx.Document()
    d.sections[0].header.paragraphs[0].text = "Same header"
    d.add_paragraph("One.")
    second = d.add_section()
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "Same header"
    second.first_page_header.paragraphs[0].text = "Cover header"
    second.different_first_page_header_footer = True
    d.add_paragraph("Two.")
    doc = check_shape(read_document(docx_bytes(d)))
    assert doc.text.count("Same header") == 1 and doc.text.count("Cover header") == 1


def test_docx_numbering_levels_and_formats():
    d = docx.Document()
    numbering = d.part.numbering_part.element
    numbering.append(
        parse_xml(
            f'<w:abstractNum {nsdecls("w")} w:abstractNumId="90">'
            '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>'
            '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%1.%2)"/></w:lvl>'
            '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerRoman"/><w:lvlText w:val="(%3)"/></w:lvl>'
            "</w:abstractNum>"
        )
    )
    numbering.append(parse_xml(f'<w:num {nsdecls("w")} w:numId="90"><w:abstractNumId w:val="90"/></w:num>'))
    for text, level in [
        ("Top", 0),
        ("Sub one", 1),
        ("Sub two", 1),
        ("Deep", 2),
        ("Deeper", 2),
        ("Next", 0),
        ("Sub again", 1),
    ]:
        p = d.add_paragraph(text)
        p._p.get_or_add_pPr().append(
            parse_xml(f'<w:numPr {nsdecls("w")}><w:ilvl w:val="{level}"/><w:numId w:val="90"/></w:numPr>')
        )
    lines = check_shape(read_document(docx_bytes(d))).text.split("\n\n")
    assert lines == [
        "1. Top",
        "  1.a) Sub one",
        "  1.b) Sub two",
        "    (i) Deep",
        "    (ii) Deeper",
        "2. Next",
        "  2.a) Sub again",
    ]


def test_docx_numbering_through_a_numbering_style_and_empty_items():
    d = docx.Document()
    numbering = d.part.numbering_part.element
    numbering.append(
        parse_xml(
            f'<w:abstractNum {nsdecls("w")} w:abstractNumId="91"><w:styleLink w:val="Steps"/>'
            '<w:lvl w:ilvl="0"><w:start w:val="4"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>'
            "</w:abstractNum>"
        )
    )
    numbering.append(
        parse_xml(f'<w:abstractNum {nsdecls("w")} w:abstractNumId="92"><w:numStyleLink w:val="Steps"/></w:abstractNum>')
    )
    numbering.append(parse_xml(f'<w:num {nsdecls("w")} w:numId="92"><w:abstractNumId w:val="92"/></w:num>'))
    for text in ("Four", "", "Six"):
        p = d.add_paragraph(text)
        p._p.get_or_add_pPr().append(
            parse_xml(f'<w:numPr {nsdecls("w")}><w:ilvl w:val="0"/><w:numId w:val="92"/></w:numPr>')
        )
    assert read_document(docx_bytes(d)).text == "IV. Four\n\nVI. Six"  # Word numbers the empty item too


def test_docx_without_text_is_empty():
    d = docx.Document()
    d.add_paragraph("")
    d.add_table(rows=2, cols=2)
    with pytest.raises(EmptyDocument, match="no text"):
        read_document(docx_bytes(d), "blank.docx")


def test_docx_damaged_zip_is_unsupported_with_reason():
    data = rich_docx()
    with pytest.raises(UnsupportedFile, match="damaged"):
        read_document(data[: len(data) // 2], "cut.docx")
    # a flipped byte inside the compressed main document fails its checksum
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo("word/document.xml")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 10
    corrupt = bytearray(data)
    corrupt[start] ^= 0xFF
    with pytest.raises(UnsupportedFile, match="unreadable DOCX"):
        read_document(bytes(corrupt), "flipped.docx")


def test_docx_macro_enabled_and_templates_are_read():
    data = rich_docx()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            blob = src.read(item.filename)
            if item.filename == "[Content_Types].xml":
                blob = blob.replace(b"wordprocessingml.document.main+xml", b"wordprocessingml.template.main+xml")
            dst.writestr(item, blob)
    assert "ACME Confidential" in read_document(out.getvalue(), "handbook.dotx").text


# -- format detection ----------------------------------------------------------------------------


def ole2(stream: str = "WordDocument") -> bytes:
    """The start of an OLE2 compound file: its signature and one directory entry named ``stream``."""
    name = stream.encode("utf-16-le")
    entry = name + b"\x00" * (64 - len(name)) + struct.pack("<H", len(name) + 2) + b"\x02" * 62
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504 + entry + b"\x00" * 512


def zip_with(*members: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member in members:
            zf.writestr(member, "<x/>")
    return buf.getvalue()


def test_text_renamed_docx_is_read_as_text_with_a_warning():
    doc = read_document(b"Just one line of plain text, nothing more.\n", "notreally.docx")
    assert doc.text.strip() == "Just one line of plain text, nothing more."
    assert doc.warnings[0] == "named .docx but it is text, not a Word document: read as text"
    assert not any("named" in w for w in read_document(b"Plain text.\n", "notes.txt").warnings)
    md_doc = read_document(b"# Title\n\nSome words here.\n", "slides.pptx")
    assert md_doc.warnings[0].startswith("named .pptx but it is text, not a PowerPoint deck")


def test_legacy_doc_renamed_docx_is_refused_by_content():
    with pytest.raises(UnsupportedFile) as exc:
        read_document(ole2(), "report.docx")
    assert str(exc.value) == LEGACY_WORD
    with pytest.raises(UnsupportedFile, match=r"legacy Word format \(\.doc\)"):
        detect_format(ole2()[:512], "report.doc")


@pytest.mark.parametrize(
    ("data", "name", "what"),
    [
        (ole2("Workbook"), "a.xls", r"unreadable Excel 97-2003 workbook \(\.xls\)"),
        (zip_with("[Content_Types].xml", "xl/workbook.xml"), "a.docx", "unreadable Excel workbook"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "scan.pdf", "PNG image"),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 64, None, "JPEG image"),
        (b"GIF89a" + b"\x00" * 32, "x.txt", "GIF image"),
        (b"\x1f\x8b\x08\x00" + b"\x00" * 32, "a.md", "gzip"),
        (bytes(range(256)) * 8, "data.txt", "binary data"),
        (b"<?xml version='1.0'?><svg xmlns='http://www.w3.org/2000/svg'><text>x</text></svg>", None, "SVG"),
    ],
)
def test_unsupported_formats_are_named(data, name, what):
    with pytest.raises(UnsupportedFile, match=what):
        read_document(data, name)


def test_pptx_is_read_now_and_a_broken_one_is_damaged():
    # issue 27: PowerPoint is no longer refused; a package whose parts are not PresentationML is damaged
    with pytest.raises(UnsupportedFile, match=r"^damaged: this PowerPoint presentation cannot be read"):
        read_document(zip_with("[Content_Types].xml", "ppt/presentation.xml"), "a.pptx")


def test_odt_is_named_from_its_mimetype_member():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        zf.writestr("content.xml", "<x/>")
    with pytest.raises(UnsupportedFile, match=r"damaged: this OpenDocument text's content.xml has no body"):
        read_document(buf.getvalue(), "a.odt")


def test_rtf_named_doc_is_read_as_rtf():
    assert read_document(b"{\\rtf1\\ansi Hello}", "letter.doc").text == "Hello"


@pytest.mark.parametrize(
    ("head", "name", "fmt"),
    [
        (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "x.txt", "pdf"),
        (b"From: mail header junk\r\n%PDF-1.4\n", None, "pdf"),
        (b"# Title\n\nThe header `%PDF-1.7` starts a PDF.\n", None, "markdown"),
        (b"Title\n=====\n\nBody.\n", None, "markdown"),
        (b"some text", "README.md", "markdown"),
        (b"<!DOCTYPE html><html><body>x</body></html>", None, "html"),
        (b"<p>x</p>", "page.htm", "html"),
        (b"name,age\nAda,36\nAlan,41\n", None, "csv"),
        (b"a;b;c\n1;2;3\n4;5;6\n", "data.csv", "csv"),
        (b"Dear reader, this is prose, with commas.\nAnother line, here.\n", None, "text"),
        (b"# not markdown when named .txt", "notes.txt", "text"),
        (zip_with("[Content_Types].xml", "word/document.xml"), "renamed.bin", "docx"),
    ],
)
def test_detect_format(head, name, fmt):
    assert detect_format(head, name) == fmt


def test_detect_format_on_a_zip_head_only_reads_local_headers():
    data = rich_docx()
    assert detect_format(data[:4096], None) == "docx"


# -- plain text and encodings --------------------------------------------------------------------

SAMPLE = "Grüße aus Köln – café, naïve, “quoted” for 5 €.\nSecond line."


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "cp1252"])
def test_text_encodings(encoding):
    doc = check_shape(read_document(SAMPLE.encode(encoding), "letter.txt"))
    assert doc.format == "text"
    assert doc.text == SAMPLE


def test_text_latin1_and_cyrillic_code_pages():
    assert read_document("Ça coûte très cher à Noël.".encode("latin-1")).text == "Ça coûte très cher à Noël."
    russian = "Привет, как дела? Это тестовый текст на русском языке."
    assert read_document(russian.encode("cp1251")).text == russian


@pytest.mark.parametrize("newline", ["\r\n", "\r", "\n"])
def test_text_line_endings_become_lf(newline):
    doc = read_document(newline.join(["one  ", "two\t", "", "", "", "three"]).encode())
    assert doc.text == "one\ntwo\n\nthree"


def test_text_nul_and_lone_surrogates_are_removed():
    doc = read_document(b"good \x00text with a stray NUL and \xed\xa0\x80 a WTF-8 surrogate, fine", "a.txt")
    assert "\x00" not in doc.text and "good text" in doc.text and doc.text.endswith("fine")
    utf16 = read_document(codecs.BOM_UTF16_LE + "ab\ud800cd".encode("utf-16-le", "surrogatepass"))
    assert utf16.text == "abcd"
    assert clean("a\x00b\udc00c\ufeffd\r\ne  \n\n\n\nf") == "abcd\ne\n\nf"


@pytest.mark.parametrize("data", [b"", b"   \n\t\r\n ", b"\xef\xbb\xbf  \n", "  \n".encode("utf-16")])
def test_empty_or_whitespace_input_is_an_empty_document(data):
    with pytest.raises(EmptyDocument):
        read_document(data, "empty.txt")


def test_decode_prefers_deterministic_rules():
    assert decode("naïve".encode()) == "naïve"
    assert decode(b"\xef\xbb\xbfbom") == "bom"
    assert decode("plain ASCII, no BOM".encode("utf-16-be")) == "plain ASCII, no BOM"
    assert decode("caf\xe9 \x80".encode("latin-1")) == "café €"  # 0x80 is the euro sign in cp1252


# -- size limit and sources ----------------------------------------------------------------------


def test_max_bytes_names_size_and_limit(tmp_path: Path):
    data = b"x" * 2_500_000
    with pytest.raises(FileTooLarge, match=r"2\.5 MB \(2,500,000 bytes\).*1\.0 MB \(1,000,000 bytes\)"):
        read_document(data, "big.txt", max_bytes=1_000_000)
    path = tmp_path / "big.txt"
    path.write_bytes(data)
    with pytest.raises(FileTooLarge, match="2,500,000 bytes"):
        read_document(path, max_bytes=1_000_000)
    with pytest.raises(FileTooLarge, match="2,500,000 bytes"):
        read_document(io.BytesIO(data), max_bytes=1_000_000)

    class Pipe(io.RawIOBase):  # not seekable: the size is unknown until read
        def __init__(self) -> None:
            self.left = len(data)

        def readable(self) -> bool:
            return True

        def readinto(self, buf) -> int:
            n = min(len(buf), self.left)
            buf[:n] = b"x" * n
            self.left -= n
            return n

    with pytest.raises(FileTooLarge, match=r"more than 1\.0 MB \(1,000,000 bytes\)"):
        read_document(io.BufferedReader(Pipe()), max_bytes=1_000_000)
    assert read_document(b"small enough", max_bytes=12).text == "small enough"


def test_sources_path_stream_and_bytes(tmp_path: Path):
    path = tmp_path / "guide.md"
    path.write_bytes(b"# Guide\n\nHello.\n")
    assert read_document(path).format == "markdown"  # the name comes from the path
    assert read_document(str(path)).format == "markdown"
    with path.open("rb") as fh:
        assert read_document(fh).format == "markdown"  # and from the stream's name
    assert read_document(memoryview(b"# Guide\n"), "x.md").sections[0].heading == "Guide"
    with pytest.raises(InvalidArgument, match="binary stream"):
        read_document(io.StringIO("text"))
    with pytest.raises(InvalidArgument, match="cannot be read"):
        read_document(tmp_path / "missing.txt")
    with pytest.raises(InvalidArgument):
        read_document(12345)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="max_bytes"):
        read_document(b"x", max_bytes=-1)


# -- Markdown ------------------------------------------------------------------------------------

MARKDOWN = """---
title: "The Guide"
layout: page
---
Preamble line.

# Guide

Intro.

Install
-------

<!-- an editor's note nobody sees -->

```sh
# not a heading: a shell comment


make install
```

### Linux

    # an indented code line, not a heading

Use apt.

## Usage

Run it.
"""


def test_markdown_heading_paths_and_code_blocks():
    doc = check_shape(read_document(MARKDOWN.encode(), "guide.md"))
    assert doc.format == "markdown" and doc.title == "The Guide"
    assert "editor's note" not in doc.text
    # front matter: file attributes, kept searchable as a first block of key: value lines
    assert doc.attributes["layout"] == "page" and doc.text.startswith("title: The Guide\nlayout: page")
    assert section_of(doc, "Preamble").heading is None
    assert section_of(doc, "Intro.").heading == "Guide"
    assert section_of(doc, "make install").heading == "Guide > Install"
    assert section_of(doc, "# not a heading").heading == "Guide > Install"
    assert section_of(doc, "Use apt").heading == "Guide > Install > Linux"
    assert section_of(doc, "Run it.").heading == "Guide > Usage"
    assert "# not a heading: a shell comment\n\n\nmake install" in doc.text  # code kept line for line
    assert "Install\n-------" in doc.text


def test_markdown_heading_text_is_plain():
    doc = read_document(b"## The `?` Operator and *friends* [link](https://x.org)\n\nBody.\n", "a.md")
    assert doc.sections[0].heading == "The ? Operator and friends link"
    assert doc.title == "The ? Operator and friends link"  # the file starts with it


# -- HTML ----------------------------------------------------------------------------------------

HTML = b"""<!doctype html><html><head><title>Shop  Guide</title><style>p{color:red}</style>
<script>var secret = "SCRIPT-TEXT";</script></head><body>
<nav hidden>NAV-HIDDEN</nav><h1>Guide</h1><p>Intro <b>bold</b>
 text.<br>Next line.</p><h2>Prices</h2>
<table><thead><tr><th>Item</th><th>Price</th></tr></thead><tbody><tr><td>Tea</td><td>3.50</td></tr></tbody></table>
<ol start="3"><li>third</li><li>fourth</li></ol><ul><li>apple</li></ul>
<div style="display: none">DISPLAY-NONE</div><noscript>NOSCRIPT</noscript><!-- COMMENT -->
<h2>Contact</h2><pre>  line one
  line two</pre><p>Fish &amp; chips&nbsp;today</p></body></html>"""


def test_html_visible_text_headings_and_tables():
    doc = check_shape(read_document(HTML, "shop.html"))
    assert doc.format == "html" and doc.title == "Shop Guide"
    for invisible in ("SCRIPT-TEXT", "NAV-HIDDEN", "DISPLAY-NONE", "NOSCRIPT", "COMMENT", "color:red"):
        assert invisible not in doc.text
    lines = doc.text.split("\n")
    assert "Intro bold text." in lines and "Next line." in lines
    assert "Item | Price" in lines and "Tea | 3.50" in lines
    assert "3. third" in lines and "4. fourth" in lines and "• apple" in lines
    assert "  line one\n  line two" in doc.text
    assert "Fish & chips today" in lines
    assert section_of(doc, "Intro").heading == "Guide"
    assert section_of(doc, "Tea").heading == "Guide > Prices"
    assert section_of(doc, "line one").heading == "Guide > Contact"


def test_html_with_an_unclosed_head_keeps_its_body():
    doc = read_document(b"<html><head><title>T</title><body><p>Hello there</p></body></html>", "a.html")
    assert doc.text == "Hello there" and doc.title == "T"


def test_html_without_visible_text_is_empty():
    with pytest.raises(EmptyDocument):
        read_document(b"<html><head><title>t</title><script>x()</script></head><body> </body></html>", "a.html")


# -- CSV -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_csv_rows_as_column_value_pairs(delimiter):
    rows = [["name", "city", "note"], ["Ada", "London", 'wrote "notes"'], ["Alan", "", "x" + delimiter + "y"]]
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    doc = check_shape(read_document(buf.getvalue().encode("utf-8-sig"), "people.csv"))
    assert doc.format == "csv"
    assert doc.text.split("\n") == [
        'name: Ada | city: London | note: wrote "notes"',
        f"name: Alan | note: x{' ' if delimiter == chr(9) else delimiter}y",  # a tab in a cell is a space
    ]


MDBOOK_PAGE = b"""# Guessing Game

{{#title The Guessing Game}}

Set up the project:

```rust
{{#rustdoc_include ../listings/ch02-guessing-game-tutorial/listing-02-01/src/main.rs:all}}
```

<span class="caption">Listing 2-1: code that gets a guess</span>

```toml
{{#include ../listings/ch02-guessing-game-tutorial/listing-02-02/Cargo.toml:8:}}
[dependencies]
```

Inline {{#include ../listings/snippet.rs}} here, and an escaped \\{{#include kept.rs}} stays.
Handlebars' {{#each items}} is not mdBook's.
"""


def test_markdown_drops_mdbook_directives_and_names_them():
    doc = check_shape(read_document(MDBOOK_PAGE, "ch02-00-guessing-game-tutorial.md"))
    assert "{{#include ../" not in doc.text and "rustdoc_include" not in doc.text and "{{#title" not in doc.text
    assert "```rust" not in doc.text  # a fence that held only a directive goes with it
    assert "```toml\n[dependencies]\n```" in doc.text  # a fence with more in it keeps the rest
    assert "Inline  here" in doc.text
    assert "\\{{#include kept.rs}}" in doc.text and "{{#each items}}" in doc.text
    assert doc.title == "The Guessing Game"
    (warning,) = [w for w in doc.warnings if "mdBook" in w]
    assert warning.startswith("3 mdBook directives dropped")
    assert "{{#rustdoc_include ../listings/ch02-guessing-game-tutorial/listing-02-01/src/main.rs:all}}" in warning
    assert "{{#include ../listings/snippet.rs}}" in warning
    plain = read_document(b"# Plain\n\nNo directives.\n", "plain.md")
    assert not plain.warnings


def test_markdown_corpus_rust_book_has_no_mdbook_markup():
    from tests.helpers.env import CORPUS

    page = CORPUS / "md" / "rust-book" / "ch03-04-comments.md"
    if not page.exists():
        pytest.skip("the test corpus is not here (KNOWLEDGE_TEST_CORPUS)")
    doc = read_document(page)
    assert "{{#" not in doc.text and any("mdBook directive" in w for w in doc.warnings)
