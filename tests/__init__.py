"""The test suite, a package (as httpx's): helpers import as ``from tests.helpers.x import ...``; fixtures
live in the ``conftest.py`` files (the root one for all, a folder's own for that folder)."""
