"""Shared text plumbing for the readers: cleaning, decoding bytes to text, assembling a Document."""

from __future__ import annotations

import codecs
import re
import unicodedata
from typing import Literal

from knowledge.errors import EmptyDocument
from knowledge.ingest.document import Document, Section, Table

NormalForm = Literal["NFC", "NFD", "NFKC", "NFKD"]

# -- cleaning -------------------------------------------------------------------------------------

#: Invisible format characters: Unicode's Default_Ignorable_Code_Point set (DerivedCoreProperties.txt,
#: Unicode 15.1), less the Hangul fillers (which render as blanks). A person never sees them, yet a
#: zero-width space inside "Wombat\u200bFlow\u200bController" would split the word for BM25 and
#: highlighting. Removed: soft hyphen (visible only where a line breaks there), combining grapheme
#: joiner, Arabic letter mark, Mongolian free variation selectors and vowel separator, zero-width
#: space / non-joiner / joiner, the bidirectional marks, embeddings, overrides and isolates, word
#: joiner, invisible operators, the deprecated format characters, variation selectors, the byte-order
#: mark / zero-width no-break space (anywhere in the text), the interlinear annotation characters'
#: neighbours U+FFF0-U+FFF8, shorthand format controls and the tag characters.
INVISIBLE = (
    "\u00ad\u034f\u061c\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\ufe00-\ufe0f\ufeff\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff"
)
#: Removed everywhere: NUL and the other C0/C1 controls except tab and line feed, lone surrogates,
#: the non-characters U+FFFE/U+FFFF and the :data:`INVISIBLE` format characters.
_JUNK = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff" + INVISIBLE + "]")
_VERTICAL = re.compile("\r\n?|[\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_TRAILING = re.compile(r"[ \t\u00a0\u3000]+$", re.M)
_BLANK_RUN = re.compile(r"\n{3,}")


def clean(text: str, *, form: NormalForm = "NFC", collapse: bool = True) -> str:
    """``text`` ready to return: line ends ``\\n``, Unicode normal form ``form``, no control characters
    (tab and line feed excepted), no lone surrogates, no trailing whitespace on any line, at most one
    blank line in a row, no blank lines at either end.

    ``\\r\\n``, ``\\r``, form feed, vertical tab, NEL and the Unicode line/paragraph separators all become
    ``\\n`` (a form feed is a page break in plain text: it separates, so it must not glue lines).
    With ``collapse=False`` runs of blank lines are kept (for code blocks, which the caller handles).
    """
    text = _VERTICAL.sub("\n", text)
    text = _JUNK.sub("", text)
    text = unicodedata.normalize(form, text)
    text = _JUNK.sub("", text)  # normalisation can compose nothing junky, but cheap to be sure
    text = _TRAILING.sub("", text)
    if collapse:
        text = _BLANK_RUN.sub("\n\n", text)
    return text.strip("\n")


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) turned into one space, stripped."""
    return " ".join(text.split())


def page_ranges(numbers: list[int]) -> str:
    """Page numbers in words, runs joined: ``[3]`` -> ``"page 3"``, ``[1, 2, 3, 7]`` -> ``"pages 1-3, 7"``."""
    if len(numbers) == 1:
        return f"page {numbers[0]}"
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return "pages " + ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def clean_line(text: str, *, form: NormalForm = "NFC") -> str:
    """A heading, title or label: :func:`clean` (invisible characters out, normal form ``form``), then
    :func:`one_line`."""
    return one_line(clean(text, form=form))


# -- decoding -------------------------------------------------------------------------------------

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

#: Scripts that tell a single-byte code page apart from Windows-1252: when the detector's reading of
#: the bytes is in one of these, the detector is trusted; otherwise the text is Latin and is read
#: as Windows-1252 (the detector confuses the Latin code pages on short input).
_NON_LATIN = (
    "CYRILLIC",
    "GREEK",
    "HEBREW",
    "ARABIC",
    "THAI",
    "CJK",
    "HIRAGANA",
    "KATAKANA",
    "HANGUL",
    "ARMENIAN",
    "GEORGIAN",
    "DEVANAGARI",
)


def sniff_encoding(data: bytes) -> tuple[str | None, int]:
    """``(encoding, bom_length)`` decided from a byte-order mark or, without one, from the pattern of
    NUL bytes of UTF-16 text; ``(None, 0)`` when neither tells."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding, len(bom)
    utf16 = _utf16_without_bom(data)
    return (utf16, 0) if utf16 else (None, 0)


