"""Builders of hostile PDFs for table detection (issue 43): busy pages, huge tables, tables without text.

Each function returns the bytes of one PDF made here with fpdf2, so the tests and ``bench/`` can import
them and nothing binary is committed. Every page with text carries a sentence with a marker word
(``WOMBAT-43xx``) that must be found in the text the reader returns, whatever became of its tables.
"""

from __future__ import annotations

import io
import itertools
import zlib

from fpdf import FPDF
from PIL import Image, ImageDraw


def _pdf(**kwargs):
    pdf = FPDF(unit="pt", **kwargs)
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=11)
    return pdf


def _png(img) -> bytes:
    """``img`` (Pillow) as PNG bytes."""
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _bytes(pdf) -> bytes:
    return bytes(pdf.output())


def tiny_cells(cols: int = 40, rows: int = 30, *, lines: bool = False) -> bytes:
    """One A4 page: a sentence, then a form grid of ``cols × rows`` tiny ruled cells (each its own
    rectangle: ``cols × rows`` path objects; ``lines``: the grid as ``cols + rows + 2`` long lines),
    every 37th cell with a letter and a number in it."""
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.text(40, 50, "Form grid WOMBAT-4301: tick the boxes that apply.")
    w, h = 515 / cols, 700 / rows
    pdf.set_font("Helvetica", size=5)
    pdf.set_line_width(0.3)
    if lines:
        for r in range(rows + 1):
            pdf.line(40, 80 + r * h, 555, 80 + r * h)
        for c in range(cols + 1):
            pdf.line(40 + c * w, 80, 40 + c * w, 780)
    for r in range(rows):
        for c in range(cols):
            x, y = 40 + c * w, 80 + r * h
            if not lines:
                pdf.rect(x, y, w, h)
            if (r * cols + c) % 37 == 0:
                pdf.text(x + 1, y + h - 2, f"{chr(65 + c % 26)}{r}")
    return _bytes(pdf)


def drawing(segments: int = 6_000, *, one_path: bool = False) -> bytes:
    """One A4 page: a sentence of prose and a drawing of ``segments`` line segments, each its own
    path object (a site plan as CAD exports it), or all in one path (``one_path``: one object with
    ``segments`` lines, which no count of path objects sees)."""
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.text(40, 50, "Site plan WOMBAT-4302: the drawing below shows the north wing.")
    pdf.set_line_width(0.2)
    ends = [(40 + (i * 37) % 515, 80 + (i * 53) % 700) for i in range(segments + 1)]
    if one_path:
        pdf.polyline(ends)
    else:
        for a, b in itertools.pairwise(ends):
            pdf.line(a[0], a[1], b[0], b[1])
    return _bytes(pdf)


def long_table(rows: int = 10_000, *, ruled: bool = True) -> bytes:
    """A sentence, then one table of a header row and ``rows`` body rows (``R00001 | Owl 1 | 1.5 |
    north``) over as many A4 pages as it needs, its header repeated on each page (fpdf2's table);
    ``ruled``: every cell boxed, else no lines at all."""
    pdf = _pdf(format="A4")
    pdf.set_auto_page_break(True, margin=40)
    pdf.add_page()
    pdf.text(40, 40, "Ringing records WOMBAT-4303: every bird ringed in the reserve.")
    pdf.set_y(60)
    pdf.set_font("Helvetica", size=8)
    layout = "ALL" if ruled else "NONE"
    with pdf.table(
        col_widths=(80, 140, 80, 120), width=420, borders_layout=layout, line_height=11, text_align="LEFT"
    ) as table:
        for row in [("Ring", "Species", "Weight kg", "Site")] + [
            (f"R{i:05d}", f"Owl {i}", f"{1 + i % 9}.{i % 10}", ("north", "south", "east", "west")[i % 4])
            for i in range(1, rows + 1)
        ]:
            line = table.row()
            for cell in row:
                line.cell(cell)
    return _bytes(pdf)


def empty_ruled_table() -> bytes:
    """Two pages. Page 1: a sentence, and below it a ruled 5 × 8 table with no text in any cell
    (its text drawn as an image, or never filled in). Page 2: lines only, no text at all."""
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.text(40, 50, "Inspection sheet WOMBAT-4304: the table below was left blank.")
    pdf.set_line_width(0.5)
    for r in range(9):
        pdf.line(40, 100 + r * 20, 540, 100 + r * 20)
    for c in range(6):
        pdf.line(40 + c * 100, 100, 40 + c * 100, 260)
    pdf.add_page()
    for r in range(9):
        pdf.line(40, 100 + r * 20, 540, 100 + r * 20)
    for c in range(6):
        pdf.line(40 + c * 100, 100, 40 + c * 100, 260)
    return _bytes(pdf)


