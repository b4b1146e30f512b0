"""The viewer on a table hit (issue 43, item 3): the PDF page with the table's box outlined and the
row's text highlighted, the passage shown as a table under its header, its cells inert; the same
for a DOCX table; a box that does not hold the passage's text is not drawn."""

from __future__ import annotations

import html
import io
import re

import numpy as np
import pytest
from PIL import Image

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest import read_document
from knowledge.ingest.pdfview import OUTLINE, render_page
from knowledge.pagemodels import viewer as vm
from knowledge.pagemodels.viewer import ViewerTarget
from knowledge.system import System
from tests.helpers.pdf_tables import HEADER, HOSTILE, ROWS, ruled_table_pdf


@pytest.fixture
def system():
    s = System(load_settings(), embedder_factory=lambda model: HashEmbedder(dimension=16))
    yield s
    s.close()


def outline_pixels(png: bytes, box: tuple[int, int, int, int] | None = None) -> int:
    """Pixels of the outline's blue (in ``box``, pixels ``(left, top, right, bottom)``, when given)."""
    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    if box is not None:
        a = a[box[1] : box[3] + 1, box[0] : box[2] + 1]
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    return int(((abs(r - OUTLINE[0]) < 40) & (abs(g - OUTLINE[1]) < 40) & (abs(b - OUTLINE[2]) < 40)).sum())


def cells(markup: str, tag: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(rf"<{tag}>(.*?)</{tag}>", markup)]


def test_a_table_region_is_outlined_where_the_table_is():
    data = ruled_table_pdf()
    doc = read_document(data, "t.pdf")
    [table] = doc.tables
    row = doc.text[doc.text.index("| East") : doc.text.index("| West")]
    page = render_page(data, 1, [row], regions=[table.bbox])
    assert page.found and len(page.regions) == 1
    left, top, right, bottom = page.regions[0]
    x0, t0, x1, b0 = (v * 1.5 for v in table.bbox)
    assert abs(left - x0) < 8 and abs(top - t0) < 8 and abs(right - x1) < 8 and abs(bottom - b0) < 8
    # the outline is drawn along the box's edges, the row inside it highlighted
    assert outline_pixels(page.png, (left, top, right, top + 4)) > 0.8 * (right - left) * 3
    assert outline_pixels(page.png) > 2 * 3 * ((right - left) + (bottom - top)) * 0.8
    assert all(left <= (b[0] + b[2]) / 2 <= right and top <= (b[1] + b[3]) / 2 <= bottom for b in page.boxes)
    assert outline_pixels(render_page(data, 1, [row]).png) == 0  # no region asked: none drawn


def test_a_region_that_does_not_hold_the_passage_or_lies_off_the_page_is_not_drawn():
    data = ruled_table_pdf()
    doc = read_document(data, "t.pdf")
    outro = doc.text[doc.text.index("The figures") :].split("\n")[0]
    # a box in another frame (a table read on the page turned upright) would hold none of the text
    elsewhere = render_page(data, 1, [outro], regions=[(300.0, 600.0, 500.0, 700.0)])
    assert elsewhere.found and elsewhere.regions == [] and outline_pixels(elsewhere.png) == 0
    off = render_page(data, 1, regions=[(100.0, 700.0, 300.0, 1200.0)])
    assert off.regions == []
    alone = render_page(data, 1, regions=[(100.0, 100.0, 300.0, 200.0)])  # no passage text: drawn as asked
    assert len(alone.regions) == 1


def test_a_pdf_table_hit_opens_with_the_table_outlined_and_the_passage_as_a_table(wb):
    data = ruled_table_pdf()
    wb.ingest_file("figures", data, "figures.pdf")
    hit = wb.search("figures", "East 1,530", k=1, mode="lexical")[0]
    assert hit.metadata["table_bbox"]
    view = vm.open_viewer(wb, vm.parse_viewer_query(dict(_query(vm.hit_viewer_url("figures", hit)))))
    [table] = view.passage_tables()
    assert view.table_boxes(1) == [table.bbox] == [tuple(hit.metadata["table_bbox"])]
    assert view.table_boxes(2) == []
    image = vm.page_image(view, data)
    assert image.found and len(image.regions) == 1 and outline_pixels(image.png) > 500
    passage = vm.text_parts(view)[1]
    assert '<table class="viewer-table">' in passage and '\n\n<div class="table-scroll"' in passage  # a block of its own
    assert cells(passage, "th") == list(HEADER)
    body = [cells(r, "td") for r in re.findall(r"<tr>(.*?)</tr>", passage) if "<td>" in r]
    assert list(ROWS[2]) in body
    assert vm.MARK[0] + "East" + vm.MARK[1] in passage  # the passage's rows are marked
    for bad in ("<script", "href", "<strong", "**", "javascript:", "$5$"):
        assert bad not in passage, bad
    assert all(r in [list(x) for x in ROWS] for r in body)  # whole rows, each cell as written
    assert any(c in HOSTILE for r in body for c in r)


def test_a_passage_starting_below_the_header_shows_the_header_above_its_rows(wb):
    data = ruled_table_pdf()
    wb.ingest_file("figures", data, "figures.pdf")
    fid = wb.file_records("figures")[0].file_id
    doc = read_document(data, "figures.pdf")
    s = doc.text.index("| South")
    e = doc.text.index("| West")
    view = vm.open_viewer(wb, ViewerTarget("figures", fid, s, e))
    before, passage, after = vm.text_parts(view)
    assert cells(passage, "th") == list(HEADER)
    body = [cells(r, "td") for r in re.findall(r"<tr>(.*?)</tr>", passage) if "<td>" in r]
    assert body == [list(ROWS[1]), list(ROWS[2])]
    assert "North" in html.unescape(before) and "West" in html.unescape(after)
    assert "&#60;script&#62;" in passage and "<script" not in passage


