"""Files that wait out an outage, in a real browser (issue 39): a batch whose jobs the infrastructure
failed (a worker gave them back with ``defer``, as it does while the file store cannot be reached)
says in one line which files wait and why, and ends with every file indexed once a worker takes
them again. The app runs with ``ingest.worker_threads = 0`` (a team's app: workers are separate
processes); this test is the worker, on the same data folder. Screenshots at 1280x800 and 390 px."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import Server, app_page, create_store, drop_files, serve

pytestmark = [pytest.mark.browser]

REASON = (
    "waiting: the file store cannot be reached (The s3 file store cannot read (bucket 'team' at"
    " http://files.internal:9000): connection refused.)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(
        tmp_path_factory.mktemp("browser-outage-wait"),
        env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16", "KNOWLEDGE_INGEST__WORKER_THREADS": "0"},
    ) as srv:
        yield srv


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_a_batch_waiting_out_an_outage_says_why_and_ends_indexed(
    browser, server: Server, artifacts: Path, tmp_path: Path, width: int, height: int
):
    from playwright.sync_api import expect

    from knowledge.catalog import jobs as q
    from knowledge.config import load_settings
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.service.worker import Worker
    from knowledge.system import System

    store = f"waits-{width}"
    notes = []
    for name, text in (("owls.md", "# Owls\n\nOwls hunt mice at night.\n"), ("tea.md", "# Tea\n\nSteep green tea.\n")):
        (tmp_path / name).write_text(text)
        notes.append(tmp_path / name)
    with app_page(browser, server, artifacts, "stores", width=width, height=height) as page:
        create_store(page, store)
        page.keyboard.press("Escape")
        drop_files(page, notes)
        expect(page.get_by_text(re.compile(r"2 files queued"))).to_be_visible(timeout=60_000)
        system = System(
            load_settings(data_dir=server.data_dir, embeddings={"model": "fake/hash-16"}),
            embedder_factory=lambda m: HashEmbedder(dimension=16),
        )
        try:
            for _ in range(2):  # what a worker does while the file store is down: claims, then gives back
                row = q.claim(system.catalog, "outage-worker")
                assert row is not None and row.store == store
                assert q.defer(system.catalog, row.id, "outage-worker", REASON, 3600) == "queued"
            line = page.get_by_text(re.compile(r"tried again by themselves, nothing is lost"))
            expect(line).to_be_visible(timeout=60_000)
            said = line.inner_text()
            assert "2 files" in said and "owls.md" in said and "file store cannot be reached" in said, said
            line.scroll_into_view_if_needed()
            page.screenshot(path=str(artifacts / f"39-waiting-out-an-outage-{width}.png"))
            with system.catalog.cursor() as cur:  # the file store is back; the back-off is not waited out here
                cur.execute("UPDATE ingest_jobs SET not_before = NULL WHERE store = ?", [store])
            assert Worker(system.indexer).run(once=True, poll=0.05) == 2
        finally:
            system.close()
        expect(page.get_by_text(re.compile(r"Batch done: 2 files.*2 indexed"))).to_be_visible(timeout=60_000)
        expect(line).to_have_count(0)
        page.screenshot(path=str(artifacts / f"39-waiting-out-an-outage-done-{width}.png"))
