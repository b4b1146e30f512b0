"""The Sources page (pages/sources.py), headless (AppTest), over the test process's ``dict`` source
kind: "Add a source" built from the kind's settings (the secret input never pre-filled, "set"
shown after saving, the secret on no element), Run now followed to its end with each file's
outcome (failed first, with the reason), Pause/Resume, Check connection, Dry run, Edit and Remove
(asked first, keeping its files); who sees which controls (a reader no Run now, a writer no Edit, a
member without access no source)."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import APP, button, fresh_caches, open_app, page_text, use_fake_model
from tests.helpers.sources import PW, DictSource

SECRET = "page-s3cret-never-drawn"
PAGE = "pages/sources.py"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


@pytest.fixture
def files(request):
    name = request.node.name
    DictSource.FILES[name] = {
        "docs/holidays.md": (b"Holidays: every team member has 30 days of paid leave.", None),
        "docs/vanishing.md": (b"This file vanishes between the listing and the reading.", None),
    }
    DictSource.VANISH.add("docs/vanishing.md")
    DictSource.DOWN.discard(name)
    yield name
    DictSource.FILES.pop(name, None)
    DictSource.VANISH.discard("docs/vanishing.md")
    DictSource.DOWN.discard(name)


def everything_drawn(at: AppTest) -> str:
    """Every text the page drew, and every input's value."""
    parts = [page_text(at)]
    for kind in ("text_input", "text_area", "error", "success", "info", "warning", "subheader", "dataframe"):
        parts.extend(str(el.value) for el in getattr(at, kind))
    return "\n".join(parts)


def add_with_system(name: str, **kw) -> None:
    system = System(load_settings())
    try:
        Workbench(system).sources.add("team", "dict", "kb", {"name": name, "password": SECRET}, **kw)
    finally:
        system.close()


def finished(at: AppTest, source: str = "team") -> AppTest:
    """The app run again once the source's newest run has ended (the worker is a thread of this process)."""
    wb: Workbench = at.session_state["workbench"]
    deadline = time.monotonic() + 60
    while wb.sources.runs(source, 1)[0].status in ("queued", "running"):
        assert time.monotonic() < deadline, "the run did not finish in time"
        time.sleep(0.05)
    at.run()
    assert not at.exception, at.exception
    return at


def test_add_a_source_from_its_kinds_settings_and_the_secret_is_never_drawn(files):
    at = open_app(PAGE)
    assert any("No source yet" in i.value for i in at.info)
    assert at.selectbox(key="source-add-kind").value == "dict"
    secret = at.text_input(key="source-add:dict:password:0")
    assert secret.value == "" and secret.label == "Password"
    at.text_input(key="source-add-name").input("team")
    at.text_input(key="source-add-store").input("kb")
    at.text_input(key="source-add:dict:name").input(files)
    secret.input(SECRET)
    at.number_input(key="source-add:dict:every").set_value(45)
    at.text_area(key="source-add:dict:include").input("docs/*.md\n\n")
    button(at, "FormSubmitter:source-add-Add source").click().run()
    assert not at.exception, at.exception
    assert any("Added the source team into kb" in s.value for s in at.success)
    assert at.selectbox(key="source-pick").value == "team"
    text = page_text(at).replace("\u2060", "")  # the word joiner that keeps "dict://" from becoming a link
    assert "**Password**: set" in text and f"**Name**: {files}" in text and "**Include**: docs/*.md" in text
    assert "every 45 min" in text and f"dict://{files}" in text
    assert at.text_input(key="source-add:dict:password:1").value == ""  # a new, empty input
    assert SECRET not in everything_drawn(at)
    wb: Workbench = at.session_state["workbench"]
    rec = wb.sources.get("team")
    assert rec.secrets_set == ("password",) and rec.every_minutes == 45 and rec.include == ("docs/*.md",)

    # a refused add says why, and keeps nothing typed in the secret input
    at.text_input(key="source-add-name").input("team")
    at.text_input(key="source-add:dict:password:1").input(SECRET)
    button(at, "FormSubmitter:source-add-Add source").click().run()
    assert any("There is a source named 'team' already" in e.value for e in at.error)
    assert at.text_input(key="source-add:dict:password:2").value == ""
    assert SECRET not in everything_drawn(at)


