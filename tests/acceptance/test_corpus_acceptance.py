"""Issue acceptance on the shared corpus with the real bundled model: the whole corpus in one
``ingest`` (every file indexed or reported with its specific reason, the batch never aborts), the
encrypted PDF with its password, and the corpus README's example questions answered in the top 3."""

from __future__ import annotations

import itertools
import json
import unicodedata

import pytest

from knowledge.cli import main
from tests.helpers.env import REPO, readme_questions

pytestmark = [pytest.mark.model, pytest.mark.slow]

QUESTIONS = [(question, "|".join(chapters)) for question, chapters in readme_questions()]
README_SET = REPO / "tests" / "data" / "corpus_readme_questions.tsv"


@pytest.fixture
def ingested(corpus_store):
    """The whole corpus ingested once per session into store "demo" (conftest.corpus_store)."""
    return corpus_store


def run_text(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    capsys.readouterr()
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_the_whole_corpus_in_one_go(ingested, capsys, monkeypatch):
    data, code = ingested
    monkeypatch.setenv("KNOWLEDGE_DATA_DIR", data)
    assert code == 1  # some files cannot be indexed, and say why; the batch went on
    _, files = run_json(capsys, "--data-dir", data, "files", "demo", "--json")
    by_name = {f["name"]: f for f in files}
    assert by_name["libreoffice-writer-password.pdf"]["status"] == "failed"
    assert by_name["libreoffice-writer-password.pdf"]["error"] == "PasswordRequired"
    assert by_name["imagemagick-images.pdf"]["status"] == "failed"
    assert by_name["imagemagick-images.pdf"]["error"] == "EmptyDocument"
    assert "no text found, even by OCR" in by_name["imagemagick-images.pdf"]["reason"]  # what a person reads
    assert by_name["pdflatex-4-pages.pdf"]["pages"] == 4 and by_name["pdflatex-4-pages.pdf"]["chunks"] > 0
    assert by_name["hdr-header-footer.docx"]["status"] == "done"
    chapters = [f for f in files if f["name"].startswith("ch") and f["name"].endswith(".md")]
    assert len(chapters) >= 100 and all(f["status"] == "done" for f in chapters)
    assert all(f["reason"] for f in files if f["status"] == "failed")


def test_the_encrypted_pdf_with_its_password(ingested, capsys):
    data, _ = ingested
    from tests.helpers.env import CORPUS

    pdf = str(CORPUS / "pdf" / "libreoffice-writer-password.pdf")
    code, results = run_json(capsys, "--data-dir", data, "ingest", "demo", pdf, "--password", "openpassword", "--json")
    assert code == 0 and results[0]["outcome"] == "indexed" and results[0]["chunks"] > 0


def test_the_ligature_and_page_provenance(ingested, capsys):
    data, _ = ingested
    _, hits = run_json(capsys, "--data-dir", data, "search", "demo", "the misfits the rebels", "-k", "3", "--json")
    assert any(h["file_name"] == "crazyones-pdfa.pdf" and "misfits" in h["text"] for h in hits)


@pytest.mark.parametrize("question,chapters", QUESTIONS)
def test_example_questions_find_their_chapter_in_the_top_3(ingested, capsys, question, chapters):
    """Each of the corpus README's questions: a chapter that answers it (any of those the README
    names) among the top 3 hits."""
    data, _ = ingested
    _, hits = run_json(capsys, "--data-dir", data, "search", "demo", question, "-k", "3", "--json")
    assert set(chapters.split("|")) & {h["file_name"] for h in hits}, [h["file_name"] for h in hits]
    assert all(h["fused_score"] is not None for h in hits)  # hybrid search is the default


def test_an_exact_rare_word_is_found_by_words_only_search(ingested, capsys):
    data, _ = ingested
    _, hits = run_json(capsys, "--data-dir", data, "search", "demo", "misfits", "-k", "5", "--mode", "lexical", "--json")
    assert "crazyones-pdfa.pdf" in [h["file_name"] for h in hits]
    # the stored text keeps what the file says: the corpus README writes the word with the "ﬁ"
    # ligature too, which the index folds (NFKC) and the reader sees as "misfits"
    assert all("misfits" in unicodedata.normalize("NFKC", h["text"]).lower() for h in hits)


# The CLI's chat and eval over the same store. They live in this module so that pytest-xdist (one
# module per process) ingests the corpus once per run, not once per process that asks for it.


def test_chat_over_a_store_cites_the_chapter_that_answers(ingested, capsys):
    """``chat --store demo`` over the Rust book (in the corpus store): Deref coercion cites
    ch15-02-deref.md first; each of the corpus README's questions shows an answering chapter in its
    Sources or among the first 3 passages also searched, and at least 4 of the 8 quote their first
    sentence from one (5 of 8 on the book alone, 2026-12-05: the sentence picker does not weigh the
    passage's rank; noted in docs/chat.md)."""
    data, _ = ingested
    code, out, err = run_text(capsys, "--data-dir", data, "chat", "--store", "demo", "What is Deref coercion?", "--json")
    assert code == 0, err
    reply = json.loads(out)
    assert reply["stores"] == ["demo"]
    assert reply["citations"][0]["file_name"] == "ch15-02-deref.md"
    assert reply["citations"][0]["source"] == "demo"
    assert "The sentences of demo that best answer" in reply["answer"]
    first_right = 0
    for question, chapters in QUESTIONS:
        code, out, err = run_text(capsys, "--data-dir", data, "chat", "--store", "demo", question, "--json")
        reply = json.loads(out)
        cited = [c["file_name"] for c in reply["citations"]]
        shown = cited + [c["file_name"] for c in reply["also_searched"][:3]]
        assert code == 0 and set(chapters.split("|")) & set(shown), (question, shown)
        first_right += bool(cited) and cited[0] in set(chapters.split("|"))
    assert first_right >= 4, first_right
    code, out, _ = run_text(capsys, "--data-dir", data, "chat", "--list", "--json")
    sessions = json.loads(out)
    assert len(sessions) == 1 + len(QUESTIONS) and all(s["stores"] == ["demo"] for s in sessions)
    code, out, _ = run_text(capsys, "--data-dir", data, "stores", "--json")
    assert [s["name"] for s in json.loads(out)] == ["demo"]  # the chats' own stores are not listed


def independent_rr(hits: list[dict], relevant: set[str]) -> float:
    """1 / rank of the first hit from a relevant file in the printed order, 0 when none; hits whose
    printed ranking keys are equal are averaged over all their orders (brute force)."""
    keys = [(h["fused_score"], h["score"]) for h in hits]
    groups = [list(g) for _, g in itertools.groupby(range(len(hits)), key=lambda i: keys[i])]
    total, count = 0.0, 0
    for order in itertools.product(*[itertools.permutations(g) for g in groups]):
        seq = [i for part in order for i in part]
        rank = next((r for r, i in enumerate(seq, 1) if hits[i]["file_name"] in relevant), None)
        total += 1 / rank if rank and rank <= 10 else 0.0
        count += 1
    return total / count


def test_the_readme_questions_mrr_equals_one_computed_from_search(ingested, capsys):
    data, _ = ingested
    lines = README_SET.read_text().splitlines()[1:]
    rrs = []
    for ln in lines:
        question, relevant = ln.split("\t")
        code, out, _ = run_text(capsys, "--data-dir", data, "search", "demo", question, "-k", "10", "--json")
        assert code == 0
        rrs.append(independent_rr(json.loads(out), {r.strip() for r in relevant.split(";")}))
    expected = sum(rrs) / len(rrs)

    code, out, _ = run_text(capsys, "--data-dir", data, "eval", "demo", str(README_SET), "--json", "--no-save")
    assert code == 0
    (hybrid,) = json.loads(out)
    assert hybrid["metrics"]["MRR@10"] == pytest.approx(expected, abs=1e-6)
    code, out, _ = run_text(capsys, "--data-dir", data, "eval", "demo", str(README_SET), "--no-save")
    row = next(ln.split() for ln in out.splitlines() if ln.startswith("Hybrid"))
    assert row[5] == f"{expected:.3f}"  # the printed MRR@10
    assert expected >= 0.5  # every README question finds its chapter in the top 3 (test_corpus_acceptance)


def _table_scorer():
    """The corpus's own table scorer (``pdf-tables/score.py``, standard library only), loaded
    from the corpus folder: the figures are the ones issue 43 names, not a copy's."""
    import importlib.util

    from tests.helpers.env import CORPUS

    spec = importlib.util.spec_from_file_location("pdf_tables_score", CORPUS / "pdf-tables" / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pdf_tables_are_kept_as_tables(ingested, capsys, tmp_path):
    """Issue 43's acceptance: the store's export, scored by the corpus's ``pdf-tables/score.py``
    (default template, bundled model), keeps the rows of the PDFs' tables as rows: structure >= 0.90,
    row recall >= 0.90, cell recall >= 0.95 overall, and no source below 0.80 of its rows."""
    from tests.helpers.env import CORPUS

    data, _ = ingested
    bundle = tmp_path / "demo.kb"
    code, _, err = run_text(capsys, "--data-dir", data, "export", "demo", str(bundle))
    assert code == 0, err
    score = _table_scorer()
    folder = CORPUS / "pdf-tables"
    expectations = [json.loads(line) for line in (folder / "expectations.jsonl").read_text().splitlines() if line]
    files = sorted({e["file"] for e in expectations})
    texts = score.load_kb(str(bundle), str(folder), files)
    assert len(texts) == len(files), sorted(set(files) - set(texts))
    results = []
    for e in expectations:
        r = score.score_table(e, texts.get(e["file"]))
        r.update(source=e["source"], file=e["file"])
        results.append(r)
    overall = score.pool(results)
    assert overall["structure"] >= 0.90 and overall["row_recall"] >= 0.90, overall
    assert overall["cell_recall"] >= 0.95, overall
    for source in {r["source"] for r in results}:
        pooled = score.pool([r for r in results if r["source"] == source])
        assert pooled["row_recall"] >= 0.80, (source, pooled)
