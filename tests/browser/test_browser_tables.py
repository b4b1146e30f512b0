"""A PDF table hit in a real browser (issue 43, item 3): the playground's card shows the table's
header and the row the query names as a table; "Open in viewer" shows the page with the table
outlined in blue and the row highlighted, and the passage as a table under its header; cell text
that looks like HTML, a link or emphasis is shown as written. Screenshots at 1280x800 and 390 px
wide: ``test-artifacts/browser/tables/``.

The store is made with the fake model (no embedding wait): the search is a keyword one.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from knowledge.ingest.pdfview import OUTLINE
from tests.helpers.browser import ARTIFACTS, Server, app_page, full_shot, rerun_and_wait, serve, wait_for_app
from tests.helpers.env import prepared_data
from tests.helpers.pdf_tables import HEADER, HOSTILE, ROWS, ruled_table_pdf

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STORE = "Figures"
PDF = "figures.pdf"
FAKE = {"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-8"}


@pytest.fixture(scope="module")
def tables_artifacts() -> Path:
    folder = ARTIFACTS / "tables"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


@pytest.fixture(scope="module")
def tables_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app over a store holding the generated table PDF."""

    def build(work: Path) -> None:
        from knowledge.config import load_settings
        from knowledge.workbench import Workbench

        with pytest.MonkeyPatch.context() as mp:
            for key, value in FAKE.items():
                mp.setenv(key, value)
            wb = Workbench(load_settings())
        try:
            assert wb.ingest_file(STORE, ruled_table_pdf(), PDF).chunks
        finally:
            wb.close()

    data = prepared_data(tmp_path_factory, "browser-tables", build)
    with serve(data.parent, env_extra=FAKE) as srv:
        yield srv


def outline_pixels(png: bytes) -> int:
    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    return int(((abs(r - OUTLINE[0]) < 45) & (abs(g - OUTLINE[1]) < 45) & (abs(b - OUTLINE[2]) < 45)).sum())


def both_widths(page, folder: Path, name: str) -> None:
    """Whole-page screenshots at 1280x800 and at 390 px wide (the viewport put back after); at 390 px
    every table stays inside the page (a wide one scrolls in its own box)."""
    full_shot(page, folder / f"{name}.png")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_timeout(600)
    boxes = [b.bounding_box() for b in page.locator(".table-scroll").all()]
    assert boxes and all(b is not None and b["x"] >= 0 and b["x"] + b["width"] <= 390 for b in boxes), boxes
    full_shot(page, folder / f"{name}-390.png")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.wait_for_timeout(400)


def table_rows(table) -> list[list[str]]:
    return [[c.strip() for c in r.locator("td").all_inner_texts()] for r in table.locator("tbody tr").all()]


def assert_inert(table) -> None:
    """Nothing in the table's cells became an element: no script, link, emphasis."""
    for tag in ("script", "a", "strong", "em", "img"):
        assert table.locator(tag).count() == 0, tag


def test_a_table_hit_shows_as_a_table_and_opens_outlined(browser, tables_server: Server, tables_artifacts: Path):
    from playwright.sync_api import expect

    name, _, revenue, _ = ROWS[1]  # South 2019 988 <script>x</script>
    with app_page(browser, tables_server, tables_artifacts, "search") as page:
        box = page.get_by_role("textbox", name="Query", exact=True)
        box.fill(f"{name} {revenue}")
        rerun_and_wait(page, lambda: box.press("Enter"))
        expect(page.get_by_text(re.compile(re.escape(STORE) + r": \d+ results? in"))).to_be_visible(timeout=60_000)
        card = page.locator(".table-hit table").first
        expect(card).to_be_visible()
        assert [c.strip() for c in card.locator("thead th").all_inner_texts()] == list(HEADER)
        assert list(ROWS[1]) in table_rows(card)  # the row, each cell in its column, the script as text
        expect(card.locator("mark", has_text=name)).to_be_visible()
        assert_inert(card)
        both_widths(page, tables_artifacts, "01-playground-table-card")

        link = page.get_by_role("link", name="Open in viewer").first
        with page.context.expect_page() as opened:
            link.click()
        viewer = opened.value
        viewer.set_default_timeout(30_000)
        wait_for_app(viewer)
        expect(viewer.locator("h1").first).to_contain_text(PDF)
        expect(viewer.get_by_text("in the table outlined in blue")).to_be_visible(timeout=60_000)
        image = viewer.get_by_test_id("stImage").locator("img").first
        expect(image).to_be_visible()
        assert outline_pixels(image.screenshot()) > 300  # the table's box is drawn on the page
        table = viewer.locator("table.viewer-table").first
        table.scroll_into_view_if_needed()
        expect(table).to_be_visible()
        assert [c.strip() for c in table.locator("thead th").all_inner_texts()] == list(HEADER)
        shown = table_rows(table)
        assert list(ROWS[1]) in shown and all(r in [list(x) for x in ROWS] for r in shown)
        assert any(c in HOSTILE for r in shown for c in r)
        expect(table.locator("mark.viewer-passage", has_text=name)).to_be_visible()
        assert_inert(table)
        assert viewer.locator("script", has_text="x").count() == 0  # the cell's <script> never became one
        both_widths(viewer, tables_artifacts, "02-viewer-table")
        viewer.close()
