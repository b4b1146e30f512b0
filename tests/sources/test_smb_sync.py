"""The issue's acceptance for the SMB source, end to end: a source added to a system, run by the engine
(knowledge/sources/engine.py) against a real Samba server (tests/helpers/samba.py), the store searched;
changes made on the share's disk; NTFS ACLs set over SMB; faults of the real server (stopped mid-run,
a wrong password, a file gone between the listing and its read)."""

from __future__ import annotations

import io
import itertools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge.sources.base import Entry, Sink
from knowledge.sources.smb import SmbSource
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.samba import GROUP, SERVICE_USER, USERS, Samba, small_files, start_samba
from tests.helpers.sources import PW, counting_system, search_names

FILES = {
    "Handbook/holidays.md": "Holidays: every team member has 30 days of paid leave.",
    "Handbook/salary.md": "Salary reviews happen each March for the whole company.",
    "Notes Ü/todo.txt": "Water the office plants on Fridays.",
    "Reports 2024/Q1 résumé.txt": "The first quarter closed with record revenue in the northern region.",
}


@pytest.fixture(scope="module")
def samba(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Samba]:
    server = start_samba(tmp_path_factory.mktemp("samba-sync"))
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def folder(request: pytest.FixtureRequest) -> str:
    return "s_" + request.node.name[:50]


@pytest.fixture
def own_samba(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Samba]:
    server = start_samba(tmp_path_factory.mktemp("own-samba-sync"))
    try:
        yield server
    finally:
        server.remove()


class Paths(list[str]):
    """Paths read, in order; ``hook(entry)``, when set, runs before each read."""

    hook: Any = None


@pytest.fixture
def fetched(monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    """The paths the SMB source read (its ``fetch``), in order; a test may set ``hook`` on the list."""
    paths = Paths()
    original = SmbSource.fetch

    def counting(self: SmbSource, entry: Entry, out: Sink) -> None:
        paths.append(entry.path)
        if paths.hook:
            paths.hook(entry)
        original(self, entry, out)

    monkeypatch.setattr(SmbSource, "fetch", counting)
    yield paths


def _add(system: System, samba: Samba, folder: str, **config: Any) -> None:
    system.sources.add("share", "smb", "kb", samba.config(path=folder, **config))


def _chunks(system: System) -> tuple[int, int, dict[str, int]]:
    files = system.catalog.files("kb")
    return Workbench(system).vector_store("kb").count(), sum(f.chunks for f in files), {f.file_name: f.chunks for f in files}


def test_add_run_search_then_change_rename_delete_update_exactly_those(
    tmp_path: Path, samba: Samba, folder: str, fetched: Paths
) -> None:
    for rel, text in FILES.items():
        samba.write(f"{folder}/{rel}", text)
    system, emb = counting_system(tmp_path)
    _add(system, samba, folder)

    first = system.sources.run("share")
    assert first.ok, first.summary()
    assert first.counts["added"] == 4 and first.counts["failed"] == 0
    assert sorted(fetched) == sorted(FILES)
    hit = Workbench(system).search("kb", "paid leave holidays", 1)[0]
    assert hit.file_name == "Handbook/holidays.md"
    assert hit.metadata["attr_source"] == "share"
    assert hit.metadata["attr_source_url"] == f"smb://127.0.0.1:{samba.port}/docs/{folder}/Handbook/holidays.md"
    assert search_names(system, "kb", "record revenue first quarter northern region")[0] == "Reports 2024/Q1 résumé.txt"

    # nothing changed: nothing read, nothing embedded
    embedded, fetched[:] = emb.embedded, []
    again = system.sources.run("share")
    assert again.counts["unchanged"] == 4 and again.items == [] and fetched == []
    assert emb.embedded == embedded

    # one edit, one move into a new folder, one delete
    root = samba.root / folder
    samba.write(f"{folder}/Handbook/salary.md", FILES["Handbook/salary.md"].replace("March", "April"))
    (root / "Archive 2026").mkdir()
    os.rename(root / "Handbook/holidays.md", root / "Archive 2026/holidays.md")
    os.remove(root / "Notes Ü/todo.txt")
    vectors, total, by_name = _chunks(system)
    assert vectors == total == sum(by_name.values())
    r = system.sources.run("share")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"changed": 1, "renamed": 1, "deleted": 1, "unchanged": 1}
    assert sorted((i.action, i.path, str(i.old_path)) for i in r.items) == [
        ("changed", "Handbook/salary.md", "None"),
        ("deleted", "Notes Ü/todo.txt", "None"),
        ("renamed", "Archive 2026/holidays.md", "Handbook/holidays.md"),
    ]
    # the rename was found by its content key (the SMB file id): not read, not embedded
    assert fetched == ["Handbook/salary.md"]
    assert emb.embedded - embedded == by_name["Handbook/salary.md"]
    after_vectors, after_total, after = _chunks(system)
    assert after["Archive 2026/holidays.md"] == by_name["Handbook/holidays.md"]
    assert after_vectors == after_total == vectors - by_name["Notes Ü/todo.txt"]
    assert search_names(system, "kb", "paid leave holidays")[0] == "Archive 2026/holidays.md"
    assert search_names(system, "kb", "salary reviews April")[0] == "Handbook/salary.md"
    assert "Notes Ü/todo.txt" not in search_names(system, "kb", "office plants Fridays")


