"""RTF reader: documents written as RTF strings in the test."""

from __future__ import annotations

import pytest

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest import read_document

HEAD = (
    r"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0\fswiss\fcharset0 Arial;}{\f1\fnil\fcharset128 MS Mincho;}"
    r"{\f2\fnil\fcharset204 Arial Cyr;}}{\colortbl;\red0\green0\blue255;}"
    r"{\stylesheet{\s0 Normal;}{\s1\outlinelevel0 heading 1;}}"
    r"{\info{\title Quarterly notes}{\author Someone}{\keywords secretkw}}"
)


def rtf(body: str) -> bytes:
    return (HEAD + body + "}").encode("latin-1")


def read(body: str):
    return read_document(rtf(body), "doc.rtf")


def section_at(doc, needle: str):
    offset = doc.text.index(needle)
    return next(s for s in doc.sections if s.char_start <= offset < s.char_end)


def test_rtf_body_title_and_destinations_left_out():
    doc = read(
        r"\pard Hello \b bold\b0  world.\par {\*\generator Writer 1.0;}{\pict\pngblip 89504e47}"
        r"Second\tab line\line third\par"
    )
    assert doc.format == "rtf" and doc.title == "Quarterly notes"
    assert "Hello bold world." in doc.text
    assert "Second\tline\nthird" in doc.text
    for out in ("Arial", "Normal", "Someone", "secretkw", "Writer", "89504e47", "heading 1"):
        assert out not in doc.text
    assert "1 picture not read" in doc.warnings


def test_rtf_code_pages_hex_escapes_and_cp932_double_bytes():
    doc = read(r"ESP\'cdRITO {\f1 \'82\'b1\'82\'f1\'82\'c9\'82\'bf\'82\'cd}{\f2 \'d3\'e2\'e0\'e6\'e0\'e5\'ec\'fb\'e9}\par")
    assert "ESPÍRITO" in doc.text
    assert "こんにちは" in doc.text
    assert "Уважаемый" in doc.text


def test_rtf_unicode_fallback_is_skipped_and_surrogate_pairs_combine():
    doc = read(r"\uc1\u24180?x {\uc2\u24180\'94\'4ey} \u48 0 z \u-10240?\u-8398?\par")
    assert "年x 年y 0 z" in doc.text
    assert "年年" not in doc.text and "?" not in doc.text
    assert "\U00010332" in doc.text  # GOTHIC LETTER GIBA from \u55296 \u57138


def test_rtf_tables_cells_separated_and_rows_as_lines():
    row = r"\trowd\cellx1000\cellx2000\pard\intbl {}\cell {}\cell\row"
    doc = read(row.format("Name", "Role") + row.format("Ada", "Engineer") + r"\pard After\par")
    assert "Name\tRole\nAda\tEngineer" in doc.text
    assert doc.text.index("Engineer") < doc.text.index("After")


def test_rtf_headers_footers_once_footnotes_annotations_fields_text_boxes():
    body = (
        r"{\header \pard Page header\par}{\headerf \pard Page header\par}{\footer \pard Page footer\par}"
        r"\pard Claim{\super\chftn{\footnote\pard {\super\chftn} Source of the claim.}} stands.\par"
        r"\pard super{\*\atrfstart 1}cali{\*\atrfend 1}{\*\atnid ATB}{\*\atnauthor Allison, T.}\chatn"
        r"{\*\annotation{\*\atnref 1}\pard This is a comment}fragilistic\par"
        r'{\field{\*\fldinst HYPERLINK "http://example.com/"}{\fldrslt frequently asked questions}}\par'
        r"{\shp{\*\shpinst{\sp{\sn shapeType}{\sv 202}}{\shptxt \pard Boxed text\par}}"
        r"{\shprslt{\*\do\dobxcolumn{\dptxbxtext \pard Boxed text\par}}}}\par"
        r"{\v hidden words}visible\~text opt\-ional\par"
    )
    doc = read(body)
    text = doc.text
    assert text.count("Page header") == 1 and text.count("Page footer") == 1
    assert text.index("Page header") < text.index("Claim") < text.index("Page footer")
    assert "Claim[1] stands." in text and "[1] Source of the claim." in text
    assert " ".join(text.split()).count("supercali ATB Allison, T. This is a comment fragilistic") == 1
    assert "frequently asked questions" in text and "example.com" not in text
    assert text.count("Boxed text") == 1
    assert "hidden words" not in text and "visible\u00a0text optional" in text


def test_rtf_outline_levels_give_headings():
    doc = read(r"\pard\s1\outlinelevel0 Results\par\pard Body of results.\par\pard\s1 Outlook\par\pard Later.\par")
    assert section_at(doc, "Body of results").heading == "Results"
    assert section_at(doc, "Later.").heading == "Outlook"  # the style named "heading 1"


def test_rtf_escaped_braces_and_bin_data():
    doc = read(r"\pard \{ inside braces \} {\*\objdata \bin4 }}}}}after\par")
    assert "{ inside braces }" in doc.text and "after" in doc.text


def test_bad_rtf_input_reads_or_fails_cleanly():
    unbalanced = read_document((HEAD + r"\pard Open {\b group never closed\par").encode(), "cut.rtf")
    assert "group never closed" in unbalanced.text
    assert any("truncated" in w for w in unbalanced.warnings)
    extra = read_document((HEAD + r"\pard Too many}}} closers\par}").encode(), "x.rtf")
    assert "Too many" in extra.text
    with pytest.raises(EmptyDocument):
        read_document(b"", "empty.rtf")
    with pytest.raises(EmptyDocument, match="no text"):
        read_document(rtf(r"\pard \par"), "blank.rtf")
    with pytest.raises(UnsupportedFile, match="not an RTF"):
        from knowledge.ingest._rtf import read_rtf

        read_rtf(b"plain text, not rtf")
    assert read_document(rtf(r"\pard Letter text\par"), "letter.doc").format == "rtf"  # the bytes decide
