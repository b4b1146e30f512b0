"""``Idempotency-Key`` on the REST API's creating POSTs (issue 39): a retry answers the first result
instead of making a second record; the same key for another request is refused; the key is the
caller's. The retry after a real timeout (a frozen S3 server) and two API processes racing one key
on one PostgreSQL catalog are the ``slow`` tests below."""

from __future__ import annotations

import uuid

import httpx
import pytest
from api_helpers import Served

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.workbench import Workbench

DATA = b"# Ownership\n\nEach value in Rust has an owner.\n" * 20


@pytest.fixture
def wb(tmp_path):
    w = Workbench(load_settings(data_dir=tmp_path / "data", ingest={"max_file_mb": 2}),
                  embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
    yield w
    w.close()


@pytest.fixture
def http(wb):
    with Served(create_app(wb)) as base, httpx.Client(base_url=base + "/v1", timeout=60) as c:
        yield c


def upload(http: httpx.Client, key: str | None, name: str = "ownership.md", data: bytes = DATA,
           purpose: str = "assistants") -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return http.post("/files", files={"file": (name, data, "text/markdown")}, data={"purpose": purpose},
                     headers=headers)


def uploads(wb: Workbench, name: str) -> list:
    return [f for f in wb.stored_files() if f.name == name]


def test_an_upload_retried_with_its_key_answers_the_first_file_and_stores_one(http, wb):
    key = str(uuid.uuid4())
    first, again = upload(http, key), upload(http, key)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert [f.id for f in uploads(wb, "ownership.md")] == [first.json()["id"]]
    # without a key, or with another, the same upload is a new file (as OpenAI's API does)
    assert upload(http, None).json()["id"] != first.json()["id"]
    assert upload(http, str(uuid.uuid4())).json()["id"] != first.json()["id"]
    assert len(uploads(wb, "ownership.md")) == 3


def test_the_same_key_for_another_request_is_refused_in_words(http, wb):
    key = str(uuid.uuid4())
    assert upload(http, key).status_code == 200
    for other in (upload(http, key, data=DATA + b"changed"), upload(http, key, name="other.md"),
                  upload(http, key, purpose="user_data")):
        assert other.status_code == 422, other.text
        error = other.json()["error"]
        assert error["code"] == "idempotency_key_reused" and "different request" in error["message"]
    vs = http.post("/vector_stores", json={"name": "s"}).json()
    elsewhere = http.post(f"/vector_stores/{vs['id']}/file_batches", json={"file_ids": []},
                          headers={"Idempotency-Key": key})
    assert elsewhere.status_code in (400, 422)  # a bad request is refused before the key is looked at
    assert len(uploads(wb, "ownership.md")) == 1 and not uploads(wb, "other.md")
    for bad in ("", "x" * 256, "caf\u00e9"):
        r = http.post("/files", files={"file": ("a.md", DATA)}, data={"purpose": "assistants"},
                      headers={"Idempotency-Key": bad.encode("utf-8")})
        assert r.status_code == 400 and "Idempotency-Key" in r.json()["error"]["message"]


def test_batch_and_store_file_creation_take_a_key(http, wb):
    fid = upload(http, None).json()["id"]
    vs = http.post("/vector_stores", json={"name": "s"}).json()
    key = {"Idempotency-Key": str(uuid.uuid4())}
    first = http.post(f"/vector_stores/{vs['id']}/file_batches", json={"file_ids": [fid]}, headers=key)
    again = http.post(f"/vector_stores/{vs['id']}/file_batches", json={"file_ids": [fid]}, headers=key)
    assert first.status_code == again.status_code == 200
    assert again.json()["id"] == first.json()["id"] and again.headers["idempotent-replayed"] == "true"
    assert again.headers["openai-poll-after-ms"] == first.headers["openai-poll-after-ms"]
    assert http.post(f"/vector_stores/{vs['id']}/file_batches", json={"file_ids": [fid, fid]},
                     headers=key).status_code == 422
    one = {"Idempotency-Key": str(uuid.uuid4())}
    added = [http.post(f"/vector_stores/{vs['id']}/files", json={"file_id": fid}, headers=one) for _ in range(2)]
    assert added[0].json()["id"] == added[1].json()["id"] == fid and added[1].headers["idempotent-replayed"] == "true"


def test_a_failed_first_request_is_replayed_when_it_was_the_clients_fault(http, wb):
    vs = http.post("/vector_stores", json={"name": "s"}).json()
    key = {"Idempotency-Key": str(uuid.uuid4())}
    missing = "file-" + "0" * 32
    first = http.post(f"/vector_stores/{vs['id']}/files", json={"file_id": missing}, headers=key)
    again = http.post(f"/vector_stores/{vs['id']}/files", json={"file_id": missing}, headers=key)
    assert first.status_code == again.status_code == 404 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
