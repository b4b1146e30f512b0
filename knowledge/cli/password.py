"""``password``: the app's password hash for the settings file (``[app] password_hash = ...``),
from a password typed twice at the terminal, or read from standard input when piped."""

from __future__ import annotations

import argparse
import getpass
import sys

from knowledge.access import hash_password
from knowledge.cli.common import Commands, command
from knowledge.errors import KnowledgeError


def add_parser(sub: Commands) -> None:
    s = command(
        sub,
        "password",
        help="make the app's password hash for the settings file ([app] password_hash"
        " = ...); reads the password from the terminal, or from standard input"
        " when piped",
    )
    s.set_defaults(func=cmd_password, workbench=False)


def cmd_password(args: argparse.Namespace) -> int:
    """Raises KnowledgeError when the two typed passwords differ or it is shorter than 8 characters."""
    if sys.stdin.isatty():
        first = getpass.getpass("Password for the app: ")
        if getpass.getpass("Again: ") != first:
            raise KnowledgeError("The two passwords differ.")
    else:
        first = sys.stdin.readline().rstrip("\r\n")
    if len(first) < 8:
        raise KnowledgeError("Use a password of at least 8 characters.")
    print("[app]")
    print(f'password_hash = "{hash_password(first)}"')
    return 0
