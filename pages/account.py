"""My account (everyone signed in): display name, password, my storage against my quotas, and my API
keys for the REST API and the MCP server (a key's secret is shown once; a revoked key stops at once)."""

from __future__ import annotations

import contextlib

import streamlit as st

from knowledge.errors import AuthenticationFailed, InvalidArgument, KnowledgeError
from knowledge.people.quotas import STORAGE, amount
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import SESSION_TOKEN, app_workbench, flash, key_row, set_flash

wb: Workbench = app_workbench()
me = wb.actor
st.title("🙂 My account")
if me.local:
    st.info("Accounts are off: there is nobody to sign in as. An admin turns them on on the People page.")
    st.stop()
user = wb.accounts.me()
st.caption(md("Signed in as **{}** ({}), {}.", user.display_name, user.username, user.role))
flash("account")


def done(msg: str) -> None:
    set_flash("account", True, msg)
    st.rerun()


c1, c2 = st.columns(2)
with c1.form("display-name"):
    st.markdown("**Display name**")
    display = st.text_input("Display name", value=user.display_name, key="my-display", label_visibility="collapsed")
    if st.form_submit_button("Save the name"):
        if not display.strip():
            st.error("Type a display name.")
        else:
            try:
                changed = wb.accounts.set_display_name(me.username, display)
            except KnowledgeError as exc:
                st.error(inert(exc))
            else:
                done(f"Your display name is now {changed.display_name}.")

with c2.form("my-password", clear_on_submit=True):
    st.markdown("**Password**")
    if not user.has_password:
        st.caption(
            "Your account signs in with your directory password (LDAP): change it in the directory."
            if wb.settings.accounts.ldap.url
            else "Your account signs in by single sign-on; it has no password here."
        )
        st.form_submit_button("Change the password", disabled=True)
    else:
        current = st.text_input("Current password", type="password", key="my-current", autocomplete="current-password")
        new = st.text_input(
            "New password",
            type="password",
            key="my-new",
            help=f"At least {wb.settings.accounts.min_password_length} characters.",
        )
        again = st.text_input("New password again", type="password", key="my-again")
        if st.form_submit_button("Change the password"):
            if not current or not new or not again:
                st.error("Fill in your current password and the new one twice.")
            elif new != again:
                st.error("The two new passwords differ: type the same password twice.")
            else:
                try:
                    # the current one checked first (throttled as a sign-in); ends every session of mine ...
                    wb.accounts.set_password(me.username, new, current=current)
                except AuthenticationFailed:
                    st.error("Your current password is not right.")
                except KnowledgeError as exc:
                    st.error(inert(exc))
                else:
                    st.session_state[SESSION_TOKEN] = wb.accounts.start_session()  # ... but this one
                    done("Your password is changed; your other sign-ins ended.")

st.subheader("My storage")
mine = wb.usage()
cols = st.columns(3)
for col, measure, title in zip(cols, STORAGE, ("Stored bytes", "Files", "Chunks"), strict=False):
    limit = mine.limits[measure].amount
    used = mine.usage.of(measure)
    col.metric(title, amount(measure, used), help="of the stores you own")
    col.caption(f"quota: {amount(measure, limit)}" if limit is not None else "quota: unlimited")
    if limit:
        col.progress(min(1.0, used / limit))
rate = mine.limits["requests_per_minute"].amount
if wb.usage_exempt():
    st.caption("Admins are held to none of these quotas, nor to a rate of API requests (setting `quotas.admins_exempt`).")
else:
    st.caption(
        "Each of your API keys may send any number of requests a minute."
        if rate is None
        else f"Each of your API keys may send {rate:,} requests a minute; past that the API answers 429"
        " until the minute ends."
    )

st.subheader("My API keys")
st.caption(
    "A key lets a program use the REST API or the MCP server as you, with your access (`Authorization: Bearer kn-...`)."
)
with st.form("new-key", clear_on_submit=True):
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    name = c1.text_input("Name", key="key-name", placeholder="what uses it, e.g. laptop scripts")
    if c2.form_submit_button("Create a key", type="primary"):
        try:
            key, secret = wb.accounts.create_key(me.username, name)
        except KnowledgeError as exc:
            st.error(inert(exc))
        else:
            st.success(
                md("Your new key **{}**: copy it now (the button at the code's corner); it is not shown again.", key.name)
            )
            st.code(secret, language=None)

keys = wb.accounts.api_keys(me.username)
if not keys:
    st.caption("You have no API key yet.")
else:
    st.dataframe([key_row(k) for k in keys], hide_index=True, width="stretch")
    active = {k.id: f"{k.name} (…{k.hint})" for k in keys if k.active}
    if active:
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        key_id = c1.selectbox("Key", list(active), format_func=lambda k: active.get(k, k), key="my-revoke")
        if c2.button("Revoke", key="my-revoke-key") and key_id:
            with contextlib.suppress(InvalidArgument):  # revoked meanwhile: it stops working all the same
                wb.accounts.revoke_key(key_id)
            done(f"Revoked {active[key_id]}: it stops working now.")
