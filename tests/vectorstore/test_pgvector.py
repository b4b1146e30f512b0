"""The pgvector backend on a real PostgreSQL + pgvector (the embedded server of the session).

The contract suite (tests/vectorstore/test_contract.py) runs on pgvector too; this module covers what is
particular to it: table names, indexes, filtered search in a big store, dimensions, connection loss,
NUL characters, settings, the embedded server and the Workbench end to end.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from knowledge.config import load_settings
from knowledge.errors import BackendUnavailable, ConfigError, DimensionMismatch, InvalidArgument
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.pgvector import REGISTRY, PgvectorBackend, table_name
from knowledge.vectorstore.store import Chunk, VectorStore
from tests.helpers.pg import admin, pg_folder

D = 8


def vecs(n: int, d: int = D, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def cosine_top(matrix: np.ndarray, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    m = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    s = m @ (q / np.linalg.norm(q))
    order = np.argsort(-s, kind="stable")[:k]
    return order, s[order]


# -- names -----------------------------------------------------------------------------------------

NAMES = [
    "team-notes",
    "Team Notes",
    "team notes",
    "Team-Notes",
    "Q3 (final)",
    "naïve",
    "naive",
    "x; drop table y;--",
    'a"; DROP TABLE y; --',
    "it's",
    "a" * 70,
    "b" * 70 + "日本",
    "日本語",
]


def test_store_names_are_safe_unique_and_never_inject(make):
    b = make()
    with admin(b) as c:
        c.execute("CREATE TABLE y (v int)")
        c.execute("INSERT INTO y VALUES (1)")
    for i, name in enumerate(NAMES):
        coll = b.collection(name)
        coll.ensure_collection(D)
        coll.upsert([Point(j, v, {"store": name}) for j, v in enumerate(vecs(i + 1, seed=i))])
    tables = {name: table_name(name) for name in NAMES}
    assert len(set(tables.values())) == len(NAMES)  # never collide, also not by case
    for t in tables.values():
        assert re.fullmatch(r"vs_[a-z0-9_]*_[0-9a-f]{12}", t), t
        assert len(t.encode()) <= 56  # + "_hnsw" stays within PostgreSQL's 63 bytes
    assert table_name("x; drop table y;--").startswith("vs_x_drop_table_y_")
    assert table_name("Team Notes") != table_name("team notes")
    with admin(b) as c:
        assert c.execute("SELECT v FROM y").fetchall() == [(1,)]  # nothing injected
        registry = dict(c.execute(sql.SQL("SELECT name, table_name FROM {}").format(sql.Identifier(REGISTRY))))
        real = {r[0] for r in c.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'vs\\_%'")}
    assert registry == tables  # the display name is kept exactly, beside its table
    # each store's table and its term statistics for BM25 (<table>_terms)
    assert real == set(tables.values()) | {t + "_terms" for t in tables.values()}
    assert b.list_collections() == sorted(NAMES)
    for i, name in enumerate(NAMES):
        coll = b.collection(name)
        assert coll.count() == i + 1
        hits = coll.search(vecs(1, seed=99)[0], limit=3)
        assert {h.payload["store"] for h in hits} == {name}
    b.collection("Team Notes").drop_collection()
    assert b.collection("team notes").count() == 3
    assert "Team Notes" not in b.list_collections()


def test_a_name_with_nul_is_refused(make):
    with pytest.raises(InvalidArgument, match="NUL"):
        make().collection("bad\x00name")


# -- indexes -------------------------------------------------------------------------------------


def test_a_bulk_load_builds_the_hnsw_index_once_at_the_end(make):
    b = make(exact_max_rows=50)
    c = b.collection("bulk")
    c.ensure_collection(16)
    data = vecs(200, 16, seed=5)
    with admin(b) as conn:

        def has_index() -> bool:
            return conn.execute("SELECT to_regclass(%s)", (f'"{c.table}_hnsw"',)).fetchone()[0] is not None

        with c.bulk_load():
            for start in range(0, 200, 40):
                c.upsert([Point(i, v, {"i": i}) for i, v in enumerate(data[start : start + 40], start)])
            assert not has_index() and c.count() == 200  # 200 > 50 rows, yet no index kept up per write
            assert len(c.search(data[7], limit=3)) == 3 and c.search(data[7], limit=1)[0].id == 7  # exact meanwhile
        assert has_index()  # built once, when the load ended
    assert c.search(data[123], limit=1)[0].id == 123
    small = b.collection("bulk-small")
    small.ensure_collection(16)
    with small.bulk_load():
        small.upsert([Point(i, v, {}) for i, v in enumerate(data[:10])])
    with admin(b) as conn:  # 10 <= 50 rows: still no index to maintain
        assert conn.execute("SELECT to_regclass(%s)", (f'"{small.table}_hnsw"',)).fetchone()[0] is None


@pytest.mark.parametrize(
    "distance,opclass",
    [("cosine", "vector_cosine_ops"), ("euclid", "vector_l2_ops"), ("dot", "vector_ip_ops"), ("manhattan", "vector_l1_ops")],
)
def test_hnsw_index_with_the_distance_opclass_once_past_exact_max_rows(make, distance, opclass):
    b = make(exact_max_rows=50)
    small, big = b.collection(f"small-{distance}"), b.collection(f"big-{distance}")
    small.ensure_collection(12, distance)
    big.ensure_collection(24, distance)  # stores of different dimensions side by side
    small.upsert([Point(i, v, {}) for i, v in enumerate(vecs(10, 12))])
    data = vecs(80, 24, seed=3)
    big.upsert([Point(i, v, {"i": i}) for i, v in enumerate(data[:40])])
    with admin(b) as c:

        def indexes(coll):
            return {
                r[0]: r[1]
                for r in c.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", (coll.table,))
            }

        assert f"{big.table}_hnsw" not in indexes(big)  # 40 <= 50: exact search, no index to maintain
        big.upsert([Point(i, v, {"i": i}) for i, v in enumerate(data[40:], 40)])
        defs = indexes(big)
        assert f"{big.table}_hnsw" in defs
        assert "USING hnsw" in defs[f"{big.table}_hnsw"] and opclass in defs[f"{big.table}_hnsw"]
        assert "jsonb_path_ops" in defs[f"{big.table}_gin"]
        assert f"{small.table}_hnsw" not in indexes(small)
    q = vecs(1, 24, seed=8)[0]
    hits = big.search(q, limit=5)  # through the index (80 > 50 rows)
    assert len(hits) == 5
    assert hits == sorted(hits, key=lambda h: h.score, reverse=distance in ("cosine", "dot"))


# -- filtered search in a big store ---------------------------------------------------------------


@pytest.mark.slow
def test_filtered_search_for_a_small_file_in_a_big_store_is_exact(make):
    """20,000 chunks of one file and 8 of another: k=5 filtered to the small file returns its 5 best,
    in the order and with the scores of an exact numpy search -- also when the small file's chunks
    are the worst matches of the whole store (an HNSW post-filter would find none of them)."""
    d = 32
    b = make()
    coll = b.collection("big")
    coll.ensure_collection(d)
    rng = np.random.default_rng(5)
    centre = rng.standard_normal(d).astype(np.float32)
    big = (centre + 0.3 * rng.standard_normal((20_000, d))).astype(np.float32)
    small = (-centre + 0.5 * rng.standard_normal((8, d))).astype(np.float32)  # far from the queries
    points = [Point(f"big:{i}", v, {"file_id": "big", "i": i}) for i, v in enumerate(big)]
    points += [Point(f"small:{i}", v, {"file_id": "small", "i": i}) for i, v in enumerate(small)]
    coll.upsert(points)
    with admin(b) as c:
        assert c.execute("SELECT to_regclass(%s)", (f'"{coll.table}_hnsw"',)).fetchone()[0] is not None
    for qi in range(10):
        if qi == 5:  # with statistics the decision also reads the planner's estimate of the filter
            with admin(b) as c:
                c.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(coll.table)))
        q = (centre + 0.3 * np.random.default_rng(100 + qi).standard_normal(d)).astype(np.float32)
        order, scores = cosine_top(small, q, 5)
        hits = coll.search(q, limit=5, where={"file_id": "small"})
        assert [h.id for h in hits] == [f"small:{i}" for i in order]
        np.testing.assert_allclose([h.score for h in hits], scores, rtol=1e-5, atol=1e-5)
        raw = coll.search(q, limit=5, raw_filter=sql.SQL("payload->>'file_id' = {}").format("small"))
        assert [h.id for h in raw] == [h.id for h in hits]
        broad = coll.search(q, limit=5, where={"file_id": "big"})  # 20,000 rows: the HNSW path
        assert len(broad) == 5 and all(h.payload["file_id"] == "big" for h in broad)
        assert [h.score for h in broad] == sorted((h.score for h in broad), reverse=True)
    assert len(coll.search(centre, limit=50, where={"file_id": "small"})) == 8


# -- dimensions ------------------------------------------------------------------------------------


def test_dimension_mismatch_is_refused_before_any_write(make):
    b = make()
    coll = b.collection("dims")
    coll.ensure_collection(16)
    coll.upsert([Point(i, v, {"file": "a"}) for i, v in enumerate(vecs(4, 16))])
    with pytest.raises(DimensionMismatch, match="prepared with 16 dimensions, but received embeddings of 17"):
        coll.upsert([Point("ok", vecs(1, 16)[0], {}), Point("bad", vecs(1, 17)[0], {})])
    with pytest.raises(DimensionMismatch):
        coll.replace({"file": "a"}, [Point("bad", vecs(1, 15)[0], {"file": "a"})])
    with pytest.raises(DimensionMismatch):
        coll.search(vecs(1, 32)[0], limit=3)
    with pytest.raises(DimensionMismatch):
        coll.ensure_collection(32)
    assert coll.count() == 4 and coll.count({"file": "a"}) == 4
    other = make().collection("dims")  # a second backend instance (another process) knows the size
    with pytest.raises(DimensionMismatch):
        other.upsert([Point("x", vecs(1, 8)[0], {})])
    wide = b.collection("wide")  # another store of the same database with another dimension
    wide.ensure_collection(384)
    wide.upsert([Point(1, vecs(1, 384)[0], {})])
    assert wide.info().size == 384 and coll.info().size == 16


# -- connection loss ------------------------------------------------------------------------------


def terminate_others(b: PgvectorBackend) -> int:
    with admin(b) as c:
        return len(
            c.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        )


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "per-operation"])
@pytest.mark.slow
def test_idempotent_operations_survive_killed_connections(make, pool):
    b = make(pool=pool)
    coll = b.collection("loss")
    coll.ensure_collection(D)
    data = vecs(20)
    coll.upsert([Point(i, v, {"file": "f"}) for i, v in enumerate(data)])
    q = data[3]
    for op in (
        lambda: coll.search(q, limit=1)[0].id == 3,
        lambda: coll.count() == 20,
        lambda: coll.upsert([Point(99, data[0], {"file": "g"})]) is None,
        lambda: coll.replace({"file": "g"}, [Point(98, data[1], {"file": "g"})]) is None,
        lambda: sorted(p.id for p in coll.retrieve([98, 99, 1])) == [1, 98],
    ):
        terminate_others(b)  # the pool's connections die under it
        assert op()
    assert coll.count() == 21


BLOCKER = """
CREATE FUNCTION knowledge_test_block() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.pid = '"f:5"' THEN PERFORM pg_advisory_xact_lock(4242); END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER knowledge_test_block BEFORE INSERT ON {table}
  FOR EACH ROW EXECUTE FUNCTION knowledge_test_block();
