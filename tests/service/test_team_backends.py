"""Team mode and the per-machine backends (issue 26, item 5).

A shared catalog (PostgreSQL, ``catalog.url``) refuses new templates and stores on a backend whose
points only one machine reaches -- memory, Qdrant's local mode, the embedded PostgreSQL -- naming
the settings to use instead (``vector_store.backend``, ``vector_store.url``); a store of that kind
already in the catalog is listed with a note, refused on search and writes, and can still be moved
out or deleted. The embedded default (a DuckDB catalog) keeps the memory backend as before.
Through the service, the REST API's create-store and (in tests/app/test_app_stores.py) the app.
"""

from __future__ import annotations

import httpx
import openai
import pytest

from knowledge.catalog import DONE
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import MachineLocalBackend
from knowledge.service.templates import machine_local_reason, make_template
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.api import Served

MODEL = "fake/hash-16"
CATS = b"# Cats\n\nThe cat sits on the mat and purrs.\n\nCats eat fish every day.\n"


def _wb(settings) -> Workbench:
    return Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=16, max_tokens=48))


def _system(settings) -> System:
    return System(settings, lambda model: HashEmbedder(dimension=16, max_tokens=48))


def _with(settings, **vector_store):
    """``settings`` with ``vector_store.*`` changed (the embedding model: the fake one)."""
    return settings.model_copy(
        update={
            "vector_store": settings.vector_store.model_copy(update=vector_store),
            "embeddings": settings.embeddings.model_copy(update={"model": MODEL}),
        }
    )


@pytest.fixture
def team(pg_database, settings):
    """Settings in team mode: the catalog and the default template's vectors on PostgreSQL."""
    from tests.helpers.pg import pg_catalog_settings

    return _with(pg_catalog_settings(settings))


@pytest.fixture
def team_on_memory(team):
    """A shared catalog whose default template is left on the memory backend (the mistake)."""
    return _with(team, backend="memory", url=None)


def _says_what_to_set(message: str) -> None:
    assert "catalog.url" in message and "vector_store.backend" in message and "vector_store.url" in message
    assert "pgvector" in message and "Qdrant server" in message
    assert "Traceback" not in message


# -- refusing new per-machine templates and stores ----------------------------------------------------
def test_a_shared_catalog_refuses_a_store_on_the_memory_default_and_records_nothing(team_on_memory, tmp_path):
    wb = _wb(team_on_memory)
    try:
        problem = wb.shared_catalog_problem()
        assert problem is not None and "'default' template" in problem and "'memory'" in problem
        _says_what_to_set(problem)
        with pytest.raises(MachineLocalBackend) as info:
            wb.create_store("notes")
        _says_what_to_set(str(info.value))
        assert "this machine's folder" in str(info.value)
        doc = tmp_path / "cats.md"
        doc.write_bytes(CATS)
        with pytest.raises(MachineLocalBackend):  # the first upload says the same, before anything is written
            wb.ingest_file("notes", doc)
        assert wb.store_names(internal=True) == []
    finally:
        wb.close()


def test_a_shared_catalog_refuses_memory_qdrant_local_and_embedded_pgvector_templates(team):
    wb = _wb(team)
    try:
        assert wb.shared_catalog_problem() is None  # the team's default template is on a server
        for backend, settings, words in (
            ("memory", team, "this machine's folder"),
            ("qdrant", team, "Qdrant's local mode"),  # no URL: the folder data/qdrant
            ("pgvector", _with(team, url=None), "embedded PostgreSQL"),
        ):
            other = _wb(settings)
            try:
                with pytest.raises(MachineLocalBackend) as info:
                    other.save_template(make_template(name=f"on-{backend}", backend=backend, embedding_model=MODEL))
                _says_what_to_set(str(info.value))
                assert words in str(info.value) and f"'on-{backend}'" in str(info.value)
                assert f"on-{backend}" not in other.template_names()
            finally:
                other.close()
        # a Qdrant server by URL is a shared backend: its template is saved (nothing is contacted yet)
        by_url_system = _system(_with(team, qdrant_location="http://127.0.0.1:6333"))
        by_url = Workbench(by_url_system)
        try:
            by_url.save_template(make_template(name="on-qdrant-server", backend="qdrant", embedding_model=MODEL))
            assert "on-qdrant-server" in by_url.template_names()
            assert machine_local_reason(by_url.settings, by_url_system.catalog, "qdrant") is None
            assert machine_local_reason(by_url.settings, by_url_system.catalog, "pgvector") is None
        finally:
            by_url_system.close()
    finally:
        wb.close()


