"""Infrastructure errors never fail a file (issue 39, items 1 and 2): the classification of errors,
the back-off, the queue's ``defer``, and an in-process worker that waits out a file store and a
catalog that cannot be reached, and stands down when its own model cannot load."""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import threading
import time
from contextlib import contextmanager

import pytest

from knowledge.catalog import Catalog
from knowledge.catalog import jobs as q
from knowledge.catalog.records import FileRecord
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import (
    BackendUnavailable,
    EmbeddingUnavailable,
    EmptyDocument,
    FileTooLarge,
    PasswordRequired,
    ReaderCrashed,
    ReaderLimitExceeded,
    StorageError,
    UnsupportedFile,
)
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.transient import backoff_seconds, classify, transient_reason
from knowledge.service.worker import HealthFile, Worker
from knowledge.system import System
from knowledge.workbench import Workbench


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as exc:
        return exc


def _psycopg_operational() -> BaseException:
    import psycopg

    return psycopg.OperationalError("connection failed: server closed the connection unexpectedly")


# -- classification ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc, own, words",
    [
        (
            BackendUnavailable("The s3 file store cannot read (bucket 'b' at http://x): the endpoint cannot be reached."),
            False,
            "the file store cannot be reached",
        ),
        (
            BackendUnavailable("Cannot reach the PostgreSQL catalog at 127.0.0.1:5432: connection refused."),
            False,
            "the catalog cannot be reached",
        ),
        (BackendUnavailable("pgvector: the server cannot be reached"), False, "the vector store cannot be reached"),
        (
            EmbeddingUnavailable("The bundled embedding model cannot be assembled in /m: No space left"),
            True,
            "the embedding model cannot be loaded on this worker",
        ),
        (OSError(errno.ENOSPC, "No space left on device", "/tmp/x"), True, "this worker's disk is full (/tmp/x)"),
        (OSError(errno.EROFS, "Read-only file system"), True, "this worker's disk is read-only"),
        (OSError(errno.EIO, "Input/output error"), True, "an I/O error"),
        (OSError(errno.ENOMEM, "Cannot allocate memory"), True, "ran out of memory"),
        (MemoryError(), True, "this worker ran out of memory"),
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), False, "a server cannot be reached"),
        (StorageError("notes.md: the file store could not write it (Permission denied)."), True, "a disk refused a write"),
    ],
)
def test_errors_of_the_infrastructure_are_transient(exc, own, words):
    verdict = classify(exc)
    assert verdict is not None and verdict.own is own and words in verdict.reason, verdict
    assert verdict.waiting == f"waiting: {verdict.reason}"
    assert transient_reason(exc) == verdict.reason


def test_library_connection_errors_are_transient_by_module_and_name():
    verdict = classify(_psycopg_operational())
    assert verdict is not None and not verdict.own and "server closed the connection" in verdict.reason
    from psycopg_pool import PoolTimeout

    assert classify(PoolTimeout("couldn't get a connection after 5.00 sec")) is not None
    import botocore.exceptions as bce

    assert classify(bce.EndpointConnectionError(endpoint_url="http://127.0.0.1:1")) is not None


@pytest.mark.parametrize(
    "exc",
    [
        UnsupportedFile("legacy Word"),
        ReaderLimitExceeded("needed more than 3,072 MB of memory to read"),
        ReaderCrashed("the reader stopped"),
        PasswordRequired("needs a password"),
        EmptyDocument("no text"),
        FileTooLarge("over 100 MB"),
        KeyError("word/document.xml"),
        ValueError("a bug"),
        TimeoutError("slow"),
        OSError(errno.ENOENT, "No such file or directory"),
    ],
)
def test_the_files_own_errors_and_bugs_are_not_transient(exc):
    assert classify(exc) is None and transient_reason(exc) is None


def test_the_cause_chain_decides_and_a_file_error_first_wins():
    # a disk error wrapped by the file store's words: the disk decides
    wrapped = _chained(StorageError("notes.md: No space left on device"), OSError(errno.ENOSPC, "No space left"))
    assert classify(wrapped).reason.startswith("this worker's disk is full")
    # a backend error under a library's exception: found through __cause__
    assert not classify(_chained(RuntimeError("write failed"), BackendUnavailable("file store down"))).own
    # the reader ran out of memory (its child's limit): the file's, though a MemoryError is under it
    assert classify(_chained(ReaderLimitExceeded("needed more than 3,072 MB"), MemoryError())) is None
    # a cycle in the chain ends the walk
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a
    assert classify(a) is None


