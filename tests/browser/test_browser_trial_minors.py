"""Issue 40's trial minors on screen, in a real browser, at 1280x800 and 390 px: the People page stays on
Groups after a group action; the Audit page says a group change in words and times to the second; a
member's deep link to /settings says "Settings are for admins"; the uploaders show the settings' limits
(``ingest.max_file_mb`` 25, ``app.max_bundle_mb`` 300 here, not Streamlit's 1000 MB); during a batch the
"Indexed files" counter and the file list's heading agree. Screenshots: ``test-artifacts/browser/40-*.png``
(looked at, not compared)."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import (
    ARTIFACTS,
    DESKTOP,
    PHONE,
    Server,
    create_store,
    drop_files,
    explained,
    full_shot,
    rerun_and_wait,
    serve,
    wait_for_app,
)
from tests.helpers.env import isolate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FAKE = "fake/hash-8"
PW = "a long enough password"
LIMITS = {"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE, "KNOWLEDGE_INGEST__MAX_FILE_MB": "25", "KNOWLEDGE_APP__MAX_BUNDLE_MB": "300"}


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app with admin root and member ana made in its catalog before it starts."""
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    base = tmp_path_factory.mktemp("browser-trial-minors")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, base)
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", FAKE)
        system = System(load_settings(data_dir=base / "data"))
        try:
            wb = Workbench(system)
            wb.accounts.set_up_admin("root", PW, "Root Admin")
            wb.as_user(wb.actor_of("root")).accounts.create_user("ana", PW, display_name="Ana Lima")
        finally:
            system.close()
    with serve(base, env_extra=LIMITS) as srv:
        yield srv


def _sign_in(pg, server: Server, username: str, path: str = "") -> None:
    from playwright.sync_api import expect

    pg.goto(server.url + (f"/{path}" if path else ""))
    pg.get_by_role("textbox", name="Username").fill(username)
    pg.get_by_role("textbox", name="Password").fill(PW)
    pg.get_by_role("button", name="Sign in").click()
    expect(pg.get_by_role("button", name="Sign out")).to_be_visible(timeout=60_000)
    wait_for_app(pg)


def _both(pg, name: str) -> None:
    """Screenshots at 1280x800 and at 390 px wide, back to 1280x800 after."""
    for size, tag in ((DESKTOP, "1280"), (PHONE, "390")):
        pg.set_viewport_size(size)
        wait_for_app(pg)
        full_shot(pg, ARTIFACTS / f"40-{name}-{tag}.png")
    pg.set_viewport_size(DESKTOP)
    wait_for_app(pg)


def _selected_tab(pg) -> str:
    return pg.locator('[role="tab"][aria-selected="true"]').inner_text().strip()


def test_people_stays_on_groups_and_audit_says_it_in_words(browser, team_server: Server):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport=DESKTOP)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    try:
        with explained(pg, team_server, ARTIFACTS):
            _sign_in(pg, team_server, "root", "people")
            expect(pg.get_by_role("heading", name="👥 People")).to_be_visible()
            rerun_and_wait(pg, lambda: pg.get_by_role("tab", name="Groups").click())
            pg.get_by_label("New group").fill("crew")
            rerun_and_wait(pg, lambda: pg.get_by_role("button", name="Create the group").click())
            expect(pg.get_by_text("Created the group crew.")).to_be_visible()
            assert _selected_tab(pg) == "Groups"
            rerun_and_wait(pg, lambda: pg.get_by_role("button", name="Add to the group").click())
            expect(pg.get_by_text(re.compile(r"Added \w+ to crew\."))).to_be_visible()
            assert _selected_tab(pg) == "Groups"
            _both(pg, "people-groups")

            rerun_and_wait(pg, lambda: pg.get_by_role("link", name="Audit", exact=True).first.click())
            pg.get_by_role("button", name="Export as CSV").wait_for()
            with pg.expect_download() as got:
                pg.get_by_role("button", name="Export as CSV").click()
            csv = Path(got.value.path()).read_text(encoding="utf-8")
            assert re.search(r"changed a group,.*,added to crew", csv), csv
            _both(pg, "audit")
    finally:
        ctx.close()


