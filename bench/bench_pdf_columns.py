"""Reading order of two-column PDF pages: which extraction keeps sentences whole?

Compares pypdf's plain and layout modes, PDFium's text page order (pypdfium2 ``get_text_range``)
and the product's reader (PDFium's text rectangles split at the column gutter, see
``knowledge.ingest._pdf.column_text``) on ``../shared/corpus/pdf/multicolumn.pdf`` (LaTeX: columns
drawn one after the other) and on a page built here whose two columns are drawn row by row (left
line, right line, ...). A probe is a sentence that runs over several lines -- one of them over the
column break -- and counts when it comes out contiguous (whitespace collapsed, words hyphenated at
a line end joined). Prints probes kept per method and milliseconds per page. Never fails.

Usage: ``python bench/bench_pdf_columns.py``.
"""

from __future__ import annotations

import io
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MULTICOLUMN = ROOT.parent / "shared" / "corpus" / "pdf" / "multicolumn.pdf"

LEFT = ["The left column starts", "with alpha words about", "river otters and their", "dens along the bank."]
RIGHT = ["The right column tells", "of granite quarries and", "the masons who cut", "stone for the bridge."]
PROBES = {
    "multicolumn.pdf": [
        "Lorem ipsum dolor sit amet, consectetuer adipiscing elit. Ut purus elit, vestibulum ut, placerat ac,"
        " adipiscing vitae, felis.",
        "Vivamus viverra fermentum felis. Donec nonummy pellentesque ante. Phasellus adipiscing semper elit.",
        "Sed diam turpis, molestie vitae, placerat a, molestie nec, leo.",
    ],
    "rows.pdf": [" ".join(LEFT), " ".join(RIGHT)],
}


def rows_pdf() -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.text(20, 20, "A Title Across The Whole Page")
    for i, (left, right) in enumerate(zip(LEFT, RIGHT)):
        pdf.text(20, 40 + i * 6, left)
        pdf.text(110, 40 + i * 6, right)
    return bytes(pdf.output())


def normal(text: str) -> str:
    text = text.replace("\ufffe", "").replace("\r\n", "\n")
    text = re.sub(r"(\w)-\n(?=[a-z])", r"\1", text)
    return " ".join(text.split())


def methods():
    import pypdf
    import pypdfium2 as pdfium

    from knowledge.ingest import read_document

    def plain(data):
        return "\n".join(p.extract_text() for p in pypdf.PdfReader(io.BytesIO(data)).pages)

    def layout(data):
        return "\n".join(p.extract_text(extraction_mode="layout") for p in pypdf.PdfReader(io.BytesIO(data)).pages)

    def pdfium_order(data):
        doc = pdfium.PdfDocument(data)
        try:
            return "\n".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))
        finally:
            doc.close()

    def product(data):
        return read_document(data, "x.pdf").text

    return {"pypdf plain": plain, "pypdf layout": layout, "PDFium text order": pdfium_order, "product (columns)": product}


def main() -> int:
    files = {"rows.pdf": rows_pdf()}
    if MULTICOLUMN.exists():
        files["multicolumn.pdf"] = MULTICOLUMN.read_bytes()
    else:
        print(f"{MULTICOLUMN} not found; only the built page is measured", file=sys.stderr)
    for name, run in methods().items():
        cells = []
        for fname, data in files.items():
            import pypdf

            pages = len(pypdf.PdfReader(io.BytesIO(data)).pages)
            t0 = time.perf_counter()
            text = normal(run(data))
            ms = (time.perf_counter() - t0) * 1000 / pages
            kept = sum(1 for p in PROBES[fname] if normal(p) in text)
            cells.append(f"{fname}: {kept}/{len(PROBES[fname])} probes whole, {ms:.1f} ms/page")
        print(f"{name:>18}: " + "; ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
