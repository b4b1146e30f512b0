"""The search playground's logic: timed searches, filters from form inputs, highlighting, a 2-D map.

Everything the Search playground page shows is computed here, without Streamlit, so it is unit-tested:

* :func:`timed_search` -- the best ``k`` chunks for a query, with the embedding and search times
  measured apart, the top 50 scores for a distribution chart, and the query vector (for the map).
* :func:`parse_fields` / :func:`build_where` -- the equality filter (``where``) from what a person
  typed: a file picked from a list and ``field = value`` lines.
* :func:`query_terms` / :func:`highlight` / :func:`snippet` -- the chunk text made safe for
  ``st.markdown(..., unsafe_allow_html=True)`` with the query's content words in ``<mark>``.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from knowledge.errors import InvalidArgument
from knowledge.vectorstore.base import DISTANCE_ORDER, check_where, passes_threshold
from knowledge.vectorstore.store import Hit, VectorStore
from knowledge.lexical import analyzer
from knowledge.workbench import distinct_hits

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.workbench import Workbench

#: How many scores the distribution chart shows.
DISTRIBUTION_SIZE = 50

#: Words too common to highlight (English function words; anything shorter than
#: :data:`MIN_TERM_LENGTH` characters is skipped anyway).
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so
some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your
yours yourself yourselves shall may might must let lets get got its it's don't does doesn't
""".split())

#: Words shorter than this are not highlighted.
MIN_TERM_LENGTH = 3

_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits of any script; "_" separates words
# ASCII characters that mean something to Markdown, Streamlit's Markdown extensions (``:color[...]``,
# ``$math$``, ``:emoji:``) or HTML; each becomes a numeric character reference, which renders as the
# character itself and is never markup.
_SPECIAL = re.compile(r"[!-/:-@\[-`{-~]")


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
        out[key] = _scalar(value)
    return out


def _scalar(value: str) -> Any:
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
@dataclass(frozen=True, slots=True)
class SearchRun:
    """One timed search: ``hits`` (the best ``k`` passing the threshold, best first, no two with
    identical text), ``top`` (the best :data:`DISTRIBUTION_SIZE` without the threshold, for the
    distribution), the ``query_vector`` (``(d,)`` float32) and the times in milliseconds."""

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

    @property
    def total_ms(self) -> float:
        return self.embed_ms + self.search_ms


