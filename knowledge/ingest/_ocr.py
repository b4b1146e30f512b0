"""OCR, offline: text from PDF pages without a text layer and from image files.

The engine is rapidocr-onnxruntime (PaddleOCR's PP-OCRv4 models as ONNX inside the PyPI wheel:
Latin script and Chinese; nothing is downloaded); PDF pages are rendered with pypdfium2 at
:data:`DPI`. On top of the engine: word spaces recovered from the image (:func:`recover_spaces`),
lines joined into rows and paragraphs in reading order, and every line kept whatever its confidence
(those under :data:`LOW_CONFIDENCE` named in the warnings).

The engine is loaded once per process (:func:`engine`); a platform without a wheel for it (or for
onnxruntime / OpenCV) gets :class:`~knowledge.errors.OcrUnavailable` naming the package, only for the
files that need OCR. The measures behind the thresholds and the DPI: ``docs/ingestion.md`` and
``docs/benchmarks.md``.
"""

from __future__ import annotations

import io
import itertools
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from knowledge._onnx import quiet_onnxruntime
from knowledge.errors import EmptyDocument, OcrUnavailable, UnsupportedFile, in_words, known_problem
from knowledge.ingest._pdfium import PDFIUM_LOCK
from knowledge.ingest._text import Builder, clean
from knowledge.ingest.document import Document

#: The PyPI package that does the OCR (named in errors).
OCR_PACKAGE = "rapidocr-onnxruntime"
#: Resolution PDF pages are rendered at, in dots per inch. Measured with ``bench/bench_ocr.py`` on
#: clean A4 prose: at 150, 200, 250, 300 dpi 11-pt text reads at 0.9990, 0.9990, 0.9987, 0.9987
#: character accuracy (spaces included), 9-pt text at 0.9983 (150) and 0.9990 (200); CPU time
#: 10.3, 10.6, 15.4, 13.7 s per page and memory peak 0.8, 1.1, 1.5, 2.1 GB. 200 dpi keeps small
#: print as well as anything higher, for the cost of 150.
DPI = 200
#: A line whose mean character confidence (the recognition model's softmax, in [0, 1], higher is
#: surer) is under this is kept but named in the warnings.
LOW_CONFIDENCE = 0.80
#: The engine shrinks larger images to this longest side, in pixels (its own default, 2000, would
#: shrink an A4 page rendered at 200 dpi, 1654 x 2339, and lose small print).
MAX_SIDE = 4000
#: Image files larger than this many pixels are refused (a decompression bomb, or a poster).
MAX_PIXELS = 60_000_000
#: A page read with a mean confidence under this is read again turned by 180 degrees (a scan fed
#: upside down); the better reading is kept.
UPSIDE_DOWN_BELOW = 0.6
#: The message when OCR finds nothing.
NO_TEXT_EVEN_BY_OCR = "no text found, even by OCR"

OnPage = Callable[[int, int], None]
"""``on_page(done, total)``: called before the first page (``done = 0``) and after each page OCR
reads; ``total`` is the number of pages to read by OCR in this file."""

_IMAGE_NAMES = {"PNG": "PNG", "JPEG": "JPEG", "TIFF": "TIFF", "WEBP": "WebP", "BMP": "BMP"}


@dataclass(frozen=True, slots=True)
class OcrLine:
    """One recognised line: its text (spaces recovered), mean character ``confidence`` in [0, 1]
    (higher is surer), and ``box`` = ``(x0, y0, x1, y1)`` in pixels of the image read."""

    text: str
    confidence: float
    box: tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class OcrPage:
    """What OCR read on one page or image: ``text`` (lines in reading order, ``\\n`` between rows,
    ``\\n\\n`` between paragraphs) and its ``lines``; ``seconds`` of wall time."""

    text: str
    lines: list[OcrLine] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def confidence(self) -> float | None:
        """Mean line confidence weighted by characters, in [0, 1]; ``None`` without lines."""
        weights = [max(1, len(line.text)) for line in self.lines]
        if not weights:
            return None
        return float(sum(w * line.confidence for w, line in zip(weights, self.lines)) / sum(weights))

    @property
    def low(self) -> list[OcrLine]:
        """The lines under :data:`LOW_CONFIDENCE`."""
        return [line for line in self.lines if line.confidence < LOW_CONFIDENCE]


# -- the engine -----------------------------------------------------------------------------------


