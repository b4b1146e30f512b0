"""Issue 41 in a browser: a member signs in on the app's own sign-in page with their DIRECTORY password
(a real slapd, tests/helpers/ldap.py); the admin's People page then shows her memberships as "from
LDAP", and a hand edit of one is refused in words naming the directory. Screenshots at 1280x800 and
390x844: ``test-artifacts/browser/41-ldap-*.png``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.browser import (
    ARTIFACTS,
    Requests,
    Server,
    explained,
    full_shot,
    open_context,
    rerun_and_wait,
    serve,
    wait_for_app,
)
from tests.helpers.env import isolate
from tests.helpers.ldap import BASE, PEOPLE, start_slapd

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FAKE = "fake/hash-8"
PW = "a long enough password"
SIZES = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def ldap_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """slapd, and the app signing people in against it: admin root (local password), member ana (no
    password here: her directory's)."""
    from knowledge.config import load_settings
    from knowledge.system import System

    slapd = start_slapd(tmp_path_factory.mktemp("slapd"))
    env = {
        "KNOWLEDGE_EMBEDDINGS__MODEL": FAKE,
        "KNOWLEDGE_ACCOUNTS__LDAP__URL": slapd.url,
        "KNOWLEDGE_ACCOUNTS__LDAP__USER_DN": f"uid={{username}},ou=people,{BASE}",
        "KNOWLEDGE_ACCOUNTS__LDAP__GROUP_BASE": f"ou=groups,{BASE}",
    }
    base = tmp_path_factory.mktemp("browser-ldap")
    try:
        with pytest.MonkeyPatch.context() as mp:
            isolate(mp, base)
            for k, v in env.items():
                mp.setenv(k, v)
            system = System(load_settings(data_dir=base / "data"))
            try:
                system.people.set_up_admin("root", PW, "Root Admin")
                system.people.accounts.create("ana", None, display_name="Ana Lima")
            finally:
                system.close()
        with serve(base, env_extra=env) as srv:
            yield srv
    finally:
        slapd.stop()


def _sign_in(pg, server: Server, username: str, password: str) -> None:
    from playwright.sync_api import expect

    pg.goto(server.url)
    pg.get_by_role("textbox", name="Username").fill(username)
    pg.get_by_role("textbox", name="Password").fill(password)
    pg.get_by_role("button", name="Sign in").click()
    expect(pg.get_by_role("button", name="Sign out")).to_be_visible(timeout=60_000)
    wait_for_app(pg)


def test_a_directory_password_signs_in_and_people_shows_the_directorys_groups(browser, ldap_server: Server):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    requests = Requests()
    ctx, pg = open_context(browser, SIZES["1280"], requests)
    try:
        with explained(pg, ldap_server, ARTIFACTS):
            pg.goto(ldap_server.url)
            pg.get_by_role("textbox", name="Username").fill("ana")
            pg.get_by_role("textbox", name="Password").fill("not her password")
            pg.get_by_role("button", name="Sign in").click()
            expect(pg.get_by_text("Wrong username or password.")).to_be_visible(timeout=60_000)
            _sign_in(pg, ldap_server, "ana", PEOPLE["ana"][0])
            full_shot(pg, ARTIFACTS / "41-ldap-member-signed-in-1280.png")
            rerun_and_wait(pg, lambda: pg.get_by_role("button", name="Sign out").click())
            _sign_in(pg, ldap_server, "root", PW)
            rerun_and_wait(pg, lambda: pg.get_by_role("link", name="People", exact=True).first.click())
            pg.get_by_role("tab", name="Groups").click()
            wait_for_app(pg)
            # the group picker opens on "hr", the person picker on ana: her membership is the directory's
            rerun_and_wait(pg, lambda: pg.get_by_role("button", name="Remove from the group").click())
            pg.get_by_role("tab", name="Groups").click()
            expect(pg.get_by_text("is from LDAP: change it in the directory")).to_be_visible()
            full_shot(pg, ARTIFACTS / "41-ldap-people-groups-1280.png")
            pg.set_viewport_size(SIZES["390"])
            wait_for_app(pg)
            full_shot(pg, ARTIFACTS / "41-ldap-people-groups-390.png")
        assert not requests.foreign(ldap_server.url), requests.foreign(ldap_server.url)
    finally:
        ctx.close()
