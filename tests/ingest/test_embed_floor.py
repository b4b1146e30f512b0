"""The documents' path of the bundled model: length-sorted batches on a session of our own, the same
vectors as fastembed's, the thread settings applied, nothing from the network."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from knowledge.embeddings import BUNDLED_MODEL_NAME, BundledEmbedder, FastEmbedEmbedder
from knowledge.embeddings._pooled import MeanPooledEncoder, length_order, session_options
from knowledge.embeddings.bundled import ensure_bundled_model
from knowledge.ingest.chunker import chunk_document, embedding_text
from knowledge.ingest.readers import read_document
from tests.helpers.env import CORPUS

BOOK = CORPUS / "md" / "rust-book"


def test_length_order_sorts_ascending_and_keeps_ties_in_input_order():
    lengths = [5, 2, 9, 2, 5, 1]
    order = length_order(lengths)
    assert order.tolist() == [5, 1, 3, 0, 4, 2]
    results = np.array(lengths)[order] * 10  # a result per sorted item ...
    out = np.empty_like(results)
    out[order] = results  # ... put back where each came from
    assert out.tolist() == [50, 20, 90, 20, 50, 10]


def test_session_options_carry_the_thread_counts_and_every_optimisation():
    import onnxruntime as ort

    options = session_options(1, 1)
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
    assert session_options(None).intra_op_num_threads == 0  # ONNX Runtime: one per core
    with pytest.raises(ValueError, match="inter_op_threads"):
        session_options(2, 0)
    with pytest.raises(ValueError, match="intra_op_threads"):
        session_options(-1)


def test_bundled_embedder_refuses_thread_counts_below_one(tmp_path):
    with pytest.raises(ValueError, match="threads"):
        BundledEmbedder(tmp_path, threads=0)
    with pytest.raises(ValueError, match="inter_op_threads"):
        BundledEmbedder(tmp_path, inter_op_threads=0)


# -- with the real model -------------------------------------------------------------------------------
def _book_chunks(model: BundledEmbedder, chapters: int = 2) -> list[str]:
    """Real chunk texts: the first Rust book chapters cut by the product's chunker at 192/48."""
    files = sorted(BOOK.glob("ch0*.md"))[:chapters]
    if not files:
        pytest.skip(f"the test corpus is not here ({BOOK}; KNOWLEDGE_TEST_CORPUS)")
    return [
        embedding_text(chunk.text, chunk.heading)
        for path in files
        for chunk in chunk_document(read_document(path), model, 192, 48).chunks
    ]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def model(models_dir) -> BundledEmbedder:
    embedder = BundledEmbedder(models_dir, batch_size=8, threads=1, inter_op_threads=1)
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
def book(model) -> list[str]:
    texts = _book_chunks(model)
    lengths = [model.count_tokens(t) for t in texts]
    assert len(set(lengths)) > 5 and length_order(lengths).tolist() != list(range(len(texts)))  # sorting moves them
    return texts[:24]


@pytest.mark.model
@pytest.mark.slow
def test_documents_come_back_in_input_order_with_each_texts_own_vector(model, book):
    mixed = [book[i] for i in np.random.default_rng(3).permutation(len(book))]
    batched = model.embed_documents(mixed)  # 3 batches of 8, each from the length-sorted order
    singles = np.stack([model.embed_documents([text])[0] for text in mixed])  # no padding at all
    assert batched.shape == (len(mixed), 384) and batched.dtype == np.float32
    np.testing.assert_allclose((batched * singles).sum(axis=1), 1.0, atol=1e-5)
    assert float(batched[0] @ batched[1]) < 0.99  # different texts, different rows


@pytest.mark.model
@pytest.mark.slow
def test_our_session_gives_fastembeds_vectors_on_real_chunks(model, models_dir, book):
    ours = model.embed_documents(book)
    fastembed_model = model._loaded()  # the queries' fastembed session, as documents used before
    theirs = np.stack(list(fastembed_model.passage_embed(book, batch_size=32)))  # unsorted batches
    np.testing.assert_allclose((ours * theirs).sum(axis=1), 1.0, atol=1e-5)
    # fastembed's own path for catalog models (now also length-sorted) on the same files agrees too
    catalog_path = FastEmbedEmbedder(
        BUNDLED_MODEL_NAME, models_dir, batch_size=16, specific_model_path=ensure_bundled_model(models_dir), threads=1
    )
    np.testing.assert_allclose((catalog_path.embed_documents(book) * ours).sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.slow
@pytest.mark.model
def test_the_documents_session_has_the_thread_settings_asked_for(model):
    model.embed_documents(["Ownership is Rust's most unique feature."])
    encoder = model._batch_model
    assert isinstance(encoder, MeanPooledEncoder)
    applied = encoder.session.get_session_options()
    assert (applied.intra_op_num_threads, applied.inter_op_num_threads) == (1, 1)
    assert encoder.session.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.model
@pytest.mark.slow
def test_the_documents_session_loads_from_the_wheel_without_the_network(models_dir, monkeypatch):
    ensure_bundled_model(models_dir)  # assembled from the installed packages before the network goes
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access in a test that must stay offline")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    embedder = BundledEmbedder(Path(models_dir), threads=2, inter_op_threads=1)
    vectors = embedder.embed_documents(["The borrow checker", "Lifetimes"])
    assert vectors.shape == (2, 384) and attempts == []
    assert embedder._batch_model.session.get_session_options().intra_op_num_threads == 2


@pytest.mark.model
@pytest.mark.slow
def test_an_encoder_truncates_at_its_window(model, models_dir):
    encoder = MeanPooledEncoder(
        ensure_bundled_model(models_dir) / "model.onnx", model._loaded().model.tokenizer, 16, intra_op_threads=1
    )
    long = " ".join(["borrow"] * 100)
    assert [len(e.ids) for e in encoder.encode([long, "short"])] == [16, 3]
    cut = encoder.embed([long], batch_size=4)
    same = encoder.embed([" ".join(["borrow"] * 14)], batch_size=4)  # 14 words + [CLS] + [SEP] = 16
    np.testing.assert_allclose(cut, same, atol=1e-6)
