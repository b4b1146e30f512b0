"""Stores, ingestion and the re-ingestion rules, on the memory backend with the fake embedder."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import EmbeddingUnavailable, InvalidArgument, StoreNotFound
from knowledge.outcomes import Outcome
from knowledge.service.search import Playground, SearchRequest
from knowledge.service.stores import ModelMismatch
from knowledge.service.templates import make_template
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.documents import encrypted_pdf

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class Factory:
    """Records which models were asked for; the default model is a 64-d fake, "small" a 32-d one."""

    def __init__(self):
        self.calls: list[str] = []

    def __call__(self, model: str):
        self.calls.append(model)
        if model == "boom":
            raise EmbeddingUnavailable("no such model here")
        return HashEmbedder(dimension=32 if model == "small" else 64, max_tokens=48)


@pytest.fixture
def factory():
    return Factory()


@pytest.fixture
def system(tmp_path, factory):
    settings = load_settings(
        data_dir=tmp_path / "data",
        vector_store={"max_chunk_size_tokens": 40, "chunk_overlap_tokens": 8},
        ingest={"max_file_mb": 0.05},
    )
    s = System(settings, factory)
    yield s
    s.close()


def write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


CATS = "# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n"
BREAD = "# Bread\n\nKnead the dough for ten minutes, then let it rise.\n"


def test_ingest_and_search_with_provenance(system, wb, tmp_path):
    r = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    assert (r.outcome, r.ok) == (Outcome.INDEXED, True) and r.chunks >= 2
    wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
    hits = wb.search("notes", "what do cats eat fish", k=3)
    assert hits[0].file_name == "cats.md"
    assert hits[0].heading == "Cats > Food"
    assert "fish" in hits[0].text
    full = (tmp_path / "cats.md").read_text()
    # the span points into the extracted text; for Markdown it is the file's text
    assert hits[0].text in full
    rec = system.catalog.get_file("notes", r.file_id)
    assert (rec.status, rec.chunks) == ("done", r.chunks)
    assert wb.get_store("notes").dimension == 64


def test_same_file_again_is_a_no_op_with_a_notice(system, wb, tmp_path):
    p = write(tmp_path / "cats.md", CATS)
    first = wb.ingest_file("notes", p)
    again = wb.ingest_file("notes", p)
    assert again.outcome == Outcome.UNCHANGED and "unchanged" in again.message
    assert again.file_id == first.file_id
    assert wb.vector_store("notes").count() == first.chunks
    assert len(system.files.list()) == 1


def test_changed_file_under_the_same_name_replaces_the_old_chunks(system, wb, tmp_path):
    p = write(tmp_path / "cats.md", CATS)
    first = wb.ingest_file("notes", p)
    write(p, "# Cats\n\nCats now prefer lasagne over anything.\n")
    second = wb.ingest_file("notes", p)
    assert second.outcome == Outcome.INDEXED and second.replaced_file_id == first.file_id
    files = wb.store_files("notes")
    assert [(f.file_name, f.file_id) for f in files] == [("cats.md", second.file_id)]
    vs = wb.vector_store("notes")
    assert vs.count() == second.chunks
    assert all(h.file_id == second.file_id for h in wb.search("notes", "cat sits on the mat fish", k=10))
    assert system.files.find(first.file_id) is None  # the old bytes are gone from the file store


def test_identical_bytes_under_another_name_are_indexed_once_under_both_names(wb, tmp_path):
    a = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    b = wb.ingest_file("notes", write(tmp_path / "copy of cats.md", CATS))
    assert b.outcome == Outcome.DUPLICATE and "cats.md" in b.message and "one more name" in b.message
    assert b.file_id == a.file_id and b.chunks == a.chunks
    files = wb.store_files("notes")
    assert [(f.file_name, f.aliases) for f in files] == [("cats.md", ("copy of cats.md",))]
    assert [n.name for n in wb.file_names_of("notes", a.file_id)] == ["cats.md", "copy of cats.md"]
    assert wb.vector_store("notes").count() == a.chunks  # embedded once
    assert len(wb.stored_files()) == 1  # one copy of the bytes


def test_deleting_the_first_name_keeps_the_content_for_the_second(wb, tmp_path):
    """The rule of issue 18: the content goes only with its last name; the chunks carry the name left."""
    a = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("notes", write(tmp_path / "copy of cats.md", CATS))
    vectors = {p.id: p.vector.copy() for p in wb.vector_store("notes").collection.scroll(with_vectors=True)}
    assert wb.delete_name("notes", a.file_id, "cats.md") == 0
    hits = wb.search("notes", "cat sits on the mat", k=3)
    assert hits and {h.file_name for h in hits} == {"copy of cats.md"}  # relabelled, still searchable
    assert [(f.file_name, f.aliases) for f in wb.store_files("notes")] == [("copy of cats.md", ())]
    after = {p.id: p.vector for p in wb.vector_store("notes").collection.scroll(with_vectors=True)}
    assert after.keys() == vectors.keys()  # the same points, not re-embedded
    assert all(np.allclose(after[i], v, atol=1e-6) for i, v in vectors.items())
    assert wb.find_stored_file(a.file_id) is not None
    assert wb.delete_name("notes", a.file_id, "copy of cats.md") == a.chunks
    assert wb.search("notes", "cat sits on the mat", k=3) == []
    assert wb.store_files("notes") == [] and wb.find_stored_file(a.file_id) is None


def test_a_changed_file_under_one_name_leaves_the_other_name_on_the_old_content(wb, tmp_path):
    a = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("notes", write(tmp_path / "copy of cats.md", CATS))
    c = wb.ingest_file("notes", write(tmp_path / "copy of cats.md", BREAD))
    assert c.outcome == Outcome.INDEXED and c.file_id != a.file_id
    files = {f.file_name: f for f in wb.store_files("notes")}
    assert files["cats.md"].file_id == a.file_id and files["cats.md"].aliases == ()
    assert files["copy of cats.md"].file_id == c.file_id
    assert {h.file_name for h in wb.search("notes", "cat sits on the mat", k=10)} >= {"cats.md"}


def test_delete_file_removes_every_chunk_also_after_a_restart(system, wb, tmp_path, factory):
    a = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
    assert wb.delete_file("notes", a.file_id) == a.chunks
    system.close()
    restarted = System(wb.settings, factory)
    again = Workbench(restarted)
    try:
        assert [f.file_name for f in again.store_files("notes")] == ["bread.md"]
        assert all(h.file_name == "bread.md" for h in again.search("notes", "cat mat fish", k=10))
        assert restarted.files.find(a.file_id) is None
    finally:
        restarted.close()


def test_search_never_returns_two_hits_with_identical_text(wb, tmp_path):
    shared = "# Lighthouse\n\nShared paragraph about the harbour lighthouse.\n\n"
    wb.ingest_file("notes", write(tmp_path / "a.md", shared + "# Apples\n\n" + "Apples " * 60))
    wb.ingest_file("notes", write(tmp_path / "b.md", shared + "# Bananas\n\n" + "Bananas " * 60))
    raw = wb.vector_store("notes").search(wb.embedder().embed_query("harbour lighthouse"), k=2)
    assert raw[0].text == raw[1].text  # the store holds the same text twice, from two files
    hits = wb.search("notes", "harbour lighthouse", k=5)
    texts = [" ".join(h.text.split()).lower() for h in hits]
    assert len(texts) == len(set(texts))
    assert sum(1 for t in texts if "lighthouse" in t) == 1


def test_the_named_questions_a_caller_asks_instead_of_reaching_into_the_parts(wb, tmp_path):
    """index_text and search_result: what the tools and the search playground ask the workbench."""
    r = wb.index_text("notes", "memo-1", "The harbour lighthouse is painted red and white.", "memo.txt")
    assert (r.outcome, r.ok, r.name) == (Outcome.INDEXED, True, "memo.txt") and r.chunks == 1
    assert not wb.index_text("notes", "memo-2", "   ").ok  # blank: nothing to index
    result = wb.search_result("notes", SearchRequest("harbour lighthouse", 3, playground=Playground(top=10, timings=True)))
    assert [h.id for h in result.hits] == [h.id for h in wb.search("notes", "harbour lighthouse", 3)]
    assert result.hits[0].file_name == "memo.txt" and result.top and result.total_ms > 0  # measured
    assert result.distance == wb.get_store("notes").distance and result.vector.shape == (wb.embedder().dimension,)


def test_a_search_request_and_its_keywords_give_the_same_hits_and_not_both(wb):
    """Workbench.search takes a SearchRequest or the text with the common options as keywords (the
    same request); a request with options beside it is refused. A merged search's hits carry their
    store's distance (the chat needs it for its citations without asking the catalog per hit)."""
    wb.index_text("notes", "memo-1", "The harbour lighthouse is painted red and white.", "memo.txt")
    wb.index_text("notes", "memo-2", "Bread needs flour, water, salt and yeast.", "bread.txt")
    by_words = wb.search("notes", "harbour lighthouse", 1, mode="vector", max_per_file=1)
    by_request = wb.search("notes", SearchRequest("harbour lighthouse", 1, mode="vector", max_per_file=1))
    assert [h.id for h in by_words] == [h.id for h in by_request] and by_words[0].file_name == "memo.txt"
    with pytest.raises(InvalidArgument, match="SearchRequest"):
        wb.search("notes", SearchRequest("harbour lighthouse"), mode="vector")
    with pytest.raises(InvalidArgument, match="mode"):
        wb.search("notes", SearchRequest("harbour lighthouse", mode="sideways"))
    merged = wb.search_stores(["notes"], "harbour lighthouse", 2)
    assert merged.hits and {sh.distance for sh in merged.hits} == {wb.get_store("notes").distance}


