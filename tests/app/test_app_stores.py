"""The Vector stores page, headless (streamlit.testing.v1.AppTest).

Most tests use the fake embedder (the ``fake_model`` fixture sets ``embeddings.model`` to
``fake/hash-8``, as a user would); the ones marked ``model`` run the real bundled model.
"""

from __future__ import annotations

import html

import pytest
from streamlit.testing.v1 import AppTest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.service.indexing import Indexer
from knowledge.service.templates import make_template
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.app import button, fresh_caches, open_app, use_fake_model
from tests.helpers.documents import encrypted_pdf
from tests.helpers.stores_page import (
    allow,
    files_table,
    finish_job,
    ingest_folder,
    make_store,
    markdown,
    open_page,
    open_tab,
    pick_file,
    service,
    table,
)

CATS = b"# Cats\n\nThe cat sits on the mat and purrs.\n\n## Food\n\nCats eat fish and chicken every day.\n"
BREAD = b"# Bread\n\nKnead the dough for ten minutes, then let it rise.\n"


@pytest.fixture(autouse=True)
def _fresh_cache():
    with fresh_caches():
        yield


@pytest.fixture
def fake_model(monkeypatch):
    """The app's workbench (and :func:`service`) embeds with the deterministic 8-d fake
    ``fake/hash-8`` instead of the real model."""
    return use_fake_model(monkeypatch, 8)


@pytest.fixture
def ingest_calls(monkeypatch):
    """Counts the files the ingest worker ingests (``Indexer.ingest_file`` with ``raise_transient``,
    as the worker calls it: every job of a page)."""
    calls: list[str] = []
    original = Indexer.ingest_file

    def counting(self, store, source, name=None, **kwargs):
        if kwargs.get("raise_transient"):
            calls.append(name)
        return original(self, store, source, name, **kwargs)

    monkeypatch.setattr(Indexer, "ingest_file", counting)
    return calls


def test_renders_on_an_empty_data_dir(fake_model):
    at = open_page()
    assert at.title[0].value == "🗂️ Vector stores"
    assert any("No vector stores yet" in i.value for i in at.info)
    assert [t.label for t in at.tabs] == ["Stores", "Templates"]
    assert not any(list(d.value.columns)[:1] == ["template"] for d in at.dataframe)  # only the open tab runs
    templates = table(open_tab(at, "Templates"), "template")  # only the built-in default
    assert list(templates["template"]) == ["default (built in)"]


def test_renders_a_populated_store(fake_model):
    make_store("Team Notes", [("cats.md", CATS), ("bread.md", BREAD)])
    at = open_page()
    stores = table(at, "store")
    assert list(stores["store"]) == ["Team Notes"] and list(stores["files"]) == [2]
    assert list(stores["dimension"]) == [8]
    # the name and its counts lead, so they show at 1280 px without scrolling and on a phone
    assert list(stores.columns)[:4] == ["store", "files", "chunks", "size (MB)"]
    assert int(stores["chunks"][0]) >= 2 and stores["size (MB)"][0] >= 0
    files = files_table(at, "Team Notes")
    assert sorted(files["file"]) == ["bread.md", "cats.md"]
    assert set(files["status"]) == {"✅ done"}
    assert list(files["pages"]) == ["–", "–"]  # Markdown has no pages: never "None" (issue 29)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Indexed files"] == "2" and metrics["Failed files"] == "0" and int(metrics["Chunks"]) >= 2


def test_create_a_store_with_the_form(fake_model):
    at = open_page()
    next(t for t in at.text_input if t.label == "Name" and t.placeholder == "Team notes").input("Recipes")
    button(at, "FormSubmitter:new-store-Create store").click().run()
    assert not at.exception
    assert any("Created the store Recipes" in s.value for s in at.success)
    assert at.selectbox(key="store_selected").value == "Recipes"
    at.selectbox(key="store_selected").set_value("Recipes")
    next(t for t in at.text_input if t.label == "Name" and t.placeholder == "Team notes").input("Recipes")
    button(at, "FormSubmitter:new-store-Create store").click().run()
    assert any("already exists" in s.value for s in at.success)
    assert list(table(at, "store")["store"]) == ["Recipes"]


def test_a_blank_store_name_is_refused_with_a_message(fake_model):
    at = open_page()
    button(at, "FormSubmitter:new-store-Create store").click().run()
    assert not at.exception
    assert "store name" in at.error[0].value


# -- uploads ---------------------------------------------------------------------------------------
def test_upload_many_files_ingests_each_exactly_once(fake_model, ingest_calls):
    make_store()
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(
        [("cats.md", CATS, "text/markdown"), ("bread.md", BREAD, "text/markdown")]
    )
    at.run()
    finish_job(at, "Notes")
    assert sorted(ingest_calls) == ["bread.md", "cats.md"]
    assert sorted(files_table(at, "Notes")["file"]) == ["bread.md", "cats.md"]
    assert "✅ **cats.md**" in markdown(at)
    # reruns, clicks and other widgets never ingest the upload again
    at.run()
    at.checkbox(key="sure:Notes").check().run()
    at.checkbox(key="sure:Notes").uncheck().run()
    pick_file(at, "Notes").select_index(1).run()
    open_tab(at, "Templates").selectbox(key="tpl-pick").select_index(0).run()
    open_tab(at, "Stores")
    assert not at.exception
    assert sorted(ingest_calls) == ["bread.md", "cats.md"]
    assert len(files_table(at, "Notes")) == 2
    assert len(at.session_state["processed_uploads"]) == 2


