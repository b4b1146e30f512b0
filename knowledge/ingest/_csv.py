"""CSV: one line per data row as ``column: value`` pairs separated by ``" | "``, so every row carries
its own header (``name: Ada | born: 1815``).

The delimiter (comma, semicolon, tab, pipe) is sniffed with :class:`csv.Sniffer` on the first lines,
falling back to the one that gives the most consistent column count. A first line ``sep=;`` (the hint
Excel writes and reads: any one character after ``sep=``) sets the delimiter and is not a row. The
first row is the header;
empty values are left out of a row's line; columns without a name are called "column N".
"""

from __future__ import annotations

import csv
import io
import re

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest._text import Builder, clean, one_line
from knowledge.ingest.document import Document

_DELIMITERS = ",;\t|"
#: Excel's delimiter hint: ``sep=<one character>`` alone on the first line (``\t`` written out too).
_SEP_HINT = re.compile(r'\A"?sep=(\\t|[^\n"])"?[ \t]*(?:\n|\Z)', re.I)


def read_csv(text: str) -> Document:
    """Read decoded CSV text.

    Raises:
        EmptyDocument: no cell has text.
        UnsupportedFile: the csv module cannot parse it (a field over its size limit).
    """
    text = clean(text, collapse=False)
    if not text.strip():
        raise EmptyDocument("no text: the CSV file is empty")
    hint = _SEP_HINT.match(text)
    if hint:
        delimiter = "\t" if hint.group(1) in ("\\t", "\t") else hint.group(1)
        text = text[hint.end():]
    else:
        delimiter = sniff_delimiter(text)
    try:
        rows = [[one_line(cell) for cell in row] for row in csv.reader(io.StringIO(text), delimiter=delimiter)]
    except csv.Error as exc:  # a field over csv.field_size_limit(), for one
        raise UnsupportedFile(f"unreadable CSV: {exc}") from exc
    rows = [row for row in rows if any(row)]
    if not rows:
        raise EmptyDocument("no text: the CSV file has no values")
    header, data = rows[0], rows[1:]
    lines: list[str] = []
    if not data:
        lines.append(" | ".join(header))
    for row in data:
        pairs = []
        for i, value in enumerate(row):
            if not value:
                continue
            name = header[i] if i < len(header) and header[i] else f"column {i + 1}"
            pairs.append(f"{name}: {value}")
        if pairs:
            lines.append(" | ".join(pairs))
    builder = Builder()
    builder.add("\n".join(lines))
    return builder.build("csv", empty="no text: the CSV file has no values")


def sniff_delimiter(text: str) -> str:
    sample = "\n".join(text.split("\n", 50)[:50])
    try:
        return csv.Sniffer().sniff(sample, delimiters=_DELIMITERS).delimiter
    except csv.Error:
        pass
    lines = [ln for ln in sample.split("\n") if ln.strip()]
    best, best_score = ",", -1.0
    for d in _DELIMITERS:
        widths = [len(r) for r in csv.reader(lines, delimiter=d)]
        if not widths or max(widths) < 2:
            continue
        common = max(set(widths), key=widths.count)
        score = widths.count(common) / len(widths) + (common / 1000)
        if score > best_score:
            best, best_score = d, score
    return best
