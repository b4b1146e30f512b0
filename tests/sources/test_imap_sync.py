"""The issue's acceptance for the IMAP source, end to end: a mailbox added as a source of a system, run by
the engine (knowledge/sources/engine.py) against a real Dovecot (tests/helpers/dovecot.py), the store
searched; mail delivered, moved and expunged through IMAP; faults of the real server."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from knowledge.sources.base import Entry, Sink
from knowledge.sources.imap import ImapSource
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.chat import pdf_bytes
from tests.helpers.dovecot import Dovecot, make_message
from tests.helpers.sources import PW, counting_system, search_names

REPORT = make_message(
    "Quarterly report",
    "The northern region closed the quarter with record revenue.",
    attachments=[("figures.pdf", pdf_bytes(["cover page", "Turbine MERLIN-4417 output doubled"]), "application/pdf")],
)
HOLIDAYS = make_message("Holiday plan", "Every team member has thirty days of paid leave.")
OLD = make_message("Office plants", "Water the office plants on Fridays.", sender="Bo Berg <bo@example.org>")
REPORT_PATH = "INBOX/2024-03-05 Quarterly report (1).eml"


def _add(system: System, server: Dovecot, user: str, **config: Any) -> None:
    settings = {"host": server.host, "port": server.port, "tls": "none", "username": user, "password": server.users[user]}
    system.sources.add("mail", "imap", "kb", {"folders": "INBOX, Archive", **settings, **config})


def _mailbox(server: Dovecot) -> str:
    user, _ = server.add_user()
    server.append(user, "INBOX", REPORT)
    server.append(user, "INBOX", HOLIDAYS)
    server.append(user, "Archive", OLD)
    return user


def _chunks(system: System) -> tuple[int, int, dict[str, int]]:
    """(vectors in the store, the catalog's chunk total, chunks by file name)."""
    files = system.catalog.files("kb")
    return Workbench(system).vector_store("kb").count(), sum(f.chunks for f in files), {f.file_name: f.chunks for f in files}


@pytest.fixture
def fetched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the IMAP source reads (fetch), in order."""
    paths: list[str] = []
    fetch = ImapSource.fetch

    def counted(self: ImapSource, entry: Entry, out: Sink) -> None:
        paths.append(entry.path)
        fetch(self, entry, out)

    monkeypatch.setattr(ImapSource, "fetch", counted)
    return paths


def _move(server: Dovecot, user: str, folder: str, uids: list[int], to: str) -> None:
    client = server.client(user)
    try:
        if not client.folder_exists(to):
            client.create_folder(to)
        client.select_folder(folder)
        client.move(uids, to)
    finally:
        client.logout()


def _expunge(server: Dovecot, user: str, folder: str, uids: list[int]) -> None:
    client = server.client(user)
    try:
        client.select_folder(folder)
        client.delete_messages(uids)
        client.expunge()
    finally:
        client.logout()


def test_add_run_search_then_new_moved_and_expunged_mail_update_exactly_those(tmp_path: Path, dovecot, fetched) -> None:
    user = _mailbox(dovecot)
    system, emb = counting_system(tmp_path)
    _add(system, dovecot, user)

    first = system.sources.run("mail")
    assert first.ok, first.summary()
    assert first.counts["added"] == 3 and first.counts["failed"] == 0
    assert sorted(fetched) == sorted(
        [REPORT_PATH, "INBOX/2024-03-05 Holiday plan (2).eml", "Archive/2024-03-05 Office plants (1).eml"]
    )
    hit = Workbench(system).search("kb", "record revenue northern region quarter", 1)[0]
    assert hit.file_name == REPORT_PATH
    assert hit.metadata["attr_source"] == "mail"
    assert hit.metadata["attr_source_url"].startswith(f"imap://{user}@127.0.0.1:{dovecot.port}/INBOX;UIDVALIDITY=")
    assert hit.metadata["attr_subject"] == "Quarterly report"
    assert search_names(system, "kb", "Turbine MERLIN-4417 output doubled")[0] == REPORT_PATH  # the PDF attachment
    client = dovecot.client(user)
    client.select_folder("INBOX", readonly=True)
    assert all(b"\\Seen" not in f for f in client.get_flags([1, 2]).values())  # reading set no flag
    client.logout()

    # nothing changed: the marker says so, nothing listed, read or embedded
    embedded, fetched[:] = emb.embedded, []
    again = system.sources.run("mail")
    assert again.ok and again.counts["unchanged"] == 3 and again.items == []
    assert again.plan is not None and again.plan.unchanged_marker
    assert fetched == [] and emb.embedded == embedded

    # a new message, one moved to the archive, one expunged
    dovecot.append(user, "INBOX", make_message("Parking", "The car park closes at nine for resurfacing."))
    _move(dovecot, user, "INBOX", [2], "Archive")
    _expunge(dovecot, user, "Archive", [1])
    vectors, total, by_name = _chunks(system)
    r = system.sources.run("mail")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"added": 1, "renamed": 1, "deleted": 1, "unchanged": 1}
    assert sorted((i.action, i.path, str(i.old_path)) for i in r.items) == [
        ("added", "INBOX/2024-03-05 Parking (3).eml", "None"),
        ("deleted", "Archive/2024-03-05 Office plants (1).eml", "None"),
        ("renamed", "Archive/2024-03-05 Holiday plan (2).eml", "INBOX/2024-03-05 Holiday plan (2).eml"),
    ]
    assert fetched == ["INBOX/2024-03-05 Parking (3).eml"]  # the move was found by its Message-ID: not read
    after_vectors, after_total, after = _chunks(system)
    assert emb.embedded - embedded == after["INBOX/2024-03-05 Parking (3).eml"]
    assert after["Archive/2024-03-05 Holiday plan (2).eml"] == by_name["INBOX/2024-03-05 Holiday plan (2).eml"]
    assert after_vectors == after_total
    assert (
        after_total
        == total - by_name["Archive/2024-03-05 Office plants (1).eml"] + after["INBOX/2024-03-05 Parking (3).eml"]
    )
    assert vectors == total
    assert search_names(system, "kb", "thirty days of paid leave")[0] == "Archive/2024-03-05 Holiday plan (2).eml"
    assert search_names(system, "kb", "car park closes resurfacing")[0] == "INBOX/2024-03-05 Parking (3).eml"
    assert "Archive/2024-03-05 Office plants (1).eml" not in search_names(system, "kb", "office plants Fridays")


def test_a_move_storm_and_a_uidvalidity_reset_re_read_and_re_embed_nothing(tmp_path: Path, dovecot, fetched) -> None:
    user, _ = dovecot.add_user()
    tickets = [make_message(f"Ticket {n}", f"Ticket number {n}: the printer on floor {n} jams.") for n in range(30)]
    for message in tickets:
        dovecot.append(user, "INBOX", message)
    system, emb = counting_system(tmp_path)
    _add(system, dovecot, user, folders="*")
    assert system.sources.run("mail").counts["added"] == 30
    vectors, total, _ = _chunks(system)
    embedded, fetched[:] = emb.embedded, []

    _move(dovecot, user, "INBOX", list(range(1, 21)), "Done")  # 20 moved in one MOVE
    r = system.sources.run("mail")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"renamed": 20, "unchanged": 10}
    assert fetched == [] and emb.embedded == embedded and _chunks(system)[:2] == (vectors, total)
    assert search_names(system, "kb", "Ticket number 7 printer floor 7 jams", 1) == ["Done/2024-03-05 Ticket 7 (8).eml"]

    # the folder made again (a migration, a restore): a new UIDVALIDITY, every message renumbered
    client = dovecot.client(user)
    client.delete_folder("Done")
    client.create_folder("Done")
    for message in reversed(tickets[:20]):
        client.append("Done", message)
    client.logout()
    r = system.sources.run("mail")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"renamed": 20, "unchanged": 10}
    assert fetched == [] and emb.embedded == embedded and _chunks(system)[:2] == (vectors, total)
    assert search_names(system, "kb", "Ticket number 7 printer floor 7 jams", 1) == ["Done/2024-03-05 Ticket 7 (13).eml"]


def test_the_owner_reads_the_mailbox_and_another_account_does_not(tmp_path: Path, dovecot) -> None:
    system, _ = counting_system(tmp_path)
    people = system.people
    people.set_up_admin("root", PW)
    user = _mailbox(dovecot)  # an IMAP account whose name is an account of the product too
    people.accounts.create(user, PW)
    people.accounts.create("bob", PW)
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store("kb")
    root.share_store("kb", "everyone", "", "read")
    _add(system, dovecot, user)
    assert system.sources.run("mail").ok
    owner = Workbench(system).as_user(people.accounts.actor(user))
    bob = Workbench(system).as_user(people.accounts.actor("bob"))
    assert search_names(system, "kb", "record revenue northern region", wb=owner)[0] == REPORT_PATH
    assert REPORT_PATH not in search_names(system, "kb", "record revenue northern region", wb=bob)
    assert search_names(system, "kb", "record revenue northern region", wb=bob) == []

    # the mailbox given to someone else (a shared mailbox names a group the same way): only the readers change
    system.sources.update("mail", config={"owner": "user:bob"})
    r = system.sources.run("mail")
    assert r.ok, r.summary()
    assert {i.action for i in r.items} == {"readers"}
    assert search_names(system, "kb", "record revenue northern region", wb=bob)[0] == REPORT_PATH
    assert REPORT_PATH not in search_names(system, "kb", "record revenue northern region", wb=owner)


def test_wrong_credentials_fail_the_run_in_words_and_no_secret_is_kept_or_said(
    tmp_path: Path, own_dovecot, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    user = _mailbox(own_dovecot)
    caplog.set_level(logging.DEBUG)
    system, _ = counting_system(tmp_path)
    wrong = "wrong-imap-pw-never-shown-42"
    system.sources.add(
        "bad",
        "imap",
        "kb",
        {"host": own_dovecot.host, "port": own_dovecot.port, "tls": "none", "username": user, "password": wrong},
    )
    r = system.sources.run("bad")
    assert r.run.status == "failed"
    assert f"refused the sign-in of '{user}'" in (r.reason or "") and "check the user name and password" in (r.reason or "")
    _add(system, own_dovecot, user)
    assert system.sources.check("mail") == "reached; INBOX: 2 messages, Archive: 1 message"
    assert system.sources.run("mail").ok
    with system.catalog.cursor() as cur:
        tables = [t for (t,) in cur.execute("SELECT table_name FROM information_schema.tables").fetchall()]
        rows = {t: cur.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables}
    assert {"sources", "source_runs", "source_run_items", "source_entries", "audit_events"} <= set(rows)
    out, err = capfd.readouterr()
    for secret in (wrong, own_dovecot.users[user]):
        for text in (repr(rows), caplog.text, out, err, r.summary(), repr(system.sources.records())):
            assert secret not in text


def test_the_server_stopped_mid_run_ends_the_run_with_a_reason_and_the_next_run_converges(
    tmp_path: Path, own_dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    user, _ = own_dovecot.add_user()
    for n in range(12):
        own_dovecot.append(user, "INBOX", make_message(f"Note {n}", f"Note number {n} about the boiler room."))
    reads = 0
    fetch = ImapSource.fetch

    def stop_at_the_fifth_read(self: ImapSource, entry: Entry, out: Sink) -> None:
        nonlocal reads
        reads += 1
        if reads == 5:
            own_dovecot.stop()
        fetch(self, entry, out)

    monkeypatch.setattr(ImapSource, "fetch", stop_at_the_fifth_read)
    system, _ = counting_system(tmp_path / "one")
    _add(system, own_dovecot, user, folders="INBOX")
    r = system.sources.run("mail")
    assert r.run.status == "failed"
    assert f"The IMAP server at 127.0.0.1:{own_dovecot.port} closed the connection" in (r.reason or "")
    assert "the next run tries again" in (r.reason or "")
    assert r.counts["added"] == 4

    down = system.sources.run("mail")  # still down: refused, in words
    assert down.run.status == "failed" and "refused the connection: it is down" in (down.reason or "")

    own_dovecot.start()
    r = system.sources.run("mail")
    assert r.ok, r.summary()
    assert r.counts["added"] == 8 and r.counts["unchanged"] == 4 and r.counts["failed"] == 0

    # the same store as one clean run makes: every message once, every chunk once
    monkeypatch.setattr(ImapSource, "fetch", fetch)
    reference, _ = counting_system(tmp_path / "two")
    _add(reference, own_dovecot, user, folders="INBOX")
    assert reference.sources.run("mail").counts["added"] == 12
    assert _chunks(system) == _chunks(reference) and len(_chunks(system)[2]) == 12


def test_a_message_expunged_mid_run_fails_alone_and_the_next_run_converges(
    tmp_path: Path, dovecot, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _mailbox(dovecot)
    fetch = ImapSource.fetch

    def expunge_the_report_first(self: ImapSource, entry: Entry, out: Sink) -> None:
        if entry.path == REPORT_PATH:
            _expunge(dovecot, user, "INBOX", [1])
        fetch(self, entry, out)

    monkeypatch.setattr(ImapSource, "fetch", expunge_the_report_first)
    system, _ = counting_system(tmp_path)
    _add(system, dovecot, user)
    r = system.sources.run("mail")
    assert r.run.status == "done" and r.counts["added"] == 2 and r.counts["failed"] == 1
    (failed,) = r.failed
    assert failed.path == REPORT_PATH and "was expunged since it was listed" in failed.message
    r = system.sources.run("mail")
    assert r.ok and r.counts["failed"] == 0 and r.counts["unchanged"] == 2 and r.items == []
    assert len(system.catalog.files("kb")) == 2
