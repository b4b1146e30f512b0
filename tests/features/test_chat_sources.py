"""An answer's Sources are the passages it uses, numbered as in the answer (issue 29, item 2).

The invoice acceptance test: an attached image with its total and due date (rendered with Pillow,
read by the bundled OCR) beside an unrelated store; a scripted model (the local chat-completions
server, through the real ``openai`` client) cites the invoice passage by the number the search gave
it, and the Sources list holds exactly that passage as [1]; the rest is "also searched".
"""

from __future__ import annotations

import io
import re

import httpx
import pytest
from PIL import Image, ImageDraw, ImageFont

from knowledge.chat.model import USER
from knowledge.chat.sources import cite, quoted_at, where_text
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument
from knowledge.server.app import create_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served
from tests.helpers.chat import ChatCompletionsServer, tool_call

GUESSING = "# Guessing game\n\n" + "\n\n".join(
    f"Part {i}: the guessing game reads a number from the player, compares it with the secret number and"
    " prints whether the guess is too small, too big or right."
    for i in range(12)
)


def hits(*texts: str) -> list[dict]:
    return [{"ref": i, "file_id": f"f{i}", "file_name": f"f{i}.md", "text": t, "score": 0.5} for i, t in enumerate(texts, 1)]


# -- cite ---------------------------------------------------------------------------------------------
def test_markers_are_renumbered_in_order_of_first_use_and_the_rest_is_also_searched():
    found = hits("alpha text", "beta text", "gamma text", "delta text")
    c = cite("Gamma says so [3], and beta agrees [2][3]; see also [3, 2].", found)
    assert c.by == "markers" and c.text == "Gamma says so [1], and beta agrees [2][1]; see also [1][2]."
    assert [(s["file_id"], s["n"]) for s in c.sources] == [("f3", 1), ("f2", 2)]
    assert [h["file_id"] for h in c.also_searched] == ["f1", "f4"]
    start, end = c.sources[0]["used_at"]
    assert c.text[start:end] == "[1]"


def test_markers_in_code_and_numbers_never_shown_stay_as_written():
    found = hits("alpha text", "beta text")
    c = cite("Use `v[2]` and\n```\nx[1]\n```\nas [2] says; [7] is no passage; a[1] is code.", found)
    assert c.text == "Use `v[2]` and\n```\nx[1]\n```\nas [1] says; [7] is no passage; a[1] is code."
    assert [s["file_id"] for s in c.sources] == ["f2"]


def test_without_markers_a_quoted_passage_is_a_source_in_order_of_quoting():
    found = hits(
        "The keeper lit the lamp at dusk and trimmed the wick at midnight every night.",
        "Bread needs flour, water, salt and yeast; the dough rests overnight in the cold.",
        "Unrelated words about harbours and ships.",
    )
    answer = (
        "As written: “bread needs flour water salt and yeast the dough rests”. And the KEEPER lit the lamp"
        " at dusk and trimmed it."
    )
    c = cite(answer, found)
    assert c.by == "quotes" and c.text == answer
    assert [(s["file_id"], s["n"]) for s in c.sources] == [("f2", 1), ("f1", 2)]
    assert [h["file_id"] for h in c.also_searched] == ["f3"]
    start, end = c.sources[0]["used_at"]
    assert answer[start:end].lower().startswith("bread needs")
    assert quoted_at("lit the lamp", "The keeper lit the lamp at dusk") is None  # three words of eight: no quote
    assert cite("Nothing used.", found).sources == []


def test_without_markers_or_quotes_a_named_file_and_page_is_a_source():
    found = [
        {"ref": 1, "file_name": "harbour.pdf", "page": 1, "text": "ships"},
        {"ref": 2, "file_name": "harbour.pdf", "page": 2, "text": "tides"},
        {"ref": 3, "file_name": "notes.md", "page": None, "text": "other"},
    ]
    c = cite("Each Sunday (harbour.pdf, page 2).", found)
    assert [s["ref"] for s in c.sources] == [2] and [h["ref"] for h in c.also_searched] == [1, 3]
    assert [s["ref"] for s in cite("See notes.md.", found).sources] == [3]


def test_where_text_never_says_none():
    assert where_text({"file_name": "a.md", "page": None, "heading": "Guide > Install"}) == "a.md — Guide > Install"
    assert where_text({"file_name": "b.pdf", "page": 3, "chunks": [4, 5]}) == "b.pdf, page 3 · 2 chunks"


# -- the chat ------------------------------------------------------------------------------------------
@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    w = Workbench(s)
    assert w.ingest_file("book", GUESSING.encode(), "ch02-00-guessing-game.md").ok
    yield s
    s.close()


