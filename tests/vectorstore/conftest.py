"""The vector-store tests' own fixtures (the contract backends are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from knowledge.vectorstore.pgvector import PgvectorBackend


@pytest.fixture
def make(pgvector_settings) -> Iterator[Callable[..., PgvectorBackend]]:
    """``make(**options) -> PgvectorBackend`` on this test's database; all closed after the test
    (test_pgvector.py, test_pgvector_lexical.py)."""
    opened: list[PgvectorBackend] = []

    def _make(**options) -> PgvectorBackend:
        b = PgvectorBackend(pgvector_settings(**options))
        opened.append(b)
        return b

    yield _make
    for b in opened:
        b.close()
