"""``python -m knowledge --user NAME ...`` and the people commands (users, groups, keys, share,
unshare, owner, audit), in-process, with the fake embedding model; passwords through
``--password-stdin``. A team: admin root, members ana and bo, ana's private store ``hr``."""

from __future__ import annotations

import getpass
import io
import json
import os
import socket
import sys
import unicodedata
from pathlib import Path

import pytest

from knowledge.cli import main
from knowledge.errors import AuthenticationFailed
from knowledge.system import System

PW = "correct horse battery"
#: How the audit trail names the local admin of a command line (issue 44): the OS user and host.
CLI_PERSON = f"cli:{getpass.getuser()}@{socket.gethostname()}"


@pytest.fixture(autouse=True)
def _fake_model(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")


def run(capsys, monkeypatch, *argv: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``main(argv)`` with ``stdin`` as standard input; ``(exit code, stdout, stderr)``, never a traceback."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def add_user(capsys, monkeypatch, name: str, *options: str, password: str = PW) -> None:
    code, _, err = run(capsys, monkeypatch, "users", "add", name, "--password-stdin", *options, stdin=password + "\n")
    assert code == 0, err


def make_team(capsys, monkeypatch, tmp_path: Path) -> Path:
    """root (admin), ana and bo (members); ana's private store ``hr`` with one file. Returns its folder."""
    add_user(capsys, monkeypatch, "root", "--role", "admin")
    add_user(capsys, monkeypatch, "ana")
    add_user(capsys, monkeypatch, "bo")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.txt").write_text("The parental leave policy grants sixteen weeks of paid leave.\n")
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "ingest", "hr", str(docs / "leave.txt"))
    assert code == 0, err
    return docs


@pytest.fixture
def team(capsys, monkeypatch, tmp_path):
    return make_team(capsys, monkeypatch, tmp_path)


def cli_json(capsys, monkeypatch, *argv: str):
    code, out, err = run(capsys, monkeypatch, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def store_names(capsys, monkeypatch, *user: str) -> list[str]:
    return [s["name"] for s in cli_json(capsys, monkeypatch, *user, "stores")]


def open_system() -> System:
    """The System of the data folder the commands used (the environment's settings); the caller closes it."""
    return System()


def test_the_first_account_must_be_an_admin(capsys, monkeypatch):
    code, _, err = run(capsys, monkeypatch, "users", "add", "ana", "--password-stdin", stdin=PW + "\n")
    assert code == 2 and "The first account must be an admin" in err and "only an admin can add" in err
    assert cli_json(capsys, monkeypatch, "users", "list") == []
    add_user(capsys, monkeypatch, "Root", "--role", "admin", "--display-name", "The Admin", "--email", "r@x.org")
    add_user(capsys, monkeypatch, "ana")
    users = {u["username"]: u for u in cli_json(capsys, monkeypatch, "users", "list")}
    assert set(users) == {"root", "ana"}
    assert users["root"]["role"] == "admin" and users["root"]["display_name"] == "The Admin"
    assert users["root"]["email"] == "r@x.org" and users["ana"]["role"] == "member"
    code, _, err = run(capsys, monkeypatch, "users", "add", "ANA", "--password-stdin", stdin=PW + "\n")
    assert code == 2 and "taken" in err


def test_a_member_cannot_see_another_members_private_store(team, capsys, monkeypatch, tmp_path):
    assert store_names(capsys, monkeypatch, "--user", "ana") == ["hr"]
    assert store_names(capsys, monkeypatch, "--user", "bo") == []
    _, _, missing = run(capsys, monkeypatch, "--user", "bo", "search", "nosuch", "leave")
    missing = missing.replace("nosuch", "hr")
    bundle = tmp_path / "hr.kb"
    for argv in (
        ["search", "hr", "leave"],
        ["files", "hr"],
        ["export", "hr", str(bundle)],
        ["delete-store", "hr"],
        ["delete-file", "hr", "leave.txt"],
        ["owner", "hr"],
        ["share", "hr", "--user", "bo"],
        ["eval", "hr", str(tmp_path / "q.tsv")],
        ["sync", "hr", str(tmp_path / "docs"), "--dry-run"],
    ):
        (tmp_path / "q.tsv").write_text("leave?\tleave.txt\n")
        code, _, err = run(capsys, monkeypatch, "--user", "bo", *argv)
        assert code == 2, argv
        assert err == missing, argv  # the same words as a store that does not exist
    assert not bundle.exists()
    # KNOWLEDGE_USER acts as --user does
    monkeypatch.setenv("KNOWLEDGE_USER", "bo")
    assert store_names(capsys, monkeypatch) == []
    monkeypatch.delenv("KNOWLEDGE_USER")
    # nothing of ana's was touched; the local admin and an admin see it
    assert [f["name"] for f in cli_json(capsys, monkeypatch, "--user", "ana", "files", "hr")] == ["leave.txt"]
    assert store_names(capsys, monkeypatch) == ["hr"] and store_names(capsys, monkeypatch, "--user", "root") == ["hr"]


def test_read_only_sharing_lets_search_but_not_ingest(team, capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "--user", "ana", "share", "hr", "--user", "BO")
    assert code == 0 and "Shared 'hr' with bo (read only)" in out
    hits = cli_json(capsys, monkeypatch, "--user", "bo", "search", "hr", "parental leave")
    assert hits and hits[0]["file_name"] == "leave.txt"
    code, out, err = run(capsys, monkeypatch, "--user", "bo", "ingest", "hr", str(team / "leave.txt"))
    assert code == 2 and "may not change the store 'hr': it is shared with them read-only" in err and "file" not in out
    code, _, err = run(capsys, monkeypatch, "--user", "bo", "delete-store", "hr")
    assert code == 2 and "may not delete" in err
    code, _, err = run(capsys, monkeypatch, "--user", "bo", "share", "hr", "--everyone")
    assert code == 2 and "may not" in err
    assert run(capsys, monkeypatch, "--user", "ana", "share", "hr", "--user", "bo", "--write")[0] == 0
    (team / "more.txt").write_text("More policy text about leave and holidays.\n")
    code, _, err = run(capsys, monkeypatch, "--user", "bo", "ingest", "hr", str(team / "more.txt"))
    assert code == 0, err
    assert sorted(cli_json(capsys, monkeypatch, "owner", "hr")["grants"], key=str) == [
        {"kind": "user", "principal": "bo", "level": "write"}
    ]
    assert run(capsys, monkeypatch, "--user", "ana", "unshare", "hr", "--user", "bo")[0] == 0
    assert store_names(capsys, monkeypatch, "--user", "bo") == []
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "unshare", "hr", "--user", "bo")
    assert code == 2 and "not shared with bo" in err


def test_groups_share_a_store_with_their_members(team, capsys, monkeypatch):
    assert run(capsys, monkeypatch, "groups", "add", "  People  Ops ")[0] == 0
    assert run(capsys, monkeypatch, "groups", "add-member", "People Ops", "Bo")[0] == 0
    assert cli_json(capsys, monkeypatch, "groups", "list") == [{"group": "People Ops", "members": ["bo"], "sources": {}}]
    assert run(capsys, monkeypatch, "--user", "ana", "share", "hr", "--group", "People Ops")[0] == 0
    assert store_names(capsys, monkeypatch, "--user", "bo") == ["hr"]
    code, _, err = run(capsys, monkeypatch, "groups", "add-member", "nosuch", "bo")
    assert code == 2 and "There is no group 'nosuch'" in err
    assert run(capsys, monkeypatch, "groups", "remove-member", "People Ops", "bo")[0] == 0
    assert store_names(capsys, monkeypatch, "--user", "bo") == []
    code, _, err = run(capsys, monkeypatch, "groups", "remove-member", "People Ops", "bo")
    assert code == 2 and "not in the group" in err
    assert run(capsys, monkeypatch, "groups", "delete", "People Ops")[0] == 0
    assert (
        cli_json(capsys, monkeypatch, "groups", "list") == []
        and cli_json(capsys, monkeypatch, "owner", "hr")["grants"] == []
    )


def test_keys_create_list_revoke(team, capsys, monkeypatch):
    made = cli_json(capsys, monkeypatch, "keys", "create", "bo", "--name", " my laptop ")
    secret = made["secret"]
    assert secret.startswith("kn-") and made["name"] == "my laptop" and made["active"]
    mine = cli_json(capsys, monkeypatch, "--user", "ana", "keys", "create", "ana", "--name", "script")
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "keys", "create", "bo", "--name", "x")
    assert code == 2 and "Only an admin may make a key for another account" in err
    system = open_system()
    try:
        assert system.people.key_actor(secret).username == "bo"  # the key acts as bo
    finally:
        system.close()
    keys = {k["id"]: k for k in cli_json(capsys, monkeypatch, "keys", "list")}
    assert set(keys) == {made["id"], mine["id"]} and "secret" not in keys[made["id"]]
    assert keys[made["id"]]["last_used"] is not None and keys[mine["id"]]["last_used"] is None
    assert [k["id"] for k in cli_json(capsys, monkeypatch, "--user", "ana", "keys", "list")] == [mine["id"]]
    assert [k["id"] for k in cli_json(capsys, monkeypatch, "keys", "list", "bo")] == [made["id"]]
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "keys", "list", "bo")
    assert code == 2 and "Only an admin" in err
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "keys", "revoke", made["id"])
    assert code == 2 and f"There is no API key {made['id']!r}" in err  # bo's key is not even confirmed
    code, out, _ = run(capsys, monkeypatch, "--user", "bo", "keys", "revoke", made["id"])
    assert code == 0 and "Revoked" in out
    system = open_system()
    try:
        with pytest.raises(AuthenticationFailed):
            system.people.key_actor(secret)
    finally:
        system.close()
    assert cli_json(capsys, monkeypatch, "keys", "list", "bo")[0]["revoked"] is not None
    code, _, err = run(capsys, monkeypatch, "keys", "revoke", made["id"])
    assert code == 2 and "revoked already" in err


