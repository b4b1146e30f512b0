"""Markdown: the source kept readable as it is, split into sections by heading.

markdown-it-py (CommonMark) finds the top-level headings (ATX and setext, never a ``#`` line inside
code); a section's heading path is the chain of enclosing headings as plain text ("Guide > Install >
Linux"). The text is the source with HTML comment blocks removed, runs of blank lines outside code
reduced to one, and HTML blocks that hide part of their content replaced by what a browser shows.
A leading ``---`` block is front matter only when it parses (PyYAML) as a mapping: its values become
the document's ``attributes`` (and its ``title`` the title), and it stays searchable; anything else
is ordinary Markdown. GFM pipe tables are recorded with their header and delimiter rows, so the
chunker can repeat the header. mdBook preprocessor directives (``{{#include ...}}``,
``{{#rustdoc_include ...}}``, ...) name files that are not given, so they are dropped (a code block
left empty with them) and named in the document's warnings; ``{{#title ...}}`` gives the title.

The rules one by one: ``docs/ingestion.md``.
"""

from __future__ import annotations

import itertools
import re

from knowledge.errors import EmptyDocument
from knowledge.ingest._html import read_html, remove_invisible
from knowledge.ingest._text import Builder, clean, one_line
from knowledge.ingest.document import Document

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<body>.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_COMMENT = re.compile(r"\A\s*<!--.*-->\s*\Z", re.S)
# mdBook's preprocessor directives (a leading backslash escapes one: mdBook shows it as written)
_MDBOOK = re.compile(
    r"(?<!\\)\{\{#(?P<name>include|rustdoc_include|playground|playpen|title|template)\b"
    r"(?P<arg>[^{}\n]*)\}\}"
)

_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        from markdown_it import MarkdownIt  # noqa: PLC0415 - first Markdown only

        _PARSER = MarkdownIt("commonmark").enable("table")
    return _PARSER


def read_markdown(text: str) -> Document:
    """Read decoded Markdown text; sections carry heading paths.

    Raises:
        EmptyDocument: nothing but whitespace (or only front matter and comments).
    """
    text = clean(text, collapse=False)
    title = None
    attributes: dict = {}
    fm = _FRONT_MATTER.match(text)
    if fm:
        attributes = front_matter(fm.group("body"))
        if attributes:
            text = text[fm.end() :]
            t = attributes.get("title")
            title = str(t) if t not in (None, "") else None
    lines = text.split("\n")
    tokens = _parser().parse(text)

    code: set[int] = set()
    fences: list[tuple[int, int]] = []
    dropped: set[int] = set()
    headings: list[tuple[int, int, str]] = []  # (first line, level, plain text)
    tables: list[tuple[int, int]] = []  # (first line, end line) of top-level tables
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        start, end = tok.map
        if tok.type in ("fence", "code_block"):
            code.update(range(start, end))
            if tok.type == "fence":
                fences.append((start, end))
        elif tok.type == "html_block" and tok.level == 0 and _COMMENT.match(tok.content):
            dropped.update(range(start, end))
        elif tok.type == "html_block" and tok.level == 0:
            visible = _visible_html(tok.content)
            if visible is not None:  # the block hides something: only what a browser shows stays
                lines[start:end] = [visible] + [""] * (end - start - 1)
        elif tok.type == "paragraph_open" and tok.level == 0 and _only_invisible_html(tokens, i):
            dropped.update(range(start, end))  # e.g. an old heading's anchor, <a id="..."></a>
        elif tok.type == "heading_open" and tok.level == 0:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            plain = _plain(inline) if inline is not None else ""
            if plain:
                headings.append((start, int(tok.tag[1]), plain))
        elif tok.type == "table_open" and tok.level == 0:
            tables.append((start, end))

    warnings: list[str] = []
    directive_title = _drop_mdbook(lines, dropped, fences, warnings)
    if title is None and directive_title:
        title = directive_title
    if title is None and headings:
        first_h1 = next((h for h in headings if h[1] == 1), None)
        starts_with_heading = not any(ln.strip() for ln in lines[: headings[0][0]])
        if first_h1 is not None:
            title = first_h1[2]
        elif starts_with_heading:
            title = headings[0][2]

    builder = Builder()
    if attributes:
        builder.add("\n".join(f"{k}: {v}" for k, v in attributes.items()))
    bounds = [0] + [h[0] for h in headings] + [len(lines)]
    path: list[tuple[int, str]] = []
    heading_at = {h[0]: h for h in headings}
    for a, b in itertools.pairwise(bounds):
        if a in heading_at:
            _, level, plain = heading_at[a]
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, plain))
        block, offsets = _region(lines, a, b, code, dropped)
        start = builder.add(block, heading=" > ".join(p for _, p in path) or None, cleaned=True)
        if start is None:
            continue
        for first, end in tables:
            last = end - 1
            while last > first + 1 and not lines[last].strip():
                last -= 1
            if a <= first and last < b and last > first + 1 and all(n in offsets for n in (first, first + 1, last)):
                builder.record_table(
                    start + offsets[first],
                    start + offsets[first + 1] + len(lines[first + 1]),
                    start + offsets[last] + len(lines[last]),
                )
    return builder.build(
        "markdown", empty="no text: the Markdown file is empty", title=title, attributes=attributes, warnings=warnings
    )


