"""Web pages by URL (knowledge.service.web): fetched from a real HTTP server on 127.0.0.1 (the
setting ingest.web_allow_private lets loopback in), ingested with the fake embedder."""

from __future__ import annotations

import ipaddress

import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument
from knowledge.outcomes import Outcome
from knowledge.service import web
from knowledge.service.web import Crawl, Fetcher, WebPageError, check_url, refused_range
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.web import Site, page


def make_wb(tmp_path, **ingest):
    settings = load_settings(
        data_dir=tmp_path / "data",
        ingest={"web_allow_private": True, "max_file_mb": 0.05, **ingest},
        vector_store={"max_chunk_size_tokens": 40, "chunk_overlap_tokens": 8},
    )
    return Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=48))


@pytest.fixture
def wb(tmp_path):
    w = make_wb(tmp_path)
    yield w
    w.close()


def chunks_of(wb, store, file_id):
    return [h.text for h in wb.vector_store(store).chunks(file_id)]


def test_page_fetched_and_searchable_with_its_url_as_source(wb, site: Site):
    site.html("/docs/guide", page("Guide", "The zebra migration crosses the river in July."))
    url = site.url("/docs/guide")
    [r] = wb.ingest_web("web", url)
    assert r.outcome == Outcome.INDEXED and r.name == url, r.message
    [rec] = wb.store_files("web")
    assert rec.file_name == url
    assert wb.file_attributes("web", rec.file_id) == {"source_url": url}
    hits = wb.search("web", "zebra migration", mode="lexical")
    assert hits and hits[0].file_name == url and "zebra" in hits[0].text
    assert hits[0].metadata.get("attr_source_url") == url
    assert "Guide" in (hits[0].heading or "") or "Guide" in hits[0].text  # read by the HTML reader


def test_crawl_depth_one_takes_same_site_links_only_bounded_by_max_pages(wb, site: Site):
    other = Site()
    try:
        site.html(
            "/",
            page(
                "Home",
                "Start page about otters.",
                ("/a.html", "b.html", "/c.html", other.url("/x"), "http://other.invalid/y", "/style.css", "/a.html#top"),
            ),
        )
        for name in ("a", "b", "c"):
            site.html(f"/{name}.html", page(name.upper(), f"Page {name} tells of badgers.", ("/deeper.html",)))
        site.html("/deeper.html", page("Deeper", "Two links away."))
        notes: list[str] = []
        results = wb.ingest_web("web", site.url("/"), depth=1, max_pages=3, notes=notes)
        assert [r.name for r in results] == [site.url("/"), site.url("/a.html"), site.url("/b.html")]
        assert all(r.outcome == Outcome.INDEXED for r in results)
        assert site.asked("/c.html") == 0 and site.asked("/deeper.html") == 0 and site.asked("/style.css") == 0
        assert other.requests == []  # another host is never fetched
        assert notes and "on another site" in notes[0] and "over max_pages" in notes[0]
        # depth 1 without a smaller max_pages: every same-site link, never two links away
        results = wb.ingest_web("web2", site.url("/"), depth=1)
        assert sorted(r.name for r in results) == sorted(site.url(p) for p in ("/", "/a.html", "/b.html", "/c.html"))
        assert site.asked("/deeper.html") == 0
    finally:
        other.close()


def test_robots_txt_disallow_is_honoured(wb, site: Site):
    site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n")
    site.html("/", page("Home", "Public page about herons.", ("/private/p.html", "/open.html")))
    site.html("/private/p.html", page("Secret", "Not for robots."))
    site.html("/open.html", page("Open", "An open page about cranes."))
    [r] = wb.ingest_web("web", site.url("/private/p.html"))
    assert r.outcome == Outcome.FAILED and "robots.txt disallows" in r.message
    notes: list[str] = []
    results = wb.ingest_web("web", site.url("/"), depth=1, notes=notes)
    assert [x.name for x in results] == [site.url("/"), site.url("/open.html")]
    assert site.asked("/private/p.html") == 0 and site.asked("/robots.txt") == 2  # once per crawl
    assert "1 disallowed by robots.txt" in notes[0]