# -- back-off -----------------------------------------------------------------------------------------


def test_the_backoff_is_full_jitter_under_an_exponential_ceiling_with_a_cap():
    rng = random.Random(39)
    assert backoff_seconds(0, 2, 300) == 0.0
    for attempt, ceiling in [(1, 2), (2, 4), (3, 8), (8, 256), (9, 300), (60, 300), (10_000, 300)]:
        draws = [backoff_seconds(attempt, 2, 300, rng) for _ in range(400)]
        assert all(0 <= d <= ceiling for d in draws), (attempt, max(draws))
        # spread over the whole range (full jitter), not bunched at the ceiling
        assert min(draws) < 0.1 * ceiling and max(draws) > 0.9 * ceiling
        assert 0.4 * ceiling < sum(draws) / len(draws) < 0.6 * ceiling


# -- the queue's defer --------------------------------------------------------------------------------


@pytest.fixture
def catalog(catalog_settings):
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


def test_a_deferred_job_waits_its_back_off_and_its_file_says_why(catalog):
    b = q.enqueue(catalog, "s", [q.JobSource("a.txt", "file", "id-a", 10)], max_attempts=3)
    catalog.put_file(FileRecord("s", "id-a", "a.txt", "0" * 64, 10, "processing", None, 0, None))
    job = q.claim(catalog, "w1")
    assert q.defer(catalog, job.id, "w2", "waiting: x", 0) is None  # not w2's job: nothing written
    assert q.defer(catalog, job.id, "w1", "waiting: the file store cannot be reached (down)", 3600) == "queued"
    row = q.batch(catalog, b)[1][0]
    assert (row.status, row.attempts, row.transient_attempts, row.worker) == ("queued", 0, 1, None)
    assert row.reason == "waiting: the file store cannot be reached (down)" and row.not_before is not None
    assert q.claim(catalog, "w1") is None  # an hour's back-off: not claimable yet
    rec = catalog.get_file("s", "id-a")
    assert (rec.status, rec.reason) == ("pending", "waiting: the file store cannot be reached (down)")
    with catalog.cursor() as cur:  # the back-off is over
        cur.execute("UPDATE ingest_jobs SET not_before = now() - INTERVAL '1 second'")
    job = q.claim(catalog, "w1")
    assert job is not None and job.attempts == 1 and job.transient_attempts == 1
    assert q.defer(catalog, job.id, "w1", "waiting: the catalog cannot be reached", 0.0) == "queued"
    job = q.claim(catalog, "w1")  # no back-off: claimable at once
    assert job is not None and job.transient_attempts == 2


def test_a_job_fails_with_its_last_reason_once_its_transient_attempts_are_spent(catalog):
    b = q.enqueue(catalog, "s", [q.JobSource("a.txt", "file", "id-a", 10)])
    catalog.put_file(FileRecord("s", "id-a", "a.txt", "0" * 64, 10, "pending", None, 0, None))
    for _ in range(2):
        job = q.claim(catalog, "w1")
        assert (
            q.defer(
                catalog, job.id, "w1", "waiting: the file store cannot be reached", 0, max_transient=3, error="Transient"
            )
            == "queued"
        )
    job = q.claim(catalog, "w1")
    assert (
        q.defer(catalog, job.id, "w1", "waiting: the file store cannot be reached", 0, max_transient=3, error="Transient")
        == "failed"
    )
    row = q.batch(catalog, b)[1][0]
    assert (row.status, row.transient_attempts) == ("failed", 3) and row.finished is not None
    assert row.reason == "failed after 3 attempts: the file store cannot be reached"
    assert row.result["outcome"] == "failed" and row.result["message"] == row.reason
    rec = catalog.get_file("s", "id-a")
    assert (rec.status, rec.reason) == ("failed", row.reason)
    assert q.unfinished(catalog) == 0
    assert q.retry(catalog, row.id) and q.claim(catalog, "w1") is not None  # Retry queues it again


def test_release_says_why(catalog):
    b = q.enqueue(catalog, "s", [q.JobSource("a.txt", "file", "id-a")])
    job = q.claim(catalog, "w1")
    assert q.release(catalog, job.id, "w1", reason="waiting: this worker's disk is full (its worker stood down)")
    row = q.batch(catalog, b)[1][0]
    assert (row.status, row.attempts, row.transient_attempts) == ("queued", 0, 0)
    assert row.reason.endswith("(its worker stood down)")


