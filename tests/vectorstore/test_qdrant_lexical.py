"""Qdrant's lexical index: BM25 term weights as a sparse vector in the same point as the dense
vector (Qdrant's IDF modifier), so hybrid search needs no in-process index and no rebuild after a
restart; collections made before sparse vectors fall back to the in-process index."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from qdrant_client import QdrantClient, models

from knowledge.config import load_settings
from knowledge.service.fusion import LexicalIndex
from knowledge.system import System
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.lexical import sparse_document, sparse_query, term_index
from knowledge.vectorstore.qdrant import SPARSE_VECTOR, QdrantBackend
from knowledge.workbench import Workbench
from tests.helpers.lexical import DIM, points

QUERIES = ["panic", "iterating over a vector", "borrow checker lifetimes", "errors program", "向量检索", "hash map keys"]


@pytest.fixture
def backend(tmp_path):
    settings = load_settings(data_dir=tmp_path, vector_store={"backend": "qdrant"})
    b = QdrantBackend(settings)
    yield b
    b.close()


@pytest.fixture
def coll(backend):
    c = backend.collection("lex")
    c.ensure_collection(DIM)
    c.upsert(points())
    return c


def test_weights_are_bm25s_term_frequency_part():
    indices, values = sparse_document("panic panic stops the program")  # terms: panic panic stop program
    weights = dict(zip(indices, values))
    norm = 1.2 * (1 - 0.75 + 0.75 * 4 / 90)
    assert weights[term_index("panic")] == pytest.approx(2 * 2.2 / (2 + norm))
    assert weights[term_index("stop")] == pytest.approx(1 * 2.2 / (1 + norm))
    assert term_index("the") not in weights and indices == sorted(indices)
    assert sparse_query("Panics, panic!") == ([term_index("panic")], [1.0])
    assert sparse_document("") == ([], []) and sparse_query("the and") == ([], [])


@pytest.mark.parametrize("query", QUERIES)
def test_same_best_hit_as_exact_bm25(coll, query):
    exact = LexicalIndex.from_points(coll.scroll()).search(query, 10)
    got = coll.lexical_search(query, 10)
    assert got, query
    assert {h.id for h in got} == {h.id for h in exact}  # the points sharing a term with the query
    assert got[0].id == exact[0].id and all(h.score > 0 for h in got)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    assert got[0].payload["file_id"] == exact[0].payload["file_id"] and "_kn_id" not in got[0].payload


def test_filters_other_stores_and_updates(backend, coll):
    other = backend.collection("other")
    other.ensure_collection(DIM)
    other.upsert([Point("x:0", np.ones(DIM, np.float32), {"file_id": "x", "text": "panic everywhere"})])
    assert [h.id for h in coll.lexical_search("panic", 10)] == ["a:1"]  # not the other store's point
    assert [h.id for h in other.lexical_search("panic", 10)] == ["x:0"]
    assert {h.id for h in coll.lexical_search("errors", 10, where={"file_id": "a"})} == {"a:0", "a:1"}
    assert coll.lexical_search("errors", 10, where={"file_id": "b"}) == []
    coll.replace({"file_id": "a"}, [Point("a:9", np.ones(DIM, np.float32), {"file_id": "a", "text": "a crab"})])
    assert coll.lexical_search("panic", 5) == []  # the file's old chunks are out, with their weights
    assert [h.id for h in coll.lexical_search("crab", 5)] == ["a:9"]
    coll.remove(where={"file_id": "a"})
    assert coll.lexical_search("crab", 5) == []
    assert coll.lexical_search("zebra", 5) == [] and coll.lexical_search("the and of", 5) == []


def test_vectors_come_back_dense_only(coll):
    p = coll.retrieve(["a:0"], with_vectors=True)[0]
    assert p.vector.shape == (DIM,) and p.vector.dtype == np.float32
    assert all(q.vector.shape == (DIM,) for q in coll.scroll(with_vectors=True))


def test_a_restarted_workbench_searches_by_words_without_an_in_process_index(tmp_path):
    settings = load_settings(data_dir=tmp_path, vector_store={"backend": "qdrant"}, embeddings={"model": "fake/hash-16"})
    (tmp_path / "doc.md").write_text(
        "# Errors\n\nUnrecoverable errors with panic! stop the program.\n\n"
        "# Vectors\n\nIterate over the elements of a vector with a for loop.\n"
    )
    wb = Workbench(settings)
    try:
        wb.ingest_file("notes", tmp_path / "doc.md")
    finally:
        wb.close()
    system = System(settings)
    wb2 = Workbench(system)
    try:
        assert wb2.get_store("notes").backend == "qdrant"
        hits = wb2.search("notes", "panic", k=3, mode="lexical")
        assert hits and "panic" in hits[0].text
        assert wb2.search("notes", "panic", k=3, mode="hybrid")[0].text == hits[0].text
        assert not system.searcher._lexical  # no in-process index was built
    finally:
        system.close()


def test_a_collection_made_before_sparse_vectors_falls_back(tmp_path, caplog):
    client = QdrantClient(location=":memory:")
    settings = load_settings(data_dir=tmp_path, vector_store={"backend": "qdrant"})
    b = QdrantBackend(settings, client=client)
    # what an older version made: a physical collection without the sparse vector
    client.create_collection(
        b.physical_name(DIM, "cosine"), vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    c = b.collection("old")
    c.ensure_collection(DIM)
    c.upsert(points())
    with caplog.at_level(logging.WARNING, logger="knowledge.vectorstore.qdrant"):
        assert c.lexical_search("panic", 5) is None  # the caller builds the in-process index
    assert any("before BM25 sparse vectors" in r.getMessage() for r in caplog.records)
    assert c.retrieve(["a:0"], with_vectors=True)[0].vector.shape == (DIM,)
    new = QdrantBackend(
        load_settings(data_dir=tmp_path / "new", vector_store={"backend": "qdrant"}),
        client=QdrantClient(location=":memory:"),
    )
    made = new.collection("fresh")
    made.ensure_collection(DIM)
    info = new.client.get_collection(new.physical_name(DIM, "cosine"))
    assert SPARSE_VECTOR in info.config.params.sparse_vectors
    assert info.config.params.sparse_vectors[SPARSE_VECTOR].modifier == models.Modifier.IDF
