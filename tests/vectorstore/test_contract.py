"""The backend contract and the ``VectorStore`` facade, run against every backend.

A backend passes this module or it is not done. Scores are checked for congruence with a plain numpy
reference (after qdrant-client's ``tests/congruence_tests``).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from knowledge.errors import (
    DimensionMismatch,
    DistanceMismatch,
    InvalidArgument,
    StoreNotFound,
)
from knowledge.vectorstore.base import AnyOf, Point
from knowledge.vectorstore.scoring import DISTANCES, higher_is_better
from knowledge.vectorstore.store import Chunk, VectorStore

D = 16


def rand_vectors(n: int, d: int = D, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def make_points(n: int, d: int = D, seed: int = 0, start: int = 0, **payload) -> list[Point]:
    vecs = rand_vectors(n, d, seed)
    return [
        Point(f"p{start + i}", vecs[i], {"i": start + i, "group": "even" if (start + i) % 2 == 0 else "odd", **payload})
        for i in range(n)
    ]


def reference_scores(matrix: np.ndarray, q: np.ndarray, distance: str) -> np.ndarray:
    """Plain numpy scores with the contract's direction."""
    if distance == "cosine":
        m = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return m @ (q / np.linalg.norm(q))
    if distance == "dot":
        return matrix @ q
    if distance == "euclid":
        return np.sqrt(((matrix - q) ** 2).sum(axis=1))
    return np.abs(matrix - q).sum(axis=1)


@pytest.fixture
def coll(backend):
    c = backend.collection("contract")
    c.ensure_collection(D, "cosine")
    return c


# -- collections -------------------------------------------------------------------------------


def test_collection_lifecycle(backend):
    c = backend.collection("life")
    assert not c.collection_exists()
    with pytest.raises(StoreNotFound):
        c.info()
    with pytest.raises(StoreNotFound):
        c.upsert(make_points(1))
    c.ensure_collection(D, "euclid")
    c.ensure_collection(D, "euclid")  # idempotent
    assert c.collection_exists()
    info = c.info()
    assert (info.size, info.distance, info.count) == (D, "euclid", 0)
    assert "life" in backend.list_collections()
    c.upsert(make_points(3))
    c.drop_collection()
    assert not c.collection_exists()
    assert "life" not in backend.list_collections()
    c.drop_collection()  # a missing collection is not an error


def test_ensure_collection_mismatch_fails_loudly(coll):
    with pytest.raises(DimensionMismatch) as err:
        coll.ensure_collection(D * 2, "cosine")
    assert str(err.value).startswith(f"This store was prepared with {D} dimensions, but received embeddings of {D * 2}.")
    with pytest.raises(DistanceMismatch):
        coll.ensure_collection(D, "dot")


@pytest.mark.parametrize("size,distance", [(0, "cosine"), (-3, "cosine"), (8, "hamming")])
def test_ensure_collection_rejects_bad_arguments(backend, size, distance):
    with pytest.raises(InvalidArgument):
        backend.collection("bad").ensure_collection(size, distance)


def test_names_are_kept_exactly_and_never_collide(backend):
    names = [
        "team-notes",
        "Team Notes",
        "team notes",
        "Q3 (final)",
        "naïve",
        "x; drop table y;--",
        "../../etc",
        "a" * 70,
        "日本語",
    ]
    for i, name in enumerate(names):
        c = backend.collection(name)
        c.ensure_collection(D)
        c.upsert(make_points(i + 1))
    listed = backend.list_collections()
    for i, name in enumerate(names):
        assert name in listed
        assert backend.collection(name).count() == i + 1


# -- writes ------------------------------------------------------------------------------------


def test_upsert_overwrites_same_id_and_roundtrips_payload(coll):
    payload = {"text": "naïve café 日本 🙂", "nested": {"a": [1, 2.5, None, True]}, "none": None}
    coll.upsert([Point("a", rand_vectors(1)[0], payload), Point(7, rand_vectors(1, seed=1)[0], {"k": 1})])
    coll.upsert([Point("a", rand_vectors(1, seed=2)[0], {"text": "second"})])
    assert coll.count() == 2
    got = {p.id: p for p in coll.retrieve(["a", 7, "missing"], with_vectors=True)}
    assert set(got) == {"a", 7}
    assert got["a"].payload == {"text": "second"}
    assert got[7].payload == {"k": 1}
    assert got[7].vector.dtype == np.float32 and got[7].vector.shape == (D,)


