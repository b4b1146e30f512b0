"""What the qdrant backend does beyond the contract: layout, point ids, filters, locations, server
versions and retries.

Local mode (qdrant-client ``:memory:`` and a folder) for the data; a local HTTP server speaking the
Qdrant REST protocol for what only a server shows (its version, 503s and Retry-After).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from qdrant_client import QdrantClient, models
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import UnexpectedResponse
from tenacity import RetryCallState, Retrying

from knowledge.config import load_settings
from knowledge.errors import BackendUnavailable, ConfigError, InvalidArgument
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.qdrant import (
    COLLECTION_FIELD,
    ID_FIELD,
    QdrantBackend,
    _retryable,
    _Wait,
    point_uuid,
)
from knowledge.vectorstore.registry import open_backend

D = 8


def vecs(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)


@pytest.fixture
def client() -> Iterator[QdrantClient]:
    c = QdrantClient(location=":memory:")
    yield c
    c.close()


@pytest.fixture
def qb(settings, client) -> QdrantBackend:
    return QdrantBackend(settings, client=client)


def test_logical_collections_share_one_physical_collection_per_distance_and_size(qb, client):
    for name in ("notes", "papers"):
        c = qb.collection(name)
        c.ensure_collection(D, "cosine")
        c.upsert([Point(f"{name}-{i}", v, {"i": i}) for i, v in enumerate(vecs(3))])
    qb.collection("wide").ensure_collection(D * 2, "cosine")
    qb.collection("far").ensure_collection(D, "euclid")
    physical = sorted(c.name for c in client.get_collections().collections)
    assert physical == ["knowledge-cosine-16", "knowledge-cosine-8", "knowledge-euclid-8", "knowledge-registry"]
    assert client.count("knowledge-cosine-8", exact=True).count == 6
    assert qb.list_collections() == ["far", "notes", "papers", "wide"]
    assert qb.collection("notes").count() == 3
    # a search in one logical collection never sees the other's points, whatever the filter
    hits = qb.collection("notes").search(vecs(1, 9)[0], limit=10)
    assert sorted(h.id for h in hits) == ["notes-0", "notes-1", "notes-2"]
    everything = models.Filter(must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key="i"))])
    assert len(qb.collection("papers").search(vecs(1, 9)[0], limit=10, raw_filter=everything)) == 3
    qb.collection("notes").drop_collection()
    assert client.count("knowledge-cosine-8", exact=True).count == 3
    assert qb.list_collections() == ["far", "papers", "wide"]


def test_point_ids_are_uuid5_of_the_readable_key_kept_in_the_payload(qb, client):
    c = qb.collection("store")
    c.ensure_collection(D)
    c.upsert([Point("file-1:0", vecs(1)[0], {"text": "a"}), Point(7, vecs(1, 1)[0], {"text": "b"})])
    c.upsert([Point("file-1:0", vecs(1, 2)[0], {"text": "a2"})])  # same key: same point, overwritten
    assert client.count("knowledge-cosine-8", exact=True).count == 2
    expected = str(uuid.uuid5(uuid.UUID("6f1c1f4e-3b7a-5d2e-9a61-0c4b8e2d7f35"), json.dumps(["store", "file-1:0"])))
    assert point_uuid("store", "file-1:0") == expected
    assert point_uuid("store", 7) != point_uuid("store", "7") != point_uuid("other", 7)
    rec = client.retrieve("knowledge-cosine-8", [expected], with_payload=True)[0]
    assert rec.payload == {"text": "a2", COLLECTION_FIELD: "store", ID_FIELD: "file-1:0"}
    hit = c.search(vecs(1, 1)[0], limit=1)[0]
    assert (hit.id, hit.payload) == (7, {"text": "b"})  # readable id back, reserved fields hidden


def test_reserved_payload_fields_and_foreign_raw_filters_are_refused(qb):
    c = qb.collection("s")
    c.ensure_collection(D)
    with pytest.raises(InvalidArgument, match="reserved"):
        c.upsert([Point("x", vecs(1)[0], {COLLECTION_FIELD: "other"})])
    with pytest.raises(InvalidArgument, match=r"qdrant_client\.models\.Filter"):
        c.search(vecs(1)[0], raw_filter=lambda p: True)
    with pytest.raises(InvalidArgument, match="not a valid Qdrant filter"):
        c.search(vecs(1)[0], raw_filter={"must": "nonsense"})
    with pytest.raises(InvalidArgument, match="64 bits"):
        c.upsert([Point(2**70, vecs(1)[0], {})])


def test_where_keys_with_dots_and_numeric_equality(qb):
    c = qb.collection("keys")
    c.ensure_collection(D)
    v = vecs(4)
    c.upsert(
        [
            Point("dotted", v[0], {"a.b": "x"}),
            Point("nested", v[1], {"a": {"b": "x"}}),
            Point("float", v[2], {"n": 2.0}),
            Point("bool", v[3], {"n": True}),
        ]
    )
    assert [h.id for h in c.search(v[0], limit=5, where={"a.b": "x"})] == ["dotted"]  # a key, not a path
    assert [h.id for h in c.search(v[0], limit=5, where={"n": 2})] == ["float"]  # 2 == 2.0
    assert [h.id for h in c.search(v[0], limit=5, where={"n": 1})] == []  # 1 is not true
    assert c.count({"n": True}) == 1


def test_raw_filter_in_dict_form(qb):
    c = qb.collection("dict")
    c.ensure_collection(D)
    c.upsert([Point(i, v, {"year": 2020 + i}) for i, v in enumerate(vecs(5))])
    flt = {"must": [{"key": "year", "range": {"gte": 2022}}]}
    assert sorted(h.id for h in c.search(vecs(1, 3)[0], limit=10, raw_filter=flt)) == [2, 3, 4]


def test_local_folder_persists_and_is_locked_against_a_second_process(tmp_path):
    settings = load_settings(data_dir=tmp_path / "data", vector_store={"qdrant_location": "qdrant-local"})
    with open_backend(settings, "qdrant") as b:
        assert b.location == str(tmp_path / "data" / "qdrant-local")
        c = b.collection("kept")
        c.ensure_collection(D, "manhattan")
        c.upsert([Point(i, v, {"i": i}) for i, v in enumerate(vecs(4))])
        with pytest.raises(BackendUnavailable, match="open in another process"):
            QdrantBackend(settings)
    with open_backend(settings, "qdrant") as b:
        info = b.collection("kept").info()
        assert (info.size, info.distance, info.count) == (D, "manhattan", 4)
        assert b.collection("kept").search(vecs(4)[2], limit=1)[0].id == 2


def test_location_forms(tmp_path):
    data = tmp_path / "data"
    assert QdrantBackend._location(load_settings(data_dir=data)) == str(data / "qdrant")
    mem = load_settings(data_dir=data, vector_store={"qdrant_location": ":memory:"})
    assert QdrantBackend._location(mem) == ":memory:"
    url = load_settings(data_dir=data, vector_store={"url": "https://x.cloud.qdrant.io:6333"})
    assert QdrantBackend._location(url) == "https://x.cloud.qdrant.io:6333"
    pg = load_settings(data_dir=data, vector_store={"url": "postgresql://localhost/db"})
    assert QdrantBackend._location(pg) == str(data / "qdrant")  # a Postgres URL is not ours
    with pytest.raises(ConfigError):
        load_settings(data_dir=data, vector_store={"qdrant_colection": "typo"})
    with pytest.raises(ConfigError):
        load_settings(data_dir=data, vector_store={"qdrant_collection": "has space"})


# -- a local HTTP server speaking the Qdrant REST protocol -----------------------------------------


class _Server:
    """A minimal Qdrant REST server: ``GET /`` answers a version after a scripted list of failures;
    collection, index and point endpoints answer as an empty Qdrant does. Records every request as
    ``(method, path, json body)``."""

    def __init__(self, version: str, failures: list[tuple[int, dict[str, str]]] | None = None) -> None:
        self.version = version
        self.failures = list(failures or [])
        self.requests: list[str] = []
        self.calls: list[tuple[str, str, object]] = []
        self.collections: set[str] = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _reply(self, status: int, result: object, headers: dict[str, str] | None = None) -> None:
                body = json.dumps(
                    {"result": result, "status": "ok" if status == 200 else {"error": "busy"}, "time": 0.0}
                ).encode()
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                path = self.path.split("?")[0]
                outer.requests.append(path)
                outer.calls.append((method, path, body))
                if outer.failures:
                    status, headers = outer.failures.pop(0)
                    return self._reply(status, None, headers)
                parts = path.strip("/").split("/")
                if path == "/":
                    body = json.dumps(
                        {"title": "qdrant - vector search engine", "version": outer.version, "commit": None}
                    ).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    return self.wfile.write(body)
                if parts[-1] == "exists":
                    return self._reply(200, {"exists": parts[1] in outer.collections})
                if method == "PUT" and len(parts) == 2:
                    outer.collections.add(parts[1])
                    return self._reply(200, True)
                if method == "POST" and parts[-1] == "points":  # retrieve: nothing stored
                    return self._reply(200, [])
                return self._reply(200, {"operation_id": 1, "status": "completed"})

            def do_GET(self):
                self._handle("GET")

            def do_PUT(self):
                self._handle("PUT")

            def do_POST(self):
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )  # shutdown() waits up to one poll
        self.thread.start()

    def indexes(self) -> dict[str, dict]:
        """Payload indexes requested: field name -> field schema."""
        return {
            body["field_name"]: body["field_schema"]
            for method, path, body in self.calls
            if method == "PUT" and path.endswith("/index")
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory():
    servers: list[_Server] = []

    def make(version: str, failures=None) -> _Server:
        s = _Server(version, failures)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def _settings(tmp_path, url: str, **extra):
    return load_settings(data_dir=tmp_path / "data", vector_store={"qdrant_location": url, **extra})


def test_server_older_than_1_10_is_refused_with_the_reason(tmp_path, server_factory):
    srv = server_factory("1.9.7")
    with pytest.raises(BackendUnavailable, match=r"version 1\.9\.7; the qdrant backend needs Qdrant 1\.10 or newer"):
        open_backend(_settings(tmp_path, srv.url), "qdrant")


@pytest.mark.parametrize("version,tenant", [("1.10.1", False), ("1.11.5", False), ("1.12.0", True), ("1.16.2", True)])
def test_tenant_index_from_qdrant_1_12(tmp_path, server_factory, version, tenant):
    srv = server_factory(version)
    with open_backend(_settings(tmp_path, srv.url), "qdrant") as b:
        assert b.server_version[:2] == tuple(int(x) for x in version.split(".")[:2])
        assert b.tenant_index is tenant
        b.collection("notes").ensure_collection(D, "dot")
    assert {"knowledge-registry", "knowledge-dot-8"} <= srv.collections
    created = [(m, p) for m, p, _ in srv.calls if m == "PUT" and p.count("/") == 2]
    assert sorted(created) == [("PUT", "/collections/knowledge-dot-8"), ("PUT", "/collections/knowledge-registry")]
    indexes = srv.indexes()
    assert indexes[COLLECTION_FIELD]["type"] == "keyword"
    assert indexes[COLLECTION_FIELD].get("is_tenant") is (True if tenant else None)
    assert indexes["file_id"] == "keyword" and indexes["dataset"] == "keyword"
    # the registry entry names the size and distance; the physical collection, the vectors
    upserts = [b for m, p, b in srv.calls if m == "PUT" and p == "/collections/knowledge-registry/points"]
    assert upserts[0]["points"][0]["payload"] == {"name": "notes", "size": D, "distance": "dot"}
    created_body = next(b for m, p, b in srv.calls if m == "PUT" and p == "/collections/knowledge-dot-8")
    assert created_body["vectors"] == {"size": D, "distance": "Dot"}


def test_unavailable_and_rate_limited_calls_are_retried(tmp_path, server_factory):
    srv = server_factory("1.13.0", failures=[(503, {}), (429, {"Retry-After": "0"})])
    with open_backend(_settings(tmp_path, srv.url), "qdrant") as b:
        assert b.server_version == (1, 13, 0)
    assert srv.requests == ["/", "/", "/"]


def test_retries_stop_after_the_configured_attempts(tmp_path, server_factory):
    srv = server_factory("1.13.0", failures=[(503, {})] * 5)
    with pytest.raises(BackendUnavailable, match="kept answering 503 after 2 attempts"):
        open_backend(_settings(tmp_path, srv.url, qdrant_retries=2), "qdrant")
    assert len(srv.requests) == 2


def test_a_server_failing_in_use_is_backend_unavailable_after_the_retries(tmp_path, server_factory):
    srv = server_factory("1.13.0")
    with open_backend(_settings(tmp_path, srv.url), "qdrant") as b:
        srv.failures = [(502, {})] * 3
        with pytest.raises(BackendUnavailable, match="kept answering 502 after 3 attempts"):
            b.collection("x").collection_exists()
        assert srv.requests == ["/"] + ["/collections/knowledge-registry/exists"] * 3
        srv.failures = [(503, {"Retry-After": "0"})]
        assert b.collection("x").collection_exists() is False  # one 503, then the answer


def test_a_refused_api_key_says_so(tmp_path, server_factory):
    srv = server_factory("1.13.0", failures=[(401, {})])
    with (
        pytest.raises(BackendUnavailable, match=r"refused the request \(401\): check vector_store.qdrant_api_key"),
        pytest.warns(UserWarning, match="insecure connection"),
    ):  # qdrant-client: a key over http
        open_backend(_settings(tmp_path, srv.url, qdrant_api_key="wrong"), "qdrant")
    assert len(srv.requests) == 1


def test_a_client_error_is_not_retried(tmp_path, server_factory):
    srv = server_factory("1.13.0", failures=[(400, {})])
    with pytest.raises(BackendUnavailable):
        open_backend(_settings(tmp_path, srv.url), "qdrant")
    assert len(srv.requests) == 1


def test_an_unreachable_server_is_backend_unavailable(tmp_path, server_factory):
    srv = server_factory("1.13.0")
    url = srv.url
    srv.close()
    with pytest.raises(BackendUnavailable, match="did not answer after 1 attempt "):
        open_backend(_settings(tmp_path, url, qdrant_retries=1), "qdrant")


def _state(exc: BaseException, attempt: int = 1) -> RetryCallState:
    state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, None))
    return state


def test_wait_honours_retry_after_else_backs_off_exponentially():
    import httpx

    wait = _Wait()
    assert wait(_state(ResourceExhaustedResponse("slow down", 7))) == 7.0
    assert wait(_state(ResourceExhaustedResponse("slow down", 3600))) == 30.0  # capped
    resp = UnexpectedResponse(503, "Service Unavailable", b"", httpx.Headers({"Retry-After": "2"}))
    assert wait(_state(resp)) == 2.0
    no_header = UnexpectedResponse(503, "Service Unavailable", b"", httpx.Headers({}))
    first, third = wait(_state(no_header, 1)), wait(_state(no_header, 3))
    assert 0.1 <= first <= 0.2 and 0.4 <= third <= 0.5
    assert _retryable(no_header) and not _retryable(UnexpectedResponse(400, "Bad", b"", httpx.Headers({})))


def test_a_physical_collection_deleted_by_hand_is_store_not_found(qb, client):
    from knowledge.errors import StoreNotFound

    c = qb.collection("gone")
    c.ensure_collection(D)
    c.upsert([Point(1, vecs(1)[0], {})])
    client.delete_collection("knowledge-cosine-8")
    for call in (lambda: c.search(vecs(1)[0]), c.count, lambda: list(c.scroll())):
        with pytest.raises(StoreNotFound, match="knowledge-cosine-8' is gone"):
            call()
    c.drop_collection()  # still cleans up its registry entry
    assert qb.list_collections() == []
    # the handle forgets the vanished collection: registering again recreates it
    c.ensure_collection(D)
    c.upsert([Point(2, vecs(1)[0], {})])
    assert c.count() == 1


def test_the_workbench_ingests_reingests_and_searches_on_qdrant(tmp_path):
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.workbench import Workbench

    settings = load_settings(data_dir=tmp_path / "data", vector_store={"backend": "qdrant", "qdrant_location": ":memory:"})
    wb = Workbench(settings, embedder_factory=lambda model: HashEmbedder(64, 64))
    try:
        cats = b"# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish every day.\n"
        assert wb.ingest_file("notes", cats, "cats.md").outcome == "indexed"
        assert wb.ingest_file("notes", b"# Bread\n\nKnead the dough, let it rise.\n", "bread.md").ok
        hits = wb.search("notes", "what do cats eat", k=3)
        assert hits[0].file_name == "cats.md" and "fish" in hits[0].text
        changed = b"# Cats\n\nCats now eat only chicken.\n"
        assert wb.ingest_file("notes", changed, "cats.md").outcome == "indexed"
        texts = [h.text for h in wb.search("notes", "cats eat", k=10)]
        assert any("chicken" in t for t in texts) and not any("fish" in t for t in texts)
        backend = wb.backend("qdrant")
        assert backend.list_collections() == ["notes"]
        assert backend.collection("notes").info().count == 2  # one chunk per file now
    finally:
        wb.close()
