"""BM25 retrieval, reciprocal rank fusion and hybrid search in the workbench (memory backend)."""

from __future__ import annotations

import numpy as np
import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.errors import ConfigError, InvalidArgument
from knowledge.service.fusion import RRF_K, LexicalIndex, reciprocal_rank_fusion
from knowledge.text.analysis import analyzer
from knowledge.vectorstore.base import Point
from knowledge.vectorstore.lexical import K1, B
from knowledge.vectorstore.scoring import vector_scores
from knowledge.workbench import Workbench


# -- the analyzer -----------------------------------------------------------------------------------
def test_terms_are_lowercased_stemmed_and_skip_stop_words():
    assert analyzer().terms("Iterating over the Vectors!") == ["iter", "over", "vector"]
    assert analyzer().terms("What is the difference between panic! and Result?") == [
        "what",
        "differ",
        "between",
        "panic",
        "result",
    ]  # Lucene's English stop words


def test_a_code_identifier_is_a_term_whole_beside_its_parts():
    assert analyzer().terms("How do I use unwrap_or_else?") == ["how", "do", "i", "use", "unwrap", "els", "unwrap_or_else"]
    assert analyzer().terms("macro_rules! and String::from") == [
        "macro",
        "rule",
        "string",
        "from",
        "macro_rules",
        "string::from",
    ]
    assert analyzer().terms("the _ placeholder, __init__ and _private") == ["placehold", "init", "privat"]
    assert analyzer().terms("Use `unwrap_or_else`.") == analyzer().terms("Use unwrap_or_else.")


def test_ligatures_and_full_width_letters_fold_to_plain_ones():
    assert analyzer().terms("the ﬁrst ｆｉｌｅ") == ["first", "file"]


def test_cjk_text_becomes_characters_and_bigrams():
    assert analyzer().terms("東京タワー") == ["東", "京", "タ", "ワ", "ー", "東京", "京タ", "タワ", "ワー"]
    assert analyzer().terms("Rust言語") == ["rust", "言", "語", "言語"]


# -- the index --------------------------------------------------------------------------------------
def points(texts, **payload):
    return [
        Point(f"f:{i}", np.zeros(0, np.float32), {"text": t, "file_id": payload.get("file_id", "f"), "chunk_index": i})
        for i, t in enumerate(texts)
    ]


DOCS = [
    "Rust groups errors into recoverable and unrecoverable errors.",
    "The panic! macro stops execution; Result<T, E> lets the caller recover.",
    "Vectors store values of the same type next to each other in memory.",
    "A closure captures values from its environment.",
]


def test_a_query_naming_an_identifier_ranks_the_passage_that_names_it_first():
    idx = LexicalIndex.from_points(
        points(
            [
                "Call unwrap, or else return the error; else branches come later. Unwrap it, unwrap it again.",
                "The unwrap_or_else method takes a closure.",
                "Nothing about it here at all.",
            ]
        )
    )
    assert [h.id for h in idx.search("unwrap_or_else", k=2)] == ["f:1", "f:0"]


def test_bm25_ranks_the_chunk_with_the_rare_words_first():
    idx = LexicalIndex.from_points(points(DOCS))
    hits = idx.search("panic! versus Result", k=4)
    assert [h.id for h in hits][:1] == ["f:1"]
    assert all(h.score > 0 for h in hits) and hits == sorted(hits, key=lambda h: -h.score)


def test_a_query_sharing_no_word_finds_nothing():
    idx = LexicalIndex.from_points(points(DOCS))
    assert idx.search("photosynthesis in leaves", k=3) == []
    assert idx.search("the and of", k=3) == []  # stop words only
    assert LexicalIndex().search("panic", k=3) == []


def test_the_heading_counts_as_text():
    pts = points(["Some words here.", "Other words here."])
    pts[1].payload["heading"] = "Error Handling > Unrecoverable"
    assert [h.id for h in LexicalIndex.from_points(pts).search("unrecoverable", k=2)] == ["f:1"]


def test_where_filters_before_ranking():
    pts = [
        *points(DOCS),
        Point("g:0", np.zeros(0, np.float32), {"text": "panic panic panic Result", "file_id": "g", "chunk_index": 0}),
    ]
    idx = LexicalIndex.from_points(pts)
    assert idx.search("panic Result", k=1)[0].id == "g:0"
    only_f = idx.search("panic Result", k=5, where={"file_id": "f"})
    assert [h.id for h in only_f] == ["f:1"]
    assert idx.search("panic", k=5, where={"file_id": "nobody"}) == []


def test_scores_are_lucene_bm25_with_collection_wide_statistics():
    docs = ["apple banana", "apple apple cherry", "banana cherry cherry date"]
    pts = [
        Point(f"{i}:0", np.zeros(0, np.float32), {"text": t, "file_id": str(i), "chunk_index": 0})
        for i, t in enumerate(docs)
    ]
    idx = LexicalIndex.from_points(pts)
    hits = {h.id: h.score for h in idx.search("apple", k=3)}
    n, df, avg = 3, 2, (2 + 3 + 4) / 3
    idf = np.log(1 + (n - df + 0.5) / (df + 0.5))

    def bm25(tf, length):
        return idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))

    assert hits == {"0:0": pytest.approx(bm25(1, 2)), "1:0": pytest.approx(bm25(2, 3))}
    # A filter keeps the collection's statistics: the same score for the same chunk.
    only = idx.search("apple", k=3, where={"file_id": "1"})
    assert [(h.id, h.score) for h in only] == [("1:0", pytest.approx(bm25(2, 3)))]


