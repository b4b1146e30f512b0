"""Lexical retrieval (BM25) over a store's chunk text, and its fusion with vector search.

Dense embeddings of a small model blur exact words: a question naming ``panic!`` and ``Result``
finds chunks *about* errors, not necessarily the one that contrasts the two. Hybrid search runs a
BM25 ranking next to the vector ranking and merges the two by reciprocal rank fusion, as Elastic,
OpenSearch, Qdrant and Weaviate do for their hybrid modes.

- BM25: Lucene's variant and defaults (k1 = 1.2, b = 0.75), kept per file so that ingesting or
  deleting one file re-indexes that file only (see :class:`LexicalIndex`).
- Tokens: NFKC-folded, lower-cased runs of letters and digits; English stop words removed (Lucene's list of 33,
  :data:`STOP_WORDS`); Snowball English stemming (``py_rust_stemmers``), so ``iterating`` matches
  ``iterate``. Chinese, Japanese and Korean text has no spaces: each CJK character is a token and so
  is each pair of neighbouring ones (the usual unigram + bigram scheme of Lucene's CJK analyzer).
- Fusion: reciprocal rank fusion, ``score(d) = sum over rankings r of 1 / (60 + rank_r(d))`` with
  1-based ranks (Cormack, Clarke and Büttcher, "Reciprocal rank fusion outperforms Condorcet and
  individual rank learning methods", SIGIR 2009; 60 is their constant).

Two indexes over the points of a collection (their ``text`` and ``heading`` payload fields):

- :class:`DiskLexicon`, persisted with tantivy, is what the memory backend keeps per store, written
  in the same write as the vectors (:meth:`knowledge.vectorstore.memory.MemoryCollection.lexical_search`);
  pgvector keeps the same terms in PostgreSQL (:mod:`knowledge.vectorstore.pgvector`).
- :class:`LexicalIndex`, in process memory, for backends without an index of their own (qdrant,
  plugins): :class:`knowledge.search.Searcher` refreshes it before each search from the store's
  files and their versions, so it is never stale.
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from .vectorstore.base import PointId, Where, matches

RRF_K = 60
"""The rank constant of reciprocal rank fusion (Cormack et al. 2009)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


STOP_WORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
    "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
    "to", "was", "will", "with",
])
"""English stop words: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words)."""


def _stemmer():
    # The Snowball stemmers compiled from Rust; fastembed depends on this package already.
    from py_rust_stemmers import SnowballStemmer

    return SnowballStemmer("english")


class Analyzer:
    """Text to BM25 terms (see the module docstring for the rules).

    ``terms("Iterating over Vectors!") -> ["iter", "over", "vector"]``.
    """

    def __init__(self) -> None:
        self._stop = STOP_WORDS
        self._stem = _stemmer().stem_words

    def stem(self, words: Sequence[str]) -> list[str]:
        """The English Snowball stems of ``words`` (lower-cased words in, one stem per word out)."""
        return self._stem(list(words))

    def terms(self, text: str) -> list[str]:
        words: list[str] = []
        for run in _WORD.findall(unicodedata.normalize("NFKC", text).lower()):
            if _CJK.search(run):
                for piece in re.split(f"({_CJK.pattern})", run):
                    if not piece:
                        continue
                    if _CJK.fullmatch(piece):
                        words.extend(piece)
                        words.extend(piece[i:i + 2] for i in range(len(piece) - 1))
                    else:
                        words.append(piece)
            else:
                words.append(run)
        kept = [w for w in words if w not in self._stop]
        return self._stem(kept)


_ANALYZER: Analyzer | None = None


def analyzer() -> Analyzer:
    """The shared :class:`Analyzer` (the stemmer is built once)."""
    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = Analyzer()
    return _ANALYZER


@dataclass(frozen=True, slots=True)
class LexicalHit:
    """A BM25 match: the point's id, its payload and its BM25 score (>= 0, higher is better)."""

    id: PointId
    score: float
    payload: Mapping[str, Any]


