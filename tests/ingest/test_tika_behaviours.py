"""Behaviours Apache Tika's own parser tests assert (OOXMLDocxSAXTest, OOXMLPptxSAXTest,
OOXMLParserTest, ODFParserTest, RTFParserTest, RFC822ParserTest, HtmlParserTest), each checked with
an input built here, under the product's rule: what a person sees in the application is indexed;
what they do not see (hidden by formatting, on parts no slide or page shows, deleted) is left out
and named in the warnings -- or, where Tika and the application keep it (hidden slides, sheets,
rows), indexed and named in the warnings.
"""

from __future__ import annotations

import copy
import io
import zipfile

import openpyxl
from pptx import Presentation
from pptx.util import Inches

from knowledge.ingest.readers import read_document

# -- builders (plain functions returning bytes) ----------------------------------------------------

_W = (
    'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
    'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
)
_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"


def docx_xml(body: str, *, styles: str = "", settings: str | None = None, headers: dict[str, str] | None = None) -> bytes:
    """A minimal .docx whose ``w:body`` is ``body`` (WordprocessingML), with ``styles`` inside
    ``w:styles``, optional ``settings`` inside ``w:settings`` and ``headers`` ``{rId: inner XML}``
    saved as header parts the body's ``w:sectPr`` can reference."""
    headers = headers or {}
    rels = f'<Relationship Id="rS" Type="{_RT}styles" Target="styles.xml"/>'
    if settings is not None:
        rels += f'<Relationship Id="rSet" Type="{_RT}settings" Target="settings.xml"/>'
    rels += "".join(f'<Relationship Id="{rid}" Type="{_RT}header" Target="{rid}.xml"/>' for rid in headers)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr(
            "[Content_Types].xml",
            '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            '<Override PartName="/word/document.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            f'relationships"><Relationship Id="rId1" Type="{_RT}officeDocument" '
            'Target="word/document.xml"/></Relationships>',
        )
        z.writestr(
            "word/_rels/document.xml.rels",
            f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>',
        )
        z.writestr("word/document.xml", f"<w:document {_W}><w:body>{body}</w:body></w:document>")
        z.writestr("word/styles.xml", f"<w:styles {_W}>{styles}</w:styles>")
        if settings is not None:
            z.writestr("word/settings.xml", f"<w:settings {_W}>{settings}</w:settings>")
        for rid, inner in headers.items():
            z.writestr(f"word/{rid}.xml", f"<w:hdr {_W}>{inner}</w:hdr>")
    return out.getvalue()


def run(text: str, rpr: str = "") -> str:
    """A ``w:r`` with ``text`` and run properties ``rpr``."""
    return f'<w:r><w:rPr>{rpr}</w:rPr><w:t xml:space="preserve">{text}</w:t></w:r>'


def para(*runs: str, ppr: str = "") -> str:
    """A ``w:p`` of ``runs``."""
    return f"<w:p><w:pPr>{ppr}</w:pPr>{''.join(runs)}</w:p>"


_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/"'
)
_ODF_TYPES = {
    "odt": ("text", "application/vnd.oasis.opendocument.text"),
    "ods": ("spreadsheet", "application/vnd.oasis.opendocument.spreadsheet"),
    "odp": ("presentation", "application/vnd.oasis.opendocument.presentation"),
}


def odf_xml(kind: str, body: str, *, automatic_styles: str = "", styles: str = "") -> bytes:
    """A minimal OpenDocument package (``kind`` odt/ods/odp) whose ``office:text`` (or spreadsheet,
    presentation) holds ``body``; ``automatic_styles`` go into content.xml, ``styles`` into styles.xml."""
    tag, mime = _ODF_TYPES[kind]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", mime)
        z.writestr(
            "META-INF/manifest.xml",
            '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
            f'<manifest:file-entry manifest:full-path="/" manifest:media-type="{mime}"/></manifest:manifest>',
        )
        z.writestr(
            "content.xml",
            f'<office:document-content {_ODF_NS} office:version="1.2"><office:automatic-styles>'
            f"{automatic_styles}</office:automatic-styles><office:body><office:{tag}>{body}</office:{tag}>"
            "</office:body></office:document-content>",
        )
        z.writestr(
            "styles.xml",
            f"<office:document-styles {_ODF_NS}><office:styles>{styles}</office:styles></office:document-styles>",
        )
    return out.getvalue()


_RTF = rb"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Times;}}"


