"""What the AppTest files (tests/test_app_*.py) share: the app's path, fresh Streamlit caches, the
fake embedding model through its setting, opening a page, and reading what a page says.

The pages write names, file text and messages as inert Markdown (:func:`knowledge.text.render.inert`:
punctuation as character references, ``&#46;`` for ``.``). AppTest reports an element's Markdown
source, so importing this module makes the ``value`` of Markdown, caption, heading and alert
elements read with those references decoded, as the browser shows them (the Markdown markup the
page itself writes, ``**bold**``, stays; one-line HTML from :mod:`knowledge.text.render` is left as it is:
read it with :func:`answer_text`). :func:`shown` does the same for any string (a label).

Imported as ``from tests.helpers.app import ...``.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest, element_tree

from tests.helpers.env import REPO

APP = str(REPO / "app.py")


def shown(markdown: str) -> str:
    """``markdown`` with its character references decoded (``&#91;`` is ``[``), as a reader sees it."""
    return html.unescape(markdown)


def answer_text(markup: str) -> str:
    """The text a browser shows for a chat message's HTML (:func:`knowledge.text.render.answer_html`)."""
    from bs4 import BeautifulSoup

    return BeautifulSoup(markup.replace("&#10;", "\n"), "html.parser").get_text()


def _decoded(prop: property) -> property:
    def value(self):
        raw = prop.fget(self)
        # One-line HTML (knowledge.text.render's output) is read by the browser as HTML: left as it is.
        return raw if not isinstance(raw, str) or raw.startswith("<div class=") else shown(raw)

    return property(value)


for _cls in (element_tree.AlertBase, element_tree.Markdown, element_tree.HeadingBase):
    if not vars(_cls).get("_knowledge_decoded"):  # once, however often this module is imported
        _cls.value = _decoded(vars(_cls)["value"])
        _cls._knowledge_decoded = True


def use_fake_model(monkeypatch: pytest.MonkeyPatch, dimension: int = 8) -> str:
    """Make the app (and any ``Workbench(load_settings())`` of the test) embed with the
    deterministic ``fake/hash-<dimension>`` model, through the setting a user would set
    (``KNOWLEDGE_EMBEDDINGS__MODEL``): the default template names it, stores record it. Returns the
    model's name."""
    name = f"fake/hash-{dimension}"
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", name)
    return name


@contextmanager
def fresh_caches() -> Iterator[None]:
    """Streamlit's resource and data caches cleared before and after: each test gets its own
    Workbench (made from this test's settings) and no cached results of another test."""
    st.cache_resource.clear()
    st.cache_data.clear()
    try:
        yield
    finally:
        st.cache_resource.clear()
        st.cache_data.clear()


_COMPONENTS: list = []  # the BidiComponentManager the AppTests of this run share


def open_app(page: str | None = None, *, timeout: float = 60) -> AppTest:
    """The app run once, then switched to ``page`` (e.g. ``"pages/files.py"``) and run again; fails
    the test on an exception of either run."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    # On an AppTest's first run Streamlit (1.67) scans the metadata of every installed package for
    # custom components: ~0.3 s of CPU per AppTest, a fifth of the page tests' time. The installed
    # packages do not change during a test run (and the app registers no components), so the
    # AppTests share the first one's manager. Where a Streamlit version keeps it elsewhere, each
    # AppTest scans again, as before.
    shared = hasattr(at, "_bidi_component_manager")
    if shared and _COMPONENTS:
        at._bidi_component_manager = _COMPONENTS[0]
    at.run()
    if shared and not _COMPONENTS and at._bidi_component_manager is not None:
        _COMPONENTS.append(at._bidi_component_manager)
    assert not at.exception, at.exception
    if page is not None:
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def page_text(at: AppTest) -> str:
    """Everything the page says in Markdown and captions, HTML entities decoded as a reader sees them."""
    return html.unescape("\n".join([m.value for m in at.markdown] + [c.value for c in at.caption]))


def button(at: AppTest, key: str):
    """The button with widget key ``key`` (``StopIteration`` if the page has none)."""
    return next(b for b in at.button if b.key == key)
