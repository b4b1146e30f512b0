"""The ``s3`` source: the objects of an S3 bucket under a prefix (AWS S3, MinIO, Ceph RGW, Cloudflare R2,
any server speaking the S3 REST API), read with boto3.

What it lists and how (the `S3 API reference <https://docs.aws.amazon.com/AmazonS3/latest/API/>`_):

* **Listing**: ``ListObjectsV2`` with ``Prefix``, 1,000 keys a page (the API's maximum), following
  ``NextContinuationToken``; one page is held at a time, so a bucket of 100,000 keys lists in about the
  memory of one page. A key ending in ``/`` is a folder marker (what consoles write for an empty
  "folder") and is skipped. An entry's path is its key without the prefix; a key whose remainder is not a
  clean path (an empty, ``.`` or ``..`` part, as in ``a//b``) is skipped with a warning.
* **Version**: the object's ETag (quotes removed). An overwrite gives a new ETag (for a plain upload the
  MD5 of the new bytes, else a new opaque value); equal bytes written again may keep it, which is right.
  The ``VersionId`` of a versioned bucket is not added: ``ListObjectsV2`` does not return it, and
  ``ListObjectVersions`` lists every old version too, not cheap.
* **Content key**: ``md5:<etag>`` when the ETag is 32 hex digits with no ``-<parts>`` suffix, which for
  an object uploaded in one ``PutObject`` (or copied from one) is the MD5 of its bytes (`Checking object
  integrity <https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity.html>`_).
  A multipart upload's ETag (``<hex>-<parts>``) is the MD5 of the parts' MD5s: equal bytes uploaded
  with other part sizes differ, so it is no content key (``None``: a rename is then found by SHA-256
  after reading). One case the listing cannot tell apart: an object stored with SSE-KMS or SSE-C has an
  ETag of the same shape that is *not* its MD5. Such a key is still never equal for different bytes
  (it is unique to the object), so the worst case is a rename of such an object read again, never a wrong
  rename.
* **Fetch**: a streaming ``GetObject`` with ``If-Match`` on the listed ETag, written to the output in
  1 MiB pieces: an object gone since the listing (``NoSuchKey``) or overwritten since (``412
  PreconditionFailed``, or a different ETag from a server that ignores ``If-Match``) is
  :class:`~knowledge.sources.base.EntryGone`, so bytes are never kept under another version's ETag.
  An object archived in Glacier or Deep Archive (``InvalidObjectState``) is ``EntryGone`` too, with words.
* **Marker**: none; S3 has no cheap token that changes with a bucket's content.

Errors: the endpoint unreachable, a timeout, a 5xx answer, ``SlowDown`` (after botocore's three retries)
are :class:`~knowledge.sources.base.SourceUnavailable`; ``InvalidAccessKeyId``,
``SignatureDoesNotMatch``, ``AccessDenied`` (and the other refusals of
:data:`knowledge.filestore.s3.CREDENTIAL_CODES`) are ``SourceAuthFailed``; ``NoSuchBucket`` is
``SourceNotFound``. Messages carry the error code and the server's message text, the bucket and the
endpoint: never a key, a signature or a token. botocore's own debug log shows a session token (in the
signed request's headers); :class:`RedactSessionTokens`, attached to its loggers when this module is
imported, replaces it with ``***``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import urlsplit

import botocore.exceptions as bce

from knowledge.errors import InvalidArgument
from knowledge.filestore.s3 import CREDENTIAL_CODES, MISSING_CODES, client_config, error_code, make_client
from knowledge.sources.base import (
    Entry,
    EntryGone,
    Field,
    Sink,
    Source,
    SourceAuthFailed,
    SourceContext,
    SourceError,
    SourceNotFound,
    SourceUnavailable,
)

log = logging.getLogger(__name__)

#: Keys a listing page asks for: 1,000, the most ``ListObjectsV2`` returns.
PAGE_SIZE = 1000
#: Bytes a fetch reads and writes at a time.
FETCH_CHUNK = 1024 * 1024

#: An ETag that is the MD5 of the object's bytes: 32 hex digits, no ``-<parts>`` suffix.
_MD5_ETAG = re.compile(r"[0-9a-f]{32}")
#: Error codes of a server that is busy or failing, not of a wrong request: the next run may succeed.
_BUSY_CODES = {
    "SlowDown",
    "ServiceUnavailable",
    "InternalError",
    "RequestTimeout",
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequests",
    "503",
    "500",
}
#: botocore's exceptions of a connection that failed or an answer that did not come.
_NETWORK_ERRORS = (
    bce.ConnectionError,  # refused, no route, DNS, a proxy's; ConnectTimeoutError is one too
    bce.ConnectionClosedError,
    bce.ReadTimeoutError,
    bce.ResponseStreamingError,
    bce.IncompleteReadError,
    bce.HTTPClientError,
)
_TOKEN_IN_TEXT = re.compile(r"(x-amz-security-token['\"]?\s*[:=]\s*b?['\"]?)[^'\"\s&,}]+", re.IGNORECASE)


class RedactSessionTokens(logging.Filter):
    """A logging filter that replaces the value of an ``X-Amz-Security-Token`` header or query parameter
    in a record's text with ``***`` (botocore logs the signed request and the canonical request at DEBUG
    level, the temporary credentials' session token among their headers). Attached to the loggers
    ``botocore.auth`` and ``botocore.endpoint`` when this module is imported."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report
            return True
        if "security-token" in text.lower():
            record.msg, record.args = _TOKEN_IN_TEXT.sub(r"\1***", text), None
        return True


