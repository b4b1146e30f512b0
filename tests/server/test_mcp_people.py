"""The MCP server with user accounts: in-process (as ``knowledge mcp --user NAME`` runs it) every
tool acts as that user, and over streamable HTTP each request acts as the user of its key, read on
every request (two users on one server process, a revoked key refused at the next request, the
shared key refused). Memories are their user's own (the collection ``agent-memory~<username>``)."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import SecretStr

from knowledge.agent_memory import VectorMemory
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import AuthenticationFailed
from knowledge.server.mcp import KnowledgeTools, build_server, http_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served, free_port
from tests.helpers.env import REPO

PW = "correct horse battery"
LEAVE = "The parental leave policy grants sixteen weeks of paid leave to every parent."
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def tool(c: Client, name: str, args: dict) -> dict:
    r = await c.call_tool(name, args)
    assert not r.is_error, r.content
    return r.structured_content


async def refused(c: Client, name: str, args: dict) -> str:
    r = await c.call_tool(name, args)
    assert r.is_error, r.structured_content
    return r.content[0].text


@pytest.fixture
def team(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "roadmap.md").write_text("# Roadmap\n\nThe quarterly roadmap ships the new search page.\n")
    settings = load_settings(data_dir=tmp_path / "data", mcp={"allowed_dirs": [str(folder)]})
    system = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    wb = Workbench(system)
    system.people.set_up_admin("root", PW)
    for name in ("ana", "bo"):
        system.people.accounts.create(name, PW)
    ana = wb.as_user(system.people.accounts.actor("ana"))
    fid = ana.ingest_file("hr", LEAVE.encode(), "leave.txt").file_id
    keys = {name: system.people.keys.create(name, "mcp")[1] for name in ("root", "ana", "bo")}
    yield system, wb, fid, keys, folder
    system.close()


async def invisible(c: Client, fid: str, folder, http: bool = False) -> None:
    """Every tool and resource of ``c`` keeps ana's store ``hr`` hidden."""
    assert (await tool(c, "list_stores", {}))["stores"] == []
    assert not (await tool(c, "search", {"query": "parental leave", "k": 5}))["hits"]
    for name, args in (
        ("search", {"query": "parental leave", "store": "hr"}),
        ("list_files", {"store": "hr"}),
        ("delete_file", {"store": "hr", "file": fid}),
        ("delete_file", {"store": "hr", "file": "leave.txt"}),
        ("ingest_file", {"store": "hr", "path": str(folder / "roadmap.md")}),
    ):
        text = await refused(c, name, args)
        assert LEAVE not in text and "hr" in text, (name, text)
    if http:  # a static resource gets no request: it cannot tell whose stores to list
        with pytest.raises(MCPError, match="list_stores tool"):
            await c.read_resource("knowledge://stores")
    else:
        assert json.loads((await c.read_resource("knowledge://stores")).contents[0].text) == {"stores": []}
    with pytest.raises(MCPError, match="No indexed file"):
        await c.read_resource(f"knowledge://stores/hr/files/{fid}")


def test_in_process_as_a_user_every_tool_hides_another_members_store(team):
    system, wb, fid, _, folder = team

    async def main():
        async with Client(build_server(wb, user="bo")) as bo:
            await invisible(bo, fid, folder)
            out = await tool(bo, "ingest_file", {"store": "bo-notes", "path": str(folder / "roadmap.md")})
            assert [r["outcome"] for r in out["results"]] == ["indexed"]
        async with Client(build_server(wb, user="ana")) as ana:
            assert [s["name"] for s in (await tool(ana, "list_stores", {}))["stores"]] == ["hr"]  # not bo's
            hits = (await tool(ana, "search", {"query": "parental leave", "store": "hr"}))["hits"]
            assert hits and hits[0]["file_id"] == fid
        async with Client(build_server(wb)) as local:  # stdio's default: the local admin sees everything
            assert [s["name"] for s in (await tool(local, "list_stores", {}))["stores"]] == ["bo-notes", "hr"]

    anyio.run(main)
    assert system.people.sharing.owner("bo-notes") == "bo" and wb.file_record("hr", fid) is not None
    assert ("bo", "file.ingest") in {(e.actor, e.action) for e in system.people.audit.events(store="bo-notes")}
    with pytest.raises(AuthenticationFailed):
        build_server(wb, user="nobody")


