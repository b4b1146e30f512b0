"""What the command modules share: the options every command takes (``--data-dir``, ``--user``),
the helper that adds a command with them, who a command acts as (:func:`acting_username`,
:func:`acting_view`), the plain-text table, a file named by id or name, and the progress lines of
the portable commands."""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeAlias

from knowledge.config import USER_ENV
from knowledge.errors import AuthenticationFailed, KnowledgeError
from knowledge.service.indexing import normalize_name
from knowledge.workbench import Workbench

#: The options every command takes, before or after the command's name (``--data-dir``); a command
#: whose own ``--user`` names someone else (``share``, ``audit``) takes only these.
DATA_DIR = argparse.ArgumentParser(add_help=False)
DATA_DIR.add_argument("--data-dir", default=argparse.SUPPRESS, help="data folder (default: $KNOWLEDGE_DATA_DIR or ./data)")
#: ``--data-dir`` and ``--user`` (who the command acts as), before or after the command's name.
COMMON = argparse.ArgumentParser(add_help=False, parents=[DATA_DIR])
COMMON.add_argument(
    "--user",
    dest="acting_user",
    metavar="NAME",
    default=argparse.SUPPRESS,
    help="act as this account, with its access only (default: $KNOWLEDGE_USER, else the local admin)",
)
#: The variable that names the account a command acts as when ``--user`` is not given.
USER_VARIABLE = USER_ENV

#: The subparsers action a command module's ``add_parser`` adds its commands to (argparse names
#: its type only privately).
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def command(sub: Commands, name: str, *, common: argparse.ArgumentParser = COMMON, **kw: Any) -> argparse.ArgumentParser:
    """Add the command ``name`` (with ``--data-dir`` and ``--user``; ``common=DATA_DIR``: without
    ``--user``, for a command whose own ``--user`` names someone else) to ``sub``. It runs on a
    workbench acting as the ``--user`` (:func:`acting_view`): its ``func(wb, args)``; a command that
    needs none sets ``workbench=False`` and gets ``func(args)`` (it is refused with ``--user``
    unless it sets ``user_aware=True`` and reads :func:`acting_username` itself)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, parents=[common], **kw)
    parser.set_defaults(workbench=True)
    return parser


def acting_username(args: argparse.Namespace) -> str | None:
    """The account the command acts as: ``--user``, else ``$KNOWLEDGE_USER``; ``None`` (blank or
    unset): the local admin."""
    name = getattr(args, "acting_user", None)
    if name is None:
        name = os.environ.get(USER_VARIABLE)
    return (name.strip() or None) if name is not None else None


def cli_identity() -> str:
    """``cli:<OS user>@<host>``: who runs this command, as the audit trail names a local admin's
    action from the command line (the user id when the OS has no name for it)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container's user without a passwd entry
        user = f"uid{os.getuid()}"
    return f"cli:{user}@{socket.gethostname()}"


def acting_view(wb: Workbench, args: argparse.Namespace) -> Workbench:
    """``wb``'s local admin named as the person at the command line (:func:`cli_identity`) without
    ``--user``, else its view acting as that account
    (:meth:`Workbench.as_user`): every store the command reads or writes is checked against the
    account's access, and the audit trail records its name.

    Raises:
        AuthenticationFailed: no account has that name (none exists yet, or it was mistyped).
    """
    name = acting_username(args)
    if name is None:  # the local admin, named in the audit trail as the person at this command line
        return wb.as_user(replace(wb.actor, via=cli_identity()))
    if wb.find_user(name) is None:
        hint = (
            "no account exists yet: `users add NAME --role admin` makes the first"
            if not wb.accounts.enabled()
            else "`users list` shows them"
        )
        raise AuthenticationFailed(f"There is no account {name!r} to act as (--user or ${USER_VARIABLE}); {hint}.")
    return wb.as_user(wb.actor_of(name))


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
