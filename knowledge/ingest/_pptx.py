"""PowerPoint .pptx (also .pptm, .ppsx, .potx): the text a person can read on the slides, in each
slide's shape order, with the slide number as ``page`` and the slide's title as heading.

python-pptx opens the package (content types, relationships, slide order); each part's XML is then
walked with lxml (PresentationML, ECMA-376 Part 1 §19; DrawingML §20). Read: text boxes, placeholders
and WordArt, groups inside groups, tables (one line per row, cells tab-separated), SmartArt (the
diagram's data part), chart titles, series names and category labels, speaker notes and comments
(legacy and modern, author as ``"name (initials)"``) after their slide, objects embedded on a slide
(PDF, Office files, OLE packages) through the deck's ``read_part``; then, once for the deck, the text
boxes and the header/footer/date placeholders of the slide masters, the layouts slides use, the notes
master and the handout master. Left out: placeholder prompts on masters and layouts ("Click to edit
Master title style"), slide-number fields, pictures, ink; shapes marked hidden and layouts no slide
uses (both counted in the warnings). Hidden slides are read and named in the warnings.
Details: ``docs/ingestion.md``.
"""

from __future__ import annotations

import dataclasses
import io
import posixpath
import zipfile
from collections.abc import Iterator

from lxml import etree

from knowledge.errors import EmptyDocument, KnowledgeError, UnsupportedFile, in_words
from knowledge.ingest._compose import ReadPart, add_part, join_path
from knowledge.ingest._embedded import unwrap_ole
from knowledge.ingest._text import Builder, clean, one_line
from knowledge.ingest._zipsafe import MAX_PACKAGE_BYTES, check_package
from knowledge.ingest.document import Document

A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
DGM = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"
_RT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/"
#: Modern (threaded) comments and their authors, PowerPoint 365 ([MS-PPTX] §2.1.4).
_RT_MODERN_COMMENTS = "http://schemas.microsoft.com/office/2018/10/relationships/comments"
_RT_AUTHORS = "http://schemas.microsoft.com/office/2018/10/relationships/authors"

#: A deck that unpacks to more than this is refused before python-pptx reads it (a "zip bomb").
MAX_UNPACKED_BYTES = MAX_PACKAGE_BYTES

#: Placeholders whose text on a master or layout is real text (a footer, a date, a header), not a
#: prompt that a slide replaces (ECMA-376 §19.7.10 ST_PlaceholderType).
_KEPT_PLACEHOLDERS = frozenset({"hdr", "ftr", "dt", "sldNum"})
_TITLES = frozenset({"title", "ctrTitle"})

_SAFE_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def read_pptx(data: bytes, read_part: ReadPart) -> Document:
    """Read a PowerPoint deck; ``page`` is the slide number, the heading the slide's title.

    ``read_part(bytes, name)`` reads an object embedded on a slide (:mod:`knowledge.ingest._compose`).

    Raises:
        UnsupportedFile: a damaged ZIP (``"damaged: ..."``) or a package without a presentation;
            entries that overlap each other's data (an overlapping zip bomb).
        FileTooLarge: the package unpacks to more than :data:`MAX_UNPACKED_BYTES`.
        EmptyDocument: no text on any slide, in its notes, comments or embedded objects (the text of
            the masters alone, such as a template's date, does not make a document).
    """
    _check_zip(data)
    try:
        from pptx.package import Package  # noqa: PLC0415 - heavy, PowerPoint files only
        from pptx.parts.presentation import PresentationPart  # noqa: PLC0415 - the same

        # Not pptx.Presentation(): it refuses slide shows (.ppsx) and templates (.potx), whose main
        # part python-pptx reads all the same.
        main = Package.open(io.BytesIO(data)).main_document_part
        if not isinstance(main, PresentationPart):
            raise UnsupportedFile(f"damaged: not a PowerPoint presentation (its main part is {main.content_type})")
        prs = main.presentation
    except KnowledgeError:
        raise
    except Exception as exc:  # KeyError, XMLSyntaxError, PackageNotFoundError, ValueError ...
        raise UnsupportedFile(f"damaged: this PowerPoint presentation cannot be read ({in_words(exc)})") from exc
    try:
        return _Deck(prs, read_part).read()
    except KnowledgeError:
        raise
    except Exception as exc:  # a part python-pptx opened lazily and found broken
        raise UnsupportedFile(f"damaged: this PowerPoint presentation cannot be read ({in_words(exc)})") from exc