def test_bad_files_are_reported_and_the_batch_goes_on(wb, tmp_path):
    empty = write(tmp_path / "empty.txt", "")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 8)
    big = write(tmp_path / "big.txt", "word " * 20_000)  # 100 kB > 0.05 MB
    good = write(tmp_path / "cats.md", CATS)
    results = wb.ingest_paths("notes", [empty, binary, big, tmp_path / "missing.md", good])
    outcomes = {r.name: (r.outcome, r.error) for r in results}
    assert outcomes["cats.md"][0] == Outcome.INDEXED
    assert outcomes["empty.txt"] == (Outcome.FAILED, "EmptyDocument")
    assert outcomes["blob.bin"] == (Outcome.FAILED, "UnsupportedFile")
    assert outcomes["big.txt"] == (Outcome.FAILED, "FileTooLarge")
    assert outcomes["missing.md"][0] == Outcome.FAILED
    assert all(r.message for r in results)
    failed = {f.file_name: f.reason for f in wb.store_files("notes") if f.status == "failed"}
    assert set(failed) == {"empty.txt", "blob.bin"} and all(failed.values())
    assert wb.vector_store("notes").count() == results[-1].chunks


def test_a_folder_with_a_glob(wb, tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    write(d / "cats.md", CATS)
    write(d / "sub" / "bread.md", BREAD)
    write(d / "notes.txt", "plain words")
    write(d / ".hidden.md", "# Hidden\n\nsecret")
    results = wb.ingest_paths("notes", [d], glob="**/*.md")
    assert sorted(r.name for r in results) == ["bread.md", "cats.md"]


def test_a_template_with_another_model_is_refused_before_embedding(wb, tmp_path, factory):
    wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.save_template(make_template(name="small", embedding_model="small"))
    with pytest.raises(ModelMismatch, match="Re-embed"):
        wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD), template="small")
    assert "small" not in factory.calls


