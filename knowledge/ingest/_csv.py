"""CSV: one line per data row as ``column: value`` pairs separated by ``" | "``, so every row carries
its own header (``name: Ada | born: 1815``).

The delimiter (comma, semicolon, tab, pipe) is sniffed with :class:`csv.Sniffer` on the first lines,
falling back to the one that gives the most consistent column count. A first line ``sep=;`` (the hint
Excel writes and reads: any one character after ``sep=``) sets the delimiter and is not a row. The
first row is the header;
empty values are left out of a row's line; columns without a name are called "column N".

The file is read in blocks of about a megabyte (decoded, cleaned, parsed and written out block by
block), so the cost is the file's bytes, the text built and a block or two: about 6 times the file
for ordinary text (the text written is about 2.3 times the file: every value carries its column's
name). A field may be as long as the file (Python's ``csv`` refuses fields over 131,072 characters
by default; this reader raises that limit).
"""

from __future__ import annotations

import codecs
import csv
import itertools
import re
import unicodedata
from collections.abc import Iterable, Iterator

from knowledge.errors import EmptyDocument, UnsupportedFile
from knowledge.ingest._text import Builder, clean, decode, one_line, sniff_encoding
from knowledge.ingest.document import Document

_DELIMITERS = ",;\t|"
#: Excel's delimiter hint: ``sep=<one character>`` alone on the first line (``\t`` written out too).
_SEP_HINT = re.compile(r'\A"?sep=(\\t|[^\n"])"?[ \t]*(?:\n|\Z)', re.I)
#: Characters (or bytes) decoded, cleaned and parsed at a time, and written out at a time.
_BLOCK = 1 << 20
#: The longest field read: the largest value ``csv.field_size_limit`` takes on every platform (a C
#: ``long``, 32 bits on Windows). Python's default is 131,072 characters; files are smaller than this.
_FIELD_LIMIT = 2**31 - 1
#: Lines the delimiter is sniffed on.
_SNIFF_LINES = 50


def read_csv(source: str | bytes) -> Document:
    """Read a CSV file: its bytes (decoded as :func:`knowledge.ingest._text.decode` decodes them;
    UTF-8 block by block) or its decoded text.

    Raises:
        EmptyDocument: no cell has text.
        UnsupportedFile: the csv module cannot parse it.
    """
    if isinstance(source, bytes):
        encoding, skip = sniff_encoding(source)
        if encoding in (None, "utf-8"):
            try:
                return _read(_utf8_blocks(source, skip))
            except UnicodeDecodeError:  # not UTF-8 after all: decode it whole as decode() does
                pass
        source = decode(source)
    return _read(source[i : i + _BLOCK] for i in range(0, len(source), _BLOCK))


def _utf8_blocks(data: bytes, skip: int) -> Iterator[str]:
    """``data[skip:]`` decoded as strict UTF-8 a block at a time (UnicodeDecodeError when it is not)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    for i in range(skip, len(data), _BLOCK):
        yield decoder.decode(view[i : i + _BLOCK])
    yield decoder.decode(b"", final=True)


def _lines(blocks: Iterable[str]) -> Iterator[str]:
    """The lines of the text in ``blocks``, cleaned (:func:`clean` with ``collapse=False``) a block at
    a time, each ending ``"\\n"``. Blocks are cut after a line end, so cleaning them one by one gives
    the same rows as cleaning the whole text (blank lines between rows aside: they are no rows)."""
    carry: list[str] = []
    for block in blocks:
        cut = max(block.rfind("\n"), block.rfind("\r")) + 1
        if not cut:
            carry.append(block)
            continue
        head = "".join(carry) + block[:cut] if carry else block[:cut]
        carry = [block[cut:]] if cut < len(block) else []
        yield from _clean_lines(head)
    if carry:
        yield from _clean_lines("".join(carry))


def _clean_lines(text: str) -> Iterator[str]:
    text = clean(text, collapse=False)
    if text:
        for line in text.split("\n"):
            yield line + "\n"


def _read(blocks: Iterable[str]) -> Document:
    lines = _lines(blocks)
    head = list(itertools.islice(lines, _SNIFF_LINES))
    if not any(line.strip() for line in head):
        # The first lines are blank: look on for a line with text (an empty file has none).
        for line in lines:
            if line.strip():
                head.append(line)
                break
        else:
            raise EmptyDocument("no text: the CSV file is empty")
    hint = _SEP_HINT.match(head[0]) if head else None
    if hint:
        delimiter = "\t" if hint.group(1) in ("\\t", "\t") else hint.group(1)
        head = head[1:]
    else:
        delimiter = _sniff("\n".join(line[:-1] for line in head[:_SNIFF_LINES]))
    if csv.field_size_limit() < _FIELD_LIMIT:
        csv.field_size_limit(_FIELD_LIMIT)
    header: list[str] | None = None
    names: list[str] = []
    out: list[str] = []  # the text written, in pieces of about _BLOCK characters
    batch: list[str] = []
    size = 0
    try:
        for raw in csv.reader(itertools.chain(head, lines), delimiter=delimiter):
            row = [one_line(cell) for cell in raw]
            if not any(row):
                continue
            if header is None:
                header = row
                names = [name or f"column {i + 1}" for i, name in enumerate(header)]
                continue
            for i in range(len(names), len(row)):
                names.append(f"column {i + 1}")
            line = " | ".join(f"{names[i]}: {value}" for i, value in enumerate(row) if value)
            batch.append(line)
            size += len(line)
            if size >= _BLOCK:
                out.append(_normal("\n".join(batch)))
                batch, size = [], 0
    except csv.Error as exc:
        raise UnsupportedFile(f"unreadable CSV: {exc}") from exc
    if header is None:
        raise EmptyDocument("no text: the CSV file has no values")
    builder = Builder()
    if batch:
        out.append(_normal("\n".join(batch)))
    if out:
        text = out[0] if len(out) == 1 else "\n".join(out)
        del out, batch
        builder.add(text, cleaned=True)  # cleaned: every value was, and so are the names
    else:
        builder.add(" | ".join(header))
    return builder.build("csv", empty="no text: the CSV file has no values")


def _normal(text: str) -> str:
    """``text`` in Unicode normal form NFC (parsing can join a letter to a combining mark after a quote)."""
    return text if unicodedata.is_normalized("NFC", text) else clean(text)


def sniff_delimiter(text: str) -> str:
    """The delimiter of the CSV ``text`` (one of ``,;\\t|``), sniffed on its first 50 lines."""
    end = -1
    for _ in range(_SNIFF_LINES):
        end = text.find("\n", end + 1)
        if end < 0:
            break
    return _sniff(text if end < 0 else text[:end])


def _sniff(sample: str) -> str:
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
