"""The memory backend: one folder per store under the root, one shared handle per store, and the
idle sweeper that unloads stores nobody used for a while. See ``docs/local-backend.md``."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import orjson

from knowledge.vectorstore.base import VectorBackend, check_name
from knowledge.vectorstore.memory.ann import Indexer
from knowledge.vectorstore.memory.collection import CollectionOptions, MemoryCollection
from knowledge.vectorstore.memory.storage import MANIFEST, folder_name

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.config import Settings

log = logging.getLogger(__name__)


class MemoryBackend(VectorBackend):
    """The built-in backend: one folder per store under ``settings.vector_store_dir``.

    Args:
        settings: uses ``vector_store_dir``, ``vector_store.idle_seconds`` (unload a store idle this
            long), ``vector_store.max_chunks_per_store`` (the per-store cap), ``vector_store.ann``
            and ``vector_store.ann_min_points`` (approximate search for stores at least this big).
        lock_timeout: seconds a write waits for another writer of the same store before raising
            :class:`~knowledge.errors.StoreLocked`.

    Thread-safe; hand one instance to every thread. A daemon thread (started on the first load,
    stopped by :meth:`close`) unloads idle stores; :meth:`unload_idle` does one sweep by hand. A
    second, low-priority daemon thread (started when a large store is loaded or written) keeps the
    stores' approximate-search graphs up with their rows.
    """

    name: ClassVar[str] = "memory"

    def __init__(self, settings: Settings, *, lock_timeout: float = 10.0) -> None:
        self.root: Path = Path(settings.vector_store_dir)
        self.idle_seconds = float(settings.vector_store.idle_seconds)
        self.max_points = int(settings.vector_store.max_chunks_per_store)
        self.lock_timeout = float(lock_timeout)
        self.ann_min_points = int(settings.vector_store.ann_min_points)
        self._indexer: Indexer | None = None
        if settings.vector_store.ann == "auto" and self.ann_min_points > 0:
            self._indexer = Indexer()  # usearch is imported when a store first needs a graph
        self._collections: dict[str, MemoryCollection] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._closed = False

    @classmethod
    def machine_local(cls, settings: Settings) -> str | None:
        """Always a reason: the store folders are on this machine's disk."""
        return f"the memory backend keeps its vectors in this machine's folder {settings.vector_store_dir}"

    def collection(self, name: str) -> MemoryCollection:
        """The handle on store ``name`` (one shared handle per name and backend instance).

        Raises:
            InvalidArgument: ``name`` is not a non-empty string.
        """
        name = check_name(name)
        with self._lock:
            coll = self._collections.get(name)
            if coll is None:
                options = CollectionOptions(
                    self.root,
                    self.name,
                    self.lock_timeout,
                    self.max_points,
                    self._start_sweeper,
                    self.ann_min_points,
                    self._indexer,
                )
                coll = self._collections[name] = MemoryCollection(options, name)
            return coll

    def list_collections(self) -> list[str]:
        """Exact names of the stores under the root, read from their manifests, sorted.

        A folder whose manifest is unreadable is skipped with a warning in the log (opening that
        store raises :class:`~knowledge.errors.StoreCorrupt`).
        """
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            return []
        names = []
        for entry in entries:
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            try:
                man = orjson.loads((Path(entry.path) / MANIFEST).read_bytes())
            except (FileNotFoundError, NotADirectoryError):
                continue  # not a store, or being created or dropped
            except (OSError, orjson.JSONDecodeError) as exc:
                log.warning("vector store folder %s: unreadable %s (%s)", entry.path, MANIFEST, exc)
                continue
            name = man.get("name") if isinstance(man, dict) else None
            if not isinstance(name, str) or not name or folder_name(name) != entry.name:
                log.warning(
                    "vector store folder %s: %s names %r, which does not belong to this folder", entry.path, MANIFEST, name
                )
                continue
            names.append(name)
        return sorted(names)

    def loaded_collections(self) -> list[str]:
        """Names of the stores whose points are in memory now, sorted."""
        with self._lock:
            handles = list(self._collections.values())
        return sorted(c.name for c in handles if c.is_loaded)

    def unload_idle(self, now: float | None = None) -> list[str]:
        """Unload every store not accessed for ``idle_seconds``; returns their names, sorted.

        Args:
            now: a ``time.monotonic()`` reading (default: now); tests pass a later one.
        """
        now = time.monotonic() if now is None else now
        with self._lock:
            handles = list(self._collections.values())
        return sorted(c.name for c in handles if c._unload_if_idle(now, self.idle_seconds))

    def _start_sweeper(self) -> None:
        with self._lock:
            if self._closed or (self._sweeper is not None and self._sweeper.is_alive()):
                return
            self._stop.clear()
            self._sweeper = threading.Thread(target=self._sweep, name="knowledge-memory-sweeper", daemon=True)
            self._sweeper.start()

    def _sweep(self) -> None:
        interval = min(max(self.idle_seconds / 4, 0.05), 30.0)
        while not self._stop.wait(interval):
            try:
                self.unload_idle()
            except Exception:  # pragma: no cover - never let the sweeper die
                log.exception("idle sweep of the memory vector-store backend failed")

    def close(self) -> None:
        """Stop the sweeper and indexer threads and unload every store, saving the approximate-search
        graphs that changed. Idempotent.

        The instance stays usable (stores load again on access) but no longer unloads idle stores
        nor indexes in the background (:meth:`MemoryCollection.ensure_ann_index` still does).
        """
        with self._lock:
            self._closed = True
            sweeper, self._sweeper = self._sweeper, None
            handles = list(self._collections.values())
        self._stop.set()
        if sweeper is not None and sweeper is not threading.current_thread():
            sweeper.join(timeout=5)
        if self._indexer is not None:
            self._indexer.close()
        for coll in handles:
            coll.unload()

    def __repr__(self) -> str:
        return f"MemoryBackend(root={str(self.root)!r})"
