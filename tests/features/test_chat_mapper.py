"""The message mapper and the attachment rules: one test per rule of the spec's "How the agent learns
about an attachment" and "Images and documents as message parts". The requests checked here are the
ones the engine really sends (``ChatService.request``), built from the stored history."""

from __future__ import annotations

import base64
import json

import pytest

from knowledge.chat import Chats, redact
from knowledge.chat.mapper import (
    IMAGE_TOKENS,
    MapperContext,
    build_request,
    document_tokens,
)
from knowledge.chat.model import ASSISTANT, ATTACHMENT, FILE, IMAGE, TEXT, USER, Message, Part
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument
from knowledge.llm import LlmConfig
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.chat import pdf_bytes, png_bytes

NOTES = (
    "# Lighthouse\n\nThe keeper lit the lamp at dusk and trimmed the wick at midnight.\n\n"
    "# Bakery\n\nBread needs flour, water, salt and yeast; the dough rests overnight."
)
PDF_PAGES = [
    "The harbour master records every ship that enters the port.",
    "On page two: the tide tables are printed each Sunday for sailors.",
]

VISION_DOCS = LlmConfig(
    name="gpt",
    type="CHAT",
    provider="openai",
    model="gpt-4o",
    api_key_env="OPENAI_API_KEY",
    capabilities=["VISION", "DOCUMENTS"],
)
LMSTUDIO_DOCS = LlmConfig(
    name="lm", type="CHAT", provider="openai", model="qwen", base_url="http://localhost:1234/v1", capabilities=["DOCUMENTS"]
)
TEXT_ONLY = LlmConfig(
    name="plain", type="CHAT", provider="openai", model="llama", base_url="http://localhost:11434/v1", capabilities=[]
)


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    yield s
    s.close()


@pytest.fixture
def chat(system):
    return Chats(system).service(Workbench(system))


@pytest.fixture
def files(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    other = tmp_path / "recipes.txt"
    other.write_text("Pancakes: flour, eggs and milk, fried in butter.")
    return {"notes": notes, "recipes": other}


def user_messages(req):
    return [m for m in req.messages if m["role"] == "user"]


def text_of(message) -> str:
    c = message["content"]
    return c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c if b["type"] == "text")


def system_of(req) -> str:
    assert req.messages[0]["role"] == "system"
    return req.messages[0]["content"]


# -- attach ------------------------------------------------------------------------------------
def test_attach_ingests_into_the_sessions_own_store_and_activates_vector_search(chat, files, system):
    s = chat.create_session()
    assert chat.request(s.id).tools == []  # nothing active before an attachment
    a = chat.attach(s.id, files["notes"])
    store = chat.session(s.id).store
    assert store == f"chat-{s.id}"
    assert system.catalog.get_store(store).template == "default"  # created on the fly from the default template
    assert [f.file_id for f in chat.wb.store_files(store)] == [a.file_id]
    assert chat.session(s.id).tools == ["vector_search"]
    names = [t["function"]["name"] for t in chat.request(s.id).tools]
    assert "vector_search" in names and "view_attachment" not in names
    hits = chat.wb.search(store, "who lit the lamp", k=1)
    assert "keeper lit the lamp" in hits[0].text


def test_attach_notice_goes_ahead_of_the_users_text_and_the_stored_text_stays(chat, files):
    s = chat.create_session()
    chat.attach(s.id, files["notes"])
    chat.send(s.id, "What does the keeper do?")
    stored = next(m for m in chat.messages(s.id) if m.role == USER)
    assert stored.text == "What does the keeper do?"  # what the user typed, nothing more
    assert stored.meta["attached"][0]["name"] == "notes.md"
    first = text_of(user_messages(chat.request(s.id))[0])
    note, _, typed = first.partition("\n\n")
    assert note.startswith("[System note:") and "notes.md (Markdown document)" in note
    assert "not on the filesystem" in note and "vector_search" in note
    assert typed == "What does the keeper do?"


