"""Bundles and backups are untrusted input (issue 24, item 5): crafted archives -- a file member past
``ingest.max_file_mb``, a member that inflates far beyond what is declared, a vectors header claiming
a billion rows, a chunk citing a file the bundle does not carry, members the manifest does not list,
names with control characters, path traversal and links in a backup -- are each refused with
``BundleCorrupt`` and a reason, in bounded memory, leaving nothing behind."""

from __future__ import annotations

import hashlib
import io
import json
import stat
import struct
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest

from knowledge import portable
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import BundleCorrupt
from knowledge.portable import bundle, importing
from knowledge.workbench import Workbench

MB = 1 << 20
DOCS = {
    "cats.md": "# Cats\n\nThe cat sits on the mat and purrs.\n\nCats eat fish.\n",
    "owls.md": "# Owls\n\nOwls hunt at night with silent feathers.\n",
    "sea.txt": "The lighthouse keeper counts seagulls every morning. " * 12,
}


def _wb(tmp: Path, name: str = "data", **ingest) -> Workbench:
    s = load_settings(data_dir=tmp / name)
    if ingest:
        s = s.model_copy(update={"ingest": s.ingest.model_copy(update=ingest)})
    return Workbench(s, embedder_factory=lambda m: HashEmbedder(64, 48))


@pytest.fixture
def wb(tmp_path):
    w = _wb(tmp_path, max_file_mb=5)
    for name, text in DOCS.items():
        assert w.ingest_file("notes", text.encode(), name).ok
    yield w
    w.close()


@pytest.fixture
def good(wb, tmp_path) -> Path:
    return wb.portable.export_store("notes", tmp_path / "good.kb").path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _forge(src: Path, dst: Path, *, change=None, manifest=None, extra=None) -> None:
    """Copy bundle ``src`` to ``dst`` as an attacker would: ``change(name, data)`` gives a member's new
    bytes (``None`` drops it), the manifest's checksums and sizes are recomputed to match (the
    manifest is not signed), then ``manifest(m)`` edits it; ``extra(zout)`` adds members."""
    with zipfile.ZipFile(src) as zin:
        m = json.loads(zin.read("manifest.json"))
        datas = {i.filename: zin.read(i.filename) for i in zin.infolist() if i.filename != "manifest.json"}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in datas.items():
            new = change(name, data) if change else data
            if new is None:
                m["members"].pop(name, None)
                continue
            zout.writestr(name, new)
            m["members"][name] = {"sha256": _sha(new), "bytes": len(new)}
        if extra:
            extra(zout, m)
        if manifest:
            manifest(m)
        zout.writestr("manifest.json", json.dumps(m))


def _zeros_member(zout: zipfile.ZipFile, name: str, size: int) -> dict:
    """A member of ``size`` zero bytes, deflated (200 MB -> about 200 KB), written in pieces."""
    h, piece, left = hashlib.sha256(), bytes(MB), size
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with zout.open(info, "w", force_zip64=True) as w:
        while left:
            n = min(left, MB)
            w.write(piece[:n])
            h.update(piece[:n])
            left -= n
    return {"sha256": h.hexdigest(), "bytes": size}


def _lie_about_size(path: Path, member: str, size: int) -> None:
    """Rewrite the zip's local header and central directory to declare ``member`` ``size`` bytes
    uncompressed (a zip bomb's lie); its deflated stream stays as it was."""
    data = bytearray(path.read_bytes())
    raw = member.encode()
    # the local header: signature, then the uncompressed size at offset 22 (zip64 extra: at 30 + n + 4 + 8)
    lh = data.index(b"PK\x03\x04" + b"", 0)
    while data[lh + 30 : lh + 30 + len(raw)] != raw:
        lh = data.index(b"PK\x03\x04", lh + 4)
    n, _e = struct.unpack("<HH", data[lh + 26 : lh + 30])
    extra = lh + 30 + n
    if data[lh + 22 : lh + 26] == b"\xff\xff\xff\xff":  # zip64: sizes in the extra field
        struct.pack_into("<Q", data, extra + 4, size)
    else:
        struct.pack_into("<I", data, lh + 22, size)
    cd = data.index(b"PK\x01\x02")
    while data[cd + 46 : cd + 46 + len(raw)] != raw:
        cd = data.index(b"PK\x01\x02", cd + 4)
    n, _e, _c = struct.unpack("<HHH", data[cd + 28 : cd + 34])
    if data[cd + 24 : cd + 28] == b"\xff\xff\xff\xff":
        struct.pack_into("<Q", data, cd + 46 + n + 4, size)
    else:
        struct.pack_into("<I", data, cd + 24, size)
    path.write_bytes(bytes(data))


