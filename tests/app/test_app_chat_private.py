"""Chat sessions on the Chat and Settings pages are private to their user (issue 28), headless
(AppTest): a member's sessions are not listed, opened by a deep link or traced for another member,
and the chat's store list holds only the stores the person may read."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.chat import Chats
from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import APP, fresh_caches, shown, use_fake_model

PW = "correct horse battery"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


@pytest.fixture
def team():
    """Admin root, members ana and bo; ana's store ``hr`` and her chat over it (one answered message);
    the system, that session's id and the chat state."""
    system = System(load_settings())
    wb = Workbench(system)
    system.people.set_up_admin("root", PW, "The Admin")
    for name in ("ana", "bo"):
        system.people.accounts.create(name, PW, display_name=name.title())
    ana = wb.as_user(system.people.accounts.actor("ana"))
    ana.ingest_file("hr", b"The parental leave policy grants sixteen weeks.", "leave.md")
    chats = Chats(system)
    chat = chats.service(ana)
    s = chat.create_session("Ana's leave question", stores=["hr"])
    chat.send(s.id, "How long is parental leave?")
    yield system, s.id, chats
    system.close()


def chat_page(system: System, username: str, session: str | None = None, page: str = "pages/chat.py") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["session_token"] = system.people.accounts.start_session(username)
    if session is not None:
        at.query_params["session"] = session
    at.run()
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def test_a_members_chats_are_not_listed_or_openable_for_another(team):
    system, sid, chats = team
    wb = Workbench(system)
    at = chat_page(system, "ana")
    assert at.title[0].value == "💬 Ana's leave question"
    assert at.chat_message and "sixteen weeks" in at.chat_message[1].markdown[0].value
    at = chat_page(system, "bo", session=sid)  # a deep link to ana's chat
    assert at.title[0].value == "💬 Chat" and not at.chat_message
    assert not at.sidebar.radio  # no session to pick
    assert all("hr" not in m.options for m in at.sidebar.multiselect)
    # bo's own chat is stored as his, and ana does not see it
    at.chat_input[0].set_value("What is the on-call rota?").run()
    assert not at.exception
    mine = [s for s in chats.service(wb).sessions() if s.owner == "bo"]
    assert len(mine) == 1
    at = chat_page(system, "ana")
    assert [shown(o) for r in at.sidebar.radio for o in r.options] == ["Ana's leave question"]
