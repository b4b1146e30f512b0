"""knowledge -- a local knowledge workbench. Run with ``streamlit run app.py``.

Who gets in (see :mod:`knowledge.access` and the README's *Security*): the project's
``.streamlit/config.toml`` serves loopback only. With a password set (``KNOWLEDGE_APP_PASSWORD`` or
``app.password_hash``) every visitor signs in first. An app reachable from other hosts without a
password shows only how to set one, and serves no data: no page, store or file is registered.
Uploads and Streamlit's own endpoints follow the same gate (:mod:`knowledge.webgate`): a session may
upload only once it has been let in below.
"""

import logging

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from knowledge import webgate
from knowledge.access import THROTTLE, Password, app_folders, is_shared
from knowledge.catalog import CatalogLocked
from knowledge.config import load_settings
from knowledge.errors import KnowledgeError
from knowledge.text.render import inert
from knowledge.workbench import Workbench
from pages import _sso
from pages._ui import serving_pages

st.set_page_config(page_title="knowledge", page_icon="📚", layout="wide")


@st.cache_resource(show_spinner=False)
def get_workbench() -> Workbench:
    """One workbench per server process, shared by every browser session (it is thread-safe).

    At the start, the ingestion jobs a stopped or killed process left unfinished are resumed by this
    process's worker (:meth:`knowledge.service.jobs.JobRegistry.resume`); a catalog that cannot be
    read now only delays that to the next batch."""
    wb = Workbench(load_settings())
    try:
        wb.jobs.resume(wb)
    except KnowledgeError:
        logging.getLogger("knowledge.app").warning("could not look for unfinished ingestion jobs", exc_info=True)
    return wb


def set_a_password() -> None:
    """The only page of a shared app without a password."""
    st.title("📚 knowledge")
    st.error("This app is reachable from other computers, and no password is set, so it shows nothing.")
    st.markdown(
        "To share it, stop the app and start it again with a password:\n\n"
        "```bash\nKNOWLEDGE_APP_PASSWORD='choose-a-long-one' streamlit run app.py --server.address 0.0.0.0\n```\n\n"
        "or put a hash in the settings file (`python -m knowledge password` makes one):\n\n"
        "```toml\n[app]\npassword_hash = \"scrypt$...\"\n```\n\n"
        "To use it on this computer only, start it as usual: `streamlit run app.py` (it listens on"
        " 127.0.0.1).")


def sign_in() -> None:
    """The sign-in form: a growing delay after each wrong password, per visitor."""
    st.title("📚 knowledge")
    _sso.buttons()  # "Sign in with <provider>" when single sign-on is configured (pages/_sso.py)
    if not password.is_set:
        return
    with st.form("sign-in"):
        typed = st.text_input("Password", type="password")
        if st.form_submit_button("Sign in", type="primary"):
            ip = st.context.ip_address
            client = ip if isinstance(ip, str) and ip else get_script_run_ctx().session_id
            if THROTTLE.attempt(client, password, typed):
                st.session_state["signed_in"] = True
                st.rerun()
            st.error("Wrong password.")



#: (file, title, icon, url path) of every page; the first is the default.
PAGES = [
    ("pages/home.py", "Home", "🏠", ""),
    ("pages/stores.py", "Vector stores", "🗂️", "stores"),
    ("pages/search.py", "Search playground", "🔎", "search"),
    ("pages/evaluate.py", "Evaluate", "📏", "evaluate"),
    ("pages/files.py", "Files", "📄", "files"),
    ("pages/chat.py", "Chat", "💬", "chat"),
    ("pages/memory.py", "Agent memory", "🧠", "memory"),
    ("pages/settings.py", "Settings", "⚙️", "settings"),
]


def gate(render, title: str) -> None:
    """Serve ``render`` on every page URL (so a deep link waits behind it and opens after sign-in),
    and nothing else."""
    pages = [st.Page(render, title=title, icon="🔒", default=True)]
    pages += [st.Page(render, title=title, icon="🔒", url_path=path) for _, _, _, path in PAGES if path]
    st.navigation(pages, position="hidden").run()
    st.stop()


def cannot_start(problem: str) -> None:
    """Every page URL says why the app cannot start; nothing else is served."""
    def render() -> None:
        st.title("📚 knowledge")
        st.error(inert(problem))

    gate(render, "Cannot start")


try:
    wb = get_workbench()
    password = Password.from_settings(wb.settings)
except KnowledgeError as exc:  # bad settings: say so on every page URL, don't crash, show no page
    cannot_start(f"knowledge cannot start: {exc}")

sso = _sso.configured() and wb.people.enabled()  # single sign-on: accounts sign in through the provider
shared = is_shared(st.get_option("server.address"), st.context.ip_address)
session_id = get_script_run_ctx().session_id
try:  # the server's side of the gate: uploads and /_stcore endpoints (once per process; cheap after)
    if webgate.install(password_set=password.is_set or sso, upload_mb=webgate.upload_limit_mb(wb.settings)):
        # The first page of a fresh server was served before the gate, without its Content-Security-
        # Policy: load it again (a constant tag, no text of anyone's).
        st.markdown('<meta http-equiv="refresh" content="0">', unsafe_allow_html=True)
        st.stop()
except webgate.GateUnavailable as exc:
    if password.is_set or shared:  # fail closed: a gate that may leak is no gate
        cannot_start(f"knowledge cannot start: {exc}")
    # loopback without a password: nothing to guard, uploads as before (Streamlit's own handling)
    webgate.set_upload_limit(webgate.upload_limit_mb(wb.settings))
if sso:
    _sso.sign_in_from_provider(wb)  # back from the provider: st.user -> st.session_state["actor"]
let_in = st.session_state.get("signed_in") or st.session_state.get("actor") is not None
if (shared and not password.is_set and not sso) or ((password.is_set or sso) and not let_in):
    webgate.shut_out(session_id)  # not (or no longer) signed in: no uploads
    need = password.is_set or sso
    gate(sign_in if need else set_a_password, "Sign in" if need else "Set a password")
webgate.let_in(session_id)  # past the gate: this session may upload

# Who is asking: a signed-in account acts through a view of the workbench that checks every store
# it touches (knowledge.workbench.Workbench.as_user); without accounts, the local admin (everything).
actor = st.session_state.get("actor")
st.session_state["workbench"] = wb.as_user(actor) if actor is not None else wb
st.session_state["local_folders"] = app_folders(wb.settings, shared)
if (password.is_set or sso) and st.sidebar.button("Log out", icon="🔓", key="log-out"):
    webgate.shut_out(session_id)
    if _sso.sign_out(wb):  # st.logout() reloads the app
        st.stop()
    st.session_state.clear()
    st.rerun()

page = st.navigation([st.Page(file, title=title, icon=icon, default=not path) if not path
                      else st.Page(file, title=title, icon=icon, url_path=path)
                      for file, title, icon, path in PAGES])
with serving_pages():
    try:
        page.run()
    except CatalogLocked:  # a process without turns (an older version, a long hold) kept the file
        st.warning("The catalog is in use by another program on this computer (a command-line batch?)."
                   " Wait for it to finish and reload this page.", icon="⏳")
