"""Retrieval evaluation (knowledge/evaluation/): the metric functions against hand-computed values,
question files in and out, runs on a store (fake embedder), the catalog, fusion weights and chunk
trials."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest
from fpdf import FPDF

from knowledge import evaluation as ev
from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, StoreNotFound
from knowledge.service.fusion import reciprocal_rank_fusion
from knowledge.service.search import SearchRequest
from knowledge.system import System
from knowledge.workbench import Workbench
from tests.helpers.env import REPO

QUESTIONS_DIR = REPO / "tests" / "data"


# -- metrics, by hand ------------------------------------------------------------------------------
def test_first_relevant_at_rank_2():
    flags = [False, True, False, True]
    assert ev.reciprocal_rank(flags) == 0.5
    assert ev.recall_at(flags, 1) == 0 and ev.recall_at(flags, 2) == 1 and ev.recall_at(flags, 3) == 1
    assert ev.ndcg_at(flags) == pytest.approx(1 / math.log2(3))  # 0.6309...
    assert ev.first_rank_distribution(flags) == [(2, 1.0)]


def test_relevant_at_rank_1():
    assert ev.reciprocal_rank([True]) == 1.0 and ev.ndcg_at([True]) == 1.0 and ev.recall_at([True], 1) == 1.0


def test_no_relevant_hit_scores_zero_everywhere():
    flags = [False] * 10
    assert ev.reciprocal_rank(flags) == 0 and ev.ndcg_at(flags) == 0
    assert all(ev.recall_at(flags, n) == 0 for n in (1, 3, 5, 10))
    assert ev.first_rank_distribution(flags) == [] and ev.reciprocal_rank([]) == 0


def test_relevant_at_rank_11_is_outside_the_top_10():
    flags = [False] * 10 + [True]
    assert ev.reciprocal_rank(flags, k=10) == 0
    assert ev.ndcg_at(flags, k=10) == 0
    assert ev.recall_at(flags, 10) == 0
    assert ev.reciprocal_rank(flags, k=11) == pytest.approx(1 / 11)  # counted once the cut-off allows it


def test_ties_average_over_the_orders_of_the_tied_hits():
    # ranks 2, 3, 4 are tied; one of them is relevant: it is at 2, 3 or 4 with probability 1/3 each
    scores = [0.9, 0.8, 0.8, 0.8, 0.5]
    flags = [False, False, True, False, False]
    assert ev.reciprocal_rank(flags, scores=scores) == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)  # 13/36
    assert ev.recall_at(flags, 1, scores) == 0
    assert ev.recall_at(flags, 2, scores) == pytest.approx(1 / 3)
    assert ev.recall_at(flags, 3, scores) == pytest.approx(2 / 3)
    assert ev.recall_at(flags, 5, scores) == pytest.approx(1)
    assert ev.ndcg_at(flags, scores=scores) == pytest.approx((1 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(5)) / 3)
    # without the scores the order is taken as given
    assert ev.reciprocal_rank(flags) == pytest.approx(1 / 3)


def test_ties_with_two_relevant_in_the_group():
    # three hits tied at the top, two relevant: the first relevant is at 1 (p = 2/3) or 2 (p = 1/3)
    flags, scores = [True, False, True], [1.0, 1.0, 1.0]
    assert ev.first_rank_distribution(flags, scores) == [(1, pytest.approx(2 / 3)), (2, pytest.approx(1 / 3))]
    assert ev.reciprocal_rank(flags, scores=scores) == pytest.approx(2 / 3 + 1 / 6)  # 5/6


def test_tie_aware_metrics_equal_the_mean_over_every_order():
    rng = random.Random(7)
    for _ in range(60):
        n = rng.randint(1, 7)
        scores = [rng.choice([3, 2, 2, 1]) for _ in range(n)]
        scores.sort(reverse=True)
        flags = [rng.random() < 0.3 for _ in range(n)]
        groups = [list(g) for _, g in itertools.groupby(range(n), key=lambda i: scores[i])]
        orders = list(itertools.product(*[list(itertools.permutations(g)) for g in groups]))
        rr = nd = r3 = 0.0
        for order in orders:
            seq = [flags[i] for part in order for i in part]
            first = next((r for r, f in enumerate(seq, 1) if f), None)
            if first is not None:
                rr += 1 / first if first <= 5 else 0
                nd += 1 / math.log2(1 + first) if first <= 5 else 0
                r3 += first <= 3
        m = len(orders)
        assert ev.reciprocal_rank(flags, 5, scores) == pytest.approx(rr / m)
        assert ev.ndcg_at(flags, 5, scores) == pytest.approx(nd / m)
        assert ev.recall_at(flags, 3, scores) == pytest.approx(r3 / m)


def test_metric_names_follow_k():
    assert ev.metric_names(10) == ["recall@1", "recall@3", "recall@5", "recall@10", "MRR@10", "nDCG@10"]
    assert ev.metric_names(3) == ["recall@1", "recall@3", "MRR@3", "nDCG@3"]


# -- question files --------------------------------------------------------------------------------
def test_tsv_with_header_alternatives_pages_and_snippets():
    data = (
        b"question\trelevant\n"
        b"What is Deref coercion?\tch15-02-deref.md\n"
        b"panic! or Result?\tch09-00-error-handling.md; ch09-01-unrecoverable-errors-with-panic.md\n"
        b"What is on page three?\treport.pdf#page=3\n"
        b"Who said hello?\ttext:Hello,   World\n"
    )
    fmt, qs = ev.parse_questions(data, "set.tsv")
    assert fmt == "tsv" and len(qs) == 4
    assert [c.file for c in qs[1].relevant] == ["ch09-00-error-handling.md", "ch09-01-unrecoverable-errors-with-panic.md"]
    assert qs[2].relevant == (ev.Criterion("report.pdf", 3),)
    assert qs[3].relevant == (ev.Criterion(text="Hello,   World"),)


def test_csv_and_jsonl_give_the_same_questions():
    csv_data = 'question,relevant\n"Where, exactly?","a.md;b.pdf#page=2"\n'
    jsonl = '{"question": "Where, exactly?", "relevant": ["a.md", {"file": "b.pdf", "page": 2}]}\n\n'
    assert ev.parse_questions(csv_data, "s.csv")[1] == ev.parse_questions(jsonl, "s.jsonl")[1]
    # the format is sniffed when the name says nothing
    assert ev.parse_questions(jsonl, "upload")[0] == "jsonl"
    assert ev.parse_questions("q?\ta.md\n", "upload")[0] == "tsv"


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_export_gives_the_same_file_back(fmt):
    _, qs = ev.parse_questions((QUESTIONS_DIR / "corpus_readme_questions.tsv").read_bytes(), "x.tsv")
    qs.append(ev.Question('Tabs, commas and "quotes"?', (ev.Criterion("r.pdf", 2), ev.Criterion(text="a\tb"))))
    qset = ev.QuestionSet("readme", tuple(qs), fmt)
    data, name, _ = ev.export_questions(qset)
    assert name == f"readme.{fmt}"
    assert ev.parse_questions(data, name) == (fmt, qs)


def test_a_snippet_with_a_semicolon_exports_as_jsonl_only():
    qset = ev.QuestionSet("s", (ev.Question("q", (ev.Criterion(text="a; b"),)),), "jsonl")
    data, name, _ = ev.export_questions(qset)
    assert ev.parse_questions(data, name)[1] == list(qset.questions)
    with pytest.raises(InvalidArgument, match="JSONL"):
        ev.export_questions(qset, "tsv")


def test_bad_lines_are_named_and_nothing_is_kept():
    data = "question\trelevant\nFine?\ta.md\nno tab here\n\tb.md\nEmpty relevant?\t ; \nBad page?\tx.pdf#page=0\n"
    with pytest.raises(InvalidArgument) as info:
        ev.parse_questions(data, "bad.tsv")
    msg = str(info.value)
    assert "line 3" in msg and "line 4" in msg and "line 5" in msg and "Nothing was kept" in msg
    with pytest.raises(InvalidArgument, match="line 2: not JSON"):
        ev.parse_questions('{"question": "a", "relevant": "a.md"}\n{oops\n', "b.jsonl")
    with pytest.raises(InvalidArgument, match="not UTF-8"):
        ev.parse_questions(b"\xff\xfe\x00bad", "c.tsv")
    with pytest.raises(InvalidArgument, match="no questions"):
        ev.parse_questions("question\trelevant\n", "d.tsv")


def test_rows_from_the_table_editor():
    rows = [
        {"question": "A?", "relevant": "a.md; text:x"},
        {"question": None, "relevant": None},
        {"question": "", "relevant": ""},
    ]
    assert ev.questions_from_rows(rows) == [ev.Question("A?", (ev.Criterion("a.md"), ev.Criterion(text="x")))]
    with pytest.raises(InvalidArgument, match="row 2"):
        ev.questions_from_rows([{"question": "A?", "relevant": "a.md"}, {"question": "B?", "relevant": ""}])


def test_the_rust_book_set_has_40_questions_with_chapters_that_exist(corpus):
    book = corpus / "md" / "rust-book"
    fmt, qs = ev.parse_questions((QUESTIONS_DIR / "rust_book_questions.tsv").read_bytes(), "rust_book_questions.tsv")
    assert fmt == "tsv" and len(qs) >= 40 and len({q.text for q in qs}) == len(qs)
    for q in qs:
        assert q.relevant and all(c.file and (book / c.file).is_file() for c in q.relevant), q


def test_the_readme_set_is_the_corpus_readme_table(corpus):
    """tests/data/corpus_readme_questions.tsv is built from the corpus README's table of examples."""
    readme = (corpus / "README.md").read_text()
    table = readme.split("## Example questions over md/rust-book", 1)[1]
    rows = [ln.strip().strip("|").split("|") for ln in table.splitlines() if ln.startswith("| ") and ".md" in ln]
    expected = [(q.strip(), sorted(set(__import__("re").findall(r"ch[\w-]+\.md", r)))) for q, r in rows]
    _, qs = ev.parse_questions((QUESTIONS_DIR / "corpus_readme_questions.tsv").read_bytes(), "x.tsv")
    assert [(q.text, sorted(c.file for c in q.relevant)) for q in qs] == expected
    assert len(qs) == 8 and len(qs[4].relevant) == 3  # panic!/Result: ch09-00, ch09-01 or ch09-03


