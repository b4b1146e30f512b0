"""Moving the files to another file store (issue 39): the catalog records where they live, a process
whose settings name another store refuses to start, ``knowledge files move`` copies every file by its
id (SHA-256 verified, resumable) and switches over while a worker process ingests a batch."""

from __future__ import annotations

import hashlib
import os
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
from knowledge.errors import ConfigError
from knowledge.filestore import open_file_store
from knowledge.service import filehome
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.pg import pg_catalog_settings
from tests.helpers.s3 import S3_TEST_KEY, S3_TEST_SECRET, s3_file_store_settings

REPO = Path(__file__).resolve().parents[2]


def _wb(settings: Settings, **kw) -> Workbench:
    return Workbench(settings, embedder_factory=lambda m: HashEmbedder(dimension=16), **kw)


def _system(settings: Settings) -> System:
    return System(settings, lambda m: HashEmbedder(dimension=16))


def _with_file_store(settings: Settings, **update) -> Settings:
    return settings.model_copy(update={"file_store": settings.file_store.model_copy(update=update)})


def test_the_first_start_records_the_store_and_another_store_is_refused_while_files_are_stored(settings, tmp_path):
    """Filesystem first (recorded on first start); the settings switched to PostgreSQL without a move
    -> refused with the command to run, never a workbench showing 0 files."""
    wb = _wb(settings)
    try:
        assert wb.file_store_home().location == {"backend": "filesystem", "dir": "files"}
        doc = tmp_path / "a.md"
        doc.write_text("# A\n\nSome words about tides.\n", encoding="utf-8")
        assert wb.ingest_file("notes", doc).ok
    finally:
        wb.close()
    other = _with_file_store(settings, backend="postgresql", url="postgresql://kn@db.example/team")
    with pytest.raises(ConfigError) as err:
        _wb(other)
    text = str(err.value)
    assert "filesystem file store (folder 'files')" in text and "database 'team'" in text
    assert "knowledge files move --to postgresql" in text and "password" not in text
    # the same settings as before start, and see the file
    system = _system(settings)
    try:
        assert len(system.files.list()) == 1
    finally:
        system.close()


def test_an_upgrade_with_a_new_file_store_and_no_record_yet_is_refused(settings, tmp_path):
    """A deployment from before the record (none in the catalog) started with settings switched to
    another store: the catalog's files are not there -> refused; with the old settings -> recorded."""
    system = _system(settings)
    try:
        doc = tmp_path / "a.md"
        doc.write_text("# A\n\nSome words about tides.\n", encoding="utf-8")
        assert Workbench(system).ingest_file("notes", doc).ok
        with system.catalog.cursor() as cur:
            cur.execute("DELETE FROM file_store_home")
    finally:
        system.close()
    with pytest.raises(
        ConfigError,
        match=r"hold files \(such as file-[0-9a-f]{32}\) that are not in the filesystem"
        r" file store \(folder 'elsewhere'\).*files move --to filesystem",
    ):
        _wb(_with_file_store(settings, dir=Path("elsewhere")))
    wb = _wb(settings)
    try:
        assert wb.file_store_home().location == {"backend": "filesystem", "dir": "files"}
    finally:
        wb.close()


def test_with_no_file_stored_the_settings_decide(settings):
    _wb(settings).close()
    moved = _with_file_store(settings, dir=Path("elsewhere"))
    wb = _wb(moved)
    try:
        assert wb.file_store_home().location == {"backend": "filesystem", "dir": "elsewhere"}
    finally:
        wb.close()


def test_a_member_may_not_move_the_files(settings):
    from knowledge.errors import PermissionDenied

    system = _system(settings)
    try:
        system.people.accounts.create("ann", "a-long-password", role="admin")
        system.people.accounts.create("bob", "a-long-password", role="member")
        with pytest.raises(PermissionDenied, match="Only an admin may move the files"):
            Workbench(system).as_user(system.people.accounts.actor("bob")).move_files("postgresql")
    finally:
        system.close()


