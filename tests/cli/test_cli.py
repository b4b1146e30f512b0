"""``python -m knowledge``: the commands, their output and exit codes, with the real bundled model."""

from __future__ import annotations

import json

import pytest

from knowledge.cli import main

pytestmark = pytest.mark.model


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_ingest_search_files_delete(tmp_path, capsys, data_dir):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "owls.md").write_text("# Owls\n\n## Hunting\n\nOwls hunt mice at night with silent flight.\n")
    (tmp_path / "docs" / "bread.txt").write_text("Knead the dough and let it rise for an hour.\n")
    (tmp_path / "docs" / "broken.pdf").write_bytes(b"%PDF-1.7\n garbage without objects")
    code, out, _ = run(capsys, "--data-dir", data_dir, "ingest", "demo", str(tmp_path / "docs"))
    assert code == 1  # one file failed, the others went on
    assert "broken.pdf" in out and "failed" in out
    assert "3 files: 2 indexed, 1 failed;" in out

    code, out, _ = run(capsys, "--data-dir", data_dir, "search", "demo", "how do owls catch mice", "-k", "2", "--json")
    assert code == 0
    hits = json.loads(out)
    assert hits[0]["file_name"] == "owls.md"
    assert hits[0]["heading"] == "Owls > Hunting"
    assert {"page", "char_start", "char_end", "score", "text"} <= set(hits[0])
    assert 0 < hits[0]["score"] <= 1

    code, out, _ = run(capsys, "--data-dir", data_dir, "search", "demo", "owls mice", "-k", "1")
    assert code == 0 and out.startswith("[1] similarity ") and " · keyword score " in out and " · rank score " in out
    code, out, _ = run(capsys, "--data-dir", data_dir, "search", "demo", "owls mice", "-k", "1", "--mode", "vector")
    assert code == 0 and "BM25" not in out and "fused" not in out

    code, out, _ = run(capsys, "--data-dir", data_dir, "stores")
    assert code == 0 and "demo" in out and "384" in out
    code, out, _ = run(capsys, "--data-dir", data_dir, "files", "demo", "--json")
    files = {f["name"]: f for f in json.loads(out)}
    assert files["owls.md"]["status"] == "done" and files["broken.pdf"]["status"] == "failed"
    assert files["broken.pdf"]["reason"]

    code, out, _ = run(capsys, "--data-dir", data_dir, "delete-file", "demo", "owls.md")
    assert code == 0
    code, out, _ = run(capsys, "--data-dir", data_dir, "search", "demo", "owls", "--json")
    assert all(h["file_name"] != "owls.md" for h in json.loads(out))

    code, out, _ = run(capsys, "--data-dir", data_dir, "templates")
    assert code == 0 and "default" in out


@pytest.mark.slow
def test_errors_exit_2_with_a_message(capsys, data_dir):
    code, _, err = run(capsys, "--data-dir", data_dir, "search", "nosuch", "anything")
    assert code == 2 and "does not exist" in err
    code, _, err = run(capsys, "--data-dir", data_dir, "ingest", "demo", "/nonexistent/file.md")
    assert code == 1


@pytest.mark.slow
def test_data_dir_works_before_or_after_the_command(tmp_path, capsys):
    for argv in (["--data-dir", str(tmp_path / "a"), "templates"], ["templates", "--data-dir", str(tmp_path / "b")]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "default" in out
    assert (tmp_path / "a" / "catalog.duckdb").exists() and (tmp_path / "b" / "catalog.duckdb").exists()


@pytest.mark.processes
@pytest.mark.slow
def test_a_closed_pipe_ends_the_command_quietly(data_dir):
    """``python -m knowledge templates | head -0``: the reader is gone before anything is written;
    the command stops with 141 (128 + SIGPIPE), as Unix tools do, and no traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "knowledge", "--data-dir", data_dir, "templates"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # before the command has started up, let alone printed
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_the_ingest_summary_counts_in_words(tmp_path, capsys, data_dir):
    (tmp_path / "one.txt").write_text("A single short line.\n")
    code, out, _ = run(capsys, "--data-dir", data_dir, "ingest", "demo", str(tmp_path / "one.txt"))
    assert code == 0
    assert "1 file: 1 indexed; 1 chunk in the store from them." in out  # not "1 chunks"
