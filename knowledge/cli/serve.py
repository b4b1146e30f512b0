"""``serve`` (the OpenAI-compatible REST API) and ``mcp`` (the MCP server, stdio or streamable
HTTP). Each opens its own workbench for as long as it serves.

The server modules are imported when the command runs, not at the top: they pull in FastAPI,
uvicorn and the MCP SDK, which would almost triple the time of every other command and of
``--help`` (measured on an idle machine: ``python -m knowledge --help`` 0.33 s with them imported
here, 0.89 s with them at the top; ``python -X importtime`` puts ``knowledge.server.app`` and
``knowledge.server.mcp`` at 0.5-0.8 s each, the workbench they share included)."""

from __future__ import annotations

import argparse
import contextlib

from knowledge.cli.common import Commands, acting_username, command
from knowledge.errors import set_log_place
from knowledge.service.connections import check_connections
from knowledge.system import System
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(
        sub,
        "serve",
        help="serve the OpenAI-compatible Files + Vector Stores + chat API (FastAPI; its description at /openapi.json)",
    )
    s.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; any other"
        " needs KNOWLEDGE_API_KEY, or user accounts: then"
        " each request needs its user's key)",
    )
    s.add_argument("--port", type=int, default=8900, help="port (default 8900)")
    s.set_defaults(func=cmd_serve, workbench=False)
    s = command(sub, "mcp", help="serve the stores and agent memory as an MCP server (stdio; --http for streamable HTTP)")
    s.add_argument("--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    s.add_argument(
        "--host", default="127.0.0.1", help="with --http: address (default 127.0.0.1; any other needs KNOWLEDGE_API_KEY)"
    )
    s.add_argument("--port", type=int, default=8901, help="with --http: port (default 8901)")
    # the same option as every command's --user (dest acting_user); when the commands take it
    # already (knowledge.cli.common), adding it again is refused and mcp reads that one
    with contextlib.suppress(argparse.ArgumentError):
        s.add_argument(
            "--user",
            dest="acting_user",
            metavar="NAME",
            default=argparse.SUPPRESS,
            help="over stdio: act as the account NAME (default: the local admin). Over --http"
            " each request acts as the user of its API key once accounts exist",
        )
    s.set_defaults(func=cmd_mcp, workbench=False, user_aware=True)


def cmd_serve(args: argparse.Namespace) -> int:
    from knowledge.server.app import serve  # noqa: PLC0415 - FastAPI and uvicorn, only for this command

    set_log_place("the server's log")
    system = System()
    check_connections(system.catalog, system.settings)  # a warning when PostgreSQL's max_connections is too small
    try:
        serve(args.host, args.port, system=system)
    finally:
        system.close()
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from knowledge.server.mcp import run  # noqa: PLC0415 - the MCP SDK, only for this command

    # --user, else $KNOWLEDGE_USER (as every command reads them), else the local admin
    user = acting_username(args)
    system = System()
    if args.http:  # (over stdio the log is the client's stderr: one process per client, no warning)
        check_connections(system.catalog, system.settings)
    try:
        run(http=args.http, host=args.host, port=args.port, user=user, wb=Workbench(system))
    finally:
        system.close()
    return 0
