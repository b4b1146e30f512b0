"""The feature tests' own fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from knowledge.chat import Chats, ChatService
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.system import System
from knowledge.workbench import Workbench


@pytest.fixture
def chat(tmp_path) -> Iterator[ChatService]:
    """A chat service over a fresh workbench on the fake embedder (test_chat_openai.py, test_local_model.py;
    a module may define its own)."""
    system = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 256))
    wb = Workbench(system)
    yield Chats(system).service(wb)
    system.close()
