"""EPUB e-books (EPUB 2 and 3): the chapters in reading order, each read by the HTML reader.

The package is opened with :mod:`zipfile`; ``META-INF/container.xml`` names the package document
(OPF), whose spine gives the reading order and whose metadata the book's title and author. Each spine
item that is a content document (XHTML or HTML, whatever its extension: ``.xhtml``, ``.html``,
``.xml``) is read with :func:`knowledge.ingest._html.read_html` (no ``<style>``/``<script>`` text),
the title page and other ``linear="no"`` items included, then content documents the manifest lists
outside the spine (not the navigation document). Provenance: heading = the chapter's title (from the
NCX or EPUB 3 navigation document, else the chapter's own ``<title>``) followed by its own headings;
``page`` = the chapter's position in the reading order (1 = the first content document, read or
not: a cover with only an image is position 1 without text). A spine item whose file is missing, or
that the manifest does not list, is named in the warnings and the rest of the book is read. DRM-encrypted
chapters are refused; fonts obfuscated by the EPUB rules do not matter.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from urllib.parse import unquote

from lxml import etree

from knowledge.errors import EmptyDocument, KnowledgeError, UnsupportedFile, in_words
from knowledge.ingest._compose import add_document
from knowledge.ingest._html import read_html
from knowledge.ingest._text import Builder, decode, one_line
from knowledge.ingest._zipsafe import MAX_PACKAGE_BYTES, check_package
from knowledge.ingest.document import Document

#: An EPUB that unpacks to more than this is refused (a "zip bomb").
MAX_UNPACKED_BYTES = MAX_PACKAGE_BYTES
#: At most this many content documents are read.
MAX_DOCUMENTS = 5000

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, recover=True)
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_XHTML = "{http://www.w3.org/1999/xhtml}"
_OPS = "{http://www.idpf.org/2007/ops}"
_CONTENT_TYPES = ("application/xhtml+xml", "text/html", "application/xml", "text/xml", "application/x-dtbook+xml")
_CONTENT_EXTS = (".xhtml", ".html", ".htm", ".xml", ".xht")
#: Font obfuscation (IDPF and Adobe): not DRM, the chapters read as they are.
_FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")


def read_epub(data: bytes) -> Document:
    """Read an EPUB: sections per chapter (heading path = chapter title > its headings, ``page`` =
    its position in reading order); ``title`` and ``attributes["author"]`` from the OPF metadata.

    Raises:
        UnsupportedFile: a damaged ZIP, DRM-encrypted chapters (``"damaged: ..."`` /
            ``"unsupported: ..."``), or entries that overlap each other's data (an overlapping zip
            bomb).
        FileTooLarge: the package unpacks to more than :data:`MAX_UNPACKED_BYTES`.
        EmptyDocument: no chapter has text.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        zf.infolist()  # reads the central directory: a damaged one fails here
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise UnsupportedFile(f"damaged: this EPUB is not a valid ZIP ({exc})") from exc
    with zf:
        check_package(zf, data, "EPUB", MAX_UNPACKED_BYTES)
        try:
            return _Book(zf).read()
        except KnowledgeError:
            raise
        except Exception as exc:  # zlib.error, BadZipFile (CRC), ...
            raise UnsupportedFile(f"damaged: this EPUB cannot be read ({in_words(exc)})") from exc


