"""The Sources page's model (knowledge.pagemodels.sources) and the words every surface shows a source
in (knowledge.sources.shown): a kind's form with the secret never pre-filled, the settings read
back (a blank secret left out, a blank plain one cleared), the options typed, the tables (a run's
files failed first), and a source's location, schedule and settings without a secret value."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar

import pytest

from knowledge.config import load_settings
from knowledge.errors import InvalidArgument
from knowledge.pagemodels import sources as sm
from knowledge.sources.base import Field, Source
from knowledge.sources.engine import PlanItem, RunItem, RunRecord, SourcePlan, SourceRecord
from knowledge.sources.shown import (
    NOT_SET,
    SET,
    counts_text,
    kind_object,
    location,
    minutes_text,
    run_text,
    schedule,
    settings_shown,
)


class Share(Source):
    kind = "share"
    title = "A share"
    fields: ClassVar[tuple[Field, ...]] = (
        Field("host", "Host", required=True),
        Field("port", "Port", kind="int", default=445),
        Field("folders", "Folders", kind="list"),
        Field("signing", "Signing", kind="bool", default=True),
        Field("password", "Password", secret=True),
        Field("key", "Private key", secret=True),
    )

    def location(self) -> str:
        return f"smb://{self.required('host')}:{self.setting('port')}"

    def entries(self):  # pragma: no cover - not listed here
        return iter(())

    def fetch(self, entry, out) -> None:  # pragma: no cover
        raise NotImplementedError


class NeedsItsSecret(Share):
    def location(self) -> str:
        return f"smb://{self.required('password')}"


AT = datetime(2026, 5, 1, 14, 3, tzinfo=UTC)


def record(**kw) -> SourceRecord:
    base = {
        "id": "s1",
        "name": "team",
        "kind": "share",
        "store": "kb",
        "config": {"host": "files", "folders": ["a", "b"]},
        "secrets_set": ("password",),
    }
    return SourceRecord(**{**base, **kw})


def run(status="done", counts=None, reason=None, rid="r1") -> RunRecord:
    return RunRecord(rid, "s1", None, "hand", status, counts or {}, reason, None, AT, AT, AT)


def test_the_form_is_the_kinds_settings_and_a_secret_is_never_filled_in():
    fresh = {i.name: i for i in sm.inputs(Share)}
    assert fresh["port"].value == 445 and fresh["signing"].value is True and fresh["folders"].value == ""
    assert fresh["host"].label == "Host *" and fresh["password"].value == "" and fresh["password"].placeholder == ""
    assert "One per line." in fresh["folders"].help and "never shown again" in fresh["password"].help
    edit = {i.name: i for i in sm.inputs(Share, record())}
    assert edit["host"].value == "files" and edit["folders"].value == "a\nb"
    assert (edit["password"].value, edit["password"].placeholder) == ("", "set: leave empty to keep it")
    assert (edit["key"].value, edit["key"].placeholder) == ("", "")


def test_the_settings_read_back_leave_a_blank_secret_out_and_clear_a_blank_plain_one():
    values = {"host": " files ", "port": None, "folders": "a\nb", "signing": False, "password": "", "key": "k"}
    assert sm.config_of(Share, values) == {"host": " files ", "port": "", "folders": "a\nb", "signing": False, "key": "k"}
    assert sm.config_of(Share, {"port": 139.0}) == {"port": 139}


def test_the_options_as_typed():
    assert sm.globs_of("**/*.pdf\n\n  docs/*  \n") == ["**/*.pdf", "docs/*"]
    assert sm.globs_text(("a", "b")) == "a\nb"
    assert sm.max_bytes_of(None) is None and sm.max_bytes_of(0) is None and sm.max_bytes_of(2.5) == 2_500_000
    assert sm.mb_of(2_500_000) == 2.5 and sm.mb_of(None) is None
    with pytest.raises(InvalidArgument, match="between 0 and"):
        sm.max_bytes_of(-1)
    assert sm.every_of(0) is None and sm.every_of(None) is None and sm.every_of(30) == 30
    assert sm.readers_of("  ") is None and sm.readers_of(" group:hr ") == "group:hr"
    assert sm.readers_text(None) == "" and sm.readers_text(("group:hr", "user:ana")) == "group:hr, user:ana"


def test_the_tables_and_a_runs_files_failed_first():
    rows = sm.overview_rows([record(every_minutes=90, paused=True)], {"team": run(counts={"added": 2})}, {"team": "x"})
    assert rows == [
        {
            "source": "team",
            "kind": "share",
            "store": "kb",
            "location": "x",
            "schedule": "every 1 h 30 min, paused",
            "last run": "✅ done",
            "when": "2026-05-01 14:03 UTC",
            "counts": "2 added",
        }
    ]
    assert sm.overview_rows([record()], {}, {})[0]["last run"] == "never run"
    [r] = sm.run_rows([run("failed", reason="the server did not answer")])
    assert (r["status"], r["reason"], r["by"]) == ("❌ failed", "the server did not answer", "hand")
    assert sm.run_label(run(counts={"added": 1, "failed": 1})) == "✅ done · 2026-05-01 14:03 UTC · 1 added, 1 failed"
    items = [
        RunItem(0, "added", "a.md", None, True, "a.md: indexed"),
        RunItem(1, "added", "b.md", None, False, "b.md: b.md vanished"),
        RunItem(2, "renamed", "c.md", "old.md", True, "c.md: renamed"),
    ]
    assert [i["file"] for i in sm.item_rows(items)] == ["b.md", "a.md", "c.md"]
    first = sm.item_rows(items)[0]
    assert (first["outcome"], first["message"]) == ("❌ failed", "b.md vanished")  # the path said once, in its column
    assert sm.item_rows(items)[2]["was"] == "old.md"
    plan = SourcePlan("team", "kb", (PlanItem("added", "a.md"), PlanItem("unchanged", "b.md")))
    assert sm.plan_rows(plan) == [{"change": "➕ added", "file": "a.md", "was": ""}]


def test_a_source_in_words_without_a_secret_value():
    settings = load_settings()
    assert location(Share, record(), settings) == "smb://files:445"
    # a plugin that needs its secret to be made gets a stand-in, never the secret (the record has none)
    assert location(NeedsItsSecret, record(secrets_set=("password",)), settings) == "smb://set"
    assert location(NeedsItsSecret, record(secrets_set=()), settings) == "host=files, folders=a, b"  # none set
    assert location(None, record(config={}), settings) == "a share source"
    assert schedule(record()) == "by hand" and schedule(record(every_minutes=1440, paused=True)) == "every 1 day, paused"
    assert minutes_text(61) == "1 h 1 min" and minutes_text(2880) == "2 days"
    assert counts_text({"unchanged": 3, "added": 1, "failed": 0, "skipped": 2}) == "1 added, 3 unchanged, 2 skipped"
    assert counts_text({}) == "nothing changed"
    assert run_text(None) == "never run"
    assert run_text(run("failed", reason="refused")) == "failed 2026-05-01 14:03 UTC: refused"
    shown = {f.name: v for f, v in settings_shown(Share, record())}
    assert shown == {"host": "files", "port": "445", "folders": "a, b", "signing": "yes", "password": SET, "key": NOT_SET}
    assert {f.name: v for f, v in settings_shown(None, record())} == {"host": "files", "folders": "a, b", "password": SET}
    kind = kind_object("share", Share)
    assert kind["title"] == "A share" and [f["name"] for f in kind["fields"] if f["secret"]] == ["password", "key"]


def test_a_hit_from_a_source_says_where_it_lives_there():
    from knowledge.pagemodels.playground import source_of
    from knowledge.vectorstore.store import Hit

    def hit(**meta):
        return Hit("f:0", 0.9, "f", "docs/a.md", 0, "text", metadata=meta)

    assert source_of(hit(attr_source="team", attr_source_url="smb://files/team/docs/a.md")) == (
        "team",
        "smb://files/team/docs/a.md",
    )
    assert source_of(hit(attr_source="team")) is None and source_of(hit()) is None