def front_matter(body: str) -> dict:
    """The key/value metadata of a front-matter block's ``body`` (see the module's docstring), or
    ``{}`` when it is not a YAML mapping."""
    import yaml  # noqa: PLC0415 - front matter only

    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError:
        return {}
    if not isinstance(data, dict) or not data:
        return {}
    out: dict = {}

    def put(prefix: str, value) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                put(f"{prefix}_{k}" if prefix else str(k), v)
        elif isinstance(value, (list, tuple, set)):
            out[prefix] = ", ".join(str(_scalar(v)) for v in value if v is not None)
        elif value is not None:
            out[prefix] = _scalar(value)

    put("", data)
    return {k: v for k, v in out.items() if k and v != ""}


def _scalar(value):
    if isinstance(value, bool | int | float) and not (isinstance(value, float) and value != value):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return one_line(str(value))


def _drop_mdbook(lines: list[str], dropped: set[int], fences: list[tuple[int, int]], warnings: list[str]) -> str | None:
    """Remove mdBook directives from ``lines`` in place: a line left blank joins ``dropped``, and so
    does a fence left with nothing inside; one warning names the directives dropped (the first three
    as written, then how many more). Returns the text of the first ``{{#title ...}}``, if any."""
    found: list[str] = []
    title = None
    touched: set[int] = set()
    for n, line in enumerate(lines):
        if n in dropped or "{{#" not in line:
            continue
        matches = list(_MDBOOK.finditer(line))
        if not matches:
            continue
        for m in matches:
            if m.group("name") == "title":
                title = title or one_line(m.group("arg")) or None
            else:
                found.append(m.group(0))
        rest = _MDBOOK.sub("", line)
        touched.add(n)
        if rest.strip():
            lines[n] = rest
        else:
            dropped.add(n)
    for start, end in fences:
        inner = range(start + 1, end - 1)
        if any(n in touched for n in inner) and all(n in dropped or not lines[n].strip() for n in inner):
            dropped.update(range(start, end))
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        warnings.append(
            f"{len(found)} mdBook directive{'' if len(found) == 1 else 's'} dropped "
            f"(the files they name are not given): {shown}"
        )
    return title


def _region(lines: list[str], a: int, b: int, code: set[int], dropped: set[int]) -> tuple[str, dict[int, int]]:
    """Lines ``[a, b)`` without dropped lines, blank runs outside code reduced to one blank line;
    and ``{line number: offset of that line in the returned text}`` for the lines kept."""
    out: list[str] = []
    kept: list[int] = []
    for n in range(a, b):
        if n in dropped:
            continue
        line = lines[n]
        if not line and n not in code and out and not out[-1] and kept[-1] not in code:
            continue
        out.append(line)
        kept.append(n)
    joined = "\n".join(out)
    text = joined.strip("\n")
    lead = len(joined) - len(joined.lstrip("\n"))
    offsets: dict[int, int] = {}
    pos = 0
    for n, line in zip(kept, out):
        if lead <= pos <= lead + len(text):
            offsets[n] = pos - lead
        pos += len(line) + 1
    return text, offsets


def _plain(inline) -> str:
    """Plain text of an inline token: text and code spans, breaks as spaces, no markup."""
    parts: list[str] = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return one_line("".join(parts))


def _only_invisible_html(tokens: list, i: int) -> bool:
    """True when the paragraph opened at ``tokens[i]`` is inline HTML alone that shows no text."""
    inline = tokens[i + 1] if i + 1 < len(tokens) else None
    children = (inline.children or []) if inline is not None and inline.type == "inline" else []
    if not children or any(c.type not in ("html_inline", "softbreak", "text") for c in children):
        return False
    if any(c.type == "text" and c.content.strip() for c in children):
        return False
    return _visible_html("".join(c.content for c in children if c.type == "html_inline")) == ""


def _visible_html(html: str) -> str | None:
    """The visible text of an HTML block when the block hides some of its text or shows none (an
    anchor such as ``<a id="old-heading"></a>``: ``""``), else ``None``."""
    from bs4 import BeautifulSoup  # noqa: PLC0415 - heavy, HTML only

    soup = BeautifulSoup(html, "html.parser")
    before = soup.get_text()
    if not before.strip():
        return ""
    remove_invisible(soup)
    if soup.get_text() == before:
        return None
    try:
        return read_html(str(soup)).text
    except EmptyDocument:
        return ""
