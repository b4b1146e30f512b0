"""The document viewer's page model (knowledge.pagemodels.viewer) and its PDF boxes
(knowledge.ingest.pdfview): a passage's characters found in PDFium's page text and drawn on the
page; text with the passage marked and inert; images; broken links; another member's file is
missing."""

from __future__ import annotations

import io

import numpy as np
import pytest
from fpdf import FPDF
from PIL import Image

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import FileNotFoundInStore, InvalidArgument
from knowledge.ingest import read_document
from knowledge.ingest.pdfview import HIGHLIGHT, locate, merge_spans, render_page, text_key
from knowledge.pagemodels import viewer as vm
from knowledge.pagemodels.viewer import ViewerTarget, parse_viewer_query
from knowledge.system import System

PW = "correct horse battery"


def two_page_pdf() -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for p in (1, 2):
        pdf.add_page()
        for i in range(8):
            pdf.multi_cell(
                180,
                8,
                f"Page {p} line {i}: the quick brown fox jumps over the lazy dog {i * 7}.",
                new_x="LMARGIN",
                new_y="NEXT",
            )
    return bytes(pdf.output())


def highlighted_pixels(png: bytes) -> int:
    """Pixels of the highlight's colour over white paper (yellow: much red and green, less blue)."""
    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    return int(((r > 230) & (g > 190) & (g < 245) & (b < 200)).sum())


# -- locate: the pure part ------------------------------------------------------------------------
def test_text_key_keeps_letters_and_digits_and_maps_back():
    key, where = text_key("Of-\nﬁce  No. 7")
    assert key == "officeno7"
    assert [where[0], where[2], where[-1]] == [0, 4, 13]  # "ﬁ" gives f and i, both at index 4


def test_locate_finds_a_passage_whatever_the_whitespace_case_and_ligatures():
    page = "Header\r\nThe  Quick brown\nfox—jumps over the ﬁne dog.\nFooter"
    s, e = locate(page, "the quick brown fox jumps over the fine dog")[0]
    assert page[s:e] == "The  Quick brown\nfox—jumps over the ﬁne dog"


def test_locate_finds_a_reordered_passage_piece_by_piece():
    # the reader read two columns one after the other; PDFium's text interleaves them line by line
    left = ["alpha bravo charlie delta echo", "foxtrot golf hotel india juliet"]
    right = ["kilo lima mike november oscar", "papa quebec romeo sierra tango"]
    pdfium = "\n".join(f"{a}   {b}" for a, b in zip(left, right))
    spans = locate(pdfium, " ".join(left + right))
    covered = "".join(pdfium[s:e] for s, e in spans)
    for word in ("alpha", "juliet", "kilo", "tango"):
        assert word in covered
    assert len(spans) > 1


def test_locate_gives_nothing_for_text_not_on_the_page():
    assert locate("one two three", "entirely different words here") == []
    assert locate("one two three", "  ...  ") == []


def test_merge_spans_joins_touching_and_overlapping():
    assert merge_spans([(12, 20), (0, 5), (6, 8), (19, 30), (40, 41)]) == [(0, 8), (12, 30), (40, 41)]


# -- a PDF page with the passage's boxes --------------------------------------------------------
def test_a_pdf_passage_is_boxed_where_its_lines_are():
    data = two_page_pdf()
    doc = read_document(data, "t.pdf")
    second = doc.sections[1]
    s = doc.text.index("Page 2 line 3", second.char_start)
    passage = doc.text[s : doc.text.index("Page 2 line 5", s)]  # lines 3 and 4
    marked = render_page(data, 2, [passage])
    plain = render_page(data, 2)
    assert marked.found and marked.pages == 2 and not plain.found and plain.boxes == []
    assert len(marked.boxes) == 2  # one box per line
    tops = sorted(b[1] for b in marked.boxes)
    line = 8 / 25.4 * 72 * 1.5  # 8 mm lines, in pixels at scale 1.5
    assert tops[1] - tops[0] == pytest.approx(line, abs=3)
    top_margin = 10 / 25.4 * 72 * 1.5
    assert tops[0] == pytest.approx(top_margin + 3 * line, abs=line / 2)  # the fourth line of the page
    assert highlighted_pixels(marked.png) > 1000 and highlighted_pixels(plain.png) == 0
    assert HIGHLIGHT[3] < 255  # translucent: the text under it stays readable


def test_a_page_that_is_not_there_says_so():
    with pytest.raises(InvalidArgument, match="has 2 pages; there is no page 3"):
        render_page(two_page_pdf(), 3)


# -- the model through a workbench view ---------------------------------------------------------
@pytest.fixture
def system():
    s = System(load_settings(), embedder_factory=lambda model: HashEmbedder(dimension=16))
    yield s
    s.close()


MD = (
    b"# Guide\n\nIntro text about <b>tags</b> & *stars*.\n\n## Install\n\n"
    + b"Filler paragraph number one.\n\n" * 40
    + b"### Linux\n\nRun the installer with sudo and reboot the machine.\n\n## Later\n\nThe end.\n"
)


