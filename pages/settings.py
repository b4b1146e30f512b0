"""Settings: LLM configs (CHAT and EMBEDDING), the LLM call trace, and the file store (where the files
live; moving them to another store: pages/_filestore.py)."""

from __future__ import annotations

import os

import streamlit as st

from knowledge.errors import KnowledgeError
from knowledge.llm import local
from knowledge.llm.config import PROVIDERS
from knowledge.text.render import inert, md
from knowledge.tools import KnowledgeTools
from knowledge.workbench import Workbench
from pages._filestore import file_store_tab
from pages._ui import app_chat_service, app_workbench, flash, set_flash

wb: Workbench = app_workbench()
configs = wb.llm_configs()

st.title("⚙️ Settings")
tab_configs, tab_traces, tab_files = st.tabs(["LLM configs", "Traces", "File store"])

with tab_configs:
    st.caption(
        "A chat model config (type CHAT) is a model to chat with; the embedding config (type EMBEDDING) named"
        f" `{wb.settings.vector_store.embedding_config}` is what the knowledge tools embed with. API keys"
        " are never stored: a config names the environment variable that holds the key."
    )
    ok, reason = KnowledgeTools(wb).availability()
    if ok:
        st.success("Knowledge tools: available.")
    else:
        st.warning(md("Knowledge tools: {}.", reason))
    rows = configs.list()
    st.dataframe(
        [
            {
                "name": c.name,
                "type": c.type,
                "provider": c.provider,
                "model": c.model or "(default)",
                "base URL": c.base_url or "",
                "key variable": c.api_key_env or "",
                "key set": ("yes" if os.environ.get(c.api_key_env) else "no") if c.api_key_env else "",
                "reads": ", ".join(sorted(c.effective_capabilities())) or "text",
                "capabilities": "provider default" if c.capabilities is None else ", ".join(c.capabilities) or "none",
                "tools": ("search first" if c.search_first else "search + write" if c.write_tools else "search")
                if c.type == "CHAT"
                else "",
            }
            for c in rows
        ],
        hide_index=True,
        width="stretch",
    )

    names = [c.name for c in rows]
    if not wb.actor.is_admin:  # signed in as a member: the configs are the admins' to change
        st.info("Only an admin adds, changes or deletes LLM configs.")
        admin = False
    else:
        admin = True


def local_servers(names: list[str]) -> None:
    """A model server on this machine (Ollama, LM Studio, llama.cpp's server), found on its default
    port when the page opens (loopback only, once per visit; "Look again" probes anew), offered as
    one button that saves a search-first chat model config for it."""
    st.subheader("A model server on this computer")
    ports = st.session_state.get("local_server_ports") or local.DEFAULT_PORTS  # tests point it elsewhere
    if "local_servers" not in st.session_state:
        st.session_state["local_servers"] = local.detect(ports)
    found = st.session_state["local_servers"]
    where = ", ".join(f"{n} ({p})" for n, p in ports.items())
    if not found:
        st.caption(
            md(
                "No model server answers on this computer's default ports: {}. Start one (and load a"
                " model in it), then look again.",
                where,
            )
        )
    for server in found:
        if not server.models:
            st.caption(
                md("{} answers at {} but lists no model: load one in it, then look again.", server.name, server.base_url)
            )
            continue
        cfg = server.config()
        if cfg.name in names:
            st.caption(md("{} ({}) is set up: choose the config **{}** in the chat.", server.name, cfg.model, cfg.name))
            continue
        if st.button(
            md("Use {} ({})", server.name, cfg.model),
            key=f"use_{server.base_url}",
            type="primary",
            help=md(
                "Saves the chat model config {}: the chat searches first and the model writes"
                " from the top passages, citing them.",
                cfg.name,
            ),
        ):
            try:
                configs.save(cfg)
                set_flash("llm-local", True, f"Saved the config {cfg.name}: choose it under Model in the chat.")
            except KnowledgeError as exc:
                set_flash("llm-local", False, str(exc))
            st.rerun()
    if st.button("Look again", key="local_look_again", icon=":material/refresh:"):
        st.session_state.pop("local_servers", None)
        st.rerun()
    flash("llm-local")