def test_robots_txt_that_fails_with_5xx_disallows_everything(wb, site: Site):
    site.pages["/robots.txt"] = (503, {}, b"busy")
    site.html("/", page("Home", "Text."))
    [r] = wb.ingest_web("web", site.url("/"))
    assert r.outcome == Outcome.FAILED and "robots.txt could not be read (HTTP 503)" in r.message
    assert site.asked("/") == 0


def test_redirects_are_followed_and_bounded(wb, site: Site):
    site.redirect("/old", "/mid")
    site.redirect("/mid", site.url("/new.html"), 301)
    site.html("/new.html", page("New", "Moved here: kingfishers."))
    [r] = wb.ingest_web("web", site.url("/old"))
    assert r.outcome == Outcome.INDEXED and r.name == site.url("/new.html")  # named by where it is
    for i in range(8):
        site.redirect(f"/loop{i}", f"/loop{i + 1}")
    [r] = wb.ingest_web("web", site.url("/loop0"))
    assert r.outcome == Outcome.FAILED and "too many redirects" in r.message
    assert site.asked("/loop6") == 0  # 1 request + 5 redirects, no more


def test_a_redirect_to_a_refused_address_is_checked_again(tmp_path, site: Site, monkeypatch):
    monkeypatch.setattr(web, "refused_range", lambda ip: "private" if str(ip) == "127.0.0.2" else None)
    w = make_wb(tmp_path, web_allow_private=False)
    try:
        site.redirect("/go", f"http://127.0.0.2:{site.port}/inside")
        [r] = w.ingest_web("web", site.url("/go"))
        assert r.outcome == Outcome.FAILED and "refused: 127.0.0.2 is a private address" in r.message
    finally:
        w.close()


def test_a_too_large_page_is_refused(wb, site: Site):
    site.html("/big.html", page("Big", "word " * 20_000))  # 100 KB > ingest.max_file_mb 0.05
    [r] = wb.ingest_web("web", site.url("/big.html"))
    assert r.outcome == Outcome.FAILED and "too large" in r.message and "ingest.max_file_mb" in r.message
    assert wb.store_files("web") == [] if wb.store_exists("web") else True


def test_a_missing_page_and_an_unreachable_host_say_so(wb, site: Site):
    [r] = wb.ingest_web("web", site.url("/nope.html"))
    assert r.outcome == Outcome.FAILED and "not found (HTTP 404)" in r.message
    site.pages["/boom"] = (500, {}, b"")
    [r] = wb.ingest_web("web", site.url("/boom"))
    assert "HTTP 500 Internal Server Error" in r.message
    closed = Site()
    closed.close()  # nothing listens there now
    [r] = wb.ingest_web("web", closed.url("/"))
    assert r.outcome == Outcome.FAILED and "unreachable" in r.message


def test_media_is_not_a_document(wb, site: Site):
    site.pages["/clip.mp4"] = (200, {"Content-Type": "video/mp4"}, b"\x00\x00\x00\x18ftypmp42")
    [r] = wb.ingest_web("web", site.url("/clip.mp4"))
    assert r.outcome == Outcome.FAILED and "not a document" in r.message


def test_loopback_is_refused_by_default_without_a_connection(tmp_path, site: Site):
    settings = load_settings(data_dir=tmp_path / "data")
    assert settings.ingest.web_allow_private is False
    w = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=48))
    try:
        site.html("/", page("Home", "Loopback."))
        for url in (site.url("/"), f"http://localhost:{site.port}/", f"http://[::1]:{site.port}/"):
            [r] = w.ingest_web("web", url)
            assert r.outcome == Outcome.FAILED and "refused" in r.message and "loopback" in r.message, r.message
        assert site.requests == []  # not even robots.txt
    finally:
        w.close()


