"""The Evaluate page, headless (streamlit.testing.v1.AppTest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from knowledge import evaluation as ev
from knowledge.config import load_settings
from knowledge.workbench import Workbench
from tests.helpers.app import fresh_caches, open_app, use_fake_model
from tests.helpers.app import page_text as texts

TSV = (
    b"question\trelevant\n"
    b"How long does pasta cook in boiling water?\tpasta.md\n"
    b"What do telescopes show of Jupiter?\tsky.md; text:Jupiter's moons\n"
    b"How long should bread dough rise?\tbread.md\n"
)


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


def evaluate_page() -> AppTest:
    return open_app("pages/evaluate.py", timeout=300)


def frame_with(at: AppTest, column: str):
    """The first table on the page that has ``column``."""
    return next(f.value for f in at.dataframe if column in f.value.columns)


def upload(at: AppTest, name: str, data: bytes) -> None:
    at.file_uploader(key="ev_upload").set_value((name, data, "text/tab-separated-values"))
    at.run()
    assert not at.exception


@pytest.fixture
def populated(tmp_path: Path, monkeypatch) -> None:
    """Store "kitchen" with three short Markdown files, on the fake model (fake/hash-256): the page's
    flow is under test here, not the model's meaning (tests/cli/test_cli_eval.py runs the real one)."""
    use_fake_model(monkeypatch, 256)
    wb = Workbench(load_settings())
    try:
        for name, text in (
            ("pasta.md", "# Pasta\n\nPasta cooks in salted boiling water for about ten minutes."),
            ("sky.md", "# Sky\n\nA small telescope shows Jupiter's moons and Saturn's rings."),
            ("bread.md", "# Bread\n\nLet the bread dough rise for an hour in a warm place."),
        ):
            assert wb.ingest_file("kitchen", text.encode(), name).ok
    finally:
        wb.close()


def test_upload_edit_and_export_a_question_set_without_stores():
    at = evaluate_page()
    assert at.title[0].value.endswith("Evaluate retrieval")
    assert any("No question sets yet" in i.value for i in at.info)
    upload(at, "kitchen.tsv", TSV)
    assert any("Saved the question set kitchen: 3 questions" in s.value for s in at.success)
    assert at.selectbox(key="ev_set").value == "kitchen"
    assert "3 questions · TSV" in texts(at)
    assert any("No vector stores yet" in i.value for i in at.info)  # and nothing to evaluate
    assert Workbench(load_settings()).evaluations.get_set("kitchen").questions[1].relevant == (
        ev.Criterion("sky.md"),
        ev.Criterion(text="Jupiter's moons"),
    )
    # the table editor's rows, saved
    table = at.dataframe[0].value  # the table editor
    assert next(iter(table["question"])) == "How long does pasta cook in boiling water?"
    assert list(table["relevant"])[1] == "sky.md; text:Jupiter's moons"
    at.button(key="ev_save_set").click().run()
    assert not at.exception and any("Saved 3 questions" in s.value for s in at.success)


def test_a_bad_question_file_is_refused_with_its_lines():
    at = evaluate_page()
    upload(at, "bad.tsv", b"question\trelevant\nno tab on this line\nOk?\ta.md\n")
    assert not at.exception
    assert any("line 2" in e.value and "Nothing was kept" in e.value for e in at.error)
    assert any("No question sets yet" in i.value for i in at.info)