"""


def blocked_writer(c: psycopg.Connection, other_than: int = 0, timeout: float = 30.0) -> int:
    """The pid of the backend waiting on advisory lock 4242 (the writer stopped by the trigger)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = c.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted AND pid <> %s",
            (other_than,),
        ).fetchone()
        if row:
            return row[0]
        time.sleep(0.02)
    raise AssertionError("the writer never reached the blocking trigger")


@pytest.mark.parametrize("outcome", ["retried", "gave-up"])
def test_replace_killed_mid_transaction_is_never_half_written(make, outcome):
    """The connection of a replace dies after its DELETE and half of its INSERTs: readers saw the old
    file throughout; the retry writes the new one whole, or, when it dies too, the old one stays."""
    b = make(retries=1)
    coll = b.collection("mid")
    coll.ensure_collection(D)
    coll.upsert(
        [Point(f"f:{i}", v, {"file": "f", "v": 1}) for i, v in enumerate(vecs(10))]
        + [Point(f"g:{i}", v, {"file": "g"}) for i, v in enumerate(vecs(3, seed=1))]
    )
    errors: list[BaseException] = []
    with admin(b) as c:
        c.execute(BLOCKER.format(table=sql.Identifier(coll.table).as_string(c)))
        c.execute("SELECT pg_advisory_lock(4242)")
        new = [Point(f"f:{i}", v, {"file": "f", "v": 2}) for i, v in enumerate(vecs(10, seed=2))]

        def write():
            try:
                coll.replace({"file": "f"}, new)
            except BaseException as exc:
                errors.append(exc)

        t = threading.Thread(target=write)
        t.start()
        pid = blocked_writer(c)
        # mid-transaction: the DELETE and f:0..f:4 are done but not committed; readers see the old file
        assert {p.payload["v"] for p in coll.scroll(where={"file": "f"})} == {1}
        assert coll.count({"file": "f"}) == 10
        c.execute("SELECT pg_terminate_backend(%s)", (pid,))
        retry_pid = blocked_writer(c, other_than=pid)  # the retry reached the same point on a new connection
        if outcome == "retried":
            c.execute("SELECT pg_advisory_unlock(4242)")
        else:
            c.execute("SELECT pg_terminate_backend(%s)", (retry_pid,))
        t.join(30)
        assert not t.is_alive()
        c.execute("SELECT pg_advisory_unlock_all()")
    if outcome == "retried":
        assert errors == []
        assert {p.payload["v"] for p in coll.scroll(where={"file": "f"})} == {2}
    else:
        assert len(errors) == 1 and isinstance(errors[0], BackendUnavailable)
        assert "Lost the connection" in str(errors[0]) and "previous state" in str(errors[0])
        assert {p.payload["v"] for p in coll.scroll(where={"file": "f"})} == {1}
    assert coll.count({"file": "f"}) == 10 and coll.count({"file": "g"}) == 3


