"""``reembed``, ``export``, ``import``, ``move``, ``backup``, ``restore``: a store moved to another
model or backend, written to or read from one bundle file, and the whole data folder backed up and
restored (:mod:`knowledge.portable`)."""

from __future__ import annotations

import argparse
import json
import sys

from knowledge import portable
from knowledge.cli.common import Commands, command, progress_lines
from knowledge.config import load_settings
from knowledge.workbench import Workbench


def add_parser(sub: Commands) -> None:
    s = command(sub, "reembed", help="move a store to another template (model) from its stored text")
    s.add_argument("store")
    s.add_argument("template")
    s.set_defaults(func=cmd_reembed)
    s = command(sub, "export", help="write a store to one portable bundle file (.kb: files, chunks, float32 vectors)")
    s.add_argument("store")
    s.add_argument("out", metavar="OUT.kb")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=cmd_export)
    s = command(sub, "import", help="recreate a store from a bundle, on any backend (vectors reused when the model matches)")
    s.add_argument("bundle", metavar="BUNDLE")
    s.add_argument("--as", dest="as_name", metavar="NAME", help="the new store's name (default: the bundle's)")
    s.add_argument("--template", help="template to create it from (default: the bundle's, on the default backend)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=cmd_import)
    s = command(
        sub, "move", help="move a store to another template's backend in place (no re-embedding when the model is the same)"
    )
    s.add_argument("store")
    s.add_argument("--template", required=True)
    s.set_defaults(func=cmd_move)
    s = command(sub, "backup", help="back up the whole data folder to one archive (catalog, files, every store)")
    s.add_argument("out", metavar="OUT")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=cmd_backup)
    s = command(sub, "restore", help="restore a backup into an empty data folder (--data-dir)")
    s.add_argument("backup", metavar="BACKUP")
    s.add_argument(
        "--force",
        action="store_true",
        help="replace the data folder's catalog, stored files and memory stores if it holds data",
    )
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=cmd_restore, workbench=False)  # into a folder that may not exist yet


def cmd_reembed(wb: Workbench, args: argparse.Namespace) -> int:
    rec = wb.reembed(args.store, args.template)
    print(f"Store {rec.name!r} now uses template {rec.template!r} ({rec.embedding_model}, {rec.dimension} dims).")
    return 0


def cmd_export(wb: Workbench, args: argparse.Namespace) -> int:
    r = wb.portable.export_store(args.store, args.out, progress=progress_lines())
    if args.json:
        print(
            json.dumps(
                {
                    "store": r.store,
                    "path": str(r.path),
                    "files": r.files,
                    "chunks": r.chunks,
                    "bytes": r.bytes,
                    "seconds": round(r.seconds, 3),
                    "skipped": r.skipped,
                },
                indent=2,
            )
        )
    else:
        print(
            f"Exported {r.store!r}: {r.files} files, {r.chunks} chunks, {r.bytes / 1e6:.1f} MB to {r.path}"
            f" in {r.seconds:.1f} s."
        )
        if r.skipped:
            print(f"Left out (being ingested): {', '.join(r.skipped)}.")
    return 0


def cmd_import(wb: Workbench, args: argparse.Namespace) -> int:
    r = wb.portable.import_bundle(args.bundle, as_name=args.as_name, template=args.template, progress=progress_lines())
    if args.json:
        print(
            json.dumps(
                {
                    "store": r.store,
                    "template": r.template,
                    "backend": r.backend,
                    "files": r.files,
                    "chunks": r.chunks,
                    "reused_vectors": r.reused_vectors,
                    "reembedded_from": r.reembedded_from,
                    "seconds": round(r.seconds, 3),
                },
                indent=2,
            )
        )
    else:
        print(r.message)
    return 0


def cmd_move(wb: Workbench, args: argparse.Namespace) -> int:
    before = wb.get_store(args.store)
    rec = wb.portable.move_store(args.store, args.template, progress=progress_lines())
    how = "vectors copied" if rec.embedding_model == before.embedding_model else f"re-embedded with {rec.embedding_model}"
    print(f"Moved {rec.name!r} from {before.backend} to {rec.backend} (template {rec.template!r}; {how}).")
    return 0


def cmd_backup(wb: Workbench, args: argparse.Namespace) -> int:
    r = wb.portable.backup(args.out, progress=progress_lines())
    if args.json:
        print(
            json.dumps(
                {
                    "path": str(r.path),
                    "bytes": r.bytes,
                    "copied": r.copied,
                    "bundled": r.bundled,
                    "files": r.files,
                    "seconds": round(r.seconds, 3),
                },
                indent=2,
            )
        )
    else:
        print(
            f"Backed up the data folder to {r.path} ({r.bytes / 1e6:.1f} MB): the catalog, {r.files} stored"
            f" files, {len(r.copied)} memory-backend collections, {len(r.bundled)} stores of other backends"
            f" as bundles, in {r.seconds:.1f} s."
        )
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """Unpack the backup, then, when it held stores of other backends, import their bundles with a
    workbench opened on the restored folder (the one command that opens its own). Exit 1 when a
    store could not be restored (the rest was)."""
    settings = load_settings()
    progress = progress_lines()
    r = portable.restore(settings, args.backup, force=args.force, progress=progress)
    if r.bundles:
        wb = Workbench(settings)
        try:
            r = wb.portable.import_restored(r, progress=progress)
        finally:
            wb.close()
    if args.json:
        print(
            json.dumps(
                {
                    "copied": r.copied,
                    "imported": r.imported,
                    "failed": r.failed,
                    "files": r.files,
                    "seconds": round(r.seconds, 3),
                },
                indent=2,
            )
        )
    else:
        print(
            f"Restored {r.files} stored files, {len(r.copied)} memory-backend collections and"
            f" {len(r.imported)} stores of other backends in {r.seconds:.1f} s."
        )
        for store, reason in r.failed.items():
            print(f"Not restored: {store!r}: {reason}", file=sys.stderr)
    return 1 if r.failed else 0
