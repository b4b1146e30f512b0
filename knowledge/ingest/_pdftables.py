"""Tables in PDFs: found by camelot, written as Markdown rows with the text around them in order.

:func:`find_tables` runs camelot's ``hybrid`` parser (ruling lines and text alignment together)
and, on the pages that draw rules, its ``lattice`` parser (ruling lines only: read from the vector
graphics, and from the page drawn at 300 dpi where a grid may miss a rule or the rules are a
picture) on the pages of a PDF (those :func:`screen` passes), and keeps, for each region,
the lattice grid when it is complete (most rows have two or more cells filled: the ruled cells hold
multi-line cells whole) and the hybrid table otherwise. :func:`compose_page` then writes a page with
tables as the page's text lines outside the tables, top to bottom, with each table in its place as
a Markdown table (``| a | b |`` rows, the header row or rows, then the ``| --- |`` delimiter row).

Bounds (hostile input is the normal case): a page larger than :data:`MAX_AREA` (camelot draws each
page as an image), drawing more than :data:`MAX_PATHS` path objects (a drawing, a form grid of tiny
cells) or holding more than :data:`MAX_CHARS` characters is not searched for tables; table detection
stops before the file's time for it is spent (:data:`SECONDS_PER_FILE`, and in a reader child at
most :data:`SHARE_OF_TIME_LEFT` of the time its watchdog leaves: finding tables never costs the
file its text). Each is named in a warning, and the page's text is still read.

camelot (camelot-dev/camelot, MIT) does the detection; see ``docs/ingestion.md`` (PDF tables) for
how its output is chosen and measured.
"""

from __future__ import annotations

import io
import logging
import re
import threading
import time
import warnings
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import combinations, pairwise

from knowledge.ingest._cost import seconds_left
from knowledge.ingest._text import clean, one_line
from knowledge.ingest._text import page_ranges as _pages

log = logging.getLogger("knowledge.ingest.pdf")

#: A horizontal rule on a page: ``(left, right, y)`` in PDF points, y from the page's foot.
Rule = tuple[float, float, float]
#: A box on a page: ``(left, bottom, right, top)`` in PDF points, y from the page's foot.
Box = tuple[float, float, float, float]

#: A page drawing more path objects than this is not searched for tables (a drawing, a map, a
#: form grid of thousands of tiny cells): lattice detection's cost grows with the lines.
MAX_PATHS = 3_000
#: A page with more characters than this is not searched for tables (text-alignment detection's
#: cost grows with the characters; a dense page of 20,000 characters is not a table of a person's).
MAX_CHARS = 20_000
#: A page larger than this, in square points (1/72 inch), is not searched for tables: camelot draws
#: each page as an image at 300 dpi, about 200 bytes of memory per square point (a page of A1, 59.4 ×
#: 84.1 cm, 4.0 million square points, peaked at 1.1 GB; 5 m × 5 m, the largest page a PDF may
#: have, would need 40 GB). A1 passes.
MAX_AREA = 4_100_000
#: Seconds of table detection one file may spend; the pages after are read as text only.
SECONDS_PER_FILE = 120.0
#: Read in a reader child (:mod:`knowledge.ingest.isolated`), table detection may spend at most this
#: share of the seconds its watchdog leaves when it starts: the rest is for the text, the chunks,
#: and the pages an unlucky last batch takes longer than foreseen.
SHARE_OF_TIME_LEFT = 0.5
_LOCK = threading.Lock()
_LOGGERS = ("camelot", "playa", "pdfminer")

#: pdfminer's layout analysis as camelot runs it, without the hierarchical grouping of text boxes
#: (``boxes_flow=None``): that grouping weighs every pair of boxes (time and memory grow with the
#: square of their number: 4,000 scattered labels took 85 s and 3.2 GB per parser) and camelot never
#: reads the groups (the tables found on the corpus's pages are the same with and without it).
_LAYOUT = {"boxes_flow": None}

#: Pages handed to camelot at once (its per-call cost is opening the file).
BATCH = 8
#: A lattice grid is kept over the hybrid table when at least this share of its rows has two or
#: more cells with text (else its ruling lines did not separate the cells: e.g. only the header is
#: ruled and every body row fell into one cell).
FILLED = 0.8
#: ... and when it has at least this share of the columns of the hybrid table it overlaps (hybrid's
#: text-alignment half adds a column where a long cell's text runs past its ruled cell).
COLUMNS = 0.9
#: Points within which two grids side by side have the same top and bottom (one table a missed
#: vertical rule split: :func:`_camelot` then reads the rules from the drawn page too).
SAME_EDGE = 2.0
#: A horizontal rule parts a hybrid table's rows (:func:`_between_rules`) when it crosses at least
#: this share of the table's width.
RULE_SPAN = 0.8
#: A leading or trailing row that is one cell of at least this many words is a caption or a note,
#: not a row of the table (:func:`_without_captions`).
CAPTION_WORDS = 4
#: A first or last column whose cells hold this many words or more on average (a line of a page
#: column), going on from one to the next in lower case, beside columns of short cells, is a page
#: column's running text next to the table (:func:`_prose_columns`).
PROSE_WORDS = 7
#: Lines of a page's text (a running header, a page number) that may stand after a table that
#: goes on overleaf, or before its continuation (:func:`continued`).
EDGE_LINES = 3
#: ... or the share of the page's height between the table's box and the page's foot (or head):
#: the text reader may put a page's title after the table it drew first.
EDGE_SHARE = 0.125
#: A page's ruled grids spare it the text-alignment parser only when at most this share of its
#: characters stands outside them (a page of grids, a title and a page number; not a grid beside
#: text that may hold a table the rules do not draw: :func:`_whole`).
GRID_SHARE_OUT = 0.1
#: Lines with cells side by side that make a page worth handing to camelot (:func:`looks_tabular`).
ALIGNED_LINES = 2
#: A run of at least this many lines of a table's words, even far from the rest, is the table's
#: (a column the text reader read apart from its rows).
LONE_RUN = 3
#: A word of the page's text this long that is not a word of a table but is found in a row of it
#: with the spaces taken out counts as the table's (the text reader ran a cell's words together).
GLUED = 4
#: Lines of the text between two runs of a table's lines that still count as the table's
#: (a caption, a unit line the text reader put among the rows).
GAP = 2


@dataclass(frozen=True, slots=True)
class PdfTable:
    """One table found on a PDF page.

    ``page`` is 1-based. ``bbox`` is ``(x0, top, x1, bottom)`` in PDF points (1/72 inch) from the
    page's top-left corner, as the page is shown (its ``/Rotate`` applied; for a table camelot
    turned upright, the box of the turned page). ``rows`` are the cells' texts, row by row, each
    row as wide as the table (empty strings for empty cells; a merged cell's text is in its first
    cell, the cells it spans are empty). ``header_rows`` (>= 1) leading rows are the header.
    ``method`` is ``"lattice"`` (ruling lines) or ``"hybrid"`` (lines and text alignment).
    ``turned``: camelot turned the page upright to read the table (text set sideways).
    ``continues``: the table goes on from the previous page (:func:`continued`): all its rows are
    body rows, written without a header or delimiter row (``header_rows`` is 0); ``absorbed`` are
    the rows it repeated of the table before (its header), not written again. ``page_height``: the
    page's height as shown, in points (0.0: not known).
    """

    page: int
    bbox: tuple[float, float, float, float]
    rows: list[list[str]]
    header_rows: int
    method: str
    turned: bool = False
    continues: bool = False
    absorbed: tuple[tuple[str, ...], ...] = ()
    page_height: float = 0.0

    @property
    def markdown(self) -> str:
        """The table as Markdown: header rows, the delimiter row, then the body rows."""
        width = max(len(r) for r in self.rows)
        lines = [markdown_row(r, width) for r in self.rows]
        if not self.continues:
            lines.insert(self.header_rows, "| " + " | ".join(["---"] * width) + " |")
        return "\n".join(lines)

    @property
    def header_text(self) -> str:
        """The Markdown lines of the header, with the delimiter row (``""`` for a continuation)."""
        if self.continues:
            return ""
        return "\n".join(self.markdown.split("\n")[: self.header_rows + 1])


