"""The built-in ``filesystem`` file store: files under ``settings.file_store_dir`` (default ``data/files``).

Layout: ``meta/file-<32 hex>.json`` (one record per stored file, written once), ``blobs/<ab>/<sha256>``
(the content, once per distinct SHA-256), ``tmp/`` (saves in flight) and ``.lock`` (held briefly by
whoever changes ``meta/`` or ``blobs/``, across processes).

* Names are never paths: a path is made only from an id or a SHA-256, both checked against strict
  patterns; a malformed id is *not found* without touching the disk.
* Dedupe: the records that carry a digest are its blob's reference count; a blob goes with its last.
* Atomic writes: content streamed into ``tmp/`` while hashed, fsynced, moved into place under the
  lock, the record written last; :meth:`~FilesystemFileStore.cleanup` (on every open) removes what
  a crash left.

Why one JSON file per record, and how two processes stay safe: ``docs/backends.md``.
"""

from __future__ import annotations

import builtins  # the name `list` is a FileStore method below; annotations after it say builtins.list
import errno
import hashlib
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from filelock import FileLock, Timeout

from knowledge._fs import fsync_dir
from knowledge.config import Settings
from knowledge.errors import (
    BackendUnavailable,
    FileNotFoundInStore,
    InvalidArgument,
    StoreCorrupt,
    StoreLocked,
)
from knowledge.filestore.base import (
    FileStore,
    Source,
    StoredFile,
    check_file_id_type,
    check_max_bytes,
    clean_content_type,
    clean_metadata,
    clean_name,
    given_identity,
    id_taken,
    is_file_id,
    is_sha256,
    normalize_sha256,
    read_chunks,
)

try:  # POSIX: a writer flocks its temp file so another process's cleanup leaves it alone
    import fcntl
except ImportError:  # pragma: no cover - Windows: an open file cannot be deleted anyway
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

RECORD_FORMAT = 1
_RECORD_FILE = re.compile(r"(file-[0-9a-f]{32})\.json")
_TMP_SUFFIX = ".part"


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("Could not remove %s: %s", path, exc)


