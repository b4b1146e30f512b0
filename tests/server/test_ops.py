"""Operating it (issue 44): ``/healthz``, ``/readyz`` and ``/metrics`` on the REST API, the MCP server
over HTTP and a worker's health listener; a REST search's trace; the request id into the job.

The processes tests run real ``python -m knowledge serve`` and ``worker`` processes on PostgreSQL: the
readiness of both while the server is stopped and after it is started again, and the queue's depth
and a failure counter moving on ``/metrics`` while a batch with one broken file is ingested by a worker
process of its own (the queue is read from the shared catalog, not from the API process's memory)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from psycopg.conninfo import conninfo_to_dict

from knowledge.config import load_settings
from knowledge.server.app import create_app
from knowledge.server.ops import HealthListener
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import free_port
from tests.helpers.pg import pg_catalog_settings

ROOT = Path(__file__).resolve().parents[2]
KEY = "ops-test-key"
TRACE = 0x4BF92F3577B34DA6A3CE929D0E0E4736

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans this test makes: the SDK's provider with an in-memory exporter (set once a process;
    OpenTelemetry allows one global provider)."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


@pytest.fixture
def system(tmp_path) -> Iterator[System]:
    s = System(load_settings(data_dir=tmp_path / "data", embeddings={"model": "fake/hash-64"}))
    yield s
    s.close()


def metric(text: str, name: str, **labels: str) -> float:
    """The value of sample ``name`` with exactly ``labels`` in Prometheus's text ``text`` (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if got == labels:
            return float(m.group(4))
    return 0.0


# -- in-process -----------------------------------------------------------------------------------------
def test_a_rest_search_has_spans_for_the_embedding_the_ranking_and_the_backend(system, spans):
    client = TestClient(create_app(system))
    vs = client.post("/v1/vector_stores", json={"name": "notes"}).json()
    fid = client.post(
        "/v1/files",
        files={"file": ("a.md", b"# Tea\n\nGreen tea is steeped at 80 degrees.", "text/markdown")},
        data={"purpose": "assistants"},
    ).json()["id"]
    added = client.post(f"/v1/vector_stores/{vs['id']}/files", json={"file_id": fid})
    assert added.status_code == 200, added.text
    for _ in range(600):  # the in-process worker ingests it
        if client.get(f"/v1/vector_stores/{vs['id']}/files/{fid}").json()["status"] != "in_progress":
            break
        time.sleep(0.05)
    spans.clear()

    r = client.post(
        f"/v1/vector_stores/{vs['id']}/search",
        json={"query": "how hot for green tea"},
        headers={"X-Request-ID": "req-42", "traceparent": f"00-{TRACE:032x}-00000000000000a1-01"},
    )
    assert r.status_code == 200 and r.json()["data"], r.text
    assert r.headers["x-request-id"] == "req-42"

    done = spans.get_finished_spans()
    by_name: dict[str, list] = {}
    for s in done:
        by_name.setdefault(s.name, []).append(s)
    http = next(s for s in done if s.name.startswith("HTTP POST"))
    assert http.attributes["http.route"] == "/v1/vector_stores/{vs_id}/search"
    search = by_name["search"][0]
    assert search.attributes["ranking"] == "hybrid" and search.attributes["backend"] == "memory"
    embedding, ranking = by_name["search embedding"][0], by_name["search ranking"][0]
    backend = by_name["search backend"]
    assert {b.attributes["operation"] for b in backend} >= {"vector search", "lexical search"}
    # one trace: the request's span holds the search, which holds the embedding and the ranking,
    # which holds the backend's calls; every one carries the request id
    trace_id = http.context.trace_id
    assert trace_id == TRACE and http.parent.span_id == 0xA1  # the client's trace (W3C traceparent) goes on
    assert {s.context.trace_id for s in [search, embedding, ranking, *backend]} == {trace_id}
    ids = {s.context.span_id: s for s in done}

    def under(span, ancestor) -> bool:
        while span.parent is not None:
            if span.parent.span_id == ancestor.context.span_id:
                return True
            span = ids[span.parent.span_id]
        return False

    assert under(search, http)
    assert embedding.parent.span_id == search.context.span_id and ranking.parent.span_id == search.context.span_id
    assert {b.parent.span_id for b in backend} == {ranking.context.span_id}
    assert {s.attributes.get("request_id") for s in [search, embedding, ranking, *backend]} == {"req-42"}


