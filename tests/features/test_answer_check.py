"""The answer check (issue 31, item 5): question sets with expected answers, the scoring of an answer
(knowledge/evaluation/answers.py), a run that includes the check, ``eval --answers`` with the offline
assistant and with a configured model (nothing goes to any other host), and the Evaluate page."""

from __future__ import annotations

import json
import re
import socket
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from knowledge import evaluation as ev
from knowledge.errors import InvalidArgument
from knowledge.evaluation.answers import cited_passage, normalise, what_is_said

TSV = (
    "question\trelevant\texpected\n"
    "What is ownership?\tch04-01.md\tset of rules | governs memory\n"
    "No expected one?\tch01.md\t\n"
)

#: Two short files the offline assistant answers from on the fake model (its sentences share the
#: questions' words), and a set: two answered and citing a relevant file, one whose expected answer
#: is nowhere (and whose relevant file is not the one cited), one without an expected answer.
FILES = {
    "pasta.md": "# Pasta\n\nPasta cooks in salted boiling water for about ten minutes. Drain the pasta and"
    " keep a cup of the water.\n",
    "sky.md": "# Sky\n\nA small telescope shows the moons of Jupiter and the rings of Saturn. The sky is"
    " darkest after midnight.\n",
}
SET = (
    "question\trelevant\texpected\n"
    "How many minutes does pasta cook in salted boiling water?\tpasta.md\tabout ten minutes\n"
    "What does a small telescope show of Jupiter and Saturn?\tsky.md\tthe moons of Jupiter | rings of saturn\n"
    "How long do you drain the pasta and keep the water?\tsky.md\tforty seconds\n"
    "Where is the moon?\tmoon.md\n"
)


# -- question sets ---------------------------------------------------------------------------------
def test_a_question_file_may_carry_expected_answers_in_every_format():
    fmt, qs = ev.parse_questions(TSV.encode(), "q.tsv")
    assert fmt == "tsv" and qs[0].expected == ("set of rules", "governs memory") and qs[1].expected == ()
    assert qs[0].relevant == (ev.Criterion("ch04-01.md"),)  # the expected column is not a relevant place
    # the column may come first after the question, as in tests/data/answer_questions.tsv
    _, qs2 = ev.parse_questions(b"question,expected,relevant\nWhat is ownership?,set of rules,ch04-01.md\n", "q.csv")
    assert qs2[0].expected == ("set of rules",) and qs2[0].relevant == (ev.Criterion("ch04-01.md"),)
    _, qs3 = ev.parse_questions(
        b'{"question": "Q?", "relevant": ["a.md"], "expected": ["x", "y"]}\n'
        b'{"question": "R?", "relevant": ["a.md"], "expected": "x | y"}\n',
        "q.jsonl",
    )
    assert qs3[0].expected == qs3[1].expected == ("x", "y")
    # old files keep working: no expected column, a third column is one more relevant place
    _, old = ev.parse_questions(b"question\trelevant\nQ?\ta.md\tb.md\n", "q.tsv")
    assert old[0].expected == () and len(old[0].relevant) == 2
    assert ev.QuestionSet("q", tuple(qs)).has_expected and not ev.QuestionSet("o", tuple(old)).has_expected


def test_alternatives_are_separated_by_a_spaced_bar_so_an_answer_may_hold_a_bar():
    assert ev.parse_expected("ten minutes | 10 minutes") == ("ten minutes", "10 minutes")
    assert ev.parse_expected("|x| x + 1 | a closure") == ("|x| x + 1", "a closure")  # Rust's closure syntax
    assert ev.parse_expected("a||b") == ("a||b",) and ev.parse_expected("  two   words  ") == ("two words",)
    assert ev.parse_expected("") == ev.parse_expected(None) == ev.parse_expected([]) == ()
    qset = ev.QuestionSet("c", (ev.Question("Q?", (ev.Criterion("a.md"),), ("|x| x + 1", "closure")),))
    data, name, _ = ev.export_questions(qset, "tsv")
    assert ev.parse_questions(data, name)[1] == list(qset.questions)  # a bare bar survives TSV
    spaced = ev.QuestionSet("s", (ev.Question("Q?", (ev.Criterion("a.md"),), ("a | b",)),))
    with pytest.raises(InvalidArgument, match=r"' \| '.*export as JSONL"):
        ev.export_questions(spaced, "tsv")
    data, name, _ = ev.export_questions(spaced, "jsonl")
    assert ev.parse_questions(data, name)[1] == list(spaced.questions)


