"""The file-store contract: id-addressed file storage, OpenAI-Files-API style.

A :class:`FileStore` keeps uploaded files and hands them back by id: :meth:`~FileStore.save` takes a
name, a content type and the bytes (or a binary stream) and returns a :class:`StoredFile` with a
generated id; :meth:`~FileStore.find`, :meth:`~FileStore.get`, :meth:`~FileStore.content`,
:meth:`~FileStore.list` and :meth:`~FileStore.delete` work by id; :meth:`~FileStore.find_by_sha256`
finds identical bytes. Which vector store or chat uses a file, the file store does not know.

Every backend: ids are opaque (a malformed one is *not found*, never a path); names are data, kept as
given but for control characters (:func:`clean_name`); content is streamed both ways; sizes in
bytes, ``sha256`` lowercase hex, ``created`` timezone-aware UTC; each save returns its own id and
name, even for bytes already stored. The conventions in full: ``docs/backends.md``.
"""

from __future__ import annotations

import builtins  # the name `list` is a FileStore method below; annotations after it say builtins.list
import json
import mimetypes
import re
import secrets
import threading
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, BinaryIO, ClassVar

from knowledge._names import clean_file_name
from knowledge.errors import FileNotFoundInStore, FileTooLarge, InvalidArgument

#: What :meth:`FileStore.save` accepts as content: bytes-like, or a binary stream with ``read(n)``.
Source = bytes | bytearray | memoryview | BinaryIO

#: Chunk size (bytes) used to copy a source stream.
CHUNK_SIZE = 1024 * 1024

#: The longest name accepted, in characters (after cleaning). Far past any file system's limit.
MAX_NAME_CHARS = 1024
#: The longest content type accepted, in characters.
MAX_CONTENT_TYPE_CHARS = 255
#: The largest ``metadata`` accepted, in bytes of its JSON form.
MAX_METADATA_BYTES = 64 * 1024

DEFAULT_CONTENT_TYPE = "application/octet-stream"
UNNAMED = "unnamed"

