"""``Idempotency-Key`` on the REST API's creating POSTs (issue 39): a retry answers the first result
instead of making a second record; the same key for another request is refused; the key is the
caller's. The retry after a real timeout (a frozen S3 server) and two API processes racing one key
on one PostgreSQL catalog are the ``slow`` tests below."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import openai
import pytest
from psycopg.conninfo import conninfo_to_dict

from knowledge.catalog import idempotency as keys
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.server.idempotency import LEASE, TTL
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served, free_port
from tests.helpers.pg import pg_catalog_settings
from tests.helpers.s3 import moto_server, s3_file_store_settings

ROOT = Path(__file__).resolve().parents[2]
DATA = b"# Ownership\n\nEach value in Rust has an owner.\n" * 20


@pytest.fixture
def system(tmp_path):
    s = System(
        load_settings(data_dir=tmp_path / "data", ingest={"max_file_mb": 2}),
        embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256),
    )
    yield s
    s.close()


@pytest.fixture
def http(system):
    with Served(create_app(system)) as base, httpx.Client(base_url=base + "/v1", timeout=60) as c:
        yield c


def upload(
    http: httpx.Client, key: str | None, name: str = "ownership.md", data: bytes = DATA, purpose: str = "assistants"
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return http.post("/files", files={"file": (name, data, "text/markdown")}, data={"purpose": purpose}, headers=headers)


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
    for other in (
        upload(http, key, data=DATA + b"changed"),
        upload(http, key, name="other.md"),
        upload(http, key, purpose="user_data"),
    ):
        assert other.status_code == 422, other.text
        error = other.json()["error"]
        assert error["code"] == "idempotency_key_reused" and "different request" in error["message"]
    vs = http.post("/vector_stores", json={"name": "s"}).json()
    elsewhere = http.post(f"/vector_stores/{vs['id']}/file_batches", json={"file_ids": []}, headers={"Idempotency-Key": key})
    assert elsewhere.status_code in (400, 422)  # a bad request is refused before the key is looked at
    assert len(uploads(wb, "ownership.md")) == 1 and not uploads(wb, "other.md")
    for bad in ("", "x" * 256, "caf\u00e9"):
        r = http.post(
            "/files",
            files={"file": ("a.md", DATA)},
            data={"purpose": "assistants"},
            headers={"Idempotency-Key": bad.encode("utf-8")},
        )
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
    assert (
        http.post(f"/vector_stores/{vs['id']}/file_batches", json={"file_ids": [fid, fid]}, headers=key).status_code == 422
    )
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


def test_a_key_is_its_callers_own(tmp_path):
    """Once accounts exist, a key is the account's: another person's identical key and request is
    a request of their own (a new file), never a replay of someone else's answer."""
    w = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256)
    )
    try:
        w.people.set_up_admin("root", "correct horse battery")
        w.people.accounts.create("ana", "correct horse battery")
        tokens = {n: w.people.keys.create(n, "tests")[1] for n in ("root", "ana")}
        with Served(create_app(w)) as base:
            key = str(uuid.uuid4())
            answers = {}
            for name, token in tokens.items():
                with httpx.Client(base_url=base + "/v1", timeout=60, headers={"Authorization": f"Bearer {token}"}) as c:
                    answers[name] = [upload(c, key) for _ in range(2)]
        ids = {n: {r.json()["id"] for r in rs} for n, rs in answers.items()}
        assert all(len(v) == 1 for v in ids.values()) and ids["root"] != ids["ana"]
        assert all(rs[1].headers["idempotent-replayed"] == "true" for rs in answers.values())
        assert len(uploads(Workbench(w), "ownership.md")) == 2
    finally:
        w.close()


