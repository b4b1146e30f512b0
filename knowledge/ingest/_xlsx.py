"""Excel .xlsx / .xlsm: every sheet a section headed by its name, values as Excel shows them.

The package's parts are read with lxml: the workbook, styles (the number format of each cell,
rendered by :mod:`knowledge.ingest._numfmt`), shared strings (with their phonetic runs, furigana
``rPh``, appended after a space), comments and the core properties (the title). A worksheet is
parsed as a stream (``lxml.etree.iterparse``, each cell let go once read), so the cost follows the
cells present, never the used range a sheet declares (``<dimension ref="A1:XFD1048576"/>``, a styled
empty cell in the last row and column). A formula cell shows its cached result.
Rows are ``header: value`` lines as the CSV reader's, after ``row N``; the header is the first row
of two or more text cells (rows above it are plain lines). A merged range's value stands in each
row it spans (of a range over :data:`MAX_MERGE_ROWS` rows, in the rows that hold other values; at
most :data:`MAX_MERGE_FILLS` more values a sheet than it has, the warnings say when). Also read:
page headers/footers (``&`` codes stripped), comments, drawing text boxes,
SmartArt text and chart titles/labels, and embedded files (``xl/embeddings``: PDF, Office files,
OLE packages) through ``read_part``. Hidden sheets are read and named in the warnings. Provenance:
heading = sheet name, page = ``None``.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from bisect import bisect_left, bisect_right

from lxml import etree

from knowledge.errors import KnowledgeError, UnsupportedFile, in_words
from knowledge.ingest._compose import ReadPart, add_part, join_path
from knowledge.ingest._cost import expect
from knowledge.ingest._embedded import chart_data_parts, unwrap_ole
from knowledge.ingest._numfmt import BUILTIN_FORMATS, format_number, format_text
from knowledge.ingest._text import Builder, one_line
from knowledge.ingest._zipsafe import MAX_PACKAGE_BYTES, check_package
from knowledge.ingest.document import Document

#: A workbook that unpacks to more than this is refused before it is parsed (a "zip bomb").
MAX_UNPACKED_BYTES = MAX_PACKAGE_BYTES
#: A merged range spanning more rows than this gives its value only to its rows that hold other values
#: (the rows a person reads it beside), not to each of its rows (a range ``A2:A1048576`` a million times).
MAX_MERGE_ROWS = 1_000
#: A sheet's merged ranges give their value to at most this many rows more than the sheet has values.
MAX_MERGE_FILLS = 100_000

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
PR = "{http://schemas.openxmlformats.org/package/2006/relationships}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
DC = "{http://purl.org/dc/elements/1.1/}"

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
_CELL_REF = re.compile(r"([A-Z]+)(\d+)")
#: Header/footer codes (ECMA-376 Part 1 §18.3.1.36): fonts, sizes, colours, fields, styles.
_HF_CODE = re.compile(r'&"[^"]*"|&K[0-9A-Fa-f]{6}|&K\d\d[+-]\d{3}|&\d+|&[+-]\d*|&[PNDTZFAGBIUESXYH]')
_HF_SECTION = re.compile(r"&([LCR])")


def read_xlsx(data: bytes, read_part: ReadPart) -> Document:
    """Read an Excel workbook (.xlsx, .xlsm, .xltx, .xltm); one section per sheet.

    Raises:
        UnsupportedFile: a damaged ZIP, a binary workbook (.xlsb), or parts that cannot be parsed,
            with the reason.
        UnsupportedFile: entries that overlap each other's data (an overlapping zip bomb).
        FileTooLarge: the package unpacks to more than :data:`MAX_UNPACKED_BYTES`.
        EmptyDocument: no sheet has a value, and nothing else (headers, comments, text boxes) has text.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except Exception as exc:  # BadZipFile, zlib.error, EOFError, ...
        raise UnsupportedFile(f"unreadable Excel workbook: the file is damaged ({in_words(exc)})") from exc
    names = {i.filename for i in infos}
    if "xl/workbook.bin" in names:
        raise UnsupportedFile("unsupported: an Excel binary workbook (.xlsb) — save it as .xlsx")
    check_package(zf, data, "workbook", MAX_UNPACKED_BYTES)
    try:
        return _Reader(zf, data, read_part).read()
    except KnowledgeError:
        raise
    except Exception as exc:  # zlib.error, KeyError, XMLSyntaxError, ...
        raise UnsupportedFile(f"unreadable Excel workbook: {in_words(exc)}") from exc


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, data: bytes, read_part: ReadPart) -> None:
        self.zf = zf
        self.data = data
        self.read_part = read_part
        self.names = set(zf.namelist())
        self.builder = Builder()
        self.warnings: list[str] = []
        self.seen_parts: set[str] = set()

    # -- package plumbing -------------------------------------------------------------------------

    def xml(self, path: str) -> etree._Element | None:
        if path not in self.names:
            return None
        return etree.fromstring(self.zf.read(path), _PARSER)

    def rels(self, part: str) -> list[tuple[str, str, str]]:
        """``(id, type, target path)`` of ``part``'s relationships (internal targets only)."""
        folder, base = posixpath.split(part)
        root = self.xml(posixpath.join(folder, "_rels", base + ".rels"))
        if root is None:
            return []
        out = []
        for rel in root.iter(f"{PR}Relationship"):
            if rel.get("TargetMode") == "External":
                continue
            target = rel.get("Target", "")
            path = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
            out.append((rel.get("Id", ""), rel.get("Type", "").rsplit("/", 1)[-1], path))
        return out

    # -- the workbook -----------------------------------------------------------------------------

    def read(self) -> Document:
        book = self._workbook_part()
        root = self.xml(book)
        if root is None:
            raise UnsupportedFile("unreadable Excel workbook: no workbook part")
        if root.tag != f"{S}workbook" or root.find(f"{S}sheets/{S}sheet") is None:
            raise UnsupportedFile("unreadable Excel workbook: its workbook part lists no sheets")
        pr = root.find(f"{S}workbookPr")
        self.date1904 = pr is not None and pr.get("date1904", "").lower() in ("1", "true")
        targets = {rid: path for rid, _, path in self.rels(book)}
        self.formats = self._styles(book)
        self.strings = self._shared_strings(book)
        for index, sheet in enumerate(root.iter(f"{S}sheet"), start=1):
            name = sheet.get("name") or f"Sheet{index}"
            state = sheet.get("state", "visible")
            if state != "visible":
                self.warnings.append(
                    f"sheet '{name}' is {'very hidden' if state == 'veryHidden' else 'hidden'}: read anyway"
                )
            path = targets.get(sheet.get(f"{R}id", ""))
            if path is None or path not in self.names:
                self.warnings.append(f"sheet '{name}': its part is missing, not read")
                continue
            self._sheet(name, path)
        self._leftover_embeddings()
        return self.builder.build(
            "xlsx", empty="no text: the workbook has no values", warnings=self.warnings, title=self._title()
        )

    def _title(self) -> str | None:
        path = next((p for _, kind, p in self.rels("") if kind == "core-properties"), "docProps/core.xml")
        try:
            root = self.xml(path)
        except etree.XMLSyntaxError:
            return None
        title = root.find(f"{DC}title") if root is not None else None
        return (title.text or None) if title is not None else None

    def _workbook_part(self) -> str:
        for _, kind, path in self.rels(""):
            if kind == "officeDocument" and path in self.names:
                return path
        return "xl/workbook.xml"

    def _styles(self, book: str) -> list[str]:
        """The number format code of each cell style (``cellXfs`` index)."""
        path = next((p for _, kind, p in self.rels(book) if kind == "styles"), "xl/styles.xml")
        root = self.xml(path)
        if root is None:
            return []
        custom = {int(f.get("numFmtId", "-1")): f.get("formatCode", "") for f in root.iter(f"{S}numFmt")}
        codes = []
        xfs = root.find(f"{S}cellXfs")
        for xf in xfs.iter(f"{S}xf") if xfs is not None else ():
            fid = int(xf.get("numFmtId", "0") or 0)
            codes.append(custom.get(fid) or BUILTIN_FORMATS.get(fid, "General"))
        return codes

    def _shared_strings(self, book: str) -> list[str]:
        path = next((p for _, kind, p in self.rels(book) if kind == "sharedStrings"), "xl/sharedStrings.xml")
        root = self.xml(path)
        if root is None:
            return []
        return [_rich_text(si) for si in root.iter(f"{S}si")]

    # -- one sheet --------------------------------------------------------------------------------

    def _sheet(self, name: str, path: str) -> None:
        if path not in self.names:
            return
        self.seen_parts.add(path)
        heading = name
        rels = self.rels(path)
        tag, lines, hf = self._sheet_data(name, path)
        headers, footers = _headers_footers(hf)
        if headers:
            self.builder.add("\n".join(f"page header: {h}" for h in headers), heading=heading)
        if tag == f"{S}worksheet":
            self.builder.add("\n".join(lines), heading=heading)
            for _, kind, target in rels:
                if kind == "comments":
                    self._comments(target, heading)
        for _, kind, target in rels:
            if kind == "drawing":
                self._drawing(target, heading)
            elif kind in ("oleObject", "package") and target in self.names:
                self._embedded(target, heading)
        if footers:
            self.builder.add("\n".join(f"page footer: {f}" for f in footers), heading=heading)

    def _sheet_data(self, name: str, path: str) -> tuple[str, list[str], etree._Element | None]:
        """``(root tag, row lines, headerFooter element)`` of a sheet part, parsed as a stream: each
        cell is read and let go, so the cost follows the cells present, not the declared used range."""
        size = self.zf.getinfo(path).file_size
        rows: dict[int, dict[int, tuple[str, bool]]] = {}
        merges: list[tuple[int, int, int]] = []
        hf = None
        empty_formulas = 0
        hidden_rows = 0
        hidden_cols: list[str] = []
        values = 0
        row_no = col_no = 0
        row_el = None  # the row whose number row_no is
        told = False
        expect(f"sheet '{name}' is {size:,} bytes of XML")
        with self.zf.open(path) as stream:
            events = etree.iterparse(
                stream,
                events=("end",),
                resolve_entities=False,
                no_network=True,
                huge_tree=True,
                tag=(f"{S}c", f"{S}row", f"{S}mergeCell", f"{S}dimension", f"{S}headerFooter", f"{S}col"),
            )
            for _, el in events:
                tag = el.tag
                if tag == f"{S}c":
                    row = el.getparent()
                    if row is not row_el and row is not None and row.tag == f"{S}row":
                        row_el, row_no, col_no = row, _row_number(row, row_no), 0
                    ref = _CELL_REF.match(el.get("r") or "")
                    col_no = _column_index(ref.group(1)) if ref else col_no + 1
                    value = self._cell(el)
                    if value is None:
                        if el.find(f"{S}f") is not None:
                            empty_formulas += 1
                    else:
                        text = one_line(value[0])
                        if text:
                            rows.setdefault(row_no, {})[col_no] = (text, value[1])
                            values += 1
                    _let_go(el)
                elif tag == f"{S}row":
                    if el is not row_el:
                        row_no = _row_number(el, row_no)
                    if el.get("hidden") in ("1", "true") and row_no in rows:  # hidden or filtered out
                        hidden_rows += 1
                    row_el = None
                    _let_go(el)
                elif tag == f"{S}col":
                    span = _hidden_columns(el)
                    if span:
                        hidden_cols.append(span)
                elif tag == f"{S}mergeCell":
                    first, _, last = (el.get("ref") or "").partition(":")
                    top_left, bottom = _CELL_REF.fullmatch(first), _CELL_REF.fullmatch(last or first)
                    if top_left is not None and bottom is not None:
                        merges.append((_column_index(top_left.group(1)), int(top_left.group(2)), int(bottom.group(2))))
                    _let_go(el)
                elif tag == f"{S}dimension" and not told:
                    told = True
                    expect(
                        f"sheet '{name}' declares a used range of {_range_size(el.get('ref') or '')};"
                        f" the {size:,} bytes of its XML are read"
                    )
                elif tag == f"{S}headerFooter":
                    hf = el
            root_tag = events.root.tag if events.root is not None else ""
        if empty_formulas:
            self.warnings.append(
                f"{empty_formulas} formula cell(s) have no saved result (the workbook was not recalculated): left out"
            )
        hidden = _hidden_text(hidden_rows, hidden_cols)
        if hidden:
            self.warnings.append(f"sheet '{name}': {hidden} hidden or filtered out: read all the same")
        _spread_merges(rows, merges, values, name, self.warnings)
        return root_tag, _layout(rows), hf

    def _cell(self, c: etree._Element) -> tuple[str, bool] | None:
        kind = c.get("t", "n")
        if kind == "inlineStr":
            inline = c.find(f"{S}is")
            return (_rich_text(inline), True) if inline is not None else None
        v = c.find(f"{S}v")
        if v is None or v.text is None:
            return None
        raw = v.text
        code = self._code(c)
        if kind == "s":
            try:
                return format_text(self.strings[int(raw)], code), True
            except (ValueError, IndexError):
                return None
        if kind in ("str", "e", "d"):
            return (format_text(raw, code) if kind == "str" else raw), True
        if kind == "b":
            return ("TRUE" if raw.strip() in ("1", "true") else "FALSE"), False
        try:
            number = float(raw)
        except ValueError:
            return raw, True
        return format_number(number, code, date1904=self.date1904), False

    def _code(self, c: etree._Element) -> str:
        try:
            return self.formats[int(c.get("s", "0"))]
        except (ValueError, IndexError):
            return "General"

    def _comments(self, path: str, heading: str) -> None:
        """A sheet's cell comments (the legacy ``comments`` part; Excel writes one for threaded
        comments too), in row order: ``comment on B2 (author): text``."""
        root = self.xml(path)
        if root is None:
            return
        self.seen_parts.add(path)
        authors = [a.text or "" for a in root.iter(f"{S}author")]
        found: dict[tuple[int, int], str] = {}
        for comment in root.iter(f"{S}comment"):
            ref = _CELL_REF.fullmatch(comment.get("ref") or "")
            body = comment.find(f"{S}text")
            if ref is None or body is None:
                continue
            text = one_line("".join(t.text or "" for t in body.iter(f"{S}t") if t.getparent().tag != f"{S}rPh"))
            if not text:
                continue
            try:
                author = one_line(authors[int(comment.get("authorId") or "")])
            except (ValueError, IndexError):
                author = ""
            by = f" ({author})" if author else ""
            found[int(ref.group(2)), _column_index(ref.group(1))] = f"comment on {ref.group(0)}{by}: {text}"
        if found:
            self.builder.add("\n".join(found[k] for k in sorted(found)), heading=heading)

    # -- drawings, charts, SmartArt, embedded files -------------------------------------------------

    def _drawing(self, path: str, heading: str) -> None:
        root = self.xml(path)
        if root is None:
            return
        self.seen_parts.add(path)
        # Of mc:AlternateContent only the choice: a fallback says "this shape represents a slicer ...".
        texts = [
            t
            for body in root.iter("{*}txBody")
            if not any(a.tag == f"{MC}Fallback" for a in body.iterancestors()) and (t := _paragraphs(body))
        ]
        if texts:
            self.builder.add("\n".join(texts), heading=heading)
        for _, kind, target in self.rels(path):
            if kind == "chart":
                self._chart(target, heading)
            elif kind == "diagramData":
                self._diagram(target, heading)
            elif kind in ("oleObject", "package") and target in self.names:
                self._embedded(target, heading)

    def _chart(self, path: str, heading: str) -> None:
        root = self.xml(path)
        if root is None or path in self.seen_parts:
            return
        self.seen_parts.add(path)
        texts: list[str] = []
        # Titles and rich labels (c:rich), series names and category labels (string caches); the
        # numbers are data, not labels.
        for holder in root.iter(f"{C}rich", f"{C}strCache", f"{C}strLit", f"{C}multiLvlStrCache"):
            texts.extend(one_line(n.text) for n in holder.iter(f"{A}t", f"{C}v") if n.text and n.text.strip())
        texts = list(dict.fromkeys(texts))
        if texts:
            self.builder.add("chart: " + " | ".join(texts), heading=heading)

    def _diagram(self, path: str, heading: str) -> None:
        root = self.xml(path)
        if root is None or path in self.seen_parts:
            return
        self.seen_parts.add(path)
        texts = []
        for pt in root.iter(f"{DGM}pt"):
            if pt.get("type", "node") not in ("node", "asst"):
                continue
            body = pt.find(f"{DGM}t")
            if body is not None and (text := _paragraphs(body)):
                texts.append(text)
        if texts:
            self.builder.add("\n".join(texts), heading=heading)

    def _embedded(self, path: str, heading: str | None) -> None:
        if path in self.seen_parts:
            return
        self.seen_parts.add(path)
        part = posixpath.basename(path)
        try:
            blob = self.zf.read(path)
        except Exception as exc:  # zlib.error, BadZipFile (CRC), NotImplementedError
            self.warnings.append(f"embedded {part}: not read: damaged ({in_words(exc)})")
            return
        found = unwrap_ole(blob, part, self.warnings)
        if found is not None:
            name, payload = found
            add_part(self.builder, self.read_part, payload, name, join_path(heading, name))

    def _leftover_embeddings(self) -> None:
        chart_data = chart_data_parts(self.zf, "xl/")
        for path in sorted(self.names - self.seen_parts - chart_data):
            if path.startswith("xl/embeddings/") and not path.endswith("/"):
                self._embedded(path, None)


