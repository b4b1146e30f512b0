"""The answer check's scoring: does a chat answer say what a question set expects
(:attr:`Question.expected <knowledge.evaluation.questions.Question.expected>`), does the sentence a
reader takes as the answer say it, and does that sentence cite a passage that answers? Pure
functions of an answer and its citations; the chat that produces them is
:func:`knowledge.chat.answer_check.check_answers`. How it is scored: docs/evaluation.md ("The answer
check").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from knowledge.evaluation.questions import Question

_MARKER = re.compile(r"\[(\d{1,3})\]")
_MARKERS_IN = re.compile(r"\s*\[\d{1,3}\]")
#: A Markdown backslash escape (the offline assistant escapes the marks of the sentences it quotes).
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_MARKS = re.compile(r"[`*_~>#]|\[(?:\d{1,3})\]")
_QUOTE_LINE = re.compile(r"^\s*>\s?(.*)$")
#: Where a sentence ends inside a line: ``.``, ``!`` or ``?`` (closing quotes or marks after it), then whitespace.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]*_]*\s+")

#: The shares of an :class:`AnswerCheck`, as :meth:`AnswerCheck.metrics` names them (a run's metrics too).
ANSWER_METRICS: tuple[str, ...] = ("answer holds", "first sentence holds", "cites a relevant passage")


def as_read(text: str) -> str:
    """``text`` with Markdown backslash escapes undone (``\\*`` -> ``*``) and whitespace runs made one
    space: a quoted sentence as a reader reads it."""
    return " ".join(_ESCAPE.sub(r"\1", text or "").split())


def normalise(text: str) -> str:
    """``text`` as compared: NFKC, backslash escapes undone, Markdown marks (`` ` * _ ~ > # ``) and
    ``[n]`` markers dropped, typographic quotes made plain, case folded, whitespace runs made one space."""
    text = unicodedata.normalize("NFKC", text or "")
    text = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(_MARKS.sub(" ", _ESCAPE.sub(r"\1", text)).split()).casefold()


def holds(text: str, expected: Sequence[str]) -> bool:
    """Whether ``text`` holds any of the ``expected`` strings, both :func:`normalise`-d (a blank
    expected string holds nowhere)."""
    said = normalise(text)
    return any(bool(e) and e in said for e in map(normalise, expected))


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """One question's check.

    ``answer``: the answer's text as the chat gave it (without its Sources); ``sentence``: the
    sentence a reader takes as the answer (:func:`answer_sentence`), as read; ``answer_holds``: what
    the answer says (an offline answer without its label line, which names the question) holds an
    expected string; ``sentence_holds``: ``sentence`` does; ``cited``: the file of the passage
    ``sentence`` cites (:func:`cited_passage`; ``None``: no citation); ``cited_relevant``: that
    passage meets the question's relevance criteria; ``seconds``: the time to the answer.
    """

    question: str
    expected: tuple[str, ...]
    answer: str
    sentence: str
    answer_holds: bool
    sentence_holds: bool
    cited: str | None
    cited_relevant: bool
    seconds: float

    def data(self) -> dict[str, Any]:
        """The result as JSON-ready data (:meth:`from_data` reads it back)."""
        return {
            "question": self.question,
            "expected": list(self.expected),
            "answer": self.answer,
            "sentence": self.sentence,
            "answer_holds": self.answer_holds,
            "sentence_holds": self.sentence_holds,
            "cited": self.cited,
            "cited_relevant": self.cited_relevant,
            "seconds": self.seconds,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> AnswerResult:
        return cls(
            str(data["question"]),
            tuple(data.get("expected") or ()),
            str(data.get("answer") or ""),
            str(data.get("sentence") or ""),
            bool(data.get("answer_holds")),
            bool(data.get("sentence_holds")),
            data.get("cited"),
            bool(data.get("cited_relevant")),
            float(data.get("seconds") or 0.0),
        )


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
    def answer_holding(self) -> float:
        """The share of answers holding an expected string."""
        return self._share("answer_holds")

    @property
    def sentence_holding(self) -> float:
        """The share of answers whose sentence (:func:`answer_sentence`) holds an expected string."""
        return self._share("sentence_holds")

    @property
    def citing_relevant(self) -> float:
        """The share of answers whose sentence cites a relevant passage."""
        return self._share("cited_relevant")

    @property
    def seconds(self) -> float:
        """The time of all the answers, in seconds."""
        return sum(r.seconds for r in self.results)

    def metrics(self) -> dict[str, float]:
        """The three shares by the names of :data:`ANSWER_METRICS`."""
        values = (self.answer_holding, self.sentence_holding, self.citing_relevant)
        return {name: round(v, 6) for name, v in zip(ANSWER_METRICS, values, strict=True)}


def _marked_sentence(line: str) -> str:
    """The sentence of ``line`` carrying its first ``[n]`` marker (a marker after the sentence's
    full stop belongs to it, ``rules. [1]``); the line's first sentence when it has no marker."""
    m = _MARKER.search(line)
    if m is None:
        ends = _SENTENCE_END.search(line)
        return line[: ends.start() + 1].strip() if ends else line.strip()
    tail = re.match(r"(?:\s*\[\d{1,3}\])*[.!?]?", line[m.end() :])
    end = m.end() + (tail.end() if tail else 0)
    head = line[: m.start()].rstrip()
    body = head.rstrip(".!?\"'”’)*_")  # the sentence's own full stop, when the marker follows it
    cuts = [x.end() for x in _SENTENCE_END.finditer(body)]
    return line[cuts[-1] if cuts else 0 : end].strip()


def answer_sentence(answer: str, offline: bool = False) -> str:
    """The sentence a reader takes as the answer, as read (:func:`as_read`). Offline
    (``offline``): the first ``> `` quoted line of what it says (:func:`what_is_said`) -- the first
    sentence the assistant highlights -- or ``""`` when it quotes nothing (nothing answers).
    Otherwise: the sentence carrying the answer's first ``[n]`` marker, else the first sentence of
    its first line."""
    lines = [ln for ln in what_is_said(answer, offline).splitlines() if ln.strip()]
    if offline:
        quoted = (m.group(1) for m in map(_QUOTE_LINE.match, lines) if m and m.group(1).strip())
        return as_read(next(quoted, ""))
    for ln in lines:
        if _MARKER.search(ln):
            return as_read(_marked_sentence(ln))
    return as_read(_marked_sentence(lines[0])) if lines else ""


def what_is_said(answer: str, offline: bool = False) -> str:
    """The part of ``answer`` that answers: an offline answer without its first paragraph (the
    italic label line, which names the question: "*Retrieval only ...* The sentences of S that best
    answer “Q”:"), any other answer whole."""
    if offline and (answer or "").lstrip().startswith("*"):
        return answer.split("\n\n", 1)[1] if "\n\n" in answer else ""
    return answer or ""


def cited_passage(sentence: str, citations: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The citation ``sentence`` points to: its first ``[n]`` (``citations[].n``), else the first
    citation; ``None`` when there is none."""
    m = _MARKER.search(sentence)
    if m:
        n = int(m.group(1))
        found = next((c for c in citations if int(c.get("n") or 0) == n), None)
        if found is not None:
            return found
    return citations[0] if citations else None


def check_one(
    question: Question, answer: str, citations: Sequence[Mapping[str, Any]], seconds: float, offline: bool = False
) -> AnswerResult:
    """One answer scored against ``question`` (pure: no search, no model). ``citations``: the
    reply's (each with ``n``, ``file_name``, ``page``, ``text``); ``offline``: the offline assistant
    wrote ``answer`` (its label line is not what it says; its first quoted line is its sentence)."""
    sentence = answer_sentence(answer, offline)
    cited = cited_passage(sentence, citations)
    relevant = False
    if cited is not None:
        hit = SimpleNamespace(file_name=cited.get("file_name"), page=cited.get("page"), text=cited.get("text") or "")
        relevant = question.is_relevant(hit)  # type: ignore[arg-type]  # a Hit's three fields a criterion reads
    return AnswerResult(
        question.text,
        question.expected,
        answer,
        _MARKERS_IN.sub("", sentence).strip(),
        holds(what_is_said(answer, offline), question.expected),
        holds(sentence, question.expected),
        cited.get("file_name") if cited else None,
        relevant,
        round(seconds, 3),
    )


__all__ = [
    "ANSWER_METRICS",
    "AnswerCheck",
    "AnswerResult",
    "answer_sentence",
    "as_read",
    "check_one",
    "cited_passage",
    "holds",
    "normalise",
    "what_is_said",
]
