"""A few chunks of text with random vectors, for the lexical (BM25) index tests of the memory and qdrant
backends (tests/vectorstore/test_lexical_persisted.py, test_qdrant_lexical.py)."""

from __future__ import annotations

import numpy as np

from knowledge.vectorstore.base import Point

DIM = 8

DOCS = [
    ("a", "Recoverable errors with Result", "Most errors are not serious enough to stop the program."),
    ("a", "Unrecoverable errors with panic!", "Sometimes bad things happen and panic! stops the program."),
    ("b", "Iterating over vectors", "Use a for loop to iterate over the elements of a vector."),
    ("b", "Hash maps", "A HashMap stores keys and values; iterating over a hash map is possible too."),
    ("c", "Lifetimes", "Every reference has a lifetime; the borrow checker compares lifetimes."),
    ("c", "中文", "向量数据库支持混合检索，关键词检索与向量检索结合。"),
]


def vec(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)


def points(docs=DOCS, version=0):
    out = []
    for i, (file_id, heading, text) in enumerate(docs):
        out.append(
            Point(
                f"{file_id}:{i}",
                vec(i),
                {"file_id": file_id, "heading": heading, "text": text, "chunk_index": i, "page": i % 3, "version": version},
            )
        )
    return out


__all__ = ["DIM", "DOCS", "points", "vec"]
