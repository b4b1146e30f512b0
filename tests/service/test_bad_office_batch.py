"""Issue 27's bad input through the product, in one batch: for each new format kind (PowerPoint,
Excel, OpenDocument, EPUB, RTF, mail, ZIP) a truncated, an empty, a misnamed and, where the format
has one, an encrypted file; a zip bomb; a mail whose attachment is corrupt. Each file indexes or
fails with a reason in words, the batch goes on to the last file, and nothing of a refused file is
written to the store (no chunk, no hit). The readers' own tests hold the finer cases."""

from __future__ import annotations

import io
import re
import zipfile
from email.message import EmailMessage

import docx
import pytest
from msoffcrypto.format.ooxml import OOXMLFile
from openpyxl import Workbook as Excel
from pptx import Presentation

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.outcomes import Outcome, plain_reason
from knowledge.workbench import Workbench

pytestmark = pytest.mark.slow  # Office encryption derives its keys slowly; bombs are deflated

ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"'
)
EPUB_CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="OEBPS/book.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)
RTF_HEAD = r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Times;}}"


def zipped(members: dict[str, str | bytes], *, mimetype: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if mimetype:
            zf.writestr(zipfile.ZipInfo("mimetype"), mimetype)  # stored and first, as ODF and EPUB want
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


def saved(doc) -> bytes:
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


def deck(text: str) -> bytes:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Plan"
    slide.placeholders[1].text = text
    return saved(prs)


def workbook(text: str) -> bytes:
    book = Excel()
    book.active.append(["note"])
    book.active.append([text])
    return saved(book)


def letter(text: str) -> bytes:
    d = docx.Document()
    d.add_paragraph(text)
    return saved(d)


def locked(data: bytes) -> bytes:
    out = io.BytesIO()
    OOXMLFile(io.BytesIO(data)).encrypt("s3cret", out)
    return out.getvalue()


def odt(text: str, manifest_entries: str = "") -> bytes:
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ODF_NS}><office:body>'
        f"<office:text><text:p>{text}</text:p></office:text></office:body></office:document-content>"
    )
    manifest = (
        f'<?xml version="1.0" encoding="UTF-8"?><manifest:manifest {ODF_NS}><manifest:file-entry '
        'manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>'
        f"{manifest_entries}</manifest:manifest>"
    )
    return zipped(
        {"content.xml": content, "META-INF/manifest.xml": manifest}, mimetype="application/vnd.oasis.opendocument.text"
    )


def encrypted_odt() -> bytes:
    entry = (
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
        '<manifest:encryption-data manifest:checksum-type="SHA1/1K" manifest:checksum="x">'
        '<manifest:algorithm manifest:algorithm-name="Blowfish CFB" manifest:initialisation-vector="x"/>'
        "</manifest:encryption-data></manifest:file-entry>"
    )
    data = odt("unused", entry)
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():  # content.xml as ciphertext would be
            dst.writestr(info, b"\x8b\x00 binary ciphertext" if info.filename == "content.xml" else src.read(info))
    return buf.getvalue()


def epub(text: str, extra: dict[str, str] | None = None) -> bytes:
    chapter = (
        f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>One'
        f"</title></head><body><p>{text}</p></body></html>"
    )
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Book</dc:title></metadata>'
        '<manifest><item id="one" href="one.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="one"/></spine></package>'
    )
    return zipped(
        {"META-INF/container.xml": EPUB_CONTAINER, "OEBPS/book.opf": opf, "OEBPS/one.xhtml": chapter, **(extra or {})},
        mimetype="application/epub+zip",
    )


DRM = (
    '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
    'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
    '<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
    '<enc:CipherData><enc:CipherReference URI="OEBPS/one.xhtml"/></enc:CipherData>'
    "</enc:EncryptedData></encryption>"
)


def mail(body: str, attachment: bytes | None = None) -> bytes:
    m = EmailMessage()
    m["Subject"] = "Pump report"
    m["From"] = "Ada <ada@example.org>"
    m["To"] = "Alan <alan@example.org>"
    m["Date"] = "Tue, 06 Jun 2017 14:48:27 -0700"
    m.set_content(body)
    if attachment is not None:
        m.add_attachment(attachment, maintype="application", subtype="pdf", filename="broken.pdf")
    return m.as_bytes()


