"""The backend contract's front door: ``Collection``'s public methods check and normalise their
arguments once and hand the backend hooks checked values, so every backend refuses the same bad
input with the same message (after chroma's ``Collection.query`` -> ``_query``)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from knowledge.errors import DistanceMismatch, InvalidArgument
from knowledge.vectorstore.base import (
    Collection,
    CollectionInfo,
    Point,
    PointId,
    ScoredPoint,
    check_threshold,
)

D = 8


@pytest.fixture
def coll(backend):
    c = backend.collection("front-door")
    c.ensure_collection(D, "cosine")
    c.upsert([Point(f"p{i}", np.eye(D, dtype=np.float32)[i], {"i": i, "ds": "a" if i % 2 else "b"}) for i in range(D)])
    return c


BAD_CALLS = {
    "limit 0": lambda c: c.search(np.ones(D), limit=0),
    "limit True": lambda c: c.search(np.ones(D), limit=True),
    "limit '3'": lambda c: c.search(np.ones(D), limit="3"),
    "threshold NaN": lambda c: c.search(np.ones(D), score_threshold=math.nan),
    "threshold str": lambda c: c.search(np.ones(D), score_threshold="high"),
    "threshold bool": lambda c: c.search(np.ones(D), score_threshold=True),
    "where list value": lambda c: c.search(np.ones(D), where={"i": [1, 2]}),
    "query with NaN": lambda c: c.search(np.array([np.nan] * D)),
    "scroll limit -1": lambda c: c.scroll(limit=-1),
    "retrieve a bare id": lambda c: c.retrieve("p1"),
    "remove a bare id": lambda c: c.remove(ids="p1"),
    "remove a bool id": lambda c: c.remove(ids=[True]),
    "count non-str key": lambda c: c.count({1: "x"}),
    "facet non-str key": lambda c: c.facet(3),
    "replace with an empty where": lambda c: c.replace({}, []),
    "lexical limit 0": lambda c: c.lexical_search("words", 0),
    "index a non-str field": lambda c: c.index_field(None),
    "size 0": lambda c: c.ensure_collection(0),
    "unknown distance": lambda c: c.ensure_collection(D, "hamming"),
}


@pytest.fixture
def reference(tmp_path):
    """A memory-backend collection like ``coll``: the wording every backend must match."""
    from knowledge.config import load_settings
    from knowledge.vectorstore.memory import MemoryBackend

    with MemoryBackend(load_settings(data_dir=tmp_path / "reference")) as ref:
        c = ref.collection("front-door-ref")
        c.ensure_collection(D, "cosine")
        yield c


@pytest.mark.parametrize("what", sorted(BAD_CALLS))
def test_every_backend_refuses_bad_arguments_with_one_message(coll, reference, what):
    with pytest.raises(InvalidArgument) as err:
        BAD_CALLS[what](coll)
    with pytest.raises(InvalidArgument) as ref_err:
        BAD_CALLS[what](reference)
    assert str(err.value) == str(ref_err.value)
    assert coll.count() == D  # nothing was touched


def test_every_backend_words_a_distance_mismatch_alike(coll):
    with pytest.raises(DistanceMismatch) as err:
        coll.ensure_collection(D, "dot")
    assert str(err.value) == (
        "Vector store 'front-door' was prepared with distance 'cosine', not 'dot'. A store"
        " keeps the distance it was created with."
    )


def test_index_field_is_there_on_every_backend_and_filters_still_work(coll):
    coll.index_field("ds")  # an index where the backend keeps one, nothing elsewhere
    coll.index_field("ds")  # idempotent
    hits = coll.search(np.ones(D), limit=10, where={"ds": "a"})
    assert sorted(h.id for h in hits) == ["p1", "p3", "p5", "p7"]


def test_repeated_ids_reach_the_backend_once(coll):
    assert [p.id for p in coll.retrieve(["p2", "p1", "p2"])] == ["p2", "p1"]
    assert coll.remove(ids=["p2", "p2", "p3"]) == 2
    assert coll.count() == D - 2


def test_an_integer_threshold_and_numpy_limit_are_accepted(coll):
    q = np.eye(D, dtype=np.float32)[0] - np.float32(0.1)  # similar to p0 only, the rest below 0
    hits = coll.search(q, limit=np.int64(3), score_threshold=0)
    assert [h.id for h in hits] == ["p0"]
    assert check_threshold(np.float32(0.5)) == 0.5


# -- what a plugin backend's hooks receive ---------------------------------------------------------


class Recording(Collection):
    """A plugin-style collection that implements only the hooks and records what they get."""

    def __init__(self) -> None:
        self.name = "rec"
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def _hook(self, name: str, *args: Any) -> Any:
        self.calls.append((name, args))
        return args

    def collection_exists(self) -> bool:
        return True

    def drop_collection(self) -> None:
        pass

    def info(self) -> CollectionInfo:
        return CollectionInfo("rec", D, "cosine", 0, "rec")

    def _ensure_collection(self, size, distance):
        self._hook("ensure", size, distance)

    def _upsert(self, points):
        self._hook("upsert", points)

    def _replace(self, where, points):
        self._hook("replace", where, points)

    def _search(self, vector, k, where, raw_filter, threshold, with_payload) -> list[ScoredPoint]:
        self._hook("search", vector, k, where, raw_filter, threshold, with_payload)
        return []

    def _native_filter(self, raw_filter):
        return ("native", raw_filter)

    def _remove(self, ids: list[PointId], where) -> int:
        self._hook("remove", ids, where)
        return len(ids)

    def _count(self, where) -> int:
        self._hook("count", where)
        return 0

    def _scroll(self, where, limit, with_vectors) -> Iterator[Point]:
        self._hook("scroll", where, limit, with_vectors)
        return iter([Point("x", np.zeros(0, np.float32), {"k": "v"}), Point("y", np.zeros(0, np.float32), {})])

    def _retrieve(self, ids, with_vectors):
        self._hook("retrieve", ids, with_vectors)
        return []


def test_hooks_receive_checked_normalised_arguments():
    c = Recording()
    c.ensure_collection(np.int64(4), "dot")
    c.search([1, 2, 3], limit=np.int32(2), where={}, score_threshold=1)
    c.search([1, 2, 3], where={"a": 1}, raw_filter="anything")
    c.remove(ids=("a", "b", "a"), where={})
    c.count({})
    c.scroll(where={"a": "b"}, limit=0)
    c.retrieve(iter([1, 1, 2]))
    c.replace({"f": "x"}, (p for p in [Point("a", np.ones(4), {})]))
    got = {name: args for name, args in c.calls if name != "search"}
    assert got["ensure"] == (4, "dot") and type(got["ensure"][0]) is int
    (_, s1), (_, s2) = [call for call in c.calls if call[0] == "search"]
    vector, k, where, raw, threshold, _with_payload = s1
    assert vector.dtype == np.float32 and vector.shape == (3,) and type(k) is int and k == 2
    assert where is None and raw is None and threshold == 1.0 and type(threshold) is float
    assert s2[2] is None and s2[3] == ("native", "anything")  # raw_filter wins: where not passed on
    assert got["remove"] == (["a", "b"], None)
    assert got["count"] == (None,)
    assert got["scroll"] == ({"a": "b"}, 0, False)
    assert got["retrieve"] == ([1, 2], False)
    assert isinstance(got["replace"][1], list) and got["replace"][0] == {"f": "x"}


def test_a_bad_argument_never_reaches_a_hook():
    c = Recording()
    for call in BAD_CALLS.values():
        with pytest.raises(InvalidArgument):
            call(c)
    assert c.calls == []


def test_optional_capabilities_have_defaults():
    c = Recording()
    c.index_field("dataset")  # no-op, no getattr needed by callers
    assert c.lexical_search("words", 3) is None
    assert c.facet("k") == {"v": 1}  # the default facet scrolls
    c.ensure_lexical_index()
