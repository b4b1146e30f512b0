"""LDAP sign-in against a real OpenLDAP server (Debian's slapd, one per module: tests/helpers/ldap.py):
the directory password signs an account in, its groups come from the directory (and go when the
directory drops them, hand-made ones staying), a wrong password is throttled exactly like a local
one, an unreachable directory says so, StartTLS and LDAPS check the server's certificate, and a
hostile username is escaped (RFC 4515)."""

from __future__ import annotations

import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import AuthenticationFailed
from knowledge.people import People
from knowledge.people.directory import Directory, DirectoryUnavailable, filter_value
from knowledge.system import System
from tests.helpers.api import free_port
from tests.helpers.ldap import BASE, PEOPLE, Slapd, start_slapd

PW = "correct horse battery"
ANA_PW, BO_PW = PEOPLE["ana"][0], PEOPLE["bo"][0]


@pytest.fixture(scope="module")
def slapd(tmp_path_factory):
    server = start_slapd(tmp_path_factory.mktemp("slapd"))
    yield server
    server.stop()


def ldap_settings(slapd: Slapd, **over) -> dict:
    return {
        "url": slapd.url,
        "user_dn": f"uid={{username}},ou=people,{BASE}",
        "group_base": f"ou=groups,{BASE}",
        "timeout": 5,
        **over,
    }


@pytest.fixture
def make(tmp_path):
    """``make(ldap={...}, sleep=list)``: a System on a fresh catalog with those ``accounts.ldap`` settings."""
    systems: list[System] = []

    def build(ldap: dict, waits: list | None = None) -> tuple[System, People]:
        settings = load_settings(data_dir=tmp_path / f"data{len(systems)}", accounts={"ldap": ldap})
        system = System(settings, lambda m: HashEmbedder(dimension=32, max_tokens=64))
        systems.append(system)
        people = People(system.catalog, settings, sleep=waits.append) if waits is not None else system.people
        people.set_up_admin("root", PW)
        return system, people

    yield build
    for s in systems:
        s.close()


def test_a_directory_password_signs_in_with_the_directorys_groups_and_the_admins_role(slapd, make):
    _, people = make(ldap_settings(slapd))
    people.accounts.create("ana", None)  # the admin made the account, without a password
    people.accounts.create("svc", PW, role="admin")  # a local password stays the one that counts
    actor, token = people.sign_in("Ana", ANA_PW)
    assert actor.username == "ana" and actor.role == "member" and actor.groups == {"hr", "staff"}
    assert people.session_actor(token).username == "ana"
    assert people.accounts.sources() == {("hr", "ana"): "ldap", ("staff", "ana"): "ldap"}
    events = [(e.action, e.actor, e.detail.get("group")) for e in reversed(people.audit.events())]
    assert ("group.member", "ana", "hr") in events and events[-1] == ("user.sign_in", "ana", None)
    with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
        people.sign_in("svc", PEOPLE["svc"][0])  # the directory's password is not svc's here
    assert people.sign_in("svc", PW)[0].role == "admin"
    with pytest.raises(AuthenticationFailed, match="no account here"):
        people.sign_in("bo", BO_PW)  # the directory knows bo, but no admin made an account
    assert people.accounts.get("bo") is None


def test_groups_follow_the_directory_at_each_sign_in_and_hand_made_ones_stay(slapd, make):
    _, people = make(ldap_settings(slapd))
    people.accounts.create("bo", None)
    people.accounts.create_group("handbook")
    people.accounts.add_to_group("handbook", "bo")
    assert people.sign_in("bo", BO_PW)[0].groups == {"engineering", "handbook", "staff"}
    slapd.modify(
        f"dn: cn=staff,ou=groups,{BASE}\nchangetype: modify\ndelete: member\n"
        f"member: uid=bo,ou=people,{BASE}\n"
        f"\ndn: cn=hr,ou=groups,{BASE}\nchangetype: modify\nadd: member\nmember: uid=bo,ou=people,{BASE}\n"
    )
    try:
        actor, _ = people.sign_in("bo", BO_PW)
        assert actor.groups == {"engineering", "handbook", "hr"}
        assert people.accounts.source_of("handbook", "bo") is None and people.accounts.source_of("hr", "bo") == "ldap"
    finally:
        slapd.modify(
            f"dn: cn=staff,ou=groups,{BASE}\nchangetype: modify\nadd: member\nmember: uid=bo,ou=people,{BASE}\n"
            f"\ndn: cn=hr,ou=groups,{BASE}\nchangetype: modify\ndelete: member\nmember: uid=bo,ou=people,{BASE}\n"
        )