def _utf16_without_bom(data: bytes) -> str | None:
    """UTF-16 of mostly-Latin text has a NUL in every other byte: at odd offsets for little endian,
    at even ones for big endian. A NUL-free side and a NUL-rich other side decide."""
    sample = data[:4096]
    half = len(sample) // 2
    if half < 2:
        return None
    even = sample[0 : half * 2 : 2].count(0)
    odd = sample[1 : half * 2 : 2].count(0)
    if odd >= 0.3 * half and even <= 0.02 * half:
        return "utf-16-le"
    if even >= 0.3 * half and odd <= 0.02 * half:
        return "utf-16-be"
    return None


def looks_binary(data: bytes) -> bool:
    """True when ``data`` (a sample) is not text in any encoding this package reads: NUL bytes (more
    than 1 %) that are not UTF-16's pattern, or many (over 5 %) other control characters."""
    sample = data[:8192]
    if not sample or sniff_encoding(sample)[0]:
        return False
    if sample.count(0) > max(1, len(sample) // 100):  # a stray NUL in text is noise, many are binary
        return True
    controls = sum(1 for b in sample if b < 32 and b not in (9, 10, 12, 13, 27))
    return controls > 0.05 * len(sample)


def decode(data: bytes) -> str:
    """Decode the bytes of a text file; never raises.

    Deterministic rules first: a BOM (UTF-8, UTF-16, UTF-32), UTF-16 without BOM by its NUL pattern,
    then strict UTF-8 (which covers ASCII). Otherwise charset-normalizer's best guess is used when it
    reads the bytes as a non-Latin script (Cyrillic, Greek, CJK, ...), and Windows-1252 when the text
    is Latin (with Latin-1 for the five bytes cp1252 leaves undefined).
    """
    encoding, skip = sniff_encoding(data)
    if encoding:
        body = data[skip:]
        unit = 4 if encoding.startswith("utf-32") else 2 if encoding.startswith("utf-16") else 1
        body = body[: len(body) - len(body) % unit]
        try:  # lone surrogates pass through here and are removed by clean()
            return body.decode(encoding, errors="surrogatepass")
        except UnicodeDecodeError:
            return body.decode(encoding, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:  # UTF-8 apart from encoded lone surrogates (WTF-8, CESU-8): clean() drops them
        return data.decode("utf-8", errors="surrogatepass")
    except UnicodeDecodeError:
        pass
    guess = _detector_guess(data)
    if guess is not None:
        return guess
    return _cp1252(data)


def _detector_guess(data: bytes) -> str | None:
    try:
        from charset_normalizer import from_bytes  # noqa: PLC0415 - undeclared encodings only
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    best = from_bytes(data).best()
    if best is None or best.encoding.startswith(("utf_16", "utf_32")):
        return None
    try:
        text = data.decode(best.encoding, errors="replace")
    except LookupError:  # pragma: no cover - charset-normalizer only names Python codecs
        return None
    for ch in text:
        if ord(ch) > 0x24F and unicodedata.name(ch, "").startswith(_NON_LATIN):
            return text
    return None


_CP1252_HOLES = {0x81: "\x81", 0x8D: "\x8d", 0x8F: "\x8f", 0x90: "\x90", 0x9D: "\x9d"}


def _cp1252(data: bytes) -> str:
    """Windows-1252, with the five undefined bytes read as Latin-1 (they become C1 controls, which
    :func:`clean` removes)."""
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return "".join(_CP1252_HOLES.get(b) or bytes([b]).decode("cp1252") for b in data)


# -- assembling -----------------------------------------------------------------------------------


class Builder:
    """Collects blocks of text with their provenance and builds a :class:`Document`.

    Each block is cleaned (:func:`clean`); empty blocks are dropped; blocks are joined with ``"\\n\\n"``.
    Consecutive blocks of equal ``(page, heading)`` share one section; the separator after a block
    belongs to its section, so sections cover the text without gaps. Headings are cleaned too
    (:func:`clean_line`), so an invisible character never splits a word of a heading path.
    """

    def __init__(self, *, form: NormalForm = "NFC") -> None:
        self._form: NormalForm = form
        self._parts: list[str] = []
        self._length = 0
        self._spans: list[list] = []  # [start, end, page, heading]
        self._tables: list[Table] = []
        self.warnings: list[str] = []

    def add(
        self, text: str, *, page: int | None = None, heading: str | None = None, cleaned: bool = False, table_header: int = 0
    ) -> int | None:
        """Append a block; returns its start offset in the text (``None`` when it had no text).

        ``table_header``: the block is a table whose first ``table_header`` lines are its header
        (recorded as a :class:`Table` when the table has rows below the header).
        """
        if not cleaned:
            text = clean(text, form=self._form)
        if not text.strip():
            return None
        if heading is not None:
            heading = clean_line(heading, form=self._form) or None
        if self._parts:
            self._parts.append("\n\n")
            self._length += 2
            self._spans[-1][1] = self._length
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        last = self._spans[-1] if self._spans else None
        if last is not None and last[2] == page and last[3] == heading:
            last[1] = self._length
        else:
            self._spans.append([start, self._length, page, heading])
        if table_header:
            self.table(start, text, table_header)
        return start

    def table(self, start: int, text: str, header_lines: int) -> None:
        """Record the table ``text`` (already added at offset ``start``) with ``header_lines`` lines
        of header, when it has lines below the header."""
        lines = text.split("\n")
        if len(lines) <= header_lines or header_lines < 1:
            return
        self.record_table(start, start + len("\n".join(lines[:header_lines])), start + len(text))

    def record_table(
        self,
        char_start: int,
        header_end: int,
        char_end: int,
        *,
        page: int | None = None,
        bbox: tuple[float, float, float, float] | None = None,
    ) -> None:
        """Record a table by its offsets in the text built so far (see :class:`Table`)."""
        if char_start < header_end < char_end <= self._length:
            self._tables.append(Table(char_start, header_end, char_end, page, bbox))

    def extend_last_table(
        self, char_end: int, page: int | None = None, bbox: tuple[float, float, float, float] | None = None
    ) -> bool:
        """Make the last recorded table end at ``char_end`` (a table that goes on over a page
        break), its box on ``page`` being ``bbox`` when given; ``False`` when there is none or
        ``char_end`` is not past its end."""
        if not self._tables or not (self._tables[-1].char_end < char_end <= self._length):
            return False
        last = self._tables[-1]
        overleaf = (*last.overleaf, (page, bbox)) if page is not None and bbox is not None else last.overleaf
        self._tables[-1] = Table(last.char_start, last.header_end, char_end, last.page, last.bbox, overleaf)
        return True

    @property
    def empty(self) -> bool:
        return not self._parts

    @property
    def length(self) -> int:
        """The length of the text so far (where the next block would start, less its separator)."""
        return self._length

    def build(
        self,
        format: str,
        *,
        empty: str,
        pages: int | None = None,
        warnings: list[str] | None = None,
        title: str | None = None,
        attributes: dict | None = None,
    ) -> Document:
        """The document; :class:`EmptyDocument` with message ``empty`` when no block had text.
        ``warnings`` come first, then those gathered in :attr:`warnings`."""
        if not self._parts:
            raise EmptyDocument(empty)
        text = "".join(self._parts)
        sections = [Section(s, e, page, heading) for s, e, page, heading in self._spans]
        if title is not None:
            title = clean_line(title, form=self._form) or None
        return Document(
            text=text,
            sections=sections,
            format=format,
            pages=pages,
            warnings=list(warnings or []) + self.warnings,
            title=title,
            tables=sorted(self._tables, key=lambda t: t.char_start),
            attributes=dict(attributes or {}),
        )
