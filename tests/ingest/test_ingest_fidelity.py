"""Ingestion fidelity (issue 14): everything a person sees is searchable, nothing they don't see is.

Each test pins one *kind* of failure, from a case of ``../shared/cases/ingest-fidelity`` (skipped
when that folder is absent, except under ``CI=true``) or from a small input built here. "Searchable"
means: a words-only (BM25) search and a hybrid search for the token both return a hit whose text
holds it; "hidden" means no hit of either holds it.
"""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest import read_document
from knowledge.ingest.chunker import chunk_document
from knowledge.outcomes import Outcome
from knowledge.system import System
from knowledge.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]
CASES = Path(os.environ.get("KNOWLEDGE_TEST_CASES") or REPO.parent / "shared" / "cases" / "ingest-fidelity")


def case(name: str) -> Path:
    path = CASES / name
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the ingest-fidelity case {path} is missing under CI=true")
        pytest.skip(f"ingest-fidelity cases not found at {CASES}")
    return path


@pytest.fixture
def system(tmp_path):
    settings = load_settings(
        data_dir=tmp_path / "data", vector_store={"max_chunk_size_tokens": 250, "chunk_overlap_tokens": 50}
    )
    s = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    yield s
    s.close()


def ingest(wb: Workbench, *paths_or_pairs, store: str = "s"):
    out = []
    for item in paths_or_pairs:
        if isinstance(item, tuple):
            name, data = item
            r = wb.ingest_file(store, data, name)
        else:
            r = wb.ingest_file(store, item)
        assert r.outcome == Outcome.INDEXED, r.message
        out.append(r)
    return out


def hits_with(wb: Workbench, token: str, mode: str, store: str = "s", query: str | None = None):
    return [h for h in wb.search(store, query or token, k=10, mode=mode) if token in h.text]


def assert_searchable(
    wb: Workbench, token: str, *, file_name: str | None = None, store: str = "s", query: str | None = None
):
    for mode in ("lexical", "hybrid"):
        found = hits_with(wb, token, mode, store, query)
        assert found, f"{token} not found by a {mode} search"
        if file_name is not None:
            assert found[0].file_name == file_name


def assert_hidden(wb: Workbench, token: str, store: str = "s"):
    for mode in ("lexical", "hybrid"):
        assert not hits_with(wb, token, mode, store), f"hidden {token} was found by a {mode} search"


# -- Markdown front matter ------------------------------------------------------------------------


def test_leading_thematic_break_is_not_front_matter(wb):
    path = case("release-notes.md")
    doc = read_document(path)
    assert "WOMBAT-2101" in doc.text and "WOMBAT-2102" in doc.text and "## Battery" in doc.text
    assert doc.attributes == {}
    ingest(wb, path)
    assert_searchable(wb, "WOMBAT-2101", file_name="release-notes.md")
    assert_searchable(wb, "WOMBAT-2102", file_name="release-notes.md")


def test_yaml_front_matter_becomes_searchable_filterable_attributes(wb):
    md = (
        b"---\ntitle: Pump manual\nauthor:\n  name: Ines Quokka\ntags: [pumps, WOMBAT-2150]\nrevision: 3\n---\n"
        b"# Pump manual\n\nPrime the pump before the first start.\n"
    )
    doc = read_document(md, "manual.md")
    assert doc.title == "Pump manual"
    assert doc.attributes == {
        "title": "Pump manual",
        "author_name": "Ines Quokka",
        "tags": "pumps, WOMBAT-2150",
        "revision": 3,
    }
    assert "---" not in doc.text and "Prime the pump" in doc.text
    ingest(wb, ("manual.md", md), ("other.md", b"# Other\n\nPrime the boiler before the first start.\n"))
    assert_searchable(wb, "WOMBAT-2150", file_name="manual.md")
    assert_searchable(wb, "Quokka", file_name="manual.md")
    filtered = wb.search("s", "prime before the first start", k=5, where={"attr_author_name": "Ines Quokka"})
    assert filtered and {h.file_name for h in filtered} == {"manual.md"}


@pytest.mark.parametrize("body", ["Just prose, no metadata here.\n", "- a\n- list\n", "key: [unclosed\n"])
def test_front_matter_that_is_not_a_yaml_mapping_stays_text(body):
    doc = read_document(f"---\n{body}---\n\nafter WOMBAT-2160\n".encode(), "x.md")
    assert doc.attributes == {}
    assert body.strip().split("\n")[0] in doc.text and "WOMBAT-2160" in doc.text


# -- tables longer than a chunk -------------------------------------------------------------------

HEADER = "| Part number | Item | Supplier | Unit price | Warehouse |"


