"""PDF: text per page with pypdf (PDFium where pypdf fails), normalised for search.

One section per page (1-based): Unicode NFKC (ligatures become letters), words hyphenated across a
line break joined (:func:`join_hyphenated`), text drawn outside the visible page box left out, the
empty password tried first on encrypted files, filled form fields and notes added to their page,
two-column pages read column by column (:func:`column_text`). A file or page pypdf cannot read
(including its safety limits, kept) is read by PDFium; one neither reads is reported with both
reasons, never as a page without text. Pages without a text layer go to OCR
(:mod:`knowledge.ingest._ocr`). pypdf's own diagnostics are re-logged at INFO on the
``knowledge.ingest.pdf`` logger, so nothing reaches stderr.

The rules one by one: ``docs/ingestion.md``.
"""

from __future__ import annotations

import io
import logging
import math
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from knowledge.errors import EmptyDocument, KnowledgeError, PasswordRequired, UnsupportedFile, in_words
from knowledge.ingest._ocr import NO_TEXT_EVEN_BY_OCR, ocr_missing_pages
from knowledge.ingest._pdfium import PDFIUM_LOCK
from knowledge.ingest._pdftables import (
    EDGE_LINES,
    EDGE_SHARE,
    PdfTable,
    RecordCollector,
    compose_page,
    continued,
    find_tables,
    markdown_tables,
)
from knowledge.ingest._text import Builder, clean, one_line
from knowledge.ingest._text import page_ranges as _pages
from knowledge.ingest.document import Document

log = logging.getLogger("knowledge.ingest.pdf")

NO_TEXT_LAYER = "no text layer (scanned? OCR needed)"

# Swapping the pypdf logger's propagation and the warnings filters is process-wide, so one PDF is
# parsed at a time. pypdf is pure Python: under the GIL two parses would not run in parallel anyway.
# Taken before PDFIUM_LOCK (knowledge.ingest._pdfium) when both are held.
_PYPDF_LOCK = threading.Lock()


@contextmanager
def _pypdf_quiet(name: str | None) -> Iterator[None]:
    """Run pypdf with its log records and warnings captured, then re-log them on our logger."""
    collect = RecordCollector()
    pypdf_log = logging.getLogger("pypdf")
    with _PYPDF_LOCK:
        propagate, level = pypdf_log.propagate, pypdf_log.level
        pypdf_log.addHandler(collect)
        pypdf_log.propagate = False
        if pypdf_log.level == logging.NOTSET or pypdf_log.level > logging.WARNING:
            pypdf_log.setLevel(logging.WARNING)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                yield
        finally:
            pypdf_log.removeHandler(collect)
            pypdf_log.propagate = propagate
            pypdf_log.setLevel(level)
    where = name or "PDF"
    for record in collect.records:
        log.info("%s: pypdf %s: %s", where, record.levelname.lower(), record.getMessage())
    for w in caught:
        log.info("%s: %s: %s", where, w.category.__name__, w.message)


