"""What the pages share: one-time messages that survive a rerun (flash), sizes and durations in
words, the distances a template may use.

A flash message is set before ``st.rerun()`` and shown once, where the page calls :func:`flash` with
the same key, on the next run::

    set_flash(f"files:{store}", True, f"Deleted {name}.")
    st.rerun()
    ...
    flash(f"files:{store}")   # st.success("Deleted ...") once, then gone
"""

from __future__ import annotations

import streamlit as st

from knowledge.vectorstore.base import DISTANCES as _DISTANCES

#: The distances a store may compare embeddings by (:data:`knowledge.vectorstore.base.DISTANCES`).
DISTANCES: list[str] = list(_DISTANCES)

_PREFIX = "flash:"


def set_flash(key: str, ok: bool, msg: str) -> None:
    """Keep ``msg`` for the next run, to show once where :func:`flash` is called with ``key``:
    as a success (``ok``) or an error."""
    st.session_state[_PREFIX + key] = (bool(ok), msg)


def has_flash(key: str) -> bool:
    """Whether a message waits under ``key`` (for a section drawn only when there is something to say)."""
    return st.session_state.get(_PREFIX + key) is not None


def flash(key: str) -> None:
    """Show, once, the message kept under ``key`` by :func:`set_flash` (nothing when there is none)."""
    msg = st.session_state.pop(_PREFIX + key, None)
    if msg:
        (st.success if msg[0] else st.error)(msg[1])


def megabytes(n: int | float | None, digits: int = 3) -> float | None:
    """``n`` bytes in MB (10^6 bytes), rounded to ``digits`` decimals, for a table column;
    ``None`` when the size is unknown."""
    return None if n is None else round(n / 1e6, digits)


def human_size(n: int | float | None) -> str:
    """``n`` bytes in words with one decimal: ``"1.2 GB"``, ``"3.4 MB"``, ``"5.6 kB"``, ``"12 B"``
    (decimal units, 1 kB = 1000 bytes); ``"?"`` when unknown."""
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def duration(seconds: float) -> str:
    """A span of time in words, rounded as a person would say it: ``"45 s"`` (under 90 s, at least
    1 s), ``"3 min"``, ``"1 h 20 min"``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


__all__ = ["DISTANCES", "duration", "flash", "has_flash", "human_size", "megabytes", "set_flash"]
