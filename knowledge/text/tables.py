"""Tables in chunk text, found and shown as tables: a header row over rows of cells, never a line of words.

The readers write a table's rows one per line in one of two forms:

* **framed** (PDF tables, Markdown files): ``| a | b |`` rows, the header rows above a delimiter row
  ``| --- | --- |``; a ``|`` inside a cell is written ``\\|``;
* **pipe rows** (DOCX, HTML, ODF, PPTX, RTF): ``a | b`` rows, the first one the header.

:func:`split_tables` cuts a text into its prose and its :class:`TableBlock` s; :func:`table_html`
draws a block as an HTML table whose every cell is inert (each ASCII punctuation character a
numeric character reference, :func:`~knowledge.text.highlight.escape_markdown`: a cell's ``<script>``,
``**`` or ``[x](javascript:…)`` is shown as written, in an HTML block or inside a Markdown
paragraph alike); :func:`table_preview` is a table hit's card in the playground: the header and
the rows that hold the query's words.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from knowledge.text.highlight import escape_markdown, mark_matches, match_spans

#: A delimiter row: ``| --- | :---: |`` or, as a repeated header is written, ``|-|-|`` (outer pipes
#: optional; one hyphen a cell is enough, as in GitHub Flavored Markdown).
_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
#: A cell split point in a framed row: a ``|`` not escaped by a backslash.
_PIPE = re.compile(r"(?<!\\)\|")
#: A pipe-rows cell written as ``name: value`` (the CSV and spreadsheet readers' rows): not a grid.
_PAIR = re.compile(r"^[^:]{1,80}: ")
#: How many body rows :func:`table_preview` shows.
PREVIEW_ROWS = 6


@dataclass(frozen=True, slots=True)
class TableBlock:
    """A table: ``header`` rows and body ``rows``, each a list of cell texts (``str``), every row as
    wide as the widest (short rows padded with ``""``)."""

    header: list[list[str]] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)

    @property
    def width(self) -> int:
        return max((len(r) for r in (*self.header, *self.rows)), default=0)


def is_delimiter(line: str) -> bool:
    """Whether ``line`` is a Markdown table's delimiter row (``| --- | --- |``)."""
    return "-" in line and bool(_DELIMITER.match(line))


def compact_header(header: str) -> str:
    """A framed table's ``header`` (its header rows, then its delimiter row) as a chunk repeats it:
    the delimiter row written ``|-|-|`` (two model tokens a column instead of four: a wide table's
    header then fits over its rows more often). Other text is returned as it is."""
    lines = header.split("\n")
    if len(lines) < 2 or not is_delimiter(lines[-1]):
        return header
    columns = len(framed_cells(lines[-1]))
    return "\n".join([*lines[:-1], "|" + "-|" * columns])


def framed_cells(line: str) -> list[str]:
    """The cells of a framed row ``| a | b\\|c |`` -> ``["a", "b|c"]`` (outer pipes optional, so a row
    a chunk starts after its first ``|`` still reads; ``\\|`` is a ``|`` inside a cell)."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [c.strip().replace("\\|", "|") for c in _PIPE.split(body)]


def pipe_cells(line: str) -> list[str]:
    """The cells of a pipe row ``a | b | c`` (cells joined by ``" | "``)."""
    return [c.strip() for c in line.split(" | ")]


def is_row(line: str) -> bool:
    """Whether ``line`` is a framed table row with text (``| a | b |``), not a delimiter row."""
    return _is_framed(line) and not is_delimiter(line)


def _is_framed(line: str) -> bool:
    s = line.strip()
    return len(s) > 1 and (s.startswith("|") or (s.endswith("|") and not s.endswith("\\|"))) and "|" in s[1:]


def _padded(rows: list[list[str]], width: int) -> list[list[str]]:
    return [r + [""] * (width - len(r)) for r in rows]


def framed_table(lines: Sequence[str]) -> TableBlock:
    """The block of framed rows ``lines``: the rows above the first delimiter row are the header
    (none without a delimiter row); later delimiter rows (a header repeated) are left out. A first
    body row narrower than the table is a row cut at its start (a chunk that begins inside it): its
    cells are put under the table's last columns."""
    header: list[list[str]] = []
    rows: list[list[str]] = []
    seen = False
    for line in lines:
        if is_delimiter(line):
            if not seen:
                header, rows, seen = rows, [], True
            continue
        rows.append(framed_cells(line))
    width = max((len(r) for r in (*header, *rows)), default=0)
    if rows and len(rows[0]) < width:  # a first row a chunk starts in: its cells are the row's last ones
        rows[0] = [""] * (width - len(rows[0])) + rows[0]
    return TableBlock(_padded(header, width), _padded(rows, width))


def pipe_table(lines: Sequence[str], header_lines: int = 1) -> TableBlock:
    """The block of pipe rows ``lines``, the first ``header_lines`` the header."""
    rows = [pipe_cells(line) for line in lines if not is_delimiter(line)]
    width = max((len(r) for r in rows), default=0)
    rows = _padded(rows, width)
    return TableBlock(rows[:header_lines], rows[header_lines:])


def read_table(text: str, header_lines: int = 1) -> TableBlock:
    """The table written in ``text`` (its lines; either form): framed rows by their delimiter row,
    pipe rows with ``header_lines`` header rows."""
    lines = [line for line in text.split("\n") if line.strip()]
    if any(_is_framed(line) for line in lines[:2]) or any(is_delimiter(line) for line in lines[:4]):
        return framed_table(lines)
    return pipe_table(lines, header_lines)


