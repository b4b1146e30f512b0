"""A PDF table's page and box in the provenance (issue 43, item 2): every chunk whose span lies in
the table carries the table's box (``TextChunk.table_bbox``), through the reader's child process,
into the stored payload and out on the hits, and through an export and import; chunks of prose
carry none. A search for a row's cells finds the row, under its header."""

from __future__ import annotations

import pytest

from knowledge.config import IngestSettings, load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest import read_document
from knowledge.ingest.chunker import chunk_document
from knowledge.ingest.isolated import (
    Chunking,
    ReadLimits,
    _chunks,
    _document,
    chunks_message,
    document_message,
    read_bounded,
)
from knowledge.outcomes import Outcome
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.pdf_tables import HEADER, ROWS, ruled_table_pdf

# fpdf2 draws the 130 mm table centred on an A4 page (210 mm) below two lines of text: from 40 mm to
# 170 mm across (113.4 to 481.9 points); its box is measured from the ruling, so within a point or two.
LEFT, RIGHT = 40 * 72 / 25.4, 170 * 72 / 25.4


@pytest.fixture(scope="module")
def data() -> bytes:
    return ruled_table_pdf()


@pytest.fixture
def system(tmp_path):
    settings = load_settings(data_dir=tmp_path / "data")
    s = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    yield s
    s.close()


def test_the_reader_records_the_table_with_its_page_and_box(data):
    doc = read_document(data, "figures.pdf")
    [table] = doc.tables
    assert table.page == 1 and table.bbox is not None
    x0, top, x1, bottom = table.bbox
    assert abs(x0 - LEFT) < 3 and abs(x1 - RIGHT) < 3
    assert 40 < top < bottom < 250  # near the top of the page, five rows of 8 mm (113 points) tall
    assert 100 < bottom - top < 130


@pytest.mark.parametrize("size", [40, 60, 250])
def test_every_chunk_in_the_table_carries_its_box_and_prose_chunks_none(data, size):
    doc = read_document(data, "figures.pdf")
    [table] = doc.tables
    chunks = chunk_document(doc, HashEmbedder(max_tokens=256), size, 8).chunks
    for c in chunks:
        overlaps = c.char_start < table.char_end and table.char_start < c.char_end
        assert c.table_bbox == (table.bbox if overlaps else None), (c.index, c.char_start, c.char_end)
    assert any(c.page == 2 and c.table_bbox is None for c in chunks)
    if size == 60:  # a chunk starting below the header repeats it, and still says where the table is
        repeated = [c for c in chunks if c.table_header]
        assert repeated and all(c.table_bbox == table.bbox for c in repeated)


def test_a_chunk_over_two_tables_of_a_page_carries_the_box_around_both():
    from knowledge.ingest.document import Document, Section, Table

    text = "| a | b |\n| --- | --- |\n| 1 | 2 |\n\n| c | d |\n| --- | --- |\n| 3 | 4 |"
    second = text.index("| c")
    doc = Document(
        text,
        [Section(0, len(text), 1, None)],
        "pdf",
        pages=1,
        tables=[
            Table(0, 23, second - 2, 1, (100.0, 50.0, 300.0, 120.0)),
            Table(second, second + 23, len(text), 1, (80.0, 150.0, 280.0, 200.0)),
        ],
    )
    [chunk] = chunk_document(doc, HashEmbedder(max_tokens=256), 200, 20).chunks
    assert chunk.table_bbox == (80.0, 50.0, 300.0, 200.0)


def test_the_box_crosses_the_reader_process(data):
    doc = read_document(data, "figures.pdf")
    result = chunk_document(doc, HashEmbedder(max_tokens=256), 60, 8)
    # the messages between the child and the parent keep the page and the box (JSON: lists)
    assert _document(document_message(doc)) == doc
    assert _chunks(chunks_message(result, doc.text), doc.text).chunks == result.chunks
    ingest = IngestSettings()
    read = read_bounded(
        data,
        "figures.pdf",
        processes=1,
        limits=ReadLimits.from_settings(ingest),
        chunking=Chunking(HashEmbedder(max_tokens=256), 60, 8),
    )
    assert read.document.tables == doc.tables and isinstance(read.document.tables[0].bbox, tuple)
    assert read.chunks is not None and read.chunks.chunks == result.chunks


def test_the_box_is_in_the_payload_of_the_hits_and_survives_an_export_and_import(system, data, tmp_path):
    wb = Workbench(system)
    r = wb.ingest_file("figures", data, "figures.pdf")
    assert r.outcome == Outcome.INDEXED, r.message
    [table] = read_document(data, "figures.pdf").tables
    name, year, revenue, _ = ROWS[2]
    for mode in ("lexical", "hybrid"):
        hit = wb.search("figures", f"{name} {revenue}", k=1, mode=mode)[0]
        # the row is found with its header, and the hit says where the table is on its page
        assert f"| {name} | {year} | {revenue} |" in hit.text and " | ".join(HEADER) in hit.text, mode
        assert hit.page == 1 and hit.metadata["table_bbox"] == list(table.bbox)
    prose = wb.search("figures", "cooperative met on a Tuesday", k=1, mode="lexical")[0]
    assert prose.page == 2 and "table_bbox" not in prose.metadata

    bundle = wb.portable.export_store("figures", tmp_path / "figures.kb").path
    wb.portable.import_bundle(bundle, as_name="copy")
    hit = wb.search("copy", f"{name} {revenue}", k=1, mode="lexical")[0]
    assert hit.metadata["table_bbox"] == list(table.bbox)


def test_the_setting_off_ingests_the_pdf_as_text_only(tmp_path, data):
    """``ingest.pdf_tables = "off"`` reaches the reader's child: the chunks hold the table's words as
    text, no Markdown row and no box."""
    settings = load_settings(data_dir=tmp_path / "data", ingest={"pdf_tables": "off"})
    s = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    try:
        wb = Workbench(s)
        r = wb.ingest_file("figures", data, "figures.pdf")
        assert r.outcome == Outcome.INDEXED
        hits = wb.search("figures", "South 2019 988", k=5, mode="lexical")
        assert hits and all("| South |" not in h.text and "table_bbox" not in h.metadata for h in hits)
        assert any("South" in h.text for h in hits)
    finally:
        s.close()
