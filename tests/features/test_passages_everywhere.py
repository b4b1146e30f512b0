"""One merge of overlapping or touching chunks (knowledge.service.passages.merge_passages), in every surface.

A long Markdown section chunked with the default overlap (192 tokens, 48 overlapping) is searched
through chat, the knowledge tools, the CLI, the REST API and MCP; no surface returns two passages of
one file whose spans overlap or touch, and one asking for k passages gets k.
"""

from __future__ import annotations

import argparse
import json

import anyio
import httpx
import pytest
from mcp import Client

from knowledge.cli.chat import print_reply
from knowledge.cli.search import cmd_search
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.server.mcp import build_server
from knowledge.server.objects import vector_store_id
from knowledge.service.passages import MAX_MERGED_CHUNKS, merge_passages
from knowledge.system import System
from knowledge.tools.knowledge import KnowledgeTools
from knowledge.vectorstore.store import Hit
from knowledge.workbench import Workbench
from tests.helpers.api import Served

SECTION = "# Telescopes\n\n" + "\n\n".join(
    f"Part {i}: a reflecting telescope gathers starlight with a mirror, and the eyepiece magnifies the"
    f" image of planet number {i}; astronomers point the telescope at Jupiter and Saturn."
    for i in range(40)
)
QUERY = "reflecting telescope mirror eyepiece starlight"


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    w = Workbench(s)
    assert w.ingest_file("sky", SECTION.encode(), "telescopes.md").ok
    yield s
    s.close()


def apart(passages: list[dict]) -> bool:
    """No two passages of one file overlap or touch."""
    for i, a in enumerate(passages):
        for b in passages[i + 1 :]:
            if a["file"] == b["file"] and a["start"] <= b["end"] and b["start"] <= a["end"]:
                return False
    return True


def spans(items: list[dict], file_key: str = "file_id") -> list[dict]:
    return [{"file": h[file_key], "start": h["char_start"], "end": h["char_end"]} for h in items]


# -- the function ---------------------------------------------------------------------------------------
DOC = "".join(f"Sentence number {i} of the document. " for i in range(40))


def chunk(index: int, start: int, end: int, score: float, page: int | None = None, heading: str | None = None) -> Hit:
    return Hit(
        f"a:{index}", score, "a", "a.md", index, DOC[start:end], page=page, char_start=start, char_end=end, heading=heading
    )


def test_touching_chunks_merge_with_the_first_page_and_heading_and_the_best_score():
    found = [
        chunk(1, 100, 200, 0.9, page=2, heading="B"),
        chunk(0, 0, 100, 0.5, page=1, heading="A"),
        chunk(5, 500, 600, 0.4),
    ]
    hits, notes = merge_passages(found, 5)
    assert [h.id for h in hits] == ["a:1", "a:5"]
    top = hits[0]
    assert (top.char_start, top.char_end, top.score, top.text) == (0, 200, 0.9, DOC[0:200])
    assert (top.page, top.heading, top.chunks, top.chunk_count) == (1, "A", (0, 1), 2)
    assert hits[1].chunks == () and hits[1].chunk_count == 1 and notes["a:1"].chunks == (0, 1)


def test_a_touching_chunk_beyond_the_longest_passage_is_a_passage_of_its_own():
    found = [chunk(i, 100 * i, 100 * i + 100, 1.0 - i / 10) for i in range(5)]
    hits, _ = merge_passages(found, 5)
    assert [h.chunks for h in hits] == [(0, 1, 2), (3, 4)] and len(hits[0].chunks) == MAX_MERGED_CHUNKS


def test_merging_off_and_max_per_file():
    found = [chunk(0, 0, 100, 0.9), chunk(1, 50, 150, 0.8), chunk(4, 400, 500, 0.7)]
    assert len(merge_passages(found, 5, merge=False)[0]) == 3
    assert [h.id for h in merge_passages(found, 5, max_per_file=1)[0]] == ["a:0"]


# -- the surfaces ---------------------------------------------------------------------------------------
def test_search_gets_k_passages_none_touching_and_the_setting_turns_it_off(wb):
    merged = wb.search("sky", QUERY, k=3)
    assert len(merged) == 3 and any(h.chunk_count > 1 for h in merged)
    assert apart(spans([{"file_id": h.file_id, "char_start": h.char_start, "char_end": h.char_end} for h in merged]))
    plain = wb.search("sky", QUERY, k=3, merge=False)
    assert len(plain) == 3 and all(h.chunks == () for h in plain)
    assert not apart(
        spans(
            [
                {"file_id": h.file_id, "char_start": h.char_start, "char_end": h.char_end}
                for h in wb.search("sky", QUERY, k=8, merge=False)
            ]
        )
    )  # the chunks do overlap


def test_tools_and_cli_search_give_merged_passages(wb, capsys):
    r = KnowledgeTools(wb).vector_search("sky", QUERY, k=3)
    assert len(r.data["hits"]) == 3 and apart(spans(r.data["hits"]))
    assert r.text.startswith("[1] similarity ") and "chunks merged" in r.text
    args = argparse.Namespace(store="sky", query=QUERY, k=3, file=None, per_file=None, mode=None, json=True)
    assert cmd_search(wb, args) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out) == 3 and apart(spans(out)) and any(len(h["chunks"]) > 1 for h in out)


def test_chat_sources_and_also_searched_never_hold_two_pieces_of_one_passage(wb, capsys, chats):
    chat = chats.service(wb)
    s = chat.create_session(stores=["sky"])
    reply = chat.send(s.id, QUERY)
    everything = reply.citations + reply.also_searched
    assert reply.citations and apart(spans(everything))
    assert [c["n"] for c in reply.citations] == list(range(1, len(reply.citations) + 1))
    print_reply(reply)
    out = capsys.readouterr().out
    assert "Sources:" in out and "None" not in out and "[1] telescopes.md — Telescopes" in out


@pytest.mark.slow
def test_rest_and_mcp_search_give_merged_passages(system, wb):
    with Served(create_app(system)) as base:
        r = httpx.post(
            f"{base}/v1/vector_stores/{vector_store_id('sky')}/search",
            timeout=60,
            json={"query": QUERY, "max_num_results": 2},
        )
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert len(data) == 2 and apart(
        [{"file": d["file_id"], "start": d["attributes"]["char_start"], "end": d["attributes"]["char_end"]} for d in data]
    )
    assert all(d["attributes"]["chunks"] for d in data)  # the chunks each passage joins

    async def main() -> list[dict]:
        async with Client(build_server(wb)) as c:
            res = await c.call_tool("search", {"query": QUERY, "store": "sky", "k": 2})
            assert not res.is_error, res.content
            return res.structured_content["hits"]

    hits = anyio.run(main)
    assert len(hits) == 2 and apart(spans(hits)) and all(h["chunks"] for h in hits)
