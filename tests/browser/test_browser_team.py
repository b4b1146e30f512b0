"""Two ``streamlit run app.py`` processes on one PostgreSQL (catalog, pgvector, files), each with a
data folder of its own and the same password, behave as one product (issue 26): a store made and
filled in app 1 (one browser context) shows with its files, batch and search in app 2 (another
context). Screenshots of app 2 at 1280x800 and 390 px wide: ``test-artifacts/browser/team/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import REPO, Server, app_page, create_store, drop_files, rerun_and_wait, serve, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.slow]

PASSWORD = "one password for the team"


@pytest.fixture(scope="module")
def team_artifacts() -> Path:
    folder = REPO / "test-artifacts" / "browser" / "team"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


@pytest.fixture
def two_apps(tmp_path: Path, pgvector_settings) -> Iterator[tuple[Server, Server]]:
    from psycopg.conninfo import conninfo_to_dict

    from knowledge.embeddings.bundled import ensure_bundled_model

    info = conninfo_to_dict(pgvector_settings().vector_store.url)  # this test's database, over TCP
    url = f"postgresql://{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"
    models = tmp_path / "models"
    ensure_bundled_model(models)
    env = {
        "KNOWLEDGE_CATALOG__URL": url,
        "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
        "KNOWLEDGE_VECTOR_STORE__URL": url,
        "KNOWLEDGE_FILE_STORE__BACKEND": "postgresql",
        "KNOWLEDGE_EMBEDDINGS__MODELS_DIR": str(models),
        "KNOWLEDGE_APP_PASSWORD": PASSWORD,
    }
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with serve(tmp_path / "one", env_extra=env) as one, serve(tmp_path / "two", env_extra=env) as two:
        yield one, two


def _sign_in(page, server: Server, path: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/{path}")
    page.locator("input[type=password]").fill(PASSWORD)  # waits for the form (a first page loads twice)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible(timeout=60_000)
    wait_for_app(page)


def test_a_store_filled_in_one_app_process_is_seen_and_searched_in_another(
    browser, two_apps: tuple[Server, Server], team_artifacts: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    one, two = two_apps
    tides = tmp_path / "tides.md"
    tides.write_text("# Tides\n\n" + "The harbour master posts the tide tables: high water at dawn.\n" * 20)
    bees = tmp_path / "bees.md"
    bees.write_text("# Bees\n\n" + "A beekeeper smokes the hive before lifting the frames of honey.\n" * 20)

    with app_page(browser, one, team_artifacts, width=1280, height=800) as p1:
        _sign_in(p1, one, "stores")
        create_store(p1, "Team notes")
        expect(p1.get_by_text("Created the store Team notes")).to_be_visible()
        drop_files(p1, [str(tides), str(bees)])
        expect(p1.get_by_text(re.compile(r"Batch done: 2 files"))).to_be_visible(timeout=300_000)

    for width, height in ((1280, 800), (390, 844)):
        with app_page(browser, two, team_artifacts, width=width, height=height) as p2:
            _sign_in(p2, two, "stores")  # the same password lets in at the other process
            expect(p2.get_by_text("Indexed files (2)", exact=True)).to_be_visible(timeout=60_000)
            if width == 1280:  # a batch another session ran is shown for a minute after this process saw it end
                expect(p2.get_by_text(re.compile(r"Batch done: 2 files"))).to_be_visible(  # app 1's, from the rows
                    timeout=60_000
                )  # the batch block may come a run after the file list on a loaded machine
            p2.screenshot(path=str(team_artifacts / f"app2-stores-{width}.png"), full_page=True)

            _sign_in(p2, two, "search")  # a page load is a new session: it signs in again
            store_box = p2.get_by_role("combobox", name="Store", exact=True)
            store_box.click()
            rerun_and_wait(p2, lambda page=p2: page.get_by_role("option", name="Team notes").click())
            query = p2.get_by_role("textbox", name="Query", exact=True)
            query.fill("beekeeper honey frames")
            rerun_and_wait(p2, lambda box=query: box.press("Enter"))
            expect(p2.get_by_text(re.compile(r"Team notes: \d+ results? in"))).to_be_visible(timeout=60_000)
            expect(p2.get_by_text("bees.md").first).to_be_visible()
            p2.screenshot(path=str(team_artifacts / f"app2-search-{width}.png"), full_page=True)
