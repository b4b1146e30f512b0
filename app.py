"""knowledge -- a local knowledge workbench. Run with ``streamlit run app.py``.

Who gets in (see :mod:`knowledge.access`, :mod:`knowledge.people` and the README's *Security*): the
project's ``.streamlit/config.toml`` serves loopback only. Once an account exists, everyone signs in
with their own (username and password, or an invitation link ``?invite=``); the session's token is
checked on every run, and the shared password no longer signs in. Before that, with a password set
(``KNOWLEDGE_APP_PASSWORD`` or ``app.password_hash``) every visitor signs in with it; an app reachable
from other hosts with neither offers only the first admin's set-up (with the token the server prints
to its log) or how to set a password, and serves no data. Uploads and Streamlit's own endpoints
follow the same gate (:mod:`pages._gate`): a session may upload only once it has been let in.

This file is read two ways. ``streamlit run app.py`` imports it as the module ``app`` and serves its
``app``: Streamlit's ``st.App`` with the HTTP gate in front of every request and the session-cookie
endpoints beside Streamlit's own (``pages/_gate.py``). Every page view then runs it as the script
``__main__``: the part under ``if __name__ == "__main__"`` at the end.
"""

import html
import logging
import secrets
import sys
import time
import urllib.parse
from collections.abc import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from knowledge.access import THROTTLE, Password, app_folders
from knowledge.catalog import CatalogLocked
from knowledge.chat import Chats
from knowledge.config import load_settings
from knowledge.errors import AuthenticationFailed, BackendUnavailable, KnowledgeError, set_log_place
from knowledge.forwarded import Peer, peer, trusted_networks
from knowledge.people import Actor
from knowledge.service.connections import check_connections, name_this_process
from knowledge.system import System
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages import _gate, _sso
from pages._ui import (
    SESSION_TOKEN,
    SIGN_IN_NOTICE,
    account_problem,
    begin_session,
    new_account_fields,
    serving_pages,
    set_up_first_admin,
    utc,
)

if __name__ != "__main__":  # imported by `streamlit run app.py`: the server, with the gate in front
    app = st.App(__file__, middleware=_gate.middleware(), routes=_gate.routes())


@st.cache_resource(show_spinner=False)
def get_workbench() -> tuple[Workbench, Chats]:
    """One workbench per server process, and the chat state every person shares over its system
    (:class:`~knowledge.chat.Chats`), shared by every browser session (both are thread-safe).

    Ingestion runs in a child process (``ingest.worker_process``,
    :meth:`knowledge.service.jobs.JobRegistry.use_worker_process`), so a search never waits behind an
    upload. At the start, the ingestion jobs a stopped or killed process left unfinished are resumed
    (:meth:`knowledge.service.jobs.JobRegistry.resume`); a catalog that cannot be read now only delays
    that to the next batch. The sources' scheduled runs are queued from here (:meth:`System.start_scheduler
    <knowledge.system.System.start_scheduler>`)."""
    set_log_place("the app's log (the terminal that runs it)")
    name_this_process("app")  # PostgreSQL sees its connections as "knowledge app <host>:<pid>"
    system = System(load_settings())  # the process's parts; pages hold a Workbench over them, never this
    check_connections(system.catalog, system.settings)  # a warning when PostgreSQL's max_connections is too small
    wb = Workbench(system)
    system.jobs.use_worker_process()
    try:
        system.jobs.resume()
    except KnowledgeError:
        logging.getLogger("knowledge.app").warning("could not look for unfinished ingestion jobs", exc_info=True)
    system.start_scheduler()  # the sources' runs as they fall due (knowledge/sources)
    return wb, Chats(system)


def set_a_password() -> None:
    """The only page of a shared app without a password."""
    st.title("📚 knowledge")
    st.error("This app is reachable from other computers, and no password is set, so it shows nothing.")
    st.markdown(
        "To share it, stop the app and start it again with a password:\n\n"
        "```bash\nKNOWLEDGE_APP_PASSWORD='choose-a-long-one' streamlit run app.py --server.address 0.0.0.0\n```\n\n"
        "or put a hash in the settings file (`python -m knowledge password` makes one):\n\n"
        '```toml\n[app]\npassword_hash = "scrypt$..."\n```\n\n'
        "To use it on this computer only, start it as usual: `streamlit run app.py` (it listens on"
        " 127.0.0.1)."
    )


