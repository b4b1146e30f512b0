"""The container stack (issue 44, docs/container.md): the Dockerfile's image is built, the bundled model
embeds in it with no network, and compose.yaml's stack comes up healthy with local stand-ins for its
public PostgreSQL/pgvector and object-storage images; a file uploaded through the REST API is ingested
by the worker service and found by a search; ``down`` (without ``-v``) and ``up`` again keep the store,
the file, its bytes and the hit.

It needs docker (a daemon that answers), Docker Compose (``docker compose`` or ``docker-compose``) and
debootstrap, as root: without them it is skipped, saying what is missing, except under ``CI=true``,
where it fails. The images it builds are tagged by the digest of what goes into them
(tests/helpers/containers.py): a second run reuses them. The seconds of each step go to
``test-artifacts/docker/timings.json``."""

from __future__ import annotations

import io
import json
import os
import time

import httpx
import pytest
from openai import OpenAI

from tests.helpers import containers as c
from tests.helpers.env import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

HARBOUR = b"# Harbour notes\n\nThe lighthouse keeper paints the tower red every April, before the ferries return.\n"
INVOICES = b"# Accounts\n\nSuppliers' invoices are paid within thirty days of receipt, by bank transfer.\n"
QUESTION = "When is the lighthouse painted?"


@pytest.fixture(scope="module")
def compose() -> list[str]:
    try:
        return c.check_tools()
    except c.Unavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs the container test, but {exc}")
        pytest.skip(str(exc))


def wait_ingested(client: OpenAI, store: str, file_id: str, timeout: float = 300) -> object:
    deadline = time.monotonic() + timeout
    while True:
        entry = client.vector_stores.files.retrieve(vector_store_id=store, file_id=file_id)
        if entry.status != "in_progress" or time.monotonic() > deadline:
            return entry
        time.sleep(0.5)


def test_the_stack_ingests_searches_and_keeps_it_all_across_down_and_up(compose, tmp_path):
    timings: dict[str, float] = {}
    with c.timed(timings, "base image (debootstrap)"):
        base = c.base_image()
    version = c.python_version(base)
    with c.timed(timings, "wheelhouse (pip wheel)"):
        c.wheelhouse(version)
    with c.timed(timings, "stand-in images"):
        db_image, s3_image = c.standin_image("postgres", base), c.standin_image("s3", base)
    with c.timed(timings, "app image"):
        app_image = c.app_image(base)

    # the bundled model loads and embeds with no network at all (nothing is fetched at run time)
    probe = (
        "from knowledge.config import load_settings; from knowledge.embeddings import create_embedder;"
        "e = create_embedder(load_settings()); q = e.embed_query('How do cats sleep?');"
        "d = e.embed_documents(['Cats sleep sixteen hours a day.', 'The invoice is due in March.']);"
        "print(q.shape[0], round(float((q * q).sum()), 3), float(d[0] @ q) > float(d[1] @ q) + 0.3)"
    )
    assert c.run(["docker", "run", "--rm", "--network", "none", app_image, "python", "-c", probe]).split() == [
        "384",
        "1.0",
        "True",
    ]
    # not root, and the data folder is a volume
    assert c.run(["docker", "run", "--rm", "--network", "none", app_image, "id", "-u"]).strip() == "10001"
    config = json.loads(c.run(["docker", "image", "inspect", app_image]))[0]["Config"]
    assert "/data" in config["Volumes"] and config["Healthcheck"]["Test"][-2:] == ["knowledge-container", "health"]

    api_port, app_port = c.free_port(), c.free_port()
    env_file = tmp_path / "stack.env"
    values = c.stack_env(env_file, app=app_image, db=db_image, s3=s3_image, api_port=api_port, app_port=app_port)
    stack = c.Stack(compose, c.project_name(), env_file, api_port, app_port)
    client = OpenAI(base_url=f"http://127.0.0.1:{api_port}/v1", api_key=values["KNOWLEDGE_API_KEY"], max_retries=5)
    try:
        with c.timed(timings, "up (to healthy)"):
            stack("up", "-d", "--no-build")
            stack.wait_healthy()

        ready = httpx.get(f"http://127.0.0.1:{api_port}/readyz", timeout=30)
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "ready" and all(check["ok"] for check in ready.json()["checks"].values())
        assert httpx.get(f"http://127.0.0.1:{api_port}/v1/vector_stores", timeout=30).status_code == 401  # no key: refused
        assert httpx.get(f"http://127.0.0.1:{app_port}/_stcore/health", timeout=30).text == "ok"

        with c.timed(timings, "ingest two files and search"):
            store = client.vector_stores.create(name="container test")
            files = [
                client.files.create(file=(name, io.BytesIO(body), "text/markdown"), purpose="assistants")
                for name, body in (("harbour.md", HARBOUR), ("accounts.md", INVOICES))
            ]
            for f in files:
                client.vector_stores.files.create(vector_store_id=store.id, file_id=f.id)
            entries = [wait_ingested(client, store.id, f.id) for f in files]
            assert [e.status for e in entries] == ["completed", "completed"], entries
            hits = client.vector_stores.search(store.id, query=QUESTION, max_num_results=2).data
        assert hits and hits[0].filename == "harbour.md", hits
        assert all(h.score <= hits[0].score for h in hits)
        assert "paints the tower red" in hits[0].content[0].text
        # the worker service ingested them (the API only queues: ingest.worker_threads = 0)
        worker_log = stack("logs", "--no-color", "worker")
        assert "harbour.md into container test: done" in worker_log, worker_log[-3000:]

        stack.remember_volumes()
        with c.timed(timings, "down"):
            stack("down")
        assert stack.containers() == []
        with c.timed(timings, "up again (to healthy)"):
            stack("up", "-d", "--no-build")
            stack.wait_healthy()

        assert [s.id for s in client.vector_stores.list()] == [store.id]
        assert sorted(f.id for f in client.files.list()) == sorted(f.id for f in files)
        assert client.files.content(files[0].id).read() == HARBOUR
        assert client.vector_stores.files.retrieve(vector_store_id=store.id, file_id=files[0].id).status == "completed"
        again = client.vector_stores.search(store.id, query=QUESTION, max_num_results=2).data
        assert [(h.file_id, round(h.score, 4)) for h in again] == [(h.file_id, round(h.score, 4)) for h in hits]
    finally:
        with c.timed(timings, "down -v"):
            stack.cleanup()
        out = REPO / "test-artifacts" / "docker"
        out.mkdir(parents=True, exist_ok=True)
        (out / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
        print("container test timings (s):", timings)
