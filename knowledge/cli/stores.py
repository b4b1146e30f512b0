"""``stores``, ``files``, ``file-readers``, ``delete-file``, ``delete-store``, ``templates``: what the
data folder holds, who may read a file, and taking things out of it. Each lists only what the acting
account (``--user``) may read: a file whose readers leave them out is not in ``files``, not counted
by ``stores``, and ``file-readers``/``delete-file`` answer it as a file the store does not hold."""

from __future__ import annotations

import argparse
import json

from knowledge.cli.common import Commands, command, resolve_file, table
from knowledge.errors import InvalidArgument
from knowledge.people.policy import describe_readers
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "stores", help="list stores")
    s.add_argument("--json", action="store_true")
    s.add_argument("--all", action="store_true", help="also the chats' own attachment stores (chat-<id>)")
    s.set_defaults(func=cmd_stores)
    s = command(sub, "files", help="list the files of a store")
    s.add_argument("store")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_files)
    s = command(
        sub,
        "file-readers",
        help="show who may read a file of a store, or set them (`files readers STORE FILE` is the same)",
    )
    s.add_argument("store")
    s.add_argument("file", help="the file's id or one of its names")
    who = s.add_mutually_exclusive_group()
    who.add_argument(
        "--set",
        dest="readers",
        metavar="READERS",
        help="who may read it besides the store's owners: users and groups, e.g. 'group:hr, user:ana'"
        " (needs write access to the store)",
    )
    who.add_argument("--everyone", action="store_true", help="let everyone who may read the store read it (the default)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_file_readers)
    s = command(
        sub,
        "delete-file",
        help="remove a file from a store: by name (content with the same bytes under"
        " another name stays), or by id (the content with all its names)",
    )
    s.add_argument("store")
    s.add_argument("file")
    s.set_defaults(func=cmd_delete_file)
    s = command(sub, "delete-store", help="delete a store and its chunks")
    s.add_argument("store")
    s.set_defaults(func=cmd_delete_store)
    s = command(sub, "templates", help="list templates")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_templates)


def cmd_stores(wb: Workbench, args: argparse.Namespace) -> int:
    stores = wb.list_stores(internal=args.all)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": s.record.name,
                        "template": s.record.template,
                        "backend": s.record.backend,
                        "model": s.record.embedding_model,
                        "dimension": s.record.dimension,
                        "files": s.files,
                        "chunks": s.chunks,
                    }
                    for s in stores
                ],
                indent=2,
            )
        )
    else:
        print(
            table(
                [
                    (
                        s.record.name,
                        s.record.template,
                        s.record.backend,
                        s.record.embedding_model,
                        s.record.dimension,
                        s.files,
                        s.chunks,
                    )
                    for s in stores
                ],
                ["store", "template", "backend", "model", "dim", "files", "chunks"],
            )
        )
    return 0


#: The longest first warning the files table shows (``--json`` has them all, whole).
WARNING_CHARS = 60


def warnings_cell(warnings: list[str]) -> str:
    """A file's warnings in one cell: their count and the first, cut to :data:`WARNING_CHARS`
    characters (``"2: 1 system file skipped (__MACOSX, …"``); ``""`` for none."""
    if not warnings:
        return ""
    first = " ".join(warnings[0].split())
    first = first if len(first) <= WARNING_CHARS else first[: WARNING_CHARS - 1] + "…"
    return f"{len(warnings)}: {first}"


def cmd_files(wb: Workbench, args: argparse.Namespace) -> int:
    files = wb.store_files(args.store)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "file_id": f.file_id,
                        "name": f.file_name,
                        "aliases": list(f.aliases),
                        "status": f.status,
                        "reason": f.reason,
                        "error": f.error,
                        "chunks": f.chunks,
                        "pages": f.pages,
                        "warnings": f.warnings,
                        "sha256": f.sha256,
                        "readers": list(f.readers) if f.readers is not None else None,
                    }
                    for f in files
                ],
                indent=2,
            )
        )
    else:
        print(
            table(
                [
                    (
                        f.file_name,
                        ", ".join(f.aliases),
                        f.file_id,
                        f.status,
                        f.chunks,
                        f.pages or "",
                        f.reason or "",
                        warnings_cell(f.warnings),
                    )
                    for f in files
                ],
                ["name", "also named (same content)", "file id", "status", "chunks", "pages", "reason", "warnings"],
            )
        )
    return 0


def cmd_file_readers(wb: Workbench, args: argparse.Namespace) -> int:
    """Print who may read the file (``None``/"everyone who may read the store": it inherits the
    store's sharing), or set them with ``--set`` / ``--everyone``."""
    fid = resolve_file(wb, args.store, args.file)
    if args.readers is not None or args.everyone:
        if args.readers is not None and not args.readers.strip():
            raise InvalidArgument("--set needs readers, e.g. 'group:hr, user:ana'; --everyone lifts a restriction.")
        readers = wb.set_file_readers(args.store, fid, None if args.everyone else args.readers)
    else:
        readers = wb.file_readers(args.store, fid)
    rec = wb.file_record(args.store, fid)
    name = rec.file_name if rec is not None else fid
    if args.json:
        print(
            json.dumps(
                {
                    "store": args.store,
                    "file_id": fid,
                    "name": name,
                    "readers": list(readers) if readers is not None else None,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    owners = "" if readers is None else " (and the store's owners)"
    print(f"{name} ({fid}) in {args.store!r}: read by {describe_readers(readers)}{owners}.")
    return 0


def cmd_delete_file(wb: Workbench, args: argparse.Namespace) -> int:
    """By id: the content with every name. By name: that name; the content goes with its last name."""
    fid = resolve_file(wb, args.store, args.file)
    if args.file == fid:
        n = wb.delete_file(args.store, fid)
        print(f"Removed {args.file} ({n} chunk{'' if n == 1 else 's'}) from {args.store!r}.")
        return 0
    n = wb.delete_name(args.store, fid, args.file)
    left = [x.name for x in wb.file_names_of(args.store, fid)]
    print(
        f"Removed {args.file} ({n} chunk{'' if n == 1 else 's'}) from {args.store!r}."
        if not left
        else f"Removed the name {args.file} from {args.store!r}; its content stays, still named"
        f" {', '.join(left)} (0 chunks removed)."
    )
    return 0


def cmd_delete_store(wb: Workbench, args: argparse.Namespace) -> int:
    wb.delete_store(args.store)
    print(f"Deleted store {args.store!r}.")
    return 0


def cmd_templates(wb: Workbench, args: argparse.Namespace) -> int:
    tpls = wb.list_templates()
    if args.json:
        print(json.dumps([t.model_dump() for t in tpls], indent=2))
    else:
        print(
            table(
                [
                    (t.name, t.backend, t.embedding_model, t.distance, f"{t.max_chunk_size_tokens}/{t.chunk_overlap_tokens}")
                    for t in tpls
                ],
                ["template", "backend", "model", "distance", "chunk/overlap"],
            )
        )
    return 0
