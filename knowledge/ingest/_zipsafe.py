"""What every reader of a ZIP file checks before it inflates anything: overlapping entries, the
unpacked size the directory declares, and the member names an old tool wrote in a legacy code page.

Shared by the archive reader (:mod:`knowledge.ingest._archive`) and the readers of ZIP packages
(.docx, .pptx, .xlsx, OpenDocument, EPUB).

**Overlapping entries.** A central directory may point several entries at the same local data, or
at data that overlaps another entry's (David Fifield, "A better zip bomb", WOOT 2019): 400 entries
over one 3 MB member inflate to 400 times what the file shows. Python's :mod:`zipfile` refuses
such entries only from 3.11.8/3.12.2 (gh-109858); :func:`check_overlaps` refuses them on every
version, from the entries' header offsets, their local headers and compressed sizes, before a byte
is inflated.

**Inflated bytes.** :mod:`zipfile` never returns more than an entry's declared ``file_size`` (it cuts
the inflated stream there and then fails the CRC), so without overlaps the declared total bounds
what one pass over the members inflates; the archive reader counts the bytes as they come all the
same (a member may declare less than it holds, or more) against one :class:`Budget` per document.

**Legacy names.** Members without the UTF-8 flag (general purpose bit 11, APPNOTE 6.3.10 §4.4.4)
are decoded by :mod:`zipfile` as cp437, which turns names that Windows wrote in its OEM or ANSI code
page (cp866, cp1251, Shift_JIS, GBK, ...) into mojibake. :func:`member_names` recovers them: the
Info-ZIP Unicode Path extra field (0x7075, APPNOTE §4.6.9) when its CRC matches, else UTF-8 when the
bytes are valid UTF-8, else the code page whose text reads most plausibly (:func:`guess_encoding`).
"""

from __future__ import annotations

import itertools
import struct
import unicodedata
import zipfile
import zlib
from collections import Counter

from knowledge.errors import FileTooLarge, UnsupportedFile
from knowledge.ingest._cost import expect

#: Inflated bytes all archives of one document may produce together when the caller gives no file
#: size limit: 100 MB, the default of the setting ``ingest.max_file_mb`` (:mod:`knowledge.config`).
DEFAULT_MAX_BYTES = 100_000_000

#: A ZIP package (.docx, .xlsx, ...) whose directory declares more unpacked bytes than this (512 MiB)
#: is refused before it is parsed. Higher than :data:`DEFAULT_MAX_BYTES`: a package's XML is verbose
#: and compresses tenfold or more, so a legitimate 30 MB workbook unpacks to 300 MB.
MAX_PACKAGE_BYTES = 512 * 1024 * 1024

_LOCAL = b"PK\x03\x04"
_LOCAL_LEN = 30  # APPNOTE §4.3.7: the fixed part of a local file header


