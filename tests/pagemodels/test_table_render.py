"""Tables in chunk text shown as tables (knowledge.text.tables, issue 43 item 3): the framed rows of
a PDF table and the pipe rows of a DOCX or HTML table become one HTML table with a header; a
cell's Markdown or HTML is shown as written, never interpreted; the playground's card shows the
header and the rows holding the query's words."""

from __future__ import annotations

import html
import re
from itertools import pairwise

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest import read_document
from knowledge.ingest.chunker import chunk_document
from knowledge.text import render
from knowledge.text.tables import TableBlock, framed_cells, read_table, split_tables, table_html, table_preview
from tests.helpers.pdf_tables import HEADER, HOSTILE, ROWS, ruled_table_pdf

PDF_CHUNK = (
    "Quarterly figures.\n\n"
    "| Region | Year | Revenue | Note |\n| --- | --- | --- | --- |\n"
    "| North | 2019 | 1,204 | steady |\n| South | 2019 | 988 | <script>x</script> |\n"
    "| East | 2019 | 1,530 | [x](javascript:y) |\n| West | 2019 | 777 | **loud** $5$ a\\|b |\n\n"
    "The figures are in thousands."
)


def cells(markup: str, tag: str) -> list[str]:
    """The text a browser shows in each ``<tag>`` cell of ``markup``, in order."""
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(rf"<{tag}>(.*?)</{tag}>", markup)]


def rows(markup: str) -> list[list[str]]:
    return [cells(r, "td") for r in re.findall(r"<tr>(.*?)</tr>", markup) if "<td>" in r]


def assert_inert(markup: str) -> None:
    """Nothing of a cell became markup: no script, link, emphasis or math; every character of the
    hostile cells is a character reference or a letter."""
    for bad in ("<script", "<a ", "href", "<strong", "<em", "javascript:", "**", "$5$", "[x]"):
        assert bad not in markup, bad


def test_a_pdf_chunk_reads_as_prose_a_table_and_prose():
    pieces = split_tables(PDF_CHUNK)
    assert [type(p).__name__ for p in pieces] == ["str", "TableBlock", "str"]
    table = pieces[1]
    assert isinstance(table, TableBlock)
    assert table.header == [list(HEADER)]
    assert [r[0] for r in table.rows] == ["North", "South", "East", "West"]
    assert table.rows[3][3] == "**loud** $5$ a|b"  # "\|" is a "|" inside the cell


def test_a_pdf_chunk_renders_as_a_table_whose_cells_are_inert():
    out = render.render_html(PDF_CHUNK, "south", file_name="figures.pdf")
    assert "\n" not in out and out.startswith('<div class="chunk">')
    assert "<table" in out and "<thead>" in out
    assert cells(out, "th") == list(HEADER)
    shown = rows(out)
    assert shown[0] == list(ROWS[0]) and shown[1][3] == "<script>x</script>" and shown[2][3] == "[x](javascript:y)"
    assert "<mark>South</mark>" in out  # the query's words are marked in the cells
    assert "Quarterly figures." in out and "The figures are in thousands." in out
    assert_inert(out)


def test_docx_and_html_pipe_rows_render_as_the_same_table():
    docx = "Stock list\n\nCode | Name | Shelf\nR-001 | widget **one** | <b>A1</b>\nR-002 | widget two | A2\n\nEnd."
    out = render.render_html(docx, file_name="stock.docx")
    assert cells(out, "th") == ["Code", "Name", "Shelf"]
    assert rows(out) == [["R-001", "widget **one**", "<b>A1</b>"], ["R-002", "widget two", "A2"]]
    assert "<b>" not in out and "<strong" not in out


@pytest.mark.parametrize(
    "text",
    [
        # the CSV and spreadsheet readers' rows are name: value pairs, not a grid
        "Name | Qty\nName: bolt | Qty: 4\nName: nut | Qty: 9",
        # one line with a bar is prose
        "Home | About\n\nWelcome to the site.",
        # rows of different widths are not a grid
        "a | b\nc | d | e",
    ],
)
def test_text_that_is_not_a_grid_stays_text(text):
    assert split_tables(text) == [text]
    assert "<table" not in render.render_html(text, file_name="x.txt")


def test_a_markdown_file_keeps_its_own_table_rendering():
    out = render.render_html("| a | b |\n| --- | --- |\n| *x* | 2 |", file_name="t.md")
    assert "<table>" in out and "<em>x</em>" in out  # Markdown cells are Markdown in a Markdown file


def test_framed_cells_and_read_table_take_either_form():
    assert framed_cells("| a | b\\|c |") == ["a", "b|c"]
    assert framed_cells("East | 2019 |") == ["East", "2019"]  # a chunk that starts after a row's first bar
    # a chunk that starts inside a row, below the repeated header: the row's cells under its last columns
    cut = read_table("| Region | Year | Revenue |\n| --- | --- | --- |\n| 2019 | 1,530 |\n| West | 2019 | 777 |")
    assert cut.rows == [["", "2019", "1,530"], ["West", "2019", "777"]]
    assert read_table("| h1 | h2 |\n| --- | --- |\n| 1 | 2 |") == TableBlock([["h1", "h2"]], [["1", "2"]])
    assert read_table("h1 | h2\n1 | 2\n3 | 4") == TableBlock([["h1", "h2"]], [["1", "2"], ["3", "4"]])
    # a two-row header above the delimiter
    two = read_table("| Region | 2019 |\n| | EUR |\n| --- | --- |\n| North | 5 |")
    assert two.header == [["Region", "2019"], ["", "EUR"]] and two.rows == [["North", "5"]]


