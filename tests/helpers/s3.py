"""The S3 server of the tests: moto's server mode (``moto_server``) as a child process on a free
loopback port; the session's (the ``s3_server`` fixture) or a test's own (one it stops and starts again,
or freezes with SIGSTOP); one that checks signatures and IAM policies (:func:`moto_with_auth`); one
holding a bucket of many keys from the start (``moto_server(preload=...)``). Its request log tells which
objects were read (:meth:`MotoServer.object_reads`)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import SecretStr

from knowledge.config import Settings

#: Credentials the tests' moto server accepts (it checks none); never real ones.
S3_TEST_KEY, S3_TEST_SECRET = "testing-key-id", "testing-secret-never-shown"


#: A request line of werkzeug's log: its GET path.
_REQUEST_LINE = re.compile(r'"GET (\S+) HTTP/1\.[01]"')


class MotoServer:
    """A running ``moto_server``: its process (:attr:`proc`, :attr:`pid`), :attr:`port` and
    :attr:`endpoint` URL. :meth:`stop` and :meth:`start` stop it and start it again on the same port, as an
    outage does (moto keeps its buckets in memory: a restarted server has none)."""

    def __init__(self, command: list[str], port: int, out: IO[bytes], env: dict[str, str] | None = None) -> None:
        self.command, self.port, self.out, self.env = command, port, out, env
        self.endpoint = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self.pid = 0

    def start(self) -> None:
        """Start ``moto_server`` on :attr:`port` and wait until it listens (60 s); skips the test where it
        does not start, fails under CI=true."""
        from tests.helpers.env import missing_server

        env = None if self.env is None else {**os.environ, **self.env}
        proc = subprocess.Popen(
            [*self.command, "-H", "127.0.0.1", "-p", str(self.port)], stdout=self.out, stderr=subprocess.STDOUT, env=env
        )
        self.proc, self.pid = proc, proc.pid
        wait = 60.0 if len(self.command) == 1 else 300.0  # a preloading one makes its keys first
        deadline = time.monotonic() + wait
        while True:
            if proc.poll() is not None:
                self.out.seek(0)
                missing_server(
                    "The S3 test server (moto)",
                    f"moto_server exited with {proc.returncode}: {self.out.read().decode(errors='replace')[-500:]}",
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    missing_server("The S3 test server (moto)", f"moto_server did not listen within {wait:g} s")
                time.sleep(0.1)

    def log_mark(self) -> int:
        """Where the request log ends now: pass it to :meth:`object_reads`."""
        self.out.flush()
        return os.fstat(self.out.fileno()).st_size

    def object_reads(self, bucket: str, since: int = 0) -> list[str]:
        """The keys of ``bucket`` read with ``GET`` (GetObject; not listings) since the log position
        ``since``, in order, from the server's request log (werkzeug's ``"GET /bucket/key HTTP/1.1" 200``
        lines; path-style requests)."""
        self.out.flush()
        self.out.seek(since)
        text = self.out.read().decode(errors="replace")
        self.out.seek(0, os.SEEK_END)
        keys = []
        for m in _REQUEST_LINE.finditer(text):
            path, _, query = m.group(1).partition("?")
            head, _, key = path.lstrip("/").partition("/")
            if head == bucket and key and "list-type" not in query:
                keys.append(urllib.parse.unquote(key))
        return keys

    def stop(self) -> None:
        """Stop the server (thawed with SIGCONT if a test froze it, terminated, killed after 10 s); its port
        then refuses connections."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def moto_server(
    log: IO[bytes] | None = None, env: dict[str, str] | None = None, preload: tuple[str, str, int] | None = None
) -> Iterator[MotoServer]:
    """``moto_server`` on a free loopback port until the block ends (then stopped: :meth:`MotoServer.stop`).
    Its request log goes to ``log`` (default: a temporary file; a pipe nobody reads would fill and block
    it); ``env``: variables added to its environment; ``preload``: ``(bucket, prefix, count)``, a bucket
    with ``count`` empty keys made before it listens (:mod:`tests.helpers.moto_preloaded`; a restart by
    :meth:`MotoServer.start` makes them again). Skips the test where moto is missing or does not start,
    fails under CI=true."""
    from tests.helpers.api import free_port
    from tests.helpers.env import missing_server

    # the moto of this interpreter first: another on PATH (a pyenv shim) may be another moto version
    here = Path(sys.executable).with_name("moto_server")
    exe = str(here) if here.exists() else shutil.which("moto_server") or str(here)
    if not Path(exe).exists():
        missing_server("The S3 test server (moto)", "moto_server is not installed (pip install 'moto[server]')")
    with contextlib.ExitStack() as stack:
        out = log if log is not None else stack.enter_context(tempfile.TemporaryFile())
        command = [exe]
        if preload is not None:
            script = Path(__file__).with_name("moto_preloaded.py")
            command = [sys.executable, str(script), preload[0], preload[1], str(preload[2])]
        server = MotoServer(command, free_port(), out, env)
        try:
            server.start()
            yield server
        finally:
            server.stop()


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_TEST_KEY,
        aws_secret_access_key=S3_TEST_SECRET,
    )


