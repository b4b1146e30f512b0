"""The repository, the shared corpus, and a test's isolation from the machine.

Every test runs with no ``KNOWLEDGE_*`` variables but a data folder of its own, and with the working
directory in a temp folder (tests/conftest.py applies :func:`isolate` to each); :func:`prepared_data`
builds a data folder once for a module or the session, :func:`use_prepared_data` copies it into a test's.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
#: The shared real-document corpus: ../shared/corpus beside the repository, or KNOWLEDGE_TEST_CORPUS.
CORPUS = Path(os.environ.get("KNOWLEDGE_TEST_CORPUS") or REPO.parent / "shared" / "corpus").resolve()
#: pytest-timeout's limit for a test that ingests the whole corpus (its first user pays the ingest).
CORPUS_TIMEOUT_S = 3600
#: The corpus README's example questions (read by the product's own parser).
README_QUESTIONS_FILE = REPO / "tests" / "data" / "corpus_readme_questions.tsv"
#: The scrypt work factor of the password hashes tests make (the product's is 2**14, ~50 ms of CPU
#: a hash; hundreds of accounts are made by the tests). A test marked ``product_scrypt`` keeps it.
TEST_SCRYPT_N = 2**8


def readme_questions() -> list[tuple[str, tuple[str, ...]]]:
    """The corpus README's example questions, each with the chapters that answer it, best first."""
    from knowledge.evaluation import parse_questions

    _, questions = parse_questions(README_QUESTIONS_FILE.read_bytes(), README_QUESTIONS_FILE.name)
    return [(q.text, tuple(c.file for c in q.relevant if c.file)) for q in questions]


def isolate(monkeypatch: pytest.MonkeyPatch, work: Path) -> Path:
    """No ``KNOWLEDGE_*`` variables but ``KNOWLEDGE_DATA_DIR = work/data``, working directory
    ``work``; returns the data folder."""
    for key in list(os.environ):
        if key.upper().startswith("KNOWLEDGE_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(work)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(work / "data"))
    return work / "data"


def prepared_data(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A data folder made once by ``build(work)`` (run isolated as a test is, with
    ``KNOWLEDGE_DATA_DIR = work/data``), for a module- or session-scoped fixture to share; each test
    then takes its own copy with :func:`use_prepared_data`, so what it changes stays its own."""
    work = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as mp:
        data = isolate(mp, work)
        build(work)
    return data


def use_prepared_data(data: Path) -> Path:
    """Copy the prepared data folder ``data`` into this test's data folder (``KNOWLEDGE_DATA_DIR``,
    which must not exist yet); returns it."""
    target = Path(os.environ["KNOWLEDGE_DATA_DIR"])
    shutil.copytree(data, target)
    return target


#: Bytes a memory file system must have free to take a test run's temp files (the inner loop writes ~3 GB, and
#: the last run's are kept until the next ends).
MEMORY_TEMP_MIN_FREE = 8 * 2**30


def memory_temp_root(mounts: str | None = None, shm: str = "/dev/shm") -> str | None:
    """``/dev/shm`` when it is a tmpfs (a file system in memory) with :data:`MEMORY_TEMP_MIN_FREE`
    bytes free that this user can write; ``None`` otherwise (not Linux, a small or absent ``/dev/shm``),
    and when ``PYTEST_DEBUG_TEMPROOT`` already names the tests' temp root. ``mounts``: the text of
    ``/proc/mounts`` (read when ``None``)."""
    if os.environ.get("PYTEST_DEBUG_TEMPROOT") or sys.platform != "linux":
        return None
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text(encoding="utf-8")
        except OSError:
            return None
    if not any(line.split()[1:3] == [shm, "tmpfs"] for line in mounts.splitlines()):
        return None
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize < MEMORY_TEMP_MIN_FREE or not os.access(shm, os.W_OK):
        return None
    return shm


def missing_server(what: str, reason: str) -> None:
    """A test server (``what``) cannot start: fail under CI=true, else skip."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} cannot start under CI=true: {reason}")
    pytest.skip(f"{what} unavailable: {reason}")


__all__ = [
    "CORPUS",
    "CORPUS_TIMEOUT_S",
    "README_QUESTIONS_FILE",
    "REPO",
    "TEST_SCRYPT_N",
    "isolate",
    "missing_server",
    "prepared_data",
    "readme_questions",
    "use_prepared_data",
]
