"""The file store: every backend (filesystem, postgresql, s3) against the FileStore contract; the
filesystem backend's own layout, cleanup and crash behaviour; the registry."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from knowledge import plugins
from knowledge.config import load_settings
from knowledge.errors import (
    BackendUnavailable,
    FileNotFoundInStore,
    FileTooLarge,
    InvalidArgument,
    StoreCorrupt,
)
from knowledge.filestore import FileStore, FilesystemFileStore, StoredFile, open_file_store, registry
from tests.helpers.filestore import MiB, PatternStream, blobs, files_under, inventory, pattern_sha256


@pytest.fixture
def reopen(file_store_settings) -> Iterator[Callable[[], FileStore]]:
    """``reopen()``: a new instance of the store under test (same folder, database or bucket)."""
    opened: list[FileStore] = []

    def make() -> FileStore:
        opened.append(open_file_store(file_store_settings))
        return opened[-1]

    yield make
    for s in opened:
        s.close()


@pytest.fixture
def store(reopen) -> FileStore:
    """The backend under test (parametrised over filesystem, postgresql and s3 by conftest)."""
    return reopen()


@pytest.fixture
def fs_store(settings) -> FilesystemFileStore:
    return FilesystemFileStore(settings)


def stored_files(store: FilesystemFileStore) -> set[str]:
    """Files of the store other than its lock file."""
    return files_under(store.root) - {".lock"}


# -- round trips ----------------------------------------------------------------------------------


def test_bytes_round_trip_with_size_sha256_and_utc_created(store):
    data = b"hello \x00 world\n" * 100
    before = datetime.now(UTC)
    f = store.save("notes.txt", "text/plain", data)
    assert isinstance(f, StoredFile)
    assert f.id.startswith("file-") and len(f.id) == 37
    assert (f.name, f.content_type, f.size) == ("notes.txt", "text/plain", len(data))
    assert f.sha256 == hashlib.sha256(data).hexdigest()
    assert f.created.tzinfo is not None and f.created.utcoffset() == timedelta(0)
    assert before - timedelta(seconds=1) <= f.created <= datetime.now(UTC) + timedelta(seconds=1)
    with store.content(f.id) as fh:
        assert fh.read() == data
    assert store.get(f.id) == f == store.find(f.id)


def test_stream_round_trip_does_not_close_the_stream(store):
    src = PatternStream(3 * MiB + 17)
    f = store.save("data.bin", "application/octet-stream", src)
    assert f.size == 3 * MiB + 17
    assert f.sha256 == pattern_sha256(3 * MiB + 17)
    assert not src.closed
    with store.content(f.id) as fh:
        assert hashlib.sha256(fh.read()).hexdigest() == f.sha256


def test_bytearray_memoryview_and_empty_content(store):
    a = store.save("a", "x/y", bytearray(b"abc"))
    b = store.save("b", "x/y", memoryview(b"abc"))
    e = store.save("empty", "text/plain", io.BytesIO(b""))
    assert a.sha256 == b.sha256 == hashlib.sha256(b"abc").hexdigest()
    assert e.size == 0 and e.sha256 == hashlib.sha256(b"").hexdigest()
    with store.content(e.id) as fh:
        assert fh.read() == b""


def test_large_stream_is_never_held_in_memory(store):
    part = getattr(store, "part_size", 0)  # s3: a save holds about one multipart part
    size = max(12 * MiB, 4 * part) + 123
    src = PatternStream(size, seed=7)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        f = store.save("big.bin", "application/octet-stream", src)
        _, save_peak = tracemalloc.get_traced_memory()

        tracemalloc.reset_peak()
        h, total = hashlib.sha256(), 0
        with store.content(f.id) as fh:
            while chunk := fh.read(MiB):
                h.update(chunk)
                total += len(chunk)
        _, read_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert f.size == total == size
    assert f.sha256 == h.hexdigest() == pattern_sha256(size, seed=7)
    # postgresql: the chunk read, and psycopg's copy of it as a query parameter; s3: a part, buffered
    limit = (4 if store.name == "postgresql" else 3) * MiB + 1.5 * part
    assert save_peak < limit, f"save peaked at {save_peak / MiB:.1f} MiB for a {size / MiB:.0f} MiB file"
    # a server's client library buffers a chunk or a socket read of its own
    read_limit = {"filesystem": 3, "postgresql": 4.5}.get(store.name, 6) * MiB
    assert read_peak < read_limit, f"reading peaked at {read_peak / MiB:.1f} MiB"


def test_content_type_guessed_when_missing_and_checked_when_given(store):
    assert store.save("report.pdf", None, b"%PDF").content_type == "application/pdf"
    assert store.save("blob", "  ", b"x").content_type == "application/octet-stream"
    assert store.save("a.txt", " text/plain ", b"x").content_type == "text/plain"
    with pytest.raises(InvalidArgument):
        store.save("a.txt", "text/plain\r\nX-Injected: 1", b"x")
    with pytest.raises(InvalidArgument):
        store.save("a.txt", 42, b"x")


def test_metadata_is_kept_read_only_and_must_be_json(store, reopen):
    f = store.save("a", "text/plain", b"x", metadata={"source": "upload", "n": [1, 2]})
    assert f.metadata == {"source": "upload", "n": [1, 2]}
    with pytest.raises(TypeError):
        f.metadata["source"] = "changed"  # type: ignore[index]
    assert reopen().get(f.id).metadata == {"source": "upload", "n": [1, 2]}
    assert isinstance(hash(f), int)
    for bad in ({"x": object()}, {1: "int key"}, {"nan": float("nan")}, ["not", "a", "dict"]):
        with pytest.raises(InvalidArgument):
            store.save("a", "text/plain", b"x", metadata=bad)  # type: ignore[arg-type]
    assert len(store.list()) == 1


def test_a_text_stream_or_str_is_refused_and_leaves_nothing(store):
    with pytest.raises(InvalidArgument, match="binary"):
        store.save("a.txt", "text/plain", io.StringIO("text mode"))
    with pytest.raises(InvalidArgument):
        store.save("a.txt", "text/plain", "a str")  # type: ignore[arg-type]
    assert store.list() == [] and inventory(store) == set()


# -- dedupe ---------------------------------------------------------------------------------------


def test_identical_bytes_twice_two_ids_one_blob_refcounted(store):
    data = os.urandom(200_000)
    a = store.save("first.bin", "application/octet-stream", data)
    b = store.save("second.bin", "application/octet-stream", io.BytesIO(data))
    c = store.save("other.bin", "application/octet-stream", b"different")
    assert a.id != b.id and a.sha256 == b.sha256 and (a.name, b.name) == ("first.bin", "second.bin")
    assert inventory(store) == {f"record:{f.id}" for f in (a, b, c)} | {f"blob:{a.sha256}", f"blob:{c.sha256}"}
    assert {f.id for f in store.find_by_sha256(a.sha256.upper())} == {a.id, b.id}
    assert [f.id for f in store.find_by_sha256(a.sha256)] == [b.id, a.id]  # newest first

    assert store.delete(a.id) is True
    assert store.find(a.id) is None
    with store.content(b.id) as fh:
        assert fh.read() == data
    assert store.delete(b.id) is True
    assert inventory(store) == {f"record:{c.id}", f"blob:{c.sha256}"}
    assert store.delete(b.id) is False


def test_find_by_sha256_checks_its_argument(store):
    assert store.find_by_sha256("0" * 64) == []
    for bad in ("abc", "g" * 64, "../" * 22, 123):
        with pytest.raises(InvalidArgument):
            store.find_by_sha256(bad)  # type: ignore[arg-type]


# -- names and ids are never paths ----------------------------------------------------------------

HOSTILE_NAMES = [
    "../../etc/passwd",
    "/etc/passwd",
    "a/b/c.txt",
    "..\\..\\windows\\system32\\config",
    "..",
    ".",
    "CON",
    "nul.txt",
    "x" * 300,
    "Ünïcödé — 文件名 📄.pdf",
    " leading and trailing ",
    "meta/file-00000000000000000000000000000000.json",
]


def test_hostile_names_are_kept_exactly(store, reopen):
    saved = [store.save(name, "text/plain", name.encode("utf-8")) for name in HOSTILE_NAMES]
    assert [f.name for f in saved] == HOSTILE_NAMES
    assert inventory(store) == {f"record:{f.id}" for f in saved} | {f"blob:{f.sha256}" for f in saved}
    again = reopen()
    for f in saved:
        assert again.get(f.id).name == f.name
        with again.content(f.id) as fh:
            assert fh.read() == f.name.encode("utf-8")


def test_hostile_names_are_only_data_on_disk(fs_store, settings):
    store = fs_store
    outside_before = files_under(settings.data_root.parent)
    saved = [store.save(name, "text/plain", name.encode("utf-8")) for name in HOSTILE_NAMES]
    assert [f.name for f in saved] == HOSTILE_NAMES  # kept exactly
    layout = stored_files(store)
    assert {p for p in layout if p.startswith("meta/")} == {f"meta/{f.id}.json" for f in saved}
    assert all(p.startswith(("meta/", "blobs/")) for p in layout)
    new_elsewhere = files_under(settings.data_root.parent) - outside_before
    assert {p for p in new_elsewhere if not p.startswith("data/files/")} == set()
    reopened = FilesystemFileStore(settings)
    for f in saved:
        assert reopened.get(f.id).name == f.name
        with reopened.content(f.id) as fh:
            assert fh.read() == f.name.encode("utf-8")


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("a\x00b.txt", "ab.txt"),
        ("line\nbreak\r\t.txt", "linebreak.txt"),
        ("\x7fdel\x9f", "del"),
        ("", "unnamed"),
        ("   ", "unnamed"),
        ("\x00\x01\n", "unnamed"),
        ("bad\udc80surrogate", "bad\ufffdsurrogate"),
    ],
)
def test_names_are_cleaned_of_control_characters_only(store, reopen, raw, expected):
    f = store.save(raw, "text/plain", b"x")
    assert f.name == expected
    assert reopen().get(f.id).name == expected


def test_unusable_names_are_refused(store):
    with pytest.raises(InvalidArgument, match="1024"):
        store.save("x" * 1025, "text/plain", b"x")
    with pytest.raises(InvalidArgument):
        store.save(b"bytes-name", "text/plain", b"x")  # type: ignore[arg-type]
    assert store.list() == []


def test_path_like_ids_are_not_found_and_never_followed(store, settings):
    real = store.save("real.txt", "text/plain", b"real")
    # A record a naive "meta/<id>.json" lookup would find by traversal, with a blob it would open.
    decoy = real.to_dict() | {"id": "../../decoy", "name": "decoy"}
    root = store.root if isinstance(store, FilesystemFileStore) else settings.data_root / "files"
    root.mkdir(parents=True, exist_ok=True)
    (root / "decoy.json").write_text(json.dumps(decoy))
    (settings.data_root / "decoy.json").write_text(json.dumps(decoy))
    hostile = [
        "../../decoy",
        "../decoy",
        "file-../../decoy",
        "../meta/" + real.id,
        real.id + ".json",
        real.id.upper(),
        real.id + "\n",
        " " + real.id,
        real.id[:-1],
        real.id + "0",
        "/etc/passwd",
        str(root / "meta" / real.id),
        "",
        "file-" + "0" * 32,
        "files/" + real.id + ".json",
    ]
    for bad in hostile:
        assert store.find(bad) is None, bad
        with pytest.raises(FileNotFoundInStore):
            store.get(bad)
        with pytest.raises(FileNotFoundInStore):
            store.content(bad)
        assert store.delete(bad) is False, bad
    assert (root / "decoy.json").exists() and (settings.data_root / "decoy.json").exists()
    assert [f.id for f in store.list()] == [real.id]
    for not_a_str in (None, 42, Path(real.id), real.id.encode()):
        with pytest.raises(InvalidArgument):
            store.find(not_a_str)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            store.delete(not_a_str)  # type: ignore[arg-type]


def test_ids_are_random_and_unique(store):
    ids = [store.save("same", "text/plain", b"same").id for _ in range(50)]
    assert len(set(ids)) == 50
    assert all(int(i[5:], 16) >= 0 and i[5:] == i[5:].lower() for i in ids)
    assert len({i[5:13] for i in ids}) == 50  # no counter-like shared prefix


# -- limits and crashes ---------------------------------------------------------------------------


def test_max_bytes_aborts_the_stream_and_leaves_nothing(store):
    src = PatternStream(50 * MiB)
    with pytest.raises(FileTooLarge) as info:
        store.save("huge.bin", "application/octet-stream", src, max_bytes=2 * MiB)
    msg = str(info.value)
    assert "huge.bin" in msg and "2,097,152" in msg
    assert info.value.limit == 2 * MiB and info.value.size > 2 * MiB  # type: ignore[attr-defined]
    assert src.pos <= 3 * MiB, "the stream was read on past the limit"
    assert store.list() == [] and inventory(store) == set()


def test_max_bytes_on_bytes_names_the_exact_size_and_the_boundary_is_allowed(store):
    with pytest.raises(FileTooLarge, match=r"1,001 bytes.*limit of 1,000 bytes"):
        store.save("a", "text/plain", b"x" * 1001, max_bytes=1000)
    assert store.list() == [] and inventory(store) == set()
    assert store.save("a", "text/plain", b"x" * 1000, max_bytes=1000).size == 1000
    assert store.save("b", "text/plain", PatternStream(1000), max_bytes=1000).size == 1000
    for bad in (-1, 1.5, "10", True):
        with pytest.raises(InvalidArgument):
            store.save("a", "text/plain", b"x", max_bytes=bad)  # type: ignore[arg-type]


def test_a_stream_failing_midway_leaves_nothing_visible(store):
    keep = store.save("keep.txt", "text/plain", b"keep")
    src = PatternStream(10 * MiB, fail_after=3 * MiB)
    with pytest.raises(RuntimeError, match="connection dropped"):
        store.save("partial.bin", "application/octet-stream", src)
    assert [f.id for f in store.list()] == [keep.id]
    assert inventory(store) == {f"record:{keep.id}", f"blob:{keep.sha256}"}


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.processes
@pytest.mark.slow
def test_a_process_killed_mid_save_leaves_a_temp_that_the_next_open_removes(settings):
    code = """
        import os, sys
        from knowledge.config import load_settings
        from knowledge.filestore import FilesystemFileStore

        class Dying:
            sent = 0
            def read(self, n):
                if self.sent >= 3 * 1024 * 1024:
                    os._exit(9)  # no finally, no cleanup: like a kill -9
                self.sent += n
                return b"z" * n

        store = FilesystemFileStore(load_settings(data_dir=sys.argv[1]))
        store.save("doomed.bin", "application/octet-stream", Dying())
    """
    proc = _run(code, str(settings.data_root))
    assert proc.returncode == 9, proc.stderr
    root = settings.file_store_dir
    leftovers = files_under(root / "tmp")
    assert len(leftovers) == 1 and (root / "tmp" / leftovers.pop()).stat().st_size >= 3 * MiB
    store = FilesystemFileStore(settings)  # opening cleans up
    assert store.list() == []
    assert stored_files(store) == set()


def test_cleanup_removes_unreferenced_blobs_and_keeps_referenced_ones(fs_store, settings):
    store = fs_store
    keep = store.save("keep", "text/plain", b"keep")
    orphan_sha = hashlib.sha256(b"orphan").hexdigest()
    orphan = store.root / "blobs" / orphan_sha[:2] / orphan_sha  # a crash after the blob, before the record
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"orphan")
    (store.root / "tmp" / "save-deadbeef.part").write_bytes(b"half")
    assert FilesystemFileStore(settings).cleanup() == 0  # the constructor already did the work
    assert not orphan.exists()
    assert stored_files(store) == {f"meta/{keep.id}.json", f"blobs/{keep.sha256[:2]}/{keep.sha256}"}


def test_cleanup_leaves_a_save_in_flight_alone(fs_store, settings):
    store = fs_store
    src = PatternStream(4 * MiB, pause_at=2 * MiB)
    result: dict[str, StoredFile] = {}
    t = threading.Thread(target=lambda: result.setdefault("f", store.save("slow", "x/y", src)))
    t.start()
    try:
        assert src.paused.wait(30)
        other = FilesystemFileStore(settings)  # another opener (same process or not) cleans up
        assert other.cleanup() == 0
        assert len(files_under(store.root / "tmp")) == 1
    finally:
        src.resume.set()
        t.join(30)
    assert result["f"].size == 4 * MiB
    assert result["f"].sha256 == pattern_sha256(4 * MiB)


def test_an_unreadable_record_is_skipped_in_list_reported_by_find_and_deletable(fs_store):
    store = fs_store
    good = store.save("good", "text/plain", b"good")
    bad_id = "file-" + "ab" * 16
    (store.root / "meta" / f"{bad_id}.json").write_text("{ not json")
    assert [f.id for f in store.list()] == [good.id]
    with pytest.raises(StoreCorrupt, match=bad_id):
        store.find(bad_id)
    assert store.delete(bad_id) is True
    assert store.find(bad_id) is None


def test_a_record_without_its_blob_is_store_corrupt(fs_store):
    store = fs_store
    f = store.save("x", "text/plain", b"content")
    (store.root / "blobs" / f.sha256[:2] / f.sha256).unlink()
    with pytest.raises(StoreCorrupt, match="missing"):
        store.content(f.id)


# -- listing, persistence, concurrency ------------------------------------------------------------


def test_list_is_newest_first(store):
    saved = [store.save(f"f{i}", "text/plain", str(i).encode()) for i in range(12)]
    listed = store.list()
    assert [f.id for f in listed] == [f.id for f in reversed(saved)]
    assert all(a.created > b.created for a, b in itertools.pairwise(listed))


def test_records_persist_across_instances_and_deletes_are_seen_by_others(reopen, file_store_settings):
    a = reopen()
    f = a.save("persist.txt", "text/plain", b"still here", metadata={"k": "v"})
    g = a.save("gone.txt", "text/plain", b"to be deleted")
    assert [x.id for x in a.list()] == [g.id, f.id]  # a now caches both records

    b = open_file_store(file_store_settings)
    assert b.get(f.id) == f
    assert b.delete(g.id) is True
    with b.content(f.id) as fh:
        assert fh.read() == b"still here"
    assert a.find(g.id) is None  # a's cache does not outlive the file
    assert [x.id for x in a.list()] == [f.id]
    with pytest.raises(FileNotFoundInStore):
        a.content(g.id)


@pytest.mark.slow
def test_concurrent_saves_and_deletes_from_threads(store):
    shared = b"shared content " * 1000
    rounds = 3 if store.name == "s3" else 15  # s3 on moto: 15 rounds take ~13 s
    errors: list[BaseException] = []
    kept: list[StoredFile] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker(n: int) -> None:
        try:
            start.wait()
            for i in range(rounds):
                mine = store.save(f"t{n}-{i}", "text/plain", f"thread {n} file {i}".encode())
                same = store.save(f"s{n}-{i}", "text/plain", io.BytesIO(shared))
                tmp = store.save(f"d{n}-{i}", "text/plain", shared)
                assert store.delete(tmp.id)  # races with other threads' saves of the same blob
                with lock:
                    kept.extend([mine, same])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len({f.id for f in kept}) == len(kept) == 8 * rounds * 2
    assert {f.id for f in store.list()} == {f.id for f in kept}
    for f in kept:
        with store.content(f.id) as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == f.sha256
    stored = inventory(store)
    assert stored == {f"record:{f.id}" for f in kept} | {f"blob:{f.sha256}" for f in kept}
    assert len(blobs(store)) == 8 * rounds + 1  # every distinct content once, nothing in flight left


@pytest.mark.processes
@pytest.mark.slow
def test_two_processes_share_one_store_consistently(settings):
    code = """
        import sys
        from knowledge.config import load_settings
        from knowledge.filestore import FilesystemFileStore

        store = FilesystemFileStore(load_settings(data_dir=sys.argv[1]))
        tag = sys.argv[2]
        for i in range(25):
            keep = store.save(f"{tag}-{i}", "text/plain", b"common bytes")
            drop = store.save(f"{tag}-drop-{i}", "text/plain", b"common bytes")
            assert store.delete(drop.id)
            store.save(f"{tag}-own-{i}", "text/plain", f"{tag} {i}".encode())
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(settings.data_root), tag], stderr=subprocess.PIPE, text=True
        )
        for tag in ("p1", "p2")
    ]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read() if p.stderr else ""
    store = FilesystemFileStore(settings)
    listed = store.list()
    assert len(listed) == 100
    assert len(store.find_by_sha256(hashlib.sha256(b"common bytes").hexdigest())) == 50
    for f in listed:
        with store.content(f.id) as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == f.sha256
    assert len([p for p in stored_files(store) if p.startswith("blobs/")]) == 51