def test_read_only_sharing_over_mcp_searches_but_does_not_ingest_or_delete(team):
    system, wb, fid, _, folder = team
    wb.as_user(system.people.accounts.actor("ana")).share_store("hr", "user", "bo", "read")

    async def main():
        async with Client(build_server(wb, user="bo")) as bo:
            assert [s["name"] for s in (await tool(bo, "list_stores", {}))["stores"]] == ["hr"]
            assert (await tool(bo, "search", {"query": "parental leave", "store": "hr"}))["hits"]
            assert "may not change the store" in await refused(
                bo, "ingest_file", {"store": "hr", "path": str(folder / "roadmap.md")}
            )
            assert "may not change the store" in await refused(bo, "delete_file", {"store": "hr", "file": fid})

    anyio.run(main)
    assert [f.file_id for f in wb.store_files("hr")] == [fid]


def test_a_file_only_a_group_may_read_is_not_found_by_the_others_tools(team):
    """ana's store hr is everyone's to read (cy may also write to it); salaries.txt in it is group
    pay's (bo): to cy every tool and the file's resource answer it as a file the store does not hold,
    and a copy of its bytes cy ingests never names it."""
    system, wb, fid, _, folder = team
    system.people.accounts.create("cy", PW)
    system.people.accounts.create_group("pay")
    system.people.accounts.add_to_group("pay", "bo")
    ana = wb.as_user(system.people.accounts.actor("ana"))
    ana.share_store("hr", "everyone", "", "read")
    ana.share_store("hr", "user", "cy", "write")
    salaries = "Salaries: ana earns 100, bo earns 90; salaries are reviewed each spring."
    sal = ana.ingest_file("hr", salaries.encode(), "salaries.txt", readers="group:pay").file_id
    (folder / "copy.txt").write_text(salaries)
    missing = "file-" + "0" * 32

    async def main():
        async with Client(build_server(wb, user="bo")) as bo, Client(build_server(wb, user="cy")) as cy:
            for c, files in ((bo, {fid, sal}), (cy, {fid})):
                assert {f["file_id"] for f in (await tool(c, "list_files", {"store": "hr"}))["files"]} == files
                (store,) = (await tool(c, "list_stores", {}))["stores"]
                assert store["files"] == len(files)
                for args in ({"store": "hr"}, {}):
                    hits = (await tool(c, "search", {"query": "salaries earns", "k": 5, **args}))["hits"]
                    assert {h["file_id"] for h in hits} == files, args
            chunks = json.loads((await bo.read_resource(f"knowledge://stores/hr/files/{sal}")).contents[0].text)
            assert salaries in chunks["chunks"][0]["text"]
            words = []
            for ref in (sal, missing):
                with pytest.raises(MCPError) as err:
                    await cy.read_resource(f"knowledge://stores/hr/files/{ref}")
                words.append(str(err.value).replace(ref, "<id>"))
            assert words[0] == words[1] and "No indexed file" in words[0]
            for ref, other in ((sal, missing), ("salaries.txt", "nothing.txt")):
                hidden = await refused(cy, "delete_file", {"store": "hr", "file": ref})
                assert hidden == (await refused(cy, "delete_file", {"store": "hr", "file": other})).replace(other, ref)
            out = await tool(cy, "ingest_file", {"store": "hr", "path": str(folder / "copy.txt")})
            (result,) = out["results"]
            assert result["outcome"] == "duplicate" and result["file_id"] is None and result["chunks"] == 0
            assert "salaries.txt" not in result["message"] and sal not in json.dumps(out)

    anyio.run(main)
    cy_wb = wb.as_user(system.people.accounts.actor("cy"))
    assert cy_wb.vector_store("hr").chunks(sal) == cy_wb.vector_store("hr").chunks(missing) == []
    assert wb.vector_store("hr").chunks(sal) and wb.file_record("hr", sal) is not None  # still there


