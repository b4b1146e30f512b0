"""What the search page asks instead of deciding itself: highlighting (knowledge.text.highlight), the map
(knowledge.pagemodels.storemap), the threshold, the compare filter and the best score (knowledge.pagemodels.playground),
and one parser for values typed by a person."""

from __future__ import annotations

import math
from datetime import UTC

import pytest

from knowledge.config import load_settings
from knowledge.embeddings.fake import HashEmbedder
from knowledge.pagemodels import playground, storemap
from knowledge.text import highlight, render
from knowledge.vectorstore.store import Chunk
from knowledge.workbench import Workbench


def test_highlighting_and_the_map_have_one_home_each():
    # no aliases: a name is in the public face (__all__) of the module that defines it only
    for name in (
        "escape_markdown",
        "highlight",
        "query_terms",
        "snippet",
        "store_map",
        "pca_2d",
        "sample_points",
        "Projection",
        "StoreMap",
    ):
        assert name not in playground.__all__, name
    for name in ("escape_markdown", "highlight", "query_terms", "match_spans", "STOPWORDS"):
        assert name not in render.__all__, name
        assert name in highlight.__all__, name
    assert "map_rows" in playground.__all__ and "map_rows" not in storemap.__all__
    assert highlight.highlight("The *borrow* checker", "borrow") == ("The &#42;<mark>borrow</mark>&#42; checker")
    assert render.render_html("a **borrow**", "borrow", file_name="x.md").count("<mark>borrow</mark>") == 1


@pytest.mark.parametrize(
    "raw, value",
    [
        ("2024", 2024),
        ("2.5", 2.5),
        ("true", True),
        ("null", None),
        ('"2024"', "2024"),
        ("billing", "billing"),
        ("[1, 2]", "[1, 2]"),
        ('{"a": 1}', '{"a": 1}'),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
    ],
)
def test_one_parser_for_values_typed_by_a_person(raw, value):
    got = playground.parse_scalar(raw)
    assert got == value and type(got) is type(value)


def test_the_threshold_starts_at_the_setting_for_similarities_only():
    assert playground.default_threshold("cosine", 0.3) == 0.3
    assert playground.default_threshold("dot", 0.3) == 0.3
    assert playground.default_threshold("euclid", 0.3) is None
    assert playground.default_threshold("manhattan", 0.3) is None
    assert playground.default_threshold("cosine", None) is None


def test_the_compare_store_matches_the_chosen_file_by_name():
    where = {"file_id": "abc", "page": 2}
    assert playground.compare_where(where, "a.pdf") == {"page": 2, "file_name": "a.pdf"}
    assert where == {"file_id": "abc", "page": 2}  # the first store's filter is left as it was
    assert playground.compare_where({"page": 2}, None) == {"page": 2}
    assert playground.compare_where(None, None) is None


@pytest.fixture
def wb(tmp_path):
    w = Workbench(load_settings(data_dir=tmp_path / "data"), embedder_factory=lambda model: HashEmbedder(dimension=16))
    yield w
    w.close()


def _fill(wb: Workbench, store: str, texts: dict[str, list[str]], template: str = "default") -> None:
    emb = wb.embedder()
    wb.create_store(store, template)
    vs = wb.vector_store(store)
    for name, chunks in texts.items():
        vectors = emb.embed_documents(chunks)
        vs.replace_file(f"id-{name}", [Chunk(t, vectors[i]) for i, t in enumerate(chunks)], file_name=name)


def test_the_best_score_follows_the_distance(wb):
    _fill(wb, "s", {"a.txt": ["apples and pears", "the weather today", "a long walk"]})
    run = playground.timed_search(wb, "s", "apples", k=3)
    assert run.best_top_score == max(h.score for h in run.top)
    as_distance = playground.SearchRun("s", "q", "euclid", [], run.top, run.query_vector, 0.0, 0.0)
    assert as_distance.best_top_score == min(h.score for h in run.top)
    empty = playground.SearchRun("s", "q", "cosine", [], [], run.query_vector, 0.0, 0.0)
    assert empty.best_top_score is None and not empty.nothing_matched_well


def test_the_map_version_changes_when_the_files_change(wb):
    _fill(wb, "s", {"a.txt": ["one", "two"]})
    before = storemap.store_version(wb, "s")
    assert before == storemap.store_version(wb, "s")
    _fill(wb, "s", {"b.txt": ["three"]})
    after = storemap.store_version(wb, "s")
    assert after != before and dict(after[3]) == {"id-a.txt": 2, "id-b.txt": 1}
    smap = storemap.store_map(wb.vector_store("s"))
    assert smap.total == 3 and all(math.isfinite(r["x"]) for r in smap.rows)


def _run(run_id: str, **metrics: float):
    from datetime import datetime

    from knowledge.evaluation import EvalRun

    return EvalRun(run_id, "set", "sha", "s", "hybrid", 10, None, None, None, {}, dict(metrics), (), datetime.now(UTC), 0.0)


def test_the_evaluate_page_asks_for_weights_changes_and_the_best_run():
    from knowledge import evaluation as ev
    from knowledge.errors import InvalidArgument

    assert ev.parse_weights("1, 0.5; 0,0.5 ") == [0.0, 0.5, 1.0]
    for bad in ("", "a, b", "0.5, 2", "-1"):
        with pytest.raises(InvalidArgument, match="between 0 and 1"):
            ev.parse_weights(bad)
    before = _run("b", **{"MRR@10": 0.5, "recall@5": 0.6})
    after = _run("a", **{"MRR@10": 0.75, "recall@5": 0.5, "nDCG@10": 0.7})
    assert ev.metric_changes(before, after) == pytest.approx({"MRR@10": 0.25, "recall@5": -0.1})
    tie = _run("t", **{"MRR@10": 0.75, "recall@5": 0.9})
    assert ev.best_by_mrr([before, after, tie]) is tie and ev.best_by_mrr([before]) is before
    with pytest.raises(InvalidArgument):
        ev.best_by_mrr([])
