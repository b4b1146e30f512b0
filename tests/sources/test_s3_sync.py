"""The issue's acceptance for the S3 source, end to end: a source added to a system, run by the engine
(knowledge/sources/engine.py) against a real S3-protocol server (moto's server mode,
tests/helpers/s3.py), the store searched; changes made through the S3 API (PutObject over a key,
CopyObject + DeleteObject as a rename, DeleteObject); faults of the real server. Which objects a run read
is taken from the server's own request log."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from knowledge.sources.base import Entry, Sink
from knowledge.sources.s3 import S3Source
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.s3 import S3_TEST_KEY, S3_TEST_SECRET, AuthMoto, MotoServer, s3_client
from tests.helpers.sources import counting_system, search_names

pytestmark = pytest.mark.s3

FILES = {
    "Handbook/holidays.md": "Holidays: every team member has 30 days of paid leave.",
    "Handbook/salary.md": "Salary reviews happen each March for the whole company.",
    "Notes Ü/todo.txt": "Water the office plants on Fridays.",
    "Reports 2024/Q1 résumé.txt": "The first quarter closed with record revenue in the northern region.",
}
PREFIX = "team/shared/"


def _note(i: int) -> bytes:
    return f"Note number {i:05d} tells of harbour {i} and the tides of day {i % 31}.".encode()


def _add(system: System, endpoint: str, bucket: str, key_id: str, secret: str, name: str = "team") -> None:
    system.sources.add(
        name,
        "s3",
        "kb",
        {
            "bucket": bucket,
            "prefix": PREFIX,
            "endpoint_url": endpoint,
            "region": "us-east-1",
            "access_key_id": key_id,
            "secret_access_key": secret,
        },
    )


def _chunks(system: System) -> tuple[int, int, dict[str, int]]:
    """(vectors in the store, the catalog's chunk total, chunks by file name)."""
    files = system.catalog.files("kb")
    return Workbench(system).vector_store("kb").count(), sum(f.chunks for f in files), {f.file_name: f.chunks for f in files}


def _rename(client: Any, bucket: str, old: str, new: str) -> None:
    """A rename as S3 has it: CopyObject, then DeleteObject."""
    client.copy_object(Bucket=bucket, Key=PREFIX + new, CopySource={"Bucket": bucket, "Key": PREFIX + old})
    client.delete_object(Bucket=bucket, Key=PREFIX + old)


@pytest.fixture
def bucket(s3_auth_server: AuthMoto) -> tuple[Any, str]:
    """A fresh bucket on the checking server, and a client with the allowed key."""
    client, name = s3_auth_server.client(), "sync-" + uuid.uuid4().hex[:16]
    client.create_bucket(Bucket=name)
    return client, name


def test_add_run_search_then_overwrite_rename_delete_update_exactly_those(tmp_path: Path, s3_auth_server, bucket) -> None:
    client, name = bucket
    server = s3_auth_server.server
    for rel, text in FILES.items():
        client.put_object(Bucket=name, Key=PREFIX + rel, Body=text.encode())
    client.put_object(Bucket=name, Key=PREFIX + "Handbook/", Body=b"")  # a folder marker: no file
    client.put_object(Bucket=name, Key="team/other/outside.txt", Body=b"not under the prefix")
    system, emb = counting_system(tmp_path)
    _add(system, s3_auth_server.endpoint, name, s3_auth_server.key_id, s3_auth_server.secret)

    mark = server.log_mark()
    first = system.sources.run("team")
    assert first.ok, first.summary()
    assert first.counts["added"] == 4 and first.counts["failed"] == 0
    assert sorted(server.object_reads(name, mark)) == sorted(PREFIX + p for p in FILES)
    hit = Workbench(system).search("kb", "paid leave holidays", 1)[0]
    assert hit.file_name == "Handbook/holidays.md"
    assert hit.metadata["attr_source"] == "team"
    assert hit.metadata["attr_source_url"] == f"s3://{name}/{PREFIX}Handbook/holidays.md"
    assert search_names(system, "kb", "record revenue first quarter northern region")[0] == "Reports 2024/Q1 résumé.txt"

    # nothing changed: nothing read, nothing embedded
    embedded, mark = emb.embedded, server.log_mark()
    again = system.sources.run("team")
    assert again.counts["unchanged"] == 4 and again.items == []
    assert server.object_reads(name, mark) == [] and emb.embedded == embedded

    # an overwrite, a rename (copy + delete), a delete, through the S3 API
    client.put_object(
        Bucket=name, Key=PREFIX + "Handbook/salary.md", Body=FILES["Handbook/salary.md"].replace("March", "April").encode()
    )
    _rename(client, name, "Handbook/holidays.md", "Archive 2026/holidays.md")
    client.delete_object(Bucket=name, Key=PREFIX + "Notes Ü/todo.txt")
    vectors, total, by_name = _chunks(system)
    assert vectors == total == sum(by_name.values())
    mark = server.log_mark()
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"changed": 1, "renamed": 1, "deleted": 1, "unchanged": 1}
    assert sorted((i.action, i.path, str(i.old_path)) for i in r.items) == [
        ("changed", "Handbook/salary.md", "None"),
        ("deleted", "Notes Ü/todo.txt", "None"),
        ("renamed", "Archive 2026/holidays.md", "Handbook/holidays.md"),
    ]
    # the rename was found by its ETag (the MD5 a copy keeps): not even read
    assert server.object_reads(name, mark) == [PREFIX + "Handbook/salary.md"]
    assert emb.embedded - embedded == by_name["Handbook/salary.md"]
    after_vectors, after_total, after = _chunks(system)
    assert after["Archive 2026/holidays.md"] == by_name["Handbook/holidays.md"]
    assert after_vectors == after_total == vectors - by_name["Notes Ü/todo.txt"]
    assert search_names(system, "kb", "paid leave holidays")[0] == "Archive 2026/holidays.md"
    assert search_names(system, "kb", "salary reviews April")[0] == "Handbook/salary.md"
    assert "Notes Ü/todo.txt" not in search_names(system, "kb", "office plants Fridays")


