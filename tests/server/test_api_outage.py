"""The REST API and MCP across a PostgreSQL outage (catalog, postgresql file store and pgvector in a
server of the test's own, stopped with ``pg_ctl stop -m immediate`` and started again): meanwhile
every request is a 503 with ``Retry-After`` and a message naming what cannot be reached; the first
request after the restart succeeds (the pools replace the connections the restart broke)."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client

from knowledge.config import load_settings
from knowledge.errors import BackendUnavailable
from knowledge.server.app import create_app
from knowledge.server.http import RETRY_AFTER_SECONDS, from_knowledge
from knowledge.server.mcp import build_server
from knowledge.system import System
from knowledge.workbench import Workbench

pytestmark = pytest.mark.slow


@pytest.fixture
def team_system(own_postgres, tmp_path) -> Iterator[System]:
    url = own_postgres.url
    settings = load_settings(
        data_dir=tmp_path / "data",
        catalog={"url": url},
        vector_store={"backend": "pgvector", "url": url},
        file_store={"backend": "postgresql"},
        embeddings={"model": "fake/hash-64"},
    )
    system = System(settings)
    yield system
    system.close()


@pytest.fixture
def team_wb(team_system) -> Workbench:
    return Workbench(team_system)


def upload(client: TestClient, name: str, text: str):
    return client.post("/v1/files", files={"file": (name, text.encode(), "text/markdown")}, data={"purpose": "assistants"})


def assert_unavailable(r, port: int) -> None:
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
    error = r.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "backend_unavailable"
    assert f"PostgreSQL catalog at 127.0.0.1:{port}/postgres" in error["message"]  # what, in words
    assert f"try again in {RETRY_AFTER_SECONDS} seconds" in error["message"]
    assert "Error" not in error["message"] and "Traceback" not in error["message"]  # no class names


@pytest.mark.processes
def test_the_api_answers_503_with_retry_after_during_an_outage_and_the_first_request_after_succeeds(
    own_postgres, team_system, team_wb
):
    client = TestClient(create_app(team_system), raise_server_exceptions=False)
    first = upload(client, "before.md", "# Before\n\nWritten before the restart.\n")
    assert first.status_code == 200, first.text
    vs = client.post("/v1/vector_stores", json={"name": "team"}).json()["id"]
    assert client.post(f"/v1/vector_stores/{vs}/search", json={"query": "restart"}).status_code == 200

    own_postgres.stop()
    assert_unavailable(upload(client, "during.md", "# During\n\nNot stored.\n"), own_postgres.port)
    assert_unavailable(client.get("/v1/vector_stores"), own_postgres.port)
    assert_unavailable(client.post(f"/v1/vector_stores/{vs}/search", json={"query": "restart"}), own_postgres.port)
    own_postgres.start()

    after = upload(client, "after.md", "# After\n\nWritten after the restart.\n")  # the file store's pool
    assert after.status_code == 200, after.text
    found = client.post(f"/v1/vector_stores/{vs}/search", json={"query": "restart"})  # pgvector's pool
    assert found.status_code == 200, found.text
    listed = client.get("/v1/files")  # the catalog's pool
    assert listed.status_code == 200
    names = sorted(f["filename"] for f in listed.json()["data"])
    assert names == ["after.md", "before.md"]  # the upload refused meanwhile left nothing
    assert client.get(f"/v1/files/{first.json()['id']}/content").content == b"# Before\n\nWritten before the restart.\n"


@pytest.mark.processes
def test_mcp_tools_say_the_database_cannot_be_reached_and_work_again_after(own_postgres, team_wb):
    async def main() -> None:
        async with Client(build_server(team_wb)) as c:
            ok = await c.call_tool("list_stores", {})
            assert not ok.is_error, ok.content
            own_postgres.stop()
            down = await c.call_tool("list_stores", {})
            assert down.is_error
            text = down.content[0].text
            assert f"PostgreSQL catalog at 127.0.0.1:{own_postgres.port}/postgres" in text
            assert f"try again in {RETRY_AFTER_SECONDS} seconds" in text
            own_postgres.start()
            again = await c.call_tool("list_stores", {})
            assert not again.is_error, again.content

    anyio.run(main)


def test_a_backend_that_cannot_be_reached_is_a_503_with_retry_after():
    answer = from_knowledge(BackendUnavailable("The s3 file store cannot read (bucket b at http://s3:9000): timed out."))
    assert answer.status == 503 and answer.headers == {"Retry-After": str(RETRY_AFTER_SECONDS)}
    assert answer.message.startswith("The s3 file store cannot read (bucket b at http://s3:9000): timed out.")
    response = answer.response()
    assert response.status_code == 503 and response.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
