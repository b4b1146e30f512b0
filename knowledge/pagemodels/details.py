"""A file's details as the Stores page edits them: a title and typed attribute rows.

The details are the file's attributes (:mod:`knowledge.attributes`, the REST API's ``attributes``):
the title is the attribute ``title`` (a string; front matter's ``title:`` lands there too), shown
as its own field; every other attribute is a row ``{"key", "type", "value"}`` with ``type`` one of
:data:`TYPES` and ``value`` as typed (text). :func:`rows_of` makes the rows of saved attributes,
:func:`attributes_of` the attributes to save from the edited rows, checked with the API's limits
(16 keys, keys of 1-64 characters, strings of at most 512), errors in words; :func:`attribute_filter`
reads chat's sidebar filter. Saving goes through
:meth:`knowledge.workbench.Workbench.set_file_attributes`, as the API's edit does.

Who may read the file (access per document): :data:`READER_CHOICES` -- everyone who may read the
store (the file inherits its sharing: readers ``None``) or only the people and groups picked
(``"user:<username>"``, ``"group:<name>"``); :func:`reader_options` and :func:`reader_label` make the
pick list, :func:`readers_of` the readers to save with
:meth:`knowledge.workbench.Workbench.set_file_readers`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from knowledge.attributes import PREFIX, Scalar, check_attributes
from knowledge.errors import InvalidArgument
from knowledge.pagemodels.playground import parse_fields, parse_scalar
from knowledge.people.policy import parse_readers

TITLE = "title"
TYPES = ("text", "number", "true/false")
_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}
#: Who may read a file, as the editor offers it: the store's sharing (inherited), or only those picked.
EVERYONE_CHOICE = "Everyone who may read the store"
ONLY_CHOICE = "Only these people and groups"
READER_CHOICES = (EVERYONE_CHOICE, ONLY_CHOICE)


def type_of(value: Any) -> str:
    """The row type of a saved value: ``"true/false"`` (bool), ``"number"`` (int, float), else ``"text"``."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "number"
    return "text"


def rows_of(attributes: Mapping[str, Any]) -> tuple[str, list[dict[str, str]]]:
    """``(title, rows)`` of saved attributes: the ``title`` attribute (``""``: none) and the others
    as ``{"key", "type", "value"}`` rows sorted by key, values as text (``true``/``false`` for booleans)."""
    title = attributes.get(TITLE)
    rows = [
        {"key": k, "type": type_of(v), "value": (str(v).lower() if isinstance(v, bool) else str(v))}
        for k, v in sorted(attributes.items())
        if k != TITLE
    ]
    return (str(title) if title is not None else ""), rows


def typed(key: str, kind: str | None, value: Any) -> Scalar:
    """One row's value as its type says (``None`` type: ``text``).

    Raises:
        InvalidArgument: a number that does not read as one (or is not finite), a true/false that is
        neither, an unknown type -- each naming the key.
    """
    kind = kind or "text"
    text = "" if value is None else str(value).strip() if kind != "text" else str(value)
    if kind == "text":
        return text
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise InvalidArgument(f"The value of {key!r} should be a number (like 3 or 2.5), got {text!r}.") from None
        if not math.isfinite(number):
            raise InvalidArgument(f"The value of {key!r} should be a finite number, got {text!r}.")
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    if kind == "true/false":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InvalidArgument(f"The value of {key!r} should be true or false, got {text!r}.")
    raise InvalidArgument(f"The type of {key!r} should be one of {', '.join(TYPES)}, got {kind!r}.")


def attributes_of(title: str | None, rows: Iterable[Mapping[str, Any]]) -> dict[str, Scalar]:
    """The attributes to save from the editor: ``title`` (stripped; blank: none) and the rows (a
    row with a blank key and a blank value is skipped: an empty added row). Keys are stripped.

    Raises:
        InvalidArgument: in words -- a value without a key, a key given twice, a key ``title`` among
        the rows, a bad value for its type, or the API's limits (:func:`knowledge.attributes.check_attributes`:
        at most 16 keys with the title, keys of 1-64 characters, text of at most 512).
    """
    out: dict[str, Scalar] = {}
    name = (title or "").strip()
    if name:
        out[TITLE] = name
    for n, row in enumerate(rows, 1):
        key = str(row.get("key") or "").strip()
        value = row.get("value")
        if not key:
            if value is None or not str(value).strip():
                continue
            raise InvalidArgument(f"Row {n} has a value but no key: give it a name (like 'team').")
        if key == TITLE:
            raise InvalidArgument("The title has its own field above; remove the row 'title'.")
        if key in out:
            raise InvalidArgument(f"The key {key!r} is given twice; keep one row.")
        out[key] = typed(key, row.get("type"), value)
    return check_attributes(out)


