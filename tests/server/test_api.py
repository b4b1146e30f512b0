"""The OpenAI-compatible REST API, driven by the official ``openai`` package against a uvicorn server
started here on a free loopback port (a fast fake embedder; the corpus's real files as uploads)."""

from __future__ import annotations

import httpx
import openai
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import ConfigError
from knowledge.server.app import create_app
from knowledge.server.http import check_bind
from knowledge.server.objects import vector_store_id
from knowledge.system import System
from tests.helpers.api import Served

RESULT = "ch09-02-recoverable-errors-with-result.md"
PANIC = "ch09-01-unrecoverable-errors-with-panic.md"


@pytest.fixture
def system(tmp_path):
    s = System(
        load_settings(data_dir=tmp_path / "data", ingest={"max_file_mb": 2}),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    yield s
    s.close()


@pytest.fixture
def client(system):
    with Served(create_app(system)) as base:
        yield openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture
def book(corpus):
    return corpus / "md" / "rust-book"


def test_store_static_chunking_upload_and_poll_filtered_search_and_delete(client, wb, book):
    vs = client.vector_stores.create(
        name="rust",
        metadata={"team": "docs"},
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 800, "chunk_overlap_tokens": 400}},
    )
    assert vs.id == vector_store_id("rust") and vs.object == "vector_store" and vs.metadata == {"team": "docs"}
    assert wb.get_store("rust")  # the API's store is the workbench's store

    uploaded = []
    for name, attrs in ((RESULT, {"chapter": 9, "topic": "result"}), (PANIC, {"chapter": 9, "topic": "panic"})):
        with open(book / name, "rb") as fh:
            f = client.vector_stores.files.upload_and_poll(
                vector_store_id=vs.id, file=fh, attributes=attrs, poll_interval_ms=100
            )
        assert f.status == "completed", f.last_error
        assert f.attributes == attrs
        # 800/400 asked; the model's 256-token window fits 256/128 -- and the API says so
        assert f.chunking_strategy.static.max_chunk_size_tokens == 256
        assert f.chunking_strategy.static.chunk_overlap_tokens == 128
        assert "window" in " ".join(f.model_extra["chunking_notes"])
        uploaded.append(f)
    # the template the static strategy maps to, holding the asked values
    assert "default-static-800-400" in wb.template_names()

    listed = client.vector_stores.files.list(vector_store_id=vs.id, limit=1)
    assert len(listed.data) == 1 and listed.has_more
    assert {f.id for f in client.vector_stores.files.list(vector_store_id=vs.id)} == {f.id for f in uploaded}
    assert client.vector_stores.retrieve(vs.id).file_counts.completed == 2

    query = "propagating errors with the question mark operator"
    everything = list(client.vector_stores.search(vs.id, query=query, max_num_results=10))
    assert RESULT in {r.filename for r in everything}
    hit = everything[0]
    assert hit.content[0].type == "text" and hit.content[0].text
    assert {"page", "heading", "char_start", "char_end", "chapter", "topic"} <= set(hit.attributes)

    only_panic = list(
        client.vector_stores.search(
            vs.id, query=query, max_num_results=5, filters={"type": "eq", "key": "topic", "value": "panic"}
        )
    )
    assert only_panic and {r.filename for r in only_panic} == {PANIC}
    compound = list(
        client.vector_stores.search(
            vs.id,
            query=query,
            max_num_results=5,
            filters={
                "type": "and",
                "filters": [{"type": "gte", "key": "chapter", "value": 9}, {"type": "ne", "key": "topic", "value": "panic"}],
            },
        )
    )
    assert compound and {r.filename for r in compound} == {RESULT}
    assert not list(client.vector_stores.search(vs.id, query=query, filters={"type": "gt", "key": "chapter", "value": 9}))

    # attributes can be changed; the search sees the new ones
    client.vector_stores.files.update(uploaded[0].id, vector_store_id=vs.id, attributes={"topic": "errors"})
    found = list(client.vector_stores.search(vs.id, query=query, filters={"type": "eq", "key": "topic", "value": "errors"}))
    assert {r.filename for r in found} == {RESULT}

    # removing the file from the store: gone from search, the file itself stays
    deleted = client.vector_stores.files.delete(uploaded[1].id, vector_store_id=vs.id)
    assert deleted.deleted
    after = list(client.vector_stores.search(vs.id, query=query, max_num_results=10))
    assert after and PANIC not in {r.filename for r in after}
    assert client.files.retrieve(uploaded[1].id).filename == PANIC
    assert client.files.content(uploaded[1].id).read() == (book / PANIC).read_bytes()


