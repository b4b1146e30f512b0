"""Errors of the infrastructure, told apart from the file's own (issue 39).

An ingestion can fail because of the *file* (unreadable, encrypted, too large, past a reader's
limits: it would fail the same way again, so the file fails) or because of the *infrastructure*
(the catalog, the file store or a vector backend cannot be reached; this worker's disk is full or
broken; this worker runs out of memory; the embedding model cannot load). An infrastructure error
never fails a file: the job goes back to the queue with a back-off (:func:`backoff_seconds`) and
the file's record says why it waits ("waiting: the file store cannot be reached (...)").

:func:`classify` walks an exception and its causes (``__cause__``, then ``__context__``) and
returns a :class:`Transient` (its words, and whether the trouble is this worker's own: its disk,
memory or model -- a worker that keeps failing for its own reasons stands down, while an outage
of the shared catalog or file store is seen by every worker alike) or ``None`` for the file's own
errors and bugs. Library classes (psycopg, botocore, httpx) are recognised by their module and
name, so this module imports none of them.
"""

from __future__ import annotations

import errno
import random
from dataclasses import dataclass

from knowledge.errors import (
    BackendUnavailable,
    EmbeddingUnavailable,
    EmptyDocument,
    FileTooLarge,
    InvalidArgument,
    PasswordRequired,
    StorageError,
    UnsupportedFile,
)

#: The file's own errors: it would fail the same way on any worker (``UnsupportedFile`` covers
#: ``ReaderLimitExceeded``, ``ReaderCrashed`` and ``OcrUnavailable``). Seen anywhere in the chain
#: before an infrastructure error, the file fails.
FILE_ERRORS: tuple[type[BaseException], ...] = (
    UnsupportedFile,
    PasswordRequired,
    EmptyDocument,
    FileTooLarge,
    InvalidArgument,
)

#: ``errno`` values of a disk that cannot take a write or give back a read (full, over quota,
#: read-only, an I/O error) and of a machine out of memory.
DISK_ERRNOS = {
    errno.ENOSPC: "is full",
    errno.EDQUOT: "is over its quota",
    errno.EROFS: "is read-only",
    errno.EIO: "failed to read or write (an I/O error)",
}

#: Library exceptions of a lost or refused connection, by top-level module and class name.
_CONNECTION_CLASSES = {
    "psycopg": {"OperationalError", "InterfaceError"},
    "psycopg_pool": {"PoolTimeout", "PoolClosed", "TooManyRequests"},
    "botocore": {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "ConnectionError",
    },
    "urllib3": {"NewConnectionError", "ProtocolError", "MaxRetryError"},
    "httpx": {"ConnectError", "ConnectTimeout", "ReadTimeout", "RemoteProtocolError", "PoolTimeout"},
    "httpcore": {"ConnectError", "ConnectTimeout", "ReadTimeout", "RemoteProtocolError", "PoolTimeout"},
    "requests": {"ConnectionError", "ConnectTimeout"},
}


@dataclass(frozen=True)
class Transient:
    """An infrastructure error: ``reason`` in words ("the file store cannot be reached (...)"),
    ``own`` when it is this worker's own trouble (its disk, memory, embedding model) rather than a
    shared service every worker reaches (the catalog, the file store, a vector backend)."""

    reason: str
    own: bool

    @property
    def waiting(self) -> str:
        """The reason a page shows for a file that waits: ``"waiting: <reason>"``."""
        return f"waiting: {self.reason}"


