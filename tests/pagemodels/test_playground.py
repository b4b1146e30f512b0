"""The search playground's logic (knowledge.pagemodels.playground), with the fake embedder."""

from __future__ import annotations

import re

import numpy as np
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import InvalidArgument, StoreNotFound
from knowledge.pagemodels import playground as pg
from knowledge.pagemodels import storemap as sm
from knowledge.service.templates import make_template
from knowledge.text import highlight as hl
from knowledge.vectorstore.store import Chunk, Hit
from knowledge.workbench import Workbench


def visible(markup: str) -> str:
    """What a reader sees of the markup: tags dropped, character references decoded."""
    import html

    return html.unescape(re.sub(r"<br>", "\n", re.sub(r"</?mark>", "", markup)))


def marked(markup: str) -> list[str]:
    import html

    return [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", markup)]


# -- highlighting ----------------------------------------------------------------------------------
def test_query_terms_skip_stopwords_short_words_and_punctuation():
    assert hl.query_terms("What is the (best) way to install Rust?") == ["install", "best", "rust", "way"]
    assert hl.query_terms("a an of to") == []
    assert hl.query_terms(".*+?[]()|^$\\") == []


def test_highlight_marks_whole_words_case_insensitively():
    out = hl.highlight("Vectorsx store vector data; a VECTOR-store.", "vector store")
    assert marked(out) == ["store", "vector", "VECTOR", "store"]
    assert "<mark>Vectorsx" not in out  # a longer word is not a match
    assert visible(out) == "Vectorsx store vector data; a VECTOR-store."


def test_highlight_marks_words_with_the_same_stem_as_bm25_matches_them():
    out = hl.highlight("Iterating over vectors: each iteration iterates.", "iterate vector")
    assert marked(out) == ["Iterating", "vectors", "iteration", "iterates"]  # all stem to iter / vector
    assert marked(hl.highlight("Over and over the overs", "over")) == []  # a stop word is never marked


def test_highlight_escapes_markdown_and_html_in_the_chunk():
    text = "<script>alert(1)</script> **bold** _it_ `code` [link](http://x) $x$ :red[red] # h & &amp; \\ |a|"
    out = hl.highlight(text, "script alert bold code link red")
    assert visible(out) == text.replace("://", ":\u2060//")  # a word joiner keeps Streamlit from linking it
    # nothing a Markdown or HTML renderer would interpret is left, apart from our own tags
    stripped = re.sub(r"</?mark>|<br>|&#\d+;", "", out)
    assert not re.search(r"[<>*_`\[\]$:#&\\|()]", stripped)
    assert marked(out) == ["script", "alert", "script", "bold", "code", "link", "red", "red"]


def test_highlight_counts_underscore_as_punctuation():
    out = hl.highlight("We call it _borrowing_ and snake_case names", "borrowing snake")
    assert marked(out) == ["borrowing", "snake"]
    assert hl.query_terms("snake_case") == ["snake", "case"]


def test_highlight_treats_regex_characters_in_the_query_as_text():
    out = hl.highlight("cost (a+b)* and a.b, literally", "(a+b)* .* cost[ literally")
    assert marked(out) == ["cost", "literally"]
    assert hl.highlight("x", "[[[(((") == "x"


def test_highlight_never_matches_inside_an_escape():
    # "amp" and "lt" appear in the escaped form of & and <; they must not be marked there
    out = hl.highlight("a & b < c amp", "amp")
    assert marked(out) == ["amp"]
    assert visible(out) == "a & b < c amp"


def test_highlight_unicode_words_and_normalisation():
    decomposed = "Cafe\u0301 au lait, ÄRGER und Ärger; naïve 東京 café"
    out = hl.highlight(decomposed, "café ärger NAÏVE")
    assert marked(out) == ["Café", "ÄRGER", "Ärger", "naïve", "café"]
    assert "東京" in out


def test_highlight_keeps_line_breaks_and_handles_empty_input():
    assert hl.highlight("one\ntwo", "two") == "one<br><mark>two</mark>"
    assert hl.highlight("", "anything") == ""
    assert hl.highlight("text", "") == "text"


def test_snippet_centres_on_the_first_match():
    text = " ".join(["filler"] * 200 + ["needle"] + ["after"] * 200)
    s = hl.snippet(text, "needle", width=120)
    assert "needle" in s and s.startswith("… ") and s.endswith(" …")
    assert len(s) <= 130
    assert hl.snippet("short text", "nothing") == "short text"
    assert hl.snippet(text, "absent", width=50).startswith("filler")


# -- filters ---------------------------------------------------------------------------------------
def test_parse_fields_reads_json_scalars_and_plain_text():
    text = 'page = 2\nheading = Guide > Install\n\n# a comment\nyear = "2024"\nok = true\nnone = null\nx = 1.5'
    assert pg.parse_fields(text) == {
        "page": 2,
        "heading": "Guide > Install",
        "year": "2024",
        "ok": True,
        "none": None,
        "x": 1.5,
    }
    assert pg.parse_fields("") == {} and pg.parse_fields(None) == {}
    assert pg.parse_fields("tags = [1, 2]") == {"tags": "[1, 2]"}
    assert pg.parse_fields("eq = a = b") == {"eq": "a = b"}


@pytest.mark.parametrize("bad, words", [("page 2", "field = value"), ("= 3", "field = value"), ("a = 1\na = 2", "twice")])
def test_parse_fields_says_what_is_wrong(bad, words):
    with pytest.raises(InvalidArgument, match=words):
        pg.parse_fields(bad)


def test_build_where_from_the_form():
    assert pg.build_where(None, "") is None
    assert pg.build_where("f1", "") == {"file_id": "f1"}
    assert pg.build_where("f1", "page = 3") == {"page": 3, "file_id": "f1"}
    assert pg.build_where(None, {"heading": "A"}) == {"heading": "A"}
    with pytest.raises(InvalidArgument, match="another file_id"):
        pg.build_where("f1", "file_id = f2")


# -- scores ----------------------------------------------------------------------------------------
def test_score_meaning_and_bar_follow_the_distance():
    assert "higher is better" in pg.score_meaning("cosine")
    assert "lower is better" in pg.score_meaning("euclid")
    assert pg.score_fraction(0.7, "cosine") == pytest.approx(0.7)
    assert pg.score_fraction(-0.2, "cosine") == 0.0
    assert pg.score_fraction(0.0, "euclid") == 1.0
    assert pg.score_fraction(1.0, "manhattan") == pytest.approx(0.5)
    assert pg.score_fraction(float("nan"), "cosine") == 0.0


def test_provenance_names_file_page_heading_and_span():
    hit = Hit("f:2", 0.5, "f", "guide.pdf", 2, "t", page=3, char_start=10, char_end=90, heading="A > B")
    assert pg.provenance(hit) == "guide.pdf · page 3 · A > B · chars 10–90 · chunk 2"
    assert pg.provenance(Hit("f:0", 0.5, "f", None, 0, "t")) == "f · chunk 0"
    titled = Hit("f:0", 0.5, "f", "crazyones.pdf", 0, "t", metadata={"title": "The Crazy Ones"})
    assert pg.provenance(titled) == "The Crazy Ones (crazyones.pdf) · chunk 0"  # a title set in File details


# -- projection ------------------------------------------------------------------------------------
def test_pca_shapes_and_determinism():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(100, 16)).astype(np.float32)
    p1, p2 = sm.pca_2d(x), sm.pca_2d(x.copy())
    assert p1.components.shape == (2, 16) and p1.mean.shape == (16,)
    assert np.allclose(p1.components, p2.components)
    xy = p1.project(x)
    assert xy.shape == (100, 2)
    assert p1.project(x[0]).shape == (2,)
    assert np.allclose(np.linalg.norm(p1.components, axis=1), 1.0)
    assert p1.explained[0] >= p1.explained[1] > 0
    # the first component of data stretched along one axis is that axis
    stretched = x.copy()
    stretched[:, 3] *= 50
    assert np.argmax(np.abs(sm.pca_2d(stretched).components[0])) == 3
    assert sm.pca_2d(stretched).components[0][3] > 0  # sign fixed


