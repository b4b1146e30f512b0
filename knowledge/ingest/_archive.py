"""ZIP archives. Placeholder until its reader lands (issue 27)."""
from knowledge.errors import UnsupportedFile
from knowledge.ingest._compose import ReadPart
from knowledge.ingest.document import Document


def read_zip(data: bytes, read_part: ReadPart) -> Document:
    raise UnsupportedFile("unsupported: a ZIP archive; unpack it and add its files")
