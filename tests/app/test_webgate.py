"""Nothing before sign-in (knowledge/webgate.py): no upload URL, no upload, no ``/_stcore`` endpoint but
health; the upload ceiling follows the settings; a Content-Security-Policy on the app's HTML.

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

from knowledge import webgate
from knowledge.config import load_settings
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
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", scope["_ctype"])]})
        await send({"type": "http.response.body", "body": b"x"})

    async def receive():
        raise AssertionError("the gate read the request body")

    async def send(message):
        sent.append(message)

    asyncio.run(webgate.HttpGate(inner)(scope, receive, send))
    return sent, bool(reached)


def _scope(path: str, method: str = "GET", ctype: bytes = b"text/html; charset=utf-8",
           client: str = "127.0.0.1") -> dict:
    return {"type": "http", "method": method, "path": path, "client": (client, 5000),
            "headers": [(b"host", b"127.0.0.1:8501")], "_ctype": ctype}


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


@pytest.mark.parametrize("endpoint", ["metrics", "script-health-check", "agent/interact", "agent/mcp",
                                      "bidi-components/x/index.js"])
def test_the_http_gate_refuses_core_endpoints_with_a_password_or_shared(endpoint):
    from streamlit.runtime.app_session import AppSession

    state = AppSession._knowledge_gate
    before = state.password_set
    try:
        state.password_set = True
        sent, reached = _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain"))
        assert not reached and sent[0]["status"] == 403, endpoint
        state.password_set = False  # loopback, no password: as Streamlit serves it
        assert _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain"))[1]
        # ... but a visitor from another host makes the app shared
        sent, reached = _call(_scope(f"/_stcore/{endpoint}", ctype=b"text/plain", client="192.0.2.7"))
        assert not reached and sent[0]["status"] == 403
    finally:
        state.password_set = before


@pytest.mark.parametrize("endpoint", ["health", "host-config", "stream"])
def test_the_http_gate_leaves_what_the_sign_in_page_needs(endpoint):
    from streamlit.runtime.app_session import AppSession

    AppSession._knowledge_gate.password_set = True
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


@pytest.mark.parametrize("password, stops", [("correct horse", True), (None, False)])
def test_a_streamlit_version_the_gate_does_not_know_stops_an_app_with_a_password(monkeypatch, password, stops):
    import streamlit
    from streamlit.testing.v1 import AppTest

    use_fake_model(monkeypatch)
    if password:
        monkeypatch.setenv("KNOWLEDGE_APP_PASSWORD", password)
    monkeypatch.setattr(streamlit, "__version__", "9.1.0")
    with fresh_caches():
        at = AppTest.from_file(APP, default_timeout=60)
        at.run()
        assert not at.exception, at.exception
        errors = " ".join(e.value for e in at.error)
        if stops:
            assert "Streamlit 9.1.0 is not a version the sign-in gate" in errors
            assert not at.text_input  # no sign-in form: nothing is served
        else:  # loopback, no password: nothing to guard, the app runs as before
            assert not errors
            assert any("Stores" in m.label for m in at.metric)


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
    """The attack of issue 24 on a fresh server: nothing has run app.py yet (so its gate is not in the
    server), the visitor asks for upload URLs and PUTs 50 MB. Streamlit's own ceiling, 0 in the
    project's config until the gate is in, refuses it."""
    with _serve(tmp_path, "0.0.0.0", KNOWLEDGE_APP_PASSWORD="correct horse") as server, \
            visitor(server.url) as v:
        urls = v.upload_urls("big.bin")  # app.py never ran: Streamlit itself answers
        assert urls.file_urls, urls
        before = rss_bytes(server.proc.pid)
        status, body = v.put(UPLOAD, urls.file_urls[0].upload_url)
        assert status == 413, (status, body)
        assert _grown(server.proc.pid, before) < UPLOAD // 4


def test_before_sign_in_upload_urls_and_uploads_are_refused_and_memory_stays(shared_server):
    server = shared_server
    with visitor(server.url) as v:
        v.run_app()  # the password page, as a browser opening the app gets it
        assert v.session_id
        urls = v.upload_urls("big.bin")
        assert not urls.file_urls and "Sign in first" in urls.error_msg, urls
        before = rss_bytes(server.proc.pid)
        status, body = v.put(UPLOAD)  # the upload URL built by hand from the session's own id
        refusal = "Sign in first: this session may not upload until it has signed in."
        # a reset of the unread upload can drop the body; then its announced length must be the refusal's
        assert status == 403 and body in (refusal, f"<truncated: {len(refusal.encode())} bytes announced>"), body
        assert _grown(server.proc.pid, before) < UPLOAD // 4
        delete = urllib.request.Request(f"{server.url}/_stcore/upload_file/{v.session_id}/x", method="DELETE",
                                        headers={"X-Xsrftoken": v.xsrf, "Cookie": f"_streamlit_xsrf={v.xsrf}"})
        try:
            urllib.request.urlopen(delete, timeout=30)
            raise AssertionError("DELETE was served")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
    assert "Refused upload URLs to session" in server.output()


def test_metrics_and_the_other_core_endpoints_are_refused_health_answers(shared_server):
    url = shared_server.url
    with visitor(url) as v:  # the gate is installed by the app's first run (a browser opening it)
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
        assert get(f"{server.url}/_stcore/metrics")[0] == 200
        with visitor(server.url) as v:
            v.run_app()  # the server's first run puts the gate in and has the browser load the page again
            v.run_app()
            urls = v.upload_urls("a.bin", "b.bin")
            assert len(urls.file_urls) == 2 and not urls.error_msg
            assert v.put(3 * MIB - 4096, urls.file_urls[0].upload_url)[0] == 204
            status, body = v.put(3 * MIB + 4096, urls.file_urls[1].upload_url)
            assert status == 413 and ("too large" in body.lower() or body.startswith("<truncated")), (status, body)