# -- helpers --------------------------------------------------------------------------------------


def _hidden_columns(col: etree._Element) -> str | None:
    """``"C"`` or ``"C-D"`` for a ``cols/col`` hidden by the sheet (``@hidden``, ECMA-376 §18.3.1.13);
    ``None`` when it shows, or when it is the unused span after the last column, hidden as one."""
    if col.get("hidden") not in ("1", "true"):
        return None
    first, last = _int_or(col.get("min"), 1), _int_or(col.get("max"), 1)
    if last >= 16384 and first > 1:
        return None
    return _column_letters(first) + ("" if last == first else f"-{_column_letters(min(last, 16384))}")


def _hidden_text(rows: int, spans: list[str]) -> str:
    """``"2 rows and columns C-D"``: rows hidden by the sheet (``row/@hidden``, which filtered-out
    rows set too, §18.3.1.73) that hold a value, and the hidden column spans; empty when none."""
    out = []
    if rows:
        out.append(f"{rows} row{'' if rows == 1 else 's'}")
    if spans:
        plural = len(spans) > 1 or "-" in spans[0]
        out.append(f"column{'s' if plural else ''} " + ", ".join(spans[:10]) + (" ..." if len(spans) > 10 else ""))
    return " and ".join(out)


def _int_or(value: str | None, default: int) -> int:
    try:
        return int(value or "")
    except ValueError:
        return default


