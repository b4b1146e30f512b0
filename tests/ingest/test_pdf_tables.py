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
        assert chunk.text.startswith("| Region | Quarter | Revenue |\n|-|-|-|\n")  # the delimiter row compact
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
    for name in ("Table 3 (continued)", "TABLE IV.", "Tab. 2:"):  # a table's name is its caption, however short
        assert _without_captions([[name, "", ""], *short]) == short
    assert _without_captions([["Tablets", "", ""], *short])[0] == ["Tablets", "", ""]


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
    # the header (over half the chunk) is repeated over every chunk of rows, a row fitting under it
    body = [c for c in chunks if c.char_start > start + len(header)]
    assert len(body) >= 20 and all(c.table_header == header.split("\n")[0] + "\n|-|-|-|-|-|-|" for c in body)


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


def test_a_grid_printed_as_a_picture_keeps_its_multi_line_cells_whole():
    """The rules are an image, the entries text: the grid is seen in the drawn page (the vector
    graphics have no rules), so a cell's two lines stay one cell instead of becoming rows."""
    from tests.helpers import hostile_pdfs

    doc = read_pdf(hostile_pdfs.pictured_grid_table(), ocr="off")
    assert doc.text == (
        "Ringing sheet WOMBAT-4309: the grid is printed, the entries typed.\n\n"
        "| Ring | Species | Site |\n| --- | --- | --- |\n"
        "| R1 | Tawny owl adult female | north |\n"
        "| R2 | Barn owl juvenile | south |\n"
        "| R3 | Little owl adult male | east |"
    )
    assert [(t.page, t.header_end - t.char_start) for t in doc.tables] == [(1, 45)]


def test_the_screen_tells_ruled_pages_from_aligned_text_and_prose():
    """``screen`` says whether a page may hold a table and whether it draws a grid's worth of rules:
    only those pages are searched for ruled grids (lattice), the others by text alignment only."""
    import pypdfium2 as pdfium
    from fpdf import FPDF

    from knowledge.ingest._pdftables import screen

    unruled = FPDF()
    unruled.set_font("helvetica", size=10)
    unruled.add_page()
    for i, row in enumerate(_rows(4)):
        for j, cell in enumerate(row):
            unruled.text(20 + 50 * j, 20 + 6 * i, cell)
    prose = FPDF()
    prose.set_font("helvetica", size=10)
    prose.add_page()
    prose.multi_cell(0, 6, BEFORE * 6)
    for data, expected in (
        (_pdf(_rows(4)), (True, True)),
        (bytes(unruled.output()), (True, False)),
        (bytes(prose.output()), (False, False)),
    ):
        pdf = pdfium.PdfDocument(data)
        try:
            assert screen(pdf, 1) == expected
        finally:
            pdf.close()


def test_rules_drawn_as_shapes_the_vector_reading_misses_still_separate_the_cells(corpus):
    """ICDAR 2013's us-004: its rules are bevelled shapes; read from the vector graphics alone one
    inner rule is missing and two numbers fall into one cell. Such a grid is checked on the drawn
    page."""
    doc = read_pdf((corpus / "pdf-tables" / "icdar2013" / "us-004.pdf").read_bytes(), ocr="off")
    assert "| 1-4 family residential mortgage | 4,151,000 | 25.0 | 4,090,000 | 27.5 | 3,925,000 | 24.9 |" in doc.text


def test_a_grid_split_in_two_by_a_rule_the_vector_graphics_lack_is_read_whole():
    """One column's rules are a picture: from the vector graphics alone the grid is two grids side by
    side with that column's text between them. Grids side by side with the same top and bottom are
    checked on the drawn page, where the table is one grid of four columns."""
    from tests.helpers import hostile_pdfs

    doc = read_pdf(hostile_pdfs.split_grid_table(), ocr="off")
    assert doc.text.startswith(
        "Nest boxes WOMBAT-4310: checked in May.\n\n| Box | Wood | Species | Eggs |\n| --- | --- | --- | --- |\n"
        "| B1 | pine | blue tit | 4 |\n"
    )
    assert doc.text.count("nuthatch") == 2 and len(doc.tables) == 1


