"""``python -m knowledge source ...`` in-process, over the test process's ``dict`` source kind
(tests/helpers/sources.py) and the fake embedding model: kinds, add (a secret only from a hidden
prompt or the environment, never from ``--set``), list, show (a secret as "set"), run here, queued
and waited for, plan, check, pause, resume, runs, edit, remove; access by ``--user``; and no
secret in any output or log line."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from knowledge.cli import main
from knowledge.cli import source as source_cli
from knowledge.system import System
from tests.helpers.sources import PW, DictSource

SECRET = "pa55-never-printed-anywhere"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _fake_model(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")


@pytest.fixture
def files(request):
    name = request.node.name
    DictSource.FILES[name] = {
        "docs/holidays.md": (b"Holidays: every team member has 30 days of paid leave.", None),
        "docs/salary.md": (b"Salary reviews happen each March for the whole company.", None),
    }
    DictSource.DOWN.discard(name)
    yield name
    DictSource.FILES.pop(name, None)
    DictSource.DOWN.discard(name)


@pytest.fixture
def said(capsys, caplog):
    """Everything the commands printed and logged, to grep for the secret at the end of the test."""
    caplog.set_level(logging.DEBUG)
    out: list[str] = []
    yield out
    assert SECRET not in "\n".join(out) + caplog.text


def run(capsys, said: list[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    said += [out, err]
    assert "Traceback" not in err
    return code, out, err


def add(capsys, said, name: str, *extra: str) -> None:
    code, _, err = run(
        capsys, said, "source", "add", "team", "--kind", "dict", "--store", "kb", "--set", f"name={name}", *extra
    )
    assert code == 0, err


def test_kinds_list_the_settings_and_which_are_secret(capsys, said):
    code, out, _ = run(capsys, said, "source", "kinds")
    assert code == 0 and "dict: Test dict" in out
    assert "password: Password (secret: --secret)" in out and "name: Name (required)" in out
    code, out, _ = run(capsys, said, "source", "kinds", "--json")
    [kind] = [k for k in json.loads(out) if k["kind"] == "dict"]
    assert {f["name"]: f["secret"] for f in kind["fields"]} == {"name": False, "password": True, "keys": False}


def test_a_secret_on_the_command_line_is_refused_without_repeating_it(capsys, said, files):
    code, _, err = run(
        capsys, said, "source", "add", "team", "--kind", "dict", "--store", "kb", "--set", f"name={files}",
        "--set", f"password={SECRET}",
    )  # fmt: skip
    assert code == 2 and "password is a secret setting" in err and "--secret password" in err and "--secret-env" in err
    code, _, err = run(
        capsys, said, "source", "add", "team", "--kind", "dict", "--store", "kb", "--secret", f"password={SECRET}"
    )
    assert code == 2 and "--secret takes a setting's name only" in err
    code, _, err = run(
        capsys, said, "source", "add", "team", "--kind", "dict", "--store", "kb", "--set", f"name={files}",
        "--secret-env", "password=NO_SUCH_VARIABLE_HERE",
    )  # fmt: skip
    assert code == 2 and "NO_SUCH_VARIABLE_HERE is not set" in err
    code, out, _ = run(capsys, said, "source", "list")
    assert code == 0 and "No source yet" in out  # nothing was kept


def test_a_secret_typed_at_a_prompt_or_read_from_the_environment_is_kept_and_shown_as_set(capsys, said, files, monkeypatch):
    typed: list[str] = []

    def getpass(prompt: str) -> str:
        typed.append(prompt)
        return SECRET

    monkeypatch.setattr(source_cli.getpass, "getpass", getpass)
    monkeypatch.setattr(sys, "stdin", _Terminal())
    add(capsys, said, files, "--secret", "password", "--every", "90", "--include", "docs/*.md", "--max-bytes", "5000")
    assert typed == ["Password of source team (not shown): "]
    code, out, _ = run(capsys, said, "source", "show", "team")
    assert code == 0
    assert "    password: set" in out and f"    name: {files}" in out
    assert f"location:   dict://{files}" in out and "every 1 h 30 min" in out and "include:    docs/*.md" in out
    assert "size limit: 5,000 bytes" in out and "last run:   never run" in out
    shown = json.loads(run(capsys, said, "source", "show", "team", "--json")[1])
    assert shown["secrets_set"] == ["password"] and shown["config"] == {"name": files}
    # no terminal: no prompt, and the way that works instead
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, _, err = run(capsys, said, "source", "edit", "team", "--secret", "password")
    assert code == 2 and "no terminal" in err and "--secret-env password=VARIABLE" in err
    monkeypatch.setenv("TEAM_PASSWORD", SECRET + "-2")
    code, out, err = run(capsys, said, "source", "edit", "team", "--secret-env", "password=TEAM_PASSWORD", "--every", "0")
    assert code == 0, err
    assert "settings password" in out and "by hand" in out
    system = System()
    try:
        rec = system.sources.get("team")
        assert system.sources.secrets_of(rec) == {"password": SECRET + "-2"}
        assert rec.every_minutes is None and rec.include == ("docs/*.md",)
    finally:
        system.close()


def test_run_here_plan_check_runs_pause_edit_and_remove(capsys, said, files, monkeypatch):
    monkeypatch.setenv("TEAM_PASSWORD", SECRET)
    add(capsys, said, files, "--secret-env", "password=TEAM_PASSWORD")
    code, out, _ = run(capsys, said, "source", "check", "team")
    assert code == 0 and out.startswith("team: reached")
    code, out, _ = run(capsys, said, "source", "plan", "team")
    assert code == 0 and "+ added    docs/holidays.md" in out and "team -> kb: 2 added" in out
    code, out, err = run(capsys, said, "source", "run", "team", "--here")
    assert code == 0, err
    assert "  ok      docs/holidays.md" in out and "team: done" in out and "2 added" in out
    code, out, _ = run(capsys, said, "stores", "--json")
    assert [(s["name"], s["files"]) for s in json.loads(out)] == [("kb", 2)]

    DictSource.FILES[files]["docs/salary.md"] = (b"Salary reviews now happen each April.", None)
    DictSource.FILES[files]["docs/new.md"] = (b"A new page about the office plants.", None)
    code, out, _ = run(capsys, said, "source", "plan", "team", "--json")
    assert json.loads(out)["counts"]["added"] == 1 and json.loads(out)["counts"]["changed"] == 1
    assert run(capsys, said, "source", "run", "team", "--here")[0] == 0
    code, out, _ = run(capsys, said, "source", "runs", "team")
    assert code == 0 and out.count(" done ") == 2 and "1 added, 1 changed, 1 unchanged" in out
    assert "  ok      docs/new.md" in out
    runs = json.loads(run(capsys, said, "source", "runs", "team", "--json")[1])
    assert [r["counts"]["added"] for r in runs] == [1, 2]
    assert {i["path"] for i in runs[0]["items"]} == {"docs/new.md", "docs/salary.md"} and "items" not in runs[1]

    code, out, _ = run(capsys, said, "source", "edit", "team", "--every", "15", "--exclude", "*.tmp")
    assert code == 0 and "every 15 min" in out
    code, out, _ = run(capsys, said, "source", "pause", "team")
    assert code == 0 and "paused: every 15 min, paused" in out
    code, out, _ = run(capsys, said, "source", "list", "--json")
    [listed] = json.loads(out)
    assert listed["paused"] and listed["exclude"] == ["*.tmp"] and listed["last_run"]["status"] == "done"
    assert listed["location"] == f"dict://{files}"
    code, out, _ = run(capsys, said, "source", "resume", "team")
    assert code == 0 and "resumed" in out
    code, out, _ = run(capsys, said, "source", "list")
    assert "team" in out and "every 15 min" in out and "done" in out

    code, out, _ = run(capsys, said, "source", "remove", "team", "--keep-files")
    assert code == 0 and "its files stay in 'kb'" in out
    assert [s["files"] for s in json.loads(run(capsys, said, "stores", "--json")[1])] == [3]
    code, _, err = run(capsys, said, "source", "show", "team")
    assert code == 2 and "There is no source 'team'" in err


def test_a_queued_run_is_left_to_the_workers_and_wait_sees_it_through(capsys, said, files):
    add(capsys, said, files)
    code, out, _ = run(capsys, said, "source", "run", "team")
    assert code == 0 and "Queued run" in out
    [queued] = json.loads(run(capsys, said, "source", "runs", "team", "--json")[1])
    assert queued["status"] == "queued"  # this command's own worker did not take it
    code, out, err = run(capsys, said, "source", "run", "team", "--wait")
    assert code == 0, err
    assert "  ok      docs/holidays.md" in out and "team: done" in out
    [done] = json.loads(run(capsys, said, "source", "runs", "team", "--json")[1])
    assert done["id"] == queued["id"] and done["status"] == "done" and done["counts"]["added"] == 2


def test_a_source_that_does_not_answer_fails_in_words_without_its_password(capsys, said, files, monkeypatch):
    monkeypatch.setenv("TEAM_PASSWORD", SECRET)
    add(capsys, said, files, "--secret-env", "password=TEAM_PASSWORD")
    DictSource.DOWN.add(files)
    code, _, err = run(capsys, said, "source", "check", "team")
    assert code == 1 and f"team: not reached: the test server {files} did not answer" in err
    code, out, _ = run(capsys, said, "source", "run", "team", "--here", "--json")
    report = json.loads(out)
    assert code == 1 and report["status"] == "failed" and "did not answer" in report["reason"]
    code, _, err = run(capsys, said, "source", "plan", "team")
    assert code == 2 and "did not answer" in err


def test_who_may_do_what(capsys, said, files):
    system = System()
    try:
        system.people.set_up_admin("root", PW)
        for who in ("ana", "bob"):
            system.people.accounts.create(who, PW)
    finally:
        system.close()
    add(capsys, said, files, "--user", "root")
    code, _, err = run(capsys, said, "--user", "root", "share", "kb", "--user", "bob")
    assert code == 0, err
    code, out, _ = run(capsys, said, "source", "list", "--user", "bob")
    assert code == 0 and "team" in out
    code, _, err = run(capsys, said, "source", "run", "team", "--here", "--user", "bob")
    assert code == 2 and "error:" in err  # read access: no run
    code, _, err = run(capsys, said, "source", "show", "team", "--user", "ana")
    assert code == 2 and "There is no source 'team'" in err  # no access: none there
    code, out, _ = run(capsys, said, "source", "list", "--user", "ana")
    assert code == 0 and "No source yet" in out
