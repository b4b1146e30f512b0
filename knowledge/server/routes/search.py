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

from fastapi import APIRouter

from knowledge.errors import InvalidArgument
from knowledge.server.bodies import SearchBody
from knowledge.server.filters import SearchFilter
from knowledge.server.http import JsonRoute, bad, in_thread
from knowledge.server.objects import Api, KnowledgeApi
from knowledge.service.search import SearchRequest

router = APIRouter(tags=["search"], route_class=JsonRoute)


@router.post("/v1/vector_stores/{vs_id}/search", summary="Search a vector store")
async def search(vs_id: str, body: SearchBody, api: Api) -> dict:
    return await in_thread(search_page, api, vs_id, body)


def search_page(api: KnowledgeApi, vs_id: str, body: SearchBody) -> dict[str, Any]:
    """The ``vector_store.search_results.page`` of the search ``body`` asks for in ``vs_id`` (its
    fields' types and bounds checked by :class:`~knowledge.server.bodies.SearchBody`).

    Raises:
        ApiError: 404 an unknown store; 400 a bad filter (``param`` ``filters``).
    """
    name = api.store_name(vs_id)
    try:
        found = SearchFilter.parse(body.filters)
    except InvalidArgument as exc:
        raise bad(str(exc), "filters") from None
    ranking = body.ranking_options
    threshold = ranking.score_threshold if ranking is not None else None
    # mode, beyond OpenAI: hybrid (default), vector (semantic), lexical (keyword)
    hits = api.wb.search(
        name,
        SearchRequest(
            body.query, body.max_num_results, where=found.where, score_threshold=threshold, mode=body.mode, keep=found.keep
        ),
    )
    out = {
        "object": "vector_store.search_results.page",
        "search_query": body.query,
        "data": [api.result(h) for h in hits],
        "has_more": False,
        "next_page": None,
    }
    if body.rewrite_query:
        out["notes"] = ["rewrite_query is accepted and ignored here: the query was searched as given."]
    return out


__all__ = ["router", "search_page"]