def test_run_now_is_followed_to_its_end_with_each_files_outcome_failed_first(files):
    add_with_system(files)
    at = open_app(PAGE)
    assert any("It has not run yet" in c.value for c in at.caption)
    button(at, "source-run:team").click().run()
    assert not at.exception, at.exception
    assert any("A run is" in s.value for s in at.success)
    finished(at)
    runs = next(d.value for d in at.dataframe if "by" in d.value.columns)
    assert list(runs["status"]) == ["✅ done"] and "1 added" in runs["counts"][0] and "1 failed" in runs["counts"][0]
    items = next(d.value for d in at.dataframe if "outcome" in d.value.columns)
    assert list(items["file"]) == ["docs/vanishing.md", "docs/holidays.md"]  # failed first
    assert list(items["outcome"]) == ["❌ failed", "✅ ok"] and items["message"][0].startswith("docs/vanishing.md vanished")
    assert any(
        "1 file failed:" in e.value and "**docs/vanishing.md**: docs/vanishing.md vanished" in e.value for e in at.error
    )
    table = next(d.value for d in at.dataframe if "source" in d.value.columns)
    assert list(table["last run"]) == ["✅ done"] and list(table["schedule"]) == ["by hand"]
    assert SECRET not in everything_drawn(at)


def test_pause_check_dry_run_edit_and_remove_keeping_its_files(files, monkeypatch):
    # paused, and the app's scheduler looks once (at its start): no run but those the test makes
    monkeypatch.setenv("KNOWLEDGE_SOURCES__CHECK_SECONDS", "3600")
    add_with_system(files, every_minutes=30, paused=True)
    DictSource.VANISH.discard("docs/vanishing.md")
    at = open_app(PAGE)
    button(at, "source-plan-button:team").click().run()
    assert any("**Dry run:** 2 added" in m.value for m in at.markdown)
    plan = next(d.value for d in at.dataframe if "change" in d.value.columns and "outcome" not in d.value.columns)
    assert sorted(plan["file"]) == ["docs/holidays.md", "docs/vanishing.md"]
    button(at, "source-plan-close:team").click().run()
    assert not any("Dry run" in m.value for m in at.markdown)
    button(at, "source-check:team").click().run()
    assert any(s.value.startswith("Connection: reached") for s in at.success)
    assert button(at, "source-pause:team").label == "▶️ Resume"
    button(at, "source-pause:team").click().run()
    assert any("team is resumed: every 30 min" in s.value for s in at.success)
    assert button(at, "source-pause:team").label == "⏸️ Pause"
    button(at, "source-pause:team").click().run()
    assert any("team is paused: every 30 min, paused" in s.value for s in at.success)

    edit = at.text_input(key="source-edit:team:password:0")
    assert edit.value == "" and edit.placeholder == "set: leave empty to keep it"
    at.number_input(key="source-edit:team:every").set_value(0)
    at.text_area(key="source-edit:team:exclude").input("*.tmp")
    button(at, "FormSubmitter:source-edit:team-Save changes").click().run()
    assert any("Saved the settings of team" in s.value for s in at.success)
    wb: Workbench = at.session_state["workbench"]
    rec = wb.sources.get("team")
    assert rec.every_minutes is None and rec.exclude == ("*.tmp",) and rec.secrets_set == ("password",)
    assert wb.sources.run_here("team").counts["added"] == 2

    DictSource.DOWN.add(files)
    button(at, "source-check:team").click().run()
    assert any(e.value.startswith("Not reached: the test server") for e in at.error)
    assert SECRET not in everything_drawn(at)  # the server's own words had it: taken out

    at.checkbox(key="source-keep:team").check().run()
    button(at, "source-remove:team").click().run()
    assert any("Its files stay in" in w.value for w in at.warning)
    button(at, "yes:source-remove:team").click().run()
    assert any("Removed the source team; its files stay in kb" in s.value for s in at.success)
    assert any("No source yet" in i.value for i in at.info)
    assert len(wb.store_files("kb")) == 2


def _team(name: str) -> System:
    system = System(load_settings())
    system.people.set_up_admin("root", PW)
    for who in ("ana", "bob", "wendy"):
        system.people.accounts.create(who, PW)
    root = Workbench(system).as_user(system.people.accounts.actor("root"))
    root.create_store("kb")
    root.share_store("kb", "user", "bob", "read")
    root.share_store("kb", "user", "wendy", "write")
    root.sources.add("team", "dict", "kb", {"name": name, "password": SECRET})
    return system


def signed_in(system: System, username: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["session_token"] = system.people.accounts.start_session(username)
    at.run()
    assert not at.exception, at.exception
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    return at


def test_who_sees_which_controls(files):
    system = _team(files)
    try:
        keys = {}
        for who in ("root", "wendy", "bob", "ana"):
            at = signed_in(system, who)
            keys[who] = {b.key for b in at.button if b.key}
            if who == "ana":
                assert any("No source yet" in i.value for i in at.info)
                assert not [d for d in at.dataframe if "source" in d.value.columns]
            else:
                assert at.selectbox(key="source-pick").value == "team"
            assert SECRET not in everything_drawn(at)
        assert {"source-run:team", "source-remove:team"} <= keys["root"]
        assert "source-run:team" in keys["wendy"] and "source-remove:team" not in keys["wendy"]
        assert not {k for k in keys["bob"] if k.startswith("source-") and k.endswith(":team")}
    finally:
        system.close()