def invoice_png() -> bytes:
    """An invoice as a picture: its total and due date in Pillow's built-in font, big enough for OCR."""
    font = ImageFont.load_default(size=30)
    lines = ["ACME Supplies invoice 2026-117", "Invoice total: 1,234.56 EUR", "Due date: 12 March 2026"]
    img = Image.new("RGB", (900, 300), "white")
    draw = ImageDraw.Draw(img)
    for i, line in enumerate(lines):
        x = 40.0
        for word in line.split(" "):
            draw.text((x, 40 + i * 70), word, fill="black", font=font)
            x += font.getlength(word) + font.getlength(" ")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def cite_the_invoice(req: dict) -> dict:
    """The scripted model's answer: the invoice passage cited by the number the search gave it."""
    result = req["messages"][-1]["content"]
    [ref] = re.findall(r"^\[(\d+)\] [^\n]*invoice\.png", result, re.M)
    return {"content": f"The invoice total is 1,234.56 EUR, due on 12 March 2026 [{ref}]."}


@pytest.mark.slow
def test_the_invoice_answer_cites_exactly_the_invoice_as_1(wb, chats):
    chat = chats.service(wb)
    script = [
        lambda req: tool_call("vector_search", {"query": "invoice total due date guessing game", "k": 6}),
        cite_the_invoice,
    ]
    with ChatCompletionsServer(script) as server:
        chat.configs.save({"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": server.base_url})
        s = chat.create_session(config="local", stores=["book"])
        chat.attach(s.id, invoice_png(), "invoice.png")
        reply = chat.send(s.id, "What is the total of the attached invoice and when is it due?")
    shown = server.requests[1]["messages"][-1]["content"]
    assert "guessing-game" in shown and "invoice.png" in shown  # both were searched
    assert reply.text == "The invoice total is 1,234.56 EUR, due on 12 March 2026 [1]."
    assert [(c["n"], c["file_name"]) for c in reply.citations] == [(1, "invoice.png")]
    assert "1,234.56" in reply.citations[0]["text"]
    assert reply.also_searched and {c["file_name"] for c in reply.also_searched} == {"ch02-00-guessing-game.md"}
    stored = chat.messages(s.id)[-1].meta  # reloading the chat shows the same
    assert [c["n"] for c in stored["citations"]] == [1] and len(stored["also_searched"]) == len(reply.also_searched)
    assert "use" in server.requests[0]["messages"][0]["content"] and "[2]" in server.requests[0]["messages"][0]["content"]


@pytest.mark.slow
def test_an_image_only_message_says_what_was_read_in_it(wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["book"])
    chat.attach(s.id, invoice_png(), "invoice.png")
    reply = chat.send(s.id, "")
    assert "Nothing" not in reply.text and "matches" not in reply.text
    assert "text recognition" in reply.text and "invoice.png" in reply.text and "1,234.56" in reply.text


def test_the_offline_answer_numbers_its_quotes_as_its_sources(wb, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["book"])
    reply = chat.send(s.id, "guessing game secret number")
    markers = [int(n) for n in re.findall(r"\[(\d+)\] \*\*", reply.text)]  # [n] **file** (score ...)
    assert markers and markers == list(range(1, len(reply.citations) + 1))
    assert [c["n"] for c in reply.citations] == markers


def test_retry_asks_the_failed_question_again_without_a_second_copy(wb, chats):
    chat = chats.service(wb)
    script = [lambda req: {"content": "Back again."}]
    with ChatCompletionsServer(script) as server:
        down = server.base_url.replace("/v1", "") + "/nowhere/v1"
        chat.configs.save(
            {"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": down, "timeout": 5}
        )
        s = chat.create_session(config="local", stores=["book"])
        with pytest.raises(Exception, match=r"HTTP 404|answered"):
            chat.send(s.id, "Are you there?")
        assert chat.messages(s.id)[-1].role == USER
        chat.configs.save({"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": server.base_url})
        turn = chat.start_turn(s.id, [], "", retry=True)
        assert turn.wait(60) and not turn.problems, turn.problems
    assert turn.reply is not None and turn.reply.text == "Back again."
    assert [m.role for m in chat.messages(s.id)].count(USER) == 1
    with pytest.raises(InvalidArgument, match="no unanswered question"):
        chat.retry(s.id)


@pytest.mark.slow
def test_api_chat_citations_point_at_their_marker(system, wb):
    with Served(create_app(system)) as base:
        r = httpx.post(
            f"{base}/v1/chat/completions",
            timeout=60,
            json={
                "model": "offline",
                "messages": [{"role": "user", "content": "guessing game secret number"}],
                "metadata": {"stores": "book"},
            },
        )
    assert r.status_code == 200, r.text
    message = r.json()["choices"][0]["message"]
    notes = [a["url_citation"] for a in message["annotations"]]
    assert notes
    for i, n in enumerate(notes, 1):
        assert message["content"][n["start_index"] : n["end_index"]] == f"[{i}]" and n["n"] == i