# -- an in-process worker -----------------------------------------------------------------------------


def _fast(settings, **ingest):
    return settings.model_copy(
        update={
            "ingest": settings.ingest.model_copy(update={"retry_base_seconds": 0.02, "retry_max_seconds": 0.1, **ingest})
        }
    )


def _texts(n: int) -> list[bytes]:
    return [f"# Note {i}\n\n".encode() + (f"Note {i} tells of harbour {i} and its tides. " * 30).encode() for i in range(n)]


def _queue(system: System, n: int) -> str:
    stored = [system.files.save(f"f{i}.md", "text/markdown", t) for i, t in enumerate(_texts(n))]
    return q.enqueue(system.catalog, "notes", [q.JobSource(s.name, "file", s.id, s.size) for s in stored])


def _once_each(system: System, n: int) -> None:
    wb = Workbench(system)
    records = wb.store_files("notes")
    assert sorted(r.file_name for r in records) == [f"f{i}.md" for i in range(n)]
    assert {r.status for r in records} == {"done"}
    vs = wb.vector_store("notes")
    for r in records:
        assert r.chunks > 0 and vs.count(r.file_id) == r.chunks


def test_a_file_store_that_cannot_be_reached_delays_the_file_and_never_fails_it(settings, monkeypatch, tmp_path):
    system = System(_fast(settings), lambda m: HashEmbedder(dimension=16))
    try:
        batch_id = _queue(system, 3)
        content, get, calls, seen = system.files.content, system.files.get, [], []

        def looked_up(file_id):  # the worker fetches the job's file: its record as a page shows it then
            seen.append(system.catalog.get_file("notes", file_id))
            return get(file_id)

        def unreachable_twice(file_id):
            calls.append(file_id)
            if len(calls) <= 2:
                raise BackendUnavailable(
                    "The s3 file store cannot read (bucket 'b' at http://s3): the endpoint cannot be reached."
                )
            return content(file_id)

        monkeypatch.setattr(system.files, "content", unreachable_twice)
        monkeypatch.setattr(system.files, "get", looked_up)
        health = HealthFile(tmp_path / "status.json")
        worker = Worker(system.indexer, lease=30, health=health)
        assert worker.run(once=True, poll=0.02) == 5  # 3 files, one of them twice queued again
        _, rows, _ = q.batch(system.catalog, batch_id)
        assert [r.status for r in rows] == ["done"] * 3, [(r.status, r.reason) for r in rows]
        assert [r.attempts for r in rows] == [1, 1, 1]  # the outage counted apart from the file's attempts
        assert sum(r.transient_attempts for r in rows) == 2
        # not recorded before a first attempt; while it waited, its record said why (a page shows it)
        waiting = [(r.status, r.reason) for r in seen if r is not None and r.status != "done"]
        assert (
            "pending",
            "waiting: the file store cannot be reached (The s3 file store cannot read (bucket 'b'"
            " at http://s3): the endpoint cannot be reached.)",
        ) in waiting, waiting
        assert worker.sick is None and worker.own_failures == 0  # a shared outage is no sickness
        _once_each(system, 3)
        state = json.loads((tmp_path / "status.json").read_text())
        assert state["state"] == "stopped" and state["processed"] == 5 and state["last_job"]["status"] == "indexed"
    finally:
        system.close()


def test_a_failed_result_naming_an_infrastructure_error_queues_the_job_again(settings, monkeypatch):
    system = System(_fast(settings), lambda m: HashEmbedder(dimension=16))
    try:
        batch_id = _queue(system, 1)
        real, calls = system.indexer.ingest_file, []

        def failed_once(*args, **kwargs):  # an ingestion that made a result of the outage instead of raising it
            calls.append(kwargs.get("raise_transient"))
            if len(calls) == 1:
                return IngestResult("f0.md", Outcome.FAILED, "The catalog cannot be reached.", error="BackendUnavailable")
            return real(*args, **kwargs)

        monkeypatch.setattr(system.indexer, "ingest_file", failed_once)
        Worker(system.indexer, lease=30).run(once=True, poll=0.02)
        [row] = q.batch(system.catalog, batch_id)[1]
        assert (row.status, row.transient_attempts) == ("done", 1) and calls == [True, True]
    finally:
        system.close()


