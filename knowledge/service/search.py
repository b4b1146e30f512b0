"""Search: a query's best chunks in one store, or in several merged, by meaning, words or both.

``Searcher`` embeds the query with the store's model, ranks the store's chunks by vector score, by
BM25 (the backend's own lexical index, else an in-process one) or by both merged by reciprocal rank
fusion (see :mod:`knowledge.service.fusion`), applies the score threshold and folds the ranking into
passages (:func:`knowledge.service.passages.merge_passages`: repeated text once, overlapping or
touching chunks of a file merged, setting ``search.merge_overlapping``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast, get_args

import numpy as np

from knowledge.catalog import StoreRecord
from knowledge.errors import InvalidArgument, KnowledgeError, StoreNotFound
from knowledge.service.fusion import LexicalHit, LexicalIndex, reciprocal_rank_fusion
from knowledge.service.passages import merge_passages
from knowledge.service.rerank import rerank as rerank_hits
from knowledge.service.stores import Stores
from knowledge.service.yielding import SearchMark
from knowledge.telemetry import EMBEDDED_TEXTS, EMBEDDING_SECONDS, SEARCH_SECONDS, span
from knowledge.text.analysis import analyzer
from knowledge.vectorstore.base import Collection, as_vector, check_where
from knowledge.vectorstore.scoring import higher_is_better, passes_threshold, vector_scores
from knowledge.vectorstore.store import Hit, hit_from_payload
from knowledge.vocabulary import search_mode

log = logging.getLogger(__name__)

SearchMode = Literal["hybrid", "vector", "lexical"]
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)


@dataclass(frozen=True, slots=True)
class StoreHit:
    """A hit of a search over several stores: the ``store`` it came from, the ``hit`` as that store's
    own search returned it (scores unchanged), ``fused``, the reciprocal-rank-fusion score of its
    rank in its store's list (higher is better; the order of the merged list), and ``distance``, the
    store's distance (``"cosine"``, ...: the direction of ``hit.score``)."""

    store: str
    hit: Hit
    fused: float
    distance: str = "cosine"