def test_a_rename_storm_reads_and_embeds_nothing(tmp_path: Path, samba: Samba, folder: str, fetched: Paths) -> None:
    for rel, data in small_files(60, per_folder=10):
        samba.write(f"{folder}/{rel}", data)
    system, emb = counting_system(tmp_path)
    _add(system, samba, folder)
    assert system.sources.run("share").counts["added"] == 60
    vectors, total, _ = _chunks(system)
    embedded, fetched[:] = emb.embedded, []
    root = samba.root / folder
    os.rename(root / "f0000", root / "moved")  # a folder of 10 at once
    os.rename(root / "f0001", root / "moved" / "deeper")
    for i in range(20, 60):  # and 40 files one by one
        sub = root / f"f{i // 10:04d}"
        os.rename(sub / f"file{i:06d}.txt", sub / f"renamed{i:06d}.txt")
    r = system.sources.run("share")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"renamed": 60}
    assert fetched == [] and emb.embedded == embedded
    assert _chunks(system)[:2] == (vectors, total)
    assert search_names(system, "kb", "Document 5 of the benchmark share", 1) == ["moved/file000005.txt"]
    assert search_names(system, "kb", "Document 35 of the benchmark share", 1) == ["f0003/renamed000035.txt"]


def test_readers_follow_the_acls_and_a_changed_acl_changes_them_on_the_next_run(
    tmp_path: Path, samba: Samba, folder: str, fetched: Paths
) -> None:
    ana, bo, hr = samba.sids["kn_ana"], samba.sids["kn_bo"], samba.sids[GROUP]
    samba.write(f"{folder}/hr/pay.md", "Confidential pay bands for the engineering ladder.")
    samba.write(f"{folder}/hr/review.md", "The annual review calendar of the human resources team.")
    samba.write(f"{folder}/public/canteen.md", "The canteen serves lunch from noon on weekdays.")
    samba.set_acl(f"{folder}/hr/pay.md", f"D:P(A;;FR;;;{ana})")
    samba.set_acl(f"{folder}/hr/review.md", f"D:P(A;;FR;;;{hr})")
    samba.set_acl(f"{folder}/public/canteen.md", "D:P(A;;FR;;;WD)")
    system, emb = counting_system(tmp_path, sources={"sid_map": {ana: "user:ana", bo: "user:bo", hr: "group:hr"}})
    people = system.people
    people.set_up_admin("root", PW)
    for user in ("ana", "bo", "cy"):
        people.accounts.create(user, PW)
    people.accounts.create_group("hr")
    people.accounts.add_to_group("hr", "cy")
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store("kb")
    root.share_store("kb", "everyone", "", "read")
    _add(system, samba, folder)
    r = system.sources.run("share")
    assert r.ok and r.counts["added"] == 3, r.summary()
    assert {f.file_name: f.readers for f in system.catalog.files("kb")} == {
        "hr/pay.md": ("user:ana",),
        "hr/review.md": ("group:hr",),
        "public/canteen.md": None,
    }

    def sees(user: str, query: str) -> list[str]:
        return search_names(system, "kb", query, wb=Workbench(system).as_user(people.accounts.actor(user)))

    assert "hr/pay.md" in sees("ana", "pay bands engineering")
    assert "hr/pay.md" not in sees("bo", "pay bands engineering")
    assert "hr/review.md" in sees("cy", "annual review calendar human resources")
    assert "hr/review.md" not in sees("bo", "annual review calendar human resources")
    assert "public/canteen.md" in sees("bo", "canteen lunch noon")

    # the ACL changes at the source: only the readers change, nothing is read or embedded
    samba.set_acl(f"{folder}/hr/pay.md", f"D:P(A;;FR;;;{ana})(A;;FR;;;{bo})")
    embedded, fetched[:] = emb.embedded, []
    r = system.sources.run("share")
    assert r.ok, r.summary()
    assert [(i.action, i.path) for i in r.items] == [("readers", "hr/pay.md")]
    assert fetched == [] and emb.embedded == embedded
    assert "hr/pay.md" in sees("bo", "pay bands engineering")


