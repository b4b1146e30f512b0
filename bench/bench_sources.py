"""Sources (knowledge/sources/): a first sync and an incremental sync (1% of the files changed) of N
small files (default 10,000, ~200 bytes each, 500 to a folder) from a real SMB server (Samba's smbd,
tests/helpers/samba.py) and a real WebDAV server (WsgiDAV on cheroot in this process,
tests/helpers/webdav.py), with the bundled model (``--fake``: the 32-d fake embedder, to time the
sync's own work).

Per kind it prints files/s of the first sync, the time of a sync with nothing changed (the listing
alone), and the incremental sync's time against the first. The baseline, in the same run: the same
files synced from a folder on this machine (knowledge/sync.py), first and 1% changed.

    python bench/bench_sources.py [--files N] [--kinds smb,webdav] [--fake]

Samba needs root (its users are Unix accounts) and Debian's samba package. Prints figures; asserts
nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _system(data: Path, fake: bool) -> Any:
    from knowledge.config import load_settings
    from knowledge.system import System

    settings = load_settings(data_dir=data)
    if fake:
        from knowledge.embeddings.fake import HashEmbedder

        emb = HashEmbedder(dimension=32, max_tokens=128)
        return System(settings, lambda _model: emb)
    return System(settings)


def _changed(i: int) -> bytes:
    return f"Document {i} was edited for the incremental sync: kilo lima mike november oscar.".encode()


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call()
    return time.perf_counter() - started, out


def _three_syncs(
    label: str, run: Callable[[], Any], change: Callable[[list[str]], None], paths: list[str], counts: Callable[[Any], str]
) -> tuple[float, float, float]:
    first, r1 = _timed(run)
    idle, r2 = _timed(run)
    step = max(1, len(paths) // max(1, len(paths) // 100))
    edited = paths[::step][: max(1, len(paths) // 100)]
    change(edited)
    incremental, r3 = _timed(run)
    n = len(paths)
    print(f"{label:<22} first {first:8.1f} s  {n / first:7.1f} files/s   ({counts(r1)})")
    print(f"{'':<22} nothing changed {idle:6.2f} s   ({counts(r2)})")
    print(
        f"{'':<22} 1% changed ({len(edited)} files) {incremental:6.2f} s = {incremental / first:.3f} of the first"
        f"   ({counts(r3)})"
    )
    return first, idle, incremental


def _source_counts(report: Any) -> str:
    words = ", ".join(f"{v} {k}" for k, v in report.counts.items() if v)
    return words if report.ok else f"{report.run.status}: {report.reason}; {words}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--kinds", default="smb,webdav")
    ap.add_argument("--fake", action="store_true", help="the 32-d fake embedder instead of the bundled model")
    ap.add_argument("--no-baseline", action="store_true", help="skip the local folder sync baseline")
    args = ap.parse_args()
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]

    from tests.helpers.samba import small_files

    files = list(small_files(args.files))
    paths = [p for p, _ in files]
    print(
        f"{args.files:,} files of ~200 bytes, 500 to a folder; {'fake' if args.fake else 'bundled'} embedder;"
        f" {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if not args.no_baseline:
            folder = root / "local"
            for p, data in files:
                (folder / p).parent.mkdir(parents=True, exist_ok=True)
                (folder / p).write_bytes(data)
            system = _system(root / "data-local", args.fake)
            sync = system.syncs.folder("local", folder)

            def change_local(edited: list[str]) -> None:
                for p in edited:
                    (folder / p).write_bytes(_changed(paths.index(p)))

            _three_syncs(
                "folder (baseline)",
                sync.run,
                change_local,
                paths,
                lambda r: ", ".join(f"{v} {k}" for k, v in r.counts().items() if v),
            )
            system.close()

        for kind in kinds:
            if kind == "webdav":
                _webdav(root, files, paths, args.fake)
            elif kind == "smb":
                _smb(root, files, paths, args.fake)
            else:
                sys.exit(f"No benchmark for the kind {kind!r} (smb, webdav).")


def _webdav(root: Path, files: list[tuple[str, bytes]], paths: list[str], fake: bool) -> None:
    from tests.helpers.webdav import DAV_PASSWORD, DAV_USER, dav_server

    with dav_server(root / "dav") as server:
        share = server.root / "Team"
        for p, data in files:
            (share / p).parent.mkdir(parents=True, exist_ok=True)
            (share / p).write_bytes(data)
        system = _system(root / "data-webdav", fake)
        system.sources.add(
            "dav", "webdav", "dav", {"url": server.folder_url("Team"), "username": DAV_USER, "password": DAV_PASSWORD}
        )

        def change(edited: list[str]) -> None:
            later = time.time() + 2  # WsgiDAV's ETag holds the mtime in whole seconds
            for p in edited:
                (share / p).write_bytes(_changed(paths.index(p)))
                os.utime(share / p, (later, later))

        _three_syncs("webdav (WsgiDAV)", lambda: system.sources.run("dav"), change, paths, _source_counts)
        system.close()


def _smb(root: Path, files: list[tuple[str, bytes]], paths: list[str], fake: bool) -> None:
    from tests.helpers.samba import start_samba_with_files

    (root / "smb").mkdir()
    samba = start_samba_with_files(root / "smb", len(files))
    try:
        system = _system(root / "data-smb", fake)
        system.sources.add("smb", "smb", "smb", samba.config())

        def change(edited: list[str]) -> None:
            for p in edited:
                samba.write(p, _changed(paths.index(p)))

        _three_syncs("smb (Samba smbd)", lambda: system.sources.run("smb"), change, paths, _source_counts)
        system.close()
    finally:
        samba.remove()


if __name__ == "__main__":
    main()
