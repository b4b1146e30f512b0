"""``/v1/sources`` and ``/v1/source-kinds``: this server's own endpoints for sources -- shares,
repositories, mailboxes, drives and buckets a store is kept in sync with (:mod:`knowledge.sources`;
OpenAI has none of these). Each call is one :attr:`Workbench.sources
<knowledge.workbench.Workbench.sources>` method, so it is checked and audited as from the app or
the CLI.

* ``GET /v1/source-kinds``: the kinds and their settings (``fields``, each ``secret`` or not).
* ``GET /v1/sources`` (``?store=``), ``POST /v1/sources``: the sources of the stores the caller may
  read; a new one (the store's owner, or anyone who may make a store: a new store is theirs).
* ``GET``, ``PATCH``, ``DELETE /v1/sources/{name}`` (``{name}`` or the source's id): one source; a
  change (``config`` merges: a secret left out is kept; the other fields given replace); removing it
  (``?keep_files=true``: its files stay in the store as if added by hand).
* ``POST /v1/sources/{name}/runs``: queue a run for the workers (202, the run: the one queued or
  running already when there is one); ``GET /v1/sources/{name}/runs`` (``?limit=``, newest first);
  ``GET /v1/sources/{name}/runs/{run_id}``: a run with each file's outcome (``items``).
* ``POST /v1/sources/{name}/pause`` and ``/resume``; ``POST /v1/sources/{name}/check`` (connect and
  look: ``reachable`` and the words); ``GET /v1/sources/{name}/plan`` (a dry run).

Secrets are write-only: a secret setting (a password, a token, a key) is accepted in ``config`` and
never returned -- a source names the secrets it has in ``secrets_set``. Errors in the API's shape:
a source (or run) the caller may not see is 404 ``not_found``, as one that does not exist; a store
they may read but not run or change, 403 ``permission_denied``; a bad setting 400 naming it; the
source's own server failing a plan (down, refused credentials, no such location) 502 with ``code``
``source_unavailable``, ``source_auth_failed``, ``source_not_found`` or ``source_error``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter
from pydantic import Field

from knowledge.errors import InvalidArgument
from knowledge.server.bodies import Body
from knowledge.server.http import ApiError, JsonRoute, bad
from knowledge.server.objects import Api, KnowledgeApi, ts
from knowledge.sources.base import SourceAuthFailed, SourceError, SourceNotFound, SourceUnavailable
from knowledge.sources.engine import RUNS_KEPT, RunItem, RunRecord, SourceRecord
from knowledge.sources.shown import kind_object, location

router = APIRouter(prefix="/v1", tags=["sources"], route_class=JsonRoute)
T = TypeVar("T")

#: A setting's value as a body gives it: text, a number, true/false, a list of text.
Value = str | int | bool | list[str] | None


class NewSource(Body):
    """A source to keep: its name, kind, store and settings (``config``, secrets included: they are
    kept encrypted and never returned)."""

    name: str = Field(description="Its name, 1-100 characters, unique.")
    kind: str = Field(description="A kind of GET /v1/source-kinds (smb, webdav, git, imap, s3, ...).")
    store: str = Field(description="The store its files go to (a new one is made, the caller's).")
    config: dict[str, Value] = Field(
        default_factory=dict, description="The kind's settings by name, secret ones included (write-only)."
    )
    include: list[str] = Field(default_factory=list, description="Globs of the files to take (none: every file).")
    exclude: list[str] = Field(default_factory=list, description="Globs of the files to leave out.")
    max_bytes: int | None = Field(default=None, description="Leave out larger files (null: sources.max_file_bytes).")
    every_minutes: int | None = Field(default=None, description="Run every N minutes (null: by hand only).")
    readers: list[str] | str | None = Field(
        default=None,
        description="Who may read its files where the source says nothing itself (principals such as"
        " 'group:hr', 'user:ana'; null: everyone who may read the store).",
    )
    paused: bool = Field(default=False, description="Added paused: its schedule does not run until resumed.")
    template: str | None = Field(default=None, description="The template of a new store (default: default).")


class SourceChange(Body):
    """A change of a source: ``config`` merges (a secret left out or blank is kept); every other
    field given replaces (``null``: no size limit of its own, by hand only, the store's sharing)."""

    config: dict[str, Value] | None = None
    include: list[str] | None = None
    exclude: list[str] | None = None
    max_bytes: int | None = None
    every_minutes: int | None = None
    readers: list[str] | str | None = None


_SOURCE_CODES: tuple[tuple[type[SourceError], str], ...] = (
    (SourceUnavailable, "source_unavailable"),
    (SourceAuthFailed, "source_auth_failed"),
    (SourceNotFound, "source_not_found"),
)


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` (a ``wb.sources`` method) with its refusals worded for the API: no
    such source or run (also one the caller may not see) 404; the source's own server failing 502."""
    try:
        return fn(*args, **kwargs)
    except InvalidArgument as exc:
        if exc.param in ("source", "run"):
            raise ApiError(404, str(exc), param=exc.param, code="not_found") from None
        raise
    except SourceError as exc:
        code = next((c for cls, c in _SOURCE_CODES if isinstance(exc, cls)), "source_error")
        raise ApiError(502, str(exc), type="server_error", code=code) from None


def run_object(name: str, run: RunRecord, items: list[RunItem] | None = None) -> dict[str, Any]:
    """A run as the API answers it (``items``, each file's outcome, with one run only)."""
    out: dict[str, Any] = {
        "id": run.id,
        "object": "knowledge.source.run",
        "source": name,
        "cause": run.cause,
        "status": run.status,
        "counts": dict(run.counts),
        "reason": run.reason,
        "queued_at": ts(run.queued),
        "started_at": ts(run.started) if run.started else None,
        "finished_at": ts(run.finished) if run.finished else None,
    }
    if items is not None:
        out["items"] = [i.to_json() for i in items]
    return out


def source_object(api: KnowledgeApi, rec: SourceRecord, *, last: bool = True) -> dict[str, Any]:
    """A source as the API answers it: its settings without a secret (``secrets_set`` names those
    that have a value), where it is, its schedule, and its last run (``last``)."""
    runs = call(api.wb.sources.runs, rec.name, 1) if last else []
    return {
        "id": rec.id,
        "object": "knowledge.source",
        "name": rec.name,
        "kind": rec.kind,
        "store": rec.store,
        "location": location(api.wb.sources.kinds().get(rec.kind), rec, api.wb.settings),
        "config": dict(rec.config),
        "secrets_set": list(rec.secrets_set),
        "include": list(rec.include),
        "exclude": list(rec.exclude),
        "max_bytes": rec.max_bytes,
        "every_minutes": rec.every_minutes,
        "paused": rec.paused,
        "readers": list(rec.readers) if rec.readers is not None else None,
        "next_run_at": ts(rec.next_run) if rec.next_run else None,
        "created_by": rec.created_by,
        "created_at": ts(rec.created),
        "last_run": run_object(rec.name, runs[0]) if runs else None,
    }


@router.get("/source-kinds", summary="The kinds of source and their settings (which are secret)")
def list_kinds(api: Api) -> dict:
    return {"object": "list", "data": [kind_object(n, c) for n, c in sorted(api.wb.sources.kinds().items())]}


@router.get("/sources", summary="The sources of the stores the caller may read")
def list_sources(api: Api, store: str | None = None) -> dict:
    return {"object": "list", "data": [source_object(api, r) for r in api.wb.sources.records(store or None)]}


@router.post("/sources", summary="Keep a new source (its store's owner; a new store is the caller's)")
def create_source(body: NewSource, api: Api) -> dict:
    kinds = api.wb.sources.kinds()
    if body.kind not in kinds:  # not the 503 of a plugin that fails to load: a kind this server lacks
        raise bad(
            f"There is no source kind {body.kind!r} here; the kinds are {', '.join(sorted(kinds)) or 'none'}"
            " (GET /v1/source-kinds).",
            "kind",
        )
    extra = {"template": body.template} if body.template else {}
    rec = call(
        api.wb.sources.add,
        body.name,
        body.kind,
        body.store,
        body.config,
        include=body.include,
        exclude=body.exclude,
        max_bytes=body.max_bytes,
        every_minutes=body.every_minutes,
        readers=body.readers,
        paused=body.paused,
        **extra,
    )
    return source_object(api, rec, last=False)


@router.get("/sources/{name}", summary="One source (by name or id)")
def get_source(name: str, api: Api) -> dict:
    return source_object(api, call(api.wb.sources.get, name))


@router.patch("/sources/{name}", summary="Change a source (its store's owner; a secret left out is kept)")
def modify_source(name: str, body: SourceChange, api: Api) -> dict:
    changes = {k: getattr(body, k) for k in body.model_fields_set}
    if not changes:
        raise bad("Nothing to change: give config, include, exclude, max_bytes, every_minutes or readers.")
    return source_object(api, call(api.wb.sources.update, name, **changes))


@router.delete("/sources/{name}", summary="Remove a source and its runs, and its files unless keep_files")
def delete_source(name: str, api: Api, keep_files: bool = False) -> dict:
    rec = call(api.wb.sources.get, name)
    removed = call(api.wb.sources.remove, rec.name, delete_files=not keep_files)
    return {"id": rec.id, "object": "knowledge.source.deleted", "name": rec.name, "deleted": True, "files_removed": removed}


@router.post("/sources/{name}/runs", status_code=202, summary="Queue a run for the workers (write access)")
def start_run(name: str, api: Api) -> dict:
    rec = call(api.wb.sources.get, name)
    return run_object(rec.name, call(api.wb.sources.run, rec.name))


@router.get("/sources/{name}/runs", summary="A source's runs, newest first")
def list_runs(name: str, api: Api, limit: int = 20) -> dict:
    if not 1 <= limit <= RUNS_KEPT:
        raise bad(f"limit must be between 1 and {RUNS_KEPT}, got {limit}.", "limit")
    rec = call(api.wb.sources.get, name)
    return {"object": "list", "data": [run_object(rec.name, r) for r in call(api.wb.sources.runs, rec.name, limit)]}


@router.get("/sources/{name}/runs/{run_id}", summary="A run with each file's outcome")
def get_run(name: str, run_id: str, api: Api) -> dict:
    rec = call(api.wb.sources.get, name)
    run = next((r for r in call(api.wb.sources.runs, rec.name, RUNS_KEPT) if r.id == run_id), None)
    if run is None:
        raise ApiError(404, f"There is no run {run_id!r} of the source {rec.name!r}.", param="run_id", code="not_found")
    return run_object(rec.name, run, call(api.wb.sources.run_items, run.id))


@router.post("/sources/{name}/pause", summary="Pause a source's schedule (write access)")
def pause_source(name: str, api: Api) -> dict:
    return source_object(api, call(api.wb.sources.pause, name, True))


@router.post("/sources/{name}/resume", summary="Resume a source's schedule (write access)")
def resume_source(name: str, api: Api) -> dict:
    return source_object(api, call(api.wb.sources.pause, name, False))


@router.post("/sources/{name}/check", summary="Connect to the source and look, reading no file (write access)")
def check_source(name: str, api: Api) -> dict:
    rec = call(api.wb.sources.get, name)
    try:
        said, reachable = api.wb.sources.check(rec.name), True
    except SourceError as exc:
        said, reachable = str(exc), False
    return {"object": "knowledge.source.check", "source": rec.name, "reachable": reachable, "message": said}


@router.get("/sources/{name}/plan", summary="A dry run: what the next run would change (write access)")
def plan_source(name: str, api: Api) -> dict:
    plan = call(api.wb.sources.plan, name)
    return {"object": "knowledge.source.plan", **plan.to_json(), "summary": plan.summary()}


__all__ = ["NewSource", "SourceChange", "router", "run_object", "source_object"]
