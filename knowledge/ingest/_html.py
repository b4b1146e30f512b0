"""HTML: the visible text, block by block, with headings as provenance.

BeautifulSoup 4 with the standard library's ``html.parser`` (no compiled parser needed). Left out:
``script``, ``style``, ``noscript``, ``template``, ``title`` (it becomes the document title),
``svg``, ``math``, ``canvas``, form controls' internals, comments, elements with the
``hidden`` attribute, ``aria-hidden="true"`` or an inline ``display:none``. Block elements (as in the
HTML Living Standard's rendering section: ``p``, ``div``, ``li``, ``h1``-``h6``, ``pre``, ``table``,
...) become blocks; inline whitespace collapses as a browser does; ``pre`` keeps its lines;
``br`` breaks a line; list items get "•" (``ul``) or "1." (``ol``, honouring ``start``); table rows
become one line, cells separated by ``" | "``. ``h1``-``h6`` build the heading path.
"""

from __future__ import annotations

import re

from knowledge.ingest._text import Builder, one_line
from knowledge.ingest.document import Document

# not "head": html.parser nests a body into a head that was never closed; head's own children
# (title, meta, link, style, script) are skipped or have no text anyway
_SKIP = {"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object",
         "embed", "select", "datalist", "button", "audio", "video", "map"}
_BLOCK = {"address", "article", "aside", "blockquote", "body", "center", "dd", "details", "dialog", "dir",
          "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup",
          "hr", "html", "legend", "li", "main", "menu", "nav", "ol", "p", "pre", "section", "summary",
          "table", "ul", "caption", "tr", "td", "th", "thead", "tbody", "tfoot", "h1", "h2", "h3", "h4",
          "h5", "h6"}
_HEADING = re.compile(r"h([1-6])")
_WHITESPACE = re.compile(r"[ \t\n\r\f]+")
_DISPLAY_NONE = re.compile(r"display\s*:\s*none", re.I)


def read_html(text: str) -> Document:
    """Read decoded HTML.

    Raises:
        EmptyDocument: no visible text.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    title_tag = soup.find("title")
    title = one_line(title_tag.get_text()) if title_tag else None
    walker = _Walker()
    walker.walk(soup)
    walker.flush()
    if not title:
        title = walker.first_h1
    return walker.builder.build("html", empty="no text: the HTML page has no visible text", title=title)


class _Walker:
    def __init__(self) -> None:
        self.builder = Builder()
        self.inline: list[str] = []
        self.path: list[tuple[int, str]] = []
        self.first_h1: str | None = None
        self.prefix = ""

    def heading(self) -> str | None:
        return " > ".join(text for _, text in self.path) or None

    def flush(self) -> None:
        text = "".join(self.inline)
        self.inline = []
        lines = [" ".join(line.split()) for line in text.split("\n")]
        text = "\n".join(line for line in lines if line)
        if text:
            if self.prefix:
                text, self.prefix = f"{self.prefix} {text}", ""
            self.builder.add(text, heading=self.heading())

    def walk(self, node) -> None:
        from bs4 import Comment, NavigableString, Tag
        from bs4.element import Declaration, Doctype, ProcessingInstruction

        for child in node.children:
            if isinstance(child, NavigableString):
                if isinstance(child, (Comment, Declaration, Doctype, ProcessingInstruction)):
                    continue
                self.inline.append(_WHITESPACE.sub(" ", str(child)))  # as a browser collapses it
                continue
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name in _SKIP or _hidden(child):
                continue
            if name == "br":
                self.inline.append("\n")
            elif name == "title":
                continue
            elif _HEADING.fullmatch(name):
                self.flush()
                level = int(name[1])
                text = one_line(child.get_text(" "))
                if text:
                    while self.path and self.path[-1][0] >= level:
                        self.path.pop()
                    self.path.append((level, text))
                    if level == 1 and self.first_h1 is None:
                        self.first_h1 = text
                    self.builder.add(text, heading=self.heading())
            elif name == "pre":
                self.flush()
                self.builder.add(child.get_text(), heading=self.heading())
            elif name == "table":
                self.flush()
                rows = [" | ".join(cells) for cells in _rows(child) if any(cells)]
                if rows:
                    self.builder.add("\n".join(rows), heading=self.heading())
            elif name in ("ul", "ol", "menu", "dir"):
                self.flush()
                self._list(child, ordered=name == "ol")
            elif name in _BLOCK:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)

    def _list(self, list_tag, *, ordered: bool) -> None:
        from bs4 import Tag

        number = _int(list_tag.get("start"), 1)
        depth = sum(1 for p in list_tag.parents if getattr(p, "name", None) in ("ul", "ol"))
        for item in list_tag.children:
            if not isinstance(item, Tag) or _hidden(item):
                continue
            if (item.name or "").lower() != "li":  # a stray list or text wrapper inside the list
                self.flush()
                self.walk(_Single(item))
                self.flush()
                continue
            number = _int(item.get("value"), number)
            self.flush()
            self.prefix = "  " * depth + (f"{number}." if ordered else "•")
            self.walk(item)
            self.flush()
            self.prefix = ""
            number += 1


class _Single:
    """A parent-like object with one child, to walk a single tag with :meth:`_Walker.walk`."""

    def __init__(self, tag) -> None:
        self.children = [tag]


def _rows(table):
    """Cell texts per row of ``table``, not descending into nested tables' rows."""
    from bs4 import Tag

    def own_rows(node):
        for child in node.children:
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name == "tr":
                yield child
            elif name in ("thead", "tbody", "tfoot"):
                yield from own_rows(child)

    for tr in own_rows(table):
        cells = []
        for cell in tr.children:
            if isinstance(cell, Tag) and (cell.name or "").lower() in ("td", "th") and not _hidden(cell):
                for skip in cell.find_all(list(_SKIP)):
                    skip.decompose()
                cells.append(one_line(cell.get_text(" ")))
        yield cells


def _hidden(tag) -> bool:
    attrs = tag.attrs or {}
    if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
        return True
    style = attrs.get("style")
    return bool(style and _DISPLAY_NONE.search(str(style)))


def _int(value, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default
