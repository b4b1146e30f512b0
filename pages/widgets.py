"""Small widgets the pages share (not a page: app.py's navigation does not list it)."""

from __future__ import annotations

import streamlit as st


def confirm(label: str, key: str, question: str, *, yes: str = "Yes, delete", **kwargs) -> bool:
    """A button that asks first: ``label`` shows ``question`` with "Yes" and "Cancel" in its place;
    True on the run where "Yes" is clicked. ``label`` and ``question`` are Markdown: build them with
    :func:`knowledge.text.render.md` when they name anything (names are untrusted text)."""
    asking = f"confirm:{key}"
    if st.session_state.get(asking):
        st.warning(question, icon="⚠️")
        c1, c2 = st.columns(2)
        if c1.button(yes, key=f"yes:{key}", type="primary"):
            st.session_state.pop(asking, None)
            return True
        if c2.button("Cancel", key=f"no:{key}"):
            st.session_state.pop(asking, None)
            st.rerun()
        return False
    if st.button(label, key=key, **kwargs):
        st.session_state[asking] = True
        st.rerun()
    return False
