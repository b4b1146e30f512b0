"""Who can reach the app, checked on real servers: ``streamlit run app.py`` as the README says listens on
127.0.0.1 only; started on 0.0.0.0 without a password it serves only the "set a password" page, on
every URL; with a password, a wrong one is refused, the right one lets in, and logging out locks again.

Screenshots go to ``test-artifacts/browser/security/``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_browser import ARTIFACTS, Server, browser, explained, serve, shot, wait_for_app

pytestmark = [pytest.mark.browser]
__all__ = ["browser"]  # the fixture, imported so pytest finds it here

# A deep link first: on a fresh server Streamlit runs the first request by its older pages-folder rules,
# where a page must still pass through app.py's gate (pages._ui.app_workbench).
PAGES = ["stores", "", "search", "files", "chat", "memory", "settings"]


@pytest.fixture(scope="module")
def sec_artifacts() -> Path:
    folder = ARTIFACTS / "security"
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.png"):
        old.unlink()
    return folder


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a socket listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A = LISTEN
                continue
            raw = bytes.fromhex(addr_hex)
            # /proc writes each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            family = socket.AF_INET if width == 8 else socket.AF_INET6
            found.add(socket.inet_ntop(family, raw))
    return found


def _port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def test_the_readme_command_listens_on_loopback_only(tmp_path: Path):
    with serve(tmp_path, address=None) as server:  # no --server.address: the project's config decides
        addresses = listening_addresses(_port(server))
    assert addresses, "nothing listens on the app's port"
    assert addresses <= {"127.0.0.1", "::1"}, addresses


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("shared-no-password"), address="0.0.0.0") as srv:
        yield srv


def test_shared_without_a_password_shows_only_how_to_set_one(browser, open_server: Server, sec_artifacts: Path):
    assert "0.0.0.0" in listening_addresses(_port(open_server)) or "::" in listening_addresses(_port(open_server))
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    try:
        with explained(pg, open_server, sec_artifacts):
            for path in PAGES:
                pg.goto(f"{open_server.url}/{path}")
                wait_for_app(pg)
                body = pg.locator('[data-testid="stMain"]').inner_text()
                assert "no password is set" in body, (path, body[:500])
                assert "KNOWLEDGE_APP_PASSWORD" in body
                # nothing of the product: no page links, no upload, no search box, no store list
                assert pg.locator('[data-testid="stFileUploader"]').count() == 0
                assert pg.locator('[data-testid="stSidebarNav"]').count() == 0
                for word in ("Vector stores", "Search playground", "Drop files"):
                    assert word not in body
            shot(pg, sec_artifacts, "10-shared-without-password.png")
            pg.set_viewport_size({"width": 390, "height": 844})
            shot(pg, sec_artifacts, "11-shared-without-password-390.png")
    finally:
        context.close()


@pytest.fixture(scope="module")
def password_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(tmp_path_factory.mktemp("shared-password"), address="0.0.0.0",
               env_extra={"KNOWLEDGE_APP_PASSWORD": "correct horse battery"}) as srv:
        yield srv


def test_with_a_password_wrong_is_refused_right_lets_in_and_logout_locks(browser, password_server: Server,
                                                                          sec_artifacts: Path):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    server = password_server
    try:
        with explained(pg, server, sec_artifacts):
            pg.goto(f"{server.url}/stores")  # a deep link waits behind the sign-in too
            wait_for_app(pg)
            main = pg.locator('[data-testid="stMain"]')
            expect(main.get_by_text("Password", exact=True)).to_be_visible()
            assert "Vector stores" not in main.inner_text()
            shot(pg, sec_artifacts, "20-sign-in.png")

            box = pg.locator("input[type=password]")
            box.fill("wrong guess")
            pg.get_by_role("button", name="Sign in").click()
            expect(main.get_by_text("Wrong password.")).to_be_visible(timeout=30_000)
            assert pg.locator('[data-testid="stFileUploader"]').count() == 0
            shot(pg, sec_artifacts, "21-wrong-password.png")

            box = pg.locator("input[type=password]")
            box.fill("correct horse battery")
            pg.get_by_role("button", name="Sign in").click()
            expect(pg.get_by_role("button", name="Log out")).to_be_visible(timeout=60_000)
            wait_for_app(pg)
            expect(pg.locator('[data-testid="stSidebarNav"]')).to_be_visible()
            shot(pg, sec_artifacts, "22-signed-in.png")

            pg.get_by_role("button", name="Log out").click()
            expect(pg.get_by_role("button", name="Sign in")).to_be_visible(timeout=30_000)
            assert pg.locator('[data-testid="stSidebarNav"]').count() == 0
            shot(pg, sec_artifacts, "23-logged-out.png")
    finally:
        context.close()
