"""People (:mod:`knowledge.people`): ``users`` (list, add, set-role, passwd, delete, invite), ``groups``,
``keys`` (per-user API keys), ``scim token`` (SCIM provisioning's bearer token), ``share`` /
``unshare`` / ``owner`` (who may use a store), ``usage`` / ``quota`` (stored bytes, files and
chunks against the quotas; an admin sets a person's, group's or store's own) and ``audit``
(who did what, when: an admin reads every event, a member those of the stores they may use and of
their own account -- :meth:`knowledge.workbench.Workbench.audit_events`).

Accounts, groups and invitations are an admin's: the local admin (no ``--user``) or ``--user`` an
admin; a member is refused. A member may manage their own API keys and password,
and share or hand over the stores they own. ``users add`` on a catalog without accounts makes the
first one, which must be an admin. A password is typed twice at the terminal (never on the command
line), or read from standard input with ``--password-stdin``. Every change is recorded in the audit
trail in the acting person's name (``local`` for the local admin).
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from datetime import UTC, datetime
from typing import Any

from knowledge.cli.common import DATA_DIR, Commands, command, table
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.people import ROLES, ApiKey, AuditEvent, User, invite_link, normal_username
from knowledge.people.quotas import STORAGE, amount
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    _users(command(sub, "users", help="accounts: list, add, set-role, passwd, delete, invite (an admin's)"))
    _groups(command(sub, "groups", help="groups of accounts, to share stores with (an admin's)"))
    _keys(command(sub, "keys", help="per-user API keys for the REST API and MCP: create, list, revoke"))
    _scim(command(sub, "scim", help="SCIM 2.0 provisioning (/scim/v2 on the REST API): its token (an admin's)"))
    for name, verb in (("share", "share a store with"), ("unshare", "take back a store's grant to")):
        s = command(
            sub,
            name,
            common=DATA_DIR,
            help=f"{verb} a user, a group or everyone (the store's owner, or an admin; the acting"
            " --user goes before the command)",
        )
        s.add_argument("store")
        who = s.add_mutually_exclusive_group(required=True)
        who.add_argument("--user", dest="grantee", metavar="USERNAME", help="an account")
        who.add_argument("--group", metavar="GROUP", help="a group")
        who.add_argument("--everyone", action="store_true", help="everyone with an account")
        if name == "share":
            s.add_argument("--write", action="store_true", help="to read and write (default: read only)")
        s.set_defaults(func=cmd_share if name == "share" else cmd_unshare)
    s = command(sub, "owner", help="show a store's owner and grants, or hand it to NEW_OWNER")
    s.add_argument("store")
    s.add_argument("new_owner", nargs="?", metavar="NEW_OWNER")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_owner)
    s = command(
        sub,
        "audit",
        common=DATA_DIR,
        help="the audit trail, newest first: who created, ingested, deleted, exported, shared (an admin"
        " reads all; a member, their stores' and own account's; the acting --user goes before the command)",
    )
    s.add_argument("--store", help="only events of this store")
    s.add_argument(
        "--user",
        dest="actor_filter",
        metavar="USERNAME",
        help="only what this account did ('local': the local admin of the app and servers;"
        " 'cli:USER@HOST': of a command line)",
    )
    s.add_argument("--action", help="only this action (file.ingest), or a family ending in a dot (file.)")
    s.add_argument(
        "--since",
        metavar="ISO",
        help="only events from then on (2024-05-01 or 2024-05-01T12:00, UTC unless an offset is given)",
    )
    s.add_argument("--limit", type=int, default=50, help="at most this many events (default 50)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_audit)
    s = command(
        sub,
        "usage",
        help="stored bytes, files and chunks against the quotas: one's own (the acting --user's), or"
        " (an admin) --of user:NAME / group:NAME / store:NAME, or --by store / user",
    )
    which = s.add_mutually_exclusive_group()
    which.add_argument("--of", metavar="SCOPE:NAME", help="user:ana, group:hr or store:notes (an admin's)")
    which.add_argument("--by", choices=("store", "user"), help="everyone's, per store or per person (an admin's)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_usage)
    s = command(sub, "quota", help="set a person's, group's or store's own quota (an admin's)")
    s.add_argument("scope", choices=("user", "group", "store"))
    s.add_argument("name")
    s.add_argument("measure", choices=("bytes", "files", "chunks", "requests_per_minute"))
    s.add_argument("limit", help="a whole number (0: unlimited), or 'default' for the setting's")
    s.set_defaults(func=cmd_quota)


# -- usage and quotas --------------------------------------------------------------------------------
def _limit_words(measure: str, value: int | None) -> str:
    return "unlimited" if value is None else amount(measure, value)


def cmd_usage(wb: Workbench, args: argparse.Namespace) -> int:
    if args.by == "store":
        stores = wb.usage_by_store()
        if args.json:
            keys = ("store", "owner", *STORAGE, *(f"limit_{m}" for m in STORAGE))
            rows = [(n, o, *(u.of(m) for m in STORAGE), *(lim[m].amount for m in STORAGE)) for n, o, u, lim in stores]
            print(json.dumps([dict(zip(keys, r, strict=True)) for r in rows], ensure_ascii=False, indent=2))
        else:
            words = [
                (n, o or "", *(f"{amount(m, u.of(m))} of {_limit_words(m, lim[m].amount)}" for m in STORAGE))
                for n, o, u, lim in stores
            ]
            print(table(words, ["store", "owner", "bytes", "files", "chunks"]))
        return 0
    reports = wb.usage_by_user() if args.by == "user" else None
    if reports is None:
        scope, name = ("user", None)
        if args.of:
            scope, sep, name = args.of.partition(":")
            if not sep or not name:
                raise InvalidArgument(f"--of is SCOPE:NAME (user:ana, group:hr, store:notes), got {args.of!r}.")
        reports = [wb.usage(scope, name)]
    if args.json:
        print(json.dumps([r.as_dict() for r in reports], ensure_ascii=False, indent=2))
        return 0
    print(
        table(
            [
                (
                    f"{r.scope} {r.name}",
                    *(f"{amount(m, r.usage.of(m))} of {_limit_words(m, r.limits[m].amount)}" for m in STORAGE),
                    _limit_words("requests_per_minute", r.limits["requests_per_minute"].amount)
                    if "requests_per_minute" in r.limits
                    else "",
                )
                for r in reports
            ],
            ["who", "bytes", "files", "chunks", "API requests a minute"],
        )
    )
    return 0


def cmd_quota(wb: Workbench, args: argparse.Namespace) -> int:
    text = args.limit.strip().lower()
    if text == "default":
        value = None
    elif text.isdigit():
        value = int(text)
    else:
        raise InvalidArgument(f"A limit is a whole number (0: unlimited) or 'default', got {args.limit!r}.")
    got = wb.set_quota(args.scope, args.name, args.measure, value)
    whose = "the setting's" if not got.own else "its own"
    print(f"{args.scope} {args.name}: {args.measure} {_limit_words(got.measure, got.amount)} ({whose}).")
    return 0


# -- users ----------------------------------------------------------------------------------------
def _users(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = command(sub, "list", help="every account")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_users_list)
    s = command(sub, "add", help="a new account (the first one on a catalog must be an admin)")
    s.add_argument("username")
    s.add_argument("--display-name", help="the name pages show (default: the username)")
    s.add_argument("--role", choices=ROLES, default="member", help="default member")
    s.add_argument("--email")
    _password_options(s)
    s.add_argument(
        "--no-password",
        action="store_true",
        help="no password here: the person signs in with single sign-on or the directory's password (LDAP)",
    )
    s.set_defaults(func=cmd_users_add)
    for verb, words in (
        ("deactivate", "end an account's sessions, revoke its API keys and refuse its sign-in (until reactivated)"),
        ("activate", "let a deactivated account sign in again (its revoked keys stay revoked)"),
    ):
        s = command(sub, verb, help=words)
        s.add_argument("username")
        s.set_defaults(func=cmd_users_active, active=verb == "activate")
    s = command(sub, "set-role", help="make an account an admin or a member")
    s.add_argument("username")
    s.add_argument("role", choices=ROLES)
    s.set_defaults(func=cmd_users_set_role)
    s = command(sub, "passwd", help="give an account a new password (its app sessions end)")
    s.add_argument("username")
    _password_options(s)
    s.set_defaults(func=cmd_users_passwd)
    s = command(sub, "delete", help="delete an account; its stores pass to an admin")
    s.add_argument("username")
    s.add_argument("--to", metavar="ADMIN", help="the admin who gets its stores (default: you, or the first admin)")
    s.set_defaults(func=cmd_users_delete)
    s = command(sub, "invite", help="an invitation link's token for one new account (the app's ?invite=TOKEN)")
    s.add_argument("--role", choices=ROLES, default="member", help="the new account's role (default member)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_users_invite)


def _password_options(s: argparse.ArgumentParser) -> None:
    s.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of standard input (default: type it twice)",
    )


def read_password(args: argparse.Namespace, username: str) -> str:
    """The new password: standard input's first line (``--password-stdin``, without its line end),
    else typed twice at the terminal. Its rules (length, NFC) are the core's.

    Raises:
        KnowledgeError: the two typed passwords differ, nothing was given, or there is no terminal.
    """
    if args.password_stdin:
        line = sys.stdin.readline()
        if not line:
            raise KnowledgeError("--password-stdin: standard input is empty; give the password on its first line.")
        return line.rstrip("\r\n")
    if not sys.stdin.isatty():
        raise KnowledgeError(
            "Type the password at a terminal, or pipe it in with --password-stdin (never on the command line)."
        )
    first = getpass.getpass(f"Password for {username}: ")
    if getpass.getpass("Again: ") != first:
        raise KnowledgeError("The two passwords differ.")
    return first


def _user_data(wb: Workbench, u: User) -> dict[str, Any]:
    return {
        "username": u.username,
        "display_name": u.display_name,
        "role": u.role,
        "email": u.email,
        "groups": wb.accounts.groups_of(u.username),
        "password": u.has_password,
        "active": u.active,
        "created": u.created.isoformat(timespec="seconds"),
    }


def cmd_users_list(wb: Workbench, args: argparse.Namespace) -> int:
    rows = [_user_data(wb, u) for u in wb.accounts.users()]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    elif not rows:
        print("No account yet: anyone at this machine is the local admin. `users add NAME --role admin` makes the first.")
    else:
        print(
            table(
                [
                    (
                        r["username"],
                        r["display_name"],
                        r["role"],
                        r["email"],
                        ", ".join(r["groups"]),
                        "yes" if r["password"] else "single sign-on",
                        "active" if r["active"] else "deactivated",
                        r["created"][:10],
                    )
                    for r in rows
                ],
                ["username", "display name", "role", "e-mail", "groups", "password", "state", "created"],
            )
        )
    return 0


def cmd_users_add(wb: Workbench, args: argparse.Namespace) -> int:
    wb.accounts.require_manage("add an account")  # refused before the password is asked for
    first = not wb.accounts.enabled()
    if first and args.role != "admin":
        raise InvalidArgument(
            "The first account must be an admin (--role admin): once an account exists, the app"
            " signs people in by account and only an admin can add the next ones."
        )
    normal_username(args.username)  # a bad name is refused before the password is asked for
    if args.no_password and args.password_stdin:
        raise InvalidArgument("Give either --no-password or --password-stdin, not both.")
    password = None if args.no_password else read_password(args, args.username.strip())
    user = wb.accounts.create_user(args.username, password, display_name=args.display_name, role=args.role, email=args.email)
    print(
        f"Added {user.role} {user.username!r} ({user.display_name})."
        + (" Without a password here: they sign in with single sign-on or the directory." if password is None else "")
        + (" Accounts are on: the app now signs people in by account." if first else "")
    )
    return 0


def cmd_users_active(wb: Workbench, args: argparse.Namespace) -> int:
    user = wb.accounts.set_active(args.username, args.active)
    print(
        f"{user.username} may sign in again (their revoked API keys stay revoked)."
        if args.active
        else f"{user.username} is deactivated: their sessions ended, their API keys are revoked, sign-in is refused."
    )
    return 0


def cmd_users_set_role(wb: Workbench, args: argparse.Namespace) -> int:
    user = wb.accounts.set_role(args.username, args.role)
    print(f"{user.username} is now {'an admin' if user.is_admin else 'a member'}.")
    return 0


def cmd_users_passwd(wb: Workbench, args: argparse.Namespace) -> int:
    user = wb.accounts.user(args.username, "set another account's password")  # a member may change their own
    user = wb.accounts.set_password(user.username, read_password(args, user.username))
    print(f"New password set for {user.username}; their app sessions ended.")
    return 0


def cmd_users_delete(wb: Workbench, args: argparse.Namespace) -> int:
    wb.accounts.require_manage("delete an account")
    user = wb.accounts.user(args.username)
    stores = wb.accounts.delete_user(user.username, heir=args.to)
    heir = wb.store_owner(stores[0]) if stores else None
    print(
        f"Deleted {user.username}; "
        + (f"their stores passed to {heir}: {', '.join(stores)}." if stores else "they owned no store.")
    )
    return 0


# -- SCIM provisioning ----------------------------------------------------------------------------
def _scim(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = command(
        sub,
        "token",
        help="make the bearer token of the directory's SCIM client (shown once; SCIM is off until one"
        " exists), or --revoke every one (SCIM is off again)",
    )
    s.add_argument("--revoke", action="store_true", help="revoke every SCIM token instead")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_scim_token)


def cmd_scim_token(wb: Workbench, args: argparse.Namespace) -> int:
    if args.revoke:
        n = wb.accounts.revoke_scim_tokens()
        print(json.dumps({"revoked": n}) if args.json else f"Revoked {n} SCIM token(s); /scim/v2 answers 404 now.")
        return 0
    token = wb.accounts.scim_token()
    if args.json:
        print(json.dumps({"token": token, "endpoint": "/scim/v2"}))
    else:
        print(
            "SCIM provisioning token (shown once; the catalog keeps only its digest):\n"
            f"  {token}\n"
            "Give it to the directory's SCIM client as the bearer token, with the tenant URL"
            " https://<this server>/scim/v2."
        )
    return 0


def cmd_users_invite(wb: Workbench, args: argparse.Namespace) -> int:
    token, invite = wb.accounts.invite(args.role)
    expires = invite.expires.astimezone(UTC).isoformat(timespec="seconds")
    link = invite_link(token, wb.settings.app.public_url)
    if args.json:
        print(json.dumps({"token": token, "role": invite.role, "expires": expires, "link": link}))
    else:
        print(f"Invitation for one {invite.role}, valid once until {expires}:\n  {token}")
        if link.startswith("?"):
            print(f"Send the app's address followed by {link} (set app.public_url to get the whole link).")
        else:
            print(f"Send them this link: {link}")
    return 0


# -- groups ---------------------------------------------------------------------------------------
def _groups(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = command(sub, "list", help="every group and its members")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_groups_list)
    for name, func, helptext in (
        ("add", cmd_groups_add, "a new, empty group"),
        ("delete", cmd_groups_delete, "delete a group (its store grants go with it)"),
    ):
        s = command(sub, name, help=helptext)
        s.add_argument("group")
        s.set_defaults(func=func)
    for name, func, helptext in (
        ("add-member", cmd_groups_add_member, "put an account in a group"),
        ("remove-member", cmd_groups_remove_member, "take an account out of a group"),
    ):
        s = command(sub, name, help=helptext)
        s.add_argument("group")
        s.add_argument("username")
        s.set_defaults(func=func)


def _no_group(exc: InvalidArgument) -> InvalidArgument:
    """A missing group's words, with where the groups are listed."""
    words = str(exc)
    return InvalidArgument(words[:-1] + "; `groups list` shows them.") if words.startswith("There is no group") else exc


