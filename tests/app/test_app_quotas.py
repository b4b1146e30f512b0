"""Quotas on the pages (issue 44, item 2), headless (AppTest): a member over their byte quota who drops a
file on a store is told why in words and nothing is written (no job, no file record, no file-store
object); My account shows their use against their quotas; People → Usage shows each person's and each
store's use to an admin, who sets a quota there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.app.test_app_sharing import signed_in
from tests.helpers.app import fresh_caches, page_text, use_fake_model
from tests.helpers.stores_page import finish_job

PW = "correct horse battery"
LEAVE = b"# Leave\n\nThe parental leave policy grants sixteen weeks of paid leave.\n"  # 71 bytes


@pytest.fixture(autouse=True)
def _app(monkeypatch):
    use_fake_model(monkeypatch, 8)
    monkeypatch.setenv("KNOWLEDGE_QUOTAS__USER_BYTES", "100")
    with fresh_caches():
        yield


@pytest.fixture
def team() -> Iterator[System]:
    """An admin root and a member ana, whose store ``hr`` holds one file of 71 bytes (of her 100)."""
    system = System(load_settings())
    system.people.set_up_admin("root", PW, "The Admin")
    system.people.accounts.create("ana", PW, display_name="Ana")
    Workbench(system, actor=system.people.accounts.actor("ana")).ingest_file("hr", LEAVE, "leave.md")
    yield system
    system.close()


def test_a_member_over_their_byte_quota_is_told_on_the_stores_page_and_nothing_is_written(team):
    at = signed_in(team, "ana", "pages/stores.py")
    assert at.selectbox(key="store_selected").value == "hr"
    tiny = ("tiny.md", b"# Tiny\n\nA line.\n", "text/markdown")  # 16 bytes: 87 of 100
    at.file_uploader(key="upload:hr").set_value([tiny]).run()
    finish_job(at, "hr")
    assert any("Batch done: 1 file" in p.proto.text for p in at.get("progress"))
    at.file_uploader(key="upload:hr").set_value([("more.md", LEAVE.replace(b"sixteen", b"twenty"), "text/markdown")]).run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert any(
        "Not added: more.md." in e
        and "Your stores hold 87 bytes; the quota is 100 bytes, and adding 70 bytes would pass it" in e
        for e in errors
    ), errors
    assert "job:hr" not in at.session_state
    assert not any("Batch done" in p.proto.text for p in at.get("progress"))  # the last batch's is not this one's
    assert sorted(f.file_name for f in team.catalog.files("hr")) == ["leave.md", "tiny.md"]
    assert sorted(f.name for f in team.files.list()) == ["leave.md", "tiny.md"]


def test_my_account_shows_my_use_against_my_quotas(team):
    at = signed_in(team, "ana", "pages/account.py")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Stored bytes"] == "71 bytes" and metrics["Files"] == "1 file"
    assert "API requests a minute" not in metrics  # a limit, not a use: said in words below
    assert "Each of your API keys may send any number of requests a minute." in page_text(at)
    assert "quota: 100 bytes" in page_text(at) and "quota: unlimited" in page_text(at)


def test_people_usage_shows_each_person_and_store_and_sets_a_quota(team):
    team.people.quotas.set_limit("user", "ana", "requests_per_minute", 1200)  # a number among "unlimited"s
    at = signed_in(team, "root", "pages/people.py")
    at.session_state["people-tab"] = "Usage"
    at.run()
    assert not at.exception, at.exception
    tables = {next(iter(d.value.columns)): d.value for d in at.dataframe}  # the tables by their first column
    people = tables["person"]
    row = people[people["person"] == "Ana (ana)"].iloc[0]
    assert row["bytes"] == "71 bytes of 100 bytes" and row["files"] == "1 file of unlimited"
    assert row["API requests a minute"] == "1,200"
    stores = tables["store"]
    assert list(stores["store"]) == ["hr"] and list(stores["owner"]) == ["Ana (ana)"]
    at.selectbox(key="quota-scope").select("user")
    at.selectbox(key="quota-name").select("ana")
    at.selectbox(key="quota-measure").select("bytes")
    at.text_input(key="quota-limit").input("1000")
    at.button[[b.label for b in at.button].index("Set the quota")].click().run()
    assert not at.exception, at.exception
    assert team.people.quotas.limit("user", "ana", "bytes").amount == 1000
    assert any("The bytes quota of user ana is now 1.0 kB." in s.value for s in at.success), [s.value for s in at.success]
