"""The command line: ``python -m knowledge`` (or ``knowledge``).

Exit codes: 0 success; 1 a file failed to ingest (the others went on), ``eval`` measured an MRR
below ``--min-mrr``, or ``restore`` could not import a store of another backend (the rest was
restored); 2 bad usage or a configuration/store error (the message says which: a damaged or newer
bundle, a store name already taken, a data folder that is not empty, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from knowledge.errors import KnowledgeError
from knowledge.service.search import SEARCH_MODES


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)  # --data-dir before or after the command
    common.add_argument("--data-dir", default=argparse.SUPPRESS,
                        help="data folder (default: $KNOWLEDGE_DATA_DIR or ./data)")
    p = argparse.ArgumentParser(prog="python -m knowledge", description="A local knowledge workbench.",
                                parents=[common])
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def cmd(name: str, **kw: Any) -> argparse.ArgumentParser:  # every command takes --data-dir too
        return sub.add_parser(name, parents=[common], **kw)

    s = cmd("ingest", help="ingest files and folders into a store (created on the fly)")
    s.add_argument("store")
    s.add_argument("paths", nargs="+", metavar="PATH")
    s.add_argument("--template", help="template for a new store (default: default)")
    s.add_argument("--glob", help="files to take from folders (default: **/*)")
    s.add_argument("--password", help="password for encrypted PDFs")
    s.add_argument("--json", action="store_true", help="print the results as JSON")

    s = cmd("search", help="search a store (meaning and exact words)")
    s.add_argument("store")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5, help="number of results (default 5)")
    s.add_argument("--file", help="only this file (id or name)")
    s.add_argument("--per-file", type=int, metavar="N", help="at most N chunks per file (1: the best files)")
    s.add_argument("--mode", choices=list(SEARCH_MODES),
                   help="ranking: vector + BM25 fused (hybrid), vector only, BM25 only (default: search.mode)")
    s.add_argument("--json", action="store_true", help="print the hits as JSON")

    s = cmd("eval", help="measure a store's retrieval on a question set (recall@n, MRR, nDCG; the run is kept)")
    s.add_argument("store")
    s.add_argument("questions", metavar="SET_FILE_OR_NAME",
                   help="a question file (TSV/CSV: question<TAB>relevant, ';' between alternatives; JSONL)"
                        " or the name of a set stored in the app")
    s.add_argument("--mode", action="append", choices=[*SEARCH_MODES, "all"],
                   help="ranking to evaluate (repeatable; all = the three; default: search.mode)")
    s.add_argument("--k", type=int, default=10, help="depth of each ranking (default 10)")
    s.add_argument("--fusion-weight", type=float, metavar="W",
                   help="hybrid: weight of the vector ranking, 0-1 (default: search.fusion_weight)")
    s.add_argument("--min-mrr", type=float, metavar="X",
                   help="exit 1 when the MRR@k of any mode evaluated is below X (for CI pipelines)")
    s.add_argument("--questions", dest="show_questions", action="store_true",
                   help="also print each question's first relevant rank and its top files")
    s.add_argument("--no-save", action="store_true", help="do not keep the run in the catalog")
    s.add_argument("--json", action="store_true", help="print the runs as JSON")

    # -- folder sync (knowledge/sync.py) ----------------------------------------------------------
    s = cmd("sync", help="keep a store in step with a folder: show the plan (added, changed, renamed, deleted,"
                         " unchanged), then apply it")
    s.add_argument("store")
    s.add_argument("folder")
    s.add_argument("--glob", help="files to take (default: the folder's last glob, else **/*)")
    s.add_argument("--template", help="template for a new store (default: default)")
    s.add_argument("--dry-run", action="store_true", help="print the plan only; change nothing")
    s.add_argument("--watch", action="store_true", help="keep running: apply changes as files change (Ctrl-C ends)")
    s.add_argument("--debounce", type=float, default=None, metavar="S",
                   help="--watch: seconds of quiet after a change before syncing (default 1)")
    s.add_argument("--settle", type=float, default=None, metavar="S",
                   help="--watch: seconds a file's size and time must hold still before it is read (default 1)")
    s.add_argument("--json", action="store_true", help="print the plan and results as JSON (one object per line"
                                                      " with --watch)")
    # -- end of folder sync ----------------------------------------------------------------------

    s = cmd("stores", help="list stores")
    s.add_argument("--json", action="store_true")
    s.add_argument("--all", action="store_true", help="also the chats' own attachment stores (chat-<id>)")
    s = cmd("files", help="list the files of a store")
    s.add_argument("store")
    s.add_argument("--json", action="store_true")
    s = cmd("delete-file", help="remove a file from a store: by name (content with the same bytes under another"
                                " name stays), or by id (the content with all its names)")
    s.add_argument("store")
    s.add_argument("file")
    s = cmd("delete-store", help="delete a store and its chunks")
    s.add_argument("store")
    s = cmd("templates", help="list templates")
    s.add_argument("--json", action="store_true")
    s = cmd("reembed", help="move a store to another template (model) from its stored text")
    s.add_argument("store")
    s.add_argument("template")
    # -- portable knowledge (knowledge/portable/) --
    s = cmd("export", help="write a store to one portable bundle file (.kb: files, chunks, float32 vectors)")
    s.add_argument("store")
    s.add_argument("out", metavar="OUT.kb")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s = cmd("import", help="recreate a store from a bundle, on any backend (vectors reused when the model matches)")
    s.add_argument("bundle", metavar="BUNDLE")
    s.add_argument("--as", dest="as_name", metavar="NAME", help="the new store's name (default: the bundle's)")
    s.add_argument("--template", help="template to create it from (default: the bundle's, on the default backend)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s = cmd("move", help="move a store to another template's backend in place (no re-embedding when the model is the same)")
    s.add_argument("store")
    s.add_argument("--template", required=True)
    s = cmd("backup", help="back up the whole data folder to one archive (catalog, files, every store)")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s = cmd("restore", help="restore a backup into an empty data folder (--data-dir)")
    s.add_argument("backup", metavar="BACKUP")
    s.add_argument("--force", action="store_true",
                   help="replace the data folder's catalog, stored files and memory stores if it holds data")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    # -- end of portable knowledge --
    s = cmd("chat", help="send one chat message (attaching files first) and print the answer with citations")
    s.add_argument("message", nargs="?", help="the message (not with --list)")
    s.add_argument("--session", help="session id or title to continue (default: a new session)")
    s.add_argument("--store", action="append", default=None, metavar="NAME",
                   help="a store the session searches (repeatable; default for a new session: the last"
                        " chat's stores, else chat.default_stores, else the only store); given with"
                        " --session, replaces the session's stores")
    s.add_argument("--list", action="store_true", help="list the chat sessions and exit")
    s.add_argument("--attach", action="append", default=[], metavar="FILE", help="attach a file (repeatable)")
    s.add_argument("--config", help="CHAT config name (default: the session's, else offline)")
    s.add_argument("--json", action="store_true", help="print the reply as JSON")
    s = cmd("llm-configs", help="list the LLM configs (API keys are never shown, only their variable)")
    s.add_argument("--json", action="store_true")
    s = cmd("serve", help="serve the OpenAI-compatible Files + Vector Stores + chat API (FastAPI; its description at /openapi.json)")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; any other"
                                                        " needs KNOWLEDGE_API_KEY)")
    s.add_argument("--port", type=int, default=8900, help="port (default 8900)")
    s = cmd("mcp", help="serve the stores and agent memory as an MCP server (stdio; --http for streamable HTTP)")
    s.add_argument("--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    s.add_argument("--host", default="127.0.0.1", help="with --http: address (default 127.0.0.1; any other"
                                                        " needs KNOWLEDGE_API_KEY)")
    s.add_argument("--port", type=int, default=8901, help="with --http: port (default 8901)")
    cmd("password", help="make the app's password hash for the settings file ([app] password_hash = ...);"
                         " reads the password from the terminal, or from standard input when piped")
    return p


def _table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[str(h) for h in headers]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _resolve_file(wb: Any, store: str, ref: str) -> str:
    files = wb.store_files(store)
    for f in files:
        if ref == f.file_id:
            return f.file_id
    from knowledge.service.indexing import normalize_name

    named = [f for f in files if normalize_name(ref) in {normalize_name(n) for n in f.names}]
    if len(named) == 1:
        return named[0].file_id
    if named:
        raise KnowledgeError(f"{len(named)} files are named {ref!r} in {store!r}; give the file id.")
    raise KnowledgeError(f"No file {ref!r} in store {store!r}.")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if getattr(args, "data_dir", None):
        os.environ["KNOWLEDGE_DATA_DIR"] = args.data_dir
    try:
        return _run(args)
    except KnowledgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        # Python's recipe (docs: "Note on SIGPIPE"): point stdout at devnull so the flush at exit
        # does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool stopped by a closed pipe


def _password() -> int:
    import getpass

    from knowledge.access import hash_password

    if sys.stdin.isatty():
        first = getpass.getpass("Password for the app: ")
        if getpass.getpass("Again: ") != first:
            raise KnowledgeError("The two passwords differ.")
    else:
        first = sys.stdin.readline().rstrip("\r\n")
    if len(first) < 8:
        raise KnowledgeError("Use a password of at least 8 characters.")
    print("[app]")
    print(f'password_hash = "{hash_password(first)}"')
    return 0


def _run(args: argparse.Namespace) -> int:
    from knowledge.service.indexing import expand_paths
    from knowledge.workbench import Workbench

    if args.command == "password":  # needs no workbench
        return _password()
    if args.command == "serve":
        from knowledge.server.app import serve

        serve(args.host, args.port)
        return 0
    if args.command == "mcp":
        from knowledge.server.mcp import run

        run(http=args.http, host=args.host, port=args.port)
        return 0

    if args.command == "restore":  # into a folder that may not exist yet: no workbench first
        return _portable(None, args)
    wb = Workbench()
    try:
        if args.command == "ingest":
            return _ingest(wb, args, expand_paths)
        if args.command == "search":
            where = {"file_id": _resolve_file(wb, args.store, args.file)} if args.file else None
            hits = wb.search(args.store, args.query, k=args.k, where=where, max_per_file=args.per_file,
                             mode=args.mode)
            if args.json:
                from knowledge.tools.knowledge import hit_data

                print(json.dumps([hit_data(h) for h in hits], ensure_ascii=False, indent=2))
            else:
                from knowledge.tools.knowledge import format_hit

                print("\n\n".join(format_hit(i + 1, h) for i, h in enumerate(hits)) or "No results.")
            return 0
        if args.command == "sync":  # folder sync (knowledge/sync.py)
            return _sync(wb, args)
        if args.command == "stores":
            stores = wb.list_stores(internal=args.all)
            if args.json:
                print(json.dumps([{"name": s.record.name, "template": s.record.template, "backend": s.record.backend,
                                   "model": s.record.embedding_model, "dimension": s.record.dimension,
                                   "files": s.files, "chunks": s.chunks} for s in stores], indent=2))
            else:
                print(_table([(s.record.name, s.record.template, s.record.backend, s.record.embedding_model,
                               s.record.dimension, s.files, s.chunks) for s in stores],
                             ["store", "template", "backend", "model", "dim", "files", "chunks"]))
            return 0
        if args.command == "files":
            files = wb.store_files(args.store)
            if args.json:
                print(json.dumps([{"file_id": f.file_id, "name": f.file_name, "aliases": list(f.aliases),
                                   "status": f.status,
                                   "reason": f.reason, "error": f.error, "chunks": f.chunks, "pages": f.pages,
                                   "warnings": f.warnings, "sha256": f.sha256} for f in files], indent=2))
            else:
                print(_table([(f.file_name, ", ".join(f.aliases), f.file_id, f.status, f.chunks, f.pages or "",
                               f.reason or "") for f in files],
                             ["name", "also named (same content)", "file id", "status", "chunks", "pages", "reason"]))
            return 0
        if args.command == "delete-file":
            fid = _resolve_file(wb, args.store, args.file)
            if args.file == fid:  # by id: the content with every name
                n = wb.delete_file(args.store, fid)
                print(f"Removed {args.file} ({n} chunks) from {args.store!r}.")
                return 0
            n = wb.delete_name(args.store, fid, args.file)  # by name: the content goes with its last name
            left = [x.name for x in wb.file_names_of(args.store, fid)]
            print(f"Removed {args.file} ({n} chunks) from {args.store!r}." if not left else
                  f"Removed the name {args.file} from {args.store!r}; its content stays, still named"
                  f" {', '.join(left)} (0 chunks removed).")
            return 0
        if args.command == "delete-store":
            wb.delete_store(args.store)
            print(f"Deleted store {args.store!r}.")
            return 0
        if args.command == "templates":
            tpls = wb.list_templates()
            if args.json:
                print(json.dumps([t.model_dump() for t in tpls], indent=2))
            else:
                print(_table([(t.name, t.backend, t.embedding_model, t.distance,
                               f"{t.max_chunk_size_tokens}/{t.chunk_overlap_tokens}") for t in tpls],
                             ["template", "backend", "model", "distance", "chunk/overlap"]))
            return 0
        if args.command == "reembed":
            rec = wb.reembed(args.store, args.template)
            print(f"Store {rec.name!r} now uses template {rec.template!r} ({rec.embedding_model}, {rec.dimension} dims).")
            return 0
        if args.command in ("export", "import", "move", "backup"):
            return _portable(wb, args)
        if args.command == "chat":
            return _chat(wb, args)
        if args.command == "eval":
            return _eval(wb, args)
        if args.command == "llm-configs":
            configs = wb.llm_configs().list()
            if args.json:
                print(json.dumps([c.public() for c in configs], indent=2))
            else:
                print(_table([(c.name, c.type, c.provider, c.model or "", c.base_url or "",
                               c.api_key_env or "", ",".join(sorted(c.effective_capabilities())))
                              for c in configs],
                             ["name", "type", "provider", "model", "base url", "key variable", "reads"]))
            return 0
        raise AssertionError(args.command)
    finally:
        wb.close()


def _portable(wb: Any, args: argparse.Namespace) -> int:
    """export / import / move / backup / restore (:mod:`knowledge.portable`)."""
    import time

    from knowledge import portable

    shown = {"stage": None, "at": 0.0}

    def progress(stage: str, fraction: float) -> None:  # a line when the stage changes, else every 2 s
        now = time.monotonic()
        if stage != shown["stage"] or now - shown["at"] >= 2.0:
            print(f"  {stage}: {fraction:.0%}", file=sys.stderr)
            shown.update(stage=stage, at=now)

    if args.command == "export":
        r = wb.portable.export_store(args.store, args.out, progress=progress)
        if args.json:
            print(json.dumps({"store": r.store, "path": str(r.path), "files": r.files, "chunks": r.chunks,
                              "bytes": r.bytes, "seconds": round(r.seconds, 3), "skipped": r.skipped}, indent=2))
        else:
            print(f"Exported {r.store!r}: {r.files} files, {r.chunks} chunks, {r.bytes / 1e6:.1f} MB to {r.path}"
                  f" in {r.seconds:.1f} s.")
            if r.skipped:
                print(f"Left out (being ingested): {', '.join(r.skipped)}.")
        return 0
    if args.command == "import":
        r = wb.portable.import_bundle(args.bundle, as_name=args.as_name, template=args.template, progress=progress)
        if args.json:
            print(json.dumps({"store": r.store, "template": r.template, "backend": r.backend, "files": r.files,
                              "chunks": r.chunks, "reused_vectors": r.reused_vectors,
                              "reembedded_from": r.reembedded_from, "seconds": round(r.seconds, 3)}, indent=2))
        else:
            print(r.message)
        return 0
    if args.command == "move":
        before = wb.get_store(args.store)
        rec = wb.portable.move_store(args.store, args.template, progress=progress)
        how = "vectors copied" if rec.embedding_model == before.embedding_model else f"re-embedded with {rec.embedding_model}"
        print(f"Moved {rec.name!r} from {before.backend} to {rec.backend} (template {rec.template!r}; {how}).")
        return 0
    if args.command == "backup":
        r = wb.portable.backup(args.out, progress=progress)
        if args.json:
            print(json.dumps({"path": str(r.path), "bytes": r.bytes, "copied": r.copied, "bundled": r.bundled,
                              "files": r.files, "seconds": round(r.seconds, 3)}, indent=2))
        else:
            print(f"Backed up the data folder to {r.path} ({r.bytes / 1e6:.1f} MB): the catalog, {r.files} stored"
                  f" files, {len(r.copied)} memory-backend collections, {len(r.bundled)} stores of other backends"
                  f" as bundles, in {r.seconds:.1f} s.")
        return 0
    if args.command == "restore":
        from knowledge.config import load_settings

        settings = load_settings()
        r = portable.restore(settings, args.backup, force=args.force, progress=progress)
        if r.bundles:  # stores of other backends: imported by a workbench on the restored folder
            from knowledge.workbench import Workbench

            wb = Workbench(settings)
            try:
                r = wb.portable.import_restored(r, progress=progress)
            finally:
                wb.close()
        if args.json:
            print(json.dumps({"copied": r.copied, "imported": r.imported, "failed": r.failed, "files": r.files,
                              "seconds": round(r.seconds, 3)}, indent=2))
        else:
            print(f"Restored {r.files} stored files, {len(r.copied)} memory-backend collections and"
                  f" {len(r.imported)} stores of other backends in {r.seconds:.1f} s.")
            for store, reason in r.failed.items():
                print(f"Not restored: {store!r}: {reason}", file=sys.stderr)
        return 1 if r.failed else 0
    raise AssertionError(args.command)
def _sync(wb: Any, args: argparse.Namespace) -> int:
    """``sync STORE FOLDER``: the plan, then (unless --dry-run) each change as it is applied; with
    --watch, every later round until Ctrl-C. Exit 1 when a file failed, as ``ingest``."""
    import threading

    from knowledge import sync as fs

    glob = args.glob
    if glob is None and wb.store_exists(args.store):  # the folder's last glob, so a plain re-run keeps it
        known = {f.folder: f.glob for f in wb.syncs.synced_folders(args.store)}
        glob = known.get(fs.folder_key(args.folder))
    syncer = wb.syncs.folder(args.store, args.folder, glob, template=args.template)

    def emit(obj: dict[str, Any]) -> None:
        print(json.dumps(obj, ensure_ascii=False), flush=True)

    def show_result(r: Any) -> None:
        if not args.json:
            print(("  ok      " if r.ok else "  FAILED  ") + r.message, flush=True)

    def show_report(report: Any) -> None:
        if args.json:
            emit({"event": "applied", **report.plan.to_json(), "applied": report.counts(),
                  "results": [{"action": r.item.action, "path": r.item.path, "old_path": r.item.old_path,
                               "ok": r.ok, "message": r.message,
                               "file_id": (r.ingest.file_id if r.ingest else r.item.file_id),
                               "chunks": r.ingest.chunks if r.ingest else 0} for r in report.results]})
        else:
            c = report.counts()
            print(f"Applied: {', '.join(f'{n} {k}' for k, n in c.items())}.", flush=True)

    plan = syncer.plan()
    if args.json:
        if args.dry_run:
            emit({"event": "plan", **plan.to_json()})
    else:
        from knowledge.service.indexing import skipped_text

        note = skipped_text(plan.skipped)
        if note:
            print(note, file=sys.stderr)
        print("\n".join(plan.lines()), flush=True)
    if args.dry_run:
        return 0
    if not args.watch:
        report = syncer.apply(plan, on_result=show_result)
        show_report(report)
        return 1 if report.failed else 0
    stop = threading.Event()
    if not args.json:
        print(f"Watching {syncer.folder} (Ctrl-C to stop).", file=sys.stderr, flush=True)

    def on_report(report: Any) -> None:
        for r in report.results:
            show_result(r)
        show_report(report)

    def on_waiting(items: list) -> None:
        if args.json:
            emit({"event": "waiting", "paths": [i.path for i in items]})
        else:
            print(f"  waiting for {', '.join(i.path for i in items)} (still being written)", file=sys.stderr,
                  flush=True)

    def on_error(exc: Exception) -> None:
        print(f"error: {exc}", file=sys.stderr, flush=True)

    kwargs = {k: v for k, v in (("debounce", args.debounce), ("settle", args.settle)) if v is not None}
    try:
        syncer.watch(stop, on_report=on_report, on_waiting=on_waiting, on_error=on_error, **kwargs)
    except KeyboardInterrupt:
        stop.set()
    print("Stopped watching.", file=sys.stderr)
    return 0


def _chat(wb: Any, args: argparse.Namespace) -> int:
    from knowledge.chat import ChatService

    chat = ChatService(wb)
    if args.list:
        sessions = chat.sessions()
        rows = [{"session": s.id, "title": s.title, "config": s.config or "offline", "stores": s.stores,
                 "attachments": len(chat.attachments(s.id)), "messages": len(chat.messages(s.id)),
                 "updated": s.updated.isoformat(timespec="seconds")} for s in sessions]
        if args.json:
            print(json.dumps(rows, ensure_ascii=False, indent=2))
        else:
            print(_table([(r["session"], r["title"][:40], r["config"], ", ".join(r["stores"]), r["attachments"],
                           r["messages"], r["updated"]) for r in rows],
                         ["session", "title", "config", "stores", "files", "messages", "updated"]))
        return 0
    if args.message is None:
        raise KnowledgeError("Give a message to send (or --list to see the sessions).")
    if not args.message.strip() and not args.attach:
        raise KnowledgeError("Type a message (or attach a file).")
    if args.session:
        found = [s for s in chat.sessions() if args.session in (s.id, s.title)]
        if not found:
            raise KnowledgeError(f"No chat session with the id or title {args.session!r}.")
        session = found[0]
        if args.config:
            chat.set_config(session.id, args.config)
        if args.store is not None:
            session = chat.set_stores(session.id, args.store)
    else:
        session = chat.create_session(config=args.config, stores=args.store)
    for gone in chat.knowledge(session.id).dropped:
        print(f"note: store {gone!r} no longer exists; removed from this session", file=sys.stderr)
    attached = [chat.attach(session.id, path) for path in args.attach]
    reply = chat.send(session.id, args.message)
    if args.json:
        print(json.dumps({"session": session.id, "config": reply.config, "retrieval_only": reply.retrieval_only,
                          "attached": [{"file_id": a.file_id, "name": a.name, "kind": a.kind} for a in attached],
                          "answer": reply.text,
                          "stores": chat.session(session.id).stores,
                          "citations": [{k: c.get(k) for k in ("source", "file_name", "file_id", "page",
                                                               "chunk_index", "heading", "char_start", "char_end",
                                                               "score", "text")} for c in reply.citations],
                          "tool_calls": [{"name": r.name, "arguments": r.arguments, "ok": r.ok}
                                         for r in reply.tool_runs]}, ensure_ascii=False, indent=2))
        return 0
    print(reply.text)
    if reply.citations:
        print("\nSources:")
        for i, c in enumerate(reply.citations, 1):
            page = f", page {c['page']}" if c.get("page") is not None else ""
            source = c.get("source")
            store = f" — {source}" if source and source != "attachments" else ""
            print(f"  [{i}] {c.get('file_name')}{page}{store} (score {c.get('score', 0):.3f})")
    print(f"\nsession: {session.id} (continue with --session {session.id})", file=sys.stderr)
    return 0


def _eval(wb: Any, args: argparse.Namespace) -> int:
    from knowledge import evaluation as ev

    qset = wb.evaluations.load_question_set(args.questions)
    modes = list(dict.fromkeys(m for m in (args.mode or [wb.settings.search.mode])
                               for m in (ev.MODES if m == "all" else [m])))
    runs = []
    for mode in modes:
        run = wb.evaluations.evaluate(args.store, qset, mode, args.k, fusion_weight=args.fusion_weight)
        if not args.no_save:
            wb.evaluations.save_run(run)
        runs.append(run)
    names = ev.metric_names(args.k)
    if args.json:
        print(json.dumps([{"id": r.id, "set": r.set_name, "store": r.store, "mode": r.mode, "k": r.k,
                           "template": r.template, "model": r.embedding_model, "chunking": r.chunking,
                           "search": r.search, "metrics": {m: round(r.metrics[m], 6) for m in names},
                           "latency_ms": {a: round(b, 2) for a, b in r.latency_ms.items()},
                           "started": r.started.isoformat(timespec="seconds"),
                           "questions": [{"question": q.question, "relevant": q.relevant, "first_rank": q.first_rank,
                                          "latency_ms": round(q.latency_ms, 2),
                                          "files": [h.file_name for h in q.hits]} for q in r.questions]}
                          for r in runs], ensure_ascii=False, indent=2))
    else:
        first = runs[0]
        chunk = f", chunks {first.chunking['size']}/{first.chunking['overlap']}" if first.chunking else ""
        print(f"{args.store}: {len(qset.questions)} questions of {qset.name!r}, template {first.template}"
              f" ({first.embedding_model}{chunk})\n")
        print(_table([[r.mode] + [f"{r.metrics[m]:.3f}" for m in names]
                      + [f"{r.latency_ms['mean']:.0f}", f"{r.latency_ms['p95']:.0f}"] for r in runs],
                     ["mode", *names, "ms/question", "p95 ms"]))
        if args.show_questions:
            for r in runs:
                print(f"\n{r.mode}:")
                print(_table([[q.first_rank or "-", q.question[:70],
                               ", ".join(dict.fromkeys(str(h.file_name) for h in q.hits[:3]))[:80]]
                              for q in r.questions], ["rank", "question", "top files"]))
    if args.min_mrr is not None:
        low = [r for r in runs if r.mrr < args.min_mrr]
        for r in low:
            print(f"MRR@{r.k} of {r.mode} is {r.mrr:.3f}, below --min-mrr {args.min_mrr}", file=sys.stderr)
        if low:
            return 1
    return 0


def _ingest(wb: Any, args: argparse.Namespace, expand_paths: Any) -> int:
    from tqdm import tqdm

    from knowledge.service.indexing import skipped_text

    skipped: dict[str, int] = {}
    files = expand_paths(args.paths, args.glob, skipped)
    note = skipped_text(skipped)
    if note:
        print(note, file=sys.stderr)
    if not files:
        print("No files matched.", file=sys.stderr)
        return 1
    from knowledge.ingest.chunker import plan_chunking

    record = wb.store_record(args.store)
    tpl = wb.template(args.template or (record.template if record else "default"))
    for note in plan_chunking(wb.embedder(tpl.embedding_model), tpl.max_chunk_size_tokens,
                              tpl.chunk_overlap_tokens).notes:
        print(f"note: {note}", file=sys.stderr)
    from knowledge.service.indexing import file_names

    names = file_names(files)
    results = []
    bar = tqdm(total=len(files), unit="file", disable=args.json or not sys.stderr.isatty(), file=sys.stderr)
    width = min(60, max([len("file")] + [len(names.get(p, str(p))) for p in files]))
    columns = (("file", width), ("outcome", 9), ("chunks", 6), ("pages", 5), ("time", 8))

    def line(cells: Sequence[str], last: str) -> str:
        return "  ".join(str(c)[:w].ljust(w) for c, (_, w) in zip(cells, columns)) + "  " + last

    if not args.json:  # one line per file as it finishes, not a table at the end
        print(line([h for h, _ in columns], "reason / warnings"), flush=True)
        print(line(["-" * w for _, w in columns], "-" * 17), flush=True)
    from knowledge.outcomes import needs_password
    from knowledge.service.jobs import FileProgress

    states: dict[str, FileProgress] = {}

    def progress(name: str, stage: str, fraction: float) -> None:
        """OCR is slow: one line (or the bar's note) per page read, with the time left."""
        fp = states.setdefault(name, FileProgress(name))
        fp.update(stage, fraction)
        if not stage.startswith("OCR") or args.json:
            return
        eta = fp.eta_seconds()
        note = f"{name[:40]}: {stage}" + (f", about {max(1, round(eta))} s left" if eta is not None else "")
        if bar.disable:
            print(note, file=sys.stderr, flush=True)
        else:
            bar.set_postfix_str(note)

    for path in files:
        bar.set_postfix_str(str(names.get(path, getattr(path, "name", path)))[:40])
        for r in wb.ingest_paths(args.store, [path], template=args.template, password=args.password, names=names,
                                 progress=progress):
            results.append(r)
            if not args.json:
                text = line([r.name, r.outcome, r.chunks or "", r.pages or "", f"{r.seconds:.2f}s"],
                            (r.message + (" (use --password)" if needs_password(r) and not args.password else ""))
                            if not r.ok else "; ".join(r.warnings))
                if bar.disable:
                    print(text.rstrip(), flush=True)
                else:
                    bar.write(text.rstrip(), file=sys.stdout)
        bar.update(1)
    bar.close()
    failed = [r for r in results if not r.ok]
    if args.json:
        print(json.dumps([{"name": r.name, "outcome": r.outcome, "message": r.message, "error": r.error,
                           "file_id": r.file_id,
                           "chunks": r.chunks, "pages": r.pages, "warnings": r.warnings,
                           "seconds": round(r.seconds, 3)} for r in results], ensure_ascii=False, indent=2))
    else:
        from knowledge.outcomes import Outcome

        counts = ", ".join(f"{n} {o}" for o in Outcome if (n := sum(r.outcome == o for r in results)))
        print(f"\n{len(results)} file{'' if len(results) == 1 else 's'}: {counts or 'none'};"
              f" {sum(r.chunks for r in results)} chunks in the store from them.")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
