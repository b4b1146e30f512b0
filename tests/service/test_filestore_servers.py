"""The server-backed file stores (postgresql on the session's PostgreSQL, s3 on a moto S3 server):
large streams with bounded memory, dedupe, interrupted and killed saves, freeing the last blob,
clear errors for servers that are missing or refuse us, and a Workbench on each end to end."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import threading
import tracemalloc

import psycopg
import pytest

from knowledge.config import load_settings
from knowledge.errors import BackendUnavailable, ConfigError, StoreCorrupt
from knowledge.filestore import FileStore, open_file_store
from knowledge.filestore.postgresql import CHUNKS, PostgresFileStore
from knowledge.filestore.s3 import S3FileStore
from tests.helpers.filestore import MiB, PatternStream, blobs, inventory, pattern_sha256
from tests.helpers.pg import postgres_file_store_settings
from tests.helpers.s3 import S3_TEST_SECRET, s3_client, s3_file_store_settings


@pytest.fixture(params=["postgresql", pytest.param("s3", marks=pytest.mark.slow)])  # s3: the full suite
def server_settings(request, settings):
    if request.param == "postgresql":
        request.getfixturevalue("pg_database")
        return postgres_file_store_settings(settings)
    return s3_file_store_settings(settings, request.getfixturevalue("s3_server"))


@pytest.fixture
def store(server_settings):
    s = open_file_store(server_settings)
    yield s
    s.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once it is closed


# -- streaming ------------------------------------------------------------------------------------


def test_a_20_mb_file_streams_in_and_out_with_bounded_memory(store, record_property):
    size = 20 * 1000 * 1000
    src = PatternStream(size, seed=3)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        f = store.save("big.bin", "application/octet-stream", src)
        _, save_peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        h, total, reads = hashlib.sha256(), 0, 0
        with store.content(f.id) as fh:
            while chunk := fh.read(MiB):
                h.update(chunk)
                total += len(chunk)
                reads += 1
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    print(f"{store.name}: 20 MB file, save peak {save_peak / MiB:.1f} MiB, read peak {read_peak / MiB:.1f} MiB")
    record_property("save_peak_mib", round(save_peak / MiB, 1))
    record_property("read_peak_mib", round(read_peak / MiB, 1))
    assert f.size == total == size and reads >= 19
    assert h.hexdigest() == f.sha256 == pattern_sha256(size, seed=3)
    part = getattr(store, "part_size", 0)
    assert save_peak < 4 * MiB + 1.5 * part and save_peak < size / 2
    assert read_peak < 6 * MiB
    if isinstance(store, PostgresFileStore):  # the content is in 1 MiB rows
        with psycopg.connect(store.conninfo) as conn:
            rows = conn.execute(f"SELECT count(*), max(length(data)) FROM {CHUNKS}").fetchone()
        assert rows == (-(-size // MiB), MiB)


def test_two_saves_of_the_same_bytes_share_one_blob_and_the_last_delete_frees_it(store):
    data = PatternStream(7 * MiB, seed=9)
    a = store.save("a.bin", None, data)
    b = store.save("b.bin", None, PatternStream(7 * MiB, seed=9))
    assert a.sha256 == b.sha256 and a.id != b.id
    assert blobs(store) == {a.sha256}
    assert store.delete(a.id)
    assert blobs(store) == {a.sha256}
    with store.content(b.id) as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == b.sha256
    assert store.delete(b.id)
    assert inventory(store) == set()


def test_a_save_interrupted_midway_leaves_no_blob_and_no_record(store):
    # 12 MiB with a failure after 7: on s3 a multipart upload with a part already sent is aborted
    with pytest.raises(RuntimeError, match="connection dropped"):
        store.save("partial.bin", None, PatternStream(12 * MiB, fail_after=7 * MiB))
    assert store.list() == [] and inventory(store) == set()


def test_a_stream_opened_before_a_delete_reads_on(store):
    f = store.save("x.bin", None, PatternStream(3 * MiB))
    with store.content(f.id) as fh:
        first = fh.read(MiB)
        assert store.delete(f.id)
        rest = fh.read()
    assert hashlib.sha256(first + rest).hexdigest() == f.sha256


@pytest.mark.slow
def test_concurrent_saves_of_the_same_bytes_and_deletes_keep_every_record_readable(store):
    data = b"shared " * 50_000
    kept, errors = [], []

    def worker(n):
        try:
            for i in range(6):
                keep = store.save(f"k{n}-{i}", None, data)
                drop = store.save(f"d{n}-{i}", None, data)
                assert store.delete(drop.id)
                kept.append(keep)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    for f in kept:
        with store.content(f.id) as fh:
            assert fh.read() == data
    assert inventory(store) == {f"record:{f.id}" for f in kept} | {f"blob:{hashlib.sha256(data).hexdigest()}"}


# -- postgresql -----------------------------------------------------------------------------------


def _run_child(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.processes
@pytest.mark.slow
def test_postgresql_a_process_killed_mid_save_leaves_nothing(pg_database, settings):
    s = postgres_file_store_settings(settings)
    code = """
        import os, sys
        from knowledge.config import load_settings
        from knowledge.filestore.postgresql import PostgresFileStore

        class Dying:
            sent = 0
            def read(self, n):
                if self.sent >= 3 * 1024 * 1024:
                    os._exit(9)  # like a kill -9: no rollback sent, the server sees the connection go
                self.sent += n
                return b"z" * n

        store = PostgresFileStore(load_settings(data_dir=sys.argv[1], file_store={"url": sys.argv[2]}))
        store.save("doomed.bin", None, Dying())
    """
    proc = _run_child(code, str(settings.data_root), s.file_store.url)
    assert proc.returncode == 9, proc.stderr
    store = PostgresFileStore(s)
    try:
        assert store.list() == []
        # the server rolls the dead connection's transaction back
        import time

        deadline = time.monotonic() + 30
        while inventory(store) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert inventory(store) == set()
    finally:
        store.close()


@pytest.mark.processes
@pytest.mark.slow
def test_postgresql_two_processes_create_the_tables_at_once(pg_database, settings):
    s = postgres_file_store_settings(settings)
    code = """
        import sys
        from knowledge.config import load_settings
        from knowledge.filestore.postgresql import PostgresFileStore

        store = PostgresFileStore(load_settings(data_dir=sys.argv[1], file_store={"url": sys.argv[2]}))
        print(store.save(sys.argv[3], None, b"same bytes").id)
        store.close()
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(settings.data_root), s.file_store.url, tag],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("p1", "p2", "p3")
    ]
    outs = [p.communicate(120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in outs]
    store = PostgresFileStore(s)
    try:
        assert {f.name for f in store.list()} == {"p1", "p2", "p3"}
        assert len(blobs(store)) == 1
    finally:
        store.close()


def test_postgresql_url_defaults_to_the_catalog_url_and_is_required(pg_database, settings, monkeypatch):
    s = postgres_file_store_settings(settings)
    url = s.file_store.url
    bare = s.model_copy(update={"file_store": s.file_store.model_copy(update={"url": None})})
    with pytest.raises(ConfigError, match=r"file_store\.url"):
        PostgresFileStore(bare)

    class Catalog:  # the catalog section another branch adds: read by attribute, whatever its class
        def __init__(self, url):
            self.url = url

    object.__setattr__(bare, "catalog", Catalog(url))
    store = PostgresFileStore(bare)
    try:
        assert store.save("a", None, b"a").size == 1
    finally:
        store.close()


def test_postgresql_unreachable_server_is_a_clear_error_without_the_password(settings):
    port = _closed_port()
    s = load_settings(
        data_dir=settings.data_root,
        file_store={"backend": "postgresql", "url": f"postgresql://knowledge:hunter2secret@127.0.0.1:{port}/files"},
    )
    with pytest.raises(BackendUnavailable) as info:
        open_file_store(s)
    msg = str(info.value)
    assert f"127.0.0.1:{port}/files" in msg and "file_store.url" in msg
    assert "hunter2secret" not in msg
    with pytest.raises(ConfigError, match="not a valid PostgreSQL connection string"):
        open_file_store(
            load_settings(data_dir=settings.data_root, file_store={"backend": "postgresql", "url": "nonsense ==="})
        )


def test_postgresql_a_record_whose_chunks_are_gone_is_store_corrupt(pg_database, settings):
    store = PostgresFileStore(postgres_file_store_settings(settings))
    try:
        f = store.save("x", None, PatternStream(2 * MiB + 5))
        with psycopg.connect(store.conninfo) as conn:
            conn.execute(f"DELETE FROM {CHUNKS} WHERE seq = 1")
        with pytest.raises(StoreCorrupt), store.content(f.id) as fh:
            fh.read()
    finally:
        store.close()


# -- s3 -------------------------------------------------------------------------------------------


def test_s3_keys_follow_the_layout_under_the_prefix(s3_server, settings):
    s = s3_file_store_settings(settings, s3_server, s3_prefix="team-a/files")
    store = open_file_store(s)
    f = store.save("../../etc/passwd", None, b"content")
    keys = {o["Key"] for o in s3_client(s3_server).list_objects_v2(Bucket=s.file_store.s3_bucket)["Contents"]}
    assert keys == {
        f"team-a/files/files/{f.id}.json",
        f"team-a/files/blobs/{f.sha256}",
        f"team-a/files/by-sha256/{f.sha256}/{f.id}",
    }
    assert store.find_by_sha256(f.sha256) == [f]
    other = open_file_store(s3_file_store_settings(settings, s3_server, create=False, s3_prefix="team-b"))
    assert other.list() == [] and other.find(f.id) is None  # another prefix is another store


def test_s3_missing_bucket_and_unreachable_endpoint_are_clear_errors(s3_server, settings):
    missing = s3_file_store_settings(settings, s3_server, create=False)
    with pytest.raises(BackendUnavailable) as info:
        open_file_store(missing)
    msg = str(info.value)
    assert missing.file_store.s3_bucket in msg and s3_server in msg and "does not exist" in msg
    assert S3_TEST_SECRET not in msg

    port = _closed_port()
    gone = s3_file_store_settings(settings, f"http://127.0.0.1:{port}", create=False)
    with pytest.raises(BackendUnavailable) as info:
        open_file_store(gone)
    msg = str(info.value)
    assert f"http://127.0.0.1:{port}" in msg and "cannot be reached" in msg and S3_TEST_SECRET not in msg

    with pytest.raises(ConfigError, match="s3_bucket"):
        open_file_store(load_settings(data_dir=settings.data_root, file_store={"backend": "s3"}))
    with pytest.raises(ConfigError, match="both"):
        open_file_store(
            load_settings(
                data_dir=settings.data_root,
                file_store={"backend": "s3", "s3_bucket": "b", "s3_access_key_id": "only-the-id"},
            )
        )


def test_s3_refused_credentials_are_named_as_such(s3_server, settings):
    """moto's server accepts any key, so the refusal is the server's answer as botocore raises it."""
    from botocore.exceptions import ClientError

    store = open_file_store(s3_file_store_settings(settings, s3_server))
    refusal = ClientError({"Error": {"Code": "InvalidAccessKeyId", "Message": "The key is unknown"}}, "HeadBucket")
    msg = str(store.error("check the bucket", refusal))
    assert "credentials are refused (InvalidAccessKeyId)" in msg and store.bucket in msg
    assert S3_TEST_SECRET not in msg


def test_s3_cleanup_removes_what_a_killed_save_left(s3_server, settings):
    from datetime import timedelta

    s = s3_file_store_settings(settings, s3_server)
    store: FileStore = open_file_store(s)
    keep = store.save("keep", None, b"keep")
    client, bucket = s3_client(s3_server), s.file_store.s3_bucket
    client.put_object(Bucket=bucket, Key="tmp/abandoned", Body=b"half")
    client.create_multipart_upload(Bucket=bucket, Key="tmp/abandoned-multipart")
    orphan = hashlib.sha256(b"orphan").hexdigest()
    client.put_object(Bucket=bucket, Key=f"blobs/{orphan}", Body=b"orphan")
    client.put_object(Bucket=bucket, Key=f"by-sha256/{orphan}/file-{'0' * 32}", Body=b"")
    assert isinstance(store, S3FileStore)
    young = store.cleanup(older_than=timedelta(hours=1))  # young leftovers may be saves in flight
    # (moto reports every multipart upload as initiated in 2010: that one already counts as old)
    assert young <= 1 and {"tmp/abandoned", f"blob:{orphan}"} <= inventory(store)
    assert young + store.cleanup(older_than=timedelta(0)) == 4
    assert inventory(store) == {f"record:{keep.id}", f"blob:{keep.sha256}"}


# -- a Workbench on each ---------------------------------------------------------------------------


def test_a_workbench_on_a_server_file_store_ingests_and_searches(server_settings, tmp_path):
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.system import System
    from knowledge.workbench import Workbench

    doc = tmp_path / "cats.md"
    doc.write_text("# Cats\n\nThe cat sits on the mat.\n\n## Food\n\nCats eat fish and chicken.\n", encoding="utf-8")
    system = System(server_settings, lambda model: HashEmbedder(dimension=64, max_tokens=48))
    wb = Workbench(system)
    try:
        assert system.files.current().name == server_settings.file_store.backend
        r = wb.ingest_file("notes", doc)
        assert r.ok, r
        hits = wb.search("notes", "what do cats eat fish", k=3)
        assert hits and hits[0].file_name == "cats.md" and "fish" in hits[0].text
        stored = system.files.find_by_sha256(hashlib.sha256(doc.read_bytes()).hexdigest())
        assert [f.name for f in stored] == ["cats.md"]
        with system.files.content(stored[0].id) as fh:
            assert fh.read() == doc.read_bytes()
        assert not (server_settings.file_store_dir / "meta").exists()  # nothing went to the folder
    finally:
        system.close()
