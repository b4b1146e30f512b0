"""The Stores page's folder sync: the folders a store is kept in sync with (knowledge/sync.py), each
with its last sync's plan, "Add folder" and "Sync now". Both first show the plan (added, changed,
renamed, deleted, unchanged) and apply it only when confirmed, as a background job shown by the
page's batch panel like an upload. Folders go through the app's LocalFolders (ingest.allowed_dirs),
as the folder-ingest form does.
"""

from __future__ import annotations

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.sync import SyncJob, SyncPlan, counts_text
from knowledge.text.render import md
from knowledge.workbench import Workbench
from pages._ui import flash, has_flash, set_flash

_MARK = {"added": "➕ added", "changed": "✏️ changed", "renamed": "🔀 renamed", "deleted": "🗑️ deleted"}


def sync_section(wb: Workbench, store: str) -> None:
    """The expander "Folders kept in sync" of ``store`` (its own flash messages under ``sync:<store>``)."""
    folders = st.session_state["local_folders"]
    known = wb.syncs.synced_folders(store)
    preview: tuple[str, SyncPlan] | None = st.session_state.get(f"sync-preview:{store}")
    title = f"🔄 Folders kept in sync ({len(known)})" if known else "🔄 Keep a folder in sync"
    # open while a plan waits, and after an action that has something to say (an Add folder refused
    # because the folder is outside the allowed ones must not fold its error away)
    with st.expander(title, expanded=preview is not None or has_flash(f"sync:{store}")):
        flash(f"sync:{store}")
        st.caption(
            "The store follows the folder: new files are added, changed ones ingested again, moved ones "
            "renamed (not embedded again), removed ones deleted. A sync deletes only files that a sync "
            "of that folder added; files you uploaded by hand are never touched."
        )
        if preview is not None:
            _preview(wb, store, *preview)
        if known:
            for f in known:  # lines, not a table: they wrap on a phone
                when = f"{f.last_sync:%Y-%m-%d %H:%M} UTC" if f.last_sync else "never"
                st.markdown(md("📁 **{}** · {}  \nlast sync {}: {}", f.folder, f.glob, when, counts_text(f.last_plan)))
            c1, c2, c3 = st.columns([3, 1, 1], vertical_alignment="bottom")
            pick = c1.selectbox("Folder", [f.folder for f in known], key=f"sync-pick:{store}")
            chosen = next(f for f in known if f.folder == pick)
            if c2.button(
                "🔄 Sync now",
                key=f"sync-now:{store}",
                width="stretch",
                help="Shows what would change first; nothing changes until you apply it.",
            ):
                _plan(wb, store, chosen.folder, chosen.glob, folders)
            if c3.button(
                "Forget",
                key=f"sync-forget:{store}",
                width="stretch",
                help="Stop syncing this folder; its files stay in the store, as if added by hand.",
            ):
                wb.syncs.forget(store, chosen.folder)
                set_flash(f"sync:{store}", True, f"{chosen.folder} is no longer synced; its files stay.")
                st.rerun()
        st.caption(md("Allowed folders: {} (setting `ingest.allowed_dirs`).", folders.describe()))
        with st.form(f"sync-add:{store}"):
            c1, c2 = st.columns([3, 1])
            folder = c1.text_input("Folder to keep in sync", placeholder="/path/to/docs")
            glob = c2.text_input("Glob", value="**/*", help="`**/*.md` = every Markdown file, recursively")
            if st.form_submit_button("Add folder"):
                _plan(wb, store, folder, glob, folders)


def _plan(wb: Workbench, store: str, folder: str, glob: str, folders) -> None:
    """Plan a sync (nothing changes yet) and rerun to show it for confirmation."""
    job = wb.shown_job(store, st.session_state.get(f"job:{store}"))
    if job is not None and not job.done:
        set_flash(f"sync:{store}", False, "A batch is running; wait for it or stop it first.")
        st.rerun()
    try:
        with st.spinner("Comparing the folder with the store..."):
            plan = wb.syncs.folder(store, folder, glob, folders=folders).plan()
        st.session_state[f"sync-preview:{store}"] = (folder, plan)
    except KnowledgeError as exc:
        set_flash(f"sync:{store}", False, str(exc))
    st.rerun()


def _preview(wb: Workbench, store: str, folder: str, plan: SyncPlan) -> None:
    """The plan of a sync, with Apply and Cancel."""
    with st.container(border=True):
        st.markdown(md("**Plan for {}** ({}): {}", plan.folder, plan.glob, plan.summary()))
        changes = [i for i in plan.items if i.action != "unchanged"]
        if changes:
            st.dataframe(
                [{"change": _MARK[i.action], "file": i.path, "was": i.old_path or ""} for i in changes],
                hide_index=True,
                width="stretch",
                key=f"sync-plan:{store}",
            )
        else:
            st.caption("The store already matches the folder.")
        c1, c2 = st.columns(2)
        if c1.button(
            "✅ Apply" if changes else "✅ Keep it in sync", key=f"sync-apply:{store}", type="primary", width="stretch"
        ):
            st.session_state.pop(f"sync-preview:{store}", None)
            try:
                sync = wb.syncs.folder(store, folder, plan.glob, folders=st.session_state["local_folders"])
                if changes:
                    st.session_state[f"job:{store}"] = SyncJob(sync, plan).start()
                else:
                    sync.apply(plan)  # nothing to change: remember the folder and the time
                    set_flash(f"sync:{store}", True, f"{plan.folder} is in sync.")
            except KnowledgeError as exc:
                set_flash(f"sync:{store}", False, str(exc))
            st.rerun()
        if c2.button("Cancel", key=f"sync-cancel:{store}", width="stretch"):
            st.session_state.pop(f"sync-preview:{store}", None)
            st.rerun()