# -- runs on a store (fake embedder) ---------------------------------------------------------------
PASTA = "# Pasta\n\nPasta is cooked in plenty of salted boiling water until it is al dente.\n"
STARS = "# Stars\n\nA telescope gathers light from distant planets and galaxies.\n"
BREAD = "# Bread\n\nKnead the dough for ten minutes, then let the bread rise for an hour.\n"


def two_page_pdf(path):
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in (
        "The first page talks about owls hunting mice at night.",
        "The second page talks about sourdough starters and flour.",
    ):
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))
    return path


@pytest.fixture
def system(tmp_path):
    settings = load_settings(
        data_dir=tmp_path / "data", vector_store={"max_chunk_size_tokens": 40, "chunk_overlap_tokens": 8}
    )
    s = System(settings, embedder_factory=lambda model: HashEmbedder(dimension=64, max_tokens=64))
    yield s
    s.close()


@pytest.fixture
def wb(system, tmp_path):
    w = Workbench(system)
    for name, text in (("pasta.md", PASTA), ("stars.md", STARS), ("bread.md", BREAD)):
        w.ingest_file("notes", text.encode(), name)
    w.ingest_file("notes", two_page_pdf(tmp_path / "animals.pdf"))
    return w


def qset(*rows: tuple[str, str], name: str = "s") -> ev.QuestionSet:
    return ev.QuestionSet(name, tuple(ev.Question(q, tuple(ev.parse_relevant(r))) for q, r in rows))


