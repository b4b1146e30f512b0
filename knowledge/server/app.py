"""The REST API's application: :func:`create_app` builds the FastAPI app over a workbench and
:func:`serve` runs it with uvicorn (``python -m knowledge serve``).

The app is the routers of :mod:`knowledge.server.routes` behind :class:`~knowledge.server.guard.Guard`
(Host, Origin, the key, JSON only, uploads, body size; nosniff and a CSP on every response), with
``app.state.api`` the :class:`~knowledge.server.objects.KnowledgeApi` the handlers share. Once user
accounts exist every request needs its user's key and acts as that user (the Guard puts the actor
in ``request.state``; the ``Api`` dependency hands the route the API over the user's view). Every
error is answered with OpenAI's body: an :class:`~knowledge.server.http.ApiError` as raised, a
service error by its class (:func:`~knowledge.server.http.from_knowledge`; a backend that cannot be
reached now, or a database error no backend worded, as 503 with ``Retry-After``), a request FastAPI
cannot read as 400, an unknown path as 404, and a bug as 500 with the details in the log only.
What the API is, object by object: ``docs/api.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg
import uvicorn
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from knowledge.chat import Chats
from knowledge.errors import KnowledgeError
from knowledge.server.guard import Guard
from knowledge.server.http import ApiError, check_bind, from_knowledge, unavailable, validation_error
from knowledge.server.idempotency import HEADER as IDEMPOTENCY_HEADER
from knowledge.server.idempotency import REPLAYED
from knowledge.server.objects import ApiState, KnowledgeApi
from knowledge.server.ops import PROBE_PATHS, Observed, OpsEndpoints, metrics_token, watch_queue
from knowledge.server.routes import chat as chat_routes
from knowledge.server.routes import files, people, search, sources, store_files, usage, vector_stores
from knowledge.server.scim import PREFIX as SCIM_PREFIX
from knowledge.server.scim import router as scim_router
from knowledge.system import System
from knowledge.telemetry import REQUEST_ID_HEADER, configure_logging, configure_tracing, uvicorn_logging
from knowledge.workbench import Workbench

log = logging.getLogger(__name__)

DEFAULT_PORT = 8900
ROUTERS = (
    files.router,
    vector_stores.router,
    store_files.router,
    search.router,
    chat_routes.router,
    people.router,
    sources.router,
    usage.router,
    scim_router,
)


# -- errors, each answered with OpenAI's body -----------------------------------------------------------
async def api_error(request: Request, exc: ApiError) -> JSONResponse:
    return exc.response()


async def knowledge_error(request: Request, exc: KnowledgeError) -> JSONResponse:
    return from_knowledge(exc).response()


async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
    return validation_error(exc.errors()).response()


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = "not_found" if exc.status_code == 404 else None
    return ApiError(exc.status_code, str(exc.detail), code=code).response()


async def unexpected(request: Request, exc: Exception) -> JSONResponse:  # a bug: logged, not shown
    if isinstance(exc, (psycopg.OperationalError, PoolTimeout)):  # a lost server a backend did not word
        log.warning("%s %s: the database cannot be reached: %s", request.method, request.url.path, exc)
        return unavailable(f"The database cannot be reached now ({str(exc).strip().splitlines()[0]}).").response()
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return ApiError(
        500,
        "The server failed on this request (an unexpected error; the server's log has the details).",
        type="server_error",
        code="server_error",
    ).response()


HANDLERS: tuple[tuple[type[Exception], Callable[..., Any]], ...] = (
    (ApiError, api_error),
    (KnowledgeError, knowledge_error),
    (RequestValidationError, invalid_request),
    (StarletteHTTPException, http_error),
    (Exception, unexpected),
)


def create_app(system: System, *, api_key: str | None = None, chats: Chats | None = None) -> FastAPI:
    """The FastAPI application over ``system`` (``/openapi.json``; the page ``/docs`` with ``api.docs``).
    Each request acts through a :class:`~knowledge.workbench.Workbench` over it: its key's user's
    once accounts exist, else the local admin's.

    Args:
        system: the parts of the data folder (thread-safe; requests run in worker threads); the
            caller, an entry point, closes it.
        api_key: when set (and no user account exists), every request needs ``Authorization: Bearer
            <api_key>``. Once accounts exist every request needs a user's key (``kn-...``) and acts
            as that user; ``api_key`` is refused.
        chats: the chat state every person shares (:class:`~knowledge.chat.Chats`; default: built
            here over ``system``); each person's chat service is built over it.
    """
    wb = Workbench(system)
    settings = wb.settings.api
    app = FastAPI(
        title="knowledge: OpenAI-compatible Files, Vector Stores and Chat",
        description="A local drop-in for OpenAI's Files + Vector Stores API and chat completions,"
        " over the knowledge workbench's stores.",
        version="1",
        docs_url="/docs" if settings.docs else None,
        redoc_url=None,
    )
    app.state.api = KnowledgeApi(ApiState(system, chats), wb)
    max_file = wb.settings.ingest.max_file_bytes
    app.add_middleware(OpsEndpoints, readiness=wb.readiness(), metrics=wb.settings.ops.metrics)  # inside the Guard
    watch_queue(wb)
    app.add_middleware(
        Guard,
        api_key=api_key,
        max_body=int(max_file * 4 / 3) + 1_000_000,
        allowed_hosts=settings.allowed_hosts,
        cors_origins=settings.cors_origins,
        upload_paths=("/v1/files",),
        open_paths=("/docs", "/docs/oauth2-redirect") if settings.docs else (),
        allow_headers=("Authorization", "Content-Type", chat_routes.SESSION_HEADER, IDEMPOTENCY_HEADER, REQUEST_ID_HEADER),
        expose_headers=(chat_routes.SESSION_HEADER, "openai-poll-after-ms", REPLAYED, "Retry-After", REQUEST_ID_HEADER),
        people=wb,
        trusted_proxies=wb.settings.server.trusted_proxies,
        token_paths=(SCIM_PREFIX + "/",),
        probe_paths=PROBE_PATHS,
        metrics_token=metrics_token(wb.settings),
    )
    app.add_middleware(Observed, server="api")  # outermost: every request's id, span, metrics, log line
    for exc_class, handler in HANDLERS:
        app.add_exception_handler(exc_class, handler)
    for router in ROUTERS:
        app.include_router(router)
    return app


def resume_jobs(system: System) -> int:
    """At the start: the ingestion jobs a stopped or killed process left unfinished are resumed by
    this process's worker (:meth:`knowledge.service.jobs.JobRegistry.resume`); a catalog that cannot
    be read now is logged, not fatal (the next batch starts the worker). Returns how many were unfinished."""
    try:
        return system.jobs.resume()
    except KnowledgeError:
        logging.getLogger(__name__).warning("could not look for unfinished ingestion jobs", exc_info=True)
        return 0


def serve(
    host: str = "127.0.0.1", port: int = DEFAULT_PORT, *, system: System | None = None, log_level: str = "info"
) -> None:
    """Run the API with uvicorn until interrupted (``python -m knowledge serve``). At the start, this
    process's worker takes over the catalog's queued ingest jobs, if any (of any process).

    Raises:
        ConfigError: a non-loopback ``host`` without ``KNOWLEDGE_API_KEY`` while no user account
            exists (with accounts, each request needs its user's key).
    """
    own = system is None
    system = system or System()
    wb = Workbench(system)
    key = wb.settings.api_key.get_secret_value() if wb.settings.api_key else None
    check_bind(host, key, accounts=wb.accounts.enabled())
    configure_logging(wb.settings)
    configure_tracing(wb.settings, "api")
    resume_jobs(system)  # files queued (or left running by a stopped process) are ingested again
    system.start_scheduler()  # the sources' runs as they fall due
    try:
        uvicorn.run(
            create_app(system, api_key=key), host=host, port=port, log_level=log_level, **uvicorn_logging(wb.settings)
        )
    finally:
        system.jobs.stop_all()
        if own:  # a system given by the entry point is closed there
            system.close()


__all__ = ["DEFAULT_PORT", "HANDLERS", "ROUTERS", "create_app", "resume_jobs", "serve"]
