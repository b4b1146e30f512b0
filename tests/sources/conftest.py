"""Fixtures of the sources' tests: the servers they read from (tests/helpers/<server>.py), one per
session where a test need not stop it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.s3 import AuthMoto, MotoServer, moto_server, moto_with_auth


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
