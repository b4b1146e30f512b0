"""Quotas and rate limits over the REST API (issue 44, item 2), against a real uvicorn server with user
accounts: a member over their byte quota is answered 403 ``quota_exceeded`` with the limit and the use
in words, and nothing is written (an upload kept no object; a file attached to a store left no record
and no chunk); a key over its rate is answered 429 with ``Retry-After`` while an admin's key is not
limited; ``GET /v1/usage`` is one's own, others' an admin's; ``POST /v1/usage/limits`` an admin's; and
two real ``serve`` processes on one PostgreSQL catalog count one key's requests together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served, free_port
from tests.helpers.pg import pg_catalog_settings

PW = "correct horse battery"
LEAVE = b"The parental leave policy grants sixteen weeks of paid leave to every parent."  # 77 bytes


def make_system(tmp_path, **quotas) -> System:
    s = System(
        load_settings(data_dir=tmp_path / "data", quotas=quotas),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    s.people.set_up_admin("root", PW)
    s.people.accounts.create("ana", PW)
    return s


@pytest.fixture
def system(tmp_path, request):
    """root (admin) and ana (member); 120 bytes a person, no rate unless the test's parameter sets one."""
    s = make_system(tmp_path, user_bytes=120, **getattr(request, "param", {}))
    yield s
    s.close()


@pytest.fixture
def clients(system):
    """``{name: httpx.Client}`` with root's and ana's keys, against a served app whose rate windows
    stand still (a fixed clock: the minute never turns during the test)."""
    system.people.rates.clock = lambda: 1_000_000.0  # 40 s left in its minute
    keys = {name: system.people.keys.create(name, "tests")[1] for name in ("root", "ana")}
    with Served(create_app(system)) as base:
        out = {n: httpx.Client(base_url=base, headers={"Authorization": f"Bearer {k}"}, timeout=60) for n, k in keys.items()}
        yield out
        for c in out.values():
            c.close()


def upload(c: httpx.Client, name: str, data: bytes) -> httpx.Response:
    return c.post("/v1/files", files={"file": (name, data, "text/plain")}, data={"purpose": "assistants"})