def rtf(body: bytes) -> bytes:
    """An RTF document with ``body`` after the font table."""
    return _RTF + body + b"}"


def pptx_with_hidden_parts() -> bytes:
    """A deck: slide 1 with a shown and a hidden text box (``cNvPr hidden``), slide 2 hidden
    (``show="0"``), a text box on a layout slide 1 uses and one on a layout no slide uses."""
    prs = Presentation()
    blank = prs.slide_layouts[6]
    slide = prs.slides.add_slide(blank)
    slide.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(1)).text = "ShownShape"
    hidden = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(2), Inches(1))
    hidden.text = "HiddenShape"
    hidden._element.nvSpPr.cNvPr.set("hidden", "1")
    second = prs.slides.add_slide(blank)
    second.shapes.add_textbox(0, 0, Inches(1), Inches(1)).text = "OnHiddenSlide"
    second._element.set("show", "0")
    for layout, text in ((blank, "UsedLayoutBox"), (prs.slide_layouts[3], "UnusedLayoutBox")):
        sp = copy.deepcopy(slide.shapes[0]._element)
        sp.txBody.p_lst[0].r_lst[0].t.text = text
        layout.shapes._spTree.append(sp)
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def read(data: bytes, name: str):
    return read_document(data, name)


def warned(doc, *words: str) -> bool:
    return any(all(w in warning for w in words) for warning in doc.warnings)


# -- DOCX (OOXMLDocxSAXTest) -------------------------------------------------------------------------


def test_docx_tracked_changes_deleted_and_moved_from_left_out_inserted_read():
    # testDocxVarious asserts "frog" (a deletion) absent; testSkipDeleted shows it only on request
    doc = read(
        docx_xml(
            para(
                run("Kept"),
                '<w:del w:id="1" w:author="a"><w:r><w:delText>Frog</w:delText></w:r></w:del>',
                '<w:ins w:id="2" w:author="a">' + run("Inserted") + "</w:ins>",
            )
            + para('<w:moveFrom w:id="3" w:author="a">' + run("MovedAway") + "</w:moveFrom>")
            + para('<w:moveTo w:id="4" w:author="a">' + run("MovedHere") + "</w:moveTo>")
            + "<w:tbl><w:tr><w:tc>"
            + para(run("CellKept"))
            + '</w:tc><w:tc><w:tcPr><w:cellDel w:id="5" w:author="a"/>'
            "</w:tcPr>" + para(run("CellDeleted")) + '</w:tc></w:tr><w:tr><w:trPr><w:del w:id="6" w:author="a"/>'
            "</w:trPr><w:tc>" + para(run("RowDeleted")) + "</w:tc></w:tr></w:tbl>"
        ),
        "t.docx",
    )
    for seen in ("Kept", "Inserted", "MovedHere", "CellKept"):
        assert seen in doc.text
    for gone in ("Frog", "MovedAway", "CellDeleted", "RowDeleted"):
        assert gone not in doc.text
    assert warned(doc, "tracked changes", "4 deleted passages")


def test_docx_hidden_text_left_out_directly_by_style_and_by_document_default():
    styles = (
        '<w:style w:type="character" w:styleId="Hid"><w:rPr><w:vanish/></w:rPr></w:style>'
        '<w:style w:type="character" w:styleId="Hid2"><w:basedOn w:val="Hid"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="HidP"><w:rPr><w:vanish/></w:rPr></w:style>'
    )
    doc = read(
        docx_xml(
            para(run("Seen"), run("Vanished", "<w:vanish/>"), run("ShownAgain", '<w:vanish w:val="0"/>'))
            + para(run("ByBasedOn", '<w:rStyle w:val="Hid2"/>'))
            + para(run("ByParagraphStyle"), ppr='<w:pStyle w:val="HidP"/>'),
            styles=styles,
        ),
        "t.docx",
    )
    assert "Seen" in doc.text and "ShownAgain" in doc.text
    assert "Vanished" not in doc.text and "ByBasedOn" not in doc.text and "ByParagraphStyle" not in doc.text
    assert warned(doc, "3 passages", "hidden")
    default = read(
        docx_xml(
            para(run("AllHidden")) + para(run("Unhidden", '<w:vanish w:val="0"/>')),
            styles="<w:docDefaults><w:rPrDefault><w:rPr><w:vanish/></w:rPr></w:rPrDefault></w:docDefaults>",
        ),
        "t.docx",
    )
    assert "Unhidden" in default.text and "AllHidden" not in default.text