def test_evaluate_compare_sweep_and_try_chunk_sizes(populated):
    at = evaluate_page()
    upload(at, "kitchen.tsv", TSV)
    assert at.multiselect(key="ev_stores").value == ["kitchen"]
    at.multiselect(key="ev_modes").set_value(["hybrid", "vector"]).run()
    at.button(key="ev_go").click().run()
    assert not at.exception and not at.error
    shown = texts(at)
    metrics = frame_with(at, "ranking")
    assert list(metrics["ranking"]) == ["Hybrid (w 0.6)", "Semantic"]
    assert {"recall@1", "recall@5", "MRR@10", "nDCG@10", "ms / question"} <= set(metrics.columns)
    assert all(metrics["MRR@10"] == 1.0)  # each question's file is ranked first in this tiny store
    assert len(at.get("vega_lite_chart")) == 1  # the bar chart
    ranks = frame_with(at, "kitchen · Hybrid")
    assert list(ranks["question"]) == [q.split("\t")[0] for q in TSV.decode().splitlines()[1:]]
    assert set(ranks["kitchen · Hybrid"]) == {"1"}
    assert "1. ✅ pasta.md" in shown and "⬜" in shown  # the ranked files, the relevant one marked

    # a second run (Keyword): Compare runs lists the runs and the questions, worse ones first
    at.multiselect(key="ev_modes").set_value(["lexical"]).run()
    at.button(key="ev_go").click().run()
    assert not at.exception
    at.selectbox(key="ev_before").select_index(2).run()
    assert not at.exception
    assert any("got worse" in m.value for m in at.markdown)
    assert len(at.metric) >= 4

    # sweep the fusion weight
    at.text_input(key="ev_weights").input("0, 1").run()
    at.button(key="ev_sweep").click().run()
    assert not at.exception and not at.error
    assert any("fusion_weight =" in s.value for s in at.success)

    # try two chunk settings on temporary copies, keep the best as a template
    at.multiselect(key="ev_t_settings").set_value(["64/16", "128/32"]).run()
    at.button(key="ev_try").click().run()
    assert not at.exception and not at.error
    trial = frame_with(at, "chunk count")
    assert list(trial["chunks (size/overlap)"]) == ["64/16", "128/32"] and all(trial["chunk count"] == 3)
    assert Workbench(load_settings()).store_names() == ["kitchen"]  # the copies are gone
    at.button(key="ev_keep").click().run()
    assert not at.exception
    assert any("Saved the template **default-64-16**" in s.value for s in at.success)


def test_typed_questions_are_kept_as_a_set_and_evaluated(populated):
    """Questions typed on the page (no file, no set yet): Save and evaluate keeps them as a named set
    and runs the evaluation at once on the chosen store."""
    at = evaluate_page()
    assert any("Type questions" in i.value for i in at.info)  # the way in, said where there is no set
    at.text_area(key="ev_typed").input(
        "How long does pasta cook in boiling water? | pasta.md\n"
        "# a comment line\n"
        "What do telescopes show of Jupiter? | sky.md; text:Jupiter's moons"
    )
    at.text_input(key="ev_typed_name").input("my questions")
    at.button(key="ev_typed_go").click().run()
    assert not at.exception and not at.error
    assert any("Saved the question set my questions: 2 questions" in s.value for s in at.success)
    assert at.selectbox(key="ev_set").value == "my questions"
    saved = Workbench(load_settings()).evaluations.get_set("my questions")
    assert [q.text for q in saved.questions] == [
        "How long does pasta cook in boiling water?",
        "What do telescopes show of Jupiter?",
    ]
    assert saved.questions[1].relevant == (ev.Criterion("sky.md"), ev.Criterion(text="Jupiter's moons"))
    metrics = frame_with(at, "ranking")  # evaluated without pressing Evaluate
    assert list(metrics["ranking"]) == ["Hybrid (w 0.6)"] and list(metrics["MRR@10"]) == [1.0]
    at.run()  # a rerun does not evaluate again
    assert len(Workbench(load_settings()).evaluations.runs(set_name="my questions")) == 1


def test_a_typed_question_without_its_answer_is_refused_and_nothing_kept():
    at = evaluate_page()
    at.text_area(key="ev_typed").input("Where is the moon?\nOk? | a.md")
    at.button(key="ev_typed_go").click().run()
    assert not at.exception
    refused = " ".join(e.value for e in at.error)
    assert "line 1" in refused and "after a '|'" in refused and "Nothing was saved" in refused
    assert Workbench(load_settings()).evaluations.set_names() == []
    assert at.text_area(key="ev_typed").value.startswith("Where is the moon?")  # kept to fix