class Budget:
    """Inflated bytes left for one document: every archive in it, nested ones included, draws on
    the same budget, so a zip of zips inflates no more in total than one file may be large.

    Args:
        limit: bytes (``None``: :data:`DEFAULT_MAX_BYTES`).
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = DEFAULT_MAX_BYTES if limit is None else limit
        self.used = 0

    @property
    def left(self) -> int:
        """Bytes that may still be inflated (>= 0)."""
        return max(self.limit - self.used, 0)

    def spend(self, n: int) -> None:
        """Count ``n`` inflated bytes."""
        self.used += n


def check_overlaps(zf: zipfile.ZipFile, data: bytes) -> None:
    """Refuse a ZIP whose entries share or overlap each other's local data.

    Each entry spans its local header (30 bytes, its name and extra field, read from the header
    itself) and ``compress_size`` bytes of data from ``header_offset``; entries whose local header is
    not where the directory says are left to fail when read (they are damaged, not overlapping).

    Raises:
        UnsupportedFile: ``"refused: 400 entries of this ZIP share the same compressed data (an
            overlapping-entries zip bomb)"``, or ``"... overlap each other's compressed data ..."``.
    """
    spans: list[tuple[int, int]] = []
    for info in zf.infolist():
        start = info.header_offset
        header = data[start : start + _LOCAL_LEN]
        if len(header) < _LOCAL_LEN or not header.startswith(_LOCAL):
            continue
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        spans.append((start, start + _LOCAL_LEN + name_len + extra_len + max(info.compress_size, 0)))
    if len(spans) < 2:
        return
    per_offset = Counter(start for start, _ in spans)
    shared = sum(n for n in per_offset.values() if n > 1)
    if shared:
        raise UnsupportedFile(
            f"refused: {shared:,} entries of this ZIP share the same compressed data (an overlapping-entries zip bomb)"
        )
    spans.sort()
    overlapping: set[int] = set()
    end = spans[0][1]
    for i in range(1, len(spans)):
        start, stop = spans[i]
        if start < end:
            overlapping.update((i - 1, i))
        end = max(end, stop)
    if overlapping:
        raise UnsupportedFile(
            f"refused: {len(overlapping):,} entries of this ZIP overlap each other's compressed"
            " data (an overlapping-entries zip bomb)"
        )


def declared_size(zf: zipfile.ZipFile) -> int:
    """Bytes the directory says the members unpack to, together."""
    return sum(max(i.file_size, 0) for i in zf.infolist())


def check_package(zf: zipfile.ZipFile, data: bytes, what: str, limit: int = MAX_PACKAGE_BYTES) -> None:
    """The checks of a ZIP package (``what``: "DOCX", "workbook", "EPUB", ...) before its reader
    parses it: no overlapping entries (:func:`check_overlaps`), a declared unpacked total within
    ``limit`` bytes, and that total told to the watchdog (:func:`~knowledge.ingest._cost.expect`).

    Raises:
        UnsupportedFile: overlapping entries.
        FileTooLarge: the package declares more than ``limit`` bytes unpacked.
    """
    check_overlaps(zf, data)
    unpacked = declared_size(zf)
    if unpacked > limit:
        raise FileTooLarge(f"This {what} unpacks to {unpacked:,} bytes, over the limit of {limit:,} bytes.")
    expect(f"the {what} declares {unpacked / 1e6:,.1f} MB unpacked in {len(zf.infolist()):,} parts")


# -- legacy member names --------------------------------------------------------------------------

#: Code pages an old ZIP tool may have written names in: cp437 (the ZIP default, APPNOTE appendix D),
#: the DOS/Windows OEM code pages Windows' own "compressed folders" use (Western and Central European,
#: Cyrillic, Japanese, Simplified and Traditional Chinese, Korean) and the Windows ANSI code pages
#: other tools use. In order of preference when two read equally well.
LEGACY_ENCODINGS = ("cp437", "cp850", "cp1252", "cp866", "cp1251", "cp852", "cp1250", "cp932", "gb18030", "cp950", "cp949")

#: Double-byte code pages -> the lead-byte ranges of their common characters and the lowest trail
#: byte there: JIS X 0208 kana and level-1/2 kanji (cp932), GB 2312 hanzi (gb18030), Big5's frequent
#: and less frequent hanzi (cp950), KS X 1001 Hangul and Hanja (cp949). A character outside them (a
#: vendor extension such as GBK's or UHC's) is unlikely in a file name, so a decoding full of them is
#: unlikely to be the right one.
_COMMON = {
    "cp932": (((0x82, 0x83), (0x88, 0x9F), (0xE0, 0xEA)), 0x40),
    "gb18030": (((0xB0, 0xF7),), 0xA1),
    "cp950": (((0xA4, 0xF9),), 0x40),
    "cp949": (((0xB0, 0xC8), (0xCA, 0xFD)), 0xA1),
}


def member_names(zf: zipfile.ZipFile) -> dict[str, str]:
    """Each member's real name, keyed by :mod:`zipfile`'s ``ZipInfo.filename``: the same for names
    flagged UTF-8 or pure ASCII; recovered (see the module's docstring) for the others.

    The names without the UTF-8 flag are decoded together in the one encoding that reads them best
    (one tool wrote them all); a name that encoding cannot decode is guessed on its own.
    """
    names: dict[str, str] = {}
    legacy: list[tuple[zipfile.ZipInfo, bytes]] = []
    for info in zf.infolist():
        if info.flag_bits & 0x800:
            continue
        raw = info.orig_filename.encode("cp437")  # zipfile decoded the raw bytes as cp437: undo it
        unicode_path = _unicode_path(info.extra, raw)
        if unicode_path is not None:
            names[info.filename] = _as_member_name(unicode_path)
        elif not raw.isascii():
            legacy.append((info, raw))
    if legacy:
        encoding = guess_encoding(b"\n".join(raw for _, raw in legacy)[:8192])
        for info, raw in legacy:
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError:
                text = raw.decode(guess_encoding(raw), errors="replace")
            names[info.filename] = _as_member_name(text)
    return names


def _as_member_name(text: str) -> str:
    """As :class:`zipfile.ZipInfo` does with a name: cut at a NUL (kept, for the reader to refuse)."""
    return text.replace("\\", "/")


def _unicode_path(extra: bytes, raw: bytes) -> str | None:
    """The Info-ZIP Unicode Path extra field's name (tag 0x7075: version 1, the CRC-32 of the header's
    name, the name in UTF-8), when it is there and its CRC matches ``raw``; else ``None``."""
    i = 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[i : i + 4])
        body = extra[i + 4 : i + 4 + size]
        if tag == 0x7075 and len(body) >= 5 and body[0] == 1:
            (crc,) = struct.unpack("<I", body[1:5])
            if crc == zlib.crc32(raw):
                try:
                    return body[5:].decode("utf-8")
                except UnicodeDecodeError:
                    return None
        i += 4 + size
    return None


def guess_encoding(raw: bytes) -> str:
    """The encoding ``raw`` (non-ASCII file names, joined by newlines) was most likely written in:
    ``"utf-8"`` when it is valid UTF-8, else the one of :data:`LEGACY_ENCODINGS` whose decoding reads
    most plausibly -- least "mess" by charset-normalizer's measure (symbols, box drawing, accents in
    odd places), then fewest letters of two scripts side by side ("A쨚o") and fewest rare
    double-byte characters; ties go to the earlier encoding, so cp437 wins when it reads as well as
    any other."""
    try:
        raw.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer.md import mess_ratio  # noqa: PLC0415 - only for legacy names

    best, best_score = "cp437", float("inf")
    for rank, encoding in enumerate(LEGACY_ENCODINGS):
        try:
            text = raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        score = mess_ratio(text, 1.0) + _script_mix(text) + _rare(text, encoding) + rank * 1e-6
        if score < best_score:
            best, best_score = encoding, score
    return best


def _script(ch: str) -> str:
    """A letter's script, coarsely: the first word of its Unicode name, with the Japanese scripts
    and Han as one ("CJK")."""
    name = unicodedata.name(ch, "")
    word = name.split(" ", 1)[0]
    if word in ("CJK", "HIRAGANA", "KATAKANA", "HALFWIDTH") and "HANGUL" not in name:
        return "CJK"
    return word


def _script_mix(text: str) -> float:
    """Share of neighbouring letters of different scripts among the neighbouring letters (a Korean
    syllable between Latin letters, Hangul beside Han)."""
    pairs = mixed = 0
    for a, b in itertools.pairwise(text):
        if a.isalpha() and b.isalpha() and not (a.isascii() and b.isascii()):
            pairs += 1
            mixed += _script(a) != _script(b)
    return mixed / pairs if pairs else 0.0


def _rare(text: str, encoding: str) -> float:
    """Share of the double-byte characters outside the encoding's common ranges (:data:`_COMMON`)
    among the non-ASCII characters; 0 for single-byte encodings."""
    common = _COMMON.get(encoding)
    if common is None:
        return 0.0
    ranges, low_trail = common
    wide = rare = 0
    for ch in text:
        if ch.isascii():
            continue
        wide += 1
        code = ch.encode(encoding)
        if len(code) != 2 or code[1] < low_trail or not any(lo <= code[0] <= hi for lo, hi in ranges):
            rare += 1
    return rare / wide if wide else 0.0
