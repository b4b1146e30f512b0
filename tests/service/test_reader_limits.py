"""No file can take ingestion down (issue 38, item 1), through the product's own processes.

A batch holds a file whose reading needs more memory than ``ingest.reader_memory_mb`` and one that
takes longer than ``ingest.reader_timeout_seconds``, between ordinary files. A real ``knowledge
worker`` process and a real ``knowledge ingest`` process each end every file with an outcome: the
two fail with their reasons in words, the others are indexed, the worker is the same process from
the first job to the last and exits 0, and nothing of the failed files is in the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.catalog import jobs as q
from knowledge.config import load_settings
from knowledge.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]
LINE = b"the quick brown fox jumps over the lazy dog while the owls hunt mice at night\n"
LIMITS = {"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16", "KNOWLEDGE_INGEST__READER_MEMORY_MB": "160",
          "KNOWLEDGE_INGEST__READER_TIMEOUT_SECONDS": "2", "KNOWLEDGE_INGEST__READER_SECONDS_PER_MB": "0"}


def _batch(folder: Path) -> list[Path]:
    """Five files: three small notes, one that needs far more than 160 MB to read (90 MB of text:
    its bytes and its decoded text alone pass the limit), one that takes far more than 2 s to chunk
    (4 MB of text, about 17,000 chunks of the fake model)."""
    folder.mkdir()
    files = []
    for name, body in [("a-owls.md", b"# Owls\n\nOwls hunt mice at night.\n"),
                       ("b-huge.txt", LINE * (90_000_000 // len(LINE))),
                       ("c-bread.md", b"# Bread\n\nKnead the dough, let it rise.\n"),
                       ("d-slow.txt", LINE * (4_000_000 // len(LINE))),
                       ("e-tea.md", b"# Tea\n\nSteep green tea for two minutes.\n")]:
        (folder / name).write_bytes(body)
        files.append(folder / name)
    return files


def _env(data: Path) -> dict[str, str]:
    return {**os.environ, **LIMITS, "KNOWLEDGE_DATA_DIR": str(data), "PYTHONPATH": str(REPO)}


def _check_store(data: Path) -> None:
    wb = Workbench(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    try:
        files = {f.file_name: f for f in wb.store_files("notes")}
        assert {n: f.status for n, f in files.items()} == {
            "a-owls.md": "done", "b-huge.txt": "failed", "c-bread.md": "done", "d-slow.txt": "failed",
            "e-tea.md": "done"}
        huge, slow = files["b-huge.txt"].reason or "", files["d-slow.txt"].reason or ""
        assert huge.startswith("needed more than 160 MB of memory to read"), huge
        assert slow.startswith("took longer than 2.0 s to read"), slow
        assert "Error" not in huge + slow and "server log" not in huge + slow
        vs = wb.vector_store("notes")
        assert vs.count(files["b-huge.txt"].file_id) == 0 and vs.count(files["d-slow.txt"].file_id) == 0
        assert all(vs.count(files[n].file_id) == files[n].chunks > 0 for n in ("a-owls.md", "c-bread.md", "e-tea.md"))
    finally:
        wb.close()


@pytest.mark.slow  # a 90 MB file
def test_a_worker_process_fails_the_two_files_and_lives_on_to_ingest_the_rest(tmp_path):
    data = tmp_path / "data"
    files = _batch(tmp_path / "in")
    wb = Workbench(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    stored = [wb.files.save(p.name, "text/plain", p.read_bytes()) for p in files]
    wb.base.stores.open_for_write("notes", None)
    batch_id = q.enqueue(wb.catalog, "notes", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])
    wb.close()
    worker = subprocess.run([sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2"],
                            env=_env(data), capture_output=True, text=True, timeout=600)
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert "5 jobs processed" in worker.stdout + worker.stderr, worker.stderr[-2000:]
    wb = Workbench(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    try:
        _, rows, _ = q.batch(wb.catalog, batch_id)
        assert {r.name: r.status for r in rows} == {
            "a-owls.md": "done", "b-huge.txt": "failed", "c-bread.md": "done", "d-slow.txt": "failed",
            "e-tea.md": "done"}
        assert all(r.attempts == 1 for r in rows)  # a file's limit is not a worker's failure: no retry
        assert len({r.worker for r in rows}) == 1  # one worker process took every job, before and after
    finally:
        wb.close()
    _check_store(data)


@pytest.mark.slow  # a 90 MB file
def test_the_cli_prints_every_files_outcome_when_a_child_was_killed(tmp_path):
    data = tmp_path / "data"
    _batch(tmp_path / "in")
    run = subprocess.run([sys.executable, "-m", "knowledge", "ingest", "notes", str(tmp_path / "in")],
                         env=_env(data), capture_output=True, text=True, timeout=600)
    out = run.stdout
    assert run.returncode == 1, run.stderr[-3000:]  # some files failed
    for name in ("a-owls.md", "b-huge.txt", "c-bread.md", "d-slow.txt", "e-tea.md"):
        assert name in out, out
    assert "needed more than 160 MB of memory to read" in out and "took longer than 2.0 s to read" in out
    assert "5 files: 3 indexed, 2 failed" in out, out
    _check_store(data)