def continued(before: PdfTable, after: PdfTable) -> PdfTable | None:
    """``after`` (the first table of a page) as the continuation of ``before`` (the table, with its
    header, that the last table of the page before is or goes on from), or ``None`` when it is a
    table of its own.

    It continues when both are as wide and ``after`` either repeats ``before``'s header (those
    rows are then dropped) or starts with a row that is not header-like (a number in it). The caller
    checks that the page before ends with the table and ``after`` starts its own (:data:`EDGE_LINES`).
    """
    width = max(len(r) for r in before.rows)
    if before.continues or max(len(r) for r in after.rows) != width:
        return None
    header = before.rows[: before.header_rows]
    rows, absorbed = after.rows, []
    if rows[: len(header)] == header:
        rows, absorbed = rows[len(header) :], header
    elif not any(_NUMBER.match(c) for c in rows[0] if c):
        return None
    if not rows:
        return None
    absorbed_rows = tuple(tuple(r) for r in absorbed)
    return PdfTable(after.page, after.bbox, rows, 0, after.method, after.turned, True, absorbed_rows, after.page_height)


_DELIMITER = re.compile(r"^\|(?: -{3,} \|)+$")


def markdown_tables(text: str) -> list[tuple[int, int, int]]:
    """The Markdown tables this module writes, found in ``text``: ``(start, header end, end)``
    offsets of each block of ``| ... |`` lines whose second line is the ``| --- |`` delimiter row
    (the header is the first line and the delimiter), with at least one row under it."""
    found: list[tuple[int, int, int]] = []
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    k = 0
    while k < len(lines):
        if k + 2 < len(lines) and lines[k].startswith("| ") and _DELIMITER.match(lines[k + 1]):
            end = k + 2
            while end < len(lines) and lines[end].startswith("| ") and lines[end].endswith(" |"):
                end += 1
            if end > k + 2:
                found.append((offsets[k], offsets[k + 2] - 1, offsets[end] - 1))
            k = end
            continue
        k += 1
    return found


def markdown_row(cells: list[str], width: int) -> str:
    """One Markdown table row of ``width`` cells (``cells`` padded with empty ones): ``"| a | b |"``,
    a ``|`` inside a cell escaped as ``\\|``."""
    cells = list(cells) + [""] * (width - len(cells))
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def find_tables(
    data: bytes, pages: list[int], *, password: str | None = None, seconds: float | None = None
) -> tuple[dict[int, list[PdfTable]], list[str]]:
    """The tables on ``pages`` (1-based) of the PDF ``data``, and warnings in words.

    Returns ``({page: [PdfTable, ...] top to bottom}, warnings)``; pages without tables are left
    out. Never raises for the content of the file: a page camelot cannot parse is named in a
    warning and has no tables (its text is read as text). ``seconds`` bounds the whole file's
    table detection (``None``: :data:`SECONDS_PER_FILE`, and in a reader child no more than
    :data:`SHARE_OF_TIME_LEFT` of the time it has left): no batch of pages is started that the
    pace so far says would end past it, and the pages left are named in a warning.
    """
    if not pages:
        return {}, []
    if seconds is None:
        seconds = SECONDS_PER_FILE
        left = seconds_left()
        if left is not None:
            seconds = min(seconds, SHARE_OF_TIME_LEFT * left)
    import pypdfium2 as pdfium  # noqa: PLC0415 - PDFs only

    from knowledge.ingest._pdfium import PDFIUM_LOCK  # noqa: PLC0415

    notes: list[str] = []
    skipped: dict[str, list[int]] = {}
    todo: list[int] = []
    pictured: set[int] = set()
    ruled: set[int] = set()
    rules: dict[int, list[Rule]] = {}
    sizes: dict[int, tuple[float, float]] = {}
    with PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data, password=password or None)
        try:
            data, password = _unlocked(pdf, data, password)
            for number in pages:
                page = pdf[number - 1]
                try:
                    sizes[number] = (page.get_width(), page.get_height())
                    shapes = _survey(page)  # the page's drawing, looked through once
                    reason = _too_large(*sizes[number]) or _too_busy(page, shapes)
                    if reason:
                        skipped.setdefault(reason, []).append(number)
                        continue
                    if shapes.pictured:
                        pictured.add(number)
                    if page.get_rotation() == 0:
                        rules[number] = shapes.rules
                    tabular, lined = _screen(page, shapes)
                    if tabular:
                        todo.append(number)
                    if lined:
                        ruled.add(number)
                finally:
                    page.close()
        finally:
            pdf.close()
    for reason, numbers in skipped.items():
        notes.append(f"{_pages(numbers)}: tables not looked for ({reason}); the text is read as text")
    found: dict[int, list[PdfTable]] = {}
    started = time.monotonic()
    for i in range(0, len(todo), BATCH):
        batch = todo[i : i + BATCH]
        spent = time.monotonic() - started
        pace = spent / i if i else 0.0  # seconds per page so far
        if spent + pace * len(batch) >= seconds:
            notes.append(
                f"{_pages(todo[i:])}: tables not looked for (the {_seconds(seconds)} for table detection"
                " in one file ran out); the text is read as text"
            )
            break
        try:
            for table in _camelot(data, batch, password, ruled, pictured, rules):
                found.setdefault(table.page, []).append(replace(table, page_height=sizes[table.page][1]))
        except Exception as exc:  # camelot raises many types on odd files; one page at a time then
            log.info("table detection failed on %s (%s); trying page by page", _pages(batch), exc)
            for number in batch:
                try:
                    for table in _camelot(data, [number], password, ruled, pictured, rules):
                        found.setdefault(table.page, []).append(replace(table, page_height=sizes[table.page][1]))
                except Exception as one:
                    notes.append(
                        f"page {number}: tables could not be read (the table detector failed on it: {_reason(one)});"
                        " the text is read as text"
                    )
    for tables in found.values():
        tables.sort(key=lambda t: (t.bbox[1], t.bbox[0]))
    return found, notes


def _unlocked(pdf, data: bytes, password: str | None) -> tuple[bytes, str | None]:
    """``(data, password)`` to hand camelot for the open pypdfium2 document ``pdf`` of ``data``: an
    encrypted PDF as a copy PDFium saved without its encryption (no password), else as it is.
    camelot refuses a PDF whose permissions forbid copying its text, which many PDFs opened with
    an empty password set; the reader reads such a file's text already (pypdf does not enforce the
    permissions), so its tables are read as well, and camelot need not decrypt each page again."""
    import pypdfium2.raw as raw  # noqa: PLC0415 - PDFs only

    if raw.FPDF_GetSecurityHandlerRevision(pdf.raw) == -1:  # not encrypted
        return data, password
    out = io.BytesIO()
    pdf.save(out, flags=raw.FPDF_REMOVE_SECURITY)
    return out.getvalue(), None


