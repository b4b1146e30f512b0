"""The order of the offline assistant's sentences: a sentence's own score, plus its passage's
similarity weighted by ``PASSAGE_WEIGHT`` (issue 31, item 3). An embedding that gives every
sentence the same cosine leaves the words and the passage to decide."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.text.answers import MIN_SCORE, PASSAGE_WEIGHT, pick, score_sentences


def same_cosine(texts: list[str]) -> np.ndarray:
    """Every text the same unit vector: each sentence's cosine with the question is 1."""
    return np.tile(np.eye(1, 8, dtype=np.float32), (len(texts), 1))


def orthogonal(texts: list[str]) -> np.ndarray:
    """The question on one axis, every sentence on another: each cosine is 0."""
    out = np.zeros((len(texts), 8), dtype=np.float32)
    out[0, 0] = 1.0
    out[1:, 1] = 1.0
    return out


QUESTION = "How does the borrow checker prevent dangling references?"
SAME = "The borrow checker prevents dangling references in this code."


def test_of_two_sentences_saying_as_much_the_better_passage_comes_first():
    hits = [{"ref": 1, "text": SAME, "score": 0.31}, {"ref": 2, "text": SAME.replace("this", "that"), "score": 0.72}]
    scored = score_sentences(QUESTION, hits, same_cosine)
    assert [p.ref for p in scored] == [2, 1]
    assert scored[0].score == scored[1].score  # the sentences alone tie
    assert scored[0].rank_score - scored[1].rank_score == pytest.approx(PASSAGE_WEIGHT * (0.72 - 0.31), abs=1e-5)
    assert pick(scored)[0].ref == 2


def test_a_sentence_that_says_more_still_wins_from_a_lower_passage():
    hits = [
        {"ref": 1, "text": "The checker is described in another part of this long text.", "score": 0.75},
        {"ref": 2, "text": SAME, "score": 0.70},
    ]
    scored = score_sentences(QUESTION, hits, same_cosine)
    assert scored[0].ref == 2 and scored[0].lexical > scored[1].lexical


def test_a_distance_store_orders_by_the_sentences_alone():
    """A distance (lower is better) is no similarity: it adds nothing to the order."""
    hits = [
        {"ref": 1, "text": SAME, "score": 0.1, "higher_is_better": False},
        {"ref": 2, "text": SAME.replace("this", "that"), "score": 0.9, "higher_is_better": False},
    ]
    scored = score_sentences(QUESTION, hits, same_cosine)
    assert all(p.rank_score == p.score for p in scored)


def test_nothing_answers_when_no_sentence_scores_the_minimum_however_good_its_passage():
    hits = [{"ref": 1, "text": SAME, "score": 0.95}]
    scored = score_sentences(QUESTION, hits, orthogonal)
    assert scored[0].score < MIN_SCORE <= scored[0].rank_score
    assert pick(scored) == []