def _attach_redaction() -> None:
    for name in ("botocore.auth", "botocore.endpoint"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSessionTokens) for f in logger.filters):
            logger.addFilter(RedactSessionTokens())


_attach_redaction()


def content_key_of(etag: str) -> str | None:
    """``md5:<etag>`` when ``etag`` (quotes removed, any case) is a plain MD5 -- 32 hex digits, no
    ``-<parts>`` suffix of a multipart upload -- else ``None``. See the module docstring for the rule
    and its one blind spot (SSE-KMS / SSE-C ETags)."""
    tag = etag.strip('"').lower()
    return f"md5:{tag}" if _MD5_ETAG.fullmatch(tag) else None


def _plain(value: Any) -> str:
    """A setting as text: a pydantic ``SecretStr``'s value, else ``str(value)``."""
    reveal = getattr(value, "get_secret_value", None)
    return str(reveal() if callable(reveal) else value)


def _clean_endpoint(raw: str | None) -> str | None:
    """``raw`` without a trailing ``/``, or ``None``; raises ``InvalidArgument`` for what is not an
    ``http(s)://host[:port][/path]`` URL, or one with a user name or password in it. The value is never
    echoed back: a malformed one may hold a password."""
    if raw is None:
        return None
    text = raw.strip()
    if "@" in text:
        raise InvalidArgument(
            "The endpoint URL must not hold a user name or password: put the keys in the access key fields.",
            param="endpoint_url",
        )
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 -- raises ValueError for a port that is no number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise InvalidArgument(
            "The endpoint URL must be of the form http(s)://host[:port] (e.g. http://127.0.0.1:9000).",
            param="endpoint_url",
        )
    return text.rstrip("/")


