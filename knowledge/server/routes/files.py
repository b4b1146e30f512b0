"""``/v1/files``: OpenAI's Files API over the workbench's file store.

A file uploaded here keeps its ``purpose`` in its metadata and outlives the stores it is added to
(OpenAI's semantics). The list holds those files and the app's files a user's store holds, never a
chat's attachments. The content is always a download (``application/octet-stream``,
``Content-Disposition: attachment``), never a page of this origin.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import StreamingResponse

from knowledge.filestore.base import StoredFile
from knowledge.server.http import attachment_header, bad, page
from knowledge.server.objects import DEFAULT_PURPOSE, PURPOSES, Api, KnowledgeApi

router = APIRouter(prefix="/v1/files", tags=["files"])


@router.post("", summary="Upload a file")
def upload_file(api: Api, file: Annotated[UploadFile, File()],
                purpose: Annotated[str, Form()] = DEFAULT_PURPOSE) -> dict:
    if purpose not in PURPOSES:
        raise bad(f"purpose must be one of {', '.join(PURPOSES)}, got {purpose!r}.", "purpose")
    stored = api.wb.save_attachment(file.filename or "unnamed", file.content_type, file.file,
                                    max_bytes=api.wb.settings.ingest.max_file_bytes, metadata={"purpose": purpose})
    return api.file_object(stored)


@router.get("", summary="List files")
def list_files(api: Api, purpose: str | None = None, limit: int | None = None, after: str | None = None,
               order: str | None = None) -> dict:
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
    return StreamingResponse(_blocks(api, f), media_type="application/octet-stream",
                             headers={"Content-Length": str(f.size), "Content-Disposition": attachment_header(f.name),
                                      "X-Content-Type-Options": "nosniff"})


def _blocks(api: KnowledgeApi, f: StoredFile) -> Iterator[bytes]:
    with api.wb.read_file(f.id) as fh:
        while block := fh.read(1 << 20):
            yield block


@router.delete("/{file_id}", summary="Delete a file (and its chunks in every store)")
def delete_file(file_id: str, api: Api) -> dict:
    f = api.stored(file_id)
    api.wb.delete_stored_file(f.id, from_stores=True)
    return {"id": f.id, "object": "file", "deleted": True}


__all__ = ["router"]
