"""The Chat and Settings pages, headless (streamlit.testing.v1.AppTest), on the fake embedder."""

from __future__ import annotations

import base64
import json

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.chat import Chats
from knowledge.config import load_settings
from knowledge.llm import LlmConfigs
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import answer_text, button, fresh_caches, open_app, shown, use_fake_model
from tests.helpers.chat import ChatCompletionsServer, pdf_bytes, png_bytes

NOTES = (
    "# Lighthouse\n\nThe keeper lit the lamp at dusk and trimmed the wick at midnight.\n\n"
    "# Bakery\n\nBread needs flour, water, salt and yeast; the dough rests overnight."
)


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 256)  # the app and every Workbench(load_settings()) here
    with fresh_caches():
        yield


def page(path: str) -> AppTest:
    return open_app(path)


def captions(at) -> list[str]:
    return [c.value for c in at.caption]


def test_chat_attach_by_drop_ask_and_see_answer_with_citations(tmp_path):
    at = page("pages/chat.py")
    assert at.title[0].value == "💬 Chat"
    at.chat_input[0].upload("notes.md", NOTES.encode(), "text/markdown")
    at.chat_input[0].upload("photo.png", png_bytes(), "image/png")
    at.chat_input[0].set_value("Who lit the lamp?")
    at.run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    # the user's bubble: a 📎 line naming what it attached, the text, the image
    user = at.chat_message[0]
    assert user.name == "user"
    assert "📎 notes.md, photo.png" in [c.value for c in user.caption]
    assert answer_text(user.markdown[0].value) == "Who lit the lamp?"
    images = user.get("image")
    assert len(images) == 1 and shown(images[0].proto.imgs[0].caption) == "photo.png"
    # the answer: the tool call collapsed, the passages quoted, citations that open the chunk
    answer = at.chat_message[1]
    labels = [shown(e.label) for e in answer.expander]
    assert labels[0].startswith('🔧 vector_search(query="Who lit the lamp?"')
    assert any(lbl.startswith("[1] notes.md — Lighthouse · similarity") for lbl in labels)
    assert "keeper lit the lamp" in answer.markdown[0].value and "Retrieval only" in answer.markdown[0].value
    # the sidebar lists the attachments with a remove button each
    side = [m.value for m in at.sidebar.markdown]
    assert any("**notes.md**" in v for v in side) and any("**photo.png**" in v for v in side)
    assert {shown(b.help) for b in at.sidebar.button if b.key and b.key.startswith("rm_")} == {
        "Remove notes.md from this chat",
        "Remove photo.png from this chat",
    }


def test_remove_button_detaches_and_the_next_message_says_so():
    system = System(load_settings())
    wb = Workbench(system)
    chat = Chats(system).service(wb)
    s = chat.create_session()
    a = chat.attach(s.id, NOTES.encode(), "notes.md")
    chat.send(s.id, "first")
    system.close()
    at = page("pages/chat.py")
    at.sidebar.button(key=f"rm_{a.file_id}").click().run()
    assert not at.exception
    assert any("Nothing attached" in c for c in [c.value for c in at.sidebar.caption])
    at.chat_input[0].set_value("second").run()
    assert "✖ removed notes.md" in [c.value for c in at.chat_message[2].caption]


def test_several_sessions(tmp_path):
    at = page("pages/chat.py")
    at.chat_input[0].set_value("hello one").run()
    first = at.session_state["chat_session"]
    at.sidebar.button[0].click().run()  # ➕ New chat
    second = at.session_state["chat_session"]
    assert second != first and not at.chat_message
    at.chat_input[0].set_value("hello two").run()
    radio = at.sidebar.radio[0]
    assert set(radio.options) == {"hello one", "hello two"}
    radio.set_value(first).run()
    assert at.session_state["chat_session"] == first
    assert answer_text(at.chat_message[0].markdown[0].value) == "hello one"


