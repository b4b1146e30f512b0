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

An index is built from the points of a collection (their ``text`` and ``heading`` payload fields);
:class:`knowledge.workbench.Workbench` refreshes it before each search from the store's files and
their versions, so it is never stale.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .vectorstore.base import PointId, Where, matches

RRF_K = 60
"""The rank constant of reciprocal rank fusion (Cormack et al. 2009)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
"""English stop words: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words)."""


def _stemmer():
    # The Snowball stemmers compiled from Rust; fastembed depends on this package already.
    from py_rust_stemmers import SnowballStemmer

    return SnowballStemmer("english")


class Analyzer:
    """Text to BM25 terms (see the module docstring for the rules).

    ``terms("Iterating over Vectors!") -> ["iter", "vector"]``.
    """

    def __init__(self) -> None:
        self._stop = STOP_WORDS
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


K1, B = 1.2, 0.75
"""BM25's term-frequency saturation and length normalisation, Lucene's defaults (``BM25Similarity``)."""


class Segment:
    """The postings of one file's chunks: built once, reused until that file changes.

    ``postings[term] = (rows, tf)``: int32 row numbers and float32 term frequencies; ``lengths``:
    each chunk's number of terms.
    """

    __slots__ = ("ids", "payloads", "lengths", "postings")

    def __init__(self, ids: Sequence[PointId], payloads: Sequence[Mapping[str, Any]]) -> None:
        an = analyzer()
        self.ids = list(ids)
        self.payloads = list(payloads)
        counts: dict[str, dict[int, int]] = {}
        lengths = np.zeros(len(self.ids), dtype=np.float32)
        for row, payload in enumerate(self.payloads):
            terms = an.terms(_indexed_text(payload))
            lengths[row] = len(terms)
            for t in terms:
                per = counts.setdefault(t, {})
                per[row] = per.get(row, 0) + 1
        self.lengths = lengths
        self.postings = {t: (np.fromiter(per.keys(), np.int32, len(per)),
                             np.fromiter(per.values(), np.float32, len(per)))
                         for t, per in counts.items()}

    def __len__(self) -> int:
        return len(self.ids)


class LexicalIndex:
    """BM25 over the chunk texts of one collection, kept as one :class:`Segment` per file.

    Scores follow Lucene's BM25 (k1 = 1.2, b = 0.75, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``,
    Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009), with
    ``N``, ``df`` and the average length taken over the whole collection, so a filtered search ranks
    its subset as the unfiltered one would. A change to one file rebuilds that file's segment only
    (:meth:`refresh`); searching costs work proportional to the postings of the query's terms.
    """

    def __init__(self) -> None:
        self.segments: dict[str, tuple[Any, Segment]] = {}

    @classmethod
    def from_points(cls, points: Iterable[Any], key: str = "file_id") -> "LexicalIndex":
        """From :class:`~knowledge.vectorstore.base.Point` objects, one segment per ``payload[key]``."""
        groups: dict[str, tuple[list[PointId], list[Mapping[str, Any]]]] = {}
        for p in points:
            ids, payloads = groups.setdefault(str((p.payload or {}).get(key)), ([], []))
            ids.append(p.id)
            payloads.append(p.payload or {})
        index = cls()
        for group, (ids, payloads) in groups.items():
            index.segments[group] = (None, Segment(ids, payloads))
        return index

    def refresh(self, versions: Mapping[str, Any], load: Callable[[str], Iterable[Any]]) -> int:
        """Bring the index in line with ``versions`` (``{file_id: any comparable version}``): drop
        the segments of files that are gone, (re)build those whose version changed from the points
        ``load(file_id)`` yields. Returns the number of segments built."""
        built = 0
        for gone in set(self.segments) - set(versions):
            del self.segments[gone]
        for file_id, version in versions.items():
            held = self.segments.get(file_id)
            if held is not None and held[0] == version:
                continue
            ids, payloads = [], []
            for p in load(file_id):
                ids.append(p.id)
                payloads.append(p.payload or {})
            self.segments[file_id] = (version, Segment(ids, payloads))
            built += 1
        return built

    def __len__(self) -> int:
        return sum(len(seg) for _, seg in self.segments.values())

    def search(self, query: str, k: int, where: Where | None = None) -> list[LexicalHit]:
        """The ``k`` best BM25 matches of ``query`` among the points matching ``where`` (equality on
        payload fields), best first (ties: the earlier file and chunk); points sharing no term with
        the query are never returned."""
        terms = list(dict.fromkeys(analyzer().terms(query)))
        segments = [seg for _, seg in self.segments.values() if len(seg)]
        if not terms or not segments or k < 1:
            return []
        n_docs = sum(len(seg) for seg in segments)
        avg_len = float(sum(float(seg.lengths.sum()) for seg in segments)) / n_docs or 1.0
        df = {t: sum(len(seg.postings[t][0]) for seg in segments if t in seg.postings) for t in terms}
        idf = {t: float(np.log1p((n_docs - d + 0.5) / (d + 0.5))) for t, d in df.items() if d}
        if not idf:
            return []
        only = where.get("file_id") if where else None
        scored: list[tuple[np.ndarray, np.ndarray, Segment]] = []
        for seg in segments:
            if only is not None and seg.payloads and seg.payloads[0].get("file_id") != only:
                continue
            present = [t for t in idf if t in seg.postings]
            if not present:
                continue
            scores = np.zeros(len(seg), dtype=np.float32)
            norm = K1 * (1.0 - B + B * seg.lengths / avg_len)
            for t in present:
                rows, tf = seg.postings[t]
                scores[rows] += idf[t] * tf * (K1 + 1.0) / (tf + norm[rows])
            rows = np.flatnonzero(scores > 0)
            if where:
                rows = np.array([r for r in rows if matches(seg.payloads[r], where)], dtype=np.int64)
            if len(rows):
                scored.append((rows, scores[rows], seg))
        if not scored:
            return []
        all_scores = np.concatenate([sc for _, sc, _ in scored])
        owners = np.concatenate([np.full(len(r), i) for i, (r, _, _) in enumerate(scored)])
        rows_all = np.concatenate([r for r, _, _ in scored])
        order = np.lexsort((rows_all, owners, -all_scores))[:k]
        return [LexicalHit(scored[owners[j]][2].ids[rows_all[j]], float(all_scores[j]),
                           scored[owners[j]][2].payloads[rows_all[j]]) for j in order]


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


__all__ = ["STOP_WORDS", "Analyzer", "LexicalHit", "LexicalIndex", "Segment", "RRF_K", "analyzer", "reciprocal_rank_fusion"]
