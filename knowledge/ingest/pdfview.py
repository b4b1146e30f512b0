"""PDF pages for the document viewer: a page rendered by PDFium with a passage's text boxes marked.

A chunk's characters are offsets into the reader's text (pypdf's, NFKC, hyphenated words joined,
columns reordered), which is not PDFium's text of the page character for character. :func:`locate`
finds a passage in PDFium's page text robustly (letters and digits only, case-folded, NFKC; whole,
else piece by piece), and :func:`render_page` draws the boxes PDFium gives for those characters
(``FPDFText_CountRects``/``GetRect``, one per line run) as translucent rectangles over the page
image (Pillow); a region given in PDF points (a table's box) is outlined (:data:`OUTLINE`).
Every PDFium call holds :data:`knowledge.ingest._pdfium.PDFIUM_LOCK`.
"""

from __future__ import annotations

import io
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from knowledge.errors import InvalidArgument, PasswordRequired, UnsupportedFile
from knowledge.ingest._pdfium import PDFIUM_LOCK
from knowledge.text.tables import framed_cells, is_row

#: The highlight's colour: translucent yellow (RGBA).
HIGHLIGHT = (255, 208, 0, 110)
#: A region's outline (a table the passage lies in): opaque blue (RGBA), :data:`OUTLINE_WIDTH` pixels
#: wide, over a faint blue fill (:data:`REGION_FILL`).
OUTLINE = (0, 92, 230, 255)
OUTLINE_WIDTH = 3
REGION_FILL = (0, 92, 230, 28)
#: Letters and digits per piece when a passage is not found whole (:func:`locate`).
PIECE = 24


def text_key(text: str) -> tuple[str, list[int]]:
    """``text`` reduced to what two extractions of one page agree on -- its letters and digits,
    NFKC, case-folded -- and, for each character of that key, its index in ``text``."""
    key: list[str] = []
    where: list[int] = []
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch).casefold():
            if c.isalnum():
                key.append(c)
                where.append(i)
    return "".join(key), where


def locate(haystack: str, needle: str, *, piece: int = PIECE) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of ``haystack`` (indices into it) holding ``needle``'s text,
    compared on :func:`text_key` (whitespace, punctuation, case, ligatures and hyphens ignored).

    Found whole, one span. Otherwise (the two texts order columns or lines differently) the
    needle is matched run by run: from each point, the longest run of its key found in the
    haystack's (after the previous run where it can be, else anywhere) is taken when it has at
    least ``piece // 3`` characters (8), else one character is skipped; the runs' spans are
    returned merged, in haystack order. ``[]`` when nothing of ``needle`` is found (or it has no
    letters or digits)."""
    hkey, hwhere = text_key(haystack)
    nkey, _ = text_key(needle)
    if not nkey or not hkey:
        return []
    at = hkey.find(nkey)
    if at >= 0:
        return [(hwhere[at], hwhere[at + len(nkey) - 1] + 1)]
    shortest = max(4, piece // 3)
    found: list[tuple[int, int]] = []
    i, after = 0, 0
    while i + shortest <= len(nkey):
        if nkey[i : i + shortest] not in hkey:
            i += 1
            continue
        low, high = shortest, len(nkey) - i  # the longest run from i that the haystack holds
        while low < high:
            mid = (low + high + 1) // 2
            if nkey[i : i + mid] in hkey:
                low = mid
            else:
                high = mid - 1
        run = nkey[i : i + low]
        at = hkey.find(run, after)
        if at < 0:
            at = hkey.find(run)
        found.append((hwhere[at], hwhere[at + low - 1] + 1))
        after, i = at + low, i + low
    return merge_spans(found)


def merge_spans(spans: Sequence[tuple[int, int]], gap: int = 2) -> list[tuple[int, int]]:
    """``spans`` sorted, with those overlapping or at most ``gap`` characters apart joined."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1] + gap:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


@dataclass(frozen=True, slots=True)
class PageImage:
    """One rendered page: ``number`` (1-based) of ``pages``; ``png`` its image, ``width`` x
    ``height`` pixels; ``boxes`` the marked rectangles in pixels ``(left, top, right, bottom)``;
    ``found`` whether any passage text was found on the page (PDFium's text layer); ``regions`` the
    outlined regions in pixels ``(left, top, right, bottom)``."""

    number: int
    pages: int
    png: bytes
    width: int
    height: int
    boxes: list[tuple[int, int, int, int]] = field(default_factory=list)
    found: bool = False
    regions: list[tuple[int, int, int, int]] = field(default_factory=list)


def _open(data: bytes, password: str | None):
    import pypdfium2 as pdfium  # noqa: PLC0415 - heavy (PDFium), PDFs only

    try:
        return pdfium.PdfDocument(data, password=password or None)
    except pdfium.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise PasswordRequired("this PDF is encrypted: the viewer cannot open it without its password") from exc
        raise UnsupportedFile(f"PDFium cannot open this PDF: {exc}") from exc


