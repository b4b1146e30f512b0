"""Viewer: one file with a passage marked -- PDF pages as images, anything else as its text.

Opened from links (``view?store=…&file=…&start=…&end=…&page=…#passage``, made by
:func:`knowledge.pagemodels.viewer.viewer_url`), not from the menu; what it shows is computed by
:mod:`knowledge.pagemodels.viewer` through this person's workbench view.
"""

from __future__ import annotations

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.ingest import Document
from knowledge.pagemodels import viewer as vm
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import app_workbench, human_size

wb: Workbench = app_workbench()


@st.cache_data(show_spinner="Reading the file…", max_entries=16)
def cached_text(sha256: str, name: str, content_type: str, ocr: str, _data: bytes) -> Document:
    """The file's text, read again once per content (the readers are deterministic; OCR is slow)."""
    return vm.read_text(_data, name, content_type, "off" if ocr == "off" else "auto", wb.settings.ingest)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_page(sha256: str, page: int, passages: tuple[str, ...], regions: tuple[tuple[float, ...], ...], _data: bytes):
    from knowledge.ingest.pdfview import render_page  # noqa: PLC0415 - PDFium and Pillow: PDFs only

    return render_page(_data, page, passages, regions=regions)


def go_to_page(number: int) -> None:
    st.query_params["page"] = str(number)
    st.rerun()


try:
    target = vm.parse_viewer_query({k: st.query_params.get(k) or "" for k in st.query_params})
    stored = vm.find_file(wb, target)
    data = vm.file_bytes(wb, stored.id)
except KnowledgeError as exc:
    st.title("🔍 Viewer")
    st.error(md("This link cannot be opened: {}", str(exc)))
    st.page_link("pages/search.py", label="Search playground", icon="🔎")
    st.stop()

try:
    doc = cached_text(stored.sha256, stored.name, stored.content_type, vm.store_ocr(wb, target.store), data)
    view = vm.build_viewer(target, stored, doc)
except KnowledgeError as exc:
    view = vm.build_viewer(target, stored, None, f"The file's text cannot be shown: {exc}")

st.title(md("🔍 {}", view.name))
where = [target.store, view.format or view.content_type, human_size(view.size)]
if view.pages:
    where.append(f"{view.pages} page{'' if view.pages == 1 else 's'}")
st.caption(" · ".join(md("{}", w) for w in where))
if view.heading:
    st.markdown(md("**Section:** {}", view.heading))
if view.passage_pages:
    st.caption(md("The passage is on page {}.", ", ".join(str(p) for p in view.passage_pages)))
st.download_button(
    "⬇️ Download original",
    data,
    file_name=view.name,
    mime=vm.safe_content_type(view.content_type),
    key=f"viewer-dl:{stored.id}",
)
for warning in view.warnings:
    st.warning(inert(warning))
if view.problem:
    st.error(inert(view.problem))


def show_text() -> None:
    """The text with the passage marked under its heading (anchor ``#passage``): the text before
    it folded away, so the passage opens at the top of the page; the rest follows it."""
    before, passage, after = vm.text_parts(view)
    if not passage:
        st.markdown(before, unsafe_allow_html=True)
        return
    if before.strip():
        with st.expander(md("The text before the passage ({} characters)", view.span[0] if view.span else 0)):
            st.markdown(before, unsafe_allow_html=True)
    st.subheader(md("▸ {}", view.heading or "The passage"), anchor=vm.PASSAGE_ANCHOR)
    st.markdown(passage + after, unsafe_allow_html=True)


if view.kind == "pdf" and view.page:
    pages = view.pages or 1
    number = view.page
    prev, middle, nxt = st.columns([1, 2, 1], vertical_alignment="bottom")
    if prev.button("◀ Previous", disabled=number <= 1, key="viewer-prev", width="stretch"):
        go_to_page(number - 1)
    typed = middle.number_input(
        f"Page (of {pages})", min_value=1, max_value=pages, value=number, step=1, key=f"viewer-page:{number}"
    )
    if nxt.button("Next ▶", disabled=number >= pages, key="viewer-next", width="stretch"):
        go_to_page(number + 1)
    if typed != number:
        go_to_page(int(typed))
    try:
        regions = tuple(tuple(box) for box in view.table_boxes(number))
        image = cached_page(stored.sha256, number, tuple(view.passage_on(number)), regions, data)
    except KnowledgeError as exc:
        st.error(md("Page {} cannot be shown: {}", number, str(exc)))
    else:
        on_page = view.passage_on(number)
        if image.found and image.regions:
            st.caption(md("The passage is highlighted on page {}, in the table outlined in blue.", number))
        elif image.found:
            st.caption(md("The passage is highlighted on page {}.", number))
        elif image.regions:
            st.caption(md("The passage lies in the table outlined in blue on page {}.", number))
        elif on_page:
            st.caption(
                "The passage's text is not in this page's text layer (a scan read by OCR?): it is shown below the page."
            )
        st.image(image.png, caption=md("Page {} of {}", number, pages), width="stretch")
        if on_page:
            with st.expander("The passage's text", expanded=not image.found or bool(view.passage_tables())):
                st.markdown(vm.text_parts(view)[1], unsafe_allow_html=True)
elif view.kind == "image":
    try:
        st.image(vm.image_png(data, view.page or 1), width="stretch")
    except KnowledgeError as exc:
        st.error(inert(exc))
    if view.text:
        st.markdown("##### Text read from the image (OCR)")
        show_text()
elif view.text:
    show_text()