#: The session key of a sign-in cookie found stale (expired, signed out): not tried again.
STALE_COOKIE = "stale_cookie"
#: The session key of the token last sent to the browser as its cookie.
COOKIE_SENT = "cookie_sent"


def behind_a_browser() -> bool:
    """Whether an HTTP request (a browser's websocket) is behind this run: something to set a cookie
    in. A script run without one (Streamlit's AppTest) keeps its sign-in in the session only."""
    try:
        return bool(st.context.headers)
    except Exception:
        return False


def cookie_token() -> str | None:
    """The app session token of this browser's sign-in cookie (:data:`pages._gate.SESSION_COOKIE`)."""
    try:
        value = st.context.cookies.get(_gate.SESSION_COOKIE)
    except Exception:
        return None
    return value if isinstance(value, str) and value else None


def here() -> str:
    """This page's path in the app with its query (``/view?store=docs&file=…``), where a redirect
    comes back to: a deep link opens after the sign-in as it was asked for."""
    try:
        path = urllib.parse.urlsplit(st.context.url or "").path or "/"
    except Exception:
        return "/"
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    path = path.removeprefix(f"/{base}") or "/" if base else path
    query = urllib.parse.urlencode(st.query_params.to_dict())
    return f"{path}?{query}" if query else path


def go_to(url: str) -> None:
    """Send the browser to ``url`` (one of the gate's own cookie endpoints) and end this run; without
    a browser behind the run (AppTest), run the app again instead."""
    if not behind_a_browser():
        st.rerun()
    st.markdown(f'<meta http-equiv="refresh" content="0; url={html.escape(url, quote=True)}">', unsafe_allow_html=True)
    st.stop()


def this_visitor(trusted: list[str]) -> Peer:
    """Who runs this page: the websocket's address and headers read through the ``trusted`` proxies
    (``server.trusted_proxies``, :mod:`knowledge.forwarded`); through any proxy, never local."""
    try:
        sent = st.context.headers  # each read of st.context.headers builds the mapping anew
        headers = {k.lower(): ", ".join(sent.get_all(k)) for k in sent}
        ip = st.context.ip_address
    except Exception:
        headers, ip = {}, None
    try:
        nets = trusted_networks(trusted)
    except ValueError:
        nets = ()
    return peer(ip if isinstance(ip, str) and ip else None, headers, "http", nets)


def client_id() -> str:
    """Who a throttle counts: the visitor's IP address (through the trusted proxies), else this
    browser session."""
    ip = this_visitor(wb.settings.server.trusted_proxies).address
    return ip if ip else get_script_run_ctx().session_id


def sign_in() -> None:
    """The shared password's sign-in form (no account exists): a growing delay after each wrong
    password, per visitor."""
    st.title("📚 knowledge")
    with st.form("sign-in"):
        typed = st.text_input("Password", type="password", autocomplete="current-password")
        if st.form_submit_button("Sign in", type="primary"):
            if THROTTLE.attempt(client_id(), password, typed):
                st.session_state["signed_in"] = True
                st.rerun()
            st.error("Wrong password.")


def password_way_in(wb: Workbench) -> None:
    """Username and password: :meth:`knowledge.people.People.sign_in` (a growing delay per account
    after wrong passwords, served before the check; the same words for an unknown name)."""
    with st.form("account-sign-in"):
        username = st.text_input("Username", key="sign-in-username")
        typed = st.text_input("Password", type="password", key="sign-in-password", autocomplete="current-password")
        if st.form_submit_button("Sign in", type="primary"):
            if not username.strip() or not typed:
                st.error("Type your username and your password.")
                return
            try:
                actor, token = wb.sign_in(username, typed)
            except AuthenticationFailed as exc:
                st.error(inert(exc))
                return
            begin_session(actor, token)


