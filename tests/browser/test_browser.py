"""The app in a real browser: ``streamlit run app.py`` on a free localhost port, driven in Debian's
Chromium by Playwright for Python (tests/helpers/browser.py, the fixtures in tests/browser/conftest.py).

The server runs with its own temporary data folder (``KNOWLEDGE_DATA_DIR``) and the real bundled
embedding model. Each step saves a screenshot under ``test-artifacts/browser/`` at the repo root.

Chromium comes from Debian (``apt-get install -y chromium``; ``.ci/run`` installs it), never from
``playwright install``. Where it is missing the tests skip, except under ``CI=true`` where they fail.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.browser import (
    Server,
    drop_files,
    explained,
    read_hits,
    rerun_and_wait,
    serve,
    shot,
    squash,
    wait_for_app,
)

pytestmark = [pytest.mark.browser, pytest.mark.model]


def test_home_page_opens_with_title_and_navigation(page, server: Server, artifacts: Path):
    from playwright.sync_api import expect

    page.goto(server.url)
    wait_for_app(page)
    expect(page).to_have_title("knowledge")
    expect(page.locator("h1").first).to_contain_text("knowledge")
    nav = page.locator('[data-testid="stSidebarNav"]')
    for title in ("Home", "Vector stores", "Search playground", "Files"):
        expect(nav).to_contain_text(title)
    expect(page.locator('[data-testid="stMetric"]').first).to_contain_text("Stores")
    shot(page, artifacts, "01-home.png")


def test_upload_a_pdf_and_a_docx_then_search_finds_file_and_page(page, server: Server, artifacts: Path, corpus: Path):
    from playwright.sync_api import expect

    from knowledge.ingest import read_document

    pdf, docx = corpus / "pdf" / "pdflatex-4-pages.pdf", corpus / "docx" / "hdr-header-footer.docx"
    pdf_doc = read_document(pdf)
    pdf_pages = {s.page: (s.char_start, s.char_end) for s in pdf_doc.sections}
    assert sorted(pdf_pages) == [1, 2, 3, 4]
    docx_text = squash(read_document(docx).text)
    assert docx_text.startswith("Header for section-1")
    provenance = page.locator('[data-testid="stMarkdownContainer"]').filter(
        has_text=re.compile(r"^\d+\. .+ · chunks? [\d–, ]+$")
    )  # (JavaScript regex: no named groups)

    with explained(page, server, artifacts):
        # Home, then the sidebar's "Vector stores" (as a person would; see the report on /stores).
        page.goto(server.url)
        wait_for_app(page)
        rerun_and_wait(page, lambda: page.get_by_role("link", name="Vector stores", exact=True).click())
        expect(page.locator("h1").first).to_contain_text("Vector stores")
        shot(page, artifacts, "02-stores.png")

        # A new store.
        form = page.locator('[data-testid="stForm"]').filter(has=page.get_by_role("button", name="Create store"))
        form.get_by_label("Name", exact=True).fill("browser-demo")
        rerun_and_wait(page, lambda: form.get_by_role("button", name="Create store").click())
        expect(page.get_by_text("Created the store browser-demo")).to_be_visible()

        # Both files into the drag-and-drop uploader; wait for their outcomes (the model embeds).
        drop_files(page, [str(pdf), str(docx)])
        expect(page.get_by_text(re.compile(r"pdflatex-4-pages\.pdf — \d+ chunks, 4 pages"))).to_be_visible(timeout=180_000)
        expect(page.get_by_text(re.compile(r"hdr-header-footer\.docx — \d+ chunks?"))).to_be_visible(timeout=180_000)
        expect(page.get_by_text("Indexed files (2)")).to_be_visible(timeout=60_000)
        wait_for_app(page)
        # The page stays whole and current once the batch is done: the heading over the file list,
        # the list and the counts (a fragment run the browser had queued used to replace the
        # heading right after the page's full rerun). 1 s outlasts the batch's 0.5 s auto-rerun.
        page.wait_for_timeout(1_000)
        wait_for_app(page)
        expect(page.get_by_text("Indexed files (2)", exact=True)).to_be_visible(timeout=1_000)
        expect(page.locator('[data-testid="stMetric"]').filter(has_text="Indexed files")).to_contain_text("2", timeout=1_000)
        # stores and files: only the open tab runs, the Templates tab when it is opened
        expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(2, timeout=1_000)
        expect(page.locator('[data-testid="stAlertContentError"]')).to_have_count(0)
        shot(page, artifacts, "03-uploaded.png")
        rerun_and_wait(page, lambda: page.get_by_role("tab", name="Templates").click())
        expect(page.get_by_text("template is read-only")).to_be_visible(timeout=30_000)
        expect(page.locator('[data-testid="stDataFrame"]')).to_have_count(1, timeout=1_000)
        shot(page, artifacts, "03b-templates.png")
        rerun_and_wait(page, lambda: page.get_by_role("tab", name="Stores").click())
        expect(page.get_by_text("Indexed files (2)", exact=True)).to_be_visible(timeout=30_000)

        # The Search playground: choose the store, type a query on the PDF's text.
        rerun_and_wait(page, lambda: page.get_by_role("link", name="Search playground").click())
        expect(page.locator("h1").first).to_contain_text("Search playground")
        store_box = page.get_by_role("combobox", name="Store", exact=True)
        store_box.click()
        rerun_and_wait(page, lambda: page.get_by_role("option", name="browser-demo").click())
        expect(store_box).to_have_value("browser-demo")
        query = page.get_by_role("textbox", name="Query", exact=True)
        query.fill("Is there a difference between this text and some nonsense like Huardest gefburn?")
        shot(page, artifacts, "04-search.png")

        rerun_and_wait(page, lambda: query.press("Enter"))
        expect(page.get_by_text(re.compile(r"browser-demo: \d+ results? in"))).to_be_visible(timeout=60_000)
        expect(provenance.first).to_contain_text("pdflatex-4-pages.pdf")
        hits = read_hits(page)
        assert hits and hits[0]["file"] == "pdflatex-4-pages.pdf", hits
        for hit in (h for h in hits if h["file"] == "pdflatex-4-pages.pdf"):
            # The page shown is the page whose text holds the hit: its span lies inside that page,
            # and the snippet shown is the PDF's own text there.
            lo, hi = pdf_pages[hit["page"]]
            assert lo <= hit["start"] < hit["end"] <= hi, hit
            assert hit["snippet"] in squash(pdf_doc.text[hit["start"] : hit["end"]]), hit
        shot(page, artifacts, "05-results.png")

        # The DOCX's header text: that file first, its text shown, no page (DOCX has none).
        rerun_and_wait(page, lambda: (query.fill("Header for section-1"), query.press("Enter")))
        expect(provenance.first).to_contain_text("hdr-header-footer.docx", timeout=60_000)
        hits = read_hits(page)
        top = hits[0]
        assert top["file"] == "hdr-header-footer.docx" and top["page"] is None, hits
        assert "Header for section-1" in top["snippet"] and top["snippet"] in docx_text, top
        shot(page, artifacts, "06-results-docx.png")

        # Page 3 of the PDF by the payload filter: every hit says page 3 and holds page 3's text.
        rerun_and_wait(
            page,
            lambda: (
                query.fill("Is there a difference between this text and some nonsense like Huardest gefburn?"),
                query.press("Enter"),
            ),
        )
        page.get_by_text("Filters", exact=True).click()
        fields = page.get_by_role("textbox", name="Extra fields", exact=True)
        fields.fill("page = 3")
        rerun_and_wait(page, lambda: fields.press("Control+Enter"))
        expect(provenance.first).to_contain_text("pdflatex-4-pages.pdf · page 3", timeout=60_000)
        hits = read_hits(page)
        assert hits, "no hits on page 3"
        lo, hi = pdf_pages[3]
        for hit in hits:
            assert hit["file"] == "pdflatex-4-pages.pdf" and hit["page"] == 3, hit
            assert lo <= hit["start"] < hit["end"] <= hi, hit
            assert hit["snippet"] in squash(pdf_doc.text[hit["start"] : hit["end"]]), hit
        shot(page, artifacts, "07-results-page-3.png")


# Regression: with the pages in a folder named pages/, Streamlit started every new server in its
# old pages-folder mode and a first visitor's link to /stores ran that page without app.py.
def test_a_link_to_a_page_works_on_a_fresh_server(browser, tmp_path: Path, artifacts: Path):
    from playwright.sync_api import expect

    with serve(tmp_path) as fresh:  # nobody has opened / on this one
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = context.new_page()
        missing: list[str] = []
        pg.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
        try:
            pg.goto(f"{fresh.url}/stores")
            wait_for_app(pg)
            shot(pg, artifacts, "90-deep-link-fresh-server.png")
            expect(pg.locator('[data-testid="stException"]')).to_have_count(0, timeout=1_000)
            expect(pg.locator("h1").first).to_contain_text("Vector stores", timeout=1_000)
            # Once the gate is in (the fresh server's first page reloads itself to get it), a page
            # knows its server's root: a deep link makes no probe of /files/_stcore/health or
            # /files/_stcore/host-config, which answered 404.
            missing.clear()
            pg.goto(f"{fresh.url}/files")
            wait_for_app(pg)
            expect(pg.locator("h1").first).to_contain_text("Files", timeout=5_000)
            assert missing == [], missing
        finally:
            context.close()
