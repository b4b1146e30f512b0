"""Folder sync (knowledge/sync.py, issue 18): the plan (added, changed, renamed, deleted, unchanged),
dry runs, applying it, the two rules (a sync deletes only what it added; one content at two paths),
``--watch`` with a file still being written, the CLI, and the basic round on every backend."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

from knowledge.cli import main
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.outcomes import Outcome
from knowledge.sync import folder_key
from knowledge.system import System
from knowledge.workbench import Workbench

CATS = "# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n"
BREAD = "# Bread\n\nKnead the dough for ten minutes, then let it rise.\n"
OWLS = "# Owls\n\nOwls hunt mice at night with silent flight.\n"
BEES = "# Bees\n\nBees make honey from the nectar of flowers.\n"


class CountingEmbedder(HashEmbedder):
    """The fake embedder, counting the texts it embeds for documents."""

    def __init__(self, counter: list[int], **kw):
        super().__init__(**kw)
        self._counter = counter

    def embed_documents(self, texts):
        self._counter[0] += len(texts)
        return super().embed_documents(texts)


@pytest.fixture
def embedded():
    return [0]


def make_wb(settings, embedded):
    return Workbench(settings, embedder_factory=lambda model: CountingEmbedder(embedded, dimension=64, max_tokens=48))


@pytest.fixture
def system(tmp_path, embedded):
    s = System(
        load_settings(data_dir=tmp_path / "data"),
        embedder_factory=lambda model: CountingEmbedder(embedded, dimension=64, max_tokens=48),
    )
    yield s
    s.close()


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "cats.md").write_text(CATS)
    (folder / "bread.md").write_text(BREAD)
    (folder / "sub" / "owls.md").write_text(OWLS)
    (folder / ".hidden.md").write_text(BEES)  # hidden: never taken
    return folder


def names(wb, store="notes"):
    return sorted((n.name, n.folder != "") for n in wb.file_names_of(store))


def hit_names(wb, query, store="notes"):
    return {h.file_name for h in wb.search(store, query, k=10)}


def bump(path, text):
    """Write ``text`` and move the mtime on, so the change is seen even within the clock's tick."""
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000))


# -- plan and apply ----------------------------------------------------------------------------
def test_first_sync_adds_every_file_then_nothing_is_read_again(wb, docs, system):
    sync = wb.syncs.folder("notes", docs)
    plan = sync.plan()
    assert plan.counts() == {"added": 3, "changed": 0, "renamed": 0, "deleted": 0, "unchanged": 0}
    assert [i.path for i in plan.of("added")] == ["bread.md", "cats.md", "sub/owls.md"]
    assert plan.skipped == {"hidden": 1} and plan.hashed == 3
    assert not wb.store_exists("notes")  # planning changes nothing
    report = sync.apply(plan)
    assert not report.failed and report.counts()["added"] == 3
    assert names(wb) == [("bread.md", True), ("cats.md", True), ("sub/owls.md", True)]
    assert "sub/owls.md" in hit_names(wb, "owls hunt mice at night")
    again = sync.plan()
    assert again.counts()["unchanged"] == 3 and again.changes == 0
    assert again.hashed == 0  # size and mtime as recorded: not read
    [folder] = system.catalog.synced_folders("notes")
    assert folder.folder == folder_key(docs) and folder.glob == "**/*" and folder.last_sync is not None
    assert folder.last_plan == {"added": 3, "changed": 0, "renamed": 0, "deleted": 0, "unchanged": 0, "failed": 0}