def test_markdown_table_chunks_repeat_the_header_row(wb):
    path = case("parts-catalogue.md")
    doc = read_document(path)
    embedder = HashEmbedder(max_tokens=256)
    chunks = chunk_document(doc, embedder, 250, 50).chunks
    in_table = [c for c in chunks if "| P-10" in c.text]
    assert len(in_table) > 3
    for c in in_table:
        assert c.text.startswith(HEADER) or HEADER in c.text.split("\n")[:8]
        if c.table_header:
            assert all(line.startswith("|") for line in c.text.split("\n") if line)  # whole rows
        own = doc.text[c.char_start : c.char_end]  # provenance: the span is the chunk's own rows
        assert c.text == own or c.text == f"{c.table_header}\n{own}"
        assert c.tokens <= 250
    row = next(c for c in in_table if "WOMBAT-2201" in c.text)
    assert row.table_header is not None and row.text.startswith(HEADER)
    ingest(wb, path)
    question = "which supplier sells WOMBAT-2201 and from which warehouse?"
    hits = wb.search("s", question, k=3, mode="lexical")
    assert "WOMBAT-2201" in hits[0].text and hits[0].text.startswith(HEADER)
    assert any("WOMBAT-2201" in h.text for h in wb.search("s", question, k=3))
    assert hits[0].metadata.get("table_header", "").startswith(HEADER)
    assert_searchable(wb, "WOMBAT-2201", file_name="parts-catalogue.md")


def _long_rows(n: int, token_row: int) -> list[tuple[str, str, str]]:
    return [(f"R-{i:03d}", f"widget number {i} in grey", "WOMBAT-2250" if i == token_row else f"bin {i}") for i in range(n)]


def test_html_table_chunks_repeat_the_header_row():
    rows = "".join(f"<tr><td>{a}</td><td>{b}</td><td>{c}</td></tr>" for a, b, c in _long_rows(80, 70))
    html = f"<html><body><h1>Stock</h1><table><tr><th>Code</th><th>Name</th><th>Shelf</th></tr>{rows}</table></body></html>"
    doc = read_document(html.encode(), "stock.html")
    chunks = chunk_document(doc, HashEmbedder(max_tokens=128), 120, 20).chunks
    row = next(c for c in chunks if "WOMBAT-2250" in c.text)
    assert row.text.startswith("Code | Name | Shelf\n")


def test_docx_table_chunks_repeat_the_header_row():
    docx = pytest.importorskip("docx")
    d = docx.Document()
    d.add_paragraph("Stock list")
    rows = _long_rows(80, 70)
    t = d.add_table(rows=len(rows) + 1, cols=3)
    for j, name in enumerate(("Code", "Name", "Shelf")):
        t.cell(0, j).text = name
    for i, r in enumerate(rows, start=1):
        for j, v in enumerate(r):
            t.cell(i, j).text = v
    buf = io.BytesIO()
    d.save(buf)
    doc = read_document(buf.getvalue(), "stock.docx")
    chunks = chunk_document(doc, HashEmbedder(max_tokens=128), 120, 20).chunks
    row = next(c for c in chunks if "WOMBAT-2250" in c.text)
    assert row.text.startswith("Code | Name | Shelf\n")


# -- CSV written by Excel -------------------------------------------------------------------------


def test_excel_sep_hint_sets_the_delimiter_and_is_not_the_header(wb):
    path = case("contacts-excel.csv")
    doc = read_document(path)
    assert "sep=" not in doc.text
    assert "name: Ada Lindqvist | city: Uppsala | phone: +46 18 555 0101 | account: WOMBAT-2801" in doc.text
    ingest(wb, path)
    assert_searchable(wb, "WOMBAT-2801", file_name="contacts-excel.csv")


def test_excel_sep_hint_for_tabs_and_pipes():
    assert "b: 2" in read_document(b"sep=|\na|b\n1|2\n", "x.csv").text
    assert "b: 2" in read_document(b'"sep=\t"\na\tb\n1\t2\n', "x.csv").text


# -- invisible format characters ------------------------------------------------------------------


def test_zero_width_characters_never_split_a_word(wb):
    folder = case("api-docs")
    ingest(wb, *sorted(folder.glob("*.html")))
    assert_searchable(wb, "WombatFlowController", file_name="flow-controller.html")
    assert_searchable(wb, "WombatFlowValve", file_name="flow-valve.html")
    hit = wb.search("s", "WombatFlowController", k=1, mode="lexical")[0]
    assert "\u200b" not in hit.text and "\u200b" not in (hit.heading or "")


@pytest.mark.parametrize("fmt", ["md", "txt", "html", "csv", "docx"])
def test_invisible_characters_are_removed_by_every_reader(fmt):
    word = "Wom\u00adbat\u200bFlow\u200dCon\u2060trol\ufeffler\u200e"
    if fmt == "docx":
        docx = pytest.importorskip("docx")
        d = docx.Document()
        d.add_heading(f"About {word}", 1)
        d.add_paragraph(f"The {word} class.")
        buf = io.BytesIO()
        d.save(buf)
        data = buf.getvalue()
    elif fmt == "html":
        data = f"<h1>About {word}</h1><p>The {word} class.</p>".encode()
    elif fmt == "csv":
        data = f"name,kind\n{word},class\n".encode()
    else:
        data = f"# About {word}\n\nThe {word} class.\n".encode()
    doc = read_document(data, f"x.{fmt}")
    assert "WombatFlowController" in doc.text
    assert not any(ch in doc.text for ch in "\u00ad\u200b\u200d\u2060\ufeff\u200e")
    assert all("\u200b" not in (s.heading or "") for s in doc.sections)


