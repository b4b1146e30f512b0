"""The fast chunker gives exactly the chunks of the chunker it replaced.

``_reference_*`` below is the chunking algorithm as it was before issue 38 made it fast (commit
a18e87d): one ``Token`` per token, each gap's cut strength found by scanning a dict of boundary
positions on every look, and a linear scan of the tables for every header lookup. The tests compare
its chunks with :func:`chunk_document`'s, every field, on a few hundred seeded random documents
mixing paragraphs, sentences, CJK, long words without spaces, odd whitespace runs, headings and
tables with headers, with the hashing embedder and with the bundled model's tokenizer.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

import knowledge.ingest.chunker as chunker
from knowledge.embeddings.base import Embedder, Token
from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest.chunker import ChunkPlan, TextChunk, chunk_document, embedding_text, plan_chunking
from knowledge.ingest.document import Document, Section, Table

# -- the reference: the chunker before it was made fast --------------------------------------------

_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE = re.compile(r"(?<=[.!?;:])[\"'”’)\]]*\s+|(?<=[。！？；])")
_LINE = re.compile(r"\n")
_SPACE = re.compile(r"\s+")
_STRENGTHS = ((_PARAGRAPH, 4), (_SENTENCE, 3), (_LINE, 2), (_SPACE, 1))


def _reference_boundaries(text: str) -> dict[int, int]:
    found: dict[int, int] = {}
    for pattern, strength in _STRENGTHS:
        for m in pattern.finditer(text):
            pos = m.end()
            if strength > found.get(pos, 0):
                found[pos] = strength
    return found


def _reference_header_finder(
    document: Document, base: int, cache: dict[int, tuple[str, int]], embedder: Embedder
) -> Callable[[int], tuple[str, int] | None]:
    tables = document.tables

    def header_at(pos: int) -> tuple[str, int] | None:
        at = base + pos
        for t in tables:
            if t.char_start > at:
                return None
            if t.header_end < at < t.char_end:
                if t.char_start not in cache:
                    header = document.text[t.char_start : t.header_end]
                    cache[t.char_start] = (header, embedder.count_tokens(header) + 1)
                return cache[t.char_start]
        return None

    return header_at


def _reference_split(text, embedder, plan, header_at=None):
    tokens = embedder.tokenize(text)
    if not tokens:
        return []
    n = len(tokens)

    def header(i):
        if header_at is None or i == 0:
            return None
        found = header_at(tokens[i].start)
        return found if found is not None and found[1] <= plan.max_tokens // 2 else None

    if n <= plan.max_tokens:
        return [(tokens[0].start, tokens[-1].end, n, None)]
    strength = _reference_boundaries(text)

    def cut_strength(i):
        gap = text[tokens[i - 1].end : tokens[i].start]
        best = max((strength.get(p, 0) for p in range(tokens[i - 1].end, tokens[i].start + 1)), default=0)
        return best if best else (1 if gap.strip() == "" and gap else 0)

    spans = []
    i = 0
    while i < n:
        repeat = header(i)
        room = plan.max_tokens - (repeat[1] if repeat else 0)
        limit = i + room
        if limit >= n:
            spans.append((tokens[i].start, tokens[-1].end, n - i, repeat))
            break
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
        back = max(i + 1, best_j - plan.overlap_tokens)
        window_end = min(best_j, back + max(1, plan.overlap_tokens // 4))
        nxt, nxt_s = back, -1
        for j in range(back, window_end + 1):
            if j >= best_j:
                break
            s = cut_strength(j) if j > 0 else 4
            if s > nxt_s:
                nxt, nxt_s = j, s
        if nxt_s < 2 and header(nxt) is not None:
            nxt = next((j for j in range(back, best_j) if cut_strength(j) >= 2), nxt)
        i = nxt
    return spans


def _reference_chunk_document(
    document: Document, embedder: Embedder, max_tokens: int, overlap_tokens: int
) -> list[TextChunk]:
    plan = plan_chunking(embedder, max_tokens, overlap_tokens)
    chunks: list[TextChunk] = []
    budgets: dict[str | None, ChunkPlan] = {}
    headers: dict[int, tuple[str, int]] = {}
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
        for offset, piece in chunker._windows(body, chunker.WINDOW_CHARS):
            base = section.char_start + offset
            header_at = _reference_header_finder(document, base, headers, embedder) if document.tables else None
            for start, end, n, header in _reference_split(piece, embedder, budgets[section.heading], header_at):
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
    return chunks


# -- random documents ------------------------------------------------------------------------------

_WORDS = [
    "the",
    "borrow",
    "checker",
    "prevents",
    "dangling",
    "references",
    "at",
    "compile",
    "time",
    "Ünïcödé",
    "façade",
    "naïve",
    "x",
    "42",
    "3.14",
    "e-mail",
    "don't",
    "🙂",
    "🚀",
    "C++",
    "a/b",
]
_CJK = "日本語の文章です中文句子한국어テキスト"
_ODD_SPACE = [
    " ",
    "  ",
    "\t",
    " \t ",
    "\xa0",
    "\u3000",
    "\u2028",
    "\x1c",
    "\x0b",
    "\r",
    "\u200b",
    "\x7f",
    "\xad",
    " " * 12,
    "\u200b" * 10,
    " \x7f\x7f \x1c\x1c\xa0\xa0  \t ",
]


def _sentence(r: random.Random) -> str:
    kind = r.random()
    if kind < 0.15:  # CJK without spaces, CJK stops
        return "".join(r.choice(_CJK) for _ in range(r.randint(1, 40))) + r.choice(["。", "！", "？", "；", ""])
    if kind < 0.22:  # a long word without spaces
        return "".join(r.choice("abcdefghij0123456789-_") for _ in range(r.randint(20, 300)))
    words = [r.choice(_WORDS) for _ in range(r.randint(1, 25))]
    sep = [r.choice(_ODD_SPACE) if r.random() < 0.1 else " " for _ in words]
    body = "".join(w + s for w, s in zip(words, sep, strict=True)).rstrip(" ")
    return body + r.choice([".", "!", "?", ";", ":", '."', ".)", "?’", "", ",", "..."])


def _paragraph(r: random.Random) -> str:
    joins = [" ", "  ", "\n", " \n", "\t", "", "\n\t\n"]
    parts = [_sentence(r) for _ in range(r.randint(1, 8))]
    return "".join(p + r.choice(joins) for p in parts).rstrip()


def _table(r: random.Random, cols: int) -> tuple[str, int]:
    """Rows of ``cols`` cells, one per line; the header row's length."""
    header = " | ".join(r.choice(["Name", "Amount", "Date", "Notes", "Größe", "名前"]) for _ in range(cols))
    rows = [
        " | ".join(r.choice([*_WORDS, "", "1,234.50", "2024-01-31"]) for _ in range(cols)) for _ in range(r.randint(1, 40))
    ]
    return "\n".join([header, *rows]), len(header)


