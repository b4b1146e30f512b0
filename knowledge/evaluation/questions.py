"""Question sets: questions, each with the places that answer it (:class:`Criterion`: a file, a
file and page, or a text snippet; any one is enough), read from and written to TSV, CSV or JSONL
files (:func:`parse_questions`, :func:`export_questions`) or the app's table editor
(:func:`questions_from_rows`). The formats: docs/evaluation.md.

Bad input raises ``InvalidArgument`` naming each bad line or row; nothing is kept then.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePath
from typing import Any

from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.vectorstore.store import Hit

FORMATS: tuple[str, ...] = ("tsv", "csv", "jsonl")
MAX_QUESTIONS = 5000
_PAGE = re.compile(r"^(?P<file>.+?)#(?:page=|p)(?P<page>\d+)$", re.IGNORECASE)


class QuestionSetNotFound(KnowledgeError, LookupError):
    """No question set has the given name."""


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True, slots=True)
class Criterion:
    """One place that answers a question: a ``file`` (by name), optionally on a ``page`` (1-based),
    or a ``text`` snippet a relevant chunk contains (case and whitespace runs ignored)."""

    file: str | None = None
    page: int | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if (self.file is None) == (self.text is None):
            raise InvalidArgument("A relevance criterion is a file (optionally with a page) or a text snippet.")
        if self.page is not None and (isinstance(self.page, bool) or not isinstance(self.page, int) or self.page < 1):
            raise InvalidArgument(f"A page is a number from 1, got {self.page!r}.")
        if self.file is not None and not self.file.strip():
            raise InvalidArgument("A file name is empty.")
        if self.text is not None and not self.text.strip():
            raise InvalidArgument("A text snippet is empty.")

    def matches(self, hit: Hit) -> bool:
        """Whether ``hit`` (a chunk) satisfies this criterion."""
        if self.text is not None:
            return _fold(self.text) in _fold(hit.text)
        if hit.file_name != self.file and PurePath(hit.file_name or "").name != self.file:
            return False
        return self.page is None or hit.page == self.page

    def label(self) -> str:
        """The criterion as written in a TSV cell: ``a.md``, ``a.pdf#page=3``, ``text:...``."""
        if self.text is not None:
            return f"text:{self.text}"
        file = self.file or ""
        return file if self.page is None else f"{file}#page={self.page}"

    def data(self) -> dict[str, Any]:
        return {k: v for k, v in (("file", self.file), ("page", self.page), ("text", self.text)) if v is not None}


def parse_criterion(item: str | dict) -> Criterion:
    """A criterion from its cell form (``a.md``, ``a.pdf#page=3``, ``text:snippet``) or its JSON form
    (``{"file": "a.pdf", "page": 3}``, ``{"text": "..."}``). Raises ``InvalidArgument``."""
    if isinstance(item, dict):
        unknown = set(item) - {"file", "page", "text"}
        if unknown:
            raise InvalidArgument(f"Unknown relevance field(s) {', '.join(sorted(unknown))}; use file, page, text.")
        page = item.get("page")
        if isinstance(page, str) and page.strip().isdigit():
            page = int(page)
        return Criterion(item.get("file"), page, item.get("text"))
    if not isinstance(item, str):
        raise InvalidArgument(f"A relevance entry is text or an object, got {item!r}.")
    item = item.strip()
    if item.lower().startswith("text:"):
        return Criterion(text=item[5:].strip())
    m = _PAGE.match(item)
    if m:
        return Criterion(m["file"].strip(), int(m["page"]))
    return Criterion(item)


def parse_relevant(cell: str | Sequence[Any]) -> list[Criterion]:
    """The alternatives of one question: a ``;``-separated cell, or a JSON list. Raises
    ``InvalidArgument`` when there are none."""
    items = [p for p in cell.split(";") if p.strip()] if isinstance(cell, str) else list(cell)
    crits = [parse_criterion(i) for i in items]
    if not crits:
        raise InvalidArgument("no relevant file, page or text given")
    return list(dict.fromkeys(crits))


#: What separates the alternatives of an expected-answer cell: a ``|`` with whitespace (or the cell's
#: edge) on both sides, so an answer may hold a bare ``|`` (a closure's ``|x| x + 1``).
EXPECTED_SEPARATOR = re.compile(r"(?:^|\s)\|(?=\s|$)")


def parse_expected(cell: Any) -> tuple[str, ...]:
    """The expected answer strings of one question: a cell with alternatives between `` | ``
    (:data:`EXPECTED_SEPARATOR`), or a JSON string or list of strings; ``()`` for none (``None``,
    a blank cell, ``[]``). Whitespace runs become one space; repeats are dropped.

    Raises:
        InvalidArgument: another type, a list holding something else than text, or a cell that is
            only separators (``" | "``).
    """
    if cell is None:
        return ()
    if isinstance(cell, str):
        if not cell.strip():
            return ()
        items = EXPECTED_SEPARATOR.split(cell.strip())
    elif isinstance(cell, list) and all(isinstance(x, str) for x in cell):
        items = cell
    else:
        raise InvalidArgument(f"the expected answer is text (alternatives between ' | ') or a list of text, got {cell!r}")
    out = tuple(dict.fromkeys(" ".join(x.split()) for x in items if x.strip()))
    if not out and cell:
        raise InvalidArgument(f"the expected answer {cell!r} holds no text between its separators")
    return out