def test_reembed_moves_a_store_to_another_model(wb, tmp_path):
    a = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
    before = wb.vector_store("notes").count()
    wb.save_template(make_template(name="small", embedding_model="small"))
    rec = wb.reembed("notes", "small")
    assert (rec.template, rec.embedding_model, rec.dimension) == ("small", "small", 32)
    vs = wb.vector_store("notes")
    assert vs.info().size == 32 and vs.count() == before
    hit = wb.search("notes", "cats eat fish", k=1)[0]
    assert (hit.file_id, hit.heading) == (a.file_id, "Cats > Food")
    assert len(wb.backend().list_collections()) == 1  # the old collection is gone


def test_cancelled_ingestion_leaves_the_store_as_it_was(system, wb, tmp_path):
    wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
    cancel = threading.Event()

    def progress(stage, fraction):
        if stage == "embedding":
            cancel.set()

    r = wb.ingest_file("notes", write(tmp_path / "cats.md", "Cats. " * 400), progress=progress, cancel=cancel)
    assert r.outcome == Outcome.CANCELLED
    assert [f.file_name for f in wb.vector_store("notes").list_files()] == ["bread.md"]
    assert system.files.find(r.file_id) is None  # the bytes this ingestion saved went with it


def test_a_cancelled_ingestion_of_a_stored_file_keeps_the_stored_file(system, wb, tmp_path):
    """The defect (found by a new-user trial): a worker that stopped mid-file -- a CLI ingest ending
    while the app's or the API's uploads were queued -- cancelled the file it had taken, gave the job
    back, and deleted the upload's bytes on the way; the worker that took the job next failed it with
    "No stored file has the id". A file handed in already stored is the caller's to keep."""
    stored = system.files.save("cats.md", "text/markdown", io.BytesIO(("Cats. " * 400).encode()))
    cancel = threading.Event()

    def progress(stage, fraction):
        if stage == "embedding":
            cancel.set()

    r = wb.ingest_file("notes", stored, progress=progress, cancel=cancel)
    assert r.outcome == Outcome.CANCELLED and wb.vector_store("notes").list_files() == []
    assert system.files.find(stored.id) is not None
    again = wb.ingest_file("notes", stored)  # the job given back, taken by another worker
    assert again.outcome == Outcome.INDEXED and again.file_id == stored.id