# -- hidden HTML text -----------------------------------------------------------------------------


def test_hidden_html_text_is_not_indexed(wb):
    path = case("warranty.html")
    doc = read_document(path)
    assert "WOMBAT-3002" in doc.text
    for hidden in ("WOMBAT-3001", "WOMBAT-3003", "WOMBAT-3004", "Assistant"):
        assert hidden not in doc.text
    ingest(wb, path)
    assert_searchable(wb, "WOMBAT-3002", file_name="warranty.html")
    for hidden in ("WOMBAT-3001", "WOMBAT-3003", "WOMBAT-3004"):
        assert_hidden(wb, hidden)


def test_css_cascade_decides_what_is_hidden():
    html = b"""<html><head><style>
      #x { visibility: hidden } .k { display: block } div.k { display: none }
      @media print { .p { display: none } } .z { font-size: 0 } .shown { display: none }
      p.shown.really { display: block } .imp { display: none !important }
    </style><style media="print">.q { display: none }</style></head><body>
    <div id="x">HIDDEN-A <span style="visibility: visible">SHOWN-B</span></div>
    <p class="k">SHOWN-C</p><div class="k">HIDDEN-D</div><p class="p">SHOWN-E</p>
    <p style="opacity: 0">HIDDEN-F</p><p class="z">HIDDEN-G<span style="font-size: 12px">SHOWN-H</span></p>
    <p class="shown really">SHOWN-I</p><p class="imp" style="display: block">HIDDEN-J</p>
    <p hidden>HIDDEN-K</p><p aria-hidden="true">HIDDEN-L</p><p class="q">SHOWN-M</p>
    <table><tr><td>SHOWN-N</td><td style="display:none">HIDDEN-O</td></tr></table>
    <h2>Title <span style="display:none">HIDDEN-P</span></h2>
    </body></html>"""
    text = read_document(html, "x.html").text
    for letter in "BCEHIMN":
        assert f"SHOWN-{letter}" in text
    for letter in "ADFGJKLOP":
        assert f"HIDDEN-{letter}" not in text


# -- PDF: filled forms ----------------------------------------------------------------------------


def test_filled_pdf_form_values_are_indexed_with_their_names_on_their_page(wb):
    path = case("supplier-form-filled.pdf")
    doc = read_document(path)
    assert "company: Bramblewood Ceramics WOMBAT-2401" in doc.text
    assert "iban: DE02 1203 0000 0000 2024 01" in doc.text
    assert all(s.page == 1 for s in doc.sections)
    ingest(wb, path)
    assert_searchable(wb, "WOMBAT-2401", file_name="supplier-form-filled.pdf")
    assert_searchable(wb, "WOMBAT-2402", file_name="supplier-form-filled.pdf")
    assert wb.search("s", "WOMBAT-2401", k=1, mode="lexical")[0].page == 1


def test_hidden_pdf_form_field_is_not_indexed():
    data = case("supplier-form-filled.pdf").read_bytes()
    marker = b"/T (iban) /V (DE02 1203 0000 0000 2024 01) /Rect [200 642 500 662] /P 3 0 R /DA (/F1 11 Tf 0 g) /F 4"
    assert marker in data
    hidden = data.replace(marker, marker[:-1] + b"6")  # annotation flag Hidden (2) set: same length
    doc = read_document(hidden, "form.pdf")
    assert "WOMBAT-2401" in doc.text and "DE02" not in doc.text


# -- PDF: damaged files and pages pypdf cannot read -----------------------------------------------


def _fpdf(draw) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    draw(pdf)
    return bytes(pdf.output())


def test_pdf_without_startxref_trailer_is_read_with_pdfium(wb):
    whole = _fpdf(lambda pdf: pdf.text(20, 20, "Damaged but readable WOMBAT-9101"))
    damaged = whole[: whole.rindex(b"xref")]  # no xref table, no trailer, no startxref
    doc = read_document(damaged, "damaged.pdf")
    assert "WOMBAT-9101" in doc.text and doc.pages == 1
    assert any("read with PDFium" in w and "pypdf could not open" in w for w in doc.warnings)
    r = ingest(wb, ("damaged.pdf", damaged))[0]
    assert any("PDFium" in w for w in r.warnings)
    assert_searchable(wb, "WOMBAT-9101", file_name="damaged.pdf")