def test_attached_files_section_of_the_system_prompt_is_rendered_fresh_each_round(chat, files):
    s = chat.create_session()
    chat.attach(s.id, files["notes"])
    chat.send(s.id, "hello")
    assert "- notes.md (Markdown document" in system_of(chat.request(s.id))
    chat.attach(s.id, files["recipes"])
    prompt = system_of(chat.request(s.id))  # before the next message: already in the section
    assert "## Attached files" in prompt and "- notes.md" in prompt and "- recipes.txt (text file" in prompt
    chat.remove(s.id, chat.attachments(s.id)[0].file_id)
    prompt = system_of(chat.request(s.id))
    assert "- notes.md" not in prompt and "- recipes.txt" in prompt
    chat.remove(s.id, chat.attachments(s.id)[0].file_id)
    assert "No files are attached." in system_of(chat.request(s.id))


def test_removal_is_announced_in_the_next_message_and_earlier_messages_stay(chat, files):
    s = chat.create_session()
    a = chat.attach(s.id, files["notes"])
    chat.send(s.id, "first")
    chat.remove(s.id, a.file_id)
    assert chat.wb.store_files(chat.session(s.id).store) == []  # its chunks left the store
    chat.send(s.id, "second")
    users = user_messages(chat.request(s.id))
    assert "The user attached notes.md" in text_of(users[0])  # the earlier notice is not rewritten
    second = text_of(users[1])
    assert "The user removed notes.md" in second and "no longer available" in second
    assert "do not search for it" in second and second.endswith("second")
    assert [m.text for m in chat.messages(s.id) if m.role == USER] == ["first", "second"]


def test_a_file_attached_again_after_removal_is_announced_again(chat, files):
    s = chat.create_session()
    a = chat.attach(s.id, files["notes"])
    chat.send(s.id, "one")
    chat.remove(s.id, a.file_id)
    chat.send(s.id, "two")
    chat.attach(s.id, files["notes"])
    chat.send(s.id, "three")
    texts = [text_of(m) for m in user_messages(chat.request(s.id))]
    assert "attached notes.md" in texts[0]
    assert "removed notes.md" in texts[1]
    assert "attached notes.md" in texts[2] and "removed" not in texts[2]
    assert chat.wb.search(chat.session(s.id).store, "keeper lamp", k=1)  # indexed again


def test_a_notice_names_only_files_still_attached(chat, files):
    s = chat.create_session()
    chat.attach(s.id, files["notes"])
    b = chat.attach(s.id, files["recipes"])
    chat.remove(s.id, b.file_id)  # attached and removed before any message: never announced
    chat.send(s.id, "question")
    text = text_of(user_messages(chat.request(s.id))[0])
    assert "notes.md" in text and "recipes.txt" not in text and "removed" not in text


def test_images_are_not_ingested_and_named_in_neither_notice_nor_section(chat, files):
    s = chat.create_session()
    chat.attach(s.id, files["notes"])
    img = chat.attach(s.id, png_bytes(), "photo.png")
    assert img.kind == "image" and img.media_type == "image/png"
    store = chat.session(s.id).store
    assert [f.file_name for f in chat.wb.store_files(store)] == ["notes.md"]  # the image is not indexed
    assert "view_attachment" in chat.session(s.id).tools
    chat.send(s.id, "what is in the picture?")
    req = chat.request(s.id, VISION_DOCS)
    note = text_of(user_messages(req)[0])
    assert "notes.md" in note and "photo.png" not in note
    assert "photo.png" not in system_of(req)
    stored = next(m for m in chat.messages(s.id) if m.role == USER)
    assert [(p.kind, p.name) for p in stored.parts] == [(TEXT, None), (IMAGE, "photo.png")]


