"""``python -m knowledge eval``: on a small store, and on the Rust book with the corpus README's eight
example questions, where the printed MRR must equal one computed independently from the ranks that
``search --json`` prints."""

from __future__ import annotations

import json
import re

import pytest

from knowledge.cli import main
from tests.helpers.env import prepared_data, use_prepared_data

pytestmark = pytest.mark.model


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _small_store(work) -> None:
    docs = work / "docs"
    docs.mkdir()
    (docs / "owls.md").write_text("# Owls\n\nOwls hunt mice at night with silent flight.\n")
    (docs / "bread.md").write_text("# Bread\n\nKnead the dough and let it rise for an hour.\n")
    assert main(["--data-dir", str(work / "data"), "ingest", "notes", str(docs)]) == 0
    (work / "mine.tsv").write_text(
        "question\trelevant\nHow do owls catch mice?\towls.md\n"
        "How long does dough rise?\tbread.md\nWhere is the moon?\tmoon.md\n"
    )


@pytest.fixture(scope="module")
def _small_once(tmp_path_factory):
    return prepared_data(tmp_path_factory, "small-store", _small_store)


@pytest.fixture
def small(_small_once):
    """Store "notes" (owls.md, bread.md; ingested once per module with the real model, copied for
    each test) and the question set mine.tsv: ``(data folder, question file)``."""
    return str(use_prepared_data(_small_once)), str(_small_once.parent / "mine.tsv")


@pytest.mark.slow
def test_eval_prints_the_metrics_and_keeps_the_run(small, capsys):
    data, questions = small
    code, out, _ = run(capsys, "--data-dir", data, "eval", "notes", questions, "--mode", "all", "--questions")
    assert code == 0
    assert "notes: 3 questions of 'mine', template default" in out and "chunks 192/48" in out
    header = next(ln for ln in out.splitlines() if ln.startswith("ranking"))
    assert header.split()[:7] == ["ranking", "recall@1", "recall@3", "recall@5", "recall@10", "MRR@10", "nDCG@10"]
    rows = {
        ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split()[:1] in (["Hybrid"], ["Semantic"], ["Keyword"])
    }
    assert set(rows) == {"Hybrid", "Semantic", "Keyword"}
    for cells in rows.values():  # two of three questions answered at rank 1, the third has no such file
        assert cells[5] == "0.667" and cells[1] == "0.667"
    assert "How do owls catch mice?" in out and re.search(r"^-\s+Where is the moon\?", out, re.M)

    code, out, _ = run(capsys, "--data-dir", data, "eval", "notes", questions, "--json", "--k", "3")
    runs = json.loads(out)
    assert (
        len(runs) == 1
        and runs[0]["mode"] == "hybrid"
        and set(runs[0]["metrics"]) == {"recall@1", "recall@3", "MRR@3", "nDCG@3"}
    )
    assert [q["first_rank"] for q in runs[0]["questions"]] == [1, 1, None]
    assert runs[0]["chunking"] == {"size": 192, "overlap": 48} and runs[0]["model"]

    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    wb = Workbench(load_settings(data_dir=data))
    try:
        kept = wb.evaluations.runs(store="notes")
        assert len(kept) == 4 and runs[0]["id"] in {r.id for r in kept}
        wb.evaluations.save_set("stored", list(wb.evaluations.load_question_set(questions).questions))
    finally:
        wb.close()
    code, out, _ = run(capsys, "--data-dir", data, "eval", "notes", "stored", "--json", "--no-save")
    assert code == 0 and json.loads(out)[0]["set"] == "stored"


@pytest.mark.slow
def test_min_mrr_fails_a_pipeline_below_it(small, capsys):
    data, questions = small
    code, _, err = run(capsys, "--data-dir", data, "eval", "notes", questions, "--min-mrr", "0.5")
    assert code == 0 and not err
    code, _, err = run(capsys, "--data-dir", data, "eval", "notes", questions, "--min-mrr", "0.9", "--mode", "semantic")
    assert code == 1 and "MRR@10 of Semantic is 0.667, below --min-mrr 0.9" in err


@pytest.mark.slow
def test_eval_errors_exit_2(small, capsys, tmp_path):
    data, questions = small
    code, _, err = run(capsys, "--data-dir", data, "eval", "notes", "no-such-set")
    assert code == 2 and "No question set named 'no-such-set'" in err
    code, _, err = run(capsys, "--data-dir", data, "eval", "notes", str(tmp_path / "missing.tsv"))
    assert code == 2 and f"No such file: {tmp_path / 'missing.tsv'}" in err
    bad = tmp_path / "bad.tsv"
    bad.write_text("only a question\n")
    code, _, err = run(capsys, "--data-dir", data, "eval", "notes", str(bad))
    assert code == 2 and "line 1" in err
    code, _, err = run(capsys, "--data-dir", data, "eval", "nosuch", questions)
    assert code == 2 and "nosuch" in err


@pytest.mark.slow
def test_eval_reranks_when_asked_and_records_it(small, capsys):
    data, questions = small
    for flag, expect in (("--rerank", 30), ("--no-rerank", 0)):
        code, out, err = run(capsys, "--data-dir", data, "eval", "notes", questions, "--json", "--no-save", flag)
        assert code == 0, err
        run_ = json.loads(out)[0]
        assert run_["search"]["rerank"] == expect
        assert run_["metrics"]["recall@1"] == pytest.approx(2 / 3)  # owls and bread found first either way
