"""A local model server, one click (issue 31, item 4): detection on loopback, the search-first
turn streamed over server-sent events, and citations checked against the passages given."""

from __future__ import annotations

import socket

from knowledge.chat.sources import drop_unknown_markers
from knowledge.llm.local import detect, probe
from tests.helpers.chat import PAGES, ChatCompletionsServer, pdf_bytes


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


def test_detection_finds_the_server_on_its_port_and_only_there():
    with ChatCompletionsServer([], models=["qwen2.5:0.5b", "llama3.2"]) as server:
        port = server.httpd.server_address[1]
        found = detect({"Nothing here": _closed_port(), "Ollama": port})
    assert [(s.name, s.base_url, s.models) for s in found] == [
        ("Ollama", f"http://127.0.0.1:{port}/v1", ("qwen2.5:0.5b", "llama3.2"))
    ]
    cfg = found[0].config()
    assert (cfg.provider, cfg.model, cfg.base_url, cfg.search_first) == ("openai", "qwen2.5:0.5b", found[0].base_url, True)
    assert cfg.name == "Ollama qwen2.5-0.5b"  # a valid config name
    assert probe("Nothing", _closed_port()) is None


def test_a_server_without_the_model_list_is_not_offered():
    with ChatCompletionsServer([]) as server:  # answers 404 on GET /v1/models and /api/tags
        assert detect({"LM Studio": server.httpd.server_address[1]}) == []


def test_drop_unknown_markers_keeps_the_given_numbers_only():
    text, dropped = drop_unknown_markers("Printed on Sundays [1]. Ships are logged [7]. Both [1, 7]. `a[7]`", [1, 2])
    assert text == "Printed on Sundays [1]. Ships are logged. Both [1]. `a[7]`"
    assert dropped == [7]


def test_search_first_streams_the_answer_and_checks_its_citations(chat):
    """The model is offered no tools, reads the passages numbered in the prompt, streams an answer
    citing [1] and a nonexistent [7]: the pieces reach on_token in order, [7] is dropped and reported,
    [1] cites the passage given as [1]."""
    seen: list[dict] = []

    def answer(req):
        seen.append(req)
        return {"content": "The tide tables are printed each Sunday [1], and a storm log is kept [7]."}

    with ChatCompletionsServer([answer], models=["small"]) as server:
        cfg = detect({"llama.cpp server": server.httpd.server_address[1]})[0].config(name="local")
        chat.configs.save(cfg)
        s = chat.create_session(config="local")
        chat.attach(s.id, pdf_bytes(PAGES), "harbour.pdf")
        pieces: list[str] = []
        reply = chat.send(s.id, "When are the tide tables printed?", on_token=pieces.append)
    req = seen[0]
    assert req["stream"] is True and "tools" not in req  # search first: no tool calls
    prompt = req["messages"][-1]["content"]
    assert prompt.count("When are the tide tables printed?") == 1 and "Question:" in prompt
    given = {int(line[1 : line.index("]")]): line for line in prompt.splitlines() if line[:1] == "[" and "]" in line}
    assert 1 in given and "harbour.pdf" in given[1]
    assert "".join(pieces) == "The tide tables are printed each Sunday [1], and a storm log is kept [7]."
    assert len(pieces) > 5  # streamed word by word, not at the end
    assert reply.unknown_markers == [7] and "[7]" not in reply.text
    assert reply.text == "The tide tables are printed each Sunday [1], and a storm log is kept."
    assert [c["n"] for c in reply.citations] == [1]
    first_given = given[1].split("\n")[0]
    assert reply.citations[0]["file_name"] == "harbour.pdf" and f"page {reply.citations[0]['page']}" in first_given
    assert "tide tables" in reply.citations[0]["text"]
    stored = chat.messages(s.id)[-1]
    assert stored.meta["unknown_markers"] == [7] and stored.meta["search_first"] is True
    trace = chat.traces(s.id)[0]
    assert trace.response["choices"][0]["message"]["content"].endswith("[7].")  # the trace keeps what it said