def test_a_malformed_expected_answer_is_refused_naming_its_line_and_nothing_is_kept():
    with pytest.raises(InvalidArgument, match=r"q\.jsonl: line 2: the expected answer is text .* got 3.*Nothing was kept"):
        ev.parse_questions(
            b'{"question": "Q?", "relevant": ["a.md"]}\n{"question": "R?", "relevant": ["a.md"], "expected": 3}\n', "q.jsonl"
        )
    with pytest.raises(InvalidArgument, match=r"line 1: the expected answer is text"):
        ev.parse_questions(b'{"question": "Q?", "relevant": ["a.md"], "expected": ["x", 2]}\n', "q.jsonl")
    with pytest.raises(InvalidArgument, match=r"q\.tsv: line 3: the expected answer ' \| ' holds no text"):
        ev.parse_questions(b"question\trelevant\texpected\nQ?\ta.md\tx\nR?\tb.md\t | \n", "q.tsv")
    with pytest.raises(InvalidArgument, match=r"row 2: the expected answer '\|' holds no text.*Nothing was saved"):
        ev.questions_from_rows(
            [
                {"question": "Q?", "relevant": "a.md", "expected": "x"},
                {"question": "R?", "relevant": "b.md", "expected": "|"},
            ]
        )


@pytest.mark.slow
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
    assert (
        ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),)),)).sha256
        == ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),), ()),)).sha256
    )


# -- scoring an answer -----------------------------------------------------------------------------
OFFLINE = (
    "*Retrieval only — no language model wrote this.* The sentences of book that best answer “What is"
    " ownership?”:\n\n> Ownership is a \\*set of rules\\*. [2]\n>\n> Another one. [1]"
)


def test_an_answer_is_compared_as_a_person_reads_it():
    assert normalise("**Ownership** is a _set of rules_ that `governs` [1]") == "ownership is a set of rules that governs"
    assert normalise("A  \\*set\\*\n of   \\`rules\\`") == "a set of rules"  # the offline assistant's escapes
    assert ev.holds("Rust’s closures are *anonymous functions*", ["rust's CLOSURES are anonymous functions"])
    assert ev.holds("x", ["nope", "X"]) and not ev.holds("nothing here", ["anonymous"])
    assert not ev.holds("anything", ["", "  "])  # a blank expected string holds nowhere


def test_the_sentence_read_as_the_answer():
    # offline: the first sentence it quotes (highlights), as read; its label line, which names the question, is no answer
    assert ev.answer_sentence(OFFLINE, offline=True) == "Ownership is a *set of rules*. [2]"
    said = what_is_said(OFFLINE, offline=True)
    assert said.startswith("> Ownership is") and "What is ownership" not in said and what_is_said(OFFLINE) == OFFLINE
    nothing = "*Retrieval only — no language model wrote this.* Nothing in book answers “What is ownership?”: ..."
    assert ev.answer_sentence(nothing, offline=True) == "" and what_is_said(nothing, offline=True) == ""
    # a model: the sentence carrying the first marker (after or before its full stop), else the first sentence
    model = "Good question. Ownership is a set of rules that govern memory [2]. It is checked at compile time [1]."
    assert ev.answer_sentence(model) == "Ownership is a set of rules that govern memory [2]."
    assert ev.answer_sentence("Intro line.\nOwnership is a set of rules. [3] More.\n") == "Ownership is a set of rules. [3]"
    assert ev.answer_sentence("Ownership is a set of rules. It governs memory.") == "Ownership is a set of rules."
    # a model's quoted line is no highlight
    assert ev.answer_sentence("> Quoted by a model.\nThe answer [1].") == "The answer [1]."
    cites = [{"n": 1, "file_name": "a.md"}, {"n": 2, "file_name": "b.md"}]
    assert cited_passage("x [2]", cites)["file_name"] == "b.md"
    assert cited_passage("no marker", cites)["file_name"] == "a.md" and cited_passage("x", []) is None


