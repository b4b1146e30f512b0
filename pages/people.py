"""People (admins): accounts, roles, passwords, groups, invitation links, everyone's API keys, and
the usage of every person and store against the quotas (and a quota set for one of them).
Before any account exists, the person at this machine turns accounts on here (the first admin).
Every change is written to the audit trail in the admin's name."""

from __future__ import annotations

import contextlib

import streamlit as st

from knowledge.errors import InvalidArgument, KnowledgeError, PermissionDenied
from knowledge.people import ROLES, invite_link
from knowledge.people.quotas import MEASURES, STORAGE, amount
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import account_problem, app_workbench, flash, key_row, new_account_fields, set_flash, set_up_first_admin, utc

wb: Workbench = app_workbench()
st.title("👥 People")


def done(msg: str) -> None:
    set_flash("people", True, msg)
    st.rerun()


def turn_on_accounts() -> None:
    """The first admin account, made by the person at this machine; then they are signed in."""
    st.markdown(
        "Accounts are **off**: whoever opens this app may do everything. Turn them on to give each"
        " person a sign-in of their own, stores that are private until shared, API keys of their own"
        " and an audit trail of who did what."
    )
    st.caption(
        "You become the first admin, and the stores made so far are the admins' (yours, and any admin's"
        " after you). From then on everyone signs"
        " in with an account (also you, here)"
        + (
            ", and the shared password no longer signs in."
            if wb.settings.app_password or wb.settings.app.password_hash
            else "."
        )
    )
    with st.form("turn-on-accounts"):
        username, display, first, again = new_account_fields(wb, "first")
        if st.form_submit_button("Turn on accounts", type="primary"):
            problem = account_problem(username, first, again)
            if problem:
                st.error(problem)
                return
            set_up_first_admin(wb, username, display, first)


if not wb.accounts.enabled():
    turn_on_accounts()
    st.stop()
try:
    wb.accounts.require_manage("manage people")
except PermissionDenied as exc:
    st.error(inert(exc))
    st.stop()

me = wb.actor
flash("people")

users = wb.accounts.users()
names = [u.username for u in users]
labels = {u.username: f"{u.display_name} ({u.username})" for u in users}
admins = wb.accounts.admins()
linked = wb.accounts.sso_linked()
# Keyed and tracked (Streamlit's st.tabs ``key`` + ``on_change``): the tab open stays open across the
# rerun an action ends with (a group changed on Groups stays on Groups), instead of going back to the first.
tab_users, tab_groups, tab_invites, tab_keys, tab_usage = st.tabs(
    ["Accounts", "Groups", "Invitation links", "API keys", "Usage"], key="people-tab", on_change="rerun"
)

