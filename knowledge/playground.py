"""The search playground's logic: timed searches, filters from form inputs, highlighting, a 2-D map.

Everything the Search playground page shows is computed here, without Streamlit, so it is unit-tested:

* :func:`timed_search` -- the best ``k`` chunks for a query, with the embedding and search times
  measured apart, the top 50 scores for a distribution chart, and the query vector (for the map);
  :func:`fold_hits` shows repeated text once ("also in" other files) and merges chunks whose spans
  overlap in one file into one result (setting ``search.merge_overlapping``).
* :func:`score_text` / :func:`bar_fraction` -- the scores in plain words ("meaning", "exact words",
  "combined") and a bar length in the order of the list.
* :func:`parse_fields` / :func:`build_where` -- the equality filter (``where``) from what a person
  typed: a file picked from a list and ``field = value`` lines.
* :func:`query_terms` / :func:`highlight` / :func:`snippet` -- the chunk text made safe for
  ``st.markdown(..., unsafe_allow_html=True)`` with the query's content words in ``<mark>``
  (highlighting and the readable rendering of Markdown chunks live in :mod:`knowledge.render`).
* :func:`store_map` -- a PCA projection (numpy SVD) of a deterministic sample of a store's vectors,
  with the query projected by the same components.

Scores follow the store's distance (:data:`knowledge.vectorstore.base.DISTANCE_ORDER`): cosine
similarity in [-1, 1] and dot product are better when higher; euclid and manhattan are distances,
better when lower.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from knowledge.errors import InvalidArgument
from knowledge.vectorstore.base import DISTANCE_ORDER, check_where, passes_threshold
from knowledge.vectorstore.store import Hit, VectorStore
from knowledge.render import MIN_TERM_LENGTH, STOPWORDS, escape_markdown, highlight, plain_text, query_terms  # noqa: F401

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.workbench import Workbench

#: How many scores the distribution chart shows.
DISTRIBUTION_SIZE = 50

# Highlighting lives in knowledge.render (shared with the chat); re-exported here for the page and tests.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


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
            raise InvalidArgument(
                f"Filter line {n} ({line!r}) should look like 'field = value', for example 'page = 2'."
            )
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


def payload_fields(vs: VectorStore, sample: int = 200) -> list[str]:
    """Payload field names seen in the first ``sample`` chunks of a store, sorted (for a hint)."""
    if not vs.exists():
        return []
    names: set[str] = set()
    for p in vs.collection.scroll(limit=sample):
        names.update(k for k, v in (p.payload or {}).items() if k != "text" and not isinstance(v, (list, dict)))
    return sorted(names)


# -- searching ------------------------------------------------------------------------------------
#: The most chunks merged into one result (with the default 50 % overlap: about two chunks of text).
MAX_MERGED_CHUNKS = 3


@dataclass(frozen=True, slots=True)
class HitNote:
    """What a shown hit stands for beyond its own chunk: ``chunks`` -- the chunk indexes merged into
    it (sorted; one when nothing was merged) -- and ``also_in`` -- names of other files holding the
    identical text (whitespace and case aside), in rank order."""

    chunks: tuple[int, ...]
    also_in: tuple[str, ...] = ()


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
    def nothing_matched_well(self) -> bool:
        """True when the store has chunks but none reaches the threshold: the query matched nothing well."""
        return not self.hits and bool(self.top) and self.threshold is not None


def _overlap(a: Hit, b: Hit) -> bool:
    return (a.file_id == b.file_id and None not in (a.char_start, a.char_end, b.char_start, b.char_end)
            and a.char_start < b.char_end and b.char_start < a.char_end)


def _union(a: Hit, b: Hit) -> Hit:
    """``a`` (the better ranked, whose scores stay) spanning the union of both spans. Both texts are
    exact slices of the same document (``text == document.text[char_start:char_end]``), so the union
    text is exact too."""
    first, second = (a, b) if a.char_start <= b.char_start else (b, a)
    text = first.text
    if second.char_end > first.char_end:
        text += second.text[first.char_end - second.char_start:]
    return replace(a, text=text, char_start=first.char_start, char_end=max(a.char_end, b.char_end))


def fold_hits(found: Iterable[Hit], k: int, *, merge: bool = True) -> tuple[list[Hit], dict[str, HitNote]]:
    """The first ``k`` shown hits of a ranking (``found``, best first), and their notes.

    * A hit whose text (whitespace and case aside) came earlier is not shown again; when it is in
      another file, that file's name is added to the earlier hit's ``also_in``.
    * With ``merge``, a hit whose character span overlaps a shown hit of the same file (the chunk
      overlap makes neighbouring chunks share text) joins it: the shown hit keeps its rank and scores
      and takes the union span and text; a hit bridging two shown hits joins them into the better.
      A result holds at most :data:`MAX_MERGED_CHUNKS` chunks (so a run of overlapping chunks never
      becomes the whole file); a further overlapping hit is a near-duplicate and is not shown.

    Returns:
        ``(hits, notes)`` -- at most ``k`` hits best first; ``notes`` by ``str(hit.id)``.
    """
    groups: list[_Group] = []
    seen: dict[str, _Group] = {}  # normalised text -> the group showing it
    for h in found:
        key = " ".join(h.text.split()).lower()
        if key in seen:
            g = seen[key]
            name = h.file_name or h.file_id
            if h.file_id != g.hit.file_id and name not in g.also:
                g.also.append(name)
            continue
        into = [g for g in groups if _overlap(g.hit, h)] if merge else []
        if into and sum(len(g.chunks) for g in into) + 1 > MAX_MERGED_CHUNKS:
            continue  # a near-duplicate of a result already as long as a result gets: not shown again
        if into:
            g = into[0]
            g.hit = _union(g.hit, h)
            g.chunks.add(h.chunk_index)
            for other in into[1:]:  # h bridged two shown hits: one hit now
                g.hit = _union(g.hit, other.hit)
                g.chunks |= other.chunks
                g.also += [n for n in other.also if n not in g.also]
                groups.remove(other)
                seen = {t: (g if o is other else o) for t, o in seen.items()}
            seen[key] = g
            continue
        if len(groups) == k:
            break
        seen[key] = g = _Group(h, {h.chunk_index}, [])
        groups.append(g)
    notes = {str(g.hit.id): HitNote(tuple(sorted(g.chunks)), tuple(g.also)) for g in groups}
    return [g.hit for g in groups], notes


@dataclass(slots=True)
class _Group:
    hit: Hit
    chunks: set[int]
    also: list[str]


def timed_search(wb: "Workbench", store: str, query: str, k: int = 5, *, where: Mapping[str, Any] | None = None,
                 score_threshold: float | None = None, mode: str | None = None,
                 merge: bool | None = None) -> SearchRun:
    """Search ``store`` like :meth:`Workbench.search`, timing the embedding and the search apart.

    One ranking (:meth:`Workbench.rank`, ``mode`` default: setting ``search.mode``) fetches the
    best ``max(k, 50)`` chunks (more when duplicates must be skipped); the threshold is applied to
    their vector scores in the store's score direction, except to chunks that hold the query's
    exact words (a BM25 score above 0: words-only and combined rankings); then :func:`fold_hits` drops repeated text
    and, with ``merge`` (default: setting ``search.merge_overlapping``), merges overlapping chunks
    of a file into one hit.

    Raises:
        StoreNotFound, InvalidArgument (blank query, ``k < 1``, bad filter), EmbeddingUnavailable,
        DimensionMismatch.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("Type a query to search for.")
    merge = wb.settings.search.merge_overlapping if merge is None else merge
    record = wb.get_store(store)
    where = check_where(where)
    embedder = wb.embedder(record.embedding_model)
    t0 = time.perf_counter()
    vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
    t1 = time.perf_counter()
    vs = wb.vector_store(store)
    distance = vs.info().distance if vs.exists() else record.distance
    want = max(k, DISTRIBUTION_SIZE)
    fetch = want
    while True:
        found, exhausted = wb.rank(store, query, vector, fetch, where=where, mode=mode)
        # the threshold judges meaning; a chunk holding the query's exact words (BM25 > 0, in the
        # words-only and combined rankings) is shown whatever its vector score
        passing = [h for h in found if passes_threshold(h.score, score_threshold, distance)
                   or (h.lexical_score or 0.0) > 0.0]
        top, top_notes = fold_hits(found, DISTRIBUTION_SIZE, merge=merge)
        hits, notes = fold_hits(passing, k, merge=merge)
        cut = len(passing) < len(found)  # the threshold ends the list: fetching more brings nothing shown
        if exhausted or fetch >= 8 * want or (len(top) >= DISTRIBUTION_SIZE and (len(hits) >= k or cut)):
            break
        fetch *= 2
    t2 = time.perf_counter()
    return SearchRun(store, query, distance, hits, top, vector, (t1 - t0) * 1000, (t2 - t1) * 1000,
                     score_threshold, where, mode or wb.settings.search.mode, {**top_notes, **notes})


