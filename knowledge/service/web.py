"""Web pages by URL: fetch a page -- and, when asked, the pages it links to on the same site -- and
ingest each as a file named by its URL (``source_url`` attribute), read by the reader its bytes
call for (HTML, or a linked PDF, DOCX, ...). Nothing is fetched unless a user asks for that URL.

The rules (``docs/ingestion.md``, ``docs/security.md``): only ``http``/``https``; the host name is
resolved and EVERY address it resolves to is checked -- private, loopback, link-local, multicast
and reserved ranges are refused unless ``ingest.web_allow_private`` -- and the connection goes to
the checked address (the Host header and TLS name stay the URL's), again after each redirect (at
most :data:`MAX_REDIRECTS`); the whole page within ``ingest.web_timeout_seconds`` -- ONE deadline
for the name's lookup, the connection, the headers and the body, however slowly each arrives
(:class:`_Deadline`) -- and ``ingest.max_file_mb``, counted on the wire and after EVERY layer of a
``Content-Encoding`` (at most :data:`MAX_ENCODINGS` layers, decoded in steps of
:data:`DECODE_STEP` bytes: a few KB of gzip-of-gzip cannot unpack into gigabytes); robots.txt
honoured (:mod:`urllib.robotparser`, RFC 9309: unreadable is "disallow"); a crawl follows
same-site links breadth first, at most ``depth`` links away (at most :data:`MAX_DEPTH`) and
``max_pages`` pages (capped by ``ingest.web_max_pages``). A page that cannot be had is one failure
with its reason; the crawl goes on. A page fetched again replaces its earlier version when it
changed and is a no-op when it did not (the Indexer's rules for a file's name).
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.robotparser
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from http import HTTPStatus
from typing import Any

import httpcore
import httpx

from knowledge.attributes import MAX_VALUE_CHARS
from knowledge.config import Settings
from knowledge.errors import InvalidArgument, KnowledgeError, PermissionDenied, unexpected_problem
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.jobs import FileProgress, IngestJob, JobRegistry

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
MAX_DEPTH = 3
#: A URL is kept as the file's ``source_url`` attribute: at most an attribute's length.
MAX_URL_CHARS = MAX_VALUE_CHARS
#: The robots.txt user-agent token and the User-Agent header.
AGENT = "knowledge"
USER_AGENT = f"{AGENT}/0.1 (web page ingestion; robots.txt honoured)"
#: robots.txt files larger than this are read no further (RFC 9309 asks for at least 500 KiB).
ROBOTS_MAX_BYTES = 512 * 1024
#: Links to these are not followed by a crawl: assets of a page, not documents.
ASSET_EXTENSIONS = frozenset(
    ".css .js .mjs .map .json .xml .rss .atom .ico .svg .gif .png .jpg .jpeg .webp .bmp .tif .tiff .avif"
    " .woff .woff2 .ttf .otf .eot .mp3 .mp4 .m4a .webm .ogg .ogv .wav .avi .mov .mkv .flac .exe .dmg .iso"
    " .gz .tgz .bz2 .xz .7z .rar .apk .bin".split()
)
_REFUSED_TYPES = ("audio/", "video/", "font/")
#: Content-Encoding layers a response may stack ("gzip, gzip" is two); a response with more is
#: refused. Servers send one; two is what a misconfigured proxy in front of a compressing server
#: makes.
MAX_ENCODINGS = 2
#: The most bytes one step of a Content-Encoding layer decodes at a time (zlib's ``max_length``):
#: what a step adds to memory before the size limit is checked again.
DECODE_STEP = 64 * 1024
#: The encodings asked for and decoded (zlib, standard library); no brotli or zstd decoder is a
#: dependency, so neither is asked for and a response in one is refused.
ACCEPT_ENCODING = "gzip, deflate"
_DECODERS = {"gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


class WebPageError(KnowledgeError):
    """A URL that could not be fetched; the message is the reason in words (unreachable, HTTP 404,
    too large, a refused private address, robots.txt disallows it, not a document)."""


@dataclass(frozen=True)
class WebPage:
    """A fetched page: ``url`` its final URL (after redirects, without the fragment) -- the file's
    name and ``source_url``; ``data`` its bytes; ``content_type`` the bare media type
    (``"text/html"``) or ``None``; ``depth`` how many links away from the start it is."""

    url: str
    data: bytes
    content_type: str | None
    depth: int = 0

    @property
    def name(self) -> str:
        return self.url


@dataclass(frozen=True)
class WebFailure:
    """A URL that could not be had: ``reason`` in words."""

    url: str
    reason: str
    depth: int = 0


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` taken out, to show it in a message."""
    return re.sub(r"(?<=://)[^/@\s]*@", "", url)