def test_stores_list_and_delete(system, wb, tmp_path):
    wb.ingest_file("Team Notes", write(tmp_path / "cats.md", CATS))
    [summary] = wb.list_stores()
    assert (summary.record.name, summary.files, summary.chunks > 0) == ("Team Notes", 1, True)
    wb.delete_store("Team Notes")
    assert wb.list_stores() == []
    assert system.files.list() == []
    with pytest.raises(StoreNotFound):
        wb.search("Team Notes", "cats")


# -- retry, the file store, templates in use, jobs (the app's needs) ------------------------------
def _encrypted_pdf(password: str) -> bytes:
    return encrypted_pdf(password, repeat=1)


def test_retry_a_failed_file_with_its_password_keeps_one_record(system, wb):
    failed = wb.ingest_file("notes", _encrypted_pdf("secret"), "locked.pdf")
    assert failed.outcome == Outcome.FAILED and "password required" in failed.message
    again = wb.retry_file("notes", failed.file_id, password="wrong")
    assert again.outcome == Outcome.FAILED and "wrong password" in again.message
    assert [(f.file_id, f.status) for f in wb.store_files("notes")] == [(again.file_id, "failed")]
    assert [u.labels() for u in wb.list_files()] == [["notes (failed)"]]  # kept for the retry, not searchable
    ok = wb.retry_file("notes", again.file_id, password="secret")
    assert ok.outcome == Outcome.INDEXED and ok.chunks >= 1
    assert ok.replaced_file_id is None and "Replaced" not in ok.message  # a failed attempt is no version
    assert [(f.file_name, f.status) for f in wb.store_files("notes")] == [("locked.pdf", "done")]
    assert [f.id for f in system.files.list()] == [ok.file_id]
    assert [u.labels() for u in wb.list_files()] == [["notes"]]


def test_retry_an_unknown_file_is_an_error(wb):
    from knowledge.errors import FileNotFoundInStore

    wb.create_store("notes")
    with pytest.raises(FileNotFoundInStore):
        wb.retry_file("notes", "file-" + "0" * 32)


