"""Export, import and move on the Vector stores page, in a real browser (issue 18): the bundle is
prepared and downloaded, dropped back as a new store, and the section fits a 390 px phone.
Screenshots at 1280x800 and 390 px wide go to ``test-artifacts/browser/`` (``18-*.png``); the
server and browser fixtures are those of ``test_browser``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import Server, app_page, rerun_and_wait, scroll_to, serve, wait_for_app

pytestmark = [pytest.mark.browser]

NOTES = {
    "cats.md": "# Cats\n\nThe cat sits on the mat.\n\n## Food\n\nCats eat fish and chicken.\n",
    "tides.txt": "Tide tables for the harbour: high water at dawn, low water at noon.\n" * 5,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("browser-portable")
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-8")
        wb = Workbench(load_settings(data_dir=base / "data"))
        for name, text in NOTES.items():
            assert wb.ingest_file("Harbour", text.encode(), name).ok
        wb.close()
    with serve(base, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-8"}) as srv:
        yield srv


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_export_download_and_import_as_a_new_store(
    browser, server: Server, artifacts: Path, tmp_path: Path, width: int, height: int
):
    from playwright.sync_api import expect

    from knowledge import portable

    with app_page(browser, server, artifacts, "stores", width=width, height=height, accept_downloads=True) as page:
        section = page.locator('[data-testid="stExpander"]').filter(has_text="Export, import or move")
        rerun_and_wait(page, lambda: section.get_by_text("Export, import or move").click())
        rerun_and_wait(page, lambda: section.get_by_role("button", name="Prepare export").click())
        download = section.get_by_role("button", name="Download Harbour.kb")
        expect(download).to_be_visible()
        expect(section.get_by_text("2 files,")).to_be_visible()
        with page.expect_download() as got:
            download.click()
        bundle = tmp_path / "Harbour.kb"
        got.value.save_as(bundle)
        info = portable.bundle_info(bundle)
        assert info["name"] == "Harbour" and info["files"] == 2
        scroll_to(section)
        page.screenshot(path=str(artifacts / f"18-stores-export-{width}.png"))
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        section.locator("input[type=file]").set_input_files(str(bundle))
        wait_for_app(page)
        name = section.get_by_role("textbox", name="Name of the new store")
        name.fill(f"Harbour copy {width}")
        name.press("Enter")
        wait_for_app(page)
        preview = section.get_by_text("Harbour.kb: store Harbour · 2 files")
        expect(preview).to_be_visible()
        scroll_to(preview)
        page.screenshot(path=str(artifacts / f"18-stores-import-preview-{width}.png"))
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        rerun_and_wait(page, lambda: section.get_by_role("button", name="Import", exact=True).click())
        told = page.get_by_text(f"Imported 'Harbour copy {width}': 2 files")
        expect(told).to_be_visible()
        scroll_to(told)
        page.screenshot(path=str(artifacts / f"18-stores-imported-{width}.png"))
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
