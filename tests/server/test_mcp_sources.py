"""The MCP server's source tools (``list_sources``, ``run_source``, ``source_runs``), driven by the
official ``mcp`` SDK's client in-process, over the test process's ``dict`` source kind, as users
(``knowledge mcp --user NAME``): read and run only (no tool adds or changes a source), a reader
may not run, a member without access finds no source, and no answer carries a secret."""

from __future__ import annotations

import time

import anyio
import pytest
from mcp import Client

from knowledge.server.mcp import build_server
from knowledge.workbench import Workbench
from tests.helpers.sources import PW, DictSource, counting_system

SECRET = "mcp-never-says-this"


@pytest.fixture
def team(tmp_path, request):
    name = request.node.name
    DictSource.FILES[name] = {
        "public/handbook.md": (b"The handbook says lunch is at noon.", None),
        "public/broken.md": (b"This one vanishes before it is read.", None),
    }
    DictSource.VANISH.add("public/broken.md")
    system, _ = counting_system(tmp_path)
    system.people.set_up_admin("root", PW)
    for who in ("ana", "bob"):
        system.people.accounts.create(who, PW)
    wb = Workbench(system)
    root = wb.as_user(system.people.accounts.actor("root"))
    root.create_store("kb")
    root.share_store("kb", "user", "bob", "read")
    root.sources.add("team", "dict", "kb", {"name": name, "password": SECRET}, every_minutes=30)
    yield wb, name
    system.close()
    DictSource.FILES.pop(name, None)
    DictSource.VANISH.discard("public/broken.md")


async def tool(c: Client, name: str, args: dict) -> dict:
    r = await c.call_tool(name, args)
    assert not r.is_error, r.content
    assert SECRET not in str(r.structured_content)
    return r.structured_content


async def refused(c: Client, name: str, args: dict) -> str:
    r = await c.call_tool(name, args)
    assert r.is_error, r.structured_content
    return r.content[0].text


def test_sources_are_listed_run_and_followed_but_not_added_over_mcp(team):
    wb, name = team

    async def main():
        async with Client(build_server(wb, "root")) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"list_sources", "run_source", "source_runs"} <= names
            assert not {n for n in names if "source" in n} - {"list_sources", "run_source", "source_runs"}
            [listed] = (await tool(c, "list_sources", {}))["sources"]
            assert listed == {
                "name": "team",
                "kind": "dict",
                "store": "kb",
                "location": f"dict://{name}",
                "schedule": "every 30 min",
                "paused": False,
                "last_run": None,
            }
            run = (await tool(c, "run_source", {"name": "team"}))["run"]
            assert run["status"] in ("queued", "running")
            deadline = time.monotonic() + 60
            while True:
                out = await tool(c, "source_runs", {"name": "team"})
                if out["runs"][0]["status"] not in ("queued", "running"):
                    break
                assert time.monotonic() < deadline, "the run did not finish in time"
                await anyio.sleep(0.05)
            [done] = out["runs"]
            assert done["id"] == run["id"] and done["status"] == "done" and done["summary"] == "1 added, 1 failed"
            first, second = out["newest_items"]  # failed first, with its reason
            assert (first["path"], first["ok"]) == ("public/broken.md", False) and "vanished" in first["message"]
            assert (second["path"], second["ok"]) == ("public/handbook.md", True)
            assert "limit must be an integer" in await refused(c, "source_runs", {"name": "team", "limit": 0})
            assert (await tool(c, "list_sources", {"store": "kb"}))["sources"][0]["last_run"]["status"] == "done"

        async with Client(build_server(wb, "bob")) as c:  # may read the store: sees, may not run
            assert [s["name"] for s in (await tool(c, "list_sources", {}))["sources"]] == ["team"]
            assert (await tool(c, "source_runs", {"name": "team"}))["runs"][0]["status"] == "done"
            assert "bob may not change the store 'kb'" in await refused(c, "run_source", {"name": "team"})

        async with Client(build_server(wb, "ana")) as c:  # no access: no source
            assert (await tool(c, "list_sources", {}))["sources"] == []
            for tool_name in ("run_source", "source_runs"):
                assert "There is no source 'team'" in await refused(c, tool_name, {"name": "team"})

    anyio.run(main)
