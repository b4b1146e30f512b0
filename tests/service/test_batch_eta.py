"""The time left of a batch holds steady for a steady-rate batch of very different file sizes."""

from __future__ import annotations

import pytest

from knowledge.outcomes import IngestResult
from knowledge.service.jobs import IngestJob, batch_eta, round_eta

#: Bytes per file: tiny notes beside multi-megabyte PDFs, in an order that fools a per-file pace.
SIZES = [3_000, 900_000, 12_000, 400_000, 1_500, 2_000_000, 60_000, 5_000, 1_200_000, 25_000, 700_000, 8_000]
RATE = 20_000.0  # bytes per second, the same for every file
OVERHEAD = 1.0  # seconds per file whatever its size


def _fraction(t: float) -> float:
    """A file's reported progress at ``t`` in [0, 1] of its time: reading stays near 0 for the first
    60 %, then the embedding runs to 1 (a file's stages are not even)."""
    return 0.05 * t / 0.6 if t < 0.6 else 0.05 + 0.95 * (t - 0.6) / 0.4


def _simulate(estimate):
    """``(true seconds left, estimate)`` once a second of a batch of :data:`SIZES` ingested one by
    one at :data:`RATE`, the estimate from ``estimate(job, now)`` on a real :class:`IngestJob` view."""
    job = IngestJob(None, "s", [(f"f{n}.pdf", b"x" * size) for n, size in enumerate(SIZES)])
    start = 1000.0
    job.started_at = start
    spans, t = [], start
    for size in SIZES:
        spans.append((t, t + OVERHEAD + size / RATE))
        t = spans[-1][1]
    end, out, now = t, [], start + 1.0
    while now < end:
        for fp, (a, b) in zip(job.files, spans):
            if b <= now and fp.result is None:
                fp.result, fp.ended, fp.stage = IngestResult(fp.name, "indexed", "", chunks=1), b, "done"
            elif a <= now < b:
                fp.update("embedding", _fraction((now - a) / (b - a)), now=now)
        out.append((end - now, estimate(job, now)))
        now += 1.0
    return out


def _swing(samples) -> float:
    """How far the estimate's ratio to the truth ranges (max / min) while over 20 s are left."""
    ratios = [e / truth for truth, e in samples if e is not None and truth > 20]
    assert len(ratios) > 100, "the estimate came too late"
    return max(ratios) / min(ratios)


def test_steady_batch_estimate_does_not_swing():
    samples = _simulate(lambda job, now: job.eta_seconds(now=now))
    assert _swing(samples) < 1.6
    first = next(n for n, (_, e) in enumerate(samples) if e is not None)
    assert first >= 40  # nothing shown until 5 % of the bytes are in finished files (the 900 kB file)
    # and then each estimate is within 25 % of the truth
    assert all(0.75 < e / truth < 1.25 for truth, e in samples[first:] if truth > 20)


def test_the_old_pace_by_file_progress_swings_on_the_same_batch():
    """The sequence is a hard one: the pace of all bytes by their files' own progress (the former
    estimate) ranges over more than a factor 3 on it."""

    def by_progress(job, now):
        total = sum(job.sizes)
        done = sum(size if f.result else size * f.fraction for f, size in zip(job.files, job.sizes))
        return (now - job.started_at) / done * (total - done) if done > 0.02 * total and now - job.started_at > 2 else None

    assert _swing(_simulate(by_progress)) > 3


def test_batch_eta_rules():
    assert batch_eta([(0, 0.5, "running", None)], 0.0, 100.0) is None  # sizes unknown
    assert batch_eta([(1000, 0.5, "running", None)], 0.0, 4.0) is None  # under 5 s
    # under 5 % of the bytes in finished files (a running file's own progress does not count)
    assert batch_eta([(1000, 0.9, "running", None)], 0.0, 50.0) is None
    assert batch_eta([(40, 1.0, "done", 1.0), (1000, 0.5, "running", None)], 0.0, 50.0) is None
    # a 1,000-byte file took 10 s: the 2,000 bytes running (4 s in) need 16 s more, 1,000 waiting 10 s
    files = [(1000, 1.0, "done", 10.0), (2000, 0.9, "running", None), (1000, 0.0, "waiting", None)]
    assert batch_eta(files, 0.0, 14.0) == pytest.approx(26.0)
    # a running file past its share still has a tenth of it to go
    assert batch_eta(files, 0.0, 100.0) == pytest.approx(12.0)


def test_round_eta():
    assert round_eta(45) == 45 and round_eta(151) == 180 and round_eta(149) == 120
    assert round_eta(13 * 60 + 20) == 15 * 60 and round_eta(3 * 3600 + 4 * 60) == 3 * 3600
