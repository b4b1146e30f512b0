"""A page whose catalog cannot be reached (team mode, PostgreSQL of the test's own stopped with
``pg_ctl stop -m immediate``) says "Waiting for the database…" with the reason in words, tries again
by itself, and shows itself again once the server is back -- never a traceback; past
``catalog.outage_wait_seconds`` it says the database did not come back, with a button to try again."""

from __future__ import annotations

import pytest

from tests.helpers.app import button, fresh_caches, open_app, use_fake_model
from tests.helpers.outage import OwnServer

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


@pytest.fixture
def team(own_postgres, monkeypatch) -> OwnServer:
    use_fake_model(monkeypatch, 8)
    monkeypatch.setenv("KNOWLEDGE_CATALOG__URL", own_postgres.url)
    monkeypatch.setenv("KNOWLEDGE_CATALOG__CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "pgvector")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__URL", own_postgres.url)
    monkeypatch.setenv("KNOWLEDGE_INGEST__WORKER_THREADS", "0")  # no worker process beside the AppTest
    return own_postgres


def said(at) -> str:
    return " ".join([w.value for w in at.warning] + [e.value for e in at.error])


@pytest.mark.processes
def test_a_page_waits_for_the_database_and_comes_back_by_itself(team):
    at = open_app("pages/stores.py")
    assert at.title[0].value == "🗂️ Vector stores"

    team.stop()
    at.run()
    assert not at.exception, at.exception
    text = said(at)
    assert "Waiting for the database…" in text and "tries again by itself every 5 seconds" in text
    assert f"Cannot reach the PostgreSQL catalog at 127.0.0.1:{team.port}/postgres" in text  # what, in words
    assert "Traceback" not in text and "OperationalError" not in text
    assert not any(t.value == "🗂️ Vector stores" for t in at.title)  # nothing of the page half-drawn

    team.start()
    at.run()  # what the page's own timer does every 5 seconds
    assert not at.exception, at.exception
    assert at.title[0].value == "🗂️ Vector stores"
    assert "Waiting for the database" not in said(at)


@pytest.mark.processes
def test_past_the_wait_the_page_says_the_database_did_not_come_back(team, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_CATALOG__OUTAGE_WAIT_SECONDS", "0")
    at = open_app("pages/stores.py")
    team.stop()
    at.run()
    assert not at.exception, at.exception
    text = said(at)
    assert "The database did not come back in" in text and "Cannot reach the PostgreSQL catalog" in text
    assert "Waiting for the database…" not in text
    team.start()
    button(at, "database-try-again").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "🗂️ Vector stores"
