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

File names get one rule more, at every door a file comes in by -- the REST upload, the app's
upload, CLI ingest, folder sync, a web page's URL -- through :func:`clean_file_name` (which the file
store's ``clean_name`` and the Indexer call): control characters are removed (a tab or newline a
copied name carried), the invisible characters that carry nothing in a name (:data:`INVISIBLE`:
zero-width space, word joiner, byte-order mark, soft hyphen, ...) are removed too -- a person
cannot see them, so "report\u200b.pdf" is stored as the "report.pdf" they see and find -- and the
bidirectional controls are refused with the character named: they change what the name *looks*
like, which no silent fix can undo.
"""

from __future__ import annotations

import unicodedata

from knowledge.errors import InvalidArgument

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: The bidirectional embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069).
BIDI_CONTROLS = _BIDI


def shown(text: str) -> str:
    """``text`` with each bidirectional control written as ``[U+202E]``: a person sees it instead of
    its effect (it would reorder what follows it on the line: a refused name ``invoice\u202egpj.md``
    shown in its own error line turns the line round). Everything else is kept as it is."""
    if not any(ch in _BIDI for ch in text):
        return text
    return "".join(f"[U+{ord(ch):04X}]" if ch in _BIDI else ch for ch in text)


#: Invisible format characters (Unicode category Cf) taken out of a file name: they carry nothing a
#: name needs and make two names that look the same differ. U+00AD SOFT HYPHEN, U+200B ZERO WIDTH
#: SPACE, U+2060 WORD JOINER, U+2061-U+2064 the invisible mathematical operators, U+206A-U+206F the
#: deprecated shaping and digit controls, U+FEFF the byte-order mark (ZERO WIDTH NO-BREAK SPACE),
#: U+FFF9-U+FFFB the interlinear annotation controls (they hide the text between them). Kept: the
#: zero-width (non-)joiner U+200C/U+200D and the marks U+200E/U+200F/U+061C, which words and emoji
#: in many scripts need.
INVISIBLE = frozenset(
    "\u00ad\u200b\u2060\u2061\u2062\u2063\u2064\ufeff\ufff9\ufffa\ufffb" + "".join(map(chr, range(0x206A, 0x2070)))
)
_KINDS = {
    "Cc": "a control character",
    "Cs": "an unpaired surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


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
            raise InvalidArgument(
                f"The {what} contains {bad} at position {i + 1}: {name!r}. Names may hold no"
                " control characters, line separators or bidirectional controls."
            )
    return name


def clean_file_name(name: str) -> str:
    """A file name as it is kept: control characters (Cc) and :data:`INVISIBLE` characters
    removed, an unpaired surrogate (Cs: no UTF-8 for it) made U+FFFD, all else as given. Not
    checked here: length, emptiness (the file store's ``clean_name`` does that).

    Raises:
        InvalidArgument: a bidirectional control (U+202A-U+202E, U+2066-U+2069) or a line or
            paragraph separator (U+2028/U+2029), named in words: ``"The file name contains U+202E
            RIGHT-TO-LEFT OVERRIDE, an invisible control character that can disguise a name's
            extension ('invoice\u202efdp.exe' shows as 'invoiceexe.pdf'), at position 8:
            'invoice\u202efdp.exe'. Rename the file without it."``
    """
    out = []
    for i, ch in enumerate(name):
        cat = unicodedata.category(ch)
        if cat == "Cc" or ch in INVISIBLE:
            continue
        if cat == "Cs":
            out.append("\ufffd")
            continue
        if ch in _BIDI or cat in ("Zl", "Zp"):
            what = f"U+{ord(ch):04X} {unicodedata.name(ch, '')}, " + (
                "an invisible control character that can disguise a name's extension ('invoice\\u202efdp.exe'"
                " shows as 'invoiceexe.pdf')"
                if ch in _BIDI
                else "which breaks the name over two lines"
            )
            raise InvalidArgument(
                f"The file name contains {what}, at position {i + 1}: {name!r}. Rename the file without it."
            )
        out.append(ch)
    return "".join(out)


def without_refused(text: str) -> str:
    """``text`` without the characters a name may not hold: for a name *made* from text (a chat's
    title from its first message), where refusing would refuse the message."""
    return "".join(ch for ch in text if bad_character(ch) is None)


__all__ = ["INVISIBLE", "bad_character", "check_name", "clean_file_name", "without_refused"]