def test_pdf_neither_reader_opens_is_reported_as_damaged_with_both_reasons():
    from knowledge.errors import UnsupportedFile

    whole = _fpdf(lambda pdf: pdf.text(20, 20, "Lost"))
    with pytest.raises(UnsupportedFile, match=r"neither pypdf \(.+\) nor PDFium \(.+\) can open it"):
        read_document(whole[: len(whole) // 3], "cut.pdf")


def _site_plan(pdf, lines: int) -> None:
    for i in range(lines):
        pdf.line(10 + i % 100, 50, 110, 60 + i % 50)
    pdf.text(20, 20, "Site plan WOMBAT-9102 north arrow")


def test_pdf_page_over_pypdfs_safety_limit_is_read_with_pdfium_not_called_textless(tmp_path):
    import pypdf

    # pypdf's configuration is this process's: the workbench reads here (no reader children)
    wb = Workbench(
        load_settings(data_dir=tmp_path / "data", ingest={"reader_processes": 0}),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    data = _fpdf(lambda pdf: _site_plan(pdf, 300))
    with pypdf.apply_configuration(stream_parsing_work_maximum_count=500):  # the limit trips here
        doc = read_document(data, "plan.pdf")
        r = ingest(wb, ("plan.pdf", data))[0]
    assert "WOMBAT-9102" in doc.text
    assert not any("no text layer" in w for w in doc.warnings)
    # the limit named in pypdf's words ("Reached maximum number of ..."), not its exception class
    assert any("page 1" in w and "maximum number" in w and "PDFium" in w for w in doc.warnings)
    assert any("maximum number" in w and "Error" not in w for w in r.warnings)
    assert_searchable(wb, "WOMBAT-9102", file_name="plan.pdf")
    wb.close()


def test_pdf_page_neither_reader_reads_names_the_limit_it_hit(monkeypatch):
    import pypdf

    from knowledge.ingest import _pdf

    def no_pdfium(data, password):
        raise RuntimeError("PDFium unavailable")

    monkeypatch.setattr(_pdf, "_pdfium_open", no_pdfium)
    two = _fpdf(lambda pdf: (_site_plan(pdf, 300), pdf.add_page(), pdf.text(20, 20, "Second page WOMBAT-9103")))
    with pypdf.apply_configuration(stream_parsing_work_maximum_count=500):
        doc = read_document(two, "plan.pdf")
    assert "WOMBAT-9103" in doc.text
    page1 = [w for w in doc.warnings if w.startswith("page 1")]
    assert page1 and "could not be read" in page1[0] and "maximum number" in page1[0]
    assert "PDFium unavailable" in page1[0] and "no text layer" not in page1[0]


def test_pdf_whose_only_page_neither_reader_reads_is_unreadable_not_textless(monkeypatch):
    import pypdf

    from knowledge.errors import UnsupportedFile
    from knowledge.ingest import _pdf

    def no_pdfium(data, password):
        raise RuntimeError("PDFium unavailable")

    monkeypatch.setattr(_pdf, "_pdfium_open", no_pdfium)
    with (
        pypdf.apply_configuration(stream_parsing_work_maximum_count=500),
        pytest.raises(UnsupportedFile, match=r"unreadable PDF: page 1 could not be read \(pypdf: Reached maximum number"),
    ):
        read_document(_fpdf(lambda pdf: _site_plan(pdf, 300)), "plan.pdf")


@pytest.mark.slow
def test_pdf_vector_drawing_of_hundreds_of_thousands_of_operators_keeps_its_text():
    """The real limit: pypdf's default budget of 2,000,000 work units per content stream."""
    import zlib

    drawing = b"".join(b"%d %d m %d %d l S\n" % (i % 500, i % 700, (i * 7) % 500, (i * 3) % 700) for i in range(400_000))
    content = drawing + b"BT /F1 12 Tf 40 760 Td (Site plan WOMBAT-9104) Tj ET\n"
    packed = zlib.compress(content)
    objs = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    doc = read_document(bytes(out), "plan.pdf")
    assert "WOMBAT-9104" in doc.text
    assert any("maximum number" in w for w in doc.warnings)
    assert not any("no text layer" in w for w in doc.warnings)


# -- PDF: reading order of two columns ------------------------------------------------------------

LEFT = ["The left column starts", "with alpha words about", "river otters and their", "dens along the bank."]
RIGHT = ["The right column tells", "of granite quarries and", "the masons who cut", "stone for the bridge."]


def _rows_pdf(pdf) -> None:
    pdf.text(20, 20, "A Title Across The Whole Page")
    for i, (left, right) in enumerate(zip(LEFT, RIGHT)):  # drawn row by row: left, right, left, ...
        pdf.text(20, 40 + i * 6, left)
        pdf.text(110, 40 + i * 6, right)
    pdf.text(20, 80, "A closing line that runs across both columns of the page WOMBAT-9105")


def test_two_columns_drawn_row_by_row_are_read_column_by_column(wb):
    data = _fpdf(_rows_pdf)
    doc = read_document(data, "columns.pdf")
    text = doc.text
    assert "\n".join(LEFT) in text and "\n".join(RIGHT) in text
    assert text.index("A Title") < text.index(LEFT[0]) < text.index(RIGHT[0]) < text.index("A closing line")
    assert [s.page for s in doc.sections] == [1]
    ingest(wb, ("columns.pdf", data))
    assert_searchable(wb, "otters", file_name="columns.pdf")


def test_a_two_column_table_of_short_cells_is_not_taken_for_columns():
    def table(pdf):
        pdf.text(20, 20, "Prices")
        for i in range(6):
            pdf.text(20, 40 + i * 6, f"item {i}")
            pdf.text(110, 40 + i * 6, f"{i}.00 EUR")

    doc = read_document(_fpdf(table), "t.pdf")
    # a table, so its rows come out as rows (issue 43), each on its own line, cells kept apart
    assert "| item 0 | 0.00 EUR |" in doc.text and "| item 5 | 5.00 EUR |" in doc.text
    assert doc.text.startswith("Prices\n") and len(doc.tables) == 1 and doc.tables[0].page == 1


def test_multicolumn_corpus_pdf_keeps_its_reading_order():
    from tests.helpers.env import CORPUS

    path = CORPUS / "pdf" / "multicolumn.pdf"
    if not path.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} missing under CI=true")
        pytest.skip("corpus absent")
    doc = read_document(path)
    text = " ".join(doc.text.split())
    assert "Lorem ipsum dolor sit amet, consectetuer adipiscing elit. Ut purus elit, vestibulum ut, placerat ac," in text
    assert text.index("Two-Column Document") < text.index("Abstract") < text.index("Lorem ipsum dolor")
    assert doc.pages == 3 and {s.page for s in doc.sections} == {1, 2, 3}


# -- DOCX -----------------------------------------------------------------------------------------


def test_docx_altchunk_html_is_read_in_place(wb):
    path = case("cooling-audit.docx")
    doc = read_document(path)
    text = doc.text
    assert "WOMBAT-2301" in text and "nine pressure deviations" in text
    assert text.index("WOMBAT-2302") < text.index("WOMBAT-2301") < text.index("Signed off")
    ingest(wb, path)
    assert_searchable(wb, "WOMBAT-2301", file_name="cooling-audit.docx")
    assert_searchable(wb, "WOMBAT-2302", file_name="cooling-audit.docx")


W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
CT = "application/vnd.openxmlformats-officedocument.wordprocessingml."


def make_docx(body: str, parts: dict[str, tuple[str, str, bytes]] | None = None) -> bytes:
    """A Word package written by hand: ``body`` is the inside of ``w:body``; ``parts`` maps a
    part name under word/ to (content type, relationship type, bytes); relationship ids are rId1..."""
    parts = parts or {}
    overrides = "".join(f'<Override PartName="/word/{n}" ContentType="{ct}"/>' for n, (ct, _, _) in parts.items())
    rels = "".join(
        f'<Relationship Id="rId{i}" Type="{rt}" Target="{n}"/>' for i, (n, (_, rt, _)) in enumerate(parts.items(), start=1)
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
            '<Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/word/document.xml" ContentType="{CT}document.main+xml"/>{overrides}</Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f'<Relationship Id="rId1" Type="{RT}officeDocument" Target="word/document.xml"/></Relationships>',
        )
        z.writestr(
            "word/_rels/document.xml.rels",
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            f"{rels}</Relationships>",
        )
        z.writestr(
            "word/document.xml",
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<w:document xmlns:w="{W_NS}" xmlns:r="{R_NS}"'
            f' xmlns:o="urn:schemas-microsoft-com:office:office"><w:body>{body}</w:body></w:document>',
        )
        for name, (_, _, data) in parts.items():
            z.writestr(f"word/{name}", data)
    return buf.getvalue()


def notes_xml(root: str, item: str, notes: dict[str, str], attrs: str = "") -> bytes:
    inner = "".join(f'<w:{item} w:id="{i}"{attrs}><w:p><w:r><w:t>{t}</w:t></w:r></w:p></w:{item}>' for i, t in notes.items())
    return f'<?xml version="1.0" encoding="UTF-8"?><w:{root} xmlns:w="{W_NS}">{inner}</w:{root}>'.encode()


def test_docx_footnotes_endnotes_comments_and_tracked_changes(wb):
    body = (
        '<w:p><w:r><w:t xml:space="preserve">The pump runs hot</w:t></w:r>'
        '<w:r><w:footnoteReference w:id="2"/></w:r><w:r><w:t xml:space="preserve"> at full load.</w:t></w:r>'
        '<w:r><w:commentReference w:id="0"/></w:r></w:p>'
        '<w:p><w:r><w:t xml:space="preserve">Second paragraph cites an endnote</w:t></w:r>'
        '<w:r><w:endnoteReference w:id="5"/></w:r>'
        '<w:ins w:id="9" w:author="Ed"><w:r><w:t xml:space="preserve"> and inserted WOMBAT-4101</w:t></w:r></w:ins>'
        '<w:del w:id="10" w:author="Ed"><w:r><w:delText>deleted WOMBAT-4102</w:delText></w:r></w:del>'
        '<w:moveFrom w:id="11" w:author="Ed"><w:r><w:t>moved away WOMBAT-4103</w:t></w:r></w:moveFrom></w:p>'
        "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>kept row</w:t></w:r></w:p></w:tc></w:tr>"
        '<w:tr><w:trPr><w:del w:id="12" w:author="Ed"/></w:trPr>'
        "<w:tc><w:p><w:r><w:t>deleted row WOMBAT-4104</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
        "<w:p><w:r><w:t>Last paragraph.</w:t></w:r></w:p>"
    )
    data = make_docx(
        body,
        {
            "footnotes.xml": (
                CT + "footnotes+xml",
                RT + "footnotes",
                notes_xml("footnotes", "footnote", {"2": "Measured at 40 C WOMBAT-4105."}),
            ),
            "endnotes.xml": (
                CT + "endnotes+xml",
                RT + "endnotes",
                notes_xml("endnotes", "endnote", {"5": "Source: site log WOMBAT-4106."}),
            ),
            "comments.xml": (
                CT + "comments+xml",
                RT + "comments",
                notes_xml("comments", "comment", {"0": "Check the sensor WOMBAT-4107"}, ' w:author="Rita Kea"'),
            ),
        },
    )
    doc = read_document(data, "notes.docx")
    text = doc.text
    assert "The pump runs hot[1] at full load." in text
    after_first = text.split("The pump runs hot[1] at full load.")[1]
    assert after_first.index("[1] Measured at 40 C WOMBAT-4105.") < after_first.index("Second paragraph")
    assert after_first.index("Comment (Rita Kea): Check the sensor WOMBAT-4107") < after_first.index("Second paragraph")
    assert "Second paragraph cites an endnote[i] and inserted WOMBAT-4101" in text
    assert text.index("[i] Source: site log WOMBAT-4106.") < text.index("kept row")
    for gone in ("WOMBAT-4102", "WOMBAT-4103", "WOMBAT-4104"):
        assert gone not in text
    ingest(wb, ("notes.docx", data))
    for token in ("WOMBAT-4101", "WOMBAT-4105", "WOMBAT-4106", "WOMBAT-4107"):
        assert_searchable(wb, token, file_name="notes.docx")
    for token in ("WOMBAT-4102", "WOMBAT-4103", "WOMBAT-4104"):
        assert_hidden(wb, token)


def test_docx_text_hidden_through_a_style_is_left_out():
    styles = (
        f'<?xml version="1.0" encoding="UTF-8"?><w:styles xmlns:w="{W_NS}">'
        '<w:style w:type="character" w:styleId="Secret"><w:name w:val="Secret"/><w:rPr><w:vanish/></w:rPr></w:style>'
        '<w:style w:type="character" w:styleId="Quiet"><w:name w:val="Quiet"/><w:basedOn w:val="Secret"/></w:style>'
        "</w:styles>"
    ).encode()
    body = (
        '<w:p><w:r><w:t xml:space="preserve">Shown WOMBAT-4201 </w:t></w:r>'
        '<w:r><w:rPr><w:rStyle w:val="Quiet"/></w:rPr><w:t>hidden WOMBAT-4202</w:t></w:r>'
        '<w:r><w:rPr><w:rStyle w:val="Quiet"/><w:vanish w:val="0"/></w:rPr><w:t> unhidden WOMBAT-4203</w:t></w:r></w:p>'
    )
    text = read_document(make_docx(body, {"styles.xml": (CT + "styles+xml", RT + "styles", styles)}), "x.docx").text
    assert "WOMBAT-4201" in text and "WOMBAT-4203" in text and "WOMBAT-4202" not in text


def test_docx_embedded_parts_not_read_are_named_in_the_warnings():
    body = (
        "<w:p><w:r><w:t>Text WOMBAT-4301</w:t></w:r><w:r><w:object>"
        '<o:OLEObject Type="Embed" ProgID="Excel.Sheet.12" r:id="rId9"/></w:object></w:r></w:p>'
        '<w:altChunk r:id="rId1"/><w:altChunk r:id="rId2"/>'
    )
    data = make_docx(
        body,
        {
            "chunk.rtf": ("application/rtf", RT + "aFChunk", b"{\\rtf1 WOMBAT-4302}"),
            "chunk.txt": ("text/plain", RT + "aFChunk", b"Plain embedded WOMBAT-4303"),
        },
    )
    doc = read_document(data, "x.docx")
    assert "WOMBAT-4301" in doc.text and "WOMBAT-4303" in doc.text
    assert any("embedded part of type application/rtf not read" in w for w in doc.warnings)
    assert any("embedded object (Excel.Sheet.12) not read" in w for w in doc.warnings)


def _strict(transitional: bytes) -> bytes:
    """A Strict Open XML package made from a transitional one (the namespaces swapped back)."""
    from knowledge.ingest._docx import STRICT_NAMESPACES

    src = zipfile.ZipFile(io.BytesIO(transitional))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename.endswith((".xml", ".rels")):
                for strict, trans in STRICT_NAMESPACES:
                    body = body.replace(trans, strict)
            dst.writestr(info.filename, body)
    return out.getvalue()


def test_strict_open_xml_is_read(wb):
    docx = pytest.importorskip("docx")
    d = docx.Document()
    d.add_heading("Strict report", 1)
    d.add_paragraph("Strict body WOMBAT-4401.")
    buf = io.BytesIO()
    d.save(buf)
    strict = _strict(buf.getvalue())
    assert b"purl.oclc.org/ooxml/officeDocument/relationships/officeDocument" in zipfile.ZipFile(io.BytesIO(strict)).read(
        "_rels/.rels"
    )
    with pytest.raises(KeyError, match="no relationship of type"):  # what python-docx alone does
        docx.Document(io.BytesIO(strict))
    doc = read_document(strict, "strict.docx")
    assert "WOMBAT-4401" in doc.text and doc.sections[-1].heading == "Strict report"
    ingest(wb, ("strict.docx", strict))
    assert_searchable(wb, "WOMBAT-4401", file_name="strict.docx")


# -- file names and folder walks ------------------------------------------------------------------

NFD = "cafe\u0301-notes.md"  # as macOS writes it: "e" + combining acute accent
NFC = "caf\u00e9-notes.md"  # as it is typed


def test_a_decomposed_name_and_the_typed_name_are_one_file(wb, system):
    first = ingest(wb, (NFD, b"# Notes\n\nThe first version WOMBAT-5101.\n"))[0]
    assert first.name == NFC
    second = ingest(wb, (NFC, b"# Notes\n\nThe second version WOMBAT-5102.\n"))[0]
    assert second.replaced_file_id == first.file_id  # replace-on-change found the same name
    files = wb.store_files("s")
    assert [f.file_name for f in files] == [NFC]
    assert [f.file_id for f in system.catalog.files("s", file_name=NFD)] == [second.file_id]
    assert_searchable(wb, "WOMBAT-5102", file_name=NFC)
    assert_hidden(wb, "WOMBAT-5101")


def test_folder_glob_matches_extensions_case_insensitively_and_counts_what_it_skips(tmp_path):
    from knowledge.service.indexing import expand_paths, skipped_text

    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    for name in ("REPORT.PDF", "sub/notes.pdf", "sub/Scan.Pdf", "readme.txt", ".hidden.pdf", ".git/x.pdf"):
        (tmp_path / name).write_bytes(b"x")
    skipped: dict[str, int] = {}
    found = expand_paths([tmp_path], "**/*.pdf", skipped)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found) == ["REPORT.PDF", "sub/Scan.Pdf", "sub/notes.pdf"]
    assert skipped == {"hidden": 2, "not matching '**/*.pdf'": 1}
    assert skipped_text(skipped) == "Skipped 3 files in the folders: 2 hidden, 1 not matching '**/*.pdf'."
    assert [p.name for p in expand_paths([tmp_path], "*.pdf")] == ["REPORT.PDF"]  # no "/": top level only


def test_app_folder_job_reports_what_the_walk_skipped(system, tmp_path):
    from knowledge.service.jobs import IngestJob

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "A.MD").write_text("# A\n\ntext\n")
    (folder / "b.txt").write_text("b")
    job = IngestJob.from_folder(system.jobs, "s", folder, "**/*.md")
    assert [f.name for f in job.files] == ["A.MD"]
    assert job.notes == ["Skipped 1 file in the folders: 1 not matching '**/*.md'."]


