"""PDF: text per page with pypdf, normalised for search.

* Unicode NFKC, so the ligature glyphs typesetters use ("ﬁ", "ﬂ", "ﬀ", "ﬃ") become plain letters
  and a search for "misfits" finds "misﬁts" (pypdf returns the ligature characters themselves).
* Words hyphenated across a line break are joined ("taki-\\nmata" -> "takimata"); see
  :func:`join_hyphenated` for when the hyphen is kept.
* Text drawn entirely outside the page's visible box (a label ImageMagick writes above each
  image, for example) is not page text: a page with nothing visible is reported as having no text
  layer.
* Encrypted files: the empty password is tried first (owner-password-only files open without
  asking), then the one given.
* pypdf's own diagnostics (the ``logging`` records of its ``pypdf`` loggers and any
  ``warnings.warn``) are captured while it works and re-logged at INFO level on the
  ``knowledge.ingest.pdf`` logger with the file's name, so nothing reaches stderr.
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

from knowledge.errors import EmptyDocument, KnowledgeError, PasswordRequired, UnsupportedFile
from knowledge.ingest._text import Builder, clean, one_line
from knowledge.ingest.document import Document

log = logging.getLogger("knowledge.ingest.pdf")

NO_TEXT_LAYER = "no text layer (scanned? OCR needed)"

# Swapping the pypdf logger's propagation and the warnings filters is process-wide, so one PDF is
# parsed at a time. pypdf is pure Python: under the GIL two parses would not run in parallel anyway.
_PYPDF_LOCK = threading.Lock()


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _pypdf_quiet(name: str | None) -> Iterator[None]:
    """Run pypdf with its log records and warnings captured, then re-log them on our logger."""
    collect = _Collect()
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


def read_pdf(data: bytes, *, name: str | None = None, password: str | None = None,
             ocr: str = "auto", on_page=None) -> Document:
    """Read a PDF; sections are pages (``page`` 1-based).

    With ``ocr="auto"`` the pages without a text layer are read by OCR (:mod:`knowledge.ingest._ocr`;
    ``on_page(done, total)`` reports each page), and a warning names them with their confidence.

    Raises:
        PasswordRequired: encrypted, and neither the empty password nor ``password`` opens it.
        UnsupportedFile: damaged beyond lenient repair, or encrypted with a method pypdf cannot undo.
        OcrUnavailable: no page has a text layer and the OCR package cannot be loaded.
        EmptyDocument: no page has visible text (``"no text layer (scanned? OCR needed)"``), and with
            ``ocr="auto"`` OCR found none either (``"no text found, even by OCR"``).
    """
    with _pypdf_quiet(name):
        pages, problems, n_pages, title = _extract(data, password)
    notes: list[str] = []
    if ocr != "off":  # OCR hook (issue 16): fills ``pages`` for pages without a text layer
        from knowledge.ingest._ocr import ocr_missing_pages

        problems, notes = ocr_missing_pages(data, pages, problems, NO_TEXT_LAYER, password=password,
                                            on_page=on_page)
    texts = join_hyphenated(dict(sorted(pages.items())))
    builder = Builder(form="NFKC")
    for number, text in texts.items():
        builder.add(text, page=number, cleaned=True)
    if builder.empty:
        detail = f"none of its {n_pages} pages has text" if n_pages > 1 else "its page has no text"
        if ocr != "off":
            from knowledge.ingest._ocr import NO_TEXT_EVEN_BY_OCR

            raise EmptyDocument(f"{NO_TEXT_EVEN_BY_OCR}: {detail} (no text layer, and OCR read nothing)")
        raise EmptyDocument(f"{NO_TEXT_LAYER}: {detail}")
    return builder.build("pdf", empty=NO_TEXT_LAYER, pages=n_pages, warnings=_page_warnings(problems) + notes,
                         title=title)


def _extract(data: bytes, password: str | None) -> tuple[dict[int, str], list[tuple[int, str]], int, str | None]:
    """``({page number: cleaned NFKC text}, [(page number, problem)], page count, title)``."""
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        _unlock(reader, password)
        n_pages = len(reader.pages)
    except KnowledgeError:
        raise
    except Exception as exc:  # pypdf raises many types (PdfReadError, ValueError, KeyError, ...)
        raise UnsupportedFile(f"unreadable PDF (damaged or truncated?): {_reason(exc)}") from exc
    if n_pages == 0:
        raise EmptyDocument("this PDF has no pages")
    pages: dict[int, str] = {}
    problems: list[tuple[int, str]] = []  # (page number, what is wrong with it)
    for number in range(1, n_pages + 1):
        try:
            page = reader.pages[number - 1]
            text, visible = _page_text(page)
        except Exception as exc:
            problems.append((number, f"could not be read ({_reason(exc)}); skipped"))
            continue
        text = clean(text, form="NFKC") if visible else ""
        if text.strip():
            pages[number] = text
        elif _is_blank(page):
            problems.append((number, "blank"))
        else:
            problems.append((number, NO_TEXT_LAYER))
    return pages, problems, n_pages, _title(reader)


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
_PAINTING = {b"S", b"s", b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*", b"Do", b"BI", b"INLINE IMAGE",
             b"sh", b"Tj", b"TJ", b"'", b'"'}


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
    text = one_line(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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
        keep = (pre == "-" or not b[0].islower()
                or (hyphened.lower() in words and joined.lower() not in words))
        return hyphened if keep else joined

    return {number: _BROKEN.sub(fix, text) for number, text in pages.items()}
