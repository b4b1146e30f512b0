"""The page tests' own fixtures."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session", autouse=True)
def _scripts_compiled_once() -> Iterator[None]:
    """Streamlit (1.67) compiles the app's script and its page anew on every ``AppTest.run`` (each run
    makes a new ``ScriptCache``): ~10 s of CPU over the page tests. The AppTests of this process share
    the bytecode of a script while its file is unchanged (same path, size and modification time, and
    the same ``runner.magicEnabled``); a Streamlit without that class compiles as before."""
    try:
        from streamlit import config
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache
    except ImportError:
        yield
        return
    compile_script = ScriptCache.get_bytecode
    compiled: dict[tuple, object] = {}

    def compiled_once(cache: ScriptCache, script_path: str) -> object:
        path = os.path.abspath(script_path)
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns, config.get_option("runner.magicEnabled"))
        if key not in compiled:
            compiled[key] = compile_script(cache, script_path)
        return compiled[key]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ScriptCache, "get_bytecode", compiled_once)
        yield
