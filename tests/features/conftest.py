"""The feature tests' own fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from knowledge.chat import ChatService
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.workbench import Workbench


@pytest.fixture
def chat(tmp_path) -> Iterator[ChatService]:
    """A chat service over a fresh workbench on the fake embedder (test_chat_openai.py, test_local_model.py;
    a module may define its own)."""
    wb = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    yield ChatService(wb)
    wb.close()
