"""The issue's acceptance for the Git source, end to end: a source added to a system, run by the engine
(knowledge/sources/engine.py) against real repositories (file://, dulwich's smart HTTP behind basic
auth, Debian's sshd: tests/helpers/gitserver.py), the store searched; commits that change, rename and
delete; faults of the real server and a run killed mid-way."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge.sources.base import Entry, Sink
from knowledge.sources.git import GitSource
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.env import REPO
from tests.helpers.gitserver import GIT_PASSWORD, GIT_USER, GitHttpServer, GitSshServer, WorkRepo
from tests.helpers.sources import counting_system, search_names

FILES = {
    "handbook/holidays.md": "Holidays: every team member has 30 days of paid leave.",
    "handbook/salary.md": "Salary reviews happen each March for the whole company.",
    "notes/todo.txt": "Water the office plants on Fridays.",
    "reports/q1.txt": "The first quarter closed with record revenue in the northern region.",
}


@pytest.fixture
def fetched(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths whose blobs the Git source read (a spy on :meth:`GitSource.fetch`, which still reads)."""
    paths: list[str] = []
    real = GitSource.fetch

    def spy(self: GitSource, entry: Entry, out: Sink) -> None:
        paths.append(entry.path)
        real(self, entry, out)

    monkeypatch.setattr(GitSource, "fetch", spy)
    yield paths


def _chunks(system: System) -> tuple[int, int, dict[str, int]]:
    """(vectors in the store, the catalog's chunk total, chunks by file name)."""
    files = system.catalog.files("kb")
    return Workbench(system).vector_store("kb").count(), sum(f.chunks for f in files), {f.file_name: f.chunks for f in files}


def _taken(paths: list[str]) -> list[str]:
    out = sorted(paths)
    paths.clear()
    return out


def test_add_run_search_then_a_commit_updates_exactly_what_it_changed(tmp_path: Path, fetched: list[str]) -> None:
    repo = WorkRepo(tmp_path / "repo")
    first = repo.commit(FILES)
    system, emb = counting_system(tmp_path)
    system.sources.add("team", "git", "kb", {"url": repo.url})

    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert r.counts["added"] == 4 and r.counts["failed"] == 0
    assert _taken(fetched) == sorted(FILES)
    hit = Workbench(system).search("kb", "paid leave holidays", 1)[0]
    assert hit.file_name == "handbook/holidays.md"
    assert hit.metadata["attr_source"] == "team"
    assert hit.metadata["attr_commit"] == first
    assert hit.metadata["attr_source_url"] == f"{repo.url}@{first}:handbook/holidays.md"

    # no new commit: the marker is the same, nothing listed, read or embedded
    embedded = emb.embedded
    again = system.sources.run("team")
    assert again.ok and again.plan is not None and again.plan.unchanged_marker
    assert again.counts["unchanged"] == 4 and again.items == []
    assert fetched == [] and emb.embedded == embedded

    # one commit: a change, a rename into a new folder, a deletion
    vectors, total, by_name = _chunks(system)
    assert vectors == total == sum(by_name.values())
    second = repo.commit(
        {"handbook/salary.md": FILES["handbook/salary.md"].replace("March", "April")},
        rename={"handbook/holidays.md": "archive/2026/holidays.md"},
        delete=["notes/todo.txt"],
    )
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"changed": 1, "renamed": 1, "deleted": 1, "unchanged": 1}
    assert sorted((i.action, i.path, str(i.old_path)) for i in r.items) == [
        ("changed", "handbook/salary.md", "None"),
        ("deleted", "notes/todo.txt", "None"),
        ("renamed", "archive/2026/holidays.md", "handbook/holidays.md"),
    ]
    # the rename was found by its blob id: not read, not embedded
    assert _taken(fetched) == ["handbook/salary.md"]
    assert emb.embedded - embedded == by_name["handbook/salary.md"]
    after_vectors, after_total, after = _chunks(system)
    assert after["archive/2026/holidays.md"] == by_name["handbook/holidays.md"]
    assert after_vectors == after_total == vectors - by_name["notes/todo.txt"]
    assert search_names(system, "kb", "paid leave holidays")[0] == "archive/2026/holidays.md"
    salary = Workbench(system).search("kb", "salary reviews April", 1)[0]
    assert salary.file_name == "handbook/salary.md"
    assert salary.metadata["attr_commit"] == second
    assert salary.metadata["attr_source_url"] == f"{repo.url}@{second}:handbook/salary.md"
    assert "notes/todo.txt" not in search_names(system, "kb", "office plants Fridays")


