"""Small widgets the pages share (not a page: app.py's navigation does not list it)."""

from __future__ import annotations

import streamlit as st

#: The file types the file lists' filters offer (name endings; any other type is found by name).
FILE_TYPES = ("pdf", "docx", "pptx", "xlsx", "odt", "epub", "rtf", "eml", "zip", "md", "txt", "html", "csv", "png", "jpg")


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


def page_offset(key: str, version: str, size: int) -> int:
    """The offset of the page of a paged list that ``st.session_state[key]`` keeps (``size`` rows a
    page): page 1 when nothing is kept or ``version`` (the list's filters, say) changed since."""
    kept = st.session_state.get(key)
    page = kept[1] if isinstance(kept, tuple) and kept[0] == version else 0
    return max(0, int(page)) * size


def pager(key: str, version: str, total: int, size: int, offset: int) -> None:
    """◀ Previous · "rows a–b of n · page p of q" · Next ▶ under a paged list whose page is kept in
    ``st.session_state[key]`` as ``(version, page)`` (read it with :func:`page_offset`); nothing
    when everything fits on one page. Buttons, so the page moves on the server: only one page of
    rows is ever drawn."""
    pages = max(1, -(-total // size))
    if pages <= 1:
        return
    page = min(offset // size, pages - 1)

    def go(to: int) -> None:
        st.session_state[key] = (version, max(0, min(to, pages - 1)))

    c1, c2, c3 = st.columns([1, 3, 1], vertical_alignment="center")
    c1.button("◀ Previous", key=f"{key}:prev", disabled=page == 0, on_click=go, args=(page - 1,), width="stretch")
    c2.caption(f"Rows {offset + 1:,}–{min(offset + size, total):,} of {total:,} · page {page + 1:,} of {pages:,}")
    c3.button("Next ▶", key=f"{key}:next", disabled=page >= pages - 1, on_click=go, args=(page + 1,), width="stretch")
