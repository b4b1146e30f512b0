"""Fixtures of the sources' tests: the servers they read from (tests/helpers/<server>.py), one per
session where a test need not stop it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.gitserver import GitHttpServer, GitSshServer, need_git, start_sshd


# -- Git (knowledge/sources/git.py) -------------------------------------------------------------------------
@pytest.fixture(scope="session")
def git_http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitHttpServer]:
    """dulwich's smart HTTP behind basic auth over a folder a test puts repositories in
    (``WorkRepo(git_http_server.root / name)``, read at ``git_http_server.url(name)``)."""
    need_git()
    with GitHttpServer(tmp_path_factory.mktemp("git-http")) as server:
        yield server


@pytest.fixture(scope="session")
def git_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitSshServer]:
    """Debian's sshd running ``git-upload-pack`` for the key ``git_sshd.client_key``."""
    server = start_sshd(Path(tmp_path_factory.mktemp("git-sshd")))
    try:
        yield server
    finally:
        server.stop()
