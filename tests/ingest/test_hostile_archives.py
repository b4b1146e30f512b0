"""Hostile and broken archives, mails and e-books (issue 38): overlapping zip bombs, the inflation
budget, legacy member names, TNEF winmail.dat, encoded message/rfc822 parts, EPUB spines naming
missing chapters. Inputs come from :mod:`tests.helpers.hostile_archives`."""

from __future__ import annotations

import io
import random
import struct
import zipfile

import docx
import openpyxl
import pytest

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest import _cost, detect_format, read_document
from tests.helpers.chat import pdf_bytes
from tests.helpers.hostile_archives import (
    ATT_MSG_PROPS,
    base64_rfc822_eml,
    epub_missing_chapter,
    legacy_name_zip,
    overlapping_package,
    overlapping_zip,
    quoted_overlap_zip,
    tnef_attribute,
    tnef_eml,
    tnef_file,
)


def headings(doc) -> list[str | None]:
    return [s.heading for s in doc.sections]


def section_of(doc, needle: str):
    at = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= at < s.char_end)


def no_class_names(message: str) -> None:
    for word in ("BadZipFile", "Error:", "Exception", "Traceback", "server log"):
        assert word not in message


# -- overlapping entries ----------------------------------------------------------------------------


def test_overlapping_zip_bomb_is_refused_before_anything_is_inflated():
    bomb = overlapping_zip()
    assert 2_000_000 < len(bomb) < 4_000_000
    assert len(zipfile.ZipFile(io.BytesIO(bomb)).infolist()) == 400  # Python 3.11.7's zipfile lists them all
    heard: list[str] = []
    _cost.listen(heard.append)
    try:
        with pytest.raises(UnsupportedFile) as caught:
            read_document(bomb, "bomb.zip")
    finally:
        _cost.listen(None)
    message = str(caught.value)
    assert message == ("refused: 400 entries of this ZIP share the same compressed data (an overlapping-entries zip bomb)")
    no_class_names(message)
    assert heard == []  # refused before the archive even declared its size to the watchdog


def test_overlap_without_shared_offsets_is_refused_too():
    bomb = quoted_overlap_zip(entries=50)
    zf = zipfile.ZipFile(io.BytesIO(bomb))
    assert len(zf.read("part000.txt")) > 90_000 and len({i.header_offset for i in zf.infolist()}) == 50
    with pytest.raises(
        UnsupportedFile,
        match=r"^refused: 50 entries of this ZIP overlap each other's compressed"
        r" data \(an overlapping-entries zip bomb\)$",
    ):
        read_document(bomb, "bomb.zip")


def _docx() -> bytes:
    d = docx.Document()
    d.add_paragraph("The valve GANNET-77 leaks.")
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def _xlsx() -> bytes:
    wb = openpyxl.Workbook()
    wb.active["A1"] = "pressure"
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _pptx() -> bytes:
    import pptx

    prs = pptx.Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[1])
    slide.shapes.title.text = "Pump status"
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def _odt() -> bytes:
    from odf.opendocument import OpenDocumentText
    from odf.text import P

    doc = OpenDocumentText()
    doc.text.addElement(P(text="The valve GANNET-77 leaks."))
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("build", "member", "name"),
    [
        (_docx, "word/document.xml", "a.docx"),
        (_xlsx, "xl/worksheets/sheet1.xml", "a.xlsx"),
        (_pptx, "ppt/slides/slide1.xml", "a.pptx"),
        (_odt, "content.xml", "a.odt"),
        (epub_missing_chapter, "OEBPS/one.xhtml", "a.epub"),
    ],
)
def test_zip_packages_refuse_overlapping_entries_with_the_same_sentence(build, member, name):
    package = build()
    read_document(package, name)  # reads as it is
    bomb = overlapping_package(package, member, copies=40)
    with pytest.raises(UnsupportedFile) as caught:
        read_document(bomb, name)
    assert str(caught.value) == (
        "refused: 41 entries of this ZIP share the same compressed data (an overlapping-entries zip bomb)"
    )


def test_packages_tell_the_watchdog_what_they_declare():
    heard: list[str] = []
    _cost.listen(heard.append)
    try:
        read_document(_docx(), "a.docx")
    finally:
        _cost.listen(None)
    assert any(s.startswith("the DOCX declares ") and "MB unpacked in" in s for s in heard)


# -- the inflation budget ---------------------------------------------------------------------------


