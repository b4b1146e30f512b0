"""Portable knowledge (knowledge/portable.py): export / import bundles on every backend pair, damaged
and newer bundles, name clashes, killed exports and imports, move between backends, backup and
restore of the whole data folder, and the CLI commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from knowledge import portable
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import BundleCorrupt, BundleTooNew, StoreExists, TargetNotEmpty
from knowledge.portable import exporting
from knowledge.service.templates import make_template
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.env import REPO, readme_questions

QUESTIONS = [
    "what do cats eat",
    "how do owls hunt at night",
    "lighthouse keeper counts seagulls",
    "rust borrow checker references",
    "where do penguins live",
]

DOCS = {
    "cats.md": "# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n",
    "owls.md": "# Owls\n\nOwls hunt at night with silent feathers.\n\n## Sight\n\nTheir eyes see in the dark.\n",
    "sea.txt": "The lighthouse keeper counts seagulls every morning. " * 12,
    "rust.md": "# Borrowing\n\nThe borrow checker rejects dangling references.\n\n" + "Lifetimes tie references. " * 20,
    "birds.md": "# Penguins\n\nPenguins live in the southern hemisphere and swim fast.\n",
}


class CountingEmbedder(HashEmbedder):
    """The fake embedder, counting the documents it embeds (to prove vectors were reused)."""

    embedded = 0

    def embed_documents(self, texts):
        CountingEmbedder.embedded += len(texts)
        return super().embed_documents(texts)


def _factory(model: str):
    return CountingEmbedder(dimension=32 if model == "fake-32" else 64, max_tokens=48)


def _settings(base, tmp: Path, name: str = "data"):
    """``base`` (pgvector on this test's database) rooted at ``tmp/name``, Qdrant in local mode on disk."""
    from knowledge.config import load_settings

    s = load_settings(data_dir=tmp / name)
    vs = base.vector_store.model_copy(update={"backend": "memory", "qdrant_location": str(tmp / name / "qdrant")})
    return s.model_copy(update={"vector_store": vs})


def _workbench(settings) -> Workbench:
    """A workbench with a system of its own (closed with it) and the test templates."""
    return _with_templates(Workbench(settings, embedder_factory=_factory))


def _with_templates(wb: Workbench) -> Workbench:
    for name, backend, model in (
        ("mem", "memory", "fake"),
        ("pg", "pgvector", "fake"),
        ("qd", "qdrant", "fake"),
        ("small", "memory", "fake-32"),
    ):
        if name not in wb.template_names():
            wb.save_template(
                make_template(
                    name=name, backend=backend, embedding_model=model, max_chunk_size_tokens=24, chunk_overlap_tokens=4
                )
            )
    return wb


@pytest.fixture
def make_system(pgvector_settings, tmp_path):
    """``make(name="data") -> System`` on a data folder of its own (pgvector: this test's database),
    with the test templates; closed after the test."""
    made = []

    def make(name: str = "data") -> System:
        system = System(_settings(pgvector_settings(), tmp_path, name), embedder_factory=_factory)
        made.append(system)
        _with_templates(Workbench(system))
        return system

    yield make
    for system in made:
        system.close()


@pytest.fixture
def make_wb(make_system):
    """``make(name="data") -> Workbench`` over :func:`make_system`'s system of that folder."""
    return lambda name="data": Workbench(make_system(name))


def _fill(wb: Workbench, store: str = "notes", template: str = "mem", tmp: Path | None = None) -> None:
    wb.create_store(store, template)
    for name, text in DOCS.items():
        r = wb.ingest_file(store, text.encode(), name)
        assert r.ok, r.message
    wb.set_file_attributes(store, wb.file_records(store)[0].file_id, {"team": "blue"})
    bad = wb.ingest_file(store, b"\x00\x01not a pdf", "broken.pdf")  # a failed file travels too
    assert not bad.ok


def _files(wb: Workbench, store: str) -> list[tuple]:
    return sorted((f.file_name, f.sha256, f.size, str(f.status), f.chunks, f.pages, f.error) for f in wb.file_records(store))


def _chunks(wb: Workbench, store: str, vectors: bool = True) -> dict[tuple, tuple]:
    """``(file name, chunk index) -> (payload without file_id, vector)`` of every chunk."""
    coll = wb.vector_store(store).collection
    out = {}
    for p in coll.scroll(with_vectors=vectors):
        payload = {k: v for k, v in p.payload.items() if k != "file_id"}
        out[(p.payload["file_name"], p.payload["chunk_index"])] = (payload, p.vector)
    return out


def _top5(wb: Workbench, store: str) -> list[list[tuple]]:
    """The top 5 of each question by vector similarity, as ``(score, file, text)`` (chunks of equal
    text are one hit, whichever of them); the fake embedder scores unrelated chunks 0.0, a tie
    each backend breaks its own way: left out."""
    out = []
    for q in QUESTIONS:
        hits = [
            (round(h.score, 4), h.file_name, h.text)  # chunks, unmerged: tied neighbours merge either way
            for h in wb.search(store, q, k=5, mode="vector", merge=False)
        ]
        out.append(sorted((h for h in hits if h[0] > 0.001), key=lambda h: (-h[0], h[1], h[2])))
    assert sum(map(len, out)) >= len(QUESTIONS)
    return out


def _same_store(a: Workbench, sa: str, b: Workbench, sb: str) -> None:
    assert _files(a, sa) == _files(b, sb)
    ca, cb = _chunks(a, sa), _chunks(b, sb)
    assert ca.keys() == cb.keys() and len(ca) > 5
    for key, (payload, vec) in ca.items():
        assert cb[key][0] == payload
        np.testing.assert_allclose(cb[key][1], vec, atol=1e-6)
    assert _top5(a, sa) == _top5(b, sb)
    # the stored bytes came along, under the new file ids
    for f in b.file_records(sb):
        with b.read_file(f.file_id) as fh:
            assert len(fh.read()) == f.size


# -- round trips -----------------------------------------------------------------------------------


def test_round_trip_memory_pgvector_qdrant_memory(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb)
    steps = [
        ("notes", "notes-pg", "pg", "pgvector"),
        ("notes-pg", "notes-qd", "qd", "qdrant"),
        ("notes-qd", "notes-back", "mem", "memory"),
    ]
    CountingEmbedder.embedded = 0
    for source, target, template, backend in steps:
        bundle = tmp_path / f"{source}.kb"
        exported = wb.portable.export_store(source, bundle)
        assert exported.files == len(DOCS) + 1 and exported.chunks == len(_chunks(wb, source))
        result = wb.portable.import_bundle(bundle, as_name=target, template=template)
        assert result.reused_vectors and result.backend == backend
        assert wb.get_store(target).backend == backend
        _same_store(wb, source, wb, target)
    assert CountingEmbedder.embedded == 0  # every vector travelled; none was computed again
    assert wb.file_attributes(
        "notes-back",
        next(f.file_id for f in wb.file_records("notes-back") if f.file_name == wb.file_records("notes")[0].file_name),
    ) == {"team": "blue"}
    # another data folder (another machine) gets the same store from the last bundle
    other = make_wb("elsewhere")
    other.portable.import_bundle(tmp_path / "notes-qd.kb", as_name="notes")
    _same_store(wb, "notes", other, "notes")
    # hybrid ranking too (BM25 rebuilt on the target), above the fake embedder's ties
    assert [h.text for h in wb.search("notes", "cats fish")][:3] == [h.text for h in other.search("notes", "cats fish")][:3]


def test_bundle_holds_float32_vectors_and_a_checksum_per_member(make_wb, tmp_path, monkeypatch):
    monkeypatch.setattr(exporting, "BLOCK", 4)
    wb = make_wb()
    _fill(wb)
    r = wb.portable.export_store("notes", tmp_path / "n.kb")
    with zipfile.ZipFile(r.path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
        vec = np.load(zf.open(manifest["blocks"][0]["vectors"]))
    assert manifest["format_version"] == portable.FORMAT_VERSION
    assert manifest["store"]["dimension"] == 64 and manifest["store"]["embedding_model"] == "fake"
    assert "backend" not in manifest["store"]["template"]
    assert len(manifest["blocks"]) == -(-r.chunks // 4)  # blocks of at most BLOCK chunks
    assert vec.dtype == np.dtype("<f4") and vec.shape == (4, 64)
    assert set(manifest["members"]) | {"manifest.json"} == names
    assert {e["status"] for e in manifest["files"]} == {"done", "failed"}
    assert sum(b["count"] for b in manifest["blocks"]) == r.chunks == manifest["chunks"]


def test_import_with_another_model_reembeds_and_says_so(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb)
    wb.portable.export_store("notes", tmp_path / "n.kb")
    stages = []
    CountingEmbedder.embedded = 0
    r = wb.portable.import_bundle(
        tmp_path / "n.kb", as_name="small-notes", template="small", progress=lambda stage, f: stages.append((stage, f))
    )
    assert not r.reused_vectors and r.reembedded_from == "fake" and "re-embedded" in r.message
    assert CountingEmbedder.embedded == r.chunks == len(_chunks(wb, "notes"))
    assert any(s.startswith("embedding") for s, _ in stages)
    assert [f for _, f in stages] == sorted(f for _, f in stages) and stages[-1] == ("done", 1.0)
    assert wb.get_store("small-notes").dimension == 32
    assert wb.search("small-notes", "cats eat fish", k=1, mode="vector")[0].file_name == "cats.md"


# -- bad bundles: nothing imported, nothing left behind --------------------------------------------


def _nothing_left(wb: Workbench, stores_before: list[str], files_before: int) -> None:
    assert wb.store_names(internal=True) == stores_before
    assert not [c for c in wb.backend("memory").list_collections() if "~import-" in c]
    assert len(wb.stored_files()) == files_before


def _rewrite(src: Path, dst: Path, change) -> None:
    """Copy the zip ``src`` to ``dst`` passing each member's bytes through ``change(name, data)``
    (``None``: leave the member out)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def test_truncated_tampered_and_incomplete_bundles_are_rejected(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb)
    good = wb.portable.export_store("notes", tmp_path / "n.kb").path
    stores, files = wb.store_names(internal=True), len(wb.stored_files())
    data = good.read_bytes()
    (tmp_path / "half.kb").write_bytes(data[: len(data) // 2])

    def flip(name, d):  # one byte of a chunk's text changed, size kept
        return d.replace(b"purrs", b"purrz") if name.endswith(".jsonl") else d

    def flip_vector(name, d):
        return d[:-4] + b"\x00\x00\x80\x3f" if name.endswith(".npy") else d

    def flip_file(name, d):
        return d.replace(b"Owls", b"Owlz") if name.startswith("files/") else d

    _rewrite(good, tmp_path / "text.kb", flip)
    _rewrite(good, tmp_path / "vector.kb", flip_vector)
    _rewrite(good, tmp_path / "file.kb", flip_file)
    _rewrite(good, tmp_path / "missing.kb", lambda n, d: None if n.endswith("000000.npy") else d)
    for bad, words in (
        ("half.kb", "truncated"),
        ("text.kb", "checksum"),
        ("vector.kb", "checksum"),
        ("file.kb", "checksum"),
        ("missing.kb", "misses"),
    ):
        with pytest.raises(BundleCorrupt, match=words):
            wb.portable.import_bundle(tmp_path / bad, as_name="copy")
        _nothing_left(wb, stores, files)


def test_a_bundle_from_a_newer_format_is_refused(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb)
    good = wb.portable.export_store("notes", tmp_path / "n.kb").path

    def newer(name, d):
        if name != "manifest.json":
            return d
        m = json.loads(d)
        m["format_version"] = portable.FORMAT_VERSION + 1
        return json.dumps(m)

    _rewrite(good, tmp_path / "new.kb", newer)
    with pytest.raises(BundleTooNew, match="version 2; this program reads versions up to 1"):
        wb.portable.import_bundle(tmp_path / "new.kb", as_name="copy")
    assert not wb.store_exists("copy")

    def no_store(name, d):  # a hand-edited manifest: a reason, not a traceback
        return json.dumps({**json.loads(d), "store": None}) if name == "manifest.json" else d

    _rewrite(good, tmp_path / "edited.kb", no_store)
    with pytest.raises(BundleCorrupt, match="manifest lacks the store"):
        wb.portable.import_bundle(tmp_path / "edited.kb", as_name="copy")
    assert not wb.store_exists("copy")


def test_a_name_clash_is_refused_and_as_name_imports_beside_it(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb)
    bundle = wb.portable.export_store("notes", tmp_path / "n.kb").path
    before = _chunks(wb, "notes")
    with pytest.raises(StoreExists, match="--as NAME"):
        wb.portable.import_bundle(bundle)
    assert _chunks(wb, "notes").keys() == before.keys()
    assert wb.portable.import_bundle(bundle, as_name="notes 2").store == "notes 2"
    _same_store(wb, "notes", wb, "notes 2")


# -- killed processes ------------------------------------------------------------------------------

_KILLER = textwrap.dedent("""
    import os, signal, sys
    sys.path[:0] = {paths!r}
    from tests.features.test_portable import _factory
    from knowledge.config import load_settings
    from knowledge.portable import exporting
    from knowledge.workbench import Workbench
    exporting.BLOCK = 3
    wb = Workbench(load_settings(data_dir={data!r}), embedder_factory=_factory)
    def progress(stage, fraction):
        if stage == {stage!r} and fraction > 0.5:
            os.kill(os.getpid(), signal.SIGKILL)
    wb.portable.{call}
""")


def _run_killed(data: Path, stage: str, call: str) -> None:
    code = _KILLER.format(paths=[str(REPO)], data=str(data), stage=stage, call=call)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120, check=False)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]


@pytest.mark.processes
@pytest.mark.slow
def test_an_export_killed_halfway_leaves_a_part_file_that_import_rejects(tmp_path):
    from knowledge.config import load_settings

    data = tmp_path / "data"
    wb = _workbench(load_settings(data_dir=data))
    _fill(wb)
    wb.close()
    out = tmp_path / "n.kb"
    _run_killed(data, "chunks", f"export_store('notes', {str(out)!r}, progress=progress)")
    part = out.with_name("n.kb.part")
    assert not out.exists() and part.stat().st_size > 0
    wb = _workbench(load_settings(data_dir=data))
    try:
        with pytest.raises(BundleCorrupt, match="truncated"):
            wb.portable.import_bundle(part, as_name="copy")
        assert not wb.store_exists("copy")
    finally:
        wb.close()


@pytest.mark.processes
@pytest.mark.slow
def test_an_import_killed_midway_leaves_no_store_and_its_leftovers_are_swept(tmp_path):
    from knowledge.config import load_settings

    data = tmp_path / "data"
    wb = _workbench(load_settings(data_dir=data))
    _fill(wb)
    bundle = wb.portable.export_store("notes", tmp_path / "n.kb").path
    files_before = {f.id for f in wb.stored_files()}
    wb.close()
    _run_killed(data, "copying", f"import_bundle({str(bundle)!r}, as_name='copy', progress=progress)")
    wb = _workbench(load_settings(data_dir=data))
    try:
        assert not wb.store_exists("copy") and wb.store_names() == ["notes"]
        left = [c for c in wb.backend("memory").list_collections() if "~import-" in c]
        assert len(left) == 1 and wb.backend("memory").collection(left[0]).count() > 0  # killed midway
        orphans = {f.id for f in wb.stored_files()} - files_before
        assert orphans and all(f.metadata.get(portable.IMPORT_MARK) for f in wb.stored_files() if f.id in orphans)
        assert wb.portable.sweep_leftovers() == (1, len(orphans))
        assert not [c for c in wb.backend("memory").list_collections() if "~import-" in c]
        assert {f.id for f in wb.stored_files()} == files_before
        assert wb.portable.import_bundle(bundle, as_name="copy").chunks == len(_chunks(wb, "notes"))
        _same_store(wb, "notes", wb, "copy")
    finally:
        wb.close()


# -- move ------------------------------------------------------------------------------------------


def test_move_between_backends_keeps_name_files_chunks_and_vectors(make_wb):
    wb = make_wb()
    _fill(wb)
    before_files, before_chunks, before_top = _files(wb, "notes"), _chunks(wb, "notes"), _top5(wb, "notes")
    old_collection = wb.vector_store("notes").collection
    CountingEmbedder.embedded = 0
    for template, backend in (("pg", "pgvector"), ("qd", "qdrant"), ("mem", "memory")):
        rec = wb.portable.move_store("notes", template)
        assert rec.name == "notes" and rec.backend == backend and rec.template == template
        assert _files(wb, "notes") == before_files
        after = _chunks(wb, "notes")
        assert after.keys() == before_chunks.keys()
        for key, (payload, vec) in before_chunks.items():
            assert after[key][0] == payload
            np.testing.assert_allclose(after[key][1], vec, atol=1e-6)
        assert _top5(wb, "notes") == before_top
    assert CountingEmbedder.embedded == 0  # moved, not re-embedded
    assert not old_collection.collection_exists()  # the first collection went once the move was complete
    assert wb.search("notes", "penguins southern", k=1)[0].file_name == "birds.md"


def test_a_move_to_an_unreachable_backend_leaves_the_store_as_it_was(make_wb):
    wb = make_wb()
    _fill(wb)
    before = _chunks(wb, "notes", vectors=False)
    wb.save_template(make_template(name="nowhere", backend="no-such-backend", embedding_model="fake"))
    with pytest.raises(Exception, match="no-such-backend"):
        wb.portable.move_store("notes", "nowhere")
    assert wb.get_store("notes").backend == "memory"
    assert _chunks(wb, "notes", vectors=False).keys() == before.keys()


# -- backup and restore ----------------------------------------------------------------------------


def test_backup_and_restore_into_an_empty_folder_searches_the_same(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb, "notes", "mem")
    _fill(wb, "pg-notes", "pg")
    _fill(wb, "qd-notes", "qd")
    tops = {s: _top5(wb, s) for s in ("notes", "pg-notes", "qd-notes")}
    files = {s: _files(wb, s) for s in tops}
    r = wb.portable.backup(tmp_path / "all.kbackup")
    assert r.bundled == ["pg-notes", "qd-notes"] and r.copied == ["notes"] and r.files == len(wb.stored_files())
    with zipfile.ZipFile(r.path) as zf:
        assert "catalog.duckdb" in zf.namelist()
    restored = _settings_of(wb, tmp_path / "restored")
    with pytest.raises(TargetNotEmpty):
        portable.restore(wb.settings, r.path)
    unpacked = portable.restore(restored, r.path)
    assert unpacked.imported == [] and [b.store for b in unpacked.bundles] == ["pg-notes", "qd-notes"]
    wb2 = _workbench(restored)
    try:
        rr = wb2.portable.import_restored(unpacked)
        assert rr.failed == {} and rr.imported == ["pg-notes", "qd-notes"] and rr.bundles == ()
        assert not any(b.path.parent.exists() for b in unpacked.bundles)  # the bundles' folder is gone
        assert wb2.store_names() == sorted(tops, key=str.lower)
        for s, top in tops.items():
            assert _top5(wb2, s) == top
            assert _files(wb2, s) == files[s]
            for f in wb2.file_records(s):  # the bytes came back too (a failed file's, for a retry)
                with wb2.read_file(f.file_id) as fh:
                    assert len(fh.read()) == f.size
            assert [h.text for h in wb2.search(s, "cats fish")][:3] == [h.text for h in wb.search(s, "cats fish")][:3]
        assert {t.name for t in wb2.list_templates()} >= {"mem", "pg", "qd", "small"}
    finally:
        wb2.close()


def test_a_backup_after_a_restart_on_the_same_folder(tmp_path, monkeypatch):
    """A process that opens an existing data folder (a restart) ingests, then backs up. The catalog's first
    look at its schema version used to leave a DuckDB transaction open, and every ``CHECKPOINT`` after a
    write -- the backup's copy of the catalog -- was refused until the connection closed."""
    import knowledge.catalog.db
    from knowledge.config import load_settings

    monkeypatch.setattr(knowledge.catalog.db, "CHECKPOINT_WAIT", 0.5)
    settings = load_settings(data_dir=tmp_path / "data")
    first = _workbench(settings)
    try:
        assert first.ingest_file("notes", b"Cats sit on mats.", "cats.md").ok
    finally:
        first.close()
    again = _workbench(settings)
    try:
        assert again.ingest_file("notes", b"Owls hunt at night.", "owls.md").ok
        result = again.portable.backup(tmp_path / "all.kbackup")
    finally:
        again.close()
    assert (result.copied, result.files) == (["notes"], 2)


def test_a_backup_taken_while_files_are_ingested_restores_a_consistent_folder(tmp_path):
    """The catalog is copied first (CHECKPOINT under its lock), the file bytes and the stores after:
    every file the restored catalog calls done has its bytes and all its chunks."""
    import threading

    from knowledge.config import load_settings

    wb = _workbench(load_settings(data_dir=tmp_path / "a"))
    _fill(wb)
    stop = threading.Event()
    written: list[str] = []

    def ingest() -> None:
        i = 0
        while not stop.is_set():
            name = f"busy-{i}.md"
            assert wb.ingest_file("busy", f"# Note {i}\n\nThe tide turned at {i} o'clock.\n".encode() * 8, name).ok
            written.append(name)
            i += 1

    writer = threading.Thread(target=ingest)
    writer.start()
    try:
        while len(written) < 3:
            threading.Event().wait(0.01)
        backups = [wb.portable.backup(tmp_path / f"b{i}.zip") for i in range(3)]
    finally:
        stop.set()
        writer.join()
    for i, b in enumerate(backups):
        settings = load_settings(data_dir=tmp_path / f"r{i}")
        portable.restore(settings, b.path)
        restored = _workbench(settings)
        try:
            records = [f for f in restored.file_records("busy") if f.status == "done"]
            assert records
            coll = restored.vector_store("busy").collection
            for f in records:
                assert coll.count({"file_id": f.file_id}) == f.chunks > 0
                with restored.read_file(f.file_id) as fh:
                    assert len(fh.read()) == f.size
            assert _top5(restored, "notes") == _top5(wb, "notes")
        finally:
            restored.close()
    wb.close()


def _settings_of(wb: Workbench, root: Path):
    vs = wb.settings.vector_store.model_copy(update={"qdrant_location": str(root / "qdrant")})
    from knowledge.config import load_settings

    return load_settings(data_dir=root).model_copy(update={"vector_store": vs})


def test_a_damaged_backup_writes_nothing_and_force_replaces_a_folder(tmp_path):
    from knowledge.config import load_settings

    wb = _workbench(load_settings(data_dir=tmp_path / "a"))
    _fill(wb)
    r = wb.portable.backup(tmp_path / "b.zip")
    other = _workbench(load_settings(data_dir=tmp_path / "b"))
    other.ingest_file("other", b"something else entirely", "x.txt")
    other.close()
    _rewrite(r.path, tmp_path / "bad.zip", lambda n, d: d[:-1] + bytes([d[-1] ^ 1]) if n.startswith("files/blobs/") else d)
    with pytest.raises(BundleCorrupt, match="checksum"):
        portable.restore(load_settings(data_dir=tmp_path / "c"), tmp_path / "bad.zip")
    assert not (tmp_path / "c" / "catalog.duckdb").exists()
    portable.restore(load_settings(data_dir=tmp_path / "b"), r.path, force=True)
    wb2 = _workbench(load_settings(data_dir=tmp_path / "b"))
    try:
        assert wb2.store_names() == ["notes"] and _top5(wb2, "notes") == _top5(wb, "notes")
    finally:
        wb2.close()
        wb.close()


# -- the command line --------------------------------------------------------------------------------


def test_cli_export_import_move_backup_restore(tmp_path, capsys, monkeypatch):
    from knowledge.cli import main

    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-64")
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert main(["--data-dir", a, "ingest", "notes", str(docs)]) == 0
    capsys.readouterr()
    assert main(["--data-dir", a, "export", "notes", str(tmp_path / "n.kb"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == len(DOCS) and out["chunks"] > len(DOCS) and out["bytes"] > 0
    assert main(["--data-dir", a, "import", str(tmp_path / "n.kb")]) == 2
    assert "--as NAME" in capsys.readouterr().err
    assert main(["--data-dir", a, "import", str(tmp_path / "n.kb"), "--as", "copy", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["store"] == "copy" and got["reused_vectors"] and got["chunks"] == out["chunks"]
    assert main(["--data-dir", a, "move", "copy", "--template", "default"]) == 0
    assert "vectors copied" in capsys.readouterr().out
    (tmp_path / "junk.kb").write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["--data-dir", a, "import", str(tmp_path / "junk.kb")]) == 2
    assert "not a complete bundle" in capsys.readouterr().err
    assert main(["--data-dir", a, "backup", str(tmp_path / "all.zip"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == len(DOCS) * 2
    assert main(["--data-dir", b, "restore", str(tmp_path / "all.zip")]) == 0
    assert main(["--data-dir", b, "restore", str(tmp_path / "all.zip")]) == 2
    assert "--force" in capsys.readouterr().err
    assert main(["--data-dir", b, "search", "copy", "cats eat fish", "--json", "-k", "1"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["file_name"] == "cats.md"


# -- real documents ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_round_trip_of_real_chapters_with_the_real_model(corpus, make_wb, tmp_path):
    """Rust-book chapters embedded with the bundled model, carried memory -> pgvector -> qdrant ->
    memory: the same top 5 for the corpus README's questions (hybrid ranking) at every step."""
    from knowledge.config import load_settings

    wb = Workbench(
        load_settings(data_dir=tmp_path / "real").model_copy(update={"vector_store": make_wb().settings.vector_store})
    )
    try:
        for name, backend in (("pg", "pgvector"), ("qd", "qdrant"), ("mem", "memory")):
            wb.save_template(
                make_template(name=name, backend=backend, embedding_model=wb.template("default").embedding_model)
            )
        wanted = {c for _, chapters in readme_questions() for c in chapters}
        paths = [p for p in sorted((corpus / "md" / "rust-book").glob("*.md")) if p.name in wanted]
        assert len(paths) >= 8
        assert all(r.ok for r in wb.ingest_paths("book", paths))
        questions = [q for q, _ in readme_questions()]

        def top(store):
            return [[(h.file_name, h.chunk_index) for h in wb.search(store, q, k=5, mode="vector")] for q in questions]

        expected = top("book")
        source = "book"
        for target, template in (("book-pg", "pg"), ("book-qd", "qd"), ("book-mem", "mem")):
            wb.portable.export_store(source, tmp_path / f"{source}.kb")
            assert wb.portable.import_bundle(tmp_path / f"{source}.kb", as_name=target, template=template).reused_vectors
            assert top(target) == expected
            source = target
    finally:
        wb.close()


def test_the_bundles_template_comes_along_on_the_default_backend_only_when_the_import_succeeds(make_wb, tmp_path):
    from knowledge.config import load_settings

    wb = make_wb()
    _fill(wb, "notes", "qd")
    bundle = wb.portable.export_store("notes", tmp_path / "n.kb").path
    data = bundle.read_bytes()
    (tmp_path / "half.kb").write_bytes(data[:-200])
    _rewrite(bundle, tmp_path / "bad.kb", lambda n, d: d.replace(b"purrs", b"purrz") if n.endswith(".jsonl") else d)
    fresh = Workbench(load_settings(data_dir=tmp_path / "fresh"), embedder_factory=_factory)
    try:
        for bad in ("half.kb", "bad.kb"):
            with pytest.raises(BundleCorrupt):
                fresh.portable.import_bundle(tmp_path / bad)
            assert "qd" not in fresh.template_names()
        r = fresh.portable.import_bundle(bundle)
        assert (r.template, r.backend) == ("qd", "memory")  # the bundle's template, on this folder's backend
        tpl = fresh.template("qd")
        assert (tpl.embedding_model, tpl.max_chunk_size_tokens, tpl.chunk_overlap_tokens) == ("fake", 24, 4)
        _same_store(wb, "notes", fresh, "notes")
    finally:
        fresh.close()


def test_a_content_with_two_names_keeps_both_through_a_bundle(make_system, tmp_path):
    system = make_system()
    wb = Workbench(system)
    _fill(wb)
    r = wb.ingest_file("notes", DOCS["cats.md"].encode(), "cats-copy.md")  # same bytes, a second name
    [cats] = [f for f in wb.file_records("notes") if f.file_name == "cats.md"]
    assert cats.aliases == ("cats-copy.md",), r.message
    wb.portable.export_store("notes", tmp_path / "n.kb")
    wb.portable.import_bundle(tmp_path / "n.kb", as_name="copy", template="pg")
    [copied] = [f for f in wb.file_records("copy") if f.file_name == "cats.md"]
    assert copied.names == ("cats.md", "cats-copy.md")
    assert [f.file_id for f in system.catalog.files_named("copy", "cats-copy.md")] == [copied.file_id]
    _same_store(wb, "notes", wb, "copy")


@pytest.mark.slow
def test_a_stores_own_settings_travel_in_its_bundle_and_bad_ones_are_refused(make_wb, tmp_path):
    wb = make_wb()
    _fill(wb)
    wb.set_store_settings("notes", description="Cats, owls and their habits.", score_threshold=0.42)
    good = wb.portable.export_store("notes", tmp_path / "n.kb").path
    wb.portable.import_bundle(good, as_name="copy")
    own = wb.store_settings("copy")
    assert (own.description, own.score_threshold) == ("Cats, owls and their habits.", 0.42)

    def manifest(change):
        def edit(name, data):
            if name != "manifest.json":
                return data
            m = json.loads(data)
            change(m["store"])
            return json.dumps(m).encode()

        return edit

    def older(store):  # a bundle made before stores had settings
        del store["settings"]

    def control(store):
        store["settings"]["description"] = "bad\x07bell"

    def wordy(store):
        store["settings"]["score_threshold"] = "high"

    _rewrite(good, tmp_path / "old.kb", manifest(older))
    wb.portable.import_bundle(tmp_path / "old.kb", as_name="old")
    own = wb.store_settings("old")
    assert (own.description, own.score_threshold) == ("", None)
    stores, files = wb.store_names(internal=True), len(wb.stored_files())
    collections = sorted(wb.backend("memory").list_collections())
    for name, change in (("control.kb", control), ("wordy.kb", wordy)):
        _rewrite(good, tmp_path / name, manifest(change))
        with pytest.raises(BundleCorrupt, match="settings"):
            wb.portable.import_bundle(tmp_path / name, as_name="bad")
        assert wb.store_names(internal=True) == stores and len(wb.stored_files()) == files
        assert sorted(wb.backend("memory").list_collections()) == collections
