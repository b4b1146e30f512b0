"""The answer check's scoring: does a chat answer say what a question set expects
(:attr:`Question.expected <knowledge.evaluation.questions.Question.expected>`), and does it cite a
passage that answers? Pure functions of an answer and its citations; the chat that produces them is
:func:`knowledge.chat.answer_check.check_answers`. How it is scored: docs/evaluation.md ("The answer
check").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from knowledge.evaluation.questions import Question

_MARKER = re.compile(r"\[(\d{1,3})\]")
_MARKS = re.compile(r"[`*_~>#]|\[(?:\d{1,3})\]")
_QUOTE_LINE = re.compile(r"^\s*>\s?(.*)$")


def normalise(text: str) -> str:
    """``text`` as compared: NFKC, Markdown marks (`` ` * _ ~ > # ``) and ``[n]`` markers dropped,
    typographic quotes made plain, case folded, whitespace runs made one space."""
    text = unicodedata.normalize("NFKC", text or "")
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(_MARKS.sub(" ", text).split()).casefold()


def holds(text: str, expected: Sequence[str]) -> bool:
    """Whether ``text`` holds any of the ``expected`` strings, both :func:`normalise`-d."""
    said = normalise(text)
    return any(normalise(e) and normalise(e) in said for e in expected)


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """One question's check.

    ``answer``: the answer's text (without its Sources); ``first``: its first sentence as
    a reader reads it -- the first quoted line of the offline assistant, else the first line holding
    a ``[n]`` marker, else the first line; ``holds``: ``answer`` holds an expected string;
    ``first_holds``: ``first`` does; ``cited``: the file of the passage ``first`` cites (``None``:
    no citation); ``cited_relevant``: that passage answers the question (its relevance criteria);
    ``seconds``: the time to the answer.
    """

    question: str
    expected: tuple[str, ...]
    answer: str
    first: str
    holds: bool
    first_holds: bool
    cited: str | None
    cited_relevant: bool
    seconds: float


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """The check of ``store`` with chat model config ``config`` (``"offline"``: the offline
    assistant) over the questions with expected answers; the shares are in [0, 1], higher is better."""

    store: str
    config: str
    results: tuple[AnswerResult, ...]

    def _share(self, flag: str) -> float:
        return sum(1 for r in self.results if getattr(r, flag)) / len(self.results) if self.results else 0.0

    @property
    def holding(self) -> float:
        """The share of answers holding an expected string."""
        return self._share("holds")

    @property
    def first_holding(self) -> float:
        """The share of answers whose first sentence holds an expected string."""
        return self._share("first_holds")

    @property
    def citing_relevant(self) -> float:
        """The share of answers whose first sentence cites a relevant passage."""
        return self._share("cited_relevant")

    def metrics(self) -> dict[str, float]:
        return {"answer holds": round(self.holding, 6), "first sentence holds": round(self.first_holding, 6),
                "cites a relevant passage": round(self.citing_relevant, 6)}


def first_sentence(answer: str) -> str:
    """The sentence a reader takes as the answer: the first ``> `` quoted line (the offline
    assistant quotes the sentences that answer), else the first line with a ``[n]`` marker, else the
    first non-blank line."""
    lines = [ln for ln in (answer or "").splitlines() if ln.strip()]
    for ln in lines:
        m = _QUOTE_LINE.match(ln)
        if m and m.group(1).strip():
            return m.group(1).strip()
    for ln in lines:
        if _MARKER.search(ln):
            return ln.strip()
    return lines[0].strip() if lines else ""


def cited_passage(first: str, citations: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The citation the first sentence points to: its first ``[n]`` (``citations[].n``), else the
    first citation; ``None`` when there is none."""
    m = _MARKER.search(first)
    if m:
        n = int(m.group(1))
        found = next((c for c in citations if int(c.get("n") or 0) == n), None)
        if found is not None:
            return found
    return citations[0] if citations else None


def check_one(question: Question, answer: str, citations: Sequence[dict[str, Any]], seconds: float) -> AnswerResult:
    """One answer scored against ``question`` (pure: no search, no model)."""
    first = first_sentence(answer)
    cited = cited_passage(first, citations)
    relevant = False
    if cited is not None:
        hit = SimpleNamespace(file_name=cited.get("file_name"), page=cited.get("page"), text=cited.get("text") or "")
        relevant = question.is_relevant(hit)  # type: ignore[arg-type]  # a Hit's three fields a criterion reads
    return AnswerResult(question.text, question.expected, answer, first, holds(answer, question.expected),
                        holds(first, question.expected), cited.get("file_name") if cited else None, relevant,
                        round(seconds, 3))


__all__ = ["AnswerCheck", "AnswerResult", "check_one", "cited_passage", "first_sentence", "holds", "normalise"]
