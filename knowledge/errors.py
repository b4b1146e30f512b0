"""Errors raised by the knowledge layer.

One base class, :class:`KnowledgeError`, and subclasses named for the condition. Every message is
written for a person: it says what was expected, what was got, and where possible what to do. The
UI catches :class:`KnowledgeError` and shows its message; nobody sees a traceback for bad input.
"""

from __future__ import annotations


class KnowledgeError(Exception):
    """Base class of every error the knowledge layer raises on purpose."""


class ConfigError(KnowledgeError, ValueError):
    """A setting is missing, unknown or has an invalid value."""


class MachineLocalBackend(ConfigError):
    """A template or store asked for a backend whose points only this machine reaches (the memory
    backend, Qdrant's local mode, the embedded PostgreSQL) while the catalog is shared (``catalog.url``)."""


class InvalidArgument(KnowledgeError, ValueError):
    """A call received input it cannot work with (empty batch, bad filter, non-JSON payload, ...)."""


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


class AuthenticationFailed(KnowledgeError):
    """A sign-in, session, API key or invitation is not valid: a wrong username or password, an
    expired session, a revoked key, a used invitation. The message never says which part was wrong."""