def test_a_bad_file_gets_a_message_and_the_others_go_on(fake_model):
    make_store()
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(
        [
            ("empty.txt", b"", "text/plain"),
            ("blob.bin", bytes(range(256)) * 8, "application/octet-stream"),
            ("cats.md", CATS, "text/markdown"),
        ]
    )
    at.run()
    finish_job(at, "Notes")
    errors = [e.value for e in at.error]
    for name in ("empty.txt", "blob.bin"):  # each failed file listed once, in words, with no Retry
        assert sum(name in e for e in errors) == 1, errors
    assert not [b for b in at.button if b.key and b.key.startswith("retry:")]
    assert any("empty" in e.lower() for e in errors if "empty.txt" in e)
    tab = files_table(at, "Notes")
    assert list(tab["file"]) == ["cats.md"] and list(tab["status"]) == ["✅ done"]
    metrics = {m.label: m.value for m in at.metric}
    assert (metrics["Indexed files"], metrics["Failed files"]) == ("1", "2")


def test_a_few_warnings_stand_under_their_files_and_many_go_into_one_list(fake_model):
    make_store()
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value([("a.pdf", b"Plain words about cats.\n", "application/pdf")])
    at.run()
    finish_job(at, "Notes")
    assert any("a.pdf: named .pdf but it is text, not a PDF" in w.value for w in at.warning)
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(
        [(f"n{i}.docx", f"Plain words number {i} about dogs.\n".encode(), "application/octet-stream") for i in range(4)]
    )
    at.run()
    finish_job(at, "Notes")
    assert not any("named .docx" in w.value for w in at.warning)  # not four boxes ...
    (box,) = [e for e in at.expander if e.label == "⚠️ 4 warnings on 4 files"]  # ... one closed list
    listed = " ".join(m.value for m in box.markdown)
    assert all(f"n{i}.docx" in listed for i in range(4)) and "not a Word document" in listed


def test_a_file_over_the_size_limit_says_so(fake_model, monkeypatch):
    monkeypatch.setenv("KNOWLEDGE_INGEST__MAX_FILE_MB", "0.001")
    make_store()
    at = open_page()
    assert "Up to 0.001 MB" in at.file_uploader(key="upload:Notes").help
    at.file_uploader(key="upload:Notes").set_value(("big.txt", b"word " * 1000, "text/plain"))
    at.run()
    finish_job(at, "Notes")
    assert any("big.txt" in e.value and "limit" in e.value.lower() for e in at.error), [e.value for e in at.error]


def _encrypted_pdf(password: str) -> bytes:
    return encrypted_pdf(password, repeat=20)


def _password_flow(at: AppTest, name: str, data: bytes, password: str) -> AppTest:
    at.file_uploader(key="upload:Notes").set_value((name, data, "application/pdf"))
    at.run()
    finish_job(at, "Notes")
    assert any("password required" in e.value.lower() and name in e.value for e in at.error)
    [pw] = [t for t in at.text_input if t.label == "Password"]
    [retry] = [b for b in at.button if b.key and b.key.startswith("retry:Notes:")]
    pw.input("wrong")
    retry.click().run()
    assert not at.exception
    assert any("wrong password" in e.value.lower() and name in e.value for e in at.error)
    [pw] = [t for t in at.text_input if t.label == "Password"]
    pw.input(password)
    next(b for b in at.button if b.key and b.key.startswith("retry:Notes:")).click().run()
    assert not at.exception
    tab = files_table(at, "Notes")
    assert list(tab["file"]) == [name] and list(tab["status"]) == ["✅ done"]
    assert not [t for t in at.text_input if t.label == "Password"]
    assert not [e for e in at.error if "password" in e.value]  # the upload's outcome follows the retry
    assert f"✅ **{name}**" in markdown(at)
    assert any(name in s.value and "Now searchable" in s.value for s in at.success)  # said where Retry was
    return at


def test_a_password_protected_pdf_asks_for_the_password_and_retries(fake_model):
    make_store()
    _password_flow(open_page(), "locked.pdf", _encrypted_pdf("secret"), "secret")


@pytest.mark.model
@pytest.mark.slow  # a corpus PDF embedded with the real model
def test_the_corpus_password_pdf_with_the_real_model(corpus):
    make_store_real = Workbench(load_settings())
    make_store_real.create_store("Notes")
    make_store_real.close()
    pdf = corpus / "pdf" / "libreoffice-writer-password.pdf"
    at = _password_flow(open_page(), pdf.name, pdf.read_bytes(), "openpassword")
    assert int(files_table(at, "Notes")["chunks"][0]) > 0


