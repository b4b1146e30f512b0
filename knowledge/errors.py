"""Errors raised by the knowledge layer.

One base class, :class:`KnowledgeError`, and subclasses named for the condition. Every message is
written for a person: it says what was expected, what was got, and where possible what to do. The
UI catches :class:`KnowledgeError` and shows its message; nobody sees a traceback for bad input.
"""

from __future__ import annotations

import struct
import zipfile
import zlib


class KnowledgeError(Exception):
    """Base class of every error the knowledge layer raises on purpose."""


class ConfigError(KnowledgeError, ValueError):
    """A setting is missing, unknown or has an invalid value."""


class MachineLocalBackend(ConfigError):
    """A template or store asked for a backend whose points only this machine reaches (the memory
    backend, Qdrant's local mode, the embedded PostgreSQL) while the catalog is shared (``catalog.url``)."""


class InvalidArgument(KnowledgeError, ValueError):
    """A call received input it cannot work with (empty batch, bad filter, non-JSON payload, ...).

    ``param``: the argument it is about (``"role"``, ``"username"``) when the raiser names one; the
    REST API answers it as the error's ``param``."""

    def __init__(self, *args: object, param: str | None = None) -> None:
        super().__init__(*args)
        self.param = param


class AccountNotFound(InvalidArgument, LookupError):
    """No account, group or API key by that name or id (one the caller may not see is worded the same)."""


class StoreNotFound(KnowledgeError, LookupError):
    """The named store (collection) does not exist."""

    def __init__(self, name: str, detail: str = "") -> None:
        self.name = name
        super().__init__(f"Vector store {name!r} does not exist{': ' + detail if detail else '.'}")


class DimensionMismatch(KnowledgeError, ValueError):
    """Vectors of one size were given to a store prepared for another size."""

    def __init__(self, expected: int, got: int) -> None:
        self.expected = expected
        self.got = got
        super().__init__(
            f"This store was prepared with {expected} dimensions, but received embeddings of {got}."
            " Two embedding models need two stores."
        )


class DistanceMismatch(KnowledgeError, ValueError):
    """A store was prepared with one distance and asked to use another."""


class StoreFull(KnowledgeError):
    """An upsert would take a store past its backend's chunk limit."""


class StoreLocked(KnowledgeError):
    """Another process holds the write lock of a store."""


class StorageError(KnowledgeError):
    """The disk refused a write (full, read-only, no permission); the data keeps its last complete version."""


class StoreCorrupt(KnowledgeError):
    """A store's files on disk are unreadable or inconsistent."""


class BackendUnavailable(KnowledgeError):
    """A vector-store or file-store backend is unknown, failed to load, or cannot be reached."""


class EmbeddingUnavailable(KnowledgeError):
    """No embedding model can be loaded (missing or corrupt model files, no network for a download)."""


class UnsupportedFile(KnowledgeError):
    """A file's real format cannot be read (legacy Word, an image, an archive, ...)."""


class OcrUnavailable(UnsupportedFile):
    """A file needs OCR (a scan, an image) and the OCR package cannot be loaded on this platform."""


class ReaderLimitExceeded(UnsupportedFile):
    """A file's reader passed its memory or time limit (``ingest.reader_memory_mb``,
    ``ingest.reader_timeout_seconds``) and its child process was stopped."""


class ReaderCrashed(UnsupportedFile):
    """A file's reader stopped unexpectedly (its child process died without an answer)."""


class PasswordRequired(KnowledgeError):
    """An encrypted document needs a password (none given, or the one given is wrong)."""


class EmptyDocument(KnowledgeError):
    """A document yielded no text at all (for example a scanned PDF without a text layer)."""


class FileTooLarge(KnowledgeError):
    """A file is over the configured size limit."""


class FileNotFoundInStore(KnowledgeError, LookupError):
    """No stored file has the given id."""


class PathNotAllowed(KnowledgeError, PermissionError):
    """A local path lies outside the folders this caller may read (``ingest.allowed_dirs``,
    ``chat.allowed_dirs``), in a hidden folder, or in the data folder."""


class BundleError(KnowledgeError):
    """A store bundle or a backup (:mod:`knowledge.portable`) cannot be used; nothing was imported."""


class BundleCorrupt(BundleError):
    """A bundle or backup is truncated, tampered with (a checksum differs) or misses a member."""


class BundleTooNew(BundleError):
    """A bundle or backup was written by a newer format version than this program reads."""


class StoreExists(KnowledgeError):
    """A store of that name exists already (import under another name with ``--as NAME``)."""


class TargetNotEmpty(KnowledgeError):
    """A restore was asked to write into a data folder that already holds data."""


class PermissionDenied(KnowledgeError, PermissionError):
    """The signed-in user may see the store (or the object) but not do this to it: write to a store
    shared read-only, delete or share a store they do not own, change settings without being an
    admin. A store the user may not see at all is :class:`StoreNotFound` instead (its name is not
    confirmed to exist)."""


class QuotaExceeded(PermissionDenied):
    """A write would take a person, a group or a store past a storage quota (stored bytes, files or
    chunks); nothing was written. The words name the limit, the use and what would be added."""

    def __init__(self, message: str, *, scope: str, name: str, measure: str, limit: int, used: int) -> None:
        super().__init__(message)
        self.scope, self.name, self.measure, self.limit, self.used = scope, name, measure, limit, used


