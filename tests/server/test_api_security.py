"""The REST API and the MCP server over HTTP refuse what a web page could send them (issue 24): each
attack is sent as the browser or the rebinding name would send it, to a real uvicorn server, and
the API is then asked with the right headers that nothing was created, read or deleted."""

from __future__ import annotations

import json
import time

import anyio
import httpx
import pytest
from mcp import Client

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.server.http import attachment_header
from knowledge.server.mcp import build_server, http_app
from knowledge.server.objects import vector_store_id
from knowledge.system import System
from tests.helpers.api import Served, free_port

EVIL = "http://evil.example"


def system_at(tmp_path, **api) -> System:
    return System(
        load_settings(data_dir=tmp_path / "data", ingest={"max_file_mb": 2}, api=api),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )


@pytest.fixture
def system(tmp_path):
    s = system_at(tmp_path)
    yield s
    s.close()


@pytest.fixture
def base(system):
    with Served(create_app(system)) as url:
        yield url


def stores(base: str) -> list[str]:
    return [s["name"] for s in httpx.get(base + "/v1/vector_stores").json()["data"]]


def upload(base: str, name: str = "a.md", data: bytes = b"# A\n\nPumps and valves.\n", **kw) -> httpx.Response:
    return httpx.post(base + "/v1/files", files={"file": (name, data)}, data={"purpose": "assistants"}, **kw)


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


# -- Host: DNS rebinding -------------------------------------------------------------------------------
def test_a_rebinding_host_name_is_refused_and_the_loopback_names_are_answered(base):
    port = port_of(base)
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", f"localhost.evil.example:{port}"):
        r = httpx.post(base + "/v1/vector_stores", json={"name": "rebound"}, headers={"Host": host})
        assert r.status_code == 421 and r.json()["error"]["code"] == "invalid_host", host
        assert "api.allowed_hosts" in r.json()["error"]["message"]
    assert stores(base) == []
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
        assert httpx.get(base + "/v1/vector_stores", headers={"Host": host}).status_code == 200, host


def test_a_configured_host_name_is_answered(tmp_path):
    w = system_at(tmp_path, allowed_hosts=["knowledge.lan", "docs.lan:9999"])
    try:
        with Served(create_app(w)) as base:
            port = port_of(base)
            ok = ("knowledge.lan", f"knowledge.lan:{port}", "knowledge.lan:443", "docs.lan:9999")
            assert all(httpx.get(base + "/v1/files", headers={"Host": h}).status_code == 200 for h in ok)
            assert httpx.get(base + "/v1/files", headers={"Host": f"docs.lan:{port}"}).status_code == 421
    finally:
        w.close()


