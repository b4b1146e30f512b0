"""Documents inside documents: a mail's attachments, an archive's members, an object embedded in a
slide deck. Each part is read by its own reader (through a :data:`ReadPart` the entry point hands
the container's reader) and appended to the container's text with its provenance path in front of
its headings, so a hit in a PDF attached to a mail says ``"Subject > report.pdf > Results"``, page 3.

A part that cannot be read is named in the container's warnings with its reason, and the rest goes
on (issue 27: "the mail indexes, the attachment is reported").
"""

from __future__ import annotations

from collections.abc import Callable

from knowledge.errors import KnowledgeError
from knowledge.ingest._text import Builder
from knowledge.ingest.document import Document

#: ``read_part(data, name)``: the :class:`Document` of an embedded file, read by the format its
#: bytes say (``name`` only breaks ties between the text-like formats, as in ``read_document``).
#: Raises what ``read_document`` raises, and ``UnsupportedFile`` once parts nest deeper than
#: :data:`MAX_DEPTH`.
ReadPart = Callable[[bytes, str], Document]

#: How deep parts may nest (a zip in a mail in a zip ...): the container read directly is depth 0.
#: Six: Tika's recursive-embedding test document nests a text file five deep (docx > OLE package
#: zip > zip > zip > zip > txt). Size bounds per archive (``_archive``) keep each level small.
MAX_DEPTH = 6

#: Separator of a provenance path: the same as a heading path's.
SEP = " > "


def join_path(*labels: str | None) -> str | None:
    """``"a > b"`` of the labels that are not empty; ``None`` when none is."""
    parts = [p for p in labels if p]
    return SEP.join(parts) or None


def add_document(
    builder: Builder, doc: Document, label: str | None, *, page: int | None = None, merge: bool = False
) -> None:
    """Append ``doc``'s text to ``builder``, each section's heading prefixed with ``label``.

    A section keeps its own page; when it has none, ``page`` (the container's page or slide the
    part sits on) is used. With ``merge``, a heading that already is ``label`` or starts with it
    (an e-book chapter whose first heading is its title) is not prefixed again. Tables keep their
    header so the chunker still repeats it. ``doc``'s warnings are added to the builder's,
    prefixed with ``label``.
    """
    for s in doc.sections:
        block = doc.text[s.char_start : s.char_end].rstrip("\n")
        if not block.strip():
            continue
        heading = s.heading
        path: str | None
        if merge and label and heading and (heading == label or heading.startswith(label + SEP)):
            path = heading
        else:
            path = join_path(label, heading)
        start = builder.add(block, page=s.page if s.page is not None else page, heading=path, cleaned=True)
        if start is None:
            continue
        for t in doc.tables:
            if s.char_start <= t.char_start and t.char_end <= s.char_start + len(block):
                shift = start - s.char_start
                builder.record_table(t.char_start + shift, t.header_end + shift, t.char_end + shift)
    builder.warnings.extend(f"{label}: {w}" if label else w for w in doc.warnings)


def add_part(
    builder: Builder, read_part: ReadPart, data: bytes, name: str, label: str | None, *, page: int | None = None
) -> bool:
    """Read the embedded file ``data`` (called ``name``) and append it under ``label``
    (:func:`add_document`). A part that fails is named in the builder's warnings with its reason
    (``"report.pdf: not read: wrong password ..."``) and ``False`` is returned; nothing is raised."""
    try:
        doc = read_part(data, name)
    except KnowledgeError as exc:
        builder.warnings.append(f"{label or name}: not read: {exc}")
        return False
    add_document(builder, doc, label, page=page)
    return True
