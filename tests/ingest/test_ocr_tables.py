"""Issue 43, scanned tables: the OCR boxes of a page without a text layer grouped into rows and
columns, written as a Markdown table under its header row and recorded in ``Document.tables``."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw, ImageFont

from knowledge.ingest import read_document
from knowledge.ingest._ocr import OcrLine, layout, table_runs

ROWS = [
    ("Region", "Year", "Revenue"),
    ("North", "2019", "1204"),
    ("South", "2019", "988"),
    ("East", "2020", "1530"),
    ("West", "2020", "777"),
]


def _line(text: str, x0: float, y0: float, width: float, height: float = 20) -> OcrLine:
    return OcrLine(text, 0.99, (x0, y0, x0 + width, y0 + height))


def _grid(rows, xs=(40, 300, 560), top=100, step=40) -> list[OcrLine]:
    return [_line(cell, xs[j], top + i * step, 12 * len(cell)) for i, row in enumerate(rows) for j, cell in enumerate(row)]


def test_boxes_in_columns_become_a_markdown_table_under_its_header():
    lines = [_line("Revenue by region, thousands of euros.", 40, 40, 420), *_grid(ROWS)]
    text = layout(lines)
    assert text == (
        "Revenue by region, thousands of euros.\n\n"
        "| Region | Year | Revenue |\n| --- | --- | --- |\n"
        "| North | 2019 | 1204 |\n| South | 2019 | 988 |\n| East | 2020 | 1530 |\n| West | 2020 | 777 |"
    )


def test_prose_lines_and_two_rows_of_cells_are_not_a_table():
    prose = [_line(f"a line of running text number {i} of the letter", 40, 40 + i * 30, 500) for i in range(6)]
    assert "|" not in layout(prose)
    two = _grid(ROWS[:2])
    assert "|" not in layout(two)  # fewer than TABLE_ROWS rows with cells apart
    columns = [  # two columns of prose read by OCR: each row's second box goes on in lower case
        line
        for i in range(6)
        for line in (
            _line(f"the otters build dens and the young ones, learn {i}", 40, 40 + i * 30, 450),
            _line(f"the masons cut stone and the carts carry it down {i}", 620, 40 + i * 30, 450),
        )
    ]
    rows = [[columns[2 * i], columns[2 * i + 1]] for i in range(6)]
    assert table_runs(rows, 20.0) == []


def test_a_scanned_table_is_read_as_a_table_with_its_header_recorded():
    font = ImageFont.load_default(size=28)
    img = Image.new("RGB", (1240, 520), "white")
    draw = ImageDraw.Draw(img)
    draw.text((40, 40), "Quarterly revenue by region", fill="black", font=font)
    for i, row in enumerate(ROWS):
        for j, cell in enumerate(row):
            draw.text((40 + j * 380, 130 + i * 64), cell, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, "PDF", resolution=150)
    doc = read_document(buf.getvalue(), "scan.pdf")
    assert "| Region | Year | Revenue |\n| --- | --- | --- |" in doc.text, doc.text
    assert "| South | 2019 | 988 |" in doc.text
    (table,) = doc.tables
    assert table.page == 1 and doc.text[table.char_start : table.header_end].startswith("| Region |")
    assert doc.text[table.char_start : table.char_end].endswith("| West | 2020 | 777 |")
