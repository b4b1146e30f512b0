"""What a reader is about to pay for, so a reader killed past its limits can say why.

A reader calls :func:`expect` with a sentence before work whose cost it can foresee from the file's
own declarations ("the workbook's used range is 1,048,576 × 16,384 cells", "the archive declares
2,400 MB unpacked"). Read in a child process (:mod:`knowledge.ingest.isolated`), the sentence goes
to the parent at once; if the child is then killed past its memory or time limit, the file's reason
ends with the last sentence it sent. Read in-process, :func:`expect` does nothing.

The other way, :func:`seconds_left` tells a reader how long it has before the watchdog kills it for
time, so that optional work (finding a PDF's tables) can stop in time and leave the file read.
"""

from __future__ import annotations

import time
from collections.abc import Callable

_listener: Callable[[str], None] | None = None
_deadline: float | None = None  # time.monotonic() at which the watchdog kills the reader


def expect(what: str) -> None:
    """Tell the watchdog what the reader is about to do (one short sentence, no file name)."""
    if _listener is not None:
        _listener(what)


def listen(listener: Callable[[str], None] | None) -> None:
    """Send :func:`expect`'s sentences to ``listener`` (``None``: drop them). Used by the child."""
    global _listener
    _listener = listener


def seconds_left() -> float | None:
    """Seconds before the watchdog kills this reader for time (``>= 0``), or ``None`` where no one
    will (read in-process)."""
    return None if _deadline is None else max(0.0, _deadline - time.monotonic())


def set_deadline(at: float | None) -> None:
    """The watchdog's deadline for the file being read, as a :func:`time.monotonic` value (``None``:
    none). Used by the child, which knows it from its task."""
    global _deadline
    _deadline = at
