"""Token-based chunking with the embedder's own tokenizer.

A chunk never exceeds the model's real input window, so the model never silently truncates it. The
spec's default is "OpenAI-style 800/400" (800 tokens, 400 overlap: OpenAI's vector stores'
``max_chunk_size_tokens=800, chunk_overlap_tokens=400``); with a model whose window is smaller the
chunker uses the window (less the model's special tokens), scales the overlap by the same factor, and
says so in :attr:`ChunkPlan.notes`.

Chunks prefer to end at a paragraph break, then a sentence end, then a line break, then whitespace,
and only then at an arbitrary token boundary; the next chunk starts ``overlap`` tokens earlier,
snapped forward to a sentence or word start. Cuts always fall on token boundaries, whose offsets are
``str`` indices, so no code point is ever split; CJK text without spaces is cut between its
characters (BERT-style tokenizers give each CJK character its own token) and prefers the CJK full
stops "。！？". Chunks never cross a section of the document (a PDF page, a Markdown heading's section),
so every chunk has one page and one heading path.

A chunk that begins inside the body of one of the document's tables (:attr:`Document.tables`) starts
with the table's header row, then a line break, then its own rows: a row cut away from its header
still says what each value means. Its room in the window is the chunk size less the header's tokens:
the header is repeated whenever the chunk's first row fits under it, however wide the header.
A chunk whose span overlaps a PDF table (one with a page and a box) carries that box
(:attr:`TextChunk.table_bbox`), so the viewer can outline the table on its page.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import chain, pairwise

import numpy as np

from knowledge.embeddings.base import Embedder
from knowledge.errors import InvalidArgument
from knowledge.ingest.document import Document, Table
from knowledge.text.tables import compact_header

#: The spec's default chunking ("OpenAI-style 800/400"), in tokens.
SPEC_MAX_TOKENS = 800
SPEC_OVERLAP_TOKENS = 400

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE = re.compile(r"(?<=[.!?;:])[\"'”’)\]]*\s+|(?<=[。！？；])")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")
#: Boundary strength: a higher value is a better place to cut. The specification of
#: :func:`_boundary_strengths`, which finds the same positions with numpy.
_STRENGTHS = ((_PARAGRAPH, 4), (_SENTENCE, 3), (_LINE, 2), (_SPACE, 1))
#: The code points of the patterns above, as numpy arrays. ``_WHITESPACE`` is what ``\s`` matches
#: in a ``str`` pattern (and ``str.isspace`` accepts): 29 code points, none past U+3000.
_WHITESPACE = np.array([c for c in range(0x3001) if chr(c).isspace()], dtype=np.uint32)
_STOPS = np.array([ord(c) for c in ".!?;:"], dtype=np.uint32)
_CLOSERS = np.array([ord(c) for c in "\"'”’)]"], dtype=np.uint32)
_CJK_STOPS = np.array([ord(c) for c in "。！？；"], dtype=np.uint32)


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk of a document: ``text == document.text[char_start:char_end]`` (``str`` indices),
    the ``page`` (1-based) and ``heading`` path of its section, and its size in model ``tokens``.

    A chunk that begins inside a table's body repeats the table's header: then ``table_header`` is
    that header and ``text == table_header + "\\n" + document.text[char_start:char_end]`` (the span
    still points at the chunk's own rows; ``tokens`` counts the header too).

    ``table_bbox``: where the span overlaps tables that carry a box (a PDF's, see
    :class:`~knowledge.ingest.document.Table`), the box around them on the chunk's page,
    ``(x0, top, x1, bottom)`` in PDF points from the page's top-left corner (the union when the
    span overlaps several); ``None`` otherwise."""

    index: int
    text: str
    char_start: int
    char_end: int
    tokens: int
    page: int | None = None
    heading: str | None = None
    table_header: str | None = None
    table_bbox: tuple[float, float, float, float] | None = None


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """The chunk size and overlap actually used (tokens), and why they differ from those asked for."""

    max_tokens: int
    overlap_tokens: int
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ChunkResult:
    chunks: list[TextChunk]
    plan: ChunkPlan
    warnings: list[str] = field(default_factory=list)


