"""E-mail readers (.eml, .mbox, Outlook .msg): bodies, alternatives, attachments, charsets."""

from __future__ import annotations

import base64
import io
from email.message import EmailMessage

import docx
import pytest

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest import read_document
from knowledge.ingest._mail import decode_payload
from tests.helpers.chat import pdf_bytes


def mail(subject: str = "Pump report", body: str | None = "The pump runs hot.") -> EmailMessage:
    m = EmailMessage()
    m["Subject"] = subject
    m["From"] = "Ada Lovelace <ada@example.org>"
    m["To"] = "Alan Turing <alan@example.org>"
    m["Cc"] = "grace@example.org"
    m["Date"] = "Tue, 06 Jun 2017 14:48:27 -0700"
    if body is not None:
        m.set_content(body)
    return m


def section_of(doc, needle: str):
    at = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= at < s.char_end)


def test_text_mail_has_subject_heading_header_block_and_attributes():
    doc = read_document(mail().as_bytes(), "report.eml")
    assert doc.format == "eml" and doc.title == "Pump report"
    assert "From: Ada Lovelace <ada@example.org>\nTo: Alan Turing <alan@example.org>" in doc.text
    assert "The pump runs hot." in doc.text
    assert section_of(doc, "The pump runs hot.").heading == "Pump report"
    assert doc.attributes == {
        "subject": "Pump report",
        "from": "Ada Lovelace <ada@example.org>",
        "to": "Alan Turing <alan@example.org>",
        "cc": "grace@example.org",
        "date": "2017-06-06T14:48:27-07:00",
    }


def test_alternative_keeps_the_html_body_only():
    m = mail(body="plain WOMBAT-PLAIN body")
    m.add_alternative("<html><body><h1>Status</h1><p>html WOMBAT-HTML body</p></body></html>", subtype="html")
    doc = read_document(m.as_bytes(), "a.eml")
    assert "WOMBAT-HTML" in doc.text and "WOMBAT-PLAIN" not in doc.text
    assert section_of(doc, "WOMBAT-HTML").heading == "Pump report > Status"


def test_pdf_and_docx_attachments_are_read_with_provenance():
    m = mail()
    m.add_attachment(
        pdf_bytes(["cover page", "Results: flow MERLIN-4417 litres"]),
        maintype="application",
        subtype="pdf",
        filename="report.pdf",
    )
    d = docx.Document()
    d.add_heading("Findings", 1)
    d.add_paragraph("The valve GANNET-77 leaks.")
    buf = io.BytesIO()
    d.save(buf)
    m.add_attachment(
        buf.getvalue(),
        maintype="application",
        subtype="vnd.openxmlformats-officedocument.wordprocessingml.document",
        filename="notes.docx",
    )
    doc = read_document(m.as_bytes(), "a.eml")
    pdf = section_of(doc, "MERLIN-4417")
    assert pdf.heading == "Pump report > report.pdf" and pdf.page == 2
    assert section_of(doc, "GANNET-77").heading == "Pump report > notes.docx > Findings"
    assert "Attachment: report.pdf" in doc.text and "The pump runs hot." in doc.text


def test_corrupt_attachment_is_reported_while_the_mail_indexes():
    m = mail()
    m.add_attachment(b"%PDF-1.7\n garbage that is no pdf", maintype="application", subtype="pdf", filename="broken.pdf")
    doc = read_document(m.as_bytes(), "a.eml")
    assert "The pump runs hot." in doc.text
    assert any(w.startswith("Pump report > broken.pdf: not read:") for w in doc.warnings), doc.warnings


def test_big5_body_and_encoded_word_subject_are_decoded():
    text = "會議記錄：水泵過熱"
    raw = (
        "Subject: =?big5?B?" + base64.b64encode("報告".encode("big5")).decode() + "?=\r\n"
        "From: a@example.org\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=big5\r\n"
        "Content-Transfer-Encoding: base64\r\n\r\n"
    ).encode() + base64.encodebytes(text.encode("big5"))
    doc = read_document(raw, "a.eml")
    assert text in doc.text and doc.title == "報告"


def test_wrong_or_unknown_charset_falls_back_without_a_crash():
    raw = (
        b"Subject: x\r\nContent-Type: text/plain; charset=x-no-such-charset\r\n"
        b"Content-Transfer-Encoding: quoted-printable\r\n\r\nGr=C3=BC=C3=9Fe aus K=C3=B6ln\r\n"
    )
    assert "Grüße aus Köln" in read_document(raw, "a.eml").text
    assert decode_payload("Köln".encode(), "iso-8859-1") == "Köln"  # UTF-8 labelled Latin-1


def test_nested_message_is_read_under_the_outer_subject():
    inner = mail("Inner note", "inner KESTREL-5 text")
    outer = mail()
    outer.add_attachment(inner)
    doc = read_document(outer.as_bytes(), "a.eml")
    assert section_of(doc, "KESTREL-5").heading == "Pump report > Inner note"


def test_inline_image_of_related_body_is_skipped():
    m = mail(body="plain")
    m.add_alternative('<p>see <img src="cid:logo1"> HERON-3</p>', subtype="html")
    html = m.get_payload()[1]
    html.add_related(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, maintype="image", subtype="png", cid="<logo1>")
    doc = read_document(m.as_bytes(), "a.eml")
    assert "HERON-3" in doc.text and not any("png" in w.lower() for w in doc.warnings), doc.warnings


def test_leading_envelope_line_is_tolerated():
    doc = read_document(b"From ada@example.org Mon Jun 01 10:00:00 2009\n" + mail().as_bytes(), "a.eml")
    assert doc.title == "Pump report" and "The pump runs hot." in doc.text


def test_mbox_of_two_messages_gives_two_sections():
    box = b"".join(
        b"From ada@example.org Mon Jun 01 10:00:00 2009\n" + mail(s, f"body of {s}").as_bytes() + b"\n"
        for s in ("First", "Second")
    )
    doc = read_document(box, "box.mbox")
    assert doc.format == "mbox"
    assert section_of(doc, "body of First").heading == "First"
    assert section_of(doc, "body of Second").heading == "Second"
    assert doc.attributes == {}


def test_mail_without_any_text_is_empty():
    with pytest.raises(EmptyDocument):
        read_document(b"MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\n\r\n", "a.eml")


def test_truncated_msg_is_refused_with_a_reason():
    with pytest.raises(UnsupportedFile, match="Outlook"):
        read_document(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "a.msg")
