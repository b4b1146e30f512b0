"""Passages: a ranking's chunks as the passages a person or a model reads -- one function for every surface.

Neighbouring chunks of a file share text (the chunk overlap) or meet end to start, so one section
often comes back as two or three hits. :func:`merge_passages` turns a ranking (best first) into at
most ``k`` passages: repeated text is shown once (other files holding it are named), and, with
``merge``, chunks of one file whose character spans overlap or touch are one passage with the union
span. The search service (:meth:`knowledge.service.search.Searcher.search`) folds every search with
it (setting ``search.merge_overlapping``), so chat, the knowledge tools, the CLI, the REST API, MCP
and the search playground all show the same passages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from knowledge.vectorstore.store import Hit

#: The most chunks merged into one passage (with the default 50 % overlap: about two chunks of text).
MAX_MERGED_CHUNKS = 3


@dataclass(frozen=True, slots=True)
class HitNote:
    """What a shown passage stands for beyond its own chunk: ``chunks`` -- the chunk indexes merged
    into it (sorted; one when nothing was merged) -- and ``also_in`` -- names of other files holding
    the identical text (whitespace and case aside), in rank order."""

    chunks: tuple[int, ...]
    also_in: tuple[str, ...] = ()


def span(h: Hit) -> tuple[int, int] | None:
    """``(char_start, char_end)`` of a hit, ``None`` when it has no character span."""
    return (h.char_start, h.char_end) if h.char_start is not None and h.char_end is not None else None


def overlaps(a: Hit, b: Hit) -> bool:
    """True when ``a`` and ``b`` are chunks of one file whose spans share at least one character."""
    sa, sb = span(a), span(b)
    return a.file_id == b.file_id and sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]


def touches(a: Hit, b: Hit) -> bool:
    """True when ``a`` and ``b`` are chunks of one file whose spans overlap or meet (one's end is the
    other's start): adjacent chunks read as one passage."""
    sa, sb = span(a), span(b)
    return a.file_id == b.file_id and sa is not None and sb is not None and sa[0] <= sb[1] and sb[0] <= sa[1]


def own_text(h: Hit) -> str:
    """The part of ``h.text`` that is its span of the document: the text without the table header a
    chunk starting in a table's body repeats before its rows (``metadata["table_header"]``)."""
    header = h.metadata.get("table_header") if isinstance(h.metadata, dict) else None
    if isinstance(header, str) and header and h.text.startswith(header + "\n"):
        return h.text[len(header) + 1 :]
    return h.text


def union(a: Hit, b: Hit) -> Hit:
    """One passage of ``a`` (the better ranked, whose scores stay) and ``b``, two touching chunks of
    one file: the union span and text, the page and heading of the one that starts first. Each text
    is an exact slice of the same document (``document.text[char_start:char_end]``), after the table
    header a chunk may repeat (:func:`own_text`), so the union text is exact too: the first one's
    text (with its header, if any) and the rest of the second one's own text. The passage's
    ``table_header`` is the first one's; its ``table_bbox`` the box around those of both on the
    first one's page.

    Raises:
        ValueError: either hit has no character span.
    """
    sa, sb = span(a), span(b)
    if sa is None or sb is None:
        raise ValueError("only hits with character spans are merged (see touches)")
    (first, (start, first_end)), (second, (second_start, second_end)) = sorted([(a, sa), (b, sb)], key=lambda hs: hs[1][0])
    text = first.text
    if second_end > first_end:
        text += own_text(second)[first_end - second_start :]
    chunks = tuple(sorted({*(a.chunks or (a.chunk_index,)), *(b.chunks or (b.chunk_index,))}))
    return replace(
        a,
        text=text,
        char_start=start,
        char_end=max(first_end, second_end),
        page=first.page,
        heading=first.heading,
        chunks=chunks,
        metadata=_union_metadata(a, first, second),
    )


def _union_metadata(a: Hit, first: Hit, second: Hit) -> dict[str, Any]:
    """``a``'s metadata with the table fields of the passage ``first`` + ``second`` (see :func:`union`)."""
    meta = dict(a.metadata) if isinstance(a.metadata, dict) else {}
    if not any(key in h.metadata for h in (first, second) for key in ("table_header", "table_bbox")):
        return meta
    meta.pop("table_header", None)
    if first.metadata.get("table_header"):
        meta["table_header"] = first.metadata["table_header"]
    found = [h.metadata.get("table_bbox") for h in (first, second) if h.page == first.page]
    boxes: list[list[float]] = [b for b in found if isinstance(b, list) and len(b) == 4]
    meta.pop("table_bbox", None)
    if boxes:
        meta["table_bbox"] = [
            min(b[0] for b in boxes),
            min(b[1] for b in boxes),
            max(b[2] for b in boxes),
            max(b[3] for b in boxes),
        ]
    return meta


@dataclass(slots=True)
class _Group:
    hit: Hit
    chunks: set[int]
    also: list[str]


def merge_passages(
    found: Iterable[Hit], k: int, *, merge: bool = True, max_per_file: int | None = None
) -> tuple[list[Hit], dict[str, HitNote]]:
    """The first ``k`` passages of a ranking (``found``, best first), and their notes.

    * A hit whose text (whitespace and case aside) came earlier is not shown again; when it is in
      another file, that file's name is added to the earlier passage's ``also_in``.
    * With ``merge``, a hit whose character span overlaps or touches a shown passage of the same
      file joins it (:func:`union`): the passage keeps its rank and scores, takes the union span and
      text and the first page and heading, and ``Hit.chunks`` lists the chunks it joins; a hit
      bridging two passages joins them into the better. A passage holds at most
      :data:`MAX_MERGED_CHUNKS` chunks (a run of overlapping chunks never becomes the whole file); a
      further hit sharing text with it is a near-duplicate and is not shown, one that only touches
      it is a passage of its own.
    * ``max_per_file`` keeps at most that many passages of any one file.

    Returns:
        ``(passages, notes)`` -- at most ``k`` hits best first; ``notes`` by ``str(hit.id)``.
    """
    groups: list[_Group] = []
    seen: dict[str, _Group] = {}  # normalised text -> the group showing it
    for h in found:
        key = " ".join(h.text.split()).lower()
        if key in seen:
            g = seen[key]
            name = h.file_name or h.file_id
            if h.file_id != g.hit.file_id and name not in g.also:
                g.also.append(name)
            continue
        into = [g for g in groups if touches(g.hit, h)] if merge else []
        if into and sum(len(g.chunks) for g in into) + 1 > MAX_MERGED_CHUNKS:
            if any(overlaps(g.hit, h) for g in into):
                continue  # a near-duplicate of a passage already as long as a passage gets: not shown
            into = []
        if into:
            g = into[0]
            g.hit = union(g.hit, h)
            g.chunks.add(h.chunk_index)
            for other in into[1:]:  # h bridged two shown passages: one passage now
                g.hit = union(g.hit, other.hit)
                g.chunks |= other.chunks
                g.also += [n for n in other.also if n not in g.also]
                groups.remove(other)
                seen = {t: (g if o is other else o) for t, o in seen.items()}
            seen[key] = g
            continue
        if max_per_file is not None and sum(g.hit.file_id == h.file_id for g in groups) >= max_per_file:
            continue
        if len(groups) == k:
            break
        seen[key] = g = _Group(h, {h.chunk_index}, [])
        groups.append(g)
    out = [g.hit if len(g.chunks) > 1 else replace(g.hit, chunks=()) for g in groups]
    notes = {str(g.hit.id): HitNote(tuple(sorted(g.chunks)), tuple(g.also)) for g in groups}
    return out, notes


__all__ = ["MAX_MERGED_CHUNKS", "HitNote", "merge_passages", "overlaps", "own_text", "span", "touches", "union"]