K1, B = 1.2, 0.75
"""BM25's term-frequency saturation and length normalisation, Lucene's defaults (``BM25Similarity``)."""


SPARSE_AVG_TERMS = 90.0
"""The average chunk length, in terms, that :func:`sparse_document` normalises by: a 192-token chunk
(the default size) holds about 140 words, about 90 terms once stop words are out. A constant, so a
point's weights never change when other points come and go (as fastembed's ``Bm25`` does with its
``avg_len``)."""


def term_index(term: str) -> int:
    """A term's dimension in a sparse vector: the CRC-32 of its UTF-8 bytes (``0 .. 2**32 - 1``, a
    Qdrant sparse index is a uint32). Two terms can share a dimension (about one pair in a
    100,000-term vocabulary): they then count as one term."""
    return zlib.crc32(term.encode("utf-8"))


def sparse_document(text: str, avg_terms: float = SPARSE_AVG_TERMS) -> tuple[list[int], list[float]]:
    """BM25's term-frequency part of ``text`` as a sparse vector ``(indices ascending, values)``:
    ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avg_terms))`` per distinct term (:data:`K1`,
    :data:`B`; ``len`` the text's number of terms). The inverse document frequency is the search
    engine's part: Qdrant's ``Modifier.IDF`` multiplies each query dimension by
    ``ln((N - n + 0.5) / (n + 0.5) + 1)``, Lucene's formula, so a dot product with
    :func:`sparse_query` is the BM25 score (with a fixed average length). Empty text: ``([], [])``."""
    terms = analyzer().terms(text)
    counts = Counter(term_index(t) for t in terms)
    norm = K1 * (1.0 - B + B * len(terms) / avg_terms)
    indices = sorted(counts)
    return indices, [counts[i] * (K1 + 1.0) / (counts[i] + norm) for i in indices]


def sparse_query(text: str) -> tuple[list[int], list[float]]:
    """A query as a sparse vector: weight 1 on each distinct term (see :func:`sparse_document`)."""
    indices = sorted({term_index(t) for t in analyzer().terms(text)})
    return indices, [1.0] * len(indices)


class Segment:
    """The postings of one file's chunks: built once, reused until that file changes.

    Flat arrays, one entry per (chunk, distinct term): ``term_ids`` (int32, ids in the index's
    vocabulary), ``rows`` (int32, the chunk's row in this segment) and ``tfs`` (float32, the term's
    count in the chunk); ``lengths`` (float32) is each chunk's number of terms.
    """

    __slots__ = ("ids", "lengths", "payloads", "rows", "term_ids", "tfs")

    def __init__(self, ids: Sequence[PointId], payloads: Sequence[Mapping[str, Any]], vocab: dict[str, int]) -> None:
        an = analyzer()
        self.ids = list(ids)
        self.payloads = list(payloads)
        lengths = np.zeros(len(self.ids), dtype=np.float32)
        term_ids: list[int] = []
        rows: list[int] = []
        tfs: list[int] = []
        for row, payload in enumerate(self.payloads):
            terms = an.terms(_indexed_text(payload))
            lengths[row] = len(terms)
            counts: dict[str, int] = {}
            for t in terms:
                counts[t] = counts.get(t, 0) + 1
            for t, n in counts.items():
                term_ids.append(vocab.setdefault(t, len(vocab)))
                rows.append(row)
                tfs.append(n)
        self.lengths = lengths
        self.term_ids = np.asarray(term_ids, dtype=np.int32)
        self.rows = np.asarray(rows, dtype=np.int32)
        self.tfs = np.asarray(tfs, dtype=np.float32)

    def __len__(self) -> int:
        return len(self.ids)


