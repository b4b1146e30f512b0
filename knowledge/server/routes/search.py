"""``POST /v1/vector_stores/{vs_id}/search``: the workbench's search of one store.

``query`` is a string (or a list of strings, joined); ``max_num_results`` 1 to 50 (default 10);
``filters`` OpenAI's comparison and compound filters (:mod:`knowledge.server.filters`), applied
inside the search's one loop, so the query is embedded once; ``ranking_options.score_threshold``
applies to ``score``, the similarity (cosine, higher is better); ``mode`` (beyond OpenAI) is the
ranking: ``hybrid`` (default), ``vector`` (Semantic; ``semantic`` is accepted too) or ``lexical`` (Keyword;
``keyword`` too), see docs/glossary.md; ``rewrite_query`` is accepted and noted,
never done. Each result's ``attributes`` hold the file's attributes plus ``page``, ``heading``,
``char_start``, ``char_end`` and ``chunk_index``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from knowledge.errors import InvalidArgument
from knowledge.server.filters import SearchFilter
from knowledge.server.http import bad, in_thread, json_body, object_field, optional_str
from knowledge.server.objects import Api, KnowledgeApi
from knowledge.service.search import SearchRequest

router = APIRouter(tags=["search"])
SEARCH_FIELDS = ("query", "max_num_results", "filters", "ranking_options", "rewrite_query", "mode")


@router.post("/v1/vector_stores/{vs_id}/search", summary="Search a vector store")
async def search(vs_id: str, request: Request, api: Api) -> dict:
    body = await json_body(request, SEARCH_FIELDS)
    return await in_thread(search_page, api, vs_id, body)


def search_page(api: KnowledgeApi, vs_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The ``vector_store.search_results.page`` of the search ``body`` asks for in ``vs_id``.

    Raises:
        ApiError: 404 an unknown store; 400 a bad field (named in ``param``).
    """
    name = api.store_name(vs_id)
    query = body.get("query")
    if isinstance(query, list) and all(isinstance(q, str) for q in query):
        query = " ".join(query)
    if not isinstance(query, str) or not query.strip():
        raise bad("query must be a non-blank string (or a list of strings).", "query")
    k = body.get("max_num_results", 10)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 50:
        raise bad(f"max_num_results must be an integer from 1 to 50, got {k!r}.", "max_num_results")
    try:
        found = SearchFilter.parse(body.get("filters"))
    except InvalidArgument as exc:
        raise bad(str(exc), "filters") from None
    ranking = object_field(body.get("ranking_options"), "ranking_options", ("ranker", "score_threshold")) or {}
    threshold = ranking.get("score_threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        raise bad("ranking_options.score_threshold must be a number.", "ranking_options")
    optional_str(ranking.get("ranker"), "ranking_options.ranker")
    if not isinstance(body.get("rewrite_query", False), bool):
        raise bad("rewrite_query must be true or false.", "rewrite_query")
    mode = optional_str(body.get("mode"), "mode")  # beyond OpenAI: hybrid (default), vector (semantic), lexical (keyword)
    hits = api.wb.search(name, SearchRequest(query, k, where=found.where, score_threshold=threshold, mode=mode,
                                             keep=found.keep))
    out = {"object": "vector_store.search_results.page", "search_query": query,
           "data": [api.result(h) for h in hits], "has_more": False, "next_page": None}
    if body.get("rewrite_query"):
        out["notes"] = ["rewrite_query is accepted and ignored here: the query was searched as given."]
    return out


__all__ = ["SEARCH_FIELDS", "router", "search_page"]
