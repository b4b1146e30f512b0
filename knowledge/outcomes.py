"""Why a file failed, in words a person reads -- and whether trying again can help.

Readers and the workbench record a failure's reason as text (``FileRecord.reason``,
``IngestResult.message``). Some reasons carry a library's exception name and message
(``unreadable PDF (damaged or truncated?): PdfStreamError: Stream has ended unexpectedly``,
``unreadable DOCX: KeyError: "There is no item named 'word/document.xml'"``), which mean nothing to
most people -- records kept before the reasons were written in words at the source
(:func:`knowledge.errors.in_words`, :func:`knowledge.errors.unexpected_problem`).
:func:`plain_reason` says the same in words, without the exception's name;
:func:`can_retry` tells a failure a retry can fix (a password, an interruption, a busy or
unreachable service) from one it cannot (an empty file, a damaged file, an unsupported format).
Nothing here changes what is recorded; the UI uses these to show it.

:class:`Outcome` names what happened to one ingested file and :class:`IngestResult` reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum


class Outcome(StrEnum):
    """What happened to one file given for ingestion. Members equal their value as ``str``
    (``Outcome.INDEXED == "indexed"``), so code and JSON that hold the plain words keep working."""

    INDEXED = "indexed"  #: its chunks are searchable now
    UNCHANGED = "unchanged"  #: the same bytes were already indexed under that name: nothing done
    DUPLICATE = "duplicate"  #: the same bytes are indexed under another name: this name is added to them, not indexed twice
    FAILED = "failed"  #: it could not be read or indexed (the message says why)
    CANCELLED = "cancelled"  #: the caller stopped it, or the batch stopped before it

    @property
    def ok(self) -> bool:
        """True for indexed, unchanged and duplicate: the file's text is searchable in the store."""
        return self in (Outcome.INDEXED, Outcome.UNCHANGED, Outcome.DUPLICATE)


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What happened to one file: ``outcome`` (an :class:`Outcome`).

    ``chunks`` and ``pages`` count what was indexed; ``seconds`` is the wall time for this file;
    ``message`` says in words what happened (the reason when it failed); ``error`` is the error
    class name when it failed; ``replaced_file_id`` the earlier version a changed file replaced.
    """

    name: str
    outcome: Outcome
    message: str
    file_id: str | None = None
    chunks: int = 0
    pages: int | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    replaced_file_id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return Outcome(self.outcome).ok


# "PdfStreamError: ...", "KeyError: ...", "zipfile.BadZipFile: ...", "(ValueError: ...)" up to the end.
_EXCEPTION = re.compile(
    r"\s*[(\[]?\b(?:[A-Za-z_][\w]*\.)*(?:[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Failure)|BadZipFile|"
    r"KeyError|OSError|IOError|EOFError|AssertionError|StopIteration)\b(?::.*|\))?$",
    re.S,
)

# (a reason starting like this, what to say instead)
_REWORDED: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"^unreadable PDF", re.I),
        "This PDF is damaged or incomplete (perhaps cut short while copying), so its text cannot be read.",
    ),
    (re.compile(r"^unsupported PDF encryption", re.I), "This PDF is locked with an encryption method the app cannot open."),
    (re.compile(r"^unreadable DOCX: the file is damaged", re.I), "This Word file is damaged, so its text cannot be read."),
    (
        re.compile(r"^unreadable DOCX: not an Office package", re.I),
        "This file is named like a Word document but is not one.",
    ),
    (
        re.compile(r"^unreadable DOCX", re.I),
        "This Word file cannot be read: its inner structure is broken or not what Word writes.",
    ),
    (re.compile(r"^unreadable CSV", re.I), "This CSV file cannot be read as a table."),
    # a record kept before issue 38 ("unexpected error (KeyError: 3); see the server log."): today's
    # reason says it in words itself (knowledge.errors.unexpected_problem) and is shown as it is
    (
        re.compile(r"unexpected error", re.I),
        "Something unexpected went wrong while reading this file (a bug in the reader).",
    ),
]

# Failures a retry can fix: a password to give, an interrupted or cancelled run, a service that was
# busy, locked or out of reach.
_RETRYABLE = re.compile(
    r"password|interrupted|cancel|not started|timed? ?out|timeout|did not arrive|unavailable|unreachable|cannot reach|"
    r"could not reach|connection|locked|busy|try again|temporar",
    re.I,
)


def plain_reason(reason: str | None) -> str:
    """``reason`` in words, with no exception class name or library message in it; ``""`` for none.

    Known reader messages are reworded ("unreadable PDF ...: PdfStreamError: ..." -> "This PDF is
    damaged or incomplete ..."); elsewhere an exception name and what follows it are cut off. The
    first letter is upper-case and the text ends with a full stop.
    """
    text = " ".join((reason or "").split())
    if not text:
        return ""
    for pattern, words in _REWORDED:
        if pattern.search(text):
            return words
    cut = _EXCEPTION.sub("", text).rstrip(" :;,(-")
    text = cut or "This file cannot be read"
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


# Failures told apart by the name of their error class (``FileRecord.error``, ``IngestResult.error``;
# see knowledge.errors): whether a retry of the same bytes can succeed. A class not named here (a
# backend's KnowledgeError, a bug) is judged by its message.
_RETRY_BY_ERROR = {
    "PasswordRequired": True,
    "Cancelled": True,
    "StoreLocked": True,
    "CatalogLocked": True,
    "BackendUnavailable": True,
    "EmbeddingUnavailable": True,
    "UnsupportedFile": False,
    "EmptyDocument": False,
    "FileTooLarge": False,
    # a reader past its limits fails the same way again unless the limit is raised (its reason names
    # the setting); a reader that crashed may have been the machine's trouble, not the file's
    "ReaderLimitExceeded": False,
    "ReaderCrashed": True,
}


def _failure(failure: object) -> tuple[str | None, str | None]:
    """``(error class name, text)`` of a failure: a :class:`~knowledge.catalog.FileRecord` (``error``,
    ``reason``), an ``IngestResult`` (``error``, ``message``), or a bare reason text (no error name)."""
    if failure is None or isinstance(failure, str):
        return None, failure
    text = getattr(failure, "reason", None)
    if text is None:
        text = getattr(failure, "message", None)
    return getattr(failure, "error", None), text


def can_retry(failure: object) -> bool:
    """Whether trying the same file again can succeed: a password is asked for or was wrong, the run
    was interrupted or cancelled, or a service was busy or out of reach. Not for an empty file, a
    damaged one or an unsupported format (a legacy .doc, an image, ...): the same bytes fail again.

    ``failure`` is a failed ``FileRecord`` or ``IngestResult`` -- judged by its error class when it
    names one this module knows, else by its text -- or a bare reason text (a record of a catalog
    that did not keep the error class yet)."""
    error, text = _failure(failure)
    if error in _RETRY_BY_ERROR:
        return _RETRY_BY_ERROR[error]
    return bool(text and _RETRYABLE.search(text))


def needs_password(failure: object) -> bool:
    """Whether the failure asks for a password (missing or wrong): its error class is
    ``PasswordRequired``. ``failure`` is a ``FileRecord``, an ``IngestResult`` or a reason text; only
    when no error class is known (a bare text, a record kept before the catalog recorded the class)
    is the text searched for "password"."""
    error, text = _failure(failure)
    if error is not None:
        return error == "PasswordRequired"
    return "password" in (text or "").lower()


__all__ = ["IngestResult", "Outcome", "can_retry", "needs_password", "plain_reason"]
