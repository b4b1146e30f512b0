"""``/v1/vector_stores/{vs_id}/files``, ``.../file_batches`` and ``.../web_pages``: a store's files,
added in the background (a web page is fetched first, then added as a file batch's file).

Adding a file starts an :class:`~knowledge.service.jobs.IngestJob` (job rows in the catalog, ingested
by any process's worker) and answers at once, ``in_progress``, with ``openai-poll-after-ms`` (the
``openai`` package's ``*_and_poll`` helpers). The workbench's rules hold: the same bytes twice are
not indexed twice (the second is ``completed`` with ``duplicate_of``, also when both are added at
once), a changed file under the same name replaces the old one. The creating POSTs take an
``Idempotency-Key`` (:mod:`knowledge.server.idempotency`). A file's
status: ``pending``/``processing`` are ``in_progress``, ``done`` ``completed``, ``failed`` ``failed``
with ``last_error`` (or ``cancelled``). Removing a file from a store keeps the file; removing one
being added stops its own job. A batch groups files by their attributes and chunking, one ingest
batch each; the file batch and its parts are catalog rows, so any API process answers for it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from knowledge.server.bodies import Body, ChunkingStrategy, FileAttributes, FileBatch, FileEntry, WebPages
from knowledge.server.http import JsonRoute, bad, in_thread, page, polled
from knowledge.server.idempotency import once
from knowledge.server.objects import Api, KnowledgeApi

router = APIRouter(prefix="/v1/vector_stores/{vs_id}", tags=["vector store files"], route_class=JsonRoute)
STATUSES = ("in_progress", "completed", "failed", "cancelled")


def with_status(files: list[dict[str, Any]], status: str | None) -> list[dict[str, Any]]:
    """The store files (OpenAI's ``vector_store.file`` objects) whose ``status`` is ``status``; all of them
    for ``None``. The ``filter`` query parameter of a store's and a batch's file lists.

    Raises:
        ApiError: 400 naming ``filter`` when ``status`` is not one of :data:`STATUSES`."""
    if status is None:
        return files
    if status not in STATUSES:
        raise bad("filter must be in_progress, completed, failed or cancelled.", "filter")
    return [f for f in files if f["status"] == status]


def plain(strategy: ChunkingStrategy | None) -> dict[str, Any] | None:
    """A request's ``chunking_strategy`` as sent (the fields given), or ``None``."""
    return None if strategy is None else strategy.model_dump(exclude_unset=True)


def strategy_of(api: KnowledgeApi, name: str, strategy: ChunkingStrategy | None) -> Any:
    """The request's ``chunking_strategy``, else the one the store was created with."""
    return plain(strategy) or api.meta.get(name).get("chunking_strategy")


def params(body: Body) -> dict[str, Any]:
    """A body's fields as the client sent them (what makes two requests with one Idempotency-Key the same)."""
    return body.model_dump(mode="json", exclude_unset=True)


# -- one file --------------------------------------------------------------------------------------------
@router.post("/files", summary="Add a file (ingested in the background)")
async def add_file(vs_id: str, body: FileEntry, request: Request, api: Api) -> Response:
    """With an ``Idempotency-Key`` a retry of the same request answers the first one's object."""
    name = api.store_name(vs_id)
    fid = body.file_id

    async def run() -> Response:
        await in_thread(api.add_files, name, [(fid, body.attributes, strategy_of(api, name, body.chunking_strategy))])
        return polled(await in_thread(api.added_object, name, fid))

    return await once(request, api.system.catalog, params(body), run)


@router.get("/files", summary="List a store's files")
def list_store_files(
    vs_id: str,
    api: Api,
    limit: int | None = None,
    after: str | None = None,
    before: str | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> dict:
    return page(with_status(api.store_files(api.store_name(vs_id)), filter), limit, after, before, order)


@router.get("/files/{file_id}", summary="A store's file")
def get_store_file(vs_id: str, file_id: str, api: Api) -> JSONResponse:
    return polled(api.get_file(api.store_name(vs_id), file_id))


@router.post("/files/{file_id}", summary="Update attributes (and readers)")
async def update_store_file(vs_id: str, file_id: str, body: FileAttributes, api: Api) -> dict:
    """Replace the file's attributes; ``attributes.readers`` (beyond OpenAI) sets who may read it,
    and without it the readers stay as they are (:meth:`KnowledgeApi.update_file`)."""
    name = api.store_name(vs_id)
    return await in_thread(api.update_file, name, file_id, body.attributes)


@router.get("/files/{file_id}/content", summary="The file's parsed chunks")
def store_file_content(vs_id: str, file_id: str, api: Api) -> dict:
    name = api.store_name(vs_id)
    api.get_file(name, file_id)
    chunks = api.wb.vector_store(name).chunks(file_id)
    return {
        "object": "vector_store.file_content.page",
        "has_more": False,
        "next_page": None,
        "data": [{"type": "text", "text": h.text} for h in chunks],
    }


@router.delete("/files/{file_id}", summary="Remove a file from the store (the file itself stays)")
def remove_store_file(vs_id: str, file_id: str, api: Api) -> dict:
    api.remove_file(api.store_name(vs_id), file_id)
    return {"id": file_id, "object": "vector_store.file.deleted", "deleted": True}


# -- batches -------------------------------------------------------------------------------------------
def batch_entries(body: FileBatch) -> list[tuple[str, Any, Any]]:
    """``(file_id, attributes, chunking_strategy)`` of a batch request's ``file_ids`` and ``files``."""
    entries: list[tuple[str, Any, Any]] = [(fid, None, None) for fid in body.file_ids or []]
    entries += [(f.file_id, f.attributes, plain(f.chunking_strategy)) for f in body.files or []]
    if not entries:
        raise bad("Give file_ids (or files) to add.", "file_ids")
    return entries


@router.post("/file_batches", summary="Add many files")
async def create_batch(vs_id: str, body: FileBatch, request: Request, api: Api) -> Response:
    """With an ``Idempotency-Key`` a retry of the same request answers the first batch (one batch)."""
    name = api.store_name(vs_id)
    entries = batch_entries(body)

    async def run() -> Response:
        b = await in_thread(api.create_batch, name, entries, body.attributes, strategy_of(api, name, body.chunking_strategy))
        return polled(await in_thread(api.batch_object, b))

    return await once(request, api.system.catalog, params(body), run)


@router.post("/web_pages", summary="Add a web page (and the pages it links to on its site)")
async def add_web_pages(vs_id: str, body: WebPages, request: Request, api: Api) -> Response:
    """Fetch ``url`` now (``depth`` 0-3 links away on the same site, at most ``max_pages``) and add
    the pages as a file batch; the answer is the ``vector_store.files_batch`` with ``web_pages``:
    each page tried, ``added``/``unchanged``/``failed`` with its ``last_error``. Takes an
    ``Idempotency-Key`` as a file batch does."""
    name = api.store_name(vs_id)

    async def run() -> Response:
        b, pages = await in_thread(
            api.add_web_pages,
            name,
            body.url,
            body.depth,
            body.max_pages,
            body.attributes,
            strategy_of(api, name, body.chunking_strategy),
        )
        return polled({**await in_thread(api.batch_object, b), "web_pages": pages})

    return await once(request, api.system.catalog, params(body), run)


@router.get("/file_batches/{batch_id}", summary="A batch")
def get_batch(vs_id: str, batch_id: str, api: Api) -> JSONResponse:
    return polled(api.batch_object(api.batch(api.store_name(vs_id), batch_id)))


@router.post("/file_batches/{batch_id}/cancel", summary="Cancel a batch")
def cancel_batch(vs_id: str, batch_id: str, api: Api) -> dict:
    b = api.batch(api.store_name(vs_id), batch_id)
    return api.batch_object(api.cancel_batch(b))


@router.get("/file_batches/{batch_id}/files", summary="The batch's files")
def batch_files(
    vs_id: str,
    batch_id: str,
    api: Api,
    limit: int | None = None,
    after: str | None = None,
    before: str | None = None,
    order: str | None = None,
    filter: str | None = None,
) -> dict:
    files = api.batch_files(api.batch(api.store_name(vs_id), batch_id))
    return page(with_status(files, filter), limit, after, before, order)


__all__ = ["STATUSES", "batch_entries", "params", "plain", "router", "strategy_of"]
