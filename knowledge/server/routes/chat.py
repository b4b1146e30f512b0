"""``POST /v1/chat/completions`` and ``GET /v1/models`` over :class:`~knowledge.chat.ChatService`.

The CHAT configs are served as models. ``model`` names one; the session is the header
``X-Knowledge-Session`` or ``metadata.session`` (a new one without, its id sent back in ``session``
and the header); ``metadata.stores`` (a list or a comma-separated string) chooses the stores it
searches, as do ``metadata.vector_store_ids`` and a ``file_search`` tool's ``vector_store_ids`` (by API
id; an id that is no store the caller may read is a 404 naming the field). Only the last user
message is sent (the session keeps the conversation); its parts
(``text``, ``image_url`` as a ``data:`` URL, ``file`` as ``file_data`` or a ``file_id`` of the Files
API) become the session's attachments. Citations come back as ``url_citation`` annotations;
``stream: true`` sends the whole answer in pieces as server-sent events. Bad input is an
:class:`~knowledge.server.http.ApiError` (400, or 404 ``model_not_found`` / an unknown session or store).
Details: ``docs/api.md``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import time
from collections.abc import Iterator, Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from knowledge.errors import KnowledgeError
from knowledge.server.bodies import ChatCompletion
from knowledge.server.http import ApiError, JsonRoute, bad, check_name, in_thread
from knowledge.server.objects import Api, KnowledgeApi

router = APIRouter(tags=["chat"], route_class=JsonRoute)

SESSION_HEADER = "X-Knowledge-Session"
#: The fields of OpenAI's chat completions request (:class:`~knowledge.server.bodies.ChatCompletion`):
#: ``model``, ``messages``, ``stream`` and ``metadata`` are read; the others are accepted and have no
#: effect here (the CHAT config decides).
CHAT_FIELDS = tuple(ChatCompletion.model_fields)
_DATA_URL = re.compile(r"data:(?P<type>[\w.+-]+/[\w.+-]+)?(?:;[\w-]+=[^;,]*)*;base64,(?P<data>.*)", re.S)


def _decode(data: str, what: str) -> tuple[bytes, str | None]:
    m = _DATA_URL.fullmatch(data.strip())
    media, raw = (m.group("type"), m.group("data")) if m else (None, data)
    try:
        return base64.b64decode(raw, validate=False), media
    except (binascii.Error, ValueError):
        raise bad(f"{what} is not valid base64 data.", "messages") from None


def _parts(api: KnowledgeApi, content: Any) -> tuple[str, list[tuple[bytes, str, str | None]]]:
    """The text and the files ``(bytes, name, media type)`` of a user message's content."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise bad("A message's content must be a string or a list of parts.", "messages")
    texts, files = [], []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            texts.append(str(part.get("text") or ""))
        elif kind == "image_url":
            image = part.get("image_url") or {}
            url = image.get("url", "") if isinstance(image, Mapping) else image
            if not isinstance(url, str) or not url.startswith("data:"):
                raise bad(
                    "image_url parts must be data: URLs here (this server fetches nothing from the network).", "messages"
                )
            data, media = _decode(url, "image_url")
            ext = (media or "image/png").split("/")[-1]
            files.append((data, f"image-{i + 1}.{ext}", media))
        elif kind == "file":
            f = part.get("file") or {}
            if not isinstance(f, Mapping):
                raise bad("A file part's file must be an object: {file_data, filename} or {file_id}.", "messages")
            if f.get("file_id"):
                stored = api.stored(str(f["file_id"]))
                with api.wb.read_file(stored.id) as fh:
                    files.append((fh.read(), stored.name, stored.content_type))
            elif f.get("file_data"):
                data, media = _decode(str(f["file_data"]), "file_data")
                files.append((data, str(f.get("filename") or f"file-{i + 1}"), media))
            else:
                raise bad("A file part needs file.file_data (base64) or file.file_id.", "messages")
        else:
            raise bad(f"Unsupported content part type {kind!r}; use text, image_url or file.", "messages")
    return "\n".join(t for t in texts if t), files