def random_document(seed: int) -> Document:
    """A document of 1 to 4 sections, each of paragraphs and tables, text and spans consistent."""
    r = random.Random(seed)
    text, sections, tables = "", [], []
    for s in range(r.randint(1, 3)):
        start = len(text)
        for _ in range(r.randint(1, 6)):
            if r.random() < 0.3:
                block, header_len = _table(r, r.randint(1, 6))
                tables.append(Table(len(text), len(text) + header_len, len(text) + len(block)))
            else:
                block = _paragraph(r)
            text += block + r.choice(["\n\n", "\n\n", "\n \n", "\n\n\n", " "])
        heading = r.choice([None, f"Chapter {s}", f"Part {s} > A rather long heading path {s} > Sub"])
        sections.append(Section(start, len(text), page=r.choice([None, s + 1]), heading=heading))
    if tables and r.random() < 0.1:  # out of order (the readers never do this): the scan is used
        tables.reverse()
    return Document(text, sections, format="markdown", tables=tables)


def _fields(chunks: list[TextChunk]) -> list[tuple]:
    return [(c.index, c.text, c.char_start, c.char_end, c.tokens, c.page, c.heading, c.table_header) for c in chunks]


def _assert_same(document: Document, embedder: Embedder, size: int, overlap: int) -> None:
    new = chunk_document(document, embedder, size, overlap).chunks
    old = _reference_chunk_document(document, embedder, size, overlap)
    assert _fields(new) == _fields(old)


