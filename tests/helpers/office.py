"""The office corpus's expectations (../shared/corpus/office/expectations.tsv, see its README) and
its matching rule: NFC, runs of ASCII whitespace collapsed to one space, a case-sensitive substring;
``a || b`` alternatives, any one suffices."""

from __future__ import annotations

import collections
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

_WS = re.compile(r"[ \t\n\r\f\v]+")
_PASSWORD = re.compile(r"password '([^']+)'")


@dataclass(frozen=True)
class Expectation:
    format: str
    file: str
    kind: str  # present, absent, password
    text: str
    note: str

    @property
    def password(self) -> str | None:
        """The password a ``password`` row's note names (Tika's tests use ``tika``)."""
        m = _PASSWORD.search(self.note)
        return m.group(1) if m else None

    def holds(self, normalised_text: str) -> bool:
        hit = any(normalise(a) in normalised_text for a in self.text.split(" || ") if a)
        return not hit if self.kind == "absent" else (hit or (self.kind == "password" and not self.text))


def normalise(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFC", text))


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}.get(m.group(1), m.group(0)), s)


def load(folder: Path) -> list[Expectation]:
    lines = (folder / "expectations.tsv").read_text(encoding="utf-8").split("\n")
    cols = lines[0].split("\t")
    out = []
    for line in lines[1:]:
        if line:
            r = dict(zip(cols, [_unescape(x) for x in line.split("\t")]))
            out.append(Expectation(r["format"], r["file"], r["kind"], r["expected_text"], r.get("note", "")))
    return out


def table(results: list[tuple[Expectation, bool]]) -> str:
    """A per-format table: present found, absent kept out, password files read."""
    agg: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e, ok in results:
        agg[e.format][e.kind + ("_ok" if ok else "_n")] += 1
    rows = ["| format | present found | absent kept out | password read |", "|---|---|---|---|"]

    def cell(c: collections.Counter, kind: str) -> str:
        n = c[kind + "_ok"] + c[kind + "_n"]
        return f"{c[kind + '_ok']}/{n}" if n else "–"

    total: collections.Counter = collections.Counter()
    for fmt in sorted(agg):
        rows.append(f"| {fmt} | {cell(agg[fmt], 'present')} | {cell(agg[fmt], 'absent')} | {cell(agg[fmt], 'password')} |")
        total.update(agg[fmt])
    rows.append(f"| **all** | {cell(total, 'present')} | {cell(total, 'absent')} | {cell(total, 'password')} |")
    return "\n".join(rows)
