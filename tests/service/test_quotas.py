"""Quotas and rate limits (issue 44, item 2) on a real catalog (DuckDB and PostgreSQL), real file
store and real vector store, with a fake embedder: a member over a storage quota is refused by every
ingestion path of the workbench and nothing is written (no file record, no chunk, no file-store
object); an admin is exempt while ``quotas.admins_exempt`` is on; the use is right after ingesting and
deleting; an admin's own limits for a person, group or store come before the settings; the requests
of a key are counted in the shared catalog, so two systems (two API processes) count the same."""

from __future__ import annotations

import io

import pytest

from knowledge.config import Settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, PermissionDenied, QuotaExceeded
from knowledge.people.quotas import RateCounter, Usage
from knowledge.system import System
from knowledge.workbench import Workbench

PW = "correct horse battery"
TEXT = b"The parental leave policy grants sixteen weeks of paid leave to every parent. " * 2
N = len(TEXT)  # 156 bytes


def quota_settings(settings: Settings, **quotas) -> Settings:
    return settings.model_copy(update={"quotas": settings.quotas.model_copy(update=quotas)})


def make_system(settings: Settings) -> System:
    system = System(settings, embedder_factory=lambda m: HashEmbedder(dimension=16))
    if not system.people.enabled():
        system.people.set_up_admin("root", PW)
        system.people.accounts.create("ana", PW)
    return system


@pytest.fixture
def world(catalog_settings):
    """A system on the catalog under test with 300 bytes a person; root (admin) and ana (member)."""
    system = make_system(quota_settings(catalog_settings, user_bytes=300))
    yield system, Workbench(system, actor=system.people.accounts.actor("ana"))
    system.close()


def written(system: System, wb: Workbench, store: str) -> tuple[int, int, int]:
    """(file records, chunks in the vector store, file-store objects) of ``store``."""
    records = system.catalog.files(store) if system.stores.exists(store) else []
    chunks = wb.vector_store(store).count() if system.stores.exists(store) else 0
    return len(records), chunks, len(system.files.list())