def check_url(url: str) -> str:
    """``url`` stripped and without its fragment, the host lowercased.

    Raises:
        InvalidArgument: not ``http(s)://host/...``, longer than :data:`MAX_URL_CHARS`, or with
            user credentials in it.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidArgument("Give the URL of a web page (https://...).")
    raw = url.strip()
    try:
        parts = urllib.parse.urlsplit(raw)
        port = parts.port
    except ValueError as exc:
        raise InvalidArgument(f"not a valid URL ({exc}).") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidArgument(
            f"only http:// and https:// web pages can be added{f', not {parts.scheme}:' if parts.scheme else ''}."
        )
    if not parts.hostname:
        raise InvalidArgument("the URL has no host name.")
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument("a URL with a user name or password in it is not fetched.")
    host = parts.hostname.lower()
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port is not None else "")
    clean = urllib.parse.urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", parts.query, ""))
    if len(clean) > MAX_URL_CHARS:
        raise InvalidArgument(f"The URL is {len(clean)} characters long; at most {MAX_URL_CHARS}.")
    return clean


def refused_range(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """``"loopback"``, ``"private"``, ``"link-local"``, ``"multicast"`` or ``"reserved"`` for an
    address a web page may not be fetched from by default; ``None`` for a public one."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for kind, hit in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved or ip.is_unspecified or not ip.is_global),
    ):
        if hit:
            return kind
    return None


def _origin(url: str) -> tuple[str, str, int]:
    p = urllib.parse.urlsplit(url)
    return p.scheme, (p.hostname or "").lower(), p.port or (443 if p.scheme == "https" else 80)


