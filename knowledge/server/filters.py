"""OpenAI's attribute filters (comparison and compound), checked once and handed to the search as a
predicate on hits (:class:`SearchFilter`: ``keep``, plus the string equalities the backend can apply
itself as ``where``).

The shapes are those of OpenAI's Vector Stores search (``filters``)::

    {"type": "eq", "key": "author", "value": "Ana"}               # eq ne gt gte lt lte in nin
    {"type": "and", "filters": [{...}, {"type": "or", "filters": [...]}]}

A key names a file attribute (:mod:`knowledge.attributes`), or one of the chunk's own fields:
``file_id``, ``filename``, ``page``, ``heading``, ``chunk_index``, ``char_start``, ``char_end``.
A hit without the key matches only ``ne`` and ``nin``. Order comparisons (``gt`` ...) compare
numbers with numbers and strings with strings; other pairs do not match. ``in`` / ``nin`` take a
list of scalars.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from knowledge.attributes import PREFIX
from knowledge.errors import InvalidArgument
from knowledge.vectorstore.store import Hit

COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
SETS = ("in", "nin")
COMPOUNDS = ("and", "or")
#: Keys answered by the chunk itself rather than its file's attributes.
HIT_FIELDS = ("file_id", "filename", "page", "heading", "chunk_index", "char_start", "char_end")
MAX_DEPTH = 8

Predicate = Callable[[Hit], bool]
_MISSING = object()


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def _value(hit: Hit, key: str) -> Any:
    if key == "filename":
        return hit.file_name
    if key in HIT_FIELDS:
        return getattr(hit, key)
    return hit.metadata.get(PREFIX + key, _MISSING)


def _compare(op: str, got: Any, want: Any) -> bool:
    if got is _MISSING or got is None:
        return op == "ne"
    if op in ("eq", "ne"):
        same = got == want and isinstance(got, bool) == isinstance(want, bool)
        return same if op == "eq" else not same
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (got, want))
    if not numbers and not (isinstance(got, str) and isinstance(want, str)):
        return False
    return COMPARISONS[op](got, want)


def compile_filter(spec: Any, depth: int = 0) -> Predicate:
    """A predicate on :class:`~knowledge.vectorstore.store.Hit` for an OpenAI filter object.

    Raises:
        InvalidArgument: an unknown ``type``, a missing ``key``/``value``/``filters``, a value that is
            not a scalar (a list of scalars for ``in``/``nin``), a field the filter does not take,
            nesting deeper than 8 levels.
    """
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"filters are nested deeper than {MAX_DEPTH} levels.")
    if not isinstance(spec, Mapping):
        raise InvalidArgument(f"A filter must be an object with a 'type', got {spec!r}.")
    kind = spec.get("type")
    fields = ("type", "filters") if kind in COMPOUNDS else ("type", "key", "value")
    unknown = sorted(str(k) for k in spec if k not in fields)
    if unknown and (kind in COMPOUNDS or kind in COMPARISONS or kind in SETS):
        raise InvalidArgument(f"Unrecognized field {unknown[0]!r} in a {kind!r} filter; it takes {', '.join(fields)}.")
    if kind in COMPOUNDS:
        parts = spec.get("filters")
        if not isinstance(parts, list) or not parts:
            raise InvalidArgument(f"A {kind!r} filter needs a non-empty list 'filters'.")
        compiled = [compile_filter(p, depth + 1) for p in parts]
        if kind == "and":
            return lambda h: all(f(h) for f in compiled)
        return lambda h: any(f(h) for f in compiled)
    if kind not in COMPARISONS and kind not in SETS:
        raise InvalidArgument(
            f"Unknown filter type {kind!r}; expected one of {', '.join([*COMPARISONS, *SETS, *COMPOUNDS])}."
        )
    key = spec.get("key")
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"A {kind!r} filter needs a string 'key', got {key!r}.")
    if "value" not in spec:
        raise InvalidArgument(f"A {kind!r} filter needs a 'value'.")
    want = spec["value"]
    if kind in SETS:
        if not isinstance(want, list) or not all(_scalar(v) for v in want):
            raise InvalidArgument(
                f"The value of an {kind!r} filter must be a list of strings, numbers or booleans, got {want!r}."
            )

        def member(h: Hit) -> bool:
            got = _value(h, key)
            inside = got is not _MISSING and got is not None and any(_compare("eq", got, w) for w in want)
            return inside if kind == "in" else not inside

        return member
    if not _scalar(want):
        raise InvalidArgument(f"The value of a {kind!r} filter must be a string, number or boolean, got {want!r}.")
    return lambda h: _compare(kind, _value(h, key), want)


#: The payload field of each key a backend can match by equality itself (``where``).
PAYLOAD_FIELDS = {"file_id": "file_id", "filename": "file_name"}


def equalities(spec: Mapping[str, Any]) -> dict[str, str]:
    """The string equalities every hit passing the (checked) filter ``spec`` must meet, as payload
    fields (``{"attr_team": "ops"}``): an ``eq`` on a file attribute, ``file_id`` or ``filename``,
    alone or among the parts of an ``and``. Strings only: every backend's ``where`` compares them
    exactly as :func:`compile_filter` does."""
    kind = spec.get("type")
    if kind == "and":
        out: dict[str, str] = {}
        for part in spec["filters"]:
            for field, wanted in equalities(part).items():
                out.setdefault(field, wanted)  # a second value for a field: nothing passes ``keep``
        return out
    key, value = spec.get("key"), spec.get("value")
    if kind != "eq" or not isinstance(value, str) or not isinstance(key, str):
        return {}
    if key in HIT_FIELDS:
        return {PAYLOAD_FIELDS[key]: value} if key in PAYLOAD_FIELDS else {}
    return {PREFIX + key: value}


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """An OpenAI filter as :meth:`Searcher.search <knowledge.service.search.Searcher.search>` takes it:
    ``keep``, the predicate every hit must pass, and ``where``, the equalities among it that the
    backend applies before ranking (``None`` when there are none), so a selective equality asks the
    backend for matching chunks only."""

    keep: Predicate | None = None
    where: dict[str, str] | None = None

    @classmethod
    def parse(cls, spec: Any) -> SearchFilter:
        """The filter of the request field ``filters`` (``None``: no filter).

        Raises:
            InvalidArgument: as :func:`compile_filter`.
        """
        if spec is None:
            return cls()
        return cls(compile_filter(spec), equalities(spec) or None)


__all__ = ["HIT_FIELDS", "PAYLOAD_FIELDS", "Predicate", "SearchFilter", "compile_filter", "equalities"]
