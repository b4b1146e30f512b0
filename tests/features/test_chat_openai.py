"""The OpenAI-compatible provider against a local HTTP server speaking chat-completions: the real
``openai`` client, the real JSON on the wire, and the tool loop. Plus the offline assistant end to
end on the shared corpus."""

from __future__ import annotations

import base64
import json

import pytest

from knowledge.chat import Chats, ChatService
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.llm import LlmUnavailable
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.chat import PAGES, ChatCompletionsServer, pdf_bytes, png_bytes, tool_call


def _config(chat, server, **kw):
    return chat.configs.save(
        {"name": "local", "type": "CHAT", "provider": "openai", "model": "test-model", "base_url": server.base_url, **kw}
    )


def _last_tool_text(request: dict) -> str:
    return [m for m in request["messages"] if m["role"] == "tool"][-1]["content"]


def test_tool_call_loop_over_the_wire(chat, monkeypatch):
    monkeypatch.setenv("LOCAL_LLM_KEY", "secret-123")

    def answer(req):  # the model reads the tool result and cites it
        first = _last_tool_text(req).splitlines()[0]
        return {"content": f"The tide tables are printed on Sundays (from: {first})."}

    with ChatCompletionsServer(
        [lambda req: tool_call("vector_search", {"query": "when are tide tables printed"}), answer]
    ) as server:
        _config(chat, server, api_key_env="LOCAL_LLM_KEY")
        s = chat.create_session(config="local")
        chat.attach(s.id, pdf_bytes(PAGES), "harbour.pdf")
        reply = chat.send(s.id, "When are the tide tables printed?")
    assert len(server.requests) == 2
    assert server.headers[0]["authorization"] == "Bearer secret-123"  # read from the named variable
    first, second = server.requests
    assert first["model"] == "test-model"
    # least privilege: a model is offered the read tools only (write_tools is off by default)
    assert [t["function"]["name"] for t in first["tools"]] == ["vector_search", "view_attachment"]
    assert "store" not in first["tools"][0]["function"]["parameters"]["required"]  # the session's store by default
    assert first["messages"][0]["role"] == "system" and "harbour.pdf" in first["messages"][0]["content"]
    user = first["messages"][1]
    assert user["role"] == "user" and "[System note: The user attached harbour.pdf (PDF document)" in user["content"]
    assert "does not read PDFs directly" in user["content"]  # a local server without DOCUMENTS: placeholder
    # the second request carries the assistant's call and the tool's result, as the protocol wants
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "vector_search"
    tool_msg = second["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == "call_1"
    assert "harbour.pdf, page 2" in tool_msg["content"] and "tide tables are printed" in tool_msg["content"]
    assert reply.text.startswith("The tide tables are printed on Sundays (from: [1] similarity")  # the marker it saw
    assert not reply.retrieval_only
    assert reply.citations[0]["file_name"] == "harbour.pdf" and reply.citations[0]["page"] == 2
    assert [r.name for r in reply.tool_runs] == ["vector_search"] and reply.tool_runs[0].ok
    assert [m.role for m in chat.messages(s.id)] == ["user", "assistant", "tool", "assistant"]
    assert len(chat.traces(s.id)) == 2


def test_view_attachment_over_the_wire_with_vision_and_redacted_trace(chat):
    img = png_bytes(8, 8)
    with ChatCompletionsServer(
        [
            lambda req: {"content": "A red square."},
            lambda req: tool_call("view_attachment", {"file_id": fid[0]}, "call_v"),
            lambda req: {"content": "Still a red square."},
        ]
    ) as server:
        _config(chat, server, capabilities=["VISION"])
        s = chat.create_session(config="local")
        fid = [chat.attach(s.id, img, "square.png").file_id]
        assert chat.send(s.id, "What is this?").text == "A red square."
        reply = chat.send(s.id, "Look again: what colour?")
    r1, r2, r3 = server.requests
    url = "data:image/png;base64," + base64.b64encode(img).decode()
    assert r1["messages"][1]["content"][1] == {"type": "image_url", "image_url": {"url": url}}
    assert url not in json.dumps(r2)  # the next turn: a placeholder, not the image again
    assert "call view_attachment" in r2["messages"][1]["content"]
    assert r3["messages"][-2]["role"] == "tool" and r3["messages"][-1]["content"][1]["image_url"]["url"] == url
    assert reply.text == "Still a red square." and reply.tool_runs[0].name == "view_attachment"
    traces = chat.traces(s.id)
    dumped = json.dumps([t.request for t in traces])
    assert base64.b64encode(img).decode() not in dumped
    assert f"[base64 image/png, {len(url) - len('data:image/png;base64,'):,} characters omitted]" in dumped


def test_a_pdf_goes_as_a_text_note_to_a_documents_config_on_a_local_server(chat):
    with ChatCompletionsServer([lambda req: {"content": "Sundays."}]) as server:
        _config(chat, server, capabilities=["DOCUMENTS"])
        s = chat.create_session(config="local")
        chat.attach(s.id, pdf_bytes(PAGES), "harbour.pdf")
        chat.send(s.id, "When?")
    content = server.requests[0]["messages"][1]["content"]
    assert isinstance(content, str) and "[Document harbour.pdf (PDF document); its text follows.]" in content
    assert "tide tables are printed each Sunday" in content


def test_bad_tool_arguments_come_back_to_the_model_as_text(chat):
    with ChatCompletionsServer(
        [
            lambda req: {
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "vector_search", "arguments": "{not json"}}
                ]
            },
            lambda req: {"content": _last_tool_text(req)},
        ]
    ) as server:
        _config(chat, server)
        s = chat.create_session(config="local")
        chat.attach(s.id, pdf_bytes(PAGES), "harbour.pdf")
        reply = chat.send(s.id, "x")
    assert reply.text.startswith("Bad arguments for vector_search") and not reply.tool_runs[0].ok