def _too_large(width: float, height: float) -> str | None:
    """Why a page of ``width × height`` points is not searched for tables, or ``None``."""
    if width * height <= MAX_AREA:
        return None
    return f"the page, {width / 72 * 2.54:.0f} × {height / 72 * 2.54:.0f} cm, is larger than A1 paper"


def _too_busy(page, shapes: _Shapes) -> str | None:
    """Why ``page`` (pypdfium2; its drawing surveyed in ``shapes``) is not searched for tables, or
    ``None``."""
    if shapes.paths > MAX_PATHS:
        return f"it draws more than {MAX_PATHS:,} lines and shapes"
    textpage = page.get_textpage()
    try:
        chars = textpage.count_chars()
    finally:
        textpage.close()
    if chars > MAX_CHARS:
        return f"{chars:,} characters, more than {MAX_CHARS:,}"
    if chars == 0:
        return "no text layer"
    return None


@dataclass(slots=True)
class _Shapes:
    """What a page draws, from one pass over its objects (:func:`_survey`): ``paths`` (counted to
    one past :data:`MAX_PATHS`), ``pictured`` (an image larger than a twentieth of the page),
    ``rules`` (horizontal rules: paths wider than 20 points and less than 3 high, as ``(left,
    right, y)`` in PDF points, y from the page's foot), ``across`` and ``down`` (horizontal and
    vertical rules, a box counting as two of each)."""

    paths: int = 0
    pictured: bool = False
    rules: list[Rule] = field(default_factory=list)
    across: int = 0
    down: int = 0


def _survey(page) -> _Shapes:
    """:class:`_Shapes` of ``page`` (pypdfium2). Stops at the path past :data:`MAX_PATHS`."""
    import pypdfium2.raw as raw  # noqa: PLC0415

    shapes = _Shapes()
    area = page.get_width() * page.get_height()
    for obj in page.get_objects(max_depth=2):
        if obj.type == raw.FPDF_PAGEOBJ_IMAGE:
            left, bottom, right, top = obj.get_bounds()
            shapes.pictured = shapes.pictured or (right - left) * (top - bottom) > area / 20
        elif obj.type == raw.FPDF_PAGEOBJ_PATH:
            shapes.paths += 1
            if shapes.paths > MAX_PATHS:
                break
            left, bottom, right, top = obj.get_bounds()
            w, h = right - left, top - bottom
            if w > 20 and h < 3:
                shapes.across += 1
                shapes.rules.append((left, right, (top + bottom) / 2))
            elif h > 10 and w < 3:
                shapes.down += 1
            elif w > 5 and h > 5:
                shapes.across, shapes.down = shapes.across + 2, shapes.down + 2
    return shapes


def looks_tabular(pdf, number: int) -> bool:
    """Whether page ``number`` (1-based) of the pypdfium2 document ``pdf`` may hold a table: a
    cheap screen (a few milliseconds) so that pages of prose are not handed to camelot.

    True when at least :data:`ALIGNED_LINES` lines of text have two runs of text a gap of at least
    a line's height apart (cells side by side), or the page draws at least three horizontal
    rules, or two horizontal and two vertical ones (a box counts as both). Hold
    :data:`~knowledge.ingest._pdfium.PDFIUM_LOCK` while calling.
    """
    return screen(pdf, number)[0]


def screen(pdf, number: int) -> tuple[bool, bool]:
    """``(tabular, ruled)`` for page ``number`` (1-based) of the pypdfium2 document ``pdf``:
    ``tabular`` as :func:`looks_tabular`; ``ruled``: the page draws at least two horizontal and
    two vertical rules (a box counts as both), so a grid of ruling lines may be on it. Hold
    :data:`~knowledge.ingest._pdfium.PDFIUM_LOCK` while calling.
    """
    page = pdf[number - 1]
    try:
        return _screen(page, _survey(page))
    finally:
        page.close()


def _screen(page, shapes: _Shapes) -> tuple[bool, bool]:
    """:func:`screen` of an open ``page`` whose drawing is surveyed in ``shapes``.

    The runs of text are PDFium's text rectangles (the characters of one line set together). A run
    may hold two cells whose gap is a step inside one text object (a small key-value table set with
    tab stops): a run wider than its characters need (more than half a line's height each, and two
    lines' heights more) is looked into, character by character, for such a gap (:func:`_gaps_inside`);
    such a line counts when another one stands within two and a half lines of it (rows line under
    line, not a numbered heading alone)."""
    if shapes.across >= 2 and shapes.down >= 2:
        return True, True
    if shapes.across >= 3:
        return True, False
    textpage = page.get_textpage()
    try:
        rects = [textpage.get_rect(i) for i in range(textpage.count_rects())]
        lines: list[tuple[float, list]] = []  # (middle, runs)
        for r in sorted((r for r in rects if r[2] > r[0] and r[3] > r[1]), key=lambda r: (-(r[1] + r[3]) / 2, r[0])):
            mid, height = (r[1] + r[3]) / 2, r[3] - r[1]
            if lines and abs(lines[-1][0] - mid) <= max(2.0, height / 2):
                lines[-1][1].append(r)
            else:
                lines.append((mid, [r]))
        aligned = 0
        wide: list[Box] = []  # runs that may hold a gap of spaces
        for _, runs in lines:
            runs.sort(key=lambda r: r[0])
            height = max(r[3] - r[1] for r in runs)
            if any(b[0] - a[2] >= height for a, b in pairwise(runs)):
                aligned += 1
                if aligned >= ALIGNED_LINES:
                    return True, False
                continue
            for r in runs:
                w, h = r[2] - r[0], r[3] - r[1]
                if w > 3 * h and w > h * (2 + 0.5 * len(textpage.get_text_bounded(*r).strip())):
                    wide.append(r)
        if wide and aligned + len(wide) >= ALIGNED_LINES:
            gapped = _gaps_inside(textpage, wide)
            # rows of a table stand line under line; a numbered heading ("2 Bar") stands alone
            aligned += sum(any(a is not b and abs(a[1] - b[1]) <= 2.5 * (a[3] - a[1]) for b in gapped) for a in gapped)
        return aligned >= ALIGNED_LINES, False
    finally:
        textpage.close()