def test_modify_rename_delete_and_add_in_one_sync(wb, docs, embedded):
    sync = wb.syncs.folder("notes", docs)
    sync.run()
    owls_id = next(n.file_id for n in wb.file_names_of("notes") if n.name == "sub/owls.md")
    before = {
        p.id: p.vector.copy()
        for p in wb.vector_store("notes").collection.scroll(where={"file_id": owls_id}, with_vectors=True)
    }
    bump(docs / "bread.md", BREAD + "\nBake it for forty minutes until golden.\n")  # changed
    (docs / "sub" / "owls.md").rename(docs / "birds.md")  # renamed: same bytes, new path
    (docs / "cats.md").unlink()  # deleted
    (docs / "bees.md").write_text(BEES)  # added
    plan = sync.plan()
    assert plan.counts() == {"added": 1, "changed": 1, "renamed": 1, "deleted": 1, "unchanged": 0}
    [renamed] = plan.of("renamed")
    assert (renamed.old_path, renamed.path, renamed.file_id) == ("sub/owls.md", "birds.md", owls_id)
    embedded[0] = 0
    report = sync.apply(plan)
    assert not report.failed
    assert names(wb) == [("bees.md", True), ("birds.md", True), ("bread.md", True)]
    assert "cats.md" not in hit_names(wb, "cat sits on the mat purrs") | hit_names(wb, "fish chicken")
    assert any("forty minutes" in h.text for h in wb.search("notes", "bake forty minutes golden", k=3))
    [bread] = [f for f in wb.store_files("notes") if f.file_name == "bread.md"]  # one version, the new
    assert "forty" in " ".join(h.text for h in wb.vector_store("notes").chunks(bread.file_id))
    # the renamed file was not embedded again: its points, vectors and id are those of before
    after = {p.id: p for p in wb.vector_store("notes").collection.scroll(where={"file_id": owls_id}, with_vectors=True)}
    assert after.keys() == before.keys()
    assert all(np.allclose(after[i].vector, v, atol=1e-6) for i, v in before.items())
    assert {p.payload["file_name"] for p in after.values()} == {"birds.md"}  # provenance: the new path
    new_files = {r.item.path: r.ingest.chunks for r in report.results if r.ingest is not None}
    assert set(new_files) == {"bees.md", "bread.md"}
    assert embedded[0] == sum(new_files.values())  # only the added and the changed file were embedded
    assert len(wb.stored_files()) == 3  # the old bread.md and cats.md bytes left the file store


