"""Fixtures of the source tests: the real servers they read (see tests/helpers/<server>.py)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

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
