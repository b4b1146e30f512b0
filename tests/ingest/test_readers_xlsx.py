"""The Excel reader (issue 27): workbooks built here with openpyxl, values as Excel shows them."""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile

import pytest
from openpyxl import Workbook
from openpyxl.comments import Comment

from knowledge.errors import EmptyDocument, PasswordRequired, UnsupportedFile
from knowledge.ingest import read_document
from knowledge.ingest._detect import detect_format
from knowledge.ingest._numfmt import format_number, format_text, general
from tests.helpers.hostile_sheets import xlsx_bytes
from tests.helpers.ole import cfb, ole10native


def rewrite(data: bytes, part: str, edit) -> bytes:
    """``data`` with the zip member ``part`` replaced by ``edit(text)`` (other members as they are)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == part:
                body = edit(body.decode("utf-8")).encode("utf-8")
            dst.writestr(info.filename, body)
    return out.getvalue()


def add_member(data: bytes, name: str, body: bytes) -> bytes:
    out = io.BytesIO(data)
    with zipfile.ZipFile(out, "a") as zf:
        zf.writestr(name, body)
    return out.getvalue()


def test_number_formats_render_as_excel_shows_them():
    wb = Workbook()
    ws = wb.active
    ws.title = "Budget"
    ws.append(["Item", "Share", "Due", "Cost", "Units", "Part", "Count", "Serial"])
    ws.append(["Paper", 0.5, dt.datetime(2024, 3, 15), 1234.5, 1234567, 1.25, 196.0, 123456789012345])
    ws["B2"].number_format = "0%"
    ws["C2"].number_format = "dd/mm/yyyy"
    ws["D2"].number_format = '"$"#,##0.00'
    ws["E2"].number_format = "#,##0"
    ws["F2"].number_format = "# ?/?"
    doc = read_document(xlsx_bytes(wb), "budget.xlsx")
    assert doc.format == "xlsx"
    line = doc.text.splitlines()[0]
    assert line == (
        "row 2 | Item: Paper | Share: 50% | Due: 15/03/2024 | Cost: $1,234.50 | Units: 1,234,567"
        " | Part: 1 1/4 | Count: 196 | Serial: 1.23457E+14"
    )
    assert "196.0" not in doc.text and "0.5" not in doc.text


@pytest.mark.parametrize(
    ("value", "code", "shown"),
    [
        (2 / 3, "0.0%", "66.7%"),
        (0.125, "0.00", "0.13"),
        (-1234.5, '"$"#,##0.00_);("$"#,##0.00)', "($1,234.50)"),
        (0, '0;-0;"none"', "none"),
        (1500000, '0.0,,"M"', "1.5M"),
        (5551234, "000-0000", "555-1234"),
        (0.000123, "0.00E+00", "1.23E-04"),
        (12345, "##0.0E+0", "12.3E+3"),
        (0.6834375, "h:mm:ss", "16:24:09"),
        (1.5, "[h]:mm", "36:00"),
        (44197.75, "m/d/yyyy h:mm AM/PM", "1/1/2021 6:00 PM"),
        (44197, "[$-F800]dddd, mmmm dd, yyyy", "Friday, January 1, 2021"),
        (150, '[>=100]"big";"small"', "big"),
        (1234.5, "[$€-407]#,##0.00", "€1,234.50"),
        (0.3333, "# ??/??", "1/3"),
        (60, "m/d/yyyy", "2/29/1900"),
        (1 / 3, "General", "0.333333333"),
        (1e-12, "General", "1E-12"),
        (-3.75, "# ?/?", "-3 3/4"),
    ],
)
def test_format_codes(value, code, shown):
    assert format_number(value, code) == shown


def test_format_never_raises_and_text_sections_apply():
    assert format_number(-5, "dd/mm/yyyy") == general(-5)  # Excel shows ##### for a negative date
    assert format_number(1e9, "yyyy") == general(1e9)  # past 9999
    assert format_number(float("nan"), "0") == "#NUM!"
    assert format_text("north", '0;-0;0;"region "@') == "region north"
    assert format_number(1462, "m/d/yyyy", date1904=True) == "1/2/1908"


def test_formula_cell_shows_its_cached_result_not_the_formula():
    wb = Workbook()
    ws = wb.active
    ws.append(["Number", "Double"])
    ws.append([21, "=A2*2"])
    data = xlsx_bytes(wb)
    # openpyxl writes no cached value; Excel would: put one in as Excel saves it.
    data = rewrite(
        data, "xl/worksheets/sheet1.xml", lambda xml: re.sub(r"(<f>A2\*2</f>)(<v\s*/>|<v></v>)?", r"\1<v>42</v>", xml)
    )
    doc = read_document(data, "calc.xlsx")
    assert "row 2 | Number: 21 | Double: 42" in doc.text
    assert "A2*2" not in doc.text


def test_formula_without_cached_value_is_left_out_and_named():
    wb = Workbook()
    wb.active.append(["Total", "=SUM(1,2)"])
    wb.active.append(["Note", "kept"])
    doc = read_document(xlsx_bytes(wb), "calc.xlsx")
    assert "SUM" not in doc.text
    assert any("no saved result" in w for w in doc.warnings)


def test_merged_cells_value_stands_in_each_row_it_spans():
    wb = Workbook()
    ws = wb.active
    ws.append(["Category", "Item"])
    ws.append(["Fruit", "Apple"])
    ws.append([None, "Pear"])
    ws.merge_cells("A2:A3")
    doc = read_document(xlsx_bytes(wb), "stock.xlsx")
    assert "row 3 | Category: Fruit | Item: Pear" in doc.text


def test_hidden_sheet_is_read_and_named_in_warnings():
    wb = Workbook()
    wb.active.title = "Public"
    wb.active.append(["visible text"])
    hidden = wb.create_sheet("Secret plans")
    hidden.append(["hidden text"])
    hidden.sheet_state = "hidden"
    doc = read_document(xlsx_bytes(wb), "plans.xlsx")
    assert "hidden text" in doc.text
    assert "sheet 'Secret plans' is hidden: read anyway" in doc.warnings


def test_comment_header_footer_and_provenance():
    wb = Workbook()
    ws = wb.active
    ws.title = "Q1"
    ws.append(["Region", "Sales"])
    ws.append(["North", 10])
    ws["B2"].comment = Comment("Check this figure", "Ada")
    ws.oddHeader.center.text = "Quarterly report"
    ws.oddFooter.right.text = "Page &P of &N"
    second = wb.create_sheet("Q2")
    second.append(["Region", "Sales"])
    second.append(["South", 20])
    doc = read_document(xlsx_bytes(wb), "sales.xlsx")
    assert "page header: Quarterly report" in doc.text
    assert "page footer: Page of" in doc.text and "&P" not in doc.text
    assert "comment on B2 (Ada): Check this figure" in doc.text
    by_heading = {s.heading: doc.text[s.char_start : s.char_end] for s in doc.sections}
    assert set(by_heading) == {"Q1", "Q2"}
    assert "row 2 | Region: South | Sales: 20" in by_heading["Q2"]
    assert "North" not in by_heading["Q2"]
    assert all(s.page is None for s in doc.sections)


def test_title_rows_above_the_header_are_plain_lines():
    wb = Workbook()
    ws = wb.active
    ws["A1"] = "Sample Worksheet - Numbers and their Squares"
    ws.append([])
    ws.append(["Number", "Square"])
    ws.append([3, 9])
    doc = read_document(xlsx_bytes(wb), "squares.xlsx")
    assert doc.text.splitlines()[:2] == [
        "row 1 | Sample Worksheet - Numbers and their Squares",
        "row 4 | Number: 3 | Square: 9",
    ]


def test_phonetic_runs_of_shared_strings_are_appended_after_a_space():
    wb = Workbook()
    wb.active.append(["Name", "Id"])
    wb.active.append(["placeholder", 1])
    data = xlsx_bytes(wb)
    # openpyxl writes inline strings and drops rPh: put a shared string with a phonetic run in,
    # as Excel writes it.
    sst = (
        '<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1">'
        '<si><t>日本オラクル</t><rPh sb="0" eb="2"><t>ニホン</t></rPh><phoneticPr fontId="1"/></si></sst>'
    )
    data = rewrite(
        data,
        "xl/worksheets/sheet1.xml",
        lambda xml: re.sub(r'<c r="A2" t="inlineStr"><is>.*?</is></c>', '<c r="A2" t="s"><v>0</v></c>', xml),
    )
    data = rewrite(
        data,
        "xl/_rels/workbook.xml.rels",
        lambda xml: xml.replace(
            "</Relationships>",
            '<Relationship Id="rIdSst" Target="sharedStrings.xml" Type="http://schemas.'
            'openxmlformats.org/officeDocument/2006/relationships/sharedStrings"/></Relationships>',
        ),
    )
    data = rewrite(
        data,
        "[Content_Types].xml",
        lambda xml: xml.replace(
            "</Types>",
            '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.sharedStrings+xml"/></Types>',
        ),
    )
    data = add_member(data, "xl/sharedStrings.xml", sst.encode("utf-8"))
    doc = read_document(data, "names.xlsx")
    assert "row 2 | Name: 日本オラクル ニホン | Id: 1" in doc.text


def test_embedded_document_is_read_with_its_own_reader():
    docx = pytest.importorskip("docx")
    note = docx.Document()
    note.add_paragraph("Minutes of the embedded meeting.")
    buf = io.BytesIO()
    note.save(buf)
    wb = Workbook()
    wb.active.append(["Sheet text", "here"])
    data = add_member(xlsx_bytes(wb), "xl/embeddings/minutes.docx", buf.getvalue())
    doc = read_document(data, "book.xlsx")
    assert "Minutes of the embedded meeting." in doc.text
    section = next(s for s in doc.sections if "Minutes" in doc.text[s.char_start : s.char_end])
    assert section.heading == "minutes.docx"


def test_embedded_part_that_fails_is_a_warning():
    wb = Workbook()
    wb.active.append(["Sheet text", "here"])
    data = add_member(xlsx_bytes(wb), "xl/embeddings/broken.pdf", b"%PDF-1.4 truncated")
    doc = read_document(data, "book.xlsx")
    assert "Sheet text" in doc.text
    assert any(w.startswith("broken.pdf: not read:") for w in doc.warnings)


def test_embedded_ole_package_is_read_under_the_file_name_it_carries():
    wb = Workbook()
    wb.active.append(["Sheet text", "here"])
    blob = cfb("\x01Ole10Native", ole10native("packing list.txt", b"PUFFIN-8 spare batteries\n"))
    doc = read_document(add_member(xlsx_bytes(wb), "xl/embeddings/oleObject1.bin", blob), "book.xlsx")
    section = next(s for s in doc.sections if "PUFFIN-8" in doc.text[s.char_start : s.char_end])
    assert section.heading == "packing list.txt"


def test_embedded_equation_is_a_warning_and_a_chart_data_workbook_is_left_out():
    data_wb = Workbook()
    data_wb.active.append(["Series", "CORMORANT-4 chart data"])
    wb = Workbook()
    wb.active.append(["Sheet text", "here"])
    data = add_member(xlsx_bytes(wb), "xl/embeddings/oleObject2.bin", cfb("Equation Native", b"\x1c\x00" * 8))
    data = add_member(data, "xl/embeddings/Microsoft_Excel_Worksheet.xlsx", xlsx_bytes(data_wb))
    data = add_member(
        data,
        "xl/charts/_rels/chart1.xml.rels",
        (
            b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
            b'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            b'2006/relationships/package" Target="../embeddings/Microsoft_Excel_Worksheet.xlsx"/></Relationships>'
        ),
    )
    doc = read_document(data, "book.xlsx")
    assert "Sheet text" in doc.text and "CORMORANT-4" not in doc.text
    assert any(w.startswith("embedded oleObject2.bin: not read:") and "kind without text" in w for w in doc.warnings), (
        doc.warnings
    )


# -- bad input ------------------------------------------------------------------------------------


def test_truncated_workbook_is_damaged():
    wb = Workbook()
    wb.active.append(["some", "values"] * 50)
    data = xlsx_bytes(wb)
    with pytest.raises(UnsupportedFile, match=r"unreadable|damaged"):
        read_document(data[: len(data) // 2], "cut.xlsx")


def test_empty_workbook_is_empty_document():
    with pytest.raises(EmptyDocument, match="no text: the workbook has no values"):
        read_document(xlsx_bytes(Workbook()), "empty.xlsx")


def test_wrong_extension_is_read_by_its_content():
    docx = pytest.importorskip("docx")
    word = docx.Document()
    word.add_paragraph("A Word file named like a workbook.")
    buf = io.BytesIO()
    word.save(buf)
    doc = read_document(buf.getvalue(), "looks-like.xlsx")
    assert doc.format == "docx" and "named like a workbook" in doc.text
    wb = Workbook()
    wb.active.append(["cell", "text"])
    assert read_document(xlsx_bytes(wb), "looks-like.docx").format == "xlsx"


def test_package_without_workbook_part_is_unreadable():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("xl/workbook.xml", "<x/>")
    with pytest.raises(UnsupportedFile, match="unreadable Excel workbook"):
        read_document(buf.getvalue(), "a.xlsx")


def test_binary_workbook_is_named():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("xl/workbook.bin", b"\x00\x01")
    with pytest.raises(UnsupportedFile, match=r"\.xlsb"):
        read_document(buf.getvalue(), "a.xlsb")


def test_encrypted_workbook_needs_its_password(tmp_path):
    from msoffcrypto.format.ooxml import OOXMLFile

    wb = Workbook()
    wb.active.append(["Topic", "Secret"])
    wb.active.append(["launch", "codename osprey"])
    plain = tmp_path / "plain.xlsx"
    plain.write_bytes(xlsx_bytes(wb))
    out = io.BytesIO()
    with plain.open("rb") as f:
        OOXMLFile(f).encrypt("tika", out)
    data = out.getvalue()
    with pytest.raises(PasswordRequired):
        read_document(data, "secret.xlsx")
    with pytest.raises(PasswordRequired):
        read_document(data, "secret.xlsx", password="wrong")
    doc = read_document(data, "secret.xlsx", password="tika")
    assert "Secret: codename osprey" in doc.text


# -- legacy .xls (xlrd) ---------------------------------------------------------------------------


def xls_bytes() -> bytes:
    xlwt = pytest.importorskip("xlwt")
    wb = xlwt.Workbook()
    ws = wb.add_sheet("Budget")
    for col, name in enumerate(["Item", "Share", "Due", "Cost", "Count"]):
        ws.write(0, col, name)
    ws.write(1, 0, "Paper")
    ws.write(1, 1, 0.5, xlwt.easyxf(num_format_str="0%"))
    ws.write(1, 2, dt.datetime(2024, 3, 15), xlwt.easyxf(num_format_str="dd/mm/yyyy"))
    ws.write(1, 3, 1234.5, xlwt.easyxf(num_format_str='"$"#,##0.00'))
    ws.write(1, 4, 196.0)
    ws.write_merge(2, 3, 0, 0, "Ink")
    ws.write(3, 1, 0.25, xlwt.easyxf(num_format_str="0%"))
    hidden = wb.add_sheet("Archive")
    hidden.write(0, 0, "old figures")
    hidden.visibility = 1
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def test_xls_reads_sheets_with_displayed_values_merged_cells_and_hidden_sheets():
    data = xls_bytes()
    assert detect_format(data, "budget.xlsx") == "xls"  # decided from the bytes
    doc = read_document(data, "budget.xls")
    assert doc.format == "xls"
    assert doc.text.splitlines()[:3] == [
        "row 2 | Item: Paper | Share: 50% | Due: 15/03/2024 | Cost: $1,234.50 | Count: 196",
        "row 3 | Item: Ink",
        "row 4 | Item: Ink | Share: 25%",
    ]
    assert [(s.heading, s.page) for s in doc.sections] == [("Budget", None), ("Archive", None)]
    assert "sheet 'Archive' is hidden: read anyway" in doc.warnings


def test_xls_truncated_is_unreadable_with_a_reason():
    data = xls_bytes()
    with pytest.raises(UnsupportedFile, match=r"unreadable Excel 97-2003 workbook \(\.xls\)"):
        read_document(data[: len(data) // 2], "cut.xls")


def test_xls_without_values_is_empty():
    xlwt = pytest.importorskip("xlwt")
    wb = xlwt.Workbook()
    wb.add_sheet("Nothing")
    buf = io.BytesIO()
    wb.save(buf)
    with pytest.raises(EmptyDocument, match="no text: the workbook has no values"):
        read_document(buf.getvalue(), "empty.xls")


def test_charts_on_sheets_and_chart_sheets_give_their_titles():
    from openpyxl.chart import BarChart, Reference

    wb = Workbook()
    ws = wb.active
    ws.title = "Data"
    ws.append(["Month", "Rainfall"])
    ws.append(["Jan", 30])
    chart = BarChart()
    chart.title = "Rainfall by month"
    chart.y_axis.title = "Millimetres"
    chart.add_data(Reference(ws, min_col=2, min_row=1, max_row=2), titles_from_data=True)
    ws.add_chart(chart, "D2")
    sheet = wb.create_chartsheet("Overview")
    other = BarChart()
    other.title = "Totals at a glance"
    other.add_data(Reference(ws, min_col=2, min_row=1, max_row=2), titles_from_data=True)
    sheet.add_chart(other)
    doc = read_document(xlsx_bytes(wb), "rain.xlsx")
    by_heading = {s.heading: doc.text[s.char_start : s.char_end] for s in doc.sections}
    assert "chart: Rainfall by month | Millimetres" in by_heading["Data"]
    assert "chart: Totals at a glance" in by_heading["Overview"]


# -- the office corpus (Apache Tika's test workbooks) ---------------------------------------------


@pytest.mark.slow
def test_office_corpus_workbooks_meet_their_expectations(corpus):
    from tests.helpers.office import load, normalise

    folder = corpus / "office"
    if not (folder / "expectations.tsv").is_file():
        pytest.skip("no office corpus")
    rows = [e for e in load(folder) if e.format == "xlsx"]
    failed = []
    for e in rows:
        path = folder / "xlsx" / e.file
        if e.kind == "password":
            with pytest.raises(PasswordRequired):
                read_document(path)
            text = read_document(path, password=e.password or "tika").text
        else:
            text = read_document(path).text
        if not e.holds(normalise(text)):
            failed.append((e.file, e.kind, e.text))
    assert not failed


def test_workbook_openpyxl_refuses_is_read_in_full_comments_included():
    wb = Workbook()
    wb.active.append(["Region", "Sales"])
    wb.active.append(["North", 0.25])
    wb.active["B2"].number_format = "0%"
    wb.active["A2"].comment = Comment("Largest region", "Ada")
    # A font size openpyxl's validation rejects (Excel ignores it): openpyxl cannot load the styles.
    # The reader parses the parts itself (issue 38), so nothing is lost.
    data = rewrite(
        xlsx_bytes(wb), "xl/styles.xml", lambda xml: re.sub(r'<sz val="[^"]*"\s*/>', '<sz val="big"/>', xml, count=1)
    )
    doc = read_document(data, "odd.xlsx")
    assert "row 2 | Region: North | Sales: 25%" in doc.text
    assert "comment on A2 (Ada): Largest region" in doc.text
    assert doc.warnings == []
