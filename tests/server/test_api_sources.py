"""``/v1/sources`` and ``/v1/source-kinds`` (knowledge/server/routes/sources.py) with user accounts,
in-process over the test process's ``dict`` source kind: the owner adds, a writer runs (202, then
the run with each file's outcome), a reader sees but may not run (403), a member without access gets
404 everywhere; secrets are write-only (no response carries one, nor the audit trail); a bad
setting is 400 naming it, a source that does not answer 502 in words; the OpenAPI document lists
the routes."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from knowledge.server.app import create_app
from tests.helpers.sources import PW, DictSource, counting_system

SECRET = "api-s3cr3t-write-only"


class Recorded:
    """A TestClient per user whose every response body is kept (to grep for the secret)."""

    def __init__(self, app: Any, keys: dict[str, str]) -> None:
        self.clients = {u: TestClient(app, headers={"Authorization": f"Bearer {k}"}) for u, k in keys.items()}
        self.bodies: list[str] = []

    def __call__(self, user: str, method: str, path: str, **kw: Any):
        r = self.clients[user].request(method, path, **kw)
        self.bodies.append(r.text)
        return r


@pytest.fixture
def api(tmp_path, request):
    name = request.node.name
    DictSource.FILES[name] = {
        "public/handbook.md": (b"The handbook says lunch is at noon.", None),
        "private/pay.md": (b"Pay bands are confidential to ana.", ("user:ana",)),
    }
    DictSource.DOWN.discard(name)
    system, _ = counting_system(tmp_path)
    people = system.people
    people.set_up_admin("root", PW)
    for who in ("ana", "bob", "wendy"):
        people.accounts.create(who, PW)
    keys = {who: people.keys.create(who, "tests")[1] for who in ("root", "ana", "bob", "wendy")}
    root = system.people.accounts.actor("root")
    from knowledge.workbench import Workbench

    wb = Workbench(system).as_user(root)
    wb.create_store("kb")
    wb.share_store("kb", "user", "bob", "read")
    wb.share_store("kb", "user", "wendy", "write")
    call = Recorded(create_app(system), keys)
    yield call, name, system
    assert SECRET not in "\n".join(call.bodies)
    with system.catalog.cursor() as cur:
        assert SECRET not in repr(cur.execute("SELECT * FROM audit_events").fetchall())
    system.close()
    DictSource.FILES.pop(name, None)
    DictSource.DOWN.discard(name)


def _finished(call: Recorded, user: str, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        r = call(user, "GET", f"/v1/sources/team/runs/{run_id}")
        assert r.status_code == 200, r.text
        if r.json()["status"] not in ("queued", "running"):
            return r.json()
        assert time.monotonic() < deadline, "the run did not finish in time"
        time.sleep(0.05)


def _add(call: Recorded, name: str, **extra: Any):
    body = {"name": "team", "kind": "dict", "store": "kb", "config": {"name": name, "password": SECRET}, **extra}
    return call("root", "POST", "/v1/sources", json=body)


def test_owners_add_writers_run_readers_look_and_others_find_nothing(api):
    call, name, _ = api
    kinds = call("ana", "GET", "/v1/source-kinds").json()["data"]
    [kind] = [k for k in kinds if k["kind"] == "dict"]
    assert [f["name"] for f in kind["fields"] if f["secret"]] == ["password"]

    r = call("wendy", "POST", "/v1/sources", json={"name": "team", "kind": "dict", "store": "kb", "config": {"name": name}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"  # writing is not owning
    r = _add(call, name, every_minutes=60, include=["**/*.md"])
    assert r.status_code == 200, r.text
    made = r.json()
    assert made["object"] == "knowledge.source" and made["secrets_set"] == ["password"]
    assert made["config"] == {"name": name} and made["location"] == f"dict://{name}"
    assert made["every_minutes"] == 60 and made["include"] == ["**/*.md"] and made["last_run"] is None

    assert [s["name"] for s in call("bob", "GET", "/v1/sources").json()["data"]] == ["team"]
    assert call("ana", "GET", "/v1/sources").json()["data"] == []
    for method, path in (
        ("GET", "/v1/sources/team"),
        ("PATCH", "/v1/sources/team"),
        ("DELETE", "/v1/sources/team"),
        ("POST", "/v1/sources/team/runs"),
        ("GET", "/v1/sources/team/runs"),
        ("POST", "/v1/sources/team/pause"),
        ("POST", "/v1/sources/team/check"),
        ("GET", "/v1/sources/team/plan"),
    ):
        r = call("ana", method, path, **({"json": {"every_minutes": 5}} if method == "PATCH" else {}))
        assert r.status_code == 404, (method, path, r.text)
        assert r.json()["error"]["code"] == "not_found" and "There is no source 'team'" in r.json()["error"]["message"]
    r = call("bob", "POST", "/v1/sources/team/runs")
    assert r.status_code == 403 and r.json()["error"]["code"] == "permission_denied"  # a reader can't run
    assert call("bob", "POST", "/v1/sources/team/pause").status_code == 403

    plan = call("wendy", "GET", "/v1/sources/team/plan").json()
    assert plan["counts"]["added"] == 2 and plan["summary"] == "2 added"
    check = call("wendy", "POST", "/v1/sources/team/check").json()
    assert check["reachable"] is True and check["message"].startswith("reached")
    r = call("wendy", "POST", "/v1/sources/team/runs")
    assert r.status_code == 202, r.text
    queued = r.json()
    assert queued["object"] == "knowledge.source.run" and queued["status"] in ("queued", "running")
    done = _finished(call, "root", queued["id"])
    assert done["status"] == "done" and done["counts"]["added"] == 2
    assert sorted(i["path"] for i in done["items"]) == ["private/pay.md", "public/handbook.md"]
    # bob and wendy may use the store, not read private/pay.md: the run is told without it
    for who in ("bob", "wendy"):
        seen = call(who, "GET", f"/v1/sources/team/runs/{queued['id']}").json()
        assert [i["path"] for i in seen["items"]] == ["public/handbook.md"] and seen["counts"] == {"added": 1}
    assert call("bob", "GET", "/v1/sources/team").json()["last_run"]["id"] == queued["id"]
    assert [x["id"] for x in call("bob", "GET", "/v1/sources/team/runs").json()["data"]] == [queued["id"]]
    assert call("ana", "GET", f"/v1/sources/team/runs/{queued['id']}").status_code == 404
    r = call("root", "GET", "/v1/sources/team/runs/nope")
    assert r.status_code == 404 and r.json()["error"]["param"] == "run_id"

    paused = call("wendy", "POST", "/v1/sources/team/pause").json()
    assert paused["paused"] is True and paused["next_run_at"] is None
    assert call("wendy", "POST", "/v1/sources/team/resume").json()["paused"] is False
    assert call("wendy", "PATCH", "/v1/sources/team", json={"every_minutes": 5}).status_code == 403
    r = call("root", "PATCH", "/v1/sources/team", json={"every_minutes": None, "exclude": ["*.tmp"]})
    assert r.status_code == 200, r.text
    assert r.json()["every_minutes"] is None and r.json()["exclude"] == ["*.tmp"] and r.json()["include"] == ["**/*.md"]
    assert r.json()["secrets_set"] == ["password"]  # a secret left out is kept

    r = call("root", "DELETE", "/v1/sources/team", params={"keep_files": "true"})
    assert r.status_code == 200 and r.json()["deleted"] is True and r.json()["files_removed"] == 0
    assert call("root", "GET", "/v1/sources/team").status_code == 404


def test_a_secret_is_write_only_and_changes_without_being_shown(api):
    call, name, system = api
    assert _add(call, name).status_code == 200
    r = call("root", "PATCH", "/v1/sources/team", json={"config": {"password": SECRET + "-new"}})
    assert r.status_code == 200 and r.json()["secrets_set"] == ["password"]
    assert system.sources.secrets_of(system.sources.get("team")) == {"password": SECRET + "-new"}
    events = call("root", "GET", "/v1/knowledge/audit", params={"action": "source."}).json()["data"]
    assert [e["action"] for e in events] == ["source.update", "source.add"]
    assert events[0]["detail"]["secrets_changed"] == ["password"]


def test_bad_settings_are_400_and_a_source_that_does_not_answer_is_502_in_words(api):
    call, name, _ = api
    r = call("root", "POST", "/v1/sources", json={"name": "team", "kind": "dict", "store": "kb", "config": {"nam": "x"}})
    assert r.status_code == 400 and "has no setting 'nam'" in r.json()["error"]["message"]
    r = call("root", "POST", "/v1/sources", json={"name": "team", "kind": "nope", "store": "kb"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "kind" and "'nope'" in r.json()["error"]["message"]
    r = call("root", "POST", "/v1/sources", json={"name": "team", "kind": "dict", "store": "kb", "colour": "red"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "colour"
    assert _add(call, name).status_code == 200
    r = _add(call, name)
    assert r.status_code == 400 and r.json()["error"]["param"] == "name"  # the name is taken
    r = call("root", "PATCH", "/v1/sources/team", json={})
    assert r.status_code == 400 and "Nothing to change" in r.json()["error"]["message"]
    DictSource.DOWN.add(name)
    r = call("root", "GET", "/v1/sources/team/plan")
    assert r.status_code == 502 and r.json()["error"]["code"] == "source_unavailable"
    assert "did not answer" in r.json()["error"]["message"]
    check = call("root", "POST", "/v1/sources/team/check").json()
    assert check["reachable"] is False and "did not answer" in check["message"]
    run = call("root", "POST", "/v1/sources/team/runs").json()
    failed = _finished(call, "root", run["id"])
    assert failed["status"] == "failed" and "did not answer" in failed["reason"]


def test_the_openapi_document_lists_the_routes(api):
    call, _, _ = api
    spec = call("root", "GET", "/openapi.json").json()
    paths = spec["paths"]
    assert set(paths["/v1/sources"]) == {"get", "post"}
    assert set(paths["/v1/sources/{name}"]) == {"get", "patch", "delete"}
    assert set(paths["/v1/sources/{name}/runs"]) == {"get", "post"}
    for path in (
        "/v1/sources/{name}/runs/{run_id}",
        "/v1/sources/{name}/pause",
        "/v1/sources/{name}/resume",
        "/v1/source-kinds",
    ):
        assert path in paths
    assert "202" in paths["/v1/sources/{name}/runs"]["post"]["responses"]
    fields = spec["components"]["schemas"]["NewSource"]["properties"]
    assert {"name", "kind", "store", "config", "include", "exclude", "every_minutes", "readers"} <= set(fields)
