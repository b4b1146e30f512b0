"""Single sign-on's claim mapping on both catalog engines (knowledge.people.sso): a linked identity,
a verified e-mail match (linked then), an unverified one refused, auto-created members on and off, a
deleted account, the role the admin set kept, odd characters; and the [auth] section check."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import AuthenticationFailed, InvalidArgument
from knowledge.people.sso import Identity, SingleSignOn, SsoClaims, SsoExpired, provider_problems, providers
from knowledge.system import System

PW = "correct horse battery"
ISS = "https://idp.example.org"


@pytest.fixture
def system(catalog_settings):
    s = System(catalog_settings, lambda m: HashEmbedder(dimension=32, max_tokens=64))
    yield s
    s.close()


@pytest.fixture
def team(system):
    """The system with an admin root (root@example.org) and a member ana (Ana@Example.org)."""
    system.people.set_up_admin("root", PW, "The Admin")
    system.people.accounts.update("root", email="root@example.org")
    system.people.accounts.create("ana", PW, display_name="Ana", email="Ana@Example.org")
    return system


def sso(system: System, create: bool = False) -> SingleSignOn:
    return SingleSignOn(system.people.accounts, system.people.audit, create_members=create, session_hours=12)


def claims(sub: str, email: str | None = None, verified: object = True, **more: object) -> dict:
    out: dict = {"iss": ISS, "sub": sub, "is_logged_in": True, "iat": int(time.time()), **more}
    if email is not None:
        out["email"], out["email_verified"] = email, verified
    return out


def test_a_verified_email_links_the_account_then_the_subject_alone_finds_it(team):
    s = sso(team)
    actor, token = s.sign_in(claims("sub-ana", "ana@example.ORG", name="Someone Else"))
    assert (actor.username, actor.role, actor.display_name) == ("ana", "member", "Ana")  # nothing renamed
    assert team.people.accounts.session_actor(token).username == "ana"
    assert s.link_of("ana") == (ISS, "sub-ana")
    # the provider may change the address later: the link holds, by issuer and subject
    actor, _ = s.sign_in(claims("sub-ana", "ana.new@example.org"))
    assert actor.username == "ana"
    assert s.account(Identity.from_claims(claims("sub-ana")))[1] == "linked"
    events = team.people.audit.events(action="user.sign_in")
    assert sorted(e.detail.get("matched") for e in events if e.detail.get("via") == "sso") == ["email", "linked"]


def test_the_role_the_admin_set_is_kept(team):
    s = sso(team)
    actor, _ = s.sign_in(claims("sub-root", "root@example.org", role="member", roles=["member"]))
    assert actor.username == "root" and actor.role == "admin"
    team.people.accounts.update("ana", role="admin")
    assert s.sign_in(claims("sub-ana", "ana@example.org"))[0].role == "admin"
    team.people.accounts.update("ana", role="member")
    assert s.sign_in(claims("sub-ana"))[0].role == "member"  # linked: the role read now


@pytest.mark.parametrize("verified", [False, None, "false", "no"])
def test_an_unverified_email_matches_no_account(team, verified):
    s = sso(team)
    with pytest.raises(AuthenticationFailed, match=r"no account here for ana@example\.org"):
        s.sign_in(claims("sub-x", "ana@example.org", verified=verified))
    assert s.link_of("ana") is None
    failed = team.people.audit.events(action="user.sign_in_failed")
    assert failed and failed[0].detail["via"] == "sso"


def test_a_verified_email_given_as_the_string_true_counts(team):
    assert sso(team).sign_in(claims("sub-a", "ana@example.org", verified="true"))[0].username == "ana"


def test_no_account_is_refused_with_a_sentence_when_auto_create_is_off(team):
    with pytest.raises(AuthenticationFailed, match="Ask an admin to create one"):
        sso(team).sign_in(claims("sub-new", "new@example.org", name="New Person"))
    assert team.people.accounts.get("new@example.org") is None
    assert [u.username for u in team.people.accounts.users()] == ["ana", "root"]


def test_a_deactivated_account_is_refused_and_no_session_starts(team):
    s = sso(team)
    s.sign_in(claims("sub-ana", "ana@example.org"))
    team.people.accounts.set_active("ana", False)  # as SCIM's active: false does
    with team.catalog.cursor() as cur:
        before = cur.execute("SELECT count(*) FROM app_sessions").fetchone()[0]
    with pytest.raises(AuthenticationFailed, match="deactivated"):
        s.sign_in(claims("sub-ana"))
    with team.catalog.cursor() as cur:
        assert cur.execute("SELECT count(*) FROM app_sessions").fetchone()[0] == before == 0
    assert team.people.audit.events(action="user.sign_in_failed")[0].detail["reason"].startswith("This account is")
    team.people.accounts.set_active("ana", True)
    assert s.sign_in(claims("sub-ana"))[0].username == "ana"


def test_auto_create_makes_a_member_without_a_password_linked_to_the_identity(team):
    s = sso(team, create=True)
    actor, _ = s.sign_in(claims("sub-new", "New@Example.org", name="  New\tPerson ", role="admin"))
    assert (actor.username, actor.role, actor.display_name) == ("new@example.org", "member", "New Person")
    user = team.people.accounts.require("new@example.org")
    assert not user.has_password and user.email == "New@Example.org"
    with pytest.raises(AuthenticationFailed):  # no password works for it
        team.people.accounts.authenticate("new@example.org", "")
    assert s.sign_in(claims("sub-new"))[0].username == "new@example.org"  # found again by the link
    assert len(team.people.accounts.users()) == 3
    created = team.people.audit.events(action="user.create")
    assert any(e.target == "new@example.org" and e.detail.get("sso") == ISS for e in created)


def test_auto_create_does_not_take_over_an_account_by_an_unverified_email_or_a_name(team):
    s = sso(team, create=True)
    actor, _ = s.sign_in(claims("sub-imp", "ana@example.org", verified=False, preferred_username="ana"))
    assert actor.username == "ana-2" and actor.role == "member"
    assert team.people.accounts.require("ana-2").email is None  # an unverified address is not kept
    assert s.link_of("ana") is None


def test_a_deleted_accounts_identity_is_refused_then_created_anew_as_a_member(team):
    s = sso(team)
    team.people.accounts.update("ana", role="admin")
    assert s.sign_in(claims("sub-ana", "ana@example.org"))[0].role == "admin"
    root = team.people.accounts.actor("root")
    team.people.delete_user("ana", by=root)
    with pytest.raises(AuthenticationFailed, match="no account here"):
        s.sign_in(claims("sub-ana", "ana@example.org"))
    actor, _ = sso(team, create=True).sign_in(claims("sub-ana", "ana@example.org"))
    assert actor.username == "ana@example.org" and actor.role == "member"  # not the old admin role back


def test_an_email_naming_two_accounts_or_one_linked_elsewhere_is_refused(team):
    s = sso(team)
    s.sign_in(claims("sub-ana", "ana@example.org"))
    with pytest.raises(AuthenticationFailed, match="linked to another sign-on identity"):
        s.sign_in(claims("sub-other", "ana@example.org"))
    team.people.accounts.create("bo", PW, email="shared@example.org")
    team.people.accounts.create("cy", PW, email="SHARED@example.org")
    with pytest.raises(AuthenticationFailed, match="Several accounts"):
        s.sign_in(claims("sub-shared", "shared@example.org"))
    with pytest.raises(InvalidArgument, match="linked to the account ana"):
        s.link("bo", ISS, "sub-ana")
    s.unlink("ana")
    assert s.link_of("ana") is None


def test_odd_characters_in_names_and_emails(team):
    s = sso(team, create=True)
    team.people.accounts.create("zoe", PW, email="Zoë@exämple.org")
    nfd = "Zoe\u0308@exa\u0308mple.org"  # the same address, decomposed
    assert s.sign_in(claims("sub-zoe", nfd.upper()))[0].username == "zoe"
    actor, _ = s.sign_in(
        claims("sub-odd", "o'brien+x@example.org", name="Ｏ’Brien \x00\u202e<b>", preferred_username="o'brien")
    )
    assert actor.username.startswith("sso-") and len(actor.username) == 16  # neither fits a username
    assert actor.display_name == "Ｏ’Brien <b>"  # control and bidi characters dropped, the rest kept as text
    long = "x" * 80 + "@example.org"
    assert s.sign_in(claims("sub-long", long, name="日本 語"))[0].username == "日本.語"
    assert s.sign_in(claims("sub-none"))[0].username.startswith("sso-")
    assert s.sign_in(claims("sub-none"))[0].username == s.sign_in(claims("sub-none"))[0].username


@pytest.mark.parametrize("bad", [{}, {"iss": ISS}, {"sub": "x"}, {"iss": 3, "sub": "x"}, {"iss": " ", "sub": "x"}])
def test_claims_without_issuer_or_subject_are_refused(team, bad):
    with pytest.raises(AuthenticationFailed, match="did not say who you are"):
        sso(team, create=True).sign_in(bad)


def test_a_sign_on_older_than_the_session_hours_goes_back_to_the_provider(team):
    old = int(time.time() - timedelta(hours=13).total_seconds())
    with pytest.raises(SsoExpired):
        sso(team).sign_in(claims("sub-ana", "ana@example.org", iat=old))
    assert sso(team).link_of("ana") is None


GOOD = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "s" * 32,
    "client_id": "knowledge",
    "client_secret": "secret",
    "server_metadata_url": "https://login.example.org/.well-known/openid-configuration",
}


def test_the_auth_section_check():
    assert provider_problems(GOOD) == []
    assert providers(GOOD) == [providers(GOOD)[0]] and providers(GOOD)[0].key is None
    assert providers(GOOD)[0].label == "login.example.org"
    assert providers({**GOOD, "provider_name": "Acme SSO"})[0].label == "Acme SSO"
    assert provider_problems(None) and provider_problems({})
    assert any("cookie_secret" in p for p in provider_problems({k: v for k, v in GOOD.items() if k != "cookie_secret"}))
    assert any("redirect_uri" in p for p in provider_problems({**GOOD, "redirect_uri": "/oauth2callback"}))
    assert any("redirect_uri" in p for p in provider_problems({**GOOD, "redirect_uri": "http://x/other"}))
    assert any("server_metadata_url" in p for p in provider_problems({**GOOD, "server_metadata_url": "file:///x"}))
    assert providers({**GOOD, "client_id": ""}) == []
    named = {
        "redirect_uri": "http://127.0.0.1:{port}/oauth2callback",
        "cookie_secret": "x",
        "google": {k: GOOD[k] for k in ("client_id", "client_secret", "server_metadata_url")},
        "okta": {
            "client_id": "a",
            "client_secret": "b",
            "server_metadata_url": "https://o/.well-known/x",
            "provider_name": "Company login",
        },
    }
    assert [(p.key, p.label) for p in providers(named)] == [("google", "Google"), ("okta", "Company login")]
    assert any("[auth.bad_name]" in p for p in provider_problems({**named, "bad_name": named["google"]}))
    assert any(
        "[auth.okta] has no client_secret" in p
        for p in provider_problems({**named, "okta": {"client_id": "a", "server_metadata_url": "https://o/x"}})
    )


def sso_with(system: System, **settings: object) -> SingleSignOn:
    return SingleSignOn(
        system.people.accounts, system.people.audit, create_members=True, session_hours=12, claims=SsoClaims(**settings)
    )


def test_groups_follow_the_claim_at_each_sign_in_and_hand_made_ones_stay(team):
    s = sso_with(team, groups_claim="groups")
    accounts = team.people.accounts
    accounts.create_group("handbook")
    accounts.add_to_group("handbook", "ana")
    actor, _ = s.sign_in(claims("sub-ana", "ana@example.org", groups=["hr", "staff"]))
    assert actor.groups == {"handbook", "hr", "staff"}
    assert accounts.sources() == {("hr", "ana"): f"oidc:{ISS}", ("staff", "ana"): f"oidc:{ISS}"}
    actor, _ = s.sign_in(claims("sub-ana", groups=["staff"]))  # removed at the provider: removed here
    assert actor.groups == {"handbook", "staff"}
    assert s.sign_in(claims("sub-ana", groups="staff"))[0].groups == {"handbook", "staff"}  # one string
    assert s.sign_in(claims("sub-ana"))[0].groups == {"handbook"}  # no claim: the provider lists none
    changes = [
        (e.detail["group"], e.detail["added"], e.detail["source"])
        for e in reversed(team.people.audit.events(action="group.member"))
        if "source" in e.detail
    ]
    assert changes == [
        ("hr", True, f"oidc:{ISS}"),
        ("staff", True, f"oidc:{ISS}"),
        ("hr", False, f"oidc:{ISS}"),
        ("staff", False, f"oidc:{ISS}"),
    ]
    s.sign_in(claims("sub-ana", groups=["hr"]))
    with pytest.raises(InvalidArgument, match=r"from the sign-on provider https://idp\.example\.org: change it there"):
        accounts.remove_from_group("hr", "ana")


def test_a_group_map_renames_and_filters_and_keep_never_removes(team):
    s = sso_with(team, groups_claim="groups", group_map={"/corp/hr": "hr", "/corp/all": "staff"}, groups_removed="keep")
    actor, _ = s.sign_in(claims("sub-ana", "ana@example.org", groups=["/corp/hr", "/corp/all", "/corp/secret"]))
    assert actor.groups == {"hr", "staff"}  # an unmapped group is ignored
    assert "/corp/secret" not in team.people.accounts.groups()
    assert s.sign_in(claims("sub-ana", groups=["/corp/all"]))[0].groups == {"hr", "staff"}  # keep


def test_a_role_map_sets_the_role_at_each_sign_in_but_never_demotes_the_last_admin(team):
    s = sso_with(team, roles_claim="roles", role_map={"kb-admin": "admin"})
    actor, _ = s.sign_in(claims("sub-ana", "ana@example.org", roles=["kb-admin", "other"]))
    assert actor.role == "admin"
    assert s.sign_in(claims("sub-ana", roles=["other"]))[0].role == "member"
    updates = [e.detail for e in team.people.audit.events(action="user.update") if e.detail.get("via") == "sso"]
    assert updates == [{"role": "member", "via": "sso"}, {"role": "admin", "via": "sso"}]
    assert s.sign_in(claims("sub-root", "root@example.org", roles=[]))[0].role == "admin"  # the last admin stays
    assert sso(team).sign_in(claims("sub-ana", roles=["kb-admin"]))[0].role == "member"  # no map: the admin's role


def test_the_sso_claim_settings_reach_single_sign_on(team, catalog_settings):
    from knowledge.config import load_settings
    from knowledge.errors import ConfigError
    from knowledge.people import People

    accounts = catalog_settings.accounts.model_copy(
        update={"sso_groups_claim": "groups", "sso_roles_claim": "roles", "sso_role_map": {"boss": "admin"}}
    )
    settings = catalog_settings.model_copy(update={"accounts": accounts})
    s = People(team.catalog, settings).single_sign_on()
    assert (s.claims.groups_claim, s.claims.role_map) == ("groups", {"boss": "admin"})
    actor, _ = s.sign_in(claims("sub-ana", "ana@example.org", groups=["hr"], roles=["boss"]))
    assert actor.groups == {"hr"} and actor.role == "admin"
    with pytest.raises(ConfigError, match="sso_roles_claim"):
        load_settings(accounts={"sso_role_map": {"boss": "admin"}})
