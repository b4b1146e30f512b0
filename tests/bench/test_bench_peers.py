"""Smoke test of bench/bench_peers.py: the engines that are always there, in a subprocess, tiny n."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_peers.py"
COLUMNS = [
    "engine",
    "insert/s",
    "index build",
    "disk / raw",
    "reopen + 1st query",
    "p50",
    "p95",
    "recall@10",
    "filtered p50 (1%)",
    "filtered recall@10",
]


def run(args: list[str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = (
        f"import runpy, sys; {prelude or 'pass'}; sys.argv = {[str(BENCH), *args]!r};"
        f" runpy.run_path({str(BENCH)!r}, run_name='__main__')"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, check=False, cwd=ROOT
    )


def tables(stdout: str) -> dict[str, list[list[str]]]:
    """The engine tables, by data set: each row split into its cells (header and separator dropped)."""
    found: dict[str, list[list[str]]] = {}
    current = None
    for line in stdout.splitlines():
        if line.startswith("### "):
            current = line.split()[1]
            found[current] = []
        elif current and line.startswith("| ") and not line.startswith("| engine ÷"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] == "engine":
                assert cells == COLUMNS
            elif not set(cells[0]) <= {"-"}:
                found[current].append(cells)
        elif not line.strip() and current and found[current]:
            current = None  # the ratio table follows the engine table after a blank line
    return found


@pytest.mark.processes
@pytest.mark.slow
def test_quick_run_prints_a_table_per_set_with_exact_recall(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    proc = run(
        [
            "--quick",
            "--n",
            "600",
            "--queries",
            "12",
            "--engines",
            "memory,numpy",
            "--sets",
            "random,clustered",
            "--json",
            str(out),
        ]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = tables(proc.stdout)
    assert list(found) == ["random", "clustered"]
    for rows in found.values():
        assert [r[0].split(" (")[0] for r in rows] == ["knowledge memory backend", "numpy exact floor, same process"]
        assert all(len(r) == len(COLUMNS) for r in rows)
        memory, floor = rows
        assert memory[1] != "—" and memory[3] != "—" and memory[4] != "—"  # insert/s, disk, reopen measured
        assert floor[1] == floor[3] == floor[4] == "—"  # the floor inserts nothing
    assert "| engine ÷ memory backend |" in proc.stdout
    report = json.loads(out.read_text())
    assert report["n"] == 600 and set(report["sets"]) == {"random", "clustered"}
    from knowledge.vectorstore.memory.collection import MemoryCollection

    approximate = hasattr(MemoryCollection, "ensure_ann_index")
    for figures in report["sets"].values():
        floor = figures["engines"]["numpy"]
        assert floor["recall"] == 1.0 and floor["filtered_recall"] == 1.0
        memory = figures["engines"]["memory"]
        assert memory["filtered_recall"] == 1.0  # the filtered path stays exact
        assert memory["recall"] >= 0.99 if approximate else memory["recall"] == 1.0
        assert memory["insert_per_s"] > 0 and memory["disk_ratio"] > 0 and memory["reopen_s"] > 0


@pytest.mark.processes
@pytest.mark.slow
def test_a_missing_peer_is_skipped_with_the_install_hint() -> None:
    proc = run(
        ["--quick", "--n", "300", "--queries", "4", "--engines", "numpy,chroma,lancedb", "--sets", "random"],
        prelude="sys.modules['chromadb'] = None; sys.modules['lancedb'] = None",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = tables(proc.stdout)["random"]
    assert [r[0] for r in rows] == ["numpy exact floor, same process", "chroma", "lancedb"]
    assert rows[1][1] == rows[2][1] == "skipped: pip install -r requirements-peers.txt"
    assert rows[0][7] == "1.000"


@pytest.mark.processes
@pytest.mark.slow  # a Python start-up: ~0.3 s idle, seconds under load
def test_an_unknown_engine_is_refused_by_name() -> None:
    proc = run(["--engines", "memory,faiss"])
    assert proc.returncode != 0
    assert "unknown engine(s) faiss" in proc.stderr