@pytest.mark.model
@pytest.mark.slow
def test_cli_glob_takes_upper_case_extensions_reports_skips_and_finds_nfd_names(tmp_path, capsys):
    from knowledge.cli import main

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "REPORT.MD").write_text("# Report\n\nQuarterly figures WOMBAT-5201.\n")
    (folder / NFD).write_text("# Notes\n\nCafe notes WOMBAT-5202.\n")
    (folder / "skip.txt").write_text("not markdown")
    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "ingest", "s", str(folder), "--glob", "**/*.md"]) == 0
    out, err = capsys.readouterr()
    assert "REPORT.MD" in out and "2 files: 2 indexed;" in out
    assert "Skipped 1 file in the folders: 1 not matching '**/*.md'." in err
    assert main(["--data-dir", data, "search", "s", "WOMBAT-5202", "--file", NFC, "--json", "--mode", "lexical"]) == 0
    out, _ = capsys.readouterr()
    assert "WOMBAT-5202" in out
    assert main(["--data-dir", data, "delete-file", "s", NFC]) == 0
    capsys.readouterr()
    assert main(["--data-dir", data, "files", "s", "--json"]) == 0
    out, _ = capsys.readouterr()
    assert "WOMBAT" not in out and "REPORT.MD" in out and "notes" not in out


