"""Nothing before sign-in (pages/_gate.py, the middleware app.py hands st.App): no upload, no ``/_stcore``
endpoint but health; the upload ceiling follows the settings; a Content-Security-Policy on the app's HTML,
from the first response of a fresh server.

The server tests start real ``streamlit run app.py`` servers (a second or two each) and speak to them as an attacker would,
without a browser (tests/helpers/stream.py); the browser side (sign in, then upload; the CSP in
Chromium) is in tests/browser/test_browser_security.py.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.config import load_settings
from pages import _gate as webgate
from tests.helpers.app import APP, fresh_caches, use_fake_model
from tests.helpers.stream import MIB, rss_bytes, visitor

UPLOAD = 50 * MIB  # enough to see in the server's resident memory


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


# -- the pieces, in this process -------------------------------------------------------------------
def test_the_upload_ceiling_is_the_larger_of_the_file_and_the_bundle_limit(tmp_path: Path, monkeypatch):
    assert webgate.upload_limit_mb(load_settings(data_dir=tmp_path)) == 1000  # app.max_bundle_mb's default
    monkeypatch.setenv("KNOWLEDGE_INGEST__MAX_FILE_MB", "2500.5")
    assert webgate.upload_limit_mb(load_settings(data_dir=tmp_path)) == 2501
    monkeypatch.setenv("KNOWLEDGE_INGEST__MAX_FILE_MB", "5")
    monkeypatch.setenv("KNOWLEDGE_APP__MAX_BUNDLE_MB", "0.5")
    assert webgate.upload_limit_mb(load_settings(data_dir=tmp_path)) == 5


def _call(scope: dict) -> tuple[list[dict], bool]:
    """Run ``scope`` through an HttpGate around a small ASGI app; the messages sent and whether the
    inner app was reached."""
    reached, sent = [], []

    async def inner(scope, receive, send):
        reached.append(True)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", scope["_ctype"])]})
        await send({"type": "http.response.body", "body": b"x"})

    async def receive():
        raise AssertionError("the gate read the request body")

    async def send(message):
        sent.append(message)

    asyncio.run(webgate.HttpGate(inner)(scope, receive, send))
    return sent, bool(reached)


def _scope(path: str, method: str = "GET", ctype: bytes = b"text/html; charset=utf-8", client: str = "127.0.0.1") -> dict:
    return {
        "type": "http",
        "method": method,
        "path": path,
        "client": (client, 5000),
        "headers": [(b"host", b"127.0.0.1:8501")],
        "_ctype": ctype,
    }


def test_the_http_gate_refuses_uploads_of_sessions_not_let_in_without_reading_them():
    webgate.shut_out("s-out")
    sent, reached = _call(_scope("/_stcore/upload_file/s-out/f1", "PUT", b"text/plain"))
    assert not reached and sent[0]["status"] == 403
    assert b"Sign in first" in sent[1]["body"]
    webgate.let_in("s-in")
    try:
        sent, reached = _call(_scope("/_stcore/upload_file/s-in/f1", "PUT", b"text/plain"))
        assert reached and sent[0]["status"] == 200
    finally:
        webgate.shut_out("s-in")
    sent, reached = _call(_scope("/_stcore/upload_file/s-in/f1", "DELETE", b"text/plain"))
    assert not reached and sent[0]["status"] == 403


@pytest.mark.parametrize(
    "endpoint", ["metrics", "script-health-check", "agent/interact", "agent/mcp", "bidi-components/x/index.js"]
)
def test_the_http_gate_refuses_core_endpoints_with_a_password_or_shared(endpoint):
    state = webgate.STATE
    before = state.guarded
    try:
        state.guarded = True
        sent, reached = _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain"))
        assert not reached and sent[0]["status"] == 403, endpoint
        state.guarded = False  # loopback, no password: as Streamlit serves it
        assert _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain"))[1]
        # ... but a visitor from another host makes the app shared
        sent, reached = _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain", client="192.0.2.7"))
        assert not reached and sent[0]["status"] == 403
        # ... and so does a visitor through a proxy on this host (forwarding headers from loopback)
        proxied = _scope(f"/_stcore/{endpoint}", ctype=b"text/plain")
        proxied["headers"].append((b"x-forwarded-for", b"127.0.0.1"))
        sent, reached = _call(proxied)
        assert not reached and sent[0]["status"] == 403
    finally:
        state.guarded = before


@pytest.mark.parametrize("endpoint", ["health", "host-config", "stream"])
def test_the_http_gate_leaves_what_the_sign_in_page_needs(endpoint):
    webgate.STATE.guarded = True
    assert _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain"))[1]


def test_html_gets_the_content_security_policy_and_nothing_else_does():
    sent, _ = _call(_scope("/stores"))
    headers = dict(sent[0]["headers"])
    csp = headers[b"content-security-policy"].decode()
    assert "img-src 'self' data: blob:" in csp
    assert "connect-src 'self' ws://127.0.0.1:8501 wss://127.0.0.1:8501" in csp
    assert "script-src 'self' 'sha256-" in csp and "unsafe-eval" not in csp
    assert "http" not in csp.replace("ws://127.0.0.1:8501", "").replace("wss://127.0.0.1:8501", "")
    sent, _ = _call(_scope("/static/js/index.js", ctype=b"text/javascript"))
    assert b"content-security-policy" not in dict(sent[0]["headers"])
    # a Host header is echoed only when it is a host name
    assert "evil" not in webgate.content_security_policy("x; script-src evil.example")


def test_the_app_lets_a_session_in_only_once_signed_in(monkeypatch):
    from streamlit.testing.v1 import AppTest

    use_fake_model(monkeypatch)
    monkeypatch.setenv("KNOWLEDGE_APP_PASSWORD", "correct horse")
    with fresh_caches():
        at = AppTest.from_file(APP, default_timeout=60)
        webgate.shut_out("test session id")  # AppTest's session id
        at.run()
        assert "test session id" not in webgate.SESSIONS
        at.text_input[0].input("wrong")
        at.button[0].click().run()
        assert "test session id" not in webgate.SESSIONS
        at.text_input[0].input("correct horse")
        at.button[0].click().run()
        assert not at.exception, at.exception
        assert "test session id" in webgate.SESSIONS
        # (Log out -> shut out: tests/browser/test_browser_security.py; AppTest keeps session_state across
        # the clear() and rerun of Log out.)
        webgate.shut_out("test session id")


def test_the_declared_streamlit_range_is_the_tested_one():
    """requirements.txt and pyproject.toml declare the same Streamlit range, the minor version the gate
    is tested on (st.App's middleware and routes, its URL layout /_stcore/upload_file/<session>/...),
    and the installed Streamlit is in it."""
    import re

    import streamlit

    root = Path(__file__).resolve().parents[2]
    found = {
        name: re.findall(r"streamlit\s*([<>=!~][^\"\n#]*)", (root / name).read_text(encoding="utf-8"))
        for name in ("requirements.txt", "pyproject.toml")
    }
    found = {name: [v.strip() for v in values] for name, values in found.items()}
    assert found["requirements.txt"] == found["pyproject.toml"] == [">=1.67,<1.68"], found
    assert re.match(r"1\.67\.", streamlit.__version__), streamlit.__version__


def test_streamlit_run_finds_the_gated_app_in_app_py(tmp_path: Path):
    """``streamlit run app.py`` serves the st.App of app.py (the module ``app``): the gate is its first
    middleware, the cookie endpoints its routes, and the script it runs for a page view is app.py."""
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    probe = (
        "import json, app, streamlit as st\n"
        "from pages import _gate\n"
        "a = app.app\n"
        "print(json.dumps({'app': isinstance(a, st.App), 'script': str(a.script_path),\n"
        "  'middleware': [m.cls.__name__ for m in a._user_middleware],\n"
        "  'routes': [r.path for r in a._user_routes]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(root), "KNOWLEDGE_DATA_DIR": str(tmp_path / "data")},
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {
        "app": True,
        "script": str(root / "app.py"),
        "middleware": ["HttpGate"],
        "routes": ["/_knowledge/session", "/_knowledge/sign-out"],
    }, seen


# -- real servers, an attacker without a browser ---------------------------------------------------
def _serve(tmp_path: Path, address: str, **env: str):
    from tests.helpers.browser import serve

    return serve(tmp_path, address=address, env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-8", **env})


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    with _serve(tmp_path_factory.mktemp("gate-shared"), "0.0.0.0", KNOWLEDGE_APP_PASSWORD="correct horse") as srv:
        yield srv


def _grown(pid: int, before: int) -> int:
    return rss_bytes(pid) - before


def test_before_any_run_of_the_app_an_upload_is_refused_and_memory_stays(tmp_path: Path):
    """The attack of issue 24 on a fresh server: nothing has run app.py yet, the visitor asks for upload
    URLs and PUTs 50 MB. The gate is in the server from its first request (st.App's middleware): the
    upload is refused before its body is read."""
    with _serve(tmp_path, "0.0.0.0", KNOWLEDGE_APP_PASSWORD="correct horse") as server, visitor(server.url) as v:
        urls = v.upload_urls("big.bin")  # app.py never ran: Streamlit itself answers (no public hook there)
        assert urls.file_urls, urls
        before = rss_bytes(server.proc.pid)
        status, body = v.put(UPLOAD, urls.file_urls[0].upload_url)
        assert status == 403, (status, body)
        assert _grown(server.proc.pid, before) < UPLOAD // 4


def test_before_sign_in_upload_urls_and_uploads_are_refused_and_memory_stays(shared_server):
    server = shared_server
    with visitor(server.url) as v:
        v.run_app()  # the password page, as a browser opening the app gets it
        assert v.session_id
        urls = v.upload_urls("big.bin")  # handed out by Streamlit (the message has no public hook) ...
        assert urls.file_urls, urls
        before = rss_bytes(server.proc.pid)
        status, body = v.put(UPLOAD, urls.file_urls[0].upload_url)  # ... the upload itself is refused
        refusal = "Sign in first: this session may not upload until it has signed in."
        # a reset of the unread upload can drop the body; then its announced length must be the refusal's
        assert status == 403 and body in (refusal, f"<truncated: {len(refusal.encode())} bytes announced>"), body
        assert _grown(server.proc.pid, before) < UPLOAD // 4
        delete = urllib.request.Request(
            f"{server.url}/_stcore/upload_file/{v.session_id}/x",
            method="DELETE",
            headers={"X-Xsrftoken": v.xsrf, "Cookie": f"_streamlit_xsrf={v.xsrf}"},
        )
        try:
            urllib.request.urlopen(delete, timeout=30)
            raise AssertionError("DELETE was served")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
    status, body = v.put(UPLOAD)  # the upload URL built by hand from the session's own id: the same
    assert status == 403
    assert "Refused PUT /_stcore/upload_file/" in server.output()


def test_metrics_and_the_other_core_endpoints_are_refused_health_answers(shared_server):
    url = shared_server.url
    with visitor(url) as v:  # a browser opening it
        v.run_app()
    assert get(f"{url}/_stcore/health") == (200, "ok")
    assert get(f"{url}/_stcore/host-config")[0] == 200
    for endpoint in ("metrics", "script-health-check", "agent/openapi.json", "agent/interact"):
        status, body = get(f"{url}/_stcore/{endpoint}")
        assert status == 403 and "not served while the app has a password" in body, (endpoint, status, body)
    status, _ = get(url + "/")
    assert status == 200


def test_on_loopback_without_a_password_the_ceiling_follows_the_settings(tmp_path: Path):
    """No password, loopback: as before (metrics answer, a session of the app uploads), with Streamlit's
    ceiling at the larger of ingest.max_file_mb (3) and app.max_bundle_mb (2): 3 MiB."""
    with _serve(tmp_path, "127.0.0.1", KNOWLEDGE_INGEST__MAX_FILE_MB="3", KNOWLEDGE_APP__MAX_BUNDLE_MB="2") as server:
        # refused until a run of app.py has said that no password is needed (fail closed)
        assert get(f"{server.url}/_stcore/metrics")[0] == 403
        with visitor(server.url) as v:
            v.run_app()  # one run: the gate was there from the start, no reload
            assert get(f"{server.url}/_stcore/metrics")[0] == 200
            urls = v.upload_urls("a.bin", "b.bin")
            assert len(urls.file_urls) == 2 and not urls.error_msg
            assert v.put(3 * MIB - 4096, urls.file_urls[0].upload_url)[0] == 204
            status, body = v.put(3 * MIB + 4096, urls.file_urls[1].upload_url)
            assert status == 413 and ("too large" in body.lower() or body.startswith("<truncated")), (status, body)


# -- the session cookie's endpoints, through a proxy ------------------------------------------------
def _cookie(scope_extra: dict, trusted: tuple, monkeypatch) -> str:
    """The Set-Cookie of the session endpoint (a valid code) for a request shaped by ``scope_extra``."""
    from starlette.requests import Request

    monkeypatch.setattr(webgate.SETTINGS, "get", lambda: (trusted, 1000))
    code = webgate.HANDOFFS.issue("the-token", 60)
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/_knowledge/session",
        "scheme": "http",
        "query_string": f"code={code}&next=/stores".encode(),
        "client": ("127.0.0.1", 5000),
        "headers": [(b"host", b"127.0.0.1:8501")],
        **scope_extra,
    }
    endpoint = next(r for r in webgate.routes() if r.path == "/_knowledge/session").endpoint
    answer = asyncio.run(endpoint(Request(scope)))
    assert answer.status_code == 303 and answer.headers["location"] == "/stores"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("knowledge_session=the-token;") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    return cookie


def test_the_session_cookie_is_secure_behind_tls(monkeypatch):
    from knowledge.forwarded import trusted_networks

    local = trusted_networks(["127.0.0.1"])
    https_at_proxy = {
        "headers": [(b"host", b"kb.example.org"), (b"x-forwarded-proto", b"https"), (b"x-forwarded-for", b"203.0.113.9")]
    }
    assert "Secure" not in _cookie({}, (), monkeypatch)  # plain http on loopback
    assert "Secure" in _cookie({"scheme": "https"}, (), monkeypatch)  # TLS to the app itself
    assert "Secure" in _cookie(https_at_proxy, local, monkeypatch)  # TLS at a trusted proxy
    # the same headers from a proxy not trusted are not believed: the scheme is the connection's
    assert "Secure" not in _cookie(https_at_proxy, (), monkeypatch)


def test_the_gate_holds_the_upload_ceiling_itself():
    """A session let in uploads up to the settings' ceiling (here 1 MiB): a larger announced body is 413
    before it is read, a body that grows past it (no length announced) is cut at 413."""
    webgate.let_in("s-big")
    try:

        def upload(length: bytes | None, chunks: list[bytes]) -> tuple[list[dict], bool]:
            reached, sent, queue = [], [], list(chunks)

            async def inner(scope, receive, send):
                reached.append(True)
                while (await receive()).get("more_body"):
                    pass
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b""})

            async def receive():
                body = queue.pop(0)
                return {"type": "http.request", "body": body, "more_body": bool(queue)}

            async def send(message):
                sent.append(message)

            headers = [(b"host", b"127.0.0.1:8501")] + ([(b"content-length", length)] if length else [])
            scope = {
                "type": "http",
                "method": "PUT",
                "path": "/_stcore/upload_file/s-big/f1",
                "client": ("127.0.0.1", 5000),
                "headers": headers,
            }
            asyncio.run(webgate.HttpGate(inner, trusted=(), upload_mb=1)(scope, receive, send))
            return sent, bool(reached)

        sent, reached = upload(str(2 * MIB).encode(), [b"x"])
        assert not reached and sent[0]["status"] == 413 and b"too large" in sent[1]["body"]
        sent, reached = upload(None, [b"x" * MIB] * 3)  # 3 MiB streamed, nothing announced
        assert reached and sent[0]["status"] == 413
        sent, reached = upload(str(MIB - 4096).encode(), [b"x" * (MIB - 4096)])
        assert reached and sent[0]["status"] == 204
    finally:
        webgate.shut_out("s-big")


def test_the_middleware_follows_the_module_streamlit_imports_again_after_an_edit(monkeypatch):
    """Streamlit unloads the app's local modules when one of its files changes; the next run of app.py
    imports pages/_gate.py again (fresh sessions, state and hand-off codes). The middleware built
    from the first import follows the latest one, so the two sides never disagree."""
    import importlib
    import sys

    import pages

    gate = webgate.HttpGate(lambda *_: None, trusted=())
    monkeypatch.setattr(pages, "_gate", webgate)  # put back at the end, as sys.modules' entry
    monkeypatch.delitem(sys.modules, "pages._gate")
    fresh = importlib.import_module("pages._gate")
    try:
        assert fresh is not webgate and fresh.SESSIONS is not webgate.SESSIONS
        fresh.let_in("s-after-edit")
        assert gate.refusal({"type": "http", "path": "/_stcore/upload_file/s-after-edit/f1"}) is None
        fresh.shut_out("s-after-edit")
        assert gate.refusal({"type": "http", "path": "/_stcore/upload_file/s-after-edit/f1"}) is not None
    finally:
        monkeypatch.setitem(sys.modules, "pages._gate", webgate)
        monkeypatch.setattr(pages, "_gate", webgate)