def test_a_worker_whose_model_cannot_load_stands_down_and_another_ingests_everything(settings, tmp_path):
    def no_model(model):
        raise EmbeddingUnavailable(
            "The bundled embedding model cannot be assembled in /models: [Errno 28] No space left on device"
        )

    sick_system = System(_fast(settings, worker_sick_after=3), no_model)
    try:
        batch_id = _queue(sick_system, 5)
        health = HealthFile(tmp_path / "status.json")
        sick = Worker(sick_system.indexer, lease=30, health=health)
        assert sick.run(poll=0.02) == 3  # not --once: it stops by itself
        assert sick.sick is not None and "the embedding model cannot be loaded on this worker" in sick.sick
        _, rows, _ = q.batch(sick_system.catalog, batch_id)
        assert {r.status for r in rows} == {"queued"}, [(r.status, r.reason) for r in rows]  # nothing failed
        assert sum(r.transient_attempts for r in rows) == 2  # the third failure was given back as it was
        assert all(r.attempts == 0 for r in rows)
        assert sum("(its worker stood down)" in (r.reason or "") for r in rows) == 1
        state = json.loads((tmp_path / "status.json").read_text())
        assert state["state"] == "sick" and "embedding model" in state["reason"]
    finally:
        sick_system.close()
    system = System(_fast(settings), lambda m: HashEmbedder(dimension=16))
    try:
        Worker(system.indexer, lease=30).run(once=True, poll=0.02)
        _, rows, _ = q.batch(system.catalog, batch_id)
        assert [r.status for r in rows] == ["done"] * 5
        _once_each(system, 5)
    finally:
        system.close()


@pytest.mark.slow
def test_a_worker_waits_for_a_lost_catalog_and_goes_on_where_it_was(settings, monkeypatch, caplog, tmp_path):
    class Slow(HashEmbedder):
        def embed_documents(self, texts):
            time.sleep(0.05)
            return super().embed_documents(texts)

    system = System(_fast(settings), lambda m: Slow(dimension=16))
    try:
        batch_id = _queue(system, 6)
        down = threading.Event()
        cursor = system.catalog.cursor

        @contextmanager
        def maybe_down():
            if down.is_set():
                raise BackendUnavailable("Cannot reach the PostgreSQL catalog at db:5432: connection refused.")
            with cursor() as cur:
                yield cur

        monkeypatch.setattr(system.catalog, "cursor", maybe_down)
        health = HealthFile(tmp_path / "status.json")
        worker = Worker(system.indexer, lease=30, health=health)
        caplog.set_level(logging.INFO, logger="knowledge.service.worker")
        thread = threading.Thread(target=worker.run, kwargs={"once": True, "poll": 0.02})
        thread.start()

        def done() -> int:
            with cursor() as cur:
                return cur.execute("SELECT count(*) FROM ingest_jobs WHERE status = 'done'").fetchone()[0]

        deadline = time.monotonic() + 60
        while done() < 2:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.01)
        down.set()
        deadline = time.monotonic() + 30
        while json.loads((tmp_path / "status.json").read_text())["state"] != "waiting":
            assert time.monotonic() < deadline, "the worker never said it waits"
            time.sleep(0.05)
        time.sleep(1.5)
        assert thread.is_alive()  # the worker outlives the outage
        down.clear()
        thread.join(120)
        assert not thread.is_alive()
        _, rows, _ = q.batch(system.catalog, batch_id)
        assert [r.status for r in rows] == ["done"] * 6, [(r.status, r.reason) for r in rows]
        assert worker.gave_up is None and worker.sick is None
        _once_each(system, 6)
        said = caplog.text
        assert "waiting for the database" in said and "the database is back" in said
    finally:
        system.close()


def test_a_worker_gives_up_on_a_catalog_gone_longer_than_the_setting(settings, monkeypatch):
    system = System(_fast(settings, worker_database_wait_seconds=0.3), lambda m: HashEmbedder(dimension=16))
    try:

        def gone():
            raise BackendUnavailable("Cannot reach the PostgreSQL catalog at db:5432: connection refused.")

        monkeypatch.setattr(system.catalog, "cursor", gone)
        worker = Worker(system.indexer, lease=30)
        assert worker.run(poll=0.02) == 0  # returns: no exception, no endless wait
        assert worker.gave_up is not None and "ingest.worker_database_wait_seconds" in worker.gave_up
    finally:
        monkeypatch.undo()
        system.close()


