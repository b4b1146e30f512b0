"""SCIM 2.0 provisioning at ``/scim/v2`` (RFC 7643/7644; :mod:`knowledge.server.scim`): off until an
admin makes a provisioning token, and then only with that token; users and groups created,
filtered, paged, patched and deleted as a directory does; deactivation refuses the user's API key on
the REST API, ends their app session and refuses their sign-in at once; reactivation lets them sign
in again (keys stay revoked); deletion hands their stores to an admin; every change is audited
as ``scim``. And the independent compliance checker ``scim2-tester`` passes every check it runs
against a real uvicorn server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import AuthenticationFailed, InvalidArgument, PermissionDenied
from knowledge.people import Actor
from knowledge.server.app import create_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served

PW = "correct horse battery"
USER = "urn:ietf:params:scim:schemas:core:2.0:User"
GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"


def make_system(settings: Any) -> System:
    return System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))


def scim(base: str | None, token: str | None, app: Any = None) -> Any:
    headers = {"Content-Type": "application/scim+json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if app is not None:
        return TestClient(app, headers=headers)
    return httpx.Client(base_url=base or "", headers=headers, timeout=60)


def new_user(c: Any, user_name: str, **extra: Any) -> dict[str, Any]:
    r = c.post("/scim/v2/Users", json={"schemas": [USER], "userName": user_name, **extra})
    assert r.status_code == 201, r.text
    assert r.headers["content-type"].startswith("application/scim+json")
    return r.json()  # type: ignore[no-any-return]


def patch(c: Any, path: str, *ops: dict[str, Any]) -> Any:
    return c.patch(path, json={"schemas": [PATCH], "Operations": list(ops)})


# -- one real server per module -------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory):
    system = make_system(load_settings(data_dir=tmp_path_factory.mktemp("scim") / "data"))
    system.people.set_up_admin("root", PW)
    token = Workbench(system).as_user(system.people.accounts.actor("root")).accounts.scim_token()
    with Served(create_app(system)) as base:
        yield system, base, token
    system.close()


def test_scim_is_off_until_an_admin_makes_a_token_and_answers_only_that_token(settings):
    system = make_system(settings)
    try:
        system.people.set_up_admin("root", PW)
        system.people.accounts.create("ana", PW)
        app = create_app(system)
        root = Workbench(system).as_user(system.people.accounts.actor("root"))
        ana = Workbench(system).as_user(system.people.accounts.actor("ana"))
        r = scim(None, None, app).get("/scim/v2/Users")
        assert r.status_code == 404 and r.json()["schemas"] == [ERROR]  # off by default
        assert r.headers["content-type"].startswith("application/scim+json")
        with pytest.raises(PermissionDenied):
            ana.accounts.scim_token()  # an admin's
        token = root.accounts.scim_token()
        assert token.startswith("kscim-")
        with system.catalog.cursor() as cur:  # only its digest is kept
            assert token not in str(cur.execute("SELECT * FROM scim_tokens").fetchall())
        assert [e.action for e in system.people.audit.events(action="scim.")] == ["scim.token"]
        key = system.people.keys.create("root", "rest")[1]
        for wrong in (None, "kscim-not-the-token", key):  # no token, another token, an admin's API key
            r = scim(None, wrong, app).get("/scim/v2/Users")
            assert r.status_code == 401, wrong
            assert r.json()["status"] == "401" and r.headers["www-authenticate"].startswith("Bearer")
        assert scim(None, token, app).get("/scim/v2/Users").status_code == 200
        # the SCIM token is no API key: the REST API refuses it
        assert scim(None, token, app).get("/v1/vector_stores").status_code == 401
        assert root.accounts.revoke_scim_tokens() == 1
        assert scim(None, token, app).get("/scim/v2/Users").status_code == 404
    finally:
        system.close()


def test_no_token_before_the_first_admin(settings):
    """Accounts a directory provisions are members: with no admin yet nobody could manage them."""
    system = make_system(settings)
    try:
        with pytest.raises(InvalidArgument, match="first admin"):
            Workbench(system).accounts.scim_token()  # the local admin, no account yet
        assert not system.people.provisioning.enabled()
    finally:
        system.close()


def test_users_created_filtered_and_paged(served):
    system, base, token = served
    c = scim(base, token)
    made = [
        new_user(c, "Filter.Ana", displayName="Ana Lima", externalId="ext-ana", emails=[{"value": "ana@hr.example"}]),
        new_user(c, "filter.bo", displayName="Bo Berg", externalId="ext-bo", emails=[{"value": "bo@it.example"}]),
        new_user(c, "filter.cy", active=False),
    ]
    assert made[0]["userName"] == "Filter.Ana" and system.people.accounts.get("filter.ana") is not None
    assert system.people.accounts.get("filter.ana").has_password is False  # signs in by SSO or LDAP
    again = c.get(f"/scim/v2/Users/{made[0]['id']}").json()
    assert again["id"] == made[0]["id"] and again["externalId"] == "ext-ana"

    def names(flt: str, **params: Any) -> list[str]:
        r = c.get("/scim/v2/Users", params={"filter": flt, **params})
        assert r.status_code == 200, r.text
        return sorted(u["userName"] for u in r.json().get("Resources", []))

    assert names('userName eq "filter.ana"') == ["Filter.Ana"]  # userName is case-insensitive
    assert names('externalId eq "ext-bo"') == ["filter.bo"]
    assert names('displayName co "berg"') == ["filter.bo"]
    assert names('emails.value sw "ana@"') == ["Filter.Ana"]
    assert names('userName sw "filter." and active eq false') == ["filter.cy"]
    assert names('userName sw "filter." and displayName pr') == ["Filter.Ana", "filter.bo"]
    assert names('externalId eq "ext-ana" or emails.value co "it.example"') == ["Filter.Ana", "filter.bo"]
    page = c.get("/scim/v2/Users", params={"filter": 'userName sw "filter."', "startIndex": 2, "count": 1}).json()
    assert (page["totalResults"], page["startIndex"], page["itemsPerPage"]) == (3, 2, 1)
    assert page["Resources"][0]["userName"] == "filter.bo"
    r = c.get("/scim/v2/Users", params={"filter": 'userName eq "unclosed'})
    assert r.status_code == 400 and r.json()["scimType"] == "invalidFilter"
    r = c.post("/scim/v2/Users", json={"schemas": [USER], "userName": "FILTER.bo"})
    assert r.status_code == 409 and r.json()["scimType"] == "uniqueness"
    events = system.people.audit.events(actor="scim", action="user.create")
    assert {e.target for e in events} >= {"filter.ana", "filter.bo", "filter.cy"}


def test_patch_with_and_without_path_and_put(served):
    system, base, token = served
    c = scim(base, token)
    u = new_user(c, "patch.dee", displayName="Dee")
    path = f"/scim/v2/Users/{u['id']}"
    r = patch(c, path, {"op": "replace", "path": "displayName", "value": "Dee Dot"})
    assert r.status_code == 200 and r.json()["displayName"] == "Dee Dot"
    assert system.people.accounts.get("patch.dee").display_name == "Dee Dot"
    r = patch(c, path, {"op": "add", "value": {"emails": [{"value": "dee@example.org"}], "externalId": "x-dee"}})
    assert r.json()["emails"] == [{"value": "dee@example.org"}] and r.json()["externalId"] == "x-dee"
    assert system.people.accounts.get("patch.dee").email == "dee@example.org"
    r = patch(c, path, {"op": "remove", "path": "emails"})
    assert "emails" not in r.json() and system.people.accounts.get("patch.dee").email is None
    r = c.put(path, json={"schemas": [USER], "userName": "patch.dee", "displayName": "Dee Put", "active": True})
    assert r.status_code == 200 and r.json()["displayName"] == "Dee Put" and "externalId" not in r.json()
    assert c.get("/scim/v2/Users/nope").status_code == 404


def test_deactivate_reactivate_delete(settings, catalog_settings):
    system = make_system(catalog_settings)
    try:
        system.people.set_up_admin("root", PW)
        token = system.people.provisioning.create_token("root")
        app = create_app(system)
        c = scim(None, token, app)
        u = new_user(c, "eve", displayName="Eve")
        system.people.accounts.set_password("eve", PW)  # as if the directory's password: to sign in here
        key = system.people.keys.create("eve", "laptop")[1]
        _, session = system.people.sign_in("eve", PW)
        rest = TestClient(app, headers={"Authorization": f"Bearer {key}"})
        assert rest.get("/v1/vector_stores").status_code == 200
        r = patch(c, f"/scim/v2/Users/{u['id']}", {"op": "replace", "value": {"active": False}})
        assert r.status_code == 200 and r.json()["active"] is False
        assert rest.get("/v1/vector_stores").status_code == 401  # the next API request is refused
        with pytest.raises(AuthenticationFailed):
            system.people.session_actor(session)  # the app session ended
        with pytest.raises(AuthenticationFailed, match="deactivated"):
            system.people.sign_in("eve", PW)
        r = patch(c, f"/scim/v2/Users/{u['id']}", {"op": "replace", "path": "active", "value": True})
        assert r.json()["active"] is True
        actor, _ = system.people.sign_in("eve", PW)  # signs in again
        assert actor.username == "eve"
        assert rest.get("/v1/vector_stores").status_code == 401  # the key stays revoked
        system.people.sharing.set_owner("eve-notes", "eve")
        assert c.delete(f"/scim/v2/Users/{u['id']}").status_code == 204
        assert system.people.accounts.get("eve") is None
        assert system.people.sharing.owner("eve-notes") == "root"  # the private store passed to an admin
        assert c.get(f"/scim/v2/Users/{u['id']}").status_code == 404
        acts = [e.action for e in reversed(system.people.audit.events(actor="scim", limit=50))]
        assert acts == ["user.create", "user.deactivate", "user.activate", "user.delete"]
        assert system.people.audit.events(actor="scim", action="user.delete")[0].detail["stores"] == ["eve-notes"]
    finally:
        system.close()


def test_the_last_admin_cannot_be_deactivated(settings):
    system = make_system(settings)
    try:
        system.people.set_up_admin("root", PW)
        c = scim(None, system.people.provisioning.create_token("root"), create_app(system))
        uid = c.get("/scim/v2/Users", params={"filter": 'userName eq "root"'}).json()["Resources"][0]["id"]
        r = patch(c, f"/scim/v2/Users/{uid}", {"op": "replace", "path": "active", "value": False})
        assert r.status_code == 400 and "last active admin" in r.json()["detail"]
        assert system.people.accounts.actor("root").username == "root"
    finally:
        system.close()


def test_groups_and_their_members(served):
    system, base, token = served
    c = scim(base, token)
    a, b = new_user(c, "grp.ann"), new_user(c, "grp.ben")
    r = c.post("/scim/v2/Groups", json={"schemas": [GROUP], "displayName": "HR", "members": [{"value": a["id"]}]})
    assert r.status_code == 201, r.text
    g = r.json()
    assert system.people.accounts.groups()["HR"] == ["grp.ann"]
    path = f"/scim/v2/Groups/{g['id']}"
    r = patch(c, path, {"op": "add", "path": "members", "value": [{"value": b["id"]}]})
    assert sorted(m["value"] for m in r.json()["members"]) == sorted([a["id"], b["id"]])
    assert system.people.accounts.groups_of("grp.ben") == ["HR"]
    assert [x["display"] for x in c.get(f"/scim/v2/Users/{b['id']}").json()["groups"]] == ["HR"]
    r = patch(c, path, {"op": "remove", "path": f'members[value eq "{a["id"]}"]'})
    assert [m["value"] for m in r.json()["members"]] == [b["id"]]
    assert system.people.accounts.groups()["HR"] == ["grp.ben"]
    r = patch(c, path, {"op": "add", "path": "members", "value": [{"value": "no-such-user"}]})
    assert r.status_code == 400
    found = c.get("/scim/v2/Groups", params={"filter": 'displayName eq "hr"'}).json()
    assert [x["id"] for x in found["Resources"]] == [g["id"]]
    r = c.put(path, json={"schemas": [GROUP], "displayName": "People Ops", "members": []})
    assert r.status_code == 200 and "members" not in r.json()
    assert "People Ops" in system.people.accounts.groups() and "HR" not in system.people.accounts.groups()
    assert c.delete(path).status_code == 204
    assert "People Ops" not in system.people.accounts.groups()
    changes = [(e.action, e.target, e.detail.get("added")) for e in system.people.audit.events(actor="scim")]
    assert ("group.member", "grp.ben", True) in changes and ("group.member", "grp.ann", False) in changes
    assert {"group.create", "group.update", "group.delete"} <= {a for a, _, _ in changes}


def test_memberships_scim_keeps_are_marked_scim_and_hand_made_ones_stay(served):
    """A member SCIM adds is kept by SCIM (source ``scim``): a hand edit is refused in words, the audit
    says the source; a member added by hand stays when SCIM replaces the members (and is not SCIM's)."""
    system, base, token = served
    accounts = system.people.accounts
    c = scim(base, token)
    a = new_user(c, "src.ann")
    new_user(c, "src.ben")
    r = c.post("/scim/v2/Groups", json={"schemas": [GROUP], "displayName": "Payroll", "members": [{"value": a["id"]}]})
    assert r.status_code == 201, r.text
    assert accounts.source_of("Payroll", "src.ann") == "scim"
    with pytest.raises(InvalidArgument, match="from SCIM provisioning"):
        accounts.remove_from_group("Payroll", "src.ann")
    accounts.add_to_group("Payroll", "src.ben")  # by hand
    r = c.put(f"/scim/v2/Groups/{r.json()['id']}", json={"schemas": [GROUP], "displayName": "Payroll", "members": []})
    assert r.status_code == 200, r.text
    assert accounts.groups()["Payroll"] == ["src.ben"] and accounts.source_of("Payroll", "src.ben") is None
    added = [e for e in system.people.audit.events(actor="scim") if e.target == "src.ann" and e.action == "group.member"]
    assert {(e.detail["added"], e.detail["source"]) for e in added} == {(True, "scim"), (False, "scim")}


def test_scim2_tester_passes_every_check(served):
    """The independent checker (scim2-tester, driving scim2-client over HTTP) against the real server:
    discovery, every CRUD check, PATCH add/remove/replace of every published attribute, attribute
    selection on GET, list and POST /.search, 404 and 405 answers. Every check it runs must succeed."""
    _, base, token = served
    client = httpx2.Client(base_url=base + "/scim/v2", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    with client:
        results = check_server(SyncSCIMClient(client))
    assert len(results) > 40
    failed = [(r.status.name, r.resource_type, r.title, r.reason) for r in results if r.status != Status.SUCCESS]
    assert failed == []
    titles = {r.title for r in results}
    assert {"object_creation", "object_replacement", "object_deletion", "check_remove_attribute"} <= titles


def test_the_token_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "scim", "token"]) == 2  # no admin yet (a refused argument)
    assert "first admin" in capsys.readouterr().err
    first = make_system(load_settings(data_dir=tmp_path / "data"))
    first.people.set_up_admin("root", PW)
    first.close()
    assert main(["--data-dir", data, "scim", "token", "--json"]) == 0
    token = json.loads(capsys.readouterr().out)["token"]
    system = make_system(load_settings(data_dir=tmp_path / "data"))
    try:
        assert system.people.provisioning.token_valid(token)
        assert main(["--data-dir", data, "scim", "token", "--revoke"]) == 0
        assert "Revoked 1" in capsys.readouterr().out
        assert not system.people.provisioning.enabled()
        assert [e.action for e in reversed(system.people.audit.events(action="scim."))] == ["scim.token", "scim.revoke"]
    finally:
        system.close()