def test_a_docx_table_passage_is_shown_as_the_same_table(wb):
    from docx import Document as Docx

    d = Docx()
    d.add_paragraph("Stock list of the warehouse.")
    t = d.add_table(rows=4, cols=3)
    for i, r in enumerate(
        [
            ("Code", "Name", "Shelf"),
            ("R-001", "widget **one**", "A1"),
            ("R-002", "<b>two</b>", "A2"),
            ("R-003", "three", "A3"),
        ]
    ):
        for j, v in enumerate(r):
            t.cell(i, j).text = v
    buf = io.BytesIO()
    d.save(buf)
    data = buf.getvalue()
    wb.ingest_file("stock", data, "stock.docx")
    fid = wb.file_records("stock")[0].file_id
    doc = read_document(data, "stock.docx")
    [table] = doc.tables
    s = doc.text.index("R-002")
    view = vm.open_viewer(wb, ViewerTarget("stock", fid, s, table.char_end))
    assert view.table_boxes(1) == []  # not a PDF: no box
    passage = vm.text_parts(view)[1]
    assert cells(passage, "th") == ["Code", "Name", "Shelf"]
    body = [cells(r, "td") for r in re.findall(r"<tr>(.*?)</tr>", passage) if "<td>" in r]
    assert body == [["R-002", "<b>two</b>", "A2"], ["R-003", "three", "A3"]]
    assert "<b>" not in passage


def _query(url: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl, urlsplit

    return parse_qsl(urlsplit(url).query)


def _repetitive_register(pages: int = 2) -> bytes:
    """A ruled register over ``pages`` pages, drawn column by column (so a PDF's text comes out a
    column at a time, not row by row), whose rows repeat the same dates, cities and words: only a
    row's cells together tell it from the others. Each page repeats the header."""
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="A4")
    pdf.set_font("helvetica", size=9)
    xs = [30, 100, 170, 270, 350, 400, 520]
    header = ["Notice", "Received", "Company", "City", "Staff", "Kind"]
    per_page, height, top = 40, 16, 60
    for p in range(pages):
        pdf.add_page()
        if p == 0:
            pdf.text(30, 40, "Notices received WOMBAT-4314.")
        rows = [header] + [
            [
                "07/17/2015",
                "07/21/2015",
                f"Company {i:03d}",
                ("San Jose", "Oakland")[i % 2],
                str(10 + i % 3),
                "Layoff Permanent",
            ]
            for i in range(p * per_page, (p + 1) * per_page)
        ]
        pdf.set_line_width(0.5)
        for r in range(len(rows) + 1):
            pdf.line(xs[0], top + r * height, xs[-1], top + r * height)
        for x in xs:
            pdf.line(x, top, x, top + len(rows) * height)
        for c in range(len(header)):  # column by column
            for r, row in enumerate(rows):
                pdf.text(xs[c] + 3, top + r * height + 11, row[c])
    return bytes(pdf.output())


def test_a_table_passage_is_highlighted_on_its_own_rows_though_its_values_repeat_elsewhere():
    """Two rows whose dates, city, staff count and kind stand on every other row too: the boxes
    marked are those of the two rows' lines only, every cell of them."""
    from knowledge.ingest._pdf import read_pdf

    data = _repetitive_register(1)
    doc = read_pdf(data, ocr="off")
    start = doc.text.index("| 07/17/2015 | 07/21/2015 | Company 017 |")
    end = doc.text.index("\n", doc.text.index("| Company 018 |"))
    passage = doc.text[start:end]
    page = render_page(data, 1, [passage], regions=[doc.tables[0].bbox])
    lines = sorted({(b[1] + b[3]) // 2 for b in page.boxes})
    middles = [lines[0]]
    for y in lines[1:]:
        if y - middles[-1] > 4:  # another line
            middles.append(y)
    assert len(middles) == 2, middles  # two rows' lines, no cell of another row
    per_line = [sum(1 for b in page.boxes if abs((b[1] + b[3]) // 2 - y) <= 4) for y in middles]
    assert all(n >= 6 for n in per_line), per_line  # each of the six cells of both rows


def test_a_table_going_on_overleaf_is_outlined_on_each_of_its_pages():
    """Every chunk of the register's rows carries the box of its own page's part of the table, and
    the viewer outlines the table on page 2 as on page 1."""
    from knowledge.ingest._pdf import read_pdf
    from knowledge.ingest.chunker import chunk_document

    data = _repetitive_register(2)
    doc = read_pdf(data, ocr="off")
    (table,) = doc.tables
    assert table.page == 1 and [p for p, _ in table.overleaf] == [2, 3][: doc.pages - 1]
    chunks = chunk_document(doc, HashEmbedder(64), max_tokens=120, overlap_tokens=0).chunks
    body = [c for c in chunks if table.header_end < c.char_start < table.char_end]
    assert {c.page for c in body} >= {1, 2}
    boxes = dict(table.boxes())
    assert all(c.table_bbox == boxes[c.page] for c in body)
    second = next(c for c in body if c.page == 2)
    passage = doc.text[second.char_start : second.char_end]
    page = render_page(data, 2, [passage], regions=[boxes[2]])
    assert page.regions and page.found