def plan_chunking(
    embedder: Embedder, max_tokens: int = SPEC_MAX_TOKENS, overlap_tokens: int = SPEC_OVERLAP_TOKENS
) -> ChunkPlan:
    """Fit the requested chunk size and overlap (tokens) to the model's window.

    Raises:
        InvalidArgument: ``max_tokens < 1``, ``overlap_tokens < 0`` or ``overlap_tokens >= max_tokens``.
    """
    if max_tokens < 1 or overlap_tokens < 0 or overlap_tokens >= max_tokens:
        raise InvalidArgument(
            f"Chunking needs 0 <= overlap < size, got size {max_tokens} and overlap {overlap_tokens} tokens."
        )
    window = embedder.max_tokens - embedder.special_tokens
    if max_tokens <= window:
        return ChunkPlan(max_tokens, overlap_tokens)
    overlap = (overlap_tokens * window) // max_tokens
    note = (
        f"Chunk size {max_tokens}/{overlap_tokens} tokens exceeds the {embedder.max_tokens}-token window of"
        f" {embedder.name}; using {window}/{overlap} so no chunk is truncated."
    )
    return ChunkPlan(window, overlap, (note,))


def embedding_text(text: str, heading: str | None) -> str:
    """What is embedded for a chunk: its heading path, a blank line, then its text.

    A contextual chunk header: a chunk deep in a section ("It prevents them at compile time...")
    often does not name its topic, while its heading path ("References and Borrowing > Dangling
    References") does. The stored text and its character span stay the chunk's own.
    """
    return f"{heading}\n\n{text}" if heading else text


WINDOW_CHARS = 100_000
"""A section longer than this is tokenized piece by piece, each piece ending at a paragraph, line or
space break near this size, so memory stays bounded and a long file can be stopped between pieces."""


