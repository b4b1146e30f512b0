"""Smoke test of bench/bench_sources.py: in a subprocess, 200 files from a real Samba and a real WebDAV
server and the local folder baseline; each prints a first sync of every file, a sync with nothing
changed, and an incremental sync that changed exactly 1% (2 files)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.env import missing_server

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_sources.py"


@pytest.mark.processes
@pytest.mark.slow  # three syncs of 200 files from two servers and a folder, in a subprocess
def test_the_bench_prints_a_first_an_idle_and_a_one_percent_sync_per_kind():
    if not Path("/usr/sbin/smbd").exists():
        missing_server("Samba", "smbd is not installed (apt-get install samba)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--files", "200", "--fake"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    firsts = re.findall(r"^(\S+).*first\s+[\d.]+ s\s+[\d.]+ files/s\s+\((\d+) added\)$", out, re.M)
    assert [k for k, _ in firsts] == ["folder", "smb", "webdav"] and all(n == "200" for _, n in firsts), out
    assert len(re.findall(r"nothing changed .*\(200 unchanged\)$", out, re.M)) == 3, out
    assert len(re.findall(r"1% changed \(2 files\) .* of the first\s+\(2 changed, 198 unchanged\)$", out, re.M)) == 3, out
