"""Home: what is here -- stores, chunks, the embedding model and whether it is loaded."""

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.services import Services

services: Services = st.session_state["services"]
settings = services.settings

st.title("📚 knowledge")
st.caption("A local knowledge workbench: vector stores with semantic search, on your machine.")

try:
    infos = services.store_infos()
except KnowledgeError as exc:
    st.error(f"The vector-store backend {settings.vector_store.backend!r} is unavailable: {exc}")
    infos = []

c1, c2, c3 = st.columns(3)
c1.metric("Stores", len(infos))
c2.metric("Chunks", sum(i.count for i in infos))
c3.metric("Backend", settings.vector_store.backend)

st.subheader("Vector stores")
if infos:
    st.dataframe(
        [{"store": i.name, "backend": i.backend, "dimension": i.size, "distance": i.distance,
          "chunks": i.count, "size (MB)": round((i.disk_bytes or 0) / 1e6, 2)} for i in infos],
        hide_index=True, use_container_width=True,
    )
else:
    st.info("No vector stores yet.")

st.subheader("Embedding model")
st.write(f"`{settings.embeddings.model}` (cache: `{settings.models_dir}`)")
if services.embedder_loaded:
    e = services.embedder
    st.success(f"Loaded: {e.dimension} dimensions, {e.max_tokens}-token window.")
elif st.button("Load the embedding model"):
    try:
        with st.spinner("Loading the embedding model..."):
            e = services.embedder
        st.success(f"Loaded: {e.dimension} dimensions, {e.max_tokens}-token window.")
    except KnowledgeError as exc:
        st.error(str(exc))

st.caption(f"Data folder: `{settings.data_root}`")
