"""Which reader a file gets (issue 27's formats, decided from the bytes), documents inside documents
(``_compose``: provenance paths, a failing part reported while the container goes on), and
password-protected Office files: "needs a password", then read with it, in the reader and through
the product's Retry."""

from __future__ import annotations

import io
import struct
import zipfile

import docx
import pytest
from msoffcrypto.format.ooxml import OOXMLFile

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import PasswordRequired, UnsupportedFile
from knowledge.ingest import Document, Section, detect_format, read_document
from knowledge.ingest._compose import add_document, add_part, join_path
from knowledge.ingest._text import Builder
from knowledge.workbench import Workbench


def a_docx(*paragraphs: str) -> bytes:
    d = docx.Document()
    for p in paragraphs:
        d.add_paragraph(p)
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def encrypted(data: bytes, password: str) -> bytes:
    out = io.BytesIO()
    OOXMLFile(io.BytesIO(data)).encrypt(password, out)
    return out.getvalue()


def zip_of(members: dict[str, bytes | str], *, mimetype: str | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if mimetype:
            zf.writestr(zipfile.ZipInfo("mimetype"), mimetype)  # stored, first, as ODF/EPUB require
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


def ole2_with(stream: str) -> bytes:
    raw = stream.encode("utf-16-le")
    entry = raw + b"\x00" * (64 - len(raw)) + struct.pack("<H", len(raw) + 2) + b"\x02" * 62
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504 + entry + b"\x00" * 512


# -- the format from the bytes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "name", "fmt"),
    [
        (zip_of({"[Content_Types].xml": "<x/>", "ppt/presentation.xml": "<x/>"}), "deck.bin", "pptx"),
        (zip_of({"[Content_Types].xml": "<x/>", "xl/workbook.xml": "<x/>"}), "book.docx", "xlsx"),
        (zip_of({"content.xml": "<x/>"}, mimetype="application/vnd.oasis.opendocument.text"), "a.docx", "odt"),
        (zip_of({"content.xml": "<x/>"}, mimetype="application/vnd.oasis.opendocument.spreadsheet"), None, "ods"),
        (zip_of({"content.xml": "<x/>"}, mimetype="application/vnd.oasis.opendocument.presentation-template"), None, "odp"),
        (zip_of({"META-INF/container.xml": "<x/>"}, mimetype="application/epub+zip"), "book.zip", "epub"),
        (zip_of({"META-INF/container.xml": "<x/>", "OEBPS/content.opf": "<x/>"}), None, "epub"),
        (zip_of({"notes.txt": "hello", "photo.jpg": b"\xff\xd8\xff"}), "bundle.docx", "zip"),
        (b"{\\rtf1\\ansi Hello}", "letter.doc", "rtf"),
        (b"\xef\xbb\xbf{\\rtf1 Hi}", None, "rtf"),
        (ole2_with("__properties_version1.0"), "mail.bin", "msg"),
        (ole2_with("EncryptedPackage"), "secret.xlsx", "encrypted-ooxml"),
        (
            b"From: Ann <ann@example.org>\nTo: bo@example.org\nSubject: Tides\nDate: Mon, 1 Jun 2026 10:00:00 +0000\n\n"
            b"High tide at six.\n",
            None,
            "eml",
        ),
        (b"From ann@example.org Mon Jun  1 10:00:00 2026\nSubject: Tides\n\nHigh tide.\n", None, "mbox"),
        (b"Subject: hello\n\nnot a mail, too few mail headers\n", None, "text"),
        (b"From: Ann\nTo: Bo\nSubject: Tides\n\nA mail kept in a .txt file is read as text.\n", "note.txt", "text"),
        (b"Anything at all\n", "saved.eml", "eml"),
        (b"Anything at all\n", "archive.mbox", "mbox"),
    ],
)
def test_the_format_comes_from_the_bytes(data, name, fmt):
    assert detect_format(data, name) == fmt


@pytest.mark.parametrize(
    ("data", "name", "what"),
    [
        (ole2_with("PowerPoint Document"), "a.ppt", r"legacy PowerPoint format \(\.ppt\) — save it as \.pptx"),
        (ole2_with("WordDocument"), "a.docx", r"legacy Word format \(\.doc\) — save it as \.docx"),
        (zip_of({"[Content_Types].xml": "<x/>", "visio/document.xml": "<x/>"}), "a.vsdx", "Visio"),
        (
            zip_of({"content.xml": "<x/>"}, mimetype="application/vnd.oasis.opendocument.graphics"),
            "a.odg",
            "OpenDocument graphics",
        ),
    ],
)
def test_formats_still_refused_say_what_to_do(data, name, what):
    with pytest.raises(UnsupportedFile, match=what):
        read_document(data, name)


# -- documents inside documents ---------------------------------------------------------------------


