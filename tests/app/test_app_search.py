"""The Search playground page, headless (streamlit.testing.v1.AppTest)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from fpdf import FPDF
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.workbench import Workbench
from tests.helpers.app import fresh_caches, open_app
from tests.helpers.app import page_text as texts
from tests.helpers.env import prepared_data, use_prepared_data

PAGES = [
    "Pasta is cooked in plenty of salted boiling water until it is al dente. Drain the spaghetti, "
    "keep a cup of the cooking water, and toss it with the sauce in the pan.",
    "A telescope gathers light from distant planets and galaxies. The mirror of a reflecting "
    "telescope focuses starlight; astronomers observe Jupiter's moons on clear nights.",
]


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


def search_page() -> AppTest:
    return open_app("pages/search.py", timeout=120)


def two_page_pdf(path: Path) -> Path:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in PAGES:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))
    return path


def _populate(work: Path) -> None:
    wb = Workbench(load_settings())
    try:
        assert wb.ingest_file("guides", two_page_pdf(work / "kitchen-and-sky.pdf")).ok
        md = work / "notes.md"
        md.write_text(
            "# Sky notes\n\nSaturn's rings shine through a small telescope.\n\n"
            "# Kitchen notes\n\nSalt the pasta water generously.\n"
        )
        assert wb.ingest_file("notes", md).ok
    finally:
        wb.close()


@pytest.fixture(scope="module")
def _populated_once(tmp_path_factory) -> Path:
    return prepared_data(tmp_path_factory, "populated", _populate)


@pytest.fixture
def populated(_populated_once) -> Path:
    """Store "guides" holds a two-page PDF; store "notes" a Markdown file (embedded once per module
    with the real model; each test gets its own copy of the data folder)."""
    return use_prepared_data(_populated_once)


def test_empty_data_dir_shows_a_hint_not_a_form():
    at = search_page()
    assert at.title[0].value.endswith("Search playground")
    assert any("Vector stores" in i.value and "create a store" in i.value for i in at.info)
    assert not at.text_input


@pytest.mark.model
@pytest.mark.slow
def test_a_query_shows_hits_with_file_page_and_highlight(populated):
    at = search_page()
    assert at.selectbox(key="pg_store").options == ["guides", "notes"]
    assert any("Type a query" in i.value for i in at.info)
    at.text_input(key="pg_query").input("telescope planets").run()
    assert not at.exception and not at.error
    shown = texts(at)
    assert "**1.** kitchen-and-sky.pdf · page 2" in shown
    assert "<mark>telescope</mark>" in shown
    assert "result in" in shown and "ms" in shown and "Order: rank score (semantic and keyword rankings merged)" in shown
    assert at.expander and any(e.label == "Full chunk" for e in at.expander)
    assert len(at.get("progress")) >= 1
    charts = at.get("vega_lite_chart")
    assert len(charts) == 2  # the map and the score distribution
    at.toggle(key="pg_map").set_value(False).run()
    assert not at.exception and len(at.get("vega_lite_chart")) == 1


@pytest.mark.model
@pytest.mark.slow
def test_threshold_and_filters(populated):
    at = search_page()
    assert at.number_input(key="pg_threshold").value == 0.3  # the setting search.score_threshold
    at.text_input(key="pg_query").input("telescope planets").run()
    assert len(at.get("progress")) == 1  # the kitchen page is no good match for it
    at.number_input(key="pg_threshold").set_value(-1.0).run()
    hits = len(at.get("progress"))
    assert hits == 2  # the two pages
    at.number_input(key="pg_threshold").set_value(0.99).run()
    assert not at.exception  # hybrid ranking: the page holding the query's words stays, whatever its similarity
    assert len(at.get("progress")) == 1
    at.selectbox(key="pg_mode").select("vector").run()  # semantic only: the threshold decides
    assert len(at.get("progress")) == 0
    assert any("matched this query well" in w.value and "0.99" in w.value for w in at.warning)
    at.selectbox(key="pg_mode").select("hybrid").run()
    at.number_input(key="pg_threshold").set_value(-1.0).run()
    at.text_area(key="pg_fields").input("page = 1").run()
    assert not at.exception
    assert len(at.get("progress")) == 1
    assert "kitchen-and-sky.pdf · page 1" in texts(at)
    at.text_area(key="pg_fields").input("pgae = 2").run()  # a mistyped field: the filter, not the store, is empty
    assert not at.exception and len(at.get("progress")) == 0
    assert any("matches the filters" in w.value and "pgae" in w.value for w in at.warning)
    assert not any("no chunks yet" in i.value for i in at.info)
    at.text_area(key="pg_fields").input("page 1").run()
    assert not at.exception
    assert "field = value" in at.error[0].value


@pytest.mark.model
@pytest.mark.slow
def test_compare_view_runs_the_query_on_two_stores(populated):
    at = search_page()
    at.text_input(key="pg_query").input("telescope").run()
    at.selectbox(key="pg_compare").select("notes").run()
    assert not at.exception and not at.error
    assert [s.value for s in at.subheader] == ["guides", "notes"]
    shown = texts(at)
    assert "kitchen-and-sky.pdf · page 2" in shown and "notes.md" in shown and "Sky notes" in shown


@pytest.mark.model
@pytest.mark.slow
def test_the_last_query_survives_navigating_away(populated):
    at = search_page()
    at.text_input(key="pg_query").input("telescope").run()
    at.switch_page("pages/home.py").run()
    assert not at.exception
    at.switch_page("pages/search.py").run()
    assert not at.exception
    assert at.text_input(key="pg_query").value == "telescope"
    assert "kitchen-and-sky.pdf · page 2" in texts(at)


@pytest.mark.model
@pytest.mark.slow
def test_the_ranking_box_switches_between_hybrid_vector_and_words(populated):
    at = search_page()
    assert at.selectbox(key="pg_mode").value == "hybrid"  # the setting search.mode
    at.text_input(key="pg_query").input("Jupiter moons").run()
    shown = texts(at)
    assert "semantic and keyword rankings merged" in shown
    assert "rank score" in " ".join(p.proto.text for p in at.get("progress"))
    at.selectbox(key="pg_mode").select("lexical").run()
    assert not at.exception and not at.error
    assert "Order: keyword score (keyword)." in texts(at)
    assert len(at.get("progress")) == 1  # one chunk (page 2) contains the words
    assert "kitchen-and-sky.pdf · page 2" in texts(at)
    at.text_input(key="pg_query").input("zzqxv").run()  # no chunk holds the word: not "no chunks yet"
    said = " ".join(i.value for i in at.info)
    assert "holds a word of this query" in said and "no chunks yet" not in said
    at.text_input(key="pg_query").input("Jupiter moons").run()
    at.selectbox(key="pg_mode").select("vector").run()
    assert "Order: similarity (semantic)." in texts(at)
    assert "rank score" not in " ".join(p.proto.text for p in at.get("progress"))


def _overlap(work: Path) -> None:
    body = "\n\n".join(
        f"The telescope chapter, part {i}: a reflecting telescope gathers starlight with a mirror, and the "
        f'eyepiece magnifies the image of planet number {i}. <span class="filename">scope-{i}.txt</span> '
        f"<!-- ignore --> Astronomers point it at Jupiter, Saturn and the moons of planet {i}."
        for i in range(16)
    )
    text = "# Telescopes\n\n" + body + "\n\n```rust\n{{#include ../listings/scope.rs}}\nlet x = 1;\n```\n"
    wb = Workbench(load_settings())
    try:
        for name in ("a.md", "b.md"):  # b.md differs in its last line only (same bytes are kept once)
            (work / name).write_text(text + ("\nThe end.\n" if name == "b.md" else ""))
            assert wb.ingest_file("book", work / name).ok
    finally:
        wb.close()


@pytest.fixture(scope="module")
def _overlapping_once(tmp_path_factory) -> Path:
    return prepared_data(tmp_path_factory, "overlapping", _overlap)


@pytest.fixture
def overlapping(_overlapping_once) -> Path:
    """Store "book": a Markdown chapter long enough for overlapping chunks, with its copy (b.md);
    embedded once per module, copied for each test."""
    return use_prepared_data(_overlapping_once)


@pytest.mark.model
@pytest.mark.slow
def test_overlapping_chunks_are_one_result_and_copies_are_named(overlapping):
    at = search_page()
    at.text_input(key="pg_query").input("reflecting telescope mirror eyepiece").run()
    assert not at.exception and not at.error
    boxes = [m.value for m in at.markdown if m.value.startswith("**")]
    shown = texts(at)
    assert any("chunks " in html.unescape(b) for b in boxes), boxes  # a merged result names its chunks
    spans = [tuple(map(int, re.search(r"chars (\d+)–(\d+)", html.unescape(b)).groups())) for b in boxes]
    files = [re.search(r"\*\*\d+\.\*\* (\S+)", html.unescape(b)).group(1) for b in boxes]
    for i, (s1, f1) in enumerate(zip(spans, files)):  # no two results of one file overlap
        for s2, f2 in zip(spans[i + 1 :], files[i + 1 :]):
            assert f1 != f2 or s1[1] <= s2[0] or s2[1] <= s1[0], (s1, s2)
    assert "Identical text also in: b.md" in shown
    assert "<span" not in shown and "<!--" not in shown and "{{#" not in shown
    bars = [p.proto.value for p in at.get("progress")]
    assert bars == sorted(bars, reverse=True), bars  # the bars follow the order of the list
    at.selectbox(key="pg_mode").select("vector").run()
    bars = [p.proto.value for p in at.get("progress")]
    assert bars == sorted(bars, reverse=True), bars


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.parametrize("nonsense", ["?!?! ...", "qzxv plorkt wubba"])
def test_a_nonsense_query_says_nothing_matched_well(overlapping, nonsense):
    at = search_page()
    at.text_input(key="pg_query").input(nonsense).run()
    assert not at.exception and not at.error
    assert len(at.get("progress")) == 0
    assert any("matched this query well" in w.value for w in at.warning)


def test_labels_are_plain_words_with_the_terms_in_the_help(populated):
    at = search_page()
    mode = at.selectbox(key="pg_mode")
    assert mode.options == ["Hybrid", "Semantic", "Keyword"]
    assert "BM25" in mode.help and "reciprocal rank fusion" in mode.help
    assert at.text_area(key="pg_fields").label == "Extra fields" and "payload" in at.text_area(key="pg_fields").help
