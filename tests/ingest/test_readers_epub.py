"""EPUB reader: books written as ZIP + OPF + XHTML in the test."""

from __future__ import annotations

import io
import zipfile

import pytest

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest import read_document

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def xhtml(title: str, body: str) -> str:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}'
        f"</title><style>p {{ font-style: italic }}</style><script>var hidden = 1;</script></head>"
        f"<body>{body}</body></html>"
    )


def epub(files: dict[str, str], manifest: str, spine: str, *, container: bool = True, extra: dict | None = None) -> bytes:
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A Small Book</dc:title>'
        "<dc:creator>Ada Writer</dc:creator><dc:language>en</dc:language></metadata>"
        f'<manifest>{manifest}</manifest><spine toc="ncx">{spine}</spine></package>'
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        if container:
            zf.writestr("META-INF/container.xml", CONTAINER)
        zf.writestr("OEBPS/book.opf", opf)
        for name, text in {**files, **(extra or {})}.items():
            zf.writestr(name, text)
    return buf.getvalue()


NCX = (
    '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><navMap>'
    '<navPoint id="n1"><navLabel><text>The Beginning</text></navLabel><content src="text/one.xhtml"/></navPoint>'
    '<navPoint id="n2"><navLabel><text>The End</text></navLabel><content src="text/two.xml#top"/></navPoint>'
    "</navMap></ncx>"
)


def book(**kw) -> bytes:
    files = {
        "OEBPS/title.xhtml": xhtml("Title page", "<p>A Small Book, by Ada Writer</p>"),
        "OEBPS/text/one.xhtml": xhtml("One", "<h2>Morning</h2><p>It was a bright cold day.</p><ul><li>First item</li></ul>"),
        "OEBPS/text/two.xml": xhtml(
            "Two",
            "<p>The clocks were striking thirteen.</p>"
            "<table><tr><th>Key</th><th>Value</th></tr><tr><td>a</td><td>1</td></tr></table>",
        ),
        "OEBPS/toc.ncx": NCX,
        "OEBPS/style.css": "p { color: red }",
    }
    manifest = (
        '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        '<item id="two" href="text/two.xml" media-type="application/xhtml+xml"/>'
        '<item id="one" href="text/one.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="title" href="title.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="css" href="style.css" media-type="text/css"/>'
    )
    spine = '<itemref idref="title" linear="no"/><itemref idref="one"/><itemref idref="two"/>'
    return epub(files, manifest, spine, **kw)


def section_at(doc, needle: str):
    offset = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= offset < s.char_end)


def test_epub_chapters_in_spine_order_with_titles_pages_and_metadata():
    doc = read_document(book(), "book.epub")
    assert doc.format == "epub"
    assert doc.title == "A Small Book" and doc.attributes["author"] == "Ada Writer"
    text = doc.text
    assert text.index("A Small Book, by Ada Writer") < text.index("bright cold day") < text.index("striking thirteen")
    assert (section_at(doc, "bright cold").page, section_at(doc, "bright cold").heading) == (2, "The Beginning > Morning")
    assert (section_at(doc, "striking").page, section_at(doc, "striking").heading) == (3, "The End")
    assert section_at(doc, "A Small Book, by").heading == "Title page"  # no NCX entry: the page's <title>
    assert "First item" in text and "Key | Value\na | 1" in text
    assert len(doc.tables) == 1
    for hidden in ("font-style", "var hidden", "color: red"):
        assert hidden not in text


def test_epub3_nav_document_titles_and_no_container_fallback():
    nav = (
        '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        '<body><nav epub:type="toc"><ol><li><a href="c1.xhtml">Opening</a></li></ol></nav></body></html>'
    )
    files = {"OEBPS/nav.xhtml": nav, "OEBPS/c1.xhtml": xhtml("c1", "<p>Chapter text.</p>")}
    manifest = (
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        '<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>'
    )
    doc = read_document(epub(files, manifest, '<itemref idref="c1"/>'), "b.epub")
    assert section_at(doc, "Chapter text.").heading == "Opening"
    assert "Opening" not in doc.text  # the navigation document itself is not a chapter
    doc = read_document(epub(files, manifest, '<itemref idref="c1"/>', container=False), "b.epub")
    assert "Chapter text." in doc.text  # the OPF is found without container.xml


def test_drm_protected_epub_is_refused_with_a_reason():
    enc = (
        '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        '<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
        '<enc:CipherData><enc:CipherReference URI="OEBPS/text/one.xhtml"/></enc:CipherData>'
        "</enc:EncryptedData></encryption>"
    )
    with pytest.raises(UnsupportedFile, match="DRM"):
        read_document(book(extra={"META-INF/encryption.xml": enc}), "drm.epub")


def test_bad_epub_input_fails_cleanly():
    data = book()
    with pytest.raises(UnsupportedFile, match="damaged"):
        read_document(data[: len(data) // 2], "cut.epub")
    with pytest.raises(EmptyDocument):
        read_document(b"", "empty.epub")
    empty = epub(
        {"OEBPS/c.xhtml": xhtml("t", "")},
        '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>',
        '<itemref idref="c"/>',
    )
    with pytest.raises(EmptyDocument, match="no text"):
        read_document(empty, "blank.epub")
    assert read_document(data, "book.zip").format == "epub"  # the bytes decide
