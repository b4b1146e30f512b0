"""What a reader returns: the clean text of one document and where each part of it came from.

A :class:`Document` is the single shape every reader (PDF, Office, OpenDocument, EPUB, RTF, mail,
archives, Markdown, text, HTML, CSV) produces and the chunker consumes. Offsets are ``str`` indices
into :attr:`Document.text` (code points, not bytes, not UTF-16 units):
``document.text[s.char_start:s.char_end]`` is the text of section ``s``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The values :attr:`Document.format` can take.
FORMATS: tuple[str, ...] = (
    "pdf",
    "docx",
    "pptx",
    "xlsx",
    "xls",
    "odt",
    "ods",
    "odp",
    "epub",
    "rtf",
    "eml",
    "mbox",
    "msg",
    "tnef",
    "zip",
    "markdown",
    "text",
    "html",
    "csv",
    "image",
)


@dataclass(frozen=True, slots=True)
class Section:
    """A contiguous span of :attr:`Document.text` with one provenance.

    ``[char_start, char_end)`` are ``str`` indices into the document's text. ``page`` is the 1-based
    page number (PDF; image files read by OCR: 1, or the frame of a multi-page TIFF; else ``None``).
    ``heading`` is the heading path above the span, outermost first, joined with ``" > "`` (for
    example ``"Guide > Install > Linux"``; Markdown, DOCX and HTML), or ``None`` before the first
    heading and for formats without headings.
    """

    char_start: int
    char_end: int
    page: int | None = None
    heading: str | None = None


@dataclass(frozen=True, slots=True)
class Table:
    """A table in :attr:`Document.text`: ``[char_start, char_end)`` is the whole table, of which
    ``[char_start, header_end)`` is its header (the first row; for Markdown with its delimiter row).

    The chunker repeats the header at the start of every chunk that begins inside the table's body,
    so a row cut away from its header still says what each value means. A PDF's tables also carry
    their ``page`` (1-based) and ``bbox``: ``(x0, top, x1, bottom)`` in PDF points (1/72 inch) from
    the page's top-left corner; other formats leave both ``None``. A PDF table that goes on overleaf
    has ``overleaf``: ``(page, bbox)`` for each later page it goes on to, in page order.
    """

    char_start: int
    header_end: int
    char_end: int
    page: int | None = None
    bbox: tuple[float, float, float, float] | None = None
    overleaf: tuple[tuple[int, tuple[float, float, float, float]], ...] = ()

    def boxes(self) -> list[tuple[int | None, tuple[float, float, float, float]]]:
        """``(page, bbox)`` of every page the table is on that has a box: its first, then overleaf."""
        first = [(self.page, self.bbox)] if self.bbox is not None else []
        return [*first, *self.overleaf]


@dataclass(frozen=True, slots=True)
class Document:
    """The clean text of one document with its provenance.

    ``text`` is the extracted text: no NUL characters, no lone surrogates, ``\\n`` line ends, no trailing
    whitespace on any line, blocks (paragraphs, tables, pages) separated by one blank line (``"\\n\\n"``;
    only Markdown code blocks keep longer runs of blank lines as written). ``sections`` are in text order
    and do not overlap; the readers of this package make them cover the whole text (the first starts at
    0, each ends where the next starts, the last ends at ``len(text)``; the blank line between two blocks
    belongs to the section before it) and merge neighbours of equal provenance. ``format`` is one of
    :data:`FORMATS`; ``pages`` the page count (PDF and images, else ``None``); ``warnings`` sentences for
    a person (for example ``"page 3 has no text layer (scanned? OCR needed)"``; whatever a reader skipped
    is named here, nothing is dropped silently); ``title`` from the document's metadata or its first
    title-like heading, when there is one. ``tables`` are the document's tables with a header row (see
    :class:`Table`), in text order. ``attributes`` are the file's own key/value metadata (a Markdown
    file's YAML front matter): ``str`` keys, values ``str``, ``int``, ``float`` or ``bool`` (lists joined
    with ``", "``).

    Raises:
        ValueError: a section lies outside the text, ends before it starts, or overlaps or precedes
            the one before it.
    """

    text: str
    sections: list[Section]
    format: str
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    title: str | None = None
    tables: list[Table] = field(default_factory=list)
    attributes: dict[str, str | int | float | bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        end = 0
        for s in self.sections:
            if not (end <= s.char_start <= s.char_end <= len(self.text)):
                raise ValueError(
                    f"Section [{s.char_start}, {s.char_end}) must lie in [{end}, {len(self.text)}]:"
                    " sections are in order, do not overlap, and stay inside the text."
                )
            end = s.char_end
        for t in self.tables:
            if not (0 <= t.char_start <= t.header_end <= t.char_end <= len(self.text)):
                raise ValueError(f"Table [{t.char_start}, {t.header_end}, {t.char_end}) lies outside the text.")
