"""The app run by AppTest over a :class:`~knowledge.system.System` the test holds.

The app (app.py) is an entry point: its cached ``get_workbench`` builds the process's System with
``System(load_settings())``. A test that must reach a part of that System (accounts with sign-in
delays recorded instead of slept, the catalog the app writes) builds the System itself, as any
entry point does, and hands it to the app with :func:`app_over`; the test closes it (a Workbench
given a System does not close it).

Imported as ``from tests.helpers.app_system import app_over``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import knowledge.system
from knowledge.system import System
from tests.helpers.app import APP


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


__all__ = ["app_over"]