def test_refresh_rebuilds_only_the_files_that_changed():
    store = {"a": points(DOCS[:2], file_id="a"), "b": points(DOCS[2:], file_id="b")}
    idx = LexicalIndex()
    assert idx.refresh({"a": 1, "b": 1}, store.get) == 2
    assert idx.refresh({"a": 1, "b": 1}, store.get) == 0
    store["b"] = points(["Sourdough bread rises slowly."], file_id="b")
    assert idx.refresh({"a": 1, "b": 2}, store.get) == 1
    assert [h.payload["file_id"] for h in idx.search("sourdough", k=2)] == ["b"]
    assert idx.refresh({"a": 1}, store.get) == 0  # b is gone
    assert idx.search("sourdough", k=2) == [] and len(idx) == 2


def test_reciprocal_rank_fusion_sums_one_over_k_plus_rank():
    fused = reciprocal_rank_fusion(["a", "b", "c"], ["c", "a"])
    assert fused["a"] == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert fused["b"] == pytest.approx(1 / (RRF_K + 2))
    assert fused["c"] == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert max(fused, key=fused.get) == "a"


@pytest.mark.parametrize("distance", ["cosine", "dot", "euclid", "manhattan"])
def test_vector_scores_match_the_definitions(distance):
    rng = np.random.default_rng(3)
    q, m = rng.normal(size=8), rng.normal(size=(5, 8))
    want = {
        "cosine": m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q)),
        "dot": m @ q,
        "euclid": np.linalg.norm(m - q, axis=1),
        "manhattan": np.abs(m - q).sum(axis=1),
    }[distance]
    np.testing.assert_allclose(vector_scores(distance, q, m), want, rtol=1e-5)


# -- hybrid search in the workbench -------------------------------------------------------------------
class BlindEmbedder(HashEmbedder):
    """Every text gets the same vector: the vector ranking carries no information at all."""

    def embed_documents(self, texts):
        out = super().embed_documents(texts)
        out[:] = 1 / np.sqrt(out.shape[1])
        return out

    def embed_query(self, text):
        return np.full(self.dimension, 1 / np.sqrt(self.dimension), np.float32)


@pytest.fixture
def wb(tmp_path):
    settings = load_settings(
        data_dir=tmp_path / "data", vector_store={"max_chunk_size_tokens": 40, "chunk_overlap_tokens": 0}
    )
    w = Workbench(settings, embedder_factory=lambda model: BlindEmbedder(dimension=16, max_tokens=48))
    w.create_store("notes")
    for i, text in enumerate(DOCS):
        w.ingest_file("notes", text.encode(), name=f"doc{i}.txt")
    yield w
    w.close()


def test_hybrid_finds_by_exact_words_what_the_vectors_cannot(wb):
    vector_only = wb.search("notes", "panic! versus Result", k=1, mode="vector")
    hybrid = wb.search("notes", "panic! versus Result", k=1)  # the default mode is hybrid
    assert vector_only[0].file_name == "doc0.txt"  # all tie; the first one stored wins
    assert hybrid[0].file_name == "doc1.txt"
    assert hybrid[0].lexical_score > 0 and hybrid[0].fused_score > 0
    assert hybrid[0].score == pytest.approx(1.0, abs=1e-5)  # still the cosine similarity
    assert vector_only[0].fused_score is None and vector_only[0].lexical_score is None


def test_lexical_mode_ranks_by_bm25_and_keeps_vector_scores(wb):
    hits = wb.search("notes", "closure environment", k=3, mode="lexical")
    assert [h.file_name for h in hits] == ["doc3.txt"]  # only one chunk shares a word
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].lexical_score > 0 and hits[0].fused_score is None


def test_hybrid_results_are_ordered_by_the_fused_score_and_filtered(wb):
    hits = wb.search("notes", "values in memory", k=4)
    fused = [h.fused_score for h in hits]
    assert fused == sorted(fused, reverse=True) and len(hits) == 4
    doc2 = wb.store_files("notes")
    target = next(f for f in doc2 if f.file_name == "doc2.txt")
    only = wb.search("notes", "values in memory", k=4, where={"file_id": target.file_id})
    assert [h.file_name for h in only] == ["doc2.txt"]


def test_the_threshold_applies_to_the_vector_score(wb):
    assert wb.search("notes", "panic Result", k=3, score_threshold=1.01) == []
    assert len(wb.search("notes", "panic Result", k=3, score_threshold=0.99)) == 3


def test_the_word_index_follows_ingestion_and_deletion(wb):
    assert wb.search("notes", "sourdough", k=1, mode="lexical") == []
    r = wb.ingest_file("notes", b"Sourdough needs a starter and patience.", name="bread.txt")
    assert [h.file_name for h in wb.search("notes", "sourdough", k=1, mode="lexical")] == ["bread.txt"]
    wb.delete_file("notes", r.file_id)
    assert wb.search("notes", "sourdough", k=1, mode="lexical") == []  # nothing stale


def test_the_setting_chooses_the_default_mode(tmp_path):
    settings = load_settings(data_dir=tmp_path / "d", search={"mode": "vector"})
    w = Workbench(settings, embedder_factory=lambda model: BlindEmbedder(dimension=16, max_tokens=48))
    try:
        w.create_store("s")
        w.ingest_file("s", DOCS[1].encode(), name="a.txt")
        assert w.search("s", "panic", k=1)[0].fused_score is None
        assert w.search("s", "panic", k=1, mode="hybrid")[0].fused_score is not None
    finally:
        w.close()


def test_bad_modes_are_clear_errors(wb, monkeypatch):
    with pytest.raises(InvalidArgument, match="Unknown search mode"):
        wb.search("notes", "panic", mode="fuzzy")
    monkeypatch.setenv("KNOWLEDGE_SEARCH__MODE", "fuzzy")
    with pytest.raises(ConfigError, match=r"search\.mode"):
        load_settings()