class OcrEngine:
    """rapidocr-onnxruntime with our settings; :meth:`read` is serialised (the engine keeps per-call
    state, and each call already uses every core)."""

    def __init__(self) -> None:
        try:
            quiet_onnxruntime()
            from rapidocr_onnxruntime import RapidOCR  # noqa: PLC0415 - heavy (OCR models), first OCR only
        except Exception as exc:  # ImportError, or OSError from a native library (onnxruntime, cv2)
            raise OcrUnavailable(_unavailable(exc)) from exc
        try:
            self._engine = RapidOCR(max_side_len=MAX_SIDE, print_verbose=False)
        except Exception as exc:
            raise OcrUnavailable(_unavailable(exc)) from exc
        self._lock = threading.Lock()

    def read(self, image: np.ndarray) -> OcrPage:
        """OCR one image.

        Args:
            image: ``(h, w, 3)`` uint8 RGB, or ``(h, w)`` uint8 grey.

        Returns:
            The page's lines in reading order with spaces recovered (see :func:`recover_spaces`).
        """
        started = time.perf_counter()
        rgb = _as_rgb(image)
        page = self._read(rgb)
        confidence = page.confidence
        if confidence is not None and confidence < UPSIDE_DOWN_BELOW:  # a page scanned upside down?
            turned = self._read(np.ascontiguousarray(rgb[::-1, ::-1]))
            if (turned.confidence or 0.0) > confidence + 0.1:
                page = turned
        return OcrPage(page.text, page.lines, time.perf_counter() - started)

    def _read(self, rgb: np.ndarray) -> OcrPage:
        bgr = np.ascontiguousarray(rgb[:, :, ::-1])
        with self._lock:
            # Detection alone first: the detector (DB) cuts one printed line into segments at wide
            # word spaces, and each segment's box is grown (unclip) into its neighbour, so read one
            # by one they spilled a letter into each other ("MERLIN-4417 C" + "closes") and an
            # identifier cut at a segment border came out as two words. Segments of one row are
            # joined (join_segments) and recognised as one line. use_cls=False: the direction
            # classifier turned whole clean lines upside down ("Invoice total..." read as "S",
            # 0.11); a page upside down is caught in read() instead.
            found, _ = self._engine(bgr, use_det=True, use_cls=False, use_rec=False)
            if not found:
                return OcrPage("", [])
            quads = join_segments([np.asarray(q, dtype=np.float32).reshape(4, 2) for q in found])
            crops = self._engine.get_crop_img_list(bgr, quads)
            recognised = self._recognise(crops)
            boxed = self._engine.cal_rec_boxes(crops, quads, [r[:3] for r in recognised])
        gray = _gray(rgb)
        lines = []
        for quad, (_, score, _, gaps), (raw, _, boxes, chars, _) in zip(quads, recognised, boxed):
            # every line is kept (rapidocr's own text_score would drop those under 0.5): low ones
            # are marked in the warnings, not dropped
            text = raw or ""
            if clean(text, form="NFKC").strip() and len(boxes) == len(chars) == len(text):
                text = recover_spaces(gray, quad, text, boxes, chars, gaps)
            text = consistent_classes(attach_punctuation(clean(text, form="NFKC").replace("\n", " ").strip()))
            if not text:
                continue
            x0, y0 = quad.min(0)
            x1, y1 = quad.max(0)
            lines.append(OcrLine(text, max(0.0, min(1.0, float(score))), (float(x0), float(y0), float(x1), float(y1))))
        return OcrPage(layout(lines), lines)

    def _recognise(self, crops: list[np.ndarray]) -> list[tuple[str, float, list, list[float]]]:
        """The recognition model on line crops, as rapidocr's ``TextRecognizer`` runs it (batches
        of similar widths, CTC decoding with the character columns), plus for each character the
        model's probability of a space in the columns between it and the character before
        (``gaps[i]``, 0 for the first character and around a space the model wrote)."""
        rec = self._engine.text_rec
        decode = rec.postprocess_op
        space = len(decode.character) - 1  # rapidocr appends " " as the last class
        _, img_h, img_w = rec.rec_image_shape[:3]
        ratios = [c.shape[1] / float(c.shape[0]) for c in crops]
        order = np.argsort(np.array(ratios))
        out: list = [("", 0.0, [0, [], [], [], []], [])] * len(crops)
        for start in range(0, len(crops), rec.rec_batch_num):
            batch = [int(i) for i in order[start : start + rec.rec_batch_num]]
            widest = max([img_w / img_h] + [ratios[i] for i in batch])
            norm = np.concatenate([rec.resize_norm_img(crops[i], widest)[np.newaxis, :] for i in batch])
            preds = rec.session(norm.astype(np.float32))[0]
            decoded = decode(preds, True, wh_ratio_list=[ratios[i] for i in batch], max_wh_ratio=widest)
            for row, i in enumerate(batch):
                text, score, info = decoded[row]
                columns = [c for word in info[2] for c in word]
                gaps = [0.0] * len(text)
                if len(columns) == len(text):
                    for k in range(1, len(text)):
                        a, b = columns[k - 1], columns[k]
                        if b > a + 1 and not text[k].isspace() and not text[k - 1].isspace():
                            gaps[k] = float(preds[row, a + 1 : b, space].max())
                out[i] = (text, score, info, gaps)
        return out


_ENGINE: OcrEngine | None = None
_ENGINE_LOCK = threading.Lock()


def engine() -> OcrEngine:
    """The process's OCR engine, loaded on first use (~0.3-0.5 s).

    Raises:
        OcrUnavailable: rapidocr-onnxruntime (or onnxruntime / OpenCV under it) cannot be loaded.
    """
    global _ENGINE
    with _ENGINE_LOCK:
        if _ENGINE is None:
            _ENGINE = OcrEngine()
        return _ENGINE


def _unavailable(exc: BaseException) -> str:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "it could not be loaded"
    return (
        f"OCR unavailable: the package {OCR_PACKAGE} cannot be loaded on this platform ({reason});"
        f" install it with `pip install {OCR_PACKAGE}` to read scans and images"
    )


# -- segments, word spacing, character classes ------------------------------------------------------

#: Two detected segments are one line when their heights differ by less than this factor, their
#: centres are within :data:`ROW_SHARE` of a height of each other across the line, and the gap
#: between them along the line is under :data:`JOIN_GAP` x the smaller height (a word space is
#: ~0.3-0.6 em, the boxes are ~1.3-1.6 em high; a column gutter or a table cell apart is wider).
JOIN_HEIGHTS = 1.6
ROW_SHARE = 0.3
JOIN_GAP = 0.6


