"""The Vector stores page's "Export, import or move" section (not a page: app.py's navigation does
not list it). The work is :mod:`knowledge.portable`'s; this draws the widgets and says what happened."""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import streamlit as st

from knowledge import portable
from knowledge.errors import KnowledgeError
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import flash, human_size, set_flash

_OWN = "(the bundle's own)"


def _exports_dir(wb: Workbench) -> Path:
    """Where prepared bundles wait for their download (one per store, replaced by the next)."""
    path = Path(wb.settings.data_root) / "exports"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _bundle_name(store: str) -> str:
    return (re.sub(r"[^\w.-]+", "-", store).strip("-") or "store") + ".kb"


def portable_section(wb: Workbench, store: str, *, owner: bool = True) -> None:
    """Export the store ``store`` (a download), import a bundle as a new store (the person's own),
    move ``store`` to another template's backend (only its ``owner``: the owner or an admin)."""
    with st.expander("📦 Export, import or move" if owner else "📦 Export or import"):
        flash(f"portable:{store}")
        export_part(wb, store)
        st.divider()
        if owner:
            move_part(wb, store)
            st.divider()
        import_part(wb, key=store)


def export_part(wb: Workbench, store: str) -> None:
    st.markdown("**Export** — one `.kb` file with the files, chunks and vectors; import it on any backend or machine.")
    target = _exports_dir(wb) / _bundle_name(store)
    prepared = st.session_state.get(f"export:{store}")
    if st.button("Prepare export", key=f"export-go:{store}"):
        bar = st.progress(0.0, text="Exporting...")
        try:
            r = wb.portable.export_store(
                store, target, progress=lambda stage, f: bar.progress(f, text=f"Exporting {stage}: {f:.0%}")
            )
            prepared = st.session_state[f"export:{store}"] = (str(r.path), r.files, r.chunks, r.bytes)
            bar.empty()
        except KnowledgeError as exc:
            bar.empty()
            st.error(inert(f"{store} could not be exported: {exc}"))
            prepared = None
    if prepared and Path(prepared[0]).is_file():
        path, files, chunks, size = prepared
        st.caption(f"{files} files, {chunks} chunks, {human_size(size)}.")
        with open(path, "rb") as fh:
            st.download_button(
                md("⬇️ Download {}", Path(path).name),
                fh.read(),
                file_name=Path(path).name,
                mime="application/zip",
                key=f"export-dl:{store}",
                type="primary",
            )


def move_part(wb: Workbench, store: str) -> None:
    record = wb.get_store(store)
    st.markdown(
        md(
            "**Move** — to another template's backend (now: {}). Same name, files and chunks; the vectors"
            " are copied when the template's model is the store's, re-embedded otherwise.",
            record.backend,
        )
    )
    others = [t for t in wb.list_templates() if t.name != record.template]
    if not others:
        st.caption(
            "No other template yet: make one on another backend in the Templates tab, then move the store to it here."
        )
        return
    labels = {f"{t.name} · {t.backend} · {t.embedding_model}": t.name for t in others}
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    choice = c1.selectbox("Move to template", list(labels), key=f"move-to:{store}")
    if c2.button("Move", key=f"move-go:{store}"):
        target = wb.template(labels[choice])
        bar = st.progress(0.0, text="Moving...")
        try:
            rec = wb.portable.move_store(
                store, target.name, progress=lambda stage, f: bar.progress(f, text=f"Moving: {stage}, {f:.0%}")
            )
            how = (
                "vectors copied"
                if rec.embedding_model == record.embedding_model
                else f"re-embedded with {rec.embedding_model}"
            )
            set_flash(
                f"portable:{store}",
                True,
                f"Moved {store} from {record.backend} to {rec.backend} (template {rec.template}; {how}).",
            )
        except KnowledgeError as exc:
            set_flash(f"portable:{store}", False, f"{store} was not moved: {exc}")
        st.rerun()


def import_part(wb: Workbench, key: str = "") -> None:
    """Drop a ``.kb`` bundle, optionally with a new name and template; the new store is selected."""
    st.markdown("**Import** — a `.kb` bundle as a new store.")
    bundle_mb = wb.settings.app.max_bundle_mb
    up = st.file_uploader(
        "Bundle",
        type=["kb"],
        key=f"import-file:{key}",
        label_visibility="collapsed",
        max_upload_size=max(1, math.ceil(bundle_mb)),  # the box says the setting's limit, which the app enforces
        help=f"Up to {bundle_mb:g} MB per bundle (setting app.max_bundle_mb); each file in it up to"
        f" {wb.settings.ingest.max_file_mb:g} MB (setting ingest.max_file_mb).",
    )
    readable = _preview(up) if up is not None else False
    c1, c2 = st.columns(2)
    name = c1.text_input(
        "Name of the new store",
        key=f"import-as:{key}",
        placeholder="the bundle's",
        help="Leave empty to keep the store's name from the bundle.",
    )
    template = c2.selectbox(
        "Template",
        [_OWN, *wb.template_names()],
        key=f"import-tpl:{key}",
        help="The backend and model of the new store. Its vectors are reused when the"
        " model is the bundle's; otherwise the chunks are embedded again.",
    )
    if st.button("Import", key=f"import-go:{key}", disabled=not readable, type="primary"):
        bar = st.progress(0.0, text="Importing...")
        with tempfile.TemporaryDirectory(prefix="knowledge-import-") as tmp:
            path = Path(tmp) / _local_name(up.name)
            path.write_bytes(up.getvalue())
            try:
                r = wb.portable.import_bundle(
                    path,
                    as_name=name.strip() or None,
                    template=None if template == _OWN else template,
                    progress=lambda stage, f: bar.progress(f, text=f"Importing: {stage}, {f:.0%}"),
                )
            except KnowledgeError as exc:
                bar.empty()
                st.error(inert(f"{up.name} was not imported: {exc}"))
                return
        st.session_state["store_pending"] = r.store  # selected on the next run
        set_flash("", True, r.message)
        st.rerun()


def _local_name(name: str) -> str:
    """The uploaded file's own name for its temporary copy (so messages name it), without folders."""
    return Path(name).name or "bundle.kb"


def _preview(up) -> bool:
    """What the dropped bundle holds (read once per upload), or why it cannot be imported; whether it
    can be."""
    key = f"bundle-info:{up.file_id}"
    if key not in st.session_state:
        with tempfile.TemporaryDirectory(prefix="knowledge-import-") as tmp:
            path = Path(tmp) / _local_name(up.name)
            path.write_bytes(up.getvalue())
            try:
                st.session_state[key] = (True, portable.bundle_info(path))
            except KnowledgeError as exc:
                st.session_state[key] = (False, str(exc))
    ok, info = st.session_state[key]
    if not ok:
        st.error(inert(f"{up.name} cannot be imported: {info}"))
        return False
    st.caption(
        md(
            "{}: store **{}** · {} files · {} chunks · model {} ({} dimensions) · from {}",
            up.name,
            info["name"],
            info["files"],
            info["chunks"],
            info["embedding_model"],
            info["dimension"],
            info.get("source_backend", "?"),
        )
    )
    return True
