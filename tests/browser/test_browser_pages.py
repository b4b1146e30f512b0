"""The pages that ask the services instead of deciding (issue 12, step 4), in a real browser: a
password-protected PDF is asked for its password under Needs attention (told by its error class),
a retry with the password shows its one-time message, and the Files, Home and Search pages show
sizes and results as before. Screenshots at 1280x800 and 390 px wide go to ``test-artifacts/browser/``
(``12-*.png``); the server and browser fixtures are those of ``test_browser``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import (
    Server,
    app_page,
    create_store,
    drop_files,
    rerun_and_wait,
    scroll_to,
    serve,
    shot,
    wait_for_app,
)
from tests.helpers.documents import encrypted_pdf

pytestmark = [pytest.mark.browser, pytest.mark.model]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("browser-pages")) as srv:
        yield srv


def _encrypted_pdf(path: Path, password: str) -> Path:
    path.write_bytes(encrypted_pdf(password, repeat=12))
    return path


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_password_retry_then_files_home_and_search(
    browser, server: Server, artifacts: Path, tmp_path: Path, width: int, height: int
):
    from playwright.sync_api import expect

    locked = _encrypted_pdf(tmp_path / f"locked-{width}.pdf", "secret")
    notes = tmp_path / f"notes-{width}.txt"
    notes.write_text("Tide tables for the harbour: high water at dawn, low water at noon.\n" * 5)
    store = f"pages-{width}"
    with app_page(browser, server, artifacts, "stores", width=width, height=height) as page:
        create_store(page, store)
        expect(page.get_by_text(f"Created the store {store}")).to_be_visible()

        drop_files(page, [str(locked), str(notes)])
        expect(page.get_by_text("Needs attention (1)")).to_be_visible(timeout=180_000)
        wait_for_app(page)
        expect(page.get_by_text(re.compile(rf"locked-{width}\.pdf — Password required", re.I))).to_be_visible()
        password = page.get_by_label("Password", exact=True)  # the one failed file asks for it
        retry = page.get_by_role("button", name="Retry")
        expect(password).to_be_visible()
        expect(retry).to_be_visible()
        scroll_to(password)  # a late rerun (the batch finishing) can replace the field mid-scroll
        page.screenshot(path=str(artifacts / f"12-stores-attention-{width}.png"))

        password.fill("secret")
        password.press("Enter")  # the value reaches the app before the click
        wait_for_app(page)
        rerun_and_wait(page, lambda: retry.click())
        done = page.get_by_text(re.compile(rf"locked-{width}\.pdf: .*Now searchable\."))
        expect(done).to_be_visible(timeout=120_000)
        expect(page.get_by_text("Needs attention")).to_have_count(0)
        expect(page.get_by_text("Indexed files (2)", exact=True)).to_be_visible()
        scroll_to(done)
        page.screenshot(path=str(artifacts / f"12-stores-retried-{width}.png"))
        shot(page, artifacts, f"12-stores-retried-{width}-full.png")

        # Files: sizes in words (decimal units), both files listed.
        rerun_and_wait(page, lambda: page.goto(server.url + "/files"))
        wait_for_app(page)
        expect(page.locator('[data-testid="stMetric"]').filter(has_text="Total size")).to_contain_text(
            re.compile(r"\d+(\.\d)? (B|kB)")
        )
        expect(page.get_by_text(re.compile(r"· \d+(\.\d)? (B|kB) · sha256"))).to_be_visible()
        page.screenshot(path=str(artifacts / f"12-files-{width}.png"))

        # Home: the counts, no failed file left.
        page.goto(server.url + "/")
        wait_for_app(page)
        expect(page.locator('[data-testid="stMetric"]').filter(has_text="Failed files")).to_contain_text("0")
        page.screenshot(path=str(artifacts / f"12-home-{width}.png"))

        # Search: the retried PDF is searchable, its words marked in the snippet.
        page.goto(server.url + "/search")
        wait_for_app(page)
        store_box = page.get_by_role("combobox", name="Store", exact=True)
        store_box.click()
        rerun_and_wait(page, lambda: page.get_by_role("option", name=store).click())
        query = page.get_by_role("textbox", name="Query", exact=True)
        query.fill("lighthouse seagulls")
        rerun_and_wait(page, lambda: query.press("Enter"))
        expect(page.get_by_text(re.compile(rf"{store}: \d+ results? in"))).to_be_visible(timeout=60_000)
        mark = page.locator("mark").filter(has_text=re.compile("lighthouse", re.I)).first
        expect(mark).to_be_visible()
        scroll_to(mark)
        page.screenshot(path=str(artifacts / f"12-search-{width}.png"))
        # the score chart's legend in words (shown / not shown), not true/false
        legend = page.get_by_text("not shown", exact=True).first
        scroll_to(legend)
        expect(legend).to_be_visible()
        page.screenshot(path=str(artifacts / f"12-search-scores-{width}.png"))