#: The ways into an app with accounts, drawn in this order on the sign-in page (a divider between),
#: each called as ``way(wb)``. Another way in (single sign-on) is one ``SIGN_IN_WAYS.append(way)``;
#: a way that has identified someone calls :func:`pages._ui.begin_session`.
SIGN_IN_WAYS: list[Callable[[Workbench], None]] = [password_way_in]


def account_sign_in() -> None:
    """The sign-in page once accounts exist."""
    st.title("📚 knowledge")
    notice = st.session_state.get(SIGN_IN_NOTICE)
    if notice:
        st.warning(inert(notice), icon="⏳")
    if password.is_set:
        st.info(
            "The shared password no longer signs in: accounts exist. Sign in with your account"
            " (an admin makes one for you or sends you an invitation link)."
        )
    for i, way in enumerate(SIGN_IN_WAYS):
        if i:
            st.divider()
        way(wb)


def accept_invitation() -> None:
    """``?invite=TOKEN``: the form that creates the account an invitation offers, then signs it in."""
    token = str(st.query_params.get("invite") or "")
    st.title("📚 knowledge")
    st.subheader("Create your account")
    try:
        invite = wb.accounts.invitation(token)
    except AuthenticationFailed as exc:
        st.error(inert(exc))
        if st.button("Go to sign-in", key="invite-sign-in"):
            st.query_params.pop("invite", None)
            st.rerun()
        return
    st.caption(md("An invitation for one {} account, valid until {}.", invite.role, utc(invite.expires)))
    with st.form("accept-invite"):
        username, display, first, again = new_account_fields(wb, "invite")
        if st.form_submit_button("Create my account", type="primary"):
            problem = account_problem(username, first, again)
            if problem:
                st.error(problem)
                return
            try:
                user = wb.accounts.accept_invitation(token, username, first, display_name=display or None)
            except KnowledgeError as exc:
                st.error(inert(exc))
                return
            actor, session = wb.sign_in(user.username, first)
            st.query_params.pop("invite", None)
            begin_session(actor, session)


@st.cache_resource(show_spinner=False)
def setup_token() -> str:
    """This process's first-run set-up token, printed to the server's log (its standard error) when
    it is made: whoever creates the first admin of a shared app must be able to read that log."""
    token = secrets.token_urlsafe(18)
    print(
        f"knowledge: first-run set-up token (type it on the app's set-up page to create the first admin account): {token}",
        file=sys.stderr,
        flush=True,
    )
    return token


def set_up() -> None:
    """The only page of a shared app without an account or a password: the first admin account
    (with the set-up token of the server's log; on a shared catalog, from the command line), or how to
    set one shared password."""
    st.title("📚 knowledge")
    st.error("This app is reachable from other computers, and has no account and no password yet, so it shows nothing.")
    st.subheader("Create the first admin account")
    if wb.settings.catalog.url is not None:
        # Team mode: several app processes behind a proxy, each would print its own token to its own
        # log; the first admin is made once, for every process, by the operator at a terminal.
        st.markdown(
            "This app runs on a shared catalog (team mode), so the first admin account is made at a"
            " terminal, on any machine with the team's settings:"
        )
        st.code("python -m knowledge users add NAME --role admin", language="bash", wrap_lines=True)
        st.markdown(
            "It asks for the password twice (or reads it from standard input with `--password-stdin`)."
            " Then every app process signs people in by account: reload this page and sign in. That"
            " admin adds the others (accounts or invitation links) on the People page."
        )
        if st.button("I have made it: sign in", type="primary"):
            st.rerun()
        return
    token = setup_token()
    st.markdown(
        "Type the **set-up token** the app printed to its server log (the terminal or service log of"
        " `streamlit run app.py`, a line starting `knowledge: first-run set-up token`): only someone who"
        " can read that log creates the first admin, not the first visitor. That admin then adds"
        " the others (accounts or invitation links) on the People page."
    )
    with st.form("first-admin"):
        typed = st.text_input("Set-up token", type="password", key="setup-token")
        username, display, first, again = new_account_fields(wb, "setup")
        if st.form_submit_button("Create the admin account", type="primary"):
            problem = (
                "Type the set-up token from the server log."
                if not typed.strip()
                else account_problem(username, first, again)
            )
            if problem:
                st.error(problem)
                return
            if not THROTTLE.attempt(client_id(), Password(plain=token), typed.strip()):
                st.error("Wrong set-up token: copy it from the server log.")
                return
            set_up_first_admin(wb, username, display, first)
    with st.expander("Or one shared password (one person, or a demo)"):
        set_a_password()