def test_the_embedded_default_keeps_the_memory_backend(settings, tmp_path):
    system = _system(_with(settings))
    wb = Workbench(system)
    try:
        assert system.catalog.dialect == "duckdb" and wb.settings.vector_store.backend == "memory"
        assert wb.shared_catalog_problem() is None
        assert machine_local_reason(wb.settings, system.catalog, "memory") is None
        wb.save_template(make_template(name="local", backend="memory", embedding_model=MODEL))
        wb.create_store("notes", "local")
        doc = tmp_path / "cats.md"
        doc.write_bytes(CATS)
        assert wb.ingest_file("notes", doc).ok
        assert wb.search("notes", "what do cats eat")[0].file_name == "cats.md"
        assert [s.note for s in wb.list_stores()] == [None]
    finally:
        system.close()


# -- a per-machine store already in a shared catalog ----------------------------------------------------
def _memory_store_in_shared_catalog(settings, team, tmp_path) -> None:
    """Store ``notes`` made on this machine's memory backend (a DuckDB catalog), then its record
    and files put into the shared catalog as an import by an older version would have."""
    local = _wb(_with(settings))
    doc = tmp_path / "cats.md"
    doc.write_bytes(CATS)
    try:
        assert local.ingest_file("notes", doc).ok
        record, files = local.get_store("notes"), local.file_records("notes")
    finally:
        local.close()
    shared = _system(team)
    try:
        shared.catalog.adopt_store(
            "notes", "default", "memory", record.embedding_model, record.dimension, record.distance, record.collection, files
        )
    finally:
        shared.close()


def test_a_memory_store_in_a_shared_catalog_is_listed_refused_on_use_and_can_be_moved_out(settings, team, tmp_path):
    _memory_store_in_shared_catalog(settings, team, tmp_path)
    wb = _wb(team)
    try:
        assert wb.store_names() == ["notes"]  # listing does not crash
        [summary] = wb.list_stores()
        assert summary.note is not None and "not searched or written" in summary.note and summary.files == 1
        _says_what_to_set(summary.note)
        for use in (
            lambda: wb.search("notes", "cats"),
            lambda: wb.ingest_file("notes", CATS, "more.md"),
            lambda: wb.vector_store("notes").list_files(),
        ):
            with pytest.raises(MachineLocalBackend) as info:
                use()
            assert "Store 'notes' is on the memory backend" in str(info.value)
        assert [f.status for f in wb.store_files("notes")] == [DONE]  # the refused upload wrote nothing
        # the way out, on the machine that holds its folder: move it to a shared template
        wb.save_template(make_template(name="team", backend="pgvector", embedding_model=MODEL))
        moved = wb.reembed("notes", "team")
        assert moved.backend == "pgvector"
        assert wb.search("notes", "what do cats eat")[0].file_name == "cats.md"
        assert [s.note for s in wb.list_stores()] == [None]
    finally:
        wb.close()


def test_a_memory_store_in_a_shared_catalog_can_be_deleted(settings, team, tmp_path):
    _memory_store_in_shared_catalog(settings, team, tmp_path)
    wb = _wb(team)
    try:
        wb.delete_store("notes")
        assert wb.store_names() == []
    finally:
        wb.close()


def test_a_memory_store_whose_folder_is_on_another_machine_cannot_be_moved_from_here(settings, team, tmp_path):
    _memory_store_in_shared_catalog(settings, team, tmp_path)
    here = _with(team)
    here = here.model_copy(update={"data_dir": tmp_path / "another-machine"})  # no memory folders here
    wb = _wb(here)
    try:
        wb.save_template(make_template(name="team", backend="pgvector", embedding_model=MODEL))
        with pytest.raises(MachineLocalBackend, match="This machine does not hold its folder"):
            wb.reembed("notes", "team")
        assert wb.get_store("notes").backend == "memory"  # left as it was
    finally:
        wb.close()


# -- the REST API ------------------------------------------------------------------------------------
def test_the_api_refuses_to_create_a_store_on_the_memory_default_of_a_shared_catalog(team_on_memory):
    from knowledge.server.app import create_app

    system = System(team_on_memory, embedder_factory=lambda model: HashEmbedder(dimension=16, max_tokens=48))
    try:
        with Served(create_app(system)) as base:
            client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)
            with pytest.raises(openai.BadRequestError) as info:
                client.vector_stores.create(name="notes")
            message = info.value.body["message"] if isinstance(info.value.body, dict) else str(info.value)
            _says_what_to_set(message)
            assert client.vector_stores.list().data == []
            answer = httpx.post(base + "/v1/vector_stores", json={"name": "notes"}, timeout=30)
            assert answer.status_code == 400 and "vector_store.url" in answer.json()["error"]["message"]
    finally:
        system.close()