def test_every_resolved_address_is_checked(settings):
    fetcher = Fetcher(settings, resolve=lambda host, port: ["93.184.215.14", "10.0.0.7"])
    try:
        with pytest.raises(WebPageError, match=r"at 10\.0\.0\.7, a private address"):
            fetcher.address("https://two-faced.example/")
    finally:
        fetcher.close()
    ok = Fetcher(settings, resolve=lambda host, port: ["93.184.215.14"])
    assert ok.address("https://public.example/") == "93.184.215.14"
    ok.close()
    for ip, kind in (
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("169.254.169.254", "link-local"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("100.64.0.1", "reserved"),
        ("0.0.0.0", "private"),
        ("224.0.0.1", "multicast"),
        ("8.8.8.8", None),
    ):
        assert refused_range(ipaddress.ip_address(ip)) == kind, ip


def test_only_http_urls(settings):
    for bad in (
        "ftp://example.org/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "example.org",
        "http://user:pw@example.org/",
        "http:///nohost",
        "",
        "https://x.org/" + "a" * 600,
    ):
        with pytest.raises(InvalidArgument):
            check_url(bad)
    assert check_url(" HTTPS://Example.ORG/a?b=1#frag ") == "https://example.org/a?b=1"
    with pytest.raises(InvalidArgument, match="depth"):
        Crawl(settings, "https://example.org/", depth=9)


def test_a_changed_page_replaces_its_chunks_an_unchanged_one_is_a_no_op(wb, site: Site):
    site.html("/news.html", page("News", "Version one mentions walruses."))
    url = site.url("/news.html")
    [first] = wb.ingest_web("web", url)
    assert first.outcome == Outcome.INDEXED
    [same] = wb.ingest_web("web", url)
    assert same.outcome == Outcome.UNCHANGED and same.file_id == first.file_id
    site.html("/news.html", page("News", "Version two mentions narwhals instead."))
    [second] = wb.ingest_web("web", url)
    assert second.outcome == Outcome.INDEXED and second.replaced_file_id == first.file_id
    [rec] = wb.store_files("web")
    assert rec.file_id == second.file_id and rec.file_name == url
    text = " ".join(chunks_of(wb, "web", second.file_id))
    assert "narwhals" in text and "walruses" not in text
    assert chunks_of(wb, "web", first.file_id) == []  # no stale chunks
    assert not wb.search("web", "walruses", mode="lexical")


def test_a_linked_document_reads_by_its_bytes(wb, site: Site):
    from io import BytesIO

    from docx import Document as Docx

    doc = Docx()
    doc.add_paragraph("The report on puffins.")
    buf = BytesIO()
    doc.save(buf)
    site.pages["/files/report"] = (200, {"Content-Type": "application/octet-stream"}, buf.getvalue())
    site.html("/", page("Home", "Reports.", ("/files/report",)))
    results = wb.ingest_web("web", site.url("/"), depth=1)
    assert [r.outcome for r in results] == [Outcome.INDEXED, Outcome.INDEXED], [r.message for r in results]
    assert any("puffins" in h.text for h in wb.search("web", "puffins", mode="lexical"))


# -- bounded bodies and one deadline (issue 38) -------------------------------------------------------
def test_gzip_of_gzip_is_bounded_at_every_layer_while_it_is_decoded(tmp_path, site: Site):
    import tracemalloc

    from tests.helpers.web import zeros_bomb

    bomb = zeros_bomb(decoded_mb=200, layers=2)  # 200 MB of zeros in about 2 KB
    assert len(bomb) < 20_000
    site.pages["/bomb.html"] = (200, {"Content-Type": "text/html", "Content-Encoding": "gzip, gzip"}, bomb)
    settings = load_settings(data_dir=tmp_path / "data", ingest={"web_allow_private": True, "max_file_mb": 1})
    with Fetcher(settings) as fetcher:
        tracemalloc.start()
        try:
            with pytest.raises(
                WebPageError,
                match=r"too large: more than 1 MB once unpacked \(Content-Encoding:"
                r" gzip, gzip;.*ingest\.max_file_mb",
            ):
                fetcher.fetch(site.url("/bomb.html"), robots=False)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 8_000_000, peak  # the 1 MB limit plus a few 64 KB steps, never the 200 MB


def test_chained_encodings_decode_when_small_and_too_many_layers_are_refused(tmp_path, site: Site):
    import zlib

    from tests.helpers.web import gzip_layers

    html = page("Layers", "Twice packed pelicans.").encode()
    site.pages["/two.html"] = (200, {"Content-Type": "text/html", "Content-Encoding": "gzip, gzip"}, gzip_layers(html, 2))
    site.pages["/three.html"] = (
        200,
        {"Content-Type": "text/html", "Content-Encoding": "gzip, gzip, gzip"},
        gzip_layers(html, 3),
    )
    site.pages["/zlib.html"] = (200, {"Content-Type": "text/html", "Content-Encoding": "deflate"}, zlib.compress(html))
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    site.pages["/raw.html"] = (
        200,
        {"Content-Type": "text/html", "Content-Encoding": "deflate"},
        raw.compress(html) + raw.flush(),
    )
    site.pages["/multi.html"] = (
        200,
        {"Content-Type": "text/html", "Content-Encoding": "gzip"},
        gzip_layers(html[:40], 1) + gzip_layers(html[40:], 1),
    )  # two gzip members
    site.pages["/br.html"] = (200, {"Content-Type": "text/html", "Content-Encoding": "br"}, b"\x0b\x02\x80hi\x03")
    site.pages["/broken.html"] = (
        200,
        {"Content-Type": "text/html", "Content-Encoding": "gzip"},
        b"\x1f\x8b\x08\x00" + b"\xff" * 40,
    )
    settings = load_settings(data_dir=tmp_path / "data", ingest={"web_allow_private": True})
    with Fetcher(settings) as fetcher:
        for path in ("/two.html", "/zlib.html", "/raw.html", "/multi.html"):
            assert fetcher.fetch(site.url(path), robots=False).data == html, path
        with pytest.raises(WebPageError, match=r"compressed 3 times over .* at most 2 layers"):
            fetcher.fetch(site.url("/three.html"), robots=False)
        with pytest.raises(WebPageError, match=r"an encoding that is not read here \(br"):
            fetcher.fetch(site.url("/br.html"), robots=False)
        with pytest.raises(WebPageError, match=r"gzip compression is damaged"):
            fetcher.fetch(site.url("/broken.html"), robots=False)


def test_headers_sent_one_byte_at_a_time_meet_one_total_deadline(tmp_path):
    import time

    from tests.helpers.web import TrickleServer

    slow = TrickleServer("/slow", interval=0.05)  # a byte every 50 ms: no single read ever waits 1 s
    w = make_wb(tmp_path, web_timeout_seconds=1)
    try:
        started = time.monotonic()
        [r] = w.ingest_web("web", slow.url("/slow"))  # robots.txt answers 404 at once, the page trickles
        took = time.monotonic() - started
        assert r.outcome == Outcome.FAILED
        assert "the page did not arrive within 1 s" in r.message and "ingest.web_timeout_seconds" in r.message
        assert "Error" not in r.message
        assert slow.served == 1 and took < 3, took
    finally:
        w.close()
        slow.close()


def test_a_host_name_lookup_is_inside_the_deadline(settings):
    import threading
    import time

    release = threading.Event()

    def stuck(host, port):
        release.wait(10)
        return ["127.0.0.1"]

    fetcher = Fetcher(settings, resolve=stuck)
    try:
        fetcher.timeout = 0.5
        started = time.monotonic()
        with pytest.raises(WebPageError, match=r"did not arrive within 0\.5 s"):
            fetcher.fetch("http://slow-dns.example/", robots=False)
        assert time.monotonic() - started < 2
    finally:
        release.set()
        fetcher.close()


def _private_reaches(source: str) -> list[str]:
    """The places ``source`` reaches into another object's private internals: an attribute named
    ``_x`` (not a dunder) read or set on anything but ``self``; ``self._x`` read in a subclass of an
    httpx or httpcore class that never sets or defines ``_x`` itself (so one inherited from the
    library); a private module imported."""
    import ast

    tree = ast.parse(source)
    found: list[str] = []

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and private(node.attr)
            and not (isinstance(node.value, ast.Name) and node.value.id == "self")
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.ImportFrom) and node.module and any(private(part) for part in node.module.split(".")):
            found.append(f"line {node.lineno}: from {node.module} import")
        if isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {a.name}"
                for a in node.names
                if any(private(part) for part in a.name.split("."))
            ]
        if isinstance(node, ast.ClassDef) and any(
            isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name) and b.value.id in ("httpx", "httpcore")
            for b in node.bases
        ):
            own = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            own |= {
                t.id
                for n in node.body
                if isinstance(n, ast.Assign | ast.AnnAssign)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            }
            self_attrs = [
                n
                for n in ast.walk(node)
                if isinstance(n, ast.Attribute)
                and private(n.attr)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
            ]
            own |= {n.attr for n in self_attrs if isinstance(n.ctx, ast.Store)}
            found += [
                f"line {n.lineno}: {ast.unparse(n)} (not set in {node.name})"
                for n in self_attrs
                if isinstance(n.ctx, ast.Load) and n.attr not in own
            ]
    return found


