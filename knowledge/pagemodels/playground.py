"""The search playground's page model: timed searches, scores in words, filters from form inputs.

Everything the Search playground page shows is computed here, without Streamlit, so it is unit-tested:

* :func:`timed_search` -- the best ``k`` chunks for a query, with the embedding and search times
  measured apart, the similarity of the 50 best-ranked chunks for a chart, and the query vector (for the map);
  :func:`fold_hits` shows repeated text once ("also in" other files) and merges chunks whose spans
  overlap in one file into one result (setting ``search.merge_overlapping``).
* :func:`score_text` / :func:`bar_fraction` -- the scores in the product's words ("similarity",
  "keyword score", "rank score": :mod:`knowledge.vocabulary`) and a bar length in the order of the list.
* :func:`parse_fields` / :func:`build_where` -- the equality filter (``where``) from what a person
  typed: a file picked from a list and ``field = value`` lines.
* :func:`distribution_rows` -- the top scores as rows for the distribution chart.

Highlighting and snippets live in :mod:`knowledge.text.highlight` (shared with the chat's citations), the
readable rendering of Markdown chunks in :mod:`knowledge.text.render`, the 2-D map of a store in
:mod:`knowledge.pagemodels.storemap`; their names are re-exported here.

Scores follow the store's distance (:data:`knowledge.vectorstore.base.DISTANCE_ORDER`): cosine
similarity in [-1, 1] and dot product are better when higher; euclid and manhattan are distances,
better when lower.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from knowledge.errors import InvalidArgument
from knowledge.pagemodels.storemap import StoreMap
from knowledge.service.passages import HitNote, merge_passages
from knowledge.service.search import Playground, SearchRequest
from knowledge.vectorstore.base import check_where
from knowledge.vectorstore.scoring import DISTANCE_ORDER
from knowledge.vectorstore.store import Hit, VectorStore
from knowledge.vocabulary import KEYWORD_SCORE, RANK_SCORE, RANKING_HELP, RANKINGS, RERANK_SCORE, SIMILARITY

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.workbench import Workbench

#: How many scores the distribution chart shows.
DISTRIBUTION_SIZE = 50


# -- scores ---------------------------------------------------------------------------------------
def score_meaning(distance: str) -> str:
    """What a score is for ``distance``, in words (for a caption or a help text)."""
    return {
        "cosine": "cosine similarity, from -1 to 1; higher is better",
        "dot": "dot product of the vectors; higher is better",
        "euclid": "Euclidean distance to the query; lower is better",
        "manhattan": "Manhattan distance to the query; lower is better",
    }.get(distance, f"{distance} score")


def score_fraction(score: float, distance: str) -> float:
    """A score as a bar length in [0, 1], longer is better.

    Similarities (cosine, dot) are clipped to [0, 1]; a distance ``d`` (euclid, manhattan) becomes
    ``1 / (1 + d)``, so a distance of 0 fills the bar.
    """
    if not np.isfinite(score):
        return 0.0
    if DISTANCE_ORDER.get(distance, True):
        return float(min(1.0, max(0.0, score)))
    return float(1.0 / (1.0 + max(0.0, score)))


# -- filters --------------------------------------------------------------------------------------
def parse_fields(text: str | None) -> dict[str, Any]:
    """``field = value`` lines as an equality filter.

    A value is read as JSON when it is a JSON scalar (``3``, ``2.5``, ``true``, ``null``,
    ``"quoted text"``), otherwise taken as text as written (``Guide > Install``). Blank lines and
    lines starting with ``#`` are ignored.

    Raises:
        InvalidArgument: a line without ``=``, an empty field name, or a field given twice.
    """
    out: dict[str, Any] = {}
    for n, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise InvalidArgument(f"Filter line {n} ({line!r}) should look like 'field = value', for example 'page = 2'.")
        if key in out:
            raise InvalidArgument(f"The field {key!r} is given twice in the filter; keep one line.")
        out[key] = parse_scalar(value)
    return out


def parse_scalar(value: str) -> Any:
    """A value typed by a person: a JSON scalar (``3``, ``2.5``, ``true``, ``null``, ``"quoted
    text"``) as such, anything else -- a list, an object, ``NaN``, plain words -- as the text typed."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if isinstance(parsed, (str, int, float, bool)) or parsed is None:
        if isinstance(parsed, float) and not np.isfinite(parsed):
            return value
        return parsed
    return value  # a list or an object: keep the text


def build_where(file_id: str | None = None, fields: str | Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The ``where`` of a search from the form: the chosen file (``None``: every file) and payload
    fields (``field = value`` lines, or a dict). ``None`` when nothing filters.

    Raises:
        InvalidArgument: a badly written field line, or a field that contradicts the chosen file.
    """
    where = parse_fields(fields) if fields is None or isinstance(fields, str) else dict(fields)
    if file_id:
        if "file_id" in where and where["file_id"] != file_id:
            raise InvalidArgument("The filter names another file_id than the file chosen; keep one.")
        where["file_id"] = file_id
    return check_where(where)


def default_threshold(distance: str, setting: float | None) -> float | None:
    """The score threshold the playground starts with for a store of ``distance``: the setting
    ``search.score_threshold`` for similarities (cosine, dot), none for distances (euclid,
    manhattan), whose scale depends on the vectors."""
    return setting if DISTANCE_ORDER.get(distance, False) else None


def compare_where(where: Mapping[str, Any] | None, file_name: str | None) -> dict[str, Any] | None:
    """The ``where`` of a search to run on a second store beside the first: a file chosen in the
    first store is matched by its name (``file_name``), since file ids are per content and per store;
    ``None`` when nothing filters."""
    other = dict(where or {})
    if file_name is not None:
        other.pop("file_id", None)
        other["file_name"] = file_name
    return other or None


def payload_fields(vs: VectorStore, sample: int = 200) -> list[str]:
    """Payload field names seen in the first ``sample`` chunks of a store, sorted (for a hint)."""
    if not vs.exists():
        return []
    names: set[str] = set()
    for p in vs.collection.scroll(limit=sample):
        names.update(k for k, v in (p.payload or {}).items() if k != "text" and not isinstance(v, (list, dict)))
    return sorted(names)


# -- searching ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SearchRun:
    """One timed search: ``hits`` (the best ``k`` passing the threshold, best first, no two with
    identical text; with merging, overlapping chunks of a file are one hit with the union span),
    ``top`` (the best :data:`DISTRIBUTION_SIZE` without the threshold, for the distribution), the
    ``query_vector`` (``(d,)`` float32), the times in milliseconds and ``notes`` (``str(hit.id)`` ->
    :class:`HitNote`) for the hits and the top."""

    store: str
    query: str
    distance: str
    hits: list[Hit]
    top: list[Hit]
    query_vector: np.ndarray
    embed_ms: float
    search_ms: float
    threshold: float | None = None
    where: dict[str, Any] | None = None
    mode: str = "vector"
    notes: dict[str, HitNote] = field(default_factory=dict)

    @property
    def total_ms(self) -> float:
        return self.embed_ms + self.search_ms

    def note(self, hit: Hit) -> HitNote:
        """The :class:`HitNote` of ``hit`` (its own chunk only, when none was recorded)."""
        return self.notes.get(str(hit.id)) or HitNote((hit.chunk_index,))

    @property
    def best_top_score(self) -> float | None:
        """The best vector score of :attr:`top` in the store's score direction (the highest
        similarity, the lowest distance); ``None`` when the store has no chunks."""
        scores = [h.score for h in self.top]
        if not scores:
            return None
        return max(scores) if DISTANCE_ORDER.get(self.distance, True) else min(scores)

    @property
    def nothing_matched_well(self) -> bool:
        """True when the store has chunks but none reaches the threshold: the query matched nothing well."""
        return not self.hits and bool(self.top) and self.threshold is not None


def timed_search(
    wb: Workbench,
    store: str,
    query: str,
    k: int = 5,
    *,
    where: Mapping[str, Any] | None = None,
    score_threshold: float | None = None,
    mode: str | None = None,
    merge: bool | None = None,
    rerank: bool | None = None,
) -> SearchRun:
    """Search ``store`` like :meth:`Workbench.search`, timing the embedding and the search apart:
    :meth:`Workbench.search_result` (:meth:`knowledge.service.search.Searcher.search`) with ``timings``.

    The ranking (``mode`` default: setting ``search.mode``) fetches the best ``max(k, 50)`` chunks (more
    when duplicates must be skipped); the threshold is applied to their vector scores in the store's
    score direction, except to chunks that hold every word of the query
    (:func:`knowledge.service.search.holds_every_query_word`; keyword and hybrid rankings); then
    :func:`fold_hits` drops repeated text and, with ``merge`` (default: setting
    ``search.merge_overlapping``), merges overlapping chunks of a file into one hit. ``rerank``
    (default: the store's template, else setting ``search.rerank``) reorders the best passages
    (:mod:`knowledge.service.rerank`); the hits then carry their rerank score.

    Raises:
        StoreNotFound, InvalidArgument (blank query, ``k < 1``, bad filter), EmbeddingUnavailable,
        DimensionMismatch.
    """
    merge = wb.settings.search.merge_overlapping if merge is None else merge
    view = Playground(
        top=DISTRIBUTION_SIZE, fold=lambda found, n: merge_passages(found, n, merge=merge), words_pass=True, timings=True
    )
    r = wb.search_result(
        store,
        SearchRequest(query, k, where=where, score_threshold=score_threshold, mode=mode, rerank=rerank, playground=view),
    )
    return SearchRun(
        store,
        query,
        r.distance,
        r.hits,
        r.top,
        r.vector,
        r.embed_ms,
        r.search_ms,
        score_threshold,
        check_where(dict(where) if where is not None else None),
        r.mode,
        r.notes,
    )


MODES = RANKINGS
"""Search modes of :meth:`Workbench.search` and their labels in the playground
(:data:`knowledge.vocabulary.RANKINGS`: Hybrid, Semantic, Keyword; explained in :data:`MODE_HELP`)."""

MODE_HELP = RANKING_HELP

MODE_NOTE = {
    "hybrid": f" Order: {RANK_SCORE} (semantic and keyword rankings merged).",
    "vector": f" Order: {SIMILARITY} (semantic).",
    "lexical": f" Order: {KEYWORD_SCORE} (keyword).",
}


def score_text(hit: Hit, distance: str = "cosine") -> str:
    """``"similarity 0.612 · keyword score 7.31 · rank score 0.0325"``: the vector score (cosine
    similarity; ``"distance"`` for a euclid or manhattan store), then what a hybrid search adds --
    the BM25 keyword score ("–" when the chunk shares no word with the query) and the
    reciprocal-rank-fusion rank score that orders the list; a reranked hit's rerank score last
    (it orders the list then)."""
    vector = SIMILARITY if DISTANCE_ORDER.get(distance, True) else "distance"
    parts = [f"{vector} {hit.score:.3f}"]
    if hit.fused_score is not None or hit.lexical_score is not None:
        parts.append(f"{KEYWORD_SCORE} –" if hit.lexical_score is None else f"{KEYWORD_SCORE} {hit.lexical_score:.2f}")
    if hit.fused_score is not None:
        parts.append(f"{RANK_SCORE} {hit.fused_score:.4f}")
    if hit.rerank_score is not None:
        parts.append(f"{RERANK_SCORE} {hit.rerank_score:.4f}")
    return " · ".join(parts)


def order_score(hit: Hit, mode: str) -> float:
    """The score that orders the list in ``mode``: the rerank score when the search reranked, else
    the fused score (hybrid), BM25 (lexical, 0 when missing), else the vector score."""
    if hit.rerank_score is not None:
        return hit.rerank_score
    if mode == "hybrid" and hit.fused_score is not None:
        return hit.fused_score
    if mode == "lexical":
        return hit.lexical_score or 0.0
    return hit.score


def bar_fraction(hit: Hit, run: SearchRun) -> float:
    """The length in [0, 1] of ``hit``'s score bar, in the order of the list: in vector mode
    :func:`score_fraction` of its score; in hybrid and lexical mode its ordering score
    (:func:`order_score`) relative to the best of the run, so the bars never grow down the list."""
    if run.mode == "vector":
        return score_fraction(hit.score, run.distance)
    best = max((order_score(h, run.mode) for h in [*run.hits, *run.top]), default=0.0)
    if best <= 0 or not np.isfinite(best):
        return 0.0
    return float(min(1.0, max(0.0, order_score(hit, run.mode) / best)))


def provenance(hit: Hit, note: HitNote | None = None) -> str:
    """Where a hit comes from, in words: ``file · page 2 · Heading > Sub · chars 120–560 · chunk 3``
    (``Title (file)`` when the file's details give it a title; ``chunks 3–5`` when ``note`` says chunks
    were merged into it)."""
    name = hit.file_name or hit.file_id
    title = hit.metadata.get("title") if isinstance(hit.metadata, dict) else None
    parts = [f"{title} ({name})" if isinstance(title, str) and title.strip() and title != name else name]
    if hit.page is not None:
        parts.append(f"page {hit.page}")
    if hit.heading:
        parts.append(hit.heading)
    if hit.char_start is not None and hit.char_end is not None:
        parts.append(f"chars {hit.char_start}–{hit.char_end}")
    chunks = note.chunks if note is not None else (hit.chunks or (hit.chunk_index,))
    if len(chunks) > 1:
        parts.append(
            f"chunks {chunks[0]}–{chunks[-1]}"
            if list(chunks) == list(range(chunks[0], chunks[-1] + 1))
            else "chunks " + ", ".join(map(str, chunks))
        )
    else:
        parts.append(f"chunk {chunks[0] if chunks else hit.chunk_index}")
    return " · ".join(parts)


def source_of(hit: Hit) -> tuple[str, str] | None:
    """``(source name, where at the source)`` of a hit from a source (:mod:`knowledge.sources`: the
    ``source`` and ``source_url`` attributes it gave the file), ``None`` for a file added otherwise."""
    meta = hit.metadata if isinstance(hit.metadata, dict) else {}
    name, url = meta.get("attr_source"), meta.get("attr_source_url")
    if not isinstance(url, str) or not url:
        return None
    return (str(name) if name else "a source", url)


# -- charts ---------------------------------------------------------------------------------------
def distribution_rows(run: SearchRun) -> list[dict[str, Any]]:
    """The top scores for a chart: ``rank``, ``score``, ``file``, ``shown`` (among the hits) and
    ``result``, the same in words for the chart's legend (:data:`SHOWN_LABELS`)."""
    shown = {str(h.id) for h in run.hits}
    return [
        {
            "rank": i,
            "score": h.score,
            "file": h.file_name or h.file_id,
            "shown": str(h.id) in shown,
            "result": SHOWN_LABELS[str(h.id) in shown],
        }
        for i, h in enumerate(run.top, 1)
    ]


SHOWN_LABELS = {True: "shown", False: "not shown"}


def map_rows(store_map_: StoreMap, run: SearchRun | None) -> list[dict[str, Any]]:
    """The map's rows for a chart: every chunk (``role`` "chunk"), the hits (``role`` "hit", with
    their ``rank``) and the query (``role`` "query")."""
    ranks = {str(h.id): i for i, h in enumerate(run.hits, 1)} if run else {}
    rows = []
    for r in store_map_.rows:
        rank = ranks.get(r["id"])
        rows.append({**r, "role": "hit" if rank else "chunk", "rank": rank})
    if run is not None:
        xy = store_map_.place(run.query_vector)
        if xy is not None:
            rows.append(
                {
                    "x": xy[0],
                    "y": xy[1],
                    "id": "query",
                    "file": "(query)",
                    "label": "(query)",
                    "page": None,
                    "chunk": None,
                    "text": run.query[:160],
                    "role": "query",
                    "rank": None,
                }
            )
    return rows


__all__ = [
    "DISTRIBUTION_SIZE",
    "MODES",
    "MODE_HELP",
    "MODE_NOTE",
    "RERANK_SCORE",
    "SHOWN_LABELS",
    "SearchRun",
    "bar_fraction",
    "build_where",
    "compare_where",
    "default_threshold",
    "distribution_rows",
    "map_rows",
    "order_score",
    "parse_fields",
    "parse_scalar",
    "payload_fields",
    "provenance",
    "score_fraction",
    "score_meaning",
    "score_text",
    "timed_search",
]