def test_pca_degenerate_inputs():
    one = sm.pca_2d(np.ones((1, 4)))
    assert np.allclose(one.project(np.ones(4)), 0)
    line = sm.pca_2d(np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]))
    assert line.explained[0] == pytest.approx(1.0) and np.allclose(line.components[1], 0)
    with pytest.raises(InvalidArgument):
        sm.pca_2d(np.zeros((0, 3)))


# -- with a store ----------------------------------------------------------------------------------
@pytest.fixture
def wb():
    w = Workbench(load_settings(), embedder_factory=lambda model: HashEmbedder(dimension=16))
    yield w
    w.close()


def fill(wb: Workbench, store: str, files: dict[str, list[str]]) -> None:
    emb = wb.embedder()
    wb.create_store(store)
    vs = wb.vector_store(store)
    for name, texts in files.items():
        vectors = emb.embed_documents(texts)
        vs.replace_file(
            f"id-{name}",
            [Chunk(t, vectors[i], page=i + 1, metadata={"lang": "en"}) for i, t in enumerate(texts)],
            file_name=name,
        )


def test_timed_search_hits_threshold_and_distribution(wb):
    fill(
        wb,
        "s",
        {"a.txt": ["apples and pears", "the weather today", "apples apples"], "b.txt": ["pears only", "apples and pears"]},
    )  # a duplicate text, shown once
    run = pg.timed_search(wb, "s", "apples", k=3)
    assert run.hits[0].text in ("apples apples", "apples and pears")
    assert [h.text for h in run.hits].count("apples and pears") == 1
    assert len(run.hits) == 3 and len(run.top) == 4
    assert run.embed_ms >= 0 and run.search_ms >= 0 and run.total_ms == run.embed_ms + run.search_ms
    assert run.distance == "cosine" and run.query_vector.shape == (16,)
    best = run.hits[0].score
    strict = pg.timed_search(wb, "s", "apples", k=3, score_threshold=best, mode="vector")
    assert [h.score for h in strict.hits] == [h.score for h in run.hits if h.score >= best]
    assert len(strict.top) == 4  # the distribution ignores the threshold
    rows = pg.distribution_rows(strict)
    assert [r["rank"] for r in rows] == [1, 2, 3, 4] and sum(r["shown"] for r in rows) == len(strict.hits)
    assert {r["result"] for r in rows} == {"shown", pg.SHOWN_LABELS[False]}  # the legend's words, not true/false
    only_b = pg.timed_search(wb, "s", "apples", k=5, where=pg.build_where("id-b.txt", "page = 1"))
    assert [(h.file_name, h.page) for h in only_b.hits] == [("b.txt", 1)]


