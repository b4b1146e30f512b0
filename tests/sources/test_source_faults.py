"""A source's run under the faults of real processes: its worker killed mid-run (``kill -9``) and
another worker taking the job over; a second run that converges on the source's exact content.
The source is a real WebDAV server (tests/helpers/webdav.py) in this process; the workers are
``python -m knowledge worker`` processes on the same data folder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knowledge.catalog import jobs as queue
from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.webdav import DAV_PASSWORD, DAV_USER, populate
from tests.sources.conftest import DavFolder

ROOT = Path(__file__).resolve().parents[2]
N = 60


def _worker(data: Path, *argv: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "KNOWLEDGE_DATA_DIR": str(data),
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "knowledge", "worker", "--lease", "3", "--poll", "0.2", *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _items(system: System, run_id: str) -> int:
    with system.catalog.cursor() as cur:
        return int(cur.execute("SELECT count(*) FROM source_run_items WHERE run_id = ?", [run_id]).fetchone()[0])


def _content(system: System, store: str) -> dict[str, int]:
    """Chunks by file name, after checking the vectors are the catalog's chunks exactly."""
    files = system.catalog.files(store)
    by_name = {f.file_name: f.chunks for f in files}
    assert len(by_name) == len(files), "a name twice"
    assert Workbench(system).vector_store(store).count() == sum(by_name.values())
    return by_name


@pytest.mark.processes
@pytest.mark.slow  # two worker processes (each a Python start-up and a model), 60 files read over HTTP
def test_a_worker_killed_mid_run_has_its_run_taken_over_and_the_store_converges(tmp_path: Path, own_webdav: DavFolder):
    paths = populate(own_webdav.folder, N)
    data = tmp_path / "data"
    system = System(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    config = {"url": own_webdav.url, "username": DAV_USER, "password": DAV_PASSWORD}
    system.sources.add("team", "webdav", "kb", config)
    run = system.sources.enqueue_run("team")
    first = _worker(data)
    try:
        deadline = time.monotonic() + 240
        while _items(system, run.id) < 10:
            assert first.poll() is None, first.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    done_before = _items(system, run.id)
    assert done_before < N + 1, "the run finished before the kill: nothing was tested"
    second = _worker(data, "--once")
    try:
        out, _ = second.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        second.kill()
        out, _ = second.communicate()
        raise AssertionError(f"the second worker did not finish: {out[-5000:]}") from None
    assert second.returncode == 0, out[-3000:]
    final = system.sources.get_run(run.id)
    assert final is not None and final.status == "done", (final, out[-2000:])
    assert final.counts["failed"] == 0
    _, [job], _ = queue.batch(system.catalog, run.batch_id or "")
    assert job.status == "done" and job.attempts == 2  # the killed worker's attempt, then the second's
    content = _content(system, "kb")
    assert sorted(content) == sorted(paths)
    assert DAV_PASSWORD not in out

    # a clean run into another store makes the same chunks; a further run changes nothing
    system.sources.add("ref", "webdav", "ref", config)
    assert system.sources.run("ref").ok
    assert _content(system, "ref") == content
    again = system.sources.run("team")
    assert again.ok and again.items == [] and again.counts["unchanged"] == N