def _let_go(el: etree._Element) -> None:
    """Free a parsed element and the siblings before it (read already), keeping the stream small."""
    el.clear(keep_tail=True)
    parent = el.getparent()
    if parent is not None:
        while el.getprevious() is not None:
            del parent[0]


def _row_number(row: etree._Element, previous: int) -> int:
    try:
        return int(row.get("r") or previous + 1)
    except ValueError:
        return previous + 1


def _range_size(ref: str) -> str:
    """``"1,048,576 × 16,384 cells"`` for ``"A1:XFD1048576"``."""
    first, _, last = ref.partition(":")
    a, b = _CELL_REF.fullmatch(first), _CELL_REF.fullmatch(last or first)
    if a is None or b is None:
        return "unknown size"
    rows = abs(int(b.group(2)) - int(a.group(2))) + 1
    cols = abs(_column_index(b.group(1)) - _column_index(a.group(1))) + 1
    return f"{rows:,} × {cols:,} cells"


def _spread_merges(
    rows: dict[int, dict[int, tuple[str, bool]]],
    merges: list[tuple[int, int, int]],
    values: int,
    sheet: str,
    warnings: list[str],
) -> None:
    """Give each merged range's value (its top-left cell's, ``(column, first row, last row)``) to the
    rows below it in its range: every row of a range up to :data:`MAX_MERGE_ROWS` rows, the rows that
    hold other values of a taller one; at most ``values`` + :data:`MAX_MERGE_FILLS` in all."""
    budget = values + MAX_MERGE_FILLS
    order: list[int] | None = None
    tall: list[str] = []
    stopped = False
    for col, first, last in merges:
        top = rows.get(first, {}).get(col)
        if top is None or last <= first:
            continue
        if last - first < MAX_MERGE_ROWS:
            targets: range | list[int] = range(first + 1, last + 1)
        else:
            if order is None:
                order = sorted(rows)
            targets = order[bisect_right(order, first) : bisect_left(order, last + 1)]
            tall.append(f"{_column_letters(col)}{first}:{_column_letters(col)}{last}")
        for r in targets:
            if budget <= 0:
                stopped = True
                break
            cells = rows.setdefault(r, {})
            if col not in cells:
                cells[col] = top
                budget -= 1
        if stopped:
            break
    if tall:
        if len(tall) == 1:
            warnings.append(
                f"sheet '{sheet}': merged range {tall[0]} spans more than {MAX_MERGE_ROWS:,} rows: its"
                " value is given only to the rows in it that hold other values"
            )
        else:
            warnings.append(
                f"sheet '{sheet}': merged ranges {tall[0]} and {len(tall) - 1:,} more span more than"
                f" {MAX_MERGE_ROWS:,} rows: their values are given only to the rows in them that hold"
                " other values"
            )
    if stopped:
        warnings.append(
            f"sheet '{sheet}': merged ranges give their value to at most {MAX_MERGE_FILLS:,} rows"
            " more than the sheet has values; the other merged rows are left without it"
        )


