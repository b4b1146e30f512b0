"""A table hit on the pages, headless (AppTest; issue 43 item 3): the Search playground's card shows
a PDF table's header and the row the query names as a table, and its "Open in viewer" link opens
the page with the table outlined and the passage as a table; hostile cell text stays text."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from knowledge.config import load_settings
from knowledge.pagemodels import viewer as vm
from knowledge.workbench import Workbench
from tests.helpers.app import fresh_caches, open_app, page_text, use_fake_model
from tests.helpers.pdf_tables import HEADER, ROWS, ruled_table_pdf


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


def cells(markup: str, tag: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(rf"<{tag}>(.*?)</{tag}>", markup)]


def body_rows(markup: str) -> list[list[str]]:
    return [cells(r, "td") for r in re.findall(r"<tr>(.*?)</tr>", markup) if "<td>" in r]


def assert_inert(markup: str) -> None:
    for bad in ("<script", 'href="javascript', "<strong", "**", "$5$", "[x]("):
        assert bad not in markup, bad


def test_a_table_hit_is_a_table_on_the_card_and_in_the_viewer():
    wb = Workbench(load_settings())
    fid = wb.ingest_file("figures", ruled_table_pdf(), "figures.pdf").file_id
    wb.close()
    at = open_app("pages/search.py")
    name, _, revenue, _ = ROWS[1]  # South 2019 988 <script>x</script>
    at.text_input(key="pg_query").input(f"{name} {revenue}").run()
    assert not at.exception and not at.error
    cards = [m.proto.body for m in at.markdown if 'class="table-hit"' in m.proto.body]  # as sent to the browser
    assert cards, page_text(at)
    card = cards[0]
    assert cells(card, "th") == list(HEADER)
    assert list(ROWS[1]) in body_rows(card) and "<mark>South</mark>" in card  # the row the query names
    assert_inert(card)
    assert "South 2019 988" not in page_text(at).replace(" |", "")  # not a line of words
    # the full chunk is a table too
    full = [m.proto.body for m in at.markdown if m.proto.body.startswith('<div class="chunk">')]
    assert full and "<table" in full[0] and cells(full[0], "th") == list(HEADER)
    assert_inert(full[0])

    link = next(m.value for m in at.markdown if vm.OPEN_LABEL in m.value)
    url = re.search(r"\((view\?[^)]+)\)", link)
    assert url and f"file={fid}" in url.group(1)
    viewer = open_app()
    for key, value in parse_qsl(urlsplit(url.group(1)).query):
        viewer.query_params[key] = value
    viewer.switch_page("pages/viewer.py").run()
    assert not viewer.exception and not viewer.error
    shown = page_text(viewer)
    assert "in the table outlined in blue" in shown
    [image] = viewer.get("image")
    assert image.proto.imgs[0].caption == "Page 1 of 2"
    tables = [m.proto.body for m in viewer.markdown if 'class="viewer-table"' in m.proto.body]  # as sent
    assert tables
    assert cells(tables[0], "th") == list(HEADER)
    assert list(ROWS[1]) in body_rows(tables[0])
    assert_inert(tables[0])
    [expander] = [e for e in viewer.expander if e.label == "The passage's text"]
    assert expander.proto.expanded  # a table passage is open under the page
