"""The fast chunker gives exactly the chunks of the chunker it replaced.

``_reference_*`` below is the chunking algorithm as it was before issue 38 made it fast (commit
a18e87d; with issue 43's rule for cuts inside a table's body added): one ``Token`` per token, each
gap's cut strength found by scanning a dict of boundary
positions on every look, and a linear scan of the tables for every header lookup. The tests compare
its chunks with :func:`chunk_document`'s, every field, on a few hundred seeded random documents
mixing paragraphs, sentences, CJK, long words without spaces, odd whitespace runs, headings and
tables with headers, with the hashing embedder and with the bundled model's tokenizer.

The reference's chunks of every case are recorded as digests (tests/data/chunker_reference_digests.json,
written by ``python -m tests.ingest.test_chunker_equivalence``), so the inner loop runs only the fast
chunker; where its chunks' digest is not the recorded one, the reference runs and the two must be the same,
field by field. A ``slow`` test checks the recorded digests against the reference.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import knowledge.ingest.chunker as chunker
from knowledge.embeddings.base import Embedder, Token
from knowledge.embeddings.fake import HashEmbedder
from knowledge.ingest.chunker import ChunkPlan, TextChunk, chunk_document, embedding_text, plan_chunking
from knowledge.ingest.document import Document, Section, Table
from knowledge.text.tables import compact_header

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
                    header = compact_header(document.text[t.char_start : t.header_end])
                    cache[t.char_start] = (header, embedder.count_tokens(header) + 1)
                return cache[t.char_start]
        return None

    return header_at


def _reference_split(text, embedder, plan, header_at=None, header_start=None):
    tokens = embedder.tokenize(text)
    if not tokens:
        return []
    n = len(tokens)

    def header(i):
        if header_at is None:
            return None
        found = header_at(tokens[i].start)
        return found if found is not None and found[1] < plan.max_tokens else None

    first = header(0)
    if n + (first[1] if first else 0) <= plan.max_tokens:
        return [(tokens[0].start, tokens[-1].end, n, first)]
    strength = _reference_boundaries(text)

    def in_body(i):
        return header_at is not None and header_at(tokens[i].start) is not None

    def table_before(i):
        at = header_start(tokens[i].start) if header_start is not None else None
        return None if at is None else next(k for k in range(n) if tokens[k].start >= at)

    def cut_strength(i):
        gap = text[tokens[i - 1].end : tokens[i].start]
        best = max((strength.get(p, 0) for p in range(tokens[i - 1].end, tokens[i].start + 1)), default=0)
        best = best if best else (1 if gap.strip() == "" and gap else 0)
        if best in (2, 3) and header_at is not None and header_at(tokens[i].start) is not None:
            # issue 43: in a table's body a row's end is a paragraph-strong cut, a cell's "Ltd." none
            return 4 if best == 2 and "\n" in gap else 1
        return best

    spans = []
    i = 0
    while i < n:
        repeat = header(i)
        if repeat is not None:
            row_end = next(
                (j for j in range(i + 1, min(n, i + plan.max_tokens) + 1) if j == n or cut_strength(j) == 4), None
            )
            fits_alone = row_end is not None and row_end - i > plan.max_tokens - repeat[1]
            if fits_alone or (row_end is None and repeat[1] > plan.max_tokens // 2):
                repeat = None
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
        before = table_before(best_j)
        at_table = before is not None and before > i
        if at_table:
            best_j, best_s = before, 4
        elif best_s < 4 and in_body(best_j):
            earlier = next((j for j in range(lo - 1, i, -1) if cut_strength(j) == 4), None)
            if earlier is not None:
                best_j, best_s = earlier, 4
        at_table = at_table or (best_j + 1 < n and table_before(best_j + 1) == best_j)
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
        if nxt_s < 4 and in_body(nxt):
            nxt = next((j for j in range(back, best_j) if cut_strength(j) >= 2), best_j if best_s == 4 else nxt)
        if nxt < best_j and in_body(nxt) and not any(cut_strength(j) == 4 for j in range(i + 1, nxt)):
            nxt = best_j
        before = table_before(nxt)
        if at_table:
            nxt = best_j
        elif before is not None:
            nxt = before if before > i else best_j
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
            header_start = chunker._header_start_finder(document, base) if document.tables else None
            for start, end, n, header in _reference_split(
                piece, embedder, budgets[section.heading], header_at, header_start
            ):
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


def _reference_fields(cases: list[tuple[Document, Embedder, int, int]]) -> list[list[tuple]]:
    return [_fields(_reference_chunk_document(*case)) for case in cases]


def _digest(fields: list[list[tuple]]) -> str:
    return hashlib.sha256(repr(fields).encode("utf-8")).hexdigest()[:24]


def _recorded() -> dict[str, str]:
    return json.loads(_DIGESTS.read_text(encoding="utf-8")) if _DIGESTS.is_file() else {}


def _assert_same(monkeypatch: pytest.MonkeyPatch, key: str, window: int, cases: list[tuple]) -> None:
    """:func:`chunk_document`'s chunks of each ``(document, embedder, size, overlap)`` are the reference's,
    every field, with ``WINDOW_CHARS = window``: their digest is the one recorded from the reference for
    ``key``; where it is not (or none is recorded), the reference runs and its chunks must be the same."""
    monkeypatch.setattr(chunker, "WINDOW_CHARS", window)
    new = [_fields(chunk_document(*case).chunks) for case in cases]
    if _digest(new) != _RECORDED.get(key):
        assert new == _reference_fields(cases), key


class LeadingSpace(HashEmbedder):
    """Tokens that begin with the whitespace character before them, as GPT-style tokenizers' do, of
    at most 6 non-space characters: a gap between two tokens may then be whitespace without a
    boundary in it (the rest of its run is inside the next token), and a token may start at a line
    break."""

    _TOKEN = re.compile(r"\s?\S{1,6}")

    def tokenize(self, text):
        return [Token(0, m.group(), m.start(), m.end()) for m in self._TOKEN.finditer(text)]


_HASH_SIZES = [(8, 0), (12, 3), (16, 15), (24, 6), (40, 0), (64, 16), (200, 100)]
_TWIN_SIZES = [(16, 0), (24, 6), (48, 12), (100, 0), (192, 48)]
#: The chunker's own window (the hostile texts are chunked with it).
_WINDOW_CHARS = chunker.WINDOW_CHARS
_HOSTILE_ALPHABET = list("ab .!?;:\"'”’)]。！？；\n\n\t\r\x0b\x1c\xa0\u3000\u2028日x")


def _hashing_group(seed: int) -> tuple[int, list[tuple]]:
    """Document ``seed`` with each hashing embedder and 2 of the sizes, in pieces of 700 characters or whole:
    ``(WINDOW_CHARS, cases)``."""
    document = random_document(seed)
    embedders = (HashEmbedder(dimension=8, max_tokens=256), LeadingSpace(dimension=8, max_tokens=256))
    sizes = random.Random(seed).sample(_HASH_SIZES, 2)
    return (700 if seed % 2 else 100_000), [(document, e, size, overlap) for e in embedders for size, overlap in sizes]


def _hostile_groups() -> list[tuple[int, list[tuple]]]:
    """300 texts of only whitespace, punctuation, closers and stops, in odd mixes, each at 4 sizes."""
    embedders = (HashEmbedder(dimension=8, max_tokens=64), LeadingSpace(dimension=8, max_tokens=64))
    r = random.Random(38)
    groups = []
    for _ in range(300):
        text = "".join(r.choice(_HOSTILE_ALPHABET) for _ in range(r.randint(0, 300)))
        document = Document(text, [Section(0, len(text))], format="text")
        cases = [(document, e, size, overlap) for size, overlap in [(4, 0), (6, 2), (10, 9), (16, 4)] for e in embedders]
        groups.append((_WINDOW_CHARS, cases))
    return groups


def _twin_group(twin: Embedder, seed: int) -> tuple[int, list[tuple]]:
    sizes = random.Random(seed).sample(_TWIN_SIZES, 2)
    return (700 if seed % 3 == 0 else 100_000), [(random_document(seed), twin, size, overlap) for size, overlap in sizes]


def _all_groups(twin: Embedder) -> Iterator[tuple[str, int, list[tuple]]]:
    """Every compared case, as ``(key, WINDOW_CHARS, cases)``: the keys of the recorded digests."""
    for seed in range(300):
        yield (f"hash/{seed}", *_hashing_group(seed))
    for i, group in enumerate(_hostile_groups()):
        yield (f"hostile/{i}", *group)
    for seed in range(1000, 1080):
        yield (f"twin/{seed}", *_twin_group(twin, seed))


#: The digests of the reference's chunks of every group (``python -m tests.ingest.test_chunker_equivalence``
#: writes them): the tests run the reference only where :func:`chunk_document`'s chunks differ from them.
_DIGESTS = Path(__file__).parent.parent / "data" / "chunker_reference_digests.json"
_RECORDED = _recorded()


@pytest.mark.parametrize("first", range(0, 300, 75))
def test_the_hashing_embedder_gets_the_chunks_it_got_before(monkeypatch, first):
    """300 documents, each chunked with 3 of the sizes, in pieces of 700 characters or whole."""
    for seed in range(first, first + 75):
        _assert_same(monkeypatch, f"hash/{seed}", *_hashing_group(seed))


def test_hostile_texts_get_the_chunks_they_got_before(monkeypatch):
    """Texts of only whitespace, punctuation, closers and stops, in odd mixes."""
    for i, group in enumerate(_hostile_groups()):
        _assert_same(monkeypatch, f"hostile/{i}", *group)


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
        _assert_same(monkeypatch, f"twin/{seed}", *_twin_group(twin, seed))


@pytest.mark.slow
@pytest.mark.model
def test_the_recorded_digests_are_the_reference_chunkers(twin, monkeypatch):
    """The digests the tests above compare with are the reference's chunks of every group, none missing."""
    found = {}
    for key, window, cases in _all_groups(twin):
        monkeypatch.setattr(chunker, "WINDOW_CHARS", window)
        found[key] = _digest(_reference_fields(cases))
    assert found == _RECORDED


def _record() -> None:
    """Write the reference's digests (:data:`_DIGESTS`), after a change to the generated documents."""
    from knowledge.embeddings.bundled import BundledEmbedder

    with tempfile.TemporaryDirectory() as models:
        twin = BundledEmbedder(Path(models)).tokenizer_twin()
        found = {}
        for key, window, cases in _all_groups(twin):
            chunker.WINDOW_CHARS = window
            found[key] = _digest(_reference_fields(cases))
    chunker.WINDOW_CHARS = _WINDOW_CHARS
    _DIGESTS.write_text(json.dumps(found, indent=0) + "\n", encoding="utf-8")
    print(f"{len(found)} digests written to {_DIGESTS}")


if __name__ == "__main__":
    _record()
