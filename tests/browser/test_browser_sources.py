"""The Sources page in a real browser (issue 42): "Add a source" built from the kind's settings (the
password typed in a password input, "set" shown after saving, the password on no page), Check
connection, Dry run, Run now followed until it ends, the run's files with the failed one first. The
source kind is the tests' ``dict``, declared to the app's process as a plugin is (an entry point:
tests/helpers/served_sources.py). Screenshots at 1280x800 and 390x844:
``test-artifacts/browser/42-sources-*.png``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import Server, app_page, full_shot, rerun_and_wait, scroll_to, serve, wait_for_app
from tests.helpers.served_sources import served_dict_kind

pytestmark = [pytest.mark.browser]

SECRET = "browser-s3cret-typed-once"
SIZES = [(1280, 800), (390, 844)]


def _files(width: int) -> dict:
    return {
        f"handbook-{width}": {
            "policies/holidays.md": {"text": "# Holidays\n\nEvery member of staff has 25 days of paid leave.\n"},
            "policies/expenses.md": {"text": "# Expenses\n\nReceipts are filed within 30 days of a trip.\n"},
            "policies/locked.docx": {"text": "Locked by another user.", "vanish": True},
        }
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    files = {k: v for w, _ in SIZES for k, v in _files(w).items()}
    env = served_dict_kind(tmp_path_factory.mktemp("served-sources"), files)
    with serve(
        tmp_path_factory.mktemp("browser-sources"),
        # the scheduler looks once, at the start (no source yet): the runs are the test's own
        env_extra={**env, "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64", "KNOWLEDGE_SOURCES__CHECK_SECONDS": "3600"},
    ) as srv:
        yield srv


def _form(page, button: str):
    return page.locator('[data-testid="stForm"]').filter(has=page.get_by_role("button", name=button))


@pytest.mark.parametrize("width,height", SIZES)
def test_add_check_dry_run_and_run_a_source(browser, server: Server, artifacts: Path, width: int, height: int):
    from playwright.sync_api import expect

    name, store = f"Handbook share {width}", f"handbook-{width}"
    with app_page(browser, server, artifacts, "sources", width=width, height=height) as page:
        expect(page.get_by_role("heading", name="🔌 Sources")).to_be_visible()
        add = page.get_by_test_id("stExpander").filter(has_text="➕ Add a source").locator("details").first
        add.wait_for()
        if add.get_attribute("open") is None:  # folded once a source exists
            add.locator("summary").click()
        form = _form(page, "Add source")
        expect(form.get_by_label("Source name *", exact=True)).to_be_editable()
        form.get_by_label("Source name *", exact=True).fill(name)
        form.get_by_label("Store *", exact=True).fill(store)
        form.get_by_label("Name *", exact=True).fill(store)  # the dict kind's own setting "name"
        secret = form.get_by_label("Password", exact=True)
        assert secret.get_attribute("type") == "password" and secret.input_value() == ""
        secret.fill(SECRET)
        form.get_by_label("Include (globs)", exact=True).fill("policies/*")
        form.get_by_label("Run every (minutes)", exact=True).fill("60")
        scroll_to(form.get_by_role("button", name="Add source"))
        page.screenshot(path=str(artifacts / f"42-sources-add-{width}.png"))
        rerun_and_wait(page, lambda: form.get_by_role("button", name="Add source").click())
        expect(page.get_by_text(f"Added the source {name} into {store}")).to_be_visible()
        expect(page.get_by_text("every 1 h, paused")).to_have_count(0)
        expect(page.get_by_text("Schedule: every 1 h")).to_be_visible()

        rerun_and_wait(page, lambda: page.get_by_role("button", name="🔌 Check connection").click())
        expect(page.get_by_text("Connection: reached")).to_be_visible()
        rerun_and_wait(page, lambda: page.get_by_role("button", name="🧪 Dry run").click())
        expect(page.get_by_text("Dry run: 3 added (nothing was changed)")).to_be_visible()
        scroll_to(page.get_by_text("Dry run: 3 added"))
        page.screenshot(path=str(artifacts / f"42-sources-dry-run-{width}.png"))
        rerun_and_wait(page, lambda: page.get_by_role("button", name="Close the dry run").click())

        rerun_and_wait(page, lambda: page.get_by_role("button", name="▶️ Run now").click())
        last = page.get_by_text("Last run: done")
        expect(last).to_be_visible(timeout=90_000)
        wait_for_app(page)
        expect(last).to_contain_text("2 added, 1 failed")
        picked = page.get_by_role("combobox", name="The files of the run")
        expect(picked).to_have_value(re.compile(r"^✅ done · .* · 2 added, 1 failed$"))
        failed = page.get_by_text("1 file failed:")
        expect(failed).to_contain_text("policies/locked.docx: policies/locked.docx vanished")
        page.get_by_text("⚙️ Settings").click()
        expect(page.get_by_text("Password: set")).to_be_visible()
        scroll_to(failed)
        page.screenshot(path=str(artifacts / f"42-sources-run-{width}.png"))
        full_shot(page, artifacts / f"42-sources-full-{width}.png")
        assert SECRET not in page.content()
        for field in page.locator("input").all():
            assert SECRET not in (field.input_value() or "")
    assert SECRET not in server.output()
