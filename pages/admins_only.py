"""What a member finds at an admin's page URL (``/settings``, ``/people``: a deep link, a bookmark):
the page is for admins, said in the app's words, and the way home -- instead of the Home page with no
word of why. Registered by app.py for members only, hidden from the menu."""

from __future__ import annotations

import streamlit as st

#: What each admin's page is, by the title app.py gives it (``st.session_state["page_title"]``).
REFUSALS = {
    "Settings": "Settings are for admins: only an admin may change the settings.",
    "People": "People is for admins: only an admin may manage accounts.",
}

title = st.session_state.get("page_title", "")
st.title(f"🔒 {title}" if title else "🔒 For admins")
st.warning(REFUSALS.get(title, "This page is for admins."), icon="🔒")
st.caption("Ask an admin of this app if you need it.")
st.page_link("pages/home.py", label="Go to Home", icon="🏠")