def test_words_of_two_ruled_cells_set_close_together_are_split_at_the_rule():
    """A date set flush right against a rule and the amount flush left after it are one line to the
    layout analysis; the rule between them is where the cells part."""
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="A4")
    pdf.set_font("helvetica", size=10)
    pdf.add_page()
    pdf.text(40, 40, "Gifts received WOMBAT-4311, by date.")
    xs, top, height = [40, 160, 240, 320], 60, 20
    rows = [("Donor", "Date", "Amount")] + [(f"Donor {i}", f"10/{i:02d}/2012", f"{i * 15}.00") for i in range(1, 7)]
    pdf.set_line_width(0.6)
    for r in range(len(rows) + 1):
        pdf.line(xs[0], top + r * height, xs[-1], top + r * height)
    for x in xs:
        pdf.line(x, top, x, top + len(rows) * height)
    for r, (donor, date, amount) in enumerate(rows):
        y = top + r * height + 14
        pdf.text(xs[0] + 4, y, donor)
        pdf.text(xs[2] - 1 - pdf.get_string_width(date), y, date)  # flush right against the rule
        pdf.text(xs[2] + 1.5, y, amount)  # flush left after it
    doc = read_pdf(bytes(pdf.output()), ocr="off")
    assert "| Donor | Date | Amount |\n| --- | --- | --- |\n| Donor 1 | 10/01/2012 | 15.00 |\n" in doc.text
    assert "| Donor 6 | 10/06/2012 | 90.00 |" in doc.text


def test_right_to_left_cells_are_in_logical_order():
    """camelot gives a cell's characters in the order they are drawn, left to right: Hebrew and
    Arabic back to front. They are turned to the order a person types and searches; numbers and
    Latin words inside stay left to right; a cell without right-to-left letters is left alone."""
    import unicodedata

    from knowledge.ingest._pdftables import logical_order

    assert logical_order("לכה ךס") == "סך הכל"
    assert logical_order("ططق 47 يدنع") == "عندي 47 قطط"
    # as drawn, in presentation forms: the lam-alef ligature is one character until NFKC splits it
    drawn = "\ufe94\ufef3\ufeb0\ufef4\ufee0\ufea0\ufee7\ufefb\ufe8d \ufef2\ufed3 Jeremy \ufef2\ufee4\ufeb3\ufe8d"
    assert unicodedata.normalize("NFKC", logical_order(drawn)) == "اسمي Jeremy في الانجليزية"
    assert logical_order("Jeremy is يمرج in Arabic") == "Jeremy is جرمي in Arabic"
    assert logical_order("-4.3 | 12.0") == "-4.3 | 12.0"


def test_an_arabic_table_reads_in_logical_order_and_its_lines_are_not_written_twice(corpus):
    doc = read_pdf((corpus / "pdf-tables" / "camelot" / "arabic.pdf").read_bytes(), ocr="off")
    assert "| 1234 | عندي 47 قطط |" in doc.text
    assert "| انا من ولاية كارولينا الشمال | من اين انت؟ |" in doc.text
    assert doc.text.count("قطط") == 1  # the page's own line of it was replaced by the table


def test_compose_page_takes_the_tables_lines_the_text_reader_ran_together_or_read_apart():
    """The text reader ran a cell's two lines together ("owladult"), set a blank line among the rows,
    and read a column apart from its rows at the page's end: all of it is the table's and written
    once. Two lines of prose far from the table that only repeat its words stay."""
    rows = [["Ring", "Species", "Date"], ["R1", "Tawny owl adult", "03/01/2016"], ["R2", "Barn owl juvenile", "03/08/2016"]]
    rows += [["R3", "Little owl", "03/10/2016"]]
    table = PdfTable(1, (10, 10, 200, 60), rows, 1, "lattice")
    text = "\n".join(
        [
            "Ringing sheet",
            "Ring Species",
            "R1 Tawny owladult",
            "",
            "R2 Barn owl juvenile",
            "R3 Little owl",
            "Notes on the season follow.",
            "The wood was wet in March,",
            "and the boxes were checked twice:",
            "Barn owl",
            "Little owl",
            "More notes.",
            "03/01/2016",
            "03/08/2016",
            "03/10/2016",
        ]
    )
    out = compose_page(text, [table])
    assert out == "\n\n".join(
        [
            "Ringing sheet",
            table.markdown,
            "Notes on the season follow.\nThe wood was wet in March,\nand the boxes were checked twice:\n"
            "Barn owl\nLittle owl\nMore notes.",
        ]
    )


