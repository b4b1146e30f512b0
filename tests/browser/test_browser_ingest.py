"""The folder ingest in a real browser (issue 14): upper-case extensions are taken and the page
says how many files the folder walk skipped and why. Screenshots at 1280x800 and 390 px wide go to
``test-artifacts/browser/``; the server and browser fixtures are those of ``test_browser``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import (
    Server,
    app_page,
    create_store,
    rerun_and_wait,
    scroll_to,
    serve,
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.model]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one folder the app may read (``ingest.allowed_dirs``)."""
    return tmp_path_factory.mktemp("allowed")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, folders: Path) -> Iterator[Server]:
    with serve(
        tmp_path_factory.mktemp("browser-ingest"), env_extra={"KNOWLEDGE_INGEST__ALLOWED_DIRS": json.dumps([str(folders)])}
    ) as srv:
        yield srv


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_folder_ingest_shows_skipped_files(browser, server: Server, artifacts: Path, folders: Path, width: int, height: int):
    from playwright.sync_api import expect

    docs = folders / f"docs-{width}"
    docs.mkdir()
    (docs / "REPORT.MD").write_text("# Report\n\nQuarterly figures WOMBAT-5401.\n")
    (docs / "notes.txt").write_text("not markdown")
    (docs / ".hidden.md").write_text("# Hidden\n")
    store = f"folder-{width}"
    with app_page(browser, server, artifacts, "stores", width=width, height=height) as page:
        create_store(page, store)
        page.get_by_text("Ingest a folder on this machine").click()
        folder_form = page.locator('[data-testid="stForm"]').filter(has=page.get_by_role("button", name="Ingest folder"))
        folder_form.get_by_label("Folder", exact=True).fill(str(docs))
        folder_form.get_by_label("Glob", exact=True).fill("**/*.md")
        rerun_and_wait(page, lambda: folder_form.get_by_role("button", name="Ingest folder").click())
        expect(page.get_by_text(re.compile(r"REPORT\.MD — \d+ chunks?"))).to_be_visible(timeout=180_000)
        note = page.get_by_text("Skipped 2 files in the folders: 1 hidden, 1 not matching '**/*.md'.")
        expect(note).to_be_visible(timeout=30_000)
        scroll_to(note)
        page.screenshot(path=str(artifacts / f"14-folder-skipped-{width}.png"))
        shot(page, artifacts, f"14-folder-skipped-{width}-full.png")
