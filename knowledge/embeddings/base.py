"""The ``Embedder`` interface: text in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Token:
    """One token of the model's tokenizer: its vocabulary ``id``, its ``text`` as the tokenizer sees
    it, and its character span ``[start, end)`` in the original string (Python ``str`` indices)."""

    id: int
    text: str
    start: int
    end: int


class Embedder(ABC):
    """An embedding model.

    Vectors are ``float32`` and L2-normalised, so the inner product of two is their cosine similarity
    in [-1, 1], higher is more similar. Implementations are safe to call from several threads.
    """

    #: The model's name (e.g. ``sentence-transformers/all-MiniLM-L6-v2``).
    name: str
    #: Output dimension ``d``.
    dimension: int
    #: The model's real input window in tokens, special tokens included: text past it is truncated
    #: by the model, so the chunker keeps chunks within ``max_tokens - special_tokens``.
    max_tokens: int
    #: Special tokens the model adds to every input (``[CLS]`` and ``[SEP]`` for BERT: 2).
    special_tokens: int = 0

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (models without files are always loaded)."""
        return True

    def load(self) -> None:  # noqa: B027 - optional hook: an embedder with nothing to load keeps it
        """Load the model now rather than on first use. Raises ``EmbeddingUnavailable``."""

    @abstractmethod
    def tokenize(self, text: str) -> list[Token]:
        """The tokens of ``text`` without special tokens and without truncation, with character
        offsets into ``text``."""

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` without special tokens and without truncation."""
        return len(self.tokenize(text))

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (chunks) in batches.

        Returns:
            ``(n, d)`` float32, each row L2-normalised, rows in the order of ``texts``.

        Raises:
            InvalidArgument: ``texts`` is empty, or an item is not a ``str`` or is blank.
            EmbeddingUnavailable: the model cannot be loaded or run.
        """

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """Embed a search query (models with query/document prefixes apply the query one).

        Returns:
            ``(d,)`` float32, L2-normalised.

        Raises:
            InvalidArgument: ``text`` is blank. EmbeddingUnavailable: as above.
        """