def test_the_probes_need_no_key_and_metrics_needs_the_apis(system):
    client = TestClient(create_app(system, api_key=KEY))
    assert client.get("/v1/vector_stores").status_code == 401  # the API wants its key
    assert client.get("/healthz").json() == {"status": "alive"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready" and set(ready.json()["checks"]) == {
        "catalog",
        "file_store",
        "vector_backend",
        "embedding_model",
    }
    assert client.get("/metrics").status_code == 401
    m = client.get("/metrics", headers={"Authorization": f"Bearer {KEY}"})
    assert m.status_code == 200 and m.headers["content-type"].startswith("text/plain")
    assert metric(m.text, "knowledge_ingest_queue_up") == 1
    assert metric(m.text, "knowledge_http_requests_total", server="api", route="/healthz", method="GET", status="200") >= 1
    assert "process_resident_memory_bytes" in m.text  # the RSS
    # refused by the Guard before routing, yet counted under the route it asked for, not "unmatched"
    client.get("/v1/vector_stores/vs_nope")
    m = client.get("/metrics", headers={"Authorization": f"Bearer {KEY}"})
    route = "/v1/vector_stores/{vs_id}"
    assert metric(m.text, "knowledge_http_requests_total", server="api", route=route, method="GET", status="401") == 1


