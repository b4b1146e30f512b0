"""The ``s3`` file store: files in an S3-compatible bucket (AWS S3, MinIO, Ceph, Cloudflare R2, ...).

Keys, under ``file_store.s3_prefix`` (``<p>/``, or nothing):
``files/<file id>.json`` (the record, small JSON, written last: a file exists when its record does),
``blobs/<sha256>`` (the content, once per distinct SHA-256), ``by-sha256/<sha256>/<file id>`` (an
empty marker per record, so a digest's files are found by one prefix listing, and a blob's last
reference is known) and ``tmp/<token>`` (a save in flight).

* A save streams the source into ``tmp/`` as a multipart upload (parts of :attr:`S3FileStore.part_size`
  bytes, hashed as they go; one ``PutObject`` for a small file), writes the marker, copies the temp
  object to ``blobs/<sha256>`` unless that blob exists, writes the record and removes the temp
  object. A failure aborts the upload: nothing is left. A killed process may leave a temp object or
  an unfinished multipart upload: :meth:`S3FileStore.cleanup` (and a bucket lifecycle rule) removes them.
* A delete removes the record, then the marker, then the blob when no marker of its digest is left.
  S3 has no transactions: within one process saves and deletes of a digest serialise on a lock; two
  processes deleting the last reference while saving the same bytes in the same instant may lose
  that blob (the record then reads as :class:`~knowledge.errors.StoreCorrupt`).
"""

from __future__ import annotations

import builtins  # the name `list` is a FileStore method below; annotations after it say builtins.list
import hashlib
import io
import json
import logging
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

import boto3
import botocore.exceptions as bce
from botocore.config import Config

from knowledge.config import Settings
from knowledge.errors import BackendUnavailable, ConfigError, FileNotFoundInStore, InvalidArgument, StoreCorrupt
from knowledge.filestore.base import (
    CHUNK_SIZE,
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
    normalize_sha256,
    read_chunks,
)

log = logging.getLogger(__name__)

RECORD_FORMAT = 1
_RECORD_KEY = re.compile(r"files/(file-[0-9a-f]{32})\.json")
_MARKER_KEY = re.compile(r"by-sha256/[0-9a-f]{64}/(file-[0-9a-f]{32})")

#: Error codes that mean "these credentials are not accepted".
CREDENTIAL_CODES = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "AccessDenied",
    "InvalidClientTokenId",
    "AuthorizationHeaderMalformed",
    "403",
    "Forbidden",
}
MISSING_CODES = {"NoSuchKey", "404", "NotFound"}


#: The boto3 session the stores with keys of their own make their clients from: a session loads and parses
#: botocore's S3 model (about 0.1 s of CPU) once, not once per store. Its client-making is not thread-safe.
_KEYED_SESSION: list[boto3.session.Session] = []
_SESSION_LOCK = threading.Lock()


def make_client(
    key_id: str | None,
    secret: str | None,
    *,
    region: str | None,
    endpoint_url: str | None,
    config: Config,
    session_token: str | None = None,
) -> Any:
    """A boto3 S3 client: with the given key (both or neither; ``session_token`` with a temporary key), or
    the standard AWS credential chain as a new session finds it now (a session would keep the credentials it
    found the first time). Used by the ``s3`` file store and the ``s3`` source (:mod:`knowledge.sources.s3`).

    Raises botocore's errors, ``ValueError`` (a malformed endpoint URL)."""
    if key_id is None or secret is None:
        session = boto3.session.Session(region_name=region)
        return session.client("s3", endpoint_url=endpoint_url, config=config)
    with _SESSION_LOCK:
        if not _KEYED_SESSION:
            _KEYED_SESSION.append(boto3.session.Session())
        return _KEYED_SESSION[0].client(
            "s3",
            region_name=region,
            endpoint_url=endpoint_url,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            aws_session_token=session_token,
            config=config,
        )


def client_config(*, connect_timeout: float, read_timeout: float, path_style: bool | None) -> Config:
    """The botocore client settings of our S3 clients: the timeouts (seconds); three retries (four attempts in
    all) in botocore's standard retry mode, for connection errors, 5xx and ``SlowDown`` (`botocore retries
    <https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html>`_); only the checksums S3
    requires; path-style addressing (``http://host/bucket/key``) when ``path_style`` is true, virtual-host
    style when false, botocore's choice when ``None``."""
    return Config(
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        retries={"max_attempts": 3, "mode": "standard"},
        # only the checksums S3 requires: MinIO, Ceph and R2 versions differ in the newer ones
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        s3=None if path_style is None else {"addressing_style": "path" if path_style else "virtual"},
    )