def read_pdf(
    data: bytes,
    *,
    name: str | None = None,
    password: str | None = None,
    ocr: str = "auto",
    on_page=None,
    tables: str = "auto",
) -> Document:
    """Read a PDF; sections are pages (``page`` 1-based).

    With ``ocr="auto"`` the pages without a text layer are read by OCR (:mod:`knowledge.ingest._ocr`;
    ``on_page(done, total)`` reports each page), and a warning names them with their confidence.

    With ``tables="auto"`` the pages with a text layer are searched for tables
    (:mod:`knowledge.ingest._pdftables`): a page with tables is written as its text around them and
    each table as Markdown rows (``| a | b |``), recorded in :attr:`Document.tables` with its page
    and box, so the chunker repeats the header and never cuts a row. ``tables="off"`` reads every
    page as text only.

    Raises:
        PasswordRequired: encrypted, and neither the empty password nor ``password`` opens it.
        UnsupportedFile: damaged so that neither pypdf nor PDFium can open it (both reasons given),
            or encrypted with a method neither can undo, or no page could be read (each page's
            reasons given: a page that could not be read is never called a page without text).
        OcrUnavailable: no page has a text layer and the OCR package cannot be loaded.
        EmptyDocument: no page has visible text (``"no text layer (scanned? OCR needed)"``), and with
            ``ocr="auto"`` OCR found none either (``"no text found, even by OCR"``).
    """
    if tables not in ("auto", "off"):
        raise ValueError(f"tables must be 'auto' or 'off', got {tables!r}")
    with _pypdf_quiet(name):
        ex = _extract(data, password)
    try:
        if tables == "auto":
            _find_tables(ex)
        _without_text_layer(ex, ocr=ocr, on_page=on_page)
    finally:
        ex.close()
    pages, warnings_, n_pages, title = ex.pages, ex.notes + _page_warnings(ex.problems), ex.n_pages, ex.title
    texts = join_hyphenated(pages)
    builder = Builder(form="NFKC")
    for number in sorted(texts):
        start = builder.add(texts[number], page=number, cleaned=True)
        if start is not None and number in ex.tables:
            _record_tables(builder, start, texts[number], ex.tables[number])
        elif start is not None:  # a page read by OCR: its tables are Markdown in its text
            for s, h, e in markdown_tables(texts[number]):
                builder.record_table(start + s, start + h, start + e, page=number)
    failed = [
        p
        for p in ex.problems  # pages without a text layer (where OCR, too, read nothing) are not failures
        if p[1] not in (NO_TEXT_LAYER, "blank") and not p[1].startswith("without a text layer")
    ]
    if builder.empty and failed:  # an extraction failure is not "no text"
        raise UnsupportedFile("unreadable PDF: " + "; ".join(_page_warnings(failed)))
    if builder.empty:
        detail = f"none of its {n_pages} pages has text" if n_pages > 1 else "its page has no text"
        if ocr != "off":
            raise EmptyDocument(f"{NO_TEXT_EVEN_BY_OCR}: {detail} (no text layer, and OCR read nothing)")
        raise EmptyDocument(f"{NO_TEXT_LAYER}: {detail}")
    return builder.build("pdf", empty=NO_TEXT_LAYER, pages=n_pages, warnings=warnings_, title=title)


class _Extraction:
    """What the readers got out of a PDF: ``pages`` ``{page number: cleaned NFKC text}``;
    ``problems`` ``[(page number, what is wrong)]`` for :func:`_page_warnings`; ``notes`` other
    warnings (the fallback used, form fields); ``no_text_layer`` the pages that have marks but no
    text (see :func:`_without_text_layer`)."""

    def __init__(self, data: bytes, password: str | None) -> None:
        self.data, self.password = data, password
        self.pages: dict[int, str] = {}
        self.problems: list[tuple[int, str]] = []
        self.notes: list[str] = []
        self.no_text_layer: list[int] = []
        self.tables: dict[int, list[PdfTable]] = {}
        self.fields: dict[int, str] = {}  # page -> its form fields' lines
        self.n_pages = 0
        self.title: str | None = None
        self._pdfium = None
        self._pdfium_error: str | None = None

    def pdfium(self):
        """The file opened with PDFium (once), or ``None`` with :attr:`pdfium_error` set."""
        if self._pdfium is None and self._pdfium_error is None:
            try:
                with PDFIUM_LOCK:
                    self._pdfium = _pdfium_open(self.data, self.password)
            except KnowledgeError:
                raise
            except Exception as exc:
                self._pdfium_error = _reason(exc)
        return self._pdfium

    @property
    def pdfium_error(self) -> str | None:
        return self._pdfium_error

    def close(self) -> None:
        if self._pdfium is not None:
            with PDFIUM_LOCK:
                self._pdfium.close()
            self._pdfium = None