def test_int_and_str_ids_are_distinct(coll):
    coll.upsert([Point(1, rand_vectors(1)[0], {"t": "int"}), Point("1", rand_vectors(1, seed=3)[0], {"t": "str"})])
    assert coll.count() == 2
    assert [p.payload["t"] for p in coll.retrieve([1, "1"])] == ["int", "str"]


def test_dimension_mismatch_writes_nothing(coll):
    coll.upsert(make_points(4))
    bad = [*make_points(2, start=10), Point("wrong", np.ones(D + 1, np.float32), {})]
    with pytest.raises(DimensionMismatch) as err:
        coll.upsert(bad)
    assert f"prepared with {D} dimensions, but received embeddings of {D + 1}" in str(err.value)
    assert coll.count() == 4
    with pytest.raises(DimensionMismatch):
        coll.replace({"group": "even"}, [Point("x", np.ones(D - 1, np.float32), {})])
    assert coll.count() == 4


@pytest.mark.parametrize(
    "point",
    [
        Point("nan", np.full(D, np.nan, np.float32), {}),
        Point(None, np.ones(D, np.float32), {}),  # type: ignore[arg-type]
        Point(True, np.ones(D, np.float32), {}),  # type: ignore[arg-type]
        Point("listpayload", np.ones(D, np.float32), ["not", "a", "dict"]),  # type: ignore[arg-type]
    ],
    ids=["nan-vector", "none-id", "bool-id", "list-payload"],
)
def test_bad_points_are_rejected_before_writing(coll, point):
    coll.upsert(make_points(2))
    with pytest.raises(InvalidArgument):
        coll.upsert([*make_points(1, start=5), point])
    assert coll.count() == 2


def test_duplicate_ids_in_one_write_are_rejected(coll):
    v = rand_vectors(2)
    with pytest.raises(InvalidArgument):
        coll.upsert([Point("same", v[0], {}), Point("same", v[1], {})])
    assert coll.count() == 0


def test_remove_by_ids_where_and_both(coll):
    coll.upsert(make_points(10))
    assert coll.remove() == 0
    assert coll.remove(ids=["p0", "p1", "nope"]) == 2
    assert coll.count() == 8
    assert coll.remove(where={"group": "odd"}) == 4  # p3 p5 p7 p9
    assert coll.count() == 4
    assert coll.remove(ids=["p2"], where={"i": 4}) == 2
    assert sorted(p.id for p in coll.scroll()) == ["p6", "p8"]


def test_replace_swaps_exactly_the_matching_set(coll):
    coll.upsert(make_points(6, file="a") + make_points(3, start=100, seed=9, file="b"))
    new = [Point(f"a-new-{i}", v, {"file": "a", "v": 2}) for i, v in enumerate(rand_vectors(2, seed=5))]
    coll.replace({"file": "a"}, new)
    assert coll.count({"file": "a"}) == 2
    assert coll.count({"file": "b"}) == 3
    assert {p.payload["v"] for p in coll.scroll(where={"file": "a"})} == {2}
    with pytest.raises(InvalidArgument):
        coll.replace({}, new)
    coll.replace({"file": "a"}, [])
    assert coll.count() == 3


def test_replace_is_never_seen_half_done(coll):
    """A reader thread sees the old or the new version of a file, never a mix or nothing."""
    versions = {
        v: [Point(f"f:{i}", vec, {"file": "f", "v": v}) for i, vec in enumerate(rand_vectors(20, seed=v))]
        for v in range(1, 4)
    }
    coll.upsert(versions[1])
    seen, stop = [], threading.Event()

    def reader():
        q = rand_vectors(1, seed=99)[0]
        while not stop.is_set():
            hits = coll.search(q, limit=50, where={"file": "f"})
            seen.append((*tuple(sorted({h.payload["v"] for h in hits})), len(hits)))

    t = threading.Thread(target=reader)
    t.start()
    for _ in range(15):
        for v in (2, 3, 1):
            coll.replace({"file": "f"}, versions[v])
    stop.set()
    t.join()
    assert seen
    assert all(len(s) == 2 and s[1] == 20 for s in seen), sorted(set(seen))[:5]


# -- search ------------------------------------------------------------------------------------