@pytest.mark.slow
def test_an_interrupted_move_resumes_skipping_the_verified_copies(settings, s3_server, monkeypatch):
    """Filesystem -> S3 stopped after 7 of 30 files; the re-run copies only the other 23, then
    switches; every id reads back its bytes from the bucket; --cleanup empties the folder."""
    system = _system(settings)
    data = {
        system.files.save(f"f{i}.txt", "text/plain", f"file {i} ".encode() * (i + 1)).id: f"file {i} ".encode() * (i + 1)
        for i in range(30)
    }
    system.close()
    target = s3_file_store_settings(settings, s3_server)
    moving = _with_file_store(target, backend="filesystem")  # the old backend, the bucket named too
    catalog = Catalog.from_settings(moving)

    class Stop(Exception):
        pass

    def stop_after_7(report, total):
        if report.copied == 7:
            raise Stop

    with pytest.raises(Stop):
        filehome.move_files(moving, catalog, "s3", progress=stop_after_7, settle_seconds=0)
    home = filehome.read_home(catalog)
    assert home.phase == "copying" and home.moving_to["bucket"] == target.file_store.s3_bucket
    assert home.location["backend"] == "filesystem"
    report = filehome.move_files(moving, catalog, "s3", settle_seconds=0)
    assert (report.copied, report.skipped, report.switched) == (23, 7, True)
    assert filehome.read_home(catalog).location["backend"] == "s3"
    bucket = open_file_store(target)
    for fid, content in data.items():
        with bucket.content(fid) as fh:
            assert fh.read() == content
        assert bucket.get(fid).sha256 == hashlib.sha256(content).hexdigest()
    # settings naming the bucket start; the old settings still start until the old copies go (and
    # follow the record to the bucket, with the standard AWS credentials of their environment)
    _wb(target).close()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_TEST_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_TEST_SECRET)
    _wb(settings).close()
    assert filehome.cleanup_old(moving, catalog) == 30
    assert open_file_store(settings).list() == []
    with pytest.raises(ConfigError, match="files move --to filesystem"):
        _wb(settings)
    catalog.close()
    system = _system(target)  # through the workbench: an admin's move back, in the audit trail
    try:
        wb = Workbench(system)
        report = wb.move_files("filesystem", delete_old=True)
        assert (report.copied, report.switched, report.deleted) == (30, True, 30)
        assert [e.action for e in wb.audit_events(action="files.")] == ["files.move"]
        assert {f.id for f in system.files.list()} == set(data)
    finally:
        system.close()


_WORKER = textwrap.dedent("""
    import os, sys, time
    sys.path[:0] = {paths!r}
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.service.worker import Worker
    from knowledge.system import System

    class Held(HashEmbedder):
        calls = 0

        def embed_documents(self, texts):
            Held.calls += 1
            while Held.calls > 5 and os.path.exists({hold!r}):  # the test holds the batch across the move
                time.sleep(0.05)
            return super().embed_documents(texts)

    system = System(load_settings(), lambda m: Held(dimension=16))
    n = Worker(system.indexer, worker_id="worker-old-settings", lease=5).run(once=True, poll=0.1)
    system.close()
    print("processed", n)
""")