def test_deleting_a_user_hands_their_stores_to_an_admin(team, capsys, monkeypatch):
    code, _, err = run(capsys, monkeypatch, "users", "delete", "ana", "--to", "bo")
    assert code == 2 and "pass to an admin" in err
    code, out, err = run(capsys, monkeypatch, "users", "delete", "ana", "--to", "root")
    assert code == 0, err
    assert "Deleted ana; their stores passed to root: hr." in out
    assert cli_json(capsys, monkeypatch, "owner", "hr")["owner"] == "root"
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "stores")
    assert code == 2 and "There is no account 'ana'" in err
    code, _, err = run(capsys, monkeypatch, "users", "delete", "root")
    assert code == 2 and "last admin" in err
    code, _, err = run(capsys, monkeypatch, "users", "set-role", "root", "member")
    assert code == 2 and "last admin" in err
    assert run(capsys, monkeypatch, "users", "set-role", "bo", "admin")[0] == 0
    assert store_names(capsys, monkeypatch, "--user", "bo") == ["hr"]  # an admin sees every store
    assert run(capsys, monkeypatch, "--user", "bo", "owner", "hr", "bo")[0] == 0
    assert cli_json(capsys, monkeypatch, "owner", "hr")["owner"] == "bo"


def test_audit_shows_who_did_what(team, capsys, monkeypatch):
    assert run(capsys, monkeypatch, "--user", "ana", "share", "hr", "--user", "bo")[0] == 0
    events = cli_json(capsys, monkeypatch, "audit")
    seen = {(e["actor"], e["action"], e["store"], e["target"]) for e in events}
    assert {
        ("ana", "store.create", "hr", None),
        ("ana", "store.share", "hr", "bo"),
        (CLI_PERSON, "user.create", None, "ana"),  # the local admin at this command line, by name
        ("root", "user.create", None, "root"),
    } <= seen
    assert any(e["actor"] == "ana" and e["action"] == "file.ingest" and e["store"] == "hr" for e in events)
    ana = cli_json(capsys, monkeypatch, "audit", "--user", "ANA")
    assert ana and {e["actor"] for e in ana} == {"ana"}
    shares = cli_json(capsys, monkeypatch, "--user", "root", "audit", "--action", "store.share")
    assert [(e["actor"], e["target"], e["detail"]["level"]) for e in shares] == [("ana", "bo", "read")]
    assert {e["action"] for e in cli_json(capsys, monkeypatch, "audit", "--action", "store.")} <= {
        "store.create",
        "store.share",
    }
    assert len(cli_json(capsys, monkeypatch, "audit", "--limit", "2")) == 2
    assert cli_json(capsys, monkeypatch, "audit", "--store", "hr", "--since", "2999-01-01") == []
    assert cli_json(capsys, monkeypatch, "audit", "--store", "hr", "--since", "2000-01-01T00:00+02:00")
    code, out, _ = run(capsys, monkeypatch, "audit")
    assert code == 0 and "store.share" in out and "who" in out
    code, _, err = run(capsys, monkeypatch, "audit", "--since", "yesterday")
    assert code == 2 and "is not a date" in err
    mine = cli_json(capsys, monkeypatch, "--user", "bo", "audit")  # a member: the stores they use, their account
    assert ("ana", "store.share", "hr") in {(e["actor"], e["action"], e["store"]) for e in mine}
    assert all(e["store"] == "hr" if e["store"] else "bo" in (e["actor"], e["target"]) for e in mine)
    assert len(mine) < len(events)


