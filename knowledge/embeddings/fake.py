"""A deterministic fake embedder for fast unit tests: feature hashing of words, no model files."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from itertools import islice

import numpy as np

from knowledge.embeddings._inputs import check_query, check_text, check_texts
from knowledge.embeddings.base import Embedder, Token
from knowledge.errors import InvalidArgument

#: A token is a run of word characters, one CJK character, or one other non-space character
#: (punctuation, a symbol, an emoji).
#: CJK ideographs and kana are one token each, as BERT-style tokenizers treat them.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"(?P<word>[{_CJK}]|(?:(?![{_CJK}])\w)+)|[^\w\s]")


def _hash64(word: str) -> int:
    """A stable 64-bit hash (blake2b), the same in every process, unlike the salted ``hash()``."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest(), "little")


class HashEmbedder(Embedder):
    """Signed feature hashing of lowercased words, L2-normalised: texts that share words score higher.

    Every word (a ``\\w+`` run) adds +1 or -1 to one of ``dimension`` coordinates, both chosen by a
    stable hash of the word, so the same text gives the same vector in every process. Punctuation is
    tokenized but does not count. Only the first ``max_tokens`` tokens count, like a real model's
    truncation; there are no special tokens (``special_tokens = 0``). A text without words (only
    punctuation, say) gets a fixed unit vector, every coordinate ``1/sqrt(dimension)``.

    Args:
        dimension: output dimension ``d``.
        max_tokens: the fake input window in tokens.

    Raises:
        InvalidArgument: ``dimension`` or ``max_tokens`` is below 1.
    """

    special_tokens = 0

    def __init__(self, dimension: int = 64, max_tokens: int = 64) -> None:
        if dimension < 1 or max_tokens < 1:
            raise InvalidArgument(
                f"HashEmbedder needs dimension >= 1 and max_tokens >= 1, got {dimension} and {max_tokens}."
            )
        self.name = f"fake/hash-{dimension}"
        self.dimension = dimension
        self.max_tokens = max_tokens
        self._no_words = np.full(dimension, 1.0 / np.sqrt(dimension), dtype=np.float32)

    def tokenize(self, text: str) -> list[Token]:
        """Words and single punctuation characters of ``text``, with ``str`` offsets into it.

        ``text[t.start:t.end] == t.text``; ``t.id`` is a stable 32-bit hash of the lowercased token.

        Raises:
            InvalidArgument: ``text`` is not a ``str``.
        """
        check_text(text)
        return [Token(_hash64(m.group().lower()) >> 32, m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Each of :meth:`tokenize`'s tokens' ``(start, end)`` ``str`` offsets into ``text``, without
        hashing. Raises: InvalidArgument: ``text`` is not a ``str``."""
        if type(self).tokenize is not HashEmbedder.tokenize:  # a subclass tokenizes its own way
            return super().token_spans(text)
        check_text(text)
        return [m.span() for m in _TOKEN.finditer(text)]

    def tokenizer_twin(self) -> Embedder | None:
        """A plain :class:`HashEmbedder` of the same shape (it pickles); ``None`` for a subclass."""
        return HashEmbedder(self.dimension, self.max_tokens) if type(self) is HashEmbedder else None

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            ``(n, d)`` float32, each row L2-normalised, in the order of ``texts``.

        Raises:
            InvalidArgument: ``texts`` is empty, or an item is not a ``str`` or is blank.
        """
        return np.stack([self._vector(text) for text in check_texts(texts)])

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a query (the same function as a document).

        Returns:
            ``(d,)`` float32, L2-normalised.

        Raises:
            InvalidArgument: ``text`` is not a ``str`` or is blank.
        """
        return self._vector(check_query(text))

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for match in islice(_TOKEN.finditer(text), self.max_tokens):
            if match.lastgroup == "word":
                h = _hash64(match.group().lower())
                vector[h % self.dimension] += 1.0 if h >> 63 else -1.0
        norm = np.linalg.norm(vector)
        return vector / norm if norm > 0 else self._no_words.copy()