def test_an_unreachable_server_is_a_clear_error(settings, tmp_path):
    s = load_settings(
        data_dir=tmp_path / "data",
        vector_store={
            "backend": "pgvector",
            "url": f"postgresql://postgres@/postgres?host={tmp_path}/nowhere",
            "options": {"pgvector": {"connect_timeout": 2}},
        },
    )
    with pytest.raises(BackendUnavailable, match="Cannot connect to PostgreSQL") as err:
        PgvectorBackend(s)
    assert "vector_store.url" in str(err.value)


def test_a_server_without_pgvector_names_the_fix(make, pg_server):
    """A database where the user may not create the extension (pgvector is not a trusted one)."""
    b = make()
    with admin(b) as c:
        c.execute("DROP ROLE IF EXISTS knowledge_plain")
        c.execute("CREATE ROLE knowledge_plain LOGIN")
        c.execute("DROP DATABASE IF EXISTS knowledge_noext")
        c.execute("CREATE DATABASE knowledge_noext OWNER knowledge_plain")
    try:
        plain = load_settings(
            vector_store={
                "backend": "pgvector",
                "url": make_conninfo(pg_server, dbname="knowledge_noext"),
                "user": "knowledge_plain",
            }
        )
        with pytest.raises(BackendUnavailable) as err:
            PgvectorBackend(plain)
        msg = str(err.value)
        assert "pgvector" in msg and "CREATE EXTENSION vector" in msg and "embedded" in msg
    finally:
        with admin(b) as c:
            c.execute("DROP DATABASE IF EXISTS knowledge_noext WITH (FORCE)")
            c.execute("DROP ROLE IF EXISTS knowledge_plain")


