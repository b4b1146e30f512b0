"""What a source is: a place a team's files live (a share, a repository, a mailbox, a drive, a
bucket) that a store is kept in sync with.

A source plugin is a subclass of :class:`Source` declared in the entry-point group
``knowledge.sources`` (``pyproject.toml``), found like the vector-store backends
(:mod:`knowledge.plugins`). It does two things: it lists the files it holds (:meth:`Source.entries`,
one :class:`Entry` each, cheap: no file's bytes are read) and it writes one file's bytes to a stream
(:meth:`Source.fetch`). Everything else -- the plan (added, changed, renamed, deleted, unchanged),
the include and exclude globs, the size limit, the schedule, the run history, the encrypted
credentials, the readers -- is the engine's (:mod:`knowledge.sources.engine`), the same for every
source. The guide for writing one: ``docs/sources.md``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from knowledge.config import Settings
from knowledge.errors import InvalidArgument, KnowledgeError

#: The entry-point group source plugins are declared in.
GROUP = "knowledge.sources"


class SourceError(KnowledgeError):
    """A source could not be read; the message says why in words and names no credential."""


class SourceUnavailable(SourceError):
    """The source's server did not answer, or answered with a failure of its own (down, timed out,
    connection refused or reset, 5xx): nothing is wrong with the source's settings; the next run
    may succeed."""


class SourceAuthFailed(SourceError):
    """The source's server refused the credentials (a wrong user name, password, key or token), or
    the account may not read the location."""


class SourceNotFound(SourceError):
    """The location (share, repository, branch, mailbox folder, bucket, prefix) does not exist."""


class EntryGone(SourceError):
    """A file listed by this run vanished, or was locked, before it could be read: it is left as it
    was in the store, and the next run sees it again (or sees it gone)."""


class Sink(Protocol):
    """Where :meth:`Source.fetch` writes a file's bytes: ``write`` (an open binary file will do; the
    engine's refuses bytes past the size limit with ``FileTooLarge``)."""

    def write(self, data: bytes, /) -> int: ...


@dataclass(frozen=True, slots=True)
class Field:
    """One setting of a source kind, as the Sources page, the CLI and the REST API ask for it.

    ``name`` is the key in the source's config (``"host"``); ``label`` and ``help`` are the words a
    person reads; ``secret`` fields (a password, a token, a private key) are kept encrypted and never
    shown, logged, exported or audited; ``required`` ones must be given; ``default`` is used when a
    field is left out; ``kind`` is ``"text"``, ``"int"``, ``"bool"`` or ``"list"`` (of strings,
    comma- or newline-separated)."""

    name: str
    label: str
    help: str = ""
    secret: bool = False
    required: bool = False
    default: Any = None
    kind: str = "text"


@dataclass(frozen=True, slots=True)
class Entry:
    """One file a source holds, as listed.

    Attributes:
        path: the file's path inside the source, ``/``-separated, no leading ``/``: the file's name
            in the store (and what a search result cites).
        version: changes whenever the file's bytes may have changed (an ETag, a Git blob id, a
            size-and-modified-time, a message's UIDVALIDITY and UID); equal versions are trusted
            to mean equal bytes, so the file is not read again.
        size: bytes, when the listing says (``None``: unknown; the size limit is then checked while
            the file is read).
        content_key: a key equal for equal bytes at any path, when the source has one (a Git blob
            id, a message's Message-ID): a file whose key matches one that left another path is a
            rename, found without reading the file. ``None``: renames are found by SHA-256 after
            reading.
        readers: who may read the file by the source's own permissions, as principals
            (``"user:ana"``, ``"group:hr"``; see :func:`knowledge.people.policy.parse_readers`);
            ``None``: the source says nothing, the source's default readers apply.
        url: where a person finds the file at the source (``smb://host/share/a.pdf``, a web URL),
            never with credentials; kept as the file's ``source_url`` attribute.
        attributes: more of the file's metadata to keep as attributes (``{"commit": "1a2b..."}``).
    """

    path: str
    version: str
    size: int | None = None
    content_key: str | None = None
    readers: tuple[str, ...] | None = None
    url: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceContext:
    """What a source may need of the product besides its own config: the settings;
    ``principal_for_sid(sid) -> "user:..." | "group:..." | None`` (a Windows security identifier
    mapped through ``sources.sid_map`` or the LDAP directory; ``None``: unknown); ``cache_dir``, a
    folder of this machine kept for this source between runs (a Git mirror), made on first use
    (``None``: keep nothing); ``timeout``, seconds one network operation may take
    (``sources.timeout_seconds``)."""

    settings: Settings
    principal_for_sid: Callable[[str], str | None] = lambda _sid: None
    cache_dir: Path | None = None
    timeout: float = 30.0


