"""Chat: sessions with attachments; the knowledge tools in the loop; answers with citations."""

from __future__ import annotations

import json
import math

import streamlit as st

from knowledge.chat import ChatService
from knowledge.chat.model import ASSISTANT, ATTACHMENT, FILE, IMAGE, TOOL, USER, Message
from knowledge.chat.sources import where_text
from knowledge.errors import KnowledgeError
from knowledge.pagemodels.details import attribute_filter, filter_text
from knowledge.pagemodels.viewer import viewer_url
from knowledge.text import render
from knowledge.text.render import inert, md
from knowledge.workbench import Workbench
from pages._ui import app_chat_service, app_workbench

wb: Workbench = app_workbench()


chat: ChatService = app_chat_service(wb)

try:
    configs = [c.name for c in chat.configs.list("CHAT")]
    store_names = wb.store_names()
    # -- which session: a stored one, or a new chat (None) that is stored with its first message
    if "chat_session" not in st.session_state:
        wanted = st.query_params.get("session")
        known = [s.id for s in chat.sessions()]
        st.session_state["chat_session"] = wanted if wanted in known else (known[0] if known else None)
    sid: str | None = st.session_state["chat_session"]
    chat.prune_empty(keep=sid)  # "New chat" sessions nobody wrote in
    sessions = chat.sessions()
    if sid is not None and sid not in {s.id for s in sessions}:
        sid = st.session_state["chat_session"] = None
    session = chat.session(sid) if sid else None
    knowledge = chat.knowledge(sid) if sid else None
except KnowledgeError as exc:
    st.error(inert(exc))
    st.stop()
if sid is None and "draft_stores" not in st.session_state:
    st.session_state["draft_stores"] = chat.default_stores()


def start_new_chat() -> None:
    st.session_state["chat_session"] = None
    st.session_state["draft_stores"] = chat.default_stores()
    st.session_state.pop("draft_config", None)


with st.sidebar:
    st.subheader("Chats")
    st.button("➕ New chat", width="stretch", on_click=start_new_chat, disabled=sid is None)
    labels = {s.id: s.title for s in sessions}
    if labels:
        picked = st.radio(
            "Session",
            list(labels),
            format_func=lambda i: inert(labels[i]),
            index=list(labels).index(sid) if sid in labels else None,
            label_visibility="collapsed",
            key=f"chat_pick_{sid}",
        )
        if picked is not None and picked != sid:
            st.session_state["chat_session"] = picked
            st.rerun()

    st.subheader("Knowledge")
    chosen = session.stores if session else st.session_state["draft_stores"]
    picked_stores = st.multiselect(
        "Stores this chat searches",
        store_names,
        default=[n for n in chosen if n in store_names],
        key=f"knowledge_{sid or 'new'}",
        placeholder="Choose stores" if store_names else "No stores yet",
        help="The chat searches these stores together with the files attached to it. Create stores and"
        " drop files on them on the Vector stores page.",
    )
    if picked_stores != [n for n in chosen if n in store_names]:
        if session:
            chat.set_stores(sid, picked_stores)
        else:
            st.session_state["draft_stores"] = picked_stores
        st.rerun()
    if not store_names:
        st.caption("No stores yet: create one on the **Vector stores** page, or attach files to a message.")
    if session:  # issue 29: search only files whose attributes match (File details on the Stores page)
        now = chat.filter_of(sid)
        typed = st.text_area(
            "Filter by file attributes",
            value=filter_text(now),
            key=f"chat_filter_{sid}",
            placeholder="team = docs",
            height=68,
            help="`key = value` lines: the chat searches only files with these attributes"
            " (set them under File details on the Vector stores page).",
        )
        try:
            if (wanted := attribute_filter(typed)) != now:
                chat.set_filter(sid, wanted)
                st.rerun()
        except KnowledgeError as exc:
            st.error(inert(exc))

    names = configs if "offline" in configs else ["offline", *configs]
    current = (session.config if session else st.session_state.get("draft_config")) or "offline"
    choice = st.selectbox(
        "Model (chat model config)",
        names,
        index=names.index(current) if current in names else 0,
        help="Edit configs on the Settings page. `offline` answers with quoted passages only.",
    )
    if choice != current:
        if session:
            chat.set_config(sid, None if choice == "offline" else choice)
        else:
            st.session_state["draft_config"] = None if choice == "offline" else choice
        st.rerun()

    if session:
        st.subheader("Attachments")
        attachments = chat.attachments(sid)
        pending = {e["file_id"] for e in session.pending if e["event"] == "attached"}
        if not attachments:
            st.caption("Nothing attached. Drop files into the message box below.")
        for a in attachments:
            icon = "🖼️" if a.kind == "image" else "📄"
            pages = f", {a.pages} page{'s' if a.pages != 1 else ''}" if a.pages else ""
            with st.container(horizontal=True, vertical_alignment="center", gap="small"):
                st.markdown(
                    md(
                        "{} **{}**  \n<small>{}{}{}</small>",
                        icon,
                        a.name,
                        a.label,
                        pages,
                        " · sent with your next message" if a.file_id in pending else "",
                    ),
                    unsafe_allow_html=True,
                    width="stretch",
                )
                if st.button(
                    "",
                    icon=":material/close:",
                    key=f"rm_{a.file_id}",
                    type="tertiary",
                    help=md("Remove {} from this chat", a.name),
                ):
                    chat.remove(sid, a.file_id)
                    st.rerun()
        with st.popover("🗑 Delete this chat", width="stretch"):
            st.markdown(md("Delete **{}**, its messages and its attached files?", session.title))
            if st.button("Delete", type="primary", key="confirm_delete_chat"):
                chat.delete_session(sid)
                start_new_chat()
                st.rerun()
    ok, reason = chat.tools.availability()
    if not ok:
        st.warning(md("The knowledge tools are {}.", reason))