def test_one_answer_is_scored_against_its_question():
    q = ev.Question("What is ownership?", (ev.Criterion("ch04-01.md"),), ("set of rules",))
    cites = [{"n": 1, "file_name": "SUMMARY.md", "text": "x"}, {"n": 2, "file_name": "ch04-01.md", "text": "y"}]
    right = ev.check_one(q, OFFLINE, cites, 0.5, offline=True)
    assert (right.answer_holds, right.sentence_holds, right.cited, right.cited_relevant) == (True, True, "ch04-01.md", True)
    assert right.sentence == "Ownership is a *set of rules*." and right.seconds == 0.5
    # a model whose first marked sentence says something else and cites the wrong passage
    wrong = ev.check_one(q, "Something else entirely [1]. Ownership is a set of rules [2].", cites, 0.25)
    assert (wrong.answer_holds, wrong.sentence_holds, wrong.cited, wrong.cited_relevant) == (
        True,
        False,
        "SUMMARY.md",
        False,
    )
    # the offline assistant naming the question in its label, answering nothing: no hold
    named = ev.Question("What is a set of rules?", (ev.Criterion("a.md"),), ("set of rules",))
    none = ev.check_one(
        named,
        "*Retrieval only — no language model wrote this.* Nothing in b answers “What is a set of rules?”: ...",
        [],
        0.1,
        offline=True,
    )
    assert (none.answer_holds, none.sentence_holds, none.cited, none.cited_relevant) == (False, False, None, False)
    check = ev.AnswerCheck("book", "offline", (right, wrong, none))
    assert check.metrics() == {
        "answer holds": pytest.approx(2 / 3, abs=1e-6),
        "first sentence holds": pytest.approx(1 / 3, abs=1e-6),
        "cites a relevant passage": pytest.approx(1 / 3, abs=1e-6),
    }
    assert check.seconds == pytest.approx(0.85) and ev.AnswerResult.from_data(json.loads(json.dumps(right.data()))) == right


def _run(store: str = "book") -> ev.EvalRun:
    qs = (
        ev.QuestionResult("What is ownership?", "ch04-01.md", 1, {"recall@1": 1.0, "MRR@10": 1.0}, 2.0),
        ev.QuestionResult("No expected one?", "ch01.md", None, {"recall@1": 0.0, "MRR@10": 0.0}, 3.0),
    )
    return ev.EvalRun(
        "r1",
        "q",
        "sha",
        store,
        "hybrid",
        10,
        "default",
        "m",
        None,
        {"fusion_weight": 0.5, "candidates": 50, "rerank": 0},
        {"recall@1": 0.5, "MRR@10": 0.5},
        qs,
        datetime(2026, 1, 1, tzinfo=UTC),
        1.0,
    )


