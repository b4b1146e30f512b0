"""The answer check (issue 31, item 5): question sets with expected answers, the scoring of an answer
(knowledge/evaluation/answers.py), ``eval --answers`` and the Evaluate page's Answers tab."""

from __future__ import annotations

import json

import pytest

from knowledge import evaluation as ev
from knowledge.errors import InvalidArgument
from knowledge.evaluation.answers import cited_passage, first_sentence, normalise

TSV = ("question\trelevant\texpected\n"
       "What is ownership?\tch04-01.md\tset of rules | governs memory\n"
       "No expected one?\tch01.md\t\n")


def test_a_question_file_may_carry_expected_answers_in_every_format():
    fmt, qs = ev.parse_questions(TSV.encode(), "q.tsv")
    assert fmt == "tsv" and qs[0].expected == ("set of rules", "governs memory") and qs[1].expected == ()
    assert qs[0].relevant == (ev.Criterion("ch04-01.md"),)  # the expected column is not a relevant place
    # the column may come first after the question, as in tests/data/answer_questions.tsv
    _, qs2 = ev.parse_questions(b"question,expected,relevant\nWhat is ownership?,set of rules,ch04-01.md\n", "q.csv")
    assert qs2[0].expected == ("set of rules",) and qs2[0].relevant == (ev.Criterion("ch04-01.md"),)
    _, qs3 = ev.parse_questions(b'{"question": "Q?", "relevant": ["a.md"], "expected": ["x", "y"]}\n', "q.jsonl")
    assert qs3[0].expected == ("x", "y")
    with pytest.raises(InvalidArgument, match="line 1.*expected answer"):
        ev.parse_questions(b'{"question": "Q?", "relevant": ["a.md"], "expected": 3}\n', "q.jsonl")
    # old files keep working: no expected column, a third column is one more relevant place
    _, old = ev.parse_questions(b"question\trelevant\nQ?\ta.md\tb.md\n", "q.tsv")
    assert old[0].expected == () and len(old[0].relevant) == 2


def test_expected_answers_survive_export_the_catalog_and_the_editor(settings):
    from knowledge.workbench import Workbench

    _, qs = ev.parse_questions(TSV.encode(), "q.tsv")
    qset = ev.QuestionSet("q", tuple(qs), "tsv")
    for fmt in ("tsv", "csv", "jsonl"):
        data, name, _ = ev.export_questions(qset, fmt)
        assert ev.parse_questions(data, name)[1] == qs
    plain = ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),)),), "tsv")
    assert ev.export_questions(plain)[0].decode().splitlines()[0] == "question\trelevant"  # no empty column
    wb = Workbench(settings)
    try:
        assert wb.evaluations.save_set("q", qs, "tsv").questions == tuple(qs)
        assert wb.evaluations.get_set("q").has_expected
    finally:
        wb.close()
    rows = [{"question": "Q?", "relevant": "a.md", "expected": "one | two"}, {"question": "R?", "relevant": "b.md"}]
    assert [q.expected for q in ev.questions_from_rows(rows)] == [("one", "two"), ()]
    # a set without expected answers hashes as before they existed (its old runs stay comparable)
    assert ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),)),)).sha256 == \
        ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),), ()),)).sha256


def test_an_answer_is_read_as_a_person_reads_it():
    assert normalise("**Ownership** is a _set of rules_ that `governs` [1]") == "ownership is a set of rules that governs"
    assert ev.holds("Rust’s closures are *anonymous functions*", ["closures are anonymous functions"])
    assert not ev.holds("nothing here", ["anonymous"])
    offline = ("*Retrieval only — no language model wrote this.* The sentences of book that best answer “Q”:\n\n"
               "> Ownership is a set of rules. [2]\n> Another one. [1]\n")
    assert first_sentence(offline) == "Ownership is a set of rules. [2]"
    assert first_sentence("Intro line.\nThe answer is 42 [3].\n") == "The answer is 42 [3]."
    cites = [{"n": 1, "file_name": "a.md"}, {"n": 2, "file_name": "b.md"}]
    assert cited_passage("x [2]", cites)["file_name"] == "b.md"
    assert cited_passage("no marker", cites)["file_name"] == "a.md" and cited_passage("x", []) is None


def test_one_answer_is_scored_against_its_question():
    q = ev.Question("What is ownership?", (ev.Criterion("ch04-01.md"),), ("set of rules",))
    cites = [{"n": 1, "file_name": "SUMMARY.md", "text": "x"}, {"n": 2, "file_name": "ch04-01.md", "text": "y"}]
    right = ev.check_one(q, "> Ownership is a set of rules. [2]\n", cites, 0.5)
    assert (right.holds, right.first_holds, right.cited, right.cited_relevant) == (True, True, "ch04-01.md", True)
    wrong = ev.check_one(q, "> Something else entirely. [1]\n\nIt is a set of rules.\n", cites, 0.5)
    assert (wrong.holds, wrong.first_holds, wrong.cited, wrong.cited_relevant) == (True, False, "SUMMARY.md", False)
    check = ev.AnswerCheck("book", "offline", (right, wrong))
    assert check.metrics() == {"answer holds": 1.0, "first sentence holds": 0.5, "cites a relevant passage": 0.5}


def test_a_set_without_expected_answers_cannot_be_checked(settings):
    from knowledge.chat.answer_check import check_answers
    from knowledge.workbench import Workbench

    wb = Workbench(settings)
    try:
        qset = ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),)),))
        with pytest.raises(InvalidArgument, match="No question of p has an expected answer"):
            check_answers(wb, "anything", qset)
    finally:
        wb.close()


@pytest.mark.slow
def test_the_evaluate_page_checks_the_answers(tmp_path, monkeypatch):
    from app_helpers import fresh_caches, open_app, use_fake_model

    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    use_fake_model(monkeypatch, 256)
    wb = Workbench(load_settings())
    try:
        for name, text in (("pasta.md", "# Pasta\n\nPasta cooks in salted boiling water for about ten minutes."),
                           ("sky.md", "# Sky\n\nA small telescope shows the moons of Jupiter and the rings of Saturn.")):
            assert wb.ingest_file("kitchen", text.encode(), name).ok
    finally:
        wb.close()
    with fresh_caches():
        at = open_app("pages/evaluate.py", timeout=300)
        data = ("question\trelevant\texpected\nHow long does pasta cook in boiling water?\tpasta.md\tabout ten minutes\n"
                "What does a small telescope show?\tsky.md\tthe moons of Jupiter\n").encode()
        at.file_uploader(key="ev_upload").set_value(("kitchen.tsv", data, "text/tab-separated-values"))
        at.run()
        at.button(key="ev_a_go").click().run()
        assert not at.exception and not at.error
        labels = {m.label: m.value for m in at.metric}
        table = next(f.value for f in at.dataframe if "first sentence" in f.value.columns)
        assert list(table["question"]) == ["How long does pasta cook in boiling water?", "What does a small telescope show?"]
        assert list(table["expected"]) == ["about ten minutes", "the moons of Jupiter"]
        # the shares shown are those of the rows (the fake model's meaning is not under test here:
        # tests/features/test_answer_sentences.py checks the real one's answers)
        assert labels["Answer holds it"] == f"{list(table['holds']).count('✅') / 2:.0%}"
        assert labels["Cites a relevant passage"] == f"{list(table['relevant']).count('✅') / 2:.0%}"
        assert set(table["cited"]) <= {"pasta.md", "sky.md", "—"} and "✅" in set(table["relevant"])
    from knowledge.chat import ChatService

    assert ChatService(Workbench(load_settings())).sessions() == []  # the check's chats are deleted
