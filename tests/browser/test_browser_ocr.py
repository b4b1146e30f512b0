"""OCR in the real app: a scanned PDF dropped on a store shows its per-page OCR progress with the
time left, then its outcome with the OCR warning, and its token is found on the right page.

Screenshots go to ``test-artifacts/browser/ocr/`` at 1280 x 800 and 390 px wide.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from tests.helpers.browser import (
    ARTIFACTS,
    Server,
    app_page,
    drop_files,
    rerun_and_wait,
    scroll_to,
    wait_for_app,
)

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.slow]


def scan(path: Path) -> Path:
    """A three-page PDF of images only (no text layer), a unique token on page 3."""
    font = ImageFont.load_default(size=28)
    pages = []
    for line in [
        "Minutes of the harbour board",
        "The tide tables were approved",
        "Budget token CORMORANT3131 on page three",
    ]:
        img = Image.new("RGB", (1240, 240), "white")
        ImageDraw.Draw(img).text((40, 90), f"{line}.", fill="black", font=font)
        pages.append(img)
    buf = io.BytesIO()
    pages[0].save(buf, "PDF", resolution=150, save_all=True, append_images=pages[1:])
    path.write_bytes(buf.getvalue())
    return path


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = ARTIFACTS / "ocr"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


def shots(page, element, artifacts: Path, name: str) -> None:
    """``element`` on screen at 1280 x 800 and at 390 px wide (a phone), one screenshot each."""
    for width, height, tag in ((1280, 800, "wide"), (390, 844, "narrow")):
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(300)
        scroll_to(element)
        page.screenshot(path=str(artifacts / f"{name}-{tag}.png"))
    page.set_viewport_size({"width": 1280, "height": 800})


def test_a_scanned_pdf_shows_ocr_progress_then_its_warning(browser, server: Server, artifacts: Path, tmp_path: Path):
    from playwright.sync_api import expect

    pdf = scan(tmp_path / "board-minutes.pdf")
    with app_page(browser, server, artifacts, "", width=1280, height=800) as page:
        rerun_and_wait(page, lambda: page.get_by_role("link", name="Vector stores", exact=True).click())
        form = page.locator('[data-testid="stForm"]').filter(has=page.get_by_role("button", name="Create store"))
        form.get_by_label("Name", exact=True).fill("scans")
        rerun_and_wait(page, lambda: form.get_by_role("button", name="Create store").click())
        drop_files(page, [str(pdf)])
        with_eta = page.get_by_text(re.compile(r"board-minutes\.pdf — OCR, page [23] of 3, about \d+ (s|min) left"))
        expect(with_eta).to_be_visible(timeout=240_000)
        shots(page, with_eta, artifacts, "01-ocr-progress")
        expect(page.get_by_text(re.compile(r"board-minutes\.pdf — \d+ chunks?, 3 pages"))).to_be_visible(timeout=300_000)
        warning = page.get_by_text(re.compile(r"board-minutes\.pdf: pages 1-3 read by OCR, confidence 0\.\d\d"))
        expect(warning).to_be_visible()
        wait_for_app(page)
        shots(page, warning, artifacts, "02-ocr-done")
    # the token is searchable on its page (the app's own data folder, read by a second process)
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    wb = Workbench(load_settings(data_dir=server.data_dir))
    try:
        hit = wb.search("scans", "CORMORANT3131", k=1, mode="lexical")[0]
        assert hit.file_name == "board-minutes.pdf" and hit.page == 3
    finally:
        wb.close()
