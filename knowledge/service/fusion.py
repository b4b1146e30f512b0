"""Hybrid search's service half: BM25 in process memory, and reciprocal rank fusion.

* :class:`LexicalIndex` -- BM25 over a collection's chunk texts, one :class:`Segment` per file, for
  backends without a lexical index of their own (qdrant physical collections made before sparse
  vectors, plugins): :class:`knowledge.service.search.Searcher` refreshes it from the store's files and
  their versions before each search, so it is never stale.
* :func:`reciprocal_rank_fusion` -- ``score(d) = sum over rankings r of w_r / (60 + rank_r(d))``
  with 1-based ranks (Cormack, Clarke and Buttcher, "Reciprocal rank fusion outperforms Condorcet
  and individual rank learning methods", SIGIR 2009; 60 is their constant), as the hybrid modes of
  Elastic, OpenSearch, Qdrant and Weaviate merge a BM25 and a vector ranking.

No storage here (as qdrant-client keeps fusion in ``hybrid/fusion.py``, away from ``local/``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from knowledge.text.analysis import analyzer
from knowledge.vectorstore.base import PointId, Where, matches
from knowledge.vectorstore.lexical import K1, B, indexed_text

RRF_K = 60
"""The rank constant of reciprocal rank fusion (Cormack et al. 2009)."""


@dataclass(frozen=True, slots=True)
class LexicalHit:
    """A BM25 match: the point's id, its payload and its BM25 score (>= 0, higher is better)."""

    id: PointId
    score: float
    payload: Mapping[str, Any]


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
            terms = an.terms(indexed_text(payload))
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
        self.lengths = np.concatenate([seg.lengths for seg in segments]) if segments else np.zeros(0, np.float32)
        self.avg_len = float(self.lengths.mean()) if self.n and self.lengths.sum() else 1.0
        self.norm = K1 * (1.0 - B + B * self.lengths / self.avg_len)  # BM25's length normalisation
        terms = np.concatenate([seg.term_ids for seg in segments]) if segments else np.zeros(0, np.int32)
        rows = (
            np.concatenate([seg.rows.astype(np.int64) + off for seg, off in zip(segments, offsets)])
            if segments
            else np.zeros(0, np.int64)
        )
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
            self._merged = _Merged(
                [seg for _, (_, seg) in sorted(self.segments.items(), key=lambda kv: kv[0])], len(self.vocab)
            )
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


RankedId = TypeVar("RankedId", bound=Hashable)


def reciprocal_rank_fusion(
    *rankings: Sequence[RankedId], k: int = RRF_K, weights: Sequence[float] | None = None
) -> dict[RankedId, float]:
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


__all__ = ["RRF_K", "LexicalHit", "LexicalIndex", "Segment", "reciprocal_rank_fusion"]
