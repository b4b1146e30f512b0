"""How the surfaces (the Sources page, ``knowledge source``, the REST API, MCP) show a source, in
one place: where it is, its schedule, its settings with the secret ones as "set" or "not set" (never
a value), a run's counts in words, and a kind as its settings form.

Nothing here reads a secret: a source's location is asked of its plugin over the settings that are
not secret (:meth:`Source.location <knowledge.sources.base.Source.location>` names no credential).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from knowledge.config import Settings
from knowledge.sources.base import Field, Source, SourceContext
from knowledge.sources.engine import ACTIONS, RunRecord, SourceRecord

#: How a secret setting with a value is shown (its value never is).
SET = "set"
#: How a secret setting without a value is shown.
NOT_SET = "not set"
#: The order a run's counts are said in: the plan's actions, then what failed and what was left out.
COUNT_ORDER = (*ACTIONS, "failed", "skipped")


def location(cls: type[Source] | None, rec: SourceRecord, settings: Settings) -> str:
    """Where ``rec``'s files are, in words and without credentials (``smb://files/team``): its
    plugin's :meth:`~knowledge.sources.base.Source.location` over the settings that are not secret
    (defaults filled in). When the kind does not load or the plugin cannot say without its secrets,
    the plain settings as ``key=value`` (``"host=files, share=team"``), else the kind's name."""
    if cls is not None:
        config = {f.name: f.default for f in cls.fields if f.default is not None and not f.secret}
        config.update(rec.config)
        # a plugin that needs its secrets to be made (S3's keys) gets a stand-in: location() names none
        config.update({f.name: "set" for f in cls.fields if f.secret and f.name in rec.secrets_set})
        try:
            with cls(config, SourceContext(settings=settings)) as src:
                where = src.location()
            if where:
                return str(where)
        except Exception:  # a plugin that needs more than its plain settings to say: the settings then
            pass
    plain = ", ".join(f"{k}={_value_text(v)}" for k, v in rec.config.items())
    return plain or f"a {rec.kind} source"


def _value_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def minutes_text(minutes: int) -> str:
    """``90`` -> ``"1 h 30 min"``; ``30`` -> ``"30 min"``; ``1440`` -> ``"1 day"``."""
    days, rest = divmod(int(minutes), 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days} day{'s' if days != 1 else ''}"] if days else []
    parts += [f"{hours} h"] if hours else []
    parts += [f"{mins} min"] if mins else []
    return " ".join(parts) or "0 min"


def schedule(rec: SourceRecord) -> str:
    """The source's schedule in words: ``"every 30 min"``, ``"by hand"``; ``", paused"`` after it
    when paused."""
    words = f"every {minutes_text(rec.every_minutes)}" if rec.every_minutes else "by hand"
    return words + (", paused" if rec.paused else "")


def counts_text(counts: Mapping[str, int]) -> str:
    """A run's non-zero counts in the plan's order: ``"2 added, 1 renamed, 40 unchanged, 1 failed"``;
    ``"nothing changed"`` when all are zero."""
    order = [k for k in COUNT_ORDER if k in counts] + sorted(k for k in counts if k not in COUNT_ORDER)
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k)) or "nothing changed"


def when(at: datetime | None) -> str:
    """A time as the surfaces print it, in UTC (``"2026-05-01 14:03 UTC"``); ``""`` for none."""
    if at is None:
        return ""
    from datetime import UTC  # noqa: PLC0415 - small

    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return at.strftime("%Y-%m-%d %H:%M UTC")


def run_text(run: RunRecord | None) -> str:
    """A run in one line: ``"done 2026-05-01 14:03 UTC: 2 added, 40 unchanged"``, ``"failed ...:
    <reason>"``, ``"queued 2026-..."``; ``"never run"`` for none."""
    if run is None:
        return "never run"
    at = when(run.finished or run.started or run.queued)
    if run.status in ("queued", "running"):
        return f"{run.status} since {at}"
    if run.status == "failed":
        return f"failed {at}: {run.reason or 'no reason given'}"
    text = f"{run.status} {at}: {counts_text(run.counts)}"
    # a run done says its failed files in its counts; a cancelled one says why it stopped
    return text + (f" ({run.reason})" if run.reason and run.status != "done" else "")


def settings_shown(cls: type[Source] | None, rec: SourceRecord) -> list[tuple[Field, str]]:
    """Each setting of ``rec``'s kind with the value a person may see: a plain setting's value
    (its default when unset, ``""`` when neither), a secret one's :data:`SET` or :data:`NOT_SET`.
    A kind that does not load: the plain settings as kept, and the secrets set."""
    if cls is None:
        out = [(Field(k, k), _value_text(v)) for k, v in rec.config.items()]
        return out + [(Field(n, n, secret=True), SET) for n in rec.secrets_set]
    shown: list[tuple[Field, str]] = []
    for f in cls.fields:
        if f.secret:
            shown.append((f, SET if f.name in rec.secrets_set else NOT_SET))
        else:
            value = rec.config.get(f.name, f.default)
            shown.append((f, "" if value is None else _value_text(value)))
    return shown


def field_object(f: Field) -> dict[str, Any]:
    """A setting of a kind as the REST API and ``source kinds --json`` describe it."""
    return {
        "name": f.name,
        "label": f.label,
        "help": f.help,
        "kind": f.kind,
        "secret": f.secret,
        "required": f.required,
        "default": f.default,
    }


def kind_object(name: str, cls: type[Source]) -> dict[str, Any]:
    """A source kind as the REST API and ``source kinds --json`` describe it: its name, title, what
    it reads, whether readers come from its own permissions, and its settings (:func:`field_object`)."""
    return {
        "kind": name,
        "title": cls.title or name,
        "description": cls.description,
        "carries_permissions": cls.carries_permissions,
        "fields": [field_object(f) for f in cls.fields],
    }


def secret_names(cls: type[Source] | None) -> set[str]:
    """The names of ``cls``'s secret settings (none for a kind that does not load)."""
    return {f.name for f in cls.fields if f.secret} if cls is not None else set()


__all__ = [
    "COUNT_ORDER",
    "NOT_SET",
    "SET",
    "counts_text",
    "field_object",
    "kind_object",
    "location",
    "minutes_text",
    "run_text",
    "schedule",
    "secret_names",
    "settings_shown",
    "when",
]