@dataclass(frozen=True, slots=True)
class MultiSearch:
    """The merged hits of :meth:`Workbench.search_stores`, best first, and ``failed``: the stores that
    could not be searched, each with the reason (a backend down, a store deleted meanwhile)."""

    hits: list[StoreHit]
    failed: dict[str, str]


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One search of one store (:meth:`Searcher.search`).

    ``hits``: the best ``k`` passing the threshold, best first, no two with identical text (as the
    ``fold`` given folded them); ``top``: with ``top=n``, the best ``n`` without the threshold (for a
    score distribution), else ``[]``; ``notes``: what ``fold`` noted per hit (``{}`` by default);
    ``vector``: the query's embedding, ``(d,)`` float32; ``distance``: the store's (from the
    catalog), which gives the score direction; ``embed_ms``/``search_ms``: with ``timings``, the
    wall time in milliseconds of embedding the query and of ranking + folding, else 0.
    """

    store: str
    query: str
    mode: str
    distance: str
    hits: list[Hit]
    top: list[Hit]
    notes: dict[str, Any]
    vector: np.ndarray
    embed_ms: float = 0.0
    search_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        return self.embed_ms + self.search_ms


Fold = Callable[[Sequence[Hit], int], "tuple[list[Hit], dict[str, Any]]"]
"""``fold(ranking, k) -> (shown hits, notes)``: how a ranking becomes the ``k`` hits shown."""


@dataclass(frozen=True, slots=True)
class Playground:
    """The search playground's knobs of a :class:`SearchRequest` (no other surface needs them).

    ``fold`` replaces the default folding (:func:`~knowledge.service.passages.merge_passages`);
    ``top=n`` also folds the best ``n`` without the threshold into ``SearchResult.top`` (for a score
    distribution; the ranking then fetches ``max(k, n)`` at first and at most 8 times that);
    ``words_pass`` lets a hit holding every word of the query (:func:`holds_every_query_word`) pass
    the threshold whatever its vector score; ``timings`` measures ``SearchResult.embed_ms`` and
    ``search_ms`` (milliseconds)."""

    top: int = 0
    fold: Fold | None = None
    words_pass: bool = False
    timings: bool = False


PLAIN = Playground()
"""No playground knobs: the default folding, no ``top``, the threshold for every hit, no timings."""


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One search of one store (:meth:`Searcher.search`), in the style of qdrant-client's
    ``QueryRequest``: what every caller may say, and the rarer knobs grouped apart.

    ``query``: the text (not blank). ``k``: how many passages, at least 1.

    ``where`` filters on payload fields by equality before ranking (e.g. ``{"file_id": ...}``).
    ``score_threshold`` drops hits whose vector score (``Hit.score``: cosine similarity in [-1, 1],
    higher is better, for the default distance) does not pass it, in the store's score direction.
    ``max_per_file`` keeps at most that many chunks of any one file (``1``: the ``k`` best files,
    each by its best chunk).

    ``mode`` (one of :data:`SEARCH_MODES`, else ``InvalidArgument``; default: setting ``search.mode``,
    ``"hybrid"``): ``"vector"`` ranks by the embedding's
    score alone; ``"lexical"`` by BM25; ``"hybrid"`` merges the best ``max(search.candidates, k)``
    of both rankings by reciprocal rank fusion (:mod:`knowledge.service.fusion`), so exact words
    (``panic!``, a name, an error code) count as much as meaning; hybrid hits also carry
    ``lexical_score`` and ``fused_score`` (the order).

    ``rerank`` (default: the store's template's ``rerank``, else setting ``search.rerank``)
    reorders the ranking's best ``rerank_candidates`` (template, else ``search.rerank_candidates``)
    by :func:`knowledge.service.rerank.rerank` before the folding; the hits then carry
    ``rerank_score`` and are in its order. ``merge`` (default: setting
    ``search.merge_overlapping``) merges overlapping or touching chunks of a file into one passage.

    ``keep`` filters the ranked hits by a predicate the backend cannot run (the REST API's
    attribute filter, :class:`knowledge.server.filters.SearchFilter`): the ranking is widened until
    ``k`` hits pass it or the store has no more (8 times as many each round while it drops most of
    them), in the same loop as the threshold, so the query is embedded once. ``playground``: the
    search playground's knobs (:class:`Playground`), ``None`` for every other caller.
    """

    query: str
    k: int = 5
    where: Mapping[str, Any] | None = None
    score_threshold: float | None = None
    max_per_file: int | None = None
    mode: str | None = None
    rerank: bool | None = None
    merge: bool | None = None
    keep: Callable[[Hit], bool] | None = None
    playground: Playground | None = None


@dataclass(slots=True)
class _HeldIndex:
    collection: str
    index: LexicalIndex
    lock: threading.Lock
    token: Any = None  # Stores.token(store) when the index was last found up to date


def search_request(
    query: str | SearchRequest,
    k: int = 5,
    *,
    where: Mapping[str, Any] | None = None,
    score_threshold: float | None = None,
    max_per_file: int | None = None,
    mode: str | None = None,
    rerank: bool | None = None,
    merge: bool | None = None,
) -> SearchRequest:
    """``query`` when it is a :class:`SearchRequest`, else one built of the text and the common
    options (how :meth:`Workbench.search` takes both a request and plain keywords).

    Raises:
        InvalidArgument: a request given together with options (they belong in the request).
    """
    if not isinstance(query, SearchRequest):
        return SearchRequest(query, k, where, score_threshold, max_per_file, mode, rerank, merge)
    if (k, where, score_threshold, max_per_file, mode, rerank, merge) != (5, None, None, None, None, None, None):
        raise InvalidArgument("Give the search's options in its SearchRequest, not beside it.")
    return query


