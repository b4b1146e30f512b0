"""The service layer: the stores, their ingestion and their search, under one composition root.

* ``stores.py`` -- :class:`Stores`: create, open, rename and delete stores (catalog + backend);
* ``indexing.py`` -- :class:`Indexer`, the only writer of chunks: read, chunk, embed, upsert;
* ``search.py`` -- :class:`Searcher`: vector, words-only and hybrid search with provenance;
* ``fusion.py`` -- the in-process BM25 index and reciprocal rank fusion;
* ``templates.py`` -- vector-store templates; ``jobs.py`` -- background ingest jobs.

May import the parts (``catalog``, ``vectorstore``, ``filestore``, ``embeddings``, ``ingest``,
``llm``), ``text`` and the ground; never the features, the workbench or a surface above it.
"""
