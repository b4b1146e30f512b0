"""Issue 28 on the pages, headless (AppTest): two members and an admin signed in by account
(a session token in ``session_state["session_token"]``, as the sign-in leaves it), a member's private store invisible to
the other on every page, read-only and read-write sharing and the controls each shows, the owner's
Share control, files, agent memory and settings for members, and no sharing clutter before
accounts exist."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.errors import FileNotFoundInStore, PermissionDenied, StoreNotFound
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import APP, fresh_caches, page_text, use_fake_model
from tests.helpers.app_system import preparing
from tests.helpers.env import prepared_data, use_prepared_data

PW = "correct horse battery"
LEAVE = b"# Leave\n\nThe parental leave policy grants sixteen weeks of paid leave.\n"
ROTA = b"# Rota\n\nThe on-call rota changes every Monday morning.\n"


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    use_fake_model(monkeypatch, 8)
    with fresh_caches():
        yield


def _build_team(work: Path) -> None:
    with preparing() as system:
        system.people.set_up_admin("root", PW, "The Admin")
        system.people.accounts.create("ana", PW, display_name="Ana")
        system.people.accounts.create("bo", PW, display_name="Bo")
        view(system, "ana").ingest_file("hr", LEAVE, "leave.md")
        view(system, "bo").ingest_file("ops", ROTA, "rota.md")


@pytest.fixture(scope="module")
def team_data(tmp_path_factory) -> Path:
    """The team's data folder, made once for the module."""
    return prepared_data(tmp_path_factory, "sharing-team", _build_team)


@pytest.fixture
def team(team_data) -> Iterator[System]:
    """An admin root, members ana (Ana) and bo (Bo); ana's private store ``hr``, bo's ``ops``: a copy
    of the module's prepared data folder, this test's own."""
    use_prepared_data(team_data)
    system = System(load_settings())
    yield system
    system.close()


def view(system: System, username: str) -> Workbench:
    return Workbench(system, actor=system.people.accounts.actor(username))


def signed_in(system: System | None, username: str | None, page: str) -> AppTest:
    """The app run as ``username`` (signed in by account), switched to ``page``."""
    at = AppTest.from_file(APP, default_timeout=60)
    if username is not None:
        assert system is not None
        at.session_state["session_token"] = system.people.accounts.start_session(username)
    at.run()
    assert not at.exception, at.exception
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


def keys(at: AppTest, kind: str) -> set[str]:
    return {w.key for w in getattr(at, kind) if w.key}


def test_a_private_store_is_invisible_to_another_member_on_every_page(team):
    at = signed_in(team, "bo", "pages/stores.py")
    assert at.selectbox(key="store_selected").options == ["ops"]
    assert "hr" not in page_text(at) and "leave.md" not in page_text(at)
    at = signed_in(team, "bo", "pages/search.py")
    assert at.selectbox(key="pg_store").options == ["ops"]
    at = signed_in(team, "bo", "pages/evaluate.py")
    assert not at.error and all("hr" not in (s.options or []) for s in at.selectbox)
    at = signed_in(team, "bo", "pages/files.py")
    assert "leave.md" not in page_text(at) and all("leave.md" not in str(d.value) for d in at.dataframe)
    at = signed_in(team, "bo", "pages/chat.py")
    assert all("hr" not in m.options for m in at.sidebar.multiselect)
    # a deep link to ana's store is no way in either
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["session_token"] = team.people.accounts.start_session("bo")
    at.query_params["store"] = "hr"
    at.query_params["q"] = "parental leave"
    at.run()
    at.switch_page("pages/search.py").run()
    assert not at.exception and at.selectbox(key="pg_store").value == "ops"
    # ana sees her own store, and the admin sees every store
    assert signed_in(team, "ana", "pages/stores.py").selectbox(key="store_selected").options == ["hr"]
    assert set(signed_in(team, "root", "pages/stores.py").selectbox(key="store_selected").options) == {"hr", "ops"}


def test_read_only_sharing_lets_search_but_shows_no_ingest_controls(team):
    view(team, "ana").share_store("hr", "user", "bo", "read")
    at = signed_in(team, "bo", "pages/stores.py")
    at.selectbox(key="store_selected").select("hr").run()
    assert not at.exception
    assert "🤝 shared with you by Ana · read-only" in [c.value for c in at.caption]
    assert "upload:hr" not in keys(at, "file_uploader")
    labels = {b.label for b in at.button} | {b.label for b in at.form_submit_button}
    assert not labels & {"Ingest folder", "Add web page", "Add folder", "🗑️ Delete store", "Re-embed", "Share", "Move"}
    assert not any(k.startswith(("del-pick:hr", "share-kind:hr", "reembed-to:hr")) for k in keys(at, "selectbox"))
    assert "Prepare export" in labels  # reading includes exporting
    # searching works
    at = signed_in(team, "bo", "pages/search.py")
    assert at.selectbox(key="pg_store").options == ["hr", "ops"]
    # and a direct call refuses what the page does not offer
    bo = view(team, "bo")
    assert bo.search("hr", "parental leave")
    fid = bo.store_files("hr")[0].file_id
    for attempt in (
        lambda: bo.ingest_file("hr", b"x", "x.md"),
        lambda: bo.delete_file("hr", fid),
        lambda: bo.delete_name("hr", fid, "leave.md"),
        lambda: bo.delete_store("hr"),
        lambda: bo.delete_stored_file(fid, from_stores=True),
        lambda: bo.share_store("hr", "everyone", "", "read"),
    ):
        with pytest.raises(PermissionDenied):
            attempt()
    # the Files page lists the file, and says why it offers no delete
    at = signed_in(team, "bo", "pages/files.py")
    assert "leave.md" in str(at.dataframe[0].value)
    at.query_params["file"] = fid  # its details, as a click on its row shows them
    at.run()
    assert any("shared with you read-only" in c.value for c in at.caption)
    assert not any((b.key or "").startswith("delete:") for b in at.button)


