"""The built-in ``memory`` backend: numpy search over stores kept as files on disk (exact, or for
large stores an HNSW graph's candidates rescored exactly).

One folder per store under ``settings.vector_store_dir``: a ``manifest.json`` (the commit point)
listing immutable segments (``seg-NNNNNN.jsonl`` ids and payloads + ``seg-NNNNNN.npy`` float32
vectors). A write adds one segment and swaps the manifest atomically under an inter-process file
lock, so a killed process leaves the old or the new version; other processes catch up from the
segments after their generation. Points load lazily into a float32 matrix and unload when idle.

Modules: :mod:`.storage` (layout, segment files), :mod:`.state` (the loaded points),
:mod:`.ann` (the approximate-search graph, its file, the background indexer),
:mod:`.collection` (catch-up, load, commit, compaction, the Collection hooks), :mod:`.backend`
(root, handles, idle sweeper). The design -- layout, commit protocol, compaction, concurrency,
search -- is written up in ``docs/local-backend.md``.
"""

from knowledge.vectorstore.memory.backend import MemoryBackend
from knowledge.vectorstore.memory.collection import MemoryCollection
from knowledge.vectorstore.memory.storage import (
    FORMAT_VERSION,
    LEXICAL_DIR,
    LOCKS_DIR,
    MANIFEST,
    MANIFEST_TMP,
    MAX_SEGMENTS,
    MERGE_FACTOR,
    MIN_GARBAGE_ROWS,
    folder_name,
)

__all__ = [
    "FORMAT_VERSION",
    "LEXICAL_DIR",
    "LOCKS_DIR",
    "MANIFEST",
    "MANIFEST_TMP",
    "MAX_SEGMENTS",
    "MERGE_FACTOR",
    "MIN_GARBAGE_ROWS",
    "MemoryBackend",
    "MemoryCollection",
    "folder_name",
]
