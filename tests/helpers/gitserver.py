"""Git servers for the Git source's tests (:mod:`knowledge.sources.git`), all on 127.0.0.1:

- :class:`WorkRepo`: a repository in a temp folder made and changed with the ``git`` CLI (commits of
  files, renames, deletions, a symlink, a submodule's gitlink); read through ``file://`` directly.
- :class:`GitHttpServer`: dulwich's own smart-HTTP WSGI application (:mod:`dulwich.web`) serving a
  folder of repositories, behind HTTP basic authentication (RFC 7617) checked by a tiny WSGI wrapper,
  in a thread of the test process on a free port; stoppable and restartable on the same port.
- :class:`GitSshServer`: Debian's ``sshd`` (openssh-server) on a free port with a temp host key and a
  temp ``authorized_keys`` holding a key the test made; a login runs the ``git-upload-pack`` of Debian's
  ``git`` package. Root only (sshd logs the user in, and root's privilege separation folder
  ``/run/sshd`` is made when missing).

A missing ``git`` or ``sshd`` skips the test, and fails it under CI=true
(:func:`tests.helpers.env.missing_server`; the CI installs the Debian packages ``git`` and
``openssh-server``).
"""

from __future__ import annotations

import base64
import os
import pwd
import shutil
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from tests.helpers.api import free_port
from tests.helpers.env import missing_server

#: The tests' HTTP account; never a real one. The password is grepped for in logs and messages.
GIT_USER, GIT_PASSWORD = "git-reader", "hunter2-git-secret-never-shown"

#: The ``git`` CLI isolated from the machine's and the developer's configuration.
_GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.org",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.org",
    "GIT_TERMINAL_PROMPT": "0",
}


def need_git() -> str:
    """The ``git`` CLI's path; skips (fails under CI=true) when Debian's ``git`` is not installed."""
    exe = shutil.which("git")
    if exe is None:
        missing_server("git", "the git CLI is not installed (apt-get install git)")
    assert exe is not None
    return exe


class WorkRepo:
    """A non-bare repository at ``folder`` with branch ``main`` (made empty; :meth:`commit` adds
    history). :attr:`url` is its ``file://`` URL."""

    def __init__(self, folder: Path, branch: str = "main") -> None:
        self.git_exe = need_git()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", branch)

    @property
    def url(self) -> str:
        return self.folder.as_uri()

    def git(self, *args: str) -> str:
        """Run ``git args...`` in the repository; its stdout, stripped."""
        out = subprocess.run(
            [self.git_exe, *args],
            cwd=self.folder,
            env={**os.environ, **_GIT_ENV},
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return out.stdout.strip()

    def commit(
        self,
        files: Mapping[str, bytes | str] = {},
        *,
        delete: Iterable[str] = (),
        rename: Mapping[str, str] = {},
        message: str = "change",
    ) -> str:
        """Write ``files`` (path -> bytes or text), ``git mv`` each ``rename`` (old -> new), ``git rm``
        each of ``delete``, commit everything; the new commit's id."""
        for old, new in rename.items():
            (self.folder / new).parent.mkdir(parents=True, exist_ok=True)
            self.git("mv", old, new)
        for path in delete:
            self.git("rm", "-q", path)
        for path, data in files.items():
            target = self.folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data.encode() if isinstance(data, str) else data)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self, ref: str = "HEAD") -> str:
        return self.git("rev-parse", ref)

    def blob(self, path: str, ref: str = "HEAD") -> str:
        """The blob id of ``path`` at ``ref``."""
        return self.git("rev-parse", f"{ref}:{path}")

    def add_symlink(self, path: str, target: str) -> None:
        """Stage a symlink ``path`` -> ``target`` (committed by the next :meth:`commit`)."""
        link = self.folder / path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)

    def add_gitlink(self, path: str, commit: str) -> None:
        """Stage a submodule's gitlink at ``path`` pointing at ``commit`` (of a repository that need not
        exist: the tree holds only the id). Its folder is made empty, as an uninitialised submodule's is."""
        (self.folder / path).mkdir(parents=True, exist_ok=True)
        self.git("update-index", "--add", "--cacheinfo", f"160000,{commit},{path}")


# -- HTTP ----------------------------------------------------------------------------------------------


def basic_auth(app: Callable[..., Any], username: str, password: str) -> Callable[..., Any]:
    """``app`` behind HTTP basic authentication (RFC 7617): a request without the right
    ``Authorization: Basic`` header is answered 401 with a ``WWW-Authenticate`` challenge."""
    expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("HTTP_AUTHORIZATION") != expected:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'), ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)  # type: ignore[no-any-return]

    return guarded


class _ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return None


