"""What the backends store for lexical (BM25) search: sparse term vectors and the tantivy index.

* :func:`sparse_document` / :func:`sparse_query` -- BM25's term-frequency part as a sparse vector
  (qdrant keeps it beside the dense vector and applies the IDF itself).
* :class:`DiskLexicon` / :class:`Batch` -- the persisted BM25 index of a memory-backend store
  (tantivy), written in the same write as the vectors; :data:`LEXICAL_FORMAT` versions it.
* :func:`indexed_text` -- the text every backend ranks a point by (pgvector keeps the same terms in
  PostgreSQL).

Terms come from :mod:`knowledge.text.analysis`; the in-process index and rank fusion are the
service's (:mod:`knowledge.service.fusion`). See ``docs/search.md``.
"""

from __future__ import annotations

import shutil
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from knowledge.text.analysis import analyzer
from knowledge.vectorstore.base import PointId

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


def indexed_text(payload: Mapping[str, Any]) -> str:
    """The text a point is ranked by: its ``heading`` (when set), a newline, then its ``text``."""
    heading = payload.get("heading")
    text = str(payload.get("text") or "")
    return f"{heading}\n{text}" if heading else text


# -- the persisted index: tantivy ------------------------------------------------------------

LEXICAL_FORMAT = 2
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
        import tantivy  # noqa: PLC0415 - heavy (Rust extension): only for stores that keep an index

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
        shutil.rmtree(self.path, ignore_errors=True)
        # A file another process's index writer (its merge thread) wrote while rmtree ran can keep the
        # folder: the index is still created there, over it, once its meta.json is gone (tantivy
        # garbage-collects files no commit names).
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "meta.json").unlink(missing_ok=True)
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
    def search(
        self, terms: Sequence[str], limit: int, where: Mapping[str, Any] | None = None
    ) -> list[tuple[PointId, float]]:
        """The ``limit`` best ``(point id, BM25 score)`` for the analysed query ``terms`` among
        the points whose filter keys match every indexable ``where`` item, best first. Points
        sharing no term with the query are never returned. The caller checks the ``where`` items
        that are not indexable (``text``, long strings) on the payloads."""
        t = self._tantivy
        unique = list(dict.fromkeys(terms))
        if not unique or limit < 1:
            return []
        text = t.Query.boolean_query([(t.Occur.Should, t.Query.term_query(self._schema, "body", term)) for term in unique])
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
            self._writer.add_document(
                self._t.Document(id=key, body=" ".join(terms(indexed_text(payload or {}))), keys=filter_keys(payload or {}))
            )

    def clear(self) -> None:
        self._writer.delete_all_documents()

    def set_state(self, state: str) -> None:
        self._writer.delete_documents_by_term("id", _STATE_ID)
        self._writer.add_document(self._t.Document(id=_STATE_ID, state=state))

    def commit(self) -> None:
        """Make the batch durable and visible (tantivy's atomic commit), let the merges that commit
        started finish, then release the writer and see the result.

        Every commit makes a segment; tantivy's merge policy (log-merge: 8 segments of a size become
        one) merges them in the writer's threads *after* the commit, so a writer dropped at once
        never merged: a store written one file at a time kept one segment per file, and each commit
        and reload cost grew with their number (69 ms per commit at 1,500 files, 5 files/s at 2,500;
        docs/benchmarks.md, "Sources"). Waiting for the merges keeps the segments to a logarithmic
        few (tantivy ``IndexWriter::wait_merging_threads``)."""
        self._writer.commit()
        writer, self._writer = self._writer, None
        writer.wait_merging_threads()  # consumes the writer: its lock is released after the merges
        self._lex.reload()

    def close(self) -> None:
        """Drop the writer (uncommitted changes are discarded; tantivy's writer lock is released)."""
        self._writer = None  # dropping tantivy's writer discards what was not committed


class LexiconUnreadable(Exception):
    """The persisted lexical index is missing, corrupt or of another version (it is rebuilt)."""


__all__ = [
    "K1",
    "LEXICAL_FORMAT",
    "SPARSE_AVG_TERMS",
    "B",
    "Batch",
    "DiskLexicon",
    "LexiconUnreadable",
    "decode_id",
    "encode_id",
    "filter_keys",
    "indexed_text",
    "sparse_document",
    "sparse_query",
    "term_index",
]