def test_a_wrong_directory_password_is_throttled_like_a_local_one(slapd, make):
    waits: list[float] = []
    _, people = make(ldap_settings(slapd), waits)
    people.accounts.create("ana", None)
    people.accounts.create("carla", PW)
    for name in ("ana", "carla"):
        for _ in range(4):
            with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
                people.sign_in(name, "wrong password")
    assert waits == [1.0, 2.0, 4.0, 1.0, 2.0, 4.0]  # the same counter and delays for both
    with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
        people.sign_in("ana", "")  # an empty password never reaches the directory (an anonymous bind)
    failed = [e.actor for e in people.audit.events(action="user.sign_in_failed")]
    assert failed.count("ana") == 5 and failed.count("carla") == 4
    assert people.sign_in("ana", ANA_PW)[0].username == "ana" and waits[-1] == 8.0
    assert people.accounts.delay("ana") == 0  # a success clears the failures
    with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
        people.sign_in("nobody", "x")  # a name the directory does not know: the same words


def test_an_unreachable_directory_says_so(make):
    _, people = make({"url": f"ldap://127.0.0.1:{free_port()}", "user_dn": "uid={username},dc=x", "timeout": 2})
    people.accounts.create("ana", None)
    with pytest.raises(DirectoryUnavailable, match="cannot be reached") as caught:
        people.sign_in("ana", ANA_PW)
    assert "Wrong" not in str(caught.value)
    assert people.accounts.delay("ana") == 0  # not counted as a wrong password
    [event] = people.audit.events(action="user.sign_in_failed")
    assert event.detail == {"reason": "directory unavailable"}


@pytest.mark.parametrize("how", ["starttls", "ldaps"])
def test_tls_with_the_tests_ca_works_and_an_untrusted_certificate_is_refused(slapd, make, how):
    port = slapd.url.rsplit(":", 1)[1]
    url = f"ldap://localhost:{port}" if how == "starttls" else slapd.ldaps_url
    tls = {"url": url, "start_tls": how == "starttls"}
    _, people = make(ldap_settings(slapd, **tls, ca_file=str(slapd.ca_file)))
    people.accounts.create("ana", None)
    assert people.sign_in("ana", ANA_PW)[0].groups == {"hr", "staff"}
    stranger = Directory(
        load_settings(accounts={"ldap": ldap_settings(slapd, **tls, ca_file=str(slapd.stranger_ca_file))}).accounts.ldap
    )
    with pytest.raises(DirectoryUnavailable, match="certificate"):
        stranger.authenticate("ana", ANA_PW)


def test_a_certificate_that_does_not_name_the_server_is_refused(slapd):
    ldap = ldap_settings(slapd, url=slapd.ldaps_other_name_url, ca_file=str(slapd.ca_file))
    with pytest.raises(DirectoryUnavailable, match="certificate for another name"):  # a trusted CA, not 127.0.0.2's
        Directory(load_settings(accounts={"ldap": ldap}).accounts.ldap).authenticate("ana", ANA_PW)


def test_a_search_as_a_service_account_escapes_a_hostile_username(slapd, make, monkeypatch):
    monkeypatch.setenv("TEST_LDAP_BIND_PW", PEOPLE["svc"][0])
    ldap = ldap_settings(
        slapd,
        user_dn=None,
        search_base=f"ou=people,{BASE}",
        bind_dn=f"uid=svc,ou=people,{BASE}",
        bind_password_env="TEST_LDAP_BIND_PW",
        create_members=True,
    )
    _, people = make(ldap)
    actor, _ = people.sign_in("bo", BO_PW)  # no account yet: create_members makes a member one
    user = people.accounts.require("bo")
    assert actor.groups == {"engineering", "staff"} and user.role == "member" and not user.has_password
    assert (user.display_name, user.email) == ("Bo Berg", "bo@example.org")
    [made] = people.audit.events(action="user.create", actor="bo")
    assert made.detail == {"role": "member", "via": "ldap"}
    assert filter_value("*)(uid=*") == "\\2a\\29\\28uid=\\2a"
    directory = Directory(load_settings(accounts={"ldap": ldap}).accounts.ldap)
    for hostile in ("*)(uid=*", "*", "an*"):
        with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
            directory.authenticate(hostile, ANA_PW)  # unescaped, "*" would match ana (or everyone)
    with pytest.raises(AuthenticationFailed, match="Wrong username or password"):
        people.sign_in("*)(uid=*", ANA_PW)
    monkeypatch.delenv("TEST_LDAP_BIND_PW")
    with pytest.raises(DirectoryUnavailable, match="TEST_LDAP_BIND_PW"):
        directory.authenticate("ana", ANA_PW)


