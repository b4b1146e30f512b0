"""The app in a real browser: ``streamlit run app.py`` on a free localhost port, driven in Debian's
Chromium by Playwright for Python.

The server runs with its own temporary data folder (``KNOWLEDGE_DATA_DIR``) and the real bundled
embedding model. Each step saves a screenshot under ``test-artifacts/browser/`` at the repo root.

Chromium comes from Debian (``apt-get install -y chromium``; ``.ci/run`` installs it), never from
``playwright install``. Where it is missing the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.browser, pytest.mark.model]

ARTIFACTS = REPO / "test-artifacts" / "browser"
SERVER_START_TIMEOUT = 60.0  # seconds until /_stcore/health answers "ok"
# Root needs --no-sandbox; the networking flags keep Chromium off this machine's closed network.
# (Playwright's launch() gives Chromium a fresh, empty --user-data-dir of its own.)
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def _missing(reason: str) -> None:
    """Skip, or fail under CI=true, where the test cannot run on this machine."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200 and resp.read().strip() == b"ok"
    except (urllib.error.URLError, OSError):
        return False


class Server:
    """A ``streamlit run app.py`` process: its base URL, data folder and output log."""

    def __init__(self, url: str, data_dir: Path, log: Path, proc: subprocess.Popen) -> None:
        self.url, self.data_dir, self.log, self.proc = url, data_dir, log, proc

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app served headless on a free 127.0.0.1 port with a temporary data folder."""
    base = tmp_path_factory.mktemp("browser-server")
    data_dir, log = base / "data", base / "streamlit.log"
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KNOWLEDGE_")}
    env["KNOWLEDGE_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    cmd = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    srv = Server(f"http://127.0.0.1:{port}", data_dir, log, proc)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _healthy(f"{srv.url}/_stcore/health"):
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode} before it was healthy:\n"
                            f"{srv.output()}")
            if time.monotonic() > deadline:
                pytest.fail(f"streamlit did not answer {srv.url}/_stcore/health within "
                            f"{SERVER_START_TIMEOUT:.0f} s:\n{srv.output()}")
            time.sleep(0.25)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's Chromium under Playwright (no browser download)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (pip install -r requirements-dev.txt)")
    executable = shutil.which("chromium")
    if executable is None:
        _missing("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """``test-artifacts/browser/``, emptied of the previous run's screenshots."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    return ARTIFACTS


@pytest.fixture
def page(browser, server: Server) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    try:
        yield pg
    finally:
        context.close()


def wait_for_app(pg, timeout: float = 60_000) -> None:
    """Wait until the app is connected and its script has finished running (no rerun pending)."""
    pg.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]',
                         timeout=timeout)
    pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]',
                         timeout=timeout)
    pg.wait_for_timeout(200)  # let the last deltas paint


def shot(pg, artifacts: Path, name: str) -> None:
    pg.screenshot(path=str(artifacts / name), full_page=True)


def test_home_page_opens_with_title_and_navigation(page, server: Server, artifacts: Path):
    from playwright.sync_api import expect

    page.goto(server.url)
    wait_for_app(page)
    expect(page).to_have_title("knowledge")
    expect(page.locator("h1").first).to_contain_text("knowledge")
    nav = page.locator('[data-testid="stSidebarNav"]')
    for title in ("Home", "Vector stores", "Search playground", "Files"):
        expect(nav).to_contain_text(title)
    expect(page.locator('[data-testid="stMetric"]').first).to_contain_text("Stores")
    shot(page, artifacts, "01-home.png")