def page_text(textpage) -> str:
    """PDFium's text of a page, one character per PDFium character index (so index ``i`` of the
    result is character ``i`` of ``FPDFText_GetCharBox``); characters it cannot name are spaces."""
    import pypdfium2.raw as raw  # noqa: PLC0415 - heavy (PDFium), PDFs only

    n = textpage.count_chars()
    chars = []
    for i in range(n):
        code = raw.FPDFText_GetUnicode(textpage.raw, i)
        chars.append(chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else " ")
    return "".join(chars)


def render_page(
    data: bytes,
    number: int,
    passages: Sequence[str] = (),
    *,
    regions: Sequence[Sequence[float]] = (),
    password: str | None = None,
    scale: float = 1.5,
) -> PageImage:
    """Page ``number`` (1-based) of the PDF ``data`` as a PNG at ``scale`` pixels per point (1.5:
    108 dpi), with each of ``passages`` (text of this page as the reader extracted it) located in
    PDFium's text (:func:`locate`) and its boxes drawn in :data:`HIGHLIGHT`, and each of ``regions``
    (``(x0, top, x1, bottom)`` in PDF points from the page's top-left corner, as the page is shown:
    a table's box) outlined in :data:`OUTLINE`. A region is left out when it does not lie on the
    page, or when passage text was found on the page and none of it lies in the region (a box
    measured on the page turned upright, say: better no outline than one in the wrong place).

    Raises:
        InvalidArgument: ``number`` is not a page of the file (the sentence gives the count).
        PasswordRequired: the file is encrypted. UnsupportedFile: PDFium cannot open or render it.
    """
    from PIL import Image, ImageDraw  # noqa: PLC0415 - heavy (Pillow), the viewer only

    with PDFIUM_LOCK:
        pdf = _open(data, password)
        try:
            count = len(pdf)
            if not 1 <= number <= count:
                raise InvalidArgument(f"This PDF has {count} page{'' if count == 1 else 's'}; there is no page {number}.")
            page = pdf[number - 1]
            try:
                height_pt = page.get_height()
                image = page.render(scale=scale, may_draw_forms=True).to_pil().convert("RGB")
                rects: list[tuple[float, float, float, float]] = []
                if any(p.strip() for p in passages):
                    textpage = page.get_textpage()
                    try:
                        text = page_text(textpage)
                        for passage in passages:
                            for s, e in _locate_passage(textpage, text, passage, regions, height_pt):
                                rects.extend(textpage.get_rect(i) for i in range(textpage.count_rects(s, e - s)))
                    finally:
                        textpage.close()
            finally:
                page.close()
        except (InvalidArgument, PasswordRequired, UnsupportedFile):
            raise
        except Exception as exc:  # a page PDFium cannot render
            raise UnsupportedFile(f"PDFium cannot render page {number}: {exc}") from exc
        finally:
            pdf.close()
    boxes = [
        (int(left * scale), int((height_pt - top) * scale), int(right * scale) + 1, int((height_pt - bottom) * scale) + 1)
        for left, bottom, right, top in rects
    ]
    shown = _regions(regions, boxes, image.size, scale)
    if boxes or shown:
        layer = Image.new("RGBA", image.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(layer)
        for box in shown:
            draw.rectangle(box, fill=REGION_FILL)
        for box in boxes:
            draw.rectangle((box[0] - 1, box[1] - 1, box[2] + 1, box[3] + 1), fill=HIGHLIGHT)
        for box in shown:
            draw.rectangle(box, outline=OUTLINE, width=OUTLINE_WIDTH)
        image = Image.alpha_composite(image.convert("RGBA"), layer).convert("RGB")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return PageImage(number, count, out.getvalue(), image.width, image.height, boxes, bool(boxes), shown)


def _locate_passage(
    textpage, text: str, passage: str, regions: Sequence[Sequence[float]], height_pt: float
) -> list[tuple[int, int]]:
    """The spans of PDFium's page ``text`` holding ``passage``: its table rows (``| a | b |`` lines)
    row by row (:func:`locate_row`), the rest as :func:`locate` finds it."""
    rows = [line for line in passage.split("\n") if is_row(line)]
    if not rows:
        return locate(text, passage)
    prose = "\n".join(line for line in passage.split("\n") if not line.lstrip().startswith("|"))
    hkey, hwhere = text_key(text)

    placed: dict[int, tuple[float, float, float]] = {}  # each character's box asked of PDFium once

    def place(i: int) -> tuple[float, float, float]:
        """Character ``i`` of the key: its x, its y from the page's head and its height (points)."""
        if i not in placed:
            left, bottom, right, top = textpage.get_charbox(hwhere[i])
            placed[i] = ((left + right) / 2, height_pt - (top + bottom) / 2, max(top - bottom, 1.0))
        return placed[i]

    def whole(s: int, e: int) -> bool:
        """Whether key span ``[s, e)`` is whole words of the page's text (not inside a longer one)."""
        a, b = hwhere[s], hwhere[e - 1]
        return (a == 0 or not text[a - 1].isalnum()) and (b + 1 >= len(text) or not text[b + 1].isalnum())

    spans: list[tuple[int, int]] = []
    for row in rows:
        found = locate_row(hkey, framed_cells(row), place, regions, whole=whole)
        spans += [(hwhere[s], hwhere[e - 1] + 1) for s, e in found]
    return merge_spans([*spans, *(locate(text, prose) if prose.strip() else [])])


def locate_row(
    hkey: str,
    cells: Sequence[str],
    place,
    regions: Sequence[Sequence[float]] = (),
    *,
    whole=None,
    most: int = 200,
) -> list[tuple[int, int]]:
    """The spans of ``hkey`` (a page's :func:`text_key`) holding the ``cells`` of one table row, each
    cell where it stands on the same line as the others.

    A cell's text may stand on the page many times (a date, a city, a 0); a row's cells stand side
    by side. The cell found fewest times (the longest of those) anchors the row: for each of its
    places (inside a ``regions`` box when there are regions: ``(x0, top, x1, bottom)``, PDF points
    from the page's head), each other cell takes its place nearest that line, within a line's
    height; the anchor place that seats most cells wins. ``place(i)`` gives key character ``i``'s
    ``(x, y from the head, height)``; ``whole(start, end)``, when given, whether a place is whole
    words of the page (a cell "120" is not the middle of "07/21/2015"): a cell's whole places are
    weighed when it has any. At most ``most`` places of a cell are weighed. ``[]`` when no cell is
    found.
    """
    keys = sorted({k for k in (text_key(c)[0] for c in cells) if k}, key=len, reverse=True)
    places: dict[str, list[int]] = {}
    for key in keys:
        found: list[int] = []
        at = hkey.find(key)
        while at >= 0 and len(found) < most:
            found.append(at)
            at = hkey.find(key, at + 1)
        if whole is not None:
            found = [i for i in found if whole(i, i + len(key))] or found
        if found:
            places[key] = found

    def inside(i: int) -> bool:
        if not regions:
            return True
        x, y, _ = place(i)
        return any(float(r[0]) - 2 <= x <= float(r[2]) + 2 and float(r[1]) - 2 <= y <= float(r[3]) + 2 for r in regions)

    if not places:
        return []
    anchor = min(places, key=lambda k: (len(places[k]), -len(k)))
    best: list[tuple[int, int]] = []
    best_dy = 0.0
    for a in [i for i in places[anchor] if inside(i)][:most]:
        _, ya, height = place(a)
        seated = [(a, a + len(anchor))]
        dy_sum = 0.0
        for key, found in places.items():
            if key == anchor:
                continue
            near = min(((abs(place(i)[1] - ya), i) for i in found), default=None)
            if near is not None and near[0] <= height:
                seated.append((near[1], near[1] + len(key)))
                dy_sum += near[0]
        if len(seated) > len(best) or (len(seated) == len(best) and dy_sum < best_dy):
            best, best_dy = seated, dy_sum
    return sorted(best)


def _regions(
    regions: Sequence[Sequence[float]], boxes: list[tuple[int, int, int, int]], size: tuple[int, int], scale: float
) -> list[tuple[int, int, int, int]]:
    """``regions`` (PDF points, top-left origin) in pixels, a few pixels wider than the region, the
    ones not on the page (``size`` pixels) or holding none of the text ``boxes`` (when there are
    any) left out."""
    pad = OUTLINE_WIDTH + 2
    out = []
    for region in regions:
        x0, top, x1, bottom = (float(v) * scale for v in region)
        if not (x0 < x1 and top < bottom and x0 >= -pad and top >= -pad and x1 <= size[0] + pad and bottom <= size[1] + pad):
            continue
        if boxes and not any(
            x0 - pad <= (b[0] + b[2]) / 2 <= x1 + pad and top - pad <= (b[1] + b[3]) / 2 <= bottom + pad for b in boxes
        ):
            continue
        out.append(
            (
                max(0, int(x0) - pad),
                max(0, int(top) - pad),
                min(size[0] - 1, int(x1) + pad),
                min(size[1] - 1, int(bottom) + pad),
            )
        )
    return out


__all__ = ["HIGHLIGHT", "PageImage", "locate", "locate_row", "merge_spans", "page_text", "render_page", "text_key"]