def _noise(n: int, seed: int) -> bytes:
    """Text that deflates only about 2:1 (random letters), so no ratio limit applies."""
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz \n") for _ in range(n)).encode()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_archive_inflates_no_more_than_the_file_size_limit():
    archive = _zip({"a.txt": _noise(400_000, 1), "b.txt": _noise(400_000, 2), "c.txt": _noise(400_000, 3)})
    assert len(archive) < 1_000_000
    heard: list[str] = []
    _cost.listen(heard.append)
    try:
        doc = read_document(archive, "three.zip", max_bytes=1_000_000)
    finally:
        _cost.listen(None)
    assert headings(doc)[:2] == ["a.txt", "b.txt"] and "c.txt" not in headings(doc)
    assert doc.warnings == [
        "c.txt: not read: the archive's files inflate to more than 1.0 MB together, the limit for one file (a zip bomb?)"
    ]
    assert heard == ["the archive declares 1.2 MB unpacked in 3 files"]
    # without a limit the default (100 MB) applies and all three are read
    assert "c.txt" in headings(read_document(archive, "three.zip"))


def test_nested_archives_share_one_budget():
    inner = _zip({"b.txt": _noise(400_000, 2), "c.txt": _noise(400_000, 3)})
    outer = _zip({"a.txt": _noise(400_000, 1), "inner.zip": inner})
    doc = read_document(outer, "outer.zip", max_bytes=1_500_000)  # a 0.4 + inner.zip 0.5 + b 0.4 MB
    assert "a.txt" in headings(doc) and "inner.zip > b.txt" in headings(doc)
    assert "inner.zip > c.txt" not in headings(doc)
    assert any(
        w.startswith("inner.zip: c.txt: not read: the archive's files inflate to more than 1.5 MB together")
        for w in doc.warnings
    )


def test_archives_of_archives_of_a_bomb_say_each_reason_once():
    """Four levels of four copies each around 200 MB of zeros (the new-user trial's file): refused in a
    sentence of at most a thousand characters naming the reason once, not once per leaf (it was 54 KB,
    and the page that showed it some 12,000 px tall)."""
    leaf = _zip({"zeros.bin": b"\0" * 200_000_000})
    level = leaf
    for depth in range(3):
        level = _zip({f"copy{i}-{depth}.zip": level for i in range(4)})
    with pytest.raises(EmptyDocument) as caught:
        read_document(level, "nested.zip")
    words = str(caught.value)
    assert len(words) <= 1_200, len(words)
    assert "a zip bomb?" in words and words.count("zip bomb") <= 5
    assert "(and 3 more for the same reason)" in words


def test_a_member_that_lies_about_its_size_is_cut_at_the_budget():
    """The directory says 1,000 bytes; the data inflates to 3 MB: zipfile stops at the declared size
    and the CRC fails, so the member is refused as damaged, never inflated past what it declares."""
    body = _noise(3_000_000, 4)
    archive = bytearray(_zip({"liar.txt": body, "fine.txt": b"The fine file FULMAR-1.\n"}))
    zf = zipfile.ZipFile(io.BytesIO(bytes(archive)))
    info = zf.getinfo("liar.txt")
    central = bytes(archive).index(b"PK\x01\x02")
    struct.pack_into("<I", archive, info.header_offset + 22, 1000)  # local header: uncompressed size
    struct.pack_into("<I", archive, central + 24, 1000)  # central directory: uncompressed size
    doc = read_document(bytes(archive), "liar.zip", max_bytes=2_000_000)
    assert "FULMAR-1" in doc.text
    assert any(w.startswith("liar.txt: not read: damaged") for w in doc.warnings)


# -- legacy member names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("encoding", "names"),
    [
        ("cp866", ["Отчёт за май.txt", "Протоколы/Совещание.txt"]),
        ("cp1251", ["Договор поставки.txt", "Счёт.txt"]),
        ("shift_jis", ["報告書.txt", "議事録/会議.txt"]),
        ("gbk", ["会议纪要.txt", "财务报表.txt"]),
        ("cp1252", ["Übersicht_Café.txt", "Größe.txt"]),
        ("cp437", ["Résumé.txt", "Übung.txt"]),
    ],
)
def test_legacy_member_names_are_recovered(encoding, names):
    files = {name: f"The file {i} says WREN-{i}.".encode() for i, name in enumerate(names)}
    archive = legacy_name_zip(files, encoding)
    mojibake = [i.filename for i in zipfile.ZipFile(io.BytesIO(archive)).infolist()]
    if encoding != "cp437":
        assert mojibake != names  # what zipfile alone shows
    doc = read_document(archive, "names.zip")
    assert headings(doc) == names
    for i, name in enumerate(names):
        assert f"File: {name}" in doc.text and section_of(doc, f"WREN-{i}").heading == name


def test_default_legacy_zip_is_russian_in_cp866():
    doc = read_document(legacy_name_zip(), "names.zip")
    assert section_of(doc, "WOMBAT-7").heading == "Отчёт за май.txt"
    assert section_of(doc, "GANNET-12").heading == "Протоколы/Совещание.txt"


def test_the_unicode_path_extra_field_wins_when_its_crc_matches():
    archive = legacy_name_zip(
        {"Rapport.txt": b"The report REDSHANK-2."}, "cp437", unicode_path={"Rapport.txt": "Rapport d'été.txt"}
    )
    assert headings(read_document(archive, "u.zip")) == ["Rapport d'été.txt"]


