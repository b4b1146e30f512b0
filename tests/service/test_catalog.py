from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from knowledge.catalog import DONE, FAILED, MIGRATIONS, Catalog, CatalogLocked, FileRecord


@pytest.fixture
def catalog(catalog_settings):
    """The catalog on each engine (DuckDB file, PostgreSQL database)."""
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


@pytest.mark.fresh_catalog
def test_schema_is_created_and_versioned(catalog):
    assert catalog.schema_version() == len(MIGRATIONS)
    catalog.close()
    assert catalog.schema_version() == len(MIGRATIONS)  # reopened, not migrated twice


@pytest.mark.fresh_catalog
def test_stores_and_files_round_trip(catalog):
    rec = catalog.put_store("Team Notes", "default", "memory", "m", 384, "cosine")
    assert (rec.name, rec.collection, rec.dimension) == ("Team Notes", "Team Notes", 384)
    catalog.put_file(FileRecord("Team Notes", "f1", "b.pdf", "aa", 10, DONE, None, 3, 2, ["page 2 has no text layer"]))
    catalog.put_file(FileRecord("Team Notes", "f2", "a.txt", "bb", 5, FAILED, "password required", 0, None))
    files = catalog.files("Team Notes")
    assert [f.file_name for f in files] == ["a.txt", "b.pdf"]
    assert files[1].warnings == ["page 2 has no text layer"]
    assert catalog.files("Team Notes", sha256="aa")[0].file_id == "f1"
    assert catalog.stores_using_file("f1") == ["Team Notes"]
    catalog.put_file(FileRecord("Team Notes", "f2", "a.txt", "bb", 5, DONE, None, 4, None))
    assert catalog.get_file("Team Notes", "f2").chunks == 4
    catalog.delete_store("Team Notes")
    assert catalog.list_stores() == [] and catalog.files("Team Notes") == []


def test_templates_round_trip(catalog):
    catalog.put_template("small", {"name": "small", "max_chunk_size_tokens": 128})
    catalog.put_template("small", {"name": "small", "max_chunk_size_tokens": 64})
    assert catalog.get_template("small")["max_chunk_size_tokens"] == 64
    assert catalog.delete_template("small") and not catalog.delete_template("small")


@pytest.mark.processes
@pytest.mark.slow
def test_a_second_process_gets_a_clear_message_and_then_its_turn(tmp_path):
    """Inside an explicit hold the file is not handed over: the other process is told who holds it;
    once the hold ends, a turn request gets the file (the holder still has it open, idle)."""
    path = tmp_path / "catalog.duckdb"
    holder = Catalog(path)
    holder.put_store("s", "default", "memory", "m", 8, "cosine")  # holds the file open now
    script = textwrap.dedent(f"""
        from pathlib import Path
        from knowledge.catalog import Catalog, CatalogLocked
        try:
            print("opened", [r.name for r in Catalog(Path({str(path)!r}), lock_timeout=0.3).list_stores()])
        except CatalogLocked as exc:
            print("locked:", exc)
    """)
    with holder.hold():
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60).stdout
    assert out.startswith("locked:") and "in use by" in out and "PID" in out
    out = subprocess.run(
        [sys.executable, "-c", script.replace("0.3", "5")], capture_output=True, text=True, timeout=60
    ).stdout
    assert out.strip() == "opened ['s']"
    assert [r.name for r in holder.list_stores()] == ["s"]  # and the holder gets it back
    holder.close()


_BATCH = """
import sys, time
from pathlib import Path
from knowledge.catalog import Catalog
catalog, stop = Catalog(Path(sys.argv[1])), Path(sys.argv[2])
catalog.put_store("batch", "default", "memory", "m", 8, "cosine")
print("ready", flush=True)
n = 0
while not stop.exists():  # a CLI batch: the catalog used several times a second, never idle 2 s
    catalog.put_template("t", {"n": n})
    catalog.list_stores()
    n += 1
    time.sleep(0.1)
print("done", n, flush=True)
"""