@pytest.mark.slow
def test_batches_files_api_and_store_lifecycle(client, wb, corpus):
    pdf = corpus / "pdf" / "pdflatex-4-pages.pdf"
    files = [
        client.files.create(file=(p.name, p.read_bytes()), purpose="assistants")
        for p in (pdf, corpus / "pdf" / "minimal-document.pdf")
    ]
    assert files[0].object == "file" and files[0].bytes == pdf.stat().st_size
    vs = client.vector_stores.create(name="papers")
    batch = client.vector_stores.file_batches.create_and_poll(
        vector_store_id=vs.id, file_ids=[f.id for f in files], attributes={"kind": "paper"}, poll_interval_ms=100
    )
    assert batch.status == "completed" and batch.file_counts.completed == 2
    in_batch = client.vector_stores.file_batches.list_files(batch.id, vector_store_id=vs.id)
    assert {f.id for f in in_batch} == {f.id for f in files} and all(f.attributes == {"kind": "paper"} for f in in_batch)
    hits = list(client.vector_stores.search(vs.id, query="page", max_num_results=5))
    assert any(h.attributes["page"] is not None for h in hits)  # provenance beyond OpenAI

    # a stored file is listed once
    assert len([f for f in client.files.list() if f.id == files[0].id]) == 1
    listed = client.vector_stores.list()
    assert [s.name for s in listed] == ["papers"]
    assert client.vector_stores.delete(vs.id).deleted
    assert client.files.retrieve(files[0].id).id == files[0].id  # uploads outlive their store
    assert client.files.delete(files[0].id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(files[0].id)


def test_error_bodies(client, wb, book):
    with pytest.raises(openai.NotFoundError) as missing:
        client.vector_stores.retrieve("vs_" + "0" * 24)
    err = missing.value.body
    assert missing.value.status_code == 404 and err["type"] == "invalid_request_error" and "vector store" in err["message"]
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.search("../../etc/passwd", query="x")
    vs = client.vector_stores.create(name="s")
    with open(book / RESULT, "rb") as fh:
        client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=fh, poll_interval_ms=100)
    for bad in (
        {"type": "like", "key": "a", "value": "b"},
        {"type": "eq", "key": "a", "value": {"x": 1}},
        {"type": "and", "filters": []},
        {"type": "in", "key": "a", "value": "notalist"},
    ):
        with pytest.raises(openai.BadRequestError) as e:
            client.vector_stores.search(vs.id, query="result", filters=bad)
        assert e.value.status_code == 400 and e.value.body["param"] == "filters", bad
    with pytest.raises(openai.BadRequestError) as e:
        client.vector_stores.create(
            name="t",
            chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 10}},
        )
    assert "max_chunk_size_tokens" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        client.vector_stores.files.create(vector_store_id=vs.id, file_id="file-" + "a" * 32)


def test_a_bad_file_fails_with_last_error_and_a_large_one_is_refused(client, wb):
    vs = client.vector_stores.create(name="s")
    f = client.vector_stores.files.upload_and_poll(
        vector_store_id=vs.id, file=("old.doc", b"\xd0\xcf\x11\xe0" + b"\0" * 600), poll_interval_ms=100
    )
    assert f.status == "failed" and f.last_error.message and f.last_error.code in ("unsupported_file", "invalid_file")
    with pytest.raises(openai.APIStatusError) as e:
        client.files.create(file=("big.txt", b"x" * 3_000_001), purpose="assistants")
    assert e.value.status_code == 413


