"""Plugins through entry points: one registry per entry-point group.

Built-ins are declared in the same group as plugins (``pyproject.toml``), so a plugin is a package
that declares e.g. ``[project.entry-points."knowledge.vector_store_backends"] mine = "pkg.mod:Cls"``
and nothing else. Entry points are read once and loaded lazily, one by one, when asked for; one that
fails to import is reported (:meth:`PluginRegistry.errors`, and a log warning), never fatal for the
others. Pattern after simonw/llm ``llm/plugins.py``.
"""

from __future__ import annotations

import logging
import threading
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar, cast

from knowledge.errors import BackendUnavailable, KnowledgeError

T = TypeVar("T")
log = logging.getLogger(__name__)


class PluginRegistry(Generic[T]):
    """The classes declared in one entry-point group, each a subclass of ``base``.

    Args:
        group: the entry-point group, e.g. ``knowledge.vector_store_backends``.
        base: the class every plugin must subclass.
        kind: how messages name a plugin, e.g. ``"vector-store backend"``.
    """

    def __init__(self, group: str, base: type, kind: str) -> None:  # `type`, not type[T]: base is abstract
        self.group, self.base, self.kind = group, base, kind
        self._lock = threading.Lock()
        self._entry_points: dict[str, EntryPoint] | None = None
        self._loaded: dict[str, type[T]] = {}
        self._errors: dict[str, str] = {}

    def _discover(self) -> dict[str, EntryPoint]:
        with self._lock:
            if self._entry_points is None:
                found: dict[str, EntryPoint] = {}
                for ep in entry_points(group=self.group):
                    found.setdefault(ep.name, ep)  # first distribution wins on a duplicate name
                self._entry_points = found
            return self._entry_points

    def names(self) -> list[str]:
        """Names of every declared plugin (loaded or not), sorted."""
        return sorted(self._discover())

    def errors(self) -> dict[str, str]:
        """Plugins that were asked for and failed to load: name -> reason."""
        with self._lock:
            return dict(self._errors)

    def load(self, name: str) -> type[T]:
        """The class registered as ``name``.

        Raises:
            BackendUnavailable: nothing of that name is declared, it fails to import, or it is not
                a subclass of ``base``.
        """
        eps = self._discover()
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            if name in self._errors:
                raise BackendUnavailable(self._errors[name])
        if name not in eps:
            hint = "" if eps else " (none are declared: is the project installed? run `pip install -e .`)"
            raise BackendUnavailable(f"No {self.kind} named {name!r}. Available: {', '.join(sorted(eps)) or 'none'}{hint}.")
        try:
            cls = eps[name].load()
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise TypeError(f"{eps[name].value} is not a {self.base.__name__} subclass")
        except Exception as exc:  # a broken plugin must not take the app down
            reason = f"The {self.kind} {name!r} ({eps[name].value}) failed to load: {exc}"
            log.warning(reason)
            with self._lock:
                self._errors[name] = reason
            raise BackendUnavailable(reason) from exc
        plugin = cast("type[T]", cls)  # checked above: a subclass of base
        with self._lock:
            self._loaded[name] = plugin
        return plugin

    def construct(self, cls: type[T], name: str, *args: Any) -> T:
        """``cls(*args)``, with a failure that is not a ``KnowledgeError`` turned into
        ``BackendUnavailable`` ("could not start: ...")."""
        try:
            return cls(*args)
        except KnowledgeError:
            raise
        except Exception as exc:
            raise BackendUnavailable(f"The {self.kind} {name!r} could not start: {exc}") from exc

    def add(self, name: str, cls: type[T]) -> None:
        """Declare ``cls`` as ``name`` in this process, as an entry point would (it wins over one)."""
        self._discover()
        with self._lock:
            self._loaded[name] = cls
            self._errors.pop(name, None)
            assert self._entry_points is not None
            self._entry_points.setdefault(name, EntryPoint(name, f"{cls.__module__}:{cls.__qualname__}", self.group))

    def reset(self) -> None:
        """Forget discovered and loaded plugins (tests that install fake entry points use it)."""
        with self._lock:
            self._entry_points = None
            self._loaded.clear()
            self._errors.clear()
