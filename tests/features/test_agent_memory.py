"""Agent memory (remember / recall / forget), run against every backend of ``CONTRACT_BACKENDS``
with the deterministic fake embedder."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from knowledge.agent_memory import Memory, RecallHit, VectorMemory
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import DimensionMismatch, InvalidArgument


@pytest.fixture
def memory(backend) -> VectorMemory:
    return VectorMemory(backend, HashEmbedder(dimension=64))


FACTS = [
    ("the invoice for march was paid late", "billing", {"topic": "invoice", "year": 2024, "era": "new"}),
    ("the customer prefers email over phone calls", "crm", {"topic": "contact", "year": 2024, "era": "new"}),
    ("refunds take five business days", "billing", {"topic": "refund", "year": 2023, "era": "old"}),
    ("the customer lives in Lisbon", "crm", {"topic": "address", "year": 2023, "era": "old"}),
    ("remember to water the plants", None, {"topic": "chores", "year": 2024, "era": "new"}),
]


@pytest.fixture
def filled(memory) -> VectorMemory:
    memory.remember_many([Memory(t, d, p) for t, d, p in FACTS])
    return memory


def test_remember_and_recall_return_text_dataset_and_payload(memory):
    mid = memory.remember("the cat sleeps on the sofa", dataset="pets", payload={"who": "tom"})
    hits = memory.recall("where does the cat sleep", dataset="pets")
    assert hits == [
        RecallHit(
            text="the cat sleeps on the sofa",
            score=hits[0].score,
            dataset="pets",
            id=mid,
            payload={"who": "tom"},
            remembered_at=hits[0].remembered_at,
        )
    ]
    when = datetime.fromisoformat(hits[0].remembered_at)  # when it was written, UTC, not in the payload
    assert when.tzinfo is not None and abs((datetime.now(UTC) - when).total_seconds()) < 3600
    assert 0 < hits[0].score <= 1  # cosine similarity, higher is better


def test_recall_before_the_first_write_is_empty(memory):
    assert memory.recall("anything") == []
    assert memory.datasets() == {}
    assert memory.forget(dataset="x") == 0


def test_datasets_are_a_payload_field_of_one_collection(filled, backend):
    assert filled.datasets() == {"billing": 2, "crm": 2, "default": 1}
    assert backend.list_collections() == ["agent-memory"]  # never one collection per dataset
    # recall defaults to the "default" dataset; dataset=None searches all of them
    assert [h.text for h in filled.recall("customer invoice refunds plants", limit=10)] == ["remember to water the plants"]
    assert {h.dataset for h in filled.recall("customer invoice refunds plants", limit=10, dataset=None)} == {
        "billing",
        "crm",
        "default",
    }
    crm = filled.recall("the customer", limit=10, dataset="crm")
    assert len(crm) == 2 and {h.dataset for h in crm} == {"crm"}
    assert filled.recall("the customer", dataset="no-such-dataset") == []
    assert filled.count() == 5 and filled.count("billing") == 2


def test_where_filters_within_the_dataset(filled):
    hits = filled.recall("customer", limit=10, dataset="crm", where={"topic": "address"})
    assert [h.text for h in hits] == ["the customer lives in Lisbon"]
    hits = filled.recall("the", limit=10, dataset=None, where={"year": 2023})
    assert sorted(h.text for h in hits) == ["refunds take five business days", "the customer lives in Lisbon"]
    assert filled.recall("the", limit=10, dataset="billing", where={"topic": "address"}) == []
    with pytest.raises(InvalidArgument):
        filled.recall("x", where={"topic": ["a", "b"]})


def test_raw_filter_wins_over_where_and_an_explicit_dataset_is_refused(filled, raw_filter):
    only_2023 = raw_filter("era", "old")  # the year-2023 facts (a string field: every backend's raw form takes it)
    hits = filled.recall("the customer", limit=10, where={"topic": "contact"}, raw_filter=only_2023)
    assert sorted(h.text for h in hits) == ["refunds take five business days", "the customer lives in Lisbon"]
    assert {h.dataset for h in hits} == {"billing", "crm"}  # the default dataset does not apply either
    assert len(filled.recall("the", limit=10, dataset=None, raw_filter=only_2023)) == 2
    with pytest.raises(InvalidArgument, match="raw_filter is the whole filter"):
        filled.recall("the", dataset="crm", raw_filter=only_2023)


def test_score_threshold(filled):
    every = filled.recall("the customer prefers email", limit=10, dataset=None)
    assert every[0].text == "the customer prefers email over phone calls"
    assert [h.score for h in every] == sorted((h.score for h in every), reverse=True)
    cut = (every[0].score + every[1].score) / 2
    kept = filled.recall("the customer prefers email", limit=10, dataset=None, score_threshold=cut)
    assert [h.id for h in kept] == [every[0].id]
    assert filled.recall("the customer prefers email", dataset=None, score_threshold=1.01) == []


def test_stable_ids_make_writes_idempotent(memory):
    a = memory.remember("first version", id="note-1")
    b = memory.remember("second version", id="note-1", payload={"v": 2})
    assert a == b == "note-1"
    assert memory.count() == 1
    assert memory.recall("version")[0].text == "second version"
    ids = memory.remember_many([{"text": "x one", "id": 7}, {"text": "x two", "id": 8}])
    memory.remember_many([{"text": "x one again", "id": 7}, {"text": "x two again", "id": 8}])
    assert ids == [7, 8] and memory.count() == 3
    assert [h.text for h in memory.get([8, 7, "nope"])] == ["x two again", "x one again"]
    generated = memory.remember("no id given")
    assert isinstance(generated, str) and len(generated) == 32
    with pytest.raises(InvalidArgument, match="same id twice"):
        memory.remember_many([{"text": "a", "id": 1}, {"text": "b", "id": 1}])


def test_forget_by_each_selector(filled):
    ids = [h.id for h in filled.recall("the", limit=10, dataset=None)]
    assert len(ids) == 5
    invoice = filled.recall("invoice march", dataset="billing")[0].id
    assert filled.forget(ids=[invoice]) == 1
    assert filled.count("billing") == 1
    assert filled.forget(dataset="crm", where={"topic": "address"}) == 1
    assert filled.datasets() == {"billing": 1, "crm": 1, "default": 1}
    assert filled.forget(where={"year": 2024}) == 2  # crm contact + default chores, across datasets
    assert filled.datasets() == {"billing": 1}
    refund = filled.recall("refunds", dataset="billing")[0].id
    assert filled.forget(ids=[refund], dataset="crm") == 0  # every selector must match
    assert filled.forget(dataset="billing") == 1
    assert filled.count() == 0
    with pytest.raises(InvalidArgument, match="forget needs ids, dataset or where"):
        filled.forget()
    with pytest.raises(InvalidArgument):
        filled.forget(ids="not-a-list")


def test_dimension_discovered_on_first_write_and_a_second_model_fails_loudly(backend):
    small = VectorMemory(backend, HashEmbedder(dimension=32), collection="shared")
    small.remember("written by the 32-d model")
    assert backend.collection("shared").info().size == 32
    big = VectorMemory(backend, HashEmbedder(dimension=48), collection="shared")
    with pytest.raises(DimensionMismatch) as err:
        big.remember("written by the 48-d model")
    assert str(err.value).startswith("This store was prepared with 32 dimensions, but received embeddings of 48.")
    with pytest.raises(DimensionMismatch):
        big.recall("anything")
    assert small.count() == 1
    big.clear()  # a new store: the next write discovers the dimension again
    big.remember("now 48")
    assert backend.collection("shared").info().size == 48


def test_same_size_other_model_fails_loudly(backend):
    class Other(HashEmbedder):
        def __init__(self):
            super().__init__(dimension=64)
            self.name = "other/model-64"

    VectorMemory(backend, HashEmbedder(dimension=64), collection="m").remember("first model")
    with pytest.raises(InvalidArgument, match="Two embedding models need two stores"):
        VectorMemory(backend, Other(), collection="m").remember("second model")
    with pytest.raises(InvalidArgument, match="holds embeddings of 'fake/hash-64'"):
        VectorMemory(backend, Other(), collection="m").recall("first model")


def test_custom_dataset_field_and_bad_input(backend):
    mem = VectorMemory(backend, HashEmbedder(dimension=64), dataset_field="space")
    mem.remember("alpha", dataset="a")
    point = next(backend.collection("agent-memory").scroll())
    assert point.payload["space"] == "a" and "dataset" not in point.payload
    assert mem.recall("alpha", dataset="a")[0].dataset == "a"
    with pytest.raises(InvalidArgument):
        mem.remember("   ")
    with pytest.raises(InvalidArgument, match="reserved"):
        mem.remember("x", payload={"text": "clash"})
    with pytest.raises(InvalidArgument, match="payload must be a dict"):
        mem.remember("x", payload=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        mem.remember("x", dataset="")
    with pytest.raises(InvalidArgument):
        mem.remember_many([])
    with pytest.raises(InvalidArgument):
        mem.remember_many([{"txt": "typo"}])
    with pytest.raises(InvalidArgument):
        mem.recall("alpha", limit=0)
    with pytest.raises(InvalidArgument):
        VectorMemory(backend)  # no embedder
    assert math.isnan(mem.get([mem.recall("alpha", dataset="a")[0].id])[0].score)


def test_from_settings_with_the_default_backend(settings):
    with VectorMemory(settings, HashEmbedder(dimension=16)) as mem:
        mem.remember("kept on disk", dataset="d", id="k")
    with VectorMemory(settings, HashEmbedder(dimension=16)) as mem:
        assert [h.id for h in mem.recall("kept on disk", dataset="d")] == ["k"]


def test_browse_pages_through_a_dataset_in_a_stable_order(filled):
    assert filled.browse("no-such-dataset") == []
    billing = filled.browse("billing")
    assert sorted(h.text for h in billing) == ["refunds take five business days", "the invoice for march was paid late"]
    assert all(h.dataset == "billing" and math.isnan(h.score) and h.remembered_at for h in billing)
    assert {h.payload["topic"] for h in billing} == {"invoice", "refund"}
    pages = [filled.browse(None, offset=o, limit=2) for o in (0, 2, 4, 6)]
    assert [len(p) for p in pages] == [2, 2, 1, 0]
    assert sorted(h.text for p in pages for h in p) == sorted(t for t, _, _ in FACTS)  # each once
    assert [h.id for h in filled.browse(None, offset=0, limit=2)] == [h.id for h in pages[0]]  # stable
    with pytest.raises(InvalidArgument):
        filled.browse(None, offset=-1)


def test_browse_before_the_first_write_is_empty(memory):
    assert memory.browse() == [] and memory.browse("x", offset=10) == []
