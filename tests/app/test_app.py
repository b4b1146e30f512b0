"""The Streamlit app, headless (streamlit.testing.v1.AppTest)."""

from __future__ import annotations

import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.workbench import Workbench
from tests.helpers.app import fresh_caches, open_app


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


def test_home_renders_on_an_empty_data_dir():
    at = open_app()
    assert not at.exception
    assert at.title[0].value.endswith("knowledge")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Stores"] == "0"
    assert "Backend" not in metrics  # plain words: where the data is, the term in the help
    assert any("on this computer" in c.value and "memory" in c.help for c in at.caption)
    assert any("No vector stores yet" in i.value for i in at.info)


def test_home_lists_a_populated_store(tmp_path):
    wb = Workbench(load_settings(), embedder_factory=lambda model: HashEmbedder(dimension=8))
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\n" + "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(3)))
    result = wb.ingest_file("Team Notes", doc)
    wb.close()
    at = open_app()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert (
        metrics["Stores"],
        metrics["Stored files"],
        metrics["Indexed files"],
        metrics["Failed files"],
        metrics["Chunks"],
    ) == ("1", "1", "1", "0", str(result.chunks))
    table = at.dataframe[0].value
    assert list(table["store"]) == ["Team Notes"]
    assert list(table["dimension"]) == [8]


def test_invalid_settings_show_a_message_not_a_traceback(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__IDLE_SECONDS", "soon")
    at = open_app()
    assert not at.exception
    assert "vector_store.idle_seconds" in at.error[0].value


def test_unknown_backend_is_reported_on_the_page(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "nosuch")
    at = open_app()
    assert not at.exception
    assert "No vector-store backend named 'nosuch'" in at.error[0].value


def test_invalid_settings_answer_every_page_url_with_the_message_only(monkeypatch):
    """No page of the app runs on bad settings, deep links included: every URL shows the message (before,
    Streamlit fell back to listing the pages folder's modules in the sidebar, helpers included)."""
    monkeypatch.setenv("KNOWLEDGE_SEARCH__SCORE_THRESHOLD", "abc")
    for _ in range(2):  # the first run and a rerun
        at = open_app()
        assert not at.exception
        assert [e.value for e in at.error] == [at.error[0].value] and "search.score_threshold" in at.error[0].value
        assert "cannot start" in at.error[0].value
