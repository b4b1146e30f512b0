"""Group memberships a provider keeps (migration 17, issue 41), on both catalog engines:
:meth:`Accounts.set_groups_from` sets one source's memberships exactly, audited, never touching
hand-made ones or another source's; a hand edit of a provider's membership is refused on every
surface (they all go through :class:`AccountDesk`) in words naming the provider."""

from __future__ import annotations

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument
from knowledge.system import System
from knowledge.workbench import Workbench

PW = "correct horse battery"


@pytest.fixture
def system(catalog_settings):
    s = System(catalog_settings, lambda m: HashEmbedder(dimension=32, max_tokens=64))
    yield s
    s.close()


def _members(system: System, source: str) -> list[tuple]:
    return [
        (e.target, e.detail["group"], e.detail["added"])
        for e in reversed(system.people.audit.events())
        if e.action == "group.member" and e.detail.get("source") == source
    ]


def test_a_source_sets_its_memberships_exactly_and_leaves_others_alone(system):
    accounts = system.people.accounts
    system.people.set_up_admin("root", PW)
    accounts.create("ana", PW)
    accounts.create_group("handbook")
    accounts.add_to_group("handbook", "ana")  # by hand
    assert accounts.set_groups_from("ana", "ldap", ["hr", "handbook", " staff ", "", "x" * 65]) == (["hr", "staff"], [])
    assert accounts.set_groups_from("ana", "oidc:https://id.example.org", ["hr", "sso-only"]) == (["sso-only"], [])
    assert sorted(accounts.groups_of("ana")) == ["handbook", "hr", "sso-only", "staff"]
    assert accounts.source_of("handbook", "ana") is None and accounts.source_of("hr", "ana") == "ldap"
    # the directory drops hr and handbook: only ldap's own membership goes
    assert accounts.set_groups_from("ana", "ldap", ["staff"]) == ([], ["hr"])
    assert sorted(accounts.groups_of("ana")) == ["handbook", "sso-only", "staff"]
    assert accounts.set_groups_from("ana", "ldap", ["staff"]) == ([], [])  # nothing changes, nothing recorded
    assert _members(system, "ldap") == [("ana", "hr", True), ("ana", "staff", True), ("ana", "hr", False)]
    assert _members(system, "oidc:https://id.example.org") == [("ana", "sso-only", True)]
    assert "hr" in accounts.groups()  # the group stays (others may be in it, stores shared with it)
    with pytest.raises(InvalidArgument, match="source"):
        accounts.set_groups_from("ana", " ", ["x"])


def test_a_hand_edit_of_a_providers_membership_is_refused_naming_it(system):
    people = system.people
    people.set_up_admin("root", PW)
    people.accounts.create("ana", PW)
    people.accounts.set_groups_from("ana", "ldap", ["hr"])
    people.accounts.set_groups_from("ana", "oidc:https://id.example.org", ["sales"])
    admin = Workbench(system).as_user(people.accounts.actor("root"))
    with pytest.raises(InvalidArgument, match=r"is from LDAP: change it in the directory"):
        admin.accounts.remove_member("hr", "ana")
    with pytest.raises(InvalidArgument, match=r"from LDAP"):
        admin.accounts.add_member("hr", "ANA")
    with pytest.raises(InvalidArgument, match=r"from the sign-on provider https://id.example.org: change it there"):
        admin.accounts.remove_member("sales", "ana")
    assert sorted(people.accounts.groups_of("ana")) == ["hr", "sales"]
    assert admin.accounts.group_sources() == {("hr", "ana"): "LDAP", ("sales", "ana"): "id.example.org"}
    admin.accounts.create_group("by-hand")
    admin.accounts.add_member("by-hand", "ana")  # a hand-made one stays editable
    admin.accounts.remove_member("by-hand", "ana")
    assert "by-hand" not in people.accounts.groups_of("ana")
