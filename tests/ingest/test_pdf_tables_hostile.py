"""PDF tables on bad input (issue 43, item 4): bounded time and memory, a reason in words, the text kept.

The PDFs are made at test time (``tests/helpers/hostile_pdfs.py``, fpdf2 and hand-written content).
Each is read with :func:`knowledge.ingest._pdf.read_pdf` (``ocr="off"``); the ones whose cost once
ran away (memory past 1 GB, the watchdog's deadline) are read in a real reader child
(:class:`~knowledge.ingest.isolated.ReaderPool`) under a limit they used to break, so a return of
the old cost fails the test instead of the machine. No test asserts a time.
"""

from __future__ import annotations

import re
import time

import pytest

from knowledge.ingest import _pdftables
from knowledge.ingest._cost import set_deadline
from knowledge.ingest._pdf import read_pdf
from knowledge.ingest._pdftables import EDGE_LINES
from knowledge.ingest.document import Document
from knowledge.ingest.isolated import ReaderPool, ReadLimits
from tests.helpers import hostile_pdfs as hostile

KEPT = "the text is read as text"


@pytest.fixture
def pool():
    p = ReaderPool(1)
    yield p
    p.close()


def _row_lines(doc: Document, first_cell: str) -> list[str]:
    return [line for line in doc.text.split("\n") if line.startswith(f"| {first_cell} |")]


def _assert_tables_placed(doc: Document, page_size: tuple[float, float] = (595.28, 841.89)) -> None:
    """Every recorded table has its page and a box on that page, and its span is Markdown rows."""
    for t in doc.tables:
        assert t.page is not None and 1 <= t.page <= doc.pages
        assert t.bbox is not None
        x0, top, x1, bottom = t.bbox
        assert 0 <= x0 < x1 <= page_size[0] + 1 and 0 <= top < bottom <= page_size[1] + 1
        body = doc.text[t.char_start : t.char_end].split("\n")
        pages = {s.page for s in doc.sections if s.char_start < t.char_end and t.char_start < s.char_end}
        rows = [line for line in body if line.startswith("|")]
        assert all(line.startswith("| ") and line.endswith(" |") for line in rows)
        between = [line for line in body if line and not line.startswith("|")]  # a page's foot and head
        assert len(between) <= 2 * EDGE_LINES * (len(pages) - 1)
        assert doc.text[t.char_start : t.header_end].split("\n")[-1].startswith("| --- |")


# -- (a) busy pages: a form grid of tiny cells, a drawing, scattered labels -----------------------


def test_form_grid_of_1200_tiny_ruled_cells_is_read_with_its_few_words_and_prose():
    data = hostile.tiny_cells(40, 30)  # 1,200 rectangles, under MAX_PATHS: camelot is run on it
    doc = read_pdf(data, ocr="off")
    assert "Form grid WOMBAT-4301: tick the boxes that apply." in doc.text
    labels = [f"{chr(65 + c % 26)}{r}" for r in range(30) for c in range(40) if (r * 40 + c) % 37 == 0]
    assert len(labels) == 33
    for label in labels:
        assert re.search(rf"(^|[ |]){label}($|[ |])", doc.text, re.M), label
    assert not any("could not be read" in w for w in doc.warnings)
    _assert_tables_placed(doc)


def test_drawing_of_6000_line_segments_is_not_searched_and_says_why():
    doc = read_pdf(hostile.drawing(6_000), ocr="off")
    assert doc.text == "Site plan WOMBAT-4302: the drawing below shows the north wing."
    assert doc.warnings == [f"page 1: tables not looked for (it draws more than 3,000 lines and shapes); {KEPT}"]
    assert doc.tables == []


def test_drawing_of_6000_segments_in_one_path_is_searched_and_finds_no_table():
    doc = read_pdf(hostile.drawing(6_000, one_path=True), ocr="off")
    assert doc.text == "Site plan WOMBAT-4302: the drawing below shows the north wing."
    assert doc.tables == [] and doc.warnings == []


def test_graph_paper_of_87500_cells_reads_within_a_gigabyte(pool):
    """A grid of 250 × 350 cells drawn as 602 lines (few path objects: camelot runs on it) with a
    letter in every 37th cell. Before pdfminer's box grouping was turned off it took 68 s and 1.3 GB."""
    data = hostile.tiny_cells(250, 350, lines=True)
    r = pool.read(data, "graph.pdf", limits=ReadLimits(memory_mb=1024), ocr="off")
    assert "Form grid WOMBAT-4301: tick the boxes that apply." in r.document.text
    for label in ("A0", "L0", "W0", "O349", "Z349", "K349"):
        assert label in r.document.text
    assert r.peak_rss < 1024 * 2**20


