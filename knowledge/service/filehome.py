"""Where the files live, and moving them to another file store (``knowledge files move``).

The catalog records the file store that holds the files (migration 14, table ``file_store_home``): its
backend and non-secret location (:func:`location_of`: the folder; the database; the bucket, prefix,
endpoint and region -- never a password or key). Every process opens its files through
:class:`HomedFileStore`, which reads that record (cached :data:`HOME_TTL` seconds) and uses the store it
names -- opened from the process's own settings with the record's location put in
(:func:`settings_for`) -- so a move reaches processes still running with the old settings:

* **At start** (:func:`check_home`): no record yet -> the settings' store is recorded. A record naming
  another store while files are stored -> :class:`~knowledge.errors.ConfigError` with the command to
  run (``knowledge files move --to s3``), never a process showing 0 files. Settings naming the store
  a move is copying to, or the one just moved from (until ``--cleanup``), start and follow the record.
* **A move** (:func:`move_files`): the record takes the target (phase ``copying``); every file is
  copied BY ITS ID (``FileStore.save(file_id=...)``), streamed, and verified by reading the copy back
  and comparing its SHA-256; verified copies are noted (``file_store_copies``) so an interrupted move
  resumes where it stopped. Then phase ``switching``, a final pass over the files saved meanwhile, and
  the flip: ``location`` becomes the target and ``previous`` the source, in one transaction.
* **Saves during a move**: after each save a process re-reads the record (uncached). Phase
  ``copying``: it copies the file to the target too when it can (the final pass would otherwise).
  Phase ``switching`` or already flipped: it must copy it itself -- its save may have come after the
  final pass listed the source -- and an upload whose copy fails is undone and fails with the reason
  (the client retries), so none is left behind in the old store.
* **Reads** go to the recorded store and fall back to the other one (the target during a move, the
  previous store after one): a process with a stale record, or a job queued before the flip, still
  finds every file by its old id.
* **Cleanup** (``--delete-old`` or ``--cleanup``): only after the flip, only files whose copy is
  verified in the new store are deleted from the old one; then ``previous`` is forgotten.
"""

from __future__ import annotations

import builtins
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from knowledge.catalog import Catalog, one_row
from knowledge.config import Settings
from knowledge.errors import BackendUnavailable, ConfigError, FileNotFoundInStore, InvalidArgument, KnowledgeError
from knowledge.filestore import FileStore, StoredFile, open_file_store
from knowledge.filestore.base import CHUNK_SIZE, Source

log = logging.getLogger(__name__)

#: Seconds a process trusts the record it read (a move's phase reaches every process within this).
HOME_TTL = 2.0
#: The backends whose location this module knows how to describe and open from the record.
BUILT_IN = ("filesystem", "postgresql", "s3")

COPYING, SWITCHING, SETTLED = "copying", "switching", "settled"


# -- locations --------------------------------------------------------------------------------------


def _pg_url(settings: Settings) -> str | None:
    url = (settings.file_store.url or "").strip() or (settings.catalog.url or "")
    return str(url).strip() or None


def location_of(settings: Settings, backend: str | None = None) -> dict[str, Any]:
    """The non-secret location of the file store ``backend`` (default ``file_store.backend``) as
    ``settings`` name it: ``{"backend": "filesystem", "dir": "files"}`` (relative to the data folder
    when the setting is), ``{"backend": "postgresql", "database": "kn", "server": "host:5432"}``,
    ``{"backend": "s3", "bucket": ..., "prefix": ..., "endpoint": ..., "region": ...}``; a plugin's is
    its name only. Never a password or a key."""
    fs = settings.file_store
    backend = backend or fs.backend
    if backend == "filesystem":
        return {"backend": backend, "dir": str(fs.dir) if not Path(fs.dir).is_absolute() else str(settings.file_store_dir)}
    if backend == "postgresql":
        url = _pg_url(settings)
        parts = conninfo_to_dict(url) if url else {}
        host = parts.get("host") or "localhost"
        own = (settings.file_store.url or "").strip()
        return {
            "backend": backend,
            "database": parts.get("dbname") or parts.get("user") or "",
            "server": f"{host}:{parts.get('port') or 5432}",
            # in the catalog's own database: it follows the catalog (a restore under another name)
            "catalog": not own or own == (settings.catalog.url or ""),
        }
    if backend == "s3":
        return {
            "backend": backend,
            "bucket": (fs.s3_bucket or "").strip(),
            "prefix": fs.s3_prefix.strip("/"),
            "endpoint": fs.s3_endpoint_url or "",
            "region": fs.s3_region or "",
        }
    return {"backend": backend}