def image_table() -> bytes:
    """Two pages. Page 1: a sentence, and a table that is a picture (a PNG of a ruled grid with
    dark blocks for words): no text in it. Page 2: only that picture, no text layer."""
    img = Image.new("L", (1000, 400), 255)
    draw = ImageDraw.Draw(img)
    for r in range(9):
        draw.line([(0, r * 49), (999, r * 49)], fill=0, width=2)
    for c in range(6):
        draw.line([(c * 199, 0), (c * 199, 399)], fill=0, width=2)
    for r in range(8):
        for c in range(5):
            draw.rectangle([c * 199 + 20, r * 49 + 15, c * 199 + 120, r * 49 + 32], fill=60)
    png = _png(img)
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.text(40, 50, "Scanned table WOMBAT-4305: the picture below is the price list.")
    pdf.image(io.BytesIO(png), x=40, y=80, w=500)
    pdf.add_page()
    pdf.image(io.BytesIO(png), x=40, y=80, w=500)
    return _bytes(pdf)


def small_table_pdf(*, width_pt: float = 595, height_pt: float = 842, marker: str = "WOMBAT-4306") -> bytes:
    """One page of ``width_pt × height_pt`` points: a sentence with ``marker`` and a ruled 3 × 4
    table (``Ring | Species | Site``) near its top-left corner."""
    pdf = _pdf(format=(width_pt, height_pt))
    pdf.add_page()
    pdf.text(40, 50, f"Ringing summary {marker}: three birds this week.")
    pdf.set_y(70)
    with pdf.table(col_widths=(80, 140, 80), width=300, line_height=14, text_align="LEFT") as table:
        for row in (
            ("Ring", "Species", "Site"),
            ("R1", "Barn owl", "north"),
            ("R2", "Tawny owl", "south"),
            ("R3", "Little owl", "east"),
        ):
            line = table.row()
            for cell in row:
                line.cell(cell)
    return _bytes(pdf)


def raw_pdf(pages: list[bytes], *, font: bool = True) -> bytes:
    """A PDF written by hand: one page per content stream in ``pages`` (A4, Helvetica as ``/F1``),
    each stream Flate-compressed. For content fpdf2 will not write (broken operators)."""
    objs: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    font_ref = b"/Resources << /Font << /F1 3 0 R >> >>" if font else b""
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for content in pages:
        packed = zlib.compress(content)
        page_no = len(objs) + 1
        objs.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] " + font_ref + b" /Contents %d 0 R >>" % (page_no + 1)
        )
        objs.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
        kids.append(b"%d 0 R" % page_no)
    objs[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(kids)
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)


def scattered_labels(labels: int = 4_000) -> bytes:
    """One A4 page: a sentence, and ``labels`` one-letter labels (in 3-point type) spread
    evenly so that no two touch: a scatter plot's or a map's labels, each a text block of its own."""
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.text(40, 50, "Survey map WOMBAT-4307: each label is a nest box.")
    pdf.set_font("Helvetica", size=3)
    cols = int((labels * 515 / 700) ** 0.5) + 1
    rows = labels // cols + 1
    for k in range(labels):
        r, c = divmod(k, cols)
        pdf.text(40 + c * 515 / cols, 80 + r * 700 / rows, chr(97 + k % 26))
    return _bytes(pdf)


def ruled_table_stream(rows: list[tuple[str, ...]], *, top: float = 700, left: float = 60) -> bytes:
    """PDF content operators drawing ``rows`` as a ruled table (cells 120 × 20 points, Helvetica
    ``/F1`` at 10 points), its top-left corner at ``(left, top)`` in PDF coordinates."""
    cols = len(rows[0])
    out = [b"0.5 w\n"]
    out += [b"%d %d m %d %d l S\n" % (left, top - r * 20, left + cols * 120, top - r * 20) for r in range(len(rows) + 1)]
    out += [b"%d %d m %d %d l S\n" % (left + c * 120, top, left + c * 120, top - len(rows) * 20) for c in range(cols + 1)]
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            out.append(b"BT /F1 10 Tf %d %d Td (%s) Tj ET\n" % (left + c * 120 + 4, top - r * 20 - 14, cell.encode()))
    return b"".join(out)


def detector_breaks() -> bytes:
    """Two pages written by hand. Page 1: a sentence, a ruled table, and one word set in a font of
    size 0 (legal PDF; camelot divides by the font size and fails on the page). Page 2: a sentence
    and a ruled table of ringing records that reads well."""
    birds = [("Ring", "Species", "Site"), ("R1", "Barn owl", "north"), ("R2", "Tawny owl", "south")]
    one = (
        b"BT /F1 12 Tf 40 780 Td (Damaged page WOMBAT-4308: its prose must survive.) Tj ET\n"
        + ruled_table_stream([("Item", "Count"), ("nails", "12"), ("screws", "30")])
        + b"BT /F1 0 Tf 100 100 Td (invisible) Tj ET\n"
    )
    two = b"BT /F1 12 Tf 40 780 Td (Ringing summary WOMBAT-4309: two birds.) Tj ET\n" + ruled_table_stream(birds)
    return raw_pdf([one, two])


