"""The app with accounts (issue 28), headless: signing in by account (throttled per account, the
same words for an unknown name), sessions checked on every run, the shared password refused once
accounts exist, the first admin's set-up, invitation links, pages by role, the People, My account
and Audit pages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from knowledge import access
from knowledge.config import load_settings
from knowledge.errors import AuthenticationFailed
from knowledge.people import Accounts
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import APP, fresh_caches, open_app, page_text, use_fake_model
from tests.helpers.app_system import app_over, preparing
from tests.helpers.env import prepared_data, use_prepared_data

PW = "a long enough password"


@pytest.fixture(autouse=True)
def _app(monkeypatch):
    use_fake_model(monkeypatch)
    with fresh_caches():
        yield


@pytest.fixture
def waits() -> list[float]:
    return []


@pytest.fixture
def app_system() -> Iterator[System]:
    """The System the app runs over (one per process, shared by every session), held by the test."""
    system = System(load_settings())
    try:
        with app_over(system):
            yield system
    finally:
        system.close()


def _build_team(work: Path) -> None:
    with preparing() as system:
        system.people.set_up_admin("root", PW, "Root Admin")
        system.people.accounts.create("ana", PW, display_name="Ana Lima")
        system.people.accounts.create("bo", PW, display_name="Bo")


@pytest.fixture(scope="module")
def team_data(tmp_path_factory) -> Path:
    """A data folder with a team: admin root, members ana and bo; made once for the module."""
    return prepared_data(tmp_path_factory, "accounts-team", _build_team)


@pytest.fixture
def system(team_data, waits) -> Iterator[System]:
    """The app's System (one per process, shared by every session) over this test's copy of the team's
    data folder, with sign-in delays recorded instead of slept."""
    use_prepared_data(team_data)
    system = System(load_settings())
    system.people.accounts = Accounts(system.catalog, system.settings, sleep=waits.append)
    try:
        with app_over(system):
            yield system
    finally:
        system.close()


@pytest.fixture
def wb(system) -> Workbench:
    """The local admin's workbench over the app's System."""
    return Workbench(system)


def visit(page: str | None = None) -> AppTest:
    return open_app(page)


def sign_in(at: AppTest, username: str, password: str) -> AppTest:
    at.text_input(key="sign-in-username").input(username)
    at.text_input(key="sign-in-password").input(password)
    next(b for b in at.button if b.label == "Sign in").click().run()
    assert not at.exception, at.exception
    return at


def signed_in(username: str, page: str | None = None) -> AppTest:
    at = sign_in(visit(), username, PW)
    assert at.session_state["actor"].username == username
    if page:
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def sidebar_text(at: AppTest) -> str:
    return "\n".join(c.value for c in at.sidebar.caption)


def test_sign_in_by_account_shows_who_and_sign_out_ends_the_session(system):
    at = visit()
    assert [t.label for t in at.text_input] == ["Username", "Password"]
    assert "workbench" not in at.session_state  # nothing of the data before sign-in
    sign_in(at, " ANA ", PW)  # any case, spaces around
    assert at.session_state["actor"].username == "ana"
    assert "Ana Lima" in sidebar_text(at) and "member" in sidebar_text(at)
    token = at.session_state["session_token"]
    assert system.people.accounts.session_actor(token).username == "ana"
    assert system.people.audit.events(actor="ana", action="user.sign_in")
    at.button(key="sign-out").click().run()
    assert [t.label for t in at.text_input] == ["Username", "Password"]
    with pytest.raises(AuthenticationFailed):  # ended in the catalog, not only in this browser
        system.people.accounts.session_actor(token)
    assert system.people.audit.events(actor="ana", action="user.sign_out")


def test_wrong_passwords_are_throttled_per_account_with_one_message(system, waits):
    at = visit()
    sign_in(at, "", "")
    assert errors(at) == ["Type your username and your password."]
    sign_in(at, "ana", "wrong password")
    sign_in(at, "nobody-here", "wrong password")
    assert errors(at) == ["Wrong username or password."] and waits == []  # the same words for both
    sign_in(at, "ana", "wrong again")
    assert errors(at) == ["Wrong username or password."]
    assert waits == [1.0]  # ana's second try waited for the first failure
    assert system.people.accounts.delay("ana") == 2.0 and system.people.accounts.delay("bo") == 0  # per account
    sign_in(at, "ana", PW)
    assert waits == [1.0, 2.0] and at.session_state["actor"].username == "ana"  # the delay is served, then in
    assert len(system.people.audit.events(action="user.sign_in_failed")) == 3


def test_an_expired_session_signs_out_with_the_reason(system):
    at = signed_in("ana")
    with system.catalog.cursor() as cur:
        cur.execute(
            "UPDATE app_sessions SET expires = expires - ?", [timedelta(hours=system.settings.accounts.session_hours + 1)]
        )
    at.run()
    assert not at.exception
    assert [w.value for w in at.warning] == ["Your session expired; sign in again."]
    assert "actor" not in at.session_state and "workbench" not in at.session_state
    assert [t.label for t in at.text_input] == ["Username", "Password"]


def test_a_deleted_account_and_a_role_change_apply_on_the_next_run(system):
    root = system.people.accounts.actor("root")
    bo = signed_in("bo")
    ana = signed_in("ana")
    system.people.accounts.update("ana", role="admin")
    ana.run()
    assert ana.session_state["actor"].is_admin  # read fresh, not kept from the sign-in
    system.people.delete_user("bo", by=root)
    bo.run()
    assert "actor" not in bo.session_state and "signed out" in bo.warning[0].value


def test_the_shared_password_is_refused_once_accounts_exist(monkeypatch, waits):
    monkeypatch.setenv("KNOWLEDGE_APP_PASSWORD", "correct horse")
    system = System(load_settings())  # the app's, with the password set
    try:
        with app_over(system):
            at = visit()
            at.text_input[0].input("correct horse")
            at.button[0].click().run()
            assert "workbench" in at.session_state  # signed in by the shared password, no account yet
            system.people.accounts = Accounts(system.catalog, system.settings, sleep=waits.append)
            system.people.set_up_admin("root", PW)
            at.run()  # the session that came in with the shared password is out now
            assert "workbench" not in at.session_state
            assert any("shared password no longer signs in" in i.value for i in at.info)
            sign_in(at, "root", "correct horse")
            assert errors(at) == ["Wrong username or password."]
            sign_in(at, "root", PW)
            assert at.session_state["actor"].username == "root"
    finally:
        system.close()


def test_a_shared_app_sets_up_its_first_admin_only_with_the_token_of_the_log(monkeypatch, capsys, app_system):
    st_config.set_option("server.address", "0.0.0.0")  # reachable from other hosts (restored after the test)
    throttle: list[float] = []
    monkeypatch.setattr(access, "THROTTLE", access.LoginThrottle(sleep=throttle.append))
    at = visit()
    assert "workbench" not in at.session_state
    assert any("reachable from other computers" in e for e in errors(at))
    logged = capsys.readouterr().err
    token = logged.split("first-run set-up token")[1].split(": ", 1)[1].split()[0]

    def submit(typed: str, username: str, first: str, again: str) -> None:
        at.text_input(key="setup-token").input(typed)
        at.text_input(key="setup-username").input(username)
        at.text_input(key="setup-password").input(first)
        at.text_input(key="setup-again").input(again)
        next(b for b in at.button if b.label == "Create the admin account").click().run()
        assert not at.exception, at.exception

    submit("", "root", PW, PW)
    assert "Type the set-up token from the server log." in errors(at)
    submit(token, "root", PW, PW + "x")
    assert "The two passwords differ: type the same password twice." in errors(at)
    submit("a guess", "root", PW, PW)
    assert "Wrong set-up token: copy it from the server log." in errors(at)
    assert "workbench" not in at.session_state
    submit(token, "Root", PW, PW)
    assert throttle == [1.0]  # the wrong guess slowed the next try
    actor = at.session_state["actor"]
    assert actor.username == "root" and actor.is_admin
    assert app_system.people.accounts.admins() == ["root"]


def test_a_team_app_makes_its_first_admin_at_the_terminal_not_with_a_per_process_token(
    monkeypatch, capsys, pg_database, settings
):
    """On a shared catalog each app process would print its own token to its own log (issue 39): the
    set-up page names the command instead, prints nothing, and the admin the CLI makes signs in."""
    import io
    from urllib.parse import urlencode

    from psycopg.conninfo import conninfo_to_dict

    from knowledge.cli import main
    from tests.helpers.pg import pg_catalog_settings

    parts = conninfo_to_dict(pg_catalog_settings(settings).catalog.url)
    query = urlencode({k: parts[k] for k in ("host", "port", "password") if parts.get(k)})
    url = f"postgresql://{parts.get('user', '')}@/{parts['dbname']}?{query}"
    monkeypatch.setenv("KNOWLEDGE_CATALOG__URL", url)
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "pgvector")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__URL", url)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(settings.data_root))
    st_config.set_option("server.address", "0.0.0.0")
    at = visit()
    assert "workbench" not in at.session_state
    assert "first-run set-up token" not in capsys.readouterr().err
    assert not [t for t in at.text_input if t.key == "setup-token"]
    assert [c.value for c in at.code] == ["python -m knowledge users add NAME --role admin"]

    monkeypatch.setattr("sys.stdin", io.StringIO(PW + "\n"))
    assert main(["users", "add", "root", "--role", "admin", "--password-stdin"]) == 0
    next(b for b in at.button if b.label == "I have made it: sign in").click().run()
    assert not at.exception, at.exception
    sign_in(at, "root", PW)
    assert at.session_state["actor"].username == "root" and at.session_state["actor"].is_admin


def test_on_loopback_the_local_admin_turns_accounts_on_from_people():
    at = visit("pages/people.py")
    assert [b.label for b in at.button] == ["Turn on accounts"]
    at.text_input(key="first-username").input("root")
    at.text_input(key="first-display").input("Róot Ädmin")
    at.text_input(key="first-password").input(PW)
    at.text_input(key="first-again").input(PW)
    at.button[0].click().run()
    assert not at.exception, at.exception
    actor = at.session_state["actor"]
    assert (actor.username, actor.display_name, actor.role) == ("root", "Róot Ädmin", "admin")
    assert "Róot Ädmin" in sidebar_text(at)


def test_an_invitation_link_creates_an_account_with_odd_characters_and_signs_it_in(system):
    bad = AppTest.from_file(APP, default_timeout=60)
    bad.query_params["invite"] = "mistyped"
    bad.run()
    assert any("not valid" in e for e in errors(bad))
    token = system.people.accounts.invite("member", "root")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["invite"] = token
    at.run()
    assert [h.value for h in at.subheader] == ["Create your account"]

    def submit(username: str, display: str, first: str, again: str) -> None:
        at.text_input(key="invite-username").input(username)
        at.text_input(key="invite-display").input(display)
        at.text_input(key="invite-password").input(first)
        at.text_input(key="invite-again").input(again)
        next(b for b in at.button if b.label == "Create my account").click().run()
        assert not at.exception, at.exception

    odd = " pässwörd 🌱 with spaces "
    submit("zoe", "", "", "")
    assert "Fill in the username and the password twice." in errors(at)
    submit("zoe", "Zoë", odd, odd.strip())
    assert "The two passwords differ: type the same password twice." in errors(at)
    submit("zoe has spaces", "Zoë", odd, odd)
    assert any("is not a username" in e for e in errors(at))
    submit(" Zoe\u0308 ", "  Zoë   🌱 Ñandú ", odd, odd)  # a combining diaeresis, spaces around
    actor = at.session_state["actor"]
    assert (actor.username, actor.display_name, actor.role) == ("zoë", "Zoë 🌱 Ñandú", "member")
    assert "invite" not in at.query_params
    assert sign_in(visit(), "ZOË", odd).session_state["actor"].username == "zoë"  # precomposed, upper case
    with pytest.raises(AuthenticationFailed, match="not valid"):  # used up
        system.people.accounts.invitation(token)


def test_a_member_gets_no_people_or_settings_page_an_admin_does(wb):
    ana = signed_in("ana")
    for page in ("pages/people.py", "pages/settings.py"):
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            ana.switch_page(page)
    for page in ("pages/account.py", "pages/audit.py", "pages/stores.py"):
        ana.switch_page(page).run()
        assert not ana.exception, (page, ana.exception)
    root = signed_in("root", "pages/people.py")
    assert [t.value for t in root.title] == ["👥 People"]
    root.switch_page("pages/settings.py").run()
    assert not root.exception


def test_the_home_page_shows_the_server_folders_to_an_admin_not_to_a_member(wb):
    """issue 39: a member saw the server's data folder and model cache on Home."""
    folders = (str(wb.settings.data_root), str(wb.settings.models_dir))
    ana = signed_in("ana")
    assert [t.value for t in ana.title] == ["📚 knowledge"]
    text = page_text(ana)
    assert wb.settings.embeddings.model in text  # the model is named ...
    assert not [f for f in folders if f in text] and "Data folder" not in text  # ... not where it is kept
    root = signed_in("root")
    text = page_text(root)
    assert all(f in text for f in folders) and "Data folder" in text


