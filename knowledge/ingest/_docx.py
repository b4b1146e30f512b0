"""DOCX: the text a person sees in Word, in document order, read from the WordprocessingML.

python-docx opens the package (content types, relationships, parts); the body is then walked element
by element (python-docx's own ``iter_inner_content`` skips content controls and text boxes), following
ECMA-376 Part 1. Read: paragraphs, tables (nested ones too; ``" | "`` between cells), content
controls, text boxes, list numbers as Word shows them, headers and footers once, footnotes, endnotes
and comments after the paragraph citing them, tracked insertions, embedded HTML/text/Word parts
(``w:altChunk``) in place, Strict Open XML (mapped to the transitional namespaces). Left out: deleted
and moved-from text, field codes, hidden runs (directly or through a style), first-page and even-page
headers Word does not show -- each counted in the warnings. Phonetic guides read as ``base (guide)``.
What is not read (other
embedded parts, OLE objects, charts, SmartArt) is named in the warnings. Heading styles and outline
levels give the heading path.

The rules one by one, with the ECMA-376 sections: ``docs/ingestion.md``.
"""

from __future__ import annotations

import email
import io
import re
import zipfile
from collections import Counter

from lxml import etree

from knowledge.errors import EmptyDocument, KnowledgeError, UnsupportedFile, in_words
from knowledge.ingest._compose import ReadPart, add_part
from knowledge.ingest._embedded import ooxml_embeddings
from knowledge.ingest._html import read_html
from knowledge.ingest._text import Builder, decode, one_line
from knowledge.ingest._zipsafe import MAX_PACKAGE_BYTES, check_package
from knowledge.ingest.document import Document

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
W = f"{{{W_NS}}}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"

#: A DOCX that unpacks to more than this is refused before python-docx reads it (a "zip bomb").
MAX_UNPACKED_BYTES = MAX_PACKAGE_BYTES

_SAFE_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def read_docx(data: bytes, read_part: ReadPart | None = None, *, _depth: int = 0) -> Document:
    """Read a DOCX (also .docm, .dotx, .dotm, and Strict Open XML); sections carry the heading path.

    With ``read_part``, the files embedded in the document (``word/embeddings/``: OLE packages,
    PDFs, Office files, see :mod:`knowledge.ingest._embedded`) are read by their own format and
    appended after the body under their file names; without it they are named in the warnings.

    Raises:
        UnsupportedFile: a damaged ZIP or a package without a Word main document, with the reason;
            entries that overlap each other's data (an overlapping zip bomb).
        FileTooLarge: the package unpacks to more than :data:`MAX_UNPACKED_BYTES`.
        EmptyDocument: no text at all (for example only images).
    """
    _check_zip(data)
    data = strict_to_transitional(data)
    try:
        from docx.package import Package  # noqa: PLC0415 - heavy, DOCX files only

        part = Package.open(io.BytesIO(data)).main_document_part
        if "wordprocessingml" not in part.content_type and "ms-word" not in part.content_type:
            raise UnsupportedFile(f"unsupported: not a Word document (main part is {part.content_type})")
        reader = _Reader(part, depth=_depth, read_part=read_part)
        if read_part is not None:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                reader.embedded = ooxml_embeddings(zf, "word/", reader.warnings)
        return reader.read()
    except KnowledgeError:
        raise
    except Exception as exc:  # zlib.error, KeyError, XMLSyntaxError, PackageNotFoundError, ...
        raise UnsupportedFile(f"unreadable DOCX: {in_words(exc)}") from exc


