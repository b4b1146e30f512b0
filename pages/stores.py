"""Vector stores: templates, stores, and per store the upload, folder ingestion, web pages and file list.

Uploads are ingested by an :class:`~knowledge.service.jobs.IngestJob` in a background thread, so reruns,
clicks and slider moves never interrupt or repeat one; each upload is processed exactly once
(tracked by the ``UploadedFile.file_id`` in ``st.session_state["processed_uploads"]``).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from datetime import time as dtime

import streamlit as st

from knowledge.catalog import DONE, FAILED, PENDING, PROCESSING, FileCounts, FileQuery
from knowledge.errors import KnowledgeError, QuotaExceeded
from knowledge.ingest.chunker import plan_chunking
from knowledge.outcomes import Outcome, can_retry, needs_password, plain_reason
from knowledge.people.policy import describe_readers
from knowledge.service.jobs import IngestJob, round_eta
from knowledge.service.templates import DEFAULT_TEMPLATE, make_template
from knowledge.service.web import MAX_DEPTH
from knowledge.text.render import inert, md
from knowledge.vectorstore.registry import backend_names
from knowledge.workbench import Workbench
from pages._details import details_section, settings_section
from pages._portable import import_part, portable_section
from pages._sync import sync_section
from pages._ui import (
    DISTANCES,
    app_workbench,
    duration,
    flash,
    has_flash,
    human_size,
    megabytes,
    set_flash,
)
from pages.widgets import FILE_TYPES, confirm, page_offset, pager

wb: Workbench = app_workbench()
settings = wb.settings
processed: set[str] = st.session_state.setdefault("processed_uploads", set())

STATUS_LABEL = {DONE: "✅ done", FAILED: "❌ failed", PROCESSING: "⏳ processing", PENDING: "⏳ waiting"}
#: Up to this many warnings of a batch are shown under their files; more, in one closed list.
WARNINGS_INLINE = 3
OUTCOME_ICON = {Outcome.INDEXED: "✅", Outcome.UNCHANGED: "♻️", Outcome.DUPLICATE: "♻️", Outcome.CANCELLED: "⏹️"}

st.title("🗂️ Vector stores")
st.caption(
    "Named collections of embedded text chunks. A store is a template plus a name; drop files on it to make them searchable."
)


# ------------------------------------------------------------------------------------------------
def disk_size(store: str, disk_bytes: int | None) -> int | None:
    """The store's size on disk now, in bytes (``disk_bytes``, the page's figure from its last full
    run, where it cannot be read: also where the person's view of a store with files of restricted
    readers has none, and the store list gave it, as they may read every file)."""
    try:
        vs = wb.vector_store(store)
        size = vs.info().disk_bytes if vs.exists() else None
        return size if size is not None else disk_bytes
    except KnowledgeError:
        return disk_bytes


def counters(store: str, disk_bytes: int | None = None, counts: FileCounts | None = None) -> None:
    """The store's metrics, from ``counts`` (the store's counts as read once for the whole panel,
    with ``disk_bytes`` read then too; both read now when ``counts`` is not given): counted by the
    database (:meth:`Workbench.file_counts`), as the file list's heading is."""
    if counts is None:
        counts, disk_bytes = wb.file_counts(store), disk_size(store, disk_bytes)
    n = counts
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Indexed files", f"{n.indexed:,}", help="Files of this store that are searchable.")
    c2.metric("Chunks", f"{n.chunks:,}", help="Searchable pieces of text of the indexed files.")
    c3.metric("Failed files", f"{n.failed:,}", help="Files that could not be indexed; see Needs attention.")
    # unknown (None) with chunks: the backend does not say, or the size would tell of files the
    # person may not read (access per document); a store without chunks takes no room
    c4.metric("Size on disk", "–" if disk_bytes is None and n.chunks else human_size(disk_bytes or 0))


def status_panel(store: str, disk_bytes: int | None) -> None:
    """Right under the drop zone: the batch header (files done, chunks so far, time left) and the
    store's counters, redrawn every half second while a batch runs, with the store's file list under
    them from the same read (:func:`files_section` then leaves it out: every page that shows this
    panel shows that section); then each file's progress.

    While the batch runs, a fragment redraws this every half second and reruns the whole page once
    the batch is done (so the file list and the stores table follow). The finished batch is drawn by
    the page itself, not by a fragment.

    The panel sits alone in a container of its own. Streamlit (1.67) may start a fragment run
    queued by the browser's auto-rerun timer right after a full run, before that run's messages
    were sent; it then drops the full run's deltas of that fragment, and the browser, finishing the
    full run, removes the fragment's block as stale and moves its later siblings up one place,
    where the fragment run's block then lands on the next sibling: a heading vanished that way.
    Alone in its container the block has no later sibling to replace.
    """
    job = _current_job(store)
    if job is not None and job.done and st.session_state.get(f"refused-after:{store}") is job:
        job = None  # an upload was refused after it: its outcome would read as the refusal's
    slot = st.container()
    if job is None or job.done:
        with slot:
            if job is not None:
                _batch_header(job, store)
            counters(store, disk_bytes)
            if job is not None:
                _job_outcomes(job)
        return

    # A fragment of its own name, registered only while the batch runs: after the full rerun, an
    # auto-rerun the browser had already sent finds no fragment to run and does nothing.
    @st.fragment(run_every=0.5)
    def running_batch() -> None:
        if job.done:
            st.rerun(scope="app")  # the outcomes, the file list and the counts
        # One read of the store's files, and the disk size, before anything is drawn: the counters and
        # the file list below come from it ("Indexed files 8" over "Indexed files (7)" was two reads,
        # and a redraw sends its elements one by one, so nothing slow may come between the two).
        counts = wb.file_counts(store)
        size = disk_size(store, disk_bytes)
        left, right = st.columns([5, 1], vertical_alignment="center")
        with left:
            _batch_header(job, store)
        if right.button(
            "⏹️ Stop",
            key=f"stop:{store}",
            help="Cancel the current file and skip the rest; the store keeps what was finished.",
        ):
            job.cancel()
        # The file list right under the counters, the outcomes after: a redraw replaces the elements
        # one by one, the rest staying as they were until their turn, so with the outcomes (a line
        # per file) between them the counter showed 8 over the list's "Indexed files (7)" most of
        # the time. Each part in a container of its own, so none moves as the outcomes grow.
        counters(store, size, counts)
        with st.container():
            _file_list(store, counts, running=True)
        with st.container():
            _job_outcomes(job)

    with slot:
        running_batch()