def config_forms(rows: list, names: list[str]) -> None:
    st.subheader("Add or change a config")
    base = st.selectbox("Start from", ["(new)", *names], key="cfg_base")
    cur = configs.find(base) if base != "(new)" else None
    with st.form("llm_config"):
        name = st.text_input("Name", value=cur.name if cur else "")
        c1, c2 = st.columns(2)
        providers = list(PROVIDERS)
        provider = c1.selectbox(
            "Provider",
            providers,
            index=providers.index(cur.provider) if cur else 0,
            help="openai: any OpenAI-compatible server (OpenAI, OpenRouter, Azure, LM Studio,"
            " Ollama, Groq, Mistral, vLLM, llama.cpp). offline: the retrieval-only"
            " assistant. bundled: the offline embedding model.",
        )
        model = c2.text_input("Model", value=(cur.model or "") if cur else "", placeholder="gpt-4o-mini")
        base_url = c1.text_input(
            "Base URL", value=(cur.base_url or "") if cur else "", placeholder="http://localhost:1234/v1 (empty: OpenAI)"
        )
        key_env = c2.text_input(
            "API key environment variable",
            value=(cur.api_key_env or "") if cur else "",
            placeholder="OPENAI_API_KEY",
            help="The NAME of the variable, never the key.",
        )
        default_caps = st.checkbox("Capabilities: the provider's default", value=cur is None or cur.capabilities is None)
        caps = st.multiselect(
            "Capabilities (when not the default)",
            ["VISION", "DOCUMENTS"],
            default=list(cur.capabilities or []) if cur else [],
        )
        context = st.number_input(
            "Working memory (tokens)", 1_000, 2_000_000, value=cur.context_tokens if cur else 16_000, step=1_000
        )
        write_tools = st.checkbox(
            "Let the model change this chat's attachments (writing tools)",
            value=bool(cur and cur.write_tools),
            help="Off (recommended): the model may only search. On: it is also offered vector_upsert,"
            " vector_delete_file and vector_ingest_file, acting on the chat's own attachments only"
            " (vector_ingest_file reads only under chat.allowed_dirs). Documents can carry"
            " instructions, so keep it off unless you need it. Chat model configs only.",
        )
        search_first = st.checkbox(
            "Search first, then let the model write (no tool calls)",
            value=bool(cur and cur.search_first),
            help="For small local models, which cannot drive tool calls reliably: the chat searches with the"
            " question, gives the model the top passages numbered, and checks that every [n] it writes"
            " is one of them. OpenAI-compatible chat model configs only.",
        )
        if st.form_submit_button("Save config"):
            try:
                saved = configs.save(
                    {
                        "name": name.strip(),
                        "type": PROVIDERS[provider],
                        "provider": provider,
                        "model": model,
                        "base_url": base_url,
                        "api_key_env": key_env,
                        "capabilities": None if default_caps or PROVIDERS[provider] == "EMBEDDING" else caps,
                        "context_tokens": int(context),
                        "write_tools": bool(write_tools) and PROVIDERS[provider] == "CHAT",
                        "search_first": bool(search_first) and provider == "openai",
                    }
                )
                set_flash("llm-config", True, f"Saved the config {saved.name}.")
                st.rerun()
            except KnowledgeError as exc:
                st.error(inert(exc))

    flash("llm-config")

    st.subheader("Delete a config")
    c1, c2 = st.columns([3, 1])
    victim = c1.selectbox(
        "Config", names, key="cfg_delete", label_visibility="collapsed", index=None, placeholder="Choose a config to delete"
    )
    if c2.button("Delete", disabled=victim is None):
        try:
            configs.delete(victim)
            set_flash("llm-delete", True, f"Deleted the config {victim}.")
        except KnowledgeError as exc:
            set_flash("llm-delete", False, str(exc))
        st.rerun()
    flash("llm-delete")


if admin:
    with tab_configs:
        config_forms(rows, names)
        local_servers(names)

with tab_traces:
    chat = app_chat_service(wb)
    sessions = {s.id: s.title for s in chat.sessions()}
    which = st.selectbox("Session", ["(all)", *sessions], format_func=lambda i: sessions.get(i, i))
    traces = chat.traces(None if which == "(all)" else which, limit=100)
    if not traces:
        st.info(
            "No LLM calls yet. Every request and response of a chat is recorded here, with base64"
            " attachments replaced by a note."
        )
    for t in traces:
        status = f"⚠️ {t.error}" if t.error else "ok"
        label = (
            f"#{t.id} · {t.started:%Y-%m-%d %H:%M:%S} · {t.config} ({t.provider}"
            f"{' ' + t.model if t.model else ''}) · {t.seconds or 0:.2f} s · {status}"
        )
        with st.expander(inert(label)):
            st.caption(md("Session: {}", sessions.get(t.session_id, t.session_id)))
            st.markdown("**Request**")
            st.json(t.request, expanded=False)
            st.markdown("**Response**")
            st.json(t.response if t.response is not None else {"error": t.error}, expanded=False)

with tab_files:
    file_store_tab(wb)