def test_a_pdf_is_ingested_and_also_sent_with_the_next_message(chat):
    s = chat.create_session()
    a = chat.attach(s.id, pdf_bytes(PDF_PAGES), "harbour.pdf")
    assert (a.kind, a.pages) == ("pdf", 2)
    hits = chat.wb.search(chat.session(s.id).store, "tide tables for sailors", k=1)
    assert hits[0].page == 2
    assert set(chat.session(s.id).tools) == {"vector_search", "view_attachment"}
    chat.send(s.id, "when are tide tables printed?")
    stored = next(m for m in chat.messages(s.id) if m.role == USER)
    assert [(p.kind, p.name, p.media_type) for p in stored.parts[1:]] == [(FILE, "harbour.pdf", "application/pdf")]
    assert "harbour.pdf (PDF document)" in text_of(user_messages(chat.request(s.id))[0])  # named: it is indexed


def test_parts_travel_inline_by_capability_as_the_providers_content_blocks(chat):
    s = chat.create_session()
    pdf = pdf_bytes(PDF_PAGES)
    chat.attach(s.id, pdf, "harbour.pdf")
    chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "look")
    blocks = user_messages(chat.request(s.id, VISION_DOCS))[0]["content"]
    kinds = [b["type"] for b in blocks]
    assert kinds == ["text", "text", "file", "image_url"]
    assert blocks[2]["file"]["filename"] == "harbour.pdf"
    assert base64.b64decode(blocks[2]["file"]["file_data"].split(",", 1)[1]) == pdf
    assert blocks[3]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(png_bytes()).decode()


def test_documents_on_an_lm_studio_like_server_travel_as_a_text_note(chat):
    s = chat.create_session()
    chat.attach(s.id, pdf_bytes(PDF_PAGES), "harbour.pdf")
    chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "look")
    text = text_of(user_messages(chat.request(s.id, LMSTUDIO_DOCS))[0])
    assert "[Document harbour.pdf (PDF document); its text follows.]" in text
    assert "harbour master records every ship" in text and "tide tables are printed" in text
    assert "does not read images" in text  # no VISION declared: the image is a placeholder


def test_without_the_capability_a_placeholder_says_what_the_file_is_and_why(chat):
    s = chat.create_session()
    chat.attach(s.id, pdf_bytes(PDF_PAGES), "harbour.pdf")
    chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "look")
    req = chat.request(s.id, TEXT_ONLY)
    content = user_messages(req)[0]["content"]
    assert isinstance(content, str)  # text only: no media blocks at all
    assert "[PDF harbour.pdf" in content and "does not read PDFs directly" in content
    assert "vector_search tool reaches its content" in content
    assert "[Image photo.png (image/png" in content and "does not read images" in content
    assert "base64" not in json.dumps(req.messages)


def test_provider_default_capabilities_when_the_config_declares_none():
    assert LlmConfig(name="o", type="CHAT", provider="openai", model="gpt-4o", api_key_env="K").effective_capabilities() == {
        "VISION"
    }
    assert (
        LlmConfig(
            name="l", type="CHAT", provider="openai", model="m", base_url="http://localhost:1234/v1"
        ).effective_capabilities()
        == frozenset()
    )
    assert (
        LlmConfig(
            name="r",
            type="CHAT",
            provider="openai",
            model="m",
            base_url="https://openrouter.ai/api/v1",
            capabilities=["DOCUMENTS"],
        ).document_mode()
        == "file"
    )
    assert (
        LlmConfig(
            name="g",
            type="CHAT",
            provider="openai",
            model="m",
            base_url="https://api.groq.com/openai/v1",
            capabilities=["DOCUMENTS"],
        ).document_mode()
        == "text"
    )


def test_media_travels_in_the_current_turn_only_and_later_turns_carry_placeholders(chat):
    s = chat.create_session()
    chat.attach(s.id, pdf_bytes(PDF_PAGES), "harbour.pdf")
    img = chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "look")
    chat.send(s.id, "and now?")
    req = chat.request(s.id, VISION_DOCS)
    first, second = user_messages(req)
    assert isinstance(first["content"], str)  # no blocks any more
    assert "[Image photo.png was shown in an earlier turn and is not repeated; call view_attachment" in first["content"]
    assert f'file_id "{img.file_id}"' in first["content"]
    assert "[PDF harbour.pdf was sent in an earlier turn" in first["content"]
    assert "base64" not in json.dumps(req.messages)
    assert second["content"] == "and now?"