def _batch_header(job: IngestJob, store: str) -> None:
    """``n of N files · chunks so far · time left`` as a progress bar (a summary once done)."""
    n, total = job.finished, len(job.files)
    if job.done:
        counts = job.counts()
        parts = (
            [
                f"{counts[o]} {label}"
                for o, label in (
                    (Outcome.INDEXED, "indexed"),
                    (Outcome.UNCHANGED, "unchanged"),
                    (Outcome.DUPLICATE, "duplicates"),
                    (Outcome.FAILED, "failed"),
                    (Outcome.CANCELLED, "not started"),
                )
                if counts.get(o)
            ]
            if not hasattr(job, "summary_parts")
            else job.summary_parts()
        )  # a folder sync
        st.progress(
            1.0,
            text=f"**Batch done: {total} file{'' if total == 1 else 's'}** · {job.chunks} chunks · "
            + inert(", ".join(parts)),
        )
        return
    runs = wb.runs_workers()
    if getattr(job, "waiting_for_worker", False) and (  # a folder sync has no job rows
        not runs or time.monotonic() - (job.started_at or 0) > QUEUED_AFTER_SECONDS
    ):
        st.progress(0.0, text=queued_text(job, store, runs))
        return
    eta = job.eta_seconds()
    left = f"about {duration(round_eta(eta))} left" if eta is not None else "estimating the time left…"
    st.progress(
        job.fraction,
        text=md(
            "**{} of {} files** into {} · {} chunk{} so far · {}",
            n,
            total,
            store,
            job.chunks,
            "" if job.chunks == 1 else "s",
            left,
        ),
    )


#: Seconds a batch waits for this app's own worker before its header says it is queued (a claim is quick).
QUEUED_AFTER_SECONDS = 2.0


def queued_text(job: IngestJob, store: str, runs_workers: bool) -> str:
    """The header of a batch no worker has started yet: queued, waiting for a worker (which one
    ingests it: this app's, or with ``ingest.worker_threads = 0`` a ``knowledge worker`` process)."""
    total = len(job.files)
    who = (
        "this app runs no worker (ingest.worker_threads = 0): a `python -m knowledge worker` process ingests it"
        if not runs_workers
        else "it starts when the worker is free"
    )
    return md("**{} file{} queued** into {} — waiting for a worker · {}", total, "" if total == 1 else "s", store, who)


def _said(r) -> str:
    """The result's message without the file name it starts with (the line names the file), in words."""
    prefix = f"{r.name}: "
    msg = r.message[len(prefix) :] if r.message.startswith(prefix) else r.message
    return msg if r.ok or r.outcome == Outcome.CANCELLED else plain_reason(msg)


def _current_job(store: str) -> IngestJob | None:
    """The batch this tab shows for ``store`` (:meth:`IngestJob.visible_for`)."""
    return wb.shown_job(store, st.session_state.get(f"job:{store}"))


def _job_outcomes(job: IngestJob) -> None:
    """One line per file of ``job``: its progress, or its outcome once it is finished. A failed
    file that the store keeps for a retry is listed once, under Needs attention, not
    here again, even while the rest of the batch runs (a file refused before it was kept, too large
    for one, is said here; the record of each failed result is read, not the store's list)."""
    failed = 0

    def kept(file_id: str | None) -> bool:
        rec = wb.file_record(job.store, file_id) if file_id else None
        return rec is not None and rec.status == FAILED

    for note in getattr(job, "notes", []):  # e.g. how many files the folder walk skipped, and why
        st.caption(inert(note))
    # A few warnings stand under their files; more go into one closed list after them (twelve book
    # chapters, each with its dropped mdBook directives, pushed the store's file list a page down).
    warned = [
        (fp.name, w)
        for fp in job.files
        if fp.result is not None and (fp.result.ok or fp.result.outcome == Outcome.CANCELLED)
        for w in fp.result.warnings
    ]
    inline = len(warned) <= WARNINGS_INLINE
    waiting: dict[str, list[str]] = {}  # why files wait to be tried again (an outage) -> their names
    for fp in job.files:
        if fp.result is None and fp.waiting_reason:
            waiting.setdefault(fp.waiting_reason, []).append(fp.name)
    for reason, names in waiting.items():  # one line per reason: twenty files waiting for S3 are one outage
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        st.info(
            md(
                "**{} file{}** ({}) — {}; tried again by themselves, nothing is lost.",
                len(names),
                "" if len(names) == 1 else "s",
                shown,
                reason,
            ),
            icon="⏳",
        )
    for fp in job.files:
        r = fp.result
        if r is None:
            if fp.stage == "waiting":
                continue  # the header counts them; a long batch is not a long list of empty bars
            eta = fp.eta_seconds()
            left = f", about {duration(eta)} left" if eta is not None else ""
            st.progress(fp.fraction, text=inert(f"{fp.name} — {fp.stage}{left}"))
        elif r.ok or r.outcome == Outcome.CANCELLED:
            st.markdown(md("{} **{}** — {}", OUTCOME_ICON.get(r.outcome, "•"), fp.name, _said(r)))
            for w in r.warnings if inline else ():
                st.warning(inert(f"{fp.name}: {w}"), icon="⚠️")
        elif kept(r.file_id):
            failed += 1
        else:
            st.error(md("**{}** — {}", fp.name, _said(r)), icon="❌")
    if not inline:
        files = len({name for name, _ in warned})
        with st.expander(f"⚠️ {len(warned)} warnings on {files} file{'' if files == 1 else 's'}"):
            st.markdown("\n".join("- " + md("**{}**: {}", name, w) for name, w in warned))
    if failed:
        st.caption(f"{failed} file{' is' if failed == 1 else 's are'} listed under **Needs attention** below.")


