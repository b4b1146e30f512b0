"""Vector stores: the backend contract (``base``: :class:`Collection`, :class:`VectorBackend`, the
score directions), the store facade with provenance (``store``), exact scoring helpers
(``scoring``), what backends keep for BM25 (``lexical``), the plugin registry, and the built-in
backends: ``memory`` (on disk, exact), ``pgvector`` (PostgreSQL) and ``qdrant``.

A part: may import ``text`` (the analyzer) and the ground; never ``ingest``, ``embeddings``, the
service layer or anything above it.
"""
