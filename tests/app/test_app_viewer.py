"""The viewer page (pages/viewer.py), headless (AppTest): a Markdown passage marked under its
heading, a PDF page with its navigation, a broken link in words, another member's file missing,
and the links to it from the search playground and the Files page."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest
from fpdf import FPDF
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.ingest import read_document
from knowledge.pagemodels import viewer as vm
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import fresh_caches, open_app, page_text, use_fake_model

PW = "correct horse battery"
GUIDE = (
    b"# Guide\n\nWelcome.\n\n## Install\n\n"
    + b"Some filler words here.\n\n" * 20
    + b"### Linux\n\nRun the installer with sudo and reboot.\n"
)


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


def pdf_bytes(pages: int = 3) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for p in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(180, 8, f"Page {p} says hello to the viewer.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def viewer(url: str, *, token: str | None = None) -> AppTest:
    """The app opened at the viewer URL ``url`` (its query parameters set, then the page run)."""
    at = open_app()
    if token is not None:
        at.session_state["session_token"] = token
        at.run()  # signed in: the pages of this account are registered
    for key, value in parse_qsl(urlsplit(url).query):
        at.query_params[key] = value
    at.switch_page("pages/viewer.py").run()
    assert not at.exception, at.exception
    return at


def test_a_markdown_passage_opens_under_its_heading():
    wb = Workbench(load_settings())
    fid = wb.ingest_file("docs", GUIDE, "guide.md").file_id
    wb.close()
    text = read_document(GUIDE, "guide.md").text
    s = text.index("Run the installer")
    at = viewer(vm.viewer_url("docs", fid, start=s, end=s + 30))
    assert at.title[0].value == "🔍 guide.md"
    heading = next(h for h in at.subheader if h.proto.anchor == vm.PASSAGE_ANCHOR)
    assert "Guide > Install > Linux" in heading.value
    marked = [m.value for m in at.markdown if vm.MARK[0] in m.value]
    assert len(marked) == 1 and "installer" in marked[0]
    [dl] = at.get("download_button")
    assert dl.proto.label == "⬇️ Download original"


def test_a_pdf_opens_at_its_page_and_pages_on():
    wb = Workbench(load_settings())
    data = pdf_bytes()
    fid = wb.ingest_file("pdfs", data, "three.pdf").file_id
    wb.close()
    text = read_document(data, "three.pdf").text
    s = text.index("Page 2 says")
    at = viewer(vm.viewer_url("pdfs", fid, start=s, end=s + 20, page=2))
    assert "The passage is highlighted on page 2." in page_text(at)
    [image] = at.get("image")
    assert image.proto.imgs[0].caption == "Page 2 of 3" and not at.error
    at.button(key="viewer-next").click().run()
    assert "Page 3 of 3" in at.get("image")[0].proto.imgs[0].caption
    assert "highlighted" not in page_text(at)  # the passage is not on page 3
    assert at.button(key="viewer-next").disabled


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("view?file=x", "needs both store= and file="),
        ("view?store=docs&file=file-00000000000000000000000000000000", "not in the store"),
        ("view?store=docs&file=f&start=9&end=3", "ends (3) before it starts (9)"),
    ],
)
def test_a_broken_link_says_what_is_wrong(url, words):
    Workbench(load_settings()).close()
    at = viewer(url)
    assert at.error and words in at.error[0].value


def test_another_members_file_is_missing():
    system = System(load_settings())
    system.people.set_up_admin("root", PW, "Root")
    system.people.accounts.create("ana", PW, display_name="Ana")
    system.people.accounts.create("bo", PW, display_name="Bo")
    ana = Workbench(system, actor=system.people.accounts.actor("ana"))
    fid = ana.ingest_file("hr", GUIDE, "guide.md").file_id
    url = vm.viewer_url("hr", fid)
    at = viewer(url, token=system.people.accounts.start_session("bo"))
    assert at.error and "not in the store 'hr'" in at.error[0].value and "Run the installer" not in page_text(at)
    at = viewer(url, token=system.people.accounts.start_session("ana"))
    assert not at.error and "Run the installer" in page_text(at)
    system.close()


def test_search_hits_and_file_rows_link_to_the_viewer():
    wb = Workbench(load_settings())
    fid = wb.ingest_file("docs", GUIDE, "guide.md").file_id
    wb.close()
    at = open_app("pages/search.py")
    at.text_input(key="pg_query").input("installer sudo").run()
    links = [m.value for m in at.markdown if vm.OPEN_LABEL in m.value]
    assert links and f"file={fid}" in links[0] and "#passage" in links[0]
    at = open_app("pages/files.py")
    assert list(at.dataframe[0].value["open"]) == [vm.viewer_url("docs", fid)]
    assert any(vm.OPEN_LABEL in m.value for m in at.markdown)
