"""The REST API's rows (migration 9): what every ``knowledge serve`` process on one catalog shares.

``api_vector_stores``: each store's API fields (``metadata``, ``expires_after``,
``chunking_strategy``, ``description``) as one JSON object. ``api_store_files``: each file added
to a store through the API, by its ingest job (``ingest_jobs``' batch and place; the newest add of
a file wins). ``api_file_batches`` and ``api_file_batch_parts``: a file batch (``vsfb_...``), its
files in order and the ingest batches it was split into. The status, result, attributes,
chunking and notes of a file come from its job and batch rows (:mod:`knowledge.catalog.jobs`), so
any process answers with the same values, during and after ingestion and after restarts.
The functions take a catalog (``cursor()``, ``dialect``) and run the same SQL on both engines.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from knowledge.catalog.jobs import FINAL, QueueCatalog


def _loads(value: Any) -> Any:
    """A JSON column's value: DuckDB returns the text, psycopg the decoded value."""
    return json.loads(value) if isinstance(value, str) else value


# -- stores ---------------------------------------------------------------------------------------


def store_meta(catalog: QueueCatalog, store: str) -> dict[str, Any]:
    """The API fields of ``store`` (``{}`` when none were set)."""
    with catalog.cursor() as cur:
        row = cur.execute("SELECT meta FROM api_vector_stores WHERE store = ?", [store]).fetchone()
    return dict(_loads(row[0]) or {}) if row else {}


def put_store_meta(catalog: QueueCatalog, store: str, meta: Mapping[str, Any] | None) -> None:
    """Set the API fields of ``store`` (``None``: forget them), in one transaction."""
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        try:
            cur.execute("DELETE FROM api_vector_stores WHERE store = ?", [store])
            if meta is not None:
                cur.execute(
                    "INSERT INTO api_vector_stores (store, meta, updated) VALUES (?, ?, now())",
                    [store, json.dumps(dict(meta), ensure_ascii=False)],
                )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise


def import_store_meta(catalog: QueueCatalog, entries: Mapping[str, Mapping[str, Any]]) -> int:
    """Add ``{store: fields}`` for the stores that have no API fields yet (one transaction; the
    catalog's own values win). Returns how many stores were added."""
    added = 0
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        try:
            for store, meta in entries.items():
                if cur.execute("SELECT 1 FROM api_vector_stores WHERE store = ?", [store]).fetchone():
                    continue
                cur.execute(
                    "INSERT INTO api_vector_stores (store, meta, updated) VALUES (?, ?, now())",
                    [store, json.dumps(dict(meta), ensure_ascii=False)],
                )
                added += 1
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
    return added


def forget_store(catalog: QueueCatalog, store: str) -> None:
    """Drop every API row of ``store`` (its fields, its files added, its file batches)."""
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        try:
            cur.execute("DELETE FROM api_vector_stores WHERE store = ?", [store])
            cur.execute("DELETE FROM api_store_files WHERE store = ?", [store])
            cur.execute(
                "DELETE FROM api_file_batch_parts WHERE file_batch IN (SELECT id FROM api_file_batches WHERE store = ?)",
                [store],
            )
            cur.execute("DELETE FROM api_file_batches WHERE store = ?", [store])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise


# -- files added to a store -------------------------------------------------------------------------


@dataclass(frozen=True)
class AddedFile:
    """A file added to a store through the API, with its ingest job's row: ``status`` (queued,
    running, done, failed, cancelled, interrupted), ``result`` (the file's result as a dict once
    final), ``options`` (the batch's: ``attributes``, ``chunking_strategy``, ``chunking_notes``),
    ``jobs`` (how many files its ingest batch has), ``created`` (when it was added)."""

    store: str
    file_id: str
    batch_id: str
    seq: int
    created: datetime | None
    job_id: str
    name: str
    status: str
    reason: str | None
    result: dict[str, Any] | None
    options: dict[str, Any] = field(default_factory=dict)
    jobs: int = 1

    @property
    def running(self) -> bool:
        """The file has no result yet (queued or being ingested)."""
        return self.status not in FINAL


def add_files(catalog: QueueCatalog, store: str, entries: Iterable[tuple[str, str, int]]) -> None:
    """Record ``(file_id, batch_id, seq)``: these files were added to ``store`` as those jobs (an
    earlier add of the same file is replaced), in one transaction."""
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        try:
            for file_id, batch_id, seq in entries:
                cur.execute("DELETE FROM api_store_files WHERE store = ? AND file_id = ?", [store, file_id])
                cur.execute(
                    "INSERT INTO api_store_files (store, file_id, batch_id, seq, created) VALUES (?, ?, ?, ?, now())",
                    [store, file_id, batch_id, int(seq)],
                )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise


def forget_file(catalog: QueueCatalog, store: str, file_id: str) -> None:
    """Forget that ``file_id`` was added to ``store`` (it was removed from the store)."""
    with catalog.cursor() as cur:
        cur.execute("DELETE FROM api_store_files WHERE store = ? AND file_id = ?", [store, file_id])


_ADDED = (
    "SELECT f.store, f.file_id, f.batch_id, f.seq, f.created, j.id, j.name, j.status, j.reason, j.result,"
    " b.options, (SELECT count(*) FROM ingest_jobs k WHERE k.batch_id = f.batch_id)"
    " FROM api_store_files f JOIN ingest_jobs j ON j.batch_id = f.batch_id AND j.seq = f.seq"
    " JOIN ingest_batches b ON b.id = f.batch_id"
)


def added_files(catalog: QueueCatalog, store: str, file_ids: Sequence[str] | None = None) -> dict[str, AddedFile]:
    """``{file_id: AddedFile}`` of the files added to ``store`` through the API (of ``file_ids``
    only, when given), oldest add first."""
    sql, args = _ADDED + " WHERE f.store = ?", [store]
    if file_ids is not None:
        if not file_ids:
            return {}
        sql += f" AND f.file_id IN ({', '.join('?' * len(file_ids))})"
        args += list(file_ids)
    with catalog.cursor() as cur:
        rows = cur.execute(sql + " ORDER BY f.created, f.file_id", args).fetchall()
    out = {}
    for r in rows:
        out[r[1]] = AddedFile(
            store=r[0],
            file_id=r[1],
            batch_id=r[2],
            seq=int(r[3]),
            created=r[4],
            job_id=r[5],
            name=r[6],
            status=r[7],
            reason=r[8],
            result=_loads(r[9]),
            options=dict(_loads(r[10]) or {}),
            jobs=int(r[11]),
        )
    return out


# -- file batches ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileBatch:
    """A file batch: its ``store``, its distinct ``file_ids`` in order, the ingest ``batch_ids`` it
    was split into, ``cancelled`` (a cancel was asked for one of them, from any process)."""

    id: str
    store: str
    file_ids: list[str]
    batch_ids: list[str]
    created: datetime | None
    cancelled: bool = False


def add_file_batch(
    catalog: QueueCatalog, batch_id: str, store: str, file_ids: Sequence[str], ingest_batches: Sequence[str]
) -> None:
    """Record the file batch ``batch_id`` of ``store`` and the ingest batches it maps to (one transaction)."""
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        try:
            cur.execute(
                "INSERT INTO api_file_batches (id, store, file_ids, created) VALUES (?, ?, ?, now())",
                [batch_id, store, json.dumps(list(file_ids))],
            )
            for part in dict.fromkeys(ingest_batches):
                cur.execute("INSERT INTO api_file_batch_parts (file_batch, batch_id) VALUES (?, ?)", [batch_id, part])
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise


def file_batch(catalog: QueueCatalog, batch_id: str) -> FileBatch | None:
    """The file batch ``batch_id``, or ``None``."""
    with catalog.cursor() as cur:
        row = cur.execute("SELECT id, store, file_ids, created FROM api_file_batches WHERE id = ?", [batch_id]).fetchone()
        if row is None:
            return None
        parts = cur.execute(
            "SELECT p.batch_id, coalesce(b.cancel_requested, FALSE) FROM api_file_batch_parts p"
            " LEFT JOIN ingest_batches b ON b.id = p.batch_id WHERE p.file_batch = ?"
            " ORDER BY p.batch_id",
            [batch_id],
        ).fetchall()
    return FileBatch(
        id=row[0],
        store=row[1],
        file_ids=list(_loads(row[2]) or []),
        batch_ids=[p[0] for p in parts],
        created=row[3],
        cancelled=any(bool(p[1]) for p in parts),
    )


__all__ = [
    "AddedFile",
    "FileBatch",
    "add_file_batch",
    "add_files",
    "added_files",
    "file_batch",
    "forget_file",
    "forget_store",
    "import_store_meta",
    "put_store_meta",
    "store_meta",
]
