"""The app in a browser while its PostgreSQL (a server of the test's own) is stopped and started
again: the page says "Waiting for the database…" with the reason, and comes back by itself once the
server is back (its timer reruns it), with nobody reloading. Screenshots at 1280x800 and 390 px
wide: ``test-artifacts/browser/outage/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.browser import REPO, app_page, serve, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def outage_artifacts() -> Path:
    folder = REPO / "test-artifacts" / "browser" / "outage"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


def test_a_page_waits_for_the_database_and_comes_back_by_itself(browser, own_postgres, tmp_path, outage_artifacts):
    env = {
        "KNOWLEDGE_CATALOG__URL": own_postgres.url,
        "KNOWLEDGE_CATALOG__CONNECT_TIMEOUT": "2",
        "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
        "KNOWLEDGE_VECTOR_STORE__URL": own_postgres.url,
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64",
        "KNOWLEDGE_INGEST__WORKER_THREADS": "0",
    }
    with serve(tmp_path, env_extra=env) as app, app_page(browser, app, outage_artifacts, "stores") as page:
        page.get_by_role("heading", name="🗂️ Vector stores").wait_for(timeout=60_000)
        own_postgres.stop()
        page.reload()
        wait_for_app(page)
        page.get_by_text("Waiting for the database…").wait_for(timeout=60_000)
        body = page.inner_text("body")
        assert f"Cannot reach the PostgreSQL catalog at 127.0.0.1:{own_postgres.port}/postgres" in body
        assert "Traceback" not in body
        page.screenshot(path=str(outage_artifacts / "waiting-1280.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(500)
        page.screenshot(path=str(outage_artifacts / "waiting-390.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 800})

        own_postgres.start()  # nobody reloads: the page's own timer tries again
        page.get_by_role("heading", name="🗂️ Vector stores").wait_for(timeout=60_000)
        wait_for_app(page)
        assert "Waiting for the database" not in page.inner_text("body")
        page.screenshot(path=str(outage_artifacts / "back-1280.png"), full_page=True)