def _check_zip(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = {i.filename for i in zf.infolist()}
            check_package(zf, data, "PowerPoint presentation", MAX_UNPACKED_BYTES)
            bad = zf.testzip()
    except KnowledgeError:
        raise
    except zipfile.BadZipFile as exc:
        raise UnsupportedFile(f"damaged: this PowerPoint presentation is not a valid ZIP ({exc})") from exc
    except Exception as exc:  # zlib.error, EOFError, NotImplementedError (compression method)
        raise UnsupportedFile(f"damaged: this PowerPoint presentation cannot be unpacked ({in_words(exc)})") from exc
    if bad is not None:
        raise UnsupportedFile(f"damaged: this PowerPoint presentation's member {bad} fails its checksum")
    if "[Content_Types].xml" not in names:
        raise UnsupportedFile("damaged: not an Office package (no [Content_Types].xml)")


# -- package helpers ------------------------------------------------------------------------------


def _xml(part) -> etree._Element | None:
    """The root element of ``part`` (python-pptx's own element, or its bytes parsed)."""
    element = getattr(part, "_element", None)
    if element is not None:
        return element
    blob = getattr(part, "blob", None)
    if not blob:
        return None
    try:
        return etree.fromstring(blob, _SAFE_PARSER)
    except etree.XMLSyntaxError:
        return None


def _related(part, *reltypes: str) -> list:
    """The internal parts ``part`` relates to with one of ``reltypes`` (full URIs or short names)."""
    wanted = {t if "/" in t else _RT + t for t in reltypes}
    out = []
    for rel in part.rels.values():
        if rel.reltype in wanted and not rel.is_external:
            try:
                out.append(rel.target_part)
            except Exception:  # a dangling relationship: nothing to read there
                continue
    return out


def _target(part, rid: str | None):
    if not rid:
        return None
    rel = part.rels.get(rid)
    if rel is None or rel.is_external:
        return None
    try:
        return rel.target_part
    except Exception:
        return None


def _local(tag) -> str:
    return etree.QName(tag).localname if isinstance(tag, str) else ""


# -- text of DrawingML ----------------------------------------------------------------------------


def _paragraph(p: etree._Element) -> str:
    """The text of one ``a:p``: runs, fields (not slide numbers) and line breaks."""
    out: list[str] = []
    for child in p:
        tag = child.tag
        if tag == A + "r":
            t = child.find(A + "t")
            out.append(t.text or "" if t is not None else "")
        elif tag == A + "fld":
            if child.get("type") != "slidenum":
                t = child.find(A + "t")
                out.append(t.text or "" if t is not None else "")
        elif tag == A + "br":
            out.append("\n")
        elif tag == MC + "AlternateContent":  # an equation (a14:m, its OMML m:t) or its fallback runs
            for branch in _choice(child):
                out.extend(t.text or "" for t in branch.iter(A + "t", M + "t"))
    return "".join(out)


def _text_body(body: etree._Element | None) -> str:
    if body is None:
        return ""
    return "\n".join(_paragraph(p) for p in body.iter(A + "p"))


def _choice(ac: etree._Element) -> list[etree._Element]:
    """The content of an ``mc:AlternateContent``: its first ``mc:Choice``, else its ``mc:Fallback``
    (never both: they hold the same object twice)."""
    for branch in (ac.find(MC + "Choice"), ac.find(MC + "Fallback")):
        if branch is not None and len(branch):
            return list(branch)
    return []


class _Block:
    """One piece of a slide: text with what it is."""

    __slots__ = ("header", "kind", "payload", "placeholder", "text")

    def __init__(
        self,
        text: str,
        kind: str = "text",
        *,
        placeholder: str | None = None,
        header: int = 0,
        payload: tuple[bytes, str, str | None] | None = None,
    ) -> None:
        self.text, self.kind, self.placeholder, self.header = text, kind, placeholder, header
        self.payload = payload  # an embedded object: (its part's bytes, the part's name, its own name)


class _Deck:
    def __init__(self, prs, read_part: ReadPart) -> None:
        self.prs = prs
        self.read_part = read_part
        self.builder = Builder()
        self.warnings: list[str] = []
        self.once: set[str] = set()  # header/footer/date texts already indexed for the deck
        self.skipped: dict[str, int] = {}
        self.hidden_shapes = 0  # shapes with text hidden in the selection pane (never shown), left out
        self.title: str | None = None
        self.authors, self.modern_authors = self._authors()

    # -- the deck ---------------------------------------------------------------------------------

    def read(self) -> Document:
        for number, slide in enumerate(self.prs.slides, start=1):
            self._slide(number, slide)
        empty = "no text: this PowerPoint presentation has no text (pictures only, or empty slides?)"
        if self.builder.empty:  # a template's date or footer alone is not a document
            raise EmptyDocument(empty)
        self._masters()
        if self.hidden_shapes:
            n = self.hidden_shapes
            self.warnings.append(
                f"{n} hidden shape{'' if n == 1 else 's'} with text (hidden in PowerPoint's selection"
                " pane, never shown) left out"
            )
        for what, n in sorted(self.skipped.items()):
            self.warnings.append(f"{n} {what}{'' if n == 1 else 's'} not read")
        title = self._core_title() or self.title
        return self.builder.build("pptx", empty=empty, title=title, warnings=self.warnings)

    def _core_title(self) -> str | None:
        try:
            title = self.prs.core_properties.title
        except Exception:
            return None
        return (one_line(title) or None) if isinstance(title, str) else None

    def _authors(self) -> tuple[dict[str, str], dict[str, str]]:
        legacy: dict[str, str] = {}
        modern: dict[str, str] = {}
        for target, reltypes in ((legacy, ("commentAuthors",)), (modern, (_RT_AUTHORS,))):
            for part in _related(self.prs.part, *reltypes):
                root = _xml(part)
                if root is None:
                    continue
                for author in root.iter():
                    if _local(author.tag) not in ("cmAuthor", "author"):
                        continue
                    name = one_line(author.get("name") or "")
                    initials = one_line(author.get("initials") or "")
                    label = f"{name} ({initials})" if name and initials else name or initials
                    if author.get("id") is not None and label:
                        target[author.get("id", "")] = label
        return legacy, modern

    # -- a slide ------------------------------------------------------------------------------------

    def _slide(self, number: int, slide) -> None:
        part = slide.part
        root = slide._element
        if root.get("show") in ("0", "false"):
            self.warnings.append(f"slide {number} is hidden: indexed anyway (a hidden slide is part of the deck)")
        blocks = list(self._shapes(root.find(f"{P}cSld/{P}spTree"), part, number, master=False))
        title = next((one_line(b.text) for b in blocks if b.placeholder in _TITLES and b.text.strip()), None)
        if title and self.title is None:
            self.title = title
        ordered = [b for b in blocks if b.placeholder in _TITLES] + [b for b in blocks if b.placeholder not in _TITLES]
        for b in ordered:
            self._emit(b, page=number, heading=title)
        self._embedded(blocks, number, title)
        if slide.has_notes_slide:
            notes = slide.notes_slide
            heading = join_path(title, "Notes")
            tree = notes._element.find(f"{P}cSld/{P}spTree")
            note_blocks = list(self._shapes(tree, notes.part, number, master=False))
            for b in note_blocks:
                self._emit(b, page=number, heading=heading)
            self._embedded(note_blocks, number, heading)
        self._comments(part, number, title)

    def _emit(self, b: _Block, *, page: int | None, heading: str | None) -> None:
        if b.kind == "embedded":
            return
        if b.placeholder in _KEPT_PLACEHOLDERS:
            key = one_line(clean(b.text))
            if not key or key in self.once:
                return
            self.once.add(key)
        self.builder.add(b.text, page=page, heading=heading, table_header=b.header)

    def _embedded(self, blocks: list[_Block], number: int, title: str | None) -> None:
        for b in blocks:
            if b.kind != "embedded":
                continue
            if b.payload is None:
                continue
            blob, part, label = b.payload
            refused: list[str] = []
            found = unwrap_ole(blob, part, refused, label=label)
            self.warnings.extend(f"slide {number}: {w}" for w in refused)
            if found is None:
                continue
            name, data = found
            before = len(self.builder.warnings)
            ok = add_part(
                self.builder, self._on_slide(number), data, name, join_path(title, f"embedded {name}"), page=number
            )
            if not ok and len(self.builder.warnings) > before:
                self.builder.warnings[-1] = f"slide {number}: {self.builder.warnings[-1]}"

    def _on_slide(self, number: int) -> ReadPart:
        """``read_part`` whose document sits on slide ``number``: an embedded PDF's own page numbers
        would point into a file the reader cannot open by itself."""

        def read(data: bytes, name: str) -> Document:
            doc = self.read_part(data, name)
            return dataclasses.replace(doc, sections=[dataclasses.replace(s, page=number) for s in doc.sections])

        return read

    def _comments(self, part, number: int, title: str | None) -> None:
        heading = join_path(title, "Comments")
        for cpart in _related(part, "comments"):
            root = _xml(cpart)
            if root is None:
                continue
            for cm in root.iter(P + "cm"):
                text = (cm.findtext(P + "text") or "").strip()
                author = self.authors.get(cm.get("authorId", ""), "")
                if text:
                    self.builder.add(f"{author}: {text}" if author else text, page=number, heading=heading)
        for cpart in _related(part, _RT_MODERN_COMMENTS):
            root = _xml(cpart)
            if root is None:
                continue
            for cm in root.iter():
                if _local(cm.tag) not in ("cm", "reply"):
                    continue
                body = next((c for c in cm if _local(c.tag) == "txBody"), None)
                text = _text_body(body).strip()
                author = self.modern_authors.get(cm.get("authorId", ""), "")
                if text:
                    self.builder.add(f"{author}: {text}" if author else text, page=number, heading=heading)

    # -- shapes -------------------------------------------------------------------------------------

    def _shapes(self, tree: etree._Element | None, part, number: int | None, *, master: bool) -> Iterator[_Block]:
        """The blocks of a shape tree (or group), in document order, groups recursively.

        ``master``: a master or layout, whose placeholders are prompts unless they are a header,
        footer, date or slide number.
        """
        if tree is None:
            return
        for child in tree:
            yield from self._shape(child, part, number, master=master)

    def _shape(self, el: etree._Element, part, number: int | None, *, master: bool) -> Iterator[_Block]:
        tag = el.tag
        if _hidden_shape(el):  # ECMA-376 §19.3.1.12 cNvPr/@hidden: neither the slide nor the show draws it
            if any((t.text or "").strip() for t in el.iter(A + "t")):
                self.hidden_shapes += 1
            return
        if tag == MC + "AlternateContent":
            for inner in _choice(el):
                yield from self._shape(inner, part, number, master=master)
        elif tag == P + "grpSp":
            yield from self._shapes(el, part, number, master=master)
        elif tag == P + "sp":
            ph = el.find(f"{P}nvSpPr/{P}nvPr/{P}ph")
            ph_type = None if ph is None else ph.get("type", "body")
            if master and ph_type is not None and ph_type not in _KEPT_PLACEHOLDERS:
                return
            text = _text_body(el.find(P + "txBody"))
            if text.strip():
                yield _Block(text, placeholder=ph_type)
        elif tag == P + "graphicFrame":
            yield from self._frame(el, part, number)

    def _frame(self, el: etree._Element, part, number: int | None) -> Iterator[_Block]:
        data = el.find(f"{A}graphic/{A}graphicData")
        if data is None:
            return
        uri = data.get("uri", "")
        tbl = data.find(A + "tbl")
        if tbl is not None:
            yield from self._table(tbl)
        elif uri.endswith("/chart"):
            chart = data.find(C + "chart")
            target = _target(part, chart.get(R + "id") if chart is not None else None)
            text = _chart_text(_xml(target)) if target is not None else ""
            if text.strip():
                yield _Block(text, "chart")
        elif uri.endswith("/diagram"):
            ids = data.find(DGM + "relIds")
            target = _target(part, ids.get(R + "dm") if ids is not None else None)
            text = _diagram_text(_xml(target)) if target is not None else ""
            if text.strip():
                yield _Block(text, "diagram")
        elif uri.endswith("/ole"):
            for ole in data.iter(P + "oleObj"):
                target = _target(part, ole.get(R + "id"))
                if target is None:
                    self.skipped["embedded object without its data"] = (
                        self.skipped.get("embedded object without its data", 0) + 1
                    )
                    break
                yield _Block(
                    "",
                    "embedded",
                    payload=(
                        getattr(target, "blob", b""),
                        posixpath.basename(str(target.partname)),
                        ole.get("name") or None,
                    ),
                )
                break  # the mc:Fallback copy names the same object
        elif uri.endswith("/chartex"):
            chart = next((c for c in data if _local(c.tag) == "chart"), None)
            target = _target(part, chart.get(R + "id") if chart is not None else None)
            text = _chartex_text(_xml(target)) if target is not None else ""
            if text.strip():
                yield _Block(text, "chart")

    def _table(self, tbl: etree._Element) -> Iterator[_Block]:
        rows = []
        for tr in tbl.iter(A + "tr"):
            cells = [one_line(_text_body(tc.find(A + "txBody"))) for tc in tr.findall(A + "tc")]
            if any(cells):
                rows.append("\t".join(cells))
        if rows:
            pr = tbl.find(A + "tblPr")
            header = 1 if pr is not None and pr.get("firstRow") in ("1", "true") and len(rows) > 1 else 0
            yield _Block("\n".join(rows), "table", header=header)

    # -- masters, once for the deck -----------------------------------------------------------------

    def _masters(self) -> None:
        seen: set[str] = set()
        groups: list[tuple[str, list]] = []
        used = {str(slide.slide_layout.part.partname) for slide in self.prs.slides}
        unused: list = []
        for master in self.prs.slide_masters:
            groups.append(("Slide master", [master.part]))
            # a layout's own text shows only on the slides that use it (Tika reads it per slide, too)
            layouts = [layout.part for layout in master.slide_layouts]
            groups.append(("Slide layout", [p for p in layouts if str(p.partname) in used]))
            unused += [p for p in layouts if str(p.partname) not in used]
        groups.append(("Notes master", _related(self.prs.part, "notesMaster")))
        groups.append(("Handout master", _related(self.prs.part, "handoutMaster")))
        for heading, parts in groups:
            for part in parts:
                name = str(part.partname)
                if name in seen:
                    continue
                seen.add(name)
                root = _xml(part)
                if root is None:
                    continue
                for b in self._shapes(root.find(f"{P}cSld/{P}spTree"), part, None, master=True):
                    if b.kind == "embedded":
                        self.skipped["embedded object on a master or layout"] = (
                            self.skipped.get("embedded object on a master or layout", 0) + 1
                        )
                        continue
                    if b.placeholder is None:  # a text box: the same on every layout is one text
                        key = one_line(clean(b.text))
                        if key in self.once:
                            continue
                        self.once.add(key)
                    self._emit(b, page=None, heading=heading)
        # text of its own (not the master's date or footer again) on a layout no slide uses
        n = sum(
            1
            for part in unused
            if any(
                b.kind != "embedded" and one_line(clean(b.text)) not in self.once
                for b in self._shapes(_tree(part), part, None, master=True)
            )
        )
        if n:
            self.warnings.append(
                f"{n} slide layout{'' if n == 1 else 's'} that no slide uses left out (the text on it is never shown)"
            )


def _tree(part) -> etree._Element | None:
    root = _xml(part)
    return root.find(f"{P}cSld/{P}spTree") if root is not None else None


def _hidden_shape(el: etree._Element) -> bool:
    """Whether a shape (``p:sp``, ``p:grpSp``, ``p:graphicFrame``, ...) is marked hidden in its
    non-visual properties (``cNvPr hidden="1"``)."""
    for nv in el:
        if isinstance(nv.tag, str) and nv.tag.startswith(P + "nv"):
            c = nv.find(P + "cNvPr")
            return c is not None and c.get("hidden") in ("1", "true")
    return False


# -- charts, SmartArt -----------------------------------------------------------------------------


def _chart_text(root: etree._Element | None) -> str:
    """A chart's title and axis titles, then its series names, then its category labels (one line,
    tab-separated); never its numbers or its raw XML."""
    if root is None:
        return ""
    lines: list[str] = []
    for title in root.iter(C + "title"):
        text = one_line(" ".join(_paragraph(p) for p in title.iter(A + "p")))
        if not text:
            text = one_line(" ".join(v.text or "" for v in title.iter(C + "v")))
        if text:
            lines.append(text)
    names: list[str] = []
    categories: list[str] = []
    for ser in root.iter(C + "ser"):
        tx = ser.find(C + "tx")
        if tx is not None:
            name = one_line(" ".join(v.text or "" for v in tx.iter(C + "v")))
            if name:
                names.append(name)
        cat = ser.find(C + "cat")
        if cat is not None and not categories:
            categories = [one_line(v.text or "") for v in cat.iter(C + "v") if (v.text or "").strip()]
    lines.extend("\t".join(row) for row in (names, categories) if row)
    return "\n".join(lines)


def _chartex_text(root: etree._Element | None) -> str:
    """An Office 2016 chart's (``cx:``, waterfall, treemap, ...) titles, series names and category
    labels, as :func:`_chart_text` reads a classic chart's."""
    if root is None:
        return ""
    lines: list[str] = []
    for el in root.iter():
        name = _local(el.tag)
        if name == "title":
            text = one_line(" ".join(_paragraph(p) for p in el.iter(A + "p")))
            if text:
                lines.append(text)
        elif name == "series":
            tx = next((c for c in el if _local(c.tag) == "tx"), None)
            text = one_line(" ".join(v.text or "" for v in tx.iter() if _local(v.tag) == "v")) if tx is not None else ""
            if text:
                lines.append(text)
        elif name == "strDim" and el.get("type") == "cat":
            labels = [one_line(pt.text or "") for pt in el.iter() if _local(pt.tag) == "pt" and (pt.text or "").strip()]
            if labels:
                lines.append("\t".join(labels))
    return "\n".join(lines)


def _diagram_text(root: etree._Element | None) -> str:
    """The text of a SmartArt diagram's data part: each point's text, in the data's order."""
    if root is None:
        return ""
    out = []
    for pt in root.iter(DGM + "pt"):
        if pt.get("type", "node") in ("parTrans", "sibTrans", "pres"):
            continue
        t = pt.find(DGM + "t")
        if t is not None:
            text = _text_body(t).strip()
            if text:
                out.append(text)
    return "\n".join(out)
