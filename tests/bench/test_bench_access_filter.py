"""Smoke test of bench/bench_access_filter.py: in a subprocess, a tiny store, the backends without a
server; every filtered search finds the readable top 10 and never comes back short."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_access_filter.py"


@pytest.mark.processes
@pytest.mark.slow  # a benchmark run in a subprocess: a Python start-up, qdrant-client's import, two stores
def test_the_bench_prints_each_filter_with_full_recall_and_k_hits():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--n", "3000", "--queries", "5", "--backends", "memory,qdrant"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = re.findall(r"^(unfiltered|hides \d+%)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$", done.stdout, re.M)
    assert [r[0] for r in rows] == ["unfiltered", "hides 0%", "hides 50%", "hides 99%"] * 2, done.stdout
    assert all(float(r[4]) == 1.0 and r[5] == "0" for r in rows), done.stdout