def half(data: bytes) -> bytes:
    return data[: len(data) // 2]


# name -> (bytes, None for indexed or the error class, a pattern its reason or a warning must hold)
FAILED = "failed"
CASES: dict[str, tuple[bytes, str | None, str]] = {
    # PowerPoint
    "cut.pptx": (half(deck("PUFFIN cut deck")), "UnsupportedFile", "damaged"),
    "empty.pptx": (b"", "EmptyDocument", "empty"),
    "locked.pptx": (locked(deck("PUFFIN locked deck")), "PasswordRequired", "password"),
    "letter.pptx": (letter("MARTEN letter under a deck's name"), None, ""),
    # Excel
    "cut.xlsx": (half(workbook("PUFFIN cut sheet")), "UnsupportedFile", "damaged"),
    "empty.xlsx": (b"", "EmptyDocument", "empty"),
    "locked.xlsx": (locked(workbook("PUFFIN locked sheet")), "PasswordRequired", "password"),
    "slides.xlsx": (deck("MARTEN deck under a workbook's name"), None, ""),
    # OpenDocument
    "cut.odt": (half(odt("PUFFIN cut odt " * 40)), "UnsupportedFile", "damaged"),
    "empty.odt": (b"", "EmptyDocument", "empty"),
    "locked.odt": (encrypted_odt(), "PasswordRequired", "password"),
    "text.docx": (odt("MARTEN odt under a Word name"), None, ""),
    # EPUB
    "cut.epub": (half(epub("PUFFIN cut book " * 40)), "UnsupportedFile", "damaged"),
    "empty.epub": (b"", "EmptyDocument", "empty"),
    "drm.epub": (epub("PUFFIN drm book", {"META-INF/encryption.xml": DRM}), "UnsupportedFile", "DRM"),
    "book.zip": (epub("MARTEN book under a zip name"), None, ""),
    # RTF (no encryption in the format; a cut file reads what it has and says so)
    "cut.rtf": ((RTF_HEAD + r"\pard MARTEN cut rtf {\b never closed\par").encode(), None, "truncated"),
    "empty.rtf": (b"", "EmptyDocument", "empty"),
    "letter.doc": ((RTF_HEAD + r"\pard MARTEN rtf under a doc name\par}").encode(), None, ""),
    # mail
    "cut.msg": (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "UnsupportedFile", "Outlook"),
    "empty.eml": (b"", "EmptyDocument", "empty"),
    "empty.mbox": (b"", "EmptyDocument", "empty"),
    "attached.eml": (mail("MARTEN mail body", b"%PDF-1.7\n garbage PUFFIN"), None, r"broken\.pdf: not read"),
    "mail.doc": (mail("MARTEN mail under a doc name"), None, ""),
    # ZIP
    "bomb.zip": (zipped({"zeros.txt": b"\x00" * (5 * 1024 * 1024)}), "EmptyDocument", "zip bomb"),
    "mixed.zip": (
        zipped({"zeros.txt": b"\x00" * (5 * 1024 * 1024), "ok.txt": b"MARTEN beside a bomb"}),
        None,
        r"zeros\.txt: not read: .*zip bomb",
    ),
    "cut.zip": (half(zipped({"a.txt": b"PUFFIN cut zip " * 200, "b.txt": b"more " * 200})), FAILED, ""),
    "report.docx": (zipped({"a.txt": b"MARTEN plain zip under a Word name"}), None, "plain ZIP archive"),
}


def test_bad_files_of_every_new_kind_fail_with_a_reason_and_the_batch_goes_on(tmp_path):
    paths = []
    for name, (data, _, _) in CASES.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    (tmp_path / "last.md").write_text("# Last\n\nMARTEN the last file of the batch\n", encoding="utf-8")
    paths.append(tmp_path / "last.md")
    settings = load_settings(data_dir=tmp_path / "data")
    wb = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    try:
        wb.create_store("drive")
        results = {r.name: r for r in wb.ingest_paths("drive", paths)}
        assert results["last.md"].outcome == Outcome.INDEXED  # the batch went on to its end
        for name, (_, error, said) in CASES.items():
            r = results[name]
            if error is None:
                assert r.outcome == Outcome.INDEXED and r.chunks > 0, (name, r.message)
                assert not said or any(re.search(said, w) for w in r.warnings), (name, r.warnings)
            else:
                assert r.outcome == Outcome.FAILED, (name, r.outcome, r.message)
                assert error == FAILED or r.error == error, (name, r.error, r.message)
                assert r.message and re.search(said, r.message, re.I), (name, r.message)
                assert not re.search(r"\b\w*(Error|Exception)\b|BadZipFile", plain_reason(r.message)), r.message
        store = wb.vector_store("drive")
        records = {f.file_name: f for f in wb.store_files("drive")}
        failed = {n for n, r in results.items() if not r.ok}
        assert failed == {n for n, (_, e, _) in CASES.items() if e is not None}
        for name in failed:  # a record that says why, and nothing of the file in the index
            assert records[name].status == "failed" and records[name].reason, name
            assert store.chunks(records[name].file_id) == [], name
        assert store.count() == sum(r.chunks for r in results.values() if r.ok)
        assert not wb.search("drive", "PUFFIN", k=10, mode="lexical")  # only the refused files had it
        found = {h.file_name for h in wb.search("drive", "MARTEN", k=50, mode="lexical")}
        assert found == {n for n, r in results.items() if r.ok}
    finally:
        wb.close()