def test_a_part_keeps_its_pages_and_headings_under_the_containers_label():
    part = Document(
        "Intro text\n\nResults text",
        [Section(0, 12, page=1, heading="Intro"), Section(12, 24, page=2, heading="Results")],
        "pdf",
        pages=2,
        warnings=["page 3 has no text layer"],
    )
    b = Builder()
    b.add("The mail body.", heading="Quarterly figures")
    add_document(b, part, join_path("Quarterly figures", "report.pdf"))
    doc = b.build("eml", empty="no text")
    results = next(s for s in doc.sections if doc.text[s.char_start : s.char_end].startswith("Results"))
    assert (results.page, results.heading) == (2, "Quarterly figures > report.pdf > Results")
    assert doc.warnings == ["Quarterly figures > report.pdf: page 3 has no text layer"]
    assert doc.text.startswith("The mail body.\n\nIntro text")


def test_a_part_without_pages_takes_the_page_it_sits_on():
    b = Builder()
    add_document(b, Document("Embedded words", [Section(0, 14)], "text"), "embedded notes.txt", page=4)
    doc = b.build("pptx", empty="no text")
    assert (doc.sections[0].page, doc.sections[0].heading) == (4, "embedded notes.txt")


def test_a_failing_part_is_reported_and_the_container_goes_on():
    def read_part(data: bytes, name: str) -> Document:
        return read_document(data, name)

    b = Builder()
    b.add("Before the attachments.")
    assert not add_part(b, read_part, b"%PDF-1.4\n garbage that is no PDF", "broken.pdf", "Mail > broken.pdf")
    assert add_part(b, read_part, a_docx("Attached words survive."), "ok.docx", "Mail > ok.docx")
    doc = b.build("eml", empty="no text")
    assert "Attached words survive." in doc.text and "Before the attachments." in doc.text
    assert len(doc.warnings) == 1 and doc.warnings[0].startswith("Mail > broken.pdf: not read: ")


def test_parts_nest_only_so_deep():
    inner = a_docx("The innermost words.")
    for level in range(8):
        inner = zip_of({f"level{level}.zip" if level else "deep.docx": inner})
    try:
        doc = read_document(inner, "deep.zip")
    except Exception as exc:  # nothing read: the refusal names the depth
        assert "nested more than" in str(exc)
    else:
        assert "The innermost words." not in doc.text
        assert any("nested more than" in w for w in doc.warnings)


# -- password-protected Office files ----------------------------------------------------------------


def test_an_encrypted_docx_needs_its_password_then_reads():
    data = encrypted(a_docx("The lighthouse keeper counts seagulls."), "s3cret")
    assert detect_format(data, "notes.docx") == "encrypted-ooxml"
    with pytest.raises(PasswordRequired, match=r"^password required"):
        read_document(data, "notes.docx")
    with pytest.raises(PasswordRequired, match=r"^wrong password"):
        read_document(data, "notes.docx", password="guess")
    doc = read_document(data, "notes.docx", password="s3cret")
    assert doc.format == "docx" and "counts seagulls" in doc.text


def test_a_damaged_encrypted_file_is_named_not_a_password_question():
    with pytest.raises(UnsupportedFile, match=r"^damaged: the encrypted Office document"):
        read_document(ole2_with("EncryptedPackage"), "secret.docx")


def test_the_product_asks_for_the_password_and_retry_reads_it(tmp_path):
    wb = Workbench(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=32, max_tokens=128)
    )
    try:
        wb.create_store("office")
        first = wb.ingest_file("office", encrypted(a_docx("Tide tables for the harbour."), "tika"), "tides.docx")
        assert first.error == "PasswordRequired" and not first.ok and first.file_id
        assert wb.search("office", "harbour tide tables", k=3, mode="lexical") == []
        wrong = wb.retry_file("office", first.file_id, password="nope")
        assert wrong.error == "PasswordRequired" and "wrong password" in wrong.message
        right = wb.retry_file("office", wrong.file_id or first.file_id, password="tika")
        assert right.ok and right.chunks >= 1
        hits = wb.search("office", "harbour tide tables", k=3, mode="lexical")
        assert hits and hits[0].file_name == "tides.docx"
        assert [r.status for r in wb.file_records("office")] == ["done"]  # the failed record was replaced
    finally:
        wb.close()


# -- password-protected OpenDocument files ------------------------------------------------------------

_ODT_CONTENT = (
    "<?xml version='1.0' encoding='UTF-8'?><office:document-content"
    " xmlns:office='urn:oasis:names:tc:opendocument:xmlns:office:1.0'"
    " xmlns:text='urn:oasis:names:tc:opendocument:xmlns:text:1.0' office:version='1.2'>"
    "<office:body><office:text><text:p>{}</text:p></office:text></office:body>"
    "</office:document-content>"
)


