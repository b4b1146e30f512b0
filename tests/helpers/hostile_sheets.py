"""Builders of hostile spreadsheets and CSV files (issue 38): small files whose declared size is huge.

Each function returns the bytes of one file, built here from scratch (zipfile, plain XML), so the
tests and ``bench/`` can import them. The spreadsheets are small on disk; what they declare (a used
range of 1,048,576 × 16,384 cells, a value repeated over every column of 2,000 rows) is what a reader
that follows declared sizes pays for. Limits quoted are Excel's (1,048,576 rows × 16,384 columns,
"Excel specifications and limits") and LibreOffice Calc's (16,384 columns since 7.4).
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

#: Excel's last row and column (XFD = column 16,384).
LAST_ROW = 1_048_576
LAST_COL = 16_384

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"


def xlsx_bytes(wb: Any) -> bytes:
    """An openpyxl ``Workbook`` saved to bytes."""
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _xlsx(
    sheet_xml: str, *, shared: list[str] | None = None, extra: dict[str, str] | None = None, sheet_rels: str | None = None
) -> bytes:
    """A minimal workbook of one sheet ``Data`` whose worksheet part is ``sheet_xml`` (bytes of a .xlsx)."""
    strings = shared or []
    content_types = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Default Extension="vml" ContentType="application/vnd.openxmlformats-officedocument.vmlDrawing"/>'
        '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        'spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-'
        'officedocument.spreadsheetml.worksheet+xml"/>'
        '<Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.'
        'spreadsheetml.styles+xml"/>'
        '<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
        'officedocument.spreadsheetml.sharedStrings+xml"/>'
        '<Override PartName="/xl/comments1.xml" ContentType="application/vnd.openxmlformats-'
        'officedocument.spreadsheetml.comments+xml"/>'
        "</Types>"
    )
    root_rels = (
        f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
        f'<Relationship Id="rId1" Type="{_REL}/officeDocument" Target="xl/workbook.xml"/>'
        "</Relationships>"
    )
    workbook = (
        f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{_MAIN}" xmlns:r="{_REL}">'
        '<sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>'
    )
    book_rels = (
        f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
        f'<Relationship Id="rId1" Type="{_REL}/worksheet" Target="worksheets/sheet1.xml"/>'
        f'<Relationship Id="rId2" Type="{_REL}/styles" Target="styles.xml"/>'
        f'<Relationship Id="rId3" Type="{_REL}/sharedStrings" Target="sharedStrings.xml"/>'
        "</Relationships>"
    )
    styles = (
        f'<?xml version="1.0" encoding="UTF-8"?><styleSheet xmlns="{_MAIN}">'
        '<fonts count="2"><font><sz val="11"/><name val="Calibri"/></font>'
        '<font><b/><sz val="11"/><name val="Calibri"/></font></fonts>'
        '<fills count="2"><fill><patternFill patternType="none"/></fill>'
        '<fill><patternFill patternType="gray125"/></fill></fills>'
        '<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>'
        '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>'
        '<cellXfs count="2"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>'
        '<xf numFmtId="0" fontId="1" fillId="0" borderId="0" xfId="0" applyFont="1"/></cellXfs>'
        "</styleSheet>"
    )
    sst = (
        f'<?xml version="1.0" encoding="UTF-8"?><sst xmlns="{_MAIN}" count="{len(strings)}" '
        f'uniqueCount="{len(strings)}">' + "".join(f"<si><t>{s}</t></si>" for s in strings) + "</sst>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", content_types)
        zf.writestr("_rels/.rels", root_rels)
        zf.writestr("xl/workbook.xml", workbook)
        zf.writestr("xl/_rels/workbook.xml.rels", book_rels)
        zf.writestr("xl/styles.xml", styles)
        zf.writestr("xl/sharedStrings.xml", sst)
        zf.writestr("xl/worksheets/sheet1.xml", sheet_xml)
        if sheet_rels is not None:
            zf.writestr("xl/worksheets/_rels/sheet1.xml.rels", sheet_rels)
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
    return buf.getvalue()


def _sheet(rows: str, *, dimension: str = "A1:XFD1048576", cols: bool = True, after: str = "") -> str:
    cols_xml = f'<cols><col min="1" max="{LAST_COL}" width="12" style="1" customWidth="1"/></cols>' if cols else ""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{_MAIN}" xmlns:r="{_REL}">'
        f'<dimension ref="{dimension}"/>{cols_xml}<sheetData>{rows}</sheetData>{after}</worksheet>'
    )


#: The few real values of every edge workbook: a header row and two data rows (shared strings 0-3).
_STRINGS = ["Region", "Sales", "North", "South"]
_BODY = (
    '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>'
    '<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2"><v>125</v></c></row>'
    '<row r="3"><c r="A3" t="s"><v>3</v></c><c r="B3"><v>75</v></c></row>'
)


def edge_formatted_xlsx() -> bytes:
    """A ~2 KB workbook of three real rows whose only oddity is formatting out to the sheet's edge:
    ``<dimension ref="A1:XFD1048576"/>``, ``<cols>`` styling all 16,384 columns, styled empty cells in
    row 1's last column and in row 1,048,576 (first and last column), the last one
    ``<c r="XFD1048576" s="1"/>``. The used range is 1,048,576 × 16,384 cells; 6 cells have values.
    """
    edge = f'<row r="{LAST_ROW}" s="1" customFormat="1"><c r="A{LAST_ROW}" s="1"/><c r="XFD{LAST_ROW}" s="1"/></row>'
    body = _BODY.replace("</row>", '<c r="XFD1" s="1"/></row>', 1)
    return _xlsx(_sheet(body + edge), shared=_STRINGS)


def edge_comment_xlsx() -> bytes:
    """:func:`edge_formatted_xlsx`'s three rows, with a cell comment on the last cell ``XFD1048576``
    (a comment part and its legacy VML drawing), so a reader that walks the used range to find
    comments walks 17 billion cells."""
    edge = f'<row r="{LAST_ROW}"><c r="XFD{LAST_ROW}" s="1"/></row>'
    comments = (
        f'<?xml version="1.0" encoding="UTF-8"?><comments xmlns="{_MAIN}"><authors><author>Ada</author>'
        f'</authors><commentList><comment ref="XFD{LAST_ROW}" authorId="0"><text><r><t>edge note</t></r>'
        '</text></comment><comment ref="B2" authorId="0"><text><t>check this</t></text></comment>'
        "</commentList></comments>"
    )
    vml = (
        '<xml xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office" '
        'xmlns:x="urn:schemas-microsoft-com:office:excel"><v:shape type="#_x0000_t202">'
        '<x:ClientData ObjectType="Note"><x:Row>1</x:Row><x:Column>1</x:Column></x:ClientData>'
        "</v:shape></xml>"
    )
    rels = (
        f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
        f'<Relationship Id="rId1" Type="{_REL}/comments" Target="../comments1.xml"/>'
        f'<Relationship Id="rId2" Type="{_REL}/vmlDrawing" Target="../drawings/vmlDrawing1.vml"/>'
        "</Relationships>"
    )
    sheet = _sheet(_BODY + edge, after='<legacyDrawing r:id="rId2"/>')
    return _xlsx(
        sheet, shared=_STRINGS, sheet_rels=rels, extra={"xl/comments1.xml": comments, "xl/drawings/vmlDrawing1.vml": vml}
    )


def merged_edge_xlsx() -> bytes:
    """Three real rows and two merged ranges out to the edge: ``A2:A1048576`` (a value spread over a
    million rows) and ``C1:XFD1048576`` (17 billion cells, empty). A reader that gives a merged range's
    value to each row it spans, or makes an object per merged cell (openpyxl does), pays per cell."""
    merges = '<mergeCells count="2"><mergeCell ref="A2:A1048576"/><mergeCell ref="C1:XFD1048576"/></mergeCells>'
    return _xlsx(_sheet(_BODY, after=merges), shared=_STRINGS)


def _ods(content_body: str) -> bytes:
    ns = (
        'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    )
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns} office:version="1.2">'
        f"<office:body><office:spreadsheet>{content_body}</office:spreadsheet></office:body>"
        "</office:document-content>"
    )
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
        '<manifest:file-entry manifest:full-path="/" '
        'manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>'
        "</manifest:manifest>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        zf.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        zf.writestr("META-INF/manifest.xml", manifest, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def repeated_ods(rows: int = 2000, columns: int = LAST_COL) -> bytes:
    """A ~7 KB OpenDocument sheet: a header row (``Name``, ``Value``), then ``rows`` rows each holding
    one cell with the value ``x`` repeated over ``columns`` columns (``table:number-columns-repeated``).
    Expanded, it is ``rows`` × ``columns`` values (2,000 × 16,384: 33 million)."""
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'.format
    row = (
        f'<table:table-row><table:table-cell office:value-type="string" table:number-columns-repeated="{columns}">'
        "<text:p>x</text:p></table:table-cell></table:table-row>"
    )
    sheet = (
        f'<table:table table:name="Sheet1"><table:table-row>{cell("Name")}{cell("Value")}</table:table-row>'
        + row * rows
        + "</table:table>"
    )
    return _ods(sheet)


def repeated_rows_ods() -> bytes:
    """An OpenDocument sheet whose one data row (a value over all 16,384 columns) is repeated over
    every row of the sheet (``table:number-rows-repeated="1048575"``), after a two-cell header."""
    cell = '<table:table-cell office:value-type="string"><text:p>{}</text:p></table:table-cell>'.format
    sheet = (
        f'<table:table table:name="Sheet1"><table:table-row>{cell("Name")}{cell("Value")}</table:table-row>'
        f'<table:table-row table:number-rows-repeated="{LAST_ROW - 1}">'
        f'<table:table-cell office:value-type="string" table:number-columns-repeated="{LAST_COL}">'
        "<text:p>y</text:p></table:table-cell></table:table-row></table:table>"
    )
    return _ods(sheet)


def big_csv(mb: int = 60, wide: bool = False) -> bytes:
    """About ``mb`` MB of an ordinary CSV export (UTF-8, comma-separated): a header ``id,date,station,
    t1..t12,note`` and rows of short values (a station name, twelve readings of one to four digits, and
    every tenth row a quoted note with a comma and an accented letter). Short fields are the costly
    case: every value becomes a ``column: value`` pair. With ``wide`` the first note has an emoji (a
    character beyond U+FFFF), so Python holds the decoded text at 4 bytes a character. Deterministic:
    the same bytes each call."""
    stations = ["Zürich", "Genève", "Basel", "Bern", "Lugano", "Chur", "Sion", "Aarau"]
    head = "id,date,station," + ",".join(f"t{k}" for k in range(1, 13)) + ",note\n"
    out = [head]
    size = len(head.encode())
    target = mb * 1024 * 1024
    i = 0
    while size < target:
        readings = ",".join(str((i * 7 + k * 13) % 1000) for k in range(12))
        note = f'"checked, café {i % 97}"' if i % 10 == 0 else ""
        if i == 0 and wide:
            note = '"checked 🌍"'
        line = f"{i},2024-{i % 12 + 1:02d}-{i % 28 + 1:02d},{stations[i % 8]},{readings},{note}\n"
        out.append(line)
        size += len(line.encode())
        i += 1
    return "".join(out).encode("utf-8")


def long_field_csv(length: int = 300_000) -> bytes:
    """A CSV of a header and three rows whose second row's ``body`` field is ``length`` characters
    (over Python's csv default limit of 131,072, ``csv.field_size_limit()``), quoted and with line
    breaks inside; the other rows are short. The long field's words are ``word0 word1 ...``."""
    words = []
    size = 0
    n = 0
    while size < length:
        w = f"word{n}" + ("\n" if n % 50 == 49 else " ")
        words.append(w)
        size += len(w)
        n += 1
    body = "".join(words)[:length]
    return (f'title,body\nfirst,short text\nsecond,"{body}"\nthird,after the long one\n').encode()


#: The legacy .xls grid's last row and column (65,536 × 256 cells, BIFF8).
XLS_LAST_ROW = 65_536
XLS_LAST_COL = 256


def edge_formatted_xls() -> bytes:
    """A ~6 KB legacy Excel 97-2003 workbook (BIFF8, written with xlwt, a development dependency): three
    real rows (``Region``/``Sales``, ``North`` 125, ``South`` 75), a note ``audited`` in C2 merged over
    C2:C65536, and a bold empty cell in the last row and column (IV65536). Its used range is the whole
    65,536 × 256 grid; 7 cells have values."""
    import xlwt  # tests and benchmarks only (a development dependency)

    book = xlwt.Workbook()
    ws = book.add_sheet("Data")
    for r, row in enumerate([("Region", "Sales"), ("North", 125, "audited"), ("South", 75)]):
        for c, value in enumerate(row):
            ws.write(r, c, value)
    # The MERGEDCELLS record only: xlwt's merge() also writes a blank cell per merged cell (2 MB here).
    ws._Worksheet__merged_ranges.append((1, XLS_LAST_ROW - 1, 2, 2))
    ws.write(XLS_LAST_ROW - 1, XLS_LAST_COL - 1, None, xlwt.easyxf("font: bold on"))
    buf = io.BytesIO()
    book.save(buf)
    return buf.getvalue()