def test_the_server_stopped_mid_run_ends_the_run_with_a_reason_and_the_next_run_converges(
    tmp_path: Path, own_samba: Samba, fetched: Paths
) -> None:
    for rel, data in small_files(30, per_folder=10):
        own_samba.write(rel, data)

    def stop_at_the_tenth_read(entry: Entry) -> None:
        if len(fetched) == 10:
            own_samba.stop()

    fetched.hook = stop_at_the_tenth_read
    system, _ = counting_system(tmp_path / "one", sources={"timeout_seconds": 5})
    system.sources.add("share", "smb", "kb", own_samba.config())
    r = system.sources.run("share")
    assert r.run.status == "failed"
    assert f"The SMB server 127.0.0.1:{own_samba.port}" in (r.reason or ""), r.reason
    assert USERS[SERVICE_USER] not in (r.reason or "")
    done = r.counts.get("added", 0)
    assert 0 < done < 30

    fetched.hook = None
    own_samba.start()
    r = system.sources.run("share")
    assert r.ok, r.summary()
    assert r.counts["added"] == 30 - done and r.counts["unchanged"] == done and r.counts["failed"] == 0

    # the same store as one clean run makes: every file once, every chunk once
    reference, _ = counting_system(tmp_path / "two")
    reference.sources.add("share", "smb", "kb", own_samba.config())
    assert reference.sources.run("share").counts["added"] == 30
    vectors, total, by_name = _chunks(system)
    assert (vectors, total, by_name) == _chunks(reference)
    assert len(by_name) == 30


def test_a_file_vanishing_mid_run_fails_alone_and_the_next_run_converges(
    tmp_path: Path, samba: Samba, folder: str, fetched: Paths
) -> None:
    for rel, data in small_files(12, per_folder=4):
        samba.write(f"{folder}/{rel}", data)
    doomed = "f0001/file000005.txt"

    def vanish(entry: Entry) -> None:
        if entry.path == doomed:
            (samba.root / folder / doomed).unlink()

    fetched.hook = vanish
    system, _ = counting_system(tmp_path)
    _add(system, samba, folder)
    r = system.sources.run("share")
    assert r.run.status == "done" and r.counts["added"] == 11 and r.counts["failed"] == 1, r.summary()
    (failed,) = r.failed
    assert failed.path == doomed and "is no longer on the share" in failed.message
    fetched.hook = None
    r = system.sources.run("share")
    assert r.ok and r.counts["failed"] == 0 and r.counts["unchanged"] == 11 and r.items == []
    assert len(system.catalog.files("kb")) == 11 and _chunks(system)[0] == _chunks(system)[1]


def test_wrong_credentials_fail_the_run_in_words_and_no_secret_is_kept_or_said(
    tmp_path: Path, samba: Samba, folder: str, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    samba.write(f"{folder}/a.txt", "alpha bravo charlie")
    caplog.set_level(logging.DEBUG)
    system, _ = counting_system(tmp_path)
    wrong = "wrong-smb-pw-never-shown-42"
    system.sources.add("bad", "smb", "kb", samba.config(path=folder, password=wrong))
    r = system.sources.run("bad")
    assert r.run.status == "failed"
    assert "refused the user name or password of kn_svc" in (r.reason or ""), r.reason
    _add(system, samba, folder)
    assert "1 file and 0 folders" in system.sources.check("share")
    assert system.sources.run("share").ok
    with system.catalog.cursor() as cur:
        tables = [t for (t,) in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        rows = {t: cur.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    assert {"sources", "source_runs", "source_run_items", "source_entries", "audit_events"} <= set(rows)
    out, err = capfd.readouterr()
    for secret in (wrong, USERS[SERVICE_USER]):
        for text in (repr(rows), caplog.text, out, err, r.summary(), repr(system.sources.records())):
            assert secret not in text


@pytest.mark.slow
def test_a_listing_of_100000_files(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The source lists 100,000 files (the listing only: the engine's plan of as many is its own test)."""
    server = start_samba(tmp_path_factory.mktemp("samba-100k"))
    try:
        for rel, data in small_files(100_000, per_folder=1000, size=40):
            server.write(rel, data)
        with SmbSource(server.config(), _context()) as src:
            seen = {e.path: e for e in src.entries()}
        assert len(seen) == 100_000
        last = next(itertools.islice(small_files(100_000, per_folder=1000, size=40), 99_999, None))
        assert seen[last[0]].size == len(last[1])
        assert len({e.content_key for e in seen.values()}) == 100_000
        out = io.BytesIO()
        with SmbSource(server.config(), _context()) as src:
            src.fetch(seen["f0042/file042424.txt"], out)
        assert out.getvalue().startswith(b"Document 42424 ")
    finally:
        server.remove()


def _context() -> Any:
    from knowledge.config import Settings
    from knowledge.sources.base import SourceContext

    return SourceContext(settings=Settings(), timeout=30)
