"""The issue's acceptance for the WebDAV source, end to end: a source added to a system, run by the engine
(knowledge/sources/engine.py) against a real WebDAV server (WsgiDAV, tests/helpers/webdav.py), the store
searched; changes made through WebDAV (MOVE, DELETE) or on the server's disk; faults of the real server."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.sources import counting_system, search_names
from tests.helpers.webdav import DAV_PASSWORD, DAV_USER, edit, populate, write
from tests.sources.conftest import DavFolder

FILES = {
    "Handbook/holidays.md": "Holidays: every team member has 30 days of paid leave.",
    "Handbook/salary.md": "Salary reviews happen each March for the whole company.",
    "Notes Ü/todo.txt": "Water the office plants on Fridays.",
    "Reports 2024/Q1 résumé.txt": "The first quarter closed with record revenue in the northern region.",
}


def _add(system: System, url: str, **config: Any) -> None:
    system.sources.add("team", "webdav", "kb", {"url": url, "username": DAV_USER, "password": DAV_PASSWORD, **config})


def _gets(dav: DavFolder) -> list[str]:
    """The files read (GET) since the last look, relative to the test's folder; forgets them."""
    prefix = "/" + dav.folder.relative_to(dav.server.root).as_posix() + "/"
    got = [p.removeprefix(prefix) for m, p, _ in dav.server.requests if m == "GET"]
    dav.server.requests.clear()
    return sorted(got)


def _chunks(system: System) -> tuple[int, int, dict[str, int]]:
    """(vectors in the store, the catalog's chunk total, chunks by file name)."""
    files = system.catalog.files("kb")
    return Workbench(system).vector_store("kb").count(), sum(f.chunks for f in files), {f.file_name: f.chunks for f in files}


def test_add_run_search_then_change_rename_delete_update_exactly_those(tmp_path: Path, dav: DavFolder) -> None:
    for rel, text in FILES.items():
        write(dav.folder / rel, text)
    system, emb = counting_system(tmp_path)
    _add(system, dav.url)

    first = system.sources.run("team")
    assert first.ok, first.summary()
    assert first.counts["added"] == 4 and first.counts["failed"] == 0
    assert _gets(dav) == sorted(FILES)
    hit = Workbench(system).search("kb", "paid leave holidays", 1)[0]
    assert hit.file_name == "Handbook/holidays.md"
    assert hit.metadata["attr_source"] == "team"
    assert hit.metadata["attr_source_url"] == dav.url + "Handbook/holidays.md"
    assert search_names(system, "kb", "record revenue first quarter northern region")[0] == "Reports 2024/Q1 résumé.txt"

    # nothing changed: nothing read, nothing embedded
    embedded = emb.embedded
    again = system.sources.run("team")
    assert again.counts["unchanged"] == 4 and again.items == []
    assert _gets(dav) == [] and emb.embedded == embedded

    # one edit (the same size: the ETag still moves), one MOVE, one DELETE, through the server
    edit(dav.folder / "Handbook/salary.md", FILES["Handbook/salary.md"].replace("March", "April"))
    here = dav.folder.relative_to(dav.server.root).as_posix()
    dav.server.mkcol(f"{here}/Archive 2026")
    dav.server.move(f"{here}/Handbook/holidays.md", f"{here}/Archive 2026/holidays.md")
    dav.server.delete(f"{here}/Notes Ü/todo.txt")
    dav.server.requests.clear()
    vectors, total, by_name = _chunks(system)
    assert vectors == total == sum(by_name.values())
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"changed": 1, "renamed": 1, "deleted": 1, "unchanged": 1}
    assert sorted((i.action, i.path, str(i.old_path)) for i in r.items) == [
        ("changed", "Handbook/salary.md", "None"),
        ("deleted", "Notes Ü/todo.txt", "None"),
        ("renamed", "Archive 2026/holidays.md", "Handbook/holidays.md"),
    ]
    # the rename was read (a WebDAV ETag is per path: found by its bytes) but embedded nothing
    assert _gets(dav) == ["Archive 2026/holidays.md", "Handbook/salary.md"]
    assert emb.embedded - embedded == by_name["Handbook/salary.md"]
    after_vectors, after_total, after = _chunks(system)
    assert after["Archive 2026/holidays.md"] == by_name["Handbook/holidays.md"]
    assert after_vectors == after_total == vectors - by_name["Notes Ü/todo.txt"]
    assert search_names(system, "kb", "paid leave holidays")[0] == "Archive 2026/holidays.md"
    assert search_names(system, "kb", "salary reviews April")[0] == "Handbook/salary.md"
    assert "Notes Ü/todo.txt" not in search_names(system, "kb", "office plants Fridays")


