"""The Evaluate page in a real browser: upload a question file, evaluate a store, see the metrics
table, the bar chart and the ranked files; at 1280x800 and on a 390-px-wide phone screen
(screenshots in test-artifacts/browser/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knowledge.cli import main
from tests.helpers.browser import ARTIFACTS, app_page, rerun_and_wait, scroll_to, serve, shot

pytestmark = [pytest.mark.browser, pytest.mark.model]

CHAPTERS = [
    "ch03-04-comments.md",
    "ch09-00-error-handling.md",
    "ch01-00-getting-started.md",
    "ch08-00-common-collections.md",
]
QUESTIONS = (
    "question\trelevant\n"
    "How do I write a comment that spans lines?\tch03-04-comments.md\n"
    "Which errors are recoverable and which are not?\tch09-00-error-handling.md\n"
    "Which collections does the standard library have?\tch08-00-common-collections.md\n"
)


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
    from tests.helpers.env import CORPUS

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

        rerun_and_wait(page, lambda: page.get_by_role("button", name=re.compile("Evaluate$")).click(), timeout=180_000)
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
        scroll_to(page.get_by_text("Metrics per store and ranking"))
        page.screenshot(path=str(artifacts / f"evaluate-{width}-2-results-view.png"))
        scroll_to(chart)
        page.screenshot(path=str(artifacts / f"evaluate-{width}-3-chart.png"))
        scroll_to(ranked.first)
        page.screenshot(path=str(artifacts / f"evaluate-{width}-4-ranked-files.png"))
        # the page fits the screen's width: nothing scrolls sideways
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width + 1, scroll_width


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_type_questions_then_save_and_evaluate(browser, server, artifacts, width, height):
    """Questions typed on the page, kept as a named set and evaluated at once; the rankings offered
    in the product's words (Hybrid, Semantic, Keyword)."""
    from playwright.sync_api import expect

    with app_page(browser, server, artifacts, "evaluate", width=width, height=height, timeout=60_000) as page:
        typed = page.get_by_test_id("stExpander").filter(has_text="Type questions").first
        area = typed.locator("textarea")
        if not area.is_visible():  # collapsed once another test has kept a set
            typed.locator("summary").click()
        rerun_and_wait(
            page,
            lambda: (
                area.fill(
                    "How do I write a comment that spans lines? | ch03-04-comments.md\n"
                    "Which errors are recoverable? | ch09-00-error-handling.md"
                ),
                area.press("Control+Enter"),
            ),
        )
        name = typed.locator("input[type=text]").first
        rerun_and_wait(page, lambda: (name.fill(f"typed-{width}"), name.press("Enter")))
        shot(page, artifacts, f"evaluate-{width}-5-typed.png")
        rerun_and_wait(
            page, lambda: typed.get_by_role("button", name=re.compile("Save and evaluate")).click(), timeout=180_000
        )
        expect(page.get_by_text(f"Saved the question set typed-{width}: 2 questions")).to_be_visible()
        expect(page.get_by_text("Metrics per store and ranking")).to_be_visible(timeout=120_000)
        expect(page.locator('[data-testid="stException"]')).to_have_count(0)
        rankings = page.get_by_test_id("stMultiSelect").filter(has_text="Rankings").first
        expect(rankings).to_contain_text("Hybrid")
        scroll_to(page.get_by_text("Metrics per store and ranking"))
        shot(page, artifacts, f"evaluate-{width}-6-typed-evaluated.png")
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width + 1, scroll_width


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_the_playground_speaks_the_glossary(browser, server, artifacts, width, height):
    """The playground's ranking box offers Hybrid / Semantic / Keyword and a hit's bar reads
    "similarity … · keyword score … · rank score …"; the chart names what it counts."""
    from playwright.sync_api import expect

    with app_page(
        browser,
        server,
        artifacts,
        "search?store=book&q=comments%20that%20span%20lines",
        width=width,
        height=height,
        timeout=60_000,
    ) as page:
        expect(page.get_by_test_id("stProgress").first).to_contain_text(
            re.compile(r"similarity -?\d\.\d{3} · keyword score .+ · rank score \d\.\d{4}"), timeout=120_000
        )
        expect(page.get_by_text("Order: rank score (semantic and keyword rankings merged)")).to_be_visible()
        box = page.get_by_role("combobox", name="Ranking")
        box.click()
        options = page.get_by_role("option")
        expect(options).to_have_text(["Hybrid", "Semantic", "Keyword"])
        shot(page, artifacts, f"playground-{width}-ranking.png")
        page.keyboard.press("Escape")
        body = page.locator("body").inner_text()
        for retired in ("exact words", "combined", "Top 50 scores", "Vector only", "Words only"):
            assert retired not in body, retired


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_the_rerank_toggle_reorders_by_the_rerank_score_and_shows_it(browser, server, artifacts, width, height):
    """Rerank on: each hit's bar adds "rerank score …", the caption says the rerank score orders the
    list; off again: neither."""
    from playwright.sync_api import expect

    with app_page(
        browser,
        server,
        artifacts,
        "search?store=book&q=comments%20that%20span%20lines",
        width=width,
        height=height,
        timeout=60_000,
    ) as page:
        bars = page.get_by_test_id("stProgress")
        expect(bars.first).to_contain_text(re.compile(r"rank score \d\.\d{4}$"), timeout=120_000)
        toggle = page.get_by_text("Rerank", exact=True)
        scroll_to(toggle)
        rerun_and_wait(page, toggle.click)
        expect(bars.first).to_contain_text(re.compile(r"rank score \d\.\d{4} · rerank score \d\.\d{4}"), timeout=120_000)
        expect(page.get_by_text("Order: rerank score (the best passages reranked)")).to_be_visible()
        shot(page, artifacts, f"playground-{width}-reranked.png")
        rerun_and_wait(page, toggle.click)
        expect(page.get_by_text("Order: rank score (semantic and keyword rankings merged)")).to_be_visible(timeout=120_000)
        expect(page.get_by_text(re.compile("rerank score"))).to_have_count(0)


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_the_app_menu_has_no_record_screen(browser, server, artifacts, width, height):
    """The main menu (top right) offers the theme and About; no Record screen, Print, Rerun or Deploy."""
    from playwright.sync_api import expect

    with app_page(browser, server, artifacts, "evaluate", width=width, height=height) as page:
        page.get_by_test_id("stMainMenu").locator("button").first.click()
        items = page.locator('[data-testid^="stMainMenuItem-"]')
        expect(items.first).to_be_visible()
        keys = [items.nth(i).get_attribute("data-testid") for i in range(items.count())]
        assert "stMainMenuItem-about" in keys, keys
        for gone in ("recordScreencast", "print", "rerun", "clearCache"):
            assert f"stMainMenuItem-{gone}" not in keys, keys
        expect(page.get_by_text("Record screen")).to_have_count(0)
        expect(page.get_by_text("Deploy")).to_have_count(0)
        page.screenshot(path=str(artifacts / f"menu-{width}.png"))