class Searcher:
    """Searches stores: one (:meth:`search`), several merged (:meth:`search_stores`), or the raw
    ranking (:meth:`rank`). Keeps the in-process BM25 indexes of backends without their own.

    A search resolves its store's record once (kept by :class:`~knowledge.service.stores.Stores` while the
    catalog is unchanged) and takes the distance and model from it: a warm vector search is one
    backend call (``Collection.search``), a hybrid one at most three (``lexical_search``,
    ``search``, and ``retrieve`` for the vectors of words-only hits).

    Args:
        stores: the stores (records, backends).
        embedder: ``embedder(model_name) -> Embedder`` (the workbench's).

    Thread-safe.
    """

    def __init__(self, stores: Stores, embedder: Callable[[str], Any]) -> None:
        self.stores = stores
        self.settings = stores.settings
        self.catalog = stores.catalog
        self.embedder = embedder
        self._lock = threading.Lock()
        self._lexical: dict[str, _HeldIndex] = {}
        self.mark = SearchMark(self.settings.data_root)  # the app's worker process yields to searches

    def search(self, store: str, request: SearchRequest) -> SearchResult:
        """The ``request.k`` best passages of ``store`` for ``request.query`` (text), best first,
        never two with identical text.

        A passage is a chunk, or -- with ``merge`` (default: setting ``search.merge_overlapping``,
        true) -- the chunks of one file whose character spans overlap or touch merged into one hit
        (:func:`knowledge.service.passages.merge_passages`: the best rank's scores, the union span
        and text, the first page and heading, ``Hit.chunks`` the chunks joined); the ranking is
        widened until ``k`` passages are found or the store has no more. The query is embedded
        once; every option is a field of :class:`SearchRequest` (described there).

        Raises:
            StoreNotFound; InvalidArgument (blank query, ``k`` or ``max_per_file`` below 1, unknown
            mode, bad filter); EmbeddingUnavailable; DimensionMismatch.
        """
        query, k, max_per_file = request.query, request.k, request.max_per_file
        view = request.playground or PLAIN
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("Type a query to search for.")
        if max_per_file is not None and max_per_file < 1:
            raise InvalidArgument(f"max_per_file must be at least 1, got {max_per_file}.")
        mode = cast("SearchMode", search_mode(request.mode or self.settings.search.mode))
        self.mark.touch()
        record = self.stores.get(store)
        started = time.perf_counter()
        with span("search", store=store, ranking=mode, backend=record.backend, k=k):
            result = self._search(store, record, request, mode, view)
        SEARCH_SECONDS.labels(mode, record.backend).observe(time.perf_counter() - started)
        return result

    def _search(
        self, store: str, record: StoreRecord, request: SearchRequest, mode: SearchMode, view: Playground
    ) -> SearchResult:
        """:meth:`search` once the request is checked and the store's record found."""
        query, k, max_per_file, score_threshold, keep = (
            request.query,
            request.k,
            request.max_per_file,
            request.score_threshold,
            request.keep,
        )
        top, fold, words_pass, timings = view.top, view.fold, view.words_pass, view.timings
        where = check_where(dict(request.where) if request.where is not None else None)
        merging = self.settings.search.merge_overlapping if request.merge is None else request.merge
        fold = fold or (lambda found, n: merge_passages(found, n, merge=merging, max_per_file=max_per_file))
        t0 = time.perf_counter() if timings else 0.0
        with span("search embedding", model=record.embedding_model):
            e0 = time.perf_counter()
            vector = np.asarray(self.embedder(record.embedding_model).embed_query(query), dtype=np.float32)
            EMBEDDING_SECONDS.labels("query").inc(time.perf_counter() - e0)
            EMBEDDED_TEXTS.labels("query").inc()
        t1 = time.perf_counter() if timings else 0.0
        distance = record.distance
        want = max(k, top)
        fetch = want if max_per_file is None else want * 4
        reranking, n_rerank = self.rerank_of(record, request.rerank)
        if reranking:
            fetch = max(fetch, n_rerank)
        while True:
            with span("search ranking", ranking=mode, fetch=fetch, rerank=reranking):
                found, exhausted = self.rank(store, query, vector, fetch, where=where, mode=mode, record=record)
                if reranking:
                    found = rerank_hits(
                        query,
                        found,
                        self.embedder(record.embedding_model).embed_documents,
                        n_rerank,
                        higher_is_better=higher_is_better(distance),
                        rank_constant=self.settings.search.rank_constant,
                    )
            ranked = len(found)
            if keep is not None:
                found = [h for h in found if keep(h)]
            passing = [
                h
                for h in found
                if passes_threshold(h.score, score_threshold, distance) or (words_pass and holds_every_query_word(h, query))
            ]
            hits, notes = fold(passing, k)
            tops, top_notes = fold(found, top) if top else ([], {})
            if exhausted:
                break
            if top:  # the threshold ends the list: fetching more brings nothing shown
                cut = len(passing) < len(found)
                if fetch >= 8 * want or (len(tops) >= top and (len(hits) >= k or cut)):
                    break
            elif len(hits) >= k:
                break
            fetch *= 8 if 2 * len(found) < ranked else 2  # ``keep`` dropped most of them: widen faster
        t2 = time.perf_counter() if timings else 0.0
        return SearchResult(
            store, query, mode, distance, hits, tops, {**top_notes, **notes}, vector, (t1 - t0) * 1000, (t2 - t1) * 1000
        )

    def rerank_of(self, record: StoreRecord, rerank: bool | None = None) -> tuple[bool, int]:
        """Whether searches of ``record``'s store rerank, and how many candidates: ``rerank`` when
        given, else its template's ``rerank``, else the setting ``search.rerank``; the count from the
        template's ``rerank_candidates``, else ``search.rerank_candidates``."""
        tpl = None
        with contextlib.suppress(KnowledgeError):  # the template was deleted since: the settings decide
            tpl = self.stores.template_of(record)
        on = (
            rerank
            if rerank is not None
            else (tpl.rerank if tpl is not None and tpl.rerank is not None else self.settings.search.rerank)
        )
        n = (
            tpl.rerank_candidates
            if tpl is not None and tpl.rerank_candidates is not None
            else self.settings.search.rerank_candidates
        )
        return bool(on), int(n)

    def search_stores(
        self,
        stores: Sequence[str],
        request: SearchRequest,
        *,
        thresholds: Mapping[str, float | None] | None = None,
        request_of: Callable[[str, SearchRequest], SearchRequest] | None = None,
    ) -> MultiSearch:
        """Search several stores as one: each store's own :meth:`search` of ``request`` (``k``
        hits, the hybrid ranking by default), merged by reciprocal rank fusion of the ranks (k = 60,
        as in :mod:`knowledge.service.fusion`; Cormack, Clarke & Buettcher, SIGIR 2009), so scores of
        stores with other models or distances never need to be compared. Ties keep the order of
        ``stores``. A store that cannot be searched (deleted, its backend down) is reported in
        ``failed`` and the others are used. ``k`` best merged hits, never two with identical text;
        each :class:`StoreHit` carries its store's distance (the score direction).

        ``thresholds`` gives a store its score threshold (``{store: threshold}``, on that store's
        scale; a store not named, or ``None``: no threshold); without it ``request.score_threshold``
        applies to every store. ``request_of(store, request)`` makes a store's own request (the
        workbench adds the filter of what its reader may read).

        Raises:
            InvalidArgument: a blank query or ``k`` below 1 (before any store is searched).
        """
        query, k = request.query, request.k
        if not isinstance(query, str) or not query.strip():
            raise InvalidArgument("Type a query to search for.")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
        rankings: list[list[StoreHit]] = []
        failed: dict[str, str] = {}
        for store in dict.fromkeys(stores):
            try:
                threshold = request.score_threshold if thresholds is None else thresholds.get(store)
                own = replace(request, score_threshold=threshold)
                result = self.search(store, request_of(store, own) if request_of is not None else own)
            except KnowledgeError as exc:
                log.warning("search of store %s failed: %s", store, exc)
                failed[store] = str(exc)
                continue
            rankings.append([StoreHit(store, h, 0.0, result.distance) for h in result.hits])
        fused = reciprocal_rank_fusion(*[[(sh.store, sh.hit.id) for sh in r] for r in rankings])
        merged = [replace(sh, fused=fused[(sh.store, sh.hit.id)]) for r in rankings for sh in r]
        order = {id(sh): i for i, sh in enumerate(merged)}
        merged.sort(key=lambda sh: (-sh.fused, order[id(sh)]))
        out, seen = [], set()
        for sh in merged:
            if sh.hit.text in seen:
                continue
            seen.add(sh.hit.text)
            out.append(sh)
        return MultiSearch(out[:k], failed)

    def rank(
        self,
        store: str,
        query: str,
        vector: Any,
        fetch: int,
        *,
        where: dict | None = None,
        mode: SearchMode | None = None,
        record: StoreRecord | None = None,
    ) -> tuple[list[Hit], bool]:
        """The ranking behind :meth:`search` before duplicates, thresholds and per-file limits:
        ``(hits best first, exhausted)``; ``exhausted`` is true when asking for more than ``fetch``
        cannot bring more hits. ``vector`` is the query's embedding, ``(d,)`` float32. A store
        whose collection does not exist yet (no file written) ranks nothing."""
        mode = cast("SearchMode", search_mode(mode or self.settings.search.mode))
        record = record or self.stores.get(store)
        coll = self.stores.collection_of(record)
        distance = record.distance
        try:
            if mode == "vector":
                found = self._dense(coll, vector, fetch, where, record.backend)
                return found, len(found) < fetch
            pool = max(fetch, self.settings.search.candidates)
            lexical = self._lexical_search(store, record, coll, query, pool, where)
            if mode == "lexical":
                hits = self._with_vector_scores(coll, distance, vector, {}, lexical, record.backend)
                by_id = {h.id: h for h in hits}
                ranked = [replace(by_id[h.id], lexical_score=h.score) for h in lexical[:fetch] if h.id in by_id]
                return ranked, len(lexical) < fetch
            dense = self._dense(coll, vector, pool, where, record.backend)
        except StoreNotFound:
            if self.stores.find(record.name) is None:
                raise
            return [], True  # the store has no collection yet: nothing written to it
        w = self.settings.search.fusion_weight  # 0.5: both rankings weigh 1, plain RRF
        fused = reciprocal_rank_fusion(
            [h.id for h in dense],
            [h.id for h in lexical],
            k=self.settings.search.rank_constant,
            weights=(2 * w, 2 * (1 - w)),
        )
        hits = self._with_vector_scores(coll, distance, vector, {h.id: h for h in dense}, lexical, record.backend)
        lex_scores = {h.id: h.score for h in lexical}
        sign = -1.0 if higher_is_better(distance) else 1.0
        order = sorted(hits, key=lambda h: (-fused[h.id], sign * h.score))
        ranked = [replace(h, lexical_score=lex_scores.get(h.id), fused_score=fused[h.id]) for h in order[:fetch]]
        return ranked, len(dense) < pool and len(lexical) < pool and len(hits) <= fetch

    @staticmethod
    def _dense(coll: Collection, vector: Any, limit: int, where: dict | None, backend: str | None = None) -> list[Hit]:
        with span("search backend", operation="vector search", backend=backend, limit=limit):
            found = coll.search(as_vector(vector), limit=limit, where=where)
        return [hit_from_payload(p.id, p.score, p.payload or {}) for p in found]

    @staticmethod
    def _with_vector_scores(
        coll: Collection,
        distance: str,
        vector: Any,
        dense: dict[Any, Hit],
        lexical: Sequence[LexicalHit],
        backend: str | None = None,
    ) -> list[Hit]:
        """``dense`` hits plus the lexical ones missing from them, each with its vector score."""
        missing = [h.id for h in lexical if h.id not in dense]
        out = dict(dense)
        if missing:
            with span("search backend", operation="retrieve", backend=backend, ids=len(missing)):
                points = coll.retrieve(missing, with_vectors=True)
            if points:
                scores = vector_scores(distance, vector, np.stack([p.vector for p in points]))
                for p, sc in zip(points, scores):
                    out[p.id] = hit_from_payload(p.id, float(sc), p.payload or {})
        return list(out.values())

    def _lexical_search(
        self, store: str, record: StoreRecord, coll: Collection, query: str, limit: int, where: dict | None
    ) -> list[LexicalHit]:
        """BM25 hits from the backend's own index (kept in the same write as the vectors: memory,
        pgvector), else from the in-process :meth:`lexical_index` (other backends)."""
        with span("search backend", operation="lexical search", backend=record.backend, limit=limit):
            native = coll.lexical_search(query, limit, where=where)
        if native is not None:
            return [LexicalHit(p.id, p.score, p.payload or {}) for p in native]
        return self.lexical_index(store, record=record).search(query, limit, where=where)

    def lexical_index(self, store: str, *, record: StoreRecord | None = None) -> LexicalIndex:
        """The in-process BM25 index of ``store``'s chunks, for backends that keep no lexical index
        of their own (:meth:`~knowledge.vectorstore.base.Collection.lexical_search` returns ``None``:
        qdrant, plugins), brought up to date first: a file added, changed or removed since the
        last call has its segment built or dropped (the others are reused). It lives in this
        process only and is built from the store's chunks on first use.

        While :meth:`Stores.token` of the store is unchanged (no write through this process, the
        catalog unchanged on disk) the index is used as it is, with no backend call; otherwise the
        catalog's file signature and the chunk count say whether files must be re-read."""
        record = record or self.stores.get(store)
        coll = self.stores.collection_of(record)
        with self._lock:
            held = self._lexical.get(store)
            if held is None or held.collection != record.collection:
                held = _HeldIndex(record.collection, LexicalIndex(), threading.Lock())
                self._lexical[store] = held
        index = held.index
        with held.lock:
            token = self.stores.token(store)
            if held.token == token:
                return index
            if not coll.collection_exists():
                index.refresh({}, lambda f: ())
                index.signature = None
                held.token = token
                return index
            signature = (self.catalog.files_signature(store), coll.count())
            if index.signature != signature:
                updated = {f.file_id: str(f.updated) for f in self.catalog.files(store)}
                versions = {str(fid): (n, updated.get(str(fid))) for fid, n in coll.facet("file_id").items()}
                index.refresh(versions, lambda fid: coll.scroll(where={"file_id": fid}))
                index.signature = signature
            held.token = token
        return index