def _column_index(letters: str) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + ord(ch) - 64
    return n


def _column_letters(index: int) -> str:
    out = ""
    while index:
        index, rem = divmod(index - 1, 26)
        out = chr(65 + rem) + out
    return out


def _rich_text(si: etree._Element) -> str:
    """A shared or inline string: its runs' text, then its phonetic runs (``rPh``) after a space."""
    base = "".join(t.text or "" for t in si.iter(f"{S}t") if t.getparent().tag != f"{S}rPh")
    phonetic = "".join(t.text or "" for ph in si.iter(f"{S}rPh") for t in ph.iter(f"{S}t"))
    return f"{base} {phonetic}" if phonetic.strip() else base


def _paragraphs(body: etree._Element) -> str:
    lines = []
    for p in body.iter(f"{A}p"):
        text = "".join((n.text or "") if n.tag == f"{A}t" else "\n" for n in p.iter(f"{A}t", f"{A}br"))
        if text.strip():
            lines.append(text.strip())
    return "\n".join(lines)


def _layout(rows: dict[int, dict[int, tuple[str, bool]]]) -> list[str]:
    """``row N | header: value | ...`` lines; rows above the header row as ``row N | a | b``."""
    order = sorted(rows)
    header_at = None
    for i, r in enumerate(order[:-1]):
        cells = rows[r]
        if len(cells) >= 2 and all(is_text for _, is_text in cells.values()):
            header_at = i
            break
    lines = []
    header: dict[int, str] = {}
    for i, r in enumerate(order):
        cells = rows[r]
        if header_at is None or i < header_at:
            lines.append(f"row {r} | " + " | ".join(cells[c][0] for c in sorted(cells)))
        elif i == header_at:
            header = {c: text for c, (text, _) in cells.items()}
        else:
            pairs = [f"{header.get(c) or 'column ' + _column_letters(c)}: {cells[c][0]}" for c in sorted(cells)]
            lines.append(f"row {r} | " + " | ".join(pairs))
    if header_at is not None and header_at == len(order) - 1:
        lines.append(f"row {order[-1]} | " + " | ".join(header[c] for c in sorted(header)))
    return lines