class LeadingSpace(HashEmbedder):
    """Tokens that begin with the whitespace character before them, as GPT-style tokenizers' do, of
    at most 6 non-space characters: a gap between two tokens may then be whitespace without a
    boundary in it (the rest of its run is inside the next token), and a token may start at a line
    break."""

    _TOKEN = re.compile(r"\s?\S{1,6}")

    def tokenize(self, text):
        return [Token(0, m.group(), m.start(), m.end()) for m in self._TOKEN.finditer(text)]


_HASH_SIZES = [(8, 0), (12, 3), (16, 15), (24, 6), (40, 0), (64, 16), (200, 100)]


@pytest.mark.parametrize("first", range(0, 300, 75))
def test_the_hashing_embedder_gets_the_chunks_it_got_before(monkeypatch, first):
    """300 documents, each chunked with 3 of the sizes, in pieces of 700 characters or whole."""
    for seed in range(first, first + 75):
        monkeypatch.setattr(chunker, "WINDOW_CHARS", 700 if seed % 2 else 100_000)
        document = random_document(seed)
        for embedder in (HashEmbedder(dimension=8, max_tokens=256), LeadingSpace(dimension=8, max_tokens=256)):
            for size, overlap in random.Random(seed).sample(_HASH_SIZES, 2):
                _assert_same(document, embedder, size, overlap)


def test_hostile_texts_get_the_chunks_they_got_before():
    """Texts of only whitespace, punctuation, closers and stops, in odd mixes."""
    embedders = (HashEmbedder(dimension=8, max_tokens=64), LeadingSpace(dimension=8, max_tokens=64))
    alphabet = list("ab .!?;:\"'”’)]。！？；\n\n\t\r\x0b\x1c\xa0\u3000\u2028日x")
    r = random.Random(38)
    for _ in range(300):
        text = "".join(r.choice(alphabet) for _ in range(r.randint(0, 300)))
        document = Document(text, [Section(0, len(text))], format="text")
        for size, overlap in [(4, 0), (6, 2), (10, 9), (16, 4)]:
            for embedder in embedders:
                _assert_same(document, embedder, size, overlap)


def test_boundary_strengths_match_the_regular_expressions():
    alphabet = list("ab .!?;:\"'”’)]。！？；\n\n\n\t\r\x0b\x1c\xa0\u3000\u2028\u0085x")
    r = random.Random(7)
    for _ in range(3000):
        text = "".join(r.choice(alphabet) for _ in range(r.randint(0, 40)))
        at = chunker._boundary_strengths(text, len(text) + 3)
        assert {i: int(v) for i, v in enumerate(at) if v} == _reference_boundaries(text), repr(text)


def test_the_whitespace_table_is_every_code_point_python_calls_whitespace():
    assert chunker._WHITESPACE.tolist() == [c for c in range(0x110000) if chr(c).isspace()]
    assert all(re.fullmatch(r"\s", chr(c)) for c in chunker._WHITESPACE.tolist())


def test_token_spans_are_the_tokens_offsets_and_a_subclass_tokenizer_is_respected():
    e = HashEmbedder()
    text = "Hello, wörld! 日本語 abc_def  \t x.y"
    assert e.token_spans(text) == [(t.start, t.end) for t in e.tokenize(text)]
    assert e.token_spans("") == []

    class Chars(HashEmbedder):  # tokenizes its own way: the default token_spans follows it
        def tokenize(self, text):
            return [t for t in HashEmbedder().tokenize(text) if t.end - t.start == 1]

    assert Chars().token_spans(text) == [(t.start, t.end) for t in Chars().tokenize(text)]


# -- the bundled model's tokenizer -----------------------------------------------------------------


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    from knowledge.embeddings.bundled import BundledEmbedder

    return BundledEmbedder(tmp_path_factory.mktemp("models")).tokenizer_twin()


@pytest.mark.model
def test_the_bundled_tokenizer_gets_the_chunks_it_got_before(twin, monkeypatch):
    text = "Ünïcödé façade — 🙂 日本語の文章です。 naïve\u200b\x7f\xad te\u0301st " * 30
    assert twin.token_spans(text) == [(t.start, t.end) for t in twin.tokenize(text)]
    for seed in range(1000, 1080):
        monkeypatch.setattr(chunker, "WINDOW_CHARS", 700 if seed % 3 == 0 else 100_000)
        document = random_document(seed)
        for size, overlap in random.Random(seed).sample([(16, 0), (24, 6), (48, 12), (100, 0), (192, 48)], 2):
            _assert_same(document, twin, size, overlap)