def test_a_pdf_answer_cites_file_and_page_with_a_local_model(tmp_path):
    pages = [
        "The harbour master records every ship that enters the port.",
        "The tide tables are printed each Sunday for the sailors of the bay.",
    ]
    with ChatCompletionsServer(
        [
            lambda req: {
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "vector_search", "arguments": '{"query": "tide tables printed"}'},
                    }
                ]
            },
            lambda req: {"content": "Each Sunday (harbour.pdf, page 2)."},
        ]
    ) as server:
        system = System(load_settings())
        LlmConfigs(system.catalog, system.settings).save(
            {"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": server.base_url}
        )
        system.close()
        at = page("pages/chat.py")
        at.sidebar.selectbox[0].set_value("local").run()
        at.chat_input[0].upload("harbour.pdf", pdf_bytes(pages), "application/pdf")
        at.chat_input[0].set_value("When are the tide tables printed?").run()
    assert not at.exception and not at.error
    answer = at.chat_message[1]
    assert answer_text(answer.markdown[0].value) == "Each Sunday (harbour.pdf, page 2)."
    assert any(shown(e.label).startswith("[1] harbour.pdf, page 2") for e in answer.expander)
    assert "local" in [c.value for c in answer.caption]


def test_a_model_error_is_shown_not_raised():
    system = System(load_settings())
    LlmConfigs(system.catalog, system.settings).save(
        {
            "name": "down",
            "type": "CHAT",
            "provider": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "timeout": 2,
        }
    )
    system.close()
    at = page("pages/chat.py")
    at.sidebar.selectbox[0].set_value("down").run()
    at.chat_input[0].set_value("hello").run()
    assert not at.exception
    assert "Cannot reach the model server" in at.error[0].value
    retry = at.button(key="chat_retry")  # the question has no answer: it can be asked again
    assert retry.label == "Retry"
    at = retry.click().run()
    assert not at.exception and "Cannot reach the model server" in at.error[0].value
    assert len([m for m in at.chat_message if m.name == "user"]) == 1  # asked again, not stored twice