# -- NUL characters ---------------------------------------------------------------------------------


def test_nul_characters_never_reach_postgres(make):
    b = make()
    coll = b.collection("nul")
    coll.ensure_collection(D)
    v = vecs(2)
    coll.upsert(
        [Point("id\x00one", v[0], {"text": "a\x00b", "nest\x00ed": {"k": ["x\x00y", 1]}}), Point(2, v[1], {"text": "plain"})]
    )
    got = coll.retrieve(["id\x00one"])  # ids are kept exactly (stored as escaped JSON text)
    assert [p.id for p in got] == ["id\x00one"]
    assert got[0].payload == {"text": "ab", "nested": {"k": ["xy", 1]}}
    assert [h.id for h in coll.search(v[0], limit=5, where={"text": "a\x00b"})] == ["id\x00one"]
    store = VectorStore(b.collection("nul-store"))
    store.replace_file("f\x00id", [Chunk("hello\x00 world", v[0], metadata={"lang": "e\x00n"})], file_name="n\x00.txt")
    hit = store.search(v[0], k=1)[0]
    assert (hit.text, hit.file_name, hit.metadata) == ("hello world", "n.txt", {"lang": "en"})


# -- settings ------------------------------------------------------------------------------------------


def test_options_from_the_environment_and_unknown_keys(monkeypatch, pgvector_settings):
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__OPTIONS__PGVECTOR__POOL", "false")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__OPTIONS__PGVECTOR__EF_SEARCH", "64")
    s = load_settings()
    target = pgvector_settings()
    s = s.model_copy(update={"vector_store": s.vector_store.model_copy(update={"url": target.vector_store.url})})
    with PgvectorBackend(s) as b:
        assert (b.options.pool, b.options.ef_search) == (False, 64)
        assert "connection per operation" in repr(b)
        b.collection("env").ensure_collection(D)
        assert b.list_collections() == ["env"]
    bad = target.model_copy(
        update={"vector_store": target.vector_store.model_copy(update={"options": {"pgvector": {"pool_size": 3}}})}
    )
    with pytest.raises(ConfigError, match="pool_size"):
        PgvectorBackend(bad)


