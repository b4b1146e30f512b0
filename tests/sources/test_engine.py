"""The sources engine over a source kind of this process (tests/helpers/sources.py ``dict``): the
plan, the apply, renames without embedding, readers from the source, failures in words with no
secret, the marker, the schedule and the worker's job. Each real kind has its own tests against
its real server (tests/sources/test_<kind>.py)."""

from __future__ import annotations

import logging

import pytest

from knowledge.catalog import jobs as queue
from knowledge.errors import InvalidArgument
from knowledge.service.worker import Worker
from knowledge.sources.engine import origin_of
from knowledge.workbench import Workbench
from tests.helpers.sources import PW, DictSource, counting_system, search_names

SECRET = "hunter2-very-secret"


@pytest.fixture
def files(request):
    name = request.node.name
    DictSource.FILES[name] = {
        "docs/holidays.md": (b"Holidays: every team member has 30 days of paid leave.", None),
        "docs/salary.md": (b"Salary reviews happen each March for the whole company.", None),
        "notes/todo.txt": (b"Water the office plants on Fridays.", None),
    }
    DictSource.DOWN.discard(name)
    DictSource.VANISH.clear()
    DictSource.FETCHED.clear()
    yield name, DictSource.FILES[name]
    DictSource.FILES.pop(name, None)


def _add(system, name, **kw):
    config = {"name": name, "password": SECRET, **kw.pop("config", {})}
    return system.sources.add("team", "dict", "kb", config, **kw)


def test_first_run_then_changes_renames_and_deletes_update_exactly_those(tmp_path, files):
    name, data = files
    system, emb = counting_system(tmp_path)
    _add(system, name, config={"keys": True})
    report = system.sources.run("team")
    assert report.ok, report.summary()
    assert report.counts["added"] == 3 and report.counts["failed"] == 0
    assert search_names(system, "kb", "paid leave holidays")[0] == "docs/holidays.md"
    hit = Workbench(system).search("kb", "paid leave holidays", 1)[0]
    assert hit.metadata["attr_source"] == "team" and hit.metadata["attr_source_url"] == f"dict://{name}/docs/holidays.md"

    # unchanged: nothing read, nothing embedded
    embedded, DictSource.FETCHED[:] = emb.embedded, []
    again = system.sources.run("team")
    assert again.counts["unchanged"] == 3 and again.items == [] and DictSource.FETCHED == []
    assert emb.embedded == embedded

    # one change, one rename, one delete
    data["docs/salary.md"] = (b"Salary reviews now happen each September.", None)
    data["archive/holidays-2026.md"] = data.pop("docs/holidays.md")
    del data["notes/todo.txt"]
    chunks_before = {f.file_id: f.chunks for f in system.catalog.files("kb")}
    embedded = emb.embedded
    r = system.sources.run("team")
    assert r.ok, r.summary()
    assert {k: v for k, v in r.counts.items() if v} == {"changed": 1, "renamed": 1, "deleted": 1}
    assert DictSource.FETCHED == ["docs/salary.md"]  # the rename was found by its content key: not read
    assert emb.embedded - embedded == 1  # only the changed file's one chunk
    names = {n.name for n in system.catalog.names("kb", folder=origin_of(system.sources.get("team").id))}
    assert names == {"docs/salary.md", "archive/holidays-2026.md"}
    renamed = next(f for f in system.catalog.files("kb") if f.file_name == "archive/holidays-2026.md")
    assert chunks_before[renamed.file_id] == renamed.chunks  # the same content, its chunks kept
    assert search_names(system, "kb", "paid leave holidays")[0] == "archive/holidays-2026.md"
    assert "notes/todo.txt" not in search_names(system, "kb", "office plants Fridays")
    assert [(i.action, i.path, i.old_path) for i in system.sources.run_items(r.run.id)] == [
        ("changed", "docs/salary.md", None),
        ("renamed", "archive/holidays-2026.md", "docs/holidays.md"),
        ("deleted", "notes/todo.txt", None),
    ]


