"""OCR benchmark: pages/s, character accuracy and memory peak per rendering resolution.

The input is built here: pages of known English prose (with numbers, amounts and punctuation) set
in Helvetica at 11 pt (and 9 pt, small print) by fpdf2, then flattened to images at 300 dpi into a
PDF without a text layer -- a clean scan. Each resolution runs in a subprocess of its own, so the
memory peak (``ru_maxrss``: the process's resident set, ONNX Runtime's native buffers included) is
that resolution's alone. Per resolution:

* pages/s of ``ocr_pdf_pages`` (pdfium rendering + detection + recognition + word spacing), the
  engine already loaded (its load time is printed apart);
* character accuracy = 1 - Levenshtein distance / length of the true text, both with whitespace
  runs collapsed to one space (spaces count: "Invoicetotal" for "Invoice total" is one error);
  the target is >= 0.98 for clean 11-pt text;
* the same without the word-spacing recovery (``recover_spaces`` switched off), in the same run;
* as baselines measured in the same run: reading the text layer of the original PDF with pypdf
  (what OCR replaces), and the ratio of each resolution's pages/s to the chosen one's
  (``knowledge.ingest._ocr.DPI``).

Usage: ``python bench/bench_ocr.py [--dpis 150,200,250,300] [--pages 2]`` (9-pt text only up to the
chosen resolution). Prints figures; never
fails on a miss.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import re
import resource
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCES = [
    "Invoice total: 1,234.56 EUR due on 12 March 2026.",
    "The harbour master records every ship that enters the port before noon.",
    "Payment reference ZQX-4471 must be quoted on every transfer.",
    "Our quarterly audit found 17 discrepancies, most of them under 50 dollars.",
    "The committee meets on the first Tuesday of each month at 9:30 in room 214.",
    "Please return the signed contract by Friday; late copies cannot be accepted.",
    "Shipping weight was 42.7 kg, and the crate measured 120 x 80 x 95 cm.",
    "The lighthouse keeper trimmed the wick at midnight and again at dawn.",
    "Temperatures fell to -12 degrees, so the pipes in block C froze twice.",
    "According to section 4.2, the tenant pays for water, heating and repairs.",
    "A refund of 89.90 EUR was issued to account DE44 5001 0517 5407 3249 31.",
    "Bread needs flour, water, salt and yeast; the dough rests overnight.",
    "The new library opens at 8 a.m. and closes at 6 p.m. on weekdays.",
    "Order 2026-0315 contains 3 chairs, 1 table and 12 glasses (fragile).",
    "Minutes were taken by J. Smith and approved without changes.",
]


def prose(seed: int, n: int = 22) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(SENTENCES) for _ in range(n))


def make_pdfs(pages: int, size: float) -> tuple[bytes, bytes, str]:
    """``(text PDF, scanned PDF without a text layer, the true text)``."""
    import pypdfium2 as pdfium
    from fpdf import FPDF
    from PIL import Image

    pdf = FPDF(format="A4")
    pdf.set_font("Helvetica", size=size)
    texts = []
    for p in range(pages):
        pdf.add_page()
        text = prose(p)
        texts.append(text)
        pdf.multi_cell(w=0, h=size * 0.5, text=text)
    text_pdf = bytes(pdf.output())
    doc = pdfium.PdfDocument(text_pdf)
    images = [Image.fromarray(doc[i].render(scale=300 / 72).to_numpy()[:, :, 2::-1]) for i in range(len(doc))]
    buf = io.BytesIO()
    images[0].save(buf, "PDF", resolution=300, save_all=True, append_images=images[1:])
    return text_pdf, buf.getvalue(), " ".join(texts)


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions cost 1), one numpy row at a time."""
    if len(a) < len(b):
        a, b = b, a
    bv = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    prev = np.arange(len(b) + 1, dtype=np.int64)
    for i, ch in enumerate(a, 1):
        sub = prev[:-1] + (bv != ord(ch))
        cur = np.empty_like(prev)
        cur[0] = i
        cur[1:] = np.minimum(prev[1:] + 1, sub)
        # deletions along the row: cur[j] = min(cur[j], cur[j-1] + 1), a running minimum
        cur = np.minimum.accumulate(cur - np.arange(len(cur))) + np.arange(len(cur))
        prev = cur
    return int(prev[-1])


def accuracy(got: str, truth: str) -> float:
    got, truth = norm(got), norm(truth)
    return max(0.0, 1.0 - levenshtein(got, truth) / max(1, len(truth)))


