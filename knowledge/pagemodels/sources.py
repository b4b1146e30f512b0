"""The Sources page's model: what it shows of sources and their runs, and the settings its forms
give, without Streamlit.

A form is built from a kind's :attr:`~knowledge.sources.base.Source.fields` (:func:`inputs`: one
:class:`FieldInput` each, a secret one never pre-filled -- its placeholder says whether a value is
set) and read back by :func:`config_of` (a blank secret left out, so the one kept stays; a blank
plain setting cleared). The other options are text a person types: globs one per line
(:func:`globs_of`), a size limit in MB (:func:`max_bytes_of`), a schedule in minutes, 0 for by hand
(:func:`every_of`), readers as ``group:hr, user:ana`` (:func:`readers_of`). The tables are
:func:`overview_rows` (one row per source), :func:`run_rows` (a source's runs) and
:func:`item_rows` (a run's files, failed ones first, each with its reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.errors import InvalidArgument
from knowledge.sources.base import Field, Source
from knowledge.sources.engine import RunItem, RunRecord, SourcePlan, SourceRecord
from knowledge.sources.shown import counts_text, schedule, when

#: A run's status as the page shows it.
STATUS_LABEL = {
    "queued": "⏳ queued",
    "running": "⏳ running",
    "done": "✅ done",
    "failed": "❌ failed",
    "cancelled": "⏹️ cancelled",
}
#: A change as the page shows it.
ACTION_LABEL = {
    "added": "➕ added",
    "changed": "✏️ changed",
    "renamed": "🔀 renamed",
    "deleted": "🗑️ deleted",
    "readers": "👥 readers",
    "unchanged": "♻️ unchanged",
}
#: The largest size limit the form takes, in MB.
MAX_MB = 100_000.0


@dataclass(frozen=True)
class FieldInput:
    """One input of a source's form: the kind's :class:`~knowledge.sources.base.Field` and the value
    to show (``value``: text, a whole number or ``None``, true/false; ``""`` for a secret, always)
    and ``placeholder`` (a secret: ``"set: leave empty to keep it"`` when the source has one)."""

    field: Field
    value: Any
    placeholder: str = ""

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def label(self) -> str:
        """The label, with `` *`` after a required setting's."""
        return self.field.label + (" *" if self.field.required else "")

    @property
    def help(self) -> str:
        words = self.field.help
        if self.field.kind == "list":
            words = (words + " " if words else "") + "One per line."
        if self.field.secret:
            words = (words + " " if words else "") + "Kept encrypted; never shown again."
        return words


def inputs(cls: type[Source], rec: SourceRecord | None = None) -> list[FieldInput]:
    """The inputs of ``cls``'s settings, filled from ``rec`` (editing) or the defaults (adding). A
    secret's value is ``""`` whatever is kept: its placeholder says whether one is set."""
    out = []
    for f in cls.fields:
        if f.secret:
            has = rec is not None and f.name in rec.secrets_set
            out.append(FieldInput(f, "", "set: leave empty to keep it" if has else ""))
            continue
        value = rec.config.get(f.name, f.default) if rec is not None else f.default
        if f.kind == "list":
            shown: Any = "\n".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value or "")
        elif f.kind == "int":
            shown = int(value) if value not in (None, "") else None
        elif f.kind == "bool":
            shown = bool(value) if not isinstance(value, str) else value.strip().lower() in ("1", "true", "yes", "on")
        else:
            shown = "" if value is None else str(value)
        out.append(FieldInput(f, shown))
    return out