#: (file, title, icon, url path) of every page; the first is the default.
PAGES = [
    ("pages/home.py", "Home", "🏠", ""),
    ("pages/stores.py", "Vector stores", "🗂️", "stores"),
    ("pages/sources.py", "Sources", "🔌", "sources"),
    ("pages/search.py", "Search playground", "🔎", "search"),
    ("pages/evaluate.py", "Evaluate", "📏", "evaluate"),
    ("pages/files.py", "Files", "📄", "files"),
    ("pages/chat.py", "Chat", "💬", "chat"),
    ("pages/memory.py", "Agent memory", "🧠", "memory"),
    ("pages/settings.py", "Settings", "⚙️", "settings"),
]
PEOPLE = ("pages/people.py", "People", "👥", "people")
AUDIT = ("pages/audit.py", "Audit", "📜", "audit")
ACCOUNT = ("pages/account.py", "My account", "🙂", "account")
#: The document viewer: opened from links (citations, search hits, the Files page), not the menu.
VIEWER = ("pages/viewer.py", "Viewer", "🔍", "view")
#: Pages served but not listed in the menu.
HIDDEN = {VIEWER[0], "pages/admins_only.py"}
#: Every page URL (the gate answers each, so a deep link waits behind sign-in).
ALL_PAGES = [*PAGES, PEOPLE, AUDIT, ACCOUNT, VIEWER]
#: What a member may not open (not registered for them: their URLs show :data:`REFUSED` instead).
ADMIN_ONLY = {"pages/settings.py", PEOPLE[0]}
#: The page a member finds at an admin's page URL: "Settings are for admins", and the way home.
REFUSED = "pages/admins_only.py"


def pages_for(actor: Actor | None) -> list[tuple[str, str, str, str]]:
    """The pages of this visitor: without accounts every page as before, and People (to turn
    accounts on); an admin also People, Audit and My account; a member no Settings and no People
    (at their URLs, :data:`REFUSED`: they are for admins).
    Everyone has the viewer (hidden from the menu, :data:`HIDDEN`)."""
    if actor is None:
        return [*PAGES, PEOPLE, VIEWER]
    if actor.is_admin:
        return [*PAGES, PEOPLE, AUDIT, ACCOUNT, VIEWER]
    refused = [(REFUSED, title, icon, path) for file, title, icon, path in [*PAGES, PEOPLE] if file in ADMIN_ONLY]
    return [p for p in PAGES if p[0] not in ADMIN_ONLY] + [AUDIT, ACCOUNT, VIEWER] + refused


def gate(render, title: str) -> None:
    """Serve ``render`` on every page URL (so a deep link waits behind it and opens after sign-in),
    and nothing else."""
    pages = [st.Page(render, title=title, icon="🔒", default=True)]
    pages += [st.Page(render, title=title, icon="🔒", url_path=path) for _, _, _, path in ALL_PAGES if path]
    st.navigation(pages, position="hidden").run()
    st.stop()


def cannot_start(problem: str) -> None:
    """Every page URL says why the app cannot start; nothing else is served."""

    def render() -> None:
        st.title("📚 knowledge")
        st.error(inert(problem))

    gate(render, "Cannot start")


CATALOG_BUSY = (
    "The catalog is in use by another program on this computer (a command-line batch?)."
    " Wait for it to finish and reload this page."
)


