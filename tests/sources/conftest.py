"""Fixtures of the source tests: the real servers (tests/helpers/<server>.py), one per session and
xdist worker, and ones of a test's own for tests that stop them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.dovecot import Dovecot, start_dovecot


@pytest.fixture(scope="session")
def dovecot() -> Iterator[Dovecot]:
    """Dovecot (IMAP) for the session; each test makes accounts of its own (:meth:`Dovecot.add_user`)."""
    with start_dovecot() as server:
        yield server


@pytest.fixture
def own_dovecot() -> Iterator[Dovecot]:
    """Dovecot of this test's own, which it may stop and start."""
    with start_dovecot() as server:
        yield server
