"""10,000 files on a page (issue 44, item 3), in a real browser: a store of 10,000 files -- 9,950
indexed, one of them ``quarterly-report-zebra.pdf``, and 50 that failed while a service was out of
reach -- and the file store's 10,000 files and 10,000 audit events, written before the server starts
straight through the file store and the catalog (``Catalog.add_files``: no file is ingested). The
Vector stores page, Files and Audit are drawn at 1280x800 and 390 px; their lists move a page at a
time on the server; a search by name finds the one file among 10,000; "Try all 50 matching again" queues
the failed files and the app's worker indexes them.

Each page's drawing time (from the address typed to the app at rest with its list drawn) and the
bytes the browser received (HTTP bodies as sent, with Streamlit's own scripts on a first visit, and
the websocket's messages) are printed, never asserted (docs/benchmarks.md keeps them). Screenshots go
to ``test-artifacts/browser/10k/`` (looked at, not compared).
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import ARTIFACTS, Server, explained, full_shot, rerun_and_wait, scroll_to, serve, wait_for_app
from tests.helpers.env import isolate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FAKE = "fake/hash-8"
PW = "correct horse battery"
STORE = "big"
FILES = 10_000
FAILED = 50
NEEDLE = "quarterly-report-zebra.pdf"
WIDTHS = [(1280, 800), (390, 844)]
#: What each page is measured by, printed at the end of the module.
FIGURES: list[str] = []


def _fill(data_dir: Path) -> None:
    """The store, its 10,000 records over 10,000 small stored files, and 10,000 audit events."""
    import knowledge.filestore.filesystem as filesystem
    from knowledge.catalog import DONE, FileRecord
    from knowledge.catalog import FAILED as FAILED_STATUS
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, data_dir.parent)
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", FAKE)
        # test data: the file store's fsyncs (10,000 of them, two a file) are not what is measured
        mp.setattr(os, "fsync", lambda fd: None)
        mp.setattr(filesystem, "fsync_dir", lambda path: None)
        system = System(load_settings(data_dir=data_dir))  # its parts are written directly, as an import would
        try:
            system.people.set_up_admin("root", PW, "Root Admin")  # the Audit page is there with accounts
            Workbench(system).as_user(system.people.accounts.actor("root")).create_store(STORE)
            records = []
            start = datetime.now(UTC) - timedelta(days=30)
            for i in range(FILES):
                failed = i >= FILES - FAILED
                if i == 4321:
                    name = NEEDLE
                elif failed:
                    name = f"failed-{i - (FILES - FAILED):02d}.md"
                else:
                    name = f"note-{i:05d}.{'pdf' if i % 7 == 0 else 'md'}"
                text = f"# Note {i}\n\nThe harbour tide table for day {i % 365}, berth {i % 40}.\n"
                stored = system.files.save(name, "text/markdown", text.encode())
                records.append(
                    FileRecord(
                        STORE,
                        stored.id,
                        name,
                        stored.sha256,
                        stored.size,
                        FAILED_STATUS if failed else DONE,
                        "The vector store was out of reach; try again." if failed else None,
                        0 if failed else 3,
                        None,
                        created=start + timedelta(minutes=4 * i),
                        updated=start + timedelta(minutes=4 * i),
                        error="BackendUnavailable" if failed else None,
                    )
                )
            assert system.catalog.add_files(records) == FILES
            with system.catalog.cursor() as cur:
                rows = [
                    [
                        f"{i:020d}0000000{i % 10}",
                        start + timedelta(minutes=4 * i),
                        "root",
                        "file.ingest",
                        STORE,
                        records[i].file_id,
                        "{}",
                    ]
                    for i in range(FILES)
                ]
                for at in range(0, FILES, 500):
                    part = rows[at : at + 500]
                    cur.execute(
                        "INSERT INTO audit_events (id, happened, actor, action, store, target, detail) VALUES "
                        + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(part)),
                        [v for row in part for v in row],
                    )
        finally:
            system.close()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("browser-10k")
    started = time.perf_counter()
    _fill(base / "data")
    print(f"\n10,000 files written in {time.perf_counter() - started:.1f} s")
    with serve(base, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE}) as srv:
        yield srv
    print("\n" + "\n".join(FIGURES))


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = ARTIFACTS / "10k"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


class Meter:
    """The bytes a page received, counted by Chromium (DevTools' Network domain): HTTP bodies as
    sent (``encodedDataLength``) and the websocket's frames (binary frames arrive base64-encoded)."""

    def __init__(self, context: Any, page: Any) -> None:
        self.http = self.ws = 0
        cdp = context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.loadingFinished", self._loaded)
        cdp.on("Network.webSocketFrameReceived", self._frame)

    def _loaded(self, event: dict) -> None:
        self.http += int(event.get("encodedDataLength") or 0)

    def _frame(self, event: dict) -> None:
        frame = event["response"]
        data = frame.get("payloadData") or ""
        self.ws += len(base64.b64decode(data)) if frame.get("opcode") == 2 else len(data.encode())

    def reset(self) -> None:
        self.http = self.ws = 0

    @property
    def total(self) -> int:
        return self.http + self.ws


@contextmanager
def measured_page(browser, server: Server, shots: Path, width: int, height: int) -> Iterator[tuple[Any, Meter]]:
    ctx = browser.new_context(viewport={"width": width, "height": height})
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    meter = Meter(ctx, page)
    try:
        with explained(page, server, shots):
            started = time.perf_counter()
            page.goto(server.url)
            page.get_by_role("textbox", name="Username").fill("root")  # waits for the form
            _note(f"Sign-in page, first visit (Streamlit's scripts), {width} px", time.perf_counter() - started, meter)
            page.get_by_role("textbox", name="Password").fill(PW)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("button", name="Sign out").wait_for()
            wait_for_app(page)
            yield page, meter
    finally:
        ctx.close()


def _note(what: str, seconds: float, meter: Meter) -> None:
    line = (
        f"{what}: drawn in {seconds:.2f} s, {meter.total / 1e6:.2f} MB received"
        f" (HTTP {meter.http / 1e6:.2f} MB, websocket {meter.ws / 1e6:.2f} MB)"
    )
    FIGURES.append(line)
    print(line)


def _open(page, meter: Meter, server: Server, path: str, ready, what: str) -> None:
    """Go to ``path`` and time it until the app is at rest with ``ready`` (a locator) visible."""
    meter.reset()
    started = time.perf_counter()
    page.goto(f"{server.url}/{path}")
    ready.wait_for()
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
    _note(what, time.perf_counter() - started, meter)
    wait_for_app(page)


def _click(page, meter: Meter, action, ready, what: str, timeout: float | None = None) -> None:
    """Do ``action`` and time it until the rerun is over and ``ready`` shows (within ``timeout`` ms:
    the page's default when ``None``)."""
    meter.reset()
    started = time.perf_counter()
    rerun_and_wait(page, action)
    ready.wait_for(timeout=timeout)
    _note(what, time.perf_counter() - started, meter)


def _no_sideways_scroll(page, width: int) -> None:
    wide = page.evaluate("() => document.documentElement.scrollWidth")
    assert wide <= width + 1, f"the page scrolls sideways at {width} px ({wide} px wide)"


@pytest.mark.parametrize("width,height", WIDTHS)
def test_the_store_page_lists_10000_files_a_page_at_a_time_and_finds_one_by_name(
    browser, app: Server, shots: Path, width: int, height: int
):
    indexed = FILES - FAILED
    with measured_page(browser, app, shots, width, height) as (page, meter):
        rows = page.get_by_text(f"Rows 1–50 of {indexed:,} · page 1 of {-(-indexed // 50):,}")
        _open(page, meter, app, "stores", rows, f"Vector stores, {FILES:,} files, {width} px")
        assert page.get_by_role("heading", name=f"Indexed files ({indexed:,})").is_visible()
        assert page.get_by_text(f"Needs attention ({FAILED})").is_visible()
        page.screenshot(path=str(shots / f"stores-{width}.png"))
        _no_sideways_scroll(page, width)

        # the next page, from the server
        nxt = page.get_by_role("button", name="Next ▶").first
        scroll_to(nxt)
        _click(
            page, meter, nxt.click, page.get_by_text(f"Rows 51–100 of {indexed:,}"), f"Vector stores, next page, {width} px"
        )

        # one file among 10,000, by a part of its name in another case
        box = page.get_by_label("Search by name").first
        scroll_to(box)
        box.fill("ZEBRA")
        _click(
            page,
            meter,
            lambda: box.press("Enter"),
            page.get_by_text("1 file matches."),
            f"Vector stores, search by name, {width} px",
        )
        assert page.get_by_text("Rows 1–").count() == 0  # one page: no pager
        table = page.locator('[data-testid="stDataFrame"]').first
        scroll_to(table)
        page.screenshot(path=str(shots / f"stores-search-{width}.png"))
        assert "matches" in page.get_by_text("1 file matches.").inner_text()
        full_shot(page, shots / f"stores-full-{width}.png")


@pytest.mark.parametrize("width,height", WIDTHS)
def test_files_and_audit_show_10000_files_and_events_a_page_at_a_time(
    browser, app: Server, shots: Path, width: int, height: int
):
    with measured_page(browser, app, shots, width, height) as (page, meter):
        first = page.get_by_text(f"Rows 1–50 of {FILES:,} · page 1 of 200")
        _open(page, meter, app, "files", first, f"Files, {FILES:,} stored files, {width} px")
        page.screenshot(path=str(shots / f"files-{width}.png"))
        _no_sideways_scroll(page, width)
        nxt = page.get_by_role("button", name="Next ▶").first
        scroll_to(nxt)
        _click(page, meter, nxt.click, page.get_by_text(f"Rows 51–100 of {FILES:,}"), f"Files, next page, {width} px")
        box = page.get_by_label("Search by name").first
        scroll_to(box)
        box.fill("zebra")
        _click(
            page,
            meter,
            lambda: box.press("Enter"),
            page.get_by_role("heading", name=NEEDLE),
            f"Files, search by name, {width} px",
        )
        page.screenshot(path=str(shots / f"files-search-{width}.png"))

        newest = page.get_by_text("Events 1–100, newest first")
        _open(page, meter, app, "audit", newest, f"Audit, {FILES:,} events, {width} px")
        page.screenshot(path=str(shots / f"audit-{width}.png"))
        _no_sideways_scroll(page, width)
        older = page.get_by_role("button", name="Older ▶")
        scroll_to(older)
        _click(page, meter, older.click, page.get_by_text("Events 101–200, newest first"), f"Audit, older page, {width} px")
        newer = page.get_by_role("button", name="◀ Newer")
        rerun_and_wait(page, newer.click)
        newest.wait_for()


def test_retry_all_matching_queues_the_50_failed_files_and_the_worker_indexes_them(browser, app: Server, shots: Path):
    with measured_page(browser, app, shots, 1280, 800) as (page, meter):
        heading = page.get_by_text(f"Needs attention ({FAILED})")
        _open(page, meter, app, "stores", heading, "Vector stores before the bulk retry, 1280 px")
        retry = page.get_by_role("button", name=f"🔁 Try all {FAILED} matching again")
        scroll_to(retry)
        page.screenshot(path=str(shots / "attention-1280.png"))
        # the words stand until the page's next full run: a batch of 50 tiny files may end (and the
        # page run again) before a loaded machine's browser saw them, so the store's files all
        # indexed count as well
        queued = page.get_by_text(f"Queued {FAILED} file(s) for a retry.")
        _click(
            page,
            meter,
            retry.click,
            queued.or_(page.get_by_role("heading", name=f"Indexed files ({FILES:,})")),
            "Vector stores, bulk retry",
            timeout=180_000,
        )
        page.screenshot(path=str(shots / "retry-queued-1280.png"))
        # the app's worker indexes them (fake model): the failed files leave Needs attention
        page.get_by_role("heading", name=f"Indexed files ({FILES:,})").wait_for(timeout=180_000)
        wait_for_app(page)
        assert page.get_by_text("Needs attention (").count() == 0
        page.screenshot(path=str(shots / "retried-1280.png"))