def test_the_scrapers_token_opens_metrics_and_nothing_else_with_accounts_too(tmp_path):
    """Once accounts exist the API's shared key is refused everywhere; ``ops.metrics_token`` still
    opens ``/metrics`` -- on the API and on a worker's health listener -- and no other route."""
    s = System(
        load_settings(data_dir=tmp_path / "data", embeddings={"model": "fake/hash-64"}, ops={"metrics_token": "scrape-me"})
    )
    try:
        s.people.set_up_admin("root", "correct horse battery")
        client = TestClient(create_app(s, api_key=KEY))
        scraper = {"Authorization": "Bearer scrape-me"}
        assert client.get("/metrics", headers={"Authorization": f"Bearer {KEY}"}).status_code == 401
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer scrape-mf"}).status_code == 401
        m = client.get("/metrics", headers=scraper)
        assert m.status_code == 200 and "knowledge_ingest_queue_up" in m.text
        assert client.get("/v1/vector_stores", headers=scraper).status_code == 401
        assert client.post("/metrics", headers=scraper).status_code == 401  # GET only

        listener = HealthListener(
            "127.0.0.1", 0, readiness=Workbench(s).readiness(), state=lambda: ("running", None), wb=Workbench(s)
        ).start()
        try:
            url = f"http://127.0.0.1:{listener.port}/metrics"
            refused = httpx.get(url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
            assert refused.status_code == 401  # from this computer, but accounts exist
            assert "shared KNOWLEDGE_API_KEY is refused" in refused.json()["error"]
            assert "ops.metrics_token" in refused.json()["error"]
            assert httpx.get(url, headers=scraper, timeout=30).status_code == 200
        finally:
            listener.close()
        waiting = HealthListener(
            "127.0.0.1",
            0,
            readiness=Workbench(s).readiness(),
            state=lambda: ("waiting", "the catalog cannot be reached"),
            wb=Workbench(s),
        ).start()
        try:
            ready = httpx.get(f"http://127.0.0.1:{waiting.port}/readyz", timeout=30)
            assert ready.status_code == 503 and ready.headers["Retry-After"] == "5"
            assert "the worker is waiting" in ready.json()["reason"]
        finally:
            waiting.close()
    finally:
        s.close()


def test_readyz_says_which_part_is_not_reachable(tmp_path):
    # a qdrant server that is not there: the vector backend fails its check, in words, with a 503
    settings = load_settings(
        data_dir=tmp_path / "data",
        embeddings={"model": "fake/hash-64"},
        vector_store={"backend": "qdrant", "url": f"http://127.0.0.1:{free_port()}"},
    )
    system = System(settings)
    try:
        r = TestClient(create_app(system)).get("/readyz")
    finally:
        system.close()
    assert r.status_code == 503 and r.headers["retry-after"]
    body = r.json()
    assert body["status"] == "not ready"
    assert body["checks"]["catalog"]["ok"] and not body["checks"]["vector_backend"]["ok"]
    assert body["reason"].startswith("vector backend: ") and "Traceback" not in body["reason"]


def test_a_batchs_request_id_and_trace_go_with_its_jobs_to_the_worker(system, spans):
    client = TestClient(create_app(system))
    vs = client.post("/v1/vector_stores", json={"name": "notes"}).json()
    fid = client.post(
        "/v1/files",
        files={"file": ("a.md", b"# Tea\n\nSteep it for three minutes.", "text/markdown")},
        data={"purpose": "assistants"},
    ).json()["id"]
    spans.clear()
    r = client.post(f"/v1/vector_stores/{vs['id']}/file_batches", json={"file_ids": [fid]}, headers={"X-Request-ID": "b-1"})
    assert r.status_code == 200, r.text
    for _ in range(600):  # the in-process worker (a thread of its own) ingests it
        if client.get(f"/v1/vector_stores/{vs['id']}/file_batches/{r.json()['id']}").json()["status"] != "in_progress":
            break
        time.sleep(0.05)
    done = spans.get_finished_spans()
    http = next(s for s in done if s.name == "HTTP POST /v1/vector_stores/{vs_id}/file_batches")
    job = next(s for s in done if s.name == "ingest job")
    assert job.context.trace_id == http.context.trace_id  # the worker continues the request's trace
    assert job.attributes["request_id"] == "b-1" and job.attributes["file"] == "a.md"
    stages = {s.name for s in done if s.parent is not None and s.parent.span_id == job.context.span_id}
    assert stages == {"ingest read", "ingest embed", "ingest write"}


def test_json_logs_give_one_line_a_request_with_its_id(system):
    import io
    import logging

    from knowledge.telemetry import JsonFormatter, RequestIdFilter

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    logger = logging.getLogger("knowledge.requests")
    logger.addHandler(handler)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        client = TestClient(create_app(system))
        client.get("/v1/vector_stores", headers={"X-Request-ID": "abc.1"})
        client.get("/v1/vector_stores/vs_nope", headers={"X-Request-ID": "not a sane id!"})
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["request_id"] == "abc.1" and first["route"] == "/v1/vector_stores" and first["status"] == 200
    assert second["route"] == "/v1/vector_stores/{vs_id}" and second["status"] == 404
    assert re.fullmatch(r"[0-9a-f]{32}", second["request_id"])  # a new id, not the client's
    assert {"time", "level", "logger", "message", "ms", "method", "path"} <= set(first)


def test_the_mcp_server_over_http_answers_the_probes_and_guards_its_metrics(tmp_path):
    from knowledge.server.mcp import http_app
    from knowledge.workbench import Workbench
    from tests.helpers.api import Served

    settings = load_settings(data_dir=tmp_path / "data", embeddings={"model": "fake/hash-64"}, api_key=KEY)
    wb = Workbench(settings)
    port = free_port()
    try:
        with Served(http_app(wb, "127.0.0.1", port), port=port) as base:
            assert httpx.get(base + "/healthz").json() == {"status": "alive"}
            ready = httpx.get(base + "/readyz")
            assert ready.status_code == 200 and ready.json()["status"] == "ready"
            assert httpx.get(base + "/metrics").status_code == 401
            m = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
            assert m.status_code == 200 and "knowledge_ingest_jobs" in m.text
            assert (
                metric(m.text, "knowledge_http_requests_total", server="mcp", route="/readyz", method="GET", status="200")
                == 1
            )
            assert httpx.post(base + "/mcp", json={}).status_code == 401  # the MCP endpoint itself still wants the key
    finally:
        wb.close()


def test_readyz_answers_in_time_when_a_part_does_not_answer(tmp_path):
    # a "qdrant server" that takes the connection and never answers: /readyz does not wait for it
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    settings = load_settings(
        data_dir=tmp_path / "data",
        embeddings={"model": "fake/hash-64"},
        vector_store={
            "backend": "qdrant",
            "url": f"http://127.0.0.1:{silent.getsockname()[1]}",
            "qdrant_timeout": 4,  # longer than both probes together
            "qdrant_retries": 1,
        },
        ops={"ready_timeout_seconds": 0.5},
    )
    system = System(settings)
    try:
        client = TestClient(create_app(system))
        first = client.get("/readyz").json()
        second = client.get("/readyz").json()  # the first check still runs: waited for, not started again
    finally:
        system.close()
        silent.close()
    for body in (first, second):
        assert body["status"] == "not ready" and body["checks"]["catalog"]["ok"]
        assert body["checks"]["vector_backend"]["reason"] == "did not answer within 0.5 s (ops.ready_timeout_seconds)"


# -- real processes on PostgreSQL ------------------------------------------------------------------------
class Process:
    """``python -m knowledge <args>`` with ``env``, its output in ``log``; ``url`` its health base."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, url: str) -> None:
        self.log, self.url = log, url
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "knowledge", *args], env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )
        self.wait_for(lambda: httpx.get(self.url + "/healthz", timeout=5).status_code == 200, "start")

    def wait_for(self, ok, what: str, seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                if ok():
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"{what}: not reached\n{self.log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def team_env(url: str, data: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        PYTHONPATH=str(ROOT),
        KNOWLEDGE_DATA_DIR=str(data),
        KNOWLEDGE_CATALOG__URL=url,
        KNOWLEDGE_CATALOG__CONNECT_TIMEOUT="2",
        KNOWLEDGE_VECTOR_STORE__BACKEND="pgvector",
        KNOWLEDGE_VECTOR_STORE__URL=url,
        KNOWLEDGE_FILE_STORE__DIR=str(data.parent / "shared-files"),
        KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
        **more,
    )
    return env


@pytest.mark.processes
def test_readyz_fails_with_its_reason_while_postgresql_is_stopped_and_passes_after(own_postgres, tmp_path):
    port, health = free_port(), free_port()
    env = team_env(own_postgres.url, tmp_path / "data", KNOWLEDGE_INGEST__WORKER_HEALTH_PORT=str(health))
    api = Process(["serve", "--port", str(port)], env, tmp_path / "serve.log", f"http://127.0.0.1:{port}")
    worker = Process(["worker", "--poll", "0.2"], env, tmp_path / "worker.log", f"http://127.0.0.1:{health}")
    try:
        for p in (api, worker):
            r = httpx.get(p.url + "/readyz", timeout=30)
            assert r.status_code == 200 and r.json()["status"] == "ready", r.text

        own_postgres.stop()
        r = httpx.get(api.url + "/readyz", timeout=60)
        assert r.status_code == 503, r.text
        body = r.json()
        assert body["status"] == "not ready" and not body["checks"]["catalog"]["ok"]
        assert f"PostgreSQL catalog at 127.0.0.1:{own_postgres.port}" in body["checks"]["catalog"]["reason"]
        assert body["reason"].startswith("catalog: ")
        assert httpx.get(api.url + "/healthz", timeout=10).status_code == 200  # alive all the same
        # the worker: its own check fails the same way (and, once it notices, it is "waiting")
        r = httpx.get(worker.url + "/readyz", timeout=60)
        assert r.status_code == 503 and not r.json()["checks"]["catalog"]["ok"], r.text

        own_postgres.start()
        for p in (api, worker):  # the pools replace the connections the restart broke
            p.wait_for(lambda p=p: httpx.get(p.url + "/readyz", timeout=30).status_code == 200, "ready again")
            assert httpx.get(p.url + "/readyz", timeout=30).json()["reason"] is None
    finally:
        worker.stop()
        api.stop()


@pytest.mark.processes
def test_metrics_show_the_queue_and_a_failure_while_a_worker_process_ingests_a_batch(tmp_path, settings, pg_database):
    info = conninfo_to_dict(pg_catalog_settings(settings).catalog.url or "")
    query = urlencode({k: v for k, v in info.items() if k in ("host", "port", "password")})
    url = f"postgresql://{quote(str(info.get('user', 'postgres')))}@/{quote(str(info['dbname']))}?{query}"
    port, health = free_port(), free_port()
    # the API queues only (no worker of its own); a worker process of its own ingests
    api_env = team_env(url, tmp_path / "api", KNOWLEDGE_INGEST__WORKER_THREADS="0", KNOWLEDGE_API_KEY=KEY)
    api = Process(["serve", "--port", str(port)], api_env, tmp_path / "serve.log", f"http://127.0.0.1:{port}")
    auth = {"Authorization": f"Bearer {KEY}"}
    worker = None
    try:
        client = httpx.Client(base_url=api.url, headers=auth, timeout=60)
        before = client.get("/metrics").text
        assert metric(before, "knowledge_ingest_jobs", status="queued") == 0
        assert metric(before, "knowledge_ingest_jobs_failed", reason="UnsupportedFile") == 0

        vs = client.post("/v1/vector_stores", json={"name": "team"}).json()
        ids = []
        for name, data, ctype in (
            ("good.md", b"# Tea\n\nGreen tea is steeped at 80 degrees.", "text/markdown"),
            ("broken.pdf", b"%PDF-1.7\nthis is no PDF at all\n", "application/pdf"),
        ):
            r = client.post("/v1/files", files={"file": (name, data, ctype)}, data={"purpose": "assistants"})
            ids.append(r.json()["id"])
        batch = client.post(
            f"/v1/vector_stores/{vs['id']}/file_batches", json={"file_ids": ids}, headers={"X-Request-ID": "batch-7"}
        )
        assert batch.status_code == 200, batch.text
        queued = client.get("/metrics").text
        assert metric(queued, "knowledge_ingest_jobs", status="queued") == 2  # from the catalog's job table

        worker_env = team_env(
            url,
            tmp_path / "worker",
            KNOWLEDGE_INGEST__WORKER_HEALTH_PORT=str(health),
            KNOWLEDGE_API_KEY=KEY,
            KNOWLEDGE_OPS__LOG_FORMAT="json",
        )
        worker = Process(["worker", "--poll", "0.2"], worker_env, tmp_path / "worker.log", f"http://127.0.0.1:{health}")
        api.wait_for(
            lambda: (
                client.get(f"/v1/vector_stores/{vs['id']}/file_batches/{batch.json()['id']}").json()["status"]
                != "in_progress"
            ),
            "the batch finished",
        )
        after = client.get("/metrics").text
        assert metric(after, "knowledge_ingest_jobs", status="queued") == 0
        assert metric(after, "knowledge_ingest_jobs", status="running") == 0
        failed = {
            reason: metric(after, "knowledge_ingest_jobs_failed", reason=reason)
            for reason in re.findall(r'knowledge_ingest_jobs_failed\{reason="([^"]+)"\}', after)
        }
        assert sum(failed.values()) == 1, after  # the broken file, by its reason class

        assert httpx.get(worker.url + "/metrics", timeout=30).status_code == 401  # guarded like the API
        own = httpx.get(worker.url + "/metrics", headers=auth, timeout=30).text
        (reason,) = failed
        assert metric(own, "knowledge_ingest_jobs_finished_total", status="failed", reason=reason) == 1
        assert metric(own, "knowledge_ingest_jobs_finished_total", status="done", reason="") == 1
        assert metric(own, "knowledge_ingest_stage_seconds_count", stage="embed") >= 1
        assert metric(own, "knowledge_pool_connections", pool="knowledge-catalog", state="max") >= 1
        # the request id went with the batch into the worker's JSON line for each file
        lines = [json.loads(line) for line in (tmp_path / "worker.log").read_text().splitlines() if line.startswith("{")]
        per_file = {d["file"]: d for d in lines if d.get("file") and d.get("status")}
        assert per_file["good.md"]["status"] == "done" and per_file["broken.pdf"]["status"] == "failed"
        assert {d["request_id"] for d in per_file.values()} == {"batch-7"}
    finally:
        if worker is not None:
            worker.stop()
        api.stop()
