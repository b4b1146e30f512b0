"""The document viewer: one stable, shareable URL per file and passage, and what it shows.

``viewer_url(store, file_id, start=, end=, page=)`` is the app-relative link every citation and
search hit opens (``view?store=…&file=…&start=…&end=…#passage``); :func:`parse_viewer_query` reads
it back from the page's query parameters. :func:`open_viewer` turns a :class:`ViewerTarget` into a
:class:`Viewer` through a workbench view (a file of a store the person may not read is missing):
the file's name and kind, the passage's heading path and pages, and the text re-read by the
ingestion readers. :func:`page_image` renders a PDF page with the passage marked and the tables it
lies in outlined (:mod:`knowledge.ingest.pdfview`), :func:`image_png` an image file, :func:`text_parts`
the text before, of and after the passage made inert (the passage's tables drawn as tables, under
their header), :func:`download` the stored bytes with a safe type.
``pages/viewer.py`` draws it.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlencode

from knowledge.config import IngestSettings
from knowledge.errors import FileNotFoundInStore, InvalidArgument, KnowledgeError
from knowledge.filestore.base import StoredFile
from knowledge.ingest import Document
from knowledge.ingest.document import Section, Table
from knowledge.ingest.isolated import ReadLimits, read_bounded
from knowledge.ingest.pdfview import PageImage, render_page
from knowledge.service.indexing import reading_name
from knowledge.text.highlight import escape_markdown
from knowledge.text.tables import read_table, table_html
from knowledge.vectorstore.store import Hit

if TYPE_CHECKING:
    from knowledge.workbench import Workbench

#: The viewer page's ``url_path`` in ``app.py``'s navigation.
VIEWER_PATH = "view"
#: The anchor of the passage's heading on the viewer page (Streamlit scrolls a heading whose
#: anchor is the URL's fragment into view).
PASSAGE_ANCHOR = "passage"


@dataclass(frozen=True, slots=True)
class ViewerTarget:
    """What a viewer URL asks for: the ``file_id`` in ``store``, and optionally the passage
    ``[start, end)`` (character offsets into the file's extracted text, as a chunk's
    ``char_start``/``char_end``) and the ``page`` (1-based) to open at."""

    store: str
    file_id: str
    start: int | None = None
    end: int | None = None
    page: int | None = None


def viewer_url(
    store: str, file_id: str, *, start: int | None = None, end: int | None = None, page: int | None = None
) -> str:
    """The viewer's app-relative URL for ``file_id`` in ``store`` (``view?store=…&file=…``), with the
    passage ``[start, end)`` and the ``page`` when given; parameters are URL-encoded, so any store
    name round-trips through :func:`parse_viewer_query`. A passage's link ends in ``#passage``
    (:data:`PASSAGE_ANCHOR`): the page opens scrolled to it."""
    query: dict[str, str | int] = {"store": store, "file": file_id}
    if start is not None and end is not None:
        query |= {"start": start, "end": end}
    if page is not None:
        query["page"] = page
    anchor = f"#{PASSAGE_ANCHOR}" if "start" in query else ""
    return f"{VIEWER_PATH}?{urlencode(query)}{anchor}"


def hit_viewer_url(store: str, hit: Hit) -> str:
    """The viewer URL of a search hit: its file, its characters and its page."""
    return viewer_url(store, hit.file_id, start=hit.char_start, end=hit.char_end, page=hit.page)


#: The words of every link to the viewer (search hits, chat sources, the Files page).
OPEN_LABEL = "Open in viewer"


def viewer_link(url: str, label: str = OPEN_LABEL) -> str:
    """A Markdown link to ``url`` (a :func:`viewer_url`, whose query is URL-encoded, so it holds no
    space, bracket or parenthesis) for ``st.markdown``; Streamlit opens it in a new tab."""
    if any(c in url for c in ' ()[]<>"\n'):
        raise InvalidArgument(f"Not a viewer URL: {url!r}.")
    return f"[{label}]({url})"


def _int(params: Mapping[str, str], key: str, low: int) -> int | None:
    raw = params.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"The link's {key} is not a whole number: {raw!r}.") from None
    if value < low:
        raise InvalidArgument(f"The link's {key} must be at least {low}, not {value}.")
    return value


def parse_viewer_query(params: Mapping[str, str]) -> ViewerTarget:
    """The :class:`ViewerTarget` of a viewer URL's query parameters (``st.query_params``).

    Raises:
        InvalidArgument: no ``store`` or ``file``, a number that is not a whole number or is
            negative, or an ``end`` before its ``start`` (the sentence says which).
    """
    store, file_id = params.get("store") or "", params.get("file") or ""
    if not store or not file_id:
        raise InvalidArgument("This viewer link names no file: it needs both store= and file=.")
    start, end, page = _int(params, "start", 0), _int(params, "end", 0), _int(params, "page", 1)
    if (start is None) != (end is None):
        start = end = None
    if start is not None and end is not None and end < start:
        raise InvalidArgument(f"The link's passage ends ({end}) before it starts ({start}).")
    return ViewerTarget(store, file_id, start, end, page)


# -- what the viewer shows ------------------------------------------------------------------------
Kind = Literal["pdf", "image", "text"]

#: Media types a browser could run or render as a page: downloaded as ``application/octet-stream``.
_ACTIVE = ("html", "xml", "script", "svg", "xhtml")


def safe_content_type(content_type: str | None) -> str:
    """The media type to download a stored file as: its own type without parameters, except one a
    browser could render as a page or run (HTML, XML, SVG, scripts) or a malformed one, which is
    ``application/octet-stream``."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    kind, _, sub = media.partition("/")
    if (
        not kind
        or not sub
        or not all(c.isalnum() or c in "+-._" for c in kind + sub)
        or any(word in media for word in _ACTIVE)
    ):
        return "application/octet-stream"
    return media


