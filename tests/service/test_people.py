"""People on both catalog engines: accounts, per-account sign-in throttle, sessions that expire,
invitations, groups, store sharing enforced by the workbench view, API keys, the audit trail, and a
deleted user's stores passing to an admin."""

from __future__ import annotations

from datetime import timedelta

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import AuthenticationFailed, FileNotFoundInStore, InvalidArgument, PermissionDenied, StoreNotFound
from knowledge.people import LOCAL_ADMIN
from knowledge.system import System

PW = "correct horse battery"


@pytest.fixture
def system(catalog_settings):
    s = System(catalog_settings, lambda m: HashEmbedder(dimension=32, max_tokens=64))
    yield s
    s.close()


@pytest.fixture
def team(system, wb):
    """An admin, members ana and bo, ana's private store with one file."""
    admin = system.people.set_up_admin("Root", PW, "The Admin")
    system.people.accounts.create("ana", PW, display_name="Ana")
    system.people.accounts.create("bo", PW, display_name="Bo")
    ana, bo = wb.as_user(system.people.accounts.actor("ana")), wb.as_user(system.people.accounts.actor("bo"))
    ana.ingest_file("hr", b"The parental leave policy grants sixteen weeks.", "leave.txt")
    return wb, admin, ana, bo


def test_private_store_is_invisible_to_another_member(system, team):
    wb, _, ana, bo = team
    assert ana.store_names() == ["hr"] and bo.store_names() == []
    assert [s.record.name for s in bo.list_stores()] == []
    fid = ana.store_files("hr")[0].file_id
    for attempt in (
        lambda: bo.search("hr", "leave"),
        lambda: bo.store_files("hr"),
        lambda: bo.get_store("hr"),
        lambda: bo.search_stores(["hr"], "leave"),
        lambda: bo.delete_file("hr", fid),
        lambda: bo.delete_name("hr", fid, "leave.txt"),
        lambda: bo.delete_store("hr"),
        lambda: bo.portable.export_store("hr", "/tmp/x.kb"),
    ):
        with pytest.raises(StoreNotFound):
            attempt()
    for make in (lambda: bo.ingest_file("hr", b"x", "x.txt"), lambda: bo.create_store("hr")):
        with pytest.raises(InvalidArgument, match="not available"):  # one namespace: taken, not whose
            make()
    assert not bo.store_exists("hr") and bo.store_record("hr") is None and bo.file_records("hr") == []
    assert bo.file_record("hr", fid) is None and bo.stores_using_file(fid) == []
    with pytest.raises(FileNotFoundInStore):
        bo.read_file(fid)
    assert [u.file.id for u in bo.list_files()] == [] and bo.stored_files() == []
    with pytest.raises(FileNotFoundInStore):  # not even its existence is confirmed
        bo.delete_stored_file(fid, from_stores=True)
    assert ana.store_files("hr")[0].file_id == fid  # nothing of ana's was touched
    # the admin sees everything (accounts.admins_see_all)
    assert wb.as_user(system.people.accounts.actor("root")).store_names() == ["hr"]


def test_read_only_sharing_lets_search_but_not_ingest(system, team):
    wb, _, ana, bo = team
    ana.share_store("hr", "user", "BO", "read")
    bo = wb.as_user(system.people.accounts.actor("bo"))
    assert bo.store_names() == ["hr"] and bo.search("hr", "parental leave")
    fid = bo.store_files("hr")[0].file_id
    with pytest.raises(PermissionDenied, match="may not change the store"):
        bo.ingest_file("hr", b"new text", "new.txt")
    with pytest.raises(PermissionDenied):
        bo.delete_file("hr", fid)
    with pytest.raises(PermissionDenied):
        bo.share_store("hr", "user", "bo", "write")
    with pytest.raises(PermissionDenied):
        bo.delete_store("hr")
    ana.share_store("hr", "user", "bo", "write")
    assert bo.ingest_file("hr", b"More policy text about leave.", "more.txt").ok
    ana.unshare_store("hr", "user", "bo")
    assert bo.store_names() == []


def test_group_and_everyone_grants(system, team):
    wb, _, ana, _ = team
    system.people.accounts.create_group("People Ops")
    system.people.accounts.add_to_group("People Ops", "bo")
    ana.share_store("hr", "group", "People Ops", "read")
    assert wb.as_user(system.people.accounts.actor("bo")).store_names() == ["hr"]
    system.people.accounts.remove_from_group("People Ops", "bo")
    assert wb.as_user(system.people.accounts.actor("bo")).store_names() == []
    ana.share_store("hr", "everyone", "", "read")
    assert wb.as_user(system.people.accounts.actor("bo")).store_names() == ["hr"]


def test_sign_in_is_throttled_per_account_and_sessions_expire(system, wb):
    waits: list[float] = []
    people = type(system.people)(system.catalog, wb.settings, sleep=waits.append)
    people.set_up_admin("root", PW)
    people.accounts.create("ana", PW)
    for _ in range(4):
        with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
            people.sign_in("ana", "wrong password")
    with pytest.raises(AuthenticationFailed):
        people.sign_in("nobody", PW)  # an unknown name: the same words
    assert waits == [1.0, 2.0, 4.0]
    people.sign_in("root", PW)  # another account is not slowed
    assert waits == [1.0, 2.0, 4.0]
    actor, token = people.sign_in("ANA", PW)  # the wait is served, then the success clears it
    assert waits[-1] == 8.0 and actor.username == "ana" and people.accounts.delay("ana") == 0
    assert people.accounts.session_actor(token).username == "ana"
    with system.catalog.cursor() as cur:  # the session's time is up
        cur.execute("UPDATE app_sessions SET expires = expires - ?", [timedelta(hours=13)])
    with pytest.raises(AuthenticationFailed, match="expired"):
        people.accounts.session_actor(token)


