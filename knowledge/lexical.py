"""Lexical retrieval (BM25) over a store's chunk text, and its fusion with vector search.

Dense embeddings of a small model blur exact words: a question naming ``panic!`` and ``Result``
finds chunks *about* errors, not necessarily the one that contrasts the two. Hybrid search runs a
BM25 ranking next to the vector ranking and merges the two by reciprocal rank fusion, as Elastic,
OpenSearch, Qdrant and Weaviate do for their hybrid modes.

- BM25: the Lucene variant (k1 = 1.5, b = 0.75) as implemented by the ``bm25s`` package
  (Lù, "BM25S: Orders of magnitude faster lexical search via eager sparse scoring", 2024).
- Tokens: NFKC-folded, lower-cased runs of letters and digits; English stop words removed (Lucene's list of 33,
  ``bm25s.stopwords.STOPWORDS_EN``); Snowball English stemming (``py_rust_stemmers``), so ``iterating`` matches
  ``iterate``. Chinese, Japanese and Korean text has no spaces: each CJK character is a token and so
  is each pair of neighbouring ones (the usual unigram + bigram scheme of Lucene's CJK analyzer).
- Fusion: reciprocal rank fusion, ``score(d) = sum over rankings r of 1 / (60 + rank_r(d))`` with
  1-based ranks (Cormack, Clarke and Büttcher, "Reciprocal rank fusion outperforms Condorcet and
  individual rank learning methods", SIGIR 2009; 60 is their constant).

An index is built from the points of a collection (their ``text`` and ``heading`` payload fields) and
is immutable: the caller rebuilds it when the collection changes (see
:class:`knowledge.workbench.Workbench`, which keys it by a fingerprint of the store).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .vectorstore.base import PointId, Where, matches

RRF_K = 60
"""The rank constant of reciprocal rank fusion (Cormack et al. 2009)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def _stemmer():
    # The Snowball stemmers compiled from Rust; fastembed depends on this package already.
    from py_rust_stemmers import SnowballStemmer

    return SnowballStemmer("english")


class Analyzer:
    """Text to BM25 terms (see the module docstring for the rules).

    ``terms("Iterating over Vectors!") -> ["iter", "vector"]``.
    """

    def __init__(self) -> None:
        self._stop = _stopwords()
        self._stem = _stemmer().stem_words

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


class LexicalIndex:
    """BM25 over the chunk texts of one collection, filtered like the vector search.

    Build with :meth:`from_points`; :meth:`search` answers in milliseconds for tens of thousands of
    chunks (sparse scoring, no Python loop over documents except for a ``where`` filter).
    """

    def __init__(self, ids: Sequence[PointId], payloads: Sequence[Mapping[str, Any]]) -> None:
        import bm25s

        self.ids = list(ids)
        self.payloads = list(payloads)
        an = analyzer()
        corpus = [an.terms(_indexed_text(p)) for p in self.payloads]
        self._empty = not any(corpus)
        self._bm25 = bm25s.BM25()  # Lucene BM25, k1=1.5, b=0.75
        if not self._empty:
            self._bm25.index(corpus, show_progress=False)

    @classmethod
    def from_points(cls, points: Iterable[Any]) -> "LexicalIndex":
        """From :class:`~knowledge.vectorstore.base.Point` objects (vectors are not needed)."""
        ids, payloads = [], []
        for p in points:
            ids.append(p.id)
            payloads.append(p.payload or {})
        return cls(ids, payloads)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: str, k: int, where: Where | None = None) -> list[LexicalHit]:
        """The ``k`` best BM25 matches of ``query`` among the points matching ``where`` (equality on
        payload fields), best first; points sharing no term with the query are never returned."""
        terms = analyzer().terms(query)
        vocab = getattr(self._bm25, "vocab_dict", None) or {}
        terms = [t for t in terms if t in vocab]
        if self._empty or not terms or not self.ids or k < 1:
            return []
        mask = None
        if where:
            mask = np.fromiter((matches(p, where) for p in self.payloads), dtype=np.float32,
                               count=len(self.payloads))
            if not mask.any():
                return []
        k = min(k, len(self.ids))
        docs, scores = self._bm25.retrieve([terms], k=k, show_progress=False, weight_mask=mask,
                                           n_threads=1)
        out = []
        for i, s in zip(docs[0], scores[0]):
            if s <= 0:
                break
            out.append(LexicalHit(self.ids[int(i)], float(s), self.payloads[int(i)]))
        return out


def _indexed_text(payload: Mapping[str, Any]) -> str:
    heading = payload.get("heading")
    text = str(payload.get("text") or "")
    return f"{heading}\n{text}" if heading else text


def reciprocal_rank_fusion(*rankings: Sequence[PointId], k: int = RRF_K) -> dict[PointId, float]:
    """``{id: sum of 1 / (k + rank)}`` over the rankings (each best first, ranks from 1); an id
    absent from a ranking gets nothing from it. Higher is better; the maximum is ``len(rankings) /
    (k + 1)``."""
    fused: dict[PointId, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking, start=1):
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (k + rank)
    return fused


__all__ = ["Analyzer", "LexicalHit", "LexicalIndex", "RRF_K", "analyzer", "reciprocal_rank_fusion"]