def test_page_of_4000_scattered_labels_reads_within_a_gigabyte(pool):
    """4,000 one-letter labels, each a text box of its own (a map, a scatter plot). pdfminer's
    grouping of boxes weighs every pair: it took 290 s and 3.3 GB (past the reader's 3 GB), now
    a few seconds."""
    data = hostile.scattered_labels(4_000)
    r = pool.read(data, "map.pdf", limits=ReadLimits(memory_mb=1024), ocr="off")
    assert "Survey map WOMBAT-4307: each label is a nest box." in r.document.text
    assert len(re.findall(r"\b[a-z]\b", r.document.text)) >= 4_000
    _assert_tables_placed(r.document)


def test_page_larger_than_a1_is_not_drawn_for_tables_and_says_why(pool):
    """A 5 m × 5 m page (the largest a PDF may have): drawn at 300 dpi for camelot it would take
    about 40 GB. Its table is read as text lines; the warning gives the size."""
    data = hostile.small_table_pdf(width_pt=14_400, height_pt=14_400)
    r = pool.read(data, "poster.pdf", limits=ReadLimits(memory_mb=1024), ocr="off")
    doc = r.document
    assert "Ringing summary WOMBAT-4306: three birds this week." in doc.text
    assert "Barn owl" in doc.text and "Tawny owl" in doc.text
    assert doc.warnings == [f"page 1: tables not looked for (the page, 508 × 508 cm, is larger than A1 paper); {KEPT}"]
    assert doc.tables == []


def test_a4_page_table_is_read_as_a_table_here_and_in_a_reader_child(pool):
    """The control for the page-size bound: the same page at A4 keeps its table, and a reader
    child hands it over with its page and box."""
    data = hostile.small_table_pdf()
    doc = read_pdf(data, ocr="off")
    assert pool.read(data, "rings.pdf", limits=ReadLimits(), ocr="off").document == doc
    assert "Ringing summary WOMBAT-4306: three birds this week." in doc.text
    assert "| Ring | Species | Site |" in doc.text and "| R2 | Tawny owl | south |" in doc.text
    assert len(doc.tables) == 1 and doc.tables[0].page == 1
    assert doc.text[doc.tables[0].char_start : doc.tables[0].header_end] == "| Ring | Species | Site |\n| --- | --- | --- |"
    _assert_tables_placed(doc)


# -- (b) a table of many rows over many pages -----------------------------------------------------


def _assert_long_table(doc: Document, rows: int, tabled_pages: set[int]) -> None:
    """All ``rows`` rows' first cells are in the text; the pages ``tabled_pages`` (1 to n) hold one
    table going on from page to page: one Table, its header recorded once (the header each page
    repeats is not written again), covering every row of those pages as a Markdown row."""
    assert "Ringing records WOMBAT-4303: every bird ringed in the reserve." in doc.text
    text = doc.text
    for i in range(1, rows + 1):
        assert f"R{i:05d}" in text, i
    (t,) = doc.tables
    assert t.page == 1 and tabled_pages == set(range(1, max(tabled_pages) + 1))
    assert text[t.char_start : t.header_end] == "| Ring | Species | Weight kg | Site |\n| --- | --- | --- | --- |"
    assert text.count("| Ring | Species | Weight kg | Site |") == 1
    for page in doc.sections:
        if page.page not in tabled_pages:
            continue
        assert page.char_start < t.char_end and t.char_start < page.char_end  # the page is in the table
        page_text = text[page.char_start : page.char_end]
        page_rows = re.findall(r"R\d{5}", page_text)
        table_rows = re.findall(r"^\| (R\d{5}) \| Owl \d+ \| \d\.\d \| \w+ \|$", page_text, re.M)
        assert page_rows and table_rows == page_rows
    _assert_tables_placed(doc)


@pytest.mark.slow
def test_table_of_10000_rows_over_145_pages_is_read_whole_as_tables(monkeypatch):
    """145 pages of a ruled table with its header repeated on each (about 85 s here)."""
    monkeypatch.setattr(_pdftables, "SECONDS_PER_FILE", 3_600.0)  # this test is about the rows, not the budget
    doc = read_pdf(hostile.long_table(10_000), ocr="off")
    assert doc.pages == 145 and doc.warnings == []
    _assert_long_table(doc, 10_000, set(range(1, 146)))
    assert len(_row_lines(doc, "Ring")) == 1  # the header each page repeats is written once