_FILE_ID = re.compile(r"file-[0-9a-f]{32}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class StoredFile:
    """One stored file, as :meth:`FileStore.save`, :meth:`~FileStore.find` and the others return it.

    Attributes:
        id: the store's id for the file (built-in format ``file-<32 hex>``).
        name: the user's file name, cleaned by :func:`clean_name` (data, never a path).
        content_type: a media type such as ``"application/pdf"``.
        size: length of the content in bytes.
        sha256: lowercase hex SHA-256 of the content (64 characters).
        created: when it was saved, timezone-aware, UTC.
        metadata: JSON-serialisable extra data given to :meth:`FileStore.save` (read-only view).
    """

    id: str
    name: str
    content_type: str
    size: int
    sha256: str
    created: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.created.tzinfo is None or self.created.utcoffset() is None:
            raise InvalidArgument(f"StoredFile.created must be timezone-aware, got {self.created!r}.")
        if self.created.utcoffset() != timedelta(0):
            object.__setattr__(self, "created", self.created.astimezone(UTC))
        if not isinstance(self.metadata, MappingProxyType):
            object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (``created`` as an ISO 8601 string with ``+00:00``)."""
        return {
            "id": self.id,
            "name": self.name,
            "content_type": self.content_type,
            "size": self.size,
            "sha256": self.sha256,
            "created": self.created.isoformat(),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredFile:
        """The inverse of :meth:`to_dict`.

        Raises:
            InvalidArgument: a field is missing or has the wrong type or form.
        """
        try:
            created = datetime.fromisoformat(data["created"])
            record = cls(
                id=data["id"],
                name=data["name"],
                content_type=data["content_type"],
                size=data["size"],
                sha256=data["sha256"],
                created=created,
                metadata=data.get("metadata") or {},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgument(f"Not a stored-file record: {exc!r}") from None
        if not (
            isinstance(record.id, str)
            and isinstance(record.name, str)
            and isinstance(record.content_type, str)
            and is_sha256(record.sha256)
            and isinstance(record.size, int)
            and not isinstance(record.size, bool)
            and record.size >= 0
        ):
            raise InvalidArgument(f"Not a stored-file record: a field has the wrong type in {dict(data)!r}.")
        return record


# -- helpers every backend shares -----------------------------------------------------------------

_clock_lock = threading.Lock()
_last_created = datetime.min.replace(tzinfo=UTC)


def created_now() -> datetime:
    """UTC now, strictly later than the previous call in this process (a store's ``created``
    times are then distinct, so its list order is stable)."""
    global _last_created
    with _clock_lock:
        now = datetime.now(UTC)
        if now <= _last_created:
            now = _last_created + timedelta(microseconds=1)
        _last_created = now
        return now


def new_file_id() -> str:
    """A fresh, unguessable file id: ``file-`` + 32 lowercase hex digits (128 random bits)."""
    return "file-" + secrets.token_hex(16)


def given_identity(file_id: object, created: object) -> tuple[str, datetime]:
    """The id and time a save keeps (:meth:`FileStore.save`'s ``file_id`` and ``created``): a new id
    and now when ``file_id`` is ``None``, else ``file_id`` checked and ``created`` (default now).

    Raises:
        InvalidArgument: ``file_id`` is not a well-formed id, or ``created`` not a timezone-aware
            :class:`~datetime.datetime`.
    """
    if file_id is None:
        if created is not None:
            raise InvalidArgument("A save keeps a given creation time only with its given file id.")
        return new_file_id(), created_now()
    if not is_file_id(file_id):
        raise InvalidArgument(f"A file id is 'file-' and 32 hex digits, got {file_id!r}.")
    if created is None:
        return str(file_id), created_now()
    if not isinstance(created, datetime) or created.utcoffset() is None:
        raise InvalidArgument(f"A file's creation time is a timezone-aware datetime, got {created!r}.")
    return str(file_id), created.astimezone(UTC)


def id_taken(file_id: str) -> InvalidArgument:
    """The error of a save under a ``file_id`` that is stored already."""
    return InvalidArgument(f"A file with the id {file_id!r} is stored already; it is not replaced.")


def is_file_id(value: object) -> bool:
    """``True`` when ``value`` is a well-formed built-in file id (``file-`` + 32 lowercase hex)."""
    return isinstance(value, str) and _FILE_ID.fullmatch(value) is not None


def is_sha256(value: object) -> bool:
    """``True`` when ``value`` is a lowercase hex SHA-256 digest (64 characters)."""
    return isinstance(value, str) and _SHA256.fullmatch(value) is not None


def check_file_id_type(file_id: object) -> None:
    """Raise :class:`InvalidArgument` when ``file_id`` is not a ``str`` (a malformed str is "not found")."""
    if not isinstance(file_id, str):
        raise InvalidArgument(f"A file id is a string like 'file-0123...', got {type(file_id).__name__}.")


def normalize_sha256(sha256: object) -> str:
    """``sha256`` lower-cased and checked.

    Raises:
        InvalidArgument: not a string of 64 hex digits.
    """
    if isinstance(sha256, str) and is_sha256(sha256.strip().lower()):
        return sha256.strip().lower()
    raise InvalidArgument(f"A SHA-256 digest is 64 hex digits, got {sha256!r}.")


def clean_name(name: object) -> str:
    """The user's file name made safe to keep as data -- and only that.

    Control characters (Unicode category Cc: NUL, tab, newline, DEL, ...) and invisible format
    characters that carry nothing in a name (zero-width space, byte-order mark, soft hyphen, ...:
    :data:`knowledge._names.INVISIBLE`) are removed, unpaired surrogates become U+FFFD, everything
    else is kept as given: slashes, dots, ``..``, reserved device names, any script
    (:func:`knowledge._names.clean_file_name`). A name that is empty or only white space after that
    becomes ``"unnamed"``. The result is never used as a path by any backend.

    Raises:
        InvalidArgument: ``name`` is not a ``str``, is longer than :data:`MAX_NAME_CHARS` characters,
            or holds a bidirectional control or line separator (named in the message).
    """
    if not isinstance(name, str):
        raise InvalidArgument("A file name is text (a string).")
    cleaned = clean_file_name(name)
    if not cleaned.strip():
        return UNNAMED
    if len(cleaned) > MAX_NAME_CHARS:
        raise InvalidArgument(f"A file name may have at most {MAX_NAME_CHARS} characters, this one has {len(cleaned)}.")
    return cleaned


def clean_content_type(content_type: object, name: str = "") -> str:
    """The content type to store: ``content_type`` stripped, or a guess from ``name`` when it is blank.

    ``None`` or a blank string means "unknown": the type is guessed from the name's extension
    (:func:`mimetypes.guess_type`) and falls back to ``application/octet-stream``.

    Raises:
        InvalidArgument: not a ``str``/``None``, longer than :data:`MAX_CONTENT_TYPE_CHARS`, or it
            contains control characters or white space.
    """
    if content_type is None or (isinstance(content_type, str) and not content_type.strip()):
        guessed, _ = mimetypes.guess_type(name, strict=False) if name else (None, None)
        return guessed or DEFAULT_CONTENT_TYPE
    if not isinstance(content_type, str):
        raise InvalidArgument(f"A content type is a string like 'text/plain', got {type(content_type).__name__}.")
    ct = content_type.strip()
    if len(ct) > MAX_CONTENT_TYPE_CHARS or any(unicodedata.category(c) == "Cc" for c in ct):
        raise InvalidArgument(f"Not a valid content type: {content_type[:80]!r}.")
    return ct


def clean_metadata(metadata: object) -> dict[str, Any]:
    """A JSON round-tripped copy of ``metadata`` (``None`` gives ``{}``).

    Raises:
        InvalidArgument: not a dict with ``str`` keys, not JSON-serialisable (NaN and infinities
            included), or larger than :data:`MAX_METADATA_BYTES` bytes as JSON.
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise InvalidArgument("File metadata is a dict with string keys.")
    try:
        text = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidArgument(f"File metadata must be JSON-serialisable: {exc}") from None
    if size > MAX_METADATA_BYTES:
        raise InvalidArgument(f"File metadata may be at most {MAX_METADATA_BYTES} bytes as JSON, got {size}.")
    return json.loads(text)


def check_max_bytes(max_bytes: object) -> int | None:
    """``max_bytes`` checked: ``None`` (no limit) or an ``int`` >= 0.

    Raises:
        InvalidArgument: anything else.
    """
    if max_bytes is None:
        return None
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise InvalidArgument(f"max_bytes is a number of bytes >= 0 or None, got {max_bytes!r}.")
    return max_bytes


def too_large(name: str, size: int, limit: int, *, exact: bool) -> FileTooLarge:
    """The :class:`FileTooLarge` for ``name``: ``size`` bytes (or at least that many) over ``limit``.

    The error carries ``size``, ``limit`` and ``exact`` as attributes.
    """
    got = f"{size:,} bytes" if exact else f"more than {limit:,} bytes (stopped reading at {size:,})"
    err = FileTooLarge(f"The file {name!r} is too large: {got}, over the limit of {limit:,} bytes.")
    err.size, err.limit, err.exact = size, limit, exact  # type: ignore[attr-defined]
    return err


def read_chunks(
    source: Source, *, name: str, max_bytes: int | None = None, chunk_size: int = CHUNK_SIZE
) -> Iterator[bytes | bytearray | memoryview]:
    """The content of ``source`` in chunks of at most ``chunk_size`` bytes.

    ``source`` is bytes-like (sliced, not copied) or a binary stream read with ``read(chunk_size)``
    until it returns ``b""``. At most one chunk is held at a time, so memory stays at about
    ``chunk_size`` whatever the size of the file.

    Raises:
        FileTooLarge: the content passes ``max_bytes`` (a bytes-like source is checked before the
            first chunk; a stream as soon as the limit is passed -- the rest is not read).
        InvalidArgument: ``source`` is neither bytes-like nor a binary stream (for example ``str``,
            or a text-mode file whose ``read`` returns ``str``).
        Exception: whatever the stream's own ``read`` raises, unchanged.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source).cast("B")
        if max_bytes is not None and view.nbytes > max_bytes:
            raise too_large(name, view.nbytes, max_bytes, exact=True)
        for start in range(0, view.nbytes, chunk_size):
            yield view[start : start + chunk_size]
        return
    read = getattr(source, "read", None)
    if isinstance(source, str) or not callable(read):
        raise InvalidArgument(f"File content is bytes or a binary stream with read(n), got {type(source).__name__}.")
    total = 0
    while True:
        chunk = read(chunk_size)
        if chunk is None:
            raise InvalidArgument("The stream returned no data without end of file (a non-blocking stream?).")
        if not isinstance(chunk, (bytes, bytearray)):
            raise InvalidArgument(
                f"File content must be read in binary mode: read() returned {type(chunk).__name__}, not bytes."
            )
        if not chunk:
            return
        total += len(chunk)
        if max_bytes is not None and total > max_bytes:
            raise too_large(name, total, max_bytes, exact=False)
        yield chunk
        del chunk  # hold one chunk at a time, not the last one while reading the next


# -- the contract ---------------------------------------------------------------------------------


class FileStore(ABC):
    """Id-addressed file storage. Implementations are thread-safe.

    Backends are discovered through the entry-point group ``knowledge.file_store_backends`` and
    constructed as ``Backend(settings)`` (see :mod:`knowledge.filestore.registry`).
    """

    #: The backend's registry name (its entry-point name in ``knowledge.file_store_backends``).
    name: ClassVar[str]

    @abstractmethod
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
        """Store the bytes of ``stream`` under a new id (or ``file_id``) and return their record.

        Args:
            name: the user's file name; kept as data only, cleaned by :func:`clean_name`.
            content_type: a media type; ``None`` or blank guesses from ``name`` (see
                :func:`clean_content_type`).
            stream: bytes-like, or a binary stream read in chunks until ``b""`` -- never whole.
                The stream is not closed.
            max_bytes: the size limit in bytes (``None``: none). Enforced while reading: the save
                stops as soon as the limit is passed and nothing is stored.
            metadata: a JSON-serialisable dict kept with the record (see :func:`clean_metadata`).
            file_id: keep this id instead of a new one -- a copy from another store keeps its id
                (``knowledge files move``). ``None``: a new id.
            created: with ``file_id``, the creation time to keep (timezone-aware; default now).

        Returns:
            A new :class:`StoredFile`; its id differs from every other, even for identical bytes.

        Raises:
            FileTooLarge: the content is over ``max_bytes``; nothing was stored.
            InvalidArgument: a bad name, content type, metadata, ``max_bytes`` or source type; a
                malformed ``file_id`` or ``created``, or a ``file_id`` stored already (it is not
                replaced; nothing changed -- :func:`given_identity`, :func:`id_taken`).
            Exception: an error raised by ``stream.read`` propagates unchanged; nothing was stored.
        """

    @abstractmethod
    def find(self, file_id: str) -> StoredFile | None:
        """The record of ``file_id``, or ``None`` when no such file is stored (or the id is malformed).

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
        """

    def get(self, file_id: str) -> StoredFile:
        """The record of ``file_id``.

        Raises:
            FileNotFoundInStore: no such file is stored (or the id is malformed).
            InvalidArgument: ``file_id`` is not a ``str``.
        """
        found = self.find(file_id)
        if found is None:
            raise FileNotFoundInStore(f"No stored file has the id {file_id!r}.")
        return found

    @abstractmethod
    def content(self, file_id: str) -> BinaryIO:
        """An open binary stream over the content of ``file_id``, positioned at the start.

        The caller closes it; it is a context manager (``with store.content(fid) as f: ...``). Read
        it in chunks: the content is not loaded into memory. A stream opened before a
        :meth:`delete` may keep reading the content it opened.

        Raises:
            FileNotFoundInStore: no such file is stored (or the id is malformed).
            InvalidArgument: ``file_id`` is not a ``str``.
        """

    @abstractmethod
    def list(self) -> list[StoredFile]:
        """Every stored file, newest first (by ``created``; ties broken by id)."""

    @abstractmethod
    def delete(self, file_id: str) -> bool:
        """Remove ``file_id``. Returns ``True`` when a file was removed, ``False`` when none had that id.

        Raises:
            InvalidArgument: ``file_id`` is not a ``str``.
        """

    def find_by_sha256(self, sha256: str) -> builtins.list[StoredFile]:
        """Every stored file whose content has this SHA-256 (hex, any case), newest first.

        Raises:
            InvalidArgument: ``sha256`` is not 64 hex digits.
        """
        digest = normalize_sha256(sha256)
        return [f for f in self.list() if f.sha256 == digest]

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op unless a backend holds something
        """Release what the store holds open (nothing, for the filesystem backend)."""

    def __enter__(self) -> FileStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