class Fetcher:
    """Fetches pages under the rules of the module docstring, one ``httpx.Client`` (no proxies from
    the environment: the connection must go to the checked address). Close it after use.

    Args:
        settings: ``ingest.web_allow_private``, ``web_timeout_seconds``, ``max_file_mb``.
        resolve: ``resolve(host, port) -> [ip, ...]`` (default: :func:`socket.getaddrinfo`).
    """

    def __init__(self, settings: Settings, *, resolve: Callable[[str, int], list[str]] | None = None) -> None:
        ingest = settings.ingest
        self.allow_private = ingest.web_allow_private
        self.timeout = float(ingest.web_timeout_seconds)
        self.max_bytes = ingest.max_file_bytes
        self._resolve = resolve or _getaddrinfo
        self._deadline = _Deadline()
        self._client = httpx.Client(
            timeout=httpx.Timeout(self.timeout),
            follow_redirects=False,
            trust_env=False,
            transport=_DeadlineTransport(self._deadline),
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
        )
        self._robots: dict[tuple[str, str, int], urllib.robotparser.RobotFileParser | str] = {}

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- addresses ------------------------------------------------------------------------------
    def address(self, url: str, *, within: float | None = None) -> str:
        """The checked address to connect to for ``url``'s host, looked up within ``within``
        seconds (``None``: as long as the resolver takes).

        Raises:
            WebPageError: the name does not resolve, or one of its addresses is in a refused range.
            TimeoutError: not looked up within ``within`` seconds.
        """
        _, host, port = _origin(url)
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                found = self._resolve(host, port) if within is None else _in_time(self._resolve, host, port, within)
                addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
            except TimeoutError:  # an OSError, but the caller's to word
                raise
            except (OSError, UnicodeError) as exc:
                raise WebPageError(
                    f"unreachable: the host name {host} does not resolve ({getattr(exc, 'strerror', None) or exc})."
                ) from None
        if not addresses:
            raise WebPageError(f"unreachable: the host name {host} has no address.")
        if not self.allow_private:
            for ip in addresses:
                kind = refused_range(ip)
                if kind is not None:
                    raise WebPageError(
                        f"refused: {host} is {'' if str(ip) == host else f'at {ip}, '}a {kind}"
                        " address; web pages are fetched from public addresses only"
                        " (setting ingest.web_allow_private)."
                    )
        return str(addresses[0])

    # -- fetching -------------------------------------------------------------------------------
    def fetch(self, url: str, *, max_bytes: int | None = None, robots: bool = True) -> WebPage:
        """The page at ``url`` (checked by :func:`check_url`), redirects followed.

        Raises:
            InvalidArgument: a bad URL. WebPageError: the reason it cannot be had.
        """
        url = check_url(url)
        if robots:
            self.check_robots(url)
        status, final, ctype, data = self._get(url, self.max_bytes if max_bytes is None else max_bytes)
        if status == 404 or status == 410:
            raise WebPageError(f"not found (HTTP {status}).")
        if not 200 <= status < 300:
            raise WebPageError(f"the server answered HTTP {status} {_phrase(status)}.".replace(" .", "."))
        if ctype is not None and ctype.startswith(_REFUSED_TYPES):
            raise WebPageError(f"not a document: the server sends {ctype}.")
        if not data:
            raise WebPageError("the page is empty (no bytes).")
        return WebPage(final, data, ctype)

    def _get(self, url: str, limit: int, what: str = "the page") -> tuple[int, str, str | None, bytes]:
        """``(status, final url, media type, body)``: redirects followed (each hop checked), the
        body decoded (see :func:`_decoded`) up to ``limit`` bytes, all of it -- look-ups,
        connections, headers and bodies of every hop -- within ONE deadline of ``ingest.web_timeout_seconds``
        (``what`` names the thing in the message when it is missed)."""
        late = (
            f"{what} did not arrive within {self.timeout:g} s (setting ingest.web_timeout_seconds):"
            " the server sent it too slowly or not at all."
        )
        with self._deadline.running(self.timeout):
            for _hop in range(MAX_REDIRECTS + 1):
                try:
                    ip = self.address(url, within=self._deadline.left())
                except TimeoutError:
                    raise WebPageError(f"{late[:-1]} (its host name was still being looked up).") from None
                scheme, host, port = _origin(url)
                target = httpx.URL(url).copy_with(host=ip)
                default = port == (443 if scheme == "https" else 80)
                headers = {"Host": (f"[{host}]" if ":" in host else host) + ("" if default else f":{port}")}
                extensions = {"sni_hostname": host} if scheme == "https" else {}
                try:
                    request = self._client.build_request("GET", target, headers=headers, extensions=extensions)
                    response = self._client.send(request, stream=True)
                except httpx.TimeoutException:
                    raise WebPageError(
                        late if self._deadline.passed() else f"unreachable: {host} did not answer within {self.timeout:g} s."
                    ) from None
                except httpx.HTTPError as exc:
                    raise WebPageError(f"unreachable: {host}: {_said(exc)}.") from None
                try:
                    if response.status_code in (301, 302, 303, 307, 308):
                        location = response.headers.get("location")
                        if not location:
                            raise WebPageError(f"HTTP {response.status_code} redirect without a Location.")
                        try:
                            url = check_url(urllib.parse.urljoin(url, location))
                        except InvalidArgument as exc:
                            raise WebPageError(f"redirected to a URL that is not fetched: {exc}") from None
                        continue
                    ctype = response.headers.get("content-type")
                    media = ctype.split(";", 1)[0].strip().lower() or None if ctype else None
                    if response.status_code >= 300:
                        return response.status_code, url, media, b""
                    length = response.headers.get("content-length")
                    if length and length.isdigit() and int(length) > limit:
                        raise WebPageError(_too_large(int(length), limit))
                    try:
                        body = _decoded(
                            response.iter_raw(), response.headers.get_list("content-encoding", split_commas=True), limit
                        )
                    except httpx.TimeoutException:
                        raise WebPageError(
                            late
                            if self._deadline.passed()
                            else f"unreachable: {host} stopped sending within {self.timeout:g} s."
                        ) from None
                    except httpx.HTTPError as exc:
                        raise WebPageError(f"unreachable: {host}: {_said(exc)}.") from None
                    return response.status_code, url, media, body
                finally:
                    response.close()
        raise WebPageError(f"too many redirects (more than {MAX_REDIRECTS}).")

    # -- robots.txt -----------------------------------------------------------------------------
    def check_robots(self, url: str) -> None:
        """Raises WebPageError when the site's robots.txt disallows ``url`` for this agent (or
        cannot be read: RFC 9309 takes a robots.txt that is unreachable or answers 5xx as
        disallowing everything); a site without one (HTTP 4xx) allows every page."""
        key = _origin(url)
        rules = self._robots.get(key)
        if rules is None:
            rules = self._robots[key] = self._read_robots(url)
        if isinstance(rules, str):
            raise WebPageError(rules)
        if not rules.can_fetch(AGENT, url):
            raise WebPageError("robots.txt disallows it: the site asks robots not to fetch this page.")

    def _read_robots(self, url: str) -> urllib.robotparser.RobotFileParser | str:
        scheme, host, port = _origin(url)
        netloc = (f"[{host}]" if ":" in host else host) + f":{port}"
        rules = urllib.robotparser.RobotFileParser()
        try:
            status, _, _, data = self._get(f"{scheme}://{netloc}/robots.txt", ROBOTS_MAX_BYTES, "robots.txt")
        except WebPageError as exc:
            if str(exc).startswith("too large"):  # over RFC 9309's 500 KiB: no rules we could read
                status, data = 200, b""
            elif str(exc).startswith(("refused", "unreachable")):  # the host itself: said as it is
                return str(exc)
            else:
                return f"robots.txt could not be read ({exc}); taken as disallowing every page (RFC 9309)."
        if status >= 500:
            return f"robots.txt could not be read (HTTP {status}); taken as disallowing every page (RFC 9309)."
        if status in (401, 403):  # as urllib.robotparser's own read() takes them
            lines = ["User-agent: *", "Disallow: /"]
        elif status >= 300:  # no robots.txt: every page allowed
            lines = []
        else:
            lines = data.decode("utf-8", "replace").splitlines()
        rules.parse(lines)
        return rules


