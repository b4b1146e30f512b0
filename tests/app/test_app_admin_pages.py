"""The admins' pages as a new user met them in a trial (issue 40): the People page stays on the tab
an action was taken on, the Audit page says in words what happened, and a member sent to the Settings
page is told why they are not there."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest, element_tree

from knowledge.workbench import Workbench
from tests.helpers.app import button, fresh_caches, open_app, use_fake_model

PW = "a long enough password"


@pytest.fixture(autouse=True)
def _app(monkeypatch):
    use_fake_model(monkeypatch)
    with fresh_caches():
        yield


@pytest.fixture
def team() -> Workbench:
    """The app's own workbench with accounts on: admin root, member ana, the group "crew"."""
    at = open_app()
    wb: Workbench = at.session_state["workbench"]
    wb.accounts.set_up_admin("root", PW, "Root Admin")
    wb.accounts.create_user("ana", PW, display_name="Ana Lima")
    return wb


def signed_in(username: str, page: str | None = None) -> AppTest:
    at = open_app()
    at.text_input(key="sign-in-username").input(username)
    at.text_input(key="sign-in-password").input(PW)
    next(b for b in at.button if b.label == "Sign in").click().run()
    assert not at.exception, at.exception
    assert at.session_state["actor"].username == username
    if page:
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def open_tab(at: AppTest) -> str:
    """The label of the tab the page opens on (the one its tab bar shows as selected)."""

    def blocks(node):
        for child in getattr(node, "children", {}).values():
            yield child
            yield from blocks(child)

    for block in blocks(at.main):
        proto = block.proto if isinstance(block, element_tree.Block) else None
        if proto is not None and proto.WhichOneof("type") == "tab_container":
            tabs = list(block.children.values())
            return tabs[proto.tab_container.default_tab_index].label
    raise AssertionError("the page has no tabs")


def test_people_stays_on_groups_after_a_group_action(team):
    at = signed_in("root", "pages/people.py")
    assert open_tab(at) == "Accounts"
    at.session_state["people-tab"] = "Groups"  # what a click on the Groups tab sends
    at.run()
    at.text_input(key="new-group").input("crew")
    next(b for b in at.button if b.label == "Create the group").click().run()
    assert not at.exception, at.exception
    assert "Created the group crew." in [s.value for s in at.success]
    assert open_tab(at) == "Groups"
    at.selectbox(key="group-person").select("ana")
    button(at, "group-add").click().run()
    assert "Added ana to crew." in [s.value for s in at.success]
    assert open_tab(at) == "Groups"
    button(at, "group-remove").click().run()
    assert "Removed ana from crew." in [s.value for s in at.success]
    assert open_tab(at) == "Groups"


def test_the_audit_page_says_group_changes_and_times_in_words(team):
    root = team.as_user(team.actor_of("root"))
    root.accounts.create_group("crew")
    root.accounts.add_member("crew", "ana")
    root.accounts.remove_member("crew", "ana")
    root.accounts.invite("member")

    at = signed_in("root", "pages/audit.py")
    table = at.dataframe[0].value
    details = dict(zip(table["what"], table["detail"], strict=True))
    members = list(table[table["what"] == "changed a group"]["detail"])
    assert members == ["removed from crew", "added to crew"]  # newest first
    invite = details["made an invitation link"]
    assert re.fullmatch(r"role: member; expires: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", invite), invite
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", table["time"].iloc[0])
    assert not any("True" in d or "False" in d for d in table["detail"])


def test_every_recorded_action_is_said_in_words_and_a_quota_set_can_be_filtered(team):
    from knowledge.people import ACTION_WORDS, ACTIONS

    assert set(ACTION_WORDS) == set(ACTIONS)
    root = team.as_user(team.actor_of("root"))
    root.set_quota("user", "ana", "bytes", 1_000_000)
    root.accounts.create_group("crew")
    at = signed_in("root", "pages/audit.py")
    at.selectbox(key="audit-action").select("quota.").run()
    table = at.dataframe[0].value
    assert list(table["what"]) == ["set a quota"]
    assert table["target"].iloc[0] == "user:ana" and table["detail"].iloc[0] == "bytes: 1.0 MB"


