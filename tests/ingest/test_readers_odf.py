"""OpenDocument (.odt/.ods/.odp) reader: documents written as package XML in the test."""

from __future__ import annotations

import io
import zipfile

import pytest

from knowledge.errors import EmptyDocument, PasswordRequired, UnsupportedFile
from knowledge.ingest import read_document

NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink" '
    'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"'
)


def section_at(doc, needle: str):
    """The section holding the first occurrence of ``needle``."""
    offset = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= offset < s.char_end)


KIND = {"odt": "text", "ods": "spreadsheet", "odp": "presentation"}


def content(body: str, kind: str = "text", styles: str = "", prolog: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>{prolog}<office:document-content {NS}>'
        f"<office:automatic-styles>{styles}</office:automatic-styles>"
        f"<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>"
    )


def styles_xml(masters: str = "", styles: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-styles {NS}><office:styles>{styles}'
        f"</office:styles><office:master-styles>{masters}</office:master-styles></office:document-styles>"
    )


def manifest(entries: str = "") -> str:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><manifest:manifest {NS}>'
        '<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>'
        f"{entries}</manifest:manifest>"
    )


def package(
    fmt: str,
    content_xml: str,
    *,
    styles: str | None = None,
    extra: dict[str, str | bytes] | None = None,
    manifest_xml: str | None = None,
    meta: str | None = None,
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), f"application/vnd.oasis.opendocument.{KIND[fmt]}")
        zf.writestr("content.xml", content_xml)
        if styles is not None:
            zf.writestr("styles.xml", styles)
        if meta is not None:
            zf.writestr("meta.xml", meta)
        zf.writestr("META-INF/manifest.xml", manifest_xml or manifest())
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return buf.getvalue()


LIST_STYLE = (
    '<text:list-style style:name="L1"><text:list-level-style-number text:level="1" '
    'style:num-format="1" style:num-suffix="."/></text:list-style>'
    '<text:list-style style:name="L2"><text:list-level-style-bullet text:level="1" '
    'text:bullet-char="-"/></text:list-style>'
)


def test_odt_body_headings_lists_spacing_notes_and_comments():
    body = (
        '<text:tracked-changes><text:changed-region text:id="c1"><text:deletion>'
        "<text:p>Deleted sentence</text:p></text:deletion></text:changed-region></text:tracked-changes>"
        '<text:h text:outline-level="1">Budget</text:h>'
        '<text:p>Costs<text:s text:c="3"/>rise<text:tab/>fast<text:line-break/>next line</text:p>'
        '<text:h text:outline-level="2">Travel</text:h>'
        '<text:p>Flights are booked<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>'
        "<text:note-body><text:p>Economy class only.</text:p></text:note-body></text:note> early.</text:p>"
        "<text:p>Hotel <office:annotation><dc:creator>Ada</dc:creator><dc:date>2024-01-01</dc:date>"
        "<text:p>Check the rate</text:p></office:annotation>near the venue</text:p>"
        '<text:list text:style-name="L1"><text:list-item><text:p>Alpha</text:p></text:list-item>'
        "<text:list-item><text:p>Beta</text:p></text:list-item></text:list>"
        '<text:list text:style-name="L2"><text:list-item><text:p>Gamma</text:p></text:list-item></text:list>'
    )
    doc = read_document(package("odt", content(body, styles=LIST_STYLE)), "plan.odt")
    assert doc.format == "odt"
    assert "Costs   rise\tfast\nnext line" in doc.text
    assert "Flights are booked[1] early." in doc.text
    assert "[1] Economy class only." in doc.text
    assert "Hotel near the venue" in doc.text
    assert "Comment (Ada): Check the rate" in doc.text
    assert "1. Alpha" in doc.text and "2. Beta" in doc.text and "- Gamma" in doc.text
    assert "Deleted sentence" not in doc.text
    assert "2024-01-01" not in doc.text
    assert section_at(doc, "Costs").heading == "Budget"
    assert section_at(doc, "Economy").heading == "Budget > Travel"
    assert section_at(doc, "Alpha").heading == "Budget > Travel"


def test_odt_tables_rows_as_header_value_lines_and_form_tables_as_cells():
    row = "<table:table-row>{}</table:table-row>".format
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'.format
    data = row(cell("Name") + cell("Role")) + row(cell("Ada") + cell("Engineer")) + row(cell("Alan") + cell("Analyst"))
    form = row(
        '<table:table-cell table:number-columns-spanned="2"><text:p>Form title</text:p></table:table-cell>'
        "<table:covered-table-cell/>"
    ) + row(cell("Court") + cell("Hasselt"))
    body = f"<table:table>{data}</table:table><table:table>{form}</table:table>"
    doc = read_document(package("odt", content(body)), "t.odt")
    assert "Name | Role\nName: Ada | Role: Engineer\nName: Alan | Role: Analyst" in doc.text
    assert "Form title\nCourt | Hasselt" in doc.text
    assert len(doc.tables) == 1


