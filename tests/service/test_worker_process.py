"""The app's ingestion worker as a child process (issue 30, item 2): ``JobRegistry.use_worker_process``
starts ``python -m knowledge worker --once --parent <this process>`` while jobs are queued; the job
rows name the child's pid; a ``kill -9`` of the child mid-batch is followed by a new child that takes
the job over and finishes the batch; a child that cannot start makes the app ingest in its own
threads; the worker stops when its parent is gone. Real processes, the fake model by its setting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from knowledge.catalog import jobs as q
from knowledge.config import load_settings
from knowledge.service.jobs import IngestJob
from knowledge.service.worker import WorkerProcess, worker_onnx_threads
from knowledge.system import System
from knowledge.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app(tmp_path, monkeypatch):
    """``(system, workbench)`` as the app makes them (settings from the environment, which the child inherits)."""
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    monkeypatch.delenv("KNOWLEDGE_INGEST__WORKER_PROCESS", raising=False)
    system = System(load_settings())
    yield system, Workbench(system)
    system.jobs.stop_all(timeout=30)
    system.close()


def _items(n: int, paragraphs: int = 8) -> list[tuple[str, bytes]]:
    return [
        (f"doc{i}.md", "\n\n".join(f"# Part {k}\n\n" + f"word{i}x{k} " * 80 for k in range(paragraphs)).encode())
        for i in range(n)
    ]


def _wait(job: IngestJob, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not job.done:
        assert time.monotonic() < deadline, [(f.name, f.stage) for f in job.files]
        time.sleep(0.2)


def _worker_pids(system: System) -> set[int]:
    return {int(r.worker.split(":")[1]) for r in q.jobs(system.catalog) if r.worker}


@pytest.mark.slow  # three systems
def test_use_worker_process_follows_the_settings(tmp_path):
    off = System(load_settings(data_dir=tmp_path / "a", ingest={"worker_process": False}))
    none = System(load_settings(data_dir=tmp_path / "b", ingest={"worker_threads": 0, "worker_process": True}))
    on = System(load_settings(data_dir=tmp_path / "c", ingest={"worker_threads": 2, "worker_process": True}))
    try:
        assert not off.jobs.use_worker_process() and off.jobs.process is None
        assert not none.jobs.use_worker_process() and none.jobs.process is None
        assert on.jobs.use_worker_process()
        proc = on.jobs.process
        assert proc is not None and not proc.alive()
        cmd = proc.command()
        assert cmd[cmd.index("--parent") + 1] == str(os.getpid())
        assert cmd[cmd.index("--concurrency") + 1] == "2" and "--once" in cmd
        assert cmd[cmd.index("--data-dir") + 1] == str(tmp_path / "c")
    finally:
        for system in (off, none, on):
            system.close()


def test_the_child_gets_a_bounded_onnx_thread_count_unless_one_is_set(tmp_path, monkeypatch):
    monkeypatch.delenv("KNOWLEDGE_EMBEDDINGS__THREADS", raising=False)
    monkeypatch.setenv("KNOWLEDGE_USER", "someone")
    env = WorkerProcess(tmp_path).environment()
    assert env["KNOWLEDGE_EMBEDDINGS__THREADS"] == str(worker_onnx_threads())
    assert "KNOWLEDGE_USER" not in env  # the worker ingests for everyone, as the local admin
    assert worker_onnx_threads(2) == 1 and worker_onnx_threads(1) == 1 and worker_onnx_threads(8) == 7
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__THREADS", "2")
    assert WorkerProcess(tmp_path).environment()["KNOWLEDGE_EMBEDDINGS__THREADS"] == "2"


@pytest.mark.slow
def test_a_batch_is_ingested_by_a_child_process_that_exits_when_done(app):
    system, wb = app
    assert system.jobs.use_worker_process()
    job = wb.submit_batch("docs", _items(3))
    _wait(job)
    assert [f.result.outcome.value for f in job.files] == ["indexed"] * 3, [f.result for f in job.files]
    pids = _worker_pids(system)
    assert len(pids) == 1 and os.getpid() not in pids  # not this process
    assert system.jobs.process is not None and system.jobs.process.started == 1
    deadline = time.monotonic() + 60
    while system.jobs.process.alive():  # --once: it exits once nothing is queued or running
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert system.jobs.process.returncode() == 0
    assert not psutil.pid_exists(next(iter(pids))) or psutil.Process(next(iter(pids))).status() == "zombie"
    hits = wb.search("docs", "word1x3", k=3)
    assert hits and hits[0].file_name == "doc1.md"


@pytest.mark.processes
@pytest.mark.slow
def test_a_killed_child_is_replaced_and_the_batch_finishes(app):
    system, wb = app
    assert system.jobs.use_worker_process()
    n = 12
    job = wb.submit_batch("docs", _items(n, paragraphs=30))
    deadline = time.monotonic() + 180
    while not any(f.result is not None for f in job.files):  # mid-batch: one file done, others to come
        assert time.monotonic() < deadline, "no file was ingested"
        time.sleep(0.05)
    first = system.jobs.process.pid
    assert first is not None and not job.done
    os.kill(first, signal.SIGKILL)
    _wait(job)
    outcomes = [f.result.outcome.value for f in job.files]
    assert outcomes == ["indexed"] * n, [f.result for f in job.files]
    assert system.jobs.process.started >= 2  # started again after the kill
    assert first in _worker_pids(system) and len(_worker_pids(system)) >= 2
    vs = wb.vector_store("docs")
    for f in wb.store_files("docs"):  # each file's chunks once: the taken-over file replaced, not doubled
        assert vs.count(f.file_id) == f.chunks > 0, f


class _BrokenProcess(WorkerProcess):
    """A worker process that cannot start (a real process exiting with status 3 at once)."""

    def command(self) -> list[str]:
        return [sys.executable, "-c", "import sys; sys.exit(3)"]


@pytest.mark.processes
@pytest.mark.slow
def test_a_child_that_cannot_start_makes_the_app_ingest_in_its_own_threads(app, caplog):
    system, wb = app
    assert system.jobs.use_worker_process()
    system.jobs.process = _BrokenProcess(wb.settings.data_dir)
    job = wb.submit_batch("docs", _items(2))
    _wait(job)
    assert [f.result.outcome.value for f in job.files] == ["indexed"] * 2
    assert system.jobs.process is None  # fell back after three failed starts
    assert _worker_pids(system) == {os.getpid()}
    assert "cannot start" in caplog.text


@pytest.mark.processes
@pytest.mark.slow
def test_the_worker_stops_when_its_parent_is_gone(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_DATA_DIR": str(tmp_path / "data"),
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16",
    }
    # a parent that starts the worker (no --once: it would poll forever) and waits
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import os, subprocess, sys, time\n"
                "p = subprocess.Popen([sys.executable, '-m', 'knowledge', 'worker', '--parent', str(os.getpid()),"
                " '--poll', '0.2'])\n"
                "print(p.pid, flush=True)\n"
                "time.sleep(600)\n"
            ),
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child = psutil.Process(int(parent.stdout.readline()))
        time.sleep(1.0)
        assert child.is_running() and child.ppid() == parent.pid
        parent.kill()
        parent.wait()
        child.wait(timeout=60)  # it noticed and stopped
        assert not child.is_running()
    finally:
        parent.kill()
