"""No file can take ingestion down (issue 38, item 1), through the product's own processes.

Each limit gets a batch of its own, a file past it between ordinary notes: one whose reading needs
more memory than ``ingest.reader_memory_mb``, one that takes longer than
``ingest.reader_timeout_seconds``. A real ``knowledge worker`` process and a real ``knowledge
ingest`` process end every file with an outcome: the one fails with its reason in words, the others
are indexed, the worker is the same process from the first job to the last and exits 0, and nothing
of the failed file is in the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from knowledge.catalog import jobs as q
from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]
LINE = b"the quick brown fox jumps over the lazy dog while the owls hunt mice at night\n"
NOTES = {
    "a-owls.md": b"# Owls\n\nOwls hunt mice at night.\n",
    "c-bread.md": b"# Bread\n\nKnead the dough.\n",
    "e-tea.md": b"# Tea\n\nSteep green tea for two minutes.\n",
}

#: limit -> (the settings, the file past it, the start of its reason). The memory case: 90 MB of text,
#: whose bytes, decoded text and cleaned copy need about 350 MB, against 256 MB (the least the setting
#: takes), with all the time it wants. The time case: 12 MB of text, about 10 s to read and chunk into
#: some 50,000 chunks of the fake model, against 1 s, with memory to spare; a note takes milliseconds.
CASES = {
    "memory": (
        {"KNOWLEDGE_INGEST__READER_MEMORY_MB": "256"},
        ("b-huge.txt", 90),
        "needed more than 256 MB of memory to read",
    ),
    "time": (
        {"KNOWLEDGE_INGEST__READER_TIMEOUT_SECONDS": "1", "KNOWLEDGE_INGEST__READER_SECONDS_PER_MB": "0"},
        ("d-slow.txt", 12),
        "took longer than 1.0 s to read (the limit for a file of 12.0 MB",
    ),
}


def _batch(folder: Path, case: str) -> list[Path]:
    folder.mkdir()
    name, mb = CASES[case][1]
    files = {**NOTES, name: LINE * (mb * 1_000_000 // len(LINE))}
    for n in sorted(files):
        (folder / n).write_bytes(files[n])
    return [folder / n for n in sorted(files)]


def _env(data: Path, case: str) -> dict[str, str]:
    return {
        **os.environ,
        "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16",
        **CASES[case][0],
        "KNOWLEDGE_DATA_DIR": str(data),
        "PYTHONPATH": str(REPO),
    }


def _check_store(data: Path, case: str) -> None:
    bad, reason = CASES[case][1][0], CASES[case][2]
    wb = Workbench(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    try:
        files = {f.file_name: f for f in wb.store_files("notes")}
        assert {n: f.status for n, f in files.items()} == {**dict.fromkeys(NOTES, "done"), bad: "failed"}
        said = files[bad].reason or ""
        assert said.startswith(reason), said
        assert "Error" not in said and "server log" not in said
        vs = wb.vector_store("notes")
        assert vs.count(files[bad].file_id) == 0
        assert all(vs.count(files[n].file_id) == files[n].chunks > 0 for n in NOTES)
    finally:
        wb.close()


@pytest.mark.processes
@pytest.mark.slow  # a 90 MB file; a 12 MB one
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_worker_process_fails_the_file_past_a_limit_and_lives_on_to_ingest_the_rest(tmp_path, case):
    data = tmp_path / "data"
    files = _batch(tmp_path / "in", case)
    system = System(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    stored = [system.files.save(p.name, "text/plain", p.read_bytes()) for p in files]
    system.stores.open_for_write("notes", None)
    batch_id = q.enqueue(system.catalog, "notes", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])
    system.close()
    worker = subprocess.run(
        [sys.executable, "-m", "knowledge", "worker", "--once", "--poll", "0.2"],
        env=_env(data, case),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert worker.returncode == 0, worker.stderr[-3000:]
    assert "4 jobs processed" in worker.stdout + worker.stderr, worker.stderr[-2000:]
    system = System(load_settings(data_dir=data, embeddings={"model": "fake/hash-16"}))
    try:
        _, rows, _ = q.batch(system.catalog, batch_id)
        bad = CASES[case][1][0]
        assert {r.name: r.status for r in rows} == {**dict.fromkeys(NOTES, "done"), bad: "failed"}
        assert all(r.attempts == 1 for r in rows)  # a file's limit is not a worker's failure: no retry
        assert len({r.worker for r in rows}) == 1  # one worker process took every job, before and after
    finally:
        system.close()
    _check_store(data, case)


@pytest.mark.processes
@pytest.mark.slow  # a 90 MB file; a 12 MB one
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_cli_prints_every_files_outcome_when_a_child_was_killed(tmp_path, case):
    data = tmp_path / "data"
    files = _batch(tmp_path / "in", case)
    run = subprocess.run(
        [sys.executable, "-m", "knowledge", "ingest", "notes", str(tmp_path / "in")],
        env=_env(data, case),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout
    assert run.returncode == 1, run.stderr[-3000:]  # a file failed
    for p in files:
        assert p.name in out, out
    assert CASES[case][2] in out, out
    assert "4 files: 3 indexed, 1 failed" in out, out
    _check_store(data, case)