def test_the_card_shows_the_header_and_the_rows_holding_the_query_words():
    card = table_preview(PDF_CHUNK, "revenue of East in 2019")
    assert card is not None
    assert cells(card, "th") == list(HEADER)
    # every row holds "2019": the first rows are shown, and a line says how many more there are
    assert [r[0] for r in rows(card)] == ["North", "South", "East", "West"]
    card = table_preview(PDF_CHUNK, "East")
    assert card is not None and [r[0] for r in rows(card)] == ["East"]
    assert "3 more rows in the full text below" in html.unescape(card)
    assert_inert(table_preview(PDF_CHUNK, "West South") or "")


def test_the_card_is_prose_for_prose_and_for_a_table_the_query_misses_in_much_prose():
    assert table_preview("Just words | here.\n\nMore words.", "words") is None
    long = "Many words of prose about the cooperative. " * 20 + "\n\nPart | Price\nbolt | 4 EUR\nwasher | 9 EUR\n"
    assert table_preview(long, "cooperative") is None
    card = table_preview(long, "washer")  # the query is in a row: the row, under its header
    assert card is not None and cells(card, "th") == ["Part", "Price"] and rows(card) == [["washer", "9 EUR"]]


def test_a_table_chunk_of_a_generated_pdf_renders_as_its_table():
    data = ruled_table_pdf()
    doc = read_document(data, "figures.pdf")
    chunks = chunk_document(doc, HashEmbedder(max_tokens=256), 250, 20).chunks
    [chunk] = [c for c in chunks if c.table_bbox is not None]
    out = render.render_html(chunk.text, file_name="figures.pdf")
    assert cells(out, "th") == list(HEADER)
    assert rows(out) == [list(r) for r in ROWS]
    assert_inert(out)
    for hostile in HOSTILE:
        assert hostile in [c for r in rows(out) for c in r]  # shown as written


def test_table_html_marks_the_passage_rows_and_escapes_its_class():
    out = table_html(TableBlock([["h"]], [["<i>v</i>"]]), css_class="t", row_mark=("<mark>", "</mark>"))
    assert out == (
        '<div class="table-scroll" style="overflow-x: auto"><table class="t"><thead><tr><th>h</th></tr></thead>'
        "<tbody><tr><td><mark>&#60;i&#62;v&#60;&#47;i&#62;</mark></td></tr></tbody></table></div>"
    )


def test_merged_table_chunks_read_as_the_document_once_under_one_header():
    from knowledge.service.passages import merge_passages
    from knowledge.vectorstore.store import Hit

    doc = read_document(ruled_table_pdf(), "figures.pdf")
    [table] = doc.tables
    chunks = chunk_document(doc, HashEmbedder(max_tokens=256), 60, 16).chunks
    in_table = [c for c in chunks if c.table_bbox is not None]
    assert len(in_table) >= 2 and any(c.table_header for c in in_table[1:])

    def hit(c, box):
        meta = {"table_bbox": list(box)} | ({"table_header": c.table_header} if c.table_header else {})
        return Hit(f"f:{c.index}", 1.0, "f", "figures.pdf", c.index, c.text, c.page, c.char_start, c.char_end, None, meta)

    first, second = next((a, b) for a, b in pairwise(in_table) if b.table_header)
    assert second.char_start <= first.char_end  # they overlap: one passage
    hits = [hit(second, table.bbox), hit(first, table.bbox)]  # the later chunk ranked first
    [passage], _ = merge_passages(hits, 5)
    # the first chunk's text, then the document's text up to the second one's end: no header inside
    assert passage.text == first.text + doc.text[first.char_end : second.char_end]
    assert passage.metadata.get("table_header") == first.table_header
    assert passage.metadata["table_bbox"] == list(table.bbox)
    out = render.render_html(passage.text, file_name="figures.pdf")
    shown = [r for r in ROWS if f"| {r[0]} |" in passage.text]  # the rows the passage holds, in order
    assert rows(out) == [list(r) for r in shown] and len(shown) >= 2


def test_the_card_shows_the_table_holding_the_query_not_a_caption_with_a_pipe():
    text = (
        "Campylobacter | 3.2.\nTable CA7. | Campylobacter in fresh pig meat\n\n"
        "| Country | n | % Pos |\n| --- | --- | --- |\n| Austria | 109 | 0.9 |\n| netherlands | 269 | 1.1 |"
    )
    card = table_preview(text, "netherlands 269")
    assert card is not None and "netherlands" in card and "Austria" not in card
    assert "<th>Country</th>" in card and "Table CA7" not in card


def test_a_repeated_header_is_compact_and_still_reads_as_the_tables_header():
    """A chunk repeats a framed table's header with its delimiter row written ``|-|-|`` (half the
    model tokens of ``| --- |``): it still splits into a table with that header."""
    from knowledge.text.tables import compact_header

    header = "| Region | Year | Revenue | Note |\n| --- | --- | --- | --- |"
    assert compact_header(header) == "| Region | Year | Revenue | Note |\n|-|-|-|-|"
    assert compact_header("Region | Year") == "Region | Year"  # pipe rows have no delimiter row
    assert compact_header("| a | b |\n| c | d |") == "| a | b |\n| c | d |"
    (block,) = split_tables(compact_header(header) + "\n| North | 2019 | 1,204 | steady |")
    assert isinstance(block, TableBlock)
    assert block.header == [["Region", "Year", "Revenue", "Note"]] and block.rows == [["North", "2019", "1,204", "steady"]]
    tokens = HashEmbedder(64).count_tokens
    assert tokens(compact_header(header)) < tokens(header)
