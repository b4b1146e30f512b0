"""Source kinds, discovered through the entry-point group ``knowledge.sources``.

Built-ins (smb, webdav, git, imap, s3) are declared in that group in ``pyproject.toml``, so a plugin
is a package that declares ``[project.entry-points."knowledge.sources"] confluence =
"pkg.mod:ConfluenceSource"`` (a :class:`~knowledge.sources.base.Source` subclass) and nothing else.
"""

from __future__ import annotations

from knowledge.errors import KnowledgeError
from knowledge.plugins import PluginRegistry
from knowledge.sources.base import GROUP, Source

_registry: PluginRegistry[Source] = PluginRegistry(GROUP, Source, "source kind")


def source_class(kind: str) -> type[Source]:
    """The plugin class of ``kind``. Raises ``BackendUnavailable``: none declared, or it fails to load."""
    return _registry.load(kind)


def source_kinds() -> dict[str, type[Source]]:
    """Every declared kind that loads, by name (one that fails is left out; see :func:`kind_errors`)."""
    out: dict[str, type[Source]] = {}
    for name in _registry.names():
        try:
            out[name] = _registry.load(name)
        except KnowledgeError:
            continue
    return out


def kind_errors() -> dict[str, str]:
    """Kinds that were asked for and failed to load: name -> reason."""
    return _registry.errors()


def register(kind: str, cls: type[Source]) -> None:
    """Make ``cls`` the kind ``kind`` in this process, as an entry point would (an application that
    embeds the library, a test's own source). Raises ``TypeError`` for a class not a ``Source``."""
    if not (isinstance(cls, type) and issubclass(cls, Source)):
        raise TypeError(f"{cls!r} is not a Source subclass")
    _registry.add(kind, cls)


def reset() -> None:
    """Forget discovered kinds (tests that declare entry points)."""
    _registry.reset()


__all__ = ["kind_errors", "register", "reset", "source_class", "source_kinds"]