def _snapshot(wb: Workbench) -> tuple:
    return (
        wb.store_names(internal=True),
        len(wb.stored_files()),
        wb.template_names(),
        sorted(c for c in wb.backend("memory").list_collections()),
    )


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _refused(wb: Workbench, bundle: Path, words: str, *, peak_mb: float = 40) -> str:
    """Import ``bundle``: refused with BundleCorrupt matching ``words``, the heap's peak under
    ``peak_mb``, and nothing left: no store, stored file, template, collection or grown data folder."""
    before, disk = _snapshot(wb), _du(wb.settings.data_root)
    tracemalloc.start()
    try:
        with pytest.raises(BundleCorrupt, match=words) as err:
            wb.portable.import_bundle(bundle, as_name="copy")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < peak_mb * MB, f"the refused import peaked at {peak / MB:.0f} MB"
    assert _snapshot(wb) == before
    assert _du(wb.settings.data_root) < disk + 2 * MB  # nothing big written, not even for a moment kept
    return str(err.value)


def test_the_honest_bundle_still_imports(wb, good):
    r = wb.portable.import_bundle(good, as_name="copy")
    assert r.files == 3 and r.chunks == sum(f.chunks for f in wb.file_records("notes")) > 0
    assert wb.search("copy", "lighthouse seagulls", k=1)[0].file_name == "sea.txt"


def test_a_file_member_past_ingest_max_file_mb_is_refused_before_a_byte_is_written(wb, good, tmp_path):
    """The attack: a 2.09 MB bundle wrote a 2 GB file (its member's real, declared size) past
    ingest.max_file_mb = 5. Here 50 MB of zeros (50 KB deflated), manifest and entry consistent."""
    bad = tmp_path / "big-file.kb"
    with zipfile.ZipFile(good) as zin:
        first = next(f for f in json.loads(zin.read("manifest.json"))["files"] if f["member"])

    def extra(zout, m):
        meta = _zeros_member(zout, first["member"], 50_000_000)
        m["members"][first["member"]] = meta
        entry = next(f for f in m["files"] if f["member"] == first["member"])
        entry.update(size=meta["bytes"], sha256=meta["sha256"])

    _forge(good, bad, change=lambda n, d: None if n == first["member"] else d, extra=extra)
    assert bad.stat().st_size < 2 * MB
    msg = _refused(wb, bad, "max_file_mb")
    assert "50.0 MB" in msg and "5 MB" in msg


@pytest.mark.slow
def test_a_member_declared_small_that_inflates_to_200_mb_is_cut_off(wb, good, tmp_path):
    """A zip bomb: 200 MB of zeros whose zip directory, local header and manifest say 1,000 bytes.
    The reader counts what it inflates and never goes past the declared figure."""
    bad = tmp_path / "bomb.kb"
    with zipfile.ZipFile(good) as zin:
        member = next(f for f in json.loads(zin.read("manifest.json"))["files"] if f["member"])["member"]

    def extra(zout, m):
        _zeros_member(zout, member, 200 * MB)
        m["members"][member] = {"sha256": _sha(bytes(1000)), "bytes": 1000}
        next(f for f in m["files"] if f["member"] == member).update(size=1000, sha256=_sha(bytes(1000)))

    _forge(good, bad, change=lambda n, d: None if n == member else d, extra=extra)
    _lie_about_size(bad, member, 1000)
    assert bad.stat().st_size < 2 * MB
    _refused(wb, bad, "unreadable|damaged|more than")


@pytest.mark.slow
def test_a_chunk_block_declared_at_200_mb_is_refused_from_its_figure(wb, good, tmp_path):
    """An honestly declared 200 MB block of chunk lines (deflated to 200 KB) was read whole into
    memory; a block's lines are bounded (MAX_PAYLOADS_BYTES)."""
    bad = tmp_path / "block.kb"

    def extra(zout, m):
        m["members"]["chunks/000000.jsonl"] = _zeros_member(zout, "chunks/000000.jsonl", 200 * MB)

    _forge(good, bad, change=lambda n, d: None if n == "chunks/000000.jsonl" else d, extra=extra)
    _refused(wb, bad, "at most")


