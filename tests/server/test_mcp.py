"""The MCP server, driven by the official ``mcp`` SDK's client: in-process on a fast fake embedder,
and over stdio as a client launches it (``python -m knowledge mcp``) with the real model."""

from __future__ import annotations

import json
import sys

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.mcp import build_server
from knowledge.system import System
from tests.helpers.env import REPO

TOOLS = {"search", "list_stores", "list_files", "ingest_file", "delete_file", "remember", "recall", "forget"}


async def tool(client: Client, name: str, args: dict) -> dict:
    r = await client.call_tool(name, args)
    assert not r.is_error, r.content
    return r.structured_content


async def refused(client: Client, name: str, args: dict) -> str:
    r = await client.call_tool(name, args)
    assert r.is_error
    return r.content[0].text


@pytest.fixture
def system(tmp_path, corpus):
    settings = load_settings(data_dir=tmp_path / "data", mcp={"allowed_dirs": [str(corpus / "md" / "rust-book")]})
    s = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    yield s
    s.close()


@pytest.mark.slow
def test_tools_resources_memory_and_confinement_in_process(wb, corpus, tmp_path, system):
    outside = tmp_path / "secret.md"
    outside.write_text("# Secret\n\nThe vault code is 1234.\n")

    async def main():
        async with Client(build_server(wb)) as c:
            assert {t.name for t in (await c.list_tools()).tools} >= TOOLS
            book = corpus / "md" / "rust-book"
            out = await tool(c, "ingest_file", {"store": "rust", "path": str(book), "glob": "ch09-0[12]-*.md"})
            assert [r["outcome"] for r in out["results"]] == ["indexed", "indexed"]
            assert "outside the folders allowed" in await refused(c, "ingest_file", {"store": "rust", "path": str(outside)})
            assert "outside the folders allowed" in await refused(c, "ingest_file", {"store": "rust", "path": str(tmp_path)})
            assert not (
                system.catalog.get_store("rust") and [f for f in wb.store_files("rust") if f.file_name == "secret.md"]
            )

            stores = await tool(c, "list_stores", {})
            assert [s["name"] for s in stores["stores"]] == ["rust"] and stores["stores"][0]["files"] == 2
            hits = (await tool(c, "search", {"query": "the ? operator propagates errors", "store": "rust", "k": 3}))["hits"]
            assert hits and {"file", "file_id", "page", "char_start", "char_end", "text", "score"} <= set(hits[0])
            panic_file = "ch09-01-unrecoverable-errors-with-panic.md"
            everywhere = (
                await tool(
                    c,
                    "search",
                    {"query": "panic! macro", "k": 3, "filters": {"type": "eq", "key": "filename", "value": panic_file}},
                )
            )["hits"]
            assert everywhere and {h["file"] for h in everywhere} == {"ch09-01-unrecoverable-errors-with-panic.md"}
            assert "Unknown filter type" in await refused(c, "search", {"query": "x", "filters": {"type": "like"}})

            files = (await tool(c, "list_files", {"store": "rust"}))["files"]
            res = await c.read_resource(files[0]["resource"])
            chunks = json.loads(res.contents[0].text)["chunks"]
            assert chunks and chunks[0]["chunk_index"] == 0 and chunks[0]["char_start"] == 0
            gone = await tool(c, "delete_file", {"store": "rust", "file": files[0]["name"]})
            assert gone["chunks"] == len(chunks)
            assert len((await tool(c, "list_files", {"store": "rust"}))["files"]) == 1

            await tool(c, "remember", {"text": "The customer prefers email.", "dataset": "crm", "id": "crm:1"})
            await tool(c, "remember", {"text": "Water the plants on Friday.", "dataset": "home"})
            got = (await tool(c, "recall", {"query": "The customer prefers email.", "dataset": "crm"}))["memories"]
            assert [m["id"] for m in got] == ["crm:1"]
            assert len((await tool(c, "recall", {"query": "plants", "dataset": None}))["memories"]) == 2
            assert "never deletes everything" in await refused(c, "forget", {})
            assert (await tool(c, "forget", {"dataset": "crm"}))["forgotten"] == 1
            assert not (await tool(c, "recall", {"query": "email", "dataset": "crm"}))["memories"]

    anyio.run(main)


@pytest.mark.processes
@pytest.mark.model
@pytest.mark.slow
def test_stdio_server_searches_the_rust_book_and_remembers(tmp_path, corpus):
    book = corpus / "md" / "rust-book"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "knowledge", "mcp"],
        cwd=str(tmp_path),
        env={
            "PYTHONPATH": str(REPO),
            "KNOWLEDGE_DATA_DIR": str(tmp_path / "data"),
            "KNOWLEDGE_MCP__ALLOWED_DIRS": json.dumps([str(book)]),
            "OMP_NUM_THREADS": "1",
        },
    )

    async def main():
        async with Client(params) as c:
            assert {t.name for t in (await c.list_tools()).tools} >= TOOLS
            out = await tool(c, "ingest_file", {"store": "rust-book", "path": str(book), "glob": "ch09-0[12]-*.md"})
            assert len(out["results"]) == 2 and all(r["outcome"] == "indexed" for r in out["results"])
            hits = (
                await tool(
                    c, "search", {"query": "How do I propagate an error to the caller with ?", "store": "rust-book", "k": 3}
                )
            )["hits"]
            assert hits[0]["file"] == "ch09-02-recoverable-errors-with-result.md"
            assert hits[0]["char_end"] > hits[0]["char_start"] and hits[0]["heading"]
            r = await c.call_tool("ingest_file", {"store": "rust-book", "path": str(REPO / "README.md")})
            assert r.is_error and "outside the folders allowed" in r.content[0].text
            await tool(c, "remember", {"text": "The deploy window is Tuesday at 10:00.", "dataset": "ops"})
            got = (await tool(c, "recall", {"query": "when can we deploy?", "dataset": "ops"}))["memories"]
            assert got and "Tuesday" in got[0]["text"]

    anyio.run(main)
