"""What the browser tests share: ``streamlit run app.py`` on a free localhost port (:func:`serve`), driven in
Debian's Chromium by Playwright for Python (the fixtures ``browser``, ``server``, ``page``, ``artifacts`` are in
tests/browser/conftest.py), and the steps of a page (:func:`wait_for_app`, :func:`rerun_and_wait`, ...).

The server runs with its own temporary data folder (``KNOWLEDGE_DATA_DIR``) and the real bundled
embedding model. Each step saves a screenshot under ``test-artifacts/browser/`` at the repo root.

Chromium comes from Debian (``apt-get install -y chromium``; ``.ci/run`` installs it), never from
``playwright install``. Where it is missing the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.helpers.api import free_port
from tests.helpers.env import REPO

ARTIFACTS = REPO / "test-artifacts" / "browser"
SERVER_START_TIMEOUT = 60.0  # seconds until /_stcore/health answers "ok"
# Root needs --no-sandbox; the networking flags keep Chromium off this machine's closed network.
# (Playwright's launch() gives Chromium a fresh, empty --user-data-dir of its own.)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing(reason: str) -> None:
    """Skip, or fail under CI=true, where the test cannot run on this machine."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run)")
    pytest.skip(reason)


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


@contextlib.contextmanager
def serve(base: Path, address: str | None = "127.0.0.1", env_extra: dict[str, str] | None = None) -> Iterator[Server]:
    """``streamlit run app.py`` headless on a free port, data under ``base/data``; stopped
    (terminate, then kill) on exit. ``address`` is passed as ``--server.address`` (``None``: not
    passed, so the project's .streamlit/config.toml decides, as with the README's command); the
    URL is always the loopback one."""
    data_dir, log = base / "data", base / "streamlit.log"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("KNOWLEDGE_")}
    env["KNOWLEDGE_DATA_DIR"] = str(data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(env_extra or {})
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
        "--server.headless",
        "true",
        "--server.port",
        str(port),
    ] + (["--server.address", address] if address is not None else [])
    # usage statistics are off in .streamlit/config.toml (tests/browser/test_browser_demo.py proves no request leaves)
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    srv = Server(f"http://127.0.0.1:{port}", data_dir, log, proc)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while not _healthy(f"{srv.url}/_stcore/health"):
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited with {proc.returncode} before it was healthy:\n{srv.output()}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"streamlit did not answer {srv.url}/_stcore/health within {SERVER_START_TIMEOUT:.0f} s:\n{srv.output()}"
                )
            time.sleep(0.25)
        yield srv
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def launch_browser() -> Iterator[Any]:
    """Debian's Chromium under Playwright (no browser download); skips (fails under CI=true) where
    playwright or chromium is missing."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install -r requirements-dev.txt)")
    executable = shutil.which("chromium")
    if executable is None:
        missing("chromium is not installed (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def wait_for_app(pg, timeout: float = 60_000) -> None:
    """Wait until the app is connected and its script has finished running (no rerun pending).

    A handler that ends in ``st.rerun()`` makes two runs with a moment of "not running" between
    them: the state must stay "not running" for a while (300 ms) before the app counts as at rest."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        left = max(1_000.0, (deadline - time.monotonic()) * 1000)
        pg.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=left)
        pg.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=left)
        pg.wait_for_timeout(300)  # let the last deltas paint, and a second run start if one comes
        state = pg.get_attribute('[data-testid="stApp"]', "data-test-script-state")
        if state == "notRunning" or time.monotonic() > deadline:
            return


def drop_files(pg, paths: list) -> None:
    """Put ``paths`` on the open store's drop zone (not on another uploader of the page, such as the
    bundle import's: ``input[type=file]`` alone may find that one while the store's is not drawn yet)."""
    zone = pg.locator('[data-testid="stFileUploader"]').filter(
        has=pg.locator('[data-testid="stFileUploaderDropzone"][aria-label^="Drop files here"]')
    )
    zone.locator("input[type=file]").set_input_files([str(p) for p in paths])


_WATCH_RUNS = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    window.__knowledgeRan = false;
    if (window.__knowledgeRunWatch) window.__knowledgeRunWatch.disconnect();
    window.__knowledgeRunWatch = new MutationObserver(() => {
        if (app.getAttribute('data-test-script-state') === 'running') window.__knowledgeRan = true;
    });
    window.__knowledgeRunWatch.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def rerun_and_wait(pg, action, timeout: float = 120_000, start_within: float = 15_000) -> None:
    """Do ``action`` (a widget change), then wait for the rerun it starts to finish.

    A watcher on the app's script state is put in place *before* the action, so a rerun that starts
    late (a loaded machine) or ends before we look (a fast one) is still seen; an action that starts
    no rerun within ``start_within`` ms is let go, as before."""
    pg.evaluate(_WATCH_RUNS)
    action()
    with contextlib.suppress(Exception):
        pg.wait_for_function("() => window.__knowledgeRan === true", timeout=start_within)
    wait_for_app(pg, timeout)


