"""Where the tests' temp files go (tests/conftest.py ``pytest_configure``, tests/helpers/env.py)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.env import MEMORY_TEMP_MIN_FREE, memory_temp_root

_SHM_TMPFS = "proc /proc proc rw 0 0\ntmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0\n/dev/vda / ext4 rw 0 0\n"


@pytest.mark.skipif(sys.platform != "linux", reason="/dev/shm and /proc/mounts are Linux's")
def test_the_temp_root_is_memory_only_where_it_is_a_tmpfs_with_room(monkeypatch, tmp_path):
    monkeypatch.delenv("PYTEST_DEBUG_TEMPROOT", raising=False)
    shm = str(tmp_path)  # a folder this user can write, standing for /dev/shm
    assert memory_temp_root(_SHM_TMPFS.replace("/dev/shm", shm), shm) == (
        shm if os.statvfs(shm).f_bavail * os.statvfs(shm).f_frsize >= MEMORY_TEMP_MIN_FREE else None
    )
    assert memory_temp_root(_SHM_TMPFS, shm) is None  # /dev/shm is mounted, not this folder
    assert memory_temp_root(_SHM_TMPFS.replace("/dev/shm tmpfs", f"{shm} ext4"), shm) is None  # a disk
    assert memory_temp_root("", shm) is None  # no /dev/shm at all
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", "/somewhere/else")
    assert memory_temp_root(_SHM_TMPFS.replace("/dev/shm", shm), shm) is None  # the user chose


def test_this_run_keeps_its_temp_files_under_the_chosen_root(tmp_path):
    """The variable set before the workers started is what ``tmp_path`` and ``tempfile`` use."""
    root = os.environ.get("PYTEST_DEBUG_TEMPROOT")
    if root is None:
        pytest.skip("no memory file system with room here: the temp files are on the disk")
    assert tmp_path.resolve().is_relative_to(Path(root).resolve())
    assert Path(tempfile.mkdtemp()).resolve().is_relative_to(Path(root).resolve())
