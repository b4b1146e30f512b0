"""The product's words for its rankings and scores, defined once (see docs/glossary.md).

* The three rankings of a search, by their value (what settings, the CLI, the REST API and the stored
  evaluation runs hold) and their label (what a person reads): ``hybrid`` Hybrid, ``vector``
  Semantic (by meaning, the embeddings' similarity), ``lexical`` Keyword (the words, BM25). A person
  may type the label's word as the value: :func:`search_mode` reads ``semantic`` as ``vector`` and
  ``keyword`` as ``lexical`` (any case), so old and new settings both work.
* The three numbers of a hit: :data:`SIMILARITY` (the vector score, ``Hit.score``: cosine similarity
  unless the store's distance says otherwise), :data:`KEYWORD_SCORE` (BM25, ``Hit.lexical_score``)
  and :data:`RANK_SCORE` (the reciprocal-rank-fusion score of a hybrid search, ``Hit.fused_score``);
  a reranked search adds :data:`RERANK_SCORE` (``Hit.rerank_score``), which then orders the list.
* :func:`backend_label` -- a vector-store backend in words (``memory`` is the built-in backend).
"""

from __future__ import annotations

from knowledge.errors import InvalidArgument

#: A ranking's value -> its label, in the order a person is offered them.
RANKINGS: dict[str, str] = {"hybrid": "Hybrid", "vector": "Semantic", "lexical": "Keyword"}

#: The words a person may type for a ranking, beyond its value: the label's own word.
RANKING_ALIASES: dict[str, str] = {"semantic": "vector", "keyword": "lexical"}

#: What each ranking does, in one sentence each (help texts).
RANKING_HELP = (
    "**Hybrid**: the Semantic and the Keyword rankings merged (reciprocal rank fusion; "
    "ordered by the rank score). **Semantic**: by meaning, the similarity of the embeddings. "
    "**Keyword**: by the words, BM25 over English stems (the keyword score)."
)

SIMILARITY = "similarity"
KEYWORD_SCORE = "keyword score"
RANK_SCORE = "rank score"
#: The reranker's score of a reranked search (``Hit.rerank_score``: knowledge/service/rerank.py).
RERANK_SCORE = "rerank score"

#: What orders the list in each ranking, for a caption.
RANKING_ORDER: dict[str, str] = {"hybrid": RANK_SCORE, "vector": SIMILARITY, "lexical": KEYWORD_SCORE}

#: A backend's name -> its words (a plugin's name stands for itself).
BACKENDS: dict[str, str] = {"memory": "built-in", "pgvector": "PostgreSQL (pgvector)", "qdrant": "Qdrant"}


def search_mode(value: str) -> str:
    """The ranking value of ``value``: ``"hybrid"``, ``"vector"`` or ``"lexical"``; ``"semantic"`` and
    ``"keyword"`` (any case, spaces around ignored) are the same as ``"vector"`` and ``"lexical"``.

    Raises:
        InvalidArgument: any other word (the message names the three rankings).
    """
    word = str(value).strip().lower()
    word = RANKING_ALIASES.get(word, word)
    if word not in RANKINGS:
        raise InvalidArgument(
            f"Unknown search mode {value!r}; use hybrid, semantic or keyword"
            " (vector and lexical are the same as semantic and keyword)."
        )
    return word


def ranking_label(mode: str) -> str:
    """``"Semantic"`` for ``"vector"`` (or ``"semantic"``); an unknown value as it is."""
    try:
        return RANKINGS[search_mode(mode)]
    except InvalidArgument:
        return mode


def backend_label(backend: str) -> str:
    """``"built-in backend"`` for ``memory``, ``"PostgreSQL (pgvector) backend"``, ``"x backend"`` for a plugin."""
    return f"{BACKENDS.get(backend, backend)} backend"


__all__ = [
    "BACKENDS",
    "KEYWORD_SCORE",
    "RANKINGS",
    "RANKING_ALIASES",
    "RANKING_HELP",
    "RANKING_ORDER",
    "RANK_SCORE",
    "RERANK_SCORE",
    "SIMILARITY",
    "backend_label",
    "ranking_label",
    "search_mode",
]
