"""The PowerPoint reader (issue 27): every deck here is built by the test with python-pptx (parts it
does not model, such as comments, written as XML), plus the office corpus's decks where present."""

from __future__ import annotations

import copy
import io
import zipfile
from pathlib import Path

import docx
import pytest
from lxml import etree
from msoffcrypto.format.ooxml import OOXMLFile
from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE
from pptx.enum.shapes import PROG_ID
from pptx.opc.package import Part
from pptx.opc.packuri import PackURI
from pptx.util import Inches

from knowledge.errors import EmptyDocument, PasswordRequired, UnsupportedFile
from knowledge.ingest import Document, read_document
from tests.helpers.chat import pdf_bytes
from tests.helpers.office import load, normalise
from tests.helpers.ole import cfb, ole10native

TITLE_AND_CONTENT, BLANK = 1, 6
X, Y, W, H = Inches(1), Inches(1), Inches(4), Inches(1)


def deck_bytes(prs) -> bytes:
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def titled(prs, title: str, body: str | None = None):
    slide = prs.slides.add_slide(prs.slide_layouts[TITLE_AND_CONTENT])
    slide.shapes.title.text = title
    if body is not None:
        slide.placeholders[1].text = body
    return slide


def where(doc: Document, needle: str) -> list[tuple[int | None, str | None]]:
    """``(page, heading)`` of every section holding ``needle``."""
    return [(s.page, s.heading) for s in doc.sections if needle in doc.text[s.char_start : s.char_end]]


def test_title_and_body_carry_slide_number_and_title():
    prs = Presentation()
    prs.core_properties.title = "Board deck"
    titled(prs, "Quarterly results", "Revenue grew twelve percent")
    titled(prs, "Outlook", "Hiring slows in spring")
    doc = read_document(deck_bytes(prs), "board.pptx")
    assert doc.format == "pptx" and doc.title == "Board deck"
    assert where(doc, "Revenue grew twelve percent") == [(1, "Quarterly results")]
    assert where(doc, "Hiring slows in spring") == [(2, "Outlook")]
    assert doc.text.index("Quarterly results") < doc.text.index("Revenue") < doc.text.index("Outlook")


def test_untitled_core_properties_fall_back_to_the_first_slide_title():
    prs = Presentation()
    prs.core_properties.title = ""
    titled(prs, "Kick-off", "Agenda for the day")
    assert read_document(deck_bytes(prs), "k.pptx").title == "Kick-off"