def test_a_member_is_refused_the_admins_commands(team, capsys, monkeypatch, tmp_path):
    for argv in (
        ["users", "list"],
        ["users", "invite"],
        ["users", "set-role", "bo", "admin"],
        ["users", "delete", "ana"],
        ["groups", "add", "g"],
        ["groups", "list"],
        ["worker", "--once"],
        ["backup", str(tmp_path / "b.tar")],
        ["users", "passwd", "ana", "--password-stdin"],
    ):
        code, _, err = run(capsys, monkeypatch, "--user", "bo", *argv, stdin=PW + "2\n")
        assert code == 2 and err.startswith("error: Only an admin may "), (argv, err)
    code, _, err = run(capsys, monkeypatch, "--user", "bo", "users", "add", "cy", "--password-stdin", stdin=PW + "\n")
    assert code == 2 and "Only an admin may add an account" in err
    assert {u["username"] for u in cli_json(capsys, monkeypatch, "users", "list")} == {"root", "ana", "bo"}
    # a member may give themselves a new password
    code, _, err = run(
        capsys, monkeypatch, "--user", "bo", "users", "passwd", "bo", "--password-stdin", stdin="a new long password\n"
    )
    assert code == 0, err
    system = open_system()
    try:
        assert system.people.accounts.authenticate("bo", "a new long password").username == "bo"
    finally:
        system.close()