@dataclass(frozen=True, slots=True)
class Question:
    """A question, the places that answer it (any one is enough) and, optionally, ``expected``:
    strings an answer to it should hold (any one is enough; the answer check of
    :mod:`knowledge.evaluation.answers`)."""

    text: str
    relevant: tuple[Criterion, ...]
    expected: tuple[str, ...] = ()

    def relevant_label(self) -> str:
        return "; ".join(c.label() for c in self.relevant)

    def is_relevant(self, hit: Hit) -> bool:
        return any(c.matches(hit) for c in self.relevant)


@dataclass(frozen=True, slots=True)
class QuestionSet:
    """A named question set and the file format it came in (``tsv``, ``csv`` or ``jsonl``)."""

    name: str
    questions: tuple[Question, ...]
    format: str = "tsv"
    created: datetime | None = None
    updated: datetime | None = None

    @property
    def has_expected(self) -> bool:
        """Whether any question has expected answer strings (the set can check answers)."""
        return any(q.expected for q in self.questions)

    @property
    def sha256(self) -> str:
        """A hash of the questions, their relevance and expected answers: runs on the same content
        share it (a set without expected answers hashes as before they existed)."""
        data = [
            [q.text, [c.data() for c in q.relevant], *([list(q.expected)] if q.expected else [])] for q in self.questions
        ]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _question(text: Any, relevant: Any, where: str, expected: Any = None) -> Question:
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument(f"{where}: the question is empty")
    try:
        return Question(
            " ".join(text.split()), tuple(parse_relevant(relevant if relevant is not None else "")), parse_expected(expected)
        )
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}: {exc}") from None


def _is_header(row: Sequence[str]) -> bool:
    names = [c.strip().lower() for c in row]
    return (
        len(row) >= 2
        and names[0] in ("question", "query")
        and any(n in ("relevant", "answer", "answers", "files", "file") for n in names[1:])
    )


def parse_questions(data: bytes | str, file_name: str = "questions.tsv") -> tuple[str, list[Question]]:
    """Parse a question file: ``(format, questions)``. The format comes from the name's extension
    (``.tsv``/``.txt`` tab-separated, ``.csv``, ``.jsonl``/``.json``), else from the content.

    Raises:
        InvalidArgument: not UTF-8, no questions, or bad lines -- the message names each bad line
            (the first 10) and nothing is kept.
    """
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidArgument(f"{file_name} is not UTF-8 text.") from None
    else:
        text = data.removeprefix("\ufeff")
    ext = PurePath(file_name).suffix.lower()
    fmt = {
        ".tsv": "tsv",
        ".txt": "tsv",
        ".tab": "tsv",
        ".csv": "csv",
        ".jsonl": "jsonl",
        ".json": "jsonl",
        ".ndjson": "jsonl",
    }.get(ext)
    if fmt is None:
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        fmt = "jsonl" if first.lstrip().startswith("{") else "tsv" if "\t" in first else "csv"
    questions: list[Question] = []
    errors: list[str] = []
    if fmt == "jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise InvalidArgument(f'line {n}: expected an object {{"question": ..., "relevant": ...}}')
                questions.append(_question(obj.get("question"), obj.get("relevant"), f"line {n}", obj.get("expected")))
            except json.JSONDecodeError as exc:
                errors.append(f"line {n}: not JSON ({exc.msg})")
            except InvalidArgument as exc:
                errors.append(str(exc))
    else:
        reader = csv.reader(io.StringIO(text), delimiter="\t" if fmt == "tsv" else ",")
        exp_col: int | None = None  # the header's "expected" column, if it names one
        for i, row in enumerate(reader):
            n = reader.line_num
            if i == 0 and _is_header(row):
                names = [c.strip().lower() for c in row]
                exp_col = names.index("expected") if "expected" in names else None
                continue
            if not any(c.strip() for c in row):
                continue
            expected = None
            if exp_col is not None:
                expected = row[exp_col] if exp_col < len(row) else ""
                row = [c for j, c in enumerate(row) if j != exp_col]
            if len(row) < 2:
                sep = "a tab" if fmt == "tsv" else "a comma"
                errors.append(
                    f"line {n}: expected question{' <TAB> ' if fmt == 'tsv' else ', '}relevant ({sep} between them)"
                )
                continue
            try:
                questions.append(_question(row[0], ";".join(c for c in row[1:] if c.strip()), f"line {n}", expected))
            except InvalidArgument as exc:
                errors.append(str(exc))
    if errors:
        more = f" (and {len(errors) - 10} more)" if len(errors) > 10 else ""
        raise InvalidArgument(f"{file_name}: " + "; ".join(errors[:10]) + more + ". Nothing was kept.")
    if not questions:
        raise InvalidArgument(f"{file_name} has no questions: one per line, question<TAB>relevant.")
    if len(questions) > MAX_QUESTIONS:
        raise InvalidArgument(f"{file_name} has {len(questions)} questions; at most {MAX_QUESTIONS}.")
    return fmt, questions


