"""The catalog's DuckDB engine: one file, shared by the processes of one computer by taking turns.

DuckDB lets one process open a file for writing. This engine opens it on first use and closes it
after :data:`IDLE_CLOSE_SECONDS` without use. A process that finds the file held writes a *turn
request* (``<file>.turn``, touched every retry step of :data:`RETRY_SECONDS`); the holder, after an
operation or between two, gives the file up once it has had it for :data:`TURN_SECONDS` (at once if
idle), then waits up to :data:`YIELD_SECONDS` for the other process to get in before it asks back.
So a CLI batch using the catalog every second and the app share it; each hand-over costs a reopen
(a ``DETACH``, which checkpoints a write, and an ``ATTACH``: a few ms, see below). Inside :meth:`hold` the file
is kept. A process without this protocol holding the file, after ``lock_timeout`` seconds:
:class:`CatalogLocked`, naming the other process.

"Opening" the file is an ``ATTACH`` to the process's one in-memory DuckDB instance (:class:`_Instance`),
and closing it a ``DETACH``, which checkpoints the write-ahead log into the file and releases DuckDB's
file lock just as closing a connection does. A new DuckDB instance costs about 25 ms of CPU (it
registers DuckDB's built-in functions); an ``ATTACH`` about 3 ms. The engine's operations run on
cursors of that instance whose default database (``USE``) is the attached file, kept for reuse.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from knowledge.catalog.schema import CatalogCursor, migrate
from knowledge.errors import KnowledgeError

IDLE_CLOSE_SECONDS = 2.0
"""Seconds without use after which the catalog closes its DuckDB connection (another process may open it)."""
TURN_SECONDS = 0.25
"""Seconds a process keeps the file, once it has it, before it honours another's turn request."""
RETRY_SECONDS = 0.05
"""Seconds between two attempts to open a held file (each renews the turn request)."""
YIELD_SECONDS = 1.0
"""Seconds a process that gave the file up waits for the requester to take it, before it asks back."""
_FRESH_SECONDS = 4 * RETRY_SECONDS  # a request touched this recently is of a process still waiting


class CatalogLocked(KnowledgeError):
    """Another process holds the catalog's DuckDB file (and did not give it up in time)."""


