"""The REST API's routes, one :class:`fastapi.APIRouter` per resource (FastAPI's "bigger
applications" layout): :mod:`.files` (``/v1/files``), :mod:`.vector_stores` (``/v1/vector_stores``),
:mod:`.store_files` (a store's files and file batches), :mod:`.search` (a store's search),
:mod:`.chat` (``/v1/models``, ``/v1/chat/completions``), :mod:`.people` (ours:
``/v1/knowledge/me``, ``/v1/knowledge/audit``) and :mod:`.sources` (ours: ``/v1/sources``,
``/v1/source-kinds``). :func:`knowledge.server.app.create_app` includes
them. Handlers are module-level functions; each gets the request's
:class:`~knowledge.server.objects.KnowledgeApi` as its parameter ``api:``
:data:`~knowledge.server.objects.Api` (acting for the key's user once accounts exist) and raises
:class:`~knowledge.server.http.ApiError` for a bad request. A handler that blocks on the service
layer is a plain ``def`` (FastAPI runs it in a worker thread), or awaits
:func:`~knowledge.server.http.in_thread` after reading the JSON body.
"""
