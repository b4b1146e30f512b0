"""File details and store settings in a real browser (issue 29, item 3): an attribute edited in the
Stores page's File details editor changes what the Search playground's attribute filter returns;
the editor and the Store settings section at 1280x800 and 390 px wide (screenshots
``29-details-*.png`` under ``test-artifacts/browser/``). Server and browser from ``test_browser``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import Server, app_page, choose_option, read_hits, rerun_and_wait, scroll_to, serve, shot

pytestmark = [pytest.mark.browser]

FILES = {
    "guide.md": "# Deploy\n\nThe deployment guide: roll the service out to production on Fridays.\n",
    "notes.md": "# Notes\n\nMeeting notes: the deployment moved to Monday after the production incident.\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("browser-details")
    from knowledge.config import load_settings
    from knowledge.workbench import Workbench

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-8")
        wb = Workbench(load_settings(data_dir=base / "data"))
        for name, text in FILES.items():
            assert wb.ingest_file("Docs", text.encode(), name).ok
        assert wb.ingest_file("Zeta", b"# Zeta\n\nThe last store in the list.\n", "zeta.md").ok
        wb.close()
    with serve(base, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-8"}) as srv:
        yield srv


def filtered_files(browser, server: Server, artifacts: Path, fields: str) -> list[str]:
    """The files of the playground's hits for a query over both files, filtered by ``fields``."""
    from playwright.sync_api import expect

    with app_page(browser, server, artifacts, "search") as page:
        threshold = page.get_by_role("spinbutton", name="Score threshold")
        threshold.fill("-1")
        rerun_and_wait(page, lambda: threshold.press("Enter"))
        page.get_by_text("Filters", exact=True).click()
        box = page.get_by_role("textbox", name="Extra fields", exact=True)
        box.fill(fields)
        rerun_and_wait(page, lambda: box.press("Control+Enter"))
        query = page.get_by_role("textbox", name="Query", exact=True)
        query.fill("deployment production")
        rerun_and_wait(page, lambda: query.press("Enter"))
        expect(page.get_by_text("Filters", exact=True)).to_be_visible()
        return sorted({h["file"] for h in read_hits(page)})


def open_details(page):
    section = page.locator('[data-testid="stExpander"]').filter(has_text="File details: title and attributes")
    rerun_and_wait(page, lambda: section.get_by_text("File details: title and attributes").click())
    return section


def test_an_attribute_edited_in_the_app_changes_what_the_playground_filter_returns(browser, server: Server, artifacts: Path):
    from playwright.sync_api import expect

    assert filtered_files(browser, server, artifacts, "attr_team = ops") == []
    assert filtered_files(browser, server, artifacts, "") == ["guide.md", "notes.md"]
    with app_page(browser, server, artifacts, "stores") as page:
        section = open_details(page)
        choose_option(page, section.get_by_role("combobox", name="File"), "guide.md")
        title = section.get_by_role("textbox", name="Title", exact=True)
        title.fill("Deployment guide")
        rerun_and_wait(page, lambda: title.press("Enter"))
        rerun_and_wait(page, lambda: section.get_by_role("button", name="Add an attribute").click())
        key = section.get_by_role("textbox", name="Key", exact=True).last
        key.fill("team")
        rerun_and_wait(page, lambda: key.press("Enter"))
        value = section.get_by_role("textbox", name="Value", exact=True).last
        value.fill("ops")
        rerun_and_wait(page, lambda: value.press("Enter"))
        shot(page, artifacts, "29-details-editor-1280.png")
        rerun_and_wait(page, lambda: section.get_by_role("button", name="Save details").click())
        expect(page.get_by_text("Saved the details of guide.md")).to_be_visible()
        expect(section.get_by_role("textbox", name="Value", exact=True).last).to_have_value("ops")
        shot(page, artifacts, "29-details-saved-1280.png")
    assert filtered_files(browser, server, artifacts, "attr_team = ops") == ["guide.md"]
    assert filtered_files(browser, server, artifacts, "attr_title = Deployment guide") == ["guide.md"]


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_the_details_editor_and_store_settings_fit_the_screen(
    browser, server: Server, artifacts: Path, width: int, height: int
):
    from playwright.sync_api import expect

    with app_page(browser, server, artifacts, "stores", width=width, height=height) as page:
        section = open_details(page)
        expect(section.get_by_role("textbox", name="Title", exact=True)).to_be_visible()
        settings = page.locator('[data-testid="stExpander"]').filter(has_text="Store settings: description")
        rerun_and_wait(page, lambda: settings.get_by_text("Store settings: description").click())
        description = settings.get_by_role("textbox", name="Description")
        description.fill("Deployment guides and meeting notes of the ops team.")
        rerun_and_wait(page, lambda: settings.get_by_role("button", name="Save settings").click())
        expect(page.get_by_text("Saved the settings of Docs")).to_be_visible()
        expect(settings.get_by_text("Made from template")).to_be_visible()
        # nothing of either section runs off the right edge of the screen
        for box in (section.bounding_box(), settings.bounding_box()):
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1, box
        scroll_to(section.get_by_text("Attributes are key/value"))
        shot(page, artifacts, f"29-details-{width}.png")
        reembed = settings.get_by_role("button", name="Re-embed", exact=True)
        expect(reembed).to_be_visible()  # the local admin owns the store
        scroll_to(reembed)
        shot(page, artifacts, f"29-settings-{width}.png")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_open_store_stays_open_across_a_visit_to_the_templates_tab(browser, server: Server, artifacts: Path, width):
    """Only the open tab of the Vector stores page runs, and Streamlit drops the state of a widget a run did
    not draw: the store opened on the Stores tab is open again after a look at the Templates tab (it
    used to come back as the first store)."""
    from playwright.sync_api import expect

    with app_page(browser, server, artifacts, "stores", width=width) as page:
        choose_option(page, page.get_by_role("combobox", name="Open store"), "Zeta")
        expect(page.get_by_role("heading", name="🗂️ Zeta")).to_be_visible()
        rerun_and_wait(page, lambda: page.get_by_role("tab", name="Templates").click())
        expect(page.get_by_text("template is read-only")).to_be_visible()
        shot(page, artifacts, f"40-templates-tab-{width}.png")
        rerun_and_wait(page, lambda: page.get_by_role("tab", name="Stores").click())
        expect(page.get_by_role("heading", name="🗂️ Zeta")).to_be_visible()
        expect(page.get_by_role("combobox", name="Open store")).to_have_value("Zeta")
        shot(page, artifacts, f"40-back-on-stores-{width}.png")
