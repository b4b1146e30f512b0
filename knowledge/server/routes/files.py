"""``/v1/files``: OpenAI's Files API over the workbench's file store.

A file uploaded here keeps its ``purpose`` in its metadata and outlives the stores it is added to
(OpenAI's semantics). The list holds those files and the app's files a user's store holds, never a
chat's attachments. The content is always a download (``application/octet-stream``,
``Content-Disposition: attachment``), never a page of this origin.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Annotated, BinaryIO

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, Response, StreamingResponse

from knowledge.filestore.base import StoredFile
from knowledge.server.http import attachment_header, bad, in_thread, page
from knowledge.server.idempotency import once
from knowledge.server.objects import DEFAULT_PURPOSE, PURPOSES, Api, KnowledgeApi

router = APIRouter(prefix="/v1/files", tags=["files"])


@router.post("", summary="Upload a file")
async def upload_file(
    request: Request, api: Api, file: Annotated[UploadFile, File()], purpose: Annotated[str, Form()] = DEFAULT_PURPOSE
) -> Response:
    """Store the file; with an ``Idempotency-Key`` header a retry of the same upload (same name,
    bytes and purpose) answers the first file again (:mod:`knowledge.server.idempotency`)."""
    if purpose not in PURPOSES:
        raise bad(f"purpose must be one of {', '.join(PURPOSES)}, got {purpose!r}.", "purpose")
    name = file.filename or "unnamed"

    def save() -> dict:
        stored = api.wb.save_attachment(
            name,
            file.content_type,
            file.file,
            max_bytes=api.wb.settings.ingest.max_file_bytes,
            metadata={"purpose": purpose},
        )
        return api.file_object(stored)

    async def run() -> Response:
        return JSONResponse(await in_thread(save))

    if request.headers.get("idempotency-key") is None:
        return await run()
    digest, size = await in_thread(content_digest, file.file)
    params = {"filename": name, "purpose": purpose, "bytes": size, "sha256": digest}
    return await once(request, api.system.catalog, params, run)


def content_digest(fh: BinaryIO) -> tuple[str, int]:
    """``(SHA-256 hex, size in bytes)`` of a seekable stream's content, read in 1 MiB blocks; the
    stream is left at its start."""
    h, size = hashlib.sha256(), 0
    fh.seek(0)
    while block := fh.read(1 << 20):
        h.update(block)
        size += len(block)
    fh.seek(0)
    return h.hexdigest(), size


@router.get("", summary="List files")
def list_files(
    api: Api, purpose: str | None = None, limit: int | None = None, after: str | None = None, order: str | None = None
) -> dict:
    files = [api.file_object(f) for f in api.visible_files()]
    if purpose:
        files = [f for f in files if f["purpose"] == purpose]
    return page(files, limit if limit is not None else 100, after, None, order)


@router.get("/{file_id}", summary="Retrieve a file")
def get_file(file_id: str, api: Api) -> dict:
    return api.file_object(api.stored(file_id))


@router.get("/{file_id}/content", summary="The file's bytes")
def file_content(file_id: str, api: Api) -> StreamingResponse:
    f = api.stored(file_id)
    # the bytes as a download, never as a page of this origin (an uploaded HTML file runs nothing)
    return StreamingResponse(
        _blocks(api, f),
        media_type="application/octet-stream",
        headers={
            "Content-Length": str(f.size),
            "Content-Disposition": attachment_header(f.name),
            "X-Content-Type-Options": "nosniff",
        },
    )


def _blocks(api: KnowledgeApi, f: StoredFile) -> Iterator[bytes]:
    with api.wb.read_file(f.id) as fh:
        while block := fh.read(1 << 20):
            yield block


@router.delete("/{file_id}", summary="Delete a file (and its chunks in every store)")
def delete_file(file_id: str, api: Api) -> dict:
    f = api.stored(file_id)
    api.wb.delete_stored_file(f.id, from_stores=True)
    return {"id": f.id, "object": "file", "deleted": True}


__all__ = ["content_digest", "router"]
