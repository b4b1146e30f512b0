"""The IMAP source (knowledge/sources/imap.py) against a real Dovecot (tests/helpers/dovecot.py):
listing, reading, moves, UIDVALIDITY resets, the marker, readers, TLS, and the errors in words."""

from __future__ import annotations

import io
import logging
import socket
from datetime import UTC, datetime, timedelta, timezone

import docx
import pytest
from imapclient import IMAPClient

from knowledge.config import Settings
from knowledge.errors import InvalidArgument
from knowledge.ingest import read_document
from knowledge.sources import imap as imap_module
from knowledge.sources.base import (
    Entry,
    EntryGone,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.imap import ImapSource
from tests.helpers.chat import pdf_bytes
from tests.helpers.dovecot import Dovecot, make_message


def source(server: Dovecot, user: str, timeout: float = 10.0, **config) -> ImapSource:
    settings = {
        "host": server.host,
        "port": server.port,
        "tls": "none",
        "username": user,
        "password": server.users.get(user, "no such account"),
        **config,
    }
    return ImapSource(settings, SourceContext(settings=Settings(), timeout=timeout))


def listing(src: ImapSource) -> dict[str, Entry]:
    return {e.path: e for e in src.entries()}


def read(src: ImapSource, entry: Entry) -> bytes:
    out = io.BytesIO()
    src.fetch(entry, out)
    return out.getvalue()


def uidvalidity(server: Dovecot, user: str, folder: str) -> int:
    client = server.client(user)
    try:
        return client.folder_status(folder, [b"UIDVALIDITY"])[b"UIDVALIDITY"]
    finally:
        client.logout()


def flags(server: Dovecot, user: str, folder: str, uid: int) -> tuple[bytes, ...]:
    client = server.client(user)
    try:
        client.select_folder(folder, readonly=True)
        return client.get_flags([uid])[uid]
    finally:
        client.logout()


MARCH = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)


def test_two_folders_are_listed_with_paths_versions_keys_readers_urls_and_attributes(dovecot):
    user, password = dovecot.add_user()
    report = make_message("Quarterly report", "Sales rose.", date=MARCH, message_id="<q1@example.org>")
    plans = make_message(
        "Old plans",
        "Plans of last year.",
        sender="Bo Berg <bo@example.org>",
        date=datetime(2023, 11, 2, 23, 30, tzinfo=timezone(timedelta(hours=-5))),  # 04:30 UTC the next day
        message_id="<p1@example.org>",
    )
    assert dovecot.append(user, "INBOX", report) == 1
    assert dovecot.append(user, "Archive.2023", plans) == 1
    inbox_uv, archive_uv = uidvalidity(dovecot, user, "INBOX"), uidvalidity(dovecot, user, "Archive.2023")

    with source(dovecot, user, folders=["INBOX", "Archive.2023"]) as src:
        entries = listing(src)
        assert password not in src.location() and user in src.location()

    assert sorted(entries) == ["Archive/2023/2023-11-02 Old plans (1).eml", "INBOX/2024-03-05 Quarterly report (1).eml"]
    inbox = entries["INBOX/2024-03-05 Quarterly report (1).eml"]
    assert inbox.version == f"{inbox_uv}:1"
    assert inbox.size == len(report)
    assert inbox.readers == (f"user:{user}",)
    assert inbox.url == f"imap://{user}@127.0.0.1:{dovecot.port}/INBOX;UIDVALIDITY={inbox_uv}/;UID=1"
    assert inbox.attributes == {
        "from": "Ana Lima <ana@example.org>",
        "subject": "Quarterly report",
        "date": "2024-03-05T10:00:00+00:00",
    }
    archived = entries["Archive/2023/2023-11-02 Old plans (1).eml"]
    assert archived.version == f"{archive_uv}:1"
    assert archived.url == f"imap://{user}@127.0.0.1:{dovecot.port}/Archive.2023;UIDVALIDITY={archive_uv}/;UID=1"
    assert archived.attributes["date"] == "2023-11-02T23:30:00-05:00"  # the sender's own day
    assert inbox.content_key != archived.content_key
    assert all(password not in (e.url or "") for e in entries.values())