def cmd_groups_list(wb: Workbench, args: argparse.Namespace) -> int:
    groups = wb.accounts.groups()
    sources = wb.accounts.group_sources()  # a provider's membership: "ana (from LDAP)"
    if args.json:  # "sources": the members a provider keeps, with its label (hand-made ones are not in it)
        data = [
            {"group": g, "members": m, "sources": {u: sources[(g, u)] for u in m if (g, u) in sources}}
            for g, m in groups.items()
        ]
        print(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        rows = [
            (g, ", ".join(f"{u} (from {sources[(g, u)]})" if (g, u) in sources else u for u in m)) for g, m in groups.items()
        ]
        print(table(rows, ["group", "members"]))
    return 0


def cmd_groups_add(wb: Workbench, args: argparse.Namespace) -> int:
    group = wb.accounts.create_group(args.group)
    print(f"Added the group {group!r}.")
    return 0


def cmd_groups_delete(wb: Workbench, args: argparse.Namespace) -> int:
    try:
        group = wb.accounts.delete_group(args.group)
    except InvalidArgument as exc:
        raise _no_group(exc) from None
    print(f"Deleted the group {group!r} (the stores shared with it no longer are).")
    return 0


def cmd_groups_add_member(wb: Workbench, args: argparse.Namespace) -> int:
    try:
        user = wb.accounts.add_member(args.group, args.username)
    except InvalidArgument as exc:
        raise _no_group(exc) from None
    print(f"{user.username} is in the group {' '.join(args.group.split())!r}.")
    return 0


def cmd_groups_remove_member(wb: Workbench, args: argparse.Namespace) -> int:
    try:
        user = wb.accounts.remove_member(args.group, args.username)
    except InvalidArgument as exc:
        raise _no_group(exc) from None
    print(f"{user.username} is no longer in the group {' '.join(args.group.split())!r}.")
    return 0


# -- API keys -------------------------------------------------------------------------------------
def _keys(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    s = command(sub, "create", help="a new key for USERNAME (the secret is shown once)")
    s.add_argument("username")
    s.add_argument("--name", required=True, help="what uses the key (a script, a laptop)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_keys_create)
    s = command(sub, "list", help="the keys of USERNAME (an admin: everyone's by default): created, last used, revoked")
    s.add_argument("username", nargs="?")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_keys_list)
    s = command(sub, "revoke", help="stop a key now")
    s.add_argument("key_id", metavar="KEY_ID")
    s.set_defaults(func=cmd_keys_revoke)


def _when(t: datetime | None) -> str | None:
    return t.astimezone(UTC).isoformat(timespec="seconds") if t is not None else None


def _key_data(k: ApiKey) -> dict[str, Any]:
    return {
        "id": k.id,
        "username": k.username,
        "name": k.name,
        "hint": k.hint,
        "created": _when(k.created),
        "last_used": _when(k.last_used),
        "revoked": _when(k.revoked),
        "active": k.active,
    }


def cmd_keys_create(wb: Workbench, args: argparse.Namespace) -> int:
    key, secret = wb.accounts.create_key(args.username, args.name)
    if args.json:
        print(json.dumps({**_key_data(key), "secret": secret}, ensure_ascii=False, indent=2))
    else:
        print(
            f"API key {key.id} ({key.name!r}) for {key.username}; it is shown this once, copy it now:\n  {secret}\n"
            "Send it as Authorization: Bearer <key> (REST API, MCP over HTTP)."
        )
    return 0


def cmd_keys_list(wb: Workbench, args: argparse.Namespace) -> int:
    rows = [_key_data(k) for k in wb.accounts.api_keys(args.username)]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        print(
            table(
                [
                    (
                        r["id"],
                        r["username"],
                        r["name"],
                        "…" + r["hint"],
                        r["created"],
                        r["last_used"] or "never",
                        f"revoked {r['revoked']}" if r["revoked"] else "active",
                    )
                    for r in rows
                ],
                ["key", "user", "name", "ends", "created", "last used", "state"],
            )
        )
    return 0


def cmd_keys_revoke(wb: Workbench, args: argparse.Namespace) -> int:
    try:
        key = wb.accounts.revoke_key(args.key_id)
    except InvalidArgument as exc:
        words = str(exc)
        raise (
            InvalidArgument(words[:-1] + "; `keys list` shows them.") if words.startswith("There is no API key") else exc
        ) from None
    print(f"Revoked {key.id} ({key.name!r}) of {key.username}: it stops working now.")
    return 0


# -- sharing --------------------------------------------------------------------------------------
def _require_user(wb: Workbench, username: str) -> str:
    """The username of account ``username`` (any case). Raises ``InvalidArgument`` when there is none."""
    user = wb.find_user(username)
    if user is None:
        raise InvalidArgument(f"There is no account {username!r}.")
    return user.username


def _grantee(args: argparse.Namespace) -> tuple[str, str, str]:
    """``(kind, principal, words)`` of ``--user`` / ``--group`` / ``--everyone``."""
    if args.everyone:
        return "everyone", "", "everyone"
    if args.group is not None:
        return "group", " ".join(args.group.split()), f"the group {' '.join(args.group.split())!r}"
    return "user", args.grantee, ""


def cmd_share(wb: Workbench, args: argparse.Namespace) -> int:
    kind, principal, words = _grantee(args)
    grant = wb.share_store(args.store, kind, principal, "write" if args.write else "read")
    print(
        f"Shared {args.store!r} with {words or grant.principal}"
        f" ({'read and write' if grant.level == 'write' else 'read only'})."
    )
    return 0


def cmd_unshare(wb: Workbench, args: argparse.Namespace) -> int:
    kind, principal, words = _grantee(args)
    if kind == "user":  # sharing, not account management: the account looked up as before
        principal = _require_user(wb, principal)
    if not wb.unshare_store(args.store, kind, principal):
        raise InvalidArgument(f"{args.store!r} is not shared with {words or principal}.")
    print(f"{args.store!r} is no longer shared with {words or principal}.")
    return 0


def cmd_owner(wb: Workbench, args: argparse.Namespace) -> int:
    if args.new_owner is not None:
        wb.give_store(args.store, args.new_owner)
    owner, grants = wb.store_owner(args.store), wb.store_grants(args.store)
    if args.json:
        print(
            json.dumps(
                {
                    "store": args.store,
                    "owner": owner,
                    "grants": [{"kind": g.kind, "principal": g.principal, "level": g.level} for g in grants],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    if args.new_owner is not None:
        print(f"{args.store!r} now belongs to {owner}.")
    else:
        unowned = "the admins (no account owns it: made before accounts existed, or by the local admin)"
        print(f"{args.store!r} belongs to {owner or unowned}.")
        print("Shared with: " + ("; ".join(g.describe() for g in grants) if grants else "nobody (private)."))
    return 0


# -- audit ----------------------------------------------------------------------------------------
def _since(text: str | None) -> datetime | None:
    """``--since`` as an aware datetime (a time without an offset is UTC). Raises InvalidArgument."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidArgument(f"--since {text!r} is not a date: use ISO 8601 (2024-05-01 or 2024-05-01T12:00).") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _event_data(e: AuditEvent) -> dict[str, Any]:
    return {
        "id": e.id,
        "at": _when(e.at),
        "actor": e.actor,
        "action": e.action,
        "store": e.store,
        "target": e.target,
        "detail": e.detail,
    }


def cmd_audit(wb: Workbench, args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise InvalidArgument("--limit must be at least 1.")
    actor = args.actor_filter
    if actor is not None:
        try:
            actor = normal_username(actor)
        except InvalidArgument:
            actor = actor.strip()
    events = wb.audit_events(
        actor=actor, action=(args.action or "").strip() or None, store=args.store, since=_since(args.since), limit=args.limit
    )
    rows = [_event_data(e) for e in events]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2, default=str))
    else:
        print(
            table(
                [
                    (
                        r["at"],
                        r["actor"],
                        r["action"],
                        r["store"],
                        r["target"],
                        json.dumps(r["detail"], ensure_ascii=False, default=str)[:60] if r["detail"] else "",
                    )
                    for r in rows
                ],
                ["when (UTC)", "who", "action", "store", "target", "detail"],
            )
        )
    return 0


__all__ = ["add_parser", "read_password"]