def until_done(c: httpx.Client, vs: str, fid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        r = c.get(f"/v1/vector_stores/{vs}/files/{fid}")
        assert r.status_code == 200, r.text
        if r.json()["status"] != "in_progress":
            return r.json()
        assert time.monotonic() < deadline, "the file was not ingested in time"
        time.sleep(0.05)


def test_a_member_over_their_byte_quota_gets_403_in_words_and_nothing_is_written(system, clients):
    ana, root = clients["ana"], clients["root"]
    vs = ana.post("/v1/vector_stores", json={"name": "hr"}).json()["id"]
    first = upload(ana, "leave.txt", LEAVE).json()["id"]
    assert ana.post(f"/v1/vector_stores/{vs}/files", json={"file_id": first}).status_code == 200
    assert until_done(ana, vs, first)["status"] == "completed"
    # an upload past the quota: refused, no object kept
    objects = len(system.files.list())
    r = upload(ana, "more.txt", LEAVE + b" Again.")
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "quota_exceeded"
    assert "Your stores hold 77 bytes; the quota is 120 bytes, and adding 84 bytes would pass it" in error["message"]
    assert len(system.files.list()) == objects
    # a file uploaded while the quota allowed it, then attached once it no longer does: no record, no chunk
    assert (
        root.post("/v1/usage/limits", json={"scope": "user", "name": "ana", "measure": "bytes", "limit": 0}).json()["limit"]
        is None
    )
    second = upload(ana, "more.txt", LEAVE + b" Again.").json()["id"]
    assert (
        root.post("/v1/usage/limits", json={"scope": "user", "name": "ana", "measure": "bytes", "limit": 100}).json()[
            "limit"
        ]
        == 100
    )
    r = ana.post(f"/v1/vector_stores/{vs}/files", json={"file_id": second})
    assert r.status_code == 403 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert "the quota is 100 bytes" in r.json()["error"]["message"]
    r = ana.post(f"/v1/vector_stores/{vs}/file_batches", json={"file_ids": [second]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "quota_exceeded", r.text
    assert [f.file_id for f in system.catalog.files("hr")] == [first]
    assert Workbench(system).vector_store("hr").count() == 1
    usage = ana.get("/v1/usage").json()
    assert usage == {
        "object": "knowledge.usage",
        "scope": "user",
        "name": "ana",
        "bytes": 77,
        "files": 1,
        "chunks": 1,
        "limits": {"bytes": 100, "files": None, "chunks": None, "requests_per_minute": None},
        "exempt": False,
    }
    assert root.get("/v1/usage").json()["exempt"] is True  # an admin: held to none of them


@pytest.mark.parametrize("system", [{"api_requests_per_minute": 6}], indirect=True)
def test_a_key_over_its_rate_gets_429_with_retry_after_and_an_admins_key_is_exempt(system, clients):
    ana, root = clients["ana"], clients["root"]
    for _ in range(6):
        assert ana.get("/v1/vector_stores").status_code == 200
    r = ana.get("/v1/vector_stores")
    assert r.status_code == 429, r.text
    assert r.headers["Retry-After"] == "20"  # the clock stands 40 s into its minute
    assert r.headers["X-RateLimit-Limit"] == "6"
    assert r.json()["error"]["code"] == "rate_limit_exceeded"
    assert "7 requests this minute, over its limit of 6 a minute. Try again in 20 seconds" in r.json()["error"]["message"]
    for _ in range(10):
        assert root.get("/v1/vector_stores").status_code == 200  # admins exempt (quotas.admins_exempt)
    # the next minute, ana's key is let through again
    system.people.rates.clock = lambda: 1_000_030.0
    assert ana.get("/v1/vector_stores").status_code == 200
    # an admin's own limit for ana comes before the setting
    root.post("/v1/usage/limits", json={"scope": "user", "name": "ana", "measure": "requests_per_minute", "limit": 1})
    assert ana.get("/v1/vector_stores").status_code == 429


def test_usage_of_others_is_an_admins(system, clients):
    ana, root = clients["ana"], clients["root"]
    r = ana.get("/v1/usage", params={"username": "root"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"
    assert ana.get("/v1/usage", params={"by": "store"}).status_code == 403
    r = ana.post("/v1/usage/limits", json={"scope": "user", "name": "ana", "measure": "bytes", "limit": 10**9})
    assert r.status_code == 403
    vs = ana.post("/v1/vector_stores", json={"name": "notes"}).json()["id"]
    fid = upload(ana, "leave.txt", LEAVE).json()["id"]
    ana.post(f"/v1/vector_stores/{vs}/files", json={"file_id": fid})
    until_done(ana, vs, fid)
    stores = root.get("/v1/usage", params={"by": "store"}).json()["data"]
    assert [(s["name"], s["owner"], s["bytes"], s["files"]) for s in stores] == [("notes", "ana", 77, 1)]
    people = {
        u["name"]: (u["bytes"], u["limits"]["bytes"]) for u in root.get("/v1/usage", params={"by": "user"}).json()["data"]
    }
    assert people == {"ana": (77, 120), "root": (0, 120)}
    assert root.get("/v1/usage", params={"store": "notes"}).json()["files"] == 1
    r = root.get("/v1/usage", params={"by": "group"})
    assert r.status_code == 400 and "by is 'store' or 'user'" in r.json()["error"]["message"]


@pytest.mark.processes
@pytest.mark.slow
def test_two_serve_processes_on_one_catalog_count_a_keys_requests_together(tmp_path, settings, pg_database):
    """Two real ``python -m knowledge serve`` processes on one PostgreSQL catalog, a limit of 4 a minute:
    two requests through each pass, the fifth -- through either -- is 429 with ``Retry-After``."""
    root_dir = Path(__file__).resolve().parents[2]
    shared = pg_catalog_settings(settings)
    info = conninfo_to_dict(shared.catalog.url or "")
    query = urlencode({k: v for k, v in info.items() if k in ("host", "port", "password")})
    url = f"postgresql://{quote(str(info.get('user', 'postgres')))}@/{quote(str(info['dbname']))}?{query}"
    files = tmp_path / "shared-files"
    team = System(
        load_settings(
            data_dir=tmp_path / "admin",
            file_store={"dir": str(files)},
            catalog={"url": url},
            vector_store={"backend": "pgvector", "url": url},
        ),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    procs: list[subprocess.Popen] = []
    try:
        team.people.set_up_admin("root", PW)
        team.people.accounts.create("ana", PW)
        _, secret = team.people.keys.create("ana", "two servers")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
        env.update(
            PYTHONPATH=str(root_dir),
            KNOWLEDGE_CATALOG__URL=url,
            KNOWLEDGE_VECTOR_STORE__BACKEND="pgvector",
            KNOWLEDGE_VECTOR_STORE__URL=url,
            KNOWLEDGE_FILE_STORE__DIR=str(files),
            KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
            KNOWLEDGE_QUOTAS__API_REQUESTS_PER_MINUTE="4",
        )
        bases = []
        for name in ("p1", "p2"):
            port = free_port()
            log = (tmp_path / f"{name}.log").open("ab")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "knowledge", "serve", "--port", str(port)],
                    env={**env, "KNOWLEDGE_DATA_DIR": str(tmp_path / name)},
                    cwd=root_dir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            bases.append(f"http://127.0.0.1:{port}")
        for proc, base in zip(procs, bases, strict=True):
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx.get(base + "/v1/knowledge/me", timeout=5).status_code == 401:
                        break  # up, and refusing a request without a key (not counted: no key)
                except httpx.HTTPError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "a server did not start"
                time.sleep(0.1)
        # the count starts again on the minute: begin well inside one, so that five requests share it
        if time.time() % 60 > 45:
            time.sleep(61 - time.time() % 60)
        p1, p2 = (httpx.Client(base_url=b, headers={"Authorization": f"Bearer {secret}"}, timeout=60) for b in bases)
        answers = [c.get("/v1/knowledge/me") for c in (p1, p2, p1, p2)]
        assert [a.status_code for a in answers] == [200, 200, 200, 200]
        over = p2.get("/v1/knowledge/me")
        assert over.status_code == 429 and over.json()["error"]["code"] == "rate_limit_exceeded", over.text
        assert 1 <= int(over.headers["Retry-After"]) <= 60
        assert p1.get("/v1/knowledge/me").status_code == 429  # the other process counts the same
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        team.close()