class GitHttpServer:
    """Smart HTTP over the repositories under ``root`` (``http://127.0.0.1:<port>/<name>`` serves
    ``root/<name>``), behind basic auth with :data:`GIT_USER`/:data:`GIT_PASSWORD`.

    :meth:`start` and :meth:`stop` may be called again (the same port); :attr:`requests` counts the
    requests answered; :attr:`fail_with` set to an HTTP status line (``"503 Service Unavailable"``,
    ``"403 Forbidden"``) answers every request with it; :attr:`die_mid_pack` set makes the server stop
    while it sends the next pack (a ``git-upload-pack`` answer): half of its first bytes go out, the
    connection drops, the server stops listening (:attr:`died` is set then)."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or free_port()
        self.requests = 0
        self.fail_with: str | None = None
        self.die_mid_pack = False
        self.died = threading.Event()
        self._lock = threading.Lock()
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def _app(self) -> Callable[..., Any]:
        from dulwich.server import FileSystemBackend
        from dulwich.web import make_wsgi_chain

        class Folder(FileSystemBackend):
            # dulwich.web asks for "/<name>", which FileSystemBackend joins as an absolute path (outside root)
            def open_repository(self, path: str | bytes) -> Any:
                name = os.fsdecode(path).lstrip("/")
                return super().open_repository(name)

        git_app = basic_auth(make_wsgi_chain(Folder(str(self.root))), GIT_USER, GIT_PASSWORD)

        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            self.requests += 1
            if self.fail_with is not None:
                start_response(self.fail_with, [("Content-Length", "0")])
                return [b""]
            if self.die_mid_pack and environ.get("PATH_INFO", "").endswith("/git-upload-pack"):
                self.die_mid_pack = False
                return self._dying(git_app, environ, start_response)
            return git_app(environ, start_response)  # type: ignore[no-any-return]

        return app

    def _dying(self, app: Callable[..., Any], environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """Run ``app`` (dulwich writes its answer through the ``write`` callable of PEP 3333) letting out
        the first few pkt-lines and half of the first write of pack data (64 bytes or more); then stop the
        server and drop the connection."""

        def stop() -> None:
            self.stop()
            self.died.set()

        def cut_start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            write = start_response(status, headers, exc_info)

            def cut(data: bytes) -> None:
                if len(data) < 64:
                    write(data)
                else:
                    write(data[: len(data) // 2])
                    threading.Thread(target=stop, name="git-http-stop", daemon=True).start()
                    raise ConnectionAbortedError("the test server died mid-pack")  # wsgiref drops the connection

            return cut

        return app(environ, cut_start_response)  # type: ignore[no-any-return]

    def start(self) -> GitHttpServer:
        self.died.clear()
        server = make_server(
            "127.0.0.1", self.port, self._app(), server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
        )
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="git-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (a connection then is refused). Safe from any thread, more than once."""
        with self._lock:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
                self._server = None
            if self._thread is not None:
                self._thread.join(timeout=10)
                self._thread = None

    def wait_stopped(self, timeout: float = 30) -> None:
        """Wait until a server that died (:attr:`die_mid_pack`) no longer listens."""
        assert self.died.wait(timeout), "the server did not die"

    def __enter__(self) -> GitHttpServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


# -- SSH -----------------------------------------------------------------------------------------------

SSHD = "/usr/sbin/sshd"


@dataclass
class GitSshServer:
    """A running ``sshd``: :attr:`port`; :attr:`user` (the account the tests log in as);
    :attr:`client_key` (an OpenSSH private key, PEM text, in ``authorized_keys``) and
    :attr:`stranger_key` (one that is not); :attr:`known_hosts` (a ``known_hosts`` line for the server's
    host key) and :attr:`wrong_known_hosts` (one naming another key)."""

    port: int
    user: str
    client_key: str
    stranger_key: str
    known_hosts: str
    wrong_known_hosts: str
    folder: Path
    process: subprocess.Popen[bytes]

    def url(self, path: Path) -> str:
        """``ssh://user@127.0.0.1:port/<absolute path>``."""
        return f"ssh://{self.user}@127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def _keygen(path: Path, kind: str = "ed25519") -> tuple[str, str]:
    """A new key pair at ``path`` (no passphrase): (private key PEM text, public key line)."""
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "knowledge-test", "-f", str(path)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return path.read_text(), path.with_suffix(".pub").read_text().strip()


def _listening(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.05)
    return False


def start_sshd(folder: Path) -> GitSshServer:
    """Start ``sshd`` in ``folder`` (made by the caller) accepting one key for the current user.

    Skips (fails under CI=true) when openssh-server or ssh-keygen are missing, the tests do not run as
    root, or sshd does not listen."""
    need_git()
    if not (Path(SSHD).exists() and shutil.which("ssh-keygen") and shutil.which("ssh")):
        missing_server("sshd", "Debian's openssh-server and openssh-client are not installed")
    if os.geteuid() != 0:
        missing_server("sshd", "the SSH tests log in as root through a root sshd; the tests do not run as root")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder (Debian's unit makes it)
    folder.mkdir(parents=True, exist_ok=True)
    _, host_pub = _keygen(folder / "host_key")
    _, other_host_pub = _keygen(folder / "other_host_key")
    client_key, client_pub = _keygen(folder / "client_key")
    stranger_key, _ = _keygen(folder / "stranger_key")
    (folder / "authorized_keys").write_text(client_pub + "\n")
    (folder / "authorized_keys").chmod(0o600)
    port = free_port()
    config = folder / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {folder / 'host_key'}\n"
        f"PidFile {folder / 'sshd.pid'}\nAuthorizedKeysFile {folder / 'authorized_keys'}\n"
        "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAcceptEnv GIT_PROTOCOL\n"
        "PrintMotd no\nPrintLastLog no\nX11Forwarding no\nAllowTcpForwarding no\nLogLevel ERROR\n"
    )
    with (folder / "sshd.log").open("wb") as log:
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)
    if not _listening(port, time.monotonic() + 30):
        process.kill()
        process.wait(timeout=10)
        missing_server("sshd", f"it did not listen: {(folder / 'sshd.log').read_text(errors='replace')[-500:]}")
    user = pwd.getpwuid(os.geteuid()).pw_name
    host = f"[127.0.0.1]:{port}"

    def line(pub: str) -> str:
        kind, key = pub.split()[:2]
        return f"{host} {kind} {key}\n"

    return GitSshServer(port, user, client_key, stranger_key, line(host_pub), line(other_host_pub), folder, process)


__all__ = [
    "GIT_PASSWORD",
    "GIT_USER",
    "GitHttpServer",
    "GitSshServer",
    "WorkRepo",
    "basic_auth",
    "need_git",
    "start_sshd",
]
