"""Issue 43: tables in PDFs come out as tables -- Markdown rows in their place among the page's text,
the header recorded (with the page and box) so the chunker repeats it, a table going on overleaf
joined, chunks never cut inside a row, running text in columns not taken for a table."""

from __future__ import annotations

import re

from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest._pdf import read_pdf
from knowledge.ingest._pdftables import PdfTable, compose_page, continued
from knowledge.ingest.chunker import chunk_document

HEADER = ["Region", "Quarter", "Revenue"]


def _pdf(rows: list[list[str]], *, before: str = "", after: str = "", repeat_headings: int = 1) -> bytes:
    """A PDF (fpdf2) with ``before``, a ruled table of ``rows`` (the first row its heading, repeated
    on each page the table runs onto), then ``after``."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=10)
    pdf.add_page()
    if before:
        pdf.multi_cell(0, 6, before, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
    with pdf.table(first_row_as_headings=True, repeat_headings=repeat_headings) as table:
        for values in rows:
            row = table.row()
            for value in values:
                row.cell(value)
    if after:
        pdf.ln(4)
        pdf.multi_cell(0, 6, after, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _rows(n: int) -> list[list[str]]:
    return [HEADER] + [[f"Region {i}", f"Q{i % 4 + 1}", f"{i * 1000 + 17}.50"] for i in range(n)]


BEFORE = "The quarterly figures below were audited in March by the finance team WOMBAT-4301."
AFTER = "Figures are in euros and exclude value added tax WOMBAT-4302."


def test_a_ruled_table_becomes_markdown_rows_in_its_place_with_its_header_recorded():
    doc = read_pdf(_pdf(_rows(5), before=BEFORE, after=AFTER), ocr="off")
    text = doc.text
    assert "| Region | Quarter | Revenue |\n| --- | --- | --- |\n| Region 0 | Q1 | 17.50 |" in text
    assert "| Region 4 | Q1 | 4017.50 |" in text
    # the prose around the table is still there, in reading order, and not inside the table
    assert text.index("WOMBAT-4301") < text.index("| Region |") < text.index("WOMBAT-4302")
    assert "Region Quarter Revenue" not in text  # the table's lines are not also left as prose
    (table,) = doc.tables
    assert table.page == 1 and table.bbox is not None
    x0, top, x1, bottom = table.bbox
    assert 0 <= x0 < x1 <= 612 and 0 <= top < bottom <= 842  # points on an A4 page from its top-left
    assert text[table.char_start : table.header_end] == "| Region | Quarter | Revenue |\n| --- | --- | --- |"
    assert text[table.char_start : table.char_end].endswith("| Region 4 | Q1 | 4017.50 |")
    assert not doc.warnings


def test_tables_off_reads_the_page_as_text():
    doc = read_pdf(_pdf(_rows(5), before=BEFORE), ocr="off", tables="off")
    assert doc.tables == [] and "|" not in doc.text and "Region 0" in doc.text


def test_a_table_going_on_overleaf_is_one_table_and_its_repeated_header_is_not_written_twice():
    doc = read_pdf(_pdf(_rows(70), before=BEFORE), ocr="off")
    assert doc.pages == 2
    assert doc.text.count("| Region | Quarter | Revenue |") == 1  # page 2 repeats it in the PDF
    assert "Region Quarter Revenue" not in doc.text
    (table,) = doc.tables  # one table across the page break
    assert table.page == 1
    body = doc.text[table.char_start : table.char_end]
    assert all(f"| Region {i} |" in body for i in range(70))
    page2 = next(s for s in doc.sections if s.page == 2)
    assert table.char_end > page2.char_start  # the table runs into page 2's text


def test_chunks_of_a_long_table_repeat_its_header_and_never_cut_a_row():
    doc = read_pdf(_pdf(_rows(70)), ocr="off")
    chunks = chunk_document(doc, HashEmbedder(64), max_tokens=48, overlap_tokens=12).chunks
    inside = [c for c in chunks if c.table_header]
    assert len(inside) >= 5
    for chunk in inside:
        assert chunk.text.startswith("| Region | Quarter | Revenue |\n| --- | --- | --- |\n")
    for chunk in chunks:
        for line in chunk.text.split("\n"):
            if line.startswith("|"):
                assert line.endswith("|") and line.count("|") == 4, (chunk.index, line)
    # every row is whole in some chunk, with its cells kept apart
    for i in range(70):
        row = f"| Region {i} | Q{i % 4 + 1} | {i * 1000 + 17}.50 |"
        assert any(row in c.text for c in chunks), row


def test_a_cell_with_a_full_stop_is_not_where_a_chunk_ends():
    rows = [["Licensee", "Address"]] + [[f"Company {i} Pvt. Ltd.", f"Lane {i}, Kumarpara. Assam"] for i in range(40)]
    doc = read_pdf(_pdf(rows), ocr="off")
    chunks = chunk_document(doc, HashEmbedder(64), max_tokens=40, overlap_tokens=8).chunks
    for chunk in chunks:
        own = doc.text[chunk.char_start : chunk.char_end]
        last = own.rstrip().split("\n")[-1]
        if last.startswith("|"):
            assert last.endswith("|"), (chunk.index, last)


def test_running_text_in_two_columns_is_not_a_table():
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=10)
    pdf.add_page()
    left = "the river otters build their dens along the bank and the young learn to swim in spring"
    right = "the masons cut the stone for the bridge and carried it down to the water by cart"
    words_l, words_r = left.split() * 3, right.split() * 3
    for i in range(0, len(words_l), 5):
        y = 20 + (i // 5) * 6
        pdf.text(15, y, " ".join(words_l[i : i + 5]))
        pdf.text(110, y, " ".join(words_r[i : i + 5]))
    doc = read_pdf(bytes(pdf.output()), ocr="off")
    assert doc.tables == [] and "|" not in doc.text


def test_compose_page_puts_the_table_where_its_lines_were_and_keeps_prose_that_repeats_a_cell():
    table = PdfTable(1, (10, 10, 200, 60), [["Name", "Age"], ["Ana", "41"], ["Ben", "37"]], 1, "lattice")
    text = "Staff list\nName Age\nAna 41\nBen 37\nAna joined in 2019 and leads the team."
    out = compose_page(text, [table])
    assert out == (
        "Staff list\n\n| Name | Age |\n| --- | --- |\n| Ana | 41 |\n| Ben | 37 |\n\nAna joined in 2019 and leads the team."
    )
    # a table whose text the page's text reader could not decode goes after the page's text
    assert compose_page("Garbled \ufffd\ufffd", [table]).endswith("| Ben | 37 |")


def test_a_continuation_needs_the_same_width_and_a_repeated_header_or_a_data_row():
    before = PdfTable(1, (0, 500, 100, 780), [["Item", "Price"], ["Tea", "2.50"]], 1, "lattice")
    same_header = PdfTable(2, (0, 40, 100, 200), [["Item", "Price"], ["Cake", "3.10"]], 1, "lattice")
    data_row = PdfTable(2, (0, 40, 100, 200), [["Cake", "3.10"], ["Pie", "4.00"]], 1, "lattice")
    new_table = PdfTable(2, (0, 40, 100, 200), [["City", "Country"], ["Lyon", "France"]], 1, "lattice")
    wider = PdfTable(2, (0, 40, 100, 200), [["a", "1", "x"], ["b", "2", "y"]], 1, "lattice")
    joined = continued(before, same_header)
    assert joined is not None and joined.rows == [["Cake", "3.10"]] and joined.continues
    assert joined.markdown == "| Cake | 3.10 |" and joined.header_text == ""
    assert continued(before, data_row) is not None
    assert continued(before, new_table) is None and continued(before, wider) is None


def test_markdown_escapes_a_pipe_inside_a_cell():
    table = PdfTable(1, (0, 0, 1, 1), [["Key", "Value"], ["a|b", "c"]], 1, "hybrid")
    assert re.search(r"\| a\\\|b \| c \|", table.markdown)


def test_wide_rows_under_a_wide_header_are_never_cut_when_a_whole_row_fits():
    """A header of a third of the chunk and rows of a third: a chunk ends at a row's end earlier in
    its window rather than inside a row, and the next starts at a row's start."""
    header = [f"Column {k}" for k in range(8)]
    rows = [header] + [[f"r{i}c{k} word{i}" for k in range(8)] for i in range(30)]
    doc = read_pdf(_pdf(rows), ocr="off")
    chunks = chunk_document(doc, HashEmbedder(64), max_tokens=120, overlap_tokens=30).chunks
    assert len(chunks) >= 5
    for chunk in chunks:
        own = doc.text[chunk.char_start : chunk.char_end].strip()
        lines = [line for line in own.split("\n") if line.strip()]
        table_lines = [line for line in lines if line.startswith("|") or line.endswith("|")]
        for line in table_lines:
            assert line.startswith("|") and line.endswith("|") and line.count("|") == 9, (chunk.index, line)
    for i in range(30):
        assert any(f"| r{i}c0 word{i} |" in c.text and f"| r{i}c7 word{i} |" in c.text for c in chunks), i