with tab_users:
    st.dataframe(
        [
            {
                "username": u.username,
                "display name": u.display_name,
                "role": u.role,
                "status": "active" if u.active else "deactivated",
                "created": utc(u.created),
                "single sign-on": "linked" if u.username in linked else "",
                "password": "yes" if u.has_password else "no",
            }
            for u in users
        ],
        hide_index=True,
        width="stretch",
    )

    st.subheader("Add an account")
    with st.form("create-user", clear_on_submit=True):
        c1, c2 = st.columns(2)
        username = c1.text_input(
            "Username", key="new-username", help="Letters (any language), digits and . _ - @ + (no spaces)."
        )
        display = c2.text_input("Display name", key="new-display")
        c3, c4 = st.columns(2)
        role = c3.selectbox(
            "Role",
            ROLES,
            index=1,
            key="new-role",
            help="An admin manages people and settings; a member uses the stores they own or that are shared with them.",
        )
        initial = c4.text_input(
            "Initial password", type="password", key="new-password", help="Give it to them; they change it on My account."
        )
        if st.form_submit_button("Add the account", type="primary"):
            if not username.strip() or not initial:
                st.error("Fill in the username and the initial password.")
            else:
                try:
                    user = wb.accounts.create_user(username, initial, display_name=display or None, role=role)
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    done(f"Added {user.display_name} ({user.username}), {user.role}.")

    st.subheader("Change an account")
    who = st.selectbox("Account", names, format_func=lambda u: labels.get(u, u), key="edit-user")
    if who:
        current = next(u for u in users if u.username == who)
        c1, c2 = st.columns(2)
        with c1.form("change-role"):
            # keyed per account: a widget key of its own keeps its value across reruns, so one key for
            # every account showed the role of the first account picked (and saved it onto the next)
            new_role = st.selectbox("Role", ROLES, index=ROLES.index(current.role), key=f"edit-role-{who}")
            if st.form_submit_button("Change the role"):
                try:
                    wb.accounts.set_role(who, new_role)
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    done(f"{current.display_name} is now {new_role}.")
        with c2.form("reset-password", clear_on_submit=True):
            new_pw = st.text_input(
                "New password", type="password", key="edit-password", help="Their sessions end; give them the new password."
            )
            if st.form_submit_button("Reset the password"):
                if not new_pw:
                    st.error("Type the new password.")
                else:
                    try:
                        wb.accounts.set_password(who, new_pw)
                    except KnowledgeError as exc:
                        st.error(inert(exc))
                    else:
                        done(f"The password of {current.display_name} is reset; their sessions ended.")

        if current.active:
            st.markdown(md("**Deactivate {}**", current.display_name))
            if who == me.username:
                st.caption("You cannot deactivate your own account here (another admin can).")
            elif st.button(
                "Deactivate the account",
                key="deactivate-user",
                help="They cannot sign in; their sessions end and their API keys are revoked at once. Their"
                " stores and groups stay, for when the account is activated again (as SCIM's active: false does).",
            ):
                try:
                    wb.accounts.set_active(who, False)
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    done(f"Deactivated {current.display_name}: their sessions ended and their API keys are revoked.")
        else:
            st.markdown(md("**{} is deactivated**", current.display_name))
            st.caption(
                "They cannot sign in. Activating lets them sign in again; their revoked API keys stay revoked"
                " (they make new ones)."
            )
            if st.button("Activate the account", key="activate-user"):
                try:
                    wb.accounts.set_active(who, True)
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    done(f"Activated {current.display_name}: they can sign in again.")

        st.markdown(md("**Delete {}**", current.display_name))
        heirs = [a for a in admins if a != who]
        if who == me.username:
            st.caption("You cannot delete your own account here (another admin can).")
        elif not heirs:
            st.caption("The last admin cannot be deleted.")
        else:
            heir = st.selectbox(
                "Their stores pass to",
                heirs,
                format_func=lambda u: labels.get(u, u),
                index=heirs.index(me.username) if me.username in heirs else 0,
                key="heir",
            )
            sure = st.checkbox(md("Yes, delete {} (their sessions and API keys end)", who), key="delete-sure")
            if st.button("Delete the account", type="primary", disabled=not sure, key="delete-user"):
                try:
                    moved = wb.accounts.delete_user(who, heir=heir)
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    done(
                        f"Deleted {who}. "
                        + (f"Their stores passed to {heir}: {', '.join(moved)}." if moved else "They had no stores.")
                    )

with tab_groups:
    groups = wb.accounts.groups()
    if groups:
        sources = wb.accounts.group_sources()
        st.dataframe(
            [
                {"group": g, "members": ", ".join(f"{u} (from {sources[(g, u)]})" if (g, u) in sources else u for u in m)}
                for g, m in groups.items()
            ],
            hide_index=True,
            width="stretch",
        )
    else:
        st.caption("No groups yet. A group lets a store be shared with several people at once.")
    with st.form("create-group", clear_on_submit=True):
        group = st.text_input("New group", key="new-group")
        if st.form_submit_button("Create the group"):
            try:
                made = wb.accounts.create_group(group)
            except KnowledgeError as exc:
                st.error(inert(exc))
            else:
                st.session_state["edit-group"] = made  # the picker below turns to the group just made
                done(f"Created the group {made}.")
    if groups:
        gname = st.selectbox("Group", list(groups), key="edit-group")
        c1, c2 = st.columns(2)
        member = c1.selectbox("Person", names, format_func=lambda u: labels.get(u, u), key="group-person")
        if c1.button("Add to the group", key="group-add") and member:
            try:
                wb.accounts.add_member(gname, member)
            except KnowledgeError as exc:
                st.error(inert(exc))
            else:
                done(f"Added {member} to {gname}.")
        if c2.button("Remove from the group", key="group-remove") and member:
            try:
                wb.accounts.remove_member(gname, member)
            except KnowledgeError as exc:
                st.error(inert(exc))
            else:
                done(f"Removed {member} from {gname}.")
        sure = c2.checkbox(
            md("Yes, delete the group {}", gname),
            key=f"delete-group-sure-{gname}",
            help="Its members lose what was shared with the group (their own shares stay).",
        )
        if c2.button("Delete the group", key="group-delete", disabled=not sure):
            try:
                wb.accounts.delete_group(gname)
            except KnowledgeError as exc:
                st.error(inert(exc))
            else:
                done(f"Deleted the group {gname}.")