def test_the_only_worker_of_the_embedded_default_fails_the_files_with_the_reason_rather_than_wait(settings):
    def no_model(model):
        raise EmbeddingUnavailable("The bundled embedding model cannot be loaded from /models: missing.")

    system = System(_fast(settings, worker_sick_after=2), no_model)
    try:
        batch_id = _queue(system, 3)
        worker = Worker(system.indexer, lease=30, stand_down=False)
        worker.run(once=True, poll=0.02)
        assert worker.sick is None  # it does not stop: nobody else would take the jobs
        _, rows, _ = q.batch(system.catalog, batch_id)
        assert [r.status for r in rows] == ["failed"] * 3
        assert all("the embedding model cannot be loaded on this worker" in r.reason for r in rows)
        assert all(r.attempts == 0 for r in rows)  # not the file's own failure: Retry starts afresh
    finally:
        system.close()


def test_a_file_embedded_before_the_catalog_went_away_is_written_when_it_is_back_not_embedded_again(settings, monkeypatch):
    embedded: list[int] = []

    class Counting(HashEmbedder):
        def embed_documents(self, texts):
            embedded.append(len(texts))
            return super().embed_documents(texts)

    system = System(_fast(settings), lambda m: Counting(dimension=16))
    try:
        batch_id = _queue(system, 1)
        down = threading.Event()
        cursor, write = system.catalog.cursor, system.indexer._write

        @contextmanager
        def maybe_down():
            if down.is_set():
                raise BackendUnavailable("Cannot reach the PostgreSQL catalog at db:5432: connection refused.")
            with cursor() as cur:
                yield cur

        def write_once_down(*args, **kwargs):
            if not down.is_set() and not getattr(write_once_down, "failed", False):
                write_once_down.failed = True
                write_once_down.embedded = len(embedded)  # the file is read and embedded by now
                down.set()  # the database stops just as the file is written
                threading.Timer(1.0, down.clear).start()
                raise BackendUnavailable("Cannot reach the PostgreSQL catalog at db:5432: connection refused.")
            return write(*args, **kwargs)

        monkeypatch.setattr(system.catalog, "cursor", maybe_down)
        monkeypatch.setattr(system.indexer, "_write", write_once_down)
        Worker(system.indexer, lease=30).run(once=True, poll=0.02)
        [row] = q.batch(system.catalog, batch_id)[1]
        assert (row.status, row.attempts, row.transient_attempts) == ("done", 1, 0), (row.status, row.reason)
        assert write_once_down.failed and write_once_down.embedded > 0
        assert len(embedded) == write_once_down.embedded  # written when the catalog was back, not embedded again
        _once_each(system, 1)
    finally:
        system.close()


def test_a_new_worker_process_writes_its_status_at_once_over_the_last_ones(tmp_path):
    """A container's health check reads the file from the start: an idle worker that has not taken
    a job is ``running``, and a worker restarted after standing down no longer reads ``sick``."""
    path = tmp_path / "status.json"
    last = HealthFile(path, ("host:1:worker:a",))
    last.update(state="sick", reason="this worker's disk is full")
    assert json.loads(path.read_text())["state"] == "sick"
    new = HealthFile(path, ("host:2:worker:b",))
    new.update(state="running")  # what `knowledge worker` does as it starts
    state = json.loads(path.read_text())
    assert state["state"] == "running" and state["reason"] is None and state["pid"] == os.getpid()
    assert state["workers"] == ["host:2:worker:b"]


def test_a_file_store_without_this_workers_credentials_is_its_own_trouble_not_an_outage():
    """After a move to S3, a worker started without the bucket's keys fails every file; the bucket
    is not down (workers with the team's settings read it), so this worker stands down."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    from knowledge.service.transient import classify

    def wrapped(cause: BaseException) -> BackendUnavailable:
        try:
            raise BackendUnavailable("The s3 file store cannot read (bucket 'b' at http://s3): why.") from cause
        except BackendUnavailable as exc:
            return exc

    assert classify(wrapped(NoCredentialsError())).own is True
    denied = ClientError({"Error": {"Code": "InvalidAccessKeyId", "Message": "no such key"}}, "GetObject")
    assert classify(wrapped(denied)).own is True
    down = classify(wrapped(EndpointConnectionError(endpoint_url="http://s3")))
    assert down is not None and down.own is False  # the server is down: every worker sees it