def test_captions_and_notes_in_a_tables_edge_rows_are_left_to_the_text():
    from knowledge.ingest._pdftables import _without_captions

    rows = [
        ["Table 7. Revenue by region in euros", "", ""],
        ["Region", "Q1", "Q2"],
        ["North", "10", "12"],
        ["note: figures are unaudited estimates", "", ""],
    ]
    assert _without_captions(rows) == [["Region", "Q1", "Q2"], ["North", "10", "12"]]
    short = [["Total", "", ""], ["North", "10", "12"]]  # a short label is a row, not a caption
    assert _without_captions(short) == short


def test_the_lines_of_multi_line_header_cells_become_one_header_row():
    from knowledge.ingest._pdftables import _header_rows, _merge_header_fragments

    rows = [
        ["", "", "", "2007", "", "2006", ""],
        ["", "Sample", "Sample", "", "", "", ""],
        ["Country", "", "", "", "", "", ""],
        ["", "unit", "size", "", "", "", ""],
        ["", "", "", "n", "% Pos", "n", "% Pos"],
        ["Austria", "Single", "25g", "109", "0.9", "93", "1.1"],
    ]
    merged = _merge_header_fragments(rows)
    assert merged[0] == ["Country", "Sample unit", "Sample size", "2007", "", "2006", ""]
    assert merged[1:] == rows[4:]
    assert _header_rows(merged) == 2  # the year row and the "n | % Pos" row under it
    dense = [["Name", "Age"], ["Ana", "41"], ["Ben", "37"]]
    assert _merge_header_fragments(dense) == dense


