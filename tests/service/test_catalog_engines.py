"""The catalog on both engines (DuckDB file, PostgreSQL): the modules keeping tables there through
``catalog.cursor()`` (chats, LLM configs, evaluation), the SQL translation, change tokens across
processes, the advisory-locked migration, unreachable servers, and a whole workbench on PostgreSQL."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from knowledge.catalog import MIGRATIONS, Catalog
from knowledge.catalog.dialect import script_for, statement_for
from knowledge.chat.model import Attachment, Part
from knowledge.chat.store import ChatStore
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import BackendUnavailable, ConfigError
from knowledge.evaluation.questions import Question, parse_criterion
from knowledge.llm.config import LlmConfigs
from knowledge.system import System
from knowledge.workbench import Workbench


@pytest.fixture
def catalog(catalog_settings):
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


def _deadline_poll(check, seconds: float = 30.0) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if check():
            return True
        time.sleep(0.05)
    return False


# -- the SQL translation ---------------------------------------------------------------------------
def test_statements_keep_duckdb_sql_and_translate_placeholders_for_postgresql():
    sql = "SELECT '?', 'a%b', \"odd?\" FROM t WHERE a = ? AND b LIKE 'x%' AND c = ?"
    assert statement_for(sql, "duckdb") == sql
    assert statement_for(sql, "postgresql") == (
        "SELECT '?', 'a%%b', \"odd?\" FROM t WHERE a = %s AND b LIKE 'x%%' AND c = %s"
    )
    assert statement_for("SELECT 'it''s ?' || ?", "postgresql") == "SELECT 'it''s ?' || %s"


def test_migration_scripts_keep_one_engines_blocks_and_rename_double():
    script = (
        "CREATE TABLE t (a DOUBLE, b DOUBLE PRECISION);\n-- [postgresql]\nCREATE FUNCTION f();\n"
        "-- [end]\n-- [duckdb]\nSELECT 1;\n-- [end]\n"
    )
    pg, duck = script_for(script, "postgresql"), script_for(script, "duckdb")
    assert "a DOUBLE PRECISION, b DOUBLE PRECISION" in pg and "CREATE FUNCTION" in pg and "SELECT 1" not in pg
    assert "a DOUBLE," in duck and "CREATE FUNCTION" not in duck and "SELECT 1" in duck
    assert "CREATE CONSTRAINT TRIGGER" in script_for(MIGRATIONS[6], "postgresql")
    assert "TRIGGER" not in script_for(MIGRATIONS[6], "duckdb")


def test_the_catalog_says_its_dialect(catalog, catalog_dialect):
    assert catalog.dialect == catalog_dialect
    assert catalog.schema_version() == len(MIGRATIONS) >= 7
    with catalog.cursor() as cur:  # JSON as text, timestamps aware, on both engines
        spec, created = cur.execute("SELECT spec, created FROM llm_configs WHERE name = ?", ["offline"]).fetchone()
    assert isinstance(spec, str) and '"offline"' in spec
    assert created.tzinfo is not None


# -- the modules with tables in the catalog ------------------------------------------------------
def test_chat_sessions_messages_attachments_and_traces_persist(catalog_settings):
    first = Catalog.from_settings(catalog_settings)
    chats = ChatStore(first)
    s = chats.create_session("Trip", stores=["notes"])
    chats.add_message(s.id, "user", [Part("text", text="hi 100% sure?")], {"k": 1})
    chats.add_message(s.id, "assistant", [Part("file", file_id="f-1", name="a.pdf")])
    chats.put_attachment(s.id, Attachment("f-2", "b.txt", "text/plain", "text", 3))
    chats.put_attachment(s.id, Attachment("f-2", "b2.txt", "text/plain", "text", 4))  # replaced, not doubled
    trace = chats.add_trace(s.id, "offline", "offline", None, {"q": 1}, {"a": 2}, None, datetime.now(UTC), 0.5)
    empty = chats.create_session("Empty")
    first.close()

    again = ChatStore(Catalog.from_settings(catalog_settings))  # another instance: what was stored
    assert [x.title for x in again.list_sessions()] == ["Trip", "Empty"] or {x.title for x in again.list_sessions()} == {
        "Trip",
        "Empty",
    }
    got = again.get_session(s.id)
    assert got.stores == ["notes"] and got.created.tzinfo is not None
    msgs = again.messages(s.id)
    assert [m.seq for m in msgs] == [1, 2] and msgs[0].parts[0].text == "hi 100% sure?" and msgs[0].meta == {"k": 1}
    assert [(a.file_id, a.name, a.size) for a in again.attachments(s.id)] == [("f-2", "b2.txt", 4)]
    assert again.file_in_use("f-1") and again.file_in_use("f-2") and not again.file_in_use("f-3")
    [t] = again.traces(s.id)
    assert (t.id, t.request, t.response) == (trace, {"q": 1}, {"a": 2})
    assert again.empty_sessions(datetime.now(UTC) + timedelta(seconds=5)) == [empty.id]
    again.delete_session(s.id)
    assert again.messages(s.id) == [] and again.find_session(s.id) is None
    again.catalog.close()


def test_llm_configs_persist(catalog_settings):
    first, second = Catalog.from_settings(catalog_settings), Catalog.from_settings(catalog_settings)
    configs = LlmConfigs(first, catalog_settings)
    configs.save({"name": "local", "type": "CHAT", "provider": "openai", "model": "m", "base_url": "http://x/v1"})
    configs.save({"name": "local", "type": "CHAT", "provider": "openai", "model": "n", "base_url": "http://x/v1"})
    first.close()
    other = LlmConfigs(second, catalog_settings)
    assert other.get("local").model == "n"
    assert {c.name for c in other.list()} >= {"embeddings", "offline", "local"}
    assert other.delete("local") and not other.delete("local") and other.find("local") is None
    second.close()


# -- a whole workbench ------------------------------------------------------------------------------
def _system(settings):
    return System(settings, lambda model: HashEmbedder(dimension=64, max_tokens=48))


def _workbench(settings):
    return Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=48))


def test_a_workbench_on_each_engine_and_a_second_one_sees_its_work(catalog_settings, tmp_path):
    system, other_system = _system(catalog_settings), _system(catalog_settings)
    wb, other = Workbench(system), Workbench(other_system)
    try:
        token = other_system.stores.token()
        wb.create_store("notes")
        doc = tmp_path / "cats.md"
        doc.write_text("# Cats\n\nThe cat sits on the mat and purrs.\n\nCats eat fish every day.\n", encoding="utf-8")
        assert wb.ingest_file("notes", doc).ok
        assert wb.search("notes", "what do cats eat")[0].file_name == "cats.md"
        chats = ChatStore(system.catalog)
        sid = chats.create_session("About cats", stores=["notes"]).id
        qset = wb.evaluations.save_set("cats", [Question("what do cats eat", (parse_criterion("cats.md"),))])
        run = wb.evaluations.save_run(wb.evaluations.evaluate("notes", qset, k=3))

        assert _deadline_poll(lambda: other_system.stores.token() != token)  # the other instance notices
        assert "notes" in other.store_names()
        assert [f.file_name for f in other.store_files("notes")] == ["cats.md"]
        assert other.search("notes", "what do cats eat")[0].file_name == "cats.md"
        assert sid in [s.id for s in ChatStore(other_system.catalog).list_sessions()]
        assert other.evaluations.get_run(run.id).metrics == run.metrics
    finally:
        system.close()
        other_system.close()


@pytest.mark.processes
@pytest.mark.slow
def test_a_store_made_in_another_process_shows_here(pg_database, settings):
    """Issue 26: a store created in one process shows in another within a second (the version row
    ``catalog_changes``, read by every change check). Measured from the other process's commit to
    the first check here that sees it, while this process polls as a page rerun would."""
    from tests.helpers.pg import pg_catalog_settings

    pg = pg_catalog_settings(settings)
    system = _system(pg)
    wb = Workbench(system)
    try:
        assert wb.store_names() == []
        token = system.stores.token()
        script = textwrap.dedent(f"""
            import sys, time
            from knowledge.catalog import Catalog
            c = Catalog.from_url({pg.catalog.url!r})
            c.change_token()  # connected: the commit below is the only thing timed
            c.put_store("from-there", "default", "memory", "m", 8, "cosine")
            print(c.dialect, time.time(), flush=True)
            sys.stdin.read()  # stay alive (and connected) until this test has looked
        """)
        other = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            seen_at = None
            deadline = time.monotonic() + 120
            while seen_at is None and time.monotonic() < deadline and other.poll() is None:
                if system.stores.token() != token:
                    seen_at = time.time()
                else:
                    time.sleep(0.05)
            dialect, committed_at = other.stdout.readline().split()
        finally:
            _out, err = other.communicate("", timeout=60)
        assert dialect == "postgresql" and seen_at is not None, err
        delay = seen_at - float(committed_at)
        assert delay < 1.0, f"seen {delay:.3f} s after the other process's commit"
        assert "from-there" in wb.store_names()
        print(
            f"a store made in another process seen here {max(delay, 0.0) * 1000:.0f} ms after its commit returned"
            f" ({delay * 1000:+.1f} ms)"
        )
    finally:
        system.close()


def test_a_bundle_exports_and_imports_on_a_postgresql_catalog(pg_database, settings, tmp_path):
    from tests.helpers.pg import pg_catalog_settings

    wb = _workbench(pg_catalog_settings(settings))
    try:
        wb.create_store("notes")
        doc = tmp_path / "bread.md"
        doc.write_text("# Bread\n\nKnead the dough for ten minutes, then let it rise.\n", encoding="utf-8")
        assert wb.ingest_file("notes", doc).ok
        bundle = tmp_path / "notes.knowledge"
        wb.portable.export_store("notes", bundle)
        wb.portable.import_bundle(bundle, as_name="copy")
        assert [f.file_name for f in wb.store_files("copy")] == ["bread.md"]
        assert wb.search("copy", "how long to knead")[0].file_name == "bread.md"
        with pytest.raises(Exception, match="pg_dump") as info:
            wb.portable.backup(tmp_path / "all.zip")
        assert "Traceback" not in str(info.value)
    finally:
        wb.close()


# -- PostgreSQL: migrations, outages, settings --------------------------------------------------------
@pytest.mark.fresh_catalog
def test_two_catalogs_starting_at_once_migrate_once(pg_database, settings):
    from tests.helpers.pg import pg_catalog_settings

    url = pg_catalog_settings(settings).catalog.url
    results: list[object] = []

    catalogs = [Catalog.from_url(url) for _ in range(4)]

    def start(catalog: Catalog) -> None:
        try:
            results.append(catalog.schema_version())
        except Exception as exc:
            results.append(exc)

    threads = [threading.Thread(target=start, args=(c,)) for c in catalogs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert results == [len(MIGRATIONS)] * 4
        with catalogs[0].cursor() as cur:
            assert cur.execute("SELECT count(*) FROM schema_version").fetchone()[0] == len(MIGRATIONS)
    finally:
        for c in catalogs:
            c.close()


def test_a_lost_connection_is_replaced(pg_database, settings):
    import psycopg

    from tests.helpers.pg import pg_catalog_settings

    url = pg_catalog_settings(settings).catalog.url
    catalog = Catalog.from_url(url, pool_max_size=2)
    catalog.put_store("s", "default", "memory", "m", 8, "cosine")
    with psycopg.connect(url, autocommit=True) as admin:  # the server drops every catalog connection
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    assert [r.name for r in catalog.list_stores()] == ["s"]
    catalog.close()


def test_an_unreachable_server_is_named_without_the_password():
    catalog = Catalog.from_url("postgresql://me:s3cret-pw@127.0.0.1:9/kn", connect_timeout=1)
    with pytest.raises(BackendUnavailable) as info:
        catalog.list_stores()
    msg = str(info.value)
    assert "127.0.0.1:9/kn" in msg and "catalog.url" in msg and "s3cret-pw" not in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_the_setting_takes_a_postgresql_url_only(monkeypatch, tmp_path):
    monkeypatch.setenv("KNOWLEDGE_CATALOG__URL", "postgresql://u@db.example:5432/kn")
    s = load_settings(data_dir=tmp_path)
    assert s.catalog.url == "postgresql://u@db.example:5432/kn"
    assert Catalog.from_settings(s).dialect == "postgresql"
    monkeypatch.delenv("KNOWLEDGE_CATALOG__URL")
    default = load_settings(data_dir=tmp_path)
    assert default.catalog.url is None and Catalog.from_settings(default).path == default.catalog_path
    with pytest.raises(ConfigError, match="postgresql://"):
        load_settings(data_dir=tmp_path, catalog={"url": "mysql://x"})


@pytest.mark.slow
def test_a_synced_folder_is_kept_in_the_catalog_and_another_workbench_sees_it(catalog_settings, tmp_path):
    """Issue 26 moves the synced folders with the rest of the catalog: a folder synced through one
    workbench is listed, with its last plan, by another on the same catalog, and the next plan there
    finds nothing to do."""
    from knowledge.sync import folder_key

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nThe cat sits on the mat and purrs.\n", encoding="utf-8")
    (docs / "bread.md").write_text("# Bread\n\nKnead the dough for ten minutes.\n", encoding="utf-8")
    system, other_system = _system(catalog_settings), _system(catalog_settings)
    wb, other = Workbench(system), Workbench(other_system)
    try:
        sync = wb.syncs.folder("notes", docs)
        report = sync.apply(sync.plan())
        assert not report.failed and report.counts()["added"] == 2
        [folder] = other_system.catalog.synced_folders("notes")
        assert folder.folder == folder_key(docs) and folder.last_sync is not None
        assert folder.last_plan["added"] == 2 and folder.last_plan["failed"] == 0
        assert sorted(n.name for n in other.file_names_of("notes")) == ["bread.md", "cats.md"]
        assert other.syncs.folder("notes", docs).plan().counts()["unchanged"] == 2
        assert other.syncs.forget("notes", str(docs)) and system.catalog.synced_folders("notes") == []
    finally:
        system.close()
        other_system.close()
