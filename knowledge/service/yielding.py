"""Ingestion yields to searches: a search marks the data folder; the app's worker process, between
two embedding batches, waits while that mark is fresh. Why and the figures: docs/ingestion.md
("Searches while files are ingested").
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

#: The mark's file name, in the data folder.
MARK_NAME = ".searching"
#: Seconds after a search's mark during which the worker waits: the page's own work after the
#: search (charts, the map) and the browser drawing it take about a second on an idle 2-core machine.
GRACE_SECONDS = 2.0
#: At most this long the worker waits in one go, then embeds one batch anyway (searches without
#: pause must not stop ingestion).
MAX_WAIT_SECONDS = 6.0
#: A search touches the mark at most this often (seconds): one ``utime`` per search, not per call.
_TOUCH_EVERY = 0.25


class SearchMark:
    """The mark of the data folder ``data_dir``: :meth:`touch` when a search starts, :meth:`age`
    in seconds since the last one (``inf`` when never), :meth:`wait` to let a search finish.

    Thread-safe; every error of the file system is ignored (the mark is a hint, never a failure).
    """

    def __init__(self, data_dir: Path | str) -> None:
        self.path = Path(data_dir) / MARK_NAME
        self._lock = threading.Lock()
        self._touched = 0.0

    def touch(self) -> None:
        """Mark a search now (an ``utime`` of the mark's file, created when missing)."""
        now = time.monotonic()
        with self._lock:
            if now - self._touched < _TOUCH_EVERY:
                return
            self._touched = now
        with contextlib.suppress(OSError):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                self.path.touch()

    def age(self) -> float:
        """Seconds since the last search's mark (wall clock); ``inf`` when there is none."""
        try:
            return max(0.0, time.time() - self.path.stat().st_mtime)
        except OSError:
            return float("inf")

    def wait(self, grace: float = GRACE_SECONDS, max_wait: float = MAX_WAIT_SECONDS) -> float:
        """Sleep while a search marked within ``grace`` seconds, at most ``max_wait`` seconds in all.

        Returns:
            the seconds slept (0.0 when no search is recent).
        """
        slept = 0.0
        while slept < max_wait:
            left = grace - self.age()
            if left <= 0:
                break
            step = min(left, max_wait - slept, 0.25)
            time.sleep(step)
            slept += step
        return slept


__all__ = ["GRACE_SECONDS", "MARK_NAME", "MAX_WAIT_SECONDS", "SearchMark"]
