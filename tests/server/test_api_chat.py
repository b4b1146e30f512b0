"""Chat over the REST API: the ``openai`` client's ``chat.completions.create`` against the offline
CHAT config, with a PDF as a file part, streamed and not."""

from __future__ import annotations

import base64

import openai
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.system import System
from tests.helpers.api import Served
from tests.helpers.chat import pdf_bytes


@pytest.fixture
def client(tmp_path):
    system = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256)
    )
    with Served(create_app(system)) as base:
        yield openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)
    system.close()


PDF = pdf_bytes(
    [
        "Quarterly report. Sales of garden tools were flat.",
        "The quokka pump WOMBAT-7731 must be primed with two litres of water before use.",
    ]
)


def pdf_part() -> dict:
    return {
        "type": "file",
        "file": {"filename": "pump.pdf", "file_data": "data:application/pdf;base64," + base64.b64encode(PDF).decode()},
    }


def test_models_are_the_chat_configs(client):
    assert "offline" in [m.id for m in client.models.list()]
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])


def test_pdf_part_is_attached_cited_by_page_and_kept_for_the_next_call(client):
    first = client.chat.completions.create(
        model="offline",
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "How is the WOMBAT-7731 pump primed?"}, pdf_part()]}
        ],
    )
    message = first.choices[0].message
    assert "WOMBAT-7731" in message.content and first.choices[0].finish_reason == "stop"
    cites = [a.url_citation for a in message.annotations]
    assert cites and cites[0].model_extra["filename"] == "pump.pdf" and cites[0].model_extra["page"] == 2
    assert cites[0].title == "pump.pdf, page 2" and cites[0].url.endswith("#page=2")
    session = first.model_extra["session"]

    # the same session, without sending the PDF again: the attachment is still searched
    second = client.chat.completions.create(
        model="offline",
        metadata={"session": session},
        messages=[{"role": "user", "content": "How many litres of water for the pump?"}],
    )
    assert second.model_extra["session"] == session
    again = [a.url_citation.model_extra for a in second.choices[0].message.annotations]
    assert again and again[0]["filename"] == "pump.pdf" and again[0]["page"] == 2

    # an unknown session is an error, not a silent new one
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="offline", metadata={"session": "nope"}, messages=[{"role": "user", "content": "hi"}]
        )


def test_streamed_answer_with_a_pdf_part(client):
    stream = client.chat.completions.create(
        model="offline",
        stream=True,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "How is the WOMBAT-7731 pump primed?"}, pdf_part()]}
        ],
    )
    chunks = list(stream)
    assert len(chunks) > 2 and all(c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert "WOMBAT-7731" in text and chunks[-1].choices[0].finish_reason == "stop"
    notes = chunks[-1].choices[0].delta.model_extra["annotations"]
    assert notes[0]["url_citation"]["page"] == 2


def test_bad_parts_are_400(client):
    for content in (
        [{"type": "image_url", "image_url": {"url": "http://example.com/x.png"}}],
        [{"type": "audio", "audio": {}}],
        [{"type": "file", "file": {}}],
    ):
        with pytest.raises(openai.BadRequestError):
            client.chat.completions.create(model="offline", messages=[{"role": "user", "content": content}])


def test_vector_store_ids_choose_the_stores_and_another_persons_is_404(tmp_path):
    """``metadata.vector_store_ids`` or a ``file_search`` tool's ``vector_store_ids`` choose the
    stores a chat searches; an id of a store the caller may not read is 404 naming the field, as a
    missing store is everywhere in the API (not an answer over no documents)."""
    from fastapi.testclient import TestClient

    from knowledge.chat import Chats
    from knowledge.server.objects import vector_store_id
    from knowledge.workbench import Workbench

    system = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256)
    )
    try:
        system.people.set_up_admin("root", "correct horse battery")
        for name in ("ana", "bo"):
            system.people.accounts.create(name, "correct horse battery")
        ana = Workbench(system).as_user(system.people.accounts.actor("ana"))
        bo = Workbench(system).as_user(system.people.accounts.actor("bo"))
        assert ana.ingest_file("hr", b"The parental leave policy grants sixteen weeks.", "leave.txt").ok
        assert bo.ingest_file("ops", b"The night shift rota changes every Monday.", "rota.txt").ok
        hr, ops = vector_store_id("hr"), vector_store_id("ops")
        ask = {"model": "offline", "messages": [{"role": "user", "content": "How long is parental leave?"}]}
        with TestClient(create_app(system)) as c:
            key = system.people.keys.create("bo", "tests")[1]
            head = {"Authorization": f"Bearer {key}"}
            for extra, param in (
                ({"metadata": {"vector_store_ids": [hr]}}, "metadata.vector_store_ids"),
                ({"metadata": {"vector_store_ids": f"{ops},{hr}"}}, "metadata.vector_store_ids"),
                ({"tools": [{"type": "file_search", "vector_store_ids": [hr]}]}, "tools"),
                ({"metadata": {"vector_store_ids": ["vs_" + "0" * 24]}}, "metadata.vector_store_ids"),
            ):
                r = c.post("/v1/chat/completions", json={**ask, **extra}, headers=head)
                assert r.status_code == 404, (extra, r.text)
                assert (r.json()["error"]["code"], r.json()["error"]["param"]) == ("not_found", param)
                assert "sixteen" not in r.text
            r = c.post(
                "/v1/chat/completions",
                json={**ask, "tools": [{"type": "file_search", "vector_store_ids": "x"}]},
                headers=head,
            )
            assert r.status_code == 400 and r.json()["error"]["param"] == "tools"
            r = c.post(
                "/v1/chat/completions",
                json={**ask, "messages": [{"role": "user", "content": "When does the rota change?"}]}
                | {"metadata": {"vector_store_ids": [ops]}},
                headers=head,
            )
            assert r.status_code == 200, r.text  # searched: its own store (below)
            session = r.json()["session"]
        assert Chats(system).service(bo).session(session).stores == ["ops"]
    finally:
        system.close()
