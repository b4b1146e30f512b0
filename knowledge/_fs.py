"""Small file-system helpers shared by the on-disk stores."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(path: Path) -> None:
    """Make a rename, new name or unlink in folder ``path`` durable (POSIX; a no-op where folders
    cannot be opened, e.g. Windows)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