def test_the_threshold_never_hides_a_chunk_holding_the_querys_exact_words(wb):
    """The default threshold judges meaning: a rare word that only BM25 finds (its vector score low)
    is still shown in the words-only and combined rankings; a query no chunk holds stays empty."""
    fill(wb, "s", {"a.txt": ["the misfits and the rebels", "the weather today"], "b.txt": ["pears only"]})
    for mode in ("lexical", "hybrid"):
        run = pg.timed_search(wb, "s", "misfits", k=3, score_threshold=0.999, mode=mode)
        assert [h.text for h in run.hits] == ["the misfits and the rebels"], mode
    assert not pg.timed_search(wb, "s", "misfits", k=3, score_threshold=0.999, mode="vector").hits
    nonsense = pg.timed_search(wb, "s", "qzxv wplk", k=3, score_threshold=0.999)
    assert not nonsense.hits and nonsense.nothing_matched_well


def test_a_chunk_sharing_only_some_query_words_is_judged_by_meaning(wb):
    """Only a chunk holding every word of the query (stop words aside, stems matched) passes the
    threshold on its words; one sharing a common word or two is judged by its meaning score."""
    fill(
        wb,
        "s",
        {
            "zen.txt": ["Beautiful is better than ugly. Explicit is better than implicit."],
            "rust.txt": ["A slice is better than a copy here", "the weather today"],
        },
    )
    for mode in ("lexical", "hybrid"):
        run = pg.timed_search(wb, "s", "Beautiful is better than ugly", k=5, score_threshold=0.999, mode=mode)
        assert [h.file_name for h in run.hits] == ["zen.txt"], mode


def test_timed_search_threshold_follows_a_distance_store(wb):
    wb.save_template(make_template(name="far", embedding_model=wb.settings.embeddings.model, distance="euclid"))
    wb.create_store("e", "far")
    emb = wb.embedder()
    texts = ["apples and pears", "apples apples", "the weather today"]
    wb.vector_store("e").replace_file("f", [Chunk(t, v) for t, v in zip(texts, emb.embed_documents(texts))], "f.txt")
    run = pg.timed_search(wb, "e", "apples", k=3)
    assert run.distance == "euclid"
    scores = [h.score for h in run.hits]
    assert scores == sorted(scores) and scores[0] >= 0  # distances, best (lowest) first
    near = pg.timed_search(wb, "e", "apples", k=3, score_threshold=scores[1])
    assert [h.score for h in near.hits] == scores[:2]  # at most the threshold is kept
    assert pg.score_fraction(scores[0], run.distance) >= pg.score_fraction(scores[-1], run.distance)


def test_snippet_of_decomposed_unicode_finds_the_match():
    text = "Cafe\u0301 " * 100 + "needle " + "x " * 200
    s = hl.snippet(text, "needle", width=60)
    assert "needle" in s and "Café" in s