def encrypted_odt(
    text: str, password: str, *, cipher: str = "aes", algorithm: str = "http://www.w3.org/2001/04/xmlenc#aes256-cbc"
) -> bytes:
    """An .odt whose content.xml is encrypted as ODF 1.2 part 3 §3.8 says (AES-256-CBC, PBKDF2 over
    SHA-256 of the password, sha256-1k checksum) or as OpenOffice 1.x-3.x did (Blowfish CFB, SHA-1)."""
    import base64
    import hashlib
    import os
    import zlib

    from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    from cryptography.hazmat.decrepit.ciphers.modes import CFB
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    plain = _ODT_CONTENT.format(text).encode()
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = deflater.compress(plain) + deflater.flush()
    salt = os.urandom(16)
    if cipher == "aes":
        iv = os.urandom(16)
        key = hashlib.pbkdf2_hmac("sha1", hashlib.sha256(password.encode()).digest(), salt, 1000, 32)
        pad = 16 - len(packed) % 16
        enc = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        body = enc.update(packed + os.urandom(pad - 1) + bytes([pad])) + enc.finalize()
        checksum = hashlib.sha256(packed[:1024]).digest()
        data = (
            "<manifest:encryption-data"
            " manifest:checksum-type='urn:oasis:names:tc:opendocument:xmlns:manifest:1.0#sha256-1k'"
            f" manifest:checksum='{base64.b64encode(checksum).decode()}'>"
            f"<manifest:algorithm manifest:algorithm-name='{algorithm}'"
            f" manifest:initialisation-vector='{base64.b64encode(iv).decode()}'/>"
            "<manifest:start-key-generation manifest:start-key-generation-name='http://www.w3.org/2000/09/xmldsig#sha256'"
            " manifest:key-size='32'/>"
            "<manifest:key-derivation manifest:key-derivation-name='PBKDF2' manifest:key-size='32'"
            f" manifest:iteration-count='1000' manifest:salt='{base64.b64encode(salt).decode()}'/>"
            "</manifest:encryption-data>"
        )
    else:
        iv = os.urandom(8)
        key = hashlib.pbkdf2_hmac("sha1", hashlib.sha1(password.encode()).digest(), salt, 1024, 16)
        enc = Cipher(Blowfish(key), CFB(iv)).encryptor()
        body = enc.update(packed) + enc.finalize()
        checksum = hashlib.sha1(packed[:1024]).digest()
        data = (
            "<manifest:encryption-data manifest:checksum-type='SHA1/1K'"
            f" manifest:checksum='{base64.b64encode(checksum).decode()}'>"
            "<manifest:algorithm manifest:algorithm-name='Blowfish CFB'"
            f" manifest:initialisation-vector='{base64.b64encode(iv).decode()}'/>"
            "<manifest:key-derivation manifest:key-derivation-name='PBKDF2' manifest:key-size='16'"
            f" manifest:iteration-count='1024' manifest:salt='{base64.b64encode(salt).decode()}'/>"
            "</manifest:encryption-data>"
        )
    manifest = (
        "<?xml version='1.0' encoding='UTF-8'?><manifest:manifest"
        " xmlns:manifest='urn:oasis:names:tc:opendocument:xmlns:manifest:1.0' manifest:version='1.2'>"
        "<manifest:file-entry manifest:full-path='/' manifest:media-type='application/vnd.oasis.opendocument.text'/>"
        "<manifest:file-entry manifest:full-path='content.xml' manifest:media-type='text/xml'"
        f" manifest:size='{len(plain)}'>"
        f"{data}</manifest:file-entry></manifest:manifest>"
    )
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.text")
        zf.writestr(zipfile.ZipInfo("content.xml"), body)  # stored: already deflated, then encrypted
        zf.writestr("META-INF/manifest.xml", manifest)
    return buf.getvalue()


@pytest.mark.parametrize("cipher", ["aes", "blowfish"])
def test_an_encrypted_opendocument_needs_its_password_then_reads(cipher):
    data = encrypted_odt("The keeper's log for March.", "tika", cipher=cipher)
    assert detect_format(data, "log.odt") == "odt"
    with pytest.raises(PasswordRequired, match=r"^password required"):
        read_document(data, "log.odt")
    with pytest.raises(PasswordRequired, match=r"^wrong password"):
        read_document(data, "log.odt", password="guess")
    doc = read_document(data, "log.odt", password="tika")
    assert doc.format == "odt" and "The keeper's log for March." in doc.text


def test_opendocument_encryption_of_another_kind_is_named():
    data = encrypted_odt("Words", "tika", algorithm="http://www.w3.org/2009/xmlenc11#aes256-gcm")
    with pytest.raises(UnsupportedFile, match="aes256-gcm"):
        read_document(data, "log.odt", password="tika")


def test_binary_bytes_under_a_documents_name_say_what_they_are_not():
    noise = bytes((i * 7919 + 13) % 251 for i in range(4000))
    with pytest.raises(UnsupportedFile, match=r"^damaged: named \.msg but its bytes are not an Outlook message"):
        read_document(noise, "mail.msg")
    with pytest.raises(UnsupportedFile, match=r"^unsupported: binary data"):
        read_document(noise, "blob.bin")


def test_a_plain_zip_named_docx_is_read_and_says_so():
    doc = read_document(zip_of({"a.txt": "The tides are high.", "b.txt": "The moon is full."}), "report.docx")
    assert doc.format == "zip" and "The tides are high." in doc.text and "The moon is full." in doc.text
    assert doc.warnings[0].startswith("named .docx but it is a plain ZIP archive, not a Word document")