def export_questions(qset: QuestionSet, fmt: str | None = None) -> tuple[bytes, str, str]:
    """The set as a file in its format (or ``fmt``): ``(bytes, file name, media type)``. Parsing the
    bytes with :func:`parse_questions` gives the same questions back."""
    fmt = fmt or qset.format
    if fmt == "jsonl":
        lines = [
            json.dumps(
                {
                    "question": q.text,
                    "relevant": [c.label() if c.text is None else c.data() for c in q.relevant],
                    **({"expected": list(q.expected)} if q.expected else {}),
                },
                ensure_ascii=False,
            )
            for q in qset.questions
        ]
        return ("\n".join(lines) + "\n").encode(), f"{qset.name}.jsonl", "application/jsonl"
    if fmt not in ("tsv", "csv"):
        raise InvalidArgument(f"Unknown format {fmt!r}; use tsv, csv or jsonl.")
    if any(c.text is not None and ";" in c.text for q in qset.questions for c in q.relevant):
        raise InvalidArgument("A text snippet holds ';', which separates alternatives in TSV and CSV: export as JSONL.")
    if any(EXPECTED_SEPARATOR.search(e) for q in qset.questions for e in q.expected):
        raise InvalidArgument(
            "An expected answer holds ' | ', which separates alternatives in TSV and CSV: export as JSONL."
        )
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
    expected = qset.has_expected
    writer.writerow(["question", "relevant", *(["expected"] if expected else [])])
    for q in qset.questions:
        writer.writerow([q.text, q.relevant_label(), *([" | ".join(q.expected)] if expected else [])])
    return out.getvalue().encode(), f"{qset.name}.{fmt}", "text/tab-separated-values" if fmt == "tsv" else "text/csv"


def questions_from_rows(rows: Iterable[dict[str, Any]]) -> list[Question]:
    """Questions from table rows ``{"question": ..., "relevant": "a.md; b.md", "expected": "x | y"}``
    (the app's editor; ``expected`` optional); blank rows are skipped. Raises ``InvalidArgument``
    naming each bad row (1-based)."""
    out, errors = [], []
    for n, row in enumerate(rows, 1):
        text, rel = row.get("question"), row.get("relevant")
        if not (isinstance(text, str) and text.strip()) and not (isinstance(rel, str) and rel.strip()):
            continue
        try:
            exp = row.get("expected")
            out.append(
                _question(text, rel if isinstance(rel, str) else "", f"row {n}", exp if isinstance(exp, str) else None)
            )
        except InvalidArgument as exc:
            errors.append(str(exc))
    if errors:
        raise InvalidArgument("; ".join(errors[:10]) + ". Nothing was saved.")
    if not out:
        raise InvalidArgument("The set has no questions.")
    return out


def parse_typed_questions(text: str) -> list[Question]:
    """Questions typed in the app, one a line: ``question | relevant; relevant`` (a tab works as the
    ``|``); relevant as in a question file (``file.md``, ``report.pdf#page=3``, ``text:a snippet``).
    Blank lines and lines starting with ``#`` are skipped.

    Raises:
        InvalidArgument: a line without ``|`` or without a relevant place, or no question at all --
            the message names each bad line (the first 10); nothing is kept.
    """
    rows, errors = [], []
    for n, raw in enumerate((text or "").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        question, sep, relevant = line.replace("\t", "|").partition("|")
        if not sep or not relevant.strip():
            errors.append(
                f"line {n}: give the file, page or text that answers it after a '|' ({question.strip()[:60]!r} | file.md)"
            )
            continue
        rows.append((n, question, relevant))
    out = []
    for n, question, relevant in rows:
        try:
            out.append(_question(question, relevant, f"line {n}"))
        except InvalidArgument as exc:
            errors.append(str(exc))
    if errors:
        raise InvalidArgument("; ".join(errors[:10]) + ". Nothing was saved.")
    if not out:
        raise InvalidArgument("Type at least one question: 'question | file.md'.")
    return out


__all__ = [
    "EXPECTED_SEPARATOR",
    "FORMATS",
    "MAX_QUESTIONS",
    "Criterion",
    "Question",
    "QuestionSet",
    "QuestionSetNotFound",
    "export_questions",
    "parse_criterion",
    "parse_expected",
    "parse_questions",
    "parse_relevant",
    "parse_typed_questions",
    "questions_from_rows",
]