# -- the header: title and the knowledge as chips ---------------------------------------------------
st.title(md("💬 {}", session.title if session and session.title != "New chat" else "Chat"))
searched = knowledge.stores if knowledge else [n for n in st.session_state["draft_stores"] if n in store_names]
chips = [f":blue-badge[:material/database: {inert(n)}]" for n in searched]
if knowledge and knowledge.attachments:
    chips.append(":gray-badge[:material/attach_file: attached files]")
st.markdown(
    "Searches " + " ".join(chips)
    if chips
    else ":orange-badge[No knowledge yet] choose stores in the sidebar, or attach files to a message."
)
if knowledge and knowledge.dropped:
    st.info(
        md(
            "{} no longer exist{}"
            + (" (or are no longer shared with you)" if not wb.actor.local else "")
            + "; removed from this chat's knowledge.",
            ", ".join(knowledge.dropped),
            "s" if len(knowledge.dropped) == 1 else "",
        )
    )


# -- the conversation ---------------------------------------------------------------------------
def show_media(m: Message) -> None:
    for p in m.media():
        if p.kind == IMAGE:
            try:
                with wb.read_file(p.file_id) as fh:
                    st.image(fh.read(), caption=inert(p.name), width=260)
            except KnowledgeError:
                st.caption(md("🖼️ {} (no longer stored)", p.name))
        elif p.kind == FILE:
            st.caption(md("📄 {}", p.name))


def show_source(c: dict, n: int | None, question: str | None) -> None:
    """One passage: ``[n] file, page — heading · score`` (``n`` None: unnumbered), its text and an
    "Open in viewer" link."""
    label = f"[{n}] " if n is not None else ""
    said = c.get("sentences") or []  # the offline assistant's answering sentences in this passage
    with st.expander(inert(f"{label}{where_text(c)} · similarity {c.get('score', 0):.3f}")):
        st.markdown(
            render.render_html(
                c.get("text") or "",
                None if said else question,
                file_name=c.get("file_name"),
                marks=[(x["start"], x["end"]) for x in said],
            ),
            unsafe_allow_html=True,
        )
        if said:
            st.caption(
                "Highlighted: the sentence the answer quotes."
                if len(said) == 1
                else "Highlighted: the sentences the answer quotes."
            )
        span = f" · characters {c['char_start']}–{c['char_end']}" if c.get("char_start") is not None else ""
        source = c.get("source") or ("attachments" if str(c.get("store", "")).startswith("chat-") else c.get("store"))
        where = "an attached file" if source == "attachments" else f"store {source}"
        chunks = c.get("chunks") or [c.get("chunk_index")]
        which = f"chunk {chunks[0]}" if len(chunks) == 1 else f"chunks {chunks[0]}–{chunks[-1]}"
        st.caption(inert(f"{which} of {c.get('file_name')}{span} ({where})"))
        if c.get("store") and c.get("file_id"):
            at = said[0] if said and "char_start" in said[0] else c  # the quoted sentence, else the passage
            st.link_button(
                "Open in viewer",
                viewer_url(c["store"], c["file_id"], start=at.get("char_start"), end=at.get("char_end"), page=c.get("page")),
                icon=":material/visibility:",
            )


def show_citations(citations: list[dict], also: list[dict] | None, question: str | None = None) -> None:
    """The answer's Sources (numbered as its markers) and, collapsed, what else was searched. A
    message stored before ``also_searched`` was kept (``also`` None) shows its citations as then."""
    if citations:
        st.markdown("**Sources**")
        if also is not None:
            st.caption("The passages this answer cites or quotes, numbered as in the answer.")
        for i, c in enumerate(citations, 1):
            show_source(c, c.get("n", i), question)
    if also:
        with st.expander(f"Also searched ({len(also)})", expanded=False):
            st.caption("Found by the search but not used in the answer.")
            for c in also:
                show_source(c, None, question)