def join_segments(quads: list[np.ndarray]) -> list[np.ndarray]:
    """Detected boxes of one printed line joined into one box per line.

    Args:
        quads: the detector's boxes, each ``(4, 2)`` float32 pixels, clockwise from the top left.

    Returns:
        The boxes after joining (each ``(4, 2)`` float32, clockwise from the top left; the smallest
        rotated rectangle holding the joined segments), in the detector's order of their first
        segment. Vertical boxes (taller than 1.5 x their width) are never joined.

    The detector (DB) splits a line where a word space is wide and grows every box outwards, so
    neighbouring segments overlap: recognised apart, the overlap is read twice ("MERLIN-4417 C",
    "closes") and a word cut at the border falls apart. Recognised as one line, the model sees
    every letter once, with its neighbours.
    """
    n = len(quads)
    geo = [_geometry(q) for q in quads]
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(n):
        for j in range(i + 1, n):
            if _same_line(geo[i], geo[j]):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(root(i), []).append(i)
    out = []
    for members in groups.values():
        if len(members) == 1:
            out.append(quads[members[0]].astype(np.float32))
            continue
        import cv2  # noqa: PLC0415 - heavy (OpenCV, under rapidocr), OCR only

        points = np.concatenate([quads[i] for i in members]).astype(np.float32)
        out.append(_clockwise(cv2.boxPoints(cv2.minAreaRect(points))))
    return out


def _geometry(q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, bool]:
    """``(centre, unit along the line, unit across, length, height, horizontal?)`` of a box."""
    along = (q[1] - q[0] + q[2] - q[3]) / 2.0
    across = (q[3] - q[0] + q[2] - q[1]) / 2.0
    length = float(np.linalg.norm(along)) or 1.0
    height = float(np.linalg.norm(across)) or 1.0
    return q.mean(0), along / length, across / height, length, height, height < 1.5 * length


def _same_line(a: tuple, b: tuple) -> bool:
    ca, ua, va, la, ha, flat_a = a
    cb, ub, vb, lb, hb, flat_b = b
    # a speck inside a line's box (the detector finds bits of a word space) is part of that line
    if _inside(cb, ca, ua, va, la, ha) or _inside(ca, cb, ub, vb, lb, hb):
        return True
    if not (flat_a and flat_b) or max(ha, hb) > JOIN_HEIGHTS * min(ha, hb) or float(ua @ ub) < 0.995:
        return False
    d = cb - ca
    if abs(float(d @ va)) > ROW_SHARE * min(ha, hb):
        return False
    gap = abs(float(d @ ua)) - (la + lb) / 2.0  # negative when they overlap
    return gap < JOIN_GAP * min(ha, hb)


def _inside(
    point: np.ndarray, centre: np.ndarray, along: np.ndarray, across: np.ndarray, length: float, height: float
) -> bool:
    d = point - centre
    return abs(float(d @ along)) <= length / 2.0 and abs(float(d @ across)) <= height / 2.0


def _clockwise(points: np.ndarray) -> np.ndarray:
    """Four corners ordered top left, top right, bottom right, bottom left (as rapidocr does)."""
    by_x = points[np.argsort(points[:, 0], kind="stable")]
    left, right = by_x[:2], by_x[2:]
    tl, bl = left[np.argsort(left[:, 1], kind="stable")]
    tr, br = right[np.argsort(right[:, 1], kind="stable")]
    return np.array([tl, tr, br, bl], dtype=np.float32)