def test_the_loop_ends_with_a_round_without_tools(chat):
    calls = [
        lambda req, i=i: tool_call("vector_search", {"query": "ship"}, f"c{i}") for i in range(ChatService.MAX_ROUNDS - 1)
    ]
    with ChatCompletionsServer([*calls, lambda req: {"content": "done" if "tools" not in req else "tools!"}]) as server:
        _config(chat, server)
        s = chat.create_session(config="local")
        chat.attach(s.id, pdf_bytes(PAGES), "harbour.pdf")
        reply = chat.send(s.id, "loop")
    assert len(server.requests) == ChatService.MAX_ROUNDS and reply.text == "done"


def test_a_server_error_is_a_clear_message_and_traced(chat):
    with ChatCompletionsServer([]) as server:  # answers 500 "script exhausted"
        _config(chat, server)
        s = chat.create_session(config="local")
        with pytest.raises(LlmUnavailable, match=r"answered HTTP 500: .*script exhausted"):
            chat.send(s.id, "hello")
    assert chat.traces(s.id)[0].error.startswith("The model server at")
    assert [m.text for m in chat.messages(s.id)] == ["hello"]  # the user's message stays


def test_an_unset_key_variable_keeps_the_message_and_traces_the_error(chat, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    chat.configs.save(
        {
            "name": "remote",
            "type": "CHAT",
            "provider": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "NO_SUCH_KEY_VAR",
        }
    )
    s = chat.create_session(config="remote")
    with pytest.raises(LlmUnavailable, match="NO_SUCH_KEY_VAR, which is not set"):
        chat.send(s.id, "hello")
    assert [m.text for m in chat.messages(s.id)] == ["hello"]  # what was typed is not lost
    assert "NO_SUCH_KEY_VAR" in chat.traces(s.id)[0].error


def test_an_unreachable_server_says_so(chat):
    chat.configs.save(
        {
            "name": "down",
            "type": "CHAT",
            "provider": "openai",
            "model": "m",
            "base_url": "http://127.0.0.1:9/v1",
            "timeout": 2,
        }
    )
    s = chat.create_session(config="down")
    with pytest.raises(LlmUnavailable, match=r"Cannot reach the model server at http://127\.0\.0\.1:9/v1") as err:
        chat.send(s.id, "hello")
    assert ".." not in str(err.value) and str(err.value).endswith("Is it running?")


# -- the offline assistant on real documents ---------------------------------------------------------
@pytest.mark.model
@pytest.mark.slow  # two corpus PDFs embedded with the real model
def test_offline_assistant_answers_from_a_corpus_pdf_with_file_and_page(corpus, tmp_path):
    system = System(load_settings(data_dir=tmp_path / "data"))
    wb = Workbench(system)
    try:
        chat = Chats(system).service(wb)
        s = chat.create_session()
        chat.attach(s.id, corpus / "pdf" / "pdflatex-4-pages.pdf")
        chat.attach(s.id, corpus / "pdf" / "google-doc-document.pdf")
        reply = chat.send(s.id, "Is explicit better than implicit?")
        assert reply.retrieval_only and reply.config == "offline"
        assert reply.text.startswith("*Retrieval only")
        top = reply.citations[0]
        assert top["file_name"] == "google-doc-document.pdf" and top["page"] == 1
        assert "Explicit is better than implicit" in top["text"]
        # the answer quotes the sentence that answers, marked [1]; file and page are the citation's
        assert "> Explicit is better than implicit. [1]" in reply.text
    finally:
        system.close()


@pytest.mark.slow
def test_offline_assistant_on_corpus_markdown_with_the_fake_embedder(corpus, tmp_path):
    system = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(4096, 256))
    wb = Workbench(system)
    chat = Chats(system).service(wb)
    s = chat.create_session()
    book = corpus / "md" / "rust-book"
    chat.attach(s.id, book / "ch03-01-variables-and-mutability.md")
    chat.attach(s.id, book / "ch08-01-vectors.md")
    reply = chat.send(s.id, "shadowing: shadow a variable with let")
    system.close()
    assert reply.citations and reply.citations[0]["file_name"] == "ch03-01-variables-and-mutability.md"
    assert "shadow" in reply.citations[0]["text"].lower()
    assert "> " in reply.text  # passages quoted
