"""Durable ingestion jobs (issue 26, item 3): the queue's SQL on both catalogs, the worker, and a
worker killed with SIGKILL mid-file whose job another worker takes over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from knowledge.catalog import Catalog
from knowledge.catalog import jobs as q
from knowledge.config import Settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.outcomes import Outcome
from knowledge.system import System
from knowledge.workbench import Workbench

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def catalog(catalog_settings):
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


def _wait(pred, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_a_batch_goes_through_its_states(catalog):
    b = q.enqueue(
        catalog, "s", [q.JobSource("a.txt", "file", "id-a", 10), q.JobSource("b.txt", "path", "/x/b", 5, host="elsewhere")]
    )
    assert [r.status for r in q.batch(catalog, b)[1]] == ["queued", "queued"]
    job = q.claim(catalog, "w1", host="here")
    assert (job.name, job.status, job.attempts, job.worker) == ("a.txt", "running", 1, "w1")
    assert q.claim(catalog, "w2", host="here") is None  # b.txt is a path on another machine
    ctl = q.heartbeat(catalog, job.id, "w1", "embedding", 0.4, new_stage=True)
    assert ctl.owned and not ctl.cancel
    row = q.batch(catalog, b)[1][0]
    assert (row.stage, row.fraction) == ("embedding", pytest.approx(0.4))
    assert not q.heartbeat(catalog, job.id, "w2").owned  # only the claiming worker heartbeats
    assert q.finish(catalog, job.id, "w1", q.DONE, {"outcome": "indexed", "chunks": 3})
    assert not q.finish(catalog, job.id, "w1", q.DONE, {"outcome": "indexed"})  # once
    assert q.cancel(catalog, b) == 1  # b.txt, still queued
    _, rows, _ = q.batch(catalog, b)
    assert [r.status for r in rows] == ["done", "cancelled"] and rows[0].result["chunks"] == 3
    assert q.retry(catalog, rows[1].id) and q.unfinished(catalog) == 1
    assert q.claim(catalog, "w3", host="elsewhere").name == "b.txt"


def test_a_job_whose_heartbeat_lapsed_is_taken_over_then_interrupted(catalog):
    b = q.enqueue(catalog, "s", [q.JobSource("a.txt", "file", "id-a")], max_attempts=2)
    first = q.claim(catalog, "w1", lease=0.2)
    _wait(lambda: q.take_over(catalog) == 1, what="the lease to lapse")
    row = q.batch(catalog, b)[1][0]
    assert row.status == "queued" and "w1 stopped" in row.reason
    second = q.claim(catalog, "w2", lease=0.2)
    assert second.id == first.id and second.attempts == 2
    assert not q.heartbeat(catalog, first.id, "w1").owned  # the first worker lost it
    _wait(lambda: q.take_over(catalog) == 1, what="the second lease to lapse")
    row = q.batch(catalog, b)[1][0]
    assert row.status == "interrupted" and "retry" in row.reason  # no attempt left: Retry
    assert q.retry(catalog, row.id) and q.batch(catalog, b)[1][0].status == "queued"


def test_concurrent_claims_take_each_job_once(catalog_settings, catalog):
    q.enqueue(catalog, "s", [q.JobSource(f"f{i}.txt", "file", f"id{i}") for i in range(24)])
    catalogs = [Catalog.from_settings(catalog_settings) for _ in range(3)]  # as three processes would
    if catalog.dialect == "duckdb":  # one process opens the file: its threads share the catalog
        catalogs = [catalog] * 3
    claimed: list[str] = []
    lock = threading.Lock()

    def claimer(n: int) -> None:
        while (job := q.claim(catalogs[n], f"w{n}")) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(claimed) == 24 and len(set(claimed)) == 24
    for c in catalogs:
        if c is not catalog:
            c.close()


# -- the worker through a workbench ------------------------------------------------------------------


def _texts(n: int) -> list[bytes]:
    return [
        ("\n\n".join(f"# Part {p} of file {i}\n\n" + f"word{i}x{p} " * 120 for p in range(12))).encode() for i in range(n)
    ]


def _chunks_by_file(wb: Workbench, store: str) -> dict[str, tuple[int, int]]:
    """``{file name: (chunks recorded, chunks in the vector store)}``; one entry per record."""
    vs = wb.vector_store(store)
    out = {}
    for f in wb.store_files(store):
        assert f.file_name not in out, f"two records named {f.file_name}"
        out[f.file_name] = (f.chunks, vs.count(f.file_id))
    return out


def test_an_in_process_batch_is_visible_and_cancellable_from_another_workbench(settings: Settings):
    from knowledge.service.jobs import IngestJob

    system = System(settings, lambda m: HashEmbedder(dimension=16))
    wb = Workbench(system)
    try:
        job = wb.submit_batch("notes", [(f"f{i}.md", t) for i, t in enumerate(_texts(3))])
        assert job.wait(60) and job.counts() == {"indexed": 3}
        # a second front-end process sees the same batch from the rows (here: the registry's catalog view)
        other = IngestJob.attach(system.jobs, q.batches(system.catalog, "notes")[0])
        assert other.done and other.counts() == {"indexed": 3} and other.chunks == job.chunks > 0
        chunks = _chunks_by_file(wb, "notes")
        assert all(rec == vs > 0 for rec, vs in chunks.values()), chunks
    finally:
        system.close()


def test_an_upload_its_batch_cancelled_mid_file_leaves_no_bytes_behind(settings: Settings):
    """A batch cancelled while its upload is being embedded: the file leaves the store and its bytes the file
    store (the worker forgets an upload of its own that its batch cancelled)."""
    started = threading.Event()

    class Slow(HashEmbedder):
        def embed_documents(self, texts):
            started.set()
            time.sleep(0.3)
            return super().embed_documents(texts)

    system = System(settings, lambda m: Slow(dimension=16))
    wb = Workbench(system)
    try:
        long = "\n\n".join(f"Paragraph {i} about harbours, ships and tides, number {i}." for i in range(400))
        job = wb.submit_batch("notes", [("long.md", long.encode())])
        assert started.wait(30)
        job.cancel()  # while its first chunks embed: the file is cancelled mid-way
        assert job.wait(60) and job.counts() == {Outcome.CANCELLED: 1}
        assert system.catalog.files("notes") == [] and system.files.list() == []
    finally:
        system.close()


_KILLED_WORKER = textwrap.dedent("""
    import sys, time
    sys.path[:0] = {paths!r}
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.service.worker import Worker
    from knowledge.system import System

    class Slow(HashEmbedder):
        def embed_documents(self, texts):
            time.sleep({delay})  # a slow model: the kill lands while a file is being embedded
            return super().embed_documents(texts)

    settings = load_settings(data_dir={data!r})
    if {url!r}:  # team mode: the catalog and the vectors on the same PostgreSQL
        settings = settings.model_copy(update={{
            "catalog": settings.catalog.model_copy(update={{"url": {url!r}}}),
            "vector_store": settings.vector_store.model_copy(update={{"backend": "pgvector", "url": {url!r}}})}})
    system = System(settings, lambda m: Slow(dimension=16))
    n = Worker(system.indexer, worker_id={name!r}, lease={lease}).run(once=True, poll=0.1)
    system.close()
    print("processed", n)
