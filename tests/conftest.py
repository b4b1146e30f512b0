"""Shared fixtures (what is not a fixture lives in tests/helpers/).

Tests are isolated from whatever happens to be on the machine: every test runs with no
``KNOWLEDGE_*`` variables but a data folder of its own, and with the working directory in a temp
folder (so a ``knowledge.toml`` or ``data/`` of the developer's is never read).

Markers by kind (pyproject.toml declares them): a test that uses the session's PostgreSQL (``pg_server``,
directly or through ``pg_database``, ``pgvector_settings``, the ``postgresql``/``pgvector`` parameters of
``catalog_dialect``, ``backend_name`` and ``file_store_settings``, or a server of its own: ``own_postgres``)
is marked ``postgres`` here, and one that uses the moto server (``s3_server``, the ``s3`` parameter) ``s3``,
so the mark cannot be forgotten; a test parametrized with ``"postgresql"``/``"pgvector"`` or ``"s3"`` (a
backend chosen by name, whose fixture it requests with ``request.getfixturevalue``) is marked the same way.
``processes``, ``browser``, ``model`` and ``slow`` are written on the tests.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from knowledge.catalog.duck import DuckEngine
from knowledge.catalog.schema import migrate
from knowledge.chat import Chats
from knowledge.config import Settings, load_settings
from knowledge.system import System
from knowledge.vectorstore.base import VectorBackend
from knowledge.workbench import Workbench
from tests.helpers import pg
from tests.helpers.backends import BACKEND_FIXTURES, CONTRACT_BACKENDS
from tests.helpers.env import CORPUS, CORPUS_TIMEOUT_S, REPO, TEST_SCRYPT_N, isolate, memory_temp_root
from tests.helpers.s3 import moto_server

#: Fixtures whose users get a marker of their kind (see the module docstring).
_KIND_OF_FIXTURE = {"pg_server": "postgres", "own_postgres": "postgres", "s3_server": "s3", "own_moto": "s3"}
#: Parameter values that name a backend of that kind.
_KIND_OF_PARAM = {"postgresql": "postgres", "pgvector": "postgres", "s3": "s3"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The markers of a test's kind from the fixtures it uses; and the tests using ``corpus_store`` get
    :data:`CORPUS_TIMEOUT_S` instead of the ini's default."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        kinds = {kind for fixture, kind in _KIND_OF_FIXTURE.items() if fixture in names}
        params = getattr(getattr(item, "callspec", None), "params", {})
        kinds |= {_KIND_OF_PARAM[v] for v in params.values() if isinstance(v, str) and v in _KIND_OF_PARAM}
        for kind in sorted(kinds):
            if item.get_closest_marker(kind) is None:
                item.add_marker(kind)
        if "corpus_store" in names:
            item.add_marker(pytest.mark.timeout(CORPUS_TIMEOUT_S))


def pytest_configure(config: pytest.Config) -> None:
    """The tests' temp files -- ``tmp_path`` and every ``tempfile`` folder, the PostgreSQL and S3 servers'
    data among them -- live in memory where the machine has a tmpfs with room (:func:`memory_temp_root`):
    a run creates and deletes some hundred thousand files, and on this machine's ext4 creating an inode
    (``ext4_create``) and the checkpoints' ``fsync`` took a fifth of the inner loop's CPU. Set
    ``PYTEST_DEBUG_TEMPROOT`` (pytest's own variable) to choose the folder yourself. Set here, before
    xdist starts its workers, which inherit it."""
    root = memory_temp_root()
    if root is not None:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = os.environ["TMPDIR"] = root
        tempfile.tempdir = None  # tempfile reads TMPDIR again


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """The test process exits without collecting the session's objects: ``gc.freeze`` moves them out of
    the collector's reach, so the interpreter's final collection does not walk the million objects a
    worker's run leaves (seconds per worker at the end of the inner loop). What holds a resource is
    closed by the fixtures, or by the ``atexit`` handlers, which still run."""
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _one_default_ssl_context() -> Iterator[None]:
    """The httpx clients of the tests (``httpx.get``, TestClient's; and the openai and mcp clients', which
    use ``httpx2``) share an SSL
    context per set of options: httpx loads a CA bundle into a new context per client
    (``load_verify_locations``, tens of ms of CPU each), and the API tests make hundreds of clients
    that never speak TLS. The options are ``verify`` (``True``, ``False`` or a CA file, with its size
    and modification time), ``trust_env`` and the ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` it reads; a
    client certificate or a context of the caller's own is made as httpx makes it."""
    import httpx._transports.default as transports
    import httpx2._transports.default as transports2  # the openai and mcp clients' httpx

    def shared_by_options(made: Callable[..., Any]) -> Callable[..., Any]:
        shared: dict[tuple, Any] = {}

        def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
            if cert is not None or not isinstance(verify, (bool, str)):
                return made(verify=verify, cert=cert, trust_env=trust_env)
            ca = os.stat(verify) if isinstance(verify, str) else None
            key = (
                verify,
                ca and (ca.st_size, ca.st_mtime_ns),
                trust_env,
                trust_env and os.environ.get("SSL_CERT_FILE"),
                trust_env and os.environ.get("SSL_CERT_DIR"),
            )
            if key not in shared:
                shared[key] = made(verify=verify, cert=cert, trust_env=trust_env)
            return shared[key]

        return create_ssl_context

    with pytest.MonkeyPatch.context() as mp:
        for module in (transports, transports2):
            mp.setattr(module, "create_ssl_context", shared_by_options(module.create_ssl_context))
        yield


@pytest.fixture(autouse=True)
def _cheap_password_hashes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Password hashes at :data:`~tests.helpers.env.TEST_SCRYPT_N`, unless the test is marked
    ``product_scrypt``."""
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
    """Isolated (:func:`~tests.helpers.env.isolate`); and the app run by AppTest (no server) ingests in
    worker threads of the test's process (``ingest.worker_process = false``), where the page tests watch
    each file go in. The app's worker process, its default, is tested with real processes in
    tests/service/test_worker_process.py and in the browser (tests/browser/test_browser_worker.py)."""
    isolate(monkeypatch, tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("KNOWLEDGE_INGEST__WORKER_PROCESS", "false")


@pytest.fixture(scope="session")
def _migrated_catalog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty DuckDB catalog brought to the newest schema version by :func:`knowledge.catalog.schema.migrate`,
    made once per test process."""
    path = tmp_path_factory.mktemp("catalog-template") / "catalog.duckdb"
    conn = duckdb.connect(str(path))
    try:
        migrate(conn, "duckdb")
    finally:
        conn.close()
    return path


@pytest.fixture(autouse=True)
def _catalogs_from_a_template(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, _migrated_catalog: Path
) -> None:
    """A DuckDB catalog the test's process creates starts as a copy of :func:`_migrated_catalog` -- the
    file-level analogue of PostgreSQL's ``CREATE DATABASE ... TEMPLATE`` that test suites use -- unless
    the test is marked ``fresh_catalog``. Migrating a new file costs ~60 ms of CPU (DuckDB's DDL), the copy
    ~1 ms, and the suite creates some 1,700 catalogs. The copy is linked into place, so a process of the
    test's that created the file first keeps its own; the migrations themselves run from nothing in the
    ``fresh_catalog`` tests, in every process a test starts, and on an older file in
    tests/service/test_catalog_migrations.py."""
    if request.node.get_closest_marker("fresh_catalog") is not None:
        return
    opened = DuckEngine._open

    def _open(engine: DuckEngine) -> duckdb.DuckDBPyConnection:
        if not engine.path.exists():
            part = engine.path.with_name(f".{engine.path.name}.{os.getpid()}.template")
            with contextlib.suppress(OSError):  # a folder it cannot write: the product's own path says so
                engine.path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(_migrated_catalog, part)
                with contextlib.suppress(FileExistsError):
                    os.link(part, engine.path)
            with contextlib.suppress(OSError):
                part.unlink()
        return opened(engine)

    monkeypatch.setattr(DuckEngine, "_open", _open)


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


@pytest.fixture
def site() -> Iterator[Any]:
    """A small web site on a free loopback port (:class:`tests.helpers.web.Site`), closed after the test."""
    from tests.helpers.web import Site

    s = Site()
    yield s
    s.close()


# -- PostgreSQL (tests/helpers/pg.py) ----------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """One embedded PostgreSQL + pgvector server for the session, over loopback TCP; its URL. Under CI=true
    a server that cannot start fails the run; elsewhere the PostgreSQL tests skip."""
    root = pg.pg_folder()
    url = pg.start_embedded(root / "postgres")
    pg.fast_throwaway_server(url)
    pg.STATE["url"] = url
    try:
        yield url
    finally:
        pg.STATE["url"], pg.STATE["template_made"] = None, False
        pg.stop_server(root)


@pytest.fixture
def pg_database(request: pytest.FixtureRequest, pg_server: str) -> Iterator[None]:
    """Drops the databases a test created (function scope: tests never see each other's tables). They start
    as copies of a database with the catalog migrated (:data:`tests.helpers.pg.TEMPLATE`), or empty where
    the test is marked ``fresh_catalog``."""
    before = set(pg.STATE["databases"])
    pg.STATE["template"] = request.node.get_closest_marker("fresh_catalog") is None
    yield
    new = pg.STATE["databases"] - before
    if new:
        pg.drop_databases(pg_server, new)


@pytest.fixture
def pgvector_settings(pg_database: None, settings: Settings) -> Callable[..., Settings]:
    """``make(**options) -> Settings`` for a pgvector backend on this test's own database, with
    ``vector_store.options.pgvector = options``."""
    return lambda **options: pg.pgvector_settings(settings, **options)


@pytest.fixture
def own_postgres() -> Iterator[Any]:
    """A PostgreSQL server of this test's own (:class:`~tests.helpers.outage.OwnServer`), which the test
    stops and starts; closed after the test."""
    from tests.helpers.outage import OwnServer

    server = OwnServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=["duckdb", pytest.param("postgresql", marks=pytest.mark.postgres)])
def catalog_dialect(request: pytest.FixtureRequest) -> str:
    """Each engine of the catalog in turn (PostgreSQL: the ``pg_server``, a fresh database)."""
    if request.param == "postgresql":
        request.getfixturevalue("pg_database")
    return request.param


@pytest.fixture
def catalog_settings(settings: Settings, catalog_dialect: str) -> Settings:
    """``settings`` whose catalog is the engine under test (``catalog_dialect``)."""
    return pg.pg_catalog_settings(settings) if catalog_dialect == "postgresql" else settings


# -- the backends every contract test runs against (tests/helpers/backends.py) ----------------------

_BACKEND_PARAMS = [
    pytest.param(name, marks=pytest.mark.postgres) if name == "pgvector" else name for name in sorted(CONTRACT_BACKENDS)
]


@pytest.fixture(params=_BACKEND_PARAMS)
def backend_name(request: pytest.FixtureRequest) -> str:
    if request.param in BACKEND_FIXTURES:
        request.getfixturevalue(BACKEND_FIXTURES[request.param])
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


# -- the shared corpus -------------------------------------------------------------------------------


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


# -- plugins: the entry points of this checkout ------------------------------------------------------


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


# -- file stores: the backends the file-store contract runs against (tests/helpers/s3.py) -----------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """A real S3-protocol server for the session: moto's server mode (``moto_server``) as a child
    process on a free port; its endpoint URL. Under CI=true a server that cannot start fails the run;
    elsewhere the s3 tests skip."""
    with moto_server() as server:
        yield server.endpoint


_FILE_STORE_PARAMS = [
    "filesystem",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.fixture(params=_FILE_STORE_PARAMS)
def file_store_settings(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """Settings whose ``file_store`` is the backend under test: the filesystem default, PostgreSQL
    (a fresh database on ``pg_server``) or S3 (a fresh bucket on ``s3_server``)."""
    from tests.helpers.s3 import s3_file_store_settings

    if request.param == "postgresql":
        request.getfixturevalue("pg_database")
        return pg.postgres_file_store_settings(settings)
    if request.param == "s3":
        return s3_file_store_settings(settings, request.getfixturevalue("s3_server"))
    return settings


# -- a person's faces over the System a test builds ------------------------------------------------
# A test module defines ``system`` (a knowledge.system.System over its settings, closed on teardown);
# these give the local admin's Workbench and the chats' shared state over it.


@pytest.fixture
def wb(system: System) -> Workbench:
    """The local admin's :class:`~knowledge.workbench.Workbench` over the module's ``system``."""
    return Workbench(system)


@pytest.fixture
def chats(system: System) -> Chats:
    """The chats' shared state (:class:`~knowledge.chat.Chats`) over the module's ``system``."""
    return Chats(system)
