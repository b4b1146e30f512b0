"""The REST API with user accounts: every request needs its user's key (``kn-...``) and acts as that
user through ``Workbench.as_user``. Two members (ana, bo) and an admin (root), each with a key,
against a real uvicorn server: ana's private store is 404 to bo in every endpoint, read-only sharing
lets bo search but not add or delete (403), a revoked key stops at the next request, the shared
``KNOWLEDGE_API_KEY`` is refused once accounts exist, and every write is in the audit trail."""

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
from fastapi.testclient import TestClient
from psycopg.conninfo import conninfo_to_dict

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.server.http import check_bind
from knowledge.server.objects import vector_store_id
from knowledge.system import System
from tests.helpers.api import Served, free_port
from tests.helpers.pg import pg_catalog_settings

PW = "correct horse battery"
SHARED = "the-shared-key-of-before"
LEAVE = "The parental leave policy grants sixteen weeks of paid leave to every parent."


@pytest.fixture
def system(tmp_path):
    s = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256)
    )
    yield s
    s.close()


@pytest.fixture
def served(system):
    with Served(create_app(system, api_key=SHARED)) as base:
        yield base


def client(base: str, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base, headers=headers, timeout=60)


def upload(c: httpx.Client, name: str, text: str) -> str:
    r = c.post("/v1/files", files={"file": (name, text.encode(), "text/plain")}, data={"purpose": "assistants"})
    assert r.status_code == 200, r.text
    return r.json()["id"]


def until_done(c: httpx.Client, vs: str, fid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        r = c.get(f"/v1/vector_stores/{vs}/files/{fid}")
        assert r.status_code == 200, r.text
        if r.json()["status"] != "in_progress":
            return r.json()
        assert time.monotonic() < deadline, "the file was not ingested in time"
        time.sleep(0.05)


@pytest.fixture
def team(system, served):
    """root (admin), ana and bo, each with a key; ana's private store ``hr`` with one file, added
    through a file batch, through the API with her key."""
    system.people.set_up_admin("root", PW)
    for name in ("ana", "bo"):
        system.people.accounts.create(name, PW)
    keys = {name: system.people.keys.create(name, "tests")[1] for name in ("root", "ana", "bo")}
    ana = client(served, keys["ana"])
    vs = ana.post("/v1/vector_stores", json={"name": "hr"}).json()["id"]
    fid = upload(ana, "leave.txt", LEAVE)
    batch = ana.post(f"/v1/vector_stores/{vs}/file_batches", json={"file_ids": [fid]})
    assert batch.status_code == 200, batch.text
    assert until_done(ana, vs, fid)["status"] == "completed"
    return {
        "keys": keys,
        "vs": vs,
        "fid": fid,
        "batch": batch.json()["id"],
        "clients": {n: client(served, k) for n, k in keys.items()},
    }


def test_a_private_store_is_404_to_another_member_in_every_endpoint(team, system):
    vs, fid, batch = team["vs"], team["fid"], team["batch"]
    ana, bo, root = (team["clients"][n] for n in ("ana", "bo", "root"))
    assert vs == vector_store_id("hr") and system.people.sharing.owner("hr") == "ana"
    assert [s["name"] for s in bo.get("/v1/vector_stores").json()["data"]] == []
    own = upload(bo, "bo.txt", "Bo's own notes about the quarterly roadmap.")
    attempts = [
        ("GET", f"/v1/vector_stores/{vs}", None),
        ("POST", f"/v1/vector_stores/{vs}", {"metadata": {"x": "y"}}),
        ("DELETE", f"/v1/vector_stores/{vs}", None),
        ("POST", f"/v1/vector_stores/{vs}/search", {"query": "parental leave"}),
        ("GET", f"/v1/vector_stores/{vs}/files", None),
        ("POST", f"/v1/vector_stores/{vs}/files", {"file_id": own}),
        ("GET", f"/v1/vector_stores/{vs}/files/{fid}", None),
        ("POST", f"/v1/vector_stores/{vs}/files/{fid}", {"attributes": {"k": "v"}}),
        ("GET", f"/v1/vector_stores/{vs}/files/{fid}/content", None),
        ("DELETE", f"/v1/vector_stores/{vs}/files/{fid}", None),
        ("POST", f"/v1/vector_stores/{vs}/file_batches", {"file_ids": [own]}),
        ("GET", f"/v1/vector_stores/{vs}/file_batches/{batch}", None),
        ("POST", f"/v1/vector_stores/{vs}/file_batches/{batch}/cancel", None),
        ("GET", f"/v1/vector_stores/{vs}/file_batches/{batch}/files", None),
        ("POST", f"/v1/vector_stores/{vs}/web_pages", {"url": "http://127.0.0.1:9/"}),
        ("GET", f"/v1/files/{fid}", None),
        ("GET", f"/v1/files/{fid}/content", None),
        ("DELETE", f"/v1/files/{fid}", None),
    ]
    for method, path, body in attempts:
        r = bo.request(method, path, json=body)
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "not_found" and LEAVE not in r.text
    assert fid not in {f["id"] for f in bo.get("/v1/files").json()["data"]}
    assert {f["id"] for f in bo.get("/v1/files").json()["data"]} == {own}
    assert own not in {f["id"] for f in ana.get("/v1/files").json()["data"]}  # bo's upload is his
    taken = bo.post("/v1/vector_stores", json={"name": "hr"})
    assert taken.status_code == 400 and "not available" in taken.json()["error"]["message"]
    chat = bo.post(
        "/v1/chat/completions",
        json={
            "model": "offline",
            "metadata": {"stores": ["hr"]},
            "messages": [{"role": "user", "content": "parental leave?"}],
        },
    )
    assert chat.status_code == 404 and LEAVE not in chat.text
    attached = bo.post(
        "/v1/chat/completions",
        json={
            "model": "offline",
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "summarise"}, {"type": "file", "file": {"file_id": fid}}],
                }
            ],
        },
    )
    assert attached.status_code == 404 and LEAVE not in attached.text

    # nothing of ana's was touched; she and the admin see and search it
    assert until_done(ana, vs, fid)["status"] == "completed"
    assert ana.get(f"/v1/files/{fid}/content").content == LEAVE.encode()
    for c in (ana, root):
        assert [s["name"] for s in c.get("/v1/vector_stores").json()["data"]] == ["hr"]
        hits = c.post(f"/v1/vector_stores/{vs}/search", json={"query": "parental leave"}).json()["data"]
        assert hits and hits[0]["file_id"] == fid
    answer = ana.post(
        "/v1/chat/completions",
        json={
            "model": "offline",
            "metadata": {"stores": ["hr"]},
            "messages": [{"role": "user", "content": "parental leave?"}],
        },
    )
    assert answer.status_code == 200, answer.text
    assert root.get(f"/v1/files/{fid}").status_code == 200


