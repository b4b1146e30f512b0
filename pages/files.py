"""Files: the file store -- the stored files 50 a page, searched by name, type and date (click a row
for its details), which stores use it, the viewer, download and delete."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.pagemodels import viewer as vm
from knowledge.people.policy import describe_readers
from knowledge.text.render import inert, md
from knowledge.workbench import StoredFileUsage, Workbench
from pages._ui import app_workbench, flash, human_size, kilobytes, set_flash
from pages.widgets import FILE_TYPES, confirm, page_offset, pager

wb: Workbench = app_workbench()


st.title("📄 Files")
st.caption(
    "Every file saved in the file store, by id. Identical bytes are kept once on disk; a store uses a "
    "file through its chunks, which cite the file's id."
)


#: Files a page of the table shows.
PAGE_ROWS = 50

with st.container(border=True):
    q1, q2 = st.columns([3, 2])
    name = q1.text_input("Search by name", key="files-name", placeholder="part of a file name")
    types = q2.multiselect("Type", FILE_TYPES, key="files-type", placeholder="any")
    q3, q4 = st.columns(2)
    since = q3.date_input("Saved from (UTC)", value=None, key="files-since")
    until = q4.date_input("Saved up to (UTC)", value=None, key="files-until")
version = repr((name.strip(), types, since, until))
offset = page_offset("files-page", version, PAGE_ROWS)
try:
    page = wb.stored_file_page(
        name=name,
        types=types,
        since=datetime.combine(since, time(), UTC) if since else None,
        until=datetime.combine(until + timedelta(days=1), time(), UTC) if until else None,
        limit=PAGE_ROWS,
        offset=offset,
    )
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()
usage = page.usages

c1, c2, c3 = st.columns(3)
c1.metric("Stored files", f"{page.total:,}", help="Files saved in the file store, each once (those matching the search).")
c2.metric("Total size", human_size(page.total_bytes), help="Of the files matching the search.")
c3.metric("Not used by any store", f"{page.unused:,}", help="Of the files matching the search.")

if not usage:
    if name.strip() or types or since or until:
        st.info("No stored file matches the search.")
    else:
        st.info("No files yet. Files arrive when you drop them on a store (Vector stores page).")
    st.stop()

by_id = {u.file.id: u for u in usage}
version = str(hash((version, page.offset, tuple(by_id))))  # a new page of files, a new table (and selection)
st.caption("Click a row to see the file's details below; **Open** shows it in the viewer.")
table = st.dataframe(
    [
        {
            "name": u.file.name,
            "open": vm.viewer_url(u.stores[0], u.file.id) if u.stores else None,
            "also named": u.aliases,
            "type": u.file.content_type,
            "size (kB)": kilobytes(u.file.size),
            "sha256": u.file.sha256,
            "created": u.file.created,
            "stores": u.labels(),
            "id": u.file.id,
        }
        for u in usage
    ],
    hide_index=True,
    width="stretch",
    key=f"files-table:{version}",
    on_select="rerun",
    selection_mode="single-row",
    column_config={
        "open": st.column_config.LinkColumn(
            "view", display_text="Open", width="small", help="Open the file in the viewer (in a new tab)"
        ),
        "size (kB)": st.column_config.NumberColumn(format="%.1f"),
        "sha256": st.column_config.TextColumn(width="small", help="SHA-256 of the content"),
        "created": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm"),
        "also named": st.column_config.ListColumn(
            "also named", help="The same bytes under other names in the stores: kept and indexed once"
        ),
        "stores": st.column_config.ListColumn(
            "used by", help='Stores holding the file; "(failed)": kept there for a retry, not searchable'
        ),
    },
)
pager("files-page", repr((name.strip(), types, since, until)), page.total, PAGE_ROWS, page.offset)

# The clicked row; else ?file=<id> (a link to one file's details); else the newest file of the page.
rows = table.selection.rows if table is not None else []
wanted = str(st.query_params.get("file") or "")
linked = by_id.get(wanted)
if linked is None and wanted:  # a link to a file on no page shown: its details all the same
    try:
        found = wb.stored_file(wanted)
        stores = wb.stores_using_file(found.id)
        records = {s: wb.file_record(s, found.id) for s in stores}
        linked = StoredFileUsage(found, stores, {s: r.status for s, r in records.items() if r is not None})
    except KnowledgeError:
        linked = None
chosen = usage[rows[0]] if rows and rows[0] < len(usage) else linked or usage[0]
f = chosen.file

with st.container(border=True):
    st.subheader(inert(f.name))
    st.caption(md("{} · {} · {} · sha256 {}…", f.id, f.content_type, human_size(f.size), f.sha256[:16]))
    if chosen.aliases:
        st.markdown("Also named: " + ", ".join(md("**{}**", n) for n in chosen.aliases))
    if chosen.stores:
        st.markdown("Used by: " + ", ".join(md("**{}**", s) for s in chosen.labels()))
        st.markdown(" · ".join(md("{}: ", s) + vm.viewer_link(vm.viewer_url(s, f.id)) for s in chosen.stores))
        for s in chosen.stores:  # a file with readers of its own there (File details on the Vector stores page)
            try:
                readers = wb.file_readers(s, f.id)
            except KnowledgeError:
                continue
            if readers is not None:
                st.caption(md("🔒 In {} only {} may read it (and the store's owner).", s, describe_readers(readers)))
    else:
        st.write("Not used by any store.")
    try:
        with wb.read_file(f.id) as fh:
            data = fh.read()
        st.download_button("⬇️ Download", data, file_name=f.name, mime=f.content_type, key=f"dl:{f.id}")
    except KnowledgeError as exc:
        st.error(inert(exc))

    st.markdown("##### Delete")
    flash("files")
    # Signed in by account: deleting needs write access to every store using the file, and a file no
    # store uses is its uploader's (or an admin's); the view refuses otherwise, so say it up front.
    readonly = [s for s in chosen.stores if wb.level(s) not in ("write", "owner")]
    if readonly:
        st.caption(
            md(
                "You may not delete it: {} {} shared with you read-only.",
                ", ".join(readonly),
                "is" if len(readonly) == 1 else "are",
            )
        )
        st.stop()
    if not chosen.stores and not wb.actor.is_admin and f.metadata.get("owner") != wb.actor.username:
        st.caption("You may not delete it: it is someone else's.")
        st.stop()
    from_stores = False
    if chosen.stores:
        from_stores = st.checkbox(
            md("Also remove it from {} (their chunks of this file go too)", ", ".join(chosen.stores)),
            key=f"from-stores:{f.id}",
        )
        st.caption(
            "A file that stores still use is kept unless you tick this: their chunks cite it, and "
            "search results would point at a file that is gone."
        )
    if confirm(
        "🗑️ Delete file",
        f"delete:{f.id}",
        md("Delete **{}** from the file store", f.name)
        + (md(" and from {}?", ", ".join(chosen.stores)) if from_stores else "?"),
        type="primary",
    ):
        try:
            removed = wb.delete_stored_file(f.id, from_stores=from_stores)
            also = f" and removed it from {', '.join(removed)}" if removed else ""
            set_flash("files", True, f"Deleted {f.name}{also}.")
            st.rerun()
        except KnowledgeError as exc:
            st.error(inert(f"{f.name}: {exc}"))
