from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from knowledge import plugins
from knowledge.errors import BackendUnavailable
from knowledge.vectorstore import registry
from knowledge.vectorstore.base import VectorBackend


@pytest.fixture
def fake_entry_points(monkeypatch):
    """Replace the installed entry points by a chosen list, and restore the registry after."""

    def install(*eps: EntryPoint) -> None:
        monkeypatch.setattr(plugins, "entry_points", lambda group: [e for e in eps if e.group == group])
        registry._reset_for_tests()

    yield install
    registry._reset_for_tests()


def test_builtin_memory_backend_is_declared_in_the_group(settings):
    assert "memory" in registry.backend_names()
    backend = registry.open_backend(settings)
    try:
        assert isinstance(backend, VectorBackend)
        assert backend.name == "memory"
    finally:
        backend.close()


def test_unknown_backend_names_the_available_ones(settings):
    with pytest.raises(BackendUnavailable, match=r"Available: .*memory"):
        registry.open_backend(settings, "nosuch")


def test_a_broken_plugin_is_reported_not_fatal(fake_entry_points, settings):
    group = registry.GROUP
    fake_entry_points(
        EntryPoint("memory", "knowledge.vectorstore.memory:MemoryBackend", group),
        EntryPoint("broken", "knowledge_no_such_module:Backend", group),
        EntryPoint("notabackend", "json:dumps", group),
    )
    assert registry.backend_names() == ["broken", "memory", "notabackend"]
    with pytest.raises(BackendUnavailable, match=r"broken.*failed to load"):
        registry.load_backend_class("broken")
    with pytest.raises(BackendUnavailable, match="not a VectorBackend"):
        registry.load_backend_class("notabackend")
    assert set(registry.backend_errors()) == {"broken", "notabackend"}
    with registry.open_backend(settings, "memory") as b:  # the others still work
        assert b.name == "memory"


def test_a_backend_that_cannot_start_is_backend_unavailable(fake_entry_points, settings, monkeypatch):
    class Failing(VectorBackend):
        name = "failing"

        def __init__(self, settings):
            raise ConnectionRefusedError("connection refused")

        def collection(self, name):  # pragma: no cover
            raise NotImplementedError

        def list_collections(self):  # pragma: no cover
            return []

    monkeypatch.setattr(registry, "load_backend_class", lambda name: Failing)
    with pytest.raises(BackendUnavailable, match="could not start: connection refused"):
        registry.open_backend(settings, "failing")