with tab_invites:
    st.caption(
        f"A link lets one person create their own account (valid {wb.settings.accounts.invite_hours:g} h,"
        " once). It is shown once: send it to them."
    )
    c1, c2 = st.columns([1, 2])
    invite_role = c1.selectbox("Role", ROLES, index=1, key="invite-role")
    if c1.button("Make an invitation link", key="make-invite"):
        token, invite = wb.accounts.invite(invite_role)
        seen = (st.context.url or "").split("?")[0].rstrip("/")
        seen = seen.rsplit("/people", 1)[0] if seen.endswith("/people") else seen
        c2.code(invite_link(token, wb.settings.app.public_url, seen), language=None)
        c2.caption(
            md(
                "A {} account; the link works once, until {}. Copy it now (the button at the"
                " corner): it is not shown again.",
                invite_role,
                utc(invite.expires),
            )
        )

with tab_keys:
    keys = wb.accounts.api_keys()
    if keys:
        st.dataframe(
            [{"key": k.id, "person": labels.get(k.username, k.username), **key_row(k)} for k in keys],
            hide_index=True,
            width="stretch",
        )
        active = {k.id: f"{k.name} of {k.username} (…{k.hint})" for k in keys if k.active}
        if active:
            key_id = st.selectbox("Key", list(active), format_func=lambda k: active.get(k, k), key="revoke-key")
            if st.button("Revoke the key", key="revoke-any-key") and key_id:
                with contextlib.suppress(InvalidArgument):  # revoked meanwhile: it stops working all the same
                    wb.accounts.revoke_key(key_id)
                done(f"Revoked {active[key_id]}: it stops working now.")
    else:
        st.caption("Nobody has an API key yet (each person makes theirs on My account).")

with tab_usage:
    st.caption(
        "What each person's stores and each store hold, against the quotas (settings `quotas.*`, or a"
        " person's, group's or store's own below). "
        + ("Admins are not held to them (`quotas.admins_exempt`)." if wb.settings.quotas.admins_exempt else "")
    )

    def quota(measure: str, used: int, limit: int | None) -> str:
        return f"{amount(measure, used)} of {amount(measure, limit) if limit is not None else 'unlimited'}"

    st.markdown("**Per person** (the stores they own)")
    st.dataframe(
        [
            {
                "person": labels.get(r.name, r.name),
                **{m: quota(m, r.usage.of(m), r.limits[m].amount) for m in STORAGE},
                # text in every row: a column of numbers and "unlimited" cannot be drawn (Arrow refuses it)
                "API requests a minute": f"{rate:,}" if (rate := r.limits["requests_per_minute"].amount) else "unlimited",
            }
            for r in wb.usage_by_user()
        ],
        hide_index=True,
        width="stretch",
        key="usage-people",
    )
    st.markdown("**Per store**")
    per_store = wb.usage_by_store()
    if per_store:
        st.dataframe(
            [
                {
                    "store": name,
                    "owner": labels.get(owner, owner) if owner else "the admins",
                    **{m: quota(m, use.of(m), lims[m].amount) for m in STORAGE},
                }
                for name, owner, use, lims in per_store
            ],
            hide_index=True,
            width="stretch",
            key="usage-stores",
        )
    else:
        st.caption("No store holds a file yet.")
    st.subheader("Set a quota")
    groups = wb.group_names()
    stores = [name for name, *_ in per_store]
    with st.form("set-quota"):
        c1, c2, c3, c4 = st.columns(4)
        scope = c1.selectbox("For", ["user", "group", "store"], key="quota-scope", format_func=str.capitalize)
        whom = c2.selectbox("Who or which", names + groups + stores, key="quota-name")
        measure = c3.selectbox("Measure", list(MEASURES), key="quota-measure", format_func=lambda m: m.replace("_", " "))
        value = c4.text_input(
            "Limit",
            key="quota-limit",
            help="a whole number (bytes, files, chunks or requests a minute); 0: unlimited; empty: the setting's",
        )
        if st.form_submit_button("Set the quota"):
            text = value.strip()
            if text and not text.isdigit():
                st.error(f"A limit is a whole number of at least 0, got {text!r}.")
            else:
                try:
                    got = wb.set_quota(scope, whom or "", measure, int(text) if text else None)
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    now = amount(got.measure, got.amount) if got.amount is not None else "unlimited"
                    done(f"The {measure.replace('_', ' ')} quota of {scope} {whom} is now {now}.")
    own = wb.quota_overrides()
    if own:
        st.markdown("**Quotas set here** (they come before the settings)")
        st.dataframe(
            [
                {
                    "for": f"{q.scope} {q.name}",
                    "measure": q.measure,
                    "limit": q.amount if q.amount is not None else "unlimited",
                }
                for q in own
            ],
            hide_index=True,
            width="stretch",
            key="usage-overrides",
        )
