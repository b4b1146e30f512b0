"""An answer's sources: the passages it cites or quotes, numbered in the order the answer uses them.

Every passage a turn's searches found gets one number, its ``ref``, the number the model reads in
front of it (``[3] score 0.61 | guide.md ...``) and is told to cite. :func:`cite` reads the answer:
the passages it cites with ``[n]`` markers -- or, when it gives none, the passages it quotes (a run
of :data:`QUOTE_WORDS` words verbatim, whitespace, case and punctuation aside), else those whose
file (and page) it names ("harbour.pdf, page 2") -- become its Sources,
renumbered 1, 2, ... in the order of first use, and the answer's markers are rewritten to that
numbering; every other passage searched is "also searched". Markers inside code (backticks) and
numbers the turn never showed are left as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The verbatim run (in words) that counts as quoting a passage; a shorter passage counts when all of it is quoted.
QUOTE_WORDS = 8
#: A passage shorter than this many words is never detected as quoted (too common to tell).
MIN_QUOTE_WORDS = 3

_CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.S)
_MARKER = re.compile(r"(?<![\w\\])\[(\d{1,3}(?:\s*[,;]\s*\d{1,3})*)\](?!\()")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class CitedAnswer:
    """``text``: the answer with its markers renumbered; ``sources``: the passages it cites or
    quotes, in order of first use, each a copy of the turn's hit dict with ``n`` (its number in
    ``text``, from 1) and ``used_at`` (``[start, end)``, the characters of ``text`` where it is
    first used: its marker, or the words quoted); ``also_searched``: the turn's other passages, in the order found;
    ``by``: how the sources were found -- ``"markers"``, ``"quotes"`` or ``""`` (none)."""

    text: str
    sources: list[dict[str, Any]] = field(default_factory=list)
    also_searched: list[dict[str, Any]] = field(default_factory=list)
    by: str = ""


def _prose(text: str) -> list[tuple[bool, int, str]]:
    """``text`` cut into ``(is_code, offset, piece)``: markers are read in the prose pieces only."""
    out, at = [], 0
    for m in _CODE.finditer(text):
        out.append((False, at, text[at : m.start()]))
        out.append((True, m.start(), m.group(0)))
        at = m.end()
    out.append((False, at, text[at:]))
    return out


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def quoted_at(answer: str, passage: str, run: int = QUOTE_WORDS) -> tuple[int, int] | None:
    """The characters ``[start, end)`` of ``answer`` where it first quotes ``passage`` -- ``run``
    consecutive words of it verbatim, whitespace, case and punctuation aside (all of it when it is
    shorter, if at least :data:`MIN_QUOTE_WORDS` words) -- else ``None``."""
    found = list(_WORD.finditer(answer))
    said, words = [m.group(0).lower() for m in found], _words(passage)
    n = min(run, len(words))
    if n < MIN_QUOTE_WORDS or len(said) < n:
        return None
    grams = {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
    at = next((i for i in range(len(said) - n + 1) if tuple(said[i : i + n]) in grams), None)
    return None if at is None else (found[at].start(), found[at + n - 1].end())


def named_at(answer: str, hit: dict[str, Any]) -> tuple[int, int] | None:
    """The characters of ``answer`` where it names ``hit``'s file -- followed within a few words by
    ``page N`` when the passage has a page -- else ``None``."""
    name = str(hit.get("file_name") or "")
    if len(name) < 3:
        return None
    page = hit.get("page")
    tail = rf"[^\n]{{0,40}}?\bpages? {int(page)}\b" if isinstance(page, int) else ""
    m = re.search(re.escape(name) + tail, answer, re.I)
    return (m.start(), m.end()) if m else None


def cite(answer: str, hits: Sequence[dict[str, Any]]) -> CitedAnswer:
    """The sources of ``answer`` among the turn's ``hits`` (dicts with ``ref``, the number the model
    saw; hits without one are numbered by position from 1).

    Returns:
        a :class:`CitedAnswer`; with no marker and no quote, every hit is ``also_searched``.
    """
    by_ref: dict[int, dict[str, Any]] = {}
    for i, h in enumerate(hits, 1):
        by_ref.setdefault(int(h.get("ref") or i), h)
    order: list[int] = []  # refs in order of first use
    for is_code, _, piece in _prose(answer):
        if is_code:
            continue
        for m in _MARKER.finditer(piece):
            for num in re.split(r"\s*[,;]\s*", m.group(1)):
                ref = int(num)
                if ref in by_ref and ref not in order:
                    order.append(ref)
    by = "markers" if order else ""
    if not order:
        quoted = {ref: at for ref, h in by_ref.items() if (at := quoted_at(answer, str(h.get("text") or "")))}
        if not quoted:
            quoted = {ref: at for ref, h in by_ref.items() if (at := named_at(answer, h))}
        order = sorted(quoted, key=lambda ref: quoted[ref])
        by = "quotes" if order else ""
    new = {ref: n for n, ref in enumerate(order, 1)}
    text = answer
    if by == "markers":

        def renumber(m: re.Match[str]) -> str:
            nums = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
            if not all(x in new for x in nums):
                return m.group(0)  # a number the turn never showed: as written
            return "".join(f"[{new[x]}]" for x in nums)

        text = "".join(piece if is_code else _MARKER.sub(renumber, piece) for is_code, _, piece in _prose(answer))
        first: dict[int, tuple[int, int]] = {}
        for is_code, offset, piece in _prose(text):
            for m in [] if is_code else re.finditer(r"\[(\d{1,3})\]", piece):
                first.setdefault(int(m.group(1)), (offset + m.start(), offset + m.end()))
        spans = {ref: first.get(new[ref], (0, 0)) for ref in order}
    else:
        spans = {ref: quoted[ref] for ref in order}
    sources = [{**by_ref[ref], "n": new[ref], "used_at": list(spans[ref])} for ref in order]
    used = {id(by_ref[ref]) for ref in order}
    also = [h for h in by_ref.values() if id(h) not in used]
    return CitedAnswer(text, sources, also, by)


def drop_unknown_markers(answer: str, refs: Sequence[int]) -> tuple[str, list[int]]:
    """``answer`` without the marker numbers that point to no passage given (``refs``): ``[1, 7]``
    becomes ``[1]`` and ``[7]`` goes (with the space before it), outside code only; and the numbers
    dropped, in order of first use. For a model that wrote from numbered passages."""
    known, dropped = set(refs), []

    def keep(m: re.Match[str]) -> str:
        nums = [int(x) for x in re.split(r"\s*[,;]\s*", m.group(1))]
        for x in nums:
            if x not in known and x not in dropped:
                dropped.append(x)
        kept = [x for x in nums if x in known]
        return f"[{', '.join(map(str, kept))}]" if kept else ""

    marker = re.compile(r"[ \t]?" + _MARKER.pattern)
    out = []
    for is_code, _, piece in _prose(answer):
        if is_code:
            out.append(piece)
            continue
        out.append(
            marker.sub(
                lambda m: (
                    (m.group(0)[: len(m.group(0)) - len(m.group(0).lstrip(" \t"))] + kept) if (kept := keep(m)) else ""
                ),
                piece,
            )
        )
    text = "".join(out)
    return text, dropped


def where_text(c: dict[str, Any]) -> str:
    """Where a cited passage is, in words, without empty parts: ``file, page 3 — Heading`` (no page
    for a file without pages, never "None"), ``· 2 chunks`` when it joins chunks."""
    out = str(c.get("file_name") or c.get("file_id") or "?")
    if c.get("page") not in (None, "", "None"):
        out += f", page {c['page']}"
    if c.get("heading"):
        out += f" — {c['heading']}"
    joined = len(c.get("chunks") or ())
    if joined > 1:
        out += f" · {joined} chunks"
    return out


__all__ = [
    "MIN_QUOTE_WORDS",
    "QUOTE_WORDS",
    "CitedAnswer",
    "cite",
    "drop_unknown_markers",
    "named_at",
    "quoted_at",
    "where_text",
]