def test_a_run_scores_each_question_from_its_ranking(wb):
    s = qset(
        ("salted boiling water pasta", "pasta.md"),
        ("sourdough flour starters", "animals.pdf#page=2"),
        ("owls hunting mice", "animals.pdf#page=2"),  # page 1 answers: the right file, wrong page
        ("telescope galaxies", "text:distant planets"),
        ("knead dough bread", "nothere.md"),
    )
    for mode in ev.MODES:
        run = wb.evaluations.evaluate("notes", s, mode, k=3)
        by_q = {q.question: q for q in run.questions}
        assert by_q["salted boiling water pasta"].first_rank == 1
        assert by_q["sourdough flour starters"].first_rank == 1
        assert by_q["telescope galaxies"].first_rank == 1
        assert by_q["knead dough bread"].first_rank is None
        owls = by_q["owls hunting mice"]
        assert owls.hits[0].file_name == "animals.pdf" and owls.hits[0].page == 1 and not owls.hits[0].relevant
        # the means are the means of the per-question values, which follow from the ranks
        for q in run.questions:
            rr = 1 / q.first_rank if q.first_rank else 0.0
            assert q.metrics["MRR@3"] == pytest.approx(rr)
            assert q.metrics["recall@1"] == (q.first_rank == 1)
        assert run.metrics["MRR@3"] == pytest.approx(sum(q.metrics["MRR@3"] for q in run.questions) / 5)
        assert set(run.metrics) == {"recall@1", "recall@3", "MRR@3", "nDCG@3"}
        assert all(q.latency_ms > 0 and len(q.hits) <= 3 for q in run.questions)
        assert run.mode == mode and run.chunking == {"size": 40, "overlap": 8} and run.template == "default"
        assert run.search == {"fusion_weight": 0.6, "candidates": 50, "rank_constant": 10, "rerank": 0}  # 0: not reranked