@pytest.mark.parametrize(
    ("ldap", "words"),
    [
        ({"url": "ldap://ldap.example.org", "user_dn": "uid={username}"}, "in clear"),
        ({"url": "ldaps://h", "start_tls": True, "user_dn": "uid={username}"}, "start_tls is for ldap://"),
        ({"url": "ldaps://h"}, "how to find a person's entry"),
        ({"url": "ldaps://h", "user_dn": "uid=x", "search_base": "dc=x"}, "not both"),
        ({"url": "ldaps://h", "user_dn": "uid=ana"}, "needs {username}"),
        ({"url": "http://h", "user_dn": "uid={username}"}, "is not ldap://"),
        ({"url": "ldaps://h", "search_base": "dc=x", "bind_dn": "cn=s"}, "go together"),
        ({"url": "ldaps://h", "search_base": "dc=x", "bind_dn": "cn=s", "bind_password_env": "KNOWLEDGE_X"}, "outside"),
    ],
)
def test_settings_that_would_not_work_or_not_be_safe_are_refused(ldap, words):
    from knowledge.errors import ConfigError

    with pytest.raises(ConfigError, match=words):
        load_settings(accounts={"ldap": ldap})


def test_the_settings_come_from_the_environment_too(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_ACCOUNTS__LDAP__URL", "ldaps://ldap.example.org:636")
    monkeypatch.setenv("KNOWLEDGE_ACCOUNTS__LDAP__USER_DN", "{username}@example.org")
    monkeypatch.setenv("KNOWLEDGE_ACCOUNTS__LDAP__TIMEOUT", "3")
    ldap = load_settings().accounts.ldap
    assert (ldap.url, ldap.user_dn, ldap.timeout) == ("ldaps://ldap.example.org:636", "{username}@example.org", 3.0)
    from knowledge.errors import ConfigError

    monkeypatch.setenv("KNOWLEDGE_ACCOUNTS__LDAP__TYPO", "x")
    with pytest.raises(ConfigError, match="KNOWLEDGE_ACCOUNTS__LDAP__TYPO"):
        load_settings()


def test_a_directory_account_changes_its_password_in_the_directory_only(slapd, make):
    from knowledge.errors import InvalidArgument
    from knowledge.workbench import Workbench

    system, people = make(ldap_settings(slapd))
    people.accounts.create("ana", None)
    ana = Workbench(system).as_user(people.accounts.actor("ana"))
    with pytest.raises(InvalidArgument, match="directory"):
        ana.accounts.set_password("ana", "a new local password", current=ANA_PW)
    assert not people.accounts.require("ana").has_password  # a directory that disables her still counts
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.accounts.set_password("ana", "a new local password")  # an admin's choice: then it is local
    assert people.sign_in("ana", "a new local password")[0].username == "ana"


def test_a_deactivated_account_is_refused_with_its_directory_password_and_keeps_its_groups(slapd, make):
    """SCIM's deactivation (Accounts.set_active) holds for a directory sign-in too: the right directory
    password starts no session and leaves the account's groups as they were."""
    _, people = make(ldap_settings(slapd))
    people.accounts.create("ana", None)
    people.sign_in("ana", ANA_PW)
    people.accounts.create_group("handbook")
    people.accounts.add_to_group("handbook", "ana")
    before = people.accounts.actor("ana").groups
    people.accounts.set_active("ana", False)
    with pytest.raises(AuthenticationFailed, match="deactivated"):
        people.sign_in("ana", ANA_PW)
    people.accounts.set_active("ana", True)
    assert people.sign_in("ana", ANA_PW)[0].groups == before
