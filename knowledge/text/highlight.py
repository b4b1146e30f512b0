"""Which words of a text match a query, and the text made safe to show with those words marked.

* :func:`query_terms` / :func:`match_spans` -- the query's content words, and the spans of a text's
  words that match them (the same word in any case, or the same English stem, as the BM25 side of
  the search matches it).
* :func:`escape_markdown` / :func:`highlight` -- text made inert for Streamlit Markdown (every ASCII
  punctuation character a numeric character reference, line breaks ``<br>``), with the matching words
  in ``<mark>``; safe for ``st.markdown(..., unsafe_allow_html=True)``. The search playground's hits
  and the chat's citations use these.
* :func:`snippet` -- about ``width`` characters of a long text around the first match.

:mod:`knowledge.text.render` renders whole chunks (Markdown as HTML) with the same marking.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

from knowledge.text.analysis import analyzer

#: Words too common to highlight (English function words; anything shorter than
#: :data:`MIN_TERM_LENGTH` characters is skipped anyway).
STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours ourselves out over own same she should so
some such than that the their theirs them themselves then there these they this those through to too
under until up very was we were what when where which while who whom why will with would you your
yours yourself yourselves shall may might must let lets get got its it's don't does doesn't
""".split()
)

#: Words shorter than this are not highlighted.
MIN_TERM_LENGTH = 3

_WORD = re.compile(r"[^\W_]+", re.UNICODE)  # letters and digits of any script; "_" separates words
#: ASCII characters that mean something to Markdown, Streamlit's Markdown extensions (``:color[...]``,
#: ``$math$``, ``:emoji:``) or HTML; each becomes a numeric character reference.
SPECIAL = re.compile(r"[!-/:-@\[-`{-~]")
#: Streamlit's Markdown (GitHub's autolink literals) turns ``http://host``, ``www.host`` and
#: ``name@host`` in decoded text into links; a WORD JOINER (U+2060, shown as nothing) breaks each.
WORD_JOINER = "\u2060"
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)


# -- which words match ----------------------------------------------------------------------------
def query_terms(query: str) -> list[str]:
    """The query's content words, lowercased, longest first: runs of letters and digits (any script)
    of at least :data:`MIN_TERM_LENGTH` characters that are not :data:`STOPWORDS`. Punctuation and
    regex characters are not words, so they never reach a pattern."""
    words = {w.casefold() for w in _WORD.findall(unicodedata.normalize("NFC", query or ""))}
    terms = [w for w in words if len(w) >= MIN_TERM_LENGTH and w not in STOPWORDS]
    return sorted(terms, key=lambda w: (-len(w), w))


def _terms(query: str | Sequence[str]) -> list[str]:
    return query_terms(query) if isinstance(query, str) else [unicodedata.normalize("NFC", t) for t in query]


def match_spans(text: str, query: str | Sequence[str]) -> list[tuple[int, int]]:
    """``(start, end)`` character spans of ``text``'s words that match the query: the same word in any
    case, or a word of at least :data:`MIN_TERM_LENGTH` letters, not a stopword, with the same English
    Snowball stem (query "iterate" matches "iterating"), in text order. ``text`` is compared as given
    (normalise it to NFC first if the query may differ in form)."""
    terms = _terms(query)
    if not terms or not text:
        return []
    exact = {t.casefold() for t in terms}
    stem = analyzer().stem
    stems = set(stem(sorted(exact)))
    words = list(_WORD.finditer(text))
    folded = [m.group().casefold() for m in words]
    out = []
    for m, w, s in zip(words, folded, stem(folded)):
        if w in exact or (s in stems and len(w) >= MIN_TERM_LENGTH and w not in STOPWORDS):
            out.append(m.span())
    return out


def mark_matches(
    text: str, query: str | Sequence[str], escape: Callable[[str], str], mark: tuple[str, str] = ("<mark>", "</mark>")
) -> str:
    """``text`` with the words matching the query (:func:`match_spans`) wrapped in ``mark``; every
    piece, inside a mark or between marks, passed through ``escape`` on its own (so an escape
    sequence is never matched or split)."""
    out, pos = [], 0
    for start, end in match_spans(text, query):
        out.append(escape(text[pos:start]))
        out.append(mark[0] + escape(text[start:end]) + mark[1])
        pos = end
    out.append(escape(text[pos:]))
    return "".join(out)


# -- inert Markdown ---------------------------------------------------------------------------------
def escape_markdown(text: str, *, breaks: str = "<br>") -> str:
    """``text`` as inert Markdown/HTML: every ASCII punctuation character becomes a numeric character
    reference (so ``*``, ``_``, ``#``, ``[``, `````, ``$``, ``:``, ``<`` and ``&`` are shown, never
    interpreted) and line breaks become ``breaks`` (``<br>``: safe for ``st.markdown(...,
    unsafe_allow_html=True)``; ``"  \\n"``, a Markdown hard break, where HTML is not read). Web and
    mail addresses (``://``, ``www.``, ``@``) get an invisible :data:`WORD_JOINER`, so that
    Streamlit's Markdown does not make links of them."""
    text = _AUTOLINK.sub(WORD_JOINER, text)
    text = SPECIAL.sub(lambda m: f"&#{ord(m.group())};", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    return text.replace("\n", breaks)


def highlight(text: str, query: str | Sequence[str], *, mark: tuple[str, str] = ("<mark>", "</mark>")) -> str:
    """``text`` escaped (:func:`escape_markdown`) with the words matching the query
    (:func:`match_spans`) wrapped in ``mark``. Each piece is escaped on its own, so an escape
    sequence is never matched or split. Unicode is compared in NFC form."""
    return mark_matches(unicodedata.normalize("NFC", text or ""), query, escape_markdown, mark)


# -- snippets -------------------------------------------------------------------------------------
def _pattern(terms: Sequence[str]) -> re.Pattern[str] | None:
    if not terms:
        return None
    alternatives = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda w: (-len(w), w)))
    # A word boundary where "_" counts as punctuation, so Markdown's _emphasis_ and snake_case parts match.
    return re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])", re.IGNORECASE | re.UNICODE)


def snippet(text: str, query: str, width: int = 320) -> str:
    """At most about ``width`` characters of ``text`` around the first match of the query's content
    words (the start when none matches), cut at spaces, with ``…`` where text was left out."""
    text = " ".join(unicodedata.normalize("NFC", text or "").split())
    if len(text) <= width:
        return text
    pattern = _pattern(query_terms(query))
    m = pattern.search(text) if pattern else None
    start = 0 if m is None else max(0, m.start() - width // 4)
    end = min(len(text), start + width)
    start = max(0, min(start, end - width))
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 30 else start
    if end < len(text):
        space = text.rfind(" ", start, end)
        end = space if space > start + width // 2 else end
    return ("… " if start > 0 else "") + text[start:end] + (" …" if end < len(text) else "")


__all__ = [
    "MIN_TERM_LENGTH",
    "STOPWORDS",
    "escape_markdown",
    "highlight",
    "mark_matches",
    "match_spans",
    "query_terms",
    "snippet",
]