def test_odd_names_and_passwords(system, wb):
    system.people.set_up_admin("root", PW)
    user = system.people.accounts.create("  José.Ñúñez@example.org ", "pässwörd ✓ 🔑 long", display_name="José Ñúñez")
    assert user.username == "josé.ñúñez@example.org"
    decomposed = "pa\u0308sswo\u0308rd ✓ 🔑 long"  # the same password typed with combining marks
    assert system.people.sign_in("JOSE\u0301.ñúñez@example.org", decomposed)[0].username == user.username
    for bad in ("", "has space", "a\x00b", "x" * 65, "semi;colon", "Local"):
        with pytest.raises(InvalidArgument):
            system.people.accounts.create(bad, PW)
    with pytest.raises(InvalidArgument, match="at least"):
        system.people.accounts.create("short", "abc")
    with pytest.raises(InvalidArgument, match="taken"):
        system.people.accounts.create("ROOT", PW)
    with pytest.raises(InvalidArgument):
        system.people.set_up_admin("second", PW)  # set-up runs once


def test_invitation_works_once(system, wb):
    admin = system.people.set_up_admin("root", PW)
    token = system.people.accounts.invite("member", admin.username)
    user = system.people.accounts.accept(token, "cy", PW, "Cy")
    assert user.role == "member"
    with pytest.raises(AuthenticationFailed, match="not valid"):
        system.people.accounts.accept(token, "dee", PW)


def test_api_keys_act_as_their_user_and_revoke_at_once(system, team):
    key, secret = system.people.keys.create("ana", "laptop script")
    assert secret.startswith("kn-") and key.hint == secret[-4:]
    assert system.people.key_actor(secret).username == "ana"
    assert system.people.keys.list("ana")[0].last_used is not None
    assert system.people.keys.revoke(key.id)
    with pytest.raises(AuthenticationFailed):
        system.people.key_actor(secret)
    with pytest.raises(AuthenticationFailed):
        system.people.key_actor("kn-not-a-key")


def test_deleted_users_stores_pass_to_an_admin(system, team):
    admin = team[1]
    root = system.people.accounts.actor(admin.username)
    assert system.people.delete_user("ana", root) == ["hr"]
    assert system.people.sharing.owner("hr") == "root"
    with pytest.raises(AuthenticationFailed):
        system.people.accounts.actor("ana")
    with pytest.raises(InvalidArgument, match="last admin"):
        system.people.delete_user("root", root)


def test_audit_trail_records_who_did_what(system, team):
    _, _, ana, bo = team
    ana.share_store("hr", "user", "bo", "write")
    bo.ingest_file("hr", b"Bo's note on leave.", "bo.txt")
    fid = bo.store_files("hr")[0].file_id
    bo.delete_file("hr", fid)
    events = [(e.actor, e.action, e.store) for e in system.people.audit.events(store="hr")]
    assert events[:4] == [
        ("bo", "file.delete", "hr"),
        ("bo", "file.ingest", "hr"),
        ("ana", "store.share", "hr"),
        ("ana", "file.ingest", "hr"),
    ]
    assert ("ana", "store.create", "hr") in events


def test_local_admin_and_templates_need_an_admin(team):
    wb, _, ana, _ = team
    assert wb.actor is LOCAL_ADMIN and wb.store_names() == ["hr"]  # the CLI's default sees everything
    with pytest.raises(PermissionDenied):
        ana.delete_template("anything")
    with pytest.raises(PermissionDenied):
        ana.portable.backup("/tmp/all.tar")
    with pytest.raises(AttributeError):
        ana.portable.parts  # type: ignore[attr-defined]  # noqa: B018 - a desk holds no parts


def test_a_new_store_name_may_not_sit_on_someones_memories(wb):
    with pytest.raises(InvalidArgument, match="may not hold '~'"):
        wb.create_store("agent-memory~bo")
    with pytest.raises(InvalidArgument, match="may not hold '~'"):
        wb.ingest_file("notes~ana", b"text", "a.txt")
    assert wb.store_names() == []


def test_a_refused_store_name_leaves_no_owner_and_no_audit_event(system, team):
    _, _, ana, _ = team
    before = len(system.people.audit.events())
    for attempt in (
        lambda: ana.ingest_file("~notes", b"text", "a.txt"),
        lambda: ana.create_store("~notes"),
        lambda: ana.submit_batch("~notes", [("a.txt", b"text")]),
    ):
        with pytest.raises(InvalidArgument, match="may not hold"):
            attempt()
    assert system.people.sharing.owner("~notes") is None and len(system.people.audit.events()) == before


def test_a_folder_batch_is_checked_before_the_folder_is_read_and_a_new_store_is_the_submitters(system, team, tmp_path):
    """Workbench.submit_folder checks, walks, claims and starts in one call: a store the person may
    not write to is refused before the folder is read (nothing queued, nothing recorded)."""
    _, _, ana, bo = team
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe rota for the night shift.")
    before = len(system.people.audit.events())
    with pytest.raises(InvalidArgument, match="not available"):  # bo may not see ana's store, nor take its name
        bo.submit_folder("hr", tmp_path / "missing")  # not walked: a missing folder would say "not a folder"
    assert len(system.people.audit.events()) == before and [f.file_name for f in ana.store_files("hr")] == ["leave.txt"]
    job = bo.submit_folder("ops", folder)
    assert job.wait(60) and [r.name for r in job.results] == ["a.md"]
    assert bo.level("ops") == "owner" and ana.store_names() == ["hr"]