def _ruled(pdf, rows: list[list[str]], top: float, widths: list[float], height: float = 18) -> None:
    """Draw ``rows`` as a ruled table on ``pdf`` (fpdf2, points) from ``top``, 40 pt from the left."""
    xs = [40.0]
    for w in widths:
        xs.append(xs[-1] + w)
    pdf.set_line_width(0.6)
    for r in range(len(rows) + 1):
        pdf.line(xs[0], top + r * height, xs[-1], top + r * height)
    for x in xs:
        pdf.line(x, top, x, top + len(rows) * height)
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            pdf.text(xs[c] + 4, top + r * height + 12, cell)


def _register_over_two_pages() -> bytes:
    """Page 1 draws a ruled register down to its foot, then its title block at its head; page 2 draws
    a summary table at its foot first, then the register's rows going on at its head."""
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="A4")
    pdf.set_font("helvetica", size=9)
    pdf.add_page()
    register = [["Ring", "Species", "Eggs"]] + [[f"R{i:03d}", "Tawny owl", str(i % 5)] for i in range(1, 38)]
    _ruled(pdf, register, 120, [100, 160, 120])  # 38 rows of 18 pt: to 804 of 842
    for k, line in enumerate(["Ringing register WOMBAT-4312", "Reserve north", "Season 2026", "Ringer: A. Ng", "Page 1"]):
        pdf.text(40, 30 + 14 * k, line)
    pdf.add_page()
    _ruled(pdf, [["Species", "Birds"], ["Tawny owl", "52"], ["Barn owl", "9"]], 600, [160, 80])
    _ruled(pdf, [[f"R{i:03d}", "Barn owl", str(i % 5)] for i in range(38, 53)], 40, [100, 160, 120])
    return bytes(pdf.output())


def test_a_table_reaching_the_page_foot_goes_on_overleaf_whatever_order_the_text_reader_chose():
    """Page 1 draws its table down to the foot, then its title block at the head: the text reader
    puts the five title lines after the table. Page 2 draws a summary table at its foot first, then
    the rows going on at its head. The register is one table over both pages, written first on
    page 2; the summary is a table of its own with its own header."""
    doc = read_pdf(_register_over_two_pages(), ocr="off")
    register_table, summary = doc.tables
    assert (register_table.page, summary.page) == (1, 2)
    body = doc.text[register_table.char_start : register_table.char_end]
    assert body.count("| Ring | Species | Eggs |") == 1 and "| R001 | Tawny owl | 1 |" in body
    assert "| R038 | Barn owl | 3 |" in body and "| R052 | Barn owl | 2 |" in body and "Birds" not in body
    assert doc.text[summary.char_start : summary.header_end] == "| Species | Birds |\n| --- | --- |"


def test_the_first_chunk_of_a_page_the_table_goes_on_to_repeats_its_header():
    """Chunks are cut page by page: the first chunk of page 2 starts inside the register's body, and
    repeats its header like every other chunk of its rows; so does a page whose rows fit one chunk."""
    doc = read_pdf(_register_over_two_pages(), ocr="off")
    register_table = doc.tables[0]
    for size in (60, 400):
        chunks = chunk_document(doc, HashEmbedder(64), max_tokens=size, overlap_tokens=0).chunks
        page_two = [c for c in chunks if c.page == 2 and c.char_start < register_table.char_end]
        assert page_two and page_two[0].char_start == doc.sections[1].char_start
        assert all(c.table_header == "| Ring | Species | Eggs |\n|-|-|-|" for c in page_two)
        assert page_two[0].text.startswith("| Ring | Species | Eggs |\n|-|-|-|\n| R038 | Barn owl | 3 |")


def _rules_only(rows: list[list[list[str]]], rules_at: list[int], *, xs=(40, 200, 300, 520), top=80, line=12) -> bytes:
    """A table with horizontal rules only (no vertical ones): ``rows`` of cells, each cell a list of
    lines, set from ``top`` a line apart; a rule above the rows whose indexes are in ``rules_at``
    and one under the last."""
    from fpdf import FPDF

    pdf = FPDF(unit="pt", format="A4")
    pdf.set_font("helvetica", size=10)
    pdf.add_page()
    pdf.text(40, 50, "Animal sounds WOMBAT-4313, as children say them.")
    pdf.set_line_width(0.8)
    y = top
    for i, row in enumerate(rows):
        if i in rules_at:
            pdf.line(xs[0], y - 9, xs[-1], y - 9)
        for c, cell in enumerate(row):
            for k, text in enumerate(cell):
                pdf.text(xs[c] + 4, y + k * line, text)
        y += line * max(len(cell) for cell in row) + 6
    pdf.line(xs[0], y - 9, xs[-1], y - 9)
    return bytes(pdf.output())