def test_a_rename_without_content_keys_is_found_by_its_bytes_and_embeds_nothing(tmp_path, files):
    name, data = files
    system, emb = counting_system(tmp_path)
    _add(system, name)
    assert system.sources.run("team").ok
    for i in range(20):  # a rename storm
        data[f"storm/file-{i}.md"] = (f"Storm file number {i} about weather {i * 7}.".encode(), None)
    assert system.sources.run("team").ok
    embedded = emb.embedded
    for i in range(20):
        data[f"moved/file-{i}.md"] = data.pop(f"storm/file-{i}.md")
    r = system.sources.run("team")
    assert r.ok and r.counts["renamed"] == 20 and r.counts["added"] == 0 and r.counts["deleted"] == 0, r.counts
    assert emb.embedded == embedded
    assert len(system.catalog.files("kb")) == 23
    assert search_names(system, "kb", "Storm file number 7 weather 49", 1) == ["moved/file-7.md"]


def test_readers_follow_the_source_and_a_change_of_them_alone_is_applied(tmp_path, files):
    name, data = files
    system, _ = counting_system(tmp_path)
    people = system.people
    people.set_up_admin("root", PW)
    people.accounts.create("ana", PW)
    people.accounts.create("bob", PW)
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store("kb")
    root.share_store("kb", "everyone", "", "read")
    data["hr/pay.md"] = (b"Confidential pay bands for the engineering ladder.", ("user:ana",))
    _add(system, name)
    assert system.sources.run("team").ok
    ana = Workbench(system).as_user(people.accounts.actor("ana"))
    bob = Workbench(system).as_user(people.accounts.actor("bob"))
    assert "hr/pay.md" in search_names(system, "kb", "pay bands engineering", wb=ana)
    assert "hr/pay.md" not in search_names(system, "kb", "pay bands engineering", wb=bob)
    data["hr/pay.md"] = (data["hr/pay.md"][0], ("user:ana", "user:bob"))
    r = system.sources.run("team")
    assert [(i.action, i.path) for i in r.items] == [("readers", "hr/pay.md")]
    assert "hr/pay.md" in search_names(system, "kb", "pay bands engineering", wb=bob)


def test_a_source_that_does_not_answer_fails_the_run_in_words_without_its_password(tmp_path, files, caplog):
    name, _ = files
    system, _ = counting_system(tmp_path)
    _add(system, name)
    DictSource.DOWN.add(name)
    with caplog.at_level(logging.DEBUG):
        r = system.sources.run("team")
    assert r.run.status == "failed" and "did not answer" in (r.reason or "")
    assert SECRET not in (r.reason or "") and SECRET not in caplog.text
    DictSource.DOWN.discard(name)
    r = system.sources.run("team")
    assert r.ok and r.counts["added"] == 3
    runs = system.sources.runs("team")
    assert [x.status for x in runs] == ["done", "failed"]
    with system.catalog.cursor() as cur:
        rows = cur.execute("SELECT * FROM sources").fetchall() + cur.execute("SELECT * FROM source_runs").fetchall()
    assert SECRET not in repr(rows)
    assert SECRET not in repr(system.sources.get("team")) and SECRET not in str(system.sources.get("team").to_json())


def test_a_file_gone_between_listing_and_reading_fails_alone_and_the_next_run_converges(tmp_path, files):
    name, data = files
    system, _ = counting_system(tmp_path)
    _add(system, name)
    DictSource.VANISH.add("docs/salary.md")
    r = system.sources.run("team")
    assert r.run.status == "done" and r.counts["added"] == 2 and r.counts["failed"] == 1
    assert "vanished" in r.failed[0].message and "1 file failed" in (r.reason or "")
    DictSource.VANISH.clear()
    r = system.sources.run("team")
    assert r.counts["added"] == 1 and r.counts["failed"] == 0
    assert sorted(f.file_name for f in system.catalog.files("kb")) == sorted(data)


def test_globs_and_the_size_limit_leave_files_out_and_say_why(tmp_path, files):
    name, data = files
    data["big.bin.md"] = (b"x" * 5000, None)
    system, _ = counting_system(tmp_path)
    _add(system, name, include=["docs/**", "*.md"], exclude=["**/salary.md"], max_bytes=1000)
    plan = system.sources.plan("team")
    assert [i.path for i in plan.items] == ["docs/holidays.md"]
    assert plan.skipped == {
        "not matching the include globs": 1,
        "matching an exclude glob": 1,
        "larger than the size limit (1,000 bytes)": 1,
    }


