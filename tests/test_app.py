"""The Streamlit app, headless (streamlit.testing.v1.AppTest)."""

from __future__ import annotations

import numpy as np
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.services import Services
from knowledge.vectorstore.store import Chunk

from conftest import REPO

APP = str(REPO / "app.py")


@pytest.fixture(autouse=True)
def _fresh_cache():
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def run_app() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    return at


def test_home_renders_on_an_empty_data_dir():
    at = run_app()
    assert not at.exception
    assert at.title[0].value.endswith("knowledge")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Stores"] == "0"
    assert metrics["Backend"] == "memory"
    assert any("No vector stores yet" in i.value for i in at.info)


def test_home_lists_a_populated_store():
    services = Services(load_settings())
    vecs = np.eye(8, dtype=np.float32)
    services.store("Team Notes").upsert("f1", [Chunk(f"chunk {i}", vecs[i]) for i in range(3)], file_name="a.md")
    services.close()
    at = run_app()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Stores"], metrics["Chunks"]) == ("1", "3")
    table = at.dataframe[0].value
    assert list(table["store"]) == ["Team Notes"]
    assert list(table["dimension"]) == [8]


def test_invalid_settings_show_a_message_not_a_traceback(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__IDLE_SECONDS", "soon")
    at = run_app()
    assert not at.exception
    assert "vector_store.idle_seconds" in at.error[0].value


def test_unknown_backend_is_reported_on_the_page(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "nosuch")
    at = run_app()
    assert not at.exception
    assert "No vector-store backend named 'nosuch'" in at.error[0].value
