"""What the sources' tests share: a system whose embedder counts the texts it embeds, and a source
kind of this process (``dict``) whose files are a dict the test changes -- the engine's own tests
(tests/sources/test_engine.py); each real kind is tested against its real server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.sources.base import Entry, EntryGone, Field, Sink, Source, SourceUnavailable
from knowledge.sources.registry import register
from knowledge.system import System
from knowledge.workbench import Workbench

PW = "correct horse battery staple"


class CountingEmbedder(HashEmbedder):
    """:class:`HashEmbedder` that counts the document texts it embedded (:attr:`embedded`)."""

    def __init__(self) -> None:
        super().__init__(dimension=32, max_tokens=128)
        self.embedded = 0
        self.lock = threading.Lock()

    def embed_documents(self, texts: Any) -> np.ndarray:
        with self.lock:
            self.embedded += len(texts)
        return super().embed_documents(texts)


def counting_system(tmp_path: Path, **settings: Any) -> tuple[System, CountingEmbedder]:
    """A system on a fresh data folder with one :class:`CountingEmbedder` for every model."""
    emb = CountingEmbedder()
    system = System(load_settings(data_dir=tmp_path / "data", **settings), lambda _model: emb)
    return system, emb


def search_names(system: System, store: str, query: str, k: int = 10, wb: Workbench | None = None) -> list[str]:
    """The file names of the hits of ``query`` in ``store`` (as the local admin unless ``wb``)."""
    wb = wb or Workbench(system)
    return [h.file_name for h in wb.search(store, query, k)]


class DictSource(Source):
    """A source whose files are :attr:`FILES` (``{name: {path: (bytes, readers)}}``, the config's
    ``name`` picks one): version = a hash of the bytes; ``content_key`` the same hash when the config
    says ``keys: true``. :attr:`DOWN` makes every call fail as a server that does not answer;
    :attr:`VANISH` paths vanish between the listing and the fetch; :attr:`FETCHED` counts fetches."""

    kind = "dict"
    title = "Test dict"
    fields = (
        Field("name", "Name", required=True),
        Field("password", "Password", secret=True),
        Field("keys", "Content keys", kind="bool", default=False),
    )
    FILES: ClassVar[dict[str, dict[str, tuple[bytes, tuple[str, ...] | None]]]] = {}
    DOWN: ClassVar[set[str]] = set()
    VANISH: ClassVar[set[str]] = set()
    FETCHED: ClassVar[list[str]] = []
    MARKERS: ClassVar[dict[str, str]] = {}

    def _files(self) -> dict[str, tuple[bytes, tuple[str, ...] | None]]:
        name = self.required("name")
        if name in self.DOWN:
            # a library's words may carry what it was given: the engine must take the password out
            raise SourceUnavailable(f"the test server {name} did not answer (logged in with {self.config.get('password')})")
        return self.FILES.setdefault(name, {})

    def location(self) -> str:
        return f"dict://{self.required('name')}"

    def marker(self) -> str | None:
        return self.MARKERS.get(self.required("name"))

    def entries(self) -> Iterator[Entry]:
        import hashlib

        for path, (data, readers) in list(self._files().items()):
            digest = hashlib.sha1(data).hexdigest()
            yield Entry(
                path,
                version=digest,
                size=len(data),
                content_key=digest if self.setting("keys") else None,
                readers=readers,
                url=f"dict://{self.required('name')}/{path}",
            )

    def fetch(self, entry: Entry, out: Sink) -> None:
        files = self._files()
        if entry.path in self.VANISH or entry.path not in files:
            raise EntryGone(f"{entry.path} vanished from the source before it could be read")
        self.FETCHED.append(entry.path)
        out.write(files[entry.path][0])


register("dict", DictSource)