def test_delete_stored_file_refuses_while_stores_use_it_unless_asked(system, wb, tmp_path):
    from knowledge.errors import InvalidArgument

    a = wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("other", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
    assert sorted((u.file.name, tuple(u.stores)) for u in wb.list_files()) == [
        ("bread.md", ("notes",)),
        ("cats.md", ("notes",)),
        ("cats.md", ("other",)),
    ]
    with pytest.raises(InvalidArgument, match="used by the store"):
        wb.delete_stored_file(a.file_id)
    assert system.files.find(a.file_id) is not None and wb.store_files("notes")[1].file_id == a.file_id
    assert wb.delete_stored_file(a.file_id, from_stores=True) == ["notes"]
    assert system.files.find(a.file_id) is None
    assert [f.file_name for f in wb.store_files("notes")] == ["bread.md"]
    assert all(h.file_name == "bread.md" for h in wb.search("notes", "cat mat fish", k=10))
    assert [f.file_name for f in wb.store_files("other")] == ["cats.md"]  # its own copy stays


def test_delete_an_unused_stored_file(system, wb):
    from knowledge.errors import FileNotFoundInStore

    f = system.files.save("loose.txt", "text/plain", b"hello")
    assert wb.delete_stored_file(f.id) == []
    assert wb.list_files() == []
    with pytest.raises(FileNotFoundInStore):
        wb.delete_stored_file(f.id)


def test_a_template_in_use_keeps_its_model_and_cannot_be_deleted(wb, tmp_path):
    from knowledge.errors import InvalidArgument

    wb.save_template(make_template(name="t", embedding_model=MODEL, max_chunk_size_tokens=40, chunk_overlap_tokens=8))
    wb.ingest_file("notes", write(tmp_path / "cats.md", CATS), template="t")
    assert wb.stores_using_template("t") == ["notes"]
    with pytest.raises(InvalidArgument, match="embedding_model cannot change"):
        wb.save_template(make_template(name="t", embedding_model="small"))
    wb.save_template(make_template(name="t", embedding_model=MODEL, description="chunking may change"))
    with pytest.raises(InvalidArgument, match="used by the store"):
        wb.delete_template("t")
    wb.delete_store("notes")
    wb.delete_template("t")
    assert wb.template_names() == ["default"]


def test_an_ingest_job_reports_each_file_and_can_be_stopped(system, wb, tmp_path):
    from knowledge.service.jobs import IngestJob

    job = wb.submit_batch(
        "notes", [("cats.md", CATS.encode()), ("empty.txt", b""), ("bread.md", write(tmp_path / "bread.md", BREAD))]
    )
    assert job.wait(30) and job.fraction == 1.0
    assert [r.outcome for r in job.results] == [Outcome.INDEXED, Outcome.FAILED, Outcome.INDEXED]
    assert all(f.stage == "done" for f in job.files)

    stopped = IngestJob(system.jobs, "notes", [("a.md", b"# A\n\n" + b"alpha words " * 400), ("b.md", b"# B\n\nbeta")])
    stopped.cancel()
    stopped.start()  # cancelled before it started (IngestJob.start checks no one: the service level)
    assert stopped.wait(30)
    assert [r.outcome for r in stopped.results] == [Outcome.CANCELLED, Outcome.CANCELLED]
    assert sorted(f.file_name for f in wb.store_files("notes") if f.status == "done") == ["bread.md", "cats.md"]
    # Any tab of the app finds the newest job of a store (the one that was started last).
    assert IngestJob.latest(system.jobs, "notes") is stopped and IngestJob.latest(system.jobs, "other") is None
    other = System(load_settings(data_dir=tmp_path / "elsewhere"), Factory())
    assert IngestJob.latest(other.jobs, "notes") is None  # another data folder, another app
    other.close()


def test_a_file_estimates_the_time_left_from_its_embedding_pace():
    from knowledge.service.jobs import FileProgress

    fp = FileProgress("big.txt")
    fp.update("reading", 0.0, now=100.0)
    fp.update("chunking", 0.1, now=101.0)
    fp.update("embedding", 0.2, now=102.0)
    assert fp.eta_seconds(now=102.5) is None  # nothing to go on yet
    fp.update("embedding", 0.4, now=112.0)  # 0.2 of the file in 10 s
    assert fp.eta_seconds(now=112.0) == pytest.approx(30.0)  # 0.6 left at 50 s per 1.0
    fp.update("writing", 0.97, now=140.0)
    assert fp.eta_seconds(now=140.0) is None


def test_an_ingest_job_from_a_folder(system, wb, tmp_path):
    from knowledge.errors import InvalidArgument
    from knowledge.service.jobs import IngestJob

    d = tmp_path / "docs"
    d.mkdir()
    write(d / "cats.md", CATS)
    write(d / "notes.txt", "plain words")
    job = wb.submit_folder("notes", d, "*.md")
    assert job.wait(30) and [r.name for r in job.results] == ["cats.md"]
    with pytest.raises(InvalidArgument, match="not a folder"):
        IngestJob.from_folder(system.jobs, "notes", tmp_path / "missing")
    with pytest.raises(InvalidArgument, match="No file"):
        IngestJob.from_folder(system.jobs, "notes", d, "*.pdf")


def test_a_failed_file_again_keeps_one_failed_record_and_a_done_version_stays(wb, tmp_path):
    wb.ingest_file("notes", b"", "empty.txt")
    wb.ingest_file("notes", b" ", "empty.txt")
    assert [(f.file_name, f.status) for f in wb.store_files("notes")] == [("empty.txt", "failed")]
    good = wb.ingest_file("notes", CATS.encode(), "cats.md")
    wb.ingest_file("notes", b"", "cats.md")  # a broken new version: the indexed one stays searchable
    assert sorted(f.status for f in wb.store_files("notes") if f.file_name == "cats.md") == ["done", "failed"]
    assert wb.vector_store("notes").count() == good.chunks


def test_a_long_embedding_does_not_block_other_writes_to_the_store(tmp_path):
    """The store's lock is held for decisions and the final write only, never while embedding."""
    release, embedding = threading.Event(), threading.Event()

    class Slow(HashEmbedder):
        def embed_documents(self, texts):
            if any("SLOW" in t for t in texts):
                embedding.set()
                assert release.wait(30)
            return super().embed_documents(texts)

    wb = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: Slow(64, 48))
    try:
        other = wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
        slow = threading.Thread(target=wb.ingest_file, args=("notes", write(tmp_path / "slow.md", "SLOW words " * 50)))
        slow.start()
        assert embedding.wait(30)
        done = threading.Event()
        threading.Thread(target=lambda: (wb.delete_file("notes", other.file_id), done.set())).start()
        assert done.wait(10), "delete_file waited for another file's embedding"
        release.set()
        slow.join(30)
        assert [f.file_name for f in wb.store_files("notes")] == ["slow.md"]
    finally:
        release.set()
        wb.close()


