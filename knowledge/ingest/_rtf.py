"""RTF documents. Placeholder until its reader lands (issue 27)."""
from knowledge.errors import UnsupportedFile
from knowledge.ingest.document import Document


def read_rtf(data: bytes) -> Document:
    raise UnsupportedFile("unsupported: an RTF document")