def test_an_admin_adds_an_account_and_deleting_one_hands_its_stores_to_an_admin(wb, system):
    at = signed_in("root", "pages/people.py")
    table = at.dataframe[0].value
    assert list(table["username"]) == ["ana", "bo", "root"] and list(table["role"]) == ["member", "member", "admin"]
    at.text_input(key="new-username").input("cy")
    at.text_input(key="new-display").input("Cy Né")
    at.text_input(key="new-password").input(PW)
    next(b for b in at.button if b.label == "Add the account").click().run()
    assert not at.exception, at.exception
    assert system.people.accounts.require("cy").display_name == "Cy Né"
    assert any("Added Cy Né" in s.value for s in at.success)
    [created] = system.people.audit.events(action="user.create", actor="root", limit=5)[:1]
    assert created.target == "cy"

    cy = wb.as_user(system.people.accounts.actor("cy"))
    cy.create_store("Cy notes")
    at.run()
    at.selectbox(key="edit-user").select("cy").run()
    assert at.selectbox(key="heir").value == "root"
    at.checkbox(key="delete-sure").check().run()
    at.button(key="delete-user").click().run()
    assert not at.exception, at.exception
    assert any("Deleted cy. Their stores passed to root: Cy notes." in s.value for s in at.success)
    assert system.people.accounts.get("cy") is None and wb.store_owner("Cy notes") == "root"


