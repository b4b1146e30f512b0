"""File-store backends, discovered through the entry-point group ``knowledge.file_store_backends``.

The built-in ``filesystem`` backend is declared in that same group (``pyproject.toml``), so a plugin
(an s3-style store, say) is a package that declares
``[project.entry-points."knowledge.file_store_backends"] s3 = "pkg.mod:S3FileStore"`` and nothing
else. Entry points are read once and loaded lazily, one by one, when asked for; a backend that fails
to import is reported (:func:`backend_errors`, and a log warning), never fatal for the others. Same
pattern as :mod:`knowledge.vectorstore.registry` (after simonw/llm ``llm/plugins.py``).
"""

from __future__ import annotations

import logging
import threading
from importlib.metadata import EntryPoint, entry_points

from knowledge.config import Settings
from knowledge.errors import BackendUnavailable, KnowledgeError
from knowledge.filestore.base import FileStore

GROUP = "knowledge.file_store_backends"
log = logging.getLogger(__name__)

_lock = threading.Lock()
_entry_points: dict[str, EntryPoint] | None = None
_loaded: dict[str, type[FileStore]] = {}
_errors: dict[str, str] = {}


def _discover() -> dict[str, EntryPoint]:
    global _entry_points
    with _lock:
        if _entry_points is None:
            found: dict[str, EntryPoint] = {}
            for ep in entry_points(group=GROUP):
                found.setdefault(ep.name, ep)  # first distribution wins on a duplicate name
            _entry_points = found
        return _entry_points


def backend_names() -> list[str]:
    """Names of every declared file-store backend (loaded or not), sorted."""
    return sorted(_discover())


def backend_errors() -> dict[str, str]:
    """File-store backends that were asked for and failed to load: name -> reason."""
    with _lock:
        return dict(_errors)


def load_backend_class(name: str) -> type[FileStore]:
    """The file-store class registered as ``name``.

    Raises:
        BackendUnavailable: no backend of that name is declared, or it fails to import, or the
            object it names is not a :class:`~knowledge.filestore.base.FileStore` subclass.
    """
    eps = _discover()
    with _lock:
        if name in _loaded:
            return _loaded[name]
        if name in _errors:
            raise BackendUnavailable(_errors[name])
    if name not in eps:
        hint = "" if eps else " (none are declared: is the project installed? run `pip install -e .`)"
        raise BackendUnavailable(
            f"No file-store backend named {name!r}. Available: {', '.join(sorted(eps)) or 'none'}{hint}."
        )
    try:
        cls = eps[name].load()
        if not (isinstance(cls, type) and issubclass(cls, FileStore)):
            raise TypeError(f"{eps[name].value} is not a FileStore subclass")
    except Exception as exc:  # a broken plugin must not take the app down
        reason = f"The file-store backend {name!r} ({eps[name].value}) failed to load: {exc}"
        log.warning(reason)
        with _lock:
            _errors[name] = reason
        raise BackendUnavailable(reason) from exc
    with _lock:
        _loaded[name] = cls
    return cls


def open_file_store(settings: Settings, name: str | None = None) -> FileStore:
    """Construct the file store ``name`` (default: ``settings.file_store.backend``) for ``settings``.

    Raises:
        BackendUnavailable: see :func:`load_backend_class`; also when the backend's constructor
            fails (for example a folder that cannot be created, or a server that cannot be reached).
    """
    backend = name or settings.file_store.backend
    cls = load_backend_class(backend)
    try:
        return cls(settings)
    except KnowledgeError:
        raise
    except Exception as exc:
        raise BackendUnavailable(f"The file-store backend {backend!r} could not start: {exc}") from exc


def _reset_for_tests() -> None:
    """Forget discovered and loaded backends (tests that install fake entry points use it)."""
    global _entry_points
    with _lock:
        _entry_points = None
        _loaded.clear()
        _errors.clear()