@dataclass(frozen=True)
class AuthMoto:
    """A moto server that checks every request's signature and the IAM policies of its key (see
    :func:`moto_with_auth`): :attr:`endpoint`; a key allowed everything (:attr:`key_id`, :attr:`secret`); a
    key allowed nothing (:attr:`denied_key_id`, :attr:`denied_secret`); a role the first key may assume
    (:attr:`role_arn`, for temporary credentials with a session token)."""

    server: MotoServer
    key_id: str
    secret: str
    denied_key_id: str
    denied_secret: str
    role_arn: str

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def client(self, service: str = "s3") -> Any:
        """A boto3 client of ``service`` with the allowed key."""
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
        )


@contextlib.contextmanager
def moto_with_auth() -> Iterator[AuthMoto]:
    """A ``moto_server`` of its own that enforces authentication: moto checks nothing by default; after
    the IAM users, keys and role are made here, a ``POST /moto-api/reset-auth`` with body ``0`` sets its
    ``INITIAL_NO_AUTH_ACTION_COUNT`` to 0 (moto's setting of how many requests pass before it checks), so
    from then on every request's SigV4 signature is checked (a wrong secret: ``SignatureDoesNotMatch``; an
    unknown key: ``InvalidAccessKeyId``) and its key's IAM policies applied (``AccessDenied``). Never the
    session's ``s3_server``, whose tests use keys IAM does not know."""
    import json
    import urllib.request

    import boto3

    with moto_server() as server:

        def iam_client() -> Any:
            return boto3.client(
                "iam",
                endpoint_url=server.endpoint,
                region_name="us-east-1",
                aws_access_key_id=S3_TEST_KEY,
                aws_secret_access_key=S3_TEST_SECRET,
            )

        iam = iam_client()
        everything = json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        )
        keys = {}
        for user in ("reader", "nobody"):
            iam.create_user(UserName=user)
            if user == "reader":
                iam.put_user_policy(UserName=user, PolicyName="everything", PolicyDocument=everything)
            made = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (made["AccessKeyId"], made["SecretAccessKey"])
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}],
        }
        role = iam.create_role(RoleName="s3-reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        iam.put_role_policy(RoleName="s3-reader", PolicyName="everything", PolicyDocument=everything)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(
            urllib.request.Request(
                f"{server.endpoint}/moto-api/reset-auth", data=b"0", method="POST", headers={"Content-Type": "text/plain"}
            )
        ) as r:
            assert r.status == 200, r.read()
        yield AuthMoto(server, *keys["reader"], *keys["nobody"], role)


def s3_file_store_settings(settings: Settings, endpoint: str, *, create: bool = True, **extra: Any) -> Settings:
    """``settings`` with ``file_store.backend = "s3"`` on a bucket of this test's own on ``endpoint``
    (created unless ``create`` is false)."""
    bucket = "t-" + hashlib.sha256(str(settings.data_root).encode()).hexdigest()[:20]
    if create:
        s3_client(endpoint).create_bucket(Bucket=bucket)
    fs = settings.file_store.model_copy(
        update={
            "backend": "s3",
            "s3_bucket": bucket,
            "s3_endpoint_url": endpoint,
            "s3_region": "us-east-1",
            "s3_access_key_id": SecretStr(S3_TEST_KEY),
            "s3_secret_access_key": SecretStr(S3_TEST_SECRET),
            **extra,
        }
    )
    return settings.model_copy(update={"file_store": fs})


__all__ = [
    "S3_TEST_KEY",
    "S3_TEST_SECRET",
    "AuthMoto",
    "MotoServer",
    "moto_server",
    "moto_with_auth",
    "s3_client",
    "s3_file_store_settings",
]