class S3Source(Source):
    """The objects of an S3 bucket under a prefix. See the module docstring for what is listed, the
    version and content key, the fetch and the errors.

    Config: ``bucket`` (required), ``prefix`` (a "folder": ``team/docs`` reads ``team/docs/...``; blank:
    the whole bucket), ``endpoint_url`` (blank: AWS), ``region``, ``access_key_id`` and
    ``secret_access_key`` (required: the source never falls back to the server's own AWS credentials),
    ``session_token`` (temporary credentials), ``addressing_style`` (``auto``: path-style when an
    endpoint is given, botocore's choice for AWS; ``path``; ``virtual``).

    Raises:
        InvalidArgument: (constructor) a missing bucket or key, an unusable endpoint URL or addressing style.
        SourceUnavailable, SourceAuthFailed, SourceNotFound, EntryGone, SourceError: see the module docstring.
    """

    kind: ClassVar[str] = "s3"
    title: ClassVar[str] = "S3 bucket"
    description: ClassVar[str] = "The objects of an S3 bucket under a prefix (AWS S3, MinIO, Ceph, Cloudflare R2)."
    fields: ClassVar[tuple[Field, ...]] = (
        Field("bucket", "Bucket", "the bucket's name", required=True),
        Field("prefix", "Prefix", "the folder to read, e.g. team/docs (blank: the whole bucket)", default=""),
        Field(
            "endpoint_url",
            "Endpoint URL",
            "for an S3-compatible server, e.g. http://minio.example:9000 (blank: AWS S3)",
        ),
        Field("region", "Region", "e.g. eu-west-1 (blank: us-east-1, or the server's own)"),
        Field("access_key_id", "Access key ID", "the key's ID (AKIA...)", required=True),
        Field("secret_access_key", "Secret access key", "the key's secret", secret=True, required=True),
        Field("session_token", "Session token", "with temporary credentials only", secret=True),
        Field(
            "addressing_style",
            "Addressing style",
            "auto, path (http://host/bucket/key: MinIO, Ceph) or virtual (http://bucket.host/key)",
            default="auto",
        ),
    )
    carries_permissions: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any], context: SourceContext) -> None:
        super().__init__(config, context)
        self.bucket: str = str(self.required("bucket")).strip()
        prefix = str(self.setting("prefix", "")).strip().strip("/")
        #: The key prefix listed: ``""`` or ending in ``/``.
        self.prefix: str = prefix + "/" if prefix else ""
        self.endpoint: str | None = _clean_endpoint(self.setting("endpoint_url"))
        style = str(self.setting("addressing_style", "auto")).strip().lower()
        if style not in ("auto", "path", "virtual"):
            raise InvalidArgument(
                f"The addressing style must be auto, path or virtual, not {style!r}.", param="addressing_style"
            )
        path_style = {"path": True, "virtual": False}.get(style, True if self.endpoint else None)
        timeout = float(context.timeout)
        try:
            self.client = make_client(
                _plain(self.required("access_key_id")).strip(),
                _plain(self.required("secret_access_key")),
                session_token=None if self.setting("session_token") is None else _plain(self.setting("session_token")),
                region=self.setting("region"),
                endpoint_url=self.endpoint,
                config=client_config(connect_timeout=timeout, read_timeout=timeout, path_style=path_style),
            )
        except (bce.BotoCoreError, ValueError) as exc:
            # botocore's words for a bad region or endpoint name the value, never a key
            raise InvalidArgument(f"The S3 source's settings are not usable: {exc}") from None

    def __repr__(self) -> str:
        return f"S3Source({self.location()!r})"

    def location(self) -> str:
        """``s3://bucket/prefix/``, with `` at <endpoint>`` for a server other than AWS."""
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"{where} at {self.endpoint}" if self.endpoint else where

    # -- errors -----------------------------------------------------------------------------------
    def error(self, what: str, exc: BaseException) -> SourceError:
        """The :class:`SourceError` subclass for botocore's ``exc`` raised while doing ``what`` (``"list"``,
        ``"read 'a/b.pdf'"``): its words name the bucket, the endpoint and the error code, never a
        credential."""
        server = self.endpoint or "AWS S3"
        where = f"bucket {self.bucket!r} at {server}"
        code = error_code(exc)
        response: Mapping[str, Any] = exc.response if isinstance(exc, bce.ClientError) else {}
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        said = str(response.get("Error", {}).get("Message", "") or "").strip()
        answer = f"{code}{': ' + said if said else ''}"
        if isinstance(exc, (bce.ConnectTimeoutError, bce.ReadTimeoutError)):
            return SourceUnavailable(
                f"Could not {what} in {where}: the server did not answer within {self.context.timeout:g} s."
                " The next run tries again."
            )
        if isinstance(exc, bce.SSLError):
            return SourceError(
                f"Could not {what} in {where}: the TLS connection failed (the server's certificate is not"
                " trusted, or the endpoint does not speak HTTPS)."
            )
        if isinstance(exc, _NETWORK_ERRORS):
            return SourceUnavailable(
                f"Could not {what} in {where}: the server cannot be reached ({exc.__class__.__name__})."
                " Is it running, and is the endpoint URL right? The next run tries again."
            )
        if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError)):
            return SourceAuthFailed(f"Could not {what} in {where}: the source has no complete access key.")
        if code == "NoSuchBucket":
            return SourceNotFound(
                f"Could not {what}: {where} does not exist. Check the bucket's name, the endpoint URL and the region."
            )
        if code == "InvalidBucketName":
            return SourceNotFound(f"Could not {what}: {self.bucket!r} is not a valid bucket name ({server}).")
        if code in CREDENTIAL_CODES:
            return SourceAuthFailed(
                f"Could not {what} in {where}: the server refused the credentials ({answer}). Check the access"
                " key ID, the secret access key (and session token), and that the key may list and read the bucket."
            )
        if code in _BUSY_CODES or status >= 500:
            return SourceUnavailable(
                f"Could not {what} in {where}: the server answered {answer or status} (busy or failing)."
                " The next run tries again."
            )
        if isinstance(exc, bce.ClientError):
            return SourceError(f"Could not {what} in {where}: the server answered {answer or status}.")
        return SourceError(f"Could not {what} in {where}: {exc.__class__.__name__}.")

    # -- listing ----------------------------------------------------------------------------------
    def entries(self) -> Iterator[Entry]:
        """One :class:`Entry` per object under the prefix, one page of 1,000 keys fetched at a time.

        Raises:
            SourceUnavailable, SourceAuthFailed, SourceNotFound (no such bucket), SourceError.
        """
        paginator = self.client.get_paginator("list_objects_v2")
        pages = paginator.paginate(Bucket=self.bucket, Prefix=self.prefix, PaginationConfig={"PageSize": PAGE_SIZE})
        try:
            for page in pages:
                for item in page.get("Contents", ()):
                    entry = self._entry(item)
                    if entry is not None:
                        yield entry
        except (bce.BotoCoreError, bce.ClientError) as exc:
            raise self.error("list the objects", exc) from exc

    def _entry(self, item: Mapping[str, Any]) -> Entry | None:
        key: str = item["Key"]
        if key.endswith("/") or not key.startswith(self.prefix):
            return None  # a folder marker (or a key the server should not have listed)
        path = key[len(self.prefix) :]
        if any(part in ("", ".", "..") for part in path.split("/")):
            log.warning(
                "The S3 object %r in bucket %r is left out: its name has an empty, '.' or '..' part.", key, self.bucket
            )
            return None
        etag = str(item.get("ETag", "")).strip('"')
        if not etag:  # no server we know omits it; the size and time then stand for the version
            etag = f"size:{item.get('Size')}:{item.get('LastModified')}"
        return Entry(
            path=path,
            version=etag,
            size=item.get("Size"),
            content_key=content_key_of(etag),
            url=f"s3://{self.bucket}/{key}",
        )

    # -- reading ----------------------------------------------------------------------------------
    def fetch(self, entry: Entry, out: Sink) -> None:
        """Write the object's bytes to ``out``, streamed in 1 MiB pieces, as of the listed ETag.

        Raises:
            EntryGone: the object was deleted or overwritten since the listing, or is archived.
            SourceUnavailable, SourceAuthFailed, SourceNotFound, SourceError.
        """
        key = self.prefix + entry.path
        what = f"read {entry.path!r}"
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": key}
        if not entry.version.startswith("size:"):
            args["IfMatch"] = f'"{entry.version}"'
        try:
            response = self.client.get_object(**args)
        except bce.ClientError as exc:
            code = error_code(exc)
            if code in MISSING_CODES:
                raise EntryGone(f"{entry.path!r} was deleted from bucket {self.bucket!r} since it was listed.") from None
            if code in ("PreconditionFailed", "412"):
                raise EntryGone(
                    f"{entry.path!r} in bucket {self.bucket!r} was overwritten since it was listed; the next run reads it."
                ) from None
            if code == "InvalidObjectState":
                raise EntryGone(
                    f"{entry.path!r} in bucket {self.bucket!r} is archived (Glacier or Deep Archive) and cannot be"
                    " read until it is restored."
                ) from None
            raise self.error(what, exc) from exc
        except bce.BotoCoreError as exc:
            raise self.error(what, exc) from exc
        body = response["Body"]
        try:
            got = str(response.get("ETag", "")).strip('"')
            if "IfMatch" in args and got and got != entry.version:  # a server that ignores If-Match
                raise EntryGone(
                    f"{entry.path!r} in bucket {self.bucket!r} was overwritten since it was listed; the next run reads it."
                )
            for chunk in body.iter_chunks(FETCH_CHUNK):
                out.write(chunk)
        except (bce.BotoCoreError, bce.ClientError) as exc:
            raise self.error(what, exc) from exc
        finally:
            body.close()

    def close(self) -> None:
        """Close the client's connection pool."""
        self.client.close()


__all__ = ["FETCH_CHUNK", "PAGE_SIZE", "RedactSessionTokens", "S3Source", "content_key_of"]
