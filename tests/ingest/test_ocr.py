"""OCR (knowledge.ingest._ocr): scans and images become searchable, offline, with provenance.

Every input is rendered here with Pillow (its built-in font, so no system font is needed): known
text with a unique token, as PNG / JPEG / TIFF / WebP / BMP, as a one-page PDF without a text layer,
and as the image second page of a PDF whose first page has a text layer. The engine is the real one
(rapidocr-onnxruntime); the tests that OCR several pages are marked slow.
"""

from __future__ import annotations

import builtins
import io
import socket
import sys

import numpy as np
import pytest
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import EmptyDocument, OcrUnavailable, UnsupportedFile
from knowledge.ingest import _ocr, read_document
from knowledge.ingest._ocr import OcrLine, OcrPage, layout, ocr_warnings, recover_spaces
from knowledge.outcomes import Outcome
from knowledge.service.jobs import FileProgress
from knowledge.service.templates import make_template
from knowledge.workbench import Workbench

TRAP = "Invoice total: 1,234.56 EUR due on 12 March 2026."


def render(lines: list[str], size: int = 28, width: int = 1240, word_gap: float = 1.0) -> Image.Image:
    """Black text on white, Pillow's built-in font (Aileron: its space is 0.2 em, narrower than
    Helvetica's 0.28); ``word_gap`` scales the space between words."""
    font = ImageFont.load_default(size=size)
    img = Image.new("RGB", (width, max(200, 80 + len(lines) * size * 2)), "white")
    draw = ImageDraw.Draw(img)
    space = font.getlength(" ") * word_gap
    for i, line in enumerate(lines):
        x, y = 40.0, 40 + i * size * 2
        for word in line.split(" "):
            draw.text((x, y), word, fill="black", font=font)
            x += font.getlength(word) + space
    return img


