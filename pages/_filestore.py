"""The Settings page's "File store" tab: where the stored files live (the catalog's record), a move's
progress (from the record: a move run by the CLI on another machine shows too), and for an admin
the move to another file store the settings name (knowledge.service.filehome, docs/team.md "Moving
the files to another store"), started in a background thread of the app, and the deletion of the old
copies after it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.service.filehome import describe, location_of, same_store
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import flash, set_flash

#: Seconds without progress after which a move not started by this process counts as interrupted
#: (a running move writes its progress at least every second while it copies).
STALLED_SECONDS = 30


def _targets(wb: Workbench) -> list[str]:
    """The backends the settings name a store for, other than the one the files are in."""
    fs, here = wb.settings.file_store, wb.file_store_home().location
    named = ["filesystem"]
    if fs.url or wb.settings.catalog.url:
        named.append("postgresql")
    if (fs.s3_bucket or "").strip():
        named.append("s3")
    return [b for b in named if not same_store(location_of(wb.settings, b), here)]


def file_store_tab(wb: Workbench) -> None:
    """The tab's content (its own flash messages under ``file-move``)."""
    flash("file-move")
    _status(wb)
    if not wb.actor.is_admin:
        st.info("Only an admin moves the files to another file store.")
        return
    home = wb.file_store_home()
    state = wb.file_move_state()
    if state.get("running"):
        return
    if home.moving_to is not None:  # a move this process did not start: running elsewhere, or interrupted
        quiet = home.updated is None or datetime.now(UTC) - home.updated > timedelta(seconds=STALLED_SECONDS)
        if quiet and st.button("Resume the move", type="primary", icon=":material/play_arrow:"):
            try:
                wb.start_file_move(str(home.moving_to.get("backend")))
            except KnowledgeError as exc:
                set_flash("file-move", False, str(exc))
            st.rerun()
        return
    if home.previous is not None:  # a finished move: its old copies first (then another move may start)
        st.subheader("Old copies")
        st.caption(
            md(
                "The files were moved from {}; its copies are kept until deleted. Only files whose copy"
                " is checked in the new store are deleted.",
                describe(home.previous),
            )
        )
        if st.button("Delete the old copies", icon=":material/delete:"):
            try:
                n = wb.delete_old_file_copies()
                set_flash("file-move", True, f"Deleted {n} old copies.")
            except KnowledgeError as exc:
                set_flash("file-move", False, str(exc))
            st.rerun()
        return
    targets = _targets(wb)
    st.subheader("Move the files to another store")
    if not targets:
        st.caption(
            "The settings name no other file store. Set the target's `file_store.*` settings (for S3:"
            " `file_store.s3_bucket`, `s3_endpoint_url`, credentials) next to the current ones and"
            " restart the app; or run `knowledge files move --to s3` where they are set."
        )
    else:
        st.caption(
            "Every file is copied by its id and checked (SHA-256) before the switch; uploads and ingestion"
            " go on meanwhile. The old copies stay until you delete them."
        )
        to = st.selectbox(
            "Move to", targets, format_func=lambda b: describe(location_of(wb.settings, b)), key="file_move_to"
        )
        if st.button("Move the files", type="primary", icon=":material/drive_file_move:"):
            try:
                wb.start_file_move(to)
            except KnowledgeError as exc:
                set_flash("file-move", False, str(exc))
            st.rerun()


def _status(wb: Workbench) -> None:
    """Where the files are and, during a move, its progress bar (re-read every second, then only)."""
    if wb.file_store_home().moving_to is not None or wb.file_move_state().get("running"):
        _live(wb)
    else:
        _draw(wb)


def _draw(wb: Workbench) -> None:
    home = wb.file_store_home()
    state = wb.file_move_state()
    st.markdown(md("The files are in **{}**.", describe(home.location)))
    if home.moving_to is not None:
        done = home.progress or {}
        copied, total = int(done.get("copied") or 0), done.get("total")
        text = (
            f"Switching to {describe(home.moving_to)}: the last files saved meanwhile"
            if home.phase == "switching"
            else f"Copying to {describe(home.moving_to)}: {copied} of {total if total is not None else '…'}"
            " files copied and checked"
        )
        st.progress(min(1.0, copied / total) if total else 0.0, text=inert(text))
        if not state.get("running"):
            st.caption(
                md(
                    "Started by another process (`knowledge files move --to {}`). If it was interrupted it"
                    " resumes where it stopped: run it again, or Resume the move here.",
                    str(home.moving_to.get("backend")),
                )
            )
    moving = bool(state.get("running")) or home.moving_to is not None
    if st.session_state.get("file_move_seen_moving") and not moving:
        st.session_state["file_move_seen_moving"] = False
        st.rerun(scope="app")  # the move ended: the tab's forms change (old copies to delete, other targets)
    st.session_state["file_move_seen_moving"] = moving
    report = state.get("report")
    if state.get("error") and not state.get("running"):
        st.error(inert(f"The move stopped: {state['error']} Start it again: it resumes where it stopped."))
    elif report is not None and report.switched and not state.get("running"):
        st.success(
            inert(
                f"Moved the files to {report.target}: {report.copied} copied and checked. Set"
                f" file_store.backend = {state.get('to')!r} in every process's settings."
            )
        )


_live = st.fragment(run_every=1.0)(_draw)