@pytest.mark.parametrize("distance", DISTANCES)
def test_scores_and_ranking_agree_with_numpy(backend, distance):
    c = backend.collection(f"congruence-{distance}")
    c.ensure_collection(D, distance)
    vecs = rand_vectors(300, seed=11)
    c.upsert([Point(i, vecs[i], {"i": i}) for i in range(300)])
    for qi in range(5):
        q = rand_vectors(1, seed=100 + qi)[0]
        ref = reference_scores(vecs, q, distance)
        order = np.argsort(-ref if higher_is_better(distance) else ref, kind="stable")[:10]
        hits = c.search(q, limit=10)
        assert [h.id for h in hits] == [int(i) for i in order]
        np.testing.assert_allclose([h.score for h in hits], ref[order], rtol=1e-4, atol=1e-4)
        assert hits[0].payload == {"i": int(order[0])}


@pytest.mark.parametrize("distance", DISTANCES)
def test_score_threshold_follows_the_direction(backend, distance):
    c = backend.collection(f"threshold-{distance}")
    c.ensure_collection(D, distance)
    vecs = rand_vectors(100, seed=4)
    c.upsert([Point(i, vecs[i], {}) for i in range(100)])
    q = rand_vectors(1, seed=5)[0]
    ref = reference_scores(vecs, q, distance)
    threshold = float(np.median(ref))
    hits = c.search(q, limit=100, score_threshold=threshold)
    better = ref >= threshold if higher_is_better(distance) else ref <= threshold
    assert len(hits) == int(better.sum())
    assert all((h.score >= threshold - 1e-5) if higher_is_better(distance) else (h.score <= threshold + 1e-5) for h in hits)


def test_filter_is_applied_before_ranking(coll):
    """k hits whenever k match, even when the matching points are the worst ones."""
    q = np.ones(D, np.float32)
    near = [Point(f"n{i}", q + 0.01 * rand_vectors(1, seed=i)[0], {"file": "big"}) for i in range(200)]
    far = [Point(f"f{i}", -q + 0.01 * rand_vectors(1, seed=500 + i)[0], {"file": "small", "i": i}) for i in range(7)]
    coll.upsert(near + far)
    hits = coll.search(q, limit=5, where={"file": "small"})
    assert len(hits) == 5
    assert all(h.id.startswith("f") for h in hits)
    assert len(coll.search(q, limit=50, where={"file": "small"})) == 7
    assert coll.search(q, limit=5, where={"file": "none-such"}) == []


def test_where_semantics(coll):
    v = rand_vectors(5)
    coll.upsert(
        [
            Point("a", v[0], {"n": 1, "s": "x"}),
            Point("b", v[1], {"n": True, "s": "x"}),
            Point("c", v[2], {"n": 1.0, "s": "y"}),
            Point("d", v[3], {"s": "x"}),
            Point("e", v[4], {"n": None, "s": "x"}),
        ]
    )
    assert {h.id for h in coll.search(v[0], limit=10, where={"n": 1, "s": "x"})} == {"a"}
    assert {h.id for h in coll.search(v[0], limit=10, where={"n": True})} == {"b"}
    assert {h.id for h in coll.search(v[0], limit=10, where={"n": None})} == {"e"}
    assert coll.count({"s": "x"}) == 4
    with pytest.raises(InvalidArgument):
        coll.search(v[0], limit=3, where={"n": [1, 2]})


def test_any_of_matches_a_listed_element_or_the_string_itself(coll):
    """AnyOf: a string field equal to one of the values, or a list of strings holding one; nothing else."""
    v = rand_vectors(7)
    coll.upsert(
        [
            Point("hr", v[0], {"readers": ["group:hr"], "s": "x"}),
            Point("both", v[1], {"readers": ["group:hr", "user:ana"], "s": "x"}),
            Point("all", v[2], {"readers": ["*"], "s": "y"}),
            Point("str", v[3], {"readers": "user:ana", "s": "x"}),
            Point("none", v[4], {"readers": [], "s": "x"}),
            Point("other", v[5], {"readers": ["group:it", "user:bo"], "s": "x"}),
            Point("absent", v[6], {"s": "x"}),
        ]
    )

    def ids(**where):
        return {h.id for h in coll.search(v[0], limit=20, where=where)}

    assert ids(readers=AnyOf(("group:hr",))) == {"hr", "both"}
    assert ids(readers=AnyOf(("*", "user:ana"))) == {"both", "all", "str"}
    assert ids(readers=AnyOf(("*", "user:ana")), s="x") == {"both", "str"}
    assert ids(readers=AnyOf(("nobody",))) == set()
    assert coll.count({"readers": AnyOf(("group:hr", "group:it"))}) == 3
    for bad in (AnyOf(()), AnyOf((1,)), AnyOf(("a", None))):  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            coll.search(v[0], limit=3, where={"readers": bad})