class _Merged:
    """All segments as one term-major posting list (``indptr`` over the vocabulary), rebuilt lazily
    after a change: a sort of every posting, O(P log P) numpy work for P postings."""

    def __init__(self, segments: Sequence[Segment], vocab_size: int) -> None:
        self.ids: list[PointId] = []
        self.payloads: list[Mapping[str, Any]] = []
        offsets = []
        for seg in segments:
            offsets.append(len(self.ids))
            self.ids.extend(seg.ids)
            self.payloads.extend(seg.payloads)
        self.n = len(self.ids)
        self.lengths = (np.concatenate([seg.lengths for seg in segments]) if segments
                        else np.zeros(0, np.float32))
        self.avg_len = float(self.lengths.mean()) if self.n and self.lengths.sum() else 1.0
        self.norm = K1 * (1.0 - B + B * self.lengths / self.avg_len)  # BM25's length normalisation
        terms = np.concatenate([seg.term_ids for seg in segments]) if segments else np.zeros(0, np.int32)
        rows = (np.concatenate([seg.rows.astype(np.int64) + off for seg, off in zip(segments, offsets)])
                if segments else np.zeros(0, np.int64))
        tfs = np.concatenate([seg.tfs for seg in segments]) if segments else np.zeros(0, np.float32)
        order = np.argsort(terms, kind="stable")
        self.rows = rows[order]
        self.tfs = tfs[order]
        self.indptr = np.zeros(vocab_size + 1, dtype=np.int64)
        np.cumsum(np.bincount(terms, minlength=vocab_size), out=self.indptr[1:])


class LexicalIndex:
    """BM25 over the chunk texts of one collection, kept as one :class:`Segment` per file.

    Scores follow Lucene's BM25 (k1 = 1.2, b = 0.75, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``,
    Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009), with
    ``N``, ``df`` and the average length taken over the whole collection, so a filtered search ranks
    its subset as the unfiltered one would. A change to one file re-analyses that file only
    (:meth:`refresh`); the merged posting list is re-sorted on the next search. A search costs work
    proportional to the postings of the query's terms.
    """

    def __init__(self) -> None:
        self.segments: dict[str, tuple[Any, Segment]] = {}
        self.vocab: dict[str, int] = {}
        self._merged: _Merged | None = None
        self.signature: Any = None
        """The caller's token for the state this index reflects (see ``Searcher.lexical_index``)."""

    @classmethod
    def from_points(cls, points: Iterable[Any], key: str = "file_id") -> LexicalIndex:
        """From :class:`~knowledge.vectorstore.base.Point` objects, one segment per ``payload[key]``."""
        groups: dict[str, tuple[list[PointId], list[Mapping[str, Any]]]] = {}
        for p in points:
            ids, payloads = groups.setdefault(str((p.payload or {}).get(key)), ([], []))
            ids.append(p.id)
            payloads.append(p.payload or {})
        index = cls()
        for group, (ids, payloads) in groups.items():
            index.segments[group] = (None, Segment(ids, payloads, index.vocab))
        return index

    def refresh(self, versions: Mapping[str, Any], load: Callable[[str], Iterable[Any]]) -> int:
        """Bring the index in line with ``versions`` (``{file_id: any comparable version}``): drop
        the segments of files that are gone, (re)build those whose version changed from the points
        ``load(file_id)`` yields. Returns the number of segments built."""
        built = 0
        for gone in set(self.segments) - set(versions):
            del self.segments[gone]
            self._merged = None
        for file_id, version in versions.items():
            held = self.segments.get(file_id)
            if held is not None and held[0] == version:
                continue
            ids, payloads = [], []
            for p in load(file_id):
                ids.append(p.id)
                payloads.append(p.payload or {})
            self.segments[file_id] = (version, Segment(ids, payloads, self.vocab))
            self._merged = None
            built += 1
        return built

    def __len__(self) -> int:
        return sum(len(seg) for _, seg in self.segments.values())

    def _view(self) -> _Merged:
        if self._merged is None:
            self._merged = _Merged([seg for _, (_, seg) in sorted(self.segments.items(), key=lambda kv: kv[0])],
                                   len(self.vocab))
        return self._merged

    def search(self, query: str, k: int, where: Where | None = None) -> list[LexicalHit]:
        """The ``k`` best BM25 matches of ``query`` among the points matching ``where`` (equality on
        payload fields), best first (ties: the earlier file and chunk); points sharing no term with
        the query are never returned."""
        if k < 1:
            return []
        term_ids = [self.vocab[t] for t in dict.fromkeys(analyzer().terms(query)) if t in self.vocab]
        m = self._view()
        if not term_ids or not m.n:
            return []
        scores = np.zeros(m.n, dtype=np.float32)
        norm = m.norm
        for t in term_ids:
            a, b = int(m.indptr[t]), int(m.indptr[t + 1])
            if a == b:
                continue
            rows, tf = m.rows[a:b], m.tfs[a:b]
            idf = float(np.log1p((m.n - (b - a) + 0.5) / ((b - a) + 0.5)))
            scores[rows] += idf * tf * (K1 + 1.0) / (tf + norm[rows])
        rows = np.flatnonzero(scores > 0)
        if where and len(rows):
            rows = rows[np.fromiter((matches(m.payloads[r], where) for r in rows), dtype=bool, count=len(rows))]
        if not len(rows):
            return []
        order = rows[np.lexsort((rows, -scores[rows]))][:k]
        return [LexicalHit(m.ids[r], float(scores[r]), m.payloads[r]) for r in order]


