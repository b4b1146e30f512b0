"""``python -m knowledge`` and the quotas (issue 44, item 2), in-process, with the fake embedding model: a
member over their byte quota is refused by ``ingest`` (exit 2, the limit and the use in words, nothing
written), an admin is not; ``usage`` shows one's own use, ``quota`` sets a person's own limit (an admin's)."""

from __future__ import annotations

import json

import pytest

from knowledge.system import System
from tests.cli.test_cli_people import PW, add_user, run

LEAVE = "The parental leave policy grants sixteen weeks of paid leave.\n"  # 62 bytes


@pytest.fixture(autouse=True)
def _fake_model_and_quota(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    monkeypatch.setenv("KNOWLEDGE_QUOTAS__USER_BYTES", "100")


def test_a_member_over_their_byte_quota_is_refused_by_ingest_and_nothing_is_written(capsys, monkeypatch, tmp_path):
    add_user(capsys, monkeypatch, "root", "--role", "admin")
    add_user(capsys, monkeypatch, "ana")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "leave.txt").write_text(LEAVE)
    (docs / "more.txt").write_text(LEAVE.replace("sixteen", "twenty"))
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "ingest", "hr", str(docs / "leave.txt"))
    assert code == 0, err
    code, out, err = run(capsys, monkeypatch, "--user", "ana", "ingest", "hr", str(docs / "more.txt"))
    assert code == 2
    assert "error: Your stores hold 62 bytes; the quota is 100 bytes, and adding 61 bytes would pass it." in err
    system = System()
    try:
        assert [f.file_name for f in system.catalog.files("hr")] == ["leave.txt"]
        assert [f.name for f in system.files.list()] == ["leave.txt"]
    finally:
        system.close()
    code, out, _ = run(capsys, monkeypatch, "--user", "ana", "usage", "--json")
    assert code == 0
    assert json.loads(out) == [
        {
            "scope": "user",
            "name": "ana",
            "bytes": 62,
            "files": 1,
            "chunks": 1,
            "limits": {"bytes": 100, "files": None, "chunks": None, "requests_per_minute": None},
        }
    ]
    # a member may not raise their own; an admin may, and then the file goes in
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "quota", "user", "ana", "bytes", "1000")
    assert code == 2 and "Only an admin" in err
    code, out, err = run(capsys, monkeypatch, "--user", "root", "quota", "user", "ana", "bytes", "1000")
    assert code == 0 and "user ana: bytes 1.0 kB (its own)." in out, err
    code, _, err = run(capsys, monkeypatch, "--user", "ana", "ingest", "hr", str(docs / "more.txt"))
    assert code == 0, err
    code, out, _ = run(capsys, monkeypatch, "--user", "root", "usage", "--by", "store")
    (row,) = [line for line in out.splitlines() if line.startswith("hr ")]
    assert "ana" in row and "123 bytes of unlimited" in row and "2 files of unlimited" in row, out


def test_an_admin_is_not_refused_by_a_quota_while_admins_are_exempt(capsys, monkeypatch, tmp_path):
    add_user(capsys, monkeypatch, "root", "--role", "admin", password=PW)
    big = tmp_path / "big.txt"
    big.write_text(LEAVE * 5)
    code, _, err = run(capsys, monkeypatch, "--user", "root", "ingest", "admin-notes", str(big))
    assert code == 0, err
    monkeypatch.setenv("KNOWLEDGE_QUOTAS__ADMINS_EXEMPT", "false")
    code, _, err = run(capsys, monkeypatch, "--user", "root", "ingest", "admin-notes", str(big) + "")
    assert code == 2 and "the quota is 100 bytes" in err
