"""``files move`` / ``files where`` (issue 39) on the embedded default: the settings switched to
another folder are refused by every command with the command to run; ``files move --to filesystem``
moves the files there by id; ``--cleanup`` deletes the old copies; a member may not move them."""

from __future__ import annotations

import hashlib

from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.filestore import open_file_store


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_files_move_between_folders_from_the_command_line(tmp_path, capsys, monkeypatch):
    data = str(tmp_path / "data")
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nWords about harbour number {i}.\n", encoding="utf-8")
    assert run(capsys, "--data-dir", data, "ingest", "notes", str(docs))[0] == 0
    code, out, _ = run(capsys, "--data-dir", data, "files", "where")
    assert code == 0 and "Files are in the filesystem file store (folder 'files')." in out
    before = {f.id: f.sha256 for f in open_file_store(load_settings(data_dir=data)).list()}
    assert len(before) == 3

    monkeypatch.setenv("KNOWLEDGE_FILE_STORE__DIR", "moved")
    code, _, err = run(capsys, "--data-dir", data, "files", "notes")  # any command but the move is refused
    assert code == 2 and "knowledge files move --to filesystem" in err and "folder 'moved'" in err, err

    code, out, err = run(capsys, "--data-dir", data, "files", "move", "--to", "filesystem")
    assert code == 0, err
    assert "Moved the files from the filesystem file store (folder 'files') to the filesystem file store" in out
    assert "3 copied and verified now" in out and "`knowledge files move --cleanup` deletes them" in out
    code, out, _ = run(capsys, "--data-dir", data, "files", "notes")  # the store's files, by the same ids
    assert code == 0 and all(fid in out for fid in before)
    code, out, _ = run(capsys, "--data-dir", data, "files", "where")
    assert "folder 'moved'" in out and "Old copies are kept in the filesystem file store (folder 'files')" in out
    moved = open_file_store(load_settings(data_dir=data))  # the environment names 'moved'
    assert {f.id: f.sha256 for f in moved.list()} == before
    for f in moved.list():
        with moved.content(f.id) as fh:
            assert hashlib.sha256(fh.read()).hexdigest() == f.sha256

    assert run(capsys, "--data-dir", data, "files", "move", "--cleanup")[1] == "Deleted 3 old copies.\n"
    monkeypatch.delenv("KNOWLEDGE_FILE_STORE__DIR")
    code, _, err = run(capsys, "--data-dir", data, "stores")  # the old settings, once the old copies are gone
    assert code == 2 and "folder 'moved'" in err and "knowledge files move --to filesystem" in err


def test_only_an_admin_moves_the_files(tmp_path, capsys):
    data = str(tmp_path / "data")
    from knowledge.system import System

    system = System(load_settings(data_dir=data))
    try:
        system.people.accounts.create("ann", "a-long-password", role="admin")
        system.people.accounts.create("bob", "a-long-password", role="member")
    finally:
        system.close()
    code, _, err = run(capsys, "--data-dir", data, "--user", "bob", "files", "move", "--to", "postgresql")
    assert code == 2 and "Only an admin may move the files to another file store." in err
    code, _, err = run(capsys, "--data-dir", data, "files", "move")
    assert code == 2 and "Give --to BACKEND" in err


def test_the_files_table_shows_a_files_warnings(tmp_path, capsys, monkeypatch):
    """The table gives each file's warnings (their count and the first), as the app does; ``--json`` all."""
    import json
    import zipfile

    data = str(tmp_path / "data")
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    bundle = tmp_path / "notes.zip"
    with zipfile.ZipFile(bundle, "w") as z:
        z.writestr("notes/harbour.md", "# Harbour\n\nThe harbour master counts boats at dawn.\n")
        z.writestr("notes/.DS_Store", b"\x00\x00\x00\x01Bud1")
    clean = tmp_path / "clean.md"
    clean.write_text("# Clean\n\nNothing to warn about here.\n", encoding="utf-8")
    assert run(capsys, "--data-dir", data, "ingest", "notes", str(bundle), str(clean))[0] == 0
    code, out, _ = run(capsys, "--data-dir", data, "files", "notes")
    assert code == 0
    head, _, *rows = out.splitlines()
    assert head.rstrip().endswith("warnings")
    (zipped,) = [r for r in rows if r.startswith("notes.zip")]
    (plain,) = [r for r in rows if r.startswith("clean.md")]
    assert zipped.rstrip().endswith("1: 1 system file skipped (__MACOSX, .DS_Store, hidden files)"), out
    assert "system file" not in plain
    listed = json.loads(run(capsys, "--data-dir", data, "files", "notes", "--json")[1])
    assert [f["warnings"] for f in listed if f["name"] == "notes.zip"] == [
        ["1 system file skipped (__MACOSX, .DS_Store, hidden files)"]
    ]