def _check_zip(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = {i.filename for i in zf.infolist()}
            check_package(zf, data, "DOCX", MAX_UNPACKED_BYTES)
            bad = zf.testzip()
    except KnowledgeError:
        raise
    except zipfile.BadZipFile as exc:
        raise UnsupportedFile(f"unreadable DOCX: the file is damaged (not a valid ZIP: {exc})") from exc
    except Exception as exc:  # zlib.error, EOFError, NotImplementedError (compression method)
        raise UnsupportedFile(f"unreadable DOCX: the file is damaged ({in_words(exc)})") from exc
    if bad is not None:
        raise UnsupportedFile(f"unreadable DOCX: the file is damaged (member {bad} fails its checksum)")
    if "[Content_Types].xml" not in names:
        raise UnsupportedFile("unreadable DOCX: not an Office package (no [Content_Types].xml)")


#: ISO/IEC 29500 Strict namespaces and the transitional ones python-docx knows (ISO/IEC 29500-4).
#: The relationships entry covers the relationship types too (".../relationships/officeDocument").
STRICT_NAMESPACES: tuple[tuple[bytes, bytes], ...] = tuple(
    (a.encode(), b.encode())
    for a, b in (
        ("http://purl.oclc.org/ooxml/wordprocessingml/main", W_NS),
        (
            "http://purl.oclc.org/ooxml/officeDocument/relationships",
            "http://schemas.openxmlformats.org/officeDocument/2006/relationships",
        ),
        ("http://purl.oclc.org/ooxml/officeDocument/math", "http://schemas.openxmlformats.org/officeDocument/2006/math"),
        (
            "http://purl.oclc.org/ooxml/officeDocument/sharedTypes",
            "http://schemas.openxmlformats.org/officeDocument/2006/sharedTypes",
        ),
        (
            "http://purl.oclc.org/ooxml/officeDocument/customXml",
            "http://schemas.openxmlformats.org/officeDocument/2006/customXml",
        ),
        (
            "http://purl.oclc.org/ooxml/officeDocument/extendedProperties",
            "http://schemas.openxmlformats.org/officeDocument/2006/extended-properties",
        ),
        (
            "http://purl.oclc.org/ooxml/officeDocument/docPropsVTypes",
            "http://schemas.openxmlformats.org/officeDocument/2006/docPropsVTypes",
        ),
        ("http://purl.oclc.org/ooxml/drawingml/main", "http://schemas.openxmlformats.org/drawingml/2006/main"),
        (
            "http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing",
            "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing",
        ),
        ("http://purl.oclc.org/ooxml/drawingml/picture", "http://schemas.openxmlformats.org/drawingml/2006/picture"),
        ("http://purl.oclc.org/ooxml/drawingml/chart", "http://schemas.openxmlformats.org/drawingml/2006/chart"),
        ("http://purl.oclc.org/ooxml/drawingml/diagram", "http://schemas.openxmlformats.org/drawingml/2006/diagram"),
    )
)


def strict_to_transitional(data: bytes) -> bytes:
    """``data`` unchanged, or -- for a Strict Open XML package -- the same package with every XML
    part's Strict namespaces replaced by the transitional ones (:data:`STRICT_NAMESPACES`)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            rels = zf.read("_rels/.rels") if "_rels/.rels" in zf.namelist() else b""
            if b"purl.oclc.org/ooxml/" not in rels:
                return data
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
                for info in zf.infolist():
                    body = zf.read(info)
                    if info.filename.endswith((".xml", ".rels")):
                        for strict, transitional in STRICT_NAMESPACES:
                            body = body.replace(strict, transitional)
                    dst.writestr(info.filename, body)
            return out.getvalue()
    except (zipfile.BadZipFile, KeyError, OSError):
        return data


def _xml(part) -> etree._Element | None:
    element = getattr(part, "_element", None)
    if element is not None:
        return element
    blob = getattr(part, "blob", None)
    return etree.fromstring(blob, _SAFE_PARSER) if blob else None


def _related(part, reltype: str) -> list:
    return [rel.target_part for rel in part.rels.values() if rel.reltype == _RT + reltype and not rel.is_external]


# -- numbering ------------------------------------------------------------------------------------


def _roman(n: int) -> str:
    out = []
    for value, digits in (
        (1000, "m"),
        (900, "cm"),
        (500, "d"),
        (400, "cd"),
        (100, "c"),
        (90, "xc"),
        (50, "l"),
        (40, "xl"),
        (10, "x"),
        (9, "ix"),
        (5, "v"),
        (4, "iv"),
        (1, "i"),
    ):
        while n >= value:
            out.append(digits)
            n -= value
    return "".join(out)


def _letters(n: int) -> str:
    # Word repeats the letter: a..z, aa..zz, aaa..  (ECMA-376 §17.18.59 lowerLetter)
    n = max(n, 1)
    return chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1)


def _format_number(n: int, fmt: str) -> str:
    if fmt == "decimalZero":
        return f"{n:02d}"
    if fmt == "lowerRoman":
        return _roman(n)
    if fmt == "upperRoman":
        return _roman(n).upper()
    if fmt == "lowerLetter":
        return _letters(n)
    if fmt == "upperLetter":
        return _letters(n).upper()
    return str(n)  # decimal, and the fallback for the many national formats


class _Level:
    __slots__ = ("fmt", "start", "text")

    def __init__(self, fmt: str, text: str | None, start: int) -> None:
        self.fmt, self.text, self.start = fmt, text, start


class _Numbering:
    """Resolves ``(numId, ilvl)`` to the prefix Word shows, counting as the body is read."""

    def __init__(self, root: etree._Element | None) -> None:
        self._abstract: dict[str, dict[int, _Level]] = {}
        self._nums: dict[str, tuple[str, dict[int, _Level], dict[int, int]]] = {}
        self._counters: dict[str, list[int | None]] = {}
        if root is None:
            return
        links: dict[str, str] = {}  # abstractNum id -> numbering style it borrows its levels from
        defines: dict[str, str] = {}  # numbering style -> the abstractNum id that defines it
        for an in root.iter(W + "abstractNum"):
            aid = an.get(W + "abstractNumId", "")
            self._abstract[aid] = self._levels(an)
            link, define = an.find(W + "numStyleLink"), an.find(W + "styleLink")
            if link is not None:
                links[aid] = link.get(W + "val", "")
            if define is not None:
                defines[define.get(W + "val", "")] = aid
        for aid, style in links.items():  # §17.9.21 numStyleLink: the levels live elsewhere
            if not self._abstract.get(aid) and style in defines:
                self._abstract[aid] = self._abstract.get(defines[style], {})
        for num in root.iter(W + "num"):
            num_id = num.get(W + "numId", "")
            ref = num.find(W + "abstractNumId")
            abstract_id = ref.get(W + "val", "") if ref is not None else ""
            overrides: dict[int, _Level] = {}
            starts: dict[int, int] = {}
            for ov in num.iter(W + "lvlOverride"):
                ilvl = _int(ov.get(W + "ilvl"), 0)
                start = ov.find(W + "startOverride")
                if start is not None:
                    starts[ilvl] = _int(start.get(W + "val"), 1)
                lvl = ov.find(W + "lvl")
                if lvl is not None:
                    overrides.update(self._levels(ov))
            self._nums[num_id] = (abstract_id, overrides, starts)

    @staticmethod
    def _levels(parent: etree._Element) -> dict[int, _Level]:
        levels = {}
        for lvl in parent.iter(W + "lvl"):
            fmt_el, text_el, start_el = lvl.find(W + "numFmt"), lvl.find(W + "lvlText"), lvl.find(W + "start")
            levels[_int(lvl.get(W + "ilvl"), 0)] = _Level(
                fmt_el.get(W + "val", "decimal") if fmt_el is not None else "decimal",
                text_el.get(W + "val") if text_el is not None else None,
                _int(start_el.get(W + "val"), 1) if start_el is not None else 1,
            )
        return levels

    def _level(self, num_id: str, ilvl: int) -> _Level | None:
        if num_id not in self._nums:
            return None
        abstract_id, overrides, starts = self._nums[num_id]
        lvl = overrides.get(ilvl) or self._abstract.get(abstract_id, {}).get(ilvl)
        if lvl is not None and ilvl in starts:
            lvl = _Level(lvl.fmt, lvl.text, starts[ilvl])
        return lvl

    def prefix(self, num_id: str, ilvl: int) -> str | None:
        """The label of the next item at ``ilvl`` of list ``num_id``, or ``None`` (no such list)."""
        lvl = self._level(num_id, ilvl)
        if lvl is None:
            return None
        if lvl.fmt == "none":
            return ""
        counters = self._counters.setdefault(num_id, [None] * 10)
        ilvl = min(max(ilvl, 0), 9)
        current = counters[ilvl]
        counters[ilvl] = lvl.start if current is None else current + 1
        for deeper in range(ilvl + 1, 10):
            counters[deeper] = None
        if lvl.fmt == "bullet":
            return "•"
        template = lvl.text if lvl.text is not None else f"%{ilvl + 1}."

        def level_number(m: re.Match) -> str:
            k = int(m.group(1)) - 1
            other = self._level(num_id, k) if k != ilvl else lvl
            got = counters[k] if 0 <= k < 10 else None
            value = got if got is not None else (other.start if other else 1)
            return _format_number(value, other.fmt if other else "decimal")

        return re.sub(r"%([1-9])", level_number, template).strip()


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


# -- styles ---------------------------------------------------------------------------------------


class _Styles:
    """Paragraph-style facts, following ``w:basedOn``: numbering, outline level, name."""

    def __init__(self, root: etree._Element | None) -> None:
        self._styles: dict[str, etree._Element] = {}
        self._char: dict[str, etree._Element] = {}
        self.default: str | None = None
        #: ``w:docDefaults`` hide every run no style or run property shows again (ECMA-376 §17.7.5.2)
        self.default_vanish = False
        if root is None:
            return
        self.default_vanish = _on(root.find(f"{W}docDefaults/{W}rPrDefault/{W}rPr/{W}vanish"))
        for style in root.iter(W + "style"):
            sid = style.get(W + "styleId")
            if style.get(W + "type") == "character" and sid:
                self._char[sid] = style
            if style.get(W + "type") not in (None, "paragraph"):
                continue
            if sid:
                self._styles[sid] = style
                if style.get(W + "default") in ("1", "true", "on"):
                    self.default = sid

    def vanish(self, char_style: str | None, para_style: str | None) -> bool | None:
        """Whether a run's character style (else its paragraph's style) hides it (``w:vanish``),
        following ``w:basedOn``; ``None`` when no style says."""
        for styles, sid in ((self._char, char_style), (self._styles, para_style)):
            seen = set()
            while sid and sid in styles and sid not in seen:
                seen.add(sid)
                v = styles[sid].find(f"{W}rPr/{W}vanish")
                if v is not None:
                    return _on(v)
                based = styles[sid].find(W + "basedOn")
                sid = based.get(W + "val") if based is not None else None
        return True if self.default_vanish else None

    def _chain(self, sid: str | None):
        seen = set()
        while sid and sid in self._styles and sid not in seen:
            seen.add(sid)
            style = self._styles[sid]
            yield style
            based = style.find(W + "basedOn")
            sid = based.get(W + "val") if based is not None else None

    def num_pr(self, sid: str | None) -> tuple[str | None, int | None]:
        num_id, ilvl = None, None
        for style in self._chain(sid):
            pr = style.find(f"{W}pPr/{W}numPr")
            if pr is None:
                continue
            if num_id is None and pr.find(W + "numId") is not None:
                num_id = pr.find(W + "numId").get(W + "val")
            if ilvl is None and pr.find(W + "ilvl") is not None:
                ilvl = _int(pr.find(W + "ilvl").get(W + "val"), 0)
        return num_id, ilvl

    def heading_level(self, sid: str | None) -> int | None:
        """1-based outline level of the style (Heading 1 -> 1), ``None`` for body text."""
        for style in self._chain(sid):
            outline = style.find(f"{W}pPr/{W}outlineLvl")
            if outline is not None:
                level = _int(outline.get(W + "val"), 9)
                return level + 1 if level < 9 else None
            name = style.find(W + "name")
            m = re.fullmatch(r"heading\s*([1-9])", (name.get(W + "val", "") if name is not None else ""), re.I)
            if m:
                return int(m.group(1))
        return None

    def is_title(self, sid: str | None) -> bool:
        for style in self._chain(sid):
            name = style.find(W + "name")
            if name is not None and name.get(W + "val", "").lower() == "title":
                return True
        return False


# -- the walk -------------------------------------------------------------------------------------

#: Containers whose children are read as if they stood in place of the container.
_TRANSPARENT_INLINE = {
    W + "hyperlink",
    W + "smartTag",
    W + "ins",
    W + "moveTo",
    W + "fldSimple",
    W + "customXml",
    W + "dir",
    W + "bdo",
    W + "sdtContent",
}
_SKIP_INLINE = {
    W + "pPr",
    W + "rPr",
    W + "del",
    W + "moveFrom",
    W + "proofErr",
    W + "bookmarkStart",
    W + "bookmarkEnd",
    W + "commentRangeStart",
    W + "commentRangeEnd",
    W + "permStart",
    W + "permEnd",
    W + "sdtPr",
    W + "sdtEndPr",
}


_NOTE_KINDS = ("footnote", "endnote")
_DRAWING_URI = re.compile(r"/(chart|diagram|chartex)$")


class _Reader:
    def __init__(self, part, *, depth: int = 0, read_part: ReadPart | None = None) -> None:
        self.part = part
        self.depth = depth
        self.read_part = read_part
        self.embedded: list[tuple[str, bytes]] = []
        self.warnings: list[str] = []
        self.skipped: Counter[str] = Counter()
        #: what a person does not see in Word, left out: {"hidden": runs, "deleted": passages, ...}
        self.left_out: Counter[str] = Counter()
        self.notes: dict[str, dict[str, etree._Element]] = {kind: self._notes(kind + "s") for kind in _NOTE_KINDS}
        self.comments: dict[str, etree._Element] = self._comments()
        self.marks: dict[str, int] = dict.fromkeys(_NOTE_KINDS, 0)
        self.cited: set[tuple[str, str]] = set()
        self.pending: list[tuple[str, str, str]] = []  # (kind, id, mark) cited by the paragraph being read
        self.para_style: str | None = None
        self.root = _xml(part)
        styles = _related(part, "styles")
        numbering = _related(part, "numbering")
        self.styles = _Styles(_xml(styles[0]) if styles else None)
        self.numbering = _Numbering(_xml(numbering[0]) if numbering else None)
        self.builder = Builder()
        self.path: list[tuple[int, str]] = []
        self.title: str | None = None
        self.cell_depth = 0

    # public

    def read(self) -> Document:
        body = self.root.find(W + "body") if self.root is not None else None
        if body is None:
            raise UnsupportedFile("unreadable DOCX: the main document has no body")
        headers, footers = self._headers_footers(body)
        for text in headers:
            self.builder.add(text)
        self._blocks(body, in_box=False)
        self.path = []
        for kind in _NOTE_KINDS:  # notes no paragraph cites: still text of the document
            for nid in self.notes[kind]:
                if (kind, nid) not in self.cited:
                    self._add_note(kind, nid, None)
        for cid in self.comments:
            if ("comment", cid) not in self.cited:
                self._add_note("comment", cid, None)
        if self.read_part is not None:
            for name, blob in self.embedded:  # embedded files, each read by its own format
                self.builder.add(f"Embedded file: {name}", heading=name)
                add_part(self.builder, self.read_part, blob, name, name)
        for text in footers:
            self.builder.add(text)
        title = self._core_title() or self.title
        self.warnings.extend(self._left_out_warnings())
        for what, n in sorted(self.skipped.items()):
            self.warnings.append(
                f"{n} {what}{'' if n == 1 else 's'} not read"
                if not what.startswith("embedded part")
                else f"{what} not read" + (f" ({n} times)" if n > 1 else "")
            )
        empty = "no text: this Word document has no text (images or empty tables only?)"
        return self.builder.build("docx", empty=empty, title=title, warnings=self.warnings)

    def _left_out_warnings(self) -> list[str]:
        """Sentences naming what Word does not show and the reader therefore left out."""
        out = []
        n = self.left_out["hidden"]
        if n:
            out.append(f"{n} passage{'' if n == 1 else 's'} formatted as hidden text (not shown in Word) left out")
        n = self.left_out["deleted"]
        if n:
            out.append(f"tracked changes: {n} deleted passage{'' if n == 1 else 's'} left out (insertions are read)")
        for kind in ("header", "footer"):
            n = self.left_out[f"first {kind}"]
            if n:
                out.append(
                    f"{n} first-page {kind}{'' if n == 1 else 's'} left out: the section has no different"
                    " first page, so Word does not show it"
                )
            n = self.left_out[f"even {kind}"]
            if n:
                out.append(
                    f"{n} even-page {kind}{'' if n == 1 else 's'} left out: the document does not use"
                    " different odd and even pages, so Word does not show it"
                )
        return out

    # notes, comments, embedded parts

    def _notes(self, kind: str) -> dict[str, etree._Element]:
        out: dict[str, etree._Element] = {}
        for part in _related(self.part, kind):
            root = _xml(part)
            if root is None:
                continue
            for note in root:
                if note.get(W + "type") in (None, "normal") and note.get(W + "id") is not None:
                    out[note.get(W + "id")] = note
        return out

    def _comments(self) -> dict[str, etree._Element]:
        out: dict[str, etree._Element] = {}
        for part in _related(self.part, "comments"):
            root = _xml(part)
            if root is None:
                continue
            for comment in root.iter(W + "comment"):
                if comment.get(W + "id") is not None:
                    out[comment.get(W + "id")] = comment
        return out

    def _cite(self, kind: str, nid: str | None, parts: list[str], *, custom_mark: bool = False) -> None:
        """A reference to a note or comment in a run: the mark Word shows goes into ``parts``."""
        if nid is None:
            return
        known = self.comments if kind == "comment" else self.notes[kind]
        if nid not in known or (kind, nid) in self.cited:
            return
        self.cited.add((kind, nid))
        mark = ""
        if kind != "comment":
            self.marks[kind] += 1
            mark = str(self.marks[kind]) if kind == "footnote" else _roman(self.marks[kind])
            if not custom_mark:
                parts.append(f"[{mark}]")  # bracketed: a superscript "1" glued to "hot" would make "hot1"
        self.pending.append((kind, nid, mark))

    def _add_note(self, kind: str, nid: str, mark: str | None) -> None:
        element = self.comments[nid] if kind == "comment" else self.notes[kind][nid]
        saved = self.pending
        self.pending = []
        try:
            text = " ".join(one_line(t) for t, _ in self._collect(element))
        finally:
            self.pending = saved
        if not text:
            return
        if kind == "comment":
            author = element.get(W + "author")
            label = f"Comment ({one_line(author)})" if author and author.strip() else "Comment"
            self.builder.add(f"{label}: {text}", heading=self._heading())
        else:
            self.builder.add(f"[{mark}] {text}" if mark else f"{kind.capitalize()}: {text}", heading=self._heading())

    def _flush_notes(self) -> None:
        pending, self.pending = self.pending, []
        for kind, nid, mark in pending:
            self._add_note(kind, nid, mark)

    def _alt_chunk(self, element: etree._Element) -> None:
        """An embedded part (``w:altChunk``) read in place: HTML, MHT, plain text or a Word document."""
        rid = element.get(R + "id")
        try:
            part = self.part.related_parts[rid]
        except KeyError:
            self.warnings.append("an embedded part (altChunk) is missing from the package; not read")
            return
        ctype = (getattr(part, "content_type", "") or "").lower()
        blob = part.blob or b""

        try:
            if "html" in ctype:
                self._add_document(_read_html(decode(blob)))
            elif ctype == "message/rfc822" or str(part.partname).lower().endswith((".mht", ".mhtml")):
                self._add_document(_read_mht(blob))
            elif ctype.startswith("text/plain"):
                self.builder.add(decode(blob), heading=self._heading())
            elif "wordprocessingml" in ctype and self.depth < 3:
                self._add_document(read_docx(blob, self.read_part, _depth=self.depth + 1))
            else:
                self.skipped[f"embedded part of type {ctype or 'unknown'}"] += 1
        except EmptyDocument:
            return
        except KnowledgeError as exc:
            self.warnings.append(f"an embedded part ({ctype}) could not be read: {exc}")

    def _add_document(self, doc: Document) -> None:
        here = self._heading()
        for section in doc.sections:
            heading = " > ".join(h for h in (here, section.heading) if h) or None
            self.builder.add(doc.text[section.char_start : section.char_end], heading=heading)
        self.warnings.extend(f"embedded part: {w}" for w in doc.warnings)

    def _core_title(self) -> str | None:
        try:
            title = self.part.package.core_properties.title
        except Exception:
            return None
        return (title.strip() or None) if isinstance(title, str) else None

    def _headers_footers(self, body: etree._Element) -> tuple[list[str], list[str]]:
        """The distinct texts of the headers and of the footers the sections refer to."""
        sect_prs = list(body.iter(W + "sectPr"))
        result: dict[str, list[str]] = {"header": [], "footer": []}
        seen_parts: set[str] = set()
        shown_ids = self._shown_headers_footers(sect_prs)
        for sect in sect_prs:
            for kind in ("header", "footer"):
                for ref in sect.findall(f"{W}{kind}Reference"):
                    rid = ref.get(R + "id")
                    shown = rid in shown_ids
                    try:
                        target = self.part.related_parts[rid]
                    except KeyError:
                        continue
                    partname = str(target.partname)
                    if partname in seen_parts:
                        continue
                    seen_parts.add(partname)
                    root = _xml(target)
                    if root is None:
                        continue
                    text = "\n\n".join(t for t, _ in self._collect(root))
                    if text.strip() and not shown:
                        self.left_out[f"{ref.get(W + 'type')} {kind}"] += 1
                    elif text.strip() and text not in result[kind]:
                        result[kind].append(text)
        return result["header"], result["footer"]

    def _shown_headers_footers(self, sect_prs: list[etree._Element]) -> set[str]:
        """The relationship ids of the headers and footers Word shows on some page.

        ECMA-376 §17.10.5: a section without a reference of some type inherits the previous
        section's; a "first" header shows only in a section with ``w:titlePg``, an "even" one only
        with ``w:evenAndOddHeaders`` in the settings (§17.15.1.35)."""
        even_pages = self._even_and_odd_headers()
        effective: dict[tuple[str, str], str] = {}
        shown: set[str] = set()
        for sect in sect_prs:
            for ref in sect:
                kind = {W + "headerReference": "header", W + "footerReference": "footer"}.get(ref.tag)
                if kind is not None and ref.get(R + "id"):
                    effective[(kind, ref.get(W + "type", "default"))] = ref.get(R + "id")
            first_page = _on(sect.find(W + "titlePg"))
            for (_, kind_type), rid in effective.items():
                if {"first": first_page, "even": even_pages}.get(kind_type, True):
                    shown.add(rid)
        return shown

    def _even_and_odd_headers(self) -> bool:
        for part in _related(self.part, "settings"):
            root = _xml(part)
            if root is not None and _on(root.find(W + "evenAndOddHeaders")):
                return True
        return False

    def _collect(self, container: etree._Element) -> list[tuple[str, str | None]]:
        """The blocks of ``container`` as ``(text, heading)`` without touching the main builder."""
        saved_builder, saved_path = self.builder, self.path
        collector = _ListBuilder()
        self.builder, self.path = collector, list(saved_path)  # type: ignore[assignment]
        try:
            self._blocks(container, in_box=True)
        finally:
            self.builder, self.path = saved_builder, saved_path
        return collector.blocks

    def _heading(self) -> str | None:
        return " > ".join(text for _, text in self.path) or None

    def _blocks(self, container: etree._Element, *, in_box: bool) -> None:
        for child in container:
            tag = child.tag
            if tag == W + "p":
                self._paragraph(child, in_box=in_box)
            elif tag == W + "tbl":
                lines = self._table_lines(child)
                if lines:
                    text = "[" + "; ".join(lines) + "]" if self.cell_depth else "\n".join(lines)
                    # the first row is the header the chunker repeats
                    self.builder.add(text, heading=self._heading(), table_header=0 if self.cell_depth else 1)
            elif tag == W + "sdt":
                content = child.find(W + "sdtContent")
                if content is not None:
                    self._blocks(content, in_box=in_box)
            elif tag in (W + "customXml", W + "ins", W + "moveTo"):
                self._blocks(child, in_box=in_box)
            elif tag == MC + "AlternateContent":
                choice = _first_choice(child)
                if choice is not None:
                    self._blocks(choice, in_box=in_box)
            elif tag == W + "altChunk":
                self._alt_chunk(child)

    def _paragraph(self, p: etree._Element, *, in_box: bool) -> None:
        parts: list[str] = []
        boxes: list[etree._Element] = []
        style_id, level, prefix = self._paragraph_facts(p)
        self.para_style = style_id
        self._inline(p, parts, boxes)
        text = "".join(parts)
        if prefix is not None and text.strip():
            indent = "  " * level
            text = f"{indent}{prefix} {text.strip()}" if prefix else f"{indent}{text.strip()}"
        heading_level = self._heading_level(p, style_id)
        if not in_box and text.strip():
            if heading_level is not None:
                while self.path and self.path[-1][0] >= heading_level:
                    self.path.pop()
                self.path.append((heading_level, one_line(text)))
            elif self.title is None and self.styles.is_title(style_id):
                self.title = one_line(text)
        self.builder.add(text, heading=self._heading())
        self._flush_notes()
        for box in boxes:
            self._blocks(box, in_box=True)

    def _paragraph_facts(self, p: etree._Element) -> tuple[str | None, int, str | None]:
        """``(style id, list level, list prefix or None)``."""
        ppr = p.find(W + "pPr")
        style_el = ppr.find(W + "pStyle") if ppr is not None else None
        style_id = style_el.get(W + "val") if style_el is not None else self.styles.default
        num_id, ilvl = self.styles.num_pr(style_id)
        own = ppr.find(W + "numPr") if ppr is not None else None
        if own is not None:
            if own.find(W + "numId") is not None:
                num_id = own.find(W + "numId").get(W + "val")
            if own.find(W + "ilvl") is not None:
                ilvl = _int(own.find(W + "ilvl").get(W + "val"), 0)
        level = ilvl or 0
        if not num_id or num_id == "0":
            return style_id, level, None
        return style_id, level, self.numbering.prefix(num_id, level)  # counts empty items too, as Word

    def _heading_level(self, p: etree._Element, style_id: str | None) -> int | None:
        outline = p.find(f"{W}pPr/{W}outlineLvl")
        if outline is not None:
            level = _int(outline.get(W + "val"), 9)
            return level + 1 if level < 9 else None
        return self.styles.heading_level(style_id)

    def _inline(self, element: etree._Element, parts: list[str], boxes: list[etree._Element]) -> None:
        for child in element:
            tag = child.tag
            if tag == W + "r":
                self._run(child, parts, boxes)
            elif tag in _TRANSPARENT_INLINE:
                self._inline(child, parts, boxes)
            elif tag == W + "sdt":
                content = child.find(W + "sdtContent")
                if content is not None:
                    self._inline(content, parts, boxes)
            elif tag in (M + "oMath", M + "oMathPara"):
                parts.append("".join(t.text or "" for t in child.iter(M + "t")))
            elif tag == MC + "AlternateContent":
                choice = _first_choice(child)
                if choice is not None:
                    self._inline(choice, parts, boxes)
            elif tag in (W + "del", W + "moveFrom"):
                if _has_text(child):
                    self.left_out["deleted"] += 1
            elif tag in _SKIP_INLINE:
                continue

    def _run(self, run: etree._Element, parts: list[str], boxes: list[etree._Element]) -> None:
        rpr = run.find(W + "rPr")
        vanish = rpr.find(W + "vanish") if rpr is not None else None
        if vanish is not None:
            hidden = _on(vanish)
        else:
            rstyle = rpr.find(W + "rStyle") if rpr is not None else None
            hidden = bool(self.styles.vanish(rstyle.get(W + "val") if rstyle is not None else None, self.para_style))
        if hidden:
            if _has_text(run):
                self.left_out["hidden"] += 1
            return
        for child in run:
            tag = child.tag
            if tag == W + "t":
                parts.append(child.text or "")
            elif tag == W + "tab" or tag == W + "ptab":
                parts.append("\t")
            elif tag in (W + "br", W + "cr"):
                parts.append("\n")
            elif tag == W + "noBreakHyphen":
                parts.append("-")
            elif tag == W + "ruby":  # phonetic guide: Word shows it above its base, Tika writes "base (guide)"
                base: list[str] = []
                guide: list[str] = []
                for r in child.iterfind(f"{W}rubyBase/{W}r"):
                    self._run(r, base, boxes)
                for r in child.iterfind(f"{W}rt/{W}r"):
                    self._run(r, guide, boxes)
                text, above = "".join(base), "".join(guide).strip()
                parts.append(f"{text} ({above})" if above and text.strip() else text or above)
            elif tag == W + "sym":
                char = child.get(W + "char", "")
                try:
                    code = int(char, 16)
                except ValueError:
                    continue
                if 0xF000 <= code <= 0xF0FF:  # symbol-font private use: a glyph, not a letter
                    continue
                parts.append(chr(code))
            elif tag in (W + "footnoteReference", W + "endnoteReference"):
                kind = "footnote" if tag == W + "footnoteReference" else "endnote"
                custom = child.get(W + "customMarkFollows") in ("1", "true", "on")
                self._cite(kind, child.get(W + "id"), parts, custom_mark=custom)
            elif tag == W + "commentReference":
                self._cite("comment", child.get(W + "id"), parts)
            elif tag in (W + "drawing", W + "pict", W + "object"):
                boxes.extend(_text_boxes(child))
                self._note_skipped(child)
            elif tag == MC + "AlternateContent":
                choice = _first_choice(child)
                if choice is not None:
                    boxes.extend(_text_boxes(choice))
                    self._note_skipped(choice)

    def _note_skipped(self, element: etree._Element) -> None:
        """Count what a drawing or object holds that is not text: OLE objects, charts, diagrams."""
        for el in element.iter():
            tag = el.tag if isinstance(el.tag, str) else ""
            if tag.endswith("}OLEObject") and not self._embedding_read(el.get(R + "id")):
                prog = el.get("ProgID")
                self.skipped[f"embedded object ({prog})" if prog else "embedded object"] += 1
            elif tag.endswith("}graphicData"):
                m = _DRAWING_URI.search(el.get("uri", ""))
                if m:
                    self.skipped["SmartArt diagram" if m.group(1) == "diagram" else "chart"] += 1

    def _embedding_read(self, rid: str | None) -> bool:
        """Whether the OLE object ``rid`` points at is one of the embedded files read at the end."""
        if self.read_part is None or not rid:
            return False
        try:
            target = self.part.related_parts[rid]
        except KeyError:
            return False
        return str(target.partname).lstrip("/").startswith("word/embeddings/")

    def _table_lines(self, tbl: etree._Element) -> list[str]:
        lines = []
        for tr in _children(tbl, W + "tr"):
            if tr.find(f"{W}trPr/{W}del") is not None:  # a deleted row (tracked change)
                self.left_out["deleted"] += _has_text(tr)
                continue
            cells = []
            for tc in _children(tr, W + "tc"):
                if tc.find(f"{W}tcPr/{W}cellDel") is not None:  # a deleted cell (§17.13.5.1)
                    self.left_out["deleted"] += _has_text(tc)
                    continue
                cells.append(self._cell_text(tc))
            if any(cells):
                lines.append(" | ".join(cells))
        return lines

    def _cell_text(self, tc: etree._Element) -> str:
        """The cell's paragraphs (and nested tables, as ``[row; row]``) on one line."""
        self.cell_depth += 1
        try:
            blocks = self._collect(tc)
        finally:
            self.cell_depth -= 1
        return " ".join(one_line(text) for text, _ in blocks)