def test_odt_headers_and_footers_of_master_pages_once_without_computed_fields():
    footer = "<style:footer><text:p>Confidential <text:page-number>7</text:page-number></text:p></style:footer>"
    masters = (
        f'<style:master-page style:name="Standard"><style:header><text:p>Quarterly report</text:p>'
        f"</style:header>{footer}</style:master-page>"
        f'<style:master-page style:name="Other">{footer}'
        '<style:footer-left style:display="false"><text:p>Hidden left</text:p></style:footer-left>'
        "</style:master-page>"
    )
    doc = read_document(package("odt", content("<text:p>Body text</text:p>"), styles=styles_xml(masters)), "h.odt")
    assert doc.text.index("Quarterly report") < doc.text.index("Body text") < doc.text.index("Confidential")
    assert doc.text.count("Confidential") == 1
    assert "7" not in doc.text
    assert "Hidden left" not in doc.text


def test_odt_that_odfpy_refuses_still_reads_dtd_missing_part_no_meta():
    prolog = '<!DOCTYPE office:document-content SYSTEM "http://example.invalid/office.dtd">'
    missing = (
        '<manifest:file-entry manifest:full-path="Thumbnails/thumbnail.png" manifest:media-type="image/png"/>'
        '<manifest:file-entry manifest:full-path="meta.xml" manifest:media-type="text/xml"/>'
    )
    data = package("odt", content("<text:p>Still readable</text:p>", prolog=prolog), manifest_xml=manifest(missing))
    assert read_document(data, "nometa.odt").text == "Still readable"


def test_odt_frames_text_boxes_image_titles_and_title_from_meta():
    body = (
        '<text:p>Intro<draw:frame draw:name="f1"><svg:title>Org chart</svg:title>'
        "<svg:desc>Who reports to whom</svg:desc>"
        '<draw:image xlink:href="Pictures/x.png"/></draw:frame></text:p>'
        "<text:p><draw:frame><draw:text-box><text:p>Boxed remark</text:p></draw:text-box></draw:frame></text:p>"
    )
    meta = (
        f'<?xml version="1.0"?><office:document-meta {NS}><office:meta><dc:title>Annual plan</dc:title>'
        "</office:meta></office:document-meta>"
    )
    doc = read_document(package("odt", content(body), meta=meta), "f.odt")
    assert "Intro" in doc.text and "Org chart" in doc.text and "Who reports to whom" in doc.text
    assert "Boxed remark" in doc.text
    assert doc.title == "Annual plan"


def test_odt_macros_are_never_indexed():
    module = (
        '<?xml version="1.0"?><script:module xmlns:script="http://openoffice.org/2000/script" '
        'script:name="Module1">Sub Main\nIf Secret Then Shell("x")\nEnd Sub</script:module>'
    )
    doc = read_document(
        package("odt", content("<text:p>Hello dear user</text:p>"), extra={"Basic/Standard/Module1.xml": module}), "m.odt"
    )
    assert "Secret" not in doc.text and "Sub Main" not in doc.text
    assert "macros not read" in doc.warnings


def test_ods_sheets_are_sections_and_repeats_are_expanded_but_bounded():
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'.format
    sheet1 = (
        '<table:table table:name="Staff">'
        f"<table:table-row>{cell('Name')}{cell('Team')}{cell('Site')}</table:table-row>"
        f'<table:table-row>{cell("Ada")}<table:table-cell table:number-columns-repeated="2" '
        'office:value-type="string"><text:p>Core</text:p></table:table-cell>'
        '<table:table-cell table:number-columns-repeated="16000"/></table:table-row>'
        '<table:table-row table:number-rows-repeated="1048000"><table:table-cell '
        'table:number-columns-repeated="1024"/></table:table-row>'
        f'<table:table-row table:number-rows-repeated="5000">{cell("Same")}{cell("x")}{cell("y")}</table:table-row>'
        "</table:table>"
    )
    sheet2 = f'<table:table table:name="Notes"><table:table-row>{cell("Only one cell")}</table:table-row></table:table>'
    doc = read_document(package("ods", content(sheet1 + sheet2, kind="spreadsheet")), "s.ods")
    assert doc.format == "ods"
    assert "Name: Ada | Team: Core | Site: Core" in doc.text
    assert doc.text.count("Name: Same") == 100
    assert any("repeated 5,000 times" in w for w in doc.warnings)
    assert {s.heading for s in doc.sections} == {"Staff", "Notes"}
    assert section_at(doc, "Only one cell").heading == "Notes"
    assert doc.tables and doc.text[doc.tables[0].char_start : doc.tables[0].header_end] == "Name | Team | Site"