def test_timed_search_errors_are_knowledge_errors(wb):
    fill(wb, "s", {"a.txt": ["x y z"]})
    with pytest.raises(InvalidArgument, match="Type a query"):
        pg.timed_search(wb, "s", "  ")
    with pytest.raises(StoreNotFound):
        pg.timed_search(wb, "nope", "x")
    with pytest.raises(InvalidArgument):
        pg.timed_search(wb, "s", "x", k=0)


def test_store_map_is_deterministic_capped_and_keeps_the_hits(wb):
    fill(wb, "s", {f"f{i}.txt": [f"text number {i} {j} words" for j in range(10)] for i in range(5)})
    vs = wb.vector_store("s")
    full = sm.store_map(vs)
    assert len(full.rows) == 50 and full.total == 50 and not full.sampled
    run = pg.timed_search(wb, "s", "number 3", k=3)
    hit_ids = [h.id for h in run.hits]
    small = sm.store_map(vs, max_points=10, include=hit_ids)
    again = sm.store_map(vs, max_points=10, include=hit_ids)
    assert small.sampled and small.total == 50
    assert len(small.rows) == 10 + len(hit_ids)
    assert [r["id"] for r in small.rows] == [r["id"] for r in again.rows]
    assert [(r["x"], r["y"]) for r in small.rows] == [(r["x"], r["y"]) for r in again.rows]
    rows = pg.map_rows(small, run)
    assert sorted(r["rank"] for r in rows if r["role"] == "hit") == [1, 2, 3]
    (query,) = [r for r in rows if r["role"] == "query"]
    assert np.isfinite(query["x"]) and np.isfinite(query["y"])
    assert {r["file"] for r in rows if r["role"] != "query"} <= {f"f{i}.txt" for i in range(5)}
    assert all(r["label"] == r["file"] for r in rows)  # short names stay whole


def test_a_cached_map_takes_a_searchs_hits_without_projecting_again(wb):
    fill(wb, "s", {f"f{i}.txt": [f"text number {i} {j} words" for j in range(10)] for i in range(5)})
    vs = wb.vector_store("s")
    base = sm.store_map(vs, max_points=2)  # the cached map: a sample of 2 of the 50 chunks
    run = pg.timed_search(wb, "s", "number 3", k=3)
    hit_ids = [h.id for h in run.hits]
    outside = [i for i in hit_ids if str(i) not in {r["id"] for r in base.rows}]
    assert len(outside) >= 1  # 3 hits, 2 sampled chunks
    smap = sm.with_points(base, vs, hit_ids)
    assert smap.projection is base.projection and smap.total == 50 and smap.sampled
    assert [r["id"] for r in smap.rows[:2]] == [r["id"] for r in base.rows]  # the sample as it was
    assert {r["id"] for r in smap.rows} == {r["id"] for r in base.rows} | {str(i) for i in hit_ids}
    points = {str(p.id): p for p in vs.collection.retrieve(outside, with_vectors=True)}
    for r in smap.rows[2:]:  # each added hit where the base projection puts its vector
        x, y = base.projection.project(np.asarray([points[r["id"]].vector], dtype=np.float64))[0]
        assert (r["x"], r["y"]) == pytest.approx((x, y)) and r["label"] == r["file"]
    assert sorted(r["rank"] for r in pg.map_rows(smap, run) if r["role"] == "hit") == [1, 2, 3]
    assert sm.with_points(smap, vs, hit_ids) is smap  # nothing missing: the same map


def test_map_legend_names_are_short_distinct_and_keep_the_extension():
    assert sm.short_name("notes.md") == "notes.md"
    long = "ch02-00-guessing-game-tutorial.md"
    short = sm.short_name(long)
    assert len(short) == sm.LABEL_CHARS and short.startswith("ch02-00-guessing")
    assert short.endswith("torial.md") and "…" in short
    names = ["ch17-01-futures-and-syntax-part-one.md", "ch17-01-futures-and-syntax-part-two.md", "a.md", long]
    labels = sm.short_names(names)
    assert set(labels) == set(names) and len(set(labels.values())) == len(names)  # two colours never merge
    assert all(len(label) <= sm.LABEL_CHARS + 4 for label in labels.values()) and labels["a.md"] == "a.md"


def test_store_map_of_an_empty_store(wb):
    wb.create_store("empty")
    smap = sm.store_map(wb.vector_store("empty"))
    assert smap.rows == [] and smap.projection is None and smap.place(np.ones(16)) is None
    assert pg.payload_fields(wb.vector_store("empty")) == []


def test_payload_fields_lists_what_a_filter_can_use(wb):
    fill(wb, "s", {"a.txt": ["one", "two"]})
    fields = pg.payload_fields(wb.vector_store("s"))
    assert {"file_name", "page", "lang", "chunk_index"} <= set(fields) and "text" not in fields