class _ListBuilder:
    """Stands in for the Builder while a header, footer or table cell is read."""

    def __init__(self) -> None:
        self.blocks: list[tuple[str, str | None]] = []

    def add(self, text: str, *, heading: str | None = None, **_: object) -> None:
        if text.strip():
            self.blocks.append((text, heading))


def _first_choice(alternate: etree._Element) -> etree._Element | None:
    choice = alternate.find(MC + "Choice")
    return choice if choice is not None else alternate.find(MC + "Fallback")


def _text_boxes(element: etree._Element) -> list[etree._Element]:
    """The ``w:txbxContent`` elements under a drawing/picture, outermost only, each once: where a
    drawing has ``mc:AlternateContent``, only its first choice is searched."""
    found: list[etree._Element] = []

    def walk(el: etree._Element) -> None:
        for child in el:
            if child.tag == W + "txbxContent":
                found.append(child)
            elif child.tag == MC + "AlternateContent":
                choice = _first_choice(child)
                if choice is not None:
                    walk(choice)
            else:
                walk(child)

    walk(element)
    return found


def _children(parent: etree._Element, tag: str):
    """Direct children with ``tag``, looking through content controls and custom XML wrappers."""
    for child in parent:
        if child.tag == tag:
            yield child
        elif child.tag == W + "sdt":
            content = child.find(W + "sdtContent")
            if content is not None:
                yield from _children(content, tag)
        elif child.tag == W + "customXml":
            yield from _children(child, tag)