def test_a_rename_storm_re_embeds_nothing(tmp_path: Path, dav: DavFolder) -> None:
    populate(dav.folder, 40, per_folder=10)
    system, emb = counting_system(tmp_path)
    _add(system, dav.url)
    assert system.sources.run("team").counts["added"] == 40
    vectors, total, _ = _chunks(system)
    embedded = emb.embedded
    here = dav.folder.relative_to(dav.server.root).as_posix()
    dav.server.move(f"{here}/batch-0000", f"{here}/moved")  # a folder of 10, renamed at once
    dav.server.move(f"{here}/batch-0001", f"{here}/moved/deeper batch")
    for i in range(20, 40):  # and 20 files one by one
        folder = f"{here}/batch-{i // 10:04d}"
        dav.server.move(f"{folder}/note-{i:05d}.txt", f"{folder}/renamed-{i:05d}.txt")
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"renamed": 40}
    assert emb.embedded == embedded
    assert _chunks(system)[:2] == (vectors, total)
    assert search_names(system, "kb", "note number 00005", 1) == ["moved/note-00005.txt"]
    assert search_names(system, "kb", "note number 00035", 1) == ["batch-0003/renamed-00035.txt"]


def test_wrong_credentials_fail_the_run_in_words_and_no_secret_is_kept_or_said(
    tmp_path: Path, dav: DavFolder, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    write(dav.folder / "a.txt", "alpha bravo charlie")
    caplog.set_level(logging.DEBUG)
    system, _ = counting_system(tmp_path)
    wrong = "wrong-dav-pw-never-shown-42"
    system.sources.add("bad", "webdav", "kb", {"url": dav.url, "username": DAV_USER, "password": wrong})
    r = system.sources.run("bad")
    assert r.run.status == "failed"
    assert "refused the user name and password for the user 'ana'" in (r.reason or "")
    _add(system, dav.url)
    assert "1 file and 0 folders" in system.sources.check("team")
    assert system.sources.run("team").ok
    with system.catalog.cursor() as cur:
        tables = [t for (t,) in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        rows = {t: cur.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    assert {"sources", "source_runs", "source_run_items", "source_entries", "audit_events"} <= set(rows)
    out, err = capfd.readouterr()
    for secret in (wrong, DAV_PASSWORD):
        for text in (repr(rows), caplog.text, out, err, r.summary(), repr(system.sources.records())):
            assert secret not in text


def test_the_server_stopped_mid_run_ends_the_run_with_a_reason_and_the_next_run_converges(
    tmp_path: Path, own_webdav: DavFolder
) -> None:
    populate(own_webdav.folder, 30, per_folder=10)
    server = own_webdav.server
    gets = 0

    def stop_at_the_tenth_read(method: str, path: str) -> None:
        nonlocal gets
        if method == "GET":
            gets += 1
            if gets == 10:
                server.stop_soon()

    server.hook = stop_at_the_tenth_read
    system, _ = counting_system(tmp_path / "one")
    _add(system, own_webdav.url)
    r = system.sources.run("team")
    assert r.run.status == "failed"
    assert "WebDAV server at http://127.0.0.1" in (r.reason or "")
    assert any(w in (r.reason or "") for w in ("HTTP 503", "Could not connect", "connection"))
    done = r.counts.get("added", 0)
    assert 0 < done < 30

    server.wait_stopped()
    server.hook = None
    server.start()
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert r.counts["added"] == 30 - done and r.counts["unchanged"] == done and r.counts["failed"] == 0

    # the same store as one clean run makes: every file once, every chunk once
    reference, _ = counting_system(tmp_path / "two")
    _add(reference, own_webdav.url)
    assert reference.sources.run("team").counts["added"] == 30
    vectors, total, by_name = _chunks(system)
    assert (vectors, total, by_name) == _chunks(reference)
    assert len(by_name) == 30


def test_a_file_vanishing_mid_run_fails_alone_and_the_next_run_converges(tmp_path: Path, dav: DavFolder) -> None:
    populate(dav.folder, 12, per_folder=4)
    rel = "batch-0001/note-00005.txt"
    doomed = "/" + dav.folder.relative_to(dav.server.root).as_posix() + "/" + rel

    def vanish(method: str, path: str) -> None:
        if method == "GET" and path == doomed:
            (dav.folder / rel).unlink()

    dav.server.hook = vanish
    system, _ = counting_system(tmp_path)
    _add(system, dav.url)
    r = system.sources.run("team")
    assert r.run.status == "done" and r.counts["added"] == 11 and r.counts["failed"] == 1
    (failed,) = r.failed
    assert failed.path == rel and "is gone from the WebDAV server" in failed.message
    assert dav.url + quote(rel) in failed.message
    dav.server.hook = None
    r = system.sources.run("team")
    assert r.ok and r.counts["failed"] == 0 and r.counts["unchanged"] == 11 and r.items == []
    assert len(system.catalog.files("kb")) == 11 and _chunks(system)[0] == _chunks(system)[1]


def test_a_server_refusing_depth_infinity_syncs_all(tmp_path: Path, dav: DavFolder) -> None:
    for rel, text in FILES.items():
        write(dav.folder / rel, text)
    dav.server.refuse_infinity = True
    system, _ = counting_system(tmp_path)
    _add(system, dav.url, depth="infinity")
    r = system.sources.run("team")
    assert r.ok and r.counts["added"] == 4, r.summary()
    assert [d for m, _, d in dav.server.requests if m == "PROPFIND"][:2] == ["infinity", "1"]