def attribute_filter(text: str | None) -> dict[str, Any]:
    """Chat's sidebar filter: ``key = value`` lines of file attributes (as the playground's fields,
    :func:`knowledge.pagemodels.playground.parse_fields`; ``team = docs``, ``year = 2024``) as the
    ``where`` of a search -- each key as its payload field ``attr_<key>`` (a key already written
    ``attr_team`` is kept). ``{}`` for blank text.

    Raises:
        InvalidArgument: a badly written line, in words.
    """
    fields = parse_fields(text)
    return {(k if k.startswith(PREFIX) else PREFIX + k): v for k, v in fields.items()}


def filter_text(where: Mapping[str, Any]) -> str:
    """The lines :func:`attribute_filter` reads back into ``where`` (``attr_`` dropped, values as JSON
    where they are not plain text)."""
    lines = []
    for k, v in where.items():
        key = k[len(PREFIX) :] if k.startswith(PREFIX) else k
        lines.append(f"{key} = {v if isinstance(v, str) and parse_scalar(v) == v else json.dumps(v)}")
    return "\n".join(lines)


def choice_of(readers: Iterable[str] | None) -> str:
    """The editor's choice for saved ``readers``: :data:`EVERYONE_CHOICE` for ``None`` (inherits the
    store's sharing), else :data:`ONLY_CHOICE`."""
    return EVERYONE_CHOICE if readers is None else ONLY_CHOICE


def reader_options(usernames: Iterable[str], groups: Iterable[str], current: Iterable[str] | None = None) -> list[str]:
    """The principals to pick from: ``"group:<name>"`` of each group (sorted), then ``"user:<username>"``
    of each account (sorted), then any of the ``current`` readers neither holds (an account or group
    gone since), so that what is saved can always be shown."""
    options = [f"group:{g}" for g in sorted(groups)] + [f"user:{u}" for u in sorted(usernames)]
    return options + [r for r in current or () if r not in options]


def reader_label(principal: str, display_names: Mapping[str, str]) -> str:
    """A principal in a pick list: ``"👥 group hr"``, ``"👤 Ana Lima (ana)"`` (``display_names``:
    username -> display name; the username alone when it has none, or the same)."""
    kind, _, name = principal.partition(":")
    if kind == "group":
        return f"👥 group {name}"
    shown = display_names.get(name) or name
    return f"👤 {shown}" + (f" ({name})" if shown != name else "")


def readers_of(choice: str | None, picked: Iterable[str] | None) -> tuple[str, ...] | None:
    """The readers to save from the editor: ``None`` for :data:`EVERYONE_CHOICE` (the file inherits
    the store's sharing), else the principals ``picked`` (``"user:<username>"``, ``"group:<name>"``),
    in their order, each once.

    Raises:
        InvalidArgument: :data:`ONLY_CHOICE` with nobody picked (saving it would open the file to
        everyone), a choice that is neither, a principal badly written -- in words.
    """
    if choice is None or choice == EVERYONE_CHOICE:
        return None
    if choice != ONLY_CHOICE:
        raise InvalidArgument(f"Who may read the file is one of {', '.join(READER_CHOICES)}; got {choice!r}.")
    chosen = [p for p in picked or () if isinstance(p, str) and p.strip()]
    if not chosen:
        raise InvalidArgument(f"Choose at least one person or group who may read this file, or choose '{EVERYONE_CHOICE}'.")
    readers = parse_readers(chosen)
    assert readers is not None  # "everyone" is no option of the picker
    return readers


__all__ = [
    "EVERYONE_CHOICE",
    "ONLY_CHOICE",
    "READER_CHOICES",
    "TITLE",
    "TYPES",
    "attribute_filter",
    "attributes_of",
    "choice_of",
    "filter_text",
    "reader_label",
    "reader_options",
    "readers_of",
    "rows_of",
    "type_of",
    "typed",
]