# -- the registry ---------------------------------------------------------------------------------


@pytest.fixture
def fake_entry_points(monkeypatch):
    def install(*eps: EntryPoint) -> None:
        monkeypatch.setattr(plugins, "entry_points", lambda group: [e for e in eps if e.group == group])
        registry._reset_for_tests()

    yield install
    registry._reset_for_tests()


def test_builtin_filesystem_backend_is_found(settings):
    assert "filesystem" in registry.backend_names()
    store = open_file_store(settings)
    assert isinstance(store, FilesystemFileStore) and isinstance(store, FileStore)
    assert store.root == settings.file_store_dir
    f = store.save("a", "text/plain", b"a")
    assert (settings.file_store_dir / "meta" / f"{f.id}.json").is_file()


def test_unknown_backend_names_the_available_ones(settings, tmp_path):
    with pytest.raises(BackendUnavailable, match=r"'nosuch'.*Available: .*filesystem"):
        open_file_store(settings, "nosuch")
    configured = load_settings(data_dir=tmp_path / "d2", file_store={"backend": "s3ish"})
    with pytest.raises(BackendUnavailable, match="'s3ish'"):
        open_file_store(configured)


def test_a_broken_plugin_is_reported_not_fatal(fake_entry_points, settings):
    group = registry.GROUP
    fake_entry_points(
        EntryPoint("filesystem", "knowledge.filestore.filesystem:FilesystemFileStore", group),
        EntryPoint("broken", "knowledge_no_such_module:Store", group),
        EntryPoint("notastore", "json:dumps", group),
        EntryPoint("elsewhere", "json:loads", "some.other.group"),
    )
    assert registry.backend_names() == ["broken", "filesystem", "notastore"]
    with pytest.raises(BackendUnavailable, match=r"broken.*failed to load"):
        open_file_store(settings, "broken")
    with pytest.raises(BackendUnavailable, match="not a FileStore"):
        registry.load_backend_class("notastore")
    assert set(registry.backend_errors()) == {"broken", "notastore"}
    with open_file_store(settings, "filesystem") as store:  # the others still work
        assert store.save("a", "text/plain", b"a").size == 1


