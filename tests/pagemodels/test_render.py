"""Readable chunk text (knowledge.text.render) and the playground's folding of hits (merge, also-in, bars)."""

from __future__ import annotations

import html
import re

import pytest

from knowledge.pagemodels import playground as pg
from knowledge.service.passages import merge_passages
from knowledge.text import render
from knowledge.vectorstore.store import Hit
from tests.helpers.env import CORPUS

MD = """<!-- manual-regeneration
cd listings
-->
<span class="filename">Filename: src/main.rs</span>

<Listing number="2-1" file-name="src/main.rs" caption="Code that gets a guess">

```rust,ignore
{{#rustdoc_include ../listings/ch02/listing-02-01/src/main.rs:all}}
```

</Listing>

The [`String`][string]<!-- ignore --> type holds a **guess**; call `read_line(&mut guess)`:

```rust
let mut guess = String::new();
if a < b && c > d { println!("<b>not bold</b>"); }
```

<script>alert(1)</script>

![a photo](https://example.com/x.png) [a link](https://example.com)
"""


def visible(markup: str) -> str:
    """The text a browser shows for the markup."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup.replace("&#10;", "\n")))


def test_markdown_renders_without_source_markup_and_keeps_code():
    out = render.render_html(MD, file_name="ch02.md")
    shown = visible(out)
    for junk in ("<span", "{{#", "<!--", "-->", "</Listing", "<Listing", "manual-regeneration", "[string]"):
        assert junk not in shown, junk
    assert "Filename: src/main.rs" in shown  # the text inside a tag stays
    assert "<strong>guess</strong>" in out and "<code>read_line(&amp;mut guess)</code>" in out
    assert "<pre><code>let mut guess = String::new();&#10;if a &lt; b &amp;&amp; c &gt; d" in out
    assert 'println!("<b>not bold</b>")' in shown  # code is shown as written, never interpreted
    assert "<b>" not in out and "<script" not in out and "<span" not in out and "<!--" not in out
    assert "alert" not in shown
    assert "<img" not in out and "href" not in out and "https://" not in out  # nothing to fetch
    assert "[image: a photo]" in shown and "a link" in shown
    assert "\n" not in out  # one HTML block for Streamlit's Markdown


def test_plain_text_reads_like_the_rendering():
    text = render.plain_text(MD, file_name="ch02.md")
    assert "Filename: src/main.rs" in text and "The String type holds a guess; call read_line(&mut guess):" in text
    for junk in ("<span", "{{#", "<!--", "**", "```", "</Listing"):
        assert junk not in text, junk


def test_cut_comments_directives_and_tags_at_the_chunk_edges_are_hidden():
    chunk = "the tail of a comment -->\nSome text.\n\n{{#include ../src/ma"
    assert visible(render.render_html(chunk, file_name="a.md")).strip() == "Some text."
    assert render.plain_text("Text. <!-- ignore", file_name="a.md") == "Text."
    assert render.plain_text('Text <span class="file', file_name="a.md") == "Text"


def test_plain_files_are_shown_as_they_are():
    text = "Total: 5 * 3 = 15\n<not a tag> & # not a heading"
    assert render.plain_text(text, file_name="notes.txt") == text
    out = render.render_html(text, file_name="report.pdf")
    assert visible(out.replace("<br>", "\n")) == text
    assert "&lt;not a tag&gt;" in out


def test_highlighting_works_on_the_rendered_text():
    out = render.render_html("Iterating over a **vector** with `iter()`", "iterate vectors", file_name="a.md")
    assert "<mark>Iterating</mark>" in out and "<strong><mark>vector</mark></strong>" in out
    assert render.render_html("<p>x</p> iterate", "iterate", markdown=False).count("<mark>") == 1


def test_without_a_file_name_markup_is_sniffed():
    assert render.is_markdown(None, "a <!-- c --> b") and render.is_markdown(None, "```\ncode\n```")
    assert not render.is_markdown(None, "plain words, 3 < 4")
    assert render.is_markdown("README.MD") and not render.is_markdown("a.pdf", "<!-- x -->")


@pytest.mark.skipif(not (CORPUS / "md" / "rust-book").is_dir(), reason="the shared corpus is absent")
def test_every_rust_book_chunk_renders_clean():
    from knowledge.ingest import read_document

    for path in sorted((CORPUS / "md" / "rust-book").glob("ch0*.md")):
        doc = read_document(path)
        text = doc.text
        for start in range(0, len(text), 700):  # slices cut anywhere, as chunks are
            piece = text[start : start + 1400]
            shown = visible(render.render_html(piece, "guess", file_name=path.name))
            plain = render.plain_text(piece, file_name=path.name)
            for junk in ("<span", "{{#", "<!--"):
                assert junk not in shown and junk not in plain, (path.name, start, junk)


# -- folding hits -----------------------------------------------------------------------------------
DOC = "".join(f"Sentence number {i} of the document. " for i in range(40))


def chunk(
    file_id: str, index: int, start: int, end: int, score: float, name: str | None = None, text: str | None = None
) -> Hit:
    return Hit(
        f"{file_id}:{index}",
        score,
        file_id,
        name or f"{file_id}.md",
        index,
        DOC[start:end] if text is None else text,
        char_start=start,
        char_end=end,
    )


def test_overlapping_chunks_of_a_file_become_one_hit_with_the_union_span():
    found = [
        chunk("a", 2, 200, 400, 0.9),
        chunk("b", 0, 0, 200, 0.8),
        chunk("a", 3, 300, 500, 0.7),
        chunk("a", 1, 100, 300, 0.6),
        chunk("a", 7, 700, 900, 0.5),
    ]
    hits, notes = merge_passages(found, 5)
    assert [h.id for h in hits] == ["a:2", "b:0", "a:7"]
    top = hits[0]
    assert (top.char_start, top.char_end, top.score) == (100, 500, 0.9)
    assert top.text == DOC[100:500]  # exact: the stored text of the span
    assert notes["a:2"].chunks == (1, 2, 3)
    assert pg.provenance(top, notes["a:2"]).endswith("chars 100–500 · chunks 1–3")
    plain, _ = merge_passages(found, 5, merge=False)
    assert [h.id for h in plain] == ["a:2", "b:0", "a:3", "a:1", "a:7"]


def test_a_chunk_bridging_two_hits_joins_them():
    found = [chunk("a", 0, 0, 100, 0.9), chunk("a", 2, 150, 250, 0.8), chunk("a", 1, 50, 200, 0.7)]
    hits, notes = merge_passages(found, 5)
    assert len(hits) == 1 and hits[0].text == DOC[0:250] and notes["a:0"].chunks == (0, 1, 2)


def test_identical_text_in_other_files_is_folded_and_named():
    found = [
        chunk("a", 0, 0, 100, 0.9),
        chunk("b", 0, 0, 100, 0.9, name="b.md"),
        chunk("c", 0, 0, 100, 0.9, name="c.md", text="  " + DOC[0:100].upper()),
        chunk("d", 4, 400, 500, 0.3),
    ]
    hits, notes = merge_passages(found, 5)
    assert [h.id for h in hits] == ["a:0", "d:4"]
    assert notes["a:0"].also_in == ("b.md", "c.md") and notes["d:4"].also_in == ()


def test_bars_follow_the_order_of_the_list():
    import numpy as np

    hits = [Hit("x", 0.2, "f", "f", 0, "t", fused_score=0.033), Hit("y", 0.6, "f", "f", 1, "u", fused_score=0.016)]
    run = pg.SearchRun("s", "q", "cosine", hits, hits, np.zeros(3, dtype=np.float32), 1.0, 1.0, mode="hybrid")
    bars = [pg.bar_fraction(h, run) for h in hits]
    assert bars[0] == 1.0 and 0 < bars[1] < bars[0]
    assert pg.score_text(hits[0]) == "similarity 0.200 · keyword score – · rank score 0.0330"


def test_a_result_holds_at_most_three_chunks():
    found = [chunk("a", i, 100 * i, 100 * i + 200, 1.0 - i / 10) for i in range(8)]
    hits, notes = merge_passages(found, 5)
    assert notes["a:0"].chunks == (0, 1, 2) and hits[0].text == DOC[0:400]
    assert [h.id for h in hits] == ["a:0", "a:4"]  # a:3 overlaps the full first result: not shown


def test_a_chunk_cut_inside_a_directive_hides_its_tail_and_code_blocks_carry_no_marks():
    # a chunk of the Rust book that starts inside {{#rustdoc_include ...}}: the tail is source markup
    text = (
        "/listings/ch10-generic-types-traits-and-lifetimes/no-listing-06-impl-trait-returns-one-type/"
        "src/lib.rs:here}}\n```\n\nA trait defines shared behaviour.\n\n```rust\npub trait Summary {}\n```"
    )
    out = render.render_html(text, "How do I define a trait?", file_name="ch10-02-traits.md")
    assert "lib.rs" not in out and "}}" not in out and "listings" not in out
    assert "A <mark>trait</mark> <mark>defines</mark> shared" in out
    # Streamlit renders an element inside a code block as "[object Object]": the code is plain
    assert "<pre><code>pub trait Summary {}</code></pre>" in out
    assert "lib.rs" not in render.plain_text(text, file_name="ch10-02-traits.md")
    # code that merely ends in braces is not mistaken for a directive's tail
    assert render.strip_source_markup("    }}\nfn main() {}").startswith("    }}")


def test_a_plain_text_passage_quoted_by_the_offline_assistant_reads_as_written():
    """A mail's quoted lines, a rule under a line, indented lines, a '#' or a number at the start:
    quoted in an offline answer, none becomes a heading, code block, rule or list (found by a new
    user's trial: a mail's '> ----' made a huge heading in the chat)."""
    from knowledge.llm.providers import _quote
    from knowledge.text.render import answer_html

    text = "> RFC822 messages not parsed\n> ----\n    Key: a\n    URL: b\n# not a heading\n---\n1. not a list"
    html = answer_html(_quote({"file_name": "testRFC822.eml", "text": text, "score": 0.3}))
    for tag in ("<h1", "<h2", "<pre", "<code", "<ol", "<hr", "<ul"):
        assert tag not in html, tag
    for words in ("&gt; RFC822 messages not parsed", "&gt; ----", "Key: a", "# not a heading", "1. not a list"):
        assert words in html, words
