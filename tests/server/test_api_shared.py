"""Two REST API apps over one catalog answer as one product: stores' metadata, files being added and
file batches are catalog rows, so app B answers for what app A started -- while A's worker is held
back, after it is done, after a cancel from B, and after both are closed and opened again. Run on
the DuckDB file (two workbenches on one data folder: the catalog is shared, the API objects are
not kept in either) and on PostgreSQL (two data folders, one ``catalog.url``, pgvector on the same
database, one file-store folder)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from knowledge.catalog import jobs as queue
from knowledge.config import Settings, load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.server.app import create_app
from knowledge.server.objects import KnowledgeApi
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served, free_port
from tests.helpers.pg import pg_catalog_settings

STATIC = {"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50}}


def system_of(settings: Settings) -> System:
    return System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))


def workbench(settings: Settings) -> Workbench:
    return Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=256))


def two_settings(tmp_path: Path, dialect: str) -> tuple[Settings, Settings]:
    """The settings of process A and B: one catalog, one file store."""
    files = {"dir": str(tmp_path / "shared-files")}
    a = load_settings(data_dir=tmp_path / "a", file_store=files)
    if dialect == "duckdb":
        return a, load_settings(data_dir=tmp_path / "a", file_store=files)
    a = pg_catalog_settings(a)  # and the chunks in pgvector on the same database
    a = a.model_copy(
        update={"vector_store": a.vector_store.model_copy(update={"backend": "pgvector", "url": a.catalog.url})}
    )
    b = load_settings(data_dir=tmp_path / "b", file_store=files)
    return a, b.model_copy(update={"catalog": a.catalog, "vector_store": a.vector_store})


class Held:
    """A system's worker ingestion (its indexer's ``ingest_file`` with ``raise_transient``, as
    the worker calls it) held at a gate: the worker claims a job and waits there."""

    def __init__(self, system: System) -> None:
        self.gate, self.reached = threading.Event(), threading.Event()
        self.original = system.indexer.ingest_file

        def held(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("raise_transient"):  # the worker's call (not a direct ingest_file)
                self.reached.set()
                self.gate.wait(60)
            return self.original(*args, **kwargs)

        system.indexer.ingest_file = held  # type: ignore[method-assign]


def until(check: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def upload(c: httpx.Client, name: str, text: str) -> str:
    r = c.post("/v1/files", files={"file": (name, text.encode(), "text/markdown")}, data={"purpose": "assistants"})
    assert r.status_code == 200, r.text
    return r.json()["id"]


@pytest.mark.parametrize("dialect", ["duckdb", "postgresql"])
def test_two_api_apps_on_one_catalog_answer_the_same(tmp_path, dialect, request):
    if dialect == "postgresql":
        request.getfixturevalue("pg_database")
    sa, sb = two_settings(tmp_path, dialect)
    wa, wb_ = system_of(sa), system_of(sb)
    held = Held(wa)
    Held(wb_).gate.set()  # B never holds anything back (it ingests nothing here, unless asked)
    try:
        with (
            Served(create_app(wa)) as base_a,
            Served(create_app(wb_)) as base_b,
            httpx.Client(base_url=base_a, timeout=90) as a,
            httpx.Client(base_url=base_b, timeout=90) as b,
        ):
            vs = a.post(
                "/v1/vector_stores", json={"name": "team", "metadata": {"owner": "docs"}, "chunking_strategy": STATIC}
            ).json()
            path = f"/v1/vector_stores/{vs['id']}"
            seen = b.get(path).json()
            assert seen["metadata"] == {"owner": "docs"} and seen["name"] == "team"
            assert b.post(path, json={"metadata": {"owner": "ops"}}).json()["metadata"] == {"owner": "ops"}
            assert a.get(path).json()["metadata"] == {"owner": "ops"}

            one = upload(a, "one.md", "# One\n\nPumps move water uphill.\n")
            two = upload(a, "two.md", "# Two\n\nValves stop the flow.\n")
            three = upload(a, "three.md", "# Three\n\nPipes carry the water.\n")
            added = a.post(f"{path}/files", json={"file_id": one, "attributes": {"part": "one"}}).json()
            assert added["status"] == "in_progress"
            batch = a.post(
                f"{path}/file_batches",
                json={
                    "files": [
                        {"file_id": two, "attributes": {"part": "two"}},
                        {"file_id": three, "attributes": {"part": "three"}},
                    ]
                },
            ).json()
            held.reached.wait(30)  # A's worker holds file one; two and three wait in the queue

            # B answers for A's files and batch while they are queued / held
            f1 = b.get(f"{path}/files/{one}").json()
            assert f1["status"] == "in_progress" and f1["attributes"] == {"part": "one"}
            assert f1["chunking_strategy"] == added["chunking_strategy"]
            assert f1["chunking_strategy"]["static"]["chunk_overlap_tokens"] == 50
            got = b.get(f"{path}/file_batches/{batch['id']}").json()
            assert got["file_counts"] == {"in_progress": 2, "completed": 0, "failed": 0, "cancelled": 0, "total": 2}
            assert got == a.get(f"{path}/file_batches/{batch['id']}").json()
            listed = b.get(f"{path}/file_batches/{batch['id']}/files").json()["data"]
            assert {f["id"]: f["attributes"] for f in listed} == {two: {"part": "two"}, three: {"part": "three"}}
            assert {f["id"] for f in b.get(f"{path}/files").json()["data"]} == {one, two, three}
            assert b.get(path).json()["file_counts"]["in_progress"] == 3
            parts = [r for r in queue.batches(wa.catalog, "team") if r.options.get("api")]
            assert len(parts) == 3  # one ingest batch per distinct attributes

            # B cancels A's batch: the queued files end cancelled, at once, for both
            cancelled = b.post(f"{path}/file_batches/{batch['id']}/cancel").json()
            assert cancelled["status"] == "cancelled" and cancelled["file_counts"]["cancelled"] == 2
            assert a.get(f"{path}/file_batches/{batch['id']}").json() == cancelled

            held.gate.set()  # A's worker goes on with file one
            done = until(
                lambda: (r := b.get(f"{path}/files/{one}").json())["status"] == "completed" and r, "file one completed"
            )
            assert done["attributes"] == {"part": "one"} and done["chunks"] >= 1
            assert a.get(f"{path}/files/{one}").json() == done
            counts = b.get(path).json()["file_counts"]
            assert (counts["completed"], counts["in_progress"]) == (1, 0)

            # a running file of a batch started in A, cancelled from B
            held.gate.clear()
            held.reached.clear()
            four = upload(a, "four.md", "# Four\n\nTanks hold the water.\n")
            running = a.post(f"{path}/file_batches", json={"file_ids": [four]}).json()
            held.reached.wait(30)
            until(lambda: queue.jobs(wa.catalog, store="team", status=queue.RUNNING), "file four running")
            answer: dict[str, Any] = {}
            stopper = threading.Thread(
                target=lambda: answer.update(b.post(f"{path}/file_batches/{running['id']}/cancel").json())
            )
            stopper.start()
            until(lambda: any(r.cancel_requested for r in queue.batches(wa.catalog, "team", limit=1)), "the cancel recorded")
            held.gate.set()
            stopper.join(90)
            assert answer["status"] == "cancelled" and answer["file_counts"]["cancelled"] == 1, answer
            four_file = a.get(f"{path}/files/{four}").json()
            assert four_file["status"] == "cancelled" and b.get(f"{path}/files/{four}").json() == four_file
            before = {
                p: b.get(p).json()
                for p in (
                    path,
                    f"{path}/files",
                    f"{path}/file_batches/{batch['id']}",
                    f"{path}/file_batches/{running['id']}",
                    f"{path}/file_batches/{batch['id']}/files",
                )
            }
    finally:
        held.gate.set()
        for w in (wa, wb_):
            w.jobs.stop_all()  # the in-process worker thread (System.close leaves it to its idle exit)
            w.close()

    # every process stopped and started again: the same answers
    wa, wb_ = system_of(sa), system_of(sb)
    try:
        with (
            Served(create_app(wa)) as base_a,
            Served(create_app(wb_)) as base_b,
            httpx.Client(base_url=base_a, timeout=60) as a,
            httpx.Client(base_url=base_b, timeout=60) as b,
        ):
            for p, value in before.items():
                assert b.get(p).json() == value, p
                assert a.get(p).json() == value, p
    finally:
        wa.close()
        wb_.close()


def test_an_earlier_vector_stores_json_is_imported_once(tmp_path):
    settings = load_settings(data_dir=tmp_path / "data")
    legacy = settings.data_root / "api" / "vector_stores.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text(
        json.dumps(
            {
                "laptop": {
                    "metadata": {"k": "v"},
                    "expires_after": {"anchor": "last_active_at", "days": 7},
                    "chunking_strategy": STATIC,
                    "description": None,
                }
            }
        ),
        "utf-8",
    )
    w = system_of(settings)
    try:
        Workbench(w).create_store("laptop", "default")
        api = KnowledgeApi.serving(w)
        obj = api.store_object("laptop")
        assert obj["metadata"] == {"k": "v"} and obj["expires_after"]["days"] == 7
        assert api.meta.get("laptop")["chunking_strategy"] == STATIC
        assert not legacy.exists() and legacy.with_name("vector_stores.json.imported").is_file()
        api.meta.put("laptop", {**api.meta.get("laptop"), "metadata": {"k": "changed"}})
        legacy.write_text(json.dumps({"laptop": {"metadata": {"k": "stale"}}}), "utf-8")  # a stray copy
        assert KnowledgeApi.serving(w).store_object("laptop")["metadata"] == {"k": "changed"}  # the catalog's wins
    finally:
        w.close()
    w = system_of(settings)  # a new process: still there
    try:
        assert KnowledgeApi.serving(w).store_object("laptop")["metadata"] == {"k": "changed"}
    finally:
        w.close()


def test_mcp_over_http_on_a_shared_catalog_answers_from_any_process(tmp_path, pg_database):
    from knowledge.server.mcp import http_app

    sa, sb = two_settings(tmp_path, "postgresql")
    wa, wb_ = workbench(sa), workbench(sb)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_stores", "arguments": {}}}
    try:
        wa.create_store("made-in-a", "default")
        pa, pb = free_port(), free_port()
        with Served(http_app(wa, port=pa), port=pa) as base_a, Served(http_app(wb_, port=pb), port=pb) as base_b:
            init = httpx.post(
                base_a + "/mcp",
                headers=headers,
                timeout=30,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                },
            )
            assert init.status_code == 200 and "mcp-session-id" not in init.headers  # nothing kept in A
            answer = httpx.post(base_b + "/mcp", headers=headers, json=call, timeout=30)  # B, never initialised
            assert answer.status_code == 200 and "made-in-a" in answer.text
    finally:
        wa.close()
        wb_.close()
