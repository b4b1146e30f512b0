"""A small PDF with a ruled table, made with fpdf2, for the tests of tables shown as tables: the
chunk's ``table_bbox``, the viewer's outline and table, the playground's table card."""

from __future__ import annotations

from fpdf import FPDF

HEADER = ("Region", "Year", "Revenue", "Note")
#: The rows under :data:`HEADER`; the last three carry text that must stay inert where it is shown.
ROWS = (
    ("North", "2019", "1,204", "steady"),
    ("South", "2019", "988", "<script>x</script>"),
    ("East", "2019", "1,530", "[x](javascript:y)"),
    ("West", "2019", "777", "**loud** $5$"),
)
HOSTILE = ("<script>x</script>", "[x](javascript:y)", "**loud** $5$")
INTRO = "Quarterly figures of the wombat cooperative, by region."
OUTRO = "The figures are in thousands of euros."


def ruled_table_pdf(rows: tuple[tuple[str, ...], ...] = ROWS, *, second_page: bool = True) -> bytes:
    """A PDF whose page 1 holds :data:`INTRO`, a ruled table (:data:`HEADER` over ``rows``, 130 mm
    wide, centred) and :data:`OUTRO`; with ``second_page`` a page 2 of prose only."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 7, INTRO, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    with pdf.table(col_widths=(30, 20, 30, 50), width=130, line_height=8) as table:
        for r in (HEADER, *rows):
            row = table.row()
            for cell in r:
                row.cell(cell)
    pdf.ln(4)
    pdf.multi_cell(0, 7, OUTRO, new_x="LMARGIN", new_y="NEXT")
    if second_page:
        pdf.add_page()
        for i in range(6):
            pdf.multi_cell(0, 7, f"Page two, line {i}: the cooperative met on a Tuesday.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())
