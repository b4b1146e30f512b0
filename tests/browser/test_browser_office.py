"""Issue 27 in a real browser: a slide deck, a workbook and a mail with an attachment dropped on a
store are indexed and found with their provenance; a password-protected workbook asks for its
password and Retry reads it; "Add a web page" fetches a page and the page it links to (served on
loopback, allowed by the setting). Screenshots at 1280x800 and 390 px wide go to
``test-artifacts/browser/office/``."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.helpers.browser import (
    Server,
    app_page,
    create_store,
    drop_files,
    rerun_and_wait,
    scroll_to,
    serve,
    shot,
    wait_for_app,
)
from tests.helpers.web import Site, page

pytestmark = [pytest.mark.browser, pytest.mark.model]


@pytest.fixture(scope="module")
def office_artifacts() -> Path:
    from tests.helpers.env import REPO

    out = REPO / "test-artifacts" / "browser" / "office"
    out.mkdir(parents=True, exist_ok=True)
    return out


@pytest.fixture(scope="module")
def web_site() -> Iterator[Site]:
    s = Site()
    s.html(
        "/guide.html",
        page(
            "Harbour guide",
            "Moorings are assigned by the harbour master, berth QUAY-7731.",
            ("/tides.html", "https://elsewhere.invalid/x"),
        ),
    )
    s.html("/tides.html", page("Tide tables", "Spring tides peak two days after the full moon."))
    yield s
    s.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(
        tmp_path_factory.mktemp("browser-office"), env_extra={"KNOWLEDGE_INGEST__WEB_ALLOW_PRIVATE": json.dumps(True)}
    ) as srv:
        yield srv


def office_files(folder: Path) -> list[Path]:
    import openpyxl
    from msoffcrypto.format.ooxml import OOXMLFile
    from pptx import Presentation

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Lighthouse budget"
    slide.placeholders[1].text = "The lamp costs 4,200 a year."
    slide.notes_slide.notes_text_frame.text = "Ask the keeper about PELICAN-2291."
    (folder / "budget.pptx").write_bytes(_saved(deck))

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Keepers"
    sheet.append(["Keeper", "Share"])
    sheet.append(["Morag", 0.25])
    sheet["B2"].number_format = "0%"
    (folder / "keepers.xlsx").write_bytes(_saved(book))
    out = io.BytesIO()
    OOXMLFile(io.BytesIO(_saved(book))).encrypt("tika", out)
    (folder / "locked.xlsx").write_bytes(out.getvalue())

    mail = EmailMessage()
    mail["Subject"] = "Storm report"
    mail["From"] = "keeper@example.org"
    mail["To"] = "office@example.org"
    mail.set_content("The report is attached.")
    mail.add_attachment(
        b"# Storm\n\nThe north window cracked at 3 am, ticket GANNET-8812.\n",
        maintype="text",
        subtype="markdown",
        filename="storm.md",
    )
    (folder / "storm.eml").write_bytes(bytes(mail))
    return [folder / n for n in ("budget.pptx", "keepers.xlsx", "storm.eml", "locked.xlsx")]


def _saved(doc) -> bytes:
    buf = io.BytesIO()
    doc.save(buf)
    return buf.getvalue()


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_office_files_a_password_and_a_web_page(
    browser, server: Server, office_artifacts: Path, web_site: Site, tmp_path: Path, width: int, height: int
):
    from playwright.sync_api import expect

    files = office_files(tmp_path)
    store = f"office-{width}"
    with app_page(browser, server, office_artifacts, "stores", width=width, height=height) as pg:
        create_store(pg, store)
        drop_files(pg, [str(p) for p in files])
        for name in ("budget.pptx", "keepers.xlsx", "storm.eml"):
            expect(pg.get_by_text(re.compile(rf"{re.escape(name)} — \d+ chunks?"))).to_be_visible(timeout=180_000)
        expect(pg.get_by_text("Batch done", exact=False)).to_be_visible(timeout=180_000)
        wait_for_app(pg)
        shot(pg, office_artifacts, f"27-office-batch-{width}.png")

        password = pg.locator('input[type="password"]')
        scroll_to(password)
        rerun_and_wait(pg, lambda: (password.fill("tika"), password.press("Enter")))
        rerun_and_wait(pg, lambda: pg.get_by_role("button", name="🔁 Retry").click())
        expect(
            pg.locator('[data-testid="stAlertContentSuccess"]').filter(has_text=re.compile(r"locked\.xlsx.*Now searchable"))
        ).to_be_visible(timeout=120_000)
        pg.screenshot(path=str(office_artifacts / f"27-office-password-{width}.png"))

        asked = {p: web_site.asked(p) for p in ("/guide.html", "/tides.html")}
        wait_for_app(pg)  # the retry's flash and the list below it are drawn: the page no longer moves
        pg.get_by_text("Add a web page").click()
        form = pg.locator('[data-testid="stForm"]').filter(has=pg.get_by_role("button", name="Add web page"))
        url_box, depth_box = form.get_by_label("Web page URL", exact=True), form.get_by_label("Depth", exact=True)
        expect(url_box).to_be_visible(timeout=30_000)
        url_box.fill(web_site.url("/guide.html"))
        url_box.press("Tab")  # each field's value is handed to the form before the submit
        depth_box.fill("1")
        depth_box.press("Tab")
        expect(url_box).to_have_value(web_site.url("/guide.html"))
        expect(depth_box).to_have_value("1")
        rerun_and_wait(pg, lambda: form.get_by_role("button", name="Add web page").click())
        # the submit was taken: no warning or error under the form (the reason is printed when there is one)
        said = form.locator('[data-testid^="stAlertContent"]')
        assert said.count() == 0, f"adding the web page was refused: {said.all_inner_texts()}"
        for path in ("/guide.html", "/tides.html"):
            # the page's text keeps a word joiner after "http:" (names are shown inert, never as links)
            shown = web_site.url(path).replace("://", ":\u2060//")
            expect(pg.get_by_text(f"{shown} — ").first).to_be_visible(timeout=180_000)
        wait_for_app(pg)
        shot(pg, office_artifacts, f"27-web-pages-{width}.png")
        assert all(web_site.asked(p) == n + 1 for p, n in asked.items())  # each page fetched once

        pg.goto(f"{server.url}/search")
        wait_for_app(pg)
        store_box = pg.get_by_role("combobox", name="Store", exact=True)
        if store_box.input_value() != store:
            store_box.click()
            rerun_and_wait(pg, lambda: pg.get_by_role("option", name=store, exact=True).click())
        query = pg.get_by_role("textbox", name="Query", exact=True)
        for words, expected in (
            ("PELICAN-2291", "budget.pptx"),
            ("GANNET-8812", "storm.eml"),
            ("QUAY-7731", web_site.url("/guide.html").replace("://", ":\u2060//")),
        ):
            rerun_and_wait(pg, lambda w=words: (query.fill(w), query.press("Enter")))
            expect(pg.get_by_text(re.compile(rf"{store}: \d+ results? in"))).to_be_visible(timeout=60_000)
            expect(pg.get_by_text(expected).first).to_be_visible(timeout=60_000)
        shot(pg, office_artifacts, f"27-search-web-{width}.png")