# -- one deadline ----------------------------------------------------------------------------------
class _Deadline:
    """The instant a fetch must be done by. httpx applies its timeouts to each read, so a server that
    sends a byte every second never trips them; every socket operation of the fetcher instead waits
    at most the time left (:class:`_DeadlineBackend`), and none starts once it has passed."""

    def __init__(self) -> None:
        self.at: float | None = None

    def running(self, seconds: float) -> _Running:
        return _Running(self, seconds)

    def left(self) -> float | None:
        """Seconds left (never below 0), ``None`` when no fetch is running."""
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def clamp(self, timeout: float | None, error: type[Exception]) -> float | None:
        """``timeout`` shortened to the time left; raises ``error`` when none is left."""
        left = self.left()
        if left is None:
            return timeout
        if left <= 0:
            raise error("the fetch's deadline has passed")
        return left if timeout is None else min(timeout, left)


class _Running:
    def __init__(self, deadline: _Deadline, seconds: float) -> None:
        self.deadline, self.seconds = deadline, seconds

    def __enter__(self) -> None:
        self.outer = self.deadline.at
        mine = time.monotonic() + self.seconds
        self.deadline.at = mine if self.outer is None else min(mine, self.outer)

    def __exit__(self, *exc: object) -> None:
        self.deadline.at = self.outer


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read, write and TLS handshake waits at most the time left."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream, self._deadline = stream, deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            self._stream.start_tls(ssl_context, server_hostname, self._deadline.clamp(timeout, httpcore.ConnectTimeout)),
            self._deadline,
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's socket backend with :class:`_DeadlineStream` connections."""

    def __init__(self, backend: httpcore.NetworkBackend, deadline: _Deadline) -> None:
        self._backend, self._deadline = backend, deadline

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> httpcore.NetworkStream:
        stream = self._backend.connect_tcp(
            host,
            port,
            self._deadline.clamp(timeout, httpcore.ConnectTimeout),
            local_address=local_address,
            socket_options=socket_options,
        )
        return _DeadlineStream(stream, self._deadline)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:  # pragma: no cover - unused
        raise httpcore.ConnectError("the web fetcher connects over TCP only")

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


#: The connection pool's limits: httpx's defaults (``DEFAULT_LIMITS`` in httpx's ``_config.py``,
#: httpx 0.27-0.29), kept as they were when the fetcher used ``httpx.HTTPTransport``.
_MAX_CONNECTIONS = 100
_MAX_KEEPALIVE_CONNECTIONS = 20
_KEEPALIVE_EXPIRY = 5.0  # seconds

