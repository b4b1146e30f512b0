"""The ``dict`` source kind in a process the tests start (``streamlit run app.py`` for the browser
tests), declared the way a plugin is: an entry point of the group ``knowledge.sources`` in a
distribution's metadata on the process's ``PYTHONPATH`` (:func:`served_dict_kind`), loaded by the
product's own registry. Its files are read from a JSON file the test writes and may change between
runs: ``{source name: {path: {"text": ..., "readers": [...] | null, "vanish": bool}}}``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from knowledge.sources.base import GROUP
from tests.helpers.sources import DictSource

#: The variable naming the JSON file of the served kind's files.
FILES_VARIABLE = "TEST_DICT_SOURCES_FILE"


class ServedDictSource(DictSource):
    """:class:`~tests.helpers.sources.DictSource` whose files are the JSON file's, read at each call."""

    def _files(self) -> dict[str, tuple[bytes, tuple[str, ...] | None]]:
        path = os.environ.get(FILES_VARIABLE)
        data: dict[str, Any] = json.loads(Path(path).read_text()) if path else {}
        mine = data.get(self.required("name"), {})
        self.VANISH.clear()
        self.VANISH.update(p for p, f in mine.items() if f.get("vanish"))
        files = {p: (f["text"].encode(), tuple(f["readers"]) if f.get("readers") else None) for p, f in mine.items()}
        self.FILES[self.required("name")] = files
        return files


def served_dict_kind(folder: Path, files: dict[str, Any]) -> dict[str, str]:
    """Declare the kind ``dict`` (:class:`ServedDictSource`) for processes started with the returned
    environment (``PYTHONPATH`` and :data:`FILES_VARIABLE`), its files ``files`` written to
    ``folder/sources.json`` (write that file again to change them)."""
    dist = folder / "knowledge_test_sources-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: knowledge-test-sources\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[{GROUP}]\ndict = tests.helpers.served_sources:ServedDictSource\n")
    (folder / "sources.json").write_text(json.dumps(files))
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, FILES_VARIABLE: str(folder / "sources.json")}


__all__ = ["FILES_VARIABLE", "ServedDictSource", "served_dict_kind"]