def test_view_attachment_reinserts_the_media_into_the_running_turn_only(chat):
    s = chat.create_session()
    img = chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "look")
    chat.send(s.id, "show it again")
    # the tool as the engine runs it for a model's call, then the message it inserts
    from knowledge.chat.service import _Turn
    from knowledge.llm.providers import ToolCall

    session = chat.session(s.id)
    chat.store.add_message(
        s.id,
        ASSISTANT,
        [],
        {"tool_calls": [{"id": "c1", "name": "view_attachment", "arguments": json.dumps({"file_id": img.file_id})}]},
    )
    chat._run_tool(
        session, chat.configs.chat(None), ToolCall("c1", "view_attachment", json.dumps({"file_id": img.file_id})), _Turn("x")
    )
    roles = [m.role for m in chat.messages(s.id)]
    assert roles[-2:] == ["tool", ATTACHMENT]
    msgs = chat.request(s.id, VISION_DOCS).messages
    assert msgs[-2] == {"role": "tool", "tool_call_id": "c1", "content": "photo.png is shown in the next message."}
    assert msgs[-1]["role"] == "user" and msgs[-1]["content"][1]["type"] == "image_url"
    chat.send(s.id, "thanks")  # the next turn: the re-shown image is a placeholder again
    later = chat.request(s.id, VISION_DOCS).messages
    assert "base64" not in json.dumps(later)
    assert any(
        "view_attachment showed photo.png here in an earlier turn" in text_of(m) for m in later if m["role"] == "user"
    )


def test_view_attachment_refuses_a_file_that_is_not_an_attached_image_or_pdf(chat, files):
    s = chat.create_session()
    chat.attach(s.id, png_bytes(), "photo.png")
    doc = chat.attach(s.id, files["notes"])
    from knowledge.chat.service import _Turn

    r = chat._tool(chat.session(s.id), chat.configs.chat(None), "view_attachment", {"file_id": doc.file_id}, _Turn("x"))
    assert not r.ok and "No image or PDF" in r.text and "photo.png" in r.text


# -- the working-memory budget ---------------------------------------------------------------------
def _turn(seq: int, text: str, parts=()) -> list[Message]:
    return [
        Message(seq, USER, [Part(TEXT, text=text), *parts]),
        Message(seq + 1, ASSISTANT, [Part(TEXT, text="ok " + text)]),
    ]


def _ctx(budget: int, **kw) -> MapperContext:
    return MapperContext(
        attachments=[],
        capabilities=frozenset({"VISION", "DOCUMENTS"}),
        budget_tokens=budget,
        read_bytes=lambda fid: b"x" * 10,
        **kw,
    )


def test_budget_estimates_media_at_the_specs_figures():
    assert document_tokens(50) == 1_000 and document_tokens(250_000) == 2_500
    img = Part(IMAGE, file_id="file-" + "0" * 32, name="a.png", media_type="image/png", size=10)
    doc = Part(FILE, file_id="file-" + "1" * 32, name="b.pdf", media_type="application/pdf", size=300_000)
    plain = build_request([Message(1, USER, [Part(TEXT, text="hi")])], _ctx(10**6))
    with_media = build_request([Message(1, USER, [Part(TEXT, text="hi"), img, doc])], _ctx(10**6))
    assert with_media.tokens - plain.tokens == IMAGE_TOKENS + 3_000