""")


def _worker(data: Path, url: str | None, name: str, delay: float, lease: float = 1.0) -> subprocess.Popen:
    code = _KILLED_WORKER.format(paths=[str(REPO)], data=str(data), url=url or "", name=name, delay=delay, lease=lease)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.processes
@pytest.mark.slow
def test_a_worker_killed_mid_file_leaves_its_job_to_another_and_every_file_ends_done_once(catalog_settings):
    """Six uploads queued; worker A (a real subprocess) is killed with SIGKILL while it embeds one;
    worker B takes the job over once A's heartbeat lapsed. Every job ends done, the killed one after
    two attempts, and every file has one record whose chunk count the vector store agrees with."""
    settings = catalog_settings
    url = settings.catalog.url if settings.catalog.url else None
    system = System(settings, lambda m: HashEmbedder(dimension=16))
    stored = [system.files.save(f"f{i}.md", "text/markdown", t) for i, t in enumerate(_texts(6))]
    batch_id = q.enqueue(system.catalog, "notes", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])
    system.close()  # DuckDB: one process opens the file at a time; the workers take turns with the test
    data = Path(settings.data_dir)
    a = _worker(data, url, "worker-A", delay=0.4)
    marker = None
    try:
        # wait until A is inside a file (its row says embedding), then kill -9
        probe = Catalog.from_settings(settings)
        deadline = time.monotonic() + 120
        while marker is None:
            assert a.poll() is None, a.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "worker A never started embedding"
            try:
                rows = q.batch(probe, batch_id)[1]
            except Exception:  # DuckDB: A holds the file right now
                rows = []
            marker = next((r for r in rows if r.status == "running" and r.stage == "embedding"), None)
            probe.close()
            time.sleep(0.1)
        os.kill(a.pid, signal.SIGKILL)
        assert a.wait(30) == -signal.SIGKILL
        b = _worker(data, url, "worker-B", delay=0.0)
        _out, err = b.communicate(timeout=300)
        assert b.returncode == 0, err.decode()[-3000:]
    finally:
        if a.poll() is None:
            a.kill()
    system = System(settings, lambda m: HashEmbedder(dimension=16))
    wb = Workbench(system)
    try:
        _, rows, _ = q.batch(system.catalog, batch_id)
        assert [r.status for r in rows] == ["done"] * 6, [(r.name, r.status, r.reason) for r in rows]
        killed = next(r for r in rows if r.id == marker.id)
        assert killed.attempts == 2 and killed.worker == "worker-B"
        assert all(r.attempts == 1 for r in rows if r.id != marker.id)
        chunks = _chunks_by_file(wb, "notes")
        assert sorted(chunks) == [f"f{i}.md" for i in range(6)]
        assert all(rec == vs > 0 for rec, vs in chunks.values()), chunks  # no duplicate, no stale chunk
        assert {f.status for f in wb.store_files("notes")} == {"done"}
        print(
            f"killed {marker.name} at {marker.fraction:.2f}; per-file chunks {chunks};"
            f" A processed {sum(r.worker == 'worker-A' for r in rows)}, B {sum(r.worker == 'worker-B' for r in rows)}"
        )
    finally:
        system.close()


# -- defect (c): a full disk says so ------------------------------------------------------------------


def _full_disk(monkeypatch, system: System) -> None:
    """The file store's temp files are written to /dev/full: every write fails with a real ENOSPC."""

    def to_dev_full(self):
        return self._tmp / "never-written.tmp", open("/dev/full", "wb", buffering=0)  # save() closes it

    monkeypatch.setattr(type(system.files.current()), "_open_temp", to_dev_full)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_is_reported_as_no_space_left_not_as_an_unreadable_file(settings, tmp_path, monkeypatch):

    system = System(settings, lambda m: HashEmbedder(dimension=16))
    wb = Workbench(system)
    try:
        path = tmp_path / "notes.md"
        path.write_text("# Notes\n\nSome words to index.")
        _full_disk(monkeypatch, system)
        [r] = wb.ingest_paths("notes", [path])  # a folder/CLI ingest: the file is read fine, the copy fails
        assert r.outcome == "failed" and "No space left on device" in r.message and "cannot be read" not in r.message
        job = wb.submit_batch("notes", [("upload.md", b"# Upload\n\nwords")])  # an upload
        assert job.wait(30)
        [u] = job.results
        assert u.outcome == "failed" and "No space left on device" in u.message, u.message
    finally:
        system.close()