# -- the embedded server -------------------------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.slow
def test_embedded_server_starts_is_reused_and_stops(pg_server):  # pg_server: skip where none can start
    from knowledge.vectorstore.pg_embedded import is_running, stop_embedded

    root = pg_folder()
    try:
        for url in (None, "embedded"):
            s = load_settings(data_dir=root / "data", vector_store={"backend": "pgvector", "url": url})
            with PgvectorBackend(s) as b1, PgvectorBackend(s) as b2:
                assert b1.embedded and b1.conninfo == b2.conninfo
                assert is_running(root / "data" / "postgres")
                if url is None:
                    b1.collection("kept").ensure_collection(D)
                assert b2.list_collections() == ["kept"]  # the data folder survives a restart
            assert stop_embedded(root / "data" / "postgres")
            assert not is_running(root / "data" / "postgres")
        # a process that exits stops its server cleanly (atexit)
        script = (
            "from knowledge.config import load_settings\n"
            "from knowledge.vectorstore.pgvector import PgvectorBackend\n"
            f"s = load_settings(data_dir={str(root / 'data')!r}, vector_store={{'backend': 'pgvector'}})\n"
            "b = PgvectorBackend(s); b.collection('child').ensure_collection(4); b.close()\n"
        )
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120, capture_output=True)
        assert not is_running(root / "data" / "postgres")
        log = (root / "data" / "postgres" / "log").read_text()
        assert log.rstrip().endswith("database system is shut down")
    finally:
        stop_embedded(root / "data" / "postgres")
        shutil.rmtree(root, ignore_errors=True)


# -- the Workbench end to end ----------------------------------------------------------------------