def test_a_key_outlives_neither_its_day_nor_a_dead_request(system):
    """The catalog's rows: a claim whose request died (past the 10-minute lease) is taken over, the
    dead request's late finish changes nothing, and a kept answer is replayed for 24 hours only."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def claim(minutes: float, fp: str = "fp") -> keys.Claim:
        return keys.claim(system.catalog, "", "k", fp, ttl=TTL, lease=LEASE, now=t0 + timedelta(minutes=minutes))

    first = claim(0)
    assert first.state == "run" and claim(1).state == "in_flight" and claim(1, "other").state == "mismatch"
    second = claim(11)  # its request died: taken over
    assert second.state == "run" and second.token != first.token
    keys.finish(system.catalog, "", "k", first.token, 200, "late", {})  # the dead one's finish: not its key any more
    assert claim(12).state == "in_flight"
    keys.finish(system.catalog, "", "k", second.token, 201, '{"id": 1}', {"content-type": "application/json"})
    kept = claim(11 + 23 * 60)
    assert (kept.state, kept.status, kept.body, kept.headers) == (
        "replay",
        201,
        '{"id": 1}',
        {"content-type": "application/json"},
    )
    assert claim(11 + 25 * 60).state == "run"  # a day later the key is new again
    keys.release(system.catalog, "", "k", "not-the-token")
    assert claim(11 + 25 * 60 + 1).state == "in_flight"


@pytest.mark.parametrize("second_name", ["ownership.md", "copy.md"])
def test_the_same_bytes_ingested_twice_at_once_are_embedded_once(wb, second_name):
    """Two threads of one process (the embedded catalog) give a store the same bytes at once: one
    embeds them, the other reports them unchanged or a duplicate of it, never a failure."""
    data = DATA * 30
    start = threading.Barrier(2)

    def ingest(name: str):
        start.wait()
        return wb.ingest_file("s", data, name)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(ingest, ["ownership.md", second_name]))
    outcomes = sorted(r.outcome.value for r in results)
    assert outcomes == sorted(["indexed", "unchanged" if second_name == "ownership.md" else "duplicate"]), results
    indexed = next(r for r in results if r.outcome.value == "indexed")
    joined = next(r for r in results if r is not indexed)
    assert joined.file_id == indexed.file_id and indexed.chunks > 0
    assert [f.file_id for f in wb.file_records("s")] == [indexed.file_id]
    assert wb.vector_store("s").count() == indexed.chunks  # embedded once


# -- real timeouts and real processes --------------------------------------------------------------------
@pytest.mark.processes
@pytest.mark.slow
def test_an_upload_retried_with_its_key_after_a_timeout_is_one_record(tmp_path):
    """The issue's case: the file store (S3) froze, the client's read timeout expired before the
    answer although the upload went on; the client's retries with the same key get the first file."""
    with (tmp_path / "moto.log").open("w+b") as log, moto_server(log) as moto:
        settings = s3_file_store_settings(load_settings(data_dir=tmp_path / "data"), moto.endpoint)
        system = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))
        wb = Workbench(system)
        try:
            with Served(create_app(system)) as base:
                key = {"Idempotency-Key": str(uuid.uuid4())}
                impatient = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=1.0)
                os.kill(moto.pid, signal.SIGSTOP)  # S3 frozen: the upload waits on it
                thaw = threading.Timer(5.0, os.kill, (moto.pid, signal.SIGCONT))
                thaw.start()
                try:
                    with pytest.raises(openai.APITimeoutError):
                        impatient.files.create(file=("ownership.md", DATA), purpose="assistants", extra_headers=key)
                    # retried at once: the first upload is still running
                    busy = httpx.post(
                        base + "/v1/files",
                        files={"file": ("ownership.md", DATA)},
                        data={"purpose": "assistants"},
                        headers=key,
                        timeout=30,
                    )
                    assert busy.status_code == 409 and busy.headers["retry-after"] == "1"
                    assert "still being processed" in busy.json()["error"]["message"]
                finally:
                    thaw.join()
                # the openai package retries a 409 by itself (after Retry-After): the first file comes back
                patient = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=20, timeout=30)
                raw = patient.files.with_raw_response.create(
                    file=("ownership.md", DATA), purpose="assistants", extra_headers=key
                )
                assert raw.headers["idempotent-replayed"] == "true"
                stored = [f for f in wb.stored_files() if f.name == "ownership.md"]
                assert [f.id for f in stored] == [raw.parse().id]  # one record, and the answer names it
                with wb.read_file(stored[0].id) as fh:
                    assert fh.read() == DATA
        finally:
            system.close()


def serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """``python -m knowledge serve`` on a free port with ``env``: the process and its base URL."""
    port = free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "knowledge", "serve", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(base + "/v1/models", timeout=5).status_code == 200:
                return proc, base
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the server did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


