"""The WebDAV source (knowledge/sources/webdav.py) against a real WebDAV server: WsgiDAV on cheroot
(tests/helpers/webdav.py), basic authentication, its file-system ETags."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from knowledge.config import Settings
from knowledge.errors import InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    Source,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)
from knowledge.sources.webdav import MAX_REDIRECTS, WebDavSource, _multistatus
from tests.helpers.webdav import DAV_PASSWORD, DAV_USER, dav_server, edit, populate, write
from tests.sources.conftest import DavFolder

MakeSource = Callable[..., WebDavSource]


@pytest.fixture
def make_source(settings: Settings) -> MakeSource:
    def make(url: str, **config: Any) -> WebDavSource:
        full = {"url": url, "username": DAV_USER, "password": DAV_PASSWORD, "verify_tls": True, "depth": "1"}
        return WebDavSource({**full, **config}, SourceContext(settings=settings, timeout=10))

    return make


def listing(source: Source) -> dict[str, Entry]:
    entries = list(source.entries())
    by_path = {e.path: e for e in entries}
    assert len(by_path) == len(entries), "a path listed twice"
    return by_path


def read(source: Source, entry: Entry) -> bytes:
    out = io.BytesIO()
    source.fetch(entry, out)
    return out.getvalue()


TREE = {
    "readme.txt": "top level",
    "Reports 2024/Q1 résumé.txt": "first quarter",
    "Reports 2024/Über uns/Straße & Co #1.md": "# deep\nnested text",
    "Reports 2024/Über uns/empty.txt": "",
    "日本語/ファイル 100%.txt": "unicode name",
}


def test_lists_nested_folders_with_spaces_and_non_ascii_names(dav: DavFolder, make_source: MakeSource) -> None:
    for rel, text in TREE.items():
        write(dav.folder / rel, text)
    (dav.folder / "an empty folder").mkdir()
    with make_source(dav.url) as source:
        found = listing(source)
        assert set(found) == set(TREE)
        for rel, text in TREE.items():
            entry = found[rel]
            assert entry.size == len(text.encode())
            assert entry.version  # WsgiDAV's ETag
            assert entry.content_key is None
            assert entry.readers is None
            assert entry.url is not None and entry.url.startswith(dav.url)
            assert DAV_PASSWORD not in entry.url and "@" not in entry.url
            # the URL is percent-encoded and names the file
            assert httpx.URL(entry.url).path == "/" + dav.folder.relative_to(dav.server.root).as_posix() + "/" + rel
        assert source.location() == dav.url
        # Depth: 1, one PROPFIND per folder (5 folders with the collection itself); never infinity.
        propfinds = [r for r in dav.server.requests if r[0] == "PROPFIND"]
        assert [d for _, _, d in propfinds] == ["1"] * 5
        assert "1 file and 3 folders" in source.check()


def test_the_url_may_be_given_without_trailing_slash_or_encoding(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "sub dir/a.txt", "a")
    raw = dav.server.url + dav.folder.name  # "t3 Équipe": a space and a non-ASCII letter, unencoded
    with make_source(raw) as source:
        assert list(listing(source)) == ["sub dir/a.txt"]
        assert source.location() == dav.url


def test_fetch_reads_the_bytes(dav: DavFolder, make_source: MakeSource) -> None:
    blob = bytes(range(256)) * 2000  # 512 KB, several chunks
    write(dav.folder / "data/blob.bin", blob)
    write(dav.folder / "Über uns/ä b.txt", "umlaut")
    with make_source(dav.url) as source:
        found = listing(source)
        assert read(source, found["data/blob.bin"]) == blob
        assert read(source, found["Über uns/ä b.txt"]) == b"umlaut"


def test_version_changes_when_a_file_is_edited_and_only_then(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "a.txt", "one")
    write(dav.folder / "b/c.txt", "two")
    with make_source(dav.url) as source:
        before = listing(source)
    edit(dav.folder / "a.txt", "uno")  # same size
    with make_source(dav.url) as source:
        after = listing(source)
        assert after["a.txt"].version != before["a.txt"].version
        assert after["b/c.txt"].version == before["b/c.txt"].version
        assert read(source, after["a.txt"]) == b"uno"


def test_wrong_password_is_source_auth_failed_in_words(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "a.txt", "a")
    wrong = "wrong-pw-NEVER-shown-91"
    with make_source(dav.url, password=wrong) as source, pytest.raises(SourceAuthFailed) as caught:
        list(source.entries())
    message = str(caught.value)
    assert "refused the user name and password" in message and "'ana'" in message
    assert wrong not in message and DAV_PASSWORD not in message
    # and for a fetch
    entry = Entry(path="a.txt", version="x")
    with make_source(dav.url, password=wrong) as source, pytest.raises(SourceAuthFailed):
        read(source, entry)


def test_server_stopped_is_source_unavailable(own_webdav: DavFolder, make_source: MakeSource) -> None:
    write(own_webdav.folder / "a.txt", "a")
    with make_source(own_webdav.url) as source:
        entry = listing(source)["a.txt"]
        own_webdav.server.stop()
        with pytest.raises(SourceUnavailable, match=r"Could not connect to the WebDAV server at http://127\.0\.0\.1"):
            read(source, entry)
        with pytest.raises(SourceUnavailable, match="is it running"):
            list(source.entries())
        own_webdav.server.start()
        assert read(source, entry) == b"a"


def test_a_server_that_does_not_answer_in_time_is_source_unavailable(dav: DavFolder, settings: Settings) -> None:
    write(dav.folder / "a.txt", "a")
    release = threading.Event()
    dav.server.hook = lambda method, path: release.wait(30) and None
    source = WebDavSource(
        {"url": dav.url, "username": DAV_USER, "password": DAV_PASSWORD}, SourceContext(settings=settings, timeout=0.5)
    )
    try:
        with source, pytest.raises(SourceUnavailable, match=r"did not answer within 0\.5 s"):
            list(source.entries())
    finally:
        release.set()


def test_https_certificates_are_verified_unless_turned_off(tmp_path: Path, make_source: MakeSource) -> None:
    with dav_server(tmp_path / "tls", tls=True) as server:
        write(server.root / "Team/a.txt", "over TLS")
        url = server.folder_url("Team")
        assert url.startswith("https://127.0.0.1:")
        with make_source(url) as source, pytest.raises(SourceError, match="certificate this machine does not trust"):
            list(source.entries())
        with make_source(url, verify_tls=False) as source:
            found = listing(source)
            assert read(source, found["a.txt"]) == b"over TLS"


def test_a_server_answering_503_is_source_unavailable(dav: DavFolder, make_source: MakeSource) -> None:
    root = "/" + dav.folder.name + "/"
    dav.server.answer[root] = 503
    with make_source(dav.url) as source, pytest.raises(SourceUnavailable, match="HTTP 503"):
        list(source.entries())


def test_file_removed_between_listing_and_fetch_is_entry_gone(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "stays.txt", "stays")
    write(dav.folder / "sub/goes.txt", "goes")
    with make_source(dav.url) as source:
        found = listing(source)
        (dav.folder / "sub/goes.txt").unlink()
        with pytest.raises(EntryGone, match="is gone from the WebDAV server"):
            read(source, found["sub/goes.txt"])
        assert read(source, found["stays.txt"]) == b"stays"


@pytest.mark.parametrize(("status", "words"), [(423, "is locked"), (403, "does not let the user 'ana' read")])
def test_a_locked_or_forbidden_file_is_entry_gone_in_words(
    dav: DavFolder, make_source: MakeSource, status: int, words: str
) -> None:
    write(dav.folder / "open.docx", "x")
    dav.server.answer["/" + dav.folder.name + "/open.docx"] = status
    with make_source(dav.url) as source:
        entry = listing(source)["open.docx"]
        with pytest.raises(EntryGone, match=words):
            read(source, entry)


def test_depth_infinity_is_one_request_where_allowed(dav: DavFolder, make_source: MakeSource) -> None:
    for rel, text in TREE.items():
        write(dav.folder / rel, text)
    with make_source(dav.url, depth="infinity") as source:
        assert set(listing(source)) == set(TREE)
    assert [(m, d) for m, _, d in dav.server.requests] == [("PROPFIND", "infinity")]


def test_a_server_refusing_depth_infinity_is_walked_one_folder_at_a_time(
    dav: DavFolder, make_source: MakeSource, caplog: pytest.LogCaptureFixture
) -> None:
    for rel, text in TREE.items():
        write(dav.folder / rel, text)
    dav.server.refuse_infinity = True
    caplog.set_level(logging.INFO, logger="knowledge.sources.webdav")
    with make_source(dav.url, depth="infinity") as source:
        assert set(listing(source)) == set(TREE)
    depths = [d for m, _, d in dav.server.requests if m == "PROPFIND"]
    assert depths == ["infinity"] + ["1"] * 4  # the collection and its 3 folders
    assert "refused Depth: infinity (403)" in caplog.text


def test_no_such_folder_is_source_not_found(dav: DavFolder, make_source: MakeSource) -> None:
    with make_source(dav.url + "no%20such/") as source, pytest.raises(SourceNotFound, match="There is no folder at"):
        list(source.entries())


def test_a_file_s_url_is_source_not_found(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "a.txt", "a")
    with make_source(dav.url + "a.txt") as source:
        with pytest.raises(SourceNotFound, match="is a file, not a folder"):
            list(source.entries())
        with pytest.raises(SourceNotFound, match="is a file, not a folder"):
            source.check()


def test_redirects_are_followed_within_the_origin_only(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "a.txt", "a")
    dav.server.redirect["/old/"] = dav.url  # an absolute URL on the same origin
    with make_source(dav.server.url + "old/") as source:
        found = listing(source)
        assert list(found) == ["a.txt"]
        assert found["a.txt"].url == dav.url + "a.txt"  # the folder the server moved it to
        assert read(source, found["a.txt"]) == b"a"
    # to another port of the same host: another origin, not followed (nothing listens there)
    dav.server.redirect["/away/"] = "http://127.0.0.1:9/elsewhere/"
    with make_source(dav.server.url + "away/") as source, pytest.raises(SourceError, match="not followed"):
        list(source.entries())
    # a loop
    dav.server.redirect["/loop/"] = "/loop/"
    with make_source(dav.server.url + "loop/") as source, pytest.raises(SourceError, match="more than 5 times"):
        list(source.entries())
    assert sum(1 for _, p, _ in dav.server.requests if p == "/loop/") == MAX_REDIRECTS + 1


def test_a_subfolder_vanishing_while_listed_is_skipped(dav: DavFolder, make_source: MakeSource) -> None:
    write(dav.folder / "a.txt", "a")
    write(dav.folder / "gone/b.txt", "b")
    gone = "/" + dav.folder.name + "/gone/"

    def vanish(method: str, path: str) -> None:
        if method == "PROPFIND" and path == gone:
            dav.server.answer[gone] = 404

    dav.server.hook = vanish
    with make_source(dav.url) as source:
        assert list(listing(source)) == ["a.txt"]


def test_the_password_is_never_in_logs_errors_or_repr(
    dav: DavFolder, own_webdav: DavFolder, make_source: MakeSource, caplog: pytest.LogCaptureFixture, capfd: Any
) -> None:
    caplog.set_level(logging.DEBUG)  # httpx's and httpcore's own debug lines too
    write(dav.folder / "a.txt", "a")
    write(own_webdav.folder / "b.txt", "b")
    texts: list[str] = []
    with make_source(dav.url) as source:
        texts += [repr(source), source.location(), source.check()]
        found = listing(source)
        texts += [repr(e) for e in found.values()]
        read(source, found["a.txt"])
        (dav.folder / "a.txt").unlink()
        with pytest.raises(EntryGone) as gone:
            read(source, found["a.txt"])
        texts.append(str(gone.value))
    with make_source(own_webdav.url) as source:
        own_webdav.server.stop()
        with pytest.raises(SourceUnavailable) as down:
            list(source.entries())
        texts.append(str(down.value))
    with make_source(dav.url, password=DAV_PASSWORD + "x") as source, pytest.raises(SourceAuthFailed) as refused:
        list(source.entries())
    texts.append(str(refused.value))
    with pytest.raises(InvalidArgument) as bad:
        make_source(f"http://ana:{DAV_PASSWORD}@127.0.0.1/x/")
    texts.append(str(bad.value))
    out, err = capfd.readouterr()
    for text in [*texts, caplog.text, out, err]:
        assert DAV_PASSWORD not in text
    assert "HTTP Request: PROPFIND" in caplog.text  # httpx's log was captured (and holds no password)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"url": "ftp://host/x/"}, "must start with https://"),
        ({"url": "https:///x/"}, "must start with https://"),
        ({"url": "https://u:p@host/x/"}, "must not hold a user name or password"),
        ({"url": "https://host/x/?a=1"}, "must not have a query"),
        ({"url": "https://host/x/", "depth": "2"}, "must be 1 or infinity"),
        ({"url": ""}, "needs its folder url"),
    ],
)
def test_settings_that_cannot_work_are_invalid_arguments(settings: Settings, config: dict, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words):
        WebDavSource(config, SourceContext(settings=settings))


def test_the_kind_is_declared_as_an_entry_point() -> None:
    from importlib.metadata import entry_points

    (point,) = [p for p in entry_points(group="knowledge.sources") if p.name == "webdav"]
    assert point.load() is WebDavSource
    assert WebDavSource.kind == "webdav"
    assert [f.name for f in WebDavSource.fields if f.secret] == ["password"]


# -- the multistatus parser, on answers other servers give ---------------------------------------------------
_OTHER_SERVERS = b"""<?xml version="1.0" encoding="utf-8"?>
<d:multistatus xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns" xmlns:s="http://sabredav.org/ns">
 <d:response><d:href>/remote.php/dav/files/ana/Team/</d:href>
  <d:propstat><d:prop><d:resourcetype><d:collection/></d:resourcetype><d:getetag>"6601"</d:getetag></d:prop>
   <d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>
 <d:response><d:href>https://cloud.example/remote.php/dav/files/ana/Team/Caf%c3%a9%20Notes.md</d:href>
  <d:propstat><d:prop><d:resourcetype/><d:getetag>W/"abc-gzip"</d:getetag><d:getcontentlength>42</d:getcontentlength>
   <oc:fileid>1234</oc:fileid><oc:permissions>RGDNVW</oc:permissions></d:prop>
   <d:status>HTTP/1.1 200 OK</d:status></d:propstat>
  <d:propstat><d:prop><d:getlastmodified/></d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat></d:response>
 <d:response><d:href>Sub%20Folder/</d:href>
  <d:propstat><d:prop><d:getetag/></d:prop><d:status>HTTP/1.1 404 Not Found</d:status></d:propstat></d:response>
 <d:response><d:href>/remote.php/dav/files/ana/Team/locked.txt</d:href><d:status>HTTP/1.1 423 Locked</d:status></d:response>