def url_citations(reply: Any, base_url: str) -> list[dict[str, Any]]:
    """The reply's citations -- the passages the answer cites or quotes, numbered as its ``[n]``
    markers -- as OpenAI ``url_citation`` annotations (plus our provenance fields): ``start_index``
    / ``end_index`` are the characters of the answer where the passage is first used (its marker,
    or the words it quotes; 0-0 only for a citation whose place is unknown); ``sentences``: the
    offline assistant's answering sentences in the passage (offsets into its ``text``)."""
    out = []
    for i, c in enumerate(reply.citations, 1):
        page = c.get("page")
        title = (c.get("file_name") or c.get("file_id") or "?") + (f", page {page}" if page is not None else "")
        used = c.get("used_at")
        if isinstance(used, list) and len(used) == 2 and used[1] > used[0]:
            start, end = int(used[0]), int(used[1])
        else:
            marker = f"[{c.get('n', i)}]"
            start = reply.text.find(marker)
            start, end = (start, start + len(marker)) if start >= 0 else (0, 0)
        url = f"{base_url}/v1/files/{c.get('file_id')}/content" + (f"#page={page}" if page is not None else "")
        out.append(
            {
                "type": "url_citation",
                "url_citation": {
                    "url": url,
                    "title": title,
                    "start_index": start,
                    "end_index": end,
                    "n": c.get("n", i),
                    "chunks": c.get("chunks"),
                    "file_id": c.get("file_id"),
                    "filename": c.get("file_name"),
                    "page": page,
                    "heading": c.get("heading"),
                    "char_start": c.get("char_start"),
                    "char_end": c.get("char_end"),
                    "score": c.get("score"),
                    "store": c.get("source"),
                    "text": c.get("text"),
                    "sentences": c.get("sentences") or [],
                },
            }
        )
    return out


def models(api: KnowledgeApi) -> list[Any]:
    """The CHAT configs, served as models."""
    return api.chat.configs.list("CHAT")


@router.get("/v1/models", summary="The chat model configs, as models")
def list_models(api: Api) -> dict:
    return {
        "object": "list",
        "data": [{"id": c.name, "object": "model", "created": 0, "owned_by": c.provider} for c in models(api)],
    }


@router.get("/v1/models/{model}", summary="One chat model config, as a model")
def get_model(model: str, api: Api) -> dict:
    for c in models(api):
        if c.name == model:
            return {"id": c.name, "object": "model", "created": 0, "owned_by": c.provider}
    raise ApiError(404, f"The model {model!r} does not exist (see GET /v1/models).", code="model_not_found")


@router.post("/v1/chat/completions", summary="Chat with the session's knowledge")
async def completions(body: ChatCompletion, request: Request, api: Api) -> Any:
    base = str(request.base_url).rstrip("/")
    header = request.headers.get(SESSION_HEADER)
    reply, sid, model = await in_thread(turn, api, body, header)
    created = int(time.time())
    cid = "chatcmpl-" + secrets.token_hex(12)
    notes = url_citations(reply, base)
    headers = {SESSION_HEADER: sid}
    if body.stream:
        return StreamingResponse(
            events(cid, created, model, sid, reply.text, notes), headers=headers, media_type="text/event-stream"
        )
    words = len(reply.text.split())
    return JSONResponse(
        {
            "id": cid,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "session": sid,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "logprobs": None,
                    "message": {"role": "assistant", "content": reply.text, "refusal": None, "annotations": notes},
                }
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": words, "total_tokens": words},
            "retrieval_only": reply.retrieval_only,
            "unknown_markers": reply.unknown_markers,
        },
        headers=headers,
    )


