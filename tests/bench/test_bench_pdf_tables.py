"""Smoke test of bench/bench_pdf_tables.py: in a subprocess, two repetitions on three small files made
here (a two-page PDF with a ruled table per page, a page of prose, a damaged file) and a folder that
does not exist; the figures are printed, both modes read the same pages, the damaged file is named."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "bench_pdf_tables.py"


def _pdfs(folder: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    for _ in range(2):
        pdf.add_page()
        pdf.multi_cell(0, 5, "Ships in the harbour this week, as the harbour master reported them. " * 3)
        with pdf.table() as table:
            for cells in (["Ship", "Tons", "Day"], ["Alma", "1200", "Mon"], ["Bria", "800", "Tue"], ["Cora", "450", "Wed"]):
                row = table.row()
                for cell in cells:
                    row.cell(cell)
    (folder / "table.pdf").write_bytes(bytes(pdf.output()))
    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    pdf.add_page()
    pdf.multi_cell(0, 5, "Only prose on this page, no table at all. " * 20)
    (folder / "prose.pdf").write_bytes(bytes(pdf.output()))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 cut off here")


@pytest.mark.processes
@pytest.mark.slow  # four child processes, each importing the PDF readers (and camelot)
def test_the_bench_prints_both_modes_figures_on_the_same_pages(tmp_path):
    _pdfs(tmp_path)
    absent = tmp_path / "absent"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--no-corpus", "--dir", str(tmp_path), "--dir", str(absent), "--repeat", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out, label = done.stdout, tmp_path.name
    # repetition 1 runs off then auto, repetition 2 auto then off
    order = re.findall(r"repetition (\d): tables=(\w+)", done.stderr)
    assert order == [("1", "off"), ("1", "auto"), ("2", "auto"), ("2", "off")], done.stderr
    assert f"{absent}: absent, skipped" in out, out
    number = r"([\d.]+)"
    row = re.search(rf"^\| {re.escape(label)} \| 3 \| 3 \| " + r" \| ".join([number] * 7) + r" \|$", out, re.M)
    assert row, out
    fast, slow, ratio, _cpu_off, _cpu_auto, rss_off, rss_auto = map(float, row.groups())
    assert fast > 0 and slow > 0 and ratio == pytest.approx(fast / slow, rel=0.05), row.group(0)
    assert rss_off > 0 and rss_auto > 0, row.group(0)
    assert f"{label}: pages read: tables=off [3], tables=auto [3]" in out, out
    for mode in ("off", "auto"):
        assert re.search(
            rf"^{re.escape(label)}: failed to read with tables={mode}: 1: broken\.pdf \(UnsupportedFile", out, re.M
        ), out
    assert re.search(rf"^{re.escape(label)}: tables found with tables=auto: [1-9]\d* in 1 files \(table\.pdf", out, re.M), (
        out
    )
