"""Home: what is here -- stores, files, chunks, the embedding model and whether it is loaded."""

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import app_workbench, megabytes

wb: Workbench = app_workbench()
settings = wb.settings
#: The server's folders (data folder, model cache) are the admins' to know: a member of a shared app
#: sees what is here, not where it lives on the server.
admin = wb.actor.local or wb.actor.is_admin

st.title("📚 knowledge")
st.caption("A local knowledge workbench: vector stores with semantic search, on your machine.")

WHERE = {"memory": "On this computer", "pgvector": "PostgreSQL", "qdrant": "Qdrant"}

try:
    wb.backend()  # the default template's backend: say now if it cannot be used
    stores = wb.list_stores()
    stored_files = len(wb.stored_files())
    failed = sum(wb.file_counts(s.record.name).failed for s in stores)
except KnowledgeError as exc:
    st.error(inert(exc))
    stores, stored_files, failed = [], 0, 0
if (problem := wb.shared_catalog_problem()) is not None:  # team mode on a per-machine default backend
    st.warning(inert(problem), icon="⚠️")

c1, c2, c3, c4, c5 = st.columns(5)
c1.metric("Stores", len(stores))
c2.metric("Stored files", stored_files, help="Files saved in the file store (each once, whatever uses it).")
c3.metric(
    "Indexed files",
    sum(s.files for s in stores),
    help="Searchable files, counted per store (a file in two stores counts twice).",
)
c4.metric("Failed files", failed, help="Files a store could not index; see each store's Needs attention.")
c5.metric("Chunks", sum(s.chunks for s in stores), help="Searchable pieces of text in all stores.")
backend = settings.vector_store.backend
st.caption(
    md("New stores keep their chunks: **{}**.", WHERE.get(backend, backend).lower()),
    help=md("Backend: {} (setting vector_store.backend).", settings.vector_store.backend),
)

st.subheader("Vector stores")
if stores:
    st.dataframe(
        [
            {
                "store": s.record.name,
                "template": s.record.template,
                "stored": WHERE.get(s.record.backend, s.record.backend),
                "model": s.record.embedding_model,
                "dimension": s.record.dimension,
                "indexed files": s.files,
                "chunks": s.chunks,
                # unknown (None) for a store whose size would tell of files one may not read, as on Vector stores
                "size (MB)": megabytes(s.disk_bytes if s.disk_bytes is not None or not s.chunks else None, 2),
            }
            for s in stores
        ],
        hide_index=True,
        width="stretch",
    )
else:
    st.info(
        "No vector stores yet: create one and drop files into it on the **Vector stores** page"
        " (or from a terminal: `python -m knowledge ingest STORE PATH...`)."
    )
    st.page_link("pages/stores.py", label="Open Vector stores", icon="🗂️")

st.subheader("Embedding model")
model = settings.embeddings.model
st.markdown(md("{} (cache: {})", model, settings.models_dir) if admin else md("{}", model))
try:
    embedder = wb.embedder()
    if not embedder.loaded and st.button("Load the embedding model"):
        with st.spinner("Loading the embedding model..."):
            embedder.load()
    if embedder.loaded:
        st.success(f"Loaded: {embedder.dimension} dimensions, {embedder.max_tokens}-token window.")
    else:
        st.caption("Not loaded yet: it loads on the first ingestion or search.")
except KnowledgeError as exc:
    st.error(inert(exc))

if admin:
    st.caption(md("Data folder: {}", settings.data_root))
