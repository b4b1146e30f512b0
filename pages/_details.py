"""The Stores page's per-store "File details" editor and "Store settings" section (not a page).

File details: pick an indexed file, edit its title and its typed attribute rows (add, edit, delete)
and, once accounts exist, who may read it (everyone who may read the store, or only the people and
groups picked), Save -- through :meth:`Workbench.set_file_attributes`, the REST API's edit, so
filters see the new values at once, and :meth:`Workbench.set_file_readers`. Store settings: the
description the chat model is shown, the default score threshold, the template the store was made
from and Re-embed. Logic: :mod:`knowledge.pagemodels.details`
and the workbench view (write access is checked there; read-only sharers see no Save).
"""

from __future__ import annotations

import itertools

import streamlit as st

from knowledge.catalog import DONE, FileQuery
from knowledge.errors import KnowledgeError
from knowledge.pagemodels.details import (
    ONLY_CHOICE,
    READER_CHOICES,
    TYPES,
    attributes_of,
    choice_of,
    reader_label,
    reader_options,
    readers_of,
    rows_of,
)
from knowledge.people.policy import describe_readers, principals
from knowledge.service.stores import MAX_DESCRIPTION_CHARS
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import flash, set_flash

_ids = itertools.count(1)
#: The most files the File details picker offers at once (found by name beyond that).
PICK_ROWS = 50


def _load(wb: Workbench, store: str, file_id: str, base: str) -> None:
    """Put the saved details of the file into the editor's state (once per file, and after a save)."""
    title, rows = rows_of(wb.file_attributes(store, file_id))
    readers = wb.file_readers(store, file_id)
    st.session_state[f"{base}:title"] = title
    st.session_state[f"{base}:saved-readers"] = readers
    st.session_state[f"{base}:who"] = choice_of(readers)
    st.session_state[f"{base}:readers"] = list(readers or ())
    ids = []
    for row in rows:
        ids.append(rid := next(_ids))
        st.session_state[f"{base}:k:{rid}"] = row["key"]
        st.session_state[f"{base}:t:{rid}"] = row["type"]
        st.session_state[f"{base}:v:{rid}"] = row["value"]
    st.session_state[f"{base}:rows"] = ids


def _forget(base: str) -> None:
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith(base + ":")]:
        del st.session_state[key]


def readers_words(readers: tuple[str, ...] | None) -> str:
    """Who may read a file, in words: "everyone who may read the store" or "only group hr, user ana"."""
    return describe_readers(readers) if readers is None else "only " + describe_readers(readers)


def _readers_part(wb: Workbench, store: str, base: str, writable: bool) -> None:
    """Who may read the file: as words (read-only), else the choice and, for "only these", the pick
    list of groups and people (``{base}:who`` and ``{base}:readers``), saved with the details."""
    saved = st.session_state.get(f"{base}:saved-readers")
    if not writable:
        st.markdown(md("**Who may read this file:** {}.", readers_words(saved)))
        return
    choice = st.radio("Who may read this file", READER_CHOICES, key=f"{base}:who", horizontal=True)
    if choice != ONLY_CHOICE:
        st.caption("The file is shared as the store is: whoever may read the store may read it.")
        return
    owner = wb.store_owner(store)  # reads every file anyway: not offered
    names = {u.username: u.display_name for u in wb.directory() if u.username != owner}
    picked: list[str] = st.session_state.get(f"{base}:readers") or []
    st.multiselect(
        "People and groups",
        reader_options(names, wb.group_names(), [*(saved or ()), *picked]),
        key=f"{base}:readers",
        format_func=lambda p: reader_label(p, names),
        placeholder="Choose people or groups",
    )
    st.caption(
        "Nobody else sees the file: not in file lists, counts, searches, chat or the viewer. The store's owner"
        " (and the admins, where they see every store) always may."
    )
    if wb.level(store) != "owner" and set(principals(wb.actor)).isdisjoint(st.session_state.get(f"{base}:readers") or []):
        st.warning("You are not among them: once saved, the file leaves your lists too.", icon="🔒")