def timed_search(wb: "Workbench", store: str, query: str, k: int = 5, *, where: Mapping[str, Any] | None = None,
                 score_threshold: float | None = None, mode: str | None = None) -> SearchRun:
    """Search ``store`` like :meth:`Workbench.search`, timing the embedding and the search apart.

    One ranking (:meth:`Workbench.rank`, ``mode`` default: setting ``search.mode``) fetches the
    best ``max(k, 50)`` chunks (more when duplicates must be skipped); the threshold is applied to
    their vector scores in the store's score direction.

    Raises:
        StoreNotFound, InvalidArgument (blank query, ``k < 1``, bad filter), EmbeddingUnavailable,
        DimensionMismatch.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidArgument(f"k must be a positive integer, got {k!r}.")
    if not isinstance(query, str) or not query.strip():
        raise InvalidArgument("Type a query to search for.")
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
        unique = _unique(found)
        if len(unique) >= want or exhausted:
            break
        fetch *= 2
    t2 = time.perf_counter()
    top = unique[:DISTRIBUTION_SIZE]
    hits = [h for h in unique if passes_threshold(h.score, score_threshold, distance)][:k]
    return SearchRun(store, query, distance, hits, top, vector, (t1 - t0) * 1000, (t2 - t1) * 1000,
                     score_threshold, where, mode or wb.settings.search.mode)


def _unique(hits: Iterable[Hit]) -> list[Hit]:
    found = list(hits)
    return distinct_hits(found, len(found))


MODES = {"hybrid": "hybrid", "vector": "vector only", "lexical": "words only (BM25)"}
"""Search modes of :meth:`Workbench.search` and their labels in the playground."""

MODE_NOTE = {"hybrid": " Order: vector and BM25 rankings fused (reciprocal rank fusion).",
             "lexical": " Order: BM25 (exact words)."}


def score_text(hit: Hit) -> str:
    """``"score 0.612 · BM25 7.31 · fused 0.0325"``: the vector score, then what hybrid adds."""
    parts = [f"score {hit.score:.3f}"]
    if hit.fused_score is not None or hit.lexical_score is not None:
        parts.append("BM25 –" if hit.lexical_score is None else f"BM25 {hit.lexical_score:.2f}")
    if hit.fused_score is not None:
        parts.append(f"fused {hit.fused_score:.4f}")
    return " · ".join(parts)


def provenance(hit: Hit) -> str:
    """Where a hit comes from, in words: ``file · page 2 · Heading > Sub · chars 120–560``."""
    parts = [hit.file_name or hit.file_id]
    if hit.page is not None:
        parts.append(f"page {hit.page}")
    if hit.heading:
        parts.append(hit.heading)
    if hit.char_start is not None and hit.char_end is not None:
        parts.append(f"chars {hit.char_start}–{hit.char_end}")
    parts.append(f"chunk {hit.chunk_index}")
    return " · ".join(parts)


# -- highlighting ---------------------------------------------------------------------------------
def query_terms(query: str) -> list[str]:
    """The query's content words, lowercased, longest first: runs of letters and digits (any script) of at
    least :data:`MIN_TERM_LENGTH` characters that are not :data:`STOPWORDS`. Punctuation and regex
    characters in the query are not words, so they never reach a pattern."""
    words = {w.casefold() for w in _WORD.findall(unicodedata.normalize("NFC", query or ""))}
    terms = [w for w in words if len(w) >= MIN_TERM_LENGTH and w not in STOPWORDS]
    return sorted(terms, key=lambda w: (-len(w), w))


def _pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    alternatives = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda w: (-len(w), w)))
    # A word boundary where "_" counts as punctuation, so Markdown's _emphasis_ and snake_case parts match.
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", re.IGNORECASE | re.UNICODE)


def escape_markdown(text: str) -> str:
    """``text`` as inert Markdown/HTML: every ASCII punctuation character becomes a numeric character
    reference (so ``*``, ``_``, ``#``, ``[``, `````, ``$``, ``:``, ``<`` and ``&`` are shown, never
    interpreted) and line breaks become ``<br>``. Safe for ``st.markdown(..., unsafe_allow_html=True)``."""
    text = _SPECIAL.sub(lambda m: f"&#{ord(m.group())};", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    return text.replace("\n", "<br>")


def highlight(text: str, query: str | Sequence[str], *, mark: tuple[str, str] = ("<mark>", "</mark>")) -> str:
    """``text`` escaped (:func:`escape_markdown`) with the words that match the query's content words
    wrapped in ``mark`` (``<mark>...</mark>``): the same word in any case, or a word with the same
    English stem (query "iterate" marks "iterating", as the BM25 part of the search matches it).

    ``query`` is the query string (its words are taken with :func:`query_terms`) or the terms. Matches
    are found in the original text and each piece is escaped on its own, so an escape sequence is
    never matched or split. Unicode is compared in NFC form.
    """
    text = unicodedata.normalize("NFC", text or "")
    terms = query_terms(query) if isinstance(query, str) else [unicodedata.normalize("NFC", t) for t in query]
    if not terms:
        return escape_markdown(text)
    exact = {t.casefold() for t in terms}
    stem = analyzer().stem
    stems = set(stem(sorted(exact)))
    words = list(_WORD.finditer(text))
    folded = [m.group().casefold() for m in words]
    word_stems = stem(folded)
    out, pos = [], 0
    for m, w, st in zip(words, folded, word_stems):
        if w in exact or (st in stems and len(w) >= MIN_TERM_LENGTH and w not in STOPWORDS):
            out.append(escape_markdown(text[pos:m.start()]))
            out.append(mark[0] + escape_markdown(m.group()) + mark[1])
            pos = m.end()
    out.append(escape_markdown(text[pos:]))
    return "".join(out)


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
            "text": " ".join(str(payload.get("text", "")).split())[:160],
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
    "escape_markdown", "highlight", "map_rows", "parse_fields", "payload_fields", "pca_2d", "provenance",
    "query_terms", "sample_points", "score_fraction", "score_meaning", "snippet", "store_map",
    "timed_search",
    "score_text",
]
