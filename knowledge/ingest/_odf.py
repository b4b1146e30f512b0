"""OpenDocument ``.odt``/``.ods``/``.odp``: the text a person sees, read from the package's XML.

``content.xml``, ``styles.xml`` and ``meta.xml`` are parsed with lxml (entities not resolved, no DTD
or network access), so packages that odfpy refuses still read: an external DTD reference, a
manifest naming a missing part, no ``meta.xml`` (OASIS ODF 1.2, parts 1 and 3). Read: paragraphs and
headings (``text:h`` outline levels give the heading path), lists (bullets and numbers), tables (rows
as ``header: value`` lines, as the CSV reader does), spacing (``text:s``, ``text:tab``,
``text:line-break``), footnotes and endnotes and annotations (comments) after their paragraph, text
boxes and shapes, image titles and descriptions (``svg:title``/``svg:desc``), embedded objects'
text (charts, formulas), headers and footers of the master pages in use (once). Spreadsheets: each
sheet a section headed by its name, repeated cells and rows expanded up to bounds (see
:data:`MAX_CELL_REPEAT` and what follows; the warnings say what was cut). Presentations:
each slide a page (``page`` = slide number, heading = its title), speaker notes after it, footers
and master-page text once. Left out: deleted tracked changes and hidden text (``text:display="none"``
styles, hidden-paragraph fields; both counted in the warnings), macros (``Basic/``, ``Scripts/``),
placeholder prompts, computed page numbers and dates of headers and footers. Hidden slides, sheets,
rows and columns are read and named in the warnings.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator

from lxml import etree

from knowledge.errors import KnowledgeError, PasswordRequired, UnsupportedFile, in_words
from knowledge.ingest._compose import ReadPart, add_part
from knowledge.ingest._cost import expect
from knowledge.ingest._text import Builder, one_line
from knowledge.ingest._zipsafe import MAX_PACKAGE_BYTES, check_package
from knowledge.ingest.document import Document

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "meta": "urn:oasis:names:tc:opendocument:xmlns:meta:1.0",
    "xlink": "http://www.w3.org/1999/xlink",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
    "fo": "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0",
}
OFFICE, STYLE, TEXT, TABLE, DRAW, PRES, SVG, DC, XLINK = (
    f"{{{_NS[k]}}}" for k in ("office", "style", "text", "table", "draw", "presentation", "svg", "dc", "xlink")
)

#: A package that unpacks to more than this is refused (a "zip bomb").
MAX_UNPACKED_BYTES = MAX_PACKAGE_BYTES
#: Repeated rows and cells (``table:number-rows-repeated``, ``table:number-columns-repeated``) are
#: expanded up to these counts: a row with values is read at most MAX_ROW_REPEAT times, a cell with a
#: value in at most MAX_CELL_REPEAT columns, and a table's repetitions add at most MAX_REPEATED_VALUES
#: values to the ones its XML holds (beyond that a repeated row or cell is read once). Repeated empty
#: rows and cells cost nothing (they only move the row or column on). The warnings say what was cut.
MAX_ROW_REPEAT = 100
MAX_CELL_REPEAT = 100
MAX_REPEATED_VALUES = 100_000
#: Columns of a table read: LibreOffice Calc's and Excel's 16,384 (values in columns past it are not).
MAX_COLUMNS = 16_384
#: Rows of a table read (repetitions counted).
MAX_ROWS = 100_000
#: Embedded objects (``Object 1/content.xml``) nest at most this deep.
MAX_OBJECT_DEPTH = 3

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
_RECOVER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, recover=True)
_NAMES = {"odt": "OpenDocument text", "ods": "OpenDocument spreadsheet", "odp": "OpenDocument presentation"}
#: Fields whose shown value is computed when printed: left out of headers, footers and masters.
_COMPUTED = {
    TEXT + n
    for n in (
        "page-number",
        "page-count",
        "sheet-name",
        "date",
        "time",
        "file-name",
        "title",
        "chapter",
        "page-continuation",
    )
} | {PRES + "date-time", PRES + "footer", PRES + "header"}
#: Shapes whose child ``text:p`` are their text.
_SHAPES = {
    DRAW + n
    for n in (
        "frame",
        "text-box",
        "custom-shape",
        "rect",
        "ellipse",
        "circle",
        "polygon",
        "polyline",
        "path",
        "line",
        "connector",
        "caption",
        "measure",
        "g",
        "a",
        "regular-polygon",
        "control",
        "page-thumbnail",
    )
}
#: Elements without text a person reads: declarations, index templates, deleted changes, forms.
_NOT_BLOCKS = {
    TEXT + n
    for n in (
        "tracked-changes",
        "sequence-decls",
        "variable-decls",
        "user-field-decls",
        "index-title-template",
        "table-of-content-source",
        "alphabetical-index-source",
        "illustration-index-source",
        "bibliography-source",
        "user-index-source",
        "object-index-source",
        "table-index-source",
    )
} | {OFFICE + "forms", OFFICE + "annotation-end", TABLE + "calculation-settings"}
_NOT_INLINE = {
    OFFICE + "annotation-end",
    TEXT + "tracked-changes",
    TEXT + "bookmark-start",
    TEXT + "soft-page-break",
    DC + "creator",
    DC + "date",
}
_AUTO_SLIDE_NAME = re.compile(r"^(page|slide|seite|diapositive|folie)\s*\d+$", re.I)


def read_odf(data: bytes, fmt: str, read_part: ReadPart) -> Document:
    """Read an OpenDocument text (``fmt="odt"``), spreadsheet (``"ods"``) or presentation (``"odp"``).

    Sections: odt heading paths; ods one per sheet (heading = sheet name); odp one per slide
    (``page`` = slide number, heading = slide title). Embedded OLE objects are read with
    ``read_part``; one that fails is named in the warnings.

    Raises:
        PasswordRequired: the package is still encrypted (``read_document`` decrypts it first with
            ``_crypto.decrypt_odf`` when given the password).
        UnsupportedFile: a damaged ZIP, or no ``content.xml`` (``"damaged: ..."``), or entries that
            overlap each other's data (an overlapping zip bomb).
        FileTooLarge: the package unpacks to more than :data:`MAX_UNPACKED_BYTES`.
        EmptyDocument: no text.
    """
    what = _NAMES.get(fmt, "OpenDocument file")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise UnsupportedFile(f"damaged: this {what} is not a valid ZIP ({exc})") from exc
    with zf:
        names = {i.filename for i in infos}
        check_package(zf, data, what, MAX_UNPACKED_BYTES)
        if _encrypted(zf, names):
            raise PasswordRequired(f"password required: this {what} is encrypted; give its password to read it")
        if "content.xml" not in names:
            raise UnsupportedFile(f"damaged: this {what} has no content.xml")
        try:
            reader = _Reader(zf, names, fmt, read_part)
            return reader.read(what)
        except KnowledgeError:
            raise
        except Exception as exc:  # zlib.error, BadZipFile (CRC), XMLSyntaxError, ...
            raise UnsupportedFile(f"damaged: this {what} cannot be read ({in_words(exc)})") from exc


def _encrypted(zf: zipfile.ZipFile, names: set[str]) -> bool:
    if "META-INF/manifest.xml" not in names:
        return False
    try:
        raw = zf.read("META-INF/manifest.xml")
    except Exception:
        return False
    return b"encryption-data" in raw


def _parse(raw: bytes, warnings: list[str], part: str) -> etree._Element:
    try:
        return etree.fromstring(raw, _PARSER)
    except etree.XMLSyntaxError:
        root = etree.fromstring(raw, _RECOVER)
        if root is None:
            raise
        warnings.append(f"{part} is not well-formed XML; what could be recovered is read")
        return root


class _Blocks:
    """Blocks of text with their heading path (the odt/odp body, a note, a header)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str | None, int]] = []  # (text, heading, table_header)

    def add(self, text: str, heading: str | None = None, table_header: int = 0) -> None:
        if text.strip():
            self.items.append((text, heading, table_header))

    def plain(self) -> str:
        return "\n".join(t for t, _, _ in self.items)


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, names: set[str], fmt: str, read_part: ReadPart) -> None:
        self.zf, self.names, self.fmt, self.read_part = zf, names, fmt, read_part
        self.warnings: list[str] = []
        self.builder = Builder()
        self.path: list[tuple[int, str]] = []
        self.list_styles: dict[str, dict[int, tuple[str, str, str]]] = {}  # name -> level -> (kind, fmt, suffix)
        self.hidden_tables: set[str] = set()
        self.hidden_text: set[str] = set()  # text/paragraph styles with text:display="none" (hidden text)
        self.hidden_pages: set[str] = set()  # drawing-page styles of hidden slides
        self.hidden_count = 0  # hidden paragraphs and spans with text, left out
        self.table_masters: dict[str, str] = {}
        self.note_count = 0
        self.object_depth = 0
        self.skipped_objects = 0

    def part(self, name: str) -> etree._Element | None:
        if name not in self.names:
            return None
        return _parse(self.zf.read(name), self.warnings, name)

    # -- the document ---------------------------------------------------------------------------

    def read(self, what: str) -> Document:
        expect(
            f"the {what}'s content is {self.zf.getinfo('content.xml').file_size:,} bytes of XML"
            " (repeated rows and cells are expanded within bounds)"
        )
        content = self.part("content.xml")
        styles = self.part("styles.xml")
        for root in (styles, content):
            if root is not None:
                self._styles(root)
        body = content.find(OFFICE + "body") if content is not None else None
        if body is None:
            raise UnsupportedFile(f"damaged: this {what}'s content.xml has no body")
        headers, footers, masters = self._master_pages(styles, content)
        for text in headers:
            self.builder.add(text)
        if self.fmt == "odp" or body.find(OFFICE + "presentation") is not None:
            self._presentation(body)
        elif self.fmt == "ods" or body.find(OFFICE + "spreadsheet") is not None:
            self._spreadsheet(body)
        else:
            out = _Blocks()
            for office_text in body:
                self._blocks(office_text, out)
            for text, heading, header in out.items:
                self.builder.add(text, heading=heading, table_header=header)
        for text in footers + masters:
            self.builder.add(text)
        deleted = (
            sum(
                1
                for d in content.iter(TEXT + "deletion")
                if "".join(t for p in d.iter(TEXT + "p", TEXT + "h") for t in p.itertext()).strip()
            )
            if content is not None
            else 0
        )
        if deleted:
            self.warnings.append(
                f"tracked changes: {deleted} deleted passage{'' if deleted == 1 else 's'} left out (insertions are read)"
            )
        if self.hidden_count:
            n = self.hidden_count
            self.warnings.append(f"{n} passage{'' if n == 1 else 's'} formatted as hidden text (not shown) left out")
        if any(n.startswith(("Basic/", "Scripts/")) for n in self.names):
            self.warnings.append("macros not read")
        if self.skipped_objects:
            self.warnings.append(f"{self.skipped_objects} embedded object{'s' if self.skipped_objects > 1 else ''} not read")
        return self.builder.build(
            self.fmt, empty=f"no text: this {what} has no text", title=self._title(), warnings=self.warnings
        )

    def _title(self) -> str | None:
        try:
            meta = self.part("meta.xml")
        except etree.XMLSyntaxError:
            return None
        if meta is None:
            return None
        title = meta.find(f".//{DC}title")
        return one_line(title.text or "") or None if title is not None else None

    def _styles(self, root: etree._Element) -> None:
        for ls in root.iter(TEXT + "list-style"):
            levels: dict[int, tuple[str, str, str]] = {}
            for level in ls:
                n = _int(level.get(TEXT + "level"), 1)
                if level.tag == TEXT + "list-level-style-number":
                    levels[n] = (
                        "number",
                        level.get(STYLE + "num-format") or "",
                        (level.get(STYLE + "num-prefix") or "") + "\x00" + (level.get(STYLE + "num-suffix") or ""),
                    )
                elif level.tag == TEXT + "list-level-style-bullet":
                    levels[n] = ("bullet", level.get(TEXT + "bullet-char") or "\u2022", "")
            if ls.get(STYLE + "name"):
                self.list_styles[ls.get(STYLE + "name")] = levels
        parents: dict[str, str] = {}
        for st in root.iter(STYLE + "style"):
            family, name = st.get(STYLE + "family"), st.get(STYLE + "name") or ""
            if family in ("text", "paragraph"):
                # ODF 1.2 §20.374 text:display="none" in the text properties: hidden text
                props = st.find(STYLE + "text-properties")
                display = props.get(TEXT + "display") if props is not None else None
                if display == "none":
                    self.hidden_text.add(name)
                elif display is None and st.get(STYLE + "parent-style-name"):
                    parents[name] = st.get(STYLE + "parent-style-name") or ""
            elif family == "drawing-page":
                props = st.find(STYLE + "drawing-page-properties")
                if props is not None and props.get(PRES + "visibility") == "hidden":
                    self.hidden_pages.add(name)
        for name in parents:  # styles inheriting hidden text from a parent style
            seen, parent = {name}, parents.get(name)
            while parent and parent not in seen and parent not in self.hidden_text:
                seen.add(parent)
                parent = parents.get(parent)
            if parent in self.hidden_text:
                self.hidden_text.add(name)
        for st in root.iter(STYLE + "style"):
            if st.get(STYLE + "family") != "table":
                continue
            name = st.get(STYLE + "name") or ""
            props = st.find(STYLE + "table-properties")
            if props is not None and props.get(TABLE + "display") == "false":
                self.hidden_tables.add(name)
            if st.get(STYLE + "master-page-name"):
                self.table_masters[name] = st.get(STYLE + "master-page-name") or ""

    # -- headers, footers, master pages ---------------------------------------------------------

    def _master_pages(
        self, styles: etree._Element | None, content: etree._Element | None
    ) -> tuple[list[str], list[str], list[str]]:
        headers: list[str] = []
        footers: list[str] = []
        masters: list[str] = []
        if styles is None:
            return headers, footers, masters
        used = self._used_masters(content)
        for mp in styles.iter(STYLE + "master-page"):
            if used is not None and mp.get(STYLE + "name") not in used:
                continue
            for child in mp:
                tag = etree.QName(child).localname
                if tag in ("header", "header-left", "header-first", "footer", "footer-left", "footer-first"):
                    if child.get(STYLE + "display") == "false":
                        continue
                    text = self._plain(child, computed=False)
                    target = headers if tag.startswith("header") else footers
                    if text and text not in target:
                        target.append(text)
                elif child.tag in _SHAPES and child.get(PRES + "placeholder") != "true":
                    if child.get(PRES + "class") in ("page-number", "date-time", "header"):
                        continue
                    text = self._plain(child, computed=False)
                    if text and text not in masters:
                        masters.append(text)
                elif child.tag == PRES + "notes":
                    continue
        return headers, footers, masters

    def _used_masters(self, content: etree._Element | None) -> set[str] | None:
        """The master pages the document uses; ``None``: all (a text document)."""
        if content is None or self.fmt == "odt":
            return None
        if self.fmt == "odp":
            return {p.get(DRAW + "master-page-name") or "" for p in content.iter(DRAW + "page")}
        used = set()
        for table in content.iter(TABLE + "table"):
            used.add(self.table_masters.get(table.get(TABLE + "style-name") or "", "Default"))
        return used

    def _plain(self, element: etree._Element, *, computed: bool = True) -> str:
        """All the text of ``element``'s paragraphs, one line each (notes and comments inline)."""
        lines: list[str] = []
        for p in element.iter(TEXT + "p", TEXT + "h"):
            if _inside(p, element, TEXT + "p", TEXT + "h") or self._hidden(p):
                continue
            parts: list[str] = []
            self._inline(p, parts, [], [], computed=computed, collect=False)
            text = "".join(parts).strip()
            if text:
                lines.append(text)
        return "\n".join(lines)

    # -- text documents -------------------------------------------------------------------------

    def heading(self) -> str | None:
        return " > ".join(h for _, h in self.path) or None

    def _blocks(self, element: etree._Element, out: _Blocks) -> None:
        for child in element:
            self._block(child, out)

    def _block(self, child: etree._Element, out: _Blocks) -> None:
        if isinstance(child.tag, str):
            tag = child.tag
            if tag == TEXT + "h":
                self._paragraph(child, out, heading_level=_int(child.get(TEXT + "outline-level"), 1))
            elif tag == TEXT + "p":
                self._paragraph(child, out)
            elif tag == TEXT + "list":
                self._list(child, out, None, 0)
            elif tag == TABLE + "table":
                self._table(child, out)
            elif tag in _NOT_BLOCKS or (tag == TEXT + "section" and child.get(TEXT + "display") == "none"):
                return
            elif tag in _SHAPES or tag in (DRAW + "object", DRAW + "object-ole", DRAW + "image"):
                self._shape(child, out)
            else:  # sections, indexes (table of contents), office:text, soft page breaks, ...
                self._blocks(child, out)

    def _list(self, lst: etree._Element, out: _Blocks, inherited: str | None, level: int) -> None:
        style = lst.get(TEXT + "style-name") or inherited
        level += 1
        kind, num_format, affix = self.list_styles.get(style or "", {}).get(level, ("bullet", "\u2022", ""))
        n = 0
        for item in lst:
            if item.tag not in (TEXT + "list-item", TEXT + "list-header"):
                continue
            n = _int(item.get(TEXT + "start-value"), n + 1) if item.tag == TEXT + "list-item" else n
            if item.tag == TEXT + "list-item":
                if kind == "number":
                    prefix, _, suffix = affix.partition("\x00")
                    mark = f"{prefix}{_number(n, num_format)}{suffix}" if num_format else ""
                else:
                    mark = num_format if num_format.strip() else "\u2022"
            else:
                mark = ""
            first = True
            for child in item:
                if child.tag in (TEXT + "p", TEXT + "h"):
                    self._paragraph(
                        child,
                        out,
                        mark=mark if first else "",
                        heading_level=_int(child.get(TEXT + "outline-level"), 1) if child.tag == TEXT + "h" else None,
                    )
                    first = False
                elif child.tag == TEXT + "list":
                    self._list(child, out, style, level)
                elif child.tag == TEXT + "number":
                    continue
                else:
                    self._block(child, out)

    def _paragraph(self, p: etree._Element, out: _Blocks, *, heading_level: int | None = None, mark: str = "") -> None:
        if self._hidden(p):
            return
        parts: list[str] = []
        notes: list[tuple[str, str]] = []
        frames: list[etree._Element] = []
        self._inline(p, parts, notes, frames)
        text = "".join(parts).strip()
        if heading_level is not None and text:
            self.path = [x for x in self.path if x[0] < heading_level] + [(heading_level, one_line(text))]
        if text:
            out.add(f"{mark} {text}" if mark else text, self.heading())
        for label, note in notes:
            out.add(f"{label} {note}" if label.startswith("[") else f"{label}: {note}", self.heading())
        for frame in frames:
            self._shape(frame, out)

    def _inline(
        self,
        element: etree._Element,
        parts: list[str],
        notes: list[tuple[str, str]],
        frames: list[etree._Element],
        *,
        computed: bool = True,
        collect: bool = True,
    ) -> None:
        if element.text:
            parts.append(element.text)
        for child in element:
            tag = child.tag
            if not isinstance(tag, str):
                pass
            elif tag == TEXT + "s":
                parts.append(" " * min(_int(child.get(TEXT + "c"), 1), 100))
            elif tag == TEXT + "tab":
                parts.append("\t")
            elif tag == TEXT + "line-break":
                parts.append("\n")
            elif tag == TEXT + "note":
                citation = child.find(TEXT + "note-citation")
                body = child.find(TEXT + "note-body")
                self.note_count += 1
                mark = one_line("".join(citation.itertext())) if citation is not None else ""
                mark = mark or str(self.note_count)
                text = self._plain(body) if body is not None else ""
                if collect:
                    parts.append(f"[{mark}]")
                    if text:
                        notes.append((f"[{mark}]", " ".join(text.split("\n"))))
                elif text:
                    parts.append(f" [{mark}] {text} ")
            elif tag == OFFICE + "annotation":
                label, text = self._annotation(child)
                if collect and text:
                    notes.append((label, text))
                elif text:
                    parts.append(f" {text} ")
            elif tag in _NOT_INLINE or (tag in _COMPUTED and not computed) or (tag == TEXT + "span" and self._hidden(child)):
                pass
            elif tag in _SHAPES or tag in (DRAW + "object", DRAW + "object-ole", DRAW + "image"):
                if collect:
                    frames.append(child)
                else:
                    inner = self._plain(child, computed=computed)
                    if inner:
                        parts.append(f" {' '.join(inner.splitlines())} ")
            else:  # spans, links, fields, ruby, ...
                self._inline(child, parts, notes, frames, computed=computed, collect=collect)
            if child.tail:
                parts.append(child.tail)

    def _hidden(self, element: etree._Element) -> bool:
        """Whether a paragraph or span is hidden text: its style hides it (``text:display="none"``),
        or -- a paragraph -- a hidden-paragraph field whose condition was true when saved
        (``text:is-hidden="true"``, ODF 1.2 §7.7.11). Counted when it holds text."""
        hidden = (element.get(TEXT + "style-name") or "") in self.hidden_text or any(
            f.get(TEXT + "is-hidden") == "true" for f in element.iterchildren(TEXT + "hidden-paragraph")
        )
        if hidden and "".join(element.itertext()).strip():
            self.hidden_count += 1
        return hidden

    def _annotation(self, annotation: etree._Element) -> tuple[str, str]:
        """``("Comment (author)", text)`` of an ``office:annotation``."""
        author = one_line("".join(t for c in annotation.findall(DC + "creator") for t in c.itertext()))
        return (f"Comment ({author})" if author else "Comment"), " ".join(self._plain(annotation).split("\n"))

    def _shape(self, shape: etree._Element, out: _Blocks) -> None:
        """A frame or shape: its title and description, its text, an embedded object's text."""
        for tag in (SVG + "title", SVG + "desc"):
            el = shape.find(tag)
            if el is not None:
                out.add(one_line("".join(el.itertext())), self.heading())
        if shape.tag == DRAW + "object":
            self._object(shape, out)
            return
        if shape.tag == DRAW + "object-ole":
            self._ole(shape)
            return
        self._blocks(shape, out)

    def _object(self, obj: etree._Element, out: _Blocks) -> None:
        href = (obj.get(XLINK + "href") or "").removeprefix("./").rstrip("/")
        name = f"{href}/content.xml"
        if not href or name not in self.names or self.object_depth >= MAX_OBJECT_DEPTH:
            if obj.find(OFFICE + "document") is not None:  # an object inline in the XML
                self._blocks(obj, out)
            elif href:
                self.skipped_objects += 1
            return
        root = self.part(name)
        body = root.find(OFFICE + "body") if root is not None else None
        if body is None:
            return
        self.object_depth += 1
        try:
            self._blocks(body, out)
        finally:
            self.object_depth -= 1

    def _ole(self, obj: etree._Element) -> None:
        href = (obj.get(XLINK + "href") or "").removeprefix("./")
        if href not in self.names:
            self.skipped_objects += 1
            return
        add_part(
            self.builder, self.read_part, self.zf.read(href), href.rsplit("/", 1)[-1], f"embedded {href.rsplit('/', 1)[-1]}"
        )

    # -- tables ---------------------------------------------------------------------------------

    def _rows(self, table: etree._Element) -> list[tuple[list[tuple[int, str]], list[tuple[str, str]]]]:
        """The rows of ``table`` (header rows and row groups included) as ``(cells, notes)``: ``cells``
        the ``(column, text)`` of the cells with text (columns from 0), repeats expanded within the
        bounds above; the cuts are named in the warnings."""
        out: list[tuple[list[tuple[int, str]], list[tuple[str, str]]]] = []
        budget = MAX_REPEATED_VALUES
        wide_cells = wide_max = wide_declared = wide_read = 0  # cells repeated over > MAX_CELL_REPEAT columns
        long_rows: list[int] = []  # repeat counts of rows repeated over MAX_ROW_REPEAT times
        over_budget = 0  # values a repetition would have added past the budget
        past_columns = False
        for row in _iter_rows(table):
            cells: list[tuple[int, str]] = []
            notes: list[tuple[str, str]] = []
            col = 0
            for cell in row:
                if cell.tag not in (TABLE + "table-cell", TABLE + "covered-table-cell"):
                    continue
                repeat = max(_int(cell.get(TABLE + "number-columns-repeated"), 1), 1)
                if col >= MAX_COLUMNS:
                    past_columns = past_columns or bool(self._cell_text(cell, []))
                    break
                value = self._cell_text(cell, notes)
                if value:
                    read = min(repeat, MAX_CELL_REPEAT, MAX_COLUMNS - col)
                    if read > 1 and read - 1 > budget:
                        over_budget += read - 1 - budget
                        read = budget + 1
                    budget -= read - 1
                    if repeat > MAX_CELL_REPEAT:
                        wide_cells += 1
                        wide_max = max(wide_max, repeat)
                        wide_declared += repeat
                        wide_read += read
                    cells.extend((col + i, value) for i in range(read))
                col += repeat
            repeat = max(_int(row.get(TABLE + "number-rows-repeated"), 1), 1)
            if not cells and not notes:
                continue  # an empty row, however often repeated
            if repeat > MAX_ROW_REPEAT:
                long_rows.append(repeat)
                repeat = MAX_ROW_REPEAT
            if cells and (repeat - 1) * len(cells) > budget:
                over_budget += (repeat - 1) * len(cells) - budget
                repeat = 1 + budget // len(cells)
            budget -= (repeat - 1) * len(cells)
            for _ in range(repeat):
                if len(out) >= MAX_ROWS:
                    self.warnings.append(f"a table has more than {MAX_ROWS:,} rows; the rest is not read")
                    break
                out.append((cells, notes))
                notes = []
            else:
                continue
            break
        self._repeat_warnings(table, wide_cells, wide_max, wide_declared, wide_read, long_rows, over_budget, past_columns)
        return out

    def _cell_text(self, cell: etree._Element, notes: list[tuple[str, str]]) -> str:
        """The text of a table cell (a covered cell has none), its annotations added to ``notes``."""
        if cell.tag != TABLE + "table-cell":
            return ""
        parts: list[str] = []
        for p in cell:
            if p.tag in (TEXT + "p", TEXT + "h"):
                if parts:
                    parts.append(" ")
                self._inline(p, parts, notes, [])
            elif p.tag == TEXT + "list" or p.tag == TABLE + "table":
                parts.append(" " + " ".join(self._plain(p).split("\n")))
            elif p.tag == OFFICE + "annotation":
                label, note = self._annotation(p)
                if note:
                    notes.append((label, note))
        return one_line("".join(parts))

    def _repeat_warnings(
        self,
        table: etree._Element,
        wide_cells: int,
        wide_max: int,
        wide_declared: int,
        wide_read: int,
        long_rows: list[int],
        over_budget: int,
        past_columns: bool,
    ) -> None:
        name = table.get(TABLE + "name")
        where = f"table {name!r}: " if name else ""
        if wide_cells:
            what = "a cell repeats its value" if wide_cells == 1 else f"{wide_cells:,} cells repeat their value"
            upto = f"{wide_max:,} columns" if wide_cells == 1 else f"as many as {wide_max:,} columns"
            self.warnings.append(
                f"{where}{what} over {upto}: read in at most {MAX_CELL_REPEAT} columns each"
                f" ({wide_read:,} of {wide_declared:,} values)"
            )
        if len(long_rows) == 1:
            self.warnings.append(f"{where}a row repeated {long_rows[0]:,} times is read {MAX_ROW_REPEAT} times")
        elif long_rows:
            self.warnings.append(
                f"{where}{len(long_rows):,} rows repeated up to {max(long_rows):,} times are read"
                f" {MAX_ROW_REPEAT} times each ({MAX_ROW_REPEAT * len(long_rows):,} of"
                f" {sum(long_rows):,} rows)"
            )
        if over_budget:
            self.warnings.append(
                f"{where}repeated rows and cells add at most {MAX_REPEATED_VALUES:,} values to a"
                f" table; past that each is read once ({over_budget:,} more values not read)"
            )
        if past_columns:
            self.warnings.append(f"{where}values past column {MAX_COLUMNS:,} are not read")

    def _table_text(self, table: etree._Element, *, title_rows: int = 0) -> tuple[str, int, list[tuple[str, str]]]:
        """``(text, header_lines, notes)``. When a row (the first, or one of the ``title_rows`` after
        it) fills every column, it is the header and each further row is one line of ``header: value``
        pairs separated by ``" | "`` (as the CSV reader writes them); rows above it, and every row of
        a table without such a header (a form, one column), are cells joined by ``" | "``."""
        notes: list[tuple[str, str]] = []
        rows: list[list[tuple[int, str]]] = []
        for cells, row_notes in self._rows(table):
            notes.extend(row_notes)
            if cells:
                rows.append(cells)
        width = max((r[-1][0] + 1 for r in rows), default=0)
        header_at = None
        if width >= 2 and len(rows) >= 2:
            for i, cells in enumerate(rows[: title_rows + 1]):
                if len(cells) == width and i + 1 < len(rows):  # a value in every column
                    header_at = i
                    break
        if header_at is None:
            return "\n".join(" | ".join(v for _, v in r) for r in rows), 0, notes
        lines = [" | ".join(v for _, v in r) for r in rows[: header_at + 1]]
        header = [v for _, v in rows[header_at]]
        for cells in rows[header_at + 1 :]:
            pairs = [f"{header[i] if i < len(header) else f'column {i + 1}'}: {value}" for i, value in cells]
            lines.append(" | ".join(pairs))
        return "\n".join(lines), header_at + 1, notes

    def _table(self, table: etree._Element, out: _Blocks, *, title_rows: int = 0) -> None:
        text, header, notes = self._table_text(table, title_rows=title_rows)
        out.add(text, self.heading(), header)
        for label, note in notes:
            out.add(f"{label}: {note}", self.heading())
        for shape in table.iter(*_SHAPES):  # shapes anchored to cells (text boxes, images' titles)
            if shape.getparent() is not None and shape.getparent().tag in (TABLE + "table-cell", TABLE + "shapes"):
                self._shape(shape, out)

    # -- spreadsheets ---------------------------------------------------------------------------

    def _spreadsheet(self, body: etree._Element) -> None:
        sheet_no = 0
        for table in body.iter(TABLE + "table"):
            if _inside(table, body, TABLE + "table"):
                continue
            sheet_no += 1
            name = table.get(TABLE + "name") or f"Sheet {sheet_no}"
            if (table.get(TABLE + "style-name") or "") in self.hidden_tables:
                self.warnings.append(f"sheet {name!r} is hidden (read all the same)")
            hidden = _hidden_rows_columns(table)
            if hidden:
                self.warnings.append(f"sheet {name!r}: {hidden} hidden or filtered out: read all the same")
            out = _Blocks()
            self.path = [(1, name)]
            self._table(table, out, title_rows=3)
            for shape in table.iter(*_SHAPES):
                parent = shape.getparent()
                if parent is not None and parent.tag == TABLE + "shapes":
                    self._shape(shape, out)
            for text, _heading, header in out.items:
                self.builder.add(text, heading=name, table_header=header)
        self.path = []

    # -- presentations --------------------------------------------------------------------------

    def _presentation(self, body: etree._Element) -> None:
        footers: dict[str, str] = {}
        for decl in body.iter(PRES + "footer-decl", PRES + "header-decl"):
            text = one_line("".join(decl.itertext()))
            if text:
                footers[decl.get(PRES + "name") or ""] = text
        used_footers: list[str] = []
        for number, page in enumerate(body.iter(DRAW + "page"), start=1):
            title = None
            for frame in page.iter(DRAW + "frame"):
                if frame.get(PRES + "class") == "title":
                    title = one_line(self._plain(frame)) or None
                    break
            name = page.get(DRAW + "name") or ""
            if (page.get(DRAW + "style-name") or "") in self.hidden_pages:
                self.warnings.append(f"slide {number} is hidden: indexed anyway (a hidden slide is part of the deck)")
            heading = title or (name if name and not _AUTO_SLIDE_NAME.match(name) else None) or f"Slide {number}"
            out = _Blocks()
            self.path = []
            for child in page:
                if child.tag == PRES + "notes":
                    continue
                if child.tag in _SHAPES or child.tag in (DRAW + "object", DRAW + "object-ole"):
                    if child.get(PRES + "placeholder") == "true" and not self._plain(child):
                        continue
                    self._shape(child, out)
            notes = page.find(PRES + "notes")
            if notes is not None:
                text = "\n".join(self._plain(f) for f in notes if f.tag in _SHAPES and f.get(PRES + "class") != "page")
                if text.strip():
                    out.add(f"Notes: {text.strip()}")
            for text, _h, header in out.items:
                self.builder.add(text, page=number, heading=heading, table_header=header)
            ref = page.get(PRES + "use-footer-name")
            if ref in footers and footers[ref] not in used_footers:
                used_footers.append(footers[ref])
        for text in used_footers:
            self.builder.add(text)