def test_the_fetcher_uses_only_public_httpx_and_httpcore_api():
    # the check itself catches the ways in: another object's private attribute, one inherited from
    # a library class, a private module
    assert len(_private_reaches("t = httpx.HTTPTransport()\np = t._pool\np._network_backend = b\n")) == 2
    assert _private_reaches("class T(httpx.HTTPTransport):\n    def f(self):\n        return self._pool\n")
    assert _private_reaches("from httpx._config import DEFAULT_LIMITS\n")
    assert not _private_reaches(
        "class T:\n    def __init__(self):\n        self._pool = 1\n    def f(self):\n        return self._pool\n"
    )
    import inspect

    assert _private_reaches(inspect.getsource(web)) == []


def test_the_transport_raises_httpx_errors_for_httpcore_ones(tmp_path):
    # nothing listens on the port: httpcore's ConnectError reaches the fetcher as httpx's, said in words
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = load_settings(data_dir=tmp_path / "data", ingest={"web_allow_private": True})
    with (
        Fetcher(settings) as fetcher,
        pytest.raises(
            WebPageError,
            match=r"^unreachable: 127\.0\.0\.1: the connection"
            r" was refused\.$",
        ),
    ):
        fetcher.fetch(f"http://127.0.0.1:{port}/", robots=False)


