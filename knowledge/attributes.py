"""File attributes: a file's own key/value metadata, searchable by filter.

One representation everywhere (the Markdown reader's front matter and the OpenAI-compatible API's
``attributes`` alike): each chunk of a file carries the file's attributes as flat payload fields
``attr_<key>`` (``attr_author``, ``attr_year``), values JSON scalars -- ``str``, ``int``, ``float``
or ``bool``. Flat fields work with every backend's equality filter (``where={"attr_author": "Ana"}``)
and survive re-embedding with the rest of the payload. A file's attributes are therefore read back
from any of its chunks (:func:`from_payload`).

Limits follow OpenAI's Vector Stores API (``attributes`` of a vector store file): at most 16 keys,
a key at most 64 characters, a string value at most 512 characters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from knowledge.errors import InvalidArgument

PREFIX = "attr_"
MAX_KEYS = 16
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 512

Scalar = str | int | float | bool


def check_attributes(attributes: Any) -> dict[str, Scalar]:
    """``attributes`` validated: a mapping of at most 16 ``str`` keys (1-64 characters) to ``str``
    (at most 512 characters), finite ``int``/``float`` or ``bool`` values. ``None`` is ``{}``.

    Raises:
        InvalidArgument: what was expected and what was got.
    """
    if attributes is None:
        return {}
    if not isinstance(attributes, Mapping):
        raise InvalidArgument(f"attributes must be an object of key -> value, got {type(attributes).__name__}.")
    if len(attributes) > MAX_KEYS:
        raise InvalidArgument(f"attributes may have at most {MAX_KEYS} keys, got {len(attributes)}.")
    out: dict[str, Scalar] = {}
    for key, value in attributes.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            raise InvalidArgument(f"An attribute key must be a string of 1-{MAX_KEY_CHARS} characters, got {key!r}.")
        if isinstance(value, str):
            if len(value) > MAX_VALUE_CHARS:
                raise InvalidArgument(f"attributes[{key!r}] is {len(value)} characters; at most {MAX_VALUE_CHARS}.")
        elif isinstance(value, bool):
            pass
        elif isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise InvalidArgument(f"attributes[{key!r}] must be a finite number, got {value!r}.")
        else:
            raise InvalidArgument(f"attributes[{key!r}] must be a string, number or boolean, got {value!r}.")
        out[key] = value
    return out


def to_payload(attributes: Mapping[str, Scalar]) -> dict[str, Scalar]:
    """``{"author": "Ana"}`` -> ``{"attr_author": "Ana"}``: the payload fields a chunk carries."""
    return {PREFIX + k: v for k, v in attributes.items()}


def from_payload(payload: Mapping[str, Any]) -> dict[str, Scalar]:
    """The file attributes held in a chunk's payload (or a ``Hit.metadata``): ``attr_<key>`` fields
    without the prefix."""
    return {k[len(PREFIX) :]: v for k, v in payload.items() if k.startswith(PREFIX) and len(k) > len(PREFIX)}


__all__ = ["MAX_KEYS", "PREFIX", "check_attributes", "from_payload", "to_payload"]
