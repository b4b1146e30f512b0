"""``python -m knowledge ingest`` waits out a PostgreSQL outage (``catalog.outage_wait_seconds``):
a real ``ingest`` process on a catalog in a PostgreSQL server of the test's own, which the test stops
(``pg_ctl stop -m immediate``) and starts again. The command says "waiting for the database" on
stderr and goes on: every file submitted once and ingested once; past the limit it ends with exit 2
and the files submitted and not, in words -- never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests.helpers.outage import write_docs

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def team_env(url: str, data: Path, wait: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        PYTHONPATH=str(ROOT),
        KNOWLEDGE_DATA_DIR=str(data),
        KNOWLEDGE_CATALOG__URL=url,
        KNOWLEDGE_VECTOR_STORE__BACKEND="pgvector",
        KNOWLEDGE_VECTOR_STORE__URL=url,
        KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
        KNOWLEDGE_INGEST__WORKER_THREADS="0",
        KNOWLEDGE_CATALOG__OUTAGE_WAIT_SECONDS=str(wait),
    )
    return env


class Cli:
    """A running ``python -m knowledge ARGS``; its stdout and stderr read as they come."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "knowledge", *args],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(s, into), daemon=True)
            for s, into in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))
        ]
        for r in self._readers:
            r.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        into.extend(stream)

    def wait_for(self, text: str, where: str = "err", timeout: float = 120) -> None:
        lines = self.err if where == "err" else self.out
        deadline = time.monotonic() + timeout
        while not any(text in line for line in lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} on std{where}:\n{''.join(self.out)}\n{''.join(self.err)}")
            time.sleep(0.05)

    def finish(self, timeout: float = 300) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        for r in self._readers:
            r.join(10)
        return code


def worker(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def catalog_counts(url: str) -> tuple[list[tuple], list[tuple]]:
    """``(store_files (name, status) rows, ingest_jobs (name, status) rows)``, sorted."""
    with psycopg.connect(url) as conn:
        files = conn.execute("SELECT file_name, status FROM store_files ORDER BY file_name").fetchall()
        jobs = conn.execute("SELECT name, status FROM ingest_jobs ORDER BY name").fetchall()
    return files, jobs


@pytest.mark.processes
def test_a_batch_waits_for_the_database_to_come_back_and_every_file_is_ingested_once(own_postgres, tmp_path):
    docs = write_docs(tmp_path / "docs", 8)
    env = team_env(own_postgres.url, tmp_path / "data", wait=120)
    cli = Cli(env, "ingest", "team", str(tmp_path / "docs"))
    cli.wait_for("queued: waiting for a worker")  # the batch is in the catalog; the command polls it
    own_postgres.stop()
    cli.wait_for("waiting for the database (")
    time.sleep(3)  # a few of its retries fail
    assert cli.proc.poll() is None, "".join(cli.err)
    own_postgres.start()
    cli.wait_for("the database is back after")
    done = worker(env)
    assert done.returncode == 0, done.stderr[-3000:]

    code = cli.finish()
    err, out = "".join(cli.err), "".join(cli.out)
    assert code == 0, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "Cannot reach the PostgreSQL catalog at 127.0.0.1:" in err  # what it waited for, in words
    lines = [line.split()[0] for line in out.splitlines() if line.startswith("doc")]
    assert lines == [p.name for p in docs]  # each file's line once, in order
    assert "8 files: 8 indexed" in out
    files, jobs = catalog_counts(own_postgres.url)
    assert files == [(p.name, "done") for p in docs]  # one record each: submitted once
    assert jobs == [(p.name, "done") for p in docs]


@pytest.mark.processes
def test_a_batch_started_while_the_database_is_down_is_submitted_once_it_is_back(own_postgres, tmp_path):
    docs = write_docs(tmp_path / "docs", 3)
    env = team_env(own_postgres.url, tmp_path / "data", wait=120)
    subprocess.run(
        [sys.executable, "-m", "knowledge", "stores"], env=env, cwd=ROOT, check=True, capture_output=True, timeout=120
    )  # the schema exists: the server had been used
    own_postgres.stop()
    cli = Cli(env, "ingest", "team", str(tmp_path / "docs"))
    cli.wait_for("waiting for the database (")
    own_postgres.start()
    cli.wait_for("queued: waiting for a worker")
    assert worker(env).returncode == 0

    code = cli.finish()
    err, out = "".join(cli.err), "".join(cli.out)
    assert code == 0 and "Traceback" not in err, err
    assert "3 files: 3 indexed" in out
    files, jobs = catalog_counts(own_postgres.url)
    assert files == [(p.name, "done") for p in docs]
    assert jobs == [(p.name, "done") for p in docs]


@pytest.mark.processes
def test_past_the_wait_the_command_says_which_files_were_submitted_and_exits_non_zero(own_postgres, tmp_path):
    docs = write_docs(tmp_path / "docs", 4)
    env = team_env(own_postgres.url, tmp_path / "data", wait=3)
    cli = Cli(env, "ingest", "team", str(tmp_path / "docs"))
    cli.wait_for("queued: waiting for a worker")
    own_postgres.stop()
    code = cli.finish(timeout=120)
    err, out = "".join(cli.err), "".join(cli.out)
    assert code == 2, err
    assert "Traceback" not in err and "Traceback" not in out
    assert "waiting for the database (" in err
    assert "error: The database did not come back in " in err and "(catalog.outage_wait_seconds = 3)" in err
    assert "Cannot reach the PostgreSQL catalog at 127.0.0.1:" in err
    assert "Submitted, not finished yet: " + ", ".join(p.name for p in docs) in err
    assert "Not submitted" not in err

    own_postgres.start()  # what was submitted is in the catalog, once, for a worker to ingest
    assert worker(env).returncode == 0
    _, jobs = catalog_counts(own_postgres.url)
    assert jobs == [(p.name, "done") for p in docs]


@pytest.mark.processes
def test_a_command_that_cannot_submit_says_that_no_file_was_submitted(own_postgres, tmp_path):
    write_docs(tmp_path / "docs", 2)
    env = team_env(own_postgres.url, tmp_path / "data", wait=2)
    own_postgres.stop()
    cli = Cli(env, "ingest", "team", str(tmp_path / "docs"))
    code = cli.finish(timeout=120)
    err = "".join(cli.err)
    assert code == 2, err
    assert "Traceback" not in err
    assert "(catalog.outage_wait_seconds = 2): Cannot reach the PostgreSQL catalog" in err
    assert "Not submitted: doc00.md, doc01.md -- run the same command again once the database is back." in err