def test_a_store_that_cannot_start_is_backend_unavailable(settings, monkeypatch):
    class Failing(FilesystemFileStore):
        def __init__(self, settings):
            raise PermissionError("read-only file system")

    monkeypatch.setattr(registry, "load_backend_class", lambda name: Failing)
    with pytest.raises(BackendUnavailable, match="could not start: read-only file system"):
        open_file_store(settings, "failing")


def test_an_unwritable_folder_is_backend_unavailable(tmp_path):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(BackendUnavailable, match="cannot be created"):
        FilesystemFileStore(load_settings(data_dir=blocker))


def test_a_save_under_a_given_id_keeps_the_id_and_the_time_and_never_replaces(store):
    """A copy from another store keeps its id and creation time (``knowledge files move``); a second
    save under that id is refused and leaves the first untouched."""
    when = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    fid = "file-" + "ab" * 16
    f = store.save(
        "copy.txt", "text/plain", io.BytesIO(b"moved bytes"), file_id=fid, created=when, metadata={"owner": "ann"}
    )
    assert (f.id, f.created, f.sha256) == (fid, when, hashlib.sha256(b"moved bytes").hexdigest())
    assert store.get(fid) == f and store.get(fid).created == when
    with store.content(fid) as fh:
        assert fh.read() == b"moved bytes"
    with pytest.raises(InvalidArgument, match="stored already"):
        store.save("other.txt", "text/plain", b"other bytes", file_id=fid)
    with store.content(fid) as fh:
        assert fh.read() == b"moved bytes"
    assert [x.id for x in store.find_by_sha256(hashlib.sha256(b"moved bytes").hexdigest())] == [fid]
    assert store.find_by_sha256(hashlib.sha256(b"other bytes").hexdigest()) == []
    with pytest.raises(InvalidArgument):
        store.save("bad.txt", None, b"x", file_id="../etc/passwd")
    with pytest.raises(InvalidArgument):
        store.save("bad.txt", None, b"x", created=when)  # a time only with an id
    assert [x.id for x in store.list()] == [fid]