def test_my_api_keys_are_made_shown_once_and_revoked_at_once(system):
    at = signed_in("ana", "pages/account.py")
    at.text_input(key="key-name").input("laptop scripts")
    next(b for b in at.button if b.label == "Create a key").click().run()
    assert not at.exception, at.exception
    [secret] = [c.value for c in at.code]
    assert secret.startswith("kn-") and system.people.key_actor(secret).username == "ana"
    assert list(at.dataframe[0].value["status"]) == ["active"]
    at.run()
    assert not at.code  # shown once
    at.button(key="my-revoke-key").click().run()
    assert not at.exception, at.exception
    with pytest.raises(AuthenticationFailed):
        system.people.key_actor(secret)
    assert at.dataframe[0].value["status"].iloc[0].startswith("revoked")
    assert [e.action for e in system.people.audit.events(actor="ana", action="key.")] == ["key.revoke", "key.create"]


def test_my_account_changes_the_password_and_keeps_me_signed_in(system):
    at = signed_in("bo", "pages/account.py")
    at.text_input(key="my-current").input("not it")
    at.text_input(key="my-new").input("a new long password")
    at.text_input(key="my-again").input("a new long password")
    next(b for b in at.button if b.label == "Change the password").click().run()
    assert "Your current password is not right." in errors(at)
    at.text_input(key="my-current").input(PW)
    at.text_input(key="my-new").input("a new long password")
    at.text_input(key="my-again").input("a new long password")
    next(b for b in at.button if b.label == "Change the password").click().run()
    assert not at.exception and at.session_state["actor"].username == "bo"
    assert system.people.accounts.authenticate("bo", "a new long password").username == "bo"


def test_the_audit_page_shows_a_member_only_the_stores_they_see(wb, system):
    ana = wb.as_user(system.people.accounts.actor("ana"))
    ana.create_store("Ana private")
    ana.create_store("Team")
    ana.share_store("Team", "everyone", "", "read")
    wb.as_user(system.people.accounts.actor("bo")).create_store("Bo notes")

    bo = signed_in("bo", "pages/audit.py")
    stores = set(bo.dataframe[0].value["store"])
    assert {"Bo notes", "Team"} <= stores and "Ana private" not in stores
    assert "Ana private" not in bo.dataframe[0].value.to_csv() and bo.get("download_button")
    assert "Ana private" not in bo.selectbox(key="audit-store").options

    root = signed_in("root", "pages/audit.py")
    table = root.dataframe[0].value
    assert {"Ana private", "Bo notes", "Team"} <= set(table["store"])
    assert table["time"].iloc[0].endswith(" UTC") and "Ana Lima" in set(table["who"])
    assert "created the store" in set(table["what"])
    root.selectbox(key="audit-person").select("ana").run()
    assert set(root.dataframe[0].value["who"]) == {"Ana Lima"}