def test_an_unknown_user_is_refused(capsys, monkeypatch, tmp_path):
    code, _, err = run(capsys, monkeypatch, "--user", "nobody", "stores")
    assert code == 2 and "There is no account 'nobody'" in err and "no account exists yet" in err
    add_user(capsys, monkeypatch, "root", "--role", "admin")
    for argv in (
        ["--user", "nobody", "stores"],
        ["stores", "--user", "nobody"],
        ["--user", "no body", "templates"],
        ["--user", "nobody", "users", "list"],
        ["users", "list", "--user", "nobody"],
    ):
        code, out, err = run(capsys, monkeypatch, *argv)
        assert code == 2 and "to act as" in err and "`users list` shows them" in err and out == "", argv
    monkeypatch.setenv("KNOWLEDGE_USER", "nobody")
    code, _, err = run(capsys, monkeypatch, "stores")
    assert code == 2 and "There is no account 'nobody'" in err
    code, _, err = run(capsys, monkeypatch, "password")  # a command that acts as no one
    assert code == 2 and "`password` does not act as an account" in err
    monkeypatch.setenv("KNOWLEDGE_USER", "  ")  # blank: the local admin
    assert run(capsys, monkeypatch, "stores")[0] == 0
    code, _, err = run(capsys, monkeypatch, "--user", "root", "restore", str(tmp_path / "x.tar"))
    assert code == 2 and "`restore` does not act as an account; leave out --user" in err