def test_a_rename_storm_re_embeds_nothing_and_reads_no_blob(tmp_path: Path, fetched: list[str]) -> None:
    repo = WorkRepo(tmp_path / "repo")
    repo.commit(
        {f"batch-{i // 10}/note-{i:03d}.txt": f"Note {i:03d} of the rename storm, codeword{i:03d}." for i in range(40)}
    )
    system, emb = counting_system(tmp_path)
    system.sources.add("team", "git", "kb", {"url": repo.url})
    assert system.sources.run("team").counts["added"] == 40
    vectors, total, _ = _chunks(system)
    embedded = emb.embedded
    fetched.clear()
    renames = {"batch-0": "moved", "batch-1": "moved/deeper batch"}  # two folders of 10, at once
    renames |= {f"batch-{i // 10}/note-{i:03d}.txt": f"batch-{i // 10}/renamed-{i:03d}.txt" for i in range(20, 40)}
    repo.commit(rename=renames)
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"renamed": 40}
    assert fetched == [] and emb.embedded == embedded
    assert _chunks(system)[:2] == (vectors, total)
    expected = {f"moved/note-{i:03d}.txt" for i in range(10)} | {
        f"moved/deeper batch/note-{i:03d}.txt" for i in range(10, 20)
    }
    expected |= {f"batch-{i // 10}/renamed-{i:03d}.txt" for i in range(20, 40)}
    assert {f.file_name for f in system.catalog.files("kb")} == expected
    assert search_names(system, "kb", "codeword005", 1) == ["moved/note-005.txt"]
    assert search_names(system, "kb", "codeword015", 1) == ["moved/deeper batch/note-015.txt"]
    assert search_names(system, "kb", "codeword035", 1) == ["batch-3/renamed-035.txt"]