def catalog_busy() -> None:
    """Every page URL says the catalog is busy (the gate cannot tell who may come in); nothing else."""

    def render() -> None:
        st.title("📚 knowledge")
        st.warning(CATALOG_BUSY, icon="⏳")

    gate(render, "Catalog in use")


#: Seconds between two tries of a page waiting for the database (``waiting_for_database``).
RETRY_SECONDS = 5
AWAY_SINCE, RETRY_ARMED = "database_away_since", "database_retry_armed"


@st.fragment(run_every=RETRY_SECONDS)
def _try_again_soon() -> None:
    """Runs with the page, then every :data:`RETRY_SECONDS`: from its second run on, the whole page
    runs again (the full run disarms it first, so that it waits again)."""
    if st.session_state.get(RETRY_ARMED):
        st.rerun()
    st.session_state[RETRY_ARMED] = True


def waiting_for_database(exc: KnowledgeError, limit: float) -> None:
    """Instead of a page (or the gate) that cannot reach the catalog, the file store or the vector
    backend: "Waiting for the database…" with the reason in words, trying again by itself every
    :data:`RETRY_SECONDS` for up to ``limit`` seconds (``catalog.outage_wait_seconds``) of this
    outage; past that, the reason as an error and a button to try again."""
    now = time.monotonic()
    since = st.session_state.setdefault(AWAY_SINCE, now)
    st.title("📚 knowledge")
    if now - since < limit:
        st.warning(
            md("**Waiting for the database…** {} This page tries again by itself every {} seconds.", exc, RETRY_SECONDS),
            icon="⏳",
        )
        st.session_state[RETRY_ARMED] = False
        _try_again_soon()
    else:
        st.error(md("**The database did not come back in {} seconds.** {}", round(now - since), exc))
        if st.button("Try again", icon="🔄", key="database-try-again"):
            st.session_state.pop(AWAY_SINCE, None)
            st.rerun()


def database_away(exc: KnowledgeError, limit: float) -> None:
    """Every page URL waits for the database (the gate cannot tell who may come in); nothing else."""
    gate(lambda: waiting_for_database(exc, limit), "Waiting for the database")