def test_an_actor_of_a_deactivated_account_is_refused(settings):
    system = make_system(settings)
    try:
        system.people.set_up_admin("root", PW)
        system.people.accounts.create("fay", PW)
        system.people.accounts.set_active("fay", False)
        with pytest.raises(AuthenticationFailed):
            system.people.accounts.actor("fay")
        assert system.people.accounts.set_active("fay", True).active
        assert system.people.accounts.actor("fay") == Actor("fay", "member", frozenset(), "fay")
    finally:
        system.close()


def test_a_deactivated_admin_inherits_last_and_users_list_says_deactivated(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    system = make_system(load_settings(data_dir=tmp_path / "data"))
    try:
        system.people.set_up_admin("root", PW)
        system.people.accounts.create("adm", PW, role="admin")  # sorts before root
        system.people.accounts.create("gus", PW)
        system.people.accounts.set_active("adm", False)
        system.people.sharing.set_owner("gus-notes", "gus")
        assert system.people.delete_user("gus", "scim") == ["gus-notes"]
        assert system.people.sharing.owner("gus-notes") == "root"  # not the deactivated adm
    finally:
        system.close()
    assert main(["--data-dir", str(tmp_path / "data"), "users", "list", "--json"]) == 0
    users = {u["username"]: u for u in json.loads(capsys.readouterr().out)}
    assert users["adm"]["active"] is False and users["root"]["active"] is True
    assert main(["--data-dir", str(tmp_path / "data"), "users", "list"]) == 0
    assert "deactivated" in capsys.readouterr().out