def upload_section(store: str, disk_bytes: int | None) -> None:
    limit_mb = settings.ingest.max_file_mb
    uploads = st.file_uploader(
        "Drop files here (PDF, Office, OpenDocument, EPUB, RTF, mail, ZIP, Markdown, HTML, CSV, text, images)",
        accept_multiple_files=True,
        # The box counts its limit in MiB but shows it as "MB": give it the setting's number so both
        # say the same; a file over the setting's 10^6-byte MB yet under the box's limit is then
        # refused by the ingestion, with a message naming it.
        key=f"upload:{store}",
        max_upload_size=max(1, math.ceil(limit_mb)),
        help=f"Up to {limit_mb:g} MB per file (setting ingest.max_file_mb). Each file is ingested once.",
    )
    new = [u for u in uploads or [] if u.file_id not in processed]
    job = _current_job(store)
    if new and job is not None and not job.done:
        st.info(f"{len(new)} file(s) wait for the current batch to finish.")
    elif new:
        processed.update(u.file_id for u in new)  # before anything else: never twice
        items = [(u.name, u.getvalue()) for u in new]
        try:
            st.session_state[f"job:{store}"] = wb.submit_batch(store, items)
        except QuotaExceeded as exc:  # nothing was kept: the words say the limit and the use
            # the last batch's "Batch done" would stand under this refusal as if it were its outcome
            st.session_state[f"refused-after:{store}"] = _current_job(store)
            st.session_state.pop(f"job:{store}", None)
            names = ", ".join(name for name, _ in items[:5]) + (", ..." if len(items) > 5 else "")
            st.error(md("**Not added: {}.** {}", names, str(exc)), icon="🚫")
    status_panel(store, disk_bytes)

    tpl = wb.store_template(wb.get_store(store))
    folders = st.session_state["local_folders"]
    skipped = st.session_state.pop(f"skipped:{store}", None)
    if skipped:
        st.warning(inert(skipped))
    with st.expander("📁 Ingest a folder on this machine"):
        st.caption(
            md(
                "Allowed folders: {} (setting `ingest.allowed_dirs`). Hidden folders such as `.ssh` and"
                " the data folder are never read.",
                folders.describe(),
            )
        )
        with st.form(f"folder:{store}"):
            c1, c2 = st.columns([3, 1])
            folder = c1.text_input("Folder", value=tpl.ingest_folder or "", placeholder="/path/to/docs")
            glob = c2.text_input("Glob", value=tpl.ingest_glob or "**/*", help="`**/*.pdf` = every PDF, recursively")
            if st.form_submit_button("Ingest folder"):
                job = _current_job(store)
                if job is not None and not job.done:
                    st.warning("A batch is running; wait for it or stop it first.")
                else:
                    try:
                        job = wb.submit_folder(store, folder, glob, folders=folders)
                        st.session_state[f"job:{store}"] = job
                        if job.skipped:
                            st.session_state[f"skipped:{store}"] = (
                                f"{len(job.skipped)} file(s) left out: they lead outside the allowed folders"
                                f" ({', '.join(job.skipped[:3])}{', ...' if len(job.skipped) > 3 else ''})."
                            )
                        st.rerun()
                    except KnowledgeError as exc:
                        st.error(inert(exc))
    web_section(store)


def web_section(store: str) -> None:
    """ "Add a web page": the page at a URL (and, with a depth, the pages it links to on its site)
    fetched and ingested as a batch of this process (:class:`~knowledge.service.web.WebJob`)."""
    ingest = settings.ingest
    where = (
        "hosts on private and loopback addresses are allowed"
        if ingest.web_allow_private
        else "only public addresses: private and loopback ones are refused"
    )
    with st.expander("🌐 Add a web page"):
        st.caption(
            md(
                "Fetched now, when you add it (robots.txt honoured), and kept under its URL; adding it again"
                " replaces it when the page changed. Up to {} MB per page; {} (setting"
                " `ingest.web_allow_private`, or `KNOWLEDGE_INGEST__WEB_ALLOW_PRIVATE=true`).",
                f"{ingest.max_file_mb:g}",
                where,
            )
        )
        with st.form(f"web:{store}"):
            c1, c2, c3 = st.columns([4, 1, 1])
            url = c1.text_input("Web page URL", placeholder="https://example.org/docs/")
            depth = c2.number_input(
                "Depth",
                0,
                MAX_DEPTH,
                0,
                help="0 = the page only; 1 = also the pages it links"
                " to on the same site; 2 = and the pages those link to ...",
            )
            cap = ingest.web_max_pages
            pages = c3.number_input(
                "Max pages",
                1,
                cap,
                min(10, cap),
                help=f"At most this many pages with a depth (up to {cap}: setting `ingest.web_max_pages`).",
            )
            if st.form_submit_button("Add web page"):
                job = _current_job(store)
                if job is not None and not job.done:
                    st.warning("A batch is running; wait for it or stop it first.")
                else:
                    try:
                        st.session_state[f"job:{store}"] = wb.submit_web(
                            store, url, depth=int(depth), max_pages=int(pages) if depth else 1
                        )
                        st.rerun()
                    except KnowledgeError as exc:
                        st.error(inert(exc))


#: Rows a page of the store's file list shows; failed files a page of Needs attention shows.
PAGE_ROWS = 50
ATTENTION_ROWS = 10
#: The statuses the list's filter offers, in words, and the record statuses each stands for.
STATUS_CHOICES = {"indexed": (DONE,), "failed": (FAILED,), "waiting or interrupted": (PENDING, PROCESSING)}
#: What the bulk actions on the indexed files are called.
BULK_WORDS = {"delete": "🗑️ Delete", "move": "➡️ Move to another store", "readers": "🔒 Set who may read"}


def file_query(store: str) -> tuple[FileQuery, str]:
    """The filter bar over the store's files (name, status, type, updated from / before) and the
    :class:`FileQuery` it says, with its version (a new filter starts the lists at page 1)."""
    with st.container(border=True):
        c1, c2, c3 = st.columns([3, 2, 2])
        name = c1.text_input("Search by name", key=f"fq-name:{store}", placeholder="part of a file name")
        statuses = c2.multiselect("Status", list(STATUS_CHOICES), key=f"fq-status:{store}", placeholder="any")
        types = c3.multiselect("Type", FILE_TYPES, key=f"fq-type:{store}", placeholder="any")
        c4, c5 = st.columns(2)
        since = c4.date_input("Updated from (UTC)", value=None, key=f"fq-since:{store}")
        until = c5.date_input("Updated up to (UTC)", value=None, key=f"fq-until:{store}")
    query = FileQuery(
        name=name.strip(),
        statuses=tuple(s for choice in statuses for s in STATUS_CHOICES[choice]),
        types=tuple(types),
        since=datetime.combine(since, dtime(), UTC) if since else None,
        until=datetime.combine(until + timedelta(days=1), dtime(), UTC) if until else None,
    )
    return query, repr(query)


def _listed(query: FileQuery, wanted: tuple[str, ...]) -> FileQuery | None:
    """``query`` narrowed to the statuses a list shows (``wanted``); ``None`` when its status
    filter leaves none of them."""
    statuses = tuple(s for s in wanted if not query.statuses or s in query.statuses)
    return replace(query, statuses=statuses) if statuses else None