class _Book:
    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        self.names = {i.filename for i in zf.infolist() if not i.is_dir()}
        self.warnings: list[str] = []

    def xml(self, name: str) -> etree._Element | None:
        if name not in self.names:
            return None
        try:
            return etree.fromstring(self.zf.read(name), _PARSER)
        except etree.XMLSyntaxError:
            return None

    def read(self) -> Document:
        opf_name = self._opf_name()
        opf = self.xml(opf_name) if opf_name else None
        title = author = None
        attributes: dict[str, str | int | float | bool] = {}
        order: list[str] = []
        titles: dict[str, str] = {}
        if opf is None:
            self.warnings.append("no package document (OPF): the content documents are read in name order")
            order = sorted(
                n for n in self.names if n.lower().endswith(_CONTENT_EXTS) and not n.startswith(("META-INF/", "__MACOSX/"))
            )
        else:
            base = posixpath.dirname(opf_name or "")
            meta = opf.find(_OPF + "metadata")
            if meta is None:
                meta = opf.find(".//" + _OPF + "metadata")
            if meta is not None:
                title = _first(meta, _DC + "title")
                author = _first(meta, _DC + "creator")
                language = _first(meta, _DC + "language")
                attributes = {k: v for k, v in (("author", author), ("language", language)) if v}
            order, nav, ncx = self._spine(opf, base)
            titles = self._toc(nav, ncx)
        self._check_drm(order)
        builder = Builder()
        for position, name in enumerate(order[:MAX_DOCUMENTS], start=1):
            try:
                doc = read_html(decode(self.zf.read(name)))
            except EmptyDocument:
                continue
            except KnowledgeError as exc:
                self.warnings.append(f"{name}: not read: {exc}")
                continue
            label = titles.get(name) or doc.title or None
            _append(builder, doc, label, position)
        if len(order) > MAX_DOCUMENTS:
            self.warnings.append(f"only the first {MAX_DOCUMENTS} of {len(order)} content documents are read")
        return builder.build(
            "epub", empty="no text: this EPUB has no text", title=title, warnings=self.warnings, attributes=attributes
        )

    def _opf_name(self) -> str | None:
        container = self.xml("META-INF/container.xml")
        if container is not None:
            for rootfile in container.iter("{*}rootfile"):
                path = unquote(rootfile.get("full-path") or "")
                if path in self.names:
                    return path
        opfs = sorted(n for n in self.names if n.lower().endswith(".opf") and not n.startswith("__MACOSX/"))
        return opfs[0] if opfs else None

    def _spine(self, opf: etree._Element, base: str) -> tuple[list[str], str | None, str | None]:
        """``(content documents in reading order, nav document, NCX)`` as names in the ZIP."""
        items: dict[str, tuple[str, str, str]] = {}  # id -> (name, media type, properties)
        manifest_order: list[str] = []
        nav = ncx = None
        for item in opf.iter(_OPF + "item"):
            href = item.get("href")
            if not href:
                continue
            name = posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0])))
            media = (item.get("media-type") or "").lower()
            props = item.get("properties") or ""
            items[item.get("id") or name] = (name, media, props)
            manifest_order.append(item.get("id") or name)
            if "nav" in props.split():
                nav = name
            if media == "application/x-dtbncx+xml":
                ncx = name
        spine = opf.find(_OPF + "spine")
        if spine is None:
            spine = opf.find(".//" + _OPF + "spine")
        if spine is not None and spine.get("toc") in items:
            ncx = items[spine.get("toc") or ""][0]

        def content(entry: tuple[str, str, str]) -> bool:
            name, media, _ = entry
            return name in self.names and (media in _CONTENT_TYPES or (not media and name.lower().endswith(_CONTENT_EXTS)))

        order: list[str] = []
        if spine is not None:
            for number, ref in enumerate(spine.iter(_OPF + "itemref"), start=1):
                idref = ref.get("idref") or ""
                entry = items.get(idref)
                if entry is None:
                    self.warnings.append(
                        f"the reading order's item {number} ({one_line(idref)[:80] or 'no id'})"
                        " is not in the book's manifest: skipped"
                    )
                elif entry[0] not in self.names:
                    self.warnings.append(
                        f"the reading order's item {number} ({one_line(entry[0])[:200]}) is missing from the book: skipped"
                    )
                elif content(entry) and entry[0] not in order:
                    order.append(entry[0])
        for key in manifest_order:  # content documents outside the spine (notes, appendices)
            entry = items[key]
            if content(entry) and entry[0] not in order and entry[0] != nav and entry[0] != ncx:
                order.append(entry[0])
        return order, nav, ncx

    def _toc(self, nav: str | None, ncx: str | None) -> dict[str, str]:
        """Chapter titles by document name, from the EPUB 3 navigation document or the NCX."""
        titles: dict[str, str] = {}
        if nav:
            root = self.xml(nav)
            if root is not None:
                base = posixpath.dirname(nav)
                for nav_el in root.iter(_XHTML + "nav", "nav"):
                    if nav_el.get(_OPS + "type") not in (None, "toc"):
                        continue
                    for a in nav_el.iter(_XHTML + "a", "a"):
                        href = a.get("href") or ""
                        text = one_line("".join(a.itertext()))
                        name = posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0])))
                        if text and href and name not in titles:
                            titles[name] = text
        if ncx and not titles:
            root = self.xml(ncx)
            if root is not None:
                base = posixpath.dirname(ncx)
                for point in root.iter(_NCX + "navPoint"):
                    label = point.find(f"{_NCX}navLabel/{_NCX}text")
                    src = point.find(_NCX + "content")
                    if label is None or src is None:
                        continue
                    href = src.get("src") or ""
                    name = posixpath.normpath(posixpath.join(base, unquote(href.split("#")[0])))
                    text = one_line("".join(label.itertext()))
                    if text and name not in titles:
                        titles[name] = text
        return titles

    def _check_drm(self, order: list[str]) -> None:
        enc = self.xml("META-INF/encryption.xml")
        if enc is None:
            return
        encrypted = set()
        for data in enc.iter("{*}EncryptedData"):
            method = data.find("{*}EncryptionMethod")
            algorithm = method.get("Algorithm") if method is not None else ""
            if algorithm in _FONT_OBFUSCATION:
                continue
            for ref in data.iter("{*}CipherReference"):
                encrypted.add(posixpath.normpath(unquote(ref.get("URI") or "")))
        if encrypted & set(order):
            raise UnsupportedFile(
                "unsupported: this EPUB is protected by DRM (its chapters are encrypted); only DRM-free e-books can be read"
            )


def _first(parent: etree._Element, tag: str) -> str | None:
    el = parent.find(tag)
    return one_line("".join(el.itertext())) or None if el is not None else None


def _append(builder: Builder, doc: Document, label: str | None, page: int) -> None:
    """``doc``'s sections under the chapter title ``label`` (not repeated when the chapter's own
    first heading is the title), with tables and warnings, on ``page``."""
    add_document(builder, doc, label, page=page, merge=True)