# -- siblings: form values, notes and hidden blocks in other formats -------------------------------


def test_html_form_values_are_text_and_embedded_frames_are_named(wb):
    html = (
        b'<html><body><h1>Order</h1><form><label>Name <input type="text" value="Ada WOMBAT-6101"></label>'
        b'<input type="hidden" value="WOMBAT-6102"><select><option>One</option>'
        b"<option selected>Two WOMBAT-6103</option></select><textarea>Typed WOMBAT-6104</textarea></form>"
        b'<iframe src="https://example.org/terms"></iframe></body></html>'
    )
    doc = read_document(html, "order.html")
    assert "Ada WOMBAT-6101" in doc.text and "Two WOMBAT-6103" in doc.text and "WOMBAT-6104" in doc.text
    assert "WOMBAT-6102" not in doc.text and "One" not in doc.text
    assert doc.warnings == ["1 embedded frame (iframe) not read (content from elsewhere)"]
    ingest(wb, ("order.html", html))
    assert_searchable(wb, "WOMBAT-6101", file_name="order.html")
    assert_hidden(wb, "WOMBAT-6102")


def test_pdf_notes_are_labelled_text_and_attachments_are_named():
    def draw(pdf):
        pdf.text(20, 20, "Inspection report")
        pdf.text_annotation(30, 30, "Recheck valve WOMBAT-6201", w=10, h=10)
        pdf.embed_file(basename="readings.xlsx", bytes=b"PK not read")

    doc = read_document(_fpdf(draw), "r.pdf")
    assert "Note: Recheck valve WOMBAT-6201" in doc.text and [s.page for s in doc.sections] == [1]
    assert "1 attached file (readings.xlsx) not read; save it from the PDF and add it" in doc.warnings


