"""Sources: the shares, repositories, mailboxes, drives and buckets a store is kept in sync with
(:mod:`knowledge.sources`), through ``wb.sources`` (every check and audit is there).

The sources of the stores the person may read, in a table; per source its settings (a secret one as
"set", never its value), Run now (a run queued for the workers: the page follows it until it ends),
Pause/Resume, Check connection, Dry run (what the next run would change), Edit and Remove (asked
first, with "keep its files"), and its runs with each file's outcome, failed ones first. Running,
pausing, checking need write access to the store; editing and removing, its ownership. "Add a
source" is a form built from the kind's settings; a secret input is never pre-filled, and is empty
again after each submit. What it shows is computed by :mod:`knowledge.pagemodels.sources`.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.pagemodels import sources as sm
from knowledge.people.policy import describe_readers
from knowledge.sources.base import Source
from knowledge.sources.engine import RunRecord, SourcePlan, SourceRecord
from knowledge.sources.shown import location, run_text, schedule, settings_shown
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import app_workbench, flash, has_flash, set_flash
from pages.widgets import confirm

wb: Workbench = app_workbench()
PICK, PICK_NEXT, ADD_NONCE = "source-pick", "source-pick-next", "source-add-nonce"
RUNS_SHOWN = 20
#: Failed files of a run said in words above its table (all are in the table, first).
FAILED_SHOWN = 10

st.title("🔌 Sources")
st.caption(
    "Shares, repositories, mailboxes, drives and buckets a store is kept in sync with. A run lists the "
    "source and brings the store up to date: new files are added, changed ones read again, moved ones "
    "renamed (nothing embedded again), removed ones deleted. A run deletes only what this source added."
)
flash("sources")

try:
    kinds: dict[str, type[Source]] = wb.sources.kinds()
    records = wb.sources.records()
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()


def _default_mb() -> float:
    return round(wb.settings.sources.max_file_bytes / 1_000_000, 1)


def field_inputs(cls: type[Source], rec: SourceRecord | None, prefix: str, nonce: int) -> dict[str, Any]:
    """The inputs of ``cls``'s settings (inside a form), by setting name. A secret input's key
    carries ``nonce``, so after a submit it is a new, empty input: what was typed stays nowhere."""
    values: dict[str, Any] = {}
    for i in sm.inputs(cls, rec):
        key = f"{prefix}:{i.name}"
        f = i.field
        if f.secret:
            values[i.name] = st.text_input(
                i.label,
                value="",
                type="password",
                placeholder=i.placeholder,
                help=i.help or None,
                key=f"{key}:{nonce}",
                autocomplete="new-password",
            )
        elif f.kind == "bool":
            values[i.name] = st.checkbox(i.label, value=bool(i.value), help=i.help or None, key=key)
        elif f.kind == "int":
            values[i.name] = st.number_input(
                i.label, value=i.value, min_value=0, step=1, help=i.help or None, key=key, placeholder="not set"
            )
        elif f.kind == "list":
            values[i.name] = st.text_area(i.label, value=i.value, help=i.help or None, key=key, height=80)
        else:
            values[i.name] = st.text_input(i.label, value=i.value, help=i.help or None, key=key)
    return values


def option_inputs(rec: SourceRecord | None, prefix: str) -> dict[str, Any]:
    """Globs, size limit, schedule and default readers (inside a form), as the engine takes them."""
    c1, c2 = st.columns(2)
    include = c1.text_area(
        "Include (globs)",
        value=sm.globs_text(rec.include) if rec else "",
        placeholder="**/*.pdf",
        help="Take only the files matching one of these, one per line (`*` within a folder, `**` across"
        " folders). Empty: every file.",
        key=f"{prefix}:include",
        height=80,
    )
    exclude = c2.text_area(
        "Exclude (globs)",
        value=sm.globs_text(rec.exclude) if rec else "",
        placeholder="**/~$*",
        help="Leave out the files matching one of these, one per line.",
        key=f"{prefix}:exclude",
        height=80,
    )
    c1, c2 = st.columns(2)
    mb = c1.number_input(
        "Size limit (MB)",
        value=sm.mb_of(rec.max_bytes) if rec else None,
        min_value=0.0,
        max_value=sm.MAX_MB,
        step=1.0,
        placeholder=f"default {_default_mb():g} MB",
        help=f"Larger files are left out. Empty: the setting sources.max_file_bytes ({_default_mb():g} MB).",
        key=f"{prefix}:mb",
    )
    every = c2.number_input(
        "Run every (minutes)",
        value=int(rec.every_minutes or 0) if rec else 0,
        min_value=0,
        max_value=525_600,
        step=5,
        help="0: by hand only (Run now).",
        key=f"{prefix}:every",
    )
    readers = st.text_input(
        "Default readers",
        value=sm.readers_text(rec.readers) if rec else "",
        placeholder="group:hr, user:ana",
        help="Who may read its files where the source says nothing itself (besides the store's owners)."
        " Empty: everyone who may read the store.",
        key=f"{prefix}:readers",
    )
    return {
        "include": sm.globs_of(include),
        "exclude": sm.globs_of(exclude),
        "max_bytes": sm.max_bytes_of(mb),
        "every_minutes": sm.every_of(every),
        "readers": sm.readers_of(readers),
    }


# -- the sources ---------------------------------------------------------------------------------------------
def last_run(rec: SourceRecord) -> RunRecord | None:
    runs = wb.sources.runs(rec.name, 1)
    return runs[0] if runs else None


def overview(recs: list[SourceRecord]) -> None:
    lasts = {r.name: last_run(r) for r in recs}
    where = {r.name: location(kinds.get(r.kind), r, wb.settings) for r in recs}
    st.dataframe(
        sm.overview_rows(recs, lasts, where),
        hide_index=True,
        width="stretch",
        key="sources-table",
        column_config={"location": st.column_config.TextColumn(width="medium")},
    )


def source_panel(rec: SourceRecord) -> None:
    cls = kinds.get(rec.kind)
    level = wb.level(rec.store)
    may_run, may_own = level in ("write", "owner"), level == "owner"
    last = last_run(rec)
    with st.container(border=True):
        st.subheader(inert(rec.name))
        st.caption(
            md(
                "{} · into the store **{}** · {}",
                cls.title if cls is not None and cls.title else rec.kind,
                rec.store,
                location(cls, rec, wb.settings),
            )
        )
        st.markdown(md("**Schedule:** {}  \n**Last run:** {}", schedule(rec), run_text(last)))
        flash(f"source:{rec.name}")
        if may_run:
            actions(rec)
        else:
            st.caption("You may read this store: you see the source and its runs; running it needs write access.")
        plan: SourcePlan | None = st.session_state.get(f"source-plan:{rec.name}")
        if plan is not None:
            dry_run(rec, plan)
        with st.expander("⚙️ Settings", expanded=False):
            settings_view(cls, rec)
        if may_own:
            edit_section(cls, rec)
            remove_section(rec)
        history(rec, last)


def actions(rec: SourceRecord) -> None:
    key = rec.name
    c1, c2, c3, c4 = st.columns(4)
    if c1.button("▶️ Run now", key=f"source-run:{key}", type="primary", width="stretch"):
        try:
            run = wb.sources.run(rec.name)
            set_flash(f"source:{key}", True, f"A run is {run.status}: the page follows it below.")
        except KnowledgeError as exc:
            set_flash(f"source:{key}", False, str(exc))
        st.rerun()
    if c2.button(
        "▶️ Resume" if rec.paused else "⏸️ Pause",
        key=f"source-pause:{key}",
        width="stretch",
        help="A paused source's schedule does not run; Run now still does.",
    ):
        try:
            new = wb.sources.pause(rec.name, not rec.paused)
            set_flash(f"source:{key}", True, f"{new.name} is {'paused' if new.paused else 'resumed'}: {schedule(new)}.")
        except KnowledgeError as exc:
            set_flash(f"source:{key}", False, str(exc))
        st.rerun()
    if c3.button(
        "🔌 Check connection", key=f"source-check:{key}", width="stretch", help="Connect and look; no file is read."
    ):
        try:
            with st.spinner("Connecting..."):
                said = wb.sources.check(rec.name)
            set_flash(f"source:{key}", True, f"Connection: {said}")
        except KnowledgeError as exc:
            set_flash(f"source:{key}", False, f"Not reached: {exc}")
        st.rerun()
    if c4.button(
        "🧪 Dry run",
        key=f"source-plan-button:{key}",
        width="stretch",
        help="What the next run would change; the source is listed, nothing is read or changed.",
    ):
        try:
            with st.spinner("Listing the source..."):
                st.session_state[f"source-plan:{key}"] = wb.sources.plan(rec.name)
        except KnowledgeError as exc:
            set_flash(f"source:{key}", False, f"The dry run failed: {exc}")
        st.rerun()


def dry_run(rec: SourceRecord, plan: SourcePlan) -> None:
    with st.container(border=True):
        st.markdown(md("**Dry run:** {} (nothing was changed)", plan.summary()))
        rows = sm.plan_rows(plan)
        if rows:
            st.dataframe(rows, hide_index=True, width="stretch", key=f"source-plan-table:{rec.name}")
        else:
            st.caption("The store already matches the source.")
        for why, n in sorted(plan.skipped.items()):
            st.caption(md("Left out: {} file{} {}", n, "" if n == 1 else "s", why))
        if st.button("Close the dry run", key=f"source-plan-close:{rec.name}"):
            st.session_state.pop(f"source-plan:{rec.name}", None)
            st.rerun()


def settings_view(cls: type[Source] | None, rec: SourceRecord) -> None:
    lines = [md("**{}**: {}", f.label, value or "—") for f, value in settings_shown(cls, rec)]
    limit = f"{rec.max_bytes / 1_000_000:g} MB" if rec.max_bytes else f"{_default_mb():g} MB (the default)"
    lines += [
        md("**Include**: {}", ", ".join(rec.include) or "every file"),
        md("**Exclude**: {}", ", ".join(rec.exclude) or "nothing"),
        md("**Size limit**: {}", limit),
        md("**Default readers**: {}", describe_readers(rec.readers)),
        md("**Added by**: {}", rec.created_by if rec.created_by not in (None, "local") else "the local admin"),
    ]
    st.markdown("  \n".join(lines))
    if cls is not None and cls.carries_permissions:
        st.caption("Who may read each file follows the source's own permissions.")


def edit_section(cls: type[Source] | None, rec: SourceRecord) -> None:
    if cls is None:
        st.caption(md("The kind {} does not load here, so its settings cannot be changed.", rec.kind))
        return
    prefix = f"source-edit:{rec.name}"
    nonce = st.session_state.setdefault(f"{prefix}:nonce", 0)
    with st.expander("✏️ Edit", expanded=has_flash(prefix)):
        flash(prefix)
        with st.form(prefix):
            values = field_inputs(cls, rec, prefix, nonce)
            options = None
            try:
                options = option_inputs(rec, prefix)
            except KnowledgeError as exc:
                st.error(inert(exc))
            if st.form_submit_button("Save changes", type="primary") and options is not None:
                st.session_state[f"{prefix}:nonce"] = nonce + 1  # the secret inputs start empty again
                try:
                    new = wb.sources.update(rec.name, config=sm.config_of(cls, values), **options)
                    set_flash(f"source:{rec.name}", True, f"Saved the settings of {new.name}.")
                except KnowledgeError as exc:
                    set_flash(prefix, False, str(exc))
                st.rerun()


def remove_section(rec: SourceRecord) -> None:
    with st.expander("🗑️ Remove"):
        keep = st.checkbox(
            "Keep its files in the store (as if added by hand)",
            key=f"source-keep:{rec.name}",
            help="Unticked, the files this source added are taken out of the store with it.",
        )
        question = (
            md("Remove the source **{}**? Its files stay in **{}**.", rec.name, rec.store)
            if keep
            else md("Remove the source **{}** and take its files out of **{}**?", rec.name, rec.store)
        )
        if confirm("🗑️ Remove source", f"source-remove:{rec.name}", question, yes="Yes, remove"):
            try:
                n = wb.sources.remove(rec.name, delete_files=not keep)
                set_flash(
                    "sources",
                    True,
                    f"Removed the source {rec.name}; its files stay in {rec.store}."
                    if keep
                    else f"Removed the source {rec.name} and its {n} file{'' if n == 1 else 's'} from {rec.store}.",
                )
            except KnowledgeError as exc:
                set_flash(f"source:{rec.name}", False, str(exc))
            st.rerun()


def history(rec: SourceRecord, last: RunRecord | None) -> None:
    st.markdown("##### Runs")
    if last is not None and last.status in ("queued", "running"):
        follow(rec)
    runs = wb.sources.runs(rec.name, RUNS_SHOWN)
    if not runs:
        st.caption("It has not run yet.")
        return
    st.dataframe(
        sm.run_rows(runs),
        hide_index=True,
        width="stretch",
        key=f"source-runs:{rec.name}",
        column_config={
            "queued": st.column_config.DatetimeColumn("queued (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            "finished": st.column_config.DatetimeColumn("finished (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    by_id = {r.id: r for r in runs}
    picked = st.selectbox(
        "The files of the run",
        list(by_id),
        format_func=lambda rid: sm.run_label(by_id[rid]),
        key=f"source-run-pick:{rec.name}:{runs[0].id}:{runs[0].status}",  # anew when the newest run moves on
    )
    chosen = by_id[picked]
    items = wb.sources.run_items(chosen.id)
    failed = [i for i in items if not i.ok]
    if failed:  # said in lines too: they wrap on a phone, where the table's last column is out of sight
        lines = [md("**{}**: {}", i.path, sm.said(i)) for i in failed[:FAILED_SHOWN]]
        more = len(failed) - FAILED_SHOWN
        st.error(
            md("{} file{} failed:", len(failed), "" if len(failed) == 1 else "s")
            + "  \n"
            + "  \n".join(lines)
            + (md("  \nand {} more (first in the table).", more) if more > 0 else "")
        )
    if chosen.status == "failed" and chosen.reason:
        st.error(md("The run failed: {}", chosen.reason))
    if items:
        st.dataframe(
            sm.item_rows(items),
            hide_index=True,
            width="stretch",
            key=f"source-items:{chosen.id}",
            column_config={"message": st.column_config.TextColumn("outcome in words", width="large")},
        )
    elif chosen.status not in ("queued", "running"):
        st.caption("This run changed no file.")


def follow(rec: SourceRecord) -> None:
    """While a run is queued or running: its state, redrawn every second; the whole page runs again
    once it ends. The fragment has a container of its own (see the Stores page's batch panel)."""
    slot = st.container()

    @st.fragment(run_every=1.0)
    def running_source() -> None:
        runs = wb.sources.runs(rec.name, 1)
        if not runs or runs[0].status not in ("queued", "running"):
            st.rerun(scope="app")
        st.info(md("The run is {}.", run_text(runs[0]).removeprefix("⏳ ")), icon="⏳")

    with slot:
        running_source()


# -- add ----------------------------------------------------------------------------------------------------
def add_section() -> None:
    with st.expander("➕ Add a source", expanded=not records or has_flash("sources-add")):
        flash("sources-add")
        if not kinds:
            st.warning("No kind of source loads here (the server's log says why).")
            return
        names = sorted(kinds)
        kind = st.selectbox(
            "Kind",
            names,
            format_func=lambda k: f"{kinds[k].title or k} ({k})",
            key="source-add-kind",
        )
        cls = kinds[kind]
        if cls.description:
            st.caption(inert(cls.description))
        if cls.carries_permissions:
            st.caption("Who may read each file follows the source's own permissions.")
        nonce = st.session_state.setdefault(ADD_NONCE, 0)
        prefix = f"source-add:{kind}"
        with st.form("source-add"):
            c1, c2 = st.columns(2)
            name = c1.text_input("Source name *", key="source-add-name", help="How the pages, the CLI and the API name it.")
            store = c2.text_input(
                "Store *",
                key="source-add-store",
                help="The store its files go to: one you own, or a new one (made for you).",
            )
            values = field_inputs(cls, None, prefix, nonce)
            options = None
            try:
                options = option_inputs(None, prefix)
            except KnowledgeError as exc:
                st.error(inert(exc))
            if st.form_submit_button("Add source", type="primary") and options is not None:
                st.session_state[ADD_NONCE] = nonce + 1  # the secret inputs start empty again
                try:
                    rec = wb.sources.add(name, kind, store.strip(), sm.config_of(cls, values), **options)
                except KnowledgeError as exc:
                    set_flash("sources-add", False, str(exc))
                else:
                    st.session_state[PICK_NEXT] = rec.name
                    set_flash(
                        "sources",
                        True,
                        f"Added the source {rec.name} into {rec.store}: Check connection tries it, Run now runs it.",
                    )
                st.rerun()


# -- the page -----------------------------------------------------------------------------------------------
if records:
    overview(records)
    names = [r.name for r in records]
    if PICK_NEXT in st.session_state:
        st.session_state[PICK] = st.session_state.pop(PICK_NEXT)
    asked = str(st.query_params.get("source") or "")
    if st.session_state.get(PICK) not in names:
        st.session_state[PICK] = asked if asked in names else names[0]
    pick = st.selectbox("Source", names, key=PICK)
    source_panel(next(r for r in records if r.name == pick))
else:
    st.info("No source yet. Add one below: a share, a repository, a mailbox, a drive or a bucket, and the store it fills.")

add_section()