def test_docx_field_results_read_field_codes_not():
    doc = read(
        docx_xml(
            para(
                '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> HYPERLINK "http://example.org" '
                '</w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>'
                + run("LinkResult")
                + '<w:r><w:fldChar w:fldCharType="end"/></w:r>',
                '<w:fldSimple w:instr="DATE">' + run("SimpleResult") + "</w:fldSimple>",
            )
        ),
        "t.docx",
    )
    assert "LinkResult" in doc.text and "SimpleResult" in doc.text
    assert "HYPERLINK" not in doc.text and "example.org" not in doc.text


def test_docx_phonetic_guide_follows_its_base_in_parentheses():
    # testDOCXPhoneticStrings: "東京 (とうきょう)"; before, the whole ruby run was dropped
    doc = read(
        docx_xml(
            para(
                run("Tokyo: "),
                "<w:r><w:ruby><w:rubyPr/><w:rt>"
                + run("とうきょう")
                + "</w:rt><w:rubyBase>"
                + run("東京")
                + "</w:rubyBase></w:ruby></w:r>",
            )
        ),
        "t.docx",
    )
    assert "東京 (とうきょう)" in doc.text


def test_docx_first_and_even_headers_only_where_word_shows_them():
    first = para(run("FirstPageHeader"))
    default = para(run("DefaultHeader"))
    unshown = read(
        docx_xml(
            para(run("Body")) + '<w:sectPr><w:headerReference w:type="default" r:id="h1"/>'
            '<w:headerReference w:type="first" r:id="h2"/>'
            '<w:headerReference w:type="even" r:id="h3"/></w:sectPr>',
            headers={"h1": default, "h2": first, "h3": para(run("EvenPageHeader"))},
        ),
        "t.docx",
    )
    assert "DefaultHeader" in unshown.text
    assert "FirstPageHeader" not in unshown.text and "EvenPageHeader" not in unshown.text
    assert warned(unshown, "first-page header", "does not show") and warned(unshown, "even-page header")
    shown = read(
        docx_xml(
            para(run("Body")) + '<w:sectPr><w:headerReference w:type="first" r:id="h2"/>'
            '<w:headerReference w:type="even" r:id="h3"/><w:titlePg/></w:sectPr>',
            headers={"h2": first, "h3": para(run("EvenPageHeader"))},
            settings="<w:evenAndOddHeaders/>",
        ),
        "t.docx",
    )
    assert "FirstPageHeader" in shown.text and "EvenPageHeader" in shown.text
    # a later section with w:titlePg and no first header of its own shows the one it inherits
    inherited = read(
        docx_xml(
            para(run("One"), ppr='<w:sectPr><w:headerReference w:type="first" r:id="h2"/></w:sectPr>')
            + para(run("Two"))
            + "<w:sectPr><w:titlePg/></w:sectPr>",
            headers={"h2": first},
        ),
        "t.docx",
    )
    assert "FirstPageHeader" in inherited.text


def test_docx_text_box_read_once_hidden_paragraph_in_it_left_out():
    box = "<w:txbxContent>" + para(run("BoxText")) + para(run("BoxHidden", "<w:vanish/>")) + "</w:txbxContent>"
    body = para(
        '<w:r><mc:AlternateContent xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006">'
        '<mc:Choice Requires="wps"><w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/'
        'drawingml/2006/wordprocessingDrawing"><a:graphic xmlns:a="http://schemas.openxmlformats.org/'
        'drawingml/2006/main"><a:graphicData uri="x"><wps:wsp xmlns:wps="http://schemas.microsoft.com/'
        f'office/word/2010/wordprocessingShape"><wps:txbx>{box}</wps:txbx></wps:wsp></a:graphicData>'
        "</a:graphic></wp:inline></w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape "
        f'xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox>{box}</v:textbox></v:shape></w:pict>'
        "</mc:Fallback></mc:AlternateContent></w:r>"
    )
    doc = read(docx_xml(body), "t.docx")
    assert doc.text.count("BoxText") == 1 and "BoxHidden" not in doc.text


# -- PPTX (OOXMLPptxSAXTest, SXSLFPowerPointExtractorDecorator) ---------------------------------------