def chunk_document(
    document: Document,
    embedder: Embedder,
    max_tokens: int = SPEC_MAX_TOKENS,
    overlap_tokens: int = SPEC_OVERLAP_TOKENS,
    on_progress: Callable[[float], None] | None = None,
) -> ChunkResult:
    """Split ``document`` into chunks of at most ``max_tokens`` model tokens (fitted to the window).

    Returns chunks in document order, numbered from 0, with provenance. Whitespace-only stretches
    produce no chunk. Room is kept for the heading path that :func:`embedding_text` puts before a
    chunk, so ``embedding_text(chunk.text, chunk.heading)`` fits the window too (a heading path
    longer than half the chunk size is not given room; the model then truncates the chunk's end).
    ``on_progress(fraction of the text done)`` is called after each piece of
    :data:`WINDOW_CHARS`; an exception it raises (a cancel) stops the chunking.
    """
    plan = plan_chunking(embedder, max_tokens, overlap_tokens)
    chunks: list[TextChunk] = []
    budgets: dict[str | None, ChunkPlan] = {}
    headers: dict[int, tuple[str, int]] = {}  # table start -> (header text, its tokens + 1)
    for section in document.sections:
        body = document.text[section.char_start : section.char_end]
        if section.heading not in budgets:
            heading_tokens = embedder.count_tokens(embedding_text("", section.heading)) if section.heading else 0
            room = plan.max_tokens - heading_tokens
            budgets[section.heading] = (
                ChunkPlan(room, min(plan.overlap_tokens, room // 2))
                if heading_tokens and room >= plan.max_tokens // 2
                else plan
            )
        for offset, piece in _windows(body, WINDOW_CHARS):
            base = section.char_start + offset
            header_at = _header_finder(document, base, headers, embedder) if document.tables else None
            header_start = _header_start_finder(document, base) if document.tables else None
            for start, end, n, header in _split(piece, embedder, budgets[section.heading], header_at, header_start):
                own = piece[start:end]
                chunks.append(
                    TextChunk(
                        index=len(chunks),
                        text=f"{header[0]}\n{own}" if header else own,
                        char_start=base + start,
                        char_end=base + end,
                        tokens=n + (header[1] if header else 0),
                        page=section.page,
                        heading=section.heading,
                        table_header=header[0] if header else None,
                    )
                )
            if on_progress is not None and len(document.text) > WINDOW_CHARS:
                on_progress(min(1.0, (section.char_start + offset + len(piece)) / len(document.text)))
    if any(t.boxes() for t in document.tables):
        chunks = _with_table_boxes(chunks, document.tables)
    return ChunkResult(chunks, plan, list(plan.notes))


def _with_table_boxes(chunks: list[TextChunk], tables: list[Table]) -> list[TextChunk]:
    """``chunks`` with :attr:`TextChunk.table_bbox` set where their span overlaps tables that have a
    box on the chunk's page (the union of those boxes)."""
    boxed = sorted((t.char_start, t.char_end, page, bbox) for t in tables for page, bbox in t.boxes())
    starts = [b[0] for b in boxed]
    longest = max(b[1] - b[0] for b in boxed)
    out = []
    for c in chunks:
        k = bisect_right(starts, c.char_end - 1)  # tables starting before the span ends
        boxes = []
        while k > 0 and boxed[k - 1][0] > c.char_start - longest:  # only these can reach the span
            k -= 1
            _, end, page, bbox = boxed[k]
            if end > c.char_start and (page is None or c.page is None or page == c.page) and bbox is not None:
                boxes.append(bbox)
        if boxes:
            union = (
                min(b[0] for b in boxes),
                min(b[1] for b in boxes),
                max(b[2] for b in boxes),
                max(b[3] for b in boxes),
            )
            c = replace(c, table_bbox=union)
        out.append(c)
    return out


def _header_finder(
    document: Document, base: int, cache: dict[int, tuple[str, int]], embedder: Embedder
) -> Callable[[int], tuple[str, int] | None]:
    """``header_at(offset in the piece) -> (table header, its tokens + 1 for the line break)`` when a
    chunk starting there begins inside a table's body, else ``None``.

    The first table in :attr:`Document.tables` order (scanned until one starts after the position)
    whose body holds the position; found by bisection when the tables are sorted and do not
    overlap (as the readers make them), by that scan otherwise."""
    tables = document.tables
    starts = [t.char_start for t in tables]
    ordered = all(a.char_end <= b.char_start for a, b in pairwise(tables))

    def header_of(t: Table) -> tuple[str, int]:
        if t.char_start not in cache:
            header = compact_header(document.text[t.char_start : t.header_end])
            cache[t.char_start] = (header, embedder.count_tokens(header) + 1)
        return cache[t.char_start]

    def header_at(pos: int) -> tuple[str, int] | None:
        at = base + pos
        if ordered:  # only the last table starting at or before ``at`` can hold it
            k = bisect_right(starts, at)
            if k and tables[k - 1].header_end < at < tables[k - 1].char_end:
                return header_of(tables[k - 1])
            return None
        for t in tables:
            if t.char_start > at:
                return None
            if t.header_end < at < t.char_end:
                return header_of(t)
        return None

    return header_at


def _header_start_finder(document: Document, base: int) -> Callable[[int], int | None]:
    """``header_start(offset in the piece) -> the table's start (offset in the piece)`` when the
    position lies inside a table's header (after its first character, up to its end), else ``None``."""
    tables = document.tables

    def header_start(pos: int) -> int | None:
        at = base + pos
        for t in tables:
            if t.char_start > at:
                return None
            if t.char_start < at <= t.header_end:
                return t.char_start - base
        return None

    return header_start


def _windows(text: str, size: int) -> list[tuple[int, str]]:
    """``text`` as ``(offset, piece)`` pieces of about ``size`` characters (all of it when shorter),
    each cut after the last paragraph break, else line break, else space in its second half."""
    if len(text) <= size:
        return [(0, text)]
    out, pos = [], 0
    while pos < len(text):
        end = min(len(text), pos + size)
        if end < len(text):
            window = text[pos + size // 2 : end]
            for sep in ("\n\n", "\n", " "):
                cut = window.rfind(sep)
                if cut >= 0:
                    end = pos + size // 2 + cut + len(sep)
                    break
        out.append((pos, text[pos:end]))
        pos = end
    return out


def _boundary_strengths(text: str, size: int) -> np.ndarray:
    """``(size,)`` int8: at each character position of ``text`` (``size > len(text)``) the strength
    of the strongest boundary ending there, 0 where none does: a position where a chunk may end (or
    the next begin). The boundaries are the ends of the non-overlapping matches of the patterns of
    :data:`_STRENGTHS` (4 paragraph break, 3 sentence end, 2 line break, 1 whitespace run), found
    here on the text's code points with numpy rather than by the regular expressions."""
    at = np.zeros(size, dtype=np.int8)
    n = len(text)
    if not n:
        return at
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    space = np.isin(codes, _WHITESPACE)
    # the first non-whitespace position at or after each position (n past the end): a \s+ run's end
    solid = np.append(np.flatnonzero(~space), n)

    def run_end(pos: np.ndarray) -> np.ndarray:
        return solid[np.searchsorted(solid, pos)]

    def mark(ends: np.ndarray, strength: int) -> None:
        at[ends] = np.maximum(at[ends], strength)

    # _SPACE \s+: the end of every maximal whitespace run
    run_ends = np.flatnonzero(space[:-1] & ~space[1:]) + 1
    mark(np.append(run_ends, n) if space[-1] else run_ends, 1)
    # _LINE \n: after every line break
    breaks = np.flatnonzero(codes == 10)
    mark(breaks + 1, 2)
    # _SENTENCE, first branch: after . ! ? ; : and any closing quotes or brackets, a whitespace run's end
    after = np.flatnonzero(np.isin(codes, _STOPS)) + 1
    open_ = np.append(np.flatnonzero(~np.isin(codes, _CLOSERS)), n)
    first = open_[np.searchsorted(open_, after)]  # the first position past the closers
    first = first[first < n]
    mark(run_end(first[space[first]]), 3)
    # _SENTENCE, second branch: right after a CJK full stop
    mark(np.flatnonzero(np.isin(codes, _CJK_STOPS)) + 1, 3)
    # _PARAGRAPH \n[ \t]*\n\s*: a whitespace run holding two line breaks with only spaces and tabs
    # between them ends there (a match takes the whole run, so each run has at most one)
    if len(breaks) > 1:
        other = np.cumsum((codes != 32) & (codes != 9))  # characters other than space and tab so far
        a, b = breaks[:-1], breaks[1:]
        mark(run_end(b[other[b - 1] == other[a]]), 4)
    return at


#: Gaps between tokens of up to this many positions are scored vectorised; longer ones one by one.
_SHORT_GAP = 8


def _cut_strengths(text: str, starts: np.ndarray, ends: np.ndarray) -> list[int]:
    """Strength of cutting ``text`` before each token (``starts``, ``ends``: ``(n,)`` int64 token
    offsets, ``str`` indices): item ``i`` (``i >= 1``; item 0 is 0) is the strongest boundary at a
    position ``p`` with ``ends[i-1] <= p <= starts[i]``, else 1 when the text between the tokens is
    non-empty whitespace, else 0. ``n`` ints."""
    n = len(starts)
    lo, hi = ends[:-1], starts[1:]
    at = _boundary_strengths(text, max(len(text), int(lo.max()), int(hi.max())) + 1)
    length = hi - lo + 1  # positions each gap spans, both ends included (<= 0: none)
    best = np.zeros(n - 1, dtype=np.int8)
    scored = length > 0
    if scored.any():
        for k in range(min(_SHORT_GAP, int(length.max()))):
            best = np.where(scored, np.maximum(best, at[np.minimum(lo + k, hi)]), best)
    for g in np.flatnonzero(length > _SHORT_GAP).tolist():
        best[g] = at[lo[g] : hi[g] + 1].max()
    for g in np.flatnonzero((best == 0) & (hi > lo)).tolist():
        best[g] = 1 if text[lo[g] : hi[g]].isspace() else 0
    return [0, *best.tolist()]


def _split(
    text: str,
    embedder: Embedder,
    plan: ChunkPlan,
    header_at: Callable[[int], tuple[str, int] | None] | None = None,
    header_start: Callable[[int], int | None] | None = None,
) -> list[tuple[int, int, int, tuple[str, int] | None]]:
    """``(start, end, tokens, repeated table header or None)`` spans of ``text`` covering all its
    tokens; a span that starts inside a table's body has room for the header it repeats (a header
    is repeated whenever the next row fits under it; over half the chunk size, not over a row longer
    than a chunk). Inside a table's body a line break (a row's end) is
    as strong a cut as a paragraph's end and a sentence's end inside a cell is no cut: a chunk
    ends at a row's end whenever a whole row fits (earlier in its window if need be), and the next
    chunk starts at a row's start (without overlap when no row's start lies in it); a cut or a
    start inside a table's header moves to the table's start, and a chunk that ends where a table
    starts is followed by the table, not by its own tail again. A row that fits a chunk only without
    the repeated header is given the whole chunk, without the header."""
    spans_of = embedder.token_spans(text)
    if not spans_of:
        return []
    n = len(spans_of)

    first = header_at(spans_of[0][0]) if header_at is not None else None  # the text starts in a table's body
    if first is not None and first[1] >= plan.max_tokens:
        first = None
    if n + (first[1] if first else 0) <= plan.max_tokens:
        return [(spans_of[0][0], spans_of[-1][1], n, first)]
    offsets = np.fromiter(chain.from_iterable(spans_of), dtype=np.int64, count=2 * n).reshape(n, 2)
    starts, ends = offsets[:, 0].tolist(), offsets[:, 1].tolist()
    strength = _cut_strengths(text, offsets[:, 0], offsets[:, 1])

    def in_body(j: int) -> bool:
        return header_at is not None and header_at(starts[j]) is not None

    def table_before(j: int) -> int | None:
        """The first token of the table whose header token ``j`` lies in, or ``None``."""
        at = header_start(starts[j]) if header_start is not None else None
        return bisect_left(starts, at) if at is not None else None

    if header_at is not None:  # in a table's body a row's end is the place to cut, not a cell's "Ltd."
        for j in range(1, n):
            if strength[j] in (2, 3) and header_at(starts[j]) is not None:
                strength[j] = 4 if strength[j] == 2 and "\n" in text[ends[j - 1] : starts[j]] else 1

    def header(i: int) -> tuple[str, int] | None:
        if header_at is None:
            return None
        found = header_at(starts[i])
        return found if found is not None and found[1] < plan.max_tokens else None

    spans: list[tuple[int, int, int, tuple[str, int] | None]] = []
    i = 0
    while i < n:
        repeat = header(i)
        if repeat is not None:  # a row that fits a chunk only without the header is kept whole
            row_end = next((j for j in range(i + 1, min(n, i + plan.max_tokens) + 1) if j == n or strength[j] == 4), None)
            if row_end is not None and row_end - i > plan.max_tokens - repeat[1]:
                repeat = None  # the row fits a chunk, but not under the header: the row whole
            elif row_end is None and repeat[1] > plan.max_tokens // 2:
                repeat = None  # a row longer than a chunk: a header over half the chunk is not repeated
        room = plan.max_tokens - (repeat[1] if repeat else 0)
        limit = i + room
        if limit >= n:
            spans.append((starts[i], ends[-1], n - i, repeat))
            break
        # the best cut in the second half of the window, latest among the strongest
        lo = i + max(1, room // 2)
        best_j, best_s = limit, -1
        for j in range(limit, lo - 1, -1):
            s = strength[j]
            if s > best_s:
                best_j, best_s = j, s
                if s == 4:
                    break
        before = table_before(best_j)
        at_table = before is not None and before > i
        if before is not None and at_table:  # not inside a table's header: before the table (the next from it)
            best_j, best_s = before, 4
        elif best_s < 4 and in_body(best_j):  # a row's end earlier in the window, rather than cut a row
            earlier = next((j for j in range(lo - 1, i, -1) if strength[j] == 4), None)
            if earlier is not None:
                best_j, best_s = earlier, 4
        at_table = at_table or (best_j + 1 < n and table_before(best_j + 1) == best_j)  # ends where one starts
        spans.append((starts[i], ends[best_j - 1], best_j - i, repeat))
        if plan.overlap_tokens == 0:
            i = best_j
            continue
        # next start: overlap tokens back, snapped forward to the strongest nearby boundary
        back = max(i + 1, best_j - plan.overlap_tokens)
        window_end = min(best_j, back + max(1, plan.overlap_tokens // 4))
        nxt, nxt_s = back, -1
        for j in range(back, window_end + 1):
            if j >= best_j:
                break
            s = strength[j] if j > 0 else 4
            if s > nxt_s:
                nxt, nxt_s = j, s
        if nxt_s < 4 and in_body(nxt):  # inside a table: start at a row, not mid-row
            nxt = next((j for j in range(back, best_j) if strength[j] >= 2), best_j if best_s == 4 else nxt)
        if nxt < best_j and in_body(nxt) and not any(strength[j] == 4 for j in range(i + 1, nxt)):
            nxt = best_j  # the chunk's only row: the next chunk starts after it, not with it again
        before = table_before(nxt)
        if at_table:
            nxt = best_j
        elif before is not None:  # inside a table's header: from the table's start
            nxt = before if before > i else best_j
        i = nxt
    return spans