def encoded(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def scanned_pdf(img: Image.Image) -> bytes:
    """A one-page PDF holding only the image: no text layer."""
    return encoded(img, "PDF", resolution=150)


def mixed_pdf(first_page_text: str, second_page: Image.Image) -> bytes:
    """Page 1 with a text layer, page 2 an image only."""
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(w=0, text=first_page_text)
    pdf.add_page()
    pdf.image(second_page, x=10, y=20, w=190)
    return bytes(pdf.output())


def words(text: str) -> list[str]:
    return text.split()


@pytest.fixture
def wb(tmp_path):
    w = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    yield w
    w.close()


@pytest.fixture
def fresh_engine(monkeypatch):
    """The engine loaded anew inside the test (and the process's one restored after)."""
    monkeypatch.setattr(_ocr, "_ENGINE", None)


# -- fast: the default loop -------------------------------------------------------------------------


@pytest.mark.slow
def test_png_is_read_by_ocr_with_page_span_and_confidence():
    doc = read_document(
        encoded(render(["Lighthouse keeper log", "Token QUOKKA7731 marks this scan."], width=560), "PNG"), "scan.png"
    )
    assert doc.format == "image" and doc.pages == 1
    assert "QUOKKA7731" in doc.text and "Lighthouse keeper log" in doc.text
    assert [(s.char_start, s.char_end, s.page) for s in doc.sections] == [(0, len(doc.text), 1)]
    assert len(doc.warnings) == 1 and doc.warnings[0].startswith("Read by OCR, confidence 0.")
    assert float(doc.warnings[0].rsplit(" ", 1)[1]) >= 0.9


def test_spaces_are_recovered_where_the_model_hesitated_and_the_ink_has_a_gap():
    """The trap line with its spaces taken out, and one box per character where Pillow drew it: at
    the font's own spacing and at 80 % of it (narrower than any letter gap is not, so the model's
    space probability between the words decides: 0.05 there, 0 inside the words)."""
    font = ImageFont.load_default(size=24)
    for gap in (1.0, 0.8):
        img = Image.new("L", (900, 80), 255)
        draw = ImageDraw.Draw(img)
        chars, boxes, probs, x = [], [], [], 20.0
        for word in TRAP.split(" "):
            for k, ch in enumerate(word):
                w = font.getlength(ch)
                chars.append(ch)
                probs.append(0.05 if k == 0 and chars[:-1] else 0.0)
                boxes.append([[x, 20], [x + w, 20], [x + w, 50], [x, 50]])
                draw.text((x, 20), ch, fill=0, font=font)
                x += w
            x += font.getlength(" ") * gap
        quad = np.array([[15, 12], [x + 5, 12], [x + 5, 60], [15, 60]], dtype=np.float32)
        text = "".join(chars)
        assert recover_spaces(np.asarray(img), quad, text, boxes, chars, probs) == TRAP, gap
        # without the model's word: these narrow spaces are no wider than a gap between letters
        assert recover_spaces(np.asarray(img), quad, text, boxes, chars) != TRAP, gap


def test_recover_spaces_leaves_what_it_cannot_judge():
    gray = np.full((40, 200), 255, np.uint8)
    quad = np.array([[0, 0], [200, 0], [200, 40], [0, 40]], dtype=np.float32)
    box = [[0, 0], [10, 0], [10, 40], [0, 40]]
    assert recover_spaces(gray, quad, "ab", [box, box], ["a", "b"]) == "ab"  # no contrast
    assert recover_spaces(gray, quad, "你好", [box, box], ["你", "好"]) == "你好"  # no spaces in CJK
    assert recover_spaces(gray, quad, "abc", [box], ["a"]) == "abc"  # boxes do not match the text


def test_low_confidence_lines_are_kept_and_named_in_the_warnings():
    sure = OcrLine("The harbour opens at dawn", 0.97, (10, 10, 400, 40))
    unsure = OcrLine("Smudged l1ne", 0.42, (10, 60, 200, 90))
    page = OcrPage(layout([sure, unsure]), [sure, unsure])
    assert page.text == "The harbour opens at dawn\nSmudged l1ne"  # kept, in reading order
    warnings = ocr_warnings({2: page, 3: OcrPage("x", [sure]), 5: OcrPage("", [])})
    mean = (25 * 0.97 + 12 * 0.42 + 25 * 0.97) / 62
    assert warnings[0] == f"pages 2-3 read by OCR, confidence {mean:.2f}"
    assert warnings[1] == (
        '1 line read by OCR with low confidence (under 0.80, kept; check them): p. 2: "Smudged l1ne" (0.42)'
    )


def test_layout_joins_a_row_and_separates_paragraphs():
    a = OcrLine("Total:", 0.9, (10, 100, 80, 130))
    b = OcrLine("42 EUR", 0.9, (300, 102, 380, 131))  # same row, detected as its own box
    c = OcrLine("next line", 0.9, (10, 135, 120, 165))
    d = OcrLine("new paragraph", 0.9, (10, 260, 160, 290))
    assert layout([d, c, b, a]) == "Total: 42 EUR\nnext line\n\nnew paragraph"


def test_ocr_off_keeps_the_old_report_and_refuses_images():
    png = encoded(render(["Nothing to see"]), "PNG")
    with pytest.raises(UnsupportedFile, match="OCR is off"):
        read_document(png, "a.png", ocr="off")
    with pytest.raises(EmptyDocument, match=r"no text layer \(scanned\? OCR needed\)"):
        read_document(scanned_pdf(render(["Nothing to see"])), "a.pdf", ocr="off")


def test_damaged_image_and_gif_are_clear_failures():
    with pytest.raises(UnsupportedFile, match="unreadable PNG image"):
        read_document(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "broken.png")
    with pytest.raises(UnsupportedFile, match="GIF image"):
        read_document(encoded(render(["x"]), "GIF"), "a.gif")


def test_missing_ocr_package_fails_only_the_files_that_need_it(monkeypatch, fresh_engine):
    real_import = builtins.__import__

    def no_rapidocr(name, *args, **kwargs):
        if name.startswith("rapidocr_onnxruntime"):
            raise ImportError("No module named 'rapidocr_onnxruntime'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "rapidocr_onnxruntime", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_rapidocr)
    with pytest.raises(OcrUnavailable, match="rapidocr-onnxruntime") as exc:
        read_document(encoded(render(["Token"]), "PNG"), "a.png")
    assert isinstance(exc.value, UnsupportedFile)
    with pytest.raises(OcrUnavailable, match="pip install rapidocr-onnxruntime"):
        read_document(scanned_pdf(render(["Token"])), "scan.pdf")
    # a mixed PDF keeps its text page and says why the other was not read
    doc = read_document(mixed_pdf("Otters hold hands while they sleep.", render(["Token"])), "mixed.pdf")
    assert "Otters" in doc.text and [s.page for s in doc.sections] == [1]
    assert any("page 2 could not be read by OCR" in w and "rapidocr-onnxruntime" in w for w in doc.warnings)
    assert read_document(b"plain text still works", "a.txt").text == "plain text still works"


@pytest.mark.slow
def test_no_network_is_needed(monkeypatch, fresh_engine):
    """The engine loads its models from the wheel: any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"OCR tried to open a network connection: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    doc = read_document(encoded(render(["Offline NETLESS42"], width=500), "PNG"), "a.png")
    assert "NETLESS42" in doc.text


def test_file_progress_gives_time_left_for_ocr_pages():
    fp = FileProgress("scan.pdf")
    fp.update("reading", 0.0, now=100.0)
    fp.update("OCR, page 1 of 4", 0.0, now=100.0)
    fp.update("OCR, page 2 of 4", 0.85 / 4, now=103.0)  # one page in 3 s
    assert fp.stage == "OCR, page 2 of 4"
    assert fp.eta_seconds(now=103.0) == pytest.approx(9.0)  # three pages left
    fp.update("OCR, page 3 of 4", 0.85 / 2, now=106.0)
    assert fp.eta_seconds(now=106.0) == pytest.approx(6.0)


# -- slow: several OCR calls each --------------------------------------------------------------------


@pytest.mark.slow
def test_the_trap_line_keeps_its_words_at_several_sizes_and_narrow_spacing():
    expected = words(TRAP)
    for size, gap in ((28, 1.0), (22, 1.0), (15, 1.0), (30, 0.8), (22, 0.8)):
        doc = read_document(encoded(render([TRAP], size=size, word_gap=gap), "PNG"), "trap.png")
        got = words(doc.text)
        assert len(got) == len(expected), (size, gap, doc.text)
        # the model may misread a letter ("0n" for "on"); the words themselves must be words
        assert sum(g == e for g, e in zip(got, expected)) >= len(expected) - 1, (size, gap, doc.text)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["JPEG", "TIFF", "WEBP", "BMP"])
def test_every_image_format_is_read(fmt):
    doc = read_document(encoded(render([f"Format token ZEBRA{fmt}"]), fmt), f"scan.{fmt.lower()}")
    assert f"ZEBRA{fmt}" in doc.text.replace(" ", "").upper()


@pytest.mark.slow
def test_multi_page_tiff_gives_a_page_per_frame():
    one, two = render(["First frame ALPHA1"]), render(["Second frame BRAVO2"])
    buf = io.BytesIO()
    one.save(buf, "TIFF", save_all=True, append_images=[two])
    doc = read_document(buf.getvalue(), "fax.tiff")
    assert doc.pages == 2
    page_of = {s.page: doc.text[s.char_start : s.char_end] for s in doc.sections}
    assert "ALPHA1" in page_of[1] and "BRAVO2" in page_of[2]
    assert doc.warnings[0].startswith("pages 1-2 read by OCR, confidence ")


@pytest.mark.slow
def test_a_page_scanned_upside_down_is_read():
    img = render(["Upside down token KESTREL55", "The second line reads fine as well."]).rotate(180)
    assert "KESTREL55" in read_document(encoded(img, "PNG"), "turned.png").text


@pytest.mark.slow
def test_scanned_and_mixed_pdfs_are_searchable_on_the_right_page(wb):
    stages: list[tuple[str, float]] = []
    scan = scanned_pdf(render(["Quarterly report", "Unique token PANGOLIN8841 is on this scan."]))
    mixed = mixed_pdf("Otters hold hands while they sleep.", render(["Second page token WOMBAT4412 from a scan."]))
    r1 = wb.ingest_file("scans", scan, "scan.pdf", progress=lambda s, f: stages.append((s, f)))
    r2 = wb.ingest_file("scans", mixed, "mixed.pdf")
    assert r1.outcome == Outcome.INDEXED and r2.outcome == Outcome.INDEXED, (r1.message, r2.message)
    assert r1.pages == 1 and r1.warnings[0].startswith("page 1 read by OCR, confidence ")
    assert r2.pages == 2 and r2.warnings[0].startswith("page 2 read by OCR, confidence ")
    assert ("OCR, page 1 of 1", 0.0) in stages and ("OCR, page 1 of 1", 0.85) in stages
    fractions = [f for _, f in stages]
    assert fractions == sorted(fractions)  # the bar never goes back
    for token, name, page in (("PANGOLIN8841", "scan.pdf", 1), ("WOMBAT4412", "mixed.pdf", 2)):
        for mode in ("lexical", "hybrid"):
            hits = wb.search("scans", token, k=3, mode=mode)
            assert hits and hits[0].file_name == name and hits[0].page == page, (token, mode, hits)
            assert token in hits[0].text
    otters = wb.search("scans", "otters sleep", k=1, mode="lexical")[0]
    assert otters.file_name == "mixed.pdf" and otters.page == 1


@pytest.mark.slow
def test_ocr_off_in_the_settings_or_the_template(tmp_path):
    png = encoded(render(["Token MARMOT9 in a photo"]), "PNG")
    off = Workbench(
        load_settings(data_dir=tmp_path / "off", ingest={"ocr": "off"}), embedder_factory=lambda m: HashEmbedder(64, 256)
    )
    try:
        r = off.ingest_file("s", png, "photo.png")
        assert r.outcome == Outcome.FAILED and "OCR is off" in r.message
        # a template may turn it back on
        off.save_template(make_template(name="scans", embedding_model=off.settings.embeddings.model, ocr="auto"))
        assert off.ingest_file("t", png, "photo.png", template="scans").outcome == Outcome.INDEXED
        assert off.search("t", "MARMOT9", k=1, mode="lexical")[0].file_name == "photo.png"
    finally:
        off.close()
    on = Workbench(load_settings(data_dir=tmp_path / "on"), embedder_factory=lambda m: HashEmbedder(64, 256))
    try:
        on.save_template(make_template(name="no-ocr", embedding_model=on.settings.embeddings.model, ocr="off"))
        r = on.ingest_file("u", scanned_pdf(render(["Token"])), "scan.pdf", template="no-ocr")
        assert r.outcome == Outcome.FAILED and "scanned? OCR needed" in r.message
    finally:
        on.close()


@pytest.mark.slow
def test_cli_prints_ocr_progress_per_page(tmp_path, capsys, monkeypatch):
    from knowledge.cli import main

    scan = tmp_path / "scan.pdf"
    img = render(["Command line token LYNX303"])
    buf = io.BytesIO()
    img.save(buf, "PDF", resolution=150, save_all=True, append_images=[render(["Page two token OCELOT7"])])
    scan.write_bytes(buf.getvalue())
    monkeypatch.setattr("knowledge.workbench.Workbench.embedder", lambda self, model: HashEmbedder(64, 256))
    code = main(["--data-dir", str(tmp_path / "data"), "ingest", "cli", str(scan)])
    out = capsys.readouterr()
    assert code == 0, out
    assert "scan.pdf: OCR, page 1 of 2" in out.err and "scan.pdf: OCR, page 2 of 2" in out.err
    assert "pages 1-2 read by OCR" in out.out


@pytest.mark.slow
def test_an_image_attached_in_chat_is_ocrd_for_retrieval_and_still_a_part(tmp_path):
    from knowledge.chat import Chats
    from knowledge.chat.model import IMAGE, USER
    from knowledge.system import System

    system = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))

    wb = Workbench(system)
    try:
        chat = Chats(system).service(wb)
        s = chat.create_session()
        img = chat.attach(s.id, encoded(render(["Whiteboard token NARWHAL606 from the meeting"]), "PNG"), "board.png")
        assert img.kind == "image"
        session = chat.session(s.id)
        assert "vector_search" in session.tools and "view_attachment" in session.tools
        assert chat.knowledge(s.id).attachments  # the session's searches include the OCR'd image
        hit = wb.search(session.store, "NARWHAL606", k=1, mode="lexical")[0]
        assert hit.file_name == "board.png" and hit.page == 1 and "NARWHAL606" in hit.text
        result = chat.tools.call("vector_search", {"store": session.store, "query": "NARWHAL606 meeting"})
        assert result.ok and result.data["hits"][0]["file_name"] == "board.png"
        chat.send(s.id, "what does the board say?")
        stored = next(m for m in chat.messages(s.id) if m.role == USER)
        assert [(p.kind, p.name) for p in stored.parts][-1] == (IMAGE, "board.png")  # still goes to the model
        # a picture without words is attached as before, not indexed
        chat.attach(s.id, encoded(Image.new("RGB", (64, 48), (200, 30, 30)), "PNG"), "red.png")
        assert [f.file_name for f in wb.store_files(session.store)] == ["board.png"]
        chat.remove(s.id, img.file_id)
        assert wb.store_files(session.store) == []
    finally:
        system.close()


@pytest.mark.slow
def test_a_phone_photo_and_a_page_scan_are_read_one_after_the_other_in_a_bounded_child_at_the_defaults():
    """OCR is the heaviest reading there is (a 12-megapixel photo peaks near 2.6 GB, most of it the
    text detector's activations): the default memory limit has to hold it, in a child kept from the
    file before, so a scan or a photo is never refused at the default settings."""
    from knowledge.ingest.isolated import ReaderPool, ReadLimits

    photo = Image.new("RGB", (4000, 3000), "white")
    draw = ImageDraw.Draw(photo)
    font = ImageFont.load_default(size=60)
    for i in range(30):
        draw.text((150, 100 + i * 90), f"Row {i} of the whiteboard photo with token HERON{i:02d}77", fill="black", font=font)
    pool = ReaderPool(1)
    try:
        first = pool.read(encoded(photo, "JPEG", quality=90), "whiteboard.jpg", limits=ReadLimits())
        second = pool.read(
            scanned_pdf(render([f"Scanned line {i} with token IBIS{i:02d}" for i in range(40)])),
            "scan.pdf",
            limits=ReadLimits(),
        )
    finally:
        pool.close()
    assert sum(f"HERON{i:02d}77" in first.document.text.replace(" ", "") for i in range(30)) >= 27
    assert sum(f"IBIS{i:02d}" in second.document.text.replace(" ", "") for i in range(40)) >= 36
    assert first.peak_rss > ReadLimits(memory_mb=1024).memory_mb * 2**20  # it really needs more than the old 1 GB
