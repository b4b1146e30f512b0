"""The catalog's file statuses as an enum, the error class of a failed file (migration 5), and
queries that name their columns."""

from __future__ import annotations

import duckdb
import pytest

from knowledge.catalog import (
    DONE,
    FAILED,
    MIGRATIONS,
    PENDING,
    PROCESSING,
    STATUSES,
    Catalog,
    FileRecord,
    FileStatus,
)


@pytest.fixture
def catalog(catalog_settings):
    """The catalog on each engine (DuckDB file, PostgreSQL database)."""
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


def test_the_statuses_are_an_enum_equal_to_the_old_strings():
    assert [str(s) for s in FileStatus] == ["pending", "processing", "done", "failed"]
    assert (PENDING, PROCESSING, DONE, FAILED) == ("pending", "processing", "done", "failed")
    assert FAILED is FileStatus.FAILED and tuple(FileStatus) == STATUSES
    assert {"done": 1}[FileStatus.DONE] == 1  # a dict keyed by the plain strings still finds them
    assert f"{FileStatus.DONE}" == "done"


def test_a_failed_file_keeps_its_error_class_and_a_new_record_clears_it(catalog):
    catalog.put_store("s", "default", "memory", "m", 8, "cosine")
    catalog.put_file(
        FileRecord("s", "f1", "a.pdf", "aa", 10, FAILED, "password required: ...", 0, None, error="PasswordRequired")
    )
    got = catalog.get_file("s", "f1")
    assert got.error == "PasswordRequired" and got.status is FileStatus.FAILED
    assert catalog.files("s")[0].error == "PasswordRequired"
    catalog.put_file(FileRecord("s", "f1", "a.pdf", "aa", 10, DONE, None, 3, 1))  # indexed after a retry
    again = catalog.get_file("s", "f1")
    assert again.error is None and again.status is FileStatus.DONE and again.chunks == 3


def test_a_catalog_of_version_4_gains_the_error_column_and_keeps_its_rows(tmp_path):
    path = tmp_path / "catalog.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version, script in enumerate(MIGRATIONS[:4], 1):
        conn.execute(script)
        conn.execute("INSERT INTO schema_version VALUES (?)", [version])
    conn.execute("INSERT INTO stores VALUES ('s', 'default', 'memory', 's', 'm', 8, 'cosine', now(), now())")
    conn.execute(
        "INSERT INTO store_files VALUES ('s', 'f1', 'a.pdf', 'aa', 10, 'failed',"
        " 'password required: this PDF is encrypted', 0, NULL, '[]', NULL, NULL, NULL, now(), now())"
    )
    conn.close()

    catalog = Catalog(path)
    try:
        assert catalog.schema_version() == len(MIGRATIONS) >= 5
        old = catalog.get_file("s", "f1")
        assert (old.status, old.reason, old.error) == (FAILED, "password required: this PDF is encrypted", None)
        assert catalog.get_store("s").dimension == 8
    finally:
        catalog.close()


def test_records_are_read_by_column_name_not_position(catalog):
    """A column added to a table (by a later migration, or another version) shifts no field."""
    catalog.put_store("s", "default", "memory", "m", 8, "cosine")
    catalog.put_file(FileRecord("s", "f1", "a.txt", "aa", 10, DONE, None, 2, None, ["w"]))
    with catalog.cursor() as cur:
        cur.execute("ALTER TABLE stores ADD COLUMN note TEXT DEFAULT 'x'")
        cur.execute("ALTER TABLE store_files ADD COLUMN note TEXT DEFAULT 'x'")
    store = catalog.get_store("s")
    assert (store.name, store.dimension, store.distance) == ("s", 8, "cosine")
    assert [r.name for r in catalog.list_stores()] == ["s"]
    catalog.put_store("s", "default", "memory", "m", 16, "cosine")  # an update names its columns too
    assert catalog.get_store("s").dimension == 16
    catalog.put_file(FileRecord("s", "f2", "b.txt", "bb", 5, FAILED, "no text", 0, None, error="EmptyDocument"))
    f1, f2 = catalog.files("s")
    assert (f1.warnings, f1.chunks, f1.error) == (["w"], 2, None)
    assert (f2.status, f2.error) == (FAILED, "EmptyDocument")


def test_a_stores_files_counted_by_what_they_mean(catalog):
    from knowledge.catalog import FileCounts

    catalog.put_store("s", "default", "memory", "m", 8, "cosine")
    for i, (status, chunks) in enumerate([(DONE, 3), (DONE, 4), (FAILED, 0), (PROCESSING, 0), (PENDING, 0)]):
        catalog.put_file(FileRecord("s", f"f{i}", f"{i}.txt", str(i), 1, status, None, chunks, None))
    assert FileCounts.of(catalog.files("s")) == FileCounts(indexed=2, failed=1, busy=2, chunks=7)
    assert FileCounts.of([]) == FileCounts(0, 0, 0, 0)