class FilesystemFileStore(FileStore):
    """Files on the local disk under ``settings.file_store_dir``. Thread-safe; safe for two processes.

    See the module docstring for the layout, the dedupe policy and why writes are atomic.

    Raises (constructor):
        BackendUnavailable: the folder cannot be created or written.
    """

    name = "filesystem"

    #: Seconds to wait for another process's store lock before :class:`StoreLocked`.
    lock_timeout: float = 30.0

    def __init__(self, settings: Settings) -> None:
        self.root = Path(settings.file_store_dir)
        self._meta = self.root / "meta"
        self._blobs = self.root / "blobs"
        self._tmp = self.root / "tmp"
        try:
            for d in (self._meta, self._blobs, self._tmp):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailable(f"The file store folder {str(self.root)!r} cannot be created: {exc}") from exc
        self._file_lock = FileLock(str(self.root / ".lock"), timeout=self.lock_timeout)
        self._write_lock = threading.Lock()  # threads of this process take it before the file lock
        self._cache_lock = threading.Lock()
        self._records: dict[str, StoredFile] = {}  # id -> record; records are immutable
        self._bad: set[str] = set()  # ids whose record is unreadable (warned once)
        self.cleanup()

    def __repr__(self) -> str:
        return f"FilesystemFileStore({str(self.root)!r})"

    # -- paths ------------------------------------------------------------------------------------
    def _meta_path(self, file_id: str) -> Path:
        assert is_file_id(file_id)
        return self._meta / f"{file_id}.json"

    def _blob_path(self, sha256: str) -> Path:
        assert is_sha256(sha256)
        return self._blobs / sha256[:2] / sha256

    # -- locking ----------------------------------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store lock: this process's threads first, then other processes (``.lock``)."""
        with self._write_lock:
            try:
                self._file_lock.acquire()
            except Timeout:
                raise StoreLocked(
                    f"Another process has held the file store lock {str(self.root / '.lock')!r}"
                    f" for more than {self.lock_timeout:g} s. Try again, or stop the other process."
                ) from None
            try:
                yield
            finally:
                self._file_lock.release()

    # -- records ----------------------------------------------------------------------------------
    def _read_record(self, file_id: str) -> StoredFile | None:
        """The record of ``file_id`` from disk; ``None`` when absent. Raises StoreCorrupt when unreadable."""
        path = self._meta_path(file_id)
        try:
            data = json.loads(path.read_bytes())
            if not isinstance(data, dict):
                raise InvalidArgument("the record is not a JSON object")
            record = StoredFile.from_dict(data)
            if record.id != file_id:
                raise InvalidArgument(f"the record is for {record.id!r}")
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # InvalidArgument and JSONDecodeError are ValueErrors
            raise StoreCorrupt(f"The file store record {str(path)!r} is unreadable: {exc}") from exc
        return record

    def _scan(self) -> dict[str, StoredFile]:
        """Every readable record now on disk (id -> record); refreshes the cache, skips unreadable ones."""
        try:
            names = os.listdir(self._meta)
        except FileNotFoundError:
            names = []
        ids = {m.group(1) for n in names if (m := _RECORD_FILE.fullmatch(n))}
        with self._cache_lock:
            for gone in set(self._records) - ids:
                del self._records[gone]
            self._bad &= ids
            missing = [i for i in ids if i not in self._records and i not in self._bad]
        for file_id in missing:
            try:
                record = self._read_record(file_id)
            except StoreCorrupt as exc:
                with self._cache_lock:
                    if file_id not in self._bad:
                        self._bad.add(file_id)
                        log.warning("%s It is left out of the listing.", exc)
                continue
            if record is not None:
                with self._cache_lock:
                    self._records[file_id] = record
        with self._cache_lock:
            return {i: r for i, r in self._records.items() if i in ids}

    def _write_record(self, record: StoredFile) -> None:
        """Write ``record`` atomically (temp file in tmp/, fsync, os.replace). Call under the store lock."""
        data = {"format": RECORD_FORMAT, **record.to_dict()}
        payload = json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
        tmp = self._tmp / f"meta-{secrets.token_hex(8)}.json{_TMP_SUFFIX}"
        try:
            with open(tmp, "xb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self._meta_path(record.id))
        except BaseException:
            _unlink_quietly(tmp)
            raise
        fsync_dir(self._meta)

    # -- the contract -----------------------------------------------------------------------------
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
        """Store ``stream`` under a new id (or ``file_id``); see :meth:`FileStore.save` for arguments and errors.

        The content is copied in 1 MiB chunks to a temp file while it is hashed; memory use does not
        grow with the file. Identical content already stored is not written twice (the new record
        references the existing blob).

        Raises:
            FileTooLarge: over ``max_bytes``; the temp file is removed, nothing is visible.
            InvalidArgument: a bad name, content type, metadata, ``max_bytes`` or source.
            StoreLocked: another process held the store lock for more than :attr:`lock_timeout` s.
            OSError: the disk is full or the folder not writable; nothing is visible.
        """
        clean = clean_name(name)
        ctype = clean_content_type(content_type, clean)
        meta = clean_metadata(metadata)
        limit = check_max_bytes(max_bytes)
        new_id, when = given_identity(file_id, created)

        hasher = hashlib.sha256()
        size = 0
        tmp, fh = self._open_temp()
        try:
            try:
                for chunk in read_chunks(stream, name=clean, max_bytes=limit):
                    hasher.update(chunk)
                    fh.write(chunk)
                    size += len(chunk)
                    del chunk  # not alive while the next one is read
                fh.flush()
                os.fsync(fh.fileno())
                if fcntl is None:  # Windows cannot rename an open file (and has no flock to keep)
                    fh.close()
                sha = hasher.hexdigest()
                record = StoredFile(
                    id=new_id,
                    name=clean,
                    content_type=ctype,
                    size=size,
                    sha256=sha,
                    created=when,
                    metadata=meta,
                )
                with self._locked():
                    if file_id is not None and self._meta_path(new_id).exists():
                        raise id_taken(new_id)
                    blob = self._blob_path(sha)
                    if self._blob_ok(blob, size):
                        _unlink_quietly(tmp)
                    else:
                        blob.parent.mkdir(exist_ok=True)
                        os.replace(tmp, blob)  # POSIX: still open and flocked, so no cleanup can take it
                        fsync_dir(blob.parent)
                    self._write_record(record)
            finally:
                fh.close()
        except BaseException:
            _unlink_quietly(tmp)
            raise
        with self._cache_lock:
            self._records[record.id] = record
        return record

    @staticmethod
    def _blob_ok(blob: Path, size: int) -> bool:
        """``True`` when ``blob`` exists with the expected size (a truncated one is replaced)."""
        try:
            return blob.stat().st_size == size
        except FileNotFoundError:
            return False

    def _open_temp(self) -> tuple[Path, BinaryIO]:
        """A new temp file in tmp/, open for writing and (POSIX) flocked for as long as it is open."""
        while True:
            path = self._tmp / f"save-{secrets.token_hex(12)}{_TMP_SUFFIX}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            fh = os.fdopen(fd, "wb")
            if fcntl is None:
                return path, fh
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                # A cleanup may have taken the file between open and flock: then start again.
                if os.path.samestat(os.stat(path), os.fstat(fh.fileno())):
                    return path, fh
            except FileNotFoundError:
                pass
            except BaseException:
                fh.close()
                _unlink_quietly(path)
                raise
            fh.close()

    def find(self, file_id: str) -> StoredFile | None:
        """The record of ``file_id`` or ``None``; a malformed id is ``None`` without touching the disk.

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
            StoreCorrupt: the record exists but is unreadable.
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            return None
        with self._cache_lock:
            cached = self._records.get(file_id)
        if cached is not None:
            return cached if self._meta_path(file_id).exists() else None
        record = self._read_record(file_id)
        if record is not None:
            with self._cache_lock:
                self._records[file_id] = record
        return record

    def content(self, file_id: str) -> BinaryIO:
        """An open binary file over the content (buffered, read-only); see :meth:`FileStore.content`.

        Raises:
            FileNotFoundInStore: no such file (or a malformed id).
            InvalidArgument: ``file_id`` is not a ``str``.
            StoreCorrupt: the record exists but its content is missing or unreadable.
        """
        record = self.get(file_id)
        try:
            return open(self._blob_path(record.sha256), "rb")
        except FileNotFoundError:
            if self.find(file_id) is None:  # deleted meanwhile
                raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.") from None
            raise StoreCorrupt(
                f"The stored file {file_id!r} ({record.name!r}) has a record but its content"
                f" {str(self._blob_path(record.sha256))!r} is missing."
            ) from None
        except OSError as exc:
            raise StoreCorrupt(f"The content of the stored file {file_id!r} cannot be read: {exc}") from exc

    def list(self) -> list[StoredFile]:
        """Every stored file, newest first (by ``created``, then id); unreadable records are skipped."""
        return sorted(self._scan().values(), key=lambda r: (r.created, r.id), reverse=True)

    def find_by_sha256(self, sha256: str) -> builtins.list[StoredFile]:
        """Every stored file with this content digest (64 hex, any case), newest first.

        Raises:
            InvalidArgument: ``sha256`` is not 64 hex digits.
        """
        digest = normalize_sha256(sha256)
        hits = [r for r in self._scan().values() if r.sha256 == digest]
        return sorted(hits, key=lambda r: (r.created, r.id), reverse=True)

    def delete(self, file_id: str) -> bool:
        """Remove ``file_id``'s record, and its blob when no other record references it.

        (While any record in the store is unreadable, blobs are kept: it might reference them.)

        Returns ``True`` when a file was removed, ``False`` when none had that id (or it is malformed).
        An unreadable record is removed too. A stream already opened by :meth:`content` keeps reading
        on POSIX; on Windows the blob stays until the next :meth:`cleanup`.

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
            StoreLocked: another process held the store lock for more than :attr:`lock_timeout` s.
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            return False
        with self._locked():
            path = self._meta_path(file_id)
            try:
                record = self._read_record(file_id)
            except StoreCorrupt:
                record = None
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            fsync_dir(self._meta)
            with self._cache_lock:
                self._records.pop(file_id, None)
                self._bad.discard(file_id)
            if record is not None:
                others = self._scan()
                if not any(r.sha256 == record.sha256 for r in others.values()) and not self._bad:
                    blob = self._blob_path(record.sha256)
                    _unlink_quietly(blob)
                    fsync_dir(blob.parent)
        return True

    # -- housekeeping -----------------------------------------------------------------------------
    def cleanup(self) -> int:
        """Remove crash leftovers: temp files no live writer holds, and blobs no record references.

        Runs on every open. Blobs are kept while any record is unreadable (it might reference them).
        Returns the number of files removed.

        Raises:
            StoreLocked: another process held the store lock for more than :attr:`lock_timeout` s.
        """
        removed = 0
        with self._locked():
            for entry in os.scandir(self._tmp):
                if entry.is_file(follow_symlinks=False) and self._remove_if_abandoned(Path(entry.path)):
                    removed += 1
            records = self._scan()
            if self._bad:
                log.warning("Unreadable records in %s: unreferenced blobs are kept.", self._meta)
                return removed
            referenced = {r.sha256 for r in records.values()}
            for sub in os.scandir(self._blobs):
                if not sub.is_dir(follow_symlinks=False):
                    continue
                for entry in os.scandir(sub.path):
                    if entry.name not in referenced:
                        _unlink_quietly(Path(entry.path))
                        removed += 1
        if removed:
            log.info("File store %s: removed %d leftover file(s).", self.root, removed)
        return removed

    @staticmethod
    def _remove_if_abandoned(path: Path) -> bool:
        """Unlink a temp file unless a live writer holds it (flock on POSIX; open file on Windows)."""
        if fcntl is None:  # Windows refuses to delete a file its writer still has open
            try:
                os.unlink(path)
            except OSError:
                return False
            return True
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return False
                raise
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            return True
        finally:
            os.close(fd)