def _has_text(element: etree._Element) -> bool:
    """Whether ``element`` holds any run text (shown or deleted), for counting what was left out."""
    return any((t.text or "").strip() for t in element.iter(W + "t", W + "delText"))


def _on(element: etree._Element | None) -> bool:
    """A WordprocessingML on/off property: present and not ``w:val="0|false|off"``."""
    return element is not None and element.get(W + "val", "true") not in ("0", "false", "off")


def _read_html(text: str) -> Document:
    return read_html(text)


def _read_mht(blob: bytes) -> Document:
    """The HTML (else plain text) part of an MHT/MHTML archive (RFC 2557 MIME)."""

    message = email.message_from_bytes(blob)
    for wanted in ("text/html", "text/plain"):
        for part in message.walk():
            if part.get_content_type() == wanted:
                payload = part.get_payload(decode=True)  # bytes for a leaf part (decode=True)
                if not isinstance(payload, bytes):
                    payload = b""
                charset = part.get_content_charset()
                try:
                    text = payload.decode(charset) if charset else decode(payload)
                except (LookupError, UnicodeDecodeError):
                    text = decode(payload)
                if wanted == "text/html":
                    return _read_html(text)
                builder = Builder()
                builder.add(text)
                return builder.build("text", empty="no text")
    raise EmptyDocument("no text in the embedded MHT part")