def test_workbench_on_a_pgvector_template(pgvector_settings, tmp_path):
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.service.templates import make_template
    from knowledge.workbench import Workbench

    s = pgvector_settings()
    s = s.model_copy(update={"vector_store": s.vector_store.model_copy(update={"backend": "memory"})})
    wb = Workbench(s, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=48))
    try:
        wb.save_template(
            make_template(
                name="pg", backend="pgvector", embedding_model="fake", max_chunk_size_tokens=40, chunk_overlap_tokens=8
            )
        )
        record = wb.create_store("notes", template="pg")
        assert record.backend == "pgvector"
        doc = tmp_path / "cats.md"
        doc.write_text("# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken.\n")
        result = wb.ingest_file("notes", doc)
        assert result.ok and result.chunks >= 2
        hits = wb.search("notes", "what do cats eat fish", k=3)
        assert hits[0].file_name == "cats.md" and "fish" in hits[0].text
        pg = wb.backend("pgvector")
        assert isinstance(pg, PgvectorBackend)
        assert pg.collection(record.collection).count() == result.chunks
        assert wb.backend("memory").list_collections() == []  # nothing went to the memory backend
    finally:
        wb.close()


# -- the Vector stores page ------------------------------------------------------------------------


def test_the_page_switches_a_template_to_pgvector(pgvector_settings, monkeypatch):
    from knowledge.workbench import Workbench
    from tests.helpers.app import fresh_caches, open_app, use_fake_model
    from tests.helpers.stores_page import open_tab

    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__URL", pgvector_settings().vector_store.url)
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        at = open_tab(open_app("pages/stores.py"), "Templates")
        form = {t.label: t for t in at.text_input if t.form_id == "template-form"}
        assert "pgvector" in form["Backend"].help
        form["Name"].input("on postgres")
        form["Backend"].input("pgvector")
        next(b for b in at.button if b.key == "FormSubmitter:template-form-Save template").click().run()
        assert not at.exception
        assert any("Saved the template on postgres" in s.value for s in at.success)
        wb = Workbench(load_settings())
        try:
            assert wb.template("on postgres").backend == "pgvector"
            wb.create_store("pg notes", template="on postgres")
            wb.ingest_file("pg notes", b"The cat sits on the mat.", "cats.txt")
            assert wb.search("pg notes", "cat on a mat", k=1)[0].file_name == "cats.txt"
        finally:
            wb.close()
        open_tab(at, "Stores")
        stores = next(d.value for d in at.dataframe if "backend" in d.value.columns and "store" in d.value.columns)
        assert dict(zip(stores["store"], stores["backend"]))["pg notes"] == "pgvector"


@pytest.mark.processes
@pytest.mark.slow
def test_a_killed_user_of_the_embedded_server_does_not_keep_it_running(pg_server):
    """A process killed with SIGKILL never runs its atexit; the next process that exits stops the
    server all the same."""
    from knowledge.vectorstore.pg_embedded import is_running

    root = pg_folder()
    folder = root / "data" / "postgres"
    script = (
        "import os, sys\n"
        "from knowledge.config import load_settings\n"
        "from knowledge.vectorstore.pgvector import PgvectorBackend\n"
        f"s = load_settings(data_dir={str(root / 'data')!r}, vector_store={{'backend': 'pgvector'}})\n"
        "b = PgvectorBackend(s); b.close()\n"
        "if sys.argv[1] == 'kill': os.kill(os.getpid(), 9)\n"
    )
    try:
        killed = subprocess.run([sys.executable, "-c", script, "kill"], timeout=120, capture_output=True)
        assert killed.returncode == -9
        assert is_running(folder)  # nobody stopped it
        subprocess.run([sys.executable, "-c", script, "exit"], check=True, timeout=120, capture_output=True)
        assert not is_running(folder)
    finally:
        from knowledge.vectorstore.pg_embedded import stop_embedded

        stop_embedded(folder)
        if is_running(folder):  # the test failed: stop the server by hand (fast shutdown)
            import os
            import signal

            os.kill(int((folder / "postmaster.pid").read_text().split()[0]), signal.SIGINT)
            time.sleep(2)
        shutil.rmtree(root, ignore_errors=True)