def _said(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _library(exc: BaseException) -> bool:
    for k in type(exc).__mro__:
        names = _CONNECTION_CLASSES.get(k.__module__.split(".")[0])
        if names and k.__name__ in names:
            return True
    return False


def _backend(exc: BackendUnavailable) -> str:
    text = str(exc)
    lower = text.lower()
    what = (
        "the catalog"
        if "catalog" in lower
        else "the file store"
        if "file store" in lower
        else "the vector store"
        if any(w in lower for w in ("vector", "pgvector", "qdrant"))
        else "a storage backend"
    )
    return f"{what} cannot be reached ({_said(exc)})"


#: botocore's errors of a process that has no (or wrong) credentials for the bucket, by class name and
#: by the S3 error code of a refused request (Amazon S3 API Reference, "Error responses"): its own
#: settings are wrong, the bucket is not down -- another worker with the team's settings reads it.
CREDENTIAL_ERRORS = frozenset({"NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError"})
CREDENTIAL_CODES = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"})


def _credentials(exc: BaseException) -> bool:
    """Whether ``exc`` or one of its causes says this process has no valid credentials for a server."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if type(cur).__name__ in CREDENTIAL_ERRORS:
            return True
        response = getattr(cur, "response", None)
        if isinstance(response, dict) and str(response.get("Error", {}).get("Code", "")) in CREDENTIAL_CODES:
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _one(exc: BaseException) -> Transient | None:
    """The verdict on one exception of a chain (``None``: look at its cause)."""
    if isinstance(exc, BackendUnavailable):
        # no credentials (a process started before a move to S3 without the bucket's keys): this
        # worker's own settings, so it stands down and a worker with the team's settings goes on
        return Transient(_backend(exc), own=_credentials(exc))
    if isinstance(exc, EmbeddingUnavailable):
        return Transient(f"the embedding model cannot be loaded on this worker ({_said(exc)})", own=True)
    if isinstance(exc, MemoryError):
        return Transient("this worker ran out of memory", own=True)
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        return Transient(f"this worker's disk {DISK_ERRNOS[exc.errno]}{where}", own=True)
    if isinstance(exc, OSError) and exc.errno == errno.ENOMEM:
        return Transient("this worker ran out of memory", own=True)
    if isinstance(exc, ConnectionError) or _library(exc):
        return Transient(f"a server cannot be reached ({_said(exc) or type(exc).__name__})", own=False)
    return None


def classify(exc: BaseException) -> Transient | None:
    """Whether ``exc`` is an infrastructure error (see the module docstring): a :class:`Transient`,
    or ``None`` when the file (or a bug) is to blame. Walks ``exc`` and its causes: the first
    infrastructure error decides, unless a file error (:data:`FILE_ERRORS`) comes first. A
    :class:`~knowledge.errors.StorageError` with no disk error under it (a write the disk refused:
    no permission) counts as this worker's disk too."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    storage: StorageError | None = None
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, FILE_ERRORS):
            return None
        verdict = _one(cur)
        if verdict is not None:
            return verdict
        if isinstance(cur, StorageError) and storage is None:
            storage = cur
        cur = cur.__cause__ or cur.__context__
    if storage is not None:
        return Transient(f"a disk refused a write ({_said(storage)})", own=True)
    return None


def transient_reason(exc: BaseException) -> str | None:
    """The words for ``exc`` when the infrastructure is to blame (:func:`classify`), else ``None``."""
    verdict = classify(exc)
    return verdict.reason if verdict is not None else None


#: Error class names (``IngestResult.error``) that mean the infrastructure failed, not the file:
#: a result that was made of such an error instead of raising it.
TRANSIENT_ERROR_NAMES = frozenset({"BackendUnavailable", "EmbeddingUnavailable"})


def backoff_seconds(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before transient attempt ``attempt + 1`` (``attempt`` >= 1: how many
    attempts failed so far): exponential back-off with "full jitter", a uniform draw in
    ``[0, min(cap, base * 2 ** (attempt - 1))]``.

    The formula is the "Full Jitter" of Marc Brooker, "Exponential Backoff And Jitter" (AWS
    Architecture Blog, 2015): of the schemes measured there it spreads retries of many clients
    best and finishes the work soonest; the draw keeps the workers that all saw one outage from
    coming back at the same instant. ``base`` and ``cap`` are ``ingest.retry_base_seconds`` and
    ``ingest.retry_max_seconds``."""
    if attempt < 1:
        return 0.0
    ceiling = min(float(cap), float(base) * 2.0 ** min(attempt - 1, 62))
    return (rng or random).uniform(0.0, max(0.0, ceiling))


__all__ = [
    "DISK_ERRNOS",
    "FILE_ERRORS",
    "TRANSIENT_ERROR_NAMES",
    "Transient",
    "backoff_seconds",
    "classify",
    "transient_reason",
]