@pytest.mark.slow
def test_a_vectors_header_claiming_a_billion_rows_is_refused_without_allocating(wb, good, tmp_path):
    """The attack: a 1.57 MB bundle whose vectors member took 3.28 GB of memory (np.load trusts the
    header). Here the header says (10**9, 384); the header is checked against the block first."""
    bad = tmp_path / "npy.kb"
    with zipfile.ZipFile(good) as zin:
        m = json.loads(zin.read("manifest.json"))
    rows, dim = m["blocks"][0]["count"], m["store"]["dimension"]
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f4", "fortran_order": False, "shape": (10**9, 384)})
    # the member exactly as long as the block's real matrix: only the header lies
    huge = buf.getvalue() + bytes(rows * dim * 4)
    _forge(good, bad, change=lambda n, d: huge if n == "chunks/000000.npy" else d)
    msg = _refused(wb, bad, "shape")
    assert "(1000000000, 384)" in msg and f"({rows}, {dim})" in msg
    # with more bytes than the block's matrix needs it is refused from its size, before it is read
    _forge(good, bad, change=lambda n, d: huge + bytes(64 * MB) if n == "chunks/000000.npy" else d)
    _refused(wb, bad, "at most")
    # a big-endian or float64 matrix of the right shape is refused too
    for dtype in (">f4", "<f8"):
        out = io.BytesIO()
        np.save(out, np.zeros((rows, dim), dtype=dtype))
        matrix = out.getvalue()
        _forge(good, bad, change=lambda n, d, b=matrix: b if n == "chunks/000000.npy" else d)
        _refused(wb, bad, "float32" if dtype == ">f4" else "float32|at most")


def test_a_chunk_citing_a_file_the_bundle_does_not_carry_is_refused(wb, good, tmp_path):
    """The attack: such a chunk was imported and could never be deleted (delete-file: 0 chunks,
    search still found it)."""
    bad = tmp_path / "ghost.kb"

    def ghost(name, data):
        if not name.endswith(".jsonl"):
            return data
        lines = data.splitlines()
        item = json.loads(lines[0])
        item["payload"]["file_id"] = "ghost-file"
        return b"\n".join([json.dumps(item).encode(), *lines[1:]]) + b"\n"

    _forge(good, bad, change=ghost)
    assert "ghost-file" in _refused(wb, bad, "does not carry")
    # a file whose entry says fewer chunks than the bundle holds for it
    _forge(good, bad, manifest=lambda m: m["files"][0].update(chunks=m["files"][0]["chunks"] + 1))
    _refused(wb, bad, "chunks in the bundle")


def test_members_the_manifest_does_not_account_for_are_refused(wb, good, tmp_path):
    bad = tmp_path / "many.kb"

    def extra(zout, m):
        for i in range(50):
            zout.writestr(f"chunks/extra-{i:04d}.bin", b"x")

    _forge(good, bad, extra=extra)
    _refused(wb, bad, "holds 5[0-9] members")

    with zipfile.ZipFile(good) as zin:
        member = next(f for f in json.loads(zin.read("manifest.json"))["files"] if f["member"])["member"]

    def link(zout, m):  # a file member turned into a symbolic link (checksums made to match)
        info = zipfile.ZipInfo(member)
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zout.writestr(info, "/etc/passwd")
        m["members"][member] = {"sha256": _sha(b"/etc/passwd"), "bytes": 11}
        next(f for f in m["files"] if f["member"] == member).update(size=11, sha256=_sha(b"/etc/passwd"))

    _forge(good, bad, change=lambda n, d: None if n == member else d, extra=link)
    _refused(wb, bad, "symbolic link")


def test_names_with_control_characters_in_a_bundle_are_refused(wb, good, tmp_path):
    bad = tmp_path / "names.kb"
    _forge(good, bad, manifest=lambda m: m["files"][0].update(name="a\x00b.md"))
    assert "U+0000" in _refused(wb, bad, "control character")
    _forge(good, bad, manifest=lambda m: m["store"].update(name="evil\u202etxt.exe"))
    with pytest.raises(BundleCorrupt, match=r"U\+202E"):
        wb.portable.import_bundle(bad)
    assert wb.portable.import_bundle(bad, as_name="renamed").store == "renamed"  # the user's name is fine