def test_runs_and_sets_are_kept_in_the_catalog(wb, system):
    store = wb.evaluations
    _, qs = ev.parse_questions("pasta water?\tpasta.md\nstars?\tstars.md; text:telescope\n", "mine.tsv")
    saved = store.save_set("mine", qs, "tsv")
    assert store.get_set("mine").questions == tuple(qs) and store.set_names() == ["mine"]
    assert saved.sha256 == ev.QuestionSet("x", tuple(qs)).sha256
    run = store.save_run(wb.evaluations.evaluate("notes", saved, "vector"))
    again = store.get_run(run.id)
    assert again.metrics == run.metrics and again.questions == run.questions and again.store == "notes"
    assert again.chunking == run.chunking and again.set_sha256 == saved.sha256
    assert [r.id for r in store.runs(set_name="mine")] == [run.id]
    assert store.runs(store="other") == []
    # a reopened catalog (another process) sees them: the schema migrated and the rows committed
    system.catalog.close()
    assert wb.evaluations.get_run(run.id).mrr == run.mrr
    assert store.delete_set("mine") and store.runs(set_name="mine")  # runs stay as history
    with pytest.raises(ev.QuestionSetNotFound):
        store.get_set("mine")
    with pytest.raises(ev.RunNotFound):
        store.get_run("nope")
    with pytest.raises(InvalidArgument):
        store.save_set(" ", qs)


def test_bad_arguments(wb):
    s = qset(("a", "a.md"))
    with pytest.raises(StoreNotFound):
        wb.evaluations.evaluate("nosuch", s)
    with pytest.raises(InvalidArgument, match="mode"):
        wb.evaluations.evaluate("notes", s, "fuzzy")
    with pytest.raises(InvalidArgument, match="k must"):
        wb.evaluations.evaluate("notes", s, k=0)
    with pytest.raises(InvalidArgument, match="fusion weight"):
        wb.evaluations.evaluate("notes", s, fusion_weight=1.5)


def test_worse_questions_come_first():
    def run(ranks):
        return ev.EvalRun(
            "r",
            "s",
            "h",
            "st",
            "hybrid",
            10,
            None,
            None,
            None,
            {},
            {},
            tuple(ev.QuestionResult(f"q{i}", "x", r, {"MRR@10": 1 / r if r else 0.0}, 1.0) for i, r in enumerate(ranks)),
            None,
            0.0,
        )  # type: ignore[arg-type]

    rows = ev.worse_questions(run([1, 1, 1, None, 3]), run([2, None, 1, 1, 1]))
    assert [r["question"] for r in rows] == ["q1", "q0", "q2", "q3", "q4"]  # -1, -0.5, 0, +1, +2/3
    assert rows[0]["before"] == 1 and rows[0]["after"] is None and rows[0]["change"] == -1


def test_the_fusion_weight_moves_hybrid_between_the_two_rankings(wb):
    query = "pasta bread owls stars"
    vector = [h.id for h in wb.search("notes", query, k=6, mode="vector")]
    words = [h.id for h in wb.search("notes", query, k=6, mode="lexical")]
    assert vector[: len(words)] != words  # else the weight could not show
    evals = wb.evaluations
    assert [
        h.id for h in evals.tuned(fusion_weight=1.0).search("notes", SearchRequest(query, len(vector), mode="hybrid")).hits
    ] == vector
    assert [
        h.id for h in evals.tuned(fusion_weight=0.0).search("notes", SearchRequest(query, len(words), mode="hybrid")).hits
    ] == words
    assert wb.settings.search.fusion_weight == 0.6  # the shared settings are untouched
    runs = wb.evaluations.sweep_fusion_weight("notes", qset(("pasta water", "pasta.md")), weights=(0.0, 1.0))
    assert [r.search["fusion_weight"] for r in runs] == [0.0, 1.0]