@dataclass(frozen=True, slots=True)
class Viewer:
    """What the viewer shows of a :class:`ViewerTarget`.

    ``name``/``content_type``/``size`` (bytes) of the stored file; ``kind`` how it is shown (a
    ``"pdf"`` as page images, an ``"image"`` with its OCR text, anything else as ``"text"``);
    ``format`` the reader's (:data:`knowledge.ingest.FORMATS`) or ``None`` when the text could not be
    read again (``problem`` says why; the download still works). ``text`` and ``sections`` are the
    reader's :class:`~knowledge.ingest.Document`; ``span`` the passage ``[start, end)`` clipped to the
    text (``None`` without one); ``heading`` its heading path (``"A > B"``) or ``None``;
    ``passage_pages`` the pages it lies on; ``pages`` the page count (PDF, images) and ``page`` the
    page to open at: the link's, else the passage's first, else 1. ``warnings`` sentences for the
    person (the passage lies past the text, say). ``tables`` the document's tables
    (:attr:`~knowledge.ingest.Document.tables`; a PDF's with their page and box)."""

    target: ViewerTarget
    name: str
    content_type: str
    size: int
    kind: Kind
    format: str | None
    text: str = ""
    sections: list[Section] = field(default_factory=list)
    span: tuple[int, int] | None = None
    heading: str | None = None
    passage_pages: list[int] = field(default_factory=list)
    pages: int | None = None
    page: int | None = None
    warnings: list[str] = field(default_factory=list)
    problem: str | None = None
    tables: list[Table] = field(default_factory=list)

    def passage_tables(self) -> list[Table]:
        """The tables the passage overlaps, in text order (none without a passage)."""
        if self.span is None:
            return []
        s, e = self.span
        return [t for t in self.tables if t.char_start < e and s < t.char_end]

    def table_boxes(self, page: int) -> list[tuple[float, float, float, float]]:
        """The boxes of the passage's tables on ``page``: ``(x0, top, x1, bottom)`` in PDF points
        from the page's top-left corner (PDF tables only, a table going on overleaf on each of its
        pages; ``[]`` for other files)."""
        return [box for t in self.passage_tables() for on, box in t.boxes() if on == page]

    def passage_on(self, page: int) -> list[str]:
        """The passage's text on ``page`` (one string per section of that page it overlaps)."""
        if self.span is None:
            return []
        s, e = self.span
        return [
            self.text[max(s, x.char_start) : min(e, x.char_end)]
            for x in self.sections
            if x.page == page and x.char_start < e and s < x.char_end
        ]


def find_file(wb: Workbench, target: ViewerTarget) -> StoredFile:
    """The stored file a link names, through the view ``wb``.

    Raises:
        FileNotFoundInStore: the store does not exist or ``wb.actor`` may not read it, the file is
            not in that store, or its bytes are gone (the sentence says which, in the same words
            for a store one may not see as for one that does not exist).
    """
    if wb.file_record(target.store, target.file_id) is None:
        raise FileNotFoundInStore(
            f"This link points to a file that is not in the store {target.store!r}: it may"
            " have been removed, or the store is not one you may read."
        )
    found = wb.find_stored_file(target.file_id)
    if found is None:
        raise FileNotFoundInStore(
            f"The store {target.store!r} lists this file, but its bytes are no longer in the file store: ingest it again."
        )
    return found


