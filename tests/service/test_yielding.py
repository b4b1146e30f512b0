"""Ingestion yields to searches: a search marks the data folder, the app's worker process waits
between embedding batches while the mark is fresh (knowledge/service/yielding.py)."""

from __future__ import annotations

import argparse
import os
import time

import pytest

from knowledge.embeddings import _pooled
from knowledge.embeddings.fake import HashEmbedder
from knowledge.service.yielding import MARK_NAME, SearchMark
from knowledge.system import System
from knowledge.workbench import Workbench


def test_no_mark_means_no_wait(tmp_path):
    mark = SearchMark(tmp_path)
    assert mark.age() == float("inf")
    assert mark.wait(grace=5, max_wait=5) == 0.0


def test_a_fresh_mark_makes_the_worker_wait_at_most_max_wait(tmp_path):
    mark = SearchMark(tmp_path)
    mark.touch()
    assert (tmp_path / MARK_NAME).is_file() and mark.age() < 60
    assert mark.wait(grace=3600, max_wait=0.5) == pytest.approx(0.5)  # the steps slept, not a wall time


def test_an_old_mark_means_no_wait(tmp_path):
    mark = SearchMark(tmp_path)
    mark.touch()
    old = time.time() - 120
    os.utime(tmp_path / MARK_NAME, (old, old))
    assert mark.age() >= 120
    assert mark.wait(grace=2, max_wait=5) == 0.0


def test_a_mark_in_a_folder_that_cannot_hold_it_is_ignored(tmp_path):
    mark = SearchMark(tmp_path / "missing" / "folder")
    mark.touch()  # no error: the mark is a hint
    assert mark.age() == float("inf")


def test_a_search_marks_its_data_folder(settings):
    wb = Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=32))
    try:
        wb.ingest_file("notes", b"The borrow checker checks references.", "a.txt")
        path = settings.data_root / MARK_NAME
        path.unlink(missing_ok=True)
        wb.search("notes", "borrow checker")
        assert path.is_file()
        assert SearchMark(settings.data_root).age() < 60
    finally:
        wb.close()


def test_the_apps_worker_process_waits_between_batches_and_a_plain_worker_does_not(settings, monkeypatch):
    from knowledge.cli.worker import cmd_worker

    monkeypatch.setattr(_pooled, "between_batches", None)
    system = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=32))
    wb = Workbench(system)  # the command's actor (the local admin); the worker runs over the system
    try:
        args = argparse.Namespace(concurrency=1, once=True, lease=30.0, poll=0.1, parent=None, nice=0)
        assert cmd_worker(system, wb, args) == 0
        assert _pooled.between_batches is None  # a worker of its own (``knowledge worker``) never waits
        args.parent = os.getppid()
        assert cmd_worker(system, wb, args) == 0
        hook = _pooled.between_batches
        assert hook is not None and hook.__self__.path == settings.data_root / MARK_NAME
    finally:
        system.close()


class _Session:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def run(self, outputs, feed):
        import numpy as np

        self.calls.append("run")
        ids = feed["input_ids"]
        return [np.ones((ids.shape[0], ids.shape[1], 4), dtype=np.float32)]


def test_the_encoder_calls_the_hook_before_each_batch(monkeypatch):
    calls: list[str] = []
    encoder = _pooled.MeanPooledEncoder.__new__(_pooled.MeanPooledEncoder)
    encoder.session, encoder._output, encoder._token_types, encoder._pad_id = _Session(calls), "out", False, 0
    monkeypatch.setattr(
        encoder, "encode", lambda texts: [type("E", (), {"ids": [1] * (i + 1)})() for i in range(len(texts))]
    )
    monkeypatch.setattr(_pooled, "between_batches", lambda: calls.append("wait"))
    out = encoder.embed(["a", "b", "c", "d", "e"], batch_size=2)
    assert out.shape == (5, 4)
    assert calls == ["wait", "run", "wait", "run", "wait", "run"]
