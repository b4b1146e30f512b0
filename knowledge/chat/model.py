"""Chat data: sessions, messages made of parts, attachments.

A :class:`Message` is a list of :class:`Part` -- text, an image, or a file referenced by its
file-store id -- plus ``meta``: for a user message the attachment events it records
(``attached`` / ``removed``), for an assistant message its tool calls and citations, for a tool
message the call it answers. Roles: ``user`` (typed by the user), ``assistant``, ``tool`` (a tool's
result) and ``attachment`` (an image or document re-inserted into the running turn by
``view_attachment``).
"""

from __future__ import annotations

import mimetypes
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import PurePath
from typing import Any, Final, Literal

TEXT: Final = "text"
IMAGE: Final = "image"
FILE: Final = "file"
USER, ASSISTANT, TOOL, ATTACHMENT = "user", "assistant", "tool", "attachment"

#: Attachment kinds: an image (not ingested), a PDF (ingested and sent with the next message), any
#: other document (ingested; reached through vector_search).
KIND_IMAGE, KIND_PDF, KIND_DOCUMENT = "image", "pdf", "document"

_LABELS = {
    ".docx": "Word document",
    ".md": "Markdown document",
    ".markdown": "Markdown document",
    ".txt": "text file",
    ".html": "HTML page",
    ".htm": "HTML page",
    ".csv": "CSV table",
    ".rst": "text file",
    ".json": "text file",
    ".pptx": "PowerPoint presentation",
    ".xlsx": "Excel workbook",
    ".xlsm": "Excel workbook",
    ".odt": "OpenDocument text",
    ".ods": "OpenDocument spreadsheet",
    ".odp": "OpenDocument presentation",
    ".epub": "EPUB e-book",
    ".rtf": "RTF document",
    ".eml": "e-mail",
    ".mbox": "mailbox",
    ".msg": "Outlook message",
    ".zip": "ZIP archive",
}
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def sniff_kind(name: str, media_type: str | None, head: bytes = b"") -> tuple[str, str]:
    """``(kind, media_type)`` of an attachment from its first bytes, else its media type and name.

    ``kind`` is one of :data:`KIND_IMAGE`, :data:`KIND_PDF`, :data:`KIND_DOCUMENT`.
    """
    if head.startswith(b"%PDF"):
        return KIND_PDF, "application/pdf"
    if head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP"):
        mt = (
            "image/png"
            if head.startswith(b"\x89PNG")
            else "image/jpeg"
            if head.startswith(b"\xff\xd8")
            else "image/gif"
            if head.startswith(b"GIF")
            else "image/webp"
        )
        return KIND_IMAGE, mt
    mt = (media_type or mimetypes.guess_type(name)[0] or "").lower()
    if mt == "application/octet-stream":
        mt = mimetypes.guess_type(name)[0] or mt
    suffix = PurePath(name).suffix.lower()
    if mt == "application/pdf" or suffix == ".pdf":
        return KIND_PDF, "application/pdf"
    if mt.startswith("image/"):
        return KIND_IMAGE, mt
    return KIND_DOCUMENT, mt or "application/octet-stream"


def kind_label(kind: str, name: str) -> str:
    """A short human label: "PDF document", "Word document", "Markdown document", "image", ..."""
    if kind == KIND_PDF:
        return "PDF document"
    if kind == KIND_IMAGE:
        return "image"
    return _LABELS.get(PurePath(name).suffix.lower(), "document")


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a message: ``kind`` text (``text`` set), image or file (``file_id`` -- the
    file-store id -- with ``name``, ``media_type``, ``size`` in bytes)."""

    kind: Literal["text", "image", "file"]
    text: str | None = None
    file_id: str | None = None
    name: str | None = None
    media_type: str | None = None
    size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Part:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file attached to a session: its file-store id, name, media type, kind (see
    :func:`sniff_kind`), size in bytes and, for a PDF, its pages."""

    file_id: str
    name: str
    media_type: str
    kind: str
    size: int | None = None
    pages: int | None = None
    attached: datetime | None = None

    @property
    def label(self) -> str:
        return kind_label(self.kind, self.name)

    def event(self) -> dict[str, Any]:
        """The record a user message keeps of it in ``meta["attached"]`` / ``meta["removed"]``."""
        return {
            "file_id": self.file_id,
            "name": self.name,
            "kind": self.kind,
            "media_type": self.media_type,
            "size": self.size,
            "pages": self.pages,
        }


@dataclass(slots=True)
class Message:
    """One message of a session, in order (``seq`` from 1)."""

    seq: int
    role: str
    parts: list[Part]
    meta: dict[str, Any] = field(default_factory=dict)
    created: datetime | None = None

    @property
    def text(self) -> str:
        """The text parts joined (what the user typed, for a user message)."""
        return "\n\n".join(p.text for p in self.parts if p.kind == TEXT and p.text)

    def media(self) -> list[Part]:
        return [p for p in self.parts if p.kind in (IMAGE, FILE)]


@dataclass(frozen=True, slots=True)
class Session:
    """A chat session: ``store`` is its own vector store (created on the first attachment),
    ``config`` its CHAT config (``None``: the default), ``tools`` the tools activated for it
    (``vector_search``, ``view_attachment``), ``pending`` the attachment events the next user
    message will record, ``stores`` the user's stores it searches besides its attachments (its
    *knowledge*), ``owner`` the username of the account that started it (``None``: started without
    accounts, or by the local admin; such a session belongs to the admins)."""

    id: str
    title: str
    config: str | None
    store: str
    tools: list[str]
    pending: list[dict[str, Any]]
    created: datetime
    updated: datetime
    stores: list[str] = field(default_factory=list)
    owner: str | None = None