#: The recognition model's probability of a space (its CTC space class, the highest over the
#: columns between two characters) from which a space it did not write may be put back: at word
#: spaces it dropped it is 0.003-0.5 (narrow spacing, serif faces), inside most words under 0.001
#: -- but 0.15 after the foot of the L in "ALPHA1", 0.33 before a monospaced full stop: the model
#: alone does not decide, the gap must also be wide for its line (:func:`_spaces`).
SPACE_PROB = 0.002
#: ... this between two digits: figures are set on one width, so a "1" stands as far from its
#: neighbours as a word space does ("MERLIN-44 17", an italic "1 7" at 0.005-0.014).
SPACE_PROB_DIGITS = 0.02
#: ... and the gap without ink there at least this share of the line's ink height ...
SPACE_GAP = 0.25
#: ... and at least this share of the median gap at the spaces the model wrote on the line (a
#: monospaced face: word spaces ~1.0 of the ink height, its narrow letters 0.3-0.47 apart) ...
SPACE_SHARE = 0.7
#: ... and at least this many times the line's median gap between letters, when it has at least
#: :data:`LETTER_GAPS_KNOWN` of them (dropped spaces measured at 2.0-3.3 x, letter gaps up to 1.7 x).
LETTER_FACTOR = 1.8
LETTER_GAPS_KNOWN = 3
#: A gap without ink this wide (share of the ink height) is a word space whatever the model says.
#: The gaps between letters reach ~0.3 of the ink height (two upright strokes, "MERLIN", "In",
#: 0.2 em in DejaVu Sans against a cap height of 0.73 em), which the earlier rule (0.25, ink gaps
#: alone) took for spaces: "M ERLI N-4417", "I nvoice", "Ma rch".
SPACE_GAP_WIDE = 0.55
#: A dropped space is never put back before these, nor after an opening bracket.
_NO_SPACE_BEFORE = set(".,;:!?)]}%")
_NO_SPACE_AFTER = set("([{")
_CJK = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def recover_spaces(
    gray: np.ndarray, quad: np.ndarray, text: str, boxes: list, chars: list, gaps: list[float] | None = None
) -> str:
    """``text`` with the word spaces the recognition model dropped put back.

    Args:
        gray: the whole image, ``(h, w)`` uint8, dark text on a light ground or the reverse.
        quad: the line's detected box, ``(4, 2)`` float pixels.
        text: the recognised line.
        boxes: one box per character of ``text`` (4 points each, pixels), in reading order, as
            rapidocr's ``return_word_box`` gives them.
        chars: the characters of those boxes (must spell ``text``).
        gaps: per character of ``text``, the model's probability of a space between it and the
            previous character (:meth:`OcrEngine._recognise`); ``None``: unknown (all 0).

    A space is inserted before ``text[i]`` when the text has none there and a run of ink-free
    columns lies between the two characters' centres that is either at least :data:`SPACE_GAP_WIDE`
    x the line's ink height, or, where the model's space probability is at least
    :data:`SPACE_PROB` (:data:`SPACE_PROB_DIGITS` between digits), at least :data:`SPACE_GAP` x
    it, :data:`SPACE_SHARE` x the gaps at the spaces the model wrote on the line and
    :data:`LETTER_FACTOR` x its gaps between letters; never before closing punctuation or after an
    opening bracket. Lines that are vertical, contain CJK characters (no spaces between words
    there), have too little contrast, or whose boxes do not match the
    text are returned unchanged.
    """
    if len(chars) != len(boxes) or "".join(chars) != text or len(text) < 2 or _CJK.search(text):
        return text
    probs = list(gaps) if gaps is not None and len(gaps) == len(text) else [0.0] * len(text)
    rectified = _line_strip(gray, quad, boxes)
    if rectified is None:
        return text
    crop, centres = rectified
    lo, hi = float(crop.min()), float(crop.max())
    if hi - lo < 40:
        return text
    ink = crop < (lo + hi) / 2
    if ink.mean() > 0.5:  # light text on a dark ground
        ink = ~ink
    # the line's ink height is measured without specks (a scan's noise above and below the
    # letters made it up to half again as tall, and every gap as much narrower)
    counts = _without_specks(ink).sum(axis=1)
    rows = np.flatnonzero(counts)
    if rows.size == 0:
        return text
    height = float(rows[-1] - rows[0] + 1)
    # columns are looked at from the top of the letters down to the baseline (the last row of the
    # dense x-height band): the descenders of "j", "y", "g" reach under their neighbours and would
    # fill a word gap
    dense = np.flatnonzero(counts >= 0.35 * counts.max())
    baseline = int(dense[-1]) if dense.size else int(rows[-1])
    cols = np.asarray(ink[int(rows[0]) : baseline + 1].any(axis=0))
    if any(b < a for a, b in itertools.pairwise(centres)):
        return text
    inked = np.flatnonzero(cols)
    if inked.size == 0:
        return text
    runs: list[tuple[int, float]] = []  # (insert a space before text[i], ink-free width / height)
    start = None
    for x in range(int(inked[0]), int(inked[-1]) + 1):
        if not cols[x]:
            if start is None:
                start = x
            continue
        if start is not None:
            mid = (start + x) / 2.0
            i = next((k for k in range(1, len(centres)) if centres[k - 1] < mid < centres[k]), None)
            if i is not None:
                runs.append((i, (x - start) / height))
            start = None
    spaces = _spaces(runs, text, probs)
    if not spaces:
        return text
    return "".join((" " + ch) if i in spaces else ch for i, ch in enumerate(text))


#: Ink blobs whose box is under this share of the line box's height on both sides are specks of
#: a scan's noise (a full stop or the dot of an i at 22 px is ~0.1 of a 30-pixel box).
SPECK = 0.08


def _without_specks(ink: np.ndarray) -> np.ndarray:
    """The ink mask with its specks (see :data:`SPECK`) cleared."""
    import cv2  # noqa: PLC0415 - heavy (OpenCV, under rapidocr), OCR only

    count, labels, stats, _ = cv2.connectedComponentsWithStats(ink.astype(np.uint8), connectivity=8)
    small = SPECK * ink.shape[0]
    specks = (stats[:, cv2.CC_STAT_WIDTH] < small) & (stats[:, cv2.CC_STAT_HEIGHT] < small)
    specks[0] = False  # the ground
    return ink & ~specks[labels] if count > 1 else ink


