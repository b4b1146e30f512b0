"""Single sign-on in the app: Streamlit's ``st.login`` (OpenID Connect, through Authlib) with the
provider the user put in ``.streamlit/secrets.toml``'s ``[auth]`` section, mapped to accounts by
:mod:`knowledge.people.sso`.

``app.py`` calls :func:`sign_in_from_provider` on every run before its gate (after the provider's
redirect it finds ``st.user`` signed in, maps the identity to its account and starts an app session:
``st.session_state["actor"]`` and ``["session_token"]``), :func:`buttons` on the sign-in page
("Sign in with <provider>", or why the provider's identity was refused) and :func:`sign_out` on
**Log out** (the app session ends, then ``st.logout()`` clears Streamlit's identity cookie).
Without an ``[auth]`` section nothing here does anything.
"""

from __future__ import annotations

import contextlib
from typing import Any

import streamlit as st

from knowledge.errors import AuthenticationFailed, KnowledgeError
from knowledge.people.records import Actor
from knowledge.people.sso import Provider, SingleSignOn, SsoExpired, provider_problems
from knowledge.people.sso import providers as providers_of
from knowledge.text.render import inert

#: ``st.session_state`` keys: the signed-in account, its app session, how it signed in, a refusal.
ACTOR, TOKEN, VIA, REFUSED = "actor", "session_token", "signed_in_via", "sso_refused"


def auth_section() -> dict[str, Any] | None:
    """The ``[auth]`` section of Streamlit's secrets (``None``: no secrets file, or no section)."""
    try:
        section = st.secrets.get("auth")
    except FileNotFoundError:  # no secrets.toml (Streamlit's StreamlitSecretNotFoundError), or unreadable
        return None
    if section is None:
        return None
    return section.to_dict() if hasattr(section, "to_dict") else dict(section)


def providers() -> list[Provider]:
    """The providers ``st.login`` can use now (``[]``: single sign-on is not configured, or not fully)."""
    return providers_of(auth_section())


def problems() -> list[str]:
    """What keeps a present ``[auth]`` section from working (``[]`` when there is none, or it is ready)."""
    section = auth_section()
    return [] if section is None else provider_problems(section)


def configured() -> bool:
    """Whether single sign-on is configured (a complete ``[auth]`` section)."""
    return bool(providers())


def single_sign_on(wb: Any) -> SingleSignOn:
    """The mapping of identities to ``wb``'s accounts, with its ``accounts.*`` settings."""
    sso: SingleSignOn = wb.single_sign_on()
    return sso


def sign_in_from_provider(wb: Any) -> Actor | None:
    """Who is signed in through the provider in this browser session, or ``None``.

    An app session started here is checked on every run (a deleted account or an expired session
    signs out, a changed role counts at once). A provider sign-in whose identity has no account
    leaves the reason in ``st.session_state["sso_refused"]`` for :func:`buttons`; one older than
    ``accounts.session_hours`` is sent back to the provider (``st.logout()``)."""
    if not configured():
        return None
    if st.session_state.get(VIA) == "sso":
        try:
            actor: Actor = wb.session_actor(st.session_state.get(TOKEN))
        except AuthenticationFailed:
            sign_out(wb)
            return None
        st.session_state[ACTOR] = actor
        return actor
    if st.session_state.get(ACTOR) is not None or not st.user.is_logged_in or st.session_state.get(REFUSED):
        return st.session_state.get(ACTOR)
    try:
        actor, token = single_sign_on(wb).sign_in(st.user.to_dict())
    except SsoExpired:
        st.logout()
        st.stop()
    except AuthenticationFailed as exc:
        st.session_state[REFUSED] = str(exc)
        return None
    except KnowledgeError as exc:  # the catalog cannot be reached: say so on the sign-in page
        st.session_state[REFUSED] = f"Single sign-on did not finish: {exc}"
        return None
    st.session_state.update({ACTOR: actor, TOKEN: token, VIA: "sso"})
    return actor


def buttons() -> None:
    """On the sign-in page: a refusal (with a way to sign in as someone else), else one "Sign in with
    <provider>" button per provider; nothing when single sign-on is not configured."""
    refused = st.session_state.get(REFUSED)
    if refused:
        st.error(inert(refused), icon="🚫")  # it quotes the provider's claims: shown as text, never Markdown
        if st.button("Use another account", key="sso-other"):
            st.session_state.pop(REFUSED, None)
            st.logout()
        return
    for provider in providers():
        if st.button(
            inert(f"Sign in with {provider.label}"), key=f"sso-{provider.key or 'default'}", type="primary", icon="🔑"
        ):
            st.login(provider.key)


def sign_out(wb: Any) -> bool:
    """End the app session of this browser session and Streamlit's provider sign-in. Returns whether
    ``st.logout()`` was called (it reloads the app: the caller stops, without ``st.rerun``); without a
    provider sign-in only the app session ends."""
    actor = st.session_state.get(ACTOR)
    with contextlib.suppress(KnowledgeError):  # the catalog is unreachable: the session expires on its own
        wb.sign_out(st.session_state.get(TOKEN), actor if isinstance(actor, Actor) else None)
    for key in (ACTOR, TOKEN, VIA, REFUSED):
        st.session_state.pop(key, None)
    if configured() and st.user.is_logged_in:
        st.logout()
        return True
    return False