def test_odp_slides_are_pages_with_titles_notes_and_master_footer_once():
    def slide(name: str, title: str, text: str, notes: str) -> str:
        return (
            f'<draw:page draw:name="{name}" draw:master-page-name="M1" presentation:use-footer-name="ftr1">'
            f'<draw:frame presentation:class="title"><draw:text-box><text:p>{title}</text:p>'
            "</draw:text-box></draw:frame>"
            f'<draw:frame presentation:class="outline"><draw:text-box><text:p>{text}</text:p>'
            "</draw:text-box></draw:frame>"
            '<draw:frame presentation:class="subtitle" presentation:placeholder="true">'
            "<draw:text-box/></draw:frame>"
            '<presentation:notes><draw:page-thumbnail presentation:class="page"/>'
            f'<draw:frame presentation:class="notes"><draw:text-box><text:p>{notes}</text:p>'
            "</draw:text-box></draw:frame>"
            "</presentation:notes></draw:page>"
        )

    body = (
        '<presentation:footer-decl presentation:name="ftr1">Company footer</presentation:footer-decl>'
        + slide("page1", "Welcome", "Agenda today", "Say hello")
        + slide("Results", "", "Revenue grew", "Pause")
    )
    masters = (
        '<style:master-page style:name="M1"><draw:frame presentation:class="title" presentation:placeholder="true">'
        "<draw:text-box><text:p>Click to edit the title text format</text:p></draw:text-box></draw:frame>"
        '<draw:frame presentation:class="footer"><draw:text-box><text:p>Master footer is here</text:p>'
        "</draw:text-box></draw:frame>"
        '<draw:frame presentation:class="page-number"><draw:text-box><text:p><text:page-number>&lt;number&gt;'
        "</text:page-number></text:p></draw:text-box></draw:frame></style:master-page>"
        '<style:master-page style:name="Unused"><draw:frame><draw:text-box><text:p>Unused master</text:p>'
        "</draw:text-box></draw:frame></style:master-page>"
    )
    doc = read_document(package("odp", content(body, kind="presentation"), styles=styles_xml(masters)), "d.odp")
    assert doc.format == "odp"
    assert (section_at(doc, "Agenda today").page, section_at(doc, "Agenda today").heading) == (1, "Welcome")
    assert (section_at(doc, "Revenue grew").page, section_at(doc, "Revenue grew").heading) == (2, "Results")
    assert "Notes: Say hello" in doc.text and section_at(doc, "Say hello").page == 1
    assert doc.text.count("Master footer is here") == 1 and doc.text.count("Company footer") == 1
    assert "Click to edit" not in doc.text and "Unused master" not in doc.text and "<number>" not in doc.text


def test_encrypted_odf_needs_a_password():
    entries = (
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
        '<manifest:encryption-data manifest:checksum-type="SHA1/1K" manifest:checksum="x">'
        '<manifest:algorithm manifest:algorithm-name="Blowfish CFB" manifest:initialisation-vector="x"/>'
        "</manifest:encryption-data></manifest:file-entry>"
    )
    data = package("odt", "\x8b\x00 binary ciphertext", manifest_xml=manifest(entries))
    with pytest.raises(PasswordRequired, match="password required"):
        read_document(data, "secret.odt")


def test_bad_odf_input_fails_cleanly():
    good = package("odt", content("<text:p>Some text here</text:p>"))
    with pytest.raises(UnsupportedFile, match="damaged"):
        read_document(good[: len(good) // 2], "cut.odt")
    with pytest.raises(EmptyDocument):
        read_document(b"", "empty.odt")
    with pytest.raises(EmptyDocument, match="no text"):
        read_document(package("odt", content("<text:p>  </text:p>")), "blank.odt")
    with pytest.raises(UnsupportedFile, match=r"no content\.xml"):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        read_document(buf.getvalue(), "nocontent.odt")
    with pytest.raises(UnsupportedFile, match="damaged"):
        read_document(package("odt", "<office:document-content"), "broken.odt")
    assert read_document(good, "renamed.txt").format == "odt"  # the bytes decide, not the extension
