"""The pages issue 39's deployment trial found wrong, in a real browser: Home shows the server's
folders (data folder, model cache) to an admin and not to a member; a team app (shared catalog,
reachable from other hosts) with no account sets up its first admin at the terminal -- the page
names the command, no set-up token is made -- and signs that admin in. Screenshots at 1280x800 and
390x844: ``test-artifacts/browser/39-*.png``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import ARTIFACTS, Requests, Server, explained, full_shot, open_context, serve, wait_for_app
from tests.helpers.env import isolate

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FAKE = "fake/hash-8"
PW = "a long enough password"
SIZES = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def accounts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The app with admin root and member ana made in its catalog before it starts."""
    from knowledge.config import load_settings
    from knowledge.system import System

    base = tmp_path_factory.mktemp("browser-deploy")
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, base)
        mp.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", FAKE)
        system = System(load_settings(data_dir=base / "data"))
        try:
            system.people.set_up_admin("root", PW, "Root Admin")
            system.people.accounts.create("ana", PW, display_name="Ana Lima")
        finally:
            system.close()
    with serve(base, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE}) as srv:
        yield srv


def _sign_in(pg, server: Server, username: str) -> None:
    from playwright.sync_api import expect

    pg.goto(server.url)
    pg.get_by_role("textbox", name="Username").fill(username)  # waits for the form
    pg.get_by_role("textbox", name="Password").fill(PW)
    pg.get_by_role("button", name="Sign in").click()
    expect(pg.get_by_role("button", name="Sign out")).to_be_visible(timeout=60_000)
    wait_for_app(pg)


def test_home_shows_the_server_folders_to_an_admin_only(browser, accounts_server: Server):
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    data = str(accounts_server.data_dir)
    requests = Requests()
    for who, label in (("ana", "Ana Lima (member)"), ("root", "Root Admin (admin)")):
        ctx, pg = open_context(browser, SIZES["1280"], requests)
        try:
            with explained(pg, accounts_server, ARTIFACTS):
                _sign_in(pg, accounts_server, who)
                expect(pg.get_by_text(f"Signed in as {label}")).to_be_visible()
                pg.get_by_role("heading", name="Embedding model").wait_for()
                text = pg.locator('[data-testid="stMain"]').inner_text()
                if who == "ana":
                    assert "Data folder" not in text and data not in text and "cache:" not in text, text
                    assert FAKE in text
                else:
                    assert "Data folder" in text and data in text and "cache:" in text, text
                for size, viewport in SIZES.items():
                    pg.set_viewport_size(viewport)
                    wait_for_app(pg)
                    full_shot(pg, ARTIFACTS / f"39-home-{who}-{size}.png")
        finally:
            ctx.close()
    assert requests.foreign(accounts_server.url) == []


def test_a_team_app_sets_up_its_first_admin_at_the_terminal(browser, tmp_path: Path, pgvector_settings, monkeypatch):
    from playwright.sync_api import expect
    from psycopg.conninfo import conninfo_to_dict

    from knowledge.cli import main

    info = conninfo_to_dict(pgvector_settings().vector_store.url)  # this test's database, over TCP
    url = f"postgresql://{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"
    env = {
        "KNOWLEDGE_CATALOG__URL": url,
        "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
        "KNOWLEDGE_VECTOR_STORE__URL": url,
        "KNOWLEDGE_EMBEDDINGS__MODEL": FAKE,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serve(tmp_path, address="0.0.0.0", env_extra=env) as srv:
        ctx, pg = open_context(browser, SIZES["1280"], Requests())
        try:
            with explained(pg, srv, ARTIFACTS):
                pg.goto(srv.url)
                expect(pg.get_by_text("python -m knowledge users add NAME --role admin")).to_be_visible(timeout=60_000)
                wait_for_app(pg)
                assert pg.get_by_label("Set-up token").count() == 0
                for size, viewport in SIZES.items():
                    pg.set_viewport_size(viewport)
                    wait_for_app(pg)
                    full_shot(pg, ARTIFACTS / f"39-team-set-up-{size}.png")
                pg.set_viewport_size(SIZES["1280"])
                for key, value in env.items():
                    monkeypatch.setenv(key, value)
                monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path / "cli"))
                monkeypatch.setattr("sys.stdin", __import__("io").StringIO(PW + "\n"))
                assert main(["users", "add", "root", "--role", "admin", "--password-stdin"]) == 0
                pg.get_by_role("button", name="I have made it: sign in").click()
                _sign_in(pg, srv, "root")
                expect(pg.get_by_text("Signed in as root (admin)")).to_be_visible()
            assert "first-run set-up token" not in srv.output()
        finally:
            ctx.close()