def file_bytes(wb: Workbench, file_id: str) -> bytes:
    """The stored bytes of ``file_id`` (through the view: ``FileNotFoundInStore`` if not readable)."""
    with wb.read_file(file_id) as fh:
        return fh.read()


def store_ocr(wb: Workbench, store: str) -> Literal["auto", "off"]:
    """Whether the store's files are read with OCR (its template's ``ocr``, else ``ingest.ocr``)."""
    record = wb.store_record(store)
    ocr = None
    if record is not None:
        try:
            ocr = wb.store_template(record).ocr
        except KnowledgeError:
            ocr = None
    return "off" if (ocr or wb.settings.ingest.ocr) == "off" else "auto"


def read_text(
    data: bytes,
    name: str,
    content_type: str | None,
    ocr: Literal["auto", "off"] = "auto",
    ingest: IngestSettings | None = None,
) -> Document:
    """The file read again by the readers ingestion uses (:func:`knowledge.ingest.read_document`,
    the same name rule), so chunk offsets point into its text; in a bounded child process as
    ingestion reads it (``ingest``'s ``reader_*`` settings; the defaults when ``None``). Raises what
    the readers raise, and ``ReaderLimitExceeded`` past the limits."""
    ingest = ingest or IngestSettings()
    return read_bounded(
        data,
        reading_name(name, content_type),
        ocr=ocr,
        tables=ingest.pdf_tables,
        processes=ingest.reader_processes,
        limits=ReadLimits.from_settings(ingest),
    ).document


def build_viewer(target: ViewerTarget, stored: StoredFile, doc: Document | None, problem: str | None = None) -> Viewer:
    """The :class:`Viewer` of ``target`` given its stored file and its text (``doc``; ``None`` with
    the reason in ``problem`` when it could not be read)."""
    is_pdf = stored.content_type == "application/pdf" or (doc is not None and doc.format == "pdf")
    if doc is None:
        kind: Kind = "pdf" if is_pdf else "image" if stored.content_type.startswith("image/") else "text"
        return Viewer(
            target,
            stored.name,
            stored.content_type,
            stored.size,
            kind,
            None,
            page=target.page or 1 if kind == "pdf" else None,
            problem=problem,
        )
    kind = "pdf" if doc.format == "pdf" else "image" if doc.format == "image" else "text"
    warnings: list[str] = []
    span = None
    if target.start is not None and target.end is not None:
        if target.start >= len(doc.text):
            warnings.append(
                f"The passage (characters {target.start}–{target.end}) lies past the end of the"
                f" file's text ({len(doc.text)} characters): the file reads differently now"
                " than when it was indexed."
            )
        else:
            span = (target.start, min(target.end, len(doc.text)))
    heading, passage_pages = None, []
    if span is not None:
        s, e = span
        inside = [x for x in doc.sections if x.char_start < max(e, s + 1) and s < x.char_end]
        heading = next((x.heading for x in inside if x.heading), None)
        passage_pages = sorted({x.page for x in inside if x.page is not None})
    page = None
    if doc.pages:
        page = target.page or (passage_pages[0] if passage_pages else 1)
        if page > doc.pages:
            warnings.append(f"The link asks for page {page}, but the file has {doc.pages}; showing page 1.")
            page = 1
    return Viewer(
        target,
        stored.name,
        stored.content_type,
        stored.size,
        kind,
        doc.format,
        doc.text,
        list(doc.sections),
        span,
        heading,
        passage_pages,
        doc.pages,
        page,
        warnings,
        problem,
        list(doc.tables),
    )


def open_viewer(wb: Workbench, target: ViewerTarget) -> Viewer:
    """:class:`Viewer` of ``target`` through the view ``wb``: :func:`find_file`, then the file read
    again (:func:`read_text`); a file the readers now refuse is shown with its reason (``problem``).

    Raises:
        FileNotFoundInStore: see :func:`find_file`.
    """
    stored = find_file(wb, target)
    data = file_bytes(wb, stored.id)
    try:
        doc = read_text(data, stored.name, stored.content_type, store_ocr(wb, target.store), wb.settings.ingest)
    except KnowledgeError as exc:
        return build_viewer(target, stored, None, f"The file's text cannot be shown: {exc}")
    return build_viewer(target, stored, doc)