def _indexed_text(payload: Mapping[str, Any]) -> str:
    heading = payload.get("heading")
    text = str(payload.get("text") or "")
    return f"{heading}\n{text}" if heading else text


RankedId = TypeVar("RankedId", bound=Hashable)


def reciprocal_rank_fusion(*rankings: Sequence[RankedId], k: int = RRF_K,
                           weights: Sequence[float] | None = None) -> dict[RankedId, float]:
    """``{id: sum of w_r / (k + rank)}`` over the rankings (each best first, ranks from 1); an id
    absent from a ranking gets nothing from it. ``weights`` (default: 1 each) weigh the rankings, as
    weighted RRF does in Elasticsearch's and OpenSearch's hybrid retrievers. Higher is better; the
    maximum is ``sum(weights) / (k + 1)``."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError(f"{len(rankings)} rankings need {len(rankings)} weights, got {len(weights)}.")
    fused: dict[RankedId, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else float(weights[i])
        for rank, pid in enumerate(ranking, start=1):
            fused[pid] = fused.get(pid, 0.0) + w / (k + rank)
    return fused




# ---------------------------------------------------------------------------------------------
# The persisted index: tantivy
# ---------------------------------------------------------------------------------------------

LEXICAL_FORMAT = 1
"""Version of what :class:`DiskLexicon` writes (schema + analysis). An index of another version is
rebuilt from the store's chunks, so changing :class:`Analyzer` or the schema means bumping this."""

_STATE_ID = "\x00state"
_MAX_KEY_CHARS = 512  # longer string values are not indexed as filter keys (filtered afterwards)
_WRITER_HEAP = 15_000_000  # tantivy's minimum arena per indexing thread (bytes)


def encode_id(point_id: PointId) -> str:
    """The index term of a point id: ``"s" + id`` for a ``str``, ``"i" + digits`` for an ``int``."""
    return f"i{point_id}" if isinstance(point_id, int) else f"s{point_id}"


def decode_id(term: str) -> PointId:
    return int(term[1:]) if term[:1] == "i" else term[1:]


def _key_value(value: Any) -> str | None:
    """The filter-key spelling of a payload value, equal exactly when :func:`matches` says equal
    (``1`` and ``1.0`` alike, ``True`` and ``1`` not); ``None`` for values that are not indexed."""
    if value is None:
        return "n"
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not np.isfinite(value):
            return None
        if float(value).is_integer() and abs(value) < 2**53:
            return f"d{int(value)}"
        return f"d{float(value)!r}"
    if isinstance(value, str) and len(value) <= _MAX_KEY_CHARS:
        return f"s{value}"
    return None