def test_read_only_sharing_searches_but_adding_or_deleting_is_403(team, wb, system):
    vs, fid, batch = team["vs"], team["fid"], team["batch"]
    bo = team["clients"]["bo"]
    wb.as_user(system.people.accounts.actor("ana")).share_store("hr", "user", "bo", "read")
    assert [s["name"] for s in bo.get("/v1/vector_stores").json()["data"]] == ["hr"]
    hits = bo.post(f"/v1/vector_stores/{vs}/search", json={"query": "parental leave"})
    assert hits.status_code == 200 and hits.json()["data"][0]["file_id"] == fid
    assert bo.get(f"/v1/vector_stores/{vs}/files/{fid}/content").status_code == 200
    assert bo.get(f"/v1/files/{fid}/content").content == LEAVE.encode()
    own = upload(bo, "bo.txt", "Bo's own notes about the quarterly roadmap.")
    refused = [
        ("POST", f"/v1/vector_stores/{vs}", {"metadata": {"x": "y"}}),
        ("DELETE", f"/v1/vector_stores/{vs}", None),
        ("POST", f"/v1/vector_stores/{vs}/files", {"file_id": own}),
        ("POST", f"/v1/vector_stores/{vs}/files/{fid}", {"attributes": {"k": "v"}}),
        ("DELETE", f"/v1/vector_stores/{vs}/files/{fid}", None),
        ("POST", f"/v1/vector_stores/{vs}/file_batches", {"file_ids": [own]}),
        ("POST", f"/v1/vector_stores/{vs}/file_batches/{batch}/cancel", None),
        ("POST", f"/v1/vector_stores/{vs}/web_pages", {"url": "http://127.0.0.1:9/"}),
        ("DELETE", f"/v1/files/{fid}", None),
        ("POST", "/v1/vector_stores", {"name": "hr", "metadata": {"x": "y"}}),
    ]
    for method, path, body in refused:
        r = bo.request(method, path, json=body)
        assert r.status_code == 403, (method, path, r.text)
        assert r.json()["error"]["code"] == "permission_denied"
    assert [f["id"] for f in bo.get(f"/v1/vector_stores/{vs}/files").json()["data"]] == [fid]
    assert wb.file_record("hr", fid) is not None and wb.find_stored_file(fid) is not None
    # write access lets him add; only the owner deletes the store
    wb.as_user(system.people.accounts.actor("ana")).share_store("hr", "user", "bo", "write")
    assert bo.post(f"/v1/vector_stores/{vs}/files", json={"file_id": own}).status_code == 200
    assert until_done(bo, vs, own)["status"] == "completed"
    assert bo.delete(f"/v1/vector_stores/{vs}").status_code == 403
    assert wb.store_exists("hr") and wb.file_record("hr", own) is not None