def test_read_write_sharing_hides_only_the_owners_controls(team):
    view(team, "ana").share_store("hr", "user", "bo", "write")
    at = signed_in(team, "bo", "pages/stores.py")
    at.selectbox(key="store_selected").select("hr").run()
    assert "🤝 shared with you by Ana · read and write" in [c.value for c in at.caption]
    assert "upload:hr" in keys(at, "file_uploader")
    labels = {b.label for b in at.button}
    assert {"Ingest folder", "Add web page"} <= {b.label for b in at.form_submit_button}
    assert "🗑️ Delete store" not in labels and "Share" not in labels and "Re-embed" not in labels
    assert any(k.startswith("del-pick:hr") for k in keys(at, "selectbox"))  # deleting a file: yes
    bo = view(team, "bo")
    bo.ingest_file("hr", b"Bo adds a note about leave.", "bo.md")
    with pytest.raises(PermissionDenied):
        bo.delete_store("hr")


def test_the_owner_shares_and_takes_back_from_the_page(team):
    at = signed_in(team, "ana", "pages/stores.py")
    assert "👤 yours · private: only you" in [c.value for c in at.caption]
    at.selectbox(key="share-kind:hr").select("a person").run()
    at.selectbox(key="share-user:hr").select("bo").run()
    at.radio(key="share-level:hr").set_value("read and write").run()
    next(b for b in at.button if b.key == "share-go:hr").click().run()
    assert not at.exception
    assert any("Shared hr with Bo (read and write)" in s.value for s in at.success)
    assert [(g.kind, g.principal, g.level) for g in team.people.sharing.grants("hr")] == [("user", "bo", "write")]
    assert "👤 yours · shared with Bo (read and write)" in [c.value for c in at.caption]
    assert signed_in(team, "bo", "pages/stores.py").selectbox(key="store_selected").options == ["hr", "ops"]
    at = signed_in(team, "ana", "pages/stores.py")
    next(b for b in at.button if b.key == "unshare:hr:user:bo").click().run()
    assert not at.exception and team.people.sharing.grants("hr") == []
    assert signed_in(team, "bo", "pages/stores.py").selectbox(key="store_selected").options == ["ops"]
    # everyone, read only
    at = signed_in(team, "ana", "pages/stores.py")
    at.selectbox(key="share-kind:hr").select("everyone").run()
    next(b for b in at.button if b.key == "share-go:hr").click().run()
    assert [(g.kind, g.level) for g in team.people.sharing.grants("hr")] == [("everyone", "read")]
    assert "hr" in signed_in(team, "bo", "pages/stores.py").selectbox(key="store_selected").options


def test_a_member_cannot_delete_another_members_file(team):
    bo, ana = view(team, "bo"), view(team, "ana")
    fid = ana.store_files("hr")[0].file_id
    with pytest.raises(StoreNotFound):
        bo.delete_file("hr", fid)
    with pytest.raises(StoreNotFound):
        bo.delete_name("hr", fid, "leave.md")
    with pytest.raises(FileNotFoundInStore):
        bo.delete_stored_file(fid, from_stores=True)
    assert [f.file_name for f in ana.store_files("hr")] == ["leave.md"]


def test_members_change_no_settings_or_templates(team):
    with pytest.raises(ValueError, match="Could not find a navigation page"):  # no Settings page for a member
        signed_in(team, "bo", "pages/settings.py")
    at = signed_in(team, "bo", "pages/stores.py")
    at.session_state["stores-tab"] = "Templates"  # what a click on the Templates tab sends
    at.run()
    assert any("Only an admin creates, changes or deletes templates" in i.value for i in at.info)
    assert "tpl-pick" not in keys(at, "selectbox")
    at = signed_in(team, "root", "pages/settings.py")
    assert not any("Only an admin" in i.value for i in at.info) and at.text_input


def test_memories_are_private_to_their_user(team):
    at = signed_in(team, "bo", "pages/memory.py")
    at.text_area(key="mem_text").input("bo's locker code is 4711")
    next(b for b in at.button if b.label == "Remember").click().run()
    assert not at.exception and any("Remembered" in s.value for s in at.success)
    at = signed_in(team, "ana", "pages/memory.py")
    assert any("No memories yet" in i.value for i in at.info)
    at.text_input(key="mem_query").input("locker code")
    next(b for b in at.button if b.key == "mem_recall").click().run()
    assert not at.exception and "4711" not in page_text(at)
    assert any("Nothing recalled" in w.value for w in at.warning)
    # ana cannot reach a store's chunks by naming it as her memory store
    at.text_input(key="mem_collection").input("hr").run()
    assert not at.exception and "4711" not in page_text(at)
    at = signed_in(team, "bo", "pages/memory.py")
    assert "4711" not in page_text(at) and any(d for d in at.dataframe)  # bo's dataset is listed


def test_before_accounts_no_owner_or_sharing_shows():
    wb = Workbench(load_settings())
    wb.ingest_file("notes", LEAVE, "leave.md")
    wb.close()
    at = signed_in(None, None, "pages/stores.py")
    text = page_text(at)
    assert "🤝" not in text and "👤" not in text
    assert "share-kind:notes" not in keys(at, "selectbox")
    table = next(d.value for d in at.dataframe if "store" in d.value.columns)
    assert "owner" not in table.columns and "access" not in table.columns
    assert "upload:notes" in keys(at, "file_uploader")
