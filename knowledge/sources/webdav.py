"""The WebDAV source: the files of one WebDAV collection (a folder) and everything under it, on any
WebDAV server -- Nextcloud, ownCloud, SharePoint's and IIS's WebDAV, Apache ``mod_dav``, WsgiDAV --
spoken over HTTP(S) with ``httpx`` (RFC 4918, "HTTP Extensions for WebDAV").

Listing is ``PROPFIND`` (RFC 4918 section 9.1) asking for four live properties only
(``DAV:resourcetype``, ``getetag``, ``getcontentlength``, ``getlastmodified``; section 15) and, where
the server has them, ownCloud's and Nextcloud's ``oc:fileid`` and ``oc:permissions``. By default each
collection is asked with ``Depth: 1`` and its subcollections are walked in turn, one request per
folder: many servers refuse ``Depth: infinity`` (Nextcloud's sabre/dav and IIS among them; section
9.1 lets them, with 403 and the ``DAV:propfind-finite-depth`` precondition), and one answer for a
whole tree may take longer than a request may. ``depth = "infinity"`` asks once for the whole tree
and falls back to the walk when the server refuses (403, 400, 501) or truncates (a 507 in the
answer; section 9.1's "results truncated").

An answer is a ``207 Multi-Status`` (section 13): one ``DAV:response`` per resource, its properties
in ``DAV:propstat`` elements with a status each (a property the server lacks comes back under
``404``: only ``2xx`` propstats are read). It is parsed as a stream (lxml, entities not resolved, no
DTD, no network). An ``href`` (section 8.3) is a URL or an absolute path, percent-encoded: only its
path is used, resolved against the request and decoded (UTF-8); the collection's own response and
anything outside the configured collection are skipped; trailing slashes are ignored except as a hint
of a collection where ``resourcetype`` is missing.

An :class:`~knowledge.sources.base.Entry`'s ``version`` is the ETag as the server gives it (strong or
weak, quotes kept; section 8.6, RFC 9110 section 8.8.3), or, without one, the length and the
last-modified date; its ``content_key`` is ``None``: an ETag belongs to one resource (one URL), and
equal bytes at two paths have unrelated ETags, so renames are found by the engine's SHA-256. Reading
is a streaming ``GET``.

Authentication is HTTP Basic (RFC 7617) with a user name and a password -- for Nextcloud and
ownCloud an app password (Settings > Security), never the account's own. NTLM/Kerberos and
SharePoint Online's cookie sign-in are not spoken. Redirects are followed up to
:data:`MAX_REDIRECTS` times and only within the configured origin (scheme, host and port): the
credentials go nowhere else. The server's ETags of collections say nothing reliable about their
descendants on most servers, so there is no :meth:`~WebDavSource.marker`.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Iterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urljoin, urlsplit

import httpx
from lxml import etree

from knowledge.errors import InvalidArgument
from knowledge.sources.base import (
    Entry,
    EntryGone,
    Field,
    Sink,
    Source,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)

log = logging.getLogger(__name__)

#: Redirects followed for one request (all within the configured origin).
MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEPTHS = ("1", "infinity")
_DAV = "{DAV:}"
_OC = "{http://owncloud.org/ns}"
#: RFC 4918 section 14.20: the properties asked for (and ownCloud's/Nextcloud's two, absent elsewhere).
_PROPFIND_BODY = (
    b'<?xml version="1.0" encoding="utf-8"?>\n'
    b'<d:propfind xmlns:d="DAV:" xmlns:oc="http://owncloud.org/ns"><d:prop>'
    b"<d:resourcetype/><d:getetag/><d:getcontentlength/><d:getlastmodified/>"
    b"<oc:fileid/><oc:permissions/>"
    b"</d:prop></d:propfind>"
)
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Item:
    """One ``DAV:response``: the decoded path of its href (``/dav/Team/a b.txt``), and what its
    ``2xx`` propstats said."""

    path: str
    status: int | None  # a response-level DAV:status (no propstat), else None
    collection: bool
    etag: str | None
    length: int | None
    modified: str | None
    fileid: str | None
    permissions: str | None


class _FiniteDepthOnly(Exception):
    """The server will not answer ``Depth: infinity`` (refused or truncated): walk with ``Depth: 1``."""


class WebDavSource(Source):
    """The files under one WebDAV collection (RFC 4918).

    Config (:attr:`fields`): ``url`` of the collection, ``http://`` or ``https://``, without
    credentials or query (``https://cloud.example/remote.php/dav/files/ana/Team/``; spaces and
    non-ASCII letters as they are or percent-encoded); ``username`` and ``password`` (HTTP Basic; both
    blank: no authentication); ``verify_tls`` (default true: the certificate must be trusted by this
    machine's certificate store); ``depth`` (``"1"``, the default, or ``"infinity"``).

    Entries: ``path`` the file's path below the collection, decoded (``"Reports/Q1 é.pdf"``);
    ``version`` the ETag or ``"<length>-<last-modified>"``; ``size`` the ``getcontentlength``;
    ``url`` the file's URL (no credentials); ``attributes`` ``oc_fileid``/``oc_permissions`` where
    the server has them.

    Raises: :class:`~knowledge.sources.base.SourceAuthFailed` (401; 403 for the collection),
    :class:`~knowledge.sources.base.SourceNotFound` (404/410 for the collection, or it is a file),
    :class:`~knowledge.sources.base.SourceUnavailable` (refused, reset, timed out, 5xx, 408, 429),
    :class:`~knowledge.sources.base.EntryGone` (``fetch``: 404, 410, 423 Locked, 403 for that file),
    :class:`~knowledge.sources.base.SourceError` (anything else: a redirect off the origin, an
    untrusted certificate, an answer that is not WebDAV); ``InvalidArgument`` from the constructor for
    a URL or depth that cannot work.
    """

    kind = "webdav"
    title = "WebDAV (Nextcloud, ownCloud, SharePoint)"
    description = "The files of a WebDAV folder and its subfolders: Nextcloud, ownCloud, SharePoint, any WebDAV server."
    fields = (
        Field(
            "url",
            "Folder URL",
            "The WebDAV URL of the folder, e.g. https://cloud.example/remote.php/dav/files/ana/Team/"
            " (Nextcloud and ownCloud show it under Files > Settings > WebDAV). No user name or password in it.",
            required=True,
        ),
        Field("username", "User name", "The account's user name (blank: no sign-in)."),
        Field(
            "password",
            "Password",
            "An app password or token (Nextcloud, ownCloud: Settings > Security > Devices & sessions).",
            secret=True,
        ),
        Field(
            "verify_tls",
            "Verify TLS certificate",
            "Check the server's HTTPS certificate against this machine's trusted certificates."
            " Turn off only for a server you trust on a private network.",
            default=True,
            kind="bool",
        ),
        Field(
            "depth",
            "Listing depth",
            "1: one request per folder (works on every server; the default). infinity: one request for"
            " the whole tree where the server allows it (falls back to 1 where it does not).",
            default="1",
        ),
    )
    carries_permissions = False

    def __init__(self, config: Mapping[str, Any], context: SourceContext) -> None:
        super().__init__(config, context)
        raw = str(self.required("url")).strip()
        parts = urlsplit(raw)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(
                "The WebDAV folder URL must start with https:// (or http://) and name a server,"
                " e.g. https://cloud.example/remote.php/dav/files/ana/Team/.",
                param="url",
            )
        if parts.username is not None or parts.password is not None:
            raise InvalidArgument(
                "The WebDAV folder URL must not hold a user name or password: give them as the"
                " source's user name and password instead.",
                param="url",
            )
        if parts.query:
            raise InvalidArgument("The WebDAV folder URL must not have a query (the part after '?').", param="url")
        try:
            port = parts.port
        except ValueError:
            raise InvalidArgument("The WebDAV folder URL's port is not a number from 0 to 65535.", param="url") from None
        self._scheme = parts.scheme.lower()
        host = parts.hostname.lower()
        netloc = f"[{host}]" if ":" in host else host
        default_port = 443 if self._scheme == "https" else 80
        self._origin = f"{self._scheme}://{netloc}" + (f":{port}" if port not in (None, default_port) else "")
        #: The collection's path, decoded, with one trailing slash (``/dav/Team/``).
        self._root = _folder(_decode(parts.path or "/"))
        depth = str(self.setting("depth", "1")).strip().lower()
        if depth not in _DEPTHS:
            raise InvalidArgument(f"The listing depth must be 1 or infinity, not {depth!r}.", param="depth")
        self._depth = depth
        self._username = self.setting("username")
        password = self.setting("password")
        if password is not None and not isinstance(password, str):
            password = password.get_secret_value() if hasattr(password, "get_secret_value") else str(password)
        self._auth: httpx.Auth | None = (
            httpx.BasicAuth(str(self._username or ""), password or "") if (self._username or password) else None
        )
        self._verify_tls = bool(self.setting("verify_tls", True))
        self._client: httpx.Client | None = None

    def __repr__(self) -> str:
        return f"WebDavSource({self.location()!r})"

    # -- the Source interface ------------------------------------------------------------------------
    def location(self) -> str:
        """The collection's URL, percent-encoded, without credentials."""
        return self._url(self._root)

    def entries(self) -> Iterator[Entry]:
        """Every file under the collection (see the module docstring for how it is listed).

        Raises: like the class says. A subfolder that vanished while being listed (404) is skipped;
        one the account may not read (403) fails the whole listing, rather than have its files taken
        for deleted."""
        seen: set[str] = set()
        if self._depth == "infinity":
            try:
                yield from self._listing(seen, infinity=True)
                return
            except _FiniteDepthOnly as why:
                log.info("WebDAV %s: %s; listing one folder at a time (Depth: 1).", self.location(), why)
        yield from self._listing(seen, infinity=False)

    def fetch(self, entry: Entry, out: Sink) -> None:
        """Write the file's bytes to ``out`` with a streaming ``GET`` (RFC 9110 section 9.3.1).

        Raises: :class:`EntryGone` (404, 410: the file is gone; 423: it is locked; 403: the server
        will not give this one file, which fails alone), and like the class says; what ``out.write``
        raises (the engine's size limit).
        """
        path = self._root + entry.path
        response, _ = self._send("GET", path, headers={"Accept-Encoding": "identity"})
        with closing(response):
            if response.status_code != 200:
                self._fail(response, path, file=True)
            try:
                for chunk in response.iter_bytes(_CHUNK):
                    out.write(chunk)
            except httpx.TransportError as exc:
                raise self._transport(exc, f"while reading {entry.path!r}") from None

    def check(self) -> str:
        """``PROPFIND`` the collection with ``Depth: 1``: the words say what its first level holds."""
        files = folders = 0
        for item in self._propfind(self._root, "1", root=True):
            rel = self._relative(item.path)
            if rel == "" and not item.collection and item.status is None:
                raise SourceNotFound(self._is_a_file())
            if not rel or item.status is not None:
                continue
            if item.collection:
                folders += 1
            else:
                files += 1
        return f"reached {self.location()}; {_count(files, 'file')} and {_count(folders, 'folder')} at the first level"

    def close(self) -> None:
        """Close the HTTP connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- listing -------------------------------------------------------------------------------------
    def _listing(self, seen: set[str], *, infinity: bool) -> Iterator[Entry]:
        """Walk the tree (``Depth: 1`` per collection) or ask once (``Depth: infinity``); each file
        path once (``seen``, shared with an earlier, abandoned ``infinity`` listing)."""
        pending = [self._root]
        walked: set[str] = set()
        while pending:
            folder = pending.pop()
            walked.add(folder)
            root = folder == self._root
            try:
                items = self._propfind(folder, "infinity" if infinity else "1", root=root)
            except EntryGone:
                log.info("WebDAV %s: the folder %r vanished while the tree was listed.", self.location(), folder)
                continue
            inside = outside = 0
            for item in items:
                rel = self._relative(item.path)
                if rel is None:
                    outside += 1
                    continue
                inside += 1
                if item.status is not None:
                    if infinity and item.status == 507:
                        raise _FiniteDepthOnly("the server truncated the Depth: infinity answer (507)")
                    if item.status not in (404, 410):
                        log.warning("WebDAV %s: the server answered %s for %r.", self.location(), item.status, rel)
                    continue
                if rel == "":
                    if root and not item.collection:
                        raise SourceNotFound(self._is_a_file())
                    continue
                if item.collection:
                    sub = _folder(self._root + rel)
                    if not infinity and sub not in walked:
                        walked.add(sub)
                        pending.append(sub)
                    continue
                if rel in seen:
                    continue
                seen.add(rel)
                yield self._entry(rel, item)
            if root and outside and not inside:
                raise SourceError(
                    f"The WebDAV server at {self._origin} names the files of {self.location()} by paths outside it"
                    " (a proxy in front of it may rewrite paths): give the folder's URL as the server itself names it."
                )

    def _entry(self, rel: str, item: _Item) -> Entry:
        if item.etag:
            version = item.etag
        elif item.length is not None or item.modified:
            version = f"{item.length if item.length is not None else '?'}-{item.modified or '?'}"
        else:  # nothing to compare: read it every run (the engine's hash keeps unchanged bytes unchanged)
            version = f"unversioned-{time.time_ns()}"
        attributes = {}
        if item.fileid:
            attributes["oc_fileid"] = item.fileid
        if item.permissions:
            attributes["oc_permissions"] = item.permissions
        return Entry(path=rel, version=version, size=item.length, url=self._url(self._root + rel), attributes=attributes)

    def _is_a_file(self) -> str:
        return f"{self.location()} is a file, not a folder: give the URL of the folder that holds the files."

    def _relative(self, path: str) -> str | None:
        """``path`` (decoded) below the collection, no leading or trailing slash (``""``: the collection
        itself), or ``None`` when it is outside or not a name a store may hold (``.``, ``..``, empty
        segments)."""
        if _folder(path) == self._root:
            return ""
        if not path.startswith(self._root):
            return None
        rel = path[len(self._root) :].strip("/")
        if any(seg in ("", ".", "..") or "\x00" in seg for seg in rel.split("/")):
            log.warning("WebDAV %s: skipped a resource whose name cannot be a file's path (%r).", self.location(), rel)
            return None
        return rel

    def _propfind(self, folder: str, depth: str, *, root: bool) -> list[_Item]:
        """The items of one ``PROPFIND`` of ``folder`` (decoded path) at ``depth``.

        Raises: :class:`_FiniteDepthOnly` (``infinity`` refused); :class:`EntryGone` (404/410 on a
        folder other than the root); the class's errors."""
        headers = {"Depth": depth, "Content-Type": "application/xml; charset=utf-8"}
        response, final = self._send("PROPFIND", folder, headers=headers, content=_PROPFIND_BODY)
        with closing(response):
            if depth == "infinity" and response.status_code in (400, 403, 501):
                raise _FiniteDepthOnly(f"the server refused Depth: infinity ({response.status_code})")
            if response.status_code != 207:
                self._fail(response, folder, file=False, root=root)
            if root and final != self._root:
                # The collection answered at another path (a redirect, e.g. to add the trailing slash).
                log.info("WebDAV %s: the server moved the folder to %s.", self.location(), self._url(final))
                self._root = _folder(final)
            try:
                return list(_multistatus(response, self._url(folder)))
            except httpx.TransportError as exc:
                raise self._transport(exc, "while listing") from None
            except etree.XMLSyntaxError as exc:
                raise SourceError(
                    f"The WebDAV server's listing of {self._url(folder)} is not valid XML ({exc}):"
                    " is the URL a WebDAV folder's?"
                ) from None

    # -- HTTP ----------------------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        if self._client is None:
            # This machine's certificate store (a company's own CA included); plain HTTP needs none.
            https = self._scheme == "https" and self._verify_tls
            verify: ssl.SSLContext | bool = ssl.create_default_context() if https else False
            self._client = httpx.Client(
                auth=self._auth,
                verify=verify,
                timeout=httpx.Timeout(self.context.timeout),
                follow_redirects=False,
                trust_env=False,  # no proxy or .netrc of the environment: the connection goes where the URL says
                headers={"User-Agent": "knowledge-webdav-source"},
            )
        return self._client

    def _url(self, path: str) -> str:
        """The URL of a decoded path on the origin, percent-encoded (RFC 3986 section 2.1)."""
        return self._origin + quote(path, safe="/")

    def _send(
        self, method: str, path: str, *, headers: dict[str, str], content: bytes | None = None
    ) -> tuple[httpx.Response, str]:
        """Send ``method`` for the decoded ``path``, following redirects within the origin; the open
        (streamed) response -- the caller closes it -- and the decoded path that answered."""
        client = self._http()
        url = self._url(path)
        for _ in range(MAX_REDIRECTS + 1):
            request = client.build_request(method, url, headers=headers, content=content)
            try:
                response = client.send(request, stream=True)
            except httpx.TransportError as exc:
                raise self._transport(exc, f"for {unquote(urlsplit(url).path)!r}") from None
            if response.status_code not in _REDIRECTS or "location" not in response.headers:
                return response, _decode(urlsplit(url).path)
            response.close()
            target = urljoin(url, response.headers["location"])
            parts = urlsplit(target)
            if parts.scheme.lower() not in ("http", "https") or _origin_of(parts) != self._origin:
                raise SourceError(
                    f"The WebDAV server sent {self._url(path)} on to another server ({parts.scheme}://{parts.hostname}),"
                    " which is not followed (the password goes to the configured server only): if that is the right"
                    " place, make it the source's URL."
                )
            url = target.split("#", 1)[0]
        raise SourceError(f"The WebDAV server redirected {self._url(path)} more than {MAX_REDIRECTS} times; check the URL.")

    def _fail(self, response: httpx.Response, path: str, *, file: bool, root: bool = False) -> None:
        """Raise the error for a response that is not the expected success."""
        code = response.status_code
        what = self._url(path)
        said = f"HTTP {code}{' ' + response.reason_phrase if response.reason_phrase else ''}"
        if code == 401:
            who = f" for {self._who()}" if self._username else " (no user name was given)"
            raise SourceAuthFailed(
                f"The WebDAV server at {self._origin} refused the user name and password{who} ({said})."
                " Check them; Nextcloud and ownCloud want an app password (Settings > Security)."
            )
        if file and code in (404, 410):
            raise EntryGone(f"{what} is gone from the WebDAV server ({said}); the next run sees it gone.")
        if file and code == 423:
            raise EntryGone(
                f"{what} is locked on the WebDAV server ({said}: someone has it open or checked out);"
                " it is read on a later run."
            )
        if file and code == 403:
            raise EntryGone(
                f"The WebDAV server does not let {self._who()} read {what} ({said}); it is tried again on the next run."
            )
        if code == 403:
            raise SourceAuthFailed(
                f"The WebDAV server at {self._origin} does not let {self._who()} read {what}"
                f" ({said}); give the account access to it, or use another account."
            )
        if code in (404, 410):
            if root:
                raise SourceNotFound(
                    f"There is no folder at {what} ({said}): check the URL (Nextcloud:"
                    " https://<server>/remote.php/dav/files/<user>/<folder>/)."
                )
            raise EntryGone(f"{what} is gone ({said}).")
        if code >= 500 or code in (408, 429):
            raise SourceUnavailable(
                f"The WebDAV server at {self._origin} failed to answer for {what} ({said}); try again later."
            )
        if code in (405, 501) or (not file and code == 200):
            raise SourceError(
                f"{what} does not answer as a WebDAV folder ({said} to {'GET' if file else 'PROPFIND'}): check the URL"
                " (Nextcloud: https://<server>/remote.php/dav/files/<user>/<folder>/)."
            )
        raise SourceError(f"The WebDAV server at {self._origin} answered {said} for {what}.")

    def _who(self) -> str:
        return f"the user {self._username!r}" if self._username else "a client without a user name"

    def _transport(self, exc: httpx.TransportError, doing: str) -> SourceError:
        """The error for a failed connection (words, never the credentials)."""
        cert = _cause(exc, ssl.SSLCertVerificationError)
        if cert is not None:
            return SourceError(
                f"The WebDAV server at {self._origin} has an HTTPS certificate this machine does not trust"
                f" ({getattr(cert, 'verify_message', None) or 'verification failed'}). Give it a trusted certificate, or"
                " turn off 'Verify TLS certificate' for a server you trust on a private network."
            )
        if isinstance(exc, httpx.TimeoutException):
            return SourceUnavailable(
                f"The WebDAV server at {self._origin} did not answer within {self.context.timeout:g} s {doing};"
                " try again later."
            )
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):
            return SourceUnavailable(
                f"Could not connect to the WebDAV server at {self._origin} ({reason}): is it running, and is the URL right?"
            )
        return SourceUnavailable(f"The connection to the WebDAV server at {self._origin} failed {doing} ({reason}).")