def test_a_run_includes_an_answer_check_in_its_metrics_and_questions():
    q = ev.Question("What is ownership?", (ev.Criterion("ch04-01.md"),), ("set of rules",))
    result = ev.check_one(q, OFFLINE, [{"n": 2, "file_name": "ch04-01.md", "text": "y"}], 0.5, offline=True)
    run = ev.with_answers(_run(), ev.AnswerCheck("book", "offline", (result,)))
    assert run.metrics == {
        "recall@1": 0.5,
        "MRR@10": 0.5,
        "answer holds": 1.0,
        "first sentence holds": 1.0,
        "cites a relevant passage": 1.0,
    }
    assert [x.answer for x in run.questions] == [result, None] and run.search["answer_llm"] == "offline"
    assert run.answer_check == ev.AnswerCheck("book", "offline", (result,)) and _run().answer_check is None
    assert ev.metric_changes(_run(), run) == {"recall@1": 0.0, "MRR@10": 0.0}  # only what both runs have
    with pytest.raises(InvalidArgument, match="of store 'other'"):
        ev.with_answers(_run(), ev.AnswerCheck("other", "offline", (result,)))
    stray = ev.check_one(ev.Question("Elsewhere?", (ev.Criterion("a.md"),), ("x",)), "x", [], 0.1)
    with pytest.raises(InvalidArgument, match="questions the run does not"):
        ev.with_answers(_run(), ev.AnswerCheck("book", "offline", (stray,)))


def test_a_run_with_its_answer_check_is_kept_and_read_back(settings):
    from knowledge.workbench import Workbench

    q = ev.Question("What is ownership?", (ev.Criterion("ch04-01.md"),), ("set of rules",))
    result = ev.check_one(q, OFFLINE, [{"n": 2, "file_name": "ch04-01.md", "text": "y"}], 0.5, offline=True)
    run = ev.with_answers(_run(), ev.AnswerCheck("book", "local", (result,)))
    wb = Workbench(settings)
    try:
        wb.evaluations.save_run(run)
        wb.evaluations.save_run(replace(_run(), id="r0"))
        back = wb.evaluations.get_run("r1")
        assert back.answer_check == ev.AnswerCheck("book", "local", (result,)) and back.metrics == run.metrics
        assert back.questions[1].answer is None and wb.evaluations.get_run("r0").answer_check is None
    finally:
        wb.close()


def test_a_set_without_expected_answers_cannot_be_checked(settings):
    from knowledge.chat import Chats
    from knowledge.chat.answer_check import check_answers
    from knowledge.system import System
    from knowledge.workbench import Workbench

    system = System(settings)
    try:
        qset = ev.QuestionSet("p", (ev.Question("Q?", (ev.Criterion("a.md"),)),))
        with pytest.raises(InvalidArgument, match="No question of p has an expected answer"):
            check_answers(Chats(system).service(Workbench(system)), "anything", qset)
    finally:
        system.close()


