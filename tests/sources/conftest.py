"""Fixtures of the source tests: the real servers they read (see tests/helpers/<server>.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.dovecot import Dovecot, start_dovecot
from tests.helpers.gitserver import GitHttpServer, GitSshServer, need_git, start_sshd
from tests.helpers.s3 import AuthMoto, MotoServer, moto_server, moto_with_auth
from tests.helpers.webdav import DavServer, dav_server

# -- WebDAV ------------------------------------------------------------------------------------------------
_dav_folders = itertools.count()


@dataclass
class DavFolder:
    """A test's own folder on a WebDAV server: ``folder`` on disk, served at ``url``."""

    server: DavServer
    folder: Path
    url: str


@pytest.fixture(scope="session")
def webdav_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavServer]:
    """The session's WsgiDAV server (tests/helpers/webdav.py); each test works in a folder of its own (``dav``)."""
    with dav_server(tmp_path_factory.mktemp("webdav")) as server:
        yield server


@pytest.fixture
def dav(webdav_server: DavServer) -> Iterator[DavFolder]:
    """A folder of this test's own on the session's WebDAV server (a name with a space and a non-ASCII
    letter); the server's requests, answers, redirects, hook and refusal are reset after the test."""
    rel = f"t{next(_dav_folders)} Équipe"
    folder = webdav_server.root / rel
    folder.mkdir()
    webdav_server.reset()
    try:
        yield DavFolder(webdav_server, folder, webdav_server.folder_url(rel))
    finally:
        webdav_server.reset()


@pytest.fixture
def own_webdav(tmp_path: Path) -> Iterator[DavFolder]:
    """A WebDAV server of this test's own (one it may stop), serving a folder ``Team``."""
    with dav_server(tmp_path / "webdav") as server:
        folder = server.root / "Team"
        folder.mkdir()
        yield DavFolder(server, folder, server.folder_url("Team"))


# -- S3 (knowledge/sources/s3.py) ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def s3_auth_server() -> Iterator[AuthMoto]:
    """A moto S3 server that checks signatures and IAM policies (:func:`tests.helpers.s3.moto_with_auth`),
    with its keys; never stopped (a test that stops its server uses ``own_moto``)."""
    with moto_with_auth() as server:
        yield server


@pytest.fixture
def own_moto() -> Iterator[MotoServer]:
    """A moto server of this test's own, which it may stop and start again (``own_moto.stop()``,
    ``own_moto.start()``: same port, no buckets) or freeze (SIGSTOP)."""
    with moto_server() as server:
        yield server


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


# -- IMAP (Dovecot) ----------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    """The session's Dovecot (tests/helpers/dovecot.py); each test makes accounts of its own
    (:meth:`Dovecot.add_user`)."""
    with start_dovecot() as server:
        yield server


@pytest.fixture
def own_dovecot() -> Iterator[Dovecot]:
    """A Dovecot of this test's own, which it may stop and start (and sign in wrongly to: Dovecot slows
    down an address's sign-ins after a failed one)."""
    with start_dovecot() as server:
        yield server
