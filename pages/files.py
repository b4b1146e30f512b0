"""Files: the file store -- every stored file (click a row for its details), which stores use it, the
viewer, download and delete."""

from __future__ import annotations

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.pagemodels import viewer as vm
from knowledge.people.policy import describe_readers
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import app_workbench, flash, human_size, kilobytes, set_flash
from pages.widgets import confirm

wb: Workbench = app_workbench()


st.title("📄 Files")
st.caption(
    "Every file saved in the file store, by id. Identical bytes are kept once on disk; a store uses a "
    "file through its chunks, which cite the file's id."
)


try:
    usage = wb.list_files()
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()

c1, c2, c3 = st.columns(3)
c1.metric("Stored files", len(usage), help="Files saved in the file store, each once.")
c2.metric("Total size", human_size(sum(u.file.size for u in usage)))
c3.metric("Not used by any store", sum(1 for u in usage if not u.stores))

if not usage:
    st.info("No files yet. Files arrive when you drop them on a store (Vector stores page).")
    st.stop()

by_id = {u.file.id: u for u in usage}
version = str(hash(tuple(by_id)))  # a new list of files, a new table (and selection)
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
        "size (MB)": st.column_config.NumberColumn(format="%.3f"),
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

# The clicked row; else ?file=<id> (a link to one file's details); else the newest file.
rows = table.selection.rows if table is not None else []
linked = by_id.get(str(st.query_params.get("file") or ""))
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
