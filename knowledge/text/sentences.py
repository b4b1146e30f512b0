"""Prose sentences of a passage, with their character offsets, for answers that quote a sentence.

A passage (a chunk as stored, Markdown or plain text) is cut into blocks at blank lines; a block
that is code (a fenced or indented code block, or a line that reads as code: ending in ``;``,
``{`` or ``}``), a heading, a table row or an HTML line gives no sentence. A list item starts a
block; a block quote's lines are read as other lines (their ``>`` marks stay inside a sentence's
span: :func:`clean` drops them). Each prose block is cut after ``.``, ``!`` or ``?`` (and closing
quotes or brackets) followed by whitespace -- the sentence rule of the chunker
(:mod:`knowledge.ingest.chunker`) without its ``;`` and ``:`` -- and after CJK full stops. Offsets
are ``str`` indices into the passage, so ``text[start:end]`` is the sentence as stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from knowledge.text.tables import framed_cells, is_delimiter, is_row

_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]*_]*\s+(?=[^\s])|(?<=[。！？])")
_LIST = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+")
_QUOTE = re.compile(r"^\s*>\s?")
_CODE_LINE = re.compile(r"[;{}]\s*$|^\s*(?://|#!|\$ |fn |let |use |impl |pub |struct |enum |mod )")
_WORDS = re.compile(r"[^\W_]+")
#: A sentence needs this many words to be quoted as an answer ("See below." is not one).
MIN_WORDS = 4


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence: ``text[start:end]`` of the passage it came from (``start``, ``end``: ``str``
    offsets, end exclusive)."""

    start: int
    end: int
    text: str


def _lines(text: str) -> list[tuple[int, str]]:
    out, at = [], 0
    for line in text.splitlines(keepends=True):
        out.append((at, line))
        at += len(line)
    return out


def _prose_blocks(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` spans of the prose blocks of ``text`` (see the module docstring)."""
    blocks: list[tuple[int, int]] = []
    current: list[int] | None = None
    fenced = quoted = False

    def close() -> None:
        nonlocal current
        if current is not None:
            blocks.append((current[0], current[1]))
        current = None

    for at, line in _lines(text):
        body = line.rstrip("\r\n")
        quote = _QUOTE.match(body)
        q = quote.end() if quote else 0  # a block quote's lines are read as lines of their own
        inner = body[q:]
        if _FENCE.match(inner):
            close()
            fenced = not fenced
            continue
        if fenced or not inner.strip() or (inner.startswith(("    ", "\t")) and current is None):
            close()
            continue
        if inner.strip().startswith(("#", "|", "<")) or _CODE_LINE.search(inner):
            close()
            continue
        item = _LIST.match(inner)
        if item or (current is not None and quoted != bool(quote)):
            close()  # a list item starts a block of its own, and so does a block quote (or its end)
        quoted = bool(quote)
        if current is None:
            current = [at + q + (item.end() if item else 0), at + len(body)]
        else:
            current[1] = at + len(body)
    close()
    return blocks


def sentences(text: str, min_words: int = MIN_WORDS) -> list[Sentence]:
    """The prose sentences of ``text`` with at least ``min_words`` words, in reading order.

    Returns:
        :class:`Sentence` list; ``[]`` for a passage of code, headings or tables only.
    """
    out: list[Sentence] = []
    for start, end in _prose_blocks(text or ""):
        block = text[start:end]
        at = 0
        cuts = [m.end() for m in _SENTENCE_END.finditer(block)] + [len(block)]
        for cut in cuts:
            piece = block[at:cut]
            lead = len(piece) - len(piece.lstrip())
            s, e = start + at + lead, start + at + len(piece.rstrip())
            at = cut
            if e > s and len(_WORDS.findall(text[s:e])) >= min_words:
                out.append(Sentence(s, e, text[s:e]))
    return out


def table_rows(text: str) -> list[tuple[Sentence, str]]:
    """The body rows of the framed tables of ``text`` (``| a | b |`` rows under header rows and a
    delimiter row, as the PDF and Markdown readers write them and a chunk repeats its table's
    header), each as ``(Sentence of the row's line, the row read with its header)``: every
    non-empty cell after its column's header ("Loan type: 1-4 family residential mortgage; 6/30/2011
    $000's: 3,925,000"), so a question about a row is weighed against what its values mean.
    A table with no delimiter row gives none."""
    out: list[tuple[Sentence, str]] = []
    header: list[list[str]] = []
    above: list[list[str]] = []  # rows since the last non-row line, before a delimiter
    in_body = False
    for at, line in _lines(text):
        body = line.rstrip("\r\n")
        if is_delimiter(body) and above:
            header, above, in_body = above, [], True
            continue
        if not is_row(body):
            header, above, in_body = [], [], False
            continue
        cells = framed_cells(body)
        if not in_body:
            above.append(cells)
            continue
        names = [" ".join(h[j] for h in header if j < len(h) and h[j]) for j in range(len(cells))]
        read = "; ".join(f"{name}: {cell}" if name else cell for name, cell in zip(names, cells, strict=True) if cell)
        lead = len(body) - len(body.lstrip())
        out.append((Sentence(at + lead, at + len(body), body.strip()), read))
    return out


_QUOTE_MARK = re.compile(r"\n[ \t]*>[ \t]?")


def clean(sentence: str) -> str:
    """A sentence as one line: block-quote marks inside it dropped, whitespace runs as one space."""
    return " ".join(_QUOTE_MARK.sub("\n", sentence).split())


__all__ = ["MIN_WORDS", "Sentence", "clean", "sentences", "table_rows"]
