"""Input checks and output normalisation shared by every :class:`~knowledge.embeddings.Embedder`."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from knowledge.errors import EmbeddingUnavailable, InvalidArgument


def check_text(text: object) -> str:
    """``text`` if it is a ``str`` (blank allowed: it has no tokens), else :class:`InvalidArgument`."""
    if not isinstance(text, str):
        raise InvalidArgument(f"Expected a str to tokenize, got {type(text).__name__}.")
    return text


def check_query(text: object) -> str:
    """``text`` if it is a non-blank ``str``, else :class:`InvalidArgument`."""
    if not isinstance(text, str):
        raise InvalidArgument(f"The query must be a str, got {type(text).__name__}.")
    if not text.strip():
        raise InvalidArgument("The query is blank (empty or whitespace only); there is nothing to embed.")
    return text


def check_texts(texts: Iterable[str]) -> list[str]:
    """``texts`` as a list if it is a non-empty sequence of non-blank ``str``.

    Raises:
        InvalidArgument: ``texts`` is a single ``str``, not iterable or empty, or ``texts[i]`` is not a
            ``str`` or is blank; the message names ``i``.
    """
    if isinstance(texts, (str, bytes)):
        raise InvalidArgument(
            f"Expected a sequence of str to embed, got a single {type(texts).__name__};"
            " wrap it in a list, or use embed_query for a query."
        )
    try:
        items = list(texts)
    except TypeError:
        raise InvalidArgument(f"Expected a sequence of str to embed, got {type(texts).__name__}.") from None
    if not items:
        raise InvalidArgument("Expected at least one text to embed, got an empty sequence.")
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise InvalidArgument(f"texts[{i}] is a {type(item).__name__}, expected a str.")
        if not item.strip():
            raise InvalidArgument(f"texts[{i}] is blank (empty or whitespace only); there is nothing to embed.")
    return items


def normalise_rows(vectors: np.ndarray, model_name: str) -> np.ndarray:
    """``vectors`` (``(n, d)``) as a new float32 array with every row scaled to L2 norm 1.

    Raises:
        EmbeddingUnavailable: a row is all zeros or not finite -- the model is broken, and such a
            row cannot be made a unit vector.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    bad = ~np.isfinite(norms[:, 0]) | (norms[:, 0] == 0.0)
    if bad.any():
        raise EmbeddingUnavailable(
            f"The embedding model {model_name} returned a zero or non-finite vector for text"
            f" {int(np.argmax(bad))}; its files may be damaged."
        )
    return vectors / norms
