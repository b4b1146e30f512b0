"""One vocabulary (docs/glossary.md, knowledge/vocabulary.py): the rankings are Hybrid, Semantic and
Keyword, the numbers similarity, keyword score and rank score; the new words work wherever a person
types a ranking, the old values stay; no retired word comes back on a page or in the CLI's help."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from knowledge.cli import build_parser
from knowledge.config import load_settings
from knowledge.errors import ConfigError, InvalidArgument
from knowledge.vocabulary import RANKINGS, backend_label, ranking_label, search_mode
from knowledge.workbench import Workbench
from tests.helpers.app import use_fake_model

ROOT = Path(__file__).resolve().parents[1]

#: Words retired by issue 29 (three vocabularies for one thing), as a person would read them.
RETIRED = [
    r"\bexact words\b",
    r"\bvector only\b",
    r"\bwords only\b",
    r"(?<!by )\bmeaning\b(?! \(semantic)",
    r"\bcombined\b",
    r"\blexical\b",
    r"\bTop \{",
    r"\bTop \d+ scores\b",
    r"\bCHAT configs?\b",
    r"\bchunks on \{",
    r"\bfused\b",
]


def user_strings(path: Path) -> list[tuple[int, str]]:
    """The string literals of a module a person may read (f-strings' text parts included),
    without docstrings and bare values such as ``"lexical"`` (a mode's value, a key): ``(line, text)``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)  # a bare value ("lexical", a key) is no label
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and id(n) not in docstrings
        and not re.fullmatch(r"[a-z_]+", n.value)
    ]


def retired_in(text: str) -> list[str]:
    return [p for p in RETIRED if re.search(p, text, re.IGNORECASE)]


def test_the_retired_words_are_caught():
    """The pattern list finds each old label (so the tests below could fail)."""
    for old in (
        "meaning 0.612",
        "exact words 7.31",
        "combined 0.0325",
        "Vector only",
        "Words only",
        "Model (CHAT config)",
        "Top 50 scores",
        "fused 0.03",
        "hybrid / vector / lexical",
    ):
        assert retired_in(old), old
    for fine in (
        "recalled by meaning (semantic search)",
        "Semantic",
        "similarity 0.612 · keyword score 7.31",
        "309 chunks · built-in backend",
        "chat model config",
    ):
        assert not retired_in(fine), fine


@pytest.mark.parametrize(
    "path",
    sorted([*ROOT.glob("pages/*.py"), ROOT / "app.py", *ROOT.glob("knowledge/pagemodels/*.py")]),
    ids=lambda p: p.name,
)
def test_no_retired_word_on_a_page(path):
    found = [(line, text) for line, text in user_strings(path) if retired_in(text)]
    assert found == [], f"{path.name}: retired words (see docs/glossary.md) in {found}"


def test_no_retired_word_in_the_cli_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    texts = [parser.format_help()] + [p.format_help() for p in sub.choices.values()]
    found = [(t.splitlines()[0], retired_in(t)) for t in texts if retired_in(t)]
    assert found == []
    search_help = sub.choices["search"].format_help()
    assert "{hybrid,semantic,keyword}" in search_help


def test_a_ranking_is_read_from_the_new_word_or_the_old_value():
    assert list(RANKINGS.values()) == ["Hybrid", "Semantic", "Keyword"]
    assert [search_mode(w) for w in ("hybrid", "Semantic", " keyword ", "vector", "LEXICAL")] == [
        "hybrid",
        "vector",
        "lexical",
        "vector",
        "lexical",
    ]
    assert ranking_label("lexical") == "Keyword" and ranking_label("semantic") == "Semantic"
    assert backend_label("memory") == "built-in backend" and backend_label("mine") == "mine backend"
    with pytest.raises(InvalidArgument, match="hybrid, semantic or keyword"):
        search_mode("meaning")


def test_the_setting_search_mode_takes_the_new_words(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_SEARCH__MODE", "Keyword")
    assert load_settings().search.mode == "lexical"
    monkeypatch.setenv("KNOWLEDGE_SEARCH__MODE", "vector")  # an old settings file keeps working
    assert load_settings().search.mode == "vector"
    monkeypatch.setenv("KNOWLEDGE_SEARCH__MODE", "exact words")
    with pytest.raises(ConfigError, match="semantic or keyword"):
        load_settings()


def test_the_cli_reads_the_new_words(capsys):
    parser = build_parser()
    assert parser.parse_args(["search", "s", "q", "--mode", "Keyword"]).mode == "lexical"
    assert parser.parse_args(["search", "s", "q", "--mode", "lexical"]).mode == "lexical"
    assert parser.parse_args(["eval", "s", "set", "--mode", "semantic", "--mode", "all"]).mode == ["vector", "all"]
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["search", "s", "q", "--mode", "words"])
    assert exc.value.code == 2 and "use hybrid, semantic or keyword" in capsys.readouterr().err


def test_a_search_by_keyword_is_the_search_by_lexical(monkeypatch):
    use_fake_model(monkeypatch, 16)
    wb = Workbench(load_settings())
    try:
        for name, text in (
            ("owls.md", "# Owls\n\nOwls hunt mice at night."),
            ("bread.md", "# Bread\n\nBread dough rises in a warm place."),
        ):
            assert wb.ingest_file("notes", text.encode(), name).ok
        by_word = [(h.file_name, h.lexical_score) for h in wb.search("notes", "bread dough", k=2, mode="keyword")]
        assert by_word == [(h.file_name, h.lexical_score) for h in wb.search("notes", "bread dough", k=2, mode="lexical")]
        assert by_word[0][0] == "bread.md" and by_word[0][1] > 0
        semantic = wb.search("notes", "bread dough", k=2, mode="Semantic")
        assert [h.id for h in semantic] == [h.id for h in wb.search("notes", "bread dough", k=2, mode="vector")]
        assert all(h.fused_score is None for h in semantic)
    finally:
        wb.close()
