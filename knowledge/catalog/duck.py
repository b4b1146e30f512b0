"""The catalog's DuckDB engine: one file, shared by the processes of one computer by taking turns.

DuckDB lets one process open a file for writing. This engine opens it on first use and closes it
after :data:`IDLE_CLOSE_SECONDS` without use. A process that finds the file held writes a *turn
request* (``<file>.turn``, touched every retry step of :data:`RETRY_SECONDS`); the holder, after an
operation or between two, gives the file up once it has had it for :data:`TURN_SECONDS` (at once if
idle), then waits up to :data:`YIELD_SECONDS` for the other process to get in before it asks back.
So a CLI batch using the catalog every second and the app share it; each hand-over costs a reopen
(measured: about 20 ms, 50 ms after a write, on a laptop-class disk). Inside :meth:`hold` the file
is kept. A process without this protocol holding the file, after ``lock_timeout`` seconds:
:class:`CatalogLocked`, naming the other process.
"""

from __future__ import annotations

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


class DuckEngine:
    """The DuckDB file at ``path`` (see the module docstring); thread-safe, one lock per process."""

    dialect = "duckdb"

    def __init__(self, path: Path, lock_timeout: float = 10.0) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.turn_file = self.path.with_name(self.path.name + ".turn")
        self._lock = threading.RLock()
        self._conn: duckdb.DuckDBPyConnection | None = None
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
            self._conn.close()
            self._conn = None
            self._gave_up = time.monotonic()

    # -- connection -----------------------------------------------------------------------------
    def _open(self) -> duckdb.DuckDBPyConnection:
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
                conn = duckdb.connect(str(self.path))
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
            return conn

    @contextmanager
    def cursor(self) -> Iterator[CatalogCursor]:
        with self._lock:
            if self._conn is None:
                self._conn = self._open()
                if not self._migrated:
                    migrate(self._conn, "duckdb")
                    self._migrated = True
                self._start_closer()
            cur = self._conn.cursor()
            self._busy += 1
            try:
                yield cur
            finally:
                cur.close()
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
                        self._conn.close()
                        self._conn = None
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
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def shutdown(self) -> None:
        """At exit: close the connection here and let the idle closer end, before the interpreter
        finalizes. A daemon thread still inside DuckDB's C++ code then is killed by a forced unwind
        that DuckDB swallows, and the process aborts ("FATAL: exception not rethrown")."""
        self.close()
        self._wake.set()
        closer = self._closer
        if closer is not None and closer is not threading.current_thread():
            closer.join(5.0)