def _pipe_run_is_table(lines: list[str]) -> bool:
    """Whether a run of ``" | "`` lines is a grid: at least two lines, all with the same number of
    cells (at least two), and not the ``name: value`` rows of the CSV and spreadsheet readers."""
    if len(lines) < 2:
        return False
    cells = [pipe_cells(line) for line in lines]
    if len({len(c) for c in cells}) != 1 or len(cells[0]) < 2:
        return False
    body = cells[1:]
    return not all(all(_PAIR.match(c) for c in row if c) for row in body)


def split_tables(text: str, *, pipe_rows: bool = True) -> list[str | TableBlock]:
    """``text`` cut into its prose (``str``, as written, line breaks kept) and its tables, in order.

    A table is a run of two or more consecutive framed lines (``| a | b |``; the delimiter row marks
    the header), or, with ``pipe_rows``, of two or more consecutive ``a | b`` lines with the same
    number of cells (the first line the header; ``name: value`` rows excepted). A run ends at a
    blank line or a line of another form. Joining the prose pieces and the tables' lines gives
    back the text's lines.
    """
    lines = text.split("\n")
    out: list[str | TableBlock] = []
    prose: list[str] = []
    i = 0

    def flush() -> None:
        if prose:
            out.append("\n".join(prose))
            prose.clear()

    while i < len(lines):
        j = i
        while j < len(lines) and (_is_framed(lines[j]) or (j > i and is_delimiter(lines[j]))):
            j += 1
        if j - i >= 2:
            flush()
            out.append(framed_table(lines[i:j]))
            i = j
            continue
        if pipe_rows:
            j = i
            while j < len(lines) and " | " in lines[j] and not _is_framed(lines[j]):
                j += 1
            if _pipe_run_is_table(lines[i:j]):
                flush()
                out.append(pipe_table(lines[i:j]))
                i = j
                continue
        prose.append(lines[i])
        i += 1
    flush()
    return out


def _cell(text: str, query: str | Sequence[str] | None) -> str:
    return mark_matches(text, query, escape_markdown) if query else escape_markdown(text)


def table_html(
    block: TableBlock,
    query: str | Sequence[str] | None = None,
    *,
    css_class: str = "chunk-table",
    row_mark: tuple[str, str] | None = None,
) -> str:
    """``block`` as one line of HTML: ``<table class="…">`` (in a ``<div>`` that scrolls sideways
    when the table is wider than the page, a phone's say) with the header rows in ``<thead>``
    (``<th>`` cells) and the body in ``<tbody>``; every cell inert (:func:`escape_markdown`), the
    query's words (:func:`~knowledge.text.highlight.match_spans`) in ``<mark>``; with ``row_mark``
    (trusted markup, an opening and a closing tag) every body cell's text wrapped in it (the
    viewer's passage). For ``st.markdown(..., unsafe_allow_html=True)``."""
    width = block.width
    out = [f'<div class="table-scroll" style="overflow-x: auto"><table class="{html.escape(css_class)}">']
    if block.header:
        heads = [
            "<tr>" + "".join(f"<th>{_cell(c, query)}</th>" for c in row) + "</tr>" for row in _padded(block.header, width)
        ]
        out += ["<thead>", *heads, "</thead>"]
    out.append("<tbody>")
    for row in block.rows:
        cells = [_cell(c, query) for c in _padded([row], width)[0]]
        if row_mark is not None:
            cells = [row_mark[0] + c + row_mark[1] if c else c for c in cells]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def first_table(text: str, *, pipe_rows: bool = True) -> TableBlock | None:
    """The first table in ``text`` (:func:`split_tables`), ``None`` when it holds none."""
    return next((b for b in split_tables(text, pipe_rows=pipe_rows) if isinstance(b, TableBlock)), None)


def table_preview(text: str, query: str | Sequence[str], *, pipe_rows: bool = True, rows: int = PREVIEW_ROWS) -> str | None:
    """A table hit's card: the table of ``text`` with the most rows holding the query's words (the
    largest when none does) as :func:`table_html`, its header and the body rows that hold the
    query's words (the first ``rows`` of them; the first ``rows`` rows when none does), with a line
    saying how many rows were left out. ``None`` when ``text`` holds no table, or when no row holds
    a query word and most of the text is prose (a snippet of the prose says more)."""
    pieces = split_tables(text, pipe_rows=pipe_rows)
    blocks = [b for b in pieces if isinstance(b, TableBlock)]
    if not blocks:
        return None

    def hits(b: TableBlock) -> list[list[str]]:
        return [r for r in b.rows if any(match_spans(c, query) for c in r)]

    # the table whose rows hold the query's words (most matching rows; then the largest): a caption
    # line with a "|" in it read as a small table before the real one is not the hit
    block = max(blocks, key=lambda b: (len(hits(b)), len(b.rows)))
    matching = hits(block)
    prose = sum(len(p.strip()) for p in pieces if isinstance(p, str))
    if not matching and prose * 2 > len(text.strip()):
        return None
    matching = matching or block.rows
    shown = matching[:rows]
    markup = table_html(TableBlock(block.header, shown), query)
    left = len(block.rows) - len(shown)
    if left > 0:
        markup += f'<p class="table-note">{left} more row{"" if left == 1 else "s"} in the full text below</p>'
    return f'<div class="table-hit">{markup}</div>'


__all__ = [
    "PREVIEW_ROWS",
    "TableBlock",
    "first_table",
    "framed_cells",
    "framed_table",
    "is_delimiter",
    "pipe_cells",
    "pipe_table",
    "read_table",
    "split_tables",
    "table_html",
    "table_preview",
]