def test_pptx_hidden_slide_read_and_named_hidden_shape_and_unused_layout_left_out():
    doc = read(pptx_with_hidden_parts(), "t.pptx")
    assert "ShownShape" in doc.text and "OnHiddenSlide" in doc.text and "UsedLayoutBox" in doc.text
    assert "HiddenShape" not in doc.text and "UnusedLayoutBox" not in doc.text
    assert warned(doc, "slide 2 is hidden")
    assert warned(doc, "1 hidden shape", "left out")
    assert warned(doc, "1 slide layout that no slide uses", "left out")


# -- XLSX (OOXMLParserTest; hidden rows and columns) -----------------------------------------------


def test_xlsx_hidden_rows_columns_and_sheets_read_and_named():
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Data"
    ws["A1"], ws["B1"], ws["A2"], ws["A3"] = "Name", "Secret", "HiddenRowValue", "Shown"
    ws["B3"] = "HiddenColumnValue"
    ws.row_dimensions[2].hidden = True
    ws.row_dimensions[9].hidden = True  # hidden but empty: not worth a word
    ws.column_dimensions["B"].hidden = True
    extra = wb.create_sheet("Later")
    extra["A1"] = "OnHiddenSheet"
    extra.sheet_state = "hidden"
    out = io.BytesIO()
    wb.save(out)
    doc = read(out.getvalue(), "t.xlsx")
    for text in ("HiddenRowValue", "HiddenColumnValue", "OnHiddenSheet"):
        assert text in doc.text
    assert warned(doc, "sheet 'Data'", "1 row and column B", "hidden")
    assert warned(doc, "sheet 'Later' is hidden")


# -- ODF (ODFParserTest) -------------------------------------------------------------------------------


def test_odt_hidden_text_styles_and_hidden_paragraphs_left_out():
    doc = read(
        odf_xml(
            "odt",
            '<text:p>Seen <text:span text:style-name="T1">HiddenSpan</text:span> '
            '<text:span text:style-name="Child">HiddenByParent</text:span></text:p>'
            '<text:p text:style-name="P1">HiddenParagraph</text:p>'
            '<text:p><text:hidden-paragraph text:condition="ooow:1==1" text:is-hidden="true"/>HiddenByField</text:p>'
            '<text:p>A<text:hidden-text text:condition="ooow:1" text:string-value="HiddenTextField" '
            'text:is-hidden="true"/>B</text:p>',
            automatic_styles='<style:style style:name="T1" style:family="text"><style:text-properties text:display="none"/>'
            '</style:style><style:style style:name="P1" style:family="paragraph"><style:text-properties'
            ' text:display="none"/></style:style>',
            styles='<style:style style:name="Hid" style:family="text"><style:text-properties text:display="none"/>'
            '</style:style><style:style style:name="Child" style:family="text" style:parent-style-name="Hid"/>',
        ),
        "t.odt",
    )
    assert "Seen" in doc.text and "AB" in doc.text
    for gone in ("HiddenSpan", "HiddenByParent", "HiddenParagraph", "HiddenByField", "HiddenTextField"):
        assert gone not in doc.text
    assert warned(doc, "4 passages", "hidden")


def test_odt_tracked_deletion_left_out_and_named_insertion_read():
    doc = read(
        odf_xml(
            "odt",
            '<text:tracked-changes><text:changed-region text:id="c1"><text:deletion><office:change-info>'
            "<dc:creator>a</dc:creator></office:change-info><text:p>DeletedOdf</text:p></text:deletion>"
            '</text:changed-region></text:tracked-changes><text:p>Kept<text:change text:change-id="c1"/> '
            "InsertedOdf</text:p>",
        ),
        "t.odt",
    )
    assert "Kept" in doc.text and "InsertedOdf" in doc.text and "DeletedOdf" not in doc.text
    assert warned(doc, "tracked changes", "1 deleted passage")


def test_odp_hidden_slide_read_and_named():
    doc = read(
        odf_xml(
            "odp",
            '<draw:page draw:name="a"><draw:frame><draw:text-box><text:p>FirstSlide</text:p></draw:text-box>'
            '</draw:frame></draw:page><draw:page draw:name="b" draw:style-name="dp2"><draw:frame><draw:text-box>'
            "<text:p>HiddenSlideText</text:p></draw:text-box></draw:frame></draw:page>",
            automatic_styles='<style:style style:name="dp2" style:family="drawing-page"><style:drawing-page-properties '
            'presentation:visibility="hidden"/></style:style>',
        ),
        "t.odp",
    )
    assert "HiddenSlideText" in doc.text and warned(doc, "slide 2 is hidden")


