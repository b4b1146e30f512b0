"""The browser tests' fixtures: Debian's Chromium under Playwright (``browser``), the app served for a
module (``server``, which a module may replace by its own), a page on it (``page``) and the screenshot
folder (``artifacts``). The helpers are in tests/helpers/browser.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import ARTIFACTS, Server, launch_browser, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app served for this module's tests, with a temporary data folder."""
    with serve(tmp_path_factory.mktemp("browser-server")) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium under Playwright (no browser download)."""
    with launch_browser() as b:
        yield b


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """``test-artifacts/browser/``, emptied of the previous run's screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS


@pytest.fixture
def page(browser, server: Server) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    try:
        yield pg
    finally:
        context.close()