def test_keys_no_key_revoked_key_and_the_shared_key(team, system, served):
    bo_key = team["keys"]["bo"]
    bo = team["clients"]["bo"]
    for c in (client(served, None), client(served, "kn-not-a-real-key"), client(served, "garbage")):
        r = c.get("/v1/vector_stores")
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        assert r.headers["www-authenticate"] == "Bearer"
    shared = client(served, SHARED).get("/v1/vector_stores")
    assert shared.status_code == 401 and "shared KNOWLEDGE_API_KEY is refused" in shared.json()["error"]["message"]
    me = bo.get("/v1/knowledge/me").json()
    assert me["username"] == "bo" and me["role"] == "member" and me["accounts"] is True
    assert team["clients"]["root"].get("/v1/knowledge/me").json()["role"] == "admin"
    key_id = next(k.id for k in system.people.keys.list("bo"))
    assert system.people.keys.revoke(key_id)
    r = bo.get("/v1/vector_stores")  # the very next request
    assert r.status_code == 401 and "revoked" in r.json()["error"]["message"]
    assert client(served, bo_key).post("/v1/files", files={"file": ("x.txt", b"x", "text/plain")}).status_code == 401
    assert team["clients"]["ana"].get("/v1/vector_stores").status_code == 200  # others go on


def test_without_accounts_the_shared_key_works_as_before_until_the_first_account(system, served):
    assert client(served, None).get("/v1/vector_stores").status_code == 401
    c = client(served, SHARED)
    assert c.post("/v1/vector_stores", json={"name": "notes"}).status_code == 200
    me = c.get("/v1/knowledge/me").json()
    assert me["username"] == "local" and me["role"] == "admin" and me["accounts"] is False
    system.people.set_up_admin("root", PW)
    assert c.get("/v1/vector_stores").status_code == 401  # the same server, the next request
    root = client(served, system.people.keys.create("root", "ci")[1])
    assert [s["name"] for s in root.get("/v1/vector_stores").json()["data"]] == ["notes"]
    check_bind("0.0.0.0", None, accounts=True)  # per-user keys protect a server on the network


def test_every_api_write_is_audited_and_a_member_reads_only_their_part(team, system):
    vs, fid = team["vs"], team["fid"]
    ana, bo, root = (team["clients"][n] for n in ("ana", "bo", "root"))
    assert ana.post(f"/v1/vector_stores/{vs}", json={"metadata": {"team": "hr"}}).status_code == 200
    assert ana.post(f"/v1/vector_stores/{vs}/files/{fid}", json={"attributes": {"year": 2026}}).status_code == 200
    assert ana.delete(f"/v1/vector_stores/{vs}/files/{fid}").status_code == 200
    assert ana.delete(f"/v1/files/{fid}").status_code == 200
    assert ana.delete(f"/v1/vector_stores/{vs}").status_code == 200
    done = {(e.actor, e.action) for e in system.people.audit.events(store="hr")}
    assert {
        ("ana", a) for a in ("store.create", "file.ingest", "store.update", "file.attributes", "file.delete", "store.delete")
    } <= done
    assert ("ana", "file.delete") in {
        (e.actor, e.action) for e in system.people.audit.events(action="file.delete") if e.target == fid and e.store is None
    }
    theirs = bo.get("/v1/knowledge/audit")  # a member: no event of ana's store (gone, and never theirs)
    assert theirs.status_code == 200
    assert all(e["store"] is None and "bo" in (e["actor"], e["target"]) for e in theirs.json()["data"])
    events = root.get("/v1/knowledge/audit", params={"actor": "ana", "action": "store."}).json()["data"]
    assert {e["action"] for e in events} == {"store.create", "store.update", "store.delete"}
    assert all(e["actor"] == "ana" and e["store"] == "hr" for e in events)
    assert root.get("/v1/knowledge/audit", params={"limit": 0}).status_code == 400