def _headers_footers(hf: etree._Element | None) -> tuple[list[str], list[str]]:
    """The distinct page headers and footers of a sheet's ``headerFooter`` (odd, even, first page),
    codes stripped."""
    headers: list[str] = []
    footers: list[str] = []
    if hf is None:
        return headers, footers
    for tag, into in (
        ("oddHeader", headers),
        ("evenHeader", headers),
        ("firstHeader", headers),
        ("oddFooter", footers),
        ("evenFooter", footers),
        ("firstFooter", footers),
    ):
        node = hf.find(f"{S}{tag}")
        if node is None or not node.text:
            continue
        text = _header_text(node.text)
        if text and text not in into:
            into.append(text)
    return headers, footers


def _header_text(raw: str) -> str:
    raw = raw.replace("&&", "\x00")
    parts = [_HF_CODE.sub("", p).replace("\x00", "&") for p in _HF_SECTION.split(raw) if p not in ("L", "C", "R")]
    return " | ".join(one_line(p) for p in parts if one_line(p))


# -- legacy .xls (BIFF) ---------------------------------------------------------------------------

#: Excel's built-in password for workbooks protected against changes only (opens without asking).
_DEFAULT_PASSWORD = "VelvetSweatshop"


def read_xls(data: bytes) -> Document:
    """Read a legacy Excel 97-2003 workbook (.xls, BIFF8; also BIFF2-5) with xlrd: the same sheets,
    rows, displayed values, merged ranges, comments and hidden-sheet warnings as :func:`read_xlsx`
    (xlrd reads no page headers/footers, drawings or embedded objects). Rows are read ragged (the
    cells present, not the used range); merged ranges as in :func:`read_xlsx`.

    Raises:
        UnsupportedFile: a damaged workbook, or one encrypted with a password of its own.
        EmptyDocument: no sheet has a value.
    """
    import xlrd  # noqa: PLC0415 - legacy Excel files only

    try:
        book = _open_xls(xlrd, data)
    except KnowledgeError:
        raise
    except Exception as exc:  # XLRDError, CompDocError, struct.error, ...
        raise UnsupportedFile(f"unreadable Excel 97-2003 workbook (.xls): {in_words(exc)}") from exc
    builder = Builder()
    warnings: list[str] = []
    date1904 = book.datemode == 1
    for sheet in book.sheets():
        if sheet.visibility:
            warnings.append(f"sheet '{sheet.name}' is {'very hidden' if sheet.visibility == 2 else 'hidden'}: read anyway")
        expect(
            f"sheet '{sheet.name}' has a used range of {sheet.nrows:,} × {sheet.ncols:,} cells; the cells present are read"
        )
        rows: dict[int, dict[int, tuple[str, bool]]] = {}
        values = 0
        for r in range(sheet.nrows):
            for c in range(sheet.row_len(r)):  # ragged rows: the cells present, not the used range
                value = _xls_cell(xlrd, book, sheet.cell(r, c), date1904)
                if value is not None and (text := one_line(value[0])):
                    rows.setdefault(r + 1, {})[c + 1] = (text, value[1])
                    values += 1
        merges = [(clo + 1, rlo + 1, rhi) for rlo, rhi, clo, _ in getattr(sheet, "merged_cells", [])]
        _spread_merges(rows, merges, values, sheet.name, warnings)
        builder.add("\n".join(_layout(rows)), heading=sheet.name)
        notes = []
        for (r, c), note in sorted(getattr(sheet, "cell_note_map", {}).items()):
            author = one_line(note.author or "")
            text = one_line(note.text or "")
            if text:
                by = f" ({author})" if author else ""
                notes.append(f"comment on {_column_letters(c + 1)}{r + 1}{by}: {text}")
        if notes:
            builder.add("\n".join(notes), heading=sheet.name)
    return builder.build("xls", empty="no text: the workbook has no values", warnings=warnings)