def test_a_member_at_settings_is_told_and_the_uploaders_give_the_settings_limits(
    browser, team_server: Server, tmp_path: Path
):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    try:
        with explained(pg, team_server, ARTIFACTS):
            _sign_in(pg, team_server, "ana", "settings")
            expect(pg.get_by_text("Settings are for admins: only an admin may change the settings.")).to_be_visible()
            assert "Settings" not in pg.locator('[data-testid="stSidebarNav"]').inner_text()
            _both(pg, "member-settings")

            rerun_and_wait(pg, lambda: pg.get_by_role("link", name="Go to Home").click())
            expect(pg.get_by_role("heading", name="📚 knowledge")).to_be_visible()
            rerun_and_wait(pg, lambda: pg.get_by_role("link", name="Vector stores", exact=True).first.click())
            pg.get_by_text("📦 Import a store bundle (.kb)").click()
            expect(pg.get_by_text(re.compile(r"(?<!\d)300 ?MB per file"))).to_be_visible()
            create_store(pg, "Batch")
            zone = pg.locator('[data-testid="stFileUploaderDropzone"][aria-label^="Drop files here"]')
            expect(zone).to_contain_text(re.compile(r"(?<!\d)25 ?MB per file"))
            assert "1000" not in zone.inner_text()
            _both(pg, "stores-limits")

            notes = []
            for i in range(40):
                p = tmp_path / f"note-{i:02d}.md"
                p.write_text(f"# Note {i}\n\n" + f"The lighthouse keeper lights lamp number {i} at dusk. " * 200)
                notes.append(p)
            drop_files(pg, notes)
            seen, deadline = [], time.monotonic() + 240
            while time.monotonic() < deadline:
                seen.append(pg.evaluate(COUNTS))
                if not seen[-1]["running"] and any(s["running"] for s in seen[:-1]):
                    break  # the batch is over
                if len(seen) == 15 and seen[-1]["running"]:  # (the page reruns all along: no wait_for_app)
                    for size, tag in ((DESKTOP, "1280"), (PHONE, "390")):
                        pg.set_viewport_size(size)
                        pg.wait_for_timeout(400)
                        full_shot(pg, ARTIFACTS / f"40-batch-running-{tag}.png")
                    pg.set_viewport_size(DESKTOP)
                pg.wait_for_timeout(150)
            running = [s for s in seen if s["running"] and s["metric"] is not None and s["heading"] is not None]
            assert running, f"the batch was over before it was seen: {seen[-5:]}"
            # A redraw replaces the page's elements one by one (the rest stay as they were until their
            # turn), so a sample may fall between the counter's and the heading's; on a loaded machine
            # such a moment lasts a few samples (up to 7 in a row seen under CI, ~1 s). Two reads drawn
            # apart (before: the counters every 0.5 s, the list every 1 s, the outcomes between)
            # disagreed for most of the batch.
            off = [f"Indexed files ({s['metric']})" != s["heading"] for s in running]
            longest = max((len(list(g)) for k, g in itertools.groupby(off) if k), default=0)
            assert sum(off) <= len(off) // 4 and longest <= 10, (sum(off), len(off), longest, running[-6:])
            # the batch's end starts a redraw: the heading may be between its old and new self for a moment
            expect(pg.get_by_text("Indexed files (40)", exact=True)).to_be_visible(timeout=30_000)
    finally:
        ctx.close()


# The store's counter "Indexed files", the heading of its file list and whether the batch runs, read
# at one moment (as tests/browser/test_browser_small.py reads them).
COUNTS = """() => {
    const metric = [...document.querySelectorAll('[data-testid="stMetric"]')]
        .find(m => m.innerText.trim().startsWith('Indexed files'));
    const value = metric ? metric.querySelector('[data-testid="stMetricValue"]').innerText.trim() : null;
    const heading = [...document.querySelectorAll('h4')].map(h => h.innerText.trim())
        .find(t => t.startsWith('Indexed files ('));
    const running = [...document.querySelectorAll('button')].some(b => b.innerText.includes('Stop'));
    return {metric: value, heading: heading || null, running};
}"""