def error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError`` (``"NoSuchKey"``; ``"404"`` for a HEAD), else ``""``."""
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", "")) if isinstance(exc, bce.ClientError) else ""


class S3FileStore(FileStore):
    """Files in an S3 bucket: ``file_store.s3_bucket`` (required), ``s3_prefix``, ``s3_endpoint_url``,
    ``s3_region``, ``s3_access_key_id`` / ``s3_secret_access_key`` (unset: the standard AWS chain --
    ``AWS_*`` variables, ``~/.aws``, instance roles). Thread-safe.

    See the module docstring for the key layout and what a save and a delete do. ``client`` is the
    boto3 S3 client, ``bucket`` and ``prefix`` (``""`` or ending in ``/``) where the keys go.

    Raises (constructor):
        ConfigError: no bucket, or only one of the two credential settings.
        BackendUnavailable: the endpoint cannot be reached, the bucket does not exist, or the
            credentials are missing or refused (the message names bucket and endpoint, never a secret).
    """

    name = "s3"

    #: Bytes per multipart part (S3's minimum is 5 MiB for every part but the last); a file of at
    #: most this size is one PutObject. Memory of a save is about one part.
    part_size: int = 5 * 1024 * 1024

    def __init__(self, settings: Settings) -> None:
        fs = settings.file_store
        if not (fs.s3_bucket or "").strip():
            raise ConfigError("The s3 file store needs a bucket: set file_store.s3_bucket.")
        if (fs.s3_access_key_id is None) != (fs.s3_secret_access_key is None):
            raise ConfigError(
                "Set both file_store.s3_access_key_id and file_store.s3_secret_access_key, or neither"
                " (then the standard AWS credential chain is used)."
            )
        self.bucket = fs.s3_bucket.strip()  # type: ignore[union-attr]
        self.prefix = fs.s3_prefix.strip("/") + "/" if fs.s3_prefix.strip("/") else ""
        self.endpoint = fs.s3_endpoint_url or "AWS S3"
        config = client_config(connect_timeout=5, read_timeout=60, path_style=True if fs.s3_endpoint_url else None)
        try:
            self.client = make_client(
                fs.s3_access_key_id.get_secret_value() if fs.s3_access_key_id else None,
                fs.s3_secret_access_key.get_secret_value() if fs.s3_secret_access_key else None,
                region=fs.s3_region or None,
                endpoint_url=fs.s3_endpoint_url or None,
                config=config,
            )
        except (bce.BotoCoreError, ValueError) as exc:
            raise ConfigError(f"The s3 file store settings are not usable ({self.endpoint}): {exc}") from None
        self._lock = threading.Lock()  # saves' last steps and deletes, within this process
        self._cache_lock = threading.Lock()
        self._records: dict[str, StoredFile] = {}  # id -> record; records never change
        self._call("check the bucket", lambda: self.client.head_bucket(Bucket=self.bucket))

    def __repr__(self) -> str:
        return f"S3FileStore({self.endpoint!r}, bucket={self.bucket!r}, prefix={self.prefix!r})"

    # -- errors -----------------------------------------------------------------------------------
    def error(self, what: str, exc: BaseException) -> BackendUnavailable:
        """The :class:`BackendUnavailable` for a failed call: why, with the bucket and endpoint."""
        where = f"bucket {self.bucket!r} at {self.endpoint}"
        code = error_code(exc)
        if isinstance(exc, bce.NoCredentialsError):
            why = (
                "no credentials: set file_store.s3_access_key_id and s3_secret_access_key, or the"
                " AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY variables"
            )
        elif isinstance(exc, (bce.EndpointConnectionError, bce.ConnectTimeoutError, bce.ConnectionClosedError)):
            why = "the endpoint cannot be reached (is the server running, is file_store.s3_endpoint_url right?)"
        elif code in ("NoSuchBucket", "404", "NotFound") and what == "check the bucket":
            why = "the bucket does not exist (create it first, or fix file_store.s3_bucket)"
        elif code == "NoSuchBucket":
            why = "the bucket does not exist (any more)"
        elif code in CREDENTIAL_CODES:
            why = (
                f"the credentials are refused ({code}): check file_store.s3_access_key_id /"
                " s3_secret_access_key (or the AWS_* credentials) and the bucket's permissions"
            )
        elif isinstance(exc, bce.ClientError):
            message = getattr(exc, "response", {}).get("Error", {}).get("Message", "")
            why = f"the server answered {code or 'an error'}{': ' + message if message else ''}"
        else:
            why = f"{exc.__class__.__name__}: {str(exc).strip()}"
        return BackendUnavailable(f"The s3 file store cannot {what} ({where}): {why}.")

    def _call(self, what: str, fn: Any) -> Any:
        try:
            return fn()
        except (bce.BotoCoreError, bce.ClientError) as exc:
            raise self.error(what, exc) from exc

    def _key(self, *parts: str) -> str:
        return self.prefix + "/".join(parts)

    def _record_key(self, file_id: str) -> str:
        assert is_file_id(file_id)
        return self._key("files", f"{file_id}.json")

    def _blob_key(self, sha256: str) -> str:
        return self._key("blobs", sha256)

    def _exists(self, key: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except bce.ClientError as exc:
            if error_code(exc) in MISSING_CODES:
                return False
            raise self.error("read", exc) from exc
        except bce.BotoCoreError as exc:
            raise self.error("read", exc) from exc
        return True

    def _keys(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", ()):
                    yield item["Key"]
        except (bce.BotoCoreError, bce.ClientError) as exc:
            raise self.error("list", exc) from exc

    # -- saving -----------------------------------------------------------------------------------
    def _upload(self, key: str, chunks: Iterator[Any], hasher: Any) -> int:
        """Stream ``chunks`` to ``key`` (multipart past one part), hashing them; the size in bytes.
        On any error the upload is aborted (or the object removed) and the error raised."""
        buf = bytearray()
        size = 0
        upload_id: str | None = None
        parts: builtins.list[dict[str, Any]] = []
        try:
            for chunk in chunks:
                hasher.update(chunk)
                size += len(chunk)
                buf += chunk
                del chunk
                if len(buf) >= self.part_size:  # a part of 5-6 MiB: the buffer as it is, no copy
                    if upload_id is None:
                        upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=key)["UploadId"]
                    n = len(parts) + 1
                    etag = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=buf)[
                        "ETag"
                    ]
                    parts.append({"ETag": etag, "PartNumber": n})
                    buf = bytearray()
            if upload_id is None:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=buf)
            else:
                if buf or not parts:
                    n = len(parts) + 1
                    etag = self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=buf)[
                        "ETag"
                    ]
                    parts.append({"ETag": etag, "PartNumber": n})
                self.client.complete_multipart_upload(
                    Bucket=self.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
        except BaseException as exc:
            try:
                if upload_id is not None:
                    self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)
                self.client.delete_object(Bucket=self.bucket, Key=key)
            except Exception as cleanup_exc:  # the original error matters more
                log.warning("Could not remove the unfinished upload %s: %s", key, cleanup_exc)
            if isinstance(exc, (bce.BotoCoreError, bce.ClientError)):
                raise self.error("upload", exc) from exc
            raise
        return size

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
        """Store ``stream`` (under a new id, or ``file_id``); see :meth:`FileStore.save` for arguments and errors.

        Memory is about one :attr:`part_size` whatever the file's size. Identical content already in
        ``blobs/`` is not copied again.

        Raises:
            BackendUnavailable: the bucket cannot be written (the message says why); nothing is kept.
        """
        clean = clean_name(name)
        ctype = clean_content_type(content_type, clean)
        meta = clean_metadata(metadata)
        limit = check_max_bytes(max_bytes)
        new_id, when = given_identity(file_id, created)
        if file_id is not None and self._exists(self._record_key(new_id)):
            raise id_taken(new_id)
        hasher = hashlib.sha256()
        tmp = self._key("tmp", secrets.token_hex(16))
        size = self._upload(tmp, read_chunks(stream, name=clean, max_bytes=limit, chunk_size=CHUNK_SIZE), hasher)
        sha = hasher.hexdigest()
        record = StoredFile(id=new_id, name=clean, content_type=ctype, size=size, sha256=sha, created=when, metadata=meta)
        marker = self._key("by-sha256", sha, record.id)
        body = json.dumps({"format": RECORD_FORMAT, **record.to_dict()}, ensure_ascii=False).encode("utf-8")
        marked = False
        try:
            with self._lock:
                if file_id is not None and self._exists(self._record_key(new_id)):
                    raise id_taken(new_id)  # saved meanwhile (within this process; across, the same copy)
                marked = True
                self._call("save", lambda: self.client.put_object(Bucket=self.bucket, Key=marker, Body=b""))
                if not self._exists(self._blob_key(sha)):
                    self._call(
                        "save",
                        lambda: self.client.copy({"Bucket": self.bucket, "Key": tmp}, self.bucket, self._blob_key(sha)),
                    )
                self._call(
                    "save",
                    lambda: self.client.put_object(
                        Bucket=self.bucket, Key=self._record_key(record.id), Body=body, ContentType="application/json"
                    ),
                )
        except BaseException:
            if marked:
                self._quietly_delete(marker)
            raise
        finally:
            self._quietly_delete(tmp)
        with self._cache_lock:
            self._records[record.id] = record
        return record

    def _quietly_delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:
            log.warning("Could not remove %s from bucket %s: %s", key, self.bucket, exc)

    # -- reading ----------------------------------------------------------------------------------
    def _read_record(self, file_id: str) -> StoredFile | None:
        key = self._record_key(file_id)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
            with body:
                data = json.loads(body.read())
        except bce.ClientError as exc:
            if error_code(exc) in MISSING_CODES:
                return None
            raise self.error("read", exc) from exc
        except bce.BotoCoreError as exc:
            raise self.error("read", exc) from exc
        except ValueError as exc:
            raise StoreCorrupt(f"The file store record {key!r} in bucket {self.bucket!r} is unreadable: {exc}") from exc
        try:
            if not isinstance(data, dict):
                raise InvalidArgument("the record is not a JSON object")
            record = StoredFile.from_dict(data)
            if record.id != file_id:
                raise InvalidArgument(f"the record is for {record.id!r}")
        except InvalidArgument as exc:
            raise StoreCorrupt(f"The file store record {key!r} in bucket {self.bucket!r} is unreadable: {exc}") from exc
        return record

    def find(self, file_id: str) -> StoredFile | None:
        """The record of ``file_id`` or ``None`` (a malformed id is ``None`` without a request).

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
            StoreCorrupt: the record exists but is unreadable.
            BackendUnavailable: the bucket cannot be read.
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            return None
        record = self._read_record(file_id)
        with self._cache_lock:
            if record is None:
                self._records.pop(file_id, None)
            else:
                self._records[file_id] = record
        return record

    def content(self, file_id: str) -> BinaryIO:
        """A buffered binary stream over the blob, read from the server as it is consumed.

        Raises:
            FileNotFoundInStore: no such file (or a malformed id).
            InvalidArgument: ``file_id`` is not a ``str``.
            StoreCorrupt: the record exists but its blob is missing.
            BackendUnavailable: the bucket cannot be read.
        """
        record = self.get(file_id)
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._blob_key(record.sha256))["Body"]
        except bce.ClientError as exc:
            if error_code(exc) not in MISSING_CODES:
                raise self.error("read", exc) from exc
            if self.find(file_id) is None:
                raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.") from None
            raise StoreCorrupt(
                f"The stored file {file_id!r} ({record.name!r}) has a record but its content"
                f" {self._blob_key(record.sha256)!r} is missing from bucket {self.bucket!r}."
            ) from None
        except bce.BotoCoreError as exc:
            raise self.error("read", exc) from exc
        return io.BufferedReader(_BodyReader(self, body), buffer_size=64 * 1024)

    def _records_for(self, ids: set[str]) -> builtins.list[StoredFile]:
        with self._cache_lock:
            for gone in set(self._records) - ids:
                del self._records[gone]
            missing = [i for i in ids if i not in self._records]
        found: dict[str, StoredFile] = {}
        for file_id in missing:
            try:
                record = self._read_record(file_id)
            except StoreCorrupt as exc:
                log.warning("%s It is left out of the listing.", exc)
                continue
            if record is not None:
                found[file_id] = record
        with self._cache_lock:
            self._records.update(found)
            out = [r for i, r in self._records.items() if i in ids]
        return sorted(out, key=lambda r: (r.created, r.id), reverse=True)

    def list(self) -> builtins.list[StoredFile]:
        """Every stored file, newest first (one listing of ``files/``; records read once, then cached)."""
        ids = {m.group(1) for k in self._keys(self._key("files/")) if (m := _RECORD_KEY.fullmatch(k[len(self.prefix) :]))}
        return self._records_for(ids)

    def find_by_sha256(self, sha256: str) -> builtins.list[StoredFile]:
        """Every stored file with this digest, newest first: one listing of ``by-sha256/<sha256>/``.

        Raises:
            InvalidArgument: ``sha256`` is not 64 hex digits.
        """
        digest = normalize_sha256(sha256)
        ids = {
            m.group(1)
            for k in self._keys(self._key("by-sha256", digest) + "/")
            if (m := _MARKER_KEY.fullmatch(k[len(self.prefix) :]))
        }
        with self._cache_lock:
            cached = {i: self._records[i] for i in ids if i in self._records}
        out: builtins.list[StoredFile] = []
        for file_id in ids:
            record = cached.get(file_id) or self.find(file_id)  # a marker without a record: a save in flight
            if record is not None and record.sha256 == digest:
                out.append(record)
        return sorted(out, key=lambda r: (r.created, r.id), reverse=True)

    # -- deleting ---------------------------------------------------------------------------------
    def delete(self, file_id: str) -> bool:
        """Remove the record, its marker, and the blob when no other marker of its digest is left.

        Returns ``True`` when a file was removed, ``False`` when none had that id (or it is malformed).
        An unreadable record is removed too (its blob is then left to :meth:`cleanup`).

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
            BackendUnavailable: the bucket cannot be written.
        """
        check_file_id_type(file_id)
        if not is_file_id(file_id):
            return False
        with self._lock:
            try:
                record = self._read_record(file_id)
            except StoreCorrupt:
                record = None
            key = self._record_key(file_id)
            if record is None and not self._exists(key):
                return False
            self._call("delete", lambda: self.client.delete_object(Bucket=self.bucket, Key=key))
            with self._cache_lock:
                self._records.pop(file_id, None)
            if record is not None:
                sha = record.sha256
                self._call(
                    "delete", lambda: self.client.delete_object(Bucket=self.bucket, Key=self._key("by-sha256", sha, file_id))
                )
                if next(iter(self._keys(self._key("by-sha256", sha) + "/")), None) is None:
                    self._call("delete", lambda: self.client.delete_object(Bucket=self.bucket, Key=self._blob_key(sha)))
        return True

    # -- housekeeping -----------------------------------------------------------------------------
    def cleanup(self, older_than: timedelta = timedelta(hours=1)) -> int:
        """Remove crash leftovers older than ``older_than``: temp objects, unfinished multipart uploads
        under ``tmp/``, markers without a record, and blobs without a marker. Returns how many.

        Not run on open (it lists the bucket); run it from a maintenance job, or let a lifecycle rule
        (``AbortIncompleteMultipartUpload``, expiry of ``tmp/``) do the first two.

        Raises:
            BackendUnavailable: the bucket cannot be listed or written.
        """
        cutoff = datetime.now(UTC) - older_than
        removed = 0
        paginator = self.client.get_paginator("list_objects_v2")

        def old_objects(prefix: str) -> Iterator[str]:
            try:
                for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
                    for item in page.get("Contents", ()):
                        if item["LastModified"] < cutoff:
                            yield item["Key"]
            except (bce.BotoCoreError, bce.ClientError) as exc:
                raise self.error("list", exc) from exc

        for key in builtins.list(old_objects("tmp/")):
            self._quietly_delete(key)
            removed += 1
        uploads = self._call(
            "list", lambda: self.client.list_multipart_uploads(Bucket=self.bucket, Prefix=self._key("tmp/"))
        ).get("Uploads", ())
        for up in uploads:
            if up["Initiated"] < cutoff:
                self._call(
                    "clean up",
                    lambda up=up: self.client.abort_multipart_upload(
                        Bucket=self.bucket, Key=up["Key"], UploadId=up["UploadId"]
                    ),
                )
                removed += 1
        with self._lock:
            records = {
                m.group(1) for k in self._keys(self._key("files/")) if (m := _RECORD_KEY.fullmatch(k[len(self.prefix) :]))
            }
            live: set[str] = set()  # digests with a marker that stays
            try:
                for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key("by-sha256/")):
                    for item in page.get("Contents", ()):
                        m = _MARKER_KEY.fullmatch(item["Key"][len(self.prefix) :])
                        if m is None:
                            continue
                        if m.group(1) in records or item["LastModified"] >= cutoff:  # or a save in flight
                            live.add(item["Key"][len(self.prefix) :].split("/")[1])
                        else:
                            self._quietly_delete(item["Key"])
                            removed += 1
            except (bce.BotoCoreError, bce.ClientError) as exc:
                raise self.error("list", exc) from exc
            for key in builtins.list(old_objects("blobs/")):
                if key[len(self.prefix) :].split("/", 1)[1] not in live:
                    self._quietly_delete(key)
                    removed += 1
        return removed

    def close(self) -> None:
        """Close the client's connection pool."""
        self.client.close()


class _BodyReader(io.RawIOBase):
    """The raw stream behind :meth:`S3FileStore.content`: reads the response body as it comes."""

    def __init__(self, store: S3FileStore, body: Any) -> None:
        self._store, self._body = store, body

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self._body.read(len(b))
        except (bce.BotoCoreError, bce.ClientError) as exc:
            raise self._store.error("read", exc) from exc
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()
