"""Access per document on the command line: ``ingest --readers``, ``files readers STORE FILE``
(``file-readers``: print them, ``--set``, ``--everyone``), and what a member outside a file's
readers sees of it through ``--user``: not in ``files``, not counted by ``stores``, not found by
``search``, ``files readers`` or ``delete-file`` (the words of a file the store does not hold), and
a copy of its bytes never names it. In-process, the fake embedding model; root (admin) owns the
store ``handbook`` everyone reads, ana is in group ``hr``, bo is not (and may write to it)."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

import pytest

from tests.cli.test_cli_people import add_user, cli_json, open_system, run

SALARIES = "Salaries for the year: ana earns 100, bo earns 90. Salaries are reviewed in spring.\n"


@pytest.fixture(autouse=True)
def _fake_model(monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")


@pytest.fixture
def docs(capsys, monkeypatch, tmp_path) -> Path:
    """The team, and root's store ``handbook``: page.txt for everyone, salaries.txt for group hr."""
    for name, *role in (("root", "--role", "admin"), ("ana",), ("bo",)):
        add_user(capsys, monkeypatch, name, *role)
    for argv in (("groups", "add", "hr"), ("groups", "add-member", "hr", "ana")):
        assert run(capsys, monkeypatch, *argv)[0] == 0
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "page.txt").write_text("The handbook page about holidays and salaries reviews.\n")
    (folder / "salaries.txt").write_text(SALARIES)
    code, _, err = run(capsys, monkeypatch, "--user", "root", "ingest", "handbook", str(folder / "page.txt"))
    assert code == 0, err
    code, out, err = run(
        capsys, monkeypatch, "--user", "root", "ingest", "handbook", str(folder / "salaries.txt"), "--readers", "group:hr"
    )
    assert code == 0 and "indexed" in out, err
    for argv in (("share", "handbook", "--everyone"), ("share", "handbook", "--user", "bo", "--write")):
        assert run(capsys, monkeypatch, "--user", "root", *argv)[0] == 0
    return folder


def names(capsys, monkeypatch, *user: str) -> list[str]:
    return [f["name"] for f in cli_json(capsys, monkeypatch, *user, "files", "handbook")]


def test_a_member_outside_the_readers_does_not_see_the_file(docs, capsys, monkeypatch):
    assert names(capsys, monkeypatch, "--user", "ana") == ["page.txt", "salaries.txt"]
    assert names(capsys, monkeypatch, "--user", "bo") == ["page.txt"]
    counts = {
        u: [(s["files"], s["chunks"]) for s in cli_json(capsys, monkeypatch, "--user", u, "stores")] for u in ("ana", "bo")
    }
    assert counts["ana"][0][0] == 2 and counts["bo"][0][0] == 1 and counts["bo"][0][1] < counts["ana"][0][1]
    files = cli_json(capsys, monkeypatch, "--user", "ana", "files", "handbook")
    assert [f["readers"] for f in files] == [None, ["group:hr"]]
    hits = {u: cli_json(capsys, monkeypatch, "--user", u, "search", "handbook", "salaries earns") for u in ("ana", "bo")}
    assert "salaries.txt" in {h["file_name"] for h in hits["ana"]}
    assert hits["bo"] and {h["file_name"] for h in hits["bo"]} == {"page.txt"}
    # the hidden file's name and id are answered as a file the store does not hold
    with closing(open_system()) as system:
        sal = next(f.file_id for f in system.catalog.files("handbook") if f.file_name == "salaries.txt")
    for argv in (["files", "readers", "handbook"], ["delete-file", "handbook"]):
        for ref, other in (("salaries.txt", "nothing.txt"), (sal, "file-" + "0" * 32)):
            code, out, err = run(capsys, monkeypatch, "--user", "bo", *argv, ref)
            _, _, absent = run(capsys, monkeypatch, "--user", "bo", *argv, other)
            assert code == 2 and not out and err == absent.replace(other, ref), (argv, ref, err)
    assert names(capsys, monkeypatch, "--user", "root") == ["page.txt", "salaries.txt"]  # nothing was deleted
    # bo ingests a copy of its bytes: the result never names it
    (docs / "copy.txt").write_text(SALARIES)
    code, out, err = run(capsys, monkeypatch, "--user", "bo", "ingest", "handbook", str(docs / "copy.txt"), "--json")
    (result,) = json.loads(out)
    assert result["outcome"] == "duplicate" and result["file_id"] is None and "salaries.txt" not in out + err
    assert sal not in out + err


