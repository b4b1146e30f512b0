"""What the pages share (pages/_ui.py) and the job decisions the stores page asks the service for
(IngestJob.visible_for, running_for, replace_result)."""

from __future__ import annotations

import html

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.outcomes import IngestResult
from knowledge.service.jobs import IngestJob
from knowledge.system import System
from knowledge.vectorstore.scoring import DISTANCES as BASE_DISTANCES
from pages._ui import DISTANCES, duration, human_size, megabytes


def test_sizes_in_words_and_in_megabytes():
    assert [human_size(n) for n in (0, 999, 1000, 1_234_567, 2_500_000_000)] == [
        "0 B",
        "999 B",
        "1.0 kB",
        "1.2 MB",
        "2.5 GB",
    ]
    assert human_size(None) == "?"
    assert megabytes(1_234_567) == 1.235 and megabytes(1_234_567, 2) == 1.23 and megabytes(None) is None
    assert megabytes(0) == 0.0


@pytest.mark.parametrize(
    "seconds, words",
    [(0.2, "1 s"), (45, "45 s"), (89.4, "89 s"), (90, "2 min"), (59 * 60, "59 min"), (80 * 60, "1 h 20 min")],
)
def test_durations_as_a_person_says_them(seconds, words):
    assert duration(seconds) == words


def test_the_distances_are_the_backends_own():
    assert list(BASE_DISTANCES) == DISTANCES and "cosine" in DISTANCES


def _flash_page() -> None:
    import streamlit as st

    from pages._ui import flash, has_flash, set_flash

    st.caption(f"waiting: {has_flash('k')}")
    flash("k")
    if st.button("ok"):
        set_flash("k", True, "It worked.")
        st.rerun()
    if st.button("bad"):
        set_flash("k", False, "It failed.")
        st.rerun()


def test_a_flash_message_shows_once_after_the_rerun_as_success_or_error():
    at = AppTest.from_function(_flash_page).run()
    assert not at.success and not at.error
    at.button[0].click().run()
    assert [html.unescape(s.value) for s in at.success] == ["It worked."] and not at.error  # shown as text
    at.run()  # shown once: gone on the next run
    assert not at.success
    at.button[1].click().run()
    assert [html.unescape(e.value) for e in at.error] == ["It failed."] and not at.success


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=8))
    yield s
    s.close()


def test_the_job_a_page_shows_is_its_own_unless_another_runs_or_just_ended(system, wb):
    assert IngestJob.visible_for(system.jobs, "s") is None and not IngestJob.running_for(system.jobs, "s")
    mine = wb.submit_batch("s", [("a.txt", b"The cat sits on the mat.")])
    assert IngestJob.visible_for(system.jobs, "s", mine) is mine
    assert mine.wait(30) and not IngestJob.running_for(system.jobs, "s")
    other_tab = IngestJob.visible_for(system.jobs, "s", None)  # a tab without a job sees the batch just finished
    assert other_tab is mine
    assert IngestJob.visible_for(system.jobs, "s", None, recent_seconds=0) is None  # an old batch is not shown
    theirs = wb.submit_batch("s", [("b.txt", b"Dogs bark at night.")])
    assert theirs.wait(30)
    assert IngestJob.visible_for(system.jobs, "s", mine) is theirs  # another tab's batch, finished a moment ago
    assert IngestJob.visible_for(system.jobs, "s", mine, recent_seconds=0) is mine
    assert IngestJob.visible_for(system.jobs, "other", mine) is mine  # jobs are per store


def test_a_retried_file_shows_its_new_outcome_in_the_batch(wb):
    job = wb.submit_batch("s", [("a.txt", b"The cat sits on the mat."), ("b.txt", b"Dogs bark.")])
    assert job.wait(30)
    first = job.files[0].result
    assert first.ok and first.file_id
    again = IngestResult("a.txt", "indexed", "a.txt: 2 chunks.", file_id=first.file_id, chunks=2)
    assert job.replace_result(first.file_id, again) == 1
    assert job.files[0].result is again and job.files[1].result.name == "b.txt"
    assert job.replace_result("no-such-id", again) == 0
