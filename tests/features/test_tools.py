from __future__ import annotations

import json

import pytest

from knowledge.access import LocalFolders
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import EmbeddingUnavailable
from knowledge.system import System
from knowledge.tools import ANYWHERE, KnowledgeTools
from knowledge.workbench import Workbench


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 64))
    yield s
    s.close()


@pytest.fixture
def tools(system):
    return KnowledgeTools(Workbench(system))


def test_every_tool_has_a_function_calling_schema(tools):
    schemas = [t.schema() for t in tools.tools()]
    assert [s["function"]["name"] for s in schemas] == [
        "vector_upsert",
        "vector_search",
        "vector_delete_file",
        "vector_ingest_file",
    ]
    for s in schemas:
        params = s["function"]["parameters"]
        assert s["type"] == "function" and params["type"] == "object"
        assert "store" in params["required"] and set(params["required"]) <= set(params["properties"])
        json.dumps(s)  # serialisable as sent to a model


def test_upsert_search_delete_round_trip_as_text(tools):
    r = tools.call(
        "vector_upsert",
        {
            "store": "kb",
            "file_id": "notes-1",
            "file_name": "notes.txt",
            "text": "The lighthouse keeper lit the lamp at dusk.\n\nBread needs yeast.",
        },
    )
    assert r.ok and r.data["chunks"] >= 1
    r = tools.call("vector_search", {"store": "kb", "query": "who lit the lighthouse lamp", "k": 2})
    assert r.ok
    assert r.text.startswith("[1] similarity ") and "notes.txt" in r.text
    assert "> The lighthouse keeper lit the lamp at dusk." in r.text  # quoted
    assert r.data["hits"][0]["file_id"] == "notes-1"
    again = tools.call("vector_upsert", {"store": "kb", "file_id": "notes-1", "text": "Only cheese now."})
    assert again.ok
    hits = tools.call("vector_search", {"store": "kb", "query": "lighthouse", "k": 5}).data["hits"]
    assert [h["text"] for h in hits] == ["Only cheese now."]  # no stale chunks
    r = tools.call("vector_delete_file", {"store": "kb", "file_id": "notes-1"})
    assert r.ok and r.data["removed"] == 1


def test_ingest_file_tool_and_errors_come_back_as_text(tools, tmp_path):
    p = tmp_path / "docs" / "doc.md"
    p.parent.mkdir()
    p.write_text("# Title\n\nSome searchable words about owls.\n")
    tools = KnowledgeTools(tools.wb, folders=LocalFolders.of([p.parent], tools.wb.settings.data_root))
    r = tools.call("vector_ingest_file", {"store": "kb", "path": str(p)})
    assert r.ok and r.data["outcome"] == "indexed"
    assert not tools.call("vector_ingest_file", {"store": "kb", "path": str(tmp_path / "nope.pdf")}).ok
    r = tools.call("vector_search", {"store": "missing-store", "query": "owls"})
    assert not r.ok and "does not exist" in r.text
    assert not tools.call("vector_search", {"store": "kb"}).ok  # missing argument
    assert not tools.call("no_such_tool", {}).ok


def test_tools_report_themselves_unavailable_with_the_reason(tmp_path):
    def broken(model):
        raise EmbeddingUnavailable("the model files are missing")

    wb = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=broken)
    try:
        kt = KnowledgeTools(wb)
        ok, reason = kt.availability()
        assert not ok and reason.startswith("unavailable, because") and "missing" in reason
        r = kt.call("vector_search", {"store": "kb", "query": "x"})
        assert not r.ok and "unavailable, because" in r.text
    finally:
        wb.close()


def test_upsert_writes_through_the_indexer_as_ingestion_does(tools, system):
    """vector_upsert is no second pipeline: the store's lock, the catalog record (done, content hash,
    size, chunks) and the store's dimension are written as ingest_file writes them."""
    import hashlib

    wb = tools.wb
    text = "The lighthouse keeper lit the lamp at dusk.\n\nBread needs yeast."
    lock = system.stores.store_lock("kb")
    assert lock.acquire()
    try:  # the write waits for the store's lock
        import threading

        t = threading.Thread(target=tools.call, args=("vector_upsert", {"store": "kb", "file_id": "n1", "text": text}))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not wb.file_record("kb", "n1")
    finally:
        lock.release()
    t.join(10)
    rec = wb.file_record("kb", "n1")
    assert rec.status == "done" and rec.chunks == wb.vector_store("kb").count("n1") >= 1
    assert rec.sha256 == hashlib.sha256(text.encode()).hexdigest() and rec.size == len(text.encode())
    assert wb.store_record("kb").dimension == 64
    assert not tools.call("vector_upsert", {"store": "kb", "file_id": "n2", "text": "   "}).ok


def test_the_tool_group_reads_no_path_by_default_and_anywhere_only_when_asked(tools, tmp_path, system):
    """Issue 24, item 7: KnowledgeTools(workbench) without folders let vector_ingest_file read any path
    a model named (/etc/hostname was read). Now the default refuses, saying why and how to allow it."""
    secret = tmp_path / "outside" / "hostname"
    secret.parent.mkdir()
    secret.write_text("build-host-42\n")
    for path in ("/etc/hostname", str(secret)):
        r = tools.call("vector_ingest_file", {"store": "kb", "path": path})
        assert not r.ok
        assert "not allowed" in r.text and "no folders" in r.text and "chat.allowed_dirs" in r.text
        assert "folders=ANYWHERE" in r.text
    assert not system.stores.exists("kb")  # nothing read, nothing created
    anywhere = KnowledgeTools(tools.wb, folders=ANYWHERE)
    r = anywhere.call("vector_ingest_file", {"store": "kb", "path": str(secret)})
    assert r.ok and r.data["outcome"] == "indexed"
    hits = anywhere.call("vector_search", {"store": "kb", "query": "build-host-42"}).data["hits"]
    assert "build-host-42" in hits[0]["text"]
    with pytest.raises(TypeError):
        KnowledgeTools(tools.wb, folders="/")  # a bare path is no choice: LocalFolders or ANYWHERE


def test_vector_search_gives_each_passage_its_store_distance_and_number(tools):
    """The tool's result carries what the chat builds its citations from (the chat calls the same
    implementation, ``KnowledgeTools.search_stores``): store, score direction, file id, score, ref."""
    tools.call("vector_upsert", {"store": "kb", "file_id": "notes-1", "text": "The lighthouse keeper lit the lamp."})
    r = tools.vector_search("kb", "lighthouse lamp", k=2)
    [hit] = r.data["hits"]
    assert (hit["store"], hit["file_id"], hit["ref"]) == ("kb", "notes-1", 1)
    assert hit["distance"] == tools.wb.get_store("kb").distance and hit["higher_is_better"] is True
    assert hit["score"] > 0 and r.data["failed"] == {}
    again = tools.search_stores(["kb"], "lighthouse lamp", 2, numbered=[{**hit, "ref": 7}])
    assert again.text.startswith("[7] ") and again.data["hits"][0]["ref"] == 7  # found again: its number kept
    none = tools.vector_search("kb", "zzzz qqqq", k=2, file_id="no-such-file")
    assert none.ok and none.text == "No results in 'kb' for 'zzzz qqqq'." and none.data["hits"] == []
