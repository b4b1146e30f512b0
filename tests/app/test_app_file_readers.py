"""Issue 41 on the pages, headless (AppTest): who may read one file. The store's owner restricts a
file to the group hr in the Stores page's File details; a member outside hr then finds it nowhere on
the pages (the store's file list, its metrics and the stores table, the Files page, the Search
playground's file list, a viewer link, a batch's outcome lines), a member in hr does, with the
readers said in words (and read-only, without a Save), and "only these" with nobody picked is
refused in words."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import APP, button, fresh_caches, page_text, use_fake_model
from tests.helpers.app_system import preparing
from tests.helpers.env import prepared_data, use_prepared_data
from tests.helpers.stores_page import table

PW = "correct horse battery"
STORE = "handbook"
HOLIDAYS = b"# Holidays\n\nEvery member of staff has twenty-five days of paid holiday a year.\n"
SALARIES = b"# Salaries\n\nThe salary bands for 2026: engineers 60k to 90k, managers 70k to 110k.\n"
ONLY = "Only these people and groups"
EVERYONE = "Everyone who may read the store"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


def _build(work: Path) -> None:
    with preparing() as system:
        people = system.people
        people.set_up_admin("root", PW, "The Admin")
        people.accounts.create("ana", PW, display_name="Ana Lima")
        people.accounts.create("bo", PW, display_name="Bo Berg")
        people.accounts.create_group("hr")
        people.accounts.add_to_group("hr", "ana")
        root = view(system, "root")
        for name, data in (("holidays.md", HOLIDAYS), ("salaries.md", SALARIES)):
            assert root.ingest_file(STORE, data, name).ok
        root.share_store(STORE, "everyone", "", "read")


@pytest.fixture(scope="module")
def team_data(tmp_path_factory) -> Path:
    return prepared_data(tmp_path_factory, "file-readers-team", _build)


@pytest.fixture
def team(team_data) -> Iterator[System]:
    """Admin root owns store ``handbook`` (holidays.md, salaries.md), shared read-only with everyone;
    members ana (Ana Lima, in group hr) and bo (Bo Berg, in no group): this test's copy."""
    use_prepared_data(team_data)
    system = System(load_settings())
    yield system
    system.close()


def view(system: System, username: str) -> Workbench:
    return Workbench(system, actor=system.people.accounts.actor(username))


def file_id(system: System, name: str) -> str:
    return next(f.file_id for f in view(system, "root").file_records(STORE) if f.file_name == name)


def signed_in(system: System, username: str, page: str, **params: str) -> AppTest:
    """The app run as ``username`` (signed in by account), switched to ``page`` (with query ``params``)."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["session_token"] = system.people.accounts.start_session(username)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def restrict_in_details(at: AppTest, fid: str, *picked: str) -> None:
    """In the open store's File details: pick file ``fid``, choose "only these", pick ``picked``, Save."""
    at.selectbox(key=f"details-pick:{STORE}").select(fid).run()
    base = f"details:{STORE}:{fid}"
    at.radio(key=f"{base}:who").set_value(ONLY).run()
    for principal in picked:
        at.multiselect(key=f"{base}:readers").select(principal).run()
    button(at, f"{base}:save").click().run()
    assert not at.exception, at.exception


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_an_owner_restricts_a_file_to_hr_and_only_hr_sees_it_on_the_pages(team):
    salaries = file_id(team, "salaries.md")
    at = signed_in(team, "root", "pages/stores.py")
    assert at.selectbox(key="store_selected").value == STORE
    assert "readers" not in table(at, "file").columns  # no file has readers of its own yet
    base = f"details:{STORE}:{salaries}"
    at.selectbox(key=f"details-pick:{STORE}").select(salaries).run()
    assert at.radio(key=f"{base}:who").value == EVERYONE  # the default: the file inherits the store's sharing
    at.radio(key=f"{base}:who").set_value(ONLY).run()
    choices = at.multiselect(key=f"{base}:readers").options
    assert {"👥 group hr", "👤 Ana Lima (ana)", "👤 Bo Berg (bo)"} <= set(choices), choices
    restrict_in_details(at, salaries, "group:hr")
    assert any("Who may read it: only group hr." in s.value for s in at.success), [s.value for s in at.success]
    assert view(team, "root").file_readers(STORE, salaries) == ("group:hr",)
    files = table(at, "file")
    readers = dict(zip(files["file"], files["readers"]))
    assert readers == {"holidays.md": "", "salaries.md": "🔒 group hr"}
    assert at.radio(key=f"{base}:who").value == ONLY  # read back as saved
    assert at.multiselect(key=f"{base}:readers").value == ["group:hr"]
    assert metrics(at)["Indexed files"] == "2"  # the owner still reads every file

    # bo, not in hr: not in the list, the metrics, the stores table, the details' picker
    at = signed_in(team, "bo", "pages/stores.py")
    assert at.selectbox(key="store_selected").value == STORE
    assert list(table(at, "file")["file"]) == ["holidays.md"]
    assert metrics(at)["Indexed files"] == "1"
    assert metrics(at)["Chunks"] == str(view(team, "bo").vector_store(STORE).count())
    assert metrics(at)["Size on disk"] == "–"  # the store's size would tell of the file
    assert list(table(at, "store")["files"]) == [1]
    assert "Indexed files (1)" in page_text(at) and "salaries" not in page_text(at).lower()
    assert at.selectbox(key=f"details-pick:{STORE}").options == ["holidays.md"]
    # the Files page, the Search playground's file list, the home page's count, a viewer link
    at = signed_in(team, "bo", "pages/files.py")
    assert {m.label: m.value for m in at.metric}["Stored files"] == "1"
    assert all("salaries" not in str(d.value).lower() for d in at.dataframe)
    assert "salaries" not in page_text(at).lower()
    at = signed_in(team, "bo", "pages/search.py")
    assert not any("salaries" in o for o in at.selectbox(key="pg_file").options)
    at.text_input(key="pg_query").input("salary bands engineers").run()
    assert not at.exception and "salaries" not in page_text(at).lower()
    at = signed_in(team, "bo", "pages/viewer.py", store=STORE, file=salaries)
    assert any("This link cannot be opened" in e.value for e in at.error), [e.value for e in at.error]
    assert "salary" not in page_text(at).lower()

    # ana, in hr: sees it, with its readers in words, read-only
    at = signed_in(team, "ana", "pages/stores.py")
    files = table(at, "file")
    assert dict(zip(files["file"], files["readers"])) == {"holidays.md": "", "salaries.md": "🔒 group hr"}
    assert metrics(at)["Indexed files"] == "2"
    assert metrics(at)["Size on disk"] != "–"  # she may read every file: the store's size tells nothing
    at.selectbox(key=f"details-pick:{STORE}").select(salaries).run()
    assert "**Who may read this file:** only group hr." in page_text(at)
    assert f"{base}:save" not in {b.key for b in at.button} and not at.radio
    at = signed_in(team, "ana", "pages/files.py", file=salaries)
    assert any("salaries.md" in str(d.value) for d in at.dataframe)
    assert "🔒 In handbook only group hr may read it (and the store's owner)." in page_text(at)
    at = signed_in(team, "ana", "pages/viewer.py", store=STORE, file=salaries)
    assert not at.error and "salary bands" in page_text(at)


