"""The one rule for the names people give -- stores, templates, chat titles, agent-memory datasets,
LLM configs, files: characters that make a name unusable or display other than it is spelled are
refused, with the character named by its code point.

Refused: control characters (Unicode category Cc: NUL, tab, newline, DEL, the C1 range) -- a NUL
left a store listed that no backend could open; unpaired surrogates (Cs: no UTF-8 for them);
the line and paragraph separators U+2028/U+2029 (they break a name over lines); and the
bidirectional embedding, override and isolate controls U+202A-U+202E, U+2066-U+2069, which reorder
what is displayed ("invoice\\u202efdp.exe" shows as "invoiceexe.pdf"; CVE-2021-42574, "Trojan
Source"). Other format characters (Cf) are kept: the zero-width joiner builds emoji sequences and
Persian words, the left-to-right and right-to-left marks (U+200E/U+200F) only steer neutral
characters and belong to names written in Arabic or Hebrew, the soft hyphen is invisible.
"""

from __future__ import annotations

import unicodedata

from knowledge.errors import InvalidArgument

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_KINDS = {"Cc": "a control character", "Cs": "an unpaired surrogate", "Zl": "a line separator",
          "Zp": "a paragraph separator"}


def bad_character(name: str) -> str | None:
    """The first character ``name`` may not hold, described (``"a control character (U+0000)"``,
    ``"a bidirectional override (U+202E RIGHT-TO-LEFT OVERRIDE)"``), or ``None`` when it is fine."""
    for ch in name:
        cat = unicodedata.category(ch)
        kind = _KINDS.get(cat) or ("a bidirectional control" if ch in _BIDI else None)
        if kind:
            label = unicodedata.name(ch, "") if cat != "Cs" else ""
            return f"{kind} (U+{ord(ch):04X}{' ' + label if label else ''})"
    return None


def check_name(name: str, what: str) -> str:
    """``name`` unchanged when it holds no refused character (see the module docstring).

    Raises:
        InvalidArgument: ``"The store name contains a control character (U+0000) at position 2:
            'a\\x00b'. ..."`` -- ``what`` says which name (``"store name"``).
    """
    if not isinstance(name, str):
        return name
    for i, ch in enumerate(name):
        bad = bad_character(ch)
        if bad:
            raise InvalidArgument(f"The {what} contains {bad} at position {i + 1}: {name!r}. Names may hold no"
                                  " control characters, line separators or bidirectional controls.")
    return name


def without_refused(text: str) -> str:
    """``text`` without the characters a name may not hold: for a name *made* from text (a chat's
    title from its first message), where refusing would refuse the message."""
    return "".join(ch for ch in text if bad_character(ch) is None)


__all__ = ["bad_character", "check_name", "without_refused"]
