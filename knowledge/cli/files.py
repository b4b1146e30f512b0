"""``file-store`` (also written ``files move`` / ``files where``): where the stored files live, and
moving them to another file store. (``files STORE`` lists a store's files: :mod:`knowledge.cli.stores`;
:func:`knowledge.cli.main` reads ``files move``/``files where`` as ``file-store move``/``where``, and
``files readers STORE FILE`` as ``file-readers STORE FILE``.)

``files where`` prints the catalog's record (the store, a move in progress, old copies kept);
``files move --to s3`` copies every file to the store the settings name for that backend
(``file_store.s3_*`` for ``s3``, ``file_store.url``/``catalog.url`` for ``postgresql``,
``file_store.dir`` for ``filesystem``), verifies each copy's SHA-256 and switches over
(:mod:`knowledge.service.filehome`); ``--delete-old`` then deletes the old copies, or later
``files move --cleanup``. Admins only. It runs even when the settings already name the new store
(which every other command refuses until the files are moved).
"""

from __future__ import annotations

import argparse
import sys

from knowledge.cli.common import Commands, acting_view, command
from knowledge.errors import InvalidArgument
from knowledge.service.filehome import MoveReport, describe
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(
        sub,
        "file-store",
        help="where the stored files live; move them to another file store"
        " (`files move --to s3` is the same as `file-store move --to s3`)",
    )
    fsub = s.add_subparsers(dest="files_command", required=True, metavar="ACTION")
    w = fsub.add_parser("where", help="print the file store the catalog records, and a move in progress")
    w.set_defaults(func=cmd_where, workbench=False, user_aware=True)
    m = fsub.add_parser(
        "move",
        help="copy every stored file to another file store (by id, SHA-256 verified,"
        " resumable), then switch over; admins only",
    )
    m.add_argument(
        "--to",
        choices=("filesystem", "postgresql", "s3"),
        help="the backend to move to; its settings are file_store.* (e.g. file_store.s3_bucket,"
        " KNOWLEDGE_FILE_STORE__S3_BUCKET)",
    )
    m.add_argument("--delete-old", action="store_true", help="after the switch, delete the old copies")
    m.add_argument("--cleanup", action="store_true", help="only delete the old copies of a finished move")
    m.set_defaults(func=cmd_move, workbench=False, user_aware=True)
    s.set_defaults(workbench=False, user_aware=True)


#: ``files <action>`` read as ``file-store <action>``.
ALIASED = ("move", "where")
#: ``files <word> ARG...`` read as the command named here (``files readers`` alone still lists the
#: files of a store called ``readers``).
RENAMED = {"readers": "file-readers"}


def alias(argv: list[str]) -> list[str]:
    """``argv`` with ``files move``/``files where`` (the command, then the action) read as
    ``file-store ...``, and ``files readers STORE FILE`` as ``file-readers STORE FILE``."""
    for i, token in enumerate(argv[:-1]):
        if token == "files" and argv[i + 1] in ALIASED:
            return [*argv[:i], "file-store", *argv[i + 1 :]]
        if token == "files" and argv[i + 1] in RENAMED and _positionals(argv[i + 2 :]):
            return [*argv[:i], RENAMED[argv[i + 1]], *argv[i + 2 :]]
        if not token.startswith("-") and (i == 0 or argv[i - 1] not in ("--data-dir", "--user")):
            break  # another command
    return argv


def _positionals(argv: list[str]) -> list[str]:
    """The arguments of ``argv`` that are no option nor the value of ``--data-dir``/``--user``."""
    return [
        a for j, a in enumerate(argv) if not a.startswith("-") and (j == 0 or argv[j - 1] not in ("--data-dir", "--user"))
    ]


def _open(args: argparse.Namespace) -> tuple[Workbench, Workbench]:
    wb = Workbench(check_file_store=False)
    try:
        return wb, acting_view(wb, args)
    except BaseException:
        wb.close()
        raise


def cmd_where(args: argparse.Namespace) -> int:
    wb, view = _open(args)
    try:
        home = view.file_store_home()
        print(f"Files are in {describe(home.location)}.")
        if home.moving_to is not None:
            done = home.progress or {}
            print(
                f"Moving to {describe(home.moving_to)} ({home.phase}: {done.get('copied', 0)} of"
                f" {done.get('total') or '?'} copied). Run `knowledge files move --to"
                f" {home.moving_to.get('backend')}` to finish it if it was interrupted."
            )
        if home.previous is not None:
            print(f"Old copies are kept in {describe(home.previous)}: `knowledge files move --cleanup` deletes them.")
    finally:
        wb.close()
    return 0


def cmd_move(args: argparse.Namespace) -> int:
    if args.cleanup == bool(args.to):
        raise InvalidArgument("Give --to BACKEND (to move the files) or --cleanup (to delete the old copies), one of them.")
    wb, view = _open(args)
    try:
        if args.cleanup:
            print(f"Deleted {view.delete_old_file_copies()} old copies.")
            return 0
        tty = sys.stderr.isatty()

        def progress(report: MoveReport, total: int) -> None:
            done = report.copied + report.skipped
            if tty or done == total or report.copied % 100 == 0:
                print(f"\r{done} of {total} files copied and verified", end="" if tty else "\n", file=sys.stderr, flush=True)

        report = view.move_files(args.to, delete_old=args.delete_old, progress=progress)
        if tty:
            print(file=sys.stderr)
        if not report.switched:
            print(f"The files are already in {report.target}.")
        else:
            print(
                f"Moved the files from {report.source} to {report.target}: {report.copied} copied and"
                f" verified now ({report.final_pass} in the final pass), {report.skipped} verified before."
            )
            print(
                f"Set file_store.backend = {args.to!r} (KNOWLEDGE_FILE_STORE__BACKEND={args.to}) in every"
                " process's settings; until then they follow the catalog's record."
            )
        if report.deleted:
            print(f"Deleted {report.deleted} old copies.")
        elif report.switched and not args.delete_old:
            print("The old copies are kept: `knowledge files move --cleanup` deletes them.")
    finally:
        wb.close()
    return 0
