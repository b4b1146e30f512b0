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
from typing import Any

from fastapi import APIRouter

from knowledge.catalog import rest
from knowledge.server.bodies import CreateStore, ExpiresAfter, ModifyStore
from knowledge.server.http import JsonRoute, bad, check_name, in_thread, page
from knowledge.server.objects import Api, KnowledgeApi

router = APIRouter(prefix="/v1/vector_stores", tags=["vector stores"], route_class=JsonRoute)


def expiry(value: ExpiresAfter | None) -> dict[str, Any] | None:
    """``expires_after`` as kept and reported: ``{"anchor": "last_active_at", "days": n}`` or ``None``."""
    return None if value is None else value.model_dump()


@router.post("", summary="Create a vector store")
async def create_store(api: Api, body: CreateStore | None = None) -> dict:
    return await in_thread(created, api, body or CreateStore())


def created(api: KnowledgeApi, body: CreateStore) -> dict[str, Any]:
    """The store ``body`` asks for, made (or found), as a ``vector_store`` object. Every check runs
    before the store is recorded: a refused create leaves nothing behind."""
    name = check_name(body.name or f"vs-{secrets.token_hex(6)}")
    if api.internal_store(name):
        raise bad(f"The name {name!r} is taken by a chat session's own store; choose another.", "name")
    metadata = dict(body.metadata or {})
    expires = expiry(body.expires_after)
    description = body.description
    template = body.template or "default"  # beyond OpenAI
    # kept as sent (fields not given stay out), the default of the files added later
    strategy = body.chunking_strategy.model_dump(exclude_unset=True) if body.chunking_strategy else None
    file_ids = list(body.file_ids or [])
    api.template_for(name, body.chunking_strategy, template=template, save=False)
    for fid in file_ids:
        api.stored(fid)
    existed = api.wb.store_exists(name)
    if not existed and api.wb.name_taken(name):  # another user's store: its name is taken
        raise bad(f"The name {name!r} is not available; choose another.", "name")
    if existed and (metadata or expires is not None or description is not None or strategy or file_ids):
        api.wb.authorize(name, "write")  # the request changes a store that is there already
    api.wb.create_store(name, template)
    meta = api.meta.get(name)
    api.meta.put(
        name,
        {
            **meta,
            "metadata": metadata or meta.get("metadata", {}),
            "expires_after": expires,
            "chunking_strategy": strategy,
            "description": description if description is not None else meta.get("description"),
        },
    )
    if file_ids:
        api.add_files(name, [(fid, None, None) for fid in file_ids], default_strategy=strategy)
    return api.store_object(name)


@router.get("", summary="List vector stores")
def list_stores(
    api: Api, limit: int | None = None, after: str | None = None, before: str | None = None, order: str | None = None
) -> dict:
    return page([api.store_object(n) for n in api.wb.store_names()], limit, after, before, order)


@router.get("/{vs_id}", summary="Retrieve a vector store")
def get_store(vs_id: str, api: Api) -> dict:
    return api.store_object(api.store_name(vs_id))


@router.post("/{vs_id}", summary="Modify a vector store (metadata)")
async def modify_store(vs_id: str, api: Api, body: ModifyStore | None = None) -> dict:
    body = body or ModifyStore()
    name = api.store_name(vs_id)
    if body.name not in (None, name):
        raise bad("Renaming a vector store is not supported here (its name is its identity).", "name")
    meta = api.meta.get(name)
    given = body.model_fields_set
    if "metadata" in given:
        meta["metadata"] = dict(body.metadata or {})
    if "expires_after" in given:
        meta["expires_after"] = expiry(body.expires_after)
    api.wb.authorize(name, "write")
    api.meta.put(name, meta)
    api.wb.record("store.update", store=name, detail=body.model_dump(include={"metadata", "expires_after"} & given))
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
    rest.forget_store(api.system.catalog, name)
    return {"id": vs_id, "object": "vector_store.deleted", "deleted": True}


__all__ = ["created", "expiry", "router"]