def team_env(tmp_path: Path, settings) -> dict[str, str]:
    info = conninfo_to_dict(pg_catalog_settings(settings).catalog.url or "")
    query = urlencode({k: v for k, v in info.items() if k in ("host", "port", "password")})
    url = f"postgresql://{quote(str(info.get('user', 'postgres')))}@/{quote(str(info['dbname']))}?{query}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        PYTHONPATH=str(ROOT),
        KNOWLEDGE_CATALOG__URL=url,
        KNOWLEDGE_VECTOR_STORE__BACKEND="pgvector",
        KNOWLEDGE_VECTOR_STORE__URL=url,
        KNOWLEDGE_FILE_STORE__DIR=str(tmp_path / "shared-files"),
        KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
    )
    return env


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.processes
@pytest.mark.slow
def test_two_api_processes_given_one_key_at_once_make_one_record(tmp_path, settings, pg_database):
    env = team_env(tmp_path, settings)
    servers = [serve({**env, "KNOWLEDGE_DATA_DIR": str(tmp_path / n)}, tmp_path / f"{n}.log") for n in "ab"]
    try:
        key = {"Idempotency-Key": str(uuid.uuid4())}
        start = threading.Barrier(6)

        def send(base: str) -> httpx.Response:
            start.wait()
            while True:  # as a client does: a 409 (the key's first request still running) is retried
                r = httpx.post(
                    base + "/v1/files",
                    files={"file": ("race.md", DATA)},
                    data={"purpose": "assistants"},
                    headers=key,
                    timeout=60,
                )
                if r.status_code != 409:
                    return r
                time.sleep(float(r.headers["retry-after"]) / 10)

        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(send, [base for _, base in servers] * 3))
        assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
        assert len({r.text for r in answers}) == 1  # every answer is the first one's
        assert sum("idempotent-replayed" not in r.headers for r in answers) == 1
        for _, base in servers:
            listed = httpx.get(base + "/v1/files", timeout=30).json()["data"]
            assert [f["id"] for f in listed if f["filename"] == "race.md"] == [answers[0].json()["id"]]
    finally:
        for proc, _ in servers:
            stop(proc)


@pytest.mark.processes
@pytest.mark.slow
def test_the_same_bytes_added_to_one_store_through_two_processes_at_once_are_embedded_once(
    tmp_path, settings, pg_database, corpus
):
    """The issue's case: both jobs embedded the whole file and the first read ``failed`` with its
    success text ("ownership.md: 46 chunks.") as the error. Now one embeds, the other waits for it
    and reports the content it joined; neither is ``failed``."""
    env = team_env(tmp_path, settings)
    servers = [serve({**env, "KNOWLEDGE_DATA_DIR": str(tmp_path / n)}, tmp_path / f"{n}.log") for n in "ab"]
    data = (corpus / "md" / "rust-book" / "ch04-01-what-is-ownership.md").read_bytes()
    try:
        (_, a), (_, b) = servers
        vs = httpx.post(a + "/v1/vector_stores", json={"name": "team"}, timeout=30).json()
        ids = [
            httpx.post(
                base + "/v1/files", files={"file": ("ownership.md", data)}, data={"purpose": "assistants"}, timeout=30
            ).json()["id"]
            for base in (a, b)
        ]
        start = threading.Barrier(2)

        def add(base: str, fid: str) -> dict:
            start.wait()
            httpx.post(f"{base}/v1/vector_stores/{vs['id']}/files", json={"file_id": fid}, timeout=30).raise_for_status()
            deadline = time.monotonic() + 120
            while True:
                f = httpx.get(f"{base}/v1/vector_stores/{vs['id']}/files/{fid}", timeout=30).json()
                if f["status"] != "in_progress" or time.monotonic() > deadline:
                    return f
                time.sleep(0.1)

        with ThreadPoolExecutor(2) as pool:
            first, second = pool.map(add, (a, b), ids)
        files = {f["id"]: f for f in (first, second)}
        assert {f["status"] for f in files.values()} == {"completed"}, files
        assert all(f["last_error"] is None for f in files.values())
        dup = [f for f in files.values() if f.get("duplicate_of")]
        assert len(dup) == 1, [(f["status"], f.get("chunks"), f["last_error"]) for f in files.values()]
        assert dup[0]["duplicate_of"] in ids and dup[0]["duplicate_of"] != dup[0]["id"]
        content = files[dup[0]["duplicate_of"]]
        assert content["chunks"] > 0 and dup[0]["chunks"] == content["chunks"]
        listed = httpx.get(f"{a}/v1/vector_stores/{vs['id']}/files", timeout=30).json()["data"]
        assert {f["id"]: f["status"] for f in listed} == dict.fromkeys(ids, "completed")
        store = httpx.get(f"{b}/v1/vector_stores/{vs['id']}", timeout=30).json()
        assert store["file_counts"]["failed"] == 0 and store["usage_bytes"] == len(data)  # one record holds the bytes
    finally:
        for proc, _ in servers:
            stop(proc)