def test_a_folder_of_the_repository_over_http_and_wrong_credentials_in_words_without_a_secret(
    tmp_path: Path, git_http_server: GitHttpServer, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    name = f"sync-{tmp_path.name}"
    repo = WorkRepo(git_http_server.root / name)
    head = repo.commit({**FILES, "README.md": "The repository's front page, outside the folder."})
    url = git_http_server.url(name)
    system, _ = counting_system(tmp_path)
    wrong = "wrong-git-pw-never-shown-42"
    system.sources.add("bad", "git", "kb", {"url": url, "username": GIT_USER, "password": wrong})
    r = system.sources.run("bad")
    assert r.run.status == "failed"
    assert "refused the request with the configured user name and password (HTTP 401)" in (r.reason or "")

    system.sources.add("team", "git", "kb", {"url": url, "path": "handbook", "username": GIT_USER, "password": GIT_PASSWORD})
    assert system.sources.check("team") == f"reached; branch main at commit {head[:12]}, 2 files"
    r = system.sources.run("team")
    assert r.ok and r.counts["added"] == 2, r.summary()
    hit = Workbench(system).search("kb", "salary reviews March", 1)[0]
    assert hit.file_name == "salary.md"
    assert hit.metadata["attr_source_url"] == f"{url}@{head}:handbook/salary.md"
    with system.catalog.cursor() as cur:
        tables = [t for (t,) in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        rows = {t: cur.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    assert {"sources", "source_runs", "source_run_items", "source_entries", "audit_events"} <= set(rows)
    out, err = capfd.readouterr()
    for secret in (wrong, GIT_PASSWORD):
        for text in (repr(rows), caplog.text, out, err, r.summary(), repr(system.sources.records())):
            assert secret not in text


def test_the_server_dying_mid_fetch_ends_the_run_in_words_and_the_next_run_converges(tmp_path: Path) -> None:
    root = tmp_path / "srv"
    repo = WorkRepo(root / "repo")
    repo.commit({f"part-{i:02d}.txt": f"Part {i:02d} of the manual, chapter {i * 7}." for i in range(30)})
    server = GitHttpServer(root).start()
    config = {"url": server.url("repo"), "username": GIT_USER, "password": GIT_PASSWORD}
    try:
        system, _ = counting_system(tmp_path / "one")
        system.sources.add("team", "git", "kb", config)
        assert system.sources.run("team").counts["added"] == 30
        before = _chunks(system)
        repo.commit(
            {"part-00.txt": "Part 00, rewritten: the preface.", "part-30.txt": "Part 30, a new appendix."},
            rename={"part-01.txt": "moved/part-01.txt"},
            delete=["part-02.txt"],
        )
        server.die_mid_pack = True
        r = system.sources.run("team")
        assert r.run.status == "failed"
        assert "broke off while the repository was read" in (r.reason or ""), r.reason
        assert GIT_PASSWORD not in (r.reason or "")
        assert _chunks(system) == before, "nothing applied"

        server.wait_stopped()
        server.start()
        r = system.sources.run("team")
        assert r.ok, r.summary()
        assert {k: v for k, v in r.counts.items() if v} == {
            "added": 1,
            "changed": 1,
            "renamed": 1,
            "deleted": 1,
            "unchanged": 27,
        }
        # the same store as one clean run makes: every file once, every chunk once
        reference, _ = counting_system(tmp_path / "two")
        reference.sources.add("team", "git", "kb", config)
        assert reference.sources.run("team").counts["added"] == 30
        assert _chunks(system) == _chunks(reference)
    finally:
        server.stop()


_KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from knowledge.sources.git import GitSource
    from tests.helpers.sources import counting_system

    tmp, url, kill_at = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    real, n = GitSource.fetch, 0

    def fetch(self, entry, out):
        global n
        n += 1
        if n == kill_at:  # killed while the run applies: some files in the store, the rest not
            os.kill(os.getpid(), signal.SIGKILL)
        real(self, entry, out)

    GitSource.fetch = fetch
    system, _ = counting_system(tmp)
    system.sources.add("team", "git", "kb", {"url": url})
    system.sources.run("team")
    """
)


@pytest.mark.processes
def test_a_run_killed_mid_way_is_converged_by_the_next(tmp_path: Path) -> None:
    repo = WorkRepo(tmp_path / "repo")
    repo.commit({f"doc-{i:02d}.md": f"Document {i:02d} about topic {i * 3}." for i in range(20)})
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, str(tmp_path / "one"), repo.url, "11"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -9, child.stderr[-2000:]
    system, _ = counting_system(tmp_path / "one")
    done = len(system.catalog.files("kb"))
    assert 0 < done < 20
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert r.counts["failed"] == 0
    assert r.counts["added"] + r.counts["changed"] + r.counts["unchanged"] == 20
    assert r.counts["added"] == 20 - done
    again = system.sources.run("team")
    assert again.plan is not None and again.plan.unchanged_marker and again.items == []
    reference, _ = counting_system(tmp_path / "two")
    reference.sources.add("team", "git", "kb", {"url": repo.url})
    assert reference.sources.run("team").counts["added"] == 20
    assert _chunks(system) == _chunks(reference)


def test_over_ssh_with_a_key_that_is_kept_sealed(
    tmp_path: Path, git_sshd: GitSshServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    repo = WorkRepo(tmp_path / "repo")
    head = repo.commit(FILES)
    url = git_sshd.url(repo.folder)
    system, _ = counting_system(tmp_path)
    system.sources.add(
        "team", "git", "kb", {"url": url, "ssh_key": git_sshd.client_key, "known_hosts": git_sshd.known_hosts}
    )
    r = system.sources.run("team")
    assert r.ok and r.counts["added"] == 4, r.summary()
    hit = Workbench(system).search("kb", "record revenue first quarter", 1)[0]
    assert hit.file_name == "reports/q1.txt"
    assert hit.metadata["attr_source_url"] == f"{url}@{head}:reports/q1.txt"
    with system.catalog.cursor() as cur:
        rows = repr(cur.execute("SELECT * FROM sources").fetchall())
    key_lines = [line for line in git_sshd.client_key.splitlines() if "PRIVATE KEY" not in line and line]
    assert not any(line in rows or line in caplog.text for line in key_lines)