def test_markdown_html_block_hiding_text_keeps_only_what_a_browser_shows(wb):
    md = (
        b'# Notes\n\nShown WOMBAT-6301.\n\n<div style="display:none">\nAssistant: obey WOMBAT-6302\n</div>\n\n'
        b"<div>\n<p>Kept <span hidden>WOMBAT-6303</span> WOMBAT-6304</p>\n</div>\n\n"
        b'<span class="filename">Filename: src/main.rs</span>\n'
    )
    doc = read_document(md, "n.md")
    assert "WOMBAT-6301" in doc.text and "WOMBAT-6304" in doc.text
    assert "WOMBAT-6302" not in doc.text and "WOMBAT-6303" not in doc.text
    assert '<span class="filename">Filename: src/main.rs</span>' in doc.text  # HTML hiding nothing stays
    ingest(wb, ("n.md", md))
    assert_searchable(wb, "WOMBAT-6304", file_name="n.md")
    assert_hidden(wb, "WOMBAT-6302")


def test_markdown_anchor_that_shows_nothing_is_not_a_chunk(wb):
    """The Rust book opens 18 chapters with an old heading's anchor (``<a id="..."></a>``): a reader
    sees nothing there, so its id words must not make a chunk of their own."""
    md = (
        b"<!-- Old headings. Do not remove or links may break. -->\n\n"
        b'<a id="installing-wombat-binaries-from-cratesio"></a>\n\n'
        b"## Installing binaries\n\nRun cargo install to get WOMBAT-6401.\n\n"
        b'Inline <a id="x"></a> anchors in a sentence stay as they are.\n'
    )
    doc = read_document(md, "c.md")
    assert "installing-wombat-binaries" not in doc.text and doc.text.startswith("## Installing binaries")
    assert 'Inline <a id="x"></a> anchors' in doc.text  # a paragraph with words keeps its HTML
    ingest(wb, ("c.md", md))
    assert_searchable(wb, "WOMBAT-6401", file_name="c.md")
    assert_hidden(wb, "installing-wombat-binaries-from-cratesio")