def test_non_loopback_needs_the_key_and_requests_without_it_get_401(system):
    with pytest.raises(ConfigError, match="KNOWLEDGE_API_KEY"):
        check_bind("0.0.0.0", None)
    check_bind("127.0.0.1", None)
    with Served(create_app(system, api_key="s3cret-key"), host="0.0.0.0") as base:
        bare = httpx.get(base + "/v1/vector_stores")
        assert bare.status_code == 401 and bare.json()["error"]["code"] == "invalid_api_key"
        wrong = openai.OpenAI(base_url=base + "/v1", api_key="nope", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.vector_stores.list()
        right = openai.OpenAI(base_url=base + "/v1", api_key="s3cret-key", max_retries=0)
        assert right.vector_stores.create(name="x").name == "x"
        assert httpx.get(base + "/openapi.json", headers={"Authorization": "Bearer s3cret-key"}).status_code == 200
        assert (
            "access-control-allow-origin"
            not in httpx.options(
                base + "/v1/vector_stores",
                headers={
                    "Origin": "http://evil.example",
                    "Access-Control-Request-Method": "GET",
                    "Authorization": "Bearer s3cret-key",
                },
            ).headers
        )


def test_openapi_docs(client, wb, tmp_path):
    base = str(client.base_url).removesuffix("/v1/")
    spec = httpx.get(base + "/openapi.json").json()
    assert "/v1/vector_stores/{vs_id}/search" in spec["paths"] and "/v1/chat/completions" in spec["paths"]
    # the Swagger page loads its scripts from a public CDN: off unless api.docs turns it on
    assert httpx.get(base + "/docs").status_code == 404 and httpx.get(base + "/redoc").status_code == 404
    w = System(
        load_settings(data_dir=tmp_path / "docs-data", api={"docs": True}),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    try:
        with Served(create_app(w)) as other:
            page = httpx.get(other + "/docs")
            assert page.status_code == 200 and "swagger" in page.text.lower()
            assert "content-security-policy" not in page.headers  # its own page; every other response has one
            assert "default-src 'none'" in httpx.get(other + "/openapi.json").headers["content-security-policy"]
    finally:
        w.close()


def test_same_bytes_under_another_name_join_the_first_and_readding_a_file_is_idempotent(client, wb, book):
    data = (book / RESULT).read_bytes()
    vs = client.vector_stores.create(name="s")
    first = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("a.md", data), poll_interval_ms=100)
    again = client.vector_stores.files.create_and_poll(first.id, vector_store_id=vs.id, poll_interval_ms=100)
    assert first.status == again.status == "completed"
    copy = client.vector_stores.files.upload_and_poll(vector_store_id=vs.id, file=("b.md", data), poll_interval_ms=100)
    # not indexed twice, and not a failure (issue 39): completed, naming the file that holds the bytes
    assert copy.status == "completed" and copy.last_error is None
    assert copy.model_extra["duplicate_of"] == first.id and "a.md" in copy.model_extra["message"]
    assert copy.model_extra["chunks"] == wb.vector_store("s").count(first.id)
    done = client.vector_stores.files.list(vector_store_id=vs.id, filter="completed")
    assert sorted(f.id for f in done) == sorted([first.id, copy.id])
    assert client.vector_stores.retrieve(vs.id).usage_bytes == len(data)  # one record holds the bytes
    assert wb.vector_store("s").count() == wb.vector_store("s").count(first.id) > 0  # indexed once


def test_each_file_of_a_running_batch_has_its_own_status(tmp_path):
    import threading
    import time

    release = threading.Event()

    class Gated(HashEmbedder):
        def embed_documents(self, texts):
            if any("GATE-4411" in t for t in texts):
                release.wait(60)
            return super().embed_documents(texts)

    w = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: Gated(dimension=64, max_tokens=256))
    try:
        with Served(create_app(w)) as base:
            c = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)
            vs = c.vector_stores.create(name="s")
            a = c.files.create(file=("a.md", b"# A\n\nPlain words about pumps.\n"), purpose="assistants")
            b = c.files.create(file=("b.md", b"# B\n\nThe GATE-4411 valve.\n"), purpose="assistants")
            batch = c.vector_stores.file_batches.create(vector_store_id=vs.id, file_ids=[a.id, b.id])
            deadline = time.monotonic() + 30
            while c.vector_stores.files.retrieve(a.id, vector_store_id=vs.id).status != "completed":
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert c.vector_stores.files.retrieve(b.id, vector_store_id=vs.id).status == "in_progress"
            counts = c.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id).file_counts
            assert (counts.completed, counts.in_progress) == (1, 1)
            assert c.vector_stores.retrieve(vs.id).status == "in_progress"
            release.set()
            done = c.vector_stores.file_batches.poll(batch.id, vector_store_id=vs.id, poll_interval_ms=100)
            assert done.status == "completed" and done.file_counts.completed == 2
    finally:
        release.set()
        w.close()


def test_file_names_with_invisible_or_bidi_characters_at_upload(client, system):
    """Issue 38: a right-to-left override in an uploaded name was stored and failed only later.
    Now the upload is refused with the character named; the invisible characters that carry
    nothing (zero-width space, byte-order mark, soft hyphen) are taken out, so the name kept is
    the one the person sees -- the same at every door (the service layer has the same test)."""
    with pytest.raises(openai.BadRequestError) as e:
        client.files.create(file=("invoice\u202efdp.exe", b"plain text", "text/plain"), purpose="assistants")
    assert e.value.status_code == 400
    said = e.value.body["message"]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in said and "disguise a name's extension" in said, said
    assert "InvalidArgument" not in said
    assert client.files.list().data == [] and system.files.list() == []  # nothing kept
    f = client.files.create(file=("\ufeffre\u00adport\u200b.txt", b"zebra notes", "text/plain"), purpose="assistants")
    assert f.filename == "report.txt"
    vs = client.vector_stores.create(name="kb")
    added = client.vector_stores.files.create_and_poll(vector_store_id=vs.id, file_id=f.id)
    assert added.status == "completed", added.last_error
    assert [x.id for x in client.vector_stores.files.list(vector_store_id=vs.id)] == [f.id]
