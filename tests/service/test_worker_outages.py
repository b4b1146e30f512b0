"""Workers outlive their infrastructure (issue 39, "Done when"): real `python -m knowledge worker`
processes on a PostgreSQL catalog over TCP, each test with the servers it breaks of its own.

(a) PostgreSQL stopped (``pg_ctl stop -m immediate``) mid-batch for 30 s and started again on the
same folder and port: both workers keep running, wait for the database, and the batch completes
with every file exactly once (one record per file, its chunk count equal to the vector rows) and
none failed.

(b) The S3 file store goes away mid-batch and comes back: no file fails, the batch completes.
moto (the S3 server of the tests) keeps its buckets in memory, so a stopped and restarted moto has
lost every file -- a real S3 or MinIO keeps them. The test therefore breaks the server without
losing its data: it freezes the moto process (SIGSTOP; SIGCONT later) *and* closes the endpoint the
workers use (a TCP gate in front of moto that the test closes, resetting the open connections and
refusing new ones, as a stopped server does, then opens again).

(c) One worker's disk is full (its model folder and TMPDIR on a 64 KiB tmpfs the test mounts and
fills; root only, and required under CI=true): it cannot unpack the bundled model, stands down with
exit status 3 after ``ingest.worker_sick_after`` jobs, reports ``sick`` in its status file, and
gives its job back; the other worker ingests everything and no file fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowledge.catalog import jobs as q
from tests.helpers.api import free_port
from tests.helpers.outage import OwnServer
from tests.helpers.s3 import MotoServer, moto_server

REPO = Path(__file__).resolve().parents[2]
N_FILES = 20

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _text(i: int) -> bytes:
    """A note of ~15 chunks: a worker spends a fraction of a second on it, so an outage lands mid-batch."""
    return "\n\n".join(
        f"## Part {p} of note {i}\n\n" + f"Note {i}, part {p}, tells of harbour {i} and its tides. " * 14 for p in range(15)
    ).encode()


class Worker:
    """``python -m knowledge worker`` as a child, its output in a log file."""

    def __init__(self, name: str, env: dict[str, str], log: Path, *args: str) -> None:
        self.name, self.log = name, log
        self.fh = log.open("ab")
        self.p = subprocess.Popen(
            [sys.executable, "-m", "knowledge", "worker", "--lease", "3", "--poll", "0.2", *args],
            env=env,
            cwd=str(REPO),
            stdout=self.fh,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.fh.flush()
        return self.log.read_text("utf-8", "replace")

    def alive(self) -> bool:
        return self.p.poll() is None

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (a supervisor's stop): the worker gives its file back and exits 0."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        self.fh.close()
        return self.p.returncode


def _env(tmp: Path, name: str, url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    return {
        **env,
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_DATA_DIR": str(tmp / name),
        "KNOWLEDGE_CATALOG__URL": url,
        "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
        "KNOWLEDGE_VECTOR_STORE__URL": url,
        "KNOWLEDGE_FILE_STORE__BACKEND": "postgresql",
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16",
        "KNOWLEDGE_EMBEDDINGS__THREADS": "1",
        "KNOWLEDGE_INGEST__READER_PROCESSES": "1",
        "KNOWLEDGE_INGEST__RETRY_BASE_SECONDS": "0.5",
        "KNOWLEDGE_INGEST__RETRY_MAX_SECONDS": "4",
        "KNOWLEDGE_INGEST__WORKER_STATUS_FILE": str(tmp / name / "status.json"),
        **extra,
    }


def _settings(env: dict[str, str]):
    """The settings of a process with ``env`` (this test's own workbench: it queues and counts)."""
    from knowledge.config import Settings

    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return Settings()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _system(env: dict[str, str]) -> Iterator:
    """``(system, workbench)`` on ``env``'s settings, the system closed after."""
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.system import System
    from knowledge.workbench import Workbench

    system = System(_settings(env), lambda model: HashEmbedder(dimension=16))
    try:
        yield system, Workbench(system)
    finally:
        system.close()


def _queue(env: dict[str, str]) -> str:
    with _system(env) as (system, _):
        stored = [system.files.save(f"note-{i:02d}.md", "text/markdown", _text(i)) for i in range(N_FILES)]
        return q.enqueue(system.catalog, "notes", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])


def _statuses(url: str, batch_id: str) -> dict[str, int]:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            rows = conn.execute(
                "SELECT status, count(*) FROM ingest_jobs WHERE batch_id = %s GROUP BY status", [batch_id]
            ).fetchall()
    except psycopg.OperationalError:
        return {}
    return dict(rows)