@pytest.mark.processes
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_files_move_from_postgresql_to_s3_with_500_files_and_a_batch_running(
    pg_database, settings, s3_server, monkeypatch, record_property
):
    """500 files in the PostgreSQL file store, a batch of 60 of them being ingested by a real worker
    process that keeps its old settings (PostgreSQL only), uploads going on in this process, and
    ``knowledge files move --to s3`` run as a command: afterwards every old id reads its bytes (SHA-256
    checked) from the bucket, the workbench lists all, the batch finished with nothing failed."""
    from psycopg.conninfo import conninfo_to_dict

    parts = conninfo_to_dict(pg_catalog_settings(settings).catalog.url)
    url = f"postgresql://{parts['user']}@{parts['host']}:{parts['port']}/{parts['dbname']}"
    team = pg_catalog_settings(settings)
    team = team.model_copy(
        update={
            "catalog": team.catalog.model_copy(update={"url": url}),
            "vector_store": team.vector_store.model_copy(update={"url": url}),
        }
    )
    team = _with_file_store(team, backend="postgresql")  # file_store.url: the catalog's database
    target = s3_file_store_settings(team, s3_server)
    bucket = target.file_store.s3_bucket
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KNOWLEDGE_DATA_DIR": str(settings.data_root),
        "KNOWLEDGE_CATALOG__URL": team.catalog.url,
        "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
        "KNOWLEDGE_VECTOR_STORE__URL": team.vector_store.url,
        "KNOWLEDGE_FILE_STORE__BACKEND": "postgresql",
        # the old settings name no bucket: a process follows the catalog's record there with the
        # standard AWS credentials of its environment
        "AWS_ACCESS_KEY_ID": S3_TEST_KEY,
        "AWS_SECRET_ACCESS_KEY": S3_TEST_SECRET,
    }
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", S3_TEST_KEY)  # this process too keeps its old settings
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_TEST_SECRET)
    system = _system(team)
    expected: dict[str, str] = {}
    for i in range(500):
        content = f"# File {i}\n\nFile number {i} is about ".encode() + (b"tides and harbours. " * (i % 7 + 1))
        f = system.files.save(f"file-{i:03}.md", "text/markdown", content)
        expected[f.id] = hashlib.sha256(content).hexdigest()
    ids = list(expected)
    batch_id = q.enqueue(system.catalog, "notes", [q.JobSource(f"file-{i:03}.md", "file", ids[i], 0) for i in range(60)])
    hold = settings.data_root.parent / "hold"
    hold.touch()
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER.format(paths=[str(REPO)], hold=str(hold))],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while sum(r.status == "done" for r in q.batch(system.catalog, batch_id)[1]) < 3:
            assert worker.poll() is None, worker.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.2)

        # uploads while the files move, through this process's store (old settings, AWS_* for the bucket)
        uploaded: dict[str, str] = {}
        errors: list[BaseException] = []
        stop = threading.Event()

        def upload() -> None:
            n = 0
            while not stop.is_set():
                content = f"uploaded during the move {n}".encode()
                try:
                    saved = system.files.save(f"late-{n}.txt", "text/plain", content)
                    uploaded[saved.id] = hashlib.sha256(content).hexdigest()
                except BaseException as exc:
                    errors.append(exc)
                n += 1
                time.sleep(0.05)

        uploader = threading.Thread(target=upload)
        uploader.start()
        move_env = {
            **env,
            "KNOWLEDGE_FILE_STORE__S3_BUCKET": bucket,
            "KNOWLEDGE_FILE_STORE__S3_ENDPOINT_URL": s3_server,
            "KNOWLEDGE_FILE_STORE__S3_REGION": "us-east-1",
        }
        started = time.monotonic()
        try:
            moved = subprocess.run(
                [sys.executable, "-m", "knowledge", "files", "move", "--to", "s3"],
                env=move_env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            record_property("move_seconds", round(time.monotonic() - started, 1))
            time.sleep(filehome.HOME_TTL + 1)  # uploads after the flip, by a process still on the old settings
        finally:
            stop.set()
            uploader.join(60)
        assert moved.returncode == 0, moved.stderr[-3000:]
        assert "Moved the files from the postgresql file store" in moved.stdout, moved.stdout
        assert not errors, errors[:3]
        assert len(uploaded) > 10

        # the batch was held mid-file across the move: at least 54 of its 60 jobs run after the switch
        assert sum(r.status == "done" for r in q.batch(system.catalog, batch_id)[1]) <= 6
        hold.unlink()
        _out, err = worker.communicate(timeout=600)
        assert worker.returncode == 0, err.decode()[-3000:]
        rows = q.batch(system.catalog, batch_id)[1]
        assert [r.status for r in rows] == ["done"] * 60, [(r.name, r.status, r.error) for r in rows if r.status != "done"]
        assert set(system.catalog.file_statuses(ids[0]).values()) == {"done"}
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(30)
    home = filehome.read_home(system.catalog)
    assert home.location["backend"] == "s3" and home.previous["backend"] == "postgresql" and home.moving_to is None
    s3 = open_file_store(target)
    for fid, sha in {**expected, **uploaded}.items():
        with s3.content(fid) as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == sha, fid
    assert {f.id for f in s3.list()} == set(expected) | set(uploaded)
    system.close()
    # a process started with the new settings lists every file, by the same ids
    after = _system(target)
    try:
        assert {f.id for f in after.files.list()} == set(expected) | set(uploaded)
        assert after.catalog.stores_using_file(ids[0]) == ["notes"]
    finally:
        after.close()


def test_a_workbench_starts_while_the_catalogs_server_is_down_and_checks_at_the_first_use(settings):
    """Reading the record needs the catalog: with its server down the start goes on (as before the
    record existed) and the first use of the files says the server cannot be reached."""
    from knowledge.errors import BackendUnavailable
    from tests.helpers.api import free_port

    down = settings.model_copy(
        update={
            "catalog": settings.catalog.model_copy(
                update={"url": f"postgresql://kn@127.0.0.1:{free_port()}/team", "connect_timeout": 1}
            )
        }
    )
    system = _system(down)
    try:
        with pytest.raises(BackendUnavailable, match="Cannot reach the PostgreSQL catalog"):
            system.files.list()
    finally:
        system.close()
