"""The app run by AppTest over a :class:`~knowledge.system.System` the test holds.

The app (app.py) is an entry point: its cached ``get_workbench`` builds the process's System with
``System(load_settings())``. A test that must reach a part of that System (accounts with sign-in
delays recorded instead of slept, the catalog the app writes) builds the System itself, as any
entry point does, and hands it to the app with :func:`app_over`; the test closes it (a Workbench
given a System does not close it).

:func:`preparing` builds a data folder's contents once (in :func:`tests.helpers.env.prepared_data`'s
``build``) as the page tests would: the fake model, the tests' cheap password hashes.

Imported as ``from tests.helpers.app_system import app_over, preparing``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import knowledge.access
import knowledge.system
from knowledge.config import load_settings
from knowledge.system import System
from tests.helpers.app import APP, use_fake_model
from tests.helpers.env import TEST_SCRYPT_N


@contextmanager
def app_over(system: System) -> Iterator[System]:
    """While open, the app's ``System(...)`` (app.py's call, and only that one: any other code
    builds its own as usual) is ``system``; yields it. Use with fresh Streamlit caches
    (:func:`tests.helpers.app.fresh_caches`), so the app's cached workbench is made over it."""
    real = knowledge.system.System

    def given(*args, **kwargs):
        if Path(sys._getframe(1).f_code.co_filename) == Path(APP):
            return system
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(knowledge.system, "System", given)
        yield system


@contextmanager
def preparing(dimension: int = 8) -> Iterator[System]:
    """A System over ``KNOWLEDGE_DATA_DIR`` for a prepared data folder's ``build``: the fake model
    ``fake/hash-<dimension>`` (:func:`~tests.helpers.app.use_fake_model`) and password hashes at
    :data:`~tests.helpers.env.TEST_SCRYPT_N`, as the tests that copy the folder use; closed after.
    (A module-scoped fixture runs before the function-scoped ones that set both for a test.)"""
    with pytest.MonkeyPatch.context() as mp:
        use_fake_model(mp, dimension)
        mp.setattr(knowledge.access, "SCRYPT_N", TEST_SCRYPT_N)
        system = System(load_settings())
        try:
            yield system
        finally:
            system.close()


__all__ = ["app_over", "preparing"]
