"""Account management is checked and audited once (:class:`knowledge.people.desk.AccountDesk`), so the
CLI, the People and My account pages and the REST API leave the SAME audit events for the same
account actions: each surface runs one script on a fresh data folder with the same team (admin
root, members ana and bo, ana's API key), and the events it left are compared, action by action
(action, actor, target, detail, store; the values that differ by nature -- a key's id, an
invitation's expiry -- are replaced by placeholders after checking they are there). Plus the
desk's own rules: a member is refused ``account.manage`` in words, and may change their own
password, display name and keys."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.errors import AuthenticationFailed, InvalidArgument, PermissionDenied
from knowledge.people import AuditEvent
from knowledge.server.app import create_app
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import fresh_caches, open_app, use_fake_model

PW = "a long enough password"
NEW_PW = "another long password"

#: The script every surface runs, in this order (as root, an admin), and the events it must leave.
SCRIPT = [
    ("user.create", "cy", {"role": "member"}),  # add cy, a member
    ("user.update", "cy", {"role": "admin"}),  # make cy an admin
    ("user.password", "ana", {"reset": True}),  # reset ana's password
    ("user.invite", None, {"role": "member", "expires": "<when>"}),  # an invitation for a member
    ("group.create", "team", {}),
    ("group.member", "ana", {"group": "team", "added": True}),
    ("group.member", "ana", {"group": "team", "added": False}),
    ("key.create", "root", {"key": "<key>", "name": "laptop"}),  # root's own key
    ("key.revoke", "ana", {"key": "<key>", "name": "ana's laptop"}),  # ana's key, by the admin
    ("group.delete", "team", {}),
    ("user.delete", "bo", {"stores_to": "root", "stores": []}),
]


@pytest.fixture(autouse=True)
def _fake(monkeypatch):
    use_fake_model(monkeypatch)


def team(data: Path) -> dict[str, str]:
    """root (admin), ana and bo (members) and their keys in the fresh data folder ``data``, made
    below the desk (not part of what is compared). Returns ``{"root": key, "ana_key": id}``."""
    system = System(load_settings(data_dir=data))
    try:
        system.people.set_up_admin("root", PW, "Root Admin")
        system.people.accounts.create("ana", PW, display_name="Ana Lima")
        system.people.accounts.create("bo", PW)
        _, root_secret = system.people.keys.create("root", "tests")
        ana_key, _ = system.people.keys.create("ana", "ana's laptop")
        return {"root": root_secret, "ana_key": ana_key.id}
    finally:
        system.close()


def events_of(data: Path) -> list[AuditEvent]:
    """The account events in ``data``'s audit trail, oldest first (sign-ins and the team's set-up left out)."""
    system = System(load_settings(data_dir=data))
    try:
        events = system.people.audit.events(limit=1000)
    finally:
        system.close()
    return [
        e
        for e in reversed(events)
        if not e.action.startswith("user.sign_") and not (e.action == "user.create" and e.detail.get("first"))
    ]


def shape(e: AuditEvent) -> tuple[str, str, str | None, dict[str, Any], str | None]:
    """``(action, actor, target, detail, store)`` with a key's id and an expiry as placeholders."""
    detail = dict(e.detail)
    if "key" in detail:
        assert str(detail["key"]).startswith("key_"), e
        detail["key"] = "<key>"
    if "expires" in detail:
        assert str(detail["expires"])[:2] == "20", e
        detail["expires"] = "<when>"
    return e.action, e.actor, e.target, detail, e.store


def expected() -> list[tuple[str, str, str | None, dict[str, Any], str | None]]:
    return [(action, "root", target, detail, None) for action, target, detail in SCRIPT]


# -- the three surfaces ---------------------------------------------------------------------------
def by_cli(data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    made = team(data)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(data))

    def run(*argv: str, stdin: str | None = None) -> str:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["--user", "root", *argv])
        out, err = capsys.readouterr()
        assert code == 0, (argv, err)
        return out

    run("users", "add", "cy", "--password-stdin", stdin=PW + "\n")
    run("users", "set-role", "cy", "admin")
    run("users", "passwd", "ana", "--password-stdin", stdin=NEW_PW + "\n")
    run("users", "invite")
    run("groups", "add", "team")
    run("groups", "add-member", "team", "ana")
    run("groups", "remove-member", "team", "ana")
    run("keys", "create", "root", "--name", "laptop")
    run("keys", "revoke", made["ana_key"])
    run("groups", "delete", "team")
    run("users", "delete", "bo", "--to", "root")


