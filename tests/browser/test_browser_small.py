"""Issue 29's smaller items on screen, in a real browser: the store map's chart and legend fit the
Search playground at 1280x800 and 390 px (short file names in the legend, the full ones in the
tooltip), the "All stores" table leads with the store's files, chunks and size, and during a batch the
store's file list follows its "Indexed files" counter. A data folder
of Rust book chapters (long file names) and a few stores, on the fake model, is written before the
server starts. Screenshots go to ``test-artifacts/browser/small/`` (looked at, not compared).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import ARTIFACTS, Server, app_page, scroll_to, serve, wait_for_app
from tests.helpers.env import CORPUS, isolate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FAKE = "fake/hash-8"
STORE = "Rust book"
WIDTHS = [(1280, 800), (390, 844)]

# Each Vega chart of the page: how wide its drawing is against the element that holds it (a drawing
# wider than its holder is cut off: the legend's right half, the chart's right edge).
FIT = """() => [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].map(el => {
    const box = el.getBoundingClientRect();
    const drawn = el.querySelector('canvas, svg');
    const d = drawn ? drawn.getBoundingClientRect() : box;
    return {holder: box.width, drawn: d.width, right: d.right, viewport: window.innerWidth};
})"""


def _fill(data_dir: Path) -> None:
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    chapters = sorted((CORPUS / "md" / "rust-book").glob("ch*.md"))[:14]
    if len(chapters) < 6:
        pytest.skip("the Rust book of the test corpus is not here (KNOWLEDGE_TEST_CORPUS)")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, data_dir.parent)
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", FAKE)
        wb = Workbench(load_settings(data_dir=data_dir))
        try:
            wb.create_store(STORE)
            for path in chapters:
                assert wb.ingest_file(STORE, path.read_bytes(), name=path.name).ok
            for other in ("Archive of meeting notes 2024", "Contracts"):
                wb.create_store(other)
                assert wb.ingest_file(other, b"# Notes\n\nThe budget was agreed in March.\n", name="notes.md").ok
        finally:
            wb.close()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("browser-small")
    _fill(base / "data")
    with serve(base, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE}) as srv:
        yield srv


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = ARTIFACTS / "small"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


def _full_shot(page, path: Path) -> None:
    """The whole page (Streamlit scrolls inside its main block): the viewport made as tall as the
    content for the picture, then restored."""
    size = dict(page.viewport_size)
    height = page.evaluate("""() => Math.max(...[...document.querySelectorAll('[data-testid="stMain"], '
        + '[data-testid="stMain"] *')].map(e => e.scrollHeight))""")
    page.set_viewport_size({"width": size["width"], "height": int(min(max(height, size["height"]), 8000))})
    page.wait_for_timeout(400)
    page.screenshot(path=str(path))
    page.set_viewport_size(size)


@pytest.mark.parametrize("width,height", WIDTHS)
def test_the_store_map_and_its_legend_fit_the_page(browser, app: Server, shots: Path, width: int, height: int):
    from playwright.sync_api import expect

    path = "search?store=Rust%20book&q=how%20do%20I%20read%20a%20guess%20from%20the%20user"
    with app_page(browser, app, shots, path, width=width, height=height, timeout=60_000) as page:
        expect(page.get_by_text("Map of the store,")).to_be_visible()
        page.locator('[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg').first.wait_for()
        wait_for_app(page)
        page.wait_for_timeout(500)
        charts = page.evaluate(FIT)
        assert len(charts) >= 2, charts  # the map and the scores
        for c in charts:
            assert c["drawn"] <= c["holder"] + 1 and c["right"] <= c["viewport"] + 1, charts
        chart = page.locator('[data-testid="stVegaLiteChart"]').first
        scroll_to(chart)
        chart.screenshot(path=str(shots / f"map-{width}.png"))
        _full_shot(page, shots / f"search-{width}.png")


@pytest.mark.parametrize("width,height", WIDTHS)
def test_all_stores_table_shows_files_chunks_and_size(browser, app: Server, shots: Path, width: int, height: int):
    from playwright.sync_api import expect

    with app_page(browser, app, shots, "stores", width=width, height=height, timeout=60_000) as page:
        heading = page.get_by_text("All stores (3)")
        expect(heading).to_be_visible()
        table = page.locator('[data-testid="stDataFrame"]').filter(has=page.locator("canvas")).last
        scroll_to(table)
        page.wait_for_timeout(500)
        box = table.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width + 1
        table.screenshot(path=str(shots / f"all-stores-{width}.png"))
        _full_shot(page, shots / f"stores-{width}.png")


# The store's counter "Indexed files", the heading of its file list and whether the batch runs, read
# at one moment.
COUNTS = """() => {
    const metric = [...document.querySelectorAll('[data-testid="stMetric"]')]
        .find(m => m.innerText.trim().startsWith('Indexed files'));
    const value = metric ? metric.querySelector('[data-testid="stMetricValue"]').innerText.trim() : null;
    const heading = [...document.querySelectorAll('h4')].map(h => h.innerText.trim())
        .find(t => t.startsWith('Indexed files ('));
    const running = [...document.querySelectorAll('button')].some(b => b.innerText.includes('Stop'));
    return {metric: value, heading: heading || null, running};
}"""


def _slow_images(folder: Path, n: int) -> list[Path]:
    """``n`` large PNGs with a line of text: the OCR of each takes a while (the batch runs on)."""
    from PIL import Image, ImageDraw

    out = []
    for i in range(n):
        img = Image.new("RGB", (2400, 1800), "white")
        draw = ImageDraw.Draw(img)
        for row in range(30):
            draw.text((40, 40 + row * 55), f"Scanned page {i} line {row}: the harbour tide tables", fill="black")
        path = folder / f"scan-{i}.png"
        img.save(path)
        out.append(path)
    return out


def test_during_a_batch_the_file_list_follows_the_counter(browser, app: Server, shots: Path, tmp_path: Path):
    from tests.helpers.browser import create_store, drop_files

    notes = []
    for i in range(3):
        p = tmp_path / f"note-{i}.md"
        p.write_text(f"# Note {i}\n\nThe lighthouse keeper lights lamp number {i} at dusk.\n")
        notes.append(p)
    with app_page(browser, app, shots, "stores", width=1280, height=800, timeout=60_000) as page:
        create_store(page, "Batch")
        drop_files(page, [*notes, *_slow_images(tmp_path, 5)])
        seen, deadline = [], time.monotonic() + 240
        while time.monotonic() < deadline:
            now = page.evaluate(COUNTS)
            seen.append(now)
            if now["running"] and now["metric"] not in (None, "0") and now["heading"] == f"Indexed files ({now['metric']})":
                _full_shot(page, shots / "batch-running-1280.png")
                break
            if not now["running"] and any(s["running"] for s in seen[:-1]):
                break  # the batch is over
            page.wait_for_timeout(200)
        running = [s for s in seen if s["running"] and s["metric"] not in (None, "0")]
        assert running, f"the batch was over before a file was counted: {seen[-5:]}"
        assert any(s["heading"] == f"Indexed files ({s['metric']})" for s in running), running[-5:]
