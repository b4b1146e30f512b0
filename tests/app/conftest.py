"""The page tests' own fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _components_scanned_once() -> Iterator[None]:
    """Streamlit (1.67) scans the metadata of every installed package for custom components on each
    AppTest's first run: ~0.3 s of CPU per AppTest, a fifth of a page test's time. The installed
    packages do not change during a test run, so the AppTests of this process share one scan (also
    those made with ``AppTest.from_file`` or ``from_function`` directly, which
    :func:`tests.helpers.app.open_app`'s shared manager does not reach). Where a Streamlit version
    has no such scanner, each AppTest scans as before."""
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:
        yield
        return
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is None:
        yield
        return
    found: list = []

    def scanned_once(*args, **kwargs):
        if not found:
            found.append(scan(*args, **kwargs))
        return list(found[0])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(manifest_scanner, "scan_component_manifests", scanned_once)
        yield
