from __future__ import annotations

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument
from knowledge.ingest.chunker import chunk_document, plan_chunking
from knowledge.ingest.document import Document, Section


def doc(text: str, sections: list[Section] | None = None) -> Document:
    return Document(text=text, sections=sections or [Section(0, len(text))], format="text")


def check_chunks(document: Document, result, embedder, limit: int) -> None:
    for i, c in enumerate(result.chunks):
        assert c.index == i
        assert document.text[c.char_start : c.char_end] == c.text
        assert embedder.count_tokens(c.text) <= limit
        assert c.text.strip()


def test_the_spec_default_is_fitted_to_a_smaller_window_and_says_so():
    e = HashEmbedder(max_tokens=100)
    plan = plan_chunking(e, 800, 400)
    assert (plan.max_tokens, plan.overlap_tokens) == (100, 50)
    assert "800/400" in plan.notes[0] and "100/50" in plan.notes[0]
    assert plan_chunking(e, 64, 16).notes == ()
    with pytest.raises(InvalidArgument):
        plan_chunking(e, 50, 50)


def test_no_chunk_exceeds_the_window_and_everything_is_covered():
    e = HashEmbedder(max_tokens=40)
    text = "\n\n".join(" ".join(f"w{p}x{i}" for i in range(37)) + "." for p in range(12))
    d = doc(text)
    r = chunk_document(d, e, 800, 400)
    check_chunks(d, r, e, 40)
    words = {t.text for t in e.tokenize(text)}
    assert words == {t.text for c in r.chunks for t in e.tokenize(c.text)}  # nothing lost
    assert r.warnings and "exceeds" in r.warnings[0]


def test_paragraph_then_sentence_boundaries_are_preferred():
    e = HashEmbedder(max_tokens=30)
    paras = [
        "Alpha one two three four five six seven eight nine ten eleven twelve.",
        "Beta one two three four five six seven eight nine ten eleven twelve.",
        "Gamma one two three four five six seven eight nine ten eleven twelve.",
    ]
    d = doc("\n\n".join(paras))
    r = chunk_document(d, e, 30, 0)  # two paragraphs (28 tokens) fit in one chunk
    assert [c.text for c in r.chunks] == ["\n\n".join(paras[:2]), paras[2]]
    r = chunk_document(d, e, 20, 0)  # one paragraph (14 tokens) per chunk, cut at the blank lines
    assert [c.text for c in r.chunks] == paras
    sentences = " ".join(f"Sentence {i} has a few words in it." for i in range(8))
    d = doc(sentences)
    r = chunk_document(d, e, 24, 0)
    check_chunks(d, r, e, 24)
    assert all(c.text.endswith(".") for c in r.chunks)


def test_overlap_repeats_the_end_of_the_previous_chunk():
    e = HashEmbedder(max_tokens=64)
    d = doc(" ".join(f"Sentence {i} says something." for i in range(60)))
    r = chunk_document(d, e, 40, 12)
    check_chunks(d, r, e, 40)
    for a, b in zip(r.chunks, r.chunks[1:]):
        assert b.char_start < a.char_end  # overlapping spans
        assert b.char_start > a.char_start  # always moving forward
    assert r.chunks[-1].char_end == len(d.text.rstrip())


def test_chunks_keep_page_and_heading_and_never_cross_sections():
    e = HashEmbedder(max_tokens=64)
    a, b = "Page one text. " * 3, "Page two text. " * 3
    text = a + "\n\n" + b
    d = Document(
        text, [Section(0, len(a) + 2, page=1, heading="Intro"), Section(len(a) + 2, len(text), page=2)], format="pdf"
    )
    r = chunk_document(d, e, 64, 8)
    assert [(c.page, c.heading) for c in r.chunks] == [(1, "Intro"), (2, None)]
    assert r.chunks[1].char_start == len(a) + 2


def test_cjk_without_spaces_is_chunked_between_characters():
    e = HashEmbedder(max_tokens=20)
    text = "日本語の文章です。" * 12
    d = doc(text)
    r = chunk_document(d, e, 20, 4)
    check_chunks(d, r, e, 20)
    assert len(r.chunks) > 3
    assert all(c.text.endswith("。") for c in r.chunks[:-1])


def test_whitespace_only_sections_give_no_chunks():
    e = HashEmbedder()
    text = "   \n\n  real text here"
    d = Document(text, [Section(0, 5), Section(5, len(text))], format="text")
    assert [c.text for c in chunk_document(d, e, 64, 8).chunks] == ["real text here"]


@pytest.mark.slow
@pytest.mark.model
def test_real_tokenizer_keeps_chunks_inside_the_model_window(tmp_path):
    from knowledge.embeddings.bundled import BundledEmbedder

    e = BundledEmbedder(tmp_path / "models")
    text = ("Ünïcödé façade naïve — emoji 🙂🚀 and 日本語の文章です。 " * 80 + "\n\n") * 3
    d = doc(text)
    r = chunk_document(d, e, 800, 400)
    assert r.plan.max_tokens == 254 and r.plan.overlap_tokens == 127
    check_chunks(d, r, e, 254)
    assert len(r.chunks) >= 6


def test_room_is_kept_for_the_heading_path_that_is_embedded_with_each_chunk():
    from knowledge.ingest.chunker import embedding_text

    e = HashEmbedder(max_tokens=40)
    text = " ".join(f"word{i}" for i in range(300))
    heading = "Guide > Installing on Linux > From source"
    d = Document(text, [Section(0, len(text), heading=heading)], format="markdown")
    r = chunk_document(d, e, 40, 8)
    assert len(r.chunks) > 5
    for c in r.chunks:
        embedded = embedding_text(c.text, c.heading)
        assert embedded.startswith(heading + "\n\n") and embedded.endswith(c.text)
        assert e.count_tokens(embedded) <= 40
    assert embedding_text("plain", None) == "plain"


def test_a_long_text_is_chunked_piece_by_piece_with_exact_spans_and_can_be_stopped(monkeypatch):
    import knowledge.ingest.chunker as chunker

    monkeypatch.setattr(chunker, "WINDOW_CHARS", 400)
    e = HashEmbedder(dimension=8, max_tokens=32)
    paragraphs = [f"Paragraph {i} tells about topic {i} in a few plain words." for i in range(60)]
    d = doc("\n\n".join(paragraphs))
    seen: list[float] = []
    r = chunk_document(d, e, 24, 4, on_progress=seen.append)
    check_chunks(d, r, e, 24)  # spans stay exact, numbering continuous, none over 24 tokens
    covered = " ".join(c.text for c in r.chunks)
    assert all(p in covered for p in paragraphs)  # nothing lost at the piece boundaries
    assert len(seen) > 5 and seen == sorted(seen) and seen[-1] == 1.0

    def stop(fraction):
        raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError):
        chunk_document(d, e, 24, 4, on_progress=stop)