def scroll_to(locator, timeout: float = 30_000) -> None:
    """Scroll ``locator`` into view, trying again while the page redraws it.

    Playwright does not retry ``scroll_into_view_if_needed`` when the element it found is replaced
    (Streamlit redraws a running batch's block every second, and every rerun redraws the page), so
    "Element is not attached to the DOM" is caught and the locator resolved anew until ``timeout``
    ms have passed."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        try:
            locator.scroll_into_view_if_needed(timeout=max(1_000.0, (deadline - time.monotonic()) * 1000))
            return
        except Exception as exc:
            if "not attached" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def open_options(pg, box, option, tries: int = 3) -> None:
    """Open the selectbox/multiselect ``box`` until ``option`` (a locator) shows. The click that opens
    the list is repeated when no list shows: a click that lands while the page reruns (a loaded
    machine) opens nothing."""
    for attempt in range(tries):
        box.click()
        try:
            option.wait_for(timeout=10_000)
            return
        except Exception:
            if attempt == tries - 1:
                raise
            pg.keyboard.press("Escape")
            wait_for_app(pg)


def choose_option(pg, box, name: str, tries: int = 3) -> None:
    """Open the selectbox/multiselect ``box`` and pick the option ``name`` (waiting for the rerun)."""
    option = pg.get_by_role("option", name=name, exact=True)
    open_options(pg, box, option, tries)
    rerun_and_wait(pg, lambda: option.click())


def create_store(pg, name: str) -> None:
    """Create store ``name`` on the Vector stores page (open): the form is in the "New store" popover
    once a store exists."""
    form = pg.locator('[data-testid="stForm"]').filter(has=pg.get_by_role("button", name="Create store"))
    folded = pg.get_by_test_id("stPopoverButton").filter(has_text="New store")
    field = form.get_by_label("Name", exact=True)
    field.or_(folded).first.wait_for()  # the page has rendered one or the other (is_visible does not wait)
    if not field.is_visible():  # stores exist: the form is folded
        folded.click()
    field.fill(name)
    rerun_and_wait(pg, lambda: form.get_by_role("button", name="Create store").click())
    pg.get_by_role("heading", name=f"🗂️ {name}", exact=True).wait_for(timeout=60_000)  # the new store is open


def shot(pg, artifacts: Path, name: str) -> None:
    pg.screenshot(path=str(artifacts / name), full_page=True)


@contextlib.contextmanager
def explained(pg, server: Server, artifacts: Path) -> Iterator[None]:
    """On a failure: a screenshot of the moment (failure.png) and the server's output."""
    try:
        yield
    except Exception as exc:
        with contextlib.suppress(Exception):
            shot(pg, artifacts, "failure.png")
        raise AssertionError(
            f"{exc}\n\n-- screenshot: {artifacts / 'failure.png'}\n-- streamlit output:\n{server.output()[-6000:]}"
        ) from exc


@contextlib.contextmanager
def app_page(
    browser,
    server: Server,
    artifacts: Path,
    path: str = "",
    *,
    width: int = 1280,
    height: int = 800,
    timeout: float = 30_000,
    **context: Any,
) -> Iterator[Any]:
    """The browser tests' one set-up: a new context of ``width`` x ``height`` px (``context``: more of
    Playwright's context options, e.g. ``accept_downloads=True``), one page on ``server``'s ``/path``
    with the app loaded, a failure explained (:func:`explained`: screenshot and server output), and the
    context closed after. ``timeout`` (ms) is the page's default wait."""
    ctx = browser.new_context(viewport={"width": width, "height": height}, **context)
    page = ctx.new_page()
    page.set_default_timeout(timeout)
    try:
        with explained(page, server, artifacts):
            page.goto(server.url + (f"/{path}" if path else ""))
            wait_for_app(page)
            yield page
    finally:
        ctx.close()


def squash(text: str) -> str:
    return " ".join(text.split())


# "1. pdflatex-4-pages.pdf · page 3 · chars 7887–9001 · chunk 9" (a heading may come before chars)
PROVENANCE = re.compile(
    r"^(?P<rank>\d+)\. (?P<file>.+?)(?: · page (?P<page>\d+))?(?: · .+?)?"
    r" · chars (?P<start>\d+)–(?P<end>\d+) · chunks? (?P<chunk>\d+)(?:[–, \d]*)$"
)


def read_hits(pg) -> list[dict]:
    """The hits on the Search playground: rank, file, page, char span and the snippet shown."""
    texts = [t.strip() for t in pg.locator('[data-testid="stMarkdownContainer"]').all_inner_texts()]
    hits = []
    for i, text in enumerate(texts):
        m = PROVENANCE.match(text)
        if not m:
            continue
        snippet = next(
            t
            for t in texts[i + 1 :]
            if t and not t.startswith(("similarity ", "Identical text")) and t not in ("Full chunk", "Full text")
        )
        hits.append(
            {
                "rank": int(m["rank"]),
                "file": m["file"],
                "page": int(m["page"]) if m["page"] else None,
                "start": int(m["start"]),
                "end": int(m["end"]),
                "snippet": squash(snippet.removeprefix("…").removesuffix("…")),
            }
        )
    return hits


DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


class Requests:
    """Every request the page makes, by URL."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    def foreign(self, own: str) -> list[str]:
        host = urlsplit(own).netloc
        return [u for u in self.urls if urlsplit(u).scheme in ("http", "https", "ws", "wss") and urlsplit(u).netloc != host]


def open_context(browser, viewport: dict, requests: Requests):
    context = browser.new_context(viewport=viewport)
    context.on("request", lambda req: requests.urls.append(req.url))
    context.on("websocket", lambda ws: requests.urls.append(ws.url))
    page = context.new_page()
    page.set_default_timeout(30_000)
    return context, page


def full_shot(page, path: Path) -> None:
    """A screenshot of the whole page: Streamlit scrolls inside its main block, not the document, so
    the viewport is made as tall as the content for the picture, then restored."""
    size = dict(page.viewport_size)
    height = page.evaluate("""() => Math.max(...[...document.querySelectorAll('[data-testid="stMain"], '
        + '[data-testid="stMain"] *')].map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": size["width"], "height": int(min(max(height, size["height"]), 12000))})
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))
    page.set_viewport_size(size)
    page.wait_for_timeout(200)