def one(dpi: int, pages: int, size: float, spaces: bool) -> dict:
    """Run in a subprocess: one resolution, fresh process."""
    from knowledge.ingest import _ocr

    _, scan, truth = make_pdfs(pages, size)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    _ocr.engine()
    load = time.perf_counter() - t0
    if not spaces:
        _ocr.recover_spaces = lambda gray, quad, text, boxes, chars, gaps=None: text
    _ocr.ocr_pdf_pages(scan, [1], dpi=dpi)  # warm-up: first-call allocations
    t0, c0 = time.perf_counter(), _cpu()
    read = _ocr.ocr_pdf_pages(scan, list(range(1, pages + 1)), dpi=dpi)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    got = " ".join(read[n].text for n in sorted(read))
    conf = float(np.mean([p.confidence or 0.0 for p in read.values()]))
    return {
        "dpi": dpi,
        "size": size,
        "spaces": spaces,
        "pages": pages,
        "seconds": seconds,
        "cpu_s": cpu,
        "pages_per_s": pages / seconds,
        "accuracy": accuracy(got, truth),
        "confidence": conf,
        "load_s": load,
        "rss_before_mb": rss0 / 1024,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _cpu() -> float:
    """CPU seconds of this process, all threads (ONNX Runtime's included): less sensitive than wall
    time to other work on a shared machine."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def text_layer_baseline(pages: int, size: float) -> float:
    """pages/s reading the original PDF's text layer (pypdf, through our reader)."""
    from knowledge.ingest import read_document

    text_pdf, _, _ = make_pdfs(pages, size)
    t0 = time.perf_counter()
    for _ in range(5):
        read_document(text_pdf, "text.pdf")
    return 5 * pages / (time.perf_counter() - t0)


# -- words: rendered lines of several fonts and sizes (issue 27) ------------------------------------

FONTS = {
    "DejaVu Sans": "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "DejaVu Serif": "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf",
    "DejaVu Sans Mono": "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "Liberation Sans": "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "Liberation Serif": "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf",
}
SIZES = (24, 32, 40, 56)  # pixels at 200 dpi: 8.6, 11.5, 14.4 and 20 pt
LINES = [
    "Reference MERLIN-4417 closes the account.",
    "Invoice INV-2026-0042 is due on 12 March 2026.",
    "Due date: 12 March 2026",
    "Invoice 4711 for order 2026-0315, total 1,234.56 EUR.",
    "Minutes were taken by J. Smith and approved without changes.",
    "The harbour master records every ship that enters the port.",
    "Payment reference ZQX-4471 must be quoted on every transfer.",
    "Shipping weight was 42.7 kg; the crate measured 120 x 80 cm.",
    "Illinois, Minnesota and Mississippi lie along the river.",
    "Ticket HELP-1109 was opened on 3 April 2025 at 09:30.",
]


def page_of_lines(font_path: str, px: int) -> tuple[np.ndarray, str]:
    """An A4 page at 200 dpi (1654 x 2339 px) with :data:`LINES` set in the font at ``px`` pixels,
    wrapped to the page's width; ``(RGB image, the true text)``."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(font_path, px)
    width, height, margin = 1654, 2339, 120
    rows: list[str] = []
    for line in LINES:
        row = ""
        for word in line.split():
            trial = f"{row} {word}".strip()
            if row and font.getlength(trial) > width - 2 * margin:
                rows.append(row)
                row = word
            else:
                row = trial
        rows.append(row)
    img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    for i, row in enumerate(rows):
        draw.text((margin, margin + i * px * 2), row, fill="black", font=font)
    return np.asarray(img), " ".join(rows)


def word_matches(got: str, truth: str) -> int:
    """Reference words matched exactly (a longest common subsequence of the two word lists)."""
    a, b = got.split(), truth.split()
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def baseline_read(rgb: np.ndarray) -> str:
    """The assembly before issue 27, kept here as the baseline: rapidocr's own pipeline (each
    detected segment recognised apart) and word spaces from ink gaps alone."""
    from knowledge.ingest import _ocr

    eng = _ocr.engine()
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    with eng._lock:
        result, _ = eng._engine(bgr, return_word_box=True, text_score=0.0, use_cls=False)
    gray = _ocr._gray(rgb)
    lines = []
    for item in result or []:
        quad, text, score = item[0], item[1], float(item[2])
        text = _ocr.clean(text or "", form="NFKC").replace("\n", " ").strip()
        if not text:
            continue
        q = np.asarray(quad, dtype=np.float32).reshape(-1, 2)
        if len(item) > 4:
            text = old_recover_spaces(gray, q, text, item[3], item[4])
        x0, y0 = q.min(0)
        x1, y1 = q.max(0)
        lines.append(_ocr.OcrLine(text, score, (float(x0), float(y0), float(x1), float(y1))))
    return _ocr.layout(lines)


_CJK = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def old_recover_spaces(gray: np.ndarray, quad: np.ndarray, text: str, boxes: list, chars: list) -> str:
    """The spacing rule before issue 27: ink gaps alone, 0.25 (digits 0.36) of the ink height."""
    if len(chars) != len(boxes) or "".join(chars) != text or len(text) < 2 or _CJK.search(text):
        return text
    x0, y0 = np.floor(quad.min(0)).astype(int)
    x1, y1 = np.ceil(quad.max(0)).astype(int)
    x0, y0 = max(0, x0), max(0, y0)
    x1, y1 = min(gray.shape[1], x1), min(gray.shape[0], y1)
    if x1 - x0 < 4 or y1 - y0 < 4 or (y1 - y0) > 1.5 * (x1 - x0):
        return text
    crop = gray[y0:y1, x0:x1]
    lo, hi = float(crop.min()), float(crop.max())
    if hi - lo < 40:
        return text
    ink = crop < (lo + hi) / 2
    if ink.mean() > 0.5:  # light text on a dark ground
        ink = ~ink
    counts = ink.sum(axis=1)
    rows = np.flatnonzero(counts)
    if rows.size == 0:
        return text
    height = float(rows[-1] - rows[0] + 1)
    # columns are looked at down to the baseline (the last row of the dense x-height band): the
    # descenders of "j", "y", "g" reach under their neighbours and would fill a word gap
    dense = np.flatnonzero(counts >= 0.35 * counts.max())
    baseline = int(dense[-1]) if dense.size else int(rows[-1])
    cols = np.asarray(ink[: baseline + 1].any(axis=0))
    centres = [(min(p[0] for p in b) + max(p[0] for p in b)) / 2.0 - x0 for b in boxes]
    if any(b < a for a, b in pairwise(centres)):
        return text
    inked = np.flatnonzero(cols)
    if inked.size == 0:
        return text
    spaces: set[int] = set()  # insert a space before text[i]
    start = None
    for x in range(int(inked[0]), int(inked[-1]) + 1):
        if not cols[x]:
            if start is None:
                start = x
            continue
        if start is not None:
            _old_consider_gap(start, x, height, centres, text, spaces)
            start = None
    if not spaces:
        return text
    return "".join((" " + ch) if i in spaces else ch for i, ch in enumerate(text))


def _old_consider_gap(start: int, end: int, height: float, centres: list[float], text: str, spaces: set[int]) -> None:
    """Mark a space for the gap ``[start, end)`` if it is wide enough for the characters around it."""
    mid = (start + end) / 2.0
    i = next((k for k in range(1, len(centres)) if centres[k - 1] < mid < centres[k]), None)
    if i is None:
        return
    a, b = text[i - 1], text[i]
    if a.isspace() or b.isspace():
        return
    share = 0.36 if (a.isdigit() and b.isdigit()) else 0.25
    if end - start >= share * height:
        spaces.add(i)


def words_bench(fonts: list[str], sizes: list[int], baseline: bool) -> None:
    """Print character and word accuracy per font and size, now and (``baseline``) before."""
    from knowledge.ingest import _ocr

    _ocr.engine()
    print(
        f"word accuracy on rendered lines ({len(LINES)} lines per page, A4 at 200 dpi); load average"
        f" {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (times grow with it, accuracy does not)"
    )
    head = f"{'font':<18} {'px':>3} {'words':>5}  {'char acc':>8} {'word acc':>8} {'s/page':>6}"
    if baseline:
        head += f"  {'before: char':>12} {'word':>6}"
    print(head)
    totals = {"words": 0, "now": 0, "before": 0, "chars": 0, "edits_now": 0, "edits_before": 0}
    misses: list[str] = []
    for name in fonts:
        for px in sizes:
            rgb, truth = page_of_lines(FONTS[name], px)
            t0 = time.perf_counter()
            got = norm(_ocr.engine().read(rgb).text)
            seconds = time.perf_counter() - t0
            n, truth_n = len(truth.split()), norm(truth)
            hit = word_matches(got, truth_n)
            edits = levenshtein(got, truth_n)
            totals["words"] += n
            totals["now"] += hit
            totals["chars"] += len(truth_n)
            totals["edits_now"] += edits
            row = f"{name:<18} {px:>3} {n:>5}  {1 - edits / len(truth_n):>8.4f} {hit / n:>8.4f} {seconds:>6.1f}"
            if baseline:
                old = norm(baseline_read(rgb))
                old_hit, old_edits = word_matches(old, truth_n), levenshtein(old, truth_n)
                totals["before"] += old_hit
                totals["edits_before"] += old_edits
                row += f"  {1 - old_edits / len(truth_n):>12.4f} {old_hit / n:>6.4f}"
            print(row, flush=True)
            missed = [w for w in truth_n.split() if w not in got.split()]
            if missed:
                misses.append(f"  {name} {px}px: {', '.join(missed[:8])}")
                print(misses[-1], flush=True)
    line = (
        f"total: {totals['words']} words, character accuracy {1 - totals['edits_now'] / totals['chars']:.4f},"
        f" word accuracy {totals['now'] / totals['words']:.4f} (target >= 0.98)"
    )
    if baseline:
        line += (
            f"; before: character {1 - totals['edits_before'] / totals['chars']:.4f},"
            f" word {totals['before'] / totals['words']:.4f}"
        )
    print(line)
    if misses:
        print("reference words not read exactly (now):")
        print("\n".join(misses))


def child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dpis", default="150,200,250,300")
    ap.add_argument("--pages", type=int, default=2)
    ap.add_argument("--words", action="store_true", help="only the word-accuracy table (fonts x sizes)")
    ap.add_argument("--fonts", default=",".join(FONTS), help="comma-separated, of: " + ", ".join(FONTS))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="pixels at 200 dpi")
    ap.add_argument("--no-baseline", action="store_true", help="skip the assembly before issue 27")
    ap.add_argument("--one", nargs=4, metavar=("DPI", "PAGES", "SIZE", "SPACES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        dpi, pages, size, spaces = args.one
        print(json.dumps(one(int(dpi), int(pages), float(size), spaces == "1")))
        return
    fonts = [f for f in args.fonts.split(",") if Path(FONTS[f]).exists()]
    words_bench(fonts, [int(s) for s in args.sizes.split(",")], baseline=not args.no_baseline)
    if args.words:
        return
    print()
    from knowledge.ingest._ocr import DPI

    dpis = [int(d) for d in args.dpis.split(",")]
    print(
        f"OCR benchmark: {args.pages} A4 pages of clean prose per run, scanned at 300 dpi, OCR'd at {dpis} dpi;"
        f" chosen resolution {DPI} dpi"
    )
    base = text_layer_baseline(args.pages, 11)
    print(f"baseline: reading the text layer of the same pages with pypdf: {base:.1f} pages/s\n")
    print(
        f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times grow with it;"
        " CPU seconds per page much less)"
    )
    rows = []
    for size, sizes_dpis in ((11.0, dpis), (9.0, [d for d in dpis if d <= DPI])):
        for dpi in sizes_dpis:
            r = child([str(dpi), str(args.pages), str(size), "1"])
            rows.append(r)
            print(
                f"{size:>4.0f} pt  {dpi:>3} dpi  {r['pages_per_s']:.3f} pages/s ({r['seconds'] / r['pages']:.1f} s/page,"
                f" {r['cpu_s'] / r['pages']:.1f} CPU s/page)  accuracy {r['accuracy']:.4f}"
                f"  confidence {r['confidence']:.3f}  peak RSS {r['peak_mb']:.0f} MB"
                f" (before the engine {r['rss_before_mb']:.0f} MB, engine load {r['load_s']:.2f} s)",
                flush=True,
            )
    chosen = next((r for r in rows if r["dpi"] == DPI and r["size"] == 11.0), None)
    if chosen:
        print(
            f"\npages/s relative to {DPI} dpi (11 pt): "
            + ", ".join(f"{r['dpi']} dpi {r['pages_per_s'] / chosen['pages_per_s']:.2f}x" for r in rows if r["size"] == 11.0)
        )
        print(f"OCR at {DPI} dpi is {base / chosen['pages_per_s']:.0f}x slower than reading a text layer")
        r = child([str(DPI), str(args.pages), "11", "0"])
        print(
            f"without word-spacing recovery at {DPI} dpi, 11 pt: accuracy {r['accuracy']:.4f}"
            f" (with it: {chosen['accuracy']:.4f})"
        )


if __name__ == "__main__":
    main()