class Source(ABC):
    """A place files are listed and read from. One instance serves one run (or one check): it may
    hold a connection, closed by :meth:`close`.

    Args:
        config: the source's settings by :attr:`fields` name (defaults filled in), secrets included.
        context: what the product offers (:class:`SourceContext`).

    Raises (from any method): :class:`SourceUnavailable`, :class:`SourceAuthFailed`,
    :class:`SourceNotFound`, :class:`EntryGone` (``fetch``), :class:`SourceError`; an
    ``InvalidArgument`` from the constructor for settings that cannot work.
    """

    #: The kind's name, the entry-point name (``"smb"``).
    kind: ClassVar[str] = ""
    #: How a person calls it (``"SMB / Windows share"``).
    title: ClassVar[str] = ""
    #: One line on what it reads.
    description: ClassVar[str] = ""
    #: The settings it takes.
    fields: ClassVar[tuple[Field, ...]] = ()
    #: Whether :class:`Entry.readers` comes from the source's own permissions (SMB ACLs, a
    #: mailbox's owner): the page says so.
    carries_permissions: ClassVar[bool] = False

    def __init__(self, config: Mapping[str, Any], context: SourceContext) -> None:
        self.config = dict(config)
        self.context = context

    @abstractmethod
    def location(self) -> str:
        """Where the files are, in words and without credentials (``smb://files.example/team/docs``)."""

    @abstractmethod
    def entries(self) -> Iterator[Entry]:
        """Every file the source holds under its location, in any order, without reading any
        file's bytes. Paths must be unique."""

    @abstractmethod
    def fetch(self, entry: Entry, out: Sink) -> None:
        """Write ``entry``'s bytes to ``out``. Raises :class:`EntryGone` when the file vanished or is
        locked since it was listed."""

    def marker(self) -> str | None:
        """A token that changes whenever anything under the location may have changed (a branch's
        head commit, a mailbox's UIDNEXT), or ``None``. A run whose marker equals the last complete
        run's lists nothing: the source is unchanged."""
        return None

    def check(self) -> str:
        """Connect and look at the location, reading no file; the words for a person
        (``"reached; 12 files at the first level"``). Raises like :meth:`entries`."""
        for _ in self.entries():
            return "reached; it holds files"
        return "reached; it holds no file yet"

    def close(self) -> None:
        """Let go of connections (called after every run and check); nothing by default."""
        return None

    # -- helpers for plugins -----------------------------------------------------------------------
    def setting(self, name: str, default: Any = None) -> Any:
        """The config value ``name`` (``default`` when unset or blank)."""
        value = self.config.get(name)
        return default if value is None or value == "" else value

    def required(self, name: str) -> Any:
        """The config value ``name``; raises ``InvalidArgument`` naming its label when unset."""
        value = self.setting(name)
        if value is None:
            label = next((f.label for f in self.fields if f.name == name), name)
            raise InvalidArgument(f"A {self.title or self.kind} source needs its {label.lower()} ({name}).", param=name)
        return value

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


_SEPARATORS = re.compile(r"[,\n]")


def field_value(f: Field, raw: Any) -> Any:
    """``raw`` as field ``f`` keeps it: an ``int`` for ``"int"``, a ``bool`` for ``"bool"``
    (``"true"``/``"yes"``/``"1"``), a list of non-blank strings for ``"list"`` (comma- or
    newline-separated text or a list), a stripped string otherwise; ``None`` for blank.

    Raises:
        InvalidArgument: not a number for an ``"int"`` field."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if f.kind == "int":
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise InvalidArgument(f"{f.label} must be a whole number, not {raw!r}.", param=f.name) from None
    if f.kind == "bool":
        return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true", "yes", "on")
    if f.kind == "list":
        items = raw if isinstance(raw, list | tuple) else _SEPARATORS.split(str(raw))
        return [str(i).strip() for i in items if str(i).strip()] or None
    return raw if f.secret else str(raw).strip()


__all__ = [
    "GROUP",
    "Entry",
    "EntryGone",
    "Field",
    "Sink",
    "Source",
    "SourceAuthFailed",
    "SourceContext",
    "SourceError",
    "SourceNotFound",
    "SourceUnavailable",
    "field_value",
]
