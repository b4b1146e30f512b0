"""The test suite, a package (as httpx's): helpers import as ``from tests.helpers.x import ...``; fixtures
live in the ``conftest.py`` files (the root one for all, a folder's own for that folder).

The tests write bytecode (``__pycache__``, ignored by git) even where ``PYTHONDONTWRITEBYTECODE`` is set:
without it every run, in every xdist worker and every process a test starts, compiles the package and
rewrites the tests' asserts from source again (about 6 s of CPU per process); this is set here, the first
of the tests' code that runs, so the modules the root conftest imports are written too."""

import sys

sys.dont_write_bytecode = False
