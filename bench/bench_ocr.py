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
        _ocr.recover_spaces = lambda gray, quad, text, boxes, chars: text
    _ocr.ocr_pdf_pages(scan, [1], dpi=dpi)  # warm-up: first-call allocations
    t0, c0 = time.perf_counter(), _cpu()
    read = _ocr.ocr_pdf_pages(scan, list(range(1, pages + 1)), dpi=dpi)
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    got = " ".join(read[n].text for n in sorted(read))
    conf = float(np.mean([p.confidence or 0.0 for p in read.values()]))
    return {"dpi": dpi, "size": size, "spaces": spaces, "pages": pages, "seconds": seconds, "cpu_s": cpu,
            "pages_per_s": pages / seconds, "accuracy": accuracy(got, truth), "confidence": conf,
            "load_s": load, "rss_before_mb": rss0 / 1024,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


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


def child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--one", *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dpis", default="150,200,250,300")
    ap.add_argument("--pages", type=int, default=2)
    ap.add_argument("--one", nargs=4, metavar=("DPI", "PAGES", "SIZE", "SPACES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        dpi, pages, size, spaces = args.one
        print(json.dumps(one(int(dpi), int(pages), float(size), spaces == "1")))
        return
    from knowledge.ingest._ocr import DPI

    dpis = [int(d) for d in args.dpis.split(",")]
    print(f"OCR benchmark: {args.pages} A4 pages of clean prose per run, scanned at 300 dpi, OCR'd at {dpis} dpi;"
          f" chosen resolution {DPI} dpi")
    base = text_layer_baseline(args.pages, 11)
    print(f"baseline: reading the text layer of the same pages with pypdf: {base:.1f} pages/s\n")
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times grow with it;"
          " CPU seconds per page much less)")
    rows = []
    for size, sizes_dpis in ((11.0, dpis), (9.0, [d for d in dpis if d <= DPI])):
        for dpi in sizes_dpis:
            r = child([str(dpi), str(args.pages), str(size), "1"])
            rows.append(r)
            print(f"{size:>4.0f} pt  {dpi:>3} dpi  {r['pages_per_s']:.3f} pages/s ({r['seconds'] / r['pages']:.1f} s/page,"
                  f" {r['cpu_s'] / r['pages']:.1f} CPU s/page)  accuracy {r['accuracy']:.4f}"
                  f"  confidence {r['confidence']:.3f}  peak RSS {r['peak_mb']:.0f} MB"
                  f" (before the engine {r['rss_before_mb']:.0f} MB, engine load {r['load_s']:.2f} s)", flush=True)
    chosen = next((r for r in rows if r["dpi"] == DPI and r["size"] == 11.0), None)
    if chosen:
        print(f"\npages/s relative to {DPI} dpi (11 pt): " + ", ".join(
            f"{r['dpi']} dpi {r['pages_per_s'] / chosen['pages_per_s']:.2f}x" for r in rows if r["size"] == 11.0))
        print(f"OCR at {DPI} dpi is {base / chosen['pages_per_s']:.0f}x slower than reading a text layer")
        r = child([str(DPI), str(args.pages), "11", "0"])
        print(f"without word-spacing recovery at {DPI} dpi, 11 pt: accuracy {r['accuracy']:.4f}"
              f" (with it: {chosen['accuracy']:.4f})")


if __name__ == "__main__":
    main()