def distinct_hits(found: Iterable[Hit], k: int, max_per_file: int | None = None) -> list[Hit]:
    """The first ``k`` of ``found`` (best first) skipping a hit whose text (whitespace and case
    aside) came earlier, and, with ``max_per_file``, a file's hits beyond that many."""
    hits: list[Hit] = []
    seen: set[str] = set()
    per_file: dict[str, int] = {}
    for h in found:
        key = " ".join(h.text.split()).lower()
        if key in seen or (max_per_file is not None and per_file.get(h.file_id, 0) >= max_per_file):
            continue
        seen.add(key)
        per_file[h.file_id] = per_file.get(h.file_id, 0) + 1
        hits.append(h)
        if len(hits) == k:
            break
    return hits


def holds_every_query_word(hit: Hit, query: str) -> bool:
    """True when ``hit`` shares a term with the query (BM25 > 0) and its heading and text hold every
    term of the query, as the BM25 analyzer sees them (:class:`knowledge.text.analysis.Analyzer`: NFKC,
    lower case, English stop words left out, Snowball stems): ``misfits`` holds for a chunk with
    ``misﬁts``; ``Beautiful is better than ugly`` does not for a chunk with only ``better than``."""
    if not (hit.lexical_score or 0.0) > 0.0:
        return False
    an = analyzer()
    wanted = set(an.terms(query))
    return bool(wanted) and wanted <= set(an.terms(f"{hit.heading}\n{hit.text}" if hit.heading else hit.text))
