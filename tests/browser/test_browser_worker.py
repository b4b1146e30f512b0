"""Ingestion in the app's worker process, in a real browser (issue 30, item 2): while tab A's upload
is ingested, tab B's search returns hits; the ingestion runs in a child process of the server (not
the server itself); a ``kill -9`` of that process mid-batch is followed by a new one and the batch
ends with every file indexed; and a worker still running when the server stops is gone after it.
Timings are measured by ``bench/bench_app_ingest.py``, never asserted here."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.browser import app_page, create_store, drop_files, rerun_and_wait, serve, shot, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.slow]


def _workers(server_pid: int) -> list[psutil.Process]:
    """The server's ``knowledge worker`` child processes (running)."""
    out = []
    for c in psutil.Process(server_pid).children(recursive=True):
        try:
            if "worker" in c.cmdline() and c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.Error:
            continue
    return out


def _wait_for_worker(server_pid: int, not_pid: int | None = None, timeout: float = 90.0) -> psutil.Process | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [w for w in _workers(server_pid) if w.pid != not_pid]
        if found:
            return found[0]
        time.sleep(0.1)
    return None


@pytest.mark.timeout(1800)  # a loaded machine ingests the dozen chapters slowly
def test_search_while_another_tab_ingests_in_a_worker_process_that_survives_a_kill(
    browser, artifacts: Path, corpus: Path, tmp_path: Path
):
    from playwright.sync_api import expect

    chapters = [p for p in sorted((corpus / "md" / "rust-book").glob("ch*.md")) if p.stat().st_size <= 16_000]
    batch, more = chapters[:12], chapters[12:15]
    with (
        serve(tmp_path) as server,
        app_page(browser, server, artifacts, "stores") as tab_a,
        app_page(browser, server, artifacts) as tab_b,
    ):
        create_store(tab_a, "book")
        drop_files(tab_a, batch)
        worker = _wait_for_worker(server.proc.pid)
        assert worker is not None, "no worker process was started"
        assert worker.pid != server.proc.pid and worker.ppid() == server.proc.pid
        expect(tab_a.get_by_text(re.compile(r"\.md — \d+ chunks?")).first).to_be_visible(timeout=300_000)

        # tab B searches the store while the batch runs: hits, from a file already in
        tab_b.goto(f"{server.url}/search?store=book")
        wait_for_app(tab_b)
        query = tab_b.get_by_role("textbox", name="Query", exact=True)
        query.fill("Rust programming language book introduction")
        rerun_and_wait(tab_b, lambda: query.press("Enter"))
        expect(tab_b.get_by_text(re.compile(r"book: [1-9]\d* results? in"))).to_be_visible(timeout=120_000)
        shot(tab_b, artifacts, "30-search-while-ingesting.png")
        finished = tab_a.get_by_text(f"Indexed files ({len(batch)})", exact=True)
        assert worker.is_running() and not finished.count(), "the batch ended before the search: nothing shown"

        # kill -9 the worker mid-batch: another takes its file over and the batch ends whole
        os.kill(worker.pid, signal.SIGKILL)
        again = _wait_for_worker(server.proc.pid, not_pid=worker.pid)
        expect(finished).to_be_visible(timeout=900_000)
        assert again is not None, "no new worker process after the kill"
        for chapter in batch:
            expect(tab_a.get_by_text(re.compile(re.escape(chapter.name) + r" — \d+ chunks?")).first).to_be_visible()
        expect(tab_a.locator('[data-testid="stAlertContentError"]')).to_have_count(0)
        shot(tab_a, artifacts, "30-batch-after-kill.png")

        # a worker busy when the server stops is gone after it
        drop_files(tab_a, more)
        last = _wait_for_worker(server.proc.pid)
        assert last is not None
    _gone, alive = psutil.wait_procs([last], timeout=60)
    assert not alive, f"worker {last.pid} outlived the server"
