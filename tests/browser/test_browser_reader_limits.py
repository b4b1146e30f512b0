"""What a person sees when a file passes its reader's limits, in a real browser (issue 38).

The app is served with ``ingest.reader_memory_mb = 256`` (the least it takes); a batch dropped on a
store holds a 90 MB text (its reading needs about 350 MB), a 400-entry overlapping zip bomb, a note whose name carries a
right-to-left override, and two ordinary notes. The page ends the batch with every file's outcome:
the notes indexed, the big text failed with "needed more than 256 MB of memory to read", the bomb
refused in words, the disguised name refused naming the character, and the app (and its worker)
still serving. Screenshots at 1280x800 and 390 px wide go to ``test-artifacts/browser/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.browser import Server, app_page, create_store, drop_files, scroll_to, serve, shot

pytestmark = [pytest.mark.browser]

LINE = b"the quick brown fox jumps over the lazy dog while the owls hunt mice at night\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serve(
        tmp_path_factory.mktemp("browser-limits"),
        env_extra={"KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-16", "KNOWLEDGE_INGEST__READER_MEMORY_MB": "256"},
    ) as srv:
        yield srv


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from tests.helpers.hostile_archives import overlapping_zip

    folder = tmp_path_factory.mktemp("limits-batch")
    files = {
        "owls.md": b"# Owls\n\nOwls hunt mice at night.\n",
        "tea.md": b"# Tea\n\nSteep green tea briefly.\n",
        "survey.txt": LINE * (90_000_000 // len(LINE)),
        "bomb.zip": overlapping_zip(),
        "invoice\u202egpj.md": b"# Invoice\n\nnot what its name shows\n",
    }
    for name, body in files.items():
        (folder / name).write_bytes(body)
    return [folder / name for name in files]


@pytest.mark.parametrize("width,height", [(1280, 800), (390, 844)])
def test_every_file_of_a_batch_ends_with_its_outcome_in_words(
    browser, server: Server, artifacts: Path, batch: list[Path], width: int, height: int
):
    from playwright.sync_api import expect

    store = f"limits-{width}"
    with app_page(browser, server, artifacts, "stores", width=width, height=height) as page:
        create_store(page, store)
        page.keyboard.press("Escape")  # the "New store" popover, if it stayed open
        drop_files(page, batch)  # the drop starts the batch
        big = page.get_by_text(re.compile(r"needed more than 256 MB of memory to read", re.I))
        expect(big.first).to_be_visible(timeout=240_000)
        expect(page.get_by_text(re.compile(r"owls\.md — 1 chunk"))).to_be_visible(timeout=60_000)
        expect(page.get_by_text(re.compile(r"tea\.md — 1 chunk"))).to_be_visible(timeout=60_000)
        expect(page.get_by_text(re.compile(r"share the same compressed data", re.I)).first).to_be_visible(timeout=60_000)
        disguised = page.get_by_text(re.compile(r"U\+202E RIGHT-TO-LEFT OVERRIDE")).first
        expect(disguised).to_be_visible(timeout=60_000)
        # the name itself is shown with its control made visible, so it cannot turn the line round
        expect(page.get_by_text("invoice[U+202E]gpj.md", exact=True).first).to_be_visible()
        body = page.locator("body").inner_text()
        assert not re.search(r"\b[A-Z]\w*(Error|Exception)\b", body), body  # no class names, words only
        assert "server log" not in body
        scroll_to(disguised)
        page.screenshot(path=str(artifacts / f"38-reader-limits-batch-{width}.png"))
        scroll_to(big.first)
        page.screenshot(path=str(artifacts / f"38-reader-limits-{width}.png"))
        shot(page, artifacts, f"38-reader-limits-{width}-full.png")
