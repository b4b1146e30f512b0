"""Text to search terms: the analyzer that BM25 ranks with, in every backend and in process.

Tokens are NFKC-folded, lower-cased runs of letters and digits; English stop words are removed
(Lucene's list of 33, :data:`STOP_WORDS`); Snowball English stemming (``py_rust_stemmers``), so
``iterating`` matches ``iterate``. A code identifier joined by ``_`` or ``::`` (``unwrap_or_else``,
``String::from``) also gives itself whole, unstemmed, after the terms of its parts (the "preserve
original" of Lucene's word-delimiter filter), so a query naming it ranks the passages that name it.
Chinese, Japanese and Korean text has no spaces: each CJK character is a token and so is each pair
of neighbouring ones (the unigram + bigram scheme of Lucene's CJK analyzer). Imports nothing of
the project: the text layer is ground.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
#: A code identifier whose parts are joined by ``_`` or ``::`` (``unwrap_or_else``, ``macro_rules``,
#: ``String::from``): kept whole as a term of its own beside its parts.
_COMPOUND = re.compile(r"[^\W\d_]\w*(?:(?:_|::)[^\W_]\w*)+|[^\W\d_]\w*_\w+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
"""English stop words: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words)."""


def _stemmer():
    # The Snowball stemmers compiled from Rust (fastembed depends on this package already); imported
    # when the first analyzer is built, as a heavy third-party extension.
    from py_rust_stemmers import SnowballStemmer  # noqa: PLC0415 - heavy, first use only

    return SnowballStemmer("english")


class Analyzer:
    """Text to BM25 terms (see the module docstring for the rules).

    ``terms("Iterating over Vectors!") -> ["iter", "over", "vector"]``.
    """

    def __init__(self) -> None:
        self._stop = STOP_WORDS
        self._stem = _stemmer().stem_words

    def stem(self, words: Sequence[str]) -> list[str]:
        """The English Snowball stems of ``words`` (lower-cased words in, one stem per word out)."""
        return self._stem(list(words))

    def terms(self, text: str) -> list[str]:
        words: list[str] = []
        for run in _WORD.findall(unicodedata.normalize("NFKC", text).lower()):
            if _CJK.search(run):
                for piece in re.split(f"({_CJK.pattern})", run):
                    if not piece:
                        continue
                    if _CJK.fullmatch(piece):
                        words.extend(piece)
                        words.extend(piece[i : i + 2] for i in range(len(piece) - 1))
                    else:
                        words.append(piece)
            else:
                words.append(run)
        kept = [w for w in words if w not in self._stop]
        stems = self._stem(kept)
        folded = unicodedata.normalize("NFKC", text).lower()
        compounds = _COMPOUND.findall(folded) if ("_" in folded or "::" in folded) else []
        whole = [c.strip("_") for c in compounds]
        return stems + [c for c in whole if "_" in c or "::" in c]


_ANALYZER: Analyzer | None = None


def analyzer() -> Analyzer:
    """The shared :class:`Analyzer` (the stemmer is built once)."""
    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = Analyzer()
    return _ANALYZER


__all__ = ["STOP_WORDS", "Analyzer", "analyzer"]