def test_a_table_ruled_between_its_rows_keeps_its_wrapped_cells_in_one_row():
    """No vertical rules, so not a ruled grid: a rule under each row parts the rows, and the lines of
    a wrapped cell stay in their row instead of becoming rows of their own."""
    rows = [
        [["Animal"], ["Action"], ["Result"]],
        [["Cat"], ["Says"], ["Meow"]],
        [["Parastratiosph-", "ecomyioides"], ["Says"], ["bzzzzzz"]],
        [["Fox"], ["Says"], ["Ring-ding-", "dingeringeding"]],
        [["Dog"], ["Says"], ["Woof"]],
    ]
    doc = read_pdf(_rules_only(rows, rules_at=[0, 1, 2, 3, 4]), ocr="off")
    assert "| Parastratiosph- ecomyioides | Says | bzzzzzz |" in doc.text
    assert "| Fox | Says | Ring-ding- dingeringeding |" in doc.text
    assert "| Dog | Says | Woof |" in doc.text


def test_full_rows_between_two_rules_stay_rows():
    """Ruled only above the header, under it and under the table (the common three rules): the body
    rows between two rules are full rows, each its own."""
    rows = [[["Animal"], ["Action"], ["Result"]]] + [[[f"Animal {i}"], ["Says"], [f"sound {i}"]] for i in range(1, 7)]
    doc = read_pdf(_rules_only(rows, rules_at=[0, 1]), ocr="off")
    for i in range(1, 7):
        assert f"| Animal {i} | Says | sound {i} |" in doc.text


def test_a_pdf_whose_permissions_forbid_copying_text_still_has_its_tables_read():
    """Encrypted with an empty password and permissions that forbid copying text (camelot refuses
    such a file): the reader reads its text, so its tables are read too."""
    import io

    from pypdf import PdfReader, PdfWriter
    from pypdf.constants import UserAccessPermissions

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(_pdf(_rows(6)))))
    writer.encrypt(user_password="", owner_password="OWNER-7781", permissions_flag=UserAccessPermissions.PRINT)
    out = io.BytesIO()
    writer.write(out)
    locked = out.getvalue()
    assert PdfReader(io.BytesIO(locked)).is_encrypted
    doc = read_pdf(locked, ocr="off")
    assert len(doc.tables) == 1 and not doc.warnings
    assert "| Region | Quarter | Revenue |" in doc.text
    assert "| Region 5 | Q2 | 5017.50 |" in doc.text


