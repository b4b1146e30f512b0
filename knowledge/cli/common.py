"""What the command modules share: the ``--data-dir`` option every command takes, the helper that
adds a command with it, the plain-text table, a file named by id or name, and the progress lines
of the portable commands."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from knowledge.errors import KnowledgeError
from knowledge.service.indexing import normalize_name
from knowledge.workbench import Workbench

#: The options every command takes, before or after the command's name (``--data-dir``).
COMMON = argparse.ArgumentParser(add_help=False)
COMMON.add_argument("--data-dir", default=argparse.SUPPRESS,
                    help="data folder (default: $KNOWLEDGE_DATA_DIR or ./data)")

#: The subparsers action a command module's ``add_parser`` adds its commands to (argparse names
#: its type only privately).
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def command(sub: Commands, name: str, **kw: Any) -> argparse.ArgumentParser:
    """Add the command ``name`` (with ``--data-dir``) to ``sub``. It runs on a workbench: its
    ``func(wb, args)``; a command that needs none sets ``workbench=False`` and gets ``func(args)``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, parents=[COMMON], **kw)
    parser.set_defaults(workbench=True)
    return parser


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """``rows`` under ``headers`` in left-aligned columns, a rule of dashes under the headers;
    ``None`` shows as an empty cell."""
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def resolve_file(wb: Workbench, store: str, ref: str) -> str:
    """The id of the file of ``store`` that ``ref`` names: its id, or its one name (any of its
    names, compared as the catalog does). Raises KnowledgeError for no such file or a name that
    several files share."""
    files = wb.store_files(store)
    for f in files:
        if ref == f.file_id:
            return f.file_id
    named = [f for f in files if normalize_name(ref) in {normalize_name(n) for n in f.names}]
    if len(named) == 1:
        return named[0].file_id
    if named:
        raise KnowledgeError(f"{len(named)} files are named {ref!r} in {store!r}; give the file id.")
    raise KnowledgeError(f"No file {ref!r} in store {store!r}.")


def progress_lines() -> Callable[[str, float], None]:
    """A progress callback ``(stage, fraction)`` that prints ``  stage: 40%`` to stderr when the
    stage changes, else at most every 2 s."""
    shown: dict[str, Any] = {"stage": None, "at": 0.0}

    def progress(stage: str, fraction: float) -> None:
        now = time.monotonic()
        if stage != shown["stage"] or now - shown["at"] >= 2.0:
            print(f"  {stage}: {fraction:.0%}", file=sys.stderr)
            shown.update(stage=stage, at=now)

    return progress
