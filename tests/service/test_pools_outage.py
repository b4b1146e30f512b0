"""Every PostgreSQL pool survives a server restart (a server of the test's own, stopped with
``pg_ctl stop -m immediate`` long enough for psycopg_pool's reconnection back-off to grow): while
it is away each call is a ``BackendUnavailable`` naming the server; the first call after it is back
succeeds -- the catalog's, the postgresql file store's and the pgvector backend's pools."""

from __future__ import annotations

import pytest

from knowledge.catalog import Catalog
from knowledge.config import load_settings
from knowledge.errors import BackendUnavailable
from knowledge.filestore.postgresql import PostgresFileStore
from knowledge.vectorstore.pgvector import PgvectorBackend

pytestmark = pytest.mark.slow


class QuickFileStore(PostgresFileStore):
    connect_timeout = 2.0  # seconds a call waits for the pool (10 by default): a shorter test


@pytest.mark.processes
def test_each_pool_answers_the_first_call_after_a_restart(own_postgres, tmp_path):
    settings = load_settings(
        data_dir=tmp_path / "data",
        catalog={"url": own_postgres.url},
        vector_store={
            "backend": "pgvector",
            "url": own_postgres.url,
            "options": {"pgvector": {"connect_timeout": 2, "retries": 1}},
        },
        file_store={"backend": "postgresql"},
    )
    catalog = Catalog.from_url(own_postgres.url, connect_timeout=2)
    files = QuickFileStore(settings)
    vectors = PgvectorBackend(settings)
    try:
        saved = files.save("a.txt", "text/plain", b"kept across the restart")
        calls = {
            "catalog": catalog.schema_version,
            "file store": lambda: files.find(saved.id),
            "pgvector": vectors.list_collections,
        }
        before = {name: call() for name, call in calls.items()}

        own_postgres.stop()
        for _ in range(3):  # long enough for the pools' back-off to pass the connect timeouts
            for call in calls.values():
                with pytest.raises(BackendUnavailable, match=f"127.0.0.1:{own_postgres.port}/postgres"):
                    call()
        own_postgres.start()

        after = {name: call() for name, call in calls.items()}  # each the first call since the restart
        assert after == before
        with files.content(saved.id) as stream:
            assert stream.read() == b"kept across the restart"
    finally:
        vectors.close()
        files.close()
        catalog.close()
