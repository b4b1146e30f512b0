"""ZIP archives: each member read by its own format, as if the files had been dropped one by one.

Python's ``zipfile`` lists and inflates the members; each is read through ``read_part`` (nested
archives too, as deep as :data:`~knowledge.ingest._compose.MAX_DEPTH`) and appended under its path
in the archive, so a hit in ``docs/a.pdf`` says ``docs/a.pdf > <its heading>``, page 3; a line
``File: docs/a.pdf`` names it in the text. Skipped silently apart from one count: directories and
operating-system litter (``__MACOSX/``, ``.DS_Store``, ``Thumbs.db``, hidden ``.`` files).
Names an old tool wrote in a legacy code page (no UTF-8 flag: cp866, Shift_JIS, GBK, ...) are
recovered rather than shown as cp437 mojibake (:func:`~knowledge.ingest._zipsafe.member_names`).
Refused as a whole, before anything is inflated: an archive whose entries share or overlap each
other's compressed data (the overlapping zip bomb, :func:`~knowledge.ingest._zipsafe.check_overlaps`).
Refused, each with its reason in the warnings while the rest goes on: path traversal names
(``../``, absolute paths, drive letters), encrypted members, members whose compression ratio or
size make them a zip bomb (:data:`MAX_RATIO`, :data:`MAX_MEMBER_BYTES`), members past the
document's inflation budget (the file size limit, shared by the archives nested in it:
:class:`~knowledge.ingest._zipsafe.Budget`; sizes are counted while inflating, never taken from the
headers alone), unknown compression methods and damaged members (CRC). An archive where no member
reads is an ``EmptyDocument`` listing the reasons.
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
import zlib

from knowledge.errors import EmptyDocument, KnowledgeError, UnsupportedFile
from knowledge.ingest._compose import ReadPart, add_document
from knowledge.ingest._cost import expect
from knowledge.ingest._text import Builder, one_line
from knowledge.ingest._zipsafe import Budget, check_overlaps, declared_size, member_names
from knowledge.ingest.document import Document

#: A member that inflates to more than this many times its compressed size is a zip bomb and is
#: refused -- once it is past :data:`RATIO_FLOOR` (small, very regular files such as an empty
#: spreadsheet's XML compress far better than 100:1 and are harmless).
MAX_RATIO = 100

#: Bytes a member may inflate to before :data:`MAX_RATIO` applies to it (1 MB).
RATIO_FLOOR = 1024 * 1024

#: Bytes one member may inflate to at most (256 MiB), whatever its ratio.
MAX_MEMBER_BYTES = 256 * 1024 * 1024

#: Members read from one archive at most; the rest are named in one warning.
MAX_MEMBERS = 10_000

_CHUNK = 1024 * 1024
_LITTER_DIRS = ("__MACOSX/",)
_LITTER_FILES = {".ds_store", "thumbs.db", "desktop.ini", "ehthumbs.db", ".localized"}
_DRIVE = re.compile(r"^[A-Za-z]:")


class _Refused(Exception):
    """A member not read, with the reason."""


def read_zip(data: bytes, read_part: ReadPart, budget: Budget | None = None) -> Document:
    """Read every member of a ZIP archive through ``read_part``; headings start with the member's
    path (its real name, legacy code pages recovered).

    Args:
        budget: the bytes the document's archives may still inflate, shared with the archives
            nested in this one (``read_part`` hands them the same budget); ``None``: a budget of its
            own of :data:`~knowledge.ingest._zipsafe.DEFAULT_MAX_BYTES`.

    Raises:
        UnsupportedFile: not a readable ZIP (damaged central directory); entries that share or
            overlap each other's data (``"refused: 400 entries of this ZIP share the same compressed
            data (an overlapping-entries zip bomb)"``); or an Office package (``[Content_Types].xml``)
            that detection did not take for a Word/Excel/PowerPoint file.
        EmptyDocument: no member has text; the message lists each member's reason.
    """
    budget = budget if budget is not None else Budget()
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
        real_names = member_names(zf)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise UnsupportedFile(f"damaged: not a readable ZIP archive ({one_line(str(exc))})") from exc
    if any(i.filename == "[Content_Types].xml" for i in infos):  # an OPC package, not a folder of files
        zf.close()
        raise UnsupportedFile(
            "damaged: an Office document package ([Content_Types].xml) without a Word, Excel or PowerPoint main part"
        )
    with zf:
        check_overlaps(zf, data)
        members = [i for i in infos if not i.is_dir()]
        expect(f"the archive declares {declared_size(zf) / 1e6:,.1f} MB unpacked in {len(members):,} files")
        return _read_members(zf, members, real_names, read_part, budget)


def _read_members(
    zf: zipfile.ZipFile, members: list[zipfile.ZipInfo], real_names: dict[str, str], read_part: ReadPart, budget: Budget
) -> Document:
    builder = Builder()
    refused: list[str] = []
    litter = read = 0
    if len(members) > MAX_MEMBERS:
        refused.append(f"{len(members) - MAX_MEMBERS:,} members past the first {MAX_MEMBERS:,}: not read")
        members = members[:MAX_MEMBERS]
    for info in members:
        name = real_names.get(info.filename, info.filename).replace("\\", "/")
        if _is_litter(name):
            litter += 1
            continue
        try:
            _check_name(name)
            if info.flag_bits & 0x1:
                raise _Refused("encrypted (needs a password); unpack it and add the file itself")
            if budget.left <= 0 or info.file_size > budget.left:
                raise _Refused(
                    f"the archive's files inflate to more than {_mb(budget.limit)} together,"
                    " the limit for one file (a zip bomb?)"
                )
            body = _inflate(zf, info, budget.left)
        except _Refused as exc:
            refused.append(f"{name}: not read: {exc}")
            continue
        budget.spend(len(body))
        if not body.strip():
            refused.append(f"{name}: not read: the file is empty")
            continue
        try:
            doc = read_part(body, posixpath.basename(name))
        except KnowledgeError as exc:
            refused.append(f"{name}: not read: {exc}")
            continue
        builder.add(f"File: {name}", heading=name)
        add_document(builder, doc, name)
        read += 1
    warnings = list(refused)
    if litter:
        warnings.append(f"{litter} system file{'' if litter == 1 else 's'} skipped (__MACOSX, .DS_Store, hidden files)")
    if not read:
        why = refused_summary(refused) if refused else "it has no files"
        raise EmptyDocument(f"no text: nothing in the archive could be read ({why})")
    return builder.build("zip", empty="no text: no file in the archive has text", warnings=warnings)


#: How many distinct reasons :func:`refused_summary` names, and the characters it may take.
SUMMARY_REASONS = 5
SUMMARY_CHARS = 1_000


def refused_summary(refused: list[str]) -> str:
    """The members' reasons (``"<name>: not read: <why>"``) in a sentence of at most
    :data:`SUMMARY_CHARS` characters: each distinct reason once, with its first member and how many
    more share it, the first :data:`SUMMARY_REASONS` of them. A nested archive's reason is such a
    summary too, so archives of archives of the same bomb say it once, not once per leaf."""
    names_by_why: dict[str, list[str]] = {}
    for entry in refused:
        name, sep, why = entry.partition(": not read: ")
        names_by_why.setdefault(why if sep else entry, []).append(name if sep else "")
    parts = []
    for why, names in list(names_by_why.items())[:SUMMARY_REASONS]:
        first = f"{names[0]}: not read: {why}" if names[0] else why
        parts.append(first + (f" (and {len(names) - 1:,} more for the same reason)" if len(names) > 1 else ""))
    if len(names_by_why) > SUMMARY_REASONS:
        parts.append(f"and {len(names_by_why) - SUMMARY_REASONS:,} more reasons")
    text = "; ".join(parts)
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1] + "…"


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def _is_litter(name: str) -> bool:
    base = posixpath.basename(name.rstrip("/"))
    return name.startswith(_LITTER_DIRS) or "/__MACOSX/" in name or base.lower() in _LITTER_FILES or base.startswith(".")


def _check_name(name: str) -> None:
    """Refuse names that would land outside a folder the archive was unpacked into."""
    if name.startswith("/") or _DRIVE.match(name):
        raise _Refused("an absolute path (path traversal)")
    if ".." in name.split("/"):
        raise _Refused("a path leaving the archive's folder ('..', path traversal)")
    if "\x00" in name:
        raise _Refused("a NUL character in the name")


def _inflate(zf: zipfile.ZipFile, info: zipfile.ZipInfo, room: int) -> bytes:
    """The member's bytes, counted while inflating against the bounds (never trusting the header)."""
    declared_ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size > MAX_MEMBER_BYTES:
        raise _Refused(f"it inflates to {info.file_size:,} bytes, over the limit of {MAX_MEMBER_BYTES:,}")
    if info.file_size > RATIO_FLOOR and declared_ratio > MAX_RATIO:
        raise _Refused(f"compressed {declared_ratio:,.0f}:1, over the limit of {MAX_RATIO}:1 (a zip bomb?)")
    limit = min(MAX_MEMBER_BYTES, room)
    out = bytearray()
    try:
        with zf.open(info) as fh:
            while True:
                chunk = fh.read(_CHUNK)
                if not chunk:
                    break
                out += chunk
                if len(out) > limit:
                    raise _Refused(
                        f"it inflates to more than {limit:,} bytes, more than the archive may still unpack (a zip bomb?)"
                    )
                if len(out) > RATIO_FLOOR and len(out) / max(info.compress_size, 1) > MAX_RATIO:
                    raise _Refused(f"it inflates more than {MAX_RATIO}:1 (a zip bomb?)")
    except _Refused:
        raise
    except NotImplementedError as exc:
        raise _Refused(f"unsupported compression ({one_line(str(exc))})") from exc
    except RuntimeError as exc:  # zipfile: "File ... is encrypted, password required"
        raise _Refused(f"encrypted or unreadable ({one_line(str(exc))})") from exc
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise _Refused(f"damaged ({one_line(str(exc))})") from exc
    return bytes(out)
