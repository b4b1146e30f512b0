"""A filtered search embeds the query once: the attribute filter rides inside ``Searcher.search``'s
one loop (an equality as the backend's own ``where``, anything else as a ``keep`` predicate), so a
selective filter over a big store neither re-runs the search nor re-embeds the query.

Driven as a client does: the REST API on a real uvicorn server, and the MCP server through the
``mcp`` SDK's in-process client; the workbench embeds with the fake model ``fake/hash-32`` (set as
a user would, ``KNOWLEDGE_EMBEDDINGS__MODEL``) and its ``embedder`` is wrapped to count the query
embeddings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client

from knowledge.config import load_settings
from knowledge.server.app import create_app
from knowledge.server.mcp import build_server
from knowledge.server.objects import vector_store_id
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served
from tests.helpers.env import prepared_data, use_prepared_data

DEV_FILES, SECTIONS = 4, 60  # team=dev: four long files of many chunks each
OPS = (7, 61, 133, 200, 238)  # team=ops: five one-chunk notes, a few of the store's ~250 chunks
WORDS = (
    "harbour",
    "lamp",
    "bread",
    "yeast",
    "result",
    "panic",
    "lifetime",
    "borrow",
    "vector",
    "river",
    "garden",
    "signal",
    "ledger",
    "bridge",
    "window",
    "orchard",
)
MODEL = "fake/hash-32"
QUERY = "the harbour lamp and the river bridge"


def text(i: int) -> str:
    picked = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6)]
    return f"Note {i}: " + " ".join(picked) + f". Entry number {i} of the team's log."


def build(work: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", MODEL)
        w = Workbench(load_settings())
        try:
            for d in range(DEV_FILES):
                sections = [
                    f"# Section {i}\n\n{text(i)} " + " ".join(f"s{i}w{x}" for x in range(40))
                    for i in range(d * SECTIONS, (d + 1) * SECTIONS)
                    if i not in OPS
                ]
                r = w.ingest_file("logs", "\n\n".join(sections).encode(), f"dev-{d}.md", attributes={"team": "dev", "n": d})
                assert r.outcome == "indexed" and r.chunks >= len(sections), r.message
            for i in OPS:
                r = w.ingest_file("logs", text(i).encode(), f"note-{i:03}.txt", attributes={"team": "ops", "n": i})
                assert r.outcome == "indexed", r.message
        finally:
            w.close()


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    return prepared_data(tmp_path_factory, "filtered", build)


@pytest.fixture
def system(prepared, monkeypatch) -> Iterator[System]:
    use_prepared_data(prepared)
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", MODEL)
    s = System(load_settings())
    yield s
    s.close()


@pytest.fixture
def wb(system) -> Workbench:
    return Workbench(system)


@pytest.fixture
def embeddings(system, monkeypatch) -> list[str]:
    """The queries the system embeds from here on (``embed_query`` of every embedder it hands out)."""
    seen: list[str] = []
    original = system.embedder

    class Counted:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def embed_query(self, query: str) -> Any:
            seen.append(query)
            return self.inner.embed_query(query)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(system, "embedder", lambda *a, **kw: Counted(original(*a, **kw)))
    return seen


@pytest.fixture
def rounds(system, monkeypatch) -> list[int]:
    """The ``fetch`` of each ranking the searches ask the backend for from here on."""
    asked: list[int] = []
    original = system.searcher.rank

    def rank(store: str, query: str, vector: Any, fetch: int, **kwargs: Any) -> Any:
        asked.append(fetch)
        return original(store, query, vector, fetch, **kwargs)

    monkeypatch.setattr(system.searcher, "rank", rank)
    return asked


def ops_names(k: int, wb: Workbench) -> list[str]:
    """The names of the ``k`` best team=ops passages by vector score, from the unfiltered ranking
    (every chunk ranked; touching chunks of a file are one passage, as every search gives them)."""
    chunks = wb.vector_store("logs").count()
    everything = wb.search("logs", QUERY, k=chunks, mode="vector")
    assert chunks > 200 and len(everything) > 100
    return [h.file_name for h in everything if h.metadata.get("attr_team") == "ops"][:k]


@pytest.mark.parametrize(
    "filters",
    [
        {"type": "eq", "key": "team", "value": "ops"},  # plain equality: the backend's where
        {"type": "in", "key": "team", "value": ["ops", "finance"]},  # a predicate the backend cannot do
        {"type": "and", "filters": [{"type": "eq", "key": "team", "value": "ops"}, {"type": "gte", "key": "n", "value": 0}]},
    ],
    ids=["eq", "in", "and"],
)
def test_a_selective_rest_search_embeds_the_query_once_and_returns_k(system, wb, embeddings, rounds, filters):
    want = ops_names(3, wb)
    embeddings.clear()
    rounds.clear()
    with Served(create_app(system)) as base:
        r = httpx.post(
            f"{base}/v1/vector_stores/{vector_store_id('logs')}/search",
            timeout=60,
            json={"query": QUERY, "max_num_results": 3, "filters": filters, "mode": "vector"},
        )
        assert r.status_code == 200, r.text
        assert embeddings == [QUERY]
        assert [d["filename"] for d in r.json()["data"]] == want
        assert {d["attributes"]["team"] for d in r.json()["data"]} == {"ops"}
        if filters["type"] != "in":  # an equality is the backend's own where: one ranking of the k asked
            assert rounds == [3]

        embeddings.clear()  # the default (hybrid) ranking: every match, one embedding
        r = httpx.post(
            f"{base}/v1/vector_stores/{vector_store_id('logs')}/search",
            timeout=60,
            json={"query": QUERY, "max_num_results": 10, "filters": filters},
        )
        assert r.status_code == 200, r.text
        assert embeddings == [QUERY]
        assert sorted(d["filename"] for d in r.json()["data"]) == [f"note-{i:03}.txt" for i in OPS]


def test_a_selective_mcp_search_embeds_the_query_once_per_store(wb, embeddings):
    want = ops_names(3, wb)
    embeddings.clear()

    async def main() -> tuple[dict, dict]:
        async with Client(build_server(wb)) as c:
            one = await c.call_tool(
                "search",
                {
                    "query": QUERY,
                    "store": "logs",
                    "k": 3,
                    "mode": "vector",
                    "filters": {"type": "in", "key": "team", "value": ["ops"]},
                },
            )
            every = await c.call_tool(
                "search",
                {"query": QUERY, "k": 3, "mode": "vector", "filters": {"type": "eq", "key": "team", "value": "ops"}},
            )
            return one.structured_content, every.structured_content

    one, every = anyio.run(main)
    assert [h["file"] for h in one["hits"]] == want
    assert [h["file"] for h in every["hits"]] == want
    assert embeddings == [QUERY, QUERY]  # one search of one store each