def test_ingest_a_folder_by_glob(fake_model, tmp_path, monkeypatch):
    allow(monkeypatch, tmp_path)
    make_store()
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "cats.md").write_bytes(CATS)
    (docs / "sub" / "bread.md").write_bytes(BREAD)
    (docs / "notes.txt").write_text("plain words")
    at = ingest_folder(open_page(), "Notes", docs, "**/*.md")
    assert sorted(files_table(at, "Notes")["file"]) == ["bread.md", "cats.md"]


def test_a_missing_folder_is_a_message(fake_model, tmp_path, monkeypatch):
    allow(monkeypatch, tmp_path)
    make_store()
    at = open_page()
    [folder] = [t for t in at.text_input if t.label == "Folder"]
    folder.input(str(tmp_path / "nope"))
    button(at, "FormSubmitter:folder:Notes-Ingest folder").click().run()
    assert not at.exception
    assert "is not a folder" in at.error[0].value


# -- deleting, re-embedding ------------------------------------------------------------------------
def test_delete_a_file(fake_model):
    make_store("Notes", [("bread.md", BREAD), ("cats.md", CATS)])
    at = open_page()
    pick = pick_file(at, "Notes")
    assert pick.value is not None
    pick.select_index(1).run()  # sorted by name: cats.md
    button(at, "del:Notes").click().run()
    assert not at.exception and list(files_table(at, "Notes")["file"]) == ["bread.md", "cats.md"]
    assert any("Delete **cats.md**" in w.value for w in at.warning)  # asked first
    button(at, "yes:del:Notes").click().run()
    assert not at.exception
    assert any("Deleted cats.md" in s.value for s in at.success)
    assert list(files_table(at, "Notes")["file"]) == ["bread.md"]


def test_a_file_with_two_names_is_listed_with_its_alias_and_deleted_by_either_name(fake_model):
    make_store("Notes", [("cats.md", CATS), ("copy of cats.md", CATS), ("bread.md", BREAD)])
    at = open_page()
    files = files_table(at, "Notes")
    assert list(files["file"]) == ["bread.md", "cats.md"]
    assert [list(a) for a in files["also named"]] == [[], ["copy of cats.md"]]
    pick = pick_file(at, "Notes")
    assert list(pick.options) == ["bread.md", "cats.md", "copy of cats.md"]
    pick.select_index(1).run()  # cats.md
    button(at, "del:Notes").click().run()
    assert any("the name **cats.md** (its content stays, as copy of cats.md)" in w.value for w in at.warning)
    button(at, "yes:del:Notes").click().run()
    assert not at.exception
    assert any("Deleted the name cats.md" in s.value for s in at.success)
    files = files_table(at, "Notes")
    assert list(files["file"]) == ["bread.md", "copy of cats.md"]  # still indexed, under its other name
    wb = service()
    try:
        assert {h.file_name for h in wb.search("Notes", "cat sits on the mat", k=5)} >= {"copy of cats.md"}
    finally:
        wb.close()


def test_delete_a_store_needs_confirmation(fake_model):
    make_store("Notes", [("cats.md", CATS)])
    at = open_page()
    assert button(at, "drop:Notes").disabled
    at.checkbox(key="sure:Notes").check().run()
    button(at, "drop:Notes").click().run()
    assert not at.exception
    assert any("Deleted the store Notes" in s.value for s in at.success)
    assert any("No vector stores yet" in i.value for i in at.info)


def test_reembed_to_another_template(fake_model):
    make_store("Notes", [("cats.md", CATS)])
    wb = service()
    wb.save_template(
        make_template(name="other", embedding_model="fake/hash-12", max_chunk_size_tokens=64, chunk_overlap_tokens=8)
    )
    wb.close()
    at = open_page()
    at.selectbox(key="reembed-to:Notes").select("other").run()
    button(at, "reembed:Notes").click().run()
    assert not at.exception
    assert any("now uses template other" in s.value for s in at.success)
    stores = table(at, "store")
    assert list(stores["template"]) == ["other"] and list(stores["model"]) == ["fake/hash-12"]
    assert list(stores["dimension"]) == [12]  # re-embedded with the other model


# -- templates -------------------------------------------------------------------------------------
def _template_form(at: AppTest):
    return {t.label: t for t in at.text_input if t.form_id == "template-form"}


def test_create_edit_and_delete_a_template(fake_model):
    at = open_page("Templates")
    form = _template_form(at)
    form["Name"].input("small chunks")
    form["Description"].input("for FAQs")
    next(n for n in at.number_input if n.label == "Max chunk size (tokens)").set_value(128)
    button(at, "FormSubmitter:template-form-Save template").click().run()
    assert not at.exception
    assert any("Saved the template small chunks" in s.value for s in at.success)
    tab = table(at, "template")
    assert list(tab["template"]) == ["default (built in)", "small chunks"]
    # edit
    at.selectbox(key="tpl-pick").select("small chunks").run()
    next(n for n in at.number_input if n.label == "Chunk overlap (tokens)").set_value(16)
    button(at, "FormSubmitter:template-form-Save template").click().run()
    tab = table(at, "template")
    assert list(tab["overlap"]) == [48, 16] and list(tab["description"])[1] == "for FAQs"
    # delete, confirmed
    at.selectbox(key="tpl-pick").select("small chunks").run()
    assert button(at, "tpl-delete").disabled
    at.checkbox(key="tpl-sure").check().run()
    button(at, "tpl-delete").click().run()
    assert not at.exception
    tab = table(at, "template")
    assert list(tab["template"]) == ["default (built in)"]


