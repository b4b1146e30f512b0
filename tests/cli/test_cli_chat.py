"""``python -m knowledge chat`` and ``llm-configs``, with the real bundled model and a corpus PDF."""

from __future__ import annotations

import json

import pytest

from knowledge.cli import main

pytestmark = pytest.mark.model


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # two corpus PDFs embedded with the real model
def test_chat_attaches_answers_with_citations_and_continues_a_session(corpus, tmp_path, capsys):
    data = str(tmp_path / "data")
    pdf = str(corpus / "pdf" / "pdflatex-4-pages.pdf")
    zen = str(corpus / "pdf" / "google-doc-document.pdf")
    code, out, err = run(
        capsys, "--data-dir", data, "chat", "--attach", pdf, "--attach", zen, "Is explicit better than implicit?"
    )
    assert code == 0, err
    assert out.startswith("*Retrieval only")
    assert "Sources:\n  [1] google-doc-document.pdf, page 1" in out and "None" not in out
    session = err.split("session: ")[1].split()[0]

    code, out, err = run(capsys, "--data-dir", data, "chat", "--session", session, "--json", "Is flat better than nested?")
    assert code == 0, err
    reply = json.loads(out)
    assert reply["session"] == session and reply["retrieval_only"] and reply["attached"] == []
    assert reply["citations"][0]["file_name"] == "google-doc-document.pdf"
    assert "Flat is better than nested" in reply["citations"][0]["text"]
    assert reply["tool_calls"] == [
        {"name": "vector_search", "arguments": {"query": "Is flat better than nested?", "k": 4}, "ok": True}
    ]


def test_chat_errors_exit_2(tmp_path, capsys):
    data = str(tmp_path / "data")
    code, _, err = run(capsys, "--data-dir", data, "chat", "--session", "nosuch", "hi")
    assert code == 2 and "No chat session" in err
    code, _, err = run(capsys, "--data-dir", data, "chat", "--config", "nosuch", "hi")
    assert code == 2 and "No LLM config named 'nosuch'" in err


@pytest.mark.slow
def test_chat_list_and_bad_questions(tmp_path, capsys):
    data = str(tmp_path / "data")
    code, out, err = run(capsys, "--data-dir", data, "chat", "--store", "nosuch", "hi")
    assert code == 2 and "Vector store 'nosuch' does not exist" in err
    for question in ("x" * 20_000, "?!?!...", "   "):
        code, out, err = run(capsys, "--data-dir", data, "chat", question, "--json")
        assert code in (0, 2) and "Traceback" not in err, (question[:20], err)
        if question.strip():
            assert code == 0 and "no documents to search yet" in json.loads(out)["answer"]
        else:
            assert code == 2 and "Type a message" in err
    code, out, _ = run(capsys, "--data-dir", data, "chat", "--list")
    assert code == 0 and "session" in out.splitlines()[0] and len(out.splitlines()) == 4  # header, rule, 2


def test_llm_configs_lists_the_built_ins(tmp_path, capsys):
    code, out, _ = run(capsys, "--data-dir", str(tmp_path / "data"), "llm-configs", "--json")
    configs = {c["name"]: c for c in json.loads(out)}
    assert code == 0 and configs["embeddings"]["type"] == "EMBEDDING" and configs["offline"]["provider"] == "offline"