def by_pages(data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    made = team(data)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(data))
    with fresh_caches():
        at = open_app()
        at.text_input(key="sign-in-username").input("root")
        at.text_input(key="sign-in-password").input(PW)
        next(b for b in at.button if b.label == "Sign in").click().run()
        assert at.session_state["actor"].username == "root"

        def ok() -> None:
            assert not at.exception, at.exception
            assert not at.error, [e.value for e in at.error]

        def press(label: str) -> None:
            next(b for b in at.button if b.label == label).click().run()
            ok()

        at.switch_page("pages/people.py").run()
        ok()
        at.text_input(key="new-username").input("cy")
        at.text_input(key="new-password").input(PW)
        press("Add the account")
        at.selectbox(key="edit-user").select("cy").run()
        at.selectbox(key="edit-role-cy").select("admin")  # in a form: sent with its button
        press("Change the role")
        at.selectbox(key="edit-user").select("ana").run()
        at.text_input(key="edit-password").input(NEW_PW)
        press("Reset the password")
        at.button(key="make-invite").click().run()
        ok()
        at.text_input(key="new-group").input("team")
        press("Create the group")
        at.selectbox(key="edit-group").select("team").run()
        at.selectbox(key="group-person").select("ana").run()
        at.button(key="group-add").click().run()
        ok()
        at.button(key="group-remove").click().run()
        ok()
        at.switch_page("pages/account.py").run()
        at.text_input(key="key-name").input("laptop")
        press("Create a key")
        at.switch_page("pages/people.py").run()
        at.selectbox(key="revoke-key").select(made["ana_key"]).run()
        at.button(key="revoke-any-key").click().run()
        ok()
        at.selectbox(key="edit-group").select("team").run()
        at.checkbox(key="delete-group-sure-team").check().run()
        at.button(key="group-delete").click().run()
        ok()
        at.selectbox(key="edit-user").select("bo").run()
        at.selectbox(key="heir").select("root").run()
        at.checkbox(key="delete-sure").check().run()
        at.button(key="delete-user").click().run()
        ok()
        at.session_state["workbench"].close()


def by_rest(data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    made = team(data)
    system = System(load_settings(data_dir=data))
    try:
        with TestClient(create_app(system), headers={"Authorization": f"Bearer {made['root']}"}) as c:

            def call(method: str, path: str, **kw: Any) -> dict[str, Any]:
                r = c.request(method, "/v1/knowledge" + path, **kw)
                assert r.status_code == 200, (method, path, r.text)
                return r.json()

            call("POST", "/users", json={"username": "cy", "password": PW})
            call("POST", "/users/cy", json={"role": "admin"})
            call("POST", "/users/ana", json={"password": NEW_PW})
            call("POST", "/invites", json={})
            call("POST", "/groups", json={"name": "team"})
            call("POST", "/groups/team/members", json={"username": "ana"})
            call("DELETE", "/groups/team/members/ana")
            call("POST", "/keys", json={"name": "laptop"})
            call("DELETE", f"/keys/{made['ana_key']}")
            call("DELETE", "/groups/team")
            call("DELETE", "/users/bo", params={"heir": "root"})
    finally:
        system.close()


SURFACES: dict[str, Callable[..., None]] = {"cli": by_cli, "pages": by_pages, "rest": by_rest}


@pytest.mark.parametrize("surface", list(SURFACES))
def test_each_surface_leaves_the_one_shape_of_every_account_event(surface, tmp_path, monkeypatch, capsys):
    data = tmp_path / surface
    SURFACES[surface](data, monkeypatch, capsys)
    assert [shape(e) for e in events_of(data)] == expected()


def test_the_cli_the_pages_and_the_rest_api_leave_identical_account_events(tmp_path, monkeypatch, capsys):
    trails = {}
    for name, run in SURFACES.items():
        data = tmp_path / name
        run(data, monkeypatch, capsys)
        trails[name] = [shape(e) for e in events_of(data)]
    assert trails["cli"] == trails["pages"] == trails["rest"]
    assert [t[0] for t in trails["cli"]] == [a for a, _, _ in SCRIPT]  # invite and group.member included


# -- the desk's rules -----------------------------------------------------------------------------
def test_every_public_method_of_the_desk_names_the_actions_it_checks():
    from knowledge.people.desk import AccountDesk
    from knowledge.people.policy import ACTIONS, action_of

    public = {
        n: getattr(AccountDesk, n) for n in vars(AccountDesk) if not n.startswith("_") and callable(getattr(AccountDesk, n))
    }
    marks = {n: action_of(m) for n, m in public.items()}
    assert [n for n, acts in marks.items() if not acts] == []
    assert all(a in ACTIONS and a.startswith("account.") for acts in marks.values() for a in acts or ())


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "desk"))
    s.people.set_up_admin("root", PW)
    s.people.accounts.create("ana", PW)
    s.people.accounts.create("bo", PW)
    yield s
    s.close()


def as_(wb: Workbench, system: System, name: str) -> Workbench:
    return wb.as_user(system.people.accounts.actor(name))