def test_web_pages_with_readers_are_restricted_before_their_first_chunk(tmp_path, site: Site):
    """``ingest_web(readers=)``: each page is its readers' (and the store's owners') from its first
    chunk on; a bad reader is refused before anything is fetched."""
    settings = load_settings(data_dir=tmp_path / "data", ingest={"web_allow_private": True})
    system = System(settings, lambda model: HashEmbedder(dimension=64, max_tokens=48))
    try:
        people = system.people
        people.set_up_admin("root", "correct horse battery")
        for name in ("ana", "bo"):
            people.accounts.create(name, "correct horse battery")
        people.accounts.create_group("hr")
        people.accounts.add_to_group("hr", "ana")
        root = Workbench(system).as_user(people.accounts.actor("root"))
        site.html("/pay.html", page("Pay", "The salaries of the zebra keepers rise in July."))
        with pytest.raises(InvalidArgument, match="no group 'nope'"):
            root.ingest_web("web", site.url("/pay.html"), readers="group:nope")
        assert site.requests == [] and not root.store_exists("web")
        [r] = root.ingest_web("web", site.url("/pay.html"), readers="group:hr")
        assert r.outcome == Outcome.INDEXED, r.message
        root.share_store("web", "everyone", "", "read")
        assert root.file_readers("web", r.file_id) == ("group:hr",)
        payloads = [p.payload for p in system.stores.vector_store("web").collection.scroll()]
        assert payloads and all(p["readers"] == ["group:hr"] for p in payloads)
        ana, bo = (Workbench(system).as_user(people.accounts.actor(n)) for n in ("ana", "bo"))
        assert [h.file_id for h in ana.search("web", "zebra keepers salaries", mode="lexical")] == [r.file_id]
        assert bo.search("web", "zebra keepers salaries", mode="lexical") == [] and bo.store_files("web") == []
    finally:
        system.close()