def test_a_failing_import_leaves_nothing_after_its_files_were_saved(wb, good, tmp_path, monkeypatch):
    """A damage found only while the chunks are written (the vectors differ on their second read,
    after the files were saved) still goes through the temporary collection: no store, file,
    collection or template is left."""
    bad = tmp_path / "late.kb"
    _forge(good, bad, manifest=lambda m: m["store"]["template"].update(name="brand-new"))
    original, calls = bundle.npy_matrix, []

    def second_read_fails(data, name, rows, dim):
        calls.append(name)
        if calls.count(name) > 1:
            raise BundleCorrupt("damaged on the second read")
        return original(data, name, rows, dim)

    monkeypatch.setattr(bundle, "npy_matrix", second_read_fails)  # the check before anything is written
    monkeypatch.setattr(importing, "npy_matrix", second_read_fails)  # the read that writes the chunks
    _refused(wb, bad, "second read", peak_mb=60)
    assert "brand-new" not in wb.template_names()


# -- restore -----------------------------------------------------------------------------------------


@pytest.fixture
def backup(wb, tmp_path) -> Path:
    return wb.portable.backup(tmp_path / "all.kbackup").path


def _restore_refused(tmp_path: Path, archive: Path, words: str) -> None:
    target = load_settings(data_dir=tmp_path / "restored")
    tracemalloc.start()
    try:
        with pytest.raises(BundleCorrupt, match=words):
            portable.restore(target, archive)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * MB
    assert not Path(target.data_root).exists() or not any(Path(target.data_root).rglob("*"))
    assert not (tmp_path / "evil").exists() and not Path("/tmp/knowledge-evil").exists()


@pytest.mark.parametrize(
    "name",
    [
        "files/../../evil",
        "/tmp/knowledge-evil",
        "files//x",
        "files/./x",
        "stores\\..\\evil",
        "elsewhere/x",
        "files/a\x00b",
        "C:/evil",
    ],
)
def test_a_backup_member_outside_the_data_folder_is_refused(backup, tmp_path, name):
    bad = tmp_path / "traversal.kbackup"

    def extra(zout, m):
        zout.writestr(name, b"pwned")
        m["members"][name] = {"sha256": _sha(b"pwned"), "bytes": 5}

    _forge(backup, bad, extra=extra)
    _restore_refused(tmp_path, bad, "not a path this program writes")


@pytest.mark.slow
def test_a_backup_with_a_link_member_extra_members_or_a_bomb_is_refused(backup, tmp_path):
    bad = tmp_path / "bad.kbackup"

    def link(zout, m):
        info = zipfile.ZipInfo("files/blobs/aa/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zout.writestr(info, "/etc/passwd")
        m["members"]["files/blobs/aa/link"] = {"sha256": _sha(b"/etc/passwd"), "bytes": 11}

    _forge(backup, bad, extra=link)
    _restore_refused(tmp_path, bad, "symbolic link")
    _forge(backup, bad, extra=lambda zout, m: [zout.writestr(f"files/x{i}", b"") for i in range(20)])
    _restore_refused(tmp_path, bad, "members")

    def bomb(zout, m):
        _zeros_member(zout, "files/blobs/00/bomb", 200 * MB)
        m["members"]["files/blobs/00/bomb"] = {"sha256": _sha(bytes(1000)), "bytes": 1000}

    _forge(backup, bad, extra=bomb)
    _lie_about_size(bad, "files/blobs/00/bomb", 1000)
    _restore_refused(tmp_path, bad, "unreadable|damaged|more than")


def test_the_honest_backup_still_restores(backup, tmp_path):
    target = load_settings(data_dir=tmp_path / "restored")
    r = portable.restore(target, backup)
    assert "notes" in r.copied
    w = Workbench(target, embedder_factory=lambda m: HashEmbedder(64, 48))
    try:
        assert w.store_names() == ["notes"] and w.search("notes", "lighthouse seagulls", k=1)
    finally:
        w.close()
