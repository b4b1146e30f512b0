"""The document viewer's address: one stable, shareable URL per file and passage.

``viewer_url(store, file_id, start=, end=, page=)`` is the app-relative link every citation and
search hit opens (``view?store=…&file=…&start=…&end=…``); :func:`parse_viewer_query` reads it back
from the page's query parameters. The viewer page itself (``pages/viewer.py``) renders what the
rest of this module computes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from knowledge.errors import InvalidArgument
from knowledge.vectorstore.store import Hit

#: The viewer page's ``url_path`` in ``app.py``'s navigation.
VIEWER_PATH = "view"


@dataclass(frozen=True, slots=True)
class ViewerTarget:
    """What a viewer URL asks for: the ``file_id`` in ``store``, and optionally the passage
    ``[start, end)`` (character offsets into the file's extracted text, as a chunk's
    ``char_start``/``char_end``) and the ``page`` (1-based) to open at."""

    store: str
    file_id: str
    start: int | None = None
    end: int | None = None
    page: int | None = None


def viewer_url(store: str, file_id: str, *, start: int | None = None, end: int | None = None,
               page: int | None = None) -> str:
    """The viewer's app-relative URL for ``file_id`` in ``store`` (``view?store=…&file=…``), with the
    passage ``[start, end)`` and the ``page`` when given; parameters are URL-encoded, so any store
    name round-trips through :func:`parse_viewer_query`."""
    query: dict[str, str | int] = {"store": store, "file": file_id}
    if start is not None and end is not None:
        query |= {"start": start, "end": end}
    if page is not None:
        query["page"] = page
    return f"{VIEWER_PATH}?{urlencode(query)}"


def hit_viewer_url(store: str, hit: Hit) -> str:
    """The viewer URL of a search hit: its file, its characters and its page."""
    return viewer_url(store, hit.file_id, start=hit.char_start, end=hit.char_end, page=hit.page)


def _int(params: Mapping[str, str], key: str, low: int) -> int | None:
    raw = params.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise InvalidArgument(f"The link's {key} is not a whole number: {raw!r}.") from None
    if value < low:
        raise InvalidArgument(f"The link's {key} must be at least {low}, not {value}.")
    return value


def parse_viewer_query(params: Mapping[str, str]) -> ViewerTarget:
    """The :class:`ViewerTarget` of a viewer URL's query parameters (``st.query_params``).

    Raises:
        InvalidArgument: no ``store`` or ``file``, a number that is not a whole number or is
            negative, or an ``end`` before its ``start`` (the sentence says which).
    """
    store, file_id = params.get("store") or "", params.get("file") or ""
    if not store or not file_id:
        raise InvalidArgument("This viewer link names no file: it needs both store= and file=.")
    start, end, page = _int(params, "start", 0), _int(params, "end", 0), _int(params, "page", 1)
    if (start is None) != (end is None):
        start = end = None
    if start is not None and end is not None and end < start:
        raise InvalidArgument(f"The link's passage ends ({end}) before it starts ({start}).")
    return ViewerTarget(store, file_id, start, end, page)