def _detection_seconds_per_page(data: bytes, pages: int) -> float:
    """This machine's pace of table detection on the first ``pages`` pages of ``data``, now (its
    imports paid by a first page read before)."""
    _pdftables.find_tables(data, [1], seconds=1e9)
    started = time.monotonic()
    _pdftables.find_tables(data, list(range(1, pages + 1)), seconds=1e9)
    return (time.monotonic() - started) / pages


def test_in_a_reader_child_table_detection_stops_in_time_and_the_file_is_read(pool):
    """8,000 rows on 116 pages. The reading limit follows this machine's pace, measured just before:
    the time its reading without tables takes (T, 2.5 s here) plus eight tenths of what its table
    detection needs for all 116 pages (D, from the pace on the first 12; 6 s here). The detection
    gets half the time the child has left, (L - T) / 2, four tenths of D: it stops before a batch
    it cannot finish and names the pages it left, and the file is read whole -- however fast the
    machine, with room for the child to run twice as fast or as slow as the measure said.
    (Before, its own 120 s budget ran past the child's deadline: the child was killed and the file
    failed. A fixed 12 s limit let a faster CI machine finish every page; one and a half times D
    let a child that ran while the load fell finish too.)"""
    data = hostile.long_table(8_000)
    started = time.monotonic()
    read_pdf(data, ocr="off", tables="off")
    text_seconds = time.monotonic() - started
    limit = text_seconds + 0.8 * 116 * _detection_seconds_per_page(data, 12)
    r = pool.read(data, "rings.pdf", limits=ReadLimits(timeout_seconds=limit, seconds_per_mb=0), ocr="off")
    doc = r.document
    assert doc.pages == 116
    ran_out = [w for w in doc.warnings if "ran out" in w]
    assert len(ran_out) == 1 and len(doc.warnings) == 1, (limit, doc.warnings)
    match = re.fullmatch(
        rf"pages (\d+)-116: tables not looked for \(the [\d.]+ s for table detection in one file ran out\); {KEPT}",
        ran_out[0],
    )
    assert match, ran_out[0]
    first_left = int(match.group(1))
    assert 2 <= first_left <= 116
    _assert_long_table(doc, 8_000, set(range(1, first_left)))


def test_time_budget_spent_names_every_page_left():
    data = hostile.small_table_pdf()
    found, notes = _pdftables.find_tables(data, [1], seconds=0)
    assert found == {} and notes == [
        f"page 1: tables not looked for (the 0.0 s for table detection in one file ran out); {KEPT}"
    ]


def test_in_a_reader_child_with_no_time_left_no_page_is_searched():
    """The watchdog's deadline reaches the detector through ``_cost``: none left, none spent."""
    data = hostile.small_table_pdf()
    set_deadline(time.monotonic())
    try:
        found, notes = _pdftables.find_tables(data, [1])
    finally:
        set_deadline(None)
    assert found == {} and notes == [
        f"page 1: tables not looked for (the 0.0 s for table detection in one file ran out); {KEPT}"
    ]
    assert _pdftables.find_tables(data, [1])[0][1][0].rows[0] == ["Ring", "Species", "Site"]


# -- (c) tables without text ----------------------------------------------------------------------


def test_ruled_table_with_empty_cells_and_a_page_of_lines_only():
    doc = read_pdf(hostile.empty_ruled_table(), ocr="off")
    assert doc.text == "Inspection sheet WOMBAT-4304: the table below was left blank."
    assert doc.tables == []
    assert doc.warnings == ["page 2 has no text layer (scanned? OCR needed)"]


def test_table_as_a_picture_and_a_page_that_is_only_the_picture():
    doc = read_pdf(hostile.image_table(), ocr="off")
    assert doc.text == "Scanned table WOMBAT-4305: the picture below is the price list."
    assert doc.tables == []
    assert doc.warnings == ["page 2 has no text layer (scanned? OCR needed)"]


# -- (d) the table detector fails on a page -------------------------------------------------------


def test_page_the_detector_fails_on_is_named_and_the_next_page_still_has_its_table():
    doc = read_pdf(hostile.detector_breaks(), ocr="off")
    assert "Damaged page WOMBAT-4308: its prose must survive." in doc.text
    assert "nails 12" in doc.text and "screws 30" in doc.text  # page 1's table, as text lines
    assert doc.warnings == [
        f"page 1: tables could not be read (the table detector failed on it: float division by zero); {KEPT}"
    ]
    assert [t.page for t in doc.tables] == [2]
    assert "| R2 | Tawny owl | south |" in doc.text
    t = doc.tables[0]
    assert doc.text[t.char_start : t.header_end] == "| Ring | Species | Site |\n| --- | --- | --- |"
    _assert_tables_placed(doc, (595, 842))