if __name__ == "__main__":  # a page view (see the module docstring)
    st.set_page_config(
        page_title="knowledge",
        page_icon="📚",
        layout="wide",
        menu_items={
            "About": "**knowledge**: a local knowledge workbench. The words it uses are defined in docs/glossary.md."
        },
    )

    try:
        wb, chats = get_workbench()
        password = Password.from_settings(wb.settings)
    except KnowledgeError as exc:  # bad settings: say so on every page URL, don't crash, show no page
        cannot_start(f"knowledge cannot start: {exc}")

    shared = _gate.shared_for(this_visitor(wb.settings.server.trusted_proxies))
    session_id = get_script_run_ctx().session_id
    try:
        accounts_on = wb.accounts.enabled()
    except CatalogLocked:  # who may come in is unknown for now: nothing is served but the reason
        catalog_busy()
    except BackendUnavailable as exc:  # the catalog's server is down or restarting
        database_away(exc, wb.settings.catalog.outage_wait_seconds)
    except KnowledgeError as exc:
        cannot_start(f"knowledge cannot read its accounts: {exc}")
    guarded = password.is_set or accounts_on  # a visitor signs in before anything is served
    _gate.set_guarded(guarded)  # the server's side: /_stcore endpoints refused while guarded

    # Who is asking. With accounts, the session's token is checked on every run (the role and groups
    # read now): an expired, ended or deleted session signs out, with the reason on the sign-in page.
    actor: Actor | None = None
    if accounts_on:
        if _sso.configured():  # back from the provider: st.user -> an app session (pages/_sso.py)
            SIGN_IN_WAYS.insert(0, lambda _wb: _sso.buttons())
            try:
                _sso.sign_in_from_provider(wb)
            except CatalogLocked:
                catalog_busy()
        token = st.session_state.get(SESSION_TOKEN)
        cookie = cookie_token()
        if not token and cookie and cookie != st.session_state.get(STALE_COOKIE):
            token = cookie  # a reload or a new tab: the sign-in of this browser (_gate.SESSION_COOKIE)
            st.session_state[SESSION_TOKEN] = token
        if token:
            try:
                actor = wb.session_actor(token)
            except AuthenticationFailed as exc:
                st.session_state.clear()
                st.session_state[SIGN_IN_NOTICE] = str(exc)
                st.session_state[STALE_COOKIE] = cookie  # not read again in this browser session
            except CatalogLocked:
                catalog_busy()
            except BackendUnavailable as exc:
                database_away(exc, wb.settings.catalog.outage_wait_seconds)
            except KnowledgeError as exc:
                cannot_start(f"knowledge cannot check your sign-in: {exc}")
        if actor is None:
            _gate.shut_out(session_id)  # not (or no longer) signed in: no uploads
            st.session_state.pop("actor", None)
            st.session_state.pop("workbench", None)
            if st.query_params.get("invite"):
                gate(accept_invitation, "Create your account")
            gate(account_sign_in, "Sign in")
        st.session_state["actor"] = actor
        signed = st.session_state.get(SESSION_TOKEN)
        by_provider = st.session_state.get(_sso.VIA) == "sso"  # Streamlit's own identity cookie keeps that one
        if signed != cookie and st.session_state.get(COOKIE_SENT) != signed and not by_provider and behind_a_browser():
            st.session_state[COOKIE_SENT] = signed  # once (a browser refusing cookies is not sent round again)
            go_to(
                _gate.cookie_url(
                    _gate.HANDOFFS.issue(st.session_state[SESSION_TOKEN], int(wb.settings.accounts.session_hours * 3600)),
                    here(),
                )
            )
    else:
        st.session_state.pop("actor", None)
        if shared and not password.is_set:
            _gate.shut_out(session_id)
            gate(set_up, "Set up")
        if password.is_set and not st.session_state.get("signed_in"):
            _gate.shut_out(session_id)
            gate(sign_in, "Sign in")
    _gate.let_in(session_id)  # past the gate: this session may upload

    # A signed-in account acts through a view of the workbench that checks every store it touches
    # (knowledge.workbench.Workbench.as_user); without accounts, the local admin (everything).
    st.session_state["workbench"] = wb.as_user(actor) if actor is not None else wb
    st.session_state["chats"] = chats  # pages build a person's chat service over it (pages._ui.app_chat_service)
    st.session_state["local_folders"] = app_folders(wb.settings, shared)
    page = st.navigation(
        [
            st.Page(file, title=title, icon=icon, default=not path)
            if not path
            else st.Page(file, title=title, icon=icon, url_path=path, visibility="hidden" if file in HIDDEN else "visible")
            for file, title, icon, path in pages_for(actor)
        ]
    )
    st.session_state["page_title"] = page.title  # pages/admins_only.py says which page it stands for
    # (after st.navigation: a widget drawn before it loses its click under AppTest)
    if actor is not None:
        st.sidebar.caption(md("Signed in as **{}** ({})", actor.label, actor.role))
        if st.sidebar.button("Sign out", icon="🔓", key="sign-out"):
            _gate.shut_out(session_id)
            if _sso.sign_out(wb):  # ends the app session; with a provider sign-in st.logout() reloads the app
                st.stop()
            st.session_state.clear()
            go_to(_gate.cookie_url(None))  # the browser forgets the sign-in cookie
    elif password.is_set and st.sidebar.button("Log out", icon="🔓", key="log-out"):
        _gate.shut_out(session_id)
        st.session_state.clear()
        st.rerun()

    with serving_pages():
        try:
            page.run()
        except CatalogLocked:  # a process without turns (an older version, a long hold) kept the file
            st.warning(CATALOG_BUSY, icon="⏳")
        except BackendUnavailable as exc:  # a server stopped or restarting: say so, try again by itself
            waiting_for_database(exc, wb.settings.catalog.outage_wait_seconds)
        else:
            st.session_state.pop(AWAY_SINCE, None)