# -- two real `knowledge serve` processes on one PostgreSQL catalog -------------------------------------------------
@pytest.mark.processes
@pytest.mark.slow
def test_a_key_revoked_in_the_catalog_is_refused_by_another_serve_process(tmp_path, settings, pg_database):
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
    try:
        team.people.set_up_admin("root", PW)
        team.people.accounts.create("bo", PW)
        key, secret = team.people.keys.create("bo", "two servers")
        env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
        env.update(
            PYTHONPATH=str(root_dir),
            KNOWLEDGE_CATALOG__URL=url,
            KNOWLEDGE_VECTOR_STORE__BACKEND="pgvector",
            KNOWLEDGE_VECTOR_STORE__URL=url,
            KNOWLEDGE_FILE_STORE__DIR=str(files),
            KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
            KNOWLEDGE_API_KEY=SHARED,
        )
        procs, bases = [], []
        try:
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
                            break  # up, and refusing a request without a key
                    except httpx.HTTPError:
                        pass
                    assert proc.poll() is None and time.monotonic() < deadline, "a server did not start"
                    time.sleep(0.1)
            p1, p2 = (client(b, secret) for b in bases)
            assert p1.post("/v1/vector_stores", json={"name": "bo-notes"}).json()["name"] == "bo-notes"
            assert [s["name"] for s in p2.get("/v1/vector_stores").json()["data"]] == ["bo-notes"]
            assert p2.get("/v1/knowledge/me").json()["username"] == "bo"
            assert client(bases[1], SHARED).get("/v1/vector_stores").status_code == 401
            assert team.people.keys.revoke(key.id)  # in the catalog, by neither server
            for c in (p2, p1):  # each one's very next request
                r = c.get("/v1/vector_stores")
                assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGINT)
                    try:
                        proc.wait(60)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(10)
    finally:
        team.close()


def test_a_users_chat_service_is_kept_across_requests_and_acts_as_them(system):
    api = create_app(system).state.api
    system.people.set_up_admin("root", PW)
    system.people.accounts.create("ana", PW)
    first = api.for_actor(system.people.accounts.actor("ana"))
    assert first.wb.actor.username == "ana" and api.wb.actor.local  # the app's own API is untouched
    again = api.for_actor(system.people.accounts.actor("ana"))  # the next request: the actor read anew
    assert first.chat is again.chat and first.chat.wb.actor.username == "ana"  # turns of a session queue
    assert api.for_actor(system.people.accounts.actor("root")).chat is not first.chat