def test_back_to_everyone_and_nobody_picked_is_refused_in_words(team):
    salaries = file_id(team, "salaries.md")
    view(team, "root").set_file_readers(STORE, salaries, "user:ana")
    at = signed_in(team, "root", "pages/stores.py")
    at.selectbox(key=f"details-pick:{STORE}").select(salaries).run()
    base = f"details:{STORE}:{salaries}"
    assert at.multiselect(key=f"{base}:readers").value == ["user:ana"]
    at.multiselect(key=f"{base}:readers").unselect("user:ana").run()
    button(at, f"{base}:save").click().run()
    assert any("Choose at least one person or group" in e.value for e in at.error), [e.value for e in at.error]
    assert view(team, "root").file_readers(STORE, salaries) == ("user:ana",)  # nothing saved
    at.radio(key=f"{base}:who").set_value(EVERYONE).run()
    button(at, f"{base}:save").click().run()
    assert any("Who may read it: everyone who may read the store." in s.value for s in at.success)
    assert view(team, "root").file_readers(STORE, salaries) is None
    assert "readers" not in table(at, "file").columns
    assert list(signed_in(team, "bo", "pages/stores.py").selectbox(key=f"details-pick:{STORE}").options) == [
        "holidays.md",
        "salaries.md",
    ]


def test_a_writer_who_leaves_themselves_out_is_warned_and_the_file_leaves_their_lists(team):
    salaries = file_id(team, "salaries.md")
    view(team, "root").share_store(STORE, "user", "bo", "write")
    at = signed_in(team, "bo", "pages/stores.py")
    at.selectbox(key=f"details-pick:{STORE}").select(salaries).run()
    base = f"details:{STORE}:{salaries}"
    at.radio(key=f"{base}:who").set_value(ONLY).run()
    at.multiselect(key=f"{base}:readers").select("group:hr").run()
    assert any("You are not among them" in w.value for w in at.warning)
    button(at, f"{base}:save").click().run()
    assert not at.exception, at.exception
    assert any("it has left your lists" in s.value for s in at.success), [s.value for s in at.success]
    assert list(table(at, "file")["file"]) == ["holidays.md"]
    assert view(team, "ana").file_readers(STORE, salaries) == ("group:hr",)


def test_a_recent_batch_with_a_file_restricted_since_is_not_shown_to_a_non_reader(team):
    """The Stores page shows another session's batch for a minute after it ends; once one of its files
    is restricted, its outcome lines (which name the file) are not shown to someone who may not read it."""
    at = signed_in(team, "root", "pages/stores.py")
    root: Workbench = at.session_state["workbench"]  # the app's own system: its batches are the page's
    job = root.submit_batch(STORE, [("payroll.md", b"# Payroll\n\nPayroll runs on the 25th of each month.\n")])
    assert job.wait(60) and job.done
    at = signed_in(team, "bo", "pages/stores.py")
    assert "payroll.md" in page_text(at)  # the batch's line, and the file list
    payroll = file_id(team, "payroll.md")
    root.set_file_readers(STORE, payroll, "group:hr")
    at = signed_in(team, "bo", "pages/stores.py")
    assert "payroll" not in page_text(at).lower()
    assert not any("Batch done" in (p.text or "") for p in at.get("progress")), "the batch's header counts it"
    at = signed_in(team, "ana", "pages/stores.py")
    assert "payroll.md" in page_text(at)
