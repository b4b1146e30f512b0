"""10,000 files on a page (issue 44, item 3), the parts: a page of a store's file records read by the
catalog (``Catalog.file_page``: ``LIMIT``/``OFFSET`` and a count, on both engines), its filter (a name
in any case, with ``%`` and ``_`` taken as written; statuses; types; dates), the counts by the
database; the workbench's page and bulk actions (retry queued as a batch, delete, move, readers),
checked and audited like the single-file calls, for a writer who may not read every file; the Files
page's page of the file store; the audit trail's keyset. The pages in the browser:
tests/browser/test_browser_10k_files.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from knowledge.catalog import DONE, FAILED, PROCESSING, Catalog, FileCounts, FileQuery, FileRecord
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, PermissionDenied
from knowledge.system import System
from knowledge.workbench import Workbench

PW = "correct horse battery"


@pytest.fixture
def catalog(catalog_settings):
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


def _record(i: int, name: str, status: str = DONE, chunks: int = 2) -> FileRecord:
    return FileRecord("s", f"id{i:03d}", name, None, 100 + i, status, "boom" if status == FAILED else None, chunks, None)


def test_a_page_of_file_records_is_read_by_the_catalog_with_its_count(catalog):
    for i in range(30):
        catalog.put_file(_record(i, f"Doc-{i:02d}.{'pdf' if i % 3 == 0 else 'md'}", FAILED if i % 5 == 0 else DONE))
    catalog.put_file(_record(90, "100%_sure.txt"))
    catalog.put_file(_record(91, "100 percent.txt", PROCESSING))
    catalog.add_name("s", "id091", "Alias-Named.txt")
    catalog.put_file(FileRecord("other", "x", "Doc-00.pdf", None, 1, DONE, None, 1, None))  # another store

    page = catalog.file_page("s", limit=10)
    assert page.total == 32 and len(page.records) == 10 and page.offset == 0
    assert [r.file_name for r in page.records[:3]] == ["100 percent.txt", "100%_sure.txt", "Doc-00.pdf"]
    assert page.records[0].aliases == ("Alias-Named.txt",)  # the page's names are read with it
    last = catalog.file_page("s", limit=10, offset=30)
    assert [r.file_name for r in last.records] == ["Doc-28.md", "Doc-29.md"] and last.total == 32

    # by name, in any case; % and _ are the characters typed, not patterns; an alias finds its content
    assert catalog.file_page("s", FileQuery(name="doc-1")).total == 10
    assert [r.file_name for r in catalog.file_page("s", FileQuery(name="0%_")).records] == ["100%_sure.txt"]
    assert catalog.file_page("s", FileQuery(name="_")).total == 1
    assert [r.file_id for r in catalog.file_page("s", FileQuery(name="alias-named")).records] == ["id091"]
    # status and type
    failed = catalog.file_page("s", FileQuery(statuses=(FAILED,)))
    assert failed.total == 6 and {r.status for r in failed.records} == {FAILED}
    assert catalog.file_page("s", FileQuery(types=("PDF",))).total == 10
    assert catalog.file_page("s", FileQuery(types=("pdf",), statuses=(FAILED,))).total == 2  # 0 and 15
    assert catalog.file_page("s", FileQuery(name="doc", types=("txt",))).total == 0
    # dates: updated at or after since, before until
    now = datetime.now(UTC)
    assert catalog.file_page("s", FileQuery(since=now - timedelta(hours=1))).total == 32
    assert catalog.file_page("s", FileQuery(until=now - timedelta(hours=1))).total == 0
    # left out: the ids a person may not read, from the page, the count and the counts
    assert catalog.file_page("s", FileQuery(name="doc-0"), exclude={"id000", "id001"}).total == 8
    assert catalog.file_counts("s") == FileCounts(indexed=25, failed=6, busy=1, chunks=50)
    assert catalog.file_counts("s", exclude={"id000"}) == FileCounts(indexed=25, failed=5, busy=1, chunks=50)
    assert catalog.file_ids("s", FileQuery(statuses=(FAILED,))) == [f"id{i:03d}" for i in (0, 5, 10, 15, 20, 25)]


# -- the workbench: a page, and the bulk actions, for people ------------------------------------------
@pytest.fixture
def system(tmp_path):
    settings = load_settings(data_dir=tmp_path / "data", ingest={"worker_process": False})
    system = System(settings, lambda model: HashEmbedder(dimension=32, max_tokens=128))
    people = system.people
    people.set_up_admin("root", PW)
    for name in ("ana", "bob", "wendy"):
        people.accounts.create(name, PW)
    people.accounts.create_group("hr")
    people.accounts.add_to_group("hr", "ana")
    root = _as(system, "root")
    root.create_store("hb")
    root.create_store("archive")
    root.share_store("hb", "everyone", "", "read")
    root.share_store("hb", "user", "wendy", "write")
    root.share_store("archive", "user", "wendy", "write")
    for i in range(6):
        assert root.ingest_file("hb", f"Handbook page {i}: holidays and salary.".encode(), f"page-{i}.md").ok
    hr = root.ingest_file("hb", b"Salary bands of the payroll review.", "salaries.md")
    root.set_file_readers("hb", hr.file_id, "group:hr")
    yield system
    system.close()


def _as(system: System, who: str) -> Workbench:
    return Workbench(system).as_user(system.people.accounts.actor(who))


def _fail(system: System, name: str, error: str = "BackendUnavailable") -> str:
    """A failed record of ``hb`` over real stored bytes, as an outage leaves one (a retry can help)."""
    stored = system.files.save(name, "text/markdown", f"{name}: a page that failed while the service was out.".encode())
    system.catalog.put_file(
        FileRecord(
            "hb", stored.id, name, stored.sha256, stored.size, FAILED, "The service was out of reach.", 0, None, error=error
        )
    )
    return stored.id


def test_a_writer_pages_the_files_they_may_read_and_the_counts_leave_out_the_others(system):
    wendy = _as(system, "wendy")
    page = wendy.file_page("hb", limit=4)
    assert page.total == 6 and [r.file_name for r in page.records] == ["page-0.md", "page-1.md", "page-2.md", "page-3.md"]
    assert wendy.file_page("hb", FileQuery(name="salar")).total == 0  # hr's file is no row of hers
    assert wendy.file_counts("hb").indexed == 6 and _as(system, "ana").file_counts("hb").indexed == 7
    assert [r.file_name for r in _as(system, "ana").file_page("hb", FileQuery(name="SALAR")).records] == ["salaries.md"]


def test_a_bulk_retry_queues_the_failed_files_a_retry_can_help_and_says_why_it_left_the_others_out(system):
    wendy = _as(system, "wendy")
    outage = [_fail(system, f"out-{i}.md") for i in range(3)]
    _fail(system, "empty.md", error="EmptyDocument")  # would fail the same way
    _fail(system, "locked.md", error="PasswordRequired")  # needs its password: one at a time
    result = wendy.bulk_files("hb", "retry", query=FileQuery())  # every failed file that matches
    assert sorted(result.acted) == ["out-0.md", "out-1.md", "out-2.md"]
    assert dict(result.skipped) == {
        "empty.md": "would fail the same way",
        "locked.md": "asks for a password: retry it on its own",
    }
    assert len(result.jobs) == 1 and result.jobs[0].wait(60)
    assert {wendy.file_record("hb", fid).status for fid in outage} == {DONE}  # the outcome replaced the failure
    assert wendy.file_counts("hb").failed == 2
    events = system.people.audit.events(action="file.ingest", store="hb", limit=1)
    assert events[0].actor == "wendy" and events[0].detail["count"] == 3


def test_bulk_delete_readers_and_move_act_on_the_picked_or_all_matching_and_skip_a_file_they_may_not_read(system):
    wendy, root = _as(system, "wendy"), _as(system, "root")
    hidden = next(f.file_id for f in root.file_page("hb", FileQuery(name="salaries")).records)
    ids = {r.file_name: r.file_id for r in wendy.file_page("hb").records}

    done = wendy.bulk_files("hb", "delete", file_ids=[ids["page-0.md"], hidden])
    assert done.acted == ["page-0.md"] and done.skipped == [(hidden, "not in the store")]
    assert root.file_record("hb", hidden) is not None  # as an id the store does not hold: kept

    set_ = wendy.bulk_files("hb", "readers", query=FileQuery(name="page-1"), readers="group:hr")
    assert set_.acted == ["page-1.md"] and root.file_readers("hb", ids["page-1.md"]) == ("group:hr",)
    with pytest.raises(InvalidArgument, match="no group 'board'"):
        wendy.bulk_files("hb", "readers", file_ids=[ids["page-2.md"]], readers="group:board")

    moved = wendy.bulk_files("hb", "move", file_ids=[ids["page-2.md"], ids["page-3.md"]], to="archive")
    assert sorted(moved.acted) == ["page-2.md", "page-3.md"] and all(j.wait(60) for j in moved.jobs)
    assert [r.file_name for r in wendy.file_page("archive").records] == ["page-2.md", "page-3.md"]
    assert wendy.file_page("hb", FileQuery(name="page-2")).total == 0
    assert wendy.search("archive", "Handbook page 2 holidays", k=1)[0].file_name == "page-2.md"
    with pytest.raises(InvalidArgument):
        wendy.bulk_files("hb", "move", file_ids=[ids["page-4.md"]], to="hb")
    with pytest.raises(InvalidArgument, match="Unknown action"):
        wendy.bulk_files("hb", "explode", file_ids=[ids["page-4.md"]])


def test_a_reader_may_not_act_in_bulk(system):
    bob = _as(system, "bob")
    with pytest.raises(PermissionDenied):
        bob.bulk_files("hb", "delete", query=FileQuery())
    assert _as(system, "root").file_counts("hb").indexed == 7


def test_the_files_page_reads_a_page_of_the_file_store_that_the_person_may_read(system):
    bob, ana = _as(system, "bob"), _as(system, "ana")
    page = bob.stored_file_page(limit=4)
    assert page.total == 6 and len(page.usages) == 4 and page.unused == 0
    assert all(u.stores == ["hb"] for u in page.usages)
    assert bob.stored_file_page(name="SALARIES").total == 0 and ana.stored_file_page(name="SALARIES").total == 1
    assert [u.file.name for u in bob.stored_file_page(name="page-5").usages] == ["page-5.md"]
    assert bob.stored_file_page(types=["pdf"]).total == 0
    assert bob.stored_file_page(since=datetime.now(UTC) + timedelta(days=1)).total == 0
    assert bob.stored_file_page(limit=4, offset=100).offset == 4  # past the end: the last page
    assert ana.stored_file_page().total_bytes > bob.stored_file_page().total_bytes
    one = bob.stored_file_page(name="page-5")  # the figures are the search's
    assert one.total_bytes == one.usages[0].file.size < bob.stored_file_page().total_bytes
    assert bob.stored_file_page(types=["pdf"]).total_bytes == 0


def test_the_audit_trail_reads_a_page_after_the_last_event_of_the_one_before(system):
    root = _as(system, "root")
    first = root.audit_events(action="file.ingest", limit=3)
    second = root.audit_events(action="file.ingest", limit=3, before=first[-1].id)
    assert len(first) == 3 and len(second) == 3
    assert first[-1].id > second[0].id and not {e.id for e in first} & {e.id for e in second}


def test_add_files_writes_many_new_records_with_their_names_in_one_go_or_none(catalog):
    records = [_record(i, f"bulk-{i:04d}.md") for i in range(1200)]  # more than one statement's rows
    assert catalog.add_files(records) == 1200
    page = catalog.file_page("s", FileQuery(name="bulk-0999"))
    assert page.total == 1 and page.records[0].file_name == "bulk-0999.md" and page.records[0].chunks == 2
    assert [n.name for n in catalog.names("s", file_id="id999")] == ["bulk-0999.md"]
    with pytest.raises(Exception, match=r"(?i)duplicate|unique|constraint"):  # one exists: nothing is written
        catalog.add_files([_record(5000, "new.md"), _record(1, "again.md")])
    assert catalog.file_page("s", FileQuery(name="new.md")).total == 0
    assert catalog.file_counts("s").indexed == 1200