# -- Settings ---------------------------------------------------------------------------------------
def test_settings_lists_configs_and_saves_one_with_a_key_variable_only(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-secret-value")
    at = page("pages/settings.py")
    table = at.dataframe[0].value
    assert list(table["name"]) == ["embeddings", "offline"]
    assert "Knowledge tools: available." in [s.value for s in at.success]
    form_inputs = {t.label: t for t in at.text_input}
    form_inputs["Name"].set_value("gpt")
    form_inputs["Model"].set_value("gpt-4o-mini")
    form_inputs["API key environment variable"].set_value("MY_KEY")
    at.button[0].click().run()  # Save config (the form's submit button)
    assert not at.exception
    table = at.dataframe[0].value
    row = table[table["name"] == "gpt"].iloc[0]
    assert (row["provider"], row["key variable"], row["key set"], row["reads"]) == ("openai", "MY_KEY", "yes", "VISION")
    assert row["tools"] == "search"  # least privilege unless the writing tools are ticked
    assert "sk-secret-value" not in str(at)  # the key itself is never shown


def test_settings_turns_the_writing_tools_on_for_a_chat_config():
    at = page("pages/settings.py")
    inputs = {t.label: t for t in at.text_input}
    inputs["Name"].set_value("local")
    inputs["Model"].set_value("m")
    [box] = [c for c in at.checkbox if c.label.startswith("Let the model change")]
    box.check()
    at.button[0].click().run()
    assert not at.exception
    table = at.dataframe[0].value
    assert table[table["name"] == "local"].iloc[0]["tools"] == "search + write"


def test_settings_refuses_a_key_pasted_as_the_variable_name():
    at = page("pages/settings.py")
    inputs = {t.label: t for t in at.text_input}
    inputs["Name"].set_value("bad")
    inputs["Model"].set_value("m")
    inputs["API key environment variable"].set_value("sk-live-abc")
    at.button[0].click().run()
    assert "NAME of an environment variable" in at.error[0].value


def test_deleting_the_embedding_config_makes_the_tools_unavailable():
    at = page("pages/settings.py")
    at.selectbox(key="cfg_delete").set_value("embeddings").run()
    next(b for b in at.button if b.label == "Delete").click().run()
    assert not at.exception
    assert "no LLM config named 'embeddings'" in at.warning[0].value


def test_traces_tab_shows_requests_with_base64_redacted():
    img = png_bytes(16, 16)
    with ChatCompletionsServer([lambda req: {"content": "A red square."}]) as server:
        system = System(load_settings())
        wb = Workbench(system)
        LlmConfigs(system.catalog, system.settings).save(
            {
                "name": "local",
                "type": "CHAT",
                "provider": "openai",
                "model": "m",
                "base_url": server.base_url,
                "capabilities": ["VISION"],
            }
        )
        chat = Chats(system).service(wb)
        s = chat.create_session(config="local")
        chat.attach(s.id, img, "square.png")
        chat.send(s.id, "What is this?")
        system.close()
    assert base64.b64encode(img).decode() in json.dumps(server.requests[0])  # the model got the image
    at = page("pages/settings.py")
    labels = [shown(e.label) for e in at.expander]
    assert len(labels) == 1 and "local (openai m)" in labels[0] and labels[0].endswith("ok")
    dumped = json.dumps([j.value for j in at.json])
    assert "[base64 image/png, " in dumped and "characters omitted]" in dumped
    assert base64.b64encode(img).decode() not in dumped
    assert "A red square." in dumped


# -- knowledge: the stores a chat searches ---------------------------------------------------------
LIGHTHOUSE = NOTES.split("# Bakery")[0]
BAKERY = "# Bakery" + NOTES.split("# Bakery")[1]


def _seed(stores: dict[str, list[tuple[str, str]]]) -> None:
    wb = Workbench(load_settings())
    for store, files in stores.items():
        for name, text in files:
            assert wb.ingest_file(store, text.encode(), name).ok
    wb.close()


def test_a_new_chat_searches_the_only_store_and_the_header_shows_it():
    _seed({"Team docs": [("lighthouse.md", LIGHTHOUSE), ("bakery.md", BAKERY)]})
    at = page("pages/chat.py")
    [kn] = [m for m in at.sidebar.multiselect if m.label == "Stores this chat searches"]
    assert kn.value == ["Team docs"]  # exactly one store: a new chat starts with it
    assert ":material/database: Team docs" in at.markdown[0].value
    at.chat_input[0].set_value("Who lit the lamp?").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    sid = at.session_state["chat_session"]
    system = System(load_settings())  # over the app's data folder
    try:
        assert system.catalog.internal_stores() == {f"chat-{sid}"}
    finally:
        system.close()
    answer = at.chat_message[1]
    assert "The sentences of Team docs that best answer" in answer.markdown[0].value
    assert any(shown(e.label).startswith("[1] lighthouse.md") for e in answer.expander)
    assert "store Team docs" in " ".join(c.value for c in answer.caption)
    assert "chat-" not in str([e.label for e in answer.expander])  # citations never name chat-<id>
    assert "📎" not in answer.markdown[0].value


def test_choosing_stores_in_the_sidebar_is_saved_with_the_session():
    _seed({"Lights": [("lighthouse.md", LIGHTHOUSE)], "Bread": [("bakery.md", BAKERY)]})
    at = page("pages/chat.py")
    [kn] = [m for m in at.sidebar.multiselect if m.label == "Stores this chat searches"]
    assert kn.value == [] and kn.options == ["Bread", "Lights"]  # two stores: none chosen by default
    at.chat_input[0].set_value("hello").run()
    assert "No knowledge yet" in at.markdown[0].value
    assert "no documents to search yet" in at.chat_message[1].markdown[0].value
    assert "Knowledge" in at.chat_message[1].markdown[0].value and "📎" not in at.chat_message[1].markdown[0].value
    sid = at.session_state["chat_session"]
    [kn] = [m for m in at.sidebar.multiselect if m.label == "Stores this chat searches"]
    kn.set_value(["Bread", "Lights"]).run()
    assert at.session_state["chats"].service(at.session_state["workbench"]).session(sid).stores == ["Bread", "Lights"]
    at.chat_input[0].set_value("What does the dough need?").run()
    answer = at.chat_message[3]
    assert any(shown(e.label).startswith("[1] bakery.md") for e in answer.expander)
    # the next new chat starts with the stores of the last one
    at.sidebar.button[0].click().run()
    [kn] = [m for m in at.sidebar.multiselect if m.label == "Stores this chat searches"]
    assert at.session_state["chat_session"] is None and kn.value == ["Bread", "Lights"]


def test_a_deleted_store_is_dropped_and_said_once():
    _seed({"Lights": [("lighthouse.md", LIGHTHOUSE)], "Bread": [("bakery.md", BAKERY)]})
    system = System(load_settings())
    wb = Workbench(system)
    chat = Chats(system).service(wb)
    s = chat.create_session(stores=["Lights", "Bread"])
    chat.send(s.id, "hello")
    wb.delete_store("Bread")
    system.close()
    at = page("pages/chat.py")
    assert any("Bread no longer exists" in i.value for i in at.info)
    at.run()
    assert not any("no longer exists" in i.value for i in at.info)  # once
    [kn] = [m for m in at.sidebar.multiselect if m.label == "Stores this chat searches"]
    assert kn.value == ["Lights"]


def test_chat_stores_are_not_listed_among_the_users_stores():
    _seed({"Lights": [("lighthouse.md", LIGHTHOUSE)]})
    system = System(load_settings())
    wb = Workbench(system)
    chat = Chats(system).service(wb)
    s = chat.create_session()
    chat.attach(s.id, BAKERY.encode(), "bakery.md")
    system.close()
    for path in ("pages/home.py", "pages/stores.py", "pages/search.py"):
        at = page(path)
        shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [m.value for m in at.metric]
        shown += [d.value.to_string() for d in at.dataframe]
        shown += [str(o) for box in list(at.selectbox) + list(at.multiselect) for o in box.options]
        assert "Lights" in " ".join(shown) or path == "pages/home.py", (path, shown)
        assert not [x for x in shown if "chat-" in x], (path, shown)


def test_deleting_a_chat_asks_first_and_new_chats_are_not_kept_empty():
    at = page("pages/chat.py")
    assert at.sidebar.button[0].disabled  # ➕ New chat: this is one already, and nothing is stored yet
    at.run()
    assert at.session_state["chats"].service(at.session_state["workbench"]).sessions() == []
    at.chat_input[0].set_value("keep me").run()
    chat = at.session_state["chats"].service(at.session_state["workbench"])
    [s] = chat.sessions()
    assert [b for b in at.sidebar.button if b.key == "confirm_delete_chat"]  # inside the popover
    assert chat.sessions() == [s]  # nothing deleted before the confirmation
    at.sidebar.button(key="confirm_delete_chat").click().run()
    assert not at.exception
    assert chat.sessions() == [] and at.session_state["chat_session"] is None


def test_offline_answer_quotes_the_sentence_and_highlights_it_in_its_source():
    """The offline assistant's answer is the sentence that answers, with [1]; the Source shows its
    passage once, the sentence marked, and the viewer opens at the sentence's characters."""
    at = page("pages/chat.py")
    at.chat_input[0].upload("notes.md", NOTES.encode(), "text/markdown")
    at.chat_input[0].set_value("Who lit the lamp?")
    at.run()
    assert not at.exception, at.exception
    answer = at.chat_message[1]
    said = answer_text(answer.markdown[0].value)
    assert "The keeper lit the lamp at dusk and trimmed the wick at midnight. [1]" in said
    assert "Bread" not in said  # no passage quoted whole
    source = next(e for e in answer.expander if shown(e.label).startswith("[1] notes.md"))
    assert (
        '<mark class="answer">The keeper lit the lamp at dusk and trimmed the wick at midnight.</mark>'
        in source.markdown[0].value
    )
    assert "Highlighted: the sentence the answer quotes." in [c.value for c in source.caption]
    start = NOTES.index("The keeper")
    link = source.get("link_button")[0].proto.url
    assert f"start={start}" in link and f"end={start + 65}" in link


def test_settings_offers_the_local_server_it_finds_as_one_click():
    with ChatCompletionsServer([], models=["small-model"]) as server:
        port = server.httpd.server_address[1]
        at = page("pages/settings.py")
        at.session_state["local_server_ports"] = {"Ollama": port}
        button(at, "local_look_again").click().run()
        offer = button(at, f"use_http://127.0.0.1:{port}/v1")
        assert shown(offer.label) == "Use Ollama (small-model)"
        offer.click().run()
        assert not at.exception, at.exception
    table = at.dataframe[0].value
    row = table[table["name"] == "Ollama small-model"].iloc[0]
    assert (row["base URL"], row["model"], row["tools"]) == (f"http://127.0.0.1:{port}/v1", "small-model", "search first")
    assert any("Ollama (small-model) is set up" in c for c in captions(at))
