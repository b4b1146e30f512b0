"""Export: a store to one bundle file (docs/bundle-format.md), streamed -- one file's chunks plus one
block in memory, file bytes copied in 1 MiB pieces. The lexical (BM25) index is not exported: the
target rebuilds it from the chunks' text."""

from __future__ import annotations

import json
import os
import time
import zipfile
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from knowledge.catalog import DONE, FAILED
from knowledge.portable.bundle import (
    BLOCK,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    Progress,
    archive,
    copy_from,
    report,
    write_member,
)
from knowledge.portable.parts import Parts
from knowledge.vectorstore.base import Point


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What :func:`export_store` wrote: the bundle's path, its size in bytes, files and chunks
    exported, files left out (being ingested: ``skipped``), and the seconds it took."""

    store: str
    path: Path
    files: int
    chunks: int
    bytes: int
    seconds: float
    skipped: list[str] = field(default_factory=list)


def export_store(
    parts: Parts,
    store: str,
    out: str | os.PathLike,
    *,
    progress: Progress | None = None,
    hidden: Collection[str] = (),
) -> ExportResult:
    """Write store ``store`` to the bundle ``out`` (see the module docstring).

    The bundle is written to ``out + ".part"`` and renamed when complete, so ``out`` is a whole
    bundle or absent (a killed export leaves a ``.part`` that import rejects as truncated). The
    store's lock is held while it is read (ingestion into it waits), so files and chunks agree.
    Files being ingested (pending, processing) are left out and named in ``skipped``. The files
    ``hidden`` (ids: those the exporting person may not read, access per document) are left out
    without a word, their chunks too; each file entry carries its ``readers`` (``None``: inherits).

    Raises:
        StoreNotFound; StorageError (the output cannot be written); the backend's errors.
    """
    started = time.perf_counter()
    record = parts.stores.get(store)
    tpl = parts.stores.template_of(record)
    out = Path(out)
    members: dict[str, dict[str, Any]] = {}
    coll = parts.stores.local_collection_of(record)  # a per-machine store of a shared catalog: a way out
    with archive(out, "bundle") as zf, parts.stores.store_lock(store):
        records = [r for r in parts.catalog.files(store) if r.file_id not in hidden]
        skipped = [r.file_name for r in records if r.status not in (DONE, FAILED)]
        records = [r for r in records if r.status in (DONE, FAILED)]
        counts = coll.facet("file_id") if coll.collection_exists() else {}
        counts = {fid: n for fid, n in counts.items() if str(fid) not in hidden}
        total = sum(counts.values())
        entries = []
        for i, r in enumerate(records):
            stored = parts.files.find(r.file_id)
            member = f"files/{i:06d}.bin" if stored is not None else None
            if member is not None:
                with parts.files.content(r.file_id) as src:
                    members[member] = write_member(zf, member, copy_from(src))
            entries.append(
                {
                    "member": member,
                    "file_id": r.file_id,
                    "name": r.file_name,
                    "content_type": stored.content_type if stored else None,
                    "size": r.size,
                    "sha256": r.sha256,
                    "status": str(r.status),
                    "reason": r.reason,
                    "error": r.error,
                    "chunks": r.chunks,
                    "pages": r.pages,
                    "warnings": r.warnings,
                    "aliases": list(getattr(r, "aliases", ())),
                    "attributes": parts.indexer.file_attributes(store, r.file_id) if r.status == DONE else {},
                    "readers": list(r.readers) if r.readers is not None else None,
                }
            )
            report(progress, "files", 0.2 * (i + 1) / max(1, len(records)))
        blocks: list[dict[str, Any]] = []
        pending: list[Point] = []
        written = 0

        def flush() -> None:
            nonlocal pending, written
            n = len(blocks)
            lines, vec = f"chunks/{n:06d}.jsonl", f"chunks/{n:06d}.npy"
            body = b"".join(orjson.dumps({"id": p.id, "payload": _fresh(p.payload)}) + b"\n" for p in pending)
            members[lines] = write_member(zf, lines, lambda w: w.write(body), deflate=True)
            matrix = np.ascontiguousarray(np.vstack([p.vector for p in pending]), dtype="<f4")
            members[vec] = write_member(zf, vec, lambda w: np.save(w, matrix, allow_pickle=False))
            blocks.append({"payloads": lines, "vectors": vec, "count": len(pending)})
            written += len(pending)
            pending = []
            report(progress, "chunks", 0.2 + 0.8 * written / max(1, total))

        for file_id in sorted(counts, key=str):
            for p in coll.scroll(where={"file_id": file_id}, with_vectors=True):
                pending.append(p)
                if len(pending) >= BLOCK:
                    flush()
        if pending:
            flush()
        spec = tpl.model_dump()
        spec.pop("backend", None)
        own = parts.stores.settings_of(store)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "created": datetime.now(UTC).isoformat(),
            "store": {
                "name": record.name,
                "template": spec,
                "embedding_model": record.embedding_model,
                "dimension": record.dimension,
                "distance": record.distance,
                "source_backend": record.backend,
                "settings": {"description": own.description, "score_threshold": own.score_threshold},
            },
            "files": entries,
            "blocks": blocks,
            "chunks": written,
            "members": members,
        }
        zf.writestr(MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1), zipfile.ZIP_DEFLATED)
    report(progress, "done", 1.0)
    return ExportResult(store, out, len(entries), written, out.stat().st_size, time.perf_counter() - started, skipped)


def _fresh(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` without its ``readers`` (an import sets them from the file entries; left in, a
    member's bundle would tell of restricted files), its non-ASCII strings copied. orjson (like any
    C code asking CPython for a string's UTF-8) makes CPython keep a UTF-8 copy *on the string object*: on the backend's own
    strings (the memory backend's payloads are shared, not copied) that copy would stay for as long
    as the store is loaded -- about the size of its text, 70 MB at 100,000 chunks. On a copy it goes
    with the block."""
    return {
        k: v.encode().decode() if isinstance(v, str) and not v.isascii() else v for k, v in payload.items() if k != "readers"
    }
