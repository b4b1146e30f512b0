"""Tables in PDFs: found by camelot, written as Markdown rows with the text around them in order.

:func:`find_tables` runs camelot's ``hybrid`` parser (ruling lines and text alignment together)
and its ``lattice`` parser (ruling lines only) on the pages of a PDF, and keeps, for each region,
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

import logging
import re
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise

from knowledge.ingest._cost import seconds_left
from knowledge.ingest._text import clean, one_line
from knowledge.ingest._text import page_ranges as _pages

log = logging.getLogger("knowledge.ingest.pdf")

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
#: A leading or trailing row that is one cell of at least this many words is a caption or a note,
#: not a row of the table (:func:`_without_captions`).
CAPTION_WORDS = 4
#: Lines of a page's text (a running header, a page number) that may stand after a table that
#: goes on overleaf, or before its continuation (:func:`continued`).
EDGE_LINES = 3
#: Lines with cells side by side that make a page worth handing to camelot (:func:`looks_tabular`).
ALIGNED_LINES = 2
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
    the rows it repeated of the table before (its header), not written again.
    """

    page: int
    bbox: tuple[float, float, float, float]
    rows: list[list[str]]
    header_rows: int
    method: str
    turned: bool = False
    continues: bool = False
    absorbed: tuple[tuple[str, ...], ...] = ()

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
    return PdfTable(after.page, after.bbox, rows, 0, after.method, after.turned, True, tuple(tuple(r) for r in absorbed))


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
    sizes: dict[int, tuple[float, float]] = {}
    with PDFIUM_LOCK:
        pdf = pdfium.PdfDocument(data, password=password or None)
        try:
            for number in pages:
                page = pdf[number - 1]
                try:
                    sizes[number] = (page.get_width(), page.get_height())
                    reason = _too_large(*sizes[number]) or _too_busy(page)
                finally:
                    page.close()
                if reason:
                    skipped.setdefault(reason, []).append(number)
                elif looks_tabular(pdf, number):
                    todo.append(number)
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
            for table in _camelot(data, batch, password):
                found.setdefault(table.page, []).append(table)
        except Exception as exc:  # camelot raises many types on odd files; one page at a time then
            log.info("table detection failed on %s (%s); trying page by page", _pages(batch), exc)
            for number in batch:
                try:
                    for table in _camelot(data, [number], password):
                        found.setdefault(table.page, []).append(table)
                except Exception as one:
                    notes.append(
                        f"page {number}: tables could not be read (the table detector failed on it: {_reason(one)});"
                        " the text is read as text"
                    )
    for tables in found.values():
        tables.sort(key=lambda t: (t.bbox[1], t.bbox[0]))
    return found, notes


def _too_large(width: float, height: float) -> str | None:
    """Why a page of ``width × height`` points is not searched for tables, or ``None``."""
    if width * height <= MAX_AREA:
        return None
    return f"the page, {width / 72 * 2.54:.0f} × {height / 72 * 2.54:.0f} cm, is larger than A1 paper"


def _too_busy(page) -> str | None:
    """Why ``page`` (pypdfium2) is not searched for tables, or ``None``."""
    import pypdfium2.raw as raw  # noqa: PLC0415

    paths = 0
    for obj in page.get_objects(max_depth=2):
        if obj.type == raw.FPDF_PAGEOBJ_PATH:
            paths += 1
            if paths > MAX_PATHS:
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


def looks_tabular(pdf, number: int) -> bool:
    """Whether page ``number`` (1-based) of the pypdfium2 document ``pdf`` may hold a table: a
    cheap screen (a few milliseconds) so that pages of prose are not handed to camelot.

    True when at least :data:`ALIGNED_LINES` lines of text have two runs of text a gap of at least
    a line's height apart (cells side by side), or the page draws at least three horizontal
    rules, or two horizontal and two vertical ones (a box counts as both). Hold
    :data:`~knowledge.ingest._pdfium.PDFIUM_LOCK` while calling.
    """
    import pypdfium2.raw as raw  # noqa: PLC0415

    page = pdf[number - 1]
    try:
        across = down = 0
        for obj in page.get_objects(max_depth=2):
            if obj.type != raw.FPDF_PAGEOBJ_PATH:
                continue
            left, bottom, right, top = obj.get_bounds()
            w, h = right - left, top - bottom
            if w > 20 and h < 3:
                across += 1
            elif h > 10 and w < 3:
                down += 1
            elif w > 5 and h > 5:
                across, down = across + 2, down + 2
            if across >= 3 or (across >= 2 and down >= 2):
                return True
        textpage = page.get_textpage()
        try:
            rects = [textpage.get_rect(i) for i in range(textpage.count_rects())]
        finally:
            textpage.close()
    finally:
        page.close()
    lines: list[tuple[float, list]] = []  # (middle, runs)
    for r in sorted((r for r in rects if r[2] > r[0] and r[3] > r[1]), key=lambda r: (-(r[1] + r[3]) / 2, r[0])):
        mid, height = (r[1] + r[3]) / 2, r[3] - r[1]
        if lines and abs(lines[-1][0] - mid) <= max(2.0, height / 2):
            lines[-1][1].append(r)
        else:
            lines.append((mid, [r]))
    aligned = 0
    for _, runs in lines:
        runs.sort(key=lambda r: r[0])
        height = max(r[3] - r[1] for r in runs)
        if any(b[0] - a[2] >= height for a, b in pairwise(runs)):
            aligned += 1
            if aligned >= ALIGNED_LINES:
                return True
    return False