def _file_list(
    store: str,
    counts: FileCounts,
    *,
    running: bool,
    query: FileQuery | None = None,
    version: str = "",
    writable: bool = False,
) -> None:
    """The heading "Indexed files (n)" and one page of the store's indexed files (and, when no batch
    is ``running``, those an interrupted run left) that ``query`` matches, read by the database
    (:meth:`Workbench.file_page`: ``PAGE_ROWS`` records and a count, whatever the store's size); n
    is the counters' count. With ``writable`` (and no batch running) rows can be picked for the
    bulk actions under the table."""
    st.markdown(f"#### Indexed files ({counts.indexed:,})")
    if not running:
        flash(f"bulk:{store}")  # what a bulk action did (here: the files it acted on may have left the list)
    wanted = (DONE,) if running else (DONE, PROCESSING, PENDING)
    shown = _listed(query or FileQuery(), wanted)
    if shown is None:
        st.caption("The status filter leaves no indexed file.")
        return
    key = f"files-page:{store}"
    offset = page_offset(key, version, PAGE_ROWS)
    page = wb.file_page(store, shown, limit=PAGE_ROWS, offset=offset)
    if page.total and offset >= page.total:  # the list shrank under the page kept: its last page
        offset = (page.total - 1) // PAGE_ROWS * PAGE_ROWS
        page = wb.file_page(store, shown, limit=PAGE_ROWS, offset=offset)
    listed = page.records
    if not listed:
        if running:
            st.caption("No file is indexed yet: the list fills as the batch's files finish.")
        elif query is not None and (query.name or query.types or query.since or query.until or query.statuses):
            st.caption("No file matches the filter.")
        elif not counts.indexed and not counts.failed and not counts.busy:
            st.caption("No files yet: drop some above.")
        return
    if page.total != counts.indexed:
        st.caption(f"{page.total:,} file{'' if page.total == 1 else 's'} match{'es' if page.total == 1 else ''}.")
    restricted = any(f.readers is not None for f in listed)  # the column only where a file has readers of its own
    picking = writable and not running
    table = st.dataframe(
        [
            {
                "file": f.file_name,
                **({"readers": "" if f.readers is None else "🔒 " + describe_readers(f.readers)} if restricted else {}),
                "also named": list(f.aliases),
                "status": STATUS_LABEL[DONE] if f.status == DONE else "⚠️ interrupted",
                "chunks": f.chunks,
                "pages": str(f.pages) if f.pages else "–",
                "warnings": f.warnings,
                "size (MB)": megabytes(f.size),
                "seconds": round(f.total_seconds or 0, 2),
                "updated": f.updated,
            }
            for f in listed
        ],
        hide_index=True,
        width="stretch",
        # the rows listed are part of the key: after a move or a delete the ticks never fall on other files
        key=f"files:{store}:{version}:{page.offset}:{_digest(f.file_id for f in listed)}" if picking else f"files:{store}",
        column_config={
            # a file without pages (Markdown, Word, text) shows "–", not the table's grey "None"
            "pages": st.column_config.TextColumn(
                "pages", alignment="right", help="Pages of a PDF or a scanned image; – for a file without pages"
            ),
            "warnings": st.column_config.ListColumn("warnings", width="medium"),
            "readers": st.column_config.TextColumn(
                "🔒 readers",
                width="medium",
                help="Who may read the file, where not everyone who may read the store may (File details below)",
            ),
            "also named": st.column_config.ListColumn(
                "also named",
                help="The same bytes under other names: indexed once, searchable while any of its names is in the store",
            ),
            "updated": st.column_config.DatetimeColumn("updated", format="YYYY-MM-DD HH:mm"),
        },
        **({"on_select": "rerun", "selection_mode": "multi-row"} if picking else {}),
    )
    pager(key, version, page.total, PAGE_ROWS, page.offset)
    if picking:
        rows = table.selection.rows if table is not None else []
        picked = [listed[i] for i in rows if i < len(listed)]
        _bulk_bar(store, shown, page.total, picked)


def _bulk_bar(store: str, query: FileQuery, total: int, picked: list) -> None:
    """Act on the picked rows or on every file the filter matches (all pages): delete, move to
    another store, set who may read (:meth:`Workbench.bulk_files`, which checks and audits each)."""
    with st.expander(f"☑️ Act on {len(picked)} selected or all {total:,} matching"):
        choices = {"picked": f"the {len(picked)} selected", "all": f"all {total:,} matching the filter"}
        which = st.radio(
            "Files",
            list(choices),
            format_func=choices.get,
            # a new pick is a new choice: ticking rows chooses them, whatever was chosen before
            key=f"bulk-which:{store}:{_digest(f.file_id for f in picked)}",
            horizontal=True,
            index=0 if picked else 1,
        )
        actions = [a for a in BULK_WORDS if a != "readers" or wb.accounts.enabled()]  # readers: once accounts exist
        action = st.selectbox("Action", actions, format_func=BULK_WORDS.get, key=f"bulk-action:{store}")
        to = readers = None
        if action == "move":
            others = [n for n in wb.store_names() if n != store and wb.level(n) in ("write", "owner")]
            to = st.selectbox("To store", others, key=f"bulk-to:{store}") if others else None
            if not others:
                st.caption("You may write to no other store.")
        if action == "readers":
            readers = st.text_input(
                "Who may read them", key=f"bulk-readers:{store}", placeholder="group:hr, user:ana (empty: everyone)"
            )
        count = len(picked) if which == "picked" else total
        if (
            count
            and (action != "move" or to)
            and confirm(
                f"{BULK_WORDS[action]} ({count:,})",
                f"bulk:{store}",
                md("{} {} file(s) of {}?", BULK_WORDS[action], f"{count:,}", store) + (md(" To {}.", to) if to else ""),
                yes="Yes, do it",
            )
        ):
            _bulk(store, action, picked if which == "picked" else None, query, to=to, readers=readers or None)


def _digest(ids) -> str:
    """A short digest of file ids, for a widget key that changes with them."""
    return hashlib.sha1("\n".join(ids).encode()).hexdigest()[:8]


def _skipped_in_words(skipped: list[tuple[str, str]]) -> str:
    """The files a bulk action left out, grouped by why, every reason said, the names first:
    "a.pdf, b.doc and 10 more (would fail the same way); c.pdf (asks for a password: retry it on
    its own)"."""
    by: dict[str, list[str]] = {}
    for name, reason in skipped:
        by.setdefault(reason, []).append(name)
    parts = []
    for reason, names in sorted(by.items(), key=lambda kv: -len(kv[1])):
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
        parts.append(f"{shown} ({reason})")
    return "; ".join(parts)


