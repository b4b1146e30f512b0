"""The S3 server of the tests: moto's server mode (``moto_server``) as a child process on a free
loopback port; the session's (the ``s3_server`` fixture) or a test's own (one it freezes with SIGSTOP)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import SecretStr

from knowledge.config import Settings

#: Credentials the tests' moto server accepts (it checks none); never real ones.
S3_TEST_KEY, S3_TEST_SECRET = "testing-key-id", "testing-secret-never-shown"


class MotoServer:
    """A running ``moto_server``: its process (:attr:`proc`, :attr:`pid`), :attr:`port` and
    :attr:`endpoint` URL."""

    def __init__(self, proc: subprocess.Popen, port: int) -> None:
        self.proc, self.pid, self.port = proc, proc.pid, port
        self.endpoint = f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def moto_server(log: IO[bytes] | None = None) -> Iterator[MotoServer]:
    """``moto_server`` on a free loopback port until the block ends (thawed with SIGCONT if a test
    froze it, terminated, killed after 10 s). Its request log goes to ``log`` (default: a temporary
    file; a pipe nobody reads would fill and block it). Skips the test where moto is missing or does
    not start, fails under CI=true."""
    from tests.helpers.api import free_port
    from tests.helpers.env import missing_server

    exe = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    if not Path(exe).exists():
        missing_server("The S3 test server (moto)", "moto_server is not installed (pip install 'moto[server]')")
    with contextlib.ExitStack() as stack:
        out = log if log is not None else stack.enter_context(tempfile.TemporaryFile())
        port = free_port()
        proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    out.seek(0)
                    missing_server(
                        "The S3 test server (moto)",
                        f"moto_server exited with {proc.returncode}: {out.read().decode(errors='replace')[-500:]}",
                    )
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        missing_server("The S3 test server (moto)", "moto_server did not listen within 60 s")
                    time.sleep(0.1)
            yield MotoServer(proc, port)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=S3_TEST_KEY,
        aws_secret_access_key=S3_TEST_SECRET,
    )


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


__all__ = ["S3_TEST_KEY", "S3_TEST_SECRET", "MotoServer", "moto_server", "s3_client", "s3_file_store_settings"]