def test_a_template_can_turn_ocr_off(fake_model):
    at = open_page("Templates")
    _template_form(at)["Name"].input("no scans")
    at.selectbox(key="tpl-ocr").select("off")
    button(at, "FormSubmitter:template-form-Save template").click().run()
    assert not at.exception
    tab = table(at, "template")
    assert list(tab["OCR"]) == ["auto (setting)", "off"]
    assert service().template("no scans").ocr == "off"
    at.selectbox(key="tpl-pick").select("no scans").run()
    assert at.selectbox(key="tpl-ocr").value == "off"  # editing shows the saved choice


def test_an_invalid_template_is_a_message(fake_model):
    at = open_page("Templates")
    _template_form(at)["Name"].input("bad")
    next(n for n in at.number_input if n.label == "Max chunk size (tokens)").set_value(32)
    next(n for n in at.number_input if n.label == "Chunk overlap (tokens)").set_value(32)
    button(at, "FormSubmitter:template-form-Save template").click().run()
    assert not at.exception
    assert "chunk_overlap_tokens must be smaller" in at.error[0].value
    _template_form(at)["Name"].input("default")
    next(n for n in at.number_input if n.label == "Chunk overlap (tokens)").set_value(8)
    button(at, "FormSubmitter:template-form-Save template").click().run()
    assert "formed by the settings" in at.error[0].value


@pytest.mark.model
@pytest.mark.slow
def test_upload_with_the_real_model():
    make_real = Workbench(load_settings())
    make_real.create_store("Notes")
    make_real.close()
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(("cats.md", CATS, "text/markdown"))
    at.run()
    finish_job(at, "Notes")
    tab = files_table(at, "Notes")
    assert list(tab["status"]) == ["✅ done"] and int(tab["chunks"][0]) >= 1
    assert list(table(at, "store")["dimension"]) == [384]


def test_stop_cancels_the_batch_and_the_store_stays_as_it_was(fake_model, monkeypatch):
    import threading

    make_store("Notes", [("bread.md", BREAD)])
    gate = threading.Event()
    original = Indexer.ingest_file

    def held(self, store, source, name=None, **kwargs):
        if kwargs.get("raise_transient"):  # the worker's
            gate.wait(30)  # the first file waits until the test has pressed Stop
        return original(self, store, source, name, **kwargs)

    monkeypatch.setattr(Indexer, "ingest_file", held)
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(
        [("cats.md", CATS, "text/markdown"), ("more.md", b"# More\n\nmore words", "text/markdown")]
    )
    at.run()
    assert "0 of 2 files" in at.get("progress")[0].proto.text
    button(at, "stop:Notes").click().run()
    gate.set()
    finish_job(at, "Notes")
    text = markdown(at)
    assert "⏹️ **cats.md**" in text and "⏹️ **more.md**" in text and "not started" in text
    assert list(files_table(at, "Notes")["file"]) == ["bread.md"]


