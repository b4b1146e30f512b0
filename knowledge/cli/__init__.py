"""The command line: ``python -m knowledge`` (or ``knowledge``). A surface, the top floor of the
package: it may import everything below it (the workbench, server, chat, tools, the features, the
service layer, the parts and the ground), never ``pages/``; nothing in ``knowledge`` imports it.

One module per group of commands (:mod:`~knowledge.cli.ingest`, ``worker``, ``search``, ``eval``, ``sync``,
``source``, ``stores``, ``portable``, ``files``, ``chat``, ``people``, ``serve``, ``password``), each with an
``add_parser(sub)`` that adds its commands, every one with ``set_defaults(func=cmd_<name>)``. :func:`main` parses, opens
the workbench for the commands that run on one (``func(wb, args)``: the view acting as ``--user``
/ ``$KNOWLEDGE_USER``, else the local admin; ``system=True``, the worker: ``func(system, wb, args)``,
it runs parts for everyone) and closes it after; the rest (``workbench=False``:
``serve``, ``mcp``, ``restore``, ``password``) get ``func(args)`` and refuse ``--user``.

Exit codes: 0 success; 1 a file failed to ingest (the others went on), ``eval`` measured an MRR
below ``--min-mrr``, or ``restore`` could not import a store of another backend (the rest was
restored); 2 bad usage or a configuration/store error (the message says which: a damaged or newer
bundle, a store name already taken, a data folder that is not empty, ...); 130 interrupted;
141 the reader of the output went away (``... | head``).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence

from knowledge.chat import Chats
from knowledge.cli import chat, files, ingest, password, people, portable, search, serve, source, stores, sync, worker
from knowledge.cli import eval as evaluate
from knowledge.cli.common import COMMON, acting_username, acting_view
from knowledge.errors import KnowledgeError, set_log_place
from knowledge.service.connections import check_connections, name_this_process
from knowledge.system import System
from knowledge.workbench import Workbench

#: The command modules, in the order ``--help`` lists their commands.
COMMAND_MODULES = (ingest, worker, search, evaluate, sync, source, stores, portable, files, chat, people, serve, password)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; ``--data-dir`` and ``--user`` go before or after the command
    (``--user`` only before ``share``, ``unshare`` and ``audit``, whose own ``--user`` names someone else)."""
    p = argparse.ArgumentParser(prog="python -m knowledge", description="A local knowledge workbench.", parents=[COMMON])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    return p


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """:func:`build_parser`'s parser, built once per process (about 15 ms of CPU; parsing does not change
    it). The commands' functions are the ones the modules had then."""
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: ``sys.argv[1:]``) and return its exit code; errors of the
    product print as ``error: ...`` on stderr (exit 2), never as a traceback."""
    args = _parser().parse_args(files.alias(list(sys.argv[1:] if argv is None else argv)))
    name_this_process(args.command)  # PostgreSQL sees its connections as "knowledge <command> <host>:<pid>"
    # Python prints a logged error on stderr when nothing else is configured (logging.lastResort)
    set_log_place("the messages printed on standard error")
    if getattr(args, "data_dir", None):
        os.environ["KNOWLEDGE_DATA_DIR"] = args.data_dir
    try:
        return run(args)
    except KnowledgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        # Python's recipe (docs: "Note on SIGPIPE"): point stdout at devnull so the flush at exit
        # does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool stopped by a closed pipe


def run(args: argparse.Namespace) -> int:
    """Dispatch parsed ``args`` to their command: ``args.func(wb, args)`` on a workbench opened here
    (and closed after) -- its view acting as ``--user`` (:func:`~knowledge.cli.common.acting_view`)
    when one is named -- ``args.func(wb, args, chat)`` for a command that chats (``chats=True``: its
    :class:`~knowledge.chat.ChatService` over chat state built here over the system), or
    ``args.func(args)`` for a command that needs none.

    Raises:
        KnowledgeError: ``--user`` names no account, or is given to a command that does not act as
            anyone (``restore``, ``password``, ...).
    """
    if not args.workbench:
        if acting_username(args) is not None and not getattr(args, "user_aware", False):
            raise KnowledgeError(
                f"`{args.command}` does not act as an account; leave out --user (and unset $KNOWLEDGE_USER)."
            )
        return args.func(args)
    system = System()  # the entry point holds the parts; the command gets a workbench over them
    if args.command == "worker":  # long-running: say when PostgreSQL may refuse its connections
        check_connections(system.catalog, system.settings)
    try:
        wb = acting_view(Workbench(system), args)
        if getattr(args, "system", False):  # a command that runs parts for everyone (the worker)
            return args.func(system, wb, args)
        if getattr(args, "chats", False):  # a command that chats: its person's service over the shared state
            return args.func(wb, args, Chats(system).service(wb))
        return args.func(wb, args)
    finally:
        system.close()


__all__ = ["COMMAND_MODULES", "build_parser", "main", "run"]