# -- asking the chat -------------------------------------------------------------------------------
class Connections:
    """Every address a socket of this process connects to while installed (``socket.connect``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[object] = []
        real = socket.socket.connect

        def connect(sock: socket.socket, address: object) -> None:
            self.seen.append(address)
            return real(sock, address)

        monkeypatch.setattr(socket.socket, "connect", connect)


def _kitchen(work: Path) -> tuple[str, str]:
    """Store "kitchen" of :data:`FILES` on the fake model in ``work/data``, and :data:`SET` as a file."""
    from knowledge.cli import main

    docs = work / "docs"
    docs.mkdir()
    for name, text in FILES.items():
        (docs / name).write_text(text)
    (work / "kitchen.tsv").write_text(SET)
    assert main(["--data-dir", str(work / "data"), "ingest", "kitchen", str(docs)]) == 0
    return str(work / "data"), str(work / "kitchen.tsv")


@pytest.mark.slow
def test_eval_answers_checks_the_offline_assistant_keeps_the_figures_and_gates(tmp_path, monkeypatch, capsys):
    from knowledge.cli import main

    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-256")
    data, questions = _kitchen(tmp_path)
    seen = Connections(monkeypatch)
    capsys.readouterr()
    assert main(["--data-dir", data, "eval", "kitchen", questions, "--mode", "all", "--answers"]) == 0
    out = capsys.readouterr().out
    assert seen.seen == []  # the offline assistant: nothing leaves the process
    assert "answers (offline, 3 questions with an expected answer" in out
    assert "answer holds 0.667 · first sentence holds 0.667 · cites a relevant passage 0.667" in out
    rows = [ln for ln in out.splitlines() if re.match(r"(yes|no)\s+(yes|no)\s+(yes|no)\s", ln)]
    assert len(rows) == 3 and "Pasta cooks in salted boiling water for about ten minutes." in rows[0]
    assert re.search(
        r"^no\s+no\s+no\s+How long do you drain.*Drain the pasta and keep a cup of the water\.\s+pasta\.md", out, re.M
    )
    assert re.search(r"kept with the Hybrid run (\w+)", out)

    capsys.readouterr()
    code = main(["--data-dir", data, "eval", "kitchen", questions, "--json", "--min-answers", "0.9", "--no-save"])
    captured = capsys.readouterr()
    assert code == 1 and "0.667 of the answers hold the expected answer, below --min-answers 0.9" in captured.err
    got = json.loads(captured.out)
    answers, (run,) = got["answers"], got["runs"]
    assert answers["config"] == "offline" and answers["questions_checked"] == 3 and answers["run"] == run["id"]
    assert answers["metrics"] == {
        "answer holds": 0.666667,
        "first sentence holds": 0.666667,
        "cites a relevant passage": 0.666667,
    }
    assert run["metrics"]["answer holds"] == 0.666667 and run["metrics"]["MRR@10"] == 0.625
    assert [(q["answer_holds"], q["sentence_holds"], q["cited"], q["cited_relevant"]) for q in answers["questions"]] == [
        (True, True, "pasta.md", True),
        (True, True, "sky.md", True),
        (False, False, "pasta.md", False),
    ]
    assert answers["questions"][1]["sentence"] == "A small telescope shows the moons of Jupiter and the rings of Saturn."
    assert main(["--data-dir", data, "eval", "kitchen", questions, "--min-answers", "0.6", "--no-save"]) == 0

    from knowledge.chat import Chats
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    system = System(load_settings(data_dir=data))
    wb = Workbench(system)
    try:
        kept = wb.evaluations.runs(store="kitchen")
        assert sorted(r.mode for r in kept) == ["hybrid", "lexical", "vector"]  # --no-save kept nothing more
        with_check = [r for r in kept if r.answer_check is not None]
        assert [r.mode for r in with_check] == ["hybrid"]  # the ranking the chat searches with
        assert with_check[0].answer_check.metrics() == answers["metrics"]
        assert Chats(system).service(wb).sessions() == []  # the check's chats are deleted
    finally:
        system.close()
    capsys.readouterr()
    assert main(["--data-dir", data, "eval", "kitchen", questions, "--llm", "nope", "--no-save"]) == 2
    assert "nope" in capsys.readouterr().err


@pytest.mark.slow
def test_a_configured_model_is_checked_by_its_first_marked_sentence_and_only_its_url_is_asked(tmp_path, monkeypatch):
    from knowledge.chat import Chats
    from knowledge.chat.answer_check import check_answers
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.system import System
    from knowledge.workbench import Workbench
    from tests.helpers.chat import ChatCompletionsServer

    def number_of(request: dict, file_name: str) -> str:
        passages = request["messages"][-1]["content"]
        return next(m.group(1) for m in re.finditer(r"^\[(\d+)\] (.*)$", passages, re.M) if file_name in m.group(2))

    def pasta(req: dict) -> dict:  # right, citing the pasta passage
        return {
            "content": f"Let me see. Pasta cooks in salted water for *about ten minutes* [{number_of(req, 'pasta.md')}]."
            f" The sky is dark [{number_of(req, 'sky.md')}]."
        }

    def telescope(req: dict) -> dict:  # the right words, but its first marked sentence cites the pasta passage
        return {
            "content": f"It boils [{number_of(req, 'pasta.md')}]. It shows the moons of Jupiter"
            f" [{number_of(req, 'sky.md')}]."
        }

    system = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    wb = Workbench(system)
    try:
        for name, text in FILES.items():
            assert wb.ingest_file("kitchen", text.encode(), name).ok
        _, questions = ev.parse_questions(SET.encode(), "kitchen.tsv")
        qset = ev.QuestionSet("kitchen", tuple(questions[:2]))
        with ChatCompletionsServer([pasta, telescope]) as server:
            wb.llm_configs().save(
                {
                    "name": "local",
                    "type": "CHAT",
                    "provider": "openai",
                    "model": "test-model",
                    "base_url": server.base_url,
                    "search_first": True,
                }
            )
            seen = Connections(monkeypatch)
            check = check_answers(Chats(system).service(wb), "kitchen", qset, "local")
        assert {a[:2] for a in seen.seen} == {server.httpd.server_address[:2]}  # the config's URL, nothing else
        assert len(server.requests) == 2 and check.config == "local"
        first, second = check.results
        assert first.sentence == "Pasta cooks in salted water for *about ten minutes*."
        assert (first.answer_holds, first.sentence_holds, first.cited, first.cited_relevant) == (
            True,
            True,
            "pasta.md",
            True,
        )
        assert second.sentence == "It boils."
        assert (second.answer_holds, second.sentence_holds, second.cited, second.cited_relevant) == (
            True,
            False,
            "pasta.md",
            False,
        )
        assert check.metrics() == {"answer holds": 1.0, "first sentence holds": 0.5, "cites a relevant passage": 0.5}
    finally:
        system.close()


@pytest.mark.slow
def test_the_evaluate_page_shows_the_answer_check_beside_the_retrieval_metrics(tmp_path, monkeypatch):
    from knowledge.chat import Chats
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench
    from tests.helpers.app import fresh_caches, open_app, use_fake_model

    use_fake_model(monkeypatch, 256)
    system = System(load_settings())
    wb = Workbench(system)
    try:
        for name, text in FILES.items():
            assert wb.ingest_file("kitchen", text.encode(), name).ok
    finally:
        system.close()
    with fresh_caches():
        at = open_app("pages/evaluate.py", timeout=300)
        at.file_uploader(key="ev_upload").set_value(("plain.tsv", b"Q one?\ta.md\n", "text/tab-separated-values"))
        at.run()
        toggle = at.toggle(key="ev_answers_on")
        assert not at.exception and toggle.disabled and "no question has an expected answer" in toggle.label
        at.file_uploader(key="ev_upload").set_value(("kitchen.tsv", SET.encode(), "text/tab-separated-values"))
        at.run()
        assert at.selectbox(key="ev_set").value == "kitchen"
        toggle = at.toggle(key="ev_answers_on")
        assert not toggle.disabled and "3 questions with an expected answer" in toggle.label
        toggle.set_value(True).run()
        assert at.selectbox(key="ev_a_config").options == ["offline"]
        at.button(key="ev_go").click().run()
        assert not at.exception and not at.error
        labels = {m.label: m.value for m in at.metric}
        assert labels["Answer holds it"] == "67%" and labels["Cites a relevant passage"] == "67%"
        assert labels["First sentence holds it"] == "67%" and labels["MRR@10"] == "0.625"
        metrics = next(f.value for f in at.dataframe if "MRR@10" in f.value.columns)
        assert list(metrics["answer holds"].round(3)) == [0.667]  # beside recall and MRR, and kept with the run
        table = next(f.value for f in at.dataframe if "first sentence" in f.value.columns)
        assert list(table["expected"]) == ["about ten minutes", "the moons of Jupiter | rings of saturn", "forty seconds"]
        assert list(table["holds"]) == ["✅", "✅", "❌"] and list(table["relevant"]) == ["✅", "✅", "❌"]
        assert list(table["cited"]) == ["pasta.md", "sky.md", "pasta.md"]
        assert table["first sentence"][0] == "Pasta cooks in salted boiling water for about ten minutes."
    system = System(load_settings())
    wb = Workbench(system)
    try:
        assert Chats(system).service(wb).sessions() == []  # the check's chats are deleted
        (run,) = wb.evaluations.runs(store="kitchen")
        assert run.answer_check is not None and run.metrics["answer holds"] == pytest.approx(2 / 3, abs=1e-6)
    finally:
        system.close()