@pytest.mark.processes
@pytest.mark.slow
def test_a_batch_in_another_process_shares_the_file(tmp_path):
    """The defect: a process using the DuckDB catalog every second never closed it (the idle close
    never came), so every other process got "catalog in use". Now a waiting process asks for a turn
    and both go on."""
    path, stop = tmp_path / "catalog.duckdb", tmp_path / "stop"
    batch = subprocess.Popen(
        [sys.executable, "-c", _BATCH, str(path), str(stop)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert batch.stdout.readline().strip() == "ready"
        here = Catalog(path, lock_timeout=10)
        for i in range(5):
            here.put_store(f"s{i}", "default", "memory", "m", 8, "cosine")
            assert {"batch", f"s{i}"} <= {r.name for r in here.list_stores()}
            assert here.get_template("t") is not None  # the batch's writes are seen
            time.sleep(0.3)  # the batch takes its turns in between
        here.close()
    finally:
        stop.touch()
        out, err = batch.communicate(timeout=60)
    assert batch.returncode == 0, err
    assert out.startswith("done") and int(out.split()[1]) > 0


def test_catalog_locked_is_a_knowledge_error():
    from knowledge.errors import KnowledgeError

    assert issubclass(CatalogLocked, KnowledgeError)


def test_migration_6_gives_every_existing_file_its_name(tmp_path):
    """A catalog of version 5 (before names): each file record becomes a content with one name, by hand."""
    import duckdb

    path = tmp_path / "old.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version, script in enumerate(MIGRATIONS[:5], 1):
        conn.execute(script)
        conn.execute("INSERT INTO schema_version VALUES (?)", [version])
    conn.execute(
        "INSERT INTO store_files (store, file_id, file_name, status, chunks, created, updated)"
        " VALUES ('notes', 'file-1', 'cats.md', 'done', 2, now(), now())"
    )
    conn.close()
    catalog = Catalog(path)
    try:
        assert catalog.schema_version() == len(MIGRATIONS) >= 6
        [name] = catalog.names("notes")
        assert (name.file_id, name.name, name.folder) == ("file-1", "cats.md", "")
        catalog.add_name("notes", "file-1", "copy.md")
        [rec] = catalog.files("notes")
        assert rec.names == ("cats.md", "copy.md") and rec.aliases == ("copy.md",)
        assert [f.file_id for f in catalog.files_named("notes", "copy.md")] == ["file-1"]
        catalog.delete_file("notes", "file-1")
        assert catalog.names("notes") == []
    finally:
        catalog.close()


@pytest.mark.processes
def test_two_catalogs_on_one_file_in_one_process_share_it_until_the_last_closes(tmp_path):
    """Each catalog file is attached to the process's one DuckDB instance; two catalogs on the same file
    (by two spellings of its path) share the attachment, and the file is released -- another process may
    open it -- only once both have closed. The folder's name has a quote and spaces in it."""
    folder = tmp_path / 'it\'s a "folder"'
    one = Catalog(folder / "catalog.duckdb")
    two = Catalog(folder / ".." / folder.name / "catalog.duckdb")
    one.put_store("s", "default", "memory", "m", 8, "cosine")
    assert [r.name for r in two.list_stores()] == ["s"]
    one.close()
    two.put_template("t", {"n": 1})  # still attached for the other
    probe = [sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close(); print('opened')"]
    held = subprocess.run([*probe, str(folder / "catalog.duckdb")], capture_output=True, text=True, timeout=60)
    assert held.returncode != 0 and "lock" in held.stderr.lower()
    two.close()
    free = subprocess.run([*probe, str(folder / "catalog.duckdb")], capture_output=True, text=True, timeout=60)
    assert free.stdout.strip() == "opened", free.stderr
    assert [r.name for r in one.list_stores()] == ["s"] and one.get_template("t") == {"n": 1}  # reopened
    one.close()


def test_an_operation_that_failed_inside_a_transaction_leaves_none_open(tmp_path):
    """Operations reuse the cursors of earlier ones; the cursor of a failed operation is not reused, so its
    open transaction is rolled back and the next operation starts clean."""
    catalog = Catalog(tmp_path / "catalog.duckdb")
    with pytest.raises(RuntimeError), catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        cur.execute("INSERT INTO templates VALUES ('half', '{}', now(), now())")
        raise RuntimeError("the operation fails before its COMMIT")
    assert catalog.get_template("half") is None
    catalog.put_template("whole", {"n": 2})
    catalog.close()
    assert Catalog(tmp_path / "catalog.duckdb").get_template("whole") == {"n": 2}