def test_fetch_writes_the_exact_message_in_pieces_and_never_sets_seen(dovecot, monkeypatch):
    user, _ = dovecot.add_user()
    message = make_message("Exact bytes", "Line one.\nLine two, ünïcödé.\n" * 40)
    uid = dovecot.append(user, "INBOX", message)
    with source(dovecot, user) as src:
        (entry,) = src.entries()
        assert read(src, entry) == message
        monkeypatch.setattr(imap_module, "READ_CHUNK", 100)  # many pieces, the last one short
        assert read(src, entry) == message
        exact = next(d for d in range(100, len(message) + 1) if len(message) % d == 0)
        monkeypatch.setattr(imap_module, "READ_CHUNK", exact)  # the size a multiple of the piece
        assert read(src, entry) == message
    assert b"\\Seen" not in flags(dovecot, user, "INBOX", uid)


def test_attachments_come_through_the_mail_reader(dovecot):
    user, _ = dovecot.add_user()
    d = docx.Document()
    d.add_paragraph("The valve GANNET-77 leaks.")
    buf = io.BytesIO()
    d.save(buf)
    message = make_message(
        "Pump report",
        "The pump runs hot.",
        attachments=[
            ("report.pdf", pdf_bytes(["cover page", "Results: flow MERLIN-4417 litres"]), "application/pdf"),
            ("notes.docx", buf.getvalue(), "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ],
    )
    dovecot.append(user, "INBOX", message)
    with source(dovecot, user) as src:
        (entry,) = src.entries()
        doc = read_document(read(src, entry), entry.path)
    assert doc.format == "eml" and doc.title == "Pump report"
    assert "The pump runs hot." in doc.text and "MERLIN-4417" in doc.text and "GANNET-77" in doc.text


def test_subjects_become_readable_unique_paths(dovecot):
    user, _ = dovecot.add_user()
    long = "A very long subject " * 8
    for subject in ("Q3/Q4 plan: Zürich \u202efdp.exe", long, "", "Same", "Same"):
        dovecot.append(user, "INBOX", make_message(subject, "body"))
    undated = make_message("Undated", "body", message_id=None).replace(b"Date: ", b"X-Date: ")
    dovecot.append(user, "INBOX", undated, msg_time=datetime(2020, 1, 2, 12, 0, tzinfo=UTC))
    with source(dovecot, user) as src:
        paths = sorted(listing(src))
    cut = long.strip()[:79].rstrip() + "…"
    assert paths == sorted(
        [
            "INBOX/2024-03-05 Q3-Q4 plan: Zürich fdp.exe (1).eml",
            f"INBOX/2024-03-05 {cut} (2).eml",
            "INBOX/2024-03-05 no subject (3).eml",
            "INBOX/2024-03-05 Same (4).eml",
            "INBOX/2024-03-05 Same (5).eml",
            "INBOX/2020-01-02 Undated (6).eml",  # no Date header: the arrival day (INTERNALDATE)
        ]
    ), paths


def test_a_moved_message_keeps_its_content_key(dovecot):
    user, _ = dovecot.add_user()
    dovecot.append(user, "INBOX", make_message("Stays", "body"))
    dovecot.append(user, "INBOX", make_message("Moves", "body"))
    dovecot.append(user, "Done", make_message("Was there", "body"))
    with source(dovecot, user, folders=["INBOX", "Done"]) as src:
        before = listing(src)
    client = dovecot.client(user)
    client.select_folder("INBOX")
    client.move([2], "Done")  # MOVE, RFC 6851
    client.logout()
    with source(dovecot, user, folders=["INBOX", "Done"]) as src:
        after = listing(src)
        assert read(src, after["Done/2024-03-05 Moves (2).eml"]).endswith(b"body\r\n")
    assert sorted(after) == [
        "Done/2024-03-05 Moves (2).eml",
        "Done/2024-03-05 Was there (1).eml",
        "INBOX/2024-03-05 Stays (1).eml",
    ]
    assert after["Done/2024-03-05 Moves (2).eml"].content_key == before["INBOX/2024-03-05 Moves (2).eml"].content_key
    assert after["INBOX/2024-03-05 Stays (1).eml"] == before["INBOX/2024-03-05 Stays (1).eml"]


def test_content_keys_are_the_message_id_and_size_or_the_headers_and_size(dovecot):
    user, _ = dovecot.add_user()
    one = make_message("No id", "body", message_id=None)
    dovecot.append(user, "INBOX", one)
    dovecot.append(user, "Copy", one)
    dovecot.append(user, "Copy", make_message("No id", "other body", message_id=None))
    dovecot.append(user, "Sent", make_message("Minutes", "as sent", message_id="<m@example.org>"))
    dovecot.append(user, "Sent", make_message("Minutes", "as the list sent it back", message_id="<m@example.org>"))
    dovecot.append(user, "Sent", make_message("Minutes", "as sent", message_id="<m@example.org>"))
    with source(dovecot, user, folders="INBOX, Copy, Sent") as src:  # a list as text, as a person types it
        keys = [e.content_key for e in src.entries()]
    assert len(keys) == 6 and len(set(keys)) == 4
    assert keys[0] == keys[1] != keys[2]  # no Message-ID: Date, From, Subject and size
    assert keys[3] == keys[5] != keys[4]  # one Message-ID, two sizes: two messages


def test_a_uidvalidity_reset_renumbers_paths_with_the_same_content_keys(dovecot):
    user, _ = dovecot.add_user()
    first, second = make_message("First", "one"), make_message("Second", "two")
    dovecot.append(user, "Projects", first)
    dovecot.append(user, "Projects", second)
    with source(dovecot, user, folders=["Projects"]) as src:
        before = listing(src)
        marker = src.marker()
    # the folder made again (a migration, a restore): a new UIDVALIDITY, the messages renumbered
    client = dovecot.client(user)
    client.delete_folder("Projects")
    client.create_folder("Projects")
    client.append("Projects", second)
    client.append("Projects", first)
    client.logout()
    with source(dovecot, user, folders=["Projects"]) as src:
        after = listing(src)
        assert src.marker() != marker
    assert sorted(before) == ["Projects/2024-03-05 First (1).eml", "Projects/2024-03-05 Second (2).eml"]
    assert sorted(after) == ["Projects/2024-03-05 First (2).eml", "Projects/2024-03-05 Second (1).eml"]
    assert after["Projects/2024-03-05 First (2).eml"].content_key == before["Projects/2024-03-05 First (1).eml"].content_key
    assert (
        after["Projects/2024-03-05 Second (1).eml"].content_key == before["Projects/2024-03-05 Second (2).eml"].content_key
    )

    # UIDVALIDITY changed in place (doveadm): same paths, new versions, same keys; a listed entry of the old
    # numbering is gone
    dovecot.doveadm("mailbox", "update", "-u", user, "--uid-validity", "4242", "Projects")
    with source(dovecot, user, folders=["Projects"]) as src:
        renumbered = listing(src)
        with pytest.raises(EntryGone, match="renumbered"):
            read(src, after["Projects/2024-03-05 First (2).eml"])
    assert sorted(renumbered) == sorted(after)
    assert {e.version for e in renumbered.values()} == {"4242:1", "4242:2"}
    assert {e.content_key for e in renumbered.values()} == {e.content_key for e in after.values()}


def test_the_marker_changes_with_messages_only(dovecot):
    user, _ = dovecot.add_user()
    uid = dovecot.append(user, "INBOX", make_message("One", "body"))
    with source(dovecot, user) as src:
        marker = src.marker()
        assert src.marker() == marker  # an untouched mailbox
        assert len(list(src.entries())) == 1
        assert src.marker() == marker  # after a listing (a folder open) too
        dovecot.append(user, "INBOX", make_message("Meanwhile", "body"))
        assert len(list(src.entries())) == 2  # a second listing of the same connection sees it
        _expunge_last(dovecot, user)
        assert src.marker() != marker  # one more UID used: UIDNEXT moved
        marker = src.marker()
    client = dovecot.client(user)
    client.select_folder("INBOX")
    client.add_flags([uid], [b"\\Seen", b"\\Flagged"])  # read and flagged: no message changed
    client.logout()
    with source(dovecot, user) as src:
        assert src.marker() == marker
    second = dovecot.append(user, "INBOX", make_message("Two", "body"))
    with source(dovecot, user) as src:
        added = src.marker()
    assert added != marker
    client = dovecot.client(user)
    client.select_folder("INBOX")
    client.delete_messages([second])
    client.expunge()
    client.logout()
    with source(dovecot, user) as src, source(dovecot, user, owner="group:support") as shared:
        assert src.marker() not in (marker, added)
        assert shared.marker() != src.marker()  # the readers are part of it: a new owner lists again


def _expunge_last(server: Dovecot, user: str) -> None:
    client = server.client(user)
    client.select_folder("INBOX")
    client.delete_messages(client.search(["ALL"])[-1:])
    client.expunge()
    client.logout()


def test_readers_are_the_owner(dovecot):
    user, _ = dovecot.add_user()
    dovecot.append(user, "INBOX", make_message("Shared", "body"))
    with source(dovecot, user) as src:
        assert [e.readers for e in src.entries()] == [(f"user:{user}",)]
    with source(dovecot, user, owner="group:support, user:ana") as src:
        assert [e.readers for e in src.entries()] == [("group:support", "user:ana")]
    with source(dovecot, user, owner="everyone") as src:
        assert [e.readers for e in src.entries()] == [None]
    with pytest.raises(InvalidArgument, match="reader"):
        source(dovecot, user, owner="support")


def test_wildcards_list_every_selectable_folder(dovecot):
    user, _ = dovecot.add_user()
    dovecot.append(user, "INBOX", make_message("In", "body"))
    dovecot.append(user, "Archive.2022", make_message("Old", "body"))
    dovecot.append(user, "Archive.2023", make_message("Newer", "body"))
    with source(dovecot, user, folders=["*"]) as src:
        assert sorted(p.split(" ")[0] for p in listing(src)) == [
            "Archive/2022/2024-03-05",
            "Archive/2023/2024-03-05",
            "INBOX/2024-03-05",
        ]
    with source(dovecot, user, folders=["Archive.%", "Nothing.*"]) as src:
        assert len(listing(src)) == 2


def test_a_folder_that_does_not_exist_is_not_found_in_words(dovecot):
    user, _ = dovecot.add_user()
    dovecot.append(user, "Reports", make_message("In", "body"))
    with source(dovecot, user, folders=["INBOX", "Reprots"]) as src:
        with pytest.raises(SourceNotFound, match=r"no folder 'Reprots' \(it has: INBOX, Reports\)") as info:
            list(src.entries())
        assert user in str(info.value)
        with pytest.raises(SourceNotFound):
            src.marker()


def test_a_message_expunged_between_listing_and_fetch_is_gone(dovecot):
    user, _ = dovecot.add_user()
    for subject in ("Keep", "Drop", "Also keep"):
        dovecot.append(user, "INBOX", make_message(subject, "body"))
    with source(dovecot, user) as src, source(dovecot, user) as fresh:
        entries = listing(src)
        list(fresh.entries())
        client = dovecot.client(user)
        client.select_folder("INBOX")
        client.delete_messages([2])
        client.expunge()
        client.logout()
        dropped = entries["INBOX/2024-03-05 Drop (2).eml"]
        for reader in (src, fresh):  # the folder still open since the listing (NOOP learns it), or not
            with pytest.raises(EntryGone, match="expunged"):
                read(reader, dropped)
            assert read(reader, entries["INBOX/2024-03-05 Also keep (3).eml"]).endswith(b"body\r\n")


def test_a_wrong_password_is_refused_in_words_without_the_password(own_dovecot, caplog):
    # a server of its own: Dovecot slows down sign-ins from an address after a failed one
    user, password = own_dovecot.add_user()
    caplog.set_level(logging.DEBUG)
    wrong = "wrong horse battery"
    with pytest.raises(SourceAuthFailed, match=f"refused the sign-in of '{user}'.*user name and password") as info:
        list(source(own_dovecot, user, password=wrong).entries())
    for text in (str(info.value), repr(info.value), caplog.text):
        assert wrong not in text and password not in text


def test_an_unknown_account_is_refused_in_words(own_dovecot):
    with pytest.raises(SourceAuthFailed, match="refused the sign-in of 'no-such-account'"):
        source(own_dovecot, "no-such-account").marker()


def test_the_password_appears_in_no_log_message_or_repr(dovecot, caplog, capsys):
    user, password = dovecot.add_user(password="s3cret-Pässwörd-77")  # not ASCII: SASL PLAIN carries it
    dovecot.append(user, "INBOX", make_message("Hello", "body"))
    caplog.set_level(logging.DEBUG)
    with source(dovecot, user) as src:
        for entry in src.entries():
            read(src, entry)
        src.marker()
        texts = [repr(src), src.location(), src.check(), *(repr(e) for e in src.entries())]
    with pytest.raises(SourceNotFound) as info:
        list(source(dovecot, user, folders=["Missing"]).entries())
    texts += [str(info.value), repr(info.value)]
    assert "imapclient" in caplog.text  # the library logged at DEBUG: the check below looked at something
    out = capsys.readouterr()
    for text in (*texts, caplog.text, out.out, out.err):
        assert password not in text
        assert password.encode("utf-8").hex() not in text


def test_a_stopped_server_is_unavailable_in_words(own_dovecot):
    user, _ = own_dovecot.add_user()
    own_dovecot.append(user, "INBOX", make_message("Hello", "body"))
    src = source(own_dovecot, user)
    (entry,) = src.entries()
    own_dovecot.stop()
    cut = r"closed the connection while opening the folder 'INBOX' .*; the next run tries again"
    with pytest.raises(SourceUnavailable, match=cut):
        read(src, entry)  # the connection open since the listing is cut
    with pytest.raises(SourceUnavailable, match=r"127\.0\.0\.1:\d+ refused the connection: it is down"):
        list(source(own_dovecot, user).entries())
    own_dovecot.start()
    assert read(src, entry).endswith(b"body\r\n")  # the next call connects again


def test_a_server_that_never_answers_times_out_in_words():
    with socket.socket() as silent:  # accepts connections (the backlog), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        port = silent.getsockname()[1]
        settings = {"host": "127.0.0.1", "port": port, "tls": "none", "username": "ana", "password": "pw-77"}
        src = ImapSource(settings, SourceContext(settings=Settings(), timeout=0.5))
        with pytest.raises(SourceUnavailable, match=r"did not answer within 0\.5 s while connecting"):
            src.marker()


def test_tls_implicit_and_starttls_verify_the_certificate(dovecot, monkeypatch):
    user, _ = dovecot.add_user()
    dovecot.append(user, "INBOX", make_message("Secret plans", "body"))
    implicit = {"tls": "implicit", "port": dovecot.tls_port}
    with pytest.raises(SourceError, match="certificate this machine does not trust"):
        list(source(dovecot, user, **implicit).entries())
    with source(dovecot, user, verify_tls=False, **implicit) as src:
        assert len(list(src.entries())) == 1
    monkeypatch.setenv("SSL_CERT_FILE", str(dovecot.ca_file))  # OpenSSL's default trust: the test's CA
    with source(dovecot, user, **implicit) as src:
        assert len(list(src.entries())) == 1
    with source(dovecot, user, tls="starttls") as src:
        (entry,) = src.entries()
        assert read(src, entry).endswith(b"body\r\n")
    with pytest.raises(SourceError, match=r"TLS with the IMAP server at .* failed while connecting .*: check the TLS mode"):
        list(source(dovecot, user, tls="implicit").entries())  # TLS spoken to the plain port


def test_plain_text_to_another_machine_must_be_allowed():
    settings = {"host": "mail.example.org", "tls": "none", "username": "ana", "password": "pw-77"}
    context = SourceContext(settings=Settings())
    with pytest.raises(InvalidArgument, match="readable by anyone"):
        ImapSource(settings, context)
    allowed = ImapSource({**settings, "allow_plaintext": True}, context)
    assert allowed.port == 143 and "pw-77" not in repr(allowed)
    assert ImapSource({**settings, "tls": "implicit"}, context).port == 993
    assert ImapSource({**settings, "host": "::1"}, context).location() == "imap://ana@[::1] (INBOX)"
    with pytest.raises(InvalidArgument, match="TLS mode"):
        ImapSource({**settings, "tls": "ssl"}, context)


@pytest.mark.slow
def test_a_folder_of_100000_messages_is_listed_lazily_in_bounded_chunks(own_dovecot, monkeypatch):
    user, _ = own_dovecot.add_user()
    total = 100_000
    template = make_message("Message {n}", "body {n}", message_id="<{n}@example.org>").decode()
    own_dovecot.write_maildir(user, (template.replace("{n}", str(n)).encode() for n in range(total)))
    asked: list[int] = []
    fetch = IMAPClient.fetch

    def counted(client, messages, *args, **kwargs):
        asked.append(len(messages))
        return fetch(client, messages, *args, **kwargs)

    monkeypatch.setattr(IMAPClient, "fetch", counted)
    with source(own_dovecot, user, timeout=300) as src:
        entries = src.entries()
        first = next(entries)
        assert asked == [imap_module.FETCH_CHUNK]  # one chunk asked for, not the folder
        count, paths, keys = 1, {first.path}, {first.content_key}
        for entry in entries:  # nothing kept but a few
            count += 1
            if count % 10_000 == 0:
                paths.add(entry.path)
                keys.add(entry.content_key)
    assert count == total and len(paths) == len(keys) == 11
    assert sum(asked) == total and max(asked) == imap_module.FETCH_CHUNK
