"""The Evaluate page in a real browser: upload a question file, evaluate a store, see the metrics
table, the bar chart and the ranked files; at 1280x800 and on a 390-px-wide phone screen
(screenshots in test-artifacts/browser/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_browser import ARTIFACTS, app_page, browser, explained, rerun_and_wait, serve, shot, wait_for_app  # noqa: F401

from knowledge.cli import main

pytestmark = [pytest.mark.browser, pytest.mark.model]

CHAPTERS = ["ch03-04-comments.md", "ch09-00-error-handling.md", "ch01-00-getting-started.md",
            "ch08-00-common-collections.md"]
QUESTIONS = ("question\trelevant\n"
             "How do I write a comment that spans lines?\tch03-04-comments.md\n"
             "Which errors are recoverable and which are not?\tch09-00-error-handling.md\n"
             "Which collections does the standard library have?\tch08-00-common-collections.md\n")


@pytest.fixture(scope="module")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob("evaluate-*.png"):
        old.unlink()
    return ARTIFACTS


@pytest.fixture(scope="module")
def server(tmp_path_factory, corpus_dir):
    base = tmp_path_factory.mktemp("browser-evaluate")
    book = corpus_dir / "md" / "rust-book"
    assert main(["--data-dir", str(base / "data"), "ingest", "book", *[str(book / c) for c in CHAPTERS]]) == 0
    with serve(base) as srv:
        yield srv


@pytest.fixture(scope="module")
def corpus_dir():
    from conftest import CORPUS

    if not CORPUS.is_dir():
        import os

        if os.environ.get("CI") == "true":
            pytest.fail(f"The corpus folder {CORPUS} is missing under CI=true.")
        pytest.skip(f"corpus folder {CORPUS} not present")
    return CORPUS


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_upload_a_question_file_and_see_the_table_and_chart(browser, server, artifacts, tmp_path, width, height):
    from playwright.sync_api import expect

    questions = tmp_path / "book-questions.tsv"
    questions.write_text(QUESTIONS)
    with app_page(browser, server, artifacts, "evaluate", width=width, height=height, timeout=60_000) as page:
        expect(page.locator("h1").first).to_contain_text("Evaluate retrieval")
        rerun_and_wait(page, lambda: page.set_input_files("input[type=file]", [str(questions)]))
        expect(page.get_by_text("Saved the question set book-questions: 3 questions")).to_be_visible()
        shot(page, artifacts, f"evaluate-{width}-1-uploaded.png")

        rerun_and_wait(page, lambda: page.get_by_role("button", name=re.compile("Evaluate$")).click(),
                       timeout=180_000)
        expect(page.get_by_text("Metrics per store and ranking")).to_be_visible(timeout=120_000)
        table = page.locator('[data-testid="stDataFrame"]:visible').first  # the editor is in a closed expander
        expect(table).to_be_visible()
        chart = page.locator('[data-testid="stVegaLiteChart"]:visible').first
        expect(chart).to_be_visible()
        expect(chart.locator("canvas, svg").first).to_be_visible()
        expect(page.get_by_text("First relevant rank per question")).to_be_visible()
        # the ranked files of the first question, an ordered list, the relevant ones marked
        ranked = page.get_by_role("listitem").filter(has_text=re.compile(r"[✅⬜] ch\d"))
        expect(ranked.first).to_contain_text("✅ ch03-04-comments.md")
        expect(page.locator('[data-testid="stException"]')).to_have_count(0)
        page.get_by_text("Metrics per store and ranking").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / f"evaluate-{width}-2-results-view.png"))
        chart.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / f"evaluate-{width}-3-chart.png"))
        ranked.first.scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / f"evaluate-{width}-4-ranked-files.png"))
        # the page fits the screen's width: nothing scrolls sideways
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width + 1, scroll_width