class RateLimited(KnowledgeError):
    """A key sent more requests this minute than its limit; ``retry_after`` is the seconds to the
    next minute's window."""

    def __init__(self, message: str, *, limit: int, used: int, retry_after: int) -> None:
        super().__init__(message)
        self.limit, self.used, self.retry_after = limit, used, retry_after


class AuthenticationFailed(KnowledgeError):
    """A sign-in, session, API key or invitation is not valid: a wrong username or password, an
    expired session, a revoked key, a used invitation. The message never says which part was wrong."""


# -- a failure in words ----------------------------------------------------------------------------------
#: Where this process's log goes, in words ("the ingest worker's log"), set once by the program that
#: configures logging (:func:`set_log_place`); ``None``: nothing is said of a log.
_LOG_PLACE: str | None = None

#: The longest library message quoted in a sentence of :func:`in_words`.
_MAX_QUOTED = 200


def set_log_place(where: str | None) -> None:
    """Say where this process's log is (``"the ingest worker's log"``, ``"the messages printed
    above"``), for :func:`unexpected_problem`; ``None`` says nothing of a log."""
    global _LOG_PLACE
    _LOG_PLACE = where


def log_place() -> str | None:
    """Where this process said its log is (:func:`set_log_place`), or ``None``."""
    return _LOG_PLACE


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n", 1)[0].split()).strip(" .:;")
    if len(text) > _MAX_QUOTED:
        text = text[: _MAX_QUOTED - 1] + "…"
    return text


def _is_xml_error(exc: BaseException) -> bool:
    """lxml's ``XMLSyntaxError``, ElementTree's ``ParseError``, expat's ``ExpatError`` (and
    defusedxml's), recognised without importing lxml."""
    return any(
        k.__name__ in ("XMLSyntaxError", "ParseError", "ExpatError")
        and k.__module__.split(".")[0] in ("lxml", "xml", "pyexpat", "defusedxml")
        for k in type(exc).__mro__
    )


def known_problem(exc: BaseException) -> str | None:
    """The words for an exception that says something about the *file* (not a bug), or ``None``:
    a :class:`KnowledgeError` (its message), running out of memory or nesting, a damaged ZIP or
    compressed stream, a truncated structure, malformed XML, undecodable text, a missing part, a
    file that could not be read from disk."""
    if isinstance(exc, KnowledgeError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "it needed more memory than the reader may use"
    if isinstance(exc, RecursionError):
        return "it is nested too deeply to read"
    if isinstance(exc, zipfile.LargeZipFile):
        return "its ZIP structure needs ZIP64 extensions that are not enabled"
    if isinstance(exc, zipfile.BadZipFile):
        return "the ZIP structure is damaged"
    if isinstance(exc, zlib.error):
        return "its compressed data is damaged"
    if isinstance(exc, UnicodeDecodeError):
        bad = exc.object[exc.start : exc.start + 1] if isinstance(exc.object, bytes | bytearray) else b""
        return f"its text is not valid {exc.encoding.upper().replace('_', '-')}" + (
            f" (byte 0x{bad[0]:02X} at position {exc.start:,})" if bad else ""
        )
    if isinstance(exc, UnicodeError):
        return "its text is in an encoding that cannot be read"
    if isinstance(exc, (struct.error, EOFError)):
        return "the file ends early or its structure is damaged"
    if _is_xml_error(exc):
        line = getattr(exc, "lineno", None)
        if line is None:
            position = getattr(exc, "position", None)
            line = position[0] if isinstance(position, tuple) and position else None
        return f"its XML is malformed{f' (line {line:,})' if isinstance(line, int) and line > 0 else ''}"
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else None
        return f"a part it refers to is missing{f' ({key})' if isinstance(key, str) and key else ''}"
    if isinstance(exc, IndexError):
        return "it refers to a part or position that does not exist"
    if isinstance(exc, TimeoutError):
        return "reading it took too long"
    if isinstance(exc, OSError) and exc.strerror:
        return f"it could not be read ({exc.strerror})"
    return None


def in_words(exc: BaseException) -> str:
    """What ``exc`` says is wrong with a file, as a clause without the exception's class name,
    for a reader's message (``f"unreadable DOCX: {in_words(exc)}"``): the words of
    :func:`known_problem`, else the library's own message (first line, at most 200 characters) as
    "its content is not what the format allows (<message>)", else "its structure is not what the
    reader expects"."""
    known = known_problem(exc)
    if known is not None:
        return known
    said = _first_line(exc)
    return f"its content is not what the format allows ({said})" if said else "its structure is not what the reader expects"


def unexpected_problem(exc: BaseException, during: str = "while reading this file", culprit: str = "the reader") -> str:
    """The words for an exception that escaped a reader or ingestion: :func:`known_problem` when it
    says something about the file, else "an unexpected problem while reading this file (a bug in
    the reader)" (``during``, ``culprit``) -- with "; it was recorded in <where>" when this process
    said where its log is (:func:`set_log_place`). The caller logs the traceback (``log.exception``)."""
    known = known_problem(exc)
    if known is not None:
        return known
    where = f"; it was recorded in {_LOG_PLACE}" if _LOG_PLACE else ""
    return f"an unexpected problem {during} (a bug in {culprit}){where}"