def _bulk(store: str, action: str, picked: list | None, query: FileQuery, **kwargs) -> None:
    """Run a bulk action and say what it did, where it was taken (a flash), then draw the page again."""
    where = f"bulk:{store}" if action != "retry" else f"attention:{store}"
    try:
        with st.spinner("Working..."):
            result = wb.bulk_files(
                store, action, file_ids=[f.file_id for f in picked] if picked is not None else None, query=query, **kwargs
            )
        done = {
            "retry": "Queued {} for a retry",
            "delete": "Deleted {}",
            "move": "Moving {} to {}",
            "readers": "Set who may read {}",
        }
        words = done[action].format(f"{len(result.acted):,} file(s)", kwargs.get("to"))
        if result.skipped:
            words += f"; left out {len(result.skipped):,}: {_skipped_in_words(result.skipped)}"
        if action == "retry" and result.jobs:
            st.session_state[f"job:{store}"] = result.jobs[0]
        set_flash(where, None if result.warnings else bool(result.acted), " ".join([words + ".", *result.warnings]))
    except KnowledgeError as exc:
        set_flash(where, False, str(exc))
    st.rerun()


def files_section(store: str, writable: bool = True) -> None:
    """The store's files, a page at a time under a filter bar; deleting, the bulk actions and the
    retry/remove of failed files only with ``writable``."""
    counts = wb.file_counts(store)
    job = _current_job(store)
    running = job is not None and not job.done
    total = counts.indexed + counts.failed + counts.busy
    # while a batch runs the list is the status panel's (redrawn every half second, unfiltered): no filter bar
    query, version = file_query(store) if total and not running else (FileQuery(), "")
    if not running:  # while a batch runs, the status panel draws the list with its counters (one read)
        _file_list(store, counts, running=False, query=query, version=version, writable=writable)
    if not total:
        flash(f"files:{store}")
        flash(f"attention:{store}")
        return
    if counts.busy and not running:
        st.caption("⚠️ interrupted: the app stopped while ingesting these; drop them again.")
    flash(f"files:{store}")
    if counts.indexed and writable:
        _delete_one(store)
    attention(store, counts.failed, writable, query, version)


def _delete_one(store: str) -> None:
    """ "Delete a file from this store": find it by name (a page of names that hold what is typed)."""
    with st.popover("🗑️ Delete a file from this store"):
        typed = st.text_input("Name", key=f"del-find:{store}", placeholder="part of the file's name")
        found = wb.file_page(store, FileQuery(name=typed.strip(), statuses=(DONE,)), limit=50).records
        by_name = {f"{f.file_id}\n{n}": (f, n) for f in found for n in f.names}  # every name of a content
        version = hashlib.sha1("".join(by_name).encode()).hexdigest()[:8]  # a new list, a new widget
        key = st.selectbox(
            "File",
            sorted(by_name, key=lambda k: by_name[k][1].lower()),
            format_func=lambda k: by_name[k][1],
            key=f"del-pick:{store}:{version}",
        )
        st.caption(
            "Its chunks leave the store; its bytes leave the file store unless another store uses them."
            " A file whose bytes are also in the store under another name loses this name only."
        )
        if key:
            f, name = by_name[key]
            others = [n for n in f.names if n != name]
            what = (
                md("the name **{}** (its content stays, as {})", name, ", ".join(others))
                if others
                else md("**{}** and its {} chunks", name, f.chunks)
            )
            if confirm("Delete", f"del:{store}", f"Delete {what} from {inert(store)}?", type="primary"):
                _delete_file(store, f.file_id, name, f"files:{store}", by_name=bool(others))


def attention(
    store: str, failed_count: int, writable: bool = True, query: FileQuery | None = None, version: str = ""
) -> None:
    """The failed files that ``query`` matches, ``ATTENTION_ROWS`` a page, each with what is wrong in
    words; Retry only where a retry can succeed; and, for all that match, one bulk retry (queued as a
    batch) and one bulk remove."""
    if not failed_count and not has_flash(f"attention:{store}"):
        return
    shown = _listed(query or FileQuery(), (FAILED,))
    key = f"attention-page:{store}"
    offset = page_offset(key, version, ATTENTION_ROWS)
    page = wb.file_page(store, shown, limit=ATTENTION_ROWS, offset=offset) if shown is not None else None
    if page is not None and page.total and offset >= page.total:
        offset = (page.total - 1) // ATTENTION_ROWS * ATTENTION_ROWS
        page = wb.file_page(store, shown, limit=ATTENTION_ROWS, offset=offset)
    if failed_count:
        matching = "" if page is None or page.total == failed_count else f" · {page.total:,} match the filter"
        st.markdown(f"##### Needs attention ({failed_count:,}{matching})")
    flash(f"attention:{store}")
    if page is None or not page.records:
        return
    if writable and shown is not None and page.total > 1:  # one failed file has its own Retry and Remove
        c1, c2 = st.columns(2)
        retriable, _ = wb.retriable_count(store, shown)
        others = page.total - retriable
        if not retriable:
            c1.caption(
                "A retry cannot help any of these: they would fail the same way (fix the files and drop them"
                " again), or ask for a password (tried one at a time below)."
            )
        elif c1.button(
            f"🔁 Try all {page.total:,} matching again" if not others else f"🔁 Try the {retriable:,} a retry can help",
            key=f"retry-all:{store}",
            help="Queued as one batch"
            + (f"; the other {others:,} would fail the same way or ask for a password, and are left out" if others else ""),
        ):
            _bulk(store, "retry", None, shown)
        with c2:
            if confirm(
                f"🗑️ Remove all {page.total:,} matching",
                f"rm-all:{store}",
                md("Remove the {} failed file(s) matching the filter from {}?", f"{page.total:,}", store),
                yes="Yes, remove",
            ):
                _bulk(store, "delete", None, shown)
    retried = st.session_state.pop(f"retry-failed:{store}", None)  # (file_id, message) of a failed retry
    for f in page.records:
        with st.container(border=True):
            again = retried is not None and retried[0] == f.file_id  # this file was just tried again
            said = plain_reason(retried[1] if again else f.reason) or "failed"
            st.error(md("**{}** — {}{}", f.file_name, "tried again: " if again else "", said), icon="❌")
            if not writable:
                continue
            retry_ok = can_retry(f)
            limited = f.error == "ReaderLimitExceeded"  # the file is fine; a setting's limit stopped it
            c1, c2, c3 = st.columns([3, 1, 1], vertical_alignment="bottom")
            pw = c1.text_input("Password", type="password", key=f"pw:{store}:{f.file_id}") if needs_password(f) else None
            if limited:
                c1.caption("A reading limit stopped it (the setting is named above): raise it, then Retry.")
                retry_ok = True
            elif not retry_ok:
                c1.caption("Trying again would fail the same way: fix the file and drop it again, or remove it.")
            if retry_ok and c2.button("🔁 Retry", key=f"retry:{store}:{f.file_id}"):
                _retry(store, f, pw)
            with c3:
                if confirm(
                    "🗑️ Remove",
                    f"rm:{store}:{f.file_id}",
                    md("Remove **{}** from {}?", f.file_name, store),
                    yes="Yes, remove",
                ):
                    _delete_file(store, f.file_id, f.file_name, f"attention:{store}")
    pager(key, version, page.total, ATTENTION_ROWS, page.offset)