def test_ods_hidden_and_filtered_rows_read_and_named():
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'
    doc = read(
        odf_xml(
            "ods",
            '<table:table table:name="S1"><table:table-column table:visibility="collapse"/><table:table-column/>'
            f"<table:table-row>{cell.format('Head')}{cell.format('Other')}</table:table-row>"
            f'<table:table-row table:visibility="collapse">{cell.format("CollapsedRow")}</table:table-row>'
            f'<table:table-row table:visibility="filter">{cell.format("FilteredRow")}</table:table-row>'
            "</table:table>",
        ),
        "t.ods",
    )
    assert "CollapsedRow" in doc.text and "FilteredRow" in doc.text
    assert warned(doc, "sheet 'S1'", "2 rows and 1 column", "hidden or filtered")


# -- RTF (RTFParserTest) -------------------------------------------------------------------------------


def test_rtf_hidden_and_deleted_text_left_out_and_named():
    doc = read(rtf(rb"\pard Seen {\v HiddenV} After {\deleted DeletedRev} {\revised InsertedRev}\par"), "t.rtf")
    assert "Seen" in doc.text and "After" in doc.text and "InsertedRev" in doc.text
    assert "HiddenV" not in doc.text and "DeletedRev" not in doc.text
    assert warned(doc, "1 passage", "hidden") and warned(doc, "1 passage", "deleted")


def test_rtf_unicode_skips_its_fallback_and_star_destinations_are_dropped():
    # testUnicodeUCNControlWordCharacterDoubling; \* destinations a reader does not know are skipped
    doc = read(
        rtf(
            rb"\pard \uc1\u26085?\u26412? \uc0\u12354 End{\*\generator GeneratorName}"
            rb"{\*\unknowndest UnknownDest}{\field{\*\fldinst HYPERLINK x}{\fldrslt FieldResult}}\par"
        ),
        "t.rtf",
    )
    assert "日本 あEnd" in doc.text and "?" not in doc.text and "FieldResult" in doc.text
    assert "GeneratorName" not in doc.text and "UnknownDest" not in doc.text and "HYPERLINK" not in doc.text


# -- mail (RFC822ParserTest) and HTML (HtmlParserTest) ----------------------------------------------


def test_mail_alternative_once_encoded_headers_and_attachment_names():
    raw = (
        b"From: =?UTF-8?B?SsO8cmdlbg==?= <j@example.org>\r\nTo: a@example.org\r\n"
        b"Subject: =?ISO-8859-1?Q?Caf=E9_notes?=\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="B1"\r\n\r\n--B1\r\n'
        b'Content-Type: multipart/alternative; boundary="B2"\r\n\r\n--B2\r\n'
        b"Content-Type: text/plain; charset=utf-8\r\n\r\nPlainAlternative\r\n--B2\r\n"
        b"Content-Type: text/html; charset=utf-8\r\n\r\n<p>HtmlAlternative</p>"
        b'<div style="display:none">MailHidden</div>\r\n--B2--\r\n--B1\r\n'
        b"Content-Type: text/plain\r\nContent-Disposition: attachment; "
        b"filename*=UTF-8''r%C3%A9sum%C3%A9.txt\r\n\r\nAttachedText\r\n--B1--\r\n"
    )
    doc = read(raw, "t.eml")
    assert "Café notes" in doc.text and "Jürgen" in doc.text
    assert "HtmlAlternative" in doc.text and "PlainAlternative" not in doc.text and "MailHidden" not in doc.text
    assert "résumé.txt" in doc.text and "AttachedText" in doc.text


def test_html_script_style_and_hidden_left_out_title_and_charset_read():
    page = (
        "<html><head><meta charset='koi8-r'><title>PageTitle</title><style>.h{display:none}</style>"
        "<script>var ScriptText=1</script></head><body><p>\u041f\u0440\u0438\u0432\u0435\u0442</p>"
        "<p class=h>ClassHidden</p><div hidden>AttrHidden</div><span aria-hidden=true>AriaHidden</span>"
        "<p style='visibility:hidden'>InvisibleText</p><!-- CommentText --></body></html>"
    ).encode("koi8-r")
    doc = read(page, "t.html")
    assert "Привет" in doc.text and doc.title == "PageTitle"
    for gone in ("ScriptText", "ClassHidden", "AttrHidden", "AriaHidden", "InvisibleText", "CommentText"):
        assert gone not in doc.text
