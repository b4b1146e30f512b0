"""EPUB e-books. Placeholder until its reader lands (issue 27)."""
from knowledge.errors import UnsupportedFile
from knowledge.ingest.document import Document


def read_epub(data: bytes) -> Document:
    raise UnsupportedFile("unsupported: an EPUB e-book")