def test_a_batch_started_in_another_tab_shows_its_progress_and_can_be_stopped(fake_model, monkeypatch):
    import threading

    release = threading.Event()
    embed = HashEmbedder.embed_documents

    def slow(self, texts):  # the fake model, held until the test lets it go
        release.wait(30)
        return embed(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed_documents", slow)
    make_store()
    at = open_page()
    other_tab = at.session_state["workbench"]  # every tab shares the process's one workbench
    job = other_tab.submit_batch("Notes", [("slow.md", CATS), ("later.md", BREAD)])
    try:
        at.run()
        texts = [p.proto.text for p in at.get("progress")]
        assert any("0 of 2 files** into Notes" in t for t in texts), texts
        stop = button(at, "stop:Notes")
        stop.click().run()
        assert job.cancelled
    finally:
        release.set()
        job.wait(30)
    assert [r.outcome for r in job.results][1:] == ["cancelled"]
    at.run()  # the stopped batch's outcome stays on the page for a while, in this tab too
    assert any("later.md" in m.value and "not started" in m.value for m in at.markdown), markdown(at)


def test_the_folder_form_reads_only_allowed_folders(fake_model, tmp_path, monkeypatch):
    """/etc, ~/.ssh and a symlink leading out of the allowed folder are refused; the allowed folder
    is read (and a file symlinked out of it is left out, and said so)."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY----- secret")
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nthe launch codes")
    docs = home / "docs"
    docs.mkdir()
    (docs / "cats.md").write_bytes(CATS)
    (docs / "escape.md").symlink_to(outside / "secret.md")
    (home / "link-out").symlink_to(outside)
    monkeypatch.setenv("HOME", str(home))  # the default: the home folder, while the app serves loopback
    make_store()
    at = open_page()

    def submit(path: str) -> AppTest:
        [folder] = [t for t in at.text_input if t.label == "Folder"]
        folder.input(path)
        return button(at, "FormSubmitter:folder:Notes-Ingest folder").click().run()

    for path, says in [
        ("/etc", "outside the folders allowed"),
        ("~/.ssh", "hidden folders"),
        (str(home / "link-out"), "outside the folders allowed"),
    ]:
        submit(path)
        assert not at.exception
        assert any(says in e.value for e in at.error), (path, [e.value for e in at.error])
    assert any(str(home) in c.value for c in at.caption)  # the page says which folders are allowed
    submit(str(docs))
    assert any("1 file(s) left out" in w.value for w in at.warning)
    finish_job(at, "Notes")
    assert sorted(files_table(at, "Notes")["file"]) == ["cats.md"]


# -- failures in words, guard rails -----------------------------------------------------------------
def _damaged_docx() -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:  # a Word package whose main part is missing
        z.writestr(
            "[Content_Types].xml",
            '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/'
            'package/2006/content-types"><Override PartName="/word/document.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
        )
        z.writestr(
            "_rels/.rels",
            '<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
            'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
            'officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
        )
    return buf.getvalue()


def _truncated_pdf() -> bytes:
    data = _encrypted_pdf("x").replace(b"/Encrypt", b"/Encryp_")  # any PDF, then cut mid-file
    return data[: len(data) // 3]


def test_failures_say_what_is_wrong_in_words_and_offer_retry_only_where_it_can_help(fake_model):
    import re

    make_store()
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(
        [
            ("damaged.docx", _damaged_docx(), "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
            ("cut.pdf", _truncated_pdf(), "application/pdf"),
            ("old.doc", bytes.fromhex("D0CF11E0A1B11AE1") + bytes(2048), "application/msword"),
            ("empty.txt", b"", "text/plain"),
            ("locked.pdf", _encrypted_pdf("secret"), "application/pdf"),
        ]
    )
    at.run()
    finish_job(at, "Notes")
    errors = [e.value for e in at.error]
    for name in ("damaged.docx", "cut.pdf", "old.doc", "empty.txt", "locked.pdf"):
        assert sum(name in e for e in errors) == 1, (name, errors)  # listed once
    for e in errors:  # never an exception's name
        assert not re.search(r"\b\w*(Error|Exception)\b|BadZipFile", e), e
    retries = sorted(b.key.split(":")[-1] for b in at.button if b.key and b.key.startswith("retry:"))
    wb = service()
    try:
        by_id = {f.file_id: f.file_name for f in wb.store_files("Notes")}
    finally:
        wb.close()
    assert [by_id[i] for i in retries] == ["locked.pdf"]  # only a password can change the outcome
    assert {m.label: m.value for m in at.metric}["Failed files"] == "5"


def test_removing_a_failed_file_asks_first(fake_model):
    make_store()
    at = open_page()
    at.file_uploader(key="upload:Notes").set_value(("empty.txt", b"", "text/plain"))
    at.run()
    finish_job(at, "Notes")
    [rm] = [b for b in at.button if b.key and b.key.startswith("rm:Notes:")]
    rm.click().run()
    assert any("Remove **empty.txt** from Notes?" in w.value for w in at.warning)
    [yes] = [b for b in at.button if b.key and b.key.startswith("yes:rm:Notes:")]
    yes.click().run()
    assert any("Deleted empty.txt from Notes" in s.value for s in at.success)
    assert {m.label: m.value for m in at.metric}["Failed files"] == "0"


def test_a_template_larger_than_the_model_window_says_it_will_be_fitted(fake_model):
    at = open_page("Templates")
    _template_form(at)["Name"].input("huge chunks")
    next(n for n in at.number_input if n.label == "Max chunk size (tokens)").set_value(4000)
    next(n for n in at.number_input if n.label == "Chunk overlap (tokens)").set_value(2000)
    button(at, "FormSubmitter:template-form-Save template").click().run()
    assert not at.exception
    [saved] = [s.value for s in at.success if "Saved the template huge chunks" in s.value]
    assert "4000 tokens" in saved and "fitted to" in saved and "overlap of" in saved


@pytest.mark.processes
@pytest.mark.slow
def test_a_catalog_kept_by_another_process_gives_a_short_message(fake_model, monkeypatch, tmp_path):
    """A process holding the DuckDB catalog without giving turns: the page says so in a sentence --
    no traceback, no server path."""
    import subprocess
    import sys

    monkeypatch.setenv("KNOWLEDGE_CATALOG__LOCK_TIMEOUT", "0.3")
    at = open_app()
    path, stop = load_settings().catalog_path, tmp_path / "stop"
    script = (
        "import sys, time\nfrom pathlib import Path\nfrom knowledge.catalog import Catalog\n"
        "c = Catalog(Path(sys.argv[1]))\nwith c.hold():\n    print('holding', flush=True)\n"
        "    while not Path(sys.argv[2]).exists():\n        time.sleep(0.05)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script, str(path), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        at.switch_page("pages/stores.py").run()
        assert not at.exception
        [warning] = [w.value for w in at.warning if "in use by another program" in w.value]
        assert str(path.parent) not in warning and "Traceback" not in warning
    finally:
        stop.touch()
        holder.wait(30)
    at.run()  # free again: the page renders
    assert not at.exception and at.title[0].value == "🗂️ Vector stores"


@pytest.mark.processes
@pytest.mark.slow
def test_the_page_works_while_a_command_line_batch_ingests_into_the_same_data_folder(fake_model, tmp_path):
    """Issue 26's defect: while ``python -m knowledge ingest`` ran a batch, the Vector stores page
    said "catalog in use" and then showed a traceback with server paths. Now the page renders on
    every rerun during the batch (the two processes take turns with the DuckDB file), and lists the
    batch's files once it ends."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    docs = tmp_path / "docs"
    docs.mkdir()
    names = []
    for i in range(20):
        (docs / f"d{i:02}.md").write_text("\n\n".join(f"# Part {k} of d{i}\n\n" + f"word{i}x{k} " * 80 for k in range(12)))
        names.append(f"d{i:02}.md")
    make_store()
    at = open_page()
    env = {**os.environ, "PYTHONPATH": str(repo)}  # the same data folder and fake model as the page
    cli = subprocess.Popen(
        [sys.executable, "-m", "knowledge", "ingest", "Notes", str(docs)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    renders = 0
    try:
        deadline = time.monotonic() + 240
        while cli.poll() is None and time.monotonic() < deadline:
            at.run()
            assert not at.exception, at.exception
            seen = " ".join(w.value for w in at.warning) + " ".join(e.value for e in at.error)
            assert "in use" not in seen and "Traceback" not in seen, seen
            assert at.title[0].value == "🗂️ Vector stores"
            renders += 1
            time.sleep(0.2)
        out, err = cli.communicate(timeout=120)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 0 and "20 files: 20 indexed;" in out, (out, err[-3000:])
    assert renders >= 2, f"the batch ended before the page was rendered twice during it ({renders})"
    at.run()
    assert not at.exception and sorted(files_table(at, "Notes")["file"]) == names
    print(f"page rendered {renders} times during the command-line batch")


# -- team mode: a shared catalog and the per-machine memory backend ----------------------------------
def test_a_shared_catalog_on_the_memory_default_says_what_to_set_and_the_form_refuses(
    fake_model, monkeypatch, pg_database, settings
):
    """``catalog.url`` set and ``vector_store.backend`` left at memory: the page says what to set
    before anyone uploads, and the New store form refuses with the same message (nothing made)."""
    from urllib.parse import urlencode

    from psycopg.conninfo import conninfo_to_dict

    from tests.helpers.pg import pg_catalog_settings

    parts = conninfo_to_dict(pg_catalog_settings(settings).catalog.url)  # key=value: as a URL, as a user writes it
    query = urlencode({k: parts[k] for k in ("host", "port") if parts.get(k)})
    monkeypatch.setenv("KNOWLEDGE_CATALOG__URL", f"postgresql://{parts.get('user', '')}@/{parts['dbname']}?{query}")
    at = open_page()
    warned = " ".join(w.value for w in at.warning)
    assert "catalog is shared" in warned and "vector_store.backend" in warned and "vector_store.url" in warned
    next(t for t in at.text_input if t.label == "Name" and t.placeholder == "Team notes").input("Recipes")
    button(at, "FormSubmitter:new-store-Create store").click().run()
    assert not at.exception
    refused = " ".join(e.value for e in at.error)
    assert "cannot reach" in refused and "vector_store.url" in refused and "pgvector" in refused
    assert not any("Created the store" in s.value for s in at.success)
    assert any("No vector stores yet" in i.value for i in at.info)


def test_the_embedded_default_shows_no_team_mode_warning(fake_model):
    at = open_page()
    assert not any("catalog is shared" in w.value for w in at.warning)


def test_a_batch_no_worker_took_yet_says_queued_waiting_for_a_worker(fake_model, monkeypatch):
    """``ingest.worker_threads = 0``: the app only queues; the header says so instead of a bar that
    does not move, until a worker (here one in the test, as a ``knowledge worker`` process would)
    ingests the batch."""
    from knowledge.service.worker import Worker

    monkeypatch.setenv("KNOWLEDGE_INGEST__WORKER_THREADS", "0")
    make_store()
    at = open_page()
    wb = at.session_state["workbench"]
    job = wb.submit_batch("Notes", [("cats.md", CATS), ("bread.md", BREAD)])
    at.run()
    texts = [html.unescape(p.proto.text) for p in at.get("progress")]
    assert any("2 files queued** into Notes — waiting for a worker" in t and "worker_threads = 0" in t for t in texts), texts
    assert not job.wait(0.5)  # nobody ingests here
    worker = System(load_settings())  # a worker's parts, over the app's data folder
    try:
        assert Worker(worker.indexer).run(once=True, poll=0.05) == 2
    finally:
        worker.close()
    assert job.wait(30)
    at.run()
    assert any("Batch done: 2 files" in p.proto.text for p in at.get("progress"))


def test_files_waiting_out_an_outage_say_why_in_one_line_and_are_ingested_when_it_ends(fake_model, monkeypatch):
    """A job the infrastructure failed (here the file store, as a worker's ``defer`` records it) is
    queued again with the reason: the running batch says which files wait and why, once per reason,
    and a worker ingests them afterwards."""
    from knowledge.catalog import jobs as q
    from knowledge.service.worker import Worker

    monkeypatch.setenv("KNOWLEDGE_INGEST__WORKER_THREADS", "0")
    make_store()
    at = open_page()
    wb = at.session_state["workbench"]
    job = wb.submit_batch("Notes", [("cats.md", CATS), ("bread.md", BREAD)])
    reason = "waiting: the file store cannot be reached (The s3 file store cannot read: connection refused.)"
    worker = System(load_settings())  # a worker's parts, over the app's data folder
    try:
        for _ in range(2):  # as a worker does when the file store is down: claimed, then given back with why
            row = q.claim(worker.catalog, "w1")
            assert q.defer(worker.catalog, row.id, "w1", reason, 3600) == "queued"
        at.run()
        said = [i.value for i in at.info if "tried again by themselves" in i.value]
        assert len(said) == 1 and "**2 files** (cats.md, bread.md)" in said[0] and "file store cannot be reached" in said[0]
        with worker.catalog.cursor() as cur:  # the outage is over: the back-off is not waited out in a test
            cur.execute("UPDATE ingest_jobs SET not_before = NULL")
        assert Worker(worker.indexer).run(once=True, poll=0.05) == 2
    finally:
        worker.close()
    assert job.wait(30)
    at.run()
    assert not [i for i in at.info if "tried again by themselves" in i.value]
    assert any("Batch done: 2 files" in p.proto.text and "2 indexed" in p.proto.text for p in at.get("progress"))


def test_an_interrupted_job_is_retried_from_the_vector_stores_page(fake_model):
    """A job whose worker died with no attempt left ends ``interrupted``; its file's record follows
    (failed, not ``processing`` forever) and Retry on the page ingests it."""
    from knowledge.catalog import FileRecord
    from knowledge.catalog import jobs as q
    from knowledge.catalog.records import PROCESSING
    from knowledge.service.worker import host_name

    make_store()
    system = System(load_settings())
    catalog = system.catalog
    stored = system.files.save("cats.md", "text/markdown", CATS)
    q.enqueue(catalog, "Notes", [q.JobSource("cats.md", "file", stored.id, stored.size)], max_attempts=1)
    dead = f"{host_name()}:999999999:app:killed"  # a worker of this machine whose process is gone
    assert q.claim(catalog, dead) is not None
    catalog.put_file(FileRecord("Notes", stored.id, "cats.md", stored.sha256, stored.size, PROCESSING, None, 0, None))
    assert q.expire_dead(catalog, host_name(), lambda pid: False) == 1 and q.take_over(catalog) == 1
    [row] = q.jobs(catalog)
    [rec] = Workbench(system).store_files("Notes")
    assert row.status == "interrupted" and rec.status == "failed" and "interrupted" in rec.reason
    system.close()
    at = open_page()
    errors = [e.value for e in at.error]
    assert any("cats.md" in e and "Interrupted: the worker stopped" in e for e in errors), errors
    button(at, f"retry:Notes:{stored.id}").click().run()
    assert not at.exception
    assert any("cats.md" in s.value and "Now searchable" in s.value for s in at.success)
    assert list(files_table(at, "Notes")["file"]) == ["cats.md"]


def _many(store: str, done: int, failed: int, hopeless: int = 0, limited: bool = False) -> None:
    """``store`` with ``done`` indexed and ``failed`` failed records (a service was out of reach; the
    last ``hopeless`` of them empty documents instead, which a retry cannot help) over small stored
    files, written straight into the catalog (nothing is ingested). ``limited``: the failed ones
    passed a reading limit instead (the file is fine; a setting stopped it)."""
    from knowledge.catalog import DONE, FAILED, FileRecord

    system = System(load_settings())
    try:
        Workbench(system).create_store(store)
        records = []
        for i in range(done + failed):
            name = f"note-{i:04d}.md" if i < done else f"failed-{i:04d}.md"
            stored = system.files.save(name, "text/markdown", f"# Note {i}\n\nThe tide table {i}.\n".encode())
            bad = i >= done
            empty = i >= done + failed - hopeless
            records.append(
                FileRecord(
                    store,
                    stored.id,
                    name,
                    stored.sha256,
                    stored.size,
                    FAILED if bad else DONE,
                    (
                        "Took longer than 1.0 s to read (the setting ingest.reader_timeout_seconds)."
                        if limited
                        else "The file has no text."
                        if empty
                        else "The vector store was out of reach."
                    )
                    if bad
                    else None,
                    0 if bad else 2,
                    None,
                    error=("ReaderLimitExceeded" if limited else "EmptyDocument" if empty else "BackendUnavailable")
                    if bad
                    else None,
                )
            )
        system.catalog.add_files(records)
    finally:
        system.close()


def test_a_large_store_pages_its_files_finds_one_by_name_and_deletes_all_that_match(fake_model):
    _many("Notes", 120, 12)
    at = open_page()
    assert not at.exception
    assert "#### Indexed files (120)" in markdown(at)
    assert any(c.value == "Rows 1–50 of 120 · page 1 of 3" for c in at.caption)
    assert len(files_table(at, "Notes")) == 50
    assert "##### Needs attention (12)" in markdown(at)
    assert sum("failed-" in e.value for e in at.error) == 10  # ten a page
    button(at, "files-page:Notes:next").click().run()
    assert any(c.value.startswith("Rows 51–100 of 120") for c in at.caption)
    assert files_table(at, "Notes")["file"].iloc[0] == "note-0050.md"

    at.text_input(key="fq-name:Notes").input("NOTE-004").run()  # any case
    assert any(c.value == "10 files match." for c in at.caption)
    assert list(files_table(at, "Notes")["file"]) == [f"note-{i:04d}.md" for i in range(40, 50)]
    assert not any(c.value.startswith("Rows ") for c in at.caption)  # one page: no pager
    (which,) = [r for r in at.radio if r.key.startswith("bulk-which:Notes:")]  # keyed by the rows picked
    assert which.value == "all"  # nothing picked: all matching
    which.set_value("all").run()
    at.selectbox(key="bulk-action:Notes").set_value("delete").run()
    button(at, "bulk:Notes").click().run()
    button(at, "yes:bulk:Notes").click().run()
    assert not at.exception
    assert any("Deleted 10 file(s)" in s.value for s in at.success)
    assert "#### Indexed files (110)" in markdown(at)
    wb = service()
    try:
        assert wb.file_counts("Notes").indexed == 110 and wb.file_page("Notes", limit=1).total == 122
    finally:
        wb.close()


def test_the_bulk_retry_offers_only_the_files_a_retry_can_help_and_says_why_the_rest_are_left(fake_model):
    _many("Notes", 2, 5, hopeless=2)
    at = open_page()
    assert not at.exception
    retry = button(at, "retry-all:Notes")
    assert retry.label == "🔁 Try the 3 a retry can help"
    assert "the other 2 would fail the same way" in retry.help
    retry.click().run()
    assert not at.exception
    (said,) = [s.value for s in at.success if "Queued" in s.value]
    assert said.startswith(
        "Queued 3 file(s) for a retry; left out 2: failed-0005.md, failed-0006.md (would fail the same way)"
    )


def test_a_file_stopped_by_a_reading_limit_says_to_raise_it_and_offers_retry(fake_model):
    """The trial: "Trying again would fail the same way: fix the file" was said of a file that a
    1 s reading limit stopped, and no Retry was offered even once the limit was raised."""
    _many("Notes", 1, 1, limited=True)
    at = open_page()
    assert not at.exception
    assert any("A reading limit stopped it" in c.value for c in at.caption)
    assert not any("fail the same way" in c.value for c in at.caption)
    assert [b for b in at.button if b.key.startswith("retry:Notes:")]


def test_no_bulk_retry_is_offered_when_a_retry_can_help_none(fake_model):
    _many("Notes", 2, 3, hopeless=3)
    at = open_page()
    assert not at.exception
    assert not [b for b in at.button if b.key == "retry-all:Notes"]
    assert any("A retry cannot help any of these" in c.value for c in at.caption)
    assert [b for b in at.button if b.key == "yes:rm-all:Notes" or b.key == "rm-all:Notes"]  # removing still is


def _tick_rows(at, store: str, rows: list[int]) -> None:
    """Tick ``rows`` of the store's file table, as a click on their boxes does."""
    (key,) = [k for k in at.session_state if str(k).startswith(f"files:{store}:")]
    at.session_state[key] = {"selection": {"rows": rows, "columns": [], "cells": []}}
    at.run()


def test_ticked_rows_are_what_a_bulk_action_acts_on_and_the_ticks_go_with_the_files(fake_model):
    """Found by a new user: ticking rows chose them not (\"all matching\" was chosen before any
    row was), and after a bulk action the ticks fell on the rows that took the files' places."""
    _many("Notes", 60, 0)
    at = open_page()
    assert not at.exception
    (which,) = [r for r in at.radio if r.key.startswith("bulk-which:Notes:")]
    assert which.value == "all"  # nothing ticked yet
    _tick_rows(at, "Notes", [0, 1, 2])
    (which,) = [r for r in at.radio if r.key.startswith("bulk-which:Notes:")]
    assert which.value == "picked"  # ticking rows chooses them
    at.selectbox(key="bulk-action:Notes").set_value("delete").run()
    button(at, "bulk:Notes").click().run()
    button(at, "yes:bulk:Notes").click().run()
    assert not at.exception
    assert any("Deleted 3 file(s)" in s.value for s in at.success)
    assert list(files_table(at, "Notes")["file"])[:1] == ["note-0003.md"]
    (which,) = [r for r in at.radio if r.key.startswith("bulk-which:Notes:")]
    assert which.value == "all"  # no row ticked: the rows that moved up are not picked
    assert "☑️ Act on 0 selected or all 57 matching" in [e.label for e in at.expander]