def same_store(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two locations name the same store: the same backend and folder / database / bucket and
    prefix (a server's or endpoint's address may differ between machines and is not compared)."""
    if a is None or b is None:
        return False
    if a.get("backend") == b.get("backend") == "postgresql" and a.get("catalog") and b.get("catalog"):
        return True
    keys = {"filesystem": ("dir",), "postgresql": ("database",), "s3": ("bucket", "prefix")}.get(a.get("backend", ""), ())
    return a.get("backend") == b.get("backend") and all(a.get(k) == b.get(k) for k in keys)


def describe(location: Mapping[str, Any]) -> str:
    """A location in words, for messages: ``the s3 file store (bucket 'team', prefix 'a', at http://...)``."""
    backend = location.get("backend", "?")
    if backend == "filesystem":
        return f"the filesystem file store (folder {location.get('dir')!r})"
    if backend == "postgresql":
        where = "the catalog's database, " if location.get("catalog") else ""
        return f"the postgresql file store ({where}database {location.get('database')!r} on {location.get('server')})"
    if backend == "s3":
        prefix = f", prefix {location['prefix']!r}" if location.get("prefix") else ""
        return f"the s3 file store (bucket {location.get('bucket')!r}{prefix} at {location.get('endpoint') or 'AWS S3'})"
    return f"the {backend} file store"


def settings_for(settings: Settings, location: Mapping[str, Any]) -> Settings:
    """``settings`` with ``file_store`` pointing at ``location``: the record's folder, database or
    bucket and prefix; secrets (the database password, the S3 keys) stay the process's own (its
    settings, or the standard PostgreSQL / AWS variables). The endpoint and region of the process
    are kept when its settings name the same bucket, else the record's are taken."""
    fs = settings.file_store
    backend = str(location.get("backend"))
    update: dict[str, Any] = {"backend": backend}
    if backend == "filesystem":
        update["dir"] = Path(str(location.get("dir") or "files"))
    elif backend == "postgresql" and location.get("catalog") and settings.catalog.url:
        update["url"] = None  # the catalog's own database, wherever this process's catalog.url says
    elif backend == "postgresql":
        url = _pg_url(settings)
        if url and conninfo_to_dict(url).get("dbname") != location.get("database"):
            url = make_conninfo(url, dbname=str(location.get("database")))
        elif url is None:
            host, _, port = str(location.get("server") or "localhost:5432").rpartition(":")
            url = make_conninfo("", host=host, port=port, dbname=str(location.get("database")))
        update["url"] = url
    elif backend == "s3":
        update.update(s3_bucket=location.get("bucket"), s3_prefix=location.get("prefix") or "")
        if (fs.s3_bucket or "").strip() != location.get("bucket"):
            update.update(s3_endpoint_url=location.get("endpoint") or None, s3_region=location.get("region") or None)
    return settings.model_copy(update={"file_store": fs.model_copy(update=update)})


# -- the record -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Home:
    """The ``file_store_home`` row: where the files are (``location``), a move's target and phase,
    the store moved from (until cleanup), and the move's progress (``{"copied", "total", ...}``)."""

    location: dict[str, Any]
    moving_to: dict[str, Any] | None = None
    phase: str = SETTLED
    previous: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None
    updated: datetime | None = None

    def others(self) -> builtins.list[dict[str, Any]]:
        """The other stores a file may be in: the move's target, then the previous store."""
        return [x for x in (self.moving_to, self.previous) if x is not None and not same_store(x, self.location)]


def _loads(text: Any) -> Any:
    return json.loads(text) if text else None


def read_home(catalog: Catalog) -> Home | None:
    """The record, or ``None`` when none was made yet. Raises what the catalog raises."""
    with catalog.cursor() as cur:
        row = cur.execute(
            "SELECT location, moving_to, phase, previous, progress, updated FROM file_store_home WHERE id = 1"
        ).fetchone()
    if row is None:
        return None
    return Home(_loads(row[0]), _loads(row[1]), row[2], _loads(row[3]), _loads(row[4]), row[5])


def _write_home(catalog: Catalog, home: Home) -> None:
    """Insert or replace the record in one statement."""
    with catalog.cursor() as cur:
        cur.execute(
            "INSERT INTO file_store_home (id, location, moving_to, phase, previous, progress, updated)"
            " VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET location = excluded.location,"
            " moving_to = excluded.moving_to, phase = excluded.phase, previous = excluded.previous,"
            " progress = excluded.progress, updated = excluded.updated",
            [
                json.dumps(home.location),
                json.dumps(home.moving_to) if home.moving_to else None,
                home.phase,
                json.dumps(home.previous) if home.previous else None,
                json.dumps(home.progress) if home.progress is not None else None,
                datetime.now(UTC),
            ],
        )


def _update_home(
    catalog: Catalog,
    assignments: str,
    args: builtins.list[Any],
    *,
    where: str = "moving_to IS NOT NULL",
    where_args: builtins.list[Any] | None = None,
) -> bool:
    """``UPDATE file_store_home SET <assignments>, updated = now WHERE id = 1 AND <where>`` in one
    statement; whether the row matched (a move's steps apply only in the state they expect)."""
    with catalog.cursor() as cur:
        rows = cur.execute(
            f"UPDATE file_store_home SET {assignments}, updated = ? WHERE id = 1 AND {where} RETURNING id",
            [*args, datetime.now(UTC), *(where_args or [])],
        ).fetchall()
    return bool(rows)


def _set_progress(catalog: Catalog, progress: dict[str, Any]) -> None:
    with catalog.cursor() as cur:
        cur.execute(
            "UPDATE file_store_home SET progress = ?, updated = ? WHERE id = 1", [json.dumps(progress), datetime.now(UTC)]
        )


def _files_stored(
    settings: Settings, catalog: Catalog, location: Mapping[str, Any], opener: Callable[[Settings], FileStore]
) -> bool:
    """Whether files are stored at ``location``: a store of the catalog holds one, or the store there
    has one (a chat's attachment, a file saved and not yet ingested). A store that cannot be opened
    counts as holding files: not knowing is no reason to leave them behind."""
    with catalog.cursor() as cur:
        if cur.execute("SELECT 1 FROM store_files LIMIT 1").fetchone() is not None:
            return True
    try:
        store = opener(settings_for(settings, location))
    except KnowledgeError:
        return True
    try:
        return bool(store.list())
    finally:
        store.close()


def _check_unrecorded(
    settings: Settings, catalog: Catalog, wanted: Mapping[str, Any], opener: Callable[[Settings], FileStore]
) -> None:
    """Before the first record: when the catalog's stores hold files, some of them (up to 3 of the
    newest) must be in the store the settings name, else the settings were switched before the
    record existed (an upgrade together with a new file store) and the start is refused.

    Raises:
        ConfigError: none of the sampled files is in the settings' store.
    """
    with catalog.cursor() as cur:
        rows = cur.execute("SELECT file_id FROM store_files GROUP BY file_id ORDER BY max(updated) DESC LIMIT 3").fetchall()
    if not rows:
        return
    store = opener(settings)
    try:
        if any(store.find(r[0]) is not None for r in rows):
            return
    finally:
        store.close()
    raise ConfigError(
        f"The stores of this workbench hold files (such as {rows[0][0]}) that are not in {describe(wanted)},"
        " the file store these settings name: the files were saved in another one. Start once with the"
        " file store settings they were saved with (the catalog then records that store), then move them"
        f" with `{_move_command(wanted)}`."
    )


def _move_command(location: Mapping[str, Any]) -> str:
    return f"knowledge files move --to {location.get('backend')}"


def check_home(settings: Settings, catalog: Catalog, opener: Callable[[Settings], FileStore] = open_file_store) -> Home:
    """The record, checked against ``settings`` at a process's start (see the module docstring).

    Returns:
        The record (made from ``settings`` when there was none, or when no file is stored yet).

    Raises:
        ConfigError: the settings name another store than the record while files are stored; the
            message names both and the command to run.
    """
    wanted = location_of(settings)
    home = read_home(catalog)
    if home is None:  # the first start (of this version): record the settings' store -- if it holds the files
        _check_unrecorded(settings, catalog, wanted, opener)
        home = Home(wanted)
        _write_home(catalog, home)
        return home
    if same_store(home.location, wanted) or any(same_store(x, wanted) for x in (home.moving_to, home.previous)):
        return home
    if home.moving_to is None and not _files_stored(settings, catalog, home.location, opener):
        home = Home(wanted)  # nothing stored: the settings decide
        _write_home(catalog, home)
        return home
    raise ConfigError(
        f"The files of this workbench are in {describe(home.location)}, but these settings name"
        f" {describe(wanted)}: started like this it would show none of the stored files. To move the"
        f" files there, keep these settings and run `{_move_command(wanted)}` (as an admin); to keep"
        f" them where they are, set file_store.backend (KNOWLEDGE_FILE_STORE__BACKEND) back to"
        f" {home.location.get('backend')!r} with that store's settings."
    )


# -- the file store every process uses --------------------------------------------------------------


class HomedFileStore(FileStore):
    """The file store the catalog's record names, followed as it moves (see the module docstring).

    Args:
        settings: this process's settings (their secrets open whatever store the record names).
        catalog: where the record is.
        opener: ``opener(settings) -> FileStore`` (default :func:`knowledge.filestore.open_file_store`).
        check: check the record against ``settings`` first (:func:`check_home`); ``False`` for the
            command that moves the files.

    Raises (constructor):
        ConfigError: see :func:`check_home`. BackendUnavailable: the store cannot be opened.
    """

    name = "homed"

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        *,
        opener: Callable[[Settings], FileStore] = open_file_store,
        check: bool = True,
    ) -> None:
        self.settings, self.catalog, self._opener = settings, catalog, opener
        self._lock = threading.Lock()
        self._stores: builtins.list[tuple[dict[str, Any], FileStore]] = []
        self._token: tuple | None = None
        self._check = check
        try:
            self._home = self._checked()
        except BackendUnavailable as exc:  # the catalog's server is down: checked at the first use instead
            log.warning("The file store's record cannot be read yet (%s); it is checked at the first use.", exc)
            self._home, self._read_at = Home(location_of(settings)), float("-inf")
            self._check_pending = True
            return
        self._read_at, self._check_pending = time.monotonic(), False
        self.current()  # opened now: a store that cannot be reached is said at start

    def _checked(self) -> Home:
        if self._check:
            return check_home(self.settings, self.catalog, self._opener)
        return read_home(self.catalog) or Home(location_of(self.settings))

    def __repr__(self) -> str:
        return f"HomedFileStore({self._home.location!r})"

    # -- the record and the stores ------------------------------------------------------------------
    def home(self, *, fresh: bool = False) -> Home:
        """The record, re-read when older than :data:`HOME_TTL` seconds (or ``fresh``)."""
        with self._lock:
            if not fresh and time.monotonic() - self._read_at < HOME_TTL:
                return self._home
            pending = self._check_pending
        if pending:  # the start's check, deferred while the catalog was down (raises what it raises)
            home = self._checked()
            with self._lock:
                self._home, self._read_at, self._check_pending = home, time.monotonic(), False
            return home
        token = self.catalog.change_token() if self.catalog.dialect == "duckdb" else None
        # DuckDB: the file unchanged -> no turn taken for a read
        home = self._home if token is not None and token == self._token else read_home(self.catalog) or self._home
        with self._lock:
            self._home, self._read_at, self._token = home, time.monotonic(), token
        return home

    def store_at(self, location: Mapping[str, Any]) -> FileStore:
        """The store at ``location``, opened once (from the process's settings with the location put in).

        Raises:
            BackendUnavailable, ConfigError: it cannot be opened (no credentials, no server, ...).
        """
        with self._lock:
            for loc, store in self._stores:
                if same_store(loc, location):
                    return store
        if same_store(location, location_of(self.settings)):
            store = self._opener(self.settings)
        else:
            store = self._opener(settings_for(self.settings, location))
        with self._lock:
            self._stores.append((dict(location), store))
        return store

    def current(self) -> FileStore:
        """The store the record names now."""
        return self.store_at(self.home().location)

    def _fallbacks(self, home: Home) -> builtins.list[FileStore]:
        out = []
        for loc in home.others():
            try:
                out.append(self.store_at(loc))
            except KnowledgeError as exc:
                log.warning("The file store %s cannot be opened to look for a file there: %s", describe(loc), exc)
        return out

    # -- the contract -------------------------------------------------------------------------------
    def save(
        self,
        name: str,
        content_type: str | None,
        stream: Source,
        *,
        max_bytes: int | None = None,
        metadata: Mapping[str, Any] | None = None,
        file_id: str | None = None,
        created: datetime | None = None,
    ) -> StoredFile:
        """Save into the recorded store; during or just after a move, copy the file to the store the
        files go to as well (see the module docstring). Errors: :meth:`FileStore.save`'s, and
        ``BackendUnavailable`` when a copy required after the switch fails (the save is undone)."""
        home = self.home()
        store = self.store_at(home.location)
        record = store.save(
            name, content_type, stream, max_bytes=max_bytes, metadata=metadata, file_id=file_id, created=created
        )
        now = self.home(fresh=True)
        if same_store(now.location, home.location) and now.moving_to is None:
            return record
        target = now.location if not same_store(now.location, home.location) else now.moving_to
        assert target is not None
        required = not same_store(now.location, home.location) or now.phase == SWITCHING
        try:
            copy_file(store, self.store_at(target), record)
        except BaseException as exc:
            if not required:
                log.warning("%s: the copy to %s waits for the move's final pass: %s", record.id, describe(target), exc)
                return record
            store.delete(record.id)
            raise
        return record

    def find(self, file_id: str) -> StoredFile | None:
        home = self.home()
        found = self.store_at(home.location).find(file_id)
        if found is None:
            for other in self._fallbacks(home):
                found = other.find(file_id)
                if found is not None:
                    break
        return found

    def content(self, file_id: str) -> BinaryIO:
        home = self.home()
        try:
            return self.store_at(home.location).content(file_id)
        except FileNotFoundInStore:
            for other in self._fallbacks(home):
                try:
                    return other.content(file_id)
                except FileNotFoundInStore:
                    continue
            raise

    def list(self) -> builtins.list[StoredFile]:
        return self.current().list()

    def find_by_sha256(self, sha256: str) -> builtins.list[StoredFile]:
        return self.current().find_by_sha256(sha256)

    def delete(self, file_id: str) -> bool:
        """Delete from the recorded store and from the move's other store (no copy comes back)."""
        home = self.home()
        gone = self.store_at(home.location).delete(file_id)
        for other in self._fallbacks(home):
            gone = other.delete(file_id) or gone
        return gone

    def close(self) -> None:
        with self._lock:
            stores, self._stores = self._stores, []
        for _, store in stores:
            store.close()


# -- copying ---------------------------------------------------------------------------------------


def _digest(store: FileStore, file_id: str) -> tuple[str, int]:
    """SHA-256 and size of ``file_id``'s content in ``store``, read in chunks."""
    hasher, size = hashlib.sha256(), 0
    with store.content(file_id) as fh:
        while chunk := fh.read(CHUNK_SIZE):
            hasher.update(chunk)
            size += len(chunk)
    return hasher.hexdigest(), size


def copy_file(source: FileStore, target: FileStore, record: StoredFile) -> None:
    """Copy ``record`` from ``source`` into ``target`` under the same id, name, type, metadata and
    creation time, streamed, then read the copy back and check its SHA-256 and size. A copy already
    in ``target`` is checked the same way and replaced when it differs.

    Raises:
        StoreCorrupt: the copy read back does not match (it is deleted from ``target``).
        BackendUnavailable, FileNotFoundInStore: either store's errors.
    """
    from knowledge.errors import StoreCorrupt  # noqa: PLC0415 - only on this path

    have = target.find(record.id)
    if have is not None and have.sha256 == record.sha256 and _digest(target, record.id) == (record.sha256, record.size):
        return
    if have is not None:
        target.delete(record.id)
    with source.content(record.id) as fh:
        try:
            copied = target.save(
                record.name,
                record.content_type,
                fh,
                metadata=dict(record.metadata),
                file_id=record.id,
                created=record.created,
            )
        except InvalidArgument:
            copied = target.get(record.id)  # saved at the same moment by another process
    if copied.sha256 != record.sha256 or _digest(target, record.id) != (record.sha256, record.size):
        target.delete(record.id)
        raise StoreCorrupt(
            f"The copy of {record.id} ({record.name!r}) does not match its SHA-256;"
            " it was removed and the move stops before switching."
        )


def _verified(catalog: Catalog, target: Mapping[str, Any]) -> set[str]:
    with catalog.cursor() as cur:
        rows = cur.execute("SELECT file_id FROM file_store_copies WHERE target = ?", [_key(target)]).fetchall()
    return {r[0] for r in rows}


def _note_verified(catalog: Catalog, target: Mapping[str, Any], record: StoredFile) -> None:
    with catalog.cursor() as cur:
        cur.execute(
            "INSERT INTO file_store_copies (target, file_id, sha256, verified) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (target, file_id) DO NOTHING",
            [_key(target), record.id, record.sha256, datetime.now(UTC)],
        )


def _key(location: Mapping[str, Any]) -> str:
    keys = (
        ("backend", "dir", "bucket", "prefix")
        if location.get("catalog")
        else ("backend", "dir", "database", "bucket", "prefix")
    )
    return json.dumps({k: location[k] for k in keys if k in location}, sort_keys=True)


@dataclass
class MoveReport:
    """What :func:`move_files` did: files copied now, found verified from an earlier run, copied in
    the final pass, old copies deleted; ``source``/``target`` in words."""

    source: str
    target: str
    copied: int = 0
    skipped: int = 0
    final_pass: int = 0
    deleted: int = 0
    switched: bool = False


#: Files copied at once by a move (each streams one file: memory about one chunk or S3 part each).
COPY_THREADS = 4


def _copy_pass(
    catalog: Catalog,
    source: FileStore,
    target: FileStore,
    target_loc: Mapping[str, Any],
    report: MoveReport,
    progress: Callable[[MoveReport, int], None] | None,
) -> int:
    """Copy every file of ``source`` not yet verified in ``target`` (:data:`COPY_THREADS` at a time);
    how many were copied. An exception of ``progress`` stops the pass (the copies under way finish)."""
    files = source.list()
    done = _verified(catalog, target_loc)
    todo = [r for r in files if r.id not in done]
    copied, failures = 0, []
    with ThreadPoolExecutor(COPY_THREADS, thread_name_prefix="knowledge-file-copy") as pool:
        futures = {pool.submit(copy_file, source, target, r): r for r in todo}
        try:
            for future in as_completed(futures):
                record = futures[future]
                try:
                    future.result()
                except FileNotFoundInStore:
                    continue  # deleted meanwhile
                except KnowledgeError as exc:
                    failures.append(f"{record.id} ({record.name!r}): {exc}")
                    continue
                _note_verified(catalog, target_loc, record)
                copied += 1
                report.copied += 1
                if progress is not None:
                    progress(report, len(files))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    if failures:
        raise KnowledgeError(
            f"{len(failures)} file(s) could not be copied, so the files stay where they are"
            f" (run the command again to retry): " + "; ".join(failures[:5])
        )
    return copied


def move_files(
    settings: Settings,
    catalog: Catalog,
    to: str,
    *,
    delete_old: bool = False,
    progress: Callable[[MoveReport, int], None] | None = None,
    opener: Callable[[Settings], FileStore] = open_file_store,
    settle_seconds: float = HOME_TTL,
) -> MoveReport:
    """Move every stored file to the file store ``to`` as ``settings`` name it (``file_store.s3_*``
    for ``s3``, ``file_store.url`` or ``catalog.url`` for ``postgresql``, ``file_store.dir`` for
    ``filesystem``), as the module docstring says; resumable (a re-run skips verified copies).

    Args:
        to: the target backend's name.
        delete_old: after the switch, delete the old copies (see :func:`cleanup_old`).
        progress: called ``progress(report, total)`` after each copied file.
        settle_seconds: how long the ``switching`` phase waits for every process to see it (the
            records are cached :data:`HOME_TTL` s) before the final pass.

    Raises:
        InvalidArgument: ``to`` is not a built-in backend, or another move is in progress.
        KnowledgeError: some files could not be copied (nothing switched; run it again).
        BackendUnavailable, ConfigError: a store cannot be opened.
    """
    if to not in BUILT_IN:
        raise InvalidArgument(f"Files can be moved to {', '.join(BUILT_IN)}, not {to!r}.")
    home = read_home(catalog) or check_home(settings, catalog)
    target_loc = location_of(settings, to)
    if to == "s3" and not target_loc["bucket"]:
        raise ConfigError(
            "Set file_store.s3_bucket (KNOWLEDGE_FILE_STORE__S3_BUCKET) and the other"
            " file_store.s3_* settings of the bucket to move the files to."
        )
    report = MoveReport(describe(home.location), describe(target_loc))
    if same_store(home.location, target_loc):
        if delete_old and home.previous is not None:
            report.deleted = cleanup_old(settings, catalog, opener=opener)
        return report
    if home.moving_to is not None and not same_store(home.moving_to, target_loc):
        raise InvalidArgument(
            f"A move to {describe(home.moving_to)} is in progress; finish it first with"
            f" `{_move_command(home.moving_to)}` (its settings), or it resumes there."
        )
    source = (
        opener(settings_for(settings, home.location))
        if not same_store(home.location, location_of(settings))
        else opener(settings)
    )
    target = opener(settings.model_copy(update={"file_store": settings.file_store.model_copy(update={"backend": to})}))
    try:
        if home.previous is not None and not same_store(home.previous, target_loc):
            raise InvalidArgument(
                f"The old copies in {describe(home.previous)} are still there; delete them first"
                " with `knowledge files move --cleanup`, then move again."
            )
        if not _update_home(
            catalog,
            "moving_to = ?, phase = ?, progress = ?",
            [json.dumps(target_loc), COPYING, json.dumps({"copied": 0, "total": None})],
            where="moving_to IS NULL AND location = ?" if home.moving_to is None else "moving_to IS NOT NULL",
            where_args=[json.dumps(home.location)] if home.moving_to is None else [],
        ):
            raise InvalidArgument(
                "Another process started or finished a move of the files meanwhile;"
                " `knowledge files where` says where they are."
            )
        report.skipped = len(_verified(catalog, target_loc))  # by an earlier, interrupted run
        while _copy_pass(catalog, source, target, target_loc, report, _progress_to(catalog, progress)):
            pass  # until a pass finds nothing new (files saved meanwhile)
        if not _update_home(
            catalog,
            "phase = ?, progress = ?",
            [SWITCHING, json.dumps({"copied": report.copied, "total": report.copied + report.skipped})],
        ):
            return report  # another process resumed the same move and switched over already
        time.sleep(settle_seconds)
        before = report.copied
        _copy_pass(catalog, source, target, target_loc, report, None)
        report.final_pass = report.copied - before
        # the flip: one statement (one transaction); a second mover of the same move finds it done
        report.switched = _update_home(
            catalog,
            "location = ?, moving_to = NULL, phase = ?, previous = ?, progress = NULL",
            [json.dumps(target_loc), SETTLED, json.dumps(home.location)],
        )
    finally:
        source.close()
        target.close()
    if delete_old:
        report.deleted = cleanup_old(settings, catalog, opener=opener)
    return report


def _progress_to(catalog: Catalog, progress: Callable[[MoveReport, int], None] | None) -> Callable[[MoveReport, int], None]:
    last = [0.0]

    def note(report: MoveReport, total: int) -> None:
        if time.monotonic() - last[0] > 0.5 or report.copied + report.skipped >= total:
            last[0] = time.monotonic()
            _set_progress(catalog, {"copied": report.copied + report.skipped, "total": total})
        if progress is not None:
            progress(report, total)

    return note


def cleanup_old(settings: Settings, catalog: Catalog, *, opener: Callable[[Settings], FileStore] = open_file_store) -> int:
    """Delete the old copies left by a finished move -- only those whose copy is verified in the
    store the files are in now -- then forget the old store. Returns how many were deleted.

    Raises:
        InvalidArgument: no move finished, or one is in progress.
        BackendUnavailable: a store cannot be reached (run it again).
    """
    home = read_home(catalog)
    if home is None or home.previous is None:
        raise InvalidArgument("There are no old copies to delete: no move of the files has finished.")
    if home.moving_to is not None:
        raise InvalidArgument("A move of the files is in progress; it must finish before old copies are deleted.")
    verified = _verified(catalog, home.location)
    old = opener(settings_for(settings, home.previous))
    new = opener(settings_for(settings, home.location))
    deleted = 0
    try:
        for record in old.list():
            copy = new.find(record.id)
            if (
                copy is not None
                and copy.sha256 == record.sha256
                and (record.id in verified or _digest(new, record.id) == (record.sha256, record.size))
            ):
                deleted += old.delete(record.id)
            else:
                log.warning(
                    "%s (%r) has no verified copy in %s; its old copy is kept.",
                    record.id,
                    record.name,
                    describe(home.location),
                )
    finally:
        old.close()
        new.close()
    with catalog.cursor() as cur:
        cur.execute("BEGIN TRANSACTION")
        cur.execute("UPDATE file_store_home SET previous = NULL, updated = ? WHERE id = 1", [datetime.now(UTC)])
        cur.execute("DELETE FROM file_store_copies")
        cur.execute("COMMIT")
    return deleted


def file_count(catalog: Catalog) -> int:
    """How many distinct files the catalog's stores hold (for a progress display)."""
    with catalog.cursor() as cur:
        return int(one_row(cur.execute("SELECT count(DISTINCT file_id) FROM store_files"))[0])


__all__ = [
    "HOME_TTL",
    "Home",
    "HomedFileStore",
    "MoveReport",
    "check_home",
    "cleanup_old",
    "copy_file",
    "describe",
    "file_count",
    "location_of",
    "move_files",
    "read_home",
    "same_store",
    "settings_for",
]
