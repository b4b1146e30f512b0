"""Access per document, the parts (issue 41): reading readers as people write them
(:func:`knowledge.people.policy.parse_readers`), who reads what (:class:`~knowledge.people.policy.Policy`),
setting a file's readers through the workbench (checked, audited as ``file.readers``), the catalog's
readers on both engines, and the read-only filtered view of a collection
(:class:`~knowledge.vectorstore.readable.ReadableCollection`) on every backend. The whole matrix of
surfaces and backends: tests/features/test_document_access.py."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from knowledge.catalog import DONE, Catalog, FileRecord
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import FileNotFoundInStore, InvalidArgument, PermissionDenied
from knowledge.people import Actor
from knowledge.people.policy import EVERYONE_READER, describe_readers, parse_readers, principals
from knowledge.system import System
from knowledge.vectorstore.base import AnyOf, Point
from knowledge.vectorstore.readable import ReadableCollection
from knowledge.workbench import Workbench

PW = "correct horse battery"


# -- parse_readers, describe_readers, principals ------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "stored"),
    [
        (None, None),
        ("everyone", None),
        ("Everyone", None),
        ("*", None),
        (" everyone , ", None),
        ("group:hr", ("group:hr",)),
        ("group:hr, user:ana", ("group:hr", "user:ana")),
        (" GROUP : hr ,User:Ana ", ("group:hr", "user:Ana")),  # kinds lower case, names stripped, kept as written
        ("group:hr, group:hr,user:ana", ("group:hr", "user:ana")),
        (["user:ana", " group:hr "], ("user:ana", "group:hr")),
        (("group:Personalabteilung", "user:zoë"), ("group:Personalabteilung", "user:zoë")),
        ("group:hr:board", ("group:hr:board",)),  # only the first colon separates
    ],
)
def test_parse_readers_reads_what_people_write(given, stored):
    assert parse_readers(given) == stored


@pytest.mark.parametrize(
    "given",
    ["hr", "team:hr", "group:", ":hr", "user: ", "group hr", ["group:hr", 5], [None], [b"group:hr"], "users:ana"],
)
def test_parse_readers_refuses_what_is_not_a_reader_and_says_how_to_write_one(given):
    with pytest.raises(InvalidArgument) as info:
        parse_readers(given)
    assert "'user:<name>', 'group:<name>' or 'everyone'" in str(info.value)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("", "No reader is given"),
        (" , ,", "No reader is given"),
        ([], "No reader is given"),
        (["group:hr", "everyone"], "'everyone' stands alone"),
        ("everyone, group:hr", "'everyone' stands alone"),
    ],
)
def test_parse_readers_refuses_nothing_and_everyone_beside_others(given, said):
    """A blank value opened a restricted file to everyone without a word (the new-user trial's REST
    update with ``"readers": ""``); ``everyone`` beside a group dropped the group without a word."""
    with pytest.raises(InvalidArgument, match=said):
        parse_readers(given)


def test_describe_readers_and_principals():
    assert describe_readers(None) == "everyone who may read the store"
    assert describe_readers(("group:hr", "user:ana")) == "group hr, user ana"
    assert describe_readers(()) == "nobody but the store's owners"
    actor = Actor("ana", "member", frozenset({"sales", "hr"}))
    assert principals(actor) == (EVERYONE_READER, "user:ana", "group:hr", "group:sales")


# -- a system with people ---------------------------------------------------------------------------
def _system(tmp_path, **accounts) -> System:
    settings = load_settings(data_dir=tmp_path / "data", **({"accounts": accounts} if accounts else {}))
    system = System(settings, lambda model: HashEmbedder(dimension=32, max_tokens=128))
    people = system.people
    people.set_up_admin("root", PW)
    for name in ("ana", "bob", "wendy"):
        people.accounts.create(name, PW)
    people.accounts.create("adm", PW, role="admin")
    people.accounts.create_group("hr")
    people.accounts.add_to_group("hr", "ana")
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store("hb")
    root.share_store("hb", "everyone", "", "read")
    root.share_store("hb", "user", "wendy", "write")
    for i in range(3):
        assert root.ingest_file("hb", f"Handbook page {i}: holidays and salary.".encode(), f"page-{i}.md").ok
    return system


def _as(system: System, who: str) -> Workbench:
    return Workbench(system).as_user(system.people.accounts.actor(who))


@pytest.fixture
def system(tmp_path):
    s = _system(tmp_path)
    yield s
    s.close()


def _salaries(system: System) -> str:
    r = _as(system, "root").ingest_file("hb", b"Salary bands of the payroll review.", "salaries.md")
    assert r.ok and r.file_id
    return r.file_id


# -- Workbench.set_file_readers ---------------------------------------------------------------------
def test_set_file_readers_checks_each_user_and_group_and_changes_nothing_when_refused(system):
    root, fid = _as(system, "root"), _salaries(system)
    for bad, words in (
        ("user:zed", "There is no account 'zed'"),
        ("group:board", "There is no group 'board'"),
        ("group:hr, user:zed", "There is no account 'zed'"),
        ("hr", "'user:<name>', 'group:<name>' or 'everyone'"),
    ):
        with pytest.raises(InvalidArgument, match=words):
            root.set_file_readers("hb", fid, bad)
    assert root.file_readers("hb", fid) is None and system.catalog.restricted_files("hb") == {}
    assert not system.catalog.filters_readers("hb")  # nothing was even back-filled
    assert root.audit_events(action="file.readers") == []


def test_set_file_readers_matches_a_username_in_any_case_to_its_account(system):
    root, fid = _as(system, "root"), _salaries(system)
    assert root.set_file_readers("hb", fid, "user:ANA, group:hr") == ("user:ana", "group:hr")
    assert root.file_readers("hb", fid) == ("user:ana", "group:hr")
    assert system.catalog.get_file("hb", fid).readers == ("user:ana", "group:hr")
    with pytest.raises(InvalidArgument, match="There is no group 'HR'"):  # group names are exact
        root.set_file_readers("hb", fid, "group:HR")


def test_set_file_readers_needs_write_access_and_a_file_the_person_reads(system):
    fid = _salaries(system)
    _as(system, "root").set_file_readers("hb", fid, "group:hr")
    with pytest.raises(PermissionDenied, match="read-only"):
        _as(system, "bob").set_file_readers("hb", fid, "everyone")
    with pytest.raises(FileNotFoundInStore, match="has no file with the id"):
        _as(system, "wendy").set_file_readers("hb", fid, "everyone")  # a writer outside hr: as a missing id
    with pytest.raises(FileNotFoundInStore, match="has no file with the id 'file-0'"):
        _as(system, "root").set_file_readers("hb", "file-0", "group:hr")
    # ana, who reads it but may not write to the store
    with pytest.raises(PermissionDenied):
        _as(system, "ana").set_file_readers("hb", fid, "everyone")
    assert _as(system, "root").file_readers("hb", fid) == ("group:hr",)


def test_readers_given_at_ingestion_are_checked_before_anything_is_written(system):
    root = _as(system, "root")
    before = len(root.store_files("hb"))
    with pytest.raises(InvalidArgument, match="There is no group 'board'"):
        root.ingest_file("hb", b"Minutes of the board.", "minutes.md", readers="group:board")
    with pytest.raises(InvalidArgument, match="There is no account 'zed'"):
        root.submit_batch("hb", [("minutes.md", b"Minutes of the board.")], readers="user:zed")
    assert len(root.store_files("hb")) == before and root.shown_job("hb") is None
    r = root.ingest_file("hb", b"Minutes of the board.", "minutes.md", readers="user:Ana")
    assert r.ok and root.file_readers("hb", r.file_id) == ("user:ana",)
    assert _as(system, "bob").file_record("hb", r.file_id) is None
    assert _as(system, "ana").file_record("hb", r.file_id) is not None


def test_file_readers_are_audited_with_before_and_after(system):
    root, fid = _as(system, "root"), _salaries(system)
    root.set_file_readers("hb", fid, "group:hr")
    root.set_file_readers("hb", fid, ["group:hr"])  # the same readers: nothing changes, nothing recorded
    root.set_file_readers("hb", fid, "group:hr, user:bob")
    root.set_file_readers("hb", fid, "everyone")
    events = root.audit_events(action="file.readers")
    assert [(e.actor, e.store, e.target) for e in events] == [("root", "hb", fid)] * 3
    assert [(e.detail["before"], e.detail["after"], e.detail["readers"]) for e in reversed(events)] == [
        (None, ["group:hr"], "group hr"),
        (["group:hr"], ["group:hr", "user:bob"], "group hr, user bob"),
        (["group:hr", "user:bob"], None, "everyone who may read the store"),
    ]
    assert all(e.detail["name"] == "salaries.md" and e.detail["chunks"] == 1 for e in events)


# -- who reads every file ---------------------------------------------------------------------------
def test_the_owner_admins_and_the_local_admin_read_every_file_members_only_theirs(system):
    fid = _salaries(system)
    _as(system, "root").set_file_readers("hb", fid, "user:bob")
    for who, sees in (("root", True), ("adm", True), ("ana", False), ("bob", True), ("wendy", False)):
        wb = _as(system, who)
        assert (wb.file_record("hb", fid) is not None) == sees, who
        assert (fid in {h.file_id for h in wb.search("hb", "salary bands payroll", 5)}) == sees, who
    assert Workbench(system).file_record("hb", fid) is not None  # the local admin (no accounts on this path)
    assert fid in {h.file_id for h in Workbench(system).search("hb", "salary bands payroll", 5)}


def test_without_admins_see_all_an_admin_who_does_not_own_the_store_is_a_reader_like_any(tmp_path):
    system = _system(tmp_path, admins_see_all=False)
    try:
        fid = _salaries(system)
        _as(system, "root").set_file_readers("hb", fid, "group:hr")  # root made the store: its owner
        adm = _as(system, "adm")
        assert adm.file_record("hb", fid) is None and len(adm.store_files("hb")) == 3
        assert fid not in {h.file_id for h in adm.search("hb", "salary bands payroll", 5)}
        assert _as(system, "root").file_record("hb", fid) is not None
    finally:
        system.close()


# -- the catalog, both engines ----------------------------------------------------------------------
@pytest.fixture
def catalog(catalog_settings):
    c = Catalog.from_settings(catalog_settings)
    yield c
    c.close()


def _record(store: str, file_id: str, name: str, **kw) -> FileRecord:
    return FileRecord(store, file_id, name, "ab" * 32, 10, DONE, None, 2, None, created=datetime.now(UTC), **kw)


def test_catalog_keeps_readers_apart_from_the_rest_of_a_record(catalog):
    for store in ("a", "b"):
        catalog.put_store(store, "default", "memory", "m", 8, "cosine")
        catalog.put_file(_record(store, "file-1", "salaries.md"))
        catalog.put_file(_record(store, "file-2", "page.md"))
    assert catalog.restricted_files("a") == {} and catalog.file_readers("file-1") == {"a": None, "b": None}
    before = catalog.get_file("a", "file-1").updated
    assert catalog.set_readers("a", "file-1", ["group:hr", "user:zoë"]) is True
    assert catalog.set_readers("a", "file-9", ["group:hr"]) is False  # no such record
    got = catalog.get_file("a", "file-1")
    assert got.readers == ("group:hr", "user:zoë") and got.updated >= before
    assert catalog.restricted_files("a") == {"file-1": ("group:hr", "user:zoë")} and catalog.restricted_files("b") == {}
    assert catalog.file_readers("file-1") == {"a": ("group:hr", "user:zoë"), "b": None}
    assert [f.readers for f in catalog.files("a", file_name="salaries.md")] == [("group:hr", "user:zoë")]
    # put_file (a status, a rename) leaves the readers as they are
    catalog.put_file(_record("a", "file-1", "salaries-2026.md", warnings=["w"]))
    assert catalog.get_file("a", "file-1").readers == ("group:hr", "user:zoë")
    assert catalog.set_readers("a", "file-1", ()) is True  # nobody but the store's owners
    assert catalog.restricted_files("a") == {"file-1": ()}
    assert catalog.set_readers("a", "file-1", None) is True
    assert catalog.restricted_files("a") == {} and catalog.get_file("a", "file-1").readers is None


def test_catalog_marks_a_store_that_filters_until_it_is_deleted(catalog):
    catalog.put_store("a", "default", "memory", "m", 8, "cosine")
    catalog.put_file(_record("a", "file-1", "page.md"))
    signature = catalog.files_signature("a")
    assert catalog.filters_readers("a") is False
    catalog.mark_filters_readers("a")
    catalog.mark_filters_readers("a")  # once is enough; twice is no error
    assert catalog.filters_readers("a") is True and catalog.filters_readers("b") is False
    assert catalog.files_signature("a") != signature  # in-process BM25 indexes read the payloads again
    catalog.delete_store("a")
    assert catalog.filters_readers("a") is False
    catalog.put_store("a", "default", "memory", "m", 8, "cosine")  # a new store of the name starts afresh
    assert catalog.filters_readers("a") is False


def test_an_adopted_store_keeps_its_files_readers(catalog):
    catalog.adopt_store(
        "imp",
        "default",
        "memory",
        "m",
        8,
        "cosine",
        "imp",
        [_record("imp", "file-1", "salaries.md", readers=("group:hr",)), _record("imp", "file-2", "page.md")],
    )
    assert catalog.restricted_files("imp") == {"file-1": ("group:hr",)}
    assert catalog.get_file("imp", "file-2").readers is None


# -- ReadableCollection, every backend ------------------------------------------------------------------
D = 8


@pytest.fixture
def coll(backend):
    c = backend.collection("readable")
    c.ensure_collection(D, "cosine")
    vecs = np.random.default_rng(3).standard_normal((6, D)).astype(np.float32)
    readers = [["*"], ["*"], ["group:hr"], ["user:ana"], ["group:hr", "user:bob"], []]
    c.upsert(
        [Point(f"p{i}", vecs[i], {"file_id": f"f{i}", "text": f"salary page {i}", "readers": readers[i]}) for i in range(6)]
    )
    return c


def _bob(inner) -> ReadableCollection:
    return ReadableCollection(inner, {"readers": AnyOf(("*", "user:bob", "group:sales"))})


def test_a_readable_view_reads_only_what_its_filter_keeps(coll):
    view = _bob(coll)
    seen = {"p0", "p1", "p4"}
    assert view.count() == 3 and coll.count() == 6
    info = view.info()
    assert (info.count, info.size, info.distance, info.disk_bytes) == (3, D, "cosine", None)
    assert {p.id for p in view.scroll()} == seen
    assert {h.id for h in view.search(np.ones(D, np.float32), 6)} == seen
    assert len(view.search(np.ones(D, np.float32), 2)) == 2  # k readable hits, not k minus the hidden
    assert view.facet("file_id") == {"f0": 1, "f1": 1, "f4": 1}
    assert [p.id for p in view.retrieve(["p2", "p0", "p3", "p4", "p5"])] == ["p0", "p4"]
    # a caller's filter on the field cannot widen the view; on another field it narrows it
    assert {p.id for p in view.scroll(where={"readers": AnyOf(("group:hr",))})} == seen
    assert view.count({"file_id": "f2"}) == 0 and view.count({"file_id": "f4"}) == 1
    lexical = view.lexical_search("salary page", 6)
    if lexical is not None:  # qdrant keeps no lexical index: the searcher's own is filtered as a where
        assert {h.id for h in lexical} == seen
    with view.bulk_load():
        pass
    assert view.collection_exists() and view.name == coll.name


def test_a_readable_view_refuses_writes_and_native_filters(coll, raw_filter):
    view = _bob(coll)
    point = Point("p9", np.ones(D, np.float32), {"file_id": "f9", "text": "x", "readers": ["*"]})
    for write in (
        lambda: view.upsert([point]),
        lambda: view.replace({"file_id": "f2"}, [point]),
        lambda: view.remove(ids=["p2"]),
        lambda: view.remove(where={"file_id": "f0"}),
        view.drop_collection,
        lambda: view.ensure_collection(D, "cosine"),
    ):
        with pytest.raises(PermissionDenied, match="read-only"):
            write()
    assert coll.count() == 6 and coll.collection_exists()
    with pytest.raises(InvalidArgument):
        view.search(np.ones(D, np.float32), 3, raw_filter=raw_filter("file_id", "f2"))
    with pytest.raises(InvalidArgument, match="needs a filter"):
        ReadableCollection(coll, {})
