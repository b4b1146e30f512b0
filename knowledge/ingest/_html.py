"""HTML: the visible text, block by block, with headings as provenance.

BeautifulSoup 4 with the standard library's ``html.parser`` (no compiled parser needed). Left out:
``script``, ``style``, ``noscript``, ``template``, ``title`` (it becomes the document title),
``svg``, ``math``, ``canvas``, form controls' internals, comments, and whatever a browser would not
show (:func:`remove_invisible`): elements with the ``hidden`` attribute or ``aria-hidden="true"``, and
elements that CSS hides -- inline ``style`` attributes and ``<style>`` sheets alike, with the cascade
(``!important``, inline over sheet, specificity, order) deciding between rules: ``display: none``,
``opacity: 0`` and ``content-visibility: hidden`` hide an element and all it contains;
``visibility: hidden|collapse`` and ``font-size: 0`` are inherited, so a descendant that sets
``visibility: visible`` (or a size) shows again. Sheets are parsed with tinycss2, selector specificity
comes from cssselect2 and selectors are matched with soupsieve (Beautiful Soup's CSS engine). Rules
inside ``@media`` apply only for ``all`` and ``screen`` without conditions (a rule for print or for a
narrow screen does not hide text on the screen a person reads). Block elements (as in the
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
_SKIP = {
    "script",
    "style",
    "noscript",
    "template",
    "svg",
    "math",
    "canvas",
    "iframe",
    "object",
    "embed",
    "select",
    "datalist",
    "button",
    "audio",
    "video",
    "map",
}
_BLOCK = {
    "address",
    "article",
    "aside",
    "blockquote",
    "body",
    "center",
    "dd",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "header",
    "hgroup",
    "hr",
    "html",
    "legend",
    "li",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "ul",
    "caption",
    "tr",
    "td",
    "th",
    "thead",
    "tbody",
    "tfoot",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
}
_HEADING = re.compile(r"h([1-6])")
_WHITESPACE = re.compile(r"[ \t\n\r\f]+")
_DISPLAY_NONE = re.compile(r"display\s*:\s*none", re.I)


def read_html(text: str) -> Document:
    """Read decoded HTML.

    Raises:
        EmptyDocument: no visible text.
    """
    from bs4 import BeautifulSoup  # noqa: PLC0415 - heavy, HTML only

    soup = BeautifulSoup(text, "html.parser")
    remove_invisible(soup)
    _form_values(soup)
    skipped = _count_embedded(soup)
    title_tag = soup.find("title")
    title = one_line(title_tag.get_text()) if title_tag else None
    walker = _Walker()
    walker.walk(soup)
    walker.flush()
    if not title:
        title = walker.first_h1
    warnings = [f"{n} {what}{'' if n == 1 else 's'} not read (content from elsewhere)" for what, n in skipped.items()]
    return walker.builder.build("html", empty="no text: the HTML page has no visible text", title=title, warnings=warnings)


#: Elements whose content lives elsewhere (another page, a plugin): named in the warnings.
_EMBEDDED = {"iframe": "embedded frame (iframe)", "object": "embedded object", "embed": "embedded object", "frame": "frame"}
_TEXT_INPUTS = {"", "text", "search", "email", "url", "tel", "number", "date", "datetime-local", "month", "week", "time"}


def _count_embedded(soup) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, what in _EMBEDDED.items():
        n = len(soup.find_all(name))
        if n:
            counts[what] = counts.get(what, 0) + n
    return counts


def _form_values(soup) -> None:
    """Form controls show their values: a text input's ``value``, a select's chosen option(s)
    (the first when none is marked, as a browser shows it). They become text in place."""
    for tag in soup.find_all("input"):
        kind = str(tag.get("type", "")).strip().lower()
        value = str(tag.get("value", "")).strip()
        if (kind in _TEXT_INPUTS and value) or (kind in ("submit", "button", "reset") and value):
            tag.replace_with(f" {value} ")
    for tag in soup.find_all("select"):
        options = tag.find_all("option")
        chosen = [o for o in options if o.has_attr("selected")] or options[:1]
        text = ", ".join(one_line(o.get_text(" ")) for o in chosen if one_line(o.get_text(" ")))
        tag.replace_with(f" {text} " if text else "")


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
        from bs4 import Comment, NavigableString, Tag  # noqa: PLC0415 - heavy, HTML only
        from bs4.element import Declaration, Doctype, ProcessingInstruction  # noqa: PLC0415 - heavy, HTML only

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
                if rows:  # the first row is the header the chunker repeats
                    self.builder.add("\n".join(rows), heading=self.heading(), table_header=1)
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
        from bs4 import Tag  # noqa: PLC0415 - heavy, HTML only

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
    from bs4 import Tag  # noqa: PLC0415 - heavy, HTML only

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
    """Left for safety on trees not passed through :func:`remove_invisible` first."""
    attrs = tag.attrs or {}
    if "hidden" in attrs or str(attrs.get("aria-hidden", "")).lower() == "true":
        return True
    style = attrs.get("style")
    return bool(style and _DISPLAY_NONE.search(str(style)))


# -- what a browser would not show ----------------------------------------------------------------

#: Properties that hide an element with everything in it.
_SUBTREE_HIDDEN = {"display": {"none"}, "opacity": {"0", "0.0", "0%"}, "content-visibility": {"hidden"}}
#: Inherited properties that hide text, and the values that do.
_INHERITED_HIDDEN = {"visibility": {"hidden", "collapse"}, "font-size": {"0", "0px", "0pt", "0em", "0rem", "0%"}}
_PROPERTIES = set(_SUBTREE_HIDDEN) | set(_INHERITED_HIDDEN)
_INLINE = (1, 0, 0, 0)  # an inline style beats any selector (CSS Cascade 4 §6.2)


def remove_invisible(soup) -> None:
    """Remove from ``soup`` what a browser would not show a person (see the module's docstring)."""
    from bs4 import NavigableString, Tag  # noqa: PLC0415 - heavy, HTML only

    declared = _cascade(soup)
    doomed: list = []
    strings: list = []

    def walk(node, inherited: dict[str, str]) -> None:
        for child in list(node.children):
            if isinstance(child, Tag):
                attrs = child.attrs or {}
                values = declared.get(id(child), {})
                if (
                    "hidden" in attrs
                    or str(attrs.get("aria-hidden", "")).strip().lower() == "true"
                    or any(values.get(p) in v for p, v in _SUBTREE_HIDDEN.items())
                ):
                    doomed.append(child)
                    continue
                mine = dict(inherited)
                for prop in _INHERITED_HIDDEN:
                    value = values.get(prop)
                    if value is not None and value not in ("inherit", "unset"):
                        mine[prop] = value
                walk(child, mine)
            elif isinstance(child, NavigableString) and any(inherited.get(p) in v for p, v in _INHERITED_HIDDEN.items()):
                strings.append(child)

    walk(soup, {})
    for tag in doomed:
        tag.decompose()
    for string in strings:
        string.extract()


def _cascade(soup) -> dict[int, dict[str, str]]:
    """``{id(tag): {property: value}}`` for the properties of :data:`_PROPERTIES` a tag declares,
    the winner of the cascade for each (values lowercased)."""
    import tinycss2  # noqa: PLC0415 - CSS parsing, HTML with styles only

    best: dict[int, dict[str, tuple]] = {}
    order = 0

    def offer(tag, name: str, value: str, important: bool, specificity: tuple) -> None:
        nonlocal order
        order += 1
        key = (important, specificity, order)
        mine = best.setdefault(id(tag), {})
        if name not in mine or key > mine[name][0]:
            mine[name] = (key, value)

    for style in soup.find_all("style"):
        media = str(style.get("media", "all")).strip().lower()
        if media not in ("", "all", "screen"):
            continue
        css = style.string if style.string is not None else style.get_text()
        rules = tinycss2.parse_stylesheet(css or "", skip_comments=True, skip_whitespace=True)
        for tag, name, value, important, specificity in _rule_matches(soup, rules):
            offer(tag, name, value, important, (0, *specificity))
    for tag in soup.find_all(style=True):
        for decl in tinycss2.parse_declaration_list(str(tag.get("style")), skip_comments=True, skip_whitespace=True):
            if getattr(decl, "type", None) == "declaration" and decl.lower_name in _PROPERTIES:
                offer(tag, decl.lower_name, _value(decl), decl.important, _INLINE)
    return {tid: {name: v for name, (_, v) in props.items()} for tid, props in best.items()}


def _rule_matches(soup, rules):
    """``(tag, property, value, important, specificity)`` for each declaration of interest in
    ``rules`` and each tag a rule's selectors match."""
    import soupsieve  # noqa: PLC0415 - CSS selectors, HTML with styles only
    import tinycss2  # noqa: PLC0415 - CSS parsing, HTML with styles only
    from cssselect2 import parser  # noqa: PLC0415 - CSS selectors, HTML with styles only

    for rule in rules:
        kind = getattr(rule, "type", None)
        if kind == "at-rule":
            keyword = rule.lower_at_keyword
            if rule.content is None:
                continue
            if keyword == "media" and tinycss2.serialize(rule.prelude).strip().lower() not in ("all", "screen"):
                continue
            if keyword in ("media", "supports", "layer", "scope"):
                inner = tinycss2.parse_rule_list(rule.content, skip_comments=True, skip_whitespace=True)
                yield from _rule_matches(soup, inner)
            continue
        if kind != "qualified-rule":
            continue
        declarations = [
            d
            for d in tinycss2.parse_blocks_contents(rule.content, skip_comments=True, skip_whitespace=True)
            if getattr(d, "type", None) == "declaration" and d.lower_name in _PROPERTIES
        ]
        if not declarations:
            continue
        try:
            selectors = list(parser.parse(rule.prelude))
        except Exception:  # a selector cssselect2 cannot parse: a browser drops the rule too
            continue
        for selector in selectors:
            if selector.pseudo_element is not None:
                continue  # ::before and friends hide generated content, not the element's text
            try:
                matched = soupsieve.select(str(selector), soup)
            except Exception:  # a selector soupsieve does not support (:hover is fine, it never matches)
                continue
            for tag in matched:
                for decl in declarations:
                    yield tag, decl.lower_name, _value(decl), decl.important, selector.specificity


def _value(declaration) -> str:
    import tinycss2  # noqa: PLC0415 - CSS parsing, HTML with styles only

    return " ".join(tinycss2.serialize(declaration.value).split()).lower()


def _int(value, default: int) -> int:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default