def test_a_markdown_passage_is_marked_under_its_heading_and_inert(wb):
    wb.ingest_file("docs", MD, "guide.md")
    fid = wb.file_records("docs")[0].file_id
    doc = read_document(MD, "guide.md")
    s = doc.text.index("Run the installer")
    e = s + len("Run the installer with sudo and reboot the machine.")
    view = vm.open_viewer(wb, ViewerTarget("docs", fid, s, e))
    assert view.kind == "text" and view.format == "markdown" and view.name == "guide.md"
    assert view.heading == "Guide > Install > Linux"
    before, passage, after = vm.text_parts(view)
    assert passage.startswith(vm.MARK[0]) and passage.endswith(vm.MARK[1])
    assert "installer" in passage and "installer" not in before + after
    assert "<b>" not in before and "&#60;b&#62;" in before  # the file's HTML is shown, not run
    assert "Filler" in before and "The end" in after


def test_a_pdf_opens_at_the_passage_page_with_it_boxed(wb):
    data = two_page_pdf()
    wb.ingest_file("pdfs", data, "t.pdf")
    fid = wb.file_records("pdfs")[0].file_id
    doc = read_document(data, "t.pdf")
    s = doc.text.index("Page 2 line 6")
    view = vm.open_viewer(wb, ViewerTarget("pdfs", fid, s, s + 40))
    assert (view.kind, view.pages, view.page, view.passage_pages) == ("pdf", 2, 2, [2])
    assert view.passage_on(1) == [] and view.passage_on(2)[0].startswith("Page 2 line 6")
    assert vm.page_image(view, data).found
    assert not vm.page_image(view, data, 1).found  # page 1 has no passage: shown plain
    linked = vm.open_viewer(wb, ViewerTarget("pdfs", fid, s, s + 40, page=1))
    assert linked.page == 1  # the link's page wins


def test_an_image_shows_with_its_ocr_text(wb, monkeypatch):
    img = Image.new("RGB", (300, 120), "white")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    data = buf.getvalue()
    from knowledge.ingest.document import Document, Section

    text = "Invoice total 1,234.56 EUR"
    monkeypatch.setattr(vm, "read_text", lambda *a, **k: Document(text, [Section(0, len(text), page=1)], "image", pages=1))
    stored = wb.save_attachment("invoice.png", "image/png", data)
    view = vm.build_viewer(ViewerTarget("s", stored.id, 8, 13), stored, vm.read_text(data, "invoice.png", None))
    assert view.kind == "image" and view.page == 1 and vm.text_parts(view)[1] == vm.MARK[0] + "total" + vm.MARK[1]
    png = vm.image_png(data)
    assert Image.open(io.BytesIO(png)).size == (300, 120)


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"store": "docs", "file": "file-00000000000000000000000000000000"}, "not in the store 'docs'"),
        ({"store": "nowhere", "file": "file-00000000000000000000000000000000"}, "not in the store 'nowhere'"),
    ],
)
def test_a_broken_link_says_so(wb, params, words):
    wb.ingest_file("docs", MD, "guide.md")
    with pytest.raises(FileNotFoundInStore, match=words):
        vm.find_file(wb, parse_viewer_query(params))


def test_a_file_of_another_store_is_not_in_this_one(wb):
    wb.ingest_file("docs", MD, "guide.md")
    wb.ingest_file("other", b"# Other\n\nSomething else entirely.\n", "other.md")
    fid = wb.file_records("other")[0].file_id
    with pytest.raises(FileNotFoundInStore, match="not in the store 'docs'"):
        vm.open_viewer(wb, ViewerTarget("docs", fid))


def test_a_passage_past_the_text_is_a_warning_not_a_crash(wb):
    wb.ingest_file("docs", MD, "guide.md")
    fid = wb.file_records("docs")[0].file_id
    view = vm.open_viewer(wb, ViewerTarget("docs", fid, 10**6, 10**6 + 5))
    assert view.span is None and "past the end" in view.warnings[0]
    assert vm.text_parts(view)[1:] == ("", "")


def test_another_members_file_is_missing_and_cannot_be_downloaded(wb, system):
    system.people.set_up_admin("root", PW, "Root")
    system.people.accounts.create("ana", PW, display_name="Ana")
    system.people.accounts.create("bo", PW, display_name="Bo")
    ana = wb.as_user(system.people.accounts.actor("ana"))
    bo = wb.as_user(system.people.accounts.actor("bo"))
    ana.ingest_file("hr", MD, "guide.md")
    fid = ana.file_records("hr")[0].file_id
    target = ViewerTarget("hr", fid)
    assert vm.open_viewer(ana, target).name == "guide.md"
    assert vm.download(ana, target).data == MD
    with pytest.raises(FileNotFoundInStore, match="not in the store 'hr'"):
        vm.open_viewer(bo, target)
    with pytest.raises(FileNotFoundInStore):
        vm.download(bo, target)


@pytest.mark.parametrize(
    ("given", "safe"),
    [
        ("application/pdf", "application/pdf"),
        ("text/markdown; charset=utf-8", "text/markdown"),
        ("text/html", "application/octet-stream"),
        ("image/svg+xml", "application/octet-stream"),
        ("application/xhtml+xml", "application/octet-stream"),
        ("", "application/octet-stream"),
        ("text/plain\r\nX-Evil: 1", "application/octet-stream"),
        ("image/png", "image/png"),
    ],
)
def test_downloads_never_carry_a_type_a_browser_would_run(given, safe):
    assert vm.safe_content_type(given) == safe


def test_a_passage_link_ends_at_its_anchor():
    assert vm.viewer_url("s", "f", start=1, end=2).endswith("#passage")
    assert "#" not in vm.viewer_url("s", "f")