</d:multistatus>"""


def test_the_multistatus_parser_reads_other_servers_answers() -> None:
    response = httpx.Response(207, content=_OTHER_SERVERS)
    items = list(_multistatus(response, "https://cloud.example/remote.php/dav/files/ana/Team/"))
    assert [i.path for i in items] == [
        "/remote.php/dav/files/ana/Team/",
        "/remote.php/dav/files/ana/Team/Café Notes.md",  # absolute URL, lower-case escapes
        "/remote.php/dav/files/ana/Team/Sub Folder/",  # relative href
        "/remote.php/dav/files/ana/Team/locked.txt",
    ]
    own, note, sub, locked = items
    assert own.collection and own.etag == '"6601"'
    assert not note.collection and note.etag == 'W/"abc-gzip"' and note.length == 42 and note.modified is None
    assert (note.fileid, note.permissions) == ("1234", "RGDNVW")
    assert sub.collection and sub.etag is None  # no resourcetype (404 propstat): the trailing slash says
    assert locked.status == 423


def test_entries_keep_the_etag_as_given_or_use_length_and_date(settings: Settings) -> None:
    from knowledge.sources.webdav import _Item

    source = WebDavSource({"url": "https://cloud.example/dav/Team/"}, SourceContext(settings=settings))
    tagged = _Item("/dav/Team/a.txt", None, False, 'W/"x"', 3, "Mon, 07 Dec 2026 06:36:26 GMT", "7", None)
    entry = source._entry("a.txt", tagged)
    assert entry.version == 'W/"x"' and entry.attributes == {"oc_fileid": "7"}
    untagged = _Item("/dav/Team/a b.txt", None, False, None, 3, "Mon, 07 Dec 2026 06:36:26 GMT", None, None)
    entry = source._entry("a b.txt", untagged)
    assert entry.version == "3-Mon, 07 Dec 2026 06:36:26 GMT"
    assert entry.url == "https://cloud.example/dav/Team/a%20b.txt"


@pytest.mark.slow
def test_a_listing_of_100000_files(dav: DavFolder, make_source: MakeSource) -> None:
    paths = populate(dav.folder, 100_000, per_folder=1000)
    with make_source(dav.url) as source:
        found = listing(source)
    assert set(found) == set(paths)
    assert len([r for r in dav.server.requests if r[0] == "PROPFIND"]) == 101