def test_odd_names_and_passwords(capsys, monkeypatch):
    decomposed = unicodedata.normalize("NFD", "Zoë")
    password = "  pässwörd 🦉 " + unicodedata.normalize("NFD", "é") + "  "
    add_user(capsys, monkeypatch, f"  {decomposed}  ", "--role", "admin", "--display-name", "  Zoë  🦉 ", password=password)
    users = cli_json(capsys, monkeypatch, "users", "list")
    assert [(u["username"], u["display_name"]) for u in users] == [("zoë", "Zoë 🦉")]
    system = open_system()
    try:  # the same password typed composed signs in; the spaces around it are part of it
        assert system.people.accounts.authenticate("ZOË", unicodedata.normalize("NFC", password)).username == "zoë"
        with pytest.raises(AuthenticationFailed):
            system.people.accounts.authenticate("zoë", password.strip())
    finally:
        system.close()
    assert run(capsys, monkeypatch, "--user", " ZOË ", "users", "list")[0] == 0  # any case and form acts as zoë
    assert run(capsys, monkeypatch, "--user", decomposed, "users", "list")[0] == 0
    for name, password, words in (
        ("🦉", PW, "is not a username"),
        ("a b", PW, "is not a username"),
        ("x" * 65, PW, "is not a username"),
        ("cy", "short", "at least"),
        ("cy", "          ", "at least"),
        ("cy", "", "standard input is empty"),
    ):
        code, _, err = run(
            capsys, monkeypatch, "users", "add", name, "--password-stdin", stdin=password + "\n" if password else ""
        )
        assert code == 2 and words in err, (name, password, err)
    monkeypatch.setattr(sys, "stdin", io.StringIO(PW + "\n"))
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    code, _, err = run(capsys, monkeypatch, "users", "add", "cy")  # piped without --password-stdin
    assert code == 2 and "--password-stdin" in err
    assert [u["username"] for u in cli_json(capsys, monkeypatch, "users", "list")] == ["zoë"]


def test_invite_prints_a_token_the_app_accepts(team, capsys, monkeypatch):
    invite = cli_json(capsys, monkeypatch, "users", "invite", "--role", "admin")
    assert invite["link"] == f"?invite={invite['token']}" and invite["role"] == "admin"
    code, out, _ = run(capsys, monkeypatch, "users", "invite")
    assert code == 0 and "?invite=" in out and "valid once until" in out
    system = open_system()
    try:
        assert system.people.accounts.accept(invite["token"], "cy", PW).role == "admin"
    finally:
        system.close()


def test_user_acts_the_same_on_the_postgresql_catalog(pg_database, settings, capsys, monkeypatch, tmp_path):
    """The CLI on a team's shared catalog (``catalog.url``, pgvector stores): ``--user`` restricts it as on DuckDB."""
    from urllib.parse import urlencode

    from psycopg.conninfo import conninfo_to_dict

    from tests.helpers.pg import pg_catalog_settings

    pg = pg_catalog_settings(settings)
    parts = conninfo_to_dict(pg.catalog.url)  # key=value: as a URL, as a user writes it
    url = f"postgresql://{parts.get('user', '')}@/{parts['dbname']}?" + urlencode(
        {k: parts[k] for k in ("host", "port") if parts.get(k)}
    )
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(settings.data_root))
    monkeypatch.setenv("KNOWLEDGE_CATALOG__URL", url)
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "pgvector")
    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__URL", url)
    make_team(capsys, monkeypatch, tmp_path)
    system = open_system()
    try:
        assert system.catalog.describe().startswith("postgresql")  # the team's shared catalog, not a DuckDB file
    finally:
        system.close()
    assert not (Path(os.environ["KNOWLEDGE_DATA_DIR"]) / "catalog.duckdb").exists()
    assert store_names(capsys, monkeypatch, "--user", "ana") == ["hr"]
    assert store_names(capsys, monkeypatch, "--user", "bo") == []
    code, _, err = run(capsys, monkeypatch, "--user", "bo", "search", "hr", "leave")
    assert code == 2 and "does not exist" in err
    assert run(capsys, monkeypatch, "--user", "ana", "share", "hr", "--user", "bo")[0] == 0
    assert cli_json(capsys, monkeypatch, "--user", "bo", "search", "hr", "parental leave")
    code, _, err = run(capsys, monkeypatch, "--user", "bo", "ingest", "hr", str(tmp_path / "docs" / "leave.txt"))
    assert code == 2 and "may not change the store" in err
    assert {(e["actor"], e["action"]) for e in cli_json(capsys, monkeypatch, "audit", "--store", "hr")} >= {
        ("ana", "store.create"),
        ("ana", "store.share"),
    }