def test_dry_run_changes_nothing(wb, docs, tmp_path, monkeypatch, capsys, system):
    wb.syncs.folder("notes", docs).run()
    system.close()  # the CLI opens the DuckDB catalog now
    (docs / "cats.md").unlink()
    (docs / "bees.md").write_text(BEES)
    catalog = tmp_path / "data" / "catalog.duckdb"
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-64")
    code = main(["--data-dir", str(tmp_path / "data"), "sync", "notes", str(docs), "--dry-run", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["event"] == "plan"
    assert out["counts"] == {"added": 1, "changed": 0, "renamed": 0, "deleted": 1, "unchanged": 2}
    assert [(i["action"], i["path"]) for i in out["items"]] == [("added", "bees.md"), ("deleted", "cats.md")]
    code = main(["--data-dir", str(tmp_path / "data"), "sync", "notes", str(docs), "--dry-run"])
    text = capsys.readouterr().out
    assert code == 0 and "+ added    bees.md" in text and "- deleted  cats.md" in text
    assert "1 added, 0 changed, 0 renamed, 1 deleted, 2 unchanged" in text
    again = System(
        load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(dimension=64, max_tokens=48)
    )
    try:
        assert sorted(n.name for n in Workbench(again).file_names_of("notes")) == ["bread.md", "cats.md", "sub/owls.md"]
        assert again.catalog.synced_folders("notes")[0].last_plan["added"] == 3  # the last real sync's
    finally:
        again.close()
    assert catalog.exists()


def test_cli_sync_applies_reports_each_file_and_keeps_the_glob(tmp_path, docs, monkeypatch, capsys):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-64")
    data = str(tmp_path / "data")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.7\n garbage without objects")
    code = main(["--data-dir", data, "sync", "notes", str(docs), "--glob", "**/*.[mp][dd]*"])
    out = capsys.readouterr().out
    assert code == 1  # a file failed; the others went on
    assert "FAILED  broken.pdf" in out and "ok      cats.md" in out
    assert "Applied: 3 added" in out and "1 failed" in out
    (docs / "notes.txt").write_text(BEES)  # not matching the folder's glob, kept from the first run
    code = main(["--data-dir", data, "sync", "notes", str(docs), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["glob"] == "**/*.[mp][dd]*" and out["counts"]["added"] == 0
    code = main(["--data-dir", data, "files", "notes", "--json"])
    files = {f["name"] for f in json.loads(capsys.readouterr().out)}
    assert files == {"bread.md", "cats.md", "sub/owls.md", "broken.pdf"}


def test_a_changed_file_that_fails_keeps_its_last_good_version_until_its_path_goes(wb, tmp_path, system):
    folder = tmp_path / "reports"
    folder.mkdir()
    good = folder / "report.pdf"
    from tests.helpers.documents import encrypted_pdf

    good.write_bytes(encrypted_pdf("pw"))  # fails: needs a password
    sync = wb.syncs.folder("notes", folder)
    (folder / "owls.md").write_text(OWLS)
    report = sync.run()
    assert [r.item.path for r in report.failed] == ["report.pdf"]
    assert report.counts()["failed"] == 1 and report.counts()["added"] == 1
    assert system.catalog.synced_folders("notes")[0].last_plan["failed"] == 1
    assert sync.plan().changes == 0  # the failure is listed, not tried again on every sync
    good.unlink()
    sync.run()
    assert [n.name for n in wb.file_names_of("notes")] == ["owls.md"]
    assert [f.file_name for f in wb.store_files("notes")] == ["owls.md"]  # the failed record went with its path


# -- the two rules -----------------------------------------------------------------------------
def test_a_sync_never_deletes_or_replaces_a_file_uploaded_by_hand(wb, docs):
    hand = wb.ingest_file("notes", CATS.encode(), "cats.md")  # the same bytes, by hand
    other = wb.ingest_file("notes", b"# Notes\n\nMy own notes about the garden shed.\n", "bread.md")
    sync = wb.syncs.folder("notes", docs)
    report = sync.run()
    assert not report.failed
    assert names(wb) == [
        ("bread.md", False),
        ("bread.md", True),
        ("cats.md", False),
        ("cats.md", True),
        ("sub/owls.md", True),
    ]
    assert wb.file_record("notes", other.file_id) is not None  # a same-named file by hand was not replaced
    (docs / "cats.md").unlink()
    (docs / "bread.md").unlink()
    plan = sync.plan()
    assert plan.counts()["deleted"] == 2
    sync.apply(plan)
    assert names(wb) == [("bread.md", False), ("cats.md", False), ("sub/owls.md", True)]
    assert "cats.md" in hit_names(wb, "cat sits on the mat purrs")  # the hand upload stays searchable
    assert "bread.md" in hit_names(wb, "garden shed notes")
    assert wb.file_record("notes", hand.file_id) is not None


def test_the_same_content_at_two_paths_is_indexed_once_and_leaves_with_its_last_path(wb, docs, embedded):
    (docs / "sub" / "cats copy.md").write_text(CATS)
    sync = wb.syncs.folder("notes", docs)
    report = sync.run()
    outcomes = {r.item.path: r.ingest.outcome for r in report.results}
    assert outcomes["sub/cats copy.md"] == Outcome.DUPLICATE or outcomes["cats.md"] == Outcome.DUPLICATE
    [cats] = [f for f in wb.store_files("notes") if "cats.md" in f.names]
    assert set(cats.names) == {"cats.md", "sub/cats copy.md"}
    (docs / "cats.md").unlink()
    sync.run()
    assert hit_names(wb, "cat sits on the mat purrs") >= {"sub/cats copy.md"}
    (docs / "sub" / "cats copy.md").unlink()
    sync.run()
    assert not any("cat" in h.text.lower() for h in wb.search("notes", "cat sits on the mat purrs", k=10))
    assert wb.find_stored_file(cats.file_id) is None


def test_the_app_confines_the_folder_to_the_allowed_folders(wb, docs, tmp_path):
    from knowledge.access import LocalFolders
    from knowledge.errors import PathNotAllowed

    allowed = LocalFolders.of([docs], tmp_path / "data")
    with pytest.raises(PathNotAllowed):
        wb.syncs.folder("notes", tmp_path, folders=allowed)
    outside = tmp_path / "secret.md"
    outside.write_text("the secret recipe")
    (docs / "link.md").symlink_to(outside)
    plan = wb.syncs.folder("notes", docs, folders=allowed).plan()
    assert "link.md" not in [i.path for i in plan.items]
    assert plan.skipped.get("outside the allowed folders") == 1


# -- watch -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_watch_applies_changes_and_waits_for_a_file_still_being_written(wb, docs):
    sync = wb.syncs.folder("notes", docs)
    stop = threading.Event()
    reports, waiting, errors = [], [], []
    thread = threading.Thread(
        target=sync.watch,
        args=(stop,),
        daemon=True,
        kwargs={
            "debounce": 0.1,
            "settle": 0.5,
            "on_report": reports.append,
            "on_waiting": waiting.append,
            "on_error": errors.append,
        },
    )
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not reports and time.monotonic() < deadline:
            time.sleep(0.05)
        assert reports and reports[0].counts()["added"] == 3  # the first round syncs what is there
        growing = docs / "growing.md"
        with growing.open("w") as fh:  # written slowly: pauses past the debounce, within the settle time
            fh.write("# Growing\n\n")
            for i in range(12):
                fh.write(f"Line {i} about a lighthouse keeper and the stormy sea.\n")
                fh.flush()
                time.sleep(0.2)
                assert "growing.md" not in [n.name for n in wb.file_names_of("notes")]  # not while written
        while not any("growing.md" in [r.item.path for r in rep.results] for rep in reports) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any("growing.md" in [i.path for i in w] for w in waiting)  # seen, left for later
        [rec] = [f for f in wb.store_files("notes") if f.file_name == "growing.md"]
        import hashlib

        assert rec.sha256 == hashlib.sha256(growing.read_bytes()).hexdigest()  # the whole file, once
        (docs / "bread.md").unlink()
        while "bread.md" in [n.name for n in wb.file_names_of("notes")] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "bread.md" not in [n.name for n in wb.file_names_of("notes")]
        (docs / "broken.pdf").write_bytes(b"%PDF-1.7\n garbage")  # fails: reported, watching goes on
        (docs / "bees.md").write_text(BEES)

        def broken_reported():
            return any(r.item.path == "broken.pdf" and not r.ok for rep in reports for r in rep.results)

        while not broken_reported() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert broken_reported()
        assert "bees.md" in [n.name for n in wb.file_names_of("notes")]
        assert not errors
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()  # ends cleanly when asked


@pytest.mark.processes
@pytest.mark.slow
def test_cli_watch_applies_a_new_file_and_ends_cleanly_on_ctrl_c(tmp_path, docs):
    import signal
    import subprocess
    import sys

    env = {**os.environ, "KNOWLEDGE_EMBEDDINGS__MODEL": "fake/hash-64", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "knowledge",
            "--data-dir",
            str(tmp_path / "data"),
            "sync",
            "notes",
            str(docs),
            "--watch",
            "--debounce",
            "0.1",
            "--settle",
            "0.2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = []
        for line in proc.stdout:  # the first round: the three files there
            lines.append(line)
            if line.startswith("Applied:"):
                break
        assert "Applied: 3 added" in lines[-1]
        (docs / "bees.md").write_text(BEES)
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Applied:"):
                break
        assert any("ok      bees.md" in x for x in lines) and "Applied: 1 added" in lines[-1]
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)  # a hang guard, not a timing check
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate(timeout=30)
            raise AssertionError(f"the watch did not end within 120 s of Ctrl-C; its stderr:\n{err}") from None
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Stopped watching." in err and "Traceback" not in err


# -- every backend -----------------------------------------------------------------------------
def _settings(backend_name, tmp_path, request):
    if backend_name == "pgvector":
        s = request.getfixturevalue("pgvector_settings")()
        return s.model_copy(update={"vector_store": s.vector_store.model_copy(update={"backend": "pgvector"})})
    return load_settings(data_dir=tmp_path / "data", vector_store={"backend": backend_name})


@pytest.mark.slow
@pytest.mark.parametrize("backend_name", ["memory", "pgvector", "qdrant"])
def test_plan_and_apply_on_every_backend(backend_name, tmp_path, docs, embedded, request):
    w = make_wb(_settings(backend_name, tmp_path, request), embedded)
    try:
        sync = w.syncs.folder("notes", docs)
        assert sync.run().counts()["added"] == 3
        assert w.get_store("notes").backend == backend_name
        (docs / "sub" / "owls.md").rename(docs / "owls.md")
        (docs / "cats.md").unlink()
        embedded[0] = 0
        report = sync.run()
        assert report.counts() == {"added": 0, "changed": 0, "renamed": 1, "deleted": 1, "unchanged": 1, "failed": 0}
        assert embedded[0] == 0  # a rename embeds nothing
        assert "owls.md" in hit_names(w, "owls hunt mice at night")
        assert all(h.file_name != "cats.md" for h in w.search("notes", "cat sits on the mat", k=10))
        assert w.vector_store("notes").count() == sum(f.chunks for f in w.store_files("notes"))
    finally:
        w.close()


def test_cli_files_and_delete_file_by_either_name(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-64")
    data = str(tmp_path / "data")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "cats.md").write_text(CATS)
    (tmp_path / "copy of cats.md").write_text(CATS)
    assert main(["--data-dir", data, "ingest", "notes", str(tmp_path / "a" / "cats.md")]) == 0
    assert main(["--data-dir", data, "ingest", "notes", str(tmp_path / "copy of cats.md")]) == 0
    capsys.readouterr()
    main(["--data-dir", data, "files", "notes"])
    table = capsys.readouterr().out
    assert "also named (same content)" in table and "copy of cats.md" in table
    main(["--data-dir", data, "files", "notes", "--json"])
    [f] = json.loads(capsys.readouterr().out)
    assert (f["name"], f["aliases"]) == ("cats.md", ["copy of cats.md"])
    assert main(["--data-dir", data, "delete-file", "notes", "cats.md"]) == 0
    assert "its content stays, still named copy of cats.md (0 chunks removed)" in capsys.readouterr().out
    main(["--data-dir", data, "search", "notes", "cat sits on the mat", "--json"])
    assert {h["file_name"] for h in json.loads(capsys.readouterr().out)} == {"copy of cats.md"}
    assert main(["--data-dir", data, "delete-file", "notes", "copy of cats.md"]) == 0
    assert capsys.readouterr().out.startswith("Removed copy of cats.md (")
    main(["--data-dir", data, "files", "notes", "--json"])
    assert json.loads(capsys.readouterr().out) == []
