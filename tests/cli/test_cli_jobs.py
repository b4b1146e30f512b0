"""``ingest`` as a batch of ingestion jobs (issue 26, item 3): the batch's rows, two concurrent
commands into one store (defect (b): the second used to exit 2, "catalog in use"), and a command
that only queues (``ingest.worker_threads = 0``) while a ``worker`` process ingests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from knowledge.catalog import jobs as q
from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]


def _files(folder: Path, prefix: str, n: int, paragraphs: int = 6) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = folder / f"{prefix}{i}.md"
        p.write_text("\n\n".join(f"# {prefix} part {k}\n\n" + f"{prefix}word{i}x{k} " * 60 for k in range(paragraphs)))
        out.append(p)
    return out


def _cli(data: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    full = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_DATA_DIR": str(data),
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16",
        **(env or {}),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "knowledge", *argv], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _records(data: Path, store: str) -> dict[str, tuple[str, int, int]]:
    """``{file name: (status, chunks recorded, chunks in the vector store)}``, one record per name."""
    settings = load_settings(data_dir=data, embeddings={"model": "fake/hash-16"})
    wb = Workbench(settings)
    try:
        vs = wb.vector_store(store)
        out: dict[str, tuple[str, int, int]] = {}
        for f in wb.store_files(store):
            assert f.file_name not in out, f"two records named {f.file_name}"
            out[f.file_name] = (str(f.status), f.chunks, vs.count(f.file_id))
        return out
    finally:
        wb.close()


def test_cli_ingest_is_a_batch_of_job_rows(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    data = tmp_path / "data"
    files = _files(tmp_path / "docs", "a", 2)
    code = main(["--data-dir", str(data), "ingest", "notes", str(tmp_path / "docs"), str(tmp_path / "missing.md")])
    out, _ = capsys.readouterr()
    assert code == 1 and "missing.md" in out and "no such file or folder" in out  # said in its place
    assert out.index("a0.md") < out.index("a1.md") < out.index("missing.md")
    system = System(load_settings(data_dir=data))
    try:
        [batch] = q.batches(system.catalog, "notes")
        _, rows, _ = q.batch(system.catalog, batch.id)
        assert [(r.name, r.status, r.source_kind) for r in rows] == [(p.name, "done", "path") for p in files]
        assert all(r.result["outcome"] == "indexed" for r in rows)
    finally:
        system.close()


@pytest.mark.processes
@pytest.mark.slow
def test_two_concurrent_cli_ingests_into_one_store_both_end_ingested_each_file_once(tmp_path):
    """Defect (b): two ``ingest`` commands started together on one data folder (the embedded DuckDB
    catalog). Both exit 0, every file of both has one record whose chunk count the store agrees with."""
    data = tmp_path / "data"
    a = _files(tmp_path / "a", "a", 3, paragraphs=12)
    b = _files(tmp_path / "b", "b", 3, paragraphs=12)
    procs = [_cli(data, "ingest", "notes", str(tmp_path / "a")), _cli(data, "ingest", "notes", str(tmp_path / "b"))]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, (p.returncode, out, err[-3000:])
        assert "3 files: 3 indexed;" in out, out
    records = _records(data, "notes")
    assert sorted(records) == sorted(p.name for p in a + b)
    assert all(status == "done" and rec == vs > 0 for status, rec, vs in records.values()), records


@pytest.mark.processes
@pytest.mark.slow
def test_a_cli_ingest_that_runs_no_worker_waits_for_a_worker_process(tmp_path):
    data = tmp_path / "data"
    _files(tmp_path / "docs", "w", 2)
    cli = _cli(data, "ingest", "notes", str(tmp_path / "docs"), env={"KNOWLEDGE_INGEST__WORKER_THREADS": "0"})
    worker = None
    try:
        deadline = time.monotonic() + 120
        first = cli.stderr.readline()
        while "waiting for a worker" not in first:  # queued, not ingested: nobody works here
            assert cli.poll() is None and first, cli.communicate()
            assert time.monotonic() < deadline
            first = cli.stderr.readline()
        worker = _cli(data, "worker", "--once", "--poll", "0.2")
        out, err = cli.communicate(timeout=300)
        assert cli.returncode == 0 and "2 files: 2 indexed;" in out, (out, err)
        _w_out, w_err = worker.communicate(timeout=120)
        assert worker.returncode == 0 and "2 jobs processed" in w_err, w_err
        # an operator sees the worker start and each file's outcome in its log
        assert "worker: 1 thread on the catalog at" in w_err and w_err.count(" into notes: done (") == 2, w_err
    finally:
        for p in (cli, worker):
            if p is not None and p.poll() is None:
                p.kill()
    records = _records(data, "notes")
    assert sorted(records) == ["w0.md", "w1.md"]
    assert all(status == "done" and rec == vs > 0 for status, rec, vs in records.values()), records