def _until(what: str, check, timeout: float, *workers: Worker, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        for w in workers:
            assert w.alive(), f"{w.name} exited with {w.p.returncode}:\n{w.output()[-3000:]}"
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: " + "\n".join(w.output()[-2000:] for w in workers))
        time.sleep(every)


def _exactly_once(env: dict[str, str], batch_id: str) -> None:
    """Every job done, none failed; one record per file, done, its chunks equal to the vector rows."""
    with _system(env) as (system, wb):
        _, rows, _ = q.batch(system.catalog, batch_id)
        assert [r.status for r in rows] == ["done"] * N_FILES, [(r.name, r.status, r.reason) for r in rows]
        records = wb.store_files("notes")
        assert sorted(r.file_name for r in records) == [f"note-{i:02d}.md" for i in range(N_FILES)]
        assert {r.status for r in records} == {"done"}
        vs = wb.vector_store("notes")
        assert all(r.chunks > 0 and vs.count(r.file_id) == r.chunks for r in records), [
            (r.file_name, r.chunks, vs.count(r.file_id)) for r in records
        ]
        assert vs.count() == sum(r.chunks for r in records)  # no orphan, no duplicate


def _test_db_url(pgvector_settings) -> str:
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(pgvector_settings().vector_store.url)  # this test's database, over TCP
    return f"postgresql://{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"


# -- (a) PostgreSQL stopped for 30 s --------------------------------------------------------------------


@pytest.mark.processes
def test_postgresql_stopped_for_30_s_mid_batch_the_workers_wait_and_every_file_is_ingested_once(
    tmp_path: Path, own_postgres: OwnServer
) -> None:
    url = own_postgres.url
    env = {name: _env(tmp_path, name, url) for name in ("w1", "w2")}
    batch_id = _queue(env["w1"])
    workers = [Worker(name, env[name], tmp_path / f"{name}.log") for name in ("w1", "w2")]
    try:
        _until("the first files done", lambda: _statuses(url, batch_id).get("done", 0) >= 2, 300, *workers, every=0.02)
        own_postgres.stop()
        _until(
            "both workers waiting for the database",
            lambda: all("waiting for the database" in w.output() for w in workers),
            120,
            *workers,
        )
        time.sleep(30)  # the outage (the trial: 35 s)
        assert all(w.alive() for w in workers)
        own_postgres.start()
        _until("the batch done", lambda: _statuses(url, batch_id).get("done", 0) == N_FILES, 600, *workers, every=0.5)
        assert all(w.alive() for w in workers)  # they outlived the outage
        _exactly_once(env["w1"], batch_id)
        # a worker still in its back-off when the other finished the batch reconnects at its next try
        _until(
            "both workers back on the database",
            lambda: all("the database is back" in w.output() for w in workers),
            120,
            *workers,
        )
        for w in workers:
            assert json.loads((tmp_path / w.name / "status.json").read_text())["state"] == "running"
    finally:
        codes = [w.terminate() for w in workers]
    assert codes == [0, 0], [w.output()[-2000:] for w in workers]  # SIGTERM: asked to stop


# -- (b) the S3 server gone and back ---------------------------------------------------------------------


class Gate:
    """A TCP forwarder from a port of its own to ``target``: :meth:`close` resets every connection
    and refuses new ones (a stopped server, seen from its clients), :meth:`open` lets them through again."""

    def __init__(self, target: int) -> None:
        self.port, self.target = free_port(), target
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()

    def open(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, s: socket.socket) -> None:
        while True:
            try:
                client, _ = s.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        with self.lock:
            conns, self.conns = self.conns, []
        for c in conns:
            with contextlib.suppress(OSError):
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
                c.close()


@pytest.fixture
def own_moto() -> Iterator[MotoServer]:
    """A moto server of this test's own (it freezes it; never the session's)."""
    with moto_server() as server:
        yield server


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.mark.processes
def test_the_s3_server_gone_mid_batch_no_file_fails_and_the_batch_completes(
    tmp_path: Path, pgvector_settings, own_moto
) -> None:
    from tests.helpers.s3 import S3_TEST_KEY, S3_TEST_SECRET, s3_client

    url = _test_db_url(pgvector_settings)
    gate = Gate(own_moto.port)
    gate.open()
    endpoint = f"http://127.0.0.1:{gate.port}"
    s3_client(endpoint).create_bucket(Bucket="team")
    s3 = {
        "KNOWLEDGE_FILE_STORE__BACKEND": "s3",
        "KNOWLEDGE_FILE_STORE__S3_BUCKET": "team",
        "KNOWLEDGE_FILE_STORE__S3_ENDPOINT_URL": endpoint,
        "KNOWLEDGE_FILE_STORE__S3_REGION": "us-east-1",
        "KNOWLEDGE_FILE_STORE__S3_ACCESS_KEY_ID": S3_TEST_KEY,
        "KNOWLEDGE_FILE_STORE__S3_SECRET_ACCESS_KEY": S3_TEST_SECRET,
    }
    env = {name: _env(tmp_path, name, url, **s3) for name in ("w1", "w2")}
    batch_id = _queue(env["w1"])
    workers = [Worker(name, env[name], tmp_path / f"{name}.log") for name in ("w1", "w2")]
    try:
        _until("the first files done", lambda: _statuses(url, batch_id).get("done", 0) >= 2, 300, *workers, every=0.02)
        os.kill(own_moto.pid, signal.SIGSTOP)  # the server frozen ...
        gate.close()  # ... and its endpoint refusing connections
        _until(
            "a file waiting for the file store",
            lambda: any("waiting: the file store cannot be reached" in w.output() for w in workers),
            180,
            *workers,
        )
        time.sleep(15)
        assert _statuses(url, batch_id).get("failed", 0) == 0
        os.kill(own_moto.pid, signal.SIGCONT)
        gate.open()
        _until("the batch done", lambda: _statuses(url, batch_id).get("done", 0) == N_FILES, 600, *workers, every=0.5)
        assert all(w.alive() for w in workers)
        _exactly_once(env["w1"], batch_id)
    finally:
        codes = [w.terminate() for w in workers]
        gate.close()
    assert codes == [0, 0], [w.output()[-2000:] for w in workers]


# -- (c) a worker whose disk is full -----------------------------------------------------------------------


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for this test and filled to the last byte (root only; required under CI=true)."""
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("the full-disk test needs root (to mount a tmpfs) under CI=true")
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs under CI=true: {done.stderr}")
        pytest.skip(f"cannot mount a tmpfs: {done.stderr}")
    try:
        with contextlib.suppress(OSError), (mount / "filler").open("wb") as fh:
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        os.chmod(mount, 0o777)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.processes
def test_a_worker_with_a_full_disk_stands_down_and_the_other_ingests_everything(
    tmp_path: Path, pgvector_settings, full_disk: Path
) -> None:
    from knowledge.embeddings.bundled import ensure_bundled_model

    url = _test_db_url(pgvector_settings)
    models = tmp_path / "models"  # the healthy worker's model, unpacked
    ensure_bundled_model(models)
    bundled = {
        "KNOWLEDGE_EMBEDDINGS__MODEL": "sentence-transformers/all-MiniLM-L6-v2",
        "KNOWLEDGE_INGEST__WORKER_SICK_AFTER": "3",
    }
    env = {
        "sick": _env(
            tmp_path,
            "sick",
            url,
            KNOWLEDGE_EMBEDDINGS__MODELS_DIR=str(full_disk / "models"),
            TMPDIR=str(full_disk),
            **bundled,
        ),
        "healthy": _env(tmp_path, "healthy", url, KNOWLEDGE_EMBEDDINGS__MODELS_DIR=str(models), **bundled),
    }
    batch_id = _queue(env["healthy"])
    sick = Worker("sick", env["sick"], tmp_path / "sick.log")
    healthy = None
    try:
        assert sick.p.wait(300) == 3, sick.output()[-3000:]  # stood down: its own disk
        said = sick.output()
        assert "stands down" in said and "No space left on device" in said, said[-3000:]
        state = json.loads((tmp_path / "sick" / "status.json").read_text())
        assert state["state"] == "sick" and "embedding model" in state["reason"], state
        statuses = _statuses(url, batch_id)
        assert statuses.get("failed", 0) == 0 and statuses.get("queued") == N_FILES, statuses  # its job given back
        healthy = Worker("healthy", env["healthy"], tmp_path / "healthy.log", "--once")
        assert healthy.p.wait(600) == 0, healthy.output()[-3000:]
        _exactly_once(env["healthy"], batch_id)
    finally:
        sick.terminate()
        if healthy is not None:
            healthy.terminate()
