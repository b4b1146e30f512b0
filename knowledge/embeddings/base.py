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

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """The character span ``(start, end)`` of each of :meth:`tokenize`'s tokens, in order.

        Returns:
            ``n`` pairs for the ``n`` tokens of ``text``: ``text[start:end]`` (Python ``str``
            indices, ``end`` exclusive) is the source of the token; ``[(t.start, t.end) for t in
            self.tokenize(text)]``, which is the default. An embedder whose tokenizer gives offsets
            directly overrides it to skip building :class:`Token` objects (the chunker only needs spans).

        Raises:
            As :meth:`tokenize`.
        """
        return [(t.start, t.end) for t in self.tokenize(text)]

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` without special tokens and without truncation."""
        return len(self.tokenize(text))

    def tokenizer_twin(self) -> Embedder | None:
        """A small picklable copy of this model's tokenizer, for chunking in another process.

        The twin's :meth:`tokenize`, :meth:`count_tokens`, ``name``, ``max_tokens`` and
        ``special_tokens`` equal this embedder's; it cannot embed. ``None`` (the default): the
        tokenizer cannot leave this process, so documents are chunked here
        (:mod:`knowledge.ingest.isolated`). May load the model (to read its tokenizer).
        """
        return None

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


class TokenizerTwin(Embedder):
    """A Hugging Face ``tokenizers`` tokenizer standing in for its model where only tokens are needed.

    Built from the tokenizer's JSON (``Tokenizer.to_str()``), which is all that is pickled; the
    Rust tokenizer is rebuilt on first use. :meth:`tokenize` gives the same tokens and offsets as
    the model's own (no special tokens, no truncation, no padding). :meth:`embed_documents` and
    :meth:`embed_query` raise ``NotImplementedError``: a twin only counts.
    """

    def __init__(self, name: str, dimension: int, max_tokens: int, special_tokens: int, tokenizer_json: str) -> None:
        self.name, self.dimension = name, dimension
        self.max_tokens, self.special_tokens = max_tokens, special_tokens
        self.tokenizer_json = tokenizer_json
        self._tokenizer: object | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_tokenizer"] = None
        return state

    def _encode(self, text: str):
        if self._tokenizer is None:
            from tokenizers import Tokenizer  # noqa: PLC0415 - heavy (Rust), only where a twin tokenizes

            tokenizer = Tokenizer.from_str(self.tokenizer_json)
            tokenizer.no_truncation()
            tokenizer.no_padding()
            self._tokenizer = tokenizer
        return self._tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]

    def tokenize(self, text: str) -> list[Token]:
        """The tokens of ``text`` with ``str`` offsets, as the model's tokenizer gives them."""
        enc = self._encode(text)
        return [Token(i, t, start, end) for i, t, (start, end) in zip(enc.ids, enc.tokens, enc.offsets)]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Each token's ``(start, end)`` ``str`` offsets into ``text``: the tokenizer's own ``offsets``."""
        if type(self).tokenize is not TokenizerTwin.tokenize:  # a subclass tokenizes its own way
            return super().token_spans(text)
        return self._encode(text).offsets

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens, no truncation)."""
        return len(self._encode(text).ids)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError("a tokenizer twin cannot embed")

    def embed_query(self, text: str) -> np.ndarray:
        raise NotImplementedError("a tokenizer twin cannot embed")