#: httpcore's errors and the httpx errors they are raised as, most specific first (as httpx's own
#: ``HTTPTransport`` maps them), so the fetcher's ``except httpx.TimeoutException`` and
#: ``except httpx.HTTPError`` see what they would see from it.
_HTTPCORE_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def _as_httpx(exc: Exception) -> Exception:
    """The httpx error for httpcore's ``exc`` (same message), or ``exc`` itself when it is not one."""
    for core, mapped in _HTTPCORE_ERRORS:
        if isinstance(exc, core):
            return mapped(str(exc))
    return exc


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The one client TLS context of every fetch (certifi's certificate store, nothing from the
    environment, as ``httpx.create_ssl_context(trust_env=False)`` makes it), shared by the transports
    of all crawls: making one loads the CA bundle, tens of ms of CPU. An ``SSLContext`` may be shared by
    connections and threads."""
    return httpx.create_ssl_context(trust_env=False)


class _DeadlineTransport(httpx.BaseTransport):
    """An httpx transport over an ``httpcore.ConnectionPool`` whose every socket goes through
    :class:`_DeadlineBackend` -- built from public API only (httpcore's ``network_backend=``).
    HTTP/1.1 only, no proxies, nothing taken from the environment (``trust_env=False``: the
    certificate store is certifi's, as ``httpx.create_ssl_context`` makes it). httpcore's errors are
    raised as httpx's (:data:`_HTTPCORE_ERRORS`)."""

    def __init__(self, deadline: _Deadline) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=_tls_context(),
            http1=True,
            http2=False,
            max_connections=_MAX_CONNECTIONS,
            max_keepalive_connections=_MAX_KEEPALIVE_CONNECTIONS,
            keepalive_expiry=_KEEPALIVE_EXPIRY,
            network_backend=_DeadlineBackend(httpcore.SyncBackend(), deadline),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = self._pool.handle_request(core)
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _ResponseStream(httpx.SyncByteStream):
    """An httpcore response's body as httpx reads it: its errors raised as httpx's; closing it
    closes the httpcore response (its connection goes back to the pool, or is closed)."""

    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._response.iter_stream()
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def close(self) -> None:
        self._response.close()


def _in_time(resolve: Callable[[str, int], list[str]], host: str, port: int, seconds: float | None) -> list[str]:
    """``resolve(host, port)`` in a daemon thread, waited for at most ``seconds`` (the system
    resolver has no timeout of its own to give it).

    Raises:
        TimeoutError: not done in time (the thread is left to finish on its own). What
            ``resolve`` raises.
    """
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(("ok", resolve(host, port)))
        except BaseException as exc:  # handed to the caller's thread
            box.append(("err", exc))

    thread = threading.Thread(target=run, name=f"resolve {host}", daemon=True)
    thread.start()
    thread.join(seconds)
    if not box:
        raise TimeoutError(host)
    kind, value = box[0]
    if kind == "err":
        raise value
    return list(value)


# -- bounded decoding ------------------------------------------------------------------------------
class _Inflater:
    """One Content-Encoding layer (``gzip`` or ``deflate``), decoded in steps of at most
    :data:`DECODE_STEP` bytes (zlib's ``max_length``), so a layer never holds more than one step of
    output. A gzip stream of several members (RFC 1952 2.2) is read to its last; ``deflate`` is a
    zlib stream (RFC 9110 8.4.1.2) or, as some servers send it, raw DEFLATE; bytes after the end of
    the stream are ignored, as browsers do."""

    _GZIP_MAGIC = b"\x1f\x8b"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._d: Any = zlib.decompressobj(16 + zlib.MAX_WBITS) if kind == "gzip" else None
        self._head = b""  # deflate: bytes held until the first two say which kind it is
        self._between = False  # gzip: a member ended with the bytes given; another may follow
        self._ended = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._ended or not data:
            return
        if self._between:
            self._between = False
            if data[:2] != self._GZIP_MAGIC:
                self._ended = True
                return
            self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if self._d is None:
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, b""
            zlib_wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._d = zlib.decompressobj(zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)
        yield from self._run(data)

    def _run(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._d.decompress(data, DECODE_STEP)
            except zlib.error:
                raise WebPageError(f"the page's {self.kind} compression is damaged; it cannot be unpacked.") from None
            data = self._d.unconsumed_tail
            if out:
                yield out
            if self._d.eof:
                rest = self._d.unused_data + data
                if self.kind == "gzip" and not rest:
                    self._between = True
                elif self.kind == "gzip" and rest[:2] == self._GZIP_MAGIC:
                    self._d, data = zlib.decompressobj(16 + zlib.MAX_WBITS), rest
                    continue
                else:
                    self._ended = True
                return
            if not data and not out:  # all input taken and no output held back
                return

    def finish(self) -> Iterator[bytes]:
        """What is left at the end of the body (a stream cut short keeps what it gave, as browsers do)."""
        if self._head and not self._ended:  # a deflate body of one byte
            head, self._head = self._head, b""
            self._d = zlib.decompressobj(-zlib.MAX_WBITS)
            yield from self._run(head)


def _decoded(raw: Iterator[bytes], encodings: list[str], limit: int) -> bytes:
    """The body of ``raw`` (the bytes as sent) with its ``Content-Encoding`` layers (``encodings``
    in the order they were applied) undone, last first, step by step: the bytes sent and the output
    of EVERY layer each count against ``limit``, and decoding stops as soon as one passes it.

    Raises:
        WebPageError: more than ``limit`` bytes at any layer; more than :data:`MAX_ENCODINGS`
            layers; an encoding other than gzip/deflate/identity; damaged compressed data.
    """
    names = [e.strip().lower() for e in encodings if e.strip() and e.strip().lower() != "identity"]
    said = ", ".join(names)
    if len(names) > MAX_ENCODINGS:
        raise WebPageError(
            f"refused: the page is compressed {len(names)} times over (Content-Encoding: {said});"
            f" at most {MAX_ENCODINGS} layers are unpacked."
        )
    unknown = [n for n in names if n not in _DECODERS]
    if unknown:
        raise WebPageError(
            f"the server sends the page in an encoding that is not read here ({unknown[0]}; asked"
            f" for {ACCEPT_ENCODING} only)."
        )
    layers = [_Inflater(_DECODERS[n]) for n in reversed(names)]
    totals = [0] * (len(layers) + 1)  # bytes sent, then the output of each layer
    body = bytearray()

    def count(i: int, n: int) -> None:
        totals[i] += n
        if totals[i] > limit:
            unpacked = f" once unpacked (Content-Encoding: {said}; {totals[0]:,} bytes sent so far)" if i else ""
            raise WebPageError(
                f"too large: more than {limit / 1e6:g} MB{unpacked}; the limit is {limit / 1e6:g} MB"
                " (setting ingest.max_file_mb)."
            )

    def push(i: int, pieces: Iterator[bytes]) -> None:
        for piece in pieces:
            count(i + 1, len(piece))
            if i + 1 == len(layers):
                body.extend(piece)
            else:
                push(i + 1, layers[i + 1].feed(piece))

    for part in raw:
        count(0, len(part))
        if not layers:
            body.extend(part)
        else:
            push(0, layers[0].feed(part))
    for i, layer in enumerate(layers):  # the end of the stream, outermost layer first
        push(i, layer.finish())
    return bytes(body)


def _getaddrinfo(host: str, port: int) -> list[str]:
    return list(dict.fromkeys(str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))


def _said(exc: Exception) -> str:
    text = str(exc) or "the connection failed"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "its TLS certificate is not valid for it"
    if "Connection refused" in text or "Errno 111" in text:
        return "the connection was refused"
    return text


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _too_large(size: int | None, limit: int) -> str:
    what = f"{size / 1e6:.1f} MB" if size is not None else f"more than {limit / 1e6:g} MB"
    return f"too large: {what}; the limit is {limit / 1e6:g} MB (setting ingest.max_file_mb)."


# -- links ---------------------------------------------------------------------------------------------
class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag in ("a", "area") and a.get("href"):
            self.hrefs.append(str(a["href"]))


def links(page: WebPage) -> list[str]:
    """The http(s) URLs ``page`` links to (``<a href>``, ``<area href>``, relative to its ``<base>``),
    checked by :func:`check_url`, in order, each once; ``[]`` for a page that is not HTML."""
    head = page.data[:1024].lstrip().lower()
    if page.content_type not in ("text/html", "application/xhtml+xml") and not head.startswith(
        (b"<!doctype html", b"<html")
    ):
        return []
    parser = _Links()
    try:
        parser.feed(page.data.decode("utf-8", "replace"))
        parser.close()
    except Exception:  # html.parser is lenient; a page it chokes on has no links for us
        log.debug("links of %s could not be parsed", page.url, exc_info=True)
    base = urllib.parse.urljoin(page.url, parser.base) if parser.base else page.url
    out: dict[str, None] = {}
    for href in parser.hrefs:
        try:
            out[check_url(urllib.parse.urljoin(base, href.strip()))] = None
        except (InvalidArgument, ValueError):
            continue
    return list(out)


def same_site(url: str, start: str) -> bool:
    """Whether ``url`` is on ``start``'s site: the same host and port (http and https alike)."""
    a, b = _origin(url), _origin(start)
    return a[1] == b[1] and (a[2] == b[2] or {a[2], b[2]} == {80, 443})


@dataclass
class Crawl:
    """The pages of one request: iterate it for :class:`WebPage` and :class:`WebFailure`, in the
    order they are fetched (breadth first). ``skipped`` counts the linked pages left out, by reason.

    Args:
        settings: the fetch rules (see :class:`Fetcher`) and ``ingest.web_max_pages``.
        url: the start page.
        depth: follow same-site links this many steps (0: the page only; at most :data:`MAX_DEPTH`).
        max_pages: fetch at most this many pages (failures count; capped by ``ingest.web_max_pages``).
        cancel: stop before the next page once set.
        on_fetch: ``on_fetch(url)`` before each page is fetched.
    """

    settings: Settings
    url: str
    depth: int = 0
    max_pages: int | None = None
    cancel: threading.Event | None = None
    on_fetch: Callable[[str], None] | None = None
    skipped: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.url = check_url(self.url)
        if not isinstance(self.depth, int) or isinstance(self.depth, bool) or not 0 <= self.depth <= MAX_DEPTH:
            raise InvalidArgument(f"depth must be a whole number from 0 to {MAX_DEPTH}, got {self.depth!r}.")
        cap = self.settings.ingest.web_max_pages
        if self.max_pages is None:
            self.max_pages = 1 if self.depth == 0 else cap
        if not isinstance(self.max_pages, int) or isinstance(self.max_pages, bool) or self.max_pages < 1:
            raise InvalidArgument(f"max_pages must be a whole number of at least 1, got {self.max_pages!r}.")
        self.max_pages = min(self.max_pages, cap)

    def __iter__(self) -> Iterator[WebPage | WebFailure]:
        with Fetcher(self.settings) as fetcher:
            queue: deque[tuple[str, int]] = deque([(self.url, 0)])
            seen = {self.url}
            site = self.url
            done = 0
            while queue and done < (self.max_pages or 1):
                if self.cancel is not None and self.cancel.is_set():
                    return
                url, level = queue.popleft()
                if level and not self._robots_allow(fetcher, url):
                    continue
                if self.on_fetch is not None:
                    self.on_fetch(url)
                done += 1
                try:
                    page = fetcher.fetch(url)
                except (WebPageError, InvalidArgument) as exc:
                    yield WebFailure(url, str(exc), level)
                    continue
                if page.url != url and page.url in seen - {url}:
                    self._skip("redirected to a page already taken")
                    continue
                seen.add(page.url)
                if level == 0:
                    site = page.url  # the site is where the start page is (after its redirects)
                yield WebPage(page.url, page.data, page.content_type, level)
                if level >= self.depth:
                    continue
                for link in links(page):
                    if link in seen:
                        continue
                    seen.add(link)
                    if not same_site(link, site):
                        self._skip("on another site")
                    elif _extension(link) in ASSET_EXTENSIONS:
                        self._skip("not a document (a style sheet, script or media file)")
                    else:
                        queue.append((link, level + 1))
            if queue:
                self._skip(f"over max_pages ({self.max_pages})", len(queue))

    def _robots_allow(self, fetcher: Fetcher, url: str) -> bool:
        try:
            fetcher.check_robots(url)
            return True
        except WebPageError:
            self._skip("disallowed by robots.txt")
            return False

    def _skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def note(self) -> str | None:
        """``"Left out 3 linked pages: 2 on another site, 1 disallowed by robots.txt."`` or ``None``."""
        total = sum(self.skipped.values())
        if not total:
            return None
        parts = ", ".join(f"{n} {r}" for r, n in sorted(self.skipped.items(), key=lambda kv: -kv[1]))
        return f"Left out {total} linked page{'' if total == 1 else 's'}: {parts}."


def _extension(url: str) -> str:
    last = urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
    return ("." + last.rsplit(".", 1)[-1].lower()) if "." in last else ""


def failure_result(f: WebFailure) -> IngestResult:
    """The :class:`IngestResult` of a URL that could not be had (nothing written)."""
    return IngestResult(f.url, Outcome.FAILED, f"{f.url}: {f.reason}", error="WebPageError")


def page_attributes(page: WebPage, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The file attributes a page is ingested with: ``attributes`` plus ``source_url``."""
    return {**(attributes or {}), "source_url": page.url}


#: One file's ingestion, as :meth:`knowledge.service.indexing.Indexer.ingest_file` takes it:
#: ``ingest_file(store, source, name, **options) -> IngestResult`` (the indexer's own, or a
#: person's, checked and recorded: :meth:`knowledge.workbench.Workbench.ingest_file`).
IngestFile = Callable[..., IngestResult]


def ingest_web(
    ingest_file: IngestFile,
    settings: Settings,
    store: str,
    url: str,
    *,
    depth: int = 0,
    max_pages: int | None = None,
    template: str | None = None,
    attributes: dict[str, Any] | None = None,
    on_result: Callable[[IngestResult], None] | None = None,
    on_fetch: Callable[[str], None] | None = None,
    progress: Callable[[str, str, float], None] | None = None,
    cancel: threading.Event | None = None,
    notes: list[str] | None = None,
) -> list[IngestResult]:
    """Fetch ``url`` (and its same-site links, see :class:`Crawl`) and ingest each page into
    ``store`` with ``ingest_file`` (see :data:`IngestFile`), as ``settings`` allow (``ingest.web_*``):
    named by its URL, ``source_url`` among its attributes; a URL that cannot be had is
    a failed result with the reason. ``progress(name, stage, fraction)`` follows each page;
    ``notes`` receives the crawl's note on the linked pages it left out.

    Raises:
        InvalidArgument: a bad URL, depth or max_pages (nothing fetched); the store's and template's
            errors of ``ingest_file``.
    """
    crawl = Crawl(settings, url, depth, max_pages, cancel, on_fetch)
    results: list[IngestResult] = []
    for item in crawl:
        if isinstance(item, WebFailure):
            r = failure_result(item)
        else:
            r = ingest_file(
                store,
                item.data,
                item.name,
                template=template,
                content_type=item.content_type,
                attributes=page_attributes(item, attributes),
                cancel=cancel,
                progress=(lambda s, f, n=item.name: progress(n, s, f)) if progress else None,
            )
        results.append(r)
        if on_result is not None:
            on_result(r)
    note = crawl.note()
    if note and notes is not None:
        notes.append(note)
    return results


class WebJob(IngestJob):
    """A web page (and its crawl) ingested in a thread of this process, shown like an ingest batch:
    one line per page as it is fetched, then its outcome. Not durable (a crawl is asked for again
    after a restart). A person's is made by :meth:`knowledge.workbench.Workbench.submit_web`.

    Args:
        jobs: this process's registry (the job is shown as the store's newest; its settings).
        ingest_file: each page's ingestion (:data:`IngestFile`; a person's checks and records it).
        store, url, depth, max_pages, template: as :func:`ingest_web` takes them.

    Raises:
        InvalidArgument: a bad URL, depth or max_pages (nothing fetched).
    """

    durable = False

    def __init__(
        self,
        jobs: JobRegistry,
        ingest_file: IngestFile,
        store: str,
        url: str,
        *,
        depth: int = 0,
        max_pages: int | None = None,
        template: str | None = None,
    ) -> None:
        super().__init__(jobs, store, [], template=template)
        Crawl(jobs.settings, url, depth, max_pages)  # a bad URL, depth or max_pages: raised now
        self.ingest_file = ingest_file
        self.url, self.depth, self.max_pages = url, depth, max_pages
        self._finished = False

    @property
    def done(self) -> bool:
        return self._finished and super().done

    def _run(self) -> None:
        current: list[FileProgress] = []

        def drop_unfinished() -> None:  # a page fetched and left out (a redirect to one taken): no line
            if current and current[0].result is None and current[0] in self._files:
                self._files.remove(current[0])

        def on_fetch(url: str) -> None:
            drop_unfinished()
            fp = FileProgress(url)
            fp.update("fetching", 0.0)
            current[:] = [fp]
            self._files.append(fp)

        def progress(name: str, stage: str, fraction: float) -> None:
            if current:
                current[0].name = name
                current[0].update(stage, fraction)

        def on_result(r: IngestResult) -> None:
            if current:
                current[0].name, current[0].result, current[0].stage = r.name, r, "done"

        try:
            ingest_web(
                self.ingest_file,
                self.registry.settings,
                self.store,
                self.url,
                depth=self.depth,
                max_pages=self.max_pages,
                template=self.template,
                on_result=on_result,
                on_fetch=on_fetch,
                progress=progress,
                cancel=self._cancel,
                notes=self.notes,
            )
        except Exception as exc:  # the store or template itself is the problem
            if isinstance(exc, PermissionDenied):  # a refusal in words (a quota the next page would pass): no bug
                log.info("web ingest of %s into %s stopped: %s", self.url, self.store, exc)
            else:
                log.exception("web ingest of %s into %s", self.url, self.store)
            failed = current[0] if current and current[0].result is None else None
            shown = without_credentials(self.url)
            said = (
                str(exc).rstrip(".")
                if isinstance(exc, PermissionDenied)
                else unexpected_problem(exc, "while fetching it", "the program")
            )
            r = IngestResult(shown, Outcome.FAILED, f"{shown}: {said}.", error=type(exc).__name__)
            if failed is not None:
                failed.result, failed.stage = r, "done"
            else:
                self._files.append(FileProgress(self.url, "done", 1.0, r))
        if not self._cancel.is_set():
            drop_unfinished()
        for fp in self._files:
            if fp.result is None:
                fp.result = IngestResult(fp.name, Outcome.CANCELLED, f"{fp.name}: not done, the batch was stopped.")
        self.finished_at = time.monotonic()
        self._finished = True


__all__ = [
    "AGENT",
    "ASSET_EXTENSIONS",
    "MAX_DEPTH",
    "MAX_REDIRECTS",
    "MAX_URL_CHARS",
    "USER_AGENT",
    "Crawl",
    "Fetcher",
    "IngestFile",
    "WebFailure",
    "WebJob",
    "WebPage",
    "WebPageError",
    "check_url",
    "failure_result",
    "ingest_web",
    "links",
    "page_attributes",
    "refused_range",
    "same_site",
]