def _camelot(data: bytes, pages: list[int], password: str | None) -> list[PdfTable]:
    """camelot's tables on ``pages``: lattice grids where complete, hybrid tables elsewhere."""
    import camelot  # noqa: PLC0415 - heavy (pandas, OpenCV), PDFs only

    spec = ",".join(str(n) for n in pages)
    with _quiet():
        # hybrid's lattice half reads the ruling lines from the vector graphics (no rendering)
        hybrid = camelot.read_pdf(
            data,
            pages=spec,
            flavor="hybrid",
            password=password,
            suppress_stdout=True,
            engine="vector",
            layout_kwargs=_LAYOUT,
        )
        ruled = ",".join(str(n) for n in sorted({int(t.page) for t in hybrid}))  # lattice where hybrid found one
        lattice = (
            camelot.read_pdf(
                data, pages=ruled, flavor="lattice", password=password, suppress_stdout=True, layout_kwargs=_LAYOUT
            )
            if ruled
            else []
        )
    out: list[PdfTable] = []
    for number in pages:
        hs = [h for h in (_table(t, "hybrid") for t in hybrid if int(t.page) == number) if h is not None]
        ls = [g for g in (_table(t, "lattice") for t in lattice if int(t.page) == number) if g is not None]
        chosen: list[PdfTable] = []
        replaced: set[int] = set()
        for grid in ls:  # _table kept only lattice grids at least FILLED filled
            over = [k for k, h in enumerate(hs) if _overlap(grid.bbox, h.bbox) > 0.5]
            widest = max((len(hs[k].rows[0]) for k in over), default=0)
            if len(grid.rows[0]) < COLUMNS * widest:  # the rules miss columns the text shows
                continue
            chosen.append(grid)
            replaced.update(over)
        chosen += [h for k, h in enumerate(hs) if k not in replaced]
        out += _without_unions(chosen)
    return out


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


def _table(t, method: str) -> PdfTable | None:
    """A camelot table as a :class:`PdfTable`, or ``None`` when it is not a table (fewer than two
    rows or two columns with text; running text in columns; a lattice grid less than
    :data:`FILLED` filled). Captions and notes above and under it are left out, and the lines of
    multi-line header cells merged (:func:`_without_captions`, :func:`_merge_header_fragments`)."""
    rows = [[_cell(c) for c in row] for row in t.df.values.tolist()]
    rows = [r for r in rows if any(r)]
    keep = [j for j in range(max((len(r) for r in rows), default=0)) if any(j < len(r) and r[j] for r in rows)]
    rows = [[r[j] if j < len(r) else "" for j in keep] for r in rows]
    if method == "lattice" and _filled(rows) < FILLED:  # the rules did not separate the cells
        return None
    rows = _merge_header_fragments(_without_captions(rows))
    if len(rows) < 2 or len(keep) < 2 or is_running_text(rows):
        return None
    cells = [c for row in t.cells for c in row]
    x0, x1 = min(c.x1 for c in cells), max(c.x2 for c in cells)
    y0, y1 = min(c.y1 for c in cells), max(c.y2 for c in cells)
    size = getattr(t, "pdf_size", None)
    height = float(size[1]) if size else max(y1, 0.0)
    bbox = (round(x0, 2), round(height - y1, 2), round(x1, 2), round(height - y0, 2))
    turned = bool(getattr(t, "rotation", ""))
    return PdfTable(int(t.page), bbox, rows, _header_rows(rows), method, turned)


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


def _without_captions(rows: list[list[str]]) -> list[list[str]]:
    """``rows`` less the leading and trailing rows that are a single cell of :data:`CAPTION_WORDS`
    words or more: a caption above the table ("Table 7. Revenue by region, 2003-2007") or a note
    under it, which the page's text keeps as text."""

    def caption(row: list[str]) -> bool:
        filled = [c for c in row if c]
        return len(filled) == 1 and len(filled[0].split()) >= CAPTION_WORDS

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
    return one_line(clean(str(value), form="NFKC")) if value is not None else ""


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
    case-folded) is a word of the table's cells. The longest run of such lines is the table's
    anchor; runs of such lines at most :data:`GAP` lines from the anchor's run join it (a row the
    reader set apart). Those lines are removed and the table is written where the first of them was.
    A table with no line of the text (a font the text reader could not decode) goes after the text.
    Lines elsewhere on the page that repeat a cell's words are kept: the page's prose stays whole.
    """
    lines = text.split("\n")
    taken = [False] * len(lines)
    place: dict[int, list[str]] = {}  # line index -> tables written before it
    tail: list[str] = []
    for table in tables:
        bag = {w for row in [*table.rows, *table.absorbed] for cell in row for w in _words(cell)}
        member = [not taken[i] and bool(ws) and all(w in bag for w in ws) for i, ws in enumerate(map(_words, lines))]
        runs: list[list[int]] = []
        for i, m in enumerate(member):
            if m:
                if runs and runs[-1][1] == i - 1:
                    runs[-1][1] = i
                else:
                    runs.append([i, i])
        if not runs:
            tail.append(table.markdown)
            continue
        anchor = max(runs, key=lambda r: sum(len(_words(lines[k])) for k in range(r[0], r[1] + 1)))
        first, last = anchor
        for r in runs:  # runs near the anchor, outward
            if r[1] < first and first - r[1] - 1 <= GAP:
                first = r[0]
            elif r[0] > last and r[0] - last - 1 <= GAP:
                last = r[1]
        chosen = [k for r in runs for k in range(r[0], r[1] + 1) if first <= k <= last]
        for k in chosen:
            taken[k] = True
        place.setdefault(chosen[0], []).append(table.markdown)
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
