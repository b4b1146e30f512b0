"""E-mail: .eml, .mbox, Outlook .msg. Placeholder until its reader lands (issue 27)."""
from knowledge.errors import UnsupportedFile
from knowledge.ingest._compose import ReadPart
from knowledge.ingest._text import decode
from knowledge.ingest.document import Document


def read_eml(data: bytes, read_part: ReadPart) -> Document:
    from knowledge.ingest._text import Builder
    b = Builder()
    b.add(decode(data))
    return b.build("eml", empty="no text")


def read_mbox(data: bytes, read_part: ReadPart) -> Document:
    return read_eml(data, read_part)


def read_msg(data: bytes, read_part: ReadPart) -> Document:
    raise UnsupportedFile("unsupported: an Outlook message (.msg)")