def _gaps_inside(textpage, runs: list[Box]) -> list[Box]:
    """The ones of ``runs`` (text rectangles of ``textpage``) that hold two characters a gap of at least
    the run's height apart, three times the median of the run's gaps between words or more (a
    justified line's word gaps are widened alike; blank characters, which PDFium gives no width,
    left out)."""
    inside: list[list[float]] = [[] for _ in runs]  # each run's characters' left and right edges
    for i in range(textpage.count_chars()):
        left, bottom, right, top = textpage.get_charbox(i)
        if right <= left:
            continue
        x, y = (left + right) / 2, (bottom + top) / 2
        for k, (x0, y0, x1, y1) in enumerate(runs):
            if x0 <= x <= x1 and y0 <= y <= y1:
                inside[k] += [left, right]
                break
    found: list[Box] = []
    for run, edges in zip(runs, inside, strict=True):
        y0, y1 = run[1], run[3]
        pairs = sorted(zip(edges[::2], edges[1::2], strict=True))
        height = y1 - y0
        gaps = sorted(b[0] - a[1] for a, b in pairwise(pairs) if b[0] - a[1] > 0.1 * height)  # between words
        # one gap far wider than the line's other word gaps: a justified line widens them all alike
        if gaps and gaps[-1] >= height and (len(gaps) == 1 or gaps[-1] >= 3 * gaps[(len(gaps) - 1) // 2]):
            found.append(run)
    return found


def _camelot(
    data: bytes,
    pages: list[int],
    password: str | None,
    ruled: set[int],
    pictured: set[int],
    rules: dict[int, list[Rule]],
) -> list[PdfTable]:
    """camelot's tables on ``pages``: lattice grids where complete, hybrid tables elsewhere.
    ``ruled``: the pages that draw a grid's worth of rules (:func:`screen`); ``pictured``: the
    pages that draw images (their rules may be pictures). Lattice runs only on those. ``rules``:
    each page's horizontal rules (:func:`_rules`), by which hybrid tables' wrapped cells are joined."""
    import camelot  # noqa: PLC0415 - heavy (pandas, OpenCV), PDFs only

    with _quiet():
        # lattice first on the ruled pages, from the vector graphics (no rendering); then drawn and
        # seen (OpenCV) where the vector rules may be incomplete: a grid with a cell open on an
        # inner side (a rule drawn as shapes the vector reading misses: :func:`_open_inside`), grids
        # side by side with the same top and bottom (a missed rule split a table)
        vector = _read(camelot, data, sorted(set(pages) & ruled), password, "vector")
        early = {int(t.page) for t in vector if _open_inside(t) == "bottom"}
        early |= _parted(data, password, [t for t in vector if _open_inside(t) == "right"])
        early |= {int(a.page) for a, b in combinations(vector, 2) if a.page == b.page and _side_by_side(a, b)}
        lattice = [t for t in vector if int(t.page) not in early]
        lattice += _read(camelot, data, sorted(early), password, "combined")
        whole = _whole(data, password, lattice, pictured)
        # then hybrid (its lattice half from the vector graphics too) on the other pages: a page
        # whose complete grids hold all its text set in columns has no table hybrid would add
        rest = [n for n in pages if n not in whole]
        hybrid = (
            camelot.read_pdf(
                data,
                pages=",".join(str(n) for n in rest),
                flavor="hybrid",
                password=password,
                suppress_stdout=True,
                engine="vector",
                layout_kwargs=_LAYOUT,
            )
            if rest
            else []
        )
        # the grids count on the pages where a table was found; drawn and seen too where a grid
        # has fewer columns than the text shows, or no grid is found on a page with pictures (rules
        # drawn as an image)
        tabled = {int(t.page) for t in hybrid} | whole
        hs = {
            n: [h for h in (_table(t, "hybrid", rules.get(n, ())) for t in hybrid if int(t.page) == n) if h is not None]
            for n in pages
        }
        converted = [(t, _table(t, "lattice")) for t in lattice if int(t.page) in tabled]  # each grid once
        grids = [g for _, g in converted if g is not None]
        late = (tabled & pictured) - {g.page for g in grids}
        late |= {g.page for g in grids if _choose(hs[g.page], [g])[1]}
        late -= early  # drawn already
        kept = [g for t, g in converted if g is not None and int(t.page) not in late]
        if late:
            drawn = _read(camelot, data, sorted(late), password, "combined")
            kept += [g for g in (_table(t, "lattice") for t in drawn) if g is not None]
        # a page with rules across and no table found: a table ruled only across, which the
        # whitespace parser reads (:func:`_ruled_band` keeps what stands between the rules)
        bare = [n for n in pages if not hs[n] and len(rules.get(n, ())) >= 2 and not any(g.page == n for g in kept)]
        if bare:
            spaced = camelot.read_pdf(
                data,
                pages=",".join(str(n) for n in bare),
                flavor="stream",
                password=password,
                suppress_stdout=True,
                layout_kwargs=_LAYOUT,
            )
            for t in spaced:
                found = _table(t, "stream", rules.get(int(t.page), ()))
                if found is not None and len(found.rows[0]) >= 3:
                    hs[found.page].append(found)
    out: list[PdfTable] = []
    for number in pages:
        out += _without_unions(_choose(hs[number], [g for g in kept if g.page == number])[0])
    return out


def _whole(data: bytes, password: str | None, lattice: list, pictured: set[int]) -> set[int]:
    """The pages whose tables are all camelot's lattice grids of ``lattice`` (read from the vector
    graphics, or the page drawn), so that hybrid need not read them: each grid there complete
    (:func:`_table`), no body cell open on its bottom and one open on its right only where it is a
    merged cell (:func:`_open_inside`, :func:`_apart`), no two grids side by side (:func:`_side_by_side`),
    no cell holding two texts set a wide gap apart on a line (a vertical rule the grid lacks), and
    fewer than :data:`ALIGNED_LINES` lines outside the grids with runs of text a line's height
    apart (an unruled table beside the grids). Upright pages without pictures only (``pictured``:
    their rules may be an image); read from PDFium's character boxes."""
    pages: dict[int, list] = {}
    for t in lattice:
        pages.setdefault(int(t.page), []).append(t)
    candidates = [
        n
        for n, ts in pages.items()
        if n not in pictured
        and all(
            _table(t, "lattice") is not None and _open_inside(t) != "bottom" and not getattr(t, "rotation", "") for t in ts
        )
        and not any(_side_by_side(a, b) for a, b in combinations(ts, 2))
    ]
    out: set[int] = set()
    for n, boxes in _char_boxes(data, password, candidates).items():
        if boxes is None:
            continue
        merged = all(  # a cell open on its right is a merged cell's, not two cells' (:func:`_apart`)
            not _apart(cell, row[j + 1], boxes)
            for t in pages[n]
            for row in t.cells[2:]
            for j, cell in enumerate(row[:-1])
            if not cell.right
        )
        if merged and _grids_hold_the_columns(pages[n], boxes):
            out.add(n)
    return out


def _char_boxes(data: bytes, password: str | None, pages: Sequence[int]) -> dict[int, list[Box] | None]:
    """PDFium's character boxes of ``pages`` (1-based) of the PDF ``data``, in PDFium's order, as
    ``(left, bottom, right, top)`` PDF points: loose boxes (the font's height, the same for every
    character of a line). ``None`` for a page turned by its ``/Rotate`` (its boxes are not in the
    coordinates camelot gives)."""
    if not pages:
        return {}
    import pypdfium2 as pdfium  # noqa: PLC0415 - PDFs only

    from knowledge.ingest._pdfium import PDFIUM_LOCK  # noqa: PLC0415

    out: dict[int, list[Box] | None] = {}
    with PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data, password=password or None)
        try:
            for n in dict.fromkeys(pages):
                page = pdf[n - 1]
                try:
                    if page.get_rotation() != 0:
                        out[n] = None
                        continue
                    textpage = page.get_textpage()
                    try:
                        out[n] = [textpage.get_charbox(i, loose=True) for i in range(textpage.count_chars())]
                    finally:
                        textpage.close()
                finally:
                    page.close()
        finally:
            pdf.close()
    return out


def _grids_hold_the_columns(grids: list, boxes: Sequence[Box]) -> bool:
    """Whether the character ``boxes`` of a page (PDF points, in PDFium's order) stand in camelot's
    lattice ``grids`` but for at most :data:`GRID_SHARE_OUT` of them, leaving fewer than
    :data:`ALIGNED_LINES` lines with a gap of a line's height or more outside, and no line inside
    one of their cells with a gap of two lines' height or more."""
    # each grid's column edges left to right and row edges top to bottom: a character's cell is
    # found by bisection (a page of 5,000 characters in a grid of 500 cells took 0.2 s cell by cell)
    columns = [[c.x1 for c in t.cells[0]] for t in grids]
    rows = [[-row[0].y2 for row in t.cells] for t in grids]
    frames = [
        (
            min(c.x1 for row in t.cells for c in row),
            min(c.y1 for row in t.cells for c in row),
            max(c.x2 for row in t.cells for c in row),
            max(c.y2 for row in t.cells for c in row),
        )
        for t in grids
    ]
    outside: dict[int, list[Box]] = {}
    inside: dict[tuple[int, int, int, int], list[Box]] = {}
    for box, line in zip(boxes, _line_numbers(boxes), strict=True):
        x0, y0, x1, y1 = box
        if x1 <= x0 or y1 <= y0:
            continue
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        if not any(fx0 - 2 <= cx <= fx1 + 2 and fy0 - 2 <= cy <= fy1 + 2 for fx0, fy0, fx1, fy1 in frames):
            outside.setdefault(line, []).append(box)
            continue
        for g, (fx0, fy0, fx1, fy1) in enumerate(frames):
            if fx0 <= cx <= fx1 and fy0 <= cy <= fy1:
                j = max(0, bisect_right(columns[g], cx) - 1)
                i = max(0, bisect_right(rows[g], -cy) - 1)
                inside.setdefault((g, i, j, line), []).append(box)
                break
    aligned = sum(1 for line in outside.values() if _gap(line, 1.0))
    left_out = sum(len(line) for line in outside.values())
    held = sum(len(line) for line in inside.values())
    return (
        left_out <= GRID_SHARE_OUT * (left_out + held)
        and aligned < ALIGNED_LINES
        and not any(_gap(line, 2.0) for line in inside.values())
    )


def _line_numbers(boxes: Sequence[Box]) -> list[int]:
    """A line number for each of the character ``boxes`` (in PDFium's order, the order they are
    drawn in): a character starts a new line when its middle stands more than half its height off
    the line's (a superscript, the next line, a cell drawn after another)."""
    out: list[int] = []
    number, mid = -1, None
    for _, y0, _, y1 in boxes:
        middle, half = (y0 + y1) / 2, max(y1 - y0, 0.1) / 2
        if mid is None or abs(middle - mid) > half:
            number, mid = number + 1, middle
        out.append(number)
    return out


def _gap(line: list[Box], lines: float) -> bool:
    """Whether the character boxes of one ``line`` leave a gap of ``lines`` times its height or more."""
    line.sort(key=lambda b: b[0])
    height = max(b[3] - b[1] for b in line)
    return any(b[0] - a[2] >= lines * height for a, b in pairwise(line))


def _choose(hs: list[PdfTable], grids: list[PdfTable]) -> tuple[list[PdfTable], bool]:
    """``(tables, narrow)`` for one page: each lattice grid of ``grids`` (kept by :func:`_table`: at
    least :data:`FILLED` filled) in place of the hybrid tables of ``hs`` it overlaps, the other
    hybrid tables as they are. A grid with fewer than :data:`COLUMNS` of the columns of the widest
    hybrid table it overlaps is not taken (its rules miss columns the text shows); ``narrow`` says
    one was left."""
    chosen: list[PdfTable] = []
    replaced: set[int] = set()
    narrow = False
    for grid in grids:
        over = [k for k, h in enumerate(hs) if _overlap(grid.bbox, h.bbox) > 0.5]
        widest = max((len(hs[k].rows[0]) for k in over), default=0)
        if len(grid.rows[0]) < COLUMNS * widest:
            narrow = True
            continue
        chosen.append(grid)
        replaced.update(over)
    return chosen + [h for k, h in enumerate(hs) if k not in replaced], narrow


def _side_by_side(a, b) -> bool:
    """Whether camelot's tables ``a`` and ``b`` (of one page) have the same top and bottom (within
    :data:`SAME_EDGE` points) and do not overlap across."""
    (ax0, _), (_, ax1), (bx0, _), (_, bx1) = a.cols[0], a.cols[-1], b.cols[0], b.cols[-1]
    same = abs(a.rows[0][0] - b.rows[0][0]) <= SAME_EDGE and abs(a.rows[-1][1] - b.rows[-1][1]) <= SAME_EDGE
    return same and (ax1 <= bx0 or bx1 <= ax0)


def _read(camelot, data: bytes, pages: list[int], password: str | None, engine: str) -> list:
    """camelot's lattice tables on ``pages`` (none when empty), its ruling lines read by ``engine``:
    ``"vector"`` from the page's vector graphics, ``"combined"`` from the page drawn at 300 dpi too.
    A run of text that crosses a rule is split there (``split_text``): the layout analysis joins
    two cells' words into one line when they sit close (a date and an amount), and the rule is
    where one cell ends. A cell merged down several rows is spread to each (``copy_text``)."""
    if not pages:
        return []
    spec = ",".join(str(n) for n in pages)
    return list(
        camelot.read_pdf(
            data,
            pages=spec,
            flavor="lattice",
            password=password,
            suppress_stdout=True,
            engine=engine,
            split_text=True,
            copy_text=["v"],
            layout_kwargs=_LAYOUT,
        )
    )


def _open_inside(t) -> str | None:
    """Whether camelot's lattice table ``t`` has a body cell (below its first two rows, where merged
    header cells are) open inside the table, where the vector reading may have missed a rule:
    ``"bottom"`` when one is open on its bottom side, else ``"right"`` when one is open on its
    right side (:func:`_parted` tells a missed rule from a merged cell), else ``None``."""
    cells = t.cells
    right = False
    for i in range(2, len(cells)):
        row = cells[i]
        for j, cell in enumerate(row):
            if i < len(cells) - 1 and not cell.bottom:
                return "bottom"
            right = right or (j < len(row) - 1 and not cell.right)
    return "right" if right else None


def _parted(data: bytes, password: str | None, tables: list) -> set[int]:
    """The pages of camelot's lattice ``tables`` (each with a body cell open on its right side) where
    such a cell and the one beside it hold two texts set apart on one line -- a gap of a line's
    height or more at their common edge, no word across it: two cells a missed rule joins. A merged
    cell's text crosses the cells it spans, or stands in its first cell only. Read from PDFium's
    character boxes; a turned page counts as parted (its boxes are not the table's coordinates)."""
    boxes = _char_boxes(data, password, [int(t.page) for t in tables if not getattr(t, "rotation", "")])
    out: set[int] = set()
    for t in tables:
        number, cells = int(t.page), t.cells
        page = boxes.get(number)
        if page is None or any(
            _apart(cell, row[j + 1], page) for row in cells[2:] for j, cell in enumerate(row[:-1]) if not cell.right
        ):
            out.add(number)
    return out


def _apart(left, right, boxes: Sequence[Box]) -> bool:
    """Whether the characters ``boxes`` (``(left, bottom, right, top)``, PDF points) in the band of
    camelot cells ``left`` and ``right`` stand on both sides of their common edge with a gap of at
    least a character's height there on some line, and run across it on none."""
    edge, low, high = left.x2, min(left.y1, left.y2), max(left.y1, left.y2)
    lines: dict[int, list[float]] = {}  # a line: [right end left of the edge, left end right of it, height]
    for (x0, y0, x1, y1), number in zip(boxes, _line_numbers(boxes), strict=True):
        mid = (y0 + y1) / 2
        if x1 <= x0 or not (low <= mid <= high) or x1 <= left.x1 or x0 >= right.x2:
            continue
        line = lines.setdefault(number, [-1e9, 1e9, 0.0])
        line[2] = max(line[2], y1 - y0)
        if (x0 + x1) / 2 < edge:
            line[0] = max(line[0], x1)
        else:
            line[1] = min(line[1], x0)
    both = [(a, b, h) for a, b, h in lines.values() if a > -1e9 and b < 1e9]
    if any(b - a < h for a, b, h in both):
        return False  # text runs on across the edge: a merged cell's
    return bool(both) or (any(a > -1e9 for a, _, _ in lines.values()) and any(b < 1e9 for _, b, _ in lines.values()))


class RecordCollector(logging.Handler):
    """Keeps every log record it is given (``records``), to re-log a library's records later on
    our own logger (here for camelot and playa; :mod:`knowledge.ingest._pdf` for pypdf)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _quiet() -> Iterator[None]:
    """Run camelot with its and its PDF parser's (playa's) log records and warnings captured, then
    re-logged at INFO on ``knowledge.ingest.pdf``: nothing reaches stderr. One detection at a time
    per process (the loggers' settings are process-wide)."""
    collect = RecordCollector()
    with _LOCK:
        saved = []
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            saved.append((logger, logger.propagate, logger.level))
            logger.addHandler(collect)
            logger.propagate = False
            logger.setLevel(logging.WARNING)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                yield
        finally:
            for logger, propagate, level in saved:
                logger.removeHandler(collect)
                logger.propagate = propagate
                logger.setLevel(level)
    for record in collect.records[:20]:
        log.info("table detection: %s %s: %s", record.name, record.levelname.lower(), record.getMessage())
    for w in caught[:20]:
        log.info("table detection: %s: %s", w.category.__name__, w.message)


def _table(t, method: str, rules: Sequence[Rule] = ()) -> PdfTable | None:
    """A camelot table as a :class:`PdfTable`, or ``None`` when it is not a table (fewer than two
    rows or two columns with text, or fewer than two rows with two cells or more -- a heading over
    one justified line of prose, its words spread into cells; running text in columns; a lattice grid less than
    :data:`FILLED` filled). Captions and notes above and under it are left out, and the lines of
    multi-line header cells merged (:func:`_without_captions`, :func:`_merge_header_fragments`).
    ``rules``: the page's horizontal rules, by which a hybrid table's wrapped cells are joined
    (:func:`_between_rules`)."""
    raw = t.df.values.tolist()
    origin = list(range(len(raw)))  # the camelot row each row comes from (for the box)
    if method == "lattice":  # rows a missed rule left stacked in one grid row: apart again
        raw, origin = _unstacked(raw)
        if any(_stacked_figures(row) for row in raw):  # no rules between the rows: not this grid's table
            return None
    rows = [[_cell(c) for c in row] for row in raw]
    spans = origin
    if method == "stream":  # only a table between rules is taken from the whitespace parser
        band = _ruled_band(t, rules)
        if band is None:
            return None
        spans = band
        rows = [rows[i] for i in band]
    elif method == "hybrid" and rules and not getattr(t, "rotation", ""):
        joined = _between_rules(rows, t, rules)
        if len(joined) != len(rows):
            spans = []  # rows joined: the box stays the whole table's
        rows = joined
    prose = _prose_columns(rows)
    width = max((len(r) for r in rows), default=0)
    keep = [j for j in range(width) if j not in prose and any(j < len(r) and r[j] for r in rows)]
    kept = [(i, [r[j] if j < len(r) else "" for j in keep]) for i, r in enumerate(rows)]
    kept = [(i, r) for i, r in kept if any(r)]
    spans = [spans[i] for i, _ in kept] if spans else []
    rows = [r for _, r in kept]
    if method == "lattice" and _filled(rows) < FILLED:  # the rules did not separate the cells
        return None
    rows = _merge_header_fragments(_without_captions(rows))
    if len(rows) < 2 or len(keep) < 2 or is_running_text(rows):
        return None
    if sum(sum(1 for c in r if c) >= 2 for r in rows) < 2:  # a heading over one line of justified prose
        return None
    # the box of the cells taken: the rows kept (all when rows were joined) and the columns kept
    cells = [c for i, row in enumerate(t.cells) if not spans or i in set(spans) for j, c in enumerate(row) if j in keep] or [
        c for row in t.cells for c in row
    ]
    x0, x1 = min(c.x1 for c in cells), max(c.x2 for c in cells)
    y0, y1 = min(c.y1 for c in cells), max(c.y2 for c in cells)
    size = getattr(t, "pdf_size", None)
    height = float(size[1]) if size else max(y1, 0.0)
    bbox = (round(x0, 2), round(height - y1, 2), round(x1, 2), round(height - y0, 2))
    turned = bool(getattr(t, "rotation", ""))
    return PdfTable(int(t.page), bbox, rows, _header_rows(rows), method, turned)


def _unstacked(rows: list[list]) -> tuple[list[list[str]], list[int]]:
    """A lattice grid's rows with each row that holds several table rows stacked -- a rule missing
    between them (a spreadsheet that draws borders round some rows only) -- split into them, and
    for each row the grid row it comes from.

    A grid row is taken for ``k`` stacked rows when at least two of its cells hold text, every one
    of them holds exactly ``k >= 2`` lines, and past its first filled cell at least half of those
    lines are numbers: a row label over several lines beside figures over as many. A multi-line
    header cell (its neighbours on fewer lines, or words) and a wrapped text cell stay one row."""
    out: list[list[str]] = []
    origin: list[int] = []
    for i, row in enumerate(rows):
        cells = ["" if c is None else str(c) for c in row]
        lines = [[part.strip() for part in c.split("\n") if part.strip()] for c in cells]
        filled = [ls for ls in lines if ls]
        k = len(filled[0]) if filled else 0
        later = [line for ls in filled[1:] for line in ls]
        if (
            len(filled) >= 2
            and k >= 2
            and all(len(ls) == k for ls in filled)
            and sum(bool(_NUMBER.match(line)) for line in later) * 2 >= len(later)
        ):
            for n in range(k):
                out.append([ls[n] if ls else "" for ls in lines])
                origin.append(i)
        else:
            out.append(cells)
            origin.append(i)
    return out, origin


def _stacked_figures(row: list[str]) -> bool:
    """Whether two or more cells of a grid row each hold three or more lines, most of them numbers:
    the rows of a table whose grid has no rules between them (only round it and between its
    columns), which :func:`_unstacked` could not take apart (its label column on other lines)."""
    stacked = 0
    for cell in row:
        lines = [part.strip() for part in str(cell or "").split("\n") if part.strip()]
        if len(lines) >= 3 and sum(bool(_NUMBER.match(line)) for line in lines) * 2 >= len(lines):
            stacked += 1
    return stacked >= 2


def _prose_columns(rows: list[list[str]]) -> set[int]:
    """The first or last columns of ``rows`` that are a page column's running text beside the
    table, not the table's (a table in one column of a two-column page, read with the other
    column's lines as one more column): at least five cells, of :data:`PROSE_WORDS` words or more
    on average (a page column's line), at least half of them going on in lower case from the one
    before, while the other columns' cells hold three words or fewer on average. Only while the
    rest keeps two columns."""
    width = max((len(r) for r in rows), default=0)
    out: set[int] = set()
    for ends in (range(width), range(width - 1, -1, -1)):
        for j in ends:
            if width - len(out) <= 2:
                return out
            filled = [r[j] for r in rows if j < len(r) and r[j]]
            others = [c for r in rows for k, c in enumerate(r) if c and k != j and k not in out]
            if len(filled) < 5 or not others:
                break
            words = sum(len(c.split()) for c in filled)
            goes_on = sum(1 for _, b in pairwise(filled) if b[0].islower())
            short = sum(len(c.split()) for c in others) <= 3 * len(others)
            if words < PROSE_WORDS * len(filled) or goes_on < 0.5 * (len(filled) - 1) or not short:
                break
            out.add(j)
    return out


def _ruled_band(t, rules: Sequence[Rule]) -> list[int] | None:
    """The rows of camelot's table ``t`` (indexes, top to bottom) between the first and the last
    horizontal rule that cross at least :data:`RULE_SPAN` of its rows' width, or ``None`` when
    fewer than two such rules bound two rows or more: a table ruled only across (above and under
    its header, under its last row: the style of scientific papers) that the text-alignment parser
    misses, found by the whitespace parser, whose lines above the first rule (a caption) and under
    the last (a note, a page column's prose) are not the table's."""
    if getattr(t, "rotation", ""):
        return None
    x0, x1 = t.cols[0][0], t.cols[-1][1]
    top, bottom = t.rows[0][0], t.rows[-1][1]
    line = (top - bottom) / len(t.rows)  # a rule under the last row may stand a line below its text
    across = [
        y
        for left, right, y in rules
        if bottom - line <= y <= top + line and min(right, x1) - max(left, x0) >= RULE_SPAN * (x1 - x0)
    ]
    if len(across) < 2:
        return None
    high, low = max(across), min(across)
    band = [i for i, (row_top, row_bottom) in enumerate(t.rows) if low <= (row_top + row_bottom) / 2 <= high]
    return band if len(band) >= 2 else None


def _between_rules(rows: list[list[str]], t, rules: Sequence[Rule]) -> list[list[str]]:
    """``rows`` (camelot table ``t``'s, top to bottom) with the lines of wrapped cells joined where
    horizontal rules part the rows: a table ruled between its rows only (no vertical rules, so not
    a lattice grid) whose cells run over several lines, which the text-alignment parser reads as
    one row a line. Rules count when they cross at least :data:`RULE_SPAN` of the table's width,
    at least three of them; the rows between two of them are one row when every row after the
    first has fewer filled cells than the first (the lines of its wrapped cells; full rows between
    two rules, as in a table ruled only above and below its header, stay rows)."""
    x0, x1 = t.cols[0][0], t.cols[-1][1]
    top, bottom = t.rows[0][0], t.rows[-1][1]
    ys = sorted(
        (
            y
            for left, right, y in rules
            if min(right, x1) - max(left, x0) >= RULE_SPAN * (x1 - x0) and bottom - 2 <= y <= top + 2
        ),
        reverse=True,
    )
    if len(ys) < 3 or len(t.rows) != len(rows):
        return rows
    bands: list[list[list[str]]] = []
    last = None
    for (row_top, row_bottom), row in zip(t.rows, rows, strict=True):
        band = sum(1 for y in ys if y > (row_top + row_bottom) / 2)
        if band == last:
            bands[-1].append(row)
        else:
            bands.append([row])
        last = band
    out: list[list[str]] = []
    for band_rows in bands:
        first = sum(1 for c in band_rows[0] if c)
        if len(band_rows) > 1 and first >= 2 and all(sum(1 for c in r if c) < first for r in band_rows[1:]):
            out.append([" ".join(r[j] for r in band_rows if r[j]) for j in range(len(band_rows[0]))])
        else:
            out.extend(band_rows)
    return out


def _without_unions(tables: list[PdfTable]) -> list[PdfTable]:
    """The tables less any that holds two or more of the others (a parser's box around several
    tables and the text between them)."""
    return [
        t
        for t in tables
        if sum(1 for o in tables if o is not t and _overlap(t.bbox, o.bbox) > 0.5 and _area(o) < _area(t)) < 2
    ]


def _area(t: PdfTable) -> float:
    return (t.bbox[2] - t.bbox[0]) * (t.bbox[3] - t.bbox[1])


#: A cell that names a table: "Table 3", "Table 3 (continued)", "TABLE IV.", "Tab. 2:".
_TABLE_NAME = re.compile(r"(?i)^(table|tab\.)\s*([0-9]+[a-z]?|[ivxlc]+)\b[.:]?(\s*\((cont(inued|\.|'d))\))?\s*$")


def _without_captions(rows: list[list[str]]) -> list[list[str]]:
    """``rows`` less the leading and trailing rows that are a single cell of :data:`CAPTION_WORDS`
    words or more, a single cell naming a table ("Table 3 (continued)", "TABLE II"), or a single
    cell that starts in lower case and ends in punctuation (the end of the paragraph above,
    "surveys."): a caption above the table ("Table 7. Revenue by region, 2003-2007"), a note under
    it or a line of prose, which the page's text keeps as text."""

    def caption(row: list[str]) -> bool:
        filled = [c for c in row if c]
        if len(filled) != 1:
            return False
        text = filled[0].strip()
        # the last words of the paragraph above or the first of the one under ("surveys.")
        tail = text[:1].islower() and text.endswith((".", ";", ":", ","))
        return tail or len(text.split()) >= CAPTION_WORDS or bool(_TABLE_NAME.match(text))

    while rows and caption(rows[0]):
        rows = rows[1:]
    while rows and caption(rows[-1]):
        rows = rows[:-1]
    return rows


def _merge_header_fragments(rows: list[list[str]]) -> list[list[str]]:
    """Leading rows that are the lines of multi-line header cells, merged into one row.

    Two or more rows at the top, each with at most half its cells filled (``"| | | 2007 | |"``,
    ``"| | Sample | Sample |"``, ``"| Country | | |"``, ``"| | unit | size |"``), are the lines of
    header cells a parser split by line: they become one row, each cell its lines joined with a
    space (``"| Country | Sample unit | Sample size |"``)."""
    width = max((len(r) for r in rows), default=0)
    n = 0
    while n < len(rows) - 1:
        filled = [c for c in rows[n] if c]
        if not filled or len(filled) > width / 2:
            break
        n += 1
    if n < 2:
        return rows
    merged = [" ".join(r[j] for r in rows[:n] if j < len(r) and r[j]) for j in range(width)]
    return [merged, *rows[n:]]


def _cell(value) -> str:
    """A camelot cell's text on one line, NFKC-normalised, right-to-left script in logical order."""
    if value is None:
        return ""
    text = str(value)
    if _RTL.search(text):
        text = "\n".join(logical_order(line) for line in text.split("\n"))
    return one_line(clean(text, form="NFKC"))


#: Hebrew, Arabic, Syriac, Thaana, NKo, Samaritan, Mandaic letters and their presentation forms.
_RTL = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")


def logical_order(line: str) -> str:
    """One line of text read from a PDF in the order its characters are drawn, left to right (as
    camelot gives a cell: Hebrew and Arabic come out back to front), in logical order, the order a
    person types and searches it in: right-to-left runs turned round, numbers and Latin words in
    them kept left to right; a line with no right-to-left letter is returned as it is.

    The Unicode Bidirectional Algorithm (UAX #9) by python-bidi: drawing order is what the
    algorithm makes of logical order, and for the two levels a line of a table has (right-to-left
    words, left-to-right numbers and words in them) making it again gives the logical order back.
    Presentation forms (Arabic letters as drawn) are turned round before NFKC would split a
    ligature into two letters in drawing order.
    """
    if not _RTL.search(line):
        return line
    from bidi import get_display  # noqa: PLC0415 - PDFs with right-to-left tables only

    return get_display(line)


_NUMBER = re.compile(r"^[\s(+\-−–$€£¥%]*\d[\d\s.,:/%)]*[A-Za-z%]{0,3}$")


def _header_rows(rows: list[list[str]]) -> int:
    """How many leading rows are the header: the first row, and the rows under it that continue
    a header with merged cells (the row above has empty cells, this one has no number in it and
    an empty first cell: "2007 | | 2006 |" over "| n | % Pos | n |"), at most three, never all."""
    n = 1
    while n < min(3, len(rows) - 1):
        above, row = rows[n - 1], rows[n]
        if not any(c == "" for c in above) or row[0] != "" or any(_NUMBER.match(c) for c in row if c):
            break
        n += 1
    return n


def is_running_text(rows: list[list[str]]) -> bool:
    """Whether ``rows`` (each a list of cell texts) are running text, not a table. Set in columns (a
    two-column page): the columns holding at least half its words are prose -- cells of four or
    more words on average, at least two in five of the cells under a filled cell going on with a
    lower-case letter (a sentence continued on the next line), and two such columns, or one with
    a cell ending in a comma or a hyphen that the next goes on from in lower case, or with seven
    words a cell or more (a column of a page's prose, not a table's one column of descriptions);
    or justified lines whose wide word gaps a parser took for columns -- cells of two words or
    more on average, at least three in five of the cells beside a filled cell go on in lower
    case (four such pairs at least), and at least one cell ends a clause it does not finish (a
    comma or a hyphen, the next cell going on in lower case)."""
    width = max(len(r) for r in rows)
    total = prose = columns = 0
    telling = False  # a clause cut between lines, or lines as long as a page column's
    for j in range(width):
        cells = [r[j] if j < len(r) else "" for r in rows]
        words = sum(len(c.split()) for c in cells)
        total += words
        filled = [c for c in cells if c]
        pairs = [(a, b) for a, b in pairwise(cells) if a and b]
        goes_on = sum(1 for _, b in pairs if b[0].islower())
        if len(pairs) >= 3 and goes_on >= 0.4 * len(pairs) and words >= 4 * len(filled):
            prose, columns = prose + words, columns + 1
            telling = telling or words >= 7 * len(filled)
            telling = telling or any(a[-1] in ",-" and b[0].islower() for a, b in pairs)
    if total > 0 and prose >= total / 2 and (columns >= 2 or telling):
        return True
    # justified lines whose word gaps looked like columns: the cells of a row go on in lower case
    pairs = [(a, b) for row in rows for a, b in pairwise([c for c in row if c])]
    cells = [c for row in rows for c in row if c]
    goes_on = sum(1 for _, b in pairs if b[0].islower())
    broken = sum(1 for a, b in pairs if a[-1] in ",-" and b[0].islower())  # a clause cut between cells
    words = sum(len(c.split()) for c in cells)
    return len(pairs) >= 4 and goes_on >= 0.6 * len(pairs) and broken >= 1 and words >= 2 * len(cells)


def _filled(rows: list[list[str]]) -> float:
    return sum(1 for r in rows if sum(1 for c in r if c) >= 2) / max(1, len(rows))


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """The share of the smaller box covered by the other."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h / smaller if smaller > 0 else 0.0


def compose_page(text: str, tables: list[PdfTable]) -> str:
    """The page's ``text`` (its lines as the PDF reader read them) with each table's lines
    replaced by the table as Markdown, in the table's place.

    A line belongs to a table when it has words and every one of them (letters and digits,
    case-folded) is a word of the table's cells, or, at least :data:`GLUED` long, is found in one of
    its rows with the spaces taken out (the text reader ran two words of a cell, or of two cells,
    together). Blank lines do not part a run of such lines. The run with the most words is the
    table's anchor; runs at most :data:`GAP` lines from it join it (a row the reader set apart),
    and so does any run of at least :data:`LONE_RUN` such lines (a column the reader read apart
    from its rows). Those lines are removed and the table is written where the anchor's first
    line was; a table going on from the page before (:attr:`PdfTable.continues`), at the page's
    head. A table with no line of the text (a font the text reader could not decode) goes after
    the text. Shorter runs elsewhere on the page that repeat a cell's words are kept: the
    page's prose stays whole.
    """
    lines = text.split("\n")
    words = [_words(line) for line in lines]
    taken = [False] * len(lines)
    place: dict[int, list[str]] = {}  # line index -> tables written before it
    tail: list[str] = []
    for table in tables:
        rows = [*table.rows, *table.absorbed]
        bag = {w for row in rows for cell in row for w in _words(cell)}
        # a cell's words run together: the text reader joined a cell's two lines, or two cells
        squashed = "\n".join("".join(w for cell in row for w in _words(cell)) for row in rows)

        member = [
            not taken[i] and bool(ws) and all(w in bag or (len(w) >= GLUED and w in squashed) for w in ws)
            for i, ws in enumerate(words)
        ]
        runs: list[list[int]] = []
        for i, m in enumerate(member):
            if m:
                blank = runs and all(not words[k] for k in range(runs[-1][1] + 1, i))  # only blank lines between
                if runs and (runs[-1][1] == i - 1 or blank):
                    runs[-1][1] = i
                else:
                    runs.append([i, i])
        if not runs:
            tail.append(table.markdown)
            continue
        anchor = max(runs, key=lambda r: sum(len(words[k]) for k in range(r[0], r[1] + 1)))
        first, last = anchor
        for r in runs:  # runs near the anchor, outward
            if r[1] < first and first - r[1] - 1 <= GAP:
                first = r[0]
            elif r[0] > last and r[0] - last - 1 <= GAP:
                last = r[1]
        chosen = [
            k
            for r in runs
            for k in range(r[0], r[1] + 1)
            if member[k] and (first <= k <= last or sum(member[r[0] : r[1] + 1]) >= LONE_RUN)
        ]
        for k in chosen:
            taken[k] = True
        # a table going on from the page before starts the page, whatever the text reader put first
        at = 0 if table.continues else min(k for k in chosen if first <= k <= last)
        place.setdefault(at, []).append(table.markdown)
    blocks: list[str] = []
    current: list[str] = []
    for i, line in enumerate(lines):
        if i in place:
            if current:
                blocks.append("\n".join(current))
                current = []
            blocks.extend(place[i])
        if not taken[i]:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    blocks.extend(tail)
    return "\n\n".join(b.strip("\n") for b in blocks if b.strip())


_WORD_RE = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD_RE.findall(text)]


def _seconds(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 1 else f"{seconds:.1f} s"


def _reason(exc: BaseException) -> str:
    text = one_line(str(exc))
    return text or type(exc).__name__
