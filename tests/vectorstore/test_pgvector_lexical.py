"""BM25 inside PostgreSQL (issue 15): tsvector + GIN + term statistics written in the same
transaction as the vectors; the same ranking as the in-process BM25; old stores built on first use;
a killed transaction leaves vectors and lexical index agreeing."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest
from psycopg import sql

from knowledge.errors import BackendUnavailable
from knowledge.service.fusion import LexicalIndex
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.pgvector import REGISTRY
from tests.helpers.pg import admin

D = 8
DOCS = [
    ("a", "Recoverable errors with Result", "Most errors are not serious enough to stop the program."),
    ("a", "Unrecoverable errors with panic!", "Sometimes bad things happen and panic! stops the program."),
    ("b", "Iterating over vectors", "Use a for loop to iterate over the elements of a vector."),
    ("b", "Hash maps", "A HashMap stores keys and values; iterating over a hash map is possible too."),
    ("c", "Lifetimes", "Every reference has a lifetime; the borrow checker compares lifetimes. It's 'quoted'."),
    ("c", "中文", "向量数据库支持混合检索，关键词检索与向量检索结合。"),
]


def points(docs=DOCS, version=0):
    rng = np.random.default_rng(version)
    return [
        Point(
            f"{f}:{i}",
            rng.standard_normal(D).astype(np.float32),
            {"file_id": f, "heading": h, "text": t, "page": i % 3, "version": version},
        )
        for i, (f, h, t) in enumerate(docs)
    ]


def stats(b, coll) -> dict[str, int]:
    with admin(b) as c:
        return {
            t: int(n)
            for t, n in c.execute(
                sql.SQL("SELECT term, df FROM {} WHERE df <> 0").format(sql.Identifier(coll.table + "_terms"))
            ).fetchall()
        }


def expected_stats(pts) -> dict[str, int]:
    from knowledge.text.analysis import analyzer
    from knowledge.vectorstore.lexical import indexed_text as _indexed_text

    out: dict[str, int] = {}
    total = 0
    for p in pts:
        terms = analyzer().terms(_indexed_text(p.payload))
        total += len(terms)
        for t in set(terms):
            out[t] = out.get(t, 0) + 1
    out[" docs"] = len(pts)
    out[" length"] = total
    return {t: n for t, n in out.items() if n}


@pytest.mark.parametrize(
    "query",
    [
        "panic",
        "iterating over a vector",
        "borrow checker lifetimes",
        "errors program",
        "向量检索",
        "quoted",
        "hash map keys",
    ],
)
def test_same_ranking_and_scores_as_the_in_process_bm25(make, query):
    coll = make().collection("lex")
    coll.ensure_collection(D)
    coll.upsert(points())
    expected = LexicalIndex.from_points(points()).search(query, 10)
    got = coll.lexical_search(query, 10)
    assert [h.id for h in got] == [h.id for h in expected]
    assert [h.score for h in got] == pytest.approx([h.score for h in expected], rel=1e-4)


def test_writes_keep_rows_and_statistics_in_step(make):
    b = make()
    coll = b.collection("lex")
    coll.ensure_collection(D)
    coll.upsert(points())
    assert stats(b, coll) == expected_stats(points())
    new_a = [Point("a:9", np.ones(D, np.float32), {"file_id": "a", "text": "Ferris the crab"})]
    coll.replace({"file_id": "a"}, new_a)
    coll.upsert([Point("b:2", np.ones(D, np.float32), {"file_id": "b", "text": "overwritten: crab"})])
    coll.remove(where={"file_id": "c"})
    live = (
        [p for p in points() if p.payload["file_id"] == "b" and p.id != "b:2"]
        + new_a
        + [Point("b:2", np.ones(D, np.float32), {"file_id": "b", "text": "overwritten: crab"})]
    )
    assert stats(b, coll) == expected_stats(live)
    assert {h.id for h in coll.lexical_search("crab", 5)} == {"a:9", "b:2"}
    assert coll.lexical_search("panic lifetimes", 5) == []
    assert [h.id for h in coll.lexical_search("crab", 5, where={"file_id": "b"})] == ["b:2"]


def test_a_store_of_before_gets_its_index_on_first_use_with_a_log_line(make, caplog):
    b = make()
    coll = b.collection("old")
    coll.ensure_collection(D)
    with admin(b) as c:  # what an older version left: no lexical columns, no statistics
        c.execute(sql.SQL("ALTER TABLE {} DROP COLUMN lex, DROP COLUMN lex_len").format(sql.Identifier(coll.table)))
        c.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(coll.table + "_terms")))
        c.execute(sql.SQL("UPDATE {} SET lexical = NULL WHERE name = 'old'").format(sql.Identifier(REGISTRY)))
    b2 = make()
    coll2 = b2.collection("old")
    coll2.upsert(points())  # written without a lexicon
    caplog.set_level(logging.WARNING)
    assert [h.id for h in coll2.lexical_search("panic", 5)] == ["a:1"]
    assert any("built it (6 rows analysed)" in r.getMessage() for r in caplog.records)
    assert stats(b2, coll2) == expected_stats(points())


def test_a_killed_write_leaves_vectors_and_index_agreeing(make):
    """The connection of a replace dies after its DELETE and part of its INSERTs: the rows, their
    lexical columns and the statistics are all rolled back together."""
    b = make(retries=0)
    coll = b.collection("mid")
    coll.ensure_collection(D)
    coll.upsert(points())
    before = stats(b, coll)
    with admin(b) as c:
        c.execute(
            sql.SQL(
                "CREATE FUNCTION knowledge_block() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN IF NEW.pid = '\"a:3\"' THEN PERFORM pg_advisory_lock(4243); END IF; RETURN NEW; END $$;"
                " CREATE TRIGGER knowledge_block BEFORE INSERT ON {} FOR EACH ROW EXECUTE FUNCTION knowledge_block()"
            ).format(sql.Identifier(coll.table))
        )
        c.execute("SELECT pg_advisory_lock(4243)")
        errors: list[BaseException] = []
        new = [Point(f"a:{i}", np.ones(D, np.float32), {"file_id": "a", "text": f"replacement crab {i}"}) for i in range(5)]
        t = threading.Thread(target=lambda: _catch(errors, coll.replace, {"file_id": "a"}, new))
        t.start()
        for _ in range(1500):
            row = c.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = 4243 AND NOT granted"
            ).fetchone()
            if row:
                break
            threading.Event().wait(0.02)
        assert row, "the writer never reached the trigger"
        c.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        t.join(30)
        c.execute("SELECT pg_advisory_unlock_all()")
    assert len(errors) == 1 and isinstance(errors[0], BackendUnavailable)
    assert stats(b, coll) == before
    assert [h.id for h in coll.lexical_search("panic", 5)] == ["a:1"]
    assert coll.lexical_search("crab", 5) == []


def _catch(errors, fn, *args):
    try:
        fn(*args)
    except BaseException as exc:
        errors.append(exc)


def test_candidates_start_from_the_rarest_terms(make):
    b = make(lexical_candidates=3)
    coll = b.collection("cap")
    coll.ensure_collection(D)
    docs = [("f", "", "common words here") for _ in range(10)] + [("g", "", "common rareword")]
    coll.upsert(points(docs))
    hits = coll.lexical_search("common rareword", 5)
    assert hits[0].id == "g:10"  # the rare term's rows are always scored
    assert len(hits) == 1  # the common term's 11 rows are past the cap of 3
    assert len(make(lexical_candidates=0).collection("cap").lexical_search("common rareword", 20)) == 11