# -- Origin and Sec-Fetch-Site --------------------------------------------------------------------------
def test_a_request_from_another_origin_is_refused(base):
    port = port_of(base)
    for origin in (EVIL, f"http://127.0.0.1:{port + 1}", "null", f"http://localhost:{port}"):
        r = httpx.post(base + "/v1/vector_stores", json={"name": "from-a-page"}, headers={"Origin": origin})
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed", origin
        assert "access-control-allow-origin" not in r.headers
    # a cross-site request the browser sent without an Origin (a GET, an <img>, a navigation)
    r = httpx.get(base + "/v1/files", headers={"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
    assert r.status_code == 403 and "cross-site" in r.json()["error"]["message"]
    pre = httpx.options(base + "/v1/vector_stores", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"})
    assert pre.status_code == 403 and "access-control-allow-origin" not in pre.headers
    assert stores(base) == []
    # its own origin (a page the API itself served) is no other site
    own = httpx.post(
        base + "/v1/vector_stores",
        json={"name": "own"},
        headers={"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"},
    )
    assert own.status_code == 200 and stores(base) == ["own"]


def test_a_configured_origin_gets_cors_with_preflight(tmp_path):
    app_origin = "http://localhost:3000"
    w = system_at(tmp_path, cors_origins=[app_origin])
    try:
        with Served(create_app(w, api_key="k3y")) as base:
            pre = httpx.options(
                base + "/v1/vector_stores",
                headers={
                    "Origin": app_origin,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "authorization, content-type",
                },
            )
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == app_origin
            assert "authorization" in pre.headers["access-control-allow-headers"].lower()
            r = httpx.post(
                base + "/v1/vector_stores",
                json={"name": "from-the-app"},
                headers={"Origin": app_origin, "Sec-Fetch-Site": "cross-site", "Authorization": "Bearer k3y"},
            )
            assert r.status_code == 200 and r.headers["access-control-allow-origin"] == app_origin
            assert "x-knowledge-session" in r.headers["access-control-expose-headers"].lower()
            keyless = httpx.get(base + "/v1/files", headers={"Origin": app_origin})
            assert keyless.status_code == 401 and keyless.headers["access-control-allow-origin"] == app_origin
            other = httpx.options(
                base + "/v1/vector_stores", headers={"Origin": EVIL, "Access-Control-Request-Method": "POST"}
            )
            assert other.status_code == 403 and "access-control-allow-origin" not in other.headers
    finally:
        w.close()


# -- content types -------------------------------------------------------------------------------------
def test_a_text_plain_or_form_body_is_415_and_creates_nothing(base):
    for ctype, body in (
        ("text/plain", json.dumps({"name": "plain"})),
        ("text/plain;charset=UTF-8", ""),
        ("application/x-www-form-urlencoded", "name=form"),
        ("multipart/form-data; boundary=x", "--x--"),
    ):
        r = httpx.post(base + "/v1/vector_stores", content=body, headers={"Content-Type": ctype})
        assert r.status_code == 415 and "application/json" in r.json()["error"]["message"], ctype
    r = httpx.post(base + "/v1/vector_stores", content=b'{"name": "untyped"}')  # a body without a type
    assert r.status_code == 415
    assert stores(base) == []
    assert httpx.post(base + "/v1/vector_stores", json={"name": "typed"}).status_code == 200


def test_an_upload_from_a_web_page_is_refused_and_curl_without_a_key_may_upload(base):
    for headers in ({"Origin": EVIL}, {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"}, {"Origin": "null"}):
        r = upload(base, headers=headers)
        assert r.status_code == 403, headers
    assert httpx.get(base + "/v1/files").json()["data"] == []
    curl = upload(base)  # curl -F sends neither Origin nor Sec-Fetch-*
    assert curl.status_code == 200 and curl.json()["filename"] == "a.md"
    assert [f["id"] for f in httpx.get(base + "/v1/files").json()["data"]] == [curl.json()["id"]]


def test_an_upload_from_a_configured_origin_or_with_the_key(tmp_path):
    w = system_at(tmp_path, cors_origins=["http://localhost:3000"])
    try:
        with Served(create_app(w)) as base:
            page = {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}
            assert upload(base, headers=page).status_code == 200
            own = {"Origin": base, "Sec-Fetch-Site": "same-origin"}
            assert upload(base, headers=own).status_code == 403  # no page of the API's own origin uploads
        with Served(create_app(w, api_key="k3y")) as base:
            own = {"Origin": base, "Sec-Fetch-Site": "same-origin", "Authorization": "Bearer k3y"}
            assert upload(base, "b.md", b"# B\n", headers=own).status_code == 200
    finally:
        w.close()


# -- file contents -----------------------------------------------------------------------------------
def test_file_contents_are_a_download_and_every_response_says_nosniff(base):
    html = (
        b"<html><script>fetch('/v1/files').then(r => r.json()).then(j => j.data.forEach(f =>"
        b" fetch('/v1/files/' + f.id, {method: 'DELETE'})))</script></html>"
    )
    f = upload(base, "page.html", html).json()
    r = httpx.get(base + f"/v1/files/{f['id']}/content")
    assert r.content == html
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["content-disposition"] == 'attachment; filename="page.html"'
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["content-security-policy"] == "default-src 'none'; frame-ancestors 'none'"
    for resp in (
        httpx.get(base + "/v1/files"),
        httpx.get(base + "/v1/files/file-" + "0" * 32),
        httpx.get(base + "/v1/vector_stores", headers={"Host": "evil.example"}),
    ):
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["content-security-policy"].startswith("default-src 'none'")
    named = upload(base, "résumé v2.html", b"<b>x</b>").json()
    header = httpx.get(base + f"/v1/files/{named['id']}/content").headers["content-disposition"]
    assert header == "attachment; filename=\"r_sum_ v2.html\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20v2.html"
    # quotes, backslashes and line breaks never reach the header as themselves
    assert attachment_header('a"b\\c\r\n.html') == (
        "attachment; filename=\"a_b_c__.html\"; filename*=UTF-8''a%22b%5Cc%0D%0A.html"
    )


# -- bodies: nesting, types, unknown fields, names -----------------------------------------------------------
def test_deeply_nested_json_and_bad_types_are_400_with_a_reason(base):
    vs = httpx.post(base + "/v1/vector_stores", json={"name": "s"}).json()
    deep = "[" * 10_000 + "]" * 10_000
    deep_filter = '{"query": "x", "filters": ' + '{"type": "and", "filters": [' * 5_000 + "]}" * 5_000 + "}"
    for path, body in (
        ("/v1/vector_stores", deep),
        (f"/v1/vector_stores/{vs['id']}/search", deep_filter),
        ("/v1/chat/completions", '{"model": "offline", "messages": ' + deep + "}"),
        ("/v1/vector_stores", '{"name": "n", "expires_after": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}"),
    ):
        r = httpx.post(base + path, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and "nests deeper" in r.json()["error"]["message"], path
    for body, param in (
        ({"name": "t", "file_ids": 5}, "file_ids"),
        ({"name": 5}, "name"),
        ({"name": "t", "expires_after": "soon"}, "expires_after"),
        ({"name": "t", "chunking_strategy": "static"}, "chunking_strategy"),
        ({"name": "t", "metadata": ["a"]}, "metadata"),
    ):
        r = httpx.post(base + "/v1/vector_stores", json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, body
    search = base + f"/v1/vector_stores/{vs['id']}/search"
    for body, param in (
        ({"query": "x", "ranking_options": 5}, "ranking_options"),
        ({"query": "x", "mode": 3}, "mode"),
        ({"query": "x", "rewrite_query": "yes"}, "rewrite_query"),
    ):
        r = httpx.post(search, json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, body
    chat = base + "/v1/chat/completions"
    for part in ({"type": "image_url", "image_url": 7}, {"type": "file", "file": "x"}):
        r = httpx.post(chat, json={"model": "offline", "messages": [{"role": "user", "content": [part]}]})
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages", part
    assert stores(base) == ["s"]


def test_an_unknown_field_is_refused_naming_it(base, wb):
    vs = httpx.post(base + "/v1/vector_stores", json={"name": "s"}).json()
    a = upload(base, "a.md", b"# A\n\nThe pump needs oil.\n").json()
    b = upload(base, "b.md", b"# B\n\nThe pump needs water.\n").json()
    for f, team in ((a, "oil"), (b, "water")):
        httpx.post(base + f"/v1/vector_stores/{vs['id']}/files", json={"file_id": f["id"], "attributes": {"team": team}})
    deadline = time.monotonic() + 60
    for f in (a, b):  # indexed in the background: poll as the openai client's *_and_poll helpers do
        while httpx.get(base + f"/v1/vector_stores/{vs['id']}/files/{f['id']}").json()["status"] == "in_progress":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    search = base + f"/v1/vector_stores/{vs['id']}/search"
    typo = httpx.post(search, json={"query": "pump", "filter": {"type": "eq", "key": "team", "value": "oil"}})
    assert typo.status_code == 400 and typo.json()["error"]["param"] == "filter"
    assert "Unrecognized request argument supplied: filter" in typo.json()["error"]["message"]
    right = httpx.post(search, json={"query": "pump", "filters": {"type": "eq", "key": "team", "value": "oil"}})
    assert [h["filename"] for h in right.json()["data"]] == ["a.md"]
    for url, body, param in (
        (search, {"query": "pump", "filters": {"type": "eq", "key": "team", "value": "oil", "vale": 1}}, "filters"),
        (search, {"query": "pump", "ranking_options": {"score_treshold": 0.5}}, "ranking_options.score_treshold"),
        (
            base + "/v1/vector_stores",
            {
                "name": "t",
                "chunking_strategy": {
                    "type": "static",
                    "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 0, "overlap": 5},
                },
            },
            "chunking_strategy.static.overlap",
        ),
        (base + "/v1/vector_stores", {"name": "t", "file_id": a["id"]}, "file_id"),
        (base + f"/v1/vector_stores/{vs['id']}/files", {"file_id": a["id"], "attributs": {}}, "attributs"),
        (base + "/v1/chat/completions", {"model": "offline", "mesages": []}, "mesages"),
    ):
        r = httpx.post(url, json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, body
    assert stores(base) == ["s"]


def test_a_refused_create_creates_nothing(base):
    for body in (
        {
            "name": "bad-chunks",
            "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 10}},
        },
        {"name": "bad-file", "file_ids": ["file-" + "a" * 32]},
        {"name": "bad-meta", "metadata": {"k": 5}},
        {"name": "bad-expiry", "expires_after": {"anchor": "last_active_at", "days": 0}},
    ):
        r = httpx.post(base + "/v1/vector_stores", json=body)
        assert r.status_code in (400, 404), body
        assert stores(base) == [], body


@pytest.mark.parametrize("name", ["a\x00b", "line\nbreak", "bell\x07", "tab\tname", "\ud800lone", "sep\u2028x"])
def test_a_store_name_with_a_control_character_is_refused(base, wb, name):
    r = httpx.post(
        base + "/v1/vector_stores", content=json.dumps({"name": name}), headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 400 and "control characters" in r.json()["error"]["message"]
    assert r.json()["error"]["param"] == "name"
    assert wb.store_names(internal=True) == []


# -- chats' own stores and attachments -------------------------------------------------------------------
def test_a_chats_own_store_and_attachment_are_unreachable(tmp_path, system, wb, chats):
    chat = chats.service(wb)
    session = chat.create_session(config="offline")
    chat.attach(session.id, b"# Private\n\nThe vault code is 4411.\n", "private.md")
    [secret] = [r.file_id for r in wb.file_records(session.store)]
    with Served(create_app(system, chats=chats)) as base:
        assert httpx.get(base + "/v1/files").json()["data"] == []
        assert httpx.get(base + f"/v1/files/{secret}").status_code == 404
        assert httpx.get(base + f"/v1/files/{secret}/content").status_code == 404
        assert httpx.delete(base + f"/v1/files/{secret}").status_code == 404
        assert wb.find_stored_file(secret) is not None and wb.file_record(session.store, secret) is not None
        # the store: not listed, no id, and its name cannot be "created" to add files to it
        assert stores(base) == []
        assert httpx.get(base + f"/v1/vector_stores/{vector_store_id(session.store)}").status_code == 404
        mine = upload(base, "mine.md", b"# Mine\n\nPlanted text.\n").json()
        r = httpx.post(base + "/v1/vector_stores", json={"name": session.store, "file_ids": [mine["id"]]})
        assert r.status_code == 400 and "chat session" in r.json()["error"]["message"]
        assert [rec.file_id for rec in wb.file_records(session.store)] == [secret]
        # nor read into another chat by its id
        r = httpx.post(
            base + "/v1/chat/completions",
            json={
                "model": "offline",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "vault code?"}, {"type": "file", "file": {"file_id": secret}}],
                    }
                ],
            },
        )
        assert r.status_code == 404
        assert len(chat.sessions()) == 1


# -- MCP over streamable HTTP -------------------------------------------------------------------------------------
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


def test_mcp_over_http_refuses_rebinding_other_origins_and_non_json(wb, tmp_path):
    port = free_port()
    with Served(http_app(wb, "127.0.0.1", port), port=port) as base:
        url = base + "/mcp"
        for headers, status in (
            ({"Host": f"evil.example:{port}"}, 421),
            ({"Origin": EVIL}, 403),
            ({"Origin": f"http://127.0.0.1:{port + 1}"}, 403),  # another local page
            ({"Sec-Fetch-Site": "cross-site"}, 403),
        ):
            r = httpx.post(url, json=INIT, headers={**MCP_HEADERS, **headers})
            assert r.status_code == status, headers
        r = httpx.post(url, content=json.dumps(INIT), headers={**MCP_HEADERS, "Content-Type": "text/plain"})
        assert r.status_code == 415
        assert r.headers["x-content-type-options"] == "nosniff"

        async def main():
            async with Client(url) as c:
                return {t.name for t in (await c.list_tools()).tools}

        assert "search" in anyio.run(main)  # the SDK's own client, as an MCP client connects


def test_mcp_tools_refuse_control_characters_and_chats_own_stores(wb, tmp_path, chats):
    chat = chats.service(wb)
    session = chat.create_session(config="offline")
    chat.attach(session.id, b"# Private\n\nThe vault code is 4411.\n", "private.md")

    async def main():
        async with Client(build_server(wb)) as c:
            for args, what in (
                ({"store": "s", "path": str(tmp_path / "a\x00b.md")}, "path"),
                ({"store": "s", "path": str(tmp_path), "glob": "*\x00"}, "glob"),
                ({"store": "s\x00t", "path": str(tmp_path)}, "store"),
            ):
                r = await c.call_tool("ingest_file", args)
                assert r.is_error and f"{what} must not contain control characters (U+0000" in r.content[0].text
            for tool, args in (
                ("search", {"query": "vault code", "store": session.store}),
                ("list_files", {"store": session.store}),
                ("delete_file", {"store": session.store, "file": "private.md"}),
                ("ingest_file", {"store": session.store, "path": str(tmp_path)}),
            ):
                r = await c.call_tool(tool, args)
                assert r.is_error and "chat session's own store" in r.content[0].text, tool

    anyio.run(main)
    assert len(wb.file_records(session.store)) == 1