def test_an_unchanged_marker_lists_nothing(tmp_path, files):
    name, data = files
    system, _ = counting_system(tmp_path)
    _add(system, name)
    DictSource.MARKERS[name] = "m1"
    assert system.sources.run("team").counts["added"] == 3
    data["new.md"] = (b"A new file the marker does not announce.", None)
    r = system.sources.run("team")
    assert r.plan is not None and r.plan.unchanged_marker and r.counts["added"] == 0
    DictSource.MARKERS[name] = "m2"
    assert system.sources.run("team").counts["added"] == 1
    DictSource.MARKERS.pop(name)


def test_settings_are_checked_and_secrets_kept_sealed(tmp_path, files):
    name, _ = files
    system, _ = counting_system(tmp_path)
    with pytest.raises(InvalidArgument, match="has no setting 'colour'"):
        system.sources.add("x", "dict", "kb", {"name": name, "colour": "red"})
    with pytest.raises(InvalidArgument, match="needs: Name"):
        system.sources.add("x", "dict", "kb", {})
    rec = _add(system, name, every_minutes=5)
    assert rec.secrets_set == ("password",) and "password" not in rec.config
    assert rec.next_run is not None
    with pytest.raises(InvalidArgument, match="already"):
        _add(system, name)
    updated = system.sources.update("team", config={"keys": True})  # the secret left out is kept
    assert updated.secrets_set == ("password",) and updated.config["keys"] is True
    assert system.sources.secrets_of(updated) == {"password": SECRET}
    key_file = system.settings.data_root / "secret.key"
    assert key_file.stat().st_mode & 0o777 == 0o600


def test_a_run_is_a_job_any_worker_takes_and_the_schedule_queues_it_once(tmp_path, files):
    name, _ = files
    system, _ = counting_system(tmp_path)
    _add(system, name, every_minutes=60)
    first = system.sources.enqueue_due()
    assert len(first) == 1 and system.sources.enqueue_due() == []  # moved on by an hour
    assert system.sources.enqueue_run("team").id == first[0].id  # one run at a time
    worker = Worker(system.indexer, kinds=system.jobs.kinds)
    assert worker.run(once=True) == 1
    run = system.sources.runs("team")[0]
    assert run.status == "done" and run.counts["added"] == 3 and run.cause == "schedule"
    _, jobs, _ = queue.batch(system.catalog, run.batch_id)
    assert [j.status for j in jobs] == ["done"]


def test_removing_a_source_removes_its_files_or_keeps_them_as_added_by_hand(tmp_path, files):
    name, _ = files
    system, _ = counting_system(tmp_path)
    _add(system, name)
    assert system.sources.run("team").ok
    assert system.sources.remove("team", delete_files=False) == 0
    assert len(system.catalog.files("kb")) == 3 and system.sources.records() == []
    assert {n.folder for n in system.catalog.names("kb")} == {""}
    system.sources.add("again", "dict", "kb", {"name": name})
    r = system.sources.run("again")
    assert r.counts["added"] == 3 and len(system.catalog.files("kb")) == 3  # the same bytes: names added
    assert system.sources.remove("again") == 3
    assert {n.folder for n in system.catalog.names("kb")} == {""}


def test_the_scheduler_thread_queues_a_due_source_and_wakes_the_worker(tmp_path, files):
    import threading

    name, _ = files
    system, _ = counting_system(tmp_path, sources={"check_seconds": 0.05})
    _add(system, name, every_minutes=60)
    woken = threading.Event()
    system.sources.start_scheduler(kick=woken.set)
    try:
        assert woken.wait(10), "the scheduler queued nothing"
    finally:
        system.sources.stop_scheduler()
    [run] = system.sources.runs("team")
    assert run.status == "queued" and run.cause == "schedule"
    system.sources.pause("team")
    assert system.sources.get("team").next_run is None and system.sources.enqueue_due() == []