def test_a_legacy_name_with_path_traversal_is_still_refused():
    archive = legacy_name_zip({"../Отчёт.txt": b"escape", "ok.txt": b"The ok file DUNLIN-1."}, "cp866")
    doc = read_document(archive, "t.zip")
    assert "DUNLIN-1" in doc.text
    assert any(w.startswith("../Отчёт.txt: not read: a path leaving") for w in doc.warnings)


# -- TNEF -------------------------------------------------------------------------------------------


def test_winmail_dat_on_its_own_reads_body_and_attachments():
    data = tnef_file(
        attachments={
            "notes.txt": b"Replace the seal OSPREY-4.\n",
            "Quarterly report.pdf": pdf_bytes(["Flow MERLIN-4417 litres"]),
        }
    )
    assert detect_format(data, "winmail.dat") == "tnef"
    doc = read_document(data, "winmail.dat")
    assert doc.format == "tnef" and doc.title == "Pump report" and doc.warnings == []
    assert section_of(doc, "PELICAN-9").heading == "Pump report"
    assert section_of(doc, "OSPREY-4").heading == "Pump report > notes.txt"
    assert section_of(doc, "MERLIN-4417").heading == "Pump report > Quarterly report.pdf"
    assert "Attachment: Quarterly report.pdf" in doc.text


def test_winmail_dat_rtf_and_html_bodies_are_read():
    rtf = tnef_file(
        body=None,
        rtf_body=rb"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Arial;}}\f0 The RTF body says"
        rb" CORMORANT-8.\par}",
    )
    assert "The RTF body says CORMORANT-8." in read_document(rtf, "winmail.dat").text
    html = tnef_file(body=None, html_body="<html><body><h1>Status</h1><p>HTML body TERN-2</p></body></html>")
    doc = read_document(html, "winmail.dat")
    assert section_of(doc, "TERN-2").heading == "Pump report > Status"


def test_winmail_dat_embedded_message_is_read_as_a_message():
    inner = tnef_file(subject="Inner", body="Inner body SKUA-1", attachments={"a.txt": b"inner attachment AUK-2"})
    doc = read_document(tnef_file(subject="Outer", embedded=inner), "winmail.dat")
    assert section_of(doc, "SKUA-1").heading == "Outer > Inner"
    assert section_of(doc, "AUK-2").heading == "Outer > Inner > a.txt"


def test_winmail_dat_in_a_mail_is_unpacked_under_the_mail():
    doc = read_document(tnef_eml(), "mail.eml")
    assert doc.format == "eml" and doc.warnings == []
    assert "See the attachment." in doc.text and "PELICAN-9" in doc.text
    assert section_of(doc, "OSPREY-4").heading == "Pump report > notes.txt"
    assert "winmail.dat" not in " ".join(h or "" for h in headings(doc))


def test_hostile_winmail_dat_is_refused_in_words():
    bad = tnef_file()[:6] + tnef_attribute(1, ATT_MSG_PROPS, struct.pack("<I", 0xFFFFFFFF) + b"\0" * 8)
    with pytest.raises(
        UnsupportedFile,
        match=r"^damaged: a TNEF property list declares 4,294,967,295 properties"
        r" in 12 bytes$",
    ):
        read_document(bad, "winmail.dat")
    with pytest.raises(EmptyDocument, match=r"winmail\.dat"):
        read_document(tnef_file()[:40], "winmail.dat")
    # a recipient table declaring 4 billion rows is left out (the mail carries its recipients)
    doc = read_document(tnef_file(recipients=struct.pack("<I", 0xFFFFFFFF)), "winmail.dat")
    assert "PELICAN-9" in doc.text


# -- mail -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["base64", "quoted-printable", "Base64  ", " QUOTED-PRINTABLE "])
def test_encoded_message_rfc822_part_is_decoded_and_read_as_a_mail(encoding):
    doc = read_document(base64_rfc822_eml(encoding), "fwd.eml")
    assert section_of(doc, "HERON-12").heading == "Fwd: Inner KESTREL > Inner KESTREL"
    assert "The inner body HERON-12 says the café is closed." in doc.text
    assert "From: Grace Hopper <grace@example.org>" in doc.text
    assert "RnJvbT" not in doc.text and "=C3=A9" not in doc.text  # no raw base64 or quoted-printable
    assert section_of(doc, "PLOVER-5").heading == "Fwd: Inner KESTREL > note.txt"


# -- EPUB -------------------------------------------------------------------------------------------


def test_epub_spine_naming_missing_chapters_says_so_and_reads_the_rest():
    doc = read_document(epub_missing_chapter(), "birds.epub")
    assert "GROUSE-1" in doc.text and "PTARMIGAN-3" in doc.text
    assert doc.warnings == [
        "the reading order's item 2 (OEBPS/two.xhtml) is missing from the book: skipped",
        "the reading order's item 3 (ghost) is not in the book's manifest: skipped",
    ]