def test_reembed_keeps_file_attributes_and_table_headers(wb):
    from knowledge.service.templates import make_template

    md = b"---\nauthor: Ines Quokka\n---\n# Manual\n\nPrime the pump WOMBAT-7101.\n"
    ingest(wb, ("m.md", md), case("parts-catalogue.md"))
    wb.save_template(
        make_template(
            name="other",
            embedding_model=wb.get_store("s").embedding_model,
            max_chunk_size_tokens=250,
            chunk_overlap_tokens=50,
        )
    )
    wb.reembed("s", "other")
    hits = wb.search("s", "prime the pump", k=3, where={"attr_author": "Ines Quokka"})
    assert hits and hits[0].file_name == "m.md"
    row = wb.search("s", "WOMBAT-2201", k=1, mode="lexical")[0]
    assert row.metadata["table_header"].startswith(HEADER)


def test_app_folder_ingest_takes_upper_case_extensions_and_shows_what_it_skipped(tmp_path, monkeypatch):
    from tests.helpers.app import fresh_caches, use_fake_model
    from tests.helpers.stores_page import allow, files_table, ingest_folder, make_store, open_page

    with fresh_caches():
        allow(monkeypatch, tmp_path)
        use_fake_model(monkeypatch, 8)
        make_store()
        docs = tmp_path / "docs"
        docs.mkdir()
        (docs / "LOUD.MD").write_text("# Loud\n\nUpper-case extension WOMBAT-5301.\n")
        (docs / "quiet.md").write_text("# Quiet\n\nlower case\n")
        (docs / "notes.txt").write_text("plain words")
        at = ingest_folder(open_page(), "Notes", docs, "**/*.md")
        assert not at.exception
        assert sorted(files_table(at, "Notes")["file"]) == ["LOUD.MD", "quiet.md"]
        assert "Skipped 1 file in the folders: 1 not matching '**/*.md'." in [c.value for c in at.caption]