def test_a_member_over_their_byte_quota_is_refused_on_every_path_and_nothing_is_written(world, tmp_path):
    system, ana = world
    assert ana.ingest_file("notes", TEXT, "one.txt").chunks >= 1
    before = written(system, ana, "notes")
    assert before[0] == 1 and before[2] == 1
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "two.txt").write_bytes(TEXT)
    attempts = {
        "ingest_file": lambda: ana.ingest_file("notes", TEXT.replace(b"sixteen", b"twenty"), "two.txt"),
        "ingest_file (a stream)": lambda: ana.ingest_file("notes", io.BytesIO(TEXT + b"!"), "two.txt"),
        "submit_batch": lambda: ana.submit_batch("notes", [("two.txt", TEXT + b"?")]),
        "ingest_paths": lambda: ana.ingest_paths("notes", [folder / "two.txt"]),
        "index_text": lambda: ana.index_text("notes", "typed", TEXT.decode() * 2),
        "save_attachment": lambda: ana.save_attachment("two.txt", "text/plain", TEXT * 2),
        "a new store": lambda: ana.ingest_file("other", TEXT + b".", "two.txt"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(QuotaExceeded) as refused:
            attempt()
        words = str(refused.value)
        assert f"Your stores hold {N} bytes" in words and "quota is 300 bytes" in words, (what, words)
        assert "Nothing was added" in words
        assert refused.value.limit == 300 and refused.value.used == N and refused.value.measure == "bytes"
        assert written(system, ana, "notes") == before, what
        assert not system.stores.exists("other")
    assert isinstance(refused.value, PermissionDenied)  # every surface that shows a refusal shows this one
    # within the quota, the next file goes in
    assert ana.ingest_file("notes", b"A short note.", "short.txt").chunks == 1
    assert written(system, ana, "notes")[0] == 2


def test_an_admin_is_exempt_by_setting_and_refused_without_it(catalog_settings):
    for exempt in (True, False):
        system = make_system(quota_settings(catalog_settings, user_bytes=100, admins_exempt=exempt))
        try:
            root = Workbench(system, actor=system.people.accounts.actor("root"))
            name = f"admin-{exempt}".lower()
            if exempt:
                root.ingest_file(name, TEXT, "big.txt")
                root.ingest_file(name, TEXT + b"!", "bigger.txt")
                assert root.usage().usage.files == 2 and root.usage().usage.bytes == 2 * N + 1
            else:
                with pytest.raises(QuotaExceeded, match="quota is 100 bytes"):
                    root.ingest_file(name, TEXT, "big.txt")
                assert not system.stores.exists(name)
        finally:
            system.close()


def test_usage_is_right_after_ingesting_and_deleting(world):
    system, ana = world
    root = Workbench(system, actor=system.people.accounts.actor("root"))
    assert ana.usage().usage == Usage()
    a = ana.ingest_file("notes", TEXT, "a.txt")
    b = ana.ingest_file("notes", b"Short one.", "b.txt")
    ana.ingest_file("papers", b"Another short one.", "c.txt")
    chunks = a.chunks + b.chunks + 1
    assert ana.usage().usage == Usage(N + 10 + 18, 3, chunks)
    assert root.usage("store", "notes").usage == Usage(N + 10, 2, a.chunks + b.chunks)
    by_store = {name: (owner, use) for name, owner, use, _ in root.usage_by_store()}
    assert by_store["notes"] == ("ana", Usage(N + 10, 2, a.chunks + b.chunks))
    assert by_store["papers"] == ("ana", Usage(18, 1, 1))
    ana.delete_file("notes", a.file_id)
    assert ana.usage().usage == Usage(28, 2, 2)
    assert {r.name: r.usage for r in root.usage_by_user()}["ana"] == Usage(28, 2, 2)
    ana.delete_store("papers")
    assert ana.usage().usage == Usage(10, 1, 1)
    assert {r.name: r.usage for r in root.usage_by_user()}["root"] == Usage()


def test_an_admins_own_limits_come_before_the_settings(world):
    system, ana = world
    root = Workbench(system, actor=system.people.accounts.actor("root"))
    ana.ingest_file("notes", b"Short one.", "a.txt")
    # a person's own limit
    assert root.set_quota("user", "ana", "files", 1).amount == 1
    with pytest.raises(QuotaExceeded, match="Your stores hold 1 file; the quota is 1 file, and adding 1 file"):
        ana.ingest_file("notes", b"Short two.", "b.txt")
    root.set_quota("user", "ana", "files", None)  # back to the setting (unlimited files)
    ana.ingest_file("notes", b"Short two.", "b.txt")
    # a store's
    root.set_quota("store", "notes", "chunks", 2)
    with pytest.raises(QuotaExceeded, match="The store 'notes' holds 2 chunks: the quota of 2 chunks is reached"):
        ana.ingest_file("notes", b"Short three.", "c.txt")
    ana.ingest_file("elsewhere", b"Short three.", "c.txt")  # another store of hers is not limited
    # a group's: the stores of its members
    system.people.accounts.create_group("hr")
    system.people.accounts.add_to_group("hr", "ana")
    root.set_quota("group", "hr", "files", 3)
    with pytest.raises(QuotaExceeded, match="The stores of the group hr hold 3 files"):
        ana.ingest_file("elsewhere", b"Short four.", "d.txt")
    # 0 in an admin's limit is unlimited, even where the setting limits
    root.set_quota("user", "ana", "bytes", 0)
    assert ana.usage().limits["bytes"].amount is None and ana.usage().limits["bytes"].own
    assert [(q.scope, q.name, q.measure, q.amount) for q in root.quota_overrides()] == [
        ("group", "hr", "files", 3),
        ("store", "notes", "chunks", 2),
        ("user", "ana", "bytes", None),
    ]
    assert [e.action for e in root.audit_events(action="quota.")].count("quota.set") == 5
    # a member may neither set nor read another's
    with pytest.raises(PermissionDenied, match="Only an admin"):
        ana.set_quota("user", "ana", "bytes", 10**9)
    with pytest.raises(PermissionDenied, match="Only an admin"):
        ana.usage("user", "root")
    with pytest.raises(InvalidArgument, match="no user 'nobody'"):
        root.set_quota("user", "nobody", "bytes", 5)
    with pytest.raises(InvalidArgument, match="quota is on bytes, files, chunks"):
        root.set_quota("store", "notes", "requests_per_minute", 5)


def test_requests_are_counted_per_key_and_minute_and_reset():
    t = [1_000_000.0]  # a minute starts at 999_960: 40 s left in it
    counter = RateCounter(None, shared=False, clock=lambda: t[0])
    first = [counter.hit("key-a", 2) for _ in range(3)]
    assert [d.allowed for d in first] == [True, True, False]
    assert first[-1].used == 3 and first[-1].limit == 2 and first[-1].reset == 20
    assert counter.hit("key-b", 2).allowed  # another key counts apart
    assert counter.hit("key-a", None).allowed  # no limit: nothing counted
    t[0] += 20
    assert counter.hit("key-a", 2).allowed and counter.hit("key-a", 2).used == 2  # the next minute


def test_two_systems_on_one_shared_catalog_count_the_same_requests(catalog_settings, catalog_dialect):
    if catalog_dialect != "postgresql":
        pytest.skip("the rates are counted in the catalog only when it is shared (PostgreSQL)")
    settings = quota_settings(catalog_settings, api_requests_per_minute=3)
    one = make_system(settings)
    two = make_system(settings)
    try:
        t = 2_000_000.0
        one.people.rates.clock = two.people.rates.clock = lambda: t
        assert one.people.rates.shared and two.people.rates.shared
        ana = [Workbench(s, actor=s.people.accounts.actor("ana")) for s in (one, two)]
        got = [ana[i % 2].count_request("kn-ana") for i in range(4)]
        assert [d.allowed for d in got] == [True, True, True, False]
        assert got[-1].used == 4 and got[-1].limit == 3
        root = Workbench(one, actor=one.people.accounts.actor("root"))
        assert all(root.count_request("kn-root").allowed for _ in range(5))  # admins exempt
        assert root.count_request("kn-root").limit is None
    finally:
        one.close()
        two.close()


def test_a_web_page_past_the_quota_fails_with_the_words_and_is_not_written(settings, site):
    from tests.helpers.web import page

    site.html("/", page("Orchard", "The orchard grows quinces and medlars. " * 5))
    system = make_system(
        quota_settings(settings, user_files=1).model_copy(
            update={"ingest": settings.ingest.model_copy(update={"web_allow_private": True})}
        )
    )
    try:
        ana = Workbench(system, actor=system.people.accounts.actor("ana"))
        ana.ingest_file("notes", b"Short one.", "a.txt")
        job = ana.submit_web("notes", site.url("/"))
        assert job.wait(60)
        (result,) = [f.result for f in job.files]
        assert result is not None and not result.ok
        assert "Your stores hold 1 file; the quota is 1 file, and adding 1 file would pass it" in result.message
        assert [f.file_name for f in system.catalog.files("notes")] == ["a.txt"]
        assert len(system.files.list()) == 1
    finally:
        system.close()


def test_a_folder_sync_adds_files_until_a_quota_and_fails_the_rest_in_words(settings, tmp_path):
    system = make_system(quota_settings(settings, user_files=2))
    try:
        ana = Workbench(system, actor=system.people.accounts.actor("ana"))
        folder = tmp_path / "docs"
        folder.mkdir()
        for name in ("a.txt", "b.txt", "c.txt"):
            (folder / name).write_text(f"The note called {name} says something of its own.")
        ana.create_store("notes")
        sync = ana.syncs.folder("notes", folder)
        report = sync.apply(sync.plan())
        said = {r.item.path: (r.ok, r.message) for r in report.results}
        assert said["a.txt"][0] and said["b.txt"][0]
        assert said["c.txt"] == (
            False,
            "c.txt: Your stores hold 2 files; the quota is 2 files, and adding 1 file would pass it. Nothing"
            " was added. Delete files, or ask an admin to raise the quota.",
        )
        assert sorted(f.file_name for f in system.catalog.files("notes")) == ["a.txt", "b.txt"]
        assert len(system.files.list()) == 2
    finally:
        system.close()


def test_the_own_limits_of_a_deleted_person_group_or_store_go_with_it(world):
    system, ana = world
    root = Workbench(system, actor=system.people.accounts.actor("root"))
    ana.ingest_file("notes", b"Short one.", "a.txt")
    system.people.accounts.create("bo", PW)
    system.people.accounts.create_group("hr")
    for scope, name in (("user", "bo"), ("group", "hr"), ("store", "notes")):
        root.set_quota(scope, name, "files", 7)
    ana.delete_store("notes")
    root.accounts.delete_group("hr")
    system.people.delete_user("bo", root.actor)
    assert root.quota_overrides() == []
    system.people.accounts.create("bo", PW)
    assert root.usage("user", "bo").limits["files"].amount is None


def test_a_bundle_past_a_quota_is_not_imported(settings, tmp_path):
    system = make_system(quota_settings(settings, user_chunks=2))
    try:
        root = Workbench(system, actor=system.people.accounts.actor("root"))
        for i in range(3):
            root.ingest_file("team", f"Note {i} says something of its own.".encode(), f"n{i}.txt")
        root.portable.export_store("team", tmp_path / "team.kb")
        ana = Workbench(system, actor=system.people.accounts.actor("ana"))
        with pytest.raises(QuotaExceeded, match="Your stores hold 0 chunks; the quota is 2 chunks, and adding 3 chunks"):
            ana.portable.import_bundle(tmp_path / "team.kb", as_name="mine")
        assert not system.stores.exists("mine")
        assert ana.usage().usage == Usage()
        root.set_quota("user", "ana", "chunks", 3)
        assert ana.portable.import_bundle(tmp_path / "team.kb", as_name="mine").store == "mine"
        assert ana.usage().usage.chunks == 3
    finally:
        system.close()


def test_a_store_the_local_admin_queued_before_accounts_is_the_admins_not_an_owner_named_local(catalog_settings):
    """A batch into a new store, queued before accounts existed, left an owner row "local" (a reserved
    name no account has): People then listed the store as "local"'s and no quota counted it."""
    system = System(catalog_settings, embedder_factory=lambda m: HashEmbedder(dimension=16))
    try:
        job = Workbench(system).submit_batch("early", [("one.txt", TEXT)])
        assert job.wait(60) and system.stores.exists("early")
        assert system.people.sharing.owner("early") is None  # the admins', as a store made before accounts
        system.people.set_up_admin("root", PW)
        root = Workbench(system, actor=system.people.accounts.actor("root"))
        (row,) = [r for r in root.usage_by_store() if r[0] == "early"]
        assert row[1] is None and row[2].files == 1
        assert "local" not in system.people.quotas.by_user()
    finally:
        system.close()


def test_a_move_between_ones_own_stores_adds_nothing_to_ones_use(world):
    """ana holds 156 of her 300 bytes: moving that file to her other store keeps her at 156 (the
    check counted it twice, 312, and refused)."""
    system, ana = world
    fid = ana.ingest_file("notes", TEXT, "one.txt").file_id
    ana.create_store("archive")
    result = ana.bulk_files("notes", "move", file_ids=[fid], to="archive")
    assert result.acted == ["one.txt"] and result.warnings == []
    assert all(job.wait(60) for job in result.jobs)
    assert [f.file_name for f in system.catalog.files("archive")] == ["one.txt"]
    assert system.people.quotas.user_usage("ana").bytes == N


def test_an_admins_move_that_takes_a_member_past_her_quota_is_done_and_says_so(world):
    system, ana = world
    ana.ingest_file("notes", TEXT, "one.txt")
    root = Workbench(system, actor=system.people.accounts.actor("root"))
    fid = root.ingest_file("admin-notes", TEXT.replace(b"leave", b"lunch"), "two.txt").file_id
    result = root.bulk_files("admin-notes", "move", file_ids=[fid], to="notes")
    assert result.acted == ["two.txt"]
    assert all(job.wait(60) for job in result.jobs)
    (warning,) = result.warnings
    assert warning == (
        f"Done all the same, as admins are exempt from quotas: the stores of ana now hold {2 * N} bytes,"
        " past the quota of 300 bytes."
    )
    assert system.people.quotas.user_usage("ana").bytes == 2 * N

    # a move is still held to the quota of the store it goes to: refused, and nothing moves
    ana.create_store("archive")
    root.set_quota("store", "archive", "bytes", 100)
    one = next(f.file_id for f in system.catalog.files("notes") if f.file_name == "one.txt")
    with pytest.raises(QuotaExceeded, match="The store 'archive' holds 0 bytes; the quota is 100 bytes"):
        ana.bulk_files("notes", "move", file_ids=[one], to="archive")
    assert sorted(f.file_name for f in system.catalog.files("notes")) == ["one.txt", "two.txt"]
    assert system.catalog.files("archive") == []