def _retry(store: str, f, pw: str | None) -> None:
    try:
        with st.spinner(md("Ingesting {}...", f.file_name)):
            r = wb.retry_file(store, f.file_id, password=pw or None)
        job = _current_job(store)  # this tab's batch, or the one shown from the job rows (an interrupted job)
        if job is not None:  # the upload's outcome above follows the retry
            job.replace_result(f.file_id, r)
        if r.ok:
            set_flash(f"attention:{store}", True, f"{f.file_name}: {_said(r)} Now searchable.")
        else:  # the failed retry's record replaced the old one (retry_file keeps one), under r.file_id
            st.session_state[f"retry-failed:{store}"] = (r.file_id or f.file_id, _said(r))
    except KnowledgeError as exc:
        st.session_state[f"retry-failed:{store}"] = (f.file_id, str(exc))
    st.rerun()


def _delete_file(store: str, file_id: str, name: str, where: str, by_name: bool = False) -> None:
    try:
        n = wb.delete_name(store, file_id, name) if by_name else wb.delete_file(store, file_id)
        set_flash(
            where,
            True,
            f"Deleted {name} from {store} ({n} chunks)."
            if n or not by_name
            else f"Deleted the name {name} from {store}; its content stays under its other name(s).",
        )
    except KnowledgeError as exc:
        set_flash(where, False, f"{name}: {exc}")
    st.rerun()


def manage_section(store: str, files: int, chunks: int) -> None:
    with st.expander("🗑️ Delete this store"):
        flash(f"manage:{store}")
        sure = st.checkbox(
            md("Yes, delete {} with its {} indexed file(s) and {} chunks", store, files, chunks), key=f"sure:{store}"
        )
        if st.button("🗑️ Delete store", key=f"drop:{store}", type="primary", disabled=not sure):
            try:
                wb.delete_store(store)
                st.session_state.pop("store_selected", None)
                st.session_state.pop(OPEN_STORE, None)
                set_flash("", True, f"Deleted the store {store}.")
            except KnowledgeError as exc:
                set_flash(f"manage:{store}", False, f"{store}: {exc}")
            st.rerun()


LEVEL_WORDS = {"read": "read-only", "write": "read and write"}


def chosen(username: str) -> str:
    """An account in a list to pick from: ``"Bo Berg (bo)"`` (two people may share a display name)."""
    user = wb.find_user(username)
    return f"{user.display_name} ({user.username})" if user is not None and user.display_name != username else username


def person(username: str | None) -> str:
    """A username as people read it: the account's display name, else the username; ``None``: the admins."""
    if username is None:
        return "the admins"
    user = wb.find_user(username)
    return user.display_name if user is not None and user.display_name else username


def grant_words(g) -> str:
    who = "everyone" if g.kind == "everyone" else (f"group {g.principal}" if g.kind == "group" else person(g.principal))
    return f"{who} ({LEVEL_WORDS[g.level]})"


def sharing_line(store: str, level: str) -> None:
    """Whose the store is and whom it is shared with (only once accounts exist)."""
    owner = wb.store_owner(store)
    if level != "owner":
        st.caption(md("🤝 shared with you by {} · {}", person(owner), LEVEL_WORDS.get(level, level)))
        return
    grants = wb.store_grants(store)
    whose = "yours" if owner == wb.actor.username else md("owned by {}", person(owner))
    shared = (
        ("shared with " + ", ".join(grant_words(g) for g in grants))
        if grants
        else "private: only you"
        if owner == wb.actor.username
        else "not shared"
    )
    st.caption(md("👤 {} · {}", whose, shared))


def share_section(store: str) -> None:
    """Share the store with a person, a group or everyone, to read or to read and write; take a grant
    back; give the store to someone else (its owner, or an admin)."""
    with st.expander("👥 Share"):
        flash(f"share:{store}")
        owner = wb.store_owner(store)
        kinds = {"a person": "user", "a group": "group", "everyone": "everyone"}
        c1, c2, c3 = st.columns([1, 2, 1], vertical_alignment="bottom")
        kind = kinds[c1.selectbox("Share with", list(kinds), key=f"share-kind:{store}")]
        principal = ""
        if kind == "user":
            people = [u.username for u in wb.directory() if u.username != owner]
            principal = (
                c2.selectbox(
                    "Person",
                    people,
                    key=f"share-user:{store}",
                    format_func=chosen,
                    index=None,
                    placeholder="Choose a person",
                )
                or ""
            )
        elif kind == "group":
            groups = wb.group_names()
            principal = (
                c2.selectbox(
                    "Group",
                    groups,
                    key=f"share-group:{store}",
                    index=None,
                    placeholder="Choose a group" if groups else "No groups yet",
                )
                or ""
            )
        level = {"read only": "read", "read and write": "write"}[
            c3.radio("Access", ["read only", "read and write"], key=f"share-level:{store}")
        ]
        if st.button("Share", key=f"share-go:{store}", type="primary", disabled=kind != "everyone" and not principal):
            try:
                g = wb.share_store(store, kind, principal, level)
                set_flash(f"share:{store}", True, f"Shared {store} with {grant_words(g)}.")
            except KnowledgeError as exc:
                set_flash(f"share:{store}", False, f"{store} was not shared: {exc}")
            st.rerun()
        grants = wb.store_grants(store)
        if grants:
            st.markdown("**Shared with**")
        for g in grants:
            c1, c2 = st.columns([4, 1], vertical_alignment="center")
            c1.markdown(md("{}", grant_words(g)))
            if c2.button("Take back", key=f"unshare:{store}:{g.kind}:{g.principal}"):
                try:
                    wb.unshare_store(store, g.kind, g.principal)
                    set_flash(f"share:{store}", True, f"{grant_words(g)} no longer has {store}.")
                except KnowledgeError as exc:
                    set_flash(f"share:{store}", False, f"{store}: {exc}")
                st.rerun()
        st.divider()
        others = [u.username for u in wb.directory() if u.username != owner]
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        heir = c1.selectbox(
            "Give this store to",
            others,
            key=f"give-to:{store}",
            format_func=chosen,
            index=None,
            placeholder="Choose a person",
            help="They become its owner; you keep no access unless they share it with you.",
        )
        if c2.button("Give", key=f"give-go:{store}", disabled=heir is None):
            try:
                wb.give_store(store, heir)
                set_flash("", True, f"{store} is now {person(heir)}'s.")
            except KnowledgeError as exc:
                set_flash(f"share:{store}", False, f"{store}: {exc}")
            st.rerun()


