"""What a reader is about to pay for, so a reader killed past its limits can say why.

A reader calls :func:`expect` with a sentence before work whose cost it can foresee from the file's
own declarations ("the workbook's used range is 1,048,576 × 16,384 cells", "the archive declares
2,400 MB unpacked"). Read in a child process (:mod:`knowledge.ingest.isolated`), the sentence goes
to the parent at once; if the child is then killed past its memory or time limit, the file's reason
ends with the last sentence it sent. Read in-process, :func:`expect` does nothing.
"""

from __future__ import annotations

from collections.abc import Callable

_listener: Callable[[str], None] | None = None


def expect(what: str) -> None:
    """Tell the watchdog what the reader is about to do (one short sentence, no file name)."""
    if _listener is not None:
        _listener(what)


def listen(listener: Callable[[str], None] | None) -> None:
    """Send :func:`expect`'s sentences to ``listener`` (``None``: drop them). Used by the child."""
    global _listener
    _listener = listener