def test_files_readers_prints_and_sets_them(docs, capsys, monkeypatch):
    code, out, _ = run(capsys, monkeypatch, "files", "readers", "handbook", "salaries.txt")
    assert code == 0 and "salaries.txt (file-" in out and "read by group hr (and the store's owners)." in out
    code, out, _ = run(capsys, monkeypatch, "--user", "ana", "file-readers", "handbook", "page.txt")
    assert code == 0 and "read by everyone who may read the store." in out
    # --set: bo (a writer) may not set them on a file he may not read; root lets him read it
    code, _, err = run(
        capsys, monkeypatch, "--user", "bo", "files", "readers", "handbook", "salaries.txt", "--set", "user:bo"
    )
    assert code == 2 and "No file 'salaries.txt'" in err
    code, out, err = run(
        capsys, monkeypatch, "--user", "root", "files", "readers", "handbook", "salaries.txt", "--set", "group:hr, user:BO"
    )
    assert code == 0 and "read by group hr, user bo" in out, err
    assert names(capsys, monkeypatch, "--user", "bo") == ["page.txt", "salaries.txt"]
    got = cli_json(capsys, monkeypatch, "--user", "bo", "files", "readers", "handbook", "salaries.txt")
    assert (got["name"], got["readers"]) == ("salaries.txt", ["group:hr", "user:bo"])
    # a bad reader: exit 2 in words, nothing changed
    for bad, words in (
        ("group:nope", "no group 'nope'"),
        ("role:x", "'user:<name>', 'group:<name>' or 'everyone'"),
        (" ", "--set needs readers"),
    ):
        code, _, err = run(capsys, monkeypatch, "files", "readers", "handbook", "salaries.txt", "--set", bad)
        assert code == 2 and words in err, (bad, err)
    assert cli_json(capsys, monkeypatch, "file-readers", "handbook", "salaries.txt")["readers"] == ["group:hr", "user:bo"]
    # bo restricts page.txt to hr: he no longer sees it; --everyone (the owner) lifts it
    code, out, _ = run(capsys, monkeypatch, "--user", "bo", "files", "readers", "handbook", "page.txt", "--set", "group:hr")
    assert code == 0 and names(capsys, monkeypatch, "--user", "bo") == ["salaries.txt"]
    code, out, _ = run(capsys, monkeypatch, "files", "readers", "handbook", "page.txt", "--everyone")
    assert code == 0 and "read by everyone who may read the store." in out
    assert names(capsys, monkeypatch, "--user", "bo") == ["page.txt", "salaries.txt"]
    with closing(open_system()) as system:
        events = [e.detail["readers"] for e in system.people.audit.events(store="handbook") if e.action == "file.readers"]
    assert events == ["everyone who may read the store", "group hr", "group hr, user bo"]  # newest first
    # `files readers` with nothing after it still lists a store of that name
    code, _, err = run(capsys, monkeypatch, "files", "readers")
    assert code == 2 and "'readers' does not exist" in err


def test_ingest_readers_are_checked_before_anything_is_queued(docs, capsys, monkeypatch):
    (docs / "memo.txt").write_text("A memo about the reorganisation.\n")
    code, out, err = run(capsys, monkeypatch, "ingest", "handbook", str(docs / "memo.txt"), "--readers", "group:nope")
    assert code == 2 and "no group 'nope'" in err and "memo.txt" not in out
    assert "memo.txt" not in names(capsys, monkeypatch)
    code, _, err = run(capsys, monkeypatch, "ingest", "handbook", str(docs / "memo.txt"), "--readers", "user:ana")
    assert code == 0, err
    assert names(capsys, monkeypatch, "--user", "ana") == ["memo.txt", "page.txt", "salaries.txt"]
    assert names(capsys, monkeypatch, "--user", "bo") == ["page.txt"]


def test_ocr_progress_without_a_terminal_is_one_line_a_page(capsys):
    """Without a terminal (no progress bar) the OCR progress is printed once a page, not once for
    every step the reader reports within a page (a one-page image printed its line 18 times)."""
    from tqdm import tqdm

    from knowledge.cli.ingest import _OcrProgress

    progress = _OcrProgress(tqdm(disable=True), quiet=False)
    for stage in ["reading"] + ["OCR, page 1 of 2"] * 9 + ["OCR, page 2 of 2"] * 9 + ["chunking"]:
        progress("scan.pdf", stage, 0.5)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(",")[0:2] for line in lines] == [["scan.pdf: OCR", " page 1 of 2"], ["scan.pdf: OCR", " page 2 of 2"]]