def _hidden_rows_columns(table: etree._Element) -> str:
    """``"2 rows and 1 column"`` of a sheet that are collapsed or filtered out
    (``table:visibility``, ODF 1.2 §19.749) and hold text; columns only when a shown column follows
    (LibreOffice collapses the unused columns after the last one). Empty when none."""
    rows = sum(
        1
        for row in table.iter(TABLE + "table-row")
        if row.get(TABLE + "visibility", "visible") != "visible" and "".join(row.itertext()).strip()
    )
    columns, pending = 0, 0
    for col in table.iter(TABLE + "table-column"):
        repeat = min(_int(col.get(TABLE + "number-columns-repeated"), 1), 16384)
        if col.get(TABLE + "visibility", "visible") != "visible":
            pending += repeat
        else:
            columns, pending = columns + pending, 0
    out = [f"{n} {what}{'' if n == 1 else 's'}" for n, what in ((rows, "row"), (columns, "column")) if n]
    return " and ".join(out)


def _iter_rows(table: etree._Element) -> Iterator[etree._Element]:
    for child in table:
        if child.tag == TABLE + "table-row":
            yield child
        elif child.tag in (TABLE + "table-header-rows", TABLE + "table-rows", TABLE + "table-row-group"):
            yield from _iter_rows(child)


def _inside(element: etree._Element, top: etree._Element, *tags: str) -> bool:
    """True when an ancestor of ``element`` below ``top`` has one of ``tags``."""
    parent = element.getparent()
    while parent is not None and parent is not top:
        if parent.tag in tags:
            return True
        parent = parent.getparent()
    return False


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _number(n: int, fmt: str) -> str:
    """``n`` as an ODF list number format shows it (``1``, ``a``, ``A``, ``i``, ``I``)."""
    if fmt in ("i", "I"):
        vals = [
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
        ]
        out, rest = "", max(n, 1)
        for v, s in vals:
            while rest >= v:
                out, rest = out + s, rest - v
        return out.upper() if fmt == "I" else out
    if fmt in ("a", "A"):
        out, rest = "", max(n, 1)
        while rest:
            rest, r = divmod(rest - 1, 26)
            out = chr(ord("a") + r) + out
        return out.upper() if fmt == "A" else out
    return str(n)