def test_a_providers_membership_is_shown_and_not_edited_by_hand(team, capsys, monkeypatch):
    from knowledge.config import load_settings
    from knowledge.system import System

    system = System(load_settings())
    try:
        system.people.accounts.set_groups_from("bo", "ldap", ["hr"])
    finally:
        system.close()
    code, out, _ = run(capsys, monkeypatch, "groups", "list")
    assert code == 0 and "bo (from LDAP)" in out
    for verb in ("remove-member", "add-member"):
        code, _, err = run(capsys, monkeypatch, "groups", verb, "hr", "bo")
        assert code == 2 and "is from LDAP: change it in the directory" in err
    assert cli_json(capsys, monkeypatch, "groups", "list") == [{"group": "hr", "members": ["bo"], "sources": {"bo": "LDAP"}}]


def test_an_account_without_a_password_for_single_sign_on_or_the_directory(team, capsys, monkeypatch):
    """``users add NAME --no-password``: the account exists, no password of its own signs it in here
    (the directory's or the sign-on provider's does, docs/team.md), and the first admin still needs one."""
    from knowledge.config import load_settings
    from knowledge.errors import AuthenticationFailed
    from knowledge.system import System

    code, out, err = run(capsys, monkeypatch, "users", "add", "dora", "--no-password")
    assert code == 0 and "Without a password here" in out, err
    system = System(load_settings())
    try:
        assert system.people.accounts.get("dora") is not None
        with pytest.raises(AuthenticationFailed):
            system.people.sign_in("dora", "")
    finally:
        system.close()
    code, _, err = run(capsys, monkeypatch, "users", "add", "eve", "--no-password", "--password-stdin", stdin=PW + "\n")
    assert code == 2 and "not both" in err


def test_an_admin_deactivates_and_reactivates_an_account_from_the_command_line(team, capsys, monkeypatch):
    """``users deactivate`` / ``users activate``: what SCIM's ``active`` does, without a directory (the
    trial found a deactivated account could not be let in again once the SCIM token was revoked)."""
    from knowledge.config import load_settings
    from knowledge.errors import AuthenticationFailed
    from knowledge.system import System

    code, out, err = run(capsys, monkeypatch, "users", "deactivate", "bo")
    assert code == 0 and "bo is deactivated" in out, err
    system = System(load_settings())
    try:
        with pytest.raises(AuthenticationFailed, match="deactivated"):
            system.people.sign_in("bo", PW)
    finally:
        system.close()
    assert run(capsys, monkeypatch, "--user", "ana", "users", "activate", "bo")[0] == 2  # a member may not
    code, out, err = run(capsys, monkeypatch, "users", "activate", "bo")
    assert code == 0 and "may sign in again" in out, err
    system = System(load_settings())
    try:
        assert system.people.sign_in("bo", PW)[0].username == "bo"
        actions = [e.action for e in system.people.audit.events() if e.target == "bo"]
        assert actions[:2] == ["user.activate", "user.deactivate"]
    finally:
        system.close()