def filter_keys(payload: Mapping[str, Any]) -> list[str]:
    """``"<field>\\x00<value>"`` for each scalar payload field but ``text``: the terms a ``where``
    filter is answered from."""
    out = []
    for key, value in payload.items():
        if key == "text":
            continue
        spelled = _key_value(value)
        if spelled is not None:
            out.append(f"{key}\x00{spelled}")
    return out


class DiskLexicon:
    """A persisted BM25 index of one collection's points (their ``heading`` and ``text`` payload
    fields), kept in a folder with `tantivy <https://github.com/quickwit-oss/tantivy-py>`_, a
    Lucene-style engine: immutable segments, deletes by term, atomic commits, memory-mapped reads.

    The text is analysed here (:class:`Analyzer`: NFKC, lower case, stop words, Snowball stems,
    CJK unigrams + bigrams) and handed to tantivy as whitespace-separated terms, so the index
    ranks with exactly today's terms. Scoring is tantivy's BM25, Lucene's formula and defaults
    (k1 = 1.2, b = 0.75, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``); scores are >= 0, higher
    is better. Scalar payload fields are indexed as filter keys so ``where`` filters narrow the
    search inside the engine.

    One document per point, keyed by :func:`encode_id`, plus one *state* document whose stored
    ``state`` string names what the index reflects (the owner writes e.g. ``"1:<incarnation>:<generation>"``
    with :meth:`Batch.set_state`): it is committed in the same tantivy commit as the changes, so
    the owner can tell an index that is behind (a crash between its own commit and this one) or
    foreign, and rebuild it.

    Not thread-safe for writing: the owner serialises writers (tantivy also refuses a second
    writer on a folder, across processes). Searching is safe from any thread.

    Raises:
        LexiconUnreadable (from :meth:`open`): the folder is missing, corrupt or of another version.
    """

    def __init__(self, path: Any) -> None:
        from pathlib import Path

        import tantivy

        self.path = Path(path)
        self._tantivy = tantivy
        self._schema = self._make_schema()
        self._index: Any = None

    def _make_schema(self) -> Any:
        sb = self._tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
        sb.add_text_field("body", tokenizer_name="whitespace", index_option="freq")
        sb.add_text_field("keys", tokenizer_name="raw", index_option="basic")
        sb.add_text_field("state", stored=True, tokenizer_name="raw", index_option="basic")
        return sb.build()

    # -- opening -----------------------------------------------------------------------------
    def exists(self) -> bool:
        return (self.path / "meta.json").is_file()

    def open(self) -> None:
        """Open the index in :attr:`path`. Raises :class:`LexiconUnreadable` when it is missing,
        unreadable, or was written with another schema."""
        if not self.exists():
            raise LexiconUnreadable("missing")
        try:
            self._index = self._tantivy.Index.open(str(self.path))
            self.state()  # reads the state document: fails on another schema or a corrupt segment
        except Exception as exc:  # tantivy raises ValueError / OSError for corrupt or foreign files
            self._index = None
            raise LexiconUnreadable(f"unreadable ({exc})") from None

    def create(self) -> None:
        """Create an empty index in :attr:`path`, replacing whatever is there."""
        import shutil

        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)
        self._index = self._tantivy.Index(self._schema, path=str(self.path))

    def reload(self) -> None:
        """See the latest commit (another process's or this one's)."""
        if self._index is not None:
            self._index.reload()

    @property
    def is_open(self) -> bool:
        return self._index is not None

    def state(self) -> str | None:
        """The state string of the last commit (``None``: never set)."""
        searcher = self._index.searcher()
        q = self._tantivy.Query.term_query(self._schema, "id", _STATE_ID)
        hits = searcher.search(q, 1).hits
        if not hits:
            return None
        values = searcher.doc(hits[0][1]).to_dict().get("state") or [None]
        return values[0]

    def num_docs(self) -> int:
        """Documents in the index, the state document included."""
        return int(self._index.searcher().num_docs)

    # -- writing -----------------------------------------------------------------------------
    def batch(self) -> Batch:
        """A write batch; nothing is visible or durable until :meth:`Batch.commit`."""
        return Batch(self)

    # -- searching ---------------------------------------------------------------------------
    def search(self, terms: Sequence[str], limit: int, where: Mapping[str, Any] | None = None
               ) -> list[tuple[PointId, float]]:
        """The ``limit`` best ``(point id, BM25 score)`` for the analysed query ``terms`` among
        the points whose filter keys match every indexable ``where`` item, best first. Points
        sharing no term with the query are never returned. The caller checks the ``where`` items
        that are not indexable (``text``, long strings) on the payloads."""
        t = self._tantivy
        unique = list(dict.fromkeys(terms))
        if not unique or limit < 1:
            return []
        text = t.Query.boolean_query([(t.Occur.Should, t.Query.term_query(self._schema, "body", term))
                                      for term in unique])
        clauses = [(t.Occur.Must, text)]
        for key, value in (where or {}).items():
            spelled = _key_value(value)
            if key != "text" and spelled is not None:
                keyq = t.Query.term_query(self._schema, "keys", f"{key}\x00{spelled}")
                clauses.append((t.Occur.Must, t.Query.const_score_query(keyq, 0.0)))
        query = clauses[0][1] if len(clauses) == 1 else t.Query.boolean_query(clauses)
        searcher = self._index.searcher()
        out = []
        for score, address in searcher.search(query, limit).hits:
            if score <= 0:
                continue
            ids = searcher.doc(address).to_dict().get("id")
            if ids:
                out.append((decode_id(ids[0]), float(score)))
        return out