def test_a_rename_storm_reads_and_embeds_nothing(tmp_path: Path, s3_auth_server, bucket) -> None:
    client, name = bucket
    server = s3_auth_server.server
    for i in range(60):
        client.put_object(Bucket=name, Key=f"{PREFIX}batch-{i // 10:02d}/note-{i:05d}.txt", Body=_note(i))
    system, emb = counting_system(tmp_path)
    _add(system, s3_auth_server.endpoint, name, s3_auth_server.key_id, s3_auth_server.secret)
    assert system.sources.run("team").counts["added"] == 60
    vectors, total, _ = _chunks(system)
    embedded, mark = emb.embedded, server.log_mark()
    for i in range(60):  # a whole tree moved: every key copied and deleted
        _rename(client, name, f"batch-{i // 10:02d}/note-{i:05d}.txt", f"archive/{i % 3}/renamed-{i:05d}.txt")
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"renamed": 60}
    assert server.object_reads(name, mark) == [] and emb.embedded == embedded
    assert _chunks(system)[:2] == (vectors, total)
    assert search_names(system, "kb", "note number 00005 harbour 5", 1) == ["archive/2/renamed-00005.txt"]


def test_wrong_credentials_fail_the_run_in_words_and_no_secret_is_kept_or_said(
    tmp_path: Path, s3_auth_server, bucket, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    client, name = bucket
    client.put_object(Bucket=name, Key=PREFIX + "a.txt", Body=b"alpha bravo charlie")
    caplog.set_level(logging.DEBUG)
    system, _ = counting_system(tmp_path)
    wrong = "wrong-s3-secret-never-shown-" + uuid.uuid4().hex
    _add(system, s3_auth_server.endpoint, name, s3_auth_server.key_id, wrong, name="bad")
    r = system.sources.run("bad")
    assert r.run.status == "failed"
    assert "refused the credentials (SignatureDoesNotMatch" in (r.reason or "") and name in (r.reason or "")
    _add(system, s3_auth_server.endpoint, name, s3_auth_server.key_id, s3_auth_server.secret)
    assert system.sources.check("team").startswith("reached")
    assert system.sources.run("team").ok
    with system.catalog.cursor() as cur:
        tables = [t for (t,) in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        rows = {t: cur.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    assert {"sources", "source_runs", "source_run_items", "source_entries", "audit_events"} <= set(rows)
    out, err = capfd.readouterr()
    assert "Calculating signature" in caplog.text  # botocore's debug lines were captured too
    for secret in (wrong, s3_auth_server.secret):
        for text in (repr(rows), caplog.text, out, err, r.summary(), repr(system.sources.records())):
            assert secret not in text


# -- the server's faults, on a server of the test's own ------------------------------------------------------


def _own(tmp_path: Path, server: MotoServer) -> tuple[System, Any, str]:
    client, name = s3_client(server.endpoint), "own-" + uuid.uuid4().hex[:16]
    system, _ = counting_system(tmp_path)
    _add(system, server.endpoint, name, S3_TEST_KEY, S3_TEST_SECRET)
    return system, client, name


def _fill(client: Any, name: str, n: int) -> None:
    client.create_bucket(Bucket=name)
    for i in range(n):
        client.put_object(Bucket=name, Key=f"{PREFIX}batch-{i // 10:02d}/note-{i:05d}.txt", Body=_note(i))


def test_the_server_stopped_mid_run_ends_the_run_with_a_reason_and_the_next_run_converges(
    tmp_path: Path, own_moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    system, client, name = _own(tmp_path / "one", own_moto)
    _fill(client, name, 30)
    fetch, reads = S3Source.fetch, 0

    def stop_at_the_tenth_read(self: S3Source, entry: Entry, out: Sink) -> None:
        nonlocal reads
        reads += 1
        if reads == 10:
            own_moto.stop()  # the server goes away between two reads of the run
        fetch(self, entry, out)

    monkeypatch.setattr(S3Source, "fetch", stop_at_the_tenth_read)
    r = system.sources.run("team")
    assert r.run.status == "failed"
    assert "cannot be reached" in (r.reason or "") and own_moto.endpoint in (r.reason or "")
    assert r.counts["added"] == 9
    monkeypatch.setattr(S3Source, "fetch", fetch)

    own_moto.start()  # the same port; moto kept nothing in memory, so the same objects are put back
    _fill(client, name, 30)  # (the same bytes: the same ETags)
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert r.counts["added"] == 21 and r.counts["unchanged"] == 9 and r.counts["failed"] == 0

    # the same store as one clean run makes: every file once, every chunk once
    reference, _ = counting_system(tmp_path / "two")
    _add(reference, own_moto.endpoint, name, S3_TEST_KEY, S3_TEST_SECRET)
    assert reference.sources.run("team").counts["added"] == 30
    vectors, total, by_name = _chunks(system)
    assert (vectors, total, by_name) == _chunks(reference)
    assert vectors == total and len(by_name) == 30


def test_objects_deleted_or_overwritten_mid_run_fail_alone_and_the_next_run_converges(
    tmp_path: Path, own_moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    system, client, name = _own(tmp_path, own_moto)
    _fill(client, name, 12)
    deleted, overwritten = "batch-00/note-00005.txt", "batch-01/note-00011.txt"
    fetch = S3Source.fetch

    def meanwhile(self: S3Source, entry: Entry, out: Sink) -> None:
        if entry.path == deleted:
            client.delete_object(Bucket=name, Key=PREFIX + deleted)
        if entry.path == overwritten:
            client.put_object(Bucket=name, Key=PREFIX + overwritten, Body=b"Rewritten: the lighthouse keeper's log.")
        fetch(self, entry, out)

    monkeypatch.setattr(S3Source, "fetch", meanwhile)
    r = system.sources.run("team")
    assert r.run.status == "done" and r.counts["added"] == 10 and r.counts["failed"] == 2
    failed = {i.path: i.message for i in r.failed}
    assert set(failed) == {deleted, overwritten}
    assert "was deleted from bucket" in failed[deleted] and "overwritten since it was listed" in failed[overwritten]
    monkeypatch.setattr(S3Source, "fetch", fetch)

    r = system.sources.run("team")
    assert r.ok and r.counts["failed"] == 0 and r.counts["added"] == 1 and r.counts["unchanged"] == 10
    assert [i.path for i in r.items] == [overwritten]
    assert search_names(system, "kb", "lighthouse keeper's log", 1) == [overwritten]
    vectors, total, by_name = _chunks(system)
    assert vectors == total and len(by_name) == 11 and deleted not in by_name
