"""Issue 44, item 5: the audit trail names the person behind a CLI admin action (``cli:<OS
user>@<host>``, not ``local``) and a worker process's own actions (``worker:<its id>``)."""

from __future__ import annotations

import getpass
import io
import socket
import sys

import pytest

from knowledge.cli import main
from knowledge.system import System
from tests.helpers.sources import DictSource, counting_system

PW = "correct horse battery"


def test_a_cli_admin_action_is_audited_in_the_name_of_the_os_user_and_host(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    monkeypatch.setattr(sys, "stdin", io.StringIO(PW + "\n"))
    assert main(["users", "add", "root", "--role", "admin", "--password-stdin"]) == 0
    assert main(["--user", "root", "groups", "add", "team"]) == 0
    assert main(["groups", "add", "ops"]) == 0  # no --user: the local admin, at this command line
    capsys.readouterr()
    system = System()
    try:
        events = {e.target: e.actor for e in system.people.audit.events(action="group.create")}
    finally:
        system.close()
    assert events == {"team": "root", "ops": f"cli:{getpass.getuser()}@{socket.gethostname()}"}


def test_a_store_the_cli_ingest_makes_is_audited_as_made_by_the_os_user(tmp_path, monkeypatch, capsys):
    """``ingest`` into a store that does not exist makes it: ``store.create`` then ``file.ingest``,
    both in the name of the person at the command line (the local admin of a laptop too)."""
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Leave\n\nHolidays: 30 days of paid leave a year.\n")
    assert main(["ingest", "fresh", str(folder)]) == 0
    assert main(["ingest", "fresh", str(folder)]) == 0  # the store exists now: no second store.create
    capsys.readouterr()
    system = System()
    try:
        events = [(e.action, e.store, e.actor) for e in system.people.audit.events() if e.store == "fresh"]
    finally:
        system.close()
    me = f"cli:{getpass.getuser()}@{socket.gethostname()}"
    assert sorted(events) == [("file.ingest", "fresh", me), ("file.ingest", "fresh", me), ("store.create", "fresh", me)]


@pytest.fixture
def source_files(request):
    name = request.node.name
    DictSource.FILES[name] = {"docs/a.md": (b"Holidays: 30 days of paid leave.", None)}
    yield name
    DictSource.FILES.pop(name, None)


def test_a_run_the_schedule_queues_is_audited_in_the_name_of_the_process_that_queued_it(tmp_path, source_files):
    system, _ = counting_system(tmp_path)
    system.sources.add("team", "dict", "kb", {"name": source_files}, every_minutes=60)
    system.actor_name = "worker:host-1:4242:worker:abc123"  # as `python -m knowledge worker` sets it
    (run,) = system.sources.enqueue_due()
    (event,) = system.people.audit.events(action="source.run")
    assert event.actor == "worker:host-1:4242:worker:abc123"
    assert (event.store, event.target, event.detail) == ("kb", "team", {"run": run.id, "cause": "schedule"})
