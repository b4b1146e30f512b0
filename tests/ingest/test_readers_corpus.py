"""Readers on real documents written by other people (../shared/corpus, see its README).

Every PDF and DOCX there either reads with text or fails with its own specific reason; nothing
raises a raw library exception and nothing "succeeds" with no searchable text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledge.errors import EmptyDocument, PasswordRequired
from knowledge.ingest import Document, read_document
from tests.helpers.env import CORPUS

#: Files that must fail, and how.
EXPECTED_FAILURES = {
    "libreoffice-writer-password.pdf": (PasswordRequired, "password required"),
    # six 16-pixel images (3.84 pt pages): OCR reads them and finds nothing, and says so
    "imagemagick-images.pdf": (EmptyDocument, r"^no text found, even by OCR: none of its 6 pages has text"),
    # python-docx's test files with no text at all: images only, empty tables, a blank document
    "having-images.docx": (EmptyDocument, "no text"),
    "tbl-having-tables.docx": (EmptyDocument, "no text"),
    "doc-default.docx": (EmptyDocument, "no text"),
}


def corpus_files(kind: str) -> list[str]:
    folder = CORPUS / kind
    return sorted(p.name for p in folder.glob(f"*.{kind}")) or [f"(no {kind} files)"]


def check_shape(doc: Document) -> None:
    assert doc.text.strip()
    assert doc.sections[0].char_start == 0 and doc.sections[-1].char_end == len(doc.text)
    for a, b in zip(doc.sections, doc.sections[1:]):
        assert a.char_end == b.char_start
    assert "\x00" not in doc.text and "\r" not in doc.text


def _params(names: list[str]) -> list:
    """The corpus files; the one whose reading OCRs six pages runs in the slow set only
    (test_imagemagick_images_are_no_silent_success checks the same failure in the default loop)."""
    return [pytest.param(n, marks=pytest.mark.slow) if n == "imagemagick-images.pdf" else n for n in names]


@pytest.mark.parametrize("name", _params(corpus_files("pdf") + corpus_files("docx")))
def test_every_corpus_file_reads_or_fails_for_its_reason(corpus: Path, name: str):
    path = corpus / name.rsplit(".", 1)[-1] / name
    assert path.is_file(), f"{path} is missing"
    if name in EXPECTED_FAILURES:
        error, message = EXPECTED_FAILURES[name]
        with pytest.raises(error, match=message):
            read_document(path)
        return
    doc = read_document(path)
    check_shape(doc)
    assert doc.format == path.suffix[1:]
    if doc.format == "pdf":
        assert doc.pages and {s.page for s in doc.sections} <= set(range(1, doc.pages + 1))


def test_password_pdf_reads_with_its_password(corpus: Path):
    path = corpus / "pdf" / "libreoffice-writer-password.pdf"
    with pytest.raises(PasswordRequired, match="wrong password"):
        read_document(path, password="not-it")
    doc = read_document(path, password="openpassword")
    assert doc.text.startswith("Lorem ipsum dolor sit amet")
    assert doc.pages == 1


@pytest.mark.slow
def test_imagemagick_images_are_no_silent_success(corpus: Path):
    pages = []
    with pytest.raises(EmptyDocument) as exc:
        read_document(corpus / "pdf" / "imagemagick-images.pdf", on_page=lambda done, total: pages.append(done))
    assert str(exc.value).startswith("no text found, even by OCR") and "6 pages" in str(exc.value)
    assert pages == [0, 1, 2, 3, 4, 5, 6]  # every page went through OCR
    with pytest.raises(EmptyDocument) as exc:
        read_document(corpus / "pdf" / "imagemagick-images.pdf", ocr="off")
    assert "no text layer (scanned? OCR needed)" in str(exc.value) and "6 pages" in str(exc.value)


def test_crazyones_ligature_is_searchable(corpus: Path):
    doc = read_document(corpus / "pdf" / "crazyones-pdfa.pdf")
    assert "misfits" in doc.text and "\ufb01" not in doc.text
    assert "The Crazy Ones" in doc.text


def test_pdflatex_4_pages_keeps_page_numbers(corpus: Path):
    doc = read_document(corpus / "pdf" / "pdflatex-4-pages.pdf")
    assert doc.pages == 4
    assert [s.page for s in doc.sections] == [1, 2, 3, 4]
    assert doc.warnings == []


def test_pdf_hyphenation_is_joined_on_real_files(corpus: Path):
    minimal = read_document(corpus / "pdf" / "minimal-document.pdf").text
    assert "takimata" in minimal and "taki-" not in minimal
    multi = read_document(corpus / "pdf" / "multicolumn.pdf")
    assert multi.pages == 3 and "adipiscing elit" in multi.text and "adip-\n" not in multi.text


def test_other_pdfs_say_what_they_should(corpus: Path):
    assert "awesome blog" in read_document(corpus / "pdf" / "libre-office-link.pdf").text
    zen = read_document(corpus / "pdf" / "google-doc-document.pdf")
    assert "Beautiful is better than ugly." in zen.text and zen.title == "PDF Example Document"
    habibi = read_document(corpus / "pdf" / "habibi.pdf")
    assert "habibi" in habibi.text and any("\u0600" <= c <= "\u06ff" for c in habibi.text)
    outline = read_document(corpus / "pdf" / "pdflatex-outline.pdf")
    assert outline.pages == 4 and "1 Foo" in outline.text


def test_header_and_footer_are_indexed_once(corpus: Path):
    doc = read_document(corpus / "docx" / "hdr-header-footer.docx")
    assert doc.text.count("Header for section-1") == 1
    assert doc.text.count("Footer for section 1") == 1
    assert "section with header" in doc.text and "section without header of its own." in doc.text


def test_tables_keep_cell_boundaries(corpus: Path):
    doc = read_document(corpus / "docx" / "blk-paras-and-tables.docx")
    lines = doc.text.split("\n")
    assert "Left-side | Right-side" in lines  # the header's two-cell table
    assert "Text before [Table; Between] Text after" in lines  # a one-cell table around a nested one
    order = [doc.text.index(s) for s in ("Lorem ipsum", "Text before", "Donec semper", "Copyright")]
    assert order == sorted(order)


def test_numbered_list_gets_its_number(corpus: Path):
    doc = read_document(corpus / "docx" / "num-having-numbering-part.docx")
    assert doc.text == "1. Paragraph having List Number style."


def test_hyperlink_text_is_kept(corpus: Path):
    doc = read_document(corpus / "docx" / "par-hyperlinks.docx")
    assert "One awesome hyperlink." in doc.text
    assert "Three hyperlinks: the first one here, the second one, and the third." in doc.text


def test_docx_heading_style_gives_the_heading_path(corpus: Path):
    doc = read_document(corpus / "docx" / "test.docx")
    assert [s.heading for s in doc.sections] == ["python-docx was here!"]


def test_rust_book_chapter_heading_path(corpus: Path):
    doc = read_document(corpus / "md" / "rust-book" / "ch09-02-recoverable-errors-with-result.md")
    assert doc.format == "markdown" and doc.title == "Recoverable Errors with Result"
    at = doc.text.index("Using `match` works well enough")
    section = next(s for s in doc.sections if s.char_start <= at < s.char_end)
    assert section.heading == (
        "Recoverable Errors with Result > Matching on Different Errors > Shortcuts for Panic on Error"
    )
    headings = [s.heading for s in doc.sections]
    assert headings == [
        "Recoverable Errors with Result",
        "Recoverable Errors with Result > Matching on Different Errors",
        "Recoverable Errors with Result > Matching on Different Errors > Shortcuts for Panic on Error",
        "Recoverable Errors with Result > Propagating Errors",
        "Recoverable Errors with Result > Propagating Errors > The ? Operator Shortcut",
        "Recoverable Errors with Result > Propagating Errors > Where to Use the ? Operator",
    ]
    shadowing = read_document(corpus / "md" / "rust-book" / "ch03-01-variables-and-mutability.md")
    at = shadowing.text.index("Rustaceans say that the\nfirst variable is _shadowed_")
    assert next(s for s in shadowing.sections if s.char_start <= at < s.char_end).heading == (
        "Variables and Mutability > Shadowing"
    )


@pytest.mark.slow
def test_every_rust_book_chapter_reads(corpus: Path):
    chapters = sorted((corpus / "md" / "rust-book").glob("*.md"))
    assert len(chapters) >= 100
    for path in chapters:
        doc = read_document(path)
        check_shape(doc)
        assert doc.format == "markdown"
        # no heading line is hidden inside a section of another heading outside code
        assert all(s.heading is None or s.heading.strip() for s in doc.sections)