def _extract(data: bytes, password: str | None) -> _Extraction:
    ex = _Extraction(data, password)
    try:
        _read(ex)
    except BaseException:
        ex.close()
        raise
    return ex


def _read(ex: _Extraction) -> None:
    """Fill ``ex`` from pypdf, page by page, with PDFium where pypdf fails."""
    from pypdf import PdfReader  # noqa: PLC0415 - PDFs only

    data, password = ex.data, ex.password
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        _unlock(reader, password)
        n_pages = len(reader.pages)
    except PasswordRequired:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, ValueError, KeyError, ...)
        _extract_with_pdfium(ex, _reason(exc))
        return
    if n_pages == 0:
        raise EmptyDocument("this PDF has no pages")
    ex.n_pages = n_pages
    fallback: dict[str, list[int]] = {}  # pypdf's reason -> pages PDFium read instead
    for number in range(1, n_pages + 1):
        try:
            page = reader.pages[number - 1]
            text, visible = _page_text(page)
        except Exception as exc:  # LimitReachedError (a safety limit), a broken stream, ...
            recovered = _pdfium_page_text(ex, number, _reason(exc), fallback)
            if recovered is None:
                continue
            page, text, visible = None, recovered, True
        text = clean(text, form="NFKC") if visible else ""
        if text.strip():
            text = _columns(ex, number, text)
        fields = _form_fields(page) if page is not None else ""
        if fields:
            ex.fields[number] = fields
        if text.strip() or fields:
            ex.pages[number] = "\n\n".join(t for t in (text, fields) if t.strip())
        elif page is not None and _is_blank(page):
            ex.problems.append((number, "blank"))
        else:
            ex.no_text_layer.append(number)
    for reason, numbers in fallback.items():
        ex.notes.append(
            f"{_pages(numbers)}: pypdf could not read {'it' if len(numbers) == 1 else 'them'}"
            f" ({reason}); read with PDFium instead"
        )
    ex.title = _title(reader)
    try:
        attached = sorted(reader.attachments)
    except Exception:
        attached = []
    if attached:
        names = ", ".join(attached[:5]) + (", ..." if len(attached) > 5 else "")
        one = len(attached) == 1
        ex.notes.append(
            f"{len(attached)} attached file{'' if one else 's'} ({names}) not read;"
            f" save {'it' if one else 'them'} from the PDF and add {'it' if one else 'them'}"
        )


def _pdfium_open(data: bytes, password: str | None):
    import pypdfium2 as pdfium  # noqa: PLC0415 - heavy (PDFium), PDFs only

    try:
        return pdfium.PdfDocument(data, password=password or None)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            if password:
                raise PasswordRequired("wrong password: the password given does not open this PDF") from exc
            raise PasswordRequired("password required: this PDF is encrypted; give its password to read it") from exc
        raise


def _pdfium_text(pdf, number: int) -> str:
    """Page ``number``'s text as PDFium reads it (``\\r\\n`` lines; :func:`clean` normalises them and
    drops the U+FFFE PDFium puts where it joined a word hyphenated across a line)."""
    page = pdf[number - 1]
    try:
        textpage = page.get_textpage()
        try:
            return textpage.get_text_range()
        finally:
            textpage.close()
    finally:
        page.close()


def _pdfium_page_text(ex: _Extraction, number: int, reason: str, fallback: dict[str, list[int]]) -> str | None:
    """The page's text from PDFium after pypdf failed on it for ``reason``; ``None`` (and the page
    named in the problems with both reasons) when PDFium cannot read it either."""
    pdf = ex.pdfium()
    if pdf is None:
        ex.problems.append((number, f"could not be read (pypdf: {reason}; PDFium: {ex.pdfium_error}); skipped"))
        return None
    try:
        with PDFIUM_LOCK:
            text = _pdfium_text(pdf, number)
    except Exception as exc:
        ex.problems.append((number, f"could not be read (pypdf: {reason}; PDFium: {_reason(exc)}); skipped"))
        return None
    fallback.setdefault(reason, []).append(number)
    return text


