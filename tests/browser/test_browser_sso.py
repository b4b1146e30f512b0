"""Single sign-on end to end (issue 28): a real OpenID Connect provider on localhost
(``oidc-provider-mock``, started by the test in a thread), ``streamlit run app.py`` with a
``secrets.toml`` ``[auth]`` section pointing at it, and Chromium: "Sign in with Test IdP", the
provider's page (the subject typed in), back in the app signed in as the mapped account with its
role (a member sees only their store, the admin every store); an identity without an account is
refused while ``accounts.sso_create_members`` is off, and gets a member account when it is on.
Screenshots: ``test-artifacts/browser/28-sso-*.png``.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import REPO, Server, app_page, explained, serve, shot, squash, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PW = "correct horse battery"
ARTIFACTS = REPO / "test-artifacts" / "browser"
LABEL = "Test IdP"


@pytest.fixture(scope="module")
def idp() -> Iterator[str]:
    """The provider: its base URL; ana, root and a stranger with verified e-mail addresses."""
    mock = pytest.importorskip("oidc_provider_mock", reason="pip install -r requirements-dev.txt")
    pytest.importorskip("authlib", reason="pip install -r requirements.txt (st.login needs Authlib)")
    users = [
        mock.User(sub="ana-idp", claims={"email": "Ana@Example.org", "email_verified": True, "name": "Ana Example"}),
        mock.User(sub="root-idp", claims={"email": "root@example.org", "email_verified": True, "name": "Root"}),
        mock.User(
            sub="stranger-idp", claims={"email": "stranger@example.org", "email_verified": True, "name": "Strängér O'Neil"}
        ),
    ]
    with mock.run_server_in_thread(user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def sso_app(
    base: Path,
    idp: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    create_members: bool = False,
    env_more: dict[str, str] | None = None,
) -> Iterator[Server]:
    """The app on a port chosen here (the redirect URI names it), with accounts root (admin) and ana
    (member) and a private store of each, root's shared with the group hr, and ``[auth]`` in a
    secrets file of its own; ``env_more``: more settings for the app."""
    from knowledge.config import load_settings
    from knowledge.system import System
    from knowledge.workbench import Workbench

    data = base / "data"
    system = System(load_settings(data_dir=data))
    try:
        wb = Workbench(system)
        system.people.set_up_admin("root", PW, "The Admin")
        system.people.accounts.update("root", email="root@example.org")
        system.people.accounts.create("ana", PW, display_name="Ana", email="ana@example.org")
        wb.as_user(system.people.accounts.actor("root")).create_store("root-private")
        wb.as_user(system.people.accounts.actor("ana")).create_store("ana-notes")
        system.people.accounts.create_group("hr")
        system.people.sharing.share("root-private", "group", "hr", "read")
    finally:
        system.close()
    port = _port()
    secrets_file = base / "secrets.toml"
    secrets_file.write_text(
        "[auth]\n"
        f'redirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
        f'cookie_secret = "{secrets.token_hex(32)}"\n'
        'client_id = "knowledge-test"\n'
        'client_secret = "not-a-real-secret"\n'
        f'server_metadata_url = "{idp}/.well-known/openid-configuration"\n'
        f'provider_name = "{LABEL}"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr("tests.helpers.browser.free_port", lambda: port)
    env = {
        "STREAMLIT_SECRETS_FILES": str(secrets_file),
        "KNOWLEDGE_ACCOUNTS__SSO_CREATE_MEMBERS": "true" if create_members else "false",
        **(env_more or {}),
    }
    with serve(base, env_extra=env) as srv:
        yield srv


def through_provider(page: Any, subject: str) -> None:
    """Click "Sign in with Test IdP", type ``subject`` on the provider's page, authorize, and wait
    for the app again."""
    page.get_by_role("button", name=f"Sign in with {LABEL}").click()
    page.wait_for_url(re.compile(r"http://localhost:\d+/oauth2/authorize"))
    page.locator("input[name=sub]").fill(subject)
    page.get_by_role("button", name="Authorize", exact=True).click()
    page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/"))
    wait_for_app(page)


def store_list(page: Any, server: Server) -> str:
    page.goto(server.url + "/stores")
    wait_for_app(page)
    page.get_by_role("heading", name=re.compile("Vector stores|🗂️")).first.wait_for()
    return squash(page.locator('[data-testid="stMain"]').inner_text())


@pytest.fixture
def app(tmp_path: Path, idp: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    with sso_app(tmp_path, idp, monkeypatch) as srv:
        yield srv


def test_sign_in_through_the_provider_is_the_mapped_account_with_its_role(browser, app: Server, idp: str):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width, height in ((1280, 800), (390, 844)):
        with app_page(browser, app, ARTIFACTS, width=width, height=height) as page:
            page.get_by_role("button", name=f"Sign in with {LABEL}").wait_for()
            assert page.get_by_label("Username").count() == 1  # and the account form, for accounts with a password
            shot(page, ARTIFACTS, f"28-sso-sign-in-{width}.png")
            if width == 1280:  # the stores are not served before sign-in
                page.goto(app.url + "/stores")
                wait_for_app(page)
                page.get_by_role("button", name=f"Sign in with {LABEL}").wait_for()
                assert "ana-notes" not in squash(page.locator('[data-testid="stMain"]').inner_text())

    with app_page(browser, app, ARTIFACTS) as page:  # ana (member, matched by her verified address)
        through_provider(page, "ana-idp")
        page.get_by_role("button", name="Sign out").wait_for()
        text = store_list(page, app)
        assert "ana-notes" in text and "root-private" not in text and "All stores (1)" in text
        shot(page, ARTIFACTS, "28-sso-signed-in-member-1280.png")
        page.reload()  # a new browser session: Streamlit's identity cookie signs her in again
        wait_for_app(page)
        text = store_list(page, app)
        assert "ana-notes" in text and "All stores (1)" in text
        page.get_by_role("button", name="Sign out").click()  # st.logout: the provider's end-session page
        page.wait_for_url(re.compile(r"http://localhost:\d+/oauth2/end_session"))
        page.get_by_role("button", name="End session").click()
        page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/"))
        wait_for_app(page)
        page.get_by_role("button", name=f"Sign in with {LABEL}").wait_for()

    with app_page(browser, app, ARTIFACTS) as page:  # root: the admin sees every store
        through_provider(page, "root-idp")
        text = store_list(page, app)
        assert "All stores (2)" in text  # ana-notes and root-private (admins see every store)
        page.get_by_test_id("stSelectbox").filter(has_text="Open store").locator("input").click()
        names = {n.strip() for n in page.get_by_role("option").all_inner_texts()}
        assert {"ana-notes", "root-private"} <= names
        shot(page, ARTIFACTS, "28-sso-signed-in-admin-1280.png")


def test_an_identity_without_an_account_is_refused_while_auto_create_is_off(browser, app: Server):
    with app_page(browser, app, ARTIFACTS) as page:
        through_provider(page, "stranger-idp")
        alert = page.get_by_text(re.compile(r"There is no account here for stranger\W*@example\.org"))
        alert.wait_for()
        assert "Ask an admin to create one" in squash(page.locator('[data-testid="stMain"]').inner_text())
        assert page.get_by_role("button", name="Sign out").count() == 0
        shot(page, ARTIFACTS, "28-sso-refused-1280.png")
        page.goto(app.url + "/stores")  # a deep link stays behind the gate
        wait_for_app(page)
        assert "ana-notes" not in squash(page.locator('[data-testid="stMain"]').inner_text())
        page.get_by_role("button", name="Use another account").wait_for()


def test_with_auto_create_on_a_new_identity_gets_a_member_account(
    browser, tmp_path: Path, idp: str, monkeypatch: pytest.MonkeyPatch
):
    with (
        sso_app(tmp_path, idp, monkeypatch, create_members=True) as srv,
        app_page(browser, srv, ARTIFACTS) as page,
        explained(page, srv, ARTIFACTS),
    ):
        through_provider(page, "stranger-idp")
        page.get_by_role("button", name="Sign out").wait_for()
        text = store_list(page, srv)
        assert "ana-notes" not in text and "root-private" not in text and "All stores (" not in text  # a member
        shot(page, ARTIFACTS, "28-sso-created-member-1280.png")


def test_a_members_groups_follow_the_providers_groups_claim_at_each_sign_in(
    browser, tmp_path: Path, idp: str, monkeypatch: pytest.MonkeyPatch
):
    """Issue 41: with ``accounts.sso_groups_claim = "groups"``, the provider's ``groups`` claim is ana's
    groups at each sign-in: in hr, she sees the store shared with hr; the provider drops hr, and at
    her next sign-in it is gone."""
    import httpx

    def claims(groups: list[str]) -> None:
        body = {"email": "ana@example.org", "email_verified": True, "name": "Ana", "groups": groups}
        assert httpx.put(f"{idp}/users/ana-groups-idp", json=body, timeout=10).status_code == 204

    env = {"KNOWLEDGE_ACCOUNTS__SSO_GROUPS_CLAIM": "groups"}
    with (
        sso_app(tmp_path, idp, monkeypatch, env_more=env) as srv,
        app_page(browser, srv, ARTIFACTS) as page,
        explained(page, srv, ARTIFACTS),
    ):
        claims(["hr", "staff"])
        through_provider(page, "ana-groups-idp")
        page.get_by_role("button", name="Sign out").wait_for()
        text = store_list(page, srv)
        assert "All stores (2)" in text  # ana-notes and root-private, shared with hr, which the claim lists
        shot(page, ARTIFACTS, "41-sso-groups-in-hr-1280.png")
        page.get_by_role("button", name="Sign out").click()
        page.wait_for_url(re.compile(r"http://localhost:\d+/oauth2/end_session"))
        page.get_by_role("button", name="End session").click()
        page.wait_for_url(re.compile(r"http://127\.0\.0\.1:\d+/"))
        wait_for_app(page)
        claims(["staff"])  # removed from hr at the provider
        through_provider(page, "ana-groups-idp")
        page.get_by_role("button", name="Sign out").wait_for()
        text = store_list(page, srv)
        assert "All stores (1)" in text  # ana-notes only: out of hr
