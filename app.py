"""knowledge -- a local knowledge workbench. Run with ``streamlit run app.py``."""

import streamlit as st

from knowledge.config import load_settings
from knowledge.errors import KnowledgeError
from knowledge.workbench import Workbench

st.set_page_config(page_title="knowledge", page_icon="📚", layout="wide")


@st.cache_resource(show_spinner=False)
def get_workbench() -> Workbench:
    """One workbench per server process, shared by every browser session (it is thread-safe)."""
    return Workbench(load_settings())


try:
    st.session_state["workbench"] = get_workbench()
except KnowledgeError as exc:  # bad settings: say so, don't crash
    st.error(f"knowledge cannot start: {exc}")
    st.stop()

page = st.navigation([
    st.Page("views/home.py", title="Home", icon="🏠", default=True),
    st.Page("views/stores.py", title="Vector stores", icon="🗂️", url_path="stores"),
    st.Page("views/search.py", title="Search playground", icon="🔎", url_path="search"),
    st.Page("views/files.py", title="Files", icon="📄", url_path="files"),
    st.Page("views/chat.py", title="Chat", icon="💬", url_path="chat"),
    st.Page("views/memory.py", title="Agent memory", icon="🧠", url_path="memory"),
    st.Page("views/settings.py", title="Settings", icon="⚙️", url_path="settings"),
])
page.run()