def test_the_people_page_builds_the_invitation_link_on_the_public_address(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_APP__PUBLIC_URL", "https://kb.example.org/team")
    wb: Workbench = open_app().session_state["workbench"]
    wb.accounts.set_up_admin("root", PW, "Root Admin")
    at = signed_in("root", "pages/people.py")
    button(at, "make-invite").click().run()
    assert not at.exception, at.exception
    (link,) = [c.value for c in at.code]
    assert link.startswith("https://kb.example.org/team/?invite=") and len(link) > len(
        "https://kb.example.org/team/?invite="
    )
    wb.accounts.accept_invitation(link.split("?invite=")[1], "cy", PW)  # the token in it works


def test_a_member_at_the_settings_url_is_told_it_is_for_admins(team):
    at = signed_in("ana")
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("pages/settings.py")  # the page itself is not served to a member
    at.switch_page("pages/admins_only.py").run()  # what /settings serves them (registered there first)
    assert not at.exception, at.exception
    assert [t.value for t in at.title] == ["🔒 Settings"]
    assert [w.value for w in at.warning] == ["Settings are for admins: only an admin may change the settings."]
    assert not at.text_input and not at.number_input and not at.toggle  # no setting to change


def test_a_new_group_is_picked_and_deleting_a_group_asks_first(team):
    """What the trial met: after "Create the group" the picker still showed the old group, so the next
    action went to it; and "Delete the group" deleted at once (an account's deletion asks first)."""
    wb = team
    wb.accounts.create_group("research")
    wb.accounts.add_member("research", "ana")
    at = signed_in("root", "pages/people.py")
    at.session_state["people-tab"] = "Groups"
    at.run()
    assert at.selectbox(key="edit-group").value == "research"
    at.text_input(key="new-group").input("ops team")
    next(b for b in at.button if b.label == "Create the group").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="edit-group").value == "ops team"  # the group just made
    assert button(at, "group-delete").disabled  # not before the person says yes
    at.checkbox(key="delete-group-sure-ops team").check().run()
    button(at, "group-delete").click().run()
    assert "Deleted the group ops team." in [s.value for s in at.success]
    assert wb.accounts.groups() == {"research": ["ana"]}  # the other group and its member stay
    assert not at.checkbox(key="delete-group-sure-research").value  # the next group's yes is not pre-ticked


def test_a_providers_memberships_say_where_they_come_from_on_people_and_audit(team):
    team._system.people.accounts.set_groups_from("ana", "ldap", ["hr"])  # as a directory sign-in does
    team.accounts.create_group("crew")
    team.accounts.add_member("crew", "ana")
    at = signed_in("root", "pages/people.py")
    groups = next(d.value for d in at.dataframe if "group" in d.value.columns)  # the Groups tab's table
    members = dict(zip(groups["group"], groups["members"], strict=True))
    assert members == {"crew": "ana", "hr": "ana (from LDAP)"}
    at.switch_page("pages/audit.py").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert list(table[table["what"] == "changed a group"]["detail"]) == ["added to crew", "added to hr (from LDAP)"]


def test_an_admin_deactivates_and_activates_an_account_on_people(team):
    """The People page shows who is deactivated (SCIM's ``active: false``, or an admin here) and turns
    it either way: deactivating ends the person's session at their next request."""
    ana = signed_in("ana")
    at = signed_in("root", "pages/people.py")
    status = dict(zip(at.dataframe[0].value["username"], at.dataframe[0].value["status"], strict=True))
    assert status == {"ana": "active", "root": "active"}
    at.selectbox(key="edit-user").set_value("root").run()
    assert at.selectbox(key="edit-role-root").value == "admin"
    at.selectbox(key="edit-user").set_value("ana").run()
    assert at.selectbox(key="edit-role-ana").value == "member"  # hers, not the account shown before
    button(at, "deactivate-user").click().run()
    assert not at.exception, at.exception
    assert "Deactivated Ana Lima" in " ".join(s.value for s in at.success)
    status = dict(zip(at.dataframe[0].value["username"], at.dataframe[0].value["status"], strict=True))
    assert status["ana"] == "deactivated"
    assert team.find_user("ana").active is False
    ana.run()  # her next request: signed out
    assert "actor" not in ana.session_state or ana.session_state["actor"] is None or ana.session_state["actor"].local
    assert any(b.label == "Sign in" for b in ana.button)
    at.selectbox(key="edit-user").set_value("ana").run()
    button(at, "activate-user").click().run()
    assert not at.exception, at.exception
    assert team.find_user("ana").active is True
    at.selectbox(key="edit-user").set_value("root").run()
    assert not [b for b in at.button if b.key == "deactivate-user"]  # not oneself
