"""PostgreSQL's ``max_connections`` against the pools of the product's processes (issue 39: six
processes of 24 connections each asked more of a server that allows 100): the arithmetic of one
process's pools, the processes counted by their connections' ``application_name`` on the real
server, and the warning in words when they do not fit -- logged by ``python -m knowledge worker``
at its start."""

from __future__ import annotations

import logging
import os
import socket

import psycopg
import pytest

from knowledge.catalog import Catalog
from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.service.connections import (
    check_connections,
    connection_budget,
    name_this_process,
    process_pools,
)
from tests.helpers.pg import pg_catalog_settings

URL = "postgresql://knowledge@db.internal:5432/knowledge"


def test_one_process_pools_are_counted_on_the_catalog_server_only(tmp_path):
    embedded = load_settings(data_dir=tmp_path)
    assert process_pools(embedded) == ()
    team = load_settings(
        data_dir=tmp_path,
        catalog={"url": URL, "pool_max_size": 5},
        vector_store={"backend": "pgvector", "url": URL, "options": {"pgvector": {"pool_max_size": 6}}},
        file_store={"backend": "postgresql"},
    )
    assert [(p.setting, p.size) for p in process_pools(team)] == [
        ("catalog.pool_max_size", 5),
        ("vector_store.options.pgvector.pool_max_size", 6),
        ("", 8),
    ]
    elsewhere = team.model_copy(
        update={
            "vector_store": team.vector_store.model_copy(update={"url": "postgresql://k@vectors.internal/k"}),
            "file_store": team.file_store.model_copy(update={"backend": "s3"}),
        }
    )
    assert [p.setting for p in process_pools(elsewhere)] == ["catalog.pool_max_size"]  # other servers: theirs


def _settings(settings, **catalog):
    pg = pg_catalog_settings(settings)
    return pg.model_copy(update={"catalog": pg.catalog.model_copy(update=catalog)})


def test_the_server_max_connections_and_the_processes_connected_are_read(settings, pg_database, monkeypatch, caplog):
    monkeypatch.setenv("PGAPPNAME", "")  # restored after: this test names its own process
    me = name_this_process("test")
    assert me == f"knowledge test {socket.gethostname()}:{os.getpid()}"[:63]
    small = _settings(settings, pool_max_size=2)
    catalog = Catalog.from_settings(small)
    try:
        with catalog.cursor() as cur:
            assert cur.execute("SELECT current_setting('application_name')").fetchone()[0] == me
        with psycopg.connect(small.catalog.url, autocommit=True) as admin:
            shown = int(admin.execute("SHOW max_connections").fetchone()[0])
        with psycopg.connect(small.catalog.url, application_name="knowledge worker elsewhere:41") as other:
            other.execute("SELECT 1")
            budget = connection_budget(catalog, small)
            assert budget is not None
            assert budget.max_connections == shown and budget.reserved >= 0
            assert budget.processes >= 2  # this one and the "worker" connected above
            assert budget.per_process == 2 + 8  # the catalog's 2 and pgvector's default 8 (files: in a folder)
            assert budget.fits and "room for" in budget.message()

            with caplog.at_level(logging.INFO, logger="knowledge.service.connections"):
                assert check_connections(catalog, small) is not None
            assert [r.levelname for r in caplog.records] == ["INFO"]

            # pools that the server cannot give to every process connected: the warning, in words
            big = _settings(settings, pool_max_size=100).model_copy(
                update={"file_store": small.file_store.model_copy(update={"backend": "postgresql"})}
            )
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="knowledge.service.connections"):
                over = check_connections(catalog, big)
            assert over is not None and not over.fits and over.per_process == 100 + 8 + 8
            [record] = caplog.records
            assert record.levelname == "WARNING"
            text = record.getMessage()
            assert f"max_connections {shown}" in text and "catalog.pool_max_size" in text
            assert "Raise max_connections" in text and "Error" not in text
    finally:
        catalog.close()


def test_the_worker_command_warns_at_its_start(settings, pg_database, monkeypatch, caplog, tmp_path):
    """``python -m knowledge worker --once`` (in this process) logs the warning before it works."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(pg_catalog_settings(settings).catalog.url or "")
    query = urlencode({k: v for k, v in info.items() if k in ("host", "port", "password")})
    url = f"postgresql://{quote(str(info.get('user', 'postgres')))}@/{quote(str(info['dbname']))}?{query}"
    monkeypatch.setenv("PGAPPNAME", "")
    for key in list(os.environ):
        if key.startswith("KNOWLEDGE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path / "worker"))
    monkeypatch.setenv("KNOWLEDGE_CATALOG__URL", url)
    monkeypatch.setenv("KNOWLEDGE_CATALOG__POOL_MAX_SIZE", "100")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "pgvector")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__URL", url)
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-8")
    with caplog.at_level(logging.WARNING, logger="knowledge.service.connections"):
        assert main(["worker", "--once"]) == 0
    warned = [r.getMessage() for r in caplog.records if r.name == "knowledge.service.connections"]
    assert len(warned) == 1 and "each process may open 108" in warned[0]
    assert os.environ["PGAPPNAME"].startswith("knowledge worker ")


@pytest.mark.parametrize("name", ["my-etl", ""])
def test_an_operator_application_name_is_kept(monkeypatch, name):
    monkeypatch.setenv("PGAPPNAME", name)
    got = name_this_process("serve")
    assert got == (name or got) and (name or got.startswith("knowledge serve "))