# -- multistatus -----------------------------------------------------------------------------------------
def _multistatus(response: httpx.Response, base: str) -> Iterator[_Item]:
    """The ``DAV:response`` items of a 207 answer, parsed as it streams in (RFC 4918 section 14.16);
    hrefs resolved against ``base`` (the request's URL) and decoded."""
    parser = etree.XMLPullParser(
        events=("end",), tag=f"{_DAV}response", resolve_entities=False, no_network=True, load_dtd=False
    )

    def drain() -> Iterator[_Item]:
        for _, element in parser.read_events():
            item = _item(element, base)
            element.clear(keep_tail=True)
            while element.getprevious() is not None:  # free the responses already read
                del element.getparent()[0]
            if item is not None:
                yield item

    for chunk in response.iter_bytes(_CHUNK):
        parser.feed(chunk)
        yield from drain()
    parser.close()
    yield from drain()


def _item(element: Any, base: str) -> _Item | None:
    href = element.findtext(f"{_DAV}href")
    if not href or not href.strip():
        return None
    path = _decode(urlsplit(urljoin(base, href.strip())).path)
    status = _status(element.findtext(f"{_DAV}status"))
    props: dict[str, Any] = {}
    for propstat in element.iterfind(f"{_DAV}propstat"):
        code = _status(propstat.findtext(f"{_DAV}status"))
        if code is None or not 200 <= code < 300:
            continue
        prop = propstat.find(f"{_DAV}prop")
        if prop is not None:
            for child in prop:
                props[child.tag] = child
    kind = props.get(f"{_DAV}resourcetype")
    collection = kind.find(f"{_DAV}collection") is not None if kind is not None else path.endswith("/")
    return _Item(
        path=path,
        status=status if status is not None and not props else None,
        collection=collection,
        etag=_text(props.get(f"{_DAV}getetag")),
        length=_int(_text(props.get(f"{_DAV}getcontentlength"))),
        modified=_text(props.get(f"{_DAV}getlastmodified")),
        fileid=_text(props.get(f"{_OC}fileid")),
        permissions=_text(props.get(f"{_OC}permissions")),
    )


def _status(line: str | None) -> int | None:
    """``"HTTP/1.1 404 Not Found"`` -> 404 (RFC 4918 section 14.28)."""
    if not line:
        return None
    parts = line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def _text(element: Any) -> str | None:
    if element is None or element.text is None:
        return None
    return element.text.strip() or None


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _decode(path: str) -> str:
    """A URL's path percent-decoded as UTF-8 (not decodable: as Latin-1, which any bytes are)."""
    try:
        return unquote(path, errors="strict")
    except UnicodeDecodeError:
        return unquote(path, encoding="latin-1")


def _folder(path: str) -> str:
    return "/" + path.strip("/") + "/" if path.strip("/") else "/"


def _origin_of(parts: Any) -> str:
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:
        return ""
    return f"{scheme}://{netloc}" + (f":{port}" if port not in (None, 443 if scheme == "https" else 80) else "")


def _cause(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 10:
        if isinstance(current, kind):
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


__all__ = ["MAX_REDIRECTS", "WebDavSource"]