def _extract_with_pdfium(ex: _Extraction, reason: str) -> None:
    """The whole file through PDFium, because pypdf cannot open it (``reason``)."""
    pdf = ex.pdfium()
    if pdf is None:
        raise UnsupportedFile(
            f"unreadable PDF (damaged or truncated?): neither pypdf ({reason}) nor PDFium ({ex.pdfium_error}) can open it"
        )
    ex.n_pages = len(pdf)
    if ex.n_pages == 0:
        raise EmptyDocument("this PDF has no pages")
    ex.notes.append(f"pypdf could not open this PDF ({reason}); read with PDFium instead (form fields are not read)")
    for number in range(1, ex.n_pages + 1):
        try:
            with PDFIUM_LOCK:
                raw = _pdfium_text(pdf, number)
            text = clean(raw, form="NFKC")
        except Exception as exc:
            ex.problems.append((number, f"could not be read (PDFium: {_reason(exc)}); skipped"))
            continue
        if text.strip():
            ex.pages[number] = _columns(ex, number, text)
        else:
            ex.no_text_layer.append(number)
    try:
        with PDFIUM_LOCK:
            title = pdf.get_metadata_dict().get("Title")
    except Exception:
        title = None
    ex.title = one_line(clean(title, form="NFKC")) or None if isinstance(title, str) else None


def _without_text_layer(ex: _Extraction, *, ocr: str = "off", on_page=None) -> None:
    """THE place where pages that draw marks but have no text are decided about.

    ``ex.no_text_layer`` lists them (a page that could not be read is never among them: it is a
    problem of its own). Each is reported as having no text layer (scanned? OCR needed). An OCR
    step attaches here: it may put a page's recognised text into ``ex.pages[number]`` (and a note
    into ``ex.notes``) instead of reporting it; ``ex.pdfium()`` gives the open PDFium document to
    render the page from (hold :data:`PDFIUM_LOCK` while calling into it). Runs without the pypdf
    lock, so OCR in one thread does not hold up other threads' PDFs.
    """
    for number in ex.no_text_layer:
        if number not in ex.pages:
            ex.problems.append((number, NO_TEXT_LAYER))
    ex.problems.sort(key=lambda p: p[0])
    if ocr != "off":  # the OCR hook (ingest.ocr = auto): fills ex.pages for pages without a text layer
        ex.problems, notes = ocr_missing_pages(
            ex.data, ex.pages, ex.problems, NO_TEXT_LAYER, password=ex.password, on_page=on_page
        )
        ex.notes.extend(notes)


def _find_tables(ex: _Extraction) -> None:
    """Search the pages with text for tables; write each page that has some as its text around
    them with the tables as Markdown (:func:`knowledge.ingest._pdftables.compose_page`)."""
    try:
        found, notes = find_tables(ex.data, sorted(ex.pages), password=ex.password)
    except KnowledgeError:
        raise
    except Exception as exc:  # the detector could not even open the file: the text stands
        ex.notes.append(f"tables not looked for ({_reason(exc)}); the text is read as text")
        return
    ex.notes.extend(notes)
    texts: dict[int, str] = {}
    for number, page_tables in sorted(found.items()):
        text = ex.pages[number]
        fields = ex.fields.get(number, "")
        if fields and text.endswith(fields):
            text = text[: -len(fields)].rstrip("\n")
        texts[number] = text
        _compose(ex, number, text, page_tables)
    heads: dict[int, PdfTable] = {}  # page -> the table (with its header) its last table goes on from
    for number in sorted(found):  # a table that goes on overleaf, page after page
        before = ex.tables.get(number - 1)
        after = ex.tables.get(number)
        if not before or not after:
            continue
        furniture = _lines(ex.pages[number - 1]) & _lines(ex.pages[number])  # running headers, footers
        if not _at_edge(ex.pages[number - 1], before[-1], end=True, furniture=furniture):
            continue
        if not _at_edge(ex.pages[number], after[0], end=False, furniture=furniture):
            continue
        head = heads.get(number - 1, before[-1])
        joined = continued(head, after[0])
        if joined is not None:
            _compose(ex, number, texts[number], [joined, *after[1:]])
            if len(after) == 1:
                heads[number] = head