def _line_strip(gray: np.ndarray, quad: np.ndarray, boxes: list) -> tuple[np.ndarray, list[float]] | None:
    """The line's box cut out of ``gray`` and turned level (the quad mapped onto an upright
    rectangle, as the recognition crop is), with the characters' centres along it in pixels of
    that strip; ``None`` for a box too small or upright (a vertical line).

    Measured in the image's own axes, a line skewed by a scan (1.2 degrees over a 1000-pixel line
    is 20 pixels of drift) had its ink height doubled, so every word gap looked half as wide as it
    is (0.24 of the ink height against 0.4) and the spaces the model dropped stayed dropped."""
    import cv2  # noqa: PLC0415 - heavy (OpenCV, under rapidocr), OCR only

    q = np.asarray(quad, dtype=np.float32).reshape(4, 2)
    width = round(float(max(np.linalg.norm(q[0] - q[1]), np.linalg.norm(q[3] - q[2]))))
    height = round(float(max(np.linalg.norm(q[0] - q[3]), np.linalg.norm(q[1] - q[2]))))
    if width < 4 or height < 4 or height > 1.5 * width:
        return None
    target = np.array([[0, 0], [width, 0], [width, height], [0, height]], dtype=np.float32)
    matrix = cv2.getPerspectiveTransform(q, target)
    strip = cv2.warpPerspective(gray, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    mids = np.array([[np.asarray(b, dtype=np.float64).reshape(-1, 2).mean(0) for b in boxes]], dtype=np.float32)
    centres = [float(x) for x in cv2.perspectiveTransform(mids, matrix)[0, :, 0]]
    return strip, centres


def _spaces(runs: list[tuple[int, float]], text: str, probs: list[float]) -> set[int]:
    """Where a space goes in: ``runs`` are the line's ink-free gaps as ``(i, width)`` (before
    ``text[i]``, width a share of the ink height). A gap at a space the model wrote tells the
    line's word-space width; the others are between letters, or at a space the model dropped."""
    written = sorted(w for i, w in runs if text[i - 1].isspace() or text[i].isspace())
    letters = sorted(w for i, w in runs if not (text[i - 1].isspace() or text[i].isspace()))
    floor = SPACE_GAP
    if written:
        floor = max(floor, SPACE_SHARE * written[len(written) // 2])
    if len(letters) >= LETTER_GAPS_KNOWN:
        floor = max(floor, LETTER_FACTOR * letters[len(letters) // 2])
    out = set()
    for i, width in runs:
        if text[i - 1].isspace() or text[i].isspace() or text[i] in _NO_SPACE_BEFORE or text[i - 1] in _NO_SPACE_AFTER:
            continue
        sure = SPACE_PROB_DIGITS if text[i - 1].isdigit() and text[i].isdigit() else SPACE_PROB
        if width >= SPACE_GAP_WIDE or (probs[i] >= sure and width >= floor):
            out.add(i)
    return out


_LOOSE_STOP = re.compile(r"(?<=[^\W_]) +(?=[.,](?:\s+(?![.,])|$))")


def attach_punctuation(text: str) -> str:
    """A full stop or comma that ends a token goes with the word before it ("changes ." ->
    "changes."): a monospaced face sets them in the middle of a letter's cell, and the model writes
    a space before them. A space before ".5" (a number) or between dots (". . .") stays."""
    return _LOOSE_STOP.sub("", text)


#: Glyphs that are the same shape in most faces, by the class they belong to: a vertical bar
#: (l, I, 1, |; a capital I is read as "i" too), a ring (O, 0, o), and the letters whose capital
#: is their lowercase letter drawn bigger (c, o, s, u, v, w, x, z: "ZQx" for "ZQX").
_AS_CAPITAL = {"l": "I", "i": "I", "|": "I", **{c: c.upper() for c in "cosuvwxz"}}
_AS_DIGIT = {"l": "1", "I": "1", "|": "1", "O": "0", "o": "0"}
_AS_LETTER = {"0": "o"}
#: Capitals no lowercase letter looks like (the bar I and the shape-alike C O S U V W X Z excluded).
_PLAIN_CAPITALS = set("ABDEFGHJKLMNPQRTY")
_TOKEN = re.compile(r"[^\s]+")


def consistent_classes(text: str) -> str:
    """Glyphs the model cannot tell apart given the class of the token they stand in.

    A token is all capitals when every lowercase letter in it is one that looks like a capital (a
    bar ``l``/``i``, or ``c o s u v w x z``) and it has two capitals, or one capital no lowercase
    letter looks like and three letters ("MERLlN-4417", "zQx-4471"); there those letters are the
    capitals (``l``, ``i`` -> ``I``, ``x`` -> ``X``). A run of letters and digits that is digits but
    for bars and rings ("44l7", "2O26") is all digits; one that is lowercase letters but for the
    digit 0 ("0pened", "0n") has the letter o. Mixed tokens ("iPhone", "1st", "l0", "Cm") are left
    alone: the rule is the token's own class, not a dictionary.
    """
    return _TOKEN.sub(lambda m: _fix_token(m.group()), text)


def _fix_token(token: str) -> str:
    letters = [c for c in token if c.isalpha() or c == "|"]
    capitals = [c for c in letters if c.isupper()]
    alike = all(c.isupper() or c in _AS_CAPITAL for c in letters)
    if alike and (len(capitals) >= 2 or (len(letters) >= 3 and any(c in _PLAIN_CAPITALS for c in capitals))):
        token = "".join(_AS_CAPITAL.get(c, c) for c in token)
    return _ALNUM_RUN.sub(lambda m: _fix_run(m.group()), token)


_ALNUM_RUN = re.compile(r"[^\W_]+|\|")


def _fix_run(run: str) -> str:
    """A run of letters and digits that is digits but for bars and rings (2 digits at least, or a
    digit that is not itself a ring: "5o", "9o"), or lowercase letters but for the digit 0 (a
    letter that is not a bar or a ring at least)."""
    digits = [c for c in run if c.isdigit()]
    if (len(digits) >= 2 or any(c != "0" for c in digits)) and all(c.isdigit() or c in _AS_DIGIT for c in run):
        return "".join(_AS_DIGIT.get(c, c) for c in run)
    if (
        "0" in run
        and all(c == "0" or (c.isalpha() and c.islower()) for c in run)
        and any(c.isalpha() and c not in "lio" for c in run)
    ):
        return "".join(_AS_LETTER.get(c, c) for c in run)
    return run


# -- layout ---------------------------------------------------------------------------------------


def layout(lines: list[OcrLine]) -> str:
    """Lines in reading order: boxes on one visual row joined with a space (left to right), rows
    with ``\\n``, and a blank line where the gap to the next row exceeds 0.8 x the median line
    height (a new paragraph). Single column: a page of two columns comes out row by row. Rows that
    form a table (:func:`table_runs`) come out as a Markdown table, with a blank line around it."""
    if not lines:
        return ""
    heights = sorted(line.box[3] - line.box[1] for line in lines)
    median = max(1.0, heights[len(heights) // 2])
    order = sorted(lines, key=lambda line: ((line.box[1] + line.box[3]) / 2, line.box[0]))
    rows: list[list[OcrLine]] = []
    for line in order:
        centre = (line.box[1] + line.box[3]) / 2
        if rows:
            last = rows[-1]
            top = min(item.box[1] for item in last)
            bottom = max(item.box[3] for item in last)
            if top <= centre <= bottom and centre - (top + bottom) / 2 < 0.5 * median:
                last.append(line)
                continue
        rows.append([line])
    for row in rows:
        row.sort(key=lambda item: item.box[0])
    tables = {start: (end, markdown) for start, end, markdown in table_runs(rows, median)}
    out: list[str] = []
    previous_bottom = None
    k = 0
    while k < len(rows):
        row = rows[k]
        top = min(item.box[1] for item in row)
        if previous_bottom is not None:
            out.append("\n\n" if top - previous_bottom > 0.8 * median or k in tables else "\n")
        if k in tables:
            end, markdown = tables[k]
            out.append(markdown)
            previous_bottom = -1e9  # a blank line after the table too
            k = end
            continue
        out.append(attach_punctuation(" ".join(item.text for item in row)))
        previous_bottom = max(item.box[3] for item in row)
        k += 1
    return "".join(out)


#: A row of OCR boxes is a table's row when two of its boxes stand at least this many median line
#: heights apart (cells; :func:`join_segments` already joined the boxes a word space apart).
CELL_GAP = 1.0
#: Fewest rows of such boxes in a run that make a table.
TABLE_ROWS = 3


def table_runs(rows: list[list[OcrLine]], median: float) -> list[tuple[int, int, str]]:
    """Runs of rows of OCR boxes (each row left to right) that form a table, as
    ``(first row, row after the last, Markdown table)``.

    A run is :data:`TABLE_ROWS` or more consecutive rows with boxes :data:`CELL_GAP` line heights
    apart. Its columns are the spans where the boxes of all its rows overlap across the page (boxes
    are merged into a column where their extents overlap); with two columns or more, each row
    becomes one cell per column (boxes of a row in one column joined with a space), the first row
    the header. Running text in columns (:func:`knowledge.ingest._pdftables.is_running_text`) is not a table.
    """
    from knowledge.ingest._pdftables import is_running_text, markdown_row  # noqa: PLC0415 - the tables' Markdown and rules

    def celled(row: list[OcrLine]) -> bool:
        return len(row) >= 2 and any(b.box[0] - a.box[2] >= CELL_GAP * median for a, b in itertools.pairwise(row))

    found: list[tuple[int, int, str]] = []
    k = 0
    while k < len(rows):
        if not celled(rows[k]):
            k += 1
            continue
        end = k
        while end < len(rows) and celled(rows[end]):
            end += 1
        if end - k >= TABLE_ROWS:
            table = _ocr_table(rows[k:end])
            if table is not None and not is_running_text(table):
                width = max(len(r) for r in table)
                lines = [markdown_row(r, width) for r in table]
                lines.insert(1, "| " + " | ".join(["---"] * width) + " |")
                found.append((k, end, "\n".join(lines)))
        k = end
    return found


def _ocr_table(rows: list[list[OcrLine]]) -> list[list[str]] | None:
    """The cells of rows of OCR boxes, by columns where the boxes overlap across the page; ``None``
    with fewer than two columns."""
    spans: list[list[float]] = []
    for item in sorted((item for row in rows for item in row), key=lambda item: item.box[0]):
        if spans and item.box[0] <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], item.box[2])
        else:
            spans.append([item.box[0], item.box[2]])
    if len(spans) < 2:
        return None
    table = []
    for row in rows:
        cells = [""] * len(spans)
        for item in row:
            j = next(j for j, (a, b) in enumerate(spans) if a <= item.box[0] <= b)
            text = attach_punctuation(item.text.strip())
            cells[j] = f"{cells[j]} {text}".strip() if cells[j] else text
        table.append(cells)
    return table


# -- images ---------------------------------------------------------------------------------------


def _as_rgb(image: np.ndarray) -> np.ndarray:
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim == 3 and image.shape[2] == 3:
        return image
    raise ValueError(f"an image of shape (h, w) or (h, w, 3) is needed, got {image.shape}")


def _gray(rgb: np.ndarray) -> np.ndarray:
    # ITU-R BT.601 luma, as Pillow's convert("L")
    return (rgb[:, :, 0] * 0.299 + rgb[:, :, 1] * 0.587 + rgb[:, :, 2] * 0.114).astype(np.uint8)


def pil_to_rgb(img) -> np.ndarray:
    """A Pillow image as ``(h, w, 3)`` uint8 RGB: EXIF orientation applied, transparency composed
    on white, 16-bit and CMYK converted, and shrunk (aspect kept) to at most :data:`MAX_SIDE`."""
    from PIL import Image, ImageOps  # noqa: PLC0415 - images only

    img = ImageOps.exif_transpose(img) or img
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        arr = np.asarray(img, dtype=np.float64)
        top = arr.max() or 1.0
        img = Image.fromarray((arr / top * 255).astype(np.uint8))
    elif img.mode == "F":
        arr = np.nan_to_num(np.asarray(img, dtype=np.float64))
        span = (arr.max() - arr.min()) or 1.0
        img = Image.fromarray(((arr - arr.min()) / span * 255).astype(np.uint8))
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        ground = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(ground, rgba)
    img = img.convert("RGB")
    if max(img.size) > MAX_SIDE:
        img.thumbnail((MAX_SIDE, MAX_SIDE), Image.Resampling.LANCZOS)
    return np.asarray(img, dtype=np.uint8)


def image_frames(data: bytes) -> tuple[str, int, Iterator[np.ndarray]]:
    """``(format name, frame count, frames as RGB arrays)`` of an image file (a multi-page TIFF
    has several frames; the others one).

    Raises:
        UnsupportedFile: Pillow cannot decode it, it is not PNG/JPEG/TIFF/WebP/BMP, or it is over
            :data:`MAX_PIXELS` pixels.
    """
    from PIL import Image, UnidentifiedImageError  # noqa: PLC0415 - images only

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
            img.load()
    except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
        raise UnsupportedFile(f"image too large to read: {exc}") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as exc:
        raise UnsupportedFile(f"unreadable {_magic_name(data)} image (damaged or truncated?): {_reason(exc)}") from exc
    kind = _IMAGE_NAMES.get(img.format or "")
    if kind is None:
        raise UnsupportedFile(f"unsupported: a {img.format or 'unknown'} image (OCR reads PNG, JPEG, TIFF, WebP and BMP)")
    if img.width * img.height > MAX_PIXELS:
        raise UnsupportedFile(f"image too large to read: {img.width} x {img.height} pixels (at most {MAX_PIXELS:,})")
    count = int(getattr(img, "n_frames", 1) or 1)

    def frames() -> Iterator[np.ndarray]:
        for index in range(count):
            try:
                img.seek(index)
                yield pil_to_rgb(img.copy())
            except (OSError, ValueError, EOFError) as exc:
                raise UnsupportedFile(f"unreadable image: frame {index + 1} of {count}: {_reason(exc)}") from exc

    return kind, count, frames()


def _magic_name(data: bytes) -> str:
    """The image format its first bytes announce (for messages about images Pillow cannot open)."""
    for magic, kind in (
        (b"\x89PNG", "PNG"),
        (b"\xff\xd8\xff", "JPEG"),
        (b"II*\x00", "TIFF"),
        (b"MM\x00*", "TIFF"),
        (b"BM", "BMP"),
    ):
        if data.startswith(magic):
            return kind
    return "WebP" if data[8:12] == b"WEBP" else "an"


def read_image(data: bytes, *, on_page: OnPage | None = None) -> Document:
    """OCR an image file (PNG, JPEG, TIFF -- each frame a page --, WebP, BMP) into a document
    with one section per page (``page`` 1-based) and a warning naming the OCR confidence.

    Raises:
        UnsupportedFile: the image cannot be decoded (see :func:`image_frames`).
        OcrUnavailable: the OCR package cannot be loaded.
        EmptyDocument: OCR found no text (:data:`NO_TEXT_EVEN_BY_OCR`).
    """
    kind, count, frames = image_frames(data)
    ocr = engine()
    pages: dict[int, OcrPage] = {}
    if on_page:
        on_page(0, count)
    for number, frame in enumerate(frames, start=1):
        pages[number] = ocr.read(frame)
        if on_page:
            on_page(number, count)
    builder = Builder(form="NFKC")
    for number, page in pages.items():
        start = builder.add(page.text, page=number)
        if start is not None:
            from knowledge.ingest._pdftables import markdown_tables  # noqa: PLC0415

            for s, h, e in markdown_tables(clean(page.text, form="NFKC")):
                builder.record_table(start + s, start + h, start + e, page=number)
    if builder.empty:
        raise EmptyDocument(
            f"{NO_TEXT_EVEN_BY_OCR}: {'this' if count == 1 else 'no page of this'} {kind} image"
            f"{' has' if count == 1 else ''} no text OCR can read"
        )
    return builder.build("image", empty=NO_TEXT_EVEN_BY_OCR, pages=count, warnings=ocr_warnings(pages, image=count == 1))


# -- PDF pages ------------------------------------------------------------------------------------


def render_pdf_pages(
    data: bytes, numbers: Iterable[int], *, password: str | None = None, dpi: int = DPI
) -> Iterator[tuple[int, np.ndarray]]:
    """Render PDF pages (1-based ``numbers``) with pypdfium2: ``(number, (h, w, 3) uint8 RGB)``,
    white background, annotations and form fields drawn, at ``dpi`` dots per inch.

    Raises:
        OcrUnavailable: pypdfium2 cannot be loaded.
        UnsupportedFile: pdfium cannot open the file or render a page.
    """
    try:
        import pypdfium2 as pdfium  # noqa: PLC0415 - heavy (PDFium), PDFs only
    except Exception as exc:
        raise OcrUnavailable(
            f"OCR unavailable: the package pypdfium2 (renders PDF pages for OCR) cannot"
            f" be loaded ({_reason(exc)}); install it with `pip install pypdfium2`"
        ) from exc

    try:
        with PDFIUM_LOCK:
            pdf = pdfium.PdfDocument(data, password=password or None)
    except Exception as exc:
        raise UnsupportedFile(f"pages without a text layer cannot be rendered for OCR: {_reason(exc)}") from exc
    try:
        for number in numbers:
            try:
                with PDFIUM_LOCK:  # released before the page is yielded for OCR
                    page = pdf[number - 1]
                    try:
                        bitmap = page.render(scale=dpi / 72.0, may_draw_forms=True)
                        image = bitmap.to_numpy().copy()
                        mode = bitmap.mode
                    finally:
                        page.close()
            except Exception as exc:
                raise UnsupportedFile(f"page {number} cannot be rendered for OCR: {_reason(exc)}") from exc
            yield number, _bitmap_rgb(image, mode)
    finally:
        with PDFIUM_LOCK:
            pdf.close()


def _bitmap_rgb(image: np.ndarray, mode: str) -> np.ndarray:
    """pdfium bitmaps are BGR(A/x) or grey: as ``(h, w, 3)`` RGB."""
    if image.ndim == 2 or mode == "L":
        return _as_rgb(image.reshape(image.shape[0], image.shape[1]))
    rgb = image[:, :, 2::-1] if mode in ("BGR", "BGRA", "BGRX") else image[:, :, :3]
    return np.ascontiguousarray(rgb)


def ocr_pdf_pages(
    data: bytes, numbers: list[int], *, password: str | None = None, on_page: OnPage | None = None, dpi: int = DPI
) -> dict[int, OcrPage]:
    """OCR the PDF pages ``numbers`` (1-based); pages where OCR found nothing are in the result with
    empty text. ``on_page(done, total)`` reports progress.

    Raises:
        OcrUnavailable: rapidocr-onnxruntime or pypdfium2 cannot be loaded.
        UnsupportedFile: pdfium cannot render the file.
    """
    ocr = engine()
    out: dict[int, OcrPage] = {}
    if on_page:
        on_page(0, len(numbers))
    for done, (number, image) in enumerate(render_pdf_pages(data, numbers, password=password, dpi=dpi), 1):
        out[number] = ocr.read(image)
        if on_page:
            on_page(done, len(numbers))
    return out


def ocr_missing_pages(
    data: bytes,
    pages: dict[int, str],
    problems: list[tuple[int, str]],
    marker: str,
    *,
    password: str | None = None,
    on_page: OnPage | None = None,
    dpi: int = DPI,
) -> tuple[list[tuple[int, str]], list[str]]:
    """The PDF reader's hook: OCR the pages whose problem is ``marker`` (no text layer).

    Adds the text OCR reads to ``pages`` (``{page number: text}``, NFKC-cleaned; modified in place)
    and returns ``(problems left, warnings)``: a page where OCR read nothing stays a problem ("pages
    1-3 without a text layer: no text found, even by OCR"); the warnings name the pages read and
    their confidence (:func:`ocr_warnings`). When OCR cannot run (package missing, pdfium cannot
    render the file), the pages keep their problem and a warning says why -- unless no page has
    text at all, where the error is raised (the file needs OCR to be read).

    Raises:
        OcrUnavailable, UnsupportedFile: OCR cannot run and ``pages`` is empty.
    """
    numbers = [n for n, problem in problems if problem == marker]
    if not numbers:
        return problems, []
    try:
        read = ocr_pdf_pages(data, numbers, password=password, on_page=on_page, dpi=dpi)
    except UnsupportedFile as exc:  # OcrUnavailable included
        if not pages:
            raise
        return problems, [f"{_pages_phrase(numbers)} could not be read by OCR: {exc}"]
    left = []
    for number, problem in problems:
        page = read.get(number) if problem == marker else None
        text = clean(page.text, form="NFKC") if page is not None else ""
        if page is None:
            left.append((number, problem))
        elif text.strip():
            pages[number] = text
        else:
            left.append((number, f"without a text layer: {NO_TEXT_EVEN_BY_OCR}"))
    return left, ocr_warnings({n: p for n, p in read.items() if n in pages})


def ocr_warnings(pages: dict[int, OcrPage], *, image: bool = False) -> list[str]:
    """The sentences for a file's warnings: which pages OCR read and their mean confidence ("pages
    2-5 read by OCR, confidence 0.93"; "read by OCR, confidence 0.97" for a single image), and the
    lines under :data:`LOW_CONFIDENCE` (kept in the text) with their page and confidence."""
    read = {n: p for n, p in pages.items() if p.lines}
    if not read:
        return []
    chars = sum(max(1, len(line.text)) for p in read.values() for line in p.lines)
    mean = sum(max(1, len(line.text)) * line.confidence for p in read.values() for line in p.lines) / chars
    subject = "Read" if image else f"{_pages_phrase(sorted(read))} read"
    out = [f"{subject} by OCR, confidence {mean:.2f}"]
    low = [(n, line) for n, p in read.items() for line in p.low]
    if low:
        shown = "; ".join(
            f'{"" if image else f"p. {n}: "}"{_short(line.text)}" ({line.confidence:.2f})' for n, line in low[:5]
        )
        more = f"; and {len(low) - 5} more" if len(low) > 5 else ""
        out.append(
            f"{len(low)} line{'s' if len(low) != 1 else ''} read by OCR with low confidence"
            f" (under {LOW_CONFIDENCE:.2f}, kept; check them): {shown}{more}"
        )
    return out


def _pages_phrase(numbers: list[int]) -> str:
    """``"page 3"``, ``"pages 2-5"``, ``"pages 1, 3, 5-7"``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs]
    plural = len(numbers) > 1
    return f"{'pages' if plural else 'page'} {', '.join(parts)}"


def _short(text: str, limit: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(exc: BaseException) -> str:
    """What went wrong in words: :func:`~knowledge.errors.known_problem`, else the library's own
    message, else :func:`~knowledge.errors.in_words` (never the exception's class name)."""
    return known_problem(exc) or " ".join(str(exc).split()) or in_words(exc)


__all__ = [
    "DPI",
    "LOW_CONFIDENCE",
    "NO_TEXT_EVEN_BY_OCR",
    "OCR_PACKAGE",
    "OcrEngine",
    "OcrLine",
    "OcrPage",
    "attach_punctuation",
    "consistent_classes",
    "engine",
    "image_frames",
    "join_segments",
    "layout",
    "ocr_missing_pages",
    "ocr_pdf_pages",
    "ocr_warnings",
    "read_image",
    "recover_spaces",
    "render_pdf_pages",
]
