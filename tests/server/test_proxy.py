"""docs/team.md's nginx block, run by a real nginx (Debian's package, a child process with its
configuration in a temporary folder) in front of a real ``python -m knowledge serve``: a 5 MB upload
goes through (nginx's own default refuses anything over 1 MB), and the API answers a request by the
proxy's IP address once that address is in ``api.allowed_hosts`` while a name pointed at the proxy
by another site is still refused (issue 39), and without its key it refuses a request through the
proxy (a proxied request is never the local admin, issue 40); in front of a real ``streamlit run app.py`` it upgrades
the app's websocket (and does not without the block's Upgrade/Connection lines). Skipped without
nginx, failed without it under CI."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers.api import free_port

ROOT = Path(__file__).resolve().parents[2]
TEAM_DOC = ROOT / "docs" / "team.md"
#: The API's key behind the proxy (a proxied request is never the local admin: without a key, refused).
KEY = "proxy-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}

pytestmark = pytest.mark.slow


def nginx_binary() -> str:
    """nginx's path; the test is skipped without it, and fails under CI (``.ci/run`` installs it)."""
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("nginx is not installed: .ci/run installs Debian's package nginx")
        pytest.skip("nginx is not installed (apt-get install nginx)")
    return found


def documented_block() -> str:
    """The ```nginx block of docs/team.md, as written."""
    blocks = re.findall(r"```nginx\n(.*?)```", TEAM_DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "docs/team.md should hold one nginx block"
    return blocks[0]


def local_block(block: str, listen: int, api: int, app: int) -> str:
    """The documented block with this machine's ports: nginx on 127.0.0.1:``listen`` without TLS,
    both upstreams one local process each."""
    out, n = re.subn(r"listen 443 ssl;", f"listen 127.0.0.1:{listen};", block)
    assert n == 1
    out, n = re.subn(
        r"upstream knowledge_app \{[^}]*\}", f"upstream knowledge_app {{ ip_hash; server 127.0.0.1:{app}; }}", out
    )
    assert n == 1
    out, n = re.subn(r"upstream knowledge_api \{[^}]*\}", f"upstream knowledge_api {{ server 127.0.0.1:{api}; }}", out)
    assert n == 1
    return out


class Nginx:
    """nginx in the foreground (``daemon off``) with ``block`` as its one ``http`` server; stopped by
    its process id."""

    def __init__(self, exe: str, folder: Path, block: str, port: int) -> None:
        folder.mkdir(parents=True)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (folder / sub).mkdir()
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers as root write the temp folders here
        conf = folder / "nginx.conf"
        conf.write_text(
            f"daemon off;\n{user}worker_processes 1;\npid {folder}/nginx.pid;\nerror_log {folder}/error.log info;\n"
            "events { worker_connections 64; }\nhttp {\n"
            f"  access_log {folder}/access.log;\n"
            f"  client_body_temp_path {folder}/body; proxy_temp_path {folder}/proxy;\n"
            f"  fastcgi_temp_path {folder}/fastcgi; uwsgi_temp_path {folder}/uwsgi; scgi_temp_path {folder}/scgi;\n"
            f"{block}\n}}\n",
            encoding="utf-8",
        )
        self.folder = folder
        self.proc = subprocess.Popen(
            [exe, "-p", str(folder), "-e", str(folder / "error.log"), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
                    self.stop()
                    raise AssertionError(f"nginx did not start: {err}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful: the workers finish and leave
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def api_server(tmp_path) -> Iterator[int]:
    """``python -m knowledge serve`` on 127.0.0.1 with :data:`KEY`, the proxy's address in ``api.allowed_hosts``."""
    with api_process(tmp_path, KEY) as port:
        yield port


@contextlib.contextmanager
def api_process(tmp_path: Path, key: str | None, allowed_hosts: str = "127.0.0.1") -> Iterator[int]:
    """``python -m knowledge serve`` on 127.0.0.1 (with ``key`` as KNOWLEDGE_API_KEY, or none), answering
    ``allowed_hosts`` (``api.allowed_hosts``) besides its own address."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        PYTHONPATH=str(ROOT),
        KNOWLEDGE_DATA_DIR=str(tmp_path / "data"),
        KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
        KNOWLEDGE_API__ALLOWED_HOSTS=allowed_hosts,
        **({"KNOWLEDGE_API_KEY": key} if key else {}),
    )
    log = tmp_path / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "knowledge", "serve", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                headers = AUTH if key else {}
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", headers=headers, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the API did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        yield port
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


@pytest.mark.processes
def test_the_documented_proxy_passes_a_5_mb_upload_and_a_request_by_ip(tmp_path, api_server):
    exe = nginx_binary()
    block = documented_block()
    assert re.search(r"location /v1/ \{[^}]*client_max_body_size", block), "the /v1/ location needs its own limit"
    listen = free_port()
    proxy = Nginx(exe, tmp_path / "nginx", local_block(block, listen, api_server, free_port()), listen)
    data = os.urandom(5_000_000)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{listen}", timeout=120) as client:
            # without the key: the documented block says who the visitor is, so it is not the local admin
            assert client.get("/v1/models").status_code == 401
            client.headers.update(AUTH)
            up = client.post(
                "/v1/files", data={"purpose": "assistants"}, files={"file": ("big.bin", data, "application/octet-stream")}
            )
            assert up.status_code == 200, up.text
            assert up.json()["bytes"] == len(data)
            got = client.get(f"/v1/files/{up.json()['id']}/content")
            assert got.status_code == 200
            assert hashlib.sha256(got.content).hexdigest() == hashlib.sha256(data).hexdigest()
            # the proxy passes the Host typed: its IP address (listed in api.allowed_hosts) is answered ...
            assert client.get("/v1/files").json()["data"][0]["id"] == up.json()["id"]
            # ... an address not listed, and a DNS name another site points at the proxy, are not
            for host in ("203.0.113.9", "evil.example"):
                refused = client.get("/v1/files", headers={"Host": host})
                assert refused.status_code == 421
                assert "api.allowed_hosts" in refused.json()["error"]["message"]
    finally:
        proxy.stop()

    # the same block without its /v1/ limit: nginx's 1 MB default refuses the upload itself
    bare = re.sub(r"(location /v1/ \{[^}]*?)client_max_body_size [^;]*;", r"\1", block)
    assert bare != block
    listen = free_port()
    proxy = Nginx(exe, tmp_path / "nginx-default", local_block(bare, listen, api_server, free_port()), listen)
    try:
        refused = httpx.post(
            f"http://127.0.0.1:{listen}/v1/files",
            data={"purpose": "assistants"},
            headers=AUTH,
            files={"file": ("big.bin", data, "application/octet-stream")},
            timeout=120,
        )
        assert refused.status_code == 413 and "nginx" in refused.text
    finally:
        proxy.stop()


def test_a_keyless_api_behind_the_documented_proxy_on_its_host_is_not_open_to_its_visitors(tmp_path):
    """An API on 127.0.0.1 without a key and without accounts acts as the local admin for every request:
    through nginx on the same host (the documented block's X-Forwarded-* lines) it answers none."""
    exe = nginx_binary()
    with api_process(tmp_path, None) as api:
        assert httpx.get(f"http://127.0.0.1:{api}/v1/models", timeout=30).status_code == 200  # on this computer
        listen = free_port()
        proxy = Nginx(exe, tmp_path / "nginx", local_block(documented_block(), listen, api, free_port()), listen)
        try:
            refused = httpx.get(f"http://127.0.0.1:{listen}/v1/models", timeout=30)
            assert refused.status_code == 401 and "not through a proxy" in refused.json()["error"]["message"]
        finally:
            proxy.stop()


@pytest.mark.processes
def test_the_documented_proxy_passes_on_the_host_with_its_port(tmp_path):
    """The block passes the ``Host`` the client sent, port included (``$http_host``; ``$host`` drops
    it): an API whose ``api.allowed_hosts`` names the proxy's address with its port answers through it."""
    exe = nginx_binary()
    block = documented_block()
    assert "Host $host" not in block, "the block passes $http_host (the port kept), not $host"
    listen = free_port()
    with api_process(tmp_path, KEY, allowed_hosts=f"127.0.0.1:{listen}") as api:
        proxy = Nginx(exe, tmp_path / "nginx", local_block(block, listen, api, free_port()), listen)
        try:
            got = httpx.get(f"http://127.0.0.1:{listen}/v1/models", headers=AUTH, timeout=30)
            assert got.status_code == 200, got.text
            other = httpx.get(f"http://127.0.0.1:{listen}/v1/models", headers={**AUTH, "Host": "127.0.0.1:9"}, timeout=30)
            assert other.status_code == 421  # the same address on another port is not the one listed
        finally:
            proxy.stop()


def websocket_status(port: int, path: str = "/_stcore/stream") -> str:
    """The status line a websocket handshake (RFC 6455) to 127.0.0.1:``port`` gets."""
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(1024)
            if not chunk:
                break
            head += chunk
    return head.split(b"\r\n", 1)[0].decode(errors="replace")


@pytest.fixture
def app_server(tmp_path) -> Iterator[int]:
    """``streamlit run app.py`` on 127.0.0.1 (the README's command, headless)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        PYTHONPATH=str(ROOT), KNOWLEDGE_DATA_DIR=str(tmp_path / "app-data"), KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64"
    )
    log = tmp_path / "streamlit.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the app did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.processes
def test_the_documented_proxy_passes_the_app_websocket(tmp_path, app_server):
    exe = nginx_binary()
    block = documented_block()
    listen = free_port()
    proxy = Nginx(exe, tmp_path / "nginx", local_block(block, listen, free_port(), app_server), listen)
    try:
        assert httpx.get(f"http://127.0.0.1:{listen}/_stcore/health", timeout=30).text == "ok"
        assert websocket_status(listen).split()[1] == "101"  # Streamlit's session socket is upgraded
    finally:
        proxy.stop()
    # without the Upgrade and Connection lines nginx talks plain HTTP/1.0 upstream: no websocket
    bare = re.sub(r"\s*proxy_set_header (Upgrade|Connection) [^;]*;[^\n]*", "", block)
    listen = free_port()
    proxy = Nginx(exe, tmp_path / "nginx-bare", local_block(bare, listen, free_port(), app_server), listen)
    try:
        assert websocket_status(listen).split()[1] != "101"
    finally:
        proxy.stop()