class Batch:
    """The pending changes of one :class:`DiskLexicon` write (a tantivy ``IndexWriter``)."""

    def __init__(self, lexicon: DiskLexicon) -> None:
        self._lex = lexicon
        self._t = lexicon._tantivy
        self._writer = lexicon._index.writer(heap_size=_WRITER_HEAP, num_threads=1)
        self._analyzer = analyzer()

    def delete(self, ids: Iterable[PointId]) -> None:
        for pid in ids:
            self._writer.delete_documents_by_term("id", encode_id(pid))

    def add(self, ids: Sequence[PointId], payloads: Sequence[Mapping[str, Any]]) -> None:
        """Index these points, replacing any earlier version of the same ids."""
        terms = self._analyzer.terms
        for pid, payload in zip(ids, payloads):
            key = encode_id(pid)
            self._writer.delete_documents_by_term("id", key)
            self._writer.add_document(self._t.Document(
                id=key, body=" ".join(terms(_indexed_text(payload or {}))), keys=filter_keys(payload or {})))

    def clear(self) -> None:
        self._writer.delete_all_documents()

    def set_state(self, state: str) -> None:
        self._writer.delete_documents_by_term("id", _STATE_ID)
        self._writer.add_document(self._t.Document(id=_STATE_ID, state=state))

    def commit(self) -> None:
        """Make the batch durable and visible (tantivy's atomic commit), then release the writer."""
        self._writer.commit()
        self.close()
        self._lex.reload()

    def close(self) -> None:
        """Drop the writer (uncommitted changes are discarded; tantivy's writer lock is released)."""
        self._writer = None  # dropping tantivy's writer discards what was not committed


class LexiconUnreadable(Exception):
    """The persisted lexical index is missing, corrupt or of another version (it is rebuilt)."""


__all__ = [
    "LEXICAL_FORMAT",
    "RRF_K",
    "STOP_WORDS",
    "Analyzer",
    "Batch",
    "DiskLexicon",
    "LexicalHit",
    "LexicalIndex",
    "LexiconUnreadable",
    "Segment",
    "analyzer",
    "filter_keys",
    "reciprocal_rank_fusion",
]