def test_budget_drops_the_oldest_turns_first_never_the_current_one():
    history = _turn(1, "alpha " * 300) + _turn(3, "beta " * 300) + _turn(5, "gamma")
    full = build_request(history, _ctx(10**6))
    assert full.dropped_turns == 0
    req = build_request(history, _ctx(full.tokens - 100))  # one old turn must go: the oldest
    texts = [text_of(m) for m in req.messages[1:]]
    assert req.dropped_turns == 1 and not any("alpha" in t for t in texts) and any("beta" in t for t in texts)
    tiny = build_request(history, _ctx(300))
    assert tiny.dropped_turns == 2 and [m["content"] for m in tiny.messages[1:]] == ["gamma", "ok gamma"]


def test_budget_never_drops_the_current_turns_notices():
    meta = {"attached": [{"file_id": "f", "name": "huge.md", "kind": "document", "media_type": "text/markdown"}]}
    history = [*_turn(1, "old " * 2000), Message(3, USER, [Part(TEXT, text="now " * 1500)], meta)]
    req = build_request(history, _ctx(1_000))
    assert req.dropped_turns == 1 and req.over_budget
    assert len(req.messages) == 2 and "[System note: The user attached huge.md" in req.messages[1]["content"]


# -- trace redaction ------------------------------------------------------------------------------
def test_trace_redaction_replaces_base64_payloads_with_a_note():
    b64 = base64.b64encode(png_bytes() * 50).decode()
    request = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64}"}},
                    {"type": "file", "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{b64}"}},
                ],
            }
        ]
    }
    out = redact(request)
    blocks = out["messages"][0]["content"]
    assert blocks[0] == {"type": "text", "text": "look"}
    assert blocks[1]["image_url"]["url"] == f"[base64 image/png, {len(b64):,} characters omitted]"
    assert blocks[2]["file"] == {
        "filename": "a.pdf",
        "file_data": f"[base64 application/pdf, {len(b64):,} characters omitted]",
    }
    assert b64 not in json.dumps(out)
    assert request["messages"][0]["content"][1]["image_url"]["url"].endswith(b64)  # the input is not changed


def test_every_call_of_a_turn_is_traced(chat, files):
    s = chat.create_session()
    chat.attach(s.id, files["notes"])
    chat.send(s.id, "who lit the lamp?")
    traces = chat.traces(s.id)
    assert len(traces) == 2  # the offline assistant: search, then answer
    assert traces[1].response["tool_calls"][0]["name"] == "vector_search"
    assert "keeper lit the lamp" in traces[0].response["content"]
    assert traces[0].request["messages"][0]["role"] == "system"


# -- the embedding config gates the knowledge tools --------------------------------------------------
def test_without_the_embedding_config_the_tools_are_unavailable_with_the_reason(chat, files):
    assert chat.tools.availability() == (True, "")
    chat.configs.delete("embeddings")
    ok, reason = chat.tools.availability()
    assert not ok and "no LLM config named 'embeddings'" in reason
    s = chat.create_session()
    from knowledge.chat import AttachFailed

    with pytest.raises(AttachFailed, match="knowledge tools are unavailable, because there is no LLM config"):
        chat.attach(s.id, files["notes"])
    assert chat.attach(s.id, png_bytes(), "photo.png").kind == "image"  # images need no index
    chat.configs.save({"name": "embeddings", "type": "CHAT", "provider": "offline"})  # wrong type
    assert "is a CHAT config, not EMBEDDING" in chat.tools.availability()[1]


def test_a_broken_embedding_model_makes_the_tools_unavailable(tmp_path, files):
    from knowledge.errors import EmbeddingUnavailable

    def broken(model):
        raise EmbeddingUnavailable(f"model {model} is missing")

    system = System(load_settings(data_dir=tmp_path / "d2"), embedder_factory=broken)

    wb = Workbench(system)
    try:
        chat = Chats(system).service(wb)
        ok, reason = chat.tools.availability()
        assert not ok and "cannot be loaded" in reason and "is missing" in reason
        s = chat.create_session()
        chat.attach(s.id, png_bytes(), "photo.png")
        reply = chat.send(s.id, "hi")
        assert reply.retrieval_only and "offline assistant" in reply.text
    finally:
        system.close()


