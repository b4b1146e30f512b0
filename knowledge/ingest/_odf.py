"""OpenDocument .odt/.ods/.odp. Placeholder until its reader lands (issue 27)."""
from knowledge.errors import UnsupportedFile
from knowledge.ingest._compose import ReadPart
from knowledge.ingest.document import Document


def read_odf(data: bytes, fmt: str, read_part: ReadPart) -> Document:
    raise UnsupportedFile(f"unsupported: an OpenDocument file (.{fmt})")