def details_section(wb: Workbench, store: str, writable: bool) -> None:
    """The "File details" editor of ``store``'s indexed files (with who may read each, once accounts
    exist); Save only with ``writable``."""
    if not wb.file_counts(store).indexed:
        return
    accounts = wb.accounts.enabled()
    title = "📝 File details: title, attributes and readers" if accounts else "📝 File details: title and attributes"
    with st.expander(title):
        flash(f"details:{store}")
        st.caption(
            "Attributes are key/value details of a file that filters use: in the playground as "
            "`attr_<key> = value`, in chat's sidebar filter, and in the API's `attributes`."
        )
        # a store of 10,000 files offers the first PICK_ROWS names that hold what is typed, not all
        typed = st.text_input("Find a file by name", key=f"details-find:{store}", placeholder="part of its name")
        page = wb.file_page(store, FileQuery(name=typed.strip(), statuses=(DONE,)), limit=PICK_ROWS)
        names = {f.file_id: f.file_name for f in page.records}
        if page.total > len(names):
            st.caption(f"The first {len(names)} of {page.total:,} files: type more of a name to find another.")
        fid = st.selectbox(
            "File",
            sorted(names, key=lambda i: names[i].lower()),
            format_func=lambda i: names[i],
            key=f"details-pick:{store}",
        )
        if fid is None:
            return
        base = f"details:{store}:{fid}"
        if f"{base}:rows" not in st.session_state:
            try:
                _load(wb, store, fid, base)
            except KnowledgeError as exc:
                st.error(inert(exc))
                return
        st.text_input(
            "Title", key=f"{base}:title", disabled=not writable, max_chars=512, placeholder="none (the file name is shown)"
        )
        ids: list[int] = st.session_state[f"{base}:rows"]
        if ids:
            st.markdown("**Attributes**")
        elif not writable:
            st.caption("No attributes.")
        for rid in list(ids):
            c1, c2, c3, c4 = st.columns([3, 2, 4, 1], vertical_alignment="bottom")
            c1.text_input("Key", key=f"{base}:k:{rid}", disabled=not writable, placeholder="key, e.g. team")
            c2.selectbox("Type", TYPES, key=f"{base}:t:{rid}", disabled=not writable)
            c3.text_input("Value", key=f"{base}:v:{rid}", disabled=not writable, placeholder="value")
            if writable and c4.button("", icon=":material/delete:", key=f"{base}:del:{rid}", help="Delete this row"):
                ids.remove(rid)
                for part in ("k", "t", "v"):
                    st.session_state.pop(f"{base}:{part}:{rid}", None)
                st.rerun()
        if accounts:
            _readers_part(wb, store, base, writable)
        if not writable:
            st.caption("Shared with you read-only: the details cannot be changed here.")
            return
        c1, c2 = st.columns(2)
        if c1.button("➕ Add an attribute", key=f"{base}:add", width="stretch"):
            ids.append(rid := next(_ids))
            st.session_state[f"{base}:t:{rid}"] = TYPES[0]
            st.rerun()
        if c2.button("💾 Save details", key=f"{base}:save", type="primary", width="stretch"):
            rows = [
                {
                    "key": st.session_state.get(f"{base}:k:{r}"),
                    "type": st.session_state.get(f"{base}:t:{r}"),
                    "value": st.session_state.get(f"{base}:v:{r}"),
                }
                for r in ids
            ]
            try:
                attributes = attributes_of(st.session_state.get(f"{base}:title"), rows)
                readers = readers_of(st.session_state.get(f"{base}:who"), st.session_state.get(f"{base}:readers"))
                # the attributes first: a writer who saves readers that leave them out no longer reads the file
                n = wb.set_file_attributes(store, fid, attributes)
            except KnowledgeError as exc:
                st.error(md("Not saved: {}", str(exc)), icon="❌")
                return
            said = (
                f"Saved the details of {names[fid]} ({len(attributes)} attribute(s),"
                f" {n} chunks updated): filters see them now."
            )
            ok = True
            if accounts:
                try:
                    readers = wb.set_file_readers(store, fid, readers)
                    said += f" Who may read it: {readers_words(readers)}."
                    if wb.file_record(store, fid) is None:
                        said += " You are not among its readers: it has left your lists."
                except KnowledgeError as exc:
                    ok, said = False, f"Saved the details of {names[fid]}, but not who may read it: {exc}"
            _forget(base)  # read back what was saved
            set_flash(f"details:{store}", ok, said)
            st.rerun()


def settings_section(wb: Workbench, store: str, level: str) -> None:
    """The "Store settings" of ``store``: its description and default score threshold (changed by
    its owner or a writer), the template it was made from and Re-embed (its owner)."""
    record = wb.get_store(store)
    with st.expander("⚙️ Store settings: description, score threshold, template"):
        flash(f"settings:{store}")
        own = wb.store_settings(store)
        writable = level in ("owner", "write")
        fallback = wb.default_threshold(store) if own.score_threshold is None else None
        with st.form(f"store-settings:{store}", border=False):
            description = st.text_area(
                "Description",
                value=own.description,
                max_chars=MAX_DESCRIPTION_CHARS,
                disabled=not writable,
                placeholder="What this store holds, e.g. 'The Rust book and our style guide'",
                help="Shown to the chat model beside the store's name, so it knows when to search it.",
            )
            threshold = st.number_input(
                "Default score threshold",
                value=own.score_threshold,
                step=0.05,
                format="%.2f",
                disabled=not writable,
                placeholder=("none" if fallback is None else f"default {fallback:.2f}"),
                help="The playground starts with it and chat's searches of this store use it, when no"
                " threshold is set by hand. Empty: the setting search.score_threshold (for cosine and"
                " dot; none for distances).",
            )
            if st.form_submit_button("💾 Save settings", disabled=not writable):
                try:
                    wb.set_store_settings(store, description=description, score_threshold=threshold)
                    set_flash(f"settings:{store}", True, f"Saved the settings of {store}.")
                except KnowledgeError as exc:
                    set_flash(f"settings:{store}", False, f"Not saved: {exc}")
                st.rerun()
        if not writable:
            st.caption("Shared with you read-only: the settings cannot be changed here.")
        st.markdown(
            md(
                "Made from template **{}** (model {}, {} distance).",
                record.template,
                record.embedding_model,
                record.distance,
            )
        )
        if level != "owner":
            return
        names = wb.template_names()
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        target = c1.selectbox(
            "Re-embed with template",
            names,
            index=names.index(record.template) if record.template in names else 0,
            key=f"reembed-to:{store}",
            help="Indexes every file again from its stored chunk text with the template's model, backend and"
            " distance (the same model: the vectors are copied); the store switches only when it is complete.",
        )
        if c2.button("Re-embed", key=f"reembed:{store}", disabled=not names):
            bar = st.progress(0.0, text="Re-embedding...")
            try:
                wb.reembed(store, target, progress=lambda stage, f: bar.progress(f, text=f"Re-embedding: {f:.0%}"))
                set_flash(f"settings:{store}", True, f"{store} now uses template {target}.")
            except KnowledgeError as exc:
                set_flash(f"settings:{store}", False, f"{store}: {exc}")
            st.rerun()


__all__ = ["details_section", "settings_section"]
