"""Sources as a person may use them (``Workbench.sources``): who may add, run, see; the audit trail
keeps no secret; a run's files a member may not read are left out of what they see of it."""

from __future__ import annotations

import pytest

from knowledge.errors import InvalidArgument, PermissionDenied
from knowledge.workbench import Workbench
from tests.helpers.sources import PW, DictSource, counting_system

SECRET = "s3cr3t-token-never-shown"


@pytest.fixture
def team(tmp_path, request):
    name = request.node.name
    DictSource.FILES[name] = {
        "public/handbook.md": (b"The handbook says lunch is at noon.", None),
        "private/pay.md": (b"Pay bands are confidential to ana.", ("user:ana",)),
    }
    system, _ = counting_system(tmp_path)
    people = system.people
    people.set_up_admin("root", PW)
    for who in ("ana", "bob", "wendy"):
        people.accounts.create(who, PW)
    root = Workbench(system).as_user(people.accounts.actor("root"))
    root.create_store("kb")
    root.share_store("kb", "user", "bob", "read")
    root.share_store("kb", "user", "wendy", "write")
    yield system, name, root
    DictSource.FILES.pop(name, None)


def _as(system, who):
    return Workbench(system).as_user(system.people.accounts.actor(who))


def test_owners_add_writers_run_readers_see_and_others_see_nothing(team):
    system, name, root = team
    wendy, bob, ana = _as(system, "wendy"), _as(system, "bob"), _as(system, "ana")
    with pytest.raises(PermissionDenied):
        wendy.sources.add("team", "dict", "kb", {"name": name, "password": SECRET})
    rec = root.sources.add("team", "dict", "kb", {"name": name, "password": SECRET})
    assert [r.name for r in bob.sources.records()] == ["team"]
    assert ana.sources.records() == []
    with pytest.raises(InvalidArgument, match="There is no source 'team'"):
        ana.sources.get("team")
    with pytest.raises(PermissionDenied):
        bob.sources.run_here("team")
    report = wendy.sources.run_here("team")
    assert report.ok and report.counts["added"] == 2
    with pytest.raises(PermissionDenied):
        wendy.sources.remove("team")
    # bob may read the store but not private/pay.md: the run shows him what he may read
    [run] = bob.sources.runs("team")
    assert run.counts == {"added": 1}
    assert [i.path for i in bob.sources.run_items(run.id)] == ["public/handbook.md"]
    assert [i.path for i in root.sources.run_items(run.id)] == ["private/pay.md", "public/handbook.md"]
    with pytest.raises(InvalidArgument, match="There is no run"):
        ana.sources.run_items(run.id)
    assert root.sources.runs("team")[0].counts["added"] == 2
    assert rec.store == "kb"


def test_the_audit_trail_records_each_change_without_a_secret(team):
    system, name, root = team
    root.sources.add("team", "dict", "kb", {"name": name, "password": SECRET}, every_minutes=30)
    root.sources.update("team", config={"password": SECRET + "-new"})
    root.sources.pause("team")
    root.sources.run_here("team")
    root.sources.remove("team")
    events = root.audit_events(limit=50)
    actions = [e.action for e in events if e.action.startswith("source.")]
    assert actions == ["source.remove", "source.run", "source.pause", "source.update", "source.add"]
    update = next(e for e in events if e.action == "source.update")
    assert update.detail["secrets_changed"] == ["password"]
    assert SECRET not in repr(events)
    with system.catalog.cursor() as cur:
        assert SECRET not in repr(cur.execute("SELECT * FROM audit_events").fetchall())


def test_a_new_store_is_made_for_a_source_and_is_its_makers(team):
    system, name, _ = team
    ana = _as(system, "ana")
    ana.sources.add("mine", "dict", "ana-kb", {"name": name})
    assert ana.level("ana-kb") == "owner"
    assert ana.sources.run_here("mine").counts["added"] == 2


def test_deleting_a_store_removes_its_sources(team):
    system, name, root = team
    root.sources.add("team", "dict", "kb", {"name": name})
    assert root.sources.run_here("team").ok
    root.delete_store("kb")
    assert root.sources.records() == [] and not system.stores.exists("kb")
    with system.catalog.cursor() as cur:
        assert cur.execute("SELECT count(*) FROM source_entries").fetchone()[0] == 0
    event = root.audit_events(action="store.delete")[0]
    assert event.detail == {"sources_removed": ["team"]}
