"""The Agent memory page, headless (streamlit.testing.v1.AppTest), on the memory and qdrant backends
with the deterministic fake embedder instead of the real model."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.agent_memory import VectorMemory
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.vectorstore.registry import open_backend
from tests.helpers.app import fresh_caches, open_app, use_fake_model
from tests.helpers.app import page_text as shown


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 16)
    with fresh_caches():
        yield


def memory_page(backend: str) -> AppTest:
    at = open_app("pages/memory.py")
    at.selectbox(key="mem_backend").select(backend).run()
    assert not at.exception
    return at


def remember(at: AppTest, text: str, dataset: str, payload: str = "", mem_id: str = "") -> AppTest:
    at.text_area(key="mem_text").input(text)
    at.text_input(key="mem_dataset").input(dataset)
    at.text_input(key="mem_payload").input(payload)
    at.text_input(key="mem_id").input(mem_id)
    next(b for b in at.button if b.label == "Remember").click().run()
    assert not at.exception
    return at


def datasets_table(at: AppTest) -> dict[str, int]:
    table = next(d.value for d in at.dataframe if list(d.value.columns)[:1] == ["dataset"])
    return dict(zip(table["dataset"], table["memories"]))


@pytest.mark.parametrize("backend", ["memory", "qdrant"])
def test_remember_recall_filter_and_forget(backend):
    at = memory_page(backend)
    assert any("No memories yet" in i.value for i in at.info)
    remember(at, "the invoice for march was paid late", "billing", '{"topic": "invoice", "year": 2024}')
    assert any("Remembered" in s.value and "billing" in s.value for s in at.success)
    assert at.text_area(key="mem_text").value == "" and at.text_input(key="mem_payload").value == ""
    remember(at, "refunds take five business days", "billing", '{"topic": "refund", "year": 2023}')
    remember(at, "the customer prefers email", "crm", mem_id="c1")
    assert datasets_table(at) == {"billing": 2, "crm": 1}

    # recall across every dataset, then narrowed by a where filter (a typed value: 2023 is a number)
    at.text_input(key="mem_query").input("invoice refunds customer")
    at.selectbox(key="mem_recall_dataset").select("(all datasets)")
    at.number_input(key="mem_limit").set_value(10)
    at.button(key="mem_recall").click().run()
    assert not at.exception
    text = shown(at)
    for fact in ("the invoice for march", "refunds take five", "the customer prefers email"):
        assert fact in text
    at.text_input(key="mem_where_key").input("year")
    at.text_input(key="mem_where_value").input("2023")
    at.button(key="mem_recall").click().run()
    text = shown(at)
    assert "refunds take five" in text and "the invoice for march" not in text
    assert "dataset **billing**" in text

    # the default dataset holds nothing: an explicit message, not everything
    at.text_input(key="mem_where_key").input("")
    at.selectbox(key="mem_recall_dataset").select("default")
    at.button(key="mem_recall").click().run()
    assert any("Nothing recalled" in w.value for w in at.warning)

    # forget one hit from the results, then a whole dataset
    at.selectbox(key="mem_recall_dataset").select("crm")
    at.button(key="mem_recall").click().run()
    at.button(key="mem_forget_hit_c1").click().run()
    assert not at.exception
    assert datasets_table(at) == {"billing": 2}
    at.radio(key="mem_forget_by").set_value("dataset").run()
    at.selectbox(key="mem_forget_dataset").select("billing")
    at.button(key="mem_forget").click().run()
    assert any("every memory of the dataset **billing** (2)" in w.value for w in at.warning)  # asked first
    assert datasets_table(at) == {"billing": 2}
    at.button(key="yes:mem_forget").click().run()
    assert any("Forgot 2 memories" in s.value for s in at.success)
    assert any("No memories yet" in i.value for i in at.info)


def test_bad_input_is_a_message_and_the_memory_is_shared_with_python():
    at = memory_page("memory")
    remember(at, "some text", "d", payload="[1, 2]")
    assert any("must be a JSON object" in e.value for e in at.error)
    remember(at, "a note worth keeping", "d", payload='{"topic" "billing"}')
    assert any("not valid JSON" in e.value and "line 1, column 10" in e.value for e in at.error)
    # what was typed is still there, to be corrected
    assert at.text_area(key="mem_text").value == "a note worth keeping"
    assert at.text_input(key="mem_payload").value == '{"topic" "billing"}'
    assert at.text_input(key="mem_dataset").value == "d"
    remember(at, "kept from the page", "notes", mem_id="p1")
    at.radio(key="mem_forget_by").set_value("where").run()
    at.button(key="mem_forget").click().run()
    at.button(key="yes:mem_forget").click().run()
    assert any("Name the extra (payload) field" in e.value for e in at.error)
    # results belong to their store: another store name shows none of them
    at.text_input(key="mem_query").input("kept from the page")
    at.selectbox(key="mem_recall_dataset").select("(all datasets)")
    at.button(key="mem_recall").click().run()
    assert "kept from the page" in shown(at)
    at.text_input(key="mem_collection").input("another-store").run()
    assert "kept from the page" not in shown(at)
    assert any("No memories yet" in i.value for i in at.info)
    # what the page wrote is what Python reads
    settings = load_settings()
    with open_backend(settings, "memory") as backend:
        hits = VectorMemory(backend, HashEmbedder(dimension=16)).recall("kept from the page", dataset="notes")
    assert [(h.id, h.text) for h in hits] == [("p1", "kept from the page")]


def _write(memories: list[tuple[str, str]]) -> None:
    """Remember ``(text, dataset)`` pairs from Python, in the store the page opens."""
    with open_backend(load_settings(), "memory") as backend:
        mem = VectorMemory(backend, HashEmbedder(dimension=16))
        mem.remember_many([{"text": t, "dataset": d, "payload": {"n": i}} for i, (t, d) in enumerate(memories)])


def test_recall_starts_where_the_memories_are_and_names_each_hits_dataset():
    _write([("the deploy runs every friday", "ops")])
    at = memory_page("memory")
    assert at.selectbox(key="mem_recall_dataset").value == "ops"  # not the empty default
    at.text_input(key="mem_query").input("when does the deploy run")
    at.button(key="mem_recall").click().run()
    assert "the deploy runs every friday" in shown(at) and "from the dataset **ops**" in shown(at)
    _write([("tea is in the cupboard", "kitchen")])
    at = memory_page("memory")
    assert at.selectbox(key="mem_recall_dataset").value == "(all datasets)"  # two datasets, no default one
    _write([("the default one", "default")])
    at = memory_page("memory")
    assert at.selectbox(key="mem_recall_dataset").value == "default"  # default holds memories: it stays


def test_browse_a_dataset_a_page_at_a_time_and_forget_one():
    _write([(f"note number {i:02d}", "notes") for i in range(23)] + [("a kitchen memory", "kitchen")])
    at = memory_page("memory")
    at.selectbox(key="mem_browse_dataset").select("notes").run()
    table = next(d.value for d in at.dataframe if "when" in d.value.columns)
    assert list(table.columns) == ["text", "when", "dataset", "extra fields", "id"]
    assert len(table) == 20 and set(table["dataset"]) == {"notes"}
    assert all(w.endswith(" UTC") for w in table["when"]) and table["extra fields"].str.startswith('{"n": ').all()
    first_page = set(table["text"])
    assert any("Memories 1–20 of 23" in c.value for c in at.caption)
    at.number_input(key="mem_browse_page").set_value(2).run()
    table = next(d.value for d in at.dataframe if "when" in d.value.columns)
    assert len(table) == 3 and not first_page & set(table["text"])
    assert first_page | set(table["text"]) == {f"note number {i:02d}" for i in range(23)}
    gone = at.selectbox(key="mem_browse_pick").value
    at.button(key="mem_browse_forget").click().run()
    assert not at.exception and any(f"Forgot {gone}" in s.value for s in at.success)
    assert datasets_table(at) == {"kitchen": 1, "notes": 22}
