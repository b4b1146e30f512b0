"""The WebDAV server of the tests: WsgiDAV (pip ``wsgidav``) on cheroot, in a thread of the test process,
on a free loopback port, serving a folder of the test's with HTTP basic authentication (one user,
:data:`DAV_USER` / :data:`DAV_PASSWORD`). Its ETags are WsgiDAV's file-system provider's,
``"<inode>-<mtime in whole seconds>-<size>"``, so :func:`edit` moves a file's modification time on by
a second at least.

:class:`DavServer` can be stopped and started again on the same port ("the server is down"), told to
refuse ``PROPFIND`` with ``Depth: infinity`` the way Nextcloud (sabre/dav) and IIS do (RFC 4918
section 9.1: 403 with the ``DAV:propfind-finite-depth`` precondition), to answer one path with a
status of the test's choosing (a 423 Locked, as SharePoint answers for a checked-out file), and it
keeps the requests it saw (method, path, ``Depth``). :func:`populate` writes N small files in
folders of 100 (the benchmark syncs 10,000).

Under CI=true a server that cannot start fails the test (:func:`tests.helpers.env.missing_server`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

#: The one account of the tests' server; never a real one.
DAV_USER, DAV_PASSWORD = "ana", "dav-pw-NEVER-in-logs-5b1e"

_FINITE_DEPTH_BODY = b'<?xml version="1.0" encoding="utf-8"?>\n<D:error xmlns:D="DAV:"><D:propfind-finite-depth/></D:error>'


class DavServer:
    """A WsgiDAV server serving :attr:`root` at :attr:`url` (``http://127.0.0.1:<port>/``).

    Attributes:
        root: the folder served (the server's root collection).
        port: its loopback port (kept across :meth:`stop` and :meth:`start`).
        requests: ``(method, path, depth)`` of every request seen, the path percent-decoded
            (``"/Team/a b.txt"``), ``depth`` the ``Depth`` header or ``None``.
        refuse_infinity: when true, ``PROPFIND`` with ``Depth: infinity`` (or none, which means
            infinity) is answered 403 ``DAV:propfind-finite-depth``.
        answer: a decoded path -> an HTTP status answered instead of serving it (``{"/Team/a.txt": 423}``).
        redirect: a decoded path -> a ``Location`` answered with 301 instead of serving it.
        hook: called with ``(method, path)`` before each request is served (from the server's thread).
    """

    def __init__(
        self,
        root: Path,
        port: int,
        *,
        user: str = DAV_USER,
        password: str = DAV_PASSWORD,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.root, self.port, self.tls = root, port, tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/"
        self.user, self.password = user, password
        self.requests: list[tuple[str, str, str | None]] = []
        self.refuse_infinity = False
        self.answer: dict[str, int] = {}
        self.redirect: dict[str, str] = {}
        self.hook: Callable[[str, str], None] | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._down = threading.Event()

    # -- URLs and files --------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the requests, answers, redirects, hook and refusal (between tests sharing the server)."""
        self.requests.clear()
        self.refuse_infinity = False
        self.answer.clear()
        self.redirect.clear()
        self.hook = None

    def folder_url(self, rel: str) -> str:
        """The URL of the collection ``rel`` (``"t1/Team"``), percent-encoded, with a trailing slash."""
        rel = rel.strip("/")
        return self.url + (quote(rel) + "/" if rel else "")

    def move(self, src: str, dst: str) -> None:
        """``MOVE`` the resource ``src`` to ``dst`` (paths below the root, decoded; a folder with its
        files) as a WebDAV client does (RFC 4918 section 9.9)."""
        self._dav("MOVE", src, headers={"Destination": self.url + quote(dst.strip("/")), "Overwrite": "F"})

    def mkcol(self, rel: str) -> None:
        """``MKCOL`` the folder ``rel`` (RFC 4918 section 9.3; its parent must exist)."""
        self._dav("MKCOL", rel)

    def delete(self, rel: str) -> None:
        """``DELETE`` the resource ``rel`` (RFC 4918 section 9.6)."""
        self._dav("DELETE", rel)

    def _dav(self, method: str, rel: str, headers: dict[str, str] | None = None) -> None:
        import httpx

        url = self.url + quote(rel.strip("/"))
        r = httpx.request(method, url, headers=headers or {}, auth=(self.user, self.password), trust_env=False, timeout=30)
        if r.status_code not in (200, 201, 204):
            raise AssertionError(f"{method} {rel}: HTTP {r.status_code}")

    # -- running ---------------------------------------------------------------------------------------
    def start(self) -> None:
        """Serve (again) on :attr:`port`; returns once the port answers."""
        from cheroot import wsgi
        from wsgidav.wsgidav_app import WsgiDAVApp

        config = {
            "host": "127.0.0.1",
            "port": self.port,
            "provider_mapping": {"/": str(self.root)},
            "http_authenticator": {
                "domain_controller": None,  # WsgiDAV's SimpleDomainController, from simple_dc below
                "accept_basic": True,
                "accept_digest": False,
                "default_to_digest": False,
            },
            "simple_dc": {"user_mapping": {"*": {self.user: {"password": self.password}}}},
            "verbose": 1,
            "logging": {"enable": False},
            "dir_browser": {"enable": False},
        }
        app = WsgiDAVApp(config)
        self._down.clear()
        self._server = wsgi.Server(("127.0.0.1", self.port), self._filter(app), numthreads=8, timeout=30)
        if self.tls is not None:
            from cheroot.ssl.builtin import BuiltinSSLAdapter

            self._server.ssl_adapter = BuiltinSSLAdapter(str(self.tls[0]), str(self.tls[1]))
        self._server.prepare()
        self._thread = threading.Thread(target=self._server.serve, name=f"webdav-{self.port}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving: connections to :attr:`port` are refused until :meth:`start`."""
        self._down.set()
        if self._server is not None:
            self._server.stop()
            self._server = None
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None

    def stop_soon(self) -> None:
        """From a :attr:`hook` (the server's own thread, which :meth:`stop` would wait for): answer 503
        from now on, and stop in another thread."""
        self._down.set()
        threading.Thread(target=self.stop, name=f"webdav-stop-{self.port}", daemon=True).start()

    def wait_stopped(self, timeout: float = 30) -> None:
        """Wait for a :meth:`stop_soon` to finish."""
        deadline = time.monotonic() + timeout
        while self._server is not None and time.monotonic() < deadline:
            time.sleep(0.02)

    # -- the filter in front of WsgiDAV ----------------------------------------------------------------
    def _filter(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            method = environ["REQUEST_METHOD"]
            # PEP 3333: PATH_INFO is the decoded path's bytes as latin-1.
            path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")
            depth = environ.get("HTTP_DEPTH")
            self.requests.append((method, path, depth))
            if self.hook is not None:
                self.hook(method, path)
            if self._down.is_set():
                start_response("503 Service Unavailable", [("Content-Length", "0")])
                return [b""]
            if self.refuse_infinity and method == "PROPFIND" and depth in (None, "infinity"):
                start_response(
                    "403 Forbidden",
                    [("Content-Type", "application/xml; charset=utf-8"), ("Content-Length", str(len(_FINITE_DEPTH_BODY)))],
                )
                return [_FINITE_DEPTH_BODY]
            if path in self.redirect:
                start_response("301 Moved Permanently", [("Location", self.redirect[path]), ("Content-Length", "0")])
                return [b""]
            status = self.answer.get(path)
            if status is not None:
                start_response(f"{status} Test Answer", [("Content-Length", "0")])
                return [b""]
            return app(environ, start_response)

        return serve


@contextlib.contextmanager
def dav_server(root: Path, *, tls: bool = False) -> Iterator[DavServer]:
    """A :class:`DavServer` serving ``root`` until the block ends; with ``tls``, HTTPS with a
    self-signed certificate for 127.0.0.1 (no machine trusts it). Skips the test where WsgiDAV or
    cheroot is missing or does not start, fails under CI=true."""
    from tests.helpers.api import free_port
    from tests.helpers.env import missing_server

    try:
        import cheroot.wsgi  # noqa: F401
        import wsgidav.wsgidav_app  # noqa: F401
    except ImportError as exc:
        missing_server("The WebDAV test server (WsgiDAV)", f"{exc} (pip install wsgidav cheroot)")
    # WsgiDAV logs a warning for basic authentication without TLS, once per app; the tests' server is loopback.
    logging.getLogger("wsgidav").setLevel(logging.ERROR)
    root.mkdir(parents=True, exist_ok=True)
    cert = _self_signed(root.parent / f"{root.name}-tls") if tls else None
    server = DavServer(root, free_port(), tls=cert)
    try:
        server.start()
    except OSError as exc:
        missing_server("The WebDAV test server (WsgiDAV)", f"it did not start: {exc}")
    try:
        yield server
    finally:
        server.stop()


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """(certificate, key) files: a self-signed certificate for 127.0.0.1, valid for a day."""
    import ipaddress
    from datetime import UTC, datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(hours=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    cert_file, key_file = folder / "server.pem", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_file, key_file


def write(path: Path, data: bytes | str) -> Path:
    """Write a file (its folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def edit(path: Path, data: bytes | str) -> Path:
    """Rewrite a file so its ETag changes even with the same size: WsgiDAV's ETag holds the modification
    time in whole seconds, which is moved on by one second at least."""
    before = path.stat().st_mtime_ns
    write(path, data)
    later = max(time.time_ns(), before + 1_000_000_000)
    os.utime(path, ns=(later, later))
    return path


def populate(folder: Path, n: int, *, per_folder: int = 100) -> list[str]:
    """``n`` small text files under ``folder``, ``per_folder`` to a subfolder
    (``batch-0000/note-00000.txt``), each naming its number in words a search finds (``note 00042``);
    returns their paths relative to ``folder``, in order."""
    paths = []
    for i in range(n):
        rel = f"batch-{i // per_folder:04d}/note-{i:05d}.txt"
        write(folder / rel, f"Note {i:05d}. This note number {i:05d} is about topic{i % 97} and item{i}.\n")
        paths.append(rel)
    return paths


__all__ = ["DAV_PASSWORD", "DAV_USER", "DavServer", "dav_server", "edit", "populate", "write"]