def test_a_member_is_refused_account_management_in_words(system, wb):
    desk = as_(wb, system, "ana").accounts
    assert not desk.may_manage()
    refusals = {
        "list the accounts": lambda: desk.users(),
        "add an account": lambda: desk.create_user("cy", PW),
        "change a role": lambda: desk.set_role("ana", "admin"),
        "set another account's password": lambda: desk.set_password("bo", NEW_PW),
        "change another account's name": lambda: desk.set_display_name("bo", "B"),
        "delete an account": lambda: desk.delete_user("bo"),
        "invite someone": lambda: desk.invite("member"),
        "add a group": lambda: desk.create_group("team"),
        "make a key for another account": lambda: desk.create_key("bo", "x"),
        "list another account's keys": lambda: desk.api_keys("bo"),
        "manage people": lambda: desk.require_manage("manage people"),
    }
    for words, attempt in refusals.items():
        with pytest.raises(PermissionDenied, match=f"^Only an admin may {words}\\.$"):
            attempt()
    assert system.people.accounts.get("cy") is None and system.people.accounts.require("ana").role == "member"
    assert not system.people.audit.events(actor="ana")  # nothing recorded for a refusal


def test_a_member_changes_their_own_password_name_and_keys(system, wb):
    ana = as_(wb, system, "ana").accounts
    with pytest.raises(AuthenticationFailed):
        ana.set_password("ana", NEW_PW, current="not it")
    ana.set_password("ana", NEW_PW, current=PW)
    assert system.people.accounts.authenticate("ana", NEW_PW).username == "ana"
    assert ana.set_display_name("ana", "Ana L.").display_name == "Ana L."
    key, secret = ana.create_key("ana", "laptop")
    assert system.people.key_actor(secret).username == "ana"
    assert [k.id for k in ana.api_keys()] == [key.id]  # a member's keys: their own only
    bo_key, _ = system.people.keys.create("bo", "bo's")
    with pytest.raises(InvalidArgument, match="There is no API key"):  # another's key is not even confirmed
        ana.revoke_key(bo_key.id)
    assert ana.revoke_key(key.id).id == key.id
    with pytest.raises(AuthenticationFailed):
        system.people.key_actor(secret)
    assert [(e.action, e.target, e.detail) for e in reversed(system.people.audit.events(actor="ana"))] == [
        ("user.password", "ana", {}),
        ("user.update", "ana", {"display_name": "Ana L."}),
        ("key.create", "ana", {"key": key.id, "name": "laptop"}),
        ("key.revoke", "ana", {"key": key.id, "name": "laptop"}),
    ]


def test_an_admin_resets_a_password_and_the_local_admin_may_do_everything(system, wb):
    root = as_(wb, system, "root").accounts
    root.set_password("ana", NEW_PW)
    assert system.people.audit.events(action="user.password")[0].detail == {"reset": True}
    local = wb.accounts  # no --user: the local admin
    assert local.may_manage() and local.create_group("team") == "team"
    assert system.people.audit.events(action="group.create")[0].actor == "local"


def test_set_up_admin_makes_only_the_first_account(tmp_path):
    system = System(load_settings(data_dir=tmp_path / "fresh"))
    w = Workbench(system)
    try:
        assert not w.accounts.enabled()
        user = w.accounts.set_up_admin("first", PW)
        assert user.is_admin and w.accounts.enabled()
        [event] = system.people.audit.events(action="user.create")
        assert (event.actor, event.target, event.detail) == ("first", "first", {"role": "admin", "first": True})
        with pytest.raises(InvalidArgument, match="set up already"):
            w.accounts.set_up_admin("second", PW)
    finally:
        system.close()


def test_the_rest_api_refuses_a_member_account_management_but_not_their_own_keys(tmp_path):
    data = tmp_path / "rest"
    team(data)
    system = System(load_settings(data_dir=data))
    try:
        _, ana_secret = system.people.keys.create("ana", "tests")
        with TestClient(create_app(system), headers={"Authorization": f"Bearer {ana_secret}"}) as c:
            for method, path, body in (
                ("GET", "/users", None),
                ("POST", "/users", {"username": "cy", "password": PW}),
                ("POST", "/users/ana", {"role": "admin"}),
                ("POST", "/invites", {}),
                ("POST", "/groups", {"name": "team"}),
                ("DELETE", "/users/bo", None),
                ("POST", "/keys", {"name": "x", "username": "bo"}),
            ):
                r = c.request(method, "/v1/knowledge" + path, json=body)
                assert r.status_code == 403, (method, path, r.text)
                assert r.json()["error"]["code"] == "permission_denied"
                assert r.json()["error"]["message"].startswith("Only an admin may ")
            r = c.post("/v1/knowledge/users/ana", json={"role": "admin", "extra": 1})
            assert r.status_code == 400  # a field the body does not have
            r = c.post("/v1/knowledge/keys", json={"name": "laptop"})
            assert r.status_code == 200 and r.json()["username"] == "ana" and r.json()["secret"].startswith("kn-")
            mine = sorted(k["name"] for k in c.get("/v1/knowledge/keys").json()["data"])
            assert mine == ["ana's laptop", "laptop", "tests"]  # her own only
            r = c.post("/v1/knowledge/users/ana", json={"display_name": "Ana L."})
            assert r.status_code == 200 and r.json()["display_name"] == "Ana L."
        assert system.people.accounts.require("ana").role == "member" and system.people.accounts.get("cy") is None
    finally:
        system.close()