def _compose(ex: _Extraction, number: int, text: str, page_tables: list[PdfTable]) -> None:
    parts = (clean(compose_page(text, page_tables), form="NFKC"), ex.fields.get(number, ""))
    ex.pages[number] = "\n\n".join(p for p in parts if p.strip())
    ex.tables[number] = page_tables


def _at_edge(page_text: str, table: PdfTable, *, end: bool, furniture: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``table`` ends (``end``) or starts the page's text, give or take
    :data:`~knowledge.ingest._pdftables.EDGE_LINES` lines (a page number, a running header) besides
    the lines of ``furniture`` (lines the page before or after has too: running headers and
    footers, however many); or whether its box reaches within
    :data:`~knowledge.ingest._pdftables.EDGE_SHARE` of the page's height of its foot (head): the text
    reader may have put the page's title or notes after the table."""
    if table.page_height > 0 and not table.turned:  # its box reaches the page's foot (or head)
        margin = EDGE_SHARE * table.page_height
        if (table.bbox[3] >= table.page_height - margin) if end else (table.bbox[1] <= margin):
            return True
    body = clean(table.markdown, form="NFKC")
    i = page_text.find(body)
    if i < 0:
        return False
    rest = page_text[i + len(body) :] if end else page_text[:i]
    return len([line for line in rest.split("\n") if line.strip() and line.strip() not in furniture]) <= EDGE_LINES


def _lines(text: str) -> set[str]:
    """The non-blank lines of ``text``, stripped."""
    return {line.strip() for line in text.split("\n") if line.strip()}


def _record_tables(builder: Builder, start: int, text: str, tables: list[PdfTable]) -> None:
    """Record the page's tables (their Markdown found in the page's final ``text``, which begins
    at offset ``start``) as :class:`~knowledge.ingest.document.Table` of the document. A table
    that goes on from the page before (:attr:`PdfTable.continues`) lengthens that page's last
    table, so the chunker repeats its header over the rows of this page too."""
    at = 0
    for table in tables:
        body = clean(table.markdown, form="NFKC")
        i = text.find(body, at)
        if i < 0:
            continue
        if table.continues and builder.extend_last_table(start + i + len(body), table.page, table.bbox):
            at = i + len(body)
            continue
        header = clean(table.header_text, form="NFKC")
        if not header:
            continue
        builder.record_table(start + i, start + i + len(header), start + i + len(body), page=table.page, bbox=table.bbox)
        at = i + len(body)


# -- form fields ----------------------------------------------------------------------------------

#: Annotation flags (PDF 32000-1 §12.5.3): Hidden (bit 2) and NoView (bit 6) are not shown.
_NOT_SHOWN = 2 | 32


def _form_fields(page) -> str:
    """``name: value`` lines for the filled form fields shown on ``page`` (PDF 32000-1 §12.7), top
    to bottom; the name is the field's user-facing name (``/TU``) or its partial name (``/T``);
    check boxes and radio buttons show their chosen state's name, unset boxes nothing. Text boxes
    (``/FreeText``) and sticky notes (``/Text``, labelled ``Note (author):``) of the page too
    (§12.5.6). Annotations flagged Hidden or NoView are left out."""
    try:
        annots = page.get("/Annots")
        annots = annots.get_object() if annots is not None else None
    except Exception:
        return ""
    if not annots:
        return ""
    found: list[tuple[float, float, str]] = []
    seen: set[int] = set()
    for ref in annots:
        try:
            annot = ref.get_object()
            if int(annot.get("/F", 0)) & _NOT_SHOWN:
                continue
            subtype = annot.get("/Subtype")
            if subtype in ("/FreeText", "/Text") and annot.get("/Contents"):  # a text box, a sticky note
                rect = [float(v) for v in annot.get("/Rect", [0, 0, 0, 0])]
                author = one_line(str(annot.get("/T") or ""))
                label = "Text box" if subtype == "/FreeText" else f"Note ({author})" if author else "Note"
                found.append(
                    (-max(rect[1], rect[3]), min(rect[0], rect[2]), f"{label}: {one_line(str(annot.get('/Contents')))}")
                )
                continue
            if subtype != "/Widget":
                continue
            field = annot if "/T" in annot or "/V" in annot else annot.get("/Parent").get_object()
            if id(field) in seen:
                continue
            seen.add(id(field))
            value = _inherited(field, "/V")
            kind = _inherited(field, "/FT")
            text = _field_value(value, kind)
            if not text:
                continue
            label = _inherited(field, "/TU") or _inherited(field, "/T") or "field"
            rect = [float(v) for v in annot.get("/Rect", [0, 0, 0, 0])]
            found.append((-max(rect[1], rect[3]), min(rect[0], rect[2]), f"{one_line(str(label))}: {text}"))
        except Exception:  # a malformed annotation: the others still count
            continue
    found.sort()
    return clean("\n".join(line for _, _, line in found), form="NFKC")


def _inherited(field, key: str):
    """A field attribute, looked up through ``/Parent`` (PDF 32000-1 §12.7.3.1 inheritable entries)."""
    node, depth = field, 0
    while node is not None and depth < 32:
        if key in node:
            value = node[key]
            return value.get_object() if hasattr(value, "get_object") else value
        parent = node.get("/Parent")
        node = parent.get_object() if parent is not None else None
        depth += 1
    return None


def _field_value(value, kind) -> str:
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(filter(None, (_field_value(v, kind) for v in value)))
    text = str(value)
    if text.startswith("/"):  # a name: a check box or radio button state
        return "" if text == "/Off" else text[1:]
    if kind == "/Sig":
        return ""
    return one_line(text)


# -- columns --------------------------------------------------------------------------------------


def _columns(ex: _Extraction, number: int, text: str) -> str:
    """``text``, or the page read column by column when PDFium finds two columns on it."""
    pdf = ex.pdfium()
    if pdf is None:
        return text
    try:
        with PDFIUM_LOCK:
            page = pdf[number - 1]
            try:
                ordered = column_text(page)
            finally:
                page.close()
    except Exception:
        return text
    return clean(ordered, form="NFKC") if ordered and ordered.strip() else text


def column_text(page) -> str | None:
    """A pypdfium2 page's text read column by column, or ``None`` when it is not in two columns.

    PDFium's text rectangles (one per run of text on a line) are split at the vertical gutter that
    the fewest rectangles cross, taken only if both sides hold at least three lines that fill their
    column (a median width of at least half the column: prose, not the cells of a table) and lines
    on the two sides stand beside each other. Rectangles that cross the gutter (a title, an abstract
    across the page) cut the page into bands; each band is read left column then right column
    (PDFium's ``get_text_bounded`` on each column's box), bands and full-width lines top to bottom.
    """
    textpage = page.get_textpage()
    try:
        rects = [textpage.get_rect(i) for i in range(textpage.count_rects())]
        rects = [r for r in rects if r[2] > r[0] and r[3] > r[1]]
        if len(rects) < 6:
            return None
        lo, hi = min(r[0] for r in rects), max(r[2] for r in rects)
        width = hi - lo
        x, step = lo + 0.25 * width, max(width / 400, 0.5)
        run_start: float | None = None
        run_count = 0  # crossings of the run that starts at run_start
        candidates: list[tuple[int, float, float]] = []  # crossings, run length, centre
        while x <= lo + 0.75 * width:
            crossing = sum(1 for r in rects if r[0] < x < r[2])
            if run_start is not None and crossing == run_count:
                pass
            else:
                if run_start is not None:
                    candidates.append((run_count, x - run_start, (run_start + x) / 2))
                run_start, run_count = x, crossing
            x += step
        if run_start is not None:
            candidates.append((run_count, x - run_start, (run_start + x) / 2))
        if not candidates:
            return None
        crossings, _, gutter = min(candidates, key=lambda c: (c[0], -c[1]))
        left = [r for r in rects if r[2] <= gutter]
        right = [r for r in rects if r[0] >= gutter]
        if len(left) < 3 or len(right) < 3 or crossings > 0.25 * len(rects):
            return None

        def fills(side, a, b) -> bool:
            widths = sorted(r[2] - r[0] for r in side)
            return widths[len(widths) // 2] >= 0.5 * (b - a)

        if not (fills(left, lo, gutter) and fills(right, gutter, hi)):
            return None
        beside = sum(1 for r in right if any(lf[1] < r[3] and r[1] < lf[3] for lf in left))
        if beside < 3:
            return None
        # bands between the full-width lines, top to bottom
        full = sorted((r for r in rects if r[0] < gutter < r[2]), key=lambda r: -r[3])
        top = max(r[3] for r in rects) + 1
        pieces: list[str] = []

        def band(upper: float, lower: float) -> None:
            for a, b in ((lo - 1, gutter), (gutter, hi + 1)):
                part = textpage.get_text_bounded(a, lower, b, upper)
                if part.strip():
                    pieces.append(part.strip())

        for r in full:
            if top > r[3]:
                band(top, r[3])
            pieces.append(textpage.get_text_bounded(r[0] - 1, r[1], r[2] + 1, r[3]).strip())
            top = min(top, r[1])
        band(top, min(r[1] for r in rects) - 1)
        return "\n".join(p for p in pieces if p)
    finally:
        textpage.close()


def _page_warnings(problems: list[tuple[int, str]]) -> list[str]:
    """One sentence per run of consecutive pages with the same problem: "page 3 has no text layer
    (scanned? OCR needed)", "pages 4-9 are blank"."""
    runs: list[list] = []  # [first, last, problem]
    for number, problem in problems:
        if runs and runs[-1][1] == number - 1 and runs[-1][2] == problem:
            runs[-1][1] = number
        else:
            runs.append([number, number, problem])
    out = []
    for first, last, problem in runs:
        one = first == last
        subject = f"page {first}" if one else f"pages {first}-{last}"
        if problem == NO_TEXT_LAYER:
            out.append(f"{subject} {'has' if one else 'have'} {NO_TEXT_LAYER}")
        elif problem == "blank":
            out.append(f"{subject} {'is' if one else 'are'} blank")
        else:
            out.append(f"{subject} {problem}")
    return out


def _unlock(reader, password: str | None) -> None:
    if not reader.is_encrypted:
        return
    try:
        if reader.decrypt(""):
            return
        if password is None:
            raise PasswordRequired("password required: this PDF is encrypted; give its password to read it")
        if password and reader.decrypt(password):
            return
    except KnowledgeError:
        raise
    except Exception as exc:  # DependencyError (no cryptography), NotImplementedError (unknown filter)
        raise UnsupportedFile(f"unsupported PDF encryption: {_reason(exc)}") from exc
    raise PasswordRequired("wrong password: the password given does not open this PDF")


def _page_text(page) -> tuple[str, bool]:
    """The page's text and whether any of it is drawn inside the page's visible box."""
    box = page.cropbox
    x0, x1 = sorted((float(box.left), float(box.right)))
    y0, y1 = sorted((float(box.bottom), float(box.top)))
    visible = False

    def visit(text, cm, tm, font_dict, font_size) -> None:
        nonlocal visible
        if visible or not text or not text.strip():
            return
        try:
            # the text origin in device space: tm then cm (PDF 32000-1 §9.4.4), and its scaled size
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
            y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            scale = math.sqrt(abs((tm[0] * tm[3] - tm[1] * tm[2]) * (cm[0] * cm[3] - cm[1] * cm[2])))
            size = max(abs(float(font_size or 1)) * scale, 1.0)
        except (TypeError, ValueError, IndexError):
            visible = True  # cannot tell: count it
            return
        width = size * len(text)
        # glyphs reach ~0.25 em below the baseline and ~1 em above it
        if x0 - width <= x <= x1 + size and y0 - size <= y <= y1 + 0.25 * size:
            visible = True

    text = page.extract_text(visitor_text=visit)
    return text or "", visible


#: Content-stream operators that put marks on the page (PDF 32000-1 §8.5.3 path painting, §8.8 and
#: §8.9.7 XObjects and inline images, §8.7.4.2 shading, §9.4.3 text showing).
_PAINTING = {
    b"S",
    b"s",
    b"f",
    b"F",
    b"f*",
    b"B",
    b"B*",
    b"b",
    b"b*",
    b"Do",
    b"BI",
    b"INLINE IMAGE",
    b"sh",
    b"Tj",
    b"TJ",
    b"'",
    b'"',
}


def _is_blank(page) -> bool:
    """True when the page's content draws nothing (no content, or only graphics-state settings)."""
    try:
        contents = page.get_contents()
        if contents is None:
            return True
        return not any(op in _PAINTING for _, op in contents.operations)
    except Exception:
        return False


def _title(reader) -> str | None:
    try:
        meta = reader.metadata
        title = meta.title if meta else None
    except Exception:
        return None
    if not isinstance(title, str):
        return None
    return one_line(clean(title, form="NFKC")) or None


def _reason(exc: BaseException) -> str:
    """What went wrong, in the library's own words (its exception's message; :func:`in_words` when
    there is none): ``"Stream has ended unexpectedly"``, ``"Data format error"``."""
    text = one_line(str(exc))
    # pypdfium2 wraps PDFium's reason: "Failed to load document (PDFium: Data format error)."
    inner = re.search(r"\(PDFium: ([^)]*)\)", text)
    if inner:
        text = inner.group(1)
    return text.rstrip(".") if text else in_words(exc)


# -- hyphenation ----------------------------------------------------------------------------------

_LETTERS = r"[^\W\d_]"
#: a word (letters only) ending a line with a hyphen, and the letters that start the next line
_BROKEN = re.compile(rf"(?<!{_LETTERS})(?P<a>{_LETTERS}+)-[ \t]*\n[ \t]*(?P<b>{_LETTERS}+)")
_WORD = re.compile(rf"{_LETTERS}+(?:-{_LETTERS}+)*")


def join_hyphenated(pages: dict[int, str]) -> dict[int, str]:
    """Join words broken with a hyphen at a line end, within a page.

    "taki-\\nmata" becomes "takimata". The hyphen is kept ("well-\\nknown" -> "well-known") when the
    part before it is itself hyphenated ("state-of-the-\\nart"), when the next line does not start
    in lower case, or when the document spells the pair with a hyphen elsewhere and never without
    one. The rest of the next line joins the first line (line breaks inside a paragraph carry no
    meaning in extracted PDF text).
    """
    words: set[str] = set()
    for text in pages.values():
        words.update(w.lower() for w in _WORD.findall(text))

    def fix(m: re.Match) -> str:
        a, b = m.group("a"), m.group("b")
        pre = m.string[m.start() - 1] if m.start() else ""
        if pre.isalnum() or pre == "_":
            return m.group(0)  # "a" ends a token with digits ("x86-\n64"): leave it
        joined, hyphened = f"{a}{b}", f"{a}-{b}"
        keep = pre == "-" or not b[0].islower() or (hyphened.lower() in words and joined.lower() not in words)
        return hyphened if keep else joined

    return {number: _BROKEN.sub(fix, text) for number, text in pages.items()}
