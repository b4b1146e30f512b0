"""A warm search costs at most 3 backend calls on every backend (issue 12, step 3).

The Searcher resolves the store's record once (kept while the catalog is unchanged) and takes the
distance and model from it, so a search asks the backend nothing but the ranking itself: a vector
search is one ``Collection.search``; a hybrid one adds the lexical ranking (the backend's own index:
tantivy, PostgreSQL, qdrant's sparse vectors) and one ``retrieve`` of the vectors of
words-only hits. Counted at the wire: memory's collection methods, pgvector's transactions
(``PgvectorBackend.run``), qdrant's client calls (``QdrantBackend.call``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.service.search import Playground, SearchRequest
from knowledge.workbench import Workbench

MAX_CALLS = 3
TEXTS = [
    "The lighthouse keeper lit the lamp at dusk and watched the harbour.",
    "Bread needs yeast, flour, water and salt; knead it for ten minutes.",
    "Recoverable errors use Result; unrecoverable ones call panic! and stop.",
    "A HashMap stores keys and values; iterating over it visits every pair.",
    "Every reference has a lifetime, and the borrow checker compares them.",
]


@contextmanager
def counting(backend: str) -> Iterator[list[str]]:
    """Record each backend call made inside the block (by name) in the yielded list."""
    calls: list[str] = []
    mp = pytest.MonkeyPatch()
    try:
        if backend == "memory":
            from knowledge.vectorstore.memory import MemoryCollection

            for name in (
                "collection_exists",
                "info",
                "count",
                "search",
                "lexical_search",
                "retrieve",
                "scroll",
                "facet",
                "upsert",
                "replace",
                "remove",
                "ensure_collection",
            ):
                mp.setattr(MemoryCollection, name, _counted(getattr(MemoryCollection, name), name, calls))
        elif backend == "pgvector":
            from knowledge.vectorstore.pgvector import PgvectorBackend

            mp.setattr(PgvectorBackend, "run", _counted(PgvectorBackend.run, "run", calls))
        else:
            from knowledge.vectorstore.qdrant import QdrantBackend

            mp.setattr(QdrantBackend, "call", _counted(QdrantBackend.call, "call", calls))
        yield calls
    finally:
        mp.undo()


def _counted(fn: Callable, name: str, calls: list[str]) -> Callable:
    def wrapper(self, *args, **kwargs):
        label = name if name != "call" else getattr(args[0], "__name__", "call")
        calls.append(label)
        return fn(self, *args, **kwargs)

    return wrapper


@pytest.fixture(params=["memory", "pgvector", "qdrant"])
def wb(request, settings) -> Iterator[tuple[str, Workbench]]:
    yield from _workbench(request, settings, request.param)


@pytest.fixture(params=["memory", "pgvector"])  # qdrant's local folder takes one client at a time
def shared_wb(request, settings) -> Iterator[tuple[str, Workbench]]:
    yield from _workbench(request, settings, request.param)


def _workbench(request, settings, name: str) -> Iterator[tuple[str, Workbench]]:
    if name == "pgvector":
        settings = request.getfixturevalue("pgvector_settings")()
    settings = settings.model_copy(update={"vector_store": settings.vector_store.model_copy(update={"backend": name})})
    w = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=32))
    for i, text in enumerate(TEXTS):
        w.ingest_file("notes", text.encode(), f"note-{i}.txt")
    try:
        yield name, w
    finally:
        w.close()


@pytest.mark.parametrize("mode", ["vector", "hybrid", "lexical"])
def test_a_warm_search_costs_at_most_three_backend_calls(wb, mode):
    backend, w = wb
    first = w.search("notes", "lighthouse harbour lamp", k=3, mode=mode)
    with counting(backend) as calls:
        again = w.search("notes", "lighthouse harbour lamp", k=3, mode=mode)
    assert [h.id for h in again] == [h.id for h in first] and again
    assert 1 <= len(calls) <= MAX_CALLS, calls


def test_a_playground_search_costs_the_same(wb):
    from knowledge.pagemodels.playground import timed_search

    backend, w = wb
    timed_search(w, "notes", "bread yeast", k=2, mode="hybrid")
    with counting(backend) as calls:
        run = timed_search(w, "notes", "bread yeast", k=2, mode="hybrid")
    assert run.hits and run.hits[0].file_name == "note-1.txt"
    assert 1 <= len(calls) <= MAX_CALLS, calls


def test_searches_see_writes_made_after_the_store_was_resolved(wb):
    """The kept record and the in-process BM25 index follow writes: a new file is found by its
    words, a deleted one is gone, a deleted store is an error -- with no stale answer between."""
    from knowledge.errors import StoreNotFound

    _, w = wb
    assert not w.search("notes", "zeppelin", k=3, mode="lexical")
    r = w.ingest_file("notes", b"A zeppelin floated over the town.", "zeppelin.txt")
    assert [h.file_id for h in w.search("notes", "zeppelin", k=3, mode="lexical")] == [r.file_id]
    w.delete_file("notes", r.file_id)
    assert r.file_id not in {h.file_id for h in w.search("notes", "zeppelin", k=3, mode="hybrid")}
    assert not w.search("notes", "zeppelin", k=3, mode="lexical")
    w.delete_store("notes")
    with pytest.raises(StoreNotFound):
        w.search("notes", "zeppelin", k=3)


def test_a_store_changed_by_another_workbench_is_searched_as_it_is_now(shared_wb):
    """Two workbenches over one data folder (as two processes share it): the second's writes reach
    the first's next search through the catalog, though the first kept its record."""
    _, w = shared_wb
    w.search("notes", "bread", k=1, mode="hybrid")
    other = Workbench(w.settings, embedder_factory=lambda model: HashEmbedder(dimension=32))
    try:
        other.reembed("notes", "default")  # a new collection: the store's record changes
        r = other.ingest_file("notes", b"Quokkas smile on Rottnest island.", "quokka.txt")
    finally:
        other.close()
    hits = w.search("notes", "quokkas rottnest", k=1, mode="hybrid")
    assert hits and hits[0].file_id == r.file_id


@pytest.mark.parametrize("mode", ["vector", "hybrid", "lexical"])
def test_a_store_with_no_file_yet_answers_nothing(wb, mode):
    _, w = wb
    w.create_store("empty")
    assert w.search("empty", "lighthouse", k=3, mode=mode) == []
    request = SearchRequest("lighthouse", 3, mode=mode, playground=Playground(timings=True))
    assert w.search_result("empty", request).hits == []


def test_qdrant_reads_follow_a_collection_another_client_recreated(settings):
    """qdrant reads reuse the registry entry read before; when another client dropped and re-created
    the collection (with another size), the read sees the new one, not an empty or stale answer."""
    from knowledge.vectorstore.base import Point
    from tests.helpers.backends import qdrant_backend

    a, b = qdrant_backend(settings), qdrant_backend(settings)
    ca, cb = a.collection("s"), b.collection("s")
    ca.ensure_collection(4)
    ca.upsert([Point("x", [1.0, 0, 0, 0], {"t": 1})])
    assert [p.id for p in cb.search([1.0, 0, 0, 0], limit=1)] == ["x"]
    ca.drop_collection()
    ca.ensure_collection(3)
    ca.upsert([Point("y", [0, 1.0, 0], {"t": 2})])
    assert [p.id for p in cb.search([0, 1.0, 0], limit=1)] == ["y"]
    assert [p.id for p in cb.retrieve(["y"])] == ["y"]
    ca.drop_collection()
    from knowledge.errors import StoreNotFound

    with pytest.raises(StoreNotFound):
        cb.search([0, 1.0, 0], limit=1)