def backend_words(backend: str) -> str:
    """The backend in plain words, the technical name after it."""
    return {
        "memory": "stored on this computer",
        "pgvector": "stored in PostgreSQL (pgvector)",
        "qdrant": "stored in Qdrant",
    }.get(backend, f"stored by the {backend} plugin")


# ------------------------------------------------------------------------------------------------
def new_store_form(stores: list) -> None:
    with st.form("new-store", clear_on_submit=True):
        c1, c2 = st.columns(2)
        name = c1.text_input("Name", placeholder="Team notes")
        template = c2.selectbox("Template", wb.template_names())
        if st.form_submit_button("Create store", type="primary"):
            try:
                existed = name.strip() in wb.store_names(internal=True)
                with st.spinner("Creating (loads the embedding model the first time)..."):
                    wb.create_store(name.strip(), template)
                st.session_state["store_pending"] = name.strip()  # selected on the next run
                set_flash(
                    "",
                    True,
                    f"The store {name.strip()} already exists; here it is."
                    if existed
                    else f"Created the store {name.strip()}.",
                )
                st.rerun()
            except KnowledgeError as exc:
                st.error(inert(exc))


#: The store open on the Stores tab, kept apart from its selectbox's state (which Streamlit drops while
#: the Templates tab is open, and the Stores tab is not drawn).
OPEN_STORE = "open_store"


def stores_tab() -> None:
    if (problem := wb.shared_catalog_problem()) is not None:  # team mode on a per-machine default backend
        st.warning(inert(problem), icon="⚠️")
    try:
        stores = wb.list_stores()
    except KnowledgeError as exc:
        st.error(inert(exc))
        return
    if not stores:
        flash("")
        with st.expander("➕ New store", expanded=True):
            new_store_form(stores)
        st.info("No vector stores yet: create one above, then drop files on it.")
        with st.expander("📦 Import a store bundle (.kb)"):
            import_part(wb)
        return
    names = [s.record.name for s in stores]
    accounts = wb.accounts.enabled()
    if (pending := st.session_state.pop("store_pending", None)) in names:
        st.session_state["store_selected"] = pending
    if st.session_state.get("store_selected") not in names:
        # Streamlit drops a widget's state after a run that did not draw it (the Templates tab was open):
        # the store kept open comes back; else a running batch's store, else the first
        kept = st.session_state.get(OPEN_STORE)
        running = [n for n in names if wb.ingesting(n)]
        st.session_state["store_selected"] = kept if kept in names else (running or names)[0]
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    store = c1.selectbox("Open store", names, key="store_selected")
    st.session_state[OPEN_STORE] = store
    with c2.popover("➕ New store", width="stretch"):
        new_store_form(stores)
    flash("")
    summary = next(s for s in stores if s.record.name == store)
    r = summary.record
    with st.container(border=True):
        st.subheader(md("🗂️ {}", store))
        st.caption(
            md(
                "template **{}** · {} · model {} ({} dimensions, {})",
                r.template,
                backend_words(r.backend),
                r.embedding_model,
                r.dimension,
                r.distance,
            ),
            help=md("Backend: {}. Scores compare embeddings by {} distance.", r.backend, r.distance),
        )
        if summary.note is not None:  # a per-machine store in a shared catalog: listed, not used
            st.warning(inert(summary.note), icon="🖥️")
        try:
            # What the person may do here (issue 28): read-only shows no ingest or delete controls;
            # read and write hides only the owner's (delete, share, re-embed, move).
            level = wb.level(store) or "read"
            if accounts:
                sharing_line(store, level)
            if level == "read":
                status_panel(store, summary.disk_bytes)
            else:
                upload_section(store, summary.disk_bytes)
                sync_section(wb, store)
            files_section(store, writable=level != "read")
            details_section(wb, store, writable=level != "read")
            settings_section(wb, store, level)
            if level == "owner":
                manage_section(store, summary.files, summary.chunks)
                if accounts:
                    share_section(store)
            portable_section(wb, store, owner=level == "owner")
        except KnowledgeError as exc:
            st.error(inert(exc))
    st.markdown(f"#### All stores ({len(stores)})")
    levels = wb.levels(names) if accounts else {}
    owners = {n: wb.store_owner(n) for n in names} if accounts else {}
    whose = (
        {
            "owner": [person(owners[s.record.name]) for s in stores],
            "access": [
                {"owner": "owner"}.get(levels.get(s.record.name, ""), LEVEL_WORDS.get(levels.get(s.record.name, ""), ""))
                for s in stores
            ],
        }
        if accounts
        else {}
    )
    # The name and its counts come first, narrow, so they show without scrolling at 1280 px and
    # stay readable on a phone; where and how it is stored follow.
    st.dataframe(
        [
            {
                "store": s.record.name,
                "files": s.files,
                "chunks": s.chunks,
                "size (MB)": megabytes(s.disk_bytes if s.disk_bytes is not None or s.chunks else 0),
                **{k: v[i] for k, v in whose.items()},
                "template": s.record.template,
                "stored": backend_words(s.record.backend) + (" (one machine only: not shared)" if s.note else ""),
                "backend": s.record.backend,
                "model": s.record.embedding_model,
                "dimension": s.record.dimension,
            }
            for i, s in enumerate(stores)
        ],
        hide_index=True,
        width="stretch",
        key="stores-table",
        column_config={
            "store": st.column_config.TextColumn("store", width="medium", pinned=True),
            "size (MB)": st.column_config.NumberColumn("size (MB)", format="%.2f", width="small"),
            "files": st.column_config.NumberColumn("files", width="small", help="Indexed (searchable) files of the store"),
            "chunks": st.column_config.NumberColumn("chunks", width="small"),
        },
    )


# ------------------------------------------------------------------------------------------------
def _fitted(tpl) -> str:
    """What a template's chunk size becomes with its model (" Its chunks of 1000 tokens will be fitted
    to the 256-token window ...: 254 tokens, overlap 127."), or "" when it fits or the model cannot be
    loaded here (then ingestion says it)."""
    try:
        embedder = wb.embedder(tpl.embedding_model)
        plan = plan_chunking(embedder, tpl.max_chunk_size_tokens, tpl.chunk_overlap_tokens)
    except KnowledgeError:
        return ""
    if (plan.max_tokens, plan.overlap_tokens) == (tpl.max_chunk_size_tokens, tpl.chunk_overlap_tokens):
        return ""
    return (
        f" Its chunk size of {tpl.max_chunk_size_tokens} tokens is more than the {embedder.max_tokens}-token "
        f"window of {embedder.name}: chunks will be fitted to {plan.max_tokens} tokens with an overlap of "
        f"{plan.overlap_tokens}, so no text is cut off."
    )


