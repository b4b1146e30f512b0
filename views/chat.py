"""Chat: sessions with attachments; the knowledge tools in the loop; answers with citations."""

from __future__ import annotations

import json

import streamlit as st

from knowledge import playground as pg
from knowledge.chat import ChatService
from knowledge.chat.model import ASSISTANT, ATTACHMENT, FILE, IMAGE, TOOL, USER, Message
from knowledge.errors import KnowledgeError
from knowledge.workbench import Workbench

wb: Workbench = st.session_state["workbench"]
if "chat_service" not in st.session_state or st.session_state["chat_service"].wb is not wb:
    st.session_state["chat_service"] = ChatService(wb)
chat: ChatService = st.session_state["chat_service"]

st.title("💬 Chat")

try:
    sessions = chat.sessions()
    configs = [c.name for c in chat.configs.list("CHAT")]
except KnowledgeError as exc:
    st.error(str(exc))
    st.stop()

# -- which session ----------------------------------------------------------------------------------
wanted = st.query_params.get("session")
if wanted and wanted in {s.id for s in sessions} and "chat_session" not in st.session_state:
    st.session_state["chat_session"] = wanted
if st.session_state.get("chat_session") not in {s.id for s in sessions}:
    st.session_state["chat_session"] = sessions[0].id if sessions else chat.create_session().id
    sessions = chat.sessions()
sid = st.session_state["chat_session"]
session = chat.session(sid)

with st.sidebar:
    st.subheader("Chats")
    if st.button("➕ New chat", width="stretch"):
        st.session_state["chat_session"] = chat.create_session().id
        st.rerun()
    labels = {s.id: s.title for s in sessions}
    picked = st.radio("Session", list(labels), format_func=lambda i: labels[i],
                      index=list(labels).index(sid), label_visibility="collapsed", key=f"chat_pick_{sid}")
    if picked != sid:
        st.session_state["chat_session"] = picked
        st.rerun()
    names = configs if "offline" in configs else ["offline", *configs]
    current = session.config or "offline"
    choice = st.selectbox("Model (CHAT config)", names, index=names.index(current) if current in names else 0,
                          help="Edit configs on the Settings page. `offline` answers with quoted passages only.")
    if choice != current:
        chat.set_config(sid, None if choice == "offline" else choice)
        st.rerun()

    st.subheader("Attachments")
    attachments = chat.attachments(sid)
    pending = {e["file_id"] for e in session.pending if e["event"] == "attached"}
    if not attachments:
        st.caption("Nothing attached. Drop files into the message box below.")
    for a in attachments:
        c1, c2 = st.columns([5, 1])
        icon = "🖼️" if a.kind == "image" else "📄"
        pages = f", {a.pages} page{'s' if a.pages != 1 else ''}" if a.pages else ""
        c1.markdown(f"{icon} **{a.name}**  \n<small>{a.label}{pages}"
                    f"{' · sent with your next message' if a.file_id in pending else ''}</small>",
                    unsafe_allow_html=True)
        if c2.button("✖", key=f"rm_{a.file_id}", help=f"Remove {a.name} from this chat"):
            chat.remove(sid, a.file_id)
            st.rerun()
    if st.button("🗑 Delete this chat", width="stretch"):
        chat.delete_session(sid)
        del st.session_state["chat_session"]
        st.rerun()
    ok, reason = chat.tools.availability()
    if not ok:
        st.warning(f"The knowledge tools are {reason}.")


# -- the conversation ---------------------------------------------------------------------------
def show_media(m: Message) -> None:
    for p in m.media():
        if p.kind == IMAGE:
            try:
                with wb.files.content(p.file_id) as fh:
                    st.image(fh.read(), caption=p.name, width=260)
            except KnowledgeError:
                st.caption(f"🖼️ {p.name} (no longer stored)")
        elif p.kind == FILE:
            st.caption(f"📄 {p.name}")


def show_citations(citations: list[dict]) -> None:
    if not citations:
        return
    st.markdown("**Sources**")
    st.caption("In the order of the search (meaning and exact words fused); score = cosine similarity.")
    for i, c in enumerate(citations, 1):
        page = f", page {c['page']}" if c.get("page") is not None else ""
        heading = f" — {c['heading']}" if c.get("heading") else ""
        with st.expander(f"[{i}] {c.get('file_name')}{page}{heading} · score {c.get('score', 0):.3f}"):
            st.markdown(pg.escape_markdown(c.get("text") or ""), unsafe_allow_html=True)
            span = (f" · characters {c['char_start']}–{c['char_end']}"
                    if c.get("char_start") is not None else "")
            st.caption(f"chunk {c.get('chunk_index')} of {c.get('file_name')}{span} (store {c.get('store')})")


def show_tool(call: dict, result: Message | None, shown: list[Message]) -> None:
    args = json.loads(call["arguments"]) if call.get("arguments") else {}
    brief = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items() if k != "store")
    ok = result is None or result.meta.get("ok", True)
    with st.expander(f"{'🔧' if ok else '⚠️'} {call['name']}({brief})", expanded=False):
        if result is not None:
            st.code(result.text, language=None, wrap_lines=True)
        for m in shown:
            st.caption("Re-shown attachment:")
            show_media(m)


messages = chat.messages(sid)
results = {m.meta.get("tool_call_id"): m for m in messages if m.role == TOOL}
reshown: dict[str, list[Message]] = {}
for m in messages:
    if m.role == ATTACHMENT:
        reshown.setdefault(m.meta.get("tool_call_id"), []).append(m)

i = 0
while i < len(messages):
    m = messages[i]
    if m.role == USER:
        with st.chat_message("user"):
            attached = m.meta.get("attached") or []
            removed = m.meta.get("removed") or []
            if attached:
                st.caption("📎 " + ", ".join(e["name"] for e in attached))
            if removed:
                st.caption("✖ removed " + ", ".join(e["name"] for e in removed))
            if m.text:
                st.markdown(m.text)
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
                    st.markdown(m.text)
                if not m.meta.get("tool_calls"):
                    show_citations(m.meta.get("citations") or [])
                    cfg = m.meta.get("config")
                    if cfg:
                        st.caption(f"{cfg}{' · retrieval only' if m.meta.get('retrieval_only') else ''}")
            i += 1

if not messages:
    st.caption("Attach files (drag them onto the box below) and ask about them. Without a language model the"
               " offline assistant answers with the best passages, quoted with file and page.")

prompt = st.chat_input("Ask something, or drop files here", accept_file="multiple", key=f"chat_input_{sid}")
if prompt:
    # The turn goes to a thread before any Streamlit call: a message sent while this one is answered
    # reruns the page, which stops this script at its next Streamlit call -- the turn goes on anyway.
    turn = chat.start_turn(sid, [(f.getvalue(), f.name, f.type) for f in prompt.files or []],
                           (prompt.text or "").strip())
    with st.spinner("Attaching and thinking..." if turn.files else "Thinking..."):
        turn.wait()
    st.session_state["chat_problems"] = turn.problems
    st.rerun()
running = chat.running_turn(sid)
if running is not None:  # sent earlier (or from another tab) and not answered yet
    with st.spinner("Answering the previous message..."):
        running.wait()
    st.session_state["chat_problems"] = running.problems
    st.rerun()

for problem in st.session_state.pop("chat_problems", []):
    st.error(problem)