MODES = {"hybrid": "combined", "vector": "meaning", "lexical": "exact words"}
"""Search modes of :meth:`Workbench.search` and their labels in the playground (plain words; the
technical terms are in :data:`MODE_HELP`)."""

MODE_HELP = ("**combined** (hybrid): the ranking by meaning and the ranking by exact words merged "
             "(reciprocal rank fusion). **meaning** (vector): cosine similarity of the embeddings. "
             "**exact words** (lexical): BM25 over the words, English stems.")

MODE_NOTE = {"hybrid": " Order: meaning and exact words combined.",
             "vector": " Order: meaning.",
             "lexical": " Order: exact words."}


def score_text(hit: Hit) -> str:
    """``"meaning 0.612 · exact words 7.31 · combined 0.0325"``: the vector score (cosine similarity
    by default), then what a hybrid search adds -- the BM25 score ("exact words"; "–" when the
    chunk shares no word with the query) and the reciprocal-rank-fusion score ("combined")."""
    parts = [f"meaning {hit.score:.3f}"]
    if hit.fused_score is not None or hit.lexical_score is not None:
        parts.append("exact words –" if hit.lexical_score is None else f"exact words {hit.lexical_score:.2f}")
    if hit.fused_score is not None:
        parts.append(f"combined {hit.fused_score:.4f}")
    return " · ".join(parts)


