"""REST bodies are pydantic models (knowledge/server/bodies.py): documented in /openapi.json, refused
in OpenAI's error shape with the field named, unknown fields refused as OpenAI refuses them."""

from __future__ import annotations

import time

import httpx
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.system import System
from tests.helpers.api import Served


@pytest.fixture
def base(tmp_path):
    system = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256)
    )
    with Served(create_app(system)) as url:
        yield url
    system.close()


def refused(r: httpx.Response) -> dict:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    return error


def test_the_search_body_and_the_store_body_are_documented_in_openapi(base):
    spec = httpx.get(base + "/openapi.json").json()
    search = spec["paths"]["/v1/vector_stores/{vs_id}/search"]["post"]["requestBody"]["content"]["application/json"]
    assert search["schema"]["$ref"].endswith("/SearchBody")
    fields = spec["components"]["schemas"]["SearchBody"]["properties"]
    assert set(fields) == {"query", "max_num_results", "filters", "ranking_options", "rewrite_query", "mode"}
    assert fields["max_num_results"]["maximum"] == 50 and fields["max_num_results"]["default"] == 10
    assert spec["components"]["schemas"]["SearchBody"]["required"] == ["query"]
    static = spec["components"]["schemas"]["StaticChunking"]["properties"]
    assert static["max_chunk_size_tokens"]["minimum"] == 100 and static["max_chunk_size_tokens"]["maximum"] == 4096
    assert "CreateStore" in spec["components"]["schemas"]
    chat = spec["components"]["schemas"]["ChatCompletion"]["properties"]
    assert {"model", "messages", "stream", "metadata", "temperature", "tools"} <= set(chat)