def test_a_box_around_two_tables_is_not_a_table_of_its_own():
    from knowledge.ingest._pdftables import _without_unions

    a = PdfTable(1, (50, 100, 500, 200), [["x", "y"], ["1", "2"]], 1, "hybrid")
    b = PdfTable(1, (50, 300, 500, 400), [["x", "y"], ["3", "4"]], 1, "hybrid")
    union = PdfTable(1, (40, 90, 510, 410), [["x", "y"], ["1", "2"], ["3", "4"]], 1, "hybrid")
    assert _without_unions([a, b, union]) == [a, b]
    assert _without_unions([a, union]) == [a, union]  # one table inside: a box around one is kept


def test_a_row_that_fits_only_without_the_header_gets_a_chunk_of_its_own_whole():
    from knowledge.ingest.document import Document, Section, Table

    header = "| Name | Address | Note |\n| --- | --- | --- |"
    long_row = "| " + " | ".join(" ".join(f"w{k}x{m}" for m in range(12)) for k in range(3)) + " |"
    short = "| a | b | c |"
    text = "\n".join([header, short, long_row, short])
    doc = Document(text, [Section(0, len(text), 1, None)], "pdf", pages=1, tables=[Table(0, len(header), len(text), 1)])
    embedder = HashEmbedder(64)
    head_tokens = embedder.count_tokens(header) + 1
    row_tokens = embedder.count_tokens(long_row)
    size = row_tokens + head_tokens // 2  # the row fits; the row and the header do not
    assert row_tokens < size < row_tokens + head_tokens and head_tokens <= size // 2
    chunks = chunk_document(doc, embedder, max_tokens=size, overlap_tokens=2).chunks
    holding = [c for c in chunks if long_row in c.text]
    assert holding and all(c.table_header is None for c in holding)


def test_prose_before_a_table_with_a_wide_header_is_not_cut_into_slivers():
    """A window whose best cut falls in a table's header ends before the table, and the next chunk
    starts at the table (before, it stepped back into the prose again and again: chunks of a few
    tokens, all ending where the table starts)."""
    from knowledge.ingest.document import Document, Section, Table

    prose = " ".join(f"word{k}" for k in range(150)) + "."
    header = "| " + " | ".join(f"Heading number {k}" for k in range(6)) + " |\n|" + " --- |" * 6
    body = "\n".join("| " + " | ".join(f"r{i}c{k}" for k in range(6)) + " |" for i in range(30))
    text = f"{prose}\n\n{header}\n{body}"
    start = len(prose) + 2
    doc = Document(
        text, [Section(0, len(text), 1, None)], "pdf", pages=1, tables=[Table(start, start + len(header), len(text), 1)]
    )
    chunks = chunk_document(doc, HashEmbedder(64), max_tokens=64, overlap_tokens=16).chunks
    ends = [c.char_end for c in chunks]
    assert len(set(ends)) == len(ends)  # no run of chunks all ending at the table's start, no row twice alone
    assert sum(1 for c in chunks if c.char_end <= start) <= 4  # 150 words of prose in 64-token chunks
    # the header (50 tokens: over half the chunk) is repeated over every chunk of rows, a row fitting under it
    body = [c for c in chunks if c.char_start > start + len(header)]
    assert len(body) >= 20 and all(c.table_header == header for c in body)


def test_justified_lines_whose_word_gaps_look_like_columns_are_not_a_table():
    from knowledge.ingest._pdftables import is_running_text

    justified = [
        ["", "Lorem ipsum dolor", "", "sit", "amet, consectetuer adip-", "nec, suscipit a, ipsum. Morbi", "ligula feugiat"],
        ["iscing", "elit.", "Ut purus", "elit,", "vestibulum ut, placerat", "magna. Nunc eleifend lorem.", "Sed lacinia"],
    ]
    assert is_running_text(justified)
    lower_case_table = [
        ["Ring", "Species", "Weight", "Site"],
        ["R00001", "owl", "1.5", "north"],
        ["R00002", "owl", "2.5", "south"],
    ]
    assert not is_running_text(lower_case_table)
    glossary = [["Term", "Meaning", "Note"]] + [
        [w, f"{w} a value without owning it", f"see the {w} chapter"] for w in ("borrow", "move", "copy")
    ]
    assert not is_running_text(glossary)  # lower case and several words a cell, but no clause cut between cells
