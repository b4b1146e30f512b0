"""``chat`` (one message, attachments first, the answer with its citations; ``--list`` the
sessions) and ``llm-configs`` (the LLM configs, never their keys)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from knowledge.chat import ChatReply, ChatService, Session
from knowledge.chat.sources import where_text
from knowledge.cli.common import Commands, command, table
from knowledge.errors import KnowledgeError
from knowledge.workbench import Workbench

#: The fields of a citation that ``chat --json`` prints.
CITATION_FIELDS = (
    "n",
    "source",
    "file_name",
    "file_id",
    "page",
    "chunk_index",
    "chunks",
    "heading",
    "char_start",
    "char_end",
    "used_at",
    "score",
    "text",
    "sentences",
)


def add_parser(sub: Commands) -> None:
    s = command(sub, "chat", help="send one chat message (attaching files first) and print the answer with citations")
    s.add_argument("message", nargs="?", help="the message (not with --list)")
    s.add_argument("--session", help="session id or title to continue (default: a new session)")
    s.add_argument(
        "--store",
        action="append",
        default=None,
        metavar="NAME",
        help="a store the session searches (repeatable; default for a new session: the last"
        " chat's stores, else chat.default_stores, else the only store); given with"
        " --session, replaces the session's stores",
    )
    s.add_argument("--list", action="store_true", help="list the chat sessions and exit")
    s.add_argument("--attach", action="append", default=[], metavar="FILE", help="attach a file (repeatable)")
    s.add_argument("--config", help="chat model config name (default: the session's, else offline)")
    s.add_argument("--json", action="store_true", help="print the reply as JSON")
    s.set_defaults(func=cmd_chat, chats=True)
    s = command(sub, "llm-configs", help="list the LLM configs (API keys are never shown, only their variable)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_llm_configs)


def cmd_chat(wb: Workbench, args: argparse.Namespace, chat: ChatService) -> int:
    if args.list:
        return _list_sessions(chat, args)
    if args.message is None:
        raise KnowledgeError("Give a message to send (or --list to see the sessions).")
    if not args.message.strip() and not args.attach:
        raise KnowledgeError("Type a message (or attach a file).")
    session = _session(chat, args)
    for gone in chat.knowledge(session.id).dropped:
        print(f"note: store {gone!r} no longer exists; removed from this session", file=sys.stderr)
    attached = [chat.attach(session.id, path) for path in args.attach]
    reply = chat.send(session.id, args.message)
    if args.json:
        print(
            json.dumps(
                {
                    "session": session.id,
                    "config": reply.config,
                    "retrieval_only": reply.retrieval_only,
                    "attached": [{"file_id": a.file_id, "name": a.name, "kind": a.kind} for a in attached],
                    "answer": reply.text,
                    "stores": chat.session(session.id).stores,
                    "citations": [{k: c.get(k) for k in CITATION_FIELDS} for c in reply.citations],
                    "unknown_markers": reply.unknown_markers,
                    "also_searched": [
                        {k: c.get(k) for k in CITATION_FIELDS if k not in ("n", "used_at")} for c in reply.also_searched
                    ],
                    "tool_calls": [{"name": r.name, "arguments": r.arguments, "ok": r.ok} for r in reply.tool_runs],
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    print_reply(reply)
    print(f"\nsession: {session.id} (continue with --session {session.id})", file=sys.stderr)
    return 0


def _session(chat: ChatService, args: argparse.Namespace) -> Session:
    """The session --session names (its config and stores changed as asked), else a new one.
    Raises KnowledgeError when no session has that id or title."""
    if not args.session:
        return chat.create_session(config=args.config, stores=args.store)
    found = [s for s in chat.sessions() if args.session in (s.id, s.title)]
    if not found:
        raise KnowledgeError(f"No chat session with the id or title {args.session!r}.")
    session = found[0]
    if args.config:
        chat.set_config(session.id, args.config)
    if args.store is not None:
        session = chat.set_stores(session.id, args.store)
    return session


def print_reply(reply: ChatReply) -> None:
    """The answer, its Sources (the passages it cites or quotes, numbered as its markers) and, in a
    section of their own, the passages also searched."""
    print(reply.text)

    def line(label: str, c: dict[str, Any]) -> str:
        source = c.get("source")
        store = f" [store {source}]" if source and source != "attachments" else ""
        return f"  {label}{where_text(c)}{store} (similarity {c.get('score', 0):.3f})"

    if reply.citations:
        print("\nSources:")
        for i, c in enumerate(reply.citations, 1):
            print(line(f"[{c.get('n', i)}] ", c))
    if reply.also_searched:
        print("\nAlso searched (not used in the answer):")
        for c in reply.also_searched:
            print(line("- ", c))


def _list_sessions(chat: ChatService, args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = [
        {
            "session": s.id,
            "title": s.title,
            "config": s.config or "offline",
            "stores": s.stores,
            "attachments": len(chat.attachments(s.id)),
            "messages": len(chat.messages(s.id)),
            "updated": s.updated.isoformat(timespec="seconds"),
        }
        for s in chat.sessions()
    ]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False, indent=2))
    else:
        print(
            table(
                [
                    (
                        r["session"],
                        r["title"][:40],
                        r["config"],
                        ", ".join(r["stores"]),
                        r["attachments"],
                        r["messages"],
                        r["updated"],
                    )
                    for r in rows
                ],
                ["session", "title", "config", "stores", "files", "messages", "updated"],
            )
        )
    return 0


def cmd_llm_configs(wb: Workbench, args: argparse.Namespace) -> int:
    configs = wb.llm_configs().list()
    if args.json:
        print(json.dumps([c.public() for c in configs], indent=2))
    else:
        print(
            table(
                [
                    (
                        c.name,
                        c.type,
                        c.provider,
                        c.model or "",
                        c.base_url or "",
                        c.api_key_env or "",
                        ",".join(sorted(c.effective_capabilities())),
                    )
                    for c in configs
                ],
                ["name", "type", "provider", "model", "base url", "key variable", "reads"],
            )
        )
    return 0