def config_of(cls: type[Source], values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings to save from the form's ``values`` (by setting name): a blank secret left out
    (the one kept stays; a new source has none), a blank plain setting as ``""`` (cleared), a whole
    number as ``int``, the rest as typed (the engine checks and converts them)."""
    config: dict[str, Any] = {}
    for f in cls.fields:
        if f.name not in values:
            continue
        value = values[f.name]
        if f.secret:
            if value:
                config[f.name] = value
            continue
        if f.kind == "int":
            config[f.name] = int(value) if value not in (None, "") else ""
        elif f.kind == "bool":
            config[f.name] = bool(value)
        else:
            config[f.name] = "" if value is None else str(value)
    return config


def globs_of(text: str) -> list[str]:
    """Globs typed one per line (blank lines left out)."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def globs_text(globs: Iterable[str]) -> str:
    return "\n".join(globs)


def max_bytes_of(mb: float | None) -> int | None:
    """A size limit typed in MB (10^6 bytes) as bytes; ``None`` (the default limit) for blank or 0.

    Raises:
        InvalidArgument: below 0 or above :data:`MAX_MB`."""
    if mb is None or mb == 0:
        return None
    if not 0 < mb <= MAX_MB:
        raise InvalidArgument(f"The size limit is in MB, between 0 and {MAX_MB:,.0f}; got {mb}.", param="max_bytes")
    return max(1, round(mb * 1_000_000))


def mb_of(max_bytes: int | None) -> float | None:
    """A size limit in bytes as the form shows it, in MB; ``None`` for none of its own."""
    return None if max_bytes is None else round(max_bytes / 1_000_000, 3)


def every_of(minutes: int | float | None) -> int | None:
    """A schedule typed in minutes; ``None`` (by hand) for blank or 0."""
    return int(minutes) if minutes else None


def readers_of(text: str) -> str | None:
    """Readers typed as ``group:hr, user:ana``; ``None`` (the store's sharing) for blank."""
    return (text or "").strip() or None


def readers_text(readers: Iterable[str] | None) -> str:
    return ", ".join(readers) if readers is not None else ""


def overview_rows(
    records: Iterable[SourceRecord], last: Mapping[str, RunRecord | None], where: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One row per source: name, kind, store, location, schedule, last run (its status, when it
    ended or started in UTC, its counts in words)."""
    rows = []
    for r in records:
        run = last.get(r.name)
        at = (run.finished or run.started or run.queued) if run is not None else None
        rows.append(
            {
                "source": r.name,
                "kind": r.kind,
                "store": r.store,
                "location": where.get(r.name, ""),
                "schedule": schedule(r),
                "last run": STATUS_LABEL.get(run.status, run.status) if run is not None else "never run",
                "when": when(at),
                "counts": counts_text(run.counts) if run is not None and run.counts else "",
            }
        )
    return rows


def run_rows(runs: Iterable[RunRecord]) -> list[dict[str, Any]]:
    """A source's runs as table rows, in the order given (newest first)."""
    return [
        {
            "queued": r.queued,
            "by": "schedule" if r.cause == "schedule" else "hand",
            "status": STATUS_LABEL.get(r.status, r.status),
            "finished": r.finished,
            "counts": counts_text(r.counts) if r.counts else "",
            "reason": r.reason or "",
        }
        for r in runs
    ]


def run_label(run: RunRecord) -> str:
    """A run in a pick list: ``"✅ done · 2026-05-01 14:03 UTC · 2 added"``."""
    parts = [STATUS_LABEL.get(run.status, run.status), when(run.finished or run.started or run.queued)]
    if run.counts:
        parts.append(counts_text(run.counts))
    return " · ".join(p for p in parts if p)


def failed_first(items: Iterable[RunItem]) -> list[RunItem]:
    """A run's files, the failed ones first, each group in the run's order."""
    return sorted(items, key=lambda i: (i.ok, i.seq))


def said(item: RunItem) -> str:
    """A file's outcome in words without the file's path in front (the table names the file)."""
    return item.message.removeprefix(f"{item.path}: ")


def item_rows(items: Iterable[RunItem]) -> list[dict[str, Any]]:
    """A run's files as table rows, failed ones first: outcome, change, file, the path it had
    (a rename), and the outcome in words (a failed file's reason)."""
    return [
        {
            "outcome": "✅ ok" if i.ok else "❌ failed",
            "change": ACTION_LABEL.get(i.action, i.action),
            "file": i.path,
            "was": i.old_path or "",
            "message": said(i),
        }
        for i in failed_first(items)
    ]


def plan_rows(plan: SourcePlan) -> list[dict[str, str]]:
    """A dry run's changes as table rows (``unchanged`` left out)."""
    return [
        {"change": ACTION_LABEL.get(i.action, i.action), "file": i.path, "was": i.old_path or ""}
        for i in plan.items
        if i.action != "unchanged"
    ]


__all__ = [
    "ACTION_LABEL",
    "MAX_MB",
    "STATUS_LABEL",
    "FieldInput",
    "config_of",
    "every_of",
    "failed_first",
    "globs_of",
    "globs_text",
    "inputs",
    "item_rows",
    "max_bytes_of",
    "mb_of",
    "overview_rows",
    "plan_rows",
    "readers_of",
    "readers_text",
    "run_label",
    "run_rows",
    "said",
]
