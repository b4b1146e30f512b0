"""Fast tests of the embeddings package: the fake embedder, input validation, the factory.

Nothing here loads a real model; tests/ingest/test_bundled_model.py does.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from knowledge.config import load_settings
from knowledge.embeddings import (
    BUNDLED_MODEL_NAME,
    BundledEmbedder,
    Embedder,
    FastEmbedEmbedder,
    HashEmbedder,
    create_embedder,
    supported_models,
)
from knowledge.errors import ConfigError, InvalidArgument

TEXTS = [
    "The cat sits on the mat.",
    "A cat sat on a mat, purring.",
    "Quarterly tax filings are due in April.",
]


@pytest.fixture
def fake() -> HashEmbedder:
    return HashEmbedder(dimension=64, max_tokens=64)


@pytest.fixture
def settings_with(tmp_path):
    """``settings_with(**embeddings)``: settings in a fresh data folder (conftest isolates the env)."""
    return lambda **embeddings: load_settings(data_dir=tmp_path / "data", embeddings=embeddings)


# -- the fake embedder --------------------------------------------------------------------------------
def test_fake_is_an_embedder_with_its_name(fake):
    assert isinstance(fake, Embedder)
    assert fake.name == "fake/hash-64"
    assert (fake.dimension, fake.max_tokens, fake.special_tokens) == (64, 64, 0)


def test_fake_vectors_are_float32_unit_rows_in_order(fake):
    matrix = fake.embed_documents(TEXTS)
    assert matrix.shape == (3, 64) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, rtol=1e-6)
    for i, text in enumerate(TEXTS):
        np.testing.assert_array_equal(matrix[i], fake.embed_documents([text])[0])
    query = fake.embed_query(TEXTS[0])
    assert query.shape == (64,) and query.dtype == np.float32
    np.testing.assert_array_equal(query, matrix[0])


def test_fake_scores_shared_words_higher(fake):
    cat_mat, cat_mat_2, tax = fake.embed_documents(TEXTS)
    assert cat_mat @ cat_mat_2 > tax @ cat_mat + 0.2
    assert cat_mat @ cat_mat_2 > tax @ cat_mat_2 + 0.2


def test_fake_is_case_insensitive_and_ignores_punctuation(fake):
    a, b = fake.embed_documents(["Cats, dogs!", "cats dogs"])
    np.testing.assert_array_equal(a, b)


@pytest.mark.processes
def test_fake_is_stable_across_processes(fake):
    # blake2b, not the salted hash(): another process with another hash seed gives the same vector.
    code = (
        "import json; from knowledge.embeddings import HashEmbedder;"
        "print(json.dumps(HashEmbedder(64).embed_query('stable across processes').tolist()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    in_other_process = np.array(json.loads(out.stdout), dtype=np.float32)
    np.testing.assert_array_equal(in_other_process, fake.embed_query("stable across processes"))


def test_fake_text_without_words_gets_the_fixed_unit_vector(fake):
    a, b = fake.embed_documents(["!!! ...", "?"])
    assert np.isfinite(a).all()
    np.testing.assert_allclose(a, np.full(64, 1 / 8, dtype=np.float32))
    np.testing.assert_array_equal(a, b)


def test_fake_truncates_at_max_tokens():
    small = HashEmbedder(dimension=64, max_tokens=4)
    a, b, c = small.embed_documents(["one two three four five", "one two three four six", "one two three seven"])
    np.testing.assert_array_equal(a, b)  # tokens past the fourth do not count
    assert not np.array_equal(a, c)


@pytest.mark.parametrize(
    "text",
    [
        "Hello, world!",
        "Café naïve résumé",
        "東京タワーは高い。",
        "I ❤️ 🐍 python 👩‍👩‍👧 ok",
        "  spaced\tout\n",
        "",
    ],
)
def test_fake_token_offsets_round_trip(fake, text):
    tokens = fake.tokenize(text)
    assert all(text[t.start : t.end] == t.text for t in tokens)
    assert all(a.end <= b.start for a, b in itertools.pairwise(tokens))
    assert fake.count_tokens(text) == len(tokens)
    assert "".join(t.text for t in tokens) == "".join(text.split())


def test_fake_token_ids_are_stable_and_uncased(fake):
    first, second = fake.tokenize("Word word")
    assert first.id == second.id
    assert first.id != fake.tokenize("other")[0].id


def test_fake_rejects_bad_sizes():
    with pytest.raises(InvalidArgument, match="dimension"):
        HashEmbedder(dimension=0)


# -- input validation, the same for every embedder -------------------------------------------------
BAD_BATCHES = [
    ([], "empty"),
    ("just a string", "single str"),
    (["fine", 3], r"texts\[1\] is a int"),
    (["fine", "ok", "  \n"], r"texts\[2\] is blank"),
    (["", "fine"], r"texts\[0\] is blank"),
    (None, "NoneType"),
]


@pytest.mark.parametrize(("texts", "message"), BAD_BATCHES)
def test_fake_rejects_bad_batches(fake, texts, message):
    with pytest.raises(InvalidArgument, match=message):
        fake.embed_documents(texts)


@pytest.mark.parametrize("query", ["", "   ", None, 42])
def test_fake_rejects_bad_queries(fake, query):
    with pytest.raises(InvalidArgument):
        fake.embed_query(query)


def test_fake_rejects_non_str_tokenize(fake):
    with pytest.raises(InvalidArgument, match="bytes"):
        fake.tokenize(b"bytes")


@pytest.mark.parametrize(("texts", "message"), BAD_BATCHES)
def test_real_embedder_validates_before_loading(tmp_path, texts, message):
    # A model that is not in the cache: validation must answer first, without trying to load it.
    embedder = FastEmbedEmbedder("BAAI/bge-small-en-v1.5", tmp_path)
    with pytest.raises(InvalidArgument, match=message):
        embedder.embed_documents(texts)
    with pytest.raises(InvalidArgument):
        embedder.embed_query(" ")
    assert not embedder.loaded


# -- the factory ----------------------------------------------------------------------------------------
def test_factory_gives_the_bundled_model_by_default_without_loading_it(settings_with):
    settings = settings_with(batch_size=12)
    embedder = create_embedder(settings)
    assert isinstance(embedder, BundledEmbedder)
    assert embedder.name == BUNDLED_MODEL_NAME and embedder.dimension == 384
    assert embedder.batch_size == 12 and embedder.cache_dir == settings.models_dir
    assert not embedder.loaded and not settings.models_dir.exists()


def test_factory_gives_a_catalog_model(settings_with):
    settings = settings_with(model="baai/BGE-small-en-v1.5", allow_download=True, threads=1)
    embedder = create_embedder(settings)
    assert type(embedder) is FastEmbedEmbedder
    assert embedder.name == "BAAI/bge-small-en-v1.5"  # the catalog's spelling
    assert embedder.dimension == 384 and embedder.allow_download and embedder.threads == 1
    assert embedder.cache_dir == settings.models_dir and not embedder.loaded


def test_factory_rejects_an_unknown_model(settings_with):
    with pytest.raises(ConfigError, match=r"not in fastembed's catalog.*supported_models\(\)") as info:
        create_embedder(settings_with(model="BAAI/bge-smal-en-v1.5"))
    assert "Did you mean BAAI/bge-small-en-v1.5" in str(info.value)


@pytest.mark.parametrize("name", ["fake/hash-8", "Fake/Hash-8", " fake/hash-8 "])
def test_factory_gives_the_fake_model_by_name(settings_with, name):
    embedder = create_embedder(settings_with(model=name))
    assert type(embedder) is HashEmbedder
    assert (embedder.name, embedder.dimension) == ("fake/hash-8", 8)
    np.testing.assert_array_equal(embedder.embed_query("cat on a mat"), HashEmbedder(8).embed_query("cat on a mat"))


def test_factory_rejects_a_fake_model_without_a_dimension(settings_with):
    with pytest.raises(ConfigError, match="at least 1"):
        create_embedder(settings_with(model="fake/hash-0"))
    with pytest.raises(ConfigError, match="not in fastembed's catalog"):  # no dimension: not the fake
        create_embedder(settings_with(model="fake/hash-"))


def test_the_fake_model_setting_reaches_the_workbench_and_survives_a_restart(monkeypatch, tmp_path):
    """KNOWLEDGE_EMBEDDINGS__MODEL=fake/hash-<d> is the tests' seam into the app: the default
    template, and a saved template naming the fake, keep working in a new Workbench, with or
    without the variable."""
    from knowledge.service.templates import make_template
    from knowledge.workbench import Workbench

    monkeypatch.setenv("KNOWLEDGE_EMBEDDINGS__MODEL", "fake/hash-16")
    doc = tmp_path / "cats.md"
    doc.write_text("# Cats\n\nThe cat sits on the mat and purrs.\n\n# Bread\n\nKnead the dough, let it rise.\n")
    wb = Workbench(load_settings())
    try:
        assert wb.ingest_file("Notes", doc).ok
        wb.save_template(make_template(name="hashed", embedding_model="fake/hash-32"))
        assert wb.ingest_file("Hashed", doc, template="hashed").ok
        assert wb.embedder().name == "fake/hash-16" and "fake/hash-16" in wb.loaded_models()
    finally:
        wb.close()
    for env in ("fake/hash-16", None):  # the same settings, then the bundled default again
        if env is None:
            monkeypatch.delenv("KNOWLEDGE_EMBEDDINGS__MODEL")
        wb = Workbench(load_settings())
        try:
            notes, hashed = wb.get_store("Notes"), wb.get_store("Hashed")
            assert (notes.embedding_model, notes.dimension) == ("fake/hash-16", 16)
            assert (hashed.embedding_model, hashed.dimension) == ("fake/hash-32", 32)
            for store in ("Notes", "Hashed"):
                hits = wb.search(store, "cat mat", k=1, mode="vector")
                assert hits and "cat sits on the mat" in hits[0].text
            again = tmp_path / "more.md"
            again.write_text(f"# More\n\nThe dough rises overnight ({env}).\n")
            assert wb.ingest_file("Hashed", again, template="hashed").ok
            assert wb.embedder("fake/hash-32").dimension == 32
            assert not any(m == BUNDLED_MODEL_NAME for m in wb.loaded_models())
        finally:
            wb.close()


def test_supported_models_lists_the_catalog():
    names = supported_models()
    assert BUNDLED_MODEL_NAME in names and "BAAI/bge-small-en-v1.5" in names
    assert names == sorted(names)