def _paper_page(table: list[list[str]], prose: list[str]) -> bytes:
    """A page of a two-column paper (fpdf2): ``prose`` lines in the left column; in the right
    column a caption, then ``table`` (first row its header) ruled only across, above and under the
    header and under the last row, its cells set apart by whitespace."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=9)
    pdf.add_page()
    for i, line in enumerate(prose):
        pdf.text(12, 20 + i * 4.5, line)
    pdf.text(110, 30, "Table 2. Test results of the three models on the held data.")
    widths = [26, 18, 18, 18]
    top = 34.0
    for i, row in enumerate(table):
        y = top + 5 + i * 5
        x = 110.0
        for w, cell in zip(widths, row, strict=True):
            pdf.text(x, y, cell)
            x += w
    bottom = top + 5 * len(table) + 2
    for y in (top, top + 6.5, bottom):
        pdf.line(109, y, 110 + sum(widths), y)
    return bytes(pdf.output())


def test_a_table_ruled_only_across_in_one_column_of_a_paper_is_a_table_without_the_other_columns_prose():
    """Scientific papers set tables with three rules across and no vertical ones, in one column of
    a two-column page: the table is read as rows, its caption and the other column's running text
    are not its cells."""
    table = [["Model", "AP", "AP50", "AR"]] + [[f"Model-{k}", f"0.{k}21", f"0.{k}55", f"0.{k}73"] for k in range(1, 7)]
    prose = [
        "we train two models on the canonical data and",
        "report the results of each of them in the table,",
        "which measures the performance jointly for both",
        "tasks and gives the scores of the models trained",
        "on the data derived from the collection of pages",
        "that were annotated by hand for this purpose and",
        "checked twice by the authors before the release",
        "of the dataset to the public at large this year.",
    ] * 3
    doc = read_pdf(_paper_page(table, prose), ocr="off")
    assert len(doc.tables) == 1
    for row in table:
        assert "| " + " | ".join(row) + " |" in doc.text
    rows = [line for line in doc.text.splitlines() if line.startswith("|")]
    assert not any("train two models" in r or "Table 2." in r for r in rows)
    assert "we train two models on the canonical data and" in doc.text


def test_a_page_columns_running_text_read_as_a_tables_last_column_is_left_out():
    """A table in one column of a two-column page, its text-alignment reading taking the other
    column's lines for one more column: that column is running text, not the table's."""
    from knowledge.ingest._pdftables import _prose_columns

    prose = [
        "can be seen from the following table that the removal is",
        "linearly and quadratically dependent on the temperature and",
        "mesh size, and linearly on the acidity, but does not change",
        "with the initial concentration of the dye in the water, and",
        "affects the removal efficiency only when the mesh is fine",
        "according to the following table, the binary interactions",
    ]
    table = [["Source", "DF", "SS"]] + [[f"x{i}", "1", f"{i}.457"] for i in range(1, 7)]
    rows = []
    for i, line in enumerate(prose):  # the prose's lines fall between the table's rows, or beside them
        rows.append([*table[i], ""] if i % 2 else ["", "", "", line])
        rows.append([*table[i], line] if i % 2 else [*table[i], ""])
    assert _prose_columns(rows) == {3}
    # a column of descriptions is the table's: its cells do not read on from one to the next
    described = [["Item", "Qty", "Description"]] + [
        [f"A-{i}", str(i), f"Steel bracket number {i} for the north wall, painted grey twice"] for i in range(6)
    ]
    assert _prose_columns(described) == set()
    # nor is a table of two columns ever left with one
    assert _prose_columns([["", line] for line in prose]) == set()


def test_only_the_rows_between_the_first_and_last_rule_across_a_whitespace_table_are_its_rows():
    """A table ruled only across (three rules) read by the whitespace parser, with its caption
    above the first rule and a note under the last: the rows between the rules are the table; with
    fewer than two rules across, no table is taken from that parser."""
    from types import SimpleNamespace

    from knowledge.ingest._pdftables import _ruled_band

    # rows top to bottom as (top, bottom) in points from the page's foot; columns (left, right)
    bands = [(720, 710), (710, 692), (692, 672), (672, 661), (661, 649), (649, 637), (637, 628), (628, 610)]
    t = SimpleNamespace(rows=bands, cols=[(310, 360), (360, 420), (420, 545)])
    rules = [(315, 539, 688.0), (315, 539, 673.0), (315, 539, 625.0), (40, 120, 650.0)]
    assert _ruled_band(t, rules) == [2, 3, 4, 5, 6]
    assert _ruled_band(t, rules[:1] + rules[3:]) is None  # one rule across (the other is short)


def test_a_merged_cell_is_told_from_two_cells_a_missed_rule_joined():
    """A ruled grid's body cell open on its right is drawn and looked at again (300 dpi) only when
    the row holds two texts set apart at that edge: a merged cell's text runs across the cells it
    spans, or stands in its first one alone."""
    from types import SimpleNamespace

    from knowledge.ingest._pdftables import _apart

    left = SimpleNamespace(x1=100.0, x2=200.0, y1=500.0, y2=520.0)
    right = SimpleNamespace(x1=200.0, x2=300.0, y1=500.0, y2=520.0)

    def word(x0: float, text: str, y: float = 505.0) -> list[tuple[float, float, float, float]]:
        return [(x0 + 6 * k, y, x0 + 6 * k + 5, y + 9) for k in range(len(text))]

    assert _apart(left, right, word(110, "Canada") + word(230, "Ottawa"))  # two cells' texts
    assert not _apart(left, right, word(180, "Europe"))  # centred across the edge: merged
    assert not _apart(left, right, word(110, "Europe"))  # in the first cell only: merged
    assert not _apart(left, right, word(110, "Canada", y=540.0) + word(230, "Ottawa", y=540.0))  # another row's


def test_a_page_of_complete_grids_is_read_by_lattice_alone_and_an_unruled_table_beside_them_still_found():
    """Hybrid (text alignment) is skipped on a page whose complete ruled grids hold all its text set
    in columns; a page with an unruled table besides its grid still has both tables."""
    from fpdf import FPDF

    from knowledge.ingest._pdftables import _grids_hold_the_columns

    def page(parts: bool) -> bytes:
        pdf = FPDF()
        pdf.set_font("helvetica", size=10)
        pdf.add_page()
        with pdf.table(first_row_as_headings=True) as table:
            for values in _rows(5):
                row = table.row()
                for value in values:
                    row.cell(value)
        pdf.ln(10)
        pdf.multi_cell(0, 6, BEFORE, new_x="LMARGIN", new_y="NEXT")
        y = pdf.get_y() + 10
        rows = [("Part", "Count", "Price"), ("Bolt", "12", "0.40"), ("Nut", "30", "0.15"), ("Washer", "80", "0.05")]
        for i, (name, count, price) in enumerate(rows if parts else []):
            pdf.text(20, y + i * 6, name)
            pdf.text(80, y + i * 6, count)
            pdf.text(140, y + i * 6, price)
        return bytes(pdf.output())

    only_grid, beside = page(False), page(True)
    doc = read_pdf(only_grid, ocr="off")
    assert len(doc.tables) == 1 and "| Region 4 | Q1 | 4017.50 |" in doc.text
    doc = read_pdf(beside, ocr="off")
    assert len(doc.tables) == 2
    assert "| Region 4 | Q1 | 4017.50 |" in doc.text and "| Bolt | 12 | 0.40 |" in doc.text

    # the test itself, on boxes: a grid of one cell from x 100 to 300, y 500 to 520
    from types import SimpleNamespace

    grid = SimpleNamespace(cells=[[SimpleNamespace(x1=100.0, x2=300.0, y1=500.0, y2=520.0)]])

    def line(x0: float, text: str, y: float) -> list[tuple[float, float, float, float]]:
        return [(x0 + 6 * k, y, x0 + 6 * k + 6, y + 10) for k in range(len(text)) if text[k] != " "]

    cell = line(105, "Bolts and nuts of steel", 512) + line(105, "washers in bags of ten", 502)
    title = line(100, "Parts", 600)
    assert _grids_hold_the_columns([grid], cell * 2 + title)  # a grid and its title: the page is the grid
    prose = line(100, "the annual report follows below", 400) + line(100, "with the figures of each", 388)
    assert not _grids_hold_the_columns([grid], cell + prose)  # most of the page's text is outside the grid
    columns = line(100, "Part", 400) + line(200, "Count", 400)
    assert not _grids_hold_the_columns([grid], cell * 3 + columns + columns)  # an unruled table outside
    assert not _grids_hold_the_columns([grid], line(105, "Bolt", 505) + line(250, "12", 505))  # two texts, one cell


# -- kinds found on a held set of other files (issue 43) -------------------------------------------------
def test_a_key_value_table_whose_columns_are_set_apart_inside_one_text_run_is_a_table():
    """PDFium gives ``[(20-29) -11000 (0.2650)] TJ`` one text rectangle: the screen looks inside such
    a wide run for the gap (before, the page was never handed to the table detector)."""
    from tests.helpers.hostile_pdfs import spaced_key_values

    doc = read_pdf(spaced_key_values(), ocr="off")
    (table,) = doc.tables
    assert doc.text[table.char_start : table.char_end].split("\n")[:3] == [
        "| Age Group | Proportion |",
        "| --- | --- |",
        "| 20-29 | 0.2650 |",
    ]
    assert "| 70-79 | 0.0752 |" in doc.text and "WOMBAT-4310" in doc.text


def test_rows_stacked_in_one_grid_row_by_a_missing_rule_are_apart_and_a_header_cell_is_not():
    from knowledge.ingest._pdftables import _unstacked

    rows = [
        ["PRODUCTS", "HARVEST\n11/12", "VARIATION\n(c/a)"],  # a two-line header: words, not figures
        ["RICE", "2.426,7", "(1,3)"],
        ["SORGHUM\nSUBTOTAL\nOAT", "786,9\n48.386,0\n153,0", "6,3\n5,3\n10,3"],
        ["Notes on the\ncrops", "see\nbelow", ""],  # a wrapped text cell beside another
    ]
    out, origin = _unstacked(rows)
    assert out == [
        rows[0],
        rows[1],
        ["SORGHUM", "786,9", "6,3"],
        ["SUBTOTAL", "48.386,0", "5,3"],
        ["OAT", "153,0", "10,3"],
        rows[3],
    ]
    assert origin == [0, 1, 2, 2, 2, 3]


def test_a_grid_whose_body_is_one_row_of_stacked_figures_is_not_taken_for_the_table():
    """A box with rules between the columns only: camelot's grid holds every row in one; the
    whitespace reading (hybrid) has them apart, and is the one kept."""
    from knowledge.ingest._pdftables import _stacked_figures

    assert _stacked_figures(["All ages\n. . .\n.", "291,099\n54,425\n34,947", "100.0\n18.7\n12.0"])
    assert not _stacked_figures(["Margin of\nerror (±)", "Number", "Percent"])
    assert not _stacked_figures(["a\nb\nc", "d\ne\nf", "1"])  # words, not figures


def test_the_last_words_of_the_paragraph_above_are_not_the_tables_first_row():
    from knowledge.ingest._pdftables import _without_captions

    rows = [["surveys.", ""], ["Age Group", "Proportion"], ["20-29", "0.2834"]]
    assert _without_captions(rows) == rows[1:]
    assert _without_captions([["Total", ""], ["a", "1"]]) == [["Total", ""], ["a", "1"]]  # a label row stays


def test_a_cell_spanning_rows_is_spread_to_each_of_them():
    """A plan type ruled across three rows: each row says it, so a chunk holding one row still
    answers which plan type it is (merged cells spread, issue 43)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Enrolment by plan WOMBAT-4311.", new_x="LMARGIN", new_y="NEXT")
    with pdf.table(first_row_as_headings=True) as table:
        for values in (["Plan Type", "County", "Totals"],):
            row = table.row()
            for value in values:
                row.cell(value)
        row = table.row()
        row.cell("GMC", rowspan=3)
        row.cell("Sacramento")
        row.cell("126,547")
        for county, total in (("San Diego", "71,831"), ("Placer", "9,404")):
            row = table.row()
            row.cell(county)
            row.cell(total)
    doc = read_pdf(bytes(pdf.output()), ocr="off")
    assert "| GMC | Sacramento | 126,547 |\n| GMC | San Diego | 71,831 |\n| GMC | Placer | 9,404 |" in doc.text