def test_bad_bodies_are_refused_naming_the_field_in_openais_shape(base):
    vs = httpx.post(base + "/v1/vector_stores", json={"name": "s"}).json()
    search = base + f"/v1/vector_stores/{vs['id']}/search"
    f = httpx.post(
        base + "/v1/files", files={"file": ("a.md", b"# A\n\nPumps.\n", "text/markdown")}, data={"purpose": "assistants"}
    ).json()
    cases = [
        (search, {"query": "x", "filter": {}}, "filter", "Unrecognized request argument supplied: filter."),
        (search, {"query": "   "}, "query", "query must be a non-blank string (or a list of strings)."),
        (search, {"query": 5}, "query", "query: Input should be a valid string"),
        (
            search,
            {"query": "x", "max_num_results": 51},
            "max_num_results",
            "max_num_results: Input should be less than or equal to 50",
        ),
        (
            search,
            {"query": "x", "max_num_results": True},
            "max_num_results",
            "max_num_results: Input should be a valid integer",
        ),
        (search, {"query": "x", "rewrite_query": "yes"}, "rewrite_query", "rewrite_query: Input should be a valid boolean"),
        (search, {"query": "x", "ranking_options": 5}, "ranking_options", "ranking_options must be an object."),
        (
            search,
            {"query": "x", "ranking_options": {"score_threshold": "high"}},
            "ranking_options.score_threshold",
            "ranking_options.score_threshold: Input should be a valid number",
        ),
        (search, [1, 2], None, "The request body must be a JSON object."),
        (
            base + "/v1/vector_stores",
            {
                "name": "t",
                "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 10}},
            },
            "chunking_strategy.static.max_chunk_size_tokens",
            "chunking_strategy.static.max_chunk_size_tokens: Input should be greater than or equal to 100",
        ),
        (
            base + "/v1/vector_stores",
            {
                "name": "t",
                "chunking_strategy": {
                    "type": "static",
                    "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 150},
                },
            },
            "chunking_strategy.static",
            "chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens (100), got 150.",
        ),
        (
            base + "/v1/vector_stores",
            {"name": "t", "chunking_strategy": {"type": "static"}},
            "chunking_strategy",
            "A static chunking_strategy needs 'static': {max_chunk_size_tokens, chunk_overlap_tokens}.",
        ),
        (
            base + "/v1/vector_stores",
            {"name": "t", "chunking_strategy": {"type": "fancy"}},
            "chunking_strategy.type",
            "chunking_strategy.type: Input should be 'auto' or 'static'",
        ),
        (
            base + "/v1/vector_stores",
            {"name": "t", "expires_after": {"anchor": "last_active_at", "days": 0}},
            "expires_after.days",
            "expires_after.days: Input should be greater than or equal to 1",
        ),
        (
            base + "/v1/vector_stores",
            {"name": "t", "metadata": {str(i): "v" for i in range(17)}},
            "metadata",
            "metadata must be an object of at most 16 string pairs (keys up to 64 characters, values up to 512).",
        ),
        (
            base + f"/v1/vector_stores/{vs['id']}/files",
            {"file_id": f["id"], "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 200}}},
            "chunking_strategy.static.chunk_overlap_tokens",
            "chunking_strategy.static.chunk_overlap_tokens: Field required",
        ),
        (
            base + f"/v1/vector_stores/{vs['id']}/file_batches",
            {"files": [{"file_id": f["id"], "atributes": {}}]},
            "files.0.atributes",
            "Unrecognized request argument supplied: files.0.atributes.",
        ),
        (
            base + f"/v1/vector_stores/{vs['id']}/file_batches",
            {"attributes": {"team": "blue"}},
            "file_ids",
            "Give file_ids (or files) to add.",
        ),
        (base + f"/v1/vector_stores/{vs['id']}/files", {"attributes": {}}, "file_id", "file_id: Field required"),
        (
            base + f"/v1/vector_stores/{vs['id']}/web_pages",
            {"url": "http://127.0.0.1:1/", "depth": "2"},
            "depth",
            "depth: Input should be a valid integer",
        ),
        (
            base + f"/v1/vector_stores/{vs['id']}/files/{f['id']}",
            {"atributes": {}},
            "atributes",
            "Unrecognized request argument supplied: atributes.",
        ),
        (
            base + "/v1/chat/completions",
            {"model": "offline", "mesages": []},
            "mesages",
            "Unrecognized request argument supplied: mesages.",
        ),
        (
            base + "/v1/chat/completions",
            {"model": "offline", "messages": []},
            "messages",
            "messages: List should have at least 1 item after validation, not 0",
        ),
        (
            base + "/v1/chat/completions",
            {"model": "offline", "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
            "stream",
            "stream: Input should be a valid boolean",
        ),
        (
            base + "/v1/chat/completions",
            {"model": "offline", "messages": [{"role": "user", "content": "hi"}], "metadata": {"stores": 5}},
            "metadata.stores",
            "metadata.stores: Input should be a valid list",
        ),
        (
            base + "/v1/chat/completions",
            {"model": "offline", "messages": [{"role": "system", "content": "hi"}], "temperature": 0.2},
            "messages",
            "messages needs a user message.",
        ),
        (  # OpenAI's fields this server does not use are still checked as OpenAI's API types them
            base + "/v1/chat/completions",
            {"model": "offline", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"},
            "temperature",
            "temperature: Input should be a valid number",
        ),
        (
            base + "/v1/chat/completions",
            {"model": "offline", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
            "max_tokens",
            "max_tokens: Input should be greater than or equal to 1",
        ),
    ]
    for url, body, param, message in cases:
        error = refused(httpx.post(url, json=body))
        assert (error["param"], error["message"]) == (param, message), body
    assert [s["name"] for s in httpx.get(base + "/v1/vector_stores").json()["data"]] == ["s"]


def test_a_good_body_still_searches_and_a_query_may_be_a_list(base):
    vs = httpx.post(
        base + "/v1/vector_stores",
        json={"name": "s", "chunking_strategy": {"type": "auto"}, "expires_after": {"anchor": "last_active_at", "days": 7}},
    ).json()
    assert vs["expires_after"] == {"anchor": "last_active_at", "days": 7}
    r = httpx.post(
        base + f"/v1/vector_stores/{vs['id']}/search",
        json={
            "query": ["pumps", "valves"],
            "ranking_options": {"score_threshold": 0, "ranker": "auto"},
            "rewrite_query": True,
        },
    )
    assert r.status_code == 200 and r.json()["search_query"] == "pumps valves" and r.json()["notes"]
    changed = httpx.post(base + f"/v1/vector_stores/{vs['id']}", json={"metadata": {"team": "blue"}}).json()
    assert changed["metadata"] == {"team": "blue"} and changed["expires_after"] == {"anchor": "last_active_at", "days": 7}


def test_a_store_and_a_batch_file_list_take_the_same_filter(base):
    """``filter`` on a store's files and on a batch's files: one of OpenAI's four statuses narrows the
    list, anything else is refused naming ``filter`` (the batch's list used to answer an empty page)."""
    vs = httpx.post(base + "/v1/vector_stores", json={"name": "s"}).json()
    f = httpx.post(
        base + "/v1/files", files={"file": ("a.md", b"# A\n\nPumps.\n", "text/markdown")}, data={"purpose": "assistants"}
    ).json()
    batch = httpx.post(base + f"/v1/vector_stores/{vs['id']}/file_batches", json={"file_ids": [f["id"]]}).json()
    lists = [
        base + f"/v1/vector_stores/{vs['id']}/files",
        base + f"/v1/vector_stores/{vs['id']}/file_batches/{batch['id']}/files",
    ]
    for _ in range(100):
        if httpx.get(lists[1], params={"filter": "completed"}).json()["data"]:
            break
        time.sleep(0.1)
    for url in lists:
        assert [x["id"] for x in httpx.get(url, params={"filter": "completed"}).json()["data"]] == [f["id"]]
        assert httpx.get(url, params={"filter": "failed"}).json()["data"] == []
        error = refused(httpx.get(url, params={"filter": "bogus"}))
        assert (error["param"], error["message"]) == (
            "filter",
            "filter must be in_progress, completed, failed or cancelled.",
        )