def test_serve_resumes_the_queue_once_and_only_logs_a_catalog_it_cannot_read(settings: Settings, monkeypatch, caplog):
    """``serve`` looks for unfinished jobs once at its start (it did twice, once unguarded); a catalog
    that cannot be read then is a warning in the log, and the API starts anyway."""
    import logging

    from knowledge.errors import BackendUnavailable
    from knowledge.server import app as server
    from knowledge.service.jobs import JobRegistry

    calls: list[str] = []
    monkeypatch.setattr(server.uvicorn, "run", lambda *args, **kwargs: calls.append("run"))
    real = JobRegistry.resume

    def counting(self: JobRegistry) -> int:
        calls.append("resume")
        return real(self)

    monkeypatch.setattr(JobRegistry, "resume", counting)
    system = System(settings, embedder_factory=lambda m: HashEmbedder(dimension=16))
    server.serve(system=system)
    assert calls == ["resume", "run"]

    def unreachable(self: JobRegistry) -> int:
        calls.append("resume")
        raise BackendUnavailable("The catalog cannot be reached.")

    monkeypatch.setattr(JobRegistry, "resume", unreachable)
    calls.clear()
    with caplog.at_level(logging.WARNING, logger="knowledge.server.app"):
        server.serve(system=system)
    assert calls == ["resume", "run"]
    assert "could not look for unfinished ingestion jobs" in caplog.text
    system.close()


def test_a_batch_is_checked_and_recorded_when_submitted_and_its_worker_holds_no_workbench(settings: Settings):
    """``Workbench.submit_batch`` refuses a store the person may not write to before anything is
    queued, records ``store.create`` (queued) and ``file.ingest`` for a new store of theirs, and the
    job, its registry and the worker hold parts (the indexer), never a workbench."""
    from knowledge.errors import InvalidArgument
    from knowledge.people import Actor
    from knowledge.service.jobs import IngestJob

    system = System(settings, lambda m: HashEmbedder(dimension=16))
    wb = Workbench(system)
    try:
        wb.create_store("admins")
        ana = wb.as_user(Actor("ana", "member"))
        with pytest.raises(InvalidArgument, match="not available"):  # another's store: its name is taken
            ana.submit_batch("admins", [("a.md", b"# A\n\nwords")])
        assert q.batches(system.catalog, "admins") == []
        job = ana.submit_batch("mine", [("a.md", b"# A\n\nwords"), ("b.md", b"# B\n\nmore")])
        assert isinstance(job, IngestJob) and job.wait(60) and job.counts() == {"indexed": 2}
        events = [(e.actor, e.action, e.store, e.detail) for e in reversed(system.people.audit.events(store="mine"))]
        assert events == [
            ("ana", "store.create", "mine", {"queued": True}),
            ("ana", "file.ingest", "mine", {"files": ["a.md", "b.md"], "count": 2, "queued": True}),
        ]
        assert system.people.sharing.owner("mine") == "ana"
        assert job.registry is system.jobs and system.jobs.indexer is system.indexer  # parts, not the workbench
    finally:
        system.close()