class _Instance:
    """The process's one in-memory DuckDB instance and the catalog files attached to it, each under an
    alias (``catalog_<n>``) and counted: two engines on one file in one process share its attachment,
    as two ``duckdb.connect`` calls on one path share DuckDB's cached instance, and the file is detached
    when the last of them closes. A process forked from one that had the instance makes its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: duckdb.DuckDBPyConnection | None = None
        self._pid = 0
        self._files: dict[str, list] = {}  # real path -> [alias, engines using it]
        self._numbers = itertools.count(1)
        self._inherited: list[duckdb.DuckDBPyConnection] = []  # a parent's instance: never touched, never freed

    def _ready(self) -> duckdb.DuckDBPyConnection:
        if self._conn is None or self._pid != os.getpid():
            if self._conn is not None:
                self._inherited.append(self._conn)
            self._conn = duckdb.connect(":memory:")
            self._pid = os.getpid()
            self._files = {}
        return self._conn

    def attach(self, path: Path) -> str:
        """Attach the DuckDB file at ``path`` (created if absent); its key for :meth:`cursor` and
        :meth:`detach`. Raises duckdb.Error (``IOException`` naming the holder when another process
        has the file)."""
        key = os.path.realpath(path)
        with self._lock:
            conn = self._ready()
            if key in self._files:
                self._files[key][1] += 1
                return key
            alias = f"catalog_{next(self._numbers)}"
            literal = "'" + key.replace("'", "''") + "'"
            conn.execute(f"ATTACH {literal} AS {alias}")
            self._files[key] = [alias, 1]
            return key

    def detach(self, key: str) -> None:
        """One engine on the file is done with it; the last one detaches it (checkpoint, file lock
        released). A failed ``DETACH`` leaves it attached, to be used again by the next :meth:`attach`."""
        with self._lock:
            entry = self._files.get(key)
            if entry is None or self._pid != os.getpid() or self._conn is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                self._conn.execute(f"DETACH {entry[0]}")
                del self._files[key]

    def cursor(self, key: str) -> duckdb.DuckDBPyConnection:
        """A new connection to the instance whose default database is the attached file ``key``."""
        with self._lock:
            cur = self._ready().cursor()
            alias = self._files[key][0]
        cur.execute(f"USE {alias}")
        return cur


_INSTANCE = _Instance()


class DuckEngine:
    """The DuckDB file at ``path`` (see the module docstring); thread-safe, one lock per process."""

    dialect = "duckdb"

    def __init__(self, path: Path, lock_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.turn_file = self.path.with_name(self.path.name + ".turn")
        self._lock = threading.RLock()
        self._conn: duckdb.DuckDBPyConnection | None = None  # a cursor on the attached file; None: not attached
        self._spare: list[duckdb.DuckDBPyConnection] = []  # cursors on it ready for the next operation
        self._key = ""  # the attached file's key in _INSTANCE
        self._opened = 0.0
        self._last_used = 0.0
        self._busy = 0  # operations and holds in progress (re-entrant)
        self._gave_up = 0.0  # when the file was last given up on request
        self._closer: threading.Thread | None = None
        self._wake = threading.Event()
        self._migrated = False

    def describe(self) -> str:
        return str(self.path)

    # -- turns ----------------------------------------------------------------------------------
    def _request_age(self) -> float | None:
        """Seconds since another process last renewed its turn request; ``None`` without one."""
        try:
            st = os.stat(self.turn_file)
        except OSError:
            return None
        return max(0.0, time.time() - st.st_mtime)

    def _ask_for_turn(self) -> None:
        with suppress(OSError):  # a read-only folder: no turns, the lock timeout still applies
            self.turn_file.touch()

    def _turn_taken(self) -> None:
        with suppress(OSError):
            self.turn_file.unlink(missing_ok=True)

    def _should_give_up(self, now: float) -> bool:
        if self._conn is None or self._busy:
            return False
        if now - self._opened < TURN_SECONDS and now - self._last_used < RETRY_SECONDS:
            return False  # our turn is young and we are working: keep it a little
        age = self._request_age()
        return age is not None and age < _FRESH_SECONDS

    def _give_up(self) -> None:
        if self._conn is not None:
            self._close_file()
            self._gave_up = time.monotonic()

    # -- connection -----------------------------------------------------------------------------
    def _close_file(self) -> None:
        """Close this engine's cursors and detach the file (under ``self._lock``)."""
        for cur in self._spare:
            cur.close()
        self._spare = []
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            _INSTANCE.detach(self._key)

    def _open(self) -> duckdb.DuckDBPyConnection:
        """Attach the file (waiting for another process's turn as the module says); a cursor on it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._gave_up:  # let the process we gave the file to get in first
            until = self._gave_up + YIELD_SECONDS
            while time.monotonic() < until and (age := self._request_age()) is not None and age < _FRESH_SECONDS:
                time.sleep(RETRY_SECONDS / 5)
            self._gave_up = 0.0
        deadline = time.monotonic() + self.lock_timeout
        waited = False
        while True:
            try:
                self._key = _INSTANCE.attach(self.path)
            except duckdb.IOException as exc:
                msg = str(exc)
                if "lock" not in msg.lower():
                    raise KnowledgeError(f"The catalog {self.path} cannot be opened: {msg}") from exc
                if time.monotonic() >= deadline:
                    held = re.search(r"held in (.+?) \(PID (\d+)\)", msg)
                    who = f" by {held.group(1)} (PID {held.group(2)})" if held else ""
                    raise CatalogLocked(
                        f"The catalog {self.path} is in use{who}. DuckDB allows one writing process:"
                        " wait for the other command to finish, or use another data folder"
                        " (--data-dir / KNOWLEDGE_DATA_DIR), or a PostgreSQL catalog (catalog.url)."
                    ) from exc
                self._ask_for_turn()
                waited = True
                time.sleep(RETRY_SECONDS)
                continue
            if waited:
                self._turn_taken()
            self._opened = time.monotonic()
            return _INSTANCE.cursor(self._key)

    @contextmanager
    def cursor(self) -> Iterator[CatalogCursor]:
        with self._lock:
            if self._conn is None:
                self._conn = self._open()
                if not self._migrated:
                    migrate(self._conn, "duckdb")
                    self._migrated = True
                self._start_closer()
            cur = self._spare.pop() if self._spare else _INSTANCE.cursor(self._key)
            self._busy += 1
            done = False
            try:
                yield cur
                done = True
            finally:
                if done and self._conn is not None:
                    self._spare.append(cur)  # its statements committed (or were read-only): reusable
                else:
                    cur.close()  # an open transaction of a failed operation is rolled back
                self._busy -= 1
                self._last_used = now = time.monotonic()
                if self._busy == 0 and now - self._opened >= TURN_SECONDS and self._should_give_up(now):
                    self._give_up()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Keep the file open (no turn given away) until the block ends: several operations that
        must see no other process's write in between. Keep it short: the process's other threads wait."""
        with self.cursor():  # the process's lock, and an operation in progress, until the end
            yield

    def _start_closer(self) -> None:
        if self._closer is not None and self._closer.is_alive():
            return

        def run() -> None:
            while True:
                woken = self._wake.wait(RETRY_SECONDS)
                if not self._lock.acquire(timeout=RETRY_SECONDS):
                    continue  # an operation (or a hold) is running
                try:
                    if self._conn is None:  # closed by close(); the next use starts a new closer
                        return
                    now = time.monotonic()
                    if woken or (not self._busy and now - self._last_used >= IDLE_CLOSE_SECONDS):
                        self._close_file()
                        return
                    if self._should_give_up(now):
                        self._give_up()
                        return
                finally:
                    self._lock.release()

        self._closer = threading.Thread(target=run, name="catalog-idle-close", daemon=True)
        self._closer.start()

    def change_token(self) -> tuple:
        """The file's and its write-ahead log's ``(inode, size, mtime_ns)`` (``None`` if absent)."""
        stat: list[tuple[int, int, int] | None] = []
        for p in (self.path, self.path.with_name(self.path.name + ".wal")):
            try:
                st = os.stat(p)
                stat.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                stat.append(None)
        return tuple(stat)

    def close(self) -> None:
        with self._lock:
            self._close_file()

    def shutdown(self) -> None:
        """At exit: close the connection here and let the idle closer end, before the interpreter
        finalizes. A daemon thread still inside DuckDB's C++ code then is killed by a forced unwind
        that DuckDB swallows, and the process aborts ("FATAL: exception not rethrown")."""
        self.close()
        self._wake.set()
        closer = self._closer
        if closer is not None and closer is not threading.current_thread():
            closer.join(5.0)
