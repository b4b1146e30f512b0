"""The Chat page in a real browser: drop two corpus PDFs into the chat input, ask a question whose
answer is in one of them, and check the answer cites that file and the page that holds the answer.

Reuses the server and browser helpers of ``tests/helpers/browser.py`` (Debian's Chromium under
Playwright, ``streamlit run app.py`` with its own data folder and the real bundled model).
Screenshots go to ``test-artifacts/browser/chat/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import (
    ARTIFACTS,
    Server,
    app_page,
    create_store,
    drop_files,
    explained,
    rerun_and_wait,
    serve,
    shot,
    squash,
    wait_for_app,
)

pytestmark = [pytest.mark.browser, pytest.mark.model]


@pytest.fixture(scope="module")
def chat_artifacts() -> Path:
    folder = ARTIFACTS / "chat"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("browser-chat")) as srv:
        yield srv


def test_attach_a_pdf_in_the_chat_and_the_answer_cites_file_and_page(
    browser, chat_server: Server, chat_artifacts: Path, corpus: Path
):
    from playwright.sync_api import expect

    from knowledge.ingest import read_document

    zen, blind = corpus / "pdf" / "google-doc-document.pdf", corpus / "pdf" / "pdflatex-4-pages.pdf"
    doc = read_document(zen)
    answer_pages = {
        s.page for s in doc.sections if "Explicit is better than implicit" in squash(doc.text[s.char_start : s.char_end])
    }
    assert answer_pages, "the corpus PDF changed"

    with app_page(browser, chat_server, chat_artifacts, "", width=1400, height=1600) as page:
        rerun_and_wait(page, lambda: page.get_by_role("link", name="Chat", exact=True).click())
        expect(page.locator("h1").first).to_contain_text("Chat")
        shot(page, chat_artifacts, "01-chat.png")

        # Drop both PDFs onto the chat input, then ask.
        page.set_input_files('[data-testid="stChatInput"] input[type=file]', [str(blind), str(zen)])
        box = page.get_by_test_id("stChatInputTextArea")
        box.fill("Is explicit better than implicit?")
        shot(page, chat_artifacts, "02-attached.png")
        rerun_and_wait(page, lambda: box.press("Enter"), timeout=240_000)

        messages = page.get_by_test_id("stChatMessage")
        expect(messages).to_have_count(2, timeout=240_000)
        user, answer = messages.nth(0), messages.nth(1)
        expect(user).to_contain_text("📎 pdflatex-4-pages.pdf, google-doc-document.pdf")
        expect(user).to_contain_text("Is explicit better than implicit?")
        expect(answer).to_contain_text("Retrieval only")
        expect(answer).to_contain_text("Explicit is better than implicit")
        # the first citation: the file and a page that holds the answer; it opens the chunk
        first = (
            answer.get_by_test_id("stExpander")
            .filter(has_text=re.compile(r"\[1\] "))
            .filter(has_not_text="vector_search(")
            .first
        )
        label = squash(first.locator("summary").inner_text())
        m = re.search(r"\[1\] (?P<file>.+?), page (?P<page>\d+)", label)
        assert m and m["file"] == "google-doc-document.pdf", label
        assert int(m["page"]) in answer_pages, (label, answer_pages)
        first.locator("summary").click()
        expect(first).to_contain_text("Explicit is better than implicit")
        # the tool call, collapsed
        expect(answer.get_by_test_id("stExpander").filter(has_text="vector_search").first).to_be_visible()
        # the sidebar lists both attachments, each with a remove button
        side = page.get_by_test_id("stSidebar")
        expect(side).to_contain_text("google-doc-document.pdf")
        expect(side.locator('[class*="st-key-rm_"]')).to_have_count(2)
        shot(page, chat_artifacts, "03-answer.png")


def test_chat_over_a_store_answers_from_the_chapter_and_the_citation_opens_it(
    browser, chat_server: Server, chat_artifacts: Path, corpus: Path
):
    """Create a store, drop three Rust-book chapters on it, open Chat, pick the store, ask a question
    answered in one chapter: the answer quotes it and its citation opens the chunk."""
    from playwright.sync_api import expect

    book = corpus / "md" / "rust-book"
    chapters = [book / n for n in ("ch03-01-variables-and-mutability.md", "ch15-02-deref.md", "ch08-01-vectors.md")]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(30_000)

    def shots(name: str) -> None:
        shot(page, chat_artifacts, f"{name}.png")
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(300)
        shot(page, chat_artifacts, f"{name}-390.png")
        page.set_viewport_size({"width": 1280, "height": 800})
        page.wait_for_timeout(300)

    try:
        with explained(page, chat_server, chat_artifacts):
            page.goto(chat_server.url)
            wait_for_app(page)
            rerun_and_wait(page, lambda: page.get_by_role("link", name="Vector stores", exact=True).click())
            for name in ("Other", "Team docs"):  # two stores: a new chat picks none by itself
                create_store(page, name)
                expect(page.get_by_text(f"Created the store {name}")).to_be_visible()
            expect(page.get_by_role("combobox", name="Open store")).to_have_value("Team docs")
            drop_files(page, [str(c) for c in chapters])
            for c in chapters:
                expect(page.get_by_text(re.compile(re.escape(c.name) + r" — \d+ chunks"))).to_be_visible(timeout=300_000)
            wait_for_app(page)
            shots("10-store-with-chapters")

            rerun_and_wait(page, lambda: page.get_by_role("link", name="Chat", exact=True).click())
            new_chat = page.get_by_role("button", name="New chat")
            if new_chat.is_enabled():  # the page opened an earlier chat of this server: start a new one
                rerun_and_wait(page, lambda: new_chat.click())
            expect(page.get_by_text("No knowledge yet")).to_be_visible()
            side = page.get_by_test_id("stSidebar")
            side.get_by_role("combobox", name="Stores this chat searches").click()
            rerun_and_wait(page, lambda: page.get_by_role("option", name="Team docs").click())
            page.keyboard.press("Escape")
            header = page.locator('[data-testid="stMarkdownContainer"]').filter(has_text=re.compile(r"^Searches "))
            expect(header).to_contain_text("Team docs")  # the header names the store as a chip
            expect(page.get_by_text("No knowledge yet")).to_have_count(0)
            shots("11-store-picked")

            box = page.get_by_test_id("stChatInputTextArea")
            box.fill("What is shadowing a variable with let?")
            rerun_and_wait(page, lambda: box.press("Enter"), timeout=240_000)
            messages = page.get_by_test_id("stChatMessage")
            expect(messages).to_have_count(2, timeout=240_000)
            answer = messages.nth(1)
            expect(answer).to_contain_text("The sentences of Team docs that best answer")
            first = (
                answer.get_by_test_id("stExpander")
                .filter(has_text=re.compile(r"\[1\] "))
                .filter(has_not_text="vector_search(")
                .first
            )
            label = squash(first.locator("summary").inner_text())
            assert "ch03-01-variables-and-mutability.md" in label, label
            first.locator("summary").click()
            expect(first).to_contain_text("shadow")
            expect(first).to_contain_text("store Team docs")
            # the sentence the answer quotes is marked in its passage (issue 31)
            marked = first.locator("mark.answer").first
            expect(marked).to_be_visible()
            assert squash(marked.inner_text()) in squash(answer.inner_text())
            marked.scroll_into_view_if_needed()
            shots("12-sentence-answer")
            # the source opens in the viewer: its file and characters in the link (issue 29)
            link = first.get_by_role("link", name=re.compile("Open in viewer"))
            expect(link).to_be_visible()
            href = link.get_attribute("href") or ""
            assert "view?store=Team+docs&file=" in href and "&start=" in href and "&end=" in href, href
            # every marker of the answer is a listed source: the list is numbered as the answer
            said = (
                answer.locator('[data-testid="stMarkdownContainer"]')
                .filter(has_text="The sentences of Team docs")
                .first.inner_text()
            )
            markers = set(re.findall(r"\[(\d+)\]", said))
            sources = (
                answer.get_by_test_id("stExpander")
                .filter(has_text=re.compile(r"\[\d+\] "))
                .filter(has_not_text="vector_search(")
                .filter(has_not_text="Also searched")
            )
            assert markers and markers == {str(i) for i in range(1, sources.count() + 1)}, (markers, sources.count())
            also = answer.get_by_test_id("stExpander").filter(has_text="Also searched")
            if also.count():  # what the answer did not use is collapsed
                expect(also.first.locator("details").first).not_to_have_attribute("open", "")
            assert "chat-" not in answer.inner_text() and "None" not in answer.inner_text()
            shots("12-answer-with-citation")
    finally:
        context.close()