def _rerank_text(t) -> str:
    on = t.rerank if t.rerank is not None else settings.search.rerank
    n = t.rerank_candidates or settings.search.rerank_candidates
    where = "" if t.rerank is not None else " (setting)"
    return f"best {n}{where}" if on else f"off{where}"


def templates_tab() -> None:
    templates = wb.list_templates()
    st.dataframe(
        [
            {
                "template": t.name + (" (built in)" if t.builtin else ""),
                "backend": t.backend,
                "model": t.embedding_model,
                "distance": t.distance,
                "chunk tokens": t.max_chunk_size_tokens,
                "overlap": t.chunk_overlap_tokens,
                "folder": t.ingest_folder or "",
                "glob": t.ingest_glob,
                "stores": wb.stores_using_template(t.name, internal=False),
                "description": t.description,
                "OCR": t.ocr or f"{settings.ingest.ocr} (setting)",
                "rerank": _rerank_text(t),
            }
            for t in templates
        ],
        hide_index=True,
        width="stretch",
        key="templates-table",
        column_config={"stores": st.column_config.ListColumn("stores")},
    )
    st.caption(
        f"The **{DEFAULT_TEMPLATE}** template is read-only: it is formed by the settings "
        "(`vector_store.*`, `embeddings.model`). Save a copy under another name to change it."
    )
    if not wb.actor.is_admin:  # signed in as a member: templates are the admins' to change
        st.info("Only an admin creates, changes or deletes templates.")
        return
    custom = [t.name for t in templates if not t.builtin]
    pick = st.selectbox("Create or edit", ["➕ New template", *custom], key="tpl-pick")
    base = wb.template(DEFAULT_TEMPLATE if pick not in custom else pick)
    editing = pick in custom
    with st.form("template-form"):
        c1, c2, c3 = st.columns(3)
        name = c1.text_input(
            "Name",
            value=base.name if editing else "",
            disabled=editing,
            help="Letters, digits, spaces and . - _ ( ); at most 64 characters.",
        )
        backend = c2.text_input(
            "Backend",
            value=base.backend,
            help=(
                f"Installed: {', '.join(backend_names()) or 'memory'} (or a plugin's name). pgvector without"
                " `vector_store.url` runs an embedded PostgreSQL server in the data folder."
            ),
        )
        distance = c3.selectbox("Distance", DISTANCES, index=DISTANCES.index(base.distance))
        model = st.text_input(
            "Embedding model",
            value=base.embedding_model,
            help="The bundled model works offline; any fastembed catalog name otherwise.",
        )
        c1, c2 = st.columns(2)
        size = c1.number_input("Max chunk size (tokens)", 1, 8192, base.max_chunk_size_tokens)
        overlap = c2.number_input("Chunk overlap (tokens)", 0, 8191, base.chunk_overlap_tokens)
        c1, c2 = st.columns([3, 1])
        folder = c1.text_input("Folder to ingest (optional)", value=base.ingest_folder or "")
        glob = c2.text_input("Glob", value=base.ingest_glob)
        desc = st.text_input("Description", value=base.description if editing else "")
        ocr_choices = {f"as the setting ingest.ocr ({settings.ingest.ocr})": None, "auto": "auto", "off": "off"}
        ocr = st.selectbox(
            "OCR for scans and images",
            list(ocr_choices),
            key="tpl-ocr",
            index=list(ocr_choices.values()).index(base.ocr if editing else None),
            help="auto: PDF pages without a text layer and image files are read by OCR"
            " (slow: seconds per page); off: they are reported as needing OCR.",
        )
        c1, c2 = st.columns([3, 1])
        rerank_choices = {
            f"as the setting search.rerank ({'on' if settings.search.rerank else 'off'})": None,
            "on": True,
            "off": False,
        }
        rerank = c1.selectbox(
            "Rerank the best passages",
            list(rerank_choices),
            key="tpl-rerank",
            index=list(rerank_choices.values()).index(base.rerank if editing else None),
            help="on: a search's best passages are ordered again by the sentence of each that"
            " best answers the query (the store's own model, offline; costs time per"
            " search: docs/search.md).",
        )
        n_rerank = c2.number_input(
            "Passages reranked",
            2,
            200,
            (base.rerank_candidates if editing else None) or settings.search.rerank_candidates,
            key="tpl-rerank-n",
        )
        if st.form_submit_button("Save template", type="primary"):
            try:
                tpl = make_template(
                    name=(base.name if editing else name).strip(),
                    backend=backend.strip(),
                    embedding_model=model.strip(),
                    distance=distance,
                    max_chunk_size_tokens=int(size),
                    chunk_overlap_tokens=int(overlap),
                    ingest_folder=folder.strip() or None,
                    ingest_glob=glob.strip() or "**/*",
                    description=desc.strip(),
                    ocr=ocr_choices[ocr],
                    rerank=rerank_choices[rerank],
                    rerank_candidates=(
                        None
                        if int(n_rerank) == settings.search.rerank_candidates and not (editing and base.rerank_candidates)
                        else int(n_rerank)
                    ),
                )
                wb.save_template(tpl)
                set_flash("templates", True, f"Saved the template {tpl.name}.{_fitted(tpl)}")
                st.rerun()
            except KnowledgeError as exc:
                st.error(inert(exc))
    flash("templates")
    if editing:
        users = wb.stores_using_template(pick)
        if users:
            st.caption(md("Used by {}: its backend, model and distance stay fixed.", ", ".join(users)))
        sure = st.checkbox(md("Yes, delete the template {}", pick), key="tpl-sure")
        if st.button("🗑️ Delete template", key="tpl-delete", disabled=not sure):
            try:
                wb.delete_template(pick)
                set_flash("templates", True, f"Deleted the template {pick}.")
                st.session_state.pop("tpl-pick", None)
                st.rerun()
            except KnowledgeError as exc:
                st.error(inert(exc))


# Keyed and tracked (Streamlit's st.tabs ``key`` + ``on_change``): only the open tab runs (``.open``), so
# the Stores tab's reruns -- each upload, each progress refresh -- do not build the Templates table,
# and the tab open stays open across the rerun an action ends with.
stores_tab_, templates_tab_ = st.tabs(["Stores", "Templates"], key="stores-tab", on_change="rerun")
if stores_tab_.open:
    with stores_tab_:
        stores_tab()
if templates_tab_.open:
    with templates_tab_:
        templates_tab()