def order_score(hit: Hit, mode: str) -> float:
    """The score that orders the list in ``mode``: the fused score (hybrid), BM25 (lexical, 0 when
    missing), else the vector score."""
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
    (``chunks 3–5`` when ``note`` says chunks were merged into it)."""
    parts = [hit.file_name or hit.file_id]
    if hit.page is not None:
        parts.append(f"page {hit.page}")
    if hit.heading:
        parts.append(hit.heading)
    if hit.char_start is not None and hit.char_end is not None:
        parts.append(f"chars {hit.char_start}–{hit.char_end}")
    chunks = note.chunks if note is not None else (hit.chunk_index,)
    if len(chunks) > 1:
        parts.append(f"chunks {chunks[0]}–{chunks[-1]}" if list(chunks) == list(range(chunks[0], chunks[-1] + 1))
                     else "chunks " + ", ".join(map(str, chunks)))
    else:
        parts.append(f"chunk {chunks[0] if chunks else hit.chunk_index}")
    return " · ".join(parts)


# -- highlighting ---------------------------------------------------------------------------------
def _pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    alternatives = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda w: (-len(w), w)))
    # A word boundary where "_" counts as punctuation, so Markdown's _emphasis_ and snake_case parts match.
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", re.IGNORECASE | re.UNICODE)


def snippet(text: str, query: str, width: int = 320) -> str:
    """At most about ``width`` characters of ``text`` around the first match of the query's content
    words (the start when none matches), cut at spaces, with ``…`` where text was left out."""
    text = " ".join(unicodedata.normalize("NFC", text or "").split())
    if len(text) <= width:
        return text
    pattern = _pattern(query_terms(query))
    m = pattern.search(text) if pattern else None
    start = 0 if m is None else max(0, m.start() - width // 4)
    end = min(len(text), start + width)
    start = max(0, min(start, end - width))
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("… " if start > 0 else "") + text[start:end] + (" …" if end < len(text) else "")


# -- the map --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Projection:
    """A 2-D PCA basis: ``mean`` ``(d,)`` and ``components`` ``(2, d)`` float64 (unit rows, or zero
    rows when the data has fewer dimensions of variance), ``explained`` the variance ratio of each."""

    mean: np.ndarray
    components: np.ndarray
    explained: tuple[float, float]

    def project(self, vectors: Any) -> np.ndarray:
        """``(n, d)`` or ``(d,)`` vectors -> ``(n, 2)`` or ``(2,)`` coordinates."""
        v = np.asarray(vectors, dtype=np.float64)
        return (v - self.mean) @ self.components.T


def pca_2d(vectors: Any) -> Projection:
    """The two principal components of ``(n, d)`` vectors by SVD, signs fixed (the largest loading of
    each component is positive) so the same data always gives the same picture.

    Raises:
        InvalidArgument: not a non-empty 2-D array.
    """
    x = np.asarray(vectors, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise InvalidArgument(f"PCA needs an (n, d) array with n, d >= 1, got shape {x.shape}.")
    mean = x.mean(axis=0)
    centred = x - mean
    components = np.zeros((2, x.shape[1]))
    explained = [0.0, 0.0]
    if x.shape[0] > 1:
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        total = float((s ** 2).sum())
        for i in range(min(2, vt.shape[0])):
            if s[i] <= 1e-12 * max(1.0, s[0]):
                continue
            row = vt[i]
            if row[np.argmax(np.abs(row))] < 0:
                row = -row
            components[i] = row
            explained[i] = float(s[i] ** 2 / total) if total else 0.0
    return Projection(mean, components, (explained[0], explained[1]))


def _sample_key(point_id: Any) -> int:
    return int.from_bytes(hashlib.blake2b(repr(point_id).encode(), digest_size=8).digest(), "big")


@dataclass(frozen=True, slots=True)
class StoreMap:
    """A store's chunks in 2-D: ``rows`` (one dict per chunk: ``x``, ``y``, ``file``, ``page``,
    ``chunk``, ``text``, ``id``), the ``projection``, ``total`` chunks in the store and whether the
    rows are a ``sampled`` subset."""

    rows: list[dict[str, Any]]
    projection: Projection | None
    total: int
    sampled: bool

    def place(self, vector: Any) -> tuple[float, float] | None:
        """Where a ``(d,)`` vector (the query) falls on the map; ``None`` for an empty map."""
        if self.projection is None:
            return None
        xy = self.projection.project(vector)
        return float(xy[0]), float(xy[1])


def sample_points(vs: VectorStore, max_points: int = 3000, include: Iterable[Any] = ()) -> tuple[list[Any], int]:
    """A deterministic sample of at most ``max_points`` points (with vectors) of a store, plus the
    points with ids in ``include`` (the hits), and the store's total count.

    The sample is the points with the smallest hashes of their ids, so it is the same on every
    run, whatever the scroll order, and memory stays bounded by ``max_points``.
    """
    if max_points < 1:
        raise InvalidArgument(f"max_points must be at least 1, got {max_points}.")
    if not vs.exists():
        return [], 0
    include = {str(i) for i in include}
    heap: list[tuple[int, int, Any]] = []  # (-key, tiebreak, point): a max-heap of the smallest keys
    extra: dict[Any, Any] = {}
    total = 0
    for n, p in enumerate(vs.collection.scroll(with_vectors=True)):
        total += 1
        if str(p.id) in include:
            extra[str(p.id)] = p
            continue
        item = (-_sample_key(p.id), n, p)
        if len(heap) < max_points:
            heapq.heappush(heap, item)
        elif item[0] > heap[0][0]:
            heapq.heapreplace(heap, item)
    chosen = sorted((item for item in heap), key=lambda it: (-it[0], it[1]))
    points = [it[2] for it in chosen] + list(extra.values())
    return points, total


def store_map(vs: VectorStore, *, max_points: int = 3000, include: Iterable[Any] = ()) -> StoreMap:
    """The 2-D map of a store: PCA of a deterministic sample (:func:`sample_points`) of its vectors."""
    points, total = sample_points(vs, max_points, include)
    if not points:
        return StoreMap([], None, total, False)
    matrix = np.vstack([np.asarray(p.vector, dtype=np.float64) for p in points])
    projection = pca_2d(matrix)
    xy = projection.project(matrix)
    rows = []
    for p, (x, y) in zip(points, xy):
        payload = p.payload or {}
        rows.append({
            "x": float(x), "y": float(y), "id": str(p.id),
            "file": payload.get("file_name") or str(payload.get("file_id")),
            "page": payload.get("page"), "chunk": payload.get("chunk_index"),
            "text": " ".join(plain_text(str(payload.get("text", "")), file_name=payload.get("file_name")).split())[:160],
        })
    return StoreMap(rows, projection, total, len(points) < total)


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
            rows.append({"x": xy[0], "y": xy[1], "id": "query", "file": "(query)", "page": None,
                         "chunk": None, "text": run.query[:160], "role": "query", "rank": None})
    return rows


def distribution_rows(run: SearchRun) -> list[dict[str, Any]]:
    """The top scores for a chart: ``rank``, ``score``, ``file`` and ``shown`` (among the hits)."""
    shown = {str(h.id) for h in run.hits}
    return [{"rank": i, "score": h.score, "file": h.file_name or h.file_id, "shown": str(h.id) in shown}
            for i, h in enumerate(run.top, 1)]


__all__ = [
    "DISTRIBUTION_SIZE", "MODES", "MODE_NOTE", "Projection", "SearchRun", "StoreMap", "build_where", "distribution_rows",
    "escape_markdown", "highlight", "map_rows", "parse_fields", "parse_scalar", "payload_fields", "pca_2d", "provenance",
    "query_terms", "sample_points", "score_fraction", "score_meaning", "snippet", "store_map",
    "timed_search", "score_text", "HitNote", "fold_hits", "order_score", "bar_fraction", "MODE_HELP",
]
