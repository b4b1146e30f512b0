"""The catalog's SQL on two engines: one text, DuckDB's, translated for PostgreSQL by a few rules.

Statements (:func:`statement_for`), when they carry parameters: ``?`` placeholders outside quoted
text become ``%s`` and every literal ``%`` becomes ``%%`` (psycopg's placeholder syntax); without
parameters a statement is sent as written. ``BEGIN TRANSACTION``/``COMMIT``/``ROLLBACK``,
``ON CONFLICT``, ``RETURNING``, ``CAST(x AS VARCHAR)``, ``strpos``, ``now()`` and sequences are the
same on both engines and are not touched; SQL that differs (``INSERT OR REPLACE``, ``contains``,
``nfc_normalize``) is not used by the modules (:data:`NFC_FUNCTION` names the one that differs).

Migrations (:func:`script_for`): a block between a line ``-- [postgresql]`` (or ``-- [duckdb]``)
and a line ``-- [end]`` runs on that engine only; on PostgreSQL ``DOUBLE`` becomes ``DOUBLE
PRECISION``. Everything else (``TEXT``, ``INTEGER``, ``BIGINT``, ``JSON``, ``TIMESTAMPTZ``) is common.
"""

from __future__ import annotations

import re
from typing import Literal

Dialect = Literal["duckdb", "postgresql"]
DIALECTS: tuple[Dialect, ...] = ("duckdb", "postgresql")

#: ``{dialect: template}`` of the Unicode NFC normalisation of a column (``{}``: the column).
NFC_FUNCTION: dict[Dialect, str] = {"duckdb": "nfc_normalize({})", "postgresql": "normalize({}, NFC)"}

_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%")
_BLOCK = re.compile(r"^--\s*\[(duckdb|postgresql)\]\s*$(.*?)^--\s*\[end\]\s*$", re.MULTILINE | re.DOTALL)
_DOUBLE = re.compile(r"\bDOUBLE\b(?!\s+PRECISION)", re.IGNORECASE)


def statement_for(sql: str, dialect: Dialect) -> str:
    """``sql`` (DuckDB's, with ``?`` placeholders) for ``dialect``, when it is sent with parameters."""
    if dialect == "duckdb":
        return sql

    def swap(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return token.replace("%", "%%")  # a quoted literal: its ? stays, its % is doubled

    return _QUOTED.sub(swap, sql)


def script_for(script: str, dialect: Dialect) -> str:
    """A migration script for ``dialect``: the other engine's blocks dropped, its types renamed."""
    out = _BLOCK.sub(lambda m: m.group(2) if m.group(1) == dialect else "", script)
    if dialect == "postgresql":
        out = _DOUBLE.sub("DOUBLE PRECISION", out)
    return out


__all__ = ["DIALECTS", "NFC_FUNCTION", "Dialect", "script_for", "statement_for"]
