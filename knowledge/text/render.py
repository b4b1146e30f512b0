"""Chunk text as a person reads it: Markdown rendered safely, source markup hidden, query words marked.

Nothing here changes what is stored; these functions only turn a chunk, a name or a model answer
into something to show:

* :func:`render_html` / :func:`plain_text` -- a chunk as safe HTML (markdown-it-py; tags, comments
  and mdBook directives hidden, links and images as their text, the query's words in ``<mark>``; in
  text that is not Markdown, its tables drawn as tables, :mod:`knowledge.text.tables`) or as plain
  text; :func:`is_markdown` tells which reading a chunk gets.
* :func:`inert` / :func:`md` -- untrusted text for any place where Streamlit reads Markdown.
* :func:`answer_html` -- model text as Markdown, images and outside links as words, raw HTML shown.

The one rule for untrusted text (document text, names, model output, OCR text, attributes, error
messages that echo them): it is shown as text, never interpreted. Every HTML output escapes all
text and is one line, so a Markdown renderer around it interprets nothing inside. The design in
full: ``docs/security.md``.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from pathlib import PurePath
from string import Formatter
from urllib.parse import urlsplit

from knowledge._names import shown
from knowledge.text.highlight import escape_markdown
from knowledge.text.highlight import mark_matches as _marked
from knowledge.text.tables import TableBlock, split_tables, table_html

#: File name endings read as Markdown.
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mkdn", ".mdx"})

# Source markup that is never shown: whole HTML comments, a comment cut by the chunk's end, a comment's
# tail at the chunk's start, mdBook directives (also cut by the end), a tag cut by the chunk's end.
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_OPEN_COMMENT = re.compile(r"<!--.*\Z", re.S)
_COMMENT_TAIL = re.compile(r"\A(?:(?!<!--).)*?-->", re.S)
_DIRECTIVE = re.compile(r"\{\{#.*?\}\}", re.S)
_OPEN_DIRECTIVE = re.compile(r"\{\{#[^}]*\Z")
# the tail of a directive cut by the chunk's start: a path-like word ending in "}}" on the first line
_DIRECTIVE_TAIL = re.compile(r"\A[^\s{}]*[/.:][^\s{}]*\}\}")
_OPEN_TAG = re.compile(r"</?[A-Za-z][^<>]*\Z")
# A reference link whose definition lies outside the chunk: "[the docs][prelude]" reads "the docs".
_REF_LINK = re.compile(r"\[([^\[\]]+)\]\[[^\[\]]*\]")
_FENCE = re.compile(r"^ {0,3}(```+|~~~+)[ \t]*([^\n`]*)$", re.M)
_SNIFF = re.compile(r"<!--|\{\{#|</?[A-Za-z][\w-]*(?:\s[^<>]*)?>|^\s*(?:```|~~~)", re.M)


# -- Markdown chunks --------------------------------------------------------------------------------
def is_markdown(file_name: str | None, text: str | None = None) -> bool:
    """Whether a chunk is read as Markdown: by the file name's ending (:data:`MARKDOWN_SUFFIXES`);
    without a name, when ``text`` carries HTML comments or tags, mdBook directives or code fences."""
    if file_name:
        return PurePath(file_name).suffix.lower() in MARKDOWN_SUFFIXES
    return bool(text and _SNIFF.search(text))


def strip_source_markup(text: str) -> str:
    """``text`` without what a reader never sees: HTML comments (also one cut by either end of the
    chunk) and mdBook ``{{#...}}`` directives (also one cut by either end), and an HTML tag cut by the
    chunk's end. Tags themselves are left for the Markdown parser (their inner text is kept). A chunk
    that starts inside a fenced code block gets an opening fence, so its code stays code."""
    text = _COMMENT.sub("", text)
    text = _COMMENT_TAIL.sub("", text, count=1)
    text = _DIRECTIVE_TAIL.sub("", text, count=1)
    fences = _FENCE.findall(text)
    if fences and not fences[0][1].strip() and (len(fences) % 2 or fences[-1][1].strip()):
        # The chunk starts inside a code block: its first fence is a bare closing one (an opening
        # fence usually names the language), and the fences are odd in number or the last one opens
        # a block. Open the block where the chunk starts, so code stays code and the rest is Markdown.
        text = fences[0][0] + "\n" + text
    text = _OPEN_COMMENT.sub("", text)
    text = _DIRECTIVE.sub("", text)
    text = _OPEN_DIRECTIVE.sub("", text)
    return _OPEN_TAG.sub("", text)


def _html_text(fragment: str) -> str:
    """The text a browser would show for an HTML fragment (tags and comments dropped, entities decoded)."""
    from bs4 import BeautifulSoup  # noqa: PLC0415 - heavy, HTML only

    soup = BeautifulSoup(fragment, "html.parser")
    for tag in soup(["script", "style", "template"]):
        tag.decompose()
    return soup.get_text()


@lru_cache(maxsize=1)
def _parser():
    from markdown_it import MarkdownIt  # noqa: PLC0415 - first Markdown only

    # html=True so that tags are recognised as tags (and then dropped by the rules below), never
    # shown as text and never passed through.
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def _unlink(pieces: list[tuple[bool, str]]) -> str:
    """Join inline pieces ``(is_code, text)`` and turn reference links whose definition lies outside
    the chunk ("[the docs][prelude]") into their text. Code is hidden behind placeholders while the
    pattern runs, so ``a[i][j]`` in code is never touched."""
    code = [t for is_code, t in pieces if is_code]
    joined, n = [], 0
    for is_code, t in pieces:
        if is_code:
            joined.append(f"\x00{n}\x00")
            n += 1
        else:
            joined.append(t)
    out = _REF_LINK.sub(r"\1", "".join(joined))
    return re.sub(r"\x00(\d+)\x00", lambda m: code[int(m.group(1))], out)


def _inline_html(children, escape_text) -> str:
    out: list[tuple[bool, str]] = []
    for tok in children or []:
        t = tok.type
        if t == "text":
            out.append((False, escape_text(tok.content)))
        elif t == "code_inline":
            out.append((True, "<code>" + escape_text(tok.content) + "</code>"))
        elif t == "softbreak":
            out.append((False, "\n"))
        elif t == "hardbreak":
            out.append((False, "<br>"))
        elif t in ("em_open", "em_close", "strong_open", "strong_close", "s_open", "s_close"):
            out.append((False, f"<{'/' if t.endswith('close') else ''}{tok.tag}>"))
        elif t == "image":  # never fetched: the picture's description instead
            alt = "".join(c.content for c in tok.children or []) or tok.content
            out.append((False, escape_text(f"[image: {alt}]" if alt else "[image]")))
        # link_open / link_close (the link's text stays), html_inline (tags, comments): not shown
    return _unlink(out)


def _render_tokens(tokens, query) -> str:
    def esc(s: str) -> str:
        return _marked(s, query, html.escape, ("<mark>", "</mark>")) if query else html.escape(s)

    out = []
    for tok in tokens:
        t = tok.type
        if t == "inline":
            out.append(_inline_html(tok.children, esc))
        elif t in ("fence", "code_block"):
            code = tok.content.rstrip("\n")
            if code.strip():  # no <mark> in a code block: Streamlit's code block shows an element in it as "[object Object]"
                out.append(f"<pre><code>{html.escape(code)}</code></pre>")
        elif t == "html_block":
            inner = _html_text(tok.content).strip()
            if inner:
                out.append(f"<p>{esc(inner)}</p>")
        elif t == "hr":
            out.append("<hr>")
        elif t.endswith(("_open", "_close")):
            if t in ("link_open", "link_close"):
                continue
            tag = tok.tag
            if t.endswith("_close"):
                out.append(f"</{tag}>")
            elif tag == "ol" and tok.attrGet("start") not in (None, 1, "1"):
                out.append(f'<ol start="{int(tok.attrGet("start"))}">')
            elif tag in ("th", "td") and tok.attrGet("style"):
                align = re.sub(r"[^a-z:-]", "", str(tok.attrGet("style")))
                out.append(f'<{tag} style="{align}">')
            else:
                out.append(f"<{tag}>")
    return "".join(out)


def _one_line(fragment: str) -> str:
    """No raw newline: inside ``<pre>`` it stays a line break as ``&#10;``; elsewhere it is a space."""
    return fragment.replace("\r\n", "\n").replace("\n", "&#10;")


_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"  # private-use characters: no document's text
_MARK_PIECES = re.compile("(<[^>]*>|\ue000|\ue001)")


def _insert_marks(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with :data:`_MARK_OPEN` / :data:`_MARK_CLOSE` around each span (in bounds, not
    overlapping: a span starting inside the previous one is skipped)."""
    out, at = [], 0
    for start, end in sorted((max(0, int(a)), min(len(text), int(b))) for a, b in spans):
        while start < end and text[start] in "_*":  # emphasis marks stay next to their word
            start += 1
        while end > start and text[end - 1] in "_*":
            end -= 1
        if start < at or end <= start:
            continue
        out += [text[at:start], _MARK_OPEN, text[start:end], _MARK_CLOSE]
        at = end
    return "".join(out) + text[at:]


def _apply_marks(fragment: str) -> str:
    """Each run of text between the mark characters wrapped in ``<mark class="answer">`` (one per
    text run, so tags stay nested); none inside ``<pre>`` (see :func:`_render_tokens`)."""
    out, inside, pre = [], False, 0
    for piece in _MARK_PIECES.split(fragment):
        if piece in (_MARK_OPEN, _MARK_CLOSE):
            inside = piece == _MARK_OPEN
        elif piece.startswith("<"):
            pre += piece.startswith("<pre") - piece.startswith("</pre")
            out.append(piece)
        elif piece:
            out.append(f'<mark class="answer">{piece}</mark>' if inside and not pre and piece.strip() else piece)
    return "".join(out)


def render_html(
    text: str,
    query: str | Sequence[str] | None = None,
    *,
    file_name: str | None = None,
    markdown: bool | None = None,
    marks: Sequence[tuple[int, int]] = (),
) -> str:
    """Safe HTML for a chunk: Markdown rendered (when ``markdown``, default :func:`is_markdown`),
    else the plain text with its line breaks and its tables (a PDF's ``| a | b |`` rows, a DOCX's or
    HTML page's ``a | b`` rows: :func:`knowledge.text.tables.split_tables`) as HTML tables whose cells
    are inert; the query's matching words (:func:`match_spans`) in
    ``<mark>``. One line, wrapped in ``<div class="chunk">``; never contains the source's own HTML.

    Args:
        text: the chunk's text as stored (not changed).
        query: the query string or its terms; ``None``: nothing marked.
        file_name: the chunk's file name (decides Markdown or not).
        markdown: force the decision.
        marks: ``(start, end)`` ``str`` offsets into ``text`` shown in ``<mark class="answer">``
            (the sentences an answer quotes); outside code blocks only.
    Returns:
        ``str`` of HTML, for ``st.markdown(..., unsafe_allow_html=True)``.
    """
    text = text or ""
    if marks:  # offsets are into the text as stored: marked before it is normalised
        text = _insert_marks(text.replace(_MARK_OPEN, "").replace(_MARK_CLOSE, ""), marks)
    text = unicodedata.normalize("NFC", text)
    if markdown is None:
        markdown = is_markdown(file_name, text)
    body = _render_tokens(_parser().parse(strip_source_markup(text)), query) if markdown else _plain_html(text, query)
    if marks:
        body = _apply_marks(body)
    return f'<div class="chunk">{_one_line(body)}</div>'


def _plain_html(text: str, query: str | Sequence[str] | None) -> str:
    """Text that is not Markdown as HTML: its line breaks as ``<br>``, its tables
    (:func:`knowledge.text.tables.split_tables`) as HTML tables, the query's words marked."""

    def esc(s: str) -> str:
        s = s.replace("\r\n", "\n")
        return (_marked(s, query, html.escape, ("<mark>", "</mark>")) if query else html.escape(s)).replace("\n", "<br>")

    pieces = split_tables(text.replace("\r\n", "\n"))
    if len(pieces) == 1 and isinstance(pieces[0], str):
        return esc(pieces[0])
    out = []
    for piece in pieces:
        if isinstance(piece, TableBlock):
            out.append(table_html(piece, query))
        elif piece.strip("\n"):
            out.append(esc(piece.strip("\n")))
    return "".join(out)


def plain_text(text: str, *, file_name: str | None = None, markdown: bool | None = None) -> str:
    """A chunk as plain text, the way :func:`render_html` shows it: for Markdown, the text of the
    rendering (no tags, comments, directives, emphasis marks or fences; one line per block); other
    text as it is (NFC). For a snippet or a quote."""
    text = unicodedata.normalize("NFC", text or "")
    if markdown is None:
        markdown = is_markdown(file_name, text)
    if not markdown:
        return text
    blocks = []
    for tok in _parser().parse(strip_source_markup(text)):
        if tok.type == "inline":
            parts: list[tuple[bool, str]] = []
            for c in tok.children or []:
                if c.type == "text":
                    parts.append((False, c.content))
                elif c.type == "code_inline":
                    parts.append((True, c.content))
                elif c.type in ("softbreak", "hardbreak"):
                    parts.append((False, "\n"))
                elif c.type == "image":
                    parts.append((False, "".join(x.content for x in c.children or []) or c.content))
            blocks.append(_unlink(parts))
        elif tok.type in ("fence", "code_block"):
            blocks.append(tok.content.rstrip("\n"))
        elif tok.type == "html_block":
            blocks.append(_html_text(tok.content).strip())
    return "\n".join(b for b in blocks if b.strip())


# -- untrusted text where Streamlit reads Markdown ---------------------------------------------------
def inert(value: object) -> str:
    """``value`` (``str()`` of it) as Markdown that shows exactly that text: every ASCII punctuation
    character a numeric character reference (so ``[``, ``!``, ``<``, ``*``, ``:``, ``$`` and ``&`` are
    shown, never read as a link, image, tag, emphasis, directive or formula), line breaks as Markdown
    hard breaks. For ``st.markdown`` (with or without HTML), ``st.caption``, ``st.error`` & co.,
    ``st.toast``, widget labels, ``help`` tooltips and ``st.radio`` options. Not for places that show
    plain text (selectbox/multiselect options, table cells, text inputs): those need the text itself.

    A bidirectional control (U+202A-U+202E, U+2066-U+2069), which would reorder what follows it on
    the line (a refused file name ``invoice\u202egpj.md`` turning its whole error message round), is
    shown as ``[U+202E]``.

    Example: ``inert("![x](http://h/i.png)")`` is ``"&#33;&#91;x&#93;&#40;http&#58;..."``, shown as
    ``![x](http://h/i.png)``.
    """
    text = escape_markdown(shown("" if value is None else str(value)), breaks="\n")
    # A line's leading spaces as references too, or four of them would make it a code block.
    text = re.sub(r"^ +", lambda m: "&#32;" * len(m.group()), text, flags=re.M)
    return text.replace("\n", "  \n")


class _Inert(Formatter):
    def format_field(self, value, format_spec):
        return inert(super().format_field(value, format_spec))


def md(template: str, /, *values: object, **named: object) -> str:
    """``template`` (trusted Markdown, written in the code) with every ``{}`` field filled by
    :func:`inert` of its value (format specs apply first): ``md("Delete **{}** ({n} chunks)?",
    name, n=3)``. The template's own Markdown is kept; nothing a value holds is interpreted."""
    return _Inert().format(template, *values, **named)


@lru_cache(maxsize=1)
def _answer_parser():
    from markdown_it import MarkdownIt  # noqa: PLC0415 - first Markdown only

    # html=False: tags in the text are text (escaped), never passed through. No linkify: a bare
    # address stays words.
    mdi = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    mdi.add_render_rule("image", _render_image)
    mdi.add_render_rule("link_open", _render_link_open)
    mdi.add_render_rule("link_close", _render_link_close)
    return mdi


def _relative(href: str) -> bool:
    """Whether ``href`` stays on the app's own origin: a path, query or fragment without a scheme or
    host (``//host`` and a backslash, which browsers read as a slash, are not)."""
    if not href or "\\" in href or href.startswith("//") or any(ord(c) < 33 for c in href):
        return False
    parts = urlsplit(href)
    return not parts.scheme and not parts.netloc and not re.match(r"[a-z][a-z0-9+.-]*:", href, re.I)


def _render_image(self, tokens, idx, options, env) -> str:
    tok = tokens[idx]
    alt = self.renderInlineAsText(tok.children or [], options, env) or tok.content
    src = tok.attrGet("src") or ""
    words = f"[image: {alt}]" if alt else "[image]"
    return html.escape(f"{words} ({src})" if src else words)


def _render_link_open(self, tokens, idx, options, env) -> str:
    tok = tokens[idx]
    href = str(tok.attrGet("href") or "")
    kept = _relative(href)
    env.setdefault("_links", []).append((kept, href, tok.markup == "autolink"))
    return f'<a href="{html.escape(href)}">' if kept else ""


def _render_link_close(self, tokens, idx, options, env) -> str:
    stack = env.get("_links") or [(True, "", False)]
    kept, href, autolink = stack.pop()
    if kept:
        return "</a>"
    return "" if autolink or not href else html.escape(f" ({href})")


def answer_html(text: str) -> str:
    """Model text (an answer, a message of the chat history) as safe HTML: Markdown rendered by
    markdown-it-py (CommonMark + tables + strikethrough: paragraphs, lists, code, tables, emphasis),
    with nothing that loads or leads outside the app --

    * an image (inline or reference-style) is its description and address in words:
      ``[image: status] (http://host/x.png)``, never fetched;
    * raw HTML (``<img>``, ``<iframe>``, ``<svg onload>``, ``<a href>``; also when written with
      entities) is shown as written, as text;
    * a link to a path of the app itself (``/stores``, ``#part``, ``?q=1``) stays a link; any other
      (another host, ``//host``, ``mailto:``; an autolink ``<http://host>``) is its text with the
      address after it, ``label (http://host/...)``; ``javascript:``/``data:`` links are not links.

    Returns one line (newlines as ``&#10;``) in ``<div class="answer">``, so Streamlit's Markdown
    pass sees one HTML block and reads nothing inside it: for ``st.markdown(..., unsafe_allow_html=True)``.
    """
    body = _answer_parser().render(unicodedata.normalize("NFC", text or ""), {})
    return f'<div class="answer">{_one_line(body.strip())}</div>'


__all__ = [
    "MARKDOWN_SUFFIXES",
    "answer_html",
    "inert",
    "is_markdown",
    "md",
    "plain_text",
    "render_html",
    "strip_source_markup",
]