def test_on_each_catalog_engine_a_scheduled_run_is_queued_once_run_by_a_worker_and_converges(catalog_settings, files):
    """The sources' SQL (migration 19, the schedule's interval arithmetic, the upserts) on DuckDB and on
    PostgreSQL (a shared catalog needs a secret key: the settings give one)."""
    from pydantic import SecretStr

    from knowledge.system import System
    from tests.helpers.sources import CountingEmbedder

    name, data = files
    emb = CountingEmbedder()
    settings = catalog_settings.model_copy(update={"secret_key": SecretStr("a long test passphrase for the vault")})
    system = System(settings, lambda _model: emb)
    try:
        if catalog_settings.catalog.url:  # a shared catalog without a key keeps no secret
            bare = System(catalog_settings, lambda _model: emb)
            with pytest.raises(Exception, match="KNOWLEDGE_SECRET_KEY"):
                _add(bare, name)
            bare.close()
        _add(system, name, config={"keys": True}, every_minutes=30)
        [run] = system.sources.enqueue_due()
        assert system.sources.enqueue_due() == []
        nxt = system.sources.get("team").next_run
        assert nxt is not None
        assert Worker(system.indexer, kinds=system.jobs.kinds).run(once=True) == 1
        done = system.sources.get_run(run.id)
        assert done is not None and done.status == "done" and done.counts["added"] == 3
        data["docs/moved.md"] = data.pop("notes/todo.txt")
        r = system.sources.run("team")
        assert {k: v for k, v in r.counts.items() if v} == {"renamed": 1, "unchanged": 2}
        assert sorted(f.file_name for f in system.catalog.files("kb")) == [
            "docs/holidays.md",
            "docs/moved.md",
            "docs/salary.md",
        ]
    finally:
        system.close()


def test_what_a_new_user_met_first(tmp_path, files):
    """The new-user trial's findings, each a rule now: credentials written into a plain setting are
    refused before anything is kept; a rename carries the file's new source_url; a source that lists
    nothing while the store holds its files deletes nothing; a file that failed for itself is not read
    again until it changes; a removed source leaves no cache behind; a name with '/' is refused."""
    name, data = files
    system, _ = counting_system(tmp_path)
    with pytest.raises(InvalidArgument, match="must not hold a user name and password") as said:
        system.sources.add("x", "dict", "kb", {"name": "https://ana:Hunter2-XYZZY@dav.example/team/"})
    assert "Hunter2" not in str(said.value) and system.sources.records() == []
    with pytest.raises(InvalidArgument, match="'/'"):
        system.sources.add("a/b", "dict", "kb", {"name": name})

    data["empty.md"] = (b"", None)
    _add(system, name, config={"keys": True})
    first = system.sources.run("team")
    assert first.counts["added"] == 3 and first.counts["failed"] == 1
    DictSource.FETCHED.clear()
    again = system.sources.run("team")
    assert again.items == [] and DictSource.FETCHED == [] and again.counts["unchanged"] == 4

    data["moved/holidays.md"] = data.pop("docs/holidays.md")
    r = system.sources.run("team")
    assert [(i.action, i.path) for i in r.items] == [("renamed", "moved/holidays.md")]
    hit = Workbench(system).search("kb", "paid leave holidays", 1)[0]
    assert hit.file_name == "moved/holidays.md"
    assert hit.metadata["attr_source_url"] == f"dict://{name}/moved/holidays.md"

    saved = dict(data)
    data.clear()
    r = system.sources.run("team")
    assert r.run.status == "failed" and "listed no file at all" in (r.reason or "") and "nothing was deleted" in r.reason
    assert len(system.catalog.files("kb")) == 4
    data.update(saved)

    cache = system.settings.data_root / "sources" / system.sources.get("team").id
    cache.mkdir(parents=True)
    (cache / "mirror").write_text("x")
    system.sources.remove("team")
    assert not cache.exists()


def test_a_file_past_a_quota_fails_in_words_and_is_read_again_once_the_quota_allows(tmp_path, files):
    name, _ = files
    system, _ = counting_system(tmp_path, quotas={"store_files": 2, "admins_exempt": False})
    _add(system, name)
    report = system.sources.run("team")
    assert report.counts["added"] == 2 and report.counts["failed"] == 1, report.summary()
    (failed,) = [i for i in system.sources.run_items(report.run.id) if not i.ok]
    assert "The store 'kb' holds 2 files; the quota is 2 files, and adding 1 file would pass it" in failed.message
    assert len(system.catalog.files("kb")) == 2
    system.people.quotas.set_limit("store", "kb", "files", 0)  # unlimited: the next run reads it again
    again = system.sources.run("team")
    assert again.counts["added"] == 1 and again.counts["failed"] == 0, again.summary()
    assert len(system.catalog.files("kb")) == 3
