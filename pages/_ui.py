"""What the pages share: one-time messages that survive a rerun (flash), sizes and durations in
words, the distances a template may use.

A flash message is set before ``st.rerun()`` and shown once, where the page calls :func:`flash` with
the same key, on the next run::

    set_flash(f"files:{store}", True, f"Deleted {name}.")
    st.rerun()
    ...
    flash(f"files:{store}")   # st.success("Deleted ...") once, then gone
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from types import CodeType

import streamlit as st

from knowledge.chat import Chats, ChatService
from knowledge.errors import KnowledgeError
from knowledge.people import Actor, ApiKey
from knowledge.text.render import inert
from knowledge.vectorstore.scoring import DISTANCES as _DISTANCES
from knowledge.workbench import Workbench

#: The app's entry script, which signs visitors in and registers the pages.
APP = Path(__file__).resolve().parent.parent / "app.py"

#: True while app.py runs the page a visitor asked for (see :func:`serving_pages`).
_INSIDE_APP: ContextVar[bool] = ContextVar("knowledge_inside_app", default=False)


@contextmanager
def serving_pages() -> Iterator[None]:
    """app.py runs the chosen page inside this, after the sign-in gate."""
    token = _INSIDE_APP.set(True)
    try:
        yield
    finally:
        _INSIDE_APP.reset(token)


@functools.lru_cache(maxsize=1)
def _app_code(mtime_ns: int, size: int) -> CodeType:
    """app.py compiled, once per version of the file (its modification time and size are the key: an
    edit while the server runs is compiled anew)."""
    return compile(APP.read_bytes(), str(APP), "exec")


def app_workbench() -> Workbench:
    """The process's workbench, for a page that app.py runs; every page starts with this.

    A page run any other way -- Streamlit runs ``pages/*.py`` by itself on the first visit to a
    fresh server, by its older multipage rules, before app.py's ``st.navigation`` switches those off
    -- runs app.py instead (its sign-in gate, then the page asked for) and stops, so no page is
    ever shown without the gate.
    """
    if not _INSIDE_APP.get():
        found = APP.stat()
        exec(
            _app_code(found.st_mtime_ns, found.st_size),
            {"__name__": "__main__", "__file__": str(APP), "__builtins__": builtins},
        )
        st.stop()
    return st.session_state["workbench"]


def app_chat_service(wb: Workbench) -> ChatService:
    """The chat service for ``wb`` (a page's workbench: the process's, or a signed-in person's view
    of it): built over the process's shared chat state (:class:`~knowledge.chat.Chats`, which app.py
    builds once over the system with the workbench and keeps in ``st.session_state["chats"]``),
    acting for ``wb``'s actor (that person's sessions and stores only)."""
    chats: Chats = st.session_state["chats"]
    return chats.service(wb)


#: Where a browser session keeps its app session: the token of ``wb.accounts.start_session``
#: (app.py checks it on every run with ``session_actor``).
SESSION_TOKEN = "session_token"
#: Why a browser session was signed out (an expired or ended session): shown on the sign-in page.
SIGN_IN_NOTICE = "sign_in_notice"


def begin_session(actor: Actor, token: str) -> None:
    """Sign this browser session in as ``actor`` holding app session ``token`` (from
    ``wb.sign_in`` or ``wb.accounts.start_session``) and run the app again. Every way in
    (password, invitation, first-run set-up, single sign-on) ends here."""
    for key in (SIGN_IN_NOTICE, "signed_in"):
        st.session_state.pop(key, None)
    st.session_state[SESSION_TOKEN] = token
    st.session_state["actor"] = actor
    st.rerun()


def new_account_fields(wb: Workbench, prefix: str) -> tuple[str, str, str, str]:
    """Username, display name, password and password again, inside a form (widget keys
    ``<prefix>-username``, ``-display``, ``-password``, ``-again``): the app's first-run set-up and
    invitation forms and the People page's "Turn on accounts"."""
    username = st.text_input(
        "Username",
        key=f"{prefix}-username",
        help="Letters (any language), digits and . _ - @ + (no spaces); Ana and ana are one name.",
    )
    display = st.text_input("Display name", key=f"{prefix}-display", help="How pages name you; the username if empty.")
    first = st.text_input(
        "Password",
        type="password",
        key=f"{prefix}-password",
        help=f"At least {wb.settings.accounts.min_password_length} characters.",
    )
    again = st.text_input("Password again", type="password", key=f"{prefix}-again")
    return username, display, first, again


def account_problem(username: str, first: str, again: str) -> str | None:
    """What is wrong with a new account's fields before the catalog is asked, or ``None``."""
    if not username.strip() or not first or not again:
        return "Fill in the username and the password twice."
    if first != again:
        return "The two passwords differ: type the same password twice."
    return None


def set_up_first_admin(wb: Workbench, username: str, display: str, password: str) -> None:
    """The first admin account (:meth:`knowledge.people.desk.AccountDesk.set_up_admin`), then this
    browser session signed in as it; a refusal (accounts exist, a bad name or password) is shown
    and nothing else happens. The caller has let the person in (the set-up token, or the person at
    this machine): one function for the app's set-up page and the People page."""
    try:
        user = wb.accounts.set_up_admin(username, password, display_name=display or None)
        actor, token = wb.sign_in(user.username, password)
    except KnowledgeError as exc:
        st.error(inert(exc))
        return
    begin_session(actor, token)


def utc(when: datetime | None, *, seconds: bool = False) -> str:
    """A time as people read it, in UTC: ``"2026-12-01 20:15 UTC"`` (``seconds``:
    ``"2026-12-01 20:15:07 UTC"``); ``""`` for none. A naive time is taken as UTC."""
    if when is None:
        return ""
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def key_row(k: ApiKey) -> dict[str, str]:
    """One API key as a table row (My account, People → API keys): its name, the secret's last
    characters, when it was made and last used, and whether it is active (times in UTC)."""
    return {
        "name": k.name,
        "ends in": "…" + k.hint,
        "created": utc(k.created),
        "last used": utc(k.last_used) or "never",
        "status": "active" if k.active else f"revoked {utc(k.revoked)}",
    }


#: The distances a store may compare embeddings by (:data:`knowledge.vectorstore.base.DISTANCES`).
DISTANCES: list[str] = list(_DISTANCES)

_PREFIX = "flash:"


def set_flash(key: str, ok: bool | None, msg: str) -> None:
    """Keep ``msg`` for the next run, to show once where :func:`flash` is called with ``key``:
    as a success (``ok``), an error (``False``) or a warning (``None``: done, with something to
    heed). ``msg`` is plain text (it names stores and files, which are untrusted): shown as
    written, never read as Markdown."""
    st.session_state[_PREFIX + key] = (None if ok is None else bool(ok), msg)


def has_flash(key: str) -> bool:
    """Whether a message waits under ``key`` (for a section drawn only when there is something to say)."""
    return st.session_state.get(_PREFIX + key) is not None


def flash(key: str) -> None:
    """Show, once, the message kept under ``key`` by :func:`set_flash` (nothing when there is none)."""
    msg = st.session_state.pop(_PREFIX + key, None)
    if msg:
        (st.warning if msg[0] is None else st.success if msg[0] else st.error)(inert(msg[1]))


def megabytes(n: int | float | None, digits: int = 3) -> float | None:
    """``n`` bytes in MB (10^6 bytes), rounded to ``digits`` decimals, for a table column;
    ``None`` when the size is unknown."""
    return None if n is None else round(n / 1e6, digits)


def kilobytes(n: int | float | None) -> float | None:
    """``n`` bytes in kB (10^3 bytes), one decimal, for a table column of files; ``None`` when unknown."""
    return None if n is None else round(n / 1e3, 1)


def human_size(n: int | float | None) -> str:
    """``n`` bytes in words with one decimal: ``"1.2 GB"``, ``"3.4 MB"``, ``"5.6 kB"``, ``"12 B"``
    (decimal units, 1 kB = 1000 bytes); ``"?"`` when unknown."""
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def duration(seconds: float) -> str:
    """A span of time in words, rounded as a person would say it: ``"45 s"`` (under 90 s, at least
    1 s), ``"3 min"``, ``"1 h 20 min"``."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


__all__ = [
    "DISTANCES",
    "SESSION_TOKEN",
    "SIGN_IN_NOTICE",
    "begin_session",
    "duration",
    "flash",
    "has_flash",
    "human_size",
    "megabytes",
    "set_flash",
    "utc",
]