def test_any_of_keeps_k_hits_when_k_points_match_however_few(coll):
    """A filter hiding most points still gives k hits: it narrows before the ranking, whichever
    points are nearest."""
    q = np.ones(D, np.float32)
    hidden = [Point(f"h{i}", q + 0.01 * rand_vectors(1, seed=i)[0], {"readers": ["group:hr"]}) for i in range(300)]
    seen = [
        Point(f"s{i}", -q + 0.01 * rand_vectors(1, seed=900 + i)[0], {"readers": ["group:it", "*"][i % 2 :]})
        for i in range(6)
    ]
    coll.upsert(hidden + seen)
    hits = coll.search(q, limit=5, where={"readers": AnyOf(("group:it", "*"))})
    assert len(hits) == 5 and all(h.id.startswith("s") for h in hits)
    assert coll.remove(where={"readers": AnyOf(("group:hr",))}) == 300
    assert coll.count() == 6
    coll.upsert([Point("late", q, {"readers": ["group:it"]})])  # a write after the filter was asked
    assert coll.search(q, limit=1, where={"readers": AnyOf(("group:it", "*"))})[0].id == "late"
    coll.remove(["late"])
    assert "late" not in {h.id for h in coll.search(q, limit=10, where={"readers": AnyOf(("group:it", "*"))})}


def test_any_of_filters_the_lexical_search_too(coll):
    """The words ranking (where the backend keeps one) narrows by AnyOf as the vector one does: k
    readable hits when k match, even when the best-scoring ones are hidden."""
    v = rand_vectors(1)[0]
    text = "harbour cranes unload ships at dawn"
    hidden = [Point(f"h{i}", v, {"text": f"{text} {text} harbour", "readers": ["group:hr"]}) for i in range(60)]
    seen = [Point(f"s{i}", v, {"text": f"harbour note {i}", "readers": ["*", "user:ana"][i % 2 :]}) for i in range(4)]
    coll.upsert(hidden + seen)
    hits = coll.lexical_search("harbour", 3, where={"readers": AnyOf(("*", "user:ana"))})
    if hits is None:
        pytest.skip("this backend keeps no lexical index of its own")
    assert len(hits) == 3 and all(h.id.startswith("s") for h in hits)


def test_raw_filter_wins_over_where(coll, raw_filter):
    coll.upsert(make_points(20))
    q = rand_vectors(1, seed=7)[0]
    hits = coll.search(q, limit=20, where={"group": "even"}, raw_filter=raw_filter("group", "odd"))
    assert len(hits) == 10
    assert all(h.payload["group"] == "odd" for h in hits)


def test_search_options_and_errors(coll):
    coll.upsert(make_points(12))
    q = rand_vectors(1, seed=8)[0]
    assert len(coll.search(q, limit=3)) == 3
    assert all(h.payload is None for h in coll.search(q, limit=3, with_payload=False))
    assert len(coll.search(q, limit=100)) == 12
    with pytest.raises(DimensionMismatch):
        coll.search(np.ones(D + 2, np.float32), limit=3)
    with pytest.raises(InvalidArgument):
        coll.search(q, limit=0)


def test_search_on_empty_and_missing_collections(backend, coll):
    assert coll.search(np.ones(D, np.float32), limit=5) == []
    with pytest.raises(StoreNotFound):
        backend.collection("never-made").search(np.ones(D, np.float32), limit=5)


def test_scroll_retrieve_facet(coll):
    coll.upsert(make_points(9))
    assert len(list(coll.scroll())) == 9
    assert len(list(coll.scroll(limit=4))) == 4
    odd = list(coll.scroll(where={"group": "odd"}, with_vectors=True))
    assert {p.id for p in odd} == {"p1", "p3", "p5", "p7"}
    assert all(p.vector.shape == (D,) for p in odd)
    assert [p.id for p in coll.retrieve(["p5", "p2"])] == ["p5", "p2"]
    assert coll.facet("group") == {"even": 5, "odd": 4}
    assert coll.facet("group", where={"i": 3}) == {"odd": 1}