def checked_model(api: KnowledgeApi, body: ChatCompletion) -> str:
    """The request's ``model``: the name of a CHAT config (404 ``model_not_found`` otherwise)."""
    model = body.model
    try:
        api.chat.configs.chat(model)
    except KnowledgeError:
        raise ApiError(
            404, f"The model {model!r} does not exist (see GET /v1/models).", param="model", code="model_not_found"
        ) from None
    return model


def session_for(api: KnowledgeApi, sid: Any, model: str, stores: list[str] | None) -> str:
    """The id of the session ``sid`` (set to ``model`` and ``stores``), or of a new one without ``sid``."""
    chat = api.chat
    if not sid:
        return chat.create_session(config=model, stores=stores).id
    try:
        chat.session(str(sid))
    except KnowledgeError:
        raise ApiError(404, f"No chat session with the id {sid!r}.", param="metadata.session", code="not_found") from None
    sid = str(sid)
    if chat.session(sid).config != model:
        chat.set_config(sid, model)
    if stores is not None:
        chat.set_stores(sid, stores)
    return sid


def stores_by_id(api: KnowledgeApi, body: ChatCompletion) -> list[str]:
    """The stores a request names by API id (``vs_...``): ``metadata.vector_store_ids`` and the
    ``vector_store_ids`` of a ``file_search`` tool (as OpenAI's file search names them), in order.

    Raises:
        ApiError: 404 ``not_found`` naming the field, for an id that is no store the caller may read
            (another person's is worded as a missing one); 400 for ids that are not a list of strings.
    """
    named: list[tuple[str, str]] = [
        (i, "metadata.vector_store_ids") for i in (body.metadata.vector_store_ids or [] if body.metadata else [])
    ]
    for tool in body.tools or []:
        if tool.get("type") != "file_search":
            continue
        ids = tool.get("vector_store_ids", (tool.get("file_search") or {}).get("vector_store_ids"))
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise bad("A file_search tool's vector_store_ids must be a list of vector store ids.", "tools")
        named += [(i, "tools") for i in ids]
    stores = []
    for vs_id, param in named:
        try:
            stores.append(api.store_name(vs_id))
        except ApiError as exc:
            exc.param = param
            raise
    return stores


def turn(api: KnowledgeApi, body: ChatCompletion, header: str | None) -> tuple[Any, str, str]:
    """One chat turn of a completions request: ``(reply, session id, model)`` (see the module docstring;
    the fields' types are :class:`~knowledge.server.bodies.ChatCompletion`'s)."""
    model = checked_model(api, body)
    users = [m for m in body.messages if m.get("role") == "user"]
    if not users:
        raise bad("messages needs a user message.", "messages")
    text, files = _parts(api, users[-1].get("content"))
    metadata = body.metadata
    stores = metadata.stores if metadata is not None else None
    for name in stores or []:
        check_name(name, "metadata.stores")
    by_id = stores_by_id(api, body)
    if by_id:
        stores = list(dict.fromkeys([*(stores or []), *by_id]))
    sid = session_for(api, header or (metadata.session if metadata is not None else None), model, stores)
    for data, name, media in files:
        api.chat.attach(sid, data, name, media)
    return api.chat.send(sid, text), sid, model


def events(cid: str, created: int, model: str, sid: str, text: str, notes: list[dict[str, Any]]) -> Iterator[str]:
    """The answer as server-sent ``chat.completion.chunk`` events, then ``data: [DONE]``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return (
            "data: "
            + json.dumps(
                {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "session": sid,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
                },
                ensure_ascii=False,
            )
            + "\n\n"
        )

    yield chunk({"role": "assistant", "content": ""})
    pieces = re.findall(r"\S+\s*|\s+", text)
    for i in range(0, len(pieces), 8):
        yield chunk({"content": "".join(pieces[i : i + 8])})
    yield chunk({"annotations": notes}, "stop")
    yield "data: [DONE]\n\n"


__all__ = [
    "CHAT_FIELDS",
    "SESSION_HEADER",
    "checked_model",
    "events",
    "models",
    "router",
    "session_for",
    "turn",
    "url_citations",
]
