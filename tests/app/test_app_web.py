"""The Vector stores page's "Add a web page": a page from a real HTTP server on 127.0.0.1 fetched,
ingested and listed under its URL; refused with the default settings."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.workbench import Workbench
from tests.helpers.app import button, fresh_caches, open_app, use_fake_model
from tests.helpers.web import Site, page


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


@pytest.fixture
def fake_model(monkeypatch):
    return use_fake_model(monkeypatch, 8)


def make_store(name: str = "Notes") -> None:
    wb = Workbench(load_settings())
    wb.create_store(name)
    wb.close()


def add_web_page(at: AppTest, store: str, url: str, depth: int = 0) -> AppTest:
    [box] = [t for t in at.text_input if t.label == "Web page URL" and t.form_id == f"web:{store}"]
    box.input(url)
    [d] = [n for n in at.number_input if n.label == "Depth" and n.form_id == f"web:{store}"]
    d.set_value(depth)
    button(at, f"FormSubmitter:web:{store}-Add web page").click().run()
    assert not at.exception
    return at


def finish(at: AppTest, store: str) -> AppTest:
    job = at.session_state[f"job:{store}"]
    assert job.wait(60)
    at.run()
    assert not at.exception
    return at


def files(at: AppTest) -> list[str]:
    table = next(d.value for d in at.dataframe if list(d.value.columns)[:1] == ["file"])
    return sorted(table["file"])


def test_add_a_web_page_and_its_links(fake_model, monkeypatch, site: Site):
    monkeypatch.setenv("KNOWLEDGE_INGEST__WEB_ALLOW_PRIVATE", "true")
    site.html("/", page("Orchard", "The orchard grows quinces and medlars.", ("/pears.html", "/gone.html")))
    site.html("/pears.html", page("Pears", "Pears ripen after they are picked."))
    make_store()
    at = open_app("pages/stores.py")
    assert any(e.label == "🌐 Add a web page" for e in at.expander)
    at = finish(add_web_page(at, "Notes", site.url("/"), depth=1), "Notes")
    assert files(at) == [site.url("/"), site.url("/pears.html")]
    said = ("\n".join(m.value for m in at.markdown) + "\n".join(e.value for e in at.error)).replace("\u2060", "")
    assert "not found (http 404)" in said.lower() and site.url("/gone.html") in said
    # the same page again: unchanged, nothing added
    at = finish(add_web_page(at, "Notes", site.url("/pears.html")), "Notes")
    assert files(at) == [site.url("/"), site.url("/pears.html")]
    assert "unchanged" in "\n".join(m.value for m in at.markdown)


def test_a_loopback_page_is_refused_by_default(fake_model, site: Site):
    site.html("/", page("Home", "Inside."))
    make_store()
    at = finish(add_web_page(open_app("pages/stores.py"), "Notes", site.url("/")), "Notes")
    errors = "\n".join(e.value for e in at.error)
    assert "loopback address" in errors and "ingest.web_allow_private" in errors
    assert site.requests == []


def test_a_bad_url_is_a_message(fake_model):
    make_store()
    at = add_web_page(open_app("pages/stores.py"), "Notes", "ftp://example.org/file")
    assert "only http:// and https://" in at.error[0].value.replace("\u2060", "")