def test_max_per_file_returns_the_best_files(wb, tmp_path):
    wb.ingest_file("notes", write(tmp_path / "cats.md", CATS))
    wb.ingest_file("notes", write(tmp_path / "bread.md", BREAD))
    chunks = wb.search("notes", "cats eat fish and sit on the mat", k=3)
    assert [h.file_name for h in chunks[:2]] == ["cats.md", "cats.md"]
    files = wb.search("notes", "cats eat fish and sit on the mat", k=3, max_per_file=1)
    assert [h.file_name for h in files] == ["cats.md", "bread.md"]
    with pytest.raises(InvalidArgument):
        wb.search("notes", "cats", max_per_file=0)


def test_files_of_a_folder_sharing_a_name_are_both_kept_under_their_paths(system, wb, tmp_path):
    from knowledge.service.jobs import IngestJob

    root = tmp_path / "docs"
    (root / "a").mkdir(parents=True)
    (root / "b" / "c").mkdir(parents=True)
    write(root / "a" / "README.md", CATS)
    write(root / "b" / "c" / "README.md", BREAD)
    write(root / "b" / "notes.md", "# Notes\n\nSomething else entirely.\n")
    results = wb.ingest_paths("notes", [root])
    assert sorted(r.name for r in results) == ["a/README.md", "b/c/README.md", "notes.md"]
    assert all(r.outcome == Outcome.INDEXED for r in results)
    assert sorted(f.file_name for f in wb.store_files("notes")) == ["a/README.md", "b/c/README.md", "notes.md"]
    job = IngestJob.from_folder(system.jobs, "other", root, "**/README.md")
    assert [f.name for f in job.files] == ["a/README.md", "b/c/README.md"]


def test_an_interrupted_ingestion_leaves_a_failed_record_not_a_processing_one(wb, monkeypatch):
    from knowledge.embeddings.fake import HashEmbedder as Fake

    original, stop = Fake.embed_documents, [True]

    def interrupted(self, texts):
        if stop:
            raise KeyboardInterrupt
        return original(self, texts)

    monkeypatch.setattr(Fake, "embed_documents", interrupted)
    with pytest.raises(KeyboardInterrupt):
        wb.ingest_file("notes", CATS.encode(), "cats.md")
    [rec] = wb.store_files("notes")
    assert rec.status == "failed" and "interrupted" in rec.reason
    stop.clear()
    again = wb.ingest_file("notes", CATS.encode(), "cats.md")
    assert again.outcome == Outcome.INDEXED
    assert [(f.file_name, f.status) for f in wb.store_files("notes")] == [("cats.md", "done")]


def test_a_store_on_an_unknown_backend_is_refused_before_it_exists(tmp_path, monkeypatch):
    from knowledge.config import load_settings
    from knowledge.errors import BackendUnavailable
    from knowledge.workbench import Workbench

    monkeypatch.setenv("KNOWLEDGE_VECTOR_STORE__BACKEND", "nosuch")
    wb = Workbench(load_settings(data_dir=tmp_path), embedder_factory=lambda model: HashEmbedder(dimension=8))
    try:
        (tmp_path / "a.txt").write_text("some words")
        with pytest.raises(BackendUnavailable, match="nosuch"):
            wb.create_store("x")
        with pytest.raises(BackendUnavailable, match="nosuch"):  # the CLI: "error: ...", exit 2
            wb.ingest_paths("x", [tmp_path / "a.txt"])
        assert wb.store_names() == []  # no broken store left behind
    finally:
        wb.close()