def show_tool(call: dict, result: Message | None, shown: list[Message]) -> None:
    args = json.loads(call["arguments"]) if call.get("arguments") else {}
    brief = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items() if k != "store")
    ok = result is None or result.meta.get("ok", True)
    with st.expander(inert(f"{'🔧' if ok else '⚠️'} {call['name']}({brief})"), expanded=False):
        if result is not None:
            st.code(result.text, language=None, wrap_lines=True)
        for m in shown:
            st.caption("Re-shown attachment:")
            show_media(m)


messages = chat.messages(sid) if sid else []
results = {m.meta.get("tool_call_id"): m for m in messages if m.role == TOOL}
reshown: dict[str, list[Message]] = {}
for m in messages:
    if m.role == ATTACHMENT:
        reshown.setdefault(m.meta.get("tool_call_id"), []).append(m)

i = 0
question = None
while i < len(messages):
    m = messages[i]
    if m.role == USER:
        question = m.text
        with st.chat_message("user"):
            attached = m.meta.get("attached") or []
            removed = m.meta.get("removed") or []
            if attached:
                st.caption(inert("📎 " + ", ".join(e["name"] for e in attached)))
            if removed:
                st.caption(inert("✖ removed " + ", ".join(e["name"] for e in removed)))
            if m.text:
                st.markdown(render.answer_html(m.text), unsafe_allow_html=True)
            show_media(m)
        i += 1
        continue
    # an assistant turn: tool calls (collapsed), then the answer
    with st.chat_message("assistant"):
        while i < len(messages) and messages[i].role != USER:
            m = messages[i]
            if m.role == ASSISTANT:
                for call in m.meta.get("tool_calls") or []:
                    show_tool(call, results.get(call["id"]), reshown.get(call["id"], []))
                if m.text:
                    st.markdown(render.answer_html(m.text), unsafe_allow_html=True)
                if not m.meta.get("tool_calls"):
                    unknown = m.meta.get("unknown_markers") or []
                    if unknown:
                        st.caption(
                            inert(
                                "Removed from the answer: "
                                + ", ".join(f"[{n}]" for n in unknown)
                                + (
                                    " — the model cited passages it was not given."
                                    if len(unknown) > 1
                                    else " — the model cited a passage it was not given."
                                )
                            )
                        )
                    show_citations(m.meta.get("citations") or [], m.meta.get("also_searched"), question)
                    cfg = m.meta.get("config")
                    if cfg:
                        st.caption(inert(f"{cfg}{' · retrieval only' if m.meta.get('retrieval_only') else ''}"))
            i += 1

if not messages:
    st.caption(
        "Ask about the stores chosen in the sidebar, or drag files onto the box below and ask about"
        f" them (up to {wb.settings.ingest.max_file_mb:g} MB each, setting ingest.max_file_mb). Without a"
        " language model the offline assistant answers with the sentences that answer best, each citing"
        " its passage."
    )

# The box shows the limit it is given ("Limit 100 MB per file"): the setting's, which the chat enforces
# (not Streamlit's ceiling, server.maxUploadSize, which a .kb bundle's import needs larger).
prompt = st.chat_input(
    "Ask something, or drop files here",
    accept_file="multiple",
    max_upload_size=max(1, math.ceil(wb.settings.ingest.max_file_mb)),
    key=f"chat_input_{sid or 'new'}",
)
if prompt and sid is None:  # a new chat is stored with its first message
    try:
        sid = chat.create_session(
            config=st.session_state.get("draft_config"),
            stores=[n for n in st.session_state["draft_stores"] if n in store_names],
        ).id
    except KnowledgeError as exc:
        st.error(inert(exc))
        st.stop()
    st.session_state["chat_session"] = sid
if prompt:
    # The turn goes to a thread before any Streamlit call: a message sent while this one is answered
    # reruns the page, which stops this script at its next Streamlit call -- the turn goes on anyway.
    turn = chat.start_turn(sid, [(f.getvalue(), f.name, f.type) for f in prompt.files or []], (prompt.text or "").strip())
    with st.spinner("Attaching and thinking..." if turn.files else "Thinking..."):
        with st.chat_message("assistant"):
            st.write_stream(turn.stream())  # a model that streams writes into the bubble as it goes
        turn.wait()
    st.session_state["chat_problems"] = turn.problems
    st.rerun()
running = chat.running_turn(sid) if sid else None
if running is not None:  # sent earlier (or from another tab) and not answered yet
    with st.spinner("Answering the previous message..."):
        running.wait()
    st.session_state["chat_problems"] = running.problems
    st.rerun()

for problem in st.session_state.pop("chat_problems", []):
    st.error(inert(problem))
unanswered = bool(sid and messages and messages[-1].role == USER)  # the turn failed: no answer stored
if unanswered and st.button(
    "Retry",
    icon=":material/refresh:",
    key="chat_retry",
    help="Ask the last question again (after fixing the model's settings, or once its server is back).",
):
    turn = chat.start_turn(sid, [], "", retry=True)
    with st.spinner("Thinking..."):
        turn.wait()
    st.session_state["chat_problems"] = turn.problems
    st.rerun()
