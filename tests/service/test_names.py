"""Names with control characters are refused with a reason in the service layer (issue 24, item 6):
a NUL in a store name left a store listed that could not be used. One rule (knowledge/_names.py)
for store, template, file, chat title, agent-memory dataset and LLM config names."""

from __future__ import annotations

import pytest

from knowledge._names import bad_character, check_name
from knowledge.agent_memory import VectorMemory
from knowledge.catalog import DONE, FileRecord
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.llm.config import LlmConfigs
from knowledge.service.templates import make_template
from knowledge.system import System

BAD = [
    ("a\x00b", "U+0000"),
    ("tab\there", "U+0009"),
    ("line\n", "U+000A"),
    ("del\x7f", "U+007F"),
    ("c1\x85", "U+0085"),
    ("evil\u202etxt.exe", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("iso\u2066late", "U+2066"),
    ("two\u2028lines", "U+2028 LINE SEPARATOR"),
    ("sur\ud800", "U+D800"),
]
GOOD = ["Team notes", "Café déjà vu", "עברית\u200fשם", "👨\u200d👩\u200d👧 family", "نامه\u200cها", "soft\u00adhyphen"]


@pytest.fixture
def system(tmp_path):
    s = System(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda m: HashEmbedder(64, 64))
    yield s
    s.close()


def test_the_rule_names_the_character_and_keeps_every_script():
    for name, code in BAD:
        assert code in bad_character(name)
        with pytest.raises(InvalidArgument, match="store name contains .*" + code.split()[0].replace("+", r"\+")):
            check_name(name, "store name")
    for name in GOOD:  # joiners for emoji and Persian, RTL marks, soft hyphen: kept
        assert bad_character(name) is None and check_name(name, "store name") == name


@pytest.mark.parametrize("name, code", BAD)
def test_a_store_name_with_a_control_character_is_refused_and_nothing_is_listed(system, wb, name, code):
    """The attack: a store named with a NUL was created and stayed listed, unusable."""
    with pytest.raises(InvalidArgument, match="store name contains"):
        wb.create_store(name)
    with pytest.raises(InvalidArgument, match="store name contains"):
        wb.ingest_file(name, b"some text", "a.txt")  # a store created on the fly
    with pytest.raises(InvalidArgument, match="store name contains"):
        system.catalog.put_store(name, "default", "memory", "m", 64, "cosine")  # under the service layer too
    assert wb.store_names(internal=True) == []
    assert not wb.backend("memory").list_collections()


@pytest.mark.parametrize("name", ["a\x00b", "trailing\n", "evil\u202eexe"])
def test_template_and_llm_config_names_with_control_characters_are_refused(system, wb, name):
    """The names' patterns ended in ``$``, which lets a trailing newline through."""
    with pytest.raises(KnowledgeError, match="template name contains"):
        wb.save_template(make_template(name=name, backend="memory", embedding_model="fake"))
    with pytest.raises(InvalidArgument, match="template name contains"):
        system.catalog.put_template(name, {})
    configs = LlmConfigs(system.catalog, wb.settings)
    with pytest.raises(InvalidArgument, match="LLM config name contains"):
        configs.save({"name": name, "type": "CHAT", "provider": "offline"})
    assert name not in wb.template_names() and name not in [c.name for c in configs.list()]


def test_file_names_at_ingestion(system, wb):
    """A file's own name: control characters are removed as the file store keeps names (a file on
    disk named with a tab is still ingested, as ``ab.txt``); a bidirectional control or line
    separator, which would make the name display as another, fails that file with the reason and
    the batch goes on; nothing of the refused file is recorded."""
    ok = wb.ingest_file("kb", b"plain text one", "a\tb.txt")
    assert ok.ok and ok.name == "ab.txt"
    bad = wb.ingest_file("kb", b"plain text two", "invoice\u202efdp.exe")
    assert not bad.ok and "U+202E" in bad.message and bad.error == "InvalidArgument"
    assert [f.file_name for f in wb.file_records("kb")] == ["ab.txt"]
    assert len(wb.stored_files()) == 1  # the refused file's bytes were not kept
    with pytest.raises(InvalidArgument, match="file name contains"):
        system.indexer.index_text("kb", "f2", "some text", "x\u2028y")
    with pytest.raises(InvalidArgument, match="file name contains"):
        system.indexer.rename("kb", ok.file_id, "ab.txt", "ab\u202e.txt")
    with pytest.raises(InvalidArgument, match="file name contains"):
        system.catalog.put_file(FileRecord("kb", "zz", "n\x00.txt", None, 1, DONE, None, 0, None))
    assert [f.file_name for f in wb.file_records("kb")] == ["ab.txt"]


def test_a_batch_goes_on_past_a_refused_file_name(system, wb, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("good words")
    (folder / "bad\u202etxt.exe").write_text("bad words")
    (folder / "more.txt").write_text("more words")
    results = system.indexer.ingest_paths("kb", [folder])
    assert sorted((r.name, r.ok) for r in results) == [("bad\u202etxt.exe", False), ("good.txt", True), ("more.txt", True)]


def test_chat_titles_with_control_characters_are_refused_but_a_message_still_titles_its_chat(wb, chats):
    chat = chats.service(wb)
    with pytest.raises(InvalidArgument, match="chat title contains"):
        chat.create_session("hello\x00")
    s = chat.create_session()
    with pytest.raises(InvalidArgument, match=r"chat title contains .*U\+202E"):
        chat.rename(s.id, "spoof\u202e")
    chat.send(s.id, "what\x00 is \u202ethis")  # the title is made from the message: refused characters left out
    assert chat.session(s.id).title == "what is this"


def test_agent_memory_dataset_names_with_control_characters_are_refused(wb):
    memory = VectorMemory(wb.backend("memory"), HashEmbedder(dimension=16))
    with pytest.raises(InvalidArgument, match="dataset name contains"):
        memory.remember("a fact", dataset="notes\x00")
    memory.remember("a fact", dataset="notes")
    assert [h.dataset for h in memory.recall("a fact", dataset="notes")] == ["notes"]


INVISIBLE_NAMES = [
    ("re\u200bport.txt", "report.txt"),
    ("\ufeffreport.txt", "report.txt"),
    ("re\u00adport.txt", "report.txt"),
    ("re\u2060port\u2063.txt", "report.txt"),
    ("a\ufff9hidden\ufffbb.txt", "ahiddenb.txt"),
]


def test_invisible_characters_leave_a_file_name_at_every_door(system, wb, tmp_path):
    """Issue 38: the invisible characters that carry nothing in a name are taken out of a file
    name -- the same at the file store (REST and chat uploads), the Indexer (the app's upload and
    CLI ingest) and folder sync -- so the name kept is the one a person sees and can find; the
    characters scripts and emoji need (joiners, the marks) stay."""
    from knowledge._names import clean_file_name
    from knowledge.filestore.base import clean_name

    for given, kept in INVISIBLE_NAMES:
        assert clean_file_name(given) == kept and clean_name(given) == kept
    for name in ("عربي\u200f.txt", "👨\u200d👩\u200d👧.txt", "نامه\u200cها.txt"):
        assert clean_name(name) == name
    assert wb.save_attachment("up\u200bload.txt", None, b"uploaded").name == "upload.txt"
    r = wb.ingest_file("kb", b"zero width words", "re\u200bport.txt")
    assert r.ok and r.name == "report.txt"
    again = wb.ingest_file("kb", b"zero width words", "report.txt")
    assert again.outcome == "unchanged"  # the same name: what the person saw
    folder = tmp_path / "synced"
    folder.mkdir()
    (folder / "no\u200bte.txt").write_text("synced words")
    (folder / "bad\u202etxt.exe").write_text("spoofed")
    results = system.indexer.ingest_paths("kb2", [folder])  # CLI ingest of a folder
    assert sorted((x.name, x.ok) for x in results) == [("bad\u202etxt.exe", False), ("note.txt", True)]
    sync = wb.syncs.folder("kb3", folder)  # folder sync
    report = sync.apply(sync.plan())
    assert sorted(f.file_name for f in wb.file_records("kb3")) == ["note.txt"]
    [failed] = report.failed
    assert "U+202E" in failed.message and "disguise" in failed.message, failed


@pytest.mark.parametrize(
    "name, code",
    [
        ("invoice\u202efdp.exe", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("a\u2067b.txt", "U+2067 RIGHT-TO-LEFT ISOLATE"),
        ("x\u202ay.pdf", "U+202A LEFT-TO-RIGHT EMBEDDING"),
    ],
)
def test_a_bidi_control_in_a_file_name_is_refused_in_words_at_every_door(wb, name, code):
    from knowledge.filestore.base import clean_name

    for attempt in (lambda: clean_name(name), lambda: wb.save_attachment(name, None, b"x")):
        with pytest.raises(InvalidArgument) as e:
            attempt()
        assert code in str(e.value) and "invisible control character that can disguise" in str(e.value)
    r = wb.ingest_file("kb", b"words", name)
    assert not r.ok and code in r.message and "disguise a name's extension" in r.message
    assert wb.stored_files() == []