def test_a_heading_over_one_justified_line_of_prose_is_not_a_table(corpus):
    """pdflatex's filler text: camelot took "4 Foo" over a justified line, whose wide word gaps it
    read as columns ("Hello, here | is | some | text without a meaning. | ..."), for a table of two
    rows. Fewer than two rows with two cells or more is not a table."""
    from types import SimpleNamespace

    from knowledge.ingest._pdftables import _table

    rows = [["4 Foo", "", "", "", ""], ["Hello, here", "is", "some", "text without a meaning.", "This"]]
    cell = SimpleNamespace(x1=100.0, x2=200.0, y1=600.0, y2=620.0)
    found = SimpleNamespace(
        df=SimpleNamespace(values=SimpleNamespace(tolist=lambda: rows)),
        cells=[[cell] * 5, [cell] * 5],
        page=2,
        pdf_size=(595, 842),
        rotation="",
    )
    assert _table(found, "hybrid") is None
    rows.append(["Bar", "is", "two", "rows", "now"])  # a second row of cells: a table
    found.cells.append([cell] * 5)
    assert _table(found, "hybrid") is not None
    data = (corpus / "pdf" / "pdflatex-outline.pdf").read_bytes()
    doc = read_pdf(data, ocr="off")
    assert "| Hello, here |" not in doc.text and "Hello, here is some text without a meaning." in doc.text
    # nor is the page handed to camelot at all: its numbered headings ("2 Bar", a wide gap inside one
    # text run) stand one per section, not line under line as rows do
    import pypdfium2 as pdfium

    from knowledge.ingest._pdftables import screen

    pdf = pdfium.PdfDocument(data)
    try:
        assert [screen(pdf, n) for n in (2, 3, 4)] == [(False, False)] * 3
    finally:
        pdf.close()