def test_the_rank_constant_is_the_hybrid_fusions_k_and_is_kept_with_the_run(wb):
    """``search.rank_constant`` (default 10) is k in w_r / (k + rank): a run records the constant it
    searched with."""
    assert wb.settings.search.rank_constant == 10
    query = "pasta bread owls stars"
    top = wb.search("notes", query, k=3, mode="hybrid")
    w = wb.settings.search.fusion_weight
    # the best passage is first in at least one ranking: at least 2 min(w, 1 - w) / 11 with k = 10,
    # while with k = 60 no passage reaches 2 / 61
    wide = wb.evaluations.tuned(rank_constant=60).search("notes", SearchRequest(query, 3, mode="hybrid")).hits
    assert max(h.fused_score for h in wide) <= 2 / 61 + 1e-9 < min(2 * min(w, 1 - w) / 11, max(h.fused_score for h in top))
    run = wb.evaluations.evaluate("notes", qset(("pasta water", "pasta.md")), "hybrid", rank_constant=60)
    assert run.search["rank_constant"] == 60
    assert wb.evaluations.evaluate("notes", qset(("pasta water", "pasta.md")), "hybrid").search["rank_constant"] == 10
    with pytest.raises(InvalidArgument, match="rank constant"):
        wb.evaluations.evaluate("notes", qset(("pasta water", "pasta.md")), rank_constant=0)


def test_weighted_reciprocal_rank_fusion():
    fused = reciprocal_rank_fusion(["a", "b"], ["b", "c"], weights=(1.5, 0.5))
    assert fused == {"a": pytest.approx(1.5 / 61), "b": pytest.approx(1.5 / 62 + 0.5 / 61), "c": pytest.approx(0.5 / 62)}
    assert reciprocal_rank_fusion(["a"], ["a"]) == reciprocal_rank_fusion(["a"], ["a"], weights=(1, 1))
    with pytest.raises(ValueError):
        reciprocal_rank_fusion(["a"], ["b"], weights=(1,))


def test_a_files_text_is_rebuilt_from_its_chunks(wb, tmp_path):
    long = "# Long\n\n" + "\n\n".join(f"Paragraph {i} says something about topic {i} at length." for i in range(40))
    wb.ingest_file("notes", long.encode(), "long.md")
    vs = wb.vector_store("notes")
    for fid in {f.file_id for f in vs.list_files()}:
        points = list(vs.collection.scroll(where={"file_id": fid}))
        doc = ev.documents_from_chunks(points)
        for p in points:  # every chunk's text is at its span in the rebuilt text, with its page and heading
            s, e = p.payload["char_start"], p.payload["char_end"]
            assert doc.text[s:e] == p.payload["text"]
            sec = next(x for x in doc.sections if x.char_start <= s < x.char_end)
            assert (sec.page, sec.heading) == (p.payload.get("page"), p.payload.get("heading"))


def test_chunk_trials_evaluate_temporary_copies_and_remove_them(wb):
    long = "# Long\n\n" + "\n\n".join(f"Paragraph {i} says something about topic {i} at length." for i in range(40))
    wb.ingest_file("notes", long.encode(), "long.md")
    s = qset(("topic 17 at length", "text:Paragraph 17 says"), ("salted boiling water", "pasta.md"))
    seen = []
    trials = wb.evaluations.try_chunkings(
        "notes", s, [(16, 4), (48, 0)], modes=("hybrid", "vector"), progress=lambda msg, f: seen.append(f)
    )
    assert [(t.size, t.overlap) for t in trials] == [(16, 4), (48, 0)]
    assert trials[0].chunks > trials[1].chunks > 0
    assert all(len(t.runs) == 2 and t.build_seconds > 0 for t in trials)
    assert all(r.chunking["size"] == t.size and r.store == "notes" for t in trials for r in t.runs)
    assert seen and seen[-1] == pytest.approx(1.0) and seen == sorted(seen)
    assert wb.store_names() == ["notes"]  # the copies are gone
    assert not any(name.startswith("notes~try") for name in wb.backend().list_collections())
    with pytest.raises(InvalidArgument):
        wb.evaluations.try_chunkings("notes", s, [(16, 4)] * 5)
    with pytest.raises(InvalidArgument):
        wb.evaluations.try_chunkings("notes", s, [(16, 16)])
    tpl = wb.evaluations.keep_as_template("notes", 48, 0)
    assert tpl.name == "default-48-0" and wb.template("default-48-0").max_chunk_size_tokens == 48


def test_load_question_set_by_file_or_name(wb, tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"question": "pasta?", "relevant": "pasta.md"}) + "\n")
    assert wb.evaluations.load_question_set(str(f)).name == "mine"
    wb.evaluations.save_set("stored", [ev.Question("q", (ev.Criterion("a.md"),))])
    assert wb.evaluations.load_question_set("stored").questions[0].text == "q"
    with pytest.raises(ev.QuestionSetNotFound):
        wb.evaluations.load_question_set("neither")
