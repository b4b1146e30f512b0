"""``/v1/vector_stores``: OpenAI's vector stores, each a store of the workbench.

A store's id is :func:`~knowledge.server.objects.vector_store_id` of its name, so the app's stores
have ids too. Names are unique: creating a name that exists returns that store (with the request's
``metadata``/``expires_after``); a name is its identity, so renaming is refused. ``template`` (beyond
OpenAI) names the store's template; ``chunking_strategy`` is the default of the files added later.
``expires_after`` is kept and reported, never enforced. Deleting a store keeps the files uploaded
through the Files API. A chat session's own store is not the API's: its name cannot be taken.
Once user accounts exist a store made here is the caller's, private; the list holds only the stores
the caller may see, any other is 404; changing a store's fields needs write access, deleting it
its owner (or an admin), else 403 ``permission_denied``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request

from knowledge.catalog import rest
from knowledge.server.http import (
    bad,
    check_name,
    in_thread,
    json_body,
    object_field,
    optional_str,
    page,
    strings,
)
from knowledge.server.objects import Api, KnowledgeApi

router = APIRouter(prefix="/v1/vector_stores", tags=["vector stores"])
CREATE_FIELDS = ("name", "file_ids", "metadata", "expires_after", "chunking_strategy", "description", "template")


def check_metadata(metadata: Any) -> dict[str, str]:
    """OpenAI's ``metadata``: at most 16 pairs, keys up to 64 and values up to 512 characters, strings."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or len(metadata) > 16 or not all(
            isinstance(k, str) and 0 < len(k) <= 64 and isinstance(v, str) and len(v) <= 512
            for k, v in metadata.items()):
        raise bad("metadata must be an object of at most 16 string pairs (keys up to 64 characters, values"
                  " up to 512).", "metadata")
    return dict(metadata)


def check_expires(value: Any) -> dict[str, Any] | None:
    """OpenAI's ``expires_after``: ``{"anchor": "last_active_at", "days": 1..365}`` or ``None``."""
    v = object_field(value, "expires_after", ("anchor", "days"))
    if v is None:
        return None
    days = v.get("days")
    if v.get("anchor") != "last_active_at" or isinstance(days, bool) or not isinstance(days, int) \
            or not 1 <= days <= 365:
        raise bad("expires_after must be {\"anchor\": \"last_active_at\", \"days\": 1 to 365}.", "expires_after")
    return dict(v)


@router.post("", summary="Create a vector store")
async def create_store(request: Request, api: Api) -> dict:
    body = await json_body(request, CREATE_FIELDS)
    return await in_thread(created, api, body)


def created(api: KnowledgeApi, body: dict[str, Any]) -> dict[str, Any]:
    """The store ``body`` asks for, made (or found), as a ``vector_store`` object. Every check runs
    before the store is recorded: a refused create leaves nothing behind."""
    name = check_name(body.get("name") or f"vs-{secrets.token_hex(6)}")
    if api.internal_store(name):
        raise bad(f"The name {name!r} is taken by a chat session's own store; choose another.", "name")
    metadata = check_metadata(body.get("metadata"))
    expires = check_expires(body.get("expires_after"))
    description = optional_str(body.get("description"), "description")
    template = optional_str(body.get("template"), "template") or "default"  # beyond OpenAI
    strategy = object_field(body.get("chunking_strategy"), "chunking_strategy")
    file_ids = strings(body.get("file_ids"), "file_ids")
    api.template_for(name, strategy, template=template, save=False)
    for fid in file_ids:
        api.stored(fid)
    existed = api.wb.store_exists(name)
    if not existed and api.wb.name_taken(name):  # another user's store: its name is taken
        raise bad(f"The name {name!r} is not available; choose another.", "name")
    if existed and (metadata or expires is not None or description is not None or strategy or file_ids):
        api.wb.authorize(name, "write")  # the request changes a store that is there already
    api.wb.create_store(name, template)
    meta = api.meta.get(name)
    api.meta.put(name, {**meta, "metadata": metadata or meta.get("metadata", {}), "expires_after": expires,
                        "chunking_strategy": strategy,
                        "description": description if description is not None else meta.get("description")})
    if file_ids:
        api.add_files(name, [(fid, None, None) for fid in file_ids], default_strategy=strategy)
    return api.store_object(name)


@router.get("", summary="List vector stores")
def list_stores(api: Api, limit: int | None = None, after: str | None = None, before: str | None = None,
                order: str | None = None) -> dict:
    return page([api.store_object(n) for n in api.wb.store_names()], limit, after, before, order)


@router.get("/{vs_id}", summary="Retrieve a vector store")
def get_store(vs_id: str, api: Api) -> dict:
    return api.store_object(api.store_name(vs_id))


@router.post("/{vs_id}", summary="Modify a vector store (metadata)")
async def modify_store(vs_id: str, request: Request, api: Api) -> dict:
    body = await json_body(request, ("name", "metadata", "expires_after"))
    name = api.store_name(vs_id)
    if body.get("name") not in (None, name):
        raise bad("Renaming a vector store is not supported here (its name is its identity).", "name")
    meta = api.meta.get(name)
    if "metadata" in body:
        meta["metadata"] = check_metadata(body["metadata"])
    if "expires_after" in body:
        meta["expires_after"] = check_expires(body["expires_after"])
    api.wb.authorize(name, "write")
    api.meta.put(name, meta)
    api.wb.record("store.update", store=name, detail={k: body[k] for k in ("metadata", "expires_after") if k in body})
    return await in_thread(api.store_object, name)


@router.delete("/{vs_id}", summary="Delete a vector store")
def delete_store(vs_id: str, api: Api) -> dict:
    name = api.store_name(vs_id)
    wb = api.wb
    wb.authorize(name, "owner")  # before any file is taken out of it
    for rec in wb.file_records(name):  # files uploaded through the Files API outlive the store
        f = wb.find_stored_file(rec.file_id)
        if f is not None and "purpose" in f.metadata:
            wb.delete_file(name, rec.file_id, keep_file=True)
    wb.delete_store(name)
    rest.forget_store(wb.catalog, name)
    return {"id": vs_id, "object": "vector_store.deleted", "deleted": True}


__all__ = ["CREATE_FIELDS", "check_expires", "check_metadata", "created", "router"]
