"""The app on 127.0.0.1 behind a real reverse proxy on the same host (Debian's nginx with docs/team.md's
block, as tests/server/test_proxy.py runs it): the proxy's visitor is never the local admin (issue 40).

* With accounts, a visitor through the proxy is asked to sign in.
* Without accounts or a password, and with the proxy trusted (``server.trusted_proxies``), a visitor
  through the proxy gets the set-up page ("reachable from other computers ... shows nothing": the
  set-up token form), not the home page, the menu or People -> Turn on accounts; the same browser
  straight at 127.0.0.1 is the local admin, as before.
* The first page of a fresh server carries its Content-Security-Policy on the first response.

Screenshots at 1280x800 and 390x844: ``test-artifacts/browser/proxy/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.api import free_port
from tests.helpers.browser import ARTIFACTS, Server, explained, serve, shot, wait_for_app
from tests.helpers.env import REPO
from tests.server.test_proxy import Nginx, documented_block, local_block, nginx_binary

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FAKE = "fake/hash-8"
PW = "a long enough password"
SIZES = {"1280": {"width": 1280, "height": 800}, "390": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def proxy_artifacts() -> Path:
    folder = ARTIFACTS / "proxy"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


def _behind_nginx(server: Server, folder: Path) -> tuple[Nginx, str]:
    """nginx with the documented block in front of ``server`` (its app upstream); its URL."""
    listen = free_port()
    app_port = int(server.url.rsplit(":", 1)[1])
    return Nginx(
        nginx_binary(), folder, local_block(documented_block(), listen, free_port(), app_port), listen
    ), f"http://127.0.0.1:{listen}"


def _add_admin(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(PYTHONPATH=str(REPO), KNOWLEDGE_DATA_DIR=str(data_dir), KNOWLEDGE_EMBEDDINGS__MODEL=FAKE)
    done = subprocess.run(
        [sys.executable, "-m", "knowledge", "users", "add", "root", "--role", "admin", "--password-stdin"],
        input=PW + "\n",
        text=True,
        capture_output=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def accounts_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("proxy-accounts")
    _add_admin(base / "data")
    with serve(base, address="127.0.0.1", env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE}) as srv:
        yield srv


@pytest.fixture(scope="module")
def open_local_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """No account, no password, the proxy on this host trusted."""
    with serve(
        tmp_path_factory.mktemp("proxy-open"),
        address="127.0.0.1",
        env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": FAKE, "KNOWLEDGE_SERVER__TRUSTED_PROXIES": "127.0.0.1,::1"},
    ) as srv:
        yield srv


def test_the_first_page_of_a_fresh_server_carries_its_csp(open_local_server: Server):
    """The gate is in front of the first request (st.App's middleware): no page without its policy, no
    reload. (The module's other tests come later: nothing has run app.py in this server yet.)"""
    request = urllib.request.Request(open_local_server.url + "/", headers={"Accept": "text/html"})
    with urllib.request.urlopen(request, timeout=60) as resp:
        csp = resp.headers["Content-Security-Policy"]
        html = resp.read().decode()
    assert csp and "frame-ancestors 'self'" in csp and "script-src 'self' 'sha256-" in csp
    assert "BACKEND_BASE_URL" in html and 'http-equiv="refresh"' not in html


def test_with_accounts_a_visitor_through_the_proxy_is_asked_to_sign_in(
    browser, accounts_server: Server, proxy_artifacts: Path, tmp_path: Path
):
    from playwright.sync_api import expect

    proxy, url = _behind_nginx(accounts_server, tmp_path / "nginx")
    try:
        for size, viewport in SIZES.items():
            ctx = browser.new_context(viewport=viewport)
            pg = ctx.new_page()
            pg.set_default_timeout(60_000)
            try:
                with explained(pg, accounts_server, proxy_artifacts):
                    pg.goto(url + "/people")  # a deep link to the admin's page
                    wait_for_app(pg)
                    main = pg.locator('[data-testid="stMain"]')
                    expect(main.get_by_role("textbox", name="Username")).to_be_visible()
                    expect(main.get_by_role("button", name="Sign in")).to_be_visible()
                    assert pg.locator('[data-testid="stSidebarNav"]').count() == 0
                    assert "Turn on accounts" not in pg.locator("body").inner_text()
                    shot(pg, proxy_artifacts, f"10-accounts-through-proxy-{size}.png")
            finally:
                ctx.close()
        # Streamlit's own endpoints stay shut through the proxy, too
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + "/_stcore/metrics", timeout=30)
        assert refused.value.code == 403
    finally:
        proxy.stop()


def test_a_trusted_proxy_s_visitor_is_not_the_local_admin_without_accounts(
    browser, open_local_server: Server, proxy_artifacts: Path, tmp_path: Path
):
    from playwright.sync_api import expect

    server = open_local_server
    proxy, url = _behind_nginx(server, tmp_path / "nginx")
    try:
        for size, viewport in SIZES.items():
            ctx = browser.new_context(viewport=viewport)
            pg = ctx.new_page()
            pg.set_default_timeout(60_000)
            try:
                with explained(pg, server, proxy_artifacts):
                    pg.goto(url + "/people")
                    wait_for_app(pg)
                    main = pg.locator('[data-testid="stMain"]')
                    expect(main).to_contain_text("has no account and no password yet", timeout=60_000)
                    expect(main.get_by_text("Set-up token", exact=False).first).to_be_visible()
                    body = pg.locator("body").inner_text()
                    assert "Turn on accounts" not in body and "Vector stores" not in body
                    assert pg.locator('[data-testid="stSidebarNav"]').count() == 0
                    shot(pg, proxy_artifacts, f"20-open-app-through-trusted-proxy-{size}.png")
            finally:
                ctx.close()
        # the same app straight at 127.0.0.1 (no proxy): the local admin, as before
        ctx = browser.new_context(viewport=SIZES["1280"])
        pg = ctx.new_page()
        pg.set_default_timeout(60_000)
        try:
            with explained(pg, server, proxy_artifacts):
                pg.goto(server.url)
                wait_for_app(pg)
                expect(pg.locator('[data-testid="stSidebarNav"]')).to_contain_text("People")
                shot(pg, proxy_artifacts, "21-open-app-directly-1280.png")
        finally:
            ctx.close()
    finally:
        proxy.stop()