def test_account_routes_answer_a_missing_account_group_or_key_404_naming_it(system):
    """OpenAI's error shape: a missing account, group or key is 404 ``not_found`` with ``param``; a
    wrong role or heir is 400 naming the field; another's key, to a member, is a missing one."""
    system.people.set_up_admin("root", PW)
    system.people.accounts.create("ana", PW)
    root_key, root_secret = system.people.keys.create("root", "tests")
    _, ana_secret = system.people.keys.create("ana", "tests")
    app = create_app(system)
    with TestClient(app, headers={"Authorization": f"Bearer {root_secret}"}) as c:
        assert c.post("/v1/knowledge/groups", json={"name": "team"}).status_code == 200
        for method, path, body, param in (
            ("GET", "/users/nobody", None, "username"),
            ("POST", "/users/nobody", {"display_name": "N"}, "username"),
            ("DELETE", "/users/nobody", None, "username"),
            ("GET", "/keys?username=nobody", None, "username"),
            ("POST", "/keys", {"name": "x", "username": "nobody"}, "username"),
            ("DELETE", "/keys/nokey", None, "key_id"),
            ("DELETE", "/groups/nogroup", None, "group"),
            ("POST", "/groups/nogroup/members", {"username": "ana"}, "group"),
            ("POST", "/groups/team/members", {"username": "nobody"}, "username"),
            ("DELETE", "/groups/team/members/nobody", None, "username"),
        ):
            r = c.request(method, "/v1/knowledge" + path, json=body)
            assert r.status_code == 404, (method, path, r.text)
            error = r.json()["error"]
            assert (error["code"], error["param"]) == ("not_found", param), (method, path, error)
            assert "nobody" in error["message"] or "nokey" in error["message"] or "nogroup" in error["message"]
        for method, path, body, param in (
            ("POST", "/users", {"username": "cy", "password": PW, "role": "boss"}, "role"),
            ("POST", "/users/ana", {"role": "boss"}, "role"),
            ("POST", "/invites", {"role": "boss"}, "role"),
            ("DELETE", "/users/ana?heir=nobody", None, "heir"),
        ):
            r = c.request(method, "/v1/knowledge" + path, json=body)
            assert r.status_code == 400 and r.json()["error"]["param"] == param, (method, path, r.text)
    with TestClient(app, headers={"Authorization": f"Bearer {ana_secret}"}) as c:
        r = c.delete(f"/v1/knowledge/keys/{root_key.id}")  # root's key, to a member: not confirmed
        assert r.status_code == 404 and r.json()["error"]["param"] == "key_id"
    assert system.people.accounts.get("cy") is None and system.people.accounts.require("ana").role == "member"
    assert system.people.keys.get(root_key.id).active


def test_one_account_is_read_by_itself_or_an_admin_and_an_invite_needs_no_body(system):
    """GET /v1/knowledge/users/{username}: one's own account, or an admin's reading anyone's (a member
    reading another's is refused); POST /v1/knowledge/invites with no body makes a member's invitation
    (``role`` is optional, so the body is too)."""
    system.people.set_up_admin("root", PW)
    system.people.accounts.create("ana", PW, display_name="Ana")
    system.people.accounts.create("bo", PW)
    _, root_secret = system.people.keys.create("root", "tests")
    _, ana_secret = system.people.keys.create("ana", "tests")
    app = create_app(system)
    with TestClient(app, headers={"Authorization": f"Bearer {root_secret}"}) as c:
        r = c.get("/v1/knowledge/users/ana")
        assert r.status_code == 200 and (r.json()["username"], r.json()["display_name"]) == ("ana", "Ana")
        r = c.post("/v1/knowledge/invites")
        assert r.status_code == 200 and r.json()["role"] == "member" and r.json()["token"]
    with TestClient(app, headers={"Authorization": f"Bearer {ana_secret}"}) as c:
        assert c.get("/v1/knowledge/users/ana").json()["username"] == "ana"
        assert c.get("/v1/knowledge/users/bo").status_code == 403


def test_a_providers_membership_is_refused_by_hand_over_rest_naming_the_provider(system):
    system.people.set_up_admin("root", PW)
    system.people.accounts.create("ana", PW)
    system.people.accounts.set_groups_from("ana", "oidc:https://idp.example.org", ["hr"])
    _, root_secret = system.people.keys.create("root", "tests")
    with TestClient(create_app(system), headers={"Authorization": f"Bearer {root_secret}"}) as c:
        for r in (
            c.delete("/v1/knowledge/groups/hr/members/ana"),
            c.post("/v1/knowledge/groups/hr/members", json={"username": "ana"}),
        ):
            assert r.status_code == 400, r.text
            error = r.json()["error"]
            assert error["param"] == "group" and "from the sign-on provider https://idp.example.org" in error["message"]
        system.people.accounts.create("bo", PW)
        system.people.accounts.add_to_group("hr", "bo")  # by hand
        [hr] = c.get("/v1/knowledge/groups").json()["data"]
        assert (hr["members"], hr["sources"]) == (["ana", "bo"], {"ana": "idp.example.org"})
    assert system.people.accounts.groups_of("ana") == ["hr"]