def test_data_survives_a_new_backend_instance(backend_factory, settings):
    factory = backend_factory
    with factory(settings) as b1:
        c = b1.collection("durable")
        c.ensure_collection(D, "dot")
        c.upsert(make_points(5))
    with factory(settings) as b2:
        c = b2.collection("durable")
        assert c.info().distance == "dot"
        assert c.count() == 5
        assert c.search(rand_vectors(1)[0], limit=1)[0].id == "p0"


# -- the VectorStore facade --------------------------------------------------------------------


def embed(texts: list[str]) -> np.ndarray:
    from knowledge.embeddings.fake import HashEmbedder

    return HashEmbedder(dimension=64).embed_documents(texts)


def chunks_for(texts: list[str], **prov) -> list[Chunk]:
    vecs = embed(texts)
    return [
        Chunk(text=t, vector=vecs[i], page=i + 1, char_start=i * 100, char_end=i * 100 + len(t), **prov)
        for i, t in enumerate(texts)
    ]


def test_store_upsert_search_provenance(backend):
    store = VectorStore(backend.collection("notes"))
    assert store.search(embed(["anything"])[0], k=3) == []
    assert not store.exists()
    store.replace_file(
        "f1",
        chunks_for(["the cat sits on the mat", "stock prices fell sharply"], heading="Pets > Cats"),
        file_name="pets.md",
    )
    store.replace_file("f2", chunks_for(["a recipe for bread dough"]), file_name="bread.txt")
    hits = store.search(embed(["cat on a mat"])[0], k=2)
    top = hits[0]
    assert (top.file_id, top.file_name, top.chunk_index, top.page) == ("f1", "pets.md", 0, 1)
    assert top.text == "the cat sits on the mat"
    assert (top.char_start, top.char_end, top.heading) == (0, 23, "Pets > Cats")
    assert top.score > hits[1].score
    info = store.info()
    assert (info.size, info.distance, info.count) == (64, "cosine", 3)


def test_store_reingestion_leaves_no_stale_chunks(backend):
    store = VectorStore(backend.collection("reingest"))
    store.replace_file("f", chunks_for([f"old chunk number {i}" for i in range(5)]), file_name="a.txt")
    store.replace_file("g", chunks_for(["other file"]), file_name="g.txt")
    store.replace_file("f", chunks_for(["new text only"]), file_name="a.txt")
    assert store.count("f") == 1
    assert store.count() == 2
    hits = store.search(embed(["old chunk number"])[0], k=10, where={"file_id": "f"})
    assert [h.text for h in hits] == ["new text only"]
    assert [c.text for c in store.chunks("f")] == ["new text only"]


def test_store_files_delete_and_filters(backend):
    store = VectorStore(backend.collection("files"))
    store.replace_file("b-id", chunks_for(["beta one", "beta two"]), file_name="Beta.pdf")
    store.replace_file("a-id", chunks_for(["alpha"]), file_name="alpha.md")
    assert [(f.file_id, f.file_name, f.chunks) for f in store.list_files()] == [
        ("a-id", "alpha.md", 1),
        ("b-id", "Beta.pdf", 2),
    ]
    assert [h.file_id for h in store.search(embed(["alpha"])[0], k=5, where={"file_id": "b-id"})] == ["b-id", "b-id"]
    assert [h.page for h in store.search(embed(["beta"])[0], k=5, where={"page": 2})] == [2]
    assert store.delete_file("b-id") == 2
    assert store.delete_file("b-id") == 0
    assert [f.file_id for f in store.list_files()] == ["a-id"]
    assert store.replace_file("a-id", []) == 0
    assert store.count() == 0


def test_store_metadata_and_validation(backend):
    store = VectorStore(backend.collection("meta"), distance="dot")
    vec = embed(["x"])[0]
    store.replace_file("f", [Chunk("text", vec, metadata={"lang": "en"})])
    assert store.info().distance == "dot"
    assert store.search(vec, k=1)[0].metadata == {"lang": "en"}
    assert store.search(vec, k=1, where={"lang": "de"}) == []
    with pytest.raises(InvalidArgument):
        store.replace_file("f", [Chunk("text", vec, metadata={"text": "clash"})])
    with pytest.raises(InvalidArgument):
        store.replace_file("", [Chunk("text", vec)])
    with pytest.raises(InvalidArgument):
        store.replace_file("f", [Chunk("   ", vec)])
    with pytest.raises(InvalidArgument):
        store.search(vec, k=0)
    with pytest.raises(DimensionMismatch):
        store.replace_file("g", [Chunk("longer", np.ones(65, np.float32))])
    assert store.count() == 1
