"""Shared fixtures.

Tests are isolated from whatever happens to be on the machine: every test runs with no
``KNOWLEDGE_*`` variables but a data folder of its own, and with the working directory in a temp
folder (so a ``knowledge.toml`` or ``data/`` of the developer's is never read).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from knowledge.config import Settings, load_settings
from knowledge.vectorstore.base import VectorBackend

REPO = Path(__file__).resolve().parent.parent
CORPUS = (REPO.parent / "shared" / "corpus").resolve()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for key in list(os.environ):
        if key.upper().startswith("KNOWLEDGE_"):
            monkeypatch.delenv(key)
    work = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(work)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(work / "data"))


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings rooted at a fresh data folder."""
    return load_settings(data_dir=tmp_path / "data")


# -- the backends every contract test runs against ----------------------------------------------
# Each entry: name -> (factory(settings) -> backend, raw_filter(field, value) -> native filter).
# pgvector and qdrant join this table when they land.

def _memory_backend(settings: Settings) -> VectorBackend:
    from knowledge.vectorstore.memory import MemoryBackend

    return MemoryBackend(settings)


def _memory_raw_filter(field: str, value: Any) -> Callable[[dict], bool]:
    return lambda payload: payload.get(field) == value


_qdrant_clients: dict[str, Any] = {}


def _qdrant_backend(settings: Settings) -> VectorBackend:
    """qdrant-client local mode (``:memory:``), fresh per test: one in-memory client per data folder,
    shared by the backend instances a test opens (so "data survives a new backend instance" holds)."""
    from qdrant_client import QdrantClient

    from knowledge.vectorstore.qdrant import QdrantBackend

    key = str(settings.data_root)
    if key not in _qdrant_clients:
        for old in _qdrant_clients.values():  # the previous test's client
            old.close()
        _qdrant_clients.clear()
        _qdrant_clients[key] = QdrantClient(location=":memory:", force_disable_check_same_thread=True)
    return QdrantBackend(settings, client=_qdrant_clients[key])


def _qdrant_raw_filter(field: str, value: Any) -> Any:
    from qdrant_client import models

    return models.Filter(must=[models.FieldCondition(key=field, match=models.MatchValue(value=value))])


CONTRACT_BACKENDS: dict[str, tuple[Callable[[Settings], VectorBackend], Callable[[str, Any], Any]]] = {
    "memory": (_memory_backend, _memory_raw_filter),
    "qdrant": (_qdrant_backend, _qdrant_raw_filter),
}


@pytest.fixture(params=sorted(CONTRACT_BACKENDS))
def backend_name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def backend_factory(backend_name: str) -> Callable[[Settings], VectorBackend]:
    """``factory(settings) -> backend`` for the backend under test (for tests that reopen it)."""
    return CONTRACT_BACKENDS[backend_name][0]


@pytest.fixture
def backend(backend_name: str, settings: Settings) -> Iterator[VectorBackend]:
    factory, _ = CONTRACT_BACKENDS[backend_name]
    b = factory(settings)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def raw_filter(backend_name: str) -> Callable[[str, Any], Any]:
    """``raw_filter(field, value)``: the backend's native filter for ``payload[field] == value``."""
    return CONTRACT_BACKENDS[backend_name][1]


@pytest.fixture
def corpus() -> Path:
    """The shared real-document corpus; skips where it is absent, except under CI."""
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"The corpus folder {CORPUS} is missing under CI=true.")
        pytest.skip(f"corpus folder {CORPUS} not present")
    return CORPUS