def test_api_keys_are_named_never_stored(chat, system):
    with pytest.raises(InvalidArgument, match="NAME of an environment variable"):
        chat.configs.save({"name": "x", "type": "CHAT", "provider": "openai", "model": "m", "api_key_env": "sk-live-123"})
    chat.configs.save(VISION_DOCS)
    with system.catalog.cursor() as cur:
        spec = json.loads(cur.execute("SELECT spec FROM llm_configs WHERE name = 'gpt'").fetchone()[0])
    assert spec["api_key_env"] == "OPENAI_API_KEY" and "api_key" not in spec


def test_redaction_leaves_text_alone_and_catches_bare_base64():
    b64 = base64.b64encode(b"\x00" * 3000).decode()
    text = "data about harbours, " * 40
    out = redact({"input_audio": {"data": b64, "format": "wav"}, "data": text, "file": {"file_data": b64}})
    assert out["input_audio"] == {"data": f"[base64, {len(b64):,} characters omitted]", "format": "wav"}
    assert out["data"] == text and out["file"]["file_data"].startswith("[base64, ")


# -- persistence -------------------------------------------------------------------------------------
def test_sessions_messages_parts_and_attachments_persist_in_the_catalog(tmp_path, files):
    settings = load_settings(data_dir=tmp_path / "persist")
    system = System(settings, embedder_factory=lambda m: HashEmbedder(64, 256))
    wb = Workbench(system)
    chat = Chats(system).service(wb)
    s = chat.create_session()
    chat.attach(s.id, files["notes"])
    img = chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "who lit the lamp?")
    system.close()
    system = System(settings, embedder_factory=lambda m: HashEmbedder(64, 256))
    wb = Workbench(system)
    try:
        again = Chats(system).service(wb)
        assert [x.title for x in again.sessions()] == ["who lit the lamp?"]
        msgs = again.messages(s.id)
        assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
        assert msgs[0].parts[1] == Part(
            IMAGE, file_id=img.file_id, name="photo.png", media_type="image/png", size=len(png_bytes())
        )
        assert msgs[-1].meta["citations"][0]["file_name"] == "notes.md"
        assert [a.name for a in again.attachments(s.id)] == ["notes.md", "photo.png"]
        assert len(again.traces(s.id)) == 2
    finally:
        system.close()


def test_deleting_a_session_removes_its_store_and_its_files(chat, files, system):
    s = chat.create_session()
    doc = chat.attach(s.id, files["notes"])
    img = chat.attach(s.id, png_bytes(), "photo.png")
    chat.send(s.id, "hi")
    chat.remove(s.id, doc.file_id)  # removed: bytes kept while the message refers to them
    assert system.files.find(doc.file_id) is not None
    store = chat.session(s.id).store
    chat.delete_session(s.id)
    assert system.catalog.get_store(store) is None
    assert system.files.find(doc.file_id) is None and system.files.find(img.file_id) is None
    assert chat.sessions() == []


# -- turns in the background ------------------------------------------------------------------------
def test_two_turns_sent_back_to_back_both_complete_in_order(chat, files):
    sid = chat.create_session().id
    first = chat.start_turn(sid, [(files["notes"].read_bytes(), "notes.md", "text/markdown")], "Who lit the lamp?")
    second = chat.start_turn(sid, [], "And what does bread need?")  # sent before the first is answered
    assert second.wait(60) and first.done
    assert first.problems == [] and second.problems == []
    said = [m.text for m in chat.messages(sid) if m.role == USER]
    assert said == ["Who lit the lamp?", "And what does bread need?"]
    assert [a.name for a in chat.attachments(sid)] == ["notes.md"]
    assert chat.running_turn(sid) is None


def test_a_turns_problems_are_collected_not_raised(chat):
    sid = chat.create_session().id
    turn = chat.start_turn(sid, [(b"", "empty.txt", "text/plain")], "")
    assert turn.wait(30)
    assert len(turn.problems) == 1 and "empty.txt" in turn.problems[0]