def page_image(viewer: Viewer, data: bytes, page: int | None = None, *, scale: float = 1.5) -> PageImage:
    """PDF page ``page`` (default: :attr:`Viewer.page`) of the file's bytes ``data`` with the
    passage's text on that page marked and the boxes of the tables it lies in outlined
    (:meth:`Viewer.table_boxes`; :func:`knowledge.ingest.pdfview.render_page`).

    Raises:
        InvalidArgument: no such page. PasswordRequired, UnsupportedFile: PDFium cannot show it.
    """
    number = page or viewer.page or 1
    return render_page(data, number, viewer.passage_on(number), regions=viewer.table_boxes(number), scale=scale)


def image_png(data: bytes, frame: int = 1) -> bytes:
    """Frame ``frame`` (1-based; TIFFs have several) of an image file as PNG, for any format Pillow
    reads. Raises ``UnsupportedFile`` when Pillow cannot decode it."""
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415 - heavy (Pillow), the viewer only

    from knowledge.errors import UnsupportedFile  # noqa: PLC0415 - only on this path

    try:
        with Image.open(io.BytesIO(data)) as im:
            im.seek(max(0, min(frame - 1, getattr(im, "n_frames", 1) - 1)))
            out = io.BytesIO()
            im.convert("RGBA" if "A" in im.getbands() else "RGB").save(out, format="PNG")
            return out.getvalue()
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise UnsupportedFile(f"the image cannot be shown: {exc}") from exc


#: How the passage is marked in the text (a CSS class the viewer's test can find).
MARK = ('<mark class="viewer-passage">', "</mark>")


def text_parts(viewer: Viewer) -> tuple[str, str, str]:
    """The text before the passage, the passage in :data:`MARK`, and the text after it, each inert
    for ``st.markdown(..., unsafe_allow_html=True)`` (:func:`knowledge.text.highlight.escape_markdown`:
    every Markdown or HTML character a character reference). Without a passage: the whole text,
    then two empty strings.

    The part of a table (:attr:`Viewer.tables`) the passage holds is drawn as a table
    (:func:`knowledge.text.tables.table_html`, class ``viewer-table``, on a line of its own between
    blank lines): the table's header rows in its head, even where the passage starts below them,
    and the passage's rows with each cell's text in :data:`MARK`."""
    if viewer.span is None:
        return escape_markdown(viewer.text), "", ""
    s, e = viewer.span
    before, after = viewer.text[:s], viewer.text[e:]
    return escape_markdown(before), passage_markup(viewer.text, s, e, viewer.passage_tables()), escape_markdown(after)


def passage_markup(text: str, start: int, end: int, tables: list[Table]) -> str:
    """``text[start:end]`` as inert marked Markdown/HTML (see :func:`text_parts`), the parts that lie
    in ``tables`` (sorted, not overlapping) drawn as tables under their header."""

    def marked(piece: str) -> str:
        return MARK[0] + escape_markdown(piece) + MARK[1] if piece.strip() else escape_markdown(piece)

    out: list[str] = []
    at = start
    for t in tables:
        s, e = max(start, t.char_start), min(end, t.char_end)
        if e <= s or s < at:
            continue
        if text[at:s].strip():
            out.append(marked(text[at:s].strip("\n")))
        # the passage holding the header (or starting in it) shows the table from its top
        whole = s <= t.header_end
        written = text[t.char_start : e] if whole else text[t.char_start : t.header_end] + "\n" + text[s:e]
        header_lines = text[t.char_start : t.header_end].count("\n") + 1
        out.append("\n\n" + table_html(read_table(written, header_lines), css_class="viewer-table", row_mark=MARK) + "\n\n")
        at = e
    if not out:
        return MARK[0] + escape_markdown(text[start:end]) + MARK[1] if end > start else ""
    if text[at:end].strip():
        out.append(marked(text[at:end].strip("\n")))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Download:
    """A stored file to download: its bytes, its name and a :func:`safe_content_type`."""

    data: bytes
    name: str
    mime: str


def download(wb: Workbench, target: ViewerTarget) -> Download:
    """The original bytes of the linked file (through the view). Raises ``FileNotFoundInStore``
    (see :func:`find_file`)."""
    stored = find_file(wb, target)
    return Download(file_bytes(wb, stored.id), stored.name, safe_content_type(stored.content_type))
