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
still says what each value means. Its room in the window is the chunk size less the header's tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from knowledge.embeddings.base import Embedder
from knowledge.errors import InvalidArgument
from knowledge.ingest.document import Document

#: The spec's default chunking ("OpenAI-style 800/400"), in tokens.
SPEC_MAX_TOKENS = 800
SPEC_OVERLAP_TOKENS = 400

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE = re.compile(r"(?<=[.!?;:])[\"'”’)\]]*\s+|(?<=[。！？；])")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")
#: Boundary strength: a higher value is a better place to cut.
_STRENGTHS = ((_PARAGRAPH, 4), (_SENTENCE, 3), (_LINE, 2), (_SPACE, 1))


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One chunk of a document: ``text == document.text[char_start:char_end]`` (``str`` indices),
    the ``page`` (1-based) and ``heading`` path of its section, and its size in model ``tokens``.

    A chunk that begins inside a table's body repeats the table's header: then ``table_header`` is
    that header and ``text == table_header + "\\n" + document.text[char_start:char_end]`` (the span
    still points at the chunk's own rows; ``tokens`` counts the header too)."""

    index: int
    text: str
    char_start: int
    char_end: int
    tokens: int
    page: int | None = None
    heading: str | None = None
    table_header: str | None = None


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


def plan_chunking(embedder: Embedder, max_tokens: int = SPEC_MAX_TOKENS,
                  overlap_tokens: int = SPEC_OVERLAP_TOKENS) -> ChunkPlan:
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


def chunk_document(document: Document, embedder: Embedder, max_tokens: int = SPEC_MAX_TOKENS,
                   overlap_tokens: int = SPEC_OVERLAP_TOKENS,
                   on_progress: Callable[[float], None] | None = None) -> ChunkResult:
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
        body = document.text[section.char_start:section.char_end]
        if section.heading not in budgets:
            heading_tokens = embedder.count_tokens(embedding_text("", section.heading)) if section.heading else 0
            room = plan.max_tokens - heading_tokens
            budgets[section.heading] = (
                ChunkPlan(room, min(plan.overlap_tokens, room // 2))
                if heading_tokens and room >= plan.max_tokens // 2 else plan
            )
        for offset, piece in _windows(body, WINDOW_CHARS):
            base = section.char_start + offset
            header_at = _header_finder(document, base, headers, embedder) if document.tables else None
            for start, end, n, header in _split(piece, embedder, budgets[section.heading], header_at):
                own = piece[start:end]
                chunks.append(TextChunk(
                    index=len(chunks), text=f"{header[0]}\n{own}" if header else own,
                    char_start=base + start, char_end=base + end, tokens=n + (header[1] if header else 0),
                    page=section.page, heading=section.heading, table_header=header[0] if header else None,
                ))
            if on_progress is not None and len(document.text) > WINDOW_CHARS:
                on_progress(min(1.0, (section.char_start + offset + len(piece)) / len(document.text)))
    return ChunkResult(chunks, plan, list(plan.notes))


def _header_finder(document: Document, base: int, cache: dict[int, tuple[str, int]],
                   embedder: Embedder) -> Callable[[int], tuple[str, int] | None]:
    """``header_at(offset in the piece) -> (table header, its tokens + 1 for the line break)`` when a
    chunk starting there begins inside a table's body, else ``None``."""
    tables = document.tables

    def header_at(pos: int) -> tuple[str, int] | None:
        at = base + pos
        for t in tables:
            if t.char_start > at:
                return None
            if t.header_end < at < t.char_end:
                if t.char_start not in cache:
                    header = document.text[t.char_start:t.header_end]
                    cache[t.char_start] = (header, embedder.count_tokens(header) + 1)
                return cache[t.char_start]
        return None

    return header_at


def _windows(text: str, size: int) -> list[tuple[int, str]]:
    """``text`` as ``(offset, piece)`` pieces of about ``size`` characters (all of it when shorter),
    each cut after the last paragraph break, else line break, else space in its second half."""
    if len(text) <= size:
        return [(0, text)]
    out, pos = [], 0
    while pos < len(text):
        end = min(len(text), pos + size)
        if end < len(text):
            window = text[pos + size // 2:end]
            for sep in ("\n\n", "\n", " "):
                cut = window.rfind(sep)
                if cut >= 0:
                    end = pos + size // 2 + cut + len(sep)
                    break
        out.append((pos, text[pos:end]))
        pos = end
    return out


def _boundaries(text: str) -> dict[int, int]:
    """Character positions where a chunk may end (or the next begin) -> strength."""
    found: dict[int, int] = {}
    for pattern, strength in _STRENGTHS:
        for m in pattern.finditer(text):
            pos = m.end()
            if strength > found.get(pos, 0):
                found[pos] = strength
    return found


def _split(text: str, embedder: Embedder, plan: ChunkPlan,
           header_at: Callable[[int], tuple[str, int] | None] | None = None,
           ) -> list[tuple[int, int, int, tuple[str, int] | None]]:
    """``(start, end, tokens, repeated table header or None)`` spans of ``text`` covering all its
    tokens; a span that starts inside a table's body has room for the header it repeats (a header
    over half the chunk size is not repeated)."""
    tokens = embedder.tokenize(text)
    if not tokens:
        return []
    n = len(tokens)

    def header(i: int) -> tuple[str, int] | None:
        if header_at is None or i == 0:
            return None
        found = header_at(tokens[i].start)
        return found if found is not None and found[1] <= plan.max_tokens // 2 else None

    if n <= plan.max_tokens:
        return [(tokens[0].start, tokens[-1].end, n, None)]
    strength = _boundaries(text)

    def cut_strength(i: int) -> int:
        """Strength of cutting before token ``i`` (between token i-1 and i)."""
        gap = text[tokens[i - 1].end:tokens[i].start]
        best = max((strength.get(p, 0) for p in range(tokens[i - 1].end, tokens[i].start + 1)), default=0)
        return best if best else (1 if gap.strip() == "" and gap else 0)

    spans: list[tuple[int, int, int, tuple[str, int] | None]] = []
    i = 0
    while i < n:
        repeat = header(i)
        room = plan.max_tokens - (repeat[1] if repeat else 0)
        limit = i + room
        if limit >= n:
            spans.append((tokens[i].start, tokens[-1].end, n - i, repeat))
            break
        # the best cut in the second half of the window, latest among the strongest
        lo = i + max(1, room // 2)
        best_j, best_s = limit, -1
        for j in range(limit, lo - 1, -1):
            s = cut_strength(j)
            if s > best_s:
                best_j, best_s = j, s
                if s == 4:
                    break
        spans.append((tokens[i].start, tokens[best_j - 1].end, best_j - i, repeat))
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
            s = cut_strength(j) if j > 0 else 4
            if s > nxt_s:
                nxt, nxt_s = j, s
        if nxt_s < 2 and header(nxt) is not None:  # inside a table: start at a row, not mid-row
            nxt = next((j for j in range(back, best_j) if cut_strength(j) >= 2), nxt)
        i = nxt
    return spans
