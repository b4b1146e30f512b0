"""Markdown: the source kept readable as it is, split into sections by heading.

markdown-it-py (CommonMark) finds the headings, so ATX (``## Title``) and setext (``Title`` over
``===`` / ``---``) headings count and a ``#`` line inside a fenced or indented code block does not.
Only top-level headings (not those inside block quotes or list items) open a section. The section's
heading path is the chain of enclosing headings, outermost first ("Guide > Install > Linux"),
rendered as plain text (``## The `?` Operator`` -> "The ? Operator").

The text is the Markdown source, with: a YAML front-matter block removed (its ``title:`` becomes the
document title), HTML comment blocks removed (they are invisible), runs of blank lines outside code
reduced to one, and code blocks kept line for line.
"""

from __future__ import annotations

import re

from knowledge.ingest._text import Builder, clean, one_line
from knowledge.ingest.document import Document

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?P<body>.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FM_TITLE = re.compile(r"^title:[ \t]*(?P<title>.+?)[ \t]*$", re.M)
_COMMENT = re.compile(r"\A\s*<!--.*-->\s*\Z", re.S)

_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        from markdown_it import MarkdownIt

        _PARSER = MarkdownIt("commonmark").enable("table")
    return _PARSER


def read_markdown(text: str) -> Document:
    """Read decoded Markdown text; sections carry heading paths.

    Raises:
        EmptyDocument: nothing but whitespace (or only front matter and comments).
    """
    text = clean(text, collapse=False)
    title = None
    fm = _FRONT_MATTER.match(text)
    if fm:
        t = _FM_TITLE.search(fm.group("body"))
        if t:
            title = t.group("title").strip().strip("\"'") or None
        text = text[fm.end():]
    lines = text.split("\n")
    tokens = _parser().parse(text)

    code: set[int] = set()
    dropped: set[int] = set()
    headings: list[tuple[int, int, str]] = []  # (first line, level, plain text)
    for i, tok in enumerate(tokens):
        if tok.map is None:
            continue
        start, end = tok.map
        if tok.type in ("fence", "code_block"):
            code.update(range(start, end))
        elif tok.type == "html_block" and tok.level == 0 and _COMMENT.match(tok.content):
            dropped.update(range(start, end))
        elif tok.type == "heading_open" and tok.level == 0:
            inline = tokens[i + 1] if i + 1 < len(tokens) else None
            plain = _plain(inline) if inline is not None else ""
            if plain:
                headings.append((start, int(tok.tag[1]), plain))

    if title is None and headings:
        first_h1 = next((h for h in headings if h[1] == 1), None)
        starts_with_heading = not any(ln.strip() for ln in lines[:headings[0][0]])
        if first_h1 is not None:
            title = first_h1[2]
        elif starts_with_heading:
            title = headings[0][2]

    builder = Builder()
    bounds = [0] + [h[0] for h in headings] + [len(lines)]
    path: list[tuple[int, str]] = []
    heading_at = {h[0]: h for h in headings}
    for a, b in zip(bounds, bounds[1:]):
        if a in heading_at:
            _, level, plain = heading_at[a]
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, plain))
        block = _region(lines, a, b, code, dropped)
        builder.add(block, heading=" > ".join(p for _, p in path) or None, cleaned=True)
    return builder.build("markdown", empty="no text: the Markdown file is empty", title=title)


def _region(lines: list[str], a: int, b: int, code: set[int], dropped: set[int]) -> str:
    """Lines ``[a, b)`` without dropped lines, blank runs outside code reduced to one blank line."""
    out: list[str] = []
    for n in range(a, b):
        if n in dropped:
            continue
        line = lines[n]
        if not line and n not in code and out and not out[-1] and (n - 1) not in code:
            continue
        out.append(line)
    return "\n".join(out).strip("\n")


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