def pictured_grid_table() -> bytes:
    """One page: a sentence, then a table whose ruling lines are a picture (a PNG of a 3 × 4 grid)
    and whose cells are real text, each body cell of the middle column on two lines (a scan with a
    text layer, a form printed on a background image)."""
    img = Image.new("L", (900, 400), 255)
    draw = ImageDraw.Draw(img)
    for r in range(5):
        draw.line([(0, min(r * 100, 398)), (899, min(r * 100, 398))], fill=0, width=3)
    for c in range(4):
        draw.line([(min(c * 300, 898), 0), (min(c * 300, 898), 399)], fill=0, width=3)
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.set_font("helvetica", size=10)
    pdf.text(20, 30, "Ringing sheet WOMBAT-4309: the grid is printed, the entries typed.")
    pdf.image(io.BytesIO(_png(img)), x=20, y=40, w=540)  # columns of 180 pt, rows of 60 pt
    cells = [
        ("Ring", ["Species"], "Site"),
        ("R1", ["Tawny owl", "adult female"], "north"),
        ("R2", ["Barn owl", "juvenile"], "south"),
        ("R3", ["Little owl", "adult male"], "east"),
    ]
    for r, (ring, species, site) in enumerate(cells):
        top = 40 + r * 60 + 24
        pdf.text(26, top, ring)
        for k, line in enumerate(species):
            pdf.text(206, top + k * 14, line)
        pdf.text(386, top, site)
    return _bytes(pdf)


def split_grid_table() -> bytes:
    """One page: a ruled 4-column table each of whose cells draws its own borders, as vector lines
    except in the third column, whose top, bottom and right rules are a small picture: read from
    the vector graphics alone it is two grids side by side (columns 1-2, and column 4 with the
    third column's text left between them)."""
    top, rows, width, height = 60, 6, 120, 24
    grid = Image.new("L", (width * 4, rows * height * 4), 255)  # the third column at 4 px a point
    draw = ImageDraw.Draw(grid)
    for r in range(rows + 1):
        y = min(r * height * 4, rows * height * 4 - 3)
        draw.line([(0, y), (width * 4, y)], fill=0, width=3)
    draw.line([(width * 4 - 3, 0), (width * 4 - 3, rows * height * 4)], fill=0, width=3)
    pdf = _pdf(format="A4")
    pdf.add_page()
    pdf.set_font("helvetica", size=10)
    pdf.text(40, 40, "Nest boxes WOMBAT-4310: checked in May.")
    pdf.set_line_width(0.8)
    for c in (0, 1, 3):
        x = 40 + c * width
        for r in range(rows + 1):
            pdf.line(x, top + r * height, x + width, top + r * height)
    for c in (0, 1, 2, 4):
        pdf.line(40 + c * width, top, 40 + c * width, top + rows * height)
    pdf.image(io.BytesIO(_png(grid)), x=40 + 2 * width, y=top, w=width, h=rows * height)
    cells = [("Box", "Wood", "Species", "Eggs")] + [
        (f"B{i}", ("oak", "pine", "larch")[i % 3], ("great tit", "blue tit", "nuthatch")[i % 3], str(i + 3))
        for i in range(1, rows)
    ]
    for r, row in enumerate(cells):
        for c, cell in enumerate(row):
            pdf.text(46 + c * width, top + r * height + 15, cell)
    return _bytes(pdf)


def spaced_key_values(marker: str = "WOMBAT-4310") -> bytes:
    """One A4 page: a sentence, a two-column table of age groups and proportions whose columns are
    set apart inside one text object (``[(20-29) -11000 (0.2650)] TJ``: a gap of 110 points, no
    space character), as a word processor's tab stops come out, and a sentence under it."""
    rows = [("Age Group", "Proportion"), ("20-29", "0.2650"), ("30-39", "0.2046"), ("40-49", "0.1477")]
    rows += [("50-59", "0.1514"), ("60-69", "0.1225"), ("70-79", "0.0752")]
    from fpdf import FPDF

    metrics = FPDF(unit="pt")
    metrics.set_font("helvetica", size=10)
    lines = [b"BT /F1 10 Tf 72 760 Td (These proportions from the 1980 census are used for every age group.) Tj ET"]
    for i, (a, b) in enumerate(rows):
        move = round((150 - metrics.get_string_width(a)) * 100)  # to x = 72 + 150, in thousandths of the size
        lines.append(b"BT /F1 10 Tf 72 %d Td [(%s) -%d (%s)] TJ ET" % (730 - 14 * i, a.encode(), move, b.encode()))
    lines.append(
        b"BT /F1 10 Tf 72 620 Td (The next proportions are used for trends between surveys %s.) Tj ET" % marker.encode()
    )
    return raw_pdf([b"\n".join(lines)])
