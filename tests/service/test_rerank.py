"""Reranking the best passages by the sentence of each that best answers (knowledge/service/rerank.py),
through the Searcher, templates, the playground's score text and eval."""

from __future__ import annotations

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.pagemodels.playground import order_score, score_text
from knowledge.service.rerank import rerank
from knowledge.service.templates import make_template
from knowledge.vectorstore.store import Hit
from knowledge.workbench import Workbench


def _hit(i: int, text: str, score: float) -> Hit:
    return Hit(id=f"p{i}", score=score, file_id=f"f{i}", file_name=f"f{i}.md", chunk_index=0, text=text)


def _embed(texts: list[str]):
    return HashEmbedder(dimension=64).embed_documents(texts)


def test_the_passage_whose_sentence_answers_moves_up_and_the_rest_keeps_its_place():
    hits = [
        _hit(1, "Cargo is the build system. It downloads crates for you and builds them.", 0.50),
        _hit(2, "Some unrelated words here. The borrow checker checks that every reference is valid.", 0.49),
        _hit(3, "A third passage about nothing in particular at all.", 0.40),
        _hit(4, "The borrow checker checks that every reference is valid, said the tail.", 0.10),
    ]
    out = rerank("what does the borrow checker check", hits, _embed, candidates=3, weight=0.9)
    assert next(h.id for h in out[:3]) == "p2"  # its second sentence holds every word of the question
    assert out[3].id == "p4" and out[3].rerank_score is None  # past the candidates: not reranked, kept last
    assert all(h.rerank_score is not None for h in out[:3])
    assert [h.rerank_score for h in out[:3]] == sorted((h.rerank_score for h in out[:3]), reverse=True)


def test_of_two_passages_whose_sentences_say_as_much_the_more_similar_one_moves_up():
    """The sentence order is the offline assistant's: the sentence's score plus PASSAGE_WEIGHT x its
    passage's vector score, so the same sentence in a passage scoring 0.9 beats it in one at 0.2."""
    same = "The borrow checker checks that every reference is valid."
    hits = [_hit(1, "Nothing to see in this first passage at all.", 0.50), _hit(2, same, 0.20), _hit(3, same + " ", 0.90)]
    out = rerank("what does the borrow checker check", hits, _embed, candidates=3, weight=1.0)
    assert [h.id for h in out] == ["p3", "p2", "p1"]


def test_a_distance_store_puts_a_passage_without_a_sentence_after_those_with_one():
    hits = [_hit(1, "fn main() {\n    let x = 5;\n}", 0.01), _hit(2, "A passage that has a real sentence in it.", 0.80)]
    out = rerank("a real sentence", hits, _embed, candidates=2, weight=1.0, higher_is_better=False)
    assert [h.id for h in out] == ["p2", "p1"]


def test_the_rank_constant_is_the_fusions():
    """The search passes its fusion's rank constant (search.rank_constant): weight 0 keeps the order,
    and the first passage's rerank score is 1 / (k + 1)."""
    hits = [_hit(1, "One passage with a sentence in it.", 0.5), _hit(2, "Another passage with a sentence.", 0.4)]
    assert rerank("a sentence", hits, _embed, candidates=2, weight=0.0, rank_constant=10)[0].rerank_score == round(1 / 11, 6)
    assert rerank("a sentence", hits, _embed, candidates=2, weight=0.0)[0].rerank_score == round(1 / 61, 6)


def test_no_passage_or_a_blank_query_returns_the_ranking_as_it_is():
    assert rerank("question", [], _embed) == []
    two = [_hit(1, "One passage.", 0.3), _hit(2, "Two passages.", 0.2)]
    assert rerank("   ", two, _embed) == two


def test_the_playground_shows_and_orders_by_the_rerank_score():
    from dataclasses import replace

    h = replace(_hit(1, "x", 0.61), fused_score=0.0325, lexical_score=7.31, rerank_score=0.0163)
    assert score_text(h).endswith("rerank score 0.0163")
    assert order_score(h, "hybrid") == 0.0163
    assert order_score(replace(h, rerank_score=None), "hybrid") == 0.0325


@pytest.fixture
def wb(settings):
    w = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=32))
    texts = [
        "Cargo builds the project and downloads its dependencies. Run cargo build.",
        "Ownership rules: each value has an owner. The borrow checker checks that references are valid.",
        "Closures capture their environment. Iterators are lazy.",
    ]
    for i, t in enumerate(texts):
        w.ingest_file("notes", t.encode(), f"n{i}.txt")
    try:
        yield w
    finally:
        w.close()


def test_a_search_reranks_when_asked_and_its_template_decides_by_default(wb):
    plain = wb.search("notes", "what does the borrow checker check", k=3, rerank=False)
    assert plain and all(h.rerank_score is None for h in plain)
    reranked = wb.search("notes", "what does the borrow checker check", k=3, rerank=True)
    assert reranked and all(h.rerank_score is not None for h in reranked)
    assert reranked[0].file_name == "n1.txt"
    assert wb.reranks("notes") == (False, 30)  # the default template follows search.rerank (off)
    wb.save_template(
        make_template(name="reranking", embedding_model=wb.settings.embeddings.model, rerank=True, rerank_candidates=12)
    )
    wb.create_store("other", template="reranking")
    wb.ingest_file("other", b"The borrow checker checks references. Nothing else here.", "o.txt")
    assert wb.reranks("other") == (True, 12)
    assert all(h.rerank_score is not None for h in wb.search("other", "borrow checker", k=1))
    assert all(h.rerank_score is None for h in wb.search("other", "borrow checker", k=1, rerank=False))


def test_a_template_refuses_a_rerank_count_out_of_range():
    from knowledge.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="rerank_candidates"):
        make_template(name="bad", embedding_model="m", rerank=True, rerank_candidates=1)
