"""Ingestion: readers (bytes -> :class:`Document`: clean text with pages and heading paths) and the
chunker (:mod:`knowledge.ingest.chunker`).

A part: may import ``embeddings`` (the chunker counts tokens with the embedder), ``text`` and the
ground; never the service layer or anything above it.
"""

import logging

from knowledge.ingest.document import FORMATS, Document, Section, Table
from knowledge.ingest.readers import detect_format, read_document

# A library logs, the application decides where it goes; without a handler of the application's,
# nothing is printed (the logging module's last-resort handler would write warnings to stderr).
logging.getLogger("knowledge.ingest").addHandler(logging.NullHandler())

__all__ = ["FORMATS", "Document", "Section", "Table", "detect_format", "read_document"]