def test_memories_are_their_users_own(team):
    _, wb, *_ = team

    async def main():
        async with Client(build_server(wb, user="ana")) as ana, Client(build_server(wb, user="bo")) as bo:
            await tool(ana, "remember", {"text": "Ana's customer prefers email.", "dataset": "crm", "id": "crm:1"})
            await tool(bo, "remember", {"text": "Bo's customer prefers phone calls.", "dataset": "crm", "id": "crm:1"})
            mine = (await tool(bo, "recall", {"query": "customer prefers email", "dataset": None, "k": 10}))["memories"]
            assert [m["text"] for m in mine] == ["Bo's customer prefers phone calls."]  # the same id: his own
            assert (await tool(bo, "forget", {"dataset": "crm"}))["forgotten"] == 1
            got = (await tool(ana, "recall", {"query": "customer prefers email", "dataset": "crm"}))["memories"]
            assert [(m["id"], m["text"]) for m in got] == [("crm:1", "Ana's customer prefers email.")]
        async with Client(build_server(wb)) as local:  # the local admin's memories are the collection itself
            assert not (await tool(local, "recall", {"query": "customer prefers email", "dataset": None}))["memories"]

    anyio.run(main)
    # the collection the app's Agent memory page keeps a person's memories in
    embedder = wb.embedder()
    assert VectorMemory(wb.backend(), embedder, collection="agent-memory~ana").count() == 1
    assert VectorMemory(wb.backend(), embedder, collection="agent-memory~bo").count() == 0


def key_client(url: str, key: str) -> Client:
    return Client(
        streamable_http_client(url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60))
    )


def test_over_http_each_request_acts_as_its_keys_user_and_a_revoked_key_stops_at_once(team):
    system, wb, fid, keys, folder = team
    wb.settings = wb.settings.model_copy(update={"api_key": SecretStr("shared-key")})
    port = free_port()
    with Served(http_app(wb, "127.0.0.1", port), port=port) as base:
        url = base + "/mcp"

        async def main():
            async with key_client(url, keys["ana"]) as ana, key_client(url, keys["bo"]) as bo:
                await invisible(bo, fid, folder, http=True)
                assert [s["name"] for s in (await tool(ana, "list_stores", {}))["stores"]] == ["hr"]
                await tool(bo, "remember", {"text": "Bo's own memory.", "dataset": "crm"})
                assert not (await tool(ana, "recall", {"query": "Bo's own memory.", "dataset": None}))["memories"]
                key_id = next(k.id for k in system.people.keys.list("bo"))
                assert system.people.keys.revoke(key_id)
                with pytest.raises(MCPError, match="error response"):  # the SDK says so of the 401
                    await bo.call_tool("list_stores", {})
                assert [s["name"] for s in (await tool(ana, "list_stores", {}))["stores"]] == ["hr"]

        anyio.run(main)
        for key, status in ((None, 401), ("shared-key", 401), (keys["bo"], 401), ("kn-unknown", 401), (keys["root"], 200)):
            headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {key}"} if key else {})}
            r = httpx.post(url, json=INIT, headers=headers)
            assert r.status_code == status, (key, r.text)
            if status == 401:
                assert r.json()["error"]["code"] == "invalid_api_key"


@pytest.mark.processes
@pytest.mark.slow
def test_knowledge_mcp_user_over_stdio_acts_as_that_account(team, tmp_path):
    system = team[0]
    env = {
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_DATA_DIR": str(tmp_path / "data"),
        "OMP_NUM_THREADS": "1",
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64",
    }
    system.close()  # the DuckDB catalog file is the process's now

    async def stores(*user: str) -> list[str]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "knowledge", "mcp", *user], cwd=str(tmp_path), env=env
        )
        async with Client(params) as c:
            return [s["name"] for s in (await tool(c, "list_stores", {}))["stores"]]

    assert anyio.run(stores, "--user", "bo") == []
    assert anyio.run(stores, "--user", "ana") == ["hr"]
    assert anyio.run(stores) == ["hr"]  # the local admin
    gone = subprocess.run(
        [sys.executable, "-m", "knowledge", "mcp", "--user", "nobody"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert gone.returncode != 0 and "no longer exists" in gone.stderr and "Traceback" not in gone.stderr


def test_a_persons_tools_are_built_over_the_shared_memories(team):
    """acting_for builds the person's tools (no copy): their workbench, the server's one AgentMemories."""
    _, wb, *_ = team
    tools = KnowledgeTools(wb, http=True)
    ana = tools.acting_for(wb.actor_of("ana"))
    assert ana is not tools and ana.wb.actor.username == "ana" and tools.wb.actor.local
    assert ana.memories is tools.memories and ana.http
    assert ana.memory() is tools.acting_for(wb.actor_of("ana")).memory()  # made once per collection
    assert ana.memory() is not tools.memory()  # each person's own collection