def test_table_rows_are_lines_with_tab_separated_cells_and_a_header():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[BLANK])
    table = slide.shapes.add_table(3, 2, X, Y, W, H).table
    for r, row in enumerate([("Region", "Sales"), ("North", "120"), ("South", "95")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    doc = read_document(deck_bytes(prs), "t.pptx")
    assert "Region\tSales\nNorth\t120\nSouth\t95" in doc.text
    [t] = doc.tables
    assert doc.text[t.char_start : t.header_end] == "Region\tSales"
    assert where(doc, "North\t120") == [(1, None)]


def test_groups_inside_groups_are_read_once_each():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[BLANK])
    outer = slide.shapes.add_group_shape()
    outer.shapes.add_textbox(X, Y, W, H).text_frame.text = "Outer box text"
    inner = outer.shapes.add_group_shape()
    inner.shapes.add_textbox(X, Y, W, H).text_frame.text = "Inner box text"
    slide.shapes.add_textbox(X, Y, W, H).text_frame.text = "Ungrouped box text"
    doc = read_document(deck_bytes(prs), "g.pptx")
    for text in ("Outer box text", "Inner box text", "Ungrouped box text"):
        assert doc.text.count(text) == 1
        assert where(doc, text) == [(1, None)]


def test_speaker_notes_belong_to_their_slide():
    prs = Presentation()
    titled(prs, "Intro", "Welcome")
    slide = titled(prs, "Budget", "Costs fell")
    slide.notes_slide.notes_text_frame.text = "Mention the travel freeze"
    doc = read_document(deck_bytes(prs), "n.pptx")
    assert where(doc, "Mention the travel freeze") == [(2, "Budget > Notes")]


def test_hidden_slides_are_read_and_named_in_the_warnings():
    prs = Presentation()
    titled(prs, "Shown", "Visible text")
    hidden = titled(prs, "Backup", "Spare figures")
    hidden._element.set("show", "0")
    doc = read_document(deck_bytes(prs), "h.pptx")
    assert where(doc, "Spare figures") == [(2, "Backup")]
    assert "slide 2 is hidden: indexed anyway (a hidden slide is part of the deck)" in doc.warnings
    assert not any("slide 1" in w for w in doc.warnings)


def test_chart_title_series_and_categories_are_read_not_its_numbers():
    prs = Presentation()
    slide = titled(prs, "Sales chart")
    data = CategoryChartData()
    data.categories = ["Alpine", "Baltic", "Coastal"]
    data.add_series("Year 2031", (17.25, 23.5, 31.75))
    chart = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, X, Y, W, Inches(3), data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = "Revenue by region"
    doc = read_document(deck_bytes(prs), "c.pptx")
    assert where(doc, "Revenue by region") == [(1, "Sales chart")]
    assert "Alpine\tBaltic\tCoastal" in doc.text and "Year 2031" in doc.text
    assert "17.25" not in doc.text and "<c:" not in doc.text


def test_layout_and_master_text_once_for_the_deck_and_never_the_prompts():
    prs = Presentation()
    master = prs.slide_masters[0]
    footer = next(p for p in master.placeholders if p.placeholder_format.type == 15)  # FOOTER
    footer.text = "Northwind internal"
    scratch = prs.slides.add_slide(prs.slide_layouts[BLANK])
    box = scratch.shapes.add_textbox(X, Y, W, H)
    box.text_frame.text = "Draft for review"
    for layout in prs.slide_layouts:  # python-pptx adds no shapes to layouts: copy the text box in
        layout.shapes._spTree.append(copy.deepcopy(box._element))
        for ph in layout.placeholders:  # and every layout repeats the master's footer
            if ph.placeholder_format.type == 15:
                ph.text = "Northwind internal"
    box._element.getparent().remove(box._element)
    agenda = prs.slide_layouts[TITLE_AND_CONTENT].placeholders[1]
    agenda.text = "Type the agenda here"
    titled(prs, "One", "First slide")
    titled(prs, "Two", "Second slide")
    doc = read_document(deck_bytes(prs), "m.pptx")
    assert where(doc, "First slide") == [(2, "One")]  # after the emptied scratch slide
    assert doc.text.count("Draft for review") == 1
    assert doc.text.count("Northwind internal") == 1
    assert where(doc, "Draft for review")[0][0] is None  # the deck's, not a slide's
    for prompt in ("Click to edit Master", "Type the agenda here", "‹#›"):
        assert prompt not in doc.text


def add_xml_part(source, partname: str, content_type: str, reltype: str, xml: str) -> None:
    part = Part(PackURI(partname), content_type, source.package, xml.encode())
    source.relate_to(part, reltype)


P_NS = "http://schemas.openxmlformats.org/presentationml/2006/main"
A_NS = "http://schemas.openxmlformats.org/drawingml/2006/main"
RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"


def test_comments_legacy_and_modern_with_their_authors():
    prs = Presentation()
    slide = titled(prs, "Plan", "Ship in May")
    add_xml_part(
        prs.part,
        "/ppt/commentAuthors.xml",
        "application/vnd.openxmlformats-officedocument.presentationml.commentAuthors+xml",
        RT + "commentAuthors",
        f'<p:cmAuthorLst xmlns:p="{P_NS}"><p:cmAuthor id="3" name="Ada Lovelace" initials="AL"'
        ' lastIdx="1" clrIdx="0"/></p:cmAuthorLst>',
    )
    add_xml_part(
        slide.part,
        "/ppt/comments/comment1.xml",
        "application/vnd.openxmlformats-officedocument.presentationml.comments+xml",
        RT + "comments",
        f'<p:cmLst xmlns:p="{P_NS}"><p:cm authorId="3" idx="1"><p:pos x="1" y="1"/>'
        "<p:text>May is too early</p:text></p:cm></p:cmLst>",
    )
    p188 = "http://schemas.microsoft.com/office/powerpoint/2018/8/main"
    add_xml_part(
        prs.part,
        "/ppt/authors.xml",
        "application/vnd.ms-powerpoint.authors+xml",
        "http://schemas.microsoft.com/office/2018/10/relationships/authors",
        f'<p188:authorLst xmlns:p188="{p188}"><p188:author id="{{A1}}" name="Grace Hopper"'
        ' initials="GH" userId="gh" providerId="None"/></p188:authorLst>',
    )
    add_xml_part(
        slide.part,
        "/ppt/comments/modernComment_1.xml",
        "application/vnd.ms-powerpoint.comments+xml",
        "http://schemas.microsoft.com/office/2018/10/relationships/comments",
        f'<p188:cmLst xmlns:p188="{p188}" xmlns:a="{A_NS}"><p188:cm id="{{C1}}" authorId="{{A1}}">'
        '<p188:replyLst><p188:reply id="{R1}" authorId="{A1}"><p188:txBody><a:bodyPr/><a:p><a:r>'
        "<a:t>June then</a:t></a:r></a:p></p188:txBody></p188:reply></p188:replyLst>"
        "<p188:txBody><a:bodyPr/><a:p><a:r><a:t>Check the launch date</a:t></a:r></a:p></p188:txBody>"
        "</p188:cm></p188:cmLst>",
    )
    doc = read_document(deck_bytes(prs), "cm.pptx")
    assert where(doc, "Ada Lovelace (AL): May is too early") == [(1, "Plan > Comments")]
    assert where(doc, "Grace Hopper (GH): Check the launch date") == [(1, "Plan > Comments")]
    assert "Grace Hopper (GH): June then" in doc.text


def test_an_embedded_word_document_is_read_on_its_slide():
    word = docx.Document()
    word.add_paragraph("Minutes of the embedded meeting")
    buf = io.BytesIO()
    word.save(buf)
    prs = Presentation()
    titled(prs, "Cover")
    slide = titled(prs, "Attachments")
    slide.shapes.add_ole_object(io.BytesIO(buf.getvalue()), PROG_ID.DOCX, X, Y)
    doc = read_document(deck_bytes(prs), "e.pptx")
    [(page, heading)] = where(doc, "Minutes of the embedded meeting")
    assert page == 2 and heading is not None and heading.startswith("Attachments > embedded ")


def test_an_ole_package_is_unpacked_to_the_file_it_carries():
    blob = cfb("\x01Ole10Native", ole10native("checklist.txt", b"Pack the spare batteries.\n"))
    prs = Presentation()
    slide = titled(prs, "Trip")
    slide.shapes.add_ole_object(io.BytesIO(blob), "Package", X, Y, W, H)
    doc = read_document(deck_bytes(prs), "p.pptx")
    [(page, heading)] = where(doc, "Pack the spare batteries.")
    assert page == 1 and heading == "Trip > embedded checklist.txt"


def test_an_embedded_object_that_cannot_be_read_is_a_warning():
    prs = Presentation()
    slide = titled(prs, "Data", "See the object")
    slide.shapes.add_ole_object(io.BytesIO(cfb("Workbook", b"\x09\x08" * 64)), "Excel.Sheet.8", X, Y, W, H)
    doc = read_document(deck_bytes(prs), "w.pptx")
    assert "See the object" in doc.text
    assert any(w.startswith("slide 1: Data > embedded") and "not read" in w for w in doc.warnings)


def test_an_embedded_object_without_a_file_is_named_with_its_slide():
    prs = Presentation()
    slide = titled(prs, "Maths", "See the equation")
    slide.shapes.add_ole_object(io.BytesIO(cfb("Equation Native", b"\x1c\x00" * 8)), "Equation.3", X, Y, W, H)
    doc = read_document(deck_bytes(prs), "e.pptx")
    assert "See the equation" in doc.text
    assert any(w.startswith("slide 1: embedded ") and "kind without text" in w for w in doc.warnings), doc.warnings


def test_an_acrobat_object_is_named_after_the_object():
    prs = Presentation()
    slide = titled(prs, "Report")
    pdf = pdf_bytes(["GANNET-5 in the report"])
    slide.shapes.add_ole_object(io.BytesIO(cfb("CONTENTS", pdf)), "AcroExch.Document.DC", X, Y, W, H)
    doc = read_document(deck_bytes(prs), "a.pptx")
    [(page, heading)] = where(doc, "GANNET-5 in the report")
    assert page == 1 and heading is not None and heading.startswith("Report > embedded ") and heading.endswith(".pdf")


def test_truncated_deck_is_damaged():
    prs = Presentation()
    titled(prs, "Whole", "Complete deck")
    data = deck_bytes(prs)
    with pytest.raises(UnsupportedFile, match="damaged"):
        read_document(data[: len(data) // 2], "cut.pptx")


def test_a_deck_without_text_is_empty():
    prs = Presentation()
    prs.slides.add_slide(prs.slide_layouts[BLANK])
    with pytest.raises(EmptyDocument, match="no text"):
        read_document(deck_bytes(prs), "blank.pptx")


def test_a_word_document_named_pptx_is_read_as_word():
    word = docx.Document()
    word.add_paragraph("Really a letter")
    buf = io.BytesIO()
    word.save(buf)
    doc = read_document(buf.getvalue(), "slides.pptx")
    assert doc.format == "docx" and "Really a letter" in doc.text


def test_an_encrypted_deck_asks_for_its_password_then_reads(tmp_path: Path):
    prs = Presentation()
    titled(prs, "Secret plan", "Launch on the moon")
    plain = tmp_path / "plain.pptx"
    plain.write_bytes(deck_bytes(prs))
    out = io.BytesIO()
    with plain.open("rb") as f:
        OOXMLFile(f).encrypt("s3cret", out)
    data = out.getvalue()
    with pytest.raises(PasswordRequired, match="password required"):
        read_document(data, "secret.pptx")
    with pytest.raises(PasswordRequired, match="wrong password"):
        read_document(data, "secret.pptx", password="guess")
    doc = read_document(data, "secret.pptx", password="s3cret")
    assert doc.format == "pptx" and where(doc, "Launch on the moon") == [(1, "Secret plan")]


@pytest.mark.slow
def test_office_corpus_decks(corpus: Path):
    folder = corpus / "office"
    if not (folder / "expectations.tsv").is_file():
        pytest.skip("no office corpus")
    rows = [e for e in load(folder) if e.format == "pptx"]
    texts: dict[str, str] = {}
    for e in rows:
        if e.file not in texts:
            path = folder / "pptx" / e.file
            if e.kind == "password":
                with pytest.raises(PasswordRequired):
                    read_document(path)
            texts[e.file] = normalise(read_document(path, password=e.password or "tika").text)
    failed = [(e.file, e.kind, e.text) for e in rows if not e.holds(texts[e.file])]
    present = [e for e in rows if e.kind != "absent"]
    assert not [f for f in failed if f[1] == "absent"]
    assert len(present) - len(failed) >= 0.95 * len(present), failed


def add_frame(slide, graphic_data: str) -> None:
    """Append a ``p:graphicFrame`` holding ``graphic_data`` to ``slide``'s shape tree."""
    frame = etree.fromstring(
        f'<p:graphicFrame xmlns:p="{P_NS}" xmlns:a="{A_NS}"><p:nvGraphicFramePr><p:cNvPr id="90" name="F"/>'
        '<p:cNvGraphicFramePr/><p:nvPr/></p:nvGraphicFramePr><p:xfrm><a:off x="0" y="0"/><a:ext cx="1" cy="1"/>'
        f"</p:xfrm><a:graphic>{graphic_data}</a:graphic></p:graphicFrame>"
    )
    slide.shapes._spTree.append(frame)


def test_smartart_text_comes_from_the_diagram_data_once():
    prs = Presentation()
    slide = titled(prs, "Process")
    dgm = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
    part = Part(
        PackURI("/ppt/diagrams/data1.xml"),
        "application/vnd.openxmlformats-officedocument.drawingml.diagramData+xml",
        slide.part.package,
        (
            f'<dgm:dataModel xmlns:dgm="{dgm}" xmlns:a="{A_NS}"><dgm:ptLst>'
            '<dgm:pt modelId="0" type="doc"><dgm:t><a:bodyPr/><a:p><a:r><a:t>Plan the route</a:t></a:r></a:p>'
            '</dgm:t></dgm:pt><dgm:pt modelId="1"><dgm:t><a:bodyPr/><a:p><a:r><a:t>Book the ferry</a:t></a:r>'
            '</a:p></dgm:t></dgm:pt><dgm:pt modelId="2" type="parTrans"><dgm:t><a:p><a:r><a:t>connector</a:t>'
            "</a:r></a:p></dgm:t></dgm:pt></dgm:ptLst></dgm:dataModel>"
        ).encode(),
    )
    rid = slide.part.relate_to(part, RT + "diagramData")
    r_ns = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    add_frame(
        slide,
        f'<a:graphicData uri="{dgm}"><dgm:relIds xmlns:dgm="{dgm}" xmlns:r="{r_ns}" r:dm="{rid}"'
        ' r:lo="" r:qs="" r:cs=""/></a:graphicData>',
    )
    doc = read_document(deck_bytes(prs), "s.pptx")
    assert where(doc, "Plan the route\nBook the ferry") == [(1, "Process")]
    assert "connector" not in doc.text


def test_an_equation_in_a_text_box_is_read_from_its_math():
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[BLANK])
    box = slide.shapes.add_textbox(X, Y, W, H)
    box.text_frame.text = "Energy: "
    math = etree.fromstring(
        '<mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
        ' xmlns:a14="http://schemas.microsoft.com/office/drawing/2010/main"'
        f' xmlns:a="{A_NS}" xmlns:m="http://schemas.openxmlformats.org/officeDocument/2006/math">'
        '<mc:Choice Requires="a14"><a14:m><m:oMathPara><m:oMath><m:r><m:t>E=mc²</m:t></m:r></m:oMath>'
        "</m:oMathPara></a14:m></mc:Choice><mc:Fallback><a:r><a:t>picture of E</a:t></a:r></mc:Fallback>"
        "</mc:AlternateContent>"
    )
    box.text_frame.paragraphs[0]._p.append(math)
    doc = read_document(deck_bytes(prs), "eq.pptx")
    assert "Energy: E=mc²" in doc.text and "picture of E" not in doc.text


@pytest.mark.parametrize(
    "main",
    [
        "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml",  # .ppsx
        "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml",  # .potx
        "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",  # .pptm
    ],
)
def test_slide_shows_templates_and_macro_decks_read_like_decks(main: str):
    prs = Presentation()
    titled(prs, "Show", "Runs full screen")
    src = zipfile.ZipFile(io.BytesIO(deck_bytes(prs)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename == "[Content_Types].xml":
                body = body.replace(
                    b"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml", main.encode()
                )
            dst.writestr(info, body)
    doc = read_document(out.getvalue(), "show.ppsx")
    assert where(doc, "Runs full screen") == [(1, "Show")]