def _open_xls(xlrd, data: bytes):
    try:
        return xlrd.open_workbook(file_contents=data, formatting_info=True, ragged_rows=True, logfile=io.StringIO())
    except xlrd.XLRDError as exc:
        if "encrypted" not in str(exc).lower():
            raise
    # Encrypted: Excel's default password opens workbooks protected against changes only.
    import msoffcrypto  # noqa: PLC0415 - encrypted legacy workbooks only

    try:
        office = msoffcrypto.OfficeFile(io.BytesIO(data))
        office.load_key(password=_DEFAULT_PASSWORD)
        plain = io.BytesIO()
        office.decrypt(plain)
    except Exception as exc:
        raise UnsupportedFile(
            "unsupported: a password-protected Excel 97-2003 workbook (.xls) — open it in"
            " Excel, remove the password or save it as .xlsx"
        ) from exc
    return xlrd.open_workbook(file_contents=plain.getvalue(), formatting_info=True, ragged_rows=True, logfile=io.StringIO())


def _xls_cell(xlrd, book, cell, date1904: bool) -> tuple[str, bool] | None:
    kind = cell.ctype
    if kind == xlrd.XL_CELL_TEXT:
        return str(cell.value), True
    if kind in (xlrd.XL_CELL_NUMBER, xlrd.XL_CELL_DATE):
        code = "General"
        try:
            xf = book.xf_list[cell.xf_index]
            code = book.format_map[xf.format_key].format_str or "General"
        except (AttributeError, IndexError, KeyError, TypeError):
            pass
        return format_number(float(cell.value), code, date1904=date1904), False
    if kind == xlrd.XL_CELL_BOOLEAN:
        return ("TRUE" if cell.value else "FALSE"), False
    if kind == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERROR"), True
    return None
