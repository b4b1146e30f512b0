"""Folder sync on the Stores page in a real browser (issue 18): Add folder shows the plan, Apply
runs it as a batch, the folder is listed with its last sync's counts. Screenshots at 1280x800 and
390 px wide go to ``test-artifacts/browser/``; server and browser fixtures are those of ``test_browser``."""

from __future__ import annotations

import json
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

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("allowed-sync")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, folders: Path) -> Iterator[Server]:
    with serve(
        tmp_path_factory.mktemp("browser-sync"),
        env_extra={
            "KNOWLEDGE_INGEST__ALLOWED_DIRS": json.dumps([str(folders)]),
            "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64",
        },
    ) as srv:
        yield srv


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_add_a_synced_folder_preview_then_apply(
    browser, server: Server, artifacts: Path, folders: Path, width: int, height: int
):
    from playwright.sync_api import expect

    docs = folders / f"docs-{width}"
    (docs / "guides").mkdir(parents=True)
    (docs / "cats.md").write_text("# Cats\n\nThe cat sits on the mat and purrs.\n")
    (docs / "guides" / "bread.md").write_text("# Bread\n\nKnead the dough, then let it rise.\n")
    (docs / "guides" / "owls.md").write_text("# Owls\n\nOwls hunt mice at night.\n")
    store = f"sync-{width}"
    with app_page(browser, server, artifacts, "stores", width=width, height=height) as page:
        create_store(page, store)
        page.get_by_text("Keep a folder in sync").click()
        add = page.locator('[data-testid="stForm"]').filter(has=page.get_by_role("button", name="Add folder"))
        add.get_by_label("Folder to keep in sync", exact=True).fill(str(docs))
        add.get_by_label("Glob", exact=True).fill("**/*.md")
        rerun_and_wait(page, lambda: add.get_by_role("button", name="Add folder").click())
        plan = page.get_by_text("3 added, 0 changed, 0 renamed, 0 deleted, 0 unchanged")
        expect(plan).to_be_visible()
        scroll_to(plan)
        page.screenshot(path=str(artifacts / f"18-sync-plan-{width}.png"))
        rerun_and_wait(page, lambda: page.get_by_role("button", name="Apply").click())
        expect(page.get_by_text("Folders kept in sync (1)")).to_be_visible(timeout=60_000)
        expect(page.get_by_text("Batch done: 3 files · 3 chunks · 3 added")).to_be_visible(timeout=60_000)
        heading = page.get_by_text("Folders kept in sync (1)")
        if not page.get_by_role("button", name="Sync now").is_visible():
            heading.click()
        expect(page.get_by_role("button", name="Sync now")).to_be_visible()
        scroll_to(heading)
        page.screenshot(path=str(artifacts / f"18-sync-folders-{width}.png"))
        shot(page, artifacts, f"18-sync-folders-{width}-full.png")
